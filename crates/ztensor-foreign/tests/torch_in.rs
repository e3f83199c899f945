//! Checkpoints written by `torch.save` itself (fixtures/external/pytorch, see make.py):
//! every tensor reads as `torch.load` gives it, the plain values as attributes; what is
//! refused is refused by name; the hostile archives end in clean errors.

use std::path::PathBuf;

use ztensor_foreign::ErrorKind;
use ztensor_foreign::torch::TorchFile;
use ztensor_format::{DigestAlgorithm, Value};
use ztensor_io::TensorSource;
use ztensor_io::codec::Hasher;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/pytorch")
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap()
}

/// The zTensor storage dtype and logical type of a torch dtype.
fn zt_types(torch: &str) -> (&'static str, Option<&'static str>) {
    match torch {
        "float64" => ("f64", None),
        "float32" => ("f32", None),
        "float16" => ("f16", None),
        "bfloat16" => ("bf16", None),
        "int64" => ("i64", None),
        "int32" => ("i32", None),
        "int16" => ("i16", None),
        "int8" => ("i8", None),
        "uint8" => ("u8", None),
        "uint16" => ("u16", None),
        "uint32" => ("u32", None),
        "uint64" => ("u64", None),
        "bool" => ("bool", None),
        "complex64" => ("f32", Some("complex64")),
        "complex128" => ("f64", Some("complex128")),
        "float8_e4m3fn" => ("u8", Some("f8_e4m3fn")),
        "float8_e5m2" => ("u8", Some("f8_e5m2")),
        "float8_e4m3fnuz" => ("u8", Some("f8_e4m3fnuz")),
        "float8_e5m2fnuz" => ("u8", Some("f8_e5m2fnuz")),
        other => panic!("no zTensor type expected for {other}"),
    }
}

/// An attribute value in make.py's JSON spelling.
fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Integer(i) => serde_json::Value::from(i64::try_from(*i).unwrap()),
        Value::Float(f) => (*f).into(),
        Value::Text(t) => t.clone().into(),
        Value::Bytes(b) => serde_json::json!({
            "bytes": b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        }),
        Value::Array(a) => a.iter().map(json).collect(),
        Value::Map(m) => {
            serde_json::json!({"map": m.iter().map(|(k, v)| vec![json(k), json(v)]).collect::<Vec<_>>()})
        }
        other => panic!("unexpected attribute value {other:?}"),
    }
}

/// `v` with the pairs of every `{"map": …}` sorted: attributes are maps, which keep no
/// order of their own (they are held in deterministic CBOR), while the expectations list
/// a dict's items in the order Python made them.
fn unordered(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Array(a) => a.iter().map(unordered).collect(),
        serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("map") => {
            let mut pairs: Vec<serde_json::Value> =
                o["map"].as_array().unwrap().iter().map(unordered).collect();
            pairs.sort_by_key(ToString::to_string);
            serde_json::json!({ "map": pairs })
        }
        serde_json::Value::Object(o) => {
            serde_json::Value::Object(o.iter().map(|(k, v)| (k.clone(), unordered(v))).collect())
        }
        other => other.clone(),
    }
}

