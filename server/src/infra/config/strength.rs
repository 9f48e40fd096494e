//! A deployed process's secrets (`SECKILL_SECRET`, `SECKILL_SECRET_PREVIOUS`,
//! `SECKILL_METRICS_TOKEN`): long enough, random-looking, and none that this repository holds or
//! ever held (a placeholder of the manifests, a test's or a script's), since anyone can read
//! those and forge every session cookie and buy path signed with them.

use anyhow::bail;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

/// The hashes of the values published in the repository, one per line (`#` starts a comment).
const PUBLIC: &str = include_str!("public-secrets.txt");

/// What a value must have.
#[derive(Clone, Copy)]
pub struct Needs {
    pub min_len: usize,
    /// The least estimated randomness, in bits.
    pub min_bits: f64,
}

/// A secret that signs: 32 random bytes in hex carry 256 bits; a sample of 32 hex characters is
/// estimated at about 110.
pub const SIGNING: Needs = Needs {
    min_len: 32,
    min_bits: 96.0,
};
/// A bearer token: 16 random bytes in hex.
pub const TOKEN: Needs = Needs {
    min_len: 16,
    min_bits: 48.0,
};

const HOW: &str = "make one with `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'` \
                   (docs/deploy.md \"The secret\")";

/// Refuses `value` of setting `name` in one line when it is short, looks guessable or is public.
pub fn check(name: &str, value: &str, needs: Needs) -> anyhow::Result<()> {
    let len = value.chars().count();
    if len < needs.min_len {
        bail!(
            "{name} is too short: {len} characters, at least {} needed; {HOW}",
            needs.min_len
        );
    }
    if is_public(value) {
        bail!(
            "{name} is a value published in the seckill repository: anyone could forge what it \
             signs; {HOW}"
        );
    }
    let bits = estimated_bits(value);
    if bits < needs.min_bits || repetitive(value) {
        bail!(
            "{name} looks guessable (about {bits:.0} bits of randomness, {:.0} needed, and no \
             repeated runs); {HOW}",
            needs.min_bits
        );
    }
    Ok(())
}

fn is_public(value: &str) -> bool {
    let hash = hex::encode(Sha256::digest(value.as_bytes()));
    PUBLIC
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .any(|l| l.eq_ignore_ascii_case(&hash))
}

/// The value's length times the Shannon entropy of its characters: an upper bound of what a
/// random source put in it (a word repeated or a run of one character scores low).
fn estimated_bits(value: &str) -> f64 {
    let mut counts: HashMap<char, usize> = HashMap::new();
    for c in value.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let n = value.chars().count() as f64;
    let per_char: f64 = counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum();
    per_char * n
}

/// Whether fewer than three quarters of the value's three-character runs are distinct (a
/// pattern repeated: `0123456789abcdef0123456789abcdef`), which random text never is at these
/// lengths.
fn repetitive(value: &str) -> bool {
    let chars: Vec<char> = value.chars().collect();
    let runs: Vec<&[char]> = chars.windows(3).collect();
    let distinct: HashSet<&[char]> = runs.iter().copied().collect();
    distinct.len() * 4 < runs.len() * 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_secret_passes() {
        for _ in 0..200 {
            let secret = crate::infra::config::generate_secret();
            check("SECKILL_SECRET", &secret, SIGNING).unwrap();
            check("SECKILL_METRICS_TOKEN", &secret[..32], TOKEN).unwrap();
        }
    }

    #[test]
    fn short_guessable_and_published_values_are_refused_each_with_its_reason() {
        let refused = |value: &str, needs| {
            check("SECKILL_SECRET", value, needs)
                .unwrap_err()
                .to_string()
        };
        assert!(refused("abc", SIGNING).contains("too short"));
        assert!(refused(&"a".repeat(64), SIGNING).contains("guessable"));
        assert!(refused(&"password".repeat(8), SIGNING).contains("guessable"));
        assert!(
            refused(&"0123456789abcdefghijklmnopqrstuv".repeat(2), SIGNING).contains("guessable")
        );
        // Every value of the list: the tests' secret, a manifest's placeholder, a script's.
        for public in [
            "0123456789abcdef0123456789abcdef",
            "replace-me-with-64-hex-characters-from-a-random-source-000000000",
            "image-check-secret-image-check-secret",
            "hosts-secret-hosts-secret-hosts-secret",
        ] {
            let why = refused(public, SIGNING);
            assert!(
                why.contains("published in the seckill repository"),
                "{public}: {why}"
            );
        }
        assert!(refused("test-metrics-token-0123456789", TOKEN).contains("published"));
        // One line, naming the setting.
        let why = refused("abc", SIGNING);
        assert!(
            !why.contains('\n') && why.starts_with("SECKILL_SECRET "),
            "{why}"
        );
    }
}
