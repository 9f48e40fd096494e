//! The masters of a Redis Cluster, each asked on a connection of its own. The cluster client
//! (redis-rs) serves one slot map for every command: while it reads the slots anew, every
//! command waits, and when it reads them from a master that answers nothing (paused, cut off),
//! that wait lasts its response timeout. What must answer through one master's trouble asks
//! here instead: whether this instance can sell (any master answering: `/readyz`), and the
//! cluster's epoch, whose rise says a failover happened (`redis.rs`'s watch).

use redis::{aio::MultiplexedConnection, AsyncConnectionConfig, ConnectionAddr, ConnectionInfo};
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

/// A connection to one master gives up connecting after this.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// And a command on it after this (a caller's own deadline is usually shorter).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct Masters {
    inner: Arc<Inner>,
}

struct Inner {
    /// The nodes the deployment names (`REDIS_CLUSTER_URLS`), with its credentials.
    seeds: Vec<ConnectionInfo>,
    /// The masters serving slots, as a node last said (`CLUSTER NODES`).
    known: parking_lot::RwLock<Vec<ConnectionInfo>>,
    /// A connection to each node asked, by address.
    conns: parking_lot::Mutex<HashMap<String, MultiplexedConnection>>,
    /// The most masters serving slots a node has named: a majority is counted against it, never
    /// against a smaller view (a deposed master's, which names itself alone).
    most: AtomicUsize,
}

/// How the masters answered one round.
#[derive(Debug, Default)]
pub struct Round {
    pub answered: usize,
    /// Each master that did not answer, and why.
    pub missing: Vec<String>,
}

fn address(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        other => format!("{other:?}"),
    }
}

/// The masters serving slots in a `CLUSTER NODES` answer, as `host:port` (a node that names
/// itself without an address is `seed_host`'s); those the cluster has marked failed are left out.
pub fn masters_in(nodes: &str, seed_host: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?.split(',').collect::<Vec<_>>();
            let serving = fields.len() > 8;
            let failed = flags
                .iter()
                .any(|f| matches!(*f, "fail" | "noaddr" | "handshake"));
            if !flags.contains(&"master") || failed || !serving {
                return None;
            }
            let addr = fields[1].split(['@', ',']).next()?;
            let (host, port) = addr.rsplit_once(':')?;
            let host = if host.is_empty() { seed_host } else { host };
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect()
}

impl Masters {
    pub fn new(seeds: &[String]) -> anyhow::Result<Masters> {
        use redis::IntoConnectionInfo;
        let seeds = seeds
            .iter()
            .map(|u| u.as_str().into_connection_info())
            .collect::<redis::RedisResult<Vec<_>>>()?;
        Ok(Masters {
            inner: Arc::new(Inner {
                known: parking_lot::RwLock::new(Vec::new()),
                conns: parking_lot::Mutex::default(),
                most: AtomicUsize::new(0),
                seeds,
            }),
        })
    }

    /// One command to one node within `within`; a connection that failed is made anew next time.
    async fn ask<T: redis::FromRedisValue>(
        &self,
        node: &ConnectionInfo,
        cmd: &redis::Cmd,
        within: Duration,
    ) -> anyhow::Result<T> {
        let key = address(node);
        let asked = async {
            let cached = self.inner.conns.lock().get(&key).cloned();
            let mut conn = match cached {
                Some(conn) => conn,
                None => {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(CONNECT_TIMEOUT))
                        .set_response_timeout(Some(RESPONSE_TIMEOUT));
                    let conn = redis::Client::open(node.clone())?
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?;
                    self.inner.conns.lock().insert(key.clone(), conn.clone());
                    conn
                }
            };
            let answer = cmd.query_async::<T>(&mut conn).await;
            if answer
                .as_ref()
                .is_err_and(|e| e.is_io_error() || e.is_timeout())
            {
                self.inner.conns.lock().remove(&key);
            }
            answer
        };
        match tokio::time::timeout(within, asked).await {
            Ok(answer) => Ok(answer?),
            Err(_) => anyhow::bail!("{key}: no answer within {} ms", within.as_millis()),
        }
    }

    /// The masters as a node says now: the known masters and the seeds are asked at once, the
    /// first answer kept. Unchanged when none answers within `within`.
    pub async fn learn(&self, within: Duration) {
        let mut asked: Vec<ConnectionInfo> = self.inner.known.read().clone();
        asked.extend(self.inner.seeds.iter().cloned());
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("NODES");
        let answers = asked.iter().map(|node| {
            let cmd = &cmd;
            Box::pin(async move {
                let nodes: String = self.ask(node, cmd, within).await?;
                let host = match node.addr() {
                    ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => {
                        host.clone()
                    }
                    _ => String::new(),
                };
                anyhow::Ok((node.clone(), masters_in(&nodes, &host)))
            })
        });
        let Ok(((node, masters), _)) = futures_util::future::select_ok(answers).await else {
            return;
        };
        if masters.is_empty() {
            return;
        }
        self.inner.most.fetch_max(masters.len(), Ordering::Relaxed);
        let known = masters
            .into_iter()
            .map(|(host, port)| node.clone().set_addr(ConnectionAddr::Tcp(host, port)))
            .collect();
        *self.inner.known.write() = known;
    }

    /// The most masters serving slots any node has named to this instance (0 before the first
    /// answer).
    pub fn most(&self) -> usize {
        self.inner.most.load(Ordering::Relaxed)
    }

    /// The masters as last learnt.
    fn known(&self) -> Vec<ConnectionInfo> {
        self.inner.known.read().clone()
    }

    /// A `PING` to every master at once, each given `within`.
    pub async fn ping(&self, within: Duration) -> Round {
        let masters = self.known();
        let ping = redis::cmd("PING");
        let answers =
            futures_util::future::join_all(masters.iter().map(|node| async {
                (address(node), self.ask::<String>(node, &ping, within).await)
            }))
            .await;
        let mut round = Round::default();
        for (node, answer) in answers {
            match answer {
                Ok(_) => round.answered += 1,
                Err(e) => round.missing.push(format!("{node}: {e:#}")),
            }
        }
        if masters.is_empty() {
            round
                .missing
                .push("no master known yet: no node has answered".into());
        }
        round
    }

    /// The cluster's current epoch, the highest any master says within `within` (`None` when
    /// none answers).
    pub async fn epoch(&self, within: Duration) -> Option<u64> {
        let masters = self.known();
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("INFO");
        let answers = futures_util::future::join_all(
            masters
                .iter()
                .map(|node| self.ask::<String>(node, &cmd, within)),
        )
        .await;
        answers
            .into_iter()
            .filter_map(Result::ok)
            .filter_map(|info| info_number(&info, "cluster_current_epoch"))
            .max()
    }
}

/// The number a field of an `INFO` answer holds (`name:value` lines), if it is there.
pub fn info_number(info: &str, name: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::masters_in;

    #[test]
    fn the_masters_serving_slots_are_found_and_the_failed_left_out() {
        let nodes = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7002@17002 master,fail - 0 0 2 disconnected 5461-10922
c3 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
d4 127.0.0.1:7004@17004 slave a1 0 0 1 connected
e5 127.0.0.1:7005@17005 master - 0 0 5 connected
f6 :7006@17006 master,fail? - 0 0 6 connected 5461-10922
";
        assert_eq!(
            masters_in(nodes, "10.0.0.9"),
            vec![
                ("127.0.0.1".to_string(), 7001),
                ("127.0.0.1".to_string(), 7003),
                ("10.0.0.9".to_string(), 7006),
            ]
        );
    }
}
