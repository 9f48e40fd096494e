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

/// One round trip to PostgreSQL (what `/readyz` asks).
pub async fn ping(db: &PgPool) -> sqlx::Result<()> {
    sqlx::query!("SELECT 1 AS one").fetch_one(db).await?;
    Ok(())
}
