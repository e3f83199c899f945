//! Integration tests of ztensor-conformance.

/// Live heap bytes counted, so the fuzz bodies' amplification oracle runs here as in the fuzz
/// targets.
#[global_allocator]
static HEAP: ztensor_conformance::heap::Counting = ztensor_conformance::heap::Counting;

mod corpus;
mod recipes;
mod remote;

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
        let rejects = zt.iter().filter(|e| e.expect != "ok" && !e.implementation_defined()).count();
        assert!(zt.len() >= 100, "{} zTensor fixtures", zt.len());
        assert!(rejects >= 40, "{rejects} reject fixtures");
        for version in ["0.1", "1.1", "1.2"] {
            assert!(
                zt.iter().any(|e| e.version == version && e.expect == "ok"),
                "no valid {version} fixture"
            );
            assert!(
                zt.iter().any(|e| e.version == version
                    && e.expect != "ok"
                    && !e.implementation_defined()),
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
    fn every_fuzz_target_file_has_a_body_and_every_body_a_file() {
        // `cargo xtask fuzz-smoke` runs the files of fuzz/fuzz_targets; the bodies live here.
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/fuzz_targets");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".rs").map(str::to_owned))
            .collect();
        files.sort();
        let mut bodies: Vec<&str> = ztensor_conformance::fuzz::TARGETS.to_vec();
        bodies.sort_unstable();
        assert_eq!(files, bodies);
    }

    #[test]
    fn the_fixtures_run_through_every_body() {
        // The fuzz corpora are seeded from the fixtures; every body must accept them all.
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        for entry in ztensor_conformance::index::read(&root).unwrap() {
            let bytes = std::fs::read(root.join(&entry.file)).unwrap();
            for name in ztensor_conformance::fuzz::TARGETS {
                (ztensor_conformance::fuzz::body(name).unwrap())(&bytes);
            }
        }
        // The DCP checkpoints seed the `dcp` target: their `.metadata` reads, within what the
        // oracle allows, and the oracle sees this binary's heap (it counts here too).
        assert!(ztensor_conformance::heap::counting(), "the test binary counts its heap");
        for dir in ["native", "native-zstd"] {
            let bytes =
                std::fs::read(root.join("external/dcp").join(dir).join(".metadata")).unwrap();
            ztensor_conformance::fuzz::dcp(&bytes);
            assert!(ztensor_foreign::dcp::read_layout(&bytes).is_ok(), "{dir}");
        }
        let (_, held) = ztensor_conformance::heap::peak_during(|| {
            std::hint::black_box(vec![1u8; 8 << 20]).len()
        });
        assert!(held >= 8 << 20, "{held}");
        // A flood of empty dicts as large as the oracle's allowance would take is refused by
        // the machine's budget before it holds more.
        let mut flood = vec![0x80, 2];
        flood.resize(4 << 20, b'}');
        flood.push(b'.');
        let (refused, held) = ztensor_conformance::heap::peak_during(|| {
            ztensor_foreign::dcp::read_layout(&flood).is_err()
        });
        assert!(refused && held <= ztensor_conformance::fuzz::dcp_allowed(flood.len()), "{held}");
        // The zTensor 2 corpus seeds the `ztensor2` target.
        for dir in ["valid", "reject"] {
            for entry in std::fs::read_dir(root.join("external/ztensor2").join(dir)).unwrap() {
                let bytes = std::fs::read(entry.unwrap().path()).unwrap();
                ztensor_conformance::fuzz::ztensor2(&bytes);
            }
        }
    }
}

/// Properties over generated models (`ztensor_conformance::model`, the generator the
/// `roundtrip` fuzz target also uses).
mod properties {
    use proptest::prelude::*;
    use ztensor_conformance::model::{Expect, Kind, Model, ObjectSpec, check, check_bytes};
    use ztensor_format::{DType, DigestAlgorithm, Options, Version};
    use ztensor_io::{
        Chunked, Compression, CopyOptions, DigestChoice, Reader, WriteOptions, Writer, copy_all,
    };
    use ztensor_par::{ParOptions, repack};

    fn model() -> impl Strategy<Value = Model> {
        proptest::collection::vec(any::<u8>(), 0..160).prop_map(|b| Model::from_bytes(&b))
    }

    fn written(model: &Model) -> (Vec<u8>, Vec<Expect>) {
        model.write().unwrap_or_else(|e| panic!("the writer refused {model:?}: {e}"))
    }

    /// Through a byte slice, a one-byte-at-a-time source, a file and a memory map.
    fn every_source(file: &[u8], expect: &[Expect]) -> Result<(), TestCaseError> {
        check_bytes(file, expect).map_err(TestCaseError::fail)?;
        check_bytes(Chunked::new(file, 1), expect).map_err(TestCaseError::fail)?;
        // One directory for every case (files named by content), kept while the binary runs.
        static DIR: std::sync::OnceLock<ztensor_testkit::Scratch> = std::sync::OnceLock::new();
        let dir = DIR.get_or_init(|| ztensor_testkit::scratch("conformance"));
        let path = dir.join(format!("{}.zt", &ztensor_io::codec::sha256_hex(file)[..16]));
        std::fs::write(&path, file).unwrap();
        let strict = Options::strict();
        check(&Reader::open_with(&path, &strict).unwrap(), expect).map_err(TestCaseError::fail)?;
        // SAFETY: the test owns the file and does not change it while it is mapped.
        let mapped = unsafe { Reader::open_mmap(&path, &strict) }.unwrap();
        check(&mapped, expect).map_err(TestCaseError::fail)?;
        drop(mapped);
        std::fs::remove_file(&path).unwrap();
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Write → read identity for every version, through every kind of source.
        #[test]
        fn write_then_read_gives_back_the_model(model in model()) {
            let (file, expect) = written(&model);
            every_source(&file, &expect)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Repacking a generated file on 1–4 threads writes the bytes of the sequential copy,
        /// whatever the objects' kinds (sparse and quantized ones included) and target version.
        #[test]
        fn parallel_repack_equals_sequential_copy(
            model in model(),
            to in proptest::sample::select(vec![Version::V0_1, Version::V1_1, Version::V1_2]),
            zstd in any::<bool>(),
        ) {
            // Only what the target version can represent.
            let mut model = model;
            let logical = ztensor_conformance::model::logical_types(to);
            model.objects.retain(|o| match &o.kind {
                Kind::Quantized => to != Version::V0_1,
                Kind::Logical(t) => logical.contains(t),
                _ => true,
            });
            let (file, _) = written(&model);
            let reader = Reader::new(&file[..], &Options::default()).unwrap();
            let copy = CopyOptions {
                compression: zstd.then_some(Compression::Zstd(3)),
                digest: if zstd { DigestChoice::Set(DigestAlgorithm::Blake3) } else { DigestChoice::Keep },
                chunk_size: Some(100),
                drop_attributes: false,
                raw_if_not_smaller: zstd,
            };
            let mut sequential = Writer::new(Vec::new(), to).unwrap();
            copy_all(&reader, &mut sequential, &copy).unwrap();
            let expected = sequential.finish().unwrap().0;
            for threads in 1..=4 {
                let mut parallel = Writer::new(Vec::new(), to).unwrap();
                let par = ParOptions { threads, memory_budget: 256 };
                repack(&reader, &mut parallel, &copy, &par, &()).unwrap();
                prop_assert_eq!(&parallel.finish().unwrap().0, &expected, "threads {}", threads);
            }
        }
    }

    /// Every version × dtype × encoding × digest × object format, exhaustively (the properties
    /// above sample the same space with random shapes and mixes).
    #[test]
    fn every_version_dtype_encoding_digest_and_format() {
        let digests = [
            None,
            Some(DigestAlgorithm::Crc32c),
            Some(DigestAlgorithm::Sha256),
            Some(DigestAlgorithm::Blake3),
        ];
        let mut combinations = 0;
        for version in [Version::V0_1, Version::V1_1, Version::V1_2] {
            for compression in [Compression::Raw, Compression::Zstd(1)] {
                for digest in &digests {
                    // A 16-byte chunk splits most components into several frames.
                    let options = WriteOptions {
                        compression,
                        digest: digest.clone(),
                        chunk_size: Some(16),
                        raw_if_not_smaller: false,
                    };
                    let object = |kind, shape: &[u64], seed| ObjectSpec {
                        kind,
                        shape: shape.to_vec(),
                        seed,
                        options: options.clone(),
                    };
                    let mut objects = Vec::new();
                    for (i, dtype) in DType::ALL.into_iter().enumerate() {
                        let seed = i as u64;
                        objects.push(object(Kind::Dense(dtype), &[2, 3], seed));
                        objects.push(object(Kind::Csr(dtype), &[3, 4], seed));
                        objects.push(object(Kind::Coo(dtype), &[3, 2], seed + 1));
                    }
                    if version != Version::V0_1 {
                        objects.push(object(Kind::Quantized, &[], 7));
                        for t in ztensor_conformance::model::logical_types(version) {
                            objects.push(object(Kind::Logical(t.clone()), &[2, 2], 3));
                        }
                    }
                    combinations += objects.len();
                    let (file, expect) = written(&Model { version, objects });
                    check_bytes(&file[..], &expect).unwrap();
                }
            }
        }
        // 3 versions × 2 encodings × 4 digests × (13 dtypes × 3 formats), plus quantized and the
        // logical types of 1.1 (4) and 1.2 (6).
        assert_eq!(combinations, 3 * 2 * 4 * 39 + 2 * 4 * (1 + 4) + 2 * 4 * (1 + 6));
    }
}

/// The frozen files of other producers and the writer check.
mod producers_and_writers {
    use std::path::{Path, PathBuf};

    use ztensor_conformance::writer_check::{self, Read, Written};

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
    }

    fn this() -> &'static str {
        env!("CARGO_BIN_EXE_ztensor-conformance")
    }

    fn scratch(name: &str) -> ztensor_testkit::Scratch {
        ztensor_testkit::scratch(&format!("wc-{name}"))
    }

    #[test]
    fn frozen_files_never_change_and_name_their_producer() {
        let entries = ztensor_conformance::index::read_all(&root()).unwrap();
        let frozen: Vec<_> = entries.iter().filter(|e| e.producer.is_some()).collect();
        assert!(frozen.len() >= 20, "{} frozen files", frozen.len());
        for version in ["0.1", "1.1", "1.2"] {
            assert!(frozen.iter().any(|e| e.version == version), "no frozen {version} file");
        }
        for e in &frozen {
            let bytes = std::fs::read(root().join(&e.file)).unwrap();
            assert_eq!(
                Some(ztensor_io::codec::sha256_hex(&bytes)),
                e.sha256,
                "{} changed: frozen files never change",
                e.file
            );
            assert!(e.file.starts_with("producers/"), "{}", e.file);
            assert_eq!(e.expect, "ok");
        }
        // And our reader agrees with their golden dumps.
        let results =
            ztensor_conformance::runner::run(&format!("{} dump", this()), &root(), &entries)
                .unwrap();
        assert!(results.iter().all(|r| !r.outcome.is_failure()), "{results:?}");
    }

    /// A script that runs `body` with the recipe as $1 and the output as $2.
    fn writer(dir: &Path, name: &str, body: &str) -> String {
        let path = dir.join(format!("{name}.sh"));
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        format!("sh {}", path.display())
    }

    #[test]
    fn our_writer_passes_every_recipe_and_our_readers_accept_it() {
        let dir = scratch("ours");
        let readers = vec![
            ("ours".to_owned(), format!("{} dump", this())),
            ("strict".to_owned(), format!("{} dump --strict", this())),
        ];
        let recipes = writer_check::recipes();
        assert!(recipes.len() >= 20);
        let results =
            writer_check::run(&format!("{} write", this()), &recipes, &dir, &readers).unwrap();
        for r in &results {
            assert_eq!(r.written, Written::Pass, "{}", r.recipe.file_stem());
            assert!(r.readers.iter().all(|(_, v)| *v == Read::Accepts), "{r:?}");
        }
    }

    #[test]
    fn the_writer_check_catches_what_a_writer_gets_wrong() {
        let dir = scratch("wrong");
        let recipes: Vec<_> = writer_check::recipes()
            .into_iter()
            .filter(|r| r.file_stem() == "v1.2/zstd" || r.file_stem() == "v1.1/dense-dtypes")
            .collect();
        assert_eq!(recipes.len(), 2);
        let ours = this();
        let cases = [
            // Non-zero padding after the magic.
            (
                "padding",
                format!(
                    "{ours} write \"$1\" \"$2\" && printf '\\252' | dd of=\"$2\" bs=1 seek=9 conv=notrunc 2>/dev/null"
                ),
                "padding",
            ),
            // Some other valid file, whatever the recipe.
            (
                "other-content",
                format!("cp {} \"$2\"", root().join("v1.2/valid/zstd.zt").display()),
                "",
            ),
            // A version string of another minor (read leniently as the recipe's version).
            (
                "old-minor",
                format!("{ours} write \"$1\" \"$2\" && sed -i 's/1\\.[12]\\.0/1.0.0/' \"$2\""),
                "version",
            ),
            // A flipped data byte: the file no longer holds the recipe's bytes (or breaks a rule).
            (
                "flipped",
                format!(
                    "{ours} write \"$1\" \"$2\" && printf '\\001' | dd of=\"$2\" bs=1 seek=64 conv=notrunc 2>/dev/null"
                ),
                "",
            ),
        ];
        for (name, body, words) in cases {
            let results =
                writer_check::run(&writer(&dir, name, &body), &recipes, &dir, &[]).unwrap();
            for r in &results {
                let Written::Fail(why) = &r.written else {
                    panic!("{name} {}: {:?}", r.recipe.file_stem(), r.written)
                };
                assert!(why.contains(words), "{name}: {why}");
            }
        }
        let unsupported =
            writer_check::run(&writer(&dir, "unsupported", "exit 3"), &recipes, &dir, &[]).unwrap();
        assert!(unsupported.iter().all(|r| matches!(r.written, Written::Unsupported(_))));
        let crash =
            writer_check::run(&writer(&dir, "crash", "exit 7"), &recipes, &dir, &[]).unwrap();
        assert!(crash.iter().all(|r| matches!(r.written, Written::Crash(_))));
        let silent =
            writer_check::run(&writer(&dir, "silent", "exit 0"), &recipes, &dir, &[]).unwrap();
        assert!(silent.iter().all(|r| matches!(r.written, Written::Crash(_))));
    }

    /// The same for zTensor 2 recipes: padding, another file, a flipped blob byte, a 1.2 file,
    /// parts without digests.
    #[test]
    fn the_writer_check_catches_what_a_zt2_writer_gets_wrong() {
        let dir = scratch("wrong-2");
        let recipes: Vec<_> = writer_check::recipes()
            .into_iter()
            .filter(|r| r.file_stem() == "v2/zstd" || r.file_stem() == "v2/dense-dtypes")
            .collect();
        assert_eq!(recipes.len(), 2);
        let ours = this();
        let corpus = root().join("external/ztensor2/valid");
        let cases = [
            (
                "padding",
                format!(
                    "{ours} write \"$1\" \"$2\" && printf '\\252' | dd of=\"$2\" bs=1 seek=9 conv=notrunc 2>/dev/null"
                ),
                "padding",
            ),
            (
                "other-content",
                format!("cp {} \"$2\"", corpus.join("canonical-basic.zt").display()),
                "content",
            ),
            (
                "flipped",
                format!(
                    "{ours} write \"$1\" \"$2\" && printf '\\001' | dd of=\"$2\" bs=1 seek=65536 conv=notrunc 2>/dev/null"
                ),
                "invalid",
            ),
            (
                "one-point-two",
                format!("cp {} \"$2\"", root().join("v1.2/valid/zstd.zt").display()),
                "invalid",
            ),
            ("no-digests", format!("cp {} \"$2\"", corpus.join("minimal.zt").display()), "digest"),
        ];
        for (name, body, words) in cases {
            let results =
                writer_check::run(&writer(&dir, name, &body), &recipes, &dir, &[]).unwrap();
            for r in &results {
                let Written::Fail(why) = &r.written else {
                    panic!("{name} {}: {:?}", r.recipe.file_stem(), r.written)
                };
                assert!(why.contains(words), "{name}: {why}");
            }
        }
    }

    #[test]
    fn the_committed_matrix_is_current_for_our_implementation() {
        let out = std::process::Command::new(this())
            .args(["matrix", "--check"])
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Differential fuzzing (`ztensor-conformance fuzz`): an implementation with a planted bug of
/// each class (`tests/planted/planted.py`, a wrapper over our own dump) is found out and its
/// cases reduced; our own implementation against itself gives nothing; usage errors are told
/// at once.
mod difffuzz {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value as Json;
    use ztensor_conformance::difffuzz::Recipe;

    fn bin() -> &'static str {
        env!("CARGO_BIN_EXE_ztensor-conformance")
    }

    fn planted() -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/planted/planted.py");
        format!("python3 {} {} dump", script.display(), bin())
    }

    /// A path not yet made (the fuzzer makes its `--out`) in a fresh scratch directory, and the
    /// directory, removed when dropped.
    fn scratch(name: &str) -> (ztensor_testkit::Scratch, PathBuf) {
        let dir = ztensor_testkit::scratch(&format!("difffuzz-{name}"));
        let out = dir.join("out");
        (dir, out)
    }

    /// Runs `fuzz` with `args`: (exit status, stdout, stderr).
    fn fuzz(args: &[&str]) -> (i32, String, String) {
        let out = Command::new(bin()).arg("fuzz").args(args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    }

    /// Whether process `pid` has ended (gone, or a zombie waiting to be reaped).
    fn ended(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z'))
        })
    }

    /// Ctrl-C (SIGINT) while an implementation hangs: the fuzzer kills the implementation's
    /// process group (the command and what it started) before it exits with 130; they are
    /// not in the terminal's foreground group, so nothing else would.
    #[test]
    fn an_interrupted_fuzzer_leaves_no_implementation_running() {
        let (_scratch, dir) = scratch("interrupt");
        std::fs::create_dir_all(&dir).unwrap();
        let pids = dir.join("pids");
        let script = dir.join("hang.sh");
        let body = format!(
            "#!/bin/sh\nsleep 600 &\necho $! >> {p}\necho $$ >> {p}\nwait\n",
            p = pids.display()
        );
        std::fs::write(&script, body).unwrap();
        Command::new("chmod").arg("755").arg(&script).status().unwrap();
        let mut fuzzer = Command::new(bin())
            .args(["fuzz", "--impl", script.to_str().unwrap(), "--runs", "5", "--timeout", "120"])
            .arg("--out")
            .arg(dir.join("out"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let recorded = loop {
            let text = std::fs::read_to_string(&pids).unwrap_or_default();
            let recorded: Vec<String> = text.lines().map(str::to_owned).collect();
            if recorded.len() >= 2 {
                break recorded;
            }
            assert!(started.elapsed().as_secs() < 60, "the implementation never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(recorded.iter().all(|pid| !ended(pid)), "running before the signal");
        Command::new("kill").args(["-s", "INT", &fuzzer.id().to_string()]).status().unwrap();
        let status = loop {
            if let Some(status) = fuzzer.try_wait().unwrap() {
                break status;
            }
            assert!(started.elapsed().as_secs() < 90, "the fuzzer did not stop");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(130));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for pid in &recorded {
            while !ended(pid) {
                assert!(std::time::Instant::now() < deadline, "process {pid} outlived the fuzzer");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Our lenient reader in this process with two planted bugs: a panic on an attribute key
    /// "名前", and f16 data of rank-2 objects reported as bf16.
    struct PlantedInProcess(ztensor_conformance::difffuzz::OursInProcess);

    fn has_rare_key(value: &Json) -> bool {
        match value {
            Json::Object(map) => map.contains_key("名前") || map.values().any(has_rare_key),
            Json::Array(items) => items.iter().any(has_rare_key),
            _ => false,
        }
    }

    impl ztensor_conformance::difffuzz::InProcess for PlantedInProcess {
        fn read(&mut self, bytes: &[u8]) -> ztensor_conformance::implementation::Verdict {
            use ztensor_conformance::implementation::Verdict;
            match self.0.read(bytes) {
                Verdict::Accepted(mut dump) => {
                    assert!(!has_rare_key(&dump), "a planted panic");
                    for o in dump["objects"].as_array_mut().into_iter().flatten() {
                        if o["shape"].as_array().is_some_and(|s| s.len() == 2) {
                            for c in o["components"].as_object_mut().into_iter().flatten() {
                                if c.1["dtype"] == "f16" {
                                    c.1["dtype"] = "bf16".into();
                                }
                            }
                        }
                    }
                    Verdict::Accepted(dump)
                }
                other => other,
            }
        }
    }

    /// In-process fuzzing (`difffuzz::run_in_process`, what a Rust implementation or a
    /// reference adapter built with `in-process` uses): the planted panic is a crash with its
    /// message, the planted misreading is found and reduced; ours against itself gives nothing.
    #[test]
    fn in_process_fuzzing_finds_the_planted_bugs() {
        use ztensor_conformance::difffuzz::{self, Budget, Config, OursInProcess};
        let mut config = Config::new("planted, in process");
        config.budget = Budget::Runs(1200);
        config.minimize_seconds = 5.0;
        let mut planted = PlantedInProcess(OursInProcess { chunk: None });
        let report = difffuzz::run_in_process(&config, &mut planted, |_, _| {}).unwrap();
        let json = difffuzz::to_json(&report);
        assert_eq!(json["in_process"], true);
        assert!(difffuzz::table(&report).contains("in this process"));
        for class in ["crash", "misreads"] {
            assert!(json["by_class"][class].as_u64().unwrap() >= 1, "{class} not found: {json}");
        }
        for class in ["hang", "accepts-invalid", "rejects-valid"] {
            assert_eq!(json["by_class"][class], 0, "{json}");
        }
        let crash = report.findings.iter().find(|f| f.divergence.class.name() == "crash").unwrap();
        assert!(
            crash.detail.contains("a planted panic")
                || crash.judged.theirs.to_string().contains("a planted panic"),
            "{}",
            crash.judged.theirs
        );
        let misread =
            report.findings.iter().find(|f| f.divergence.class.name() == "misreads").unwrap();
        assert!(misread.recipe.mutations.len() <= 1, "not reduced: {:?}", misread.recipe);
        config.budget = Budget::Runs(400);
        let clean =
            difffuzz::run_in_process(&config, &mut OursInProcess { chunk: Some(7) }, |_, _| {})
                .unwrap();
        assert!(clean.findings.is_empty(), "{}", difffuzz::table(&clean));
        assert_eq!(clean.cases, 400);
    }

    #[test]
    fn every_planted_bug_is_found_and_reduced() {
        let (_scratch, out) = scratch("planted");
        let command = planted();
        let (status, stdout, stderr) = fuzz(&[
            "--impl",
            &command,
            "--runs",
            "1200",
            "--seed",
            "0",
            // Long enough that a file read on a loaded machine is not taken for the planted
            // hang, short enough that each case of the hang is cut soon.
            "--timeout",
            "3",
            "--minimize-seconds",
            "8",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(status, 1, "{stderr}");
        let report: Json = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["persistent"], true, "the wrapper speaks --serve");
        for class in ["crash", "hang", "accepts-invalid", "misreads"] {
            assert!(
                report["by_class"][class].as_u64().unwrap() >= 1,
                "{class} not found: {stdout}"
            );
        }
        // Nothing it does is a refusal of a valid file.
        assert_eq!(report["by_class"]["rejects-valid"], 0, "{stdout}");
        let findings = report["findings"].as_array().unwrap();
        for f in findings {
            // Each reported case is on disk, and its recipe makes it again byte for byte.
            let file = PathBuf::from(f["file"].as_str().unwrap());
            let recipe: Recipe = serde_json::from_value(f["recipe"].clone()).unwrap();
            assert_eq!(recipe.build().unwrap(), std::fs::read(&file).unwrap());
            assert!(file.with_extension("json").exists());
            let class = f["class"].as_str().unwrap();
            assert!(file.starts_with(out.join(class)), "{}", file.display());
            // Reduced to what the bug needs: one duplicated key, one rare attribute, and no
            // change at all for a shape or a dtype the generator makes by itself.
            let changes = recipe.mutations.len();
            match class {
                "accepts-invalid" => {
                    assert_eq!(f["key"], "cbor_duplicate_key");
                    assert_eq!(changes, 1, "{f}");
                }
                "crash" => assert_eq!(changes, 1, "{f}"),
                "hang" => assert_eq!(changes, 0, "{f}"),
                "misreads" => assert!(f["key"].as_str().unwrap().ends_with(".dtype"), "{f}"),
                other => panic!("{other}: {f}"),
            }
        }
        // The reduced hang and crash, read again one process a file: the same classes (the
        // hang's process group killed at the timeout).
        for class in ["hang", "crash"] {
            let f = findings.iter().find(|f| f["class"] == class).unwrap();
            let seed = f["recipe"]["seed"].as_u64().unwrap().to_string();
            let (_again, again) = scratch(&format!("again-{class}"));
            let (status, stdout, _) = fuzz(&[
                "--impl",
                &command,
                "--runs",
                "1",
                "--seed",
                &seed,
                "--timeout",
                // A process a file starts an interpreter each time: the crash gets room for
                // that on a loaded machine; the hang is cut short.
                if class == "hang" { "1" } else { "10" },
                "--minimize-seconds",
                "0",
                "--process-per-file",
                "--out",
                again.to_str().unwrap(),
                "--json",
            ]);
            assert_eq!(status, 1);
            let report: Json = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["persistent"], false);
            assert_eq!(report["by_class"][class], 1, "{stdout}");
            let _ = std::fs::remove_dir_all(again);
        }
        // The summary files are beside the findings.
        for name in ["summary.json", "summary.txt", "junit.xml"] {
            assert!(out.join(name).exists(), "{name}");
        }
        let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
        assert!(junit.contains("<failure"), "{junit}");
        let _ = std::fs::remove_dir_all(out);
    }

    #[test]
    fn our_own_implementation_gives_nothing() {
        let command = format!("{} dump", bin());
        for mode in [&[][..], &["--process-per-file"][..]] {
            let runs = if mode.is_empty() { "1500" } else { "150" };
            let mut args = vec!["--impl", &command, "--runs", runs, "--seed", "7", "--json"];
            args.extend_from_slice(mode);
            let (status, stdout, stderr) = fuzz(&args);
            assert_eq!(status, 0, "{stdout}{stderr}");
            let report: Json = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["cases"], runs.parse::<u64>().unwrap());
            assert_eq!(report["findings"].as_array().unwrap().len(), 0);
            assert_eq!(report["persistent"], mode.is_empty());
        }
    }

    /// Writer mode: a writer with planted bugs (`tests/planted/planted_writer.py`, over our
    /// own writer) is found out, each finding with the recipe it was given; ours is not.
    #[test]
    fn writers_are_fuzzed_too() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/planted/planted_writer.py");
        let planted = format!("python3 {} {} write", script.display(), bin());
        let (_scratch, out) = scratch("writer");
        let dir = out.to_str().unwrap();
        // A process per case (Python and our writer, about 0.1 s here): few cases, short
        // reductions.
        let args = ["--writer", "--impl", &planted, "--runs", "60", "--seed", "0"];
        let (status, stdout, stderr) = fuzz(
            &[&args[..], &["--timeout", "10", "--minimize-seconds", "3", "--out", dir, "--json"]]
                .concat(),
        );
        assert_eq!(status, 1, "{stderr}");
        let report: Json = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["writer"], true);
        assert!(report["by_class"]["writes-invalid"].as_u64().unwrap() >= 1, "{stdout}");
        assert!(report["by_class"]["crash"].as_u64().unwrap() >= 1, "{stdout}");
        for class in ["hang", "accepts-invalid", "rejects-valid", "misreads"] {
            assert_eq!(report["by_class"][class], 0, "{class}: {stdout}");
        }
        for f in report["findings"].as_array().unwrap() {
            // The recipe the writer was given is kept beside what it wrote, and says what
            // set the bug off.
            let recipe_file = PathBuf::from(f["writer_recipe"].as_str().unwrap());
            let recipe: Json =
                serde_json::from_slice(&std::fs::read(&recipe_file).unwrap()).unwrap();
            let objects = recipe["objects"].as_array().unwrap();
            match f["class"].as_str().unwrap() {
                "writes-invalid" => {
                    assert!(objects.iter().any(|o| o["format"] == "sparse_coo"), "{recipe}");
                    assert!(std::fs::metadata(f["file"].as_str().unwrap()).unwrap().len() > 64);
                }
                "crash" => {
                    let bools = objects.iter().any(|o| {
                        o["components"].as_object().unwrap().values().any(|c| c["dtype"] == "bool")
                    });
                    assert!(bools, "{recipe}");
                }
                other => panic!("{other}"),
            }
        }
        let _ = std::fs::remove_dir_all(&out);
        let ours = format!("{} write", bin());
        let (status, stdout, stderr) =
            fuzz(&["--writer", "--impl", &ours, "--runs", "300", "--seed", "3", "--json"]);
        assert_eq!(status, 0, "{stdout}{stderr}");
        let report: Json = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["cases"], 300);
    }

    /// zTensor 2 (`--version 2`): our own reader against itself gives nothing, through
    /// `--serve` and a process a file; the implementation with planted bugs (its bugs are in
    /// the dump, whatever the version) is found out on zTensor 2 files, each finding made
    /// again from its recipe and from its seed; `fuzz --help` names the version.
    #[test]
    fn zt2_is_fuzzed_as_1x_is() {
        let (status, help, _) = fuzz(&["--help"]);
        assert_eq!(status, 0);
        assert!(help.contains("0.1, 1.1, 1.2, or 2"), "{help}");
        let command = format!("{} dump", bin());
        for mode in [&[][..], &["--process-per-file"][..]] {
            let runs = if mode.is_empty() { "1500" } else { "150" };
            let mut args =
                vec!["--impl", &command, "--version", "2", "--runs", runs, "--seed", "9", "--json"];
            args.extend_from_slice(mode);
            let (status, stdout, stderr) = fuzz(&args);
            assert_eq!(status, 0, "{stdout}{stderr}");
            let report: Json = serde_json::from_str(&stdout).unwrap();
            assert_eq!(report["cases"], runs.parse::<u64>().unwrap());
            assert_eq!(report["versions"], serde_json::json!(["2"]));
        }
        let (_scratch, out) = scratch("zt2-planted");
        let (status, stdout, stderr) = fuzz(&[
            "--impl",
            &planted(),
            "--version",
            "2",
            "--runs",
            "1200",
            "--timeout",
            "3",
            "--minimize-seconds",
            "8",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(status, 1, "{stderr}");
        let report: Json = serde_json::from_str(&stdout).unwrap();
        for class in ["crash", "hang", "accepts-invalid", "misreads"] {
            assert!(report["by_class"][class].as_u64().unwrap() >= 1, "{class}: {stdout}");
        }
        assert_eq!(report["by_class"]["rejects-valid"], 0, "{stdout}");
        for f in report["findings"].as_array().unwrap() {
            let file = PathBuf::from(f["file"].as_str().unwrap());
            let recipe: Recipe = serde_json::from_value(f["recipe"].clone()).unwrap();
            assert!(recipe.zt2.is_some(), "{f}");
            let bytes = std::fs::read(&file).unwrap();
            assert_eq!(recipe.build().unwrap(), bytes);
            assert!(bytes.starts_with(b"\x89ZT2") || f["class"] != "misreads", "{f}");
            assert!(f["regenerate"].as_str().unwrap().ends_with("--version 2"), "{f}");
            if f["class"] == "accepts-invalid" {
                assert_eq!(f["key"], "cbor_duplicate_key", "{f}");
            }
        }
        // The crash's seed makes its case again (unreduced), with the version named.
        let crash = report["findings"].as_array().unwrap().iter().find(|f| f["class"] == "crash");
        let seed = crash.unwrap()["recipe"]["seed"].as_u64().unwrap().to_string();
        let (status, stdout, _) = fuzz(&[
            "--impl",
            &planted(),
            "--version",
            "2",
            "--seed",
            &seed,
            "--runs",
            "1",
            "--minimize-seconds",
            "0",
            "--json",
        ]);
        assert_eq!(status, 1, "{stdout}");
        let again: Json = serde_json::from_str(&stdout).unwrap();
        assert_eq!(again["by_class"]["crash"], 1, "{stdout}");
        let _ = std::fs::remove_dir_all(out);
    }

    #[test]
    fn usage_errors_are_told_at_once() {
        let started = std::time::Instant::now();
        let (status, _, stderr) = fuzz(&["--impl", "/no/such/implementation", "--runs", "5"]);
        assert_eq!(status, 2);
        assert!(stderr.contains("cannot run"), "{stderr}");
        // A command that answers with something other than a dump does not speak the protocol.
        let (status, _, stderr) = fuzz(&["--impl", "echo hello", "--runs", "5"]);
        assert_eq!(status, 2);
        assert!(stderr.contains("does not speak the reading protocol"), "{stderr}");
        assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
        // An output directory that holds something is not overwritten without --force.
        let (_scratch, out) = scratch("taken");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("keep"), b"mine").unwrap();
        let command = format!("{} dump", bin());
        let dir = out.to_str().unwrap();
        let (status, _, stderr) = fuzz(&["--impl", &command, "--runs", "5", "--out", dir]);
        assert_eq!(status, 2);
        assert!(stderr.contains("not empty"), "{stderr}");
        assert_eq!(std::fs::read(out.join("keep")).unwrap(), b"mine");
        let (status, _, _) = fuzz(&["--impl", &command, "--runs", "5", "--out", dir, "--force"]);
        assert_eq!(status, 0);
        assert!(out.join("summary.json").exists());
        for bad in [&["--runs", "x"][..], &["--timeout", "0"][..], &["--version", "3"][..]] {
            let mut args = vec!["--impl", &command];
            args.extend_from_slice(bad);
            assert_eq!(fuzz(&args).0, 2, "{bad:?}");
        }
        let _ = std::fs::remove_dir_all(out);
    }
}

/// What another user, a hostile index or a hostile implementation can do to the suite.
mod hostile {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn bin() -> &'static str {
        env!("CARGO_BIN_EXE_ztensor-conformance")
    }

    /// Names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Runs the binary with `args` through a shell that first plants, under a temporary
    /// directory of the test's own, what another user would plant at the names the binary
    /// used to make from its process id (`exec` keeps the shell's id for the binary): a link
    /// to a file of ours where write-check wrote a recipe, and links in place of the fuzzer's
    /// working directories.
    fn with_planted_links(tmp: &Path, victim: &Path, args: &[&str]) -> std::process::Output {
        let script = "set -e\n\
             mkdir -p \"$TMPDIR/ztensor-write-check-$$/v1.2\"\n\
             ln -s \"$VICTIM\" \"$TMPDIR/ztensor-write-check-$$/v1.2/zstd.json\"\n\
             ln -s \"$VICTIM\" \"$TMPDIR/ztensor-write-check-$$/v1.2/zstd.zt\"\n\
             mkdir \"$TMPDIR/ztensor-fuzz-$$-0\"\n\
             ln -s \"$VICTIM\" \"$TMPDIR/ztensor-fuzz-$$-0/case.zt\"\n\
             ln -s \"$VICTIM\" \"$TMPDIR/ztensor-fuzz-$$-0/probe.zt\"\n\
             ln -s \"$TMPDIR/ztensor-fuzz-$$-0\" \"$TMPDIR/ztensor-fuzz-$$-1\"\n\
             mkdir \"$TMPDIR/ztensor-matrix-$$\"\n\
             exec \"$@\"";
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(bin())
            .args(args)
            .env("TMPDIR", tmp)
            .env("VICTIM", victim)
            .output()
            .unwrap()
    }

    /// Nothing planted at the old, guessable names is written through or removed; each
    /// command works in a fresh private directory instead (write-check keeps and names its
    /// own; the fuzzer removes its own).
    #[test]
    fn scratch_directories_are_private_and_never_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"root's file").unwrap();
        let sandbox = tmp.path().join("tmp");
        std::fs::create_dir(&sandbox).unwrap();
        let writer = format!("{} write", bin());
        let out = with_planted_links(
            &sandbox,
            &victim,
            &["write-check", "--impl", &writer, "--only", "v1.2/zstd"],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        let kept = PathBuf::from(stdout.lines().last().unwrap().split(": ").nth(1).unwrap());
        assert!(kept.starts_with(&sandbox), "{}", kept.display());
        let name = kept.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("ztensor-write-check-"), "{name}");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&kept).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        assert!(kept.join("v1.2/zstd.json").is_file());
        std::fs::remove_dir_all(&kept).unwrap();
        // What was planted is all that is left.
        let planted = names(&sandbox);
        assert_eq!(planted.len(), 4, "{planted:?}");

        let sandbox = tmp.path().join("tmp2");
        std::fs::create_dir(&sandbox).unwrap();
        let reader = format!("{} dump", bin());
        let out =
            with_planted_links(&sandbox, &victim, &["fuzz", "--impl", &reader, "--runs", "20"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        // The fuzzer's own directory is gone; the planted ones are as they were.
        assert_eq!(names(&sandbox).len(), 4, "{:?}", names(&sandbox));
        let planted = names(&sandbox).into_iter().find(|n| n.ends_with("-0")).unwrap();
        assert_eq!(names(&sandbox.join(planted)), ["case.zt", "probe.zt"]);
    }

    /// `run --fixtures DIR` refuses an index whose paths leave DIR (absolute, `..`, or a link
    /// inside DIR to a file outside), naming the entry, before it runs anything.
    #[test]
    fn an_index_cannot_point_outside_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fixtures");
        std::fs::create_dir_all(dir.join("v1.2/valid")).unwrap();
        let outside = tmp.path().join("secret.zt");
        std::fs::write(&outside, b"not for the implementation").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("v1.2/valid/link.zt")).unwrap();
        let log = tmp.path().join("ran-on");
        let script = tmp.path().join("impl.sh");
        std::fs::write(&script, format!("#!/bin/sh\necho \"$1\" >> {}\nexit 1\n", log.display()))
            .unwrap();
        let entry = |file: &str| {
            format!(
                "[[fixture]]\nfile = {file:?}\nversion = \"1.2\"\ncovers = \"x\"\nexpect = \"ok\"\n"
            )
        };
        let cases = [
            ("/etc/hostname", "absolute"),
            ("v1.2/../../secret.zt", "`..`"),
            ("v1.2/valid/link.zt", "outside the fixtures directory"),
        ];
        for (file, why) in cases {
            std::fs::write(dir.join("index.toml"), entry(file)).unwrap();
            let out = Command::new(bin())
                .args(["run", "--impl", &format!("sh {}", script.display()), "--fixtures"])
                .arg(&dir)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
            assert!(stderr.contains(&format!("{file:?}")), "{file}: {stderr}");
            assert!(stderr.contains(why), "{file}: {stderr}");
            assert!(!log.exists(), "{file}: the implementation was run");
        }
        // A path inside the directory is graded as usual.
        std::fs::write(dir.join("v1.2/valid/plain.zt"), b"junk").unwrap();
        std::fs::write(dir.join("index.toml"), entry("v1.2/valid/plain.zt")).unwrap();
        let out = Command::new(bin())
            .args(["run", "--impl", &format!("sh {}", script.display()), "--fixtures"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(std::fs::read_to_string(&log).unwrap().contains("plain.zt"));
    }

    /// Writes an executable script `name` in `dir` with `body`; returns its path.
    fn script(dir: &Path, name: &str, body: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        Command::new("chmod").arg("755").arg(&path).status().unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// Runs `fuzz` with `args`: (exit status, the JSON report, stderr, seconds taken).
    fn fuzz(args: &[&str]) -> (Option<i32>, serde_json::Value, String, f64) {
        let started = std::time::Instant::now();
        let out = Command::new(bin()).arg("fuzz").args(args).arg("--json").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (out.status.code(), report, stderr, started.elapsed().as_secs_f64())
    }

    /// An implementation that answers the probe and then prints without end (`yes`), as a
    /// process a file and as a server that never ends its line, and a writer that writes far
    /// more than its recipe can need: each is a finding, found quickly, and nothing of the
    /// flood is kept whole.
    #[test]
    fn endless_output_is_a_crash_not_a_memory_exhaustion() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = bin();
        let reader = script(
            tmp.path(),
            "endless.sh",
            &format!(
                "if [ \"$1\" = --serve ]; then\n\
                   while read -r path; do\n\
                     case \"$path\" in *probe*) {bin} dump \"$path\";; *) yes | tr -d '\\n';; esac\n\
                   done\n\
                 else\n\
                   case \"$1\" in *probe*) exec {bin} dump \"$1\";; *) exec yes;; esac\n\
                 fi"
            ),
        );
        for mode in [&[][..], &["--process-per-file"][..]] {
            let args = [&["--impl", &reader, "--runs", "4", "--minimize-seconds", "2"][..], mode];
            let (status, report, stderr, seconds) = fuzz(&args.concat());
            assert_eq!(status, Some(1), "{mode:?}: {stderr}");
            assert_eq!(report["persistent"], mode.is_empty(), "{report}");
            assert_eq!(report["by_class"]["crash"], 1, "{report}");
            let why = report["findings"][0]["theirs"]["why"].as_str().unwrap();
            assert!(why.contains("more than") && why.contains("bytes"), "{why}");
            assert!(seconds < 60.0, "{mode:?}: {seconds} s");
        }
        // A writer whose file is 40 MB for a recipe of a few bytes.
        let writer = script(tmp.path(), "huge-writer.sh", "head -c 40000000 /dev/zero > \"$2\"");
        let out = tmp.path().join("out");
        let args = ["--writer", "--impl", &writer, "--runs", "3", "--minimize-seconds", "1"];
        let (status, report, stderr, _) =
            fuzz(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        assert_eq!(status, Some(1), "{stderr}");
        assert_eq!(report["by_class"]["writes-invalid"], 1, "{report}");
        let finding = &report["findings"][0];
        assert!(finding["detail"].as_str().unwrap().contains("wrote more than"), "{finding}");
        let kept = std::fs::metadata(finding["file"].as_str().unwrap()).unwrap().len();
        assert_eq!(kept, 1 << 20);
    }

    /// A `--serve` implementation that answers each file twice: its answers would be taken
    /// for the next file's, and every one after pinned on the wrong file. Caught at the probe
    /// (a usage error: it breaks the protocol), or, when it starts later, as a violation of
    /// the protocol, pinned to the file that was answered twice: whether its answers name
    /// their path (pinned by it) or not (pinned by a fence asked after each file). The file
    /// is read again by a process of its own, so no finding is made of the violation, and the
    /// run ends with a usage error naming it.
    #[test]
    fn answers_out_of_step_are_a_protocol_violation() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = bin();
        // `strip` removes the path an answer names (an implementation that names none).
        let double = |name: &str, pattern: &str, strip: bool| {
            let print = if strip {
                "printf '%s\\n' \"$l\" | sed -e 's/\"path\":\"[^\"]*\",//' -e 's/,\"path\":\"[^\"]*\"//'"
            } else {
                "printf '%s\\n' \"$l\""
            };
            script(
                tmp.path(),
                name,
                &format!(
                    "if [ \"$1\" = --serve ]; then\n\
                       {bin} dump --serve | while IFS= read -r l; do\n\
                         {print}\n\
                         case \"$l\" in *{pattern}*) {print};; esac\n\
                       done\n\
                     else\n\
                       exec {bin} dump \"$1\"\n\
                     fi"
                ),
            )
        };
        let always = double("always.sh", "ztensor-dump/1", false);
        let (status, _, stderr, _) = fuzz(&["--impl", &always, "--runs", "5"]);
        assert_eq!(status, Some(2), "{stderr}");
        assert!(stderr.contains("broke the --serve protocol"), "{stderr}");
        for (name, strip) in [("later.sh", false), ("later-unnamed.sh", true)] {
            let later = double(name, "/case-", strip);
            let args = ["--impl", &later, "--runs", "12", "--minimize-seconds", "2"];
            let (status, report, stderr, _) = fuzz(&args);
            assert_eq!(status, Some(2), "{name}: {stderr}");
            assert!(stderr.contains("broke the --serve protocol"), "{name}: {stderr}");
            assert_eq!(report["persistent"], true, "{name}: {report}");
            // Every case was answered twice: a violation is seen at least every other case
            // (a fresh server answers its first file before its duplicate is seen), and none
            // is a finding.
            let violations = report["protocol_violations"].as_array().unwrap();
            assert!((6..=12).contains(&violations.len()), "{name}: {report}");
            assert_eq!(report["findings"], serde_json::json!([]), "{name}: {report}");
        }
        // The same implementation, answering once, names no path and is fenced: no violation,
        // no finding.
        let once = double("once-unnamed.sh", "no-file-is-named-this", true);
        let (status, report, stderr, _) = fuzz(&["--impl", &once, "--runs", "12"]);
        assert_eq!(status, Some(0), "{stderr}");
        assert_eq!(report["protocol_violations"], serde_json::json!([]), "{report}");
        assert_eq!(report["persistent"], true, "{report}");
    }

    /// Processes whose command line holds `marker`.
    fn with_marker(marker: &str) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(marker) {
                found.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        found
    }

    /// Whether process `pid` has ended (gone, or a zombie).
    fn ended(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z'))
        })
    }

    /// An implementation that leaves a process behind on every file, out of its process
    /// group and session (`setsid`), holding its output: the fuzzer inherits each as its
    /// parent ends and kills it, so none outlives the run (40 did before, one per case).
    #[test]
    fn nothing_an_implementation_starts_outlives_the_fuzzer() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = bin();
        let marker = format!("1000.{}7", std::process::id());
        let one_shot = script(
            tmp.path(),
            "escape.sh",
            &format!("setsid sleep {marker} &\nexec {bin} dump \"$1\""),
        );
        let server = script(
            tmp.path(),
            "escape-serve.sh",
            &format!(
                "while IFS= read -r p; do\n  setsid sleep {marker} &\n  {bin} dump \"$p\"\ndone"
            ),
        );
        for (command, mode) in [(&one_shot, "--process-per-file"), (&server, "--serve")] {
            let mut args = vec!["--impl", command.as_str(), "--runs", "20"];
            if mode == "--process-per-file" {
                args.push(mode);
            }
            let (status, report, stderr, seconds) = fuzz(&args);
            assert_eq!(status, Some(0), "{mode}: {stderr}");
            assert_eq!(report["persistent"], mode == "--serve", "{report}");
            assert!(seconds < 60.0, "{mode}: {seconds} s");
            let left = with_marker(&marker);
            assert!(left.is_empty(), "{mode}: left running: {left:?}");
        }
    }

    /// SIGTERM while the implementation hangs on a file: the fuzzer kills it, writes what it
    /// found so far (unreduced) to --out, removes its scratch directory and exits with 143.
    /// SIGKILL, which it cannot handle, still takes the implementation with it.
    #[test]
    fn a_signal_keeps_the_findings_and_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let sandbox = tmp.path().join("tmp");
        std::fs::create_dir(&sandbox).unwrap();
        let pids = tmp.path().join("pids");
        let bin = bin();
        let reader = script(
            tmp.path(),
            "crash-then-hang.sh",
            &format!(
                "case \"$1\" in\n\
                   *probe*) exec {bin} dump \"$1\";;\n\
                   */case-1.zt|*/case-2.zt) exit 7;;\n\
                   *) echo $$ >> {pids}; exec sleep 600;;\n\
                 esac",
                pids = pids.display()
            ),
        );
        let out = tmp.path().join("out");
        let start = |out: &Path| {
            Command::new(bin)
                .args(["fuzz", "--impl", &reader, "--runs", "50", "--timeout", "300"])
                .args(["--process-per-file", "--minimize-seconds", "0", "--out"])
                .arg(out)
                .env("TMPDIR", &sandbox)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        let hanging = |count: usize| {
            let started = std::time::Instant::now();
            loop {
                let text = std::fs::read_to_string(&pids).unwrap_or_default();
                if let Some(pid) = text.lines().nth(count - 1) {
                    break pid.to_owned();
                }
                assert!(started.elapsed().as_secs() < 60, "the implementation never hung");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        };
        let mut fuzzer = start(&out);
        let pid = hanging(1);
        Command::new("kill").args(["-s", "TERM", &fuzzer.id().to_string()]).status().unwrap();
        let status = fuzzer.wait().unwrap();
        assert_eq!(status.code(), Some(143));
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["interrupted"], true, "{summary}");
        assert_eq!(summary["by_class"]["crash"], 1, "{summary}");
        assert_eq!(summary["cases"], 2, "{summary}");
        assert!(out.join("crash/1.zt").is_file() && out.join("crash/1.json").is_file());
        assert!(names(&sandbox).is_empty(), "left behind: {:?}", names(&sandbox));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !ended(&pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} outlived the fuzzer");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }

        let mut fuzzer = start(&tmp.path().join("out2"));
        let pid = hanging(2);
        fuzzer.kill().unwrap();
        fuzzer.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !ended(&pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} outlived a killed fuzzer");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The command line: every command has help of its own, usage errors name the argument and
/// exit with status 2, and the binary carries its corpus wherever it is installed.
mod command_line {
    use std::process::{Command, Output};

    fn bin() -> &'static str {
        env!("CARGO_BIN_EXE_ztensor-conformance")
    }

    fn conformance(args: &[&str]) -> Output {
        Command::new(bin()).args(args).output().unwrap()
    }

    #[test]
    fn every_command_has_help_that_names_its_options() {
        let commands: &[(&str, &[&str])] = &[
            ("run", &["--impl", "--fixtures", "--json", "--junit", "--only", "Example:"]),
            ("write-check", &["--impl", "--reader", "--dir", "--json", "--only", "Example:"]),
            ("recipes", &["<DIR>", "Example:"]),
            ("matrix", &["<DIR>", "--check", "--findings", "--reference", "Example:"]),
            ("freeze", &["<DIR>", "--producer", "Example:"]),
            (
                "fuzz",
                &[
                    "--impl",
                    "--writer",
                    "--seconds",
                    "--runs",
                    "--seed",
                    "--out",
                    "--force",
                    "--version",
                    "--timeout",
                    "--minimize-seconds",
                    "--process-per-file",
                    "--json",
                    "--junit",
                    "Example:",
                ],
            ),
            ("dump", &["--strict", "--serve", "[FILE]", "Example:"]),
            ("write", &["<RECIPE>", "<OUT>", "Example:"]),
        ];
        for (command, options) in commands {
            for help in [vec![*command, "--help"], vec!["help", *command]] {
                let out = conformance(&help);
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert_eq!(out.status.code(), Some(0), "{help:?}: {stdout}");
                assert!(stdout.contains(&format!("ztensor-conformance {command}")), "{stdout}");
                for option in *options {
                    assert!(
                        stdout.contains(option),
                        "{help:?} does not mention {option}:\n{stdout}"
                    );
                }
            }
        }
        // The program's own help lists every command.
        let out = conformance(&["--help"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0));
        for (command, _) in commands {
            assert!(stdout.contains(command), "{command} missing from:\n{stdout}");
        }
    }

    #[test]
    fn usage_errors_name_the_argument_and_exit_2() {
        let cases: &[(&[&str], &str)] = &[
            (&["fuzz", "--impl", "x", "--bogus"], "--bogus"),
            (&["run", "--impl", "x", "--frobnicate"], "--frobnicate"),
            (&["write-check", "--impl", "x", "stray"], "stray"),
            (&["launch"], "launch"),
            // A required option left out, or given a value it cannot take.
            (&["run", "--json"], "--impl"),
            (&["fuzz", "--impl", "x", "--seconds", "soon"], "--seconds"),
            (&["fuzz", "--impl", "x", "--timeout", "0"], "--timeout"),
            (&["fuzz", "--impl", "x", "--version", "3.0"], "--version"),
            (&["fuzz", "--impl", "x", "--seconds", "1", "--runs", "2"], "--runs"),
            (&["fuzz", "--impl", "x", "--force"], "--out"),
            (&["write-check", "--impl", "x", "--reader", "no-equals"], "--reader"),
            (&["freeze", "dir", "--producer", "id=name"], "--producer"),
            (&["matrix", "dir", "--check", "--reference", "1.2.3=x"], "--reference"),
            (&["dump"], "FILE"),
        ];
        for (args, named) in cases {
            let out = conformance(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(named), "{args:?} should name {named}: {stderr}");
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }

    /// An implementation fuzzed in its own process (the reference adapters) gets the same
    /// options through `difffuzz::command_line`, usage errors named.
    #[test]
    fn the_fuzz_options_parse_the_same_for_an_implementation_in_process() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut ours = ztensor_conformance::difffuzz::OursInProcess { chunk: None };
        let err = ztensor_conformance::difffuzz::command_line(
            &args(&["--impl", "x", "--runs", "1", "--bogus"]),
            Some(&mut ours),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("--bogus"), "{err:#}");
        let err = ztensor_conformance::difffuzz::command_line(
            &args(&["--impl", "x", "--runs", "1", "--timeout", "5"]),
            Some(&mut ours),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("--timeout does not apply"), "{err:#}");
        let clean = ztensor_conformance::difffuzz::command_line(
            &args(&["--impl", "ours", "--runs", "3", "--seed", "5", "--json"]),
            Some(&mut ours),
        )
        .unwrap();
        assert!(clean, "our reader diverged from itself");
    }

    /// As `cargo install` leaves it: the binary alone, copied out of the target directory, run
    /// from a directory outside the checkout, grades our reader (its own `dump`) on the whole
    /// corpus it carries, from a private directory it removes afterwards.
    #[test]
    fn an_installed_binary_grades_the_whole_corpus_it_carries() {
        let home = tempfile::tempdir().unwrap();
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let workspace = workspace.canonicalize().unwrap();
        assert!(!home.path().canonicalize().unwrap().starts_with(&workspace));
        let (bin_dir, cwd, tmp) =
            (home.path().join("bin"), home.path().join("cwd"), home.path().join("tmp"));
        for dir in [&bin_dir, &cwd, &tmp] {
            std::fs::create_dir(dir).unwrap();
        }
        let installed = bin_dir.join("ztensor-conformance");
        std::fs::copy(bin(), &installed).unwrap();
        let installed = installed.to_str().unwrap();
        // A binary just written may be busy for a moment (ETXTBSY): a process another test
        // forks meanwhile holds the copy's descriptor until it execs. Tried again then.
        let mut tries = 0;
        let out = loop {
            let run = Command::new(installed)
                .args(["run", "--impl", &format!("{installed} dump"), "--json"])
                .current_dir(&cwd)
                .env("TMPDIR", &tmp)
                .output();
            match run {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other.unwrap(),
            }
        };
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // Every fixture the crate's indexes list was graded, and passed.
        let entries = ztensor_conformance::index::read_all(&ztensor_conformance::corpus()).unwrap();
        let totals = &report["totals"];
        assert_eq!(totals["fixtures"], entries.len(), "{totals}");
        assert_eq!((&totals["failed"], &totals["crashed"]), (&0.into(), &0.into()), "{totals}");
        let graded: Vec<&str> = report["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["fixture"].as_str().unwrap())
            .collect();
        for e in &entries {
            assert!(graded.contains(&e.file.as_str()), "{} not graded", e.file);
        }
        // The corpus was written under the temporary directory it was given, and is gone.
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
    }
}
