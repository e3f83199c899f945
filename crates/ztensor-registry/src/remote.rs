//! Opening objects in a bucket (`s3://`, `gs://`, `az://`, `http(s)://`) through the same
//! readers as files: one object by ranges, a zTensor 2 root with its shards beside it, a sharded
//! checkpoint's index with its shards.

use std::path::Path;

use ztensor_io::ReadAt;

use crate::detect::detect_source;
#[cfg(feature = "sharded")]
use crate::open::chunked_or_not;
use crate::open::open_read_at;
use crate::opened::{OpenError, OpenOptions, Opened};
use crate::table::Kind;

/// Opens the object at `url` (`s3://`, `gs://`, `az://`, `http(s)://`) by ranged reads
/// ([`ztensor_remote::RemoteObject`]): the format's own reader, the one [`open_bytes`](crate::open_bytes) uses,
/// reads it, so every format read from bytes is read from a URL; a sharded checkpoint's index
/// (told by its name) opens its shards as the objects beside it. Refused, as [`open`](crate::open) refuses a
/// file, over the expansion budget.
///
/// # Errors
/// [`OpenError::Remote`] for a malformed URL or a failed request (a missing object, refused
/// credentials, an object that changed while read); [`ErrorKind::NeedsFiles`](crate::ErrorKind::NeedsFiles) for a zTensor 2
/// root with shards; as [`open`](crate::open) otherwise.
#[cfg(feature = "remote")]
pub fn open_url(
    url: &str,
    options: &OpenOptions,
    remote: &ztensor_remote::RemoteOptions,
) -> Result<Opened, OpenError> {
    let location = ztensor_remote::Location::parse(url).map_err(OpenError::Remote)?;
    let object =
        ztensor_remote::RemoteObject::open(&location, remote).map_err(OpenError::Remote)?;
    open_remote(object, options)
}

/// As [`open_url`](crate::open_url), for an object already opened (a caller that keeps a clone sees its
/// requests and bytes with [`RemoteObject::transfer`](ztensor_remote::RemoteObject::transfer)).
///
/// # Errors
/// As [`open_url`](crate::open_url).
#[cfg(feature = "remote")]
pub fn open_remote(
    object: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<Opened, OpenError> {
    let name = std::path::PathBuf::from(object.location().to_string());
    if let Some(opened) = open_remote_index(&object, &name, options)? {
        return opened.within_budget(Some(&name), options);
    }
    #[cfg(feature = "v2")]
    if detect_source(&object, Some(&name)).ok() == Some(Kind::Zt2) {
        let root_len = object.len();
        let file = open_remote_zt2(object, options)?;
        let files = file.shard_paths().map(|(_, p)| p.to_path_buf()).collect();
        let input_len = root_len.saturating_add(file.shards_len());
        let opened = Opened { input_len, files, ..Opened::new(Kind::Zt2, file) };
        return opened.within_budget(Some(&name), options);
    }
    open_read_at(object, Some(&name), options)?.within_budget(Some(&name), options)
}

/// The zTensor 2 file that is the object `root`, its shards (when its table lists any) the
/// objects beside it at their positional names (`model-00001-of-00002.zt`), read by ranges; as
/// its own reader, for what needs more than a tensor source (checking every shard's digest).
/// A shard not there leaves its parts unreadable, saying where it was looked for, as a local
/// one does.
///
/// # Errors
/// [`OpenError::Zt2`]: the root or a shard breaks a rule.
#[cfg(all(feature = "remote", feature = "v2"))]
pub fn open_remote_zt2(
    root: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<ztensor_remote::RemoteObject>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let shown = std::path::PathBuf::from(root.location().to_string());
    let mut found = std::collections::BTreeMap::new();
    let mut file = ztensor_v2::File::open_sharded(root.clone(), max, &mut |name, _| {
        let at = ztensor_v2::shards::positional_path(&shown, name);
        let plain = at.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        Ok(match root.sibling(plain) {
            Ok(object) => {
                found.insert(name.to_owned(), at.clone());
                ztensor_v2::Located::At(object)
            }
            Err(e) => ztensor_v2::Located::Missing(format!("{e}")),
        })
    })
    .map_err(OpenError::Zt2)?;
    file.set_shard_paths(found);
    Ok(file.with_limits(options.options.limits.clone()))
}

/// The longest index of a sharded checkpoint read from a bucket (the readers' own limit).
#[cfg(feature = "remote")]
const MAX_REMOTE_INDEX: u64 = 256 << 20;

/// The bytes of the index object `index` (named `name`), within the readers' limit.
#[cfg(feature = "remote")]
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
#[cfg(feature = "remote")]
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
/// beside it (read by ranges), as its own reader: for what needs more than a tensor source
/// (checking every shard's digest).
///
/// # Errors
/// The checkpoint reader's error; a failed request, as an I/O error naming the URL.
#[cfg(all(feature = "remote", feature = "sharded"))]
pub fn open_remote_zt_index(
    index: ztensor_remote::RemoteObject,
    options: &OpenOptions,
) -> Result<ztensor_shard::ShardedZtensor<ztensor_remote::RemoteObject>, OpenError> {
    let name = std::path::PathBuf::from(index.location().to_string());
    let bytes = remote_index_bytes(&index, &name)?;
    let parsed = ztensor_shard::ShardIndex::from_json(&bytes, &name).map_err(OpenError::Shard)?;
    ztensor_shard::ShardedZtensor::open_with(&name, parsed, &options.options, |shard| {
        beside(&index, shard).map_err(ztensor_shard::Error::from)
    })
    .map_err(OpenError::Shard)
}

/// A sharded checkpoint whose index is the object `index` (told by its name, as a file's is),
/// its shards the objects beside it, read by ranges as any object is; `None` for an object
/// that is no index.
#[cfg(feature = "remote")]
fn open_remote_index(
    index: &ztensor_remote::RemoteObject,
    name: &Path,
    options: &OpenOptions,
) -> Result<Option<Opened>, OpenError> {
    let opened: Opened = match crate::detect::by_name(name) {
        #[cfg(feature = "sharded")]
        Some(Kind::ZtIndex) => {
            let ckpt = open_remote_zt_index(index.clone(), options)?;
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, r)| r.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..chunked_or_not(Kind::ZtIndex, ckpt)? }
        }
        #[cfg(feature = "safetensors")]
        Some(Kind::SafetensorsIndex) => {
            let bytes = remote_index_bytes(index, name)?;
            let ckpt =
                ztensor_foreign::sharded::ShardedSafetensors::open_index(name, &bytes, |shard| {
                    ztensor_foreign::safetensors::SafetensorsFile::new(beside(index, shard)?)
                })
                .map_err(OpenError::Foreign)?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
            let shards =
                ckpt.shards().iter().map(|(_, f)| f.source().len()).fold(0, u64::saturating_add);
            Opened { input_len: shards, files, ..Opened::new(Kind::SafetensorsIndex, ckpt) }
        }
        _ => return Ok(None),
    };
    Ok(Some(Opened { input_len: opened.input_len.saturating_add(index.len()), ..opened }))
}
