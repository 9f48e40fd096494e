//! Redis against the database. At start-up, and whenever an activity's stock is missing from
//! Redis (it lost its data), the stock is rebuilt from the database once the reservation queue has
//! drained: remaining = total_stock − sold − reservations still in flight. Periodically (and on
//! `server reconcile`) each live activity is compared; drift is logged and exported, and repaired
//! where that is safe:
//! - Redis above `total_stock − sold` can never be right (reservations in flight only lower it):
//!   it is lowered at once.
//! - Redis below it is normal while reservations are in flight; it is raised only when the
//!   pipeline is idle (empty journal, empty queue) and the figures held still between two looks.
//!
//! Every repair is a compare-and-set, so a buy that lands in between wins and the repair waits
//! for the next round.

use crate::{
    domain::activity::{self, ActivityRow},
    infra::{
        broker::{Broker, Topology},
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
}

const CAS: &str = r"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
";

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
    /// Reservations that left Redis but are not orders yet, as far as can be seen: journal entries
    /// and ready messages on the reservation queue.
    async fn in_flight(&self) -> anyhow::Result<u64> {
        let journal: u64 = redis::cmd("XLEN")
            .arg(self.redis.keys.journal())
            .query_async(&mut self.redis.conn())
            .await?;
        let channel = self.broker.channel(&self.topology).await?;
        let queue = channel
            .queue_declare(
                self.topology.reservations.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await?;
        let _ = channel.close(200, "done".into()).await;
        Ok(journal + u64::from(queue.message_count()))
    }

    async fn wait_for_idle_queue(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        loop {
            poll.tick().await;
            match self.in_flight().await {
                Ok(0) => return Ok(()),
                Ok(n) if tokio::time::Instant::now() > deadline => {
                    anyhow::bail!(
                        "{n} reservations still in flight after 30 s; stock not rebuilt yet"
                    )
                }
                Err(e) if tokio::time::Instant::now() > deadline => return Err(e),
                _ => {}
            }
        }
    }

    /// Puts a lost activity back into Redis from the database: its remaining stock, its switches and
    /// what each user holds (so the per-user limit survives).
    async fn rebuild(&self, row: &ActivityRow) -> anyhow::Result<i64> {
        self.wait_for_idle_queue().await?;
        let (total, sold): (i64, i64) =
            sqlx::query_as("SELECT total_stock, sold FROM activities WHERE id = $1")
                .bind(row.id)
                .fetch_one(&self.db)
                .await?;
        let holders: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT user_id, sum(quantity)::bigint FROM orders
             WHERE activity_id = $1 AND status IN ('confirmed', 'paid') GROUP BY user_id",
        )
        .bind(row.id)
        .fetch_all(&self.db)
        .await?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (user, units) in &holders {
            pipe.cmd("HSETNX")
                .arg(self.redis.keys.holders(row.id))
                .arg(user)
                .arg(units)
                .ignore();
        }
        pipe.cmd("HSETNX")
            .arg(self.redis.keys.meta(row.id))
            .arg("paused")
            .arg(if row.paused { "1" } else { "0" })
            .ignore();
        pipe.cmd("SET")
            .arg(self.redis.keys.stock(row.id))
            .arg(total - sold)
            .arg("NX")
            .ignore();
        let _: () = pipe.query_async(&mut self.redis.conn()).await?;
        tracing::warn!(
            activity.id = row.id,
            remaining = total - sold,
            holders = holders.len(),
            "stock rebuilt in Redis from the database"
        );
        Ok(total - sold)
    }

    async fn remaining(&self, id: i64) -> anyhow::Result<Option<i64>> {
        Ok(redis::cmd("GET")
            .arg(self.redis.keys.stock(id))
            .query_async(&mut self.redis.conn())
            .await?)
    }

    /// Start-up: every live activity gets its stock in Redis before this instance takes buys.
    pub async fn warm(&self) -> anyhow::Result<()> {
        for row in activity::live(&self.db)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
        {
            if self.remaining(row.id).await?.is_none() {
                self.rebuild(&row)
                    .await
                    .with_context(|| format!("rebuilding activity {}", row.id))?;
            } else {
                let _: () = redis::cmd("HSETNX")
                    .arg(self.redis.keys.meta(row.id))
                    .arg("paused")
                    .arg(if row.paused { "1" } else { "0" })
                    .query_async(&mut self.redis.conn())
                    .await?;
            }
        }
        Ok(())
    }

    async fn compare_and_set(&self, id: i64, from: i64, to: i64) -> anyhow::Result<bool> {
        let swapped: i64 = redis::Script::new(CAS)
            .key(self.redis.keys.stock(id))
            .arg(from)
            .arg(to)
            .invoke_async(&mut self.redis.conn())
            .await?;
        Ok(swapped == 1)
    }

    /// One round over every live activity.
    pub async fn reconcile(&self) -> anyhow::Result<Vec<Drift>> {
        let mut report = Vec::new();
        for row in activity::live(&self.db)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
        {
            let expected = row.total_stock - row.sold;
            let Some(redis_remaining) = self.remaining(row.id).await? else {
                let rebuilt = self.rebuild(&row).await?;
                report.push(Drift {
                    activity_id: row.id,
                    redis_remaining: None,
                    expected: rebuilt,
                    drift: -rebuilt,
                    repaired: true,
                });
                continue;
            };
            let drift = redis_remaining - expected;
            let mut repaired = false;
            if drift > 0 {
                repaired = self
                    .compare_and_set(row.id, redis_remaining, expected)
                    .await?;
            } else if drift < 0 && self.in_flight().await? == 0 {
                // Look again: the figures must hold still, with nothing in flight, before raising.
                tokio::time::sleep(Duration::from_millis(500)).await;
                let again: (i64, i64) =
                    sqlx::query_as("SELECT total_stock, sold FROM activities WHERE id = $1")
                        .bind(row.id)
                        .fetch_one(&self.db)
                        .await?;
                let still = self.remaining(row.id).await? == Some(redis_remaining);
                if still && again == (row.total_stock, row.sold) && self.in_flight().await? == 0 {
                    repaired = self
                        .compare_and_set(row.id, redis_remaining, expected)
                        .await?;
                }
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
