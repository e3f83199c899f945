//! The conformance dump (`ztensor-dump/1`): what `ztensor dump --json` prints, exactly the shape
//! every implementation under test prints (`spec/conformance-dump.md`). A library of its own so
//! that the tool, the conformance runner and the golden fixtures share one implementation and can
//! never disagree, without the conformance tooling depending on the command-line tool.
//!
//! ```
//! use ztensor_format::{DType, Version};
//! use ztensor_io::{Reader, WriteOptions, Writer};
//!
//! let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
//! w.add_dense("w", &[2], DType::U8, &[7, 9], &WriteOptions::raw()).unwrap();
//! let (file, _) = w.finish().unwrap();
//! let reader = Reader::new(&file[..], &ztensor_dump::options()).unwrap();
//! let dump = ztensor_dump::accepted(&reader);
//! assert_eq!(dump["dump"], "ztensor-dump/1");
//! assert_eq!(dump["objects"][0]["name"], "w");
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod shape;

use std::io::Write;

use serde_json::{Map, Value as Json, json};
use ztensor_format::{Attributes, Encoding, Value, ValueRef};
use ztensor_io::codec::sha256_hex;
use ztensor_io::{ReadAt, Reader};
use ztensor_registry::Place;
use ztensor_tensorbuffers::TbFile;

/// The options files are read with: the default limits, with the decode limits fitted to this
/// machine ([`ztensor_io::machine_limits`]), and not strict (the dump reports what a lenient
/// reader accepts; rejects name their rule).
pub fn options() -> ztensor_format::Options {
    ztensor_io::machine_options(false)
}

/// The dump of an accepted zTensor file.
pub fn accepted<S: ReadAt>(reader: &Reader<S>) -> Json {
    let mut dump = header(reader);
    let attributes = reader.manifest().manifest().attributes.as_ref();
    dump["attributes"] = attributes.map_or(Json::Null, attributes_to_json);
    let objects = objects(reader).map(|(mut object, attributes)| {
        object["attributes"] = attributes.map_or(Json::Null, attributes_to_json);
        object
    });
    dump["objects"] = Json::Array(objects.collect());
    dump
}

/// Writes the dump of an accepted zTensor file to `out`, one object at a time: the same text as
/// printing [`accepted`], holding one object's JSON rather than the whole dump.
///
/// # Errors
/// Errors writing to `out`.
pub fn write_accepted<S: ReadAt>(reader: &Reader<S>, out: &mut impl Write) -> std::io::Result<()> {
    // Attributes are written straight from the manifest's values, never held as JSON too.
    let Json::Object(head) = header(reader) else { unreachable!("the header is an object") };
    let attributes = reader.manifest().manifest().attributes.as_ref();
    // The header's last member is `"objects"`: its array is written in place.
    write_members(out, &head, attributes, |out| {
        out.write_all(b"[")?;
        for (i, (object, attributes)) in objects(reader).enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let Json::Object(object) = object else {
                unreachable!("an object's dump is an object")
            };
            write_members(out, &object, attributes, |_| Ok(()))?;
        }
        out.write_all(b"]")
    })
}

/// Writes `members` as a JSON object, exactly as `serde_json` would, with `attributes` in place
/// of the `"attributes"` member (written straight from the manifest's values, never held as
/// JSON too) and `objects` writing the `"objects"` member's value.
fn write_members<W: Write>(
    out: &mut W,
    members: &Map<String, Json>,
    attributes: Option<&Attributes>,
    objects: impl FnOnce(&mut W) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut objects = Some(objects);
    out.write_all(b"{")?;
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, key)?;
        out.write_all(b":")?;
        match (key.as_str(), objects.take_if(|_| key == "objects")) {
            ("attributes", _) => {
                serde_json::to_writer(&mut *out, &attributes.map(|a| JsonOf(a.root())))?
            }
            (_, Some(objects)) => objects(out)?,
            _ => serde_json::to_writer(&mut *out, value)?,
        }
    }
    out.write_all(b"}")
}

