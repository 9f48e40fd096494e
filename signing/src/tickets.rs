//! Admission tickets anyone can verify: a JWT signed with Ed25519 (`EdDSA`) naming the shopper
//! (`sub`), the sale (`sale`) and the expiry (`exp`), with the key's id in its header. The
//! public keys are at `GET /.well-known/jwks.json`, so a CDN edge or any other service can check
//! a ticket without asking the instances; the gate checks it in-process.
//!
//! Keys rotate without a restart: key generation `n` is derived from the deployment's secret
//! (HMAC-SHA256 of `ticket-key`, `n`), and the server keeps the generation in use where every
//! instance reads it (`Tickets::use_generation` follows it). Tickets are signed with the current
//! key; the previous one still verifies for a ticket's lifetime after a
//! rotation (old tickets stay good until they expire), and the next one is published ahead, so
//! that caches of the key set already hold it when it comes into use.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use parking_lot::RwLock;
use ring::signature::KeyPair;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::{collections::BTreeMap, sync::Arc};

/// How long an admission lasts: time to answer the bot check and buy, not to come back later.
pub const TICKET_MS: i64 = 90_000;
/// The audience of an admission ticket: the buy.
pub const AUDIENCE: &str = "seckill-buy";
/// The issuer named in every ticket.
pub const ISSUER: &str = "seckill";

#[derive(Serialize, Deserialize)]
struct Claims {
    iss: String,
    aud: String,
    /// The shopper's user id.
    sub: String,
    /// The sale's id.
    sale: i64,
    iat: i64,
    exp: i64,
    /// The admission's id (of user, sale and the expiry to the millisecond): each poll of one
    /// admission gets the same ticket, two admissions never do.
    jti: String,
}

struct Key {
    kid: String,
    signing: EncodingKey,
    verifying: DecodingKey,
    /// The raw public key (the JWK's `x`).
    public: Vec<u8>,
}

impl Key {
    fn derive(secret: &[u8], generation: u64) -> Key {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(format!("ticket-key\0{generation}").as_bytes());
        let seed = mac.finalize().into_bytes();
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .expect("any 32 bytes are an Ed25519 seed");
        let public = pair.public_key().as_ref().to_vec();
        // PKCS#8 v1 of an Ed25519 private key: a fixed prefix, then the seed.
        let mut der = hex::decode("302e020100300506032b657004220420").expect("hex");
        der.extend_from_slice(&seed);
        Key {
            kid: format!("admission-{generation}"),
            signing: EncodingKey::from_ed_der(&der),
            verifying: DecodingKey::from_ed_components(&B64.encode(&public))
                .expect("a public key in base64url"),
            public,
        }
    }
}

/// The keys an instance signs and verifies with.
struct Ring {
    current: u64,
    /// When the current generation came into use (ms); the previous one verifies until a
    /// ticket's lifetime after it.
    since_ms: i64,
    keys: BTreeMap<u64, Arc<Key>>,
}

/// A JWK of the key set (RFC 8037: an Ed25519 public key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    pub kid: String,
    pub alg: String,
    #[serde(rename = "use")]
    pub use_: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

#[derive(Clone)]
pub struct Tickets {
    secret: Arc<[u8]>,
    ring: Arc<RwLock<Ring>>,
}

impl Tickets {
    /// Tickets at key generation 0 (until [`Tickets::use_generation`] follows the one in use).
    pub fn new(secret: &[u8]) -> Tickets {
        let tickets = Tickets {
            secret: secret.into(),
            ring: Arc::new(RwLock::new(Ring {
                current: 0,
                since_ms: 0,
                keys: BTreeMap::new(),
            })),
        };
        tickets.use_generation(0, 0);
        tickets
    }

    fn key(&self, generation: u64) -> Arc<Key> {
        if let Some(key) = self.ring.read().keys.get(&generation) {
            return key.clone();
        }
        Arc::new(Key::derive(&self.secret, generation))
    }

    /// Signs with generation `current` from `since_ms` on; keeps the previous and the next.
    pub fn use_generation(&self, current: u64, since_ms: i64) {
        let mut keys = BTreeMap::new();
        for g in current.saturating_sub(1)..=current + 1 {
            keys.insert(g, self.key(g));
        }
        *self.ring.write() = Ring {
            current,
            since_ms,
            keys,
        };
    }

    /// The key generation tickets are signed with.
    pub fn generation(&self) -> u64 {
        self.ring.read().current
    }

    /// A ticket admitting `user` to `activity` until `expires_ms` (to the second below it).
    pub fn issue(&self, user: i64, activity: i64, expires_ms: i64) -> String {
        let key = {
            let ring = self.ring.read();
            ring.keys[&ring.current].clone()
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(key.kid.clone());
        let claims = Claims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: user.to_string(),
            sale: activity,
            iat: (expires_ms - TICKET_MS).div_euclid(1000),
            exp: expires_ms.div_euclid(1000),
            jti: self.admission_id(user, activity, expires_ms),
        };
        jsonwebtoken::encode(&header, &claims, &key.signing)
            .expect("an Ed25519 key signs any claims")
    }

