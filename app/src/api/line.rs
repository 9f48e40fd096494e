//! The waiting room: joining, the line's status and board, the drawing (docs/api.md "Waiting room").

use super::*;
use serde::{Deserialize, Serialize};

/// Body of `POST /api/activities/{id}/queue`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinQueue {
    /// `true`: an admission that was used or lapsed queues once more, at the back.
    #[serde(default)]
    pub again: Option<bool>,
}

/// Where a shopper stands in a sale's waiting room (`GET`/`POST /api/activities/{id}/queue`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStatus {
    pub state: QueueState,
    /// 1 = next to be admitted; only while `waiting`.
    pub position: Option<i64>,
    /// Shoppers ahead, only while `waiting`.
    pub ahead: Option<i64>,
    /// Shoppers in the line who are not admitted yet.
    pub waiting: i64,
    /// Seconds until admission, from the place and the admission rate, only while `waiting`.
    pub estimated_wait_secs: Option<i64>,
    /// The admission ticket, only when `admitted`: send it as the buy's `admission`.
    pub ticket: Option<String>,
    /// When the ticket lapses (RFC 3339).
    pub ticket_expires_at: Option<String>,
    /// When to ask again.
    pub poll_after_ms: i64,
    /// The shopper's place in admission order (1 = the first admitted of the sale), once known:
    /// from the start on (places drawn before it are numbered at the start). With the line's
    /// board (`GET /api/activities/{id}/line`) the page works out `position` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<i64>,
    /// Units left as the line last saw them, beside `ahead`: the odds that a unit is left at
    /// the shopper's turn (only while `waiting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units_left: Option<i64>,
    /// Shoppers admitted before this one and still buying (only while `waiting`, from the
    /// board): they come before everyone waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buying: Option<i64>,
    /// The signed join receipt of a place drawn before the start (the answer of the join only):
    /// the part before the dot is what the published drawing lists at the shopper's place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// A sale's waiting room as everyone sees it (`GET /api/activities/{id}/line`): one small
/// document per sale, the same for every shopper, that a CDN or nginx may cache for a second.
/// A shopper who holds a `place` works out where they stand from it ([`LineBoard::status_of`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineBoard {
    pub state: LineState,
    /// Places admitted so far: a place at or below it has had its turn.
    pub serving: i64,
    /// Shoppers in the line who are not admitted yet.
    pub waiting: i64,
    /// Units left as the admission step last saw them (-1: not seen yet).
    pub units_left: i64,
    /// The sale's admission rate, per second.
    pub admit_per_sec: i32,
    /// Admissions during the last complete second.
    pub admitted_last_sec: i64,
    /// Admitted shoppers with a live turn who have not finished buying.
    #[serde(default)]
    pub buying: i64,
    /// When to fetch the board again, for a shopper at the back of the line.
    pub poll_after_ms: i64,
    /// While `paused`: why (`merchant`, `cord` (the emergency stop), or the pipeline's health: `backlog`, `redis_slow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
}

impl QueueStatus {
    /// A status with no place figures and no ticket.
    pub fn plain(state: QueueState, waiting: i64, poll_after_ms: i64) -> QueueStatus {
        QueueStatus {
            state,
            position: None,
            ahead: None,
            waiting,
            estimated_wait_secs: None,
            ticket: None,
            ticket_expires_at: None,
            poll_after_ms,
            place: None,
            units_left: None,
            buying: None,
            receipt: None,
        }
    }
}

impl LineBoard {
    /// Where the holder of `place` stands, or `None` when their turn has come (or gone): then
    /// only the server knows whether they hold an admission (`GET …/queue`).
    pub fn status_of(&self, place: i64, jitter_ms: i64) -> Option<QueueStatus> {
        let done = |state: QueueState| QueueStatus {
            place: (place > 0).then_some(place),
            ..QueueStatus::plain(state, self.waiting, self.poll_after_ms + jitter_ms)
        };
        match self.state {
            LineState::Drawing => return Some(done(QueueState::Drawing)),
            LineState::SoldOut => return Some(done(QueueState::SoldOut)),
            LineState::Ended => return Some(done(QueueState::Ended)),
            LineState::Open => return Some(done(QueueState::Open)),
            LineState::Admitting | LineState::Paused => {}
        }
        let ahead = place - self.serving - 1;
        if place <= 0 || ahead < 0 {
            return None;
        }
        let rate = i64::from(self.admit_per_sec.max(1));
        let wait_secs = (ahead + rate) / rate;
        let paused = self.state == LineState::Paused;
        Some(QueueStatus {
            position: Some(ahead + 1),
            ahead: Some(ahead),
            units_left: (self.units_left >= 0).then_some(self.units_left),
            buying: Some(self.buying),
            // Nobody knows when a pause ends: no estimate then.
            estimated_wait_secs: (!paused).then_some(wait_secs),
            poll_after_ms: poll_after_ms(wait_secs) + jitter_ms,
            ..done(if paused {
                QueueState::Paused
            } else {
                QueueState::Waiting
            })
        })
    }
}

