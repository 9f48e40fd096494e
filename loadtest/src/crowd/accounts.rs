//! The crowd's accounts: shoppers and a merchant created in the database, their session cookies
//! signed with the deployment's secret (`signing`), the sale created for them, an address each.

use super::*;
use crate::deployment::Deployment;
use anyhow::Context;
use app::api::{home_shard, Activity, Role, ServerTime};
use signing::{new_session_id, Claims, SessionSigner};

/// The crowd's accounts in the database: a merchant of the first shop (the first found, else a
/// new one), and `users` new shoppers, inserted ten thousand at a time; with `home` (a sale's
/// stock shards, and one of them), only shoppers whose home is that shard.
pub(crate) struct Accounts {
    pub(crate) merchant: i64,
    pub(crate) shop: i64,
    pub(crate) shoppers: Vec<i64>,
}

impl Accounts {
    pub(crate) async fn create(
        db: &sqlx::PgPool,
        run: &str,
        users: usize,
        home: Option<(i16, i16)>,
    ) -> anyhow::Result<Accounts> {
        let (merchant, shop): (i64, i64) = match sqlx::query_as(
            "SELECT id, shop_id FROM users WHERE role = 'merchant' ORDER BY id LIMIT 1",
        )
        .fetch_optional(db)
        .await?
        {
            Some(found) => found,
            None => {
                sqlx::query_as(
                    "INSERT INTO users (username, password_hash, role, shop_id)
                 SELECT $1, '!', 'merchant', id FROM shops ORDER BY id LIMIT 1 RETURNING id, shop_id",
                )
                .bind(format!("crowd_m_{run}"))
                .fetch_one(db)
                .await?
            }
        };
        let mut shoppers = Vec::with_capacity(users);
        let mut made = 0;
        while shoppers.len() < users {
            // A crowd of one home makes about `shards` accounts for each it keeps.
            let chunk =
                (users - shoppers.len()) * home.map_or(1, |(shards, _)| shards.max(1) as usize);
            let names: Vec<String> = (made..made + chunk.min(10_000))
                .map(|i| format!("crowd_{run}_{i}"))
                .collect();
            made += names.len();
            let ids: Vec<i64> = sqlx::query_scalar(
                "INSERT INTO users (username, password_hash, role) SELECT u, '!', 'shopper' FROM UNNEST($1::text[]) AS u RETURNING id",
            )
            .bind(&names)
            .fetch_all(db)
            .await?;
            shoppers.extend(
                ids.into_iter().filter(|&id| {
                    home.is_none_or(|(shards, shard)| home_shard(id, shards) == shard)
                }),
            );
        }
        shoppers.truncate(users);
        Ok(Accounts {
            merchant,
            shop,
            shoppers,
        })
    }
}

/// Session cookies minted with the server's secret, valid for an hour.
pub(crate) struct Signer {
    pub(crate) keys: SessionSigner,
    pub(crate) shop: i64,
    pub(crate) expires_at: i64,
}

impl Signer {
    pub(crate) fn new(deployment: &Deployment, shop: i64) -> anyhow::Result<Signer> {
        Ok(Signer {
            keys: SessionSigner::new(deployment.secret()?),
            shop,
            expires_at: chrono::Utc::now().timestamp() + 3600,
        })
    }

    pub(crate) fn cookie(&self, user_id: i64, role: Role) -> String {
        let claims = Claims {
            sid: new_session_id(),
            user_id,
            role,
            shop_id: if role == Role::Merchant { self.shop } else { 0 },
            epoch: 0,
            expires_at: self.expires_at,
            joined: 0,
            auth_at: 0,
        };
        format!("sid={}", self.keys.sign(&claims))
    }
}

pub(crate) async fn existing_sale(
    http: &reqwest::Client,
    base: &str,
    id: i64,
) -> anyhow::Result<Activity> {
    let resp = http
        .get(format!("{base}/api/activities/{id}"))
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "activity {id}: {}",
        resp.status()
    );
    Ok(resp.json().await?)
}

/// A new sale of the options' stock and limit, starting `lead_secs` from the server's now.
pub(crate) async fn create_sale(
    http: &reqwest::Client,
    base: &str,
    opts: &CrowdOptions,
    run: &str,
    server_now: &ServerTime,
    merchant_cookie: &str,
) -> anyhow::Result<Activity> {
    let starts = chrono::DateTime::from_timestamp_millis(server_now.now_ms)
        .context("server time")?
        + chrono::Duration::seconds(opts.lead_secs);
    let mut sale = serde_json::json!({
        "title": format!("Crowd {run}"),
        "price_cents": 10_000,
        "seckill_price_cents": 1_000,
        "starts_at": starts.to_rfc3339(),
        "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339(),
        "stock": opts.stock,
        "per_user_limit": opts.per_user_limit,
        "bot_check": if opts.proof_of_work.is_some() { "proof_of_work" } else { "none" },
    });
    if let Some(difficulty) = opts.proof_of_work {
        sale["pow_difficulty"] = difficulty.into();
    }
    // Named only when asked, so that the tool also drives servers that predate shards.
    if let Some(shards) = opts.stock_shards {
        sale["stock_shards"] = shards.into();
    }
    if let Some(on) = opts.waiting_room {
        sale["waiting_room"] = on.into();
    }
    let resp = http
        .post(format!("{base}/api/admin/activities"))
        .header("cookie", merchant_cookie)
        .json(&sale)
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().as_u16() == 201,
        "creating the sale: {} {}",
        resp.status(),
        resp.text().await.unwrap_or_default()
    );
    Ok(resp.json().await?)
}

/// Shopper i's own client address (`X-Forwarded-For`).
pub(crate) fn addr_of(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}
