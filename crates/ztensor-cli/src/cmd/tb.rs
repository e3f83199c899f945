//! TensorBuffers files in every command.

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_io::FileSource;
use ztensor_tensorbuffers::{ReadOptions, TbFile};

/// Opens a TensorBuffers file: the outer error is I/O, the inner one a broken rule.
pub fn open(
    path: &Path,
    strict: bool,
) -> Result<Result<TbFile<FileSource>, ztensor_tensorbuffers::Error>> {
    let context = || format!("cannot open {}", path.display());
    let file = ztensor_io::open_input(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = FileSource::new(file).with_context(context)?;
    let options = if strict { ReadOptions::strict() } else { ReadOptions::default() };
    Ok(TbFile::new(source, &options))
}
