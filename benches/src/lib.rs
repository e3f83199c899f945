//! Shared inputs for the benchmarks: synthetic manifests and files of realistic shape.

use ztensor_format::{
    Component, Container, DType, Format, Manifest, Object, OffsetAllocator, Version,
};

/// A v1.2 file with `n` dense f32 objects named like a transformer checkpoint, with a data area
/// of zero-length placeholders (the manifest is what these benchmarks measure).
pub fn file_with_objects(n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut manifest = Manifest::new(Version::V1_2);
    let mut alloc = OffsetAllocator::new();
    for i in 0..n {
        let len = 64 * (1 + (i as u64 % 7));
        let offset = alloc.reserve(len).expect("small offsets");
        let name = format!("model.layers.{}.mlp.proj_{}.weight", i / 8, i % 8);
        manifest.objects.push(
            Object::new(name, vec![len / 4], Format::Dense)
                .with_component("data", Component::new(DType::F32, offset, len)),
        );
    }
    let cbor = manifest.encode().expect("encodable");
    let mut file = Container::V1.magic().to_vec();
    file.resize(usize::try_from(alloc.end()).expect("fits"), 0);
    file.extend_from_slice(&cbor);
    file.extend_from_slice(&Container::V1.encode_trailer(cbor.len() as u64));
    (file, cbor)
}

/// A deterministic xorshift generator: benchmark data must be the same on every run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A uniform float in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Two independent N(0, sigma) samples (Box-Muller).
    pub fn normal_pair(&mut self, sigma: f64) -> (f64, f64) {
        let (u, v) = (self.uniform(), self.uniform());
        let r = (-2.0 * u.ln()).sqrt() * sigma;
        let t = std::f64::consts::TAU * v;
        (r * t.cos(), r * t.sin())
    }
}

/// The tensors of a realistic checkpoint of about `total` bytes: (name, shape, is_bf16), about
/// 200 of them, from a few bytes to about an eighth of `total` (125 MiB for 1 GiB): two
/// embeddings, then layers of attention and MLP weights and a small norm vector, until the size
/// is reached.
pub fn checkpoint_layout(total: u64) -> Vec<(String, Vec<u64>, bool)> {
    let unit = (total / 1024).max(4096); // 1 MiB for a 1 GiB checkpoint
    let rows = |bytes: u64, width: u64| vec![(bytes / width / 1024).max(1), 1024];
    let mut out = vec![
        ("embed_tokens.weight".to_owned(), rows(125 * unit, 2), true),
        ("lm_head.weight".to_owned(), rows(125 * unit, 4), false),
    ];
    let bytes_of =
        |(_, s, bf): &(String, Vec<u64>, bool)| s.iter().product::<u64>() * if *bf { 2 } else { 4 };
    let mut used: u64 = out.iter().map(bytes_of).sum();
    for layer in 0.. {
        let parts = [
            (format!("model.layers.{layer}.self_attn.q_proj.weight"), rows(4 * unit, 2), true),
            (format!("model.layers.{layer}.self_attn.k_proj.weight"), rows(unit, 2), true),
            (format!("model.layers.{layer}.mlp.up_proj.weight"), rows(8 * unit, 2), true),
            (format!("model.layers.{layer}.mlp.down_proj.weight"), rows(8 * unit, 4), false),
            (format!("model.layers.{layer}.input_layernorm.weight"), vec![1024], false),
        ];
        let layer_bytes: u64 = parts.iter().map(bytes_of).sum();
        if used + layer_bytes > total {
            break;
        }
        used += layer_bytes;
        out.extend(parts);
    }
    out.push(("scale".to_owned(), vec![], false));
    out
}

/// Fills `out` with `n` values from N(0, 0.02) as f32 or bf16, little-endian.
pub fn normal_weights(rng: &mut Rng, n: u64, bf16: bool, out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < n {
        let (a, b) = rng.normal_pair(0.02);
        for v in [a, b].into_iter().take(usize::try_from((n - i).min(2)).unwrap_or(2)) {
            if bf16 {
                out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes());
            } else {
                // Rounding a sample to f32 is the point.
                #[allow(clippy::cast_possible_truncation)]
                out.extend_from_slice(&(v as f32).to_le_bytes());
            }
        }
        i += 2;
    }
}

/// The two jobs of a digested raw write done at once with no format: every tensor hashed whole
/// with SHA-256 on `pool` (largest first, so no long hash is left for the end) while one thread
/// writes the bytes, in order, to `out`. Writing into the page cache costs CPU on the same
/// cores, which a max(write, hash / threads) ceiling leaves out.
///
/// # Panics
/// When `out` cannot be written (a benchmark has nothing better to do).
pub fn hash_while_writing(tensors: &[&[u8]], out: &std::path::Path, pool: &rayon::ThreadPool) {
    use rayon::prelude::*;
    use std::io::Write;
    let mut largest_first = tensors.to_vec();
    largest_first.sort_by_key(|d| std::cmp::Reverse(d.len()));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut f = std::fs::File::create(out).expect("create");
            for d in tensors {
                f.write_all(d).expect("write");
            }
        });
        pool.install(|| {
            largest_first.par_iter().for_each(|d| {
                let mut h =
                    ztensor_io::codec::Hasher::new(&ztensor_format::DigestAlgorithm::Sha256)
                        .expect("sha256");
                h.update(d);
                std::hint::black_box(h.finish());
            });
        });
    });
}
