use super::*;

/// Zero-length tensors share an offset; the parser's map would leave their order to
/// chance, so the import settles it by name: the same file always gives the same bytes.
#[test]
fn zero_length_tensors_come_in_name_order_every_time() {
    let names = ["z", "b", "m", "a", "q", "c", "y", "k"];
    let mut tensors: Vec<Spec> =
        names.iter().map(|n| (n.to_string(), Dtype::F32, vec![0], vec![])).collect();
    tensors.push(("data".into(), Dtype::F32, vec![1], vec![0; 4]));
    let st = safetensors_file(&tensors, None);
    let file = SafetensorsFile::new(&st[..]).unwrap();
    let empty: Vec<&str> =
        file.tensors().iter().filter(|t| t.len == 0).map(|t| t.name.as_str()).collect();
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    assert_eq!(empty, sorted);
    for (i, t) in file.tensors().iter().enumerate() {
        assert_eq!(file.tensor(&t.name).map(|u| &u.name), Some(&t.name), "{i}");
    }
    let first = to_zt(&st, Version::V1_2, &WriteOptions::raw(), 2);
    for _ in 0..4 {
        assert_eq!(to_zt(&st, Version::V1_2, &WriteOptions::raw(), 2), first);
    }
}

#[test]
fn every_dtype_and_the_metadata_arrive_byte_for_byte() {
    let tensors = every_dtype();
    let metadata: HashMap<String, String> =
        [("format", "pt"), ("source", "test")].map(|(k, v)| (k.into(), v.into())).into();
    let st = safetensors_file(&tensors, Some(metadata));
    let options = WriteOptions::zstd(3).with_digest(ztensor_format::DigestAlgorithm::Sha256);
    let zt = to_zt(&st, Version::V1_2, &options, 2);
    let reader = Reader::new(&zt[..], &Options::strict()).unwrap();
    assert_eq!(reader.manifest().len(), tensors.len());
    for (name, dtype, shape, data) in &tensors {
        let object = reader.read_object(name).unwrap();
        assert_eq!(object.shape, shape.iter().map(|&d| d as u64).collect::<Vec<_>>());
        let c = &object.components["data"];
        assert_eq!(&c.bytes[..], &data[..], "{name}");
        let expected = match dtype {
            Dtype::F8_E4M3 => Some(LogicalType::F8E4M3Fn),
            Dtype::F8_E5M2 => Some(LogicalType::F8E5M2),
            Dtype::F8_E4M3FNUZ => Some(LogicalType::F8E4M3Fnuz),
            Dtype::F8_E5M2FNUZ => Some(LogicalType::F8E5M2Fnuz),
            Dtype::C64 => Some(LogicalType::Complex64),
            _ => None,
        };
        assert_eq!(c.logical_type, expected, "{name}");
        if expected.as_ref().is_some_and(|t| t.ratio() == 1) {
            assert_eq!(c.dtype, DType::U8);
        }
    }
    let attributes = reader.manifest().manifest().attributes.clone().unwrap();
    assert_eq!(
        attributes.to_value(),
        ztensor_format::text_map([("format", "pt".into()), ("source", "test".into())])
    );
}

#[test]
fn sources_and_thread_counts_give_the_same_file() {
    let st = safetensors_file(&every_dtype(), None);
    let options = WriteOptions::zstd(1);
    let expected = to_zt(&st, Version::V1_2, &options, 1);
    assert_eq!(to_zt(&st, Version::V1_2, &options, 3), expected);
    let file = SafetensorsFile::new(Chunked::new(&st[..], 1)).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    sink(&file, &mut w, &options, 2).unwrap();
    assert_eq!(w.finish().unwrap().0, expected);
    let d = dir("sources");
    let path = d.join("m.safetensors");
    std::fs::write(&path, &st).unwrap();
    let file = SafetensorsFile::open(&path).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    sink(&file, &mut w, &options, 2).unwrap();
    assert_eq!(w.finish().unwrap().0, expected);
    // SAFETY: the test owns the file and does not change it while it is mapped.
    let mapped = unsafe { SafetensorsFile::open_mmap(&path) }.unwrap();
    assert!(matches!(mapped.data("t11.F32").unwrap(), std::borrow::Cow::Borrowed(_)));
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    sink(&mapped, &mut w, &options, 2).unwrap();
    assert_eq!(w.finish().unwrap().0, expected);
}

#[test]
fn fp8_needs_a_version_with_logical_types() {
    let st = safetensors_file(&[("w".into(), Dtype::F8_E4M3, vec![4], bytes(4, 0))], None);
    let file = SafetensorsFile::new(&st[..]).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    let e = sink(&file, &mut w, &WriteOptions::raw(), 1).unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::Unrepresentable), "{e}");
    assert!(e.to_string().contains("\"w\""), "{e}");
    // 1.1 holds the OCP formats.
    let zt = to_zt(&st, Version::V1_1, &WriteOptions::raw(), 1);
    let r = Reader::new(&zt[..], &Options::default()).unwrap();
    assert_eq!(
        r.component("w", "data").and_then(|c| c.decoded()).unwrap().as_ref(),
        &bytes(4, 0)[..]
    );
}

