//! The benchmark suite: our implementation, the `safetensors` crate and the machine's own
//! ceilings, in the same run on the same data, interleaved run by run.
//!
//! `cargo xtask bench` (or `cargo bench -p ztensor-benches --bench suite`). Environment:
//! `ZT_BENCH_BYTES` (checkpoint size, default 1 GiB), `ZT_BENCH_RUNS` (default 5),
//! `ZT_BENCH_SMALL` (tensors in the many-small-tensors case, default 100000), `ZT_BENCH_ONLY`
//! (run only operations whose name contains this), `ZT_BENCH_CLI` (the `ztensor` binary for the
//! repack row; default `target/release/ztensor`).
//!
//! Prints one table (medians; ratios are speed ratios, above 1 means we are faster) and writes
//! the same as JSON to `target/bench/report.json`.

// Benchmark data is generated here and sized for 64-bit machines; its lengths always fit.
#![allow(clippy::cast_possible_truncation)]

use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;
use ztensor_format::Version;
use ztensor_io::WriteOptions;

mod kit;
mod read;
mod report;
mod v2;
mod write;

use kit::*;
use read::*;
use report::report;
use v2::*;
use write::*;

fn main() {
    let total = env_u64("ZT_BENCH_BYTES", 1 << 30);
    let runs = env_u64("ZT_BENCH_RUNS", 5).max(1);
    let only = std::env::var("ZT_BENCH_ONLY").unwrap_or_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench-data/suite");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let cli = std::env::var_os("ZT_BENCH_CLI")
        .map_or_else(|| root.join("target/release/ztensor"), PathBuf::from);

    let started = Instant::now();
    let mut b = Bench {
        tensors: checkpoint(total),
        small: small(env_u64("ZT_BENCH_SMALL", 100_000)),
        dir,
        cores,
        cli,
        run: 0,
    };
    let bytes: u64 = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    // The inputs of the read-side operations, written once per invocation.
    write_zt(&b.path("raw.zt"), Version::V1_2, &b.tensors, &WriteOptions::raw());
    write_zt(&b.path("raw-1.1.zt"), Version::V1_1, &b.tensors, &WriteOptions::raw());
    write_zt(&b.path("zstd.zt"), Version::V1_2, &b.tensors, &WriteOptions::zstd(3));
    safetensors::serialize_to_file(st_views(&b.tensors), None, &b.path("st.safetensors"))
        .expect("safetensors");
    write_zt(&b.path("small.zt"), Version::V1_2, &b.small, &WriteOptions::raw());
    safetensors::serialize_to_file(st_views(&b.small), None, &b.path("small.safetensors"))
        .expect("safetensors");
    let tenth = &b.small[..b.small.len() / 10];
    write_zt(&b.path("tenth.zt"), Version::V1_2, tenth, &WriteOptions::raw());
    safetensors::serialize_to_file(st_views(tenth), None, &b.path("tenth.safetensors"))
        .expect("safetensors");
    eprintln!(
        "{} tensors, {bytes} bytes (f32 and bf16 from N(0, 0.02)); {} small tensors; {cores} cores; \
         {runs} runs; prepared in {:.1} s",
        b.tensors.len(),
        b.small.len(),
        started.elapsed().as_secs_f64()
    );

    let mut rows: Vec<Row> = Vec::new();
    let row = |name: &'static str, rows: &mut Vec<Row>| -> usize {
        match rows.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                rows.push(Row { name, ..Row::default() });
                rows.len() - 1
            }
        }
    };
    for run in 0..runs {
        eprintln!("run {}/{runs}", run + 1);
        b.run = run as usize;
        for op in OPERATIONS {
            if !op.0.contains(only.as_str()) {
                continue;
            }
            let i = row(op.0, &mut rows);
            (op.1)(&b, &mut rows[i]);
        }
    }
    report(&root, &b, &rows, runs);
}

type Operation = (&'static str, fn(&Bench, &mut Row));

const OPERATIONS: &[Operation] = &[
    ("write raw", write_raw),
    ("write raw + sha256, all threads", write_raw_sha256_all),
    ("(machine) sha256 kernel, all cores", sha256_kernel),
    ("(machine) sha256 all cores + write() at once", sha256_and_write),
    ("write zstd-3 + sha256, 1 thread", write_zstd_one),
    ("write zstd-3 + sha256, all threads", write_zstd_all),
    ("read to owned buffers, 1 thread", read_owned_one),
    ("read to owned buffers, all threads", read_owned_all),
    ("zero-copy view + touch", zero_copy),
    ("open + index, 200 tensors", open_index_large),
    ("open + index, 10k tensors", open_index_tenth),
    ("open + index, 100k tensors", open_index_small),
    ("decode zstd-3, 1 thread", decode_one),
    ("decode zstd-3, all threads", decode_all),
    ("decode zstd-3, all threads, mapped", decode_all_mapped),
    ("repack 1.1 raw -> 1.2 zstd-3 + sha256 (CLI)", repack_cli),
    ("zTensor 2: write canonical", v2_write),
    ("zTensor 2: read + verify to owned, 1 thread", v2_read),
    ("zTensor 2: repack 1.2 -> zstd-seekable (zstd-3), all threads", v2_repack_zstd),
];

fn repack_cli(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd-3 + sha256 kernel, all cores, no I/O";
    if !b.cli.exists() {
        eprintln!("skipping the CLI row: {} not built", b.cli.display());
        return;
    }
    let out = b.path("out-cli.zt");
    let mut ours = || {
        fresh(&out);
        time(|| {
            let status = std::process::Command::new(&b.cli)
                .args(["repack", "-q", "--zstd", "3", "--digest", "sha256", "--to", "1.2"])
                .arg(b.path("raw-1.1.zt"))
                .arg(&out)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run ztensor");
            assert!(status.success(), "ztensor repack failed");
        })
    };
    let pieces = pieces(&b.tensors);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ceiling = || time(|| pool.install(|| pieces.par_iter().for_each(|p| zstd_sha256(p))));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}
