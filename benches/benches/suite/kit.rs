//! What every row is made of: the checkpoints, timing side by side, the bench's state.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use ztensor_benches::{Rng, checkpoint_layout, normal_weights};
use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::codec::{Hasher, zstd_encode_chunked};
use ztensor_io::{WriteOptions, Writer};
use ztensor_par::{ParOptions, Tensor};

pub(super) const PAGE: usize = 4096;

pub(super) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One generated tensor.
pub(super) struct Weights {
    pub(super) name: String,
    pub(super) shape: Vec<u64>,
    pub(super) dtype: DType,
    pub(super) data: Vec<u8>,
}

pub(super) fn checkpoint(total: u64) -> Vec<Weights> {
    let mut rng = Rng::new(0x5eed);
    checkpoint_layout(total)
        .into_iter()
        .map(|(name, shape, bf16)| {
            let mut data = Vec::new();
            normal_weights(&mut rng, shape.iter().product(), bf16, &mut data);
            Weights { name, shape, dtype: if bf16 { DType::BF16 } else { DType::F32 }, data }
        })
        .collect()
}

/// Many small tensors: 1 to 16 f32 values each.
pub(super) fn small(n: u64) -> Vec<Weights> {
    let mut rng = Rng::new(7);
    (0..n)
        .map(|i| {
            let len = 1 + rng.next_u64() % 16;
            let mut data = Vec::new();
            normal_weights(&mut rng, len, false, &mut data);
            let name = format!("model.layers.{}.experts.{}.w{}", i / 1000, (i / 8) % 125, i % 8);
            Weights { name, shape: vec![len], dtype: DType::F32, data }
        })
        .collect()
}

pub(super) fn st_dtype(d: DType) -> Dtype {
    if d == DType::BF16 { Dtype::BF16 } else { Dtype::F32 }
}

pub(super) fn st_views(tensors: &[Weights]) -> Vec<(&str, TensorView<'_>)> {
    tensors
        .iter()
        .map(|t| {
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (t.name.as_str(), TensorView::new(st_dtype(t.dtype), shape, &t.data).expect("view"))
        })
        .collect()
}

pub(super) fn write_zt(path: &Path, version: Version, tensors: &[Weights], options: &WriteOptions) {
    let file = BufWriter::with_capacity(1 << 20, File::create(path).expect("create"));
    let mut w = Writer::new(file, version).expect("writer");
    for t in tensors {
        w.add_dense(&t.name, &t.shape, t.dtype, &t.data, options).expect("add");
    }
    w.finish().expect("finish").0.flush().expect("flush");
}

pub(super) fn tensors_of(tensors: &[Weights]) -> Vec<Tensor<'_>> {
    tensors.iter().map(|t| Tensor::new(&t.name, &t.shape, t.dtype, &t.data)).collect()
}

pub(super) fn zstd_sha256_options() -> WriteOptions {
    WriteOptions::zstd(3).with_digest(DigestAlgorithm::Sha256)
}

/// Touches one byte per page; the sum keeps the reads from being optimised away.
pub(super) fn touch(bytes: &[u8]) -> u64 {
    bytes.iter().step_by(PAGE).map(|&b| u64::from(b)).sum()
}

/// A read-only map of a whole file.
pub(super) fn map(path: &Path) -> memmap2::Mmap {
    let file = File::open(path).expect("open");
    // SAFETY: the benchmark owns these files and does not change them while mapped.
    unsafe { memmap2::Mmap::map(&file) }.expect("map")
}

/// zstd-3 in 4 MiB frames, then SHA-256 of the result: the work of one compressed, digested
/// component, in memory.
pub(super) fn zstd_sha256(data: &[u8]) {
    let z = zstd_encode_chunked(data, 3, ztensor_io::codec::DEFAULT_ZSTD_CHUNK).expect("zstd");
    let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
    h.update(&z);
    std::hint::black_box(h.finish());
}

/// The pieces (4 MiB) of every tensor, for kernels split over all cores.
pub(super) fn pieces(tensors: &[Weights]) -> Vec<&[u8]> {
    tensors
        .iter()
        .flat_map(|t| t.data.chunks(ztensor_io::codec::DEFAULT_ZSTD_CHUNK as usize))
        .collect()
}

