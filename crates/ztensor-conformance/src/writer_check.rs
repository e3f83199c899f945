//! The writer check: recipes an implementation writes files from, and their grading.
//!
//! A recipe (`ztensor-recipe/1`, JSON) says what one file holds: its version, file attributes,
//! and objects with their format, shape, attributes, encoding, digest and every component's
//! dtype, logical type and little-endian bytes (hex). The implementation under test is run as
//! `COMMAND RECIPE.json OUT` and must write OUT (exit 0), or say it cannot write this recipe
//! (exit 3, for a version or feature it lacks); any other status is a crash.
//!
//! What it wrote is graded strictly: it must open under strict validation as the recipe's
//! version, every object must decode with its digests verified and pass the data rules, every
//! byte outside the blobs and the manifest must be zero, and the content must be the recipe's
//! (names, formats, shapes, attributes, and each component's dtype, logical type, encoding,
//! digest algorithm and bytes). Readers (ours and others') are then asked to read the file.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value as Json, json};
use ztensor_format::{DType, DigestAlgorithm, Format, LogicalType, Options, Value, Version};
use ztensor_io::{ComponentSpec, Coo, Csr, Reader, TensorSource, WriteOptions};

/// The recipe format's identifier.
pub const RECIPE: &str = "ztensor-recipe/1";

/// The exit status an implementation gives for a recipe it cannot write.
pub const UNSUPPORTED: i32 = 3;

/// One component of a recipe object.
#[derive(Debug, Clone)]
pub struct RecipeComponent {
    /// The role (`data`, `values`, …).
    pub role: String,
    /// The storage dtype (`f32`, …).
    pub dtype: DType,
    /// The 1.2 logical type, if any.
    pub logical_type: Option<LogicalType>,
    /// The decoded, little-endian bytes.
    pub bytes: Vec<u8>,
}

/// One object of a recipe.
#[derive(Debug, Clone)]
pub struct RecipeObject {
    /// Its name.
    pub name: String,
    /// `dense`, `sparse_csr`, `sparse_coo` or `quantized_group`.
    pub format: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its attributes, as JSON (strings, numbers, booleans, arrays, string-keyed objects).
    pub attributes: Option<Json>,
    /// `raw` or `zstd`, for every component.
    pub zstd: bool,
    /// The digest every component carries, if any.
    pub digest: Option<DigestAlgorithm>,
    /// Its components.
    pub components: Vec<RecipeComponent>,
}

/// The version a recipe is written as: a zTensor 0.1/1.x version, or zTensor 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// zTensor 0.1, 1.1 or 1.2.
    Zt(Version),
    /// zTensor 2 (canonical form or `zt.zstd-seekable/1` parts, an `xxh3` digest on every
    /// part).
    Zt2,
}

impl Target {
    /// The version's name in a recipe (`0.1`, `1.1`, `1.2`, `2`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Zt(v) => version_name(v),
            Target::Zt2 => "2",
        }
    }

    /// The container a dump of such a file names (`zt-1`, `zt-2`, …).
    fn container(self) -> &'static str {
        match self {
            Target::Zt(v) => v.label(),
            Target::Zt2 => "zt-2",
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one file must hold.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// Its name, unique within its version (`dense-dtypes`).
    pub name: String,
    /// The version to write.
    pub version: Target,
    /// What it covers, in a few words.
    pub covers: String,
    /// File attributes, as JSON; for 1.1, text values only (the reference 1.1 model).
    pub attributes: Option<Json>,
    /// The objects.
    pub objects: Vec<RecipeObject>,
}

impl Recipe {
    /// The largest file a writer can need for this recipe: 16 MiB (manifest, header, padding)
    /// plus 4 times its decoded bytes (zstd grows incompressible data only a little). What is
    /// larger is a failure, read no further.
    pub fn size_limit(&self) -> u64 {
        let payload: usize =
            self.objects.iter().flat_map(|o| &o.components).map(|c| c.bytes.len()).sum();
        u64::try_from(payload).unwrap_or(u64::MAX).saturating_mul(4).saturating_add(16 << 20)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Result<Vec<u8>> {
    if !text.is_ascii() || !text.len().is_multiple_of(2) {
        bail!("not hex of an even length");
    }
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .context("not hex")
        })
        .collect()
}

fn digest_algorithm(name: &str) -> DigestAlgorithm {
    match name {
        "crc32c" => DigestAlgorithm::Crc32c,
        "sha256" => DigestAlgorithm::Sha256,
        "blake3" => DigestAlgorithm::Blake3,
        other => DigestAlgorithm::Unknown(other.to_owned()),
    }
}

