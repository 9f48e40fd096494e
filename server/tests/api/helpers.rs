//! Spins up the real application against the real PostgreSQL, Redis and RabbitMQ that
//! `make test` started: a fresh database and a Redis key prefix per test, port 0.

use app::api::Role;
use reqwest::{header, Client, Response};
use serde_json::Value;
use server::domain::payment::{Charge, PaymentProvider, ProviderResult};
use server::{
    http::session::SessionKeys,
    infra::{
        config::{
            Config, DoorLimits, LoginThrottle, Secret, DEFAULT_AMQP_URL, DEFAULT_DATABASE_URL,
            DEFAULT_REDIS_URL,
        },
        keys::{home_shard, new_token, ShardKeys},
        redis::{Redis, Target},
    },
    Application,
};
use signing::Claims;
use sqlx::{Connection, PgConnection, PgPool};
use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

pub const SECRET: &[u8] = b"test-secret-test-secret-test-secret!";
pub const METRICS_TOKEN: &str = "test-metrics-token-0123456789";

pub struct TestApp {
    pub base: String,
    pub config: Config,
    pub db: PgPool,
    /// The app's own Redis handle (connection and key layout).
    pub redis: Redis,
    /// A client that keeps cookies, like a browser.
    pub client: Client,
    /// The running instance's state, for driving its workers' functions directly.
    pub state: server::http::state::AppState,
    /// What the instance charged and refunded.
    pub payments: Arc<Payments>,
}

/// The payment provider of the tests: it records every charge and refund it took, can be told to
/// fail its charges, and to take a while over each (a provider on the network does).
#[derive(Default)]
pub struct Payments {
    charges: Mutex<Vec<(uuid::Uuid, i64)>>,
    refunds: Mutex<Vec<(uuid::Uuid, i64)>>,
    pub failing: AtomicBool,
    /// Milliseconds each charge takes.
    pub charge_ms: AtomicU64,
    /// While true, every charge that starts waits until it is set false again: a test holds the
    /// money in flight for as long as it needs.
    pub hold: tokio::sync::watch::Sender<bool>,
    /// Charges begun, held or not.
    pub started: AtomicU64,
}

impl Payments {
    pub fn charges(&self) -> Vec<(uuid::Uuid, i64)> {
        self.charges.lock().unwrap().clone()
    }

    pub fn refunds(&self) -> Vec<(uuid::Uuid, i64)> {
        self.refunds.lock().unwrap().clone()
    }
}

impl PaymentProvider for Payments {
    fn charge<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            let mut hold = self.hold.subscribe();
            self.started.fetch_add(1, Ordering::SeqCst);
            // The sender lives in `self`, so the wait cannot end by the channel closing.
            let _ = hold.wait_for(|held| !held).await;
            let ms = self.charge_ms.load(Ordering::Relaxed);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await; // paced: the provider's own latency, set by the test
            }
            anyhow::ensure!(
                !self.failing.load(Ordering::Relaxed),
                "the provider declined"
            );
            self.charges
                .lock()
                .unwrap()
                .push((charge.token, charge.amount_cents));
            Ok(())
        })
    }

    fn refund<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            self.refunds
                .lock()
                .unwrap()
                .push((charge.token, charge.amount_cents));
            Ok(())
        })
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// How long the tests' clients keep an idle connection for the next request: less than the
/// server's `SECKILL_HEADER_READ_TIMEOUT_SECS` (10 s), after which the server closes an idle
/// keep-alive connection. A client that sent a request on such a connection just as it closed
/// got `IncompleteMessage` (seen in `doors::forty_exports…` on a loaded machine).
pub const CLIENT_IDLE: Duration = Duration::from_secs(5);

