//! The rules a new sale must follow: every field of `NewActivity` checked and named in its
//! error, defaults filled in, into an [`ActivitySpec`] that `insert` writes.

use crate::domain::{ApiError, ApiResult};
use crate::infra::keys::MAX_SHARDS;
use app::api::{
    BotCheck, LineMethod, NewActivity, DEFAULT_ADMIT_PER_SEC, DEFAULT_POW_DIFFICULTY,
    POW_DIFFICULTY_RANGE, WAITING_ROOM_STOCK_THRESHOLD,
};
use chrono::{DateTime, Utc};

/// A validated `NewActivity`.
pub struct ActivitySpec {
    pub(super) title: String,
    pub(super) description: String,
    pub(super) image_url: Option<String>,
    pub(super) price_cents: i64,
    pub(super) seckill_price_cents: i64,
    pub(super) starts_at: DateTime<Utc>,
    pub(super) ends_at: DateTime<Utc>,
    pub(super) stock: i64,
    pub(super) per_user_limit: i32,
    pub(super) bot_check: BotCheck,
    pub(super) pow_difficulty: i32,
    pub(super) payment_window_secs: i32,
    pub(super) stock_shards: i16,
    pub(super) waiting_room: bool,
    pub(super) admit_per_sec: i32,
    pub(super) accounts_created_before: Option<DateTime<Utc>>,
    pub(super) line_method: LineMethod,
}

/// Shards when the merchant names none: one per thousand units, at most one per master (a single
/// Redis counts as one master: several shards there only cost lending calls at the end).
pub fn default_shards(stock: i64, masters: usize) -> i16 {
    (stock / 1000).clamp(1, masters.clamp(1, MAX_SHARDS as usize) as i64) as i16
}

fn parse_time(field: &str, s: &str) -> ApiResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ApiError::invalid(field, "must be an RFC 3339 time, e.g. 2030-01-01T12:00:00Z")
        })
}

/// The highest price a sale may ask (ten trillion in the currency's units): any order's amount,
/// at the most units a shopper may buy, fits in 64 bits with room to spare.
pub const MAX_PRICE_CENTS: i64 = 1_000_000_000_000_000;

/// Text a person reads: no NUL or other control characters (line breaks and tabs only where
/// `multiline`), and no bidirectional overrides or isolates, which make a name read differently
/// from what it is ("Trojan Source").
pub fn plain_text(field: &str, text: &str, multiline: bool) -> ApiResult<()> {
    let bad = text.chars().find(|&c| {
        (c.is_control() && !(multiline && matches!(c, '\n' | '\r' | '\t')))
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
    });
    match bad {
        Some(c) => Err(ApiError::invalid(
            field,
            format!("must not hold the control character U+{:04X}", c as u32),
        )),
        None => Ok(()),
    }
}

/// `value` when `range` holds it, else `400 invalid_input` naming `field`.
fn within<T: PartialOrd>(
    field: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
    message: impl FnOnce() -> String,
) -> ApiResult<T> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::invalid(field, message()))
    }
}

impl ActivitySpec {
    /// The rules of docs/api.md, checked in the order of its fields: the first broken one is the
    /// answer. `masters`: how many Redis masters the deployment has (for the default shard count).
    pub fn parse(n: NewActivity, min_window: i32, masters: usize) -> ApiResult<ActivitySpec> {
        let (title, image_url) = texts(&n)?;
        within("price_cents", n.price_cents, 0..=MAX_PRICE_CENTS, || {
            format!("must be between 0 and {MAX_PRICE_CENTS}")
        })?;
        within(
            "seckill_price_cents",
            n.seckill_price_cents,
            0..=n.price_cents,
            || "must be between 0 and price_cents".into(),
        )?;
        let starts_at = parse_time("starts_at", &n.starts_at)?;
        let ends_at = parse_time("ends_at", &n.ends_at)?;
        if ends_at <= starts_at {
            return Err(ApiError::invalid("ends_at", "must be after starts_at"));
        }
        let units = Units::parse(&n, min_window, masters)?;
        let bot_check = bot_check(n.bot_check, n.captcha_required)?;
        let accounts_created_before = match n.accounts_created_before.as_deref() {
            Some(t) => Some(parse_time("accounts_created_before", t)?),
            None => None,
        };
        if accounts_created_before.is_some_and(|t| t > starts_at) {
            return Err(ApiError::invalid(
                "accounts_created_before",
                "must be at most starts_at",
            ));
        }
        let (low, high) = POW_DIFFICULTY_RANGE.into_inner();
        let pow_difficulty = within(
            "pow_difficulty",
            n.pow_difficulty.unwrap_or(DEFAULT_POW_DIFFICULTY),
            POW_DIFFICULTY_RANGE,
            || format!("must be between {low} and {high}"),
        )?;
        Ok(ActivitySpec {
            accounts_created_before,
            line_method: n.line_method.unwrap_or_default(),
            bot_check,
            pow_difficulty,
            waiting_room: n
                .waiting_room
                .unwrap_or(n.stock >= WAITING_ROOM_STOCK_THRESHOLD),
            admit_per_sec: units.admit_per_sec,
            title,
            description: n.description,
            image_url,
            price_cents: n.price_cents,
            seckill_price_cents: n.seckill_price_cents,
            starts_at,
            ends_at,
            stock: n.stock,
            per_user_limit: units.per_user_limit,
            payment_window_secs: units.payment_window_secs,
            stock_shards: units.stock_shards,
        })
    }
}

