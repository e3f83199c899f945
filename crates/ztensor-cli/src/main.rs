//! `ztensor`: inspect and validate zTensor files of every version.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ztensor_format::{Container, Encoding, Options, ValidatedManifest, Version, validate};

/// Inspect and validate zTensor files (versions 0.1, 1.1 and 1.2).
///
/// Exit status: 0 when the file is sound, 1 when it breaks a rule of the format (the message
/// names the rule), 2 for usage and I/O errors.
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
    /// The manifest is validated first; a file that breaks a rule is reported with the rule's
    /// identifier and exit status 1.
    ///
    /// Example: ztensor info fixtures/examples/tiny-v1.2.zt
    Info {
        /// The file to inspect.
        file: PathBuf,
        /// Also enforce the strict-only rules of spec/rules.md.
        #[arg(long)]
        strict: bool,
    },
}

/// A file that breaks a rule: reported on stderr, exit status 1.
#[derive(Debug)]
struct Rejected(ztensor_format::Error);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for Rejected {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
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

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info { file, strict } => {
            let options = if strict { Options::strict() } else { Options::default() };
            let manifest = open(&file, &options)?;
            let mut out = std::io::stdout().lock();
            print_info(&mut out, &file, &manifest)?;
            out.flush()?;
            Ok(())
        }
    }
}

/// Reads and validates the manifest with positional reads: the header, the trailer, the
/// manifest. Blob bytes are never read.
fn open(path: &Path, options: &Options) -> Result<ValidatedManifest> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?.len();
    let rejected = |e: ztensor_format::Error| {
        anyhow::Error::new(Rejected(e)).context(path.display().to_string())
    };
    let mut head = vec![0u8; usize::try_from(len.min(8))?];
    file.read_exact_at(&mut head, 0)?;
    let container = Container::detect(&head).map_err(rejected)?;
    let trailer = container.trailer_len().min(len);
    let mut tail = vec![0u8; usize::try_from(trailer)?];
    file.read_exact_at(&mut tail, len - trailer)?;
    let location = container.locate_manifest(len, &tail, &options.limits).map_err(rejected)?;
    // The length was checked against the limit and the file size by `locate_manifest`.
    let mut bytes = vec![0u8; usize::try_from(location.len)?];
    file.read_exact_at(&mut bytes, location.offset)?;
    let manifest = ztensor_format::Manifest::decode(container, &bytes, &options.limits)
        .map_err(|e| rejected(e.shifted(location.offset)))?;
    validate(manifest, location, options).map_err(rejected)
}

fn print_info(out: &mut impl Write, path: &Path, m: &ValidatedManifest) -> Result<()> {
    let manifest = m.manifest();
    let version = match (&manifest.version_string, manifest.version) {
        (Some(s), v) => format!("{v} (\"{s}\")"),
        (None, Version::V0_1) => "0.1".to_owned(),
        (None, v) => v.to_string(),
    };
    let location = m.location();
    writeln!(out, "file:       {}", path.display())?;
    writeln!(out, "version:    {version}")?;
    writeln!(out, "objects:    {}", m.len())?;
    writeln!(out, "manifest:   {} bytes at offset {}", location.len, location.offset)?;
    match &manifest.attributes {
        Some(a) => writeln!(out, "attributes: {a}")?,
        None => writeln!(out, "attributes: none")?,
    }
    if m.is_empty() {
        return Ok(());
    }
    let header =
        ["NAME", "FORMAT", "SHAPE", "ROLE", "DTYPE", "ENCODING", "STORED", "DECODED", "DIGEST"];
    let mut rows = Vec::new();
    let (mut stored, mut decoded, mut unknown) = (0u64, 0u64, 0usize);
    let mut objects: Vec<_> = m.objects().collect();
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    for object in objects {
        let o = object.object();
        for (i, (role, c)) in o.components.iter().enumerate() {
            let mut dtype = match &c.logical_type {
                Some(t) => format!("{}:{t}", c.dtype),
                None => c.dtype.to_string(),
            };
            match &c.byte_order {
                ztensor_format::ByteOrder::Little => {}
                ztensor_format::ByteOrder::Big => dtype.push_str(" (big-endian)"),
                ztensor_format::ByteOrder::Unknown(b) => dtype.push_str(&format!(" ({b}?)")),
            }
            let decoded_len = object.decoded_len(role);
            stored = stored.saturating_add(c.length);
            match decoded_len {
                Some(n) => decoded = decoded.saturating_add(n),
                None => unknown += 1,
            }
            let first = i == 0;
            rows.push([
                if first { o.name.clone() } else { String::new() },
                if first { o.format.to_string() } else { String::new() },
                if first { format!("{:?}", o.shape) } else { String::new() },
                role.clone(),
                dtype,
                if c.encoding == Encoding::Raw { "raw".into() } else { c.encoding.to_string() },
                c.length.to_string(),
                decoded_len.map_or_else(|| "?".into(), |n| n.to_string()),
                c.digest.as_ref().map_or_else(|| "-".into(), |d| d.algorithm().name().to_owned()),
            ]);
        }
        if let Some(reason) = object.unsupported() {
            let mut row: [String; 9] = Default::default();
            row[3] = format!("unsupported: {}", reason.kind());
            rows.push(row);
        }
    }
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> =
            cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        parts.join("  ").trim_end().to_owned()
    };
    writeln!(out)?;
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in &rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    let unknown = if unknown > 0 {
        format!(" (+{unknown} component(s) of unknown decoded size)")
    } else {
        String::new()
    };
    writeln!(out)?;
    writeln!(out, "total: {stored} bytes stored, {decoded} bytes decoded{unknown}")?;
    Ok(())
}
