//! Integration tests of ztensor-conformance.

/// Our own implementation against every fixture of the index.
mod fixtures {
    use std::path::PathBuf;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
    }

    #[test]
    fn the_corpus_is_broad() {
        let entries = ztensor_conformance::index::read(&root()).unwrap();
        let zt: Vec<_> = entries.iter().filter(|e| e.version != "tensorbuffers").collect();
        let rejects = zt.iter().filter(|e| e.expect != "ok").count();
        assert!(zt.len() >= 100, "{} zTensor fixtures", zt.len());
        assert!(rejects >= 40, "{rejects} reject fixtures");
        for version in ["0.1", "1.1", "1.2"] {
            assert!(
                zt.iter().any(|e| e.version == version && e.expect == "ok"),
                "no valid {version} fixture"
            );
            assert!(
                zt.iter().any(|e| e.version == version && e.expect != "ok"),
                "no reject {version} fixture"
            );
        }
        // Every reject names a real rule.
        for e in entries.iter().filter(|e| e.expect != "ok") {
            let known = ztensor_format::ErrorKind::from_id(&e.expect).is_some()
                || ztensor_tensorbuffers::ErrorKind::ALL.iter().any(|k| k.id() == e.expect);
            assert!(known, "{}: unknown rule {}", e.file, e.expect);
        }
    }

    #[test]
    fn our_dump_matches_every_fixture() {
        let entries = ztensor_conformance::index::read(&root()).unwrap();
        let mut failures = Vec::new();
        for e in &entries {
            let path = root().join(&e.file);
            let (dump, accepted) = ztensor_cli::dump::file(&path).unwrap();
            if e.expect == "ok" {
                if !accepted {
                    failures.push(format!("{}: rejected: {dump}", e.file));
                    continue;
                }
                if e.version == "tensorbuffers" || e.file.starts_with("examples/") {
                    continue;
                }
                let golden_path = root().join(ztensor_conformance::dump_path(&e.file));
                let golden: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&golden_path).unwrap()).unwrap();
                if golden != dump {
                    failures.push(format!(
                        "{}: dump differs from {}",
                        e.file,
                        golden_path.display()
                    ));
                }
            } else if accepted {
                failures.push(format!("{}: accepted, expected {}", e.file, e.expect));
            } else if dump["error"]["kind"] != e.expect.as_str() {
                failures.push(format!(
                    "{}: rejected with {}, expected {}",
                    e.file, dump["error"]["kind"], e.expect
                ));
            }
        }
        assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    }
}

/// The runner's grading, on fake implementations that are wrong in known ways.
mod runner {
    use std::path::PathBuf;

    use ztensor_conformance::runner::{Outcome, run, to_json, to_junit, totals};

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
    }

    /// A shell script that prints `stdout` and exits with `status`, whatever file it is given.
    fn fake(name: &str, stdout: &str, status: i32) -> String {
        let dir =
            std::env::temp_dir().join(format!("ztensor-conformance-fakes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        let rejects = results.iter().filter(|r| r.entry.expect != "ok").count();
        assert_eq!((passed, crashed, matched, graded), (rejects, 0, 0, rejects));
        assert_eq!(failed, results.len() - rejects);
        let report = to_json(&results);
        assert_eq!(report["totals"]["rules_graded"], rejects);
        let junit = to_junit(&results);
        assert!(
            junit.contains(&format!("tests=\"{}\"", results.len()))
                && junit.contains("<failure message=")
        );
    }

    #[test]
    fn other_exit_statuses_and_garbage_are_crashes() {
        for command in [fake("crash", "{}", 3), fake("garbage", "not json", 0)] {
            let results = run(&command, &root(), &entries("v1.1/reject/")).unwrap();
            assert!(results.iter().all(|r| matches!(r.outcome, Outcome::Crash(_))), "{command}");
        }
    }
}

/// Committed fuzzer findings (`fuzz/regressions/<target>/*`), replayed through the target's body.
mod fuzz_regressions {
    use std::path::PathBuf;

    #[test]
    fn every_committed_finding_still_passes() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
        let mut count = 0;
        for target in std::fs::read_dir(&root).unwrap() {
            let target = target.unwrap().path();
            let name = target.file_name().unwrap().to_string_lossy().into_owned();
            let body = ztensor_conformance::fuzz::body(&name)
                .unwrap_or_else(|| panic!("no fuzz target {name}"));
            for file in std::fs::read_dir(&target).unwrap() {
                body(&std::fs::read(file.unwrap().path()).unwrap());
                count += 1;
            }
        }
        assert!(count > 0, "no regressions under {}", root.display());
    }

    #[test]
    fn the_fixtures_run_through_every_body() {
        // The fuzz corpora are seeded from the fixtures; every body must accept them all.
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        for entry in ztensor_conformance::index::read(&root).unwrap() {
            let bytes = std::fs::read(root.join(&entry.file)).unwrap();
            for name in ["parse_file", "manifest", "read_any", "tensorbuffers"] {
                (ztensor_conformance::fuzz::body(name).unwrap())(&bytes);
            }
        }
    }
}
