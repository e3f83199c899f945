//! The reference implementation (ztensor 1.2.3) in the conformance dump protocol.

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};
use ztensor::TensorReader;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn cbor(v: &ciborium::Value) -> Json {
    use ciborium::Value as C;
    match v {
        C::Integer(i) => {
            let i: i128 = (*i).into();
            if let Ok(v) = i64::try_from(i) {
                json!(v)
            } else if let Ok(v) = u64::try_from(i) {
                json!(v)
            } else {
                json!({"$int": i.to_string()})
            }
        }
        C::Bytes(b) => json!({"$bytes": hex(b)}),
        C::Float(f) if f.is_nan() => json!({"$float": "NaN"}),
        C::Float(f) if f.is_infinite() => json!({"$float": if *f > 0.0 { "Infinity" } else { "-Infinity" }}),
        C::Float(f) => serde_json::Number::from_f64(*f).map(Json::Number).unwrap_or(Json::Null),
        C::Text(s) => json!(s),
        C::Bool(b) => json!(b),
        C::Null => Json::Null,
        C::Tag(t, v) => json!({"$tag": t, "value": cbor(v)}),
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
                json!({"$map": m.iter().map(|(k, v)| json!([cbor(k), cbor(v)])).collect::<Vec<_>>()})
            }
        }
        _ => Json::Null,
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("a file");
    let head = std::fs::read(&path).map(|b| b.get(..8).map(<[u8]>::to_vec).unwrap_or_default()).unwrap_or_default();
    let reader = match ztensor::Reader::open_any_path(&path) {
        Ok(r) => r,
        Err(e) => {
            println!("{}", json!({"dump": "ztensor-dump/1", "error": {"kind": "reference_error", "message": e.to_string()}}));
            std::process::exit(1);
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
            let (len, sha) = match reader.read_component(c) {
                Ok(d) => (json!(d.len()), json!(hex(&Sha256::digest(&d)))),
                Err(e) => {
                    error = json!(e.to_string());
                    (Json::Null, Json::Null)
                }
            };
            let encoding = match c.encoding {
                ztensor::Encoding::Raw => "raw",
                ztensor::Encoding::Zstd => "zstd",
            };
            components.insert(role.clone(), json!({"dtype": c.dtype.as_str(), "type": c.r#type, "encoding": encoding, "decoded_length": len, "sha256": sha}));
        }
        if !error.is_null() {
            for c in components.values_mut() {
                c["decoded_length"] = Json::Null;
                c["sha256"] = Json::Null;
            }
        }
        let attributes = obj.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), cbor(v))).collect()));
        objects.push(json!({"name": name, "format": obj.format.as_str(), "shape": obj.shape, "attributes": attributes, "components": components, "error": error}));
    }
    let attributes = manifest.attributes.as_ref().map(|a| Json::Object(a.iter().map(|(k, v)| (k.clone(), cbor(v))).collect()));
    let version = if legacy { Json::Null } else { json!(manifest.version) };
    println!("{}", json!({"dump": "ztensor-dump/1", "container": container, "version": version, "attributes": attributes, "objects": objects}));
}
