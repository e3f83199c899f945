//! `verify` never calls sound what it could not check: a zTensor 2 dense FP4 tensor (two values
//! a byte, no 1.2 form) still has its digest, its padding nibble and its seek table checked.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use ztensor_format::{Attributes, DType, Encoding, Format, LogicalType, StorageType};
use ztensor_io::{ComponentData, ComponentInfo, ObjectData, ObjectInfo, TensorSource};

use crate::{scratch, stdout, ztensor};

/// One dense `f4_e2m1` tensor `t` of five values in three bytes (the last high nibble is the
/// padding, zero).
struct Fp4;

const FP4: [u8; 3] = [0x21, 0x43, 0x05];

impl TensorSource for Fp4 {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("test")
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        None
    }

    fn len(&self) -> usize {
        1
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        (index == 0).then(|| ObjectInfo {
            name: Cow::Borrowed("t"),
            shape: Cow::Owned(vec![5]),
            format: Format::Dense,
            attributes: None,
            components: vec![ComponentInfo {
                role: Cow::Borrowed("data"),
                dtype: StorageType::Known(DType::U8),
                logical_type: Some(LogicalType::from_name("f4_e2m1")),
                decoded_len: Some(3),
                stored_len: 3,
                offset: None,
                encoding: Encoding::Raw,
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        if index != 0 {
            return Err(ztensor_io::Error::not_found("#1", None));
        }
        let data = ComponentData {
            dtype: DType::U8,
            logical_type: Some(LogicalType::from_name("f4_e2m1")),
            bytes: Cow::Borrowed(&FP4),
        };
        Ok(ObjectData {
            name: "t".into(),
            shape: vec![5],
            format: Format::Dense,
            attributes: None,
            components: BTreeMap::from([("data".to_owned(), data)]),
        })
    }
}

/// The FP4 file written by the zTensor 2 writer (zstd-seekable with `zstd`), and where its one
/// blob lies.
fn written(zstd: bool) -> (Vec<u8>, u64, u64) {
    let mut out = std::io::Cursor::new(Vec::new());
    let options = ztensor_v2::WriteOptions::default().zstd(zstd.then_some(3));
    ztensor_v2::write(&Fp4, &mut out, &options).expect("the writer takes an FP4 tensor");
    let bytes = out.into_inner();
    let container = ztensor_v2::open(&&bytes[..], ztensor_v2::MAX_MANIFEST).expect("it opens");
    let manifest = container.manifest.expect("a manifest");
    let part = manifest.objects.get("t").and_then(|o| o.parts.get("data")).expect("t/data");
    assert!(part.digest.is_some(), "the writer records a digest");
    assert_eq!(part.encoding.is_some(), zstd);
    (bytes, part.blob.0, part.blob.1)
}

/// `verify --strict --json`'s report and exit status for a file of `bytes`.
fn verify(name: &str, bytes: &[u8]) -> (serde_json::Value, Option<i32>) {
    let d = scratch(&format!("unchecked-{name}"));
    let path = d.join("file.zt");
    std::fs::write(&path, bytes).unwrap();
    let (report, code) = verify_path(&path);
    std::fs::remove_dir_all(&d).unwrap();
    (report, code)
}

fn verify_path(path: &Path) -> (serde_json::Value, Option<i32>) {
    let out = ztensor(&["verify", "--strict", "--json", path.to_str().unwrap()]);
    let report = serde_json::from_str(&stdout(&out)).expect("a JSON report");
    (report, out.status.code())
}

fn problems(report: &serde_json::Value) -> String {
    report["problems"].to_string()
}

#[test]
fn valid_fp4_is_sound() {
    for zstd in [false, true] {
        let (bytes, _, _) = written(zstd);
        let (report, code) = verify(&format!("valid-{zstd}"), &bytes);
        assert_eq!(code, Some(0), "{report}");
        assert_eq!(report["sound"], true, "{report}");
        assert_eq!(report["unreadable"], serde_json::json!([]), "{report}");
    }
}

#[test]
fn fp4_with_a_wrong_digest_is_not_sound() {
    let (mut bytes, offset, _) = written(false);
    // The first byte's low nibble changes: the padding rule still holds, the digest does not.
    bytes[usize::try_from(offset).unwrap()] ^= 0x01;
    let (report, code) = verify("digest", &bytes);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["sound"], false, "{report}");
    assert!(problems(&report).contains("[digest]"), "{report}");
}

#[test]
fn fp4_with_a_padding_nibble_set_is_not_sound() {
    let (mut bytes, offset, len) = written(false);
    let last = usize::try_from(offset + len - 1).unwrap();
    assert_eq!(bytes[last], FP4[2]);
    bytes[last] |= 0x70;
    let (report, code) = verify("nibble", &bytes);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["sound"], false, "{report}");
    assert!(problems(&report).contains("[layout_data]"), "{report}");
    assert!(problems(&report).contains("nibble"), "{report}");
}

#[test]
fn fp4_with_a_broken_seek_table_is_not_sound() {
    let (mut bytes, offset, len) = written(true);
    // The stream's last four bytes are the seekable magic.
    let end = usize::try_from(offset + len).unwrap();
    bytes[end - 1] ^= 0xff;
    let (report, code) = verify("seek-table", &bytes);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["sound"], false, "{report}");
    assert!(problems(&report).contains("[encoding]"), "{report}");
    assert!(problems(&report).contains("seekable magic"), "{report}");
}

