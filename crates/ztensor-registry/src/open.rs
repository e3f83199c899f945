//! Opening a recognised file (by path, mapped, or from bytes) as a tensor source, with the
//! expansion budget applied.

use std::fmt;
use std::path::Path;

use ztensor_format::Options;
use ztensor_io::{FileSource, ReadAt, Reader, TensorSource};

use crate::detect::{Detected, Error, ErrorKind, detect_source, enabled};
use crate::table::Kind;

/// How [`open`] opens a file. The default reads leniently within the limits fitted to this
/// machine ([`ztensor_io::machine_options`]), as every front end does.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Limits and strictness for zTensor files (and for shards of a sharded zTensor
    /// checkpoint); TensorBuffers files are read strictly when `options.strict` is set.
    pub options: Options,
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes.
    pub carry_unknown_dtypes: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions { options: ztensor_io::machine_options(false), carry_unknown_dtypes: false }
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
    fn inner(&self) -> Option<&dyn ztensor_format::Verdict> {
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

/// A tensor source of any format, opened by [`open`], [`open_mapped`] or [`open_bytes`].
pub struct Opened {
    kind: Kind,
    source: Box<dyn TensorSource + Send + Sync>,
    memory: Option<(usize, usize)>,
    /// The bytes its content lies in: the file's (or the bytes given), with a sharded
    /// checkpoint's shards or a zTensor 2 root's shards added. What the expansion budget is
    /// measured against.
    input_len: u64,
    /// The files its content lies in besides the one opened.
    files: Vec<std::path::PathBuf>,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Opened {
    fn new<T: TensorSource + Send + Sync + 'static>(kind: Kind, source: T) -> Opened {
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
    /// the objects declare, before anything is decoded; returns the total. [`open`],
    /// [`open_mapped`] and [`open_bytes`] check it with their options' limits;
    /// [`Detected::open`] leaves it to its caller.
    ///
    /// # Errors
    /// [`OpenError::Zt`] with rule `decoded_too_large`.
    pub fn check_expansion(&self, limits: &ztensor_format::Limits) -> Result<u64, OpenError> {
        ztensor_io::check_expansion(&*self.source, self.input_len, limits).map_err(OpenError::Zt)
    }

    /// Itself, or the refusal of [`Opened::check_expansion`] with the input named.
    fn within_budget(
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
    /// [`open_bytes`]): the address of its first byte and its length, valid while the source
    /// lives (moving the source moves neither). What zero-copy views borrow from.
    pub fn memory(&self) -> Option<(*const u8, usize)> {
        self.memory.map(|(address, len)| (address as *const u8, len))
    }
}

/// Opens the file at `path`, of any format [`detect`](crate::detect) recognises, read with positional reads;
/// refused when its objects decode to more than the expansion budget allows
/// ([`Opened::check_expansion`]).
///
/// # Errors
/// [`OpenError::Detect`] when it is not recognised; [`OpenError::Zt`] with rule
/// `decoded_too_large` over the budget; the format reader's error otherwise.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    Detected::new(path)?.open(options)?.within_budget(Some(path), options)
}

/// The content identity of the file at `path`, whatever its format: the zTensor 2 content
/// digest (`zt.content/1`) of its objects. A zTensor 2 file's comes from its manifest (its
/// part digests as written); any other input's is the one its canonical zTensor 2 conversion
/// has, so a zTensor 1.x file and its conversion have the same identity.
///
/// # Errors
/// The format reader's error; [`OpenError::Zt2`] for content zTensor 2 cannot hold, a zTensor
/// 2 part without a digest or a data shard (no objects of its own); [`OpenError::Zt`] with rule
/// `decoded_too_large` for an input other than zTensor 2 over the expansion budget (a zTensor 2
/// file's identity comes from its manifest, nothing decoded).
#[cfg(feature = "v2")]
pub fn content_id(
    path: &Path,
    options: &OpenOptions,
    algorithm: ztensor_v2::IdAlgorithm,
) -> Result<String, OpenError> {
    let mut detected = Detected::new(path)?;
    if detected.kind == Kind::Zt2 {
        let max = options.options.limits.max_manifest_len;
        let file = ztensor_v2::File::open(detected.take_source()?, max).map_err(OpenError::Zt2)?;
        return file.content_digest(algorithm).map_err(OpenError::Zt2);
    }
    let opened = detected.open(options)?.within_budget(Some(path), options)?;
    ztensor_v2::content_digest(opened.source(), algorithm).map_err(OpenError::Zt2)
}

impl Detected {
    /// Opens it as a tensor source, read with positional reads through the descriptor it was
    /// told by. The expansion budget is not checked: [`open`] checks it, a caller of this
    /// function does with [`Opened::check_expansion`].
    ///
    /// # Errors
    /// The format reader's error; [`OpenError::Detect`] for a kind this build does not read.
    pub fn open(mut self, options: &OpenOptions) -> Result<Opened, OpenError> {
        let (kind, strict) = (self.kind, options.options.strict);
        #[cfg(not(feature = "tensorbuffers"))]
        let _ = strict;
        let path = self.path.clone();
        let path = path.as_path();
        // What the content lies in besides the file itself: shards, and their bytes.
        let mut shards = 0u64;
        let mut files = Vec::new();
        let opened = match kind {
            Kind::Zt => Opened::new(kind, self.open_zt(options).map_err(OpenError::Zt)?),
            #[cfg(feature = "sharded")]
            Kind::ZtIndex => {
                let ckpt = open_zt_index(path, options)?;
                shards = ckpt
                    .shards()
                    .iter()
                    .map(|(_, r)| r.source().len())
                    .fold(0, u64::saturating_add);
                files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
                chunked_or_not(kind, ckpt)?
            }
            #[cfg(feature = "safetensors")]
            Kind::Safetensors => Opened::new(
                kind,
                ztensor_foreign::safetensors::SafetensorsFile::new(self.take_source()?)
                    .map_err(|e| OpenError::Foreign(e.with_path(path)))?
                    .carry_unknown_dtypes(options.carry_unknown_dtypes),
            ),
            #[cfg(feature = "safetensors")]
            Kind::SafetensorsIndex => {
                let ckpt = ztensor_foreign::sharded::ShardedSafetensors::open(path)
                    .map_err(OpenError::Foreign)?
                    .carry_unknown_dtypes(options.carry_unknown_dtypes);
                shards = ckpt
                    .shards()
                    .iter()
                    .map(|(_, f)| f.source().len())
                    .fold(0, u64::saturating_add);
                files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
                Opened::new(kind, ckpt)
            }
            #[cfg(feature = "tensorbuffers")]
            Kind::TensorBuffers => Opened::new(kind, tb_reader(self.take_source()?, strict)?),
            #[cfg(feature = "numpy")]
            Kind::Npy => {
                let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("array");
                let npy = ztensor_foreign::npy_in::NpyFile::new(self.take_source()?, name);
                Opened::new(kind, npy.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(feature = "numpy")]
            Kind::Npz => {
                let limit = ztensor_io::machine_limits().whole_decode_limit();
                let npz = ztensor_foreign::npz::NpzFile::new(self.take_source()?, limit);
                Opened::new(kind, npz.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(feature = "gguf")]
            Kind::Gguf => {
                let gguf = ztensor_foreign::gguf::GgufFile::new(self.take_source()?);
                Opened::new(kind, gguf.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(feature = "torch")]
            Kind::Torch => {
                let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("tensor");
                let limit = ztensor_io::machine_limits().whole_decode_limit();
                let torch =
                    ztensor_foreign::torch::TorchFile::new(self.take_source()?, name, limit);
                Opened::new(kind, torch.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(all(feature = "torch", feature = "sharded"))]
            Kind::Dcp => {
                let (opened, len, data) = open_dcp(path)?;
                shards = len;
                files = data;
                opened
            }
            #[cfg(feature = "v2")]
            Kind::Zt2 => {
                let file = self.open_zt2(options)?;
                shards = file.shards_len();
                files = file.shard_paths().map(|(_, p)| p.to_path_buf()).collect();
                Opened::new(kind, file)
            }
            #[allow(unreachable_patterns)]
            other => return Err(not_opened(other, Some(path))),
        };
        let len = match self.len {
            Some(len) => len,
            None => file_len(path)?,
        };
        Ok(Opened { input_len: len.saturating_add(shards), files, ..opened })
    }

    /// The zTensor file (0.1, 1.x) as its own reader, as [`open_zt`] opens one: for a command
    /// that reads zTensor only, after telling the file is one.
    ///
    /// # Errors
    /// As [`open_zt`].
    pub fn open_zt(
        &mut self,
        options: &OpenOptions,
    ) -> Result<Reader<FileSource>, ztensor_io::Error> {
        let source = match self.source.take() {
            Some(source) => source.settle(&self.path)?,
            None => FileSource::open(&self.path)?,
        };
        self.len = Some(source.len());
        Reader::new(source, &options.options)
    }

    /// The zTensor 2 file as its own reader, with its shards, as [`open_zt2`] opens one.
    ///
    /// # Errors
    /// As [`open_zt2`].
    #[cfg(feature = "v2")]
    pub fn open_zt2(
        &mut self,
        options: &OpenOptions,
    ) -> Result<ztensor_v2::File<FileSource>, OpenError> {
        let source = self.take_source()?;
        zt2_of(source, &self.path, options)
    }

    /// The TensorBuffers file as its own reader, as [`open_tb`] opens one.
    ///
    /// # Errors
    /// As [`open_tb`].
    #[cfg(feature = "tensorbuffers")]
    pub fn open_tb(
        &mut self,
        options: &OpenOptions,
    ) -> Result<
        Result<ztensor_tensorbuffers::TbFile<FileSource>, ztensor_tensorbuffers::Error>,
        OpenError,
    > {
        let source = self.take_source()?;
        Ok(ztensor_tensorbuffers::TbFile::new(source, &tb_options(options)))
    }

    /// The descriptor it was told by (opened now for an index, told by its name).
    fn take_source(&mut self) -> Result<FileSource, OpenError> {
        let source = match self.source.take() {
            Some(source) => source,
            None => file_source(&self.path)?,
        };
        self.len = Some(source.len());
        Ok(source)
    }
}

/// A sharded zTensor checkpoint as its objects, or, for a Distributed Checkpoint saved as
/// zTensor (its index has a `"dcp"` section), as the whole tensors its objects are chunks of.
#[cfg(feature = "sharded")]
fn chunked_or_not<S: ReadAt + Send + Sync + 'static>(
    kind: Kind,
    ckpt: ztensor_shard::ShardedZtensor<S>,
) -> Result<Opened, OpenError> {
    match ckpt.index().chunked.clone() {
        Some(layout) => Ok(Opened::new(
            kind,
            ztensor_shard::Stitched::new(ckpt, &layout).map_err(OpenError::Shard)?,
        )),
        None => Ok(Opened::new(kind, ckpt)),
    }
}

/// The PyTorch Distributed Checkpoint at `path` (its directory, or its `.metadata`) as its
/// whole tensors: its chunks (each a `torch.save` archive in a data file) stitched by their
/// offsets. With the bytes of its data files and their paths.
#[cfg(all(feature = "torch", feature = "sharded"))]
fn open_dcp(path: &Path) -> Result<(Opened, u64, Vec<std::path::PathBuf>), OpenError> {
    use ztensor_foreign::dcp::{DcpChunks, read_dir_layout};
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    };
    let layout = read_dir_layout(dir).map_err(OpenError::Foreign)?;
    let chunks = DcpChunks::<FileSource>::open_dir(&layout, dir)
        .map_err(|e| OpenError::Foreign(e.with_path(dir)))?;
    // The data files, in the order chunks first name them (a set beside, so that many chunks
    // in few files cost one lookup each).
    let mut data: Vec<std::path::PathBuf> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stitched = ztensor_shard::Chunked { tensors: Vec::new(), other: layout.other.clone() };
    for t in &layout.tensors {
        let chunks = t
            .chunks
            .iter()
            .map(|c| {
                if seen.insert(c.file.as_str()) {
                    data.push(dir.join(&c.file));
                }
                ztensor_shard::Chunk {
                    object: c.object_name(t),
                    offsets: c.offsets.clone(),
                    sizes: c.sizes.clone(),
                }
            })
            .collect();
        stitched.tensors.push(ztensor_shard::ChunkedTensor {
            name: t.name.clone(),
            dtype: t.dtype.clone(),
            shape: t.shape.clone(),
            chunks,
        });
    }
    let bytes = data
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .fold(0, u64::saturating_add);
    let whole = ztensor_shard::Stitched::new(chunks, &stitched)
        .map_err(|e| OpenError::Shard(e.with_path(dir)))?;
    Ok((Opened::new(Kind::Dcp, whole), bytes, data))
}

/// Why `kind` has no arm where it was to be opened: this build lacks its feature, or (for
/// bytes) it is a format of several files. An error, never a panic: a kind added to [`Kind`]
/// without an arm is refused, not a crash.
pub(crate) fn not_opened(kind: Kind, name: Option<&Path>) -> OpenError {
    match enabled(kind, name) {
        Err(e) => OpenError::Detect(e),
        Ok(kind) => {
            let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
            OpenError::Detect(Error::new(
                ErrorKind::NeedsFiles,
                format!(
                    "{shown}: this is {kind}, which is read from its files, not from bytes \
                     or a single remote object"
                ),
            ))
        }
    }
}

/// The size of the file at `path`.
fn file_len(path: &Path) -> Result<u64, OpenError> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| {
        OpenError::Zt(ztensor_io::Error::io("reading the size of", Some(path.to_path_buf()), e))
    })
}

/// The zTensor file (0.1, 1.x) at `path` as its own reader, for what needs the reader itself
/// rather than a tensor source (a repack of its stored bytes, its verification report).
/// Read with positional reads under `options`; the expansion budget is the caller's
/// ([`Opened::check_expansion`] on a source).
///
/// # Errors
/// The reader's error: a broken rule (a cut-short file says so), an I/O failure.
pub fn open_zt(
    path: &Path,
    options: &OpenOptions,
) -> Result<Reader<FileSource>, ztensor_io::Error> {
    Reader::open_with(path, &options.options)
}

/// The sharded zTensor checkpoint whose index is at `path`, as its own reader (for what needs
/// the checkpoint itself, such as checking every shard's digest).
///
/// # Errors
/// [`OpenError::Shard`]: the index or a shard cannot be read, or breaks a rule.
#[cfg(feature = "sharded")]
pub fn open_zt_index(
    path: &Path,
    options: &OpenOptions,
) -> Result<ztensor_shard::ShardedZtensor, OpenError> {
    ztensor_shard::ShardedZtensor::open(path, &options.options).map_err(OpenError::Shard)
}

/// The TensorBuffers file at `path` as its own reader, strict when `options` say so: the
/// outer error is I/O, the inner one a broken rule.
///
/// # Errors
/// [`OpenError::Zt`] when the file cannot be opened.
#[cfg(feature = "tensorbuffers")]
pub fn open_tb(
    path: &Path,
    options: &OpenOptions,
) -> Result<
    Result<ztensor_tensorbuffers::TbFile<FileSource>, ztensor_tensorbuffers::Error>,
    OpenError,
> {
    Ok(ztensor_tensorbuffers::TbFile::new(file_source(path)?, &tb_options(options)))
}

/// How `options` read a TensorBuffers file: strictly when they say so.
#[cfg(feature = "tensorbuffers")]
fn tb_options(options: &OpenOptions) -> ztensor_tensorbuffers::ReadOptions {
    if options.options.strict {
        ztensor_tensorbuffers::ReadOptions::strict()
    } else {
        ztensor_tensorbuffers::ReadOptions::default()
    }
}

/// The zTensor 2 file at `path` with its shards, if it has any, found by their positional
/// names, else by identity among the `.zt` files beside it
/// ([`Resolver::default_for`](ztensor_v2::shards::Resolver::default_for)); each shard's size
/// and container are checked now, its whole-file digest by
/// [`File::verify_shards`](ztensor_v2::File::verify_shards).
///
/// # Errors
/// [`OpenError::Zt2`]: the file or a shard breaks a rule, or cannot be opened.
#[cfg(feature = "v2")]
pub fn open_zt2(
    path: &Path,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<FileSource>, OpenError> {
    zt2_of(file_source(path)?, path, options)
}

/// The zTensor 2 file read from `source` (the file at `path`), with its shards.
#[cfg(feature = "v2")]
fn zt2_of(
    source: FileSource,
    path: &Path,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<FileSource>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let resolvers = ztensor_v2::shards::Resolver::default_for(path);
    ztensor_v2::File::open_resolved(source, max, &resolvers)
        .map(|file| file.with_limits(options.options.limits.clone()))
        .map_err(OpenError::Zt2)
}

/// The file at `path`, opened as ztensor-io opens inputs, for positional reads.
fn file_source(path: &Path) -> Result<FileSource, OpenError> {
    let file = ztensor_io::open_input(path).map_err(OpenError::Zt)?;
    FileSource::new(file)
        .map_err(|e| OpenError::Zt(ztensor_io::Error::io("opening", Some(path.to_path_buf()), e)))
}

#[cfg(feature = "tensorbuffers")]
fn tb_reader<S: ReadAt>(
    source: S,
    strict: bool,
) -> Result<ztensor_tensorbuffers::TbFile<S>, OpenError> {
    let options = if strict {
        ztensor_tensorbuffers::ReadOptions::strict()
    } else {
        ztensor_tensorbuffers::ReadOptions::default()
    };
    ztensor_tensorbuffers::TbFile::new(source, &options).map_err(OpenError::TensorBuffers)
}

/// As [`open`], with the formats that can be read in place (zTensor, safetensors, GGUF) read
/// from a memory map, so tensors can be borrowed from it ([`Opened::memory`]); the others as
/// [`open`] opens them.
///
/// # Errors
/// As [`open`].
///
/// # Safety
/// The file must not be truncated or changed while it is mapped (the contract of every memory
/// map): a change is undefined behaviour, not an error. Files written by ztensor are replaced by
/// rename, never changed in place.
pub unsafe fn open_mapped(path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    let mut detected = Detected::new(path)?;
    let kind = detected.kind;
    let mapped = |source: FileSource| {
        // SAFETY: forwarded to the caller.
        unsafe { source.into_mapped() }.map_err(|e| {
            OpenError::Zt(ztensor_io::Error::io("cannot map", Some(path.to_path_buf()), e))
        })
    };
    let opened = match kind {
        Kind::Zt => {
            let source = match detected.source.take() {
                Some(source) => source.settle(path).map_err(OpenError::Zt)?,
                None => FileSource::open(path).map_err(OpenError::Zt)?,
            };
            let reader = Reader::new(mapped(source)?, &options.options).map_err(OpenError::Zt)?;
            let memory = reader.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, reader) }
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => {
            let map = mapped(detected.take_source()?)?;
            let file = ztensor_foreign::safetensors::SafetensorsFile::new(map)
                .map_err(|e| OpenError::Foreign(e.with_path(path)))?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let memory = file.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, file) }
        }
        #[cfg(feature = "gguf")]
        Kind::Gguf => {
            let map = mapped(detected.take_source()?)?;
            let memory = map.as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            let gguf = ztensor_foreign::gguf::GgufFile::new(map)
                .map_err(|e| OpenError::Foreign(e.with_path(path)))?;
            Opened { memory, ..Opened::new(kind, gguf) }
        }
        _ => detected.open(options)?,
    };
    let input_len = match opened.memory {
        Some((_, len)) => u64::try_from(len).unwrap_or(u64::MAX),
        None => opened.input_len,
    };
    Opened { input_len, ..opened }.within_budget(Some(path), options)
}

