//! Parsing the manifest from its decoded tree, or straight from its bytes, against the schema.

use std::collections::BTreeMap;

use ztensor_format::Attributes;

use crate::cbor::{MAX_VALUES, Value};
use crate::error::{Error, Result, Rule};

use super::types::*;

fn schema(message: impl Into<String>) -> Error {
    Error::rule(Rule::Schema, message)
}

/// The entries of a map whose keys must be text (`what` names it in messages).
fn text_map<'v>(value: &'v Value, what: &str) -> Result<Vec<(&'v str, &'v Value)>> {
    let Value::Map(entries) = value else { return Err(schema(format!("{what} is not a map"))) };
    entries
        .iter()
        .map(|(k, v)| {
            k.as_text()
                .map(|k| (k, v))
                .ok_or_else(|| schema(format!("a key of {what} is not text")))
        })
        .collect()
}

/// The value of `key` in a map whose other keys (text or not) are ignored.
fn field<'v>(entries: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    entries.iter().find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v)
}

fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
        return Err(Error::rule(
            Rule::Name,
            format!("{what} {name:?} is empty, longer than {MAX_NAME} bytes or holds U+0000"),
        ));
    }
    Ok(())
}

fn check_shard_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(Error::rule(
            Rule::ShardName,
            format!(
                "shard name {name:?} is not 1 to 64 of A-Z a-z 0-9 . _ - (not starting with .)"
            ),
        ));
    }
    Ok(())
}

fn check_digest(digest: &str) -> Result<()> {
    let ok = digest.split_once(':').is_some_and(|(algo, hex)| {
        !algo.is_empty()
            && algo.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && !hex.is_empty()
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if ok { Ok(()) } else { Err(schema(format!("digest {digest:?} is not ALGO:lowercase-hex"))) }
}

fn attributes(value: Option<&Value>, what: &str) -> Result<Option<Attributes>> {
    let Some(value) = value else { return Ok(None) };
    check_attributes(value, what)?;
    attributes_of(&crate::cbor::encode(value), what).map(Some)
}

/// Attributes are a map whose keys are names.
fn check_attributes(value: &Value, what: &str) -> Result<()> {
    for (key, _) in text_map(value, what)? {
        check_name(key, "an attribute key")?;
    }
    Ok(())
}

/// The attributes whose deterministic CBOR is `encoded` (one item, its rules checked: the
/// manifest's decoder read it), checked as [`check_attributes`] checks a tree (`what` names
/// them in messages) and kept as those bytes: the encoding zTensor 2 requires (§2.2, RFC 8949
/// §4.2.1) is the one [`Attributes`] holds, so the bytes kept are the manifest's own.
pub(crate) fn attributes_of(encoded: &[u8], what: &str) -> Result<Attributes> {
    if encoded.first().map(|b| b >> 5) != Some(5) {
        return Err(schema(format!("{what} is not a map")));
    }
    // Checked by the manifest's decoder: this copies the bytes, and only refuses what a tree
    // made by hand (`parse`) may hold, a key given twice or nesting past the limit.
    let attributes = Attributes::from_cbor(encoded, crate::cbor::MAX_DEPTH + 1)
        .map_err(|e| schema(format!("{what}: {e}")))?;
    debug_assert_eq!(attributes.as_bytes(), encoded, "deterministic CBOR is kept as it is");
    if attributes.entries().any(|(k, _)| k.as_text().is_none()) {
        return Err(schema(format!("a key of {what} is not text")));
    }
    for (key, _) in attributes.entries() {
        check_name(key.as_text().unwrap_or_default(), "an attribute key")?;
    }
    Ok(attributes)
}

fn optional_text<'v>(entries: &'v [(Value, Value)], key: &str) -> Result<Option<&'v str>> {
    match field(entries, key) {
        None => Ok(None),
        Some(v) => v.as_text().map(Some).ok_or_else(|| schema(format!("`{key}` is not text"))),
    }
}

