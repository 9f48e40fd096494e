//! Sale activities: their rows, the rules a new one must follow, the reads the storefront and
//! the console share, and their stock in Redis (warmed before a sale is announced). Stock only
//! ever grows.

use super::drawing::{self, hex};
use super::{rfc3339, ApiError, ApiResult};
use crate::infra::{keys::MAX_SHARDS, redis::Redis};
use app::api::{
    Activity, AdminActivity, BotCheck, LineMethod, NewActivity, SaleStatus, StockAddition,
    DEFAULT_ADMIT_PER_SEC, DEFAULT_POW_DIFFICULTY, POW_DIFFICULTY_RANGE,
    WAITING_ROOM_STOCK_THRESHOLD,
};
use chrono::{DateTime, Utc};
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
}

// The statements below are checked at compile time (`.sqlx/`); each names the columns of an
// `ActivityRow`, in its order (a macro takes one literal, not a constant).

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
            id: self.id,
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
        }
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
    Ok(
        sqlx::query_as!(
            ActivityRow,
            "SELECT id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed
             FROM activities WHERE id = $1",
            id
        )
        .fetch_optional(db)
        .await?,
    )
}

/// Activities that have not ended.
pub async fn live(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(sqlx::query_as!(
        ActivityRow,
        "SELECT id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed
         FROM activities WHERE ends_at > now()"
    )
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
    Ok(sqlx::query_as!(
        ActivityRow,
        "SELECT id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed
         FROM activities ORDER BY starts_at DESC, id DESC LIMIT 500"
    )
    .fetch_all(db)
    .await?)
}

/// A shop's sales, newest start first, at most `limit`.
pub async fn list_of_shop(db: &PgPool, shop_id: i64, limit: i64) -> ApiResult<Vec<ActivityRow>> {
    Ok(sqlx::query_as!(
        ActivityRow,
        "SELECT id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed
         FROM activities WHERE shop_id = $2 ORDER BY starts_at DESC, id DESC LIMIT $1",
        limit,
        shop_id
    )
    .fetch_all(db)
    .await?)
}

/// Sales with a waiting room that are on, or start within five seconds.
pub async fn lines_on_now(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(sqlx::query_as!(
        ActivityRow,
        "SELECT id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed
         FROM activities
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
    Ok(sqlx::query_as!(
        ActivityRow,
        "UPDATE activities SET paused = $2 WHERE id = $1 AND shop_id = $3
         RETURNING id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed",
        id,
        paused,
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
pub async fn orders_by_status(db: &PgPool, id: i64) -> ApiResult<Vec<(String, i64)>> {
    Ok(sqlx::query!(
        r#"SELECT status, count(*) AS "orders!" FROM orders WHERE activity_id = $1 GROUP BY status"#,
        id
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.status, r.orders))
    .collect())
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

/// A validated `NewActivity`.
pub struct ActivitySpec {
    title: String,
    description: String,
    image_url: Option<String>,
    price_cents: i64,
    seckill_price_cents: i64,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    stock: i64,
    per_user_limit: i32,
    bot_check: BotCheck,
    pow_difficulty: i32,
    payment_window_secs: i32,
    stock_shards: i16,
    waiting_room: bool,
    admit_per_sec: i32,
    accounts_created_before: Option<DateTime<Utc>>,
    line_method: LineMethod,
}

/// Shards when the merchant names none: one per thousand units, at most one per master (a single
/// Redis counts as one master: several shards there only cost lending calls at the end).
pub fn default_shards(stock: i64, masters: usize) -> i16 {
    (stock / 1000).clamp(1, masters.clamp(1, MAX_SHARDS as usize) as i64) as i16
}

fn parse_time(field: &str, s: &str) -> ApiResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ApiError::invalid(field, "must be an RFC 3339 time, e.g. 2030-01-01T12:00:00Z")
        })
}

/// The highest price a sale may ask (ten trillion in the currency's units): any order's amount,
/// at the most units a shopper may buy, fits in 64 bits with room to spare.
pub const MAX_PRICE_CENTS: i64 = 1_000_000_000_000_000;

/// Text a person reads: no NUL or other control characters (line breaks and tabs only where
/// `multiline`), and no bidirectional overrides or isolates, which make a name read differently
/// from what it is ("Trojan Source").
pub fn plain_text(field: &str, text: &str, multiline: bool) -> ApiResult<()> {
    let bad = text.chars().find(|&c| {
        (c.is_control() && !(multiline && matches!(c, '\n' | '\r' | '\t')))
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
    });
    match bad {
        Some(c) => Err(ApiError::invalid(
            field,
            format!("must not hold the control character U+{:04X}", c as u32),
        )),
        None => Ok(()),
    }
}

/// `value` when `range` holds it, else `400 invalid_input` naming `field`.
fn within<T: PartialOrd>(
    field: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
    message: impl FnOnce() -> String,
) -> ApiResult<T> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::invalid(field, message()))
    }
}

