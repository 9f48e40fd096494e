//! Every language's catalog against English's, and each language's rules.

use super::*;

#[test]
fn the_language_is_the_cookies_else_the_first_accepted_else_english() {
    let ours = ["en", "zh-CN"];
    assert_eq!(choose(None, None, &ours), "en");
    assert_eq!(
        choose(None, Some("zh-CN,zh;q=0.9,en;q=0.8"), &ours),
        "zh-CN"
    );
    assert_eq!(
        choose(None, Some("fr-FR, zh;q=0.5, en;q=0.4"), &ours),
        "zh-CN"
    );
    assert_eq!(choose(None, Some("zh-Hans-CN"), &ours), "zh-CN");
    assert_eq!(choose(None, Some("en;q=0.2, zh-cn;q=0.9"), &ours), "zh-CN");
    assert_eq!(choose(None, Some("de, fr"), &ours), "en");
    assert_eq!(choose(Some("en"), Some("zh-CN"), &ours), "en");
    assert_eq!(choose(Some("xx"), Some("zh-CN"), &ours), "zh-CN");
    assert_eq!(cookie("a=1; lang=zh-CN; b=2", COOKIE), Some("zh-CN"));
    assert_eq!(cookie("slang=en", COOKIE), None);
}

#[test]
fn numbers_prices_and_plurals_follow_each_languages_rules() {
    let en = Catalog::of("en").unwrap();
    let zh = Catalog::of("zh-CN").unwrap();
    assert_eq!(en.number(1_234_567), "1,234,567");
    assert_eq!(zh.number(1_500), "1,500");
    assert_eq!(en.money(1_250), "$12.50");
    assert_eq!(en.money(5), "$0.05");
    assert_eq!(zh.money(129_900), "US$1,299.00");
    assert_eq!(plural_category("en", 1), "one");
    assert_eq!(plural_category("en", 2), "other");
    assert_eq!(plural_category("zh-CN", 1), "other");
    assert_eq!(en.count("units", 1, &[]), "1 unit");
    assert_eq!(en.count("units", 1_500, &[]), "1,500 units");
    assert_eq!(zh.count("units", 1, &[]), "1 件");
}

/// Every language has every key of English, and no other; each plural message has the forms
/// its language's CLDR rules need (and "other"); each text names the same placeholders as
/// English's. Every key the code asks for is in English.
#[test]
fn every_language_has_every_key() {
    let en = Catalog::of("en").unwrap();
    assert!(LOCALES.len() >= 2, "{LOCALES:?}");
    for (tag, text) in LOCALES {
        let catalog = Catalog::of(tag).unwrap_or_else(|| panic!("{tag}.json does not parse"));
        for key in en.messages.keys() {
            assert!(
                catalog.messages.contains_key(key),
                "{tag}.json lacks {key:?}"
            );
        }
        for (key, message) in &catalog.messages {
            let english = en
                .messages
                .get(key)
                .unwrap_or_else(|| panic!("{tag}.json has {key:?}, which English lacks"));
            let names = |m: &Message| -> Vec<String> {
                let mut all: Vec<String> = match m {
                    Message::Text(t) => placeholders(t),
                    Message::Plural(forms) => {
                        forms.values().flat_map(|t| placeholders(t)).collect()
                    }
                };
                all.sort();
                all.dedup();
                all
            };
            assert_eq!(
                names(message),
                names(english),
                "{tag}.json: {key:?}'s placeholders"
            );
            if let Message::Plural(forms) = message {
                for category in needed_categories(tag) {
                    assert!(
                        forms.contains_key(category),
                        "{tag}.json: {key:?} lacks its {category:?} form"
                    );
                }
            }
            assert!(
                matches!(message, Message::Plural(_)) == matches!(english, Message::Plural(_)),
                "{tag}.json: {key:?} is plural in one language only"
            );
        }
        let _ = text;
    }
    for key in keys_in_code() {
        assert!(
            en.messages.contains_key(&key),
            "the code asks for {key:?}, which en.json lacks"
        );
    }
}

/// The merchant's console and the report write no words of their own: every text of their
/// markup (an element's text, a label, a title) comes from the catalog, so the test above
/// covers the console's keys, and both languages have them.
#[test]
fn the_console_and_the_report_write_no_words_outside_the_catalog() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = [
        "pages/console.rs",
        "pages/dashboard/mod.rs",
        "pages/dashboard/actions.rs",
        "pages/dashboard/forecast.rs",
        "pages/dashboard/orders.rs",
        "pages/new_sale/mod.rs",
        "pages/audit.rs",
        "pages/report.rs",
        "components/merchant_only.rs",
        "components/chart.rs",
    ];
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        // The code, not its tests (which compare with English on purpose).
        let code = text.split("mod tests").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let words = |mark: &str| {
                line.match_indices(mark).any(|(i, _)| {
                    line[i + mark.len()..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphabetic)
                })
            };
            let attribute = [
                "label=\"",
                "text=\"",
                "title=\"",
                "alt=\"",
                "placeholder=\"",
            ]
            .iter()
            .any(|a| words(a));
            if (words(">\"") && !line.contains("<code>")) || attribute {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "words outside the catalog:\n{}",
        found.join("\n")
    );
}

fn needed_categories(tag: &str) -> Vec<&'static str> {
    let rules = icu_plurals::PluralRules::try_new_cardinal(
        tag.parse::<icu_locale_core::Locale>().unwrap().into(),
    )
    .unwrap();
    let mut needed: Vec<&'static str> = rules.categories().map(category_of).collect();
    needed.push("other");
    needed
}

/// The literal keys of `tr("…")`, `tr_with("…"` and `tr_count("…"` in the app's sources.
fn keys_in_code() -> Vec<String> {
    fn walk(dir: &std::path::Path, keys: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, keys);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for call in ["tr(\"", "tr_with(\"", "tr_count(\"", "tr_split(\""] {
                    for (i, _) in text.match_indices(call) {
                        let before = text[..i].chars().next_back();
                        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                            continue;
                        }
                        let rest = &text[i + call.len()..];
                        if let Some(end) = rest.find('"') {
                            keys.push(rest[..end].to_string());
                        }
                    }
                }
            }
        }
    }
    let mut keys = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut keys,
    );
    // Not this file's own examples ("…").
    keys.retain(|k| {
        k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._".contains(&b))
    });
    assert!(keys.len() > 20, "{} keys found", keys.len());
    keys
}
