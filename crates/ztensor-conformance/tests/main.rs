//! Integration tests of ztensor-conformance.

/// Live heap bytes counted, so the fuzz bodies' amplification oracle runs here as in the fuzz
/// targets.
#[global_allocator]
static HEAP: ztensor_conformance::heap::Counting = ztensor_conformance::heap::Counting;

mod corpus;
mod recipes;
mod remote;

/// Our own implementation against every fixture of the index.
mod fixtures;

/// The runner's grading, on fake implementations that are wrong in known ways.
mod runner;

/// Committed fuzzer findings (`fuzz/regressions/<target>/*`), replayed through the target's body.
mod fuzz_regressions;

/// Properties over generated models (`ztensor_conformance::model`, the generator the
/// `roundtrip` fuzz target also uses).
mod properties;

/// The frozen files of other producers and the writer check.
mod producers_and_writers;

/// Differential fuzzing (`ztensor-conformance fuzz`): an implementation with a planted bug of
/// each class (`tests/planted/planted.py`, a wrapper over our own dump) is found out and its
/// cases reduced; our own implementation against itself gives nothing; usage errors are told
/// at once.
mod difffuzz;

/// What another user, a hostile index or a hostile implementation can do to the suite.
mod hostile;

/// The command line: every command has help of its own, usage errors name the argument and
/// exit with status 2, and the binary carries its corpus wherever it is installed.
mod command_line;