impl ActivitySpec {
    /// The rules of docs/api.md, checked in the order of its fields: the first broken one is the
    /// answer. `masters`: how many Redis masters the deployment has (for the default shard count).
    pub fn parse(n: NewActivity, min_window: i32, masters: usize) -> ApiResult<ActivitySpec> {
        let (title, image_url) = texts(&n)?;
        within("price_cents", n.price_cents, 0..=MAX_PRICE_CENTS, || {
            format!("must be between 0 and {MAX_PRICE_CENTS}")
        })?;
        within(
            "seckill_price_cents",
            n.seckill_price_cents,
            0..=n.price_cents,
            || "must be between 0 and price_cents".into(),
        )?;
        let starts_at = parse_time("starts_at", &n.starts_at)?;
        let ends_at = parse_time("ends_at", &n.ends_at)?;
        if ends_at <= starts_at {
            return Err(ApiError::invalid("ends_at", "must be after starts_at"));
        }
        let units = Units::parse(&n, min_window, masters)?;
        let bot_check = bot_check(n.bot_check, n.captcha_required)?;
        let accounts_created_before = match n.accounts_created_before.as_deref() {
            Some(t) => Some(parse_time("accounts_created_before", t)?),
            None => None,
        };
        if accounts_created_before.is_some_and(|t| t > starts_at) {
            return Err(ApiError::invalid(
                "accounts_created_before",
                "must be at most starts_at",
            ));
        }
        let (low, high) = POW_DIFFICULTY_RANGE.into_inner();
        let pow_difficulty = within(
            "pow_difficulty",
            n.pow_difficulty.unwrap_or(DEFAULT_POW_DIFFICULTY),
            POW_DIFFICULTY_RANGE,
            || format!("must be between {low} and {high}"),
        )?;
        Ok(ActivitySpec {
            accounts_created_before,
            line_method: n.line_method.unwrap_or_default(),
            bot_check,
            pow_difficulty,
            waiting_room: n
                .waiting_room
                .unwrap_or(n.stock >= WAITING_ROOM_STOCK_THRESHOLD),
            admit_per_sec: units.admit_per_sec,
            title,
            description: n.description,
            image_url,
            price_cents: n.price_cents,
            seckill_price_cents: n.seckill_price_cents,
            starts_at,
            ends_at,
            stock: n.stock,
            per_user_limit: units.per_user_limit,
            payment_window_secs: units.payment_window_secs,
            stock_shards: units.stock_shards,
        })
    }
}

/// The title (trimmed) and the image's link (`None`: no image), once every text is plain.
fn texts(n: &NewActivity) -> ApiResult<(String, Option<String>)> {
    let title = n.title.trim().to_string();
    if title.is_empty() || title.chars().count() > 120 {
        return Err(ApiError::invalid("title", "must be 1 to 120 characters"));
    }
    plain_text("title", &title, false)?;
    plain_text("description", &n.description, true)?;
    if let Some(url) = &n.image_url {
        plain_text("image_url", url, false)?;
    }
    if n.description.chars().count() > 5000 {
        return Err(ApiError::invalid(
            "description",
            "must be at most 5000 characters",
        ));
    }
    let image_url = n
        .image_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    let linkable = |u: &str| {
        u.len() <= 2048
            && (u.starts_with("https://") || u.starts_with("http://") || u.starts_with('/'))
    };
    match image_url {
        Some(u) if !linkable(u) => Err(ApiError::invalid(
            "image_url",
            "must be an http(s) URL or a path",
        )),
        other => Ok((title, other.map(String::from))),
    }
}

