//! Bounds on the doors a crowd can knock on without buying anything, so that no one client can
//! make the server spend memory, CPU or Redis on it without limit:
//!
//! - sign-up: per client address (an IPv6 /64) and over the platform, in Redis fixed windows so
//!   that they hold over every instance (accounts multiply whatever is counted per account);
//! - image captchas (per address: no sign-in is needed to ask), proof-of-work challenges and the
//!   waiting room (per shopper), the stock figure (per address): in-process token buckets, no
//!   Redis call, each instance bounding what reaches it. Their memory is bounded too: keys idle
//!   long enough to be full again are swept every minute.

use crate::infra::scripts;
use crate::{
    domain::ApiError,
    infra::{
        config::DoorLimits,
        keys::{address_bucket, Keys},
        redis::Conn,
    },
};
use governor::{clock::Clock, DefaultKeyedRateLimiter, Quota, RateLimiter};
use redis::Script;
use signing::pow::ProofOfWork;
use std::{net::IpAddr, num::NonZeroU32, sync::Arc, time::Duration};

/// The in-process doors.
#[derive(Clone, Copy, Debug)]
pub enum Door {
    Captcha,
    Challenge,
    Queue,
    Stock,
}

type Limiter = Arc<DefaultKeyedRateLimiter<String>>;

#[derive(Clone)]
pub struct Doors {
    limits: DoorLimits,
    keys: Keys,
    window: &'static Script,
    /// The sign-up's bot check: challenges bound to no user and no sale (user 0, sale 0).
    pow: ProofOfWork,
    captcha: Limiter,
    challenge: Limiter,
    queue: Limiter,
    stock: Limiter,
}

fn limiter(per_minute: u32) -> Limiter {
    let n = NonZeroU32::new(per_minute.max(1)).expect("at least one");
    Arc::new(RateLimiter::keyed(Quota::per_minute(n)))
}

impl Doors {
    pub fn new(limits: DoorLimits, keys: Keys, secret: &[u8]) -> Doors {
        Doors {
            limits,
            keys,
            window: scripts::fixed_window(),
            pow: ProofOfWork::new(secret),
            captcha: limiter(limits.captchas_per_minute),
            challenge: limiter(limits.challenges_per_minute),
            queue: limiter(limits.queue_per_minute),
            stock: limiter(limits.stock_per_minute),
        }
    }

    fn limiter(&self, door: Door) -> &Limiter {
        match door {
            Door::Captcha => &self.captcha,
            Door::Challenge => &self.challenge,
            Door::Queue => &self.queue,
            Door::Stock => &self.stock,
        }
    }

    /// Lets one request through `door` for the client `who`, or `429` with `Retry-After`.
    pub fn pass(&self, door: Door, who: &str) -> Result<(), ApiError> {
        let limiter = self.limiter(door);
        limiter.check_key(&who.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
            ApiError::RateLimited {
                retry_after: wait.as_secs() + 1,
            }
        })
    }

    /// Keys tracked by the in-process doors (for the sweep, and to show it bounded).
    pub fn tracked(&self) -> usize {
        [&self.captcha, &self.challenge, &self.queue, &self.stock]
            .iter()
            .map(|l| l.len())
            .sum()
    }

    /// Forgets clients whose buckets are full again (they are as if never seen).
    pub fn sweep(&self) {
        for l in [&self.captcha, &self.challenge, &self.queue, &self.stock] {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }

    /// Whether sign-ups ask a bot check at all (`SECKILL_SIGNUP_POW_DIFFICULTY` above 0).
    pub fn asks_sign_up_check(&self) -> bool {
        self.limits.signup_pow_difficulty > 0
    }

    /// A proof-of-work challenge for a sign-up from `ip` (bounded per address like the sale's),
    /// or `None` when sign-ups ask none.
    pub fn sign_up_challenge(&self, ip: IpAddr) -> Result<Option<altcha::Challenge>, ApiError> {
        if !self.asks_sign_up_check() {
            return Ok(None);
        }
        self.pass(Door::Challenge, &format!("signup:{}", address_bucket(ip)))?;
        let difficulty = i32::try_from(self.limits.signup_pow_difficulty).unwrap_or(i32::MAX);
        Ok(Some(self.pow.challenge(
            0,
            0,
            difficulty,
            chrono::Utc::now().timestamp(),
        )))
    }

    /// A sign-up's proof of work: solved, signed by this deployment, unexpired, and used once
    /// (its nonce is marked spent in Redis until it expires). `400 captcha_invalid` otherwise.
    pub async fn check_sign_up_proof(
        &self,
        redis: &mut Conn,
        pow: Option<&str>,
    ) -> Result<(), ApiError> {
        if !self.asks_sign_up_check() {
            return Ok(());
        }
        let spent = pow
            .and_then(|p| self.pow.verify(p, 0, 0))
            .ok_or(ApiError::CaptchaInvalid)?;
        let ttl_ms = spent.expires_ms - chrono::Utc::now().timestamp_millis();
        if ttl_ms <= 0 {
            return Err(ApiError::CaptchaInvalid);
        }
        let first: Option<String> = redis::cmd("SET")
            .arg(self.keys.signups(&format!("pow:{}", spent.nonce)))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(redis)
            .await?;
        first.map(|_| ()).ok_or(ApiError::CaptchaInvalid)
    }

    /// Counts one sign-up from `ip` against the address's and the platform's budgets.
    pub async fn sign_up(&self, redis: &mut Conn, ip: IpAddr) -> Result<(), ApiError> {
        let address = self.keys.signups(&format!("ip:{}", address_bucket(ip)));
        self.fixed_window(
            redis,
            address.clone(),
            self.limits.signups_per_address,
            self.limits.signup_window,
        )
        .await?;
        let minute = chrono::Utc::now().timestamp() / 60;
        let platform = self.keys.signups(&format!("min:{minute}"));
        let counted = self
            .fixed_window(
                redis,
                platform,
                self.limits.signups_per_minute,
                Duration::from_secs(60),
            )
            .await;
        if counted.is_err() {
            // Refused by the platform's budget: the address's sign-up was not used.
            let _: redis::RedisResult<i64> =
                redis::cmd("DECR").arg(&address).query_async(redis).await;
        }
        counted
    }

    async fn fixed_window(
        &self,
        redis: &mut Conn,
        key: String,
        limit: u32,
        window: Duration,
    ) -> Result<(), ApiError> {
        let wait_ms: i64 = self
            .window
            .key(key)
            .arg(limit)
            .arg(window.as_millis() as u64)
            .invoke_async(redis)
            .await?;
        if wait_ms > 0 {
            return Err(ApiError::RateLimited {
                retry_after: (wait_ms as u64).div_ceil(1000).max(1),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_lets_its_burst_through_then_refuses_with_a_wait_and_forgets_idle_clients() {
        let limits = DoorLimits {
            captchas_per_minute: 3,
            ..DoorLimits::default()
        };
        let doors = Doors::new(limits, Keys::new("t:"), b"0123456789abcdef0123456789abcdef");
        for _ in 0..3 {
            doors.pass(Door::Captcha, "203.0.113.1").unwrap();
        }
        match doors.pass(Door::Captcha, "203.0.113.1") {
            Err(ApiError::RateLimited { retry_after }) => assert!((1..=21).contains(&retry_after)),
            other => panic!("{other:?}"),
        }
        // Another client, and another door, are not affected.
        doors.pass(Door::Captcha, "203.0.113.2").unwrap();
        doors.pass(Door::Stock, "203.0.113.1").unwrap();
        assert_eq!(doors.tracked(), 3);
    }
}