fn version_name(v: Version) -> &'static str {
    match v {
        Version::V0_1 => "0.1",
        Version::V1_1 => "1.1",
        Version::V1_2 => "1.2",
    }
}

impl Recipe {
    /// The recipe as JSON.
    pub fn to_json(&self) -> Json {
        let objects: Vec<Json> = self
            .objects
            .iter()
            .map(|o| {
                let components: serde_json::Map<String, Json> = o
                    .components
                    .iter()
                    .map(|c| {
                        let entry = json!({
                            "dtype": c.dtype.name(),
                            "type": c.logical_type.as_ref().map(LogicalType::name),
                            "hex": hex(&c.bytes),
                        });
                        (c.role.clone(), entry)
                    })
                    .collect();
                json!({
                    "name": o.name,
                    "format": o.format,
                    "shape": o.shape,
                    "attributes": o.attributes,
                    "encoding": if o.zstd { "zstd" } else { "raw" },
                    "digest": o.digest.as_ref().map(DigestAlgorithm::name),
                    "components": components,
                })
            })
            .collect();
        json!({
            "recipe": RECIPE,
            "name": self.name,
            "version": self.version.name(),
            "covers": self.covers,
            "attributes": self.attributes,
            "objects": objects,
        })
    }

    /// Reads a recipe from its JSON.
    ///
    /// # Errors
    /// A document that is not a `ztensor-recipe/1`.
    pub fn from_json(doc: &Json) -> Result<Recipe> {
        if doc["recipe"] != RECIPE {
            bail!("not a {RECIPE} document");
        }
        let version = match doc["version"].as_str() {
            Some("0.1") => Target::Zt(Version::V0_1),
            Some("1.1") => Target::Zt(Version::V1_1),
            Some("1.2") => Target::Zt(Version::V1_2),
            Some("2") => Target::Zt2,
            other => bail!("version {other:?}"),
        };
        let text = |v: &Json, what: &str| -> Result<String> {
            v.as_str().map(str::to_owned).with_context(|| format!("{what} is not a string"))
        };
        let mut objects = Vec::new();
        for o in doc["objects"].as_array().context("objects is not an array")? {
            let mut components = Vec::new();
            for (role, c) in o["components"].as_object().context("components")? {
                let dtype = DType::from_name(&text(&c["dtype"], "dtype")?)
                    .with_context(|| format!("dtype {}", c["dtype"]))?;
                let logical_type = c["type"].as_str().map(LogicalType::from_name);
                components.push(RecipeComponent {
                    role: role.clone(),
                    dtype,
                    logical_type,
                    bytes: unhex(&text(&c["hex"], "hex")?)?,
                });
            }
            objects.push(RecipeObject {
                name: text(&o["name"], "name")?,
                format: text(&o["format"], "format")?,
                shape: o["shape"]
                    .as_array()
                    .context("shape")?
                    .iter()
                    .map(|d| d.as_u64().context("a dimension"))
                    .collect::<Result<_>>()?,
                attributes: Some(o["attributes"].clone()).filter(|a| !a.is_null()),
                zstd: o["encoding"] == "zstd",
                digest: o["digest"].as_str().map(digest_algorithm),
                components,
            });
        }
        Ok(Recipe {
            name: text(&doc["name"], "name")?,
            version,
            covers: doc["covers"].as_str().unwrap_or("").to_owned(),
            attributes: Some(doc["attributes"].clone()).filter(|a| !a.is_null()),
            objects,
        })
    }

    /// The file name of this recipe's JSON and of what is written from it.
    pub fn file_stem(&self) -> String {
        format!("v{}/{}", self.version, self.name)
    }

    /// The content a reader must report, in the projection the reader grading compares.
    pub fn expected(&self) -> Json {
        let mut objects: Vec<&RecipeObject> = self.objects.iter().collect();
        objects.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        let objects: Vec<Json> = objects
            .into_iter()
            .map(|o| {
                let zt2 = self.version == Target::Zt2;
                let components: serde_json::Map<String, Json> = o
                    .components
                    .iter()
                    .map(|c| {
                        // zTensor 2 names types, layouts and the encoding its own way
                        // (`spec/ztensor-2.md` §10: bool is u8 of logical type bool).
                        let (dtype, logical) = if zt2 {
                            match ztensor_v2::model::types_2(c.dtype, c.logical_type.as_ref()) {
                                Ok((d, t)) => (d.name().to_owned(), t),
                                Err(_) => (c.dtype.name().to_owned(), None),
                            }
                        } else {
                            let t = c.logical_type.as_ref().map(|t| t.name().to_owned());
                            (c.dtype.name().to_owned(), t)
                        };
                        let encoding = match (o.zstd, zt2) {
                            (false, _) => "raw",
                            (true, false) => "zstd",
                            (true, true) => ztensor_v2::seekable::ID,
                        };
                        (
                            c.role.clone(),
                            json!({
                                "dtype": dtype,
                                "type": logical,
                                "encoding": encoding,
                                "decoded_length": c.bytes.len(),
                                "sha256": ztensor_io::codec::sha256_hex(&c.bytes),
                            }),
                        )
                    })
                    .collect();
                let format = if zt2 {
                    ztensor_v2::model::layout_of(&Format::from_name(&o.format))
                } else {
                    o.format.clone()
                };
                json!({"name": o.name, "format": format, "shape": o.shape,
                       "attributes": o.attributes.clone().unwrap_or(Json::Null),
                       "components": components, "error": true})
            })
            .collect();
        json!({
            "container": self.version.container(),
            "attributes": self.attributes.clone().unwrap_or(Json::Null),
            "objects": objects,
        })
    }
}

