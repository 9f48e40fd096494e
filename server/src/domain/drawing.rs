//! A drawing anyone can verify (docs/storefront.md): the places of those who join a sale's
//! line before its start are a published function of a secret seed and each shopper's join
//! receipt. The seed's SHA-256 is public before the line opens, the seed itself after the
//! start, with every receipt: anyone recomputes the order (`scripts/verify-drawing`) and checks
//! that nobody was moved.
//!
//! A place's score is the first 8 bytes of SHA-256(seed ‖ receipt), read big-endian, modulo
//! [`DRAW_RANGE`]; the lowest score is place 1 (a tie, about one chance in 10^5 for 250,000
//! joiners, goes to the lower receipt).

use app::api::{Drawing, DrawnPlace, SaleId};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The range of drawn scores: below 2^50, where arrivals after the start begin.
pub const DRAW_RANGE: u64 = (1 << 50) - (1 << 20);
/// The seed is revealed this long after the start: by then every place before the start is
/// drawn, whichever clock of the deployment decided "before".
pub const REVEAL_AFTER: chrono::Duration = chrono::Duration::seconds(2);

pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// What is published before the line opens: the seed's SHA-256, in hex.
pub fn commitment(seed: &[u8]) -> String {
    hex(&Sha256::digest(seed))
}

/// The drawn score of `receipt` under `seed`.
pub fn score(seed: &[u8], receipt: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(seed)
        .chain_update(receipt.as_bytes())
        .finalize();
    let first = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    first % DRAW_RANGE
}

/// A new receipt: 128 random bits in hex, which say nothing of who holds it.
pub fn new_receipt() -> String {
    hex(&rand::random::<[u8; 16]>())
}

/// The places of `receipts` under `seed`, in order (place 1 first).
pub fn places(seed: &[u8], receipts: Vec<String>) -> Vec<DrawnPlace> {
    let mut scored: Vec<(u64, String)> =
        receipts.into_iter().map(|r| (score(seed, &r), r)).collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .enumerate()
        .map(|(i, (_, receipt))| DrawnPlace {
            place: i as i64 + 1,
            receipt,
        })
        .collect()
}

/// The published drawing of sale `id`: the commitment always, the seed and places once revealed.
pub fn drawing(id: i64, seed: &[u8], revealed: Option<Vec<String>>, joined: i64) -> Drawing {
    let (shown, places) = match revealed {
        Some(receipts) => (Some(hex(seed)), places(seed, receipts)),
        None => (None, Vec::new()),
    };
    Drawing {
        activity_id: SaleId(id),
        commitment: commitment(seed),
        seed: shown,
        joined,
        rule: RULE.into(),
        places,
    }
}

/// The rule, as the document states it.
pub const RULE: &str = "score = first 8 bytes of SHA-256(seed bytes || receipt as ASCII), big-endian, modulo 2^50 - 2^20; place 1 is the lowest score (ties: the lower receipt)";

/// Join receipts signed for the shopper who holds them: `<receipt>.<HMAC>`, so that a receipt
/// the line never gave cannot be claimed.
#[derive(Clone)]
pub struct Receipts {
    key: std::sync::Arc<[u8]>,
}

impl Receipts {
    pub fn new(secret: &[u8]) -> Receipts {
        Receipts { key: secret.into() }
    }

    fn mac(&self, activity: i64, receipt: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(format!("receipt\0{activity}\0{receipt}").as_bytes());
        mac
    }

    pub fn sign(&self, activity: i64, receipt: &str) -> String {
        let mac = self.mac(activity, receipt).finalize().into_bytes();
        format!("{receipt}.{}", B64.encode(&mac[..16]))
    }
}
