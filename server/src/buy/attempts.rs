//! Buy attempts per activity and second: for the merchant's live dashboard (all of them, in
//! Redis for ten minutes) and, by outcome, for the sale's public report (in PostgreSQL for good).
//! Every attempt counts, including those answered in-process (sold out, bad path), so each
//! instance counts in memory (a sharded map: buys on different shards never wait for each other,
//! and no round trip on the hot path), adds its
//! counts to per-second Redis counters four times a second, and its counts by outcome to
//! `sale_attempts` once a second; the dashboard reads the last complete second, summed over every
//! instance behind the load balancer.

use crate::infra::redis::Redis;
use dashmap::DashMap;
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc, time::Duration};

/// How long a per-second counter is kept in Redis.
const KEEP_SECS: i64 = 600;
const FLUSH_EVERY: Duration = Duration::from_millis(250);
/// Redis flushes per PostgreSQL one.
const FLUSHES_PER_TALLY: u32 = 4;
/// Seconds by outcome an instance keeps while PostgreSQL cannot take them (beyond: dropped, and
/// said so), so that an outage costs bounded memory.
const MAX_TALLY: usize = 100_000;

/// (activity, second) → attempts; (activity, second, outcome) → attempts.
#[derive(Default)]
struct Counts {
    per_second: DashMap<(i64, i64), u64>,
    by_outcome: DashMap<(i64, i64, &'static str), u64>,
}

#[derive(Clone, Default)]
pub struct Attempts {
    counts: Arc<Counts>,
    /// Each sale's last second as the dashboard last read it here: what it shows while the
    /// counter's shard does not answer in time.
    last_read: Arc<DashMap<i64, i64>>,
}

/// Everything counted so far, taken out of `map`: each key removed on its own, so that a count
/// added meanwhile lands in a new entry, taken next time, never lost.
fn drain<K: Copy + Eq + std::hash::Hash>(map: &DashMap<K, u64>) -> HashMap<K, u64> {
    let keys: Vec<K> = map.iter().map(|e| *e.key()).collect();
    keys.into_iter().filter_map(|k| map.remove(&k)).collect()
}

impl Attempts {
    /// Counts one buy attempt on `activity` now, answered `outcome` (`accepted` or the error
    /// code).
    pub fn record(&self, activity: i64, outcome: &'static str) {
        let second = chrono::Utc::now().timestamp();
        *self
            .counts
            .per_second
            .entry((activity, second))
            .or_default() += 1;
        *self
            .counts
            .by_outcome
            .entry((activity, second, outcome))
            .or_default() += 1;
    }

    fn take(&self) -> HashMap<(i64, i64), u64> {
        drain(&self.counts.per_second)
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
            for ((activity, second), n) in counts.into_iter().filter(|((_, s), _)| *s > oldest) {
                *self
                    .counts
                    .per_second
                    .entry((activity, second))
                    .or_default() += n;
            }
            return Err(e);
        }
        Ok(())
    }

    /// Adds this instance's counts by outcome to `sale_attempts` (one statement); on failure
    /// they are kept for the next time, up to [`MAX_TALLY`] seconds by outcome.
    pub async fn tally(&self, db: &PgPool) -> sqlx::Result<()> {
        let taken = drain(&self.counts.by_outcome);
        if taken.is_empty() {
            return Ok(());
        }
        let (mut ids, mut seconds, mut outcomes, mut ns) = (vec![], vec![], vec![], vec![]);
        for (&(id, second, outcome), &n) in &taken {
            ids.push(id);
            seconds.push(second as f64);
            outcomes.push(outcome.to_string());
            ns.push(n as i64);
        }
        let written = sqlx::query!(
            "INSERT INTO sale_attempts (activity_id, second, outcome, n)
             SELECT id, to_timestamp(second), outcome, n
             FROM unnest($1::bigint[], $2::float8[], $3::text[], $4::bigint[]) AS t(id, second, outcome, n)
             ON CONFLICT (activity_id, second, outcome) DO UPDATE SET n = sale_attempts.n + EXCLUDED.n",
            &ids,
            &seconds,
            &outcomes,
            &ns
        )
        .execute(db)
        .await;
        if let Err(e) = written {
            let counts = &self.counts;
            if counts.by_outcome.len() + taken.len() > MAX_TALLY {
                tracing::error!(
                    dropped = taken.len(),
                    "buy attempt tallies dropped: PostgreSQL has been unreachable too long"
                );
            } else {
                for (key, n) in taken {
                    *counts.by_outcome.entry(key).or_default() += n;
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Flushes until the process ends.
    pub async fn run(self, redis: Redis, db: PgPool) {
        let mut every = tokio::time::interval(FLUSH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for tick in 1u32.. {
            every.tick().await;
            if let Err(e) = self.flush(&redis).await {
                tracing::warn!(error = %e, "buy attempt counts not written; kept for the next flush");
            }
            if tick.is_multiple_of(FLUSHES_PER_TALLY) {
                if let Err(e) = self.tally(&db).await {
                    tracing::warn!(error = %e, "buy attempt tallies not written; kept for the next time");
                }
            }
        }
    }
}

impl Attempts {
    /// Buy attempts on `activity` during the last complete second, over all instances, read
    /// within `deadline`; past it (the counter's shard slow or away), the figure last read here.
    pub async fn last_second(
        &self,
        redis: &Redis,
        activity: i64,
        deadline: Duration,
    ) -> redis::RedisResult<i64> {
        let second = chrono::Utc::now().timestamp() - 1;
        let mut get = redis::cmd("GET");
        get.arg(redis.keys.attempts(activity, second));
        let mut conn = redis.conn();
        let read = get.query_async::<Option<i64>>(&mut conn);
        let failed = match tokio::time::timeout(deadline, read).await {
            Ok(Ok(n)) => {
                let n = n.unwrap_or(0);
                if self.last_read.len() > 10_000 {
                    self.last_read.clear();
                }
                self.last_read.insert(activity, n);
                return Ok(n);
            }
            Ok(Err(e)) => e,
            Err(_) => redis::RedisError::from((
                redis::ErrorKind::Io,
                "the counter's shard did not answer in time",
            )),
        };
        self.last_read.get(&activity).map(|n| *n).ok_or(failed)
    }
}
