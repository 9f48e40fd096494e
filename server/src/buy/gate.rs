//! The buy path. In-process, before any I/O: the activity (cached), the sale window, the path
//! HMAC, the waiting room's admission ticket (`queue/`), the input, this instance's sold-out flag,
//! the blocked clients and an admission limit that sheds load with `503` before latency explodes.
//! A proof of work is verified in-process (`signing::pow`); a captcha answer is taken from Redis
//! (`GETDEL`: good once, right or wrong). Then ONE script
//! call (`gate.lua`) on the buyer's home shard decides: buckets, pause, per-user limit, stock, token status, journal entry,
//! idempotency record; the buys that reach one shard together share that call (`batch.rs`), each
//! decided as if it came alone. Only when the home shard of a sharded sale is empty do more calls follow:
//! the other shards are asked in turn to lend the units (`lend.lua`), and the home shard settles
//! (`settle.lua`). The session and the client address are the HTTP layer's to establish
//! (`http/buy.rs`).

use super::{
    activities::ActivityCache,
    attempts::Attempts,
    batch::{Answer, Batcher, GateBuy, GateShard},
    blocks::Blocks,
    queue::WaitingRoom,
    soldout::SoldOut,
};
use crate::{
    domain::activity::ActivityRow,
    infra::{scripts, telemetry},
};
use crate::{
    domain::{rfc3339, ApiError, ApiResult},
    infra::{
        config::GateLimits,
        keys::{address_bucket, home_shard, idempotency_field, new_token, ShardKeys},
        metrics::Metrics,
        redis::Redis,
        replication::{Replication, Witness},
    },
};
use app::api::{BotCheck, BuyRequest, SaleId, Token, UserId, ACCEPTED};
use redis::Script;
use signing::{
    pow::{ProofOfWork, Spent},
    BuyPaths,
};
use sqlx::PgPool;
use std::{net::IpAddr, sync::Arc, time::Instant};
use tokio::sync::Semaphore;
use tracing::Instrument;

mod borrow;

/// What the gate reads and writes besides its own rules.
pub struct GateParts {
    pub db: PgPool,
    pub redis: Redis,
    pub activities: ActivityCache,
    pub sold_out: SoldOut,
    pub blocks: Blocks,
    pub attempts: Attempts,
    pub metrics: Arc<Metrics>,
    pub replication: Replication,
    pub waiting_room: WaitingRoom,
}

/// The bot check a buy passed, as far as it can be told before Redis.
enum Proof<'a> {
    /// The sale asks for none.
    None,
    /// A proof of work not verified yet (verified after the in-process sold-out answer, which
    /// the hot sold-out path gives without paying for it).
    Unverified(&'a str),
    /// A captcha id and answer, to be compared with the answer Redis holds.
    Captcha(String, String),
    /// A verified proof of work, to be spent by the script (once).
    Work(Spent),
    /// Failed in-process; the script still answers a keyed retry with its first answer.
    Refused,
}

/// An earlier request's answer, found by its Idempotency-Key.
enum Previous {
    Granted(Token),
    Borrowing,
}

/// A step of the decision: go on with this, or the answer is known (a keyed retry's token).
enum Step<T> {
    Go(T),
    Answered(Token),
}

/// The shopper and their address as the rate buckets and blocks name them.
struct Who {
    user: String,
    ip: String,
}

/// The bot check the request claims to pass, as the sale asks it (`400 captcha_invalid` when it
/// brings none that could).
fn claimed_proof(check: BotCheck, req: &BuyRequest) -> ApiResult<Proof<'_>> {
    match (check, req.pow.as_deref()) {
        (BotCheck::None, _) => Ok(Proof::None),
        // The image's alternative is always the proof of work.
        (_, Some(work)) => Ok(Proof::Unverified(work)),
        (BotCheck::Image, None) => {
            match (req.captcha_id.as_deref(), req.captcha_answer.as_deref()) {
                (Some(id), Some(answer))
                    if uuid::Uuid::parse_str(id).is_ok() && (1..=16).contains(&answer.len()) =>
                {
                    Ok(Proof::Captcha(id.to_string(), answer.to_lowercase()))
                }
                _ => Err(ApiError::CaptchaInvalid),
            }
        }
        (BotCheck::ProofOfWork, None) => Err(ApiError::CaptchaInvalid),
    }
}