pub fn test_config() -> Config {
    let redis = Target::new(
        &env_or("REDIS_URL", DEFAULT_REDIS_URL),
        &env_or("REDIS_CLUSTER_URLS", "")
            .split(',')
            .filter(|u| !u.is_empty())
            .map(String::from)
            .collect::<Vec<_>>(),
    );
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        database_url: env_or("DATABASE_URL", DEFAULT_DATABASE_URL),
        db_connections: 32,
        migrate_on_start: true,
        worker_addr: "127.0.0.1:0".parse().unwrap(),
        // `REDIS_CLUSTER_URLS` set: the whole suite runs against a Redis Cluster, each buy
        // answered once its reservation is on a replica, as in production.
        redis_wait_replicas: u32::from(redis.is_cluster()),
        redis_wait_timeout: Duration::from_millis(1000),
        redis,
        amqp_url: env_or("AMQP_URL", DEFAULT_AMQP_URL),
        secret: Secret(SECRET.to_vec()),
        secret_previous: None,
        redis_prefix: format!("test:{}:", uuid::Uuid::new_v4().simple()),
        cookie_secure: false,
        asset_base_url: String::new(),
        site_root: "../target/site".into(),
        session_ttl: Duration::from_secs(3600),
        session_reload: Duration::from_secs(1),
        login_throttle: LoginThrottle {
            max_failures_per_user: 5,
            max_failures_per_user_everywhere: 100,
            max_failures_per_ip: 1000,
            window: Duration::from_secs(60),
        },
        // Every test client comes from 127.0.0.1: the doors are opened wide, and the tests of
        // the doors lower them.
        doors: DoorLimits {
            signups_per_address: 1_000_000,
            signups_per_minute: 1_000_000,
            captchas_per_minute: 1_000_000,
            challenges_per_minute: 1_000_000,
            queue_per_minute: 1_000_000,
            stock_per_minute: 1_000_000,
            // Registering is not what most tests are about; `doors.rs` turns the check on.
            signup_pow_difficulty: 0,
            ..DoorLimits::default()
        },
        metrics_token: Some(Secret(METRICS_TOKEN.as_bytes().to_vec())),
        trusted_proxies: 0,
        hot_views_per_sec: 200,
        admin: None,
        operator: None,
        password_hash_concurrency: 2,
        // Every test client comes from 127.0.0.1: the address bucket must not be what limits them.
        gate: server::infra::config::GateLimits {
            ip_burst: 1_000_000,
            ip_per_sec: 1_000_000.0,
            max_in_flight: 8192,
            ..Default::default()
        },
        amqp_prefix: format!("test.{}", uuid::Uuid::new_v4().simple()),
        queue_expires_ms: Some(600_000),
        run_workers: true,
        demo: false,
        queue: server::infra::config::QueueLimits::default(),
        min_payment_window_secs: 1,
        sweep_every: Duration::from_secs(1),
        reconcile_every: Duration::from_secs(10),
        // The tests share one Redis: a rewrite is started by the test that asks for one
        // (`aof.rs`), never by another test's workers in the middle of it.
        aof_check_every: None,
        aof_policy: server::pipeline::compaction::Policy {
            growth_percent: 100,
            min_bytes: 64 << 20,
            ceiling_bytes: 4096 << 20,
            lead: Duration::from_secs(600),
        },
        persisters: 2,
        reservation_queues: 1,
        header_read_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(30),
        drain: Duration::from_secs(30),
        layers_off: Vec::new(),
    }
}

/// Creates an empty database of its own and points `config` at it.
async fn fresh_database(config: &mut Config) {
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    let (base, _) = config
        .database_url
        .rsplit_once('/')
        .expect("DATABASE_URL has a database name");
    let mut admin = PgConnection::connect(&format!("{base}/postgres"))
        .await
        .expect("PostgreSQL answers");
    sqlx::query(&format!(r#"CREATE DATABASE "{name}""#))
        .execute(&mut admin)
        .await
        .unwrap();
    config.database_url = format!("{base}/{name}");
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = test_config();
    fresh_database(&mut config).await;
    tweak(&mut config);
    start(config).await
}

/// The spans the instances of this test binary exported, kept in memory (docs/operations.md
/// "Traces"). Only traces a request asked for are sampled (its `traceparent` says so): the other
/// tests' requests make spans nobody keeps.
static SPANS: std::sync::OnceLock<opentelemetry_sdk::trace::InMemorySpanExporter> =
    std::sync::OnceLock::new();

/// Every span finished so far, of every test of this binary.
pub fn finished_spans() -> Vec<opentelemetry_sdk::trace::SpanData> {
    SPANS
        .get()
        .map_or_else(Vec::new, |spans| spans.get_finished_spans().unwrap())
}

/// The server's warnings and errors in the test's output, shown when it fails (`RUST_LOG`
/// chooses others). A test's spawned tasks log there too when its runtime has one thread, as
/// `#[tokio::test]`'s has. And the server's spans to an in-memory exporter, as a deployed
/// process's to its OTLP endpoint.
fn logs() {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, Layer};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let exporter = SPANS.get_or_init(Default::default).clone();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff)))
            .build();
        let spans = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("seckill"))
            .with_filter(tracing_subscriber::EnvFilter::new("server=info"));
        let lines = tracing_subscriber::fmt::layer()
            .with_test_writer()
            .with_filter(filter);
        if tracing_subscriber::registry()
            .with(lines)
            .with(spans)
            .try_init()
            .is_ok()
        {
            server::infra::telemetry::enable();
        }
    });
}

