//! The JSON API's request and response bodies, shared by the server and the browser.
//! Plain serde types: fixed-width integers, money in integer cents, no secrets in responses.

use serde::{Deserialize, Serialize};

// By area, as docs/api.md's sections go; every type is `app::api::…` (one re-export each).
mod accounts;
mod admin;
mod cord;
mod ids;
mod line;
mod orders;
mod report;
mod sales;
mod states;

pub use accounts::*;
pub use admin::*;
pub use cord::*;
pub use ids::{home_shard, BadId, SaleId, Token, UserId, MAX_SHARDS};
pub use line::*;
pub use orders::*;
pub use report::*;
pub use sales::*;
pub use states::{
    CordAction, CrowdPolicy, ErrorCode, LineState, OrderStatus, QueueState, UnknownState, ACCEPTED,
};

/// Every JSON error body of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}

impl ErrorBody {
    /// The code, when it is one this version knows (a newer server may add codes).
    pub fn code(&self) -> Option<ErrorCode> {
        self.error.parse().ok()
    }
}
