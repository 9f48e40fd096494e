//! The storefront and admin console UI, rendered on the server and hydrated in the browser.
//! Server-only code stays behind the `ssr` feature; browser-only code behind `hydrate`.
//! `pages/` holds one file per page of docs/api.md's list (routes below), `components/` the widgets
//! they share, `api/` the DTOs of the HTTP API, `endpoints.rs` the browser's calls to it (over `client.rs`), `data.rs`
//! the storefront's server-rendered reads, `clock.rs` the server-synced clock, `i18n.rs` the
//! shopper's language (its catalogs are `app/locales/*.json`).
// The admin dashboard is one deep view type.
#![recursion_limit = "256"]

pub mod api;
pub mod client;
pub mod clock;
mod components;
pub mod data;
pub mod endpoints;
mod format;
pub mod i18n;
#[cfg(feature = "hydrate")]
mod notify;
mod pages;
mod session;
#[cfg(feature = "hydrate")]
pub mod typed;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    ParamSegment, SsrMode, StaticSegment,
};

pub use components::auth_form::is_local_path;
pub use session::Session;

/// Who asked for an admin page, as the server established from the session cookie before
/// rendering it (a request extension; the admin pages read it during server rendering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageViewer(pub api::Role);

/// Where the static assets are: `root` is the CDN prefix (empty: this server), `css`, `js` and
/// `wasm` the paths of the (content-hashed) stylesheet, script and wasm app.
#[derive(Clone, Debug, Default)]
pub struct Assets {
    pub root: String,
    pub css: String,
    pub js: String,
    pub wasm: String,
}

/// Starts the wasm app once the browser is idle after the first paint (at most 2 s later), with
/// no preload in the head: the script and the wasm are not fetched before the page's content is
/// painted, so they are off the path to its largest paint (a page's content is in its HTML: it
/// is readable, and its phase right, before the app runs). Interactivity comes that much later.
#[component]
fn Hydration(assets: Assets) -> impl IntoView {
    let nonce = leptos::nonce::use_nonce();
    let start = format!(
        "const start = () => import({js:?}).then((app) => app.default({{ module_or_path: {wasm:?} }}).then(() => new Promise((r) => setTimeout(r, 0))).then(() => app.hydrate()));\n\
         if ('requestIdleCallback' in window) requestIdleCallback(start, {{ timeout: 2000 }}); else setTimeout(start, 0);",
        js = format!("{}{}", assets.root, assets.js),
        wasm = format!("{}{}", assets.root, assets.wasm),
    );
    view! { <script type="module" nonce=nonce>{start}</script> }
}

