//! A sale's remaining stock: polled while the page is open and the sale has not ended (the API
//! allows it to be 1 s stale; a CDN may answer it) and shown as "Stock left: n of N".

use leptos::prelude::*;

/// The remaining stock of sale `a`, refreshed every two seconds until the page is left or the
/// sale has ended; `None` until the first answer (and on the server).
pub fn poll_remaining(a: &crate::api::Activity) -> RwSignal<Option<i64>> {
    let id = a.id;
    let ends_ms = crate::clock::parse_ms(&a.ends_at).unwrap_or(f64::MAX);
    let remaining = RwSignal::new(None::<i64>);
    #[cfg(feature = "hydrate")]
    {
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                while alive.load(std::sync::atomic::Ordering::Relaxed) {
                    let ended = js_sys::Date::now() > ends_ms + 5_000.0;
                    if let Ok(r) = crate::client::get::<crate::api::Remaining>(&format!(
                        "/api/activities/{id}/stock"
                    ))
                    .await
                    {
                        remaining.try_set(Some(r.remaining));
                    }
                    if ended {
                        break;
                    }
                    crate::clock::gloo_timers_sleep(2_000).await;
                }
            });
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (id, ends_ms);
    remaining
}

#[component]
pub fn StockLeft(
    remaining: RwSignal<Option<i64>>,
    total: i64,
    per_user_limit: i32,
) -> impl IntoView {
    view! {
        <p class="muted">
            "Stock left: "
            <strong data-testid="stock-remaining">{move || remaining.get().map_or("…".to_string(), |r| r.to_string())}</strong>
            " of " {crate::format::thousands(total)}
            " · at most " {per_user_limit} " per shopper"
        </p>
    }
}
