//! zTensor 2 ("Draft 4"), the generation the reference implementation publishes now: its
//! container (a magic at both ends, a 40-byte footer), its strictly deterministic CBOR manifest
//! of objects made of parts that point at blobs, and the shard table, validated rule by rule
//! as `spec/ztensor-2.md` states them ([`Rule`] names each).
//!
//! The bridge between generations: [`open`] says whether a file is a valid zTensor 2 file and
//! what its manifest holds; [`File`] reads and verifies its parts (in this file or, once
//! [`shards`] found them, in its shards) and is a [`TensorSource`](ztensor_io::TensorSource) of
//! its objects in the 1.2 object model, so every command reads it and converts it to 0.1/1.x;
//! [`write()`] and [`Zt2Sink`] write any source in canonical form, [`sharded`] as a root and
//! shards; [`content_digest`] gives any source's zTensor 2 identity.
//!
//! # Example
//!
//! ```
//! use ztensor_v2::{MAGIC, Rule, open};
//!
//! // A data shard: the magic, then a footer with no manifest.
//! let mut file = MAGIC.to_vec();
//! file.extend([0u8; 24]); // manifest offset, length and hash: none
//! file.extend(2u32.to_le_bytes()); // version
//! file.extend([0u8; 4]); // reserved
//! file.extend(MAGIC);
//! let shard = open(&&file[..], ztensor_v2::MAX_MANIFEST)?;
//! assert!(shard.manifest.is_none());
//!
//! file[0] = b'Z';
//! assert_eq!(open(&&file[..], 1 << 20).unwrap_err().broken(), Some(Rule::HeaderMagic));
//! # Ok::<(), ztensor_v2::Error>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod cbor;
mod container;
mod error;
mod file;
mod identity;
pub mod manifest;
pub mod model;
mod profiles;
pub mod seekable;
pub mod sharded;
pub mod shards;
mod source;
mod write;

pub use crate::container::{Container, FOOTER_LEN, Footer, MAGIC, MAX_MANIFEST, VERSION, open};
pub use crate::error::{Error, ErrorKind, Result, Rule};
pub use crate::file::{DigestCheck, File, Located, PartCheck};
pub use crate::identity::{CONTENT_TAG, IdAlgorithm, content_digest, manifest_digest};
pub use crate::write::{
    CANONICAL_ALIGNMENT, Output, Progress, Summary, WriteOptions, Zt2Sink, write,
};
