//! Attributes kept as they travel: deterministic CBOR, read in place.
//!
//! A decoded [`Value`] costs 32 bytes per item however few bytes the item took in the file, so
//! an attribute array of twenty million small integers (19 MB on disk) would cost 640 MB as a
//! tree. [`Attributes`] holds the map in its deterministic encoding instead (RFC 8949 §4.2.1,
//! which is what every writer here emits), one to a few bytes per item, and [`ValueRef`] reads
//! any item of it in place. Equal encodings mean equal values, so comparing attributes is
//! comparing bytes, and writing them is copying bytes.

use std::fmt;

use crate::cbor::{head_at, item_len};
use crate::error::{Error, ErrorKind, Result};
use crate::value::Value;

/// An attribute map (file or object attributes; for v0.1, a tensor's custom fields), held in
/// deterministic CBOR.
///
/// Built from a [`Value`] (`Attributes::try_from(value)`), or checked and re-encoded from the
/// CBOR of a file by the manifest decoders. Read it with [`Attributes::entries`],
/// [`Attributes::get`] and the [`ValueRef`] handles they give, or decode it whole with
/// [`Attributes::to_value`].
///
/// ```
/// use ztensor_format::{Attributes, Value, text_map};
/// let attributes = Attributes::try_from(text_map([("lr", Value::from(0.5))]))?;
/// assert_eq!(attributes.get("lr").and_then(|v| v.as_f64()), Some(0.5));
/// assert_eq!(attributes.to_string(), r#"{"lr": 0.5}"#);
/// # Ok::<(), ztensor_format::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// One map in deterministic CBOR: shortest heads, definite lengths, keys sorted by their
    /// encoding and never repeated.
    encoded: Box<[u8]>,
}

impl Attributes {
    /// Attributes from their deterministic encoding, which [`crate::cbor::Decoder::canonical`]
    /// or [`crate::cbor::encode`] made of a map.
    pub(crate) fn from_canonical(encoded: Vec<u8>) -> Attributes {
        debug_assert_eq!(encoded.first().map(|b| b >> 5), Some(5));
        Attributes { encoded: encoded.into_boxed_slice() }
    }

    /// Checks and re-encodes one CBOR item (any valid encoding, definite or not) that must be a
    /// map, as a manifest decoder reads attributes.
    ///
    /// # Errors
    /// As [`crate::cbor::decode`], and [`ErrorKind::AttributesNotAMap`] for another item.
    pub fn from_cbor(bytes: &[u8], max_depth: usize) -> Result<Attributes> {
        let mut decoder = crate::cbor::Decoder::bounded(bytes, max_depth, u64::MAX);
        let mut out = Vec::with_capacity(bytes.len());
        decoder.canonical(1, &mut out)?;
        if !decoder.at_end() {
            let left = bytes.len() - decoder.pos();
            return Err(Error::new(
                ErrorKind::CborTrailingBytes,
                format!("{left} byte(s) follow the attributes' CBOR item"),
            )
            .at(decoder.pos() as u64));
        }
        Attributes::from_canonical_checked(out, "attributes")
    }

    /// [`Attributes::from_canonical`] of `encoded`, if it is a map.
    pub(crate) fn from_canonical_checked(
        encoded: Vec<u8>,
        field: &'static str,
    ) -> Result<Attributes> {
        let root = ValueRef { bytes: &encoded };
        if !matches!(root.item(), Item::Map(_)) {
            return Err(Error::new(ErrorKind::AttributesNotAMap, "attributes must be a map")
                .field(field)
                .expected_found("map", root.kind_name()));
        }
        Ok(Attributes::from_canonical(encoded))
    }

    /// The map as one item.
    pub fn root(&self) -> ValueRef<'_> {
        ValueRef { bytes: &self.encoded }
    }

    /// The entries, in deterministic order (shorter keys first, then bytewise).
    pub fn entries(&self) -> Entries<'_> {
        match self.root().item() {
            Item::Map(entries) => entries,
            _ => Entries { items: Items { rest: &[], left: 0 } },
        }
    }

    /// The value of the text key `key`.
    pub fn get(&self, key: &str) -> Option<ValueRef<'_>> {
        self.entries().find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v)
    }

    /// How many entries the map has.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map decoded into a tree (32 bytes per item: for a look at every item, prefer
    /// [`Attributes::root`]).
    pub fn to_value(&self) -> Value {
        self.root().to_value()
    }

    /// The deterministic CBOR encoding of the map.
    pub fn as_bytes(&self) -> &[u8] {
        &self.encoded
    }
}

