//! What opening gives: the options it takes, the source it opened with what is known of its
//! input, and its one error type.

use std::fmt;
use std::path::Path;

use ztensor_format::Options;
use ztensor_io::TensorSource;

use crate::detect::Error;
use crate::table::Kind;

/// How [`open`](crate::open) opens a file. The default reads leniently within the limits fitted to this
/// machine ([`ztensor_io::machine_options`]), as every front end does.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Limits and strictness for zTensor files (and for shards of a sharded zTensor
    /// checkpoint); TensorBuffers files are read strictly when `options.strict` is set.
    pub options: Options,
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes.
    pub carry_unknown_dtypes: bool,
    /// Present objects in zTensor 2's own layouts where the input's format has blocks one of
    /// them holds (GGUF's MXFP4 as `zt.mx/1`, its other quantized types as `gguf.<type>/1`):
    /// how an input is read for a zTensor 2 target ([`OpenOptions::writing`]). Off, they are
    /// bytes with attributes, which every target holds.
    pub zt2_layouts: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            options: ztensor_io::machine_options(false),
            carry_unknown_dtypes: false,
            zt2_layouts: false,
        }
    }
}

impl OpenOptions {
    /// These options for an input that is to be written as `target`: in zTensor 2's layouts
    /// when the target is zTensor 2 ([`OpenOptions::zt2_layouts`]), so that each conversion
    /// (the command-line tool's, Python's, each unit of a sharded one) reads its input alike.
    #[cfg(feature = "write")]
    pub fn writing(mut self, target: crate::Target) -> OpenOptions {
        self.zt2_layouts = target == crate::Target::Zt2;
        self
    }

    /// How GGUF's quantized blocks are presented under these options.
    #[cfg(feature = "gguf")]
    pub(crate) fn gguf_blocks(&self) -> ztensor_foreign::gguf::Blocks {
        match self.zt2_layouts {
            true => ztensor_foreign::gguf::Blocks::Layouts,
            false => ztensor_foreign::gguf::Blocks::Bytes,
        }
    }
}

/// Why a file could not be opened: not recognised, or refused by its format's reader (each
/// reader's own error, so its rule and message are kept).
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// Not recognised ([`detect`](crate::detect)).
    Detect(Error),
    /// The zTensor reader's error.
    Zt(ztensor_io::Error),
    /// A foreign format reader's error.
    #[cfg(any(feature = "safetensors", feature = "numpy", feature = "gguf", feature = "torch"))]
    Foreign(ztensor_foreign::Error),
    /// The TensorBuffers reader's error.
    #[cfg(feature = "tensorbuffers")]
    TensorBuffers(ztensor_tensorbuffers::Error),
    /// The sharded zTensor checkpoint reader's error.
    #[cfg(feature = "sharded")]
    Shard(ztensor_shard::Error),
    /// The zTensor 2 reader's error.
    #[cfg(feature = "v2")]
    Zt2(ztensor_v2::Error),
    /// A malformed URL, or a request to the object store that failed.
    #[cfg(feature = "remote")]
    Remote(ztensor_remote::Error),
}

/// Whether the file was read and breaks a rule of its format (a rejection, which the
/// command-line tool reports with exit status 1), as opposed to a failed request: a file that
/// cannot be read, a format not read. Each reader's own error decides, so this never
/// disagrees with the error it wraps; a file not recognised is no rejection.
impl ztensor_format::Verdict for OpenError {
    fn is_rejection(&self) -> bool {
        self.inner().is_some_and(ztensor_format::Verdict::is_rejection)
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.inner().and_then(ztensor_format::Verdict::refused)
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.inner().and_then(ztensor_format::Verdict::rule)
    }
    fn rule_id(&self) -> Option<&'static str> {
        self.inner().and_then(ztensor_format::Verdict::rule_id)
    }
    fn failure(&self) -> ztensor_format::Failure {
        self.inner().map_or(ztensor_format::Failure::Other, ztensor_format::Verdict::failure)
    }
    fn object(&self) -> Option<&str> {
        self.inner().and_then(ztensor_format::Verdict::object)
    }
    fn offset(&self) -> Option<u64> {
        self.inner().and_then(ztensor_format::Verdict::offset)
    }
}

