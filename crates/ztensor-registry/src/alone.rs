//! One source of bytes opened by the reader of its kind: bytes in memory and single remote
//! objects (a file is opened through [`Detected`](crate::Detected), which adds what lies beside
//! it), and the refusal for a kind no arm opens.

use std::path::Path;

use ztensor_io::{ReadAt, Reader};

use crate::detect::{Error, ErrorKind, detect_source, enabled};
use crate::opened::{OpenError, OpenOptions, Opened};
use crate::table::Kind;

/// A sharded zTensor checkpoint as its objects, or, for a Distributed Checkpoint saved as
/// zTensor (its index has a `"dcp"` section), as the whole tensors its objects are chunks of.
#[cfg(feature = "sharded")]
pub(crate) fn chunked_or_not<S: ReadAt + Send + Sync + 'static>(
    kind: Kind,
    ckpt: ztensor_shard::ShardedZtensor<S>,
) -> Result<Opened, OpenError> {
    match ckpt.index().chunked.clone() {
        Some(layout) => Ok(Opened::new(
            kind,
            ztensor_shard::Stitched::new(ckpt, &layout).map_err(OpenError::Shard)?,
        )),
        None => Ok(Opened::new(kind, ckpt)),
    }
}

/// Why `kind` has no arm where it was to be opened: this build lacks its feature, or (for
/// bytes) it is a format of several files. An error, never a panic: a kind added to [`Kind`]
/// without an arm is refused, not a crash.
pub(crate) fn not_opened(kind: Kind, name: Option<&Path>) -> OpenError {
    match enabled(kind, name) {
        Err(e) => OpenError::Detect(e),
        Ok(kind) => {
            let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
            OpenError::Detect(Error::new(
                ErrorKind::NeedsFiles,
                format!(
                    "{shown}: this is {kind}, which is read from its files, not from bytes \
                     or a single remote object"
                ),
            ))
        }
    }
}

#[cfg(feature = "tensorbuffers")]
pub(crate) fn tb_reader<S: ReadAt>(
    source: S,
    strict: bool,
) -> Result<ztensor_tensorbuffers::TbFile<S>, OpenError> {
    let options = if strict {
        ztensor_tensorbuffers::ReadOptions::strict()
    } else {
        ztensor_tensorbuffers::ReadOptions::default()
    };
    ztensor_tensorbuffers::TbFile::new(source, &options).map_err(OpenError::TensorBuffers)
}

/// Opens `source`, the bytes of one file (named `name` in messages, when it has one), with the
/// reader of the format [`detect_source`] finds. The one opening path for bytes in memory and
/// objects read by ranges; the expansion budget is left to the caller.
pub(crate) fn open_read_at<S: ReadAt + Send + Sync + 'static>(
    source: S,
    name: Option<&Path>,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let kind = detect_source(&source, name)?;
    let input_len = source.len();
    let limit = options.options.limits.whole_decode_limit();
    // What a single array or tensor is called: the file's stem, or the default for bytes.
    let stem = name.and_then(Path::file_stem).and_then(|s| s.to_str());
    let opened = match kind {
        Kind::Zt => {
            Opened::new(kind, Reader::new(source, &options.options).map_err(OpenError::Zt)?)
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => Opened::new(
            kind,
            ztensor_foreign::safetensors::SafetensorsFile::new(source)
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes),
        ),
        #[cfg(feature = "tensorbuffers")]
        Kind::TensorBuffers => Opened::new(kind, tb_reader(source, options.options.strict)?),
        #[cfg(feature = "numpy")]
        Kind::Npy => Opened::new(
            kind,
            ztensor_foreign::npy_in::NpyFile::new(source, stem.unwrap_or("array"))
                .map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "numpy")]
        Kind::Npz => Opened::new(
            kind,
            ztensor_foreign::npz::NpzFile::new(source, limit).map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "gguf")]
        Kind::Gguf => Opened::new(
            kind,
            ztensor_foreign::gguf::GgufFile::new(source)
                .map_err(OpenError::Foreign)?
                .with_blocks(options.gguf_blocks()),
        ),
        #[cfg(feature = "torch")]
        Kind::Torch => Opened::new(
            kind,
            ztensor_foreign::torch::TorchFile::new(source, stem.unwrap_or("tensor"), limit)
                .map_err(OpenError::Foreign)?,
        ),
        #[cfg(feature = "v2")]
        Kind::Zt2 => Opened::new(kind, zt2_whole(source, name, options)?),
        #[allow(unreachable_patterns)]
        other => return Err(not_opened(other, name)),
    };
    Ok(Opened { input_len, ..opened })
}

/// A zTensor 2 file held whole in `source` (bytes, or one remote object): refused when it is a
/// root whose parts lie in shards, which have no directory to be found in.
#[cfg(feature = "v2")]
fn zt2_whole<S: ReadAt>(
    source: S,
    name: Option<&Path>,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<S>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let file = ztensor_v2::File::open(source, max)
        .map_err(OpenError::Zt2)?
        .with_limits(options.options.limits.clone());
    let shards: Vec<&str> =
        file.manifest().map(|m| m.shards.keys().map(String::as_str).collect()).unwrap_or_default();
    if let Some(first) = shards.first() {
        let shown = name.map_or_else(|| "the bytes".to_owned(), |p| p.display().to_string());
        let opened_as = if name.is_some() { "an object read alone" } else { "bytes" };
        return Err(OpenError::Detect(Error::new(
            ErrorKind::NeedsFiles,
            format!(
                "{shown}: this is a zTensor 2 file whose parts lie in {} shard file(s) \
                 beside it ({first:?}{}), which {opened_as} have no directory to find; open it \
                 by its path",
                shards.len(),
                if shards.len() > 1 { ", ..." } else { "" }
            ),
        )));
    }
    Ok(file)
}
