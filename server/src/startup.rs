//! Builds the application from its configuration: connections, migrations, the parts of the
//! state, the workers, and the router that merges every area's routes with the site around them.
//! Tests call `Application::build` with port 0; `main` runs it until SIGTERM or Ctrl-C.

use crate::{
    buy::{
        activities::ActivityCache,
        attempts::Attempts,
        blocks::Blocks,
        doors::Doors,
        gate::{Gate, GateParts},
        queue::WaitingRoom,
    },
    domain::{
        account::{self, throttle::LoginThrottle},
        activity,
        password::Passwords,
        payment::{PaymentProvider, SimulatedProvider},
        ApiError,
    },
    http::{
        self,
        session::SessionKeys,
        site,
        state::{AppState, Shared},
    },
    infra::{
        broker::Broker,
        config::Config,
        db,
        keys::Keys,
        redis::{self as redis_conn, Redis},
        replication::Replication,
        retry::until_available,
        supervisor::{Stage, Supervisor},
    },
    pipeline::Pipeline,
};
use anyhow::Context;
use app::api::Role;
use axum::{
    http::{header, HeaderValue, StatusCode},
    middleware, Router,
};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::{future::Future, net::SocketAddr, path::Path, sync::Arc, time::Duration};
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt};
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

/// Redis: the command connection, the masters' count, and the replication `WAIT`'s own
/// connection (`WAIT` blocks the connection it is sent on) when replicas are awaited.
async fn connect_redis(config: &Config) -> anyhow::Result<(redis_conn::Conn, usize, Replication)> {
    let mut conn = redis_conn::connect(&config.redis).await?;
    let masters = redis_conn::masters(&mut conn).await?;
    let waiting = match config.redis_wait_replicas {
        0 => None,
        _ => Some(redis_conn::connect(&config.redis).await?),
    };
    let replication = Replication::new(
        waiting,
        config.redis_wait_replicas,
        config.redis_wait_timeout,
    );
    Ok((conn, masters, replication))
}

/// PostgreSQL (migrated), Redis and RabbitMQ (connected when first used if it is not up yet).
async fn connect_engines(
    config: &Config,
) -> anyhow::Result<(sqlx::PgPool, Redis, Broker, Replication)> {
    let db = until_available("PostgreSQL", || db::connect(&config.database_url, 32)).await?;
    db::migrate(&db).await?;
    let (conn, masters, replication) = connect_redis(config).await?;
    let broker = Broker::new(&config.amqp_url);
    if let Err(e) = broker.connection().await {
        tracing::warn!(error = %format!("{e:#}"), "RabbitMQ not available yet; /readyz will say so");
    }
    let redis = Redis {
        conn,
        keys: Keys::new(&config.redis_prefix),
        masters,
    };
    Ok((db, redis, broker, replication))
}

/// The pipeline alone, for `server worker`: no site, no sessions, no HTTP state.
pub async fn connect_pipeline(config: &Config) -> anyhow::Result<Pipeline> {
    let (db, redis, broker, replication) = connect_engines(config).await?;
    Ok(Pipeline::new(config, db, redis, broker, replication))
}

/// The operator and the merchant the configuration names, created when missing, and the demo
/// sale when asked.
async fn create_configured_accounts(db: &sqlx::PgPool, config: &Config) -> anyhow::Result<()> {
    if let Some((user, password)) = &config.operator {
        match account::create_account(db, Role::Operator, None, user, password).await? {
            Some(o) => {
                tracing::info!(operator.id = o.id, operator.username = %o.username, "operator created")
            }
            None => tracing::info!(operator.username = %user, "operator already exists"),
        }
    }
    if let Some((user, password)) = &config.admin {
        match account::create_account(db, Role::Merchant, None, user, password).await? {
            Some(m) => {
                tracing::info!(merchant.id = m.id, merchant.username = %m.username, "merchant created")
            }
            None => tracing::info!(merchant.username = %user, "merchant already exists"),
        }
        if config.demo {
            if let Some(id) = activity::create_demo(db, user).await? {
                tracing::info!(
                    activity.id = id,
                    "demo sale created; it starts in 3 minutes"
                );
            }
        }
    }
    Ok(())
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    pub state: AppState,
}

impl AppState {
    /// Connects to everything, applies the migrations, creates the configured merchant.
    pub async fn connect(config: Config) -> anyhow::Result<AppState> {
        AppState::connect_with(config, Arc::new(SimulatedProvider)).await
    }

    /// As [`AppState::connect`], charging through `payments` (a real provider, or the tests' recorder).
    pub async fn connect_with(
        config: Config,
        payments: Arc<dyn PaymentProvider>,
    ) -> anyhow::Result<AppState> {
        let (db, redis, broker, replication) = connect_engines(&config).await?;
        create_configured_accounts(&db, &config).await?;
        let sessions = Arc::new(SessionKeys::new(
            &config.secret.0,
            config.session_ttl,
            config.cookie_secure,
        ));
        // Before the first request: a session ended before this start stays ended.
        sessions.revocations.load(&db).await?;
        AppState::assemble(config, db, redis, broker, replication, sessions, payments)
    }

