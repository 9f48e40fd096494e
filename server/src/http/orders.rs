//! docs/api.md "Storefront", the orders: one token's status (polled by the browser), the list of a
//! shopper's orders, and paying. A token still `queued` lives only in Redis; from `confirmed` on,
//! the database is the truth. Paying is a conditional update (`status = 'confirmed' AND pay_by >
//! now()`), as is the deadline's cancelling (`pipeline/deadline.rs`), so an order ends paid or
//! cancelled, never both.

use super::{input::InPath, session::SignedIn};
use crate::http::state::AppState;
use crate::{
    domain::{
        order::{self, OrderRow},
        payment::{Charge, PaymentProvider},
        ApiError, ApiResult,
    },
    infra::{
        keys::{token_home, BORROWING},
        redis::Redis,
    },
};
use app::api::{OrderList, OrderStatus, OrderView, PaymentResult, Token};
use axum::{
    extract::State,
    http::header,
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/orders", get(list_orders))
        .route("/orders/{token}", get(order_status))
        .route("/orders/{token}/pay", post(pay))
}

/// A reservation known only to Redis (still queued, or failed without a database record);
/// `None` for a record that names no sale (the gate always writes one).
fn from_cache(
    token: uuid::Uuid,
    cached: &HashMap<String, String>,
    status: OrderStatus,
) -> Option<OrderView> {
    Some(OrderView {
        token: Token(token),
        status,
        activity_id: cached.get("activity_id")?.parse().ok()?,
        quantity: cached
            .get("quantity")
            .and_then(|q| q.parse().ok())
            .unwrap_or_default(),
        order_id: None,
        pay_by: None,
        reason: cached.get("reason").cloned(),
    })
}

async fn order_status(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    SignedIn(user): SignedIn,
    InPath(Token(token)): InPath<Token>,
) -> ApiResult<impl IntoResponse> {
    let cached = token_record(&redis, &token).await?;
    let owner = cached.get("user_id").and_then(|u| u.parse::<i64>().ok());
    let recorded = match cached.get("status").map(String::as_str) {
        // Its units are being borrowed from another stock shard: queued, to the shopper.
        Some(BORROWING) => Some(OrderStatus::Queued),
        other => other.and_then(|s| s.parse::<OrderStatus>().ok()),
    };
    let status = match recorded {
        Some(OrderStatus::Queued) if owner == Some(user.user_id) => {
            from_cache(token, &cached, OrderStatus::Queued)
        }
        // No record (an order now: the persister removed it; or no such token), or a final state:
        // the database says.
        _ => {
            match order::by_token(&db, token).await? {
                Some(row) if row.user_id == user.user_id => Some(row.into_view()?),
                Some(_) => None,
                // Failed without a database record (its user or activity is gone): Redis knows.
                None if owner == Some(user.user_id) && recorded == Some(OrderStatus::Failed) => {
                    from_cache(token, &cached, OrderStatus::Failed)
                }
                None => None,
            }
        }
    };
    // Someone else's token is indistinguishable from no token.
    let status = status.ok_or(ApiError::NotFound)?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(status)))
}

/// What Redis knows of a token, as a record (`status`, `activity_id`, `user_id`, `quantity`, …;
/// empty for a token no gate made, one long expired, or an order: the database says then).
///
/// One atomic round trip on the token's home shard reads its record of its own (a borrowing's,
/// a give-back's final state, or one the release before wrote for every grant), its place in
/// the unsettled set and its owners entry (`infra/keys.rs`). A record of its own is the answer.
/// Otherwise a token still unsettled with an owners entry is `queued` for that owner; an owners
/// entry without the token unsettled (one a release before's persister left behind when it
/// made the order) says nothing.
async fn token_record(redis: &Redis, token: &uuid::Uuid) -> ApiResult<HashMap<String, String>> {
    let Some((activity, shard, shards)) = token_home(token) else {
        return Ok(HashMap::new());
    };
    let home = redis.keys.shard(activity, shard, shards);
    let (record, unsettled, owner): (HashMap<String, String>, Option<f64>, Option<String>) =
        redis::pipe()
            .atomic()
            .hgetall(home.token(token))
            .zscore(home.unsettled(), token.to_string())
            .hget(home.owners(), token.to_string())
            .query_async(&mut redis.conn())
            .await?;
    if !record.is_empty() {
        return Ok(record);
    }
    let (Some(_), Some(owner)) = (unsettled, owner) else {
        return Ok(HashMap::new());
    };
    let Some((user, quantity)) = owner.split_once(' ') else {
        return Ok(HashMap::new());
    };
    Ok(HashMap::from([
        ("status".to_owned(), OrderStatus::Queued.as_str().to_owned()),
        ("activity_id".to_owned(), activity.to_string()),
        ("user_id".to_owned(), user.to_owned()),
        ("quantity".to_owned(), quantity.to_owned()),
    ]))
}

async fn list_orders(
    State(db): State<PgPool>,
    SignedIn(user): SignedIn,
) -> ApiResult<impl IntoResponse> {
    let orders = order::of_user(&db, user.user_id)
        .await?
        .into_iter()
        .map(OrderRow::into_view)
        .collect::<ApiResult<_>>()?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(OrderList { orders }),
    ))
}

async fn pay(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(payments): State<Arc<dyn PaymentProvider>>,
    SignedIn(user): SignedIn,
    InPath(Token(token)): InPath<Token>,
) -> ApiResult<Json<PaymentResult>> {
    let (owner, status, overdue, amount_cents) = match order::payable(&db, token).await? {
        Some(p) => (p.user_id, p.status, p.overdue, p.amount_cents),
        None => {
            // Still queued (or unknown): only its owner learns that it is not payable yet.
            let owner = token_record(&redis, &token)
                .await?
                .get("user_id")
                .and_then(|u| u.parse::<i64>().ok());
            return Err(if owner == Some(user.user_id) {
                ApiError::NotConfirmed
            } else {
                ApiError::NotFound
            });
        }
    };
    if owner != user.user_id {
        return Err(ApiError::NotFound);
    }
    let paid = Json(PaymentResult {
        status: OrderStatus::Paid,
    });
    match (order::parse_status(&status)?, overdue) {
        (OrderStatus::Paid, _) => return Ok(paid),
        (OrderStatus::Cancelled, _) | (OrderStatus::Confirmed, true) => {
            return Err(ApiError::PaymentWindowClosed)
        }
        (OrderStatus::Confirmed, false) => {}
        (OrderStatus::Queued | OrderStatus::Failed, _) => return Err(ApiError::NotConfirmed),
    }
    let charge = Charge {
        token,
        amount_cents,
    };
    // A provider that does not answer (or declines) takes nothing: the order stays confirmed and
    // the shopper may pay again before the deadline.
    if let Err(e) = payments.charge(&charge).await {
        tracing::warn!(order.token = %token, error = %format!("{e:#}"), "charge failed");
        return Err(ApiError::Unavailable { retry_after: 1 });
    }
    if !order::mark_paid(&db, token).await? {
        if order::status_of(&db, token).await? == Some(OrderStatus::Paid) {
            // A concurrent request of the same shopper paid it; this charge was the same one.
            return Ok(paid);
        }
        // The deadline won the race: the money goes back.
        payments.refund(&charge).await?;
        return Err(ApiError::PaymentWindowClosed);
    }
    // The order's state is the database's alone once it is an order (the persister removed its
    // record from Redis): nothing to mark there.
    tracing::info!(order.token = %token, "order paid");
    Ok(paid)
}