pub struct Gate {
    /// Keyed retries that need a Redis read before their in-process answer, per shopper.
    keyed_lookups: governor::DefaultKeyedRateLimiter<i64>,
    batcher: Batcher,
    lend: &'static Script,
    settle: &'static Script,
    admission: Semaphore,
    limits: GateLimits,
    paths: BuyPaths,
    pow: ProofOfWork,
    parts: GateParts,
}

impl Gate {
    pub fn new(limits: GateLimits, secret: &[u8], parts: GateParts) -> Gate {
        let per_request = std::time::Duration::from_secs_f64(1.0 / limits.user_per_sec.max(0.001));
        let quota = governor::Quota::with_period(per_request)
            .expect("a positive period")
            .allow_burst(std::num::NonZeroU32::new(limits.user_burst.max(1)).expect("positive"));
        Gate {
            keyed_lookups: governor::RateLimiter::keyed(quota),
            batcher: Batcher::new(parts.redis.clone(), limits, parts.metrics.clone()),
            lend: scripts::lend(),
            settle: scripts::settle(),
            admission: Semaphore::new(limits.max_in_flight),
            limits,
            paths: BuyPaths::new(secret),
            pow: ProofOfWork::new(secret),
            parts,
        }
    }

    /// Also accepts the buy paths made with the secret before a rotation
    /// (`SECKILL_SECRET_PREVIOUS`): a shopper holding one when the instances restart with the
    /// new secret still buys.
    pub fn accepting(mut self, previous: Option<&[u8]>) -> Gate {
        self.paths = self.paths.accepting(previous);
        self
    }

    /// The replication wait the gate's answers go through (the relay's too).
    pub fn replication(&self) -> &Replication {
        &self.parts.replication
    }

    /// Forgets shoppers whose keyed-retry bucket is full again (bounds its memory).
    pub fn sweep(&self) {
        self.keyed_lookups.retain_recent();
        self.keyed_lookups.shrink_to_fit();
    }

    /// The buy path of `user` (whose account was created at `joined`) for activity `id`, only
    /// while the sale is on and only to an account the sale admits.
    pub async fn path(&self, user: UserId, joined: i64, sale: SaleId) -> ApiResult<String> {
        let (UserId(user), SaleId(id)) = (user, sale);
        let activity = self.parts.activities.get(&self.parts.db, id).await?;
        check_window(activity.starts_at, activity.ends_at)?;
        activity.admits_account(joined)?;
        Ok(self.paths.path(user, id))
    }

    /// A proof-of-work challenge for `user` on sale `id` (any time before the sale ends, so the
    /// browser solves it during the countdown).
    pub async fn challenge(&self, user: UserId, sale: SaleId) -> ApiResult<altcha::Challenge> {
        let (UserId(user), SaleId(id)) = (user, sale);
        let activity = self.parts.activities.get(&self.parts.db, id).await?;
        if chrono::Utc::now() >= activity.ends_at {
            return Err(ApiError::Ended);
        }
        Ok(self.pow.challenge(
            user,
            id,
            activity.pow_difficulty,
            chrono::Utc::now().timestamp(),
        ))
    }

    /// Counts a buy request's outcome (`accepted` or its error code) in the metrics.
    pub fn count(&self, outcome: &ApiResult<Token>) {
        self.parts.metrics.buy(outcome_code(outcome));
    }

    /// Whether a buy of sale `id` can be answered `409 sold_out` before anything of the request
    /// is read (session, address, body): this instance knows the sale sold out, holds its row,
    /// the sale is within its window and has no waiting room (an admitted shopper's refusal
    /// frees a place, which needs the session). A keyed request is never asked: a retry may be
    /// owed its first answer.
    pub fn sold_out_early(&self, SaleId(id): SaleId) -> bool {
        let state = &self.parts;
        if !state.sold_out.is_set(id) {
            return false;
        }
        let Some(activity) = state.activities.cached(id) else {
            return false;
        };
        !activity.lines_up() && check_window(activity.starts_at, activity.ends_at).is_ok()
    }

    /// Counts an early sold-out answer of sale `id` as [`Gate::decide`]'s would be.
    pub fn count_sold_out(&self, SaleId(id): SaleId) {
        self.parts
            .attempts
            .record(id, ApiError::SoldOut.code().as_str());
        self.count(&Err(ApiError::SoldOut));
    }