#[test]
fn checkpoints_torch_wrote_read_as_torch_load_gives_them() {
    let expected = expected();
    let mut checked = 0;
    for (file, want) in expected["files"].as_object().unwrap() {
        if want["expect"] != "ok" {
            continue;
        }
        let pt = TorchFile::open(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(pt.len(), tensors.len(), "{file}");
        for (name, t) in tensors {
            let i = pt.find(name).unwrap_or_else(|| panic!("{file}: no {name}"));
            let data = pt.read(i).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            let shape: Vec<u64> =
                t["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
            assert_eq!(data.shape, shape, "{file} {name}");
            if let Some(components) = t["components"].as_object() {
                // A sparse tensor: its index parts as u64, its values in its dtype.
                assert_eq!(data.format.name(), t["format"].as_str().unwrap(), "{file} {name}");
                assert_eq!(data.components.len(), components.len(), "{file} {name}");
                for (role, sha) in components {
                    let c = &data.components[role.as_str()];
                    let want = if role == "values" {
                        zt_types(t["dtype"].as_str().unwrap()).0
                    } else {
                        "u64"
                    };
                    assert_eq!(c.dtype.name(), want, "{file} {name} {role}");
                    let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
                    h.update(&c.bytes);
                    assert_eq!(
                        h.finish().to_string(),
                        format!("sha256:{}", sha.as_str().unwrap()),
                        "{file} {name} {role}"
                    );
                }
                // And zTensor's own sparse rules hold for what torch wrote.
                pt.check(i, &data).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
                checked += 1;
                continue;
            }
            let c = &data.components["data"];
            let (dtype, logical) = zt_types(t["dtype"].as_str().unwrap());
            assert_eq!(c.dtype.name(), dtype, "{file} {name}");
            assert_eq!(c.logical_type.as_ref().map(|l| l.name()), logical, "{file} {name}");
            let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
            h.update(&c.bytes);
            assert_eq!(
                h.finish().to_string(),
                format!("sha256:{}", t["sha256"].as_str().unwrap()),
                "{file} {name}"
            );
            checked += 1;
        }
        let attributes = want["attributes"].as_object().unwrap();
        let ours: serde_json::Map<String, serde_json::Value> = match pt.attributes() {
            None => serde_json::Map::new(),
            Some(a) => {
                let Value::Map(m) = a.to_value() else { panic!("{file}: attributes {a:?}") };
                m.iter()
                    .map(|(k, v)| {
                        let Value::Text(k) = k else { panic!("{file}: key {k:?}") };
                        (k.clone(), json(v))
                    })
                    .collect()
            }
        };
        let ours = unordered(&serde_json::Value::Object(ours));
        assert_eq!(ours, unordered(&serde_json::Value::Object(attributes.clone())), "{file}");
    }
    assert!(checked >= 60, "{checked} tensors checked");
}

#[test]
fn what_torch_wrote_but_zt_cannot_hold_is_refused_by_name() {
    for (file, want) in expected()["files"].as_object().unwrap() {
        match want["expect"].as_str().unwrap() {
            "refused" => {
                let e = TorchFile::open(dir().join(file)).unwrap_err();
                let words = want["words"].as_str().unwrap();
                assert!(e.to_string().contains(words), "{file}: {e}");
                assert_eq!(e.kind(), ErrorKind::Malformed, "{file}: {e}");
            }
            "unsupported" => {
                let pt = TorchFile::open(dir().join(file)).unwrap();
                for name in want["tensors"].as_array().unwrap() {
                    let i = pt.find(name.as_str().unwrap()).unwrap();
                    assert!(pt.info(i).unwrap().unsupported.is_some(), "{file}");
                    assert!(matches!(
                        pt.read(i).unwrap_err().kind(),
                        ztensor_io::ErrorKind::Unsupported(_)
                    ));
                }
            }
            _ => {}
        }
    }
}

#[test]
fn hostile_archives_end_in_clean_errors() {
    let hostile = expected()["hostile"].as_object().unwrap().clone();
    assert!(hostile.len() >= 12);
    for (file, tries) in &hostile {
        let path = dir().join("hostile").join(file);
        let outcome = TorchFile::open(&path);
        let message = match &outcome {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Malformed, "{file} ({tries}): {e}");
                e.to_string()
            }
            Ok(pt) => {
                // What opens must fail where it lies: in a tensor it cannot read.
                let errors: Vec<String> =
                    (0..pt.len()).filter_map(|i| pt.read(i).err()).map(|e| e.to_string()).collect();
                assert!(!errors.is_empty(), "{file} ({tries}) read without error");
                errors.join("; ")
            }
        };
        let words = match file.as_str() {
            "calls-os-system.pt" => "system",
            "stack-global-eval.pt" => "builtins.eval",
            "huge-expand.pt" => "limit",
            "crc-flipped.pt" => "CRC-32",
            "cycle.pt" | "deep-nesting.pt" => "deeper",
            "shared-2e40.pt" => "shares values",
            "missing-storage.pt" => "not in the file",
            "string-length-lie.pt" => "past the end",
            "storage-claims-1g.pt" => "holds 16 bytes",
            "shape-overflow.pt" => "more elements than can be counted",
            _ => "past its storage",
        };
        assert!(message.contains(words), "{file} ({tries}): {message}");
    }
}
