//! The Redis handle the rest of the server is given: one connection (a single Redis or a Redis
//! Cluster, the same to every caller) and the key layout, cloned cheaply. This is the one place
//! that opens Redis connections.
//!
//! On a cluster every command and script goes to the master of its key's slot; the key layout
//! (`keys.rs`) puts everything one script touches in one slot. A pipeline goes to the node of
//! its first key, so callers pipeline only keys of one slot ([`Redis::by_slot`] groups them).

pub use super::masters::info_number;
use super::{
    keys::{slot, Keys},
    masters::Masters,
    metrics,
    retry::until_available,
};
use anyhow::Context;
use parking_lot::RwLock;
use redis::{
    aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
    Cmd, Pipeline, RedisFuture, Value,
};
use std::{collections::HashMap, sync::Arc, time::Duration};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Long enough for a burst that queues thousands of calls on one connection (a debug build under
/// the 2,000-shopper tests saw 2 s on one Redis, more on the cluster client); a Redis that does
/// not answer within it costs the shopper a `503`, after which a retry with the same
/// Idempotency-Key gets the first answer.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where Redis is: one server, or a cluster named by some of its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Single(String),
    Cluster(Vec<String>),
}

impl Target {
    /// `REDIS_CLUSTER_URLS` (comma-separated seed nodes) when given, else `REDIS_URL`.
    pub fn new(single: &str, cluster: &[String]) -> Target {
        if cluster.is_empty() {
            Target::Single(single.to_string())
        } else {
            Target::Cluster(cluster.to_vec())
        }
    }

    /// The nodes a subscriber may listen on: in a cluster a message published on any node
    /// reaches every node.
    pub fn subscribe_urls(&self) -> Vec<String> {
        match self {
            Target::Single(url) => vec![url.clone()],
            Target::Cluster(urls) => urls.clone(),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }
}

/// A multiplexed connection that reconnects by itself, to a single Redis or to a cluster.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(SharedCluster),
}

/// The cluster connection every clone uses, replaced as a whole by [`watch`] when the cluster
/// failed over or it stops answering while a fresh one would; and the masters, each asked on a
/// connection of its own.
#[derive(Clone)]
pub struct SharedCluster(Arc<RwLock<ClusterConnection>>, Masters);

impl SharedCluster {
    pub fn get(&self) -> ClusterConnection {
        self.0.read().clone()
    }

    /// The cluster's masters, each on a connection of its own.
    pub fn masters(&self) -> &Masters {
        &self.1
    }
}

