//! Faults in the middle of a sale: RabbitMQ going away, the persister's process killed. These
//! tests disturb shared services, so they live in a binary of their own (cargo runs test binaries
//! one after another) and take turns within it.

// A test tells one story from its set-up to its last assertion; the 80-line bound on functions
// (clippy.toml) is for the product's code.
#![allow(clippy::too_many_lines)]

#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

use futures_util::{stream, StreamExt};
use helpers::*;
use serde_json::json;
use std::process::{Child, Command};

/// A worker process that is killed (SIGKILL) when dropped, also when a test fails.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The faults stop and start shared services: one test at a time (an async lock, held across the
/// test's awaits).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn services(action: &str) {
    let status = Command::new("../scripts/services.sh")
        .arg(action)
        .status()
        .expect("services.sh runs");
    assert!(status.success(), "services.sh {action} failed");
}

/// Buys one unit for each shopper; returns the accepted tokens.
async fn crowd_buys(app: &TestApp, buyers: &[Shopper], activity: i64) -> Vec<String> {
    let paths: Vec<String> = stream::iter(buyers)
        .map(|s| app.path(&s.client, activity))
        .buffered(32)
        .collect()
        .await;
    let answers: Vec<(u16, serde_json::Value)> = stream::iter(buyers.iter().zip(paths))
        .map(|(s, path)| async move {
            json(app.buy(&s.client, activity, json!({"path": path})).await).await
        })
        .buffer_unordered(64)
        .collect()
        .await;
    answers
        .into_iter()
        .map(|(status, body)| {
            assert_eq!(status, 202, "{body}");
            body["token"].as_str().unwrap().to_string()
        })
        .collect()
}

#[tokio::test]
async fn every_accepted_token_is_confirmed_after_rabbitmq_was_down_mid_sale() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 500, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let buyers = shoppers(&app, 300).await;

    let mut tokens = crowd_buys(&app, &buyers[..100], id).await;
    services("rabbitmq-down");
    // Down indeed: the instance says so, naming RabbitMQ, and stays ready: it sells on.
    eventually(30, "readiness names RabbitMQ", || async {
        let (status, body) = json(app.get("/readyz").await).await;
        (status == 200 && body["status"] == "degraded" && body["rabbitmq"] != "ok").then_some(())
    })
    .await;
    let persisted_before: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&app.db)
        .await
        .unwrap();
    // The gate keeps selling while the broker is away: reservations wait in the journal.
    let during = crowd_buys(&app, &buyers[100..200], id).await;
    assert_eq!(during.len(), 100, "the gate sold while RabbitMQ was down");
    assert!(
        app.journal_len(id).await >= 100,
        "the reservations made during the outage wait in the journal"
    );
    let persisted_during: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(
        persisted_during <= 100 && persisted_during >= persisted_before,
        "no reservation of the outage became an order while RabbitMQ was down"
    );
    services("rabbitmq-up");
    tokens.extend(during);
    tokens.extend(crowd_buys(&app, &buyers[200..], id).await);

    assert_eq!(tokens.len(), 300);
    assert_settled(&app, id, &tokens).await;
    for token in &tokens {
        assert_confirmed_order(&app, token).await;
    }
    assert_eq!(app.remaining(id).await, 200);
}

#[tokio::test]
async fn the_workers_reconnect_after_rabbitmq_closes_every_connection() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 300, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let buyers = shoppers(&app, 200).await;

    let mut tokens = crowd_buys(&app, &buyers[..100], id).await;
    assert_settled(&app, id, &tokens).await;
    // A hard close from the broker's side, as RabbitMQ does on an internal error.
    services("rabbitmq-drop-connections");
    tokens.extend(crowd_buys(&app, &buyers[100..], id).await);
    assert_settled(&app, id, &tokens).await;
    for token in &tokens {
        assert_confirmed_order(&app, token).await;
    }
    eventually(10, "ready again", || async {
        let (status, body) = json(app.get("/readyz").await).await;
        (status == 200 && body["status"] == "ready").then_some(())
    })
    .await;
}

#[tokio::test]
async fn every_accepted_token_is_confirmed_after_the_persister_was_killed_mid_batch() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // This instance serves HTTP only; the relay and persister run in a process of their own.
    let app = spawn_app_with(|c| c.run_workers = false).await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 2_000, json!({"waiting_room": false})).await["id"]
        .as_i64()
        .unwrap();
    let buyers = shoppers(&app, 1_500).await;
    let tokens = crowd_buys(&app, &buyers, id).await;

    let worker = || {
        server_command(&app, "worker")
            .spawn()
            .map(Worker)
            .expect("the worker starts")
    };
    // The sale's row held by a transaction of the test: the worker's first batch (its insert
    // raises the sale's `sold` in the same statement) waits on it, its deliveries unacknowledged.
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM activities WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut *holder)
        .await
        .unwrap();
    let first = worker();
    eventually(60, "the worker is writing a batch", || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
             AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO orders%'",
        )
        .fetch_one(&app.db)
        .await
        .unwrap();
        (waiting > 0).then_some(())
    })
    .await;
    // Killed (SIGKILL) in the middle of that batch; dropping waits until it is dead.
    drop(first);
    holder.rollback().await.unwrap();
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(
        written, 0,
        "the killed batch wrote nothing: its transaction died with the process"
    );

    let second = worker();
    assert_settled(&app, id, &tokens).await;
    drop(second);
    for token in &tokens {
        assert_confirmed_order(&app, token).await;
    }
    assert_eq!(app.remaining(id).await, 500);
}
