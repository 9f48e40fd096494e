//! Every setting: a flag of `server` or its environment variable, each checked as it is read
//! (the value parsers beside the struct), the ones a deployed process must be given, and the
//! table docs/configuration.md shows.

#[cfg(feature = "bench")]
use super::LAYERS;
use super::{DEFAULT_AMQP_URL, DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL};
use clap::builder::{BoolishValueParser, RangedU64ValueParser};
use std::net::SocketAddr;

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
    /// The most PostgreSQL connections this process opens (docs/deploy.md "Connections": every
    /// process's pool at its largest must fit the server's `max_connections`).
    #[arg(long, env = "SECKILL_DB_CONNECTIONS", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub db_connections: u32,
    /// Whether `serve` and `worker` apply this release's migrations as they start. Unset: yes on
    /// a development box, no where `SECKILL_DEPLOYED` is on (the release's migrations Job, or
    /// `server migrate`, applies them first, docs/deploy.md "Upgrades").
    #[arg(long, env = "SECKILL_MIGRATE_ON_START", value_parser = BoolishValueParser::new())]
    pub migrate_on_start: Option<bool>,
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
    /// During a rotation, the secret before `SECKILL_SECRET`: cookies and buy paths signed with it
    /// are still accepted, nothing new is signed with it (docs/deploy.md "The secret").
    #[arg(long, env = "SECKILL_SECRET_PREVIOUS", hide_env_values = true)]
    pub secret_previous: Option<String>,
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
    /// The gate also writes a record per granted reservation (`{a:ID.S}:tok:UUID`), as the
    /// release before did: for a rolling upgrade from it, whose polls and payments read only
    /// that record (docs/deploy.md "Upgrades"). Off: the shard's
    /// unsettled set and owners hash say a reservation's state, one write a batch.
    #[arg(long, env = "SECKILL_GATE_TOKEN_RECORDS", value_parser = BoolishValueParser::new())]
    pub gate_token_records: bool,
    /// The gate also reads and writes the record of each Idempotency-Key as the release before
    /// did (`{a:ID.S}:idem:USER:KEY`, one key each): for a rolling upgrade from it, whose keyed
    /// retries read only those (docs/deploy.md "Upgrades"). Off: the shard's one hash of first
    /// answers, one read and one write a batch.
    #[arg(long, env = "SECKILL_GATE_IDEMPOTENCY_STRINGS", value_parser = BoolishValueParser::new())]
    pub gate_idempotency_strings: bool,
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
    /// Where `server worker` serves its `/metrics` (with `SECKILL_METRICS_TOKEN`), `/healthz` and
    /// `/readyz` (host:port).
    #[arg(long, env = "SECKILL_WORKER_ADDR", default_value = "127.0.0.1:3001")]
    pub worker_addr: SocketAddr,
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
    /// How often the workers look at each Redis node's append-only file and rewrite one grown
    /// enough while no sale is on (`pipeline/compaction.rs`), in seconds; 0 leaves rewrites to
    /// Redis's own `auto-aof-rewrite-percentage`.
    #[arg(long, env = "SECKILL_AOF_CHECK_EVERY_SECS", default_value_t = 30)]
    pub aof_check_every_secs: u64,
    /// An AOF is rewritten between sales once it has grown by this share of its size after the
    /// last rewrite, in percent (as Redis's `auto-aof-rewrite-percentage`)…
    #[arg(long, env = "SECKILL_AOF_REWRITE_GROWTH_PERCENT", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub aof_rewrite_growth_percent: u64,
    /// … and by at least this many mebibytes (as Redis's `auto-aof-rewrite-min-size`).
    #[arg(long, env = "SECKILL_AOF_REWRITE_MIN_MB", default_value_t = 64)]
    pub aof_rewrite_min_mb: u64,
    /// An AOF grown by this many mebibytes since its last rewrite is rewritten even during a
    /// sale: the disk's safety valve (the manifests' volumes hold 10 GiB).
    #[arg(long, env = "SECKILL_AOF_REWRITE_CEILING_MB", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub aof_rewrite_ceiling_mb: u64,
    /// A sale counts as on, and no AOF is rewritten for it, from this many seconds before its
    /// start (the crowd gathers before it) until it ends or is sold out in the database.
    #[arg(long, env = "SECKILL_AOF_QUIET_LEAD_SECS", default_value_t = 600)]
    pub aof_quiet_lead_secs: u64,
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
    /// How log lines are written: `json`, one object a line with the request's id on each line of
    /// a request (for a log collector), or `text` (for a person). Unset: JSON when deployed, text
    /// on a developer's box.
    #[arg(long, env = "SECKILL_LOG_FORMAT", value_parser = ["json", "text"])]
    pub log_format: Option<String>,
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
    /// Views a second of one sale (its page and its stock poll, over every instance) from which
    /// it is hot for a minute: every instance serves its units left from memory, refreshed once a
    /// second (docs/operations.md "Hot sales").
    #[arg(long, env = "SECKILL_HOT_VIEWS_PER_SEC", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub hot_views_per_sec: u32,
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
        let Some(secret) = &self.secret else {
            return Err(missing(
                "SECKILL_SECRET",
                "every instance needs the same one, of at least 32 characters",
            ));
        };
        use super::strength::{check, SIGNING, TOKEN};
        check("SECKILL_SECRET", secret, SIGNING)?;
        if let Some(previous) = &self.secret_previous {
            check("SECKILL_SECRET_PREVIOUS", previous, SIGNING)?;
        }
        if let Some(token) = &self.metrics_token {
            check("SECKILL_METRICS_TOKEN", token, TOKEN)?;
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
pub(super) struct FromEnvironment {
    #[command(flatten)]
    pub(super) settings: Settings,
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
