//! Spins up the real application against the real PostgreSQL, Redis and RabbitMQ that
//! `make test` started: a fresh database and a Redis key prefix per test, port 0.

use redis::aio::ConnectionManager;
use reqwest::{header, Client, Response};
use serde_json::Value;
use server::{
    config::{Config, LoginThrottle, Secret, DEFAULT_AMQP_URL, DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL},
    Application,
};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;

pub const SECRET: &[u8] = b"test-secret-test-secret-test-secret!";

pub struct TestApp {
    pub base: String,
    pub config: Config,
    pub db: PgPool,
    pub redis: ConnectionManager,
    /// A client that keeps cookies, like a browser.
    pub client: Client,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
}

pub fn test_config() -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        database_url: env_or("DATABASE_URL", DEFAULT_DATABASE_URL),
        redis_url: env_or("REDIS_URL", DEFAULT_REDIS_URL),
        amqp_url: env_or("AMQP_URL", DEFAULT_AMQP_URL),
        secret: Secret(SECRET.to_vec()),
        redis_prefix: format!("test:{}:", uuid::Uuid::new_v4().simple()),
        cookie_secure: false,
        asset_base_url: String::new(),
        site_root: "../target/site".into(),
        session_ttl: Duration::from_secs(3600),
        login_throttle: LoginThrottle { max_failures_per_user: 5, max_failures_per_ip: 1000, window: Duration::from_secs(60) },
        trust_forwarded_for: false,
        admin: None,
        password_hash_concurrency: 2,
    }
}

/// Creates an empty database of its own and points `config` at it.
async fn fresh_database(config: &mut Config) {
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    let (base, _) = config.database_url.rsplit_once('/').expect("DATABASE_URL has a database name");
    let mut admin = PgConnection::connect(&format!("{base}/postgres")).await.expect("PostgreSQL answers");
    sqlx::query(&format!(r#"CREATE DATABASE "{name}""#)).execute(&mut admin).await.unwrap();
    config.database_url = format!("{base}/{name}");
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let mut config = test_config();
    fresh_database(&mut config).await;
    tweak(&mut config);
    let app = Application::build(config.clone()).await.expect("the application builds");
    let base = format!("http://{}", app.local_addr());
    let state = app.state.clone();
    tokio::spawn(app.run_until(std::future::pending()));
    TestApp {
        base,
        config,
        db: state.db.clone(),
        redis: state.redis.clone(),
        client: Client::builder().cookie_store(true).build().unwrap(),
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.client.post(self.url(path)).json(body).send().await.unwrap()
    }

    /// A POST with a raw body and content type, through a client without cookies.
    pub async fn post_raw(&self, path: &str, content_type: &str, body: impl Into<reqwest::Body>) -> Response {
        Client::new()
            .post(self.url(path))
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn register(&self, username: &str, password: &str) -> Response {
        self.post("/api/auth/register", &serde_json::json!({"username": username, "password": password})).await
    }

    pub async fn login(&self, username: &str, password: &str) -> Response {
        self.post("/api/auth/login", &serde_json::json!({"username": username, "password": password})).await
    }
}

/// A username unique across tests and runs.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// Status and the JSON body of an answer.
pub async fn json(resp: Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, body)
}

/// Asserts an API error answer: status and code.
pub async fn assert_error(resp: Response, status: u16, code: &str) -> Value {
    let (got, body) = json(resp).await;
    assert_eq!((got, body["error"].as_str().unwrap_or_default()), (status, code), "body: {body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "an error says why: {body}");
    body
}

/// The value of `sid` in the answer's Set-Cookie, with its attributes.
pub fn set_cookie(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("sid="))
        .map(str::to_string)
}