/// Another instance of the same deployment: same database, Redis prefix, queues and secret.
pub async fn spawn_instance(config: &Config) -> TestApp {
    start(config.clone()).await
}

async fn start(config: Config) -> TestApp {
    logs();
    let payments = Arc::new(Payments::default());
    let app = Application::build_with(config.clone(), payments.clone())
        .await
        .expect("the application builds");
    let base = format!("http://{}", app.local_addr());
    let state = app.state.clone();
    tokio::spawn(app.run_until(std::future::pending()));
    TestApp {
        base,
        config,
        db: state.db.clone(),
        redis: state.redis.clone(),
        client: Client::builder()
            .cookie_store(true)
            .pool_idle_timeout(CLIENT_IDLE)
            .build()
            .unwrap(),
        state,
        payments,
    }
}

/// The value of the unlabelled sample `name` in a metrics exposition, `None` when it has none; a
/// sample whose value is not a number fails the test.
pub fn metric_in(exposition: &str, name: &str) -> Option<f64> {
    let value = exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name} {value}: {e}")),
    )
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The metrics exposition, as the operator's Prometheus scrapes it (with the token).
    pub async fn metrics(&self) -> String {
        let resp = self
            .client
            .get(self.url("/metrics"))
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.text().await.unwrap()
    }

    /// The value of one unlabelled sample of `/metrics` (`metric_in`).
    pub async fn metric(&self, name: &str) -> Option<f64> {
        metric_in(&self.metrics().await, name)
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// A POST with a raw body and content type, through a client without cookies.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        Client::new()
            .post(self.url(path))
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn register(&self, username: &str, password: &str) -> Response {
        self.post(
            "/api/auth/register",
            &serde_json::json!({"username": username, "password": password}),
        )
        .await
    }

    pub async fn login(&self, username: &str, password: &str) -> Response {
        self.post(
            "/api/auth/login",
            &serde_json::json!({"username": username, "password": password}),
        )
        .await
    }
}

/// A signed-in client for an existing user id, minted with the server's secret (registering
/// thousands of users through argon2 is not what these tests are about).
pub fn client_for(user_id: i64, role: Role) -> Client {
    client_of_shop(user_id, role, 0)
}

/// `client_for`, for a merchant of `shop_id`.
pub fn client_of_shop(user_id: i64, role: Role, shop_id: i64) -> Client {
    client_with_cookies(user_id, role, shop_id, "")
}

/// `client_of_shop`, sending `more` (`name=value; …`) beside its session cookie.
pub fn client_with_cookies(user_id: i64, role: Role, shop_id: i64, more: &str) -> Client {
    client_signed_with(SECRET, user_id, role, shop_id, more)
}

/// `client_with_cookies`, its session minted with `secret` (a deployment's own).
pub fn client_signed_with(
    secret: &[u8],
    user_id: i64,
    role: Role,
    shop_id: i64,
    more: &str,
) -> Client {
    let keys = SessionKeys::new(secret, Duration::from_secs(3600), false);
    let expires_at = chrono::Utc::now().timestamp() + 3600;
    let cookie = keys.sign(&Claims {
        sid: signing::new_session_id(),
        user_id,
        role,
        shop_id,
        epoch: 0,
        expires_at,
        joined: 0,
        auth_at: expires_at - 3600,
    });
    let mut headers = header::HeaderMap::new();
    let cookies = if more.is_empty() {
        format!("sid={cookie}")
    } else {
        format!("sid={cookie}; {more}")
    };
    headers.insert(header::COOKIE, cookies.parse().unwrap());
    Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(CLIENT_IDLE)
        .build()
        .unwrap()
}

/// Inserts `n` shoppers at once (with an unusable password hash) and returns their ids.
pub async fn insert_shoppers(db: &PgPool, n: usize) -> Vec<i64> {
    let names: Vec<String> = (0..n).map(|_| unique_name("s")).collect();
    sqlx::query_scalar(
        "INSERT INTO users (username, password_hash, role) SELECT u, '!', 'shopper' FROM UNNEST($1::text[]) AS u RETURNING id",
    )
    .bind(&names)
    .fetch_all(db)
    .await
    .unwrap()
}

pub struct Shopper {
    pub id: i64,
    pub client: Client,
}

