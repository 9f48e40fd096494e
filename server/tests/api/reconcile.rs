//! The reconciler against moves of the stock made while a round reads: an addition or a give-back
//! landing between the database's figures and Redis, or held back past the round. Each test puts
//! the move at a fixed point of the round (`Reconciler::between_reads`), so each ordering is met
//! every run.

use crate::helpers::*;
use futures_util::FutureExt;
use serde_json::json;
use server::domain::{activity, order};
use server::infra::keys;
use server::pipeline::reconcile::{Drift, Read, Reconciler};
use std::sync::{Arc, Mutex};

/// One round of `reconciler`, this sale's line of it.
async fn round(reconciler: &Reconciler, activity: i64) -> Drift {
    reconciler
        .reconcile()
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.activity_id == activity)
        .expect("the sale is reconciled")
}

/// The app's reconciler, with `step` run once when a round reaches `at`.
fn reconciler_moving_at<F>(app: &TestApp, at: Read, step: F) -> Reconciler
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let step = Arc::new(Mutex::new(Some(step.boxed())));
    let mut reconciler = app.state.reconciler.clone();
    reconciler.between_reads = Some(Arc::new(move |read| {
        let step = (read == at).then(|| step.lock().unwrap().take()).flatten();
        async move {
            if let Some(step) = step {
                step.await;
            }
        }
        .boxed()
    }));
    reconciler
}

/// A merchant's addition of `add` units through the API, whole (database and Redis), to run
/// when awaited.
fn adding(
    app: &TestApp,
    merchant: &reqwest::Client,
    id: i64,
    add: i64,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (url, merchant) = (
        app.url(&format!("/api/admin/activities/{id}/stock")),
        merchant.clone(),
    );
    async move {
        let resp = merchant
            .post(url)
            .json(&json!({ "add": add }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
    }
}

/// One unit sold to a shopper whose home shard is not the first (where a raise lands), settled;
/// its token.
async fn sell_off_the_first_shard(app: &TestApp, id: i64, shards: i16) -> uuid::Uuid {
    let buyer = shoppers(app, 8)
        .await
        .into_iter()
        .find(|s| keys::home_shard(s.id, shards) != 0)
        .expect("one of eight shoppers lives on another shard");
    let path = app.path(&buyer.client, id).await;
    let (status, body) = json(app.buy(&buyer.client, id, json!({ "path": path })).await).await;
    assert_eq!(status, 202, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert_settled(app, id, std::slice::from_ref(&token)).await;
    token.parse().unwrap()
}

/// Moves the order's deadline into the past and cancels it in the database only: its unit is
/// owed to Redis, as while the give-back is on its way.
async fn cancel_in_the_database(app: &TestApp, token: uuid::Uuid) {
    sqlx::query("UPDATE orders SET pay_by = now() - interval '5 seconds' WHERE token = $1")
        .bind(token)
        .execute(&app.db)
        .await
        .unwrap();
    assert!(order::cancel_if_overdue(&app.db, token).await.unwrap());
}

#[tokio::test]
async fn a_stock_addition_during_a_reconcile_round_leaves_every_added_unit_on_sale() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 8, json!({ "stock_shards": 4 })).await["id"]
        .as_i64()
        .unwrap();

    // Added after the round read the database, before it reads Redis (the restock that was
    // taken off sale for a round): Redis is ahead of the first figures, not of the second.
    let add = adding(&app, &merchant, id, 20);
    let drift = round(&reconciler_moving_at(&app, Read::Database, add), id).await;
    assert_eq!((drift.drift, drift.repaired), (0, false), "{drift:?}");
    assert_eq!(app.remaining(id).await, 28, "every added unit is on sale");

    // Added after the round read Redis: Redis is behind the second figures, which moved, so
    // nothing is raised; the addition itself brings the units.
    let add = adding(&app, &merchant, id, 20);
    let drift = round(&reconciler_moving_at(&app, Read::Redis, add), id).await;
    assert_eq!((drift.drift, drift.repaired), (-20, false), "{drift:?}");
    assert_eq!(app.remaining(id).await, 48);
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!(drift.drift, 0, "{drift:?}");
    assert_eq!(app.remaining(id).await, 48);
}

#[tokio::test]
async fn an_addition_that_never_reached_redis_is_carried_over_once_even_if_delivered_late() {
    // No rounds but the test's: the addition stays owed until the test's round.
    let app = spawn_app_with(|c| c.reconcile_every = std::time::Duration::from_secs(3600)).await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 8, json!({ "stock_shards": 4 })).await["id"]
        .as_i64()
        .unwrap();
    let merchant_id: i64 = sqlx::query_scalar(
        "SELECT u.id FROM users u JOIN activities a ON a.shop_id = u.shop_id WHERE a.id = $1 LIMIT 1",
    )
    .bind(id)
    .fetch_one(&app.db)
    .await
    .unwrap();
    // The database took 12 units; the request died before Redis.
    let mut tx = app.db.begin().await.unwrap();
    let shop_id: i64 = sqlx::query_scalar("SELECT shop_id FROM activities WHERE id = $1")
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let added = activity::add_units(&mut tx, id, shop_id, merchant_id, 12)
        .await
        .unwrap()
        .expect("the shop's sale");
    tx.commit().await.unwrap();
    assert_eq!(app.remaining(id).await, 8);

    // Owed, it is carried over by the next round, never raised by it.
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!(drift.drift, 0, "{drift:?}");
    assert_eq!(app.remaining(id).await, 20);

    // The request's own call to Redis, arriving now, adds nothing.
    let late = activity::OwedAddition {
        addition: added.addition,
        activity_id: id,
        added: 12,
        stock_shards: added.stock_shards,
        remaining: added.total_stock - added.sold,
    };
    activity::stock::add_to_stock(&app.redis, &late)
        .await
        .unwrap();
    assert_eq!(app.remaining(id).await, 20);
    adding(&app, &merchant, id, 1).await;
    assert_eq!(app.remaining(id).await, 21);
}

