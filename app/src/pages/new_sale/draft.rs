//! The new-sale form as typed (`Draft`) and its rules: money in cents, whole numbers, local
//! times to UTC, and which field a server message is about.

use crate::api::{
    BotCheck, LineMethod, NewActivity, DEFAULT_POW_DIFFICULTY, POW_DIFFICULTY_RANGE,
    WAITING_ROOM_STOCK_THRESHOLD,
};
use crate::i18n::tr;
use std::collections::BTreeMap;

/// The form's fields as typed, before they become a `NewActivity`.
#[derive(Clone, Debug, Default)]
pub struct Draft {
    pub title: String,
    pub description: String,
    pub image_url: String,
    pub price: String,
    pub seckill_price: String,
    /// `datetime-local` values ("2030-01-01T12:00"), in the browser's time zone.
    pub starts_at: String,
    pub ends_at: String,
    pub stock: String,
    pub per_user_limit: String,
    pub bot_check: BotCheck,
    /// The proof of work's difficulty (hashes on average).
    pub pow_difficulty: String,
    pub payment_window_mins: String,
    /// Stock shards; empty lets the server choose from the stock and its Redis masters.
    pub stock_shards: String,
    /// The waiting room; `None` until the merchant ticks or unticks it (then it follows the
    /// stock, as the server's default does).
    pub waiting_room: Option<bool>,
    /// Shoppers admitted per second; empty: the default.
    pub admit_per_sec: String,
    /// How the waiting room orders its line.
    pub line_method: LineMethod,
    /// A `datetime-local` value: only accounts created before it may buy; empty: any account.
    pub accounts_created_before: String,
}

/// Field errors, keyed by the API's field names.
pub type FieldErrors = BTreeMap<&'static str, String>;

/// "12", "12.3" or "12.34" (currency units) as cents.
pub fn parse_money(s: &str) -> Option<i64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 2
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let cents = format!("{frac:0<2}").parse::<i64>().ok()?;
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(100)?
        .checked_add(cents)
}

pub fn parse_int(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok()
}

impl Draft {
    /// Whether the sale gets a waiting room: as ticked, else from the stock typed so far.
    pub fn waiting_room_on(&self) -> bool {
        self.waiting_room.unwrap_or_else(|| {
            parse_int(&self.stock).is_some_and(|n| n >= WAITING_ROOM_STOCK_THRESHOLD)
        })
    }

    pub fn fresh() -> Draft {
        Draft {
            per_user_limit: "1".into(),
            bot_check: BotCheck::ProofOfWork,
            pow_difficulty: DEFAULT_POW_DIFFICULTY.to_string(),
            payment_window_mins: "10".into(),
            ..Draft::default()
        }
    }

    /// The browser's check, the same rules as the server's (docs/api.md), so that most mistakes are
    /// shown before a request; `to_utc` turns a `datetime-local` value into RFC 3339 UTC.
    pub fn validate(
        &self,
        to_utc: impl Fn(&str) -> Option<String>,
    ) -> Result<NewActivity, FieldErrors> {
        let mut check = Check::default();
        let (title, image) = self.texts(&mut check);
        let (price, seckill) = self.prices(&mut check);
        let (starts, ends, accounts_before) = self.times(&mut check, &to_utc);
        let units = self.units(&mut check);
        let (admit_per_sec, pow_difficulty) = self.room_and_bot_check(&mut check);
        if !check.0.is_empty() {
            return Err(check.0);
        }
        Ok(NewActivity {
            bot_check: Some(self.bot_check),
            pow_difficulty: pow_difficulty.filter(|_| self.bot_check.takes_proof_of_work()),
            waiting_room: Some(self.waiting_room_on()),
            admit_per_sec: admit_per_sec.map(|n| n as i32),
            title,
            description: self.description.clone(),
            image_url: image,
            price_cents: price.unwrap_or_default(),
            seckill_price_cents: seckill.unwrap_or_default(),
            starts_at: starts.unwrap_or_default(),
            ends_at: ends.unwrap_or_default(),
            stock: units.stock.unwrap_or_default(),
            per_user_limit: units.limit.map(|n| n as i32),
            captcha_required: None,
            payment_window_secs: units.window_mins.map(|m| (m * 60) as i32),
            stock_shards: units.shards.map(|n| n as i16),
            accounts_created_before: accounts_before,
            line_method: Some(self.line_method).filter(|_| self.waiting_room_on()),
        })
    }

    /// The title (trimmed), the description's length, and the image's link (`None`: no image).
    fn texts(&self, check: &mut Check) -> (String, Option<String>) {
        let title = self.title.trim().to_string();
        if title.is_empty() || title.chars().count() > 120 {
            check.fail("title", &tr("new_sale.error.title"));
        }
        if self.description.chars().count() > 5000 {
            check.fail("description", &tr("new_sale.error.description"));
        }
        let image = self.image_url.trim();
        let linkable = ["https://", "http://", "/"]
            .iter()
            .any(|start| image.starts_with(start));
        if !image.is_empty() && !linkable {
            check.fail("image_url", &tr("new_sale.error.image_url"));
        }
        (title, (!image.is_empty()).then(|| image.to_string()))
    }

