//! Where pages get activities: on the server straight from the domain (a `Storefront` the server
//! provides in context), in the browser from the JSON API. Either way the result is serialized
//! into the page, so hydration does not fetch it again.

use crate::api::Activity;
use leptos::prelude::*;

pub type Loaded<T> = Result<T, String>;

#[cfg(feature = "ssr")]
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the server renders pages from. Implemented by the server crate (which `app` cannot see).
#[cfg(feature = "ssr")]
pub trait StorefrontSource: Send + Sync + 'static {
    fn activities(&self) -> BoxFuture<'_, Loaded<Vec<Activity>>>;
    fn activity(&self, id: i64) -> BoxFuture<'_, Loaded<Option<Activity>>>;
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

pub fn activities() -> Resource<Loaded<Vec<Activity>>> {
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
                crate::client::get::<crate::api::ActivityList>("/api/activities")
                    .await
                    .map(|l| l.activities)
                    .map_err(|f| f.message())
            })
        },
    )
}

pub fn activity(
    id: impl Fn() -> Option<i64> + Send + Sync + 'static,
) -> Resource<Loaded<Option<Activity>>> {
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
            match crate::client::get::<Activity>(&format!("/api/activities/{id}")).await {
                Ok(a) => Ok(Some(a)),
                Err(f) if f.status == 404 => Ok(None),
                Err(f) => Err(f.message()),
            }
        })
    })
}
