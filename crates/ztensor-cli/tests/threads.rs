//! `--threads N` runs N workers, whatever the target: each conversion runs in a process of its
//! own, whose threads (`/proc/PID/task/*/comm`) are read while it runs. The engine's workers
//! are named `zt-work-{i}`.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

/// The names of process `pid`'s threads that are workers, as the kernel lists them now.
fn workers(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let comm = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("comm")).ok();
    let names = tasks.flatten().filter_map(comm).map(|c| c.trim_end().to_owned());
    names.filter(|c| c.starts_with("zt-work-")).collect()
}

/// Runs the tool with `args`, reading its threads until it exits: the most workers seen at
/// once and every worker name seen.
fn run_counting(args: &[&str]) -> (usize, BTreeSet<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ztensor binary runs");
    let (mut peak, mut seen) = (0, BTreeSet::new());
    let status = loop {
        let now = workers(child.id());
        peak = peak.max(now.len());
        seen.extend(now);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(status.success(), "{args:?}: {said}");
    (peak, seen)
}

#[test]
fn convert_runs_as_many_workers_as_threads_asked_for_to_every_version() {
    let dir = ztensor_testkit::scratch("threads");
    // 64 MiB in thirteen parts, read in pieces: zTensor 2 compresses them ahead of their
    // turn, but for the 40 MiB one on one thread (over half the 64 MiB budget of one thread),
    // which streams through the encoder when its turn comes.
    let mut w = ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
    for (i, mib) in [2u32; 12].into_iter().chain([40]).enumerate() {
        let len = mib << 18;
        let data: Vec<u8> = (0..len).flat_map(|v| (v / 7 + i as u32).to_le_bytes()).collect();
        let (name, dtype) = (format!("t{i:02}"), ztensor_format::DType::U32);
        w.add_dense(&name, &[u64::from(len)], dtype, &data, &Default::default()).unwrap();
    }
    let input = dir.join("in.zt");
    std::fs::write(&input, w.finish().unwrap().0).unwrap();
    let input = input.to_str().unwrap();
    let mut outputs = Vec::new();
    for to in ["2", "1.2"] {
        for threads in [1usize, 3] {
            let output = dir.join(format!("out-{to}-{threads}.zt"));
            let output = output.to_str().unwrap();
            let n = threads.to_string();
            let args = ["convert", input, output, "--to", to, "--zstd", "3", "--threads", &n, "-q"];
            let (peak, seen) = run_counting(&args);
            let expected: BTreeSet<String> = (0..threads).map(|i| format!("zt-work-{i}")).collect();
            assert_eq!(peak, threads, "--to {to} --threads {threads}: workers at once");
            assert_eq!(seen, expected, "--to {to} --threads {threads}");
            outputs.push(std::fs::read(output).unwrap());
        }
    }
    assert!(outputs[0] == outputs[1], "the zTensor 2 file depends on the thread count");
    assert!(outputs[2] == outputs[3], "the zTensor 1.2 file depends on the thread count");
    std::fs::remove_dir_all(&dir).unwrap();
}
