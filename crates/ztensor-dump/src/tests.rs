use super::*;

#[test]
fn cbor_kinds_map_to_the_documented_json() {
    let v = Value::Map(vec![
        (Value::from("i"), Value::Integer(-3)),
        (Value::from("big"), Value::Integer(-(1i128 << 64))),
        (Value::from("f"), Value::Float(3.0)),
        (Value::from("nan"), Value::Float(f64::NAN)),
        (Value::from("b"), Value::Bytes(vec![0, 255])),
        (Value::from("t"), Value::Tag(1, Box::new(Value::Integer(5)))),
    ]);
    let text = cbor_to_json(&v).to_string();
    assert_eq!(
        text,
        r#"{"i":-3,"big":{"$int":"-18446744073709551616"},"f":3.0,"nan":{"$float":"NaN"},"b":{"$bytes":"00ff"},"t":{"$tag":1,"value":5}}"#
    );
    let m = Value::Map(vec![(Value::Integer(1), Value::from("x"))]);
    assert_eq!(cbor_to_json(&m).to_string(), r#"{"$map":[[1,"x"]]}"#);
}

#[test]
fn streamed_attributes_print_as_the_tree_does() {
    let every_kind = vec![
        Value::Integer(-3),
        Value::Integer(u64::MAX.into()),
        Value::Integer(-(1i128 << 64)),
        Value::Float(0.1),
        Value::Float(f64::NEG_INFINITY),
        Value::Float(f64::NAN),
        Value::Bytes(vec![0, 255]),
        Value::from("t\n\u{1b}"),
        Value::Tag(1, Box::new(Value::Integer(5))),
        Value::Bool(true),
        Value::Null,
        Value::Undefined,
        Value::Simple(7),
        Value::Map(vec![(Value::Integer(1), Value::from("x"))]),
        Value::Map(vec![]),
        Value::Array(vec![]),
    ];
    let v = Value::Map(vec![
        (Value::from("all"), Value::Array(every_kind.clone())),
        (Value::from("z"), Value::Map(vec![(Value::from("a"), Value::Array(every_kind))])),
    ]);
    let attributes = Attributes::try_from(&v).unwrap();
    let streamed = serde_json::to_string(&JsonOf(attributes.root())).unwrap();
    assert_eq!(streamed, cbor_to_json(&attributes.to_value()).to_string());
    assert_eq!(attributes_to_json(&attributes).to_string(), streamed);
    assert!(streamed.contains(r#"{"$simple":23}"#) && streamed.contains(r#"[[1,"x"]]"#));
}
