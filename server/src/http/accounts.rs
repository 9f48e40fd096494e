//! docs/api.md "Sessions": register, sign in, sign out (this session, or everywhere), change the
//! password, who am I; and the console's list of the shop's merchants.

use super::{
    client_ip::ClientIp,
    input::AppJson,
    session::{Holder, Merchant, SessionKeys, SignedIn},
};
use crate::{
    buy::doors::Doors,
    domain::{
        account::{
            self, insert_user,
            throttle::{LoginThrottle, Outcome},
            Password, UserRow, Username,
        },
        password::Passwords,
        sessions::next_epoch,
        ApiError, ApiResult,
    },
    infra::{config::Config, redis::Redis},
};
use app::api::{Confirmation, Credentials, PasswordChange, Role, User};
use axum::{
    extract::{FromRef, State},
    http::{header, StatusCode},
    response::IntoResponse,
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
    Doors: FromRef<S>,
    Arc<SessionKeys>: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    Router::new()
        .route("/auth/register", post(register))
        .route("/auth/challenge", get(sign_up_challenge))
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/auth/logout-everywhere", post(logout_everywhere))
        .route("/auth/password", post(change_password))
        .route("/auth/confirm", post(confirm))
        .route("/me", get(me))
        .route("/admin/merchants", get(list_merchants))
}

/// The proof of work a sign-up carries (ALTCHA v2 JSON, as for a sale), `no-store`; `404` when
/// sign-ups ask none.
async fn sign_up_challenge(
    State(doors): State<Doors>,
    ClientIp(ip): ClientIp,
) -> ApiResult<impl IntoResponse> {
    let challenge = doors.sign_up_challenge(ip)?.ok_or(ApiError::NotFound)?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(challenge)))
}

/// A new shopper account, once the input is valid: its proof of work checked and spent (`400
/// captcha_invalid`), the address's and the platform's sign-up budgets counted (`429` past them),
/// and the password hashed in the sign-up slots.
// Each part it needs is one extractor.
#[allow(clippy::too_many_arguments)]
async fn register(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(passwords): State<Passwords>,
    State(doors): State<Doors>,
    State(sessions): State<Arc<SessionKeys>>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(StatusCode, CookieJar, Json<User>)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let mut conn = redis.conn();
    doors
        .check_sign_up_proof(&mut conn, creds.pow.as_deref())
        .await?;
    doors.sign_up(&mut conn, ip).await?;
    let hash = passwords
        .hash_sign_up(password.into_inner(), username.as_str().to_string())
        .await?;
    let user = insert_user(&db, &username, &hash, Role::Shopper, None).await?;
    tracing::info!(user.id = user.id, "registered");
    let jar = jar.add(sessions.issue(Holder {
        user_id: user.id,
        role: user.role,
        shop_id: None,
        epoch: 0,
        joined: chrono::Utc::now().timestamp(),
    }));
    Ok((StatusCode::CREATED, jar, Json(user)))
}

/// Checks a user's password under the sign-in throttle (`domain/account/throttle.rs`: the attempt is taken
/// before the password is verified): `429` past a limit, `401 invalid_credentials` for a wrong
/// password or an unknown user alike.
async fn authenticate(
    db: &PgPool,
    redis: &Redis,
    passwords: &Passwords,
    throttle: &LoginThrottle,
    ip: std::net::IpAddr,
    username: &Username,
    password: Password,
) -> ApiResult<UserRow> {
    let mut redis = redis.conn();
    let attempt = throttle.reserve(&mut redis, username.as_str(), ip).await?;
    let verified = async {
        let (found, stored) = match account::find_with_hash(db, username.as_str()).await? {
            Some((row, hash)) => (Some(row), Some(hash)),
            None => (None, None),
        };
        let ok = passwords.verify(password.into_inner(), stored).await?;
        ApiResult::Ok(found.filter(|_| ok))
    }
    .await;
    let outcome = match &verified {
        Ok(Some(_)) => Outcome::Succeeded,
        Ok(None) => Outcome::Failed,
        Err(_) => Outcome::Undecided,
    };
    throttle.finish(&mut redis, attempt, outcome).await?;
    verified?.ok_or(ApiError::InvalidCredentials)
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
    let row = authenticate(&db, &redis, &passwords, &throttle, ip, &username, password).await?;
    // Said only to the one who knows the password: it reveals nothing to anyone else.
    if row.blocked {
        return Err(ApiError::AccountBlocked);
    }
    let jar = jar.add(sessions.issue(holder(&row, row.session_epoch)?));
    Ok((jar, Json(row.into_user()?)))
}

/// Whom a new session is for: `row`, under session epoch `epoch`.
fn holder(row: &UserRow, epoch: i64) -> ApiResult<Holder> {
    Ok(Holder {
        user_id: row.id,
        role: row.role()?,
        shop_id: row.shop_id,
        epoch,
        joined: row.joined,
    })
}

