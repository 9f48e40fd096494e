//! The shopper's language: the storefront, the waiting room and the shopper's pages in every
//! language of `app/locales/` (one JSON file each: a key's text, or its plural forms by CLDR
//! category, with `{name}` placeholders). The merchant's console and a sale's report too; the
//! operator's pages stay English.
//!
//! The server picks the language (the `lang` cookie the switch sets, else `Accept-Language`,
//! else English), renders the page in it and puts that one catalog into the page; the browser's
//! app reads it from there, so the wasm carries no strings of any language. Numbers, prices,
//! dates and plural forms follow CLDR: ICU4X on the server, the browser's `Intl` (ICU) in the
//! browser.

use serde::{Deserialize, Serialize};
use std::{collections::HashMap, sync::Arc};

include!(concat!(env!("OUT_DIR"), "/locales.rs"));

/// The cookie the language switch sets (a year; the page's `Accept-Language` otherwise).
pub const COOKIE: &str = "lang";
/// Where the page carries its catalog for the app.
pub const SCRIPT_ID: &str = "seckill-i18n";

/// A key's text, or its forms by plural category ("one", "other", …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Message {
    Text(String),
    Plural(HashMap<String, String>),
}

/// One language: its tag, every language's own name (for the switch) and its messages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub tag: String,
    pub languages: Vec<(String, String)>,
    pub messages: HashMap<String, Message>,
}

/// The key under which each language file names its language, in that language.
pub const NAME_KEY: &str = "language.name";

impl Catalog {
    /// The catalog of `tag` (one of [`LOCALES`]); `None` for any other.
    pub fn of(tag: &str) -> Option<Arc<Catalog>> {
        every_language()
            .get(tag)
            .map(|(catalog, _)| catalog.clone())
    }

    /// The JSON the page carries, safe inside a `<script>` (no `<` can close it): made once per
    /// language, not on every render.
    pub fn to_script(&self) -> String {
        match every_language().get(self.tag.as_str()) {
            Some((catalog, script)) if **catalog == *self => script.clone(),
            _ => script_of(self),
        }
    }
}

fn script_of(catalog: &Catalog) -> String {
    serde_json::to_string(catalog)
        .unwrap_or_default()
        .replace('<', "\\u003c")
}

/// Every language of [`LOCALES`] with the JSON its pages carry, each file parsed once (a file
/// that does not parse is left out; the catalog's test names it).
fn every_language() -> &'static HashMap<&'static str, (Arc<Catalog>, String)> {
    static ALL: std::sync::OnceLock<HashMap<&'static str, (Arc<Catalog>, String)>> =
        std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let parsed: Vec<(&'static str, HashMap<String, Message>)> = LOCALES
            .iter()
            .filter_map(|(tag, text)| Some((*tag, serde_json::from_str(text).ok()?)))
            .collect();
        let languages: Vec<(String, String)> = parsed
            .iter()
            .map(|(tag, messages)| {
                let name = match messages.get(NAME_KEY) {
                    Some(Message::Text(name)) => name.clone(),
                    _ => tag.to_string(),
                };
                (tag.to_string(), name)
            })
            .collect();
        parsed
            .into_iter()
            .map(|(tag, messages)| {
                let catalog = Catalog {
                    tag: tag.to_string(),
                    languages: languages.clone(),
                    messages,
                };
                let script = script_of(&catalog);
                (tag, (Arc::new(catalog), script))
            })
            .collect()
    })
}

#[cfg(feature = "ssr")]
/// Which of `supported` a request asks for: the `lang` cookie when it names one, else the first
/// of `Accept-Language` (by weight) that one matches, exactly or by its language ("zh-Hans-CN",
/// "zh" → "zh-CN"), else the first (English).
pub fn choose<'a>(cookie: Option<&str>, accept: Option<&str>, supported: &[&'a str]) -> &'a str {
    let find = |asked: &str| {
        supported
            .iter()
            .find(|s| s.eq_ignore_ascii_case(asked))
            .or_else(|| {
                let lang = asked.split('-').next().unwrap_or(asked);
                supported.iter().find(|s| {
                    s.split('-')
                        .next()
                        .is_some_and(|l| l.eq_ignore_ascii_case(lang))
                })
            })
            .copied()
    };
    cookie
        .and_then(|c| supported.iter().find(|s| **s == c).copied())
        .or_else(|| {
            accept
                .map(accept_language::parse)
                .unwrap_or_default()
                .iter()
                .find_map(|asked| find(asked))
        })
        .unwrap_or(supported[0])
}

#[cfg(feature = "ssr")]
/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

#[cfg(feature = "hydrate")]
thread_local! {
    static PAGE: std::cell::RefCell<Option<Arc<Catalog>>> = const { std::cell::RefCell::new(None) };
}

