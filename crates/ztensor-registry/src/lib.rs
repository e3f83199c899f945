//! One table of the tensor formats ztensor reads, and the two things every program that takes
//! "a file of tensors" does with it: tell what a file (or a buffer) is by its content, and open
//! it as a [`TensorSource`].
//!
//! The command-line tool, the Python package and the conformance dump all go through
//! [`detect`] and [`open`]; none of them looks at magic numbers itself. [`FORMATS`] lists
//! every format read, with the rule that recognises it, its name, the cargo feature that
//! enables it and its usual extensions; [`NOT_READ`] lists the formats people bring that are
//! recognised and named but not read. Adding a format is: implement
//! [`TensorSource`] for it, add a [`Kind`], and add its row (and its arm in `open_kind`).
//!
//! ```
//! use ztensor_registry::{Kind, detect_bytes};
//!
//! let mut zt = b"ZTEN0001".to_vec();
//! zt.extend_from_slice(&[0; 64]);
//! assert_eq!(detect_bytes(&zt, None).unwrap(), Kind::Zt);
//! let hdf5 = b"\x89HDF\r\n\x1a\n\0\0\0\0".to_vec();
//! let refused = detect_bytes(&hdf5, None).unwrap_err();
//! assert!(refused.to_string().contains("an HDF5 file"));
//! ```
//!
//! Features (all on by default): `safetensors`, `numpy`, `gguf`, `torch`, `tensorbuffers`,
//! `sharded`, `v2` (zTensor 2). A file of a format whose feature is off is still recognised, and refused with
//! the feature named.

#![deny(missing_docs)]
// Arms and helpers for formats whose features are off go unused in such builds.
#![cfg_attr(
    not(all(
        feature = "safetensors",
        feature = "numpy",
        feature = "gguf",
        feature = "torch",
        feature = "tensorbuffers",
        feature = "sharded",
        feature = "v2"
    )),
    allow(dead_code, unused_imports, unused_variables, unused_mut)
)]

use std::fmt;
use std::path::Path;

use ztensor_format::Options;
use ztensor_io::{FileSource, ReadAt, Reader, TensorSource};

/// A format this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A zTensor file, version 0.1, 1.1 or 1.2.
    Zt,
    /// A sharded zTensor checkpoint, through its `NAME.zt.index.json`.
    ZtIndex,
    /// A safetensors file.
    Safetensors,
    /// A Hugging Face sharded safetensors checkpoint, through its
    /// `*.safetensors.index.json`.
    SafetensorsIndex,
    /// A TensorBuffers file.
    TensorBuffers,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive.
    Npz,
    /// A GGUF file (llama.cpp).
    Gguf,
    /// A PyTorch checkpoint (`torch.save`, zip or legacy).
    Torch,
    /// A zTensor 2 file (the reference implementation's current generation, "Draft 4").
    Zt2,
}

/// A row of [`FORMATS`].
#[derive(Debug, Clone, Copy)]
pub struct Format {
    /// Which format.
    pub kind: Kind,
    /// Its short identifier (as `info --json` reports it).
    pub id: &'static str,
    /// What it is, for a sentence: `a safetensors file`.
    pub description: &'static str,
    /// What files of it are, for a list of what is read: `safetensors files`.
    pub plural: &'static str,
    /// How it is recognised.
    pub rule: &'static str,
    /// The cargo feature of this crate that reads it (`""`: always).
    pub feature: &'static str,
    /// Its usual file extensions, lowercase, without the dot.
    pub extensions: &'static [&'static str],
    /// Whether this build reads it.
    pub enabled: bool,
}

