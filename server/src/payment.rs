//! Paying for a confirmed order. The provider sits behind a small trait so that a real one can
//! replace the simulated one. The database decides the race with the deadline: paying is a
//! conditional update (`status = 'confirmed' AND pay_by > now()`), and so is cancelling, so an
//! order ends paid or cancelled, never both.

use crate::{error::{ApiError, ApiResult}, session::SignedIn, state::AppState};
use app::api::PaymentResult;
use axum::{extract::{Path, State}, routing::post, Json, Router};
use std::{future::Future, pin::Pin};

pub struct Charge {
    pub token: uuid::Uuid,
    pub amount_cents: i64,
}

pub type ProviderResult<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + Send + 'a>>;

pub trait PaymentProvider: Send + Sync {
    /// Takes the money; the token is the idempotency key, so charging twice charges once.
    fn charge<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()>;
    /// Gives the money back for an order that could not be paid after all.
    fn refund<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()>;
}

/// Accepts every payment at once (a stand-in for a real provider).
pub struct SimulatedProvider;

impl PaymentProvider for SimulatedProvider {
    fn charge<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            tracing::info!(order.token = %charge.token, amount_cents = charge.amount_cents, "simulated charge");
            Ok(())
        })
    }

    fn refund<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            tracing::info!(order.token = %charge.token, amount_cents = charge.amount_cents, "simulated refund");
            Ok(())
        })
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/orders/{token}/pay", post(pay))
}

async fn pay(State(state): State<AppState>, SignedIn(user): SignedIn, Path(token): Path<String>) -> ApiResult<Json<PaymentResult>> {
    let token = uuid::Uuid::parse_str(&token).map_err(|_| ApiError::invalid("token", "must be a reservation token"))?;
    let row: Option<(i64, String, bool, i64)> = sqlx::query_as(
        "SELECT user_id, status, pay_by <= now(), quantity * unit_price_cents FROM orders WHERE token = $1",
    )
    .bind(token)
    .fetch_optional(&state.db)
    .await?;
    let (owner, status, overdue, amount_cents) = match row {
        Some(r) => r,
        None => {
            // Still queued (or unknown): only its owner learns that it is not payable yet.
            let owner: Option<i64> = redis::cmd("HGET")
                .arg(state.keys.token(&token.to_string()))
                .arg("user_id")
                .query_async(&mut state.redis.clone())
                .await?;
            return Err(if owner == Some(user.user_id) { ApiError::NotConfirmed } else { ApiError::NotFound });
        }
    };
    if owner != user.user_id {
        return Err(ApiError::NotFound);
    }
    match (status.as_str(), overdue) {
        ("paid", _) => return Ok(Json(PaymentResult { status: "paid".into() })),
        ("cancelled", _) | ("confirmed", true) => return Err(ApiError::PaymentWindowClosed),
        ("confirmed", false) => {}
        _ => return Err(ApiError::NotConfirmed),
    }
    let charge = Charge { token, amount_cents };
    state.payments.charge(&charge).await?;
    let paid = sqlx::query(
        "UPDATE orders SET status = 'paid', paid_at = now()
         WHERE token = $1 AND status = 'confirmed' AND pay_by > now()",
    )
    .bind(token)
    .execute(&state.db)
    .await?
    .rows_affected()
        == 1;
    if !paid {
        let now: Option<String> = sqlx::query_scalar("SELECT status FROM orders WHERE token = $1").bind(token).fetch_optional(&state.db).await?;
        if now.as_deref() == Some("paid") {
            // A concurrent request of the same shopper paid it; this charge was the same one.
            return Ok(Json(PaymentResult { status: "paid".into() }));
        }
        // The deadline won the race: the money goes back.
        state.payments.refund(&charge).await?;
        return Err(ApiError::PaymentWindowClosed);
    }
    let _: () = redis::cmd("HSET")
        .arg(state.keys.token(&token.to_string()))
        .arg("status")
        .arg("paid")
        .query_async(&mut state.redis.clone())
        .await?;
    tracing::info!(order.token = %token, "order paid");
    Ok(Json(PaymentResult { status: "paid".into() }))
}
