//! The storefront's sales, their settings, the buy and reminders (docs/api.md "Storefront").

use super::SaleId;
use serde::{Deserialize, Serialize};

/// A sale activity (docs/api.md `Activity`). Times are RFC 3339 UTC strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    pub id: SaleId,
    pub title: String,
    pub description: String,
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: String,
    pub ends_at: String,
    pub total_stock: i64,
    pub per_user_limit: i32,
    pub captcha_required: bool,
    pub payment_window_secs: i32,
    pub paused: bool,
    /// How many Redis keys (on a cluster, masters) the stock is split over.
    #[serde(default = "one_shard")]
    pub stock_shards: i16,
    /// Whether shoppers pass a waiting room before they may buy (an admission ticket).
    #[serde(default)]
    pub waiting_room: bool,
    /// Shoppers the waiting room admits per second (while admitted shoppers can still find stock).
    #[serde(default = "default_admit_rate")]
    pub admit_per_sec: i32,
    /// The bot check a buy must pass (`captcha_required` is true exactly when it is `image`).
    #[serde(default)]
    pub bot_check: BotCheck,
    /// The proof of work's difficulty: SHA-256 hashes a browser computes on average.
    #[serde(default = "default_pow_difficulty")]
    pub pow_difficulty: i32,
    /// Only accounts created before this instant may buy (or join the waiting room); `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounts_created_before: Option<String>,
    /// How the waiting room orders its line (with `waiting_room` on).
    #[serde(default)]
    pub line_method: LineMethod,
    /// Hex SHA-256 of the drawing's secret seed, published before the line opens (a sale with a
    /// waiting room whose places are drawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawing_commitment: Option<String>,
    /// The drawing's seed (hex), published once the sale has started: anyone recomputes the
    /// places from it and the join receipts (`GET /api/activities/{id}/drawing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawing_seed: Option<String>,
    /// Stopped by the emergency cord (the shop's or the platform's): buys answer `403 paused`
    /// as when `paused`, which stays the merchant's own switch.
    #[serde(default)]
    pub halted: bool,
    /// The cord's fail-open: shoppers go past the bot check and the waiting room straight to
    /// the gate (the stock and the per-user limit still hold).
    #[serde(default)]
    pub fail_open: bool,
}

impl Activity {
    /// Whether buys are refused with `403 paused`: the merchant's pause or the cord's stop.
    pub fn stopped(&self) -> bool {
        self.paused || self.halted
    }

    /// The sale as a shopper meets it now: under the cord's fail-open, no waiting room and no
    /// bot check.
    pub fn checks_in_force(mut self) -> Activity {
        if self.fail_open {
            self.waiting_room = false;
            self.bot_check = BotCheck::None;
            self.captcha_required = false;
        }
        self
    }
}

/// How a sale's waiting room orders its line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineMethod {
    /// Places drawn at random among those who join before the start (arriving early gives no
    /// edge), then arrival order.
    #[default]
    DrawThenOrder,
    /// Arrival order only, before the start as after it.
    ArrivalOrder,
    /// Arrivals in order, and while nobody waits and the admission rate has room, admitted at
    /// once (no waiting page): a line only when the crowd outruns the rate.
    PassThrough,
}

impl LineMethod {
    pub const ALL: [LineMethod; 3] = [
        LineMethod::DrawThenOrder,
        LineMethod::ArrivalOrder,
        LineMethod::PassThrough,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LineMethod::DrawThenOrder => "draw_then_order",
            LineMethod::ArrivalOrder => "arrival_order",
            LineMethod::PassThrough => "pass_through",
        }
    }
}

impl std::str::FromStr for LineMethod {
    type Err = ();
    fn from_str(s: &str) -> Result<LineMethod, ()> {
        LineMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or(())
    }
}

/// What a sale asks of a buyer to tell a person from a bot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BotCheck {
    /// Nothing.
    #[default]
    None,
    /// The browser computes a proof of work (ALTCHA v2), no person involved.
    ProofOfWork,
    /// The image captcha, with the proof of work always accepted instead.
    Image,
}

impl BotCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            BotCheck::None => "none",
            BotCheck::ProofOfWork => "proof_of_work",
            BotCheck::Image => "image",
        }
    }

    /// Whether a proof of work is accepted on this sale.
    pub fn takes_proof_of_work(self) -> bool {
        self != BotCheck::None
    }
}

