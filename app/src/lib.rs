//! The storefront and admin console UI, rendered on the server and hydrated in the browser.
//! Server-only code stays behind the `ssr` feature; browser-only code behind `hydrate`.
// The admin dashboard is one deep view type.
#![recursion_limit = "256"]

mod admin;
pub mod api;
pub mod client;
pub mod clock;
pub mod data;
mod orders;
mod pages;
mod session;
mod storefront;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    ParamSegment, StaticSegment,
};

pub use session::Session;

/// Who asked for an admin page, as the server established from the session cookie before
/// rendering it (a request extension; the admin pages read it during server rendering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageViewer(pub api::Role);

/// Where the static assets are: `root` is the CDN prefix (empty: this server), `css` the path of
/// the (content-hashed) stylesheet.
#[derive(Clone, Debug, Default)]
pub struct Assets {
    pub root: String,
    pub css: String,
}

/// The HTML document around the app; the server renders it for every page.
pub fn shell(options: LeptosOptions, assets: Assets) -> impl IntoView {
    let root = assets.root.clone();
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.ico"/>
                <link rel="stylesheet" href=format!("{}{}", assets.root, assets.css)/>
                <HydrationScripts options root/>
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
    clock::ServerClock::provide();

    view! {
        <Title text="Seckill — flash sales"/>
        <Router>
            <pages::Header session/>
            <main class="page">
                <Routes fallback=pages::NotFound>
                    <Route path=StaticSegment("") view=storefront::Home/>
                    <Route path=StaticSegment("login") view=pages::Login/>
                    <Route path=StaticSegment("register") view=pages::Register/>
                    <Route path=(StaticSegment("activities"), ParamSegment("id")) view=storefront::ActivityPage/>
                    <Route path=StaticSegment("orders") view=orders::OrdersPage/>
                    <Route path=(StaticSegment("orders"), ParamSegment("token")) view=orders::OrderPage/>
                    <Route path=StaticSegment("admin") view=admin::AdminHome/>
                    <Route path=(StaticSegment("admin"), StaticSegment("activities"), StaticSegment("new")) view=admin::NewActivityPage/>
                    <Route path=(StaticSegment("admin"), StaticSegment("activities"), ParamSegment("id")) view=admin::DashboardPage/>
                </Routes>
            </main>
        </Router>
    }
}
