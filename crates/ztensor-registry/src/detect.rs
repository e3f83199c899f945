//! Telling what a file (or buffer) is by its content: leading magic numbers first, then a
//! trailing one, then the name.

use std::fmt;
use std::path::{Path, PathBuf};

use ztensor_io::{FileSource, ReadAt};

use crate::table::{FORMATS, Kind, NOT_READ, accepted};

const ZT_MAGIC: &[u8] = b"ZTEN";
const ZT2_MAGIC: &[u8] = b"\x89ZT2\r\n\x1a\n";
const NPY_MAGIC: &[u8] = b"\x93NUMPY";
const GGUF_MAGIC: &[u8] = b"GGUF";
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
/// An empty zip archive starts with its end-of-central-directory record.
const EMPTY_ZIP_MAGIC: &[u8] = b"PK\x05\x06";
const TB_MAGIC: &[u8] = b"TBS1";
/// The file that makes a directory a PyTorch Distributed Checkpoint.
pub(crate) const DCP_METADATA: &str = ".metadata";
/// The bytes read from the start of a file to recognise it.
const HEAD: u64 = HEAD_LEN as u64;

/// Why a file was not recognised as a format this build reads.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    io: Option<ztensor_io::Error>,
}

/// What kind of [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be read (missing, unreadable, a FIFO or device refused).
    Io,
    /// A directory was given that holds no checkpoint (naming the tensor files in it), or
    /// more than one (naming each).
    Directory,
    /// A format recognised but not read ([`NOT_READ`]), or none known.
    NotRead,
    /// A format read only by builds with a feature this one lacks.
    Disabled,
    /// Bytes of a format that is read from files, not bytes: a sharded checkpoint, or a
    /// zTensor 2 root whose parts lie in shard files beside it ([`open_bytes`](crate::open_bytes)).
    NeedsFiles,
}

impl Error {
    /// What kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// For [`ErrorKind::Io`], the I/O error (with the operating system's error, for a caller
    /// that maps it to its own: Python's `FileNotFoundError`, say).
    pub fn io(&self) -> Option<&ztensor_io::Error> {
        self.io.as_ref()
    }

    pub(crate) fn new(kind: ErrorKind, message: String) -> Error {
        Error { kind, message, io: None }
    }