#[test]
fn metadata_cannot_go_into_v0_1() {
    let metadata: HashMap<String, String> = [("format".into(), "pt".into())].into();
    let st = safetensors_file(&[("a".into(), Dtype::U8, vec![1], vec![1])], Some(metadata));
    let file = SafetensorsFile::new(&st[..]).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    let e = sink(&file, &mut w, &WriteOptions::raw(), 1).unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::Unrepresentable), "{e}");
    assert!(
        e.to_string().contains("__metadata__ cannot be kept: zTensor 0.1 has no file attributes"),
        "{e}"
    );
}

#[test]
fn packed_microscaling_dtypes_are_refused_by_zt_1x_by_name_and_e8m0_kept() {
    let st = safetensors_file(
        &[
            ("ok".into(), Dtype::F32, vec![1], bytes(4, 1)),
            ("scales".into(), Dtype::F8_E8M0, vec![4], vec![127, 128, 0, 255]),
        ],
        None,
    );
    let file = SafetensorsFile::new(&st[..]).unwrap();
    // Read as zTensor 2 holds it: u8 of type f8_e8m0, one byte an element, which is also what
    // zTensor 1.2 holds under a type name it does not register: written, and read back so.
    let info = ztensor_io::TensorSource::info(&file, 1).unwrap();
    assert_eq!(info.name, "scales");
    assert!(info.unsupported.is_none());
    let e8m0 = Some(ztensor_format::MxType::F8E8M0.logical_type());
    assert_eq!(info.components[0].logical_type, e8m0);
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    sink(&file, &mut w, &WriteOptions::raw(), 1).unwrap();
    let written = w.finish().unwrap().0;
    let back = ztensor_io::Reader::new(&written[..], &Default::default()).unwrap();
    use ztensor_io::TensorSource;
    let scales = back.read(back.find("scales").unwrap()).unwrap();
    assert_eq!(scales.components["data"].logical_type, e8m0);
    assert_eq!(scales.components["data"].bytes.as_ref(), [127, 128, 0, 255]);
    // Packed FP4 (eight values in four bytes) has no 1.x form: refused by name.
    let st = safetensors_file(
        &[
            ("ok".into(), Dtype::F32, vec![1], bytes(4, 1)),
            ("w".into(), Dtype::F4, vec![2, 4], bytes(4, 0x21)),
        ],
        None,
    );
    let file = SafetensorsFile::new(&st[..]).unwrap();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let e = sink(&file, &mut w, &WriteOptions::raw(), 1).unwrap_err();
    use ztensor_format::Verdict;
    assert_eq!(Verdict::refused(&e), Some(ztensor_format::Refused::Dtype), "{e}");
    let message = e.to_string();
    assert!(message.contains("\"w\"") && message.contains("packed f4_e2m1"), "{message}");
    assert!(message.contains("write zTensor 2"), "{message}");
}

