//! The fault suites' tables into docs/reliability.md (the chaos suite's and the partition
//! suite's).

/// Puts `body` between the `<!-- {name}:begin -->` and `<!-- {name}:end -->` markers of
/// docs/reliability.md, after a line saying when and how the run was made.
pub fn record_in_reliability(name: &str, how: &str, body: &str) {
    let path = "../docs/reliability.md";
    let text = std::fs::read_to_string(path).expect("docs/reliability.md exists");
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        panic!("docs/reliability.md lacks the {name} markers")
    };
    let stamp = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let updated = format!(
        "{}{begin}\nLast full run: {stamp} ({how}).\n\n{body}{}",
        &text[..b],
        &text[e..]
    );
    std::fs::write(path, updated).expect("docs/reliability.md is written");
}
