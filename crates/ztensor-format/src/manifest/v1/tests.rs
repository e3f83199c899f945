use super::*;
use crate::framing::Container;

/// The direct path serves every field of the common shape, including nulls, attributes and
/// unknown keys at each level (the property test only checks that it agrees when it answers).
#[test]
fn direct_decoding_serves_the_common_shape() {
    let mut c = Component::new(DType::F32, 64, 16);
    c.digest = Some(Digest::parse("sha256:00"));
    c.encoding = Encoding::Zstd;
    c.uncompressed_length = Some(40);
    c.logical_type = Some(LogicalType::from_name("complex64"));
    c.extra_mut().push(("x_c".into(), Value::from(1u64)));
    let mut o = Object::new("w", vec![2, 5], Format::Dense).with_component("data", c);
    o.attributes = Some(Box::new(
        crate::Attributes::try_from(crate::text_map([("k", Value::from("v"))])).unwrap(),
    ));
    o.extra_mut().push(("x_o".into(), Value::Array(vec![Value::Null])));
    let mut m = Manifest::new(Version::V1_2);
    m.objects.push(o);
    m.objects.push(Object::new("s", vec![], Format::Unknown("mine".into())));
    m.attributes =
        Some(crate::Attributes::try_from(crate::text_map([("lr", Value::from(0.5))])).unwrap());
    m.extra.push(("x_root".into(), Value::from("r")));
    let bytes = m.encode().unwrap();
    let direct = decode_direct(&bytes, &Limits::default()).expect("the direct path answers");
    assert_eq!(
        direct,
        Manifest::decode_general(Container::V1, &bytes, &Limits::default()).unwrap()
    );
    assert_eq!(direct.objects.len(), 2);

    // Nulls for the optional fields, written by hand: {"version": "1.1.0", "attributes":
    // null, "objects": {"a": {"shape": [], "format": "dense", "attributes": null,
    // "components": {"data": {"dtype": "u8", "type": null, "offset": 0, "length": 1,
    // "uncompressed_length": null, "encoding": null, "digest": null}}}}}
    let value = crate::text_map([
        ("version", Value::from("1.1.0")),
        ("attributes", Value::Null),
        (
            "objects",
            crate::text_map([(
                "a",
                crate::text_map([
                    ("shape", Value::Array(vec![])),
                    ("format", Value::from("dense")),
                    ("attributes", Value::Null),
                    (
                        "components",
                        crate::text_map([(
                            "data",
                            crate::text_map([
                                ("dtype", Value::from("u8")),
                                ("type", Value::Null),
                                ("offset", Value::from(0u64)),
                                ("length", Value::from(1u64)),
                                ("uncompressed_length", Value::Null),
                                ("encoding", Value::Null),
                                ("digest", Value::Null),
                            ]),
                        )]),
                    ),
                ]),
            )]),
        ),
    ]);
    let bytes = crate::cbor::encode(&value).unwrap();
    let direct = decode_direct(&bytes, &Limits::default()).expect("the direct path answers");
    assert_eq!(
        direct,
        Manifest::decode_general(Container::V1, &bytes, &Limits::default()).unwrap()
    );
    assert_eq!(direct.objects[0].components["data"], Component::new(DType::U8, 0, 1));

    // The same manifest with every map and array of indefinite length (each definite head
    // of a map or an array becomes 0xbf / 0x9f, a break after its items), as real writers
    // emit: served here too, not left to the tree.
    fn endless(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Map(entries) => {
                out.push(0xbf);
                for (k, v) in entries {
                    endless(k, out);
                    endless(v, out);
                }
                out.push(0xff);
            }
            Value::Array(items) => {
                out.push(0x9f);
                items.iter().for_each(|v| endless(v, out));
                out.push(0xff);
            }
            other => out.extend(crate::cbor::encode(other).unwrap()),
        }
    }
    let mut open = Vec::new();
    endless(&value, &mut open);
    let direct = decode_direct(&open, &Limits::default()).expect("the direct path answers");
    assert_eq!(direct, Manifest::decode_general(Container::V1, &open, &Limits::default()).unwrap());

    // A repeated object name is left to the general decoder, which names the rule.
    let enc = |v: &Value| crate::cbor::encode(v).unwrap();
    let object = enc(&value.as_map().unwrap()[2].1.as_map().unwrap()[0].1);
    let twice = [
        &[0xa2][..],
        &enc(&Value::from("version")),
        &enc(&Value::from("1.2.0")),
        &enc(&Value::from("objects")),
        &[0xa2],
        &enc(&Value::from("a")),
        &object,
        &enc(&Value::from("a")),
        &object,
    ]
    .concat();
    assert!(decode_direct(&twice, &Limits::default()).is_none());
    let general = Manifest::decode(Container::V1, &twice, &Limits::default()).unwrap_err();
    assert_eq!(general.kind(), ErrorKind::CborDuplicateKey);

    // Names in neither sorted order: a repeat apart from its first is still found, and
    // without one the direct path answers.
    let named = |names: &[&str]| {
        let mut bytes = [
            &[0xa2][..],
            &enc(&Value::from("version")),
            &enc(&Value::from("1.2.0")),
            &enc(&Value::from("objects")),
            &[0xa0 + u8::try_from(names.len()).unwrap()],
        ]
        .concat();
        for name in names {
            bytes.extend_from_slice(&enc(&Value::from(*name)));
            bytes.extend_from_slice(&object);
        }
        bytes
    };
    // "bb" after "c" breaks bytewise order, "a" after "bb" the shorter-first order.
    let repeated = named(&["c", "bb", "a", "c"]);
    assert!(decode_direct(&repeated, &Limits::default()).is_none());
    let general = Manifest::decode(Container::V1, &repeated, &Limits::default()).unwrap_err();
    assert_eq!(general.kind(), ErrorKind::CborDuplicateKey);
    let unsorted = named(&["c", "bb", "a", "d"]);
    let direct = decode_direct(&unsorted, &Limits::default()).expect("the direct path answers");
    let names: Vec<&str> = direct.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["c", "bb", "a", "d"]);
    // Either sorted order alone needs no index, and finds no repeat where there is none.
    for sorted in [&["a", "bb", "c"][..], &["a", "c", "bb"]] {
        assert!(decode_direct(&named(sorted), &Limits::default()).is_some(), "{sorted:?}");
    }
}

