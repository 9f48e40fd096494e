//! Accounts: the rules for usernames and passwords, the user rows, and the creation of
//! merchants and operators, who never register themselves (the operator's console, the CLI, or
//! `SECKILL_ADMIN_USER` / `SECKILL_OPERATOR_USER` at start-up).

pub(crate) mod throttle;

use super::{password, shop, ApiError, ApiResult};
use app::api::{AccountSummary, Role, ShopRef, User, UserId};
use sqlx::PgPool;

/// 3–32 characters of `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone)]
pub struct Username(String);

impl Username {
    pub fn parse(s: &str) -> Result<Username, ApiError> {
        let len = s.chars().count();
        if !(3..=32).contains(&len) {
            return Err(ApiError::invalid("username", "must be 3 to 32 characters"));
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return Err(ApiError::invalid(
                "username",
                "may hold only letters, digits, '_', '.' and '-'",
            ));
        }
        Ok(Username(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// 8–128 characters (not bytes).
pub struct Password(String);

impl Password {
    pub fn parse(s: &str) -> Result<Password, ApiError> {
        let len = s.chars().count();
        if !(8..=128).contains(&len) {
            return Err(ApiError::invalid("password", "must be 8 to 128 characters"));
        }
        Ok(Password(s.to_string()))
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

/// A user as the database has it now.
#[derive(sqlx::FromRow)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub role: String,
    pub shop_id: Option<i64>,
    pub shop_name: Option<String>,
    pub session_epoch: i64,
    pub blocked: bool,
    /// When the account was created (unix seconds).
    pub joined: i64,
}

impl UserRow {
    pub fn role(&self) -> ApiResult<Role> {
        Ok(Role::parse(&self.role)
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown role {:?}", self.id, self.role))?)
    }

    pub fn into_user(self) -> ApiResult<User> {
        let role = self.role()?;
        Ok(User {
            id: UserId(self.id),
            username: self.username,
            role,
            shop: self
                .shop_id
                .zip(self.shop_name)
                .map(|(id, name)| ShopRef { id, name }),
        })
    }
}

// Every statement below is checked against the schema when the crate compiles (`sqlx::query!`
// and its kin; the offline data is `.sqlx/`, kept current by `make sqlx-prepare`). The columns of
// a `UserRow` are named in each: a macro takes one literal, not a constant.

/// One user by id.
pub async fn load(db: &PgPool, id: i64) -> ApiResult<Option<UserRow>> {
    Ok(sqlx::query_as!(
        UserRow,
        r#"SELECT u.id, u.username, u.role, u.shop_id, s.name AS "shop_name?", u.session_epoch,
                  u.blocked_at IS NOT NULL AS "blocked!", extract(epoch FROM u.created_at)::bigint AS "joined!"
           FROM users u LEFT JOIN shops s ON s.id = u.shop_id WHERE u.id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?)
}

/// One user by name (case aside), with the stored password hash.
pub async fn find_with_hash(db: &PgPool, username: &str) -> ApiResult<Option<(UserRow, String)>> {
    let found = sqlx::query!(
        r#"SELECT u.id, u.username, u.role, u.shop_id, s.name AS "shop_name?", u.session_epoch,
                  u.blocked_at IS NOT NULL AS "blocked!", extract(epoch FROM u.created_at)::bigint AS "joined!",
                  u.password_hash
           FROM users u LEFT JOIN shops s ON s.id = u.shop_id WHERE lower(u.username) = lower($1)"#,
        username
    )
    .fetch_optional(db)
    .await?;
    Ok(found.map(|f| {
        let row = UserRow {
            id: f.id,
            username: f.username,
            role: f.role,
            shop_id: f.shop_id,
            shop_name: f.shop_name,
            session_epoch: f.session_epoch,
            blocked: f.blocked,
            joined: f.joined,
        };
        (row, f.password_hash)
    }))
}

/// The merchants of a shop, oldest first.
pub async fn merchants_of(db: &PgPool, shop_id: i64) -> ApiResult<Vec<UserRow>> {
    Ok(sqlx::query_as!(
        UserRow,
        r#"SELECT u.id, u.username, u.role, u.shop_id, s.name AS "shop_name?", u.session_epoch,
                  u.blocked_at IS NOT NULL AS "blocked!", extract(epoch FROM u.created_at)::bigint AS "joined!"
           FROM users u LEFT JOIN shops s ON s.id = u.shop_id
           WHERE u.role = 'merchant' AND u.shop_id = $1 ORDER BY u.id"#,
        shop_id
    )
    .fetch_all(db)
    .await?)
}

/// Accounts whose lowercased name starts with `prefix` (taken as it is: LIKE's own characters
/// match themselves), at most 100, by name.
pub async fn search(db: &PgPool, prefix: &str) -> ApiResult<Vec<AccountSummary>> {
    let pattern = format!(
        "{}%",
        prefix
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    let rows = sqlx::query!(
        r#"SELECT id, username, role, shop_id, blocked_at IS NOT NULL AS "blocked!" FROM users
           WHERE lower(username) LIKE $1 ORDER BY lower(username) LIMIT 100"#,
        pattern
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(AccountSummary {
                id: UserId(r.id),
                username: r.username,
                role: Role::parse(&r.role)?,
                shop_id: r.shop_id,
                blocked: r.blocked,
            })
        })
        .collect())
}

/// Sets a user's password hash; with `end_sessions`, their session epoch moves on too (every
/// session issued before ends) and the new epoch is returned.
pub async fn set_password<'e>(
    db: impl sqlx::PgExecutor<'e>,
    user_id: i64,
    password_hash: &str,
    end_sessions: bool,
) -> ApiResult<Option<i64>> {
    Ok(sqlx::query_scalar!(
        "UPDATE users SET password_hash = $2,
             session_epoch = session_epoch + CASE WHEN $3 THEN 1 ELSE 0 END,
             session_epoch_at = CASE WHEN $3 THEN clock_timestamp() ELSE session_epoch_at END
         WHERE id = $1 RETURNING session_epoch",
        user_id,
        password_hash,
        end_sessions
    )
    .fetch_optional(db)
    .await?)
}

/// Blocks (from now, or since the first block) or unblocks a user.
pub async fn set_blocked<'e>(
    db: impl sqlx::PgExecutor<'e>,
    user_id: i64,
    blocked: bool,
) -> ApiResult<()> {
    sqlx::query!(
        "UPDATE users SET blocked_at = CASE WHEN $2 THEN COALESCE(blocked_at, now()) END WHERE id = $1",
        user_id,
        blocked
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A new account; `409 username_taken` when the name is in use (case aside). A merchant has a
/// shop, nobody else does. A shopper's sign-up keeps the network it came from
/// (`domain/crowd.rs`), which a drawing may group their entries by.
pub async fn insert_user<'e>(
    db: impl sqlx::PgExecutor<'e>,
    username: &Username,
    password_hash: &str,
    role: Role,
    shop_id: Option<i64>,
    signup_network: Option<&str>,
) -> ApiResult<User> {
    let row = sqlx::query!(
        "INSERT INTO users (username, password_hash, role, shop_id, signup_network)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING
         RETURNING id, username",
        username.as_str(),
        password_hash,
        role.as_str(),
        shop_id,
        signup_network
    )
    .fetch_optional(db)
    .await?
    .ok_or(ApiError::UsernameTaken)?;
    Ok(User {
        id: UserId(row.id),
        username: row.username,
        role,
        shop: None,
    })
}

/// Creates a merchant of the named shop (created too when missing) or an operator, from the
/// command line or the start-up variables. `Ok(None)` when the username is taken.
pub async fn create_account(
    db: &PgPool,
    role: Role,
    shop_name: Option<&str>,
    username: &str,
    password: &str,
) -> anyhow::Result<Option<User>> {
    let username = Username::parse(username).map_err(|e| anyhow::anyhow!("{e}"))?;
    let password = Password::parse(password).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(why) = password::guessable(&password.0, username.as_str()) {
        anyhow::bail!("the password {why}");
    }
    let shop = match (role, shop_name) {
        (Role::Merchant, name) => {
            let name = shop::parse_name(name.unwrap_or(shop::DEFAULT_SHOP))
                .map_err(|e| anyhow::anyhow!("shop {e}"))?;
            let id = match shop::find(db, &name).await? {
                Some(id) => id,
                None => match shop::create(db, &name).await {
                    Ok((id, _)) => id,
                    // Created by another instance starting at the same time.
                    Err(ApiError::ShopTaken) => shop::find(db, &name)
                        .await?
                        .ok_or_else(|| anyhow::anyhow!("shop {name} vanished"))?,
                    Err(e) => anyhow::bail!("creating shop {name}: {e:?}"),
                },
            };
            Some(ShopRef { id, name })
        }
        _ => None,
    };
    let shop_id = shop.as_ref().map(|s| s.id);
    let hash = tokio::task::spawn_blocking(move || password::hash_now(&password.0)).await??;
    match insert_user(db, &username, &hash, role, shop_id, None).await {
        Ok(mut user) => {
            user.shop = shop;
            let what = format!("{} {}", role.as_str(), user.username);
            super::audit::record(db, None, shop_id, "account.create", &what, "").await?;
            Ok(Some(user))
        }
        Err(ApiError::UsernameTaken) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("creating {}: {e:?}", role.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_follow_the_api_rules() {
        for ok in ["ann", "a.b-c_d", "x".repeat(32).as_str(), "Ann99"] {
            assert!(Username::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ab",
            "x".repeat(33).as_str(),
            "ann smith",
            "ann<script>",
            "änn",
            "ann;--",
        ] {
            assert!(Username::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_count_characters_not_bytes() {
        assert!(Password::parse("1234567").is_err());
        assert!(Password::parse("12345678").is_ok());
        assert!(Password::parse(&"é".repeat(128)).is_ok());
        assert!(Password::parse(&"é".repeat(129)).is_err());
    }
}
