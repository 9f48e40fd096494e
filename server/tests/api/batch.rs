//! The gate in batches (`buy/batch.rs`, `gate.lua`) against the gate one buy at a time: random
//! runs of buys — one shopper twice in a batch, retries of one Idempotency-Key inside and across
//! batches, the per-user limit and the stock reached mid-batch, a borrow on a sharded sale, wrong
//! and reused bot checks, buckets emptied into strikes and blocks, a pause — are decided once buy
//! by buy and once in batches, each run in a keyspace of its own, and every answer and every key
//! the gate writes must be the same. On one Redis, and on the Redis Cluster when the suite runs
//! there.

use crate::helpers::{rate_bucket, rate_generations, test_config};
use proptest::{prelude::*, test_runner::TestRunner};
use server::{
    buy::batch::{decide, Answer, GateBuy, GateShard},
    infra::{
        config::GateLimits,
        keys::{Keys, ShardKeys},
        redis::{connect, Redis},
    },
    pipeline::journal::{read_entry, Entry},
};

const SHOPPERS: usize = 4;
const KEYS_PER_SHOPPER: u8 = 2;
const NONCES: u8 = 3;
const ACTIVITY: i64 = 7;
const SHARD: i16 = 0;

#[derive(Clone, Debug)]
enum Check {
    None,
    CaptchaRight,
    CaptchaWrong,
    /// A verified proof of work whose challenge is one of a few (so one is spent twice).
    Work(u8),
    /// A proof of work whose challenge has expired.
    Expired(u8),
}

#[derive(Clone, Debug)]
enum Op {
    /// A buy; `then_cut` ends the batch after it.
    Buy {
        shopper: usize,
        quantity: i64,
        key: Option<u8>,
        check: Check,
        after_ms: i64,
        then_cut: bool,
    },
    /// The merchant pauses or resumes the sale (between batches).
    Pause(bool),
    /// Units added (between batches).
    AddStock(i64),
}

