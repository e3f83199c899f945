//! `cargo xtask <task>`: the one entry point for people and CI.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use ztensor_format::Version;

mod examples;
mod hostile;
mod tb_fixtures;

const TASKS: &[(&str, &str)] = &[
    ("ci", "everything CI runs: fmt, clippy, test, doc, fixtures --check"),
    ("fmt", "cargo fmt --all --check"),
    ("clippy", "cargo clippy --workspace --all-targets -D warnings"),
    ("test", "run the workspace tests"),
    ("doc", "build the docs with warnings as errors"),
    (
        "bench [NAME]",
        "the benchmark suite against safetensors and the machine's ceilings (table + \
         target/bench/report.json; ZT_BENCH_BYTES, ZT_BENCH_RUNS, ZT_BENCH_SMALL, ZT_BENCH_ONLY), \
         or one bench of benches/ by name",
    ),
    (
        "fuzz-smoke [SECONDS] [TARGET...]",
        "run every fuzz target (or those named) for SECONDS each with a 1 GiB malloc limit",
    ),
    ("fixtures [--check]", "regenerate fixtures/examples, or check the committed files"),
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        print_help();
        return Ok(());
    };
    match task.as_str() {
        "ci" => {
            fmt()?;
            clippy()?;
            test()?;
            doc()?;
            fixtures(true)
        }
        "fixtures" => fixtures(args.iter().any(|a| a == "--check")),
        "bench" => {
            // The suite's repack row runs the release binary as a user would.
            cargo(&["build", "--release", "-p", "ztensor-cli"], &[])?;
            let name = args.get(1).map_or("suite", String::as_str);
            cargo(&["bench", "-p", "ztensor-benches", "--bench", name], &[])
        }
        "fuzz-smoke" => fuzz_smoke(
            args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30),
            args.get(2..).unwrap_or_default(),
        ),
        "fmt" => fmt(),
        "clippy" => clippy(),
        "test" => test(),
        "doc" => doc(),
        "help" | "--help" | "-h" => {
            print_help();
            Ok(())
        }
        other => {
            print_help();
            bail!("unknown task {other:?}")
        }
    }
}

fn print_help() {
    eprintln!("usage: cargo xtask <task>\n\ntasks:");
    for (name, what) in TASKS {
        eprintln!("  {name:<20} {what}");
    }
}

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().map(PathBuf::from).unwrap_or_default()
}

fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(project_root())
        .status()
        .with_context(|| format!("running {cargo}"))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn fmt() -> Result<()> {
    cargo(&["fmt", "--all", "--check"], &[])
}

fn clippy() -> Result<()> {
    cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"], &[])
}

fn test() -> Result<()> {
    cargo(&["test", "--workspace"], &[])
}

fn doc() -> Result<()> {
    cargo(&["doc", "--workspace", "--no-deps"], &[("RUSTDOCFLAGS", "-D warnings")])
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
        files.push((path, examples::tiny(version)?));
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
        files.push((path, bytes));
    }
    files.extend(ztensor_conformance::files(&extra)?);
    let hostile = hostile::all()?;
    files.push(("hostile/index.toml".to_owned(), hostile::index(&hostile).into_bytes()));
    files.extend(hostile.into_iter().map(|h| (format!("hostile/{}", h.name), h.bytes)));
    let mut stale = ztensor_conformance::write_or_check(&root, &files, check)?;
    for dir in [
        "examples",
        "examples/checkpoint",
        "hostile",
        "tensorbuffers/valid",
        "tensorbuffers/reject",
        "v0.1/valid",
        "v0.1/reject",
        "v1.1/valid",
        "v1.1/reject",
        "v1.2/valid",
        "v1.2/reject",
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

/// Runs every fuzz target for `seconds`, seeded from the fixtures, with the malloc limit that
/// catches a parser believing a declared length. Needs cargo-fuzz; libFuzzer's nightly features
/// are enabled on stable through RUSTC_BOOTSTRAP.
fn fuzz_smoke(seconds: u64, only: &[String]) -> Result<()> {
    let root = project_root();
    let fuzz = root.join("fuzz");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let have =
        Command::new(&cargo).args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        bail!("cargo-fuzz is not installed (cargo install cargo-fuzz --locked)");
    }
    for target in ztensor_conformance::fuzz::TARGETS {
        if !only.is_empty() && !only.iter().any(|o| o == target) {
            continue;
        }
        let corpus = fuzz.join("corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        for dir in [
            "examples",
            "v0.1/valid",
            "v1.1/valid",
            "v1.2/valid",
            "v0.1/reject",
            "v1.2/reject",
            "tensorbuffers/valid",
            "tensorbuffers/reject",
        ] {
            for entry in
                std::fs::read_dir(root.join("fixtures").join(dir)).into_iter().flatten().flatten()
            {
                let name = entry.file_name();
                if name.to_string_lossy().ends_with(".json") || entry.path().is_dir() {
                    continue;
                }
                std::fs::copy(
                    entry.path(),
                    corpus.join(format!("{}-{}", dir.replace('/', "-"), name.to_string_lossy())),
                )?;
            }
        }
        let time = format!("-max_total_time={seconds}");
        // The targets run at the default limits, where a zstd stream of N bytes may decode to
        // 32,768 N bytes: 16 KiB inputs stay within half the malloc limit.
        const MAX_LEN: usize = 16 << 10;
        let max_len = format!("-max_len={MAX_LEN}");
        eprintln!("$ cargo fuzz run {target} ({seconds} s)");
        let status = Command::new(&cargo)
            .args(["fuzz", "run", "-O", target])
            .arg(&corpus)
            .args([
                "--",
                &time,
                &max_len,
                "-malloc_limit_mb=1024",
                "-rss_limit_mb=4096",
                "-print_final_stats=1",
            ])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(&fuzz)
            .status()
            .context("running cargo fuzz")?;
        if !status.success() {
            bail!("fuzz target {target} found a problem (see fuzz/artifacts/{target}/)");
        }
    }
    Ok(())
}