/// A part's fields as found, before the rules on them are checked ([`PartFields::check`]).
#[derive(Default)]
struct PartFields<'v> {
    dtype: Option<&'v str>,
    logical: Option<&'v str>,
    blob: Option<(u64, u64)>,
    shard: Option<&'v str>,
    encoding: Option<&'v str>,
    decoded_length: Option<u64>,
    digest: Option<&'v str>,
}

impl PartFields<'_> {
    /// The part, its fields checked in the order the schema gives them.
    fn check(self, names: &mut Interner) -> Result<Part> {
        let dtype = self.dtype.ok_or_else(|| schema("a part has no `dtype`"))?;
        let dtype =
            Dtype::from_name(dtype).ok_or_else(|| schema(format!("unknown dtype {dtype:?}")))?;
        if let Some((pinned, _)) = self.logical.and_then(logical)
            && pinned != dtype
        {
            return Err(schema(format!(
                "logical type {:?} is stored as {}, not {}",
                self.logical.unwrap_or_default(),
                pinned.name(),
                dtype.name()
            )));
        }
        let blob = self.blob.ok_or_else(|| schema("a part has no `blob`"))?;
        if let Some(shard) = self.shard {
            check_shard_name(shard)?;
        }
        if self.encoding.is_some() != self.decoded_length.is_some() {
            return Err(schema("`decoded_length` is given exactly when `encoding` is"));
        }
        if let Some(d) = self.digest {
            check_digest(d)?;
        }
        Ok(Part {
            dtype,
            logical: self.logical.map(|l| names.get(l)),
            blob,
            shard: self.shard.map(|s| names.get(s)),
            encoding: self.encoding.map(|e| names.get(e)),
            decoded_length: self.decoded_length,
            digest: self.digest.map(Box::from),
        })
    }
}

fn part(value: &Value, names: &mut Interner) -> Result<Part> {
    let Value::Map(entries) = value else { return Err(schema("a part is not a map")) };
    let dtype = optional_text(entries, "dtype")?;
    let logical = optional_text(entries, "type")?;
    let blob = match field(entries, "blob") {
        Some(Value::Array(a)) if a.len() == 2 => match (a[0].as_uint(), a[1].as_uint()) {
            (Some(offset), Some(len)) => Some((offset, len)),
            _ => return Err(schema("`blob` is not two unsigned integers")),
        },
        Some(_) => return Err(schema("`blob` is not [offset, length]")),
        None => None,
    };
    let shard = optional_text(entries, "shard")?;
    let encoding = optional_text(entries, "encoding")?;
    let decoded_length = match field(entries, "decoded_length") {
        None => None,
        Some(v) => {
            Some(v.as_uint().ok_or_else(|| schema("`decoded_length` is not an unsigned integer"))?)
        }
    };
    let digest = optional_text(entries, "digest")?;
    PartFields { dtype, logical, blob, shard, encoding, decoded_length, digest }.check(names)
}

fn object(value: &Value, names: &mut Interner) -> Result<Object> {
    let Value::Map(entries) = value else { return Err(schema("an object is not a map")) };
    let shape = match field(entries, "shape") {
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_uint().ok_or_else(|| schema("a dimension is not an unsigned integer")))
            .collect::<Result<Vec<u64>>>()?,
        Some(_) => return Err(schema("`shape` is not an array")),
        None => return Err(schema("an object has no `shape`")),
    };
    let layout = names
        .get(optional_text(entries, "layout")?.ok_or_else(|| schema("an object has no `layout`"))?);
    let parts_value = field(entries, "parts").ok_or_else(|| schema("an object has no `parts`"))?;
    let mut named = Vec::new();
    for (name, value) in text_map(parts_value, "`parts`")? {
        check_name(name, "part name")?;
        named.push((names.get(name), part(value, names)?));
    }
    let parts = Parts::new(named);
    if parts.is_empty() {
        return Err(schema("an object has no parts"));
    }
    let attributes = attributes(field(entries, "attributes"), "an object's `attributes`")?;
    Ok(Object { shape, layout, parts, attributes: attributes.map(Box::new) })
}