/// A JSON attribute value as a CBOR value.
fn to_value(json: &Json) -> Result<Value> {
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Integer(i128::from(i)),
            (_, Some(u), _) => Value::Integer(i128::from(u)),
            (_, _, Some(f)) => Value::Float(f),
            _ => bail!("the number {n}"),
        },
        Json::String(s) => Value::Text(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(to_value).collect::<Result<_>>()?),
        Json::Object(map) => Value::Map(
            map.iter()
                .map(|(k, v)| Ok((Value::Text(k.clone()), to_value(v)?)))
                .collect::<Result<_>>()?,
        ),
    })
}

fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

/// Our writer's side of the protocol: writes `recipe` with this project's writer. `Ok(false)`
/// for a recipe it cannot write (the writer's `unrepresentable`: what the version cannot
/// express).
///
/// # Errors
/// The writer's other errors.
pub fn write(recipe: &Recipe, out: &Path) -> Result<bool> {
    if recipe.version == Target::Zt2 {
        return write_zt2(recipe, out);
    }
    match write_inner(recipe, out) {
        Err(e)
            if e.downcast_ref::<ztensor_io::Error>().and_then(ztensor_io::Error::rule)
                == Some(ztensor_format::ErrorKind::Unrepresentable) =>
        {
            Ok(false)
        }
        other => other.map(|()| true),
    }
}

/// zTensor 2: the recipe's content held as 1.2 in memory, then written by the zTensor 2 sink
/// (canonical, or every part `zt.zstd-seekable/1` when the recipe's objects are compressed).
/// `Ok(false)` for a recipe zTensor 2 cannot hold, or one mixing raw and compressed objects
/// (this writer encodes every part of a file alike).
fn write_zt2(recipe: &Recipe, out: &Path) -> Result<bool> {
    let zstd = recipe.objects.iter().any(|o| o.zstd);
    if recipe.objects.iter().any(|o| o.zstd != zstd) {
        return Ok(false);
    }
    let one = Recipe {
        name: recipe.name.clone(),
        version: Target::Zt(Version::V1_2),
        covers: recipe.covers.clone(),
        attributes: recipe.attributes.clone(),
        objects: recipe.objects.iter().map(|o| RecipeObject { zstd: false, ..o.clone() }).collect(),
    };
    let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2)?;
    add_objects(&mut w, &one)?;
    let held = Reader::new(w.finish()?.0, &Options::default())?;
    let options = ztensor_v2::WriteOptions::default().zstd(zstd.then_some(3));
    let mut sink = ztensor_v2::Zt2Sink::new(out).with_options(options);
    match ztensor_io::TensorSink::write_all(&mut sink, &held) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ztensor_v2::ErrorKind::Unrepresentable) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn write_inner(recipe: &Recipe, out: &Path) -> Result<()> {
    let Target::Zt(version) = recipe.version else { bail!("not a zTensor 1.x recipe") };
    let mut w = ztensor_io::FileWriter::create(out, version)?;
    add_objects(w.writer_mut(), recipe)?;
    w.finish()?;
    Ok(())
}

