//! Login throttling, per username and per client address, kept in Redis so that it holds across
//! every server instance. Failures count within a window; past the limit, attempts get
//! `429 rate_limited` with `Retry-After` until the window ends (even with the right password).

use crate::{domain::ApiError, infra::config::LoginThrottle as Limits};
use redis::{aio::ConnectionManager, Script};
use std::{net::IpAddr, sync::Arc};

const CHECK: &str = r"
local wait = 0
for i = 1, 2 do
  local n = tonumber(redis.call('GET', KEYS[i]) or '0')
  if n >= tonumber(ARGV[i]) then
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl > wait then wait = ttl end
  end
end
return wait
";

const FAIL: &str = r"
for i = 1, 2 do
  redis.call('INCR', KEYS[i])
  redis.call('PEXPIRE', KEYS[i], ARGV[1], 'NX')
end
return 1
";

#[derive(Clone)]
pub struct LoginThrottle {
    limits: Limits,
    prefix: Arc<str>,
    check: Arc<Script>,
    fail: Arc<Script>,
}

impl LoginThrottle {
    pub fn new(limits: Limits, redis_prefix: &str) -> LoginThrottle {
        LoginThrottle {
            limits,
            prefix: format!("{redis_prefix}login:").into(),
            check: Arc::new(Script::new(CHECK)),
            fail: Arc::new(Script::new(FAIL)),
        }
    }

    fn keys(&self, username: &str, ip: IpAddr) -> [String; 2] {
        [
            format!("{}u:{}", self.prefix, username.to_lowercase()),
            format!("{}ip:{ip}", self.prefix),
        ]
    }

    /// `Err(RateLimited)` while either counter is at its limit.
    pub async fn check(
        &self,
        redis: &mut ConnectionManager,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        let [user, addr] = self.keys(username, ip);
        let wait_ms: i64 = self
            .check
            .key(user)
            .key(addr)
            .arg(self.limits.max_failures_per_user)
            .arg(self.limits.max_failures_per_ip)
            .invoke_async(redis)
            .await?;
        if wait_ms > 0 {
            return Err(ApiError::RateLimited {
                retry_after: (wait_ms as u64).div_ceil(1000),
            });
        }
        Ok(())
    }

    pub async fn record_failure(
        &self,
        redis: &mut ConnectionManager,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        let [user, addr] = self.keys(username, ip);
        let _: i64 = self
            .fail
            .key(user)
            .key(addr)
            .arg(self.limits.window.as_millis() as u64)
            .invoke_async(redis)
            .await?;
        Ok(())
    }

    /// A successful sign-in forgives the username's failures (not the address's).
    pub async fn record_success(
        &self,
        redis: &mut ConnectionManager,
        username: &str,
        ip: IpAddr,
    ) -> Result<(), ApiError> {
        let [user, _] = self.keys(username, ip);
        let _: i64 = redis::cmd("DEL").arg(user).query_async(redis).await?;
        Ok(())
    }
}