    fn from_io(e: ztensor_io::Error) -> Error {
        Error { kind: ErrorKind::Io, message: e.to_string(), io: Some(e) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// A file not recognised is no rejection (no rule of a format was broken): a format
/// recognised and not read, or one this build lacks, is a [`Failure::Format`](ztensor_format::Failure::Format)
/// all the same, a directory an I/O failure (`EISDIR`).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        false
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        match (self.kind, &self.io) {
            (ErrorKind::Io, Some(io)) => io.failure(),
            (ErrorKind::Directory, _) => Failure::Io(std::io::ErrorKind::IsADirectory, None),
            (ErrorKind::NotRead | ErrorKind::Disabled, _) => Failure::Format,
            _ => Failure::Other,
        }
    }
}

/// What the file at `path` is, by its content (and, for sharded checkpoints, its name: an
/// index is JSON): a file recognised by no content rule is judged by its extension, so errors
/// name the rules of the format the user meant. A directory is the checkpoint in it: a
/// Distributed Checkpoint, or the sharded checkpoint whose index it holds.
///
/// # Errors
/// [`ErrorKind::Io`] when it cannot be read (FIFOs and devices are refused, never read);
/// [`ErrorKind::Directory`] for a directory holding no checkpoint (naming the tensor files in
/// it) or several (naming each); [`ErrorKind::NotRead`] for a format not read (named when known);
/// [`ErrorKind::Disabled`] for one this build lacks the feature for.
pub fn detect(path: &Path) -> Result<Kind, Error> {
    Detected::new(path).map(|d| d.kind)
}

/// An input recognised by [`detect`], held open: a file on this machine, or an object in a
/// bucket ([`Detected::object`]). Opening it ([`Detected::open`] and the format openers beside
/// it) reads the same bytes through the same descriptor or pinned object version, and finds a
/// sharded input's other files beside it, wherever it is: so a command opens its input once,
/// an input replaced between being told and being read cannot be read as the format the other
/// was, and a URL is read by the same code as its file.
#[derive(Debug)]
pub struct Detected {
    pub(crate) kind: Kind,
    pub(crate) path: PathBuf,
    /// The file, read from its start for its first bytes; `None` for a sharded checkpoint's
    /// index, told by its name and read with its shards.
    pub(crate) source: Option<FileSource>,
    /// The length of the file as read, once its reader has it.
    pub(crate) len: Option<u64>,
    /// The object it is, when it is one (its `path` is then its URL, for messages).
    #[cfg(feature = "remote")]
    pub(crate) object: Option<ztensor_remote::RemoteObject>,
}

impl Detected {
    /// Opens the file at `path` and tells what it is, as [`detect`] does.
    ///
    /// # Errors
    /// As [`detect`].
    pub fn new(path: &Path) -> Result<Detected, Error> {
        if let Some(kind) = by_name(path) {
            let kind = enabled(kind, Some(path))?;
            return Ok(Detected::told(kind, path, None));
        }
        if path.is_dir() {
            return Detected::directory(path);
        }
        let file = ztensor_io::open_input(path).map_err(Error::from_io)?;
        let source = FileSource::new(file).map_err(|e| {
            Error::from_io(ztensor_io::Error::io("opening", Some(path.to_path_buf()), e))
        })?;
        let kind = detect_source(&source, Some(path))?;
        Ok(Detected::told(kind, path, Some(source)))
    }

    /// The checkpoint a directory holds: a Distributed Checkpoint (its `.metadata`), or the
    /// one sharded checkpoint whose index lies in it (as the index itself is read). A directory
    /// holding more than one checkpoint is refused naming each; one holding none, with what it
    /// does hold.
    fn directory(dir: &Path) -> Result<Detected, Error> {
        // Each checkpoint the directory holds: its kind, the path it is read through, and
        // how it is named in a refusal.
        let mut held: Vec<(Kind, PathBuf, String)> = Vec::new();
        let metadata = dir.join(DCP_METADATA);
        if metadata.is_file() {
            let named = format!("a Distributed Checkpoint ({})", metadata.display());
            held.push((Kind::Dcp, dir.to_path_buf(), named));
        }
        if let Some(first) = dcp_shard_in(dir) {
            let named = format!(
                "a Distributed Checkpoint's safetensors shards ({}, …)",
                dir.join(first).display()
            );
            held.push((Kind::DcpSafetensors, dir.to_path_buf(), named));
        }
        for index in indexes_in(dir) {
            let path = dir.join(&index);
            if let Some(kind) = by_name(&path) {
                let named = path.display().to_string();
                held.push((kind, path, named));
            }
        }
        match held.as_slice() {
            [] => Err(Error::new(ErrorKind::Directory, directory_hint(dir))),
            [(kind, path, _)] => {
                let kind = enabled(*kind, Some(path))?;
                Ok(Detected::told(kind, path, None))
            }
            _ => {
                let named: Vec<&str> = held.iter().map(|(_, _, n)| n.as_str()).collect();
                Err(Error::new(
                    ErrorKind::Directory,
                    format!(
                        "{} holds {} checkpoints: {}; pass the one to read",
                        dir.display(),
                        held.len(),
                        named.join(", ")
                    ),
                ))
            }
        }
    }

    /// A file at `path` told as `kind`, held open when it was read to be told.
    fn told(kind: Kind, path: &Path, source: Option<FileSource>) -> Detected {
        Detected {
            kind,
            path: path.to_path_buf(),
            source,
            len: None,
            #[cfg(feature = "remote")]
            object: None,
        }
    }

