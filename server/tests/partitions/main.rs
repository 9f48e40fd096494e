//! The partition suite: the network between the hosts of `make hosts` splits while a crowd buys,
//! every process staying up. The nemesis is `scripts/hosts.sh` (iptables inside the hosts' own
//! namespaces; no packet leaves them). Each fault starts mid-crowd and heals while the crowd
//! still buys; then the cluster settles, a reconciliation round runs, and the checker reads the
//! crowd's history (every answer, its time and token) against PostgreSQL and Redis:
//!
//! - **lost**: a `202` whose token is not an order (`confirmed` or `paid`) once settled: it ended
//!   `failed`, or vanished;
//! - **oversold**: units sold above the stock, in PostgreSQL (`sold`), in the orders, or in Redis
//!   (remaining below zero); a shopper over the per-user limit;
//! - **resurrected**: units on sale in Redis beyond stock − sold once nothing is in flight (a
//!   failover that brought back units already sold);
//! - **unacknowledged orders**: orders whose token no `202` named (a reservation a `503` refused
//!   that the journal carried on anyway): counted and reported, not failed.
//!
//! Unavailability is reported, not failed: a `503` during a partition is allowed, a wrong answer
//! is not. So is the answers' p99 (the target is 2 s).
//!
//! Run with the hosts up and their variables set (`make test-partitions`, inside `make test`, runs
//! the short form: the minority master and one cut; `make partitions` every scenario, three runs
//! each, and writes the table into docs/reliability.md).

// A test tells one story from its set-up to its last assertion; the 80-line bound on functions
// (clippy.toml) is for the product's code.
#![allow(clippy::too_many_lines)]

#[path = "../api/helpers.rs"]
#[allow(dead_code)]
mod helpers;

#[path = "../chaos/record.rs"]
mod record;

#[path = "../chaos/during.rs"]
mod during;

use during::{
    longest_gap, pages_while, percentile as percentile_of, readiness_while, READY_WITHIN,
};
use helpers::*;
use loadtest::crowd::{self, Answer, CrowdOptions, Report};
use record::record_in_reliability;
use serde_json::json;
use std::{
    collections::{BTreeMap, HashSet},
    fmt::Write as _,
    process::Command,
    time::{Duration, Instant},
};

/// The hosts' Redis Cluster times a node out after this long (`scripts/hosts.sh`).
const NODE_TIMEOUT: Duration = Duration::from_secs(1);
const SHARDS: i16 = 3;

#[derive(Clone, Copy)]
struct Size {
    shoppers: usize,
    stock: i64,
    rate: u32,
    /// How long a fault holds (longer than the node timeout).
    hold: Duration,
    runs: usize,
}

const SHORT: Size = Size {
    shoppers: 6_000,
    stock: 3_000,
    rate: 400,
    hold: Duration::from_secs(6),
    runs: 1,
};
const FULL: Size = Size {
    shoppers: 20_000,
    stock: 10_000,
    rate: 800,
    hold: Duration::from_secs(8),
    runs: 3,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// An instance cut from the Redis master of the sale's first shard.
    InstanceCutFromMaster,
    /// That master cut from its replica and the other masters, the instances still reaching it:
    /// the failover happens behind it.
    MinorityMaster,
    /// That master stopped (SIGSTOP) past the node timeout, then resumed.
    MasterPaused,
    /// An instance cut from every RabbitMQ node.
    InstanceCutFromRabbitmq,
    /// An instance (its persister) cut from PostgreSQL.
    PersisterCutFromPostgres,
    /// A RabbitMQ node cut from the other two (the quorum queues' minority).
    RabbitmqMinority,
    /// A bridge: app1 sees only the first master and one other Redis node, app3 all but the master.
    Bridge,
    /// An instance's link to the master cut and healed every second.
    Flapping,
    /// The master's answers to an instance dropped, the instance's packets still arriving.
    OneWay,
    /// No fault: the crowd alone, the baseline of the purchases' latency.
    NoFault,
    /// PostgreSQL cut from every instance (their persisters too): the buys must not wait on it,
    /// the instances stay ready, the orders land after the heal.
    PostgresCutFromEveryInstance,
}

