//! The edge of every JSON request: content type, size, and decoding into typed input, each
//! rejected with the API's own error (415, 413, 400 naming the field).

use super::error::HttpRefusal;
use crate::domain::ApiError;
use app::api::BadId;
use axum::{
    extract::{FromRequest, Request},
    http::{header, HeaderMap, Method, StatusCode},
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;
use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

pub const MAX_BODY_BYTES: usize = 16 * 1024;

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// A request a browser sent on behalf of another site: `Sec-Fetch-Site` says so, or the
/// `Origin` is not this host (`null` included). Requests without either header (other
/// clients, older browsers) pass: SameSite=Lax cookies and the JSON content type, which a
/// cross-site form cannot send and a cross-site `fetch` may send only after a preflight this
/// server never grants, cover them.
pub(crate) fn cross_origin(headers: &HeaderMap) -> bool {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|site| {
        site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
    }) {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority);
    !matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

/// Every mutating API request must come from this site, say it is JSON (which also keeps
/// cross-site HTML forms out) and announce no more than 16 KiB: the refusal, if any.
fn refusal(req: &Request) -> Option<HttpRefusal> {
    let mutating = matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if mutating && cross_origin(req.headers()) {
        return Some(HttpRefusal::CrossOrigin);
    }
    if mutating && !is_json(req) {
        return Some(HttpRefusal::UnsupportedMediaType);
    }
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Some(HttpRefusal::PayloadTooLarge);
    }
    None
}

/// The extractors' own refusals (a query string axum cannot decode, a repeated query field, a
/// path segment that is not UTF-8…) come as `400 text/plain`.
fn plain_rejection(resp: &Response) -> bool {
    matches!(
        resp.status(),
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY
    ) && resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"))
}

/// Such a refusal as the API's JSON `400 invalid_input`, its explanation kept as the message.
async fn as_invalid_input(resp: Response) -> Response {
    let text = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .unwrap_or_default();
    let why = String::from_utf8_lossy(&text);
    // "Failed to deserialize query string: duplicate field `q`" → the field is named.
    let field = why
        .split('`')
        .nth(1)
        .filter(|f| !f.is_empty() && f.len() <= 64)
        .unwrap_or("request");
    ApiError::invalid(field, why.trim()).into_response()
}

/// Every API answer to a request that carried a cookie is the signed-in user's own: never
/// stored by a browser or a proxy, unless the handler said otherwise (the public reads set
/// their own caching).
fn no_store_when_signed_in(signed_in: bool, mut resp: Response) -> Response {
    if signed_in && !resp.headers().contains_key(header::CACHE_CONTROL) {
        resp.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("private, no-store"),
        );
    }
    resp
}

/// Whether a path is one the API's router answers: `/api`, or under it (`/api/` itself is the
/// site's, as the router nests it).
fn is_api(path: &str) -> bool {
    path.strip_prefix("/api")
        .is_some_and(|rest| rest.is_empty() || (rest.starts_with('/') && rest.len() > 1))
}

/// The API's edge, around every `/api` request, outside the router (startup/routes.rs says
/// why): a mutating request's origin, content type and announced size ([`refusal`], unless a
/// measurement leaves it out), the extractors' plain-text refusals turned into the API's JSON,
/// and `private, no-store` on the answers to a signed-in request. Other paths pass untouched.
/// One service of its own: it calls the router without cloning it or boxing a future, but for
/// the rare answer it rewrites.
#[derive(Clone, Copy)]
pub struct ApiEdgeLayer {
    pub require_json: bool,
}

impl<S> tower::Layer<S> for ApiEdgeLayer {
    type Service = ApiEdge<S>;

    fn layer(&self, inner: S) -> ApiEdge<S> {
        ApiEdge {
            inner,
            require_json: self.require_json,
        }
    }
}

#[derive(Clone)]
pub struct ApiEdge<S> {
    inner: S,
    require_json: bool,
}

impl<S> tower::Service<Request> for ApiEdge<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ApiAnswer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if !is_api(req.uri().path()) {
            return ApiAnswer::Passed {
                inner: self.inner.call(req),
            };
        }
        let signed_in = req.headers().contains_key(header::COOKIE);
        if self.require_json {
            if let Some(refusal) = refusal(&req) {
                return ApiAnswer::Refused {
                    answer: Some(no_store_when_signed_in(signed_in, refusal.into_response())),
                };
            }
        }
        ApiAnswer::Api {
            inner: self.inner.call(req),
            signed_in,
        }
    }
}

type Rewrite = Pin<Box<dyn Future<Output = Response> + Send>>;

