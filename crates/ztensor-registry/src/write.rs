//! The formats written, and the one conversion every front end runs: [`Target`] (what `--to`
//! and Python's `to` name, what an output's extension says) and [`write_file`] /
//! [`write_to`], which write any tensor source as one of them on the engine's threads.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use ztensor_format::Version;
use ztensor_io::{CopyOptions, TensorSink, TensorSource};
use ztensor_par::{ParOptions, Progress, ZtSink};

/// A format written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// zTensor of a version (0.1, 1.1, 1.2).
    Zt(Version),
    /// zTensor 2, in canonical form (or every part under `zt.zstd-seekable/1` with zstd).
    Zt2,
    /// safetensors.
    Safetensors,
    /// TensorBuffers.
    TensorBuffers,
}

/// The names a target is asked for by, after each version's own (`0.1`, `1.1`, `1.2`).
const NAMES: &[(&str, Target)] = &[
    ("zt", Target::Zt(Version::V1_2)),
    ("ztensor", Target::Zt(Version::V1_2)),
    ("2", Target::Zt2),
    ("zt2", Target::Zt2),
    ("ztensor2", Target::Zt2),
    ("safetensors", Target::Safetensors),
    ("st", Target::Safetensors),
    ("tensorbuffers", Target::TensorBuffers),
    ("tb", Target::TensorBuffers),
];

/// What the names accepted are, for messages.
pub const TARGET_NAMES: &str = "zt (1.2), 0.1, 1.1, 1.2, 2, safetensors or tensorbuffers";

/// What an output's extension says is written, and the extensions of formats read but not
/// written, with the nearest a misspelling may have meant.
const EXTENSIONS: &[(&str, Target)] = &[
    ("zt", Target::Zt(Version::V1_2)),
    ("safetensors", Target::Safetensors),
    ("tb", Target::TensorBuffers),
];
pub(crate) const READ_NOT_WRITTEN: &[&str] = &["bin", "pt", "pth", "ckpt", "npz", "npy", "gguf"];
const NEAR: &[(&[&str], &str)] = &[
    (&["safetensor", "st", "sft"], "safetensors"),
    (&["ztensor", "zten", "z"], "zt"),
    (&["tensorbuffers", "tbs"], "tb"),
];

/// Why no target could be told: a name not known, or an output whose name does not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError(String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetError {}

impl Target {
    /// The target called `name` (`zt`, `0.1`, `1.1`, `1.2`, `2`, `safetensors`, `st`,
    /// `tensorbuffers`, `tb`, …).
    ///
    /// # Errors
    /// A name of no target, listing the names known.
    pub fn from_name(name: &str) -> Result<Target, TargetError> {
        if let Some((_, target)) = NAMES.iter().find(|(n, _)| *n == name) {
            return Ok(*target);
        }
        Version::from_short(name).map(Target::Zt).ok_or_else(|| {
            TargetError(format!("unknown target {name:?} (expected {TARGET_NAMES})"))
        })
    }

    /// What to write to `output`: `to` when given, else what the output's extension names
    /// (`.zt`: zTensor 1.2, `.safetensors`, `.tb`). Any other extension, or none, is refused
    /// rather than given bytes under a name that says something else (`out.safetensor`,
    /// `out.txt`, `model.bin`); `-` (standard output) has no name to tell by.
    ///
    /// # Errors
    /// An output whose name says no format written, naming what it may have meant.
    pub fn for_output(output: &Path, to: Option<Target>) -> Result<Target, TargetError> {
        if let Some(to) = to {
            return Ok(to);
        }
        let written = "name a .zt, .safetensors or .tb output";
        let Some(extension) = output.extension().and_then(|e| e.to_str()) else {
            return Err(TargetError(if output.as_os_str() == "-" {
                format!(
                    "- writes to standard output, which has no name to tell the format by: say \
                     what to write with --to ({TARGET_NAMES})"
                )
            } else {
                format!(
                    "{} has no extension to tell what to write: {written}, or say what to write \
                     with --to ({TARGET_NAMES})",
                    output.display()
                )
            }));
        };
        let e = extension.to_ascii_lowercase();
        if let Some((_, target)) = EXTENSIONS.iter().find(|(x, _)| *x == e) {
            return Ok(*target);
        }
        if READ_NOT_WRITTEN.contains(&e.as_str()) {
            let extract = if e == "npy" {
                "; `ztensor extract FILE NAME -o OUT.npy` writes one object as .npy"
            } else {
                ""
            };
            return Err(TargetError(format!(
                "{} ends in .{e}, a format this tool reads but does not write: {written}, or say \
                 what to write with --to (zt, safetensors, tensorbuffers){extract}",
                output.display()
            )));
        }
        let near = NEAR
            .iter()
            .find(|(misspelt, _)| misspelt.contains(&e.as_str()))
            .map(|(_, meant)| format!(" (did you mean .{meant}?)"))
            .unwrap_or_default();
        Err(TargetError(format!(
            "{} ends in .{e}, which names no format this tool writes{near}: {written}, or say \
             what to write with --to ({TARGET_NAMES})",
            output.display()
        )))
    }

