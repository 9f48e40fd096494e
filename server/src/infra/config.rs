//! Configuration: the settings (flags or environment variables, with defaults that match
//! `scripts/services.sh`) and the checked configuration the server runs with.

use super::redis::Target;
use anyhow::bail;
use clap::builder::{BoolishValueParser, RangedU64ValueParser};
use std::{net::SocketAddr, time::Duration};

#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub database_url: String,
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
    /// Prefix of every Redis key this instance touches (tests give each app its own).
    pub redis_prefix: String,
    pub cookie_secure: bool,
    /// CDN prefix for static assets, e.g. `https://cdn.example.com`; empty serves them from here.
    pub asset_base_url: String,
    /// Where cargo-leptos put the site (`pkg/`, favicon).
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
pub const LAYERS: [&str; 8] = [
    "trace",
    "connection",
    "timeout",
    "compression",
    "security_headers",
    "cache_policy",
    "guard_pages",
    "require_json",
];

#[derive(Clone, Copy, Debug)]
pub struct LoginThrottle {
    /// Failures for one username from one client address (the lock is per address).
    pub max_failures_per_user: u32,
    /// Failures for one username from everywhere, past which it gets one attempt a second.
    pub max_failures_per_user_everywhere: u32,
    pub max_failures_per_ip: u32,
    pub window: Duration,
}

/// Bounds on the doors a crowd can knock on without buying: sign-up (in Redis, over every
/// instance), and the captcha, proof-of-work challenge, waiting-room and stock endpoints
/// (in-process token buckets, per instance: a burst, then a steady rate per minute).
#[derive(Clone, Copy, Debug)]
pub struct DoorLimits {
    /// Sign-ups from one client address (an IPv6 /64) within `signup_window`.
    pub signups_per_address: u32,
    pub signup_window: Duration,
    /// Sign-ups over the whole platform per minute (a flood from many addresses).
    pub signups_per_minute: u32,
    /// Concurrent argon2 hashes for sign-ups, apart from the sign-in slots.
    pub signup_hash_concurrency: usize,
    /// The proof of work a sign-up must carry (SHA-256 hashes on average; 0: none asked).
    pub signup_pow_difficulty: u32,
    /// Image captchas per client address per minute (no sign-in needed).
    pub captchas_per_minute: u32,
    /// Proof-of-work challenges per shopper per minute.
    pub challenges_per_minute: u32,
    /// Waiting-room joins and polls per shopper per minute.
    pub queue_per_minute: u32,
    /// Stock reads per client address per minute.
    pub stock_per_minute: u32,
}

