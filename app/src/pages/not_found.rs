//! Any path the app does not know: a "page not found" page with status 404.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found — Seckill"/>
        <section class="card narrow">
            <h1>"Page not found"</h1>
            <p><a href="/">"Back to the sales"</a></p>
        </section>
    }
}
