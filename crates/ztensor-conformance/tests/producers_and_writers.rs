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
        ztensor_conformance::runner::run(&format!("{} dump", this()), &root(), &entries).unwrap();
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
        ("other-content", format!("cp {} \"$2\"", root().join("v1.2/valid/zstd.zt").display()), ""),
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
        let results = writer_check::run(&writer(&dir, name, &body), &recipes, &dir, &[]).unwrap();
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
    let crash = writer_check::run(&writer(&dir, "crash", "exit 7"), &recipes, &dir, &[]).unwrap();
    assert!(crash.iter().all(|r| matches!(r.written, Written::Crash(_))));
    let silent = writer_check::run(&writer(&dir, "silent", "exit 0"), &recipes, &dir, &[]).unwrap();
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
        let results = writer_check::run(&writer(&dir, name, &body), &recipes, &dir, &[]).unwrap();
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