    /// Decides one buy of `user` (whose account was created at `joined`): the reservation
    /// token, or why not.
    pub async fn decide(
        &self,
        user: UserId,
        joined: i64,
        ip: IpAddr,
        sale: SaleId,
        idempotency: Option<String>,
        req: BuyRequest,
    ) -> ApiResult<Token> {
        let (UserId(user), SaleId(id)) = (user, sale);
        let state = &self.parts;
        let activity = state.activities.get(&state.db, id).await?;
        let outcome = match activity.admits_account(joined) {
            Ok(()) => self.judge(&activity, user, ip, idempotency, req).await,
            Err(too_new) => Err(too_new),
        };
        // Counted once the activity is known to exist: made-up ids must not grow the counters.
        state.attempts.record(id, outcome_code(&outcome));
        // An admitted shopper who bought, or who can buy nothing more, leaves the admitted
        // window: the waiting room admits the next in line.
        if activity.lines_up()
            && matches!(
                outcome,
                Ok(_) | Err(ApiError::SoldOut | ApiError::LimitReached)
            )
        {
            state.waiting_room.leave(user, id);
        }
        // A failed bot check counts against the shopper's place in the line.
        if activity.lines_up() && matches!(outcome, Err(ApiError::CaptchaInvalid)) {
            state.waiting_room.suspect(user, &activity);
        }
        outcome
    }

