//! Hot sales found and served from memory. A sale's page can go viral before its start, whatever
//! its merchant expected: each instance counts the views of every sale (its page, its card's stock
//! poll) in memory, adds its count to Redis once a second, and reads back the last complete second
//! over every instance. A sale seen at `SECKILL_HOT_VIEWS_PER_SEC` or more is hot for a minute
//! after: every instance then serves its state (the units left) from its own copy, refreshed once
//! a second, so that a crowd of views costs Redis one read a second per instance rather than one a
//! view; its forecast's page views are added once a second; and before its start its stock is put
//! in Redis if Redis lacks it. The dashboard shows each sale's views a second and whether it is hot.
//!
//! No page or poll waits on one shard: each shard's units are read within [`READ_DEADLINE`], and
//! a shard that does not answer in time (its master slow, dead, cut off or being failed over) is
//! counted as this instance last read it. Only a shard never read here fails the read.

use super::activities::ActivityCache;
use crate::{
    domain::{activity::stock, ApiResult},
    infra::{metrics::Metrics, redis::Redis},
};
use parking_lot::Mutex;
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

/// A sale stays hot this long after its last second at the threshold.
const HOT_FOR: Duration = Duration::from_secs(60);
/// Sales one instance counts in one second: past it, others wait for the next second (the
/// counts are of sales that exist, but a second is bounded whatever comes).
const MAX_COUNTED: usize = 10_000;
/// The counts of one second stay in Redis this long.
const KEEP_SECONDS_MS: i64 = 10_000;
/// A page's or poll's read of one shard waits this long at most (pages answer within 200 ms
/// through any Redis fault: docs/reliability.md). A shard answers in a millisecond or two; at
/// 100 ms a sale's page on a paused shard took up to 204 ms on a busy box (the wait and the
/// render), so the wait is half that.
pub const READ_DEADLINE: Duration = Duration::from_millis(50);
/// A shard's last read is kept this long after it was last asked for.
const LAST_READ_FOR: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct Heat {
    inner: Arc<Inner>,
}

struct Inner {
    threshold: i64,
    redis: Redis,
    db: PgPool,
    activities: ActivityCache,
    metrics: Arc<Metrics>,
    /// This instance's views this second, by sale.
    counts: Mutex<HashMap<i64, i64>>,
    /// Forecast page views of hot sales not yet added to Redis.
    views: Mutex<HashMap<i64, i64>>,
    /// What the last complete second said, by sale: its views over every instance, and until
    /// when it is hot.
    seen: Mutex<HashMap<i64, Seen>>,
    /// Hot sales' units left, as last read (`None`: Redis holds none of its shards).
    states: Mutex<HashMap<i64, Option<i64>>>,
    /// Each shard's units as last read here (`None`: not in Redis), and when it was last asked
    /// for: what a page counts for a shard that does not answer in time.
    last_read: Mutex<HashMap<(i64, i16), LastRead>>,
}

/// A shard's units as last read (`None`: not in Redis), and when they were last asked for.
type LastRead = (Option<i64>, Instant);

#[derive(Clone, Copy, Default)]
struct Seen {
    views_per_sec: i64,
    hot_until: Option<Instant>,
}

impl Seen {
    fn hot(&self, now: Instant) -> bool {
        self.hot_until.is_some_and(|until| until > now)
    }
}

impl Heat {
    pub fn new(
        threshold: u32,
        redis: Redis,
        db: PgPool,
        activities: ActivityCache,
        metrics: Arc<Metrics>,
    ) -> Heat {
        Heat {
            inner: Arc::new(Inner {
                threshold: i64::from(threshold.max(1)),
                redis,
                db,
                activities,
                metrics,
                counts: Mutex::default(),
                views: Mutex::default(),
                seen: Mutex::default(),
                states: Mutex::default(),
                last_read: Mutex::default(),
            }),
        }
    }

    /// One view of sale `id` (its page or its stock poll).
    pub fn count(&self, id: i64) {
        let mut counts = self.inner.counts.lock();
        if counts.len() < MAX_COUNTED || counts.contains_key(&id) {
            *counts.entry(id).or_default() += 1;
        }
    }

    /// What the last complete second said of sale `id`.
    fn seen(&self, id: i64) -> Seen {
        self.inner.seen.lock().get(&id).copied().unwrap_or_default()
    }

    /// Whether sale `id` is hot now.
    pub fn is_hot(&self, id: i64) -> bool {
        self.seen(id).hot(Instant::now())
    }

    /// Sale `id`'s views a second over every instance (the last complete second), and whether it
    /// is hot.
    pub fn of(&self, id: i64) -> (i64, bool) {
        let seen = self.seen(id);
        (seen.views_per_sec, seen.hot(Instant::now()))
    }

    /// A view of a hot sale's page for its forecast, added to Redis with the next second's counts;
    /// `false` for a sale that is not hot (its view is counted as it comes).
    pub fn count_view_later(&self, id: i64) -> bool {
        if !self.is_hot(id) {
            return false;
        }
        *self.inner.views.lock().entry(id).or_default() += 1;
        true
    }

