//! Property tests: decode(encode(m)) == m for generated manifests of every version, encoding
//! is deterministic, and the CBOR codec agrees with an independent implementation.

use proptest::prelude::*;
use ztensor_format::manifest::v0_1::STANDARD_KEYS;
use ztensor_format::{
    Attributes, ByteOrder, CBOR_INT_MAX, CBOR_INT_MIN, Component, Container, DType, Digest,
    Encoding, Format, Limits, LogicalType, Manifest, Object, Packing, StorageType, Value, Version,
    cbor,
};

fn config() -> ProptestConfig {
    ProptestConfig { cases: 96, ..ProptestConfig::default() }
}

fn dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => common_leaf(),
        1 => Just(Value::Undefined),
        1 => prop_oneof![0u8..20, 32u8..=255].prop_map(Value::Simple),
    ]
}

/// Leaves inside `ciborium`'s data model, which has no `undefined` and no other simple values.
fn common_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (CBOR_INT_MIN..=CBOR_INT_MAX).prop_map(Value::Integer),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::Float),
        any::<f32>().prop_map(|f| Value::Float(f64::from(f))),
        ".{0,12}".prop_map(Value::Text),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(Value::Bytes),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    nest(leaf().boxed())
}

fn nest(leaf: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..5)
                .prop_map(|entries| Value::Map(dedup(entries))),
            (0u64..100_000, inner).prop_map(|(t, v)| Value::Tag(t, Box::new(v))),
        ]
    })
}

/// Keeps the first of equal keys: maps never repeat a key.
fn dedup(entries: Vec<(Value, Value)>) -> Vec<(Value, Value)> {
    let mut seen = std::collections::HashSet::new();
    entries.into_iter().filter(|(k, _)| seen.insert(cbor::encode(k).unwrap())).collect()
}

fn attributes() -> impl Strategy<Value = Option<Attributes>> {
    proptest::option::of(proptest::collection::vec(("[a-z_]{1,8}", value()), 0..4).prop_map(|e| {
        let map = Value::Map(dedup(e.into_iter().map(|(k, v)| (Value::Text(k), v)).collect()));
        Attributes::try_from(map).unwrap()
    }))
}

fn extras(known: &'static [&'static str]) -> impl Strategy<Value = Vec<(String, Value)>> {
    proptest::collection::btree_map("x_[a-z]{1,6}", value(), 0..3)
        .prop_map(move |m| m.into_iter().filter(|(k, _)| !known.contains(&k.as_str())).collect())
}

fn digest() -> impl Strategy<Value = Option<Digest>> {
    proptest::option::of(prop_oneof![
        any::<u32>().prop_map(Digest::Crc32c),
        any::<[u8; 32]>().prop_map(|b| Digest::Sha256(Box::new(b))),
        any::<[u8; 32]>().prop_map(|b| Digest::Blake3(Box::new(b))),
        "xxh3:[0-9a-f]{16}".prop_map(|s| Digest::Unknown(s.into())),
        "sha256:[g-z]{4}".prop_map(|s| Digest::Malformed(s.into())),
    ])
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop_oneof![
        Just(Encoding::Raw),
        Just(Encoding::Zstd),
        "lz[0-9]".prop_map(|s| Encoding::Unknown(s.into()))
    ]
}

fn logical(version: Version) -> BoxedStrategy<(StorageType, Option<LogicalType>)> {
    let plain = dtype().prop_map(|d| (StorageType::Known(d), None));
    let unknown_dtype = "q[0-9]{1,2}".prop_map(|s| (StorageType::Unknown(s.into()), None));
    match version {
        // 1.1 files may carry `type` keys too (a 1.2 appender keeps "1.1.0"), so both minors
        // must round-trip any logical type over any dtype.
        Version::V1_2 | Version::V1_1 => prop_oneof![
            4 => plain,
            1 => unknown_dtype,
            2 => (dtype(), proptest::sample::select(vec![
                LogicalType::F8E4M3Fn, LogicalType::F8E5M2, LogicalType::F8E4M3Fnuz,
                LogicalType::F8E5M2Fnuz, LogicalType::Complex64, LogicalType::Complex128,
                LogicalType::Unknown("f4_e2m1".into()),
            ]))
            .prop_map(|(d, t)| (StorageType::Known(d), Some(t))),
        ]
        .boxed(),
        Version::V0_1 => prop_oneof![4 => plain, 1 => "q[0-9]{1,2}".prop_map(|s| (StorageType::Unknown(s.into()), None))].boxed(),
    }
}

