//! Placing blobs: the output's cursor, shared and empty blobs, and what was placed, kept
//! compactly until the manifest's entries are encoded from it.

use super::*;

/// The state of one write.
pub(super) struct Placer<'o> {
    pub(super) out: &'o mut dyn Output,
    /// Where the last blob ended.
    pub(super) cursor: u64,
    /// Blobs written, by (length, XXH3-64), to share identical ones: the first of each key
    /// (a few bytes a blob, not a list each).
    pub(super) by_content: HashMap<(u64, u64), u64>,
    /// Blobs written after the first of their key (bytes of the same length and hash that
    /// differ), in the order written: all but never any.
    pub(super) collided: HashMap<(u64, u64), Vec<u64>>,
    /// The empty blob, once one is placed.
    pub(super) empty: Option<u64>,
    pub(super) blobs: usize,
    /// The zstd level parts are encoded at (`zt.zstd-seekable/1`), if they are.
    pub(super) zstd: Option<i32>,
    /// The pool zstd parts are compressed on.
    pub(super) pool: Option<Arc<rayon::ThreadPool>>,
    /// Where the bytes not yet handed to [`Output::written`] start.
    pub(super) unannounced: u64,
}

/// How many final bytes the writer gathers before it starts them on their way to the disk:
/// one call per this many, not one per small part.
pub(super) const WRITEBACK_STEP: u64 = 8 << 20;

impl Placer<'_> {
    pub(super) fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
        move |e| Error::io(what, e)
    }

    /// Whether the `len` bytes at `a` and at `b` of the output are the same.
    pub(super) fn same(&mut self, a: u64, b: u64, len: u64) -> Result<bool> {
        // Pieces of at most PIECE bytes: the casts below cannot truncate.
        let size = usize::try_from(len).map_or(PIECE, |l| l.min(PIECE));
        let (mut x, mut y) = (vec![0u8; size], vec![0u8; size]);
        let (mut a, mut b, mut left) = (a, b, len);
        while left > 0 {
            #[allow(clippy::cast_possible_truncation)]
            let n = left.min(size as u64) as usize;
            for (at, buf) in [(a, &mut x), (b, &mut y)] {
                self.out.seek(SeekFrom::Start(at)).map_err(Self::io("reading back a blob"))?;
                self.out.read_exact(&mut buf[..n]).map_err(Self::io("reading back a blob"))?;
            }
            if x[..n] != y[..n] {
                return Ok(false);
            }
            (a, b, left) = (a + n as u64, b + n as u64, left - n as u64);
        }
        Ok(true)
    }

    /// Writes one part's bytes, given by `fill` (which calls its argument with each piece in
    /// order), at the next boundary; returns where the part's blob is and its digest string.
    pub(super) fn part(&mut self, bools: bool, fill: &mut Fill<'_>) -> Result<Placed> {
        let offset = align(self.cursor)?;
        self.out.seek(SeekFrom::Start(offset)).map_err(Self::io("writing a blob"))?;
        // The digest covers the decoded bytes; sharing compares the stored ones.
        let mut decoded_hash = xxhash_rust::xxh3::Xxh3::new();
        let mut stored_hash = xxhash_rust::xxh3::Xxh3::new();
        let (mut decoded_len, mut len) = (0u64, 0u64);
        let out = &mut *self.out;
        let mut scratch = Vec::new();
        let pool = &self.pool;
        let mut encoder =
            self.zstd.map(|level| crate::seekable::Encoder::with_pool(level, pool.clone()));
        // Raw parts are stored as they decode: one hash serves both.
        let encoded = encoder.is_some();
        let mut store = |bytes: &[u8]| -> Result<()> {
            if encoded {
                stored_hash.update(bytes);
            }
            len += bytes.len() as u64;
            out.write_all(bytes).map_err(Self::io("writing a blob"))
        };
        fill(&mut |piece| {
            let piece = if bools { bool_piece(piece, &mut scratch) } else { piece };
            decoded_hash.update(piece);
            decoded_len += piece.len() as u64;
            match &mut encoder {
                Some(e) => e.push(piece, &mut store),
                None => store(piece),
            }
        })?;
        if let Some(e) = encoder {
            e.finish(&mut store)?;
        }
        let decoded_digest = decoded_hash.digest();
        let hash = if encoded { stored_hash.digest() } else { decoded_digest };
        self.settle(offset, len, hash, decoded_digest, decoded_len)
    }

    /// Writes a part compressed ahead of its turn at the next boundary.
    pub(super) fn part_compressed(&mut self, part: &Compressed) -> Result<Placed> {
        let offset = align(self.cursor)?;
        self.out.seek(SeekFrom::Start(offset)).map_err(Self::io("writing a blob"))?;
        let mut len = 0u64;
        for piece in &part.stream {
            self.out.write_all(piece).map_err(Self::io("writing a blob"))?;
            len += piece.len() as u64;
        }
        self.settle(offset, len, part.stored_hash, part.decoded_hash, part.decoded_len)
    }

    /// Where the `len` stored bytes just written at `offset` (their xxh3 `hash`; the decoded
    /// bytes' `decoded_hash` and length) end up: an earlier identical blob (what was written
    /// goes again), the one empty blob, or here.
    pub(super) fn settle(
        &mut self,
        offset: u64,
        len: u64,
        hash: u64,
        decoded_hash: u64,
        decoded_len: u64,
    ) -> Result<Placed> {
        let placed = |blob| Placed { blob, digest: decoded_hash, decoded_len };
        if len == 0 {
            // One empty blob, where the next blob will start (it holds no byte, so it overlaps
            // nothing).
            let at = *self.empty.get_or_insert(offset);
            return Ok(placed((at, 0)));
        }
        let key = (len, hash);
        if let Some(&first) = self.by_content.get(&key) {
            let more = self.collided.get(&key).cloned().unwrap_or_default();
            for earlier in std::iter::once(first).chain(more) {
                if self.same(earlier, offset, len)? {
                    // Shared: what was just written goes again.
                    self.out.set_len(self.cursor).map_err(Self::io("sharing a blob"))?;
                    return Ok(placed((earlier, len)));
                }
            }
            self.collided.entry(key).or_default().push(offset);
        } else {
            self.by_content.insert(key, offset);
        }
        self.blobs += 1;
        self.cursor = offset + len;
        // What lies before the cursor stays: a blob found again later is cut after it. The
        // range ends on a boundary of 64 KiB (a multiple of any page size), so that such a cut
        // never falls inside a page already on its way to the disk (which the kernel would
        // wait for, then write again).
        let end = self.cursor / CANONICAL_ALIGNMENT * CANONICAL_ALIGNMENT;
        if end.saturating_sub(self.unannounced) >= WRITEBACK_STEP {
            self.out.written(self.unannounced, end - self.unannounced);
            self.unannounced = end;
        }
        Ok(placed((offset, len)))
    }
}

