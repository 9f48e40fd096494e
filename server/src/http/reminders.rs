//! docs/api.md "Reminders": a signed-in shopper's reminder of a sale that has not started (ask,
//! read, withdraw), and a sale's calendar entry (`.ics`, anyone's).

use super::{input::InPath, session::SignedIn};
use crate::http::state::AppState;
use crate::{
    buy::activities::ActivityCache,
    domain::{reminder, ApiError, ApiResult},
};
use app::api::{MyReminder, Reminder, SaleId};
use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{delete, get},
    Json, Router,
};
use sqlx::PgPool;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/activities/{id}/reminder",
            get(my_reminder).post(ask_reminder),
        )
        .route("/activities/{id}/calendar.ics", get(calendar))
        .route("/reminders/{id}", delete(withdraw))
}

async fn ask_reminder(
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    SignedIn(user): SignedIn,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<(StatusCode, Json<Reminder>)> {
    let sale = activities.get(&db, id).await?;
    let (reminder, new) = reminder::ask(&db, user.user_id, &sale).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(reminder)))
}

async fn my_reminder(
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    SignedIn(user): SignedIn,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<MyReminder>> {
    let sale = activities.get(&db, id).await?;
    Ok(Json(MyReminder {
        reminder: reminder::of_shopper(&db, user.user_id, &sale).await?,
    }))
}

async fn withdraw(
    State(db): State<PgPool>,
    SignedIn(user): SignedIn,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<StatusCode> {
    reminder::withdraw(&db, user.user_id, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The sale's calendar entry, linking back to its page on the host the request named.
async fn calendar(
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    InPath(SaleId(id)): InPath<SaleId>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let sale = activities.get(&db, id).await?;
    if chrono::Utc::now() >= sale.ends_at {
        return Err(ApiError::Ended);
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .unwrap_or("localhost");
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
    {
        Some("https") => "https",
        _ => "http",
    };
    let body = reminder::calendar(&sale, &format!("{scheme}://{host}/activities/{}", sale.id));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/calendar; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"sale-{}.ics\"", sale.id),
            ),
            (header::CACHE_CONTROL, "public, max-age=60".to_string()),
        ],
        body,
    )
        .into_response())
}
