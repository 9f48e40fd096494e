//! What an operator relies on in the deployed shape: readiness that means "can sell", a Redis of
//! its own that fills up, the worker's own listener for the scraper, and instances that leave the
//! migrations to the release's migrations step.

use crate::helpers::*;
use serde_json::json;
use server::infra::redis::Target;
use std::process::{Child, Command, Stdio};

/// A `redis-server` of the test's own, on a free port, killed when dropped (also when the test
/// fails): these tests fill it up or stop it, which the suite's shared Redis must never see.
struct OwnRedis {
    child: Child,
    url: String,
}

impl OwnRedis {
    async fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let url = format!("redis://127.0.0.1:{port}/0");
        let client = redis::Client::open(url.as_str()).unwrap();
        eventually(20, "the test's own Redis answers", || async {
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .ok()
        })
        .await;
        OwnRedis { child, url }
    }

    async fn config_set(&self, name: &str, value: &str) {
        let client = redis::Client::open(self.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An instance whose Redis stops answering cannot decide a buy: not ready, naming Redis.
#[tokio::test]
async fn an_instance_whose_redis_is_gone_is_not_ready_and_names_it() {
    let own = OwnRedis::start().await;
    let app = spawn_app_with(|c| {
        c.redis = Target::new(&own.url, &[]);
        // One Redis of its own, whichever shape the suite runs on: no replica to wait for.
        c.redis_wait_replicas = 0;
    })
    .await;
    let (status, body) = json(app.get("/readyz").await).await;
    assert_eq!((status, &body["status"]), (200, &json!("ready")), "{body}");
    drop(own);
    let body = eventually(20, "not ready once Redis is gone", || async {
        let resp = app.get("/readyz").await;
        (resp.status() == 503).then_some(resp)
    })
    .await;
    let body = assert_error(body, 503, "not_ready").await;
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("redis"), "{message}");
    assert!(app
        .metrics()
        .await
        .contains("seckill_dependency_up{dependency=\"redis\"} 0"));
}

/// Full (its `maxmemory` reached, `noeviction`), Redis refuses writes: a buy gets `503
/// unavailable`, takes nothing, and the buys before and after are all orders.
#[tokio::test]
async fn a_full_redis_refuses_a_buy_with_503_and_loses_nothing() {
    let own = OwnRedis::start().await;
    own.config_set("maxmemory-policy", "noeviction").await;
    let app = spawn_app_with(|c| {
        c.redis = Target::new(&own.url, &[]);
        // One Redis of its own, whichever shape the suite runs on: no replica to wait for.
        c.redis_wait_replicas = 0;
    })
    .await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let buyers = shoppers(&app, 3).await;
    let mut tokens = Vec::new();
    let path = app.path(&buyers[0].client, id).await;
    let (status, body) = json(app.buy(&buyers[0].client, id, json!({"path": path})).await).await;
    assert_eq!(status, 202, "{body}");
    tokens.push(body["token"].as_str().unwrap().to_string());

    let path = app.path(&buyers[1].client, id).await;
    own.config_set("maxmemory", "1").await;
    let refused = app.buy(&buyers[1].client, id, json!({"path": path})).await;
    let body = assert_error(refused, 503, "unavailable").await;
    assert_eq!(
        app.remaining(id).await,
        9,
        "the refused buy took nothing: {body}"
    );

    own.config_set("maxmemory", "0").await;
    for buyer in &buyers[1..] {
        let path = app.path(&buyer.client, id).await;
        let (status, body) = json(app.buy(&buyer.client, id, json!({"path": path})).await).await;
        assert_eq!(status, 202, "{body}");
        tokens.push(body["token"].as_str().unwrap().to_string());
    }
    assert_settled(&app, id, &tokens).await;
    assert_eq!(app.remaining(id).await, 7);
    assert_eq!(sold(&app, id).await, 3);
}

/// RabbitMQ away: the instance sells on (the journal holds the reservations), so it stays in
/// its Service, saying which engine does not answer; the metric says it too.
#[tokio::test]
async fn an_instance_without_rabbitmq_stays_ready_and_says_it_is_degraded() {
    // Port 9 (discard) is closed here: nothing speaks AMQP on it.
    let app = spawn_app_with(|c| c.amqp_url = "amqp://guest:guest@127.0.0.1:9/%2f".into()).await;
    let (status, body) = json(app.get("/readyz").await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    assert!(
        body["rabbitmq"]
            .as_str()
            .unwrap()
            .starts_with("not answering"),
        "{body}"
    );
    assert_eq!(
        (&body["postgres"], &body["redis"]),
        (&json!("ok"), &json!("ok"))
    );
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("seckill_dependency_up{dependency=\"rabbitmq\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("seckill_dependency_up{dependency=\"postgres\"} 1"),
        "{metrics}"
    );
}

/// An instance that runs no relay or persister does not export their figures (a journal lag of
/// 0 that nothing measures would look healthy); one that runs them does.
#[tokio::test]
async fn only_a_process_running_the_pipeline_exports_its_metrics() {
    let instance = spawn_app_with(|c| c.run_workers = false).await;
    let metrics = instance.metrics().await;
    assert!(metrics.contains("seckill_gate_seconds"), "{metrics}");
    for pipeline in [
        "seckill_journal_lag",
        "seckill_persisted_orders",
        "seckill_stock_drift",
    ] {
        assert!(!metrics.contains(pipeline), "{pipeline} in {metrics}");
    }
    let with_workers = spawn_app().await;
    assert!(with_workers.metrics().await.contains("seckill_journal_lag"));
}

/// `server worker` serves `/metrics` (with the token), `/healthz` and `/readyz` on
/// `SECKILL_WORKER_ADDR`, so the scraper sees the relay and the persisters.
#[tokio::test]
async fn the_worker_serves_its_metrics_and_probes_on_a_port_of_its_own() {
    let app = spawn_app_with(|c| c.run_workers = false).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut worker = server_command(&app, "worker")
        .env("SECKILL_WORKER_ADDR", format!("127.0.0.1:{port}"))
        .env("SECKILL_METRICS_TOKEN", METRICS_TOKEN)
        .spawn()
        .expect("the worker starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let metrics = eventually(60, "the worker's /metrics", || async {
        let resp = http
            .get(format!("{base}/metrics"))
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await
            .ok()?;
        (resp.status() == 200).then_some(resp.text().await.ok()?)
    })
    .await;
    let unauthorized = http.get(format!("{base}/metrics")).send().await.unwrap();
    let healthz = http.get(format!("{base}/healthz")).send().await.unwrap();
    let readyz = json(http.get(format!("{base}/readyz")).send().await.unwrap()).await;
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(metrics.contains("seckill_journal_lag"), "{metrics}");
    assert!(metrics.contains("seckill_persisted_orders"), "{metrics}");
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(healthz.status(), 200);
    assert_eq!(readyz.0, 200, "{}", readyz.1);
}

/// Where it does not migrate as it starts (deployed), an instance on a database that lacks its
/// release's migrations names the first one and does not start; `migrate --wait` gives up
/// naming it, and exits 0 once `migrate` has run.
#[tokio::test]
async fn an_instance_that_does_not_migrate_refuses_a_database_its_release_has_not_migrated() {
    let app = spawn_app().await;
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&app.db)
        .await
        .unwrap();
    let mut config = app.config.clone();
    config.database_url = format!(
        "{}/{name}",
        app.config.database_url.rsplit_once('/').unwrap().0
    );
    config.migrate_on_start = false;
    let refused = server::Application::build(config.clone()).await;
    let why = format!(
        "{:#}",
        refused
            .err()
            .expect("no instance on an unmigrated database")
    );
    assert!(why.contains("the database lacks migration"), "{why}");

    let command = |sub: &str| {
        let mut cmd = server_command(&app, sub);
        cmd.env("DATABASE_URL", &config.database_url);
        cmd
    };
    let wait = |secs: &str| {
        command("migrate")
            .args(["--wait", "--timeout-secs", secs])
            .output()
            .unwrap()
    };
    let gave_up = wait("1");
    assert!(!gave_up.status.success());
    assert!(
        String::from_utf8_lossy(&gave_up.stderr).contains("still lacks migration"),
        "{}",
        String::from_utf8_lossy(&gave_up.stderr)
    );
    let migrate = command("migrate").output().unwrap();
    assert!(
        migrate.status.success(),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    assert!(wait("10").status.success());
    server::Application::build(config)
        .await
        .expect("an instance on the database its release migrated");
}
