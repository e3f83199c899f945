//! A manifest built object by object, as a writer makes one: each object is checked and encoded
//! when it is added, and kept as its encoding.

use crate::attributes::Attributes;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Options;
use crate::manifest::{Manifest, Object, Version, v0_1, v1};
use crate::names::NameIndex;

/// The manifest of a file being written, built one object at a time.
///
/// [`push`](ManifestBuilder::push) checks an object against every rule [`crate::validate`]
/// applies (its names, shape, components and their place in the data area, and that its blobs
/// are disjoint from or identical to those of the objects before it) and refuses it, leaving the
/// builder as it was, when one is broken. What it keeps of an accepted object is its manifest
/// encoding (a few dozen bytes for a plain tensor), not an [`Object`]: a writer of a million
/// tensors holds about the size of their manifest. [`encode_in_blocks`] writes the manifest in
/// deterministic CBOR, the same bytes as [`Manifest::encode`] of the same objects.
///
/// [`encode_in_blocks`]: ManifestBuilder::encode_in_blocks
///
/// ```
/// use ztensor_format::{Component, DType, Format, ManifestBuilder, Object, Version};
/// let mut b = ManifestBuilder::new(Version::V1_2);
/// let w = Object::new("w", vec![2], Format::Dense)
///     .with_component("data", Component::new(DType::F32, 64, 8));
/// b.push(&w, 128).unwrap();
/// assert!(b.push(&w, 128).is_err(), "a name is written once");
/// let mut bytes = Vec::new();
/// b.encode_in_blocks(&mut |block| {
///     bytes.extend_from_slice(block);
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(b.to_manifest().unwrap().encode().unwrap(), bytes);
/// ```
#[derive(Debug, Clone)]
pub struct ManifestBuilder {
    /// The version, version string, file attributes and unknown root keys; never objects.
    root: Manifest,
    options: Options,
    /// Each object's name, then its encoded value (v1.x) or tensor map (v0.1), in the order
    /// they were added.
    store: Store,
    /// The length of each object's name.
    name_lens: Vec<u32>,
    names: NameIndex,
    /// Every non-empty blob range, sorted, pairwise disjoint (identical ones kept once).
    blobs: Vec<(u64, u64)>,
}

impl ManifestBuilder {
    /// An empty manifest of `version`, with that version's default version string.
    pub fn new(version: Version) -> ManifestBuilder {
        ManifestBuilder {
            root: Manifest::new(version),
            options: Options::default(),
            store: Store::default(),
            name_lens: Vec::new(),
            names: NameIndex::default(),
            blobs: Vec::new(),
        }
    }

    /// Continues `base`, a manifest of a file whose data area ends at `data_end`: its root and
    /// then its objects, each checked as [`push`](ManifestBuilder::push) checks it.
    ///
    /// # Errors
    /// As [`push`](ManifestBuilder::push), for the first object of `base` that breaks a rule.
    pub fn resume(base: Manifest, data_end: u64) -> Result<ManifestBuilder> {
        let Manifest { version, version_string, attributes, objects, extra } = base;
        let mut builder = ManifestBuilder::new(version);
        builder.root = Manifest { version, version_string, attributes, objects: Vec::new(), extra };
        builder.names = NameIndex::with_capacity(objects.len());
        for object in &objects {
            builder.push(object, data_end)?;
        }
        Ok(builder)
    }

    /// The version.
    pub fn version(&self) -> Version {
        self.root.version
    }

    /// The file attributes.
    pub fn attributes(&self) -> Option<&Attributes> {
        self.root.attributes.as_ref()
    }

    /// Sets the file attributes (checked when the manifest is encoded).
    pub fn set_attributes(&mut self, attributes: Option<Attributes>) {
        self.root.attributes = attributes;
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.store.starts.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.store.starts.is_empty()
    }

    /// The name of object `index` (in the order they were added).
    ///
    /// # Panics
    /// When `index` is out of range.
    pub fn name(&self, index: usize) -> &str {
        name_at(&self.store, &self.name_lens, index)
    }

    /// Whether an object is called `name`.
    pub fn contains(&self, name: &str) -> bool {
        let (store, lens) = (&self.store, &self.name_lens);
        self.names.find(name, |i| name_at(store, lens, i)).is_some()
    }

