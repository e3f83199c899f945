//! Handles: an object is looked up once, and everything after reads through it.

use ztensor_format::{
    Component, DType, DigestAlgorithm, ErrorKind as Rule, Format, Object, Options, StorageType,
    Value, Version,
};
use ztensor_io::{
    Csr, DigestCheck, ErrorKind, Reader, StoredComponent, WriteOptions, Writer, role,
};

/// A 1.2 file: a dense f32 tensor with attributes, a CSR matrix, and an object of an unknown
/// dtype.
fn file() -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let options = WriteOptions::zstd(3).with_digest(DigestAlgorithm::Blake3);
    let dense: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_dense("dense", &[3], DType::F32, &dense, &options).unwrap();
    let values: Vec<u8> = [5i32, 6, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    let csr = Csr { dtype: DType::I32, values: &values, indices: &[1, 0, 2], indptr: &[0, 1, 3] };
    let attributes = ztensor_format::text_map([("kind", Value::Text("adjacency".into()))]);
    w.add_csr_object(
        "csr",
        &[2, 3],
        csr,
        Some(ztensor_format::Attributes::try_from(attributes).unwrap()),
        &WriteOptions::raw(),
    )
    .unwrap();
    let mut odd = Component::new(DType::U8, 0, 4);
    odd.dtype = StorageType::Unknown("f4".into());
    w.add_stored(
        Object::new("odd", vec![8], Format::Dense),
        &[StoredComponent { role: role::DATA, component: odd, bytes: &[9; 4] }],
    )
    .unwrap();
    w.finish().unwrap().0
}

#[test]
fn an_object_handle_describes_the_object_and_reaches_its_components() {
    let file = file();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let names: Vec<&str> = reader.objects().map(|o| o.name()).collect();
    // The manifest's order: a 1.x manifest is a CBOR map, its keys in canonical order (shorter
    // first, then bytewise).
    assert_eq!(names, ["csr", "odd", "dense"]);
    assert_eq!(reader.objects().len(), 3);

    let csr = reader.object("csr").unwrap();
    assert_eq!((csr.shape(), csr.format()), (&[2u64, 3][..], &Format::SparseCsr));
    assert_eq!(
        csr.attributes().and_then(|a| a.entries().next()).map(|(_, v)| v.as_text()),
        Some(Some("adjacency"))
    );
    assert!(csr.unsupported().is_none());
    let roles: Vec<&str> = csr.components().map(|c| c.role()).collect();
    assert_eq!(roles, [role::INDICES, role::INDPTR, role::VALUES], "sorted by role");
    // Every component's own decoding agrees with decoding the whole object.
    let whole = csr.read_verified().unwrap();
    for c in csr.components() {
        assert_eq!(c.decoded().unwrap(), whole.components[c.role()].bytes, "{}", c.role());
        assert_eq!(c.decoded_len(), Some(whole.components[c.role()].bytes.len() as u64));
        assert_eq!(c.object().name(), "csr");
    }
    assert_eq!(csr.component(role::VALUES).unwrap().read_as::<i32>().unwrap(), [5, 6, 7]);
    assert_eq!(csr.component(role::INDPTR).unwrap().read_as::<u64>().unwrap(), [0, 1, 3]);
    csr.check(&whole).unwrap();
    assert_eq!(csr.stored_len(), csr.components().map(|c| c.stored_len()).sum::<u64>());

    let dense = reader.object("dense").unwrap().component(role::DATA).unwrap();
    assert_eq!(dense.dtype(), Some(DType::F32));
    assert_eq!(dense.element_size(), Some(4));
    assert_eq!(dense.verify().unwrap(), DigestCheck::Verified(DigestAlgorithm::Blake3));
    assert_eq!(dense.decoded_verified().unwrap().len(), 12);
    // Compressed: no view, but an owned read.
    assert!(matches!(dense.view::<f32>().unwrap_err().kind(), ErrorKind::View(_)));
    assert_eq!(dense.read_as::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert!(matches!(dense.read_as::<u8>().unwrap_err().kind(), ErrorKind::View(_)));
    // The stored bytes are the file's, at the component's offset.
    let at = dense.offset() as usize;
    assert_eq!(dense.stored().unwrap(), &file[at..at + dense.stored_len() as usize]);
}

#[test]
fn an_unsupported_object_is_listed_and_says_why_but_is_not_decoded() {
    let file = file();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let odd = reader.object("odd").unwrap();
    assert_eq!(odd.unsupported().map(|e| e.kind()), Some(Rule::DtypeUnknown));
    let data = odd.component(role::DATA).unwrap();
    assert_eq!(data.dtype(), None);
    assert_eq!(data.storage_type(), &StorageType::Unknown("f4".into()));
    // Its stored bytes can still be copied as they are.
    assert_eq!(data.stored().unwrap().as_ref(), &[9; 4]);
    for err in [data.decoded().unwrap_err(), odd.read().unwrap_err()] {
        assert_eq!(err.rule(), Some(Rule::DtypeUnknown), "{err}");
    }
}

#[test]
fn missing_names_and_roles_are_not_found() {
    let file = file();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let err = reader.object("nope").unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("nope"), "{err}");
    let err = reader.object("dense").unwrap().component(role::VALUES).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("values"), "{err}");
    let err = reader.component("dense", role::SCALES).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotFound { .. }), "{err}");
}

