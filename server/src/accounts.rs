//! Accounts and sessions: register, sign in, sign out, who am I; and the creation of merchants,
//! which never register themselves (CLI or `SECKILL_ADMIN_USER` at start-up).

use crate::{
    error::{ApiError, ApiResult},
    input::AppJson,
    net::ClientIp,
    session::{Merchant, SignedIn},
    state::AppState,
};
use app::api::{Credentials, Role, User};
use axum::{extract::State, http::StatusCode, routing::{get, post}, Json, Router};
use axum_extra::extract::cookie::CookieJar;
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
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(ApiError::invalid("username", "may hold only letters, digits, '_', '.' and '-'"));
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
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/auth/register", post(register))
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/me", get(me))
        .route("/admin/merchants", get(list_merchants))
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    role: String,
}

impl UserRow {
    fn into_user(self) -> ApiResult<User> {
        let role = Role::parse(&self.role)
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown role {:?}", self.id, self.role))?;
        Ok(User { id: self.id, username: self.username, role })
    }
}

async fn insert_user(db: &PgPool, username: &Username, password_hash: &str, role: Role) -> ApiResult<User> {
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

async fn register(
    State(state): State<AppState>,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(StatusCode, CookieJar, Json<User>)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let hash = state.passwords.hash(password.0).await?;
    let user = insert_user(&state.db, &username, &hash, Role::Shopper).await?;
    tracing::info!(user.id = user.id, "registered");
    let jar = jar.add(state.sessions.issue(user.id, user.role));
    Ok((StatusCode::CREATED, jar, Json(user)))
}

async fn login(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let mut redis = state.redis.clone();
    state.login_throttle.check(&mut redis, username.as_str(), ip).await?;

    let row: Option<(i64, String, String, String)> = sqlx::query_as(
        "SELECT id, username, role, password_hash FROM users WHERE lower(username) = lower($1)",
    )
    .bind(username.as_str())
    .fetch_optional(&state.db)
    .await?;
    let (found, stored) = match row {
        Some((id, username, role, hash)) => (Some(UserRow { id, username, role }), Some(hash)),
        None => (None, None),
    };
    let ok = state.passwords.verify(password.0, stored).await?;
    match found {
        Some(row) if ok => {
            state.login_throttle.record_success(&mut redis, username.as_str(), ip).await?;
            let user = row.into_user()?;
            let jar = jar.add(state.sessions.issue(user.id, user.role));
            Ok((jar, Json(user)))
        }
        _ => {
            state.login_throttle.record_failure(&mut redis, username.as_str(), ip).await?;
            Err(ApiError::InvalidCredentials)
        }
    }
}

async fn logout(State(state): State<AppState>, jar: CookieJar) -> (StatusCode, CookieJar) {
    (StatusCode::NO_CONTENT, jar.add(state.sessions.clear()))
}

async fn me(State(state): State<AppState>, SignedIn(claims): SignedIn) -> ApiResult<Json<User>> {
    let row: Option<UserRow> = sqlx::query_as("SELECT id, username, role FROM users WHERE id = $1")
        .bind(claims.user_id)
        .fetch_optional(&state.db)
        .await?;
    // A session outliving its account is no session.
    Ok(Json(row.ok_or(ApiError::Unauthenticated)?.into_user()?))
}

#[derive(serde::Serialize)]
struct Merchants {
    merchants: Vec<User>,
}

/// The merchant accounts (an addition to API.md, for the admin console).
async fn list_merchants(State(state): State<AppState>, _: Merchant) -> ApiResult<Json<Merchants>> {
    let rows: Vec<UserRow> = sqlx::query_as("SELECT id, username, role FROM users WHERE role = 'merchant' ORDER BY id")
        .fetch_all(&state.db)
        .await?;
    let merchants = rows.into_iter().map(UserRow::into_user).collect::<ApiResult<_>>()?;
    Ok(Json(Merchants { merchants }))
}

/// Creates a merchant account. `Ok(None)` when the username is taken.
pub async fn create_merchant(db: &PgPool, username: &str, password: &str) -> anyhow::Result<Option<User>> {
    let username = Username::parse(username).map_err(|e| anyhow::anyhow!("{e}"))?;
    let password = Password::parse(password).map_err(|e| anyhow::anyhow!("{e}"))?;
    let hash = tokio::task::spawn_blocking(move || crate::password::hash_now(&password.0)).await??;
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
        for bad in ["", "ab", "x".repeat(33).as_str(), "ann smith", "ann<script>", "änn", "ann;--"] {
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