impl Fault {
    fn short() -> &'static [Fault] {
        &[
            Fault::MinorityMaster,
            Fault::InstanceCutFromMaster,
            Fault::NoFault,
            Fault::PostgresCutFromEveryInstance,
        ]
    }

    fn all() -> &'static [Fault] {
        &[
            Fault::InstanceCutFromMaster,
            Fault::MinorityMaster,
            Fault::MasterPaused,
            Fault::InstanceCutFromRabbitmq,
            Fault::PersisterCutFromPostgres,
            Fault::RabbitmqMinority,
            Fault::Bridge,
            Fault::Flapping,
            Fault::OneWay,
            Fault::NoFault,
            Fault::PostgresCutFromEveryInstance,
        ]
    }

    /// A fault of Redis (a master or the links to it): the pages and polls answer through it.
    fn is_redis(self) -> bool {
        matches!(
            self,
            Fault::InstanceCutFromMaster
                | Fault::MinorityMaster
                | Fault::MasterPaused
                | Fault::Bridge
                | Fault::Flapping
                | Fault::OneWay
        )
    }

    fn describe(self) -> &'static str {
        match self {
            Fault::InstanceCutFromMaster => "app1 cut from the first shard's Redis master",
            Fault::MinorityMaster => {
                "the first shard's Redis master cut from its replica and the other masters (instances still reach it)"
            }
            Fault::MasterPaused => "the first shard's Redis master paused (SIGSTOP), then resumed",
            Fault::InstanceCutFromRabbitmq => "app1 cut from every RabbitMQ node",
            Fault::PersisterCutFromPostgres => "app1 (its relay and persister) cut from PostgreSQL",
            Fault::RabbitmqMinority => "RabbitMQ node mq1 cut from mq2 and mq3",
            Fault::Bridge => "app1 sees only the first master and one other Redis node, app3 every node but that master",
            Fault::Flapping => "app1's link to the first shard's master cut and healed every second",
            Fault::OneWay => "the first shard's master's packets to app1 dropped (app1's still arrive)",
            Fault::NoFault => "no fault (the baseline)",
            Fault::PostgresCutFromEveryInstance => "PostgreSQL cut from every instance",
        }
    }
}

