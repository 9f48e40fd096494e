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
//!
//! "No replica connected" is also what a deposed master sees: one paused past the cluster's node
//! timeout wakes up believing it still leads while its replica, promoted meanwhile, has dropped
//! the link; one cut off with a minority loses its replica's link after `repl-timeout`. Writes it
//! takes then are discarded when it learns the truth and turns replica. So on a cluster a master
//! without a replica is trusted only once a majority of the masters, asked there and then, name
//! it the slot's master in their own view (`CLUSTER NODES`): the cluster's configuration epochs
//! are the fence. A deposed master fails that test ([`Confirmed::Deposed`]); its buys are
//! refused (`503`, retried with their key) and the relay holds its journal entries.

use super::{
    keys::slot,
    redis::{info_number, Conn},
};
use parking_lot::Mutex;
use redis::{
    cluster_routing::{
        MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
    },
    RedisResult,
};
use std::{collections::HashMap, sync::Arc, time::Duration};
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
    /// The master has no replica and a majority of the cluster's masters does not name it the
    /// slot's master (or could not be asked in time): its writes may be discarded.
    Deposed,
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
            let mut slots = self.slots.lock();
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
                let mut slots = self.slots.lock();
                let pending = slots.entry(slot).or_default();
                if pending.waiters.is_empty() {
                    pending.running = false;
                    slots.remove(&slot);
                    return;
                }
                std::mem::take(&mut pending.waiters)
            };
            // Bounded: a round stuck on a master that died (its commands retried across the
            // failover) would hold every later buy of the slot past its deadline.
            let outcome = tokio::time::timeout(2 * self.timeout, self.wait_once(slot, &key))
                .await
                .unwrap_or_else(|_| {
                    Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "the slot's master did not answer the replication wait in time",
                    )))
                });
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
        let connected = info_number(&info, "connected_slaves").unwrap_or(0);
        if connected != 0 {
            return Ok(Confirmed::NotYet);
        }
        if !self.majority_names_it_master(slot).await {
            tracing::warn!(
                slot,
                "no replica connected, and the cluster's majority does not name this node the slot's master: refused"
            );
            return Ok(Confirmed::Deposed);
        }
        tracing::warn!(
            slot,
            "no replica connected: buys on this slot are durable by the master's AOF only"
        );
        Ok(Confirmed::NoReplica)
    }

    /// Whether more than half of the masters name the node serving `slot` as its master, each in
    /// its own view: those this connection knows are asked, and the count is of the most masters
    /// this instance has learnt the cluster to have. A single Redis has no one else to ask.
    async fn majority_names_it_master(&self, slot: u16) -> bool {
        let Some(Conn::Cluster(shared)) = &self.conn else {
            return true;
        };
        let ask = async {
            let mut myid = redis::cmd("CLUSTER");
            myid.arg("MYID");
            let me: String = redis::from_redis_value(self.on_master(slot, myid).await?)?;
            let mut nodes = redis::cmd("CLUSTER");
            nodes.arg("NODES");
            let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
            let views = shared.get().route_command(nodes, all).await?;
            Ok::<_, redis::RedisError>((me, views))
        };
        // A master cut off with a minority cannot reach the others: no answer is a no.
        let Ok(Ok((me, redis::Value::Map(views)))) = tokio::time::timeout(self.timeout, ask).await
        else {
            return false;
        };
        // The client's slot map may have been read from a deposed node, which names itself alone:
        // the majority is of the most masters the cluster has been seen to have.
        let asked = views.len().max(shared.masters().most());
        let named = views
            .into_iter()
            .filter_map(|(_, view)| redis::from_redis_value::<String>(view).ok())
            .filter(|view| master_in_view(view, slot) == Some(me.as_str()))
            .count();
        named * 2 > asked
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

/// The id of the node that `view` (a node's `CLUSTER NODES`) has serving `slot`, unless that node
/// is flagged failing (`fail` or `fail?`) there.
fn master_in_view(view: &str, slot: u16) -> Option<&str> {
    view.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (id, flags, ranges) = (fields.first()?, fields.get(2)?, fields.get(8..)?);
        let serves = ranges.iter().any(|range| {
            // `[slot->-id]` and `[slot-<-id]` mark a migration, not ownership.
            let mut ends = range.splitn(2, '-');
            let from = ends.next().and_then(|n| n.parse::<u16>().ok());
            let to = ends.next().map_or(from, |n| n.parse::<u16>().ok());
            matches!((from, to), (Some(from), Some(to)) if (from..=to).contains(&slot))
        });
        (serves && flags.contains("master") && !flags.contains("fail")).then_some(*id)
    })
}

#[cfg(test)]
mod tests {
    use super::master_in_view;

    const VIEW: &str = "\
07c3 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922 [5470->-292f]
292f 127.0.0.1:30003@40003 master,fail? - 1426238316232 0 3 connected 10923-16383
6ec2 127.0.0.1:30004@40004 slave 07c3 0 1426238316232 1 connected
";

    #[test]
    fn the_master_of_a_slot_is_read_from_a_view() {
        assert_eq!(master_in_view(VIEW, 0), Some("07c3"));
        assert_eq!(master_in_view(VIEW, 5460), Some("07c3"));
        assert_eq!(master_in_view(VIEW, 5461), Some("67ed"));
        assert_eq!(master_in_view(VIEW, 5470), Some("67ed"));
        // A master the viewer holds failing is named by no one.
        assert_eq!(master_in_view(VIEW, 12000), None);
        assert_eq!(master_in_view("", 1), None);
    }
}