    /// Sale `id`'s units left over its `shards`: a hot sale's from this instance's copy (at most
    /// a second old), any other's from Redis.
    pub async fn units_left(&self, id: i64, shards: i16) -> redis::RedisResult<Option<i64>> {
        let hot = self.is_hot(id);
        if hot {
            if let Some(state) = self.inner.states.lock().get(&id) {
                self.inner.metrics.sale_state_read("memory");
                return Ok(*state);
            }
        }
        self.inner.metrics.sale_state_read("redis");
        let state = self.read_shards(id, shards).await?;
        if hot {
            self.inner.states.lock().insert(id, state);
        }
        Ok(state)
    }

    /// Sale `id`'s units left over its `shards` (`None`: Redis holds none of them), each shard
    /// read within [`READ_DEADLINE`] and, when it does not answer in time, counted as last read
    /// here (`sale_state_reads{answered="last_read"}`). A shard never read here that does not
    /// answer fails the read.
    async fn read_shards(&self, id: i64, shards: i16) -> redis::RedisResult<Option<i64>> {
        let inner = &self.inner;
        let read = stock::shard_stock_within(&inner.redis, id, shards, READ_DEADLINE).await;
        let now = Instant::now();
        let mut last_read = inner.last_read.lock();
        let mut units = Vec::with_capacity(read.len());
        let mut stale = false;
        for (shard, answer) in (0..shards.max(1)).zip(read) {
            match answer {
                Ok(n) => {
                    last_read.insert((id, shard), (n, now));
                    units.push(n);
                }
                Err(e) => match last_read.get_mut(&(id, shard)) {
                    Some((n, asked)) => {
                        *asked = now;
                        stale = true;
                        units.push(*n);
                    }
                    None => return Err(e),
                },
            }
        }
        drop(last_read);
        if stale {
            inner.metrics.sale_state_read("last_read");
        }
        Ok(units
            .iter()
            .any(Option::is_some)
            .then(|| units.iter().flatten().map(|n| (*n).max(0)).sum()))
    }

    /// Every second, for as long as the process runs: this instance's counts out, every
    /// instance's in, hot sales' states refreshed.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.step().await {
                tracing::warn!(error = ?e, "sharing the sales' heat");
            }
        }
    }

    async fn step(&self) -> ApiResult<()> {
        let inner = &self.inner;
        inner
            .last_read
            .lock()
            .retain(|_, (_, asked)| asked.elapsed() < LAST_READ_FOR);
        let now_ms = chrono::Utc::now().timestamp_millis();
        let (this, last) = (
            inner.redis.keys.heat(now_ms / 1000),
            inner.redis.keys.heat(now_ms / 1000 - 1),
        );
        let counts = std::mem::take(&mut *inner.counts.lock());
        let views = std::mem::take(&mut *inner.views.lock());
        let mut pipe = redis::pipe();
        for (id, n) in &counts {
            pipe.cmd("HINCRBY").arg(&this).arg(id).arg(n).ignore();
        }
        if !counts.is_empty() {
            pipe.cmd("PEXPIRE").arg(&this).arg(KEEP_SECONDS_MS).ignore();
        }
        let mut conn = inner.redis.conn();
        if !counts.is_empty() {
            pipe.query_async::<()>(&mut conn).await?;
        }
        // Page views of hot sales for their forecast, a command each, once a second.
        for (id, n) in views {
            let key = inner.redis.keys.views(id);
            redis::cmd("INCRBY")
                .arg(&key)
                .arg(n)
                .query_async::<()>(&mut conn)
                .await?;
        }
        let seen: HashMap<i64, i64> = redis::cmd("HGETALL")
            .arg(&last)
            .query_async(&mut conn)
            .await?;
        let now = Instant::now();
        let mut turned_hot = Vec::new();
        {
            let mut all = inner.seen.lock();
            all.retain(|id, s| seen.contains_key(id) || s.hot(now));
            for (id, views) in &seen {
                let s = all.entry(*id).or_default();
                s.views_per_sec = *views;
                if *views >= inner.threshold {
                    if !s.hot(now) {
                        turned_hot.push(*id);
                    }
                    s.hot_until = Some(now + HOT_FOR);
                }
            }
            for (id, s) in all.iter_mut() {
                if !seen.contains_key(id) {
                    s.views_per_sec = 0;
                }
            }
        }
        for id in turned_hot {
            tracing::info!(
                activity.id = id,
                "a sale turned hot: its state is served from memory"
            );
        }
        self.refresh_states().await
    }

    /// Each hot sale's units left read once for every view of the next second; before its start,
    /// its stock put in Redis if Redis lacks it.
    async fn refresh_states(&self) -> ApiResult<()> {
        let inner = &self.inner;
        let hot: Vec<i64> = {
            let now = Instant::now();
            let seen = inner.seen.lock();
            seen.iter()
                .filter(|(_, s)| s.hot(now))
                .map(|(id, _)| *id)
                .collect()
        };
        inner.states.lock().retain(|id, _| hot.contains(id));
        for id in hot {
            let row = inner.activities.get(&inner.db, id).await?;
            inner.metrics.sale_state_read("redis");
            let mut state = self.read_shards(id, row.stock_shards).await?;
            if state.is_none() && chrono::Utc::now() < row.starts_at {
                stock::warm(&inner.redis, &row, (row.total_stock - row.sold).max(0)).await?;
                state = stock::in_redis(&inner.redis, id, row.stock_shards).await?;
            }
            inner.states.lock().insert(id, state);
        }
        Ok(())
    }
}
