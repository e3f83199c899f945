//! The manifest on its way out: written in pieces, hashed, and read back a batch at a time.

use super::*;

/// The bytes of manifest entries read back at a time through this crate's reader.
pub(super) const CHECK_BATCH: usize = 1 << 20;

/// A manifest on its way out: written in pieces as it is made (its entries are never held
/// all at once), hashed, and read back through this crate's own validation a batch of
/// entries at a time, each batch as a manifest of its own (with the shard table); the file's
/// attributes are checked apart, without a tree of them ([`check_file_attributes`]).
pub(crate) struct ManifestOut<'o> {
    pub(super) out: &'o mut dyn Write,
    pub(super) pending: Vec<u8>,
    pub(super) hash: xxhash_rust::xxh3::Xxh3,
    pub(super) len: u64,
    /// The shard table's key and value, encoded (a root's), which every batch holds too.
    pub(super) shards: Option<Vec<u8>>,
    /// The file's attributes, encoded.
    pub(super) attributes: Option<&'o [u8]>,
    pub(super) batch: Vec<u8>,
    pub(super) batched: u64,
    /// The last object key written, which the next must sort after.
    pub(super) last: Vec<u8>,
    /// Where blobs of this file must end (the manifest's offset), and the manifest's offset.
    pub(super) at: u64,
    pub(super) what: &'static str,
}

impl<'o> ManifestOut<'o> {
    /// Starts the manifest of `objects` objects at offset `at` of `out` (where it is
    /// positioned): the shard table first when given, then the objects ([`Self::object`]
    /// each, in key order), then the attributes ([`Self::finish`]). `what` names it in
    /// errors (`the manifest written`).
    pub(crate) fn start(
        out: &'o mut dyn Write,
        at: u64,
        shards: Option<&Value>,
        objects: usize,
        attributes: Option<&'o [u8]>,
        what: &'static str,
    ) -> Result<ManifestOut<'o>> {
        let shards = shards.map(|table| {
            let mut entry = encode(&Value::Text("shards".to_owned()));
            entry.extend(encode(table));
            entry
        });
        let mut m = ManifestOut {
            out,
            pending: Vec::new(),
            hash: xxhash_rust::xxh3::Xxh3::new(),
            len: 0,
            shards,
            attributes,
            batch: Vec::new(),
            batched: 0,
            last: Vec::new(),
            at,
            what,
        };
        // The root's keys in deterministic order: `shards`, `objects`, `attributes`.
        let keys = 1 + u64::from(m.shards.is_some()) + u64::from(attributes.is_some());
        let mut head = Vec::new();
        ztensor_format::cbor::head(&mut head, 5, keys);
        if let Some(s) = &m.shards {
            head.extend_from_slice(s);
        }
        head.extend(encode(&Value::Text("objects".to_owned())));
        ztensor_format::cbor::head(&mut head, 5, objects as u64);
        m.put(&head)?;
        Ok(m)
    }

    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.hash.update(bytes);
        self.len += bytes.len() as u64;
        if self.len > MAX_MANIFEST {
            return Err(Error::unrepresentable(
                Refused::Dtype,
                format!("a manifest of more than {MAX_MANIFEST} bytes (zTensor 2 allows 1 GiB)"),
            ));
        }
        if bytes.len() >= PIECE {
            // A large piece (an attribute of megabytes) goes out as it is, not copied first.
            self.flush()?;
            return self.out.write_all(bytes).map_err(|e| Error::io("writing the manifest", e));
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= PIECE {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        self.out.write_all(&self.pending).map_err(|e| Error::io("writing the manifest", e))?;
        self.pending.clear();
        Ok(())
    }

    /// The next object's entry: its encoded key (after the last one's) and encoded map, given
    /// in pieces (an object's attributes apart from the rest, so they are not copied to join
    /// them).
    pub(crate) fn object(&mut self, key: &[u8], value: &[&[u8]]) -> Result<()> {
        if !self.last.is_empty() && self.last.as_slice() >= key {
            return Err(Error::rule(
                crate::error::Rule::CborDeterminism,
                "the objects' keys are not in deterministic order",
            )
            .within(self.what));
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        self.put(key)?;
        self.batch.extend_from_slice(key);
        for piece in value {
            self.put(piece)?;
            self.batch.extend_from_slice(piece);
        }
        self.batched += 1;
        if self.batch.len() >= CHECK_BATCH {
            self.check()?;
        }
        Ok(())
    }

    /// Reads the batch of entries back as a manifest of its own.
    pub(super) fn check(&mut self) -> Result<()> {
        let keys = 1 + u64::from(self.shards.is_some());
        let mut head = Vec::new();
        ztensor_format::cbor::head(&mut head, 5, keys);
        if let Some(s) = &self.shards {
            head.extend_from_slice(s);
        }
        head.extend(encode(&Value::Text("objects".to_owned())));
        ztensor_format::cbor::head(&mut head, 5, self.batched);
        // The head goes in front of the batch in place (room for it made exactly), so a batch
        // of megabytes is not copied to be read back.
        let mut bytes = std::mem::take(&mut self.batch);
        bytes.reserve_exact(head.len());
        bytes.splice(0..0, head);
        self.batched = 0;
        let parsed = crate::manifest::parse_bytes(&bytes).map_err(|e| e.within(self.what))?;
        // Every blob of this file lies before the manifest (an empty one may be where it
        // starts), which is held apart from them so.
        crate::manifest::validate(&parsed, self.at, (self.at, 0)).map_err(|e| e.within(self.what))
    }

    /// Writes the attributes and checks the last batch; returns the manifest's length and
    /// XXH3-64.
    pub(crate) fn finish(mut self) -> Result<(u64, u64)> {
        if let Some(a) = self.attributes {
            self.put(&encode(&Value::Text("attributes".to_owned())))?;
            self.put(a)?;
            check_file_attributes(a).map_err(|e| e.within(self.what))?;
        }
        self.flush()?;
        self.check()?;
        Ok((self.len, self.hash.digest()))
    }
}

/// Checks the file's attributes, `encoded`, as a reader reads them at their place in a
/// manifest: one item of deterministic CBOR within the nesting and the items a manifest
/// allows, a map whose keys are names (1 to 1024 bytes without U+0000). Only the keys are
/// built: attributes of millions of values cost their bytes here, not a tree of them (twice,
/// as a reader's copy of it).
pub(super) fn check_file_attributes(encoded: &[u8]) -> Result<()> {
    let mut root = Vec::with_capacity(encoded.len() + 16);
    ztensor_format::cbor::head(&mut root, 5, 1);
    root.extend(encode(&Value::Text("attributes".to_owned())));
    root.extend_from_slice(encoded);
    let schema = |m: &str| Error::rule(crate::error::Rule::Schema, m.to_owned());
    let entries = crate::cbor::map_entries(&root)?.unwrap_or_default();
    let range = entries.first().map(|(_, r)| r.clone()).ok_or_else(|| schema("no attributes"))?;
    let keys = crate::cbor::entries_at(&root, range, 1)?
        .ok_or_else(|| schema("the file's attributes are not a map"))?;
    for (key, _) in keys {
        let Some(key) = key.as_text() else {
            return Err(schema("a key of the file's attributes is not text"));
        };
        if key.is_empty() || key.len() > crate::manifest::MAX_NAME || key.contains('\0') {
            return Err(Error::rule(
                crate::error::Rule::Name,
                format!(
                    "an attribute key {key:?} is empty, longer than {} bytes or holds U+0000",
                    crate::manifest::MAX_NAME
                ),
            ));
        }
    }
    Ok(())
}
