//! A sharded conversion planned for a scheduler, wherever its plan, input and output lie (a
//! local path or a URL in object storage): the plan read, one of its units written, the
//! checkpoint finalized. What `ztensor run` / `ztensor finalize` and Python's `run_unit` /
//! `finalize` (and so `python -m ztensor_rs.ray`) do, in one place: the output a directory or
//! a bucket prefix by the plan, inputs in a bucket checked against the sizes planned.

use std::path::Path;

use ztensor_io::TensorSource;
use ztensor_par::{ParOptions, Progress};
use ztensor_shard_write::{Directory, Error, ErrorKind, Outcome, Plan, Result};

/// How plans, inputs and outputs in object storage are reached (local paths need nothing).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Storage {
    /// The object-storage client's options.
    #[cfg(feature = "remote")]
    pub remote: ztensor_remote::RemoteOptions,
}

impl Storage {
    /// Reached with `remote`.
    #[cfg(feature = "remote")]
    pub fn new(remote: ztensor_remote::RemoteOptions) -> Storage {
        Storage { remote }
    }
}

/// The URL `path` is, when it is one (and this build reaches object storage).
fn url_of(path: &Path) -> Option<&str> {
    #[cfg(feature = "remote")]
    {
        path.to_str().filter(|s| ztensor_remote::is_url(s))
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = path;
        None
    }
}

#[cfg(feature = "remote")]
fn remote_error(e: ztensor_remote::Error) -> Error {
    Error::new(ErrorKind::Io, e.to_string())
}

/// The plan at `path`: a file, or an object (at most [`Plan::MAX_LEN`] bytes).
///
/// # Errors
/// The plan's: unreadable, malformed, of another format version; an object's request.
pub fn read_plan(path: &Path, storage: &Storage) -> Result<Plan> {
    let _ = storage;
    #[cfg(feature = "remote")]
    if let Some(url) = url_of(path) {
        use ztensor_io::ReadAt;
        let location = ztensor_remote::Location::parse(url).map_err(remote_error)?;
        let object =
            ztensor_remote::RemoteObject::open(&location, &storage.remote).map_err(remote_error)?;
        if object.len() > Plan::MAX_LEN {
            return Err(Error::new(
                ErrorKind::Malformed,
                format!(
                    "{url}: {} bytes, over the {} a plan may have",
                    object.len(),
                    Plan::MAX_LEN
                ),
            ));
        }
        let mut bytes = vec![0u8; usize::try_from(object.len()).unwrap_or(0)];
        object
            .read_exact_at(0, &mut bytes)
            .map_err(|e| Error::new(ErrorKind::Io, format!("{url}: {e}")))?;
        return Plan::from_json(&bytes, path);
    }
    Plan::read(path)
}

/// Refuses a plan whose inputs in object storage are not the size they were when it was made
/// (local files are checked so by the unit writer itself).
///
/// # Errors
/// [`ErrorKind::Stale`] naming the object; an object's request.
pub fn check_remote_inputs(plan: &Plan, storage: &Storage) -> Result<()> {
    let _ = storage;
    #[cfg(feature = "remote")]
    for f in &plan.inputs {
        use ztensor_io::ReadAt;
        let Some(url) = url_of(&f.path) else { continue };
        let location = ztensor_remote::Location::parse(url).map_err(remote_error)?;
        let object =
            ztensor_remote::RemoteObject::open(&location, &storage.remote).map_err(remote_error)?;
        if object.len() != f.size {
            return Err(Error::new(
                ErrorKind::Stale,
                format!(
                    "{url}: is {} bytes; the plan was made when it was {} (make a new plan)",
                    object.len(),
                    f.size
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses an output that names object storage in a build that does not reach it (rather
/// than taking `s3://…` for a local directory).
fn reachable(plan: &Plan) -> Result<()> {
    let named = plan.output.to_str().is_some_and(|s| s.contains("://"));
    if named && url_of(&plan.output).is_none() {
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "{}: object storage is not reached by this build (the registry's `remote` \
                 feature)",
                plan.output.display()
            ),
        ));
    }
    Ok(())
}

/// Runs `f` with the plan's output: a bucket prefix for a URL, else a local directory.
macro_rules! with_output {
    ($plan:expr, $storage:expr, |$to:ident| $body:expr) => {{
        reachable($plan)?;
        match url_of(&$plan.output) {
            #[cfg(feature = "remote")]
            Some(url) => {
                let $to = ztensor_shard_write::Prefix::new(url, $storage.remote.clone());
                $body
            }
            _ => {
                let $to = Directory::new(&$plan.output);
                $body
            }
        }
    }};
}

/// Writes unit `unit` of `plan` from `source` (its input, opened as the plan says: carrying
/// unknown dtypes when it was made so), or finds it done and verifies it: its shard published
/// whole and its receipt beside it, so that running a unit again (a scheduler's retry) writes
/// nothing twice.
///
/// # Errors
/// [`check_remote_inputs`]'s; the unit writer's (no such unit, an input changed since the
/// plan, an output that is not the plan's, a write that failed).
pub fn run_unit(
    plan: &Plan,
    unit: usize,
    source: &dyn TensorSource,
    (par, progress): (&ParOptions, &dyn Progress),
    storage: &Storage,
) -> Result<Outcome> {
    check_remote_inputs(plan, storage)?;
    with_output!(plan, storage, |to| ztensor_shard_write::run_unit(
        plan, unit, source, par, progress, &to
    ))
}

/// Checks every unit's receipt and shard (`deep`: each shard's digest recomputed) and writes
/// the index; returns where it went.
///
/// # Errors
/// Units missing or not the plan's; the index's write.
pub fn finalize(plan: &Plan, deep: bool, storage: &Storage) -> Result<String> {
    with_output!(plan, storage, |to| ztensor_shard_write::finalize(plan, deep, &to))
}
