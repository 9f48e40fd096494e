//! The router: every area's routes under `/api`, the pages, the assets, and the middleware
//! around them all.

use crate::{
    domain::ApiError,
    http::{self, site, state::AppState},
};
use axum::{
    http::{header, HeaderValue, StatusCode},
    middleware, Router,
};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::path::Path;
use tower_http::{
    compression::{
        predicate::{NotForContentType, Predicate, SizeAbove},
        CompressionLayer,
    },
    services::{ServeDir, ServeFile},
    set_header::SetResponseHeaderLayer,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

/// Whether a middleware is on: all are, unless a measurement leaves one out (infra/config, LAYERS).
#[derive(Clone, Copy)]
struct Layers<'a>(&'a [String]);

impl Layers<'_> {
    fn on(self, layer: &str) -> bool {
        !self.0.iter().any(|l| l == layer)
    }
}

pub(super) fn router(state: AppState) -> Router {
    let layers = Layers(&state.config.layers_off);
    if !state.config.layers_off.is_empty() {
        tracing::warn!(layers = ?state.config.layers_off, "middleware left out for a measurement (SECKILL_BENCH_WITHOUT_LAYERS); never in production");
    }
    let site = Path::new(&state.config.site_root).to_path_buf();
    let routes = generate_route_list(app::App);
    let (leptos, assets) = (state.leptos.clone(), state.assets.clone());
    let shell = move |options| app::shell(options, assets.clone());
    let storefront = site::storefront(
        state.db.clone(),
        state.redis.clone(),
        state.activities.clone(),
    );
    let app = Router::new()
        .nest("/api", api_router(layers))
        .merge(http::ops::router())
        .route("/language", axum::routing::post(site::choose_language))
        .merge(http::forms::router())
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(storefront.clone()),
            {
                let shell = shell.clone();
                move || shell(leptos.clone())
            },
        )
        .nest_service("/pkg", pkg_service(&site, state.hashed_assets))
        .route_service("/favicon.ico", ServeFile::new(site.join("favicon.ico")))
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell));
    with_layers(app, &state, layers).with_state(state)
}

/// `/api`: every JSON route, JSON in and out, nothing cached once signed in.
fn api_router(layers: Layers) -> Router<AppState> {
    let mut api = Router::new()
        .merge(http::accounts::router())
        .merge(http::activities::router())
        .merge(http::buy::router())
        .merge(http::orders::router())
        .merge(http::reminders::router())
        .merge(http::admin::activities::router())
        .merge(http::admin::orders::router())
        .merge(http::admin::audit::router())
        .merge(http::admin::shop::router())
        .merge(http::operator::router())
        .fallback(|| async { ApiError::NotFound });
    if layers.on("require_json") {
        api = api.layer(middleware::from_fn(http::input::require_json));
    }
    api.layer(middleware::from_fn(http::input::json_rejections))
        .layer(middleware::from_fn(http::input::no_store_when_signed_in))
}

/// `/pkg`: the wasm, scripts and styles, precompressed; immutable when their names are hashed,
/// and only when found: during a rollout a page of the next release may ask an instance of this
/// one for an asset it does not have, and that 404 must never be kept (by a CDN, or the browser)
/// for the year an asset is. A name this release lacks is looked for in `pkg-previous`, the
/// release before's assets that the image carries (scripts/image.sh): a page that an instance of
/// that release rendered gets its assets from an instance of this one.
fn pkg_service(site: &Path, hashed: bool) -> axum::routing::MethodRouter {
    let found = HeaderValue::from_static(if hashed { site::IMMUTABLE } else { "no-cache" });
    let files = ServeDir::new(site.join("pkg"))
        .precompressed_br()
        .precompressed_gzip()
        .fallback(
            ServeDir::new(site.join(site::PREVIOUS_PKG))
                .precompressed_br()
                .precompressed_gzip(),
        );
    axum::routing::get_service(files).layer(axum::middleware::map_response(
        move |mut resp: axum::response::Response| {
            let found = found.clone();
            async move {
                let cache = match resp.status() {
                    StatusCode::OK | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED => {
                        found
                    }
                    _ => HeaderValue::from_static("no-store"),
                };
                resp.headers_mut().insert(header::CACHE_CONTROL, cache);
                resp
            }
        },
    ))
}

/// The middleware around every route, innermost first.
fn with_layers(mut app: Router<AppState>, state: &AppState, layers: Layers) -> Router<AppState> {
    if layers.on("guard_pages") {
        app = app.layer(middleware::from_fn_with_state(
            state.sessions.clone(),
            http::admin::guard_pages,
        ));
    }
    if layers.on("cache_policy") {
        app = app.layer(middleware::from_fn(site::html_cache_policy));
    }
    if layers.on("security_headers") {
        app = app.layer(site::security_headers());
        // Served over HTTPS (the cookie is `Secure`): browsers keep to HTTPS from then on.
        if state.config.cookie_secure {
            app = app.layer(SetResponseHeaderLayer::overriding(
                header::STRICT_TRANSPORT_SECURITY,
                HeaderValue::from_static("max-age=31536000; includeSubDomains"),
            ));
        }
    }
    if layers.on("compression") {
        // Not below 1 KiB: the buy path's small JSON answers gain nothing from it (an encoder
        // per answer, and a compressed body of a hundred bytes is hardly smaller).
        app = app.layer(
            CompressionLayer::new().compress_when(
                SizeAbove::new(1024)
                    .and(NotForContentType::GRPC)
                    .and(NotForContentType::IMAGES)
                    .and(NotForContentType::SSE),
            ),
        );
    }
    if layers.on("timeout") {
        app = app.layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            state.config.request_timeout,
        ));
    }
    if layers.on("connection") {
        app = app.layer(middleware::from_fn(
            http::connection::close_when_body_unread,
        ));
    }
    if layers.on("trace") {
        app = app.layer(TraceLayer::new_for_http().make_span_with(http::observe::request_span));
    }
    if layers.on("http_metrics") {
        app = app.layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            http::observe::measure,
        ));
    }
    // Outermost: the id is there for every layer inside and on every answer, a timeout's too.
    app.layer(middleware::from_fn(http::observe::request_id))
}
