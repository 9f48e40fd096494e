//! Where things live in Redis. Every key starts with the instance's configured prefix.

use std::sync::Arc;

/// How long a reservation token's record lives: longer than the longest payment window (24 h),
/// so a token's record outlives its order's deadline.
pub const TOKEN_TTL_SECS: u64 = 3 * 24 * 3600;

#[derive(Clone)]
pub struct Keys {
    prefix: Arc<str>,
}

impl Keys {
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.into(),
        }
    }

    /// Units still for sale.
    pub fn stock(&self, activity: i64) -> String {
        format!("{}a:{activity}:stock", self.prefix)
    }
    /// Switches the gate reads on every buy (`paused`).
    pub fn meta(&self, activity: i64) -> String {
        format!("{}a:{activity}:meta", self.prefix)
    }
    /// Units each user holds (field: user id).
    pub fn holders(&self, activity: i64) -> String {
        format!("{}a:{activity}:users", self.prefix)
    }
    /// The reservation journal (a stream) the relay carries to RabbitMQ.
    pub fn journal(&self) -> String {
        format!("{}journal", self.prefix)
    }
    /// A reservation's status (hash: status, activity_id, user_id, quantity, order_id, pay_by, reason).
    pub fn token(&self, token: &str) -> String {
        format!("{}tok:{token}", self.prefix)
    }
    /// Set once the units of a failed or cancelled token went back on sale.
    pub fn returned(&self, token: &str) -> String {
        format!("{}ret:{token}", self.prefix)
    }
    pub fn captcha(&self, id: &str) -> String {
        format!("{}cap:{id}", self.prefix)
    }
    pub fn idempotency(&self, user: i64, key: &str) -> String {
        format!("{}idem:{user}:{key}", self.prefix)
    }
    /// Token bucket, strike counter and block flag of one client (`u:42` or `ip:1.2.3.4`).
    pub fn bucket(&self, who: &str) -> String {
        format!("{}bucket:{who}", self.prefix)
    }
    pub fn strikes(&self, who: &str) -> String {
        format!("{}strikes:{who}", self.prefix)
    }
    pub fn block(&self, who: &str) -> String {
        format!("{}block:{who}", self.prefix)
    }
    /// Pub/sub channel: an activity id whose sold-out flags every instance must clear.
    pub fn restock_channel(&self) -> String {
        format!("{}restock", self.prefix)
    }
    /// Buy attempts on an activity during one second (summed over instances).
    pub fn attempts(&self, activity: i64, second: i64) -> String {
        format!("{}a:{activity}:tries:{second}", self.prefix)
    }
    /// Never written: stands in for an optional key the script does not use this time.
    pub fn unused(&self) -> String {
        format!("{}unused", self.prefix)
    }
}
