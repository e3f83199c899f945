//! Repack throughput: zstd-3 + sha256 on a generated checkpoint of realistic weights, at one
//! thread and at all threads, on the same machine in the same run, against the single-thread
//! zstd-3 + sha256 kernel on the same bytes. Also checks that both outputs are identical and that
//! the bytes in flight stayed within the budget.
//!
//! `cargo bench -p ztensor-benches --bench repack` (ZT_BENCH_BYTES sets the checkpoint size,
//! default 1 GiB; ZT_BENCH_RUNS the repetitions, default 3).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ztensor_benches::{Rng, checkpoint_layout, normal_weights};
use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::codec::{Hasher, zstd_encode_chunked};
use ztensor_io::{Compression, CopyOptions, DigestChoice, FileWriter, Reader, WriteOptions};
use ztensor_par::{ParOptions, repack_file};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn generate(path: &Path, total: u64) -> u64 {
    let mut w = FileWriter::create(path, Version::V1_2).expect("create");
    let mut rng = Rng::new(0x5eed);
    let mut buf = Vec::new();
    let mut bytes = 0;
    for (name, shape, bf16) in checkpoint_layout(total) {
        let n: u64 = shape.iter().product();
        normal_weights(&mut rng, n, bf16, &mut buf);
        bytes += buf.len() as u64;
        w.add_dense(
            &name,
            &shape,
            if bf16 { DType::BF16 } else { DType::F32 },
            &buf,
            &WriteOptions::raw(),
        )
        .expect("add");
    }
    w.finish().expect("finish");
    bytes
}

/// zstd-3 in 4 MiB frames and SHA-256 of the result, in memory.
fn kernel_work<S: ztensor_io::ReadAt>(reader: &Reader<S>, name: &str) {
    let data = reader.component(name, "data").and_then(|c| c.decoded()).expect("decode");
    let z = zstd_encode_chunked(&data, 3, ztensor_io::codec::DEFAULT_ZSTD_CHUNK).expect("zstd");
    let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
    h.update(&z);
    std::hint::black_box(h.finish());
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let total = env_u64("ZT_BENCH_BYTES", 1 << 30);
    let runs = env_u64("ZT_BENCH_RUNS", 3).max(1);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let input = dir.join(format!("checkpoint-{total}.zt"));
    let started = Instant::now();
    let data_bytes = if input.exists() {
        let r = Reader::open(&input).expect("cached checkpoint");
        r.manifest().objects().map(|o| o.object().components["data"].length).sum()
    } else {
        generate(&input, total)
    };
    let tensors = Reader::open(&input).expect("open").manifest().len();
    eprintln!(
        "checkpoint: {tensors} tensors, {data_bytes} bytes ({:.1} s to prepare)",
        started.elapsed().as_secs_f64()
    );

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(3)),
        digest: DigestChoice::Set(DigestAlgorithm::Sha256),
        chunk_size: Some(ztensor_io::codec::DEFAULT_ZSTD_CHUNK),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    let budget = env_u64("ZT_BENCH_BUDGET", 512 << 20);
    let (mut one, mut all, mut kernel, mut kernel_all) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut peaks = Vec::new();
    // The kernel: what one thread does per byte, with no format around it.
    let reader = Reader::open(&input).expect("open");
    let names: Vec<String> = reader.manifest().objects().map(|o| o.name().to_owned()).collect();
    for run in 0..runs {
        // Interleave the three measurements so drift hits them alike.
        for (threads, times) in [(1usize, &mut one), (cores, &mut all)] {
            let out = dir.join(format!("out-{threads}.zt"));
            let t = Instant::now();
            let (_, stats) = repack_file(
                &input,
                &out,
                Version::V1_2,
                &copy,
                &ParOptions { threads, memory_budget: budget },
                &(),
            )
            .expect("repack");
            times.push(t.elapsed());
            peaks.push(stats.peak_in_flight);
        }
        // The kernel on one thread, then the same work split over all cores with no I/O and no
        // coordination: the machine's own parallel ceiling, measured in the same run.
        let t = Instant::now();
        for name in &names {
            kernel_work(&reader, name);
        }
        kernel.push(t.elapsed());
        let t = Instant::now();
        std::thread::scope(|scope| {
            for share in 0..cores {
                let (reader, names) = (&reader, &names);
                scope.spawn(move || {
                    for name in names.iter().skip(share).step_by(cores) {
                        kernel_work(reader, name);
                    }
                });
            }
        });
        kernel_all.push(t.elapsed());
        eprintln!("run {}/{runs} done", run + 1);
    }
    let same = std::fs::read(dir.join("out-1.zt")).expect("out")
        == std::fs::read(dir.join(format!("out-{cores}.zt"))).expect("out");
    let gbps = |d: Duration| data_bytes as f64 / d.as_secs_f64() / 1e9;
    let spread = |v: &Vec<Duration>| {
        let (min, max) = (
            v.iter().min().copied().unwrap_or_default(),
            v.iter().max().copied().unwrap_or_default(),
        );
        if min.is_zero() { 0.0 } else { (max.as_secs_f64() / min.as_secs_f64() - 1.0) * 100.0 }
    };
    let (m1, mn, mk, mka) = (
        median(one.clone()),
        median(all.clone()),
        median(kernel.clone()),
        median(kernel_all.clone()),
    );
    println!(
        "repack zstd-3 + sha256, {data_bytes} bytes, {tensors} tensors, {runs} interleaved runs (medians)"
    );
    println!(
        "  kernel (1 thread, zstd-3 + sha256 in memory): {:.3} GB/s (spread {:.0}%)",
        gbps(mk),
        spread(&kernel)
    );
    println!(
        "  repack, 1 thread:                            {:.3} GB/s (spread {:.0}%)",
        gbps(m1),
        spread(&one)
    );
    println!(
        "  repack, {cores} threads:                           {:.3} GB/s (spread {:.0}%)",
        gbps(mn),
        spread(&all)
    );
    println!(
        "  kernel, {cores} threads (no I/O, no coordination): {:.3} GB/s (spread {:.0}%)",
        gbps(mka),
        spread(&kernel_all)
    );
    let ceiling = mk.as_secs_f64() / mka.as_secs_f64();
    let speedup = m1.as_secs_f64() / mn.as_secs_f64();
    println!("  speed-up {cores} threads / 1 thread:              {speedup:.2}x");
    println!(
        "  machine ceiling (kernel {cores} threads / 1):      {ceiling:.2}x; repack reaches {:.0}% of it",
        speedup / ceiling * 100.0
    );
    println!(
        "  repack 1 thread / kernel:                    {:.2}x",
        mk.as_secs_f64() / m1.as_secs_f64()
    );
    println!(
        "  peak bytes in flight: {} (budget {budget}); peak RSS {} KiB",
        peaks.iter().max().copied().unwrap_or(0),
        peak_rss_kib().unwrap_or(0)
    );
    println!("  outputs at 1 and {cores} threads identical: {same}");
}
