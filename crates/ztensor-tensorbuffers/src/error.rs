//! The error type of this crate; kinds are the TensorBuffers rule identifiers of
//! `spec/tensorbuffers.md`.

use std::fmt;

macro_rules! kinds {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal; )*) => {
        /// What went wrong. [`ErrorKind::id`] is the stable identifier used by the conformance
        /// dump and the fixtures.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorKind {
            /// Every kind.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$variant, )* ];

            /// The stable snake_case identifier.
            pub fn id(self) -> &'static str {
                match self { $( ErrorKind::$variant => $id, )* }
            }
        }
    };
}

kinds! {
    /// Shorter than the 12 bytes of two magics and a size field.
    FileTooSmall = "tb_file_too_small";
    /// The first 4 bytes are not `TBS1`.
    HeaderMagic = "tb_header_magic";
    /// The last 4 bytes are not `TBS1`.
    FooterMagic = "tb_footer_magic";
    /// The metadata size does not fit in the file.
    MetadataOutOfBounds = "tb_metadata_out_of_bounds";
    /// The metadata is not a valid FlatBuffer of the schema (including limits).
    Flatbuffer = "tb_flatbuffer";
    /// A tensor has no shape vector.
    ShapeMissing = "tb_shape_missing";
    /// A tensor's data type is absent, `None` or unknown.
    DataType = "tb_data_type";
    /// A tensor's data lies outside the data region.
    DataOutOfBounds = "tb_data_out_of_bounds";
    /// `data_size` differs from product(shape) × element size.
    SizeMismatch = "tb_size_mismatch";
    /// Two tensors share a name.
    DuplicateName = "tb_duplicate_name";
    /// A tensor's id is not the FNV-1a hash of its name (strict mode only).
    IdMismatch = "tb_id_mismatch";
    /// More tensors than the limit.
    TooManyTensors = "tb_too_many_tensors";
    /// Content TensorBuffers cannot hold (a dtype, a size or offset beyond u32, sparse data, …).
    Unrepresentable = "tb_unrepresentable";
    /// No tensor of that name.
    NotFound = "tb_not_found";
    /// An I/O error.
    Io = "tb_io";
    /// An error of the zTensor side of a conversion.
    ZTensor = "tb_ztensor";
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// An error: a kind, a message, and where known the tensor and the byte offset.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    tensor: Option<String>,
    offset: Option<u64>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
    refused: Option<ztensor_format::Refused>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            tensor: None,
            offset: None,
            source: None,
            refused: None,
        }
    }

    /// Says what content TensorBuffers could not hold.
    pub(crate) fn refusing(mut self, what: ztensor_format::Refused) -> Error {
        self.refused = Some(what);
        self
    }

    pub(crate) fn in_object(mut self, name: &str) -> Error {
        self.tensor = Some(name.to_owned());
        self
    }

    pub(crate) fn at(mut self, offset: u64) -> Error {
        self.offset = Some(offset);
        self
    }

    pub(crate) fn io(what: impl Into<String>, e: std::io::Error) -> Error {
        Error { source: Some(Box::new(e)), ..Error::new(ErrorKind::Io, what) }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The object (tensor) the fault belongs to, where there is one: the name every error type
    /// of the workspace gives it (`ztensor_format::Error::object`).
    pub fn object(&self) -> Option<&str> {
        self.tensor.as_deref()
    }

    /// The byte offset of the fault in the file, where known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The operating system's error behind an [`ErrorKind::Io`] error, where there is one.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        ztensor_io::Error::os_error_in(self.source.as_deref()?)
    }
}

impl From<ztensor_io::Error> for Error {
    fn from(e: ztensor_io::Error) -> Error {
        // A broken rule is the data's (`ZTensor`); anything else (a failed read, a missing
        // name, the work failing) is a failed request, like this crate's own I/O errors.
        let kind = match e.rule() {
            Some(ztensor_format::ErrorKind::Unrepresentable) => ErrorKind::Unrepresentable,
            Some(_) => ErrorKind::ZTensor,
            None => ErrorKind::Io,
        };
        Error { source: Some(Box::new(e)), ..Error::new(kind, "zTensor") }
    }
}

impl From<ztensor_format::Error> for Error {
    fn from(e: ztensor_format::Error) -> Error {
        Error::from(ztensor_io::Error::from(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = &self.tensor {
            write!(f, "tensor {t:?}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " at byte {o}")?;
        }
        write!(f, " [{}]", self.kind.id())
    }
}

/// The message already carries the inner error's text, so there is no `source()`: reporters that
/// print the chain would say it twice.
impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether the data said no, as opposed to a request that failed, and what content a target
/// could not hold: read through [`Verdict`](ztensor_format::Verdict) (`use
/// ztensor_format::Verdict`).
impl ztensor_format::Verdict for Error {
    fn is_rejection(&self) -> bool {
        self.kind != ErrorKind::Io
    }
    fn refused(&self) -> Option<ztensor_format::Refused> {
        self.refused
            .or_else(|| self.source.as_deref()?.downcast_ref::<ztensor_io::Error>()?.refused())
    }
    fn rule(&self) -> Option<ztensor_format::ErrorKind> {
        self.source.as_deref()?.downcast_ref::<ztensor_io::Error>()?.rule()
    }
    fn rule_id(&self) -> Option<&'static str> {
        (self.kind != ErrorKind::Io).then(|| self.kind.id())
    }
    fn failure(&self) -> ztensor_format::Failure {
        use ztensor_format::Failure;
        match self.kind {
            ErrorKind::Io => self.io_error().map_or(Failure::Other, Failure::io),
            _ => Failure::Format,
        }
    }
    fn object(&self) -> Option<&str> {
        Error::object(self)
    }
    fn offset(&self) -> Option<u64> {
        Error::offset(self)
    }
}