impl Default for DoorLimits {
    fn default() -> Self {
        DoorLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for DoorLimits {
    fn from(s: &Settings) -> Self {
        DoorLimits {
            signups_per_address: s.signups_per_address,
            signup_window: Duration::from_secs(s.signup_window_secs),
            signups_per_minute: s.signups_per_minute,
            signup_hash_concurrency: s.signup_hash_concurrency,
            signup_pow_difficulty: s.signup_pow_difficulty,
            captchas_per_minute: s.captchas_per_minute,
            challenges_per_minute: s.challenges_per_minute,
            queue_per_minute: s.queue_per_minute,
            stock_per_minute: s.stock_per_minute,
        }
    }
}

/// A waiting room's claim window, and the health bounds past which admission slows and stops.
#[derive(Clone, Copy, Debug)]
pub struct QueueLimits {
    /// How long an admitted shopper has to come for the turn before it lapses.
    pub claim: Duration,
    /// Units taken at the gate and not in the database yet (the journal, the queue and the
    /// persister behind): from half of it admission slows, at it admission stops.
    pub max_backlog: i64,
    /// The admission step's Redis round trip: from half of it admission slows, at it it stops.
    pub max_redis: Duration,
    /// Failed bot checks on a sale past which a shopper is kept in its line and never admitted
    /// (0: never).
    pub bot_fails: u32,
    /// Whether a shopper kept out (those bot-check failures, or a blocked client) is told
    /// nothing different from the others (`true`), or refused with `403 blocked`.
    pub shadow: bool,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for QueueLimits {
    fn from(s: &Settings) -> Self {
        QueueLimits {
            claim: Duration::from_millis(s.queue_claim_ms),
            max_backlog: s.queue_max_backlog,
            max_redis: Duration::from_millis(s.queue_max_redis_ms),
            bot_fails: s.queue_bot_fails,
            shadow: s.queue_shadow,
        }
    }
}

/// The buy path's buckets and blocks (per user and per client address) and its admission limit.
#[derive(Clone, Copy, Debug)]
pub struct GateLimits {
    pub user_burst: u32,
    pub user_per_sec: f64,
    pub ip_burst: u32,
    pub ip_per_sec: f64,
    /// Refusals past the bucket, within `block_ms`, before the client is blocked.
    pub strikes_before_block: u32,
    pub block_ms: u64,
    /// Buy requests in the gate at once on this instance; more get `503 overloaded`.
    pub max_in_flight: usize,
    /// The longest a buy waits on Redis (its script, the replica's acknowledgement, a borrowing)
    /// before it is answered `503 overloaded`: a node cut off or paused is refused fast, not held.
    pub deadline: Duration,
    /// How the buys of one stock shard are gathered into one gate call (`buy/batch.rs`).
    pub batching: Batching,
}

/// How the gate's batches are made.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    /// How long the first buy of a batch waits for others (zero: only while the call before is
    /// in Redis).
    pub window: Duration,
    /// The most buys in one call; 1 turns batching off.
    pub max: usize,
    /// Calls of one stock shard in flight at once from this instance.
    pub in_flight: usize,
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for GateLimits {
    fn from(s: &Settings) -> Self {
        GateLimits {
            user_burst: s.user_burst,
            user_per_sec: s.user_per_sec,
            ip_burst: s.ip_burst,
            ip_per_sec: s.ip_per_sec,
            strikes_before_block: s.strikes_before_block,
            block_ms: s.block_ms,
            max_in_flight: s.max_in_flight,
            deadline: Duration::from_millis(s.buy_deadline_ms),
            batching: Batching {
                window: Duration::from_micros(s.gate_batch_window_us),
                max: s.gate_batch_max.max(1),
                in_flight: s.gate_batch_in_flight.max(1),
            },
        }
    }
}

#[derive(Clone)]
pub struct Secret(pub Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Every setting of the server: a flag of `server` or its environment variable (the flag wins; an
/// empty variable counts as unset). `docs/configuration.md`'s table is written from these lines
/// (the test `the_configuration_doc_is_written_from_the_settings` fails when it differs).
#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Settings")]
pub struct Settings {
    /// Listen address (host:port).
    #[arg(long, env = "SECKILL_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// PostgreSQL.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// Redis (one server).
    #[arg(long, env = "REDIS_URL", default_value = DEFAULT_REDIS_URL)]
    pub redis_url: String,
    /// Seed nodes of a Redis Cluster, comma-separated; when set, used instead of `REDIS_URL`.
    #[arg(long, env = "REDIS_CLUSTER_URLS", value_delimiter = ',')]
    pub redis_cluster_urls: Vec<String>,
    /// Replicas that must hold a reservation before its `202` (docs/operations.md); unset: 1 on a
    /// cluster, 0 on one Redis.
    #[arg(long, env = "SECKILL_REDIS_WAIT_REPLICAS")]
    pub redis_wait_replicas: Option<u32>,
    /// How long a buy waits for those replicas before `503`, in milliseconds.
    #[arg(long, env = "SECKILL_REDIS_WAIT_MS", default_value_t = 1000)]
    pub redis_wait_ms: u64,
    /// RabbitMQ; several nodes of a cluster comma-separated (a process moves to the next when
    /// its node dies).
    #[arg(long, env = "AMQP_URL", default_value = DEFAULT_AMQP_URL)]
    pub amqp_url: String,
    /// HMAC key of cookies and buy paths (at least 32 characters); every instance behind a
    /// balancer needs the same one. Unset: one is generated and printed, for this process only.
    #[arg(long, env = "SECKILL_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Prefix of every Redis key (no braces: they name Redis Cluster hash tags).
    #[arg(long, env = "SECKILL_REDIS_PREFIX", default_value = "sk:")]
    pub redis_prefix: String,
    /// Prefix of the RabbitMQ exchange and queue names.
    #[arg(long, env = "SECKILL_AMQP_PREFIX", default_value = "seckill")]
    pub amqp_prefix: String,
    /// Idle RabbitMQ queues expire after this many milliseconds (for tests; unset in production).
    #[arg(long, env = "SECKILL_QUEUE_EXPIRES_MS")]
    pub queue_expires_ms: Option<u32>,
    /// The site is served over HTTPS: the cookie becomes `__Host-sid` with `Secure`, and HSTS is
    /// sent (docs/security.md).
    #[arg(long, env = "SECKILL_COOKIE_SECURE", value_parser = BoolishValueParser::new())]
    pub cookie_secure: bool,
    /// CDN prefix of the static assets, e.g. `https://cdn.example.com`; empty serves them from here.
    #[arg(long, env = "SECKILL_ASSET_BASE_URL", default_value = "")]
    pub asset_base_url: String,
    /// Where the built site is (the wasm, the styles, the favicon).
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: String,
    /// The bearer token (at least 16 characters) `/metrics` asks for; unset, `/metrics` is off.
    #[arg(long, env = "SECKILL_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// How many proxies in front append to `X-Forwarded-For`: `1` (or `true`) takes the client
    /// address from the last hop (a balancer, e.g. this repo's nginx), `2` from the one before it
    /// (a CDN, then a balancer); earlier hops are never believed. `0`/`false`: none, the peer is
    /// the client.
    #[arg(long, env = "SECKILL_TRUST_FORWARDED_FOR", default_value = "0", value_parser = proxies)]
    pub trust_forwarded_for: u8,
    /// Session lifetime, in seconds.
    #[arg(long, env = "SECKILL_SESSION_TTL_SECS", default_value_t = 7 * 24 * 3600)]
    pub session_ttl_secs: u64,
    /// How often each instance re-reads the sessions ended since its last look, in seconds
    /// (1 to 30; a lost broadcast is honoured within this).
    #[arg(long, env = "SECKILL_SESSION_RELOAD_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=30))]
    pub session_reload_secs: u64,
    /// Sign-in: failures for one username from one client address before that address is locked
    /// out of it for the window.
    #[arg(long, env = "SECKILL_LOGIN_MAX_FAILURES_PER_USER", default_value_t = 5)]
    pub login_max_failures_per_user: u32,
    /// Sign-in: a username's failures from every address in the window, past which it gets one
    /// attempt a second.
    #[arg(
        long,
        env = "SECKILL_LOGIN_MAX_FAILURES_PER_USER_EVERYWHERE",
        default_value_t = 100
    )]
    pub login_max_failures_per_user_everywhere: u32,
    /// Sign-in: failed attempts from one address over every username in the window.
    #[arg(long, env = "SECKILL_LOGIN_MAX_FAILURES_PER_IP", default_value_t = 50)]
    pub login_max_failures_per_ip: u32,
    /// Sign-in: the window of those counts, in seconds.
    #[arg(long, env = "SECKILL_LOGIN_WINDOW_SECS", default_value_t = 900)]
    pub login_window_secs: u64,
    /// Concurrent argon2 computations of sign-ins (the rest wait, so a login flood cannot starve
    /// the buy path); unset: the number of cores.
    #[arg(long, env = "SECKILL_PASSWORD_HASH_CONCURRENCY")]
    pub password_hash_concurrency: Option<usize>,
    /// Sign-ups from one client address (an IPv6 /64) per sign-up window.
    #[arg(long, env = "SECKILL_SIGNUPS_PER_ADDRESS", default_value_t = 10)]
    pub signups_per_address: u32,
    /// The sign-up window, in seconds.
    #[arg(long, env = "SECKILL_SIGNUP_WINDOW_SECS", default_value_t = 3600)]
    pub signup_window_secs: u64,
    /// Sign-ups over the whole platform per minute (a flood from many addresses).
    #[arg(long, env = "SECKILL_SIGNUPS_PER_MINUTE", default_value_t = 600)]
    pub signups_per_minute: u32,
    /// Concurrent argon2 hashes of sign-ups, apart from the sign-in's.
    #[arg(long, env = "SECKILL_SIGNUP_HASH_CONCURRENCY", default_value_t = 1,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub signup_hash_concurrency: usize,
    /// The proof of work a sign-up carries (SHA-256 hashes on average, 1,000 to 10,000,000);
    /// `0` asks none.
    #[arg(long, env = "SECKILL_SIGNUP_POW_DIFFICULTY", default_value_t = 30_000, value_parser = pow_difficulty)]
    pub signup_pow_difficulty: u32,
    /// Image captchas per client address per minute, per instance.
    #[arg(long, env = "SECKILL_CAPTCHAS_PER_MINUTE", default_value_t = 30)]
    pub captchas_per_minute: u32,
    /// Proof-of-work challenges per shopper per minute, per instance.
    #[arg(long, env = "SECKILL_CHALLENGES_PER_MINUTE", default_value_t = 60)]
    pub challenges_per_minute: u32,
    /// Waiting-room joins and polls per shopper per minute, per instance.
    #[arg(long, env = "SECKILL_QUEUE_PER_MINUTE", default_value_t = 300)]
    pub queue_per_minute: u32,
    /// Stock reads per client address per minute, per instance.
    #[arg(long, env = "SECKILL_STOCK_PER_MINUTE", default_value_t = 3000)]
    pub stock_per_minute: u32,
    /// The buy token bucket per shopper: its burst.
    #[arg(long, env = "SECKILL_USER_BURST", default_value_t = 5)]
    pub user_burst: u32,
    /// The buy token bucket per shopper: its refill per second.
    #[arg(long, env = "SECKILL_USER_PER_SEC", default_value_t = 1.0)]
    pub user_per_sec: f64,
    /// The buy token bucket per client address: its burst.
    #[arg(long, env = "SECKILL_IP_BURST", default_value_t = 400)]
    pub ip_burst: u32,
    /// The buy token bucket per client address: its refill per second.
    #[arg(long, env = "SECKILL_IP_PER_SEC", default_value_t = 200.0)]
    pub ip_per_sec: f64,
    /// Refusals past a bucket, within a block's length, before the client is blocked.
    #[arg(long, env = "SECKILL_STRIKES_BEFORE_BLOCK", default_value_t = 30)]
    pub strikes_before_block: u32,
    /// A block's length, in milliseconds.
    #[arg(long, env = "SECKILL_BLOCK_MS", default_value_t = 60_000)]
    pub block_ms: u64,
    /// Buys in the gate at once on this instance before `503 overloaded`.
    #[arg(long, env = "SECKILL_MAX_IN_FLIGHT", default_value_t = 512)]
    pub max_in_flight: usize,
    /// The longest a buy waits on Redis before `503 overloaded`, in milliseconds (above
    /// `SECKILL_REDIS_WAIT_MS`, which it includes).
    #[arg(long, env = "SECKILL_BUY_DEADLINE_MS", default_value_t = 1_500,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub buy_deadline_ms: u64,
    /// How long the first buy of a batch waits for others to reach its stock shard, in
    /// microseconds (0: buys gather only while the shard's call before is in Redis).
    #[arg(long, env = "SECKILL_GATE_BATCH_WINDOW_US", default_value_t = 0)]
    pub gate_batch_window_us: u64,
    /// The most buys of one stock shard decided in one gate call (1: no batching; at most 256,
    /// which keeps a batch's keys within what one Lua `unpack` takes).
    #[arg(long, env = "SECKILL_GATE_BATCH_MAX", default_value_t = 32,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub gate_batch_max: usize,
    /// Gate calls of one stock shard in flight at once from this instance.
    #[arg(long, env = "SECKILL_GATE_BATCH_IN_FLIGHT", default_value_t = 4,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub gate_batch_in_flight: usize,
    /// Merchant of "Default shop" created at start-up if missing (with its password).
    #[arg(long, env = "SECKILL_ADMIN_USER", requires = "admin_password")]
    pub admin_user: Option<String>,
    /// The password of that merchant.
    #[arg(
        long,
        env = "SECKILL_ADMIN_PASSWORD",
        hide_env_values = true,
        requires = "admin_user"
    )]
    pub admin_password: Option<String>,
    /// Platform operator created at start-up if missing (with its password).
    #[arg(long, env = "SECKILL_OPERATOR_USER", requires = "operator_password")]
    pub operator_user: Option<String>,
    /// The password of that operator.
    #[arg(
        long,
        env = "SECKILL_OPERATOR_PASSWORD",
        hide_env_values = true,
        requires = "operator_user"
    )]
    pub operator_password: Option<String>,
    /// `serve` runs no relay or persister (they run in `server worker` processes).
    #[arg(long, env = "SECKILL_NO_WORKERS", value_parser = BoolishValueParser::new())]
    pub no_workers: bool,
    /// Persister consumers per worker process, each on its own channel: while one waits for
    /// PostgreSQL to commit, another marks Redis and acknowledges.
    #[arg(long, env = "SECKILL_PERSISTERS", default_value_t = 2,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub persisters: usize,
    /// Reservations queues (quorum, each led by the node with the fewest leaders) the relay
    /// spreads the stock shards' journals over; every one has a persister consumer.
    #[arg(long, env = "SECKILL_RESERVATION_QUEUES", default_value_t = 1,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub reservation_queues: usize,
    /// The shortest payment window a merchant may set, in seconds (docs/api.md; tests go lower).
    #[arg(long, env = "SECKILL_MIN_PAYMENT_WINDOW_SECS", default_value_t = 60)]
    pub min_payment_window_secs: i32,
    /// How often the deadline sweeper looks for overdue orders whose message went missing, in
    /// milliseconds.
    #[arg(long, env = "SECKILL_SWEEP_EVERY_MS", default_value_t = 2_000)]
    pub sweep_every_ms: u64,
    /// How often the stock in Redis is compared with the database and repaired, in seconds.
    #[arg(long, env = "SECKILL_RECONCILE_EVERY_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub reconcile_every_secs: u64,
    /// A client must send its request head within this many seconds, else the connection is
    /// closed (slow-header clients cannot hold connections open); so an idle keep-alive
    /// connection is closed after it too, and a proxy in front must close its idle connections
    /// to the instances sooner (the nginx template: 5 s).
    #[arg(long, env = "SECKILL_HEADER_READ_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_secs: u64,
    /// A request, its body included, must be answered within this many seconds, else `408`.
    #[arg(long, env = "SECKILL_REQUEST_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_secs: u64,
    /// After SIGTERM the listener closes at once (new connections are refused, so a balancer
    /// sends them elsewhere) and the requests in flight get this many seconds to be answered
    /// before the process exits. An orchestrator's grace period must be longer (docs/deploy.md).
    #[arg(long, env = "SECKILL_DRAIN_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub drain_secs: u64,
    /// Deployed (the image sets it): the secret and the connections must be given, never the
    /// loopback defaults of a development box nor a secret generated for one process; a missing
    /// one is named and the process exits non-zero.
    #[arg(long, env = "SECKILL_DEPLOYED", value_parser = BoolishValueParser::new())]
    pub deployed: bool,
    /// How long an admitted shopper has to come for the turn (open the buy panel) before the
    /// admission lapses and goes to the next in line, in milliseconds (1,000 to 90,000).
    #[arg(long, env = "SECKILL_QUEUE_CLAIM_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(1_000..=90_000))]
    pub queue_claim_ms: u64,
    /// A sale's units taken at the gate and not in the database yet (the journal, the queue,
    /// the persister behind) past which its waiting room stops admitting; from half of it,
    /// admission slows.
    #[arg(long, env = "SECKILL_QUEUE_MAX_BACKLOG", default_value_t = 20_000,
          value_parser = clap::value_parser!(i64).range(2..))]
    pub queue_max_backlog: i64,
    /// The admission step's Redis round trip, in milliseconds, past which admission stops (from
    /// half of it, it slows).
    #[arg(long, env = "SECKILL_QUEUE_MAX_REDIS_MS", default_value_t = 250,
          value_parser = clap::value_parser!(u64).range(2..))]
    pub queue_max_redis_ms: u64,
    /// A shopper whose bot check failed this many times on a sale with a waiting room is kept
    /// in its line and never admitted (0: never), as a blocked client is.
    #[arg(long, env = "SECKILL_QUEUE_BOT_FAILS", default_value_t = 5)]
    pub queue_bot_fails: u32,
    /// Whether a shopper the waiting room keeps out sees the line like everyone (`true`: an
    /// endless wait tells a bot nothing) or gets `403 blocked`.
    #[arg(long, env = "SECKILL_QUEUE_SHADOW", default_value_t = true,
          action = clap::ArgAction::Set, value_parser = BoolishValueParser::new())]
    pub queue_shadow: bool,
    /// Create a demo sale at start-up (`make run` does).
    #[arg(long, env = "SECKILL_DEMO", value_parser = BoolishValueParser::new())]
    pub demo: bool,
    /// Middleware to leave out, comma-separated names of [`LAYERS`]: only for `make bench` to
    /// measure what each layer costs. It drops protections, so only a build with the `bench`
    /// feature has it.
    #[cfg(feature = "bench")]
    #[arg(long, env = "SECKILL_BENCH_WITHOUT_LAYERS", value_delimiter = ',', value_parser = layer)]
    pub bench_without_layers: Vec<String>,
}

