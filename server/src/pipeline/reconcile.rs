//! Redis against the database. At start-up, and whenever an activity's stock is missing from
//! Redis (it lost its data), the stock is rebuilt from the database once the reservation queue has
//! drained and nothing is owed: remaining = total_stock − sold − reservations still in flight.
//! Periodically (and on `server reconcile`) each live activity is compared; drift is logged and
//! exported, and repaired where that is safe.
//!
//! The database moves first: units added, or a cancelled order's units, are committed there and
//! reach Redis afterwards (each once, however often retried or late), owed until they do. So the
//! two are compared only over one instant of the database's figures, taken before and after
//! Redis is read (`StockLook`):
//! - Redis above `total_stock − sold` can never be right when no move (addition, cancellation)
//!   landed between the two reads, measured against the figures read *before* Redis: every unit
//!   Redis gained was in the database before, and reservations only lower Redis before they
//!   raise `sold`. It is lowered at once. Not against the figures read after: a unit bought and
//!   written while Redis is read is in both, and the compare-and-set would take it from a shard
//!   the buy never touched (a crowd's reconciler did, two units short of a sold-out sale).
//! - Redis below it is normal while reservations are in flight or moves are owed; it is raised only
//!   when the figures held still across the Redis read (the same sale moves, the same stock and
//!   sold), nothing was owed when the read began and no granted token was unsettled during it
//!   (empty journal, empty queue). The unsettled tokens cover what neither the journal nor the
//!   queue shows: a batch in a persister's hands (delivered, not acknowledged).
//!
//! Every repair is a compare-and-set, so a buy that lands in between wins and the repair waits
//! for the next round. Additions that Redis has not taken yet are carried over first.

use crate::infra::scripts;
use crate::{
    domain::{
        activity::{self, ActivityRow},
        order,
    },
    infra::{
        broker::{Broker, Topology},
        keys,
        metrics::Metrics,
        redis::Redis,
    },
};
use anyhow::Context;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

/// What reconciliation reads and repairs.
#[derive(Clone)]
pub struct Reconciler {
    pub db: PgPool,
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    /// Called between the reads of a round, for tests that put a move there; `None` in service.
    pub between_reads: Option<BetweenReads>,
}

/// Where a round stands when `between_reads` is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The database's figures are read; Redis is next.
    Database,
    /// Redis is read; the database's figures are read again next.
    Redis,
}

/// A test's move between two reads of a round.
pub type BetweenReads =
    Arc<dyn Fn(Read) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

/// A granted token unsettled for longer than this is looked up in the database.
const STALE_UNSETTLED_MS: i64 = 5_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub activity_id: i64,
    pub redis_remaining: Option<i64>,
    /// `total_stock − sold` in the database.
    pub expected: i64,
    /// Redis remaining − expected (missing counts as 0).
    pub drift: i64,
    pub repaired: bool,
}

impl Reconciler {
    /// Reservations that left Redis but are not orders yet: the tokens the gates granted that
    /// are neither orders nor returned (wherever they are: journal, queue, or a persister
    /// holding a batch it cannot write yet), journal entries (of every shard of every sale the
    /// relay reads, and the legacy journal) and ready messages on the reservation queue.
    async fn in_flight(&self) -> anyhow::Result<u64> {
        let sales = activity::recent_shards(&self.db).await?;
        let shards: Vec<keys::ShardKeys> = sales
            .iter()
            .flat_map(|&(id, shards)| self.redis.keys.shards(id, shards))
            .collect();
        let unsettled = self.unsettled(&shards).await?;
        let journals: Vec<String> = shards
            .iter()
            .flat_map(|s| s.journals())
            .chain([self.redis.keys.legacy_journal()])
            .collect();
        let journal = super::journal::entries(&self.redis, &journals).await?;
        let channel = self.broker.channel(&self.topology).await?;
        let mut queued = 0;
        for name in &self.topology.reservation_queues {
            let queue = channel
                .queue_declare(
                    name.as_str().into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    lapin::types::FieldTable::default(),
                )
                .await?;
            queued += u64::from(queue.message_count());
        }
        let _ = channel.close(200, "done".into()).await;
        Ok(unsettled + journal + queued)
    }

