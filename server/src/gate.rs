//! The buy path. In-process, before any I/O: the session cookie, the activity (cached), the sale
//! window, the path HMAC, the input, this instance's sold-out flag and an admission limit that
//! sheds load with `503` before latency explodes. Then ONE Redis script call decides: captcha,
//! buckets, pause, per-user limit, stock, token status, journal entry, idempotency record.

use crate::{
    catalog::{parse_id, rfc3339},
    error::{ApiError, ApiResult},
    input::AppJson,
    net::ClientIp,
    session::SignedIn,
    state::AppState,
};
use app::api::{BuyPath, BuyRequest, Reservation};
use axum::{
    extract::{Path, State},
    http::StatusCode,
    routing::{get, post},
    Json, Router,
};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use redis::Script;
use sha2::Sha256;
use std::{sync::Arc, time::Instant};
use tokio::sync::Semaphore;

/// Longer than the longest payment window (24 h), so a token's record outlives its order's deadline.
pub const TOKEN_TTL_SECS: u64 = 3 * 24 * 3600;
const IDEMPOTENCY_TTL_SECS: u64 = 24 * 3600;

/// Buckets and blocks (per user and per client address) and the admission limit.
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
}

impl Default for GateLimits {
    fn default() -> Self {
        GateLimits {
            user_burst: 5,
            user_per_sec: 1.0,
            ip_burst: 400,
            ip_per_sec: 200.0,
            strikes_before_block: 30,
            block_ms: 60_000,
            max_in_flight: 512,
        }
    }
}

#[derive(Clone)]
pub struct Gate {
    script: Arc<Script>,
    admission: Arc<Semaphore>,
    limits: GateLimits,
    path_key: Arc<[u8]>,
}

impl Gate {
    pub fn new(limits: GateLimits, secret: &[u8]) -> Gate {
        Gate {
            script: Arc::new(Script::new(include_str!("lua/gate.lua"))),
            admission: Arc::new(Semaphore::new(limits.max_in_flight)),
            limits,
            path_key: secret.into(),
        }
    }

    fn path_mac(&self, user: i64, activity: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.path_key).expect("HMAC takes any key length");
        mac.update(format!("path\0{user}\0{activity}").as_bytes());
        mac
    }

    /// The opaque buy path of one user for one activity.
    pub fn path(&self, user: i64, activity: i64) -> String {
        B64.encode(&self.path_mac(user, activity).finalize().into_bytes()[..18])
    }

    fn path_is_valid(&self, path: &str, user: i64, activity: i64) -> bool {
        match B64.decode(path) {
            Ok(bytes) if bytes.len() == 18 => self.path_mac(user, activity).verify_truncated_left(&bytes).is_ok(),
            _ => false,
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/activities/{id}/path", get(buy_path))
        .route("/activities/{id}/buy", post(buy))
}

fn check_window(starts_at: chrono::DateTime<chrono::Utc>, ends_at: chrono::DateTime<chrono::Utc>) -> ApiResult<()> {
    let now = chrono::Utc::now();
    if now < starts_at {
        return Err(ApiError::NotStarted { starts_at: rfc3339(starts_at) });
    }
    if now >= ends_at {
        return Err(ApiError::Ended);
    }
    Ok(())
}

async fn buy_path(State(state): State<AppState>, SignedIn(user): SignedIn, Path(id): Path<String>) -> ApiResult<Json<BuyPath>> {
    let id = parse_id(&id)?;
    let activity = state.activities.get(&state.db, id).await?;
    check_window(activity.starts_at, activity.ends_at)?;
    Ok(Json(BuyPath { path: state.gate.path(user.user_id, id) }))
}

/// The optional `Idempotency-Key` header, read without copying the request's headers.
pub struct IdempotencyKey(Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get("idempotency-key") else { return Ok(IdempotencyKey(None)) };
        let key = value.to_str().unwrap_or_default();
        let valid = (1..=64).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ApiError::invalid("Idempotency-Key", "must be 1 to 64 characters of [A-Za-z0-9_-]"));
        }
        Ok(IdempotencyKey(Some(key.to_string())))
    }
}

