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
//! When the master has no replica in sync (its replica is the one that failed, or it was just
//! promoted, or the node that died is back as its replica and still loading its snapshot), there is
//! nothing that could acknowledge soon and the buy is answered as on a single Redis
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

use super::{keys::slot, redis::Conn, scripts};
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
    /// The master has no replica in sync: durable by its AOF only.
    NoReplica,
    /// A replica is connected but did not acknowledge within the timeout.
    NotYet,
    /// The master has no replica and a majority of the cluster's masters does not name it the
    /// slot's master (or could not be asked in time): its writes may be discarded.
    Deposed,
    /// The node the wait went to does not hold the write: it was made on another node, the
    /// slot's master as the writer's connection saw it then (a deposed one, or before a
    /// failover), and nothing here can confirm it.
    Elsewhere,
}

/// What shows that a node holds the write to be confirmed: a key of the slot (the same hash tag)
/// and what it must hold, or any of several such.
#[derive(Clone, Debug)]
pub struct Witness {
    checks: Vec<Check>,
}

#[derive(Clone, Debug)]
struct Check {
    key: String,
    kind: &'static str,
    what: String,
    value: String,
}

impl Witness {
    fn one(key: String, kind: &'static str, what: String, value: String) -> Witness {
        Witness {
            checks: vec![Check {
                key,
                kind,
                what,
                value,
            }],
        }
    }

    /// A sorted set holding `member` (a granted token among the shard's unsettled ones).
    pub fn member(key: String, member: impl ToString) -> Witness {
        Witness::one(key, "member", member.to_string(), String::new())
    }

    /// A hash whose `field` holds `value` (a keyed buy's first answer).
    pub fn field(key: String, field: String, value: impl ToString) -> Witness {
        Witness::one(key, "field", field, value.to_string())
    }

    /// A string key holding `value` (a shard's answer to a borrowing).
    pub fn value(key: String, value: &str) -> Witness {
        Witness::one(key, "value", value.to_string(), String::new())
    }

    /// A stream holding the entry `id` with a field holding `holding` (a journal's entry the relay
    /// read, and its reservations: the same id may name another entry on another node).
    pub fn entry(key: String, id: &str, holding: String) -> Witness {
        Witness::one(key, "entry", id.to_string(), holding)
    }

    /// This, or else `other` (the same write, kept in one of two places).
    pub fn or(mut self, other: Witness) -> Witness {
        self.checks.extend(other.checks);
        self
    }
}

/// Per witness, whether any of its checks held (`flat`: the script's answer, a 1 or 0 per check
/// in order).
fn held_by(witnesses: &[Witness], flat: &[u8]) -> Vec<bool> {
    let mut answers = flat.iter();
    witnesses
        .iter()
        .map(|w| {
            w.checks
                .iter()
                .fold(false, |any, _| answers.next() == Some(&1) || any)
        })
        .collect()
}

type Waiter = (Witness, oneshot::Sender<RedisResult<Confirmed>>);

#[derive(Default)]
struct Pending {
    running: bool,
    waiters: Vec<Waiter>,
}

#[derive(Clone)]
pub struct Replication {
    /// A connection used for `WAIT` only; `None` when no wait is asked.
    conn: Option<Conn>,
    replicas: u32,
    timeout: Duration,
    slots: Arc<Mutex<HashMap<u16, Pending>>>,
}

/// The node a round went to, as it answered after a `WAIT` that fell short.
struct Standing {
    /// Per waiter: whether the node holds its write.
    held: Vec<bool>,
    info: String,
    /// Its cluster id (`None` on a single Redis).
    me: Option<String>,
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