/// Every format read.
pub const FORMATS: &[Format] = &[
    Format {
        kind: Kind::Zt,
        id: "ztensor",
        description: "a zTensor file",
        plural: "zTensor 0.1, 1.1 and 1.2 files (.zt)",
        rule: "ZTEN0001 or ZTEN1000 at the start, or a v1 footer (ZTEN1000) at the end",
        feature: "",
        extensions: &["zt"],
        enabled: true,
    },
    Format {
        kind: Kind::Zt2,
        id: "ztensor2",
        description: "a zTensor 2 file",
        plural: "zTensor 2 files",
        rule: "\\x89ZT2\\r\\n\\x1a\\n at the start",
        feature: "v2",
        // `.zt` is zTensor 0.1/1.x's too: told apart by content only.
        extensions: &[],
        enabled: cfg!(feature = "v2"),
    },
    Format {
        kind: Kind::Safetensors,
        id: "safetensors",
        description: "a safetensors file",
        plural: "safetensors files",
        rule: "a little-endian header length then a JSON object that fits the file",
        feature: "safetensors",
        extensions: &["safetensors"],
        enabled: cfg!(feature = "safetensors"),
    },
    Format {
        kind: Kind::SafetensorsIndex,
        id: "safetensors-sharded",
        description: "a sharded safetensors checkpoint",
        plural: "sharded safetensors checkpoints (through their model.safetensors.index.json)",
        rule: "a file named *.safetensors.index.json",
        feature: "safetensors",
        extensions: &["json"],
        enabled: cfg!(feature = "safetensors"),
    },
    Format {
        kind: Kind::ZtIndex,
        id: "ztensor-sharded",
        description: "a sharded zTensor checkpoint",
        plural: "sharded zTensor checkpoints (NAME.zt.index.json)",
        rule: "a file named *.zt.index.json",
        feature: "sharded",
        extensions: &["json"],
        enabled: cfg!(feature = "sharded"),
    },
    Format {
        kind: Kind::TensorBuffers,
        id: "tensorbuffers",
        description: "a TensorBuffers file",
        plural: "TensorBuffers files (.tb)",
        rule: "TBS1 at the start or at the end",
        feature: "tensorbuffers",
        extensions: &["tb"],
        enabled: cfg!(feature = "tensorbuffers"),
    },
    Format {
        kind: Kind::Npy,
        id: "npy",
        description: "a NumPy .npy array",
        plural: "NumPy .npy files",
        rule: "\\x93NUMPY at the start",
        feature: "numpy",
        extensions: &["npy"],
        enabled: cfg!(feature = "numpy"),
    },
    Format {
        kind: Kind::Npz,
        id: "npz",
        description: "a NumPy .npz archive",
        plural: "NumPy .npz files",
        rule: "a zip archive of .npy members only",
        feature: "numpy",
        extensions: &["npz"],
        enabled: cfg!(feature = "numpy"),
    },
    Format {
        kind: Kind::Gguf,
        id: "gguf",
        description: "a GGUF file",
        plural: "GGUF files",
        rule: "GGUF at the start",
        feature: "gguf",
        extensions: &["gguf"],
        enabled: cfg!(feature = "gguf"),
    },
    Format {
        kind: Kind::Torch,
        id: "pytorch",
        description: "a PyTorch checkpoint",
        plural: "PyTorch checkpoints (torch.save)",
        rule: "a zip archive with NAME/data.pkl, or a pickle of torch's magic number",
        feature: "torch",
        extensions: &["pt", "pth", "bin", "ckpt"],
        enabled: cfg!(feature = "torch"),
    },
];

/// Formats people bring that are recognised and named, not read: each one's first bytes and
/// what it is.
pub const NOT_READ: &[(&[u8], &str)] = &[
    (
        b"PK\x03\x04",
        "a zip archive that is neither a PyTorch checkpoint nor a NumPy .npz (a TorchScript \
         archive or a damaged checkpoint, for instance)",
    ),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"\x1f\x8b", "a gzip-compressed file"),
];

const ZT_MAGIC: &[u8] = b"ZTEN";
const ZT2_MAGIC: &[u8] = b"\x89ZT2\r\n\x1a\n";
const NPY_MAGIC: &[u8] = b"\x93NUMPY";
const GGUF_MAGIC: &[u8] = b"GGUF";
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
/// An empty zip archive starts with its end-of-central-directory record.
const EMPTY_ZIP_MAGIC: &[u8] = b"PK\x05\x06";
const TB_MAGIC: &[u8] = b"TBS1";
/// The bytes read from the start of a file to recognise it.
const HEAD: u64 = 512;

impl Kind {
    /// Its row of [`FORMATS`].
    pub fn format(self) -> &'static Format {
        FORMATS.iter().find(|f| f.kind == self).expect("every kind has a row")
    }

    /// Whether this build reads it.
    pub fn enabled(self) -> bool {
        self.format().enabled
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.format().description)
    }
}

