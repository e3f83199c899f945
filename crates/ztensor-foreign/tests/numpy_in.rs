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
                let shape: Vec<u64> =
                    want["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
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
                assert_eq!(sha, format!("sha256:{}", want["sha256"].as_str().unwrap()), "{name}");
                // Raw ranges are offered only for bytes that need no change.
                let plain = !name.contains("big-endian") && !name.contains("fortran");
                assert_eq!(file.raw(0).is_some(), plain, "{name}");
            }
            "unsupported" => {
                let file = NpyFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(file.info(0).unwrap().unsupported.is_some(), "{name}");
                let e = file.read(0).unwrap_err();
                assert!(matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_)), "{name}: {e}");
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