pub async fn shoppers(app: &TestApp, n: usize) -> Vec<Shopper> {
    insert_shoppers(&app.db, n)
        .await
        .into_iter()
        .map(|id| Shopper {
            id,
            client: client_for(id, Role::Shopper),
        })
        .collect()
}

/// A signed-in client of a merchant of the default shop.
pub async fn merchant(app: &TestApp) -> Client {
    merchant_of(app, server::domain::shop::DEFAULT_SHOP).await
}

/// A signed-in client of a new merchant of the named shop (created when missing).
pub async fn merchant_of(app: &TestApp, shop: &str) -> Client {
    merchant_signed_with(app, shop, SECRET).await
}

/// `merchant_of`, its session minted with `secret` (a deployment's own).
pub async fn merchant_signed_with(app: &TestApp, shop: &str, secret: &[u8]) -> Client {
    let user = server::domain::account::create_account(
        &app.db,
        Role::Merchant,
        Some(shop),
        &unique_name("m"),
        "merchant-password",
    )
    .await
    .unwrap()
    .unwrap();
    let shop_id: i64 = sqlx::query_scalar("SELECT shop_id FROM users WHERE id = $1")
        .bind(user.id.0)
        .fetch_one(&app.db)
        .await
        .unwrap();
    client_signed_with(secret, user.id.0, Role::Merchant, shop_id, "")
}

/// The password of [`operator_account`]'s operators.
pub const OPERATOR_PASSWORD: &str = "operator-password-9";

/// A new operator's account (password [`OPERATOR_PASSWORD`]): its id and its name.
pub async fn operator_account(app: &TestApp) -> (i64, String) {
    let name = unique_name("op");
    let op = server::domain::account::create_account(
        &app.db,
        Role::Operator,
        None,
        &name,
        OPERATOR_PASSWORD,
    )
    .await
    .unwrap()
    .unwrap();
    (op.id.0, name)
}

/// A signed-in client of a new operator (its session minted, not signed in through the form).
pub async fn operator(app: &TestApp) -> Client {
    let (id, _) = operator_account(app).await;
    client_of_shop(id, Role::Operator, 0)
}

/// An activity that is on sale now (captcha off unless `fields` says otherwise).
pub async fn live_activity(app: &TestApp, merchant: &Client, stock: i64, fields: Value) -> Value {
    let resp = merchant
        .post(app.url("/api/admin/activities"))
        .json(&live_activity_body(stock, fields))
        .send()
        .await
        .unwrap();
    let (status, activity) = json(resp).await;
    assert_eq!(status, 201, "{activity}");
    activity
}

/// A sale with a waiting room that starts `in_secs` from now and admits `rate` a second.
pub async fn sale_with_line(
    app: &TestApp,
    merchant: &Client,
    stock: i64,
    in_secs: i64,
    rate: i32,
) -> i64 {
    let starts = chrono::Utc::now() + chrono::Duration::seconds(in_secs);
    live_activity(
        app,
        merchant,
        stock,
        serde_json::json!({
            "starts_at": starts.to_rfc3339(),
            "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339(),
            "waiting_room": true,
            "admit_per_sec": rate,
        }),
    )
    .await["id"]
        .as_i64()
        .unwrap()
}

