//! The buy path. In-process, before any I/O: the activity (cached), the sale window, the path
//! HMAC, the input, this instance's sold-out flag and an admission limit that sheds load with
//! `503` before latency explodes. Then ONE Redis script call (`gate.lua`) decides: captcha,
//! buckets, pause, per-user limit, stock, token status, journal entry, idempotency record.
//! The session and the client address are the HTTP layer's to establish (`http/buy.rs`).

use super::{activities::ActivityCache, attempts::Attempts, soldout::SoldOut};
use crate::{
    domain::{rfc3339, ApiError, ApiResult},
    infra::{config::GateLimits, keys::TOKEN_TTL_SECS, metrics::Metrics, redis::Redis},
};
use app::api::BuyRequest;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use redis::Script;
use sha2::Sha256;
use sqlx::PgPool;
use std::{net::IpAddr, sync::Arc, time::Instant};
use tokio::sync::Semaphore;

const IDEMPOTENCY_TTL_SECS: u64 = 24 * 3600;

/// The opaque buy paths: an HMAC of user and activity, so a path is good for one user and sale.
#[derive(Clone)]
pub struct BuyPaths {
    key: Arc<[u8]>,
}

impl BuyPaths {
    pub fn new(secret: &[u8]) -> BuyPaths {
        BuyPaths { key: secret.into() }
    }

    fn mac(&self, user: i64, activity: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(format!("path\0{user}\0{activity}").as_bytes());
        mac
    }

    /// The opaque buy path of one user for one activity.
    pub fn path(&self, user: i64, activity: i64) -> String {
        B64.encode(&self.mac(user, activity).finalize().into_bytes()[..18])
    }

    pub fn is_valid(&self, path: &str, user: i64, activity: i64) -> bool {
        match B64.decode(path) {
            Ok(bytes) if bytes.len() == 18 => self
                .mac(user, activity)
                .verify_truncated_left(&bytes)
                .is_ok(),
            _ => false,
        }
    }
}

/// What the gate reads and writes besides its own rules.
pub struct GateParts {
    pub db: PgPool,
    pub redis: Redis,
    pub activities: ActivityCache,
    pub sold_out: SoldOut,
    pub attempts: Attempts,
    pub metrics: Arc<Metrics>,
}

pub struct Gate {
    script: Script,
    admission: Semaphore,
    limits: GateLimits,
    paths: BuyPaths,
    parts: GateParts,
}

impl Gate {
    pub fn new(limits: GateLimits, secret: &[u8], parts: GateParts) -> Gate {
        Gate {
            script: Script::new(include_str!("gate.lua")),
            admission: Semaphore::new(limits.max_in_flight),
            limits,
            paths: BuyPaths::new(secret),
            parts,
        }
    }

    /// The buy path of `user` for activity `id`, only while the sale is on.
    pub async fn path(&self, user: i64, id: i64) -> ApiResult<String> {
        let activity = self.parts.activities.get(&self.parts.db, id).await?;
        check_window(activity.starts_at, activity.ends_at)?;
        Ok(self.paths.path(user, id))
    }

    /// Counts a buy request's outcome (`accepted` or its error code) in the metrics.
    pub fn count(&self, outcome: &ApiResult<String>) {
        self.parts.metrics.buy(match outcome {
            Ok(_) => "accepted",
            Err(e) => e.code(),
        });
    }

