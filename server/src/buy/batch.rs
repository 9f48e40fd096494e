//! The gate in batches. The buys that reach one stock shard of one sale on this instance are
//! decided together, in one call of `gate.lua`, which decides each as if it came alone, in the
//! order they arrived: one round trip, one script start and one read of the shard's stock for
//! many buys instead of one each.
//!
//! The batches form like a group commit: the first buy of an idle shard starts a batch, which
//! waits at most the configured window (none by default) for others to join, or until it is
//! full; while its call is in Redis, the buys that arrive gather for the next one, which leaves
//! as soon as a call is answered; while every driver of the shard is in a call, another one starts,
//! up to the calls in flight allowed per shard, so that Redis never waits for this instance
//! between two batches. A lone buy never waits longer than the window, and
//! under a crowd the batches fill by themselves. A batch of at most one buy is the gate as it
//! was: one call per buy.

use crate::infra::{
    config::GateLimits,
    keys::{ShardKeys, TOKEN_TTL_SECS},
    metrics::Metrics,
    redis::Redis,
    scripts,
};
use app::api::Token;
use parking_lot::Mutex;
use redis::{RedisError, RedisResult};
use std::{collections::HashMap, sync::Arc};
use tokio::sync::{oneshot, Notify};

/// How long a buy's Idempotency-Key keeps its first answer.
pub const IDEMPOTENCY_TTL_SECS: u64 = 24 * 3600;

/// One buy as the gate script takes it.
#[derive(Clone, Debug)]
pub struct GateBuy {
    pub user: i64,
    pub quantity: i64,
    pub token: uuid::Uuid,
    /// When the buy arrived (ms): its buckets refill up to then.
    pub now_ms: i64,
    /// 0 not asked, 1 a right captcha answer, 2 a wrong or refused one, 3 a verified proof of
    /// work, spent by the script (once) with `challenge`.
    pub bot_check: u8,
    pub idempotency: Option<String>,
    /// The proof of work's challenge: its nonce and its expiry (ms).
    pub challenge: Option<(String, i64)>,
    /// The names of the buyer's rate buckets: the shopper (`u:ID`) and their address.
    pub who_user: String,
    pub who_ip: String,
    /// The buy's W3C traceparent, carried into its journal entry (empty when not traced).
    pub traceparent: String,
}

/// The stock shard of a sale a batch is decided on, and the sale's rules the script applies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateShard {
    pub activity: i64,
    pub shard: i16,
    pub shards: i16,
    pub per_user_limit: i32,
}

/// The gate script's answer to one buy, read from the script's reply here and nowhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Granted: the reservation's token (a keyed retry's: the first request's).
    Ok(Token),
    /// The home shard is out of units: `quantity` for `token` is borrowed from the others (a
    /// keyed retry resumes the first request's borrowing).
    Borrow {
        token: uuid::Uuid,
        quantity: i64,
    },
    /// Fewer than the quantity left: how many are at most (one shard: how many it holds;
    /// borrowing: what each shard asked may still hold). Only `0` is the sale sold out for
    /// every buy: units left for smaller buys are still on sale.
    SoldOut {
        left: i64,
    },
    LimitReached,
    CaptchaInvalid,
    Paused,
    /// Past the client's bucket: when the next token comes.
    RateLimited {
        retry_after_ms: u64,
    },
    /// A block just earned, on the shopper or on their address, for `ms`.
    Blocked {
        address: bool,
        ms: i64,
    },
    /// The sale's stock is not in Redis yet.
    NotWarm,
}