/// The create body `live_activity` sends: a sale on now, captcha off, `fields` merged in.
pub fn live_activity_body(stock: i64, fields: Value) -> Value {
    let now = chrono::Utc::now();
    let mut body = serde_json::json!({
        "title": "Flash phone",
        "description": "A phone at a flash price.",
        "price_cents": 49_900,
        "seckill_price_cents": 9_900,
        "starts_at": (now - chrono::Duration::seconds(5)).to_rfc3339(),
        "ends_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
        "stock": stock,
        "captcha_required": false,
    });
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

impl TestApp {
    pub async fn path(&self, client: &Client, activity: i64) -> String {
        let resp = client
            .get(self.url(&format!("/api/activities/{activity}/path")))
            .send()
            .await
            .unwrap();
        let (status, body) = json(resp).await;
        assert_eq!(status, 200, "{body}");
        body["path"].as_str().unwrap().to_string()
    }

    pub async fn buy(&self, client: &Client, activity: i64, body: Value) -> Response {
        client
            .post(self.url(&format!("/api/activities/{activity}/buy")))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A buy with an `Idempotency-Key`, as a client retrying after a timeout sends it.
    pub async fn buy_keyed(
        &self,
        client: &Client,
        activity: i64,
        key: &str,
        body: Value,
    ) -> (u16, Value) {
        self.buy_with_header(client, activity, ("Idempotency-Key", key), body)
            .await
    }

    /// A buy sent with one more header (`(name, value)`).
    pub async fn buy_with_header(
        &self,
        client: &Client,
        activity: i64,
        (name, value): (&str, &str),
        body: Value,
    ) -> (u16, Value) {
        let resp = client
            .post(self.url(&format!("/api/activities/{activity}/buy")))
            .header(name, value)
            .json(&body)
            .send()
            .await
            .unwrap();
        json(resp).await
    }

    /// Units on sale over every stock shard (fails if Redis holds none of them).
    pub async fn remaining(&self, activity: i64) -> i64 {
        server::domain::activity::stock::in_redis(
            &self.redis,
            activity,
            self.shards_of(activity).await,
        )
        .await
        .unwrap()
        .expect("the sale is in Redis")
    }

    /// How many stock shards the sale has.
    pub async fn shards_of(&self, activity: i64) -> i16 {
        sqlx::query_scalar("SELECT stock_shards FROM activities WHERE id = $1")
            .bind(activity)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Every stock shard's keys of a sale.
    pub async fn shard_keys(&self, activity: i64) -> Vec<ShardKeys> {
        self.redis
            .keys
            .shards(activity, self.shards_of(activity).await)
    }

    /// The sum of one counting command (`XLEN`, `ZCARD`…) over one key of every shard of a sale.
    async fn count_over_shards(
        &self,
        activity: i64,
        command: &str,
        key: fn(&ShardKeys) -> String,
    ) -> i64 {
        let mut total = 0;
        for shard in self.shard_keys(activity).await {
            let n: i64 = redis::cmd(command)
                .arg(key(&shard))
                .query_async(&mut self.redis.conn())
                .await
                .unwrap();
            total += n;
        }
        total
    }

    /// Granted tokens of a sale that are neither orders nor returned yet, over every shard.
    pub async fn unsettled_len(&self, activity: i64) -> i64 {
        self.count_over_shards(activity, "ZCARD", ShardKeys::unsettled)
            .await
    }

    /// Reservations waiting in the journals of every shard of a sale (a gate call journals
    /// those it granted in one entry; the release before's journal, one entry each, too).
    pub async fn journal_len(&self, activity: i64) -> i64 {
        let mut total = 0;
        for journal in self
            .shard_keys(activity)
            .await
            .iter()
            .flat_map(ShardKeys::journals)
        {
            let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                .arg(journal)
                .arg("-")
                .arg("+")
                .query_async(&mut self.redis.conn())
                .await
                .unwrap();
            for entry in &entries.ids {
                let read = server::pipeline::journal::read_entry(entry);
                total += (read.reservations.len() + read.unreadable) as i64;
            }
        }
        total
    }

    /// Orders of an activity by status, and the activity's `sold`.
    pub async fn order_units(&self, activity: i64, status: &str) -> i64 {
        sqlx::query_scalar("SELECT COALESCE(sum(quantity), 0)::bigint FROM orders WHERE activity_id = $1 AND status = $2")
            .bind(activity)
            .bind(status)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }
}

/// The deployment the load tool drives: this test's database, Redis, key prefix and secret.
pub fn deployment(config: &Config) -> loadtest::Deployment {
    let (redis_url, redis_cluster_urls) = match &config.redis {
        Target::Single(url) => (url.clone(), Vec::new()),
        Target::Cluster(urls) => (String::new(), urls.clone()),
    };
    loadtest::Deployment {
        database_url: config.database_url.clone(),
        redis_url,
        redis_cluster_urls,
        redis_prefix: config.redis_prefix.clone(),
        secret: Some(String::from_utf8(config.secret.0.clone()).expect("a test's secret is text")),
    }
}

/// Polls `check` until it returns `Some`, or fails the test after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    loop {
        poll.tick().await;
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for: {what}"
        );
    }
}

/// Waits until every token is in a final status and checks the invariants of docs/architecture.md for `activity`:
/// no oversell, conservation, no reservation lost.
pub async fn assert_settled(app: &TestApp, activity: i64, tokens: &[String]) {
    let tokens_uuid: Vec<uuid::Uuid> = tokens.iter().map(|t| t.parse().unwrap()).collect();
    eventually(60, "every accepted token persisted", || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM orders WHERE token = ANY($1)")
            .bind(&tokens_uuid)
            .fetch_one(&app.db)
            .await
            .unwrap();
        (n == tokens.len() as i64).then_some(())
    })
    .await;
    let (total, sold): (i64, i64) =
        sqlx::query_as("SELECT total_stock, sold FROM activities WHERE id = $1")
            .bind(activity)
            .fetch_one(&app.db)
            .await
            .unwrap();
    let active =
        app.order_units(activity, "confirmed").await + app.order_units(activity, "paid").await;
    assert!(active <= total, "oversold: {active} > {total}");
    assert_eq!(sold, active, "activities.sold matches the orders");
    eventually(
        30,
        "the journal drained and every token settled",
        || async {
            (app.journal_len(activity).await == 0 && app.unsettled_len(activity).await == 0)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        app.remaining(activity).await + active,
        total,
        "conservation: remaining + active = total"
    );
}

