//! The subcommands.

pub mod convert;
pub mod edit;
pub mod info;
pub mod look;
pub mod repack;
pub mod tb;
pub mod text;

use std::path::Path;

use anyhow::{Context, Result};
use ztensor_io::{FileSource, ReadAt};

/// What kind of file an input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zt,
    TensorBuffers,
    Safetensors,
    ShardIndex,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Zt => "a zTensor file",
            Kind::TensorBuffers => "a TensorBuffers file",
            Kind::Safetensors => "a safetensors file",
            Kind::ShardIndex => "a sharded safetensors checkpoint",
        })
    }
}

/// Whether `a` and `b` name the same existing file, whatever the spelling or link.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}

/// Refuses to write `output` over `input` (a request that would replace the user's file with
/// something else: another format, an extracted array).
pub fn not_over(input: &Path, output: &Path, what: &str) -> Result<()> {
    if same_file(input, output) {
        anyhow::bail!(
            "{} is also the input {}; writing {what} there would replace it (choose another output)",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

/// Recognises a file by content: a zTensor magic, `TBS1` at either end, a safetensors header;
/// a `*.safetensors.index.json` name means a sharded checkpoint. A file recognised by none
/// (a damaged one) is judged by its extension, so errors name the rules of the format the user
/// meant, and is zTensor otherwise.
pub fn detect(path: &Path) -> Result<Kind> {
    if ztensor_foreign::sharded::is_index(path) {
        return Ok(Kind::ShardIndex);
    }
    let context = || format!("cannot open {}", path.display());
    let file = std::fs::File::open(path).with_context(context)?;
    let source = FileSource::new(file).with_context(context)?;
    let mut head = vec![0u8; usize::try_from(source.len().min(9)).unwrap_or(0)];
    source.read_exact_at(0, &mut head).with_context(context)?;
    if head.starts_with(b"ZTEN") {
        return Ok(Kind::Zt);
    }
    if tb::detect(path).with_context(context)? {
        return Ok(Kind::TensorBuffers);
    }
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if ztensor_foreign::safetensors::looks_like_safetensors(&head, source.len())
        || extension.as_deref() == Some("safetensors")
    {
        return Ok(Kind::Safetensors);
    }
    Ok(Kind::Zt)
}