    /// One buy, step by step: what can be answered in-process is (the window, the path, the
    /// ticket, the quantity, the bot check's form, sold out, a failed proof of work, a block
    /// unless the request resumes a borrowing), then one gate script call decides, and its
    /// answer becomes the HTTP one.
    async fn judge(
        &self,
        activity: &ActivityRow,
        user: i64,
        ip: IpAddr,
        idempotency: Option<String>,
        req: BuyRequest,
    ) -> ApiResult<Token> {
        let quantity = self.admissible(activity, user, &req)?;
        let claimed = claimed_proof(activity.check_in_force(), &req)?;
        let proof = match self
            .in_process(activity, user, idempotency.as_deref(), claimed)
            .await?
        {
            Step::Go(proof) => proof,
            Step::Answered(token) => return Ok(token),
        };
        let who = Who {
            user: format!("u:{user}"),
            ip: format!("ip:{}", address_bucket(ip)),
        };
        if let Err(blocked) = self.not_blocked(&who) {
            // A block refuses new buys, not the end of one begun before it: a keyed retry of a
            // granted buy gets its token back, and one whose units are being borrowed resumes
            // the borrowing (the script answers a keyed retry before its buckets), so no units
            // stay held for a shopper with no token to show for them.
            match self
                .first_answer(activity, user, idempotency.as_deref())
                .await
            {
                Ok(Some(Previous::Granted(token))) => return Ok(token),
                Ok(Some(Previous::Borrowing)) => {}
                Ok(None) | Err(_) => return Err(blocked),
            }
        }
        let _permit = self
            .admission
            .try_acquire()
            .map_err(|_| ApiError::Overloaded { retry_after: 1 })?;
        let started = Instant::now();
        let asked = self.ask(
            activity,
            user,
            quantity,
            proof,
            idempotency.as_deref(),
            (&who.user, &who.ip),
        );
        // Past the deadline the buy is refused rather than held: whatever the script did, the
        // retry with the same key gets its answer.
        let answer = tokio::time::timeout(self.limits.deadline, asked)
            .await
            .unwrap_or_else(|_| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "the buy's deadline passed",
                )))
            });
        self.parts
            .metrics
            .gate_seconds
            .observe(started.elapsed().as_secs_f64());
        let answer = answer.map_err(|e| {
            // Full (maxmemory with noeviction), Redis refused the script before its first write:
            // nothing was taken, and the shopper is told the store is away, not busy.
            if e.code() == Some("OOM") {
                tracing::error!(
                    activity.id = activity.id,
                    "Redis is full (maxmemory, noeviction): buys are refused until it has room"
                );
                return ApiError::Unavailable { retry_after: 1 };
            }
            // A timeout does not prove the script did not run: the client retries with its
            // Idempotency-Key and gets the first answer.
            tracing::warn!(error = %e, activity.id = activity.id, "gate call failed");
            ApiError::Overloaded { retry_after: 1 }
        })?;
        self.answer(activity.id, answer, &who).await
    }

    /// The checks of the request itself, in-process: the sale is on, the path is this shopper's,
    /// the waiting room's ticket (no ticket, no buy: nothing reaches Redis without one), and the
    /// quantity within the per-user limit, which it returns.
    fn admissible(&self, activity: &ActivityRow, user: i64, req: &BuyRequest) -> ApiResult<i64> {
        let id = activity.id;
        check_window(activity.starts_at, activity.ends_at)?;
        if !self.paths.is_valid(&req.path, user, id) {
            return Err(ApiError::BadPath);
        }
        if activity.lines_up()
            && !req.admission.as_deref().is_some_and(|ticket| {
                self.parts.waiting_room.tickets().admits(
                    ticket,
                    user,
                    id,
                    chrono::Utc::now().timestamp_millis(),
                )
            })
        {
            return Err(ApiError::NotAdmitted);
        }
        let quantity = req.quantity.unwrap_or(1);
        if !(1..=i64::from(activity.per_user_limit)).contains(&quantity) {
            return Err(ApiError::invalid(
                "quantity",
                format!("must be between 1 and {}", activity.per_user_limit),
            ));
        }
        Ok(quantity)
    }

    /// Sold out, or a failed proof of work: the answer is given here, except to a keyed retry
    /// whose first request was granted (it gets its token back) or is borrowing. Whether it was is
    /// one read, behind a per-shopper bucket: a fresh key on every request is no way around the
    /// in-process answer. The proof of work is verified after the sold-out answer, which the hot
    /// sold-out path gives without paying for it.
    async fn in_process<'r>(
        &self,
        activity: &ActivityRow,
        user: i64,
        idempotency: Option<&str>,
        proof: Proof<'r>,
    ) -> ApiResult<Step<Proof<'r>>> {
        if self.parts.sold_out.is_set(activity.id) {
            match self.first_answer(activity, user, idempotency).await? {
                Some(Previous::Granted(token)) => return Ok(Step::Answered(token)),
                Some(Previous::Borrowing) => {}
                None => return Err(ApiError::SoldOut),
            }
        }
        let Proof::Unverified(work) = proof else {
            return Ok(Step::Go(proof));
        };
        if let Some(spent) = self.pow.verify(work, user, activity.id) {
            return Ok(Step::Go(Proof::Work(spent)));
        }
        match self.first_answer(activity, user, idempotency).await? {
            Some(Previous::Granted(token)) => Ok(Step::Answered(token)),
            Some(Previous::Borrowing) => Ok(Step::Go(Proof::Refused)),
            None => Err(ApiError::CaptchaInvalid),
        }
    }

    /// `403 blocked` while this shopper or their address is blocked (known on every instance).
    fn not_blocked(&self, who: &Who) -> ApiResult<()> {
        let blocks = &self.parts.blocks;
        match blocks
            .remaining(&who.user)
            .or_else(|| blocks.remaining(&who.ip))
        {
            Some(ms) => Err(ApiError::Blocked {
                retry_after: (ms as u64).div_ceil(1000).max(1),
            }),
            None => Ok(()),
        }
    }

    /// The gate script's answer as the API's: the token, or why not (a sold-out answer with
    /// nothing left sets this instance's flag; a block just earned is announced to every
    /// instance).
    async fn answer(&self, id: i64, answer: Answer, who: &Who) -> ApiResult<Token> {
        let state = &self.parts;
        match answer {
            Answer::Ok(token) => Ok(token),
            Answer::SoldOut { left } => {
                // Only a sale with nothing left is answered in-process from now on: a buy of
                // more than is left leaves the rest on sale for smaller ones.
                if left == 0 {
                    state.sold_out.set(id);
                }
                Err(ApiError::SoldOut)
            }
            Answer::LimitReached => Err(ApiError::LimitReached),
            Answer::CaptchaInvalid => Err(ApiError::CaptchaInvalid),
            Answer::Paused => Err(ApiError::Paused),
            Answer::RateLimited { retry_after_ms } => Err(ApiError::RateLimited {
                retry_after: retry_after_ms.div_ceil(1000).max(1),
            }),
            Answer::Blocked { address, ms } => {
                // Just earned: every instance refuses this client on every sale from now on.
                let client = if address { &who.ip } else { &who.user };
                if let Err(e) = state.blocks.block(&state.redis, client, ms).await {
                    tracing::warn!(error = %e, "block not broadcast; this instance keeps it");
                }
                tracing::info!(client = %client, block.ms = ms, "client blocked");
                Err(ApiError::Blocked {
                    retry_after: (ms as u64).div_ceil(1000).max(1),
                })
            }
            Answer::NotWarm => {
                tracing::warn!(
                    activity.id = id,
                    "stock is not in Redis; buys wait for the warm-up"
                );
                Err(ApiError::Overloaded { retry_after: 1 })
            }
            Answer::Borrow { .. } => Err(ApiError::Internal(anyhow::anyhow!(
                "a borrowing reached the answer unsettled"
            ))),
        }
    }

    /// What an earlier request with this Idempotency-Key was answered, if it was granted (or is
    /// still borrowing its units). Without a key, nothing; past the shopper's bucket, `429`.
    async fn first_answer(
        &self,
        activity: &ActivityRow,
        user: i64,
        idempotency: Option<&str>,
    ) -> ApiResult<Option<Previous>> {
        let Some(key) = idempotency else {
            return Ok(None);
        };
        self.keyed_lookups
            .check_key(&user)
            .map_err(|_| ApiError::RateLimited {
                retry_after: (1.0 / self.limits.user_per_sec.max(0.001)).ceil() as u64,
            })?;
        let redis = &self.parts.redis;
        let shards = activity.stock_shards;
        let home = redis
            .keys
            .shard(activity.id, home_shard(user, shards), shards);
        let field = idempotency_field(user, key);
        let previous: Option<String> = if self.limits.idempotency_strings {
            // During a rollout: the release before's record where the hash has none.
            let (first, before): (Option<String>, Option<String>) = redis::pipe()
                .hget(home.idempotency_answers(), &field)
                .get(home.idempotency(user, key))
                .query_async(&mut redis.conn())
                .await?;
            first.or(before)
        } else {
            redis::cmd("HGET")
                .arg(home.idempotency_answers())
                .arg(&field)
                .query_async(&mut redis.conn())
                .await?
        };
        match previous {
            Some(p) if p.starts_with("pending:") => Ok(Some(Previous::Borrowing)),
            // Given again only once it is on a replica, as the gate script's answer is: the first
            // request may have been refused while waiting for it.
            Some(token) => {
                let token = token.parse::<Token>().map_err(|e| {
                    ApiError::Internal(anyhow::anyhow!("a keyed answer that is no token: {e}"))
                })?;
                let strings = self.limits.idempotency_strings;
                let witness = granted(&home, (user, Some(key)), strings, &token.0);
                self.confirm(vec![witness]).await.map_err(|e| {
                    tracing::warn!(error = %e, activity.id = activity.id, "keyed answer not confirmed");
                    ApiError::Overloaded { retry_after: 1 }
                })?;
                Ok(Some(Previous::Granted(token)))
            }
            None => Ok(None),
        }
    }

    /// The Redis side of one buy, in its span (`gate`), the parent of the journal entry's
    /// (docs/operations.md "Traces") when traced. Only then: the span's one reader is the trace
    /// (a line the gate logs is in the request's span already), and made on every buy it would
    /// cost the untraced server.
    async fn ask(
        &self,
        activity: &ActivityRow,
        user: i64,
        quantity: i64,
        proof: Proof<'_>,
        idempotency: Option<&str>,
        (who_user, who_ip): (&str, &str),
    ) -> redis::RedisResult<Answer> {
        let span = if telemetry::enabled() {
            tracing::info_span!("gate", activity = activity.id)
        } else {
            tracing::Span::none()
        };
        self.ask_redis(
            activity,
            user,
            quantity,
            proof,
            idempotency,
            (who_user, who_ip),
        )
        .instrument(span)
        .await
    }

    /// The captcha answer, the home shard's decision (which spends a proof of work), and when
    /// the home shard is out of units, the other shards in turn.
    async fn ask_redis(
        &self,
        activity: &ActivityRow,
        user: i64,
        quantity: i64,
        proof: Proof<'_>,
        idempotency: Option<&str>,
        (who_user, who_ip): (&str, &str),
    ) -> redis::RedisResult<Answer> {
        let shards = activity.stock_shards;
        let home_index = home_shard(user, shards);
        let home = self.parts.redis.keys.shard(activity.id, home_index, shards);
        let (bot_check, spent) = self.bot_check_flag(proof).await?;
        let token = new_token(activity.id, home_index, shards);
        let sale = GateShard {
            activity: activity.id,
            shard: home_index,
            shards,
            per_user_limit: activity.per_user_limit,
        };
        let buy = GateBuy {
            user,
            quantity,
            token,
            now_ms: chrono::Utc::now().timestamp_millis(),
            bot_check,
            idempotency: idempotency.map(str::to_string),
            challenge: spent.map(|s| (s.nonce, s.expires_ms)),
            who_user: who_user.to_string(),
            who_ip: who_ip.to_string(),
            traceparent: telemetry::traceparent(&tracing::Span::current()),
        };
        let answer = self.batcher.submit(sale, buy).await?;
        if let Answer::Ok(Token(token)) = &answer {
            let strings = self.limits.idempotency_strings;
            self.confirm(vec![granted(&home, (user, idempotency), strings, token)])
                .await?;
        }
        let Answer::Borrow { token, quantity } = answer else {
            return Ok(answer);
        };
        self.borrow_for(
            activity,
            user,
            &home,
            home_index,
            (token, quantity),
            idempotency,
        )
        .await
    }

    /// The bot check as the gate script takes it: 0 none, 1 a right captcha answer (the
    /// captcha spent here), 2 a wrong or refused one, 3 a verified proof of work (spent by the
    /// script, which is given its nonce).
    async fn bot_check_flag(&self, proof: Proof<'_>) -> redis::RedisResult<(u8, Option<Spent>)> {
        Ok(match proof {
            Proof::None => (0, None),
            Proof::Captcha(id, answer) => {
                let redis = &self.parts.redis;
                let expected: Option<String> = redis::cmd("GETDEL")
                    .arg(redis.keys.captcha(&id))
                    .query_async(&mut redis.conn())
                    .await?;
                let right = expected.is_some_and(|e| e.to_lowercase() == answer);
                (if right { 1 } else { 2 }, None)
            }
            Proof::Work(spent) => (3, Some(spent)),
            // Verified before this call; never reaches here unverified.
            Proof::Unverified(_) | Proof::Refused => (2, None),
        })
    }
}