/// The title (trimmed) and the image's link (`None`: no image), once every text is plain.
fn texts(n: &NewActivity) -> ApiResult<(String, Option<String>)> {
    let title = n.title.trim().to_string();
    if title.is_empty() || title.chars().count() > 120 {
        return Err(ApiError::invalid("title", "must be 1 to 120 characters"));
    }
    plain_text("title", &title, false)?;
    plain_text("description", &n.description, true)?;
    if let Some(url) = &n.image_url {
        plain_text("image_url", url, false)?;
    }
    if n.description.chars().count() > 5000 {
        return Err(ApiError::invalid(
            "description",
            "must be at most 5000 characters",
        ));
    }
    let image_url = n
        .image_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    let linkable = |u: &str| {
        u.len() <= 2048
            && (u.starts_with("https://") || u.starts_with("http://") || u.starts_with('/'))
    };
    match image_url {
        Some(u) if !linkable(u) => Err(ApiError::invalid(
            "image_url",
            "must be an http(s) URL or a path",
        )),
        other => Ok((title, other.map(String::from))),
    }
}

/// The bot check asked, by its name or by the older `captcha_required` (both: they must agree).
fn bot_check(named: Option<BotCheck>, captcha_required: Option<bool>) -> ApiResult<BotCheck> {
    match (named, captcha_required) {
        (None, None) => Ok(BotCheck::ProofOfWork),
        (None, Some(true)) => Ok(BotCheck::Image),
        (None, Some(false)) => Ok(BotCheck::None),
        (Some(check), None) => Ok(check),
        (Some(check), Some(captcha)) if captcha == (check == BotCheck::Image) => Ok(check),
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "bot_check",
            "contradicts captcha_required (true means image); send one of them",
        )),
    }
}

/// The counts of a new sale, each within its bounds (defaults filled in).
struct Units {
    per_user_limit: i32,
    payment_window_secs: i32,
    stock_shards: i16,
    admit_per_sec: i32,
}

