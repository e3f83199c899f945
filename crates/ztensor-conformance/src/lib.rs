//! What people use to test zTensor implementations, ours and theirs: golden fixtures generated
//! by deterministic recipes, with an index and a golden dump beside every valid file; and the
//! runner that grades any implementation speaking the dump protocol (`ztensor-conformance run`).
//!
//! Never a dependency of a shipping crate.
//!
//! ```
//! // The corpus travels with the crate: its index lists every file and what it expects.
//! let entries = ztensor_conformance::index::read_all(&ztensor_conformance::corpus()).unwrap();
//! assert!(entries.iter().any(|e| e.expect == "ok"));
//! assert!(entries.iter().any(|e| e.file.starts_with("v0.1/reject/")));
//! ```

// The one exception, `child`, says why: process control has no safe interface in std.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod child;
pub mod difffuzz;
pub mod embedded;
pub mod fuzz;
pub mod heap;
pub mod implementation;
pub mod index;
pub mod matrix;
pub mod model;
pub mod recipes;
pub mod runner;
pub mod scratch;
pub mod writer_check;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use ztensor_format::Options;
use ztensor_io::Reader;

use crate::recipes::{Expect, Fixture};

/// The golden dump of a valid fixture, as `ztensor dump --json` prints it, pretty-printed.
///
/// # Errors
/// When the fixture does not open (a recipe bug).
pub fn golden_dump(bytes: &[u8]) -> Result<String> {
    let reader = Reader::new(bytes, &Options::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::to_string_pretty(&ztensor_dump::accepted(&reader))? + "\n")
}

/// Our reader under strict validation, in the dump protocol: the file must open strictly and
/// no object may break a strict-only data rule (other data rules are reported per object, as
/// the lenient dump does). TensorBuffers files are dumped as `ztensor_dump::file` does.
///
/// # Errors
/// When the file cannot be read at all.
pub fn strict_dump(path: &Path) -> Result<(serde_json::Value, bool)> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    // What the file is comes from the format registry, as for every other reader.
    if !matches!(ztensor_registry::detect_bytes(&bytes, Some(path)), Ok(ztensor_registry::Kind::Zt))
    {
        return Ok(ztensor_dump::file(path)?);
    }
    strict_dump_bytes(&bytes)
}

/// [`strict_dump`] of a zTensor (0.1/1.x) file's bytes.
///
/// # Errors
/// When the reader fails with an error that names no rule.
pub fn strict_dump_bytes(bytes: &[u8]) -> Result<(serde_json::Value, bool)> {
    if let Some(rejected) = strict_rejection(bytes)? {
        return Ok((rejected, false));
    }
    let mut options = ztensor_dump::options();
    options.strict = true;
    let reader = Reader::new(bytes, &options).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((ztensor_dump::accepted(&reader), true))
}

/// The strict reader's rejection of a zTensor (0.1/1.x) file's bytes, as a dump, or `None`
/// when it accepts them (the verdict of [`strict_dump_bytes`] without the dump of an accepted
/// file, which holds what the lenient one holds).
///
/// # Errors
/// When the reader fails with an error that names no rule.
pub fn strict_rejection(bytes: &[u8]) -> Result<Option<serde_json::Value>> {
    let mut options = ztensor_dump::options();
    options.strict = true;
    let rejected = |e: &ztensor_io::Error| {
        e.format_error().map(|f| ztensor_dump::rejected(f.kind().id(), &f.to_string()))
    };
    let reader = match Reader::new(bytes, &options) {
        Ok(reader) => reader,
        Err(e) => return rejected(&e).map(Some).ok_or_else(|| anyhow::anyhow!("{e}")),
    };
    for i in 0..ztensor_io::TensorSource::len(&reader) {
        if let Ok(data) = ztensor_io::TensorSource::read(&reader, i)
            && let Err(e) = ztensor_io::TensorSource::check(&reader, i, &data)
            && e.format_error().is_some_and(|f| f.kind().strict_only())
            && let Some(verdict) = rejected(&e)
        {
            return Ok(Some(verdict));
        }
    }
    Ok(None)
}

/// The path of a fixture's golden dump.
pub fn dump_path(fixture_path: &str) -> String {
    let stem = fixture_path.strip_suffix(".zt").or_else(|| fixture_path.strip_suffix(".tb"));
    format!("{}.json", stem.unwrap_or(fixture_path))
}

