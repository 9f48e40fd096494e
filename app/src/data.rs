//! Where pages get activities: on the server straight from the domain (a `Storefront` the server
//! provides in context), in the browser from the JSON API. Either way the result is serialized
//! into the page, so hydration does not fetch it again.

use crate::api::{Activity, SaleId};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

pub type Loaded<T> = Result<T, String>;

/// A sale as a page shows it. Rendered by the server, it carries what the server saw then (its
/// clock, the units left): the HTML already says "sold out", "starts in…" or "paused", and the
/// hydrating page starts from the same figures before it follows the live clock and stock.
/// Fetched by the browser (a page reached by a link), both are `None` until the page learns them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaleState {
    pub activity: Activity,
    pub remaining: Option<i64>,
    /// The server's clock when it rendered the page, in ms since the epoch.
    pub seen_at_ms: Option<f64>,
}

impl SaleState {
    pub fn fetched(activity: Activity) -> SaleState {
        SaleState {
            activity,
            remaining: None,
            seen_at_ms: None,
        }
    }
}

#[cfg(feature = "ssr")]
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the server renders pages from. Implemented by the server crate (which `app` cannot see).
#[cfg(feature = "ssr")]
pub trait StorefrontSource: Send + Sync + 'static {
    fn activities(&self) -> BoxFuture<'_, Loaded<Vec<SaleState>>>;
    fn activity(&self, id: SaleId) -> BoxFuture<'_, Loaded<Option<SaleState>>>;
    /// The public report of sale `id`; `None` while it has not ended (or does not exist).
    fn report(&self, id: SaleId) -> BoxFuture<'_, Loaded<Option<crate::api::SaleReport>>>;
}

#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct Storefront(pub std::sync::Arc<dyn StorefrontSource>);

#[cfg(not(feature = "ssr"))]
pub(crate) fn browser<F, T>(fut: F) -> send_wrapper::SendWrapper<F>
where
    F: std::future::Future<Output = T>,
{
    send_wrapper::SendWrapper::new(fut)
}

pub fn activities() -> Resource<Loaded<Vec<SaleState>>> {
    Resource::new(
        || (),
        move |_| {
            #[cfg(feature = "ssr")]
            {
                let store = use_context::<Storefront>();
                async move {
                    match store {
                        Some(s) => s.0.activities().await,
                        None => Err("no storefront".into()),
                    }
                }
            }
            #[cfg(not(feature = "ssr"))]
            browser(async move {
                crate::endpoints::sales()
                    .await
                    .map(|l| l.activities.into_iter().map(SaleState::fetched).collect())
                    .map_err(|f| f.message())
            })
        },
    )
}

pub fn activity(
    id: impl Fn() -> Option<SaleId> + Send + Sync + 'static,
) -> Resource<Loaded<Option<SaleState>>> {
    Resource::new(id, move |id| {
        #[cfg(feature = "ssr")]
        {
            let store = use_context::<Storefront>();
            async move {
                match (store, id) {
                    (Some(s), Some(id)) => s.0.activity(id).await,
                    (_, None) => Ok(None),
                    (None, _) => Err("no storefront".into()),
                }
            }
        }
        #[cfg(not(feature = "ssr"))]
        browser(async move {
            let Some(id) = id else { return Ok(None) };
            match crate::endpoints::sale(id).await {
                Ok(a) => Ok(Some(SaleState::fetched(a))),
                Err(f) if f.status == 404 => Ok(None),
                Err(f) => Err(f.message()),
            }
        })
    })
}

/// The public report of a sale: `None` until it has ended.
pub fn report(
    id: impl Fn() -> Option<SaleId> + Send + Sync + 'static,
) -> Resource<Loaded<Option<crate::api::SaleReport>>> {
    Resource::new(id, move |id| {
        #[cfg(feature = "ssr")]
        {
            let store = use_context::<Storefront>();
            async move {
                match (store, id) {
                    (Some(s), Some(id)) => s.0.report(id).await,
                    (_, None) => Ok(None),
                    (None, _) => Err("no storefront".into()),
                }
            }
        }
        #[cfg(not(feature = "ssr"))]
        browser(async move {
            let Some(id) = id else { return Ok(None) };
            match crate::endpoints::report(id).await {
                Ok(r) => Ok(Some(r)),
                Err(f) if f.status == 404 => Ok(None),
                Err(f) => Err(f.message()),
            }
        })
    })
}
