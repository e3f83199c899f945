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
