//! API.md "Sessions": register, sign in, sign out, who am I; and the console's list of merchants.

use super::{
    client_ip::ClientIp,
    input::AppJson,
    session::{Merchant, SessionKeys, SignedIn},
};
use crate::{
    buy::throttle::LoginThrottle,
    domain::{
        account::{insert_user, Password, UserRow, Username},
        password::Passwords,
        ApiError, ApiResult,
    },
    infra::{config::Config, redis::Redis},
};
use app::api::{Credentials, Role, User};
use axum::{
    extract::{FromRef, State},
    http::StatusCode,
    routing::{get, post},
    Json, Router,
};
use axum_extra::extract::cookie::CookieJar;
use sqlx::PgPool;
use std::sync::Arc;

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    PgPool: FromRef<S>,
    Redis: FromRef<S>,
    Passwords: FromRef<S>,
    LoginThrottle: FromRef<S>,
    Arc<SessionKeys>: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    Router::new()
        .route("/auth/register", post(register))
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/me", get(me))
        .route("/admin/merchants", get(list_merchants))
}

async fn register(
    State(db): State<PgPool>,
    State(passwords): State<Passwords>,
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(StatusCode, CookieJar, Json<User>)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let hash = passwords.hash(password.into_inner()).await?;
    let user = insert_user(&db, &username, &hash, Role::Shopper).await?;
    tracing::info!(user.id = user.id, "registered");
    let jar = jar.add(sessions.issue(user.id, user.role));
    Ok((StatusCode::CREATED, jar, Json(user)))
}

// Each part it needs is one extractor; bundling them into a struct would hide what it uses.
#[allow(clippy::too_many_arguments)]
async fn login(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(passwords): State<Passwords>,
    State(throttle): State<LoginThrottle>,
    State(sessions): State<Arc<SessionKeys>>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let mut redis = redis.conn();
    throttle.check(&mut redis, username.as_str(), ip).await?;

    let row: Option<(i64, String, String, String)> = sqlx::query_as(
        "SELECT id, username, role, password_hash FROM users WHERE lower(username) = lower($1)",
    )
    .bind(username.as_str())
    .fetch_optional(&db)
    .await?;
    let (found, stored) = match row {
        Some((id, username, role, hash)) => (Some(UserRow { id, username, role }), Some(hash)),
        None => (None, None),
    };
    let ok = passwords.verify(password.into_inner(), stored).await?;
    match found {
        Some(row) if ok => {
            throttle
                .record_success(&mut redis, username.as_str(), ip)
                .await?;
            let user = row.into_user()?;
            let jar = jar.add(sessions.issue(user.id, user.role));
            Ok((jar, Json(user)))
        }
        _ => {
            throttle
                .record_failure(&mut redis, username.as_str(), ip)
                .await?;
            Err(ApiError::InvalidCredentials)
        }
    }
}

async fn logout(
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
) -> (StatusCode, CookieJar) {
    (StatusCode::NO_CONTENT, jar.add(sessions.clear()))
}

async fn me(State(db): State<PgPool>, SignedIn(claims): SignedIn) -> ApiResult<Json<User>> {
    let row: Option<UserRow> = sqlx::query_as("SELECT id, username, role FROM users WHERE id = $1")
        .bind(claims.user_id)
        .fetch_optional(&db)
        .await?;
    // A session outliving its account is no session.
    Ok(Json(row.ok_or(ApiError::Unauthenticated)?.into_user()?))
}

#[derive(serde::Serialize)]
struct Merchants {
    merchants: Vec<User>,
}

/// The merchant accounts (an addition to API.md, for the admin console).
async fn list_merchants(State(db): State<PgPool>, _: Merchant) -> ApiResult<Json<Merchants>> {
    let rows: Vec<UserRow> =
        sqlx::query_as("SELECT id, username, role FROM users WHERE role = 'merchant' ORDER BY id")
            .fetch_all(&db)
            .await?;
    let merchants = rows
        .into_iter()
        .map(UserRow::into_user)
        .collect::<ApiResult<_>>()?;
    Ok(Json(Merchants { merchants }))
}
