//! Opening inputs through the format registry.

use std::path::Path;

use pyo3::prelude::*;

use crate::errors::{PyResultR, Raised, naming, raise};
use crate::memory::{Identity, Opened};

/// What the registry opens, kept with where its bytes lie in memory and the file it came
/// from (named in every error raised about it).
pub(crate) fn opened(
    py: Python<'_>,
    result: Result<ztensor_registry::Opened, ztensor_registry::OpenError>,
    path: Option<&Path>,
) -> PyResultR<Opened> {
    let opened = result.map_err(|e| Raised(naming(py, raise(py, &e), path)))?;
    let base = opened.memory();
    Ok(Opened {
        source: opened.into_source(),
        base,
        path: path.map(Path::to_path_buf),
        identity: None,
    })
}

pub(crate) fn open_options() -> ztensor_registry::OpenOptions {
    ztensor_registry::OpenOptions::default()
}

/// Opens the file at `path` through the format registry: mapped (zTensor, safetensors and
/// GGUF tensors then borrowed from the map) when `mmap`, else read with positional reads; a
/// URL in object storage is read by ranged requests.
pub(crate) fn open_path(py: Python<'_>, path: &Path, mmap: bool) -> PyResultR<Opened> {
    let options = open_options();
    // A URL (s3://, gs://, az://, http(s)://): read by ranges, configured from the
    // environment; there is nothing to map.
    if let Some(url) = path.to_str().filter(|p| ztensor_remote::is_url(p)) {
        let remote = ztensor_remote::RemoteOptions::default();
        // The GIL released while the requests run.
        let result = py.detach(|| ztensor_registry::open_url(url, &options, &remote));
        return opened(py, result, Some(path));
    }
    if mmap {
        let before = std::fs::metadata(path).ok().map(|m| Identity::of(&m));
        // SAFETY: the file must not be truncated or changed while mapped. Files this package
        // writes are replaced by rename, never changed in place; for other writers the
        // documentation of `safe_open` states the rule (and `mmap=False` reads without a
        // map), as for any memory-mapped reader.
        let mapped = unsafe { ztensor_registry::open_mapped(path, &options) };
        let mut file = opened(py, mapped, Some(path))?;
        let after = std::fs::metadata(path).ok().map(|m| Identity::of(&m));
        // The identity a private map of the file is checked against: only when the file did
        // not change while it was opened.
        file.identity = before.filter(|_| before == after);
        Ok(file)
    } else {
        opened(py, ztensor_registry::open(path, &options), Some(path))
    }
}

/// Opens `data` through the format registry; every format's tensors are borrowed from it.
pub(crate) fn open_bytes(py: Python<'_>, data: Vec<u8>) -> PyResultR<Opened> {
    opened(py, ztensor_registry::open_bytes(data, &open_options()), None)
}
