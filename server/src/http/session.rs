//! The `sid` cookie: its claims signed with HMAC-SHA256 (`signing::session`), so that the hot
//! path checks a session without any store lookup. A
//! session can still be ended before it expires (sign out, sign out everywhere, a password change,
//! a block): `domain::sessions::Revocations` knows the ended ones in memory on every instance.
//! Extractors turn the cookie into `SignedIn`, `Merchant` (with the shop) and `Operator`.

use crate::domain::{sessions::Revocations, ApiError};
use app::api::Role;
use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use signing::session::{new_session_id, Claims, SessionSigner};
use std::{sync::Arc, time::Duration};

pub const COOKIE_NAME: &str = "sid";
/// The name over HTTPS: a `__Host-` cookie is only ever set with `Secure`, for the whole site and
/// no `Domain`, so a sibling subdomain or a plain-HTTP page cannot plant or overwrite it.
pub const SECURE_COOKIE_NAME: &str = "__Host-sid";
/// An operator's session lasts at most this long (hours, not the shoppers' days).
pub const OPERATOR_TTL: Duration = Duration::from_secs(4 * 3600);
/// A password reset or a block needs the operator's password checked within this long (a sign-in
/// or `POST /api/auth/confirm`): a session left open or stolen cannot take over accounts.
pub const REAUTH_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Whom a new session is for, as the database has them now.
#[derive(Clone, Copy, Debug)]
pub struct Holder {
    pub user_id: i64,
    pub role: Role,
    /// A merchant's shop.
    pub shop_id: Option<i64>,
    /// Their session epoch.
    pub epoch: i64,
    /// When the account was created (unix seconds).
    pub joined: i64,
}

#[derive(Clone)]
pub struct SessionKeys {
    signer: SessionSigner,
    ttl: Duration,
    secure: bool,
    /// The sessions ended before they expired.
    pub revocations: Revocations,
}

impl SessionKeys {
    pub fn new(secret: &[u8], ttl: Duration, secure: bool) -> SessionKeys {
        SessionKeys {
            signer: SessionSigner::new(secret),
            ttl,
            secure,
            revocations: Revocations::default(),
        }
    }

    /// Also accepts cookies signed with the secret before a rotation
    /// (`SECKILL_SECRET_PREVIOUS`).
    pub fn accepting(mut self, previous: Option<&[u8]>) -> SessionKeys {
        self.signer = self.signer.accepting(previous);
        self
    }

    pub fn sign(&self, claims: &Claims) -> String {
        self.signer.sign(claims)
    }

    /// The claims of a correctly signed, unexpired cookie value (whether the session was ended
    /// since is `check`'s question).
    pub fn verify(&self, value: &str, now: i64) -> Option<Claims> {
        self.signer.verify(value, now)
    }

    /// `verify`, and the session has not been ended.
    pub fn check(&self, value: &str, now: i64) -> Option<Claims> {
        self.verify(value, now)
            .filter(|c| self.revocations.admits(c.user_id, c.epoch, c.sid))
    }

    /// Whether the site is served over HTTPS (cookies carry `Secure`).
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// The session cookie's name: `__Host-sid` where the site is served over HTTPS, else `sid`.
    pub fn cookie_name(&self) -> &'static str {
        if self.secure {
            SECURE_COOKIE_NAME
        } else {
            COOKIE_NAME
        }
    }

    /// A new session, issued just after the holder's password was checked (or set). An
    /// operator's lasts at most [`OPERATOR_TTL`].
    pub fn issue(&self, holder: Holder) -> Cookie<'static> {
        let ttl = match holder.role {
            Role::Operator => self.ttl.min(OPERATOR_TTL),
            _ => self.ttl,
        };
        let now = chrono::Utc::now().timestamp();
        let value = self.sign(&Claims {
            sid: new_session_id(),
            user_id: holder.user_id,
            role: holder.role,
            shop_id: holder.shop_id.unwrap_or(0),
            epoch: holder.epoch,
            expires_at: now + ttl.as_secs() as i64,
            joined: holder.joined,
            auth_at: now,
        });
        Cookie::build((self.cookie_name(), value))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(cookie_duration(ttl))
            .build()
    }

    pub fn clear(&self) -> Cookie<'static> {
        Cookie::build((self.cookie_name(), ""))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(cookie_duration(Duration::ZERO))
            .build()
    }
}