async fn buy(
    State(state): State<AppState>,
    SignedIn(user): SignedIn,
    ClientIp(ip): ClientIp,
    Path(id): Path<String>,
    idempotency: Result<IdempotencyKey, ApiError>,
    AppJson(req): AppJson<BuyRequest>,
) -> ApiResult<(StatusCode, Json<Reservation>)> {
    let outcome = match idempotency {
        Ok(IdempotencyKey(key)) => decide(&state, user.user_id, ip, &id, key, req).await,
        Err(e) => Err(e),
    };
    state.metrics.buy(match &outcome {
        Ok(_) => "accepted",
        Err(e) => e.code(),
    });
    let token = outcome?;
    Ok((StatusCode::ACCEPTED, Json(Reservation { token, status: "queued".into() })))
}

async fn decide(
    state: &AppState,
    user: i64,
    ip: std::net::IpAddr,
    id: &str,
    idempotency: Option<String>,
    req: BuyRequest,
) -> ApiResult<String> {
    let id = parse_id(id)?;
    let activity = state.activities.get(&state.db, id).await?;
    // Counted once the activity is known to exist: made-up ids must not grow the counters.
    state.attempts.record(id);
    check_window(activity.starts_at, activity.ends_at)?;
    if !state.gate.path_is_valid(&req.path, user, id) {
        return Err(ApiError::BadPath);
    }
    let quantity = req.quantity.unwrap_or(1);
    if !(1..=i64::from(activity.per_user_limit)).contains(&quantity) {
        return Err(ApiError::invalid("quantity", format!("must be between 1 and {}", activity.per_user_limit)));
    }
    let (captcha_id, captcha_answer) = if activity.captcha_required {
        match (req.captcha_id.as_deref(), req.captcha_answer.as_deref()) {
            (Some(id), Some(answer)) if uuid::Uuid::parse_str(id).is_ok() && (1..=16).contains(&answer.len()) => {
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
    let _permit = state.gate.admission.try_acquire().map_err(|_| ApiError::Overloaded { retry_after: 1 })?;

    let keys = &state.keys;
    let limits = &state.gate.limits;
    let (who_user, who_ip) = (format!("u:{user}"), format!("ip:{ip}"));
    let token = uuid::Uuid::new_v4().to_string();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut invocation = state.gate.script.prepare_invoke();
    invocation
        .key(keys.stock(id))
        .key(keys.meta(id))
        .key(keys.holders(id))
        .key(keys.journal())
        .key(keys.token(&token))
        .key(if activity.captcha_required { keys.captcha(&captcha_id) } else { keys.unused() })
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
    let answer: Result<(String, String), _> = invocation.invoke_async(&mut state.redis.clone()).await;
    state.metrics.gate_seconds.observe(started.elapsed().as_secs_f64());
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
        "rate_limited" => Err(ApiError::RateLimited { retry_after: millis_to_secs(&detail) }),
        "blocked" => Err(ApiError::Blocked { retry_after: millis_to_secs(&detail) }),
        "not_warm" => {
            tracing::warn!(activity.id = id, "stock is not in Redis; buys wait for the warm-up");
            Err(ApiError::Overloaded { retry_after: 1 })
        }
        other => Err(ApiError::Internal(anyhow::anyhow!("gate script answered {other:?} {detail:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_bound_to_user_and_activity() {
        let gate = Gate::new(GateLimits::default(), b"0123456789abcdef0123456789abcdef");
        let path = gate.path(7, 9);
        assert!(gate.path_is_valid(&path, 7, 9));
        assert!(!gate.path_is_valid(&path, 8, 9));
        assert!(!gate.path_is_valid(&path, 7, 10));
        assert!(!gate.path_is_valid("", 7, 9));
        assert!(!gate.path_is_valid(&path[..path.len() - 1], 7, 9));
    }
}
