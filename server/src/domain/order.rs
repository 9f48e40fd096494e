//! A shopper's orders as the database has them (from `confirmed` on; a token still `queued`
//! lives only in Redis) and paying one. Paying is a conditional update (`status = 'confirmed' AND
//! pay_by > now()`), as the deadline's cancelling is, so an order ends paid or cancelled, never
//! both. Every statement is checked at compile time (`.sqlx/`).

use super::{rfc3339, ApiError, ApiResult};
use app::api::{AdminOrder, OrderStatus, OrderView, SaleId, Token, UserId};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

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

/// An order's status as the database writes it (the column's CHECK allows no other), read into
/// its type here, where it leaves the database.
pub fn parse_status(text: &str) -> ApiResult<OrderStatus> {
    text.parse()
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("an order's status in the database: {e}")))
}

/// As [`parse_status`], for the queries that answer `sqlx::Result`.
fn decode_status(text: String) -> sqlx::Result<OrderStatus> {
    text.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

impl OrderRow {
    pub fn into_view(self) -> ApiResult<OrderView> {
        let status = parse_status(&self.status)?;
        Ok(OrderView {
            token: Token(self.token),
            order_id: (status != OrderStatus::Failed).then_some(self.id),
            status,
            activity_id: SaleId(self.activity_id),
            quantity: self.quantity,
            pay_by: self.pay_by.map(rfc3339),
            reason: self.reason,
        })
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
pub async fn status_of(db: &PgPool, token: uuid::Uuid) -> ApiResult<Option<OrderStatus>> {
    sqlx::query_scalar!("SELECT status FROM orders WHERE token = $1", token)
        .fetch_optional(db)
        .await?
        .as_deref()
        .map(parse_status)
        .transpose()
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
    pub fn into_wire(self) -> ApiResult<AdminOrder> {
        Ok(AdminOrder {
            order_id: self.order_id,
            token: Token(self.token),
            activity_id: SaleId(self.activity_id),
            user_id: UserId(self.user_id),
            username: self.username,
            quantity: self.quantity,
            unit_price_cents: self.unit_price_cents,
            status: parse_status(&self.status)?,
            reason: self.reason,
            reserved_at: rfc3339(self.reserved_at),
            pay_by: self.pay_by.map(rfc3339),
            paid_at: self.paid_at.map(rfc3339),
            cancelled_at: self.cancelled_at.map(rfc3339),
        })
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

/// A persisted order, as Redis and the status endpoint show it.
#[derive(Debug, sqlx::FromRow)]
pub struct Persisted {
    pub token: uuid::Uuid,
    pub id: i64,
    pub status: String,
    pub pay_by: Option<DateTime<Utc>>,
    pub payment_window_secs: i32,
}

/// The reservations as `confirmed` orders, with the sales' `sold` raised, in one statement; the
/// orders new with it come back. Tokens already orders (a message published twice) are left as
/// they are, and reservations of no such sale or user are left out: the joins are the existence
/// checks (orders have no foreign keys: migration 0007).
pub async fn insert_confirmed(
    tx: &mut PgConnection,
    tokens: &[uuid::Uuid],
    activities: &[i64],
    users: &[i64],
    quantities: &[i32],
    reserved_ms: &[i64],
) -> sqlx::Result<Vec<Persisted>> {
    sqlx::query_as!(
        Persisted,
        r#"WITH input AS (
                 SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::int[], $5::bigint[])
                     AS t(token, activity_id, user_id, quantity, reserved_ms)
             ), inserted AS (
                 INSERT INTO orders (token, activity_id, user_id, quantity, unit_price_cents, status, reserved_at, pay_by)
                 SELECT i.token, i.activity_id, i.user_id, i.quantity, a.seckill_price_cents, 'confirmed',
                        to_timestamp(i.reserved_ms / 1000.0), now() + make_interval(secs => a.payment_window_secs)
                 FROM input i JOIN activities a ON a.id = i.activity_id
                 WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = i.user_id)
                 ORDER BY i.token
                 ON CONFLICT (token) DO NOTHING
                 RETURNING id, token, activity_id, quantity, status, pay_by
             ), raised AS (
                 UPDATE activities a SET sold = a.sold + s.units
                 FROM (SELECT activity_id, sum(quantity) AS units FROM inserted GROUP BY activity_id) s
                 WHERE a.id = s.activity_id
                 RETURNING 1
             )
             SELECT i.token AS "token!", i.id AS "id!", i.status AS "status!", i.pay_by,
                    a.payment_window_secs AS "payment_window_secs!"
                 FROM inserted i JOIN activities a ON a.id = i.activity_id"#,
        tokens,
        activities,
        users,
        quantities,
        reserved_ms
    )
    .fetch_all(tx)
    .await
}

/// The orders these tokens already are.
pub async fn persisted(
    tx: &mut PgConnection,
    tokens: &[uuid::Uuid],
) -> sqlx::Result<Vec<Persisted>> {
    sqlx::query_as!(
        Persisted,
        "SELECT o.token, o.id, o.status, o.pay_by, a.payment_window_secs
                         FROM orders o JOIN activities a ON a.id = o.activity_id WHERE o.token = ANY($1)",
        tokens
    )
    .fetch_all(tx)
    .await
}

/// A reservation that could not be persisted, recorded `failed` unless its token is an order
/// already: the order's status either way; `None` when the sale or the user does not exist.
pub async fn record_failed(
    db: &PgPool,
    token: uuid::Uuid,
    activity_id: i64,
    user_id: i64,
    quantity: i32,
    reserved_ms: i64,
) -> sqlx::Result<Option<OrderStatus>> {
    sqlx::query_scalar!(
        "INSERT INTO orders (token, activity_id, user_id, quantity, unit_price_cents, status, reason, reserved_at)
             SELECT $1, a.id, $3, $4, a.seckill_price_cents, 'failed', 'could not be persisted', to_timestamp($5::bigint / 1000.0)
             FROM activities a WHERE a.id = $2 AND EXISTS (SELECT 1 FROM users u WHERE u.id = $3)
             ON CONFLICT (token) DO UPDATE SET token = EXCLUDED.token
             RETURNING status",
        token,
        activity_id,
        user_id,
        quantity,
        reserved_ms
    )
    .fetch_optional(db)
    .await?
    .map(decode_status)
    .transpose()
}

/// Cancels the order if it is still unpaid past its deadline, its units taken off the sale's
/// `sold` in the same transaction and owed to Redis until `units_returned`: whether it was
/// cancelled now.
pub async fn cancel_if_overdue(db: &PgPool, token: uuid::Uuid) -> sqlx::Result<bool> {
    let mut tx = crate::infra::db::begin(db).await?;
    let cancelled = sqlx::query!(
        "UPDATE orders SET status = 'cancelled', cancelled_at = now(), reason = 'payment window closed',
                units_owed = true
             WHERE token = $1 AND status = 'confirmed' AND pay_by <= now()
             RETURNING activity_id, quantity",
        token
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(order) = &cancelled {
        sqlx::query!(
            "UPDATE activities SET sold = sold - $2, stock_moves = stock_moves + 1 WHERE id = $1",
            order.activity_id,
            i64::from(order.quantity)
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(cancelled.is_some())
}

/// A cancelled order's units are back in Redis: it owes nothing any more.
pub async fn units_returned(db: &PgPool, token: uuid::Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE orders SET units_owed = false WHERE token = $1 AND units_owed",
        token
    )
    .execute(db)
    .await?;
    Ok(())
}

/// An order's status, sale, shopper and units.
pub async fn state_of(
    db: &PgPool,
    token: uuid::Uuid,
) -> sqlx::Result<Option<(OrderStatus, i64, i64, i32)>> {
    sqlx::query!(
        "SELECT status, activity_id, user_id, quantity FROM orders WHERE token = $1",
        token
    )
    .fetch_optional(db)
    .await?
    .map(|o| {
        Ok((
            decode_status(o.status)?,
            o.activity_id,
            o.user_id,
            o.quantity,
        ))
    })
    .transpose()
}

/// Orders past their deadline and still unpaid, and those cancelled whose units may not be back
/// in Redis yet (owed, or cancelled in the last two minutes by a release that did not mark them),
/// a thousand of each at most.
pub async fn overdue(db: &PgPool) -> sqlx::Result<Vec<uuid::Uuid>> {
    sqlx::query_scalar!(r#"(SELECT token AS "token!" FROM orders WHERE status = 'confirmed' AND pay_by <= now() - interval '1 second' ORDER BY pay_by LIMIT 1000)
             UNION ALL
             (SELECT token FROM orders WHERE units_owed LIMIT 1000)
             UNION
             (SELECT token FROM orders WHERE status = 'cancelled' AND cancelled_at > now() - interval '2 minutes' AND NOT units_owed LIMIT 1000)"#)
        .fetch_all(db)
        .await
}

/// Which of these tokens are orders.
pub async fn which_are_orders(db: &PgPool, tokens: &[uuid::Uuid]) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT token::text AS "token!" FROM orders WHERE token = ANY($1)"#,
        tokens
    )
    .fetch_all(db)
    .await
}

/// Per shopper of the sale, the units their confirmed and paid orders hold.
pub async fn holders(db: &PgPool, activity_id: i64) -> sqlx::Result<Vec<(i64, i64)>> {
    Ok(sqlx::query!(
        r#"SELECT user_id, sum(quantity)::bigint AS "units!" FROM orders
               WHERE activity_id = $1 AND status IN ('confirmed', 'paid') GROUP BY user_id"#,
        activity_id
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|h| (h.user_id, h.units))
    .collect())
}
