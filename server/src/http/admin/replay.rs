//! A merchant's writes that are safe to retry: create-sale and add-stock take an
//! `Idempotency-Key`. The first answer is written in the same transaction as the change, so a
//! retry (after a timeout, a `503`, a dropped connection) gets it back and changes nothing; two
//! requests with one key at once are one change (the second waits for the first's transaction).

use crate::domain::{admin_requests, ApiError, ApiResult};
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::Value;
use sqlx::PgConnection;

/// Takes `key` for this request inside `tx`: `None` when it is new (the caller makes the change
/// and calls [`record`]), else the first answer to give back.
pub async fn claim(
    tx: &mut PgConnection,
    merchant: i64,
    key: &str,
    route: &str,
) -> ApiResult<Option<Response>> {
    if admin_requests::take(tx, merchant, key, route).await? {
        return Ok(None);
    }
    let first = admin_requests::first(tx, merchant, key).await?;
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
    admin_requests::record(tx, merchant, key, status.as_u16() as i16, body).await?;
    Ok(())
}