/// Where a part went: its blob, the XXH3-64 of its decoded bytes and their length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed {
    pub(super) blob: (u64, u64),
    pub(super) digest: u64,
    pub(super) decoded_len: u64,
}

/// What a write placed, kept compactly (a few words a part) until the manifest is written:
/// each object's entry is encoded then from its source again ([`plan`] on its listing) and
/// where its parts went, instead of being held encoded.
pub(crate) struct Written {
    /// The objects, in writing order.
    pub(crate) order: Order,
    /// Where the parts of each object (in writing order) start in `parts`, and a last entry
    /// where they end.
    pub(super) starts: Vec<usize>,
    pub(super) parts: Vec<Placed>,
    /// The plans of objects planned from a read (their parts known only from it), by place.
    pub(super) read: HashMap<usize, Planned>,
    pub(super) zstd: bool,
}

impl Written {
    /// The encoded entry (object map) of the `k`-th object of `source` (the source written),
    /// with `shard` in each part when given (a root's entry).
    ///
    /// # Errors
    /// What [`plan`] refuses; a source whose listing changed since it was written.
    pub(crate) fn entry(
        &self,
        source: &dyn TensorSource,
        k: usize,
        options: &WriteOptions,
        shard: Option<&str>,
    ) -> Result<Entry<'_>> {
        let index = self.order.index(k);
        let changed = || {
            Error::io("writing the manifest", std::io::Error::other("an object's listing changed"))
        };
        let mut again = None;
        let planned = match self.read.get(&k) {
            Some(planned) => planned,
            None => {
                let info = source.info(index).ok_or_else(changed)?;
                &*again.insert(plan(&info, None, options)?)
            }
        };
        let placed = &self.parts[self.starts[k]..self.starts[k + 1]];
        if placed.len() != planned.parts.len() {
            return Err(changed());
        }
        let head = object_entry(planned, placed, self.zstd, shard);
        let attributes = match self.read.get(&k) {
            Some(planned) => planned.attributes.as_deref().map(std::borrow::Cow::Borrowed),
            None => again.and_then(|p| p.attributes).map(std::borrow::Cow::Owned),
        };
        Ok(Entry { head, attributes })
    }

    /// Checks that the blobs of different parts are the same or disjoint (checked within
    /// each batch when the manifest is read back, and across them here).
    pub(super) fn check_overlaps(&self) -> Result<()> {
        let mut blobs: Vec<(u64, u64)> =
            self.parts.iter().map(|p| p.blob).filter(|&(_, len)| len > 0).collect();
        blobs.sort_unstable();
        blobs.dedup();
        match blobs.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
            Some(w) => Err(Error::rule(
                crate::error::Rule::BlobOverlap,
                format!("blobs at {} and {} overlap without being the same", w[0].0, w[1].0),
            )
            .within("the manifest written")),
            None => Ok(()),
        }
    }
}

