use std::path::PathBuf;

use ztensor_conformance::runner::{Outcome, defined_totals, run, to_json, to_junit, totals};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A shell script that prints `stdout` and exits with `status`, whatever file it is given.
fn fake(name: &str, stdout: &str, status: i32) -> String {
    // One directory for the binary's fakes, kept while it runs (a static is never dropped).
    static DIR: std::sync::OnceLock<ztensor_testkit::Scratch> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| ztensor_testkit::scratch("conformance-fakes"));
    let path = dir.join(format!("{name}.sh"));
    std::fs::write(&path, format!("#!/bin/sh\ncat <<'JSON'\n{stdout}\nJSON\nexit {status}\n"))
        .unwrap();
    format!("sh {}", path.display())
}

fn entries(prefix: &str) -> Vec<ztensor_conformance::index::Entry> {
    let mut e = ztensor_conformance::index::read(&root()).unwrap();
    e.retain(|e| e.file.starts_with(prefix));
    e
}

#[test]
fn accepting_everything_fails_every_reject_and_wrong_content() {
    let empty = r#"{"dump":"ztensor-dump/1","container":"zt-1.2","version":"1.2.0","attributes":null,"objects":[]}"#;
    let command = fake("accept-all", empty, 0);
    let rejects = entries("v1.2/reject/");
    let results = run(&command, &root(), &rejects).unwrap();
    assert!(!results.is_empty());
    assert!(results.iter().all(|r| matches!(r.outcome, Outcome::Fail(_))));
    // The one valid 1.2 file with no objects passes; others report the wrong content.
    let valid = entries("v1.2/valid/");
    let results = run(&command, &root(), &valid).unwrap();
    let passed: Vec<&str> = results
        .iter()
        .filter(|r| r.outcome == Outcome::Pass)
        .map(|r| r.entry.file.as_str())
        .collect();
    assert_eq!(passed, ["v1.2/valid/no-objects.zt"]);
}

#[test]
fn rejecting_with_other_names_passes_rejects_without_rule_matches() {
    let command = fake(
        "reject-all",
        r#"{"dump":"ztensor-dump/1","error":{"kind":"their_rule","message":"no"}}"#,
        1,
    );
    let results = run(&command, &root(), &entries("v0.1/")).unwrap();
    let (passed, failed, crashed, matched, graded) = totals(&results);
    let defined = results.iter().filter(|r| r.entry.implementation_defined()).count();
    let rejects = results.iter().filter(|r| r.entry.expect != "ok").count() - defined;
    assert_eq!((passed, crashed, matched, graded), (rejects, 0, 0, rejects));
    assert_eq!(failed, results.len() - rejects - defined);
    // Implementation-defined files rejected are reported apart, never as failures.
    assert!(defined >= 3);
    assert_eq!(defined_totals(&results), (0, defined));
    let report = to_json(&results);
    assert_eq!(report["totals"]["rules_graded"], rejects);
    let junit = to_junit(&results);
    assert!(
        junit.contains(&format!("tests=\"{}\"", results.len()))
            && junit.contains("<failure message=")
    );
}

#[test]
fn implementation_defined_files_accepted_must_still_report_their_content() {
    let ours = format!("{} dump", env!("CARGO_BIN_EXE_ztensor-conformance"));
    let defined = entries("v1.2/implementation-defined/");
    let results = run(&ours, &root(), &defined).unwrap();
    assert!(results.iter().all(|r| r.outcome == Outcome::Accepted), "{results:?}");
    // Accepting with other content is a failure even here.
    let empty = r#"{"dump":"ztensor-dump/1","container":"zt-1.2","version":"1.2.0","attributes":null,"objects":[]}"#;
    let results = run(&fake("accept-empty", empty, 0), &root(), &defined).unwrap();
    assert!(results.iter().all(|r| matches!(r.outcome, Outcome::Fail(_))), "{results:?}");
}

#[test]
fn other_exit_statuses_and_garbage_are_crashes() {
    for command in [fake("crash", "{}", 3), fake("garbage", "not json", 0)] {
        let results = run(&command, &root(), &entries("v1.1/reject/")).unwrap();
        assert!(results.iter().all(|r| matches!(r.outcome, Outcome::Crash(_))), "{command}");
    }
}
