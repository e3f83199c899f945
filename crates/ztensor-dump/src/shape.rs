//! The shape of the conformance dump (`spec/conformance-dump.md`), in one place: its tag, an
//! accepted dump's members, an object's and a component's, a rejected dump, and the JSON forms
//! of the CBOR values JSON has none for. Members are built in the documented order.
//!
//! This file uses nothing but `std` and `serde_json` (and compiles under editions 2021 and
//! 2024): the reference adapters (`xtask/reference-adapter/*`, separate Cargo projects built
//! against other implementations) include it by `#[path]`, so every dump is built here.

use serde_json::{Map, Value as Json, json};

/// The dump's tag, its `"dump"` member.
pub const TAG: &str = "ztensor-dump/1";

/// An accepted file's dump: its container (`zt-1.2`, `tensorbuffers`, ...), the version string
/// it declares (`null` where it has none), its attributes (`null` when absent) and its objects
/// (an array sorted by name).
pub fn accepted(container: &str, version: Json, attributes: Json, objects: Json) -> Json {
    json!({
        "dump": TAG,
        "container": container,
        "version": version,
        "attributes": attributes,
        "objects": objects,
    })
}

/// A rejected file's dump: the rule's identifier (`kind`) and a message for people.
pub fn rejected(kind: &str, message: &str) -> Json {
    json!({"dump": TAG, "error": {"kind": kind, "message": message}})
}

/// An object of a dump: `components` keyed by role, `error` `null` or the one-line reason
/// this object could not be decoded.
pub fn object(
    name: &str,
    format: &str,
    shape: impl Into<Json>,
    attributes: Json,
    components: Map<String, Json>,
    error: Json,
) -> Json {
    json!({
        "name": name,
        "format": format,
        "shape": shape.into(),
        "attributes": attributes,
        "components": components,
        "error": error,
    })
}

/// A component of an object: its short dtype name, logical type, encoding as stored, and,
/// when it decoded, its decoded length and the SHA-256 (lowercase hex) of the decoded bytes;
/// both `null` when it did not.
pub fn component(
    dtype: &str,
    logical_type: Option<&str>,
    encoding: &str,
    decoded: Option<(u64, String)>,
) -> Json {
    let (decoded_length, sha256) = match decoded {
        Some((len, hash)) => (json!(len), json!(hash)),
        None => (Json::Null, Json::Null),
    };
    json!({
        "dtype": dtype,
        "type": logical_type,
        "encoding": encoding,
        "decoded_length": decoded_length,
        "sha256": sha256,
    })
}

/// A CBOR integer: a JSON integer within the i64/u64 range, else `{"$int": "<decimal>"}`.
pub fn integer(i: i128) -> Json {
    if let Ok(v) = i64::try_from(i) {
        json!(v)
    } else if let Ok(v) = u64::try_from(i) {
        json!(v)
    } else {
        json!({"$int": i.to_string()})
    }
}

/// A CBOR float: a JSON number, or `{"$float": "NaN" | "Infinity" | "-Infinity"}`.
pub fn float(f: f64) -> Json {
    if f.is_nan() {
        json!({"$float": "NaN"})
    } else if f.is_infinite() {
        json!({"$float": if f > 0.0 { "Infinity" } else { "-Infinity" }})
    } else {
        serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)
    }
}

/// A CBOR byte string, given as lowercase hex: `{"$bytes": "<hex>"}`.
pub fn bytes(hex: String) -> Json {
    json!({"$bytes": hex})
}

/// A CBOR tag: `{"$tag": N, "value": V}`.
pub fn tag(tag: u64, value: Json) -> Json {
    json!({"$tag": tag, "value": value})
}

/// A CBOR map with a key that is not text: `{"$map": [[key, value], ...]}`.
pub fn pairs(pairs: impl IntoIterator<Item = (Json, Json)>) -> Json {
    let pairs: Vec<Json> = pairs.into_iter().map(|(k, v)| json!([k, v])).collect();
    json!({"$map": pairs})
}

/// A CBOR simple value other than `false`, `true` and `null` (`undefined` is 23):
/// `{"$simple": N}`.
pub fn simple(n: u8) -> Json {
    json!({"$simple": n})
}
