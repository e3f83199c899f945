//! The one error type of this crate, whose kinds are the rule identifiers of `spec/rules.md`.

use std::fmt;

/// Which layer of the code base enforces a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Checked by this crate when a manifest is decoded or validated: a failure rejects the file.
    File,
    /// Checked by this crate at validation, but a failure only makes one object unsupported.
    Object,
    /// Checked against decoded component bytes, on request, by the pure functions of
    /// [`crate::data`].
    Data,
    /// Checked by the reader while it fetches, decompresses or verifies stored bytes
    /// (`ztensor-io`).
    Decode,
    /// Raised when building or encoding a manifest, never when reading one.
    Write,
}

macro_rules! kinds {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $layer:ident, $strict:literal, $summary:literal; )*) => {
        /// What went wrong: one variant per rule of `spec/rules.md`, plus the few failures that are
        /// not rules (writer-side refusals).
        ///
        /// [`ErrorKind::id`] is the stable snake_case identifier shared by `spec/rules.md`,
        /// `fixtures/index.toml` and the conformance dump.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorKind {
            /// Every kind, in the order of `spec/rules.md`.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$variant, )* ];

            /// The stable snake_case identifier of the rule.
            pub fn id(self) -> &'static str {
                match self { $( ErrorKind::$variant => $id, )* }
            }

            /// The layer that enforces the rule.
            pub fn layer(self) -> Layer {
                match self { $( ErrorKind::$variant => Layer::$layer, )* }
            }

            /// Whether the rule is only enforced in strict mode.
            pub fn strict_only(self) -> bool {
                match self { $( ErrorKind::$variant => $strict, )* }
            }

            /// One line on what the rule checks.
            pub fn summary(self) -> &'static str {
                match self { $( ErrorKind::$variant => $summary, )* }
            }

            /// Looks a kind up by its identifier.
            pub fn from_id(id: &str) -> Option<ErrorKind> {
                match id { $( $id => Some(ErrorKind::$variant), )* _ => None }
            }
        }
    };
}