    /// The encoding of object `index`, after its name.
    fn encoded(&self, index: usize) -> &[u8] {
        &self.store.get(index)[self.name_lens[index] as usize..]
    }

    /// Object `index`, decoded back from what the builder keeps.
    ///
    /// # Errors
    /// None for objects this builder accepted; the decoder's errors otherwise.
    ///
    /// # Panics
    /// When `index` is out of range.
    pub fn object(&self, index: usize) -> Result<Object> {
        let limits = &self.options.limits;
        match self.version() {
            Version::V0_1 => v0_1::tensor_from(self.encoded(index), limits),
            Version::V1_1 | Version::V1_2 => {
                v1::object_from(self.name(index), self.encoded(index), limits)
            }
        }
    }

    /// The whole manifest, decoded back: for inspecting what was built.
    ///
    /// # Errors
    /// As [`object`](ManifestBuilder::object).
    pub fn to_manifest(&self) -> Result<Manifest> {
        let mut manifest = self.root.clone();
        manifest.objects = (0..self.len()).map(|i| self.object(i)).collect::<Result<_>>()?;
        Ok(manifest)
    }

    /// Adds `object`, of a file whose data area ends at `data_end`, after checking it: its name
    /// is new, it breaks no rule of [`crate::validate`] (an object a reader would mark
    /// unsupported, of an unknown dtype say, is accepted), the version can express it, and its
    /// blobs are disjoint from or identical to every blob before. A refused object leaves the
    /// builder as it was.
    ///
    /// # Errors
    /// [`ErrorKind::DuplicateName`], [`ErrorKind::TooManyObjects`],
    /// [`ErrorKind::BlobPartialOverlap`], [`ErrorKind::Unrepresentable`] and the rules of
    /// [`crate::check_object`].
    pub fn push(&mut self, object: &Object, data_end: u64) -> Result<()> {
        let Accepted { encoded, blobs, name_len } = self.accept(object, data_end)?;
        self.store.push(object.name.as_bytes(), &encoded);
        for (at, range) in blobs.into_iter().rev() {
            self.blobs.insert(at, range);
        }
        self.name_lens.push(name_len);
        let (store, lens) = (&self.store, &self.name_lens);
        self.names.insert(self.len() - 1, |i| name_at(store, lens, i));
        Ok(())
    }

    /// Whether [`push`](ManifestBuilder::push) would accept `object`, without adding it: for a
    /// writer to ask before it writes the object's bytes.
    ///
    /// # Errors
    /// As [`push`](ManifestBuilder::push).
    pub fn check(&self, object: &Object, data_end: u64) -> Result<()> {
        self.accept(object, data_end).map(|_| ())
    }

    /// Every check of [`push`](ManifestBuilder::push), and what adding the object takes: its
    /// encoding and where its blobs go.
    fn accept(&self, object: &Object, data_end: u64) -> Result<Accepted> {
        let name = object.name.as_str();
        if self.contains(name) {
            return Err(
                Error::new(ErrorKind::DuplicateName, "two objects share a name").in_object(name)
            );
        }
        let limits = &self.options.limits;
        if self.len() >= limits.max_objects {
            return Err(Error::new(ErrorKind::TooManyObjects, "more objects than the limit")
                .expected_found(format!("<= {}", limits.max_objects), self.len() + 1));
        }
        let name_len = u32::try_from(name.len())
            .map_err(|_| Error::new(ErrorKind::InvalidInput, "name too long").in_object(name))?;
        crate::validate::check_object(object, self.version(), data_end, &self.options)?;
        let blobs = self.place_blobs(object)?;
        let mut encoded = Vec::new();
        match self.version() {
            Version::V0_1 => v0_1::tensor_into(object, &mut encoded),
            Version::V1_1 | Version::V1_2 => v1::object_into(object, &mut encoded),
        }
        .map_err(|e| e.in_object(name))?;
        Ok(Accepted { encoded, blobs, name_len })
    }