    /// Both prices in cents, the sale's at most the regular one.
    fn prices(&self, check: &mut Check) -> (Option<i64>, Option<i64>) {
        let price = check.need(
            "price_cents",
            parse_money(&self.price),
            &tr("new_sale.error.price"),
        );
        let seckill = check.need(
            "seckill_price_cents",
            parse_money(&self.seckill_price),
            &tr("new_sale.error.seckill_price"),
        );
        if seckill.zip(price).is_some_and(|(s, p)| s > p) {
            check.fail("seckill_price_cents", &tr("new_sale.error.seckill_above"));
        }
        (price, seckill)
    }

    /// The start, the end after it, and the accounts' cut-off at or before the start, in UTC.
    fn times(
        &self,
        check: &mut Check,
        to_utc: &impl Fn(&str) -> Option<String>,
    ) -> (Option<String>, Option<String>, Option<String>) {
        let starts = check.need(
            "starts_at",
            to_utc(&self.starts_at),
            &tr("new_sale.error.starts_at"),
        );
        let ends = check.need(
            "ends_at",
            to_utc(&self.ends_at),
            &tr("new_sale.error.ends_at"),
        );
        if let (Some(s), Some(e)) = (&starts, &ends) {
            if e <= s {
                check.fail("ends_at", &tr("new_sale.error.ends_before"));
            }
        }
        let accounts_before = match self.accounts_created_before.trim() {
            "" => None,
            typed => check.need(
                "accounts_created_before",
                to_utc(typed),
                &tr("new_sale.error.accounts_before"),
            ),
        };
        if let (Some(b), Some(s)) = (&accounts_before, &starts) {
            if b > s {
                check.fail(
                    "accounts_created_before",
                    &tr("new_sale.error.accounts_after_start"),
                );
            }
        }
        (starts, ends, accounts_before)
    }

    fn units(&self, check: &mut Check) -> Units {
        let stock = check.need(
            "stock",
            parse_int(&self.stock).filter(|n| (1..=10_000_000).contains(n)),
            &tr("new_sale.error.stock"),
        );
        let limit = check.need(
            "per_user_limit",
            parse_int(&self.per_user_limit).filter(|n| (1..=100).contains(n)),
            &tr("new_sale.error.per_user_limit"),
        );
        let window_mins = check.need(
            "payment_window_secs",
            parse_int(&self.payment_window_mins).filter(|n| (1..=1440).contains(n)),
            &tr("new_sale.error.payment_window"),
        );
        let shards = optional(&self.stock_shards).map(|typed| {
            let n = parse_int(typed).filter(|n| (1..=64).contains(n));
            if n.is_none() || stock.is_some_and(|s| n.is_some_and(|n| n > s)) {
                check.fail("stock_shards", &tr("new_sale.error.stock_shards"));
            }
            n
        });
        Units {
            stock,
            limit,
            window_mins,
            shards: shards.flatten(),
        }
    }

    /// The waiting room's admission rate (`None`: the default) and the proof of work's difficulty.
    fn room_and_bot_check(&self, check: &mut Check) -> (Option<i64>, Option<i32>) {
        let admit_per_sec = optional(&self.admit_per_sec).and_then(|typed| {
            check.need(
                "admit_per_sec",
                parse_int(typed).filter(|n| (1..=1_000_000).contains(n)),
                &tr("new_sale.error.admit_per_sec"),
            )
        });
        let pow_difficulty = parse_int(&self.pow_difficulty)
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| POW_DIFFICULTY_RANGE.contains(n));
        if self.bot_check.takes_proof_of_work() && pow_difficulty.is_none() {
            check.fail("pow_difficulty", &tr("new_sale.error.pow_difficulty"));
        }
        (admit_per_sec, pow_difficulty)
    }
}

/// A field that may be left empty: `None` when it is, else what was typed (trimmed).
fn optional(typed: &str) -> Option<&str> {
    Some(typed.trim()).filter(|t| !t.is_empty())
}

struct Units {
    stock: Option<i64>,
    limit: Option<i64>,
    window_mins: Option<i64>,
    shards: Option<i64>,
}

/// The errors found so far, by field.
#[derive(Default)]
struct Check(FieldErrors);

impl Check {
    fn fail(&mut self, field: &'static str, message: &str) {
        self.0.insert(field, message.to_string());
    }

    /// `value`, or the field's error when there is none.
    fn need<T>(&mut self, field: &'static str, value: Option<T>, message: &str) -> Option<T> {
        if value.is_none() {
            self.fail(field, message);
        }
        value
    }
}

