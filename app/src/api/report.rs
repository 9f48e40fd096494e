//! A sale's public report (docs/api.md "Storefront").

use super::SaleId;
use serde::{Deserialize, Serialize};

/// `GET /api/activities/{id}/report`: the public report of an ended sale. Every figure is the
/// sale's as a whole; no shopper's identity is in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaleReport {
    pub activity_id: SaleId,
    pub title: String,
    pub starts_at: String,
    pub ends_at: String,
    /// When this report was computed (the orders' figures move while payment windows close).
    pub generated_at: String,
    pub units: UnitsReport,
    pub orders: OrdersReport,
    /// Distinct shoppers with a confirmed or paid order.
    pub unique_buyers: i64,
    /// From the start to the reservation that took the last unit; `None`: it did not sell out.
    pub sold_out_after_ms: Option<i64>,
    pub attempts: AttemptsReport,
    /// The waiting room's figures (a sale with one).
    pub waiting_room: Option<LineReport>,
    /// The drawing's seed and its fingerprint, published before the start, so anyone can
    /// re-check places (`GET /api/activities/{id}/drawing` while it is kept).
    pub drawing: Option<DrawingReport>,
    /// Attempts and units sold over the sale, in equal steps from its start.
    pub timeline: Vec<TimelineStep>,
    /// The emergency cord's pulls that changed this sale (a stop, its release, a fail-open),
    /// oldest first.
    #[serde(default)]
    pub cord: Vec<super::CordReportEntry>,
    /// A drawing that grouped its entries by network: its policy, threshold and what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crowd: Option<super::CrowdOutcome>,
}

/// Units, as PostgreSQL holds them: the proof that nothing was oversold is
/// `in_orders == sold <= on_sale`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitsReport {
    /// The sale's stock (`activities.total_stock`).
    pub on_sale: i64,
    /// The sale's count of units sold (`activities.sold`, under `CHECK (sold <= total_stock)`).
    pub sold: i64,
    /// The sum of the quantities of its confirmed and paid orders.
    pub in_orders: i64,
    /// Whether `in_orders == sold <= on_sale`.
    pub not_oversold: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrdersReport {
    /// Orders written to PostgreSQL (every status).
    pub persisted: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
}

/// Buy attempts, as the instances counted them, by how they were answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptsReport {
    pub total: i64,
    pub accepted: i64,
    pub refused: RefusalsReport,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalsReport {
    /// A failed image captcha or proof of work.
    pub bot_check: i64,
    /// The per-shopper limit reached.
    pub limit: i64,
    pub sold_out: i64,
    pub blocked: i64,
    pub rate_limited: i64,
    /// Everything else (paused, not admitted, a bad path, busy, …).
    pub other: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineReport {
    /// Shoppers who held a place when the sale ended.
    pub joined: i64,
    pub admitted: i64,
    /// Admissions that lapsed unclaimed.
    pub lapsed: i64,
    /// Waits from joining (the start, for a place drawn before it) to the turn, in ms, to
    /// within 9 %; `None` when nobody reached their turn.
    pub wait_p50_ms: Option<i64>,
    pub wait_p90_ms: Option<i64>,
    pub wait_p99_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawingReport {
    pub commitment: String,
    pub seed: String,
}

/// One step of the timeline: from `from_ms` after the start, for the step's length.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineStep {
    pub from_ms: i64,
    pub attempts: i64,
    /// Units reserved in the step (by the orders' reservation times).
    pub sold: i64,
}