const COMPONENT_KEYS: &[&str] =
    &["dtype", "type", "offset", "length", "uncompressed_length", "encoding", "digest"];
const OBJECT_KEYS: &[&str] = &["shape", "format", "attributes", "components"];
const ROOT_KEYS: &[&str] = &["version", "attributes", "objects"];

fn v1_component(version: Version) -> impl Strategy<Value = Component> {
    (
        logical(version),
        any::<u64>(),
        any::<u64>(),
        proptest::option::of(any::<u64>()),
        encoding(),
        digest(),
        extras(COMPONENT_KEYS),
    )
        .prop_map(
            |(
                (dtype, logical_type),
                offset,
                length,
                uncompressed_length,
                encoding,
                digest,
                extra,
            )| {
                let mut c = Component::new(dtype, offset, length);
                c.logical_type = logical_type;
                c.uncompressed_length = uncompressed_length;
                c.encoding = encoding;
                c.digest = digest;
                *c.extra_mut() = extra;
                c
            },
        )
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Dense),
        Just(Format::SparseCsr),
        Just(Format::SparseCoo),
        Just(Format::QuantizedGroup),
        "blocked_[a-z]{1,3}".prop_map(|s| Format::Unknown(s.into())),
    ]
}

fn v1_manifest(version: Version) -> impl Strategy<Value = Manifest> {
    let object = (
        proptest::collection::vec(any::<u64>(), 0..5),
        format(),
        attributes(),
        proptest::collection::btree_map("[a-z_]{1,10}", v1_component(version), 0..4),
        extras(OBJECT_KEYS),
    );
    (proptest::collection::btree_map(".{0,10}", object, 0..6), attributes(), extras(ROOT_KEYS))
        .prop_map(move |(objects, attributes, extra)| Manifest {
            version,
            version_string: version.default_version_string().map(str::to_owned),
            attributes,
            objects: objects
                .into_iter()
                .map(|(name, (shape, format, attributes, components, extra))| {
                    let mut o = Object::new(name, shape, format).with_attributes(attributes);
                    o.components = components.into_iter().collect();
                    *o.extra_mut() = extra;
                    o
                })
                .collect(),
            extra,
        })
}

fn v0_object() -> impl Strategy<Value = Object> {
    let layout = prop_oneof![
        Just((Format::Dense, Packing::Split)),
        Just((Format::SparseCsr, Packing::V0Single)),
        Just((Format::SparseCoo, Packing::V0Single)),
        "blocked[a-z]{0,3}".prop_map(|s| (Format::Unknown(s.into()), Packing::V0Single)),
    ];
    let byte_order = prop_oneof![
        Just(ByteOrder::Little),
        Just(ByteOrder::Big),
        "mid[a-z]{0,3}".prop_map(|s| ByteOrder::Unknown(s.into()))
    ];
    let custom = proptest::option::of(
        proptest::collection::btree_map("[a-z_]{1,12}", value(), 1..4).prop_map(|m| {
            Value::Map(
                m.into_iter()
                    .filter(|(k, _)| !STANDARD_KEYS.contains(&k.as_str()))
                    .map(|(k, v)| (Value::Text(k), v))
                    .collect(),
            )
        }),
    )
    .prop_map(|a| {
        a.filter(|m| m.as_map().is_some_and(|e| !e.is_empty()))
            .map(|m| Attributes::try_from(m).unwrap())
    });
    (
        ".{0,10}",
        proptest::collection::vec(any::<u64>(), 0..4),
        layout,
        logical(Version::V0_1),
        any::<u64>(),
        any::<u64>(),
        encoding(),
        digest(),
        byte_order,
        custom,
    )
        .prop_map(
            |(
                name,
                shape,
                (format, packing),
                (dtype, _),
                offset,
                length,
                encoding,
                digest,
                byte_order,
                attributes,
            )| {
                let mut c = Component::new(dtype, offset, length);
                (c.encoding, c.digest) = (encoding, digest);
                c.set_byte_order(byte_order);
                let mut object = Object::new(name, shape, format).with_component("data", c);
                object.packing = packing;
                object.attributes = attributes.map(Box::new);
                object
            },
        )
}

