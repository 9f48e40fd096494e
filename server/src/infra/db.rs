//! PostgreSQL: the pool and the migrations, applied at start-up (sqlx takes an advisory lock, so
//! several instances starting together apply them once).

use anyhow::Context;
use sqlx::{postgres::PgPoolOptions, PgPool};
use std::time::Duration;

pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .context("connecting to PostgreSQL")
}

/// Applies the migrations this release has and the database lacks. Migrations only expand
/// (docs/deploy.md "Upgrades", checked by `scripts/check-migrations.py`), so a database that a
/// later release has migrated further is one this release still runs on: during a rolling
/// upgrade an instance of the release before can start (or restart) after the new release's
/// migrations ran.
pub async fn migrate(db: &PgPool) -> anyhow::Result<()> {
    let mut migrator = sqlx::migrate!("../migrations");
    migrator.set_ignore_missing(true);
    migrator.run(db).await.context("running migrations")
}

/// A transaction whose `BEGIN` runs to its end even when the caller is dropped meanwhile (a
/// client that hung up, a timeout, an aborted worker). sqlx 0.8 (and 0.9.0) counts the
/// transaction only once `BEGIN` has answered: a `begin()` dropped while waiting for it leaves
/// the session inside a transaction nothing rolls back, and the pool lends that connection on.
/// Its next users' statements then run inside the stale transaction, uncommitted and holding
/// their locks, with its old clock (seen: a cancellation's `pay_by` write invisible to the
/// cancel that followed it). Begun in a task of its own, the transaction is always counted,
/// and dropped unused it is rolled back before its connection goes back to the pool.
pub async fn begin(db: &PgPool) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Postgres>> {
    let db = db.clone();
    match tokio::spawn(async move { db.begin().await }).await {
        Ok(begun) => begun,
        Err(e) => Err(sqlx::Error::Io(std::io::Error::other(format!(
            "beginning a transaction: {e}"
        )))),
    }
}

/// One round trip to PostgreSQL (what `/readyz` asks).
pub async fn ping(db: &PgPool) -> sqlx::Result<()> {
    sqlx::query!("SELECT 1 AS one").fetch_one(db).await?;
    Ok(())
}