/// The measurements of one operation over all runs.
#[derive(Default)]
pub(super) struct Row {
    pub(super) name: &'static str,
    pub(super) bytes: u64,
    pub(super) ours: Vec<Duration>,
    pub(super) peer: Vec<Duration>,
    pub(super) ceiling: Vec<Duration>,
    pub(super) peer_name: &'static str,
    pub(super) ceiling_name: &'static str,
}

pub(super) fn median(v: &[Duration]) -> Option<Duration> {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied()
}

/// (max - min) / median of the runs: how noisy the measurement was.
pub(super) fn spread(v: &[Duration]) -> Option<f64> {
    let (min, max) = (v.iter().min()?, v.iter().max()?);
    Some((*max - *min).as_secs_f64() / median(v)?.as_secs_f64())
}

pub(super) fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// Times `f`, then drops what it returns: buffers a reader hands out are kept by its caller,
/// so freeing them is not part of reading.
/// Times the sides of a row (ours, the peer, the ceiling) one after the other, a different one
/// first each run, and gives their times in the order given. The sides share the machine's
/// memory and disk: what one frees or leaves dirty, the next pays for or is spared (pages a
/// virtual machine hands back to its host and takes again, write-back of the previous file).
/// On the 2-core host, whichever side of the 1 GiB decode went first was slower in 9 runs of
/// 10, by about half a second; a fixed order charged that to the same side each time.
pub(super) fn in_turn<const N: usize>(
    run: usize,
    sides: [&mut dyn FnMut() -> Duration; N],
) -> [Duration; N] {
    let mut times = [Duration::ZERO; N];
    for k in 0..N {
        let i = (run + k) % N;
        settle();
        times[i] = (sides[i])();
    }
    times
}

/// Writes back everything written so far (`sync`), so that a side does not start while the
/// disk is still busy with what an earlier row or side left in the page cache: a row that
/// follows the CLI repack (whose 1 GiB output is not synced) otherwise charged that write-back
/// to whichever of its sides went first.
pub(super) fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// Writes back and removes what an earlier side wrote at `path` before the next side's clock
/// starts ([`settle`] has usually written it back already). Neither is the next side's work,
/// yet it paid for them: creating the file over the old one freed its cached pages (about
/// 0.45 s of a 0.7 s raw write of 1 GiB on the 2-core host), and the old file's write-back,
/// still under way, held up its own writes (a raw + sha256 write took 1.1-2.3 s right after
/// the ceiling's, 0.45 s otherwise).
pub(super) fn fresh(path: &Path) {
    if let Ok(file) = File::open(path) {
        let _ = file.sync_all();
    }
    let _ = std::fs::remove_file(path);
}

pub(super) fn time_keep<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    let kept = std::hint::black_box(f());
    let elapsed = t.elapsed();
    drop(kept);
    elapsed
}

/// Repeats `f` until at least `min` has passed; the time of one call.
/// The mean time of `f` over at least `min` and at least five calls, after one call that is
/// not timed: a case that takes long enough for two calls in `min` is otherwise half a cold
/// first call (fresh heap pages, cold caches) while a short one is almost all warm ones, and
/// comparing their per-item costs compares cold with warm.
pub(super) fn time_repeated(min: Duration, mut f: impl FnMut()) -> Duration {
    f();
    let t = Instant::now();
    let mut n = 0u32;
    while t.elapsed() < min || n < 5 {
        f();
        n += 1;
    }
    t.elapsed() / n
}

pub(super) struct Bench {
    pub(super) dir: PathBuf,
    pub(super) cores: usize,
    pub(super) tensors: Vec<Weights>,
    pub(super) small: Vec<Weights>,
    pub(super) cli: PathBuf,
    /// The run under way, from 0: which side of a row goes first ([`in_turn`]).
    pub(super) run: usize,
}

impl Bench {
    pub(super) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(super) fn all(&self) -> ParOptions {
        ParOptions { threads: self.cores, memory_budget: 512 << 20 }
    }
}
