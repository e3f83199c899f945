//! Files on disk survive real processes: kills at each named step of append and publication
//! (`ztensor_io::pause`) and at arbitrary moments during append and convert,
//! SIGINT and SIGTERM, writers racing on one file, readers looping while appends run, and
//! output paths that are links, private files, special files or very long names.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ztensor_format::{DType, Version};
use ztensor_io::{FileWriter, Reader, WriteOptions};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ztensor")
}

/// A scratch directory that lists its names.
struct Dir(ztensor_testkit::Scratch);

impl Dir {
    fn new(name: &str) -> Dir {
        Dir(ztensor_testkit::scratch(&format!("durable-{name}")))
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Every name in the directory, sorted.
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Bytes that compress, slowly at high levels.
fn data(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % 3 == 0 { (x % 7) as u8 } else { (i / 97) as u8 }
        })
        .collect()
}

/// A zTensor 1.2 file with the given raw u8 objects.
fn zt(path: &Path, objects: &[(&str, usize)], seed: u32) {
    let mut w = FileWriter::create(path, Version::V1_2).unwrap();
    for (i, (name, len)) in objects.iter().enumerate() {
        let bytes = data(*len, seed + i as u32);
        w.add_dense(name, &[*len as u64], DType::U8, &bytes, &WriteOptions::raw()).unwrap();
    }
    w.finish().unwrap();
}

fn names_in(path: &Path) -> Vec<String> {
    let r = Reader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v: Vec<String> = r.manifest().objects().map(|o| o.name().to_owned()).collect();
    v.sort();
    v
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin()).args(args).output().unwrap()
}

fn spawn(args: &[&str]) -> Child {
    Command::new(bin()).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
}

