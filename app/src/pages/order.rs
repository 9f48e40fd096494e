//! `/orders/{token}`: one reservation followed to its end.

use crate::api::{OrderStatus, Token};
use crate::components::order_tracker::OrderTracker;
use crate::{format::page_title, i18n::tr};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    // A token that is not one is no order: the page says so without asking the server.
    let token = move || {
        params
            .read()
            .get("token")
            .and_then(|t| t.parse::<Token>().ok())
    };
    view! {
        <Title text=page_title(&tr("order.title"))/>
        <section class="card narrow">
            <h1>{tr("order.title")}</h1>
            {move || match token() {
                Some(token) => view! { <OrderTracker token initial=OrderStatus::Queued/> }.into_any(),
                None => view! { <p class="error" role="alert" data-testid="order-not-found">{tr("not_found")}</p> }.into_any(),
            }}
            <p><a href="/orders">{tr("order.all")}</a></p>
        </section>
    }
}