/// What this build reads, for messages: every enabled format's description.
pub fn accepted() -> String {
    let list: Vec<&str> = FORMATS.iter().filter(|f| f.enabled).map(|f| f.plural).collect();
    match list.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nothing".to_owned(),
    }
}

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
    /// A directory was given where a file was expected.
    Directory,
    /// A format recognised but not read ([`NOT_READ`]), or none known.
    NotRead,
    /// A format read only by builds with a feature this one lacks.
    Disabled,
    /// Bytes of a format that is read from files, not bytes: a sharded checkpoint, or a
    /// zTensor 2 root whose parts lie in shard files beside it ([`open_bytes`]).
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

    fn new(kind: ErrorKind, message: String) -> Error {
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

/// What the file at `path` is, by its content (and, for sharded checkpoints, its name: an
/// index is JSON): a file recognised by no content rule is judged by its extension, so errors
/// name the rules of the format the user meant.
///
/// # Errors
/// [`ErrorKind::Io`] when it cannot be read (FIFOs and devices are refused, never read);
/// [`ErrorKind::Directory`] for a directory (naming the checkpoint index or tensor files in
/// it); [`ErrorKind::NotRead`] for a format not read (named when known);
/// [`ErrorKind::Disabled`] for one this build lacks the feature for.
pub fn detect(path: &Path) -> Result<Kind, Error> {
    if let Some(kind) = by_name(path) {
        return enabled(kind, Some(path));
    }
    if path.is_dir() {
        return Err(Error::new(ErrorKind::Directory, directory_hint(path)));
    }
    let file = ztensor_io::open_input(path).map_err(Error::from_io)?;
    let source = FileSource::new(file).map_err(|e| {
        Error::from_io(ztensor_io::Error::io("opening", Some(path.to_path_buf()), e))
    })?;
    detect_source(&source, Some(path))
}

/// What `bytes` are, by their content, as [`detect`] tells a file.
///
/// # Errors
/// As [`detect`], [`ErrorKind::NotRead`] and [`ErrorKind::Disabled`].
pub fn detect_bytes(bytes: &[u8], name: Option<&Path>) -> Result<Kind, Error> {
    detect_source(&bytes, name)
}

/// What `source` is, by its content, as [`detect`] tells a file; `name` (its path, when it
/// has one) decides between formats when the content is damaged.
///
/// # Errors
/// As [`detect`].
pub fn detect_source<S: ReadAt>(source: &S, name: Option<&Path>) -> Result<Kind, Error> {
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

fn refused(shown: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::NotRead,
        format!("{shown}: this is {what}, which ztensor does not read; it reads {}", accepted()),
    )
}

/// `kind`, or why this build does not read it.
fn enabled(kind: Kind, name: Option<&Path>) -> Result<Kind, Error> {
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
fn by_name(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".safetensors.index.json") {
        Some(Kind::SafetensorsIndex)
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

/// What to say about a directory given where a file was expected: the checkpoint index or
/// the tensor files it holds, when it has them.
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
    let index: Vec<&String> =
        candidates.iter().filter(|n| by_name(Path::new(n)).is_some()).collect();
    let shown = |n: &String| dir.join(n).display().to_string();
    match (index.as_slice(), candidates.as_slice()) {
        ([one], _) => format!(
            "{} is a directory; for the sharded checkpoint in it, pass its index: {}",
            dir.display(),
            shown(one)
        ),
        (_, []) => format!("{} is a directory, not a file ztensor reads", dir.display()),
        _ => format!(
            "{} is a directory; pass one of its files: {}",
            dir.display(),
            candidates.iter().take(8).map(shown).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// How [`open`] opens a file.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Limits and strictness for zTensor files (and for shards of a sharded zTensor
    /// checkpoint); TensorBuffers files are read strictly when `options.strict` is set.
    pub options: Options,
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes.
    pub carry_unknown_dtypes: bool,
}

/// Why a file could not be opened: not recognised, or refused by its format's reader (each
/// reader's own error, so its rule and message are kept).
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// Not recognised ([`detect`]).
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
}

/// Whether the file was read and breaks a rule of its format (a rejection, which the
/// command-line tool reports with exit status 1), as opposed to a failed request: a file that
/// cannot be read, a format not read.
impl ztensor_format::Verdict for OpenError {
    fn is_rejection(&self) -> bool {
        match self {
            OpenError::Detect(_) => false,
            OpenError::Zt(e) => e.rule().is_some(),
            #[cfg(any(
                feature = "safetensors",
                feature = "numpy",
                feature = "gguf",
                feature = "torch"
            ))]
            OpenError::Foreign(e) => e.kind() != ztensor_foreign::ErrorKind::Io,
            #[cfg(feature = "tensorbuffers")]
            OpenError::TensorBuffers(e) => e.kind() != ztensor_tensorbuffers::ErrorKind::Io,
            #[cfg(feature = "sharded")]
            OpenError::Shard(e) => e.kind() != ztensor_shard::ErrorKind::Io,
            #[cfg(feature = "v2")]
            OpenError::Zt2(e) => ztensor_format::Verdict::is_rejection(e),
        }
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.inner().and_then(ztensor_format::Verdict::refused)
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.inner().and_then(ztensor_format::Verdict::rule)
    }
}

