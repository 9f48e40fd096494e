//! Lists the storefront's languages: every `locales/*.json` file, English first. Adding a
//! language is adding its file (README, "Languages"); the catalog's test checks it has every key.

use std::{env, fs, path::Path};

fn main() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("locales");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut tags: Vec<String> = fs::read_dir(&dir)
        .expect("app/locales")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".json").map(str::to_string))
        .collect();
    tags.sort_by_key(|t| (t != "en", t.clone()));
    let entries: String = tags
        .iter()
        .map(|t| {
            let file = dir.join(format!("{t}.json"));
            println!("cargo:rerun-if-changed={}", file.display());
            format!(
                "    ({t:?}, include_str!({:?})),\n",
                file.display().to_string()
            )
        })
        .collect();
    let out = Path::new(&env::var("OUT_DIR").expect("set by cargo")).join("locales.rs");
    fs::write(
        out,
        format!("/// Every language's tag and catalog, English first.\npub const LOCALES: &[(&str, &str)] = &[\n{entries}];\n"),
    )
    .expect("OUT_DIR is writable");
}