kinds! {
    /// The file is shorter than the smallest file of its version.
    FileTooSmall = "file_too_small", File, false, "file shorter than header + manifest size field (+ footer magic)";
    /// The first 8 bytes are not a zTensor magic.
    HeaderMagic = "header_magic", File, false, "first 8 bytes are neither ZTEN0001 nor ZTEN1000";
    /// A v1.x file does not end with the footer magic.
    FooterMagic = "footer_magic", File, false, "last 8 bytes of a v1.x file are not ZTEN1000";
    /// The declared manifest size exceeds the limit.
    ManifestTooLarge = "manifest_too_large", File, false, "declared manifest size above Limits::max_manifest_len (1 GiB), or more values than Limits::max_manifest_values";
    /// The declared manifest does not fit between the header and the size field.
    ManifestOutOfBounds = "manifest_out_of_bounds", File, false, "declared manifest size larger than the bytes between header and size field";
    /// The manifest bytes are not well-formed CBOR.
    CborSyntax = "cbor_syntax", File, false, "manifest is not well-formed CBOR (truncated, reserved value, bad UTF-8, stray break)";
    /// Bytes remain after the manifest's single CBOR item.
    CborTrailingBytes = "cbor_trailing_bytes", File, false, "bytes left inside the declared manifest size after the CBOR item";
    /// A CBOR map repeats a key.
    CborDuplicateKey = "cbor_duplicate_key", File, false, "a CBOR map anywhere in the manifest repeats a key";
    /// CBOR nesting exceeds the limit.
    CborDepth = "cbor_depth", File, false, "CBOR nesting deeper than Limits::max_cbor_depth";
    /// The manifest root has the wrong type.
    SchemaRoot = "schema_root", File, false, "manifest root is not an array (v0.1) or a map (v1.x)";
    /// A required field is absent.
    SchemaMissingField = "schema_missing_field", File, false, "a required field is absent";
    /// A field has the wrong CBOR type or an out-of-range value.
    SchemaFieldType = "schema_field_type", File, false, "a field has the wrong CBOR type (e.g. a negative offset, a text shape)";
    /// A key of a structural map is not a text string.
    KeyNotText = "key_not_text", File, false, "a key of the root, tensor, object or component map is not text";
    /// An `attributes` value is not a map.
    AttributesNotAMap = "attributes_not_a_map", File, false, "file or object attributes present but not a map";
    /// The version string does not name major version 1.
    VersionUnsupported = "version_unsupported", File, false, "v1.x version string missing a numeric major of 1";
    /// More objects than the limit.
    TooManyObjects = "too_many_objects", File, false, "more objects than Limits::max_objects";
    /// An object name is longer than the limit.
    NameTooLong = "name_too_long", File, false, "object name longer than Limits::max_name_len bytes";
    /// An object name is empty.
    NameEmpty = "name_empty", File, true, "object name is the empty string";
    /// An object name contains a NUL character.
    NameNul = "name_nul", File, true, "object name contains U+0000";
    /// Two v0.1 tensors share a name.
    DuplicateName = "duplicate_name", File, true, "two v0.1 tensors (or two written objects) share a name";
    /// A shape has more dimensions than the limit.
    ShapeRank = "shape_rank", File, false, "shape rank above Limits::max_rank";
    /// Shape × element size overflows 64 bits.
    ShapeOverflow = "shape_overflow", File, false, "product(shape) × element size overflows u64";
    /// A storage dtype this implementation does not know.
    DtypeUnknown = "dtype_unknown", Object, false, "dtype string not one of the 13 storage types (object unsupported)";
    /// An encoding this implementation does not know.
    EncodingUnknown = "encoding_unknown", Object, false, "encoding string other than raw or zstd (object unsupported)";
    /// A v0.1 `data_endianness` other than `little`/`big`.
    EndiannessUnknown = "endianness_unknown", Object, false, "v0.1 data_endianness other than little or big (object unsupported)";
    /// A v0.1 `layout` this implementation does not know.
    LayoutUnknown = "layout_unknown", Object, false, "v0.1 layout/sparse_format not understood (object unsupported)";
    /// A digest of a known algorithm whose value cannot be parsed.
    DigestMalformed = "digest_malformed", Object, false, "digest of a known algorithm with a malformed value (object unverifiable)";
    /// A decoded size above the limit.
    DecodedTooLarge = "decoded_too_large", Object, false, "a zstd component decodes to more than Limits::max_decoded_len";
    /// A known logical type over the wrong storage dtype.
    LogicalTypeMismatch = "logical_type_mismatch", File, false, "known logical type over the wrong storage dtype (f8_* need u8, complex64 f32, complex128 f64)";
    /// A blob extends past the data area.
    BlobOutOfBounds = "blob_out_of_bounds", File, false, "offset + length beyond the start of the manifest";
    /// A blob starts inside the header magic.
    BlobOverlapsHeader = "blob_overlaps_header", File, false, "non-empty blob starting below byte 8";
    /// A blob offset is not a multiple of 64.
    BlobMisaligned = "blob_misaligned", File, false, "blob offset not a multiple of 64";
    /// Two blobs overlap without being identical.
    BlobPartialOverlap = "blob_partial_overlap", File, false, "two blob ranges overlap but are not identical (exact aliasing is legal)";
    /// A required component role is absent.
    ComponentMissing = "component_missing", File, false, "a role required by a known format is absent";
    /// A component role the format does not define.
    ComponentUnexpected = "component_unexpected", File, true, "a role not defined by the object's known format";
    /// A dense object's size disagrees with its shape.
    DenseSizeMismatch = "dense_size_mismatch", File, false, "dense data size ≠ product(shape) × element size (raw length, or uncompressed_length)";
    /// A component size is not a whole number of elements.
    ComponentLengthNotMultiple = "component_length_not_multiple", File, false, "component decoded size not a multiple of its element size";
    /// A v1.2 zstd component without `uncompressed_length`.
    UncompressedLengthMissing = "uncompressed_length_missing", File, true, "v1.2 zstd component without uncompressed_length";
    /// A 1.1 or 1.2 file's padding is not zero.
    PaddingNonzero = "padding_nonzero", File, true, "a 1.x file's padding (bytes of the data area no component covers) is not all zero";
    /// A raw component whose `uncompressed_length` differs from `length`.
    UncompressedLengthMismatch = "uncompressed_length_mismatch", File, false, "raw component whose uncompressed_length differs from its length";
    /// A sparse object of the wrong rank.
    SparseRank = "sparse_rank", File, false, "sparse_csr shape not of rank 2, or sparse_coo shape of rank 0";
    /// Sparse index components of the wrong dtype.
    SparseIndexDtype = "sparse_index_dtype", File, false, "sparse index component not u64 (v1.2) or not an integer type (v1.1)";
    /// CSR `indptr` holds the wrong number of entries.
    CsrIndptrCount = "csr_indptr_count", File, false, "CSR indptr element count ≠ rows + 1";
    /// Sparse component counts disagree.
    SparseNnzMismatch = "sparse_nnz_mismatch", File, false, "values count ≠ indices count (CSR) or coords count ≠ rank × values count (COO)";
    /// A v0.1 single-blob sparse tensor of impossible size.
    SparsePackedSize = "sparse_packed_size", File, false, "v0.1 raw single-blob sparse tensor whose size fits no nnz";
    /// A digest does not match the bytes.
    DigestMismatch = "digest_mismatch", Decode, false, "digest differs from the stored bytes";
    /// Decompressed output of the wrong length.
    DecodedSizeMismatch = "decoded_size_mismatch", Decode, false, "zstd output shorter or longer than the expected decoded size";
    /// A zstd stream that does not decode.
    DecodeFailed = "decode_failed", Decode, false, "zstd stream is corrupt";
    /// A malformed CSR `indptr`.
    CsrIndptrInvalid = "csr_indptr_invalid", Data, false, "CSR indptr does not start at 0, decreases, or does not end at nnz";
    /// A sparse index outside the shape.
    SparseIndexOutOfBounds = "sparse_index_out_of_bounds", Data, false, "CSR column index ≥ columns, or COO coordinate outside the shape";
    /// CSR indices not strictly increasing within a row.
    CsrIndicesUnsorted = "csr_indices_unsorted", Data, true, "CSR column indices not strictly increasing within a row";
    /// A v1.x bool byte other than 0 or 1.
    BoolInvalid = "bool_invalid", Data, false, "v1.x bool byte other than 0x00 or 0x01";
    /// Content the target version cannot express.
    Unrepresentable = "unrepresentable", Write, false, "the target version cannot express this content";
    /// Inconsistent input given to a writer or encoder.
    InvalidInput = "invalid_input", Write, false, "a writer was given inconsistent input";
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// An error with the facts a user needs to find the fault: the rule, the byte offset, the object,
/// the component, the field and the expected and found values, where known.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    message: String,
    offset: Option<u64>,
    object: Option<String>,
    component: Option<String>,
    field: Option<&'static str>,
    expected: Option<String>,
    found: Option<String>,
    refused: Option<Refused>,
    hint: Option<&'static str>,
}

