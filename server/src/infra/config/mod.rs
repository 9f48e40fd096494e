//! Configuration: the settings (flags or environment variables, with defaults that match
//! `scripts/services.sh`) and the checked configuration the server runs with.

//!
//! By area: `settings.rs` (every flag and variable, with the rules each value is checked by as
//! it is read, and the table docs/configuration.md shows), `limits.rs` (the sections the parts
//! take: doors, line, gate, sign-in); this file, the configuration checked as a whole.

mod limits;
mod settings;
pub mod strength;
#[cfg(test)]
mod tests;

pub use limits::*;
use settings::FromEnvironment;
pub use settings::*;

use super::redis::Target;
use anyhow::bail;
use std::{net::SocketAddr, time::Duration};

#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub database_url: String,
    /// The PostgreSQL pool's size (`SECKILL_DB_CONNECTIONS`).
    pub db_connections: u32,
    /// `serve` and `worker` migrate as they start (a development box) or leave it to `migrate`.
    pub migrate_on_start: bool,
    /// `server worker`'s listener for its metrics and probes.
    pub worker_addr: SocketAddr,
    /// One Redis (`REDIS_URL`) or a Redis Cluster (`REDIS_CLUSTER_URLS`, comma-separated seeds).
    pub redis: Target,
    /// Replicas that must hold a reservation before its `202` (see `infra/replication.rs`);
    /// `SECKILL_REDIS_WAIT_REPLICAS`, by default 1 on a cluster and 0 on a single Redis.
    pub redis_wait_replicas: u32,
    /// How long a buy waits for them (`SECKILL_REDIS_WAIT_MS`, 1 s), else `503`.
    pub redis_wait_timeout: Duration,
    pub amqp_url: String,
    /// HMAC key for cookies and buy paths. Never logged.
    pub secret: Secret,
    /// The key before a rotation, still accepted (`SECKILL_SECRET_PREVIOUS`).
    pub secret_previous: Option<Secret>,
    /// Prefix of every Redis key this instance touches (tests give each app its own).
    pub redis_prefix: String,
    pub cookie_secure: bool,
    /// CDN prefix for static assets, e.g. `https://cdn.example.com`; empty serves them from here.
    pub asset_base_url: String,
    /// Where the site build put the site (`pkg/`, favicon).
    pub site_root: String,
    pub session_ttl: Duration,
    /// How often each instance re-reads the sessions ended since its last look (a lost
    /// broadcast is honoured within this; at most 30 s).
    pub session_reload: Duration,
    pub login_throttle: LoginThrottle,
    pub doors: DoorLimits,
    /// The bearer token `/metrics` asks for (`SECKILL_METRICS_TOKEN`); unset, `/metrics` is off.
    pub metrics_token: Option<Secret>,
    /// Proxies in front that append to `X-Forwarded-For` (0: none, the peer is the client; 1: a
    /// load balancer, whose hop is the last; 2: a CDN and a load balancer…).
    pub trusted_proxies: u8,
    /// Views a second of one sale from which it is hot (`buy/heat.rs`).
    pub hot_views_per_sec: u32,
    /// Merchant to create at start-up if missing (in the default shop).
    pub admin: Option<(String, String)>,
    /// Platform operator to create at start-up if missing.
    pub operator: Option<(String, String)>,
    pub gate: GateLimits,
    /// Prefix of the RabbitMQ exchange and queue names.
    pub amqp_prefix: String,
    /// Idle queues expire after this long (for tests; unset in production).
    pub queue_expires_ms: Option<u32>,
    /// Run the relay and the persister in this process (`serve` does unless told not to).
    pub run_workers: bool,
    /// The shortest payment window a merchant may set (docs/api.md: 60 s; tests go lower).
    pub min_payment_window_secs: i32,
    /// How often the deadline sweeper looks for overdue orders whose message went missing.
    pub sweep_every: Duration,
    /// How often the stock in Redis is compared with the database (`pipeline/reconcile.rs`).
    pub reconcile_every: Duration,
    /// How often the workers look at the AOFs (`pipeline/compaction.rs`); `None`: never.
    pub aof_check_every: Option<Duration>,
    /// When they rewrite one.
    pub aof_policy: AofPolicy,
    /// Persister consumers per worker process, each on its own channel: while one waits for
    /// PostgreSQL to commit, another marks Redis and acknowledges.
    pub persisters: usize,
    /// Reservations queues the relay spreads the stock shards' journals over (one leader each).
    pub reservation_queues: usize,
    /// A client must send its request head within this time, or the connection is closed
    /// (slow-header clients cannot hold connections open).
    pub header_read_timeout: Duration,
    /// A request, its body included, must be answered within this time, else `408`.
    pub request_timeout: Duration,
    /// How long the requests in flight at SIGTERM get (`SECKILL_DRAIN_SECS`).
    pub drain: Duration,
    /// The waiting room's claim window and health bounds.
    pub queue: QueueLimits,
    /// Create a demo sale at start-up (for `make run`).
    pub demo: bool,
    /// Concurrent argon2 computations; the rest wait, so a login flood cannot starve the buy path.
    pub password_hash_concurrency: usize,
    /// Middleware left out, by name (`SECKILL_BENCH_WITHOUT_LAYERS`, comma-separated, from
    /// [`LAYERS`]): only for `make bench` to measure what each layer costs, and only read by a
    /// build with the `bench` feature: it drops protections (timeouts, security headers, the
    /// console's page guard), so a production build never reads it.
    pub layers_off: Vec<String>,
}

/// The middleware of the server's stack, by the names `SECKILL_BENCH_WITHOUT_LAYERS` takes.
pub const LAYERS: [&str; 10] = [
    "request_id",
    "http_metrics",
    "trace",
    "connection",
    "timeout",
    "compression",
    "security_headers",
    "cache_policy",
    "guard_pages",
    "require_json",
];