    fn admission_id(&self, user: i64, activity: i64, expires_ms: i64) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(format!("admission\0{user}\0{activity}\0{expires_ms}").as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..12])
    }

    /// The keys that verify tickets now, by id: the current one, the previous one for a ticket's
    /// lifetime after the rotation, and the next one (an instance that has not read a rotation
    /// yet still takes the tickets of one that has).
    fn verifying(&self, kid: &str, now_ms: i64) -> Option<Arc<Key>> {
        let ring = self.ring.read();
        let previous_good = now_ms < ring.since_ms + TICKET_MS;
        ring.keys
            .iter()
            .filter(|(g, _)| **g >= ring.current || (**g + 1 == ring.current && previous_good))
            .map(|(_, k)| k)
            .find(|k| k.kid == kid)
            .cloned()
    }

    /// Whether `ticket` admits `user` to `activity` at `now_ms`: in-process, tens of microseconds.
    pub fn admits(&self, ticket: &str, user: i64, activity: i64, now_ms: i64) -> bool {
        let Some(kid) = jsonwebtoken::decode_header(ticket).ok().and_then(|h| h.kid) else {
            return false;
        };
        let Some(key) = self.verifying(&kid, now_ms) else {
            return false;
        };
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&[AUDIENCE]);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "sub", "aud", "iss"]);
        // Checked below, to the millisecond and against `now_ms`.
        validation.validate_exp = false;
        let Ok(data) = jsonwebtoken::decode::<Claims>(ticket, &key.verifying, &validation) else {
            return false;
        };
        let c = data.claims;
        let expires_ms = c.exp.saturating_mul(1000);
        c.sub == user.to_string()
            && c.sale == activity
            && expires_ms > now_ms
            && expires_ms <= now_ms + TICKET_MS
    }

    /// The public keys that verify tickets now, and the next one, as a JWK set.
    pub fn jwks(&self, now_ms: i64) -> Jwks {
        let ring = self.ring.read();
        let previous_good = now_ms < ring.since_ms + TICKET_MS;
        let keys = ring
            .keys
            .iter()
            .filter(|(g, _)| **g + 1 != ring.current || previous_good)
            .map(|(_, k)| Jwk {
                kty: "OKP".into(),
                crv: "Ed25519".into(),
                x: B64.encode(&k.public),
                kid: k.kid.clone(),
                alg: "EdDSA".into(),
                use_: "sig".into(),
            })
            .collect();
        Jwks { keys }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_bound_to_user_sale_and_time() {
        let tickets = Tickets::new(b"0123456789abcdef0123456789abcdef");
        let now = 1_700_000_000_000;
        let ticket = tickets.issue(7, 9, now + 60_000);
        assert!(tickets.admits(&ticket, 7, 9, now));
        assert_eq!(
            ticket,
            tickets.issue(7, 9, now + 60_000),
            "one admission, one ticket"
        );
        assert_ne!(
            ticket,
            tickets.issue(7, 9, now + 60_001),
            "another admission"
        );
        assert!(!tickets.admits(&ticket, 8, 9, now), "another user");
        assert!(!tickets.admits(&ticket, 7, 10, now), "another sale");
        assert!(!tickets.admits(&ticket, 7, 9, now + 60_000), "lapsed");
        let other = Tickets::new(b"another secret of thirty-two byt").issue(7, 9, now + 60_000);
        assert!(!tickets.admits(&other, 7, 9, now), "another secret");
        let far = tickets.issue(7, 9, now + TICKET_MS + 1_000);
        assert!(
            !tickets.admits(&far, 7, 9, now),
            "longer than a ticket lives"
        );
        // The claims re-signed by nobody: a payload naming another sale under the same signature.
        let parts: Vec<&str> = ticket.split('.').collect();
        let claims = String::from_utf8(B64.decode(parts[1]).unwrap()).unwrap();
        let moved = B64.encode(claims.replace("\"sale\":9", "\"sale\":10"));
        let forged = format!("{}.{moved}.{}", parts[0], parts[2]);
        assert!(!tickets.admits(&forged, 7, 10, now), "claims changed");
        for junk in ["", ".", "abc", "a.b.c", &ticket[..ticket.len() - 2]] {
            assert!(!tickets.admits(junk, 7, 9, now), "{junk:?}");
        }
    }

    #[test]
    fn after_a_rotation_old_tickets_stay_good_until_a_tickets_lifetime_has_passed() {
        let tickets = Tickets::new(b"0123456789abcdef0123456789abcdef");
        let now = 1_700_000_000_000;
        let old = tickets.issue(7, 9, now + 60_000);
        let next_kid = tickets.jwks(now).keys[1].kid.clone();
        tickets.use_generation(1, now);
        let new = tickets.issue(7, 9, now + 60_000);
        assert_ne!(old, new);
        assert!(tickets.admits(&old, 7, 9, now + 1));
        assert!(tickets.admits(&new, 7, 9, now + 1));
        // An instance that has not read the rotation yet takes the new tickets too.
        let lagging = Tickets::new(b"0123456789abcdef0123456789abcdef");
        assert!(lagging.admits(&new, 7, 9, now + 1));
        let kids: Vec<String> = tickets.jwks(now).keys.into_iter().map(|k| k.kid).collect();
        assert_eq!(kids, ["admission-0", "admission-1", "admission-2"]);
        assert_eq!(
            next_kid, "admission-1",
            "published before it signed anything"
        );
        // A ticket's lifetime after the rotation the previous key is gone.
        let later = now + TICKET_MS;
        let old_late = {
            let t = Tickets::new(b"0123456789abcdef0123456789abcdef");
            t.issue(7, 9, later + 30_000)
        };
        assert!(!tickets.admits(&old_late, 7, 9, later));
        let kids: Vec<String> = tickets
            .jwks(later)
            .keys
            .into_iter()
            .map(|k| k.kid)
            .collect();
        assert_eq!(kids, ["admission-1", "admission-2"]);
    }
}
