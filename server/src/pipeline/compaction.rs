//! Redis's append-only file rewritten between sales, not during one.
//!
//! Redis keeps its AOF from growing without end by rewriting it in a forked child, by default
//! whenever the file has doubled since the last rewrite. The child takes a core for a second or
//! two per gigabyte; on a box whose cores the crowd already saturates, Redis's one thread then
//! waits for a core, and every buy waits with it (measured: the in-stock open loop's p99 went from
//! 15–59 ms to 64–626 ms with one rewrite in the run; docs/benchmarks.md). A sale writes fast, so
//! that rewrite falls inside the sale.
//!
//! So the engines are run with Redis's own rewrites off (`auto-aof-rewrite-percentage 0`, as
//! `scripts/services.sh` and the manifests start them), and the workers start them instead: every
//! round, each node's `INFO persistence` is read; a node whose AOF has grown past the threshold
//! (`growth` % of its last rewrite's size, and at least `min`) is sent `BGREWRITEAOF` when no sale
//! is on — none runs now, or starts within `lead`, unless it is sold out in the database. A node
//! whose AOF has grown by more than `ceiling` is rewritten even during a sale: a full disk stops
//! every write, which is worse than a slow second. Every instance's workers do this; a second
//! `BGREWRITEAOF` while one runs is refused by Redis and changes nothing.

use crate::infra::{
    metrics::Metrics,
    redis::{info_number, Conn, Redis},
};
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
use sqlx::PgPool;
use std::{sync::Arc, time::Duration};

pub use crate::infra::config::AofPolicy as Policy;

/// A node's `INFO persistence`, the part this reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aof {
    pub enabled: bool,
    /// A rewrite runs or is scheduled.
    pub rewriting: bool,
    pub current_bytes: u64,
    /// The file's size after the last rewrite (or at start-up).
    pub base_bytes: u64,
}

impl Aof {
    pub fn parse(info: &str) -> Option<Aof> {
        let field = |name| info_number(info, name);
        let enabled = field("aof_enabled")? == 1;
        let rewriting = field("aof_rewrite_in_progress") == Some(1)
            || field("aof_rewrite_scheduled") == Some(1);
        Some(Aof {
            enabled,
            rewriting,
            current_bytes: field("aof_current_size").unwrap_or(0),
            base_bytes: field("aof_base_size").unwrap_or(0),
        })
    }

    fn growth(&self) -> u64 {
        self.current_bytes.saturating_sub(self.base_bytes)
    }
}

/// What a round does with one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No AOF, a rewrite already running, or not grown enough.
    Nothing,
    /// Grown enough, but a sale is on.
    Held,
    /// Rewrite now: no sale is on.
    BetweenSales,
    /// Rewrite now although a sale is on: past the ceiling.
    Ceiling,
}

pub fn decide(aof: &Aof, policy: &Policy, sale_on: bool) -> Decision {
    if !aof.enabled || aof.rewriting {
        return Decision::Nothing;
    }
    let growth = aof.growth();
    if growth >= policy.ceiling_bytes {
        return if sale_on {
            Decision::Ceiling
        } else {
            Decision::BetweenSales
        };
    }
    let due = growth >= policy.min_bytes
        && u128::from(growth) * 100
            >= u128::from(aof.base_bytes) * u128::from(policy.growth_percent);
    match (due, sale_on) {
        (false, _) => Decision::Nothing,
        (true, true) => Decision::Held,
        (true, false) => Decision::BetweenSales,
    }
}

#[derive(Clone)]
pub struct Compactor {
    pub db: PgPool,
    pub redis: Redis,
    pub metrics: Arc<Metrics>,
    pub policy: Policy,
}