fn cookie_duration(d: Duration) -> cookie::time::Duration {
    cookie::time::Duration::seconds(d.as_secs() as i64)
}

/// Any signed-in user.
#[derive(Clone, Copy, Debug)]
pub struct SignedIn(pub Claims);

/// A signed-in merchant, with the shop whose data it may see; anyone else gets `403 forbidden`.
#[derive(Clone, Copy, Debug)]
pub struct Merchant {
    pub user_id: i64,
    pub shop_id: i64,
}

/// The signed-in platform operator; anyone else gets `403 forbidden`.
#[derive(Clone, Copy, Debug)]
pub struct Operator {
    pub user_id: i64,
    /// When the operator's password was last checked (unix seconds).
    pub auth_at: i64,
}

impl Operator {
    /// `403 reauthentication_required` unless the password was checked within
    /// [`REAUTH_WINDOW`]: asked before the actions that take an account over or shut one out.
    pub fn recently_authenticated(&self) -> Result<(), ApiError> {
        let age = chrono::Utc::now().timestamp() - self.auth_at;
        match age <= REAUTH_WINDOW.as_secs() as i64 {
            true => Ok(()),
            false => Err(ApiError::ReauthenticationRequired),
        }
    }
}

impl<S> FromRequestParts<S> for SignedIn
where
    S: Send + Sync,
    Arc<SessionKeys>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let jar = CookieJar::from_headers(&parts.headers);
        let keys = Arc::<SessionKeys>::from_ref(state);
        let cookie = jar
            .get(keys.cookie_name())
            .ok_or(ApiError::Unauthenticated)?;
        keys.check(cookie.value(), chrono::Utc::now().timestamp())
            .map(SignedIn)
            .ok_or(ApiError::Unauthenticated)
    }
}

impl<S> FromRequestParts<S> for Merchant
where
    S: Send + Sync,
    Arc<SessionKeys>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let SignedIn(claims) = SignedIn::from_request_parts(parts, state).await?;
        match claims.role {
            Role::Merchant if claims.shop_id > 0 => Ok(Merchant {
                user_id: claims.user_id,
                shop_id: claims.shop_id,
            }),
            _ => Err(ApiError::Forbidden),
        }
    }
}

impl<S> FromRequestParts<S> for Operator
where
    S: Send + Sync,
    Arc<SessionKeys>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let SignedIn(claims) = SignedIn::from_request_parts(parts, state).await?;
        match claims.role {
            Role::Operator => Ok(Operator {
                user_id: claims.user_id,
                auth_at: claims.auth_at,
            }),
            _ => Err(ApiError::Forbidden),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> SessionKeys {
        SessionKeys::new(
            b"0123456789abcdef0123456789abcdef",
            Duration::from_secs(60),
            false,
        )
    }

    fn claims() -> Claims {
        Claims {
            sid: 0xfeed,
            user_id: 42,
            role: Role::Shopper,
            shop_id: 0,
            epoch: 3,
            expires_at: 2_000,
            joined: 0,
            auth_at: 0,
        }
    }

    #[test]
    fn an_ended_session_or_epoch_no_longer_checks() {
        let keys = keys();
        let value = keys.sign(&claims());
        assert_eq!(keys.check(&value, 1_000), Some(claims()));
        keys.revocations.on_message("epoch 42 4");
        assert_eq!(keys.check(&value, 1_000), None);
        assert_eq!(
            keys.verify(&value, 1_000),
            Some(claims()),
            "still signed, but ended"
        );
        let next = Claims {
            epoch: 4,
            sid: 0xbeef,
            ..claims()
        };
        let value = keys.sign(&next);
        assert_eq!(keys.check(&value, 1_000), Some(next));
        keys.revocations
            .on_message(&format!("session {:032x} 2000", 0xbeef));
        assert_eq!(keys.check(&value, 1_000), None);
    }
}