    /// The usual extension of a file of this target, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Zt(_) | Target::Zt2 => "zt",
            Target::Safetensors => "safetensors",
            Target::TensorBuffers => "tb",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Zt(v) => write!(f, "zTensor {v}"),
            Target::Zt2 => f.write_str("zTensor 2"),
            Target::TensorBuffers => f.write_str("TensorBuffers"),
            Target::Safetensors => f.write_str("safetensors"),
        }
    }
}

/// How a conversion writes: the same for every front end.
#[derive(Clone)]
#[non_exhaustive]
pub struct WriteOptions {
    /// What is written.
    pub target: Target,
    /// Leave out attributes (file and object) instead of refusing those the target cannot
    /// hold.
    pub drop_attributes: bool,
    /// zTensor 1.x: how content that arrives decoded (any source but zTensor) is encoded.
    pub fresh: ztensor_io::WriteOptions,
    /// zTensor 1.x: how the objects of a zTensor source are carried (stored bytes copied as
    /// they are where nothing asks for another encoding).
    pub copy: CopyOptions,
    /// zTensor 2: every part under `zt.zstd-seekable/1` at this level, else canonical.
    pub zstd: Option<i32>,
    /// The threads and memory the engine runs on, whatever the target.
    pub par: ParOptions,
    /// Told of the work as it is done.
    pub progress: Arc<dyn Progress + Send + Sync>,
}

impl WriteOptions {
    /// `target`, with attributes kept, zstd at `zstd` (raw without; with it, a component zstd
    /// does not make smaller is stored raw, as the command-line tool does unless told
    /// `--zstd-always`) and no digests added, on every core.
    pub fn new(target: Target, zstd: Option<i32>) -> WriteOptions {
        let fresh = zstd.map_or_else(ztensor_io::WriteOptions::raw, ztensor_io::WriteOptions::zstd);
        WriteOptions {
            target,
            drop_attributes: false,
            fresh: ztensor_io::WriteOptions { raw_if_not_smaller: true, ..fresh },
            copy: CopyOptions {
                compression: zstd.map(ztensor_io::Compression::Zstd),
                raw_if_not_smaller: true,
                ..CopyOptions::default()
            },
            zstd,
            par: ParOptions::default(),
            progress: Arc::new(()),
        }
    }

    /// Leaves attributes out.
    #[must_use]
    pub fn drop_attributes(mut self, drop: bool) -> WriteOptions {
        self.drop_attributes = drop;
        self.copy.drop_attributes = drop;
        self
    }

    /// On these threads and this memory.
    #[must_use]
    pub fn par(mut self, par: ParOptions) -> WriteOptions {
        self.par = par;
        self
    }
}

impl fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteOptions")
            .field("target", &self.target)
            .field("drop_attributes", &self.drop_attributes)
            .field("fresh", &self.fresh)
            .field("zstd", &self.zstd)
            .field("par", &self.par)
            .finish_non_exhaustive()
    }
}

/// What a conversion wrote.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Written {
    /// Objects written.
    pub objects: usize,
    /// zTensor 1.x: the most bytes the engine held in flight.
    pub peak_in_flight: Option<u64>,
    /// zTensor 1.x: what the writer was given.
    pub tally: Option<ztensor_io::Tally>,
}

/// Why a conversion failed: the error of the target's writer (each its own, so its verdict,
/// rule and what it refused are kept).
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// The zTensor 1.x writer's (or the source's, read through it).
    Zt(ztensor_io::Error),
    /// The safetensors writer's.
    Foreign(ztensor_foreign::Error),
    /// The TensorBuffers writer's.
    TensorBuffers(ztensor_tensorbuffers::Error),
    /// The zTensor 2 writer's.
    Zt2(ztensor_v2::Error),
}

