//! v0.1: big-endian data comes back little-endian; single-blob sparse tensors come back in the
//! 1.2 model; any non-zero bool byte is true.

use ztensor_format::{ByteOrder, Component, DType, Format, Object, Options, Packing, Version};
use ztensor_io::{Reader, StoredComponent, WriteOptions, Writer};

#[test]
fn big_endian_dense_is_returned_little_endian() {
    let values = [1.0f32, -2.5, 1e-3];
    let be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let mut c = Component::new(DType::F32, 0, 12);
    c.set_byte_order(ByteOrder::Big);
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    w.add_stored(
        Object::new("be", vec![3], Format::Dense),
        &[StoredComponent { role: "data", component: c, bytes: &be }],
    )
    .unwrap();
    let (file, _) = w.finish().unwrap();
    let reader = Reader::new(file, &Options::default()).unwrap();
    assert_eq!(reader.component("be", "data").and_then(|c| c.read_as::<f32>()).unwrap(), values);
    assert!(matches!(
        reader.component("be", "data").and_then(|c| c.view::<f32>()).unwrap_err().kind(),
        ztensor_io::ErrorKind::View(_)
    ));
    // The stored bytes are untouched.
    assert_eq!(reader.component("be", "data").and_then(|c| c.stored()).unwrap().as_ref(), &be[..]);
}

#[test]
fn big_endian_single_blob_coo() {
    // Two non-zeros of a [3, 3] i16 tensor: (0, 2) = 300 and (2, 1) = -7, big-endian records.
    let mut blob = Vec::new();
    for (r, c, v) in [(0u64, 2u64, 300i16), (2, 1, -7)] {
        blob.extend_from_slice(&r.to_be_bytes());
        blob.extend_from_slice(&c.to_be_bytes());
        blob.extend_from_slice(&v.to_be_bytes());
    }
    let mut c = Component::new(DType::I16, 0, blob.len() as u64);
    c.set_byte_order(ByteOrder::Big);
    let mut object = Object::new("s", vec![3, 3], Format::SparseCoo);
    object.packing = Packing::V0Single;
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    w.add_stored(object, &[StoredComponent { role: "data", component: c, bytes: &blob }]).unwrap();
    let (file, _) = w.finish().unwrap();
    let reader = Reader::new(&file[..], &Options::strict()).unwrap();
    let data = reader.read_object("s").unwrap();
    assert_eq!(data.format, Format::SparseCoo);
    let coords: Vec<u8> = [0u64, 2, 2, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(data.components["coords"].bytes.as_ref(), &coords[..]);
    let values: Vec<u8> = [300i16, -7].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(data.components["values"].bytes.as_ref(), &values[..]);
    let s = reader.object("s").unwrap();
    s.check(&s.read().unwrap()).unwrap();
}

#[test]
fn v0_1_bool_is_nonzero_true_but_v1_bool_is_strict() {
    for (version, ok) in [(Version::V0_1, true), (Version::V1_2, false)] {
        let mut w = Writer::new(Vec::new(), version).unwrap();
        w.add_dense("b", &[3], DType::Bool, &[0, 1, 2], &WriteOptions::raw()).unwrap();
        let (file, _) = w.finish().unwrap();
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let b = reader.object("b").unwrap();
        let result = b.check(&b.read().unwrap());
        assert_eq!(result.is_ok(), ok, "{version}: {result:?}");
        if let Err(e) = result {
            assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::BoolInvalid));
        }
    }
}

#[test]
fn v0_1_refuses_what_it_cannot_express() {
    let mut w = Writer::new(Vec::new(), Version::V0_1).unwrap();
    let e = w
        .set_attributes(
            ztensor_format::Attributes::try_from(ztensor_format::text_map([("a", 1u64.into())]))
                .unwrap(),
        )
        .unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::Unrepresentable));
    let spec = ztensor_io::ComponentSpec {
        role: "scales",
        dtype: DType::F16,
        logical_type: None,
        data: &[0; 2],
    };
    let e = w
        .add_object("q", &[1], Format::QuantizedGroup, None, &[spec], &WriteOptions::raw())
        .unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::Unrepresentable));
    let t = ztensor_format::LogicalType::F8E4M3Fnuz;
    let spec = ztensor_io::ComponentSpec {
        role: "data",
        dtype: DType::U8,
        logical_type: Some(&t),
        data: &[0; 2],
    };
    let mut w11 = Writer::new(Vec::new(), Version::V1_1).unwrap();
    let e =
        w11.add_object("f", &[2], Format::Dense, None, &[spec], &WriteOptions::raw()).unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::Unrepresentable));
}

/// A stored object the target version cannot hold (a v0.1 single-blob sparse tensor into 1.2,
/// a big-endian component into 1.2) is refused before any of its bytes are written, and the
/// writer goes on.
#[test]
fn a_stored_object_the_version_cannot_hold_writes_nothing() {
    // Two COO records of rank 2 with i16 values: 2 x (2 x 8 + 2) bytes.
    let blob = [0u8; 36];
    let mut sparse = Object::new("s", vec![2, 2], Format::SparseCoo);
    sparse.packing = Packing::V0Single;
    let mut big = Component::new(DType::F32, 0, 36);
    big.set_byte_order(ByteOrder::Big);
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let stored = |component| [StoredComponent { role: "data", component, bytes: &blob }];
    for (object, component) in [
        (sparse, Component::new(DType::I16, 0, 36)),
        (Object::new("b", vec![9], Format::Dense), big),
    ] {
        let name = object.name.clone();
        let before = w.manifest().len();
        let err = w.add_stored(object, &stored(component)).unwrap_err();
        assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::Unrepresentable), "{name}: {err}");
        assert_eq!(w.manifest().len(), before);
    }
    w.add_stored(
        Object::new("ok", vec![36], Format::Dense),
        &stored(Component::new(DType::U8, 0, 36)),
    )
    .unwrap();
    let (file, _) = w.finish().unwrap();
    // Header, one blob at 64, then the manifest: nothing of the refused objects in between.
    let reader = Reader::new(&file[..], &Options::strict()).unwrap();
    assert_eq!(reader.manifest().location().offset, 64 + 36);
    assert_eq!(reader.component("ok", "data").unwrap().offset(), 64);
}
