//! `ztensor`: inspect, verify and convert zTensor files of every version.

mod cmd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Parser, Subcommand, ValueEnum};
use ztensor_format::{DigestAlgorithm, Options, Version};
use ztensor_io::{CopyOptions, DigestChoice, FileSource, FileWriter, Reader, copy_all};

/// Inspect, verify and convert zTensor files (versions 0.1, 1.1 and 1.2).
///
/// Exit status: 0 when the file is sound (or the command succeeded), 1 when a file breaks a
/// rule of the format (the message names the object and the rule), 2 for usage and I/O errors.
#[derive(Debug, Parser)]
#[command(name = "ztensor", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version, the attributes and a table of objects and components.
    ///
    /// Example: ztensor info fixtures/examples/tiny-v1.2.zt
    Info {
        /// The file to inspect.
        file: PathBuf,
        /// Also enforce the strict-only rules of spec/rules.md.
        #[arg(long)]
        strict: bool,
    },
    /// Print the conformance dump (JSON, `ztensor-dump/1`): every object's decoded size and
    /// SHA-256. A rejected file prints the rule's identifier and exits with status 1.
    ///
    /// Example: ztensor dump --json fixtures/examples/tiny-v0.1.zt
    Dump {
        /// Print JSON (the only format; accepted for compatibility with the dump protocol).
        #[arg(long)]
        json: bool,
        /// The file to dump.
        file: PathBuf,
    },
    /// Validate everything: the manifest, every digest, every sparse structure and bool byte.
    /// Exit status 0 only when the whole file is sound.
    ///
    /// Example: ztensor verify --strict model.zt
    Verify {
        /// The file to verify.
        file: PathBuf,
        /// Also enforce the strict-only rules of spec/rules.md.
        #[arg(long)]
        strict: bool,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Repack a file on every core: any version in, any version out, zstd and digests computed
    /// in parallel. The output is byte-identical to what `convert` with the same settings
    /// writes, whatever the thread count.
    ///
    /// Example: ztensor repack model.zt model-z.zt --zstd 3 --digest sha256 --threads 8 --memory 2G
    Repack {
        /// The input file.
        input: PathBuf,
        /// The output file.
        output: PathBuf,
        /// The version to write.
        #[arg(long, value_parser = parse_version_arg, default_value = "1.2")]
        to: Version,
        /// Compress every component with zstd at this level (1-22); the default keeps each
        /// object's encoding.
        #[arg(long, value_name = "LEVEL", conflicts_with = "raw", value_parser = clap::value_parser!(i32).range(1..=22))]
        zstd: Option<i32>,
        /// Store every component uncompressed.
        #[arg(long)]
        raw: bool,
        /// Digest every component with this algorithm (`none` drops digests; default: keep).
        #[arg(long, value_enum)]
        digest: Option<DigestArg>,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Most bytes held in flight, e.g. 512M or 2G.
        #[arg(long, value_parser = cmd::repack::parse_size, default_value = "512M")]
        memory: u64,
        /// zstd frame size for large components, e.g. 4M (fixed, so output never depends on
        /// the thread count).
        #[arg(long, value_parser = cmd::repack::parse_size, default_value = "4M")]
        chunk: u64,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Convert a file to another version (or re-encode it), writing OUT atomically.
    ///
    /// Example: ztensor convert old.zt new.zt --to 1.2 --zstd 3 --digest sha256
    ///
    /// Example: ztensor convert model.tb model.zt    (TensorBuffers, detected by content)
    Convert {
        /// The input file.
        input: PathBuf,
        /// The output file.
        output: PathBuf,
        /// What to write: 0.1, 1.1, 1.2, or tensorbuffers (default: tensorbuffers when OUT ends in
        /// .tb, otherwise 1.2).
        #[arg(long, value_parser = parse_target)]
        to: Option<Target>,
        /// Discard attributes when writing TensorBuffers, which cannot hold them.
        #[arg(long)]
        drop_attributes: bool,
        /// Compress every component with zstd at this level (1-22).
        #[arg(long, value_name = "LEVEL", conflicts_with = "raw", value_parser = clap::value_parser!(i32).range(1..=22))]
        zstd: Option<i32>,
        /// Store every component uncompressed.
        #[arg(long)]
        raw: bool,
        /// Digest every component with this algorithm (`none` drops digests; default: keep).
        #[arg(long, value_enum)]
        digest: Option<DigestArg>,
    },
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
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Zt(v) => write!(f, "zTensor {v}"),
            Target::TensorBuffers => f.write_str("TensorBuffers"),
        }
    }
}

fn parse_version_arg(s: &str) -> Result<Version, String> {
    Version::from_short(s)
        .ok_or_else(|| format!("unknown version {s:?} (expected 0.1, 1.1 or 1.2)"))
}

/// `--zstd LEVEL` / `--raw` / neither (keep each object's encoding).
fn compression_choice(zstd: Option<i32>, raw: bool) -> Option<ztensor_io::Compression> {
    match (zstd, raw) {
        (Some(level), _) => Some(ztensor_io::Compression::Zstd(level)),
        (None, true) => Some(ztensor_io::Compression::Raw),
        (None, false) => None,
    }
}

