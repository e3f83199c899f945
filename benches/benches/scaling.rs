//! How the engine scales: `ztensor repack` and `ztensor convert` runs of the release CLI, with
//! the CPU time of every thread read from `/proc/PID/task/*/stat` while they run, grouped by the
//! role the thread's name gives (`zt-work-N` workers, `zt-read` the reading thread, the calling
//! thread that orders and writes), beside the machine's own kernels (the same compression and
//! digest on the same pieces, all cores, no I/O and no coordination).
//!
//! `cargo xtask bench scaling` (or `cargo bench -p ztensor-benches --bench scaling`; Linux only).
//! Environment: `ZT_BENCH_BYTES` (checkpoint size, default 512 MiB), `ZT_BENCH_CLI` (the
//! `ztensor` binary; default `target/release/ztensor`), `ZT_BENCH_THREADS` (comma-separated
//! thread counts; default 1, 2, 4, … up to the cores present, and the cores).
//!
//! With `--simulate` (`cargo xtask bench scaling --simulate`) it runs the engine itself at 1, 2,
//! 4 … 256 workers with the kernels replaced by this machine's own per-core latencies
//! ([`ztensor_par::simulate`]) and reports, per worker count, the efficiency (speed-up over one
//! worker ÷ workers, and the ideal time ÷ the measured one), the CPU of the calling and reading
//! threads, how long each end waited, and the bytes in flight: the `simulated` entry of
//! `target/bench/scaling.json`. `ZT_BENCH_WORKERS` overrides the list.
//!
//! Beside the kernel, each mode has the disk's own time for its output at each thread count (as
//! many bytes written by as many threads, then fsync); the ceiling at a thread count is the
//! slower of the two. Targets are
//! stated against it: the CLI's speed over the ceiling's, and its speed-up from one thread
//! over the ceiling's speed-up, each at least 0.9.
//!
//! For each mode it reports per-role CPU seconds per GB at all threads, the serial share (CPU of
//! the busiest thread that is not a worker ÷ all CPU), the speed-up Amdahl's law projects from
//! that share at 8 / 16 / 32 / 64 threads, and the wall speed-up measured at each thread count.
//! Prints a table and writes `target/bench/scaling.json`. Each run writes a new output file (the
//! previous one is removed first, outside the timing).

// Benchmark data is generated here and sized for 64-bit machines; its lengths always fit.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use ztensor_benches::{Rng, checkpoint_layout, normal_weights};
use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::codec::{Hasher, zstd_encode};
use ztensor_io::{WriteOptions, Writer};

/// One way of running the CLI: its name, its arguments before the input and output, the input
/// file and the digest the machine's kernel computes for it (with zstd-3 when `zstd`).
struct Mode {
    name: &'static str,
    args: &'static [&'static str],
    input: &'static str,
    zstd: bool,
    digest: Option<DigestAlgorithm>,
}

fn modes() -> Vec<Mode> {
    vec![
        Mode {
            name: "repack zstd-3 + blake3",
            args: &["repack", "--zstd", "3", "--digest", "blake3"],
            input: "raw.zt",
            zstd: true,
            digest: Some(DigestAlgorithm::Blake3),
        },
        Mode {
            name: "repack zstd-3 + sha256",
            args: &["repack", "--zstd", "3", "--digest", "sha256"],
            input: "raw.zt",
            zstd: true,
            digest: Some(DigestAlgorithm::Sha256),
        },
        Mode {
            name: "repack raw + blake3",
            args: &["repack", "--raw", "--digest", "blake3"],
            input: "raw.zt",
            zstd: false,
            digest: Some(DigestAlgorithm::Blake3),
        },
        Mode {
            name: "repack raw, no digest",
            args: &["repack", "--raw"],
            input: "raw.zt",
            zstd: false,
            digest: None,
        },
        Mode {
            name: "repack zstd-3 source -> zstd-1 + blake3",
            args: &["repack", "--zstd", "1", "--digest", "blake3"],
            input: "zstd.zt",
            zstd: true,
            digest: Some(DigestAlgorithm::Blake3),
        },
        Mode {
            name: "convert safetensors -> zstd-3 + blake3",
            args: &["convert", "--zstd", "3", "--digest", "blake3"],
            input: "st.safetensors",
            zstd: true,
            digest: Some(DigestAlgorithm::Blake3),
        },
    ]
}

/// CPU seconds of every thread of a finished run, by thread id: its name and seconds.
type Threads = BTreeMap<u32, (String, f64)>;

