//! Captchas: an image made by the `captcha` crate; its answer lives in Redis for 120 s and is
//! consumed by the gate script on first use, right or wrong.

use crate::{
    domain::{ApiError, ApiResult},
    infra::redis::Redis,
};
use anyhow::Context;
use app::api::Captcha;
use base64::{engine::general_purpose::STANDARD, Engine};

pub const ANSWER_TTL_SECS: u64 = 120;

/// A new captcha: its image, and its answer stored under its id.
pub async fn issue(redis: &Redis) -> ApiResult<Captcha> {
    let (id, png) = issue_png(redis).await?;
    let image = format!("data:image/png;base64,{}", STANDARD.encode(png));
    Ok(Captcha { id, image })
}

/// A new captcha as its id and the picture itself (a PNG): the sign-up form without scripts
/// shows it as an `<img>` of its own address.
pub async fn issue_png(redis: &Redis) -> ApiResult<(String, Vec<u8>)> {
    let (answer, png) = tokio::task::spawn_blocking(|| {
        let mut c = captcha::Captcha::new();
        c.add_chars(5)
            .apply_filter(captcha::filters::Noise::new(0.2))
            .apply_filter(captcha::filters::Wave::new(2.0, 10.0))
            .view(200, 70)
            .apply_filter(captcha::filters::Dots::new(8));
        c.as_tuple()
    })
    .await
    .context("captcha task")?
    .context("captcha image")?;
    let id = uuid::Uuid::new_v4().to_string();
    let _: () = redis::cmd("SET")
        .arg(redis.keys.captcha(&id))
        .arg(answer.to_lowercase())
        .arg("EX")
        .arg(ANSWER_TTL_SECS)
        .query_async(&mut redis.conn())
        .await?;
    Ok((id, png))
}

/// Spends captcha `id` with `answer` (compared without case): taken from Redis on first use,
/// right or wrong; `400 captcha_invalid` unless it was there and right. (A buy's captcha is
/// spent the same way, by the gate script.)
pub async fn spend(redis: &Redis, id: &str, answer: &str) -> ApiResult<()> {
    if id.is_empty() || id.len() > 64 {
        return Err(ApiError::CaptchaInvalid);
    }
    let stored: Option<String> = redis::cmd("GETDEL")
        .arg(redis.keys.captcha(id))
        .query_async(&mut redis.conn())
        .await?;
    match stored {
        Some(right) if right == answer.trim().to_lowercase() => Ok(()),
        _ => Err(ApiError::CaptchaInvalid),
    }
}
