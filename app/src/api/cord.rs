//! The emergency cord (docs/api.md "The cord"): stopping every sale of a shop or of the
//! platform at once, and a sale's fail-open; every pull is audited.

use super::{CordAction, SaleId};
use serde::{Deserialize, Serialize};

/// The most characters a pull's reason may have.
pub const MAX_REASON_CHARS: usize = 500;

/// `POST /api/admin/cord/stop` and `/release`: why (1–500 characters, kept in the audit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CordRequest {
    pub reason: String,
}

/// `POST /api/operator/cord/stop` and `/release`: a shop's sales, or with no `shop_id` the
/// whole platform's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorCordRequest {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shop_id: Option<i64>,
}

/// `POST /api/admin/activities/{id}/fail-open` (and the operator's): on, every shopper of the
/// sale goes past its bot check and waiting room to the gate; off, both are in force again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailOpenRequest {
    pub on: bool,
    pub reason: String,
}

/// One pull of the cord, as the audit keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CordPull {
    pub id: i64,
    pub at: String,
    /// Who pulled it (a username, or `cli`).
    pub actor: String,
    pub action: CordAction,
    /// A stop or its release: the shop it holds; `None` with no `activity_id`: the platform.
    pub shop_id: Option<i64>,
    /// A fail-open or its end: the sale.
    pub activity_id: Option<SaleId>,
    pub reason: String,
    /// The sales whose state it changed (none: it found them so already).
    pub sales: Vec<SaleId>,
}

/// `GET /api/admin/cord` and `GET /api/operator/cord`: the stops in force and the newest pulls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CordState {
    /// Every sale of the platform stopped.
    pub platform_stopped: bool,
    /// The shops whose sales are stopped (a merchant sees only their own).
    pub shops_stopped: Vec<i64>,
    /// Newest first (a merchant sees their shop's and the platform's).
    pub pulls: Vec<CordPull>,
}

/// A pull as a sale's public report shows it: what and when, not who or why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CordReportEntry {
    pub at: String,
    pub action: CordAction,
    /// `platform`, `shop` or `sale`: whom the pull was for.
    pub scope: String,
}