/// Reads the CPU time of every thread of `pid` (utime + stime of `/proc/PID/task/TID/stat`).
fn sample(pid: u32, ticks: f64, into: &mut Threads) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
    for task in tasks.flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses; the last `)` ends it.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let name = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // Fields 14 and 15 of the line; `rest` starts at field 3.
        let (Some(user), Some(system)) = (rest.get(11), rest.get(12)) else { continue };
        let (Ok(user), Ok(system)) = (user.parse::<f64>(), system.parse::<f64>()) else { continue };
        into.insert(tid, (name, (user + system) / ticks));
    }
}

/// Runs the CLI, sampling its threads every 10 ms until it exits: wall time and per-thread CPU
/// (a thread's last 10 ms may be missed; workers live to the end of the run).
fn run(cli: &Path, args: &[String], ticks: f64) -> (Duration, Threads, u32) {
    let started = Instant::now();
    let mut child = std::process::Command::new(cli)
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run ztensor");
    let pid = child.id();
    let mut threads = Threads::new();
    loop {
        sample(pid, ticks, &mut threads);
        if let Some(status) = child.try_wait().expect("wait for ztensor") {
            assert!(status.success(), "ztensor {args:?} failed: {status}");
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (started.elapsed(), threads, pid)
}

/// The role a thread's name gives.
fn role(tid: u32, pid: u32, name: &str) -> &'static str {
    if name.starts_with("zt-work") {
        "workers"
    } else if name == "zt-read" {
        "reading thread"
    } else if tid == pid {
        "calling thread (orders, writes)"
    } else if name == "zt-signals" {
        "signals"
    } else {
        "other"
    }
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn amdahl(serial: f64, threads: f64) -> f64 {
    1.0 / (serial + (1.0 - serial) / threads)
}

/// The machine's own kernel for `mode` on `threads` threads: compress (zstd-3) and digest each
/// 4 MiB piece independently, no I/O. Wall time.
fn kernel(pieces: &[&[u8]], mode: &Mode, threads: usize) -> Duration {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
    let started = Instant::now();
    pool.install(|| {
        pieces.par_iter().for_each(|p| {
            let stored = if mode.zstd { zstd_encode(p, 3).expect("zstd") } else { Vec::new() };
            if let Some(h) = mode.digest.as_ref().and_then(Hasher::new) {
                let mut h = h;
                h.update(if mode.zstd { &stored } else { p });
                std::hint::black_box(h.finish());
            }
        });
    });
    started.elapsed()
}

fn main() {
    if !Path::new("/proc/self/task").exists() {
        eprintln!("the scaling bench reads /proc/PID/task: Linux only");
        return;
    }
    if std::env::args().any(|a| a == "--simulate") {
        simulate();
        return;
    }
    let total =
        std::env::var("ZT_BENCH_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(512 << 20);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench-data/scaling");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let cli = std::env::var_os("ZT_BENCH_CLI")
        .map_or_else(|| root.join("target/release/ztensor"), PathBuf::from);
    assert!(cli.exists(), "{} is not built (cargo xtask bench scaling builds it)", cli.display());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let counts: Vec<usize> = match std::env::var("ZT_BENCH_THREADS") {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => {
            let mut c: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
                .take_while(|&n| n <= cores)
                .collect();
            if c.last() != Some(&cores) {
                c.push(cores);
            }
            c
        }
    };
    let ticks = clock_ticks();

    // The checkpoint, as a raw v1.2 file and as safetensors.
    let mut rng = Rng::new(0x5ca1e);
    let tensors: Vec<(String, Vec<u64>, DType, Vec<u8>)> = checkpoint_layout(total)
        .into_iter()
        .map(|(name, shape, bf16)| {
            let mut data = Vec::new();
            normal_weights(&mut rng, shape.iter().product(), bf16, &mut data);
            (name, shape, if bf16 { DType::BF16 } else { DType::F32 }, data)
        })
        .collect();
    let bytes: u64 = tensors.iter().map(|t| t.3.len() as u64).sum();
    let gb = bytes as f64 / 1e9;
    let file = std::fs::File::create(dir.join("raw.zt")).expect("create");
    let mut w = Writer::new(std::io::BufWriter::new(file), Version::V1_2).expect("writer");
    for (name, shape, dtype, data) in &tensors {
        w.add_dense(name, shape, *dtype, data, &WriteOptions::raw()).expect("add");
    }
    w.finish().expect("finish");
    // The same tensors as zstd-3 in 4 MiB frames with a seek table: a source to decode.
    let file = std::fs::File::create(dir.join("zstd.zt")).expect("create");
    let mut w = Writer::new(std::io::BufWriter::new(file), Version::V1_2).expect("writer");
    for (name, shape, dtype, data) in &tensors {
        w.add_dense(name, shape, *dtype, data, &WriteOptions::zstd(3)).expect("add");
    }
    w.finish().expect("finish");
    let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, shape, dtype, data)| {
            let dtype = if *dtype == DType::BF16 {
                safetensors::Dtype::BF16
            } else {
                safetensors::Dtype::F32
            };
            let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            (name.as_str(), safetensors::tensor::TensorView::new(dtype, shape, data).expect("view"))
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("st.safetensors")).expect("safetensors");
    let pieces: Vec<&[u8]> = tensors.iter().flat_map(|t| t.3.chunks(4 << 20)).collect();
    // The inputs just written go to disk now, not during the first measured fsync.
    let _ = std::process::Command::new("sync").status();
    eprintln!("{} tensors, {bytes} bytes; {cores} cores; thread counts {counts:?}", tensors.len());

    let out = dir.join("out.zt");
    let mut report = Vec::new();
    println!(
        "| mode | threads | wall s | speed-up | kernel speed-up | CLI / kernel | disk s | CLI / ceiling | scaling / ceiling's | CPU s/GB: workers | reading | calling | other | serial share | projected 8 / 16 / 32 / 64 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for mode in modes() {
        let mut walls = Vec::new();
        let mut kernel_walls = Vec::new();
        let mut ceiling_walls = Vec::new();
        let mut rows = Vec::new();
        for &threads in &counts {
            let mut args: Vec<String> = mode.args.iter().map(|s| (*s).to_owned()).collect();
            args.extend(["-q".into(), "--threads".into(), threads.to_string()]);
            args.push(dir.join(mode.input).to_string_lossy().into_owned());
            args.push(out.to_string_lossy().into_owned());
            // Every run writes a new file: replacing one would add the kernel's eviction of the
            // old file's pages, on the calling thread, to what is measured.
            let _ = std::fs::remove_file(&out);
            let (wall, per_thread, pid) = run(&cli, &args, ticks);
            // The disk's own time for the output at this thread count: as many bytes written
            // by as many threads, then fsync (best of two).
            let len = std::fs::metadata(&out).map_or(0, |m| m.len());
            let disk = (0..2).map(|_| disk_ceiling(&dir, len, threads)).min().unwrap_or_default();
            let kernel_wall = kernel(&pieces, &mode, threads);
            // What the machine allows at this thread count: its kernel, or its disk, whichever
            // takes longer (each at its best, perfectly overlapped).
            let ceiling_wall = kernel_wall.max(disk);
            ceiling_walls.push(ceiling_wall.as_secs_f64());
            let mut roles: BTreeMap<&str, f64> = BTreeMap::new();
            let mut busiest_serial = 0f64;
            for (&tid, (name, cpu)) in &per_thread {
                let r = role(tid, pid, name);
                *roles.entry(r).or_default() += cpu;
                if r != "workers" {
                    busiest_serial = busiest_serial.max(*cpu);
                }
            }
            let all: f64 = roles.values().sum();
            let serial = if all > 0.0 { busiest_serial / all } else { 0.0 };
            walls.push(wall.as_secs_f64());
            kernel_walls.push(kernel_wall.as_secs_f64());
            let speedup = walls[0] / wall.as_secs_f64();
            let kernel_speedup = kernel_walls[0] / kernel_wall.as_secs_f64();
            let ceiling_speedup = ceiling_walls[0] / ceiling_wall.as_secs_f64();
            let over_ceiling = ceiling_wall.as_secs_f64() / wall.as_secs_f64();
            let scaling_vs_ceiling = speedup / ceiling_speedup;
            let per_gb = |r: &str| roles.get(r).copied().unwrap_or(0.0) / gb;
            let other = per_gb("other") + per_gb("signals");
            let projected: Vec<f64> =
                [8.0, 16.0, 32.0, 64.0].iter().map(|&n| amdahl(serial, n)).collect();
            println!(
                "| {} | {threads} | {:.2} | {speedup:.2} | {kernel_speedup:.2} | {:.2} | {:.2} | {over_ceiling:.2} | {scaling_vs_ceiling:.2} | {:.2} | {:.2} | {:.2} | {other:.2} | {:.1} % | {} |",
                mode.name,
                wall.as_secs_f64(),
                kernel_wall.as_secs_f64() / wall.as_secs_f64(),
                disk.as_secs_f64(),
                per_gb("workers"),
                per_gb("reading thread"),
                per_gb("calling thread (orders, writes)"),
                serial * 100.0,
                projected.iter().map(|p| format!("{p:.1}")).collect::<Vec<_>>().join(" / "),
            );
            rows.push(serde_json::json!({
                "threads": threads,
                "wall_s": wall.as_secs_f64(),
                "speedup": speedup,
                "kernel_wall_s": kernel_wall.as_secs_f64(),
                "kernel_speedup": kernel_speedup,
                "cli_over_kernel": kernel_wall.as_secs_f64() / wall.as_secs_f64(),
                "disk_write_fsync_s": disk.as_secs_f64(),
                "ceiling_wall_s": ceiling_wall.as_secs_f64(),
                "ceiling_speedup": ceiling_speedup,
                "cli_over_ceiling": over_ceiling,
                "scaling_over_ceiling": scaling_vs_ceiling,
                "cpu_s_per_gb": roles.iter().map(|(r, c)| ((*r).to_owned(), c / gb)).collect::<BTreeMap<_, _>>(),
                "serial_share": serial,
                "projected": {"8": projected[0], "16": projected[1], "32": projected[2], "64": projected[3]},
            }));
        }
        report.push(serde_json::json!({"mode": mode.name, "runs": rows}));
    }
    let _ = std::fs::remove_file(&out);
    let targets = targets(&report, &counts, cores);
    let json = serde_json::json!({
        "bench": "scaling",
        "bytes": bytes,
        "cores": cores,
        "targets": targets,
        "sha_ni": std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" sha_ni")),
        "modes": report,
    });
    let path = root.join("target/bench/scaling.json");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("report dir");
    std::fs::write(&path, serde_json::to_string_pretty(&json).expect("json"))
        .expect("write report");
    eprintln!("wrote {}", path.display());
}

