//! Every command on every file of the hostile corpus (`fixtures/hostile/`, and the foreign
//! formats' `fixtures/external/*/hostile/`), each run in a child
//! process under an address-space cap (`prlimit --as`) and a time limit: the outcome must be
//! clean, status 0, 1 or 2, never a panic, an abort, a kill or a hang.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The cap: what a real machine gives, far below what the files claim (8 GiB, 3 GiB).
const ADDRESS_SPACE: u64 = 4 << 30;

fn corpus() -> Vec<PathBuf> {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures.join("hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "zt"))
        .collect();
    for format in std::fs::read_dir(fixtures.join("external")).unwrap() {
        let hostile = format.unwrap().path().join("hostile");
        if hostile.is_dir() {
            files.extend(std::fs::read_dir(hostile).unwrap().map(|e| e.unwrap().path()));
        }
    }
    files.sort();
    files
}

/// The first object name, when the file lists.
fn first_name(file: &Path) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["ls", "--json", file.to_str()?])
        .output()
        .ok()?;
    let mut names: Vec<String> = serde_json::from_slice(&out.stdout).ok()?;
    names.sort();
    names.into_iter().next()
}

fn capped(args: &[&str]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .args(["--", "timeout", "-s", "KILL", "120", env!("CARGO_BIN_EXE_ztensor")])
        .args(args)
        .output()
        .unwrap();
    // What the command said, on stderr and (for verify's report) stdout.
    let said = [&out.stderr[..], &out.stdout[..]].concat();
    (out.status.code(), String::from_utf8_lossy(&said).into_owned(), started.elapsed())
}

#[test]
fn every_command_ends_cleanly_on_every_hostile_file() {
    let files = corpus();
    assert!(files.len() >= 8 + 14, "{files:?}");
    let scratch = std::env::temp_dir().join(format!("ztensor-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let out = |name: &str| scratch.join(name).to_str().unwrap().to_owned();
    let mut runs = 0;
    for file in &files {
        let f = file.to_str().unwrap();
        let name = first_name(file);
        let mut commands: Vec<Vec<String>> = vec![
            vec!["info".into(), f.into()],
            vec!["info".into(), "--json".into(), f.into()],
            vec!["ls".into(), f.into()],
            vec!["dump".into(), "--json".into(), f.into()],
            vec!["verify".into(), f.into()],
            vec!["verify".into(), "--threads".into(), "100000".into(), f.into()],
            vec!["convert".into(), f.into(), out("c.zt"), "--zstd".into(), "1".into()],
            vec!["convert".into(), f.into(), out("c.safetensors")],
            vec!["convert".into(), f.into(), out("c.tb")],
            vec!["repack".into(), f.into(), out("r.zt"), "--digest".into(), "blake3".into()],
            vec!["diff".into(), f.into(), f.into()],
        ];
        if let Some(n) = &name {
            commands.push(vec!["cat".into(), f.into(), n.clone()]);
            commands.push(vec!["extract".into(), f.into(), n.clone(), "-o".into(), out("e.npy")]);
        }
        for args in &commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stderr, took) = capped(&args);
            runs += 1;
            let what = format!("{args:?} ({:.1} s)", took.as_secs_f64());
            assert!(matches!(code, Some(0..=2)), "{what}: status {code:?}\n{stderr}");
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            assert!(!stderr.contains("memory allocation"), "{what}: {stderr}");
        }
    }
    // A repair of the torn file offers the scan and changes nothing.
    let torn = scratch.join("torn.zt");
    std::fs::copy(files.iter().find(|f| f.ends_with("torn-append.zt")).unwrap(), &torn).unwrap();
    let before = std::fs::read(&torn).unwrap();
    let (code, stderr, _) = capped(&["repair", torn.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("repair --scan"), "{stderr}");
    assert_eq!(std::fs::read(&torn).unwrap(), before);
    eprintln!("{runs} capped runs on {} hostile files", files.len());
    std::fs::remove_dir_all(&scratch).unwrap();
}

#[test]
fn the_bomb_is_refused_by_a_limit_that_fits_the_cap() {
    let bomb = corpus().into_iter().find(|f| f.ends_with("zstd-bomb-3g.zt")).unwrap();
    // The dump reports the object's error in its JSON; verify says no.
    let out = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .args(["--", env!("CARGO_BIN_EXE_ztensor"), "dump", "--json", bomb.to_str().unwrap()])
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&out.stdout);
    assert!(dump.contains("[decoded_too_large]"), "{dump}");
    let (code, stderr, _) = capped(&["verify", bomb.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("decoded_too_large") || stderr.contains("above the limit"), "{stderr}");
}

#[test]
fn names_reach_the_terminal_escaped_and_json_exact() {
    let file = corpus().into_iter().find(|f| f.ends_with("terminal-names.zt")).unwrap();
    let run =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_ztensor")).args(args).output().unwrap();
    let f = file.to_str().unwrap();
    for args in [vec!["ls", f], vec!["info", f]] {
        let out = run(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'));
        assert!(text.contains("two\\nlines"), "{text}");
    }
    let out = run(&["ls", "--json", f]);
    let names: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(names.contains(&"two\nlines".to_owned()), "{names:?}");
}

#[test]
fn the_object_limit_fits_the_address_space() {
    // 70,000 empty objects: accepted where memory allows, refused (not aborted) under a cap
    // whose half holds only 2^16 objects at ztensor_io::OBJECT_COST each.
    let dir = std::env::temp_dir().join(format!("ztensor-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("many.zt");
    let mut w = ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    for i in 0..70_000 {
        w.add_dense(&format!("o{i}"), &[0], ztensor_format::DType::U8, &[], &Default::default())
            .unwrap();
    }
    std::fs::write(&file, w.finish().unwrap().0).unwrap();
    let f = file.to_str().unwrap();
    let free = Command::new(env!("CARGO_BIN_EXE_ztensor")).args(["info", f]).output().unwrap();
    assert!(free.status.success(), "{}", String::from_utf8_lossy(&free.stderr));
    let cap = 512u64 << 20;
    assert!(cap / 2 / ztensor_io::OBJECT_COST <= 1 << 16);
    let out = Command::new("prlimit")
        .arg(format!("--as={cap}"))
        .args(["--", env!("CARGO_BIN_EXE_ztensor"), "info", f])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("too_many_objects"), "{said}");
    assert!(said.contains("lowered to fit this machine"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}
