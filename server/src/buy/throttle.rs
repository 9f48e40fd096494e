//! Login throttling, per username and per client address, kept in Redis so that it holds across
//! every server instance. Failures count within a window; past the limit, attempts get
//! `429 rate_limited` with `Retry-After` until the window ends (even with the right password).
//! Each counter is its own key, touched by its own call (on a cluster they live apart).

use crate::infra::{keys::Keys, redis::Conn};
use crate::{domain::ApiError, infra::config::LoginThrottle as Limits};
use redis::Script;
use std::{net::IpAddr, sync::Arc};

const CHECK: &str = r"
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then return math.max(redis.call('PTTL', KEYS[1]), 0) end
return 0
";

const FAIL: &str = r"
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1], 'NX')
return 1
";

#[derive(Clone)]
pub struct LoginThrottle {
    limits: Limits,
    keys: Keys,
    check: Arc<Script>,
    fail: Arc<Script>,
}

impl LoginThrottle {
    pub fn new(limits: Limits, keys: Keys) -> LoginThrottle {
        LoginThrottle {
            limits,
            keys,
            check: Arc::new(Script::new(CHECK)),
            fail: Arc::new(Script::new(FAIL)),
        }
    }

    fn keys(&self, username: &str, ip: IpAddr) -> [String; 2] {
        [
            self.keys
                .login_failures(&format!("u:{}", username.to_lowercase())),
            self.keys.login_failures(&format!("ip:{ip}")),
        ]
    }

    /// `Err(RateLimited)` while either counter is at its limit.
    pub async fn check(
        &self,
        redis: &mut Conn,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        let [user, addr] = self.keys(username, ip);
        let mut wait_ms: i64 = 0;
        for (key, limit) in [
            (user, self.limits.max_failures_per_user),
            (addr, self.limits.max_failures_per_ip),
        ] {
            let wait: i64 = self.check.key(key).arg(limit).invoke_async(redis).await?;
            wait_ms = wait_ms.max(wait);
        }
        if wait_ms > 0 {
            return Err(ApiError::RateLimited {
                retry_after: (wait_ms as u64).div_ceil(1000),
            });
        }
        Ok(())
    }

    pub async fn record_failure(
        &self,
        redis: &mut Conn,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        for key in self.keys(username, ip) {
            let _: i64 = self
                .fail
                .key(key)
                .arg(self.limits.window.as_millis() as u64)
                .invoke_async(redis)
                .await?;
        }
        Ok(())
    }

    /// A successful sign-in forgives the username's failures (not the address's).
    pub async fn record_success(
        &self,
        redis: &mut Conn,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        let [user, _] = self.keys(username, ip);
        let _: i64 = redis::cmd("DEL").arg(user).query_async(redis).await?;
        Ok(())
    }
}
