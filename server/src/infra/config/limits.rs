//! The sections of the configuration each part takes (the doors, the waiting room, the gate,
//! the sign-in throttle), read from the settings.

use super::Settings;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct LoginThrottle {
    /// Failures for one username from one client address (the lock is per address).
    pub max_failures_per_user: u32,
    /// Failures for one username from everywhere, past which it gets one attempt a second.
    pub max_failures_per_user_everywhere: u32,
    pub max_failures_per_ip: u32,
    pub window: Duration,
}

/// Bounds on the doors a crowd can knock on without buying: sign-up (in Redis, over every
/// instance), and the captcha, proof-of-work challenge, waiting-room and stock endpoints
/// (in-process token buckets, per instance: a burst, then a steady rate per minute).
#[derive(Clone, Copy, Debug)]
pub struct DoorLimits {
    /// Sign-ups from one client address (an IPv6 /64) within `signup_window`.
    pub signups_per_address: u32,
    pub signup_window: Duration,
    /// Sign-ups over the whole platform per minute (a flood from many addresses).
    pub signups_per_minute: u32,
    /// Concurrent argon2 hashes for sign-ups, apart from the sign-in slots.
    pub signup_hash_concurrency: usize,
    /// The proof of work a sign-up must carry (SHA-256 hashes on average; 0: none asked).
    pub signup_pow_difficulty: u32,
    /// Image captchas per client address per minute (no sign-in needed).
    pub captchas_per_minute: u32,
    /// Proof-of-work challenges per shopper per minute.
    pub challenges_per_minute: u32,
    /// Waiting-room joins and polls per shopper per minute.
    pub queue_per_minute: u32,
    /// Stock reads per client address per minute.
    pub stock_per_minute: u32,
}

impl Default for DoorLimits {
    fn default() -> Self {
        DoorLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for DoorLimits {
    fn from(s: &Settings) -> Self {
        DoorLimits {
            signups_per_address: s.signups_per_address,
            signup_window: Duration::from_secs(s.signup_window_secs),
            signups_per_minute: s.signups_per_minute,
            signup_hash_concurrency: s.signup_hash_concurrency,
            signup_pow_difficulty: s.signup_pow_difficulty,
            captchas_per_minute: s.captchas_per_minute,
            challenges_per_minute: s.challenges_per_minute,
            queue_per_minute: s.queue_per_minute,
            stock_per_minute: s.stock_per_minute,
        }
    }
}

/// A waiting room's claim window, and the health bounds past which admission slows and stops.
#[derive(Clone, Copy, Debug)]
pub struct QueueLimits {
    /// How long an admitted shopper has to come for the turn before it lapses.
    pub claim: Duration,
    /// Units taken at the gate and not in the database yet (the journal, the queue and the
    /// persister behind): from half of it admission slows, at it admission stops.
    pub max_backlog: i64,
    /// The admission step's Redis round trip: from half of it admission slows, at it it stops.
    pub max_redis: Duration,
    /// Failed bot checks on a sale past which a shopper is kept in its line and never admitted
    /// (0: never).
    pub bot_fails: u32,
    /// Whether a shopper kept out (those bot-check failures, or a blocked client) is told
    /// nothing different from the others (`true`), or refused with `403 blocked`.
    pub shadow: bool,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for QueueLimits {
    fn from(s: &Settings) -> Self {
        QueueLimits {
            claim: Duration::from_millis(s.queue_claim_ms),
            max_backlog: s.queue_max_backlog,
            max_redis: Duration::from_millis(s.queue_max_redis_ms),
            bot_fails: s.queue_bot_fails,
            shadow: s.queue_shadow,
        }
    }
}

/// The buy path's buckets and blocks (per user and per client address) and its admission limit.
#[derive(Clone, Copy, Debug)]
pub struct GateLimits {
    pub user_burst: u32,
    pub user_per_sec: f64,
    pub ip_burst: u32,
    pub ip_per_sec: f64,
    /// Refusals past the bucket, within `block_ms`, before the client is blocked.
    pub strikes_before_block: u32,
    pub block_ms: u64,
    /// Buy requests in the gate at once on this instance; more get `503 overloaded`.
    pub max_in_flight: usize,
    /// The longest a buy waits on Redis (its script, the replica's acknowledgement, a borrowing)
    /// before it is answered `503 overloaded`: a node cut off or paused is refused fast, not held.
    pub deadline: Duration,
    /// How the buys of one stock shard are gathered into one gate call (`buy/batch.rs`).
    pub batching: Batching,
    /// The gate writes each granted reservation's record too, for a rollout from the release
    /// before (`SECKILL_GATE_TOKEN_RECORDS`).
    pub token_records: bool,
    /// The gate reads and writes the release before's record of each Idempotency-Key too, for a
    /// rollout from it (`SECKILL_GATE_IDEMPOTENCY_STRINGS`).
    pub idempotency_strings: bool,
}

/// How the gate's batches are made.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    /// How long the first buy of a batch waits for others (zero: only while the call before is
    /// in Redis).
    pub window: Duration,
    /// The most buys in one call; 1 turns batching off.
    pub max: usize,
    /// Calls of one stock shard in flight at once from this instance.
    pub in_flight: usize,
}

impl GateLimits {
    /// How long one generation of a shard's rate buckets lasts (`gate.lua`): at least as long as
    /// any bucket takes to fill again, and the strike window, and a second more. A bucket left
    /// untouched for a whole generation is as good as new, so the gate reads only the
    /// generations around a batch's and lets older ones expire.
    pub fn bucket_generation_ms(&self) -> i64 {
        let refill =
            |burst: u32, per_sec: f64| (f64::from(burst) * 1000.0 / per_sec.max(0.001)).ceil();
        let longest = refill(self.user_burst, self.user_per_sec)
            .max(refill(self.ip_burst, self.ip_per_sec))
            .max(self.block_ms as f64)
            .min(365.0 * 86_400_000.0);
        longest as i64 + 1000
    }

    /// A batch's bucket generation: the one its last buy's time falls in.
    pub fn bucket_generation(&self, now_ms: i64) -> i64 {
        now_ms.div_euclid(self.bucket_generation_ms())
    }
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits::from(&Settings::defaults())
    }
}

impl From<&Settings> for GateLimits {
    fn from(s: &Settings) -> Self {
        GateLimits {
            user_burst: s.user_burst,
            user_per_sec: s.user_per_sec,
            ip_burst: s.ip_burst,
            ip_per_sec: s.ip_per_sec,
            strikes_before_block: s.strikes_before_block,
            block_ms: s.block_ms,
            max_in_flight: s.max_in_flight,
            deadline: Duration::from_millis(s.buy_deadline_ms),
            batching: Batching {
                window: Duration::from_micros(s.gate_batch_window_us),
                max: s.gate_batch_max.max(1),
                in_flight: s.gate_batch_in_flight.max(1),
            },
            token_records: s.gate_token_records,
            idempotency_strings: s.gate_idempotency_strings,
        }
    }
}