/// Opens `bytes` of any format [`detect_bytes`](crate::detect_bytes) recognises (not a sharded checkpoint, nor a
/// zTensor 2 root with shards: several files); every format's tensors can be borrowed from
/// them ([`Opened::memory`]). Refused, as [`open`] refuses a file, when its objects decode to
/// more than the expansion budget allows for that many bytes.
///
/// # Errors
/// As [`open`]; [`ErrorKind::NeedsFiles`] for a zTensor 2 root with shards.
pub fn open_bytes(bytes: Vec<u8>, options: &OpenOptions) -> Result<Opened, OpenError> {
    // The vector's heap buffer does not move when the vector does.
    let memory = (bytes.as_ptr() as usize, bytes.len());
    let opened = open_read_at(bytes, None, options)?;
    Opened { memory: Some(memory), ..opened }.within_budget(None, options)
}

/// Opens the object at `url` (`s3://`, `gs://`, `az://`, `http(s)://`) by ranged reads
/// ([`ztensor_remote::RemoteObject`]): the format's own reader, the one [`open_bytes`] uses,
/// reads it, so every format read from bytes is read from a URL; a sharded checkpoint's index
/// (told by its name) opens its shards as the objects beside it. Refused, as [`open`] refuses a
/// file, over the expansion budget.
///
/// # Errors
/// [`OpenError::Remote`] for a malformed URL or a failed request (a missing object, refused
/// credentials, an object that changed while read); [`ErrorKind::NeedsFiles`] for a zTensor 2
/// root with shards; as [`open`] otherwise.
#[cfg(feature = "remote")]
pub fn open_url(
    url: &str,
    options: &OpenOptions,
    remote: &ztensor_remote::RemoteOptions,
) -> Result<Opened, OpenError> {
    let location = ztensor_remote::Location::parse(url).map_err(OpenError::Remote)?;
    let object =
        ztensor_remote::RemoteObject::open(&location, remote).map_err(OpenError::Remote)?;
    open_remote(object, options)
}

