//! Runs the built `ztensor` binary as a user would.

use std::path::PathBuf;
use std::process::{Command, Output};

fn ztensor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("the ztensor binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn info_on_every_bundled_example() {
    for (version, label) in [
        ("0.1", "version:    0.1\n"),
        ("1.1", "version:    1.1 (\"1.1.0\")\n"),
        ("1.2", "version:    1.2 (\"1.2.0\")\n"),
    ] {
        let out = ztensor(&["info", &format!("fixtures/examples/tiny-v{version}.zt")]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(label), "{text}");
        assert!(text.contains("objects:    4\n"), "{text}");
        let weight = text.lines().find(|l| l.starts_with("layer0.weight")).expect("a weight row");
        let cells: Vec<&str> = weight.split_whitespace().collect();
        assert_eq!(
            cells,
            ["layer0.weight", "dense", "[2,", "3]", "data", "f32", "raw", "24", "24", "-"]
        );
    }
    let v0 = stdout(&ztensor(&["info", "fixtures/examples/tiny-v0.1.zt"]));
    assert!(v0.contains("i64 (big-endian)"), "{v0}");
    let v12 = stdout(&ztensor(&["info", "--strict", "fixtures/examples/tiny-v1.2.zt"]));
    assert!(v12.contains("u8:f8_e4m3fn"), "{v12}");
    assert!(v12.contains("attributes: {\"epoch\": 3, \"framework\": \"example\"}"), "{v12}");
}

#[test]
fn info_rejects_a_corrupt_file_naming_the_rule() {
    let dir = std::env::temp_dir().join(format!("ztensor-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad-footer.zt");
    let mut bytes = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/examples/tiny-v1.2.zt"),
    )
    .unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let out = ztensor(&["info", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("[footer_magic]"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn info_on_a_missing_file_is_a_usage_error() {
    let out = ztensor(&["info", "no/such/file.zt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open no/such/file.zt"), "{}", stderr(&out));
}
