//! The CBOR data model, as far as manifests and attributes use it.

use std::fmt;

/// A CBOR data item.
///
/// Equality is structural and exact: floats compare by their bits (so a NaN attribute equals
/// itself and `0.0` differs from `-0.0`), and an integer never equals a float.
#[derive(Debug, Clone)]
pub enum Value {
    /// An integer in CBOR's range, −2⁶⁴ ..= 2⁶⁴ − 1 (major types 0 and 1).
    Integer(i128),
    /// A byte string.
    Bytes(Vec<u8>),
    /// A UTF-8 text string.
    Text(String),
    /// An array.
    Array(Vec<Value>),
    /// A map, in the order its entries were decoded or built.
    Map(Vec<(Value, Value)>),
    /// A tagged item.
    Tag(u64, Box<Value>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// `undefined`.
    Undefined,
    /// Any other simple value (0..=19 and 32..=255).
    Simple(u8),
    /// A floating-point number, whatever width it was stored with.
    Float(f64),
}

/// The smallest CBOR integer, −2⁶⁴.
pub const CBOR_INT_MIN: i128 = -(1i128 << 64);
/// The largest CBOR integer, 2⁶⁴ − 1.
pub const CBOR_INT_MAX: i128 = u64::MAX as i128;

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Integer(a), Integer(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            (Text(a), Text(b)) => a == b,
            (Array(a), Array(b)) => a == b,
            (Map(a), Map(b)) => a == b,
            (Tag(t, a), Tag(u, b)) => t == u && a == b,
            (Bool(a), Bool(b)) => a == b,
            (Null, Null) | (Undefined, Undefined) => true,
            (Simple(a), Simple(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Value {
    /// The text, if this is a text string.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The value, if this is a non-negative integer that fits in `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Integer(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short name of the CBOR kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Integer(_) => "integer",
            Value::Bytes(_) => "byte string",
            Value::Text(_) => "text string",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Tag(..) => "tag",
            Value::Bool(_) => "bool",
            Value::Null => "null",
            Value::Undefined => "undefined",
            Value::Simple(_) => "simple value",
            Value::Float(_) => "float",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Integer(i128::from(v))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Integer(i128::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl fmt::Display for Value {
    /// CBOR diagnostic notation (RFC 8949 §8): `{"a": [1, 2.5, h'00ff']}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Integer(i) => write!(f, "{i}"),
            Value::Bytes(b) => write!(f, "h'{}'", crate::digest::to_hex(b)),
            Value::Text(s) => write!(f, "{s:?}"),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Tag(t, v) => write!(f, "{t}({v})"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Null => f.write_str("null"),
            Value::Undefined => f.write_str("undefined"),
            Value::Simple(v) => write!(f, "simple({v})"),
            Value::Float(x) if x.is_nan() => f.write_str("NaN"),
            Value::Float(x) if x.is_infinite() => {
                f.write_str(if *x > 0.0 { "Infinity" } else { "-Infinity" })
            }
            Value::Float(x) if x.fract() == 0.0 && x.abs() < 1e16 => write!(f, "{x:.1}"),
            Value::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A map with text keys, the shape of most attributes; a convenience for building them.
///
/// ```
/// use ztensor_format::{Value, text_map};
/// let attrs = text_map([("license", Value::from("MIT")), ("lr", Value::from(0.5))]);
/// assert_eq!(attrs.to_string(), r#"{"license": "MIT", "lr": 0.5}"#);
/// ```
pub fn text_map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::Text(k.into()), v)).collect())
}