pin_project_lite::pin_project! {
    /// [`ApiEdge`]'s answer.
    #[project = ApiAnswerProj]
    pub enum ApiAnswer<F> {
        Passed { #[pin] inner: F },
        Refused { answer: Option<Response> },
        Api { #[pin] inner: F, signed_in: bool },
        Rewriting { rewrite: Rewrite, signed_in: bool },
    }
}

impl<F> Future for ApiAnswer<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let rewrite = match self.as_mut().project() {
                ApiAnswerProj::Passed { inner } => return inner.poll(cx),
                ApiAnswerProj::Refused { answer } => {
                    return Poll::Ready(Ok(answer.take().expect("polled after its answer")))
                }
                ApiAnswerProj::Api { inner, signed_in } => {
                    let Ok(resp) = ready!(inner.poll(cx));
                    if !plain_rejection(&resp) {
                        return Poll::Ready(Ok(no_store_when_signed_in(*signed_in, resp)));
                    }
                    ApiAnswer::Rewriting {
                        rewrite: Box::pin(as_invalid_input(resp)),
                        signed_in: *signed_in,
                    }
                }
                ApiAnswerProj::Rewriting { rewrite, signed_in } => {
                    let resp = ready!(rewrite.as_mut().poll(cx));
                    return Poll::Ready(Ok(no_store_when_signed_in(*signed_in, resp)));
                }
            };
            self.set(rewrite);
        }
    }
}

/// A JSON body decoded into `T`; errors name the field (`quantity: invalid type …`).
pub struct AppJson<T>(pub T);

impl<T, S> FromRequest<S> for AppJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Response> {
        if !is_json(&req) {
            return Err(HttpRefusal::UnsupportedMediaType.into_response());
        }
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| HttpRefusal::PayloadTooLarge.into_response())?;
        decode(&bytes)
            .map(AppJson)
            .map_err(IntoResponse::into_response)
    }
}

/// The one id of a path (`/…/{id}`, `/…/{token}`): a [`SaleId`](app::api::SaleId) or a
/// [`Token`](app::api::Token) as `app::api` parses it, or the API's `400 invalid_input` before
/// the handler runs (a malformed id is bad input, not a missing page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPath<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for InPath<T>
where
    S: Send + Sync,
    T: std::str::FromStr<Err = BadId>,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<InPath<T>, ApiError> {
        // A segment that is not UTF-8 is as bad as a malformed one: the empty string stands
        // for it, and the id's own rule refuses it with its own field and reason.
        let raw = axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(raw)| raw)
            .unwrap_or_default();
        Ok(InPath(raw.parse::<T>()?))
    }
}

/// A body taken as any JSON first (so that a route can answer `404` for a sale that is not the
/// caller's before it looks at the body), decoded with [`decode`]'s errors.
pub fn decode_value<T: DeserializeOwned>(body: &serde_json::Value) -> Result<T, ApiError> {
    decode(&serde_json::to_vec(body).unwrap_or_default())
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let why = describe(&inner);
        if let Some(field) = why
            .strip_prefix("missing field `")
            .and_then(|r| r.strip_suffix('`'))
        {
            ApiError::invalid(field, "is required")
        } else if inner.is_syntax() || inner.is_eof() {
            ApiError::InvalidInput(format!("body: malformed JSON ({why})"))
        } else if path.is_empty() || path == "." || path == "?" {
            ApiError::InvalidInput(format!("body: {why}"))
        } else {
            ApiError::invalid(&path, why)
        }
    })?;
    Ok(value)
}

/// serde's message without its "at line 1 column 9" tail, which means nothing to an API client.
fn describe(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Sample {
        username: String,
        quantity: u32,
    }

    #[test]
    fn the_api_edge_takes_the_paths_the_api_router_answers() {
        for api in ["/api", "/api/me", "/api/activities/7/buy", "/api/nope/"] {
            assert!(is_api(api), "{api}");
        }
        for site in [
            "/",
            "/api/",
            "/apis",
            "/apix/me",
            "/pkg/api",
            "/activities/7",
        ] {
            assert!(!is_api(site), "{site}");
        }
    }

    fn message(e: ApiError) -> String {
        match e {
            ApiError::InvalidInput(m) => m,
            other => panic!("expected invalid_input, got {other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let m = message(decode::<Sample>(br#"{"username":"ann","quantity":"x"}"#).unwrap_err());
        assert!(m.starts_with("quantity:"), "{m}");
    }

    #[test]
    fn a_negative_number_names_the_field() {
        let m = message(decode::<Sample>(br#"{"username":"ann","quantity":-1}"#).unwrap_err());
        assert!(m.starts_with("quantity:"), "{m}");
    }

    #[test]
    fn a_missing_field_is_named() {
        let m = message(decode::<Sample>(br#"{"quantity":1}"#).unwrap_err());
        assert_eq!(m, "username: is required");
    }

    #[test]
    fn malformed_json_is_reported_on_the_body() {
        let m = message(decode::<Sample>(b"{not json").unwrap_err());
        assert!(m.starts_with("body:"), "{m}");
        assert!(!m.contains("line 1"), "{m}");
    }
}
