//! The writer protocol (`--write RECIPE OUT`) through the reference 0.1.0 `ZTensorWriter`.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

/// Exit status 3: the writer protocol's "this recipe cannot be written here".
fn unsupported(why: &str) -> ! {
    eprintln!("reference 0.1.0 cannot write this recipe: {why}");
    std::process::exit(3)
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex")).collect()
}

fn dtype(name: &str) -> ztensor::DType {
    let long = match name {
        "f64" => "float64", "f32" => "float32", "f16" => "float16", "bf16" => "bfloat16",
        "i64" => "int64", "i32" => "int32", "i16" => "int16", "i8" => "int8",
        "u64" => "uint64", "u32" => "uint32", "u16" => "uint16", "u8" => "uint8", "bool" => "bool",
        other => unsupported(&format!("dtype {other}")),
    };
    serde_json::from_value(json!(long)).unwrap_or_else(|_| unsupported(&format!("dtype {name}")))
}

fn to_cbor(v: &Json) -> serde_cbor::Value {
    use serde_cbor::Value as C;
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

pub fn write(recipe: &str, out: &str) {
    let recipe: Json = serde_json::from_slice(&std::fs::read(recipe).expect("recipe")).expect("recipe JSON");
    if recipe["version"] != "0.1" {
        unsupported("it writes version 0.1 only");
    }
    if !recipe["attributes"].is_null() {
        unsupported("file attributes (0.1 has none)");
    }
    let mut w = ztensor::ZTensorWriter::create(out).expect("create");
    for o in recipe["objects"].as_array().expect("objects") {
        let checksum = match o["digest"].as_str() {
            None => ztensor::ChecksumAlgorithm::None,
            Some("crc32c") => ztensor::ChecksumAlgorithm::Crc32c,
            Some(other) => unsupported(&format!("digest {other}")),
        };
        let encoding = if o["encoding"] == "zstd" { ztensor::Encoding::Zstd } else { ztensor::Encoding::Raw };
        let name = o["name"].as_str().expect("name");
        let shape: Vec<u64> = o["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim")).collect();
        let part = |role: &str| -> (ztensor::DType, Vec<u8>) {
            let c = &o["components"][role];
            (dtype(c["dtype"].as_str().unwrap_or_else(|| unsupported(&format!("no {role} component")))), unhex(c["hex"].as_str().unwrap_or("")))
        };
        // Sparse layouts are one blob, laid out as its reader expects.
        let (layout, d, data) = match o["format"].as_str().unwrap_or("") {
            "dense" => {
                let (d, data) = part("data");
                (ztensor::Layout::Dense, d, data)
            }
            "sparse_csr" => {
                let (d, values) = part("values");
                let blob = [part("indptr").1, part("indices").1, values].concat();
                (ztensor::Layout::SparseCsr, d, blob)
            }
            "sparse_coo" => {
                let (d, values) = part("values");
                let coords = part("coords").1;
                let rank = shape.len();
                let width = values.len() / (coords.len() / 8 / rank.max(1)).max(1);
                let nnz = coords.len() / 8 / rank.max(1);
                let mut blob = Vec::new();
                for i in 0..nnz {
                    for k in 0..rank {
                        let at = (k * nnz + i) * 8;
                        blob.extend_from_slice(&coords[at..at + 8]);
                    }
                    blob.extend_from_slice(&values[i * width..(i + 1) * width]);
                }
                (ztensor::Layout::SparseCoo, d, blob)
            }
            other => unsupported(&format!("format {other}")),
        };
        let fields: Option<BTreeMap<String, serde_cbor::Value>> =
            o["attributes"].as_object().map(|a| a.iter().map(|(k, v)| (k.clone(), to_cbor(v))).collect());
        if let Err(e) = w.add_tensor(name, shape, d, layout, encoding, data, None, checksum, fields) {
            unsupported(&e.to_string());
        }
    }
    if let Err(e) = w.finalize() {
        unsupported(&e.to_string());
    }
}