impl OpenError {
    /// The reader's own error, as a [`Verdict`](ztensor_format::Verdict).
    fn inner(&self) -> Option<&dyn ztensor_format::Verdict> {
        match self {
            OpenError::Detect(_) => None,
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
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Opened {
    fn new<T: TensorSource + Send + Sync + 'static>(kind: Kind, source: T) -> Opened {
        Opened { kind, source: Box::new(source), memory: None, input_len: 0 }
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
    /// [`open_kind`] leaves it to its caller.
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

/// Opens the file at `path`, of any format [`detect`] recognises, read with positional reads;
/// refused when its objects decode to more than the expansion budget allows
/// ([`Opened::check_expansion`]).
///
/// # Errors
/// [`OpenError::Detect`] when it is not recognised; [`OpenError::Zt`] with rule
/// `decoded_too_large` over the budget; the format reader's error otherwise.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    let kind = detect(path)?;
    open_kind(kind, path, options)?.within_budget(Some(path), options)
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
    let kind = detect(path)?;
    if kind == Kind::Zt2 {
        let max = options.options.limits.max_manifest_len;
        let file = ztensor_v2::File::open(file_source(path)?, max).map_err(OpenError::Zt2)?;
        return file.content_digest(algorithm).map_err(OpenError::Zt2);
    }
    let opened = open_kind(kind, path, options)?.within_budget(Some(path), options)?;
    ztensor_v2::content_digest(opened.source(), algorithm).map_err(OpenError::Zt2)
}

/// Opens the file at `path` as `kind` (already [`detect`]ed), read with positional reads. The
/// expansion budget is not checked: [`open`] checks it, a caller of this function does with
/// [`Opened::check_expansion`].
///
/// # Errors
/// The format reader's error; [`OpenError::Detect`] for a kind this build does not read.
pub fn open_kind(kind: Kind, path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    let strict = options.options.strict;
    // What the content lies in besides the file itself: shards.
    let mut shards = 0u64;
    let opened = match kind {
        Kind::Zt => {
            Opened::new(kind, Reader::open_with(path, &options.options).map_err(OpenError::Zt)?)
        }
        #[cfg(feature = "sharded")]
        Kind::ZtIndex => {
            let ckpt = ztensor_shard::ShardedZtensor::open(path, &options.options)
                .map_err(OpenError::Shard)?;
            shards =
                ckpt.shards().iter().map(|(_, r)| r.source().len()).fold(0, u64::saturating_add);
            Opened::new(kind, ckpt)
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => Opened::new(
            kind,
            ztensor_foreign::safetensors::SafetensorsFile::open(path)
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes),
        ),
        #[cfg(feature = "safetensors")]
        Kind::SafetensorsIndex => {
            let ckpt = ztensor_foreign::sharded::ShardedSafetensors::open(path)
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            shards =
                ckpt.shards().iter().map(|(_, f)| f.source().len()).fold(0, u64::saturating_add);
            Opened::new(kind, ckpt)
        }
        #[cfg(feature = "tensorbuffers")]
        Kind::TensorBuffers => Opened::new(kind, tb_reader(file_source(path)?, strict)?),
        #[cfg(feature = "numpy")]
        Kind::Npy => Opened::new(
            kind,
            ztensor_foreign::npy_in::NpyFile::open(path).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "numpy")]
        Kind::Npz => Opened::new(
            kind,
            ztensor_foreign::npz::NpzFile::open(path).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "gguf")]
        Kind::Gguf => Opened::new(
            kind,
            ztensor_foreign::gguf::GgufFile::open(path).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "torch")]
        Kind::Torch => Opened::new(
            kind,
            ztensor_foreign::torch::TorchFile::open(path).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "v2")]
        Kind::Zt2 => {
            let file = open_zt2(path, options)?;
            shards = file.shards_len();
            Opened::new(kind, file)
        }
        #[allow(unreachable_patterns)]
        other => return Err(not_opened(other, Some(path))),
    };
    Ok(Opened { input_len: file_len(path)?.saturating_add(shards), ..opened })
}

