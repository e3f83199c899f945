//! `ztensor`: inspect, verify, convert and edit zTensor files of every version, and bring
//! safetensors checkpoints (single or sharded) and TensorBuffers files in and out.

mod cmd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use ztensor_format::{DigestAlgorithm, Options, Version};
use ztensor_io::{DigestChoice, FileSource, Reader};

/// What every reading command says of its input.
const READS: &str = "The file to read: zTensor (0.1, 1.1, 1.2), a sharded zTensor or safetensors \
     checkpoint (its index), safetensors, TensorBuffers, NumPy .npy/.npz, GGUF, or a PyTorch \
     checkpoint (.pt, .pth, .bin, .ckpt), recognised by content; `-` reads standard input";

/// Inspect, verify, convert and repack tensor checkpoints on every core: zTensor 0.1, 1.1 and
/// 1.2, safetensors, TensorBuffers, NumPy, GGUF and PyTorch.
///
/// Reads (recognised by content, whatever the extension): zTensor 0.1/1.1/1.2 files and sharded
/// zTensor checkpoints (NAME.zt.index.json); safetensors files and Hugging Face sharded
/// checkpoints (*.safetensors.index.json); TensorBuffers (.tb); NumPy .npy and .npz; GGUF
/// (.gguf, quantized blocks kept exactly); PyTorch checkpoints (torch.save zip or legacy:
/// .pt, .pth, .bin, .ckpt; the pickle is read by a machine that runs no code). `-` reads
/// standard input.
///
/// Writes: zTensor 0.1/1.1/1.2 (one file, or a sharded checkpoint into a directory), safetensors
/// and TensorBuffers (`convert`); one tensor as NumPy .npy (`extract`).
///
/// Example: ztensor convert model.safetensors.index.json model.zt --zstd 3 --digest sha256
///
/// Example: ztensor convert model.pth model.zt
///
/// Example: ztensor convert model.gguf model.zt
///
/// Example: ztensor convert arrays.npz arrays.zt
///
/// Exit status: 0 on success; 1 when the data says no: a file breaks a rule of its format (the
/// message names the file, the object and the rule), content the target format cannot hold,
/// `verify` found a problem, or `diff` found a difference; 2 when the request fails: usage
/// errors, missing files or names, I/O errors.
#[derive(Debug, Parser)]
#[command(name = "ztensor", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Refuse an input whose objects decode to more than RATIO times its size (and more than
    /// 1 GiB): crafted files that expand a few bytes into gigabytes are refused before any
    /// work. Raise it for a file that is genuinely that compressible.
    #[arg(long, global = true, value_name = "RATIO", default_value_t = ztensor_format::Limits::DEFAULT.max_expansion)]
    max_expansion: u64,
    /// Print sizes as exact byte counts (and element counts whole) instead of human units
    /// (`83.1 MB`, decimal, as disks count).
    #[arg(long, global = true)]
    bytes: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print what a file is, its attributes (a key to a line) and a table of its objects or
    /// tensors: shape, dtype, element count, stored and decoded size. Reads every input format
    /// (`ztensor --help` lists them).
    ///
    /// Example: ztensor info model.zt
    ///
    /// Example: ztensor info model.pth
    ///
    /// Example: ztensor info model.gguf --attributes
    Info {
        #[arg(help = READS)]
        file: PathBuf,
        /// Also enforce the strict-only rules (`ztensor rules` lists every rule).
        #[arg(long)]
        strict: bool,
        /// Print JSON instead of a table (every value whole, sizes exact).
        #[arg(long)]
        json: bool,
        /// Print every attribute value whole (long ones are otherwise cut to a line), and the
        /// attributes of each object or tensor that has its own.
        #[arg(long)]
        attributes: bool,
    },
    /// List object names, one per line, sorted; only those matching a pattern when patterns
    /// are given (`*` any run of characters, `?` one character, `[abc]`, `[a-z]`, `[!x]`).
    ///
    /// Example: ztensor ls model.zt 'layers.*.weight'
    ///
    /// Example: ztensor ls model.safetensors.index.json
    Ls {
        #[arg(help = READS)]
        file: PathBuf,
        /// Glob patterns; a name is listed when it matches any of them.
        patterns: Vec<String>,
        /// Print a JSON array instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Print the conformance dump (JSON, `ztensor-dump/1`) of a zTensor (0.1, 1.1, 1.2) or
    /// TensorBuffers file: every object's decoded size and SHA-256. A rejected file prints the
    /// rule's identifier and exits with status 1.
    ///
    /// Example: ztensor dump --json fixtures/examples/tiny-v0.1.zt
    Dump {
        /// Print JSON (the only format; accepted for compatibility with the dump protocol).
        #[arg(long)]
        json: bool,
        /// The zTensor or TensorBuffers file to dump (`-` reads standard input).
        file: PathBuf,
    },
    /// Validate everything: the manifest, every digest, every sparse structure and bool byte.
    /// Exit status 0 only when the whole file is sound.
    ///
    /// Example: ztensor verify --strict --threads 4 model.zt
    ///
    /// Example: ztensor verify model.safetensors.index.json
    Verify {
        #[arg(help = READS)]
        file: PathBuf,
        /// Also enforce the strict-only rules (`ztensor rules` lists every rule).
        #[arg(long)]
        strict: bool,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        threads: usize,
        /// Print JSON: {"file", "sound", "objects", "problems", "digests"}.
        #[arg(long)]
        json: bool,
        /// No progress bar (there is none anyway when stderr is not a terminal).
        #[arg(long, short)]
        quiet: bool,
    },
    /// Convert any input format to zTensor (0.1, 1.1, 1.2; one file or sharded), safetensors or
    /// TensorBuffers on every core, writing OUT atomically. Reads zTensor, sharded zTensor and
    /// safetensors checkpoints, safetensors, TensorBuffers, NumPy .npy/.npz, GGUF and PyTorch
    /// checkpoints (.pt, .pth, .bin, .ckpt), recognised by content. The target is --to, else
    /// OUT's extension (.zt, .safetensors, .tb), else zTensor 1.2; an OUT named like a format
    /// this tool does not write (.pth, .gguf, .npz, …) is refused.
    ///
    /// Example: ztensor convert model.safetensors.index.json model.zt --zstd 3 --digest sha256
    ///
    /// Example: ztensor convert model.pth model.zt
    ///
    /// Example: ztensor convert model.gguf model.zt --zstd 3
    ///
    /// Example: ztensor convert arrays.npz arrays.zt
    ///
    /// Example: ztensor convert model.zt model.safetensors
    ///
    /// Example: ztensor convert old.zt new.zt --to 1.1
    ///
    /// An OUT that ends in `/` (or is a directory) receives a sharded zTensor checkpoint: one
    /// shard per input shard (or per --shard-size), named like the input's with `.zt`, and
    /// NAME.zt.index.json, byte-identical to what `plan`, `run` and `finalize` write.
    ///
    /// Example: ztensor convert model.safetensors.index.json out/ --zstd 3
    Convert {
        #[arg(help = READS)]
        input: PathBuf,
        /// The output file, or a directory (ending in `/`) for a sharded checkpoint.
        output: PathBuf,
        /// Split a sharded output into shards of at most SIZE decoded bytes (e.g. 5G; an
        /// object larger than that gets a shard of its own), also for single-file inputs.
        #[arg(long, value_parser = cmd::repack::parse_size, value_name = "SIZE")]
        shard_size: Option<u64>,
        /// What to write: zt (zTensor 1.2), 0.1, 1.1, 1.2, safetensors or tensorbuffers.
        #[arg(long, value_parser = parse_target)]
        to: Option<Target>,
        /// Discard attributes the target cannot hold (TensorBuffers holds none; safetensors
        /// only text → text file metadata; zTensor 0.1 no file attributes).
        #[arg(long)]
        drop_attributes: bool,
        /// Leave out the objects whose names match this glob (repeatable).
        #[arg(long, value_name = "GLOB")]
        exclude: Vec<String>,
        /// Carry safetensors tensors of dtypes zTensor has no type for (F4, F6_E2M3, F6_E3M2,
        /// F8_E8M0) as u8 bytes, their dtype and shape kept in the object attributes
        /// `safetensors.dtype` and `safetensors.shape`; converting back to safetensors restores
        /// them. Without it such tensors are refused (or left out with --exclude).
        #[arg(long)]
        carry_unknown_dtypes: bool,
        #[command(flatten)]
        encoding: Encoding,
        #[command(flatten)]
        run: Run,
    },
    /// Plan a sharded conversion as units of work for a scheduler, one per output shard: the
    /// same input and options always give the same plan. Run the units with `ztensor run`
    /// anywhere that sees the same paths, then `ztensor finalize`.
    ///
    /// Example: ztensor plan model.safetensors.index.json out/ --zstd 3 -o plan.json
    Plan {
        /// The input file (or sharded checkpoint index).
        input: PathBuf,
        /// The output directory.
        output: PathBuf,
        /// Where to write the plan.
        #[arg(short = 'o', long = "plan", value_name = "PLAN")]
        plan: PathBuf,
        /// The version to write.
        #[arg(long, value_parser = parse_version_arg, default_value = "1.2")]
        to: Version,
        /// Shards of at most SIZE decoded bytes instead of one per input shard.
        #[arg(long, value_parser = cmd::repack::parse_size, value_name = "SIZE")]
        shard_size: Option<u64>,
        /// Discard attributes the target cannot hold.
        #[arg(long)]
        drop_attributes: bool,
        /// Leave out the objects whose names match this glob (repeatable).
        #[arg(long, value_name = "GLOB")]
        exclude: Vec<String>,
        /// Carry safetensors tensors of dtypes zTensor lacks as bytes (see `convert`).
        #[arg(long)]
        carry_unknown_dtypes: bool,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Run one unit of a plan: write its shard (atomically) and a receipt. A unit already done
    /// is verified and skipped; two attempts of one unit may race safely.
    ///
    /// Example: sbatch --array=0-7 --wrap 'ztensor run plan.json'   (K from SLURM_ARRAY_TASK_ID)
    #[command(name = "run")]
    RunUnit {
        /// The plan.
        plan: PathBuf,
        /// The unit; default $SLURM_ARRAY_TASK_ID, then $JOB_COMPLETION_INDEX (Kubernetes
        /// Indexed Jobs).
        #[arg(long)]
        unit: Option<usize>,
        #[command(flatten)]
        run: Run,
    },
    /// Check every unit's receipt and shard, and write the index. Refuses a partial set,
    /// naming the units missing.
    Finalize {
        /// The plan.
        plan: PathBuf,
        /// Also hash every shard again and compare it with its receipt.
        #[arg(long)]
        deep: bool,
    },
    /// Repack a zTensor file on every core: any version in, any version out, zstd and digests
    /// computed in parallel. The output is byte-identical to what `convert` with the same
    /// settings writes, whatever the thread count.
    ///
    /// Example: ztensor repack model.zt model-z.zt --zstd 3 --digest sha256 --threads 8 --memory 2G
    Repack {
        /// The zTensor file to read, any version (`-` reads standard input); other formats
        /// go through `convert`.
        input: PathBuf,
        /// The output file.
        output: PathBuf,
        /// The version to write.
        #[arg(long, value_parser = parse_version_arg, default_value = "1.2")]
        to: Version,
        #[command(flatten)]
        encoding: Encoding,
        #[command(flatten)]
        run: Run,
        /// zstd frame size for large components, e.g. 4M (fixed, so output never depends on
        /// the thread count).
        #[arg(long, value_parser = cmd::repack::parse_chunk, default_value = "4M")]
        chunk: u64,
        /// Leave out the file attributes and every object's attributes (zTensor 0.1 has no
        /// file attributes).
        #[arg(long)]
        drop_attributes: bool,
    },
    /// Append every object of SOURCE (any input format: `ztensor --help` lists them) to TARGET, a zTensor 1.x file, in place: new bytes go after the old end and
    /// the old bytes are never rewritten. Names already in TARGET are refused before anything is written.
    ///
    /// Crash-safe: until the append commits, TARGET reads as it was (a journal beside it,
    /// `.TARGET.zt-journal`, records where it ended). A failed append, a full disk, Ctrl-C or
    /// SIGTERM truncate it back to exactly its old bytes; after a kill or a power loss,
    /// `ztensor repair TARGET` (or the next append) does. One writer at a time: a second append,
    /// or a convert/repack/remove onto TARGET, waits for this one (or, with --no-wait, fails).
    ///
    /// Example: ztensor append model.zt --from extra.safetensors --zstd 3
    Append {
        /// The zTensor 1.x file to add to.
        target: PathBuf,
        #[arg(long, help = READS)]
        from: PathBuf,
        #[command(flatten)]
        encoding: Encoding,
        #[command(flatten)]
        run: Run,
    },
    /// Write OUT with every object of FILE except the named ones (OUT may be FILE itself; it
    /// is replaced atomically).
    ///
    /// Example: ztensor remove model.zt optimizer.state lm_head.bias -o trimmed.zt
    Remove {
        /// The zTensor file to copy from (`-` reads standard input).
        file: PathBuf,
        /// The objects to leave out.
        #[arg(required = true)]
        names: Vec<String>,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Fail at once, instead of waiting, when another process is writing OUT.
        #[arg(long)]
        no_wait: bool,
    },
    /// Restore a zTensor file whose last append did not finish (the process was killed, the
    /// machine lost power) to its last complete state: the bytes the append wrote are truncated
    /// away, as the append's journal records. Needs no free space; a sound file is left alone,
    /// so running it twice is harmless. Exit status 0 when the file is sound afterwards.
    ///
    /// Example: ztensor repair model.zt
    Repair {
        /// The file to repair.
        file: PathBuf,
        /// For a file torn without a journal (by another program, or an older ztensor): truncate
        /// it to the last complete manifest found by scanning backwards. That manifest cannot be
        /// told from one carried inside the appended data; use this only on files you trust.
        #[arg(long)]
        scan: bool,
    },
    /// Write one object as a NumPy .npy file. bf16 and FP8 are widened to f32 (exactly),
    /// complex types become complex64/complex128, sparse objects are written dense.
    ///
    /// Example: ztensor extract model.zt layers.0.weight -o weight.npy
    ///
    /// Example: ztensor extract model.pth encoder.embed.weight -o embed.npy
    Extract {
        #[arg(help = READS)]
        file: PathBuf,
        /// The object to extract.
        name: String,
        /// The .npy file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Refuse to densify sparse objects larger than this, e.g. 4G.
        #[arg(long, value_parser = cmd::repack::parse_size, default_value = "1G")]
        max_dense: u64,
    },
    /// Compare two files object by object: added, removed, and changed in format, shape,
    /// dtype or content (decoded bytes, whatever the encoding). Exit status 1 when they differ.
    ///
    /// Example: ztensor diff before.zt after.zt
    ///
    /// Example: ztensor diff model.safetensors.index.json model.zt
    Diff {
        #[arg(help = READS)]
        a: PathBuf,
        #[arg(help = READS)]
        b: PathBuf,
        /// Print JSON: {"added", "removed", "changed", "same"}.
        #[arg(long)]
        json: bool,
    },
    /// List the rules files are checked against: identifier, layer, whether only --strict
    /// enforces it, and what it says. Errors name the rule they break by its identifier.
    ///
    /// Example: ztensor rules
    Rules {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print an object's values in C order (bf16/FP8 widened to f32; sparse objects densified),
    /// at most --limit of them.
    ///
    /// Example: ztensor cat model.zt layers.0.bias --limit 20
    ///
    /// Example: ztensor cat model.gguf token_embd.weight -n 8
    Cat {
        #[arg(help = READS)]
        file: PathBuf,
        /// The object to print.
        name: String,
        /// The most values to print (0 for all).
        #[arg(long, short = 'n', default_value_t = 100)]
        limit: usize,
    },
}

/// Output encoding flags shared by the writing commands.
#[derive(Debug, Args)]
struct Encoding {
    /// Compress every component with zstd at this level (1-22); the default keeps each
    /// object's encoding (raw for foreign inputs).
    #[arg(long, value_name = "LEVEL", conflicts_with = "raw", value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd: Option<i32>,
    /// Store every component uncompressed.
    #[arg(long)]
    raw: bool,
    /// With --zstd, compress every component even where zstd makes it larger. Without it, a
    /// component that fits one zstd frame and that zstd does not make smaller (a small or
    /// incompressible tensor) is stored raw, and the summary says how many were.
    #[arg(long, requires = "zstd")]
    zstd_always: bool,
    /// Digest every component with this algorithm (`none` drops digests; default: keep).
    #[arg(long, value_enum)]
    digest: Option<DigestArg>,
}

/// Parallelism and progress flags shared by the long-running commands.
#[derive(Debug, Args)]
struct Run {
    /// Worker threads (default: one per core).
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    threads: usize,
    /// Most bytes held in flight, e.g. 512M or 2G (default: 64M per thread, at most 512M).
    #[arg(long, value_parser = cmd::repack::parse_size)]
    memory: Option<u64>,
    /// No progress bar and no summary line (errors are still reported).
    #[arg(long, short)]
    quiet: bool,
    /// Fail at once, instead of waiting, when another process is writing the output.
    #[arg(long)]
    no_wait: bool,
}

impl Run {
    fn par(&self) -> ztensor_par::ParOptions {
        ztensor_par::ParOptions {
            threads: threads(self.threads),
            memory_budget: self.memory.unwrap_or(0),
        }
    }
}

/// `--threads`, capped at four per core: more only adds memory and switching, and a mistyped
/// count (100000) would exhaust the machine.
fn threads(requested: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let cap = cores.saturating_mul(4);
    if requested > cap {
        eprintln!("ztensor: --threads {requested} is more than 4 per core here; using {cap}");
        cap
    } else {
        requested
    }
}

impl Encoding {
    /// `--zstd LEVEL` / `--raw` / neither (keep each object's encoding).
    fn compression(&self) -> Option<ztensor_io::Compression> {
        match (self.zstd, self.raw) {
            (Some(level), _) => Some(ztensor_io::Compression::Zstd(level)),
            (None, true) => Some(ztensor_io::Compression::Raw),
            (None, false) => None,
        }
    }

    /// `--digest ALG|none` / absent (keep each component's digest).
    fn digest(&self) -> DigestChoice {
        match self.digest {
            None => DigestChoice::Keep,
            Some(DigestArg::None) => DigestChoice::Drop,
            Some(DigestArg::Crc32c) => DigestChoice::Set(DigestAlgorithm::Crc32c),
            Some(DigestArg::Sha256) => DigestChoice::Set(DigestAlgorithm::Sha256),
            Some(DigestArg::Blake3) => DigestChoice::Set(DigestAlgorithm::Blake3),
        }
    }

    fn copy(&self) -> ztensor_io::CopyOptions {
        ztensor_io::CopyOptions {
            compression: self.compression(),
            digest: self.digest(),
            raw_if_not_smaller: !self.zstd_always,
            ..Default::default()
        }
    }

    /// Write options for content that arrives without an encoding (foreign formats).
    fn fresh(&self) -> ztensor_io::WriteOptions {
        let digest = match self.digest() {
            DigestChoice::Set(a) => Some(a),
            _ => None,
        };
        ztensor_io::WriteOptions {
            compression: self.compression().unwrap_or_default(),
            digest,
            raw_if_not_smaller: !self.zstd_always,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DigestArg {
    None,
    Crc32c,
    Sha256,
    Blake3,
}

/// What `convert` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Zt(Version),
    TensorBuffers,
    Safetensors,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Zt(v) => write!(f, "zTensor {v}"),
            Target::TensorBuffers => f.write_str("TensorBuffers"),
            Target::Safetensors => f.write_str("safetensors"),
        }
    }
}

fn parse_version_arg(s: &str) -> Result<Version, String> {
    Version::from_short(s)
        .ok_or_else(|| format!("unknown version {s:?} (expected 0.1, 1.1 or 1.2)"))
}

fn parse_target(s: &str) -> Result<Target, String> {
    match s {
        "tensorbuffers" | "tb" => Ok(Target::TensorBuffers),
        "safetensors" | "st" => Ok(Target::Safetensors),
        // zTensor without a version: the current one, as for an output without --to.
        "zt" | "ztensor" => Ok(Target::Zt(Version::V1_2)),
        _ => Version::from_short(s).map(Target::Zt).ok_or_else(|| {
            format!(
                "unknown target {s:?} (expected zt (1.2), 0.1, 1.1, 1.2, safetensors or \
                 tensorbuffers)"
            )
        }),
    }
}

/// What `convert` writes to `output`: `to`, else what the output's extension names (zTensor
/// 1.2 for `.zt` and anything else). An extension of a format this tool reads but does not write
/// is refused rather than given zTensor bytes under a misleading name, and so are encoding
/// options the target has no place for (usage errors, status 2).
fn convert_target(output: &Path, to: Option<Target>, encoding: &Encoding) -> Result<Target> {
    let extension = output.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let target = match (to, extension.as_deref()) {
        (Some(to), _) => to,
        (None, Some("tb")) => Target::TensorBuffers,
        (None, Some("safetensors")) => Target::Safetensors,
        (None, Some(e @ ("bin" | "pt" | "pth" | "ckpt" | "npz" | "npy" | "gguf"))) => {
            let extract = if e == "npy" {
                "; `ztensor extract FILE NAME -o OUT.npy` writes one object as .npy"
            } else {
                ""
            };
            bail!(
                "{} ends in .{e}, a format this tool reads but does not write: name a .zt, \
                 .safetensors or .tb output, or say what to write with --to (zt, safetensors, \
                 tensorbuffers){extract}",
                output.display()
            );
        }
        (None, _) => Target::Zt(Version::V1_2),
    };
    if let Target::Safetensors | Target::TensorBuffers = target {
        let option = match (encoding.zstd, encoding.digest) {
            (Some(_), _) => Some("--zstd"),
            (None, Some(_)) => Some("--digest"),
            (None, None) => None,
        };
        if let Some(option) = option {
            bail!("{option} does not apply to {target}, which stores raw bytes and no digests");
        }
    }
    Ok(target)
}

/// The data said no (a broken file, unrepresentable content, a difference): exit status 1.
#[derive(Debug)]
struct Rejected(String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Rejected {}

/// SIGINT, SIGTERM and SIGHUP undo what is being written (temporary files removed, appends
/// truncated back to their old end), then exit with 128 + the signal, as a shell reports a
/// process the signal killed.
///
/// SIGXFSZ (a file grew past the process's file size limit) is caught too, so the write that
/// crossed the limit fails like a full disk and is undone, instead of the signal killing the
/// process in the middle of it.
#[cfg(unix)]
fn handle_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
    let _ = signal_hook::flag::register(
        SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new().name("zt-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            ztensor_io::interrupt();
            cmd::stdin::remove();
            std::process::exit(128 + signal);
        }
    });
}

/// Elsewhere the platform's default applies (no handler, no cleanup on Ctrl-C).
#[cfg(not(unix))]
fn handle_signals() {}

fn main() -> ExitCode {
    handle_signals();
    let cli = Cli::parse();
    ztensor_cli::set_max_expansion(cli.max_expansion);
    let result = run(cli);
    // Readers never wait on a lock held by someone who is not writing; they say so.
    for path in ztensor_io::read_without_lock() {
        eprintln!(
            "ztensor: note: {} is locked by another process that is not appending to it; read it \
             as it stands without waiting (more than {} s)",
            cmd::text::shown(&path.display().to_string()),
            ztensor_io::READER_PATIENCE.as_secs()
        );
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            let code = if err.downcast_ref::<Rejected>().is_some() { 1 } else { 2 };
            eprintln!("ztensor: {}", cmd::text::shown_message(&format!("{err:#}")));
            ExitCode::from(code)
        }
    }
}

