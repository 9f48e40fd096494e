//! Shops: a merchant belongs to one and sees only its sales, orders and audit. The operator
//! creates them; the sales that predate shops are in the default shop.

use super::{rfc3339, ApiError, ApiResult};
use app::api::{AccountSummary, Role, Shop, ShopSettings, UserId};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The shop the migration put every earlier sale and merchant in (and the CLI's default).
pub const DEFAULT_SHOP: &str = "Default shop";

/// 1–80 characters, trimmed, no control characters.
pub fn parse_name(raw: &str) -> ApiResult<String> {
    let name = raw.trim();
    if !(1..=80).contains(&name.chars().count()) {
        return Err(ApiError::invalid("name", "must be 1 to 80 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid("name", "may not hold control characters"));
    }
    Ok(name.to_string())
}

/// Creates a shop; `409 shop_taken` when the name is in use (case aside).
pub async fn create<'e>(
    db: impl sqlx::PgExecutor<'e>,
    name: &str,
) -> ApiResult<(i64, DateTime<Utc>)> {
    sqlx::query!(
        "INSERT INTO shops (name) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id, created_at",
        name
    )
    .fetch_optional(db)
    .await?
    .map(|r| (r.id, r.created_at))
    .ok_or(ApiError::ShopTaken)
}

/// The id of the shop of this name, if there is one.
pub async fn find(db: &PgPool, name: &str) -> ApiResult<Option<i64>> {
    Ok(
        sqlx::query_scalar!("SELECT id FROM shops WHERE lower(name) = lower($1)", name)
            .fetch_optional(db)
            .await?,
    )
}

/// The name of shop `id`, if there is one.
pub async fn name_of(db: &PgPool, id: i64) -> ApiResult<Option<String>> {
    Ok(
        sqlx::query_scalar!("SELECT name FROM shops WHERE id = $1", id)
            .fetch_optional(db)
            .await?,
    )
}

/// Shop `id`'s settings.
pub async fn settings(db: &PgPool, id: i64) -> ApiResult<ShopSettings> {
    sqlx::query_as!(
        ShopSettings,
        "SELECT id, name, time_zone FROM shops WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?
    .ok_or(ApiError::NotFound)
}

/// Sets shop `id`'s time zone: a name PostgreSQL knows (`pg_timezone_names`, the IANA database),
/// else `400 invalid_input` naming `time_zone`.
pub async fn set_time_zone(db: &PgPool, id: i64, zone: &str) -> ApiResult<ShopSettings> {
    let unknown = || {
        ApiError::invalid(
            "time_zone",
            "is not a time zone name such as Asia/Shanghai or UTC",
        )
    };
    // Names browsers know too: not PostgreSQL's `posix/…`, `right/…`, `posixrules`, `localtime`
    // or `Factory`, which a browser's `Intl` would refuse.
    let browsable = zone.starts_with(|c: char| c.is_ascii_uppercase()) && zone != "Factory";
    if !browsable || zone.len() > 64 {
        return Err(unknown());
    }
    sqlx::query_as!(
        ShopSettings,
        "UPDATE shops SET time_zone = $2 WHERE id = $1
           AND EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $2)
         RETURNING id, name, time_zone",
        id,
        zone
    )
    .fetch_optional(db)
    .await?
    .ok_or_else(unknown)
}

/// Every shop with its merchants and how many sales it has, oldest first.
pub async fn list(db: &PgPool) -> ApiResult<Vec<Shop>> {
    let shops = sqlx::query!(
        r#"SELECT s.id, s.name, s.created_at,
                  (SELECT count(*) FROM activities a WHERE a.shop_id = s.id) AS "activities!"
           FROM shops s ORDER BY s.id"#
    )
    .fetch_all(db)
    .await?;
    let merchants = sqlx::query!(
        r#"SELECT id, username, shop_id, blocked_at IS NOT NULL AS "blocked!"
           FROM users WHERE role = 'merchant' ORDER BY id"#
    )
    .fetch_all(db)
    .await?;
    Ok(shops
        .into_iter()
        .map(|shop| Shop {
            id: shop.id,
            name: shop.name,
            created_at: rfc3339(shop.created_at),
            activities: shop.activities,
            merchants: merchants
                .iter()
                .filter(|m| m.shop_id == Some(shop.id))
                .map(|m| AccountSummary {
                    id: UserId(m.id),
                    username: m.username.clone(),
                    role: Role::Merchant,
                    shop_id: m.shop_id,
                    blocked: m.blocked,
                })
                .collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shop_names_are_trimmed_and_bounded() {
        assert_eq!(parse_name("  Ann's shop ").unwrap(), "Ann's shop");
        for bad in ["", "   ", &"x".repeat(81), "a\nb"] {
            assert!(parse_name(bad).is_err(), "{bad:?}");
        }
    }
}