/// The engine's targets, from the runs of `report`: (what, measured, needed, met).
fn targets(report: &[serde_json::Value], counts: &[usize], cores: usize) -> Vec<serde_json::Value> {
    let run = |mode: &str, threads: usize| {
        report
            .iter()
            .find(|m| m["mode"] == mode)
            .and_then(|m| m["runs"].as_array()?.iter().find(|r| r["threads"] == threads).cloned())
    };
    let all = counts.iter().copied().max().unwrap_or(cores);
    let mut out = Vec::new();
    let mut target = |what: String, measured: Option<f64>, needed: f64, at_most: bool| {
        let met = measured.map(|m| if at_most { m <= needed } else { m >= needed });
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        println!(
            "target {what:<58} {:>7} (needs {} {needed}) {verdict}",
            measured.map_or("-".to_owned(), |m| format!("{m:.3}")),
            if at_most { "<=" } else { ">=" },
        );
        out.push(serde_json::json!({"target": what, "measured": measured, "needed": needed, "at_most": at_most, "met": met}));
    };
    let share = |mode: &str| run(mode, all).and_then(|r| r["serial_share"].as_f64());
    target(
        format!("serial share, zstd-3 + blake3, {all} threads"),
        share("repack zstd-3 + blake3"),
        0.03,
        true,
    );
    target(
        format!("serial share, raw + blake3, {all} threads"),
        share("repack raw + blake3"),
        0.08,
        true,
    );
    // Restated against what the machine allows in the same run (its kernel or its disk,
    // whichever is slower): speed, and speed-up from one thread.
    let field =
        |mode: &str, threads: usize, f: &str| run(mode, threads).and_then(|r| r[f].as_f64());
    for mode in ["repack zstd-3 + blake3", "repack zstd-3 + sha256", "repack raw + blake3"] {
        target(
            format!("{mode} vs min(kernel, disk), {all} threads"),
            field(mode, all, "cli_over_ceiling"),
            0.9,
            false,
        );
        target(
            format!("{mode}: scaling 1 -> {all} vs the ceiling's"),
            field(mode, all, "scaling_over_ceiling"),
            0.9,
            false,
        );
    }
    out
}

