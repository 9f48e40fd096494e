//! Any path the app does not know: a "page not found" page with status 404.

use crate::{format::page_title, i18n::tr};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text=page_title(&tr("sale.not_found.title"))/>
        <section class="card narrow">
            <h1>{tr("not_found")}</h1>
            <p><a href="/">{tr("back_to_sales")}</a></p>
        </section>
    }
}
