//! Deterministic recipes for every fixture under `fixtures/v0.1`, `fixtures/v1.1` and
//! `fixtures/v1.2`: valid files, files in the styles the public reference writers produce, and
//! one or more reject files per rule of `spec/rules.md`.

mod build;
mod fuzzed;
mod rejects;
mod valid;

use anyhow::Result;
use ztensor_format::Version;

use build::Out;
pub use build::{Expect, Fixture};
use fuzzed::from_fuzzing;
use rejects::{rejects_v0_1, rejects_v1};
use valid::{valid_common, valid_v0_1, valid_v1, valid_v1_2_only};

/// Every fixture, in a fixed order.
///
/// # Errors
/// Only if a recipe itself is wrong (a writer refusing its input).
pub fn all() -> Result<Vec<Fixture>> {
    let mut out = Out { list: Vec::new() };
    for v in [Version::V0_1, Version::V1_1, Version::V1_2] {
        valid_common(&mut out, v)?;
    }
    valid_v1(&mut out, Version::V1_1)?;
    valid_v1(&mut out, Version::V1_2)?;
    valid_v1_2_only(&mut out)?;
    valid_v0_1(&mut out)?;
    rejects_v1(&mut out, Version::V1_2)?;
    rejects_v1(&mut out, Version::V1_1)?;
    rejects_v0_1(&mut out)?;
    from_fuzzing(&mut out)?;
    Ok(out.list)
}
