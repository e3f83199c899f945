//! `ztensor-conformance run --impl 'COMMAND'`: grades any implementation that speaks the dump
//! protocol on every fixture.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};

const USAGE: &str = "usage: ztensor-conformance run --impl 'COMMAND' [--fixtures DIR] [--json] [--junit FILE] [--only PREFIX]

Runs COMMAND FILE on every fixture of DIR/index.toml (default: the repository's fixtures/) and
grades it: a file expected to be accepted must exit 0 with a dump (and, where a golden dump
exists, report the same content; extra keys are ignored); a file expected to be rejected must
exit 1 with a dump whose error names a rule (a matching rule identifier is counted separately);
any other exit status is a crash. Prints a table and totals, or with --json the report as JSON.
--junit FILE also writes JUnit XML. Exit status 0 when every fixture passes.

example: ztensor-conformance run --impl 'ztensor dump --json'";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ztensor-conformance: {e:#}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("run") {
        bail!("the only command is `run`");
    }
    let (mut command, mut json, mut junit, mut only) = (None, false, None, None);
    let mut fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--impl" => command = args.next(),
            "--fixtures" => fixtures = args.next().map(PathBuf::from).unwrap_or(fixtures),
            "--json" => json = true,
            "--junit" => junit = args.next().map(PathBuf::from),
            "--only" => only = args.next(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(true);
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    let Some(command) = command else { bail!("--impl is required") };
    let mut entries = ztensor_conformance::index::read(&fixtures)?;
    if let Some(prefix) = &only {
        entries.retain(|e| e.file.starts_with(prefix.as_str()));
    }
    let results = ztensor_conformance::runner::run(&command, &fixtures, &entries)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&ztensor_conformance::runner::to_json(&results))?
        );
    } else {
        print!("{}", ztensor_conformance::runner::table(&results));
    }
    if let Some(path) = junit {
        std::fs::write(&path, ztensor_conformance::runner::to_junit(&results))?;
    }
    let (_, failed, crashed, _, _) = ztensor_conformance::runner::totals(&results);
    Ok(failed == 0 && crashed == 0)
}