impl Answer {
    /// The script's word for it (the metrics' and the tests' name).
    pub fn code(&self) -> &'static str {
        match self {
            Answer::Ok(_) => "ok",
            Answer::Borrow { .. } => "borrow",
            Answer::SoldOut { .. } => "sold_out",
            Answer::LimitReached => "limit_reached",
            Answer::CaptchaInvalid => "captcha_invalid",
            Answer::Paused => "paused",
            Answer::RateLimited { .. } => "rate_limited",
            Answer::Blocked { .. } => "blocked",
            Answer::NotWarm => "not_warm",
        }
    }

    /// One answer of the script's reply: its code and detail (gate.lua's header says each).
    fn parse(code: &str, detail: &str) -> RedisResult<Answer> {
        let bad = |what: &str| {
            RedisError::from((
                redis::ErrorKind::Client,
                "the gate script answered",
                format!("{what}: {code} {detail:?}"),
            ))
        };
        let number = |text: &str| text.parse::<i64>().map_err(|_| bad("a bad number"));
        Ok(match code {
            "ok" => Answer::Ok(detail.parse().map_err(|_| bad("a bad token"))?),
            "borrow" => {
                let (token, quantity) =
                    detail.split_once(' ').ok_or_else(|| bad("a bad borrow"))?;
                Answer::Borrow {
                    token: token.parse().map_err(|_| bad("a bad token"))?,
                    quantity: number(quantity)?,
                }
            }
            "sold_out" => Answer::SoldOut {
                left: number(detail)?,
            },
            "limit_reached" => Answer::LimitReached,
            "captcha_invalid" => Answer::CaptchaInvalid,
            "paused" => Answer::Paused,
            "rate_limited" => Answer::RateLimited {
                retry_after_ms: number(detail)?.max(0) as u64,
            },
            "blocked" => {
                let (whom, ms) = detail.split_once(' ').ok_or_else(|| bad("a bad block"))?;
                Answer::Blocked {
                    address: whom == "address",
                    ms: number(ms)?,
                }
            }
            "not_warm" => Answer::NotWarm,
            // `bad_args` and anything else: a bug of the caller or the script.
            _ => return Err(bad("an error")),
        })
    }
}

/// Decides `buys` on one stock shard in one call of the gate script: one answer per buy, in the
/// order given, each what that buy alone would have been answered at that point.
pub async fn decide(
    redis: &Redis,
    limits: &GateLimits,
    sale: &GateShard,
    buys: &[GateBuy],
) -> RedisResult<Vec<Answer>> {
    let keys = &redis.keys;
    let home: ShardKeys = keys.shard(sale.activity, sale.shard, sale.shards);
    let mut call = scripts::gate().prepare_invoke();
    // The buckets' generation is the batch's last buy's: its buys arrived in order.
    let generation = limits.bucket_generation(buys.iter().map(|b| b.now_ms).max().unwrap_or(0));
    call.key(home.stock())
        .key(home.meta())
        .key(home.holders())
        .key(home.journal())
        .key(home.unsettled())
        .key(home.rates(generation - 1))
        .key(home.rates(generation))
        .key(home.rates(generation + 1))
        .key(home.owners())
        .key(home.idempotency_answers());
    call.arg(limits.user_burst)
        .arg(limits.user_per_sec)
        .arg(limits.ip_burst)
        .arg(limits.ip_per_sec)
        .arg(limits.strikes_before_block)
        .arg(limits.block_ms)
        .arg(TOKEN_TTL_SECS)
        .arg(IDEMPOTENCY_TTL_SECS)
        .arg(sale.activity)
        .arg(sale.per_user_limit)
        .arg(sale.shards)
        // A generation's hash lives on while a later batch may read it (two generations on).
        .arg(3 * limits.bucket_generation_ms())
        .arg(u8::from(limits.token_records))
        .arg(u8::from(limits.idempotency_strings));
    for buy in buys {
        call.key(home.token(&buy.token))
            .key(match &buy.idempotency {
                Some(k) if limits.idempotency_strings => home.idempotency(buy.user, k),
                _ => keys.unused(&home),
            })
            .key(match &buy.challenge {
                Some((nonce, _)) => home.spent_challenge(nonce),
                None => keys.unused(&home),
            });
        call.arg(buy.user)
            .arg(buy.quantity)
            .arg(buy.token.to_string())
            .arg(buy.now_ms)
            .arg(buy.bot_check)
            .arg(buy.idempotency.as_deref().unwrap_or_default())
            .arg(buy.challenge.as_ref().map_or(0, |(_, expires)| *expires))
            .arg(&buy.traceparent)
            .arg(&buy.who_user)
            .arg(&buy.who_ip);
    }
    let flat: Vec<String> = call.invoke_async(&mut redis.conn()).await?;
    if flat.len() != 2 * buys.len() {
        return Err(RedisError::from((
            redis::ErrorKind::Client,
            "the gate script answered a batch with the wrong number of answers",
        )));
    }
    flat.chunks(2)
        .map(|answer| Answer::parse(&answer[0], &answer[1]))
        .collect()
}

