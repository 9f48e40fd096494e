//! Sign-in throttling, kept in Redis so that it holds across every server instance. An attempt
//! is taken from the budgets *before* the password is verified, so a burst of concurrent
//! guesses cannot all be verified before the first failure is counted:
//!
//! - per client address, over every username (`max_failures_per_ip` a window);
//! - per username *and* address (`max_failures_per_user`): the lock a guesser earns is on their
//!   own address only, so a stranger cannot lock the owner out;
//! - per username from everywhere (`max_failures_per_user_everywhere`), a much higher bound
//!   that slows (one attempt a second for that username), never locks;
//! - one verification in flight per username: a concurrent attempt is told to retry in a second.
//!
//! A successful sign-in gives back the attempt it took and forgives that address's failures for
//! the username. Past a limit, `429 rate_limited` with `Retry-After`, even with the right password.

use crate::{
    domain::ApiError,
    infra::{
        config::LoginThrottle as Limits,
        keys::{address_bucket, Keys},
        redis::Conn,
        scripts,
    },
};
use redis::Script;
use std::net::IpAddr;

/// The longest a verification holds its username (a crashed instance's hold lapses by then).
const HOLD_MS: u64 = 15_000;

#[derive(Clone)]
pub struct LoginThrottle {
    limits: Limits,
    keys: Keys,
    reserve_address: &'static Script,
    reserve_user: &'static Script,
    finish_user: &'static Script,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    Succeeded,
    Failed,
    Undecided,
}

/// An attempt taken from the budgets: report how it ended with [`LoginThrottle::finish`].
pub struct Attempt {
    user_keys: [String; 3],
    address_key: String,
    id: String,
}

impl LoginThrottle {
    pub fn new(limits: Limits, keys: Keys) -> LoginThrottle {
        LoginThrottle {
            limits,
            keys,
            reserve_address: scripts::fixed_window(),
            reserve_user: scripts::sign_in_reserve(),
            finish_user: scripts::sign_in_finish(),
        }
    }

    /// Takes one attempt for `username` from `ip`, or `Err(RateLimited)`.
    pub async fn reserve(
        &self,
        redis: &mut Conn,
        username: &str,
        ip: IpAddr,
    ) -> Result<Attempt, ApiError> {
        let address = address_bucket(ip);
        let window_ms = self.limits.window.as_millis() as u64;
        let address_key = self.keys.login_address(&address);
        let wait: i64 = self
            .reserve_address
            .key(&address_key)
            .arg(self.limits.max_failures_per_ip)
            .arg(window_ms)
            .invoke_async(redis)
            .await?;
        refuse_if_waiting(wait)?;
        let user = |what: &str| self.keys.login_user(username, what);
        let attempt = Attempt {
            user_keys: [user(&format!("ip:{address}")), user("all"), user("busy")],
            address_key,
            id: uuid::Uuid::new_v4().simple().to_string(),
        };
        let [mine, all, busy] = &attempt.user_keys;
        let wait: i64 = self
            .reserve_user
            .key(mine)
            .key(all)
            .key(user("slow"))
            .key(busy)
            .arg(self.limits.max_failures_per_user)
            .arg(self.limits.max_failures_per_user_everywhere)
            .arg(window_ms)
            .arg(HOLD_MS)
            .arg(&attempt.id)
            .invoke_async(redis)
            .await?;
        if wait != 0 {
            // The address's attempt is given back: refused here, nothing was verified.
            let _: redis::RedisResult<i64> = redis::cmd("DECR")
                .arg(&attempt.address_key)
                .query_async(redis)
                .await;
        }
        refuse_if_waiting(wait)?;
        Ok(attempt)
    }

    /// Reports how an attempt ended: a success gives its attempt back (for the username and the
    /// address) and forgives the address's failures for the username; a failure stays counted;
    /// an attempt that could not be decided (the database was down) is given back. Either way the
    /// username is free for the next one.
    pub async fn finish(
        &self,
        redis: &mut Conn,
        attempt: Attempt,
        outcome: Outcome,
    ) -> Result<(), ApiError> {
        let [mine, all, busy] = &attempt.user_keys;
        let _: i64 = self
            .finish_user
            .key(mine)
            .key(all)
            .key(busy)
            .arg(match outcome {
                Outcome::Succeeded => "ok",
                Outcome::Failed => "failed",
                Outcome::Undecided => "undecided",
            })
            .arg(&attempt.id)
            .invoke_async(redis)
            .await?;
        if outcome != Outcome::Failed {
            let _: i64 = redis::cmd("DECR")
                .arg(&attempt.address_key)
                .query_async(redis)
                .await?;
        }
        Ok(())
    }
}

fn refuse_if_waiting(wait_ms: i64) -> Result<(), ApiError> {
    if wait_ms > 0 {
        return Err(ApiError::RateLimited {
            retry_after: (wait_ms as u64).div_ceil(1000).max(1),
        });
    }
    Ok(())
}
