use super::*;
use ztensor_format::text_map;

#[test]
fn a_streamed_tensorbuffers_dump_is_the_built_one() {
    let mut w = ztensor_tensorbuffers::TbWriter::new(Vec::new()).unwrap();
    w.set_model(Some("m\"odel".into()));
    w.add("z", ztensor_tensorbuffers::DataType::Float32, &[2, 1], &[0; 8]).unwrap();
    w.add("a", ztensor_tensorbuffers::DataType::UInt8, &[3], &[1, 2, 3]).unwrap();
    let file = w.finish().unwrap().0;
    let r = TbFile::new(&file[..], &ztensor_tensorbuffers::ReadOptions::default()).unwrap();
    let streamed = serde_json::to_string(&TbDump(&r)).unwrap();
    assert_eq!(streamed, serde_json::to_string(&tensorbuffers(&r)).unwrap());
    assert!(streamed.contains(r#""shape":[2,1]"#), "{streamed}");
}

/// A zTensor 2 dump written one object at a time (attributes straight from the manifest) is
/// the dump built whole, on every file of the corpus (but the hostile ones) that opens.
#[test]
fn a_streamed_zt2_dump_is_the_built_one() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures");
    let corpus = fixtures.join("external/ztensor2");
    let dirs = ["valid", "reject"].map(|d| corpus.join(d));
    let producers = fixtures.join("producers/v2/reference-2.1.1");
    let (mut seen, mut with_attributes) = (0, 0);
    for dir in dirs.iter().chain([&producers]) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "zt") {
                continue;
            }
            let source = ztensor_io::FileSource::open(&path).unwrap();
            let Ok(file) = ztensor_v2::File::open(source, ztensor_v2::MAX_MANIFEST) else {
                continue;
            };
            let mut streamed = Vec::new();
            write_zt2(&file, &mut streamed).unwrap();
            let built = serde_json::to_vec(&zt2(&file)).unwrap();
            assert_eq!(String::from_utf8(streamed).unwrap(), String::from_utf8(built).unwrap());
            let m = file.manifest();
            let attributes = m.is_some_and(|m| {
                m.attributes.is_some() || m.objects.iter().any(|(_, o)| o.attributes.is_some())
            });
            (seen, with_attributes) = (seen + 1, with_attributes + usize::from(attributes));
        }
    }
    assert!(seen > 30 && with_attributes >= 5, "{seen} files, {with_attributes} with attributes");
}

#[test]
fn streamed_json_is_the_built_json() {
    let t = |s: &str| Value::Text(s.to_owned());
    let values = [
        Value::Array((0..1000).map(|i| Value::from(i as u64)).collect()),
        Value::Map(vec![
            (t("a"), Value::Array(vec![t("x"), Value::Null])),
            (t("b"), Value::Bool(true)),
        ]),
        Value::Map(vec![(Value::from(1u64), t("one")), (t("two"), Value::Float(f64::NAN))]),
        Value::Tag(64, Box::new(Value::Bytes(vec![1, 2, 3]))),
        Value::Float(f64::INFINITY),
        Value::Simple(16),
        // Strings written as they lie: escapes, and hex across its pieces.
        t("quote \" newline \n control \u{1} é"),
        Value::Bytes(vec![]),
        Value::Bytes((0..=255u8).cycle().skip(7).take(10_000).collect()),
    ];
    for v in values {
        let attributes = Attributes::try_from(text_map([("v", v)])).unwrap();
        let streamed = serde_json::to_string(&JsonOf(attributes.root())).unwrap();
        let built = cbor_to_json(&attributes.to_value()).to_string();
        assert_eq!(streamed, built, "{attributes:?}");
        let streamed = serde_json::to_string_pretty(&JsonOf(attributes.root())).unwrap();
        let built = serde_json::to_string_pretty(&cbor_to_json(&attributes.to_value()));
        assert_eq!(streamed, built.unwrap(), "{attributes:?}");
        assert_eq!(attributes_to_json(&attributes), cbor_to_json(&attributes.to_value()));
    }
}

/// zTensor 2 files dump as `zt-2`: the corpus's canonical example (its parts' SHA-256
/// computed here from the bytes the corpus documents: 16 × 0x01 and 16 × 0x02), a CSR
/// object whose data breaks a rule, an encoding not decoded, and a data shard.
#[test]
fn ztensor_2_files_dump_as_zt_2() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2");
    let (dump, ok) = file(&corpus.join("valid/canonical-basic.zt")).unwrap();
    assert!(ok);
    assert_eq!((&dump["container"], &dump["version"]), (&json!("zt-2"), &json!("2")));
    let names: Vec<&Json> =
        dump["objects"].as_array().unwrap().iter().map(|o| &o["name"]).collect();
    assert_eq!(names, [&json!("a.bias"), &json!("a.weight"), &json!("tied")]);
    let bias = &dump["objects"][0]["components"]["data"];
    assert_eq!(bias["sha256"], json!(sha256_hex(&[1u8; 16])));
    assert_eq!((&bias["dtype"], &bias["decoded_length"]), (&json!("f32"), &json!(16)));
    assert_eq!(dump["objects"][2]["components"]["data"]["sha256"], json!(sha256_hex(&[2u8; 16])));
    let (dump, ok) = file(&corpus.join("reject/csr-row-not-increasing.zt")).unwrap();
    assert!(ok, "the file opens; its object's data breaks a rule");
    assert!(dump["objects"][0]["error"].as_str().unwrap().contains("layout_data"), "{dump}");
    assert!(dump["objects"][0]["components"]["values"]["sha256"].is_null());
    let (dump, _) = file(&corpus.join("valid/view-unknown-encoding-refused.zt")).unwrap();
    assert_eq!(dump["objects"][0]["components"]["data"]["encoding"], "x.z/1");
    assert!(dump["objects"][0]["error"].is_string());
    let (dump, ok) = file(&corpus.join("valid/data-shard.zt")).unwrap();
    assert!(ok && dump["objects"].as_array().unwrap().is_empty());
    let (dump, ok) = file(&corpus.join("reject/manifest-hash-mismatch.zt")).unwrap();
    assert!(!ok);
    assert_eq!(dump["error"]["kind"], "manifest_hash");
}

/// The files the reference implementation 2.1.1 wrote (`cargo xtask v2-oracle --freeze`:
/// canonical, and with every part under `zt.zstd-seekable/1`) dump here as the reference
/// dumped them, and have the identity the reference computed.
#[test]
fn reference_2_1_1_files_read_as_the_reference_reads_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/producers/v2/reference-2.1.1");
    let ids: Json = serde_json::from_slice(&std::fs::read(dir.join("ids.json")).unwrap()).unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "zt") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let expected: Json =
            serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap()).unwrap();
        let (mut dump, ok) = file(&path).unwrap();
        assert!(ok, "{stem}");
        // Error messages are each implementation's own words: whether there is one counts.
        let mut expected = expected;
        for d in [&mut dump, &mut expected] {
            for o in d["objects"].as_array_mut().unwrap() {
                o["error"] = Json::Bool(!o["error"].is_null());
            }
        }
        assert_eq!(dump, expected, "{stem}");
        let source = ztensor_io::FileSource::open(&path).unwrap();
        let v2 = ztensor_v2::File::open(source, ztensor_v2::MAX_MANIFEST).unwrap();
        let id = v2.content_digest(ztensor_v2::IdAlgorithm::Sha256).unwrap();
        assert_eq!(Json::String(id), ids[&stem], "{stem}");
        seen += 1;
    }
    assert_eq!(seen, 14);
}