/// The form field a server `invalid_input` message is about: docs/api.md's messages start with the
/// field's name ("stock: must be between …"). Unknown fields land on the form as a whole.
pub fn field_of_message(message: &str) -> Option<&'static str> {
    const FIELDS: [&str; 18] = [
        "title",
        "description",
        "image_url",
        "price_cents",
        "seckill_price_cents",
        "starts_at",
        "ends_at",
        "stock",
        "per_user_limit",
        "captcha_required",
        "bot_check",
        "pow_difficulty",
        "payment_window_secs",
        "stock_shards",
        "waiting_room",
        "admit_per_sec",
        "accounts_created_before",
        "line_method",
    ];
    let head = message.split([':', ' ']).next().unwrap_or_default();
    FIELDS.into_iter().find(|f| *f == head)
}

/// A `datetime-local` value in the browser's zone as RFC 3339 UTC.
pub fn local_to_utc(value: &str) -> Option<String> {
    if value.trim().is_empty() {
        return None;
    }
    #[cfg(feature = "hydrate")]
    {
        // ECMAScript reads a date-time without an offset as local time.
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(value));
        if date.get_time().is_nan() {
            return None;
        }
        Some(String::from(date.to_iso_string()))
    }
    #[cfg(not(feature = "hydrate"))]
    None
}

pub fn time_zone() -> String {
    #[cfg(feature = "hydrate")]
    {
        let options =
            js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &js_sys::Object::new())
                .resolved_options();
        if let Ok(zone) = js_sys::Reflect::get(&options, &"timeZone".into()) {
            if let Some(zone) = zone.as_string() {
                return zone;
            }
        }
    }
    "your time zone".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(v: &str) -> Option<String> {
        (!v.is_empty()).then(|| format!("{v}:00.000Z"))
    }

    fn valid() -> Draft {
        Draft {
            title: "Phone".into(),
            price: "499".into(),
            seckill_price: "99.5".into(),
            starts_at: "2030-01-01T10:00".into(),
            ends_at: "2030-01-01T11:00".into(),
            stock: "100".into(),
            ..Draft::fresh()
        }
    }

    #[test]
    fn money_is_read_in_cents() {
        assert_eq!(parse_money("499"), Some(49_900));
        assert_eq!(parse_money("99.5"), Some(9_950));
        assert_eq!(parse_money(" 0.07 "), Some(7));
        for bad in [
            "",
            ".5",
            "1.234",
            "-1",
            "1e3",
            "12,50",
            "99999999999999999999",
        ] {
            assert_eq!(parse_money(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_valid_draft_becomes_the_api_body() {
        let body = valid().validate(utc).unwrap();
        assert_eq!(
            (body.price_cents, body.seckill_price_cents, body.stock),
            (49_900, 9_950, 100)
        );
        assert_eq!(body.starts_at, "2030-01-01T10:00:00.000Z");
        assert_eq!(
            (
                body.per_user_limit,
                body.bot_check,
                body.pow_difficulty,
                body.payment_window_secs
            ),
            (
                Some(1),
                Some(BotCheck::ProofOfWork),
                Some(DEFAULT_POW_DIFFICULTY),
                Some(600)
            )
        );
        assert_eq!(body.image_url, None);
    }

    #[test]
    fn each_mistake_lands_on_its_field() {
        type Mistake = (fn(&mut Draft), &'static str);
        let cases: [Mistake; 10] = [
            (|d| d.pow_difficulty = "999".into(), "pow_difficulty"),
            (|d| d.title = "  ".into(), "title"),
            (|d| d.image_url = "javascript:alert(1)".into(), "image_url"),
            (|d| d.price = "abc".into(), "price_cents"),
            (|d| d.seckill_price = "500".into(), "seckill_price_cents"),
            (|d| d.starts_at = String::new(), "starts_at"),
            (|d| d.ends_at = "2030-01-01T09:00".into(), "ends_at"),
            (|d| d.stock = "0".into(), "stock"),
            (|d| d.per_user_limit = "101".into(), "per_user_limit"),
            (
                |d| d.payment_window_mins = "0".into(),
                "payment_window_secs",
            ),
        ];
        for (spoil, field) in cases {
            let mut d = valid();
            spoil(&mut d);
            let errors = d.validate(utc).unwrap_err();
            assert_eq!(errors.keys().copied().collect::<Vec<_>>(), vec![field]);
        }
    }

    #[test]
    fn server_messages_name_their_field() {
        assert_eq!(
            field_of_message("stock: must be between 1 and 10000000"),
            Some("stock")
        );
        assert_eq!(
            field_of_message("seckill_price_cents: must be between 0 and price_cents"),
            Some("seckill_price_cents")
        );
        assert_eq!(field_of_message("body: expected value at line 1"), None);
        assert_eq!(field_of_message(""), None);
    }
}
