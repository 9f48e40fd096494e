//! Buy attempts per activity and second, for the merchant's live dashboard. Every attempt counts,
//! including those answered in-process (sold out, bad path), so each instance counts in memory
//! (one uncontended lock, no Redis round trip on the hot path) and adds its counts to per-second
//! Redis counters four times a second; the dashboard reads the last complete second, summed over
//! every instance behind the load balancer.

use crate::infra::redis::Redis;
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
    pub async fn flush(&self, redis: &Redis) -> redis::RedisResult<()> {
        let counts: Vec<((i64, i64), u64)> = self.take().into_iter().collect();
        if counts.is_empty() {
            return Ok(());
        }
        let written = redis
            .by_slot(
                &counts,
                |&((activity, second), _)| Some(redis.keys.attempts(activity, second)),
                |pipe, key, &(_, n)| {
                    pipe.cmd("INCRBY")
                        .arg(key)
                        .arg(n)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(key)
                        .arg(KEEP_SECS)
                        .ignore();
                },
            )
            .await;
        if let Err(e) = written {
            // Some groups may have been written: counted twice rather than lost, on a dashboard.
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
    pub async fn run(self, redis: Redis) {
        let mut every = tokio::time::interval(FLUSH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = self.flush(&redis).await {
                tracing::warn!(error = %e, "buy attempt counts not written; kept for the next flush");
            }
        }
    }
}

/// Buy attempts on `activity` during the last complete second, over all instances.
pub async fn last_second(redis: &Redis, activity: i64) -> redis::RedisResult<i64> {
    let second = chrono::Utc::now().timestamp() - 1;
    let n: Option<i64> = redis::cmd("GET")
        .arg(redis.keys.attempts(activity, second))
        .query_async(&mut redis.conn())
        .await?;
    Ok(n.unwrap_or(0))
}
