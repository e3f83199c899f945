//! The dump applies the data rules `verify` applies, and streams what it prints.

use serde_json::Value as Json;
use ztensor_format::{DType, Version};
use ztensor_io::{Coo, Reader, WriteOptions, Writer};

/// A 1.2 file of one COO tensor `c` of shape [2, 3] with two f32 values at `coords`
/// (structure of arrays: the rows, then the columns).
fn coo_1x(coords: &[u64]) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let values: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let coo = Coo { dtype: DType::F32, values: &values, coords };
    w.add_coo("c", &[2, 3], coo, &WriteOptions::raw()).unwrap();
    w.finish().unwrap().0
}

/// The same tensor as a zTensor 2 file (canonical: raw parts with digests), written from a
/// valid 1.2 file and then given `coords` in place of its coordinates, with the part's digest
/// and the manifest's hash made to match: only the data rules can find the fault.
fn coo_2(coords: &[u64]) -> Vec<u8> {
    let valid = coo_1x(&[0, 1, 2, 0]);
    let reader = Reader::new(&valid[..], &ztensor_dump::options()).unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    ztensor_v2::write(&reader, &mut out, &ztensor_v2::WriteOptions::default()).unwrap();
    let mut bytes = out.into_inner();
    let container = ztensor_v2::open(&&bytes[..], ztensor_v2::MAX_MANIFEST).unwrap();
    let manifest = container.manifest.unwrap();
    let part = manifest.objects.get("c").and_then(|o| o.parts.get("coords")).unwrap();
    let (offset, len) = (usize::try_from(part.blob.0).unwrap(), part.blob.1);
    let new: Vec<u8> = coords.iter().flat_map(|c| c.to_le_bytes()).collect();
    assert_eq!(new.len() as u64, len);
    bytes[offset..offset + new.len()].copy_from_slice(&new);
    let old_digest = part.digest.as_deref().unwrap().to_owned();
    let new_digest = format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(&new));
    let (at, length) = (container.footer.manifest_offset, container.footer.manifest_length);
    let (at, length) = (usize::try_from(at).unwrap(), usize::try_from(length).unwrap());
    let manifest_bytes = &mut bytes[at..at + length];
    let found = manifest_bytes
        .windows(old_digest.len())
        .position(|w| w == old_digest.as_bytes())
        .expect("the digest is in the manifest");
    manifest_bytes[found..found + new_digest.len()].copy_from_slice(new_digest.as_bytes());
    let hash = xxhash_rust::xxh3::xxh3_64(manifest_bytes);
    let footer = bytes.len() - usize::try_from(ztensor_v2::FOOTER_LEN).unwrap();
    bytes[footer + 16..footer + 24].copy_from_slice(&hash.to_le_bytes());
    bytes
}

fn dump_2(bytes: Vec<u8>) -> Json {
    let file = ztensor_v2::File::open(bytes, ztensor_v2::MAX_MANIFEST).unwrap();
    let dump = ztensor_dump::zt2(&file);
    // The streamed text is the text of the whole dump.
    let mut streamed = Vec::new();
    ztensor_dump::write_zt2(&file, &mut streamed).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), dump.to_string());
    dump
}

fn error(dump: &Json) -> String {
    dump["objects"][0]["error"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_valid_zt2_coo_dumps() {
    let dump = dump_2(coo_2(&[0, 1, 2, 0]));
    let c = &dump["objects"][0];
    assert_eq!(c["name"], "c");
    assert_eq!(c["format"], "zt.sparse_coo/1");
    assert!(c["error"].is_null(), "{dump}");
    assert_eq!(c["components"]["coords"]["decoded_length"], 32);
    assert_eq!(c["components"]["values"]["decoded_length"], 8);
}

#[test]
fn a_zt2_coo_with_a_coordinate_outside_the_shape_is_refused() {
    // Row 2 of a tensor of two rows.
    let dump = dump_2(coo_2(&[0, 2, 2, 0]));
    let e = error(&dump);
    assert!(e.contains("[sparse_index_out_of_bounds]"), "{dump}");
    assert!(dump["objects"][0]["components"]["coords"]["sha256"].is_null(), "{dump}");
}

#[test]
fn a_zt2_coo_with_a_coordinate_given_twice_is_refused() {
    // (0, 2) twice.
    let dump = dump_2(coo_2(&[0, 0, 2, 2]));
    let e = error(&dump);
    assert!(e.contains("given twice") && e.contains("[layout_data]"), "{dump}");
    assert!(dump["objects"][0]["components"]["values"]["decoded_length"].is_null(), "{dump}");
}

#[test]
fn a_1x_coo_with_a_coordinate_outside_the_shape_is_refused() {
    let dump = |bytes: &[u8]| {
        let reader = Reader::new(bytes, &ztensor_dump::options()).unwrap();
        ztensor_dump::accepted(&reader)
    };
    assert!(dump(&coo_1x(&[0, 1, 2, 0]))["objects"][0]["error"].is_null());
    let bad = dump(&coo_1x(&[0, 1, 3, 0]));
    assert!(error(&bad).contains("[sparse_index_out_of_bounds]"), "{bad}");
}

/// Sixty-four objects aliasing one 16 MiB seekable blob (the hostile corpus's) dump with one
/// length and hash each; the blob counts once in what checking the file costs.
#[test]
fn aliases_of_one_blob_dump_alike_and_the_budget_holds() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/external/ztensor2/hostile/aliases-64x16m.zt");
    let (dump, ok) = ztensor_dump::file(&path).unwrap();
    assert!(ok, "{dump}");
    let objects = dump["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 64);
    let first = &objects[0]["components"]["data"];
    assert_eq!(first["decoded_length"], 16 << 20);
    assert!(objects.iter().all(|o| o["components"]["data"] == *first && o["error"].is_null()));
    let file =
        ztensor_v2::File::open(std::fs::read(&path).unwrap(), ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(file.check_cost(), 16 << 20, "the blob counts once");
}