/// Adds `recipe`'s attributes and objects to `w`.
fn add_objects<W: std::io::Write>(w: &mut ztensor_io::Writer<W>, recipe: &Recipe) -> Result<()> {
    if let Some(attributes) = &recipe.attributes {
        w.set_attributes(ztensor_format::Attributes::try_from(to_value(attributes)?)?)?;
    }
    for o in &recipe.objects {
        let mut options = if o.zstd { WriteOptions::zstd(3) } else { WriteOptions::raw() };
        options.digest.clone_from(&o.digest);
        let role = |r: &str| o.components.iter().find(|c| c.role == r);
        let attributes = o.attributes.as_ref().map(to_value).transpose()?;
        let attributes = attributes.map(ztensor_format::Attributes::try_from).transpose()?;
        let sparse_helper =
            recipe.version == Target::Zt(Version::V0_1) && o.format.starts_with("sparse_");
        match (o.format.as_str(), role("values")) {
            ("sparse_csr", Some(values)) if sparse_helper => {
                let indices = u64s(&role("indices").context("indices")?.bytes);
                let indptr = u64s(&role("indptr").context("indptr")?.bytes);
                let csr = Csr {
                    dtype: values.dtype,
                    values: &values.bytes,
                    indices: &indices,
                    indptr: &indptr,
                };
                w.add_csr(&o.name, &o.shape, csr, &options)?;
            }
            ("sparse_coo", Some(values)) if sparse_helper => {
                let coords = u64s(&role("coords").context("coords")?.bytes);
                let coo = Coo { dtype: values.dtype, values: &values.bytes, coords: &coords };
                w.add_coo(&o.name, &o.shape, coo, &options)?;
            }
            _ => {
                let specs: Vec<ComponentSpec<'_>> = o
                    .components
                    .iter()
                    .map(|c| ComponentSpec {
                        role: &c.role,
                        dtype: c.dtype,
                        logical_type: c.logical_type.as_ref(),
                        data: &c.bytes,
                    })
                    .collect();
                let format = Format::from_name(&o.format);
                w.add_object(&o.name, &o.shape, format, attributes, &specs, &options)?;
            }
        }
    }
    Ok(())
}

/// Checks a written file strictly against its recipe: `Err` says what is wrong.
///
/// # Errors
/// The first problem: a rule the file breaks (strict validation, digests, data rules), padding
/// that is not zero, another version, or content other than the recipe's.
pub fn check(recipe: &Recipe, bytes: &[u8]) -> std::result::Result<(), String> {
    let Target::Zt(version) = recipe.version else { return check_zt2(recipe, bytes) };
    let mut options = Options::default();
    options.strict = true;
    let reader = Reader::new(bytes, &options).map_err(|e| format!("invalid: {e}"))?;
    // The version: the container, and for 1.x a version string of exactly that minor
    // (`1.2`, `1.2.0`, `1.2.7`), not merely one a lenient reader files under it.
    let written = reader.manifest().manifest().version_string.clone();
    let minor_matches = match (version, written.as_deref()) {
        (Version::V0_1, None) => true,
        (Version::V1_1 | Version::V1_2, Some(text)) => {
            let mut parts = text.split('.');
            parts.next() == Some("1")
                && parts.next() == Some(if version == Version::V1_1 { "1" } else { "2" })
                && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && text.split('.').count() <= 3
        }
        _ => false,
    };
    if reader.version() != version || !minor_matches {
        return Err(format!(
            "version {} ({:?}) written for a {} recipe",
            reader.version(),
            written,
            recipe.version
        ));
    }
    for i in 0..reader.len() {
        let data = reader.read(i).map_err(|e| format!("invalid: {e}"))?;
        reader.check(i, &data).map_err(|e| format!("invalid: {e}"))?;
    }
    padding_is_zero(&reader, bytes)?;
    // Digests: the algorithm the recipe asks for on every component, and none otherwise.
    for o in reader.objects() {
        let wanted =
            recipe.objects.iter().find(|r| r.name == o.name()).and_then(|r| r.digest.clone());
        for (role, c) in &o.model().components {
            let got = c.digest.as_ref().map(ztensor_format::Digest::algorithm);
            if got != wanted {
                return Err(format!(
                    "object {:?} component {role}: digest {:?}, the recipe asks for {:?}",
                    o.name(),
                    got.as_ref().map(DigestAlgorithm::name),
                    wanted.as_ref().map(DigestAlgorithm::name)
                ));
            }
        }
    }
    let dump = crate::runner::projection(&ztensor_dump::accepted(&reader));
    let expected = recipe.expected();
    let got = json!({"container": dump["container"], "attributes": dump["attributes"], "objects": dump["objects"]});
    if got != expected {
        return Err(format!("content: {}", crate::runner::difference(&expected, &got)));
    }
    Ok(())
}