/// An object's manifest entry, encoded: `planned` with its parts placed at `placed` (in the
/// same order), `shard` in each part when given. The attributes go in as their own bytes,
/// after the other keys (`attributes` is the longest key, so deterministic CBOR sorts it
/// last).
pub(super) fn object_entry(
    planned: &Planned,
    placed: &[Placed],
    zstd: bool,
    shard: Option<&str>,
) -> Vec<u8> {
    let text = |s: &str| Value::Text(s.to_owned());
    let mut parts = Vec::with_capacity(planned.parts.len());
    for (p, placed) in planned.parts.iter().zip(placed) {
        let (offset, len) = placed.blob;
        let mut entries = vec![
            (text("dtype"), text(p.dtype.name())),
            (text("blob"), Value::Array(vec![Value::Uint(offset), Value::Uint(len)])),
            (text("digest"), Value::Text(format!("xxh3:{:016x}", placed.digest))),
        ];
        if zstd {
            entries.push((text("encoding"), text(crate::seekable::ID)));
            entries.push((text("decoded_length"), Value::Uint(placed.decoded_len)));
        }
        if let Some(t) = &p.logical {
            entries.push((text("type"), text(t)));
        }
        if let Some(s) = shard {
            entries.push((text("shard"), text(s)));
        }
        parts.push((text(&p.role), Value::Map(entries)));
    }
    let object = vec![
        (text("shape"), Value::Array(planned.shape.iter().map(|&d| Value::Uint(d)).collect())),
        (text("layout"), text(&planned.layout)),
        (text("parts"), Value::Map(parts)),
    ];
    if planned.attributes.is_none() {
        return encode(&Value::Map(object));
    }
    let mut out = Vec::with_capacity(256);
    ztensor_format::cbor::head(&mut out, 5, object.len() as u64 + 1);
    let mut entries: Vec<(Vec<u8>, &Value)> = object.iter().map(|(k, v)| (encode(k), v)).collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in entries {
        out.extend(k);
        out.extend(encode(v));
    }
    out.extend(encode(&text("attributes")));
    out
}

/// An object's manifest entry, encoded in two pieces: the map up to its attributes' value,
/// and the attributes (deterministic CBOR, as the source holds them), which are not copied to
/// join the rest.
pub(crate) struct Entry<'a> {
    pub(super) head: Vec<u8>,
    pub(super) attributes: Option<std::borrow::Cow<'a, [u8]>>,
}

impl Entry<'_> {
    /// The entry's bytes, in order.
    pub(crate) fn pieces(&self) -> Vec<&[u8]> {
        let mut pieces = vec![self.head.as_slice()];
        pieces.extend(self.attributes.as_deref());
        pieces
    }
}
