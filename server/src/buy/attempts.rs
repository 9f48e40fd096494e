//! Buy attempts per activity and second, for the merchant's live dashboard. Every attempt counts,
//! including those answered in-process (sold out, bad path), so each instance counts in memory
//! (one uncontended lock, no Redis round trip on the hot path) and adds its counts to per-second
//! Redis counters four times a second; the dashboard reads the last complete second, summed over
//! every instance behind the load balancer.

use crate::infra::keys::Keys;
use redis::aio::ConnectionManager;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

/// How long a per-second counter is kept in Redis.
const KEEP_SECS: i64 = 600;
const FLUSH_EVERY: Duration = Duration::from_millis(250);

#[derive(Clone, Default)]
pub struct Attempts {
    counts: Arc<Mutex<HashMap<(i64, i64), u64>>>,
}

impl Attempts {
    /// Counts one buy attempt on `activity` now.
    pub fn record(&self, activity: i64) {
        let second = chrono::Utc::now().timestamp();
        *self
            .counts
            .lock()
            .expect("attempts lock")
            .entry((activity, second))
            .or_default() += 1;
    }

    fn take(&self) -> HashMap<(i64, i64), u64> {
        std::mem::take(&mut *self.counts.lock().expect("attempts lock"))
    }

    /// Writes this instance's counts to Redis; on failure they are kept for the next flush.
    pub async fn flush(
        &self,
        redis: &mut ConnectionManager,
        keys: &Keys,
    ) -> redis::RedisResult<()> {
        let counts = self.take();
        if counts.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (&(activity, second), &n) in &counts {
            let key = keys.attempts(activity, second);
            pipe.cmd("INCRBY")
                .arg(&key)
                .arg(n)
                .ignore()
                .cmd("EXPIRE")
                .arg(&key)
                .arg(KEEP_SECS)
                .ignore();
        }
        if let Err(e) = pipe.query_async::<()>(redis).await {
            let oldest = chrono::Utc::now().timestamp() - KEEP_SECS;
            let mut kept = self.counts.lock().expect("attempts lock");
            for ((activity, second), n) in counts.into_iter().filter(|((_, s), _)| *s > oldest) {
                *kept.entry((activity, second)).or_default() += n;
            }
            return Err(e);
        }
        Ok(())
    }

    /// Flushes until the process ends.
    pub async fn run(self, mut redis: ConnectionManager, keys: Keys) {
        let mut every = tokio::time::interval(FLUSH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = self.flush(&mut redis, &keys).await {
                tracing::warn!(error = %e, "buy attempt counts not written; kept for the next flush");
            }
        }
    }
}

/// Buy attempts on `activity` during the last complete second, over all instances.
pub async fn last_second(
    redis: &mut ConnectionManager,
    keys: &Keys,
    activity: i64,
) -> redis::RedisResult<i64> {
    let second = chrono::Utc::now().timestamp() - 1;
    let n: Option<i64> = redis::cmd("GET")
        .arg(keys.attempts(activity, second))
        .query_async(redis)
        .await?;
    Ok(n.unwrap_or(0))
}