/// The golden dump of a valid TensorBuffers fixture, pretty-printed.
///
/// # Errors
/// When the file does not open (a recipe bug).
pub fn golden_dump_tb(bytes: &[u8]) -> Result<String> {
    let reader = ztensor_tensorbuffers::TbFile::new(bytes, &Default::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::to_string_pretty(&ztensor_dump::tensorbuffers(&reader))? + "\n")
}

/// The corpus in the source tree: `fixtures/` in the crate's own directory (the repository's
/// `fixtures` links to it), where `cargo xtask fixtures` writes it. The binary grades from the
/// copy compiled into it ([`embedded`]), so it never reads this directory unless given it.
pub fn corpus() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// `fixtures/index.toml` for these fixtures (and any extra entries, already formatted).
pub fn index(fixtures: &[Fixture], extra: &str) -> String {
    let mut out = String::from(
        "# Generated by `cargo xtask fixtures`; do not edit. Each entry: the file, the version,\n\
         # what it covers, and `expect = \"ok\"`, the rule identifier (spec/rules.md) it must be\n\
         # rejected with, or `\"implementation-defined\"` where the specs let readers differ (with\n\
         # `strict`, the rule a strict reader rejects it with). Accepted files have their golden\n\
         # dump beside them (`<name>.json`).\n",
    );
    for f in fixtures {
        let expect = match &f.expect {
            Expect::Ok => "ok".to_owned(),
            Expect::Reject(kind) => kind.id().to_owned(),
            Expect::Defined(_) => "implementation-defined".to_owned(),
        };
        let _ = write!(
            out,
            "\n[[fixture]]\nfile = {:?}\nversion = {:?}\ncovers = {:?}\nexpect = {:?}\n",
            f.path,
            f.version.to_string(),
            f.covers,
            expect
        );
        if let Expect::Defined(Some(rule)) = &f.expect {
            let _ = writeln!(out, "strict = {:?}", rule.id());
        }
    }
    out.push_str(extra);
    out
}

/// Every generated file: fixtures, golden dumps and the index, as (path under `fixtures/`, bytes).
///
/// # Errors
/// A recipe bug.
pub fn files(extra_index: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let fixtures = recipes::all()?;
    let mut out = Vec::with_capacity(fixtures.len() * 2 + 1);
    for f in &fixtures {
        if matches!(f.expect, Expect::Ok | Expect::Defined(_)) {
            let dump = golden_dump(&f.bytes).with_context(|| f.path.clone())?;
            out.push((dump_path(&f.path), dump.into_bytes()));
        }
        out.push((f.path.clone(), f.bytes.clone()));
    }
    out.push(("index.toml".to_owned(), index(&fixtures, extra_index).into_bytes()));
    Ok(out)
}

/// Writes `files` under `root`, or with `check` lists those that differ.
///
/// # Errors
/// I/O errors.
pub fn write_or_check(
    root: &Path,
    files: &[(String, Vec<u8>)],
    check: bool,
) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    for (name, bytes) in files {
        let path = root.join(name);
        let same = std::fs::read(&path).ok().as_deref() == Some(&bytes[..]);
        if check {
            if !same {
                stale.push(path.display().to_string());
            }
        } else if !same {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&path, bytes).with_context(|| path.display().to_string())?;
        }
    }
    Ok(stale)
}