/// The dump's members before its objects, and `"objects": null` in their place.
fn header<S: ReadAt>(reader: &Reader<S>) -> Json {
    let manifest = reader.manifest().manifest();
    // Attributes and objects are filled in by the caller (written straight from the values
    // when streaming).
    shape::accepted(
        reader.version().label(),
        json!(manifest.version_string),
        Json::Null,
        Json::Null,
    )
}

/// Every object's dump, sorted by name (bytewise).
/// Each comes with its attributes, for the caller to fill in.
fn objects<'r, S: ReadAt>(
    reader: &'r Reader<S>,
) -> impl Iterator<Item = (Json, Option<&'r Attributes>)> + 'r {
    let mut objects: Vec<_> = reader.objects().enumerate().collect();
    objects.sort_by(|(_, a), (_, b)| a.name().as_bytes().cmp(b.name().as_bytes()));
    // Objects stored exactly alike (aliases of one blob) are decoded and hashed once.
    // Only results of groups with more than one member are kept, until the group's last.
    let alias_of = reader.manifest().aliases();
    let mut left = vec![0usize; alias_of.len()];
    for &class in &alias_of {
        left[class] += 1;
    }
    let mut sound: std::collections::HashMap<usize, Map<String, Json>> =
        std::collections::HashMap::new();
    objects.into_iter().map(move |(i, o)| {
        let class = alias_of[i];
        left[class] -= 1;
        let (components, error) = match sound.get(&class) {
            Some(components) => (components.clone(), Json::Null),
            None => {
                let (components, error) = object(o);
                if error.is_null() && left[class] > 0 {
                    sound.insert(class, components.clone());
                }
                (components, error)
            }
        };
        if left[class] == 0 {
            sound.remove(&class);
        }
        let model = o.model();
        // v0.1 layouts are reported by their 1.2 names (`sparsecsr` as `sparse_csr`).
        let format = model.format.name();
        let dump =
            shape::object(o.name(), format, json!(model.shape), Json::Null, components, error);
        (dump, model.attributes.as_deref())
    })
}

/// The dump of a rejected file.
pub fn rejected(kind: &str, message: &str) -> Json {
    shape::rejected(kind, message)
}

/// An object's components as the dump shows them, and its error (`null` when it has none).
/// The object streams through in pieces (digests checked on the stored bytes, the data rules
/// and each component's SHA-256 on the decoded ones), so an object of any size and layout is
/// dumped in a few MiB: the same dump as decoding it whole.
fn object<S: ReadAt>(o: ztensor_io::Object<'_, S>) -> (Map<String, Json>, Json) {
    use ztensor_format::DigestAlgorithm;
    let model = o.model();
    // Each decoded component's hash, in role order.
    let mut seen: Vec<(String, ztensor_io::codec::Hasher)> = Vec::new();
    let outcome = o.read_pieces(4 << 20, |role, piece| {
        if seen.last().is_none_or(|(r, _)| r != role) {
            let hasher = ztensor_io::codec::Hasher::new(&DigestAlgorithm::Sha256)
                .ok_or_else(|| ztensor_io::Error::failed("SHA-256 is not available"))?;
            seen.push((role.to_owned(), hasher));
        }
        if let Some((_, hasher)) = seen.last_mut() {
            hasher.update(piece);
        }
        Ok(())
    });
    let mut components = Map::new();
    let error = match outcome {
        Ok(decoded) => {
            // A v0.1 single blob is read as its parts; their encoding is the blob's.
            let blob = model.components.get("data");
            for d in decoded {
                let sha256 = match seen.iter().find(|(r, _)| *r == d.role) {
                    Some((_, hasher)) => hasher_hex(hasher),
                    // Components with no bytes are handed over with none.
                    None => sha256_hex(&[]),
                };
                let encoding = model.components.get(d.role.as_str()).or(blob).map_or_else(
                    || Encoding::Raw.name().to_owned(),
                    |c| c.encoding.name().to_owned(),
                );
                let logical_type = d.logical_type.as_ref().map(|t| t.name());
                components.insert(
                    d.role.clone(),
                    shape::component(
                        d.dtype.name(),
                        logical_type,
                        &encoding,
                        Some((d.len, sha256)),
                    ),
                );
            }
            Json::Null
        }
        Err(e) => {
            for (role, c) in &model.components {
                components.insert(role.to_owned(), undecoded(c));
            }
            Json::String(one_line(&e.to_string()))
        }
    };
    (components, error)
}

fn hasher_hex(hasher: &ztensor_io::codec::Hasher) -> String {
    match hasher.clone().finish() {
        ztensor_format::Digest::Sha256(b) => ztensor_format::to_hex(&b[..]),
        other => other.to_string(),
    }
}

/// A component of an object that could not be decoded, as the dump shows it: its types and
/// encoding, no length or hash.
fn undecoded(c: &ztensor_format::Component) -> Json {
    let logical_type = c.logical_type.as_ref().map(|t| t.name());
    shape::component(&c.dtype.to_string(), logical_type, c.encoding.name(), None)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a file is, for the dump: a zTensor file to dump, or a finished dump (TensorBuffers,
/// rejected) and whether it was accepted. `S` is where its bytes are.
enum Opened<S: ReadAt> {
    Zt(Box<Reader<S>>),
    Zt2(Box<ztensor_v2::File<S>>),
    Tb(Box<TbFile<S>>),
    Done(Json, bool),
}

fn open(
    path: &std::path::Path,
    options: &ztensor_format::Options,
) -> std::io::Result<Opened<Place>> {
    // Told once; what it is read as is read through the same descriptor. A file of no format
    // is judged as zTensor, so it gets the rule it breaks.
    match ztensor_registry::Detected::new(path) {
        Ok(detected) => open_detected(detected, options),
        Err(_) => {
            let opening =
                ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
            let reader = ztensor_io::FileSource::open(path)
                .and_then(|file| ztensor_registry::open_zt_at(Place::from(file), &opening));
            zt_opened(reader, options)
        }
    }
}

/// What `detected` (a file, or an object in a bucket) is opened as for the dump, through the
/// format registry as every command opens its inputs: what it recognises as zTensor 2 or
/// TensorBuffers is dumped as such (a zTensor 2 root with its shards, found beside it);
/// everything else is judged as zTensor.
fn open_detected(
    mut detected: ztensor_registry::Detected,
    options: &ztensor_format::Options,
) -> std::io::Result<Opened<Place>> {
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    match detected.kind() {
        ztensor_registry::Kind::Zt2 => zt2_opened(detected.open_zt2(&opening), options),
        ztensor_registry::Kind::TensorBuffers => Ok(match detected.open_tb(&opening) {
            Ok(Ok(reader)) => Opened::Tb(Box::new(reader)),
            Ok(Err(e)) => Opened::Done(rejected(e.kind().id(), &e.to_string()), false),
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        }),
        _ => zt_opened(detected.open_zt(&opening), options),
    }
}

/// A zTensor 2 file as opened, for the dump: held to the expansion budget, a broken rule a
/// rejection.
fn zt2_opened<S: ReadAt>(
    file: Result<ztensor_v2::File<S>, ztensor_registry::OpenError>,
    options: &ztensor_format::Options,
) -> std::io::Result<Opened<S>> {
    Ok(match file {
        // What checking every object would decode is held to the expansion budget, as every
        // command holds its input (a shared blob counts once: it is checked once).
        Ok(file) => match file.check_expansion(&options.limits) {
            Ok(_) => Opened::Zt2(Box::new(file)),
            Err(e) => {
                let kind = e.format_error().map_or("decoded_too_large", |f| f.kind().id());
                Opened::Done(rejected(kind, &one_line(&e.to_string())), false)
            }
        },
        Err(ztensor_registry::OpenError::Zt2(e)) => match e.broken() {
            Some(rule) => Opened::Done(rejected(rule.id(), &one_line(&e.to_string())), false),
            None => return Err(std::io::Error::other(e.to_string())),
        },
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    })
}

/// A zTensor 0.1/1.x file as opened, for the dump: held to the expansion budget, a broken rule
/// a rejection.
fn zt_opened<S: ReadAt>(
    reader: ztensor_io::Result<Reader<S>>,
    options: &ztensor_format::Options,
) -> std::io::Result<Opened<S>> {
    match reader {
        // Held to the expansion budget as every command holds its input: a file whose objects
        // decode to far more than its size explains is refused by that rule (`--max-expansion`
        // raises it) rather than decoded and hashed for minutes. A blob many objects share is
        // decoded once here, and counts once.
        Ok(reader) => {
            let len = reader.source().len();
            Ok(match ztensor_io::check_read_expansion(&reader, len, &options.limits) {
                Ok(_) => Opened::Zt(Box::new(reader)),
                Err(e) => {
                    let kind = e.format_error().map_or("decoded_too_large", |f| f.kind().id());
                    Opened::Done(rejected(kind, &one_line(&e.to_string())), false)
                }
            })
        }
        Err(e) => match e.format_error() {
            Some(f) => Ok(Opened::Done(rejected(f.kind().id(), &f.to_string()), false)),
            None => Err(std::io::Error::other(e.to_string())),
        },
    }
}

/// The dump of the file at `path`, detected by content, and whether it was accepted.
///
/// # Errors
/// When the file cannot be read at all (an I/O error, not a verdict).
pub fn file(path: &std::path::Path) -> std::io::Result<(Json, bool)> {
    file_with(path, &options())
}

/// As [`file()`], read with `options` (their limits: the expansion budget among them).
///
/// # Errors
/// When the file cannot be read at all (an I/O error, not a verdict).
pub fn file_with(
    path: &std::path::Path,
    options: &ztensor_format::Options,
) -> std::io::Result<(Json, bool)> {
    Ok(match open(path, options)? {
        Opened::Zt(reader) => (accepted(&reader), true),
        Opened::Zt2(file) => (zt2(&file), true),
        Opened::Tb(reader) => (tensorbuffers(&reader), true),
        Opened::Done(dump, accepted) => (dump, accepted),
    })
}

/// Writes the dump of the file at `path` to `out` (a zTensor file one object at a time) and a
/// newline; says whether the file was accepted.
///
/// # Errors
/// When the file cannot be read at all, and errors writing to `out`.
pub fn write_file(path: &std::path::Path, out: &mut impl Write) -> std::io::Result<bool> {
    write_file_with(path, &options(), out)
}

/// As [`write_file`], read with `options` (their limits: the expansion budget among them).
///
/// # Errors
/// When the file cannot be read at all, and errors writing to `out`.
pub fn write_file_with(
    path: &std::path::Path,
    options: &ztensor_format::Options,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    write_opened(open(path, options)?, out)
}

/// As [`write_file_with`], for an input already told (a file, or an object in a bucket: a
/// URL is dumped as its file is).
///
/// # Errors
/// When the bytes cannot be read at all, and errors writing to `out`.
pub fn write_detected_with(
    detected: ztensor_registry::Detected,
    options: &ztensor_format::Options,
    out: &mut impl Write,
) -> std::io::Result<bool> {
    write_opened(open_detected(detected, options)?, out)
}

/// Writes the dump of what was opened, and a newline; says whether it was accepted.
fn write_opened<S: ReadAt>(opened: Opened<S>, out: &mut impl Write) -> std::io::Result<bool> {
    let accepted = match opened {
        Opened::Zt(reader) => {
            write_accepted(&reader, out)?;
            true
        }
        Opened::Tb(reader) => {
            serde_json::to_writer(&mut *out, &TbDump(&reader))?;
            true
        }
        Opened::Zt2(file) => {
            write_zt2(&file, out)?;
            true
        }
        Opened::Done(dump, accepted) => {
            serde_json::to_writer(&mut *out, &dump)?;
            accepted
        }
    };
    out.write_all(b"\n")?;
    Ok(accepted)
}

/// The dump of a zTensor 2 file (container `zt-2`, version `2`): each object's layout as its
/// `format`, each part as a component (its storage and logical type, its encoding id or `raw`,
/// the length and SHA-256 of its decoded bytes once its digest and logical-type rules are
/// checked). An object with a part this reader cannot decode (an unknown encoding, a part in a
/// shard) or whose data breaks a rule (a digest, a `bool` byte, CSR or COO structure) carries
/// the error, its parts without lengths or hashes. A data shard has no objects.
pub fn zt2<S: ReadAt>(file: &ztensor_v2::File<S>) -> Json {
    let mut dump = zt2_header(file, true);
    dump["objects"] = Json::Array(zt2_objects(file, true).map(|(o, _)| o).collect());
    dump
}

/// Writes the dump of a zTensor 2 file to `out`, one object at a time: the same text as
/// printing [`zt2`], holding one object's JSON rather than the whole dump.
///
/// # Errors
/// Errors writing to `out`.
pub fn write_zt2<S: ReadAt>(
    file: &ztensor_v2::File<S>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let Json::Object(head) = zt2_header(file, false) else {
        unreachable!("the header is an object")
    };
    let attributes = file.manifest().and_then(|m| m.attributes.as_ref());
    write_members(out, &head, attributes, |out| {
        out.write_all(b"[")?;
        for (i, (object, attributes)) in zt2_objects(file, false).enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let Json::Object(object) = object else {
                unreachable!("an object's dump is an object")
            };
            write_members(out, &object, attributes, |_| Ok(()))?;
        }
        out.write_all(b"]")
    })
}

/// A zTensor 2 dump's members before its objects, and `"objects": null` in their place; its
/// attributes as JSON `with_attributes`, else `null` in their place (to be written from the
/// manifest, [`write_members`]).
fn zt2_header<S: ReadAt>(file: &ztensor_v2::File<S>, with_attributes: bool) -> Json {
    let attributes = file.manifest().and_then(|m| m.attributes.as_ref());
    let attributes = zt2_value(attributes.filter(|_| with_attributes));
    shape::accepted("zt-2", json!("2"), attributes, Json::Null)
}

fn zt2_value(v: Option<&Attributes>) -> Json {
    v.map_or(Json::Null, attributes_to_json)
}

/// Every object's dump, in manifest order (names in byte order), with its attributes (as JSON
/// in the dump `with_attributes`, else `null` there).
fn zt2_objects<S: ReadAt>(
    file: &ztensor_v2::File<S>,
    with_attributes: bool,
) -> impl Iterator<Item = (Json, Option<&Attributes>)> + '_ {
    let objects = file.manifest().map(|m| m.objects.iter());
    objects.into_iter().flatten().enumerate().map(move |(index, (name, o))| {
        let attributes = o.attributes.as_deref();
        (zt2_object(file, index, name, o, attributes.filter(|_| with_attributes)), attributes)
    })
}

/// Object `index` (`name`, `o`) of a zTensor 2 file as the dump shows it, `attributes` its
/// attributes' member.
fn zt2_object<S: ReadAt>(
    file: &ztensor_v2::File<S>,
    index: usize,
    name: &str,
    o: &ztensor_v2::manifest::Object,
    attributes: Option<&Attributes>,
) -> Json {
    let part_json = |p: &ztensor_v2::manifest::Part, decoded: Option<(u64, String)>| {
        let encoding = p.encoding.as_deref().unwrap_or("raw");
        shape::component(p.dtype.name(), p.logical.as_deref(), encoding, decoded)
    };
    let sha256 = || {
        ztensor_io::codec::Hasher::new(&ztensor_format::DigestAlgorithm::Sha256)
            .ok_or_else(|| "SHA-256 is not available".to_owned())
    };
    let mut components = Map::new();
    let outcome: Result<(), String> = if matches!(&*o.layout, "zt.sparse_csr/1" | "zt.sparse_coo/1")
    {
        // Read whole, as `verify` reads it: the one read that checks the digests, the logical
        // types' rules and the CSR or COO structure (indices in the shape, COO tuples given
        // once), so the dump and `verify` never disagree about an object.
        ztensor_io::TensorSource::read(file, index).map_err(|e| e.to_string()).and_then(|data| {
            for (role, p) in &o.parts {
                let bytes = data.components.get(&**role).map_or(&[][..], |c| &c.bytes[..]);
                let mut hasher = sha256()?;
                hasher.update(bytes);
                let decoded = (bytes.len() as u64, hasher_hex(&hasher));
                components.insert(role.to_string(), part_json(p, Some(decoded)));
            }
            Ok(())
        })
    } else {
        o.parts.iter().try_for_each(|(role, p)| {
            // Streamed: a few pieces held, whatever the part decodes to; its digest and
            // data rules checked as they pass; a blob other parts share decoded once.
            let check = file.check_part(name, role, true).map_err(|e| e.to_string())?;
            let hash = check.sha256.map(|h| ztensor_format::to_hex(&h[..]));
            let hash = hash.ok_or_else(|| "SHA-256 is not available".to_owned())?;
            components.insert(role.to_string(), part_json(p, Some((check.decoded_len, hash))));
            Ok(())
        })
    };
    let error = match outcome {
        Ok(()) => Json::Null,
        Err(e) => {
            components =
                o.parts.iter().map(|(role, p)| (role.to_string(), part_json(p, None))).collect();
            Json::String(one_line(&e))
        }
    };
    shape::object(name, &o.layout, json!(o.shape), zt2_value(attributes), components, error)
}

/// An item of attributes that serializes as [`cbor_to_json`] gives its value, read in place
/// and without building the JSON value first: a report of a file whose attributes hold millions
/// of values writes them straight out instead of holding a tree several times their size.
#[derive(Debug, Clone, Copy)]
pub struct JsonOf<'a>(pub ValueRef<'a>);

