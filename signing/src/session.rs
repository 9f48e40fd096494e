//! The `sid` cookie's value: a session id, the user's id, role, shop and session epoch, the
//! expiry, when the account was created and when the password was last checked, signed with
//! HMAC-SHA256. The server checks a session with no store lookup; whether it was ended before
//! it expires is the server's question (its revocations), not the signature's.

use app::api::{Role, UserId};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claims {
    /// 128 random bits naming this session (what sign-out ends).
    pub sid: u128,
    pub user_id: i64,
    pub role: Role,
    /// A merchant's shop; 0 for anyone else.
    pub shop_id: i64,
    /// The user's session epoch when it was issued: raising it ends every older session.
    pub epoch: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// When the account was created (unix seconds), for the sales kept to older accounts.
    pub joined: i64,
    /// When the password was last checked for this session (unix seconds): its sign-in, or the
    /// last confirmation.
    pub auth_at: i64,
}

impl Claims {
    /// The signed-in account.
    pub fn user(&self) -> UserId {
        UserId(self.user_id)
    }
}

/// A session id: 128 random bits, written as 32 hex digits.
pub fn new_session_id() -> u128 {
    rand::rng().random()
}

/// Signs claims into a cookie value, and reads them back from a correctly signed one: signed
/// with the secret, or with the one before it during a rotation.
#[derive(Clone)]
pub struct SessionSigner {
    key: Vec<u8>,
    previous: Option<Vec<u8>>,
}

impl SessionSigner {
    pub fn new(secret: &[u8]) -> SessionSigner {
        SessionSigner {
            key: secret.to_vec(),
            previous: None,
        }
    }

    /// Also accepts values signed with `previous` (never signs with it): a rotation of the
    /// secret does not end the sessions signed before it.
    pub fn accepting(mut self, previous: Option<&[u8]>) -> SessionSigner {
        self.previous = previous.map(<[u8]>::to_vec);
        self
    }

    fn mac(&self) -> Hmac<Sha256> {
        mac_with(&self.key)
    }

    pub fn sign(&self, claims: &Claims) -> String {
        let payload = format!(
            "{:032x}.{}.{}.{}.{}.{}.{}.{}",
            claims.sid,
            claims.user_id,
            claims.role.as_str(),
            claims.shop_id,
            claims.epoch,
            claims.expires_at,
            claims.joined,
            claims.auth_at
        );
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        format!("{payload}.{}", B64.encode(mac.finalize().into_bytes()))
    }

    /// The claims of a correctly signed value that has not expired at `now` (unix seconds).
    pub fn verify(&self, value: &str, now: i64) -> Option<Claims> {
        let (payload, sig) = value.rsplit_once('.')?;
        let sig = B64.decode(sig).ok()?;
        let signed_with = |key: &[u8]| {
            let mut mac = mac_with(key);
            mac.update(payload.as_bytes());
            mac.verify_slice(&sig).is_ok()
        };
        if !signed_with(&self.key) && !self.previous.as_deref().is_some_and(signed_with) {
            return None;
        }
        let mut parts = payload.split('.');
        let claims = Claims {
            sid: u128::from_str_radix(parts.next()?, 16).ok()?,
            user_id: parts.next()?.parse().ok()?,
            role: Role::parse(parts.next()?)?,
            shop_id: parts.next()?.parse().ok()?,
            epoch: parts.next()?.parse().ok()?,
            expires_at: parts.next()?.parse().ok()?,
            joined: parts.next()?.parse().ok()?,
            auth_at: parts.next()?.parse().ok()?,
        };
        (parts.next().is_none() && claims.expires_at > now).then_some(claims)
    }
}

fn mac_with(key: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"sid\0");
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> SessionSigner {
        SessionSigner::new(b"0123456789abcdef0123456789abcdef")
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
    fn a_signed_value_verifies_before_expiry() {
        let value = signer().sign(&claims());
        assert_eq!(signer().verify(&value, 1_999), Some(claims()));
    }

    #[test]
    fn an_expired_value_is_rejected() {
        let value = signer().sign(&claims());
        assert_eq!(signer().verify(&value, 2_000), None);
    }

    #[test]
    fn a_promoted_role_breaks_the_signature() {
        let value = signer().sign(&claims()).replacen("shopper", "merchant", 1);
        assert_eq!(signer().verify(&value, 1_000), None);
    }

    #[test]
    fn another_key_does_not_verify() {
        let value = signer().sign(&claims());
        let other = SessionSigner::new(b"another-secret-another-secret-xx");
        assert_eq!(other.verify(&value, 1_000), None);
    }

    #[test]
    fn after_a_rotation_a_value_signed_with_the_previous_secret_still_verifies() {
        let before = signer().sign(&claims());
        let rotated = SessionSigner::new(b"another-secret-another-secret-xx")
            .accepting(Some(b"0123456789abcdef0123456789abcdef"));
        assert_eq!(rotated.verify(&before, 1_000), Some(claims()));
        let after = rotated.sign(&claims());
        assert_ne!(after, before, "signed with the new secret");
        assert_eq!(signer().verify(&after, 1_000), None);
        let tampered = before.replacen("shopper", "merchant", 1);
        assert_eq!(rotated.verify(&tampered, 1_000), None);
    }

    #[test]
    fn garbage_is_rejected() {
        for v in [
            "",
            ".",
            "1.shopper.9",
            "a.b.c.d",
            "1.shopper.9.!!!",
            "0.1.shopper.0.0.9.x",
        ] {
            assert_eq!(signer().verify(v, 0), None, "{v}");
        }
    }

    #[test]
    fn session_ids_are_drawn() {
        assert_ne!(new_session_id(), new_session_id());
    }
}
