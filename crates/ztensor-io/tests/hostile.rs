//! Damaged and hostile files: every fault is an error with its rule, never a panic, a hang, an
//! unbounded allocation or a silent wrong value.

use ztensor_format::{
    Component, DType, Digest, DigestAlgorithm, Encoding, ErrorKind as Rule, Format, Limits, Object,
    Options, Version,
};
use ztensor_io::codec::zstd_encode;
use ztensor_io::{Reader, StoredComponent, WriteOptions, Writer};

/// A file with one dense object whose single component is stored exactly as given.
fn stored_file(version: Version, shape: &[u64], component: Component, bytes: &[u8]) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), version).unwrap();
    let object = Object::new("w", shape.to_vec(), Format::Dense);
    w.add_stored(object, &[StoredComponent { role: "data", component, bytes }]).unwrap();
    w.finish().unwrap().0
}

fn zstd_component(len: u64, uncompressed: Option<u64>) -> Component {
    let mut c = Component::new(DType::U8, 0, len);
    c.encoding = Encoding::Zstd;
    c.uncompressed_length = uncompressed;
    c
}

#[test]
fn short_zstd_output_is_an_error_not_zero_fill() {
    // v1.1 has no uncompressed_length: the shape says 8 bytes, the stream holds 4.
    let z = zstd_encode(&[1, 2, 3, 4], 3).unwrap();
    let file = stored_file(Version::V1_1, &[8], zstd_component(z.len() as u64, None), &z);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let err = reader.component("w", "data").and_then(|c| c.decoded()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DecodedSizeMismatch), "{err}");
    // Long output too.
    let z = zstd_encode(&[9; 12], 3).unwrap();
    let file = stored_file(Version::V1_1, &[8], zstd_component(z.len() as u64, None), &z);
    let err = Reader::new(&file[..], &Options::default())
        .unwrap()
        .component("w", "data")
        .and_then(|c| c.decoded())
        .unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DecodedSizeMismatch));
}

#[test]
fn a_huge_declared_size_allocates_nothing_up_front() {
    // 48 GiB declared, a 4-byte stream: decoding must fail quickly with a size mismatch.
    let declared = 48u64 << 30;
    let z = zstd_encode(&[1, 2, 3, 4], 3).unwrap();
    let file =
        stored_file(Version::V1_2, &[declared], zstd_component(z.len() as u64, Some(declared)), &z);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let err = reader.component("w", "data").and_then(|c| c.decoded()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DecodedSizeMismatch), "{err}");
}

#[test]
fn a_decompression_bomb_stops_at_the_limit() {
    // 64 MiB of zeros compresses to a few KiB; with no declared size (a v1.1 sparse values
    // component) the decoder must stop at the limit.
    let zeros = vec![0u8; 64 << 20];
    let z = zstd_encode(&zeros, 3).unwrap();
    assert!(z.len() < 1 << 20);
    let mut w = Writer::new(Vec::new(), Version::V1_1).unwrap();
    let mut object = Object::new("s", vec![1 << 30, 4], Format::SparseCsr);
    object.components.clear();
    let mut values = zstd_component(z.len() as u64, None);
    values.dtype = DType::U8.into();
    let indptr = vec![0u8; 8];
    let indices: Vec<u8> = Vec::new();
    w.add_stored(
        Object::new("s", vec![0, 4], Format::SparseCsr),
        &[
            StoredComponent { role: "values", component: values, bytes: &z },
            StoredComponent {
                role: "indices",
                component: Component::new(DType::U64, 0, 0),
                bytes: &indices,
            },
            StoredComponent {
                role: "indptr",
                component: Component::new(DType::U64, 0, 8),
                bytes: &indptr,
            },
        ],
    )
    .unwrap();
    let (file, _) = w.finish().unwrap();
    let mut options = Options::default();
    options.limits.max_decoded_len = 1 << 20;
    let reader = Reader::new(&file[..], &options).unwrap();
    let err = reader.component("s", "values").and_then(|c| c.decoded()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DecodedTooLarge), "{err}");
    drop(object);
    let _ = Limits::default();
}