fn check() -> impl Strategy<Value = Check> {
    prop_oneof![
        6 => Just(Check::None),
        1 => Just(Check::CaptchaRight),
        1 => Just(Check::CaptchaWrong),
        2 => (0..NONCES).prop_map(Check::Work),
        1 => (0..NONCES).prop_map(Check::Expired),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let buy = (
        0..SHOPPERS,
        1i64..=3,
        proptest::option::weighted(0.5, 0..KEYS_PER_SHOPPER),
        check(),
        prop_oneof![4 => Just(0i64), 1 => 1i64..1500],
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            |(shopper, quantity, key, check, after_ms, then_cut)| Op::Buy {
                shopper,
                quantity,
                key,
                check,
                after_ms,
                then_cut,
            },
        );
    prop_oneof![
        12 => buy,
        1 => any::<bool>().prop_map(Op::Pause),
        1 => (1i64..4).prop_map(Op::AddStock),
    ]
}

/// A sale: its shard count (2: an empty shard answers `borrow`), its stock (`None`: not in
/// Redis yet) and the run of operations.
fn scenario() -> impl Strategy<Value = (i16, Option<i64>, Vec<Op>)> {
    (
        1i16..=2,
        proptest::option::weighted(0.9, 0i64..10),
        proptest::collection::vec(op(), 1..30),
    )
}

/// Tight buckets, so runs reach `rate_limited` and `blocked`. The buckets' keys expire in real
/// time (at least `block_ms`) while the runs' clock is made up: a long block keeps every bucket of
/// a run alive however slowly the machine runs it (with 2 s, a loaded machine let the one-by-one
/// run's buckets lapse mid-run and not the batched run's).
fn limits() -> GateLimits {
    GateLimits {
        user_burst: 3,
        user_per_sec: 2.0,
        ip_burst: 5,
        ip_per_sec: 4.0,
        strikes_before_block: 3,
        block_ms: 600_000,
        ..Default::default()
    }
}

fn buy_of(op: &Op, token: uuid::Uuid, now_ms: i64) -> GateBuy {
    let Op::Buy {
        shopper,
        quantity,
        key,
        check,
        ..
    } = op
    else {
        unreachable!("only buys are decided")
    };
    let (bot_check, challenge) = match check {
        Check::None => (0, None),
        Check::CaptchaRight => (1, None),
        Check::CaptchaWrong => (2, None),
        Check::Work(n) => (3, Some((format!("n{n}"), now_ms + 600_000))),
        Check::Expired(n) => (3, Some((format!("n{n}"), now_ms - 1))),
    };
    GateBuy {
        user: 1000 + *shopper as i64,
        quantity: *quantity,
        token,
        now_ms,
        bot_check,
        idempotency: key.map(|k| format!("key-{k}")),
        challenge,
        who_user: format!("u:{shopper}"),
        // Two shoppers to an address: an address bucket shared inside a batch.
        who_ip: format!("ip:10.0.0.{}", shopper % 2),
        traceparent: String::new(),
    }
}

/// Runs the operations in a keyspace of its own, the buys in batches cut where `batched` says
/// (or one by one), and returns every answer.
async fn run(
    redis: &Redis,
    sale: &GateShard,
    stock: Option<i64>,
    ops: &[Op],
    tokens: &[uuid::Uuid],
    start_ms: i64,
    batched: bool,
) -> Vec<Answer> {
    let shard = redis.keys.shard(sale.activity, sale.shard, sale.shards);
    let mut conn = redis.conn();
    if let Some(units) = stock {
        let _: () = redis::cmd("SET")
            .arg(shard.stock())
            .arg(units)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let mut answers = Vec::new();
    let mut pending: Vec<GateBuy> = Vec::new();
    let mut now = start_ms;
    for (op, token) in ops.iter().zip(tokens) {
        match op {
            Op::Buy {
                after_ms, then_cut, ..
            } => {
                now += after_ms;
                pending.push(buy_of(op, *token, now));
                if !batched || *then_cut {
                    answers.extend(decide(redis, &limits(), sale, &pending).await.unwrap());
                    pending.clear();
                }
            }
            Op::Pause(_) | Op::AddStock(_) if !pending.is_empty() => {
                answers.extend(decide(redis, &limits(), sale, &pending).await.unwrap());
                pending.clear();
                apply(redis, &shard, op).await;
            }
            _ => apply(redis, &shard, op).await,
        }
    }
    if !pending.is_empty() {
        answers.extend(decide(redis, &limits(), sale, &pending).await.unwrap());
    }
    answers
}

async fn apply(redis: &Redis, shard: &ShardKeys, op: &Op) {
    let mut conn = redis.conn();
    match op {
        Op::Pause(on) => {
            let _: () = redis::cmd("HSET")
                .arg(shard.meta())
                .arg("paused")
                .arg(if *on { "1" } else { "0" })
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        Op::AddStock(units) => {
            let _: () = redis::cmd("INCRBY")
                .arg(shard.stock())
                .arg(units)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        Op::Buy { .. } => unreachable!("buys are decided"),
    }
}

/// Every key a run's gate may have written, named without the run's prefix, with what it holds
/// (a stream by its reservations, whose entry ids are times) and whether it expires; and each
/// client's rate bucket as a gate call at the run's end (`end_ms`) finds it, whichever
/// generation's hash holds it.
async fn snapshot(
    redis: &Redis,
    sale: &GateShard,
    tokens: &[uuid::Uuid],
    end_ms: i64,
) -> Vec<String> {
    let keys = &redis.keys;
    let shard = keys.shard(sale.activity, sale.shard, sale.shards);
    let mut names = vec![
        shard.stock(),
        shard.meta(),
        shard.holders(),
        shard.journal(),
        shard.unsettled(),
        shard.owners(),
        shard.idempotency_answers(),
        keys.unused(&shard),
    ];
    names.extend(tokens.iter().map(|t| shard.token(t)));
    for shopper in 0..SHOPPERS {
        names.extend(
            (0..KEYS_PER_SHOPPER)
                .map(|k| shard.idempotency(1000 + shopper as i64, &format!("key-{k}"))),
        );
    }
    names.extend(rate_generations(&limits(), &shard, end_ms));
    names.extend((0..NONCES).map(|n| shard.spent_challenge(&format!("n{n}"))));
    let base = shard.stock().trim_end_matches("stock").to_string();
    let mut conn = redis.conn();
    let mut out = Vec::new();
    for name in names {
        let kind: String = redis::cmd("TYPE")
            .arg(&name)
            .query_async(&mut conn)
            .await
            .unwrap();
        let value = match kind.as_str() {
            "none" => "-".to_string(),
            "string" => {
                let v: String = redis::cmd("GET")
                    .arg(&name)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                v
            }
            "hash" => {
                let mut v: Vec<(String, String)> = redis::cmd("HGETALL")
                    .arg(&name)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                v.sort();
                format!("{v:?}")
            }
            "zset" => {
                let v: Vec<(String, String)> = redis::cmd("ZRANGE")
                    .arg(&name)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                format!("{v:?}")
            }
            "stream" => {
                // Its reservations, in order, whatever entries carry them: a batch journals the
                // reservations of its buys in one entry, buys one at a time one entry each.
                let v: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                    .arg(&name)
                    .arg("-")
                    .arg("+")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let entries: Vec<Entry> = v.ids.iter().map(read_entry).collect();
                assert!(entries.iter().all(|e| e.unreadable == 0), "{entries:?}");
                format!(
                    "{:?}",
                    entries
                        .into_iter()
                        .flat_map(|e| e.reservations)
                        .collect::<Vec<_>>()
                )
            }
            other => format!("type {other}"),
        };
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&name)
            .query_async(&mut conn)
            .await
            .unwrap();
        // Which generation holds a bucket depends on when each call came: the buckets are
        // compared below, the hashes only by whether they expire.
        let value = if name.contains(":rates:") {
            String::new()
        } else {
            format!(" = {value}")
        };
        out.push(format!(
            "{}{value} (expires: {})",
            name.trim_start_matches(&base),
            ttl > 0 || kind == "none"
        ));
    }
    let clients = (0..SHOPPERS)
        .map(|shopper| format!("u:{shopper}"))
        .chain((0..2).map(|a| format!("ip:10.0.0.{a}")));
    for who in clients {
        let bucket = rate_bucket(redis, &limits(), &shard, &who, end_ms).await;
        out.push(format!("bucket {who} = {bucket:?}"));
    }
    out
}

async fn redis_with_prefix(prefix: &str) -> Redis {
    let target = test_config().redis;
    Redis {
        conn: connect(&target).await.unwrap(),
        keys: Keys::new(prefix),
        masters: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buys_decided_in_batches_get_the_answers_and_leave_the_keys_of_buys_decided_one_at_a_time()
{
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let one_by_one = redis_with_prefix(&format!("test:{run_id}:one:")).await;
    let in_batches = redis_with_prefix(&format!("test:{run_id}:batch:")).await;
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    let case = std::sync::atomic::AtomicI64::new(0);
    let codes = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let property = |(shards, stock, ops): (i16, Option<i64>, Vec<Op>)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let sale = GateShard {
            // A sale of its own per case: the keys of one case never meet another's.
            activity: ACTIVITY * 1000 + case,
            shard: SHARD,
            shards,
            per_user_limit: 3,
        };
        let tokens: Vec<uuid::Uuid> = ops.iter().map(|_| uuid::Uuid::new_v4()).collect();
        let start_ms = chrono::Utc::now().timestamp_millis();
        let end_ms = start_ms
            + ops
                .iter()
                .map(|op| match op {
                    Op::Buy { after_ms, .. } => *after_ms,
                    _ => 0,
                })
                .sum::<i64>();
        let (alone, together, alone_keys, together_keys) = tokio::task::block_in_place(|| {
            handle.block_on(async {
                let alone = run(&one_by_one, &sale, stock, &ops, &tokens, start_ms, false).await;
                let together = run(&in_batches, &sale, stock, &ops, &tokens, start_ms, true).await;
                (
                    alone,
                    together,
                    snapshot(&one_by_one, &sale, &tokens, end_ms).await,
                    snapshot(&in_batches, &sale, &tokens, end_ms).await,
                )
            })
        });
        codes
            .lock()
            .unwrap()
            .extend(together.iter().map(|answer| answer.code().to_string()));
        prop_assert_eq!(alone, together, "the answers, for {:?}", ops);
        prop_assert_eq!(alone_keys, together_keys, "the keys, for {:?}", ops);
        Ok(())
    };
    // One shopper hammering a sale in one batch reaches the block on every run; random runs
    // reach it only now and then (a block takes three strikes in the window).
    // A plain buy of one unit by the first shopper, at once, in the batch.
    let plain = || Op::Buy {
        shopper: 0,
        quantity: 1,
        key: None,
        check: Check::None,
        after_ms: 0,
        then_cut: false,
    };
    let hammering = (0..8).map(|_| plain()).collect();
    property((1, Some(100), hammering)).unwrap();
    // A sale whose stock is not in Redis answers `not_warm` on every run; random runs leave the
    // stock out one case in ten, and 64 cases once missed it.
    property((1, None, vec![plain()])).unwrap();
    assert!(codes.lock().unwrap().contains("not_warm"));
    runner.run(&scenario(), property).unwrap();
    // The runs reached every answer the gate gives (bad arguments aside).
    let every = [
        "blocked",
        "borrow",
        "captcha_invalid",
        "limit_reached",
        "not_warm",
        "ok",
        "paused",
        "rate_limited",
        "sold_out",
    ];
    assert_eq!(
        codes.into_inner().unwrap().into_iter().collect::<Vec<_>>(),
        every
    );
}

/// The sale's one stock shard, holding `units`.
async fn stock_one_shard(redis: &Redis, sale: &GateShard, units: i64) -> ShardKeys {
    let shard = redis.keys.shard(sale.activity, sale.shard, sale.shards);
    let _: () = redis::cmd("SET")
        .arg(shard.stock())
        .arg(units)
        .query_async(&mut redis.conn())
        .await
        .unwrap();
    shard
}

/// A batch journals what it granted in one entry, whatever it refused between: the relay gets
/// the reservations in the order granted, each with its buy's traceparent when traced; a batch
/// that granted nothing journals nothing.
#[tokio::test]
async fn a_batch_journals_its_reservations_in_one_entry() {
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let redis = redis_with_prefix(&format!("test:{run_id}:")).await;
    let sale = GateShard {
        activity: ACTIVITY,
        shard: SHARD,
        shards: 1,
        per_user_limit: 1,
    };
    let shard = stock_one_shard(&redis, &sale, 3).await;
    let now = chrono::Utc::now().timestamp_millis();
    let buy = |shopper: usize, at: i64| {
        let op = Op::Buy {
            shopper,
            quantity: 1,
            key: None,
            check: Check::None,
            after_ms: 0,
            then_cut: false,
        };
        buy_of(&op, uuid::Uuid::new_v4(), now + at)
    };
    // The second shopper's second buy is past the limit, between two granted ones.
    let mut buys = vec![buy(0, 0), buy(1, 1), buy(1, 2), buy(2, 3)];
    buys[3].traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into();
    let answers = decide(&redis, &limits(), &sale, &buys).await.unwrap();
    let codes: Vec<&str> = answers.iter().map(Answer::code).collect();
    assert_eq!(codes, ["ok", "ok", "limit_reached", "ok"]);
    // Sold out: nothing granted, nothing journaled.
    let refused = decide(&redis, &limits(), &sale, &[buy(3, 4)])
        .await
        .unwrap();
    assert_eq!(refused[0].code(), "sold_out");

    let journal: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(shard.journal())
        .arg("-")
        .arg("+")
        .query_async(&mut redis.conn())
        .await
        .unwrap();
    assert_eq!(journal.ids.len(), 1, "one entry for the batch");
    let entry = read_entry(&journal.ids[0]);
    let granted: Vec<(uuid::Uuid, i64, i64, Option<&str>)> = entry
        .reservations
        .iter()
        .map(|j| {
            let r = &j.reservation;
            assert_eq!((r.activity_id, r.quantity), (ACTIVITY, 1));
            (r.token, r.user_id, r.reserved_ms, j.traceparent.as_deref())
        })
        .collect();
    let expected: Vec<(uuid::Uuid, i64, i64, Option<&str>)> = [0, 1, 3]
        .iter()
        .map(|&i| {
            let b = &buys[i];
            let traced = (!b.traceparent.is_empty()).then_some(b.traceparent.as_str());
            (b.token, b.user, b.now_ms, traced)
        })
        .collect();
    assert_eq!(granted, expected);
    assert_eq!(entry.unreadable, 0);
}

/// A client's bucket across the turn of a generation (`gate.lua`): a call in the next generation
/// finds what the last one wrote, and a call timed in the generation before (another instance's
/// clock, a little behind) finds, and writes back, the newest.
#[tokio::test]
async fn a_rate_bucket_holds_across_the_turn_of_its_generation_and_a_clock_behind() {
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let redis = redis_with_prefix(&format!("test:{run_id}:")).await;
    let limits = GateLimits {
        user_burst: 2,
        user_per_sec: 1.0,
        ip_burst: 1_000_000,
        ip_per_sec: 1_000_000.0,
        strikes_before_block: 100,
        block_ms: 1_000,
        ..Default::default()
    };
    let generation_ms = limits.bucket_generation_ms();
    assert_eq!(
        generation_ms, 3_000,
        "two tokens at one a second, and a second"
    );
    let sale = GateShard {
        activity: ACTIVITY,
        shard: SHARD,
        shards: 1,
        per_user_limit: 100,
    };
    let shard = stock_one_shard(&redis, &sale, 100).await;
    // 5 ms before the turn of the generation after the present one.
    let now = chrono::Utc::now().timestamp_millis();
    let turn = (limits.bucket_generation(now) + 1) * generation_ms;
    let at = |ms: i64| {
        let op = Op::Buy {
            shopper: 0,
            quantity: 1,
            key: None,
            check: Check::None,
            after_ms: 0,
            then_cut: false,
        };
        buy_of(&op, uuid::Uuid::new_v4(), turn + ms)
    };
    let mut codes = Vec::new();
    for ms in [-5, 5, 15, -100] {
        let answer = decide(&redis, &limits, &sale, &[at(ms)]).await.unwrap();
        codes.push(answer[0].code());
    }
    // Two tokens: the first buy's before the turn, the second's after; the third is refused on
    // the bucket the second wrote, and the one timed before the turn on the newest too.
    assert_eq!(codes, ["ok", "ok", "rate_limited", "rate_limited"]);
    let bucket = rate_bucket(&redis, &limits, &shard, "u:0", turn + 20)
        .await
        .expect("the shopper's bucket");
    let strikes = bucket.split(' ').nth(2);
    assert_eq!(strikes, Some("2"), "both refusals counted: {bucket}");
    // The hashes written expire: two generations after their last write at the latest.
    for key in rate_generations(&limits, &shard, turn) {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut redis.conn())
            .await
            .unwrap();
        assert!(
            ttl == -2 || (0 < ttl && ttl <= 3 * generation_ms),
            "{key}: {ttl}"
        );
    }
}