/// Freezes files written by other producers: runs each producer's writer (`PATH --write`, the
/// writer protocol) on every recipe, and where it has one its append (`PATH --append RECIPE
/// OUT`: the `zstd` recipe's objects added to its `dense-dtypes` file), keeps each file that
/// passes the writer check under `dir/v<version>/<id>/<recipe>.zt` with its golden dump, and
/// lists it in `dir/index.toml` (paths relative to `dir`'s parent, the fixtures root), with the
/// producer and the SHA-256. Files already listed are never written again (their SHA-256 is
/// checked instead): only new ones are added. Returns how many files were added.
///
/// # Errors
/// A listed file that changed, a producer that cannot be started, I/O errors.
pub fn freeze(dir: &Path, producers: &[(String, String, String)]) -> Result<usize> {
    let index_path = dir.join("index.toml");
    let root = dir.parent().unwrap_or(dir);
    let root_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("producers").to_owned();
    let mut index = if index_path.exists() {
        std::fs::read_to_string(&index_path)?
    } else {
        String::from(
            "# Files written by other producers, frozen: they never change (a test checks each\n\
             # SHA-256). Written by `cargo xtask freeze-producers`, which only ever adds files.\n\
             # Each passed the writer check (strict validation, zero padding, digests, the recipe's\n\
             # content) when frozen; golden dumps beside them are this project's reading.\n",
        )
    };
    let listed = if index_path.exists() { index::read_file(&index_path)? } else { Vec::new() };
    for e in &listed {
        let bytes = std::fs::read(root.join(&e.file))?;
        if Some(ztensor_io::codec::sha256_hex(&bytes)) != e.sha256 {
            anyhow::bail!("{} changed since it was frozen", e.file);
        }
    }
    let scratch = scratch::Scratch::new("freeze")?;
    let scratch = scratch.path();
    let mut added = 0;
    for (id, name, path) in producers {
        // Writes one file that passed, unless it is listed already; returns its index entry.
        let keep = |recipe: &writer_check::Recipe, bytes: &[u8]| -> Result<Option<String>> {
            let version = recipe.version.to_string();
            let rel = format!("v{version}/{id}/{}.zt", recipe.name);
            let file = format!("{root_name}/{rel}");
            if listed.iter().any(|e| e.file == file) {
                return Ok(None);
            }
            let target = dir.join(&rel);
            std::fs::create_dir_all(target.parent().unwrap_or(dir))?;
            std::fs::write(&target, bytes)?;
            std::fs::write(dir.join(dump_path(&rel)), golden_dump(bytes)?)?;
            Ok(Some(format!(
                "\n[[fixture]]\nfile = {file:?}\nversion = {version:?}\ncovers = {:?}\nexpect = \"ok\"\nproducer = {name:?}\nsha256 = {:?}\n",
                recipe.covers,
                ztensor_io::codec::sha256_hex(bytes)
            )))
        };
        let recipes = writer_check::recipes();
        let results =
            writer_check::run(&format!("{path} --write"), &recipes, &scratch.join(id), &[])?;
        let mut entries = Vec::new();
        for r in results.iter().filter(|r| r.written == writer_check::Written::Pass) {
            let Some(file) = &r.file else { continue };
            entries.extend(keep(&r.recipe, &std::fs::read(file)?)?);
        }
        // Its append, where it has one: the zstd recipe's objects added to its dense-dtypes
        // file of 1.2.
        let base = results.iter().find(|r| {
            r.written == writer_check::Written::Pass && r.recipe.file_stem() == "v1.2/dense-dtypes"
        });
        let extra = recipes.iter().find(|r| r.file_stem() == "v1.2/zstd");
        if let (Some(base), Some(extra)) = (base, extra)
            && let Some(file) = &base.file
        {
            let appended = scratch.join(id).join("append.zt");
            std::fs::copy(file, &appended)?;
            let extra_path = scratch.join(id).join("append-extra.json");
            std::fs::write(&extra_path, serde_json::to_vec(&extra.to_json())?)?;
            let (program, args) = runner::split(path)?;
            let status = std::process::Command::new(program)
                .args(args)
                .arg("--append")
                .arg(&extra_path)
                .arg(&appended)
                .output()?
                .status;
            if status.success() {
                let mut merged = base.recipe.clone();
                merged.name = "append".into();
                merged.covers =
                    format!("{}, then {} added by its append", base.recipe.covers, extra.covers);
                merged.objects.extend(extra.objects.iter().cloned());
                let bytes = std::fs::read(&appended)?;
                match writer_check::check(&merged, &bytes) {
                    Ok(()) => entries.extend(keep(&merged, &bytes)?),
                    Err(why) => {
                        eprintln!(
                            "{id}: its append wrote a file that fails the writer check: {why}"
                        );
                    }
                }
            }
        }
        // Each producer's files are listed as soon as they are written.
        added += entries.len();
        entries.iter().for_each(|e| index.push_str(e));
        std::fs::create_dir_all(dir)?;
        std::fs::write(&index_path, &index)?;
    }
    Ok(added)
}
