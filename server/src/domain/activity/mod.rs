//! Sale activities: their rows and every statement on them (here), the rules a new one must
//! follow (`rules.rs`), their stock in Redis, warmed before a sale is announced and only ever
//! grown (`stock.rs`), and the demo sale of `make run` (`demo.rs`).

pub(crate) mod demo;
pub(crate) mod rules;
pub mod stock;

use super::drawing::{self, hex};
use super::{rfc3339, ApiError, ApiResult};
use app::api::{
    Activity, AdminActivity, BotCheck, CrowdPolicy, LineMethod, OrderStatus, SaleId, SaleStatus,
    StockAddition,
};
use chrono::{DateTime, Utc};
use rules::ActivitySpec;
use sqlx::PgPool;

#[derive(sqlx::FromRow, Clone, Debug)]
pub struct ActivityRow {
    pub id: i64,
    pub title: String,
    pub description: String,
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub total_stock: i64,
    pub sold: i64,
    pub per_user_limit: i32,
    pub captcha_required: bool,
    pub payment_window_secs: i32,
    pub paused: bool,
    pub stock_shards: i16,
    pub waiting_room: bool,
    pub admit_per_sec: i32,
    pub shop_id: i64,
    pub bot_check: String,
    pub pow_difficulty: i32,
    pub accounts_created_before: Option<DateTime<Utc>>,
    pub line_method: String,
    /// The drawing's secret seed (32 bytes): published at the start, its hash before.
    pub drawing_seed: Vec<u8>,
    /// Stopped by the emergency cord (its shop's or the platform's; `domain/cord.rs`).
    pub halted: bool,
    /// The cord's fail-open: no bot check and no waiting room before the gate.
    pub fail_open: bool,
    /// What the drawing does with crowds from one network (`domain/crowd.rs`): off, observe,
    /// demote.
    pub crowd_policy: String,
    /// A group of more entries than this is over it.
    pub crowd_threshold: i32,
}

/// A statement that reads or returns whole rows: `$head`, the columns of an [`ActivityRow`] in
/// its order, then `$tail`. The one place the column list is written; `sqlx` still checks each
/// whole statement at compile time (`.sqlx/`), its query macros taking literals joined by `+`.
macro_rules! rows {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            ActivityRow,
            $head
                + "id, title, description, image_url, price_cents, seckill_price_cents,
                   starts_at, ends_at, total_stock, sold, per_user_limit, captcha_required,
                   payment_window_secs, paused, stock_shards, waiting_room, admit_per_sec,
                   shop_id, bot_check, pow_difficulty, accounts_created_before, line_method,
                   drawing_seed, halted, fail_open, crowd_policy, crowd_threshold"
                + $tail
            $(, $arg)*
        )
    };
}

impl ActivityRow {
    pub fn into_activity(self) -> Activity {
        let bot_check = self.check();
        let line_method = self.method();
        let drawing_commitment = self
            .draws()
            .then(|| drawing::commitment(&self.drawing_seed));
        let drawing_seed = self
            .drawing_revealed(Utc::now())
            .then(|| hex(&self.drawing_seed));
        Activity {
            id: SaleId(self.id),
            title: self.title,
            description: self.description,
            image_url: self.image_url,
            price_cents: self.price_cents,
            seckill_price_cents: self.seckill_price_cents,
            starts_at: rfc3339(self.starts_at),
            ends_at: rfc3339(self.ends_at),
            total_stock: self.total_stock,
            per_user_limit: self.per_user_limit,
            captcha_required: self.captcha_required,
            payment_window_secs: self.payment_window_secs,
            paused: self.paused,
            stock_shards: self.stock_shards,
            waiting_room: self.waiting_room,
            admit_per_sec: self.admit_per_sec,
            bot_check,
            pow_difficulty: self.pow_difficulty,
            accounts_created_before: self.accounts_created_before.map(rfc3339),
            line_method,
            drawing_commitment,
            drawing_seed,
            halted: self.halted,
            fail_open: self.fail_open,
        }
    }

    /// Whether buys are refused `403 paused`, as every shard's `paused` switch in Redis says:
    /// the merchant's pause or the cord's stop.
    pub fn stopped(&self) -> bool {
        self.paused || self.halted
    }

    /// Whether shoppers wait in the sale's line before they may buy: a waiting room the cord's
    /// fail-open does not open.
    pub fn lines_up(&self) -> bool {
        self.waiting_room && !self.fail_open
    }

    /// The bot check a buy must pass now: none under the cord's fail-open.
    pub fn check_in_force(&self) -> BotCheck {
        if self.fail_open {
            BotCheck::None
        } else {
            self.check()
        }
    }

