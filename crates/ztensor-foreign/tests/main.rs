//! Integration tests of ztensor-foreign. safetensors files are written and read back by the
//! `safetensors` crate, independently of this crate's parser and writer.

// Test data is small; lengths always fit.
#![allow(clippy::cast_possible_truncation)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use ztensor_foreign::ErrorKind;
use ztensor_foreign::safetensors::{SafetensorsFile, SafetensorsSink};
use ztensor_format::{DType, LogicalType, Options, Version};
use ztensor_io::{Chunked, Reader, WriteOptions, Writer};
use ztensor_par::ParOptions;

/// A test tensor: name, dtype, shape, bytes.
type Spec = (String, Dtype, Vec<usize>, Vec<u8>);

/// A case of a table: what, how to build the checkpoint, expected kind, expected message.
type Case<'a> = (&'a str, Box<dyn Fn(&Path) -> PathBuf>, ErrorKind, &'a str);

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ztensor-foreign-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed)).collect()
}

/// Every safetensors dtype zTensor can hold: (name, dtype, shape, element bytes).
fn every_dtype() -> Vec<Spec> {
    let dtypes = [
        (Dtype::BOOL, 1),
        (Dtype::U8, 1),
        (Dtype::I8, 1),
        (Dtype::U16, 2),
        (Dtype::I16, 2),
        (Dtype::U32, 4),
        (Dtype::I32, 4),
        (Dtype::U64, 8),
        (Dtype::I64, 8),
        (Dtype::F16, 2),
        (Dtype::BF16, 2),
        (Dtype::F32, 4),
        (Dtype::F64, 8),
        (Dtype::F8_E4M3, 1),
        (Dtype::F8_E5M2, 1),
        (Dtype::F8_E4M3FNUZ, 1),
        (Dtype::F8_E5M2FNUZ, 1),
        (Dtype::C64, 8),
    ];
    dtypes
        .iter()
        .enumerate()
        .map(|(i, &(dtype, size))| {
            let shape = vec![2, 3];
            let mut data = bytes(6 * size, i as u8);
            if dtype == Dtype::BOOL {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            (format!("t{i:02}.{dtype}"), dtype, shape, data)
        })
        .collect()
}

/// A safetensors file written by the `safetensors` crate.
fn safetensors_file(tensors: &[Spec], metadata: Option<HashMap<String, String>>) -> Vec<u8> {
    let views: Vec<(&str, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, metadata).unwrap()
}

/// Every tensor of `source` into `w` through the zTensor sink, on `threads` threads.
fn sink(
    source: &dyn ztensor_io::TensorSource,
    w: &mut Writer<Vec<u8>>,
    options: &WriteOptions,
    threads: usize,
) -> Result<(), ztensor_io::Error> {
    use ztensor_io::TensorSink;
    let par = ParOptions::with_threads(threads);
    ztensor_par::ZtSink::new(w, options.clone(), &par, &()).write_all(source)?;
    Ok(())
}

/// `source` exported through the safetensors sink into memory: how it went (the bytes written),
/// and what was written.
fn exported(
    source: &dyn ztensor_io::TensorSource,
    drop_attributes: bool,
) -> (Result<u64, ztensor_foreign::Error>, Vec<u8>) {
    use ztensor_io::TensorSink;
    let mut sink = SafetensorsSink::to_writer(Vec::new()).drop_attributes(drop_attributes);
    let result = sink.write_all(source).map(|_| sink.written());
    (result, sink.into_inner().unwrap())
}

fn to_zt(st: &[u8], version: Version, options: &WriteOptions, threads: usize) -> Vec<u8> {
    let file = SafetensorsFile::new(st).unwrap();
    let mut w = Writer::new(Vec::new(), version).unwrap();
    sink(&file, &mut w, options, threads).unwrap();
    w.finish().unwrap().0
}

mod import {
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
            e.to_string()
                .contains("__metadata__ cannot be kept: zTensor 0.1 has no file attributes"),
            "{e}"
        );
    }

    #[test]
    fn microscaling_dtypes_are_refused_by_name() {
        let st = safetensors_file(
            &[
                ("ok".into(), Dtype::F32, vec![1], bytes(4, 1)),
                ("scales".into(), Dtype::F8_E8M0, vec![4], bytes(4, 0)),
            ],
            None,
        );
        let file = SafetensorsFile::new(&st[..]).unwrap();
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let e = sink(&file, &mut w, &WriteOptions::raw(), 1).unwrap_err();
        assert!(matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_)), "{e}");
        let message = e.to_string();
        assert!(message.contains("\"scales\"") && message.contains("F8_E8M0"), "{message}");
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
}