/// The tokens of the accepted (`202`) answers.
pub fn tokens_of(answers: &[(u16, Value)]) -> Vec<String> {
    answers
        .iter()
        .filter(|(s, _)| *s == 202)
        .map(|(_, b)| b["token"].as_str().unwrap().to_string())
        .collect()
}

/// A username unique across tests and runs.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Status and the JSON body of an answer.
pub async fn json(resp: Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, body)
}

/// Asserts an API error answer: status and code.
pub async fn assert_error(resp: Response, status: u16, code: &str) -> Value {
    let (got, body) = json(resp).await;
    assert_eq!(
        (got, body["error"].as_str().unwrap_or_default()),
        (status, code),
        "body: {body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "an error says why: {body}"
    );
    body
}

/// The value of `sid` in the answer's Set-Cookie, with its attributes.
pub fn set_cookie(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("sid=") || v.starts_with("__Host-sid="))
        .map(str::to_string)
}

/// Takes a unit the way the release before's gate did (stock, the user's count, a record of its
/// own saying `queued`) but without the journal, for tests that put the reservation on the queue
/// themselves.
pub async fn reserve_behind_the_gate(
    app: &TestApp,
    activity: i64,
    user: i64,
) -> server::pipeline::journal::Reservation {
    let shards = app.shards_of(activity).await;
    let home_index = home_shard(user, shards);
    let token = new_token(activity, home_index, shards);
    let home = app.redis.keys.shard(activity, home_index, shards);
    let _: () = redis::pipe()
        .cmd("DECRBY")
        .arg(home.stock())
        .arg(1)
        .ignore()
        .cmd("HINCRBY")
        .arg(home.holders())
        .arg(user)
        .arg(1)
        .ignore()
        .cmd("HSET")
        .arg(home.token(&token))
        .arg("status")
        .arg("queued")
        .arg("user_id")
        .arg(user)
        .arg("activity_id")
        .arg(activity)
        .arg("quantity")
        .arg(1)
        .ignore()
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    server::pipeline::journal::Reservation {
        token,
        activity_id: activity,
        user_id: user,
        quantity: 1,
        reserved_ms: chrono::Utc::now().timestamp_millis(),
    }
}

/// Publishes reservations straight onto the app's queue, one message each, with confirms.
pub async fn publish(app: &TestApp, reservations: &[&server::pipeline::journal::Reservation]) {
    let bodies: Vec<Vec<u8>> = reservations
        .iter()
        .map(|r| serde_json::to_vec(r).unwrap())
        .collect();
    publish_bodies(app, &bodies).await;
}

/// Publishes these reservations as one message (a batch, as the relay sends them), confirmed.
pub async fn publish_batch(app: &TestApp, reservations: &[server::pipeline::journal::Reservation]) {
    let body = server::pipeline::journal::encode(reservations).unwrap();
    publish_bodies(app, &[body]).await;
}