impl OpenError {
    /// Whether the message names the file it is about (a reader's error that carries its
    /// path, a file that cannot be read or is not recognised, a URL), so that a front end adds
    /// the input's path to the others only. A zTensor rule error names no file; neither does
    /// a TensorBuffers or zTensor 2 reader's error.
    pub fn names_file(&self) -> bool {
        match self {
            OpenError::Detect(_) => true,
            OpenError::Zt(e) => e.rule().is_none(),
            #[cfg(any(
                feature = "safetensors",
                feature = "numpy",
                feature = "gguf",
                feature = "torch"
            ))]
            OpenError::Foreign(_) => true,
            #[cfg(feature = "tensorbuffers")]
            OpenError::TensorBuffers(_) => false,
            #[cfg(feature = "sharded")]
            OpenError::Shard(_) => true,
            #[cfg(feature = "v2")]
            OpenError::Zt2(_) => false,
            #[cfg(feature = "remote")]
            OpenError::Remote(_) => true,
        }
    }

    /// Whether the zTensor reader refused the file for a rule of the format: the one refusal
    /// that may be an append cut short, which a front end can look for.
    pub fn is_ztensor_rule(&self) -> bool {
        matches!(self, OpenError::Zt(e) if e.rule().is_some())
    }

    /// The reader's own error, as a [`Verdict`](ztensor_format::Verdict).
    pub(crate) fn inner(&self) -> Option<&dyn ztensor_format::Verdict> {
        match self {
            OpenError::Detect(e) => Some(e),
            OpenError::Zt(e) => Some(e),
            #[cfg(any(
                feature = "safetensors",
                feature = "numpy",
                feature = "gguf",
                feature = "torch"
            ))]
            OpenError::Foreign(e) => Some(e),
            #[cfg(feature = "tensorbuffers")]
            OpenError::TensorBuffers(e) => Some(e),
            #[cfg(feature = "sharded")]
            OpenError::Shard(e) => Some(e),
            #[cfg(feature = "v2")]
            OpenError::Zt2(e) => Some(e),
            #[cfg(feature = "remote")]
            OpenError::Remote(e) => Some(e),
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Detect(e) => e.fmt(f),
            OpenError::Zt(e) => e.fmt(f),
            #[cfg(any(
                feature = "safetensors",
                feature = "numpy",
                feature = "gguf",
                feature = "torch"
            ))]
            OpenError::Foreign(e) => e.fmt(f),
            #[cfg(feature = "tensorbuffers")]
            OpenError::TensorBuffers(e) => e.fmt(f),
            #[cfg(feature = "sharded")]
            OpenError::Shard(e) => e.fmt(f),
            #[cfg(feature = "v2")]
            OpenError::Zt2(e) => e.fmt(f),
            #[cfg(feature = "remote")]
            OpenError::Remote(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<Error> for OpenError {
    fn from(e: Error) -> OpenError {
        OpenError::Detect(e)
    }
}

/// A tensor source of any format, opened by [`open`](crate::open), [`open_mapped`](crate::open_mapped) or [`open_bytes`](crate::open_bytes).
pub struct Opened {
    pub(crate) kind: Kind,
    pub(crate) source: Box<dyn TensorSource + Send + Sync>,
    pub(crate) memory: Option<(usize, usize)>,
    /// The bytes its content lies in: the file's (or the bytes given), with a sharded
    /// checkpoint's shards or a zTensor 2 root's shards added. What the expansion budget is
    /// measured against.
    pub(crate) input_len: u64,
    /// The files its content lies in besides the one opened.
    pub(crate) files: Vec<std::path::PathBuf>,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Opened {
    pub(crate) fn new<T: TensorSource + Send + Sync + 'static>(kind: Kind, source: T) -> Opened {
        Opened { kind, source: Box::new(source), memory: None, input_len: 0, files: Vec::new() }
    }

    /// The files its content lies in besides the one opened: a sharded checkpoint's shards, the
    /// shards a zTensor 2 root's parts lie in (those found); none for a single file. What a
    /// command writing an output must not replace, besides the input itself.
    pub fn files(&self) -> &[std::path::PathBuf] {
        &self.files
    }

    /// The bytes its content lies in: the file's, plus its shards' for a sharded checkpoint
    /// or a zTensor 2 root (only the shards found), or the length of the bytes given.
    pub fn input_len(&self) -> u64 {
        self.input_len
    }

    /// Refuses it when its objects together declare more decoded bytes than `limits` allow
    /// for an input of [`Opened::input_len`] bytes
    /// ([`Limits::max_expanded_len`](ztensor_format::Limits::max_expanded_len)): compression
    /// and views that share bytes can make a small file decode to terabytes. Checked on what
    /// the objects declare, before anything is decoded; returns the total. [`open`](crate::open),
    /// [`open_mapped`](crate::open_mapped) and [`open_bytes`](crate::open_bytes) check it with their options' limits;
    /// [`Detected::open`](crate::Detected::open) leaves it to its caller.
    ///
    /// # Errors
    /// [`OpenError::Zt`] with rule `decoded_too_large`.
    pub fn check_expansion(&self, limits: &ztensor_format::Limits) -> Result<u64, OpenError> {
        ztensor_io::check_expansion(&*self.source, self.input_len, limits).map_err(OpenError::Zt)
    }

    /// Itself, or the refusal of [`Opened::check_expansion`] with the input named.
    pub(crate) fn within_budget(
        self,
        name: Option<&Path>,
        options: &OpenOptions,
    ) -> Result<Opened, OpenError> {
        let Err(OpenError::Zt(e)) = self.check_expansion(&options.options.limits) else {
            return Ok(self);
        };
        let Some(f) = e.format_error() else { return Err(OpenError::Zt(e)) };
        let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
        let named = ztensor_format::Error::new(f.kind(), format!("{shown}: {}", f.message()));
        Err(OpenError::Zt(named.into()))
    }

    /// Which format it is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The tensor source.
    pub fn source(&self) -> &(dyn TensorSource + Send + Sync) {
        &*self.source
    }

    /// The tensor source, to keep.
    pub fn into_source(self) -> Box<dyn TensorSource + Send + Sync> {
        self.source
    }

    /// Where the whole file lies in memory, when it does (a memory map, or the bytes given to
    /// [`open_bytes`](crate::open_bytes)): the address of its first byte and its length, valid while the source
    /// lives (moving the source moves neither). What zero-copy views borrow from.
    pub fn memory(&self) -> Option<(*const u8, usize)> {
        self.memory.map(|(address, len)| (address as *const u8, len))
    }
}