impl WriteError {
    fn inner(&self) -> &dyn ztensor_format::Verdict {
        match self {
            WriteError::Zt(e) => e,
            WriteError::Foreign(e) => e,
            WriteError::TensorBuffers(e) => e,
            WriteError::Zt2(e) => e,
        }
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Zt(e) => e.fmt(f),
            WriteError::Foreign(e) => e.fmt(f),
            WriteError::TensorBuffers(e) => e.fmt(f),
            WriteError::Zt2(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WriteError {}

/// Each writer's own error decides.
impl ztensor_format::Verdict for WriteError {
    fn is_rejection(&self) -> bool {
        self.inner().is_rejection()
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.inner().refused()
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.inner().rule()
    }
    fn rule_id(&self) -> Option<&'static str> {
        self.inner().rule_id()
    }
    fn failure(&self) -> ztensor_format::Failure {
        self.inner().failure()
    }
    fn object(&self) -> Option<&str> {
        self.inner().object()
    }
    fn offset(&self) -> Option<u64> {
        self.inner().offset()
    }
}

/// Writes `source` to the file `output` as `options.target`, published atomically (through a
/// temporary file beside it and a rename: nothing appears at `output` on an error).
///
/// # Errors
/// What the target cannot hold (naming the object), the source's read errors, the writer's
/// I/O errors.
pub fn write_file(
    source: &dyn TensorSource,
    output: &Path,
    options: &WriteOptions,
) -> Result<Written, WriteError> {
    match options.target {
        Target::Zt(version) => {
            let mut w = ztensor_io::FileWriter::create(output, version).map_err(WriteError::Zt)?;
            let written = zt_into(source, w.writer_mut(), version, options)?;
            w.finish().map_err(WriteError::Zt)?;
            Ok(written)
        }
        Target::Zt2 => {
            let mut sink = ztensor_v2::Zt2Sink::new(output).with_options(zt2_options(options));
            let objects = sink.write_all(source).map_err(WriteError::Zt2)?;
            Ok(Written { objects, ..Written::default() })
        }
        Target::Safetensors => {
            let objects = ztensor_foreign::safetensors::SafetensorsSink::new(output)
                .drop_attributes(options.drop_attributes)
                .write_all(source)
                .map_err(WriteError::Foreign)?;
            Ok(Written { objects, ..Written::default() })
        }
        Target::TensorBuffers => {
            let objects = ztensor_tensorbuffers::TbSink::new(output)
                .drop_attributes(options.drop_attributes)
                .write_all(source)
                .map_err(WriteError::TensorBuffers)?;
            Ok(Written { objects, ..Written::default() })
        }
    }
}

/// Writes `source` into `out` (an upload, standard output) front to back as
/// `options.target`, returning `out` for its owner to complete. zTensor 2, whose canonical
/// form is placed by seeking, is written into an unnamed temporary file first (gone with the
/// process, however it ends) and copied into `out` from there.
///
/// # Errors
/// As [`write_file`].
pub fn write_to<W: Write>(
    source: &dyn TensorSource,
    mut out: W,
    options: &WriteOptions,
) -> Result<(W, Written), WriteError> {
    match options.target {
        Target::Zt(version) => {
            let mut w = ztensor_io::Writer::new(out, version).map_err(WriteError::Zt)?;
            let written = zt_into(source, &mut w, version, options)?;
            let (out, _) = w.finish().map_err(WriteError::Zt)?;
            Ok((out, written))
        }
        Target::Safetensors => {
            let mut sink = ztensor_foreign::safetensors::SafetensorsSink::to_writer(out)
                .drop_attributes(options.drop_attributes);
            let objects = sink.write_all(source).map_err(WriteError::Foreign)?;
            let out = sink.into_inner().expect("a writer's sink gives its writer back");
            Ok((out, Written { objects, ..Written::default() }))
        }
        Target::TensorBuffers => {
            let mut sink = ztensor_tensorbuffers::TbSink::to_writer(out)
                .drop_attributes(options.drop_attributes);
            let objects = sink.write_all(source).map_err(WriteError::TensorBuffers)?;
            let out = sink.into_inner().expect("a writer's sink gives its writer back");
            Ok((out, Written { objects, ..Written::default() }))
        }
        Target::Zt2 => {
            let staging = |e| WriteError::Zt(ztensor_io::Error::io("staging zTensor 2", None, e));
            let staged = tempfile::tempfile().map_err(staging)?;
            let mut sink =
                ztensor_v2::Zt2Sink::to_output(staged).with_options(zt2_options(options));
            let objects = sink.write_all(source).map_err(WriteError::Zt2)?;
            let mut staged = sink.into_inner().expect("an output's sink gives its output back");
            std::io::Seek::rewind(&mut staged).map_err(staging)?;
            std::io::copy(&mut staged, &mut out).map_err(|e| {
                WriteError::Zt(ztensor_io::Error::io("writing zTensor 2 out", None, e))
            })?;
            Ok((out, Written { objects, ..Written::default() }))
        }
    }
}

/// Writes `source` through the engine into `writer`.
fn zt_into<W: Write>(
    source: &dyn TensorSource,
    writer: &mut ztensor_io::Writer<W>,
    version: Version,
    options: &WriteOptions,
) -> Result<Written, WriteError> {
    debug_assert_eq!(writer.version(), version);
    let mut sink = ZtSink::new(writer, options.fresh.clone(), &options.par, &*options.progress)
        .drop_attributes(options.drop_attributes)
        .copying(options.copy.clone());
    let objects = sink.write_all(source).map_err(WriteError::Zt)?;
    let peak = sink.stats().peak_in_flight;
    drop(sink);
    Ok(Written { objects, peak_in_flight: Some(peak), tally: Some(writer.tally()) })
}

/// zTensor 2's writer options from `options`.
fn zt2_options(options: &WriteOptions) -> ztensor_v2::WriteOptions {
    let progress = Arc::clone(&options.progress);
    ztensor_v2::WriteOptions::default()
        .drop_attributes(options.drop_attributes)
        .zstd(options.zstd)
        .par(options.par.clone())
        .progress(Arc::new(move |n| progress.bytes_done(n)))
}
