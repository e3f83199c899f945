//! Writing canonical zTensor 2: byte for byte what the published corpus holds, back through
//! every reader of this workspace, from every zTensor 1.x fixture and back again.

use std::io::Cursor;
use std::path::PathBuf;

use ztensor_io::{TensorSink, TensorSource};
use ztensor_v2::{File, Zt2Sink};

fn corpus(dir: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2")
        .join(dir)
        .join(format!("{name}.zt"));
    std::fs::read(path).unwrap()
}

fn to_v2(source: &dyn TensorSource) -> Vec<u8> {
    let mut sink = Zt2Sink::to_output(Cursor::new(Vec::new()));
    sink.write_all(source).unwrap_or_else(|e| panic!("{e}"));
    sink.into_inner().unwrap().into_inner()
}

/// `canonical-basic.zt` was written by the reference implementation's canonical writer (its
/// checker calls it canonical): the same content written here gives the same bytes, shared
/// blob, placement, manifest and footer included.
#[test]
fn the_corpus_canonical_file_is_reproduced_byte_for_byte() {
    let published = corpus("valid", "canonical-basic");
    let file = File::open(published.clone(), ztensor_v2::MAX_MANIFEST).unwrap();
    let written = to_v2(&file);
    assert_eq!(written.len(), published.len());
    assert!(written == published, "the bytes differ");
}

/// The empty model: magic, zeros to 65536, the 10-byte manifest, the footer (65586 bytes), its
/// manifest hash the one the spec gives.
#[test]
fn the_empty_model() {
    let empty = ztensor_io::Reader::new(
        ztensor_io::Writer::new(Vec::new(), ztensor_format::Version::V1_2)
            .unwrap()
            .finish()
            .unwrap()
            .0,
        &Default::default(),
    )
    .unwrap();
    let bytes = to_v2(&empty);
    assert_eq!(bytes.len(), 65586);
    assert_eq!(&bytes[65536..65546], b"\xa1\x67objects\xa0");
    assert_eq!(bytes[65546 + 16..65546 + 24], 0x8f8b_3a7e_746e_7c7du64.to_le_bytes());
    assert!(bytes[8..65536].iter().all(|&b| b == 0));
}