impl Compactor {
    pub async fn run_periodically(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A warning, counted: rounds that keep failing leave the AOFs to grow until the disk
            // is full (the alert SeckillRedisAofUnwatched).
            if let Err(e) = self.round().await {
                self.metrics.aof_rounds_failed.inc();
                tracing::warn!(error = ?e, "AOF compaction: a round failed");
            }
        }
    }

    /// One round over every node; what it decided for each (its address, or "redis").
    pub async fn round(&self) -> anyhow::Result<Vec<(String, Decision)>> {
        let sale_on = sale_on(&self.db, self.policy.lead).await?;
        let (mut decided, mut grown) = (Vec::new(), 0);
        for (node, info) in self.infos().await? {
            let Some(aof) = Aof::parse(&info) else {
                continue;
            };
            let decision = decide(&aof, &self.policy, sale_on);
            grown = grown.max(aof.growth());
            if matches!(decision, Decision::BetweenSales | Decision::Ceiling) {
                let reason = if decision == Decision::Ceiling {
                    tracing::warn!(
                        node,
                        grown_bytes = aof.growth(),
                        "AOF past its ceiling during a sale: rewritten now"
                    );
                    "ceiling"
                } else {
                    tracing::info!(
                        node,
                        grown_bytes = aof.growth(),
                        "AOF rewritten between sales"
                    );
                    "between_sales"
                };
                match self.rewrite(&node).await {
                    Ok(()) => self.metrics.aof_rewrite(reason),
                    // Another instance's round started it first: Redis refuses the second.
                    Err(e) if e.to_string().contains("in progress") => {}
                    Err(e) => return Err(e.into()),
                }
            }
            decided.push((node, decision));
        }
        self.metrics
            .aof_growth
            .set(i64::try_from(grown).unwrap_or(i64::MAX));
        Ok(decided)
    }

    /// Each node's `INFO persistence`: every node of a cluster, replicas too (each has its file).
    pub async fn infos(&self) -> redis::RedisResult<Vec<(String, String)>> {
        let mut info = redis::cmd("INFO");
        info.arg("persistence");
        match self.redis.conn() {
            Conn::Single(mut conn) => {
                let text: String = info.query_async(&mut conn).await?;
                Ok(vec![("redis".to_string(), text)])
            }
            Conn::Cluster(shared) => {
                let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllNodes, None));
                let redis::Value::Map(views) = shared.get().route_command(info, all).await? else {
                    return Ok(Vec::new());
                };
                Ok(views
                    .into_iter()
                    .filter_map(|(node, view)| {
                        Some((
                            redis::from_redis_value::<String>(node).ok()?,
                            redis::from_redis_value::<String>(view).ok()?,
                        ))
                    })
                    .collect())
            }
        }
    }

    async fn rewrite(&self, node: &str) -> redis::RedisResult<()> {
        let cmd = redis::cmd("BGREWRITEAOF");
        match self.redis.conn() {
            Conn::Single(mut conn) => cmd.query_async::<redis::Value>(&mut conn).await.map(drop),
            Conn::Cluster(shared) => {
                let (host, port) = node
                    .rsplit_once(':')
                    .and_then(|(host, port)| Some((host.to_string(), port.parse().ok()?)))
                    .ok_or_else(|| {
                        redis::RedisError::from((redis::ErrorKind::Client, "a node's address"))
                    })?;
                let route =
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                shared.get().route_command(cmd, route).await.map(drop)
            }
        }
    }
}

/// Whether a sale runs now or starts within `lead`, and is not sold out in the database.
pub async fn sale_on(db: &PgPool, lead: Duration) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM activities
                   WHERE ends_at > now() AND starts_at < now() + make_interval(secs => $1)
                     AND sold < total_stock) AS "on!""#,
        lead.as_secs_f64()
    )
    .fetch_one(db)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;
    const POLICY: Policy = Policy {
        growth_percent: 100,
        min_bytes: 64 * MB,
        ceiling_bytes: 4096 * MB,
        lead: Duration::from_secs(600),
    };

    fn aof(base: u64, current: u64) -> Aof {
        Aof {
            enabled: true,
            rewriting: false,
            current_bytes: current,
            base_bytes: base,
        }
    }

    #[test]
    fn a_nodes_aof_is_read_from_its_info() {
        let info = "# Persistence\r\nloading:0\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n\
                    aof_rewrite_scheduled:0\r\naof_current_size:5000\r\naof_base_size:1200\r\n";
        assert_eq!(Aof::parse(info), Some(aof(1200, 5000)));
        let running = info.replace("aof_rewrite_in_progress:0", "aof_rewrite_in_progress:1");
        assert!(Aof::parse(&running).unwrap().rewriting);
        let off = "aof_enabled:0\r\naof_rewrite_in_progress:0\r\n";
        assert_eq!(Aof::parse(off).map(|a| a.enabled), Some(false));
        assert_eq!(Aof::parse("loading:0\r\n"), None);
    }

    #[test]
    fn a_grown_aof_is_rewritten_between_sales_and_held_during_one_up_to_the_ceiling() {
        // Doubled and past the minimum.
        assert_eq!(
            decide(&aof(100 * MB, 200 * MB), &POLICY, false),
            Decision::BetweenSales
        );
        assert_eq!(
            decide(&aof(100 * MB, 200 * MB), &POLICY, true),
            Decision::Held
        );
        // Not doubled, or doubled but under the minimum.
        assert_eq!(
            decide(&aof(100 * MB, 199 * MB), &POLICY, false),
            Decision::Nothing
        );
        assert_eq!(decide(&aof(MB, 60 * MB), &POLICY, false), Decision::Nothing);
        // Past the ceiling, a sale on or not.
        assert_eq!(
            decide(&aof(8192 * MB, 12288 * MB), &POLICY, true),
            Decision::Ceiling
        );
        assert_eq!(
            decide(&aof(8192 * MB, 12288 * MB), &POLICY, false),
            Decision::BetweenSales
        );
        // One already running, or no AOF at all.
        let running = Aof {
            rewriting: true,
            ..aof(MB, 9000 * MB)
        };
        assert_eq!(decide(&running, &POLICY, false), Decision::Nothing);
        let off = Aof {
            enabled: false,
            ..aof(MB, 9000 * MB)
        };
        assert_eq!(decide(&off, &POLICY, false), Decision::Nothing);
    }
}
