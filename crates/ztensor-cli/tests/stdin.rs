//! `-` as an input: standard input spooled in a private directory of its own, capped by
//! `--max-input`, removed on exit (a signal included), named `<stdin>` in messages; a zTensor
//! 2 root read from it looks up no shards.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{root, scratch, stderr, stdout};

/// The tool with `tmp` as its temporary directory (`TMPDIR`) and standard input piped.
fn spawn(tmp: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(args)
        .current_dir(root())
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ztensor binary runs")
}

/// Runs the tool with `input` as its standard input, written from a thread so that a tool
/// which stops reading (a refusal) cannot block the test.
fn run(tmp: &Path, args: &[&str], input: Vec<u8>) -> Output {
    let mut child = spawn(tmp, args);
    let mut stdin = child.stdin.take().unwrap();
    // A tool that stops reading closes the pipe: the rest of the write fails, as it should.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// What `dir` holds.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    found.sort();
    found
}

/// The spool's directory in `tmp`, once the tool (blocked reading standard input) has made it
/// and the spool in it.
fn spool_dir(tmp: &Path) -> PathBuf {
    let started = Instant::now();
    loop {
        if let [dir] = &entries(tmp)[..]
            && dir.join("stdin").exists()
        {
            return dir.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no spool appeared in {tmp:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The spool is a file in a directory made for it alone: mode 0700, a name with no process
/// id in it that differs from run to run. It is gone once the tool exits, normally or on
/// SIGTERM (status 143, as a shell reports it).
#[cfg(unix)]
#[test]
fn the_spool_is_private_and_removed_on_every_exit() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("stdin-private");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();

    let mut child = spawn(&tmp, &["info", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes[..100]).unwrap();
    let dir = spool_dir(&tmp);
    let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("ztensor-stdin-"), "{name}");
    assert!(!name.contains(&child.id().to_string()), "{name} names the process");
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{name}");
    assert_eq!(
        entries(&dir),
        [dir.join(".owner"), dir.join("stdin")],
        "the spool is alone in its directory, with the lock that says it is in use"
    );
    stdin.write_all(&bytes[100..]).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("objects:    4"), "{}", stdout(&out));
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));

    // A second run's directory has another name; SIGTERM while it reads removes it.
    let mut child = spawn(&tmp, &["info", "-"]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes[..100]).unwrap();
    let again = spool_dir(&tmp);
    assert_ne!(again.file_name().unwrap().to_str().unwrap(), name);
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A run killed with SIGKILL (no chance to clean up) leaves its directory behind; the next
/// run that spools removes it, by the lock the killed run no longer holds. A live run's
/// directory, another prefix's, or one without the lock file is left alone.
#[cfg(unix)]
#[test]
fn a_spool_orphaned_by_sigkill_is_removed_by_the_next_run() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("stdin-orphan");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();
    let mut killed = spawn(&tmp, &["info", "-"]);
    let mut stdin = killed.stdin.take().unwrap();
    stdin.write_all(&bytes[..100]).unwrap();
    let orphan = spool_dir(&tmp);
    assert!(
        Command::new("kill").args(["-KILL", &killed.id().to_string()]).status().unwrap().success()
    );
    killed.wait().unwrap();
    drop(stdin);
    assert!(orphan.join("stdin").exists(), "SIGKILL leaves the spool");
    // Beside it: a run still reading, and two directories that are not orphans of ours.
    let mut live = spawn(&tmp, &["info", "-"]);
    let mut live_in = live.stdin.take().unwrap();
    live_in.write_all(&bytes[..100]).unwrap();
    let started = Instant::now();
    let live_dir = loop {
        let found: Vec<PathBuf> = entries(&tmp)
            .into_iter()
            .filter(|p| *p != orphan && p.join("stdin").exists())
            .collect();
        if let [one] = &found[..] {
            break one.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no second spool");
        std::thread::sleep(Duration::from_millis(20));
    };
    let unlocked = tmp.join("ztensor-stdin-nolock");
    std::fs::create_dir(&unlocked).unwrap();
    std::fs::set_permissions(&unlocked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let other = tmp.join("something-else");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join(".owner"), b"").unwrap();
    // The next run removes the orphan, and only it.
    let out = run(&tmp, &["info", "-"], bytes.clone());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!orphan.exists(), "the orphan is gone");
    assert!(live_dir.join("stdin").exists(), "a live run's spool stays");
    assert!(unlocked.exists() && other.exists());
    live_in.write_all(&bytes[100..]).unwrap();
    drop(live_in);
    assert!(live.wait_with_output().unwrap().status.success());
    let mut left = entries(&tmp);
    left.sort();
    assert_eq!(left, [other, unlocked]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--max-input` caps standard input: a file of exactly that many bytes is read, one byte
/// more is refused (status 2, naming the cap and the flag) and nothing is left behind; an
/// endless input stops at the cap.
#[test]
fn max_input_caps_standard_input() {
    let d = scratch("stdin-cap");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();
    let len = bytes.len();

    let at = len.to_string();
    let out = run(&tmp, &["--max-input", &at, "info", "-"], bytes.clone());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("objects:    4"), "{}", stdout(&out));

    let under = (len - 1).to_string();
    let out = run(&tmp, &["info", "-", "--max-input", &under], bytes.clone());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--max-input") && err.contains(&format!("({under} bytes)")), "{err}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));

    // Three megabytes (a zTensor header, then zeros) against a one-megabyte cap, with units.
    let mut big = b"ZTEN0001".to_vec();
    big.resize(3 << 20, 0);
    let out = run(&tmp, &["--max-input", "1MiB", "verify", "-"], big);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("(1048576 bytes)"), "{}", stderr(&out));
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));

    let out = run(&tmp, &["--max-input", "1X", "info", "-"], Vec::new());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("unknown size unit"), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A zTensor 2 root read from standard input is refused before any shard is looked for: its
/// shards, planted in the temporary directory under names a search by identity would find
/// (the shards themselves, renamed), are not read, and no values are printed. The same root
/// given by its path reads, and a zTensor 2 file without shards reads from standard input.
#[test]
fn a_ztensor_2_root_from_standard_input_looks_up_no_shards() {
    let d = scratch("stdin-root");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let model = d.join("model");
    let input = root().join("crates/ztensor-conformance/fixtures/examples/tiny-v1.1.zt");
    let args = [
        "convert",
        input.to_str().unwrap(),
        &format!("{}/", model.display()),
        "--to",
        "2",
        "--shard-size",
        "30",
    ];
    let out = super::ztensor(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let root_file = model.join("tiny-v1.1.zt");
    for i in 1..=3 {
        let shard = model.join(format!("tiny-v1.1-{i:05}-of-00003.zt"));
        std::fs::copy(&shard, tmp.join(format!("planted-{i}.zt"))).unwrap();
    }
    let planted = entries(&tmp);
    // By its path, the root reads its shards.
    let by_path = super::ztensor(&["cat", root_file.to_str().unwrap(), "layer0.weight"]);
    assert!(by_path.status.success(), "{}", stderr(&by_path));
    assert!(!stdout(&by_path).trim().is_empty());

    let root_bytes = std::fs::read(&root_file).unwrap();
    for args in [&["cat", "-", "layer0.weight"][..], &["info", "-"], &["verify", "-"]] {
        let out = run(&tmp, args, root_bytes.clone());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("ztensor: <stdin>: ")
                && err.contains("3 shards")
                && err.contains("not looked up")
                && err.contains("give the root's path"),
            "{args:?}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?} printed: {}", stdout(&out));
        assert_eq!(entries(&tmp), planted, "{args:?}: only the planted files remain");
    }

    let single = d.join("single.zt");
    let out = super::ztensor(&[
        "convert",
        input.to_str().unwrap(),
        single.to_str().unwrap(),
        "--to",
        "2",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&tmp, &["cat", "-", "layer0.weight"], std::fs::read(&single).unwrap());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&by_path));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Messages and reports name standard input `<stdin>`, never the spool's temporary path.
#[test]
fn standard_input_is_named_stdin() {
    let d = scratch("stdin-named");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();
    let tmp_name = tmp.to_str().unwrap();

    let out = run(&tmp, &["info", "-"], Vec::new());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.starts_with("ztensor: <stdin>: this is a file in no format"), "{err}");
    assert!(!err.contains(tmp_name), "{err}");

    let out = run(&tmp, &["info", "-"], bytes.clone());
    assert!(stdout(&out).starts_with("file:       <stdin>\n"), "{}", stdout(&out));
    let out = run(&tmp, &["info", "--json", "-"], bytes.clone());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["file"], "<stdin>");
    let out = run(&tmp, &["verify", "-"], bytes.clone());
    assert!(stdout(&out).starts_with("<stdin>: sound"), "{}", stdout(&out));

    // A cut file: the rule's message (status 1) names <stdin> too.
    let out = run(&tmp, &["info", "-"], bytes[..bytes.len() - 20].to_vec());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.starts_with("ztensor: <stdin>: "), "{err}");
    assert!(!err.contains(tmp_name) && !err.contains("ztensor-stdin-"), "{err}");

    let out = run(&tmp, &["id", "-", "fixtures/examples/tiny-v1.2.zt"], bytes.clone());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once("  ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0].1, "<stdin>", "{text}");
    // The same bytes have the same identity, by whatever name.
    assert_eq!(lines[0].0, lines[1].0, "{text}");
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A stream that starts like no format is refused from its first bytes, not spooled to its
/// end: `/dev/zero` has none. Text and pickles are named, with the status, as for files.
#[test]
fn a_stream_is_judged_by_its_head() {
    let d = scratch("stdin-head");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["info", "-"])
        .env("TMPDIR", &tmp)
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("<stdin>: this is a file in no format"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));
    for (input, said) in [
        (b"{\"a\": 1}\n".to_vec(), "JSON text"),
        (b"\x80\x04\x95".to_vec(), "a Python pickle"),
        (Vec::new(), "a file in no format"),
    ] {
        let out = run(&tmp, &["info", "-"], input);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(said), "{said}: {}", stderr(&out));
    }
    // A real file's stream still reads.
    let bytes = std::fs::read(root().join("fixtures/examples/tiny-v1.2.zt")).unwrap();
    let out = run(&tmp, &["info", "-"], bytes);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}