/// The Content-Security-Policy of an HTML page: scripts only from this site (or the asset CDN)
/// and the one inline script that carries this response's nonce (Leptos' hydration and streaming
/// scripts), wasm compilation allowed, styles from files only, images also from `data:` (the
/// captcha) and any http(s) origin (merchants' product images), no plugins, no framing, forms and
/// `<base>` only to this site.
pub fn page_policy(nonce: &str, asset_root: &str) -> String {
    let cdn = asset_origin(asset_root)
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    format!(
        "default-src 'self'; script-src 'self'{cdn} 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self'{cdn}; \
         img-src 'self' data: https: http:; connect-src 'self'{cdn}; font-src 'self'{cdn}; object-src 'none'; \
         base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// `https://cdn.example.com` of `https://cdn.example.com/site/v1`; none for a relative root.
fn asset_origin(root: &str) -> Option<&str> {
    let rest = root
        .strip_prefix("https://")
        .or_else(|| root.strip_prefix("http://"))?;
    let host_len = rest.find('/').unwrap_or(rest.len());
    let origin = &root[..root.len() - rest.len() + host_len];
    // Only characters of a host and port: nothing that could end the directive.
    let clean = rest[..host_len]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    (clean && host_len > 0).then_some(origin)
}

/// `en` on the operator's pages (`/operator`), which stay English; none elsewhere.
fn operator_lang() -> Option<&'static str> {
    let path = leptos_router::hooks::use_location().pathname.get();
    path.starts_with("/operator").then_some("en")
}

/// The request's language, put in context for the page (the server), or the one the page was
/// rendered in (the browser).
fn current_language() -> std::sync::Arc<i18n::Catalog> {
    #[cfg(feature = "ssr")]
    return i18n::provide_for_request();
    #[cfg(not(feature = "ssr"))]
    i18n::current()
}

/// The HTML document around the app; the server renders it for every page. (`options` is Leptos'
/// own; the asset paths the page names are in `assets`.)
pub fn shell(options: LeptosOptions, assets: Assets) -> impl IntoView {
    let _ = options;
    #[cfg(feature = "ssr")]
    if let (Some(nonce), Some(resp)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) {
        if let Ok(value) = http::HeaderValue::from_str(&page_policy(&nonce, &assets.root)) {
            resp.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
        }
    }
    let lang = current_language();
    view! {
        <!DOCTYPE html>
        <html lang=lang.tag.clone()>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.ico"/>
                // Marks a browser that runs scripts, before anything is drawn: the parts for
                // browsers without them (`without-scripts`) stay hidden there, and are never fetched.
                <script nonce=leptos::nonce::use_nonce()>"document.documentElement.classList.add('js')"</script>
                <link rel="stylesheet" href=format!("{}{}", assets.root, assets.css)/>
                // Data, not code; it carries the nonce all the same, as every script of the page does.
                <script type="application/json" id=i18n::SCRIPT_ID nonce=leptos::nonce::use_nonce() inner_html=lang.to_script()></script>
                <Hydration assets=assets.clone()/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_policy_allows_the_nonce_wasm_and_the_asset_origin_only() {
        let csp = super::page_policy("abc123", "");
        assert!(
            csp.contains("script-src 'self' 'nonce-abc123' 'wasm-unsafe-eval';"),
            "{csp}"
        );
        assert!(!csp.contains("'unsafe-inline'"), "{csp}");
        let cdn = super::page_policy("n", "https://cdn.example.com/site/v1");
        assert!(
            cdn.contains("script-src 'self' https://cdn.example.com 'nonce-n'"),
            "{cdn}"
        );
        assert!(
            cdn.contains("connect-src 'self' https://cdn.example.com;"),
            "{cdn}"
        );
        for odd in [
            "/static",
            "ftp://x",
            "https://",
            "https://evil.example; script-src *",
        ] {
            let csp = super::page_policy("n", odd);
            assert!(csp.contains("script-src 'self' 'nonce-n'"), "{odd}: {csp}");
        }
    }
}

#[component]
pub fn App() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    i18n::load_from_page();
    provide_meta_context();
    let session = Session::provide();
    clock::ServerClock::provide();
    clock::ShopZone::provide(session);

    view! {
        <Title text=format::page_title(&i18n::tr("home.title"))/>
        <Router>
            <components::header::Header session/>
            // The operator's pages stay English, whatever the page's language.
            <main class="page" lang=operator_lang>
                <Routes fallback=pages::not_found::NotFound>
                    // The storefront waits for its sales before it sends a byte: the HTML itself
                    // (not a template a script moves in) says what is on sale, what has sold out
                    // and when the rest starts, for crawlers, shoppers without scripts and LCP.
                    <Route path=StaticSegment("") view=pages::home::Home ssr=SsrMode::Async/>
                    <Route path=StaticSegment("login") view=pages::login::Login/>
                    <Route path=StaticSegment("register") view=pages::register::Register/>
                    <Route path=(StaticSegment("activities"), ParamSegment("id")) view=pages::sale::ActivityPage ssr=SsrMode::Async/>
                    <Route path=(StaticSegment("activities"), ParamSegment("id"), StaticSegment("report")) view=pages::report::ReportPage ssr=SsrMode::Async/>
                    <Route path=StaticSegment("orders") view=pages::orders::OrdersPage/>
                    <Route path=(StaticSegment("orders"), ParamSegment("token")) view=pages::order::OrderPage/>
                    <Route path=StaticSegment("account") view=pages::account::AccountPage/>
                    <Route path=StaticSegment("admin") view=pages::console::AdminHome/>
                    <Route path=(StaticSegment("admin"), StaticSegment("audit")) view=pages::audit::ShopAuditPage/>
                    <Route path=StaticSegment("operator") view=pages::operator::OperatorPage/>
                    <Route path=(StaticSegment("operator"), StaticSegment("audit")) view=pages::audit::PlatformAuditPage/>
                    <Route path=(StaticSegment("admin"), StaticSegment("activities"), StaticSegment("new")) view=pages::new_sale::NewActivityPage/>
                    <Route path=(StaticSegment("admin"), StaticSegment("activities"), ParamSegment("id")) view=pages::dashboard::DashboardPage/>
                </Routes>
            </main>
        </Router>
    }
}