impl serde::Serialize for JsonOf<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use ztensor_format::attributes::{Entries, Item};
        match self.0.item() {
            Item::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&JsonOf(item))?;
                }
                seq.end()
            }
            // Attributes never repeat a key, so every text-keyed map is a JSON object as is.
            Item::Map(entries) if entries.clone().all(|(k, _)| k.as_text().is_some()) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k.as_text().unwrap_or_default(), &JsonOf(v))?;
                }
                map.end()
            }
            Item::Map(entries) => {
                struct Pairs<'a>(Entries<'a>);
                impl serde::Serialize for Pairs<'_> {
                    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut seq = s.serialize_seq(Some(self.0.len()))?;
                        for (k, v) in self.0.clone() {
                            seq.serialize_element(&[JsonOf(k), JsonOf(v)])?;
                        }
                        seq.end()
                    }
                }
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("$map", &Pairs(entries))?;
                map.end()
            }
            Item::Tag(t, v) => {
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry("$tag", &t)?;
                map.serialize_entry("value", &JsonOf(v))?;
                map.end()
            }
            // Strings as they lie: a byte string of fifty megabytes is written a piece of its
            // hex at a time, not copied, made hex whole and copied again.
            Item::Text(text) => s.serialize_str(text),
            Item::Bytes(bytes) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("$bytes", &Hex(bytes))?;
                map.end()
            }
            // Other scalars: small, the one conversion.
            _ => cbor_to_json(&self.0.to_value()).serialize(s),
        }
    }
}

