//! The audit log: who did what, when, for every merchant and operator action. A row is written in
//! the same transaction as the change it records, where the change has one.

use super::{rfc3339, ApiResult};
use app::api::AuditEntry;

use sqlx::PgPool;

/// How many entries the console shows (newest first).
pub const READ_LIMIT: i64 = 500;

/// Records one action. `actor_id`: the signed-in user (`None`: the command line). `shop_id`: the
/// shop it concerns (`None`: a platform action).
pub async fn record<'e>(
    db: impl sqlx::PgExecutor<'e>,
    actor_id: Option<i64>,
    shop_id: Option<i64>,
    action: &str,
    target: &str,
    detail: &str,
) -> ApiResult<()> {
    sqlx::query!(
        "INSERT INTO audit_log (actor_id, actor, shop_id, action, target, detail)
         VALUES ($1, COALESCE((SELECT username FROM users WHERE id = $1), 'cli'), $2, $3, $4, $5)",
        actor_id,
        shop_id,
        action,
        target,
        detail
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The newest entries of one shop (`Some`), or of the whole platform (`None`).
pub async fn read(db: &PgPool, shop_id: Option<i64>) -> ApiResult<Vec<AuditEntry>> {
    let rows = sqlx::query!(
        "SELECT id, at, actor, shop_id, action, target, detail FROM audit_log
         WHERE $1::bigint IS NULL OR shop_id = $1 ORDER BY at DESC, id DESC LIMIT $2",
        shop_id,
        READ_LIMIT
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AuditEntry {
            id: r.id,
            at: rfc3339(r.at),
            actor: r.actor,
            shop_id: r.shop_id,
            action: r.action,
            target: r.target,
            detail: r.detail,
        })
        .collect())
}