    /// Decides one buy: the reservation token, or why not.
    pub async fn decide(
        &self,
        user: i64,
        ip: IpAddr,
        id: i64,
        idempotency: Option<String>,
        req: BuyRequest,
    ) -> ApiResult<String> {
        let state = &self.parts;
        let activity = state.activities.get(&state.db, id).await?;
        // Counted once the activity is known to exist: made-up ids must not grow the counters.
        state.attempts.record(id);
        check_window(activity.starts_at, activity.ends_at)?;
        if !self.paths.is_valid(&req.path, user, id) {
            return Err(ApiError::BadPath);
        }
        let quantity = req.quantity.unwrap_or(1);
        if !(1..=i64::from(activity.per_user_limit)).contains(&quantity) {
            return Err(ApiError::invalid(
                "quantity",
                format!("must be between 1 and {}", activity.per_user_limit),
            ));
        }
        let (captcha_id, captcha_answer) = if activity.captcha_required {
            match (req.captcha_id.as_deref(), req.captcha_answer.as_deref()) {
                (Some(id), Some(answer))
                    if uuid::Uuid::parse_str(id).is_ok() && (1..=16).contains(&answer.len()) =>
                {
                    (id.to_string(), answer.to_string())
                }
                _ => return Err(ApiError::CaptchaInvalid),
            }
        } else {
            (String::new(), String::new())
        };
        // A retry with a key may be owed its first answer, so it always goes to Redis.
        if idempotency.is_none() && state.sold_out.is_set(id) {
            return Err(ApiError::SoldOut);
        }
        let _permit = self
            .admission
            .try_acquire()
            .map_err(|_| ApiError::Overloaded { retry_after: 1 })?;

        let keys = &state.redis.keys;
        let limits = &self.limits;
        let (who_user, who_ip) = (format!("u:{user}"), format!("ip:{ip}"));
        let token = uuid::Uuid::new_v4().to_string();
        let now_ms = chrono::Utc::now().timestamp_millis();
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(keys.stock(id))
            .key(keys.meta(id))
            .key(keys.holders(id))
            .key(keys.journal())
            .key(keys.token(&token))
            .key(if activity.captcha_required {
                keys.captcha(&captcha_id)
            } else {
                keys.unused()
            })
            .key(match &idempotency {
                Some(k) => keys.idempotency(user, k),
                None => keys.unused(),
            })
            .key(keys.bucket(&who_user))
            .key(keys.strikes(&who_user))
            .key(keys.block(&who_user))
            .key(keys.bucket(&who_ip))
            .key(keys.strikes(&who_ip))
            .key(keys.block(&who_ip))
            .arg(user)
            .arg(quantity)
            .arg(&token)
            .arg(now_ms)
            .arg(u8::from(activity.captcha_required))
            .arg(captcha_answer.to_lowercase())
            .arg(u8::from(idempotency.is_some()))
            .arg(limits.user_burst)
            .arg(limits.user_per_sec)
            .arg(limits.ip_burst)
            .arg(limits.ip_per_sec)
            .arg(limits.strikes_before_block)
            .arg(limits.block_ms)
            .arg(TOKEN_TTL_SECS)
            .arg(IDEMPOTENCY_TTL_SECS)
            .arg(id)
            .arg(activity.per_user_limit);

        let started = Instant::now();
        let answer: Result<(String, String), _> =
            invocation.invoke_async(&mut state.redis.conn()).await;
        state
            .metrics
            .gate_seconds
            .observe(started.elapsed().as_secs_f64());
        let (code, detail) = answer.map_err(|e| {
            // A timeout does not prove the script did not run: the client retries with its
            // Idempotency-Key and gets the first answer.
            tracing::warn!(error = %e, activity.id = id, "gate call failed");
            ApiError::Overloaded { retry_after: 1 }
        })?;
        let millis_to_secs = |ms: &str| ms.parse::<u64>().unwrap_or(1000).div_ceil(1000).max(1);
        match code.as_str() {
            "ok" => Ok(detail),
            "sold_out" => {
                state.sold_out.set(id);
                Err(ApiError::SoldOut)
            }
            "limit_reached" => Err(ApiError::LimitReached),
            "captcha_invalid" => Err(ApiError::CaptchaInvalid),
            "paused" => Err(ApiError::Paused),
            "rate_limited" => Err(ApiError::RateLimited {
                retry_after: millis_to_secs(&detail),
            }),
            "blocked" => Err(ApiError::Blocked {
                retry_after: millis_to_secs(&detail),
            }),
            "not_warm" => {
                tracing::warn!(
                    activity.id = id,
                    "stock is not in Redis; buys wait for the warm-up"
                );
                Err(ApiError::Overloaded { retry_after: 1 })
            }
            other => Err(ApiError::Internal(anyhow::anyhow!(
                "gate script answered {other:?} {detail:?}"
            ))),
        }
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
