//! Accounts: the rules for usernames and passwords, the user rows, and the creation of
//! merchants, who never register themselves (CLI or `SECKILL_ADMIN_USER` at start-up).

use super::{password, ApiError, ApiResult};
use app::api::{Role, User};
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

#[derive(sqlx::FromRow)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub role: String,
}

impl UserRow {
    pub fn into_user(self) -> ApiResult<User> {
        let role = Role::parse(&self.role)
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown role {:?}", self.id, self.role))?;
        Ok(User {
            id: self.id,
            username: self.username,
            role,
        })
    }
}

pub async fn insert_user(
    db: &PgPool,
    username: &Username,
    password_hash: &str,
    role: Role,
) -> ApiResult<User> {
    let row: Option<UserRow> = sqlx::query_as(
        "INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING
         RETURNING id, username, role",
    )
    .bind(username.as_str())
    .bind(password_hash)
    .bind(role.as_str())
    .fetch_optional(db)
    .await?;
    row.ok_or(ApiError::UsernameTaken)?.into_user()
}

/// Creates a merchant account. `Ok(None)` when the username is taken.
pub async fn create_merchant(
    db: &PgPool,
    username: &str,
    password: &str,
) -> anyhow::Result<Option<User>> {
    let username = Username::parse(username).map_err(|e| anyhow::anyhow!("{e}"))?;
    let password = Password::parse(password).map_err(|e| anyhow::anyhow!("{e}"))?;
    let hash = tokio::task::spawn_blocking(move || password::hash_now(&password.0)).await??;
    match insert_user(db, &username, &hash, Role::Merchant).await {
        Ok(user) => Ok(Some(user)),
        Err(ApiError::UsernameTaken) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("creating merchant: {e:?}")),
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