    /// The parts every handler and worker shares, built on the connections.
    fn assemble(
        config: Config,
        db: sqlx::PgPool,
        redis: Redis,
        broker: Broker,
        replication: Replication,
        sessions: Arc<SessionKeys>,
        payments: Arc<dyn PaymentProvider>,
    ) -> anyhow::Result<AppState> {
        let site = site::Site::load(&config);
        let keys = redis.keys.clone();
        let blocks = Blocks::default();
        let pipeline = Pipeline::new(&config, db.clone(), redis.clone(), broker, replication);
        let metrics = pipeline.metrics.clone();
        let activities = ActivityCache::default();
        let attempts = Attempts::default();
        let waiting_room = WaitingRoom::new(
            db.clone(),
            redis.clone(),
            activities.clone(),
            metrics.clone(),
            &config.secret.0,
            config.queue,
            blocks.clone(),
        );
        let gate = Gate::new(
            config.gate,
            &config.secret.0,
            GateParts {
                db: db.clone(),
                redis: redis.clone(),
                activities: activities.clone(),
                sold_out: pipeline.sold_out.clone(),
                blocks: blocks.clone(),
                attempts: attempts.clone(),
                metrics: metrics.clone(),
                replication: pipeline.replication.clone(),
                waiting_room: waiting_room.clone(),
            },
        );
        Ok(AppState::new(Shared {
            sessions,
            passwords: Passwords::new(
                config.password_hash_concurrency,
                config.doors.signup_hash_concurrency,
            )?,
            login_throttle: LoginThrottle::new(config.login_throttle, keys.clone()),
            doors: Doors::new(config.doors, keys, &config.secret.0),
            exports: Default::default(),
            gate: Arc::new(gate),
            waiting_room,
            sold_out: pipeline.sold_out.clone(),
            blocks,
            topology: pipeline.topology.clone(),
            deadlines: pipeline.deadlines.clone(),
            reconciler: pipeline.reconciler.clone(),
            broker: pipeline.broker.clone(),
            supervisor: Supervisor::new(metrics.clone()),
            pipeline,
            payments,
            activities,
            attempts,
            metrics,
            config: Arc::new(config),
            db,
            redis,
            leptos: site.options,
            assets: site.assets,
            hashed_assets: site.hashed,
        }))
    }

    /// Starts the pipeline's workers under this instance's supervisor.
    pub fn spawn_workers(&self) {
        self.pipeline.start(&self.supervisor);
    }
}

/// The in-process buckets forget clients idle long enough to be full again; the admin writes'
/// first answers are kept a day.
async fn sweeps(doors: Doors, gate: Arc<Gate>, db: sqlx::PgPool) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
    loop {
        every.tick().await;
        doors.sweep();
        gate.sweep();
        if let Err(e) = crate::domain::admin_requests::forget_old(&db).await {
            tracing::warn!(error = %e, "old admin answers not forgotten; next minute");
        }
    }
}

