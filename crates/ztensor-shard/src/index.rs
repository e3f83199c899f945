//! The index of a sharded zTensor checkpoint, `NAME.zt.index.json`: the Hugging Face index
//! shape (`metadata.total_size`, `weight_map` of tensor name → shard file) plus `shards`, each
//! shard's size in bytes and the SHA-256 of its bytes, so a reader can tell a shard that is not
//! the one written.
//!
//! ```json
//! {
//!   "metadata": { "total_size": 4096 },
//!   "shards": { "model-00001-of-00002.zt": { "size": 2240, "digest": "sha256:…" }, … },
//!   "weight_map": { "layer.0.weight": "model-00001-of-00002.zt", … }
//! }
//! ```
//!
//! Written deterministically: keys in this order, `shards` and `weight_map` sorted by name,
//! two-space indentation, a final newline.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::Path;

use serde::Deserialize;
use ztensor_io::weight_map::{WeightMap, is_plain_name};

use crate::error::{Error, ErrorKind, Result};

/// What an index file's name ends with.
pub const INDEX_SUFFIX: &str = ".zt.index.json";

/// The largest index read (real ones are well under a megabyte).
pub const MAX_INDEX_LEN: u64 = 256 << 20;

/// Whether `path` names a sharded zTensor checkpoint's index (`*.zt.index.json`).
pub fn is_index(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(INDEX_SUFFIX))
}

/// One shard as the index records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardEntry {
    /// Its length in bytes.
    pub size: u64,
    /// `sha256:` and the lowercase hex SHA-256 of its bytes.
    pub digest: String,
}

/// A sharded checkpoint's index.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardIndex {
    /// The decoded bytes of every tensor, in all (`metadata.total_size`).
    pub total_size: u64,
    /// Every shard by file name.
    pub shards: BTreeMap<String, ShardEntry>,
    /// Every object's shard, by object name.
    pub weight_map: BTreeMap<String, String>,
    /// For a Distributed Checkpoint saved as zTensor (`ztensor_rs.torch.dcp.ZTensorWriter`,
    /// its `"dcp"` section): the whole tensors its objects are chunks of.
    pub chunked: Option<crate::chunks::Chunked>,
}

#[derive(Deserialize)]
struct Raw {
    metadata: RawMetadata,
    shards: BTreeMap<String, RawShard>,
    weight_map: WeightMap,
    #[serde(default)]
    dcp: Option<crate::chunks::RawDcp>,
}

#[derive(Deserialize)]
struct RawMetadata {
    total_size: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShard {
    size: u64,
    digest: String,
}

impl ShardIndex {
    /// Reads and checks the index at `path`: shard names are plain file names beside it, no
    /// tensor is listed twice, every tensor's shard is in `shards` and every shard holds a
    /// tensor, digests are `sha256:` and 64 lowercase hex digits.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for anything else, and I/O errors.
    pub fn read(path: &Path) -> Result<ShardIndex> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        let len = std::fs::metadata(path).map_err(|e| Error::io("cannot open", path, &e))?.len();
        if len > MAX_INDEX_LEN {
            return Err(malformed(format!(
                "index of {len} bytes, over the {MAX_INDEX_LEN}-byte limit"
            )));
        }
        let bytes = ztensor_io::read_input(path, MAX_INDEX_LEN)?;
        ShardIndex::from_json(&bytes, path)
    }

