//! Differential fuzzing of any implementation that speaks the reading protocol
//! (`ztensor-conformance fuzz --impl CMD`).
//!
//! Each case is a file made from a seed: a model from the generator behind the property tests
//! ([`crate::model::Model`]), written by this project's writer, then changed by a list of
//! [`Mutation`]s, first on the manifest as a CBOR value tree (re-encoded inside valid
//! framing), then on the bytes. The implementation's verdict is compared with this project's
//! strict and lenient readers and any divergence classified ([`Class`]). A divergent case is
//! reduced (mutations dropped, objects and shapes made smaller, byte changes undone) while it
//! keeps its class and first difference, then reported with its recipe, from which it is made
//! again byte for byte.
//!
//! The parts: [`Rng`] (`rng`), the changes (`mutate`), the cases as data (`recipe`), our
//! verdicts (`ours`), how a verdict is told from ours (`classify`), asking an implementation
//! (`judge`), reducing a case (`minimize`), the run (`config`, `run`), its report (`report`), and the
//! command's options (`args`).

mod args;
mod classify;
mod config;
mod hex;
mod judge;
mod minimize;
mod mutate;
mod ours;
mod recipe;
mod report;
mod rng;
mod run;
#[cfg(test)]
mod tests;
mod verdicts;
pub mod zt2;

pub use args::{FuzzArgs, command_line, fuzz};
pub use classify::{Class, Divergence, classify};
pub use config::{Budget, Config};
pub use judge::{Judged, writer_recipe};
pub use mutate::{Mutation, Region};
pub use ours::{InProcess, Ours, OursInProcess, ours, ours_in_process};
pub use recipe::{Recipe, VERSIONS};
pub use report::{Finding, Report, rate, table, to_json, to_junit};
pub use rng::Rng;
pub use run::{run, run_in_process};
pub use zt2::Zt2;
