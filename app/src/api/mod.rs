//! The JSON API's request and response bodies, shared by the server and the browser.
//! Plain serde types: fixed-width integers, money in integer cents, no secrets in responses.

use serde::{Deserialize, Serialize};

mod states;
pub use states::{ErrorCode, LineState, OrderStatus, QueueState, UnknownState};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Shopper,
    Merchant,
    /// The platform's operator: creates shops and merchants, resets passwords, blocks users.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shopper => "shopper",
            Role::Merchant => "merchant",
            Role::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "shopper" => Some(Role::Shopper),
            "merchant" => Some(Role::Merchant),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }
}

/// Body of `POST /api/auth/register` and `POST /api/auth/login`. A field this API does not
/// know (`"role"`, say) is refused, not silently ignored. `pow`: at sign-up, the solved proof of
/// work of `GET /api/auth/challenge` (base64 of ALTCHA's payload JSON) when the server asks one.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow: Option<String>,
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordChange { <redacted> }")
    }
}

impl std::fmt::Debug for PasswordReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordReset { <redacted> }")
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// `GET /api/me`, and the answer of register and login.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: Role,
    /// A merchant's shop (an addition to docs/api.md); absent for shoppers and operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shop: Option<ShopRef>,
}

/// The shop a merchant belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopRef {
    pub id: i64,
    pub name: String,
}

/// Body of `POST /api/auth/password`: the current password, and the new one.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    pub current_password: String,
    pub new_password: String,
}

/// Body of `POST /api/auth/confirm`: the signed-in user's password, checked again before an action
/// that asks for a recent check (`403 reauthentication_required`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirmation {
    pub password: String,
}

/// Body of `POST /api/operator/users/{id}/password`: the operator sets a new password.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordReset {
    pub new_password: String,
}

/// Body of `POST /api/operator/shops`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewShop {
    pub name: String,
}

/// One shop in the operator's console, with its merchants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shop {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    pub merchants: Vec<AccountSummary>,
    pub activities: i64,
}

/// `GET /api/operator/shops`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopList {
    pub shops: Vec<Shop>,
}

/// An account as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSummary {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub shop_id: Option<i64>,
    pub blocked: bool,
}

/// `GET /api/operator/users?q=`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountList {
    pub users: Vec<AccountSummary>,
}

/// One line of the audit log: who did what, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub shop_id: Option<i64>,
    pub action: String,
    pub target: String,
    pub detail: String,
}

/// `GET /api/admin/audit` (the merchant's shop) and `GET /api/operator/audit` (everything).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLog {
    pub entries: Vec<AuditEntry>,
}

/// Every JSON error body of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}

impl ErrorBody {
    /// The code, when it is one this version knows (a newer server may add codes).
    pub fn code(&self) -> Option<ErrorCode> {
        self.error.parse().ok()
    }
}

/// A sale activity (docs/api.md `Activity`). Times are RFC 3339 UTC strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    pub id: i64,
    pub title: String,
    pub description: String,
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: String,
    pub ends_at: String,
    pub total_stock: i64,
    pub per_user_limit: i32,
    pub captcha_required: bool,
    pub payment_window_secs: i32,
    pub paused: bool,
    /// How many Redis keys (on a cluster, masters) the stock is split over.
    #[serde(default = "one_shard")]
    pub stock_shards: i16,
    /// Whether shoppers pass a waiting room before they may buy (an admission ticket).
    #[serde(default)]
    pub waiting_room: bool,
    /// Shoppers the waiting room admits per second (while admitted shoppers can still find stock).
    #[serde(default = "default_admit_rate")]
    pub admit_per_sec: i32,
    /// The bot check a buy must pass (`captcha_required` is true exactly when it is `image`).
    #[serde(default)]
    pub bot_check: BotCheck,
    /// The proof of work's difficulty: SHA-256 hashes a browser computes on average.
    #[serde(default = "default_pow_difficulty")]
    pub pow_difficulty: i32,
    /// Only accounts created before this instant may buy (or join the waiting room); `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounts_created_before: Option<String>,
    /// How the waiting room orders its line (with `waiting_room` on).
    #[serde(default)]
    pub line_method: LineMethod,
    /// Hex SHA-256 of the drawing's secret seed, published before the line opens (a sale with a
    /// waiting room whose places are drawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawing_commitment: Option<String>,
    /// The drawing's seed (hex), published once the sale has started: anyone recomputes the
    /// places from it and the join receipts (`GET /api/activities/{id}/drawing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawing_seed: Option<String>,
}

