//! The product's own vocabulary, free of the web layer: activities and their rules, accounts, shops,
//! sessions, the audit log and passwords, payments, the public report of a sale, and the error codes every room answers with. Built on `infra` only.

pub mod account;
pub mod activity;
pub mod admin_requests;
pub(crate) mod audit;
pub(crate) mod cord;
pub(crate) mod crowd;
pub(crate) mod drawing;
pub(crate) mod error;
pub(crate) mod forecast;
pub mod order;
pub(crate) mod password;
pub mod payment;
pub(crate) mod reminder;
pub(crate) mod report;
pub(crate) mod sessions;
pub mod shop;

pub use error::{ApiError, ApiResult};

use chrono::{DateTime, SecondsFormat, Utc};

/// Times as the API writes them: RFC 3339, UTC, milliseconds.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
