//! A buy is answered `202` only once what its script wrote is on a replica as well: Redis
//! replicates asynchronously, so a master that dies right after answering may take the last
//! reservations with it, and the replica promoted in its place would sell those units again.
//!
//! After the script, the gate asks [`Replication::confirm`] for the key's slot. `WAIT` blocks the
//! connection it is sent on, so it goes over a connection of its own. `WAIT` waits for the
//! replication offset of its own connection's last command, not for the master's: on a
//! connection that writes nothing it would answer at once for every write made since its
//! previous command (seen: a write the stopped replica never got, confirmed). So each `WAIT`
//! follows a small write of its own on the slot (a mark), which puts its connection's offset
//! past every write made to the master before it: one `WAIT` covers them all. Callers of one slot
//! are grouped, and while one `WAIT` is out the next callers gather for the following one (a
//! group commit). Under load a buy costs about one replication round trip of latency and next to
//! nothing in Redis work.
//!
//! When the master has no replica connected at all (its replica is the one that failed, or it was
//! just promoted), there is nothing to wait for and the buy is answered as on a single Redis
//! (durable by the AOF of the master); this is logged. When a replica is connected but does not
//! acknowledge in time, the buy is answered `503` and the client retries with its key.

use super::{keys::slot, redis::Conn};
use redis::{
    cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr},
    RedisResult,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::oneshot;

/// How a write stands after the wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirmed {
    /// On `replicas` replicas (or no wait was asked).
    Replicated,
    /// The master has no replica connected: durable by its AOF only.
    NoReplica,
    /// A replica is connected but did not acknowledge within the timeout.
    NotYet,
}

#[derive(Default)]
struct Pending {
    running: bool,
    waiters: Vec<oneshot::Sender<RedisResult<Confirmed>>>,
}

#[derive(Clone)]
pub struct Replication {
    /// A connection used for `WAIT` only; `None` when no wait is asked.
    conn: Option<Conn>,
    replicas: u32,
    timeout: Duration,
    slots: Arc<Mutex<HashMap<u16, Pending>>>,
}

impl Replication {
    /// `replicas` 0 confirms at once (a single Redis without replicas).
    pub fn new(conn: Option<Conn>, replicas: u32, timeout: Duration) -> Replication {
        Replication {
            conn: conn.filter(|_| replicas > 0),
            replicas,
            timeout,
            slots: Arc::default(),
        }
    }

    /// Waits until the writes made so far to `key`'s slot are on the replicas.
    pub async fn confirm(&self, key: &str) -> RedisResult<Confirmed> {
        if self.conn.is_none() {
            return Ok(Confirmed::Replicated);
        }
        let slot = slot(key);
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut slots = self.slots.lock().expect("the replication lock");
            let pending = slots.entry(slot).or_default();
            pending.waiters.push(tx);
            !std::mem::replace(&mut pending.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive(slot, key.to_string()));
        }
        rx.await.unwrap_or_else(|_| {
            Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the replication wait ended",
            )))
        })
    }

    /// One `WAIT` after another for this slot while callers keep coming.
    async fn drive(self, slot: u16, key: String) {
        loop {
            let batch = {
                let mut slots = self.slots.lock().expect("the replication lock");
                let pending = slots.entry(slot).or_default();
                if pending.waiters.is_empty() {
                    pending.running = false;
                    slots.remove(&slot);
                    return;
                }
                std::mem::take(&mut pending.waiters)
            };
            let outcome = self.wait_once(slot, &key).await;
            if outcome.is_err() {
                // After a failover the node this connection believes masters the slot may be a
                // replica now (`WAIT` has no key, so no MOVED corrects it): a keyed command
                // through the same connection refreshes its slot map for the next round.
                let mut conn = self.conn.clone().expect("a wait connection");
                let _: redis::RedisResult<i64> =
                    redis::cmd("EXISTS").arg(&key).query_async(&mut conn).await;
            }
            for waiter in batch {
                let _ = waiter.send(outcome.clone());
            }
        }
    }

    async fn wait_once(&self, slot: u16, key: &str) -> RedisResult<Confirmed> {
        // The mark: a key of the same slot (the same hash tag), written on this connection.
        let mut mark = redis::cmd("SET");
        mark.arg(format!("{key}:replicated"))
            .arg(1)
            .arg("PX")
            .arg(60_000);
        self.on_master(slot, mark).await?;
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas).arg(self.timeout.as_millis() as u64);
        let acked: i64 = redis::from_redis_value(self.on_master(slot, wait).await?)?;
        if acked >= i64::from(self.replicas) {
            return Ok(Confirmed::Replicated);
        }
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let info: String = redis::from_redis_value(self.on_master(slot, info).await?)?;
        let connected = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse::<i64>().ok())
            .unwrap_or(0);
        Ok(if connected == 0 {
            tracing::warn!(
                slot,
                "no replica connected: buys on this slot are durable by the master's AOF only"
            );
            Confirmed::NoReplica
        } else {
            Confirmed::NotYet
        })
    }

    /// Runs `cmd` on the master of `slot` (on a single Redis, on it).
    async fn on_master(&self, slot: u16, cmd: redis::Cmd) -> RedisResult<redis::Value> {
        let mut conn = self.conn.clone().expect("a wait connection");
        match &mut conn {
            Conn::Cluster(shared) => {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                shared
                    .get()
                    .route_command(cmd, RoutingInfo::SingleNode(route))
                    .await
            }
            Conn::Single(_) => cmd.query_async(&mut conn).await,
        }
    }
}
