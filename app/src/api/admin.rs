//! The console: a shop's sales with their figures, stock, orders, forecast and settings
//! (docs/api.md "Admin console").

use super::*;
use serde::{Deserialize, Serialize};

/// `GET /api/admin/activities/{id}/stats`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityStats {
    pub total_stock: i64,
    pub remaining: i64,
    pub queued: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    /// Buy attempts during the last complete second, over every instance (an addition to docs/api.md).
    #[serde(default)]
    pub attempts_per_sec: i64,
    /// The waiting room, when the sale has one (an addition to docs/api.md; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueFigures>,
    /// Shoppers who asked to be reminded of the sale (an addition to docs/api.md).
    #[serde(default)]
    pub reminders: i64,
    /// Views of the sale's page and stock polls during the last complete second, over every
    /// instance (an addition to docs/api.md).
    #[serde(default)]
    pub views_per_sec: i64,
    /// Whether the sale is hot: its state is served from each instance's memory.
    #[serde(default)]
    pub hot: bool,
}

/// Where an activity stands, as the admin console shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleStatus {
    Upcoming,
    Live,
    SoldOut,
    Ended,
}

impl SaleStatus {
    pub fn label(self) -> &'static str {
        match self {
            SaleStatus::Upcoming => "upcoming",
            SaleStatus::Live => "live",
            SaleStatus::SoldOut => "sold out",
            SaleStatus::Ended => "ended",
        }
    }
}

/// An item of `GET /api/admin/activities`: the activity and its sale figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminActivity {
    #[serde(flatten)]
    pub activity: Activity,
    pub status: SaleStatus,
    /// Units still for sale (from the gate).
    pub remaining: i64,
    /// Units in persisted orders that are not cancelled or failed.
    pub sold: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminActivityList {
    pub activities: Vec<AdminActivity>,
}

/// One audited stock addition: how many units, by which merchant, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockAddition {
    pub added: i64,
    pub merchant: String,
    pub at: String,
}

/// `GET /api/admin/activities/{id}/stock-additions`, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockAdditions {
    pub additions: Vec<StockAddition>,
}

/// An order as `GET /api/admin/orders` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminOrder {
    pub order_id: i64,
    pub token: Token,
    pub activity_id: SaleId,
    pub user_id: UserId,
    pub username: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
    pub status: OrderStatus,
    pub reason: Option<String>,
    pub reserved_at: String,
    pub pay_by: Option<String>,
    pub paid_at: Option<String>,
    pub cancelled_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminOrderPage {
    pub orders: Vec<AdminOrder>,
    pub total: i64,
}

/// `GET /api/admin/activities/{id}/forecast`: the demand a sale can expect, from the interest
/// shown so far, and the settings that would serve it, each with its reason; after the sale, what
/// happened beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    /// Reminders asked now.
    pub reminders: i64,
    /// Renders of the sale's page by this platform before the start (a CDN's cached copies are
    /// not counted).
    pub page_views: i64,
    /// Shoppers in the waiting room's line (a sale with one).
    pub joined: i64,
    /// At least this many shoppers are expected at the start.
    pub expected_crowd: i64,
    /// The time to sell out at the recommended admission rate; `None`: the crowd expected would
    /// not buy every unit.
    pub expected_sell_out_ms: Option<i64>,
    pub recommended: Recommended,
    /// Why, one sentence a line.
    pub reasons: Vec<String>,
    /// The measured figures the advice rests on (`make bench`, docs/benchmarks.md).
    pub basis: ForecastBasis,
    /// After the sale: what happened.
    pub actual: Option<ForecastActual>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recommended {
    pub admit_per_sec: i64,
    pub stock_shards: i64,
    pub waiting_room: bool,
    /// A drawing's threshold for crowds from one network (`GET …/crowd`).
    #[serde(default)]
    pub crowd_threshold: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForecastBasis {
    /// In-stock buys one instance's box served per second.
    pub buys_per_sec: i64,
    /// CPU-ms one buy costs over every process.
    pub cpu_ms_per_buy: f64,
    /// Gate script calls one Redis (one stock shard) runs per second.
    pub gate_calls_per_sec: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForecastActual {
    pub attempts: i64,
    pub unique_buyers: i64,
    pub joined: Option<i64>,
    pub sold_out_after_ms: Option<i64>,
}

/// `GET /api/admin/shop` and the answer of `POST /api/admin/shop`: the merchant's shop and its
/// settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopSettings {
    pub id: i64,
    pub name: String,
    /// An IANA time zone ("Asia/Shanghai"): the console shows the shop's times in it.
    pub time_zone: String,
}

/// Body of `POST /api/admin/shop`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShopSettingsChange {
    pub time_zone: String,
}