/// Bytes that serialize as the lowercase hex string [`ztensor_format::to_hex`] makes of them,
/// written a piece at a time.
struct Hex<'a>(&'a [u8]);

impl serde::Serialize for Hex<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 8192];
        for chunk in self.0.chunks(buf.len() / 2) {
            for (pair, b) in buf.chunks_exact_mut(2).zip(chunk) {
                pair[0] = DIGITS[usize::from(b >> 4)];
                pair[1] = DIGITS[usize::from(b & 0xf)];
            }
            // Only ASCII digits were written.
            f.write_str(
                std::str::from_utf8(&buf[..2 * chunk.len()]).map_err(|_| std::fmt::Error)?,
            )?;
        }
        Ok(())
    }
}

/// Attributes as JSON, by the rules of the conformance dump.
pub fn attributes_to_json(attributes: &Attributes) -> Json {
    serde_json::to_value(JsonOf(attributes.root())).unwrap_or(Json::Null)
}

/// CBOR to JSON, by the rules of the conformance dump.
pub fn cbor_to_json(value: &Value) -> Json {
    match value {
        &Value::Integer(i) => shape::integer(i),
        Value::Bytes(b) => shape::bytes(ztensor_format::to_hex(b)),
        Value::Text(s) => json!(s),
        Value::Array(items) => Json::Array(items.iter().map(cbor_to_json).collect()),
        Value::Map(entries) => {
            if entries.iter().all(|(k, _)| k.as_text().is_some()) {
                let mut m = Map::new();
                for (k, v) in entries {
                    m.insert(k.as_text().unwrap_or_default().to_owned(), cbor_to_json(v));
                }
                Json::Object(m)
            } else {
                shape::pairs(entries.iter().map(|(k, v)| (cbor_to_json(k), cbor_to_json(v))))
            }
        }
        Value::Tag(t, v) => shape::tag(*t, cbor_to_json(v)),
        Value::Bool(b) => json!(b),
        Value::Null => Json::Null,
        Value::Undefined => shape::simple(23),
        Value::Simple(n) => shape::simple(*n),
        &Value::Float(f) => shape::float(f),
    }
}