/// `--digest ALG|none` / absent (keep each component's digest).
fn digest_choice(digest: Option<DigestArg>) -> DigestChoice {
    match digest {
        None => DigestChoice::Keep,
        Some(DigestArg::None) => DigestChoice::Drop,
        Some(DigestArg::Crc32c) => DigestChoice::Set(DigestAlgorithm::Crc32c),
        Some(DigestArg::Sha256) => DigestChoice::Set(DigestAlgorithm::Sha256),
        Some(DigestArg::Blake3) => DigestChoice::Set(DigestAlgorithm::Blake3),
    }
}

fn parse_target(s: &str) -> Result<Target, String> {
    match s {
        "tensorbuffers" | "tb" => Ok(Target::TensorBuffers),
        _ => Version::from_short(s).map(Target::Zt).ok_or_else(|| {
            format!("unknown target {s:?} (expected 0.1, 1.1, 1.2 or tensorbuffers)")
        }),
    }
}

/// A file that breaks a rule: exit status 1.
#[derive(Debug)]
struct Rejected(String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Rejected {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            let code = if err.downcast_ref::<Rejected>().is_some() { 1 } else { 2 };
            eprintln!("ztensor: {err:#}");
            ExitCode::from(code)
        }
    }
}

fn options(strict: bool) -> Options {
    if strict { Options::strict() } else { Options::default() }
}

/// Opens a file; a file that breaks a rule becomes `Rejected`, other failures stay errors.
fn open(path: &Path, options: &Options) -> Result<Reader<FileSource>> {
    Reader::open_with(path, options).map_err(|e| match e.rule() {
        Some(_) => anyhow!(Rejected(format!("{}: {e}", path.display()))),
        None => anyhow!("{e}"),
    })
}

/// A TensorBuffers rule broken: `Rejected`, exit status 1.
fn tb_rejected(path: &Path, e: &ztensor_tensorbuffers::Error) -> anyhow::Error {
    anyhow!(Rejected(format!("{}: {e}", path.display())))
}

