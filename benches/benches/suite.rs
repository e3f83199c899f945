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

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use ztensor_benches::{Rng, checkpoint_layout, hash_while_writing, normal_weights};
use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::codec::{Hasher, zstd_encode_chunked};
use ztensor_io::{Reader, WriteOptions, Writer};
use ztensor_par::{ParOptions, Tensor};

const PAGE: usize = 4096;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One generated tensor.
struct Weights {
    name: String,
    shape: Vec<u64>,
    dtype: DType,
    data: Vec<u8>,
}

fn checkpoint(total: u64) -> Vec<Weights> {
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
fn small(n: u64) -> Vec<Weights> {
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

fn st_dtype(d: DType) -> Dtype {
    if d == DType::BF16 { Dtype::BF16 } else { Dtype::F32 }
}

fn st_views(tensors: &[Weights]) -> Vec<(&str, TensorView<'_>)> {
    tensors
        .iter()
        .map(|t| {
            let shape = t.shape.iter().map(|&d| d as usize).collect();
            (t.name.as_str(), TensorView::new(st_dtype(t.dtype), shape, &t.data).expect("view"))
        })
        .collect()
}

fn write_zt(path: &Path, version: Version, tensors: &[Weights], options: &WriteOptions) {
    let file = BufWriter::with_capacity(1 << 20, File::create(path).expect("create"));
    let mut w = Writer::new(file, version).expect("writer");
    for t in tensors {
        w.add_dense(&t.name, &t.shape, t.dtype, &t.data, options).expect("add");
    }
    w.finish().expect("finish").0.flush().expect("flush");
}

fn tensors_of(tensors: &[Weights]) -> Vec<Tensor<'_>> {
    tensors.iter().map(|t| Tensor::new(&t.name, &t.shape, t.dtype, &t.data)).collect()
}

fn zstd_sha256_options() -> WriteOptions {
    WriteOptions::zstd(3).with_digest(DigestAlgorithm::Sha256)
}

/// Touches one byte per page; the sum keeps the reads from being optimised away.
fn touch(bytes: &[u8]) -> u64 {
    bytes.iter().step_by(PAGE).map(|&b| u64::from(b)).sum()
}

/// A read-only map of a whole file.
fn map(path: &Path) -> memmap2::Mmap {
    let file = File::open(path).expect("open");
    // SAFETY: the benchmark owns these files and does not change them while mapped.
    unsafe { memmap2::Mmap::map(&file) }.expect("map")
}

/// zstd-3 in 4 MiB frames, then SHA-256 of the result: the work of one compressed, digested
/// component, in memory.
fn zstd_sha256(data: &[u8]) {
    let z = zstd_encode_chunked(data, 3, ztensor_io::codec::DEFAULT_ZSTD_CHUNK).expect("zstd");
    let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
    h.update(&z);
    std::hint::black_box(h.finish());
}

/// The pieces (4 MiB) of every tensor, for kernels split over all cores.
fn pieces(tensors: &[Weights]) -> Vec<&[u8]> {
    tensors
        .iter()
        .flat_map(|t| t.data.chunks(ztensor_io::codec::DEFAULT_ZSTD_CHUNK as usize))
        .collect()
}

/// The measurements of one operation over all runs.
#[derive(Default)]
struct Row {
    name: &'static str,
    bytes: u64,
    ours: Vec<Duration>,
    peer: Vec<Duration>,
    ceiling: Vec<Duration>,
    peer_name: &'static str,
    ceiling_name: &'static str,
}

fn median(v: &[Duration]) -> Option<Duration> {
    let mut v = v.to_vec();
    v.sort();
    v.get(v.len() / 2).copied()
}

/// (max - min) / median of the runs: how noisy the measurement was.
fn spread(v: &[Duration]) -> Option<f64> {
    let (min, max) = (v.iter().min()?, v.iter().max()?);
    Some((*max - *min).as_secs_f64() / median(v)?.as_secs_f64())
}

fn time(f: impl FnOnce()) -> Duration {
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
fn in_turn<const N: usize>(run: usize, sides: [&mut dyn FnMut() -> Duration; N]) -> [Duration; N] {
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
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// Writes back and removes what an earlier side wrote at `path` before the next side's clock
/// starts ([`settle`] has usually written it back already). Neither is the next side's work,
/// yet it paid for them: creating the file over the old one freed its cached pages (about
/// 0.45 s of a 0.7 s raw write of 1 GiB on the 2-core host), and the old file's write-back,
/// still under way, held up its own writes (a raw + sha256 write took 1.1-2.3 s right after
/// the ceiling's, 0.45 s otherwise).
fn fresh(path: &Path) {
    if let Ok(file) = File::open(path) {
        let _ = file.sync_all();
    }
    let _ = std::fs::remove_file(path);
}

fn time_keep<T>(f: impl FnOnce() -> T) -> Duration {
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
fn time_repeated(min: Duration, mut f: impl FnMut()) -> Duration {
    f();
    let t = Instant::now();
    let mut n = 0u32;
    while t.elapsed() < min || n < 5 {
        f();
        n += 1;
    }
    t.elapsed() / n
}

struct Bench {
    dir: PathBuf,
    cores: usize,
    tensors: Vec<Weights>,
    small: Vec<Weights>,
    cli: PathBuf,
    /// The run under way, from 0: which side of a row goes first ([`in_turn`]).
    run: usize,
}

impl Bench {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn all(&self) -> ParOptions {
        ParOptions { threads: self.cores, memory_budget: 512 << 20 }
    }
}

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

fn zt2_dtype(d: DType) -> zt2_reference::DType {
    match d {
        DType::BF16 => zt2_reference::DType::BF16,
        _ => zt2_reference::DType::F32,
    }
}

/// Canonical zTensor 2 from the checkpoint in memory: ours from a 1.2 file held in memory
/// (every tensor read through the tensor-source interface), the reference's `Writer` with
/// `canonical(true)` given each tensor's bytes.
fn v2_write(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    // All three wait for the disk alike: each file is synced when written.
    (r.peer_name, r.ceiling_name) =
        ("reference 2.1.1 canonical Writer, then fsync", "write() of each tensor, then fsync");
    let held = std::fs::read(b.path("raw.zt")).expect("read");
    let source = Reader::new(&held[..], &Options::default()).expect("open");
    let out = b.path("out-v2.zt");
    // The writers themselves, each file synced when written: ours to a file as the peer's
    // (the CLI's sink adds a temporary file and a rename, which cost no bytes).
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = File::create(&out).expect("create");
            let mut sink = ztensor_v2::Zt2Sink::to_output(file);
            ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
            sink.into_inner().expect("a file").sync_all().expect("sync");
        })
    };
    // Its canonical writer takes tensors in name order.
    let mut sorted: Vec<&Weights> = b.tensors.iter().collect();
    sorted.sort_by(|x, y| x.name.as_bytes().cmp(y.name.as_bytes()));
    let mut peer = || {
        fresh(&out);
        time(|| {
            let mut w =
                zt2_reference::Writer::options().canonical(true).create(&out).expect("create");
            for t in &sorted {
                w.add(t.name.as_str(), t.shape.clone(), zt2_dtype(t.dtype), &t.data).expect("add");
            }
            w.finish().expect("finish");
            File::open(&out).and_then(|f| f.sync_all()).expect("sync");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
            f.sync_all().expect("sync");
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

/// A 1.2 file held in memory repacked to zTensor 2 with every part `zt.zstd-seekable/1` at
/// level 3 (1 MiB frames compressed on every core, an xxh3 digest per part): ours through the
/// zTensor 2 sink; the reference 2.1.1's writer given each tensor with that encoding; the
/// machine: the same frames compressed on every core and hashed while another thread writes
/// as many bytes.
fn v2_repack_zstd(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) = (
        "reference 2.1.1 Writer, every part zt.zstd-seekable/1, then fsync",
        "zstd-3 (1 MiB frames) + xxh3 on all cores while the output is written and synced",
    );
    let held = std::fs::read(b.path("raw.zt")).expect("read");
    let source = Reader::new(&held[..], &Options::default()).expect("open");
    let out = b.path("out-v2-zstd.zt");
    let options = ztensor_v2::WriteOptions::default().zstd(Some(3));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ours = || {
        fresh(&out);
        time(|| {
            pool.install(|| {
                let file = File::create(&out).expect("create");
                let mut sink = ztensor_v2::Zt2Sink::to_output(file).with_options(options.clone());
                ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
                sink.into_inner().expect("a file").sync_all().expect("sync");
            });
        })
    };
    let mut peer = || {
        fresh(&out);
        time(|| {
            let mut w =
                zt2_reference::Writer::options().canonical(false).create(&out).expect("create");
            for t in &b.tensors {
                w.object(t.name.as_str(), |o| {
                    o.shape(t.shape.clone()).layout("dense").part("data", |p| {
                        p.dtype(zt2_dtype(t.dtype)).encoding("zt.zstd-seekable/1").bytes(&t.data)
                    })
                })
                .expect("object");
            }
            w.finish().expect("finish");
            File::open(&out).and_then(|f| f.sync_all()).expect("sync");
        })
    };
    // The machine's own limit: the same frames compressed and hashed on every core while
    // another thread writes as many bytes as they compress to (known from a run beforehand),
    // with nothing waiting on anything.
    let frames: Vec<&[u8]> = b.tensors.iter().flat_map(|t| t.data.chunks(1 << 20)).collect();
    let compressed: Vec<Vec<u8>> = pool
        .install(|| frames.par_iter().map(|f| zstd::bulk::compress(f, 3).expect("zstd")).collect());
    let sink = b.path("out-ceiling.bin");
    let mut ceiling = || {
        fresh(&sink);
        time(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut f = File::create(&sink).expect("create");
                    for c in &compressed {
                        f.write_all(c).expect("write");
                    }
                    f.sync_all().expect("sync");
                });
                pool.install(|| {
                    frames.par_iter().for_each(|f| {
                        let z = zstd::bulk::compress(f, 3).expect("zstd");
                        std::hint::black_box((z, xxhash_rust::xxh3::xxh3_64(f)));
                    });
                });
            });
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

/// Every tensor of a canonical zTensor 2 file into owned buffers, its xxh3 digest checked: ours
/// (`File::verified` on a mapped file), the reference (`Tensor::verify`, then the bytes of its
/// mapped file copied).
fn v2_read(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("reference 2.1.1 verify + bytes().into_owned()", "pread() into fresh buffers");
    let path = b.path("v2.zt");
    if !path.exists() {
        let held = std::fs::read(b.path("raw.zt")).expect("read");
        let source = Reader::new(&held[..], &Options::default()).expect("open");
        let mut sink = ztensor_v2::Zt2Sink::new(&path);
        ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
    }
    let ranges = raw_ranges(b);
    let mut ours = || {
        time_keep(|| {
            // Positional reads straight into the buffers, as the registry's `open` reads.
            let source = ztensor_io::FileSource::open(&path).expect("open");
            let file = ztensor_v2::File::open(source, ztensor_v2::MAX_MANIFEST).expect("open");
            let names: Vec<String> =
                file.manifest().expect("a model").objects.keys().cloned().collect();
            let all: Vec<Vec<u8>> =
                names.iter().map(|n| file.verified(n, "data").expect("read").0).collect();
            all
        })
    };
    let mut peer = || {
        time_keep(|| {
            let src = zt2_reference::Source::open(&path).expect("open");
            let all: Vec<Vec<u8>> = src
                .tensors()
                .map(|t| {
                    t.verify().expect("verify");
                    t.data().expect("data").bytes().expect("bytes").into_owned()
                })
                .collect();
            all
        })
    };
    let [ours, peer, ceiling] =
        in_turn(b.run, [&mut ours, &mut peer, &mut || pread_fresh(b, &ranges)]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

fn write_raw(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) = ("safetensors serialize_to_file", "write() of each tensor");
    let out = b.path("out.bin");
    let mut ours = || {
        fresh(&out);
        time(|| write_zt(&out, Version::V1_2, &b.tensors, &WriteOptions::raw()))
    };
    let mut peer = || {
        fresh(&out);
        time(|| {
            safetensors::serialize_to_file(st_views(&b.tensors), None, &out).expect("st");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

fn write_raw_sha256_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "max(write(), sha256 kernel / threads)";
    let out = b.path("out.bin");
    let options = WriteOptions::raw().with_digest(DigestAlgorithm::Sha256);
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            ztensor_par::write_tensors(&tensors_of(&b.tensors), &mut w, &options, &b.all(), &())
                .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        let write = time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
        });
        let sha = time(|| {
            for t in &b.tensors {
                let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
                h.update(&t.data);
                std::hint::black_box(h.finish());
            }
        });
        write.max(sha / u32::try_from(b.cores).unwrap_or(1))
    };
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// The machine's own parallel SHA-256: the same bytes hashed in 4 MiB pieces on all cores
/// (ours) against one core (ceiling column), no I/O. Two "cores" of a shared VM rarely hash at
/// twice the speed of one; this row says how far from it they are.
fn sha256_kernel(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "sha256 kernel, 1 core";
    let pieces = pieces(&b.tensors);
    let hash = |p: &&[u8]| {
        let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
        h.update(p);
        std::hint::black_box(h.finish());
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ours = || time(|| pool.install(|| pieces.par_iter().for_each(hash)));
    let mut ceiling = || time(|| pieces.iter().for_each(hash));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// The machine doing both jobs of a digested raw write at once, with no format (see
/// [`hash_while_writing`]).
fn sha256_and_write(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    let data: Vec<&[u8]> = b.tensors.iter().map(|t| t.data.as_slice()).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    r.ours.push(time(|| hash_while_writing(&data, &b.path("out.bin"), &pool)));
}

fn write_zstd_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd-3 + sha256 kernel, 1 thread";
    let out = b.path("out.bin");
    // One compression thread, as `--threads 1` runs: the file is written by the calling thread
    // while the worker compresses the next piece.
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            let one = ParOptions { threads: 1, memory_budget: 512 << 20 };
            ztensor_par::write_tensors(
                &tensors_of(&b.tensors),
                &mut w,
                &zstd_sha256_options(),
                &one,
                &(),
            )
            .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let mut ceiling = || time(|| b.tensors.iter().for_each(|t| zstd_sha256(&t.data)));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

fn write_zstd_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd-3 + sha256 kernel, all cores, no I/O";
    let out = b.path("out.bin");
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            let options = zstd_sha256_options();
            ztensor_par::write_tensors(&tensors_of(&b.tensors), &mut w, &options, &b.all(), &())
                .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let pieces = pieces(&b.tensors);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ceiling = || time(|| pool.install(|| pieces.par_iter().for_each(|p| zstd_sha256(p))));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// Every object's data of the zTensor file at `path`, read (decoded) one after the other on
/// this thread into owned buffers.
fn each_owned(path: &Path) -> Vec<Vec<u8>> {
    let reader = Reader::open(path).expect("open");
    reader
        .manifest()
        .objects()
        .map(|o| {
            reader.component(o.name(), "data").and_then(|c| c.decoded()).expect("read").into_owned()
        })
        .collect()
}

fn read_owned_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + copy", "pread() into fresh buffers");
    let ranges = raw_ranges(b);
    let [ours, peer, ceiling] = in_turn(
        b.run,
        [&mut || time_keep(|| each_owned(&b.path("raw.zt"))), &mut || st_copy(b), &mut || {
            pread_fresh(b, &ranges)
        }],
    );
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

fn st_copy(b: &Bench) -> Duration {
    time_keep(|| {
        let map = map(&b.path("st.safetensors"));
        let st = safetensors::SafeTensors::deserialize(&map).expect("deserialize");
        let all: Vec<Vec<u8>> = st.iter().map(|(_, view)| view.data().to_vec()).collect();
        all
    })
}

/// Where each tensor's bytes lie in the raw file: (offset, length).
fn raw_ranges(b: &Bench) -> Vec<(u64, usize)> {
    let reader = Reader::open(b.path("raw.zt")).expect("open");
    reader
        .manifest()
        .objects()
        .map(|o| {
            let c = &o.object().components["data"];
            (c.offset, c.length as usize)
        })
        .collect()
}

/// The ceiling of reading to owned buffers: `pread()` of each of `ranges` into a fresh buffer.
fn pread_fresh(b: &Bench, ranges: &[(u64, usize)]) -> Duration {
    time_keep(|| {
        let file = File::open(b.path("raw.zt")).expect("open");
        let all: Vec<Vec<u8>> = ranges
            .iter()
            .map(|&(offset, len)| {
                let mut buf = vec![0u8; len];
                std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, offset).expect("pread");
                buf
            })
            .collect();
        all
    })
}

fn read_owned_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + copy", "pread() into fresh buffers, 1 thread");
    let ranges = raw_ranges(b);
    let [ours, peer, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let reader = Reader::open(b.path("raw.zt")).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || st_copy(b),
            &mut || pread_fresh(b, &ranges),
        ],
    );
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

fn zero_copy(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + touch", "mmap + touch every page");
    let mut ours = || {
        time(|| {
            // SAFETY: the benchmark owns the file and does not change it while mapped.
            let reader =
                unsafe { Reader::open_mmap(b.path("raw.zt"), &Options::default()) }.expect("open");
            let mut sum = 0;
            for o in reader.manifest().objects() {
                let data =
                    reader.component(o.name(), "data").and_then(|c| c.decoded()).expect("view");
                assert!(matches!(data, std::borrow::Cow::Borrowed(_)), "zero-copy");
                sum += touch(&data);
            }
            std::hint::black_box(sum);
        })
    };
    let mut peer = || {
        time(|| {
            let map = map(&b.path("st.safetensors"));
            let st = safetensors::SafeTensors::deserialize(&map).expect("deserialize");
            let sum: u64 = st.iter().map(|(_, v)| touch(v.data())).sum();
            std::hint::black_box(sum);
        })
    };
    let mut ceiling = || {
        time(|| {
            let map = map(&b.path("raw.zt"));
            std::hint::black_box(touch(&map));
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

fn open_index(b: &Bench, r: &mut Row, zt: &str, st: &str, count: usize) {
    r.bytes = 0;
    (r.peer_name, r.ceiling_name) =
        ("safetensors mmap + read_metadata", "pread() of the manifest bytes");
    let min = Duration::from_millis(200);
    r.ours.push(time_repeated(min, || {
        let reader = Reader::open(b.path(zt)).expect("open");
        assert_eq!(reader.manifest().len(), count);
    }));
    r.peer.push(time_repeated(min, || {
        let map = map(&b.path(st));
        let (_, metadata) = safetensors::SafeTensors::read_metadata(&map).expect("metadata");
        assert_eq!(metadata.tensors().len(), count);
    }));
    let reader = Reader::open(b.path(zt)).expect("open");
    let location = reader.manifest().location();
    r.ceiling.push(time_repeated(min, || {
        let file = File::open(b.path(zt)).expect("open");
        let mut buf = vec![0u8; location.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, location.offset).expect("pread");
        std::hint::black_box(buf);
    }));
}

fn open_index_large(b: &Bench, r: &mut Row) {
    open_index(b, r, "raw.zt", "st.safetensors", b.tensors.len());
}

fn open_index_tenth(b: &Bench, r: &mut Row) {
    open_index(b, r, "tenth.zt", "tenth.safetensors", b.small.len() / 10);
}

fn open_index_small(b: &Bench, r: &mut Row) {
    open_index(b, r, "small.zt", "small.safetensors", b.small.len());
}

/// The compressed frames of the zstd file, tensor by tensor (each frame with its decoded size),
/// for the decode kernels.
fn frames(b: &Bench) -> Vec<Vec<(Vec<u8>, u64)>> {
    let reader = Reader::open(b.path("zstd.zt")).expect("open");
    let mut out = Vec::new();
    for o in reader.manifest().objects() {
        let stored = reader.component(o.name(), "data").and_then(|c| c.stored()).expect("stored");
        out.push(match ztensor_io::codec::parse_seek_table(&stored) {
            Some(table) => table
                .iter()
                .map(|f| {
                    let (s, e) = (f.offset as usize, (f.offset + f.compressed) as usize);
                    (stored[s..e].to_vec(), f.decompressed)
                })
                .collect(),
            None => vec![(stored.to_vec(), o.decoded_len("data").expect("len"))],
        });
    }
    out
}

/// The machine's own zstd decode: every frame, held in memory, decoded in one call into its
/// place in a fresh buffer per tensor (what a reader hands out, allocated as ours are), the
/// frames of all tensors in one list on the current pool's threads when `parallel`. Decoding
/// each frame into a buffer of its own instead would measure the allocator's reuse of the
/// previous run's frames, which no single read of a checkpoint has.
fn decode_kernel(tensors: &[Vec<(Vec<u8>, u64)>], parallel: bool) -> Vec<Vec<u8>> {
    let mut outs: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| ztensor_io::try_zeroed(t.iter().map(|f| f.1).sum(), "a tensor").expect("memory"))
        .collect();
    let mut jobs = Vec::new();
    for (t, out) in tensors.iter().zip(&mut outs) {
        let mut rest = &mut out[..];
        for (frame, len) in t {
            let (slot, tail) = rest.split_at_mut(*len as usize);
            jobs.push((&frame[..], slot));
            rest = tail;
        }
    }
    let decode = |(frame, slot): (&[u8], &mut [u8])| {
        ztensor_io::codec::zstd_decode_into(frame, slot).expect("decode")
    };
    if parallel {
        jobs.into_par_iter().for_each(decode);
    } else {
        jobs.into_iter().for_each(decode);
    }
    outs
}

fn decode_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, 1 thread, in memory";
    let frames = frames(b);
    let [ours, ceiling] = in_turn(
        b.run,
        [&mut || time_keep(|| each_owned(&b.path("zstd.zt"))), &mut || {
            time_keep(|| decode_kernel(&frames, false))
        }],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

fn decode_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, all cores, in memory";
    let frames = frames(b);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let [ours, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let reader = Reader::open(b.path("zstd.zt")).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || time_keep(|| pool.install(|| decode_kernel(&frames, true))),
        ],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// As [`decode_all`], the file read through a map (as the Python package reads): the
/// compressed bytes are decoded from where they lie instead of copied out of the page cache
/// first, which the in-memory kernel does not pay either.
fn decode_all_mapped(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, all cores, in memory";
    let frames = frames(b);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let [ours, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let file = File::open(b.path("zstd.zt")).expect("open");
                    // SAFETY: the benchmark's file is not changed while it is mapped.
                    let map = unsafe { ztensor_io::Mapped::map(&file) }.expect("map");
                    let reader = Reader::new(map, &Options::default()).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || time_keep(|| pool.install(|| decode_kernel(&frames, true))),
        ],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

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

fn ratio(a: Option<Duration>, b: Option<Duration>) -> Option<f64> {
    Some(b?.as_secs_f64() / a?.as_secs_f64())
}

fn report(root: &Path, b: &Bench, rows: &[Row], runs: u64) {
    let fmt_time = |d: Option<Duration>| match d {
        Some(d) if d < Duration::from_millis(10) => format!("{:.1} µs", d.as_secs_f64() * 1e6),
        Some(d) => format!("{:.1} ms", d.as_secs_f64() * 1e3),
        None => "-".into(),
    };
    let fmt_ratio = |r: Option<f64>| r.map_or_else(|| "-".into(), |r| format!("{r:.2}x"));
    let gbps = |bytes: u64, d: Option<Duration>| {
        d.filter(|_| bytes > 0).map(|d| bytes as f64 / d.as_secs_f64() / 1e9)
    };
    println!();
    println!(
        "{:<44} {:>10} {:>7} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "operation", "ours", "GB/s", "peer", "ceiling", "ours/peer", "ours/ceil", "spread"
    );
    let mut json_rows = Vec::new();
    for r in rows {
        let (o, p, c) = (median(&r.ours), median(&r.peer), median(&r.ceiling));
        let spread = [spread(&r.ours), spread(&r.peer), spread(&r.ceiling)]
            .into_iter()
            .flatten()
            .fold(0.0f64, f64::max);
        println!(
            "{:<44} {:>10} {:>7} {:>10} {:>10} {:>9} {:>9} {:>6.0}%",
            r.name,
            fmt_time(o),
            gbps(r.bytes, o).map_or_else(|| "-".into(), |g| format!("{g:.2}")),
            fmt_time(p),
            fmt_time(c),
            fmt_ratio(ratio(o, p)),
            fmt_ratio(ratio(o, c)),
            spread * 100.0
        );
        let secs = |v: &[Duration]| v.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
        json_rows.push(serde_json::json!({
            "operation": r.name,
            "bytes": r.bytes,
            "ours_s": o.map(|d| d.as_secs_f64()),
            "peer_s": p.map(|d| d.as_secs_f64()),
            "ceiling_s": c.map(|d| d.as_secs_f64()),
            "peer": r.peer_name,
            "ceiling": r.ceiling_name,
            "ours_per_peer": ratio(o, p),
            "ours_per_ceiling": ratio(o, c),
            "spread": spread,
            "runs": {"ours": secs(&r.ours), "peer": secs(&r.peer), "ceiling": secs(&r.ceiling)},
        }));
    }
    println!();
    for r in rows.iter().filter(|r| !r.peer_name.is_empty() || !r.ceiling_name.is_empty()) {
        let names: Vec<&str> =
            [r.peer_name, r.ceiling_name].into_iter().filter(|n| !n.is_empty()).collect();
        println!("  {}: {}", r.name, names.join("; "));
    }
    let targets = targets(b, rows);
    println!();
    println!("targets: median of the per-run ratios (both sides measured back to back in a run)");
    for t in &targets {
        let num =
            |v: &serde_json::Value| v.as_f64().map_or_else(|| "-".into(), |m| format!("{m:.2}"));
        println!(
            "target {:<58} {:>7} (medians: {:>5}; needs {:>5}) {}",
            t["name"].as_str().unwrap_or(""),
            num(&t["measured"]),
            num(&t["ratio_of_medians"]),
            num(&t["target"]),
            match t["met"].as_bool() {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            }
        );
    }
    let max_spread = json_rows.iter().filter_map(|r| r["spread"].as_f64()).fold(0.0, f64::max);
    println!(
        "\nnoise: the widest (max - min) / median of any measurement was {:.0}%",
        max_spread * 100.0
    );
    let report = serde_json::json!({
        "machine": {"cores": b.cores},
        "config": {
            "bytes": b.tensors.iter().map(|t| t.data.len() as u64).sum::<u64>(),
            "tensors": b.tensors.len(),
            "small_tensors": b.small.len(),
            "runs": runs,
        },
        "rows": json_rows,
        "targets": targets,
        "noise": max_spread,
    });
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out).expect("report dir");
    let path = out.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json")).expect("write");
    println!("wrote {}", path.display());
}

/// Which series of a row.
#[derive(Clone, Copy)]
enum Side {
    Ours,
    Peer,
    Ceiling,
}

/// The speed targets of the project, as measured ratios (> 1: the first side is faster).
///
/// Each ratio is computed two ways. Deciding: the median, over runs, of the ratio within each
/// run, whose two sides were measured back to back (seconds apart) under the same load; on a
/// shared host whose speed drifts between runs this pairing cancels most of the drift. Reported
/// beside it: the ratio of the two medians.
fn targets(b: &Bench, rows: &[Row]) -> Vec<serde_json::Value> {
    use Side::{Ceiling, Ours, Peer};
    let runs = rows.iter().map(|r| r.ours.len().max(r.peer.len()).max(r.ceiling.len())).max();
    let runs = runs.unwrap_or(0);
    // A side's time in one run, or (run = None) its median.
    let at = |name: &str, side: Side, run: Option<usize>| -> Option<Duration> {
        let r = rows.iter().find(|r| r.name == name)?;
        let v = match side {
            Ours => &r.ours,
            Peer => &r.peer,
            Ceiling => &r.ceiling,
        };
        match run {
            Some(i) => v.get(i).copied(),
            None => median(v),
        }
    };
    let t = |name: &str, f: &dyn Fn(Option<usize>) -> Option<f64>, target: f64| {
        let mut paired: Vec<f64> = (0..runs).filter_map(|i| f(Some(i))).collect();
        paired.sort_by(f64::total_cmp);
        let measured = paired.get(paired.len() / 2).copied();
        serde_json::json!({
            "name": name,
            "measured": measured,
            "per_run": paired,
            "ratio_of_medians": f(None),
            "target": target,
            "met": measured.map(|m| m >= target),
        })
    };
    // The speed of `a` relative to `b`.
    let vs = |a: (&'static str, Side), b: (&'static str, Side)| {
        move |run: Option<usize>| ratio(at(a.0, a.1, run), at(b.0, b.1, run))
    };
    let scaling = if b.cores >= 2 { 1.8 } else { 1.0 };
    // Compressed bytes per raw byte of the checkpoint, for the disk's share of a zstd write.
    let size = |n: &str| std::fs::metadata(b.path(n)).map_or(0, |m| m.len()) as f64;
    let stored_ratio = size("zstd.zt") / size("raw.zt").max(1.0);
    let small = b.small.len() as f64;
    vec![
        t("raw write vs write() ceiling", &vs(("write raw", Ours), ("write raw", Ceiling)), 0.95),
        t("raw write vs safetensors", &vs(("write raw", Ours), ("write raw", Peer)), 1.0),
        t(
            "raw + sha256 write, all threads, vs min(ceiling, threads x sha256)",
            &vs(
                ("write raw + sha256, all threads", Ours),
                ("write raw + sha256, all threads", Ceiling),
            ),
            0.8,
        ),
        t(
            "raw + sha256 write, all threads, vs min(ceiling, measured all-core sha256)",
            &|run| {
                let ours = at("write raw + sha256, all threads", Ours, run)?;
                let write = at("write raw", Ceiling, run)?;
                let kernel = at("(machine) sha256 kernel, all cores", Ours, run)?;
                Some(write.max(kernel).as_secs_f64() / ours.as_secs_f64())
            },
            0.8,
        ),
        t(
            "raw + sha256 write, all threads, vs the machine hashing and writing at once",
            &vs(
                ("write raw + sha256, all threads", Ours),
                ("(machine) sha256 all cores + write() at once", Ours),
            ),
            0.8,
        ),
        t(
            "(machine) sha256 kernel: all cores vs 1",
            &vs(
                ("(machine) sha256 kernel, all cores", Ours),
                ("(machine) sha256 kernel, all cores", Ceiling),
            ),
            scaling,
        ),
        t(
            "zstd-3 + sha256 write: speed-up all/1 vs the ceiling's (min of kernel, write())",
            &|run| {
                let one = at("write zstd-3 + sha256, 1 thread", Ours, run)?.as_secs_f64();
                let all = at("write zstd-3 + sha256, all threads", Ours, run)?.as_secs_f64();
                // The disk's time for the compressed output: write() of the raw bytes, scaled.
                let disk = at("write raw", Ceiling, run)?.as_secs_f64() * stored_ratio;
                let c_one =
                    at("write zstd-3 + sha256, 1 thread", Ceiling, run)?.as_secs_f64().max(disk);
                let c_all =
                    at("write zstd-3 + sha256, all threads", Ceiling, run)?.as_secs_f64().max(disk);
                Some((one / all) / (c_one / c_all))
            },
            0.9,
        ),
        t(
            "zstd-3 + sha256 write, 1 thread, vs kernel",
            &vs(
                ("write zstd-3 + sha256, 1 thread", Ours),
                ("write zstd-3 + sha256, 1 thread", Ceiling),
            ),
            0.9,
        ),
        t(
            "read to owned, all threads, vs safetensors",
            &vs(
                ("read to owned buffers, all threads", Ours),
                ("read to owned buffers, all threads", Peer),
            ),
            1.5,
        ),
        t(
            "zero-copy view + touch vs mmap-touch ceiling",
            &vs(("zero-copy view + touch", Ours), ("zero-copy view + touch", Ceiling)),
            0.9,
        ),
        t(
            "open + index 100k tensors vs safetensors (>= 0.5 is within 2x)",
            &vs(("open + index, 100k tensors", Ours), ("open + index, 100k tensors", Peer)),
            0.5,
        ),
        t(
            "open + index: per-tensor cost at 10k vs at 100k (>= 0.9: linear)",
            &|run| {
                let tenth = at("open + index, 10k tensors", Ours, run)?.as_secs_f64();
                let all = at("open + index, 100k tensors", Ours, run)?.as_secs_f64();
                Some((tenth / (small / 10.0)) / (all / small))
            },
            0.9,
        ),
        t(
            "zstd decode: speed-up all/1 vs the kernel's",
            &|run| {
                let ours = ratio(
                    at("decode zstd-3, all threads", Ours, run),
                    at("decode zstd-3, 1 thread", Ours, run),
                )?;
                let kernel = ratio(
                    at("decode zstd-3, all threads", Ceiling, run),
                    at("decode zstd-3, 1 thread", Ceiling, run),
                )?;
                Some(ours / kernel)
            },
            0.9,
        ),
        // What the machine itself gives: the same kernels on all cores vs one, no I/O.
        t(
            "(machine) zstd-3 + sha256 kernel: all cores vs 1",
            &vs(
                ("write zstd-3 + sha256, all threads", Ceiling),
                ("write zstd-3 + sha256, 1 thread", Ceiling),
            ),
            scaling,
        ),
        t(
            "zTensor 2 canonical write vs the reference 2.1.1",
            &vs(("zTensor 2: write canonical", Ours), ("zTensor 2: write canonical", Peer)),
            1.0,
        ),
        t(
            "zTensor 2 read + verify to owned vs the reference 2.1.1",
            &vs(
                ("zTensor 2: read + verify to owned, 1 thread", Ours),
                ("zTensor 2: read + verify to owned, 1 thread", Peer),
            ),
            1.0,
        ),
        t(
            "zTensor 2 repack to zstd-seekable, all threads, vs the machine compressing and writing at once",
            &vs(
                ("zTensor 2: repack 1.2 -> zstd-seekable (zstd-3), all threads", Ours),
                ("zTensor 2: repack 1.2 -> zstd-seekable (zstd-3), all threads", Ceiling),
            ),
            0.8,
        ),
        t(
            "zTensor 2 repack to zstd-seekable vs the reference 2.1.1",
            &vs(
                ("zTensor 2: repack 1.2 -> zstd-seekable (zstd-3), all threads", Ours),
                ("zTensor 2: repack 1.2 -> zstd-seekable (zstd-3), all threads", Peer),
            ),
            1.0,
        ),
        t(
            "(machine) zstd decode kernel: all cores vs 1",
            &vs(("decode zstd-3, all threads", Ceiling), ("decode zstd-3, 1 thread", Ceiling)),
            scaling,
        ),
    ]
}