/// `scripts/hosts.sh` with `args`; its output.
fn hosts(args: &[&str]) -> String {
    let out = Command::new("../scripts/hosts.sh")
        .args(args)
        .output()
        .expect("scripts/hosts.sh runs");
    assert!(
        out.status.success(),
        "hosts.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const REDIS_HOSTS: [&str; 6] = ["redis1", "redis2", "redis3", "redis4", "redis5", "redis6"];

/// Holds the fault for `hold`, then heals it. Returns when the network is whole again.
async fn strike(fault: Fault, master: &str, hold: Duration) {
    let others: Vec<&str> = REDIS_HOSTS
        .iter()
        .copied()
        .filter(|h| *h != master)
        .collect();
    match fault {
        Fault::InstanceCutFromMaster => hosts(&["cut", "app1", master]),
        Fault::MinorityMaster => hosts(&[&["cut", master][..], &others].concat()),
        Fault::MasterPaused => hosts(&["pause", master]),
        Fault::InstanceCutFromRabbitmq => hosts(&["cut", "app1", "mq1", "mq2", "mq3"]),
        Fault::PersisterCutFromPostgres => hosts(&["cut", "app1", "pg"]),
        Fault::RabbitmqMinority => hosts(&["cut", "mq1", "mq2", "mq3"]),
        Fault::Bridge => {
            // app1 keeps the master and one other node; app3 loses the master.
            hosts(&[&["cut", "app1"][..], &others[1..]].concat());
            hosts(&["cut", "app3", master])
        }
        Fault::OneWay => hosts(&["cut-oneway", "app1", master]),
        Fault::NoFault => String::new(),
        Fault::PostgresCutFromEveryInstance => hosts(&["cut", "pg", "app1", "app2", "app3"]),
        Fault::Flapping => {
            let until = Instant::now() + hold.max(Duration::from_secs(20));
            while Instant::now() < until {
                hosts(&["cut", "app1", master]);
                tokio::time::sleep(Duration::from_millis(500)).await; // paced: the flapping's cut half
                hosts(&["heal"]);
                tokio::time::sleep(Duration::from_millis(500)).await; // paced: its whole half
            }
            return;
        }
    };
    tokio::time::sleep(hold).await; // paced: the fault holds this long while the crowd buys
    if fault == Fault::MasterPaused {
        hosts(&["resume", master]);
    }
    hosts(&["heal"]);
}

/// One scenario's figures: a row of the table.
struct Row {
    fault: Fault,
    run: usize,
    held: Duration,
    acknowledged: usize,
    lost: Vec<String>,
    oversold: i64,
    resurrected: i64,
    over_limit: i64,
    unacknowledged: i64,
    unavailable_answers: u64,
    /// The longest time without a `202` from the strike until the sale sold out.
    no_accept_for: Duration,
    p50: Duration,
    p99: Duration,
    slowest: Duration,
    settled_in: Duration,
    /// Answers of the instances' `/readyz` other than 200 while the fault held.
    not_ready: usize,
    /// The p99 of the pages and polls read while the fault held.
    page_p99: Duration,
    broken: Vec<String>,
}

fn percentile(history: &[Answer], q: f64) -> Duration {
    percentile_of(history.iter().map(|a| a.took).collect(), q)
}

async fn scenario(control: &TestApp, fault: Fault, run: usize, size: Size) -> Row {
    // Its session minted with the hosts' secret.
    let merchant = merchant_signed_with(
        control,
        server::domain::shop::DEFAULT_SHOP,
        &control.config.secret.0,
    )
    .await;
    let body = json!({
        "title": format!("Partition: {fault:?} #{run}"),
        "stock_shards": SHARDS,
        "waiting_room": false,
    });
    let id = live_activity(control, &merchant, size.stock, body).await["id"]
        .as_i64()
        .unwrap();
    let first = control.redis.keys.shard(id, 0, SHARDS).stock();
    let master = hosts(&["master-of", &first]);
    let opts = CrowdOptions {
        base_urls: vec![std::env::var("SECKILL_HOSTS_URL").expect("the hosts' variables")],
        users: size.shoppers,
        stock: size.stock,
        per_user_limit: 1,
        concurrency: 256,
        lead_secs: 0,
        show_progress: false,
        settle: false,
        activity_id: Some(id),
        rate: size.rate,
        retry_for: Duration::from_secs(30),
        stock_shards: None,
        homes_on_one_shard: false,
        waiting_room: Some(false),
        proof_of_work: None,
        greedy_every: 10,
        poll_window: None,
    };
    let target = deployment(&control.config);
    let crowd = tokio::spawn(async move { crowd::run(&target, &opts).await });
    let reading = tokio::sync::watch::channel(true);
    let front = std::env::var("SECKILL_HOSTS_URL").expect("the hosts' variables");
    let pages = tokio::spawn(pages_while(front, merchant.clone(), id, reading.1));
    eventually(60, "a tenth of the stock persisted", || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM orders WHERE activity_id = $1")
            .bind(id)
            .fetch_one(&control.db)
            .await
            .ok()
            .filter(|n| *n >= size.stock / 10)
    })
    .await;
    let struck = Instant::now();
    let probing = tokio::sync::watch::channel(true);
    let ready_urls = ["app1", "app2", "app3"]
        .iter()
        .map(|h| format!("http://{}:3000/readyz", hosts(&["addr", h])))
        .collect();
    let probes = tokio::spawn(readiness_while(ready_urls, probing.1));
    strike(fault, &master, size.hold).await;
    let held = struck.elapsed();
    let _ = probing.0.send(false);
    let _ = reading.0.send(false);
    let not_ready = probes.await.expect("the readiness probes");
    let pages = pages.await.expect("the pages' probes").since(struck);
    let report: Report = crowd
        .await
        .expect("the crowd task")
        .unwrap_or_else(|e| panic!("the load tool failed: {e:#}"));
    // Whole again: every slot served with its replica in sync, three RabbitMQ nodes, every
    // instance ready; then every token settled and a reconciliation round.
    let settling = Instant::now();
    hosts(&["settle"]);
    settle(control, id, &report).await;
    let settled_in = settling.elapsed();
    let mut row = check(control, id, fault, run, &report, held, settled_in).await;
    row.not_ready = not_ready;
    // Every scenario leaves each instance some Redis master: each can sell, so each stays ready.
    if not_ready > 0 {
        row.broken.push(format!(
            "{not_ready} readiness answers other than 200 within {READY_WITHIN:?}, though every instance reached a Redis master"
        ));
    }
    row.page_p99 = pages.p99();
    // The pages read PostgreSQL too: their promise is for the Redis faults.
    if fault.is_redis() {
        row.broken.extend(pages.broken());
    }
    row
}

/// Until every acknowledged token is an order or ended `failed`, the journals are empty and
/// nothing is unsettled (two minutes at most); then a reconciliation round.
async fn settle(control: &TestApp, id: i64, report: &Report) {
    let tokens: Vec<uuid::Uuid> = report.tokens.iter().map(|t| t.0).collect();
    let shards = control.redis.keys.shards(id, SHARDS);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut poll = tokio::time::interval(Duration::from_millis(200));
    loop {
        poll.tick().await;
        let missing: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM unnest($1::uuid[]) AS t WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.token = t)",
        )
        .bind(&tokens)
        .fetch_one(&control.db)
        .await
        .unwrap_or(i64::MAX);
        // Both journals of each shard (a stream each) and its unsettled tokens (a sorted set).
        let mut waiting = 0;
        for shard in &shards {
            let [journal, per_buy] = shard.journals();
            for (command, key) in [
                ("XLEN", journal),
                ("XLEN", per_buy),
                ("ZCARD", shard.unsettled()),
            ] {
                let len: redis::RedisResult<i64> = redis::cmd(command)
                    .arg(&key)
                    .query_async(&mut control.redis.conn())
                    .await;
                waiting += len.unwrap_or(1);
            }
        }
        if (missing == 0 && waiting == 0) || Instant::now() > deadline {
            break;
        }
    }
    for _ in 0..3 {
        match control.state.reconciler.reconcile().await {
            Ok(report) if report.iter().all(|d| d.activity_id != id || d.drift == 0) => break,
            _ => {}
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn check(
    control: &TestApp,
    id: i64,
    fault: Fault,
    run: usize,
    report: &Report,
    held: Duration,
    settled_in: Duration,
) -> Row {
    let db = &control.db;
    let (total, sold): (i64, i64) =
        sqlx::query_as("SELECT total_stock, sold FROM activities WHERE id = $1")
            .bind(id)
            .fetch_one(db)
            .await
            .unwrap();
    let orders: Vec<(uuid::Uuid, String, i32)> =
        sqlx::query_as("SELECT token, status, quantity FROM orders WHERE activity_id = $1")
            .bind(id)
            .fetch_all(db)
            .await
            .unwrap();
    let by_token: BTreeMap<uuid::Uuid, &str> =
        orders.iter().map(|(t, s, _)| (*t, s.as_str())).collect();
    let active: i64 = orders
        .iter()
        .filter(|(_, s, _)| s == "confirmed" || s == "paid")
        .map(|(_, _, q)| i64::from(*q))
        .sum();
    let acknowledged: HashSet<uuid::Uuid> = report.tokens.iter().map(|t| t.0).collect();
    let lost: Vec<String> = report
        .tokens
        .iter()
        .filter(|t| !matches!(by_token.get(&t.0), Some(&"confirmed" | &"paid")))
        .map(|t| format!("{t} ({})", by_token.get(&t.0).unwrap_or(&"no order")))
        .collect();
    let unacknowledged = orders
        .iter()
        .filter(|(t, s, _)| s != "failed" && !acknowledged.contains(t))
        .count() as i64;
    let over_limit: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT user_id FROM orders WHERE activity_id = $1 AND status IN ('confirmed', 'paid')
         GROUP BY user_id HAVING sum(quantity) > 1) o",
    )
    .bind(id)
    .fetch_one(db)
    .await
    .unwrap();
    let shards = eventually(30, "Redis answers", || async {
        server::domain::activity::stock::shard_stock(&control.redis, id, SHARDS)
            .await
            .ok()
    })
    .await;
    let remaining: i64 = shards.iter().map(|s| s.unwrap_or(0)).sum();
    let oversold = (active - total)
        .max(0)
        .max(sold - total)
        .max(-remaining.min(0));
    let resurrected = (remaining + active - total).max(0);

    let mut broken = Vec::new();
    if !lost.is_empty() {
        broken.push(format!(
            "{} acknowledged buys lost, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(3)]
        ));
    }
    if oversold > 0 {
        broken.push(format!(
            "oversold: {active} units in orders, sold {sold}, Redis {remaining}, of {total}"
        ));
    }
    if sold != active {
        broken.push(format!("activities.sold {sold} ≠ {active} units in orders"));
    }
    if resurrected > 0 {
        broken.push(format!(
            "{resurrected} units resurrected: Redis {remaining} + sold {active} > {total}"
        ));
    }
    if over_limit > 0 {
        broken.push(format!("{over_limit} shoppers over the per-user limit"));
    }
    let server_errors: Vec<(&String, &u64)> = report
        .outcomes
        .iter()
        .filter(|(k, _)| k.ends_with("_500") || k.starts_with("internal"))
        .collect();
    if !server_errors.is_empty() {
        broken.push(format!("answers 500: {server_errors:?}"));
    }
    let unavailable_answers = report
        .history
        .iter()
        .filter(|a| {
            a.outcome == "overloaded" || a.outcome.ends_with("503") || a.outcome.contains("timeout")
        })
        .count() as u64;
    eprintln!(
        "partitions: {fault:?} #{run}: {:?}; Redis shards {shards:?}",
        report.outcomes
    );
    Row {
        fault,
        run,
        held,
        acknowledged: report.tokens.len(),
        lost,
        oversold,
        resurrected,
        over_limit,
        unacknowledged,
        unavailable_answers,
        no_accept_for: longest_gap(&report.history),
        p50: percentile(&report.history, 0.5),
        p99: percentile(&report.history, 0.99),
        slowest: percentile(&report.history, 1.0),
        settled_in,
        not_ready: 0,
        page_p99: Duration::ZERO,
        broken,
    }
}