/// The writer check for a zTensor 2 file: valid (container, manifest, layouts and profiles);
/// every part carries a digest that verifies; every object reads and passes its data rules;
/// every byte outside the magic, blobs, manifest and footer is zero; the content is the
/// recipe's.
fn check_zt2(recipe: &Recipe, bytes: &[u8]) -> std::result::Result<(), String> {
    let file = ztensor_v2::File::open(bytes, ztensor_v2::MAX_MANIFEST)
        .map_err(|e| format!("invalid: {e}"))?;
    let manifest = file.manifest().ok_or("a data shard, not a file of objects")?;
    if !manifest.shards.is_empty() {
        return Err("a file with a shard table for a single-file recipe".into());
    }
    let mut covered = vec![false; bytes.len()];
    covered[..8].iter_mut().for_each(|c| *c = true);
    let footer = &file.container().footer;
    let mut cover = |at: u64, len: u64| {
        let start = usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
        let end = usize::try_from(at.saturating_add(len)).unwrap_or(usize::MAX).min(bytes.len());
        covered[start..end].iter_mut().for_each(|c| *c = true);
    };
    cover(footer.manifest_offset, footer.manifest_length);
    cover(bytes.len().saturating_sub(40) as u64, 40);
    for (name, object) in manifest.objects.iter() {
        for (part, p) in object.parts.iter() {
            cover(p.blob.0, p.blob.1);
            match file.verify(name, part) {
                Ok(ztensor_v2::DigestCheck::Verified) => {}
                Ok(other) => {
                    return Err(format!("{name:?}/{part}: digest {other:?}; every part needs one"));
                }
                Err(e) => return Err(format!("invalid: {e}")),
            }
        }
    }
    for i in 0..TensorSource::len(&file) {
        TensorSource::verify(&file, i).map_err(|e| format!("invalid: {e}"))?;
    }
    if let Some(at) = covered.iter().zip(bytes).position(|(&c, &b)| !c && b != 0) {
        return Err(format!("byte {at} of padding is 0x{:02x}, not zero", bytes[at]));
    }
    let dump = crate::runner::projection(&ztensor_dump::zt2(&file));
    let expected = recipe.expected();
    let got = json!({"container": dump["container"], "attributes": dump["attributes"], "objects": dump["objects"]});
    if got != expected {
        return Err(format!("content: {}", crate::runner::difference(&expected, &got)));
    }
    Ok(())
}

/// Every byte of the file outside its magic, blobs, manifest and trailer is zero.
fn padding_is_zero<S: ztensor_io::ReadAt>(
    reader: &Reader<S>,
    bytes: &[u8],
) -> std::result::Result<(), String> {
    let trailer = if reader.version() == Version::V0_1 { 8 } else { 16 };
    let len = bytes.len();
    let size_at = len.checked_sub(trailer).ok_or("a file shorter than its trailer")?;
    let manifest_len = u64::from_le_bytes(bytes[size_at..size_at + 8].try_into().unwrap_or([0; 8]));
    let manifest_at = usize::try_from(manifest_len)
        .ok()
        .and_then(|m| size_at.checked_sub(m))
        .ok_or("a manifest size past the file")?;
    let mut covered = vec![false; manifest_at];
    covered.iter_mut().take(8).for_each(|c| *c = true);
    for o in reader.objects() {
        for (_, c) in &o.model().components {
            let start = usize::try_from(c.offset).unwrap_or(usize::MAX).min(manifest_at);
            let end = usize::try_from(c.offset.saturating_add(c.length))
                .unwrap_or(usize::MAX)
                .min(manifest_at);
            covered[start..end].iter_mut().for_each(|b| *b = true);
        }
    }
    match covered.iter().zip(bytes).position(|(&c, &b)| !c && b != 0) {
        Some(at) => Err(format!("byte {at} of padding is 0x{:02x}, not zero", bytes[at])),
        None => Ok(()),
    }
}

