use super::*;
use ztensor_foreign::sharded::ShardedSafetensors;

/// Writes shards of the given tensors and an index; returns the index path.
fn checkpoint(d: &Path, shards: &[&[Spec]], index: Option<String>) -> PathBuf {
    let count = shards.len();
    let mut map = serde_json::Map::new();
    for (i, tensors) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-{count:05}.safetensors", i + 1);
        let metadata: HashMap<String, String> = [("format".into(), "pt".into())].into();
        std::fs::write(d.join(&name), safetensors_file(tensors, Some(metadata))).unwrap();
        for t in *tensors {
            map.insert(t.0.clone(), name.clone().into());
        }
    }
    let index = index.unwrap_or_else(|| {
        serde_json::json!({"metadata": {"total_size": 0}, "weight_map": map}).to_string()
    });
    let path = d.join("model.safetensors.index.json");
    std::fs::write(&path, index).unwrap();
    path
}

#[test]
fn shards_become_one_file() {
    let d = dir("sharded");
    let all = every_dtype();
    let index = checkpoint(&d, &[&all[..7], &all[7..12], &all[12..]], None);
    let ckpt = ShardedSafetensors::open(&index).unwrap();
    assert_eq!(ckpt.shards().len(), 3);
    assert_eq!(ckpt.totals().0, all.len());
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let options = WriteOptions::zstd(3).with_digest(ztensor_format::DigestAlgorithm::Crc32c);
    sink(&ckpt, &mut w, &options, 2).unwrap();
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::strict()).unwrap();
    // Blobs are laid out in conversion order (the manifest map itself is sorted by key).
    let mut by_offset: Vec<(u64, &str)> = reader
        .manifest()
        .objects()
        .map(|o| (o.object().components["data"].offset, o.name()))
        .collect();
    by_offset.sort_unstable();
    let names: Vec<&str> = by_offset.into_iter().map(|(_, n)| n).collect();
    let mut expected: Vec<&str> = Vec::new();
    for shard in [&all[..7], &all[7..12], &all[12..]] {
        // Each shard in its data order: the crate's writer orders by alignment, then name.
        let st = SafetensorsFile::new(safetensors_file(shard, None)).unwrap();
        let order: Vec<String> = st.tensors().iter().map(|t| t.name.clone()).collect();
        expected.extend(order.iter().map(|n| all.iter().find(|t| &t.0 == n).unwrap().0.as_str()));
    }
    assert_eq!(names, expected);
    for (name, _, _, data) in &all {
        assert_eq!(
            reader.component(name, "data").and_then(|c| c.decoded()).unwrap().as_ref(),
            &data[..]
        );
    }
    assert_eq!(
        reader.manifest().manifest().attributes.as_ref().map(ztensor_format::Attributes::to_value),
        Some(ztensor_format::text_map([("format", "pt".into())]))
    );
}

#[test]
fn index_and_shards_must_agree() {
    let t = |name: &str| (name.to_owned(), Dtype::U8, vec![1], vec![7]);
    let cases: Vec<Case<'_>> = vec![
        (
            "missing",
            Box::new(move |d| {
                let index = serde_json::json!({"weight_map": {
                    "a": "model-00001-of-00001.safetensors",
                    "ghost": "model-00001-of-00001.safetensors"}});
                checkpoint(d, &[&[t("a")]], Some(index.to_string()))
            }),
            ErrorKind::IndexMismatch,
            "tensor \"ghost\" is listed in model-00001-of-00001.safetensors but not stored there",
        ),
        (
            "extra",
            Box::new(move |d| {
                let index =
                    serde_json::json!({"weight_map": {"a": "model-00001-of-00001.safetensors"}});
                checkpoint(d, &[&[t("a"), t("b")]], Some(index.to_string()))
            }),
            ErrorKind::IndexMismatch,
            "tensor \"b\" in model-00001-of-00001.safetensors is not listed in the index",
        ),
        (
            "in two shards",
            Box::new(move |d| {
                let index = serde_json::json!({"weight_map": {
                    "a": "model-00001-of-00002.safetensors",
                    "b": "model-00002-of-00002.safetensors"}});
                checkpoint(d, &[&[t("a")], &[t("a"), t("b")]], Some(index.to_string()))
            }),
            ErrorKind::IndexMismatch,
            "tensor \"a\" is in both model-00001-of-00002.safetensors and model-00002-of-00002.safetensors",
        ),
        (
            "listed twice",
            Box::new(move |d| {
                let index = r#"{"weight_map": {"a": "model-00001-of-00001.safetensors", "a": "model-00001-of-00001.safetensors"}}"#;
                checkpoint(d, &[&[t("a")]], Some(index.into()))
            }),
            ErrorKind::IndexMismatch,
            "tensor \"a\" is listed twice",
        ),
        (
            "outside the directory",
            Box::new(move |d| {
                let index =
                    serde_json::json!({"weight_map": {"a": "../model-00001-of-00001.safetensors"}});
                checkpoint(d, &[&[t("a")]], Some(index.to_string()))
            }),
            ErrorKind::Malformed,
            "is not a plain file name beside the index",
        ),
        (
            "not an index",
            Box::new(move |d| checkpoint(d, &[&[t("a")]], Some("[1, 2]".into()))),
            ErrorKind::Malformed,
            "index: invalid type",
        ),
        (
            "shard missing",
            Box::new(move |d| {
                let index =
                    serde_json::json!({"weight_map": {"a": "model-00009-of-00009.safetensors"}});
                checkpoint(d, &[&[t("a")]], Some(index.to_string()))
            }),
            ErrorKind::Io,
            "model-00009-of-00009.safetensors: cannot open",
        ),
    ];
    for (what, make, kind, message) in cases {
        let d = dir(&format!("agree-{}", what.replace(' ', "-")));
        let index = make(&d);
        let e = ShardedSafetensors::open(&index).unwrap_err();
        assert_eq!(e.kind(), kind, "{what}: {e}");
        assert!(e.to_string().contains(message), "{what}: {e}");
    }
}

#[test]
fn shards_that_disagree_on_metadata_are_refused() {
    let d = dir("meta");
    let a = safetensors_file(
        &[("a".into(), Dtype::U8, vec![1], vec![1])],
        Some([("format".into(), "pt".into())].into()),
    );
    let b = safetensors_file(
        &[("b".into(), Dtype::U8, vec![1], vec![2])],
        Some([("format".into(), "tf".into())].into()),
    );
    std::fs::write(d.join("s1.safetensors"), a).unwrap();
    std::fs::write(d.join("s2.safetensors"), b).unwrap();
    let index = d.join("m.safetensors.index.json");
    std::fs::write(&index, r#"{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}"#)
        .unwrap();
    let e = ShardedSafetensors::open(&index).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::IndexMismatch);
    assert!(e.to_string().contains("shards disagree on __metadata__ \"format\""), "{e}");
}
