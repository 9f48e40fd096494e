//! docs/api.md "Storefront", its reads: the server's clock, the activity list, one activity (cacheable,
//! with an ETag) and its remaining stock.

use super::{client_ip::ClientIp, input::InPath};
use crate::http::state::AppState;
use crate::{
    buy::{
        activities::ActivityCache,
        doors::{Door, Doors},
        heat::Heat,
    },
    domain::{
        activity::{list, ActivityRow},
        report, rfc3339, ApiResult,
    },
    infra::keys::address_bucket,
};
use app::api::{ActivityList, Remaining, SaleId, ServerTime};
use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use chrono::Utc;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/time", get(server_time))
        .route("/activities", get(list_activities))
        .route("/activities/{id}", get(get_activity))
        .route("/activities/{id}/stock", get(get_stock))
        .route("/activities/{id}/report", get(get_report))
}

async fn server_time() -> Response {
    let now = Utc::now();
    let body = ServerTime {
        now: rfc3339(now),
        now_ms: now.timestamp_millis(),
    };
    ([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

async fn list_activities(State(db): State<PgPool>) -> ApiResult<Json<ActivityList>> {
    Ok(Json(ActivityList {
        activities: list(&db).await?,
    }))
}

/// A sale as PostgreSQL has it, or, when PostgreSQL does not answer at once, as this instance
/// last read it: a shopper's page never waits on PostgreSQL.
async fn get_activity(
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    InPath(SaleId(id)): InPath<SaleId>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let row = activities.current(&db, id).await?;
    let body = serde_json::to_vec(&ActivityRow::clone(&row).into_activity())
        .map_err(anyhow::Error::from)?;
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&body))[..32]);
    let cache = [(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=5"),
    )];
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let etag = HeaderValue::from_str(&etag).map_err(anyhow::Error::from)?;
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, cache, [(header::ETAG, etag)]).into_response());
    }
    Ok((
        cache,
        [
            (header::ETAG, etag),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
        ],
        body,
    )
        .into_response())
}

async fn get_stock(
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    State(heat): State<Heat>,
    State(doors): State<Doors>,
    ClientIp(ip): ClientIp,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Response> {
    doors.pass(Door::Stock, &address_bucket(ip))?;
    let activity = activities.get(&db, id).await?;
    heat.count(id);
    let remaining = heat
        .units_left(id, activity.stock_shards)
        .await?
        .unwrap_or(0);
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=1")],
        Json(Remaining {
            remaining,
            paused: activity.stopped(),
        }),
    )
        .into_response())
}

/// The public report of an ended sale (`404` until it ends). Cached a minute: it is computed
/// from every order of the sale.
async fn get_report(
    State(db): State<PgPool>,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Response> {
    let report = report::of_sale(&db, id).await?;
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=60")],
        Json(report),
    )
        .into_response())
}
