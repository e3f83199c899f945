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
        let header = format!("{{'descr': '{descr}', 'fortran_order': True, 'shape': (3, 4, 5), }}");
        let npy = super::numpy_in::npy_for_tests(&header, &data);
        for deflate in [false, true] {
            let archive = ztensor_testkit::Zip::new().member("a.npy", &npy, deflate).finish();
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