/// What shows a node holds the grant of `token` on `home`: a keyed buy's first answer (kept for
/// the key's lifetime, whatever became of the token: a keyed retry's token may be an order by
/// now; during a rollout, or the release before's record of it), else the token among the
/// shard's unsettled ones (new: not an order yet).
fn granted(
    home: &ShardKeys,
    (user, idempotency): (i64, Option<&str>),
    strings: bool,
    token: &uuid::Uuid,
) -> Witness {
    let Some(key) = idempotency else {
        return Witness::member(home.unsettled(), token);
    };
    let first = Witness::field(
        home.idempotency_answers(),
        idempotency_field(user, key),
        token,
    );
    if strings {
        first.or(Witness::value(
            home.idempotency(user, key),
            &token.to_string(),
        ))
    } else {
        first
    }
}

/// What shows a node holds a borrowing of `token` settled on `home`: as [`granted`], or a keyed
/// one's record of the key still `pending` (a borrowing resumed after its lender's reservation
/// became an order settles nothing more: the order's commit took the token's record).
fn borrowed(
    home: &ShardKeys,
    (user, idempotency): (i64, Option<&str>),
    strings: bool,
    (token, quantity): (&uuid::Uuid, i64),
) -> Witness {
    let settled = granted(home, (user, idempotency), strings, token);
    match idempotency {
        Some(key) => settled.or(Witness::field(
            home.idempotency_answers(),
            idempotency_field(user, key),
            format!("pending:{token}:{quantity}"),
        )),
        None => settled,
    }
}

/// Buys and buy paths only between the start and the end of the sale.
fn check_window(
    starts_at: chrono::DateTime<chrono::Utc>,
    ends_at: chrono::DateTime<chrono::Utc>,
) -> ApiResult<()> {
    let now = chrono::Utc::now();
    if now < starts_at {
        return Err(ApiError::NotStarted {
            starts_at: rfc3339(starts_at),
        });
    }
    if now >= ends_at {
        return Err(ApiError::Ended);
    }
    Ok(())
}

/// A buy's outcome as the metrics and the sale's report name it: `accepted` or the error code.
pub fn outcome_code<T>(outcome: &ApiResult<T>) -> &'static str {
    match outcome {
        Ok(_) => ACCEPTED,
        Err(e) => e.code().as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_bound_to_user_and_activity() {
        let paths = BuyPaths::new(b"0123456789abcdef0123456789abcdef");
        let path = paths.path(7, 9);
        assert!(paths.is_valid(&path, 7, 9));
        assert!(!paths.is_valid(&path, 8, 9));
        assert!(!paths.is_valid(&path, 7, 10));
        assert!(!paths.is_valid("", 7, 9));
        assert!(!paths.is_valid(&path[..path.len() - 1], 7, 9));
    }
}
