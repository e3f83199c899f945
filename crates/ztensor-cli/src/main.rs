//! `ztensor`: inspect, verify and convert zTensor files of every version.

mod cmd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Parser, Subcommand, ValueEnum};
use ztensor_format::{DigestAlgorithm, Options, Version};
use ztensor_io::{
    CopyOptions, DigestCheck, DigestChoice, FileSource, FileWriter, Reader, copy_all,
};

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
    },
    /// Convert a file to another version (or re-encode it), writing OUT atomically.
    ///
    /// Example: ztensor convert old.zt new.zt --to 1.2 --zstd 3 --digest sha256
    Convert {
        /// The input file.
        input: PathBuf,
        /// The output file.
        output: PathBuf,
        /// The version to write.
        #[arg(long, value_parser = parse_version, default_value = "1.2")]
        to: Version,
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

fn parse_version(s: &str) -> Result<Version, String> {
    Version::from_short(s)
        .ok_or_else(|| format!("unknown version {s:?} (expected 0.1, 1.1 or 1.2)"))
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

fn run(cli: Cli) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Command::Info { file, strict } => {
            let reader = open(&file, &options(strict))?;
            cmd::info::print(&mut out, &file, &reader)?;
        }
        Command::Dump { json: _, file } => match Reader::open(&file) {
            Ok(reader) => writeln!(out, "{}", cmd::dump::accepted(&reader))?,
            Err(e) => match e.format_error() {
                Some(f) => {
                    writeln!(out, "{}", cmd::dump::rejected(f.kind().id(), &f.to_string()))?;
                    return Ok(ExitCode::from(1));
                }
                None => return Err(anyhow!("{e}")),
            },
        },
        Command::Verify { file, strict } => return verify(&mut out, &file, strict),
        Command::Convert { input, output, to, zstd, raw, digest } => {
            let reader = open(&input, &Options::default())?;
            let compression = match (zstd, raw) {
                (Some(level), _) => Some(ztensor_io::Compression::Zstd(level)),
                (None, true) => Some(ztensor_io::Compression::Raw),
                (None, false) => None,
            };
            let digest = match digest {
                None => DigestChoice::Keep,
                Some(DigestArg::None) => DigestChoice::Drop,
                Some(DigestArg::Crc32c) => DigestChoice::Set(DigestAlgorithm::Crc32c),
                Some(DigestArg::Sha256) => DigestChoice::Set(DigestAlgorithm::Sha256),
                Some(DigestArg::Blake3) => DigestChoice::Set(DigestAlgorithm::Blake3),
            };
            let mut writer = FileWriter::create(&output, to)
                .with_context(|| format!("cannot write {}", output.display()))?;
            let copied = copy_all(&reader, &mut writer, &CopyOptions { compression, digest });
            copied.map_err(|e| match e.rule() {
                Some(_) => {
                    anyhow!(Rejected(format!("cannot convert {} to {to}: {e}", input.display())))
                }
                None => anyhow!("{e}"),
            })?;
            let len = writer.finish().map_err(|e| anyhow!("{e}"))?;
            writeln!(
                out,
                "wrote {} ({to}, {} objects, {len} bytes)",
                output.display(),
                reader.manifest().len()
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn verify(out: &mut impl Write, file: &Path, strict: bool) -> Result<ExitCode> {
    let reader = open(file, &options(strict))?;
    let mut problems = Vec::new();
    let (mut verified, mut unverifiable, mut absent) = (0usize, Vec::new(), 0usize);
    for object in reader.manifest().objects() {
        let name = object.name();
        if let Some(reason) = object.unsupported() {
            problems.push(format!("unsupported object: {reason}"));
            continue;
        }
        for role in object.object().components.keys() {
            match reader.verify_digest(name, role) {
                Ok(DigestCheck::Verified(_)) => verified += 1,
                Ok(DigestCheck::Absent) => absent += 1,
                Ok(DigestCheck::Unverifiable(d)) => {
                    unverifiable.push(format!("{name}/{role}: {d}"))
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
        if let Err(e) = reader.check_data(name, strict) {
            problems.push(e.to_string());
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
