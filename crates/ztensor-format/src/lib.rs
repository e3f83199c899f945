//! The zTensor container format, versions 0.1, 1.1 and 1.2, as pure data: storage and logical
//! types, the object model, CBOR manifests, container framing and validation. Bytes in, model
//! out, and back. This crate does no I/O; to read and write files, use `ztensor-io`, which is
//! built on it.
//!
//! Every version decodes into one model: a [`Manifest`] of [`Object`]s, each a shape, a
//! [`Format`] and named [`Component`]s (contiguous blobs). [`validate`] checks every rule of
//! the project's `spec/rules.md` and returns a [`ValidatedManifest`]; each broken rule is an
//! [`Error`] whose [`ErrorKind`] carries the rule's identifier.
//!
//! # Example
//!
//! Build a one-tensor v1.2 file in memory, then parse and validate it.
//!
//! ```
//! use ztensor_format::*;
//!
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! let mut alloc = OffsetAllocator::new();
//! let offset = alloc.reserve(data.len() as u64)?;
//!
//! let mut manifest = Manifest::new(Version::V1_2);
//! manifest.objects.push(
//!     Object::new("w", vec![2, 2], Format::Dense)
//!         .with_component("data", Component::new(DType::F32, offset, data.len() as u64)),
//! );
//! let cbor = manifest.encode()?;
//!
//! let mut file = MAGIC_V1.to_vec();
//! file.resize(offset as usize, 0);
//! file.extend_from_slice(&data);
//! file.extend_from_slice(&cbor);
//! file.extend_from_slice(&Container::V1.encode_trailer(cbor.len() as u64));
//!
//! let parsed = parse_file(&file, &Options::default())?;
//! assert_eq!(parsed.manifest(), &manifest);
//! assert_eq!(parsed.get("w").and_then(|o| o.decoded_len("data")), Some(16));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod attributes;
mod builder;
pub mod cbor;
pub mod data;
mod digest;
mod dtype;
mod error;
mod framing;
mod layout;
mod limits;
pub mod manifest;
mod names;
mod validate;
mod value;

/// The component roles of the standard formats, as the specs spell them.
pub mod role {
    /// The one component of a dense tensor (and the packed blob of a v0.1 sparse tensor).
    pub const DATA: &str = "data";
    /// The non-zero values of a sparse tensor (CSR and COO).
    pub const VALUES: &str = "values";
    /// The column index of each value of a CSR tensor.
    pub const INDICES: &str = "indices";
    /// Where each row's values start, for a CSR tensor (rows + 1 entries).
    pub const INDPTR: &str = "indptr";
    /// The coordinates of each value of a COO tensor (structure of arrays: one run per
    /// dimension).
    pub const COORDS: &str = "coords";
    /// The packed quantized weights of a quantized group.
    pub const PACKED_WEIGHT: &str = "packed_weight";
    /// The per-group scales of a quantized group.
    pub const SCALES: &str = "scales";
    /// The per-group zero points of a quantized group.
    pub const ZEROS: &str = "zeros";
}

pub use crate::attributes::{Attributes, ValueRef};
pub use crate::builder::ManifestBuilder;
pub use crate::digest::{Digest, DigestAlgorithm, to_hex};
pub use crate::dtype::{
    DType, LogicalType, MxType, StorageType, dense_len, torch_dtype, torch_name,
};
pub use crate::error::{Error, ErrorKind, Failure, Layer, Refused, Result, Verdict};
pub use crate::framing::{
    CUT_SHORT_HINT, Container, HEADER_LEN, MAGIC_V0_1, MAGIC_V1, ManifestLocation,
};
pub use crate::layout::{ALIGNMENT, OffsetAllocator, align_up};
pub use crate::limits::{Limits, Options};
pub use crate::manifest::{
    ByteOrder, Component, Components, ComponentsIntoIter, ComponentsIter, Encoding, Format,
    Manifest, Object, Packing, Version,
};
pub use crate::names::{NameIndex, Spelling};
pub use crate::validate::{
    ObjectRef, ValidatedManifest, check_object, check_padding, decoded_len, element_count,
    element_size, validate,
};
pub use crate::value::{CBOR_INT_MAX, CBOR_INT_MIN, Value, text_map};

/// Parses and validates a whole file held in memory: detects the container, locates and
/// decodes the manifest, and validates it. Error offsets are absolute file offsets.
///
/// # Errors
/// The first rule of `spec/rules.md` the file breaks.
pub fn parse_file(file: &[u8], options: &Options) -> Result<ValidatedManifest> {
    let container = Container::detect(file)?;
    let trailer = usize::try_from(container.trailer_len()).unwrap_or(usize::MAX);
    let tail = file.get(file.len().saturating_sub(trailer)..).unwrap_or_default();
    let location = container.locate_manifest(file.len() as u64, tail, &options.limits)?;
    // The location is inside `file`, as just checked.
    let start = usize::try_from(location.offset).unwrap_or(usize::MAX);
    let end = usize::try_from(location.offset + location.len).unwrap_or(usize::MAX);
    let bytes = file.get(start..end).unwrap_or_default();
    let manifest = Manifest::decode(container, bytes, &options.limits)
        .map_err(|e| e.shifted(location.offset))?;
    validate(manifest, location, options)
}