fn table(rows: &[Row], size: &Size) -> String {
    let mut out = format!(
        "{} shoppers at {}/s for {} units over {SHARDS} shards, every tenth shopper greedy (asking past the \
         limit); each fault held {} s, flapping 20 s (`cluster-node-timeout` {} s); the crowd retries a 503 or \
         a transport error for 30 s with the same key. \"fault held\" counts from the first rule made to the \
         heal (making the rules takes a second or more); \"time to settle\" from the crowd's last answer until the clusters \
         are whole and every token has ended.\n\n",
        size.shoppers,
        size.rate,
        size.stock,
        size.hold.as_secs(),
        NODE_TIMEOUT.as_secs()
    );
    out.push_str(
        "| scenario | run | fault held | acknowledged | lost | oversold | over the limit | resurrected | unacknowledged orders | unavailable answers | longest without a 202 | p99 | slowest | time to settle | not ready | page p99 |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} s | {} | {} | {} | {} | {} | {} | {} | {:.1} s | {:.2} s | {:.2} s | {:.1} s | {} | {:.0} ms |",
            r.fault.describe(),
            r.run,
            r.held.as_secs_f64(),
            r.acknowledged,
            r.lost.len(),
            r.oversold,
            r.over_limit,
            r.resurrected,
            r.unacknowledged,
            r.unavailable_answers,
            r.no_accept_for.as_secs_f64(),
            r.p99.as_secs_f64(),
            r.slowest.as_secs_f64(),
            r.settled_in.as_secs_f64(),
            r.not_ready,
            r.page_p99.as_secs_f64() * 1000.0,
        );
    }
    out
}