/// How long this machine takes to write `len` bytes to a new file in `dir` from `threads`
/// threads (positioned writes of 4 MiB blocks, each thread its own share) and fsync it: the
/// disk's own ceiling for an output of that size at that thread count (the tool publishes only
/// synced files; copying into the page cache is itself work that threads share).
fn disk_ceiling(dir: &Path, len: u64, threads: usize) -> Duration {
    use std::os::unix::fs::FileExt;
    const BLOCK: u64 = 4 << 20;
    let path = dir.join("ceiling.bin");
    let _ = std::fs::remove_file(&path);
    let block = vec![0x5a_u8; BLOCK as usize];
    let blocks = len.div_ceil(BLOCK);
    let started = Instant::now();
    let file = std::fs::File::create(&path).expect("create");
    std::thread::scope(|scope| {
        for t in 0..threads as u64 {
            let (file, block) = (&file, &block);
            scope.spawn(move || {
                let mut i = t;
                while i < blocks {
                    let at = i * BLOCK;
                    let n = (len - at).min(BLOCK) as usize;
                    file.write_all_at(&block[..n], at).expect("write");
                    i += threads as u64;
                }
            });
        }
    });
    file.sync_all().expect("fsync");
    let took = started.elapsed();
    drop(file);
    let _ = std::fs::remove_file(&path);
    took
}