    /// The index in `bytes` (read from `path`, which errors name: a file, or an object's URL),
    /// checked as [`ShardIndex::read`] checks one.
    ///
    /// # Errors
    /// As [`ShardIndex::read`].
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<ShardIndex> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(malformed(format!(
                "index of {} bytes, over the {MAX_INDEX_LEN}-byte limit",
                bytes.len()
            )));
        }
        let raw: Raw =
            serde_json::from_slice(bytes).map_err(|e| malformed(format!("index: {e}")))?;
        let mut shards = BTreeMap::new();
        for (name, s) in raw.shards {
            if !is_plain_name(&name) {
                return Err(malformed(format!(
                    "shard {name:?} is not a plain file name beside the index"
                )));
            }
            if !is_sha256(&s.digest) {
                return Err(malformed(format!(
                    "shard {name:?}: digest {:?} is not sha256:<64 hex digits>",
                    s.digest
                )));
            }
            shards.insert(name, ShardEntry { size: s.size, digest: s.digest });
        }
        let mut weight_map = BTreeMap::new();
        for (tensor, shard) in raw.weight_map.0 {
            if !shards.contains_key(&shard) {
                return Err(malformed(format!(
                    "tensor {tensor:?} is in shard {shard:?}, which `shards` does not list"
                )));
            }
            if weight_map.insert(tensor.clone(), shard).is_some() {
                return Err(Error::new(
                    ErrorKind::IndexMismatch,
                    format!("tensor {tensor:?} is listed twice"),
                )
                .with_path(path));
            }
        }
        let used: HashSet<&String> = weight_map.values().collect();
        if let Some(empty) = shards.keys().find(|s| !used.contains(s)) {
            return Err(malformed(format!("shard {empty:?} holds no tensor the index lists")));
        }
        let chunked = match raw.dcp {
            Some(dcp) => Some(dcp.checked(&weight_map).map_err(|e| e.with_path(path))?),
            None => None,
        };
        Ok(ShardIndex { total_size: raw.metadata.total_size, shards, weight_map, chunked })
    }

    /// The index as this crate writes it (see the module documentation).
    pub fn to_json(&self) -> String {
        let shards = self.shards.iter().map(|(n, s)| (n.as_str(), s.size, s.digest.as_str()));
        let weight_map = self.weight_map.iter().map(|(t, s)| (t.as_str(), s.as_str()));
        let mut text = Vec::new();
        // Writing to memory fails only where serialization does: never for these types.
        let _ = write_json(&mut text, self.total_size, shards, weight_map);
        String::from_utf8(text).unwrap_or_default()
    }
}

/// Writes an index (see the module documentation) to `out` as it is serialized: `shards`
/// (name, size, digest) and `weight_map` (tensor, shard) each given sorted by name, one entry
/// per name. What [`ShardIndex::to_json`] gives for the same entries, byte for byte, without a
/// tree of them (a checkpoint may have a million tensors).
///
/// # Errors
/// Those of `out`.
pub fn write_json<'a>(
    out: &mut dyn std::io::Write,
    total_size: u64,
    shards: impl Iterator<Item = (&'a str, u64, &'a str)> + Clone,
    weight_map: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> std::io::Result<()> {
    use serde::ser::{SerializeMap, Serializer};

    /// A map serialized from its entries as they come.
    struct Entries<I>(I);
    impl<K: serde::Serialize, V: serde::Serialize, I: Iterator<Item = (K, V)> + Clone>
        serde::Serialize for Entries<I>
    {
        fn serialize<S: Serializer>(&self, to: S) -> std::result::Result<S::Ok, S::Error> {
            let mut map = to.serialize_map(Some(self.0.clone().count()))?;
            for (k, v) in self.0.clone() {
                map.serialize_entry(&k, &v)?;
            }
            map.end()
        }
    }
    #[derive(serde::Serialize)]
    struct Shard<'a> {
        size: u64,
        digest: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Metadata {
        total_size: u64,
    }
    #[derive(serde::Serialize)]
    #[serde(bound(serialize = "Entries<S>: serde::Serialize, Entries<W>: serde::Serialize"))]
    struct Index<S, W> {
        metadata: Metadata,
        shards: Entries<S>,
        weight_map: Entries<W>,
    }
    let index = Index {
        metadata: Metadata { total_size },
        shards: Entries(shards.map(|(name, size, digest)| (name, Shard { size, digest }))),
        weight_map: Entries(weight_map),
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    serde_json::to_writer_pretty(&mut out, &index).map_err(std::io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Whether `digest` is `sha256:` and 64 lowercase hex digits.
pub fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
