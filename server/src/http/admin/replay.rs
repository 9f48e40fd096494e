//! A merchant's writes that are safe to retry: create-sale and add-stock take an
//! `Idempotency-Key`. The first answer is written in the same transaction as the change, so a
//! retry (after a timeout, a `503`, a dropped connection) gets it back and changes nothing; two
//! requests with one key at once are one change (the second waits for the first's transaction).

use crate::domain::{ApiError, ApiResult};
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::Value;
use sqlx::PgConnection;

// How long a key's first answer is kept: a day (written into the statements below, which are
// checked at compile time and take one literal).

/// Forgets the first answers older than a day (every instance runs it each minute; the
/// `created_at` index keeps it a short range delete). How many it forgot.
pub async fn forget_old(db: &sqlx::PgPool) -> sqlx::Result<u64> {
    Ok(
        sqlx::query!("DELETE FROM admin_requests WHERE created_at < now() - interval '1 day'")
            .execute(db)
            .await?
            .rows_affected(),
    )
}

/// Takes `key` for this request inside `tx`: `None` when it is new (the caller makes the change
/// and calls [`record`]), else the first answer to give back.
pub async fn claim(
    tx: &mut PgConnection,
    merchant: i64,
    key: &str,
    route: &str,
) -> ApiResult<Option<Response>> {
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
    if taken.is_some() {
        return Ok(None);
    }
    let first = sqlx::query!(
        "SELECT route, status, body FROM admin_requests WHERE merchant_id = $1 AND key = $2",
        merchant,
        key
    )
    .fetch_one(&mut *tx)
    .await?;
    let (first_route, status, body) = (first.route, first.status, first.body);
    if first_route != route {
        return Err(ApiError::invalid(
            "Idempotency-Key",
            "was used for another request; send a new key",
        ));
    }
    let status = status
        .and_then(|s| StatusCode::from_u16(s as u16).ok())
        .unwrap_or(StatusCode::OK);
    Ok(Some(
        (status, Json(body.unwrap_or(Value::Null))).into_response(),
    ))
}

/// Writes the answer of a claimed key (in the change's transaction).
pub async fn record(
    tx: &mut PgConnection,
    merchant: i64,
    key: &str,
    status: StatusCode,
    body: &impl serde::Serialize,
) -> ApiResult<()> {
    let body = serde_json::to_value(body).map_err(|e| ApiError::Internal(e.into()))?;
    sqlx::query!(
        "UPDATE admin_requests SET status = $3, body = $4 WHERE merchant_id = $1 AND key = $2",
        merchant,
        key,
        status.as_u16() as i16,
        body
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
