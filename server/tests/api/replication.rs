//! A `202` only once the reservation is on a replica (infra/replication.rs), on a Redis master
//! with one replica of the test's own: real `redis-server` processes, so the replica can be
//! stopped (SIGSTOP) and killed without touching what other tests use.

use crate::helpers::*;
use serde_json::json;
use server::infra::redis::Target;
use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
};

/// A redis-server process, SIGKILLed when dropped (also when the test fails).
struct RedisProcess {
    port: u16,
    child: Child,
}

impl RedisProcess {
    fn start(replica_of: Option<u16>) -> RedisProcess {
        match replica_of {
            Some(master) => Self::spawn(&["--replicaof", "127.0.0.1", &master.to_string()]),
            None => Self::spawn(&[]),
        }
    }

    /// A node in cluster mode, in no cluster yet.
    fn start_clustered() -> RedisProcess {
        Self::spawn(&["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
    }

    fn spawn(extra: &[&str]) -> RedisProcess {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // A folder of its own: a replica writes the master's snapshot there when it syncs, a
        // cluster node its nodes.conf (none left from an earlier run on the same port).
        let dir = std::env::temp_dir().join(format!("seckill-test-redis-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null());
        RedisProcess {
            port,
            child: cmd.spawn().expect("redis-server starts"),
        }
    }

    /// One command on this node alone.
    async fn ask<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query_async(&mut conn).await
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn info(&self) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .ok()
    }

    async fn in_set(&self, key: &str, member: &str) -> bool {
        let client = redis::Client::open(self.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("ZSCORE")
            .arg(key)
            .arg(member)
            .query_async::<Option<f64>>(&mut conn)
            .await
            .unwrap()
            .is_some()
    }

    async fn exists(&self, key: &str) -> bool {
        let client = redis::Client::open(self.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("EXISTS")
            .arg(key)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
            == 1
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.signal_quiet("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisProcess {
    fn signal_quiet(&self, signal: &str) -> std::io::Result<std::process::ExitStatus> {
        Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status()
    }
}

/// A master and its replica, in sync.
async fn master_and_replica() -> (RedisProcess, RedisProcess) {
    let master = RedisProcess::start(None);
    eventually(30, "the master answers", || master.info()).await;
    let replica = RedisProcess::start(Some(master.port));
    eventually(30, "the replica is in sync", || async {
        let info = replica.info().await?;
        info.contains("master_link_status:up").then_some(())
    })
    .await;
    (master, replica)
}

/// The token is in its shard's unsettled set on the replica, or it is an order already: the
/// persister takes an order's token out (of the master, and so of the replica), after its commit.
async fn on_replica_or_an_order(app: &TestApp, replica: &RedisProcess, token: &uuid::Uuid) -> bool {
    let home = app.redis.keys.home_of(token).unwrap();
    replica.in_set(&home.unsettled(), &token.to_string()).await
        || order_status(app, &token.to_string()).await.is_some()
}

/// An instance on this master, answering a buy once its writes are on one replica.
async fn app_on(master: &RedisProcess) -> TestApp {
    spawn_app_with(|c| {
        c.redis = Target::Single(master.url());
        c.redis_wait_replicas = 1;
    })
    .await
}

#[tokio::test]
async fn a_buy_is_answered_once_its_reservation_is_on_the_replica() {
    let (master, replica) = master_and_replica().await;
    let app = app_on(&master).await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 10, json!({})).await;
    let id = activity["id"].as_i64().unwrap();
    let buyers = shoppers(&app, 3).await;

    // Replica in sync: the token the 202 names is already on the replica, the moment it is said.
    let path = app.path(&buyers[0].client, id).await;
    let (status, body) = app
        .buy_keyed(&buyers[0].client, id, "first", json!({"path": path}))
        .await;
    assert_eq!(status, 202, "{body}");
    let first_token: uuid::Uuid = body["token"].as_str().unwrap().parse().unwrap();
    assert!(
        on_replica_or_an_order(&app, &replica, &first_token).await,
        "a 202 was said before the reservation reached the replica"
    );

    // Replica connected but not answering (stopped): no 202 may be said; 503, and nothing is
    // lost: once it answers again, the retry with the same key gets the same reservation.
    let path = app.path(&buyers[1].client, id).await;
    replica.signal("-STOP");
    let (status, body) = app
        .buy_keyed(
            &buyers[1].client,
            id,
            "second",
            json!({"path": path.clone()}),
        )
        .await;
    replica.signal("-CONT");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "overloaded", "{body}");
    let token = eventually(30, "the retry is answered 202", || async {
        let (status, body) = app
            .buy_keyed(
                &buyers[1].client,
                id,
                "second",
                json!({"path": path.clone()}),
            )
            .await;
        (status == 202).then(|| body["token"].as_str().unwrap().to_string())
    })
    .await;
    let (status, again) = app
        .buy_keyed(&buyers[1].client, id, "second", json!({"path": path}))
        .await;
    assert_eq!(
        (status, again["token"].as_str()),
        (202, Some(token.as_str()))
    );
    assert_eq!(app.remaining(id).await, 8, "one unit per buyer, none twice");

    // No replica connected at all (it died): nothing to wait for, the buy is answered as on a
    // single Redis rather than refused until a replica returns.
    drop(replica);
    eventually(30, "the master sees its replica gone", || async {
        master
            .info()
            .await
            .filter(|i| i.contains("connected_slaves:0"))
    })
    .await;
    let path = app.path(&buyers[2].client, id).await;
    let (status, body) = app
        .buy_keyed(&buyers[2].client, id, "third", json!({"path": path}))
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(app.remaining(id).await, 7);
    // Every 202 of the three is an order in PostgreSQL, one each, and nothing else is.
    let first = first_token.to_string();
    let tokens = [first, token, body["token"].as_str().unwrap().to_string()];
    assert_settled(&app, id, &tokens).await;
    let owners: Vec<i64> =
        sqlx::query_scalar("SELECT user_id FROM orders WHERE activity_id = $1 ORDER BY user_id")
            .bind(id)
            .fetch_all(&app.db)
            .await
            .unwrap();
    let mut buyer_ids: Vec<i64> = buyers.iter().map(|b| b.id).collect();
    buyer_ids.sort();
    assert_eq!(owners, buyer_ids);
}

/// The gate keeps its rate buckets on the master alone (`redis.set_repl`): a failover forgets
/// them, which no promise depends on. What a promise depends on (the stock, the holders' counts,
/// the token, the key's record) is on the replica once the 202 is said.
#[tokio::test]
async fn rate_buckets_stay_on_the_master_and_what_a_promise_needs_reaches_the_replica() {
    let (master, replica) = master_and_replica().await;
    let app = app_on(&master).await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 10, json!({"per_user_limit": 2})).await;
    let id = activity["id"].as_i64().unwrap();
    let buyer = &shoppers(&app, 1).await[0];
    let path = app.path(&buyer.client, id).await;
    let (status, body) = app
        .buy_keyed(
            &buyer.client,
            id,
            "kept",
            json!({"path": path, "quantity": 2}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let token: uuid::Uuid = body["token"].as_str().unwrap().parse().unwrap();

    let shard = app.redis.keys.shard(id, 0, 1);
    // The buyer's bucket and the address's (every test client comes from 127.0.0.1), in the
    // hash of the buy's generation.
    let limits = test_config().gate;
    let now = chrono::Utc::now().timestamp_millis();
    let bucket = rate_bucket(&app.redis, &limits, &shard, &format!("u:{}", buyer.id), now).await;
    assert!(bucket.is_some(), "the buyer's bucket is not on the master");
    let address = rate_bucket(&app.redis, &limits, &shard, "ip:127.0.0.1", now).await;
    assert!(
        address.is_some(),
        "the address's bucket is not on the master"
    );
    for key in rate_generations(&limits, &shard, now) {
        assert!(!replica.exists(&key).await, "{key} reached the replica");
    }
    for key in [shard.stock(), shard.holders()] {
        assert!(replica.exists(&key).await, "{key} is not on the replica");
    }
    assert!(
        on_replica_or_an_order(&app, &replica, &token).await,
        "the token's record is not on the replica"
    );
    let held: Option<String> = replica
        .ask(&["HGET", &shard.holders(), &buyer.id.to_string()])
        .await
        .unwrap();
    assert_eq!(
        held.as_deref(),
        Some("2"),
        "the holder's count on the replica"
    );
    let first: Option<String> = replica
        .ask(&[
            "HGET",
            &shard.idempotency_answers(),
            &server::infra::keys::idempotency_field(buyer.id, "kept"),
        ])
        .await
        .unwrap();
    assert_eq!(
        first,
        Some(token.to_string()),
        "the key's first answer on the replica"
    );
}

/// `WAIT` counts the replicas that acknowledged the last write *of its own connection*, as of its
/// previous command: on a connection kept for waiting, which writes nothing, it answered at once
/// for a write made after its last wait, whatever the replica held. A write made while the
/// replica is stopped must not be confirmed.
#[tokio::test]
async fn a_write_made_after_the_last_wait_is_confirmed_only_once_on_the_replica() {
    use server::infra::{
        redis::connect,
        replication::{Confirmed, Replication, Witness},
    };
    let (master, replica) = master_and_replica().await;
    let target = Target::Single(master.url());
    let writes = connect(&target).await.unwrap();
    let replication = Replication::new(
        Some(connect(&target).await.unwrap()),
        1,
        std::time::Duration::from_millis(500),
    );
    let key = "{wait}:stock";
    let holds = |value: &str| Witness::value(key.to_string(), value);
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(1)
        .query_async(&mut writes.clone())
        .await
        .unwrap();
    assert_eq!(
        replication.confirm(holds("1")).await.unwrap(),
        Confirmed::Replicated
    );
    // The replica has acknowledged everything (the master's offset is its offset), and the wait
    // connection's last command came after that.
    eventually(
        30,
        "the replica acknowledges the master's offset",
        || async {
            let info = master.info().await?;
            let field = |name: &str| -> Option<i64> {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse().ok())
            };
            let offset = field("master_repl_offset:")?;
            let acked: i64 = info
                .lines()
                .find_map(|l| l.strip_prefix("slave0:"))?
                .split(',')
                .find_map(|kv| kv.strip_prefix("offset="))?
                .parse()
                .ok()?;
            (acked == offset).then_some(())
        },
    )
    .await;
    assert_eq!(
        replication.confirm(holds("1")).await.unwrap(),
        Confirmed::Replicated
    );

    replica.signal("-STOP");
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(2)
        .query_async(&mut writes.clone())
        .await
        .unwrap();
    let confirmed = replication.confirm(holds("2")).await.unwrap();
    replica.signal("-CONT");
    assert_eq!(
        confirmed,
        Confirmed::NotYet,
        "a write the stopped replica does not hold was confirmed"
    );
    // Once the replica runs again, the same write is confirmed.
    let confirmed = eventually(30, "the replica acknowledges", || async {
        replication
            .confirm(holds("2"))
            .await
            .ok()
            .filter(|c| *c == Confirmed::Replicated)
    })
    .await;
    assert_eq!(confirmed, Confirmed::Replicated);
}

/// A replica still loading its master's snapshot (the node that died, restarted as the replica
/// of the one promoted in its place) acknowledges nothing for seconds: its master is then a
/// master without a replica in sync, and its writes are confirmed as a single Redis's are rather
/// than refused until the snapshot is loaded. A write the node does not hold (made on another
/// node, the slot's master as the writer saw it) is confirmed by nothing here.
#[tokio::test]
async fn a_replica_loading_its_snapshot_holds_no_write_back_and_a_write_made_elsewhere_is_not_confirmed(
) {
    use server::infra::{
        redis::connect,
        replication::{Confirmed, Replication, Witness},
    };
    let (master, replica) = master_and_replica().await;
    let target = Target::Single(master.url());
    let writes = connect(&target).await.unwrap();
    let replication = Replication::new(
        Some(connect(&target).await.unwrap()),
        1,
        std::time::Duration::from_millis(300),
    );
    let key = "{loading}:stock";
    let set = |value: i64| {
        let mut conn = writes.clone();
        async move {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    };
    let holds = |value: &str| Witness::value(key.to_string(), value);
    set(1).await;
    assert_eq!(
        replication.confirm(holds("1")).await.unwrap(),
        Confirmed::Replicated
    );
    assert_eq!(
        replication.confirm(holds("9")).await.unwrap(),
        Confirmed::Elsewhere,
        "a write this node does not hold was confirmed"
    );
    // A journal's entry is known by its content: another node may have numbered another entry
    // alike (a deposed master and the replica promoted in its place both number from the clock).
    let journal = "{loading}:journal";
    let _: String = master
        .ask(&["XADD", journal, "5-1", "reservations", "one"])
        .await
        .unwrap();
    let entry = |holding: &str| Witness::entry(journal.to_string(), "5-1", holding.to_string());
    assert_eq!(
        replication.confirm(entry("one")).await.unwrap(),
        Confirmed::Replicated
    );
    assert_eq!(
        replication.confirm(entry("another")).await.unwrap(),
        Confirmed::Elsewhere,
        "an entry of the same id and other reservations was confirmed"
    );

    // The replica diverges (a master of its own for one write), so it needs the whole snapshot
    // again; the master sends it 10 s after the request.
    let _: () = master
        .ask(&["CONFIG", "SET", "repl-diskless-sync-delay", "10"])
        .await
        .unwrap();
    let _: () = replica.ask(&["REPLICAOF", "NO", "ONE"]).await.unwrap();
    let _: () = replica.ask(&["SET", "{loading}:own", "1"]).await.unwrap();
    let port = master.port.to_string();
    let _: () = replica
        .ask(&["REPLICAOF", "127.0.0.1", &port])
        .await
        .unwrap();
    eventually(
        30,
        "the replica waits for the master's snapshot",
        || async {
            let info = master.info().await?;
            info.lines()
                .any(|l| l.starts_with("slave0:") && l.contains("state=wait_bgsave"))
                .then_some(())
        },
    )
    .await;
    set(2).await;
    assert_eq!(
        replication.confirm(holds("2")).await.unwrap(),
        Confirmed::NoReplica,
        "a write was held back for a replica that cannot acknowledge it for seconds"
    );
    // Once loaded, the replica confirms again.
    let _: () = master
        .ask(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"])
        .await
        .unwrap();
    eventually(60, "the loaded replica acknowledges", || async {
        replication
            .confirm(holds("2"))
            .await
            .ok()
            .filter(|c| *c == Confirmed::Replicated)
    })
    .await;
}

/// A master cut off from its replica still journals the reservations its buys made before they
/// were refused (`503`); a failover would discard them. The relay must not turn them into orders
/// while they are on the master alone (they would be orders the new master's stock never
/// counted: seen on the hosts as shoppers past the limit and units sold twice); once the replica
/// has them, they go on, and the retry with the same key gets the same reservation.
#[tokio::test]
async fn the_relay_ships_no_reservation_its_replica_has_not_acknowledged() {
    let (master, replica) = master_and_replica().await;
    let app = app_on(&master).await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 10, json!({})).await;
    let id = activity["id"].as_i64().unwrap();
    let buyer = shoppers(&app, 1).await.remove(0);
    let path = app.path(&buyer.client, id).await;

    replica.signal("-STOP");
    let (status, body) = app
        .buy_keyed(&buyer.client, id, "key", json!({"path": path.clone()}))
        .await;
    assert_eq!(status, 503, "{body}");
    eventually(30, "the relay read the entry and held it back", || async {
        let held = app.metric("seckill_relay_held_journal_reads_total").await;
        (held.unwrap_or(0.0) > 0.0).then_some(())
    })
    .await;
    let orders = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM orders WHERE activity_id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    assert_eq!(
        orders().await,
        0,
        "an entry on the master alone became an order"
    );
    replica.signal("-CONT");

    let token = eventually(30, "the retry is answered 202", || async {
        let (status, body) = app
            .buy_keyed(&buyer.client, id, "key", json!({"path": path.clone()}))
            .await;
        (status == 202).then(|| body["token"].as_str().unwrap().to_string())
    })
    .await;
    assert_settled(&app, id, std::slice::from_ref(&token)).await;
    assert_eq!(orders().await, 1);
    assert_eq!(app.remaining(id).await, 9);
}

/// The slots each of [`three_masters`] serves.
const THIRDS: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// A cluster of the test's own: three masters, no replica, each serving a third of the slots
/// (with their ids).
async fn three_masters() -> (Vec<RedisProcess>, Vec<String>) {
    let nodes: Vec<RedisProcess> = (0..3).map(|_| RedisProcess::start_clustered()).collect();
    let mut ids = Vec::new();
    for node in &nodes {
        let id = eventually(30, "the node answers", || async {
            node.ask::<String>(&["CLUSTER", "MYID"]).await.ok()
        })
        .await;
        ids.push(id);
    }
    for (node, (from, to)) in nodes.iter().zip(THIRDS) {
        let (from, to) = (from.to_string(), to.to_string());
        let _: () = node
            .ask(&["CLUSTER", "ADDSLOTSRANGE", &from, &to])
            .await
            .unwrap();
    }
    for node in &nodes[1..] {
        let port = node.port.to_string();
        let _: () = nodes[0]
            .ask(&["CLUSTER", "MEET", "127.0.0.1", &port])
            .await
            .unwrap();
    }
    for node in &nodes {
        eventually(30, "every node sees the whole cluster", || async {
            let info: String = node.ask(&["CLUSTER", "INFO"]).await.ok()?;
            let known: String = node.ask(&["CLUSTER", "NODES"]).await.ok()?;
            (info.contains("cluster_state:ok") && known.lines().count() == 3).then_some(())
        })
        .await;
    }
    (nodes, ids)
}

/// An instance is ready while it can sell: with one master of its cluster paused (every
/// connection to it open, answering nothing) it stays ready and says which part answers, within
/// the probe's 0.8 s; with no master answering it is not ready, within the same 0.8 s.
#[tokio::test]
async fn an_instance_stays_ready_while_one_master_is_paused_and_not_when_none_answers() {
    let (nodes, _) = three_masters().await;
    let app = spawn_app_with(|c| {
        c.redis = Target::Cluster(nodes.iter().map(RedisProcess::url).collect());
        c.redis_wait_replicas = 0;
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(800))
        .build()
        .unwrap();
    let probe = || async {
        let resp = http
            .get(format!("{}/readyz", app.base))
            .send()
            .await
            .expect("an answer within 0.8 s");
        let status = resp.status().as_u16();
        (status, resp.json::<serde_json::Value>().await.unwrap())
    };
    let (status, body) = probe().await;
    assert_eq!((status, &body["status"]), (200, &json!("ready")), "{body}");

    nodes[1].signal("-STOP");
    // Past the moments the cluster client spends reading the slots anew (it asks the paused
    // master too, and every command of that client waits meanwhile).
    for _ in 0..6 {
        let (status, body) = probe().await;
        assert_eq!(status, 200, "one master paused of three: {body}");
        assert_eq!(body["status"], "degraded", "{body}");
        let redis = body["redis"].as_str().unwrap_or_default();
        assert!(redis.starts_with("answering in part"), "{body}");
    }

    nodes[0].signal("-STOP");
    nodes[2].signal("-STOP");
    let (status, body) = probe().await;
    assert_eq!(status, 503, "no master answers: {body}");
    assert_eq!(body["error"], "not_ready", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("redis"),
        "{body}"
    );
    for node in &nodes {
        node.signal("-CONT");
    }
    eventually(10, "ready again once the masters resume", || async {
        let (status, body) = probe().await;
        (status == 200 && body["status"] == "ready").then_some(())
    })
    .await;
}

/// Pages and polls never wait on one shard: with the master of one of a sale's three stock shards
/// paused, its stock poll, its page and the merchant's live figures answer at once, the paused
/// shard counted as last read; a sale whose paused shard was never read here answers `503`.
#[tokio::test]
async fn a_sales_stock_is_answered_from_the_last_read_while_one_shards_master_is_paused() {
    use server::infra::keys::slot;
    let (nodes, _) = three_masters().await;
    let app = spawn_app_with(|c| {
        c.redis = Target::Cluster(nodes.iter().map(RedisProcess::url).collect());
        c.redis_wait_replicas = 0;
    })
    .await;
    let merchant = merchant(&app).await;
    let body = json!({"stock_shards": 3, "waiting_room": false});
    let id = live_activity(&app, &merchant, 30, body.clone()).await["id"]
        .as_i64()
        .unwrap();
    let unread = live_activity(&app, &merchant, 30, body).await["id"]
        .as_i64()
        .unwrap();
    let node_of = |id: i64, shard: i16| {
        let key = app.redis.keys.shard(id, shard, 3).stock();
        THIRDS
            .iter()
            .position(|(from, to)| (*from..=*to).contains(&slot(&key)))
            .unwrap()
    };
    // Not a timing bound: without the last read, a poll waits out the client's seconds of
    // retries and response timeout.
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(1))
        .build()
        .unwrap();
    let stock = |id: i64| {
        let http = &http;
        let url = app.url(&format!("/api/activities/{id}/stock"));
        async move {
            let resp = http.get(url).send().await.expect("an answer within 1 s");
            let status = resp.status().as_u16();
            (status, resp.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (status, before) = stock(id).await;
    assert_eq!(
        (status, &before["remaining"]),
        (200, &json!(30)),
        "{before}"
    );
    let live_figures = || async {
        merchant
            .get(app.url(&format!("/api/admin/activities/{id}/stats")))
            .timeout(std::time::Duration::from_secs(1))
            .send()
            .await
            .expect("the live figures within 1 s")
    };
    // The console reads them every second or so: read once before the fault.
    assert_eq!(live_figures().await.status(), 200);

    let paused = &nodes[node_of(id, 0)];
    paused.signal("-STOP");
    for _ in 0..3 {
        let (status, during) = stock(id).await;
        assert_eq!(status, 200, "{during}");
        assert_eq!(
            during["remaining"], 30,
            "the paused shard as last read: {during}"
        );
    }
    let page = http
        .get(app.url(&format!("/activities/{id}")))
        .send()
        .await
        .expect("the sale's page within 1 s");
    assert_eq!(page.status(), 200);
    let stats = live_figures().await;
    assert_eq!(stats.status(), 200);
    let stats: serde_json::Value = stats.json().await.unwrap();
    assert_eq!(stats["remaining"], 30, "{stats}");
    if (0..3).any(|shard| node_of(unread, shard) == node_of(id, 0)) {
        let (status, body) = stock(unread).await;
        assert_eq!(
            status, 503,
            "a shard never read here is not made up: {body}"
        );
    }
    paused.signal("-CONT");
}

/// A master with no replica connected is trusted as a single Redis is, but that is also what a
/// deposed master sees: paused past the node timeout (or cut off with a minority), it wakes up
/// believing it leads while the cluster has given its slots to another node, and whatever it
/// takes is discarded once it learns. Here the deposition is made exact, with no race to win: the
/// other two masters forget the node and one of them takes its slots with a newer epoch, while
/// the node, having forgotten them too, still believes it serves them. The instance reaches the
/// cluster through that node, so its client, reading its slots anew once it sees the epoch rise,
/// hears of one master only: the majority is still counted against the three the cluster had.
#[tokio::test]
async fn a_master_the_cluster_has_replaced_confirms_nothing() {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
    use server::infra::{
        keys::slot,
        redis::{connect, Conn},
        replication::{Confirmed, Replication, Witness},
    };
    let (nodes, ids) = three_masters().await;

    let key = "{fence}:stock";
    let owner = THIRDS
        .iter()
        .position(|(from, to)| (*from..=*to).contains(&slot(key)))
        .unwrap();
    let (other, third) = ((owner + 1) % 3, (owner + 2) % 3);
    // The instance reaches the cluster through the node to be deposed: when the cluster fails
    // over, its client's slot map is read anew from there.
    let target = Target::Cluster(vec![nodes[owner].url()]);
    let writes = connect(&target).await.unwrap();
    let replication_conn = connect(&target).await.unwrap();
    let replication = Replication::new(
        Some(replication_conn.clone()),
        1,
        std::time::Duration::from_millis(300),
    );
    let set = |value: i64| {
        let mut conn = writes.clone();
        async move {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    };
    set(1).await;
    let holds = |value: &str| Witness::value(key.to_string(), value);
    assert_eq!(
        replication.confirm(holds("1")).await.unwrap(),
        Confirmed::NoReplica,
        "a master without a replica, named by every master, is trusted as a single Redis"
    );

    // The deposition. Having forgotten the others, the node no longer sees their slots served:
    // it is told to go on serving its own, as a master that believes the cluster whole does.
    let _: () = nodes[owner]
        .ask(&["CONFIG", "SET", "cluster-require-full-coverage", "no"])
        .await
        .unwrap();
    for o in [other, third] {
        let _: () = nodes[o]
            .ask(&["CLUSTER", "FORGET", &ids[owner]])
            .await
            .unwrap();
        let _: () = nodes[owner]
            .ask(&["CLUSTER", "FORGET", &ids[o]])
            .await
            .unwrap();
    }
    let (from, to) = (THIRDS[owner].0.to_string(), THIRDS[owner].1.to_string());
    let _: () = nodes[other]
        .ask(&["CLUSTER", "ADDSLOTSRANGE", &from, &to])
        .await
        .unwrap();
    // A newer epoch for the taker. A node bumps its own only when it is not already the highest
    // it knows of; then the third master's is raised, and the taker asked again once it has heard.
    eventually(30, "the taker takes the newest epoch", || async {
        let bumped: String = nodes[other].ask(&["CLUSTER", "BUMPEPOCH"]).await.ok()?;
        if bumped.starts_with("BUMPED") {
            return Some(());
        }
        let _: Option<String> = nodes[third].ask(&["CLUSTER", "BUMPEPOCH"]).await.ok();
        None
    })
    .await;
    let taken = format!("{} ", ids[other]);
    eventually(30, "the third master names the new one", || async {
        let view: String = nodes[third].ask(&["CLUSTER", "NODES"]).await.ok()?;
        let line = view.lines().find(|l| l.starts_with(&taken))?;
        // Ranges that touch are printed as one.
        let serves = line.split_whitespace().skip(8).any(|range| {
            let mut ends = range
                .split('-')
                .map(|n| n.parse::<u16>().unwrap_or(u16::MAX));
            let from = ends.next().unwrap_or(u16::MAX);
            (from..=ends.next().unwrap_or(from)).contains(&slot(key))
        });
        serves.then_some(())
    })
    .await;
    let own: String = nodes[owner].ask(&["CLUSTER", "NODES"]).await.unwrap();
    assert_eq!(
        own.lines().count(),
        1,
        "the deposed node knows no one: {own}"
    );

    // It still takes writes, believing it leads (one is made on it alone: a client that has
    // learnt of the new master would write there); none of them may be confirmed.
    let _: () = nodes[owner].ask(&["SET", key, "2"]).await.unwrap();
    // The client has seen the epoch rise and read its slots anew, from the deposed node: the only
    // master it knows now is that one, and the wait goes there.
    let Conn::Cluster(client) = &replication_conn else {
        unreachable!("a cluster target")
    };
    eventually(30, "the client names the deposed node alone", || async {
        let ping = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let answers = client
            .get()
            .route_command(redis::cmd("PING"), ping)
            .await
            .ok()?;
        matches!(answers, redis::Value::Map(ref masters) if masters.len() == 1).then_some(())
    })
    .await;
    assert_eq!(
        replication.confirm(holds("2")).await.unwrap(),
        Confirmed::Deposed,
        "a write on a master the cluster has replaced was confirmed"
    );
}