/// As [`open_url`], for an object already opened (a caller that keeps a clone sees its
/// requests and bytes with [`RemoteObject::transfer`](ztensor_remote::RemoteObject::transfer)).
///
/// # Errors
/// As [`open_url`].
#[cfg(feature = "remote")]
pub fn open_remote(
    object: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let name = std::path::PathBuf::from(object.location().to_string());
    if let Some(opened) = open_remote_index(&object, &name, options)? {
        return opened.within_budget(Some(&name), options);
    }
    #[cfg(feature = "v2")]
    if detect_source(&object, Some(&name)).ok() == Some(Kind::Zt2) {
        let root_len = object.len();
        let file = open_remote_zt2(object, options)?;
        let files = file.shard_paths().map(|(_, p)| p.to_path_buf()).collect();
        let input_len = root_len.saturating_add(file.shards_len());
        let opened = Opened { input_len, files, ..Opened::new(Kind::Zt2, file) };
        return opened.within_budget(Some(&name), options);
    }
    open_read_at(object, Some(&name), options)?.within_budget(Some(&name), options)
}

/// The zTensor 2 file that is the object `root`, its shards (when its table lists any) the
/// objects beside it at their positional names (`model-00001-of-00002.zt`), read by ranges; as
/// its own reader, for what needs more than a tensor source (checking every shard's digest).
/// A shard not there leaves its parts unreadable, saying where it was looked for, as a local
/// one does.
///
/// # Errors
/// [`OpenError::Zt2`]: the root or a shard breaks a rule.
#[cfg(all(feature = "remote", feature = "v2"))]
pub fn open_remote_zt2(
    root: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<ztensor_remote::RemoteObject>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let shown = std::path::PathBuf::from(root.location().to_string());
    let mut found = std::collections::BTreeMap::new();
    let mut file = ztensor_v2::File::open_sharded(root.clone(), max, &mut |name, _| {
        let at = ztensor_v2::shards::positional_path(&shown, name);
        let plain = at.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        Ok(match root.sibling(plain) {
            Ok(object) => {
                found.insert(name.to_owned(), at.clone());
                ztensor_v2::Located::At(object)
            }
            Err(e) => ztensor_v2::Located::Missing(format!("{e}")),
        })
    })
    .map_err(OpenError::Zt2)?;
    file.set_shard_paths(found);
    Ok(file.with_limits(options.options.limits.clone()))
}