/// What content a target format could not hold, when that is why an error refused it: what a
/// program tells its user to leave out (a flag that drops attributes, one that carries or
/// excludes tensors of a dtype). Set on `unrepresentable` errors by the writers and sinks of
/// every crate; read through [`Error::refused`] (and the same method of the other crates'
/// errors), never from message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refused {
    /// The file's attributes (a target with none, or only text).
    FileAttributes,
    /// An object's own attributes.
    ObjectAttributes,
    /// A tensor's dtype (one zTensor, or the target, has no type for).
    Dtype,
}

/// What every error type of the workspace says about itself, so that a program decides by
/// type, never by message text: whether the data said no, what content a target could not
/// hold, and which rule was broken. Implemented by this crate's [`Error`] and by the errors of
/// `ztensor-io`, `ztensor-foreign`, `ztensor-tensorbuffers`, `ztensor-shard` and
/// `ztensor-registry`: `use ztensor_format::Verdict` to call them.
///
/// ```
/// use ztensor_format::{Error, ErrorKind, Refused, Verdict};
///
/// fn status(e: &dyn Verdict) -> i32 {
///     if e.is_rejection() { 1 } else { 2 }
/// }
/// let e = Error::new(ErrorKind::Unrepresentable, "no file attributes in 0.1")
///     .refusing(Refused::FileAttributes);
/// assert_eq!(status(&e), 1);
/// assert_eq!(Verdict::refused(&e), Some(Refused::FileAttributes));
/// ```
pub trait Verdict {
    /// Whether the data said no (a rule of a format broken, an object that cannot be decoded,
    /// content a target cannot hold), as opposed to a request that failed (I/O, a name not
    /// found, a feature not built).
    fn is_rejection(&self) -> bool;

