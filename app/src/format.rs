//! Text the pages share: thousands, the steps of a duration, a chart's axis and document titles
//! (the words and numbers of a page's language are `i18n`'s).

/// Text for the document `<title>`. leptos_meta writes it into the HTML unescaped, so a title
/// holding `</title><script>` would break out of it: angle brackets become look-alikes there
/// (the page body shows the exact text, escaped as usual).
pub fn page_title(text: &str) -> String {
    format!("{} — Seckill", text.replace('<', "‹").replace('>', "›"))
}

/// "1 sale", "2 sales", "1,500 sales" (the operator's pages, which stay English).
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

/// The labels of a chart's axis from 0 to at least `max`: at most about `n` + 1 of them, a step
/// of 1, 2 or 5 times a power of ten, so never a label twice ("0, 1, 2, 3", not "0, 1, 1, 2, 2").
pub fn ticks(max: i64, n: i64) -> Vec<i64> {
    let max = max.max(1);
    let raw = (max + n.max(1) - 1) / n.max(1);
    let mut power = 1i64;
    let step = loop {
        if let Some(&m) = [1, 2, 5].iter().find(|&&m| m * power >= raw) {
            break m * power;
        }
        power *= 10;
    };
    let top = (max + step - 1) / step * step;
    (0..=top / step).map(|i| i * step).collect()
}

/// How a duration is written: in ms under a second, in seconds under a minute, then minutes and
/// seconds, then hours and minutes (no duration is 0 ms: it is 0 s).
pub enum Span {
    Ms(i64),
    Secs(i64),
    MinSecs(i64, i64),
    HoursMins(i64, i64),
}

pub fn span(ms: i64) -> Span {
    let s = ms / 1000;
    if ms == 0 {
        Span::Secs(0)
    } else if ms < 1000 {
        Span::Ms(ms)
    } else if s < 60 {
        Span::Secs(s)
    } else if s < 3600 {
        Span::MinSecs(s / 60, s % 60)
    } else {
        Span::HoursMins(s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(-1234), "-1,234");
    }

    #[test]
    fn an_axis_never_repeats_a_label() {
        // The dashboard's old axis read "2, 2, 1, 0, 0" on a 3-unit sale.
        assert_eq!(ticks(3, 5), vec![0, 1, 2, 3]);
        assert_eq!(ticks(1, 5), vec![0, 1]);
        assert_eq!(ticks(0, 5), vec![0, 1]);
        assert_eq!(ticks(5_000, 5), vec![0, 1_000, 2_000, 3_000, 4_000, 5_000]);
        assert_eq!(ticks(7_300, 5), vec![0, 2_000, 4_000, 6_000, 8_000]);
        for max in 1..2_000 {
            let t = ticks(max, 5);
            assert!(
                t.windows(2).all(|w| w[0] < w[1]) && *t.last().unwrap() >= max && t.len() <= 7,
                "{max}: {t:?}"
            );
        }
    }

    #[test]
    fn durations_read_as_english() {
        use crate::i18n::duration_ms;
        assert_eq!(duration_ms(0), "0 s");
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(12_400), "12 s");
        assert_eq!(duration_ms(200_000), "3 min 20 s");
        assert_eq!(duration_ms(7_500_000), "2 h 05 min");
    }
}
