//! Accounts: the rules for usernames and passwords, the user rows, and the creation of
//! merchants and operators, who never register themselves (the operator's console, the CLI, or
//! `SECKILL_ADMIN_USER` / `SECKILL_OPERATOR_USER` at start-up).

use super::{password, shop, ApiError, ApiResult};
use app::api::{Role, ShopRef, User};
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

/// The columns of a `UserRow`, from `users u LEFT JOIN shops s ON s.id = u.shop_id`.
pub const USER_COLUMNS: &str = "u.id, u.username, u.role, u.shop_id, s.name AS shop_name, \
                                u.session_epoch, u.blocked_at IS NOT NULL AS blocked, \
                                extract(epoch FROM u.created_at)::bigint AS joined";

impl UserRow {
    pub fn role(&self) -> ApiResult<Role> {
        Ok(Role::parse(&self.role)
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown role {:?}", self.id, self.role))?)
    }

    pub fn into_user(self) -> ApiResult<User> {
        let role = self.role()?;
        Ok(User {
            id: self.id,
            username: self.username,
            role,
            shop: self
                .shop_id
                .zip(self.shop_name)
                .map(|(id, name)| ShopRef { id, name }),
        })
    }
}

/// One user by id.
pub async fn load(db: &PgPool, id: i64) -> ApiResult<Option<UserRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {USER_COLUMNS} FROM users u LEFT JOIN shops s ON s.id = u.shop_id WHERE u.id = $1"
    ))
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// One user by name (case aside), with the stored password hash.
pub async fn find_with_hash(db: &PgPool, username: &str) -> ApiResult<Option<(UserRow, String)>> {
    #[derive(sqlx::FromRow)]
    struct Found {
        #[sqlx(flatten)]
        row: UserRow,
        password_hash: String,
    }
    let found: Option<Found> = sqlx::query_as(&format!(
        "SELECT {USER_COLUMNS}, u.password_hash FROM users u LEFT JOIN shops s ON s.id = u.shop_id
         WHERE lower(u.username) = lower($1)"
    ))
    .bind(username)
    .fetch_optional(db)
    .await?;
    Ok(found.map(|f| (f.row, f.password_hash)))
}

/// A new account; `409 username_taken` when the name is in use (case aside). A merchant has a
/// shop, nobody else does.
pub async fn insert_user<'e>(
    db: impl sqlx::PgExecutor<'e>,
    username: &Username,
    password_hash: &str,
    role: Role,
    shop_id: Option<i64>,
) -> ApiResult<User> {
    let row: Option<(i64, String)> = sqlx::query_as(
        "INSERT INTO users (username, password_hash, role, shop_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING
         RETURNING id, username",
    )
    .bind(username.as_str())
    .bind(password_hash)
    .bind(role.as_str())
    .bind(shop_id)
    .fetch_optional(db)
    .await?;
    let (id, username) = row.ok_or(ApiError::UsernameTaken)?;
    Ok(User {
        id,
        username,
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
    match insert_user(db, &username, &hash, role, shop_id).await {
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
