//! The first answers of a merchant's keyed writes (`admin_requests`): what makes create-sale and
//! add-stock safe to retry (`http/admin/replay.rs` gives them back).

use sqlx::{PgConnection, PgPool};

// How long a key's first answer is kept: a day (written into the statements below, which are
// checked at compile time and take one literal).

/// Forgets the first answers older than a day (every instance runs it each minute; the
/// `created_at` index keeps it a short range delete). How many it forgot.
pub async fn forget_old(db: &PgPool) -> sqlx::Result<u64> {
    Ok(
        sqlx::query!("DELETE FROM admin_requests WHERE created_at < now() - interval '1 day'")
            .execute(db)
            .await?
            .rows_affected(),
    )
}

/// Takes `key` for this request inside `tx` (an answer of the key older than a day forgotten
/// first): whether it is new.
pub async fn take(
    tx: &mut PgConnection,
    merchant: i64,
    key: &str,
    route: &str,
) -> sqlx::Result<bool> {
    sqlx::query!(
        "DELETE FROM admin_requests WHERE merchant_id = $1 AND key = $2
         AND created_at < now() - interval '1 day'",
        merchant,
        key
    )
    .execute(&mut *tx)
    .await?;
    let taken = sqlx::query_scalar!(
        "INSERT INTO admin_requests (merchant_id, key, route) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING RETURNING 1",
        merchant,
        key,
        route
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(taken.is_some())
}

/// The key's first request: its route, and its answer's status and body once recorded.
pub struct First {
    pub route: String,
    pub status: Option<i16>,
    pub body: Option<serde_json::Value>,
}

pub async fn first(tx: &mut PgConnection, merchant: i64, key: &str) -> sqlx::Result<First> {
    let first = sqlx::query!(
        "SELECT route, status, body FROM admin_requests WHERE merchant_id = $1 AND key = $2",
        merchant,
        key
    )
    .fetch_one(tx)
    .await?;
    Ok(First {
        route: first.route,
        status: first.status,
        body: first.body,
    })
}

/// The answer of a taken key, written in the change's transaction.
pub async fn record(
    tx: &mut PgConnection,
    merchant: i64,
    key: &str,
    status: i16,
    body: serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE admin_requests SET status = $3, body = $4 WHERE merchant_id = $1 AND key = $2",
        merchant,
        key,
        status,
        body
    )
    .execute(tx)
    .await?;
    Ok(())
}