/// With PostgreSQL cut from every instance the purchases take no longer than without a fault
/// (docs/reliability.md): their median within the baseline's + 100 ms, and their p99 within
/// twice the baseline's + 100 ms. A buy that waited on PostgreSQL moves the median by the cut's
/// length (before the fix: p50 5.3 s); the p99 of one run is its 30 slowest answers of 3,000 and
/// follows the hosts' scheduling more than the buy path (the baseline's p99 ranged 0.04–0.41 s
/// over the clean-clone runs of 2026-11-29 and 30, on one build: a margin of 100 ms failed one).
fn within_the_baseline(rows: &mut [Row]) {
    let baseline = |of: fn(&Row) -> Duration| {
        rows.iter()
            .filter(|r| r.fault == Fault::NoFault)
            .map(of)
            .max()
    };
    let (Some(p50), Some(p99)) = (baseline(|r| r.p50), baseline(|r| r.p99)) else {
        return;
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let margin = Duration::from_millis(100);
    for row in rows
        .iter_mut()
        .filter(|r| r.fault == Fault::PostgresCutFromEveryInstance)
    {
        if row.p50 > p50 + margin {
            row.broken.push(format!(
                "the purchases' median {:.0} ms with PostgreSQL cut, past the baseline's {:.0} ms + 100 ms",
                ms(row.p50),
                ms(p50)
            ));
        }
        if row.p99 > 2 * p99 + margin {
            row.broken.push(format!(
                "the purchases' p99 {:.0} ms with PostgreSQL cut, past twice the baseline's {:.0} ms + 100 ms",
                ms(row.p99),
                ms(p99)
            ));
        }
    }
}

/// Whatever happens, the network is healed and every Redis resumed at the end.
struct Heal;

impl Drop for Heal {
    fn drop(&mut self) {
        for h in REDIS_HOSTS {
            let _ = Command::new("../scripts/hosts.sh")
                .args(["resume", h])
                .status();
        }
        let _ = Command::new("../scripts/hosts.sh").arg("heal").status();
    }
}

fn main() {
    let full = std::env::var("SECKILL_PARTITIONS").is_ok_and(|v| v == "full");
    let size = if full { FULL } else { SHORT };
    let faults = if full { Fault::all() } else { Fault::short() };
    // SECKILL_PARTITIONS_ONLY=MasterPaused,OneWay runs those scenarios alone (any form).
    let only = std::env::var("SECKILL_PARTITIONS_ONLY").unwrap_or_default();
    let faults: Vec<Fault> = if only.is_empty() {
        faults.to_vec()
    } else {
        Fault::all()
            .iter()
            .copied()
            .filter(|f| only.split(',').any(|o| o.trim() == format!("{f:?}")))
            .collect()
    };
    let _heal = Heal;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let rows = runtime.block_on(async {
        // The control instance creates the sales and reads the figures; it runs no workers and
        // no rounds of its own, and no fault reaches it (it runs on the machine).
        let mut config = test_config();
        // The instances' prefixes: the hosts hand them the caller's settings, else the defaults.
        config.redis_prefix =
            std::env::var("SECKILL_REDIS_PREFIX").unwrap_or_else(|_| "sk:".into());
        config.amqp_prefix =
            std::env::var("SECKILL_AMQP_PREFIX").unwrap_or_else(|_| "seckill".into());
        config.secret = server::infra::config::Secret(
            std::env::var("SECKILL_SECRET")
                .expect("the hosts' variables")
                .into_bytes(),
        );
        config.run_workers = false;
        config.reservation_queues = 3;
        config.reconcile_every = Duration::from_secs(3600);
        config.sweep_every = Duration::from_secs(3600);
        let control = spawn_instance(&config).await;
        let mut rows = Vec::new();
        for &fault in &faults {
            for run in 1..=size.runs {
                eprintln!("partitions: {} (run {run})", fault.describe());
                rows.push(scenario(&control, fault, run, size).await);
            }
        }
        rows
    });
    let mut rows = rows;
    within_the_baseline(&mut rows);
    let table = table(&rows, &size);
    println!("\n{table}");
    let broken: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.broken
                .iter()
                .map(move |b| format!("{:?} #{}: {b}", r.fault, r.run))
        })
        .collect();
    if full && only.is_empty() && broken.is_empty() {
        record_in_reliability("partitions", "`make partitions`", &table);
    }
    if !broken.is_empty() {
        eprintln!("BROKEN INVARIANTS:\n  {}", broken.join("\n  "));
        std::process::exit(1);
    }
    println!(
        "partitions: no acknowledged buy lost, nothing oversold ({} form)",
        if full { "full" } else { "short" }
    );
}