    /// The object `object` (opened, its version pinned), told as [`Detected::new`] tells a
    /// file: a sharded checkpoint's index by its name, anything else by its content. Opened, it
    /// is read by ranges, and the shards of an index or a zTensor 2 root are the objects beside
    /// it.
    ///
    /// # Errors
    /// As [`detect`]; a failed request.
    #[cfg(feature = "remote")]
    pub fn object(object: ztensor_remote::RemoteObject) -> Result<Detected, Error> {
        let path = PathBuf::from(object.location().to_string());
        let kind = match by_name(&path) {
            Some(kind @ (Kind::ZtIndex | Kind::SafetensorsIndex)) => enabled(kind, Some(&path))?,
            _ => detect_source(&object, Some(&path))?,
        };
        Ok(Detected { kind, path, source: None, len: None, object: Some(object) })
    }

    /// What the input is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Where it is: its path, or an object's URL.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file at its path is still the one it holds open (an index, told by its
    /// name, always is): a caller that tells a file early and opens it later checks this, so a
    /// file replaced in between is told again rather than read as the one that was there.
    pub fn is_current(&self) -> bool {
        self.source.as_ref().is_none_or(|s| s.is_at(&self.path))
    }
}

/// What `bytes` are, by their content, as [`detect`] tells a file.
///
/// # Errors
/// As [`detect`], [`ErrorKind::NotRead`] and [`ErrorKind::Disabled`].
pub fn detect_bytes(bytes: &[u8], name: Option<&Path>) -> Result<Kind, Error> {
    detect_source(&bytes, name)
}

/// What `source` is, by its content, as [`detect`] tells a file; `name` (its path, when it
/// has one) tells a sharded checkpoint's index, and decides between formats when the content
/// is damaged.
///
/// # Errors
/// As [`detect`].
pub fn detect_source<S: ReadAt>(source: &S, name: Option<&Path>) -> Result<Kind, Error> {
    // A sharded checkpoint's index is JSON, told by its name (an object in a bucket too).
    if let Some(kind) = name.and_then(by_name) {
        return enabled(kind, name);
    }
    let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
    let io = |e: std::io::Error| {
        Error::from_io(ztensor_io::Error::io("reading", name.map(Path::to_path_buf), e))
    };
    let len = source.len();
    let mut head = vec![0u8; usize::try_from(len.min(HEAD)).unwrap_or(0)];
    source.read_exact_at(0, &mut head).map_err(io)?;
    let mut tail = vec![0u8; usize::try_from(len.min(8)).unwrap_or(0)];
    source.read_exact_at(len - tail.len() as u64, &mut tail).map_err(io)?;
    let extension =
        name.and_then(|p| p.extension()).and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let named =
        |kind: Kind| extension.as_deref().is_some_and(|e| kind.format().extensions.contains(&e));
    // A format's leading magic decides before any trailing one: a valid file of one format
    // may end in another's magic (an `.npy` whose data ends in `ZTEN1000`, a zip whose comment
    // is `TBS1`). Trailing magics decide only for a file that starts like nothing known: a v1
    // zTensor file whose header is damaged still has its footer, and is judged as zTensor so
    // it gets its rule.
    let leading = match () {
        () if head.starts_with(ZT_MAGIC) => Some(Kind::Zt),
        () if head.starts_with(ZT2_MAGIC) => Some(Kind::Zt2),
        () if head.starts_with(NPY_MAGIC) => Some(Kind::Npy),
        () if head.starts_with(GGUF_MAGIC) => Some(Kind::Gguf),
        () if head.starts_with(ZIP_MAGIC) || head.starts_with(EMPTY_ZIP_MAGIC) => {
            zip_kind(source, named(Kind::Npz), named(Kind::Torch))
        }
        () if is_legacy_torch(&head) => Some(Kind::Torch),
        () if head.starts_with(TB_MAGIC) => Some(Kind::TensorBuffers),
        () if is_safetensors(&head, len) => Some(Kind::Safetensors),
        () => None,
    };
    // A zip archive read as neither format, or a format named by its first bytes, is what it
    // starts as, whatever it ends with.
    let starts_known = leading.is_some()
        || head.starts_with(ZIP_MAGIC)
        || head.starts_with(EMPTY_ZIP_MAGIC)
        || (not_read(&head).is_some() && !is_text(&head));
    let kind = match () {
        () if starts_known => leading,
        () if tail.len() == 8 && tail.starts_with(ZT_MAGIC) => Some(Kind::Zt),
        () if tail.ends_with(TB_MAGIC) => Some(Kind::TensorBuffers),
        () => None,
    };
    if let Some(kind) = kind {
        return enabled(kind, name);
    }
    // Formats not read are named whatever the file is called (the reference 2.x writes `.zt`
    // files too); a file named like a format read is otherwise judged as one, so a damaged one
    // gets that format's rule.
    let known = not_read(&head);
    if let Some(what) = known.filter(|_| !is_text(&head)) {
        return Err(refused(&shown, what));
    }
    for kind in [Kind::Safetensors, Kind::TensorBuffers, Kind::Zt] {
        if named(kind) {
            return enabled(kind, name);
        }
    }
    Err(refused(&shown, known.unwrap_or("a file in no format ztensor knows")))
}

/// Whether a stream that starts with `head` (its first bytes, [`HEAD_LEN`] of them or all of
/// a shorter stream) may be a format this build knows, judged by its leading bytes alone: for
/// an input read once (standard input), which cannot be spooled to its end first to look for
/// a trailing magic. Every format read starts with its magic or header (a zip archive with a
/// local file header, or an empty one's end record); a stream that starts like none of them
/// is refused here, naming what it looks like, as [`detect`] names it.
///
/// # Errors
/// [`ErrorKind::NotRead`] when the head is no format's start; `name` is how the stream is
/// shown.
pub fn detect_head(head: &[u8], name: &str) -> Result<(), Error> {
    let starts = head.starts_with(ZT_MAGIC)
        || head.starts_with(ZT2_MAGIC)
        || head.starts_with(NPY_MAGIC)
        || head.starts_with(GGUF_MAGIC)
        || head.starts_with(ZIP_MAGIC)
        || head.starts_with(EMPTY_ZIP_MAGIC)
        || head.starts_with(TB_MAGIC)
        || is_legacy_torch(head)
        || is_safetensors(head, u64::MAX);
    if starts {
        return Ok(());
    }
    Err(refused(name, not_read(head).unwrap_or("a file in no format ztensor knows")))
}

/// The bytes [`detect_head`] judges a stream by.
pub const HEAD_LEN: usize = 512;

fn refused(shown: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::NotRead,
        format!("{shown}: this is {what}, which ztensor does not read; it reads {}", accepted()),
    )
}

