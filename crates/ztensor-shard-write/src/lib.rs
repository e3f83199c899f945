//! Writing sharded zTensor checkpoints.
//!
//! A sharded checkpoint (a directory of zTensor files and the index that `ztensor-shard` reads)
//! is planned ([`plan()`]) into units, one per output shard, that run anywhere ([`run_unit`])
//! and are checked and indexed by [`finalize`]; [`write_all`] does all of it in one process
//! with byte-identical results, on the parallel engine of `ztensor-par`, and [`write_all_to`]
//! the same into objects under a prefix in object storage (a [`Destination`]). [`OutputGuard`] and
//! [`Occupied`] keep an output directory from mixing checkpoints and take back a failed write;
//! [`interrupt`] undoes the writes in progress for a signal handler.
//!
//! Errors are `ztensor-shard`'s, re-exported here, so one type covers reading and writing.
//!
//! ```
//! use ztensor_shard_write::{RECEIPTS_DIR, output_stem};
//!
//! // Shards are named after the input; a unit's receipt goes in a folder beside them.
//! assert_eq!(output_stem(std::path::Path::new("in/model.safetensors")), "model");
//! assert!(!RECEIPTS_DIR.is_empty());
//! ```

#![deny(missing_docs)]

mod outdir;
mod plan;
mod prefix;
mod receipt;
mod run;

pub use crate::outdir::{Occupied, OutputGuard, interrupt};
pub use crate::plan::{InputFile, PLAN_FORMAT, Plan, PlanOptions, Split, Unit, output_stem, plan};
pub use crate::prefix::{Destination, Published, Seen, finalize_to, run_unit_to, write_all_to};
pub use crate::receipt::{RECEIPTS_DIR, Receipt};
pub use crate::run::{Outcome, finalize, run_unit, write_all};
pub use ztensor_shard::{Error, ErrorKind, Result, size_and_digest};
