//! A recipe: what one file holds, and its JSON form (`ztensor-recipe/1`).

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use serde_json::{Value as Json, json};
use ztensor_format::{DType, DigestAlgorithm, Format, LogicalType, Value, Version};

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

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

pub(super) fn unhex(text: &str) -> Result<Vec<u8>> {
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

pub(super) fn digest_algorithm(name: &str) -> DigestAlgorithm {
    match name {
        "crc32c" => DigestAlgorithm::Crc32c,
        "sha256" => DigestAlgorithm::Sha256,
        "blake3" => DigestAlgorithm::Blake3,
        other => DigestAlgorithm::Unknown(other.to_owned()),
    }
}

pub(super) fn version_name(v: Version) -> &'static str {
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
pub(super) fn to_value(json: &Json) -> Result<Value> {
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

pub(super) fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}
