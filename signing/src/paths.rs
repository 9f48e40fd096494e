//! The opaque buy paths: an HMAC of user and sale, so that a path is good for one user and one
//! sale, and cannot be guessed before the sale starts (the server hands it out at the start).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;

#[derive(Clone)]
pub struct BuyPaths {
    key: Arc<[u8]>,
    /// The secret before a rotation: its paths stay good, none is made with it.
    previous: Option<Arc<[u8]>>,
}

impl BuyPaths {
    pub fn new(secret: &[u8]) -> BuyPaths {
        BuyPaths {
            key: secret.into(),
            previous: None,
        }
    }

    /// Also accepts the paths made with `previous` (a rotation of the secret mid-sale).
    pub fn accepting(mut self, previous: Option<&[u8]>) -> BuyPaths {
        self.previous = previous.map(Into::into);
        self
    }

    fn mac(&self, user: i64, activity: i64) -> Hmac<Sha256> {
        mac_with(&self.key, user, activity)
    }

    /// The opaque buy path of one user for one activity.
    pub fn path(&self, user: i64, activity: i64) -> String {
        B64.encode(&self.mac(user, activity).finalize().into_bytes()[..18])
    }

    pub fn is_valid(&self, path: &str, user: i64, activity: i64) -> bool {
        match B64.decode(path) {
            Ok(bytes) if bytes.len() == 18 => {
                let made_with = |key: &[u8]| {
                    mac_with(key, user, activity)
                        .verify_truncated_left(&bytes)
                        .is_ok()
                };
                made_with(&self.key) || self.previous.as_deref().is_some_and(made_with)
            }
            _ => false,
        }
    }
}

fn mac_with(key: &[u8], user: i64, activity: i64) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(format!("path\0{user}\0{activity}").as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_good_for_its_user_and_sale_only() {
        let paths = BuyPaths::new(b"0123456789abcdef0123456789abcdef");
        let path = paths.path(7, 3);
        assert!(paths.is_valid(&path, 7, 3));
        assert!(!paths.is_valid(&path, 8, 3), "another user");
        assert!(!paths.is_valid(&path, 7, 4), "another sale");
        assert!(
            !BuyPaths::new(b"another secret").is_valid(&path, 7, 3),
            "another secret"
        );
        for junk in ["", "%%", &path[..path.len() - 2], &format!("{path}AA")] {
            assert!(!paths.is_valid(junk, 7, 3), "{junk:?}");
        }
    }

    #[test]
    fn after_a_rotation_the_paths_of_the_previous_secret_stay_good_and_none_is_made_with_it() {
        let old = BuyPaths::new(b"the secret before the rotation 00");
        let path = old.path(7, 3);
        let rotated = BuyPaths::new(b"the secret after the rotation 000")
            .accepting(Some(b"the secret before the rotation 00"));
        assert!(rotated.is_valid(&path, 7, 3), "made before the rotation");
        assert!(!rotated.is_valid(&path, 8, 3), "still one user's only");
        assert_ne!(
            rotated.path(7, 3),
            path,
            "new paths come from the new secret"
        );
        assert!(rotated.is_valid(&rotated.path(7, 3), 7, 3));
        let unrotated = BuyPaths::new(b"the secret after the rotation 000");
        assert!(
            !unrotated.is_valid(&path, 7, 3),
            "without it, the old path is refused"
        );
    }
}
