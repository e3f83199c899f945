//! Pure compute scaling on this machine: the zstd-3 + sha256 kernel on independent 4 MiB pieces,
//! one thread versus two, with no I/O and no coordination at all: the ceiling any pipeline can
//! reach here.
use std::time::Instant;
use ztensor_benches::{Rng, normal_weights};
use ztensor_format::DigestAlgorithm;
use ztensor_io::codec::{Hasher, zstd_encode};

fn work(pieces: &[Vec<u8>]) {
    for p in pieces {
        let z = zstd_encode(p, 3).unwrap();
        let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
        h.update(&z);
        std::hint::black_box(h.finish());
    }
}

fn main() {
    let mut rng = Rng::new(9);
    let pieces: Vec<Vec<u8>> = (0..64)
        .map(|_| {
            let mut v = Vec::new();
            normal_weights(&mut rng, 1 << 20, false, &mut v);
            v
        })
        .collect();
    for round in 0..3 {
        let t = Instant::now();
        work(&pieces);
        let one = t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::thread::scope(|s| {
            let (a, b) = pieces.split_at(32);
            s.spawn(|| work(a));
            s.spawn(|| work(b));
        });
        let two = t.elapsed().as_secs_f64();
        println!(
            "round {round}: 1 thread {one:.2} s, 2 threads {two:.2} s, speed-up {:.2}x",
            one / two
        );
    }
}