impl std::str::FromStr for BotCheck {
    type Err = ();
    fn from_str(s: &str) -> Result<BotCheck, ()> {
        match s {
            "none" => Ok(BotCheck::None),
            "proof_of_work" => Ok(BotCheck::ProofOfWork),
            "image" => Ok(BotCheck::Image),
            _ => Err(()),
        }
    }
}

/// The proof of work's difficulty when the merchant names none: about 30,000 SHA-256 hashes,
/// a fraction of a second in a phone's browser (docs/benchmarks.md, "Storefront").
pub const DEFAULT_POW_DIFFICULTY: i32 = 30_000;

/// The range a merchant may pick the difficulty from.
pub const POW_DIFFICULTY_RANGE: std::ops::RangeInclusive<i32> = 1_000..=10_000_000;

fn default_pow_difficulty() -> i32 {
    DEFAULT_POW_DIFFICULTY
}

fn one_shard() -> i16 {
    1
}

fn default_admit_rate() -> i32 {
    DEFAULT_ADMIT_PER_SEC
}

/// A waiting room's admission rate when the merchant names none: two thirds of the in-stock rate
/// one instance with one Redis sustains in docs/benchmarks.md (~3,000 shoppers/s).
pub const DEFAULT_ADMIT_PER_SEC: i32 = 2000;

/// Sales of at least this many units get a waiting room unless the merchant says otherwise.
pub const WAITING_ROOM_STOCK_THRESHOLD: i64 = 1000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityList {
    pub activities: Vec<Activity>,
}

/// Body of `POST /api/admin/activities`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewActivity {
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: String,
    pub ends_at: String,
    pub stock: i64,
    #[serde(default)]
    pub per_user_limit: Option<i32>,
    #[serde(default)]
    pub captcha_required: Option<bool>,
    #[serde(default)]
    pub payment_window_secs: Option<i32>,
    #[serde(default)]
    pub stock_shards: Option<i16>,
    /// Default: on when the stock is at least [`WAITING_ROOM_STOCK_THRESHOLD`].
    #[serde(default)]
    pub waiting_room: Option<bool>,
    /// 1..=1,000,000; default [`DEFAULT_ADMIT_PER_SEC`].
    #[serde(default)]
    pub admit_per_sec: Option<i32>,
    /// Default `proof_of_work`, unless `captcha_required` alone says otherwise (true: `image`,
    /// false: `none`, as older clients meant it).
    #[serde(default)]
    pub bot_check: Option<BotCheck>,
    /// [`POW_DIFFICULTY_RANGE`]; default [`DEFAULT_POW_DIFFICULTY`].
    #[serde(default)]
    pub pow_difficulty: Option<i32>,
    /// RFC 3339, at most `starts_at`: only accounts created before it may buy; default none.
    #[serde(default)]
    pub accounts_created_before: Option<String>,
    /// Default `draw_then_order`.
    #[serde(default)]
    pub line_method: Option<LineMethod>,
}

/// Body of `POST /api/admin/activities/{id}/stock`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddStock {
    pub add: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevel {
    pub total_stock: i64,
    pub remaining: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remaining {
    pub remaining: i64,
    /// Whether the merchant has paused the sale (an addition to docs/api.md).
    #[serde(default)]
    pub paused: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTime {
    pub now: String,
    pub now_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuyPath {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captcha {
    pub id: String,
    pub image: String,
}

/// Body of `POST /api/activities/{id}/buy`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuyRequest {
    pub path: String,
    #[serde(default)]
    pub captcha_id: Option<String>,
    #[serde(default)]
    pub captcha_answer: Option<String>,
    #[serde(default)]
    pub quantity: Option<i64>,
    /// The admission ticket of a sale with a waiting room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// A solved proof of work: base64 of the ALTCHA payload JSON `{"challenge","solution"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow: Option<String>,
}

/// A shopper's reminder of a sale: `POST /api/activities/{id}/reminder` (`201`, or `200` with the
/// same reminder when asked again), `DELETE /api/reminders/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reminder {
    pub id: i64,
    pub activity_id: SaleId,
    pub starts_at: String,
    pub created_at: String,
}

/// `GET /api/activities/{id}/reminder`: the shopper's reminder of the sale, if they asked one
/// (a shopper without one is not an error: a page asks on every visit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MyReminder {
    pub reminder: Option<Reminder>,
}
