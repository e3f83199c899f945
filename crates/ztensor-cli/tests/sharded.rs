//! Sharded output as a scheduler runs it: `plan`, then `run` units as separate processes in a
//! shuffled order, some killed mid-way and run again, two attempts of one unit racing, then
//! `finalize`: the shards and index equal, byte for byte, what one `convert IN OUTDIR/` writes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use ztensor_format::{DType, Version};
use ztensor_io::{FileWriter, WriteOptions};

use crate::{stderr, stdout, ztensor};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ztensor-cli-sharded-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// 16 tensors of 1 MiB of weakly compressible f32 values.
fn input(dir: &Path) -> PathBuf {
    let path = dir.join("model.zt");
    let mut w = FileWriter::create(&path, Version::V1_2).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..16 {
        let data: Vec<u8> = (0..(1 << 18))
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 * 1e-6).to_le_bytes()
            })
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
    let options = ["--zstd", "3", "--digest", "sha256", "--shard-size", "2M"];

    // One process.
    let one = format!("{}/", s(&d.join("one")));
    let model_path = s(&model);
    let out = ztensor(
        &[&["convert", "-q", "--threads", "2", model_path.as_str(), one.as_str()][..], &options]
            .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A plan, then units in a shuffled order; every other one killed after a moment.
    let plan = s(&d.join("plan.json"));
    let many = format!("{}/", s(&d.join("many")));
    let out = ztensor(
        &[&["plan", model_path.as_str(), many.as_str(), "-o", plan.as_str()][..], &options]
            .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("planned 8 units"), "{}", stdout(&out));
    let order = [5usize, 2, 7, 0, 3, 6, 1, 4];
    let mut killed = 0;
    for (i, unit) in order.iter().enumerate() {
        let unit = unit.to_string();
        let mut child = spawn(&["run", "-q", "--threads", "1", plan.as_str(), "--unit", &unit]);
        if i % 2 == 0 {
            std::thread::sleep(Duration::from_millis(5 + 10 * i as u64));
            if child.try_wait().unwrap().is_none() {
                killed += 1;
            }
            child.kill().unwrap();
        }
        child.wait().unwrap();
    }
    assert!(killed > 0, "no unit was still running when killed: the input is too small");
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
    let out = ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", "x.zt", "--shard-size", "1M"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("give an output directory"), "{}", stderr(&out));
    let d = scratch("refused").join("t");
    let dir = format!("{}/", d.display());
    let out = ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", &dir, "--to", "safetensors"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("not zTensor"), "{}", stderr(&out));
    let out = ztensor(&["run", "no-such-plan.json"]);
    assert_eq!(out.status.code(), Some(2));
}
