//! A sale's remaining stock and whether it is paused: polled while the page is open and the sale
//! has not ended (the API allows them to be 1 s stale; a CDN may answer them) and shown as "Stock
//! left: n of N".

use crate::data::SaleState;
use crate::i18n::{number, tr_split, tr_with};
use leptos::prelude::*;

/// What a page follows of a sale while it is open.
#[derive(Clone, Copy)]
pub struct Stock {
    /// Units left; `None` until known.
    pub remaining: RwSignal<Option<i64>>,
    /// Whether buys are refused: the merchant paused the sale or the cord stopped it.
    pub paused: RwSignal<bool>,
}

/// The stock of a sale, starting from what the server saw when it rendered the page, refreshed
/// every two seconds until the page is left or the sale has ended.
pub fn poll_stock(sale: &SaleState) -> Stock {
    let a = &sale.activity;
    let id = a.id;
    let ends_ms = crate::clock::parse_ms(&a.ends_at).unwrap_or(f64::MAX);
    let stock = Stock {
        remaining: RwSignal::new(sale.remaining),
        paused: RwSignal::new(a.stopped()),
    };
    #[cfg(feature = "hydrate")]
    {
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                while alive.load(std::sync::atomic::Ordering::Relaxed) {
                    let ended = js_sys::Date::now() > ends_ms + 5_000.0;
                    if let Ok(r) = crate::endpoints::stock(id).await {
                        stock.remaining.try_set(Some(r.remaining));
                        stock.paused.try_set(r.paused);
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
    stock
}

#[component]
pub fn StockLeft(
    remaining: RwSignal<Option<i64>>,
    total: i64,
    per_user_limit: i32,
) -> impl IntoView {
    let line = tr_split("stock.left");
    view! {
        <p class="muted">
            {line.0}
            <strong data-testid="stock-remaining">{move || remaining.get().map_or("…".to_string(), number)}</strong>
            {tr_with("stock.of", &[("total", &number(total)), ("limit", &number(i64::from(per_user_limit)))])}
        </p>
    }
}