    /// How many granted tokens are not settled yet. Entries older than a few seconds are first
    /// looked up in the database: a removal lost with a Redis failover (the order written, its
    /// entry still here) would otherwise hold the stock down for good.
    async fn unsettled(&self, shards: &[keys::ShardKeys]) -> anyhow::Result<u64> {
        let old = chrono::Utc::now().timestamp_millis() - STALE_UNSETTLED_MS;
        let mut total = 0;
        for shard in shards {
            let key = shard.unsettled();
            let stale: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(&key)
                .arg("-inf")
                .arg(old)
                .arg("LIMIT")
                .arg(0)
                .arg(1000)
                .query_async(&mut self.redis.conn())
                .await?;
            let stale: Vec<uuid::Uuid> = stale.iter().filter_map(|t| t.parse().ok()).collect();
            if !stale.is_empty() {
                let settled = order::which_are_orders(&self.db, &stale).await?;
                if !settled.is_empty() {
                    // Out of the unsettled set with its owners entry, as the persister would have.
                    let _: () = redis::pipe()
                        .zrem(&key, &settled)
                        .ignore()
                        .hdel(shard.owners(), &settled)
                        .ignore()
                        .query_async(&mut self.redis.conn())
                        .await?;
                }
            }
            let n: u64 = redis::cmd("ZCARD")
                .arg(&key)
                .query_async(&mut self.redis.conn())
                .await?;
            total += n;
        }
        Ok(total)
    }

    async fn wait_for_idle_queue(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        loop {
            poll.tick().await;
            let waiting = async {
                let owed = activity::owed_moves(&self.db).await?;
                anyhow::Ok(self.in_flight().await? + owed.unsigned_abs())
            };
            match waiting.await {
                Ok(0) => return Ok(()),
                Ok(n) if tokio::time::Instant::now() > deadline => {
                    anyhow::bail!(
                        "{n} reservations in flight or moves owed after 30 s; stock not rebuilt yet"
                    )
                }
                Err(e) if tokio::time::Instant::now() > deadline => return Err(e),
                _ => {}
            }
        }
    }

    /// Puts a lost activity (or the lost shards of one) back into Redis from the database: its
    /// remaining stock, its switches and what each user holds (so the per-user limit survives).
    /// When every shard was lost, the remaining units are split over them; when only some were
    /// (a master lost without a replica), the shards that survived keep selling meanwhile, so
    /// the lost ones come back empty and the units return by the idle-time repair below, which
    /// cannot count a unit twice.
    async fn rebuild(&self, row: &ActivityRow, stock: &[Option<i64>]) -> anyhow::Result<i64> {
        self.wait_for_idle_queue().await?;
        let (total, sold): (i64, i64) = activity::figures(&self.db, row.id).await?;
        let holders = order::holders(&self.db, row.id).await?;
        let shards = self.redis.keys.shards(row.id, row.stock_shards);
        let everything_lost = stock.iter().all(Option::is_none);
        let parts = if everything_lost {
            activity::stock::split(total - sold, row.stock_shards)
        } else {
            vec![0; shards.len()]
        };
        let lost: Vec<usize> = (0..shards.len()).filter(|&i| stock[i].is_none()).collect();
        self.redis
            .by_slot(
                &holders,
                |(user, _)| {
                    let home = keys::home_shard(*user, row.stock_shards) as usize;
                    lost.contains(&home).then(|| shards[home].holders())
                },
                |pipe, key, (user, units)| {
                    pipe.cmd("HSETNX").arg(key).arg(user).arg(units).ignore();
                },
            )
            .await?;
        let paused = if row.stopped() { "1" } else { "0" };
        self.redis
            .by_slot(
                &lost,
                |&i| Some(shards[i].stock()),
                |pipe, key, &i| {
                    pipe.cmd("HSETNX")
                        .arg(shards[i].meta())
                        .arg("paused")
                        .arg(paused)
                        .ignore();
                    pipe.cmd("SET").arg(key).arg(parts[i]).arg("NX").ignore();
                },
            )
            .await?;
        let restored: i64 = lost.iter().map(|&i| parts[i]).sum();
        if everything_lost && sold == 0 && holders.is_empty() {
            // Nothing was ever sold: a sale not warmed yet (the demo's, one created while Redis
            // was away), not a loss.
            tracing::info!(
                activity.id = row.id,
                restored,
                "stock put in Redis from the database"
            );
        } else {
            tracing::warn!(
                activity.id = row.id,
                shards.lost = lost.len(),
                restored,
                holders = holders.len(),
                "stock rebuilt in Redis from the database"
            );
        }
        Ok(restored + stock.iter().flatten().sum::<i64>())
    }

    /// Start-up: every live activity gets its stock in Redis before this instance takes buys.
    pub async fn warm(&self) -> anyhow::Result<()> {
        for row in activity::live(&self.db)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
        {
            let stock = activity::stock::shard_stock(&self.redis, row.id, row.stock_shards).await?;
            if stock.iter().any(Option::is_none) {
                self.rebuild(&row, &stock)
                    .await
                    .with_context(|| format!("rebuilding activity {}", row.id))?;
            } else {
                let paused = if row.stopped() { "1" } else { "0" };
                for shard in self.redis.keys.shards(row.id, row.stock_shards) {
                    let _: () = redis::cmd("HSETNX")
                        .arg(shard.meta())
                        .arg("paused")
                        .arg(paused)
                        .query_async(&mut self.redis.conn())
                        .await?;
                }
            }
        }
        Ok(())
    }

