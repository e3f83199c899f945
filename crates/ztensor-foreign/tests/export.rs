use super::*;

fn reread(st: &[u8]) -> Vec<Spec> {
    let parsed = safetensors::SafeTensors::deserialize(st).unwrap();
    let mut out: Vec<_> = parsed
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_v0_1_file_that_repeats_a_name_is_refused_not_written_twice() {
    // The reference v0.1 writer's file with two tensors named "a": safetensors can hold
    // only one, and writing both under one name would give a header that lies about the data.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v0.1/implementation-defined/duplicate-name.zt");
    let file = std::fs::read(path).unwrap();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let (result, out) = exported(&reader, false);
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unrepresentable, "{err}");
    assert_eq!(err.object(), Some("a"), "{err}");
    assert!(out.is_empty(), "nothing written");
}

#[test]
fn import_then_export_is_the_safetensors_crates_own_file() {
    let tensors = every_dtype();
    let metadata: HashMap<String, String> = [("format".into(), "pt".into())].into();
    let st = safetensors_file(&tensors, Some(metadata.clone()));
    // Through a compressed, digested 1.2 file and back.
    let options = WriteOptions::zstd(3).with_digest(ztensor_format::DigestAlgorithm::Blake3);
    let zt = to_zt(&st, Version::V1_2, &options, 2);
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let (n, out) = exported(&reader, false);
    let n = n.unwrap();
    assert_eq!(n, out.len() as u64);
    // The same layout as the crate's writer, byte for byte (one metadata key, so the crate's
    // map order cannot differ).
    assert_eq!(out, st);
    assert_eq!(reread(&out), {
        let mut t = tensors.clone();
        t.sort_by(|a, b| a.0.cmp(&b.0));
        t
    });
    let parsed = safetensors::SafeTensors::read_metadata(&out).unwrap().1;
    assert_eq!(parsed.metadata(), &Some(metadata));
}

/// Names and metadata that JSON must escape are written as the crate writes them.
#[test]
fn escaped_names_export_as_the_crate_writes_them() {
    let names = ["quote\"d", "back\\slash", "new\nline", "tab\t\u{1}", "é/ü.w", "😀", "/"];
    let tensors: Vec<Spec> = names
        .iter()
        .enumerate()
        .map(|(i, n)| ((*n).to_owned(), Dtype::F32, vec![i], bytes(4 * i, 1)))
        .collect();
    let metadata: HashMap<String, String> = [("k\"ey\n".into(), "v\\al\u{7f}ü".into())].into();
    let st = safetensors_file(&tensors, Some(metadata));
    let zt = to_zt(&st, Version::V1_2, &WriteOptions::raw(), 1);
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let (result, out) = exported(&reader, false);
    result.unwrap();
    assert!(out == st, "{}", String::from_utf8_lossy(&out[..out.len().min(400)]));
}

#[test]
fn many_metadata_keys_are_sorted_and_every_version_exports() {
    let tensors = every_dtype()[..13].to_vec();
    let metadata: HashMap<String, String> =
        [("z", "1"), ("a", "2"), ("m", "3")].map(|(k, v)| (k.into(), v.into())).into();
    let st = safetensors_file(&tensors, Some(metadata.clone()));
    let bare = safetensors_file(&tensors, None);
    for version in [Version::V0_1, Version::V1_1, Version::V1_2] {
        let source = if version == Version::V0_1 { &bare } else { &st };
        let zt = to_zt(source, version, &WriteOptions::zstd(1), 1);
        let reader = Reader::new(&zt[..], &Options::default()).unwrap();
        let (result, out) = exported(&reader, false);
        result.unwrap();
        if version == Version::V0_1 {
            // 0.1 has no file attributes (importing metadata into it is refused, below).
            assert_eq!(safetensors::SafeTensors::read_metadata(&out).unwrap().1.metadata(), &None);
        } else {
            let header = String::from_utf8_lossy(&out[8..60]).into_owned();
            assert!(header.starts_with(r#"{"__metadata__":{"a":"2","m":"3","z":"1"}"#), "{header}");
            let parsed = safetensors::SafeTensors::read_metadata(&out).unwrap().1;
            assert_eq!(parsed.metadata(), &Some(metadata.clone()));
        }
        let mut expected = tensors.clone();
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(reread(&out), expected, "{version}");
    }
}

#[test]
fn what_safetensors_cannot_hold_is_refused_by_name() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("fine", &[1], DType::F32, &[0; 4], &WriteOptions::raw()).unwrap();
    w.add_coo(
        "sparse",
        &[4],
        ztensor_io::Coo { dtype: DType::F32, values: &[0; 4], coords: &[1] },
        &WriteOptions::raw(),
    )
    .unwrap();
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let e = exported(&reader, false).0.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unrepresentable);
    assert_eq!(
        e.to_string(),
        "tensor \"sparse\": safetensors cannot hold a sparse_coo object (only dense tensors)"
    );

    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let spec = ztensor_io::ComponentSpec {
        role: "data",
        dtype: DType::F64,
        logical_type: Some(&LogicalType::Complex128),
        data: &[0; 16],
    };
    w.add_object("z", &[1], ztensor_format::Format::Dense, None, &[spec], &WriteOptions::raw())
        .unwrap();
    w.set_attributes(ztensor_format::text_map([("n", 3u64.into())]).try_into().unwrap()).unwrap();
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let e = exported(&reader, false).0.unwrap_err();
    assert!(e.to_string().contains("file attribute \"n\" is not text"), "{e}");
    let e = exported(&reader, true).0.unwrap_err();
    assert_eq!(
        e.to_string(),
        "tensor \"z\": safetensors has no dtype for f64 with logical type complex128"
    );

    // A tensor called __metadata__ would become the header's metadata map.
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("__metadata__", &[1], DType::F32, &[0; 4], &WriteOptions::raw()).unwrap();
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let e = exported(&reader, false).0.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unrepresentable);
    assert!(e.to_string().contains("a tensor named __metadata__"), "{e}");
}

#[test]
fn a_failed_export_leaves_the_target_untouched() {
    let d = dir("export-fail");
    let target = d.join("out.safetensors");
    std::fs::write(&target, b"precious").unwrap();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_coo(
        "s",
        &[2],
        ztensor_io::Coo { dtype: DType::U8, values: &[1], coords: &[0] },
        &WriteOptions::raw(),
    )
    .unwrap();
    let zt = w.finish().unwrap().0;
    let reader = Reader::new(&zt[..], &Options::default()).unwrap();
    let mut sink = SafetensorsSink::new(&target);
    assert!(ztensor_io::TensorSink::write_all(&mut sink, &reader).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file left");
}