/// The bot check asked, by its name or by the older `captcha_required` (both: they must agree).
fn bot_check(named: Option<BotCheck>, captcha_required: Option<bool>) -> ApiResult<BotCheck> {
    match (named, captcha_required) {
        (None, None) => Ok(BotCheck::ProofOfWork),
        (None, Some(true)) => Ok(BotCheck::Image),
        (None, Some(false)) => Ok(BotCheck::None),
        (Some(check), None) => Ok(check),
        (Some(check), Some(captcha)) if captcha == (check == BotCheck::Image) => Ok(check),
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "bot_check",
            "contradicts captcha_required (true means image); send one of them",
        )),
    }
}

/// The counts of a new sale, each within its bounds (defaults filled in).
struct Units {
    per_user_limit: i32,
    payment_window_secs: i32,
    stock_shards: i16,
    admit_per_sec: i32,
}

impl Units {
    fn parse(n: &NewActivity, min_window: i32, masters: usize) -> ApiResult<Units> {
        within("stock", n.stock, 1..=10_000_000, || {
            "must be between 1 and 10000000".into()
        })?;
        let per_user_limit = within(
            "per_user_limit",
            n.per_user_limit.unwrap_or(1),
            1..=100,
            || "must be between 1 and 100".into(),
        )?;
        let payment_window_secs = within(
            "payment_window_secs",
            n.payment_window_secs.unwrap_or(600),
            min_window..=86_400,
            || format!("must be between {min_window} and 86400"),
        )?;
        let stock_shards = n
            .stock_shards
            .unwrap_or_else(|| default_shards(n.stock, masters));
        if !(1..=MAX_SHARDS).contains(&stock_shards) || i64::from(stock_shards) > n.stock {
            return Err(ApiError::invalid(
                "stock_shards",
                format!("must be between 1 and {MAX_SHARDS}, and at most the stock"),
            ));
        }
        let admit_per_sec = within(
            "admit_per_sec",
            n.admit_per_sec.unwrap_or(DEFAULT_ADMIT_PER_SEC),
            1..=1_000_000,
            || "must be between 1 and 1000000".into(),
        )?;
        Ok(Units {
            per_user_limit,
            payment_window_secs,
            stock_shards,
            admit_per_sec,
        })
    }
}

/// How `total` units split over `shards`: as evenly as possible, the first shards taking the rest.
pub fn split(total: i64, shards: i16) -> Vec<i64> {
    let k = i64::from(shards.max(1));
    (0..k)
        .map(|i| total / k + i64::from(i < total % k))
        .collect()
}

/// Puts an activity's stock (split over its shards) and switches into Redis unless they are
/// there already.
pub async fn warm(redis: &Redis, row: &ActivityRow, remaining: i64) -> ApiResult<()> {
    let shards = redis.keys.shards(row.id, row.stock_shards);
    let parts = split(remaining.max(0), row.stock_shards);
    let writes = shards.iter().zip(parts).map(|(shard, units)| {
        let mut conn = redis.conn();
        async move {
            redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(shard.stock())
                .arg(units)
                .arg("NX")
                .ignore()
                .cmd("HSETNX")
                .arg(shard.meta())
                .arg("paused")
                .arg(if row.paused { "1" } else { "0" })
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        }
    });
    for written in futures_util::future::join_all(writes).await {
        written?;
    }
    Ok(())
}

/// How long a shard remembers that it took an addition: far longer than an addition stays owed
/// (the reconciler carries owed ones over every round).
const ADDITION_MARK_TTL_SECS: i64 = 8 * 24 * 3600;

/// Puts an addition's units on sale in Redis (after the database took them), spread over the
/// sale's shards, each shard once whatever is retried or delivered late; a shard Redis does not
/// hold is warmed from what the database says is left. Returns the units on sale.
pub async fn add_to_stock(redis: &Redis, owed: &OwedAddition) -> ApiResult<i64> {
    let script = crate::infra::scripts::add_stock();
    let adds = split(owed.added, owed.stock_shards);
    let fallbacks = split(owed.remaining.max(0), owed.stock_shards);
    let shards = redis.keys.shards(owed.activity_id, owed.stock_shards);
    let calls = shards
        .iter()
        .zip(adds)
        .zip(fallbacks)
        .map(|((shard, add), fallback)| {
            let mut conn = redis.conn();
            let mut invocation = script.key(shard.stock());
            invocation
                .key(shard.added(owed.addition))
                .arg(add)
                .arg(fallback)
                .arg(ADDITION_MARK_TTL_SECS);
            async move { invocation.invoke_async::<i64>(&mut conn).await }
        });
    let mut on_sale = 0;
    for units in futures_util::future::join_all(calls).await {
        on_sale += units?.max(0);
    }
    Ok(on_sale)
}

