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
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kept).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(kept.join("v1.2/zstd.json").is_file());
    std::fs::remove_dir_all(&kept).unwrap();
    // What was planted is all that is left.
    let planted = names(&sandbox);
    assert_eq!(planted.len(), 4, "{planted:?}");

    let sandbox = tmp.path().join("tmp2");
    std::fs::create_dir(&sandbox).unwrap();
    let reader = format!("{} dump", bin());
    let out = with_planted_links(&sandbox, &victim, &["fuzz", "--impl", &reader, "--runs", "20"]);
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
        &format!("while IFS= read -r p; do\n  setsid sleep {marker} &\n  {bin} dump \"$p\"\ndone"),
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
