//! Sharded output as a scheduler runs it: `plan`, then `run` units as separate processes in a
//! shuffled order, some killed mid-way and run again, two attempts of one unit racing, then
//! `finalize`: the shards and index equal, byte for byte, what one `convert IN OUTDIR/` writes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use ztensor_format::{DType, Version};
use ztensor_io::{FileWriter, WriteOptions};

use crate::{stderr, stdout, ztensor};

fn scratch(name: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("cli-sharded-{name}"))
}

/// 16 tensors of 1 MiB of weakly compressible f32 values.
fn input(dir: &Path) -> PathBuf {
    let path = dir.join("model.zt");
    let mut w = FileWriter::create(&path, Version::V1_2).unwrap();
    let mut rng = ztensor_testkit::Rng::new(0x9e37_79b9_7f4a_7c15);
    for i in 0..16 {
        let data: Vec<u8> = (0..(1 << 18))
            .flat_map(|_| ((rng.next_u64() >> 40) as f32 * 1e-6).to_le_bytes())
            .collect();
        w.add_dense(
            &format!("layer.{i:02}.weight"),
            &[1 << 18],
            DType::F32,
            &data,
            &WriteOptions::raw(),
        )
        .unwrap();
    }
    w.finish().unwrap();
    path
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ztensor")).args(args).spawn().expect("ztensor runs")
}

fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn units_as_processes_killed_and_rerun_equal_one_process() {
    let d = scratch("units");
    let model = input(&d);
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let options = ["--zstd", "3", "--digest", "sha256", "--shard-size", "2MiB"];

    // One process.
    let one = format!("{}/", s(&d.join("one")));
    let model_path = s(&model);
    let out = ztensor(
        &[&["convert", "-q", "--threads", "2", model_path.as_str(), one.as_str()][..], &options]
            .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A plan, then units in a shuffled order; every other one killed with its shard written
    // and synced, but not yet in place.
    let plan = s(&d.join("plan.json"));
    let many = format!("{}/", s(&d.join("many")));
    let out = ztensor(
        &[&["plan", model_path.as_str(), many.as_str(), "-o", plan.as_str()][..], &options]
            .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("planned 8 units"), "{}", stdout(&out));
    // A unit the plan does not have is a mistake of the request (status 2), naming those it has.
    let out = ztensor(&["run", "-q", plan.as_str(), "--unit", "8"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no unit 8: the plan has 8 (0 to 7)"), "{}", stderr(&out));
    let order = [5usize, 2, 7, 0, 3, 6, 1, 4];
    for (i, unit) in order.iter().enumerate() {
        let unit = unit.to_string();
        let args = ["run", "-q", "--threads", "1", plan.as_str(), "--unit", &unit];
        let mut child = if i % 2 == 0 {
            let mut child = crate::durability::paused(&args, ztensor_io::pause::at::PUBLISH_SYNCED);
            child.kill().unwrap();
            child
        } else {
            spawn(&args)
        };
        child.wait().unwrap();
    }
    // Not every unit is done: finalize refuses and names what is missing.
    let out = ztensor(&["finalize", plan.as_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not done"), "{}", stderr(&out));
    // Every unit again (the finished ones are verified and skipped); unit 3 twice at once.
    let racing = [
        spawn(&["run", "-q", plan.as_str(), "--unit", "3"]),
        spawn(&["run", "-q", plan.as_str(), "--unit", "3"]),
    ];
    for mut child in racing {
        assert!(child.wait().unwrap().success());
    }
    for unit in order {
        let out = Command::new(env!("CARGO_BIN_EXE_ztensor"))
            .args(["run", plan.as_str()])
            .env("SLURM_ARRAY_TASK_ID", unit.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "unit {unit}: {}", stderr(&out));
        assert!(stdout(&out).contains(&format!("unit {unit}: ")), "{}", stdout(&out));
    }
    let out = ztensor(&["finalize", "--deep", plan.as_str()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The same shards and index, and nothing else left behind but the receipts.
    assert_eq!(contents(&d.join("one")), contents(&d.join("many")));
    let names: Vec<String> = contents(&d.join("many")).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 9, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    // And it reads back whole.
    let index = d.join("many/model.zt.index.json");
    let out = ztensor(&["verify", index.to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let out = ztensor(&["diff", index.to_str().unwrap(), model.to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("16 the same"), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sharded_output_needs_a_directory_and_a_ztensor_target() {
    let out =
        ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", "x.zt", "--shard-size", "1MiB"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("give an output directory"), "{}", stderr(&out));
    let refused = scratch("refused");
    let d = refused.join("t");
    let dir = format!("{}/", d.display());
    let out = ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", &dir, "--to", "safetensors"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("not zTensor"), "{}", stderr(&out));
    let out = ztensor(&["run", "no-such-plan.json"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Another user of a shared scratch directory plants links at the names the tool will choose
/// (a shard, the receipts directory, a receipt): `run` and `convert IDX OUTDIR/` refuse them
/// by name, and the files they point at are untouched.
#[cfg(unix)]
#[test]
fn planted_links_are_refused_and_victims_untouched() {
    use std::os::unix::fs::symlink;
    let d = scratch("planted");
    let model = input(&d);
    let victim = d.join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let (m, v) = (model.to_str().unwrap(), victim.to_str().unwrap());

    // convert IN OUTDIR/ with a shard's name taken by a link.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    symlink(&victim, out.join("model-00001-of-00002.zt")).unwrap();
    let o = format!("{}/", out.display());
    let r = ztensor(&["convert", m, &o, "--shard-size", "9MiB"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("symbolic link") && stderr(&r).contains("model-00001"),
        "{}",
        stderr(&r)
    );

    // plan + run with the receipts directory, then a receipt, taken by links.
    let plan = d.join("plan.json");
    let p = plan.to_str().unwrap();
    let out2 = d.join("out2");
    let o2 = format!("{}/", out2.display());
    assert!(ztensor(&["plan", m, &o2, "--shard-size", "9MiB", "-o", p]).status.success());
    std::fs::create_dir(&out2).unwrap();
    symlink(&elsewhere, out2.join(".ztensor-receipts")).unwrap();
    let r = ztensor(&["run", p, "--unit", "0"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains(".ztensor-receipts") && stderr(&r).contains("symbolic link"));
    std::fs::remove_file(out2.join(".ztensor-receipts")).unwrap();
    std::fs::create_dir(out2.join(".ztensor-receipts")).unwrap();
    symlink(v, out2.join(".ztensor-receipts/unit-00000.json")).unwrap();
    let r = ztensor(&["run", p, "--unit", "0"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("unit-00000.json"), "{}", stderr(&r));

    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Outputs never replace inputs: a sharded conversion into the input's own directory that
/// would rewrite its index, and a plan written over an input shard, are refused; the summary
/// names the index just written, not another one in the directory.
#[test]
fn outputs_never_replace_inputs_and_the_summary_names_the_index_written() {
    let d = scratch("overinput");
    let model = input(&d);
    let src = d.join("src");
    let s = format!("{}/", src.display());
    let r = ztensor(&["convert", model.to_str().unwrap(), &s, "--shard-size", "9MiB"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let index = src.join("model.zt.index.json");
    assert!(stdout(&r).contains("model.zt.index.json"), "{}", stdout(&r));
    let before = contents(&src);

    let i = index.to_str().unwrap();
    let r = ztensor(&["convert", i, &s, "--exclude", "layer.00*", "--shard-size", "100000"]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains("is also the input"), "{}", stderr(&r));
    let shard = src.join("model-00001-of-00002.zt");
    let r = ztensor(&[
        "plan",
        i,
        &format!("{}/", d.join("o").display()),
        "-o",
        shard.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("would replace it"), "{}", stderr(&r));
    assert_eq!(contents(&src), before);

    // Another index sorts after the one written (one that does not even read): it is a
    // checkpoint's, so the directory is refused, and with --force removed; the summary line
    // names the index written, and the note the one removed.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("zzz.zt.index.json"), b"{}").unwrap();
    let o = format!("{}/", out.display());
    let r = ztensor(&["convert", model.to_str().unwrap(), &o, "--shard-size", "9MiB"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("zzz.zt.index.json"), "{}", stderr(&r));
    let r = ztensor(&["convert", model.to_str().unwrap(), &o, "--shard-size", "9MiB", "--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let said = stdout(&r);
    let wrote = said.lines().find(|l| l.starts_with("wrote")).expect(&said);
    assert!(wrote.contains("model.zt.index.json") && !wrote.contains("zzz"), "{said}");
    assert!(said.contains("--force removed the checkpoint") && said.contains("zzz"), "{said}");
    assert!(!out.join("zzz.zt.index.json").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

/// FIFOs and devices where an index, plan or shard is read are refused at once, never waited
/// on or read until memory runs out.
#[cfg(unix)]
#[test]
fn special_files_on_the_read_side_are_refused_at_once() {
    let d = scratch("special");
    let fifo = |name: &str| {
        let p = d.join(name);
        assert!(Command::new("mkfifo").arg(&p).status().unwrap().success());
        p.to_str().unwrap().to_owned()
    };
    let index = fifo("model.zt.index.json");
    let plan = fifo("plan.json");
    let started = std::time::Instant::now();
    for args in [
        vec!["info", index.as_str()],
        vec!["verify", index.as_str()],
        vec!["convert", index.as_str(), "x.zt"],
        vec!["run", plan.as_str(), "--unit", "0"],
        vec!["finalize", plan.as_str()],
        vec!["run", "/dev/zero", "--unit", "0"],
    ] {
        let r = ztensor(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("a FIFO") || e.contains("a device"), "{args:?}: {e}");
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    // A shard of a sharded checkpoint that is a FIFO.
    let model = input(&d);
    let src = d.join("src");
    let s = format!("{}/", src.display());
    assert!(
        ztensor(&["convert", model.to_str().unwrap(), &s, "--shard-size", "9MiB"]).status.success()
    );
    let shard = src.join("model-00002-of-00002.zt");
    std::fs::remove_file(&shard).unwrap();
    assert!(Command::new("mkfifo").arg(&shard).status().unwrap().success());
    let r = ztensor(&["info", src.join("model.zt.index.json").to_str().unwrap()]);
    assert_ne!(r.status.code(), Some(0));
    assert!(stderr(&r).contains("a FIFO"), "{}", stderr(&r));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A directory that holds a sharded checkpoint is refused (status 2, naming what is there,
/// nothing changed), the very same conversion run again too; `--force` removes that checkpoint,
/// named in the summary, and nothing else.
#[test]
fn a_directory_holding_a_checkpoint_is_refused_unless_forced() {
    let d = scratch("occupied");
    let model = input(&d);
    let m = model.to_str().unwrap();
    let out = d.join("out");
    let o = format!("{}/", out.display());
    let r = ztensor(&["convert", m, &o, "--shard-size", "9MiB"]);
    assert!(r.status.success(), "{}", stderr(&r));
    std::fs::write(out.join("README.txt"), b"mine").unwrap();
    let before = contents(&out);
    for size in ["9MiB", "4MiB"] {
        let r = ztensor(&["convert", m, &o, "--shard-size", size]);
        assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("holds a sharded checkpoint already"), "{e}");
        assert!(e.contains("model.zt.index.json") && e.contains("model-00002-of-00002.zt"), "{e}");
        assert!(e.contains("--force"), "{e}");
        assert_eq!(contents(&out), before, "nothing changed");
    }
    // Forced, with another split: the old shards are gone and named, the new ones there.
    let r = ztensor(&["convert", m, &o, "--shard-size", "4MiB", "--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let said = stdout(&r);
    let note = said.lines().find(|l| l.starts_with("--force removed")).expect(&said);
    for old in ["model.zt.index.json", "model-00001-of-00002.zt", "model-00002-of-00002.zt"] {
        assert!(note.contains(old), "{note}");
    }
    let names: Vec<String> = contents(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "README.txt",
            "model-00001-of-00004.zt",
            "model-00002-of-00004.zt",
            "model-00003-of-00004.zt",
            "model-00004-of-00004.zt",
            "model.zt.index.json"
        ]
    );
    assert_eq!(std::fs::read(out.join("README.txt")).unwrap(), b"mine");
    let index = out.join("model.zt.index.json");
    assert!(ztensor(&["verify", index.to_str().unwrap()]).status.success());

    // Receipts of `run` are a checkpoint in the making: refused, and cleared with the shard
    // they name.
    let plan = d.join("plan.json");
    let p = plan.to_str().unwrap();
    let planned = d.join("planned");
    let pd = format!("{}/", planned.display());
    assert!(ztensor(&["plan", m, &pd, "--shard-size", "9MiB", "-o", p]).status.success());
    assert!(ztensor(&["run", "-q", p, "--unit", "0"]).status.success());
    let r = ztensor(&["convert", m, &pd]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains(".ztensor-receipts/unit-00000.json"), "{}", stderr(&r));
    let r = ztensor(&["convert", m, &pd, "--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let names: Vec<String> = contents(&planned).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["model.zt", "model.zt.index.json"]);
    assert!(!planned.join(".ztensor-receipts").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

/// The same for sharded zTensor 2 outputs (`--to 2`): an earlier one is refused unless
/// `--force` (its root and shards named, then removed), and so is a 1.x checkpoint there;
/// a 1.x sharded conversion into a directory holding a zTensor 2 one is refused too.
#[test]
fn a_directory_holding_a_zten2_checkpoint_is_refused_unless_forced() {
    let d = scratch("occupied-2");
    let model = input(&d);
    let m = model.to_str().unwrap();
    let out = d.join("out");
    let o = format!("{}/", out.display());
    let r = ztensor(&["convert", m, &o, "--to", "2", "--shard-size", "9MiB"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let first: Vec<String> = contents(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(first, ["model-00001-of-00002.zt", "model-00002-of-00002.zt", "model.zt"]);
    std::fs::write(out.join("README.txt"), b"mine").unwrap();
    let before = contents(&out);
    for args in [&["--to", "2", "--shard-size", "4MiB"][..], &["--shard-size", "4MiB"][..]] {
        let mut all = vec!["convert", m, &o];
        all.extend_from_slice(args);
        let r = ztensor(&all);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("holds a sharded checkpoint already"), "{e}");
        assert!(e.contains("model.zt") && e.contains("model-00002-of-00002.zt"), "{e}");
        assert_eq!(contents(&out), before, "nothing changed");
    }
    let r = ztensor(&["convert", m, &o, "--to", "2", "--shard-size", "4MiB", "--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let said = stdout(&r);
    let note = said.lines().find(|l| l.starts_with("--force removed")).expect(&said);
    assert!(note.contains("model-00001-of-00002.zt") && note.contains("model.zt"), "{note}");
    let names: Vec<String> = contents(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "README.txt",
            "model-00001-of-00004.zt",
            "model-00002-of-00004.zt",
            "model-00003-of-00004.zt",
            "model-00004-of-00004.zt",
            "model.zt"
        ]
    );
    assert!(ztensor(&["verify", out.join("model.zt").to_str().unwrap()]).status.success());
    // A 1.x sharded checkpoint there is refused by a `--to 2` conversion, and cleared by one
    // with --force, index and shards.
    let one = d.join("one");
    let od = format!("{}/", one.display());
    assert!(ztensor(&["convert", m, &od, "--shard-size", "9MiB"]).status.success());
    let r = ztensor(&["convert", m, &od, "--to", "2"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("model.zt.index.json"), "{}", stderr(&r));
    let r = ztensor(&["convert", m, &od, "--to", "2", "--force"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let names: Vec<String> = contents(&one).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["model-00001-of-00001.zt", "model.zt"]);
    assert_eq!(&std::fs::read(one.join("model.zt")).unwrap()[..8], ztensor_v2::MAGIC);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A sharded conversion (zTensor 1.2 or 2) stopped by SIGTERM with a file in place, or failing
/// part of the way, leaves the directory as it found it: a directory it made is gone, one that was there holds
/// what it held.
#[cfg(unix)]
#[test]
fn an_interrupted_or_failed_sharded_conversion_leaves_the_directory_as_it_was() {
    let d = scratch("interrupted");
    let model = input(&d);
    let m = model.to_str().unwrap();
    let fresh = d.join("made/deeper");
    let there = d.join("there");
    std::fs::create_dir(&there).unwrap();
    std::fs::write(there.join("README.txt"), b"mine").unwrap();
    // Sharded zTensor 1.2 and zTensor 2 (whose root and shards are published together).
    for (out, to) in [(&fresh, "1.2"), (&there, "1.2"), (&fresh, "2"), (&there, "2")] {
        let o = format!("{}/", out.display());
        let args = ["convert", m, &o, "--shard-size", "2MiB", "--to", to, "-q"];
        let mut child = crate::durability::paused(&args, ztensor_io::pause::at::PUBLISH_RENAMED);
        // The first file is in place.
        let published = contents(out).into_iter().filter(|(n, _)| n.ends_with(".zt")).count();
        assert_eq!(published, 1, "--to {to}");
        let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        assert!(term.unwrap().success());
        let status = child.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), None);
        assert_eq!(status.code(), Some(128 + 15));
    }
    assert!(!d.join("made").exists(), "the directories it made are removed");
    assert_eq!(contents(&there), [("README.txt".to_owned(), b"mine".to_vec())]);
    assert_eq!(std::fs::read_dir(&there).unwrap().count(), 1, "no temporary file left");

    // A read that fails in the last unit (a digest that does not match its bytes), after
    // seven shards were written.
    let bad = d.join("bad.zt");
    let mut w = FileWriter::create(&bad, Version::V1_2).unwrap();
    let digest = WriteOptions::raw().with_digest(ztensor_format::DigestAlgorithm::Sha256);
    for i in 0..16 {
        let data = vec![i as u8; 1 << 20];
        w.add_dense(&format!("t.{i:02}"), &[1 << 18], DType::F32, &data, &digest).unwrap();
    }
    w.finish().unwrap();
    let mut bytes = std::fs::read(&bad).unwrap();
    let at = bytes.windows(64).position(|w| w.iter().all(|&b| b == 15)).unwrap();
    bytes[at + 1000] ^= 0xff;
    std::fs::write(&bad, &bytes).unwrap();
    for (out, to) in [(&fresh, "1.2"), (&there, "1.2"), (&fresh, "2"), (&there, "2")] {
        let o = format!("{}/", out.display());
        let b = bad.to_str().unwrap();
        let r = ztensor(&["convert", b, &o, "--shard-size", "2MiB", "--to", to, "-q"]);
        assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
        assert!(stderr(&r).contains("t.15"), "{}", stderr(&r));
    }
    assert!(!d.join("made").exists(), "the directories it made are removed");
    assert_eq!(contents(&there), [("README.txt".to_owned(), b"mine".to_vec())]);
    assert_eq!(std::fs::read_dir(&there).unwrap().count(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Sizes take decimal (`20M`, `20MB`) and binary (`20MiB`) units: they split differently, and
/// the note on objects past the limit gives it back in both families.
#[test]
fn shard_sizes_in_decimal_and_binary_units_split_differently() {
    let d = scratch("units-of-size");
    let model = input(&d);
    let m = model.to_str().unwrap();
    // 16 tensors of 1 MiB (1,048,576 bytes): 19 fit in 20 MiB but 19 do not fit in 20 MB;
    // 2 fit in 2 MiB but not in 2 MB (2,000,000 bytes), where each is a shard of its own.
    let shards = |size: &str| {
        let out = d.join(format!("out-{size}"));
        let r = ztensor(&["convert", m, &format!("{}/", out.display()), "--shard-size", size]);
        assert!(r.status.success(), "{}", stderr(&r));
        (contents(&out).len() - 1, stdout(&r))
    };
    let (binary, _) = shards("2MiB");
    let (decimal, said) = shards("2M");
    assert_eq!(binary, 8);
    assert_eq!(decimal, 16);
    assert_eq!(shards("2MB").0, 16);
    let (_, said_binary) = shards("1MiB");
    assert!(!said_binary.contains("larger than"), "{said_binary}");
    assert!(!said.contains("larger than"), "{said}");
    let (_, said) = shards("1M");
    assert!(said.contains("16 objects are larger than --shard-size 1.00 MB (977 KiB)"), "{said}");
    let (_, said) = shards("1000KiB");
    assert!(said.contains("larger than --shard-size 1.02 MB (1000 KiB)"), "{said}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A checkpoint of more shards than the customary soft limit of open files (1024) is read:
/// the tool raises its own soft limit to the hard one, as the system allows.
#[test]
fn more_shards_than_the_soft_limit_of_open_files_are_read() {
    let d = scratch("open-files");
    let shards = 1100;
    let mut map = serde_json::Map::new();
    for k in 0..shards {
        let name = format!("model-{:05}-of-{shards:05}.safetensors", k + 1);
        let header = format!(r#"{{"t{k:04}":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#);
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend(header.as_bytes());
        bytes.push(u8::try_from(k % 251).unwrap());
        std::fs::write(d.join(&name), bytes).unwrap();
        map.insert(format!("t{k:04}"), serde_json::Value::String(name));
    }
    let index = d.join("model.safetensors.index.json");
    std::fs::write(&index, serde_json::json!({ "weight_map": map }).to_string()).unwrap();
    let out = Command::new("prlimit")
        .args(["--nofile=1024:", "--", env!("CARGO_BIN_EXE_ztensor"), "verify"])
        .arg(&index)
        .output()
        .unwrap();
    // The hard limit this machine sets (`Max open files` of /proc/self/limits).
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let hard = line.split_whitespace().nth(4).unwrap();
    let hard: u64 = if hard == "unlimited" { u64::MAX } else { hard.parse().unwrap() };
    if hard > shards as u64 + 64 {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("sound") && said.contains("1100 tensors"), "{said}");
    } else {
        // A machine whose hard limit is below the shard count: a clean refusal naming it.
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("Too many open files"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs the Slurm example with `env`, as a machine with Slurm would see it.
fn slurm_example(env: &[(&str, &Path)]) -> std::process::Output {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/schedulers/slurm-e2e.sh");
    let mut command = std::process::Command::new("bash");
    command.arg(script).env("ZTENSOR", env!("CARGO_BIN_EXE_ztensor"));
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

#[test]
fn the_slurm_example_leaves_a_machine_with_slurm_alone() {
    let d = scratch("slurm");
    // A system configuration: refused before anything is started, installed or written.
    let conf = d.join("slurm.conf");
    std::fs::write(&conf, "ClusterName=production\n").unwrap();
    let out = slurm_example(&[("SLURM_E2E_SYSTEM_CONF", &conf)]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("slurm.conf exists"));
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "ClusterName=production\n");
    // A munge daemon already running (here a stand-in of that name): refused, and left
    // running.
    let munged = d.join("munged");
    std::fs::copy("/bin/sleep", &munged).unwrap();
    let mut daemon = std::process::Command::new(&munged).arg("60").spawn().unwrap();
    let absent = d.join("absent.conf");
    let out = slurm_example(&[("SLURM_E2E_SYSTEM_CONF", &absent)]);
    let alive = daemon.try_wait().unwrap().is_none();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("munged is already running"));
    assert!(alive, "the running daemon was stopped");
    // Nothing in it stops processes by name or writes system paths.
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/schedulers/slurm-e2e.sh"),
    )
    .unwrap();
    for risky in ["pkill", "killall", "/etc/slurm/slurm.conf\"", "/etc/munge", "/var/spool"] {
        assert!(!text.contains(risky), "the example uses {risky}");
    }
}