/// `SECKILL_TRUST_FORWARDED_FOR`: a number of proxies, or a yes/no for one/none.
fn proxies(value: &str) -> Result<u8, String> {
    match value {
        "0" | "false" | "no" | "off" => Ok(0),
        "1" | "true" | "yes" | "on" => Ok(1),
        n => n
            .parse()
            .map_err(|_| "1/true (one proxy in front) or the number of proxies".to_string()),
    }
}

fn pow_difficulty(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(0) => Ok(0),
        Ok(n) if (1_000..=10_000_000).contains(&n) => Ok(n),
        _ => Err("0 (off) or 1000 to 10000000".to_string()),
    }
}

#[cfg(feature = "bench")]
fn layer(value: &str) -> Result<String, String> {
    let value = value.trim();
    if LAYERS.contains(&value) {
        Ok(value.to_string())
    } else {
        Err(format!("no layer {value} (known: {})", LAYERS.join(", ")))
    }
}

/// What a command connects to, for the settings a deployed process must be given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Needs {
    /// PostgreSQL alone (`migrate`, `create-*`).
    Database,
    /// PostgreSQL, Redis, RabbitMQ and the secret (`serve`, `worker`, `reconcile`, …).
    Everything,
}

impl Settings {
    /// On a deployed process (`SECKILL_DEPLOYED`), the first setting that `needs` requires and
    /// that was not given (left to its development default), as the one line an operator reads.
    /// `matches` are the parsed arguments, which know whether a value was given by a flag or the
    /// environment or came from a default.
    pub fn check_given(&self, matches: &clap::ArgMatches, needs: Needs) -> anyhow::Result<()> {
        if !self.deployed {
            return Ok(());
        }
        let given = |id: &str| {
            matches
                .value_source(id)
                .is_some_and(|s| s != clap::parser::ValueSource::DefaultValue)
        };
        let missing = |name: &str, why: &str| {
            anyhow::anyhow!("{name} is not set: {why} (SECKILL_DEPLOYED is on; docs/deploy.md)")
        };
        if !given("database_url") {
            return Err(missing("DATABASE_URL", "the PostgreSQL to use"));
        }
        if needs == Needs::Database {
            return Ok(());
        }
        if !given("redis_url") && !given("redis_cluster_urls") {
            return Err(missing(
                "REDIS_URL or REDIS_CLUSTER_URLS",
                "the Redis to use",
            ));
        }
        if !given("amqp_url") {
            return Err(missing("AMQP_URL", "the RabbitMQ to use"));
        }
        if self.secret.is_none() {
            return Err(missing(
                "SECKILL_SECRET",
                "every instance needs the same one, of at least 32 characters",
            ));
        }
        Ok(())
    }