/// Times a command or pipeline and counts its failure (`metrics::REDIS`): a few atomic
/// additions, no lock and no allocation beyond the future's box.
async fn timed<T>(call: RedisFuture<'_, T>) -> redis::RedisResult<T> {
    let started = std::time::Instant::now();
    let answer = call.await;
    let meter = &*metrics::REDIS;
    meter.seconds.observe(started.elapsed().as_secs_f64());
    if answer.is_err() {
        meter.errors.inc();
    }
    answer
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => Box::pin(timed(c.req_packed_command(cmd))),
            Conn::Cluster(shared) => {
                let mut conn = shared.get();
                Box::pin(async move { timed(conn.req_packed_command(cmd)).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => Box::pin(timed(c.req_packed_commands(pipeline, offset, count))),
            Conn::Cluster(shared) => {
                let mut conn = shared.get();
                Box::pin(
                    async move { timed(conn.req_packed_commands(pipeline, offset, count)).await },
                )
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(_) => 0,
        }
    }
}

/// How the masters answered one readiness check.
#[derive(Debug, PartialEq, Eq)]
pub enum Answering {
    /// Every master (the one Redis).
    All,
    /// Some masters, not every one: the shards on those sell, the others' buys wait for their
    /// failover. Names what did not answer.
    Some(String),
}

/// A connection and where this deployment's keys live.
#[derive(Clone)]
pub struct Redis {
    pub conn: Conn,
    pub keys: Keys,
    /// Masters serving the keyspace (1 for a single Redis): the default shard count's ceiling.
    pub masters: usize,
}

impl Redis {
    /// A clone of the connection, for the `&mut` that redis-rs' commands take.
    pub fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// Whether this instance can sell: a `PING` to every master at once, each on a connection
    /// of its own and given `within` to answer. One master answering is enough
    /// ([`Answering::Some`]): its shards sell while another's master is slow, dead or being failed
    /// over; none answering is an error.
    pub async fn answering(&self, within: Duration) -> anyhow::Result<Answering> {
        let shared = match &self.conn {
            Conn::Single(_) => {
                let mut conn = self.conn();
                let cmd = redis::cmd("PING");
                let ping = cmd.query_async::<String>(&mut conn);
                match tokio::time::timeout(within, ping).await {
                    Ok(answer) => answer?,
                    Err(_) => anyhow::bail!("no answer within {} ms", within.as_millis()),
                };
                return Ok(Answering::All);
            }
            Conn::Cluster(shared) => shared,
        };
        let round = shared.1.ping(within).await;
        match (round.answered, round.missing.is_empty()) {
            (0, _) => anyhow::bail!("no master answers: {}", round.missing.join("; ")),
            (_, true) => Ok(Answering::All),
            (_, false) => Ok(Answering::Some(round.missing.join("; "))),
        }
    }

    /// Runs one pipeline per hash slot (concurrently): `key_of` names each item's key (items
    /// without one are skipped) and `fill` adds its commands. A single Redis gets the same
    /// pipelines; nothing depends on the target.
    pub async fn by_slot<T>(
        &self,
        items: &[T],
        key_of: impl Fn(&T) -> Option<String>,
        fill: impl Fn(&mut Pipeline, &str, &T),
    ) -> redis::RedisResult<()> {
        let mut groups: HashMap<u16, Pipeline> = HashMap::new();
        for item in items {
            if let Some(key) = key_of(item) {
                fill(groups.entry(slot(&key)).or_default(), &key, item);
            }
        }
        let sends = groups.into_values().map(|pipe| {
            let mut conn = self.conn();
            async move { pipe.query_async::<()>(&mut conn).await }
        });
        for result in futures_util::future::join_all(sends).await {
            result?;
        }
        Ok(())
    }
}

/// A connection with short timeouts, waiting for Redis to come up at start-up.
pub async fn connect(target: &Target) -> anyhow::Result<Conn> {
    match target {
        Target::Single(url) => {
            let client = redis::Client::open(url.as_str()).context("REDIS_URL")?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(Some(RESPONSE_TIMEOUT));
            until_available("Redis", || {
                let client = client.clone();
                let config = config.clone();
                async move {
                    Ok(Conn::Single(
                        ConnectionManager::new_with_config(client, config).await?,
                    ))
                }
            })
            .await
        }
        Target::Cluster(urls) => {
            // A failover takes the cluster a few seconds (node timeout + election): commands
            // retry across it with backoff rather than fail at once.
            let client = ClusterClient::builder(urls.iter().map(String::as_str))
                .connection_timeout(CONNECT_TIMEOUT)
                .response_timeout(RESPONSE_TIMEOUT)
                .retries(8)
                .min_retry_wait(50)
                .max_retry_wait(1_000)
                .build()
                .context("REDIS_CLUSTER_URLS")?;
            let conn = until_available("Redis Cluster", || {
                let client = client.clone();
                async move { Ok(client.get_async_connection().await?) }
            })
            .await?;
            let masters = Masters::new(urls)?;
            masters.learn(CONNECT_TIMEOUT).await;
            let shared = SharedCluster(Arc::new(RwLock::new(conn)), masters);
            tokio::spawn(watch(client, shared.clone()));
            Ok(Conn::Cluster(shared))
        }
    }
}

/// How often [`watch`] looks at the cluster: the longest a failover stays unseen by this
/// instance once the cluster has made it.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// One look of [`watch`] gives up after this (a paused master answers nothing).
const LOOK_TIMEOUT: Duration = Duration::from_millis(500);
/// [`watch`] reads which nodes are the masters every this many looks (and after a failover).
const LEARN_EVERY: u32 = 8;

/// Keeps the cluster connection current, for every clone:
///
/// - **A failover seen at once.** redis-rs learns that a slot moved only when a command to the
///   slot's old master fails or is redirected; one to a paused or cut-off master fails only at
///   its response timeout, seconds after the cluster promoted the replica, and while the client
///   reads the slots anew from such a master every command waits. So the cluster's current epoch,
///   which every failover raises, is read from the masters themselves ([`Masters`], a connection
///   each) every [`WATCH_EVERY`]; when it rose, a fresh connection (which reads the slots anew)
///   replaces the one in use, and the new master is asked from then on.
/// - **A stuck connection replaced.** Seen here under load: after a master was killed and its
///   replica promoted, redis-rs' cluster connection (1.8) stayed stuck, every command timing out
///   for minutes although every node answered. After three failed looks through it in a row, a
///   fresh connection replaces it if it answers.
async fn watch(client: ClusterClient, shared: SharedCluster) {
    use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
    async fn answers(mut conn: ClusterConnection) -> bool {
        let ping = conn.route_command(
            redis::cmd("PING"),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
        );
        matches!(tokio::time::timeout(LOOK_TIMEOUT, ping).await, Ok(Ok(_)))
    }
    let masters = shared.1.clone();
    let mut seen = masters.epoch(LOOK_TIMEOUT).await.unwrap_or(0);
    let mut failures = 0;
    for look in 1_u32.. {
        tokio::time::sleep(WATCH_EVERY).await;
        if look % LEARN_EVERY == 0 {
            masters.learn(LOOK_TIMEOUT).await;
        }
        let (epoch, through_client) =
            tokio::join!(masters.epoch(LOOK_TIMEOUT), answers(shared.get()));
        let rose = seen > 0 && epoch.is_some_and(|now| now > seen);
        seen = seen.max(epoch.unwrap_or(0));
        failures = if through_client { 0 } else { failures + 1 };
        if !rose && failures < 3 {
            continue;
        }
        if rose {
            masters.learn(LOOK_TIMEOUT).await;
        }
        let fresh = tokio::time::timeout(PROBE_TIMEOUT, client.get_async_connection()).await;
        if let Ok(Ok(fresh)) = fresh {
            if answers(fresh.clone()).await {
                *shared.0.write() = fresh;
                metrics::REDIS.reconnects.inc();
                if rose {
                    tracing::info!("the Redis Cluster failed over; its slots read anew");
                } else {
                    tracing::warn!(
                        "the Redis Cluster connection stopped answering; replaced by a fresh one"
                    );
                }
                failures = 0;
                continue;
            }
        }
        if rose {
            // Not replaced yet: the next look tries again.
            seen -= 1;
        }
    }
}

/// Listens on `channels` until the process ends, handing each message (channel, payload) to
/// `on_message`. Once subscribed (at start and after every interruption, when whatever was
/// published meanwhile is lost) it calls `on_subscribed` before the first message, so that state
/// read there and the messages after it leave no gap. After a failure it subscribes again, on the
/// next node of the list.
pub async fn listen<R, Fut>(
    urls: Vec<String>,
    channels: Vec<String>,
    on_message: impl Fn(&str, &str),
    on_subscribed: R,
) where
    R: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for url in urls.iter().cycle() {
        if let Err(e) = listen_once(url, &channels, &on_message, &on_subscribed).await {
            tracing::warn!(error = %e, "subscription lost; subscribing again");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn listen_once<R, Fut>(
    url: &str,
    channels: &[String],
    on_message: &impl Fn(&str, &str),
    on_subscribed: &R,
) -> redis::RedisResult<()>
where
    R: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use futures_util::StreamExt;
    let client = redis::Client::open(url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    for channel in channels {
        pubsub.subscribe(channel).await?;
    }
    let mut messages = pubsub.on_message();
    on_subscribed().await;
    while let Some(msg) = messages.next().await {
        if let Ok(payload) = msg.get_payload::<String>() {
            on_message(msg.get_channel_name(), &payload);
        }
    }
    Ok(())
}

/// How many masters serve the keyspace: 1 for a single Redis.
pub async fn masters(conn: &mut Conn) -> redis::RedisResult<usize> {
    if let Conn::Cluster(_) = conn {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query_async(conn).await?;
        let size = info
            .lines()
            .find_map(|l| l.strip_prefix("cluster_size:"))
            .and_then(|n| n.trim().parse().ok());
        return Ok(size.unwrap_or(1));
    }
    Ok(1)
}
