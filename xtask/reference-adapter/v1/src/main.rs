//! The reference implementation (ztensor 1.2.3) in the conformance dump protocol, and with
//! `--write RECIPE OUT` in the writer protocol.

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};
use ztensor::TensorReader;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn cbor(v: &ciborium::Value) -> Json {
    use ciborium::Value as C;
    match v {
        C::Integer(i) => shape::integer((*i).into()),
        C::Bytes(b) => shape::bytes(hex(b)),
        C::Float(f) => shape::float(*f),
        C::Text(s) => json!(s),
        C::Bool(b) => json!(b),
        C::Null => Json::Null,
        C::Tag(t, v) => shape::tag(*t, cbor(v)),
        C::Array(a) => Json::Array(a.iter().map(cbor).collect()),
        C::Map(m) => {
            if m.iter().all(|(k, _)| matches!(k, C::Text(_))) {
                let mut o = Map::new();
                for (k, v) in m {
                    if let C::Text(k) = k {
                        o.insert(k.clone(), cbor(v));
                    }
                }
                Json::Object(o)
            } else {
                shape::pairs(m.iter().map(|(k, v)| (cbor(k), cbor(v))))
            }
        }
        _ => Json::Null,
    }
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

fn to_cbor(v: &Json) -> ciborium::Value {
    use ciborium::Value as C;
    match v {
        Json::Null => C::Null,
        Json::Bool(b) => C::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => C::Integer(i.into()),
            (_, Some(u)) => C::Integer(u.into()),
            _ => C::Float(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => C::Text(s.clone()),
        Json::Array(a) => C::Array(a.iter().map(to_cbor).collect()),
        Json::Object(m) => C::Map(m.iter().map(|(k, v)| (C::Text(k.clone()), to_cbor(v))).collect()),
    }
}

fn dtype(name: &str) -> ztensor::DType {
    serde_json::from_value(json!(name)).unwrap_or_else(|_| unsupported(&format!("dtype {name}")))
}

/// Exit status 3: the writer protocol's "this recipe cannot be written here".
fn unsupported(why: &str) -> ! {
    eprintln!("reference 1.2.3 cannot write this recipe: {why}");
    std::process::exit(3)
}

/// The writer protocol: `--write RECIPE OUT`, through the reference's own `Writer`; with
/// `--append RECIPE OUT`, the recipe's objects are added to OUT through `Writer::append`.
fn write(recipe: &str, out: &str, append: bool) {
    let recipe: Json = serde_json::from_slice(&std::fs::read(recipe).expect("recipe")).expect("recipe JSON");
    if recipe["version"] != "1.2" {
        unsupported("it writes version 1.2.0 only");
    }
    let mut w = if append {
        ztensor::Writer::append(out).unwrap_or_else(|e| unsupported(&e.to_string()))
    } else {
        ztensor::Writer::create(out).expect("create")
    };
    if let Some(attributes) = recipe["attributes"].as_object() {
        w.set_attributes(attributes.iter().map(|(k, v)| (k.clone(), to_cbor(v))).collect());
    }
    for o in recipe["objects"].as_array().expect("objects") {
        let checksum = match o["digest"].as_str() {
            None => ztensor::Checksum::None,
            Some("crc32c") => ztensor::Checksum::Crc32c,
            Some("sha256") => ztensor::Checksum::Sha256,
            Some(other) => unsupported(&format!("digest {other}")),
        };
        let compression = if o["encoding"] == "zstd" { ztensor::Compression::Zstd(3) } else { ztensor::Compression::Raw };
        let format = match o["format"].as_str().unwrap_or("") {
            "dense" => ztensor::Format::Dense,
            "sparse_csr" => ztensor::Format::SparseCsr,
            "sparse_coo" => ztensor::Format::SparseCoo,
            "quantized_group" => ztensor::Format::QuantizedGroup,
            other => ztensor::Format::Other(other.to_owned()),
        };
        let parts: Vec<(String, ztensor::DType, Option<String>, Vec<u8>)> = o["components"]
            .as_object()
            .expect("components")
            .iter()
            .map(|(role, c)| (role.clone(), dtype(c["dtype"].as_str().unwrap_or("")), c["type"].as_str().map(str::to_owned), unhex(c["hex"].as_str().unwrap_or(""))))
            .collect();
        let refs: Vec<(&str, ztensor::DType, Option<&str>, &[u8])> =
            parts.iter().map(|(r, d, t, b)| (r.as_str(), *d, t.as_deref(), &b[..])).collect();
        let attributes = o["attributes"].as_object().map(|a| a.iter().map(|(k, v)| (k.clone(), to_cbor(v))).collect());
        let shape: Vec<u64> = o["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim")).collect();
        let name = o["name"].as_str().expect("name");
        if let Err(e) = w.add_object(name, shape, format, &refs, attributes, compression, checksum) {
            unsupported(&e.to_string());
        }
    }
    if let Err(e) = w.finish() {
        unsupported(&e.to_string());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(mode @ ("--write" | "--append")) = args.get(1).map(String::as_str) {
        write(&args[2], &args[3], mode == "--append");
        return;
    }
    read_protocol(&args);
}

// The reading protocol, the same for every adapter.
include!("../../read_protocol.rs");

// The dump's JSON shape, the one definition `ztensor-dump` builds with (a file of std and
// serde_json only, so this project includes it rather than depending on the workspace).
#[allow(dead_code)]
#[path = "../../../../crates/ztensor-dump/src/shape.rs"]
mod shape;

/// The versions this reference reads, for `--fuzz-in-process`.
#[allow(dead_code)]
const FUZZ_VERSIONS: &[&str] = &["0.1", "1.1", "1.2"];

/// The dump of the file at `path`: accepted (its objects) or rejected (an `error`).
fn dump(path: &str) -> Json {
    let head = std::fs::read(&path).map(|b| b.get(..8).map(<[u8]>::to_vec).unwrap_or_default()).unwrap_or_default();
    let reader = match ztensor::Reader::open_any_path(&path) {
        Ok(r) => r,
        Err(e) => {
            return shape::rejected("reference_error", &e.to_string());
        }
    };
    let manifest = reader.manifest();
    let legacy = head == b"ZTEN0001";
    let minor: u32 = manifest.version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(1);
    let container = if legacy { "zt-0.1" } else if minor >= 2 { "zt-1.2" } else { "zt-1.1" };
    let mut objects = Vec::new();
    for (name, obj) in &manifest.objects {
        let mut components = Map::new();
        let mut error = Json::Null;
        for (role, c) in &obj.components {
            let decoded = match reader.read_component(c) {
                Ok(d) => Some((d.len() as u64, hex(&Sha256::digest(&d)))),
                Err(e) => {
                    error = json!(e.to_string());
                    None
                }
            };
            let encoding = match c.encoding {
                ztensor::Encoding::Raw => "raw",
                ztensor::Encoding::Zstd => "zstd",
            };
            components.insert(role.clone(), shape::component(c.dtype.as_str(), c.r#type.as_deref(), encoding, decoded));
        }
        if !error.is_null() {
            for c in components.values_mut() {
                c["decoded_length"] = Json::Null;
                c["sha256"] = Json::Null;
            }
        }
        let attributes = obj.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), cbor(v))).collect()));
        let attributes = attributes.unwrap_or(Json::Null);
        objects.push(shape::object(name, obj.format.as_str(), json!(obj.shape), attributes, components, error));
    }
    let attributes = manifest.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), cbor(v))).collect()));
    let version = if legacy { Json::Null } else { json!(manifest.version) };
    shape::accepted(container, version, attributes.unwrap_or(Json::Null), Json::Array(objects))
}
