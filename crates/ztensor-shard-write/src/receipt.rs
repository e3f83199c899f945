//! Receipts: what each unit of a plan wrote, kept in the output directory until the index
//! is written.

use serde::{Deserialize, Serialize};

/// Where receipts go, inside the output directory.
pub const RECEIPTS_DIR: &str = ".ztensor-receipts";

/// The longest receipt read: a receipt is a few hundred bytes.
pub(crate) const MAX_RECEIPT_LEN: u64 = 1 << 20;

/// What one unit wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// The SHA-256 of the plan it ran (`sha256:…`).
    pub plan: String,
    /// The unit.
    pub unit: usize,
    /// The shard's file name.
    pub shard: String,
    /// The shard's length.
    pub size: u64,
    /// `sha256:` and the hex SHA-256 of the shard's bytes.
    pub digest: String,
    /// How many objects it holds.
    pub objects: usize,
}

/// The file name of unit `unit`'s receipt in [`RECEIPTS_DIR`].
pub(crate) fn receipt_name(unit: usize) -> String {
    format!("unit-{unit:05}.json")
}