#[tokio::test]
async fn a_delayed_give_back_never_puts_a_unit_on_sale_twice() {
    // No sweeper and no rounds but the test's: the give-back is delivered when the test says.
    let app = spawn_app_with(|c| {
        c.sweep_every = std::time::Duration::from_secs(3600);
        c.reconcile_every = std::time::Duration::from_secs(3600);
    })
    .await;
    let merchant = merchant(&app).await;
    let body = json!({ "stock_shards": 4, "payment_window_secs": 3600 });
    let id = live_activity(&app, &merchant, 8, body).await["id"]
        .as_i64()
        .unwrap();
    let token = sell_off_the_first_shard(&app, id, 4).await;
    assert_eq!(app.remaining(id).await, 7);

    // Cancelled in the database; its give-back held back past a whole round.
    cancel_in_the_database(&app, token).await;
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!((drift.drift, drift.repaired), (-1, false), "{drift:?}");
    assert_eq!(app.remaining(id).await, 7, "an owed unit is not raised");
    // Then delivered: the unit is on sale once.
    app.state.deadlines.expire(token).await.unwrap();
    assert_eq!(app.remaining(id).await, 8);
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!(drift.drift, 0, "{drift:?}");
    assert_eq!(app.remaining(id).await, 8);

    // Redis lost two units (a failover); a round that sees it has a cancellation and its
    // give-back land after Redis is read: the figures moved, so it raises nothing then.
    let token = sell_off_the_first_shard(&app, id, 4).await;
    let first = app.shard_keys(id).await[0].clone();
    let units = shard_stock(&app, id).await[0];
    set_stock(&app, &first, units - 2).await;
    let (db, deadlines) = (app.db.clone(), app.state.deadlines.clone());
    let cancel = async move {
        sqlx::query("UPDATE orders SET pay_by = now() - interval '5 seconds' WHERE token = $1")
            .bind(token)
            .execute(&db)
            .await
            .unwrap();
        deadlines.expire(token).await.unwrap();
    };
    let drift = round(&reconciler_moving_at(&app, Read::Redis, cancel), id).await;
    assert_eq!((drift.drift, drift.repaired), (-3, false), "{drift:?}");
    assert_eq!(app.remaining(id).await, 6);
    // The next round raises the two lost units, and no more.
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!((drift.drift, drift.repaired), (-2, true), "{drift:?}");
    assert_eq!(app.remaining(id).await, 8);
    assert_eq!(sold(&app, id).await, 0);
}

#[tokio::test]
async fn a_unit_sold_and_persisted_while_a_round_reads_takes_no_other_unit_off_sale() {
    // No rounds but the test's.
    let app = spawn_app_with(|c| c.reconcile_every = std::time::Duration::from_secs(3600)).await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 8, json!({ "stock_shards": 2 })).await["id"]
        .as_i64()
        .unwrap();
    let buyer = shoppers(&app, 1).await.remove(0);
    let path = app.path(&buyer.client, id).await;
    let (url, db) = (
        app.url(&format!("/api/activities/{id}/buy")),
        app.db.clone(),
    );

    // Bought and written to the database after the round read Redis, before it reads the
    // database again: Redis was read with the unit, the second figures count it sold. Nothing
    // is above what it should be, so nothing may be lowered: a shard the buy did not touch
    // would lose a unit to the compare-and-set.
    let sell = async move {
        let resp = buyer
            .client
            .post(url)
            .json(&json!({ "path": path }))
            .send()
            .await
            .unwrap();
        let (status, body) = json(resp).await;
        assert_eq!(status, 202, "{body}");
        eventually(60, "the order is written", || {
            let db = db.clone();
            async move {
                let sold: i64 = sqlx::query_scalar("SELECT sold FROM activities WHERE id = $1")
                    .bind(id)
                    .fetch_one(&db)
                    .await
                    .unwrap();
                (sold == 1).then_some(())
            }
        })
        .await;
    };
    let drift = round(&reconciler_moving_at(&app, Read::Redis, sell), id).await;
    assert!(!drift.repaired, "{drift:?}");
    assert_eq!(
        app.remaining(id).await,
        7,
        "every unsold unit is still on sale"
    );
    let drift = round(&app.state.reconciler, id).await;
    assert_eq!((drift.drift, drift.repaired), (0, false), "{drift:?}");
    assert_eq!(app.remaining(id).await, 7);
}
