//! Writes a generated checkpoint raw with SHA-256 digests on all threads, for profiling:
//! `write_sha OUT [MIB] [zstd]`.

use std::io::{BufWriter, Write};

use ztensor_benches::{Rng, checkpoint_layout, normal_weights};
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
    let t = std::time::Instant::now();
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out).expect("create"));
    let mut w = Writer::new(file, Version::V1_2).expect("writer");
    ztensor_par::write_tensors(&tensors, &mut w, &options, &ParOptions::with_threads(0), &())
        .expect("write");
    w.finish().expect("finish").0.flush().expect("flush");
    println!("{:?}", t.elapsed());
}