/// Why `kind` has no arm where it was to be opened: this build lacks its feature, or (for
/// bytes) it is a format of several files. An error, never a panic: a kind added to [`Kind`]
/// without an arm is refused, not a crash.
fn not_opened(kind: Kind, name: Option<&Path>) -> OpenError {
    match enabled(kind, name) {
        Err(e) => OpenError::Detect(e),
        Ok(kind) => {
            let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
            OpenError::Detect(Error::new(
                ErrorKind::NeedsFiles,
                format!("{shown}: this is {kind}, which is read from its files, not from bytes"),
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
    let max = options.options.limits.max_manifest_len;
    let resolvers = ztensor_v2::shards::Resolver::default_for(path);
    ztensor_v2::File::open_resolved(file_source(path)?, max, &resolvers).map_err(OpenError::Zt2)
}

/// The file at `path`, opened as ztensor-io opens inputs, for positional reads.
#[cfg(any(feature = "tensorbuffers", feature = "v2"))]
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
    let kind = detect(path)?;
    let opened = match kind {
        Kind::Zt => {
            // SAFETY: forwarded to the caller.
            let reader =
                unsafe { Reader::open_mmap(path, &options.options) }.map_err(OpenError::Zt)?;
            let memory = reader.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, reader) }
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => {
            // SAFETY: forwarded to the caller.
            let file = unsafe { ztensor_foreign::safetensors::SafetensorsFile::open_mmap(path) }
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let memory = file.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, file) }
        }
        #[cfg(feature = "gguf")]
        Kind::Gguf => {
            let file = ztensor_io::open_input(path).map_err(OpenError::Zt)?;
            // SAFETY: forwarded to the caller.
            let map = unsafe { ztensor_io::Mapped::map(&file) }.map_err(|e| {
                OpenError::Zt(ztensor_io::Error::io("mapping", Some(path.to_path_buf()), e))
            })?;
            let memory = map.as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            let gguf = ztensor_foreign::gguf::GgufFile::new(map).map_err(OpenError::Foreign)?;
            Opened { memory, ..Opened::new(kind, gguf) }
        }
        _ => open_kind(kind, path, options)?,
    };
    let input_len = match opened.memory {
        Some((_, len)) => u64::try_from(len).unwrap_or(u64::MAX),
        None => opened.input_len,
    };
    Opened { input_len, ..opened }.within_budget(Some(path), options)
}

/// Opens `bytes` of any format [`detect_bytes`] recognises (not a sharded checkpoint, nor a
/// zTensor 2 root with shards: several files); every format's tensors can be borrowed from
/// them ([`Opened::memory`]). Refused, as [`open`] refuses a file, when its objects decode to
/// more than the expansion budget allows for that many bytes.
///
/// # Errors
/// As [`open`]; [`ErrorKind::NeedsFiles`] for a zTensor 2 root with shards.
pub fn open_bytes(bytes: Vec<u8>, options: &OpenOptions) -> Result<Opened, OpenError> {
    let kind = detect_bytes(&bytes, None)?;
    // The vector's heap buffer does not move when the vector does.
    let memory = (bytes.as_ptr() as usize, bytes.len());
    let input_len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    let limit = options.options.limits.whole_decode_limit();
    let opened = match kind {
        Kind::Zt => Opened::new(kind, Reader::new(bytes, &options.options).map_err(OpenError::Zt)?),
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => Opened::new(
            kind,
            ztensor_foreign::safetensors::SafetensorsFile::new(bytes)
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes),
        ),
        #[cfg(feature = "tensorbuffers")]
        Kind::TensorBuffers => Opened::new(kind, tb_reader(bytes, options.options.strict)?),
        #[cfg(feature = "numpy")]
        Kind::Npy => Opened::new(
            kind,
            ztensor_foreign::npy_in::NpyFile::new(bytes, "array").map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "numpy")]
        Kind::Npz => Opened::new(
            kind,
            ztensor_foreign::npz::NpzFile::new(bytes, limit).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "gguf")]
        Kind::Gguf => Opened::new(
            kind,
            ztensor_foreign::gguf::GgufFile::new(bytes).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "torch")]
        Kind::Torch => Opened::new(
            kind,
            ztensor_foreign::torch::TorchFile::new(bytes, "tensor", limit)
                .map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "v2")]
        Kind::Zt2 => Opened::new(kind, zt2_from_bytes(bytes, options)?),
        #[allow(unreachable_patterns)]
        other => return Err(not_opened(other, None)),
    };
    Opened { memory: Some(memory), input_len, ..opened }.within_budget(None, options)
}

