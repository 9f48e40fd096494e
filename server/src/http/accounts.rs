//! docs/api.md "Sessions": register, sign in, sign out (this session, or everywhere), change the
//! password, who am I; and the console's list of the shop's merchants.

use super::{
    client_ip::ClientIp,
    input::AppJson,
    session::{Holder, Merchant, SessionKeys, SignedIn},
};
use crate::http::state::AppState;
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
    extract::{FromRef, FromRequestParts, State},
    http::request::Parts,
    http::{header, StatusCode},
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use axum_extra::extract::cookie::CookieJar;
use sqlx::PgPool;
use std::sync::Arc;

pub fn router() -> Router<AppState> {
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
async fn register(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(StatusCode, CookieJar, Json<User>)> {
    let check = SignUpCheck::ProofOfWork(creds.pow.as_deref());
    let (jar, user) = sign_up(&state, ip, jar, &creds, check).await?;
    Ok((StatusCode::CREATED, jar, Json(user)))
}

/// The bot check a sign-up passes: the app's proof of work, or, for a form posted without
/// scripts, the image captcha whose id the page's captcha image left in a cookie.
pub(super) enum SignUpCheck<'a> {
    ProofOfWork(Option<&'a str>),
    Captcha { id: &'a str, answer: &'a str },
}

/// Creates a shopper account and its session, as `POST /api/auth/register` and the sign-up form
/// without scripts both do: the same checks, budgets and refusals.
pub(super) async fn sign_up(
    state: &AppState,
    ip: std::net::IpAddr,
    jar: CookieJar,
    creds: &Credentials,
    check: SignUpCheck<'_>,
) -> ApiResult<(CookieJar, User)> {
    let (db, redis) = (PgPool::from_ref(state), Redis::from_ref(state));
    let (doors, sessions) = (Doors::from_ref(state), Arc::<SessionKeys>::from_ref(state));
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let mut conn = redis.conn();
    match check {
        SignUpCheck::ProofOfWork(pow) => doors.check_sign_up_proof(&mut conn, pow).await?,
        SignUpCheck::Captcha { id, answer } => {
            if doors.asks_sign_up_check() {
                crate::buy::captcha::spend(&redis, id, answer).await?;
            }
        }
    }
    doors.sign_up(&mut conn, ip).await?;
    let hash = Passwords::from_ref(state)
        .hash_sign_up(password.into_inner(), username.as_str().to_string())
        .await?;
    let network = crate::domain::crowd::network(ip);
    let user = insert_user(&db, &username, &hash, Role::Shopper, None, Some(&network)).await?;
    tracing::info!(user.id = %user.id, "registered");
    let jar = jar.add(sessions.issue(Holder {
        user_id: user.id.0,
        role: user.role,
        shop_id: None,
        epoch: 0,
        joined: chrono::Utc::now().timestamp(),
    }));
    Ok((jar, user))
}

/// What checking a password takes (the accounts, the hashing slots, the sign-in throttle) and
/// the client address the throttle counts by: one extractor for every handler that checks one.
pub struct PasswordCheck {
    db: PgPool,
    redis: Redis,
    passwords: Passwords,
    throttle: LoginThrottle,
    ip: std::net::IpAddr,
}

impl<S> FromRequestParts<S> for PasswordCheck
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    Redis: FromRef<S>,
    Passwords: FromRef<S>,
    LoginThrottle: FromRef<S>,
    Arc<Config>: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ClientIp(ip) = ClientIp::from_request_parts(parts, state).await?;
        Ok(PasswordCheck {
            db: PgPool::from_ref(state),
            redis: Redis::from_ref(state),
            passwords: Passwords::from_ref(state),
            throttle: LoginThrottle::from_ref(state),
            ip,
        })
    }
}

impl PasswordCheck {
    /// Checks a user's password under the sign-in throttle (`domain/account/throttle.rs`: the
    /// attempt is taken before the password is verified): `429` past a limit, `401
    /// invalid_credentials` for a wrong password or an unknown user alike.
    async fn authenticate(&self, username: &Username, password: Password) -> ApiResult<UserRow> {
        let mut redis = self.redis.conn();
        let attempt = self
            .throttle
            .reserve(&mut redis, username.as_str(), self.ip)
            .await?;
        let verified = async {
            let (found, stored) = match account::find_with_hash(&self.db, username.as_str()).await?
            {
                Some((row, hash)) => (Some(row), Some(hash)),
                None => (None, None),
            };
            let ok = self.passwords.verify(password.into_inner(), stored).await?;
            ApiResult::Ok(found.filter(|_| ok))
        }
        .await;
        let outcome = match &verified {
            Ok(Some(_)) => Outcome::Succeeded,
            Ok(None) => Outcome::Failed,
            Err(_) => Outcome::Undecided,
        };
        self.throttle.finish(&mut redis, attempt, outcome).await?;
        verified?.ok_or(ApiError::InvalidCredentials)
    }

