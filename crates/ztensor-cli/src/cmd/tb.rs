//! TensorBuffers files in every command.

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_io::{FileSource, ReadAt};
use ztensor_tensorbuffers::{ReadOptions, TbReader};

/// Whether the file at `path` is TensorBuffers. By content first: a zTensor magic means zTensor,
/// `TBS1` at either end means TensorBuffers. Only when neither magic is there (a damaged file)
/// does a `.tb` extension decide, so that the report names TensorBuffers rules.
pub fn detect(path: &Path) -> std::io::Result<bool> {
    let file = ztensor_io::open_input(path).map_err(std::io::Error::other)?;
    let source = FileSource::new(file)?;
    let len = source.len();
    let mut head = vec![0u8; usize::try_from(len.min(4)).unwrap_or(0)];
    source.read_exact_at(0, &mut head)?;
    let mut tail = vec![0u8; head.len()];
    source.read_exact_at(len - tail.len() as u64, &mut tail)?;
    if head.starts_with(b"ZTEN") {
        return Ok(false);
    }
    if head == ztensor_tensorbuffers::MAGIC || tail == ztensor_tensorbuffers::MAGIC {
        return Ok(true);
    }
    Ok(path.extension().is_some_and(|e| e.eq_ignore_ascii_case("tb")))
}

/// Opens a TensorBuffers file: the outer error is I/O, the inner one a broken rule.
pub fn open(
    path: &Path,
    strict: bool,
) -> Result<Result<TbReader<FileSource>, ztensor_tensorbuffers::Error>> {
    let context = || format!("cannot open {}", path.display());
    let file = ztensor_io::open_input(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let source = FileSource::new(file).with_context(context)?;
    let options = if strict { ReadOptions::strict() } else { ReadOptions::default() };
    Ok(TbReader::new(source, &options))
}
