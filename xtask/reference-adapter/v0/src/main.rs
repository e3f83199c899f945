//! The reference implementation of zTensor 0.1 (ztensor 0.1.0) in the conformance dump protocol.
//! Dense tensors are read with its raw read (decompressed, native byte order); sparse tensors with
//! its CSR/COO readers for f32 values. With `--write RECIPE OUT` it speaks the writer protocol
//! (`src/write.rs`).

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn part(dtype: &str, encoding: &str, bytes: &[u8]) -> Json {
    shape::component(dtype, None, encoding, Some((bytes.len() as u64, hex(&Sha256::digest(bytes)))))
}

mod write;

// The dump's JSON shape, the one definition `ztensor-dump` builds with (a file of std and
// serde_json only, so this project includes it rather than depending on the workspace).
#[allow(dead_code)]
#[path = "../../../../crates/ztensor-dump/src/shape.rs"]
mod shape;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--write") {
        write::write(&args[2], &args[3]);
        return;
    }
    read_protocol(&args);
}

// The reading protocol, the same for every adapter.
include!("../../read_protocol.rs");

/// The versions this reference reads, for `--fuzz-in-process`.
#[allow(dead_code)]
const FUZZ_VERSIONS: &[&str] = &["0.1"];

/// The dump of the file at `path`: accepted (its objects) or rejected (an `error`).
fn dump(path: &str) -> Json {
    let mut reader = match ztensor::ZTensorReader::open(&path) {
        Ok(r) => r,
        Err(e) => {
            return shape::rejected("reference_error", &e.to_string());
        }
    };
    let metas = reader.list_tensors().clone();
    let mut objects = Vec::new();
    for m in metas {
        let dtype = serde_json::to_value(&m.dtype).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let short = match dtype.as_str() {
            "float64" => "f64", "float32" => "f32", "float16" => "f16", "bfloat16" => "bf16",
            "int64" => "i64", "int32" => "i32", "int16" => "i16", "int8" => "i8",
            "uint64" => "u64", "uint32" => "u32", "uint16" => "u16", "uint8" => "u8", _ => "bool",
        };
        let encoding = serde_json::to_value(&m.encoding).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let layout = format!("{:?}", m.layout);
        let mut components = Map::new();
        let mut error = Json::Null;
        let format = match layout.as_str() {
            "SparseCsr" => "sparse_csr",
            "SparseCoo" => "sparse_coo",
            _ => "dense",
        };
        match layout.as_str() {
            "SparseCsr" => match reader.read_csr_tensor::<f32>(&m.name) {
                Ok(t) => {
                    let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
                    components.insert("indptr".into(), part("u64", &encoding, &le(&t.indptr)));
                    components.insert("indices".into(), part("u64", &encoding, &le(&t.indices)));
                    let vals: Vec<u8> = t.values.iter().flat_map(|x| x.to_le_bytes()).collect();
                    components.insert("values".into(), part(short, &encoding, &vals));
                }
                Err(e) => error = json!(e.to_string()),
            },
            "SparseCoo" => match reader.read_coo_tensor::<f32>(&m.name) {
                Ok(t) => {
                    let rank = t.shape.len();
                    let coords: Vec<u8> = (0..rank).flat_map(|d| t.indices.iter().map(move |ix| ix[d])).flat_map(|x| x.to_le_bytes()).collect();
                    components.insert("coords".into(), part("u64", &encoding, &coords));
                    let vals: Vec<u8> = t.values.iter().flat_map(|x| x.to_le_bytes()).collect();
                    components.insert("values".into(), part(short, &encoding, &vals));
                }
                Err(e) => error = json!(e.to_string()),
            },
            _ => match reader.read_raw_tensor_data(&m) {
                Ok(d) => {
                    components.insert("data".into(), part(short, &encoding, &d));
                }
                Err(e) => error = json!(e.to_string()),
            },
        }
        if !error.is_null() && components.is_empty() {
            components.insert("data".into(), shape::component(short, None, &encoding, None));
        }
        let attributes = if m.custom_fields.is_empty() { Json::Null } else { serde_json::to_value(&m.custom_fields).unwrap_or(Json::Null) };
        objects.push(shape::object(&m.name, format, json!(m.shape), attributes, components, error));
    }
    shape::accepted("zt-0.1", Json::Null, Json::Null, Json::Array(objects))
}