/// How a sale's waiting room orders its line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineMethod {
    /// Places drawn at random among those who join before the start (arriving early gives no
    /// edge), then arrival order.
    #[default]
    DrawThenOrder,
    /// Arrival order only, before the start as after it.
    ArrivalOrder,
    /// Arrivals in order, and while nobody waits and the admission rate has room, admitted at
    /// once (no waiting page): a line only when the crowd outruns the rate.
    PassThrough,
}

impl LineMethod {
    pub const ALL: [LineMethod; 3] = [
        LineMethod::DrawThenOrder,
        LineMethod::ArrivalOrder,
        LineMethod::PassThrough,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LineMethod::DrawThenOrder => "draw_then_order",
            LineMethod::ArrivalOrder => "arrival_order",
            LineMethod::PassThrough => "pass_through",
        }
    }
}

impl std::str::FromStr for LineMethod {
    type Err = ();
    fn from_str(s: &str) -> Result<LineMethod, ()> {
        LineMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or(())
    }
}

/// What a sale asks of a buyer to tell a person from a bot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BotCheck {
    /// Nothing.
    #[default]
    None,
    /// The browser computes a proof of work (ALTCHA v2), no person involved.
    ProofOfWork,
    /// The image captcha, with the proof of work always accepted instead.
    Image,
}

impl BotCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            BotCheck::None => "none",
            BotCheck::ProofOfWork => "proof_of_work",
            BotCheck::Image => "image",
        }
    }

    /// Whether a proof of work is accepted on this sale.
    pub fn takes_proof_of_work(self) -> bool {
        self != BotCheck::None
    }
}

impl std::str::FromStr for BotCheck {
    type Err = ();
    fn from_str(s: &str) -> Result<BotCheck, ()> {
        match s {
            "none" => Ok(BotCheck::None),
            "proof_of_work" => Ok(BotCheck::ProofOfWork),
            "image" => Ok(BotCheck::Image),
            _ => Err(()),
        }
    }
}

/// The proof of work's difficulty when the merchant names none: about 30,000 SHA-256 hashes,
/// a fraction of a second in a phone's browser (docs/benchmarks.md, "Storefront").
pub const DEFAULT_POW_DIFFICULTY: i32 = 30_000;
/// The range a merchant may pick the difficulty from.
pub const POW_DIFFICULTY_RANGE: std::ops::RangeInclusive<i32> = 1_000..=10_000_000;

fn default_pow_difficulty() -> i32 {
    DEFAULT_POW_DIFFICULTY
}

fn one_shard() -> i16 {
    1
}

fn default_admit_rate() -> i32 {
    DEFAULT_ADMIT_PER_SEC
}

/// A waiting room's admission rate when the merchant names none: two thirds of the in-stock rate
/// one instance with one Redis sustains in docs/benchmarks.md (~3,000 shoppers/s).
pub const DEFAULT_ADMIT_PER_SEC: i32 = 2000;

/// Sales of at least this many units get a waiting room unless the merchant says otherwise.
pub const WAITING_ROOM_STOCK_THRESHOLD: i64 = 1000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityList {
    pub activities: Vec<Activity>,
}

/// Body of `POST /api/admin/activities`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewActivity {
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: String,
    pub ends_at: String,
    pub stock: i64,
    #[serde(default)]
    pub per_user_limit: Option<i32>,
    #[serde(default)]
    pub captcha_required: Option<bool>,
    #[serde(default)]
    pub payment_window_secs: Option<i32>,
    #[serde(default)]
    pub stock_shards: Option<i16>,
    /// Default: on when the stock is at least [`WAITING_ROOM_STOCK_THRESHOLD`].
    #[serde(default)]
    pub waiting_room: Option<bool>,
    /// 1..=1,000,000; default [`DEFAULT_ADMIT_PER_SEC`].
    #[serde(default)]
    pub admit_per_sec: Option<i32>,
    /// Default `proof_of_work`, unless `captcha_required` alone says otherwise (true: `image`,
    /// false: `none`, as older clients meant it).
    #[serde(default)]
    pub bot_check: Option<BotCheck>,
    /// [`POW_DIFFICULTY_RANGE`]; default [`DEFAULT_POW_DIFFICULTY`].
    #[serde(default)]
    pub pow_difficulty: Option<i32>,
    /// RFC 3339, at most `starts_at`: only accounts created before it may buy; default none.
    #[serde(default)]
    pub accounts_created_before: Option<String>,
    /// Default `draw_then_order`.
    #[serde(default)]
    pub line_method: Option<LineMethod>,
}