    async fn compare_and_set(&self, key: &str, from: i64, to: i64) -> anyhow::Result<bool> {
        let swapped: i64 = scripts::compare_and_set()
            .key(key)
            .arg(from)
            .arg(to)
            .invoke_async(&mut self.redis.conn())
            .await?;
        Ok(swapped == 1)
    }

    /// Lowers the shards by `excess` units in all, each by what it holds at most.
    async fn lower(
        &self,
        row: &ActivityRow,
        stock: &[Option<i64>],
        excess: i64,
    ) -> anyhow::Result<bool> {
        let mut left = excess;
        for (shard, units) in self
            .redis
            .keys
            .shards(row.id, row.stock_shards)
            .iter()
            .zip(stock)
        {
            let units = units.unwrap_or(0);
            let take = units.clamp(0, left);
            if take > 0
                && self
                    .compare_and_set(&shard.stock(), units, units - take)
                    .await?
            {
                left -= take;
            }
        }
        Ok(left == 0)
    }

    async fn pause(&self, read: Read) {
        if let Some(between) = &self.between_reads {
            between(read).await;
        }
    }

    /// Carries over to Redis the additions of sale `id` it has not taken (the request that made
    /// one failed to reach Redis, or died first).
    async fn carry_additions(&self, id: i64) -> anyhow::Result<()> {
        for owed in activity::owed_additions(&self.db, id).await? {
            activity::stock::add_to_stock(&self.redis, &owed)
                .await
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            activity::carried(&self.db, owed.addition).await?;
            tracing::info!(
                activity.id = id,
                added = owed.added,
                "stock addition carried over to Redis"
            );
        }
        Ok(())
    }

    /// One round over every live activity.
    pub async fn reconcile(&self) -> anyhow::Result<Vec<Drift>> {
        let mut report = Vec::new();
        for row in activity::live(&self.db)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
        {
            if let Err(e) = self.carry_additions(row.id).await {
                tracing::warn!(activity.id = row.id, error = %format!("{e:#}"), "stock addition not carried over yet");
            }
            let before = activity::stock_look(&self.db, row.id).await?;
            self.pause(Read::Database).await;
            let stock = activity::stock::shard_stock(&self.redis, row.id, row.stock_shards).await?;
            if stock.iter().any(Option::is_none) {
                let rebuilt = self.rebuild(&row, &stock).await?;
                report.push(Drift {
                    activity_id: row.id,
                    redis_remaining: None,
                    expected: rebuilt,
                    drift: -rebuilt,
                    repaired: true,
                });
                continue;
            }
            let redis_remaining: i64 = stock.iter().flatten().sum();
            // Only a raise needs to know what is in flight, and only during the read.
            let idle = if redis_remaining < before.expected() && before.owed == 0 {
                self.in_flight().await? == 0
            } else {
                false
            };
            self.pause(Read::Redis).await;
            let after = activity::stock_look(&self.db, row.id).await?;
            // Without a move between the two reads, Redis is held against the first figures: a
            // unit sold and written after them can only have lowered Redis (a unit sold and
            // written while Redis is read is counted by the second figures but may be in the
            // Redis read too). With a move, against the second: the move reached the database
            // first, so it is in them.
            let still = after.moves == before.moves && after.total_stock == before.total_stock;
            let against = if still { before } else { after };
            let expected = against.expected();
            let drift = redis_remaining - expected;
            let mut repaired = false;
            if drift > 0 && still {
                repaired = self.lower(&row, &stock, drift).await?;
            } else if drift < 0 && idle && after == before {
                // The missing units go back to the first shard (others borrow from it).
                let first = self.redis.keys.shard(row.id, 0, row.stock_shards).stock();
                let units = stock[0].unwrap_or(0);
                repaired = self.compare_and_set(&first, units, units - drift).await?;
            }
            self.metrics.drift(row.id, drift);
            if drift != 0 {
                tracing::warn!(
                    activity.id = row.id,
                    redis_remaining,
                    expected,
                    drift,
                    repaired,
                    "stock drift between Redis and the database"
                );
            }
            report.push(Drift {
                activity_id: row.id,
                redis_remaining: Some(redis_remaining),
                expected,
                drift,
                repaired,
            });
        }
        Ok(report)
    }

    pub async fn run_periodically(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %format!("{e:#}"), "reconciliation failed");
            }
        }
    }
}