/// Parses the decoded manifest (§2.4–2.7), checking the schema, names and shard names.
///
/// # Errors
/// `schema`, `name` or `shard_name`.
pub fn parse(root: &Value) -> Result<Manifest> {
    let Value::Map(entries) = root else { return Err(schema("the manifest is not a map")) };
    let objects_value =
        field(entries, "objects").ok_or_else(|| schema("the manifest has no `objects`"))?;
    let mut named = Vec::new();
    let mut names = Interner::default();
    for (name, value) in text_map(objects_value, "`objects`")? {
        check_name(name, "object name")?;
        named.push((name.to_owned(), object(value, &mut names)?));
    }
    let objects = Named::new(named);
    let shards = shard_table(field(entries, "shards"))?;
    let attributes = attributes(field(entries, "attributes"), "`attributes`")?;
    Ok(Manifest { objects, shards, attributes })
}

/// The shard table (the value of `shards`, if the manifest has one).
fn shard_table(table: Option<&Value>) -> Result<BTreeMap<String, Shard>> {
    let mut shards = BTreeMap::new();
    if let Some(table) = table {
        for (name, value) in text_map(table, "`shards`")? {
            check_shard_name(name)?;
            let Value::Map(e) = value else { return Err(schema("a shard entry is not a map")) };
            let size = field(e, "size").and_then(Value::as_uint);
            let digest = optional_text(e, "digest")?;
            let (Some(size), Some(digest)) = (size, digest) else {
                return Err(schema(format!("shard {name:?} needs `size` and `digest`")));
            };
            check_digest(digest)?;
            shards.insert(name.to_owned(), Shard { size, digest: digest.to_owned() });
        }
    }
    Ok(shards)
}

/// Checks the manifest's CBOR (§2.2) and parses it (§2.4–2.7) as [`crate::cbor::decode`] then
/// [`parse`] would, without building the whole tree: the objects are decoded one at a time, so a
/// manifest of a million objects never holds a million decoded items at once.
///
/// # Errors
/// The CBOR rules (the message says so), `manifest_too_large` past [`MAX_VALUES`] items, then
/// as [`parse`].
pub fn parse_bytes(bytes: &[u8]) -> Result<Manifest> {
    parse_bytes_within(bytes, MAX_VALUES)
}

/// [`parse_bytes`] with a value budget of `max_values` items.
pub(crate) fn parse_bytes_within(bytes: &[u8], max_values: u64) -> Result<Manifest> {
    match direct::manifest(direct::Bytes::Memory(bytes), max_values)? {
        Some((manifest, _)) => Ok(manifest),
        None => parse_in_steps(bytes, max_values),
    }
}

/// The bytes of a manifest read at a time by [`parse_read`] (more when one item needs more).
pub(crate) const WINDOW: usize = 1 << 20;