/// Body of `POST /api/admin/activities/{id}/stock`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddStock {
    pub add: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockLevel {
    pub total_stock: i64,
    pub remaining: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remaining {
    pub remaining: i64,
    /// Whether the merchant has paused the sale (an addition to docs/api.md).
    #[serde(default)]
    pub paused: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTime {
    pub now: String,
    pub now_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuyPath {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captcha {
    pub id: String,
    pub image: String,
}

/// Body of `POST /api/activities/{id}/buy`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuyRequest {
    pub path: String,
    #[serde(default)]
    pub captcha_id: Option<String>,
    #[serde(default)]
    pub captcha_answer: Option<String>,
    #[serde(default)]
    pub quantity: Option<i64>,
    /// The admission ticket of a sale with a waiting room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// A solved proof of work: base64 of the ALTCHA payload JSON `{"challenge","solution"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow: Option<String>,
}

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
    /// While `paused`: why (`merchant`, or the pipeline's health: `backlog`, `redis_slow`).
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
    pub activity_id: i64,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawnPlace {
    pub place: i64,
    pub receipt: String,
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

/// The `202` answer of a buy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub token: String,
    pub status: OrderStatus,
}

/// `GET /api/orders/{token}` and the items of `GET /api/orders`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    pub token: String,
    pub status: OrderStatus,
    pub activity_id: i64,
    pub quantity: i32,
    pub order_id: Option<i64>,
    pub pay_by: Option<String>,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderList {
    pub orders: Vec<OrderView>,
}

/// `GET /api/admin/activities/{id}/stats`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityStats {
    pub total_stock: i64,
    pub remaining: i64,
    pub queued: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    /// Buy attempts during the last complete second, over every instance (an addition to docs/api.md).
    #[serde(default)]
    pub attempts_per_sec: i64,
    /// The waiting room, when the sale has one (an addition to docs/api.md; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueFigures>,
    /// Shoppers who asked to be reminded of the sale (an addition to docs/api.md).
    #[serde(default)]
    pub reminders: i64,
}

/// Where an activity stands, as the admin console shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SaleStatus {
    Upcoming,
    Live,
    SoldOut,
    Ended,
}

impl SaleStatus {
    pub fn label(self) -> &'static str {
        match self {
            SaleStatus::Upcoming => "upcoming",
            SaleStatus::Live => "live",
            SaleStatus::SoldOut => "sold out",
            SaleStatus::Ended => "ended",
        }
    }
}

/// An item of `GET /api/admin/activities`: the activity and its sale figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminActivity {
    #[serde(flatten)]
    pub activity: Activity,
    pub status: SaleStatus,
    /// Units still for sale (from the gate).
    pub remaining: i64,
    /// Units in persisted orders that are not cancelled or failed.
    pub sold: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminActivityList {
    pub activities: Vec<AdminActivity>,
}

/// One audited stock addition: how many units, by which merchant, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockAddition {
    pub added: i64,
    pub merchant: String,
    pub at: String,
}

/// `GET /api/admin/activities/{id}/stock-additions`, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockAdditions {
    pub additions: Vec<StockAddition>,
}

/// An order as `GET /api/admin/orders` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminOrder {
    pub order_id: i64,
    pub token: String,
    pub activity_id: i64,
    pub user_id: i64,
    pub username: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
    pub status: OrderStatus,
    pub reason: Option<String>,
    pub reserved_at: String,
    pub pay_by: Option<String>,
    pub paid_at: Option<String>,
    pub cancelled_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminOrderPage {
    pub orders: Vec<AdminOrder>,
    pub total: i64,
}

/// The answer of `POST /api/orders/{token}/pay`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentResult {
    pub status: OrderStatus,
}

/// `GET /api/activities/{id}/report`: the public report of an ended sale. Every figure is the
/// sale's as a whole; no shopper's identity is in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SaleReport {
    pub activity_id: i64,
    pub title: String,
    pub starts_at: String,
    pub ends_at: String,
    /// When this report was computed (the orders' figures move while payment windows close).
    pub generated_at: String,
    pub units: UnitsReport,
    pub orders: OrdersReport,
    /// Distinct shoppers with a confirmed or paid order.
    pub unique_buyers: i64,
    /// From the start to the reservation that took the last unit; `None`: it did not sell out.
    pub sold_out_after_ms: Option<i64>,
    pub attempts: AttemptsReport,
    /// The waiting room's figures (a sale with one).
    pub waiting_room: Option<LineReport>,
    /// The drawing's seed and its fingerprint, published before the start, so anyone can
    /// re-check places (`GET /api/activities/{id}/drawing` while it is kept).
    pub drawing: Option<DrawingReport>,
    /// Attempts and units sold over the sale, in equal steps from its start.
    pub timeline: Vec<TimelineStep>,
}