/// The signed-in user's password checked again (under the sign-in throttle), before an action
/// that asks for a recent check: this session ends and a new one, checked now, takes its place.
// Each part it needs is one extractor.
#[allow(clippy::too_many_arguments)]
async fn confirm(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(passwords): State<Passwords>,
    State(throttle): State<LoginThrottle>,
    State(sessions): State<Arc<SessionKeys>>,
    SignedIn(claims): SignedIn,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(body): AppJson<Confirmation>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let password = Password::parse(&body.password)?;
    let row = account::load(&db, claims.user_id)
        .await?
        .filter(|r| !r.blocked)
        .ok_or(ApiError::Unauthenticated)?;
    let username = Username::parse(&row.username)?;
    let row = authenticate(&db, &redis, &passwords, &throttle, ip, &username, password)
        .await
        .map_err(|e| match e {
            ApiError::InvalidCredentials => ApiError::invalid("password", "is wrong"),
            other => other,
        })?;
    sessions
        .revocations
        .end_session(&db, &redis, claims.user_id, claims.sid, claims.expires_at)
        .await?;
    let jar = jar.add(sessions.issue(holder(&row, claims.epoch)?));
    Ok((jar, Json(row.into_user()?)))
}

/// Ends this session on every instance (the same cookie answers `401` from then on) and clears
/// the cookie. Without a valid session there is nothing to end: `204` all the same.
async fn logout(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
) -> ApiResult<(StatusCode, CookieJar)> {
    let now = chrono::Utc::now().timestamp();
    if let Some(claims) = jar
        .get(sessions.cookie_name())
        .and_then(|c| sessions.check(c.value(), now))
    {
        sessions
            .revocations
            .end_session(&db, &redis, claims.user_id, claims.sid, claims.expires_at)
            .await?;
    }
    Ok((StatusCode::NO_CONTENT, jar.add(sessions.clear())))
}

/// Ends every session of the signed-in user, on every device and instance.
async fn logout_everywhere(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sessions): State<Arc<SessionKeys>>,
    SignedIn(claims): SignedIn,
    jar: CookieJar,
) -> ApiResult<(StatusCode, CookieJar)> {
    let epoch = next_epoch(&db, claims.user_id)
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    sessions
        .revocations
        .announce_epoch(&redis, claims.user_id, epoch)
        .await;
    tracing::info!(user.id = claims.user_id, "signed out everywhere");
    Ok((StatusCode::NO_CONTENT, jar.add(sessions.clear())))
}

/// Changes the signed-in user's password (the current one is asked, under the sign-in throttle):
/// every other session ends; this one goes on with a new cookie.
// Each part it needs is one extractor.
#[allow(clippy::too_many_arguments)]
async fn change_password(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(passwords): State<Passwords>,
    State(throttle): State<LoginThrottle>,
    State(sessions): State<Arc<SessionKeys>>,
    SignedIn(claims): SignedIn,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(change): AppJson<PasswordChange>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let current = Password::parse(&change.current_password)
        .map_err(|_| ApiError::invalid("current_password", "must be 8 to 128 characters"))?;
    let new = Password::parse(&change.new_password)
        .map_err(|_| ApiError::invalid("new_password", "must be 8 to 128 characters"))?;
    let row = account::load(&db, claims.user_id)
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    let username = Username::parse(&row.username)?;
    authenticate(&db, &redis, &passwords, &throttle, ip, &username, current)
        .await
        .map_err(|e| match e {
            ApiError::InvalidCredentials => ApiError::invalid("current_password", "is wrong"),
            other => other,
        })?;
    let hash = passwords
        .hash_new(new.into_inner(), row.username.clone())
        .await
        .map_err(|e| match e {
            ApiError::InvalidInput(why) => {
                ApiError::InvalidInput(why.replacen("password", "new_password", 1))
            }
            other => other,
        })?;
    let epoch = account::set_password(&db, claims.user_id, &hash, true)
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    sessions
        .revocations
        .announce_epoch(&redis, claims.user_id, epoch)
        .await;
    tracing::info!(
        user.id = claims.user_id,
        "password changed; other sessions ended"
    );
    let jar = jar.add(sessions.issue(holder(&row, epoch)?));
    Ok((jar, Json(row.into_user()?)))
}

async fn me(State(db): State<PgPool>, SignedIn(claims): SignedIn) -> ApiResult<Json<User>> {
    let row = account::load(&db, claims.user_id).await?;
    // A session outliving its account (or its unblocked state) is no session.
    let row = row
        .filter(|r| !r.blocked)
        .ok_or(ApiError::Unauthenticated)?;
    Ok(Json(row.into_user()?))
}

#[derive(serde::Serialize)]
struct Merchants {
    merchants: Vec<User>,
}

/// The merchant accounts of the signed-in merchant's shop (an addition to docs/api.md, for the console).
async fn list_merchants(
    State(db): State<PgPool>,
    merchant: Merchant,
) -> ApiResult<Json<Merchants>> {
    let merchants = account::merchants_of(&db, merchant.shop_id)
        .await?
        .into_iter()
        .map(UserRow::into_user)
        .collect::<ApiResult<_>>()?;
    Ok(Json(Merchants { merchants }))
}
