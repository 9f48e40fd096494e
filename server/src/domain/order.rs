//! A shopper's orders as the database has them (from `confirmed` on; a token still `queued`
//! lives only in Redis) and paying one. Paying is a conditional update (`status = 'confirmed' AND
//! pay_by > now()`), as the deadline's cancelling is, so an order ends paid or cancelled, never
//! both. Every statement is checked at compile time (`.sqlx/`).

use super::{rfc3339, ApiResult};
use app::api::{AdminOrder, OrderStatus};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// One order row, as a shopper may see it.
pub struct OrderRow {
    pub token: uuid::Uuid,
    pub id: i64,
    pub activity_id: i64,
    pub user_id: i64,
    pub quantity: i32,
    pub status: String,
    pub pay_by: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

impl OrderRow {
    pub fn into_status(self) -> OrderStatus {
        OrderStatus {
            token: self.token.to_string(),
            order_id: (self.status != "failed").then_some(self.id),
            status: self.status,
            activity_id: self.activity_id,
            quantity: self.quantity,
            pay_by: self.pay_by.map(rfc3339),
            reason: self.reason,
        }
    }
}

/// The order of a reservation token.
pub async fn by_token(db: &PgPool, token: uuid::Uuid) -> ApiResult<Option<OrderRow>> {
    Ok(sqlx::query_as!(
        OrderRow,
        "SELECT token, id, activity_id, user_id, quantity, status, pay_by, reason
         FROM orders WHERE token = $1",
        token
    )
    .fetch_optional(db)
    .await?)
}

/// A shopper's newest 200 orders, newest first.
pub async fn of_user(db: &PgPool, user_id: i64) -> ApiResult<Vec<OrderRow>> {
    Ok(sqlx::query_as!(
        OrderRow,
        "SELECT token, id, activity_id, user_id, quantity, status, pay_by, reason
         FROM orders WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT 200",
        user_id
    )
    .fetch_all(db)
    .await?)
}

/// What paying an order needs to know of it.
pub struct Payable {
    pub user_id: i64,
    pub status: String,
    /// Its payment window has closed.
    pub overdue: bool,
    pub amount_cents: i64,
}

/// The order of `token` as paying sees it (`None`: no order yet).
pub async fn payable(db: &PgPool, token: uuid::Uuid) -> ApiResult<Option<Payable>> {
    Ok(sqlx::query_as!(
        Payable,
        r#"SELECT user_id, status, COALESCE(pay_by <= now(), false) AS "overdue!",
                  quantity::bigint * unit_price_cents AS "amount_cents!"
           FROM orders WHERE token = $1"#,
        token
    )
    .fetch_optional(db)
    .await?)
}

/// Marks the order paid if it is still confirmed and within its window; whether it did.
pub async fn mark_paid(db: &PgPool, token: uuid::Uuid) -> ApiResult<bool> {
    Ok(sqlx::query!(
        "UPDATE orders SET status = 'paid', paid_at = now()
         WHERE token = $1 AND status = 'confirmed' AND pay_by > now()",
        token
    )
    .execute(db)
    .await?
    .rows_affected()
        == 1)
}

/// The order's status now.
pub async fn status_of(db: &PgPool, token: uuid::Uuid) -> ApiResult<Option<String>> {
    Ok(
        sqlx::query_scalar!("SELECT status FROM orders WHERE token = $1", token)
            .fetch_optional(db)
            .await?,
    )
}

/// One order as the admin console lists and exports it, as the database types it.
pub struct OrderLine {
    pub order_id: i64,
    pub token: uuid::Uuid,
    pub activity_id: i64,
    pub user_id: i64,
    pub username: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
    pub status: String,
    pub reason: Option<String>,
    pub reserved_at: DateTime<Utc>,
    pub pay_by: Option<DateTime<Utc>>,
    pub paid_at: Option<DateTime<Utc>>,
    pub cancelled_at: Option<DateTime<Utc>>,
}

impl OrderLine {
    /// As the API writes it (`app::api::AdminOrder`): times in RFC 3339.
    pub fn into_wire(self) -> AdminOrder {
        AdminOrder {
            order_id: self.order_id,
            token: self.token.to_string(),
            activity_id: self.activity_id,
            user_id: self.user_id,
            username: self.username,
            quantity: self.quantity,
            unit_price_cents: self.unit_price_cents,
            status: self.status,
            reason: self.reason,
            reserved_at: rfc3339(self.reserved_at),
            pay_by: self.pay_by.map(rfc3339),
            paid_at: self.paid_at.map(rfc3339),
            cancelled_at: self.cancelled_at.map(rfc3339),
        }
    }
}

/// A page of a shop's orders, newest first, with how many match in all: of one sale or all, of
/// one status or all.
pub async fn admin_page(
    db: &PgPool,
    shop_id: i64,
    activity: Option<i64>,
    status: Option<&str>,
    (limit, offset): (i64, i64),
) -> ApiResult<(Vec<OrderLine>, i64)> {
    let total = sqlx::query_scalar!(
        r#"SELECT count(*) AS "total!" FROM orders o JOIN activities a ON a.id = o.activity_id
           WHERE a.shop_id = $3 AND ($1::bigint IS NULL OR o.activity_id = $1)
             AND ($2::text IS NULL OR o.status = $2)"#,
        activity,
        status,
        shop_id
    )
    .fetch_one(db)
    .await?;
    let orders = sqlx::query_as!(
        OrderLine,
        "SELECT o.id AS order_id, o.token, o.activity_id, o.user_id, u.username, o.quantity,
                o.unit_price_cents, o.status, o.reason, o.reserved_at, o.pay_by, o.paid_at, o.cancelled_at
         FROM orders o JOIN users u ON u.id = o.user_id JOIN activities a ON a.id = o.activity_id
         WHERE a.shop_id = $5 AND ($1::bigint IS NULL OR o.activity_id = $1) AND ($2::text IS NULL OR o.status = $2)
         ORDER BY o.id DESC LIMIT $3 OFFSET $4",
        activity,
        status,
        limit,
        offset,
        shop_id
    )
    .fetch_all(db)
    .await?;
    Ok((orders, total))
}

/// The next `limit` orders of a shop (of one sale or all) after order id `after`, oldest first:
/// an export reads in such pages, holding no connection between them.
pub async fn export_page(
    db: &PgPool,
    shop_id: i64,
    activity: Option<i64>,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<OrderLine>> {
    sqlx::query_as!(
        OrderLine,
        "SELECT o.id AS order_id, o.token, o.activity_id, o.user_id, u.username, o.quantity,
                o.unit_price_cents, o.status, o.reason, o.reserved_at, o.pay_by, o.paid_at, o.cancelled_at
         FROM orders o JOIN users u ON u.id = o.user_id JOIN activities a ON a.id = o.activity_id
         WHERE a.shop_id = $2 AND ($1::bigint IS NULL OR o.activity_id = $1) AND o.id > $3
         ORDER BY o.id LIMIT $4",
        activity,
        shop_id,
        after,
        limit
    )
    .fetch_all(db)
    .await
}
