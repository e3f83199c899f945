//! Single-thread kernel speeds on this machine: zstd-3 on normal weights, SHA-256, BLAKE3, CRC-32C.
use std::time::Instant;
use ztensor_benches::{Rng, normal_weights};
use ztensor_format::DigestAlgorithm;
use ztensor_io::codec::{Hasher, zstd_encode_chunked};

fn main() {
    let mut rng = Rng::new(7);
    let mut data = Vec::new();
    normal_weights(&mut rng, 32 << 20, false, &mut data); // 128 MiB of f32
    let t = Instant::now();
    let z = zstd_encode_chunked(&data, 3, 4 << 20).unwrap();
    let dt = t.elapsed().as_secs_f64();
    println!(
        "zstd-3: {:.3} GB/s, ratio {:.3}",
        data.len() as f64 / dt / 1e9,
        z.len() as f64 / data.len() as f64
    );
    for a in [DigestAlgorithm::Sha256, DigestAlgorithm::Blake3, DigestAlgorithm::Crc32c] {
        let t = Instant::now();
        let mut h = Hasher::new(&a).unwrap();
        h.update(&data);
        std::hint::black_box(h.finish());
        println!("{}: {:.3} GB/s", a.name(), data.len() as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
}