type Reply = oneshot::Sender<RedisResult<Answer>>;

#[derive(Default)]
struct Gathering {
    /// Drivers of this shard, and how many of them are in a call now.
    drivers: usize,
    busy: usize,
    buys: Vec<(GateBuy, Reply)>,
    full: Arc<Notify>,
}

/// The batches of this instance, one gathering per stock shard.
#[derive(Clone)]
pub struct Batcher {
    redis: Redis,
    limits: GateLimits,
    metrics: Arc<Metrics>,
    shards: Arc<Mutex<HashMap<GateShard, Gathering>>>,
}

impl Batcher {
    pub fn new(redis: Redis, limits: GateLimits, metrics: Arc<Metrics>) -> Batcher {
        Batcher {
            redis,
            limits,
            metrics,
            shards: Arc::default(),
        }
    }

    /// The answer to one buy, decided in the next batch of its shard.
    pub async fn submit(&self, sale: GateShard, buy: GateBuy) -> RedisResult<Answer> {
        if self.limits.batching.max <= 1 {
            return self.call(&sale, &[buy]).await.map(|mut a| a.remove(0));
        }
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut shards = self.shards.lock();
            let gathering = shards.entry(sale.clone()).or_default();
            gathering.buys.push((buy, tx));
            if gathering.buys.len() >= self.limits.batching.max {
                gathering.full.notify_one();
            }
            // A driver more while every one is in a call, up to the calls in flight allowed: the
            // connection carries them back to back, so Redis never waits for this instance.
            let start = gathering.drivers == 0
                || (gathering.busy == gathering.drivers
                    && gathering.drivers < self.limits.batching.in_flight);
            if start {
                gathering.drivers += 1;
            }
            start
        };
        if start {
            tokio::spawn(self.clone().drive(sale));
        }
        rx.await.unwrap_or_else(|_| {
            Err(RedisError::from((
                redis::ErrorKind::Client,
                "the gate batch ended without an answer",
            )))
        })
    }

    /// One call after another for this shard while buys keep coming.
    async fn drive(self, sale: GateShard) {
        if !self.limits.batching.window.is_zero() {
            let full = {
                let shards = self.shards.lock();
                shards.get(&sale).map(|g| g.full.clone())
            };
            if let Some(full) = full {
                let _ = tokio::time::timeout(self.limits.batching.window, full.notified()).await;
            }
        }
        loop {
            let batch = {
                let mut shards = self.shards.lock();
                let gathering = shards.entry(sale.clone()).or_default();
                if gathering.buys.is_empty() {
                    gathering.drivers -= 1;
                    if gathering.drivers == 0 {
                        shards.remove(&sale);
                    }
                    return;
                }
                gathering.busy += 1;
                let take = gathering.buys.len().min(self.limits.batching.max);
                gathering.buys.drain(..take).collect::<Vec<_>>()
            };
            let (buys, replies): (Vec<GateBuy>, Vec<Reply>) = batch.into_iter().unzip();
            let answers = self.call(&sale, &buys).await;
            if let Some(gathering) = self.shards.lock().get_mut(&sale) {
                gathering.busy -= 1;
            }
            match answers {
                Ok(answers) => {
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        let _ = reply.send(Ok(answer));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// One gate call, given the buy's deadline: a call to a master that died or stopped answering
    /// (the client retrying it across a failover) never holds the shard's later batches past
    /// theirs. Its buys are answered as the gate answers any timeout: their keyed retries get the
    /// first answer, whatever the script did.
    async fn call(&self, sale: &GateShard, buys: &[GateBuy]) -> RedisResult<Vec<Answer>> {
        self.metrics.gate_batch_size.observe(buys.len() as f64);
        let decided = decide(&self.redis, &self.limits, sale, buys);
        tokio::time::timeout(self.limits.deadline, decided)
            .await
            .unwrap_or_else(|_| {
                Err(RedisError::from((
                    redis::ErrorKind::Io,
                    "the shard's master did not answer within the buy's deadline",
                )))
            })
    }
}