/// `kind`, or why this build does not read it.
pub(crate) fn enabled(kind: Kind, name: Option<&Path>) -> Result<Kind, Error> {
    if kind.enabled() {
        return Ok(kind);
    }
    let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
    Err(Error::new(
        ErrorKind::Disabled,
        format!(
            "{shown}: this is {kind}, which this build does not read (it was built without the \
             `{}` feature)",
            kind.format().feature
        ),
    ))
}

/// The sharded checkpoints, known by their index's name.
pub(crate) fn by_name(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".safetensors.index.json") {
        Some(Kind::SafetensorsIndex)
    } else if name == DCP_METADATA {
        Some(Kind::Dcp)
    } else if name.ends_with(".zt.index.json") {
        Some(Kind::ZtIndex)
    } else {
        None
    }
}

/// A zip archive's kind: a PyTorch checkpoint when it has `<name>/data.pkl`, a NumPy `.npz`
/// when it holds only `.npy` members; a damaged one by what its name says.
fn zip_kind<S: ReadAt>(source: &S, npz_named: bool, torch_named: bool) -> Option<Kind> {
    // By content whatever this build reads, so that a build without a format still names it.
    match ztensor_foreign::zip_content(source) {
        Some(ztensor_foreign::ZipContent::Npz) => Some(Kind::Npz),
        Some(ztensor_foreign::ZipContent::Torch) => Some(Kind::Torch),
        None if npz_named => Some(Kind::Npz),
        None if torch_named => Some(Kind::Torch),
        None => None,
    }
}

