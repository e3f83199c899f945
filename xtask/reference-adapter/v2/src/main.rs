//! The reference implementation of zTensor 2 (crates.io `ztensor` 2.1.1) in the conformance
//! dump protocol (`reference-dump-v2 FILE`, container `zt-2`), and two checks that grade a
//! writer through it:
//!
//! - `reference-dump-v2 --canonical FILE`: `{"violations": [...], "id": "sha256:…"}`, what the
//!   reference's canonical-form checker and content digest say of the file;
//! - `reference-dump-v2 --rewrite IN OUT`: the reference's canonical writer, given everything
//!   the reference reads from IN;
//! - `reference-dump-v2 --encode IN OUT`: the reference's writer in its default (not canonical)
//!   form, every part of IN stored under `zt.zstd-seekable/1`;
//! - `reference-dump-v2 --write RECIPE OUT`: the writer protocol for version-2 recipes (exit 3
//!   for any other version): the reference's canonical writer, or its default one with every
//!   part under `zt.zstd-seekable/1` for a recipe of compressed objects. The recipe names its
//!   content in the 1.x model; this adapter maps it as a zTensor 2 writer does (`sparse_csr` is
//!   `zt.sparse_csr/1`, `bool` is `u8` of logical type `bool`, another 1.x format `F` is
//!   `ztensor1.F/1`).

use serde_json::{json, Map, Value as Json};
use sha2::{Digest, Sha256};
use ztensor::format::cbor::Value;
use ztensor::{Source, Writer};

// The dump's JSON shape, the one definition `ztensor-dump` builds with (a file of std and
// serde_json only, so this project includes it rather than depending on the workspace).
#[allow(dead_code)]
#[path = "../../../../crates/ztensor-dump/src/shape.rs"]
mod shape;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn to_json(v: &Value) -> Json {
    match v {
        Value::Uint(n) => shape::integer(i128::from(*n)),
        Value::Nint(n) => shape::integer(-1 - i128::from(*n)),
        Value::Bytes(b) => shape::bytes(hex(b)),
        Value::Text(s) => json!(s),
        Value::Array(a) => Json::Array(a.iter().map(to_json).collect()),
        Value::Map(m) => {
            if m.iter().all(|(k, _)| matches!(k, Value::Text(_))) {
                let mut o = Map::new();
                for (k, v) in m {
                    if let Value::Text(k) = k {
                        o.insert(k.clone(), to_json(v));
                    }
                }
                Json::Object(o)
            } else {
                shape::pairs(m.iter().map(|(k, v)| (to_json(k), to_json(v))))
            }
        }
        Value::Bool(b) => json!(b),
        Value::Null => Json::Null,
        Value::Float(f) => shape::float(*f),
    }
}

/// `ManifestHash` as `manifest_hash`: the rule ids of the conformance corpus.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn rejected(e: &ztensor::Error) -> Json {
    let kind = e.rule().map_or_else(|| "reference_error".to_owned(), |r| snake(&format!("{r:?}")));
    shape::rejected(&kind, &one_line(&e.to_string()))
}

