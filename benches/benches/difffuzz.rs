//! How fast the differential fuzzer goes (`ztensor-conformance fuzz`): files a second through
//! the persistent protocol (`COMMAND --serve`, one process) and through a process per file,
//! against this project's own dump (release build), and executions a second in this process
//! (the `differential` fuzz target's body, on one core). Beside them, the fuzzer's own share:
//! making each case and reading it with our two readers, with no implementation asked at all,
//! which is the most any of the three can reach.
//!
//! `cargo xtask bench difffuzz` (builds `target/release/ztensor-conformance`). Environment:
//! `ZT_BENCH_SECONDS` (each row, default 10). Prints a table and writes
//! `target/bench/difffuzz.json`. Goals: at least 1,000 files/s persistent and 5,000 executions
//! a second in this process.

#![allow(clippy::cast_precision_loss)]

use std::path::PathBuf;
use std::time::Instant;

use ztensor_conformance::difffuzz::{
    self, Budget, Config, InProcess, OursInProcess, Recipe, classify, ours_in_process,
};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let seconds: f64 =
        std::env::var("ZT_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let binary = root.join("target/release/ztensor-conformance");
    assert!(
        binary.exists(),
        "{} is missing: `cargo xtask bench difffuzz` builds it",
        binary.display()
    );
    let command = format!("{} dump", binary.display());
    let through = |serve: bool| {
        let mut config = Config::new(&command);
        config.budget = Budget::Seconds(seconds);
        config.serve = serve;
        let report = difffuzz::run(&config, |_, _| {}).expect("the fuzzer runs");
        assert!(report.findings.is_empty(), "our own dump diverged: {}", difffuzz::table(&report));
        (report.cases, difffuzz::rate(&report))
    };
    let (persistent_cases, persistent) = through(true);
    let (per_file_cases, per_file) = through(false);
    // In this process: the body of the `differential` target, case after case.
    let in_process = |ask: bool| {
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed().as_secs_f64() < seconds {
            let file = Recipe::generate(n, &[]).build().expect("a recipe builds");
            let ours = ours_in_process(&file).expect("our verdicts");
            if ask {
                let theirs = OursInProcess { chunk: Some(61) }.read(&file);
                assert!(classify(&ours, &theirs).is_none(), "case {n} diverged");
            }
            n += 1;
        }
        (n, n as f64 / started.elapsed().as_secs_f64())
    };
    let (in_process_cases, executions) = in_process(true);
    let (_, ceiling) = in_process(false);
    println!("differential fuzzing, {seconds} s a row, our own implementation as the one asked");
    println!("{:<52} {:>10} {:>12} {:>10}", "row", "cases", "per second", "goal");
    let rows = [
        ("persistent protocol (--serve), files", persistent_cases, persistent, Some(1000.0)),
        ("a process per file, files", per_file_cases, per_file, None),
        ("in this process, one core, executions", in_process_cases, executions, Some(5000.0)),
        ("(machine) making and reading cases, no one asked", 0, ceiling, None),
    ];
    for (name, cases, rate, goal) in rows {
        let cases = if cases == 0 { "-".to_owned() } else { cases.to_string() };
        let goal = goal.map_or_else(String::new, |g| {
            format!("{g:.0} {}", if rate >= g { "met" } else { "MISSED" })
        });
        println!("{name:<52} {cases:>10} {rate:>12.0} {goal:>10}");
    }
    println!(
        "persistent vs a process per file: {:.1}x; in-process vs making and reading alone: {:.2}",
        persistent / per_file.max(1e-9),
        executions / ceiling.max(1e-9)
    );
    let report = serde_json::json!({
        "seconds_per_row": seconds,
        "persistent_files_per_second": persistent,
        "process_per_file_files_per_second": per_file,
        "in_process_executions_per_second": executions,
        "making_and_reading_alone_per_second": ceiling,
        "goals": {"persistent": 1000, "in_process": 5000},
    });
    let out = root.join("target/bench/difffuzz.json");
    let _ = std::fs::create_dir_all(out.parent().expect("a parent"));
    std::fs::write(&out, serde_json::to_string_pretty(&report).expect("json") + "\n")
        .expect("writing the report");
    println!("wrote {}", out.display());
}
