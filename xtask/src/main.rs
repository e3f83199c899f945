//! `cargo xtask <task>`: the one entry point for people and CI.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

const TASKS: &[(&str, &str)] = &[
    ("ci", "everything CI runs: fmt, clippy, test, doc"),
    ("fmt", "cargo fmt --all --check"),
    ("clippy", "cargo clippy --workspace --all-targets -D warnings"),
    ("test", "run the workspace tests"),
    ("doc", "build the docs with warnings as errors"),
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
            doc()
        }
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
        eprintln!("  {name:<10} {what}");
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
