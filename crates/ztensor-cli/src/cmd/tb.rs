//! TensorBuffers files in every command.

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_io::FileSource;
use ztensor_tensorbuffers::TbFile;

/// Opens a TensorBuffers file (through the format registry): the outer error is I/O, the
/// inner one a broken rule.
pub fn open(
    path: &Path,
    strict: bool,
) -> Result<Result<TbFile<FileSource>, ztensor_tensorbuffers::Error>> {
    let options = ztensor_registry::OpenOptions {
        options: ztensor_cli::options(strict),
        ..Default::default()
    };
    let opened = match crate::told::told(path) {
        Ok(mut told) => told.open_tb(&options),
        Err(_) => ztensor_registry::open_tb(path, &options),
    };
    opened.with_context(|| format!("cannot open {}", path.display()))
}
