//! The rules a zTensor 2 file can break, and the error that names one.

use std::fmt;

/// A rule of zTensor 2 ("Draft 4"), as `spec/ztensor-2.md` states them. The identifiers are
/// those of the published conformance corpus, in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// Shorter than the magic and the footer (48 bytes).
    FileTooSmall,
    /// The first 8 bytes are not the magic.
    HeaderMagic,
    /// The last 8 bytes are not the magic.
    FooterMagic,
    /// The footer's version is not 2.
    Version,
    /// The manifest is longer than 1 GiB (or this reader's limit).
    ManifestTooLarge,
    /// The manifest does not lie within the file, or a data shard's footer is not all zero.
    ManifestBounds,
    /// The footer's XXH3-64 is not that of the manifest bytes.
    ManifestHash,
    /// Not well-formed CBOR of the permitted item types.
    CborSyntax,
    /// Well-formed CBOR that is not in deterministic form (a longer head than needed, keys out
    /// of order, a float wider than its value needs, a NaN other than `F9 7E00`).
    CborDeterminism,
    /// A map key given twice.
    CborDuplicateKey,
    /// Nesting deeper than 32 below the manifest's root.
    CborDepth,
    /// A key missing, of the wrong type, or a value the schema does not allow.
    Schema,
    /// An object, part or attribute name that is empty, longer than 1024 bytes or holds U+0000.
    Name,
    /// A shard name that is not 1 to 64 of `A-Z a-z 0-9 . _ -`, or starts with `.`.
    ShardName,
    /// A part names a shard the table does not list.
    ShardRef,
    /// A rank above 64, or dimensions whose product overflows 64 bits.
    Shape,
    /// A blob offset that is not a multiple of 4096 at or after 4096.
    BlobAlignment,
    /// A blob that does not end before its file's footer.
    BlobBounds,
    /// Two blobs of one file that overlap without being the same range.
    BlobOverlap,
    /// A layout's parts or their types are not those the layout requires.
    LayoutRule,
    /// A dense object's data is not the size its shape and type give.
    DenseSize,
    /// Decoded data breaks a rule of its layout or logical type.
    LayoutData,
    /// An encoded part whose stream breaks its encoding's rules (a `zt.zstd-seekable/1` seek
    /// table, a frame).
    Encoding,
    /// A part's digest differs from its decoded bytes.
    Digest,
    /// A shard is not the file the root's table names: another size, not a valid container,
    /// or (when verified) another whole-file digest.
    ShardIdentity,
}

impl Rule {
    /// Every rule, in the order above.
    pub const ALL: &'static [Rule] = &[
        Rule::FileTooSmall,
        Rule::HeaderMagic,
        Rule::FooterMagic,
        Rule::Version,
        Rule::ManifestTooLarge,
        Rule::ManifestBounds,
        Rule::ManifestHash,
        Rule::CborSyntax,
        Rule::CborDeterminism,
        Rule::CborDuplicateKey,
        Rule::CborDepth,
        Rule::Schema,
        Rule::Name,
        Rule::ShardName,
        Rule::ShardRef,
        Rule::Shape,
        Rule::BlobAlignment,
        Rule::BlobBounds,
        Rule::BlobOverlap,
        Rule::LayoutRule,
        Rule::DenseSize,
        Rule::LayoutData,
        Rule::Encoding,
        Rule::Digest,
        Rule::ShardIdentity,
    ];

    /// The rule's identifier (`blob_alignment`).
    pub fn id(self) -> &'static str {
        match self {
            Rule::FileTooSmall => "file_too_small",
            Rule::HeaderMagic => "header_magic",
            Rule::FooterMagic => "footer_magic",
            Rule::Version => "version",
            Rule::ManifestTooLarge => "manifest_too_large",
            Rule::ManifestBounds => "manifest_bounds",
            Rule::ManifestHash => "manifest_hash",
            Rule::CborSyntax => "cbor_syntax",
            Rule::CborDeterminism => "cbor_determinism",
            Rule::CborDuplicateKey => "cbor_duplicate_key",
            Rule::CborDepth => "cbor_depth",
            Rule::Schema => "schema",
            Rule::Name => "name",
            Rule::ShardName => "shard_name",
            Rule::ShardRef => "shard_ref",
            Rule::Shape => "shape",
            Rule::BlobAlignment => "blob_alignment",
            Rule::BlobBounds => "blob_bounds",
            Rule::BlobOverlap => "blob_overlap",
            Rule::LayoutRule => "layout_rule",
            Rule::DenseSize => "dense_size",
            Rule::LayoutData => "layout_data",
            Rule::Encoding => "encoding",
            Rule::Digest => "digest",
            Rule::ShardIdentity => "shard_identity",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Why a file was refused: a broken rule (with where), or an I/O failure.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    refused: Option<ztensor_format::Refused>,
}