fn run(cli: Cli) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Command::Info { file, strict } => {
            if cmd::tb::detect(&file).with_context(|| format!("cannot open {}", file.display()))? {
                let reader = cmd::tb::open(&file, strict)?.map_err(|e| tb_rejected(&file, &e))?;
                cmd::tb::info(&mut out, &file, &reader)?;
            } else {
                let reader = open(&file, &options(strict))?;
                cmd::info::print(&mut out, &file, &reader)?;
            }
        }
        Command::Dump { json: _, file } => {
            let (dump, ok) = ztensor_cli::dump::file(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            writeln!(out, "{dump}")?;
            if !ok {
                out.flush()?;
                return Ok(ExitCode::from(1));
            }
        }
        Command::Verify { file, strict, threads } => {
            if cmd::tb::detect(&file).with_context(|| format!("cannot open {}", file.display()))? {
                let reader = cmd::tb::open(&file, strict)?.map_err(|e| tb_rejected(&file, &e))?;
                for t in reader.tensors() {
                    reader.data(&t.name).map_err(|e| tb_rejected(&file, &e))?;
                }
                writeln!(
                    out,
                    "{}: sound ({} TensorBuffers tensors)",
                    file.display(),
                    reader.tensors().len()
                )?;
            } else {
                return verify(&mut out, &file, strict, threads);
            }
        }
        Command::Repack { input, output, to, zstd, raw, digest, threads, memory, chunk, quiet } => {
            if cmd::tb::detect(&input)
                .with_context(|| format!("cannot open {}", input.display()))?
            {
                return Err(anyhow!("repack reads zTensor files; use `convert` for TensorBuffers"));
            }
            let compression = compression_choice(zstd, raw);
            let copy =
                CopyOptions { compression, digest: digest_choice(digest), chunk_size: Some(chunk) };
            let par = ztensor_par::ParOptions { threads, memory_budget: memory };
            let started = std::time::Instant::now();
            let (len, stats, objects) = cmd::repack::run(&input, &output, to, &copy, &par, quiet)
                .map_err(|e| match e.rule() {
                Some(_) => anyhow!(Rejected(format!("cannot repack {}: {e}", input.display()))),
                None => anyhow!("{e}"),
            })?;
            writeln!(
                out,
                "wrote {} ({to}, {objects} objects, {len} bytes) in {:.2} s, peak {} bytes in flight",
                output.display(),
                started.elapsed().as_secs_f64(),
                stats.peak_in_flight
            )?;
        }
        Command::Convert { input, output, to, zstd, raw, digest, drop_attributes } => {
            let target = to.unwrap_or(if output.extension().is_some_and(|e| e == "tb") {
                Target::TensorBuffers
            } else {
                Target::Zt(Version::V1_2)
            });
            let compression = compression_choice(zstd, raw);
            let digest = digest_choice(digest);
            let cannot = |e: &dyn std::fmt::Display, broken: bool| {
                let message = format!("cannot convert {} to {target}: {e}", input.display());
                if broken { anyhow!(Rejected(message)) } else { anyhow!(message) }
            };
            let count = if cmd::tb::detect(&input)
                .with_context(|| format!("cannot open {}", input.display()))?
            {
                let tb = cmd::tb::open(&input, false)?.map_err(|e| tb_rejected(&input, &e))?;
                match target {
                    Target::TensorBuffers => {
                        let mut w = ztensor_tensorbuffers::create(&output)
                            .map_err(|e| cannot(&e, false))?;
                        for t in tb.tensors() {
                            let data = tb.data(&t.name).map_err(|e| cannot(&e, true))?;
                            let shape: Vec<u64> = t.shape.iter().map(|&d| u64::from(d)).collect();
                            w.add(&t.name, t.data_type, &shape, &data)
                                .map_err(|e| cannot(&e, true))?;
                        }
                        w.set_model(tb.metadata().model.clone());
                        w.set_operations(tb.metadata().operations.clone());
                        w.set_version(tb.metadata().version.clone());
                        w.persist().map_err(|e| cannot(&e, false))?;
                    }
                    Target::Zt(version) => {
                        let mut w =
                            FileWriter::create(&output, version).map_err(|e| anyhow!("{e}"))?;
                        let compression = compression.unwrap_or_default();
                        let digest = match digest {
                            DigestChoice::Set(a) => Some(a),
                            _ => None,
                        };
                        let options =
                            ztensor_io::WriteOptions { compression, digest, ..Default::default() };
                        ztensor_tensorbuffers::to_ztensor(&tb, &mut w, &options).map_err(|e| {
                            cannot(
                                &e,
                                e.kind() == ztensor_tensorbuffers::ErrorKind::Unrepresentable,
                            )
                        })?;
                        w.finish().map_err(|e| anyhow!("{e}"))?;
                    }
                }
                tb.tensors().len()
            } else {
                let reader = open(&input, &Options::default())?;
                match target {
                    Target::TensorBuffers => {
                        let mut w = ztensor_tensorbuffers::create(&output)
                            .map_err(|e| cannot(&e, false))?;
                        ztensor_tensorbuffers::from_ztensor(&reader, &mut w, drop_attributes)
                            .map_err(|e| {
                                let hint = if e.to_string().contains("attributes") {
                                    " (--drop-attributes discards them)"
                                } else {
                                    ""
                                };
                                cannot(
                                    &format!("{e}{hint}"),
                                    e.kind() != ztensor_tensorbuffers::ErrorKind::Io,
                                )
                            })?;
                        w.persist().map_err(|e| cannot(&e, false))?;
                    }
                    Target::Zt(to) => {
                        let mut writer =
                            FileWriter::create(&output, to).map_err(|e| anyhow!("{e}"))?;
                        copy_all(
                            &reader,
                            &mut writer,
                            &CopyOptions { compression, digest, ..Default::default() },
                        )
                        .map_err(|e| cannot(&e, e.rule().is_some()))?;
                        writer.finish().map_err(|e| anyhow!("{e}"))?;
                    }
                }
                reader.manifest().len()
            };
            let len = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
            writeln!(out, "wrote {} ({target}, {count} objects, {len} bytes)", output.display())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn verify(out: &mut impl Write, file: &Path, strict: bool, threads: usize) -> Result<ExitCode> {
    let reader = open(file, &options(strict))?;
    let verdicts =
        ztensor_par::verify_all(&reader, strict, &ztensor_par::ParOptions::with_threads(threads))
            .map_err(|e| anyhow!("{e}"))?;
    let mut problems = Vec::new();
    let (mut verified, mut unverifiable, mut absent) = (0usize, Vec::new(), 0usize);
    for (object, (name, verdict)) in reader.manifest().objects().zip(verdicts) {
        if let Err(e) = verdict {
            problems.push(e.to_string());
            continue;
        }
        // A sound object's known digests were all verified by `verify_all`.
        for (role, c) in &object.object().components {
            match &c.digest {
                None => absent += 1,
                Some(d) if d.bytes().is_none() => unverifiable.push(format!("{name}/{role}: {d}")),
                Some(_) => verified += 1,
            }
        }
    }
    for p in &problems {
        writeln!(out, "{p}")?;
    }
    for u in &unverifiable {
        writeln!(out, "unverifiable digest (unknown algorithm): {u}")?;
    }
    let n = reader.manifest().len();
    let summary = format!(
        "{n} objects, {verified} digests verified, {absent} components without digest, {} unverifiable",
        unverifiable.len()
    );
    if problems.is_empty() {
        writeln!(out, "{}: sound ({summary})", file.display())?;
        Ok(ExitCode::SUCCESS)
    } else {
        writeln!(out, "{}: {} problem(s) ({summary})", file.display(), problems.len())?;
        Ok(ExitCode::from(1))
    }
}
