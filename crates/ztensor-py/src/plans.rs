//! A sharded conversion planned by `ztensor plan`, run from Python: how many units a plan has,
//! one unit written (or found done and verified), the checkpoint finalized. The plan, its input
//! and its output may be local paths or URLs in object storage (credentials from the
//! environment, as the AWS, Google and Azure tools take them). These are what each task of
//! `python -m ztensor_rs.ray PLAN` runs, through the registry's one implementation the
//! command-line tool's `run` and `finalize` run too.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use ztensor_par::ParOptions;
use ztensor_registry::plans::{self, Storage};

use crate::errors::{naming, raise};

fn storage() -> Storage {
    Storage::new(ztensor_remote::RemoteOptions::default())
}

fn read(py: Python<'_>, plan: &std::path::Path) -> PyResult<ztensor_shard_write::Plan> {
    py.detach(|| plans::read_plan(plan, &storage()))
        .map_err(|e| naming(py, raise(py, &e), Some(plan)))
}

/// How many units the plan at `plan` (a path or a URL) has: unit numbers are `0..n`.
#[pyfunction]
pub(crate) fn plan_units(py: Python<'_>, plan: PathBuf) -> PyResult<usize> {
    Ok(read(py, &plan)?.units.len())
}

/// Writes unit `unit` of the plan at `plan` (its shard published whole, its receipt beside
/// it), or finds it done and verifies it, so that running a unit again (a scheduler's retry)
/// writes nothing twice. Compression runs on `threads` threads (0: one per core) with the GIL
/// released. Returns what the unit's receipt says: `unit`, `fresh` (written now, rather than
/// found done), `shard` (where it is), `objects`, `size` and `digest`.
#[pyfunction]
#[pyo3(signature = (plan, unit, threads = 0))]
pub(crate) fn run_unit<'py>(
    py: Python<'py>,
    plan: PathBuf,
    unit: usize,
    threads: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let made = read(py, &plan)?;
    let storage = storage();
    // The inputs in a bucket as planned, before the input is opened.
    py.detach(|| plans::check_remote_inputs(&made, &storage)).map_err(|e| raise(py, &e))?;
    let options = ztensor_registry::OpenOptions {
        carry_unknown_dtypes: made.options.carry_unknown_dtypes,
        ..Default::default()
    };
    let input = made.input.clone();
    let opened = py
        .detach(|| match input.to_str().filter(|p| ztensor_remote::is_url(p)) {
            Some(url) => ztensor_registry::open_url(url, &options, &storage.remote),
            None => ztensor_registry::open(&input, &options),
        })
        .map_err(|e| naming(py, raise(py, &e), Some(&made.input)))?;
    let par = ParOptions { threads, ..ParOptions::default() };
    let outcome = py
        .detach(|| plans::run_unit(&made, unit, opened.source(), (&par, &()), &storage))
        .map_err(|e| raise(py, &e))?;
    let receipt = outcome.receipt();
    let done = PyDict::new(py);
    done.set_item("unit", unit)?;
    done.set_item("fresh", matches!(outcome, ztensor_shard_write::Outcome::Written(_)))?;
    done.set_item("shard", made.output.join(&receipt.shard).to_string_lossy().into_owned())?;
    done.set_item("objects", receipt.objects)?;
    done.set_item("size", receipt.size)?;
    done.set_item("digest", receipt.digest.clone())?;
    Ok(done)
}

/// Checks every unit of the plan at `plan` (its receipt, and its shard's size; `deep`: its
/// digest recomputed) and writes the checkpoint's index. Returns where the index went.
#[pyfunction]
#[pyo3(signature = (plan, deep = false))]
pub(crate) fn finalize(py: Python<'_>, plan: PathBuf, deep: bool) -> PyResult<String> {
    let made = read(py, &plan)?;
    py.detach(|| plans::finalize(&made, deep, &storage())).map_err(|e| raise(py, &e))
}
