//! The rule of the house: a room imports only the rooms below it, so no import circle can form
//! between folders. Ranks, from the bottom: `infra`, `domain`, `buy`, `pipeline`, `http`; the
//! root (`startup`, `main`, re-exports) is above them all. Every `crate::…` path in a
//! folder's files is checked (`use` lines and inline paths alike), and `super::` may not climb
//! out of a folder. Inside a room, where the ranks say nothing, no module may reach itself again
//! through the modules it names (`crate::…` and `super::…` paths): no circle between files
//! either. Runs with `cargo test -p server` (so in `make test`).

use std::path::Path;

const ROOMS: [&str; 5] = ["infra", "domain", "buy", "pipeline", "http"];

/// The rank of a room; anything else at the crate root ranks above every folder.
fn rank(room: &str) -> usize {
    ROOMS.iter().position(|r| *r == room).unwrap_or(ROOMS.len())
}

/// A source file without its comment lines.
fn without_comments(source: &str) -> String {
    source
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of each path a `crate::` of a source file names (comments skipped):
/// `crate::buy::x` names `buy`; `crate::{buy::x, infra::{y, z}}` names `buy` and `infra`.
fn imported_rooms(source: &str) -> Vec<String> {
    let code = without_comments(source);
    let mut rooms: Vec<String> = code
        .match_indices("crate::")
        .flat_map(|(at, _)| expand(&code[at + "crate::".len()..]))
        .filter_map(|path| path.into_iter().next())
        .collect();
    rooms.retain(|r| !r.is_empty() && r != "self");
    rooms
}

/// What is wrong with one file of `room` (`is_mod`: it is the folder's `mod.rs`).
fn violations(room: &str, is_mod: bool, source: &str) -> Vec<String> {
    let mut found: Vec<String> = imported_rooms(source)
        .into_iter()
        .filter(|other| other != room && rank(other) > rank(room))
        .map(|other| format!("imports `crate::{other}`, which is above `{room}`"))
        .collect();
    let escapes = source
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//"))
        .any(|l| l.contains("super::super") || (is_mod && l.contains("super::")));
    if escapes {
        found.push("climbs out of its folder with `super::`; name the room with `crate::`".into());
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder reads") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_room_imports_a_room_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let mut checked = 0;
    for room in ROOMS {
        let mut files = Vec::new();
        rust_files(&src.join(room), &mut files);
        assert!(!files.is_empty(), "src/{room} has no files");
        for file in files {
            let source = std::fs::read_to_string(&file).expect("a source file reads");
            let is_mod = file.file_name().is_some_and(|n| n == "mod.rs")
                && file.parent() == Some(&src.join(room));
            for v in violations(room, is_mod, &source) {
                problems.push(format!(
                    "{}: {v}",
                    file.strip_prefix(&src).unwrap_or(&file).display()
                ));
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} files checked");
    assert!(
        problems.is_empty(),
        "imports against the direction of the house:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_catches_each_kind_of_wrong_import() {
    assert!(violations("infra", false, "use crate::http::error::status;").len() == 1);
    assert!(violations("infra", false, "let x = crate::buy::gate::Gate::new();").len() == 1);
    assert!(
        violations(
            "domain",
            false,
            "use crate::{\n    infra::keys::Keys,\n    state::AppState,\n};"
        )
        .len()
            == 1
    );
    assert!(
        violations(
            "buy",
            false,
            "use crate::{domain::{ApiError, x}, pipeline::journal::Reservation};"
        )
        .len()
            == 1
    );
    assert!(violations("http", false, "use crate::{http::x, state::AppState};").len() == 1);
    assert!(!violations("pipeline", false, "use super::super::http::session;").is_empty());
    assert!(!violations("infra", true, "use super::Config;").is_empty());
    assert!(violations("http", false, "use crate::{\n    buy::gate::Gate,\n    domain::{activity::{a, b}, rfc3339, ApiError},\n};\nuse super::input::AppJson;").is_empty());
    assert!(violations(
        "infra",
        false,
        "//! Unlike `crate::http`, this knows no requests."
    )
    .is_empty());
}

/// docs/architecture.md walks one buy file by file: every path it names must exist, so the map
/// breaks loudly when a file moves.
#[test]
fn the_architecture_map_names_real_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let map = std::fs::read_to_string(root.join("docs/architecture.md"))
        .expect("docs/architecture.md reads");
    let named: Vec<&str> = map
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| {
            ["server/", "app/", "migrations/", "frontend/", "loadtest/"]
                .iter()
                .any(|top| p.starts_with(top))
        })
        .collect();
    assert!(
        named.len() >= 20,
        "the map names only {} files",
        named.len()
    );
    let missing: Vec<&&str> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names files that do not exist: {missing:?}"
    );
    // Every step of the buy (a numbered item and its continuation lines) names at least one file.
    let walk = map
        .split("## One buy, step by step")
        .nth(1)
        .expect("the walk through one buy")
        .split("\n## ")
        .next()
        .expect("the walk's own section");
    let mut steps: Vec<String> = Vec::new();
    for line in walk.lines() {
        if line.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            steps.push(line.to_string());
        } else if let Some(step) = steps.last_mut() {
            step.push_str(line);
        }
    }
    assert!(steps.len() >= 8, "the walk has {} steps", steps.len());
    for step in &steps {
        assert!(
            step.contains("`server/") || step.contains("`app/"),
            "a step names no file: {step}"
        );
    }
}

/// The full paths a `crate::` path names, from the text just after `crate::`:
/// `a::{b, c::{d, e}}` gives `a::b`, `a::c::d` and `a::c::e`.
fn expand(text: &str) -> Vec<Vec<String>> {
    fn tree(chars: &[char], at: &mut usize) -> Vec<Vec<String>> {
        let mut prefix = Vec::new();
        loop {
            while *at < chars.len() && chars[*at].is_whitespace() {
                *at += 1;
            }
            if chars.get(*at) == Some(&'{') {
                *at += 1;
                let mut paths = Vec::new();
                loop {
                    for tail in tree(chars, at) {
                        paths.push(prefix.iter().cloned().chain(tail).collect());
                    }
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    match chars.get(*at) {
                        Some(',') => *at += 1,
                        Some('}') => {
                            *at += 1;
                            break;
                        }
                        _ => break,
                    }
                    while *at < chars.len() && chars[*at].is_whitespace() {
                        *at += 1;
                    }
                    if chars.get(*at) == Some(&'}') {
                        *at += 1;
                        break;
                    }
                }
                return paths;
            }
            let start = *at;
            while *at < chars.len() && (chars[*at].is_alphanumeric() || chars[*at] == '_') {
                *at += 1;
            }
            if *at == start {
                return vec![prefix];
            }
            prefix.push(chars[start..*at].iter().collect());
            if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
                *at += 2;
            } else {
                return vec![prefix];
            }
        }
    }
    let chars: Vec<char> = text.chars().take(2000).collect();
    tree(&chars, &mut 0)
}