fn v0_manifest() -> impl Strategy<Value = Manifest> {
    proptest::collection::vec(v0_object(), 0..6).prop_map(|objects| {
        let mut seen = std::collections::HashSet::new();
        let objects = objects.into_iter().filter(|o| seen.insert(o.name.clone())).collect();
        Manifest {
            version: Version::V0_1,
            version_string: None,
            attributes: None,
            objects,
            extra: Vec::new(),
        }
    })
}

/// Sorts every map the way deterministic encoding does (by encoded key bytes), so a generated
/// model can be compared with its decoded form. Written independently of the encoder: text keys
/// order by length, then bytes.
/// Edits the `map`-th map of `tree` (in pre-order, modulo the count): `how` 0 repeats entry
/// `entry`, 1 removes it, 2 gives it the value `leaf`.
fn edit_map(tree: &mut Value, how: u8, map: usize, entry: usize, leaf: Value) {
    fn maps(v: &Value) -> usize {
        match v {
            Value::Map(entries) => 1 + entries.iter().map(|(_, v)| maps(v)).sum::<usize>(),
            Value::Array(items) => items.iter().map(maps).sum(),
            Value::Tag(_, v) => maps(v),
            _ => 0,
        }
    }
    fn nth<'v>(v: &'v mut Value, n: &mut usize) -> Option<&'v mut Vec<(Value, Value)>> {
        match v {
            Value::Map(entries) => {
                if *n == 0 {
                    return Some(entries);
                }
                *n -= 1;
                entries.iter_mut().find_map(|(_, v)| nth(v, n))
            }
            Value::Array(items) => items.iter_mut().find_map(|v| nth(v, n)),
            Value::Tag(_, v) => nth(v, n),
            _ => None,
        }
    }
    let count = maps(tree);
    if count == 0 {
        return;
    }
    let mut n = map % count;
    let Some(entries) = nth(tree, &mut n) else { return };
    if entries.is_empty() {
        return;
    }
    let i = entry % entries.len();
    match how {
        0 => {
            let copy = entries[i].clone();
            entries.push(copy);
        }
        1 => {
            entries.remove(i);
        }
        _ => entries[i].1 = leaf,
    }
}

/// CBOR of `v` exactly as given: map entries in their order, repeats kept (the crate's encoder
/// sorts and refuses repeats, as a writer must).
fn encode_as_is(v: &Value, out: &mut Vec<u8>) {
    encode_as_is_with(v, out, 0, &mut 0);
}

/// `v` encoded as it is (entries in their order, no checks), the maps and arrays whose bit in
/// `indefinite` is set (counted in the order they open, modulo 8) with indefinite lengths.
fn encode_as_is_with(v: &Value, out: &mut Vec<u8>, indefinite: u8, opened: &mut u32) {
    fn head(out: &mut Vec<u8>, major: u8, n: u64) {
        match n {
            0..=23 => out.push(major << 5 | n as u8),
            24..=0xff => out.extend_from_slice(&[major << 5 | 24, n as u8]),
            _ => {
                out.push(major << 5 | 27);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
    }
    let mut open = |out: &mut Vec<u8>, major: u8, n: usize| {
        let endless = indefinite >> (*opened % 8) & 1 == 1;
        *opened += 1;
        match endless {
            true => out.push(major << 5 | 31),
            false => head(out, major, n as u64),
        }
        endless
    };
    match v {
        Value::Map(entries) => {
            let endless = open(out, 5, entries.len());
            for (k, v) in entries {
                encode_as_is_with(k, out, indefinite, opened);
                encode_as_is_with(v, out, indefinite, opened);
            }
            if endless {
                out.push(0xff);
            }
        }
        Value::Array(items) => {
            let endless = open(out, 4, items.len());
            items.iter().for_each(|v| encode_as_is_with(v, out, indefinite, opened));
            if endless {
                out.push(0xff);
            }
        }
        Value::Tag(tag, v) => {
            head(out, 6, *tag);
            encode_as_is_with(v, out, indefinite, opened);
        }
        other => out.extend_from_slice(&cbor::encode(other).unwrap()),
    }
}

fn canonical_value(v: Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.into_iter().map(canonical_value).collect()),
        Value::Map(entries) => {
            let mut entries: Vec<_> = entries
                .into_iter()
                .map(|(k, v)| (canonical_value(k), canonical_value(v)))
                .collect();
            entries.sort_by_key(|(k, _)| cbor::encode(k).unwrap());
            Value::Map(entries)
        }
        Value::Tag(t, inner) => Value::Tag(t, Box::new(canonical_value(*inner))),
        other => other,
    }
}