#[test]
fn strictness_comes_from_the_reader() {
    // Unsorted columns within a row: valid, but the strict rules refuse it.
    let values: Vec<u8> = [1u8, 2].to_vec();
    let csr = Csr { dtype: DType::U8, values: &values, indices: &[2, 0], indptr: &[0, 2] };
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_csr("m", &[1, 3], csr, &WriteOptions::raw()).unwrap();
    let file = w.finish().unwrap().0;
    for (options, ok) in [(Options::default(), true), (Options::strict(), false)] {
        let reader = Reader::new(&file[..], &options).unwrap();
        let m = reader.object("m").unwrap();
        let outcome = m.check(&m.read().unwrap());
        assert_eq!(outcome.is_ok(), ok, "strict {}: {outcome:?}", options.strict);
    }
}

/// Every object of every fixture and producer file, read in pieces, gives the bytes a whole
/// read gives, or fails where it fails, with the same rule: streaming changes memory, not
/// answers.
#[test]
fn pieces_are_the_whole_read_on_every_fixture() {
    use ztensor_io::TensorSource;
    let files = fixture_files();
    assert!(files.len() > 200, "{}", files.len());
    let mut compared = 0;
    for file in &files {
        let Ok(reader) = ztensor_io::Reader::open(file) else { continue };
        for i in 0..reader.len() {
            let whole = reader.read(i);
            let mut pieces: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
            let streamed = reader.read_pieces(i, 1000, &mut |role, bytes| {
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
                (Err(a), Err(b)) => assert_eq!(a.rule(), b.rule(), "{}: {a} / {b}", file.display()),
                _ => panic!(
                    "{} #{i}: whole {:?}, pieces {:?}",
                    file.display(),
                    whole.err(),
                    streamed.err()
                ),
            }
        }
    }
    assert!(compared > 300, "{compared}");
}

/// Every fixture and producer file under `fixtures/`, by path.
pub(crate) fn fixture_files() -> Vec<std::path::PathBuf> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "zt") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// `Object::verify` and `Object::read_pieces` stream every layout; on every object of every
/// fixture, opened strict and lenient, they give the verdict of a whole verified read followed
/// by `check`, to the message, and the bytes of that read (`tests/streamed.rs` generates
/// thousands more, every data rule broken).
#[test]
fn streamed_verdicts_are_the_whole_reads_on_every_fixture() {
    let files = fixture_files();
    assert!(files.len() > 200, "{}", files.len());
    let (mut sound, mut faulty) = (0, 0);
    for file in &files {
        for strict in [false, true] {
            let mut options = Options::default();
            options.strict = strict;
            let Ok(reader) = Reader::open_with(file, &options) else { continue };
            for o in reader.objects() {
                let whole = o.read_verified().and_then(|data| o.check(&data).map(|()| data));
                let verdict = o.verify();
                let mut pieces: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
                // Small pieces split elements and v0.1 records; large objects in larger ones.
                let piece = if o.stored_len() < 1 << 16 { 64 } else { 1 << 20 };
                let streamed = o.read_pieces(piece, |role, bytes| {
                    assert!((1..=piece).contains(&bytes.len()), "{}", bytes.len());
                    pieces.entry(role.to_owned()).or_default().extend_from_slice(bytes);
                    Ok(())
                });
                let at = format!("{} {:?} strict={strict}", file.display(), o.name());
                match &whole {
                    Ok(data) => {
                        assert!(verdict.is_ok(), "{at}: {verdict:?}");
                        assert!(streamed.is_ok(), "{at}: {streamed:?}");
                        let roles: Vec<&String> = data.components.keys().collect();
                        let streamed_roles: Vec<&String> = pieces.keys().collect();
                        for (role, c) in &data.components {
                            let got = pieces.get(role).map_or(&[][..], Vec::as_slice);
                            assert_eq!(got, &c.bytes[..], "{at} {role}");
                        }
                        assert!(streamed_roles.iter().all(|r| roles.contains(r)), "{at}");
                        sound += 1;
                    }
                    Err(e) => {
                        let want = e.to_string();
                        assert_eq!(verdict.map_err(|e| e.to_string()), Err(want.clone()), "{at}");
                        assert_eq!(streamed.map_err(|e| e.to_string()), Err(want), "{at}");
                        faulty += 1;
                    }
                }
            }
        }
    }
    assert!(sound > 1000 && faulty > 15, "{sound} sound, {faulty} faulty");
}
