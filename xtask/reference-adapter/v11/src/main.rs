//! The reference implementation of zTensor 1.1 (ztensor 1.1.1) in the conformance dump protocol,
//! and with `--write RECIPE OUT` in the writer protocol. Its reader opens `ZTEN1000` files
//! (its legacy 0.1 reader is a separate type this adapter does not use) and reads every
//! component through `read_component`; its writer writes version 1.1.0 files, text file
//! attributes and no object attributes or logical types.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

fn cbor(v: &serde_cbor::Value) -> Json {
    use serde_cbor::Value as C;
    match v {
        C::Integer(i) => shape::integer(*i),
        C::Bytes(b) => shape::bytes(hex(b)),
        C::Float(f) => shape::float(*f),
        C::Text(s) => json!(s),
        C::Bool(b) => json!(b),
        C::Null => Json::Null,
        C::Tag(t, v) => shape::tag(*t, cbor(v)),
        C::Array(a) => Json::Array(a.iter().map(cbor).collect()),
        C::Map(m) => {
            if m.keys().all(|k| matches!(k, C::Text(_))) {
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

/// Exit status 3: the writer protocol's "this recipe cannot be written here".
fn unsupported(why: &str) -> ! {
    eprintln!("reference 1.1.1 cannot write this recipe: {why}");
    std::process::exit(3)
}

fn dtype(name: &str) -> ztensor::DType {
    serde_json::from_value(json!(name)).unwrap_or_else(|_| unsupported(&format!("dtype {name}")))
}

fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

fn write(recipe: &str, out: &str) {
    let recipe: Json = serde_json::from_slice(&std::fs::read(recipe).expect("recipe")).expect("recipe JSON");
    if recipe["version"] != "1.1" {
        unsupported("it writes version 1.1.0 only");
    }
    let mut w = ztensor::ZTensorWriter::create(out).expect("create");
    if let Some(attributes) = recipe["attributes"].as_object() {
        let mut text = BTreeMap::new();
        for (k, v) in attributes {
            let v = v.as_str().unwrap_or_else(|| unsupported("file attributes other than text"));
            text.insert(k.clone(), v.to_owned());
        }
        w.set_attributes(text);
    }
    for o in recipe["objects"].as_array().expect("objects") {
        if !o["attributes"].is_null() {
            unsupported("object attributes (its writer has no way to set them)");
        }
        let checksum = match o["digest"].as_str() {
            None => ztensor::ChecksumAlgorithm::None,
            Some("crc32c") => ztensor::ChecksumAlgorithm::Crc32c,
            Some("sha256") => ztensor::ChecksumAlgorithm::Sha256,
            Some(other) => unsupported(&format!("digest {other}")),
        };
        let compression = if o["encoding"] == "zstd" { ztensor::writer::Compression::Zstd(3) } else { ztensor::writer::Compression::Raw };
        let name = o["name"].as_str().expect("name");
        let shape: Vec<u64> = o["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim")).collect();
        let c = |role: &str| -> (ztensor::DType, Vec<u8>) {
            let c = &o["components"][role];
            if !c["type"].is_null() {
                unsupported("logical types");
            }
            (dtype(c["dtype"].as_str().unwrap_or_else(|| unsupported(&format!("no {role} component")))), unhex(c["hex"].as_str().unwrap_or("")))
        };
        let result = match o["format"].as_str().unwrap_or("") {
            "dense" => {
                let (d, bytes) = c("data");
                w.add_object_bytes(name, shape, d, compression, &bytes, checksum)
            }
            "sparse_csr" => {
                let (d, values) = c("values");
                let (indices, indptr) = (u64s(&c("indices").1), u64s(&c("indptr").1));
                w.add_csr_object_bytes(name, shape, d, &values, &indices, &indptr, compression, checksum)
            }
            "sparse_coo" => {
                let (d, values) = c("values");
                let coords = u64s(&c("coords").1);
                w.add_coo_object_bytes(name, shape, d, &values, &coords, compression, checksum)
            }
            other => unsupported(&format!("format {other} (no writer for it)")),
        };
        if let Err(e) = result {
            unsupported(&e.to_string());
        }
    }
    if let Err(e) = w.finalize() {
        unsupported(&e.to_string());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--write") {
        write(&args[2], &args[3]);
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
const FUZZ_VERSIONS: &[&str] = &["1.1"];

/// The dump of the file at `path`: accepted (its objects) or rejected (an `error`).
fn dump(path: &str) -> Json {
    let mut reader = match ztensor::ZTensorReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            return shape::rejected("reference_error", &e.to_string());
        }
    };
    let listed = reader.list_objects().clone();
    let mut objects = Vec::new();
    for (name, obj) in &listed {
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
            let dtype = serde_json::to_value(c.dtype).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            components.insert(role.clone(), shape::component(&dtype, None, encoding, decoded));
        }
        if !error.is_null() {
            for c in components.values_mut() {
                c["decoded_length"] = Json::Null;
                c["sha256"] = Json::Null;
            }
        }
        let attributes = obj.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), cbor(v))).collect()));
        let attributes = attributes.unwrap_or(Json::Null);
        objects.push(shape::object(name, &obj.format, json!(obj.shape), attributes, components, error));
    }
    // The manifest itself: its version string and text attributes, read back the way the
    // reference exposes them (it has no accessor; the file's manifest is decoded again).
    let bytes = std::fs::read(path).expect("the file");
    let size = u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().expect("8 bytes")) as usize;
    let manifest: ztensor::Manifest = serde_cbor::from_slice(&bytes[bytes.len() - 16 - size..bytes.len() - 16]).expect("decoded once already");
    let minor: u32 = manifest.version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(1);
    let container = if minor >= 2 { "zt-1.2" } else { "zt-1.1" };
    let attributes = manifest.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
    let attributes = attributes.unwrap_or(Json::Null);
    shape::accepted(container, json!(manifest.version), attributes, Json::Array(objects))
}