#[derive(Clone)]
pub struct Secret(pub Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

pub const DEFAULT_DATABASE_URL: &str = "postgres://seckill@127.0.0.1:55432/seckill";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:56379/0";
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:55672/%2f";

impl Config {
    /// The configuration from the environment alone (the load tool's way to read it).
    pub fn from_env() -> anyhow::Result<Config> {
        use clap::Parser;
        let parsed = FromEnvironment::try_parse_from(["server"])
            .map_err(|e| anyhow::anyhow!("{}", e.render()))?;
        Config::from_settings(parsed.settings)
    }

    /// The settings checked against each other and turned into the configuration.
    pub fn from_settings(s: Settings) -> anyhow::Result<Config> {
        if s.redis_prefix.contains(['{', '}']) {
            bail!(
                "SECKILL_REDIS_PREFIX must not contain braces (they name Redis Cluster hash tags)"
            );
        }
        let redis = Target::new(&s.redis_url, &s.redis_cluster_urls);
        let (doors, gate, queue) = (
            DoorLimits::from(&s),
            GateLimits::from(&s),
            QueueLimits::from(&s),
        );
        Ok(Config {
            redis_wait_replicas: s
                .redis_wait_replicas
                .unwrap_or(u32::from(redis.is_cluster())),
            redis_wait_timeout: Duration::from_millis(s.redis_wait_ms.max(1)),
            redis,
            addr: s.addr,
            database_url: s.database_url,
            db_connections: s.db_connections,
            migrate_on_start: s.migrate_on_start.unwrap_or(!s.deployed),
            worker_addr: s.worker_addr,
            amqp_url: s.amqp_url,
            secret_previous: match s.secret_previous {
                Some(p) if p.len() >= 32 => Some(Secret(p.into_bytes())),
                Some(_) => bail!("SECKILL_SECRET_PREVIOUS must be at least 32 characters"),
                None => None,
            },
            secret: secret(s.secret)?,
            redis_prefix: s.redis_prefix,
            cookie_secure: s.cookie_secure,
            asset_base_url: s.asset_base_url.trim_end_matches('/').to_string(),
            site_root: s.site_root,
            session_ttl: Duration::from_secs(s.session_ttl_secs),
            session_reload: Duration::from_secs(s.session_reload_secs),
            login_throttle: LoginThrottle {
                max_failures_per_user: s.login_max_failures_per_user,
                max_failures_per_user_everywhere: s.login_max_failures_per_user_everywhere,
                max_failures_per_ip: s.login_max_failures_per_ip,
                window: Duration::from_secs(s.login_window_secs),
            },
            doors,
            metrics_token: match s.metrics_token {
                Some(t) if t.len() >= 16 => Some(Secret(t.into_bytes())),
                Some(_) => bail!("SECKILL_METRICS_TOKEN must be at least 16 characters"),
                None => None,
            },
            trusted_proxies: s.trust_forwarded_for,
            hot_views_per_sec: s.hot_views_per_sec,
            admin: s.admin_user.zip(s.admin_password),
            operator: s.operator_user.zip(s.operator_password),
            password_hash_concurrency: s.password_hash_concurrency.unwrap_or_else(cores).max(1),
            gate,
            amqp_prefix: s.amqp_prefix,
            queue_expires_ms: s.queue_expires_ms,
            run_workers: !s.no_workers,
            queue,
            demo: s.demo,
            min_payment_window_secs: s.min_payment_window_secs,
            sweep_every: Duration::from_millis(s.sweep_every_ms),
            reconcile_every: Duration::from_secs(s.reconcile_every_secs),
            aof_check_every: (s.aof_check_every_secs > 0)
                .then(|| Duration::from_secs(s.aof_check_every_secs)),
            aof_policy: AofPolicy {
                growth_percent: s.aof_rewrite_growth_percent,
                min_bytes: s.aof_rewrite_min_mb.saturating_mul(1 << 20),
                ceiling_bytes: s.aof_rewrite_ceiling_mb.saturating_mul(1 << 20),
                lead: Duration::from_secs(s.aof_quiet_lead_secs),
            },
            persisters: s.persisters,
            reservation_queues: s.reservation_queues,
            header_read_timeout: Duration::from_secs(s.header_read_timeout_secs),
            request_timeout: Duration::from_secs(s.request_timeout_secs),
            drain: Duration::from_secs(s.drain_secs),
            #[cfg(feature = "bench")]
            layers_off: s.bench_without_layers,
            #[cfg(not(feature = "bench"))]
            layers_off: Vec::new(),
        })
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The HMAC key given, or one generated for this process (said on stderr: its sessions end with it).
fn secret(given: Option<String>) -> anyhow::Result<Secret> {
    match given {
        Some(s) if s.len() >= 32 => Ok(Secret(s.into_bytes())),
        Some(_) => bail!("SECKILL_SECRET must be at least 32 characters"),
        None => {
            let generated = generate_secret();
            eprintln!(
                "SECKILL_SECRET is not set: generated one for this process only \
                 (sessions end at restart and other instances will not accept them):\n  SECKILL_SECRET={generated}"
            );
            Ok(Secret(generated.into_bytes()))
        }
    }
}

pub fn generate_secret() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

/// When a Redis node's AOF is rewritten (`pipeline/compaction.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AofPolicy {
    /// Rewrite once the file has grown by this share of its size after the last rewrite (%).
    pub growth_percent: u64,
    /// … and by at least this many bytes.
    pub min_bytes: u64,
    /// Rewrite even while a sale is on once the file has grown by this many bytes.
    pub ceiling_bytes: u64,
    /// A sale counts as on from this long before its start.
    pub lead: Duration,
}