impl TryFrom<Value> for Attributes {
    type Error = Error;

    /// # Errors
    /// [`ErrorKind::InvalidInput`] when `value` is not a map, and those of
    /// [`crate::cbor::encode`].
    fn try_from(value: Value) -> Result<Attributes> {
        Attributes::try_from(&value)
    }
}

impl TryFrom<&Value> for Attributes {
    type Error = Error;

    /// # Errors
    /// As for an owned value.
    fn try_from(value: &Value) -> Result<Attributes> {
        if value.as_map().is_none() {
            return Err(Error::new(ErrorKind::InvalidInput, "attributes must be a map")
                .field("attributes")
                .expected_found("map", value.kind_name()));
        }
        Ok(Attributes::from_canonical(crate::cbor::encode(value)?))
    }
}

impl fmt::Display for Attributes {
    /// CBOR diagnostic notation, as [`Value`]'s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.root().fmt(f)
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Attributes({})", self.root())
    }
}

/// One item of [`Attributes`], read in place.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueRef<'a> {
    /// Exactly one item in deterministic CBOR.
    bytes: &'a [u8],
}

/// What a [`ValueRef`] holds: [`Value`]'s kinds, borrowing rather than owning.
#[derive(Debug, Clone)]
pub enum Item<'a> {
    /// An integer in CBOR's range.
    Integer(i128),
    /// A byte string.
    Bytes(&'a [u8]),
    /// A UTF-8 text string.
    Text(&'a str),
    /// An array.
    Array(Items<'a>),
    /// A map, in deterministic order.
    Map(Entries<'a>),
    /// A tagged item.
    Tag(u64, ValueRef<'a>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `undefined`.
    Undefined,
    /// Any other simple value.
    Simple(u8),
    /// A floating-point number.
    Float(f64),
}

impl<'a> ValueRef<'a> {
    /// The item.
    pub fn item(&self) -> Item<'a> {
        let (major, arg, len) = head_at(self.bytes);
        let body = self.bytes.get(len..).unwrap_or_default();
        let n = usize::try_from(arg).unwrap_or(usize::MAX);
        match major {
            0 => Item::Integer(i128::from(arg)),
            1 => Item::Integer(-1 - i128::from(arg)),
            2 => Item::Bytes(body.get(..n).unwrap_or_default()),
            // Checked as UTF-8 when it was encoded or canonicalized.
            3 => Item::Text(std::str::from_utf8(body.get(..n).unwrap_or_default()).unwrap_or("")),
            4 => Item::Array(Items { rest: body, left: n }),
            5 => Item::Map(Entries { items: Items { rest: body, left: n.saturating_mul(2) } }),
            6 => Item::Tag(arg, ValueRef { bytes: body }),
            _ => match (self.bytes.first().copied().unwrap_or(0) & 0x1f, len) {
                (20, 1) => Item::Bool(false),
                (21, 1) => Item::Bool(true),
                (22, 1) => Item::Null,
                (23, 1) => Item::Undefined,
                #[allow(clippy::cast_possible_truncation, reason = "a one-byte argument")]
                (_, 1 | 2) => Item::Simple(arg as u8),
                #[allow(clippy::cast_possible_truncation, reason = "a two-byte argument")]
                (_, 3) => Item::Float(f64::from(half::f16::from_bits(arg as u16))),
                #[allow(clippy::cast_possible_truncation, reason = "a four-byte argument")]
                (_, 5) => Item::Float(f64::from(f32::from_bits(arg as u32))),
                _ => Item::Float(f64::from_bits(arg)),
            },
        }
    }

    /// The text, if this is a text string.
    pub fn as_text(&self) -> Option<&'a str> {
        match self.item() {
            Item::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The value, if this is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self.item() {
            Item::Integer(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }

    /// The number, if this is a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self.item() {
            Item::Float(x) => Some(x),
            _ => None,
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<Entries<'a>> {
        match self.item() {
            Item::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<Items<'a>> {
        match self.item() {
            Item::Array(items) => Some(items),
            _ => None,
        }
    }

    /// A short name of the CBOR kind, as [`Value::kind_name`] gives it.
    pub fn kind_name(&self) -> &'static str {
        match self.item() {
            Item::Integer(_) => "integer",
            Item::Bytes(_) => "byte string",
            Item::Text(_) => "text string",
            Item::Array(_) => "array",
            Item::Map(_) => "map",
            Item::Tag(..) => "tag",
            Item::Bool(_) => "bool",
            Item::Null => "null",
            Item::Undefined => "undefined",
            Item::Simple(_) => "simple value",
            Item::Float(_) => "float",
        }
    }

    /// The item decoded into a tree.
    pub fn to_value(&self) -> Value {
        match self.item() {
            Item::Integer(i) => Value::Integer(i),
            Item::Bytes(b) => Value::Bytes(b.to_vec()),
            Item::Text(s) => Value::Text(s.to_owned()),
            Item::Array(items) => Value::Array(items.map(|v| v.to_value()).collect()),
            Item::Map(entries) => {
                Value::Map(entries.map(|(k, v)| (k.to_value(), v.to_value())).collect())
            }
            Item::Tag(tag, inner) => Value::Tag(tag, Box::new(inner.to_value())),
            Item::Bool(b) => Value::Bool(b),
            Item::Null => Value::Null,
            Item::Undefined => Value::Undefined,
            Item::Simple(v) => Value::Simple(v),
            Item::Float(x) => Value::Float(x),
        }
    }

    /// The item's deterministic CBOR encoding.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl fmt::Display for ValueRef<'_> {
    /// CBOR diagnostic notation, exactly as [`Value`]'s `Display` writes the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.item() {
            Item::Integer(i) => write!(f, "{i}"),
            Item::Bytes(b) => write!(f, "h'{}'", crate::digest::to_hex(b)),
            Item::Text(s) => write!(f, "{s:?}"),
            Item::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Item::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Item::Tag(t, v) => write!(f, "{t}({v})"),
            Item::Bool(b) => write!(f, "{b}"),
            Item::Null => f.write_str("null"),
            Item::Undefined => f.write_str("undefined"),
            Item::Simple(v) => write!(f, "simple({v})"),
            Item::Float(x) => fmt::Display::fmt(&Value::Float(x), f),
        }
    }
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ValueRef({self})")
    }
}

/// The items of an array in [`Attributes`], in order.
#[derive(Debug, Clone)]
pub struct Items<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Items<'a> {
    type Item = ValueRef<'a>;

    fn next(&mut self) -> Option<ValueRef<'a>> {
        if self.left == 0 || self.rest.is_empty() {
            return None;
        }
        self.left -= 1;
        let (item, rest) = self.rest.split_at(item_len(self.rest));
        self.rest = rest;
        Some(ValueRef { bytes: item })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left.min(self.rest.len()), Some(self.left.min(self.rest.len())))
    }
}

