//! Transactions whose callers are dropped while they begin (a client that hung up, a timeout,
//! an aborted worker) leave no connection of the pool inside them (`infra::db::begin`).

use crate::helpers::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::{str::FromStr, time::Duration};

#[tokio::test]
async fn a_transaction_dropped_while_it_begins_leaves_no_session_inside_it() {
    let app = spawn_app().await;
    // One connection, so that every attempt lands on the same session, known by its name.
    let name = unique_name("begin");
    let options = PgConnectOptions::from_str(&app.config.database_url)
        .unwrap()
        .application_name(&name);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    let mut inside = Vec::new();
    // Dropped ever later, 0.3 µs a step: before the connection is lent, while `BEGIN` is on its
    // way (seen: nine sessions of 300 left inside a transaction by a plain `pool.begin()`), after.
    for step in 0..300u64 {
        // The timer's tick is a millisecond: the deadline is watched between yields instead.
        let until = std::time::Instant::now() + Duration::from_nanos(step * 300);
        tokio::select! {
            _ = server::infra::db::begin(&pool) => {}
            () = async {
                while std::time::Instant::now() < until {
                    tokio::task::yield_now().await;
                }
            } => {}
        }
        // The one connection, once it is back in the pool; where its session stands.
        let held = pool.acquire().await.unwrap();
        let state: String =
            sqlx::query_scalar("SELECT state FROM pg_stat_activity WHERE application_name = $1")
                .bind(&name)
                .fetch_one(&app.db)
                .await
                .unwrap();
        if state != "idle" {
            inside.push((step * 4, state));
        }
        drop(held);
    }
    assert!(
        inside.is_empty(),
        "sessions left in a transaction (timeout in µs, state): {inside:?}"
    );
}