/// The crate's modules (`http::admin::orders`, `buy::queue`…) and, for each, the other modules its
/// `crate::…` and `super::…` paths name (the longest known module of each path).
fn module_graph(
    files: &[(String, bool, String)],
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let known: std::collections::BTreeSet<&str> =
        files.iter().map(|(m, _, _)| m.as_str()).collect();
    let mut graph = std::collections::BTreeMap::new();
    for (module, is_mod, source) in files {
        let code = without_comments(source);
        let mut named = std::collections::BTreeSet::new();
        let mut paths = Vec::new();
        for (at, _) in code.match_indices("crate::") {
            paths.extend(expand(&code[at + "crate::".len()..]));
        }
        // `super::` of a file is its folder's module; of a `mod.rs`, the folder above.
        let mut parent: Vec<String> = module.split("::").map(String::from).collect();
        parent.pop();
        if *is_mod {
            parent.pop();
        }
        for (at, _) in code.match_indices("super::") {
            if code[..at].ends_with("::") {
                continue;
            }
            for tail in expand(&code[at + "super::".len()..]) {
                paths.push(parent.iter().cloned().chain(tail).collect());
            }
        }
        for path in paths {
            let found = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|m| known.contains(m.as_str()));
            if let Some(m) = found.filter(|m| m != module) {
                named.insert(m);
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

/// A circle of the graph, if there is one: the modules in order, the first one again at the end.
fn a_circle(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        done: &mut std::collections::BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut circle = path[i..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, done, path) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_reaches_itself_again() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(String, bool, String)> = paths
        .iter()
        .map(|file| {
            let relative = file
                .strip_prefix(&src)
                .expect("under src")
                .with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let is_mod = parts.last().is_some_and(|p| p == "mod");
            if is_mod {
                parts.pop();
            }
            let source = std::fs::read_to_string(file).expect("a source file reads");
            (parts.join("::"), is_mod, source)
        })
        .collect();
    let graph = module_graph(&files);
    let edges: usize = graph.values().map(|n| n.len()).sum();
    assert!(edges > 100, "only {edges} imports between modules found");
    assert_eq!(a_circle(&graph), None, "an import circle between modules");
}

#[test]
fn the_circle_check_sees_a_circle_inside_a_room() {
    let file = |m: &str, is_mod: bool, s: &str| (m.to_string(), is_mod, s.to_string());
    // The knot `http/state.rs` once had: the state named the admin router's type, and the router
    // imported the state.
    let knot = [
        file(
            "http::state",
            false,
            "pub exports: crate::http::admin::orders::Exports,",
        ),
        file(
            "http::admin::orders",
            false,
            "use crate::http::{session::Merchant, state::AppState};",
        ),
        file("http::admin", true, "pub mod orders;"),
        file("http::session", false, ""),
    ];
    let circle = a_circle(&module_graph(&knot)).expect("the circle is seen");
    assert_eq!(circle.first(), circle.last());
    assert!(circle.contains(&"http::state".to_string()), "{circle:?}");
    // Through `super::`, from a file of a folder to its `mod.rs` and back.
    let through_super = [
        file(
            "buy::queue",
            true,
            "use crate::buy::queue::board::LineBoard;",
        ),
        file(
            "buy::queue::board",
            false,
            "use super::{places::Place, QueueState};",
        ),
        file("buy::queue::places", false, ""),
    ];
    assert!(a_circle(&module_graph(&through_super)).is_some());
    // The same files without the way back: no circle.
    let untied = [
        file("http::exports", false, ""),
        file(
            "http::state",
            false,
            "pub exports: crate::http::exports::Exports,",
        ),
        file(
            "http::admin::orders",
            false,
            "use crate::http::{exports::Exports, state::AppState};",
        ),
    ];
    assert_eq!(a_circle(&module_graph(&untied)), None);
}