mod export {
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
                assert_eq!(
                    safetensors::SafeTensors::read_metadata(&out).unwrap().1.metadata(),
                    &None
                );
            } else {
                let header = String::from_utf8_lossy(&out[8..60]).into_owned();
                assert!(
                    header.starts_with(r#"{"__metadata__":{"a":"2","m":"3","z":"1"}"#),
                    "{header}"
                );
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
        w.set_attributes(ztensor_format::text_map([("n", 3u64.into())]).try_into().unwrap())
            .unwrap();
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
}

mod sharded {
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
            expected
                .extend(order.iter().map(|n| all.iter().find(|t| &t.0 == n).unwrap().0.as_str()));
        }
        assert_eq!(names, expected);
        for (name, _, _, data) in &all {
            assert_eq!(
                reader.component(name, "data").and_then(|c| c.decoded()).unwrap().as_ref(),
                &data[..]
            );
        }
        assert_eq!(
            reader
                .manifest()
                .manifest()
                .attributes
                .as_ref()
                .map(ztensor_format::Attributes::to_value),
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
                    let index = serde_json::json!({"weight_map": {"a": "model-00001-of-00001.safetensors"}});
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
                    let index = serde_json::json!({"weight_map": {"a": "../model-00001-of-00001.safetensors"}});
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
                    let index = serde_json::json!({"weight_map": {"a": "model-00009-of-00009.safetensors"}});
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
}

mod npy {
    use super::*;
    use half::f16;
    use ztensor_foreign::npy::{self, fp8_to_f32};

    #[test]
    fn e5m2_is_the_high_byte_of_f16() {
        for b in 0..=255u8 {
            let ours = fp8_to_f32(b, &LogicalType::F8E5M2).unwrap();
            let theirs = f16::from_bits(u16::from(b) << 8).to_f32();
            assert!(
                ours == theirs || (ours.is_nan() && theirs.is_nan()),
                "{b:#04x}: {ours} {theirs}"
            );
        }
    }

    #[test]
    fn e4m3fn_and_fnuz_values_from_their_definitions() {
        let e4 = |b| fp8_to_f32(b, &LogicalType::F8E4M3Fn).unwrap();
        // OCP FP8: max normal 448 = 1.75 × 2^8, min subnormal 2^-9, NaN at S.1111.111, no inf.
        assert_eq!(e4(0x7e), 448.0);
        assert_eq!(e4(0x01), 2f32.powi(-9));
        assert_eq!(e4(0x38), 1.0);
        assert_eq!(e4(0xb8), -1.0);
        assert_eq!(e4(0x78), 256.0);
        assert!(e4(0x7f).is_nan() && e4(0xff).is_nan());
        // FNUZ: bias one more, single NaN at 0x80, no negative zero.
        let nuz = |b| fp8_to_f32(b, &LogicalType::F8E4M3Fnuz).unwrap();
        assert_eq!(nuz(0x40), 1.0);
        assert_eq!(nuz(0x7f), 240.0);
        assert!(nuz(0x80).is_nan());
        let e5nuz = |b| fp8_to_f32(b, &LogicalType::F8E5M2Fnuz).unwrap();
        assert_eq!(e5nuz(0x40), 1.0);
        assert_eq!(e5nuz(0x7f), 57344.0);
        assert!(e5nuz(0x80).is_nan());
    }

    fn one(dtype: DType, logical: Option<LogicalType>, shape: &[u64], data: &[u8]) -> npy::Array {
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let spec =
            ztensor_io::ComponentSpec { role: "data", dtype, logical_type: logical.as_ref(), data };
        w.add_object(
            "x",
            shape,
            ztensor_format::Format::Dense,
            None,
            &[spec],
            &WriteOptions::zstd(1),
        )
        .unwrap();
        let zt = w.finish().unwrap().0;
        npy::array(&Reader::new(&zt[..], &Options::default()).unwrap(), "x", 1 << 20).unwrap()
    }

    #[test]
    fn npy_bytes_follow_the_format_description() {
        let data: Vec<u8> = [1.5f32, -2.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
        let array = one(DType::F32, None, &[3], &data);
        let mut out = Vec::new();
        npy::write(&mut out, &array).unwrap();
        // Magic, version 1.0, header length (little-endian u16), the dict padded with spaces and
        // ended by a newline so the data starts at a multiple of 64.
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        let mut expected = b"\x93NUMPY\x01\x00".to_vec();
        let header_len = (10 + dict.len() + 1).next_multiple_of(64) - 10;
        expected.extend_from_slice(&(header_len as u16).to_le_bytes());
        expected.extend_from_slice(dict.as_bytes());
        expected.extend(std::iter::repeat_n(b' ', header_len - dict.len() - 1));
        expected.push(b'\n');
        expected.extend_from_slice(&data);
        assert_eq!(out, expected);
        // Scalars and matrices spell their shapes as Python tuples.
        let scalar = one(DType::I64, None, &[], &7i64.to_le_bytes());
        let mut out = Vec::new();
        npy::write(&mut out, &scalar).unwrap();
        assert!(
            String::from_utf8_lossy(&out)
                .contains("'descr': '<i8', 'fortran_order': False, 'shape': (), }")
        );
        assert_eq!(out.len(), 128 + 8);
    }

    #[test]
    fn types_numpy_lacks_are_widened_exactly() {
        let bf: Vec<u8> =
            [1.0f32, -3.5].iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect();
        let a = one(DType::BF16, None, &[2], &bf);
        assert_eq!(
            (a.descr, npy::values(&a, 10)),
            ("<f4", vec!["1".to_owned(), "-3.5".to_owned()])
        );
        assert_eq!(a.note.as_deref(), Some("bf16 widened to f32 (exact)"));
        let a = one(DType::U8, Some(LogicalType::F8E4M3Fn), &[2], &[0x38, 0x7e]);
        assert_eq!(npy::values(&a, 10), ["1", "448"]);
        let c: Vec<u8> = [1.0f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = one(DType::F32, Some(LogicalType::Complex64), &[1], &c);
        assert_eq!((a.descr, npy::values(&a, 10)), ("<c8", vec!["1-2i".to_owned()]));
    }

    #[test]
    fn sparse_objects_are_densified_and_quantized_refused() {
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let values: Vec<u8> = [5i32, 6, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        w.add_csr(
            "csr",
            &[2, 3],
            ztensor_io::Csr {
                dtype: DType::I32,
                values: &values,
                indices: &[2, 0, 1],
                indptr: &[0, 1, 3],
            },
            &WriteOptions::raw(),
        )
        .unwrap();
        w.add_coo(
            "coo",
            &[2, 2],
            ztensor_io::Coo { dtype: DType::I32, values: &values[..8], coords: &[0, 1, 1, 0] },
            &WriteOptions::raw(),
        )
        .unwrap();
        let zt = w.finish().unwrap().0;
        let r = Reader::new(&zt[..], &Options::default()).unwrap();
        let csr = npy::array(&r, "csr", 1 << 20).unwrap();
        assert_eq!(npy::values(&csr, 100), ["0", "0", "5", "6", "7", "0"]);
        let coo = npy::array(&r, "coo", 1 << 20).unwrap();
        assert_eq!(npy::values(&coo, 100), ["0", "5", "6", "0"]);
        let e = npy::array(&r, "csr", 10).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unrepresentable);
        let e = npy::array(&r, "nope", 10).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    /// Sparse indices may be any integer dtype in v1.1 (here i32 and u16), and a digest that no longer
    /// matches the stored bytes stops the export.
    #[test]
    fn sparse_indices_of_any_integer_dtype_and_digests_checked() {
        let le = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let (values, indices, indptr) = (le(&[5, 6, 7]), le(&[2, 0, 1]), le(&[0, 1, 3]));
        let coords: Vec<u8> = [0u16, 1, 1, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let spec =
            |role, dtype, data| ztensor_io::ComponentSpec { role, dtype, logical_type: None, data };
        let options = WriteOptions::raw().with_digest(ztensor_format::DigestAlgorithm::Sha256);
        let mut w = Writer::new(Vec::new(), Version::V1_1).unwrap();
        let csr = [
            spec("values", DType::I32, &values[..]),
            spec("indices", DType::I32, &indices[..]),
            spec("indptr", DType::I32, &indptr[..]),
        ];
        w.add_object("csr", &[2, 3], ztensor_format::Format::SparseCsr, None, &csr, &options)
            .unwrap();
        let coo = [spec("values", DType::I32, &values[..8]), spec("coords", DType::U16, &coords)];
        w.add_object("coo", &[2, 2], ztensor_format::Format::SparseCoo, None, &coo, &options)
            .unwrap();
        let mut zt = w.finish().unwrap().0;
        let r = Reader::new(&zt[..], &Options::strict()).unwrap();
        let csr = r.object("csr").unwrap();
        csr.check(&csr.read().unwrap()).unwrap();
        let a = npy::array(&r, "csr", 1 << 20).unwrap();
        assert_eq!(npy::values(&a, 100), ["0", "0", "5", "6", "7", "0"]);
        let a = npy::array(&r, "coo", 1 << 20).unwrap();
        assert_eq!(npy::values(&a, 100), ["0", "5", "6", "0"]);
        // One stored value byte changed: the digest says no.
        let at = r.object("csr").unwrap().model().components["values"].offset as usize;
        drop(r);
        zt[at] ^= 1;
        let r = Reader::new(&zt[..], &Options::default()).unwrap();
        let e = npy::array(&r, "csr", 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ZTensor);
        assert!(e.to_string().contains("digest_mismatch"), "{e}");
    }

    #[test]
    fn values_stop_at_the_limit() {
        let data: Vec<u8> = (0..10u16).flat_map(|v| v.to_le_bytes()).collect();
        let a = one(DType::U16, None, &[10], &data);
        assert_eq!(npy::values(&a, 3), ["0", "1", "2"]);
        assert_eq!(npy::len(&a), 10);
    }
}

mod sources {
    use super::*;
    use ztensor_io::{TensorSink, TensorSource};

    /// Every tensor of the files other software wrote (NumPy, GGUF, PyTorch, safetensors),
    /// read in pieces, is the bytes a whole read gives, or fails as it fails.
    #[test]
    fn pieces_are_the_whole_read_on_files_other_software_wrote() {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut files = Vec::new();
        let mut dirs = vec![root.join("external"), root.join("examples")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        let mut compared = 0;
        for file in &files {
            let ext = file.extension().and_then(|e| e.to_str()).unwrap_or_default();
            let source: Box<dyn TensorSource> = match ext {
                "npy" => match ztensor_foreign::npy_in::NpyFile::open(file) {
                    Ok(f) => Box::new(f),
                    Err(_) => continue,
                },
                "npz" => match ztensor_foreign::npz::NpzFile::open(file) {
                    Ok(f) => Box::new(f),
                    Err(_) => continue,
                },
                "gguf" => match ztensor_foreign::gguf::GgufFile::open(file) {
                    Ok(f) => Box::new(f),
                    Err(_) => continue,
                },
                "pt" => match ztensor_foreign::torch::TorchFile::open(file) {
                    Ok(f) => Box::new(f),
                    Err(_) => continue,
                },
                "safetensors" => match SafetensorsFile::open(file) {
                    Ok(f) => Box::new(f),
                    Err(_) => continue,
                },
                _ => continue,
            };
            for i in 0..source.len() {
                let whole = source.read(i);
                let mut pieces: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
                let streamed = source.read_pieces(i, 1000, &mut |role, bytes| {
                    assert!(bytes.len() <= 1000);
                    pieces.entry(role.to_owned()).or_default().extend_from_slice(bytes);
                    Ok(())
                });
                match (&whole, &streamed) {
                    (Ok(data), Ok(())) => {
                        for (role, c) in &data.components {
                            let got = pieces.get(role).map_or(&[][..], Vec::as_slice);
                            assert_eq!(got, &c.bytes[..], "{} #{i} {role}", file.display());
                        }
                        compared += 1;
                    }
                    (Err(_), Err(_)) => {}
                    _ => panic!(
                        "{} #{i}: whole {:?}, pieces {:?}",
                        file.display(),
                        whole.err(),
                        streamed.err()
                    ),
                }
            }
        }
        assert!(compared > 100, "{compared}");
    }

    #[test]
    fn a_sink_refuses_what_it_cannot_hold_before_writing_anything() {
        // An F8_E8M0 tensor after a plain one: nothing at all is written, not the first half.
        let f32s: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = vec![
            ("a", TensorView::new(Dtype::F32, vec![2], &f32s).unwrap()),
            ("z", TensorView::new(Dtype::F8_E8M0, vec![2], &[127, 128]).unwrap()),
        ];
        let st = safetensors::serialize(views, None).unwrap();
        let file = SafetensorsFile::new(&st[..]).unwrap();
        assert!(file.info(1).unwrap().unsupported.is_some());
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let par = ParOptions::with_threads(2);
        let err = ztensor_par::ZtSink::new(&mut w, WriteOptions::raw(), &par, &())
            .write_all(&file)
            .unwrap_err();
        assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DtypeUnknown), "{err}");
        assert!(w.manifest().is_empty());
        // Carried as bytes, both go in, and the export restores the original file exactly.
        let file = file.carry_unknown_dtypes(true);
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        assert_eq!(
            ztensor_par::ZtSink::new(&mut w, WriteOptions::zstd(1), &par, &())
                .write_all(&file)
                .unwrap(),
            2
        );
        let zt = w.finish().unwrap().0;
        let reader = Reader::new(&zt[..], &Options::default()).unwrap();
        let (result, back) = exported(&reader, false);
        result.unwrap();
        assert_eq!(back, st);
    }
}

mod numpy_in {
    //! `.npy` files written by NumPy itself (`fixtures/external/numpy`, made by its `make.py`):
    //! each reads as NumPy says it holds (the SHA-256 of its C-order little-endian bytes, as
    //! NumPy computed it), or is refused as NumPy's writer records it must be.

    use std::path::PathBuf;

    use ztensor_foreign::ErrorKind;
    use ztensor_foreign::npy_in::NpyFile;
    use ztensor_format::DigestAlgorithm;
    use ztensor_io::TensorSource;
    use ztensor_io::codec::Hasher;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/numpy")
    }

    #[test]
    fn every_file_numpy_wrote_reads_as_numpy_says() {
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap();
        let files = expected["files"].as_object().unwrap();
        assert!(files.len() >= 25);
        for (name, want) in files {
            let path = dir().join(name);
            match want["expect"].as_str().unwrap() {
                "ok" => {
                    let file = NpyFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let info = file.info(0).unwrap();
                    assert_eq!(info.name, name.trim_end_matches(".npy"));
                    let shape: Vec<u64> = want["shape"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap())
                        .collect();
                    assert_eq!(info.shape.as_ref(), shape.as_slice(), "{name}");
                    let data = file.read(0).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let c = &data.components["data"];
                    assert_eq!(c.dtype.name(), want["dtype"].as_str().unwrap(), "{name}");
                    assert_eq!(
                        c.logical_type.as_ref().map(|l| l.name()),
                        want["type"].as_str(),
                        "{name}"
                    );
                    let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
                    h.update(&c.bytes);
                    let sha = h.finish().to_string();
                    assert_eq!(
                        sha,
                        format!("sha256:{}", want["sha256"].as_str().unwrap()),
                        "{name}"
                    );
                    // Raw ranges are offered only for bytes that need no change.
                    let plain = !name.contains("big-endian") && !name.contains("fortran");
                    assert_eq!(file.raw(0).is_some(), plain, "{name}");
                }
                "unsupported" => {
                    let file = NpyFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(file.info(0).unwrap().unsupported.is_some(), "{name}");
                    let e = file.read(0).unwrap_err();
                    assert!(
                        matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_)),
                        "{name}: {e}"
                    );
                    if name.contains("object") {
                        assert!(e.to_string().contains("never unpickled"), "{e}");
                    }
                }
                "malformed" => {
                    let e = NpyFile::open(&path).unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::Malformed, "{name}: {e}");
                }
                other => panic!("{name}: expect {other:?}"),
            }
        }
    }

    /// [`npy`], for the `.npz` tests.
    pub(super) fn npy_for_tests(dict: &str, data: &[u8]) -> Vec<u8> {
        npy(dict, data)
    }

    /// A `.npy` header with `dict` as its text, then `data`.
    fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.as_bytes().to_vec();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn hostile_headers_are_refused_cleanly() {
        let good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        assert!(NpyFile::new(npy(good, &[0; 8]), "x").is_ok());
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "a shape past any file",
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }",
                    &[0; 8],
                ),
            ),
            (
                "an overflowing element count",
                npy(
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (18446744073709551615, 2), }",
                    &[0; 8],
                ),
            ),
            ("data shorter than the shape", npy(good, &[0; 7])),
            ("data longer than the shape", npy(good, &[0; 9])),
            ("a header past the file", b"\x93NUMPY\x01\x00\xff\xff{'descr'".to_vec()),
            (
                "an unknown key",
                npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", &[0; 8]),
            ),
            (
                "code in the header",
                npy(
                    "{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': (2,)}",
                    &[0; 8],
                ),
            ),
            (
                "a negative dimension",
                npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", &[0; 8]),
            ),
            ("a missing key", npy("{'descr': '<f4', 'shape': (2,), }", &[0; 8])),
            ("version 9", b"\x93NUMPY\x09\x00\x10\x00{}              ".to_vec()),
            ("no magic", b"\x93NUMPX\x01\x00\x10\x00{}              ".to_vec()),
            ("too short", b"\x93NUMPY".to_vec()),
        ];
        for (what, bytes) in cases {
            let e = NpyFile::new(bytes, "x").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
        }
    }
}