    /// What content a target could not hold, when that is why the error refused it.
    fn refused(&self) -> Option<Refused> {
        None
    }

    /// The rule of `spec/rules.md` that was broken, when the error is about one.
    fn rule(&self) -> Option<ErrorKind> {
        None
    }

    /// The identifier of the rule broken: [`rule`](Verdict::rule)'s, or one of a format with
    /// rules of its own (`tb_…` for TensorBuffers, zTensor 2's).
    fn rule_id(&self) -> Option<&'static str> {
        self.rule().map(ErrorKind::id)
    }

    /// What sort of failure this is, for a front end with a class for each ([`Failure`]).
    fn failure(&self) -> Failure {
        if self.is_rejection() { Failure::Format } else { Failure::Other }
    }

    /// The object (tensor) the fault belongs to, when known.
    fn object(&self) -> Option<&str> {
        None
    }

    /// The absolute byte offset in the file where the fault lies, when known.
    fn offset(&self) -> Option<u64> {
        None
    }
}

/// What sort of failure an error is ([`Verdict::failure`]): what a front end with a class
/// for each sort (Python's exceptions, say) maps it to, decided by the error's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The data or its format said no: a rule broken, content a target cannot hold, a format
    /// recognised and not read.
    Format,
    /// Valid content this build does not decode (an encoding, dtype or layout it lacks).
    Unsupported,
    /// No object of the name asked for.
    NotFound,
    /// The operating system or a store said no: the nearest I/O kind, and the system's error
    /// number when it gave one.
    Io(std::io::ErrorKind, Option<i32>),
    /// A request that failed otherwise.
    Other,
}

impl Failure {
    /// The I/O failure of `e`.
    pub fn io(e: &std::io::Error) -> Failure {
        Failure::Io(e.kind(), e.raw_os_error())
    }
}

impl Verdict for Error {
    fn is_rejection(&self) -> bool {
        true
    }
    fn refused(&self) -> Option<Refused> {
        Error::refused(self)
    }
    fn rule(&self) -> Option<ErrorKind> {
        Some(self.kind())
    }
    fn object(&self) -> Option<&str> {
        Error::object(self)
    }
    fn offset(&self) -> Option<u64> {
        Error::offset(self)
    }
}

