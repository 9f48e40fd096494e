//! The storefront and admin console UI, rendered on the server and hydrated in the browser.
//! Server-only code stays behind the `ssr` feature; browser-only code behind `hydrate`.

pub mod api;
pub mod client;
mod pages;
mod session;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    StaticSegment,
};

pub use session::Session;

/// The HTML document around the app; the server renders it for every page.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.ico"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let session = Session::provide();

    view! {
        <Stylesheet id="leptos" href="/pkg/seckill.css"/>
        <Title text="Seckill — flash sales"/>
        <Router>
            <pages::Header session/>
            <main class="page">
                <Routes fallback=pages::NotFound>
                    <Route path=StaticSegment("") view=pages::Home/>
                    <Route path=StaticSegment("login") view=pages::Login/>
                    <Route path=StaticSegment("register") view=pages::Register/>
                </Routes>
            </main>
        </Router>
    }
}
