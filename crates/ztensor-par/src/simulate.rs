//! The engine at worker counts a machine does not have: the real dispatcher, budget, ordering,
//! slot allocation, positioned write-back and manifest, with compression and digests replaced
//! by per-byte latencies a worker spends asleep.
//!
//! A worker that sleeps holds no core, so a 2-core machine can run 256 simulated workers and
//! see what coordinating them costs: whether the dispatcher admits pieces fast enough, whether
//! the writing side keeps up with ordering them, whether the budget or a lock holds workers
//! back. What it cannot show is contention for the cores themselves (memory bandwidth, caches,
//! the disk), which only a machine with those cores measures; the same workload with the real
//! kernels is `cargo xtask bench scaling` there.
//!
//! Every tensor is the same bytes of one buffer in memory, which the engine borrows piece by
//! piece (as it borrows a mapped file's) and never looks at; each piece is "compressed" to one
//! byte per KiB, so the output file stays small and writing it is never what limits the run.
//! Per-byte work the engine does outside the kernels (reading, copying) is thus left out too:
//! the simulation measures coordination, per piece. Latencies come from the machine's own kernels, measured per core by
//! the caller (`benches/benches/scaling.rs --simulate`).
//!
//! ```
//! use ztensor_par::ParOptions;
//! use ztensor_par::simulate::{Simulation, Workload, run};
//!
//! let dir = std::env::temp_dir().join(format!("zt-sim-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let work = Workload { tensors: 4, tensor_len: 8 << 20, digest: None };
//! // 0.25 ns per byte: 1 ms per 4 MiB piece.
//! let sim = Simulation { compress_ns_per_byte: 0.25, digest_ns_per_byte: 0.0 };
//! let outcome = run(&work, sim, &ParOptions::with_threads(4), &dir.join("out.zt"))?;
//! assert_eq!(outcome.pieces, 8);
//! assert!(outcome.wall >= outcome.ideal);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use ztensor_format::{DType, DigestAlgorithm, Version};
use ztensor_io::{Compression, FileWriter, Result, WriteOptions};

use crate::ParOptions;
pub use crate::pipeline::Simulation;
use crate::pipeline::{self, Budget, Input, Item, Kernels, Parts, Template};

/// The checkpoint a simulated run writes: `tensors` dense `u8` tensors of `tensor_len` bytes,
/// cut into the engine's usual pieces, zstd-compressed (simulated) and digested with `digest`.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// How many tensors.
    pub tensors: usize,
    /// Bytes per tensor.
    pub tensor_len: u64,
    /// The digest of every component, if any.
    pub digest: Option<DigestAlgorithm>,
}

/// What a simulated run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// From the first piece admitted to the file published.
    pub wall: Duration,
    /// Pieces the tensors were cut into.
    pub pieces: u64,
    /// The simulated work divided evenly among the workers: what the run would take if
    /// coordination cost nothing (the sum of every piece's latencies ÷ workers, rounded up to
    /// whole pieces per worker).
    pub ideal: Duration,
    /// The most bytes the budget had admitted at once.
    pub peak_in_flight: u64,
    /// How long the reading side waited for budget.
    pub budget_wait: Duration,
    /// How long the writing side waited for the next piece in order.
    pub order_wait: Duration,
}

/// Runs `workload` through the engine with `par`'s workers and budget, the kernels replaced by
/// `simulation`'s latencies, writing `output` (a small file: one byte per KiB of input).
///
/// # Errors
/// I/O errors creating or writing `output`.
pub fn run(
    workload: &Workload,
    simulation: Simulation,
    par: &ParOptions,
    output: &Path,
) -> Result<Outcome> {
    let options = WriteOptions {
        compression: Compression::Zstd(3),
        digest: workload.digest.clone(),
        ..WriteOptions::default()
    };
    let len = workload.tensor_len;
    // One tensor's bytes, which every tensor reads.
    let bytes = ztensor_io::try_zeroed(len, "the simulated tensor")
        .map_err(|e| ztensor_io::Error::io("allocating", None, e))?;
    let source: &[u8] = &bytes;
    let items: Vec<Item<'_, _>> = (0..workload.tensors)
        .map(|i| {
            let object = Template::Parts(Box::new(Parts {
                name: format!("t{i:06}").into(),
                shape: vec![len].into(),
                attributes: None,
            }));
            Item::Stream {
                object,
                dtype: DType::U8,
                logical_type: None,
                len,
                input: Input::Raw { offset: 0, swap: None, digest: None },
                options: options.clone(),
            }
        })
        .collect();
    let per_tensor = pipeline::pieces_of(len, pipeline::piece_size(&options, len)) as u64;
    let pieces = per_tensor * workload.tensors as u64;
    let pool = par.pool()?;
    let workers = pool.current_num_threads() as u64;
    let budget = Budget::new(par.budget_for(pool.current_num_threads()));

    let mut writer = FileWriter::create(output, Version::V1_2)?;
    let start = Instant::now();
    pipeline::run(
        Some(&source),
        items,
        writer.writer_mut(),
        &pool,
        &budget,
        &(),
        Kernels::Simulated(simulation),
    )?;
    writer.finish()?;
    let wall = start.elapsed();

    // Every piece but a tensor's last is the piece size; the last holds the rest.
    let piece = pipeline::piece_size(&options, len);
    let last = len - (per_tensor - 1) * piece;
    let latency = |bytes: u64| {
        #[allow(clippy::cast_precision_loss, reason = "a latency")]
        let ns = (simulation.compress_ns_per_byte + simulation.digest_ns_per_byte) * bytes as f64;
        ns
    };
    let work_ns =
        (latency(piece) * (per_tensor - 1) as f64 + latency(last)) * workload.tensors as f64;
    // Whole pieces per worker: the busiest worker does ceil(pieces / workers) of them.
    let rounds = pieces.div_ceil(workers.max(1));
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ideal = Duration::from_nanos((work_ns / pieces.max(1) as f64 * rounds as f64) as u64);
    let ns = |a: &std::sync::atomic::AtomicU64| {
        Duration::from_nanos(a.load(std::sync::atomic::Ordering::Relaxed))
    };
    Ok(Outcome {
        wall,
        pieces,
        ideal,
        peak_in_flight: budget.peak(),
        budget_wait: ns(&budget.waits.budget),
        order_wait: ns(&budget.waits.order),
    })
}
