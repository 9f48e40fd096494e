//! The `sid` cookie: user id, role and expiry, signed with HMAC-SHA256, so that the hot path checks
//! a session without any store lookup. Extractors turn it into `Shopper`-or-better and `Merchant`.

use crate::domain::ApiError;
use app::api::Role;
use axum::{
    extract::{FromRef, FromRequestParts},
    http::request::Parts,
};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::{sync::Arc, time::Duration};

pub const COOKIE_NAME: &str = "sid";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claims {
    pub user_id: i64,
    pub role: Role,
    /// Unix seconds.
    pub expires_at: i64,
}

#[derive(Clone)]
pub struct SessionKeys {
    key: Vec<u8>,
    ttl: Duration,
    secure: bool,
}

impl SessionKeys {
    pub fn new(secret: &[u8], ttl: Duration, secure: bool) -> SessionKeys {
        SessionKeys {
            key: secret.to_vec(),
            ttl,
            secure,
        }
    }

    fn mac(&self) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(b"sid\0");
        mac
    }

    pub fn sign(&self, claims: &Claims) -> String {
        let payload = format!(
            "{}.{}.{}",
            claims.user_id,
            claims.role.as_str(),
            claims.expires_at
        );
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        format!("{payload}.{}", B64.encode(mac.finalize().into_bytes()))
    }

    pub fn verify(&self, value: &str, now: i64) -> Option<Claims> {
        let (payload, sig) = value.rsplit_once('.')?;
        let sig = B64.decode(sig).ok()?;
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        mac.verify_slice(&sig).ok()?;
        let mut parts = payload.split('.');
        let claims = Claims {
            user_id: parts.next()?.parse().ok()?,
            role: Role::parse(parts.next()?)?,
            expires_at: parts.next()?.parse().ok()?,
        };
        (parts.next().is_none() && claims.expires_at > now).then_some(claims)
    }

    pub fn issue(&self, user_id: i64, role: Role) -> Cookie<'static> {
        let expires_at = chrono::Utc::now().timestamp() + self.ttl.as_secs() as i64;
        let value = self.sign(&Claims {
            user_id,
            role,
            expires_at,
        });
        Cookie::build((COOKIE_NAME, value))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(cookie_duration(self.ttl))
            .build()
    }

    pub fn clear(&self) -> Cookie<'static> {
        Cookie::build((COOKIE_NAME, ""))
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

/// A signed-in merchant; shoppers get `403 forbidden`.
#[derive(Clone, Copy, Debug)]
pub struct Merchant(pub Claims);

impl<S> FromRequestParts<S> for SignedIn
where
    S: Send + Sync,
    Arc<SessionKeys>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let jar = CookieJar::from_headers(&parts.headers);
        let cookie = jar.get(COOKIE_NAME).ok_or(ApiError::Unauthenticated)?;
        Arc::<SessionKeys>::from_ref(state)
            .verify(cookie.value(), chrono::Utc::now().timestamp())
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
            Role::Merchant => Ok(Merchant(claims)),
            Role::Shopper => Err(ApiError::Forbidden),
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
            user_id: 42,
            role: Role::Shopper,
            expires_at: 2_000,
        }
    }

    #[test]
    fn a_signed_value_verifies_before_expiry() {
        let value = keys().sign(&claims());
        assert_eq!(keys().verify(&value, 1_999), Some(claims()));
    }

    #[test]
    fn an_expired_value_is_rejected() {
        let value = keys().sign(&claims());
        assert_eq!(keys().verify(&value, 2_000), None);
    }

    #[test]
    fn a_promoted_role_breaks_the_signature() {
        let value = keys().sign(&claims()).replacen("shopper", "merchant", 1);
        assert_eq!(keys().verify(&value, 1_000), None);
    }

    #[test]
    fn another_key_does_not_verify() {
        let value = keys().sign(&claims());
        let other = SessionKeys::new(
            b"another-secret-another-secret-xx",
            Duration::from_secs(60),
            false,
        );
        assert_eq!(other.verify(&value, 1_000), None);
    }

    #[test]
    fn garbage_is_rejected() {
        for v in ["", ".", "1.shopper.9", "a.b.c.d", "1.shopper.9.!!!"] {
            assert_eq!(keys().verify(v, 0), None, "{v}");
        }
    }
}