/// The longest index of a sharded checkpoint read from a bucket (the readers' own limit).
#[cfg(feature = "remote")]
const MAX_REMOTE_INDEX: u64 = 256 << 20;

/// The bytes of the index object `index` (named `name`), within the readers' limit.
#[cfg(feature = "remote")]
fn remote_index_bytes(
    index: &ztensor_remote::RemoteObject,
    name: &Path,
) -> Result<Vec<u8>, OpenError> {
    let read_error = |e: std::io::Error| {
        OpenError::Zt(ztensor_io::Error::io("reading the index", Some(name.to_owned()), e))
    };
    if index.len() > MAX_REMOTE_INDEX {
        // As an index file that long is refused: malformed, a rejection.
        return Err(OpenError::Zt(ztensor_io::Error::from(ztensor_format::Error::new(
            ztensor_format::ErrorKind::ManifestTooLarge,
            format!(
                "{}: an index of {} bytes, over the {MAX_REMOTE_INDEX}-byte limit",
                name.display(),
                index.len()
            ),
        ))));
    }
    let mut bytes = vec![0u8; usize::try_from(index.len()).unwrap_or(0)];
    index.read_exact_at(0, &mut bytes).map_err(read_error)?;
    Ok(bytes)
}

/// The object beside `index` that `shard` (a path a checkpoint reader made beside the index's)
/// names.
#[cfg(feature = "remote")]
fn beside(
    index: &ztensor_remote::RemoteObject,
    shard: &Path,
) -> ztensor_io::Result<ztensor_remote::RemoteObject> {
    let plain = shard.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    index
        .sibling(plain)
        .map_err(|e| ztensor_io::Error::io("opening a shard", Some(shard.to_owned()), e.into()))
}