    /// Every setting at its default, whatever the environment holds.
    pub fn defaults() -> Settings {
        use clap::{CommandFactory, FromArgMatches};
        let matches = FromEnvironment::command()
            .mut_args(|arg| arg.env(None::<&str>))
            .get_matches_from(["server"]);
        FromEnvironment::from_arg_matches(&matches)
            .expect("every setting has a default or is optional")
            .settings
    }
}

/// The settings from the environment alone (what a process started without flags reads).
#[derive(clap::Parser)]
#[command(name = "server")]
struct FromEnvironment {
    #[command(flatten)]
    settings: Settings,
}

/// The setting variables set to an empty string are removed, so that `VAR=` means unset, as it
/// does to a shell. Call it before any thread starts (it edits the process's environment).
pub fn forget_empty_settings() {
    use clap::CommandFactory;
    for arg in FromEnvironment::command().get_arguments() {
        if let Some(name) = arg.get_env() {
            if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
                std::env::remove_var(name);
            }
        }
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
            amqp_url: s.amqp_url,
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

/// The table of every setting, as `docs/configuration.md` shows it (Markdown, one row each).
pub fn settings_table() -> String {
    use clap::CommandFactory;
    let mut table = String::from("| variable | flag | default | meaning |\n|---|---|---|---|\n");
    for arg in FromEnvironment::command().get_arguments() {
        let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let env = env.to_string_lossy();
        if env.starts_with("SECKILL_BENCH_") {
            continue; // not in a production build (docs/benchmarks.md)
        }
        let default = match arg.get_default_values() {
            [] => "unset".to_string(),
            [v] if v.is_empty() => "empty".to_string(),
            values => values
                .iter()
                .map(|v| format!("`{}`", v.to_string_lossy()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let default = if arg.get_action().takes_values() {
            default
        } else {
            "off".into()
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| {
                h.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        table.push_str(&format!("| `{env}` | `--{long}` | {default} | {help} |\n"));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
        let mut all = vec!["server"];
        all.extend_from_slice(args);
        FromEnvironment::try_parse_from(all).map(|p| p.settings)
    }

    /// A lost session broadcast is honoured within the reload period, so the period has a bound
    /// an operator cannot set past.
    #[test]
    fn a_session_reload_period_past_thirty_seconds_is_refused() {
        let period = |secs: &str| {
            parse(&["--session-reload-secs", secs])
                .ok()
                .map(|s| s.session_reload_secs)
        };
        assert_eq!(period("30"), Some(30));
        assert_eq!(period("31"), None);
        assert_eq!(period("0"), None);
    }

    /// `UPDATE_DOCS=1 cargo test -p server --lib the_configuration_doc` rewrites the table.
    #[test]
    fn the_configuration_doc_is_written_from_the_settings() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = ("<!-- settings:begin -->\n", "<!-- settings:end -->");
        let start = doc
            .find(begin)
            .expect("the doc marks where the table begins")
            + begin.len();
        let stop = doc.find(end).expect("the doc marks where the table ends");
        let table = settings_table();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
        } else {
            assert_eq!(
                doc[start..stop],
                table,
                "docs/configuration.md differs from the settings: UPDATE_DOCS=1 cargo test -p server --lib the_configuration_doc"
            );
        }
        assert!(table.contains("`SECKILL_ADDR` | `--addr` | `127.0.0.1:3000` |"));
    }

    #[test]
    fn settings_are_checked_as_they_are_read() {
        let defaults = Settings::defaults();
        assert_eq!(defaults.addr.to_string(), "127.0.0.1:3000");
        assert_eq!(DoorLimits::default().signup_pow_difficulty, 30_000);
        assert_eq!(GateLimits::default().max_in_flight, 512);
        assert_eq!(
            parse(&["--trust-forwarded-for", "true"])
                .unwrap()
                .trust_forwarded_for,
            1
        );
        assert_eq!(
            parse(&["--trust-forwarded-for", "2"])
                .unwrap()
                .trust_forwarded_for,
            2
        );
        assert!(parse(&["--trust-forwarded-for", "maybe"]).is_err());
        assert!(parse(&["--signup-pow-difficulty", "5"]).is_err());
        assert_eq!(
            parse(&["--signup-pow-difficulty", "0"])
                .unwrap()
                .signup_pow_difficulty,
            0
        );
        assert!(parse(&["--session-reload-secs", "31"]).is_err());
        assert!(parse(&["--persisters", "0"]).is_err());
        assert!(parse(&["--gate-batch-max", "0"]).is_err());
        assert!(parse(&["--gate-batch-max", "257"]).is_err());
        assert!(parse(&["--gate-batch-in-flight", "0"]).is_err());
        assert!(
            parse(&["--admin-user", "ann"]).is_err(),
            "a merchant needs a password"
        );
        let cluster = parse(&["--redis-cluster-urls", "redis://a:1,redis://b:2"]).unwrap();
        assert_eq!(cluster.redis_cluster_urls, ["redis://a:1", "redis://b:2"]);
        let short = Settings {
            secret: Some("too short".into()),
            ..defaults.clone()
        };
        assert!(Config::from_settings(short).is_err());
        let braces = Settings {
            redis_prefix: "{sk}:".into(),
            secret: Some("x".repeat(32)),
            ..defaults
        };
        assert!(Config::from_settings(braces).is_err());
    }

    #[test]
    fn a_deployed_process_names_the_first_setting_it_lacks() {
        use clap::{CommandFactory, FromArgMatches};
        // What a process started with these flags and no environment would find missing.
        let missing = |args: &[&str], needs| {
            let mut all = vec!["server"];
            all.extend_from_slice(args);
            let matches = FromEnvironment::command()
                .mut_args(|arg| arg.env(None::<&str>))
                .try_get_matches_from(all)
                .unwrap();
            let settings = FromEnvironment::from_arg_matches(&matches)
                .unwrap()
                .settings;
            settings
                .check_given(&matches, needs)
                .err()
                .map(|e| e.to_string())
        };
        let first = |args: &[&str], needs| missing(args, needs).unwrap_or_default();
        assert!(first(&["--deployed"], Needs::Database).starts_with("DATABASE_URL is not set"));
        assert_eq!(missing(&[], Needs::Everything), None, "a development box");
        // Given, even when it equals the default (a box whose PostgreSQL is where the default says).
        let database = ["--deployed", "--database-url", DEFAULT_DATABASE_URL];
        assert_eq!(missing(&database, Needs::Database), None);
        assert!(first(&database, Needs::Everything).starts_with("REDIS_URL or REDIS_CLUSTER_URLS"));
        let redis = [&database[..], &["--redis-cluster-urls", "redis://r1:6379"]].concat();
        assert!(first(&redis, Needs::Everything).starts_with("AMQP_URL is not set"));
        let broker = [&redis[..], &["--amqp-url", "amqp://mq:5672/%2f"]].concat();
        let message = first(&broker, Needs::Everything);
        assert!(
            message.starts_with("SECKILL_SECRET is not set"),
            "{message}"
        );
        assert!(!message.contains('\n'), "one line: {message}");
        let secret = "s".repeat(32);
        let complete = [&broker[..], &["--secret", &secret]].concat();
        assert_eq!(missing(&complete, Needs::Everything), None);
    }

    #[test]
    #[cfg(not(feature = "bench"))]
    fn a_production_build_has_no_switch_to_leave_a_layer_out() {
        use clap::CommandFactory;
        assert!(parse(&["--bench-without-layers", "trace"]).is_err());
        assert!(FromEnvironment::command().get_arguments().all(|a| a
            .get_env()
            .is_none_or(|e| e != "SECKILL_BENCH_WITHOUT_LAYERS")));
    }

    #[test]
    #[cfg(feature = "bench")]
    fn a_bench_build_names_the_layers_it_leaves_out_and_refuses_unknown_ones() {
        let settings = parse(&["--bench-without-layers", "trace, timeout"]).unwrap();
        assert_eq!(settings.bench_without_layers, ["trace", "timeout"]);
        assert!(parse(&["--bench-without-layers", "tls"]).is_err());
    }
}
