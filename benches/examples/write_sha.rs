//! Writes a generated checkpoint raw with SHA-256 digests on all threads, for profiling:
//! `write_sha OUT [MIB] [zstd]`; `ZT_THREADS` (default: all) and `ZT_BUDGET_MIB` (512) set the
//! pool and the memory budget. Raw writes are also timed against the same work done with no
//! format (hash on all cores while one thread writes).

use std::io::{BufWriter, Write};

use ztensor_benches::{Rng, checkpoint_layout, hash_while_writing, normal_weights};
use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::{WriteOptions, Writer};
use ztensor_par::{ParOptions, Tensor};

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("an output path");
    let mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let zstd = args.next().is_some_and(|a| a == "zstd");
    let mut rng = Rng::new(1);
    let data: Vec<(String, Vec<u64>, DType, Vec<u8>)> = checkpoint_layout(mib << 20)
        .into_iter()
        .map(|(n, s, bf16)| {
            let mut d = Vec::new();
            normal_weights(&mut rng, s.iter().product(), bf16, &mut d);
            (n, s, if bf16 { DType::BF16 } else { DType::F32 }, d)
        })
        .collect();
    let tensors: Vec<Tensor<'_>> =
        data.iter().map(|(n, s, d, b)| Tensor::new(n, s, *d, b)).collect();
    let options = if zstd { WriteOptions::zstd(3) } else { WriteOptions::raw() }
        .with_digest(DigestAlgorithm::Sha256);
    let budget = std::env::var("ZT_BUDGET_MIB").ok().and_then(|v| v.parse::<u64>().ok());
    let par = ParOptions {
        memory_budget: budget.map_or(512 << 20, |m| m << 20),
        ..ParOptions::with_threads(
            std::env::var("ZT_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(0),
        )
    };
    let pool = rayon::ThreadPoolBuilder::new().build().expect("pool");
    let raw: Vec<&[u8]> = data.iter().map(|t| t.3.as_slice()).collect();
    for _ in 0..3 {
        measure("ours ", || {
            let file =
                BufWriter::with_capacity(1 << 20, std::fs::File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            ztensor_par::write_tensors(&tensors, &mut w, &options, &par, &()).expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        });
        if !zstd {
            measure("no format", || hash_while_writing(&raw, out.as_ref(), &pool));
        }
    }
}

fn measure(what: &str, f: impl FnOnce()) {
    let t = std::time::Instant::now();
    let cpu = cpu_seconds();
    f();
    let wall = t.elapsed().as_secs_f64();
    let used = cpu_seconds() - cpu;
    println!("{what}: {wall:.2} s wall, {used:.2} s of CPU ({:.2} cores busy)", used / wall);
}

/// CPU time used by this process so far (user + system), from /proc/self/stat; 0 where unknown.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here; clock ticks (100/s).
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
