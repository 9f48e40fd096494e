//! The merchant's shop and its settings: its time zone, in which the console shows its times.

use crate::http::state::AppState;
use crate::{
    domain::{audit, shop, ApiResult},
    http::{input::AppJson, session::Merchant},
};
use app::api::{ShopSettings, ShopSettingsChange};
use axum::{extract::State, routing::get, Json, Router};
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new().route("/admin/shop", get(settings).post(change))
}

async fn settings(State(db): State<PgPool>, merchant: Merchant) -> ApiResult<Json<ShopSettings>> {
    Ok(Json(shop::settings(&db, merchant.shop_id).await?))
}

async fn change(
    State(db): State<PgPool>,
    merchant: Merchant,
    AppJson(body): AppJson<ShopSettingsChange>,
) -> ApiResult<Json<ShopSettings>> {
    let settings = shop::set_time_zone(&db, merchant.shop_id, body.time_zone.trim()).await?;
    audit::record(
        &db,
        Some(merchant.user_id),
        Some(merchant.shop_id),
        "shop.time_zone",
        &settings.name,
        &settings.time_zone,
    )
    .await?;
    Ok(Json(settings))
}
