//! The content digest (`spec/ztensor-2.md` §5.4): the identity of a model, whatever its
//! placement, sharding, encodings or blob sharing, and whatever format holds it.
//!
//! A zTensor 2 file's identity comes from its manifest, the part digests taken as they are
//! written. Any other input's identity is the one its canonical zTensor 2 conversion has (each
//! part's `xxh3` computed on its decoded bytes as they stream), so a zTensor 1.x file, a
//! safetensors file and their conversions to zTensor 2 show the same identity.

use sha2::Digest as _;
use ztensor_io::TensorSource;

use crate::cbor::{Value, encode};
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::write::{WriteOptions, bool_piece, listed_as_read, plan};

/// The version tag the content value starts with.
pub const CONTENT_TAG: &str = "zt.content/1";

/// The hash a content digest is rendered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IdAlgorithm {
    /// SHA-256 (what the reference `zt id` prints).
    #[default]
    Sha256,
    /// XXH3-64.
    Xxh3,
}

impl IdAlgorithm {
    /// The algorithm named `name` (`sha256`, `xxh3`).
    pub fn from_name(name: &str) -> Option<IdAlgorithm> {
        match name {
            "sha256" => Some(IdAlgorithm::Sha256),
            "xxh3" => Some(IdAlgorithm::Xxh3),
            _ => None,
        }
    }

    /// The digest of what `feed` hands its argument, piece by piece.
    fn render(self, feed: impl FnOnce(&mut dyn FnMut(&[u8]))) -> String {
        match self {
            IdAlgorithm::Sha256 => {
                let mut hasher = sha2::Sha256::new();
                feed(&mut |bytes| hasher.update(bytes));
                let hex: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
                format!("sha256:{hex}")
            }
            IdAlgorithm::Xxh3 => {
                let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                feed(&mut |bytes| hasher.update(bytes));
                format!("xxh3:{:016x}", hasher.digest())
            }
        }
    }
}

/// The objects of a content value, each name and entry encoded, all in one buffer (a million
/// objects cost their bytes and a few words each, not two allocations each).
#[derive(Default)]
struct Entries {
    bytes: Vec<u8>,
    /// Where each object starts in `bytes`, its name's length and its entry's.
    spans: Vec<(usize, u32, u32)>,
}

impl Entries {
    fn with_capacity(n: usize) -> Entries {
        Entries { bytes: Vec::new(), spans: Vec::with_capacity(n) }
    }

    fn push(&mut self, key: &[u8], entry: &[u8]) -> Result<()> {
        let long = || Error::unsupported("an object's entry of 4 GiB or more in the content value");
        let k = u32::try_from(key.len()).map_err(|_| long())?;
        let e = u32::try_from(entry.len()).map_err(|_| long())?;
        self.spans.push((self.bytes.len(), k, e));
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(entry);
        Ok(())
    }

    fn key(&self, span: (usize, u32, u32)) -> &[u8] {
        &self.bytes[span.0..span.0 + span.1 as usize]
    }

    /// Sorts the objects by their encoded names; returns a name given twice, encoded.
    fn sort(&mut self) -> Option<&[u8]> {
        let mut spans = std::mem::take(&mut self.spans);
        spans.sort_unstable_by(|&a, &b| self.key(a).cmp(self.key(b)));
        self.spans = spans;
        let twice = self.spans.windows(2).find(|w| self.key(w[0]) == self.key(w[1]))?;
        Some(self.key(twice[0]))
    }