/// How long a waiter whose turn is `wait_secs` away waits before asking again: every second
/// near the front, a fifth of the wait further back, at most every 30 s (the place only moves
/// forward, so a long line polls less).
pub fn poll_after_ms(wait_secs: i64) -> i64 {
    (wait_secs.saturating_mul(200)).clamp(1_000, 30_000)
}

/// `GET /api/activities/{id}/drawing`: the places drawn before a sale's start, as anyone may
/// recompute them from the seed and the join receipts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drawing {
    pub activity_id: SaleId,
    /// Hex SHA-256 of the seed, published before the line opened.
    pub commitment: String,
    /// The seed in hex, once the sale has started (`null` before).
    pub seed: Option<String>,
    /// Places drawn so far (before the start: joins so far).
    pub joined: i64,
    /// How a place follows from the seed and a receipt.
    pub rule: String,
    /// Every drawn place with its receipt, place 1 first (empty until the seed is published).
    pub places: Vec<DrawnPlace>,
    /// A sale that groups its entries by network (policy `observe` or `demote`): the policy, its
    /// threshold and what it did, once the seed is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crowd: Option<CrowdOutcome>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawnPlace {
    pub place: i64,
    pub receipt: String,
    /// The entry's groups (a sale whose policy is not `off`): a keyed hash of the network it
    /// joined from, then of the one its account signed up from when known. Equal hashes are the
    /// same network; the hash does not say which.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Drawn after everyone else: a group of the entry had more entries than the threshold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub demoted: bool,
}

/// What a drawing did with the crowds of one network (docs/api.md "Farms at the draw").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrowdOutcome {
    pub policy: CrowdPolicy,
    /// A group of more entries than this is demoted (`demote`) or counted (`observe`).
    pub threshold: i32,
    /// Entries drawn before the start.
    pub entries: i64,
    /// Groups of more entries than the threshold.
    pub groups_over: i64,
    /// Entries in those groups: demoted under `demote`, counted only under `observe`.
    pub entries_over: i64,
    /// Entries drawn after everyone else (0 under `observe`).
    pub demoted: i64,
}

/// `GET` and `POST /api/admin/activities/{id}/crowd`: a drawn sale's policy for crowds from one
/// network, and the threshold the forecast proposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrowdSettings {
    pub policy: CrowdPolicy,
    pub threshold: i32,
    /// The threshold the forecast proposes for the crowd it expects, and why.
    pub proposed_threshold: i32,
    pub proposed_reason: String,
    /// After the draw: what it did.
    pub outcome: Option<CrowdOutcome>,
}

/// The highest threshold a merchant may set for crowds from one network.
pub const CROWD_THRESHOLD_MAX: i32 = 1_000_000;

/// The body of `POST /api/admin/activities/{id}/crowd` (before the sale's start only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrowdChange {
    pub policy: CrowdPolicy,
    /// 2 to 1,000,000.
    pub threshold: i32,
}

/// A waiting room's figures for the console.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFigures {
    /// In the line, not admitted yet.
    pub waiting: i64,
    /// Admitted since the start.
    pub admitted: i64,
    /// Admitted, with a ticket that has not lapsed, and not done buying.
    pub in_flight: i64,
    /// Admissions during the last complete second.
    pub admitted_last_sec: i64,
    pub admit_per_sec: i32,
    /// Admissions that lapsed unclaimed: the shopper did not come for the turn in time.
    #[serde(default)]
    pub lapsed: i64,
    /// Why admission is slowed or stopped now (`backlog`, `redis_slow`), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<String>,
}
