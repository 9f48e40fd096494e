//! The admin console's own reads (the activity list with sale figures, the stock-addition audit)
//! and the rule for its pages: a visitor is sent to sign in, a shopper gets a 403 page.

use crate::{
    catalog::{parse_id, rfc3339, ActivityRow, COLUMNS},
    error::{ApiError, ApiResult},
    session::{Merchant, SignedIn},
    state::AppState,
};
use app::api::{AdminActivity, AdminActivityList, Role, SaleStatus, StockAddition, StockAdditions};
use axum::{
    extract::{FromRequestParts, Path, Request, State},
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Json, Router,
};
use chrono::{DateTime, Utc};

/// How many activities the console lists (newest start first).
const LIST_LIMIT: i64 = 500;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/activities", get(list))
        .route("/admin/activities/{id}", get(one))
        .route("/admin/activities/{id}/stock-additions", get(stock_additions))
}

pub fn sale_status(row: &ActivityRow, remaining: i64, now: DateTime<Utc>) -> SaleStatus {
    if now < row.starts_at {
        SaleStatus::Upcoming
    } else if now >= row.ends_at {
        SaleStatus::Ended
    } else if remaining <= 0 {
        SaleStatus::SoldOut
    } else {
        SaleStatus::Live
    }
}

/// An activity with its figures; one that is not in Redis (ended long ago, or not warmed yet)
/// shows what the database says is left.
fn admin_item(row: ActivityRow, in_redis: Option<i64>, now: DateTime<Utc>) -> AdminActivity {
    let remaining = in_redis.unwrap_or(row.total_stock - row.sold).max(0);
    AdminActivity { status: sale_status(&row, remaining, now), remaining, sold: row.sold, activity: row.into_activity() }
}

async fn list(State(state): State<AppState>, _: Merchant) -> ApiResult<Response> {
    let rows: Vec<ActivityRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM activities ORDER BY starts_at DESC, id DESC LIMIT $1"))
            .bind(LIST_LIMIT)
            .fetch_all(&state.db)
            .await?;
    // One round trip for every activity's remaining stock.
    let in_redis: Vec<Option<i64>> = if rows.is_empty() {
        Vec::new()
    } else {
        let keys: Vec<String> = rows.iter().map(|r| state.keys.stock(r.id)).collect();
        redis::cmd("MGET").arg(keys).query_async(&mut state.redis.clone()).await?
    };
    let now = Utc::now();
    let activities = rows.into_iter().zip(in_redis).map(|(row, in_redis)| admin_item(row, in_redis, now)).collect();
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(AdminActivityList { activities })).into_response())
}

async fn one(State(state): State<AppState>, _: Merchant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let row = crate::catalog::load(&state.db, id).await?.ok_or(ApiError::NotFound)?;
    let in_redis: Option<i64> = redis::cmd("GET").arg(state.keys.stock(id)).query_async(&mut state.redis.clone()).await?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(admin_item(row, in_redis, Utc::now()))).into_response())
}

async fn stock_additions(State(state): State<AppState>, _: Merchant, Path(id): Path<String>) -> ApiResult<Json<StockAdditions>> {
    let id = parse_id(&id)?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM activities WHERE id = $1)")
        .bind(id)
        .fetch_one(&state.db)
        .await?;
    if !exists {
        return Err(ApiError::NotFound);
    }
    let rows: Vec<(i64, String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT s.added, u.username, s.created_at FROM stock_additions s JOIN users u ON u.id = s.merchant_id
         WHERE s.activity_id = $1 ORDER BY s.created_at DESC, s.id DESC LIMIT 1000",
    )
    .bind(id)
    .fetch_all(&state.db)
    .await?;
    let additions = rows.into_iter().map(|(added, merchant, at)| StockAddition { added, merchant, at: rfc3339(at) }).collect();
    Ok(Json(StockAdditions { additions }))
}

/// In front of the `/admin` pages: a visitor is sent to sign in (and back here after), a shopper
/// gets the page with status 403 (the page itself says "forbidden"). Admin pages are never cached.
pub async fn guard_pages(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path != "/admin" && !path.starts_with("/admin/") {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let role = SignedIn::from_request_parts(&mut parts, &state).await.ok().map(|SignedIn(c)| c.role);
    let Some(role) = role else {
        let target = parts.uri.path_and_query().map_or("/admin", |p| p.as_str());
        let next_param: String = form_urlencoded::byte_serialize(target.as_bytes()).collect();
        return Redirect::to(&format!("/login?next={next_param}")).into_response();
    };
    parts.extensions.insert(app::PageViewer(role));
    let mut resp = next.run(Request::from_parts(parts, body)).await;
    if role != Role::Merchant && resp.status().is_success() {
        *resp.status_mut() = StatusCode::FORBIDDEN;
    }
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    resp
}