fn options(strict: bool) -> Options {
    ztensor_cli::options(strict)
}

/// A zTensor error as the CLI reports it: a broken rule is `Rejected` (status 1), other
/// failures (I/O, names not found) are plain errors (status 2). `context` prefixes the message
/// unless the error already names the path.
fn zt_error(context: &str, e: &ztensor_io::Error) -> anyhow::Error {
    let note = ztensor_cli::limit_note(e.rule());
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() {
        format!("{text}{note}")
    } else {
        format!("{context}: {text}{note}")
    };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// A foreign-format error as the CLI reports it (status 1 for the data saying no).
fn foreign_error(context: &str, e: &ztensor_foreign::Error) -> anyhow::Error {
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() { text } else { format!("{context}: {text}") };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// Opens a zTensor file; a file that breaks a rule becomes `Rejected`, other failures stay
/// errors.
fn open(path: &Path, options: &Options) -> Result<Reader<FileSource>> {
    Reader::open_with(path, options).map_err(|e| match e.rule() {
        Some(_) => {
            let note = ztensor_cli::limit_note(e.rule());
            anyhow!(Rejected(format!("{}: {e}{note}{}", path.display(), torn_hint(path, options))))
        }
        None => anyhow!("{e}"),
    })
}

/// For a file that does not end with a valid manifest but holds an earlier complete one: the
/// remains of an append cut short with no journal to say where it began.
fn torn_hint(path: &Path, options: &Options) -> String {
    let Some(source) = ztensor_io::open_input(path).ok().and_then(|f| FileSource::new(f).ok())
    else {
        return String::new();
    };
    match ztensor_io::recover(source, options) {
        Ok((reader, found)) if found.discarded > 0 => format!(
            "\nhint: this looks like an append that was cut short with no journal (by another \
             program, or an older ztensor): a complete manifest of {} objects ends at byte {} of \
             {}. `ztensor repair --scan {}` truncates the file there, trusting that manifest, \
             which nothing can tell from one carried inside the appended data",
            reader.manifest().len(),
            found.end,
            found.end + found.discarded,
            path.display()
        ),
        _ => String::new(),
    }
}

/// Takes the write lock on an existing `output`: waiting (and saying so) while another process
/// writes it, or failing at once with `no_wait`.
fn lock_output(output: &Path, no_wait: bool, quiet: bool) -> Result<Option<ztensor_io::WriteLock>> {
    ztensor_io::check_output(output).map_err(|e| anyhow!("{e}"))?;
    match ztensor_io::WriteLock::try_acquire(output) {
        Err(e) if matches!(e.kind(), ztensor_io::ErrorKind::Busy { .. }) && !no_wait => {
            if !quiet {
                eprintln!(
                    "ztensor: waiting for another process to finish writing {}",
                    output.display()
                );
            }
            ztensor_io::WriteLock::acquire(output).map_err(|e| anyhow!("{e}"))
        }
        other => other.map_err(|e| anyhow!("{e}")),
    }
}

/// The lock a command writing `output` from `input` holds: for the whole command when it
/// rewrites a file in place (so no append slips in between its read and its rename); otherwise
/// only checked for here (`--no-wait` fails at once), and taken again around the final rename.
fn output_lock(
    input: &Path,
    output: &Path,
    no_wait: bool,
    quiet: bool,
) -> Result<Option<ztensor_io::WriteLock>> {
    let lock = lock_output(output, no_wait, quiet)?;
    Ok(if cmd::same_file(input, output) { lock } else { None })
}

/// Opens a zTensor file for a command that reads zTensor only, with a clear message for the
/// foreign formats it recognises.
fn open_zt(path: &Path, command: &str) -> Result<Reader<FileSource>> {
    match cmd::detect(path)? {
        cmd::Kind::Zt => open(path, &ztensor_cli::options(false)),
        other => Err(anyhow!(
            "{}: `{command}` reads zTensor files, and this is {other}; convert it first \
             (ztensor convert {} OUT.zt)",
            path.display(),
            path.display()
        )),
    }
}

/// The lines `convert` and `repack` end with (unless --quiet): what was written, in the
/// vocabulary of `info` (objects, decoded and stored bytes, the file's size), how long it took
/// and, for outputs of the parallel engine, the most bytes it held in flight; and how many
/// components went raw because zstd would not make them smaller.
fn wrote(
    out: &mut impl Write,
    output: &Path,
    format: &str,
    converted: &cmd::convert::Converted,
    file_len: u64,
    started: std::time::Instant,
    zstd: bool,
) -> std::io::Result<()> {
    use cmd::text::{plural, shown, size};
    let peak = converted.peak.map(|p| format!(", peak {} in flight", size(p))).unwrap_or_default();
    let what = match converted.tally {
        Some(t) if t.decoded_unknown == 0 => {
            format!("{} decoded, {} stored", size(t.decoded), size(t.stored))
        }
        Some(t) => format!("{} stored", size(t.stored)),
        None => format!("{} decoded", size(converted.decoded.unwrap_or(0))),
    };
    writeln!(
        out,
        "wrote {} ({format}, {}: {what}; file {}) in {:.2} s{peak}",
        shown(&output.display().to_string()),
        plural(converted.objects, "object"),
        size(file_len),
        started.elapsed().as_secs_f64()
    )?;
    if let Some(t) = converted.tally.filter(|t| zstd && t.raw_components > 0) {
        writeln!(
            out,
            "{} of {} stored raw: zstd would not make them smaller (--zstd-always compresses \
             them anyway)",
            t.raw_components,
            plural(usize::try_from(t.components).unwrap_or(usize::MAX), "component")
        )?;
    }
    for note in &converted.notes {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// Whether `output` asks for a sharded checkpoint (it ends in `/` or is a directory), and
/// how it is split; `--shard-size` is refused for a file output.
fn sharding(output: &Path, shard_size: Option<u64>) -> Result<Option<ztensor_shard::Split>> {
    let directory = output.as_os_str().to_string_lossy().ends_with('/') || output.is_dir();
    match (directory, shard_size) {
        (true, Some(size)) => Ok(Some(ztensor_shard::Split::Size(size.max(1)))),
        (true, None) => Ok(Some(ztensor_shard::Split::LikeInput)),
        (false, Some(_)) => Err(anyhow!(
            "--shard-size writes a sharded checkpoint: give an output directory (ending in /), \
             not {}",
            output.display()
        )),
        (false, None) => Ok(None),
    }
}

/// The unit a scheduler gave this process: `SLURM_ARRAY_TASK_ID`, else
/// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Jobs).
fn unit_from_environment() -> Result<usize> {
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(value) = std::env::var(var) {
            return value
                .trim()
                .parse()
                .map_err(|_| anyhow!("{var}={value:?} is not a unit number"));
        }
    }
    Err(anyhow!(
        "which unit? give --unit K, or run under a Slurm array (SLURM_ARRAY_TASK_ID) or a \
         Kubernetes Indexed Job (JOB_COMPLETION_INDEX)"
    ))
}

/// An error of the sharded-checkpoint code as the CLI reports it: a broken rule of a file (an
/// index that disagrees with its shards, a malformed plan) is `Rejected` (status 1).
fn shard_error(context: &str, e: &ztensor_shard::Error) -> anyhow::Error {
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() { text } else { format!("{context}: {text}") };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// Opens any input the tool reads (zTensor of every version, TensorBuffers, safetensors, a
/// sharded safetensors checkpoint) as a tensor source.
fn open_source(path: &Path) -> Result<Box<dyn ztensor_io::TensorSource>> {
    open_source_with(path, false)
}

/// As [`open_source_with`], for a command that writes `output` (as `what`): refused when
/// `output` is the input, or one of the shards of a checkpoint given by its index (opened
/// once, for both).
fn open_source_for(
    path: &Path,
    output: &Path,
    what: &str,
    carry_unknown: bool,
) -> Result<Box<dyn ztensor_io::TensorSource>> {
    cmd::not_over(path, output, what)?;
    if cmd::detect(path)? == cmd::Kind::ZtIndex {
        let ckpt = ztensor_shard::ShardedZt::open(path, &ztensor_cli::options(false))
            .map_err(|e| shard_error("", &e))?;
        for (shard, _) in ckpt.shards() {
            cmd::not_over(shard, output, what)?;
        }
        return Ok(Box::new(ckpt));
    }
    if cmd::detect(path)? != cmd::Kind::SafetensorsIndex {
        return open_source_with(path, carry_unknown);
    }
    let ckpt = ztensor_foreign::sharded::ShardedCheckpoint::open(path)
        .map_err(|e| foreign_error("", &e))?;
    for (shard, _) in ckpt.shards() {
        cmd::not_over(shard, output, what)?;
    }
    Ok(Box::new(ckpt.carry_unknown_dtypes(carry_unknown)))
}

/// As [`open_source`]; with `carry_unknown`, safetensors tensors of dtypes zTensor lacks are
/// carried as bytes.
fn open_source_with(path: &Path, carry_unknown: bool) -> Result<Box<dyn ztensor_io::TensorSource>> {
    let source = open_any(path, carry_unknown)?;
    // A single file's objects against its size (a sharded checkpoint's shards are files of
    // their own, each checked when read as one).
    if !matches!(cmd::detect(path)?, cmd::Kind::SafetensorsIndex | cmd::Kind::ZtIndex) {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        ztensor_io::check_expansion(&*source, len, &options(false).limits).map_err(|e| {
            let e = zt_error(&format!("{}", path.display()), &e);
            let hint = "(--max-expansion RATIO raises the limit)";
            if e.downcast_ref::<Rejected>().is_some() {
                anyhow!(Rejected(format!("{e:#} {hint}")))
            } else {
                anyhow!("{e:#} {hint}")
            }
        })?;
    }
    Ok(source)
}

/// Opens any input as a tensor source, through the format registry; each reader's refusal
/// reported as that reader's errors are (a broken rule is status 1, with its hints).
fn open_any(path: &Path, carry_unknown: bool) -> Result<Box<dyn ztensor_io::TensorSource>> {
    let options = ztensor_registry::OpenOptions {
        options: ztensor_cli::options(false),
        carry_unknown_dtypes: carry_unknown,
    };
    let kind = cmd::detect(path)?;
    match ztensor_registry::open_kind(kind, path, &options) {
        Ok(opened) => Ok(opened.into_source()),
        Err(e) => Err(open_error(path, &options.options, e)),
    }
}

/// A registry refusal as the CLI reports it, by the reader it came from.
fn open_error(path: &Path, options: &Options, e: ztensor_registry::OpenError) -> anyhow::Error {
    use ztensor_registry::OpenError;
    match e {
        OpenError::Zt(e) if e.rule().is_some() => {
            let note = ztensor_cli::limit_note(e.rule());
            anyhow!(Rejected(format!("{}: {e}{note}{}", path.display(), torn_hint(path, options))))
        }
        OpenError::Zt(e) => anyhow!("{e}"),
        OpenError::Foreign(e) => foreign_error("", &e),
        OpenError::TensorBuffers(e) => tb_rejected(path, &e),
        OpenError::Shard(e) => shard_error("", &e),
        other => anyhow!("{other}"),
    }
}

/// A TensorBuffers error as the CLI reports it: a broken rule is `Rejected` (status 1), a
/// failed read is not.
fn tb_rejected(path: &Path, e: &ztensor_tensorbuffers::Error) -> anyhow::Error {
    let message = cmd::text::shown(&format!("{}: {e}", path.display())).into_owned();
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// Spools standard input for the command's input given as `-` (every reading command; not the
/// inputs a plan records for later, nor files changed in place).
fn spool_inputs(command: &mut Command) -> Result<Option<cmd::stdin::Spooled>> {
    let mut spool = None;
    let resolve = cmd::stdin::resolve;
    match command {
        Command::Info { file, .. }
        | Command::Ls { file, .. }
        | Command::Dump { file, .. }
        | Command::Verify { file, .. }
        | Command::Remove { file, .. }
        | Command::Extract { file, .. }
        | Command::Cat { file, .. } => resolve(file, &mut spool)?,
        Command::Convert { input, .. } | Command::Repack { input, .. } => {
            resolve(input, &mut spool)?;
        }
        Command::Append { from, .. } => resolve(from, &mut spool)?,
        Command::Diff { a, b, .. } => {
            resolve(a, &mut spool)?;
            resolve(b, &mut spool)?;
        }
        _ => {}
    }
    Ok(spool)
}

fn run(mut cli: Cli) -> Result<ExitCode> {
    cmd::text::set_exact(cli.bytes);
    let _spooled = spool_inputs(&mut cli.command)?;
    // Line by line to a terminal, in blocks to a pipe or file: a listing of a million objects
    // is otherwise a million writes.
    let stdout = std::io::stdout().lock();
    let mut out: Box<dyn Write> = if std::io::IsTerminal::is_terminal(&stdout) {
        Box::new(stdout)
    } else {
        Box::new(std::io::BufWriter::with_capacity(64 << 10, stdout))
    };
    let code = match cli.command {
        Command::Info { file, strict, json, attributes } => {
            match cmd::detect(&file)? {
                cmd::Kind::Zt => {
                    let reader = open(&file, &options(strict))?;
                    let pending = reader.source().uncommitted();
                    let shadowed: Vec<&str> =
                        reader.manifest().shadowed().map(|o| o.name()).collect();
                    if json {
                        cmd::info::write_json(&mut out, &file, &reader, pending, &shadowed)?;
                    } else {
                        cmd::info::print(&mut out, &file, &reader, attributes)?;
                        if !shadowed.is_empty() {
                            writeln!(
                                out,
                                "\nnote: {} object(s) share a name with an earlier one ({}), as \
                                 the reference v0.1 writer allows; a NAME given to a command finds \
                                 the first, and zTensor 1.x cannot hold both (--strict refuses \
                                 the file)",
                                shadowed.len(),
                                shadowed
                                    .iter()
                                    .map(|n| format!("{:?}", cmd::text::shown(n)))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )?;
                        }
                        if pending > 0 {
                            writeln!(
                                out,
                                "\nnote: {pending} bytes after the end belong to an append that has \
                                 not committed (still running, or interrupted: `ztensor repair {}` \
                                 removes them); the file reads as it was before it",
                                file.display()
                            )?;
                        }
                    }
                }
                // Every other format, through the tensor-source interface.
                other => {
                    let source: Box<dyn ztensor_io::TensorSource> = match other {
                        cmd::Kind::TensorBuffers => Box::new(
                            cmd::tb::open(&file, strict)?.map_err(|e| tb_rejected(&file, &e))?,
                        ),
                        _ => open_source(&file)?,
                    };
                    cmd::convert::source_info(&mut out, &file, other, &*source, json, attributes)?;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Ls { file, patterns, json } => {
            cmd::look::ls(&mut out, &*open_source(&file)?, &patterns, json)?
        }
        Command::Dump { json: _, file } => {
            let ok = ztensor_dump::write_file(&file, &mut out)
                .with_context(|| format!("cannot read {}", file.display()))?;
            if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Command::Verify { file, strict, threads, json, quiet } => match cmd::detect(&file)? {
            cmd::Kind::Zt => {
                cmd::info::verify(&mut out, &file, strict, self::threads(threads), json, quiet)?
            }
            other => cmd::convert::foreign_verify(
                &mut out,
                &file,
                other,
                strict,
                self::threads(threads),
                json,
                quiet,
            )?,
        },
        Command::Repack { input, output, to, encoding, run, chunk, drop_attributes } => {
            if cmd::detect(&input)? != cmd::Kind::Zt {
                return Err(anyhow!(
                    "repack reads zTensor files; use `convert` for {}",
                    cmd::detect(&input)?
                ));
            }
            let _lock = output_lock(&input, &output, run.no_wait, run.quiet)?;
            let copy = ztensor_io::CopyOptions {
                chunk_size: Some(chunk),
                drop_attributes,
                ..encoding.copy()
            };
            let started = std::time::Instant::now();
            let converted = cmd::repack::run(&input, &output, to, &copy, &run.par(), run.quiet)
                .map_err(|e| {
                    let context = format!("cannot repack {}", input.display());
                    cmd::convert::hinted(zt_error(&context, &e), e.refused())
                })?;
            if !run.quiet {
                let target = Target::Zt(to).to_string();
                let len = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
                let zstd = encoding.zstd.is_some();
                wrote(&mut out, &output, &target, &converted, len, started, zstd)?;
            }
            ExitCode::SUCCESS
        }
        Command::Convert {
            input,
            output,
            shard_size,
            to,
            drop_attributes,
            exclude,
            carry_unknown_dtypes,
            encoding,
            run,
        } => {
            let target = convert_target(&output, to, &encoding)?;
            let sharded = sharding(&output, shard_size)?;
            let _lock = match sharded {
                Some(_) => None,
                None => output_lock(&input, &output, run.no_wait, run.quiet)?,
            };
            let request = cmd::convert::Request {
                input: &input,
                output: &output,
                target,
                drop_attributes,
                exclude: &exclude,
                carry_unknown: carry_unknown_dtypes,
                encoding: &encoding,
                run: &run,
                sharded,
            };
            let started = std::time::Instant::now();
            let converted = cmd::convert::run(&request)?;
            if let Some(index_path) = &converted.index {
                if !run.quiet {
                    let index = ztensor_shard::ShardIndex::read(index_path)
                        .map_err(|e| shard_error("", &e))?;
                    let bytes: u64 = index.shards.values().map(|s| s.size).sum();
                    writeln!(
                        out,
                        "wrote {} and {} in {} ({target}, {}: {} decoded; files {}) in {:.2} s",
                        cmd::text::plural(index.shards.len(), "shard"),
                        index_path.file_name().unwrap_or_default().to_string_lossy(),
                        cmd::text::shown(&output.display().to_string()),
                        cmd::text::plural(converted.objects, "object"),
                        cmd::text::size(converted.decoded.unwrap_or(0)),
                        cmd::text::size(bytes),
                        started.elapsed().as_secs_f64()
                    )?;
                    for note in &converted.notes {
                        writeln!(out, "{note}")?;
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let len = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
            if !run.quiet {
                let zstd = encoding.zstd.is_some();
                wrote(&mut out, &output, &target.to_string(), &converted, len, started, zstd)?;
            }
            ExitCode::SUCCESS
        }
        Command::Plan {
            input,
            output,
            plan,
            to,
            shard_size,
            drop_attributes,
            exclude,
            carry_unknown_dtypes,
            encoding,
        } => {
            let split = sharding(&output, shard_size)?.unwrap_or(match shard_size {
                Some(size) => ztensor_shard::Split::Size(size),
                None => ztensor_shard::Split::LikeInput,
            });
            let run = Run { threads: 0, memory: None, quiet: true, no_wait: false };
            let request = cmd::convert::Request {
                input: &input,
                output: &output,
                target: Target::Zt(to),
                drop_attributes,
                exclude: &exclude,
                carry_unknown: carry_unknown_dtypes,
                encoding: &encoding,
                run: &run,
                sharded: Some(split),
            };
            let source = open_source_with(&input, carry_unknown_dtypes)?;
            let made = cmd::convert::plan_of(&request, split, &*source)?;
            // The plan file is neither a file the plan reads nor one it will write.
            if let Some(id) = ztensor_io::FileId::of_path(&plan).map_err(|e| anyhow!("{e}"))? {
                let named = made.inputs.iter().map(|f| f.path.clone()).chain(
                    made.units
                        .iter()
                        .map(|u| made.output.join(&u.shard))
                        .chain([made.output.join(&made.index)]),
                );
                for other in named {
                    if ztensor_io::FileId::of_path(&other).ok().flatten() == Some(id) {
                        return Err(anyhow!(
                            "{} is also {} of the plan; writing the plan there would replace it \
                             (choose another -o)",
                            plan.display(),
                            other.display()
                        ));
                    }
                }
            }
            let mut file = ztensor_io::AtomicFile::create(&plan).map_err(|e| anyhow!("{e}"))?;
            file.write_all(made.to_json().as_bytes())
                .with_context(|| format!("cannot write {}", plan.display()))?;
            file.persist().map_err(|e| anyhow!("{e}"))?;
            let objects: usize = made.units.iter().map(|u| u.objects.len()).sum();
            writeln!(
                out,
                "planned {} ({}, {} decoded) into {}: run `ztensor run {} --unit K` for K in 0..{} \
                 (or as a Slurm array / Kubernetes Indexed Job), then `ztensor finalize {}`",
                cmd::text::plural(made.units.len(), "unit"),
                cmd::text::plural(objects, "object"),
                cmd::text::size(made.units.iter().map(|u| u.bytes).sum::<u64>()),
                plan.display(),
                plan.display(),
                made.units.len(),
                plan.display()
            )?;
            if let Some(note) = cmd::convert::oversized(&made, split) {
                writeln!(out, "{note}")?;
            }
            ExitCode::SUCCESS
        }
        Command::RunUnit { plan: path, unit, run } => {
            let plan = ztensor_shard::Plan::read(&path).map_err(|e| shard_error("", &e))?;
            let unit = match unit {
                Some(k) => k,
                None => unit_from_environment()?,
            };
            let source = open_source_with(&plan.input, plan.options.carry_unknown_dtypes)?;
            let total = plan.units.get(unit).map_or(0, |u| u.bytes);
            let bar = cmd::repack::Bar::new(total, run.quiet);
            let started = std::time::Instant::now();
            let done = ztensor_shard::run_unit(&plan, unit, &*source, &run.par(), &bar);
            bar.finish();
            let context = format!("unit {unit} of {}", path.display());
            let outcome =
                done.map_err(|e| cmd::convert::hinted(shard_error(&context, &e), e.refused()))?;
            if !run.quiet {
                let r = outcome.receipt();
                let what = match outcome {
                    ztensor_shard::Outcome::Written(_) => "wrote",
                    ztensor_shard::Outcome::AlreadyDone(_) => "already done (verified):",
                };
                writeln!(
                    out,
                    "unit {unit}: {what} {} ({}, file {}, {}) in {:.2} s",
                    plan.output.join(&r.shard).display(),
                    cmd::text::plural(r.objects, "object"),
                    cmd::text::size(r.size),
                    r.digest,
                    started.elapsed().as_secs_f64()
                )?;
            }
            ExitCode::SUCCESS
        }
        Command::Finalize { plan: path, deep } => {
            let plan = ztensor_shard::Plan::read(&path).map_err(|e| shard_error("", &e))?;
            let index = ztensor_shard::finalize(&plan, deep)
                .map_err(|e| shard_error(&format!("cannot finalize {}", path.display()), &e))?;
            writeln!(
                out,
                "wrote {} ({}, {})",
                index.display(),
                cmd::text::plural(plan.units.len(), "shard"),
                cmd::text::plural(plan.units.iter().map(|u| u.objects.len()).sum(), "object")
            )?;
            ExitCode::SUCCESS
        }
        Command::Append { target, from, encoding, run } => {
            let (count, len) = cmd::edit::append(&target, &from, &encoding, &run)?;
            if !run.quiet {
                writeln!(
                    out,
                    "appended {} from {} to {} (file now {})",
                    cmd::text::plural(count, "object"),
                    from.display(),
                    target.display(),
                    cmd::text::size(len)
                )?;
            }
            ExitCode::SUCCESS
        }
        Command::Remove { file, names, output, no_wait } => {
            let _lock = output_lock(&file, &output, no_wait, false)?;
            // A name given twice is removed once.
            let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut seen = std::collections::HashSet::new();
            names.retain(|n| seen.insert(*n));
            let reader = open_zt(&file, "remove")?;
            for name in &names {
                cmd::look::found(&file, &reader, name)?;
            }
            let before = reader.manifest().len();
            drop(reader);
            let len =
                ztensor_io::remove_objects(&file, &output, &names, &ztensor_cli::options(false))
                    .map_err(|e| zt_error(&format!("cannot remove from {}", file.display()), &e))?;
            writeln!(
                out,
                "wrote {} ({}, file {}; removed {})",
                output.display(),
                cmd::text::plural(before.saturating_sub(names.len()), "object"),
                cmd::text::size(len),
                names.iter().map(|n| cmd::text::shown(n)).collect::<Vec<_>>().join(", ")
            )?;
            ExitCode::SUCCESS
        }
        Command::Repair { file, scan } => cmd::edit::repair(&mut out, &file, scan)?,
        Command::Extract { file, name, output, max_dense } => {
            ztensor_io::check_output(&output).map_err(|e| anyhow!("{e}"))?;
            // Never over the input, nor over a shard of a checkpoint given by its index.
            let source = open_source_for(&file, &output, "an extracted array", false)?;
            cmd::look::extract(&mut out, &file, &*source, &name, &output, max_dense)?;
            ExitCode::SUCCESS
        }
        Command::Diff { a, b, json } => {
            let (sa, sb) = (open_source(&a)?, open_source(&b)?);
            cmd::look::diff(&mut out, (&a, &*sa), (&b, &*sb), json)?
        }
        Command::Rules { json } => {
            cmd::info::rules(&mut out, json)?;
            ExitCode::SUCCESS
        }
        Command::Cat { file, name, limit } => {
            let source = open_source(&file)?;
            cmd::look::cat(&mut out, &file, &*source, &name, limit)?;
            ExitCode::SUCCESS
        }
    };
    out.flush()?;
    Ok(code)
}