/// Each shard's units as Redis counts them (`None`: the shard is not in Redis).
pub async fn shard_stock(
    redis: &Redis,
    id: i64,
    shards: i16,
) -> redis::RedisResult<Vec<Option<i64>>> {
    let reads = redis.keys.shards(id, shards).into_iter().map(|shard| {
        let mut conn = redis.conn();
        async move {
            redis::cmd("GET")
                .arg(shard.stock())
                .query_async::<Option<i64>>(&mut conn)
                .await
        }
    });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .collect()
}

/// Units still for sale over every shard; `None` when Redis holds none of the sale's shards.
pub async fn in_redis(redis: &Redis, id: i64, shards: i16) -> redis::RedisResult<Option<i64>> {
    let stock = shard_stock(redis, id, shards).await?;
    Ok(stock
        .iter()
        .any(Option::is_some)
        .then(|| stock.iter().flatten().map(|n| (*n).max(0)).sum()))
}

/// Units still for sale, as Redis counts them (0 when the sale is not in Redis).
pub async fn remaining(redis: &Redis, id: i64, shards: i16) -> ApiResult<i64> {
    Ok(in_redis(redis, id, shards).await?.unwrap_or(0))
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
    Ok(sqlx::query_as!(
        ActivityRow,
        "INSERT INTO activities (merchant_id, title, description, image_url, price_cents, seckill_price_cents,
             starts_at, ends_at, total_stock, per_user_limit, captcha_required, payment_window_secs, stock_shards,
             waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty, accounts_created_before,
             line_method)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 (SELECT shop_id FROM users WHERE id = $1 AND role = 'merchant'), $16, $17, $18, $19)
         RETURNING id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at,
                  total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused,
                  stock_shards, waiting_room, admit_per_sec, shop_id, bot_check, pow_difficulty,
                  accounts_created_before, line_method, drawing_seed",
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

/// For `make run`: unless a sale is live or upcoming, one that starts a few minutes from now.
pub async fn create_demo(db: &PgPool, merchant_username: &str) -> anyhow::Result<Option<i64>> {
    let pending = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM activities WHERE ends_at > now()) AS "pending!""#
    )
    .fetch_one(db)
    .await?;
    let merchant = sqlx::query_scalar!(
        "SELECT id FROM users WHERE lower(username) = lower($1) AND role = 'merchant'",
        merchant_username
    )
    .fetch_optional(db)
    .await?;
    let (false, Some(merchant)) = (pending, merchant) else {
        return Ok(None);
    };
    let now = Utc::now();
    let spec = ActivitySpec::parse(
        NewActivity {
            title: "Demo: the 100-unit phone drop".into(),
            description: "A demo sale: 100 phones at a flash price. One per shopper.".into(),
            image_url: None,
            price_cents: 49_900,
            seckill_price_cents: 9_900,
            starts_at: rfc3339(now + chrono::Duration::minutes(3)),
            ends_at: rfc3339(now + chrono::Duration::hours(2)),
            stock: 100,
            per_user_limit: Some(1),
            captcha_required: None,
            payment_window_secs: Some(600),
            stock_shards: None,
            waiting_room: None,
            admit_per_sec: None,
            bot_check: Some(BotCheck::ProofOfWork),
            pow_difficulty: None,
            accounts_created_before: None,
            line_method: None,
        },
        60,
        1,
    )
    .map_err(|e| anyhow::anyhow!("demo activity: {e}"))?;
    let row = insert(db, merchant, &spec)
        .await
        .map_err(|e| anyhow::anyhow!("demo activity: {e:?}"))?;
    Ok(Some(row.id))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> NewActivity {
        NewActivity {
            title: "Phone".into(),
            description: String::new(),
            image_url: None,
            price_cents: 10_000,
            seckill_price_cents: 1_00,
            starts_at: "2030-01-01T00:00:00Z".into(),
            ends_at: "2030-01-01T01:00:00Z".into(),
            stock: 100,
            per_user_limit: None,
            captcha_required: None,
            payment_window_secs: None,
            stock_shards: None,
            waiting_room: None,
            admit_per_sec: None,
            bot_check: None,
            pow_difficulty: None,
            accounts_created_before: None,
            line_method: None,
        }
    }

    fn field_of(n: NewActivity) -> String {
        match ActivitySpec::parse(n, 60, 3) {
            Err(ApiError::InvalidInput(m)) => m.split(':').next().unwrap().to_string(),
            Err(e) => panic!("{e:?}"),
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn defaults_follow_the_api() {
        let spec = ActivitySpec::parse(valid(), 60, 3).unwrap();
        assert_eq!(
            (
                spec.per_user_limit,
                spec.bot_check,
                spec.pow_difficulty,
                spec.payment_window_secs
            ),
            (1, BotCheck::ProofOfWork, DEFAULT_POW_DIFFICULTY, 600)
        );
        // Older clients' `captcha_required` alone still means what it meant.
        let check = |bot_check, captcha_required| {
            ActivitySpec::parse(
                NewActivity {
                    bot_check,
                    captcha_required,
                    ..valid()
                },
                60,
                3,
            )
            .map(|s| s.bot_check)
            .ok()
        };
        assert_eq!(check(None, Some(true)), Some(BotCheck::Image));
        assert_eq!(check(None, Some(false)), Some(BotCheck::None));
        assert_eq!(
            check(Some(BotCheck::Image), Some(true)),
            Some(BotCheck::Image)
        );
        assert_eq!(check(Some(BotCheck::ProofOfWork), Some(true)), None);
        // A waiting room by default from the threshold up, unless the merchant says otherwise.
        assert!(!spec.waiting_room);
        let big = |waiting_room| {
            ActivitySpec::parse(
                NewActivity {
                    stock: WAITING_ROOM_STOCK_THRESHOLD,
                    waiting_room,
                    ..valid()
                },
                60,
                3,
            )
            .unwrap()
        };
        assert!(big(None).waiting_room);
        assert!(!big(Some(false)).waiting_room);
        assert_eq!(big(None).admit_per_sec, DEFAULT_ADMIT_PER_SEC);
    }

    #[test]
    fn each_rule_names_its_field() {
        type Break = fn(&mut NewActivity);
        let cases: [(&str, Break); 21] = [
            ("pow_difficulty", |n| n.pow_difficulty = Some(999)),
            ("pow_difficulty", |n| n.pow_difficulty = Some(10_000_001)),
            ("title", |n| n.title = " ".into()),
            ("title", |n| n.title = "x".repeat(121)),
            ("description", |n| n.description = "x".repeat(5001)),
            ("image_url", |n| {
                n.image_url = Some("javascript:alert(1)".into())
            }),
            ("price_cents", |n| n.price_cents = -1),
            ("seckill_price_cents", |n| n.seckill_price_cents = 10_001),
            ("starts_at", |n| n.starts_at = "tomorrow".into()),
            ("ends_at", |n| n.ends_at = "2029-12-31T23:00:00Z".into()),
            ("stock", |n| n.stock = 0),
            ("stock", |n| n.stock = 10_000_001),
            ("per_user_limit", |n| n.per_user_limit = Some(101)),
            ("payment_window_secs", |n| n.payment_window_secs = Some(59)),
            ("stock_shards", |n| n.stock_shards = Some(0)),
            ("stock_shards", |n| n.stock_shards = Some(65)),
            ("stock_shards", |n| (n.stock, n.stock_shards) = (3, Some(4))),
            ("admit_per_sec", |n| n.admit_per_sec = Some(0)),
            ("admit_per_sec", |n| n.admit_per_sec = Some(1_000_001)),
            ("accounts_created_before", |n| {
                n.accounts_created_before = Some("2030-01-01T00:00:01Z".into())
            }),
            ("accounts_created_before", |n| {
                n.accounts_created_before = Some("yesterday".into())
            }),
        ];
        for (field, break_it) in cases {
            let mut n = valid();
            break_it(&mut n);
            assert_eq!(field_of(n), field);
        }
        // The cut-off at the start instant itself is allowed.
        let mut at_start = valid();
        at_start.accounts_created_before = Some("2030-01-01T00:00:00Z".into());
        assert_eq!(field_of(at_start), "ok");
        assert_eq!(field_of(valid()), "ok");
    }

    #[test]
    fn shards_default_from_stock_and_masters_and_split_evenly() {
        assert_eq!(default_shards(100, 3), 1);
        assert_eq!(default_shards(2_500, 3), 2);
        assert_eq!(default_shards(100_000, 3), 3);
        assert_eq!(default_shards(100_000, 1), 1);
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split(7, 1), vec![7]);
        assert_eq!(split(1_000_003, 7).iter().sum::<i64>(), 1_000_003);
    }
}