/// The tool run with `args` and held at pause point `point` (`ztensor_io::pause`): returns once
/// the process is there, still running, for the test to kill. Fails the test if the process
/// ends, or takes a minute, without reaching it.
pub(crate) fn paused(args: &[&str], point: &str) -> Child {
    static FIFOS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = FIFOS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fifo = std::env::temp_dir().join(format!("ztensor-pause-{}-{n}", std::process::id()));
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    let mut child = Command::new(bin())
        .args(args)
        .env("ZTENSOR_PAUSE_AT", format!("{point}={}", fifo.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end opens (and blocks) on a thread of its own, so that a process that never
    // reaches the point cannot hold the test.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = fifo.clone();
    std::thread::spawn(move || {
        let said = std::fs::read_to_string(&reader).unwrap_or_default();
        let _ = tx.send(said);
    });
    let start = Instant::now();
    let said = loop {
        if let Ok(said) = rx.recv_timeout(Duration::from_millis(20)) {
            break said;
        }
        let ended = child.try_wait().unwrap();
        if ended.is_some() || start.elapsed() > Duration::from_secs(60) {
            // Unblock the reader, then fail.
            let _ = std::fs::write(&fifo, "");
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{args:?} did not reach {point} ({ended:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let _ = std::fs::remove_file(&fifo);
    assert_eq!(said.trim(), point);
    assert!(child.try_wait().unwrap().is_none(), "held at {point}, yet it ended");
    child
}

fn signal(child: &Child, name: &str) {
    let ok = Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status();
    assert!(ok.unwrap().success());
}

/// A small deterministic sequence of delays in `0..max`.
fn delays(n: usize, max: Duration) -> Vec<Duration> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            max.mul_f64((x >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn temporaries(d: &Dir) -> Vec<String> {
    d.names().into_iter().filter(|n| n.ends_with(".ztmp") || n.ends_with(".zt-journal")).collect()
}

#[test]
fn kills_during_append_leave_the_old_file_or_the_new_one() {
    let d = Dir::new("kill-append");
    let (target, source) = (d.join("t.zt"), d.join("src.zt"));
    zt(&target, &[("a", 1000), ("b", 5000)], 1);
    zt(&source, &[("big", 24 << 20), ("small", 100)], 2);
    let old = std::fs::read(&target).unwrap();
    // How long a whole append takes here, to spread the kills over it.
    let start = Instant::now();
    assert!(run(&["append", s(&target), "--from", s(&source)]).status.success());
    let full = start.elapsed();
    let new = std::fs::read(&target).unwrap();

    let (mut old_seen, mut new_seen) = (0, 0);
    for delay in delays(16, full.mul_f64(1.2)) {
        std::fs::write(&target, &old).unwrap();
        let mut child = spawn(&["append", s(&target), "--from", s(&source)]);
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        // Every command reads it, directly, as one of the two states...
        let listed = run(&["ls", s(&target)]);
        assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        // ... and repair makes the bytes exactly those of that state.
        let repaired = run(&["repair", s(&target)]);
        assert!(repaired.status.success(), "{}", String::from_utf8_lossy(&repaired.stderr));
        let bytes = std::fs::read(&target).unwrap();
        if listed == "a\nb\n" {
            assert_eq!(bytes, old);
            old_seen += 1;
        } else {
            assert_eq!(listed, "a\nb\nbig\nsmall\n");
            assert_eq!(bytes, new);
            new_seen += 1;
        }
        assert!(temporaries(&d).is_empty(), "{:?}", d.names());
        assert!(run(&["verify", s(&target)]).status.success());
    }
    // Where the kills land depends on the machine's load: each state is reached for certain
    // by `appends_killed_at_each_step_leave_the_old_file_or_the_new_one`.
    eprintln!("append kills: {old_seen} left the old file, {new_seen} the new one");
}

/// An append killed at each of its steps: before the journal is removed every reader sees the
/// old file and repair restores its exact bytes; after, the new one.
#[test]
fn appends_killed_at_each_step_leave_the_old_file_or_the_new_one() {
    use ztensor_io::pause::at;
    let d = Dir::new("pause-append");
    let (target, source) = (d.join("t.zt"), d.join("src.zt"));
    zt(&target, &[("a", 1000), ("b", 5000)], 1);
    zt(&source, &[("big", 1 << 20), ("small", 100)], 2);
    let old = std::fs::read(&target).unwrap();
    assert!(run(&["append", s(&target), "--from", s(&source)]).status.success());
    let new = std::fs::read(&target).unwrap();
    let steps = [
        (at::APPEND_JOURNAL, false),
        (at::APPEND_MANIFEST, false),
        (at::APPEND_TRAILER, false),
        (at::APPEND_COMMITTED, true),
    ];
    for (point, committed) in steps {
        std::fs::write(&target, &old).unwrap();
        let mut child = paused(&["append", s(&target), "--from", s(&source)], point);
        child.kill().unwrap();
        child.wait().unwrap();
        let listed = run(&["ls", s(&target)]);
        assert!(listed.status.success(), "{point}: {}", String::from_utf8_lossy(&listed.stderr));
        let want = if committed { "a\nb\nbig\nsmall\n" } else { "a\nb\n" };
        assert_eq!(String::from_utf8_lossy(&listed.stdout), want, "{point}");
        let repaired = run(&["repair", s(&target)]);
        assert!(
            repaired.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&repaired.stderr)
        );
        let bytes = std::fs::read(&target).unwrap();
        assert!(&bytes == if committed { &new } else { &old }, "{point}: other bytes");
        assert!(temporaries(&d).is_empty(), "{point}: {:?}", d.names());
        assert!(run(&["verify", s(&target)]).status.success(), "{point}");
    }
}

/// A conversion killed with its temporary complete and synced leaves the target as it was
/// (and the temporary, for the next write to sweep); killed just after the rename, the target
/// is the new file and nothing else is left.
#[test]
fn conversions_killed_before_and_after_the_rename() {
    use ztensor_io::pause::at;
    let d = Dir::new("pause-convert");
    let (input, output) = (d.join("in.zt"), d.join("out.zt"));
    zt(&input, &[("w", 1 << 20)], 3);
    zt(&output, &[("previous", 10)], 4);
    let previous = std::fs::read(&output).unwrap();
    let args = ["convert", s(&input), s(&output), "--zstd", "3"];
    assert!(run(&args).status.success());
    let converted = std::fs::read(&output).unwrap();

    std::fs::write(&output, &previous).unwrap();
    let mut child = paused(&args, at::PUBLISH_SYNCED);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(std::fs::read(&output).unwrap() == previous, "the target changed before the rename");
    assert_eq!(temporaries(&d).len(), 1, "{:?}", d.names());

    let mut child = paused(&args, at::PUBLISH_RENAMED);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(std::fs::read(&output).unwrap() == converted, "the rename did not land");
    // The killed writer's own temporary was renamed; the earlier one was swept on creation.
    assert_eq!(d.names(), ["in.zt", "out.zt"]);
}

#[test]
fn kills_during_convert_never_touch_the_target_and_the_next_write_sweeps_up() {
    let d = Dir::new("kill-convert");
    let (input, output) = (d.join("in.zt"), d.join("out.zt"));
    zt(&input, &[("w", 4 << 20)], 3);
    zt(&output, &[("previous", 10)], 4);
    let previous = std::fs::read(&output).unwrap();
    let args = ["convert", s(&input), s(&output), "--zstd", "9", "--threads", "1"];
    let start = Instant::now();
    let mut child = spawn(&args);
    child.wait().unwrap();
    let full = start.elapsed();
    let converted = std::fs::read(&output).unwrap();

    let mut left_behind = 0;
    for delay in delays(10, full) {
        std::fs::write(&output, &previous).unwrap();
        let mut child = spawn(&args);
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let now = std::fs::read(&output).unwrap();
        assert!(now == previous || now == converted, "a third file after a kill");
        left_behind += temporaries(&d).len();
    }
    // The next write to the same target removes what killed writers left.
    assert!(run(&args).status.success());
    assert_eq!(std::fs::read(&output).unwrap(), converted);
    assert_eq!(d.names(), ["in.zt", "out.zt"]);
    eprintln!("convert kills: {left_behind} temporary files left, all swept by the next write");
}

#[test]
fn sigint_and_sigterm_remove_temporaries_and_undo_appends() {
    let d = Dir::new("signals");
    let (input, output, target) = (d.join("in.zt"), d.join("out.zt"), d.join("t.zt"));
    zt(&input, &[("w", 1 << 20)], 5);
    for (name, status) in [("INT", 130), ("TERM", 143)] {
        // Convert, held with its temporary complete: the signal lands before the rename.
        let child = paused(
            &["convert", s(&input), s(&output), "--zstd", "3"],
            ztensor_io::pause::at::PUBLISH_SYNCED,
        );
        assert_eq!(temporaries(&d).len(), 1, "{:?}", d.names());
        signal(&child, name);
        let mut child = child;
        let code = child.wait().unwrap().code();
        assert_eq!(code, Some(status), "SIG{name} during convert");
        assert_eq!(d.names(), ["in.zt"], "SIG{name} during convert");

        // Append, held with its journal written: the file goes back to exactly its old bytes.
        zt(&target, &[("a", 100)], 6);
        let old = std::fs::read(&target).unwrap();
        let mut child = paused(
            &["append", s(&target), "--from", s(&input), "--zstd", "3"],
            ztensor_io::pause::at::APPEND_JOURNAL,
        );
        assert!(temporaries(&d).iter().any(|n| n.ends_with(".zt-journal")), "{:?}", d.names());
        signal(&child, name);
        let code = child.wait().unwrap().code();
        assert_eq!(code, Some(status), "SIG{name} during append");
        assert_eq!(std::fs::read(&target).unwrap(), old, "SIG{name} during append");
        assert_eq!(d.names(), ["in.zt", "t.zt"], "SIG{name} during append");
        std::fs::remove_file(&target).unwrap();
    }
}

#[test]
fn a_full_disk_during_append_or_convert_leaves_everything_as_it_was() {
    // The kernel's file size limit (RLIMIT_FSIZE, set by prlimit) makes writes past a byte fail
    // the way a full disk does, in a real process, without privileges.
    let d = Dir::new("full-disk");
    let (target, source, output) = (d.join("t.zt"), d.join("s.zt"), d.join("out.zt"));
    zt(&target, &[("a", 100)], 13);
    zt(&source, &[("big", 3 << 20), ("small", 5000)], 14);
    zt(&output, &[("previous", 10)], 15);
    let (old, previous) = (std::fs::read(&target).unwrap(), std::fs::read(&output).unwrap());
    let limited = |limit: u64, args: &[&str]| {
        Command::new("prlimit")
            .arg(format!("--fsize={limit}"))
            .arg("--")
            .arg(bin())
            .args(args)
            .output()
            .unwrap()
    };
    let full = source.metadata().unwrap().len() + old.len() as u64;
    let mut limits: Vec<u64> = (1..=8).map(|i| old.len() as u64 + full * i / 9).collect();
    limits.extend([old.len() as u64 + 1, 4096, 8192, 1 << 20, 2 << 20]);
    for limit in limits {
        let out = limited(limit, &["append", s(&target), "--from", s(&source)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "limit {limit}: {err}");
        assert!(err.contains("holds exactly its old bytes"), "limit {limit}: {err}");
        assert_eq!(std::fs::read(&target).unwrap(), old, "limit {limit}");

        let out = limited(limit, &["convert", s(&source), s(&output), "--zstd", "1"]);
        if out.status.success() {
            // The compressed file fitted under the limit.
            assert_eq!(names_in(&output), ["big", "small"]);
            std::fs::write(&output, &previous).unwrap();
        } else {
            assert_eq!(out.status.code(), Some(2), "limit {limit}");
            assert_eq!(std::fs::read(&output).unwrap(), previous, "limit {limit}");
            // The error names the user's output, never the temporary file beside it.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(s(&output)) && !err.contains("ztmp"), "limit {limit}: {err}");
        }
        assert_eq!(d.names(), ["out.zt", "s.zt", "t.zt"], "limit {limit}");
    }
}

/// A safetensors file of one U8 tensor of `len` bytes.
fn safetensors(path: &Path, len: usize) {
    let header = format!(r#"{{"w":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}}}}"#);
    let mut header = header.into_bytes();
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(&header);
    bytes.extend(data(len, 99));
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn sigint_during_a_foreign_conversion_leaves_nothing() {
    // safetensors -> TensorBuffers writes the output's temporary file beside it: a signal
    // removes it, whenever it lands.
    let d = Dir::new("scratch");
    let (input, output) = (d.join("in.safetensors"), d.join("out.tb"));
    safetensors(&input, 64 << 20);
    // The conversion is one step (no scratch file), so signals are spread over the time one
    // takes here, measured first.
    let started = Instant::now();
    assert!(run(&["convert", s(&input), s(&output)]).status.success());
    let took = started.elapsed();
    std::fs::remove_file(&output).unwrap();
    // For certain: a signal while the temporary is complete, before the rename.
    let child = paused(&["convert", s(&input), s(&output)], ztensor_io::pause::at::PUBLISH_SYNCED);
    signal(&child, "INT");
    let mut child = child;
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(d.names(), ["in.safetensors"], "a signal before the rename");
    // And spread over the conversion, wherever they land.
    let mut interrupted = 0;
    for delay in delays(8, took.mul_f64(0.6)) {
        let mut child = spawn(&["convert", s(&input), s(&output)]);
        wait_for("a temporary file", || !temporaries(&d).is_empty() || output.exists());
        std::thread::sleep(delay);
        signal(&child, "INT");
        match child.wait().unwrap().code() {
            Some(130) => {
                interrupted += 1;
                assert!(temporaries(&d).is_empty(), "after {delay:?}: {:?}", d.names());
                // A signal after the rename finds the output complete.
                if output.exists() {
                    assert!(run(&["verify", s(&output)]).status.success(), "after {delay:?}");
                    std::fs::remove_file(&output).unwrap();
                }
                assert_eq!(d.names(), ["in.safetensors"], "after {delay:?}");
            }
            Some(0) => {
                assert_eq!(d.names(), ["in.safetensors", "out.tb"]);
                std::fs::remove_file(&output).unwrap();
            }
            other => panic!("status {other:?}"),
        }
    }
    eprintln!("foreign conversion: {interrupted} of 8 signals landed during it");
}

#[test]
fn concurrent_writers_take_turns_and_lose_nothing() {
    let d = Dir::new("concurrent");
    let target = d.join("t.zt");
    let sources: Vec<PathBuf> = (0..2).map(|i| d.join(&format!("s{i}.zt"))).collect();
    zt(&sources[0], &[("x0", 6 << 20), ("y0", 10)], 7);
    zt(&sources[1], &[("x1", 6 << 20), ("y1", 10)], 8);
    for trial in 0..3 {
        // Two appends at once (one compressing, one raw): both land, each object's bytes its own.
        zt(&target, &[("a", 100), ("gone", 10)], 9);
        let first = spawn(&["append", s(&target), "--from", s(&sources[0]), "--zstd", "3"]);
        let second = spawn(&["append", s(&target), "--from", s(&sources[1])]);
        for child in [first, second] {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "trial {trial}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(names_in(&target), ["a", "gone", "x0", "x1", "y0", "y1"], "trial {trial}");
        assert!(run(&["verify", s(&target)]).status.success());
        let r = Reader::open(&target).unwrap();
        assert_eq!(
            r.component("x0", "data").and_then(|c| c.decoded()).unwrap().into_owned(),
            data(6 << 20, 7)
        );
        assert_eq!(
            r.component("x1", "data").and_then(|c| c.decoded()).unwrap().into_owned(),
            data(6 << 20, 8)
        );

        // An append racing a remove in place: whichever goes first, the appended objects stay
        // and the removed one goes.
        zt(&target, &[("a", 100), ("gone", 10)], 9);
        let append = spawn(&["append", s(&target), "--from", s(&sources[1]), "--zstd", "3"]);
        let remove = spawn(&["remove", s(&target), "gone", "-o", s(&target)]);
        for child in [append, remove] {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "trial {trial}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(names_in(&target), ["a", "x1", "y1"], "trial {trial}");
        assert!(temporaries(&d).is_empty(), "{:?}", d.names());
    }
}

#[test]
fn crossed_rewrites_never_wait_on_each_other() {
    // remove A -> B beside remove B -> A: each reads one file and replaces the other; neither
    // holds a lock while it reads, so they cannot deadlock.
    let d = Dir::new("crossed");
    let (a, b) = (d.join("a.zt"), d.join("b.zt"));
    for trial in 0..5 {
        zt(&a, &[("big", 8 << 20), ("x", 10), ("y", 10)], 60 + trial);
        zt(&b, &[("big", 8 << 20), ("x", 10), ("y", 10)], 70 + trial);
        let started = Instant::now();
        let one = spawn(&["remove", s(&a), "x", "-o", s(&b)]);
        let two = spawn(&["remove", s(&b), "y", "-o", s(&a)]);
        for child in [one, two] {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "trial {trial}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(started.elapsed() < Duration::from_secs(60), "trial {trial}");
        assert!(temporaries(&d).is_empty(), "{:?}", d.names());
    }
}

#[test]
fn no_wait_fails_at_once_while_another_process_writes() {
    let d = Dir::new("no-wait");
    let (target, source) = (d.join("t.zt"), d.join("s.zt"));
    zt(&target, &[("a", 100)], 10);
    zt(&source, &[("slow", 8 << 20)], 11);
    let mut slow = spawn(&["append", s(&target), "--from", s(&source), "--zstd", "19"]);
    wait_for("the append to start writing", || {
        temporaries(&d).iter().any(|n| n.ends_with(".zt-journal"))
    });
    for args in [
        vec!["append", s(&target), "--from", s(&source), "--no-wait"],
        vec!["remove", s(&target), "a", "-o", s(&target), "--no-wait"],
        vec!["convert", s(&source), s(&target), "--no-wait"],
    ] {
        let started = Instant::now();
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is being written by another process"), "{args:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    signal(&slow, "TERM");
    slow.wait().unwrap();
    assert_eq!(names_in(&target), ["a"]);
}

#[test]
fn readers_looping_during_appends_always_see_a_whole_file() {
    let d = Dir::new("readers");
    let target = d.join("t.zt");
    zt(&target, &[("base", 100)], 12);
    let sources: Vec<PathBuf> = (0..12)
        .map(|i| {
            let p = d.join(&format!("s{i}.zt"));
            zt(&p, &[(&format!("o{i}"), 4 << 20)], 40 + i);
            p
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, target) = (stop.clone(), target.clone());
        std::thread::spawn(move || {
            let (mut runs, mut failures) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let out = run(&["info", s(&target)]);
                runs += 1;
                if !out.status.success() {
                    failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
                }
            }
            (runs, failures)
        })
    };
    for source in &sources {
        let out = run(&["append", s(&target), "--from", s(source)]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (runs, failures) = reader.join().unwrap();
    eprintln!("{runs} reader runs during 12 appends, {} failed", failures.len());
    assert!(failures.is_empty(), "{failures:?}");
    assert!(runs > 0);
    assert_eq!(names_in(&target).len(), 13);
}

#[test]
fn output_paths_links_modes_special_files_and_long_names() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let d = Dir::new("paths");
    let input = d.join("in.zt");
    zt(&input, &[("w", 1000)], 30);

    // A symlink target: the file it names is replaced, the link stays a link.
    let real = d.join("real.zt");
    zt(&real, &[("old", 10)], 31);
    let link = d.join("link.zt");
    std::os::unix::fs::symlink("real.zt", &link).unwrap();
    assert!(run(&["convert", s(&input), s(&link)]).status.success());
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(names_in(&real), ["w"]);
    // Append and remove through the link too.
    assert!(run(&["remove", s(&link), "w", "-o", s(&link)]).status.success());
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(names_in(&real).is_empty());

    // A private file stays private, and keeps its owner and group.
    let private = d.join("private.zt");
    zt(&private, &[("old", 10)], 32);
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let owner = std::fs::metadata(&private).unwrap();
    let root = owner.uid() == 0;
    if root {
        std::os::unix::fs::chown(&private, Some(4321), Some(4322)).unwrap();
    }
    let before = std::fs::metadata(&private).unwrap();
    assert!(run(&["convert", s(&input), s(&private), "--zstd", "3"]).status.success());
    let after = std::fs::metadata(&private).unwrap();
    assert_eq!(after.mode() & 0o7777, 0o600);
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert_ne!(after.ino(), before.ino(), "replaced by a new file");

    // A FIFO, a directory: refused before any work, untouched, and no hang.
    let fifo = d.join("fifo.zt");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let sub = d.join("sub.zt");
    std::fs::create_dir(&sub).unwrap();
    for target in [&fifo, &sub] {
        for args in [
            vec!["convert", s(&input), s(target)],
            vec!["repack", s(&input), s(target)],
            vec!["remove", s(&input), "w", "-o", s(target)],
            vec!["extract", s(&input), "w", "-o", s(target)],
        ] {
            // `convert` into a directory writes a sharded checkpoint there (below).
            if target == &sub && args[0] == "convert" {
                continue;
            }
            let out = run(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("refusing to replace"), "{args:?}: {err}");
        }
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata(&sub).unwrap().is_dir());
    let out = run(&["convert", s(&input), s(&sub)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(sub.join("in.zt").is_file() && sub.join("in.zt.index.json").is_file());

    // A name near NAME_MAX: the temporary name still fits.
    let long = d.join(&format!("{}.zt", "n".repeat(250)));
    let out = run(&["convert", s(&input), s(&long), "--zstd", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(names_in(&long), ["w"]);
    assert!(temporaries(&d).is_empty(), "{:?}", d.names());
}
