//! Compiles the conformance corpus into the crate (`embedded`), so that an installed
//! `ztensor-conformance run` needs no checkout: the indexes, and every file of each directory
//! that holds a file an index lists (the file, its golden dump beside it, and any shard a
//! sharded file names). What no index lists (foreign formats, the hostile measurements, the
//! reference's zTensor 2 outputs) stays out.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

include!("src/indexes.rs");

fn main() {
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest_dir).join("fixtures");
    println!("cargo:rerun-if-changed=fixtures");
    println!("cargo:rerun-if-changed=src/indexes.rs");

    let mut files = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    for index in INDEXES {
        let path = root.join(index);
        if index != INDEXES[0] && !path.exists() {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let entries = table.get("fixture").and_then(toml::Value::as_array);
        for entry in entries.into_iter().flatten() {
            let file = entry
                .get("file")
                .and_then(toml::Value::as_str)
                .unwrap_or_else(|| panic!("{}: an entry without `file`", path.display()));
            let dir = Path::new(file).parent().unwrap_or(Path::new(""));
            dirs.insert(dir.to_str().expect("a UTF-8 path").to_owned());
        }
        files.insert(index.to_owned());
    }
    for dir in &dirs {
        let full = root.join(dir);
        let listing =
            std::fs::read_dir(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
        for item in listing {
            let item = item.unwrap_or_else(|e| panic!("{}: {e}", full.display()));
            if item.file_type().is_ok_and(|t| t.is_file()) {
                let name = item.file_name().into_string().expect("a UTF-8 file name");
                files.insert(if dir.is_empty() { name } else { format!("{dir}/{name}") });
            }
        }
    }

    let mut out = String::from(
        "/// Every file of the embedded corpus: its path relative to the corpus's root (`/` \
         between components) and its bytes, sorted by path.\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for file in &files {
        let full = root.join(file);
        let full = full.to_str().expect("a UTF-8 path");
        let _ = writeln!(out, "    ({file:?}, include_bytes!({full:?})),");
    }
    out.push_str("];\n");
    let out_dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let target = Path::new(&out_dir).join("corpus.rs");
    std::fs::write(&target, out).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
}