/// What kind of failure an [`Error`] is.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file breaks a rule.
    Rule(Rule),
    /// The bytes could not be read.
    Io(std::io::Error),
    /// The file is valid, and what was asked needs something this reader does not do (an
    /// encoding, digest algorithm or logical type it does not know, a part in another file):
    /// a refusal, not a rejection.
    Unsupported,
    /// Content zTensor 2 cannot hold (writing or converting): `Verdict::refused` says which.
    Unrepresentable,
    /// The source being written or identified failed to read: its own error, whose verdict
    /// (a broken rule of its format, or I/O) is kept.
    Source(ztensor_io::Error),
}

impl Error {
    pub(crate) fn rule(rule: Rule, message: impl Into<String>) -> Error {
        Error { kind: ErrorKind::Rule(rule), message: message.into(), offset: None, refused: None }
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Error {
        Error { kind: ErrorKind::Unsupported, message: message.into(), offset: None, refused: None }
    }

    pub(crate) fn io(what: &str, e: std::io::Error) -> Error {
        Error {
            message: format!("{what}: {e}"),
            kind: ErrorKind::Io(e),
            offset: None,
            refused: None,
        }
    }

    /// The same error, its message prefixed with where it lies (`object "w"`).
    pub(crate) fn unrepresentable(
        refused: ztensor_format::Refused,
        message: impl Into<String>,
    ) -> Error {
        Error {
            kind: ErrorKind::Unrepresentable,
            message: message.into(),
            offset: None,
            refused: Some(refused),
        }
    }

    /// A source's error reading object `name`: `reading object "NAME": …`, the object named
    /// once (`reading object "NAME" component "ROLE": …` when the error names it already).
    pub(crate) fn reading(name: &str, e: ztensor_io::Error) -> Error {
        if e.format_error().and_then(ztensor_format::Error::object) == Some(name) {
            Error {
                message: format!("reading {e}"),
                kind: ErrorKind::Source(e),
                offset: None,
                refused: None,
            }
        } else {
            Error::source(&format!("reading object {name:?}"), e)
        }
    }

    pub(crate) fn source(what: &str, e: ztensor_io::Error) -> Error {
        Error {
            message: format!("{what}: {e}"),
            kind: ErrorKind::Source(e),
            offset: None,
            refused: None,
        }
    }

    pub(crate) fn within(mut self, prefix: &str) -> Error {
        self.message = format!("{prefix}: {}", self.message);
        self
    }

    pub(crate) fn at(mut self, offset: u64) -> Error {
        self.offset.get_or_insert(offset);
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The rule broken, when the file is at fault.
    pub fn broken(&self) -> Option<Rule> {
        match self.kind {
            ErrorKind::Rule(r) => Some(r),
            ErrorKind::Io(_)
            | ErrorKind::Unsupported
            | ErrorKind::Unrepresentable
            | ErrorKind::Source(_) => None,
        }
    }

    /// Where in the manifest (or the file, for the container's rules) the fault lies.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(at) = self.offset {
            write!(f, " (at byte {at})")?;
        }
        if let ErrorKind::Rule(rule) = self.kind {
            write!(f, " [{rule}]")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// A broken rule is the data saying no; I/O failures and refusals are not.
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        match &self.kind {
            ErrorKind::Source(e) => e.is_rejection(),
            kind => self.broken().is_some() || matches!(kind, ErrorKind::Unrepresentable),
        }
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        match &self.kind {
            ErrorKind::Source(e) => e.refused(),
            _ => self.refused,
        }
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        match &self.kind {
            ErrorKind::Source(e) => e.rule(),
            _ => None,
        }
    }
    fn rule_id(&self) -> Option<&'static str> {
        match &self.kind {
            ErrorKind::Source(e) => e.rule_id(),
            ErrorKind::Rule(rule) => Some(rule.id()),
            _ => None,
        }
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        match &self.kind {
            ErrorKind::Source(e) => e.failure(),
            ErrorKind::Rule(_) => Failure::Format,
            ErrorKind::Io(e) => Failure::io(e),
            ErrorKind::Unsupported | ErrorKind::Unrepresentable => Failure::Unsupported,
        }
    }
    fn object(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Source(e) => ztensor_format::Verdict::object(e),
            _ => None,
        }
    }
    fn offset(&self) -> Option<u64> {
        match &self.kind {
            ErrorKind::Source(e) => ztensor_format::Verdict::offset(e),
            _ => self.offset,
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