    /// The drawing's crowd policy (the column's CHECK constraint allows no other value).
    pub fn crowd(&self) -> CrowdPolicy {
        self.crowd_policy.parse().unwrap_or(CrowdPolicy::Off)
    }

    /// Whether the line groups its drawn entries by network: a drawing whose policy is not off.
    pub fn groups_crowds(&self) -> bool {
        self.draws() && self.crowd() != CrowdPolicy::Off
    }

    /// The waiting room's method (the column's CHECK constraint allows no other value).
    pub fn method(&self) -> LineMethod {
        self.line_method.parse().unwrap_or_default()
    }

    /// Whether the drawing's seed is public at `now`: a sale whose places are drawn, a little
    /// after its start (every place drawn by then, by any clock of the deployment).
    pub fn drawing_revealed(&self, now: DateTime<Utc>) -> bool {
        self.draws() && now >= self.starts_at + drawing::REVEAL_AFTER
    }

    /// Whether the sale's line draws the places of those who join before the start.
    pub fn draws(&self) -> bool {
        self.waiting_room && self.method() == LineMethod::DrawThenOrder
    }

    /// `403 account_too_new` when the sale is kept to accounts created before an instant and
    /// this one (created at `joined`, unix seconds) is not one of them.
    pub fn admits_account(&self, joined: i64) -> ApiResult<()> {
        match self.accounts_created_before {
            Some(before) if joined >= before.timestamp() => Err(ApiError::AccountTooNew {
                created_before: rfc3339(before),
            }),
            _ => Ok(()),
        }
    }

    /// The sale's bot check (the column's CHECK constraint allows no other value).
    pub fn check(&self) -> BotCheck {
        self.bot_check.parse().unwrap_or(BotCheck::Image)
    }
}

/// One sale of a shop: another shop's sale is `None`, as if it did not exist.
pub async fn load_in_shop(db: &PgPool, id: i64, shop_id: i64) -> ApiResult<Option<ActivityRow>> {
    Ok(load(db, id).await?.filter(|row| row.shop_id == shop_id))
}

pub async fn load(db: &PgPool, id: i64) -> ApiResult<Option<ActivityRow>> {
    Ok(rows!("SELECT ", " FROM activities WHERE id = $1", id)
        .fetch_optional(db)
        .await?)
}

/// Activities that have not ended.
pub async fn live(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(rows!("SELECT ", " FROM activities WHERE ends_at > now()")
        .fetch_all(db)
        .await?)
}

/// Newest start first.
pub async fn list(db: &PgPool) -> ApiResult<Vec<Activity>> {
    Ok(list_rows(db)
        .await?
        .into_iter()
        .map(ActivityRow::into_activity)
        .collect())
}

/// The storefront's sales (their rows), newest start first, at most 500.
pub async fn list_rows(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(rows!(
        "SELECT ",
        " FROM activities ORDER BY starts_at DESC, id DESC LIMIT 500"
    )
    .fetch_all(db)
    .await?)
}

/// A shop's sales, newest start first, at most `limit`.
pub async fn list_of_shop(db: &PgPool, shop_id: i64, limit: i64) -> ApiResult<Vec<ActivityRow>> {
    Ok(rows!(
        "SELECT ",
        " FROM activities WHERE shop_id = $2 ORDER BY starts_at DESC, id DESC LIMIT $1",
        limit,
        shop_id
    )
    .fetch_all(db)
    .await?)
}

/// Sales with a waiting room that are on, or start within five seconds.
pub async fn lines_on_now(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(rows!(
        "SELECT ",
        " FROM activities
         WHERE waiting_room AND ends_at > now() AND starts_at < now() + interval '5 seconds'"
    )
    .fetch_all(db)
    .await?)
}

/// Pauses or resumes a sale of the shop; `None` when the shop has no such sale.
pub async fn set_paused<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: i64,
    shop_id: i64,
    paused: bool,
) -> ApiResult<Option<ActivityRow>> {
    Ok(rows!(
        "UPDATE activities SET paused = $2 WHERE id = $1 AND shop_id = $3
         RETURNING ",
        "",
        id,
        paused,
        shop_id
    )
    .fetch_optional(db)
    .await?)
}