#[test]
fn digest_mismatch_and_unknown_algorithms() {
    let data: Vec<u8> = (0..64).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    for (name, algorithm) in [
        ("c", DigestAlgorithm::Crc32c),
        ("s", DigestAlgorithm::Sha256),
        ("b", DigestAlgorithm::Blake3),
    ] {
        w.add_dense(name, &[64], DType::U8, &data, &WriteOptions::raw().with_digest(algorithm))
            .unwrap();
    }
    let mut unknown = Component::new(DType::U8, 0, 64);
    unknown.digest = Some(Digest::parse("xxh3:0123456789abcdef"));
    w.add_stored(
        Object::new("u", vec![64], Format::Dense),
        &[StoredComponent { role: "data", component: unknown, bytes: &data }],
    )
    .unwrap();
    let (mut file, _) = w.finish().unwrap();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    assert_eq!(
        reader.component("u", "data").and_then(|c| c.verify()).unwrap(),
        ztensor_io::DigestCheck::Unverifiable("xxh3:0123456789abcdef".into())
    );
    let offsets: Vec<(String, u64)> = reader
        .manifest()
        .objects()
        .map(|o| (o.name().to_owned(), o.object().components["data"].offset))
        .collect();
    for (name, offset) in offsets.iter().filter(|(n, _)| n != "u") {
        file[*offset as usize + 5] ^= 1;
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let err = reader.component(name, "data").and_then(|c| c.verify()).unwrap_err();
        assert_eq!(err.rule(), Some(Rule::DigestMismatch), "{name}: {err}");
        file[*offset as usize + 5] ^= 1;
    }
}

#[test]
fn corrupt_zstd_is_decode_failed() {
    let data = vec![5u8; 4096];
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("z", &[4096], DType::U8, &data, &WriteOptions::zstd(3)).unwrap();
    let (mut file, _) = w.finish().unwrap();
    let offset = Reader::new(&file[..], &Options::default())
        .unwrap()
        .object("z")
        .unwrap()
        .model()
        .components["data"]
        .offset;
    // Destroy the frame magic.
    file[offset as usize] ^= 0xff;
    let err = Reader::new(&file[..], &Options::default())
        .unwrap()
        .component("z", "data")
        .and_then(|c| c.decoded())
        .unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DecodeFailed), "{err}");
}

#[test]
fn unsupported_objects_do_not_spoil_the_file() {
    let mut c = Component::new(DType::U8, 0, 4);
    c.dtype = ztensor_format::StorageType::Unknown("f4".into());
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_stored(
        Object::new("odd", vec![8], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &[0; 4] }],
    )
    .unwrap();
    w.add_dense("ok", &[2], DType::U8, &[1, 2], &WriteOptions::raw()).unwrap();
    let (file, _) = w.finish().unwrap();
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    assert_eq!(reader.read_object("odd").unwrap_err().rule(), Some(Rule::DtypeUnknown));
    assert_eq!(reader.component("ok", "data").and_then(|c| c.read_as::<u8>()).unwrap(), [1, 2]);
    assert!(matches!(
        reader.read_object("nope").unwrap_err().kind(),
        ztensor_io::ErrorKind::NotFound { .. }
    ));
}

#[test]
fn truncated_files_are_rejected_at_every_length() {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense(
        "w",
        &[16],
        DType::F32,
        &[7; 64],
        &WriteOptions::zstd(1).with_digest(DigestAlgorithm::Sha256),
    )
    .unwrap();
    let (file, _) = w.finish().unwrap();
    for len in 0..file.len() {
        assert!(
            Reader::new(&file[..len], &Options::default()).is_err(),
            "a {len}-byte prefix opened"
        );
    }
}

/// A source whose bytes in `range` are damaged from the second read of them on: what a file
/// changing under the reader looks like.
struct Changing {
    bytes: Vec<u8>,
    range: std::ops::Range<u64>,
    reads: std::sync::atomic::AtomicUsize,
}