    /// The digest of the content value of these objects, sorted.
    fn digest(&self, algorithm: IdAlgorithm) -> String {
        algorithm.render(|hash| {
            let mut head = Vec::new();
            ztensor_format::cbor::head(&mut head, 4, 2);
            head.extend(encode(&text(CONTENT_TAG)));
            ztensor_format::cbor::head(&mut head, 5, self.spans.len() as u64);
            hash(&head);
            for &(at, k, e) in &self.spans {
                hash(&self.bytes[at..at + k as usize + e as usize]);
            }
        })
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// One object's entry of the content value, encoded: its attributes (a map in deterministic
/// CBOR, as the manifest holds them) copied verbatim rather than decoded into a tree.
fn object_entry(
    shape: &[u64],
    layout: &str,
    attributes: Option<&[u8]>,
    parts: Vec<(Value, Value)>,
) -> Vec<u8> {
    // The keys in their encoded order (§5.4): `parts` < `shape` < `layout` < `attributes`.
    let mut entry = Vec::new();
    ztensor_format::cbor::head(&mut entry, 5, 3 + u64::from(attributes.is_some()));
    entry.extend(encode(&text("parts")));
    entry.extend(encode(&Value::Map(parts)));
    entry.extend(encode(&text("shape")));
    entry.extend(encode(&Value::Array(shape.iter().map(|&d| Value::Uint(d)).collect())));
    entry.extend(encode(&text("layout")));
    entry.extend(encode(&text(layout)));
    if let Some(a) = attributes {
        entry.extend(encode(&text("attributes")));
        entry.extend_from_slice(a);
    }
    entry
}

fn part_value(dtype: &str, logical: Option<&str>, digest: String) -> Value {
    let mut entries = vec![(text("dtype"), text(dtype)), (text("digest"), Value::Text(digest))];
    if let Some(t) = logical {
        entries.push((text("type"), text(t)));
    }
    Value::Map(entries)
}

/// The content digest of a zTensor 2 manifest, its part digests taken as they are.
///
/// # Errors
/// `Unsupported` when a part carries no digest (the identity is then undefined).
pub fn manifest_digest(manifest: &Manifest, algorithm: IdAlgorithm) -> Result<String> {
    let mut objects = Entries::with_capacity(manifest.objects.len());
    for (name, o) in &manifest.objects {
        let mut parts = Vec::with_capacity(o.parts.len());
        for (role, p) in &o.parts {
            let digest = p.digest.as_deref().map(str::to_owned).ok_or_else(|| {
                Error::unsupported(format!(
                    "object {name:?} part {role:?} carries no digest, so the file has no \
                     content digest (write it in canonical form to give every part one)"
                ))
            })?;
            parts.push((text(role), part_value(p.dtype.name(), p.logical.as_deref(), digest)));
        }
        let attributes = o.attributes.as_deref().map(ztensor_format::Attributes::as_bytes);
        objects
            .push(&encode(&text(name)), &object_entry(&o.shape, &o.layout, attributes, parts))?;
    }
    // A manifest's names are distinct (a map's keys).
    objects.sort();
    Ok(objects.digest(algorithm))
}

/// A part of a zTensor 2 file as [`content_digest`] hashes it: the blob it points at in the file
/// itself (offset, stored length, encoded or not, decoded length) and how its bytes are taken
/// (storage and logical type, made 0 or 1 as `bool`s). Parts with the same key hash alike.
#[derive(PartialEq, Eq, Hash)]
struct BlobKey {
    offset: u64,
    stored_len: u64,
    encoding: ztensor_format::Encoding,
    decoded_len: Option<u64>,
    dtype: ztensor_format::StorageType,
    logical_type: Option<ztensor_format::LogicalType>,
    bools: bool,
}

/// The content digest `source` would have once written as canonical zTensor 2 (each part's
/// `xxh3` computed on its decoded bytes, streamed where the source reads in pieces).
///
/// For a zTensor 2 file (a [`crate::File`], or a view of one), each blob that several parts
/// point at is decoded and hashed once, however many parts alias it: a small file of many
/// aliases of one large blob costs one pass over it, not one per alias. Each alias still gets
/// its own verdict (its digest, its logical type's rules) from the file's checks
/// ([`TensorSource::verify`], which decode a shared blob once too and are held to the file's
/// expansion budget, [`crate::File::check_expansion`]). A part in a shard is hashed each time.
///
/// # Errors
/// What keeps the source from being written as zTensor 2 (see [`crate::write()`]), and its read
/// errors.
pub fn content_digest(source: &dyn TensorSource, algorithm: IdAlgorithm) -> Result<String> {
    let options = WriteOptions::default();
    let mut objects = Entries::with_capacity(source.len());
    // Only a zTensor 2 file's parts are known to decode to what their blob, encoding and
    // decoded length say alone (a 1.x component's byte order and packing, a foreign tensor's
    // strides, are not in what a source lists).
    let zt2 = source.format_name() == crate::source::FORMAT_NAME;
    let mut hashed: std::collections::HashMap<BlobKey, u64> = std::collections::HashMap::new();
    for index in 0..source.len() {
        let info = source
            .info(index)
            .ok_or_else(|| Error::io("listing objects", std::io::Error::other("object gone")))?;
        let name = info.name.to_string();
        let read = |e: ztensor_io::Error| Error::reading(&name, e);
        let whole = if source.reads_in_pieces(index) && listed_as_read(&info) {
            None
        } else {
            Some(source.read(index).map_err(read)?)
        };
        let planned = plan(&info, whole.as_ref().filter(|_| !listed_as_read(&info)), &options)?;
        let keys: Vec<Option<BlobKey>> = planned
            .parts
            .iter()
            .map(|p| {
                let c = info.component(&p.role).filter(|_| zt2 && whole.is_none())?;
                Some(BlobKey {
                    offset: c.offset?,
                    stored_len: c.stored_len,
                    encoding: c.encoding.clone(),
                    decoded_len: c.decoded_len,
                    dtype: c.dtype.clone(),
                    logical_type: c.logical_type.clone(),
                    bools: p.bools,
                })
            })
            .collect();
        drop(info);
        let mut digests = Vec::with_capacity(planned.parts.len());
        if whole.is_none() {
            let mut verified = false;
            for (p, key) in planned.parts.iter().zip(keys) {
                if let Some(&h) = key.as_ref().and_then(|k| hashed.get(k)) {
                    // Its bytes were hashed for another part; its own checks are the file's
                    // (which decode a shared blob once), made once for the object.
                    if !verified {
                        source.verify(index).map_err(read)?;
                        verified = true;
                    }
                    digests.push(h);
                    continue;
                }
                let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                let mut scratch = Vec::new();
                source
                    .read_part(index, &p.role, 4 << 20, &mut |piece| {
                        hasher.update(if p.bools {
                            bool_piece(piece, &mut scratch)
                        } else {
                            piece
                        });
                        Ok(())
                    })
                    .map_err(read)?;
                let h = hasher.digest();
                if let Some(key) = key {
                    hashed.insert(key, h);
                }
                digests.push(h);
            }
        } else {
            let data =
                whole.as_ref().ok_or_else(|| read(ztensor_io::Error::not_found(&name, None)))?;
            for p in &planned.parts {
                let c = data.components.get(&p.role).ok_or_else(|| {
                    Error::io(
                        &format!("reading object {name:?}"),
                        std::io::Error::other(format!("component {:?} was not read", p.role)),
                    )
                })?;
                let mut scratch = Vec::new();
                let bytes = if p.bools { bool_piece(&c.bytes, &mut scratch) } else { &c.bytes };
                digests.push(xxhash_rust::xxh3::xxh3_64(bytes));
            }
        }
        let parts = planned
            .parts
            .iter()
            .zip(digests)
            .map(|(p, h)| {
                let digest = format!("xxh3:{h:016x}");
                (text(&p.role), part_value(p.dtype.name(), p.logical.as_deref(), digest))
            })
            .collect();
        let attributes = planned.attributes.as_deref();
        let entry = object_entry(&planned.shape, &planned.layout, attributes, parts);
        objects.push(&encode(&Value::Text(name)), &entry)?;
    }
    if let Some(twice) = objects.sort() {
        let name = match crate::cbor::decode(twice) {
            Ok(Value::Text(name)) => name,
            _ => String::new(),
        };
        return Err(Error::unrepresentable(
            ztensor_format::Refused::Dtype,
            format!("object {name:?} is given twice, so the input has no zTensor 2 identity"),
        ));
    }
    Ok(objects.digest(algorithm))
}

impl<S: ztensor_io::ReadAt> crate::File<S> {
    /// The file's content digest ([`manifest_digest`] of its manifest).
    ///
    /// # Errors
    /// `Unsupported` for a data shard (its objects are its root's) and for parts without a
    /// digest.
    pub fn content_digest(&self, algorithm: IdAlgorithm) -> Result<String> {
        let manifest = self.manifest().ok_or_else(|| {
            Error::unsupported(
                "a data shard describes no objects (its root's manifest does): it has no content \
                 digest of its own",
            )
        })?;
        manifest_digest(manifest, algorithm)
    }
}