/// CPU nanoseconds a thread has run, from `/proc/.../schedstat` (its first field).
fn schedstat_ns(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// The CPU of the threads called `name` of this process, sampled until `stop`: the last value
/// seen of each (a thread's last few milliseconds may be missed).
fn sample_named(name: &str, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let mut seen: BTreeMap<String, Option<bool>> = BTreeMap::new();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let tid = task.file_name().to_string_lossy().into_owned();
                // A thread is named by itself once started: ask again until it has a name of
                // the engine's.
                let known = seen.get(&tid).copied().flatten();
                let matches = known.or_else(|| {
                    let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
                    let comm = comm.trim();
                    let decided = comm.starts_with("zt-");
                    let hit = comm == name;
                    if decided {
                        seen.insert(tid.clone(), Some(hit));
                    }
                    Some(hit)
                });
                if matches == Some(true)
                    && let Some(ns) = schedstat_ns(&task.path().join("schedstat"))
                {
                    last.insert(tid, ns);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    last.values().sum()
}

/// The engine at simulated worker counts (see the crate docs above).
fn simulate() {
    use ztensor_par::ParOptions;
    use ztensor_par::simulate::{Simulation, Workload};
    const PIECE: u64 = 4 << 20;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench-data/scaling-simulated");
    std::fs::create_dir_all(&dir).expect("bench dir");

    // The machine's kernels on one core: zstd-3 of bf16 weights and BLAKE3 of the output,
    // per input byte, over 16 pieces.
    let mut rng = Rng::new(7);
    let mut pieces = Vec::new();
    for _ in 0..16 {
        let mut p = Vec::new();
        normal_weights(&mut rng, PIECE / 2, true, &mut p);
        pieces.push(p);
    }
    let started = Instant::now();
    let stored: Vec<Vec<u8>> = pieces.iter().map(|p| zstd_encode(p, 3).expect("zstd")).collect();
    let compress = started.elapsed();
    let started = Instant::now();
    for s in &stored {
        let mut h = Hasher::new(&DigestAlgorithm::Blake3).expect("blake3");
        h.update(s);
        std::hint::black_box(h.finish());
    }
    let digest = started.elapsed();
    let input = (PIECE * 16) as f64;
    let sim = Simulation {
        compress_ns_per_byte: compress.as_nanos() as f64 / input,
        digest_ns_per_byte: digest.as_nanos() as f64 / input,
    };
    let piece_ms = (sim.compress_ns_per_byte + sim.digest_ns_per_byte) * PIECE as f64 / 1e6;
    eprintln!(
        "calibrated on one core: zstd-3 {:.0} MB/s, blake3 of its output {:.0} MB/s of input; \
         {piece_ms:.1} ms per 4 MiB piece",
        1e3 / sim.compress_ns_per_byte,
        1e3 / sim.digest_ns_per_byte.max(1e-9),
    );

    let workers: Vec<usize> = match std::env::var("ZT_BENCH_WORKERS") {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => (0..=8).map(|k| 1usize << k).collect(),
    };
    // Every worker gets the same number of pieces (64, in tensors of 4), whatever the count,
    // and the budget the same share per worker (the default 512 MiB at the least).
    const ROUNDS: usize = 64;
    let mut rows = Vec::new();
    let mut one: Option<f64> = None;
    println!(
        "{:>7} {:>7} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10}",
        "workers",
        "pieces",
        "wall ms",
        "ideal ms",
        "eff",
        "eff/1",
        "calling",
        "reading",
        "budget w",
        "in flight"
    );
    for &n in &workers {
        let work = Workload {
            tensors: n * ROUNDS / 4,
            tensor_len: 4 * PIECE,
            digest: Some(DigestAlgorithm::Blake3),
        };
        let par =
            ParOptions { threads: n, memory_budget: (512u64 << 20).max(n as u64 * 4 * 2 * PIECE) };
        let path = dir.join("out.zt");
        let _ = std::fs::remove_file(&path);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let calling_before = schedstat_ns(Path::new("/proc/thread-self/schedstat")).unwrap_or(0);
        let (outcome, reading_ns) = std::thread::scope(|s| {
            let sampler = s.spawn(|| sample_named("zt-read", &stop));
            let outcome = ztensor_par::simulate::run(&work, sim, &par, &path);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (outcome, sampler.join().expect("sampler"))
        });
        let calling_ns =
            schedstat_ns(Path::new("/proc/thread-self/schedstat")).unwrap_or(0) - calling_before;
        let o = outcome.expect("simulated run");
        let wall = o.wall.as_secs_f64();
        let per_piece = wall / o.pieces as f64;
        if n == 1 {
            one = Some(per_piece);
        }
        // Speed-up over one worker on the same work, ÷ workers (when one worker ran).
        let efficiency = one.map_or(f64::NAN, |base| base / per_piece / n as f64);
        let ideal_ratio = o.ideal.as_secs_f64() / wall;
        // The calling thread's CPU as a share of all the work: simulated kernels and the
        // coordinating threads' CPU.
        let work_s = o.ideal.as_secs_f64() * n as f64;
        let share = calling_ns as f64 / 1e9 / (work_s + (calling_ns + reading_ns) as f64 / 1e9);
        println!(
            "{n:>7} {:>7} {:>9.1} {:>9.1} {efficiency:>8.3} {ideal_ratio:>8.3} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>7} MiB",
            o.pieces,
            wall * 1e3,
            o.ideal.as_secs_f64() * 1e3,
            calling_ns as f64 / 1e6,
            reading_ns as f64 / 1e6,
            o.budget_wait.as_secs_f64() * 1e3,
            o.peak_in_flight >> 20,
        );
        rows.push(serde_json::json!({
            "workers": n,
            "pieces": o.pieces,
            "wall_s": wall,
            "ideal_s": o.ideal.as_secs_f64(),
            "efficiency": efficiency,
            "ideal_over_wall": ideal_ratio,
            "calling_thread_cpu_s": calling_ns as f64 / 1e9,
            "calling_thread_share": share,
            "reading_thread_cpu_s": reading_ns as f64 / 1e9,
            "budget_wait_s": o.budget_wait.as_secs_f64(),
            "order_wait_s": o.order_wait.as_secs_f64(),
            "peak_in_flight_bytes": o.peak_in_flight,
            "memory_budget_bytes": par.memory_budget,
        }));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let at =
        |n: usize| rows.iter().find(|r| r["workers"] == n).and_then(|r| r["efficiency"].as_f64());
    let target = |n: usize, needed: f64| {
        serde_json::json!({
            "target": format!("efficiency at {n} simulated workers"),
            "measured": at(n),
            "needed": needed,
            "met": at(n).is_some_and(|e| e >= needed),
        })
    };
    let simulated = serde_json::json!({
        "cores": std::thread::available_parallelism().map_or(1, usize::from),
        "piece_bytes": PIECE,
        "pieces_per_worker": ROUNDS,
        "compress_ns_per_byte": sim.compress_ns_per_byte,
        "digest_ns_per_byte": sim.digest_ns_per_byte,
        "kernels": "zstd-3 of bf16 N(0, 0.02) weights, BLAKE3 of the output, one core",
        "targets": [target(64, 0.9), target(256, 0.75)],
        "runs": rows,
    });
    // Beside the real runs' report, if there is one.
    let path = root.join("target/bench/scaling.json");
    let mut json: serde_json::Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({"bench": "scaling"}));
    json["simulated"] = simulated;
    std::fs::create_dir_all(path.parent().expect("parent")).expect("report dir");
    std::fs::write(&path, serde_json::to_string_pretty(&json).expect("json"))
        .expect("write report");
    eprintln!("wrote the `simulated` entry of {}", path.display());
}
