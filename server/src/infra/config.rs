//! Configuration from environment variables, with defaults that match `scripts/services.sh`.

use super::redis::Target;
use anyhow::{bail, Context};
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
    /// Persister consumers per worker process, each on its own channel: while one waits for
    /// PostgreSQL to commit, another marks Redis and acknowledges.
    pub persisters: usize,
    /// A client must send its request head within this time, or the connection is closed
    /// (slow-header clients cannot hold connections open).
    pub header_read_timeout: Duration,
    /// A request, its body included, must be answered within this time, else `408`.
    pub request_timeout: Duration,
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

/// The layers a measurement leaves out: read from `SECKILL_BENCH_WITHOUT_LAYERS` by a `bench`
/// build only.
#[cfg(feature = "bench")]
fn layers_off() -> anyhow::Result<Vec<String>> {
    let off: Vec<String> = var_or("SECKILL_BENCH_WITHOUT_LAYERS", "")
        .split(',')
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if let Some(unknown) = off.iter().find(|l| !LAYERS.contains(&l.as_str())) {
        bail!(
            "SECKILL_BENCH_WITHOUT_LAYERS: no layer {unknown} (known: {})",
            LAYERS.join(", ")
        );
    }
    Ok(off)
}

/// Every layer, whatever the environment says: this is not a `bench` build.
#[cfg(not(feature = "bench"))]
fn layers_off() -> anyhow::Result<Vec<String>> {
    Ok(Vec::new())
}

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
        DoorLimits {
            signups_per_address: 10,
            signup_window: Duration::from_secs(3600),
            signups_per_minute: 600,
            signup_hash_concurrency: 1,
            signup_pow_difficulty: 30_000,
            captchas_per_minute: 30,
            challenges_per_minute: 60,
            queue_per_minute: 300,
            stock_per_minute: 3000,
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
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits {
            user_burst: 5,
            user_per_sec: 1.0,
            ip_burst: 400,
            ip_per_sec: 200.0,
            strikes_before_block: 30,
            block_ms: 60_000,
            max_in_flight: 512,
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

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn var_or(name: &str, default: &str) -> String {
    var(name).unwrap_or_else(|| default.to_string())
}

fn flag(name: &str) -> bool {
    matches!(var(name).as_deref(), Some("1" | "true" | "yes" | "on"))
}

fn number<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match var(name) {
        Some(v) => v
            .parse()
            .with_context(|| format!("{name} must be a number")),
        None => Ok(default),
    }
}

pub const DEFAULT_DATABASE_URL: &str = "postgres://seckill@127.0.0.1:55432/seckill";
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:56379/0";
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:55672/%2f";

impl Config {
    pub fn from_env() -> anyhow::Result<Config> {
        let secret = match var("SECKILL_SECRET") {
            Some(s) if s.len() >= 32 => Secret(s.into_bytes()),
            Some(_) => bail!("SECKILL_SECRET must be at least 32 characters"),
            None => {
                let generated = generate_secret();
                eprintln!(
                    "SECKILL_SECRET is not set: generated one for this process only \
                     (sessions end at restart and other instances will not accept them):\n  SECKILL_SECRET={generated}"
                );
                Secret(generated.into_bytes())
            }
        };
        let admin = match (var("SECKILL_ADMIN_USER"), var("SECKILL_ADMIN_PASSWORD")) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => bail!("SECKILL_ADMIN_USER and SECKILL_ADMIN_PASSWORD go together"),
        };
        let operator = match (
            var("SECKILL_OPERATOR_USER"),
            var("SECKILL_OPERATOR_PASSWORD"),
        ) {
            (Some(u), Some(p)) => Some((u, p)),
            (None, None) => None,
            _ => bail!("SECKILL_OPERATOR_USER and SECKILL_OPERATOR_PASSWORD go together"),
        };
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        let redis = Target::new(
            &var_or("REDIS_URL", DEFAULT_REDIS_URL),
            &var("REDIS_CLUSTER_URLS")
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|u| !u.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        );
        Ok(Config {
            redis_wait_replicas: number(
                "SECKILL_REDIS_WAIT_REPLICAS",
                u32::from(redis.is_cluster()),
            )?,
            redis_wait_timeout: Duration::from_millis(number("SECKILL_REDIS_WAIT_MS", 1000)?.max(1)),
            redis,
            addr: var_or("SECKILL_ADDR", "127.0.0.1:3000")
                .parse()
                .context("SECKILL_ADDR must be host:port")?,
            database_url: var_or("DATABASE_URL", DEFAULT_DATABASE_URL),
            amqp_url: var_or("AMQP_URL", DEFAULT_AMQP_URL),
            secret,
            redis_prefix: {
                let prefix = var_or("SECKILL_REDIS_PREFIX", "sk:");
                if prefix.contains(['{', '}']) {
                    bail!("SECKILL_REDIS_PREFIX must not contain braces (they name Redis Cluster hash tags)");
                }
                prefix
            },
            cookie_secure: flag("SECKILL_COOKIE_SECURE"),
            asset_base_url: var_or("SECKILL_ASSET_BASE_URL", "")
                .trim_end_matches('/')
                .to_string(),
            site_root: var_or("LEPTOS_SITE_ROOT", "target/site"),
            session_ttl: Duration::from_secs(number("SECKILL_SESSION_TTL_SECS", 7 * 24 * 3600)?),
            session_reload: Duration::from_secs(
                number("SECKILL_SESSION_RELOAD_SECS", 10u64)?.clamp(1, 30),
            ),
            login_throttle: LoginThrottle {
                max_failures_per_user: number("SECKILL_LOGIN_MAX_FAILURES_PER_USER", 5)?,
                max_failures_per_user_everywhere: number(
                    "SECKILL_LOGIN_MAX_FAILURES_PER_USER_EVERYWHERE",
                    100,
                )?,
                max_failures_per_ip: number("SECKILL_LOGIN_MAX_FAILURES_PER_IP", 50)?,
                window: Duration::from_secs(number("SECKILL_LOGIN_WINDOW_SECS", 900)?),
            },
            doors: {
                let d = DoorLimits::default();
                DoorLimits {
                    signups_per_address: number(
                        "SECKILL_SIGNUPS_PER_ADDRESS",
                        d.signups_per_address,
                    )?,
                    signup_window: Duration::from_secs(number(
                        "SECKILL_SIGNUP_WINDOW_SECS",
                        d.signup_window.as_secs(),
                    )?),
                    signups_per_minute: number("SECKILL_SIGNUPS_PER_MINUTE", d.signups_per_minute)?,
                    signup_hash_concurrency: number(
                        "SECKILL_SIGNUP_HASH_CONCURRENCY",
                        d.signup_hash_concurrency,
                    )?
                    .max(1),
                    signup_pow_difficulty: match number(
                        "SECKILL_SIGNUP_POW_DIFFICULTY",
                        d.signup_pow_difficulty,
                    )? {
                        0 => 0,
                        n if (1_000..=10_000_000).contains(&n) => n,
                        _ => bail!("SECKILL_SIGNUP_POW_DIFFICULTY must be 0 (off) or 1000 to 10000000"),
                    },
                    captchas_per_minute: number(
                        "SECKILL_CAPTCHAS_PER_MINUTE",
                        d.captchas_per_minute,
                    )?,
                    challenges_per_minute: number(
                        "SECKILL_CHALLENGES_PER_MINUTE",
                        d.challenges_per_minute,
                    )?,
                    queue_per_minute: number("SECKILL_QUEUE_PER_MINUTE", d.queue_per_minute)?,
                    stock_per_minute: number("SECKILL_STOCK_PER_MINUTE", d.stock_per_minute)?,
                }
            },
            metrics_token: match var("SECKILL_METRICS_TOKEN") {
                Some(t) if t.len() >= 16 => Some(Secret(t.into_bytes())),
                Some(_) => bail!("SECKILL_METRICS_TOKEN must be at least 16 characters"),
                None => None,
            },
            trusted_proxies: match var("SECKILL_TRUST_FORWARDED_FOR").as_deref() {
                None | Some("0" | "false" | "no" | "off") => 0,
                Some("1" | "true" | "yes" | "on") => 1,
                Some(n) => n.parse().context(
                    "SECKILL_TRUST_FORWARDED_FOR must be 1/true (one proxy in front) or the number of proxies",
                )?,
            },
            admin,
            operator,
            password_hash_concurrency: number("SECKILL_PASSWORD_HASH_CONCURRENCY", cores.max(1))?,
            gate: {
                let d = GateLimits::default();
                GateLimits {
                    user_burst: number("SECKILL_USER_BURST", d.user_burst)?,
                    user_per_sec: number("SECKILL_USER_PER_SEC", d.user_per_sec)?,
                    ip_burst: number("SECKILL_IP_BURST", d.ip_burst)?,
                    ip_per_sec: number("SECKILL_IP_PER_SEC", d.ip_per_sec)?,
                    strikes_before_block: number(
                        "SECKILL_STRIKES_BEFORE_BLOCK",
                        d.strikes_before_block,
                    )?,
                    block_ms: number("SECKILL_BLOCK_MS", d.block_ms)?,
                    max_in_flight: number("SECKILL_MAX_IN_FLIGHT", d.max_in_flight)?,
                }
            },
            amqp_prefix: var_or("SECKILL_AMQP_PREFIX", "seckill"),
            queue_expires_ms: var("SECKILL_QUEUE_EXPIRES_MS")
                .map(|v| v.parse())
                .transpose()
                .context("SECKILL_QUEUE_EXPIRES_MS")?,
            run_workers: !flag("SECKILL_NO_WORKERS"),
            demo: flag("SECKILL_DEMO"),
            min_payment_window_secs: number("SECKILL_MIN_PAYMENT_WINDOW_SECS", 60)?,
            sweep_every: Duration::from_millis(number("SECKILL_SWEEP_EVERY_MS", 2_000)?),
            persisters: number("SECKILL_PERSISTERS", 2)?.max(1),
            header_read_timeout: Duration::from_secs(
                number("SECKILL_HEADER_READ_TIMEOUT_SECS", 10)?.max(1),
            ),
            request_timeout: Duration::from_secs(
                number("SECKILL_REQUEST_TIMEOUT_SECS", 30)?.max(1),
            ),
            layers_off: layers_off()?,
        })
    }
}

pub fn generate_secret() -> String {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(not(feature = "bench"))]
    fn a_production_build_leaves_no_layer_out_whatever_the_environment() {
        std::env::set_var(
            "SECKILL_BENCH_WITHOUT_LAYERS",
            "trace,timeout,security_headers",
        );
        assert!(super::layers_off().unwrap().is_empty());
    }

    #[test]
    #[cfg(feature = "bench")]
    fn a_bench_build_names_the_layers_it_leaves_out_and_refuses_unknown_ones() {
        std::env::set_var("SECKILL_BENCH_WITHOUT_LAYERS", "trace, timeout");
        assert_eq!(super::layers_off().unwrap(), ["trace", "timeout"]);
        std::env::set_var("SECKILL_BENCH_WITHOUT_LAYERS", "tls");
        assert!(super::layers_off().is_err());
    }
}
