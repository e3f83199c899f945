//! What the kernel allows for writing one output file from many threads, measured before the
//! engine chose positioned writes: the same bytes (4 MiB pieces) written
//!
//! - by one thread with `write()` in order (what the engine did before),
//! - by N threads with positioned writes (`pwrite`) at their offsets,
//! - by N threads with `pwrite` into a file preallocated with `fallocate` (when the tool exists),
//! - by N threads copying into a shared writable map of the file (set to its length first).
//!
//! `cargo run --release -p ztensor-benches --example positioned [MiB] [threads,…]`; wall
//! time of each, median of 3 runs, each followed by `fsync` outside the timing. Output files
//! go to `target/bench-data/positioned` (page cache, as the engine's writes do).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

const PIECE: usize = 4 << 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn fresh(path: &Path) -> File {
    let _ = std::fs::remove_file(path);
    OpenOptions::new().create(true).read(true).write(true).truncate(true).open(path).unwrap()
}

/// Runs `work` on `threads` threads, each taking every `threads`-th piece.
fn spread(threads: usize, pieces: usize, work: impl Fn(usize) + Sync) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let work = &work;
            s.spawn(move || {
                let mut i = t;
                while i < pieces {
                    work(i);
                    i += threads;
                }
            });
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let counts: Vec<usize> = args.get(1).map_or_else(
        || {
            let mut c: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
                .take_while(|&n| n <= cores)
                .collect();
            if c.last() != Some(&cores) {
                c.push(cores);
            }
            c
        },
        |list| list.split(',').filter_map(|s| s.parse().ok()).collect(),
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data/positioned");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.bin");
    let pieces = (mib << 20) / PIECE;
    let data: Vec<u8> = (0..PIECE).map(|i| u8::try_from(i * 31 % 251).unwrap_or(0)).collect();
    let total = (pieces * PIECE) as u64;
    let has_fallocate = std::process::Command::new("fallocate").arg("--version").output().is_ok();
    println!("{mib} MiB in {pieces} pieces of 4 MiB; {cores} cores");
    println!("| method | threads | wall s | GB/s |");
    println!("|---|---:|---:|---:|");
    let report = |method: &str, threads: usize, runs: Vec<f64>| {
        let t = median(runs);
        println!("| {method} | {threads} | {t:.3} | {:.2} |", total as f64 / t / 1e9);
    };

    for &threads in &counts {
        if threads == 1 {
            let mut runs = Vec::new();
            for _ in 0..3 {
                let mut f = fresh(&path);
                let started = Instant::now();
                for _ in 0..pieces {
                    f.write_all(&data).unwrap();
                }
                runs.push(started.elapsed().as_secs_f64());
                f.sync_all().unwrap();
            }
            report("write(), one thread, in order", 1, runs);
        }
        let mut runs = Vec::new();
        for _ in 0..3 {
            let f = fresh(&path);
            let started = Instant::now();
            spread(threads, pieces, |i| f.write_all_at(&data, (i * PIECE) as u64).unwrap());
            runs.push(started.elapsed().as_secs_f64());
            f.sync_all().unwrap();
        }
        report("pwrite()", threads, runs);

        if has_fallocate {
            let mut runs = Vec::new();
            for _ in 0..3 {
                let f = fresh(&path);
                let ok = std::process::Command::new("fallocate")
                    .args(["-l", &total.to_string()])
                    .arg(&path)
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    break;
                }
                let started = Instant::now();
                spread(threads, pieces, |i| f.write_all_at(&data, (i * PIECE) as u64).unwrap());
                runs.push(started.elapsed().as_secs_f64());
                f.sync_all().unwrap();
            }
            if !runs.is_empty() {
                report("fallocate, then pwrite()", threads, runs);
            }
        }

        let mut runs = Vec::new();
        for _ in 0..3 {
            let f = fresh(&path);
            f.set_len(total).unwrap();
            // SAFETY: the file was created above by this process and nothing else maps or
            // truncates it while the map lives.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&f).unwrap() };
            let base = map.as_mut_ptr() as usize;
            let started = Instant::now();
            spread(threads, pieces, |i| {
                // SAFETY: each piece is a disjoint range of the map, written by one thread.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut((base + i * PIECE) as *mut u8, PIECE) };
                dst.copy_from_slice(&data);
            });
            runs.push(started.elapsed().as_secs_f64());
            map.flush().unwrap();
        }
        report("shared writable map", threads, runs);
    }
    let _ = std::fs::remove_file(&path);
}