impl Units {
    fn parse(n: &NewActivity, min_window: i32, masters: usize) -> ApiResult<Units> {
        within("stock", n.stock, 1..=10_000_000, || {
            "must be between 1 and 10000000".into()
        })?;
        let per_user_limit = within(
            "per_user_limit",
            n.per_user_limit.unwrap_or(1),
            1..=100,
            || "must be between 1 and 100".into(),
        )?;
        let payment_window_secs = within(
            "payment_window_secs",
            n.payment_window_secs.unwrap_or(600),
            min_window..=86_400,
            || format!("must be between {min_window} and 86400"),
        )?;
        let stock_shards = n
            .stock_shards
            .unwrap_or_else(|| default_shards(n.stock, masters));
        if !(1..=MAX_SHARDS).contains(&stock_shards) || i64::from(stock_shards) > n.stock {
            return Err(ApiError::invalid(
                "stock_shards",
                format!("must be between 1 and {MAX_SHARDS}, and at most the stock"),
            ));
        }
        let admit_per_sec = within(
            "admit_per_sec",
            n.admit_per_sec.unwrap_or(DEFAULT_ADMIT_PER_SEC),
            1..=1_000_000,
            || "must be between 1 and 1000000".into(),
        )?;
        Ok(Units {
            per_user_limit,
            payment_window_secs,
            stock_shards,
            admit_per_sec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::activity::stock::split;

    fn valid() -> NewActivity {
        NewActivity {
            title: "Phone".into(),
            description: String::new(),
            image_url: None,
            price_cents: 10_000,
            seckill_price_cents: 1_00,
            starts_at: "2030-01-01T00:00:00Z".into(),
            ends_at: "2030-01-01T01:00:00Z".into(),
            stock: 100,
            per_user_limit: None,
            captcha_required: None,
            payment_window_secs: None,
            stock_shards: None,
            waiting_room: None,
            admit_per_sec: None,
            bot_check: None,
            pow_difficulty: None,
            accounts_created_before: None,
            line_method: None,
        }
    }

    fn field_of(n: NewActivity) -> String {
        match ActivitySpec::parse(n, 60, 3) {
            Err(ApiError::InvalidInput(m)) => m.split(':').next().unwrap().to_string(),
            Err(e) => panic!("{e:?}"),
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn defaults_follow_the_api() {
        let spec = ActivitySpec::parse(valid(), 60, 3).unwrap();
        assert_eq!(
            (
                spec.per_user_limit,
                spec.bot_check,
                spec.pow_difficulty,
                spec.payment_window_secs
            ),
            (1, BotCheck::ProofOfWork, DEFAULT_POW_DIFFICULTY, 600)
        );
        // Older clients' `captcha_required` alone still means what it meant.
        let check = |bot_check, captcha_required| {
            ActivitySpec::parse(
                NewActivity {
                    bot_check,
                    captcha_required,
                    ..valid()
                },
                60,
                3,
            )
            .map(|s| s.bot_check)
            .ok()
        };
        assert_eq!(check(None, Some(true)), Some(BotCheck::Image));
        assert_eq!(check(None, Some(false)), Some(BotCheck::None));
        assert_eq!(
            check(Some(BotCheck::Image), Some(true)),
            Some(BotCheck::Image)
        );
        assert_eq!(check(Some(BotCheck::ProofOfWork), Some(true)), None);
        // A waiting room by default from the threshold up, unless the merchant says otherwise.
        assert!(!spec.waiting_room);
        let big = |waiting_room| {
            ActivitySpec::parse(
                NewActivity {
                    stock: WAITING_ROOM_STOCK_THRESHOLD,
                    waiting_room,
                    ..valid()
                },
                60,
                3,
            )
            .unwrap()
        };
        assert!(big(None).waiting_room);
        assert!(!big(Some(false)).waiting_room);
        assert_eq!(big(None).admit_per_sec, DEFAULT_ADMIT_PER_SEC);
    }

    #[test]
    fn each_rule_names_its_field() {
        type Break = fn(&mut NewActivity);
        let cases: [(&str, Break); 21] = [
            ("pow_difficulty", |n| n.pow_difficulty = Some(999)),
            ("pow_difficulty", |n| n.pow_difficulty = Some(10_000_001)),
            ("title", |n| n.title = " ".into()),
            ("title", |n| n.title = "x".repeat(121)),
            ("description", |n| n.description = "x".repeat(5001)),
            ("image_url", |n| {
                n.image_url = Some("javascript:alert(1)".into())
            }),
            ("price_cents", |n| n.price_cents = -1),
            ("seckill_price_cents", |n| n.seckill_price_cents = 10_001),
            ("starts_at", |n| n.starts_at = "tomorrow".into()),
            ("ends_at", |n| n.ends_at = "2029-12-31T23:00:00Z".into()),
            ("stock", |n| n.stock = 0),
            ("stock", |n| n.stock = 10_000_001),
            ("per_user_limit", |n| n.per_user_limit = Some(101)),
            ("payment_window_secs", |n| n.payment_window_secs = Some(59)),
            ("stock_shards", |n| n.stock_shards = Some(0)),
            ("stock_shards", |n| n.stock_shards = Some(65)),
            ("stock_shards", |n| (n.stock, n.stock_shards) = (3, Some(4))),
            ("admit_per_sec", |n| n.admit_per_sec = Some(0)),
            ("admit_per_sec", |n| n.admit_per_sec = Some(1_000_001)),
            ("accounts_created_before", |n| {
                n.accounts_created_before = Some("2030-01-01T00:00:01Z".into())
            }),
            ("accounts_created_before", |n| {
                n.accounts_created_before = Some("yesterday".into())
            }),
        ];
        for (field, break_it) in cases {
            let mut n = valid();
            break_it(&mut n);
            assert_eq!(field_of(n), field);
        }
        // The cut-off at the start instant itself is allowed.
        let mut at_start = valid();
        at_start.accounts_created_before = Some("2030-01-01T00:00:00Z".into());
        assert_eq!(field_of(at_start), "ok");
        assert_eq!(field_of(valid()), "ok");
    }

    #[test]
    fn shards_default_from_stock_and_masters_and_split_evenly() {
        assert_eq!(default_shards(100, 3), 1);
        assert_eq!(default_shards(2_500, 3), 2);
        assert_eq!(default_shards(100_000, 3), 3);
        assert_eq!(default_shards(100_000, 1), 1);
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split(7, 1), vec![7]);
        assert_eq!(split(1_000_003, 7).iter().sum::<i64>(), 1_000_003);
    }
}
