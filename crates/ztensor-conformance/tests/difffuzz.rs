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
    let misread = report.findings.iter().find(|f| f.divergence.class.name() == "misreads").unwrap();
    assert!(misread.recipe.mutations.len() <= 1, "not reduced: {:?}", misread.recipe);
    config.budget = Budget::Runs(400);
    let clean = difffuzz::run_in_process(&config, &mut OursInProcess { chunk: Some(7) }, |_, _| {})
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
        assert!(report["by_class"][class].as_u64().unwrap() >= 1, "{class} not found: {stdout}");
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
        let recipe: Json = serde_json::from_slice(&std::fs::read(&recipe_file).unwrap()).unwrap();
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
