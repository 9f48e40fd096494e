//! This instance's sold-out flags: once the gate says an activity is sold out, further buys are
//! answered here without a Redis round trip. A flag is cleared by the restock broadcast (Redis
//! pub/sub, listened to in `startup/workers.rs`) that adding or returning stock sends to every instance,
//! and it also lapses after a short while, so that a broadcast missed during a reconnect costs one
//! round trip, not sales.

use crate::infra::redis::Conn;
use parking_lot::RwLock;
use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

const FLAG_LIFETIME: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct SoldOut {
    flags: Arc<RwLock<HashMap<i64, Instant>>>,
    channel: Arc<str>,
}

impl SoldOut {
    pub fn new(channel: String) -> SoldOut {
        SoldOut {
            flags: Arc::default(),
            channel: channel.into(),
        }
    }

    pub fn is_set(&self, activity: i64) -> bool {
        self.flags
            .read()
            .get(&activity)
            .is_some_and(|at| at.elapsed() < FLAG_LIFETIME)
    }

    pub fn set(&self, activity: i64) {
        self.flags.write().insert(activity, Instant::now());
    }

    pub fn clear(&self, activity: i64) {
        self.flags.write().remove(&activity);
    }

    /// Tells every instance (this one included) that `activity` has stock again.
    pub async fn announce(&self, redis: &mut Conn, activity: i64) -> redis::RedisResult<()> {
        self.clear(activity);
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&*self.channel)
            .arg(activity)
            .query_async(redis)
            .await?;
        Ok(())
    }

    /// A restock broadcast arrived.
    pub fn on_message(&self, payload: &str) {
        if let Ok(id) = payload.parse::<i64>() {
            self.clear(id);
        }
    }

    /// The subscription was lost: whatever was announced meanwhile is lost too, so every flag
    /// is forgotten rather than one missed.
    pub fn reset(&self) {
        self.flags.write().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_holds_until_a_broadcast_clears_it_or_a_lost_subscription_forgets_every_flag() {
        let flags = SoldOut::new("restock".into());
        flags.set(1);
        flags.set(2);
        assert!(flags.is_set(1) && flags.is_set(2) && !flags.is_set(3));
        flags.on_message("1");
        flags.on_message("not a sale");
        assert!(!flags.is_set(1), "the broadcast cleared it");
        assert!(flags.is_set(2), "only that sale's");
        // Resubscribed: whatever was announced meanwhile is unknown, so nothing is trusted.
        flags.reset();
        assert!(!flags.is_set(2));
        // A flag lapses by itself: one set long ago is not set.
        flags
            .flags
            .write()
            .insert(4, Instant::now() - FLAG_LIFETIME);
        assert!(!flags.is_set(4));
    }
}
