//! Start-up's connections: PostgreSQL (migrated), Redis and RabbitMQ, the accounts and demo sale
//! the configuration names, and the state every handler and worker shares, built on them.

use crate::{
    buy::{
        activities::ActivityCache,
        attempts::Attempts,
        blocks::Blocks,
        doors::Doors,
        gate::{Gate, GateParts},
        heat::Heat,
        queue::WaitingRoom,
    },
    domain::{
        account::{self, throttle::LoginThrottle},
        activity,
        password::Passwords,
        payment::{PaymentProvider, SimulatedProvider},
    },
    http::{
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
        supervisor::Supervisor,
    },
    pipeline::Pipeline,
};
use app::api::Role;
use std::sync::Arc;

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
    let db = until_available("PostgreSQL", || {
        db::connect(&config.database_url, config.db_connections)
    })
    .await?;
    if config.migrate_on_start {
        db::migrate(&db).await?;
    } else {
        db::require_migrated(&db).await?;
    }
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
                tracing::info!(operator.id = %o.id, operator.username = %o.username, "operator created")
            }
            None => tracing::info!(operator.username = %user, "operator already exists"),
        }
    }
    if let Some((user, password)) = &config.admin {
        match account::create_account(db, Role::Merchant, None, user, password).await? {
            Some(m) => {
                tracing::info!(merchant.id = %m.id, merchant.username = %m.username, "merchant created")
            }
            None => tracing::info!(merchant.username = %user, "merchant already exists"),
        }
        if config.demo {
            if let Some(id) = activity::demo::create_demo(db, user).await? {
                tracing::info!(
                    activity.id = id,
                    "demo sale created; it starts in 3 minutes"
                );
            }
        }
    }
    Ok(())
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
        let sessions = Arc::new(
            SessionKeys::new(&config.secret.0, config.session_ttl, config.cookie_secure)
                .accepting(config.secret_previous.as_ref().map(|s| &s.0[..])),
        );
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
        )
        .accepting(config.secret_previous.as_ref().map(|s| &s.0[..]));
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
        )
        .accepting(config.secret_previous.as_ref().map(|s| &s.0[..]));
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
            heat: Heat::new(
                config.hot_views_per_sec,
                redis.clone(),
                db.clone(),
                activities.clone(),
                metrics.clone(),
            ),
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
