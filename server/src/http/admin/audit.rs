//! The merchant's audit log: who of the shop did what to its sales, and what the operator did to
//! the shop's accounts, newest first (an addition to docs/api.md).

use crate::http::state::AppState;
use crate::{
    domain::{audit, ApiResult},
    http::session::Merchant,
};
use app::api::AuditLog;
use axum::{extract::State, http::header, response::IntoResponse, routing::get, Json, Router};
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new().route("/admin/audit", get(shop_audit))
}

async fn shop_audit(State(db): State<PgPool>, merchant: Merchant) -> ApiResult<impl IntoResponse> {
    let entries = audit::read(&db, Some(merchant.shop_id)).await?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(AuditLog { entries }),
    ))
}
