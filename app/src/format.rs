//! Text the pages share: money and document titles.

/// Text for the document `<title>`. leptos_meta writes it into the HTML unescaped, so a title
/// holding `</title><script>` would break out of it: angle brackets become look-alikes there
/// (the page body shows the exact text, escaped as usual).
pub fn page_title(text: &str) -> String {
    format!("{} — Seckill", text.replace('<', "‹").replace('>', "›"))
}

pub fn money(cents: i64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}
