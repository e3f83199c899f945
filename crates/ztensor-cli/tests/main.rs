//! Runs the built `ztensor` binary as a user would.

// Test files are small; their offsets always fit.
#![allow(clippy::cast_possible_truncation)]

use std::path::PathBuf;
use std::process::{Command, Output};

mod budgets;
mod dcp;
mod durability;
mod formats;
mod generations;
mod hostile;
mod layout;
#[path = "../../ztensor-remote/tests/support/liar.rs"]
mod liar;
mod looking;
#[path = "../../ztensor-remote/tests/support/moto.rs"]
mod moto;
mod opens;
mod outputs;
mod readme;
mod remote;
mod remote_credentials;
mod remote_reads;
// What the object-storage tests share (objects read back whole); not all of it is used here.
#[allow(dead_code)]
#[path = "../../ztensor-remote/tests/support/remote.rs"]
mod remote_support;
mod sharded;
mod shell;
mod stdin;
mod strict;
mod summaries;
mod threads;
mod tools;
mod unchecked;

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
            [
                "layer0.weight",
                "dense",
                "[2,",
                "3]",
                "6",
                "data",
                "f32",
                "raw",
                "24",
                "B",
                "24",
                "B",
                "-"
            ]
        );
    }
    let v0 = stdout(&ztensor(&["info", "fixtures/examples/tiny-v0.1.zt"]));
    assert!(v0.contains("i64 (big-endian)"), "{v0}");
    let v12 = stdout(&ztensor(&["info", "--strict", "fixtures/examples/tiny-v1.2.zt"]));
    assert!(v12.contains("u8:f8_e4m3fn"), "{v12}");
    assert!(
        v12.contains("attributes:\n  license: \"CC0-1.0\"\n  framework: \"example\"\n"),
        "{v12}"
    );
}

#[test]
fn info_rejects_a_corrupt_file_naming_the_rule() {
    let dir = ztensor_testkit::scratch("cli-test");
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
fn a_file_cut_short_is_named_with_its_likely_cause() {
    let dir = scratch("cut-short");
    let examples = root().join("fixtures/examples");
    let v2 = root().join("fixtures/external/ztensor2/valid/canonical-basic.zt");
    for source in [examples.join("tiny-v0.1.zt"), examples.join("tiny-v1.2.zt"), v2] {
        let whole = std::fs::read(&source).unwrap();
        let cut = dir.join(source.file_name().unwrap());
        std::fs::write(&cut, &whole[..whole.len() - 5]).unwrap();
        let cut = cut.to_str().unwrap();
        let mut commands = vec![vec!["info", cut], vec!["verify", cut]];
        if !source.starts_with(root().join("fixtures/external")) {
            commands.push(vec!["repair", "--scan", cut]);
        }
        for args in commands {
            let out = ztensor(&args);
            let said = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
            assert!(said.contains(cut), "{args:?}: {said}");
            assert!(
                said.contains("cut short (an incomplete download or copy?)"),
                "{args:?}: {said}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn info_on_a_missing_file_is_a_usage_error() {
    let out = ztensor(&["info", "no/such/file.zt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open no/such/file.zt"), "{}", stderr(&out));
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("cli-{name}"))
}

/// Every `.zt` file under `fixtures/`.
fn fixture_files() -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                // The hostile corpus has its own test: its files are neither valid nor
                // rejected with one rule. The reference's zTensor 2 corpus has its own tests
                // too (`ztensor-v2`): its files are named for what they test, not for a rule.
                if !path.ends_with("hostile") && !path.ends_with("ztensor2") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "zt" || e == "tb") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("fixtures"), &mut out);
    out.sort();
    out
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// Checks a dump against the shape of the shared conformance document.
fn check_dump_shape(d: &serde_json::Value) {
    use serde_json::Value as J;
    let top = d.as_object().expect("an object");
    assert_eq!(top["dump"], "ztensor-dump/1");
    let keys: Vec<&str> = top.keys().map(String::as_str).collect();
    assert_eq!(keys, ["dump", "container", "version", "attributes", "objects"]);
    assert!(
        ["zt-0.1", "zt-1.1", "zt-1.2", "zt-2", "tensorbuffers"]
            .contains(&top["container"].as_str().unwrap())
    );
    assert!(top["version"].is_string() || top["version"].is_null());
    assert!(top["attributes"].is_object() || top["attributes"].is_null());
    let objects = top["objects"].as_array().unwrap();
    let names: Vec<&str> = objects.iter().map(|o| o["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(names, sorted, "objects sorted by name");
    for o in objects {
        let keys: Vec<&str> = o.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "format", "shape", "attributes", "components", "error"]);
        assert!(o["shape"].as_array().unwrap().iter().all(J::is_u64));
        for c in o["components"].as_object().unwrap().values() {
            let keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["dtype", "type", "encoding", "decoded_length", "sha256"]);
            let dtype = c["dtype"].as_str().unwrap();
            if o["error"].is_null() {
                assert!(
                    [
                        "f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32",
                        "u16", "u8", "bool"
                    ]
                    .contains(&dtype)
                );
                assert!(c["decoded_length"].is_u64());
                let h = c["sha256"].as_str().unwrap();
                assert!(
                    h.len() == 64
                        && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                );
            } else {
                assert!(c["decoded_length"].is_null() && c["sha256"].is_null());
            }
        }
    }
}

