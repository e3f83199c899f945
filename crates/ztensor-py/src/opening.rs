//! Opening inputs through the format registry.

use std::path::Path;

use pyo3::prelude::*;

use crate::errors::{PyResultR, Raised, naming, raise_open};
use crate::memory::Opened;

/// What the registry opens, kept with where its bytes lie in memory and the file it came
/// from (named in every error raised about it).
pub(crate) fn opened(
    py: Python<'_>,
    result: Result<ztensor_registry::Opened, ztensor_registry::OpenError>,
    path: Option<&Path>,
) -> PyResultR<Opened> {
    let opened = result.map_err(|e| Raised(naming(py, raise_open(py, &e), path)))?;
    let base = opened.memory();
    Ok(Opened { source: opened.into_source(), base, path: path.map(Path::to_path_buf) })
}

pub(crate) fn open_options() -> ztensor_registry::OpenOptions {
    ztensor_registry::OpenOptions::default()
}

/// Opens the file at `path` through the format registry: mapped (zTensor, safetensors and
/// GGUF tensors then borrowed from the map) when `mmap`, else read with positional reads.
pub(crate) fn open_path(py: Python<'_>, path: &Path, mmap: bool) -> PyResultR<Opened> {
    let options = open_options();
    if mmap {
        // SAFETY: the file must not be truncated or changed while mapped. Files this package
        // writes are replaced by rename, never changed in place; for other writers the
        // documentation of `safe_open` states the rule (and `mmap=False` reads without a
        // map), as for any memory-mapped reader.
        opened(py, unsafe { ztensor_registry::open_mapped(path, &options) }, Some(path))
    } else {
        opened(py, ztensor_registry::open(path, &options), Some(path))
    }
}

/// Opens `data` through the format registry; every format's tensors are borrowed from it.
pub(crate) fn open_bytes(py: Python<'_>, data: Vec<u8>) -> PyResultR<Opened> {
    opened(py, ztensor_registry::open_bytes(data, &open_options()), None)
}
