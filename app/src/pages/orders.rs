//! `/orders`: the shopper's orders, newest first.

use crate::api::OrderView;
use crate::{
    components::order_tracker::badge,
    format::page_title,
    i18n::{tr, tr_count, tr_with},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn OrdersPage() -> impl IntoView {
    let orders = RwSignal::new(None::<Result<Vec<OrderView>, String>>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let r = crate::endpoints::orders()
                .await
                .map(|l| l.orders)
                .map_err(|f| {
                    if f.status == 401 {
                        tr("orders.sign_in")
                    } else {
                        f.message()
                    }
                });
            orders.set(Some(r));
        });
    });
    view! {
        <Title text=page_title(&tr("orders.title"))/>
        <section class="card">
            <h1>{tr("orders.title")}</h1>
            {move || match orders.get() {
                None => view! { <p>{tr("loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e} " " <a href="/login">{tr("header.sign_in")}</a></p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <p>{tr("orders.none")}</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="orders">
                        {list.into_iter().map(|o| view! {
                            <li>
                                <a href=format!("/orders/{}", o.token)>{tr_with("orders.sale", &[("id", &o.activity_id.to_string())])} " · " {tr_count("units", i64::from(o.quantity), &[])}</a>
                                " " <span class=format!("badge {}", o.status)>{badge(o.status)}</span>
                            </li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}
