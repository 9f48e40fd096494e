//! docs/api.md "The cord": a merchant stops every sale of their shop, the operator every sale of a
//! shop or of the platform, and either turns a sale's fail-open on or off. Every pull needs a
//! reason and is audited (`domain/cord.rs`); a stranger gets `401`, a shopper `403`, a merchant
//! asking for another shop's sale `404`.

use super::{
    input::{decode_value, AppJson, InPath},
    session::{Merchant, Operator},
};
use crate::http::state::AppState;
use crate::{
    buy::activities::ActivityCache,
    domain::{
        activity,
        cord::{self, parse_reason, Puller, Scope},
        shop, ApiError, ApiResult,
    },
    infra::redis::Redis,
};
use app::api::{Activity, CordPull, CordRequest, FailOpenRequest, OperatorCordRequest, SaleId};
use axum::{
    extract::State,
    http::header,
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use serde_json::Value;
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/cord", get(shop_state))
        .route("/admin/cord/stop", post(shop_pull::<true>))
        .route("/admin/cord/release", post(shop_pull::<false>))
        .route("/admin/activities/{id}/fail-open", post(shop_fail_open))
        .route("/operator/cord", get(platform_state))
        .route("/operator/cord/stop", post(operator_pull::<true>))
        .route("/operator/cord/release", post(operator_pull::<false>))
        .route(
            "/operator/activities/{id}/fail-open",
            post(operator_fail_open),
        )
}

fn no_store<T: serde::Serialize>(body: T) -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "no-store")], Json(body))
}

async fn shop_state(State(db): State<PgPool>, merchant: Merchant) -> ApiResult<impl IntoResponse> {
    Ok(no_store(cord::state(&db, Some(merchant.shop_id)).await?))
}

async fn platform_state(State(db): State<PgPool>, _: Operator) -> ApiResult<impl IntoResponse> {
    Ok(no_store(cord::state(&db, None).await?))
}

/// The cord pulled (`STOP`) or released over `scope` by `by`.
async fn pull<const STOP: bool>(
    (db, redis): (&PgPool, &Redis),
    by: Puller,
    scope: Scope,
    reason: &str,
) -> ApiResult<Json<CordPull>> {
    let pull = match STOP {
        true => cord::stop(db, redis, by, scope, reason).await?,
        false => cord::release(db, redis, by, scope, reason).await?,
    };
    Ok(Json(pull))
}

/// A merchant's pull: their own shop, always.
async fn shop_pull<const STOP: bool>(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    AppJson(body): AppJson<CordRequest>,
) -> ApiResult<Json<CordPull>> {
    let reason = parse_reason(&body.reason)?;
    let by = Puller {
        user_id: merchant.user_id,
    };
    let scope = Scope::Shop(merchant.shop_id);
    pull::<STOP>((&db, &redis), by, scope, &reason).await
}

/// The operator's scope: a shop that exists (`404` otherwise), or the platform.
async fn operator_scope(db: &PgPool, shop_id: Option<i64>) -> ApiResult<Scope> {
    match shop_id {
        None => Ok(Scope::Platform),
        Some(id) if shop::name_of(db, id).await?.is_some() => Ok(Scope::Shop(id)),
        Some(_) => Err(ApiError::NotFound),
    }
}

/// An operator's pull: the shop the body names, or the platform.
async fn operator_pull<const STOP: bool>(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    op: Operator,
    AppJson(body): AppJson<OperatorCordRequest>,
) -> ApiResult<Json<CordPull>> {
    let reason = parse_reason(&body.reason)?;
    let scope = operator_scope(&db, body.shop_id).await?;
    let by = Puller {
        user_id: op.user_id,
    };
    pull::<STOP>((&db, &redis), by, scope, &reason).await
}

/// A sale's fail-open switched by `by`; `shop`: the merchant's (`None`: the operator's, any sale).
/// Another shop's sale is `404` whatever the body says, as every admin route of it answers: the
/// body is read once the sale is known to be the merchant's.
async fn switch_fail_open(
    (db, redis, activities): (&PgPool, &Redis, &ActivityCache),
    by: Puller,
    id: i64,
    shop: Option<i64>,
    body: Value,
) -> ApiResult<Json<Activity>> {
    let sale = match shop {
        Some(shop) => activity::load_in_shop(db, id, shop).await?,
        None => activity::load(db, id).await?,
    };
    sale.ok_or(ApiError::NotFound)?;
    let body: FailOpenRequest = decode_value(&body)?;
    let reason = parse_reason(&body.reason)?;
    let row = cord::fail_open(db, redis, by, id, shop, body.on, &reason).await?;
    // This instance goes by it at once; the others when the broadcast reaches them.
    activities.put(row.clone());
    Ok(Json(row.into_activity()))
}

async fn shop_fail_open(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(activities): State<ActivityCache>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
    AppJson(body): AppJson<Value>,
) -> ApiResult<Json<Activity>> {
    let by = Puller {
        user_id: merchant.user_id,
    };
    switch_fail_open(
        (&db, &redis, &activities),
        by,
        id,
        Some(merchant.shop_id),
        body,
    )
    .await
}

async fn operator_fail_open(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(activities): State<ActivityCache>,
    op: Operator,
    InPath(SaleId(id)): InPath<SaleId>,
    AppJson(body): AppJson<Value>,
) -> ApiResult<Json<Activity>> {
    let by = Puller {
        user_id: op.user_id,
    };
    switch_fail_open((&db, &redis, &activities), by, id, None, body).await
}
