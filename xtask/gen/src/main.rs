//! The generator behind `cargo xtask fixtures` (every committed fixture, written or checked
//! byte for byte) and `cargo xtask hostile-measure` (the large hostile cases, too big to commit).
//! A package of its own so that `cargo xtask fmt` and the other light tasks build nothing of the
//! workspace.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ztensor_format::Version;

mod examples;
mod hostile;
mod hostile_v2;
mod tb_fixtures;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("fixtures") => fixtures(args.iter().any(|a| a == "--check")),
        Some("hostile-large") => {
            let dir = PathBuf::from(args.get(1).context("hostile-large needs a directory")?);
            std::fs::create_dir_all(&dir)?;
            for h in hostile::large()? {
                std::fs::write(dir.join(h.name), &h.bytes)?;
            }
            Ok(())
        }
        _ => bail!("usage: xtask-gen fixtures [--check] | hostile-large DIR"),
    }
}

fn project_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Writes every generated fixture, or with `check` compares them to the committed files (and
/// reports committed files no recipe produces).
fn fixtures(check: bool) -> Result<()> {
    let root = project_root().join("fixtures");
    let mut files = Vec::new();
    let mut extra = String::new();
    for (name, version) in [
        ("tiny-v0.1.zt", Version::V0_1),
        ("tiny-v1.1.zt", Version::V1_1),
        ("tiny-v1.2.zt", Version::V1_2),
    ] {
        let path = format!("examples/{name}");
        extra.push_str(&format!("\n[[fixture]]\nfile = {path:?}\nversion = \"{version}\"\ncovers = \"the bundled example checkpoint\"\nexpect = \"ok\"\n"));
        let bytes = examples::tiny(version)?;
        files.push((
            ztensor_conformance::dump_path(&path),
            ztensor_conformance::golden_dump(&bytes)?.into_bytes(),
        ));
        files.push((path, bytes));
    }
    for (name, bytes) in examples::checkpoint()? {
        files.push((format!("examples/checkpoint/{name}"), bytes));
    }
    for (name, bytes) in tb_fixtures::all()? {
        let path = format!("tensorbuffers/{name}");
        let stem = name.rsplit('/').next().unwrap_or("").trim_end_matches(".tb");
        let expect = if name.starts_with("reject/") {
            stem.split("--").next().unwrap_or(stem).to_owned()
        } else {
            "ok".to_owned()
        };
        extra.push_str(&format!("\n[[fixture]]\nfile = {path:?}\nversion = \"tensorbuffers\"\ncovers = {stem:?}\nexpect = {expect:?}\n"));
        if expect == "ok" {
            let golden = ztensor_conformance::golden_dump_tb(&bytes)?;
            files.push((ztensor_conformance::dump_path(&path), golden.into_bytes()));
        }
        files.push((path, bytes));
    }
    files.extend(ztensor_conformance::files(&extra)?);
    let hostile = hostile::all()?;
    files.push(("hostile/index.toml".to_owned(), hostile::index(&hostile).into_bytes()));
    files.extend(hostile.into_iter().map(|h| (format!("hostile/{}", h.name), h.bytes)));
    let hostile_v2 = hostile_v2::all()?;
    // Beside the directory, not in it: every file in it is run as a hostile input.
    files.push((
        "external/ztensor2/hostile.toml".to_owned(),
        hostile::index(&hostile_v2).into_bytes(),
    ));
    files.extend(
        hostile_v2.into_iter().map(|h| (format!("external/ztensor2/hostile/{}", h.name), h.bytes)),
    );
    let mut stale = ztensor_conformance::write_or_check(&root, &files, check)?;
    for dir in [
        "examples",
        "examples/checkpoint",
        "hostile",
        "external/ztensor2/hostile",
        "tensorbuffers/valid",
        "tensorbuffers/reject",
        "v0.1/valid",
        "v0.1/reject",
        "v0.1/implementation-defined",
        "v1.1/valid",
        "v1.1/reject",
        "v1.1/implementation-defined",
        "v1.2/valid",
        "v1.2/reject",
        "v1.2/implementation-defined",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).into_iter().flatten().flatten() {
            if entry.path().is_dir() {
                continue;
            }
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if !files.iter().any(|(name, _)| *name == rel) {
                stale.push(format!("{} (no recipe)", entry.path().display()));
            }
        }
    }
    if !stale.is_empty() {
        bail!(
            "fixtures differ from their recipes (run `cargo xtask fixtures`): {}",
            stale.join(", ")
        );
    }
    Ok(())
}