    /// Where `object`'s blobs go in the sorted list (ascending; each index as the list stands
    /// before any of them is inserted), leaving out those already there.
    ///
    /// # Errors
    /// [`ErrorKind::BlobPartialOverlap`] when one partly overlaps another blob, of this object
    /// or one before.
    fn place_blobs(&self, object: &Object) -> Result<Vec<(usize, (u64, u64))>> {
        let mut ranges: Vec<(u64, u64, &str)> = object
            .components
            .iter()
            .filter(|(_, c)| c.length > 0)
            .map(|(role, c)| (c.offset, c.offset.saturating_add(c.length), role))
            .collect();
        ranges.sort_unstable();
        let overlap = |new: (u64, u64, &str), old: (u64, u64)| {
            Error::new(
                ErrorKind::BlobPartialOverlap,
                format!(
                    "blob [{}, {}) partly overlaps blob [{}, {}) of another component",
                    new.0, new.1, old.0, old.1
                ),
            )
            .in_object(&object.name)
            .in_component(new.2)
            .at(new.0)
        };
        for pair in ranges.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.0 < a.1 && (a.0, a.1) != (b.0, b.1) {
                return Err(overlap(b, (a.0, a.1)));
            }
        }
        let mut places = Vec::with_capacity(ranges.len());
        for range in ranges {
            let key = (range.0, range.1);
            // The list is sorted and disjoint, so its ends ascend too: only the blobs just
            // before and just after can overlap this one.
            let at = self.blobs.partition_point(|&b| b < key);
            if self.blobs.get(at) == Some(&key) || places.last().is_some_and(|&(_, r)| r == key) {
                continue;
            }
            if let Some(&before) = at.checked_sub(1).and_then(|i| self.blobs.get(i))
                && before.1 > key.0
            {
                return Err(overlap(range, before));
            }
            if let Some(&after) = self.blobs.get(at)
                && after.0 < key.1
            {
                return Err(overlap(range, after));
            }
            places.push((at, key));
        }
        Ok(places)
    }

    /// Encodes the manifest as [`Manifest::encode_in_blocks`] does, from the objects as they
    /// are kept: the same bytes as [`Manifest::encode`] of the same objects.
    ///
    /// # Errors
    /// What the version cannot express in the root (file attributes in v0.1, a version string
    /// of another version, extra keys shadowing defined ones), and the errors of `write`.
    pub fn encode_in_blocks(&self, write: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<u64> {
        let mut out = crate::cbor::Blocks::new(write);
        match self.version() {
            Version::V0_1 => {
                v0_1::check_root(&self.root)?;
                v0_1::encode_with(self.len(), &mut out, |out| {
                    for i in 0..self.len() {
                        out.buf.extend_from_slice(self.encoded(i));
                        out.maybe_flush()?;
                    }
                    Ok(())
                })?;
            }
            Version::V1_1 | Version::V1_2 => {
                let root = v1::root_entries(&self.root)?;
                // Names are unique, so the order is total.
                let mut order: Vec<usize> = (0..self.len()).collect();
                order.sort_by_key(|&i| crate::manifest::text_key_order(self.name(i)));
                v1::encode_with(root, order.len(), &mut out, |out| {
                    for &i in &order {
                        crate::cbor::text_head(&mut out.buf, self.name_lens[i].into());
                        out.buf.extend_from_slice(self.name(i).as_bytes());
                        out.buf.extend_from_slice(self.encoded(i));
                        out.maybe_flush()?;
                    }
                    Ok(())
                })?;
            }
        }
        out.finish()
    }
}

/// What [`ManifestBuilder::accept`] found for an object it accepts.
struct Accepted {
    /// The object's encoded value (v1.x) or tensor map (v0.1).
    encoded: Vec<u8>,
    /// Where its blobs go in the sorted list ([`ManifestBuilder::place_blobs`]).
    blobs: Vec<(usize, (u64, u64))>,
    name_len: u32,
}

/// The name of object `index`: the first `lens[index]` bytes of its entry, which the builder
/// copied whole from a `str`.
fn name_at<'b>(store: &'b Store, lens: &[u32], index: usize) -> &'b str {
    // Copied whole from a `str`, so valid UTF-8; never fails.
    std::str::from_utf8(&store.get(index)[..lens[index] as usize]).unwrap_or_default()
}

