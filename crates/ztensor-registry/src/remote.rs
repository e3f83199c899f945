//! Opening objects in a bucket (`s3://`, `gs://`, `az://`, `http(s)://`) through the same
//! readers as files: one object by ranges, a zTensor 2 root with its shards beside it, a sharded
//! checkpoint's index with its shards.

use std::path::Path;

use ztensor_io::ReadAt;

#[cfg(feature = "sharded")]
use crate::alone::chunked_or_not;
use crate::alone::{not_opened, open_read_at};
use crate::detect::Detected;
use crate::opened::{OpenError, OpenOptions, Opened};
use crate::place::Place;
use crate::table::Kind;

/// Opens the object at `url` (`s3://`, `gs://`, `az://`, `http(s)://`) by ranged reads
/// ([`ztensor_remote::RemoteObject`]), told and opened as [`Detected::object`] tells and
/// opens one: every format read from bytes is read from a URL by its own reader; a sharded
/// checkpoint's index (told by its name) and a zTensor 2 root open their shards as the objects
/// beside them. Refused, as [`open`](crate::open) refuses a file, over the expansion budget.
///
/// # Errors
/// [`OpenError::Remote`] for a malformed URL or a failed request (a missing object, refused
/// credentials, an object that changed while read); as [`open`](crate::open) otherwise.
pub fn open_url(
    url: &str,
    options: &OpenOptions,
    remote: &ztensor_remote::RemoteOptions,
) -> Result<Opened, OpenError> {
    let location = ztensor_remote::Location::parse(url).map_err(OpenError::Remote)?;
    let object =
        ztensor_remote::RemoteObject::open(&location, remote).map_err(OpenError::Remote)?;
    let detected = Detected::object(object)?;
    let name = detected.path().to_path_buf();
    detected.open(options)?.within_budget(Some(&name), options)
}

/// [`Detected::open`] for an object: the same readers as for a file, over ranged reads.
pub(crate) fn open_object(
    mut detected: Detected,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let kind = detected.kind;
    let name = detected.path.clone();
    let Some(object) = detected.object.take() else {
        return Err(not_opened(kind, Some(&name)));
    };
    let object_len = object.len();
    let opened: Opened = match kind {
        #[cfg(feature = "sharded")]
        Kind::ZtIndex => {
            let ckpt = zt_index_beside(object, options)?;
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, r)| r.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..chunked_or_not(Kind::ZtIndex, ckpt)? }
        }
        #[cfg(feature = "safetensors")]
        Kind::SafetensorsIndex => {
            let bytes = remote_index_bytes(&object, &name)?;
            let ckpt =
                ztensor_foreign::sharded::ShardedSafetensors::open_index(&name, &bytes, |shard| {
                    ztensor_foreign::safetensors::SafetensorsFile::new(beside(&object, shard)?)
                })
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, f)| f.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..Opened::new(Kind::SafetensorsIndex, ckpt) }
        }
        #[cfg(feature = "v2")]
        Kind::Zt2 => {
            let file = zt2_beside(object, options)?;
            let files = file.shard_paths().map(|(_, p)| p.to_path_buf()).collect();
            let input_len = file.shards_len();
            Opened { input_len, files, ..Opened::new(Kind::Zt2, file) }
        }
        _ => return open_read_at(object, Some(&name), options),
    };
    Ok(Opened { input_len: opened.input_len.saturating_add(object_len), ..opened })
}

/// The zTensor 2 file that is the object `root`, its shards (when its table lists any) the
/// objects beside it at their positional names (`model-00001-of-00002.zt`), read by ranges.
/// A shard not there leaves its parts unreadable, saying where it was looked for, as a local
/// one does.
///
/// # Errors
/// [`OpenError::Zt2`]: the root or a shard breaks a rule.
#[cfg(feature = "v2")]
pub(crate) fn zt2_beside(
    root: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<Place>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let shown = std::path::PathBuf::from(root.location().to_string());
    let mut found = std::collections::BTreeMap::new();
    let mut file =
        ztensor_v2::File::open_sharded(Place::Object(root.clone()), max, &mut |name, _| {
            let at = ztensor_v2::shards::positional_path(&shown, name);
            let plain = at.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            Ok(match root.sibling(plain) {
                Ok(object) => {
                    found.insert(name.to_owned(), at.clone());
                    ztensor_v2::Located::At(Place::Object(object))
                }
                Err(e) => ztensor_v2::Located::Missing(format!("{e}")),
            })
        })
        .map_err(OpenError::Zt2)?;
    file.set_shard_paths(found);
    Ok(file.with_limits(options.options.limits.clone()))
}

/// The longest index of a sharded checkpoint read from a bucket (the readers' own limit).
#[cfg(any(feature = "sharded", feature = "safetensors"))]
const MAX_REMOTE_INDEX: u64 = 256 << 20;

/// The bytes of the index object `index` (named `name`), within the readers' limit.
#[cfg(any(feature = "sharded", feature = "safetensors"))]
fn remote_index_bytes(
    index: &ztensor_remote::RemoteObject,
    name: &Path,
) -> Result<Vec<u8>, OpenError> {
    let read_error = |e: std::io::Error| {
        OpenError::Zt(ztensor_io::Error::io("reading the index", Some(name.to_owned()), e))
    };
    if index.len() > MAX_REMOTE_INDEX {
        // As an index file that long is refused: malformed, a rejection.
        return Err(OpenError::Zt(ztensor_io::Error::from(ztensor_format::Error::new(
            ztensor_format::ErrorKind::ManifestTooLarge,
            format!(
                "{}: an index of {} bytes, over the {MAX_REMOTE_INDEX}-byte limit",
                name.display(),
                index.len()
            ),
        ))));
    }
    let mut bytes = vec![0u8; usize::try_from(index.len()).unwrap_or(0)];
    index.read_exact_at(0, &mut bytes).map_err(read_error)?;
    Ok(bytes)
}

/// The object beside `index` that `shard` (a path a checkpoint reader made beside the index's)
/// names.
#[cfg(any(feature = "sharded", feature = "safetensors"))]
fn beside(
    index: &ztensor_remote::RemoteObject,
    shard: &Path,
) -> ztensor_io::Result<ztensor_remote::RemoteObject> {
    let plain = shard.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    index
        .sibling(plain)
        .map_err(|e| ztensor_io::Error::io("opening a shard", Some(shard.to_owned()), e.into()))
}

/// The sharded zTensor checkpoint whose index is the object `index`, its shards the objects
/// beside it (read by ranges).
///
/// # Errors
/// The checkpoint reader's error; a failed request, as an I/O error naming the URL.
#[cfg(feature = "sharded")]
pub(crate) fn zt_index_beside(
    index: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_shard::ShardedZtensor<Place>, OpenError> {
    let name = std::path::PathBuf::from(index.location().to_string());
    let bytes = remote_index_bytes(&index, &name)?;
    let parsed = ztensor_shard::ShardIndex::from_json(&bytes, &name).map_err(OpenError::Shard)?;
    ztensor_shard::ShardedZtensor::open_with(&name, parsed, &options.options, |shard| {
        beside(&index, shard).map(Place::Object).map_err(ztensor_shard::Error::from)
    })
    .map_err(OpenError::Shard)
}
