//! docs/api.md "Farms at the draw": a drawn sale's policy for crowds from one network, its
//! threshold (the forecast proposes one) and, after the start, what the draw did. Another shop's
//! sale is `404` whatever the body says: the body is read after the sale is found.

use crate::{
    buy::activities::ActivityCache,
    domain::{activity::load_in_shop, crowd, ApiError, ApiResult},
    http::{
        input::{decode_value, AppJson, InPath},
        session::Merchant,
        state::AppState,
    },
    infra::redis::Redis,
};
use app::api::{CrowdChange, CrowdSettings, SaleId};
use axum::{extract::State, routing::get, Json, Router};
use serde_json::Value;
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new().route("/admin/activities/{id}/crowd", get(settings).post(change))
}

async fn settings(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<CrowdSettings>> {
    let row = load_in_shop(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(crowd::settings(&db, &redis, &row).await?))
}

async fn change(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(activities): State<ActivityCache>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
    AppJson(body): AppJson<Value>,
) -> ApiResult<Json<CrowdSettings>> {
    let row = load_in_shop(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let body: CrowdChange = decode_value(&body)?;
    let row = crowd::change(&db, merchant.user_id, &row, body).await?;
    // This instance joins by it at once; the others once the broadcast reaches them.
    activities.put(row.clone());
    crate::domain::cord::announce(&redis, &[row.id]).await?;
    Ok(Json(crowd::settings(&db, &redis, &row).await?))
}
