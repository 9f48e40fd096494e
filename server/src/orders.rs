//! A shopper's view of their reservations: one token's status (polled by the browser) and the
//! list of their orders. A token still `queued` lives only in Redis; from `confirmed` on, the
//! database is the truth.

use crate::{catalog::rfc3339, error::{ApiError, ApiResult}, session::SignedIn, state::AppState};
use app::api::{OrderList, OrderStatus};
use axum::{
    extract::{Path, State},
    http::header,
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use std::collections::HashMap;

pub fn router() -> Router<AppState> {
    Router::new().route("/orders", get(list_orders)).route("/orders/{token}", get(order_status))
}

#[derive(sqlx::FromRow)]
struct OrderRow {
    token: uuid::Uuid,
    id: i64,
    activity_id: i64,
    user_id: i64,
    quantity: i32,
    status: String,
    pay_by: Option<chrono::DateTime<chrono::Utc>>,
    reason: Option<String>,
}

impl OrderRow {
    fn into_status(self) -> OrderStatus {
        OrderStatus {
            token: self.token.to_string(),
            order_id: (self.status != "failed").then_some(self.id),
            status: self.status,
            activity_id: self.activity_id,
            quantity: self.quantity,
            pay_by: self.pay_by.map(rfc3339),
            reason: self.reason,
        }
    }
}

/// A reservation known only to Redis (still queued, or failed without a database record).
fn from_cache(token: uuid::Uuid, cached: &HashMap<String, String>, status: &str) -> OrderStatus {
    OrderStatus {
        token: token.to_string(),
        status: status.into(),
        activity_id: cached.get("activity_id").and_then(|a| a.parse().ok()).unwrap_or_default(),
        quantity: cached.get("quantity").and_then(|q| q.parse().ok()).unwrap_or_default(),
        order_id: None,
        pay_by: None,
        reason: cached.get("reason").cloned(),
    }
}

const COLUMNS: &str = "token, id, activity_id, user_id, quantity, status, pay_by, reason";

async fn order_status(State(state): State<AppState>, SignedIn(user): SignedIn, Path(token): Path<String>) -> ApiResult<impl IntoResponse> {
    let token = uuid::Uuid::parse_str(&token).map_err(|_| ApiError::invalid("token", "must be a reservation token"))?;
    let cached: HashMap<String, String> =
        redis::cmd("HGETALL").arg(state.keys.token(&token.to_string())).query_async(&mut state.redis.clone()).await?;
    let owner = cached.get("user_id").and_then(|u| u.parse::<i64>().ok());
    let status = match cached.get("status").map(String::as_str) {
        Some("queued") if owner == Some(user.user_id) => Some(from_cache(token, &cached, "queued")),
        _ => {
            let row: Option<OrderRow> = sqlx::query_as(&format!("SELECT {COLUMNS} FROM orders WHERE token = $1"))
                .bind(token)
                .fetch_optional(&state.db)
                .await?;
            match row {
                Some(row) if row.user_id == user.user_id => Some(row.into_status()),
                Some(_) => None,
                // Failed without a database record (its user or activity is gone): Redis knows.
                None if owner == Some(user.user_id) && cached.get("status").map(String::as_str) == Some("failed") => {
                    Some(from_cache(token, &cached, "failed"))
                }
                None => None,
            }
        }
    };
    // Someone else's token is indistinguishable from no token.
    let status = status.ok_or(ApiError::NotFound)?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(status)))
}

async fn list_orders(State(state): State<AppState>, SignedIn(user): SignedIn) -> ApiResult<impl IntoResponse> {
    let rows: Vec<OrderRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM orders WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 200"))
            .bind(user.user_id)
            .fetch_all(&state.db)
            .await?;
    let orders = rows.into_iter().map(OrderRow::into_status).collect();
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(OrderList { orders })))
}