/// What the builder keeps of its objects: one entry each, in blocks of [`Store::BLOCK`] bytes
/// that no entry straddles (an entry larger than a block has one of its own). The store grows a
/// block at a time: a million objects cost their bytes and at most a block beside them, where
/// one growing buffer would at times hold twice what it needs.
#[derive(Debug, Clone, Default)]
struct Store {
    blocks: Vec<Vec<u8>>,
    /// Where each entry starts: its block in the high 32 bits, its offset in the low.
    starts: Vec<u64>,
}

impl Store {
    const BLOCK: usize = 1 << 20;

    /// Adds an entry made of `head` then `tail`.
    fn push(&mut self, head: &[u8], tail: &[u8]) {
        let len = head.len() + tail.len();
        let fits = self.blocks.last().is_some_and(|b| b.capacity() - b.len() >= len);
        if !fits {
            self.blocks.push(Vec::with_capacity(len.max(Self::BLOCK)));
        }
        let index = self.blocks.len() - 1;
        let block = &mut self.blocks[index];
        // Blocks hold less than 4 GiB: an entry is one object's encoding, which the manifest's
        // limits keep far below that.
        let start = ((index as u64) << 32) | block.len() as u64;
        block.extend_from_slice(head);
        block.extend_from_slice(tail);
        self.starts.push(start);
    }

