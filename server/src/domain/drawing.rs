//! A drawing anyone can verify (docs/storefront.md): the places of those who join a sale's
//! line before its start are a published function of a secret seed and each shopper's join
//! receipt. The seed's SHA-256 is public before the line opens, the seed itself after the
//! start, with every receipt: anyone recomputes the order (`scripts/verify-drawing`) and checks
//! that nobody was moved.
//!
//! A place's score is the first 8 bytes of SHA-256(seed ‖ receipt), read big-endian, modulo
//! [`DRAW_RANGE`]; the lowest score is place 1 (a tie, about one chance in 10^5 for 250,000
//! joiners, goes to the lower receipt).

use app::api::{CrowdOutcome, Drawing, DrawnPlace, SaleId};
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

/// The published drawing of sale `id`: the commitment always; once revealed, the seed and every
/// place in order (`crowd::draw`), with the crowd policy's outcome and its words in the rule.
pub fn drawing(
    id: i64,
    seed: &[u8],
    revealed: Option<(Vec<DrawnPlace>, Option<CrowdOutcome>)>,
    joined: i64,
    crowd_rule: Option<String>,
) -> Drawing {
    let (shown, places, crowd) = match revealed {
        Some((places, crowd)) => (Some(hex(seed)), places, crowd),
        None => (None, Vec::new(), None),
    };
    Drawing {
        activity_id: SaleId(id),
        commitment: commitment(seed),
        seed: shown,
        joined,
        rule: match crowd_rule {
            Some(more) => format!("{RULE}; {more}"),
            None => RULE.into(),
        },
        places,
        crowd,
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

    /// The published hash of `network` among sale `activity`'s entries: keyed, so that it says
    /// nothing of the network (a /24 has only 2^24 candidates to try), equal for equal networks.
    pub fn group(&self, activity: i64, network: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(format!("group\0{activity}\0{network}").as_bytes());
        hex(&mac.finalize().into_bytes()[..8])
    }

    pub fn sign(&self, activity: i64, receipt: &str) -> String {
        let mac = self.mac(activity, receipt).finalize().into_bytes();
        format!("{receipt}.{}", B64.encode(&mac[..16]))
    }
}