async fn publish_bodies(app: &TestApp, bodies: &[Vec<u8>]) {
    use lapin::{options::*, BasicProperties, Connection, ConnectionProperties};
    let first_node = app.config.amqp_url.split(',').next().unwrap_or_default();
    let conn = Connection::connect(first_node, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = conn.create_channel().await.unwrap();
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let queue = format!("{}.reservations", app.config.amqp_prefix);
    for body in bodies {
        let confirm = channel
            .basic_publish(
                "".into(),
                queue.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                body,
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(confirm, lapin::Confirmation::Ack(None));
    }
    conn.close(200, "done".into()).await.unwrap();
}

/// A reservation's state in Redis, while it is one: its record's of its own (`pending` while it
/// borrows, a give-back's `failed` or `cancelled`, the release before's `queued`), else `queued`
/// while the token is in its home shard's unsettled set. An order's is neither: the persister took
/// it out, and its state is the database's (`order_status`).
pub async fn token_status(app: &TestApp, token: &str) -> Option<String> {
    let home = app
        .redis
        .keys
        .home_of(&token.parse().unwrap())
        .expect("a token the gate made");
    let (status, unsettled): (Option<String>, Option<f64>) = redis::pipe()
        .hget(home.token(&token.parse().unwrap()), "status")
        .zscore(home.unsettled(), token)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    status.or(unsettled.map(|_| "queued".to_owned()))
}

/// A token's entry in its home shard's owners hash (`user quantity`), while it is unsettled.
pub async fn owners_entry(app: &TestApp, token: &str) -> Option<String> {
    let home = app
        .redis
        .keys
        .home_of(&token.parse().unwrap())
        .expect("a token the gate made");
    redis::cmd("HGET")
        .arg(home.owners())
        .arg(token)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap()
}

/// The `server` binary with a sub-command, configured as this test's deployment.
pub fn server_command(app: &TestApp, sub: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_server"));
    cmd.arg(sub)
        .env("DATABASE_URL", &app.config.database_url)
        .env(
            match &app.config.redis {
                Target::Single(_) => "REDIS_URL",
                Target::Cluster(_) => "REDIS_CLUSTER_URLS",
            },
            match &app.config.redis {
                Target::Single(url) => url.clone(),
                Target::Cluster(urls) => urls.join(","),
            },
        )
        .env("AMQP_URL", &app.config.amqp_url)
        .env("SECKILL_REDIS_PREFIX", &app.config.redis_prefix)
        .env("SECKILL_AMQP_PREFIX", &app.config.amqp_prefix)
        .env("SECKILL_QUEUE_EXPIRES_MS", "600000")
        .env(
            "SECKILL_REDIS_WAIT_REPLICAS",
            app.config.redis_wait_replicas.to_string(),
        )
        .env("SECKILL_SECRET", std::str::from_utf8(SECRET).unwrap())
        // The site the build (scripts/site.mjs) wrote beside this binary (`serve` refuses a site
        // folder without the assets its pages name).
        .env(
            "LEPTOS_SITE_ROOT",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../target/site"),
        )
        .env("RUST_LOG", "warn");
    cmd
}

/// Every unit of the sale into shard `keep` (as a sale looks once most shards sold out), safe
/// beside buys in flight: each other shard's units are taken by one script (never below zero)
/// and added to `keep`; in between they are in neither shard (a buy then hears sold out, never
/// takes a unit twice).
pub async fn move_all_units_to(app: &TestApp, id: i64, keep: usize) {
    let shards = app.shard_keys(id).await;
    // Shards of one sale live on different masters of a cluster: moved one shard at a time,
    // each unit taken with DECRBY only when there (never below zero) and added to `keep`.
    for (i, shard) in shards.iter().enumerate() {
        if i == keep {
            continue;
        }
        let taken: i64 = redis::Script::new(
            "local n = tonumber(redis.call('GET', KEYS[1]) or '0')
             if n > 0 then redis.call('DECRBY', KEYS[1], n) end
             return math.max(n, 0)",
        )
        .key(shard.stock())
        .invoke_async(&mut app.redis.conn())
        .await
        .unwrap();
        let _: i64 = redis::cmd("INCRBY")
            .arg(shards[keep].stock())
            .arg(taken)
            .query_async(&mut app.redis.conn())
            .await
            .unwrap();
    }
}

/// Sets one shard's units.
pub async fn set_stock(app: &TestApp, shard: &ShardKeys, units: i64) {
    let _: () = redis::cmd("SET")
        .arg(shard.stock())
        .arg(units)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
}

/// A shopper registered through the API (`201`), signed in: a client that keeps the session
/// cookie, and the session id it holds.
pub async fn register(app: &TestApp, username: &str, password: &str) -> (Client, String) {
    let client = Client::builder()
        .cookie_store(true)
        .pool_idle_timeout(CLIENT_IDLE)
        .build()
        .unwrap();
    let resp = client
        .post(app.url("/api/auth/register"))
        .json(&serde_json::json!({"username": username, "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    (client, sid_of(&resp))
}

/// The session id a response's `Set-Cookie` carries.
pub fn sid_of(resp: &Response) -> String {
    set_cookie(resp)
        .expect("a session cookie is set")
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("sid=")
        .to_string()
}

/// Every route of the API as the routers declare it — `.route("/path", get(a).post(b))` in
/// `server/src/http` (every file but `ops.rs`, whose routes are not under `/api`) — read from the
/// source, so that a sweep covers a new endpoint without anyone adding it to a list. Paths keep
/// their `{id}`/`{token}` placeholders.
pub fn api_routes() -> Vec<(reqwest::Method, String)> {
    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                // Not under `/api`: the operations' routes and the pages' own forms.
                && path
                    .file_name()
                    .is_some_and(|n| n != "ops.rs" && n != "forms.rs")
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    sources(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http"),
        &mut files,
    );
    let mut routes = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (at, _) in text.match_indices(".route(") {
            let rest = &text[at + ".route(".len()..];
            // The call's own text: up to its closing parenthesis.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map(|(i, _)| i)
                .unwrap();
            let call = &rest[..end];
            let path = call.split('"').nth(1).unwrap();
            for method in ["get", "post", "put", "patch", "delete"] {
                let named = call.match_indices(&format!("{method}(")).any(|(i, _)| {
                    i == 0 || !call[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if named {
                    let method =
                        reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                    routes.push((method, format!("/api{path}")));
                }
            }
        }
    }
    routes.sort_by(|a, b| (&a.1, a.0.as_str()).cmp(&(&b.1, b.0.as_str())));
    routes
}

/// The routes anyone may call without signing in.
pub const PUBLIC_ROUTES: [(&str, &str); 13] = [
    ("GET", "/api/time"),
    ("GET", "/api/activities"),
    ("GET", "/api/activities/{id}"),
    ("GET", "/api/activities/{id}/stock"),
    ("GET", "/api/activities/{id}/line"),
    ("GET", "/api/activities/{id}/drawing"),
    ("GET", "/api/activities/{id}/report"),
    ("GET", "/api/activities/{id}/calendar.ics"),
    ("GET", "/api/captcha"),
    ("GET", "/api/auth/challenge"),
    ("POST", "/api/auth/register"),
    ("POST", "/api/auth/login"),
    ("POST", "/api/auth/logout"),
];

/// Each stock shard's units as Redis holds them (below zero too, unlike `remaining`).
pub async fn shard_stock(app: &TestApp, id: i64) -> Vec<i64> {
    let stock =
        server::domain::activity::stock::shard_stock(&app.redis, id, app.shards_of(id).await)
            .await
            .unwrap();
    stock
        .into_iter()
        .map(|n| n.expect("every shard is in Redis"))
        .collect()
}

/// The sale's units sold, as PostgreSQL counts them (`activities.sold`).
pub async fn sold(app: &TestApp, activity: i64) -> i64 {
    sqlx::query_scalar("SELECT sold FROM activities WHERE id = $1")
        .bind(activity)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The rate buckets' hashes a gate call at `now_ms` reads (`gate.lua`): the generations before
/// its own, its own, and after.
pub fn rate_generations(
    limits: &server::infra::config::GateLimits,
    shard: &ShardKeys,
    now_ms: i64,
) -> [String; 3] {
    let generation = limits.bucket_generation(now_ms);
    [-1, 0, 1].map(|d| shard.rates(generation + d))
}

/// A client's rate bucket (`u:42`, `ip:…`) on a shard as a gate call at `now_ms` finds it: from
/// the newest generation it is in.
pub async fn rate_bucket(
    redis: &Redis,
    limits: &server::infra::config::GateLimits,
    shard: &ShardKeys,
    who: &str,
    now_ms: i64,
) -> Option<String> {
    let mut found = None;
    for key in rate_generations(limits, shard, now_ms) {
        let value: Option<String> = redis::cmd("HGET")
            .arg(key)
            .arg(who)
            .query_async(&mut redis.conn())
            .await
            .unwrap();
        found = value.or(found);
    }
    found
}

/// A token's order status in the database (`None`: not an order).
pub async fn order_status(app: &TestApp, token: &str) -> Option<String> {
    sqlx::query_scalar("SELECT status FROM orders WHERE token = $1::uuid")
        .bind(token)
        .fetch_optional(&app.db)
        .await
        .unwrap()
}

/// Where a reservation ended: its order's status, or (no order) its record's in Redis.
pub async fn final_status(app: &TestApp, token: &str) -> Option<String> {
    match order_status(app, token).await {
        Some(status) => Some(status),
        None => token_status(app, token).await,
    }
}

/// Asserts that `token` is a confirmed order and that Redis holds nothing of it any more (the
/// persister took it out of the unsettled set and the owners hash, and removed any record).
pub async fn assert_confirmed_order(app: &TestApp, token: &str) {
    assert_eq!(
        (
            order_status(app, token).await.as_deref(),
            token_status(app, token).await,
            owners_entry(app, token).await
        ),
        (Some("confirmed"), None, None),
        "{token}: its order's status, its state and its owners entry in Redis"
    );
}