fn dump(path: &str) -> (Json, bool) {
    let src = match Source::open(path) {
        Ok(src) => src,
        Err(e) => return (rejected(&e), false),
    };
    let mut objects = Vec::new();
    let mut names: Vec<&str> = src.names().collect();
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in names {
        let t = src.tensor(name).expect("a listed tensor");
        let mut components = Map::new();
        let mut error = Json::Null;
        let part_json = |p: &ztensor::Part<'_>, bytes: Option<&[u8]>| {
            let encoding = match p.payload() {
                ztensor::provide::Payload::Encoded { encoding, .. } => encoding.clone(),
                _ => "raw".to_owned(),
            };
            let decoded = bytes.map(|b| (b.len() as u64, hex(&Sha256::digest(b))));
            shape::component(p.dtype().as_str(), p.logical(), &encoding, decoded)
        };
        if let Err(e) = t.verify() {
            error = json!(one_line(&e.to_string()));
        }
        // Its CSR assembly checks the data rules of zt.sparse_csr/1 (as its corpus tests do).
        if error.is_null() && t.layout() == "zt.sparse_csr/1" {
            if let Err(e) = ztensor_compat::csr::read(&t) {
                error = json!(one_line(&e.to_string()));
            }
        }
        for pname in t.parts() {
            let p = t.part(pname).expect("a listed part");
            match (error.is_null(), p.bytes()) {
                (true, Ok(bytes)) => {
                    components.insert(pname.to_owned(), part_json(&p, Some(&bytes)));
                }
                (true, Err(e)) => {
                    error = json!(one_line(&e.to_string()));
                    components.insert(pname.to_owned(), part_json(&p, None));
                }
                (false, _) => {
                    components.insert(pname.to_owned(), part_json(&p, None));
                }
            }
        }
        if !error.is_null() {
            for c in components.values_mut() {
                c["decoded_length"] = Json::Null;
                c["sha256"] = Json::Null;
            }
        }
        let attributes = t.attributes().map_or(Json::Null, to_json);
        objects.push(shape::object(name, t.layout(), json!(t.shape()), attributes, components, error));
    }
    let attributes = src.attributes().map_or(Json::Null, to_json);
    (shape::accepted("zt-2", json!("2"), attributes, Json::Array(objects)), true)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--canonical", file] => {
            let violations = match ztensor::read::canonical_violations(file) {
                Ok(v) => v,
                Err(e) => {
                    println!("{}", rejected(&e));
                    std::process::exit(1);
                }
            };
            let id = Source::open(file)
                .ok()
                .and_then(|s| s.provenance().as_root().cloned())
                .map(|m| m.content_digest(ztensor::DigestAlgorithm::Sha256));
            let id = match id {
                Some(Ok(id)) => json!(id),
                Some(Err(e)) => json!({"error": one_line(&e.to_string())}),
                None => Json::Null,
            };
            println!("{}", json!({"violations": violations, "id": id}));
        }
        ["--encode", input, output] => {
            // The reference's own writer (not canonical: its default placement), every part
            // under the zt.zstd-seekable/1 encoding.
            let run = || -> ztensor::Result<u64> {
                let src = Source::open(input)?;
                let mut w = Writer::options().canonical(false).create(output)?;
                if let Some(a) = src.attributes() {
                    w.set_attributes(a.clone());
                }
                for t in src.tensors() {
                    let parts: Vec<(String, ztensor::Part<'_>, Vec<u8>)> = t
                        .parts()
                        .map(|p| {
                            let part = t.part(p)?;
                            Ok((p.to_owned(), part, part.bytes()?.into_owned()))
                        })
                        .collect::<ztensor::Result<_>>()?;
                    w.object(t.name(), |mut o| {
                        o = o.shape(t.shape().to_vec()).layout(t.layout());
                        if let Some(a) = t.attributes() {
                            o = o.attributes(a.clone());
                        }
                        for (name, part, bytes) in &parts {
                            o = o.part(name.clone(), |mut b| {
                                b = b.dtype(part.dtype()).encoding("zt.zstd-seekable/1");
                                if let Some(l) = part.logical() {
                                    b = b.logical(l);
                                }
                                b.bytes(bytes)
                            });
                        }
                        o
                    })?;
                }
                w.finish()
            };
            if let Err(e) = run() {
                eprintln!("reference 2.1.1 cannot encode {input}: {e}");
                std::process::exit(1);
            }
        }
        ["--rewrite", input, output] => {
            let run = || -> ztensor::Result<u64> {
                let src = Source::open(input)?;
                let mut w = Writer::options().canonical(true).create(output)?;
                w.ingest(&src)?;
                w.finish()
            };
            if let Err(e) = run() {
                eprintln!("reference 2.1.1 cannot rewrite {input}: {e}");
                std::process::exit(1);
            }
        }
        ["--write", recipe, output] => std::process::exit(write_recipe(recipe, output)),
        [file] => {
            let (json, ok) = dump(file);
            println!("{json}");
            std::process::exit(if ok { 0 } else { 1 });
        }
        _ => {
            eprintln!("usage: reference-dump-v2 FILE | --canonical FILE | --rewrite IN OUT | --encode IN OUT | --write RECIPE OUT");
            std::process::exit(2);
        }
    }
}