/// The sharded zTensor checkpoint whose index is the object `index`, its shards the objects
/// beside it (read by ranges), as its own reader: for what needs more than a tensor source
/// (checking every shard's digest).
///
/// # Errors
/// The checkpoint reader's error; a failed request, as an I/O error naming the URL.
#[cfg(all(feature = "remote", feature = "sharded"))]
pub fn open_remote_zt_index(
    index: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_shard::ShardedZtensor<ztensor_remote::RemoteObject>, OpenError> {
    let name = std::path::PathBuf::from(index.location().to_string());
    let bytes = remote_index_bytes(&index, &name)?;
    let parsed = ztensor_shard::ShardIndex::from_json(&bytes, &name).map_err(OpenError::Shard)?;
    ztensor_shard::ShardedZtensor::open_with(&name, parsed, &options.options, |shard| {
        beside(&index, shard).map_err(ztensor_shard::Error::from)
    })
    .map_err(OpenError::Shard)
}

/// A sharded checkpoint whose index is the object `index` (told by its name, as a file's is),
/// its shards the objects beside it, read by ranges as any object is; `None` for an object
/// that is no index.
#[cfg(feature = "remote")]
fn open_remote_index(
    index: &ztensor_remote::RemoteObject,
    name: &Path,
    options: &OpenOptions,
) -> Result<Option<Opened>, OpenError> {
    let opened: Opened = match crate::detect::by_name(name) {
        #[cfg(feature = "sharded")]
        Some(Kind::ZtIndex) => {
            let ckpt = open_remote_zt_index(index.clone(), options)?;
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, r)| r.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..chunked_or_not(Kind::ZtIndex, ckpt)? }
        }
        #[cfg(feature = "safetensors")]
        Some(Kind::SafetensorsIndex) => {
            let bytes = remote_index_bytes(index, name)?;
            let ckpt =
                ztensor_foreign::sharded::ShardedSafetensors::open_index(name, &bytes, |shard| {
                    ztensor_foreign::safetensors::SafetensorsFile::new(beside(index, shard)?)
                })
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, f)| f.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..Opened::new(Kind::SafetensorsIndex, ckpt) }
        }
        _ => return Ok(None),
    };
    Ok(Some(Opened { input_len: opened.input_len.saturating_add(index.len()), ..opened }))
}