    /// Entry `index`.
    fn get(&self, index: usize) -> &[u8] {
        let at = |start: u64| ((start >> 32) as usize, (start & 0xffff_ffff) as usize);
        let (block, offset) = at(self.starts[index]);
        let end = match self.starts.get(index + 1).map(|&s| at(s)) {
            Some((next, end)) if next == block => end,
            _ => self.blocks[block].len(),
        };
        &self.blocks[block][offset..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Component, Format, Packing};
    use crate::{DType, Digest, Encoding, Value};

    fn dense(name: &str, offset: u64, len: u64) -> Object {
        Object::new(name, vec![len], Format::Dense)
            .with_component("data", Component::new(DType::U8, offset, len))
    }

    fn encoded(b: &ManifestBuilder) -> Vec<u8> {
        let mut out = Vec::new();
        let len = b
            .encode_in_blocks(&mut |block| {
                out.extend_from_slice(block);
                Ok(())
            })
            .unwrap();
        assert_eq!(len, out.len() as u64);
        out
    }

    /// Built object by object, the manifest is the bytes of the whole-manifest encoder, and
    /// each object decodes back as it was given: objects added out of name order, and in it.
    #[test]
    fn builds_what_the_manifest_encoder_writes() {
        let versions = [Version::V0_1, Version::V1_1, Version::V1_2];
        for (version, in_order) in versions.into_iter().flat_map(|v| [(v, false), (v, true)]) {
            let mut b = ManifestBuilder::new(version);
            let mut m = Manifest::new(version);
            let mut offset = 64;
            for i in 0..500u64 {
                // Names of several lengths, added out of order or in it.
                let name = if in_order {
                    format!("t{i:03}")
                } else {
                    format!("{}{}", "t".repeat((i % 5) as usize), 997 * i % 500)
                };
                let len = i % 3 * 64;
                let mut o = dense(&name, offset, len);
                if i % 4 == 0 {
                    let c = o.components.get_mut("data").unwrap();
                    c.digest = Some(Digest::Crc32c(u32::try_from(i).unwrap()));
                    c.encoding = Encoding::Zstd;
                    c.uncompressed_length = (version != Version::V0_1).then_some(len * 2);
                    o.shape = vec![len * 2];
                }
                if i % 9 == 0 {
                    o = o.with_attributes(Some(
                        crate::text_map([("i", Value::from(i))]).try_into().unwrap(),
                    ));
                }
                // Entries that fill the store's blocks, and one larger than a block.
                let big = match i {
                    250 => 1_500_000,
                    _ if i % 97 == 1 => 300_000,
                    _ => 0,
                };
                if big > 0 {
                    let bytes = Value::Bytes(vec![u8::try_from(i % 251).unwrap(); big]);
                    o = o.with_attributes(Some(
                        crate::text_map([("blob", bytes)]).try_into().unwrap(),
                    ));
                }
                offset += len.div_ceil(64) * 64;
                b.push(&o, offset).unwrap();
                m.objects.push(o);
            }
            if version != Version::V0_1 {
                let attributes: Attributes =
                    crate::text_map([("lr", Value::from(0.5))]).try_into().unwrap();
                b.set_attributes(Some(attributes.clone()));
                m.attributes = Some(attributes);
            }
            assert_eq!(b.names.is_in_order(), in_order, "{version:?}");
            assert!(encoded(&b) == m.encode().unwrap(), "{version:?}");
            assert_eq!(b.to_manifest().unwrap(), m, "{version:?}");
            assert_eq!(b.name(7), m.objects[7].name);
            assert!(b.contains(&m.objects[99].name) && !b.contains("absent"));
            for i in [97, 98, 249, 250, 251, 499] {
                assert_eq!(b.object(i).unwrap(), m.objects[i], "{version:?} #{i}");
            }
        }
    }

    /// A refused object leaves the builder as it was.
    #[test]
    fn refusals_change_nothing() {
        let mut b = ManifestBuilder::new(Version::V1_2);
        b.push(&dense("a", 64, 128), 1024).unwrap();
        b.push(&dense("b", 192, 64), 1024).unwrap();
        let before = encoded(&b);
        let mut v0_sparse = dense("v0", 512, 64);
        v0_sparse.packing = Packing::V0Single;
        let two =
            dense("two", 512, 128).with_component("extra", Component::new(DType::U8, 576, 128));
        let refused = [
            (dense("a", 512, 64), ErrorKind::DuplicateName),
            (dense("c", 128, 128), ErrorKind::BlobPartialOverlap),
            (dense("d", 0, 64), ErrorKind::BlobOverlapsHeader),
            (dense("e", 960, 128), ErrorKind::BlobOutOfBounds),
            (dense("f", 100, 64), ErrorKind::BlobMisaligned),
            (v0_sparse, ErrorKind::Unrepresentable),
            (two, ErrorKind::BlobPartialOverlap),
        ];
        for (object, kind) in refused {
            let err = b.push(&object, 1024).unwrap_err();
            assert_eq!(err.kind(), kind, "{}: {err}", object.name);
            assert_eq!(b.len(), 2);
            assert!(encoded(&b) == before, "{} changed the manifest", object.name);
        }
        // An identical blob (an alias) is no overlap, nor is an empty one anywhere.
        b.push(&dense("alias", 64, 128), 1024).unwrap();
        b.push(&dense("empty", 128, 0), 1024).unwrap();
        assert_eq!(b.len(), 4);
    }

    /// The incremental overlap check decides as the pairwise rule does: blobs are pairwise
    /// disjoint or identical.
    #[test]
    fn overlaps_are_found_as_the_pairwise_rule_finds_them() {
        let mut rng = ztensor_testkit::Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut next = move |n: u64| rng.below(n);
        for round in 0..200 {
            let mut b = ManifestBuilder::new(Version::V1_2);
            let mut kept: Vec<(u64, u64)> = Vec::new();
            for i in 0..30 {
                let (start, len) = (64 * (1 + next(40)), 64 * next(4));
                let object = dense(&format!("o{i}"), start, len);
                let end = start + len;
                let expected_ok = len == 0
                    || kept.iter().all(|&(s, e)| (s, e) == (start, end) || e <= start || end <= s);
                let got = b.push(&object, 64 * 64);
                assert_eq!(got.is_ok(), expected_ok, "round {round}, [{start}, {end}) {got:?}");
                if expected_ok && len > 0 {
                    kept.push((start, end));
                }
            }
        }
    }

    #[test]
    fn resumes_a_manifest() {
        let mut m = Manifest::new(Version::V1_1);
        m.objects.push(dense("x", 64, 64));
        m.objects.push(dense("y", 64, 64));
        let mut b = ManifestBuilder::resume(m.clone(), 128).unwrap();
        assert_eq!(b.to_manifest().unwrap(), m);
        assert_eq!(b.push(&dense("y", 128, 0), 128).unwrap_err().kind(), ErrorKind::DuplicateName);
        m.objects.push(dense("z", 64, 128));
        assert_eq!(
            ManifestBuilder::resume(m, 256).unwrap_err().kind(),
            ErrorKind::BlobPartialOverlap
        );
    }
}
