//! Reminders: a signed-in shopper asks to be reminded of a sale that has not started (one per
//! shopper and sale; asking again answers with the same one) and may withdraw it. Their count per
//! sale is shown to the merchant. The calendar entry of a sale (`.ics`) is anyone's: it names no
//! shopper.

use super::{activity::ActivityRow, rfc3339, ApiError, ApiResult};
use app::api::{Reminder, SaleId};
use chrono::{DateTime, Utc};
use icalendar::{Calendar, Component, Event, EventLike};
use sqlx::PgPool;

struct Row {
    id: i64,
    activity_id: i64,
    created_at: DateTime<Utc>,
}

fn reminder(row: Row, starts_at: DateTime<Utc>) -> Reminder {
    Reminder {
        id: row.id,
        activity_id: SaleId(row.activity_id),
        starts_at: rfc3339(starts_at),
        created_at: rfc3339(row.created_at),
    }
}

/// The shopper's reminder of `sale`, made now or found; `true` when it is new. A sale that has
/// started is `409 already_started`, one that has ended `410 ended`.
pub async fn ask(db: &PgPool, user: i64, sale: &ActivityRow) -> ApiResult<(Reminder, bool)> {
    let now = Utc::now();
    if now >= sale.ends_at {
        return Err(ApiError::Ended);
    }
    if now >= sale.starts_at {
        return Err(ApiError::AlreadyStarted);
    }
    let made = sqlx::query_as!(
        Row,
        "INSERT INTO reminders (activity_id, user_id) VALUES ($1, $2)
         ON CONFLICT (activity_id, user_id) DO NOTHING
         RETURNING id, activity_id, created_at",
        sale.id,
        user
    )
    .fetch_optional(db)
    .await?;
    if let Some(row) = made {
        return Ok((reminder(row, sale.starts_at), true));
    }
    let held = of_shopper(db, user, sale)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok((held, false))
}

/// The shopper's reminder of `sale`, if they asked for one.
pub async fn of_shopper(db: &PgPool, user: i64, sale: &ActivityRow) -> ApiResult<Option<Reminder>> {
    Ok(sqlx::query_as!(
        Row,
        "SELECT id, activity_id, created_at FROM reminders WHERE activity_id = $1 AND user_id = $2",
        sale.id,
        user
    )
    .fetch_optional(db)
    .await?
    .map(|row| reminder(row, sale.starts_at)))
}

/// Withdraws reminder `id` of the shopper; someone else's, or one that does not exist, is
/// `404 not_found` alike (no existence leak).
pub async fn withdraw(db: &PgPool, user: i64, id: i64) -> ApiResult<()> {
    let gone = sqlx::query!(
        "DELETE FROM reminders WHERE id = $1 AND user_id = $2",
        id,
        user
    )
    .execute(db)
    .await?
    .rows_affected();
    match gone {
        0 => Err(ApiError::NotFound),
        _ => Ok(()),
    }
}

/// Reminders of sale `id`.
pub async fn count(db: &PgPool, id: i64) -> ApiResult<i64> {
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM reminders WHERE activity_id = $1"#,
        id
    )
    .fetch_one(db)
    .await?)
}

/// The calendar entry of `sale` (RFC 5545): its start and end in UTC (a calendar shows them in
/// its own zone), its title, and a link back to its page at `url`.
pub fn calendar(sale: &ActivityRow, url: &str) -> String {
    let event = Event::new()
        .uid(&format!("sale-{}@seckill", sale.id))
        .summary(&format!("Flash sale: {}", sale.title))
        .description(&format!("{}\n\n{url}", sale.description))
        .starts(sale.starts_at)
        .ends(sale.ends_at)
        .url(url)
        .done();
    Calendar::new()
        .name("Seckill")
        .push(event)
        .done()
        .to_string()
}
