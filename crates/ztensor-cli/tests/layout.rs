//! The CLI's source files by concern: no two of them import each other, however indirectly
//! (`main.rs`, which dispatches to all of them, aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each source file (by its path under `src/`) and its text.
fn sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
                files.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    files
}

/// The file that defines item `name` at the top level of one of `files`' texts (`fn name`,
/// `struct name`, `enum name`, `const name`, `static name`, `type name`, `trait name`).
fn defining<'a>(
    files: &'a BTreeMap<String, String>,
    candidates: &[&'a str],
    name: &str,
) -> Option<&'a str> {
    candidates.iter().copied().find(|file| {
        files[*file].lines().any(|line| {
            let line = line.trim_start();
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            ["fn ", "struct ", "enum ", "const ", "static ", "type ", "trait "].iter().any(|kw| {
                line.strip_prefix(kw).is_some_and(|rest| {
                    rest.strip_prefix(name).is_some_and(|after| {
                        !after.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                })
            })
        })
    })
}

/// The paths after `crate::` and `super::` in `text`, braces expanded one level
/// (`use crate::{a, b::c}` gives `a` and `b::c`), each with the prefix it had.
fn references(text: &str) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    for prefix in ["crate::", "super::"] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            // `ztensor_cli::…` or a word ending in `crate` is another path.
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let kind = if prefix == "crate::" { "crate" } else { "super" };
            if let Some(inner) = rest.strip_prefix('{') {
                let list = &inner[..inner.find('}').unwrap_or(inner.len())];
                for item in list.split(',') {
                    let item = item.trim().split(" as ").next().unwrap_or("").trim();
                    if !item.is_empty() {
                        found.push((kind, item.to_owned()));
                    }
                }
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push((kind, path.trim_end_matches(':').to_owned()));
        }
    }
    found
}

#[test]
fn no_two_cli_files_import_each_other() {
    let files = sources();
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    let exists = |f: &str| files.contains_key(f);
    // What the crate root re-exports (`use crate::errors::*`, `sources::*`, `cli::*`).
    let root = ["errors.rs", "sources.rs", "cli.rs"];
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        let file = file.as_str();
        if file == "main.rs" {
            continue;
        }
        let in_cmd = file.starts_with("cmd/");
        for (kind, path) in references(text) {
            let mut parts = path.split("::");
            let first = parts.next().unwrap_or("");
            let second = parts.next();
            let target = match (kind, first) {
                ("crate", "cmd") => match second {
                    Some(m) if exists(&format!("cmd/{m}.rs")) => Some(format!("cmd/{m}.rs")),
                    _ => Some("cmd/mod.rs".to_owned()),
                },
                ("crate", m) if exists(&format!("{m}.rs")) => Some(format!("{m}.rs")),
                ("crate", item) => defining(&files, &root, item).map(str::to_owned),
                ("super", m) if in_cmd && exists(&format!("cmd/{m}.rs")) => {
                    Some(format!("cmd/{m}.rs"))
                }
                ("super", _) if in_cmd => Some("cmd/mod.rs".to_owned()),
                _ => None,
            };
            if let Some(target) = target.filter(|t| t != file && t != "main.rs") {
                edges.entry(file).or_default().insert(target);
            }
        }
    }
    assert!(edges.get("cmd/convert.rs").is_some_and(|e| e.contains("report.rs")), "{edges:?}");
    // A cycle is a path back to where it began.
    for start in &names {
        let mut stack: Vec<(String, Vec<String>)> =
            vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(at.as_str()).into_iter().flatten() {
                assert!(next != start, "a circle of imports: {} -> {next}", path.join(" -> "));
                if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
}