/// The page's language in context (the server, per request).
#[derive(Clone)]
pub struct Lang(pub Arc<Catalog>);

/// English, when nothing else is known.
fn english() -> Arc<Catalog> {
    // The app in the browser always has its page's catalog; it carries none of its own.
    #[cfg(not(feature = "hydrate"))]
    if let Some(en) = Catalog::of(LOCALES[0].0) {
        return en;
    }
    static NONE: std::sync::OnceLock<Arc<Catalog>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| {
        Arc::new(Catalog {
            tag: "en".into(),
            languages: Vec::new(),
            messages: HashMap::new(),
        })
    })
    .clone()
}

/// The server: chooses the request's language and puts it in context (once, in the shell).
#[cfg(feature = "ssr")]
pub fn provide_for_request() -> Arc<Catalog> {
    use leptos::prelude::{provide_context, use_context};
    let parts = use_context::<http::request::Parts>();
    let header = |name: http::header::HeaderName| {
        parts
            .as_ref()
            .and_then(|p| p.headers.get(name)?.to_str().ok().map(str::to_string))
    };
    let cookies = header(http::header::COOKIE);
    let tags: Vec<&str> = LOCALES.iter().map(|(t, _)| *t).collect();
    let tag = choose(
        cookies.as_deref().and_then(|c| cookie(c, COOKIE)),
        header(http::header::ACCEPT_LANGUAGE).as_deref(),
        &tags,
    );
    let catalog = Catalog::of(tag).unwrap_or_else(english);
    provide_context(Lang(catalog.clone()));
    catalog
}

/// The browser: reads the catalog the server put into the page (once, as the app starts).
#[cfg(feature = "hydrate")]
pub fn load_from_page() {
    let text = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(SCRIPT_ID))
        .and_then(|e| e.text_content());
    if let Some(catalog) = text.and_then(|t| serde_json::from_str::<Catalog>(&t).ok()) {
        PAGE.with(|p| *p.borrow_mut() = Some(Arc::new(catalog)));
    }
}

/// The language of the page being rendered.
pub fn current() -> Arc<Catalog> {
    #[cfg(feature = "hydrate")]
    if let Some(c) = PAGE.with(|p| p.borrow().clone()) {
        return c;
    }
    #[cfg(feature = "ssr")]
    if let Some(Lang(c)) = leptos::prelude::use_context::<Lang>() {
        return c;
    }
    english()
}

/// The text of `key`; the key itself if the catalog lacks it (the catalog's test forbids that).
pub fn tr(key: &str) -> String {
    current().text(key, &[])
}

/// The text of `key` with its `{name}` placeholders filled in.
pub fn tr_with(key: &str, args: &[(&str, &str)]) -> String {
    current().text(key, args)
}

/// The text of `key` in the plural form of `n` (CLDR's rules for the page's language), with
/// `{n}` the number as the language writes it, and the other placeholders filled in.
pub fn tr_count(key: &str, n: i64, args: &[(&str, &str)]) -> String {
    current().count(key, n, args)
}

/// The text of `key` before and after its one placeholder, where the page puts an element (a
/// link, a `<time>`): "Starts {time}" is ("Starts ", ""), "{time} 开始" is ("", " 开始").
pub fn tr_split(key: &str) -> (String, String) {
    let text = tr(key);
    match (text.find('{'), text.find('}')) {
        (Some(open), Some(close)) if open < close => {
            (text[..open].to_string(), text[close + 1..].to_string())
        }
        _ => (text, String::new()),
    }
}

/// A duration as the page's language writes it: "850 ms", "12 s", "3 min 20 s", "2 h 05 min"
/// (the steps of `format::span`).
pub fn duration_ms(ms: i64) -> String {
    use crate::format::Span;
    let two = |n: i64| format!("{n:02}");
    match crate::format::span(ms) {
        Span::Ms(ms) => tr_with("duration.ms", &[("ms", &number(ms.max(0)))]),
        Span::Secs(s) => tr_with("duration.s", &[("s", &number(s))]),
        Span::MinSecs(m, s) => tr_with("duration.min_s", &[("min", &number(m)), ("s", &two(s))]),
        Span::HoursMins(h, m) => tr_with("duration.h_min", &[("h", &number(h)), ("min", &two(m))]),
    }
}

/// `n` as the page's language writes it ("1,500").
pub fn number(n: i64) -> String {
    current().number(n)
}

/// A price as the page's language writes it, in US dollars ("$12.50"; "US$12.50" in zh-CN).
pub fn money(cents: i64) -> String {
    current().money(cents)
}

impl Catalog {
    pub fn text(&self, key: &str, args: &[(&str, &str)]) -> String {
        let text = match self.messages.get(key) {
            Some(Message::Text(t)) => t.as_str(),
            Some(Message::Plural(forms)) => forms.get("other").map_or(key, String::as_str),
            None => key,
        };
        fill(text, args)
    }

