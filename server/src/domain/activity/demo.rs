//! The demo sale `make run` shows: one that starts a few minutes after the server does.

use super::insert;
use super::rules::*;
use crate::domain::rfc3339;
use app::api::{BotCheck, NewActivity};
use chrono::Utc;
use sqlx::PgPool;

/// For `make run`: unless a sale is live or upcoming, one that starts a few minutes from now.
pub async fn create_demo(db: &PgPool, merchant_username: &str) -> anyhow::Result<Option<i64>> {
    let pending = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM activities WHERE ends_at > now()) AS "pending!""#
    )
    .fetch_one(db)
    .await?;
    let merchant = sqlx::query_scalar!(
        "SELECT id FROM users WHERE lower(username) = lower($1) AND role = 'merchant'",
        merchant_username
    )
    .fetch_optional(db)
    .await?;
    let (false, Some(merchant)) = (pending, merchant) else {
        return Ok(None);
    };
    let now = Utc::now();
    let spec = ActivitySpec::parse(
        NewActivity {
            title: "Demo: the 100-unit phone drop".into(),
            description: "A demo sale: 100 phones at a flash price. One per shopper.".into(),
            image_url: None,
            price_cents: 49_900,
            seckill_price_cents: 9_900,
            starts_at: rfc3339(now + chrono::Duration::minutes(3)),
            ends_at: rfc3339(now + chrono::Duration::hours(2)),
            stock: 100,
            per_user_limit: Some(1),
            captcha_required: None,
            payment_window_secs: Some(600),
            stock_shards: None,
            waiting_room: None,
            admit_per_sec: None,
            bot_check: Some(BotCheck::ProofOfWork),
            pow_difficulty: None,
            accounts_created_before: None,
            line_method: None,
        },
        60,
        1,
    )
    .map_err(|e| anyhow::anyhow!("demo activity: {e}"))?;
    let row = insert(db, merchant, &spec)
        .await
        .map_err(|e| anyhow::anyhow!("demo activity: {e:?}"))?;
    Ok(Some(row.id))
}