/// Restock, block and session broadcasts, for this instance's sold-out flags, blocked clients
/// and ended sessions.
fn listen(state: &AppState) -> impl Future<Output = ()> + Send + 'static {
    let (sold_out, blocks, redis) = (
        state.sold_out.clone(),
        state.blocks.clone(),
        state.redis.clone(),
    );
    let (revocations, db) = (state.sessions.revocations.clone(), state.db.clone());
    let restock = redis.keys.restock_channel();
    let blocked = redis.keys.block_channel();
    let session = redis.keys.session_channel();
    redis_conn::listen(
        state.config.redis.subscribe_urls(),
        vec![restock.clone(), blocked.clone(), session.clone()],
        {
            let (sold_out, blocks, revocations) =
                (sold_out.clone(), blocks.clone(), revocations.clone());
            move |channel, payload| {
                if channel == restock {
                    sold_out.on_message(payload);
                } else if channel == blocked {
                    blocks.on_message(payload);
                } else if channel == session {
                    revocations.on_message(payload);
                }
            }
        },
        move || {
            let (sold_out, blocks, redis) = (sold_out.clone(), blocks.clone(), redis.clone());
            let (revocations, db) = (revocations.clone(), db.clone());
            async move {
                sold_out.reset();
                if let Err(e) = blocks.load(&redis).await {
                    tracing::warn!(error = %e, "blocked clients not reloaded; broadcasts still arrive");
                }
                // Whatever was broadcast while this instance was not listening.
                if let Err(e) = revocations.load(&db).await {
                    tracing::warn!(error = %e, "ended sessions not reloaded; broadcasts still arrive");
                }
            }
        },
    )
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        Application::build_with(config, Arc::new(SimulatedProvider)).await
    }

    /// As [`Application::build`], charging through `payments`.
    pub async fn build_with(
        config: Config,
        payments: Arc<dyn PaymentProvider>,
    ) -> anyhow::Result<Application> {
        let state = AppState::connect_with(config, payments).await?;
        state.reconciler.warm().await?;
        let supervisor = &state.supervisor;
        supervisor.spawn("broadcasts", Stage::Rest, {
            let state = state.clone();
            move || listen(&state)
        });
        supervisor.spawn("attempts", Stage::Rest, {
            let (attempts, redis, db) = (
                state.attempts.clone(),
                state.redis.clone(),
                state.db.clone(),
            );
            move || attempts.clone().run(redis.clone(), db.clone())
        });
        supervisor.spawn("report-lines", Stage::Rest, {
            let (db, redis) = (state.db.clone(), state.redis.clone());
            move || crate::domain::report::keep_lines(db.clone(), redis.clone())
        });
        supervisor.spawn("waiting-room", Stage::Rest, {
            let waiting_room = state.waiting_room.clone();
            move || waiting_room.clone().run()
        });
        supervisor.spawn("session-reload", Stage::Rest, {
            let (revocations, db, every) = (
                state.sessions.revocations.clone(),
                state.db.clone(),
                state.config.session_reload,
            );
            move || revocations.clone().run(db.clone(), every)
        });
        supervisor.spawn("sweeps", Stage::Rest, {
            let (doors, gate, db) = (state.doors.clone(), state.gate.clone(), state.db.clone());
            move || sweeps(doors.clone(), gate.clone(), db.clone())
        });
        if state.config.run_workers {
            state.spawn_workers();
        }
        let listener = TcpListener::bind(state.config.addr)
            .await
            .with_context(|| format!("binding {}", state.config.addr))?;
        Ok(Application {
            router: router(state.clone()),
            listener,
            state,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `shutdown` completes, then closes the listener (new connections are refused,
    /// so a balancer retries them on another instance) and finishes the requests in flight (at
    /// most `SECKILL_DRAIN_SECS`).
    /// Each connection must send its request head within `header_read_timeout`, so clients that
    /// trickle headers cannot hold connections (axum::serve sets no such limit); the request
    /// timeout layer bounds the rest.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        use hyper_util::rt::{TokioIo, TokioTimer};
        let listener = self.listener;
        let drain = self.state.config.drain;
        let mut make_service = self
            .router
            .into_make_service_with_connect_info::<SocketAddr>();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.state.config.header_read_timeout);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, remote) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: the listener itself is fine.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            let service = match make_service.call(remote).await {
                Ok(service) => service,
                Err(never) => match never {},
            };
            let service = hyper_util::service::TowerToHyperService::new(service.map_request(
                |req: axum::http::Request<hyper::body::Incoming>| req.map(axum::body::Body::new),
            ));
            let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        if tokio::time::timeout(drain, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                drain_secs = drain.as_secs(),
                "requests still in flight at the end of the drain; closing"
            );
        } else {
            tracing::info!("every request in flight answered; stopping the workers");
        }
        self.state.supervisor.shutdown(drain).await;
        Ok(())
    }
}

/// Whether a middleware is on: all are, unless a measurement leaves one out (config.rs, LAYERS).
#[derive(Clone, Copy)]
struct Layers<'a>(&'a [String]);

impl Layers<'_> {
    fn on(self, layer: &str) -> bool {
        !self.0.iter().any(|l| l == layer)
    }
}

fn router(state: AppState) -> Router {
    let layers = Layers(&state.config.layers_off);
    if !state.config.layers_off.is_empty() {
        tracing::warn!(layers = ?state.config.layers_off, "middleware left out for a measurement (SECKILL_BENCH_WITHOUT_LAYERS); never in production");
    }
    let site = Path::new(&state.config.site_root).to_path_buf();
    let routes = generate_route_list(app::App);
    let (leptos, assets) = (state.leptos.clone(), state.assets.clone());
    let shell = move |options| app::shell(options, assets.clone());
    let storefront = site::storefront(state.db.clone(), state.redis.clone());
    let app = Router::new()
        .nest("/api", api_router(layers))
        .merge(http::ops::router())
        .route("/language", axum::routing::post(site::choose_language))
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

/// `/pkg`: the wasm, scripts and styles, precompressed; immutable when their names are hashed.
fn pkg_service(
    site: &Path,
    hashed: bool,
) -> tower_http::set_header::SetResponseHeader<ServeDir, HeaderValue> {
    let cache = if hashed { site::IMMUTABLE } else { "no-cache" };
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static(cache),
        ))
        .service(
            ServeDir::new(site.join("pkg"))
                .precompressed_br()
                .precompressed_gzip(),
        )
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
        app = app.layer(TraceLayer::new_for_http());
    }
    app
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
    tracing::info!("shutting down: finishing requests in flight");
}