/// Opens `source`, the bytes of one file (named `name` in messages, when it has one), with the
/// reader of the format [`detect_source`] finds. The one opening path for bytes in memory and
/// objects read by ranges; the expansion budget is left to the caller.
fn open_read_at<S: ReadAt + Send + Sync + 'static>(
    source: S,
    name: Option<&Path>,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let kind = detect_source(&source, name)?;
    let input_len = source.len();
    let limit = options.options.limits.whole_decode_limit();
    // What a single array or tensor is called: the file's stem, or the default for bytes.
    let stem = name.and_then(Path::file_stem).and_then(|s| s.to_str());
    let opened = match kind {
        Kind::Zt => {
            Opened::new(kind, Reader::new(source, &options.options).map_err(OpenError::Zt)?)
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => Opened::new(
            kind,
            ztensor_foreign::safetensors::SafetensorsFile::new(source)
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes),
        ),
        #[cfg(feature = "tensorbuffers")]
        Kind::TensorBuffers => Opened::new(kind, tb_reader(source, options.options.strict)?),
        #[cfg(feature = "numpy")]
        Kind::Npy => Opened::new(
            kind,
            ztensor_foreign::npy_in::NpyFile::new(source, stem.unwrap_or("array"))
                .map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "numpy")]
        Kind::Npz => Opened::new(
            kind,
            ztensor_foreign::npz::NpzFile::new(source, limit).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "gguf")]
        Kind::Gguf => Opened::new(
            kind,
            ztensor_foreign::gguf::GgufFile::new(source).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "torch")]
        Kind::Torch => Opened::new(
            kind,
            ztensor_foreign::torch::TorchFile::new(source, stem.unwrap_or("tensor"), limit)
                .map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "v2")]
        Kind::Zt2 => Opened::new(kind, zt2_whole(source, name, options)?),
        #[allow(unreachable_patterns)]
        other => return Err(not_opened(other, name)),
    };
    Ok(Opened { input_len, ..opened })
}

/// A zTensor 2 file held whole in `source` (bytes, or one remote object): refused when it is a
/// root whose parts lie in shards, which have no directory to be found in.
#[cfg(feature = "v2")]
fn zt2_whole<S: ReadAt>(
    source: S,
    name: Option<&Path>,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<S>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let file = ztensor_v2::File::open(source, max)
        .map_err(OpenError::Zt2)?
        .with_limits(options.options.limits.clone());
    let shards: Vec<&str> =
        file.manifest().map(|m| m.shards.keys().map(String::as_str).collect()).unwrap_or_default();
    if let Some(first) = shards.first() {
        let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
        let opened_as = if name.is_some() { "an object read alone" } else { "bytes" };
        return Err(OpenError::Detect(Error::new(
            ErrorKind::NeedsFiles,
            format!(
                "{shown}: this is a zTensor 2 file whose parts lie in {} shard file(s) \
                 beside it ({first:?}{}), which {opened_as} have no directory to find; open it \
                 by its path",
                shards.len(),
                if shards.len() > 1 { ", ..." } else { "" }
            ),
        )));
    }
    Ok(file)
}
