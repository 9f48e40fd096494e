//! The proof-of-work bot check (ALTCHA v2, the `altcha` crate): a shopper's browser computes it,
//! no person solves a puzzle. A challenge is made in *deterministic* mode: the server draws the
//! counter the browser must find (its difficulty: on average `pow_difficulty` SHA-256 hashes),
//! and signs both the challenge and the key that counter derives. Verifying is then two HMACs,
//! in-process (microseconds): no state is kept per challenge.
//!
//! A challenge is bound to one user and one sale (its signed `data`) and expires after
//! [`CHALLENGE_TTL_SECS`]. That a solution is used once is the gate script's: it records the
//! challenge's nonce on the buyer's home shard (`SET NX`), atomically with the decision.

use altcha::{
    create_challenge, solve_challenge, verify_solution, Challenge, CreateChallengeOptions, Payload,
    SolveChallengeOptions, VerifySolutionOptions,
};
use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use rand::Rng;
use sha2::Sha256;
use std::collections::BTreeMap;

/// How long a challenge may be solved and used: long enough to be fetched early in a countdown.
pub const CHALLENGE_TTL_SECS: i64 = 15 * 60;

/// The longest base64 payload taken (a real one is ~600 bytes).
const MAX_PAYLOAD_LEN: usize = 4096;

/// A solution that passed every in-process check: what the gate script needs to spend it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    /// The challenge's nonce (32 hex digits): the key of its single use.
    pub nonce: String,
    /// Until when (ms) the single use must be remembered: the challenge's expiry.
    pub expires_ms: i64,
}

#[derive(Clone)]
pub struct ProofOfWork {
    /// Signs the challenges.
    challenge_secret: String,
    /// Signs the derived keys (verifying without deriving again).
    key_secret: String,
}

impl ProofOfWork {
    /// Both secrets are derived from the server's secret, each for this use only.
    pub fn new(secret: &[u8]) -> ProofOfWork {
        let derive = |label: &str| {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
            mac.update(label.as_bytes());
            hex::encode(mac.finalize().into_bytes())
        };
        ProofOfWork {
            challenge_secret: derive("pow-challenge"),
            key_secret: derive("pow-key"),
        }
    }

    /// A new challenge for `user` on sale `sale`. `difficulty`: the hashes a solver computes on
    /// average (the counter is drawn from `[difficulty / 2, 3 · difficulty / 2)`).
    pub fn challenge(&self, user: i64, sale: i64, difficulty: i32, now_secs: i64) -> Challenge {
        let difficulty = difficulty.max(2) as u32;
        let counter = rand::rng().random_range(difficulty / 2..difficulty + difficulty / 2);
        let data = BTreeMap::from([
            ("sale".to_string(), serde_json::Value::from(sale)),
            ("user".to_string(), serde_json::Value::from(user)),
        ]);
        create_challenge(CreateChallengeOptions {
            // One hash per counter: the cost is the number of counters tried, not each one's.
            algorithm: "SHA-256".into(),
            cost: 1,
            counter: Some(counter),
            data: Some(data),
            expires_at: Some(now_secs + CHALLENGE_TTL_SECS),
            hmac_signature_secret: Some(self.challenge_secret.clone()),
            hmac_key_signature_secret: Some(self.key_secret.clone()),
            ..Default::default()
        })
        .expect("a SHA-256 challenge with a drawn counter is always valid")
    }

    /// Checks a buy's `pow` (base64 of the ALTCHA payload JSON) for `user` on `sale`: signed by
    /// this server, not expired, for this user and sale, and solved. `None` when any fails.
    pub fn verify(&self, encoded: &str, user: i64, sale: i64) -> Option<Spent> {
        if encoded.len() > MAX_PAYLOAD_LEN {
            return None;
        }
        let payload: Payload = serde_json::from_slice(&STANDARD.decode(encoded).ok()?).ok()?;
        let params = &payload.challenge.parameters;
        let data = params.data.as_ref()?;
        if data.get("user")?.as_i64()? != user || data.get("sale")?.as_i64()? != sale {
            return None;
        }
        // The deterministic mode's fast path only: a challenge without a key signature is not ours.
        params.key_signature.as_ref()?;
        if params.nonce.len() != 32 || !params.nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let expires_at = params.expires_at?;
        let mut options = VerifySolutionOptions::new(
            &payload.challenge,
            &payload.solution,
            self.challenge_secret.clone(),
        );
        options.hmac_key_signature_secret = Some(self.key_secret.clone());
        let result = verify_solution(options).ok()?;
        result.verified.then(|| Spent {
            nonce: params.nonce.to_ascii_lowercase(),
            expires_ms: expires_at.saturating_mul(1000),
        })
    }
}

/// A payload as a browser sends it: base64 of `{"challenge","solution"}`.
pub fn encode(payload: &Payload) -> String {
    STANDARD.encode(serde_json::to_vec(payload).expect("a payload serialises"))
}

/// Solves a challenge as a browser does and encodes the payload for the buy (the load tool's,
/// the benchmark's and the tests' solver; `None` if the crate's solver gives up).
pub fn solve(challenge: Challenge) -> Option<String> {
    let solution = solve_challenge(SolveChallengeOptions::new(&challenge))
        .ok()
        .flatten()?;
    Some(encode(&Payload {
        challenge,
        solution,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solved(pow: &ProofOfWork, user: i64, sale: i64, now: i64) -> (Challenge, String) {
        let challenge = pow.challenge(user, sale, 2_000, now);
        let encoded = solve(challenge.clone()).expect("solvable");
        (challenge, encoded)
    }

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    #[test]
    fn a_solution_passes_for_its_user_and_sale_only() {
        let pow = ProofOfWork::new(b"secret");
        let (challenge, encoded) = solved(&pow, 7, 3, now());
        let spent = pow.verify(&encoded, 7, 3).expect("verified");
        assert_eq!(spent.nonce, challenge.parameters.nonce);
        assert!(pow.verify(&encoded, 8, 3).is_none(), "another user");
        assert!(pow.verify(&encoded, 7, 4).is_none(), "another sale");
        assert!(
            ProofOfWork::new(b"other").verify(&encoded, 7, 3).is_none(),
            "another server's secret"
        );
    }

    #[test]
    fn forged_expired_and_malformed_payloads_fail() {
        let pow = ProofOfWork::new(b"secret");
        let (_, encoded) = solved(&pow, 7, 3, now() - CHALLENGE_TTL_SECS - 5);
        assert!(pow.verify(&encoded, 7, 3).is_none(), "expired");

        let (_, encoded) = solved(&pow, 7, 3, now());
        let mut payload: Payload =
            serde_json::from_slice(&STANDARD.decode(&encoded).unwrap()).unwrap();
        // Rebinding to another user breaks the challenge's signature.
        payload
            .challenge
            .parameters
            .data
            .as_mut()
            .unwrap()
            .insert("user".into(), 8.into());
        assert!(
            pow.verify(&super::encode(&payload), 8, 3).is_none(),
            "rebound"
        );
        let mut payload: Payload =
            serde_json::from_slice(&STANDARD.decode(&encoded).unwrap()).unwrap();
        payload.solution.derived_key = "00".repeat(32);
        assert!(
            pow.verify(&super::encode(&payload), 7, 3).is_none(),
            "wrong key"
        );
        for junk in ["", "%%%", "e30=", &"A".repeat(5000)] {
            assert!(pow.verify(junk, 7, 3).is_none(), "{junk:?}");
        }
    }
}