    pub fn count(&self, key: &str, n: i64, args: &[(&str, &str)]) -> String {
        let shown = self.number(n);
        let mut all = vec![("n", shown.as_str())];
        all.extend_from_slice(args);
        let text = match self.messages.get(key) {
            Some(Message::Plural(forms)) => forms
                .get(plural_category(&self.tag, n))
                .or_else(|| forms.get("other"))
                .map_or(key, String::as_str),
            Some(Message::Text(t)) => t.as_str(),
            None => key,
        };
        fill(text, &all)
    }

    pub fn number(&self, n: i64) -> String {
        decimal(&self.tag, n, 0)
    }

    pub fn money(&self, cents: i64) -> String {
        let amount = decimal(&self.tag, cents, 2);
        self.text("money", &[("amount", &amount)])
    }
}

/// `text` with each `{name}` of `args` replaced by its value.
pub fn fill(text: &str, args: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (name, value) in args {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// The `{name}`s of a text, sorted.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name.to_string()))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The CLDR plural category of `n` in language `tag`: "one", "other", ….
pub fn plural_category(tag: &str, n: i64) -> &'static str {
    #[cfg(feature = "hydrate")]
    {
        let rules = js_sys::Intl::PluralRules::new(&locales(tag), &js_sys::Object::new());
        let category = String::from(rules.select(n as f64));
        return category_name(&category);
    }
    #[cfg(all(feature = "ssr", not(feature = "hydrate")))]
    {
        use icu_plurals::PluralRules;
        let Some(rules) = tag
            .parse::<icu_locale_core::Locale>()
            .ok()
            .and_then(|l| PluralRules::try_new_cardinal(l.into()).ok())
        else {
            return "other";
        };
        return category_of(rules.category_for(n.unsigned_abs()));
    }
    #[allow(unreachable_code)]
    {
        let _ = tag;
        if n == 1 {
            "one"
        } else {
            "other"
        }
    }
}

/// The name CLDR gives an ICU4X plural category ("one", "other", …).
#[cfg(feature = "ssr")]
pub fn category_of(category: icu_plurals::PluralCategory) -> &'static str {
    use icu_plurals::PluralCategory;
    match category {
        PluralCategory::Zero => "zero",
        PluralCategory::One => "one",
        PluralCategory::Two => "two",
        PluralCategory::Few => "few",
        PluralCategory::Many => "many",
        PluralCategory::Other => "other",
    }
}

#[cfg(feature = "hydrate")]
fn category_name(category: &str) -> &'static str {
    ["zero", "one", "two", "few", "many"]
        .into_iter()
        .find(|c| *c == category)
        .unwrap_or("other")
}

#[cfg(feature = "hydrate")]
fn locales(tag: &str) -> js_sys::Array {
    js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(tag))
}

/// `value` × 10^-`fraction` with `fraction` digits after the separator, as `tag` writes it.
fn decimal(tag: &str, value: i64, fraction: i16) -> String {
    #[cfg(feature = "hydrate")]
    {
        let options = js_sys::Object::new();
        let digits = wasm_bindgen::JsValue::from_f64(f64::from(fraction));
        let _ = js_sys::Reflect::set(&options, &"minimumFractionDigits".into(), &digits);
        let _ = js_sys::Reflect::set(&options, &"maximumFractionDigits".into(), &digits);
        let format = js_sys::Intl::NumberFormat::new(&locales(tag), &options).format();
        let shown = value as f64 / 10f64.powi(i32::from(fraction));
        if let Some(s) = format
            .call1(&wasm_bindgen::JsValue::NULL, &shown.into())
            .ok()
            .and_then(|v| v.as_string())
        {
            return s;
        }
    }
    #[cfg(all(feature = "ssr", not(feature = "hydrate")))]
    if let Some(f) = tag
        .parse::<icu_locale_core::Locale>()
        .ok()
        .and_then(|l| icu_decimal::DecimalFormatter::try_new(l.into(), Default::default()).ok())
    {
        let mut d = icu_decimal::input::Decimal::from(value);
        // Trailing zeros are digits of their own: 129950 shifted is 1299.50, not 1299.5.
        d.multiply_pow10(-fraction);
        return f.format(&d).to_string();
    }
    let _ = tag;
    let whole = crate::format::thousands(value / 10i64.pow(u32::from(fraction.unsigned_abs())));
    if fraction == 0 {
        whole
    } else {
        let rest = (value % 10i64.pow(u32::from(fraction.unsigned_abs()))).unsigned_abs();
        format!("{whole}.{rest:0width$}", width = fraction as usize)
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests;
