//! Password hashing with argon2id at OWASP's parameters (m = 19 MiB, t = 2, p = 1). Each hash takes
//! tens of milliseconds of CPU, so it runs on the blocking pool behind a semaphore: a login flood
//! waits its turn instead of starving the request workers.

use super::ApiError;
use crate::infra::config::generate_secret;
use anyhow::Context;
use argon2::{
    password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString},
    Algorithm, Argon2, Params, Version,
};
use std::{sync::Arc, time::Duration};
use tokio::sync::Semaphore;

/// How long a request waits for a hashing slot before it is shed with `503 overloaded`.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("OWASP parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

#[derive(Clone)]
pub struct Passwords {
    slots: Arc<Semaphore>,
    /// Sign-ups hash in slots of their own: a sign-up flood waits for these, never for the
    /// slots sign-in verifies in.
    sign_up_slots: Arc<Semaphore>,
    /// Verified against when the user does not exist, so that the answer takes as long as for a
    /// wrong password and does not reveal which usernames exist.
    decoy: Arc<str>,
}

impl Passwords {
    pub fn new(concurrency: usize, sign_ups: usize) -> anyhow::Result<Passwords> {
        let decoy = hash_now(&generate_secret())?;
        Ok(Passwords {
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
            sign_up_slots: Arc::new(Semaphore::new(sign_ups.max(1))),
            decoy: decoy.into(),
        })
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        run_in(&self.slots, f).await
    }

    /// The hash of a new account's password, in the sign-up slots (see [`Passwords::hash_new`]).
    pub async fn hash_sign_up(
        &self,
        password: String,
        username: String,
    ) -> Result<String, ApiError> {
        run_in(&self.sign_up_slots, move || new_hash(&password, &username)).await?
    }

    pub async fn hash(&self, password: String) -> Result<String, ApiError> {
        Ok(self.run(move || hash_now(&password)).await??)
    }

    /// The hash of a password a user chose (register, change, reset): refused with `400
    /// invalid_input` when it is common or guessable (see [`guessable`]).
    pub async fn hash_new(&self, password: String, username: String) -> Result<String, ApiError> {
        self.run(move || new_hash(&password, &username)).await?
    }

    /// `stored` is `None` for an unknown user: the decoy is checked and the answer is `false`.
    /// A stored value that is no password hash (an account made without a password, such as the
    /// load tool's, marked `!`) matches no password, at the decoy's cost: never an error.
    pub async fn verify(&self, password: String, stored: Option<String>) -> Result<bool, ApiError> {
        let decoy = self.decoy.to_string();
        let ok = self
            .run(move || match stored {
                Some(phc) if PasswordHash::new(&phc).is_ok() => verify_now(&password, &phc),
                Some(_) => {
                    tracing::warn!("an account without a readable password hash tried to sign in");
                    verify_now(&password, &decoy).map(|_| false)
                }
                None => verify_now(&password, &decoy).map(|_| false),
            })
            .await??;
        Ok(ok)
    }
}

fn new_hash(password: &str, username: &str) -> Result<String, ApiError> {
    if let Some(why) = guessable(password, username) {
        return Err(ApiError::invalid("password", why));
    }
    Ok(hash_now(password)?)
}

/// Runs `f` on the blocking pool once one of `slots` is free (`503 overloaded` after waiting
/// [`QUEUE_TIMEOUT`]).
async fn run_in<T: Send + 'static>(
    slots: &Arc<Semaphore>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let permit = tokio::time::timeout(QUEUE_TIMEOUT, slots.clone().acquire_owned())
        .await
        .map_err(|_| ApiError::Overloaded { retry_after: 2 })?
        .context("password semaphore closed")?;
    let out = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        f()
    })
    .await
    .context("password hashing task")?;
    Ok(out)
}

/// Past this many guesses a password is not in the lists attackers try first: zxcvbn's score 2
/// (10^6 guesses and more). Below it are the passwords of the breach corpora zxcvbn ships (its
/// `passwords` list is ranked by how often each appeared in leaks), words, names, keyboard walks,
/// repeats, dates, and the username itself.
const MIN_GUESSES_LOG10: f64 = 6.0;

/// Why a new password is refused, if it is: found among the common passwords or guessed within a
/// million tries. Checked on at most the first 100 characters (zxcvbn's cost grows with length;
/// a longer password that starts strong is strong).
pub fn guessable(password: &str, username: &str) -> Option<&'static str> {
    let head: String = password.chars().take(100).collect();
    let estimate = zxcvbn::zxcvbn(&head, &[username]);
    // The whole password is one entry of the leaked-passwords list (or the username). The list's
    // type is not exported by the crate; its variant is named by its `Debug` form.
    let common = estimate.sequence().iter().any(|m| {
        m.token.chars().count() == head.chars().count()
            && matches!(
                &m.pattern,
                zxcvbn::matching::patterns::MatchPattern::Dictionary(d)
                    if matches!(format!("{:?}", d.dictionary_name).as_str(), "Passwords" | "UserInputs")
            )
    });
    if common {
        return Some("is one of the most common passwords (found in breached password lists); choose another");
    }
    (estimate.guesses_log10() < MIN_GUESSES_LOG10)
        .then_some("is too easy to guess (a common word, name, sequence or repeat); choose a longer or less common one")
}

pub fn hash_now(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut password_hash::rand_core::OsRng);
    let hash = argon2()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("argon2: {e}"))?;
    Ok(hash.to_string())
}

fn verify_now(password: &str, phc: &str) -> anyhow::Result<bool> {
    let parsed =
        PasswordHash::new(phc).map_err(|e| anyhow::anyhow!("stored hash unreadable: {e}"))?;
    Ok(argon2()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stored_value_that_is_no_hash_matches_no_password_and_is_no_error() {
        let passwords = Passwords::new(1, 1).unwrap();
        for stored in ["!", "", "$argon2id$nonsense"] {
            assert!(!passwords
                .verify("anything at all".into(), Some(stored.into()))
                .await
                .unwrap());
        }
        let real = hash_now("correct horse").unwrap();
        assert!(passwords
            .verify("correct horse".into(), Some(real))
            .await
            .unwrap());
        assert!(!passwords
            .verify("correct horse".into(), None)
            .await
            .unwrap());
    }

    #[test]
    fn a_hash_verifies_its_password_only() {
        let phc = hash_now("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        assert!(verify_now("correct horse", &phc).unwrap());
        assert!(!verify_now("wrong horse", &phc).unwrap());
    }

    #[test]
    fn common_and_guessable_passwords_are_refused() {
        for weak in [
            "password",
            "12345678",
            "qwertyuiop",
            "iloveyou",
            "Password1",
            "aaaaaaaaaa",
            "ann-smith",
            "P@ssw0rd",
        ] {
            assert!(guessable(weak, "ann-smith").is_some(), "{weak}");
        }
        for strong in [
            "long-enough-1",
            "e2e-merchant-password",
            "correct horse battery staple",
            "vT4#qpz9Lm",
            "journey-password",
            "shopper-password",
            "buyer-password",
            "s3cret-pass",
            "long-enough-password",
            "another-password",
            "merchant-password",
            "crowd-password-1",
        ] {
            assert_eq!(guessable(strong, "ann"), None, "{strong}");
        }
    }

    #[tokio::test]
    async fn an_unknown_user_never_verifies() {
        let passwords = Passwords::new(1, 1).unwrap();
        assert!(!passwords.verify("anything".into(), None).await.unwrap());
    }
}
