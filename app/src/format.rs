//! Text the pages share: money, counts of units and document titles.

/// Text for the document `<title>`. leptos_meta writes it into the HTML unescaped, so a title
/// holding `</title><script>` would break out of it: angle brackets become look-alikes there
/// (the page body shows the exact text, escaped as usual).
pub fn page_title(text: &str) -> String {
    format!("{} — Seckill", text.replace('<', "‹").replace('>', "›"))
}

pub fn money(cents: i64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// "1 unit", "2 units", "1,500 units".
pub fn units(n: i64) -> String {
    format!("{} {}", thousands(n), if n == 1 { "unit" } else { "units" })
}

/// "1 sale", "2 sales", "1,500 sales".
pub fn counted(n: i64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// "1,500" for 1500.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_english() {
        assert_eq!(units(1), "1 unit");
        assert_eq!(units(0), "0 units");
        assert_eq!(units(2), "2 units");
        assert_eq!(units(1500), "1,500 units");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(-1234), "-1,234");
    }
}