mod gguf_in {
    //! GGUF files written by llama.cpp's own Python writer (`fixtures/external/gguf`, made by
    //! its `make.py`): every tensor reads as llama.cpp's reader sees it, quantized blocks byte
    //! for byte; hostile headers are refused cleanly.

    use std::path::PathBuf;

    use ztensor_foreign::ErrorKind;
    use ztensor_foreign::gguf::{GgufFile, SHAPE_KEY, TYPE_KEY, TYPES};
    use ztensor_format::{DigestAlgorithm, Value};
    use ztensor_io::TensorSource;
    use ztensor_io::codec::Hasher;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/gguf")
    }

    fn expected() -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap()
    }

    fn attribute<'a>(map: &'a Value, key: &str) -> &'a Value {
        map.as_map()
            .unwrap()
            .iter()
            .find(|(k, _)| k.as_text() == Some(key))
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no attribute {key}"))
    }

    fn same(value: &Value, json: &serde_json::Value) -> bool {
        match (value, json) {
            (Value::Integer(i), serde_json::Value::Number(n)) => {
                n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)) == Some(*i)
            }
            (Value::Float(f), serde_json::Value::Number(n)) => n.as_f64() == Some(*f),
            (Value::Bool(b), serde_json::Value::Bool(j)) => b == j,
            (Value::Text(t), serde_json::Value::String(s)) => t == s,
            (Value::Array(items), serde_json::Value::Array(js)) => {
                items.len() == js.len() && items.iter().zip(js).all(|(v, j)| same(v, j))
            }
            _ => false,
        }
    }

    #[test]
    fn the_type_table_is_llama_cpps() {
        let sizes = expected()["sizes"].clone();
        for t in TYPES {
            let theirs = &sizes[t.name];
            assert_eq!(theirs[0].as_u64(), Some(t.block), "{}", t.name);
            assert_eq!(theirs[1].as_u64(), Some(t.size), "{}", t.name);
        }
        assert_eq!(
            sizes.as_object().unwrap().len(),
            TYPES.len(),
            "a type llama.cpp has is missing"
        );
    }

    #[test]
    fn every_tensor_llama_cpp_wrote_reads_as_its_reader_sees_it() {
        let expected = expected();
        for (file, tensors) in expected["files"].as_object().unwrap() {
            let gguf = GgufFile::open(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(gguf.version(), 3);
            let attributes = gguf.attributes().unwrap().to_value();
            for (key, value) in expected["metadata"].as_object().unwrap() {
                assert!(
                    same(attribute(&attributes, key), value),
                    "{file} {key}: {:?}",
                    attribute(&attributes, key)
                );
            }
            assert_eq!(gguf.len(), tensors.as_object().unwrap().len());
            for (name, want) in tensors.as_object().unwrap() {
                let i = gguf.find(name).unwrap();
                let info = gguf.info(i).unwrap();
                let mut shape: Vec<u64> = want["ggml_shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap())
                    .collect();
                shape.reverse();
                let ty = want["type"].as_str().unwrap();
                let dtype = info.components[0].dtype.to_string();
                match TYPES.iter().find(|t| t.name == ty).unwrap().dtype {
                    Some(d) => {
                        assert_eq!(dtype, d.name(), "{name}");
                        assert_eq!(info.shape.as_ref(), shape.as_slice(), "{name}");
                        assert!(info.attributes.is_none());
                    }
                    None => {
                        assert_eq!(dtype, "u8", "{name}");
                        assert_eq!(
                            info.shape.as_ref(),
                            [want["bytes"].as_u64().unwrap()],
                            "{name}"
                        );
                        let a = &info.attributes.as_deref().unwrap().to_value();
                        assert_eq!(attribute(a, TYPE_KEY).as_text(), Some(ty));
                        let logical: Vec<u64> = attribute(a, SHAPE_KEY)
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|v| v.as_u64().unwrap())
                            .collect();
                        assert_eq!(logical, shape, "{name}");
                    }
                }
                let data = gguf.read(i).unwrap();
                let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
                h.update(&data.components["data"].bytes);
                assert_eq!(
                    h.finish().to_string(),
                    format!("sha256:{}", want["sha256"].as_str().unwrap()),
                    "{file} {name}"
                );
                assert!(gguf.raw(i).is_some());
            }
        }
        // The custom alignment was read.
        assert_eq!(GgufFile::open(dir().join("quantized.gguf")).unwrap().alignment(), 64);
    }

    /// A GGUF header: version, tensor and key counts, then `rest`.
    fn gguf(version: u32, tensors: u64, kvs: u64, rest: &[u8]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&tensors.to_le_bytes());
        out.extend_from_slice(&kvs.to_le_bytes());
        out.extend_from_slice(rest);
        out.resize(out.len() + 256, 0);
        out
    }

    fn string(s: &str) -> Vec<u8> {
        let mut out = (s.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(s.as_bytes());
        out
    }

    /// One tensor entry: name, dims (GGML order), type, offset.
    fn tensor(name: &str, dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
        let mut out = string(name);
        out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out
    }

    #[test]
    fn hostile_headers_are_refused_cleanly() {
        assert!(GgufFile::new(gguf(3, 1, 0, &tensor("w", &[4], 0, 0))).is_ok());
        let kv = |key: &str, ty: u32, value: &[u8]| {
            [string(key), ty.to_le_bytes().to_vec(), value.to_vec()].concat()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("a tensor count past the file", gguf(3, u64::MAX, 0, &[])),
            ("a key count past the file", gguf(3, 0, 1 << 40, &[])),
            ("a string past the file", gguf(3, 0, 1, &u64::MAX.to_le_bytes())),
            (
                "an array past the file",
                gguf(3, 0, 1, &kv("a", 9, &[4, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255])),
            ),
            ("an unknown value type", gguf(3, 0, 1, &kv("a", 99, &[]))),
            ("an alignment of 3", gguf(3, 0, 1, &kv("general.alignment", 4, &3u32.to_le_bytes()))),
            ("a misaligned tensor", gguf(3, 1, 0, &tensor("w", &[4], 0, 3))),
            ("a tensor past the data", gguf(3, 1, 0, &tensor("w", &[1 << 20], 0, 0))),
            ("an overflowing shape", gguf(3, 1, 0, &tensor("w", &[u64::MAX, 4], 0, 0))),
            ("partial blocks", gguf(3, 1, 0, &tensor("q", &[33], 8, 0))),
            ("too many dimensions", gguf(3, 1, 0, &tensor("w", &[1; 9], 0, 0))),
            (
                "a name twice",
                gguf(3, 2, 0, &[tensor("w", &[1], 0, 0), tensor("w", &[1], 0, 32)].concat()),
            ),
            ("a big-endian file", gguf(3u32.swap_bytes(), 0, 0, &[])),
            ("version 1", gguf(1, 0, 0, &[])),
            ("a key twice", gguf(3, 0, 2, &[kv("k", 7, &[1]), kv("k", 7, &[0])].concat())),
        ];
        for (what, bytes) in cases {
            let e = GgufFile::new(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
        }
        // An unknown type is an object that cannot be decoded, not a broken file.
        let file = GgufFile::new(gguf(3, 1, 0, &tensor("w", &[4], 77, 0))).unwrap();
        assert!(file.info(0).unwrap().unsupported.is_some());
        assert!(matches!(file.read(0).unwrap_err().kind(), ztensor_io::ErrorKind::Unsupported(_)));
    }

    fn kv(key: &str, ty: u32, value: &[u8]) -> Vec<u8> {
        [string(key), ty.to_le_bytes().to_vec(), value.to_vec()].concat()
    }

    /// An array value: item type, count, then the items' bytes.
    fn array(item: u32, count: u64, items: &[u8]) -> Vec<u8> {
        [item.to_le_bytes().to_vec(), count.to_le_bytes().to_vec(), items.to_vec()].concat()
    }

    #[test]
    fn large_metadata_arrays_read_back_whole() {
        // 2,000,000 u8 items (read as one run past the header buffer) and 100,000 strings
        // (their lengths and bytes straddling the buffer's refills), then a scalar after them.
        const N: usize = 2_000_000;
        let bytes: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
        let words: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
        let strings: Vec<u8> = words.iter().flat_map(|w| string(w)).collect();
        let rest = [
            kv("big.u8", 9, &array(0, N as u64, &bytes)),
            kv("big.words", 9, &array(8, words.len() as u64, &strings)),
            kv("after", 4, &7u32.to_le_bytes()),
            tensor("w", &[4], 0, 0),
        ]
        .concat();
        let file = GgufFile::new(gguf(3, 1, 3, &rest)).unwrap();
        let attributes = &file.try_attributes().unwrap().unwrap().to_value();
        let big = attribute(attributes, "big.u8").as_array().unwrap();
        assert_eq!(big.len(), N);
        assert_eq!(big[0].as_u64(), Some(0));
        assert_eq!(big[250].as_u64(), Some(250));
        assert_eq!(big[N - 1].as_u64(), Some(((N - 1) % 251) as u64));
        assert!(big.iter().zip(&bytes).all(|(v, &b)| v.as_u64() == Some(u64::from(b))));
        let read: Vec<&str> = attribute(attributes, "big.words")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_text().unwrap())
            .collect();
        assert_eq!(read, words);
        assert_eq!(attribute(attributes, "after").as_u64(), Some(7));
        // The tensor table after them was read in the same pass.
        assert_eq!(file.find("w"), Some(0));
        // The trait's view is the same map, built once.
        let built = file.try_attributes().unwrap().unwrap();
        assert!(std::ptr::eq(file.attributes().unwrap().as_ref(), built));
    }

    #[test]
    fn every_metadata_array_type_reads_back() {
        let f32s: Vec<u8> = [0.5f32, -2.0].iter().flat_map(|f| f.to_le_bytes()).collect();
        let i64s: Vec<u8> = [i64::MIN, 3].iter().flat_map(|i| i.to_le_bytes()).collect();
        let nested =
            [array(5, 2, &[1, 0, 0, 0, 254, 255, 255, 255]), array(8, 1, &string("x"))].concat();
        let rest = [
            kv("i8", 9, &array(1, 2, &[0x80, 0x7f])),
            kv("u16", 9, &array(2, 1, &60000u16.to_le_bytes())),
            kv("f32", 9, &array(6, 2, &f32s)),
            kv("bool", 9, &array(7, 2, &[1, 0])),
            kv("i64", 9, &array(11, 2, &i64s)),
            kv("nested", 9, &array(9, 2, &nested)),
            kv("empty", 9, &array(99, 0, &[])),
        ]
        .concat();
        let file = GgufFile::new(gguf(3, 0, 7, &rest)).unwrap();
        let a = &file.try_attributes().unwrap().unwrap().to_value();
        let ints = |key| -> Vec<i128> {
            let items = attribute(a, key).as_array().unwrap();
            items
                .iter()
                .map(|v| if let Value::Integer(i) = v { *i } else { panic!("{v:?}") })
                .collect()
        };
        assert_eq!(ints("i8"), [-128, 127]);
        assert_eq!(ints("u16"), [60000]);
        assert_eq!(ints("i64"), [i128::from(i64::MIN), 3]);
        assert_eq!(
            attribute(a, "f32").as_array().unwrap(),
            &[Value::Float(0.5), Value::Float(-2.0)]
        );
        assert_eq!(
            attribute(a, "bool").as_array().unwrap(),
            &[Value::Bool(true), Value::Bool(false)]
        );
        assert_eq!(
            attribute(a, "nested"),
            &Value::Array(vec![
                Value::Array(vec![Value::Integer(1), Value::Integer(-2)]),
                Value::Array(vec![Value::Text("x".into())]),
            ])
        );
        assert_eq!(attribute(a, "empty"), &Value::Array(vec![]));
        // Arrays that claim more than the file holds, or hold what their type cannot, are refused.
        for (what, bytes) in [
            ("u32 items past the file", gguf(3, 0, 1, &kv("a", 9, &array(4, 100, &[])))),
            ("strings past the file", gguf(3, 0, 1, &kv("a", 9, &array(8, 40, &[])))),
            ("a bool of 2", gguf(3, 0, 1, &kv("a", 9, &array(7, 2, &[1, 2])))),
            (
                "a string not UTF-8",
                gguf(3, 0, 1, &kv("a", 9, &array(8, 1, &[1, 0, 0, 0, 0, 0, 0, 0, 0xff]))),
            ),
            ("an unknown item type", gguf(3, 0, 1, &kv("a", 9, &array(99, 1, &[0])))),
        ] {
            let e = GgufFile::new(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
        }
    }

    #[test]
    fn tensors_whose_data_overlaps_are_refused_naming_both() {
        // 64 bytes of F32 at 0 and 16 bytes at 32 share bytes 32..48.
        let overlapping =
            gguf(3, 2, 0, &[tensor("big", &[16], 0, 0), tensor("inner", &[4], 0, 32)].concat());
        let e = GgufFile::new(overlapping).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
        assert!(e.message().contains("\"big\"") && e.message().contains("\"inner\""), "{e}");
        assert!(e.message().contains("overlap"), "{e}");
        // Listed in the other order, and the same range twice.
        for rest in [
            [tensor("inner", &[4], 0, 32), tensor("big", &[16], 0, 0)].concat(),
            [tensor("a", &[4], 0, 32), tensor("b", &[4], 0, 32)].concat(),
        ] {
            assert_eq!(
                GgufFile::new(gguf(3, 2, 0, &rest)).unwrap_err().kind(),
                ErrorKind::Malformed
            );
        }
        // A range that reaches past its neighbour into the one after it.
        let three =
            [tensor("a", &[32], 0, 0), tensor("b", &[1], 0, 32), tensor("c", &[1], 0, 96)].concat();
        let e = GgufFile::new(gguf(3, 3, 0, &three)).unwrap_err();
        assert!(e.message().contains("\"a\"") && e.message().contains("\"b\""), "{e}");
        // Adjacent ranges, and tensors of no bytes at any offset, are fine.
        let adjacent = [
            tensor("a", &[8], 0, 0),
            tensor("b", &[4], 0, 32),
            tensor("empty", &[0, 4], 0, 32),
            tensor("also_empty", &[0], 1, 0),
            tensor("unknown", &[4], 77, 32),
        ]
        .concat();
        let file = GgufFile::new(gguf(3, 5, 0, &adjacent)).unwrap();
        assert_eq!(file.len(), 5);
    }
}

mod npz_in {
    //! `.npz` archives written by `numpy.savez` and `numpy.savez_compressed`: every member
    //! reads as NumPy says; damaged archives are refused cleanly.

    use std::path::PathBuf;

    use ztensor_foreign::ErrorKind;
    use ztensor_foreign::npz::NpzFile;
    use ztensor_format::DigestAlgorithm;
    use ztensor_io::TensorSource;
    use ztensor_io::codec::Hasher;

    fn dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/numpy")
    }

    #[test]
    fn archives_numpy_wrote_read_as_numpy_says() {
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap();
        for (file, members) in expected["npz"].as_object().unwrap() {
            let npz = NpzFile::open(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(npz.len(), members.as_object().unwrap().len(), "{file}");
            for (name, want) in members.as_object().unwrap() {
                let i = npz.find(name).unwrap_or_else(|| panic!("{file}: no {name}"));
                if want["expect"] == "unsupported" {
                    assert!(npz.info(i).unwrap().unsupported.is_some());
                    assert!(matches!(
                        npz.read(i).unwrap_err().kind(),
                        ztensor_io::ErrorKind::Unsupported(_)
                    ));
                    continue;
                }
                let data = npz.read(i).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
                let shape: Vec<u64> =
                    want["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
                assert_eq!(data.shape, shape, "{file} {name}");
                let c = &data.components["data"];
                assert_eq!(c.dtype.name(), want["dtype"].as_str().unwrap());
                let mut h = Hasher::new(&DigestAlgorithm::Sha256).unwrap();
                h.update(&c.bytes);
                assert_eq!(
                    h.finish().to_string(),
                    format!("sha256:{}", want["sha256"].as_str().unwrap()),
                    "{file} {name}"
                );
            }
        }
    }

    #[test]
    fn damaged_archives_are_refused_cleanly() {
        let good = std::fs::read(dir().join("arrays.npz")).unwrap();
        let limit = 1 << 30;
        assert!(NpzFile::new(good.clone(), limit).is_ok());
        let eocd = good.windows(4).rposition(|w| w == b"PK\x05\x06").unwrap();
        let central = good.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        cases.push(("cut short", good[..good.len() - 30].to_vec()));
        let mut many = good.clone();
        many[eocd + 10..eocd + 12].copy_from_slice(&0xFFFEu16.to_le_bytes());
        cases.push(("an entry count past the directory", many));
        let mut far = good.clone();
        far[eocd + 16..eocd + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        cases.push(("a directory offset past the file", far));
        let mut method = good.clone();
        method[central + 10..central + 12].copy_from_slice(&12u16.to_le_bytes());
        cases.push(("bzip2", method));
        let mut encrypted = good.clone();
        encrypted[central + 8] |= 1;
        cases.push(("encrypted", encrypted));
        let mut big = good.clone();
        big[central + 20..central + 24].copy_from_slice(&0x7FFF_FFF0u32.to_le_bytes());
        big[central + 24..central + 28].copy_from_slice(&0x7FFF_FFF0u32.to_le_bytes());
        cases.push(("a member larger than the file", big));
        cases.push(("not a zip", b"PK\x03\x04 and nothing else".to_vec()));
        for (what, bytes) in cases {
            let e = NpzFile::new(bytes, limit).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Malformed, "{what}: {e}");
        }
        // A flipped data byte is caught by the member's CRC-32 when read.
        let mut flipped = good.clone();
        let data_at = good.windows(6).position(|w| w == b"\x93NUMPY").unwrap() + 140;
        flipped[data_at] ^= 0xFF;
        let npz = NpzFile::new(flipped, limit).unwrap();
        let failures = (0..npz.len()).filter_map(|i| npz.read(i).err()).collect::<Vec<_>>();
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures[0].rule(),
            Some(ztensor_format::ErrorKind::DigestMismatch),
            "{}",
            failures[0]
        );
        // A member declaring more than the limit is refused before it is inflated.
        let compressed = std::fs::read(dir().join("compressed.npz")).unwrap();
        let npz = NpzFile::new(compressed, 16).unwrap();
        assert!((0..npz.len()).all(|i| npz.read(i).is_err()));
    }

    /// Directory entries that point into one member's bytes would inflate it once each (a
    /// 261 KB archive decoding 2 GiB): entries whose data overlap are refused when opened.
    #[test]
    fn entries_sharing_data_are_refused() {
        for file in ["arrays.npz", "compressed.npz"] {
            let good = std::fs::read(dir().join(file)).unwrap();
            let entries: Vec<usize> = good
                .windows(4)
                .enumerate()
                .filter(|(_, w)| *w == b"PK\x01\x02")
                .map(|(i, _)| i)
                .collect();
            assert!(entries.len() >= 2, "{file}");
            let mut shared = good.clone();
            let first = good[entries[0] + 42..entries[0] + 46].to_vec();
            shared[entries[1] + 42..entries[1] + 46].copy_from_slice(&first);
            let e = NpzFile::new(shared, 1 << 30).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Malformed, "{file}: {e}");
            assert!(e.to_string().contains("overlap"), "{file}: {e}");
        }
    }

    /// Fortran-ordered arrays of every element width stream into C order as NumPy's own
    /// `ascontiguousarray` gives it (computed here by index), stored and deflated alike.
    #[test]
    fn fortran_arrays_stream_into_c_order() {
        use std::io::Write as _;
        for (descr, size) in [("<u1", 1usize), ("<i2", 2), ("<f4", 4), (">f8", 8), ("<c16", 16)] {
            let shape = [3usize, 4, 5];
            let count: usize = shape.iter().product();
            // Element (i, j, k) holds the bytes of its C-order number; stored in Fortran order.
            let value = |c: usize| -> Vec<u8> { (0..size).map(|b| (c * 13 + b) as u8).collect() };
            let mut data = Vec::new();
            for k in 0..shape[2] {
                for j in 0..shape[1] {
                    for i in 0..shape[0] {
                        data.extend(value((i * shape[1] + j) * shape[2] + k));
                    }
                }
            }
            let header =
                format!("{{'descr': '{descr}', 'fortran_order': True, 'shape': (3, 4, 5), }}");
            let npy = super::numpy_in::npy_for_tests(&header, &data);
            for deflate in [false, true] {
                let stored = if deflate {
                    let mut e = flate2::write::DeflateEncoder::new(
                        Vec::new(),
                        flate2::Compression::default(),
                    );
                    e.write_all(&npy).unwrap();
                    e.finish().unwrap()
                } else {
                    npy.clone()
                };
                let archive = one_member_zip("a.npy", &npy, &stored, deflate);
                let npz = NpzFile::new(archive, 1 << 30).unwrap();
                let got = npz.read(0).unwrap();
                let mut want: Vec<u8> = (0..count).flat_map(value).collect();
                if descr.starts_with('>') {
                    for unit in want.chunks_exact_mut(8) {
                        unit.reverse();
                    }
                }
                assert_eq!(&*got.components["data"].bytes, &want[..], "{descr} {deflate}");
            }
        }
    }

    /// A zip archive of one member.
    fn one_member_zip(name: &str, data: &[u8], stored: &[u8], deflate: bool) -> Vec<u8> {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let method: u16 = if deflate { 8 } else { 0 };
        let fields = |v: &mut Vec<u8>| {
            v.extend(method.to_le_bytes());
            v.extend([0; 4]);
            v.extend(crc.sum().to_le_bytes());
            v.extend((stored.len() as u32).to_le_bytes());
            v.extend((data.len() as u32).to_le_bytes());
            v.extend((name.len() as u16).to_le_bytes());
            v.extend(0u16.to_le_bytes());
        };
        let mut out = b"PK\x03\x04\x14\x00\x00\x00".to_vec();
        fields(&mut out);
        out.extend(name.as_bytes());
        out.extend(stored);
        let cd_at = out.len() as u32;
        let mut central = b"PK\x01\x02\x14\x00\x14\x00\x00\x00".to_vec();
        fields(&mut central);
        central.extend([0; 10]);
        central.extend(0u32.to_le_bytes());
        central.extend(name.as_bytes());
        out.extend(&central);
        out.extend(b"PK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00");
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(cd_at.to_le_bytes());
        out.extend([0, 0]);
        out
    }
}

mod torch_in {
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
            serde_json::Value::Object(o) => serde_json::Value::Object(
                o.iter().map(|(k, v)| (k.clone(), unordered(v))).collect(),
            ),
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
                    let errors: Vec<String> = (0..pt.len())
                        .filter_map(|i| pt.read(i).err())
                        .map(|e| e.to_string())
                        .collect();
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
}