/// Sets a sale's crowd policy (`domain/crowd.rs`) while it has not started: `None` when the shop
/// has no such sale or it has started.
pub async fn set_crowd<'e>(
    db: impl sqlx::PgExecutor<'e>,
    id: i64,
    shop_id: i64,
    policy: CrowdPolicy,
    threshold: i32,
) -> ApiResult<Option<ActivityRow>> {
    Ok(rows!(
        "UPDATE activities SET crowd_policy = $2, crowd_threshold = $3
         WHERE id = $1 AND shop_id = $4 AND starts_at > now()
         RETURNING ",
        "",
        id,
        policy.as_str(),
        threshold,
        shop_id
    )
    .fetch_optional(db)
    .await?)
}

/// A sale's figures after units were added.
pub struct Added {
    /// The addition, owed to Redis until `carried` marks it.
    pub addition: i64,
    pub total_stock: i64,
    pub sold: i64,
    pub stock_shards: i16,
    pub title: String,
}

/// Adds `add` units to a sale of the shop and records who added them (in `tx`, with the caller's
/// audit entry); `None` when the shop has no such sale.
pub async fn add_units(
    tx: &mut sqlx::PgConnection,
    id: i64,
    shop_id: i64,
    merchant_id: i64,
    add: i64,
) -> ApiResult<Option<Added>> {
    let Some(sale) = sqlx::query!(
        "UPDATE activities SET total_stock = total_stock + $2, stock_moves = stock_moves + 1
         WHERE id = $1 AND shop_id = $3
         RETURNING total_stock, sold, stock_shards, title",
        id,
        add,
        shop_id
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let addition = sqlx::query_scalar!(
        "INSERT INTO stock_additions (activity_id, merchant_id, added, in_redis)
         VALUES ($1, $2, $3, false) RETURNING id",
        id,
        merchant_id,
        add
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(Some(Added {
        addition,
        total_stock: sale.total_stock,
        sold: sale.sold,
        stock_shards: sale.stock_shards,
        title: sale.title,
    }))
}

/// An addition of units the database took and Redis has not yet.
#[derive(Debug, Clone, Copy)]
pub struct OwedAddition {
    pub addition: i64,
    pub activity_id: i64,
    pub added: i64,
    pub stock_shards: i16,
    /// What the database says is left of the sale (for shards Redis does not hold).
    pub remaining: i64,
}

/// The additions of sale `id` that Redis does not have yet, oldest first.
pub async fn owed_additions(db: &PgPool, id: i64) -> sqlx::Result<Vec<OwedAddition>> {
    sqlx::query_as!(
        OwedAddition,
        r#"SELECT s.id AS addition, s.activity_id, s.added, a.stock_shards,
                  a.total_stock - a.sold AS "remaining!"
           FROM stock_additions s JOIN activities a ON a.id = s.activity_id
           WHERE s.activity_id = $1 AND NOT s.in_redis ORDER BY s.id"#,
        id
    )
    .fetch_all(db)
    .await
}

/// Redis has the addition now.
pub async fn carried(db: &PgPool, addition: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE stock_additions SET in_redis = true WHERE id = $1",
        addition
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A sale's stock figures in the database, read at one instant: what Redis must follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StockLook {
    pub total_stock: i64,
    pub sold: i64,
    /// How many additions and cancellations the sale has had: it only grows.
    pub moves: i64,
    /// Additions and cancelled orders' units that Redis does not have yet.
    pub owed: i64,
}

impl StockLook {
    /// What Redis should hold once nothing is in flight.
    pub fn expected(&self) -> i64 {
        self.total_stock - self.sold
    }
}

/// Sale `id`'s stock figures, in one statement.
pub async fn stock_look(db: &PgPool, id: i64) -> sqlx::Result<StockLook> {
    sqlx::query_as!(
        StockLook,
        r#"SELECT a.total_stock, a.sold, a.stock_moves AS moves,
                  (SELECT count(*) FROM stock_additions s WHERE s.activity_id = a.id AND NOT s.in_redis)
                  + (SELECT count(*) FROM orders o WHERE o.activity_id = a.id AND o.units_owed)
                  AS "owed!"
           FROM activities a WHERE a.id = $1"#,
        id
    )
    .fetch_one(db)
    .await
}

/// Additions and cancelled orders' units, of any sale, that Redis does not have yet.
pub async fn owed_moves(db: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT (SELECT count(*) FROM stock_additions WHERE NOT in_redis)
                  + (SELECT count(*) FROM orders WHERE units_owed) AS "owed!""#
    )
    .fetch_one(db)
    .await
}

/// Whether sale `id` is the shop's.
pub async fn in_shop(db: &PgPool, id: i64, shop_id: i64) -> ApiResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM activities WHERE id = $1 AND shop_id = $2) AS "ours!""#,
        id,
        shop_id
    )
    .fetch_one(db)
    .await?)
}

