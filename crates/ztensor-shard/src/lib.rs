//! Sharded zTensor checkpoints.
//!
//! zTensor 0.1 and 1.x files have no shard table, so a checkpoint past one file is a directory
//! of zTensor files and an index in the Hugging Face shape ([`index`]), read as one tensor
//! source by [`ShardedZtensor`]. Writing one is planned ([`plan()`]) into units, one per output
//! shard, that run anywhere ([`run_unit`]) and are checked and indexed by [`finalize`];
//! [`write_all`] does all of it in one process with byte-identical results.
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

mod error;
pub mod index;
mod outdir;
mod plan;
mod source;

pub use crate::error::{Error, ErrorKind, Result};
pub use crate::index::{INDEX_SUFFIX, ShardEntry, ShardIndex, is_index};
pub use crate::outdir::{Occupied, OutputGuard, interrupt};
pub use crate::plan::{
    InputFile, Outcome, PLAN_FORMAT, Plan, PlanOptions, RECEIPTS_DIR, Receipt, Split, Unit,
    finalize, output_stem, plan, run_unit, size_and_digest, write_all,
};
pub use crate::source::ShardedZtensor;