/// Whether `head` starts like a legacy `torch.save` file: a pickle (protocol 2 to 5) of torch's
/// magic number (`LONG1` of 10 bytes, `0x1950a86a20f9469cfc6c`) within its first 32 bytes.
fn is_legacy_torch(head: &[u8]) -> bool {
    const MAGIC: [u8; 12] = [0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
    matches!(head, [0x80, 2..=5, ..])
        && head[..head.len().min(32)].windows(MAGIC.len()).any(|w| w == MAGIC)
}

/// Whether `head` starts like a safetensors file of `len` bytes: a header length that fits
/// the file, then `{`.
fn is_safetensors(head: &[u8], len: u64) -> bool {
    #[cfg(feature = "safetensors")]
    return ztensor_foreign::safetensors::looks_like_safetensors(head, len);
    #[cfg(not(feature = "safetensors"))]
    {
        let Some((n, rest)) = head.split_first_chunk::<8>() else { return false };
        u64::from_le_bytes(*n).saturating_add(8) <= len && rest.first() == Some(&b'{')
    }
}

/// Names the formats people bring that are not read, by their first bytes.
fn not_read(head: &[u8]) -> Option<&'static str> {
    if let Some((_, what)) = NOT_READ.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(what);
    }
    // Pickle protocol 2..5 starts with PROTO (a legacy torch.save file is recognised before).
    if let [0x80, 2..=5, ..] = head {
        return Some("a Python pickle that is not a PyTorch checkpoint");
    }
    if !is_text(head) {
        return None;
    }
    Some(match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => "JSON text",
        _ => "a text file",
    })
}

/// Whether `head` reads as text: UTF-8 (a character cut at the end allowed) without control
/// characters other than whitespace.
fn is_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return false,
    };
    !valid.is_empty() && valid.chars().all(|c| !c.is_control() || c.is_whitespace())
}

/// The first safetensors file in `dir` named as a Distributed Checkpoint names the shards it
/// saves through DCP's `HuggingFaceStorageWriter` (`shard-00001-model-00001-of-00001.safetensors`).
fn dcp_shard_in(dir: &Path) -> Option<String> {
    #[cfg(feature = "safetensors")]
    {
        let mut found: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            // Followed through links, as indexes are.
            .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| ztensor_foreign::dcp_shards::is_shard_name(n))
            .collect();
        found.sort();
        found.into_iter().next()
    }
    #[cfg(not(feature = "safetensors"))]
    {
        let _ = dir;
        None
    }
}

/// The sharded checkpoint indexes in `dir` (by their names), sorted.
fn indexes_in(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        // Followed through links: a model hub's cache links each file of a snapshot.
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| matches!(by_name(Path::new(n)), Some(Kind::ZtIndex | Kind::SafetensorsIndex)))
        .collect();
    found.sort();
    found
}

/// What to say about a directory given where a file was expected: the tensor files it holds,
/// when it has them.
fn directory_hint(dir: &Path) -> String {
    let mut candidates: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            by_name(Path::new(n)).is_some()
                || FORMATS.iter().any(|f| {
                    f.extensions.iter().any(|e| *e != "json" && n.ends_with(&format!(".{e}")))
                })
        })
        .collect();
    candidates.sort();
    let shown = |n: &String| dir.join(n).display().to_string();
    match candidates.as_slice() {
        [] => format!("{} is a directory, not a file ztensor reads", dir.display()),
        _ => format!(
            "{} is a directory; pass one of its files: {}",
            dir.display(),
            candidates.iter().take(8).map(shown).collect::<Vec<_>>().join(", ")
        ),
    }
}