/// An object whose bytes could not be looked at (an encoding this reader does not decode) is
/// not called sound.
#[test]
fn what_cannot_be_read_is_not_sound() {
    let path = "fixtures/external/ztensor2/valid/view-unknown-encoding-refused.zt";
    let (report, code) = verify_path(Path::new(path));
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["sound"], false, "{report}");
    assert_eq!(report["unreadable"].as_array().map(Vec::len), Some(1), "{report}");
    let text = stdout(&ztensor(&["verify", path]));
    assert!(text.contains("not verified, 1 tensor unchecked"), "{text}");
    assert!(text.contains("cannot be read here"), "{text}");
}

/// An odd count of FP4 values (the last byte's high nibble padding) goes from zTensor 2 to
/// zTensor 2 as it is; safetensors ends a tensor on a whole byte and zTensor 1.2 has no FP4:
/// both refuse it by name, leaving nothing behind.
#[test]
fn fp4_converts_to_zt2_and_is_refused_where_it_has_no_form() {
    let d = scratch("unchecked-convert");
    let (bytes, _, _) = written(false);
    let path = d.join("fp4.zt");
    std::fs::write(&path, &bytes).unwrap();
    let copy = d.join("copy.zt");
    crate::tools::ok(&[
        "convert",
        crate::tools::arg(&path),
        crate::tools::arg(&copy),
        "--to",
        "2",
        "--zstd",
        "3",
    ]);
    let (report, code) = verify_path(&copy);
    assert_eq!((code, &report["sound"]), (Some(0), &serde_json::json!(true)), "{report}");
    let read = ztensor_v2::File::open(std::fs::read(&copy).unwrap(), ztensor_v2::MAX_MANIFEST)
        .expect("it opens");
    let data = read.read(0).expect("it reads");
    assert_eq!(
        (data.shape.as_slice(), data.components["data"].bytes.as_ref()),
        (&[5][..], &FP4[..])
    );
    let st = d.join("fp4.safetensors");
    let err =
        crate::tools::fails(&["convert", crate::tools::arg(&path), crate::tools::arg(&st)], 1);
    assert!(err.contains("5 elements of dtype F4") && err.contains("whole byte"), "{err}");
    let one = d.join("fp4-1.zt");
    let err =
        crate::tools::fails(&["convert", crate::tools::arg(&path), crate::tools::arg(&one)], 1);
    assert!(err.contains("f4_e2m1") && err.contains("`--to 2`"), "{err}");
    assert!(!st.exists() && !one.exists());
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2, "a temporary was left");
    std::fs::remove_dir_all(&d).unwrap();
}
