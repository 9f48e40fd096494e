//! The emergency cord (docs/operations.md "The cord"): a stop holds every sale of a shop, or of
//! the whole platform, at once, as a pause does (buys answer `403 paused`, the waiting rooms keep
//! their places and admit no one); a sale's fail-open lets its shoppers past the bot check and
//! the waiting room straight to the gate, where the stock and the per-user limit still hold. Both
//! are undone by the same cord. Every pull is written with what it changed to `cord_pulls` and
//! to the audit log, in the transaction that changes the sales.
//!
//! PostgreSQL has the last word: `halts` holds the stops in force, `activities.halted` and
//! `fail_open` each sale's state. Redis follows: each shard's `paused` switch, which the gate
//! script reads, is the merchant's pause or a stop ([`push_switches`]); the instances' cached
//! rows are told to read the sale again ([`announce`]), so a fail-open reaches every instance
//! within a round trip rather than the cache's five seconds.

use super::{activity::ActivityRow, audit, rfc3339, ApiError, ApiResult};
use crate::infra::redis::Redis;
use app::api::{CordAction, CordPull, CordReportEntry, CordState, SaleId, MAX_REASON_CHARS};
use sqlx::PgPool;

/// How many pulls `GET …/cord` lists, newest first.
const READ_LIMIT: i64 = 100;

/// Whose sales a stop holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Platform,
    Shop(i64),
}

impl Scope {
    /// The key of `halts`: 0 for the platform (no shop has id 0), else the shop's id.
    fn key(self) -> i64 {
        match self {
            Scope::Platform => 0,
            Scope::Shop(id) => id,
        }
    }

    fn shop(self) -> Option<i64> {
        match self {
            Scope::Platform => None,
            Scope::Shop(id) => Some(id),
        }
    }
}

/// Who pulls the cord: the signed-in user.
#[derive(Clone, Copy, Debug)]
pub struct Puller {
    pub user_id: i64,
}

