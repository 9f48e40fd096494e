//! `/orders`: the shopper's orders, newest first.

use crate::api::OrderStatus;
#[cfg(feature = "hydrate")]
use crate::client;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn OrdersPage() -> impl IntoView {
    let orders = RwSignal::new(None::<Result<Vec<OrderStatus>, String>>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let r = client::get::<crate::api::OrderList>("/api/orders")
                .await
                .map(|l| l.orders)
                .map_err(|f| {
                    if f.status == 401 {
                        "Sign in to see your orders.".to_string()
                    } else {
                        f.message()
                    }
                });
            orders.set(Some(r));
        });
    });
    view! {
        <Title text="Your orders — Seckill"/>
        <section class="card">
            <h1>"Your orders"</h1>
            {move || match orders.get() {
                None => view! { <p>"Loading…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e} " " <a href="/login">"Sign in"</a></p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <p>"No orders yet."</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="orders">
                        {list.into_iter().map(|o| view! {
                            <li>
                                <a href=format!("/orders/{}", o.token)>"Sale #" {o.activity_id} " · " {o.quantity} " unit(s)"</a>
                                " " <span class=format!("badge {}", o.status)>{o.status.clone()}</span>
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}