/// The recipes: what the corpus covers, for each version that can hold it.
pub fn recipes() -> Vec<Recipe> {
    let mut out = Vec::new();
    for v in [Version::V0_1, Version::V1_1, Version::V1_2] {
        let dense =
            |name: &str, shape: &[u64], dtype: DType, seed: u8, zstd, digest| RecipeObject {
                name: name.to_owned(),
                format: "dense".into(),
                shape: shape.to_vec(),
                attributes: None,
                zstd,
                digest,
                components: vec![RecipeComponent {
                    role: "data".into(),
                    dtype,
                    logical_type: None,
                    bytes: elements(dtype, shape.iter().product::<u64>(), seed),
                }],
            };
        let recipe = |name: &str, covers: &str, objects| Recipe {
            name: name.into(),
            version: Target::Zt(v),
            covers: covers.into(),
            attributes: None,
            objects,
        };
        out.push(recipe(
            "dense-dtypes",
            "one dense [2, 3] object of every dtype, raw",
            DType::ALL
                .iter()
                .zip(0u8..)
                .map(|(&d, i)| dense(&format!("t_{}", d.name()), &[2, 3], d, i, false, None))
                .collect(),
        ));
        out.push(recipe(
            "zstd",
            "dense objects compressed with zstd",
            vec![
                dense("w", &[64], DType::F32, 20, true, None),
                dense("b", &[3, 5], DType::I16, 21, true, None),
            ],
        ));
        for (algorithm, zstd) in [(DigestAlgorithm::Crc32c, false), (DigestAlgorithm::Sha256, true)]
        {
            out.push(recipe(
                &format!("digest-{}", algorithm.name()),
                &format!("a {} digest on every component", algorithm.name()),
                vec![
                    dense("w", &[16], DType::F32, 22, zstd, Some(algorithm.clone())),
                    dense("n", &[4], DType::I64, 23, zstd, Some(algorithm.clone())),
                ],
            ));
        }
        out.push(recipe(
            "scalar-and-empty",
            "a 0-d tensor and zero-size tensors",
            vec![
                dense("scalar", &[], DType::F64, 24, false, None),
                dense("empty", &[0, 4], DType::F32, 25, false, None),
            ],
        ));
        let values = |seed| elements(DType::F32, 3, seed);
        let u64le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let component = |role: &str, dtype, bytes| RecipeComponent {
            role: role.into(),
            dtype,
            logical_type: None,
            bytes,
        };
        let sparse = |name: &str, format: &str, shape: &[u64], components| RecipeObject {
            name: name.into(),
            format: format.into(),
            shape: shape.to_vec(),
            attributes: None,
            zstd: false,
            digest: None,
            components,
        };
        out.push(recipe(
            "sparse",
            "a CSR and a COO matrix, f32 values and u64 indices",
            vec![
                sparse(
                    "csr",
                    "sparse_csr",
                    &[3, 4],
                    vec![
                        component("values", DType::F32, values(26)),
                        component("indices", DType::U64, u64le(&[1, 0, 3])),
                        component("indptr", DType::U64, u64le(&[0, 1, 1, 3])),
                    ],
                ),
                sparse(
                    "coo",
                    "sparse_coo",
                    &[4, 5],
                    vec![
                        component("values", DType::F32, values(27)),
                        component("coords", DType::U64, u64le(&[0, 2, 3, 4, 0, 1])),
                    ],
                ),
            ],
        ));
        let mut attributed = dense("w", &[4], DType::F32, 28, false, None);
        attributed.attributes = Some(json!({"note": "kept", "scale": 0.5}));
        out.push(recipe(
            "object-attributes",
            "object attributes (text and a number)",
            vec![attributed],
        ));
        if v != Version::V0_1 {
            let mut with_attributes = recipe(
                "file-attributes",
                "file attributes (text values)",
                vec![dense("w", &[4], DType::F32, 33, false, None)],
            );
            with_attributes.attributes =
                Some(json!({"framework": "zTensor conformance", "step": "7"}));
            out.push(with_attributes);
        }
        if v == Version::V1_2 {
            let typed = |name: &str, dtype, logical: LogicalType, n: u64| RecipeObject {
                name: name.into(),
                format: "dense".into(),
                shape: vec![n],
                attributes: None,
                zstd: false,
                digest: None,
                components: vec![RecipeComponent {
                    role: "data".into(),
                    dtype,
                    logical_type: Some(logical),
                    bytes: elements(dtype, if dtype == DType::F32 { 2 * n } else { n }, 29),
                }],
            };
            out.push(recipe(
                "logical-types",
                "FP8 (E4M3FN, E5M2) and complex64 through 1.2 logical types",
                vec![
                    typed("e4m3", DType::U8, LogicalType::F8E4M3Fn, 8),
                    typed("e5m2", DType::U8, LogicalType::F8E5M2, 8),
                    typed("z", DType::F32, LogicalType::Complex64, 3),
                ],
            ));
            let mut q = sparse(
                "q",
                "quantized_group",
                &[4, 8],
                vec![
                    component("packed_weight", DType::I32, elements(DType::I32, 4, 30)),
                    component("scales", DType::F16, elements(DType::F16, 2, 31)),
                    component("zeros", DType::F16, elements(DType::F16, 2, 32)),
                ],
            );
            q.attributes = Some(json!({"bits": 4, "group_size": 16, "packing": "8_per_i32"}));
            out.push(recipe("quantized-group", "a 4-bit quantized_group object", vec![q]));
        }
    }
    // zTensor 2: the 1.2 recipes' content, each part with the xxh3 digest zTensor 2 writers
    // give every part (the 1.x digest recipes are the dense ones again, and go).
    let zt2: Vec<Recipe> = out
        .iter()
        .filter(|r| r.version == Target::Zt(Version::V1_2) && !r.name.starts_with("digest-"))
        .map(|r| Recipe {
            name: r.name.clone(),
            version: Target::Zt2,
            covers: r.covers.clone(),
            attributes: r.attributes.clone(),
            objects: r.objects.iter().map(|o| RecipeObject { digest: None, ..o.clone() }).collect(),
        })
        .collect();
    out.extend(zt2);
    out
}

