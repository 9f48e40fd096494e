//! Calls to the JSON API from the browser. Only the hydrated app makes them: the server renders
//! pages without per-user data, so that they stay cacheable.

use crate::api::{ErrorBody, ErrorCode};
use serde::{de::DeserializeOwned, Serialize};

/// A request that did not end in a 2xx: the API's error body, or a network failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub status: u16,
    pub body: ErrorBody,
    /// Seconds from a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl Failure {
    /// The refusal in the page's language (see [`refusal_text`]); the API's own message when
    /// the catalog has none for the code (those that name a field or a date).
    pub fn message(&self) -> String {
        refusal_text(Some(&self.body.error), None, self.retry_after)
            .unwrap_or_else(|| self.body.message.clone())
    }
}

/// A refusal's words in the page's language: `error.<code>` of its catalog, with `{secs}` from
/// `retry` (`Retry-After`); bad input naming `field` (a form's post sent back with `?error=…`)
/// says what the field needs (`form.invalid.<field>`, else `form.invalid`). `None` for no code, or
/// one the catalog does not have.
pub fn refusal_text(code: Option<&str>, field: Option<&str>, retry: Option<u64>) -> Option<String> {
    let code = code?;
    if let (ErrorCode::InvalidInput, Some(field)) = (code.parse::<ErrorCode>().ok()?, field) {
        let key = format!("form.invalid.{field}");
        let text = crate::i18n::tr(&key);
        return Some(if text == key {
            crate::i18n::tr("form.invalid")
        } else {
            text
        });
    }
    let key = format!("error.{code}");
    let secs = retry.unwrap_or(1).to_string();
    let text = crate::i18n::tr_with(&key, &[("secs", &secs)]);
    (text != key).then_some(text)
}

#[cfg(feature = "hydrate")]
mod imp {
    use super::*;
    use gloo_net::http::{Request, Response};

    fn network(e: impl std::fmt::Display) -> Failure {
        Failure {
            status: 0,
            retry_after: None,
            body: ErrorBody {
                error: "network".into(),
                message: crate::i18n::tr_with("error.network", &[("detail", &e.to_string())]),
            },
        }
    }

    async fn decode<R: DeserializeOwned>(resp: Response) -> Result<R, Failure> {
        let status = resp.status();
        if (200..300).contains(&status) {
            if status == 204 {
                return serde_json::from_str("null").map_err(network);
            }
            return resp.json::<R>().await.map_err(network);
        }
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.parse().ok());
        let body = resp
            .json::<ErrorBody>()
            .await
            .unwrap_or_else(|_| ErrorBody {
                error: "http".into(),
                message: format!("The server answered {status}."),
            });
        Err(Failure {
            status,
            body,
            retry_after,
        })
    }

    pub async fn get<R: DeserializeOwned>(url: &str) -> Result<R, Failure> {
        let resp = Request::get(url).send().await.map_err(network)?;
        decode(resp).await
    }

    pub async fn post<B: Serialize, R: DeserializeOwned>(
        url: &str,
        body: &B,
    ) -> Result<R, Failure> {
        let resp = Request::post(url)
            .json(body)
            .map_err(network)?
            .send()
            .await
            .map_err(network)?;
        decode(resp).await
    }

    /// A DELETE (with the empty JSON body every change of state carries); `204` is `Ok`.
    pub async fn delete(url: &str) -> Result<(), Failure> {
        let resp = Request::delete(url)
            .json(&serde_json::json!({}))
            .map_err(network)?
            .send()
            .await
            .map_err(network)?;
        if resp.ok() {
            return Ok(());
        }
        decode::<serde_json::Value>(resp).await.map(|_| ())
    }

    /// A POST that may be retried safely: the server answers a repeated key with its first answer.
    pub async fn post_with_key<B: Serialize, R: DeserializeOwned>(
        url: &str,
        body: &B,
        key: &str,
    ) -> Result<R, Failure> {
        let resp = Request::post(url)
            .header("Idempotency-Key", key)
            .json(body)
            .map_err(network)?
            .send()
            .await
            .map_err(network)?;
        decode(resp).await
    }
}

/// A form's post or a button's call, as a Leptos [`Action`](leptos::prelude::Action): its
/// `pending()` while it runs (the button disabled), its `value()` after (what the page says).
/// The server renders the action on any of its threads and never runs it (events fire in the
/// browser only), so the action must be `Send` there: no `Action::new_local`, whose value may
/// not be dropped on another thread than its own. In the browser a call's future is not `Send`
/// (the fetch API's), and a `SendWrapper` keeps it on the browser's one thread.
pub fn action<I, O, F, Fu>(call: F) -> leptos::prelude::Action<I, O>
where
    I: Send + Sync + 'static,
    O: Send + Sync + 'static,
    F: Fn(&I) -> Fu + Send + Sync + 'static,
    Fu: BrowserFuture<O>,
{
    #[cfg(feature = "hydrate")]
    return leptos::prelude::Action::new(move |input: &I| {
        send_wrapper::SendWrapper::new(call(input))
    });
    #[cfg(not(feature = "hydrate"))]
    leptos::prelude::Action::new(call)
}

/// What [`action`] runs: in the browser any future; elsewhere (the server, where it never runs)
/// a `Send` one, as the server's renderer needs.
#[cfg(feature = "hydrate")]
pub trait BrowserFuture<O>: std::future::Future<Output = O> + 'static {}
#[cfg(feature = "hydrate")]
impl<O, T: std::future::Future<Output = O> + 'static> BrowserFuture<O> for T {}
#[cfg(not(feature = "hydrate"))]
pub trait BrowserFuture<O>: std::future::Future<Output = O> + Send + 'static {}
#[cfg(not(feature = "hydrate"))]
impl<O, T: std::future::Future<Output = O> + Send + 'static> BrowserFuture<O> for T {}

#[cfg(not(feature = "hydrate"))]
mod imp {
    //! On the server these are never called (event handlers and effects run in the browser only);
    //! they exist so that components compile for both targets.
    use super::*;

    fn browser_only() -> Failure {
        Failure {
            status: 0,
            retry_after: None,
            body: ErrorBody {
                error: "browser_only".into(),
                message: "Runs in the browser only.".into(),
            },
        }
    }

    pub async fn get<R: DeserializeOwned>(_url: &str) -> Result<R, Failure> {
        Err(browser_only())
    }

    pub async fn post<B: Serialize, R: DeserializeOwned>(
        _url: &str,
        _body: &B,
    ) -> Result<R, Failure> {
        Err(browser_only())
    }

    pub async fn post_with_key<B: Serialize, R: DeserializeOwned>(
        _url: &str,
        _body: &B,
        _key: &str,
    ) -> Result<R, Failure> {
        Err(browser_only())
    }

    pub async fn delete(_url: &str) -> Result<(), Failure> {
        Err(browser_only())
    }
}

pub use imp::{delete, get, post, post_with_key};

/// A fresh `Idempotency-Key` (128 random bits as hex) for one write the page may retry.
pub fn new_key() -> String {
    #[cfg(feature = "hydrate")]
    {
        let mut bytes = [0u8; 16];
        if let Some(crypto) = web_sys::window().and_then(|w| w.crypto().ok()) {
            let _ = crypto.get_random_values_with_u8_array(&mut bytes);
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
    #[cfg(not(feature = "hydrate"))]
    String::new()
}