    /// Waits until the writes made so far to the slot of `witness`'s key are on the replicas,
    /// on the node that holds the write `witness` shows.
    pub async fn confirm(&self, witness: Witness) -> RedisResult<Confirmed> {
        if self.conn.is_none() {
            return Ok(Confirmed::Replicated);
        }
        let Some(first) = witness.checks.first() else {
            return Ok(Confirmed::Elsewhere);
        };
        let slot = slot(&first.key);
        let key = first.key.clone();
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut slots = self.slots.lock();
            let pending = slots.entry(slot).or_default();
            pending.waiters.push((witness, tx));
            !std::mem::replace(&mut pending.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive(slot, key));
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
            let (witnesses, senders): (Vec<Witness>, Vec<_>) = batch.into_iter().unzip();
            // Bounded: a round stuck on a master that died (its commands retried across the
            // failover) would hold every later buy of the slot past its deadline.
            let outcome =
                tokio::time::timeout(2 * self.timeout, self.wait_once(slot, &key, &witnesses))
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
            match outcome {
                Ok(each) => {
                    for (sender, confirmed) in senders.into_iter().zip(each) {
                        let _ = sender.send(Ok(confirmed));
                    }
                }
                Err(e) => {
                    for sender in senders {
                        let _ = sender.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// One round on the slot's master: the witnesses and the mark, then `WAIT`, in one pipeline
    /// on one node; when it falls short, what that node is (its replicas in sync, whether the
    /// cluster names it the slot's master) decides, asked again with the witnesses.
    async fn wait_once(
        &self,
        slot: u16,
        key: &str,
        witnesses: &[Witness],
    ) -> RedisResult<Vec<Confirmed>> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.replicas).arg(self.timeout.as_millis() as u64);
        let (held, acked): (Vec<u8>, i64) = self
            .with_witnesses(slot, key, witnesses, 60_000, &[wait])
            .await?;
        let held = held_by(witnesses, &held);
        if acked >= i64::from(self.replicas) {
            return Ok(held
                .into_iter()
                .map(|h| {
                    if h {
                        Confirmed::Replicated
                    } else {
                        Confirmed::Elsewhere
                    }
                })
                .collect());
        }
        let standing = self.standing(slot, key, witnesses).await?;
        let node = if in_sync(&standing.info) != 0 {
            Confirmed::NotYet
        } else if !self.majority_names(slot, standing.me.as_deref()).await {
            tracing::warn!(
                slot,
                "no replica in sync, and the cluster's majority does not name this node the slot's master: refused"
            );
            Confirmed::Deposed
        } else {
            tracing::warn!(
                slot,
                "no replica in sync: buys on this slot are durable by the master's AOF only"
            );
            Confirmed::NoReplica
        };
        Ok(held
            .into_iter()
            .zip(standing.held)
            .map(|(first, now)| {
                if first && now {
                    node
                } else {
                    Confirmed::Elsewhere
                }
            })
            .collect())
    }

    /// What the node serving `slot` is now, with the witnesses asked again on it.
    async fn standing(&self, slot: u16, key: &str, witnesses: &[Witness]) -> RedisResult<Standing> {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        if matches!(self.conn, Some(Conn::Cluster(_))) {
            let mut myid = redis::cmd("CLUSTER");
            myid.arg("MYID");
            let (held, info, me): (Vec<u8>, String, String) = self
                .with_witnesses(slot, key, witnesses, 0, &[info, myid])
                .await?;
            Ok(Standing {
                held: held_by(witnesses, &held),
                info,
                me: Some(me),
            })
        } else {
            let (held, info): (Vec<u8>, String) = self
                .with_witnesses(slot, key, witnesses, 0, &[info])
                .await?;
            Ok(Standing {
                held: held_by(witnesses, &held),
                info,
                me: None,
            })
        }
    }

    /// `witness.lua` (writing the mark for `mark_ms` unless 0), then `then`, as one pipeline on
    /// the node serving `slot`.
    async fn with_witnesses<T: redis::FromRedisValue>(
        &self,
        slot: u16,
        key: &str,
        witnesses: &[Witness],
        mark_ms: u64,
        then: &[redis::Cmd],
    ) -> RedisResult<T> {
        let checks = || witnesses.iter().flat_map(|w| &w.checks);
        let mut eval = redis::cmd("EVAL");
        eval.arg(scripts::WITNESS)
            .arg(1 + checks().count())
            .arg(mark(key));
        for c in checks() {
            eval.arg(&c.key);
        }
        eval.arg(mark_ms);
        for c in checks() {
            eval.arg(c.kind).arg(&c.what).arg(&c.value);
        }
        let mut pipe = redis::pipe();
        pipe.add_command(eval);
        for cmd in then {
            pipe.add_command(cmd.clone());
        }
        self.pipeline_on_master(slot, &pipe).await
    }

    /// Runs `pipe` on the master of `slot` (on a single Redis, on it), its commands in order on
    /// one connection to one node.
    async fn pipeline_on_master<T: redis::FromRedisValue>(
        &self,
        slot: u16,
        pipe: &redis::Pipeline,
    ) -> RedisResult<T> {
        let mut conn = self.conn.clone().expect("a wait connection");
        match &mut conn {
            Conn::Cluster(shared) => {
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                let values = shared
                    .get()
                    .route_pipeline(pipe.clone(), 0, pipe.len(), route)
                    .await?;
                let values = redis::Value::Array(values).extract_error()?;
                Ok(redis::from_redis_value(values)?)
            }
            Conn::Single(_) => pipe.query_async(&mut conn).await,
        }
    }

    /// Whether more than half of the masters this connection knows name the node `me` as the
    /// master of `slot`, each in its own view. A single Redis (`me` none) has no one else to ask.
    async fn majority_names(&self, slot: u16, me: Option<&str>) -> bool {
        let (Some(Conn::Cluster(shared)), Some(me)) = (&self.conn, me) else {
            return true;
        };
        let mut nodes = redis::cmd("CLUSTER");
        nodes.arg("NODES");
        let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        // A master cut off with a minority cannot reach the others: no answer is a no.
        let Ok(Ok(redis::Value::Map(views))) =
            tokio::time::timeout(self.timeout, shared.get().route_command(nodes, all)).await
        else {
            return false;
        };
        // Counted against the most masters the cluster has been seen with, not only those this
        // connection's slot map holds now: a map read from a deposed master names it alone.
        let asked = views.len().max(shared.masters().most());
        let named = views
            .into_iter()
            .filter_map(|(_, view)| redis::from_redis_value::<String>(view).ok())
            .filter(|view| master_in_view(view, slot) == Some(me))
            .count();
        named * 2 > asked
    }
}

/// The mark of a round on `key`'s slot: a key of the same slot (`key`'s hash tag, or `key` itself
/// as the tag when it has none).
fn mark(key: &str) -> String {
    let tagged = key
        .split_once('{')
        .is_some_and(|(_, rest)| rest.find('}').is_some_and(|end| end > 0));
    if tagged {
        format!("{key}:replicated")
    } else {
        format!("{{{key}}}:replicated")
    }
}

/// How many replicas `info` (a master's `INFO replication`) lists in sync (`state=online`); a
/// replica still loading the master's snapshot is `wait_bgsave` or `send_bulk` there.
fn in_sync(info: &str) -> usize {
    info.lines()
        .filter(|line| {
            line.strip_prefix("slave")
                .and_then(|rest| rest.split_once(':'))
                .is_some_and(|(n, fields)| {
                    n.parse::<u32>().is_ok() && fields.split(',').any(|f| f == "state=online")
                })
        })
        .count()
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
    use super::{in_sync, mark, master_in_view};
    use crate::infra::keys::slot;

    #[test]
    fn a_witness_holds_when_any_of_its_checks_does() {
        use super::{held_by, Witness};
        let one = Witness::value("{a}:x".into(), "1");
        let either = Witness::value("{a}:y".into(), "1").or(Witness::member("{a}:z".into(), 7));
        let witnesses = [one.clone(), either, one];
        assert_eq!(held_by(&witnesses, &[1, 0, 1, 0]), [true, true, false]);
        assert_eq!(held_by(&witnesses, &[0, 0, 0, 1]), [false, false, true]);
        assert_eq!(held_by(&witnesses, &[0, 1, 0, 0]), [false, true, false]);
    }

    #[test]
    fn a_rounds_mark_is_in_its_keys_slot() {
        for key in ["test:1:{a:1.0~1}:stock", "test:1:journal", "{x}", "x"] {
            assert_eq!(slot(&mark(key)), slot(key), "{key}");
        }
    }

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

    #[test]
    fn only_the_replicas_in_sync_are_counted() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
slave0:ip=127.0.0.1,port=17004,state=online,offset=3000,lag=0\r\n\
slave1:ip=127.0.0.1,port=17005,state=wait_bgsave,offset=0,lag=0\r\n\
master_repl_offset:3000\r\n";
        assert_eq!(in_sync(info), 1);
        assert_eq!(in_sync(&info.replace("wait_bgsave", "online")), 2);
        assert_eq!(in_sync(&info.replace("state=online", "state=send_bulk")), 0);
        assert_eq!(in_sync("role:master\r\nconnected_slaves:0\r\n"), 0);
    }
}