/// Parses a manifest of `len` bytes read `window` bytes at a time with `read(at, buf)`, in one
/// pass and without holding its bytes; `None` when it is not parsed so, and [`parse_bytes`] on
/// the whole of it is to give the verdict. With the manifest, the XXH3-64 of its bytes.
///
/// # Errors
/// Those of `read`.
pub(crate) fn parse_read(
    len: u64,
    window: usize,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<Option<(Manifest, u64)>> {
    direct::manifest(direct::Bytes::Read { len, window, read }, MAX_VALUES)
}

/// [`parse_bytes`] the general way: the CBOR checked whole (and its items counted against
/// `max_values`), then the objects decoded one at a time into trees and parsed, then the rest.
pub(super) fn parse_in_steps(bytes: &[u8], max_values: u64) -> Result<Manifest> {
    use crate::cbor;
    let cbor_error = |e: Error| e.within("in the manifest's CBOR");
    // Every item was counted before any is decoded: what follows decodes parts of what was
    // counted, and builds no more items than that.
    // The refusals below are those `parse` gives the whole tree, found without building it.
    let root = cbor::map_entries_within(bytes, max_values).map_err(cbor_error)?;
    let Some(root) = root else { return Err(schema("the manifest is not a map")) };
    let Some((_, range)) = root.iter().find(|(k, _)| k.as_text() == Some("objects")) else {
        return Err(schema("the manifest has no `objects`"));
    };
    let Some(entries) = cbor::entries_at(bytes, range.clone(), 1)? else {
        return Err(schema("`objects` is not a map"));
    };
    // Every key is text before any object is looked at (as the whole tree's parse has it).
    if entries.iter().any(|(k, _)| k.as_text().is_none()) {
        return Err(schema("a key of `objects` is not text"));
    }
    let mut named = Vec::with_capacity(entries.len());
    let mut names = Interner::default();
    for (key, range) in entries {
        // The name decoded with the key is kept, not copied.
        let Value::Text(name) = key else { return Err(schema("a key of `objects` is not text")) };
        check_name(&name, "object name")?;
        named.push((name, object_at(bytes, range, &mut names)?));
    }
    let objects = Named::new(named);
    // The shard table is decoded whole; the attributes are kept as their bytes; keys not known
    // (checked above) are left: nothing is built of them.
    let range_of = |name: &str| root.iter().find(|(k, _)| k.as_text() == Some(name));
    let table = range_of("shards").map(|(_, range)| cbor::decode_at(bytes, range.clone(), 1));
    let shards = shard_table(table.transpose()?.as_ref())?;
    let attributes = range_of("attributes")
        .map(|(_, range)| attributes_of(&bytes[range.clone()], "`attributes`"))
        .transpose()?;
    Ok(Manifest { objects, shards, attributes })
}

/// The object at `range` of the checked manifest `bytes`, parsed as [`object`] parses its tree
/// but for its attributes, kept as their bytes (never decoded into a tree).
fn object_at(bytes: &[u8], range: std::ops::Range<usize>, names: &mut Interner) -> Result<Object> {
    use crate::cbor;
    let Some(entries) = cbor::entries_at(bytes, range.clone(), 2)? else {
        // Not a map: the tree's parse says so.
        return object(&cbor::decode_at(bytes, range, 2)?, names);
    };
    let mut tree = Vec::with_capacity(entries.len());
    let mut encoded = None;
    for (key, range) in entries {
        if key.as_text() == Some("attributes") {
            encoded = Some(range);
        } else {
            tree.push((key, cbor::decode_at(bytes, range, 3)?));
        }
    }
    // The attributes are the last thing `object` checks: their verdict comes in the same order.
    let mut o = object(&Value::Map(tree), names)?;
    if let Some(range) = encoded {
        let attributes = attributes_of(&bytes[range], "an object's `attributes`")?;
        o.attributes = Some(Box::new(attributes));
    }
    Ok(o)
}

/// The manifest read in one pass, objects built straight from the bytes with no tree between,
/// every CBOR rule checked on the way. Anything out of the plain case (a key of an object or a
/// part that is not text, a field of another type) or a broken rule gives `None`, and
/// [`parse_bytes`] takes the general way, which gives the verdict: so this path only ever
/// accepts what the general one accepts, with the same result (the corpus tests compare them
/// on every manifest and on damaged copies of each).
pub(super) mod direct {
    use xxhash_rust::xxh3::Xxh3;

    use ztensor_format::Attributes;

    use super::{
        Interner, Manifest, Named, Object, Part, PartFields, Parts, Shared, attributes_of,
        check_name, shard_table,
    };
    use crate::cbor::{Decoder, KeyOrder, Value};
    use crate::error::Result;

    /// Reads a key of a map that must be text, checking its place after the one before.
    fn key<'a>(d: &mut Decoder<'a>, order: &mut KeyOrder, depth: usize) -> Option<&'a str> {
        let start = d.at();
        let key = d.text(depth).ok()??;
        order.next(d, start).ok()?;
        Some(key)
    }

    /// Where the manifest's bytes come from: all in memory, or read from a file a window at a
    /// time (`read(at, buf)` fills `buf` with the bytes at `at`), hashed as they arrive.
    pub(crate) enum Bytes<'a> {
        /// The whole manifest.
        Memory(&'a [u8]),
        /// A manifest of `len` bytes read on demand, `window` bytes at least at a time.
        Read { len: u64, window: usize, read: &'a mut dyn FnMut(u64, &mut [u8]) -> Result<()> },
    }

    /// A window on the manifest: the bytes from `base` on, read so far and not yet passed.
    struct Window<'a> {
        bytes: Bytes<'a>,
        buf: Vec<u8>,
        base: u64,
        pos: usize,
        hash: Xxh3,
        /// Items the manifest may still hold, of `max_values`: spent as items are passed.
        values_left: u64,
        max_values: u64,
    }

    impl<'a> Window<'a> {
        fn new(bytes: Bytes<'a>, max_values: u64) -> Window<'a> {
            Window {
                bytes,
                buf: Vec::new(),
                base: 0,
                pos: 0,
                hash: Xxh3::new(),
                values_left: max_values,
                max_values,
            }
        }

        /// The manifest's length.
        fn len(&self) -> u64 {
            match &self.bytes {
                Bytes::Memory(b) => b.len() as u64,
                Bytes::Read { len, .. } => *len,
            }
        }

        /// The bytes not yet passed, and how many of the manifest follow them.
        fn rest(&self) -> (&[u8], usize) {
            let (bytes, end) = match &self.bytes {
                Bytes::Memory(b) => (&b[self.pos..], b.len() as u64),
                Bytes::Read { .. } => (&self.buf[self.pos..], self.base + self.buf.len() as u64),
            };
            (bytes, usize::try_from(self.len() - end).unwrap_or(usize::MAX))
        }

        /// Reads on: the bytes not yet passed move to the front, and as many again are read
        /// after them (at least a window). `false` when the manifest has no more.
        fn more(&mut self) -> Result<bool> {
            let len = self.len();
            let Bytes::Read { read, window, .. } = &mut self.bytes else { return Ok(false) };
            let end = self.base + self.buf.len() as u64;
            if end == len {
                return Ok(false);
            }
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
            let want = self.buf.len().max(*window).max(1) as u64;
            let add = usize::try_from(want.min(len - end)).unwrap_or(usize::MAX);
            let kept = self.buf.len();
            // A window that cannot grow gives up: the general way reads the manifest whole,
            // and says so when the memory is refused.
            if self.buf.try_reserve_exact(add).is_err() {
                return Ok(false);
            }
            self.buf.resize(kept + add, 0);
            read(end, &mut self.buf[kept..])?;
            self.hash.update(&self.buf[kept..]);
            Ok(true)
        }

        /// The next item (or items) that `f` reads: `f` is given a reader on the bytes not
        /// yet passed and tried again on more when it fails before the manifest's end. `None`:
        /// it fails with the whole rest before it.
        fn next<T>(
            &mut self,
            mut f: impl FnMut(&mut Decoder<'_>) -> Option<T>,
        ) -> Result<Option<T>> {
            loop {
                let (values_left, max_values) = (self.values_left, self.max_values);
                let (bytes, beyond) = self.rest();
                let mut d = Decoder::window(bytes, beyond, values_left, max_values);
                if let Some(value) = f(&mut d) {
                    let (at, values_left) = (d.at(), d.values_left());
                    self.pos += at;
                    self.values_left = values_left;
                    return Ok(Some(value));
                }
                if !self.more()? {
                    return Ok(None);
                }
            }
        }

        /// Whether every byte was read and passed, and the XXH3-64 of those read.
        fn finish(mut self) -> Result<(bool, u64)> {
            while self.more()? {}
            let passed = self.rest().0.is_empty();
            Ok((passed, self.hash.digest()))
        }
    }

    /// The order of a map's keys across windows: the last key's encoding is kept.
    #[derive(Default)]
    struct Order(Option<Vec<u8>>);

    impl Order {
        /// Whether `key` (an encoding) sorts strictly after the last one.
        fn after(&self, key: &[u8]) -> bool {
            self.0.as_deref().is_none_or(|last| last < key)
        }

        fn set(&mut self, key: &[u8]) {
            let last = self.0.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(key);
        }

        /// As [`Order::set`] for a text key, encoded again rather than copied from a window.
        fn set_text(&mut self, key: &str) {
            let last = self.0.get_or_insert_with(Vec::new);
            last.clear();
            ztensor_format::cbor::head(last, 3, key.len() as u64);
            last.extend_from_slice(key.as_bytes());
        }
    }

    /// The manifest, parsed in one pass straight from its bytes; `Ok(None)` when the general
    /// way is to give the verdict. For bytes read from a file, also the XXH3-64 of the bytes.
    pub(crate) fn manifest(bytes: Bytes<'_>, max_values: u64) -> Result<Option<(Manifest, u64)>> {
        let mut w = Window::new(bytes, max_values);
        let Some(n) = w.next(|d| d.head(5, 0).ok()?)? else { return Ok(None) };
        let mut order = Order::default();
        let mut names = Interner::default();
        let mut objects = None;
        let (mut shards, mut attributes) = (None, None);
        for _ in 0..n {
            // The key, with the value unless it is `objects`. Only the shard table and the
            // attributes are kept; any other key and its value (text or not) are checked and
            // passed, building nothing.
            let entry = w.next(|d| {
                let key = match d.text(1).ok()? {
                    Some(text) => Some(text.to_owned()),
                    None => {
                        d.skip(1).ok()?;
                        None
                    }
                };
                let encoded = &d.bytes()[..d.at()];
                if !order.after(encoded) {
                    return None;
                }
                // `None`: the objects, read next; `Some(None)`: passed.
                let kept = match key {
                    Some(key) if key == "objects" => None,
                    Some(key) if key == "shards" => Some(Some(Kept::Shards(d.value(1).ok()?))),
                    // Checked, then kept as their bytes: never a tree.
                    Some(key) if key == "attributes" => {
                        let start = d.at();
                        d.skip(1).ok()?;
                        let attributes = attributes_of(&d.bytes()[start..d.at()], "").ok()?;
                        Some(Some(Kept::Attributes(attributes)))
                    }
                    _ => {
                        d.skip(1).ok()?;
                        Some(None)
                    }
                };
                Some((encoded.to_vec(), kept))
            })?;
            let Some((encoded, kept)) = entry else { return Ok(None) };
            order.set(&encoded);
            match kept {
                Some(Some(Kept::Shards(value))) => shards = Some(value),
                Some(Some(Kept::Attributes(a))) => attributes = Some(a),
                Some(None) => {}
                None => match self::objects(&mut w, &mut names)? {
                    Some(o) => objects = Some(o),
                    None => return Ok(None),
                },
            }
        }
        let (passed, hash) = w.finish()?;
        if !passed {
            return Ok(None);
        }
        // The shard table is small: parsed from its tree.
        let Ok(shards) = shard_table(shards.as_ref()) else { return Ok(None) };
        let Some(objects) = objects else { return Ok(None) };
        Ok(Some((Manifest { objects, shards, attributes }, hash)))
    }

    /// A value of the root that the one-pass parse keeps.
    enum Kept {
        /// The shard table's tree.
        Shards(Value),
        /// The file's attributes.
        Attributes(Attributes),
    }

    fn objects(w: &mut Window<'_>, names: &mut Interner) -> Result<Option<Named<Object>>> {
        let Some(n) = w.next(|d| d.head(5, 1).ok()?)? else { return Ok(None) };
        // Room for the count claimed, up to what the manifest's bytes can hold: an object
        // takes 40 bytes of CBOR at least (its name, layout, shape and a part with its type
        // and blob), so a hostile count reserves no more than a fraction of the manifest.
        let most = w.len() / 40;
        let mut named = Vec::with_capacity(usize::try_from(n.min(most)).unwrap_or(0));
        let mut order = Order::default();
        for _ in 0..n {
            let entry = w.next(|d| {
                let name = d.text(2).ok()??;
                let encoded = &d.bytes()[..d.at()];
                if !order.after(encoded) {
                    return None;
                }
                check_name(name, "object name").ok()?;
                Some((name.to_owned(), object(d, names)?))
            })?;
            let Some((name, object)) = entry else { return Ok(None) };
            order.set_text(&name);
            named.push((name, object));
        }
        Ok(Some(Named::new(named)))
    }

    fn object(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Object> {
        let n = d.head(5, 2).ok()??;
        let (mut shape, mut layout, mut parts, mut attributes) = (None, None, None, None);
        let mut order = KeyOrder::default();
        for _ in 0..n {
            match key(d, &mut order, 3)? {
                "shape" => {
                    let rank = d.head(4, 3).ok()??;
                    let mut dims = Vec::with_capacity(usize::try_from(rank.min(64)).ok()?);
                    for _ in 0..rank {
                        dims.push(d.head(0, 4).ok()??);
                    }
                    shape = Some(dims);
                }
                "layout" => layout = Some(d.text(3).ok()??),
                "parts" => parts = Some(self::parts(d, names)?),
                "attributes" => {
                    let start = d.at();
                    d.skip(3).ok()?;
                    let encoded = &d.bytes()[start..d.at()];
                    attributes = Some(Box::new(attributes_of(encoded, "").ok()?));
                }
                _ => d.skip(3).ok()?,
            }
        }
        let parts = Parts::new(parts?);
        if parts.is_empty() {
            return None;
        }
        Some(Object { shape: shape?, layout: names.get(layout?), parts, attributes })
    }

    fn parts(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Vec<(Shared, Part)>> {
        let n = d.head(5, 3).ok()??;
        let mut named = Vec::with_capacity(usize::try_from(n.min(8)).ok()?);
        let mut order = KeyOrder::default();
        for _ in 0..n {
            let name = key(d, &mut order, 4)?;
            check_name(name, "part name").ok()?;
            named.push((names.get(name), part(d, names)?));
        }
        Some(named)
    }

    fn part(d: &mut Decoder<'_>, names: &mut Interner) -> Option<Part> {
        let n = d.head(5, 4).ok()??;
        let mut f = PartFields::default();
        let mut order = KeyOrder::default();
        for _ in 0..n {
            match key(d, &mut order, 5)? {
                "dtype" => f.dtype = Some(d.text(5).ok()??),
                "type" => f.logical = Some(d.text(5).ok()??),
                "blob" => {
                    if d.head(4, 5).ok()?? != 2 {
                        return None;
                    }
                    let offset = d.head(0, 6).ok()??;
                    f.blob = Some((offset, d.head(0, 6).ok()??));
                }
                "shard" => f.shard = Some(d.text(5).ok()??),
                "encoding" => f.encoding = Some(d.text(5).ok()??),
                "decoded_length" => f.decoded_length = Some(d.head(0, 5).ok()??),
                "digest" => f.digest = Some(d.text(5).ok()??),
                _ => d.skip(5).ok()?,
            }
        }
        f.check(names).ok()
    }
}
