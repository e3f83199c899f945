use super::*;

/// A safetensors file built by hand (header JSON, then the data in order): `tensors` are
/// (name, safetensors dtype, shape, bytes); `info` is the `DCP_SHARDING_INFO` text, if any.
fn file(tensors: &[(&str, &str, &[u64], &[u8])], info: Option<&str>) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    if let Some(info) = info {
        let mut meta = serde_json::Map::new();
        meta.insert(SHARDING_INFO.into(), info.into());
        meta.insert("format".into(), "pt".into());
        header.insert("__metadata__".into(), meta.into());
    }
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            (*name).into(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

fn shards(files: Vec<(&str, Vec<u8>)>) -> Result<DcpShards<Vec<u8>>> {
    let files = files
        .into_iter()
        .map(|(name, bytes)| (name.to_owned(), SafetensorsFile::new(bytes).unwrap()))
        .collect();
    DcpShards::new(files)
}

/// A 4 × 2 `f32` tensor `w` split by rows over two ranks, and a replicated `b` (saved once,
/// by rank 1, as DCP deduplicates it).
fn two_ranks() -> Vec<(&'static str, Vec<u8>)> {
    let rows = |from: u8| -> Vec<u8> { (from..from + 16).collect() };
    vec![
        (
            "shard-00001-model-00001-of-00001.safetensors",
            file(
                &[("w", "F32", &[2, 2], &rows(0)), ("b", "BF16", &[3], &[1, 2, 3, 4, 5, 6])],
                Some(r#"{"w": {"saved_offsets": [0, 0]}, "b": {"saved_offsets": [0]}}"#),
            ),
        ),
        (
            "shard-00002-model-00001-of-00001.safetensors",
            file(&[("w", "F32", &[2, 2], &rows(16))], Some(r#"{"w": {"saved_offsets": [2, 0]}}"#)),
        ),
    ]
}

#[test]
fn chunks_are_named_and_placed_where_their_offsets_say() {
    let s = shards(two_ranks()).unwrap();
    let by_name: BTreeMap<&str, &ShardedTensor> =
        s.tensors().iter().map(|t| (t.name.as_str(), t)).collect();
    let w = by_name["w"];
    assert_eq!((w.dtype.as_str(), w.shape.as_slice()), ("float32", &[4u64, 2][..]));
    let placed: Vec<(&str, &[u64], &[u64])> =
        w.chunks.iter().map(|c| (c.object.as_str(), &c.offsets[..], &c.sizes[..])).collect();
    assert_eq!(placed, [("w@0,0", &[0u64, 0][..], &[2u64, 2][..]), ("w@2,0", &[2, 0], &[2, 2])]);
    let b = by_name["b"];
    assert_eq!((b.dtype.as_str(), b.shape.as_slice()), ("bfloat16", &[3u64][..]));
    assert_eq!(b.chunks[0].object, "b", "a whole tensor's chunk is named as the tensor");
    // The source: each chunk an object under its name, holding its file's bytes.
    assert_eq!(s.len(), 3);
    let second = s.find("w@2,0").unwrap();
    assert_eq!(s.info(second).unwrap().name, "w@2,0");
    let data = s.read(second).unwrap();
    assert_eq!(data.name, "w@2,0");
    assert_eq!(data.components["data"].bytes.as_ref(), (16..32).collect::<Vec<u8>>());
    let raw = s.raw(second).unwrap();
    assert_eq!(raw.len, 16);
}

#[test]
fn a_file_without_the_sharding_information_is_named_and_refused() {
    let mut files = two_ranks();
    files.push(("model.safetensors", file(&[("x", "U8", &[1], &[7])], None)));
    let e = shards(files).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert!(e.message().contains("model.safetensors") && e.message().contains(SHARDING_INFO));
}

#[test]
fn sharding_information_must_match_the_file() {
    let cases = [
        // A tensor the information does not place.
        (file(&[("w", "U8", &[2], &[1, 2])], Some(r#"{"v": {"saved_offsets": [0]}}"#)), "\"w\""),
        // More entries than tensors.
        (
            file(
                &[("w", "U8", &[2], &[1, 2])],
                Some(r#"{"w": {"saved_offsets": [0]}, "v": {"saved_offsets": [0]}}"#),
            ),
            "places 2 tensors",
        ),
        // Offsets of another rank.
        (
            file(&[("w", "U8", &[2], &[1, 2])], Some(r#"{"w": {"saved_offsets": [0, 0]}}"#)),
            "2 offsets",
        ),
        // Offsets past u64.
        (
            file(
                &[("w", "U8", &[2], &[1, 2])],
                Some(r#"{"w": {"saved_offsets": [18446744073709551615]}}"#),
            ),
            "past any extent",
        ),
        // Not DCP's JSON.
        (file(&[("w", "U8", &[2], &[1, 2])], Some(r#"{"w": [0]}"#)), SHARDING_INFO),
    ];
    for (bytes, said) in cases {
        let e = shards(vec![("shard-00001-model-00001-of-00001.safetensors", bytes)]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed);
        assert!(e.message().contains(said), "{said}: {}", e.message());
    }
}

#[test]
fn a_chunk_saved_twice_is_refused() {
    let mut files = two_ranks();
    let again =
        file(&[("w", "F32", &[2, 2], &[0; 16])], Some(r#"{"w": {"saved_offsets": [2, 0]}}"#));
    files.push(("shard-00003-model-00001-of-00001.safetensors", again));
    let e = shards(files).unwrap_err();
    assert!(e.message().contains("saved twice") && e.message().contains("shard-00003"), "{e}");
    // A tensor named as another's chunk is: told as such.
    let mut files = two_ranks();
    let named =
        file(&[("w@2,0", "F32", &[1], &[0; 4])], Some(r#"{"w@2,0": {"saved_offsets": [0]}}"#));
    files.push(("shard-00003-model-00001-of-00001.safetensors", named));
    let e = shards(files).unwrap_err();
    assert!(e.message().contains("as another chunk or tensor is named"), "{e}");
}

#[test]
fn empty_chunks_of_ranks_with_no_share_are_left_out() {
    // Three ranks, a tensor of two rows: the third rank's share is empty, at the end.
    let info = |o: u64| format!(r#"{{"w": {{"saved_offsets": [{o}]}}}}"#);
    let files = vec![
        (
            "shard-00001-model-00001-of-00001.safetensors",
            file(&[("w", "U8", &[1], &[5])], Some(&info(0))),
        ),
        (
            "shard-00002-model-00001-of-00001.safetensors",
            file(&[("w", "U8", &[1], &[6])], Some(&info(1))),
        ),
        (
            "shard-00003-model-00001-of-00001.safetensors",
            file(&[("w", "U8", &[0], &[])], Some(&info(2))),
        ),
        (
            "shard-00004-model-00001-of-00001.safetensors",
            file(&[("w", "U8", &[0], &[])], Some(&info(2))),
        ),
    ];
    let s = shards(files).unwrap();
    let w = &s.tensors()[0];
    assert_eq!(w.shape, [2]);
    assert_eq!(w.chunks.len(), 2);
    // A tensor with no elements keeps one chunk, and its whole extent.
    let info = |o: u64| format!(r#"{{"e": {{"saved_offsets": [0, {o}]}}}}"#);
    let files = vec![
        (
            "shard-00001-model-00001-of-00001.safetensors",
            file(&[("e", "U8", &[0, 3], &[])], Some(&info(0))),
        ),
        (
            "shard-00002-model-00001-of-00001.safetensors",
            file(&[("e", "U8", &[0, 3], &[])], Some(&info(3))),
        ),
    ];
    let s = shards(files).unwrap();
    assert_eq!((s.tensors()[0].shape.as_slice(), s.tensors()[0].chunks.len()), (&[0u64, 6][..], 1));
}

#[test]
fn shard_names_are_dcp_s_own() {
    assert_eq!(shard_number("shard-00002-model-00001-of-00003.safetensors"), Some(2));
    for other in [
        "model-00001-of-00001.safetensors",
        "shard-x-model-00001-of-00001.safetensors",
        "shard-00001-model-00001-of-.safetensors",
        "shard-00001-model-00001-of-00001.safetensors.tmp",
    ] {
        assert!(!is_shard_name(other), "{other}");
    }
}

#[test]
fn a_rank_that_saved_nothing_leaves_no_file_and_no_hole() {
    // Ranks 1 and 3: the second rank held nothing to save (its tensors replicated, saved by
    // another), so torch wrote no file for it.
    let dir = ztensor_testkit::scratch("dcp-shards-gap");
    for (name, bytes) in two_ranks() {
        let name = name.replace("shard-00002", "shard-00003");
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let s = DcpShards::open_dir(dir.path()).unwrap();
    assert_eq!(s.file_names().collect::<Vec<_>>().len(), 2);
    assert_eq!(
        s.tensors().iter().map(|t| t.shape.clone()).collect::<Vec<_>>(),
        [vec![3], vec![4, 2]]
    );
    let empty = ztensor_testkit::scratch("dcp-shards-none");
    let e = DcpShards::open_dir(empty.path()).unwrap_err();
    assert!(e.message().contains("no safetensors file"), "{e}");
}
