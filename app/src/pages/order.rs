//! `/orders/{token}`: one reservation followed to its end.

use crate::components::order_tracker::OrderTracker;
use crate::{format::page_title, i18n::tr};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let token = move || params.read().get("token").unwrap_or_default();
    view! {
        <Title text=page_title(&tr("order.title"))/>
        <section class="card narrow">
            <h1>{tr("order.title")}</h1>
            {move || view! { <OrderTracker token=token() initial=crate::api::OrderStatus::Queued/> }}
            <p><a href="/orders">{tr("order.all")}</a></p>
        </section>
    }
}
