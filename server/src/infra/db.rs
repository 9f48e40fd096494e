//! PostgreSQL: the pool and the migrations, applied at start-up on a development box (sqlx takes
//! an advisory lock, so several instances starting together apply them once), and by `server
//! migrate` alone where the process is deployed (`SECKILL_MIGRATE_ON_START`).

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

/// The oldest migration of this release that `db` has not applied (`None`: it has them all; a
/// database never migrated lacks the first).
pub async fn missing_migration(db: &PgPool) -> anyhow::Result<Option<i64>> {
    let migrator = sqlx::migrate!("../migrations");
    let applied: Vec<i64> =
        match sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(db)
            .await
        {
            Ok(applied) => applied,
            // No table yet: nothing was ever applied.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => Vec::new(),
            Err(e) => return Err(e).context("reading the applied migrations"),
        };
    Ok(migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| m.version)
        .find(|v| !applied.contains(v)))
}

/// Refuses to go on, naming the first migration `db` lacks (a deployed process does not migrate
/// by itself: the release's migrations Job or `server migrate` does, before it starts).
pub async fn require_migrated(db: &PgPool) -> anyhow::Result<()> {
    if let Some(version) = missing_migration(db).await? {
        anyhow::bail!(
            "the database lacks migration {version} of this release: run `server migrate` (the \
             release's migrations Job) first (docs/deploy.md \"Upgrades\")"
        );
    }
    Ok(())
}

/// `server migrate --wait`: polls until the database has every migration of this release, and
/// returns the newest one; fails after `deadline`, naming the one still missing.
pub async fn await_migrated(url: &str, deadline: Duration) -> anyhow::Result<i64> {
    let started = std::time::Instant::now();
    let newest = sqlx::migrate!("../migrations")
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or_default();
    let mut said = None;
    loop {
        let missing = match connect(url, 1).await {
            Ok(db) => {
                let missing = missing_migration(&db).await;
                db.close().await;
                missing
            }
            Err(e) => Err(e),
        };
        match missing {
            Ok(None) => return Ok(newest),
            Ok(Some(version)) if said != Some(version) => {
                println!(
                    "waiting for migration {version} (the release's migrations Job applies it)"
                );
                said = Some(version);
            }
            Ok(Some(_)) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "reading the migrations"),
        }
        if started.elapsed() >= deadline {
            match said {
                Some(version) => anyhow::bail!(
                    "the database still lacks migration {version} of this release after {} s",
                    deadline.as_secs()
                ),
                None => anyhow::bail!("PostgreSQL did not answer within {} s", deadline.as_secs()),
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
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