#[test]
fn malformed_files_are_clear_errors() {
    let good = safetensors_file(&[("a".into(), Dtype::F32, vec![2], bytes(8, 0))], None);
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut past = good.clone();
    past[..8].copy_from_slice(&(good.len() as u64).to_le_bytes());
    let mut trailing = good.clone();
    trailing.push(0);
    let short = good[..good.len() - 1].to_vec();
    let mut not_json = good.clone();
    not_json[8] = b'[';
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(good[8..8 + n].to_vec()).unwrap();
    let gap = header.replace("[0,8]", "[4,12]");
    let mut gapped = (gap.len() as u64).to_le_bytes().to_vec();
    gapped.extend_from_slice(gap.as_bytes());
    gapped.extend_from_slice(&[0; 12]);
    let twice = with_header(
        &[("a".into(), "U8", vec![0], (0, 0)), ("a".into(), "U8", vec![0], (0, 0))],
        false,
        0,
    );
    let cases: [(&str, &[u8], &str); 8] = [
        ("twice", &twice, "header: tensor \"a\" is described twice"),
        ("empty", b"", "shorter than the 8-byte header length"),
        ("huge", &huge, "exceeds the limit"),
        ("past", &past, "runs past the end"),
        ("trailing", &trailing, "describes 8 bytes of data, but 9 follow it"),
        (
            "short",
            &short,
            "describes 8 bytes of data, but 7 follow it (the file is 1 byte short: an incomplete download or copy?)",
        ),
        ("not json", &not_json, "header:"),
        ("gap", &gapped, "header:"),
    ];
    for (what, bytes, message) in cases {
        let e = SafetensorsFile::new(bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{what}");
        assert!(e.to_string().contains(message), "{what}: {e}");
    }
}

/// Headers that lie about a packed microscaling tensor (an element count that ends inside a
/// byte, a span that is not what the count takes, a count past 2^64 bits) are refused when
/// the file opens, naming the tensor.
#[test]
fn microscaling_headers_that_lie_are_refused() {
    let entry = |dtype, shape, end| -> HeaderEntry<'_> { ("t".into(), dtype, shape, (0, end)) };
    let cases = [
        (
            entry("F4", vec![3], 2),
            "shape [3] of F4 needs 12 bits, but its data offsets span 2 bytes",
        ),
        (entry("F6_E2M3", vec![4], 4), "needs 24 bits, but its data offsets span 4 bytes"),
        (entry("F6_E3M2", vec![1, 2], 2), "needs 12 bits"),
        (entry("F4", vec![1 << 62, 4], 2), "its size overflows"),
    ];
    for (entry, message) in cases {
        let data = usize::try_from(entry.3.1).unwrap();
        let dtype = entry.1;
        let bytes = with_header(&[entry], false, data);
        let e = SafetensorsFile::new(&bytes[..]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{dtype}");
        assert!(e.to_string().contains(message) && e.to_string().contains("\"t\""), "{e}");
    }
}

/// A header entry as written: name, dtype name, shape, data offsets (any values JSON holds).
type HeaderEntry<'a> = (String, &'a str, Vec<i64>, (i64, i64));

/// A header of `entries` and maybe metadata, with
/// `data` zero bytes after it.
fn with_header(entries: &[HeaderEntry<'_>], metadata: bool, data: usize) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    if metadata {
        map.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    }
    let mut text = String::from("{");
    for (k, v) in &map {
        text += &format!("{}:{},", serde_json::json!(k), v);
    }
    // Written by hand, so a name may repeat as JSON allows.
    for (name, dtype, shape, (s, e)) in entries {
        let entry = serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [s, e]});
        text += &format!("{}:{},", serde_json::json!(name), entry);
    }
    if text.ends_with(',') {
        text.pop();
    }
    text.push('}');
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + data, 0);
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

    /// Our header parse accepts exactly the files the `safetensors` crate accepts, and reads
    /// the same tensors from them; only a name described twice (which the crate resolves by
    /// keeping one entry) is refused outright.
    #[test]
    fn the_header_parse_agrees_with_the_safetensors_crate(
        entries in proptest::collection::vec(
            (0u8..6, 0usize..5, proptest::collection::vec(0i64..4, 0..3), -1i64..2, -1i64..2),
            0..5,
        ),
        metadata in proptest::prelude::any::<bool>(),
        extra in -2i64..3,
    ) {
        let dtypes = ["F32", "BF16", "U8", "BOOL", "Q9"];
        let sizes = [4i64, 2, 1, 1, 1];
        let mut at = 0i64;
        let mut list = Vec::new();
        for (name, d, shape, nudge_start, nudge_len) in entries {
            let len = shape.iter().product::<i64>() * sizes[d];
            let start = at + nudge_start;
            list.push((format!("t{name}"), dtypes[d], shape, (start, start + len + nudge_len)));
            at += len;
        }
        let data = usize::try_from(at + extra).unwrap_or(0);
        let file = with_header(&list, metadata, data);
        let theirs = safetensors::SafeTensors::deserialize(&file);
        let ours = SafetensorsFile::new(&file[..]);
        let mut names: Vec<&String> = list.iter().map(|e| &e.0).collect();
        names.sort();
        let repeated = names.windows(2).any(|w| w[0] == w[1]);
        match (&theirs, &ours) {
            // Refused, for that or for a fault found before it.
            (_, o) if repeated => {
                proptest::prop_assert_eq!(o.as_ref().err().map(ztensor_foreign::Error::kind), Some(ErrorKind::Malformed));
            }
            (Ok(t), Ok(o)) => {
                proptest::prop_assert_eq!(t.len(), o.tensors().len());
                for info in o.tensors() {
                    let view = t.tensor(&info.name).unwrap();
                    proptest::prop_assert_eq!(view.dtype(), info.dtype);
                    let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
                    proptest::prop_assert_eq!(&shape, &info.shape);
                    proptest::prop_assert_eq!(view.data().len() as u64, info.len);
                    let at = (view.data().as_ptr() as usize - file.as_ptr() as usize) as u64;
                    proptest::prop_assert!(info.len == 0 || at == info.offset);
                }
            }
            (Err(_), Err(e)) => {
                proptest::prop_assert_eq!(e.kind(), ErrorKind::Malformed);
            }
            (t, o) => proptest::prop_assert!(false, "crate {:?}, ours {:?}", t.as_ref().err(), o.as_ref().err()),
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Any bytes, or a valid file with bytes changed, open or fail cleanly, and what opens
    /// reads and converts without panicking.
    #[test]
    fn hostile_bytes_never_panic(
        edits in proptest::collection::vec((0usize..400, proptest::prelude::any::<u8>()), 0..6),
        cut in 0usize..400,
    ) {
        let mut file = safetensors_file(&every_dtype()[..4], None);
        for (at, b) in edits {
            let at = at % file.len();
            file[at] = b;
        }
        file.truncate(cut.max(8).min(file.len()));
        if let Ok(st) = SafetensorsFile::new(&file[..]) {
            for t in st.tensors() {
                let _ = st.data(&t.name);
            }
            let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
            let _ = sink(&st, &mut w, &WriteOptions::raw(), 1);
        }
    }
}