fn text_key_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes()))
}

fn canonical(mut m: Manifest) -> Manifest {
    let sort_extra = |e: &mut Vec<(String, Value)>| {
        e.sort_by(|a, b| text_key_order(&a.0, &b.0));
        for (_, v) in e.iter_mut() {
            *v = canonical_value(std::mem::replace(v, Value::Null));
        }
    };
    sort_extra(&mut m.extra);
    if m.version != Version::V0_1 {
        m.objects.sort_by(|a, b| text_key_order(&a.name, &b.name));
    }
    for o in &mut m.objects {
        sort_extra(o.extra_mut());
        for c in o.components.values_mut() {
            sort_extra(c.extra_mut());
        }
    }
    m
}

fn check_round_trip(m: Manifest) -> Result<(), TestCaseError> {
    let bytes = m.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let limits = Limits::default();
    let decoded = Manifest::decode(m.version.container(), &bytes, &limits)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&decoded, &canonical(m));
    // Deterministic: encoding the decoded model reproduces the bytes.
    prop_assert_eq!(decoded.encode().unwrap(), bytes);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn v1_2_round_trip(m in v1_manifest(Version::V1_2)) {
        check_round_trip(m)?;
    }

    #[test]
    fn v1_1_round_trip(m in v1_manifest(Version::V1_1)) {
        check_round_trip(m)?;
    }

    #[test]
    fn v0_1_round_trip(m in v0_manifest()) {
        check_round_trip(m)?;
    }

    /// Our deterministic bytes decode to the same item under an independent decoder, and an
    /// independent encoder's bytes decode to the same item under ours.
    #[test]
    fn cbor_agrees_with_ciborium(v in nest(common_leaf().boxed())) {
        let ours = cbor::encode(&v).unwrap();
        let theirs: ciborium::value::Value = ciborium::from_reader(&ours[..]).unwrap();
        let mut re = Vec::new();
        ciborium::into_writer(&theirs, &mut re).unwrap();
        let back = cbor::decode(&re, 64).unwrap();
        prop_assert_eq!(canonical_value(back), canonical_value(v));
    }

    /// Attributes checked and re-encoded from the bytes of a file hold exactly what the tree
    /// decoder reads from them (and print as it prints); bytes it refuses are refused with the
    /// same fault, offset and message.
    #[test]
    fn attributes_keep_what_the_tree_decoder_reads(
        v in nest(leaf().boxed()),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let mut bytes = Vec::new();
        encode_as_is(&Value::Map(vec![(Value::from("a"), v), (Value::Integer(-3), Value::Null)]), &mut bytes);
        for (at, byte) in edits {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        match (cbor::decode(&bytes, 8), Attributes::from_cbor(&bytes, 8)) {
            (Ok(tree), Ok(attributes)) => {
                prop_assert_eq!(attributes.to_value(), canonical_value(tree.clone()));
                prop_assert_eq!(attributes.to_string(), canonical_value(tree.clone()).to_string());
                prop_assert_eq!(&Attributes::try_from(tree).unwrap(), &attributes);
            }
            (Ok(tree), Err(e)) => {
                prop_assert!(tree.as_map().is_none());
                prop_assert_eq!(e.kind(), ztensor_format::ErrorKind::AttributesNotAMap);
            }
            (Err(tree), Err(e)) if tree.kind() == ztensor_format::ErrorKind::CborTrailingBytes => {
                prop_assert_eq!((tree.kind(), tree.offset()), (e.kind(), e.offset()));
            }
            (Err(tree), Err(e)) => {
                prop_assert_eq!((tree.kind(), tree.offset(), tree.to_string()), (e.kind(), e.offset(), e.to_string()));
            }
            (Err(tree), Ok(_)) => prop_assert!(false, "the tree decoder refuses: {tree}"),
        }
    }

    /// Arbitrary bytes never panic the decoder, whatever the container.
    #[test]
    fn decoder_survives_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        for container in [Container::V0_1, Container::V1] {
            let _ = Manifest::decode(container, &bytes, &Limits::default());
        }
    }
}

