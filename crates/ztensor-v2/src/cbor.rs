//! The manifest's CBOR: RFC 8949 core deterministic encoding and nothing else, decoded into a
//! tree with every rule of `spec/ztensor-2.md` §2.2 checked as the bytes are read.
//!
//! Written here rather than taken from `ciborium`: the point is to refuse, byte by byte, what
//! a general decoder accepts (longer heads than needed, keys out of order, wide floats, tags),
//! and to say which rule each refusal breaks.

use crate::error::{Error, Result, Rule};

/// The deepest nesting allowed: the root is at depth 0, an item below it one deeper.
pub const MAX_DEPTH: usize = 32;

/// A decoded item of the permitted types.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An unsigned integer (major type 0).
    Uint(u64),
    /// A negative integer, `-1 - n` for the `n` stored (major type 1).
    Nint(u64),
    /// A byte string.
    Bytes(Vec<u8>),
    /// A text string.
    Text(String),
    /// An array.
    Array(Vec<Value>),
    /// A map, its entries in the file's (deterministic) order.
    Map(Vec<(Value, Value)>),
    /// `false` or `true`.
    Bool(bool),
    /// `null`.
    Null,
    /// A half, single or double float, widened.
    Float(f64),
}

impl Value {
    /// The text, for a text string.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, for an unsigned one.
    pub fn as_uint(&self) -> Option<u64> {
        match self {
            Value::Uint(n) => Some(*n),
            _ => None,
        }
    }
}

/// Decodes exactly one item that fills `bytes`.
///
/// # Errors
/// `cbor_syntax`, `cbor_determinism`, `cbor_duplicate_key` or `cbor_depth`, at the offending
/// byte.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    let mut d = Decoder { bytes, at: 0 };
    let value = d.item(0)?;
    if d.at != bytes.len() {
        return Err(
            Error::rule(Rule::CborSyntax, "bytes after the manifest's item").at(d.at as u64)
        );
    }
    Ok(value)
}

struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Decoder<'_> {
    fn fail(&self, rule: Rule, message: &str) -> Error {
        Error::rule(rule, message).at(self.at as u64)
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.fail(Rule::CborSyntax, "the manifest ends inside an item"));
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The argument of a head with additional information `ai`, in shortest form.
    fn argument(&mut self, ai: u8) -> Result<u64> {
        let start = self.at;
        let (value, least) = match ai {
            0..=23 => return Ok(u64::from(ai)),
            24 => (u64::from(self.take(1)?[0]), 24),
            25 => {
                let b = self.take(2)?;
                (u64::from(u16::from_be_bytes([b[0], b[1]])), 0x100)
            }
            26 => {
                let b = self.take(4)?;
                (u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])), 0x1_0000)
            }
            27 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                (u64::from_be_bytes(a), 0x1_0000_0000)
            }
            31 => {
                self.at = start - 1;
                return Err(self.fail(Rule::CborSyntax, "an indefinite length"));
            }
            _ => {
                self.at = start - 1;
                return Err(self.fail(Rule::CborSyntax, "a reserved additional information"));
            }
        };
        if value < least {
            self.at = start - 1;
            return Err(self.fail(Rule::CborDeterminism, "a head longer than its value needs"));
        }
        Ok(value)
    }

    /// A count of items of at least `each` bytes each, that the rest of the input can hold.
    fn count(&mut self, ai: u8, each: usize) -> Result<usize> {
        let start = self.at - 1;
        let n = self.argument(ai)?;
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.checked_mul(each).is_some_and(|b| b <= self.remaining()));
        fits.ok_or_else(|| {
            Error::rule(Rule::CborSyntax, "a length longer than the manifest").at(start as u64)
        })
    }

    fn item(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.fail(Rule::CborDepth, "items nested deeper than 32"));
        }
        let start = self.at;
        let initial = self.take(1)?[0];
        let (major, ai) = (initial >> 5, initial & 0x1f);
        match major {
            0 => Ok(Value::Uint(self.argument(ai)?)),
            1 => Ok(Value::Nint(self.argument(ai)?)),
            2 => {
                let n = self.count(ai, 1)?;
                Ok(Value::Bytes(self.take(n)?.to_vec()))
            }
            3 => {
                let n = self.count(ai, 1)?;
                let at = self.at;
                let text = std::str::from_utf8(self.take(n)?).map_err(|_| {
                    Error::rule(Rule::CborSyntax, "a text string that is not UTF-8").at(at as u64)
                })?;
                Ok(Value::Text(text.to_owned()))
            }
            4 => {
                let n = self.count(ai, 1)?;
                // Grown as items arrive: a declared count reserves little by itself.
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            5 => {
                let n = self.count(ai, 2)?;
                let mut entries = Vec::with_capacity(n.min(1024));
                let mut previous: Option<(usize, usize)> = None;
                for _ in 0..n {
                    let key_start = self.at;
                    let key = self.item(depth + 1)?;
                    let key_end = self.at;
                    if let Some((a, b)) = previous {
                        match self.bytes[a..b].cmp(&self.bytes[key_start..key_end]) {
                            std::cmp::Ordering::Less => {}
                            std::cmp::Ordering::Equal => {
                                return Err(Error::rule(
                                    Rule::CborDuplicateKey,
                                    "a key given twice",
                                )
                                .at(key_start as u64));
                            }
                            std::cmp::Ordering::Greater => {
                                return Err(Error::rule(
                                    Rule::CborDeterminism,
                                    "map keys out of their encoded order",
                                )
                                .at(key_start as u64));
                            }
                        }
                    }
                    previous = Some((key_start, key_end));
                    let value = self.item(depth + 1)?;
                    entries.push((key, value));
                }
                Ok(Value::Map(entries))
            }
            6 => {
                self.at = start;
                Err(self.fail(Rule::CborSyntax, "a tag"))
            }
            _ => self.simple(ai, start),
        }
    }

    fn simple(&mut self, ai: u8, start: usize) -> Result<Value> {
        let nan =
            || Error::rule(Rule::CborDeterminism, "a NaN other than F9 7E00").at(start as u64);
        let wide = || {
            Error::rule(Rule::CborDeterminism, "a float wider than its value needs")
                .at(start as u64)
        };
        match ai {
            20 => Ok(Value::Bool(false)),
            21 => Ok(Value::Bool(true)),
            22 => Ok(Value::Null),
            25 => {
                let b = self.take(2)?;
                let bits = u16::from_be_bytes([b[0], b[1]]);
                let value = half::f16::from_bits(bits);
                if value.is_nan() && bits != 0x7e00 {
                    return Err(nan());
                }
                Ok(Value::Float(f64::from(value.to_f32())))
            }
            26 => {
                let b = self.take(4)?;
                let value = f32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                if value.is_nan() {
                    return Err(nan());
                }
                if half::f16::from_f32(value).to_f32() == value {
                    return Err(wide());
                }
                Ok(Value::Float(f64::from(value)))
            }
            27 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                let value = f64::from_be_bytes(a);
                if value.is_nan() {
                    return Err(nan());
                }
                #[allow(clippy::cast_possible_truncation)]
                let narrow = value as f32;
                if f64::from(narrow) == value {
                    return Err(wide());
                }
                Ok(Value::Float(value))
            }
            _ => {
                self.at = start;
                Err(self.fail(Rule::CborSyntax, "a simple value other than false, true and null"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(bytes: &[u8]) -> Option<Rule> {
        decode(bytes).err().and_then(|e| e.broken())
    }

    #[test]
    fn each_rule_by_the_byte() {
        assert_eq!(decode(&[0xa0]).unwrap(), Value::Map(vec![]));
        assert_eq!(rule(&[0xa0, 0x00]), Some(Rule::CborSyntax), "trailing");
        assert_eq!(rule(&[0xc0, 0x00]), Some(Rule::CborSyntax), "tag");
        assert_eq!(rule(&[0x9f, 0xff]), Some(Rule::CborSyntax), "indefinite");
        assert_eq!(rule(&[0x1c]), Some(Rule::CborSyntax), "reserved ai");
        assert_eq!(rule(&[0xf7]), Some(Rule::CborSyntax), "undefined");
        assert_eq!(rule(&[0xf8, 0x20]), Some(Rule::CborSyntax), "one-byte simple");
        assert_eq!(rule(&[0x18, 0x05]), Some(Rule::CborDeterminism), "non-shortest");
        assert_eq!(rule(&[0x19, 0x00, 0xff]), Some(Rule::CborDeterminism));
        assert_eq!(decode(&[0x19, 0x01, 0x00]).unwrap(), Value::Uint(256));
        // "b" sorts before "aa": a shorter encoding first.
        assert!(decode(&[0xa2, 0x61, b'b', 0x00, 0x62, b'a', b'a', 0x00]).is_ok());
        assert_eq!(
            rule(&[0xa2, 0x62, b'a', b'a', 0x00, 0x61, b'b', 0x00]),
            Some(Rule::CborDeterminism)
        );
        assert_eq!(rule(&[0xa2, 0x61, b'a', 0x00, 0x61, b'a', 0x01]), Some(Rule::CborDuplicateKey));
        assert_eq!(rule(&[0x7f]), Some(Rule::CborSyntax));
        assert_eq!(rule(&[0x62, 0xff, 0xfe]), Some(Rule::CborSyntax), "not UTF-8");
        assert_eq!(rule(&[0x9a, 0xff, 0xff, 0xff, 0xff]), Some(Rule::CborSyntax), "huge count");
        // Floats: the narrowest width, one NaN.
        assert!(decode(&[0xf9, 0x7e, 0x00]).is_ok());
        assert_eq!(rule(&[0xf9, 0x7e, 0x01]), Some(Rule::CborDeterminism));
        assert_eq!(rule(&[0xfa, 0x3f, 0xc0, 0x00, 0x00]), Some(Rule::CborDeterminism), "1.5");
        assert_eq!(
            decode(&[0xfa, 0x3d, 0xcc, 0xcc, 0xcd]).unwrap(),
            Value::Float(f64::from(0.1f32))
        );
        let mut one_and_a_half = vec![0xfb];
        one_and_a_half.extend(1.5f64.to_be_bytes());
        assert_eq!(rule(&one_and_a_half), Some(Rule::CborDeterminism));
        let mut tenth = vec![0xfb];
        tenth.extend(0.1f64.to_be_bytes());
        assert_eq!(decode(&tenth).unwrap(), Value::Float(0.1));
    }

    #[test]
    fn depth_is_counted_from_the_root() {
        let nested = |n: usize| {
            let mut b = vec![0x81; n];
            b.push(0x00);
            b
        };
        assert!(decode(&nested(32)).is_ok());
        assert_eq!(rule(&nested(33)), Some(Rule::CborDepth));
    }
}