/// A sale's orders counted by status (the statuses it has orders in).
pub async fn orders_by_status(db: &PgPool, id: i64) -> ApiResult<Vec<(OrderStatus, i64)>> {
    sqlx::query!(
        r#"SELECT status, count(*) AS "orders!" FROM orders WHERE activity_id = $1 GROUP BY status"#,
        id
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| {
        let status = r.status.parse().map_err(|e| ApiError::Internal(anyhow::anyhow!("{e}")))?;
        Ok((status, r.orders))
    })
    .collect()
}

/// Every stock addition of a sale of the shop, newest first (at most 1,000); `None` when the
/// shop has no such sale.
pub async fn stock_additions(
    db: &PgPool,
    id: i64,
    shop_id: i64,
) -> ApiResult<Option<Vec<StockAddition>>> {
    if !in_shop(db, id, shop_id).await? {
        return Ok(None);
    }
    let rows = sqlx::query!(
        "SELECT s.added, u.username, s.created_at FROM stock_additions s JOIN users u ON u.id = s.merchant_id
         WHERE s.activity_id = $1 ORDER BY s.created_at DESC, s.id DESC LIMIT 1000",
        id
    )
    .fetch_all(db)
    .await?;
    Ok(Some(
        rows.into_iter()
            .map(|r| StockAddition {
                added: r.added,
                merchant: r.username,
                at: rfc3339(r.created_at),
            })
            .collect(),
    ))
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

/// An activity with its figures for the console; one that is not in Redis (ended long ago, or
/// not warmed yet) shows what the database says is left.
pub fn admin_item(row: ActivityRow, in_redis: Option<i64>, now: DateTime<Utc>) -> AdminActivity {
    let remaining = in_redis.unwrap_or(row.total_stock - row.sold).max(0);
    AdminActivity {
        status: sale_status(&row, remaining, now),
        remaining,
        sold: row.sold,
        activity: row.into_activity(),
    }
}

/// A new sale of the merchant's shop.
pub async fn insert<'e>(
    db: impl sqlx::PgExecutor<'e>,
    merchant_id: i64,
    spec: &ActivitySpec,
) -> ApiResult<ActivityRow> {
    Ok(rows!(
        "INSERT INTO activities (merchant_id, title, description, image_url, price_cents, seckill_price_cents,
             starts_at, ends_at, total_stock, per_user_limit, captcha_required, payment_window_secs, stock_shards,
             waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty, accounts_created_before,
             line_method, halted)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 (SELECT shop_id FROM users WHERE id = $1 AND role = 'merchant'), $16, $17, $18, $19,
                 -- A sale made while a stop holds its shop or the platform is stopped too.
                 EXISTS (SELECT 1 FROM halts h JOIN users u ON h.scope IN (0, u.shop_id) WHERE u.id = $1))
         RETURNING ",
        "",
        merchant_id,
        spec.title,
        spec.description,
        spec.image_url,
        spec.price_cents,
        spec.seckill_price_cents,
        spec.starts_at,
        spec.ends_at,
        spec.stock,
        spec.per_user_limit,
        spec.bot_check == BotCheck::Image,
        spec.payment_window_secs,
        spec.stock_shards,
        spec.waiting_room,
        spec.admit_per_sec,
        spec.bot_check.as_str(),
        spec.pow_difficulty,
        spec.accounts_created_before,
        spec.line_method.as_str()
    )
    .fetch_one(db)
    .await?)
}

/// The sales whose journals the relay reads: those started (or starting within five minutes) in
/// the last seven days, with their shards, and whether they are on (ended less than five minutes ago).
pub async fn journal_sales(db: &PgPool) -> sqlx::Result<Vec<(i64, i16, bool)>> {
    Ok(sqlx::query!(
        r#"SELECT id, stock_shards, ends_at > now() - interval '5 minutes' AS "on!" FROM activities
               WHERE ends_at > now() - interval '7 days' AND starts_at < now() + interval '5 minutes'"#
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|s| (s.id, s.stock_shards, s.on))
    .collect())
}

/// The sales of the last seven days and their shards.
pub async fn recent_shards(db: &PgPool) -> sqlx::Result<Vec<(i64, i16)>> {
    Ok(sqlx::query!(
        "SELECT id, stock_shards FROM activities WHERE ends_at > now() - interval '7 days'"
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|s| (s.id, s.stock_shards))
    .collect())
}

/// A sale's stock and units sold, as the database has them now.
pub async fn figures(db: &PgPool, id: i64) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!("SELECT total_stock, sold FROM activities WHERE id = $1", id)
        .fetch_one(db)
        .await?;
    Ok((row.total_stock, row.sold))
}