proptest! {
    // Cheap cases (small manifests, no I/O), and the planted-bug checks want many of them.
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// v1.x manifests are decoded directly from their bytes when they have the common shape, and
    /// through the general value tree otherwise; the two agree on every input: valid manifests,
    /// and the same manifests with map entries repeated, removed or given other values, bytes
    /// overwritten or cut short, under limits near the content's size, with any of their maps
    /// and arrays given indefinite lengths.
    #[test]
    fn direct_decoding_agrees_with_the_general_decoder(
        m in prop_oneof![v1_manifest(Version::V1_2), v1_manifest(Version::V1_1)],
        indefinite in any::<u8>(),
        edits in proptest::collection::vec((0u8..3, any::<usize>(), any::<usize>(), leaf()), 0..3),
        bytes_edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..2),
        cut in proptest::option::of(any::<usize>()),
        limits in (
            proptest::option::of(3usize..8),
            proptest::option::of(0usize..5),
            proptest::option::of(0usize..7),
            proptest::option::of(0usize..11),
            proptest::option::of(0u64..60),
        ),
    ) {
        direct_agrees(Container::V1, &m, edits, indefinite, bytes_edits, cut, limits)?;
    }

    /// v0.1 manifests are decoded tensor map by tensor map when nothing is unusual, and through
    /// the general value tree otherwise; the two agree on valid manifests and on the same
    /// manifests edited, overwritten or cut short, under tight limits.
    #[test]
    fn direct_v0_1_decoding_agrees_with_the_general_decoder(
        m in v0_manifest(),
        indefinite in any::<u8>(),
        edits in proptest::collection::vec((0u8..3, any::<usize>(), any::<usize>(), leaf()), 0..3),
        bytes_edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..2),
        cut in proptest::option::of(any::<usize>()),
        limits in (
            proptest::option::of(1usize..6),
            proptest::option::of(0usize..5),
            proptest::option::of(0usize..4),
            proptest::option::of(0usize..11),
            proptest::option::of(0u64..60),
        ),
    ) {
        direct_agrees(Container::V0_1, &m, edits, indefinite, bytes_edits, cut, limits)?;
    }
}

type Edits = Vec<(u8, usize, usize, Value)>;
type TightLimits = (Option<usize>, Option<usize>, Option<usize>, Option<usize>, Option<u64>);

/// `m`'s manifest with its map entries `edits`-ed, the maps and arrays `indefinite` picks
/// given indefinite lengths, bytes overwritten and `cut` short, decoded under `limits`
/// directly and through the general value tree: both give the same result.
fn direct_agrees(
    container: Container,
    m: &Manifest,
    edits: Edits,
    indefinite: u8,
    bytes_edits: Vec<(usize, u8)>,
    cut: Option<usize>,
    limits: TightLimits,
) -> Result<(), TestCaseError> {
    let mut tree = cbor::decode(&m.encode().unwrap(), 64).unwrap();
    for (how, map, entry, leaf) in edits {
        edit_map(&mut tree, how, map, entry, leaf);
    }
    let mut bytes = Vec::new();
    encode_as_is_with(&tree, &mut bytes, indefinite, &mut 0);
    for (at, byte) in bytes_edits {
        let at = at % bytes.len();
        bytes[at] = byte;
    }
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    let mut tight = Limits::default();
    let (depth, rank, objects, name, values) = limits;
    tight.max_manifest_values = values.unwrap_or(tight.max_manifest_values);
    tight.max_cbor_depth = depth.unwrap_or(tight.max_cbor_depth);
    tight.max_rank = rank.unwrap_or(tight.max_rank);
    tight.max_objects = objects.unwrap_or(tight.max_objects);
    tight.max_name_len = name.unwrap_or(tight.max_name_len);
    let direct = Manifest::decode(container, &bytes, &tight);
    let general = Manifest::decode_general(container, &bytes, &tight);
    prop_assert_eq!(format!("{direct:?}"), format!("{general:?}"));
    Ok(())
}

#[test]
fn unknown_fields_survive_a_round_trip() {
    let mut c = Component::new(DType::F32, 64, 16);
    c.extra_mut().push(("x_note".into(), Value::from("kept")));
    let mut o = Object::new("w", vec![4], Format::Dense).with_component("data", c);
    o.extra_mut().push(("x_obj".into(), Value::from(1u64)));
    let mut m = Manifest::new(Version::V1_2);
    m.objects.push(o);
    let decoded =
        Manifest::decode(Container::V1, &m.encode().unwrap(), &Limits::default()).unwrap();
    assert_eq!(decoded, m);
}
