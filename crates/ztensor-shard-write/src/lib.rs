//! Writing sharded zTensor checkpoints.
//!
//! A sharded checkpoint (a directory of zTensor files and the index that `ztensor-shard` reads)
//! is planned ([`plan()`]) into units, one per output shard, that run anywhere ([`run_unit`])
//! and are checked and indexed by [`finalize`]; [`write_all`] does all of it in one process
//! with byte-identical results, on the parallel engine of `ztensor-par`. Each writes into a
//! [`Destination`]: a local [`Directory`], or objects under a prefix in object storage
//! (`Prefix`, with the `remote` feature, over `ztensor-remote`): one set of functions, the
//! same bytes. [`Occupied`]
//! keeps an output directory from mixing checkpoints, [`Directory::all_or_nothing`] and
//! [`OutputGuard`] take back a failed write, and [`interrupt`] undoes the writes in progress
//! for a signal handler.
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

mod dest;
mod outdir;
mod plan;
#[cfg(feature = "remote")]
mod prefix;
mod receipt;
mod run;

pub use crate::dest::{Destination, Directory, Published, Seen, Shard};
pub use crate::outdir::{Occupied, OutputGuard, interrupt};
pub use crate::plan::{InputFile, PLAN_FORMAT, Plan, PlanOptions, Split, Unit, output_stem, plan};
#[cfg(feature = "remote")]
pub use crate::prefix::{Occupant, Prefix};
pub use crate::receipt::{RECEIPTS_DIR, Receipt};
pub use crate::run::{Outcome, finalize, publish_files, run_unit, write_all};
pub use ztensor_shard::{Error, ErrorKind, Result, size_and_digest};