impl ExactSizeIterator for Items<'_> {}

/// The entries of a map in [`Attributes`], in deterministic order.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    items: Items<'a>,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (ValueRef<'a>, ValueRef<'a>);

    fn next(&mut self) -> Option<(ValueRef<'a>, ValueRef<'a>)> {
        Some((self.items.next()?, self.items.next()?))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.items.size_hint().0 / 2;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Entries<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text_map;

    fn sample() -> Value {
        text_map([
            ("lr", Value::from(0.5)),
            ("name", Value::from("w\u{2}\"")),
            ("big", Value::Integer(-(1i128 << 64))),
            ("blob", Value::Bytes(vec![0, 255])),
            ("nested", text_map([("deep", Value::Array(vec![Value::Null, Value::Bool(true)]))])),
            ("tagged", Value::Tag(1, Box::new(Value::Float(f64::NAN)))),
            ("odd", Value::Array(vec![Value::Undefined, Value::Simple(99), Value::Float(1e300)])),
        ])
    }

    #[test]
    fn read_in_place_as_the_tree_reads() {
        let value = sample();
        let attributes = Attributes::try_from(&value).unwrap();
        let mut sorted = value.as_map().unwrap().to_vec();
        sorted.sort_by_key(|(k, _)| crate::cbor::encode(k).unwrap());
        let sorted = Value::Map(sorted);
        // Diagnostic notation as the tree in deterministic order prints it.
        assert_eq!(attributes.to_string(), sorted.to_string());
        assert_eq!(attributes.len(), 7);
        assert_eq!(attributes.get("name").and_then(|v| v.as_text()), Some("w\u{2}\""));
        assert_eq!(attributes.get("missing"), None);
        // The tree read back is the tree given, in deterministic order.
        let back = attributes.to_value();
        assert_eq!(crate::cbor::encode(&back).unwrap(), attributes.as_bytes());
        assert_eq!(back, sorted);
    }

    #[test]
    fn any_encoding_becomes_the_deterministic_one() {
        // {_ "b": [_ 1, 2], "a": 24 in two extra bytes, "c": 1.0 as a double}.
        let bytes = [
            0xbf, 0x61, b'b', 0x9f, 0x01, 0x02, 0xff, 0x61, b'a', 0x19, 0x00, 0x18, 0x61, b'c',
            0xfb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xff,
        ];
        let attributes = Attributes::from_cbor(&bytes, 8).unwrap();
        let value = crate::cbor::decode(&bytes, 8).unwrap();
        assert_eq!(attributes.as_bytes(), crate::cbor::encode(&value).unwrap());
        assert_eq!(attributes, Attributes::try_from(value).unwrap());
        assert_eq!(attributes.to_string(), r#"{"a": 24, "b": [1, 2], "c": 1.0}"#);
    }

    /// Maps whose keys come in order, out of order at any place, repeated next to each other
    /// or far apart, nested in each other: the encoding and the faults are the tree's.
    #[test]
    fn maps_in_any_order_become_the_tree_encoding() {
        let uint = |n: u64| {
            let mut b = Vec::new();
            crate::cbor::head(&mut b, 0, n);
            b
        };
        let map = |keys: &[u64], inner: Option<Vec<u8>>| {
            let mut b = Vec::new();
            crate::cbor::head(&mut b, 5, keys.len() as u64 + u64::from(inner.is_some()));
            for &k in keys {
                b.extend(uint(k));
                b.extend(uint(k * 3));
            }
            if let Some(inner) = inner {
                b.extend([0x61, b'z']);
                b.extend(inner);
            }
            b
        };
        let ascending: Vec<u64> = (0..300).map(|i| i * 7).collect();
        let mut last_out = ascending.clone();
        last_out.push(5);
        let mut first_out = ascending.clone();
        first_out.insert(0, 5000);
        let mut twice_adjacent = ascending.clone();
        twice_adjacent.insert(100, twice_adjacent[99]);
        let mut twice_apart = ascending.clone();
        twice_apart.push(7);
        let reversed: Vec<u64> = ascending.iter().rev().copied().collect();
        for keys in [&ascending, &last_out, &first_out, &twice_adjacent, &twice_apart, &reversed] {
            for inner in [None, Some(map(&reversed, None)), Some(map(&twice_apart, None))] {
                let bytes = map(keys, inner);
                match (crate::cbor::decode(&bytes, 8), Attributes::from_cbor(&bytes, 8)) {
                    (Ok(tree), Ok(attributes)) => {
                        assert_eq!(attributes.as_bytes(), crate::cbor::encode(&tree).unwrap());
                    }
                    (Err(tree), Err(encoded)) => assert_eq!(
                        (tree.kind(), tree.offset(), tree.to_string()),
                        (encoded.kind(), encoded.offset(), encoded.to_string())
                    ),
                    (tree, attributes) => panic!("{tree:?} / {attributes:?}"),
                }
            }
        }
    }

    #[test]
    fn faults_are_those_of_the_tree_decoder() {
        let cases: &[&[u8]] = &[
            &[0xa2, 0x01, 0x02, 0x01, 0x03],
            &[0xbf, 0x61, b'a', 0x82, 0x01, 0x02, 0x61, b'b', 0x00, 0x61, b'a', 0x01, 0xff],
            &[0xa1, 0x01, 0xff],
            &[0xa1, 0x62, 0xff, 0xfe, 0x00],
            &[0x81, 0x81, 0x81, 0x81, 0x81, 0x00],
            &[0x9f, 0x01],
        ];
        for bytes in cases {
            let tree = crate::cbor::decode(bytes, 4).unwrap_err();
            let encoded = Attributes::from_cbor(bytes, 4).unwrap_err();
            assert_eq!(
                (tree.kind(), tree.offset(), tree.to_string()),
                (encoded.kind(), encoded.offset(), encoded.to_string())
            );
        }
        let err = Attributes::from_cbor(&[0x80], 4).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AttributesNotAMap);
        let err = Attributes::try_from(Value::from(1u64)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn a_large_array_costs_its_encoding() {
        let mut bytes = vec![0xa1, 0x61, b'a', 0x9a];
        bytes.extend_from_slice(&1_000_000u32.to_be_bytes());
        bytes.extend(std::iter::repeat_n(0u8, 1_000_000));
        let attributes = Attributes::from_cbor(&bytes, 8).unwrap();
        assert_eq!(attributes.as_bytes(), bytes);
        let items = attributes.get("a").and_then(|v| v.as_array()).unwrap();
        assert_eq!(items.len(), 1_000_000);
        assert!(items.clone().all(|v| v.as_u64() == Some(0)));
    }
}
