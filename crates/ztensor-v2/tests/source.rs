//! zTensor 2 files read through the tensor-source interface, and converted to zTensor 1.2.

use std::path::PathBuf;

use ztensor_format::{DType, Options, Verdict, Version};
use ztensor_io::{Reader, TensorSink, TensorSource, WriteOptions, Writer};
use ztensor_v2::File;

fn file(dir: &str, name: &str) -> File<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2")
        .join(dir)
        .join(format!("{name}.zt"));
    File::open(std::fs::read(path).unwrap(), ztensor_v2::MAX_MANIFEST).unwrap()
}

#[test]
fn dense_objects_read_as_the_1_2_model() {
    let f = file("valid", "canonical-basic");
    let names: Vec<String> = (0..f.len()).map(|i| f.name(i).unwrap().into_owned()).collect();
    assert_eq!(names, ["a.bias", "a.weight", "tied"]);
    let bias = f.read(f.find("a.bias").unwrap()).unwrap();
    assert_eq!((bias.shape.as_slice(), bias.components["data"].dtype), (&[4][..], DType::F32));
    assert_eq!(bias.components["data"].bytes.as_ref(), [1u8; 16]);
    let tied = f.read(f.find("tied").unwrap()).unwrap();
    assert_eq!(tied.components["data"].dtype, DType::BF16);
    assert_eq!(tied.components["data"].bytes.as_ref(), [2u8; 16]);
    let info = f.info(f.find("a.weight").unwrap()).unwrap();
    assert_eq!(info.shape.as_ref(), [2, 4]);
    assert!(info.unsupported.is_none());
}

#[test]
fn what_cannot_be_read_says_why() {
    // A layout this reader does not interpret is read structurally: its parts as components,
    // under its own id.
    let unknown = file("valid", "unknown-layout-structural");
    let info = unknown.info(0).unwrap();
    assert!(info.unsupported.is_none(), "{info:?}");
    assert_eq!(info.format, ztensor_format::Format::Unknown("x.custom/1".into()));
    let data = unknown.read(0).unwrap();
    assert_eq!(data.components.len(), info.components.len());
    let encoded = file("valid", "view-unknown-encoding-refused");
    assert!(encoded.info(0).unwrap().unsupported.is_some());
    // A broken digest is the data saying no.
    let damaged = file("reject", "verify-digest-mismatch");
    let e = damaged.read(0).unwrap_err();
    assert!(e.is_rejection(), "{e}");
    let bool_byte = file("reject", "bool-invalid-byte");
    assert!(bool_byte.read(0).unwrap_err().is_rejection());
    // Attributes of every kind carry over.
    let kitchen = file("valid", "attributes-kitchen-sink");
    assert!(kitchen.attributes().is_some_and(|a| !a.is_empty()));
}

/// Each valid file whose objects are all dense converts to zTensor 1.2 through the zTensor
/// sink, and reads back with the same shapes, types and bytes.
#[test]
fn dense_files_convert_to_1_2() {
    let mut converted = 0;
    for name in [
        "minimal",
        "canonical-basic",
        "scalar",
        "zero-size-tensor",
        "verify-ok",
        "aliased-identical-blobs",
        "attributes-kitchen-sink",
        "empty-objects",
    ] {
        let f = file("valid", name);
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let par = ztensor_par::ParOptions::with_threads(2);
        ztensor_par::ZtSink::new(&mut out, WriteOptions::raw(), &par, &())
            .write_all(&f)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = out.finish().unwrap().0;
        let back = Reader::new(&bytes[..], &Options::default()).unwrap();
        assert_eq!(TensorSource::len(&back), f.len(), "{name}");
        for i in 0..f.len() {
            let (a, b) =
                (f.read(i).unwrap(), back.read(back.find(&f.name(i).unwrap()).unwrap()).unwrap());
            assert_eq!(
                (&a.shape, &a.components["data"].dtype),
                (&b.shape, &b.components["data"].dtype),
                "{name}"
            );
            assert_eq!(
                a.components["data"].logical_type, b.components["data"].logical_type,
                "{name}"
            );
            assert_eq!(a.components["data"].bytes, b.components["data"].bytes, "{name}");
        }
        converted += 1;
    }
    assert_eq!(converted, 8);
    // Packed FP4 has no 1.2 form yet: it says so rather than converting wrongly.
    assert!(file("valid", "f4-packed-odd-count").info(0).unwrap().unsupported.is_some());
}