/// The reason checked: 1 to [`MAX_REASON_CHARS`] characters, not only blanks.
pub fn parse_reason(reason: &str) -> ApiResult<String> {
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(ApiError::invalid(
            "reason",
            format!("must be 1 to {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(reason.to_string())
}

/// Stops every sale of `scope` that has not ended (and, while the stop holds, every sale its
/// merchants create). Pulling it again records the pull and changes nothing more.
pub async fn stop(
    db: &PgPool,
    redis: &Redis,
    by: Puller,
    scope: Scope,
    reason: &str,
) -> ApiResult<CordPull> {
    let mut tx = crate::infra::db::begin(db).await?;
    let changed: Vec<i64> = sqlx::query_scalar!(
        "UPDATE activities SET halted = true
         WHERE NOT halted AND ends_at > now() AND ($1::bigint IS NULL OR shop_id = $1)
         RETURNING id",
        scope.shop()
    )
    .fetch_all(&mut *tx)
    .await?;
    let pull = record(
        &mut tx,
        by,
        scope.shop(),
        None,
        CordAction::Stop,
        reason,
        &changed,
    )
    .await?;
    sqlx::query!(
        "INSERT INTO halts (scope, pull_id) VALUES ($1, $2) ON CONFLICT (scope) DO NOTHING",
        scope.key(),
        pull.id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // Every sale the stop holds, not only those it changed: a pull answered with an error is
    // pulled again, and this one then carries what the first could not.
    let held: Vec<i64> = sqlx::query_scalar!(
        "SELECT id FROM activities
         WHERE halted AND ends_at > now() AND ($1::bigint IS NULL OR shop_id = $1)",
        scope.shop()
    )
    .fetch_all(db)
    .await?;
    push_switches(db, redis, &held).await?;
    tracing::warn!(scope = ?scope, sales = changed.len(), "the cord pulled: sales stopped");
    Ok(pull)
}

/// Lifts the stop of `scope`: its sales go on unless their merchant paused them or another stop
/// still holds them (the platform's over a shop's, or a shop's under the platform's).
pub async fn release(
    db: &PgPool,
    redis: &Redis,
    by: Puller,
    scope: Scope,
    reason: &str,
) -> ApiResult<CordPull> {
    let mut tx = crate::infra::db::begin(db).await?;
    sqlx::query!("DELETE FROM halts WHERE scope = $1", scope.key())
        .execute(&mut *tx)
        .await?;
    let changed: Vec<i64> = sqlx::query_scalar!(
        "UPDATE activities a SET halted = false
         WHERE a.halted AND ($1::bigint IS NULL OR a.shop_id = $1)
           AND NOT EXISTS (SELECT 1 FROM halts h WHERE h.scope IN (0, a.shop_id))
         RETURNING a.id",
        scope.shop()
    )
    .fetch_all(&mut *tx)
    .await?;
    let pull = record(
        &mut tx,
        by,
        scope.shop(),
        None,
        CordAction::Release,
        reason,
        &changed,
    )
    .await?;
    tx.commit().await?;
    push_switches(db, redis, &changed).await?;
    tracing::warn!(scope = ?scope, sales = changed.len(), "the cord released: sales go on");
    Ok(pull)
}

/// Turns sale `id`'s fail-open on or off; `shop`: the merchant's shop (another shop's sale is
/// `404`), `None` for an operator. Returns the sale's row as it is now.
pub async fn fail_open(
    db: &PgPool,
    redis: &Redis,
    by: Puller,
    id: i64,
    shop: Option<i64>,
    on: bool,
    reason: &str,
) -> ApiResult<ActivityRow> {
    let mut tx = crate::infra::db::begin(db).await?;
    let was: bool = sqlx::query_scalar!(
        "SELECT fail_open FROM activities WHERE id = $1 AND ($2::bigint IS NULL OR shop_id = $2)
         FOR UPDATE",
        id,
        shop
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApiError::NotFound)?;
    sqlx::query!("UPDATE activities SET fail_open = $2 WHERE id = $1", id, on)
        .execute(&mut *tx)
        .await?;
    let action = if on {
        CordAction::FailOpen
    } else {
        CordAction::FailClosed
    };
    let changed = if was == on { vec![] } else { vec![id] };
    record(&mut tx, by, None, Some(id), action, reason, &changed).await?;
    tx.commit().await?;
    let row = super::activity::load(db, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    announce(redis, &[id]).await?;
    tracing::warn!(activity.id = id, on, "the cord's fail-open switched");
    Ok(row)
}

/// Writes one pull and its audit entry in `tx`.
async fn record(
    tx: &mut sqlx::PgConnection,
    by: Puller,
    shop_id: Option<i64>,
    activity_id: Option<i64>,
    action: CordAction,
    reason: &str,
    changed: &[i64],
) -> ApiResult<CordPull> {
    let row = sqlx::query!(
        "INSERT INTO cord_pulls (actor_id, actor, shop_id, activity_id, action, reason, sales)
         VALUES ($1, COALESCE((SELECT username FROM users WHERE id = $1), 'cli'), $2, $3, $4, $5, $6)
         RETURNING id, at, actor",
        by.user_id,
        shop_id,
        activity_id,
        action.as_str(),
        reason,
        changed
    )
    .fetch_one(&mut *tx)
    .await?;
    // The audit names the shop a pull concerns: a sale's own for a fail-open.
    let audit_shop = match activity_id {
        Some(id) => Some(
            sqlx::query_scalar!("SELECT shop_id FROM activities WHERE id = $1", id)
                .fetch_one(&mut *tx)
                .await?,
        ),
        None => shop_id,
    };
    let target = match (activity_id, shop_id) {
        (Some(id), _) => format!("sale #{id}"),
        (None, Some(shop)) => format!("shop #{shop}"),
        (None, None) => "the platform".to_string(),
    };
    let sales = changed
        .iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(" ");
    let detail = format!(
        "{reason} — changed {} sale(s){}{sales}",
        changed.len(),
        if changed.is_empty() { "" } else { ": " }
    );
    audit::record(
        &mut *tx,
        Some(by.user_id),
        audit_shop,
        &format!("cord.{}", action.as_str()),
        &target,
        &detail,
    )
    .await?;
    Ok(CordPull {
        id: row.id,
        at: rfc3339(row.at),
        actor: row.actor,
        action,
        shop_id,
        activity_id: activity_id.map(SaleId),
        reason: reason.to_string(),
        sales: changed.iter().copied().map(SaleId).collect(),
    })
}

/// Each shard of each sale told whether buys stop (the merchant's pause or a stop), as
/// PostgreSQL has it now, then every instance told to read the sales again.
pub async fn push_switches(db: &PgPool, redis: &Redis, sales: &[i64]) -> ApiResult<()> {
    let rows = sqlx::query!(
        r#"SELECT id, stock_shards, paused OR halted AS "stopped!" FROM activities
           WHERE id = ANY($1)"#,
        sales
    )
    .fetch_all(db)
    .await?;
    for row in rows {
        for shard in redis.keys.shards(row.id, row.stock_shards) {
            let _: () = redis::cmd("HSET")
                .arg(shard.meta())
                .arg("paused")
                .arg(if row.stopped { "1" } else { "0" })
                .query_async(&mut redis.conn())
                .await?;
        }
    }
    announce(redis, sales).await
}

/// Tells every instance (this one included) that these sales' switches changed: their cached
/// rows are read again at their next use.
pub async fn announce(redis: &Redis, sales: &[i64]) -> ApiResult<()> {
    let channel = redis.keys.sale_channel();
    for id in sales {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(id)
            .query_async(&mut redis.conn())
            .await?;
    }
    Ok(())
}

/// The stops in force and the newest pulls: a shop's (with the platform's) or, `None`, all.
pub async fn state(db: &PgPool, shop: Option<i64>) -> ApiResult<CordState> {
    let scopes: Vec<i64> = sqlx::query_scalar!(
        "SELECT scope FROM halts WHERE $1::bigint IS NULL OR scope IN (0, $1) ORDER BY scope",
        shop
    )
    .fetch_all(db)
    .await?;
    let pulls = sqlx::query!(
        r#"SELECT p.id, p.at, p.actor, p.shop_id, p.activity_id, p.action, p.reason, p.sales
           FROM cord_pulls p LEFT JOIN activities a ON a.id = p.activity_id
           WHERE $1::bigint IS NULL
              OR (p.activity_id IS NULL AND (p.shop_id IS NULL OR p.shop_id = $1))
              OR a.shop_id = $1
           ORDER BY p.at DESC, p.id DESC LIMIT $2"#,
        shop,
        READ_LIMIT
    )
    .fetch_all(db)
    .await?;
    Ok(CordState {
        platform_stopped: scopes.contains(&0),
        shops_stopped: scopes.into_iter().filter(|&s| s != 0).collect(),
        pulls: pulls
            .into_iter()
            .filter_map(|p| {
                Some(CordPull {
                    id: p.id,
                    at: rfc3339(p.at),
                    actor: p.actor,
                    action: p.action.parse().ok()?,
                    shop_id: p.shop_id,
                    activity_id: p.activity_id.map(SaleId),
                    reason: p.reason,
                    sales: p.sales.into_iter().map(SaleId).collect(),
                })
            })
            .collect(),
    })
}

/// The pulls that changed sale `id`, oldest first, as its public report shows them.
pub async fn of_sale(db: &PgPool, id: i64) -> ApiResult<Vec<CordReportEntry>> {
    let rows = sqlx::query!(
        "SELECT at, action, shop_id, activity_id FROM cord_pulls
         WHERE $1 = ANY(sales) ORDER BY at, id",
        id
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let scope = match (r.activity_id, r.shop_id) {
                (Some(_), _) => "sale",
                (None, Some(_)) => "shop",
                (None, None) => "platform",
            };
            Some(CordReportEntry {
                at: rfc3339(r.at),
                action: r.action.parse().ok()?,
                scope: scope.to_string(),
            })
        })
        .collect())
}
