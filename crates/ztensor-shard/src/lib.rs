//! Reading sharded zTensor checkpoints.
//!
//! zTensor 0.1 and 1.x files have no shard table, so a checkpoint past one file is a directory
//! of zTensor files and an index in the Hugging Face shape ([`index`]), read as one tensor
//! source by [`ShardedZtensor`]. Planning and writing one (plan, run, finalize) is
//! `ztensor-shard-write`'s; this crate has no parallel write engine, so a reader pays for none.
//!
//! ```
//! use ztensor_shard::{INDEX_SUFFIX, is_index};
//!
//! // A checkpoint is known by its index's name, as the Hugging Face layout names its own.
//! assert_eq!(INDEX_SUFFIX, ".zt.index.json");
//! assert!(is_index(std::path::Path::new("out/model.zt.index.json")));
//! assert!(!is_index(std::path::Path::new("out/model-00001-of-00002.zt")));
//! ```

#![deny(missing_docs)]

pub mod chunks;
pub mod digest;
mod error;
pub mod index;
mod source;

pub use crate::chunks::{Chunk, Chunked, ChunkedTensor, Stitched};
pub use crate::digest::size_and_digest;
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::index::{INDEX_SUFFIX, ShardEntry, ShardIndex, is_index};
pub use crate::source::ShardedZtensor;
