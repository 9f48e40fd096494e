//! A shopper's place in a line, signed and held by the shopper (a cookie scoped to the sale's
//! `…/queue`): `<user>.<place>.<HMAC of user, sale and place>`, place 0 while it is not numbered
//! yet (drawn before the start). With it, and the line's board every instance keeps in memory,
//! a poll is answered without Redis; the HMAC means a client cannot move itself forward.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;

/// The cookie that carries the place (its path names the sale).
pub const COOKIE: &str = "place";

#[derive(Clone)]
pub struct Places {
    key: Arc<[u8]>,
    /// The secret before a rotation (`SECKILL_SECRET_PREVIOUS`): a place it signed still holds.
    previous: Option<Arc<[u8]>>,
}

/// What a held place value says.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// Signed for this user and sale: the place (0: not numbered yet).
    Place(i64),
    /// Another user's (a shared browser): not a forgery, just not theirs.
    NotTheirs,
    /// Not a value the server signed for this sale.
    Forged,
}

impl Places {
    pub fn new(secret: &[u8]) -> Places {
        Places {
            key: secret.into(),
            previous: None,
        }
    }

    /// Places signed with `previous` too (the secret before a rotation): a shopper who waits in
    /// a line while the instances restart with a new secret keeps their place.
    pub fn accepting(mut self, previous: Option<&[u8]>) -> Places {
        self.previous = previous.map(Into::into);
        self
    }

    fn mac(key: &[u8], user: i64, activity: i64, place: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(format!("place\0{user}\0{activity}\0{place}").as_bytes());
        mac
    }

    pub fn sign(&self, user: i64, activity: i64, place: i64) -> String {
        let mac = Self::mac(&self.key, user, activity, place)
            .finalize()
            .into_bytes();
        format!("{user}.{place}.{}", B64.encode(&mac[..18]))
    }

    pub fn read(&self, value: &str, user: i64, activity: i64) -> Held {
        let mut parts = value.splitn(3, '.');
        let (Some(owner), Some(place), Some(mac)) = (parts.next(), parts.next(), parts.next())
        else {
            return Held::Forged;
        };
        let (Ok(owner), Ok(place), Ok(mac)) =
            (owner.parse::<i64>(), place.parse::<i64>(), B64.decode(mac))
        else {
            return Held::Forged;
        };
        let signed_with = |key: &[u8]| {
            Self::mac(key, owner, activity, place)
                .verify_truncated_left(&mac)
                .is_ok()
        };
        if mac.len() != 18
            || place < 0
            || !(signed_with(&self.key) || self.previous.as_deref().is_some_and(signed_with))
        {
            return Held::Forged;
        }
        if owner == user {
            Held::Place(place)
        } else {
            Held::NotTheirs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_bound_to_its_user_sale_and_number() {
        let places = Places::new(b"0123456789abcdef0123456789abcdef");
        let held = places.sign(7, 9, 120);
        assert_eq!(places.read(&held, 7, 9), Held::Place(120));
        assert_eq!(places.read(&held, 8, 9), Held::NotTheirs);
        assert_eq!(places.read(&held, 7, 10), Held::Forged, "another sale");
        let forward = held.replacen(".120.", ".1.", 1);
        assert_eq!(places.read(&forward, 7, 9), Held::Forged, "moved forward");
        let other = Places::new(b"another secret of thirty-two byt").sign(7, 9, 120);
        assert_eq!(places.read(&other, 7, 9), Held::Forged, "another secret");
        for junk in [
            "",
            "..",
            "7.1",
            "7.-1.AAAA",
            "x.1.y",
            &held[..held.len() - 2],
        ] {
            assert_eq!(places.read(junk, 7, 9), Held::Forged, "{junk:?}");
        }
    }

    #[test]
    fn a_place_signed_before_a_rotation_still_holds() {
        let before = b"the secret before the rotation..";
        let held = Places::new(before).sign(7, 9, 120);
        let rotated = Places::new(b"0123456789abcdef0123456789abcdef");
        assert_eq!(rotated.read(&held, 7, 9), Held::Forged, "not accepted");
        let rotated = rotated.accepting(Some(before));
        assert_eq!(rotated.read(&held, 7, 9), Held::Place(120));
        assert_eq!(rotated.read(&held, 7, 10), Held::Forged, "another sale");
        let other = Places::new(b"another secret of thirty-two byt").sign(7, 9, 120);
        assert_eq!(rotated.read(&other, 7, 9), Held::Forged, "another secret");
    }
}