/// A zTensor 2 file held in `bytes`: refused when it is a root whose parts lie in shards,
/// which bytes have no directory to find beside them.
#[cfg(feature = "v2")]
fn zt2_from_bytes(
    bytes: Vec<u8>,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<Vec<u8>>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let file = ztensor_v2::File::open(bytes, max).map_err(OpenError::Zt2)?;
    let shards: Vec<&str> =
        file.manifest().map(|m| m.shards.keys().map(String::as_str).collect()).unwrap_or_default();
    if let Some(first) = shards.first() {
        return Err(OpenError::Detect(Error::new(
            ErrorKind::NeedsFiles,
            format!(
                "the bytes: this is a zTensor 2 file whose parts lie in {} shard file(s) \
                 beside it ({first:?}{}), which bytes have no directory to find; open it by its \
                 path",
                shards.len(),
                if shards.len() > 1 { ", ..." } else { "" }
            ),
        )));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_row() {
        for format in FORMATS {
            assert_eq!(FORMATS.iter().filter(|f| f.kind == format.kind).count(), 1);
            assert!(!format.description.is_empty() && !format.rule.is_empty());
        }
        assert_eq!(FORMATS.len(), 10);
    }

    #[test]
    fn content_decides_and_names_what_is_not_read() {
        // zTensor 2 by its magic, whatever the name says (it shares `.zt` with 0.1/1.x).
        let zt2 = b"\x89ZT2\r\n\x1a\nrest of a zTensor 2 file".to_vec();
        assert_eq!(detect_bytes(&zt2, Some(Path::new("model.zt"))).unwrap(), Kind::Zt2);
        let hdf5 = b"\x89HDF\r\n\x1a\n\0\0\0\0".to_vec();
        let e = detect_bytes(&hdf5, Some(Path::new("model.zt"))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotRead);
        assert!(e.to_string().contains("an HDF5 file"), "{e}");
        // A damaged file is judged by its name.
        let junk = vec![0xee; 100];
        assert_eq!(
            detect_bytes(&junk, Some(Path::new("x.safetensors"))).unwrap(),
            Kind::Safetensors
        );
        assert_eq!(detect_bytes(&junk, Some(Path::new("x.TB"))).unwrap(), Kind::TensorBuffers);
        assert_eq!(detect_bytes(&junk, Some(Path::new("x.zt"))).unwrap(), Kind::Zt);
        assert_eq!(detect_bytes(&junk, None).unwrap_err().kind(), ErrorKind::NotRead);
        // A v1 footer alone says zTensor.
        let mut footer = vec![0u8; 40];
        footer.extend_from_slice(b"ZTEN1000");
        assert_eq!(detect_bytes(&footer, None).unwrap(), Kind::Zt);
        let json = b"{\"weight_map\": {}}".to_vec();
        assert!(detect_bytes(&json, None).unwrap_err().to_string().contains("JSON text"));
    }

    /// Every kind has its row (this match stops compiling when a kind is added).
    #[test]
    fn every_kind_is_in_the_table() {
        let kinds = [
            Kind::Zt,
            Kind::ZtIndex,
            Kind::Safetensors,
            Kind::SafetensorsIndex,
            Kind::TensorBuffers,
            Kind::Npy,
            Kind::Npz,
            Kind::Gguf,
            Kind::Torch,
            Kind::Zt2,
        ];
        for kind in kinds {
            match kind {
                Kind::Zt
                | Kind::ZtIndex
                | Kind::Safetensors
                | Kind::SafetensorsIndex
                | Kind::TensorBuffers
                | Kind::Npy
                | Kind::Npz
                | Kind::Gguf
                | Kind::Torch
                | Kind::Zt2 => assert!(FORMATS.iter().any(|f| f.kind == kind), "{kind:?}"),
            }
        }
        assert_eq!(kinds.len(), FORMATS.len());
    }

    fn fixture(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(path)
    }

    /// A scratch directory for this test, removed first if a run left it.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("zt-registry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// An object's name and its decoded components by role.
    type Contents = (String, Vec<(String, Vec<u8>)>);

    /// Each object's name and decoded components, in order.
    fn contents(source: &dyn TensorSource) -> Vec<Contents> {
        (0..source.len())
            .map(|i| {
                let data = source.read(i).unwrap();
                let parts =
                    data.components.into_iter().map(|(r, c)| (r, c.bytes.into_owned())).collect();
                (data.name, parts)
            })
            .collect()
    }

    /// A file whose data happens to end in another format's magic is the format it starts
    /// as, from a path and from bytes.
    #[cfg(all(feature = "numpy", feature = "safetensors"))]
    #[test]
    fn a_leading_magic_decides_before_a_trailing_one() {
        // An .npy of 16 bytes, the last 8 of them "ZTEN1000".
        let mut header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (16,), }".to_vec();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        npy.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
        npy.extend_from_slice(&header);
        let data = b"12345678ZTEN1000";
        npy.extend_from_slice(data);
        // An .npz whose zip comment is "ZTEN1000": the end record (the last 22 bytes of an
        // archive without a comment) given a comment of 8 bytes.
        let mut npz = std::fs::read(fixture("external/numpy/arrays.npz")).unwrap();
        let end = npz.len() - 22;
        assert!(npz[end..].starts_with(b"PK\x05\x06") && npz[end + 20..] == [0, 0]);
        npz[end + 20..].copy_from_slice(&8u16.to_le_bytes());
        npz.extend_from_slice(b"ZTEN1000");
        // A safetensors file whose data ends in "TBS1".
        let json = br#"{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
        let mut st = u64::try_from(json.len()).unwrap().to_le_bytes().to_vec();
        st.extend_from_slice(json);
        st.extend_from_slice(b"TBS1");
        let dir = scratch("leading");
        for (bytes, kind, name) in
            [(npy, Kind::Npy, "a.npy"), (npz, Kind::Npz, "a.npz"), (st, Kind::Safetensors, "a.st")]
        {
            assert_eq!(detect_bytes(&bytes, None).unwrap(), kind);
            let from_bytes = open_bytes(bytes.clone(), &OpenOptions::default()).unwrap();
            assert_eq!(from_bytes.kind(), kind);
            let path = dir.join(name);
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(detect(&path).unwrap(), kind);
            let from_path = open(&path, &OpenOptions::default()).unwrap();
            let read = contents(from_path.source());
            assert!(!read.is_empty(), "{kind:?}");
            // An .npy's one array is named after its file, or `array` from bytes.
            let parts =
                |c: Vec<Contents>| -> Vec<_> { c.into_iter().map(|(_, parts)| parts).collect() };
            assert_eq!(parts(read.clone()), parts(contents(from_bytes.source())), "{kind:?}");
            if kind == Kind::Npy {
                assert_eq!(read[0].1[0].1, data);
            }
            if kind == Kind::Safetensors {
                assert_eq!(read[0].1[0].1, b"TBS1");
            }
        }
        // Starting like nothing known, the trailing magic still decides.
        let mut tail = vec![0u8; 40];
        tail.extend_from_slice(b"TBS1");
        assert_eq!(detect_bytes(&tail, None).unwrap(), Kind::TensorBuffers);
        // A format named by its first bytes stays that, whatever it ends with.
        let mut gzip = b"\x1f\x8b\x08\x00".to_vec();
        gzip.extend_from_slice(b"ZTEN1000");
        assert_eq!(detect_bytes(&gzip, None).unwrap_err().kind(), ErrorKind::NotRead);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// zTensor 2 bytes open as the file does; a root whose parts lie in shards is refused.
    #[cfg(feature = "v2")]
    #[test]
    fn ztensor2_bytes_open_as_the_file() {
        let options = OpenOptions::default();
        for name in ["canonical-basic.zt", "csr-data-valid.zt", "aliased-identical-blobs.zt"] {
            let path = fixture("external/ztensor2/valid").join(name);
            let from_path = open(&path, &options).unwrap();
            let from_bytes = open_bytes(std::fs::read(&path).unwrap(), &options).unwrap();
            assert_eq!(from_bytes.kind(), Kind::Zt2);
            assert!(from_bytes.memory().is_some());
            let read = contents(from_bytes.source());
            assert!(!read.is_empty(), "{name}");
            assert_eq!(read, contents(from_path.source()), "{name}");
        }
        let sharded = std::fs::read(fixture("external/ztensor2/hostile/shards-1000-missing.zt"));
        let e = open_bytes(sharded.unwrap(), &options).unwrap_err();
        assert!(matches!(&e, OpenError::Detect(d) if d.kind() == ErrorKind::NeedsFiles), "{e}");
        assert!(e.to_string().contains("open it by its path"), "{e}");
        // A kind without an arm for bytes is an error, not a panic.
        let e = not_opened(Kind::ZtIndex, None);
        assert!(matches!(&e, OpenError::Detect(d) if d.kind() == ErrorKind::NeedsFiles), "{e}");
    }

    /// Every way in refuses a file that decodes to far more than its size allows, before
    /// decoding anything; a raised budget admits it.
    #[test]
    fn the_expansion_budget_is_checked_where_files_open() {
        use ztensor_format::{ErrorKind as Rule, Verdict};
        // 3 GiB of zeros, honestly declared, in about 100 KB.
        let path = fixture("hostile/zstd-bomb-3g.zt");
        let options = OpenOptions::default();
        let refused = |r: Result<Opened, OpenError>| {
            let e = r.unwrap_err();
            assert_eq!(e.rule(), Some(Rule::DecodedTooLarge), "{e}");
            e.to_string()
        };
        let said = refused(open(&path, &options));
        assert!(said.contains("zstd-bomb-3g.zt: its objects decode to more than"), "{said}");
        // SAFETY: fixtures are not changed while the test runs.
        refused(unsafe { open_mapped(&path, &options) });
        let said = refused(open_bytes(std::fs::read(&path).unwrap(), &options));
        assert!(said.starts_with("the bytes: "), "{said}");
        // open_kind leaves the check to its caller, who has the input's size.
        let opened = open_kind(Kind::Zt, &path, &options).unwrap();
        assert_eq!(opened.input_len(), std::fs::metadata(&path).unwrap().len());
        let e = opened.check_expansion(&options.options.limits).unwrap_err();
        assert_eq!(e.rule(), Some(Rule::DecodedTooLarge));
        let mut raised = OpenOptions::default();
        raised.options.limits.max_expansion = 1 << 20;
        let opened = open(&path, &raised).unwrap();
        assert_eq!(opened.check_expansion(&raised.options.limits).unwrap(), 3 << 30);
    }
}

/// A build without the zip formats still names them by content, whatever their file names,
/// and says which feature reads them. Run by `cargo xtask features` (`cargo test -p
/// ztensor-registry --no-default-features --lib without_features`).
#[cfg(all(test, not(feature = "numpy"), not(feature = "torch")))]
mod without_features {
    use super::*;

    #[test]
    fn zip_formats_are_named_with_their_feature() {
        let external =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures/external");
        let dir = std::env::temp_dir().join(format!("zt-registry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (file, feature, what) in [
            ("pytorch/checkpoint.pt", "torch", Kind::Torch),
            ("numpy/arrays.npz", "numpy", Kind::Npz),
        ] {
            // Under a name that says nothing.
            let renamed = dir.join("data.bin.zip");
            std::fs::copy(external.join(file), &renamed).unwrap();
            for path in [external.join(file), renamed] {
                let e = detect(&path).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Disabled, "{}: {e}", path.display());
                let message = e.to_string();
                assert!(message.contains(&format!("`{feature}` feature")), "{message}");
                assert!(message.contains(&what.to_string()), "{message}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