/// Encoding object by object, in blocks, gives the bytes of the whole-tree deterministic
/// encoder, whatever order the objects were added in and however the blocks fall.
#[test]
fn a_manifest_encoded_in_blocks_is_the_manifest_encoded_whole() {
    let mut m = Manifest::new(Version::V1_2);
    // Names of every length class (the order is shorter first), added scrambled, and
    // enough of them to fill several blocks.
    for i in 0..3000u64 {
        let name = match i % 3 {
            0 => "k".repeat((i % 40) as usize) + &i.to_string(),
            1 => format!("z{}", 5000 - i),
            _ => "é".repeat((i % 300) as usize) + &i.to_string(),
        };
        let mut c = Component::new(DType::U8, 64 * i, i);
        c.digest = (i % 2 == 0).then_some(Digest::Crc32c(u32::try_from(i).unwrap()));
        let mut o = Object::new(name, vec![i], Format::Dense).with_component("data", c);
        if i % 7 == 0 {
            o = o.with_attributes(Some(
                crate::Attributes::try_from(crate::text_map([("i", Value::from(i))])).unwrap(),
            ));
        }
        m.objects.push(o);
    }
    m.attributes =
        Some(crate::Attributes::try_from(crate::text_map([("lr", Value::from(0.5))])).unwrap());
    m.extra.push(("x_root".into(), Value::from("r")));

    let whole = Value::Map(vec![
        (Value::from("version"), Value::from("1.2.0")),
        (Value::from("attributes"), m.attributes.clone().unwrap().to_value()),
        (Value::from("x_root"), Value::from("r")),
        (
            Value::from("objects"),
            Value::Map(
                m.objects
                    .iter()
                    .map(|o| {
                        let mut entries = object_value(o).unwrap();
                        if let Some(a) = o.attributes() {
                            entries.push((Value::from("attributes"), a.to_value()));
                        }
                        (Value::Text(o.name.clone()), Value::Map(entries))
                    })
                    .collect(),
            ),
        ),
    ]);
    let expected = crate::cbor::encode(&whole).unwrap();
    let mut blocks = Vec::new();
    let len = m
        .encode_in_blocks(&mut |block| {
            blocks.push(block.to_vec());
            Ok(())
        })
        .unwrap();
    assert!(blocks.len() > 2, "{} blocks", blocks.len());
    assert_eq!(len, expected.len() as u64);
    assert!(blocks.concat() == expected, "differs from the whole-tree encoding");
    assert!(m.encode().unwrap() == expected);

    // An error from the receiver stops the encoding and comes back as it was.
    let mut calls = 0;
    let err = m
        .encode_in_blocks(&mut |_| {
            calls += 1;
            Err(Error::new(ErrorKind::InvalidInput, "disk full"))
        })
        .unwrap_err();
    assert_eq!((calls, err.to_string().contains("disk full")), (1, true), "{err}");

    // A name given twice, however far apart, is refused before anything is handed on.
    let first = m.objects[10].name.clone();
    m.objects.push(Object::new(first, vec![], Format::Dense));
    let mut handed = 0;
    let err = m
        .encode_in_blocks(&mut |_| {
            handed += 1;
            Ok(())
        })
        .unwrap_err();
    assert_eq!((err.kind(), handed), (ErrorKind::DuplicateName, 0));
}

#[test]
fn version_strings() {
    assert_eq!(parse_version("1.1.0").unwrap(), Version::V1_1);
    assert_eq!(parse_version("1.0").unwrap(), Version::V1_1);
    assert_eq!(parse_version("1").unwrap(), Version::V1_1);
    assert_eq!(parse_version("1.2.0").unwrap(), Version::V1_2);
    assert_eq!(parse_version("1.10.3").unwrap(), Version::V1_2);
    assert_eq!(parse_version("1.99999999999999999999999").unwrap(), Version::V1_2);
    assert_eq!(parse_version("1.02").unwrap(), Version::V1_2);
    assert_eq!(parse_version("1.01").unwrap(), Version::V1_1);
    for bad in ["2.0.0", "", "v1.2", "1.x", "01.2", "0.1.0"] {
        assert_eq!(
            parse_version(bad).unwrap_err().kind(),
            ErrorKind::VersionUnsupported,
            "{bad:?}"
        );
    }
}
