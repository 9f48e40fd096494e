//! Each sale's figures for the operator, read every second by every process that runs the
//! pipeline: units left, the waiting room's line, the age of the oldest reservation still in a
//! journal and of the oldest acknowledged buy not yet an order (docs/operations.md "Metrics").
//! A sale that ended loses its series at the next round, so they never pile up sale after sale.

use crate::{
    buy::queue::LineMeta,
    domain::activity::{self, stock::shard_stock, ActivityRow},
    infra::{keys::ShardKeys, metrics::Metrics, redis::Redis},
};
use redis::streams::StreamRangeReply;
use sqlx::PgPool;
use std::{collections::HashSet, sync::Arc, time::Duration};

#[derive(Clone)]
pub struct SaleGauges {
    pub db: PgPool,
    pub redis: Redis,
    pub metrics: Arc<Metrics>,
}

/// Seconds from `ms` (a Unix time in milliseconds) to now, never below 0.
fn age(ms: i64) -> f64 {
    ((chrono::Utc::now().timestamp_millis() - ms).max(0)) as f64 / 1000.0
}

/// The oldest of the shards' oldest, as an age; 0 when every shard is empty.
fn oldest(times: impl IntoIterator<Item = Option<i64>>) -> f64 {
    times.into_iter().flatten().min().map_or(0.0, age)
}

impl SaleGauges {
    pub async fn run_periodically(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shown: HashSet<i64> = HashSet::new();
        loop {
            tick.tick().await;
            match activity::live(&self.db).await {
                Ok(rows) => {
                    let live: HashSet<i64> = rows.iter().map(|row| row.id).collect();
                    for ended in shown.difference(&live) {
                        self.metrics.sales.remove(*ended);
                    }
                    for row in &rows {
                        self.measure(row).await;
                    }
                    shown = live;
                }
                Err(e) => tracing::debug!(error = ?e, "sale gauges: the live sales not read"),
            }
        }
    }

    /// One sale's four figures; a figure whose read fails keeps its last value this round.
    async fn measure(&self, row: &ActivityRow) {
        let shards = self.redis.keys.shards(row.id, row.stock_shards);
        let units = shard_stock(&self.redis, row.id, row.stock_shards)
            .await
            .ok()
            .map(|stock| stock.into_iter().flatten().sum());
        let line = if row.waiting_room {
            LineMeta::read(&self.redis, &self.redis.keys.queue(row.id))
                .await
                .ok()
                .map(|meta| meta.waiting)
        } else {
            Some(0)
        };
        let (journal, unsettled) = futures_util::future::join(
            self.oldest_journal_entries(&shards),
            self.oldest_unsettled(&shards),
        )
        .await;
        self.metrics.sales.set(
            row.id,
            units,
            line,
            journal.ok().map(oldest),
            unsettled.ok().map(oldest),
        );
    }

    /// Each journal's oldest entry's time (its id's milliseconds), both journals of every shard:
    /// the entries the broker confirmed are trimmed away (`ack.lua`), so the oldest left is the
    /// oldest not carried.
    async fn oldest_journal_entries(
        &self,
        shards: &[ShardKeys],
    ) -> redis::RedisResult<Vec<Option<i64>>> {
        let reads = shards
            .iter()
            .flat_map(|shard| shard.journals())
            .map(|journal| {
                let mut conn = self.redis.conn();
                async move {
                    let first: StreamRangeReply = redis::cmd("XRANGE")
                        .arg(&journal)
                        .arg("-")
                        .arg("+")
                        .arg("COUNT")
                        .arg(1)
                        .query_async(&mut conn)
                        .await?;
                    Ok(first.ids.first().and_then(|entry| {
                        entry.id.split('-').next().and_then(|ms| ms.parse().ok())
                    }))
                }
            });
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect()
    }

    /// Each shard's oldest unsettled token's reservation time (its score, ms).
    async fn oldest_unsettled(&self, shards: &[ShardKeys]) -> redis::RedisResult<Vec<Option<i64>>> {
        let reads = shards.iter().map(|shard| {
            let mut conn = self.redis.conn();
            let unsettled = shard.unsettled();
            async move {
                let first: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(&unsettled)
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await?;
                Ok(first.first().map(|(_, ms)| *ms as i64))
            }
        });
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect()
    }
}
