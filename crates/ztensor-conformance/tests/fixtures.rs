use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

#[test]
fn the_corpus_is_broad() {
    let entries = ztensor_conformance::index::read(&root()).unwrap();
    let zt: Vec<_> = entries.iter().filter(|e| e.version != "tensorbuffers").collect();
    let rejects = zt.iter().filter(|e| e.expect != "ok" && !e.implementation_defined()).count();
    assert!(zt.len() >= 100, "{} zTensor fixtures", zt.len());
    assert!(rejects >= 40, "{rejects} reject fixtures");
    for version in ["0.1", "1.1", "1.2"] {
        assert!(
            zt.iter().any(|e| e.version == version && e.expect == "ok"),
            "no valid {version} fixture"
        );
        assert!(
            zt.iter()
                .any(|e| e.version == version && e.expect != "ok" && !e.implementation_defined()),
            "no reject {version} fixture"
        );
        assert!(
            zt.iter().any(|e| e.version == version && e.implementation_defined()),
            "no implementation-defined {version} fixture"
        );
    }
    // Every implementation-defined file lies in its own directory; a strict rule, where
    // named, is one the table marks strict-only.
    for e in entries.iter().filter(|e| e.implementation_defined()) {
        assert!(e.file.contains("/implementation-defined/"), "{}", e.file);
        if let Some(rule) = &e.strict {
            let kind = ztensor_format::ErrorKind::from_id(rule).unwrap();
            assert!(kind.strict_only(), "{}: {rule} is enforced always", e.file);
        }
    }
    // Every reject names a real rule.
    for e in entries.iter().filter(|e| e.expect != "ok" && !e.implementation_defined()) {
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
        let (dump, accepted) = ztensor_dump::file(&path).unwrap();
        if e.expect == "ok" || e.implementation_defined() {
            if !accepted {
                failures.push(format!("{}: rejected: {dump}", e.file));
                continue;
            }
            let golden_path = root().join(ztensor_conformance::dump_path(&e.file));
            let golden: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&golden_path).unwrap()).unwrap();
            if golden != dump {
                failures.push(format!("{}: dump differs from {}", e.file, golden_path.display()));
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
