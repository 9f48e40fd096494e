//! The router: every area's routes under `/api`, the pages, the assets, and the middleware
//! around them all.

use crate::{
    domain::ApiError,
    http::{self, site, state::AppState},
};
use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Router,
};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use std::{convert::Infallible, path::Path, sync::OnceLock};
use tower::{
    util::{BoxCloneSyncService, Either, MapResponse},
    Layer, Service, ServiceExt,
};
use tower_http::{
    compression::{
        predicate::{NotForContentType, Predicate, SizeAbove},
        CompressionLayer,
    },
    services::{ServeDir, ServeFile},
    timeout::TimeoutLayer,
};

/// Whether a middleware is on: all are, unless a measurement leaves one out (infra/config, LAYERS).
#[derive(Clone, Copy)]
struct Layers<'a>(&'a [String]);

impl Layers<'_> {
    fn on(self, layer: &str) -> bool {
        !self.0.iter().any(|l| l == layer)
    }
}

pub(super) fn server(state: AppState) -> Server {
    let layers = Layers(&state.config.layers_off);
    if !state.config.layers_off.is_empty() {
        tracing::warn!(layers = ?state.config.layers_off, "middleware left out for a measurement (SECKILL_BENCH_WITHOUT_LAYERS); never in production");
    }
    let site = Path::new(&state.config.site_root).to_path_buf();
    let routes = page_routes();
    let (leptos, assets) = (state.leptos.clone(), state.assets.clone());
    let shell = move |options| app::shell(options, assets.clone());
    let storefront = site::storefront(
        state.db.clone(),
        state.redis.clone(),
        state.activities.clone(),
        state.heat.clone(),
    );
    let app = Router::new()
        .nest("/api", api_router())
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
    // The route template an answer's request matched, for the metrics outside the router.
    let app = app
        .layer(http::observe::MarkRouteLayer)
        .with_state(state.clone());
    with_layers(app, &state, layers)
}

/// The pages' routes, found once per process by rendering the app. While leptos renders it for
/// this, it suspends every resource of the process that starts loading then (a flag shared by the
/// whole process, leptos_server's `SuppressResourceLoad`), for good: a page another server of the
/// same process was rendering at that instant never finished, and its request waited for its
/// timeout (`408`). Found once, before this process's first server serves a page, no page can be
/// rendering while the list is made (`OnceLock` holds every other server until it is made).
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(app::App)).clone()
}

/// `/api`: every JSON route, JSON in and out, nothing cached once signed in (its edge,
/// `http::input::ApiEdge`, is outside the router with the other middleware).
fn api_router() -> Router<AppState> {
    Router::new()
        .merge(http::accounts::router())
        .merge(http::activities::router())
        .merge(http::buy::router())
        .merge(http::orders::router())
        .merge(http::reminders::router())
        .merge(http::admin::activities::router())
        .merge(http::admin::crowd::router())
        .merge(http::admin::orders::router())
        .merge(http::admin::audit::router())
        .merge(http::admin::shop::router())
        .merge(http::operator::router())
        .merge(http::cord::router())
        .fallback(|| async { ApiError::NotFound })
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

/// The server as one service: the router inside the middleware every request passes.
pub(super) type Server = BoxCloneSyncService<Request, Response, Infallible>;

/// An answer as axum's [`Response`], whatever body a layer wrapped it in.
type Answering<S> = MapResponse<S, fn(<S as Service<Request>>::Response) -> Response>;

fn answering<S>(service: S) -> Answering<S>
where
    S: Service<Request>,
    S::Response: IntoResponse,
{
    service.map_response(IntoResponse::into_response as fn(S::Response) -> Response)
}

/// `layer` around `service` when on (all are, unless a measurement leaves one out), else the
/// service as it is.
fn around<S, L>(
    service: S,
    on: bool,
    layer: impl FnOnce() -> L,
) -> Either<Answering<L::Service>, Answering<S>>
where
    S: Service<Request, Error = Infallible>,
    S::Response: IntoResponse,
    L: Layer<S>,
    L::Service: Service<Request, Error = Infallible>,
    <L::Service as Service<Request>>::Response: IntoResponse,
{
    if on {
        Either::Left(answering(layer().layer(service)))
    } else {
        Either::Right(answering(service))
    }
}

/// The middleware around the router, innermost first. Outside it, not on its routes
/// (`Router::layer`): axum clones a route's whole stack of boxed services on every call, once per
/// layer, so each layer there costs every request as much again as the layers under it
/// (docs/benchmarks.md "What seeing costs"); out here a request clones each layer once, without
/// allocating. The one thing only a route knows, the template it matched, the route marks on its
/// answer (`observe::MarkRouteLayer`) for the metrics.
fn with_layers(app: Router, state: &AppState, layers: Layers) -> Server {
    // Innermost: what the API's answers need of the router's, before any layer outside sees them.
    let app = http::input::ApiEdgeLayer {
        require_json: layers.on("require_json"),
    }
    .layer(app);
    // The console's guard, the HTML cache policy and the security headers: one service.
    let edge = http::page_edge::PageEdgeLayer {
        guard: layers.on("guard_pages").then(|| state.sessions.clone()),
        cache_policy: layers.on("cache_policy"),
        security_headers: layers.on("security_headers"),
        // Served over HTTPS (the cookie is `Secure`): browsers keep to HTTPS from then on.
        hsts: layers.on("security_headers") && state.config.cookie_secure,
    };
    let app = around(
        app,
        edge.guard.is_some() || edge.cache_policy || edge.security_headers,
        || edge.clone(),
    );
    // Not below 1 KiB: the buy path's small JSON answers gain nothing from it (an encoder per
    // answer, and a compressed body of a hundred bytes is hardly smaller).
    let app = around(app, layers.on("compression"), || {
        CompressionLayer::new().compress_when(
            SizeAbove::new(1024)
                .and(NotForContentType::GRPC)
                .and(NotForContentType::IMAGES)
                .and(NotForContentType::SSE),
        )
    });
    let app = around(app, layers.on("timeout"), || {
        TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, state.config.request_timeout)
    });
    let app = around(app, layers.on("connection"), || {
        http::connection::CloseWhenUnreadLayer
    });
    // Outermost: the id and the span are there for every layer inside and on every answer, a
    // timeout's too, and the duration is the whole of a request's.
    let (ids, spans, metrics) = (
        layers.on("request_id"),
        layers.on("trace"),
        layers.on("http_metrics"),
    );
    let app = around(app, ids || spans || metrics, || {
        http::observe::ObserveLayer {
            ids,
            spans,
            metrics: metrics.then(|| state.metrics.clone()),
        }
    });
    BoxCloneSyncService::new(app)
}