/// Units, as PostgreSQL holds them: the proof that nothing was oversold is
/// `in_orders == sold <= on_sale`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitsReport {
    /// The sale's stock (`activities.total_stock`).
    pub on_sale: i64,
    /// The sale's count of units sold (`activities.sold`, under `CHECK (sold <= total_stock)`).
    pub sold: i64,
    /// The sum of the quantities of its confirmed and paid orders.
    pub in_orders: i64,
    /// Whether `in_orders == sold <= on_sale`.
    pub not_oversold: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrdersReport {
    /// Orders written to PostgreSQL (every status).
    pub persisted: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
}

/// Buy attempts, as the instances counted them, by how they were answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptsReport {
    pub total: i64,
    pub accepted: i64,
    pub refused: RefusalsReport,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusalsReport {
    /// A failed image captcha or proof of work.
    pub bot_check: i64,
    /// The per-shopper limit reached.
    pub limit: i64,
    pub sold_out: i64,
    pub blocked: i64,
    pub rate_limited: i64,
    /// Everything else (paused, not admitted, a bad path, busy, …).
    pub other: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineReport {
    /// Shoppers who held a place when the sale ended.
    pub joined: i64,
    pub admitted: i64,
    /// Admissions that lapsed unclaimed.
    pub lapsed: i64,
    /// Waits from joining (the start, for a place drawn before it) to the turn, in ms, to
    /// within 9 %; `None` when nobody reached their turn.
    pub wait_p50_ms: Option<i64>,
    pub wait_p90_ms: Option<i64>,
    pub wait_p99_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawingReport {
    pub commitment: String,
    pub seed: String,
}

/// One step of the timeline: from `from_ms` after the start, for the step's length.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineStep {
    pub from_ms: i64,
    pub attempts: i64,
    /// Units reserved in the step (by the orders' reservation times).
    pub sold: i64,
}

/// A shopper's reminder of a sale: `POST /api/activities/{id}/reminder` (`201`, or `200` with the
/// same reminder when asked again), `DELETE /api/reminders/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reminder {
    pub id: i64,
    pub activity_id: i64,
    pub starts_at: String,
    pub created_at: String,
}

/// `GET /api/activities/{id}/reminder`: the shopper's reminder of the sale, if they asked one
/// (a shopper without one is not an error: a page asks on every visit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MyReminder {
    pub reminder: Option<Reminder>,
}

/// `GET /api/admin/activities/{id}/forecast`: the demand a sale can expect, from the interest
/// shown so far, and the settings that would serve it, each with its reason; after the sale, what
/// happened beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    /// Reminders asked now.
    pub reminders: i64,
    /// Renders of the sale's page by this platform before the start (a CDN's cached copies are
    /// not counted).
    pub page_views: i64,
    /// Shoppers in the waiting room's line (a sale with one).
    pub joined: i64,
    /// At least this many shoppers are expected at the start.
    pub expected_crowd: i64,
    /// The time to sell out at the recommended admission rate; `None`: the crowd expected would
    /// not buy every unit.
    pub expected_sell_out_ms: Option<i64>,
    pub recommended: Recommended,
    /// Why, one sentence a line.
    pub reasons: Vec<String>,
    /// The measured figures the advice rests on (`make bench`, docs/benchmarks.md).
    pub basis: ForecastBasis,
    /// After the sale: what happened.
    pub actual: Option<ForecastActual>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recommended {
    pub admit_per_sec: i64,
    pub stock_shards: i64,
    pub waiting_room: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForecastBasis {
    /// In-stock buys one instance's box served per second.
    pub buys_per_sec: i64,
    /// CPU-ms one buy costs over every process.
    pub cpu_ms_per_buy: f64,
    /// Gate script calls one Redis (one stock shard) runs per second.
    pub gate_calls_per_sec: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForecastActual {
    pub attempts: i64,
    pub unique_buyers: i64,
    pub joined: Option<i64>,
    pub sold_out_after_ms: Option<i64>,
}

/// `GET /api/admin/shop` and the answer of `POST /api/admin/shop`: the merchant's shop and its
/// settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopSettings {
    pub id: i64,
    pub name: String,
    /// An IANA time zone ("Asia/Shanghai"): the console shows the shop's times in it.
    pub time_zone: String,
}

/// Body of `POST /api/admin/shop`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShopSettingsChange {
    pub time_zone: String,
}
