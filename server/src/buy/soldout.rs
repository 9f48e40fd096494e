//! This instance's sold-out flags: once the gate says an activity is sold out, further buys are
//! answered here without a Redis round trip. A flag is cleared by the restock broadcast (Redis
//! pub/sub) that adding or returning stock sends to every instance, and it also lapses after a
//! short while, so that a broadcast missed during a reconnect costs one round trip, not sales.

use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
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
            .expect("flags lock")
            .get(&activity)
            .is_some_and(|at| at.elapsed() < FLAG_LIFETIME)
    }

    pub fn set(&self, activity: i64) {
        self.flags
            .write()
            .expect("flags lock")
            .insert(activity, Instant::now());
    }

    pub fn clear(&self, activity: i64) {
        self.flags.write().expect("flags lock").remove(&activity);
    }

    /// Tells every instance (this one included) that `activity` has stock again.
    pub async fn announce(
        &self,
        redis: &mut ConnectionManager,
        activity: i64,
    ) -> redis::RedisResult<()> {
        self.clear(activity);
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&*self.channel)
            .arg(activity)
            .query_async(redis)
            .await?;
        Ok(())
    }

    /// Listens for restock broadcasts until the process ends, resubscribing after any failure.
    pub async fn listen(self, client: redis::Client) {
        loop {
            if let Err(e) = self.listen_once(&client).await {
                tracing::warn!(error = %e, "restock subscription lost; resubscribing");
            }
            // Whatever was announced meanwhile is lost: forget every flag rather than miss one.
            self.flags.write().expect("flags lock").clear();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn listen_once(&self, client: &redis::Client) -> redis::RedisResult<()> {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(&*self.channel).await?;
        let mut messages = pubsub.on_message();
        while let Some(msg) = messages.next().await {
            if let Ok(id) = msg.get_payload::<i64>() {
                self.clear(id);
            }
        }
        Ok(())
    }
}
