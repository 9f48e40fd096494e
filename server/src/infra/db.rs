//! PostgreSQL: the pool and the migrations, applied at start-up (sqlx takes an advisory lock, so
//! several instances starting together apply them once).

use anyhow::Context;
use sqlx::{postgres::PgPoolOptions, PgPool};
use std::time::Duration;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .context("connecting to PostgreSQL")
}

pub async fn migrate(db: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(db).await.context("running migrations")
}

/// One round trip to PostgreSQL (what `/readyz` asks).
pub async fn ping(db: &PgPool) -> sqlx::Result<()> {
    sqlx::query!("SELECT 1 AS one").fetch_one(db).await?;
    Ok(())
}