impl ztensor_io::ReadAt for Changing {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (&self.bytes[..]).read_exact_at(offset, buf)?;
        let end = offset + buf.len() as u64;
        if offset < self.range.end && self.range.start < end {
            let n = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n > 0 {
                for b in buf.iter_mut() {
                    *b ^= 0x5a;
                }
            }
        }
        Ok(())
    }
}

#[test]
fn the_bytes_checked_are_the_bytes_used_when_the_source_changes() {
    let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense(
        "w",
        &[4000],
        DType::U8,
        &data,
        &WriteOptions::raw().with_digest(DigestAlgorithm::Sha256),
    )
    .unwrap();
    let file = w.finish().unwrap().0;
    let offset = Reader::new(&file[..], &Options::default())
        .unwrap()
        .manifest()
        .objects()
        .next()
        .unwrap()
        .object()
        .components["data"]
        .offset;
    let changing = || Changing {
        bytes: file.clone(),
        range: offset..offset + 4000,
        reads: std::sync::atomic::AtomicUsize::new(0),
    };

    // Re-encoding copies what was verified: the first read is sound, later ones are not.
    let reader = Reader::new(changing(), &Options::default()).unwrap();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let copy = ztensor_io::CopyOptions {
        compression: Some(ztensor_io::Compression::Zstd(3)),
        digest: ztensor_io::DigestChoice::Set(DigestAlgorithm::Blake3),
        ..Default::default()
    };
    ztensor_io::copy_object(reader.object("w").unwrap(), &mut out, &copy).unwrap();
    let copied = out.finish().unwrap().0;
    let copied = Reader::new(&copied[..], &Options::default()).unwrap();
    copied.component("w", "data").and_then(|c| c.verify()).unwrap();
    assert_eq!(copied.component("w", "data").and_then(|c| c.decoded()).unwrap().into_owned(), data);

    // The same holds for one decoded component and a whole object.
    let reader = Reader::new(changing(), &Options::default()).unwrap();
    assert_eq!(
        reader.component("w", "data").and_then(|c| c.decoded_verified()).unwrap().into_owned(),
        data
    );
    // The source is now past its first read: damaged, and reported as such.
    let err = reader.component("w", "data").and_then(|c| c.decoded_verified()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DigestMismatch), "{err}");
    let reader = Reader::new(changing(), &Options::default()).unwrap();
    let object = reader.read_object_verified("w").unwrap();
    assert_eq!(&object.components["data"].bytes[..], &data[..]);
    reader.object("w").unwrap().check(&object).unwrap();
}

#[test]
fn v0_1_tensors_of_one_name_open_lookups_find_the_first_and_handles_reach_both() {
    // As the reference v0.1 writer makes them: two tensors named "a", holding 1 and 2.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v0.1/implementation-defined/duplicate-name.zt");
    let file = std::fs::read(path).unwrap();
    let strict = Reader::new(&file[..], &Options::strict()).unwrap_err();
    assert_eq!(strict.rule(), Some(Rule::DuplicateName), "{strict}");
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    assert_eq!(reader.manifest().objects().count(), 2);
    assert_eq!(reader.component("a", "data").and_then(|c| c.read_as::<u8>()).unwrap(), [1]);
    let shadowed: Vec<_> = reader.shadowed().collect();
    assert_eq!(shadowed.len(), 1);
    let second = shadowed[0].read_verified().unwrap();
    assert_eq!(&second.components["data"].bytes[..], &[2]);
    assert_eq!(shadowed[0].component("data").unwrap().read_as::<u8>().unwrap(), [2]);
    let first = reader.objects().next().unwrap().read_verified().unwrap();
    assert_eq!(&first.components["data"].bytes[..], &[1]);
    // Our writer never writes a name twice, in any version: a copy is refused by name.
    let mut out = Writer::new(Vec::new(), Version::V0_1).unwrap();
    let err =
        ztensor_io::copy_all(&reader, &mut out, &ztensor_io::CopyOptions::default()).unwrap_err();
    assert_eq!(err.rule(), Some(Rule::DuplicateName), "{err}");
}