#[test]
fn dump_matches_the_shared_shape_on_every_fixture() {
    let files = fixture_files();
    assert!(files.len() >= 3);
    for file in files {
        let out = ztensor(&["dump", "--json", file.to_str().unwrap()]);
        let d = json(&out);
        // Fixture directories say what to expect: `reject/<rule>[--variant].*` must be rejected
        // with that rule; everything else must be accepted.
        let in_reject = file.parent().is_some_and(|p| p.ends_with("reject"));
        if in_reject {
            assert_eq!(out.status.code(), Some(1), "{}", file.display());
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let rule = stem.split("--").next().unwrap();
            assert_eq!(d["error"]["kind"], rule, "{}", file.display());
            assert!(d["error"]["message"].is_string());
        } else {
            assert!(out.status.success(), "{}: {}", file.display(), stdout(&out));
            check_dump_shape(&d);
        }
    }
}

#[test]
fn dump_reports_decoded_bytes_alike_for_every_version() {
    let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let be_step: Vec<u8> = 1000i64.to_le_bytes().to_vec();
    let expected = [
        ("adjacency", "indices", le(&[1, 0, 3])),
        ("adjacency", "indptr", le(&[0, 1, 1, 3])),
        ("adjacency", "values", [1.5f32, 2.5, -1.0].iter().flat_map(|v| v.to_le_bytes()).collect()),
        (
            "layer0.weight",
            "data",
            [0.5f32, -1.25, 2.0, 0.0, 3.5, -0.75].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
    ];
    for version in ["0.1", "1.1", "1.2"] {
        let d =
            json(&ztensor(&["dump", "--json", &format!("fixtures/examples/tiny-v{version}.zt")]));
        let objects = d["objects"].as_array().unwrap();
        let find = |name: &str| objects.iter().find(|o| o["name"] == name).unwrap();
        for (name, role, bytes) in &expected {
            let c = &find(name)["components"][role];
            assert_eq!(c["decoded_length"], bytes.len(), "{version} {name}/{role}");
            assert_eq!(
                c["sha256"],
                ztensor_io::codec::sha256_hex(bytes),
                "{version} {name}/{role}"
            );
        }
        if version == "0.1" {
            // Stored big-endian, reported little-endian.
            assert_eq!(
                find("step")["components"]["data"]["sha256"],
                ztensor_io::codec::sha256_hex(&be_step)
            );
            assert_eq!(find("step")["attributes"], serde_json::json!({"unit": "iterations"}));
        } else {
            assert_eq!(find("scales.fp8")["components"]["data"]["type"], "f8_e4m3fn");
        }
    }
}

#[test]
fn dump_of_a_rejected_file_names_the_rule() {
    let d = scratch("dump-reject");
    let path = d.join("bad.zt");
    let mut bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();
    bytes[0] = b'X';
    std::fs::write(&path, &bytes).unwrap();
    let out = ztensor(&["dump", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["kind"], "header_magic");
    let out = ztensor(&["dump", "--json", "no/such.zt"]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn verify_passes_sound_files_and_names_the_broken_object() {
    for v in ["0.1", "1.1", "1.2"] {
        let out = ztensor(&["verify", "--strict", &format!("fixtures/examples/tiny-v{v}.zt")]);
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(stdout(&out).contains(": sound (4 objects"), "{}", stdout(&out));
    }
    let d = scratch("verify");
    let path = d.join("digested.zt");
    let out = ztensor(&[
        "convert",
        "fixtures/examples/tiny-v1.2.zt",
        path.to_str().unwrap(),
        "--digest",
        "sha256",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ztensor(&["verify", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("6 digests verified"), "{}", stdout(&out));
    // Flip a byte of layer0.weight's data.
    let reader = ztensor_io::Reader::open(&path).unwrap();
    let offset = reader.object("layer0.weight").unwrap().model().components["data"].offset as usize;
    drop(reader);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let out = ztensor(&["verify", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("object \"layer0.weight\"") && text.contains("[digest_mismatch]"),
        "{text}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// The tool with standard input from `file` (the repository's root as working directory), and
/// whether the temporary directory it was given (`TMPDIR`, made for the run and removed after
/// it), where it spools standard input, was empty when it exited.
fn ztensor_reading(file: &str, args: &[&str]) -> (Output, bool) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = scratch(&format!("stdin-tmp-{n}"));
    let child = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(args)
        .current_dir(root())
        .env("TMPDIR", &tmp)
        .stdin(std::fs::File::open(root().join(file)).unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the ztensor binary runs");
    let out = child.wait_with_output().unwrap();
    let empty = std::fs::read_dir(&tmp).unwrap().next().is_none();
    std::fs::remove_dir_all(&tmp).unwrap();
    (out, empty)
}

/// `-` reads standard input, for every reading command, as the file it holds; the copy it
/// reads from is gone afterwards, and standard input is given once only.
#[test]
fn a_dash_reads_standard_input() {
    let d = scratch("stdin");
    let file = "fixtures/examples/tiny-v1.2.zt";
    let (r, gone) = ztensor_reading(file, &["dump", "--json", "-"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(stdout(&r), stdout(&ztensor(&["dump", "--json", file])));
    assert!(gone, "the spool is removed");
    let (r, _) = ztensor_reading(file, &["info", "-"]);
    assert!(r.status.success() && stdout(&r).contains("objects:    4"), "{}", stdout(&r));
    let out = d.join("from-stdin.zt");
    let (r, gone) = ztensor_reading(
        "fixtures/examples/tiny-v0.1.zt",
        &["convert", "-", out.to_str().unwrap(), "-q"],
    );
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(ztensor(&["verify", out.to_str().unwrap()]).status.success());
    assert!(gone, "the spool is removed");
    let (r, _) = ztensor_reading(file, &["diff", "-", file]);
    assert!(r.status.success(), "{}", stderr(&r));
    let (r, gone) = ztensor_reading(file, &["diff", "-", "-"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("can be read once"), "{}", stderr(&r));
    assert!(gone, "the spool is removed after a usage error");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Outputs named for a format the tool does not write, and encoding options the target has no
/// place for, are usage errors caught before anything is written; `--to` says what is meant.
#[test]
fn convert_refuses_outputs_it_would_misname() {
    let d = scratch("misnamed");
    let input = "fixtures/examples/tiny-v1.2.zt";
    for name in ["x.gguf", "x.npz", "x.npy", "x.bin", "x.pt", "x.PTH"] {
        let out = d.join(name);
        let r = ztensor(&["convert", input, out.to_str().unwrap(), "-q"]);
        assert_eq!(r.status.code(), Some(2), "{name}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("reads but does not write") && e.contains("--to"), "{name}: {e}");
        assert!(!out.exists(), "{name}: nothing written");
    }
    assert!(
        stderr(&ztensor(&["convert", input, d.join("x.npy").to_str().unwrap()]))
            .contains("extract")
    );
    for (name, option) in [("x.safetensors", ["--zstd", "3"]), ("x.tb", ["--digest", "sha256"])] {
        let out = d.join(name);
        let r =
            ztensor(&[&["convert", input, out.to_str().unwrap(), "-q"][..], &option[..]].concat());
        assert_eq!(r.status.code(), Some(2), "{name}: {}", stderr(&r));
        assert!(stderr(&r).contains(&format!("{} does not apply", option[0])), "{}", stderr(&r));
        assert!(!out.exists(), "{name}: nothing written");
    }
    // Said explicitly, the name is the user's to choose.
    let out = d.join("x.gguf");
    let r = ztensor(&["convert", input, out.to_str().unwrap(), "-q", "--to", "zt"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(ztensor(&["verify", out.to_str().unwrap()]).status.success());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn convert_between_versions_and_refuse_what_cannot_be_expressed() {
    let d = scratch("convert");
    let out12 = d.join("from01.zt");
    let out = ztensor(&[
        "convert",
        "fixtures/examples/tiny-v0.1.zt",
        out12.to_str().unwrap(),
        "--to",
        "1.2",
        "--zstd",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = json(&ztensor(&["dump", "--json", "fixtures/examples/tiny-v0.1.zt"]));
    let after = json(&ztensor(&["dump", "--json", out12.to_str().unwrap()]));
    assert_eq!(after["container"], "zt-1.2");
    // `--to zt` is zTensor in its current version.
    let zt = d.join("to-zt.bin");
    let out =
        ztensor(&["convert", "fixtures/examples/tiny-v0.1.zt", zt.to_str().unwrap(), "--to", "zt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&ztensor(&["dump", "--json", zt.to_str().unwrap()]))["container"], "zt-1.2");
    std::fs::remove_file(&zt).unwrap();
    let strip = |d: &serde_json::Value| -> Vec<serde_json::Value> {
        d["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                for c in o["components"].as_object_mut().unwrap().values_mut() {
                    c.as_object_mut().unwrap().remove("encoding");
                }
                o
            })
            .collect()
    };
    assert_eq!(strip(&before), strip(&after));

    // The 1.2 example has an FP8 tensor, which 0.1 cannot express.
    let out01 = d.join("to01.zt");
    let out = ztensor(&[
        "convert",
        "fixtures/examples/tiny-v1.2.zt",
        out01.to_str().unwrap(),
        "--to",
        "0.1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("[unrepresentable]"), "{}", stderr(&out));
    assert!(!out01.exists(), "a failed conversion must leave no output");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary files left behind");

    let out = ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", "x.zt", "--to", "2.0"]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn tensorbuffers_in_info_verify_and_convert() {
    let sample = "fixtures/tensorbuffers/valid/sample.tb";
    let out = ztensor(&["info", sample]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("format:     TensorBuffers (version \"1.0.0\")"),
        "{}",
        stdout(&out)
    );
    assert!(ztensor(&["verify", "--strict", sample]).status.success());
    let out = ztensor(&["verify", "fixtures/tensorbuffers/reject/tb_size_mismatch.tb"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("[tb_size_mismatch]"), "{}", stderr(&out));

    let d = scratch("tb-convert");
    let (zt, back) = (d.join("s.zt"), d.join("s.tb"));
    for args in [
        vec![
            "convert",
            sample,
            zt.to_str().unwrap(),
            "--to",
            "1.2",
            "--zstd",
            "3",
            "--digest",
            "sha256",
        ],
        vec!["convert", zt.to_str().unwrap(), back.to_str().unwrap()],
    ] {
        let out = ztensor(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(root().join(sample)).unwrap());
    // The dumps of the TensorBuffers file and its zTensor conversion list the same data.
    let a = json(&ztensor(&["dump", "--json", sample]));
    let b = json(&ztensor(&["dump", "--json", zt.to_str().unwrap()]));
    let hashes = |d: &serde_json::Value| -> Vec<(String, String)> {
        d["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["name"].to_string(), o["components"]["data"]["sha256"].to_string()))
            .collect()
    };
    assert_eq!(hashes(&a), hashes(&b));

    // zTensor content TensorBuffers cannot hold: attributes (droppable on request), then FP8.
    let tb = d.join("tiny.tb");
    let out = ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", tb.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--drop-attributes"), "{}", stderr(&out));
    let out = ztensor(&[
        "convert",
        "fixtures/examples/tiny-v1.2.zt",
        tb.to_str().unwrap(),
        "--drop-attributes",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("[tb_unrepresentable]"), "{}", stderr(&out));
    assert!(!tb.exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn repack_equals_convert_for_any_thread_count_and_fails_cleanly() {
    let d = scratch("repack");
    let convert = d.join("convert.zt");
    let out = ztensor(&[
        "convert",
        "fixtures/examples/tiny-v0.1.zt",
        convert.to_str().unwrap(),
        "--to",
        "1.2",
        "--zstd",
        "5",
        "--digest",
        "blake3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = std::fs::read(&convert).unwrap();
    // With small frames (several per tensor) and a tiny budget, every thread count writes the
    // same bytes.
    let big = d.join("big.zt");
    {
        let mut w = ztensor_io::FileWriter::create(&big, ztensor_format::Version::V0_1).unwrap();
        let values: Vec<u8> = (0..30_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let options = ztensor_io::WriteOptions::raw();
        w.add_dense("w", &[30_000], ztensor_format::DType::U32, &values, &options).unwrap();
        w.add_dense("b", &[3], ztensor_format::DType::U8, &[1, 2, 3], &options).unwrap();
        w.finish().unwrap();
    }
    let big_convert = d.join("big-convert.zt");
    let args = ["--to", "1.2", "--zstd", "5", "--digest", "blake3"];
    let out = ztensor(
        &[&["convert", big.to_str().unwrap(), big_convert.to_str().unwrap()][..], &args].concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut outputs = Vec::new();
    for threads in ["1", "2", "7"] {
        let repacked = d.join(format!("repack-{threads}.zt"));
        let out = ztensor(&[
            "repack",
            big.to_str().unwrap(),
            repacked.to_str().unwrap(),
            "--to",
            "1.2",
            "--zstd",
            "5",
            "--digest",
            "blake3",
            "--threads",
            threads,
            // The least budget the engine takes: one 4 MiB raw piece and its output.
            "--memory",
            "8MiB",
            "--chunk",
            "4KiB",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("peak"), "{}", stdout(&out));
        outputs.push(std::fs::read(&repacked).unwrap());
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
    let big_expected = std::fs::read(&big_convert).unwrap();
    assert_ne!(outputs[0], big_expected, "4 KiB frames differ from the default 4 MiB frames");
    for chunk in ["0", "8"] {
        let out = ztensor(&["repack", big.to_str().unwrap(), "x.zt", "--chunk", chunk]);
        assert_eq!(out.status.code(), Some(2), "--chunk {chunk}");
    }
    // At the default frame size, repack writes what convert writes.
    let repacked = d.join("repack.zt");
    let out = ztensor(&[
        "repack",
        "fixtures/examples/tiny-v0.1.zt",
        repacked.to_str().unwrap(),
        "--to",
        "1.2",
        "--zstd",
        "5",
        "--digest",
        "blake3",
        "--threads",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&repacked).unwrap(), expected);
    assert!(ztensor(&["verify", "--threads", "2", repacked.to_str().unwrap()]).status.success());

    // Failures: a missing input, a bad size, FP8 to 0.1, a TensorBuffers input.
    assert_eq!(ztensor(&["repack", "nope.zt", "x.zt"]).status.code(), Some(2));
    assert_eq!(
        ztensor(&["repack", "fixtures/examples/tiny-v1.2.zt", "x.zt", "--memory", "12X"])
            .status
            .code(),
        Some(2)
    );
    let out = ztensor(&[
        "repack",
        "fixtures/examples/tiny-v1.2.zt",
        d.join("v01.zt").to_str().unwrap(),
        "--to",
        "0.1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("[unrepresentable]"), "{}", stderr(&out));
    assert!(!d.join("v01.zt").exists());
    let out = ztensor(&[
        "repack",
        "fixtures/tensorbuffers/valid/sample.tb",
        d.join("tb.zt").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("use `convert`"), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_streamed_dump_is_the_dump() {
    for file in fixture_files() {
        let (dump, accepted) = ztensor_dump::file(&file).unwrap();
        let mut streamed = Vec::new();
        let streamed_accepted = ztensor_dump::write_file(&file, &mut streamed).unwrap();
        assert_eq!(streamed_accepted, accepted, "{}", file.display());
        assert_eq!(String::from_utf8(streamed).unwrap(), format!("{dump}\n"), "{}", file.display());
    }
}