/// `n` deterministic elements of `dtype` (bools 0/1; floats finite).
fn elements(dtype: DType, n: u64, seed: u8) -> Vec<u8> {
    let size = dtype.size();
    (0..n * size)
        .map(|i| {
            let b = u8::try_from((i * 29 + u64::from(seed) * 13) % 251).unwrap_or(0);
            match dtype {
                DType::Bool => b & 1,
                // Keep exponents away from NaN and infinity patterns.
                DType::F16 | DType::BF16 | DType::F32 | DType::F64 if (i + 1) % size == 0 => {
                    b & 0x3F
                }
                _ => b,
            }
        })
        .collect()
}

/// A writer's verdict on one recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Wrote a file that passes every check.
    Pass,
    /// Said it cannot write this recipe (exit 3).
    Unsupported(String),
    /// Wrote a file that breaks a rule or holds other content.
    Fail(String),
    /// Exited otherwise, or wrote nothing.
    Crash(String),
}

impl Written {
    /// The verdict in one word.
    pub fn word(&self) -> &'static str {
        match self {
            Written::Pass => "pass",
            Written::Unsupported(_) => "unsupported",
            Written::Fail(_) => "fail",
            Written::Crash(_) => "crash",
        }
    }
}

/// How a reader took a written file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Accepted, reporting the recipe's content.
    Accepts,
    /// Rejected it.
    Rejects,
    /// Accepted it, reporting other content.
    Misreads,
    /// Crashed on it.
    Crashes,
}

impl Read {
    /// The verdict in one word.
    pub fn word(&self) -> &'static str {
        match self {
            Read::Accepts => "accepts",
            Read::Rejects => "rejects",
            Read::Misreads => "misreads",
            Read::Crashes => "crashes",
        }
    }
}

/// One recipe, written and graded.
#[derive(Debug, Clone)]
pub struct WriterGraded {
    /// The recipe.
    pub recipe: Recipe,
    /// The verdict.
    pub written: Written,
    /// Where the file is (when one was written).
    pub file: Option<std::path::PathBuf>,
    /// How each reader took the file: (reader name, verdict).
    pub readers: Vec<(String, Read)>,
}

/// Reads what a writer wrote for `recipe`: `Ok(Err(why))`, and nothing read, when the file is
/// larger than the recipe can need ([`Recipe::size_limit`]).
///
/// # Errors
/// When the file cannot be read.
pub fn read_written(
    recipe: &Recipe,
    file: &Path,
) -> std::io::Result<std::result::Result<Vec<u8>, String>> {
    use std::io::Read as _;
    let limit = recipe.size_limit();
    let mut bytes = Vec::new();
    std::fs::File::open(file)?.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Ok(Err(format!(
            "wrote more than {limit} bytes, more than any file of this recipe can need"
        )));
    }
    Ok(Ok(bytes))
}

/// How the reader `command` (dump protocol) takes `file`, against `recipe`.
pub fn read_with(command: &str, recipe: &Recipe, file: &Path) -> Result<Read> {
    let (program, args) = crate::runner::split(command)?;
    let limit = crate::implementation::dump_limit(std::fs::metadata(file).map_or(0, |m| m.len()));
    let Ok(output) = crate::runner::output(Command::new(&program).args(&args).arg(file), limit)
        .with_context(|| format!("cannot run {program}"))?
    else {
        return Ok(Read::Crashes);
    };
    let dump: Option<Json> = serde_json::from_slice(&output.stdout).ok();
    let well_formed = dump.as_ref().is_some_and(|d| d["dump"] == "ztensor-dump/1");
    Ok(match (output.status.code(), dump) {
        (Some(0), Some(dump)) if well_formed => {
            let p = crate::runner::projection(&dump);
            let got = json!({"container": p["container"], "attributes": p["attributes"], "objects": p["objects"]});
            if got == recipe.expected() { Read::Accepts } else { Read::Misreads }
        }
        (Some(1), Some(_)) if well_formed => Read::Rejects,
        _ => Read::Crashes,
    })
}