    /// The signed-in user's own password checked again: a wrong one is bad input naming `field`
    /// (the session is theirs; there is no one to hide the account from).
    async fn recheck(&self, row: &UserRow, field: &str, password: Password) -> ApiResult<UserRow> {
        let username = Username::parse(&row.username)?;
        self.authenticate(&username, password)
            .await
            .map_err(|e| match e {
                ApiError::InvalidCredentials => ApiError::invalid(field, "is wrong"),
                other => other,
            })
    }
}

async fn login(
    check: PasswordCheck,
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let (jar, user) = sign_in(&check, &sessions, jar, &creds).await?;
    Ok((jar, Json(user)))
}

/// Checks a sign-in and starts its session, as `POST /api/auth/login` and the sign-in form
/// without scripts both do.
pub(super) async fn sign_in(
    check: &PasswordCheck,
    sessions: &SessionKeys,
    jar: CookieJar,
    creds: &Credentials,
) -> ApiResult<(CookieJar, User)> {
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let row = check.authenticate(&username, password).await?;
    // Said only to the one who knows the password: it reveals nothing to anyone else.
    if row.blocked {
        return Err(ApiError::AccountBlocked);
    }
    let jar = jar.add(sessions.issue(holder(&row, row.session_epoch)?));
    Ok((jar, row.into_user()?))
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
async fn confirm(
    check: PasswordCheck,
    State(sessions): State<Arc<SessionKeys>>,
    SignedIn(claims): SignedIn,
    jar: CookieJar,
    AppJson(body): AppJson<Confirmation>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let password = Password::parse(&body.password)?;
    let row = account::load(&check.db, claims.user_id)
        .await?
        .filter(|r| !r.blocked)
        .ok_or(ApiError::Unauthenticated)?;
    let row = check.recheck(&row, "password", password).await?;
    sessions
        .revocations
        .end_session(
            &check.db,
            &check.redis,
            claims.user_id,
            claims.sid,
            claims.expires_at,
        )
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
    let jar = sign_out(&db, &redis, &sessions, jar).await?;
    Ok((StatusCode::NO_CONTENT, jar))
}

/// Ends the session `jar` carries, if any, and clears its cookie (the API's sign-out and the
/// form's).
pub(super) async fn sign_out(
    db: &PgPool,
    redis: &Redis,
    sessions: &SessionKeys,
    jar: CookieJar,
) -> ApiResult<CookieJar> {
    let now = chrono::Utc::now().timestamp();
    if let Some(claims) = jar
        .get(sessions.cookie_name())
        .and_then(|c| sessions.check(c.value(), now))
    {
        sessions
            .revocations
            .end_session(db, redis, claims.user_id, claims.sid, claims.expires_at)
            .await?;
    }
    Ok(jar.add(sessions.clear()))
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
async fn change_password(
    check: PasswordCheck,
    State(sessions): State<Arc<SessionKeys>>,
    SignedIn(claims): SignedIn,
    jar: CookieJar,
    AppJson(change): AppJson<PasswordChange>,
) -> ApiResult<(CookieJar, Json<User>)> {
    let (db, redis) = (&check.db, &check.redis);
    let current = Password::parse(&change.current_password)
        .map_err(|_| ApiError::invalid("current_password", "must be 8 to 128 characters"))?;
    let new = Password::parse(&change.new_password)
        .map_err(|_| ApiError::invalid("new_password", "must be 8 to 128 characters"))?;
    let row = account::load(db, claims.user_id)
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    check.recheck(&row, "current_password", current).await?;
    let hash = check
        .passwords
        .hash_new(new.into_inner(), row.username.clone())
        .await
        .map_err(|e| match e {
            ApiError::InvalidInput(why) => {
                ApiError::InvalidInput(why.replacen("password", "new_password", 1))
            }
            other => other,
        })?;
    let epoch = account::set_password(db, claims.user_id, &hash, true)
        .await?
        .ok_or(ApiError::Unauthenticated)?;
    sessions
        .revocations
        .announce_epoch(redis, claims.user_id, epoch)
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