/// [`tensorbuffers`] as it is written, without building the JSON first: a tensor's shape of
/// millions of dimensions is not held as millions of JSON values.
struct TbDump<'r, S: ReadAt>(&'r TbFile<S>);

impl<S: ReadAt> serde::Serialize for TbDump<'_, S> {
    fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        #[derive(serde::Serialize)]
        struct Dump<'a, T: serde::Serialize> {
            dump: &'a str,
            container: &'a str,
            version: &'a str,
            attributes: Json,
            objects: T,
        }
        #[derive(serde::Serialize)]
        struct Object<'a> {
            name: &'a str,
            format: &'a str,
            shape: &'a [u32],
            attributes: Json,
            components: Components,
            error: Json,
        }
        #[derive(serde::Serialize)]
        struct Components {
            data: Data,
        }
        #[derive(serde::Serialize)]
        struct Data {
            dtype: &'static str,
            #[serde(rename = "type")]
            logical: Json,
            encoding: &'static str,
            decoded_length: Json,
            sha256: Json,
        }
        struct Objects<'r, S: ReadAt>(&'r TbFile<S>);
        impl<S: ReadAt> serde::Serialize for Objects<'_, S> {
            fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
                let r = self.0;
                let mut tensors: Vec<_> = r.metadata().tensors.iter().collect();
                tensors.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
                s.collect_seq(tensors.into_iter().map(|t| {
                    let (length, hash, error) = match r.data(&t.name) {
                        Ok(bytes) => (json!(bytes.len()), json!(sha256_hex(&bytes)), Json::Null),
                        Err(e) => (Json::Null, Json::Null, json!(e.to_string())),
                    };
                    let data = Data {
                        dtype: t.data_type.dtype().name(),
                        logical: Json::Null,
                        encoding: "raw",
                        decoded_length: length,
                        sha256: hash,
                    };
                    Object {
                        name: &t.name,
                        format: "dense",
                        shape: &t.shape,
                        attributes: Json::Null,
                        components: Components { data },
                        error,
                    }
                }))
            }
        }
        let m = self.0.metadata();
        Dump {
            dump: shape::TAG,
            container: "tensorbuffers",
            version: &m.version,
            attributes: m.model.as_ref().map_or(Json::Null, |model| json!({"model": model})),
            objects: Objects(self.0),
        }
        .serialize(s)
    }
}

/// The conformance dump of an accepted TensorBuffers file.
pub fn tensorbuffers<S: ReadAt>(r: &TbFile<S>) -> Json {
    let m = r.metadata();
    let mut tensors: Vec<_> = m.tensors.iter().collect();
    tensors.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let objects: Vec<Json> = tensors
        .into_iter()
        .map(|t| {
            let mut components = Map::new();
            let (decoded, error) = match r.data(&t.name) {
                Ok(bytes) => (Some((bytes.len() as u64, sha256_hex(&bytes))), Json::Null),
                Err(e) => (None, json!(e.to_string())),
            };
            let dtype = t.data_type.dtype().name();
            components.insert("data".into(), shape::component(dtype, None, "raw", decoded));
            shape::object(&t.name, "dense", json!(t.shape), Json::Null, components, error)
        })
        .collect();
    let attributes = m.model.as_ref().map_or(Json::Null, |model| json!({"model": model}));
    shape::accepted("tensorbuffers", json!(m.version), attributes, Json::Array(objects))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod json_of_tests;
