use super::*;
use crate::value::{CBOR_INT_MAX, CBOR_INT_MIN};

fn kind(bytes: &[u8]) -> ErrorKind {
    decode(bytes, 16).unwrap_err().kind()
}

#[test]
fn integers_at_the_edges() {
    assert_eq!(
        decode(&[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 4).unwrap(),
        Value::Integer(CBOR_INT_MAX)
    );
    assert_eq!(
        decode(&[0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 4).unwrap(),
        Value::Integer(CBOR_INT_MIN)
    );
    assert_eq!(
        encode(&Value::Integer(CBOR_INT_MIN)).unwrap(),
        [0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(encode(&Value::Integer(-1)).unwrap(), [0x20]);
    assert_eq!(encode(&Value::Integer(24)).unwrap(), [0x18, 24]);
    assert_eq!(
        encode(&Value::Integer(CBOR_INT_MAX + 1)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[test]
fn non_shortest_and_indefinite_forms_are_accepted() {
    // 0x18 0x05 is 5 in a needlessly long form; real encoders do emit such things.
    assert_eq!(decode(&[0x18, 0x05], 4).unwrap(), Value::Integer(5));
    // An indefinite map holding an indefinite text string: {"ab": 1}.
    let bytes = [0xbf, 0x7f, 0x61, b'a', 0x61, b'b', 0xff, 0x01, 0xff];
    assert_eq!(
        decode(&bytes, 4).unwrap(),
        Value::Map(vec![(Value::from("ab"), Value::Integer(1))])
    );
}

#[test]
fn malformed_inputs() {
    assert_eq!(kind(&[]), ErrorKind::CborSyntax);
    assert_eq!(kind(&[0x1c]), ErrorKind::CborSyntax); // reserved info 28
    assert_eq!(kind(&[0xff]), ErrorKind::CborSyntax); // stray break
    assert_eq!(kind(&[0x5f, 0x61, b'a', 0xff]), ErrorKind::CborSyntax); // text chunk in bytes
    assert_eq!(kind(&[0x62, 0xff, 0xfe]), ErrorKind::CborSyntax); // bad UTF-8
    assert_eq!(kind(&[0x9f, 0x01]), ErrorKind::CborSyntax); // unterminated
    assert_eq!(kind(&[0xf8, 0x10]), ErrorKind::CborSyntax); // simple value < 32 in two bytes
    assert_eq!(kind(&[0x1f]), ErrorKind::CborSyntax); // indefinite integer
    assert_eq!(kind(&[0xa1, 0x01, 0xff]), ErrorKind::CborSyntax); // break as a map value
    assert_eq!(kind(&[0xa0, 0x00]), ErrorKind::CborTrailingBytes);
    assert_eq!(kind(&[0xa2, 0x01, 0x02, 0x01, 0x03]), ErrorKind::CborDuplicateKey);
}

#[test]
fn a_duplicate_key_is_reported_at_its_own_offset() {
    let at = |bytes: &[u8]| decode(bytes, 8).unwrap_err().offset();
    // {1: 2, 1: 3}: the second key is byte 3.
    assert_eq!(at(&[0xa2, 0x01, 0x02, 0x01, 0x03]), Some(3));
    // ["x", {_ "a": [1, 2], "b": 0, "a": 1}]: the map starts at byte 3, the repeated "a"
    // at byte 3 + 1 + 2 + 3 + 2 + 1 = 12.
    let nested = [
        0x82, 0x61, b'x', 0xbf, 0x61, b'a', 0x82, 0x01, 0x02, 0x61, b'b', 0x00, 0x61, b'a', 0x01,
        0xff,
    ];
    assert_eq!(at(&nested), Some(12));
    // Twenty text keys (a hashed duplicate check), the last repeating the first.
    let mut big = vec![0xb4];
    for i in 0..19u8 {
        big.extend_from_slice(&[0x61, b'a' + i, 0x00]);
    }
    let last = big.len();
    big.extend_from_slice(&[0x61, b'a', 0x00]);
    assert_eq!(at(&big), Some(last as u64));
}

#[test]
fn hostile_lengths_do_not_allocate() {
    // An array claiming 2^63 items, a byte string claiming 2^64 - 1 bytes.
    let err = decode(&[0x9b, 0x80, 0, 0, 0, 0, 0, 0, 0], 4).unwrap_err();
    assert_eq!((err.kind(), err.offset()), (ErrorKind::CborSyntax, Some(0)));
    assert_eq!(
        kind(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ErrorKind::CborSyntax
    );
    assert_eq!(kind(&[0xbb, 0, 0, 0, 0, 0, 0, 0, 1]), ErrorKind::CborSyntax);
}

#[test]
fn the_value_budget_counts_every_item() {
    // {"a": [0, 0, 0]}: the map, its key, the array and three items are six values.
    let bytes = [0xa1, 0x61, b'a', 0x83, 0, 0, 0];
    assert!(decode_bounded(&bytes, 8, 6).is_ok());
    let err = decode_bounded(&bytes, 8, 5).unwrap_err();
    // Refused at the sixth value (the last zero, byte 6), before it is built.
    assert_eq!((err.kind(), err.offset()), (ErrorKind::ManifestTooLarge, Some(6)));
    assert!(err.to_string().contains("max_manifest_values"), "{err}");
    // An indefinite-length array of a million items costs the same as a definite one.
    let mut many = vec![0x9f];
    many.extend(std::iter::repeat_n(0u8, 1_000_000));
    many.push(0xff);
    assert!(decode_bounded(&many, 8, 1_000_001).is_ok());
    assert_eq!(decode_bounded(&many, 8, 1_000).unwrap_err().kind(), ErrorKind::ManifestTooLarge);
}

#[test]
fn depth_limit_counts_containers() {
    let nested = |n: usize| {
        let mut b = vec![0x81; n];
        b.push(0x00);
        b
    };
    assert!(decode(&nested(4), 4).is_ok());
    let err = decode(&nested(5), 4).unwrap_err();
    assert_eq!((err.kind(), err.offset()), (ErrorKind::CborDepth, Some(4)));
}

#[test]
fn deterministic_map_order_and_floats() {
    let map = Value::Map(vec![
        (Value::from("shape"), Value::Integer(1)),
        (Value::from("dtype"), Value::Integer(2)),
        (Value::from("format"), Value::Integer(3)),
    ]);
    // Shorter keys sort first because the length is part of the encoded key.
    let bytes = encode(&map).unwrap();
    let expected = [
        &[0xa3u8][..],
        &[0x65],
        b"dtype",
        &[0x02],
        &[0x65],
        b"shape",
        &[0x01],
        &[0x66],
        b"format",
        &[0x03],
    ]
    .concat();
    assert_eq!(bytes, expected);
    assert_eq!(encode(&Value::Float(1.0)).unwrap(), [0xf9, 0x3c, 0x00]);
    assert_eq!(encode(&Value::Float(0.1)).unwrap()[0], 0xfb);
    assert_eq!(encode(&Value::Float(f64::from(0.1f32))).unwrap()[0], 0xfa);
    assert_eq!(encode(&Value::Float(f64::NAN)).unwrap(), [0xf9, 0x7e, 0x00]);
    assert_eq!(encode(&Value::Float(-0.0)).unwrap(), [0xf9, 0x80, 0x00]);
}