impl Error {
    /// Creates an error of `kind` with a message for people.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error(Box::new(Inner {
            kind,
            message: message.into(),
            offset: None,
            object: None,
            component: None,
            field: None,
            expected: None,
            found: None,
            refused: None,
            hint: None,
        }))
    }

    /// Says what content the target could not hold ([`Refused`]).
    #[must_use]
    pub fn refusing(mut self, what: Refused) -> Error {
        self.0.refused = Some(what);
        self
    }

    /// What content the target could not hold, when that is why this error refused it.
    pub fn refused(&self) -> Option<Refused> {
        self.0.refused
    }

    /// Adds the likely cause, for people, shown after the rule (such as
    /// [`CUT_SHORT_HINT`](crate::CUT_SHORT_HINT) for a file whose end is missing).
    #[must_use]
    pub fn hint(mut self, hint: &'static str) -> Error {
        self.0.hint = Some(hint);
        self
    }

    /// The likely cause, when one is known.
    pub fn likely_cause(&self) -> Option<&'static str> {
        self.0.hint
    }

    /// Sets the absolute byte offset in the file where the fault lies.
    #[must_use]
    pub fn at(mut self, offset: u64) -> Error {
        self.0.offset = Some(offset);
        self
    }

    /// Shifts a known offset by `base` (used to turn manifest-relative into file offsets).
    #[must_use]
    pub fn shifted(mut self, base: u64) -> Error {
        self.0.offset = self.0.offset.map(|o| o.saturating_add(base));
        self
    }

    /// Names the object the fault belongs to, unless one is already named.
    #[must_use]
    pub fn in_object(mut self, name: &str) -> Error {
        if self.0.object.is_none() {
            self.0.object = Some(name.to_owned());
        }
        self
    }

    /// Names the component (role) the fault belongs to.
    #[must_use]
    pub fn in_component(mut self, role: &str) -> Error {
        if self.0.component.is_none() {
            self.0.component = Some(role.to_owned());
        }
        self
    }

    /// Names the manifest field at fault.
    #[must_use]
    pub fn field(mut self, field: &'static str) -> Error {
        self.0.field = Some(field);
        self
    }

    /// Records what was expected and what was found.
    #[must_use]
    pub fn expected_found(
        mut self,
        expected: impl fmt::Display,
        found: impl fmt::Display,
    ) -> Error {
        self.0.expected = Some(expected.to_string());
        self.0.found = Some(found.to_string());
        self
    }

    /// The same error under another kind (used when a reader-side rule is hit while writing).
    #[must_use]
    pub fn kind_into(mut self, kind: ErrorKind) -> Error {
        self.0.kind = kind;
        self
    }

    /// The rule that was broken.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The message for people, without the context fields.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The absolute byte offset in the file, where known.
    pub fn offset(&self) -> Option<u64> {
        self.0.offset
    }

    /// The object name, where the fault belongs to one object.
    pub fn object(&self) -> Option<&str> {
        self.0.object.as_deref()
    }

    /// The component role, where the fault belongs to one component.
    pub fn component(&self) -> Option<&str> {
        self.0.component.as_deref()
    }

    /// The manifest field at fault, where known.
    pub fn field_name(&self) -> Option<&'static str> {
        self.0.field
    }

    /// The expected value, where the rule compares two values.
    pub fn expected(&self) -> Option<&str> {
        self.0.expected.as_deref()
    }

    /// The value found in the file, where the rule compares two values.
    pub fn found(&self) -> Option<&str> {
        self.0.found.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.0;
        let mut context = Vec::new();
        if let Some(object) = &i.object {
            context.push(format!("object {object:?}"));
        }
        if let Some(component) = &i.component {
            context.push(format!("component {component:?}"));
        }
        if let Some(field) = i.field {
            context.push(format!("field {field:?}"));
        }
        if !context.is_empty() {
            write!(f, "{}: ", context.join(" "))?;
        }
        f.write_str(&i.message)?;
        if let (Some(e), Some(x)) = (&i.expected, &i.found) {
            write!(f, " (expected {e}, found {x})")?;
        }
        if let Some(offset) = i.offset {
            write!(f, " at byte {offset}")?;
        }
        write!(f, " [{}]", i.kind.id())?;
        if let Some(hint) = i.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({self})")
    }
}

impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &kind in ErrorKind::ALL {
            assert!(seen.insert(kind.id()), "duplicate id {}", kind.id());
            assert_eq!(ErrorKind::from_id(kind.id()), Some(kind));
            assert!(
                kind.id()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit())
            );
        }
        assert_eq!(ErrorKind::from_id("no_such_rule"), None);
    }

    #[test]
    fn display_carries_context() {
        let err = Error::new(ErrorKind::BlobOutOfBounds, "blob ends past the data area")
            .in_object("w")
            .in_component("data")
            .field("length")
            .expected_found("end <= 1000", 4160)
            .at(4096);
        let text = err.to_string();
        assert_eq!(
            text,
            "object \"w\" component \"data\" field \"length\": blob ends past the data area \
             (expected end <= 1000, found 4160) at byte 4096 [blob_out_of_bounds]"
        );
        assert_eq!(err.kind(), ErrorKind::BlobOutOfBounds);
        assert_eq!(err.offset(), Some(4096));
    }
}