/// A JSON attribute value as the reference's CBOR value.
fn from_json(j: &Json) -> Value {
    match j {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Value::Uint(u),
            (_, Some(i), _) => Value::Nint(u64::try_from(-1 - i).unwrap_or(0)),
            (_, _, f) => Value::Float(f.unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Text(s.clone()),
        Json::Array(a) => Value::Array(a.iter().map(from_json).collect()),
        Json::Object(o) => {
            Value::Map(o.iter().map(|(k, v)| (Value::Text(k.clone()), from_json(v))).collect())
        }
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()).collect()
}

/// The writer protocol: 0 written, 3 a recipe this writer does not take, 1 a failure.
fn write_recipe(recipe: &str, output: &str) -> i32 {
    let doc: Json = match std::fs::read(recipe).map(|b| serde_json::from_slice(&b)) {
        Ok(Ok(doc)) => doc,
        _ => {
            eprintln!("cannot read the recipe {recipe}");
            return 1;
        }
    };
    if doc["version"] != "2" {
        eprintln!("reference 2.1.1 writes zTensor 2 only, not version {}", doc["version"]);
        return 3;
    }
    let objects = doc["objects"].as_array().cloned().unwrap_or_default();
    let zstd = objects.iter().any(|o| o["encoding"] == "zstd");
    if objects.iter().any(|o| (o["encoding"] == "zstd") != zstd) {
        eprintln!("one file, one encoding: this adapter does not mix raw and compressed objects");
        return 3;
    }
    let mut sorted: Vec<&Json> = objects.iter().collect();
    sorted.sort_by(|a, b| {
        a["name"].as_str().unwrap_or("").as_bytes().cmp(b["name"].as_str().unwrap_or("").as_bytes())
    });
    // The bytes first: the builder borrows them.
    let bytes: Vec<Vec<(String, Vec<u8>)>> = sorted
        .iter()
        .map(|o| {
            o["components"]
                .as_object()
                .map(|c| {
                    c.iter().map(|(r, c)| (r.clone(), unhex(c["hex"].as_str().unwrap_or("")))).collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let run = || -> ztensor::Result<u64> {
        let mut w = Writer::options().canonical(!zstd).create(output)?;
        if !doc["attributes"].is_null() {
            w.set_attributes(from_json(&doc["attributes"]));
        }
        for (o, parts) in sorted.iter().zip(&bytes) {
            let layout = match o["format"].as_str().unwrap_or("") {
                "dense" => "dense".to_owned(),
                "sparse_csr" => "zt.sparse_csr/1".to_owned(),
                "sparse_coo" => "zt.sparse_coo/1".to_owned(),
                other => format!("ztensor1.{other}/1"),
            };
            let shape: Vec<u64> =
                o["shape"].as_array().map(|s| s.iter().filter_map(Json::as_u64).collect()).unwrap_or_default();
            w.object(o["name"].as_str().unwrap_or(""), |mut b| {
                b = b.shape(shape.clone()).layout(layout.clone());
                if !o["attributes"].is_null() {
                    b = b.attributes(from_json(&o["attributes"]));
                }
                for (role, data) in parts {
                    let c = &o["components"][role.as_str()];
                    let dtype = c["dtype"].as_str().unwrap_or("");
                    let (dtype, logical) = match (dtype, c["type"].as_str()) {
                        ("bool", _) => ("u8", Some("bool")),
                        (d, t) => (d, t),
                    };
                    let dtype: ztensor::DType = dtype.parse().unwrap_or(ztensor::DType::U8);
                    b = b.part(role.clone(), |mut p| {
                        p = p.dtype(dtype);
                        if let Some(l) = logical {
                            p = p.logical(l);
                        }
                        if zstd {
                            p = p.encoding("zt.zstd-seekable/1");
                        }
                        p.bytes(data)
                    });
                }
                b
            })?;
        }
        w.finish()
    };
    match run() {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("reference 2.1.1 cannot write {recipe}: {e}");
            1
        }
    }
}