/// Runs the writer `command` on every recipe, in `dir` (recipes and files are left there),
/// grades each file and asks every reader of `readers` (name, dump command) to read it.
///
/// # Errors
/// When `dir` cannot be written or the command cannot be started at all.
pub fn run(
    command: &str,
    recipes: &[Recipe],
    dir: &Path,
    readers: &[(String, String)],
) -> Result<Vec<WriterGraded>> {
    let (program, args) = crate::runner::split(command)?;
    let mut graded = Vec::with_capacity(recipes.len());
    for recipe in recipes {
        let stem = dir.join(recipe.file_stem());
        if let Some(parent) = stem.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let recipe_path = stem.with_extension("json");
        let out = stem.with_extension("zt");
        std::fs::write(&recipe_path, serde_json::to_string_pretty(&recipe.to_json())? + "\n")?;
        let _ = std::fs::remove_file(&out);
        let mut command = Command::new(&program);
        command.args(&args).arg(&recipe_path).arg(&out);
        let output = crate::runner::output(&mut command, crate::implementation::MESSAGES_LIMIT)
            .with_context(|| format!("cannot run {program}"))?;
        let output = match output {
            Ok(output) => output,
            Err(why) => {
                graded.push(WriterGraded {
                    recipe: recipe.clone(),
                    written: Written::Crash(why),
                    file: None,
                    readers: Vec::new(),
                });
                continue;
            }
        };
        let said = || {
            let text = [&output.stderr[..], &output.stdout[..]].concat();
            String::from_utf8_lossy(&text).lines().next().unwrap_or("no output").to_owned()
        };
        let written = match (output.status.code(), read_written(recipe, &out)) {
            (Some(0), Ok(Err(why))) => Written::Fail(why),
            (Some(0), Ok(Ok(bytes))) => match check(recipe, &bytes) {
                Ok(()) => Written::Pass,
                Err(why) => Written::Fail(why),
            },
            (Some(0), Err(_)) => Written::Crash("exit 0 without writing the file".into()),
            (Some(UNSUPPORTED), _) => Written::Unsupported(said()),
            (status, _) => Written::Crash(format!("exit status {status:?}: {}", said())),
        };
        let file = out.exists().then_some(out);
        let mut reads = Vec::new();
        if let Some(file) = &file
            && matches!(written, Written::Pass | Written::Fail(_))
        {
            for (name, reader) in readers {
                reads.push((name.clone(), read_with(reader, recipe, file)?));
            }
        }
        graded.push(WriterGraded { recipe: recipe.clone(), written, file, readers: reads });
    }
    Ok(graded)
}

/// The writer check's report as JSON.
pub fn to_json(results: &[WriterGraded]) -> Json {
    let count = |w: &str| results.iter().filter(|r| r.written.word() == w).count();
    let rows: Vec<Json> = results
        .iter()
        .map(|r| {
            let detail = match &r.written {
                Written::Pass => None,
                Written::Unsupported(d) | Written::Fail(d) | Written::Crash(d) => Some(d.clone()),
            };
            let readers: serde_json::Map<String, Json> =
                r.readers.iter().map(|(n, v)| (n.clone(), json!(v.word()))).collect();
            json!({"recipe": r.recipe.file_stem(), "version": r.recipe.version.name(),
                   "covers": r.recipe.covers, "result": r.written.word(), "detail": detail,
                   "readers": readers})
        })
        .collect();
    json!({"report": "ztensor-writer-check/1", "totals": {"recipes": results.len(), "passed": count("pass"),
           "failed": count("fail"), "crashed": count("crash"), "unsupported": count("unsupported")},
           "results": rows})
}

/// The writer check's report as a table.
pub fn table(results: &[WriterGraded]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<28}  {:<11}  READERS", "RECIPE", "RESULT");
    for r in results {
        let readers: Vec<String> =
            r.readers.iter().map(|(n, v)| format!("{n}: {}", v.word())).collect();
        let detail = match &r.written {
            Written::Pass => String::new(),
            Written::Unsupported(d) | Written::Fail(d) | Written::Crash(d) => format!(" ({d})"),
        };
        let _ = writeln!(
            out,
            "{:<28}  {:<11}  {}{detail}",
            r.recipe.file_stem(),
            r.written.word(),
            readers.join(", ")
        );
    }
    let count = |w: &str| results.iter().filter(|r| r.written.word() == w).count();
    let _ = writeln!(
        out,
        "\n{} recipes: {} passed, {} failed, {} crashed, {} unsupported",
        results.len(),
        count("pass"),
        count("fail"),
        count("crash"),
        count("unsupported")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_round_trip_through_json() {
        for r in recipes() {
            let back = Recipe::from_json(&r.to_json()).unwrap();
            assert_eq!(back.to_json(), r.to_json(), "{}", r.name);
        }
    }
}
