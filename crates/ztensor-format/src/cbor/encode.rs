//! RFC 8949 deterministic encoding: shortest heads, definite lengths, map keys in the order
//! of their encoded bytes, floats in the shortest width that keeps their bits.

use crate::error::{Error, ErrorKind, Result};
use crate::value::{CBOR_INT_MAX, CBOR_INT_MIN, Value};

/// Encodes `value` in RFC 8949 §4.2.1 deterministic form: shortest arguments, definite lengths,
/// map entries sorted by the bytes of their encoded keys, and floats in the shortest width
/// that keeps their exact bits.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] for an integer outside CBOR's range, and
/// [`ErrorKind::CborDuplicateKey`] for a map with two equal keys.
pub fn encode(value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Like [`encode`], appending to `out`.
///
/// # Errors
/// As [`encode`].
pub fn encode_into(value: &Value, out: &mut Vec<u8>) -> Result<()> {
    match value {
        &Value::Integer(i) => {
            if !(CBOR_INT_MIN..=CBOR_INT_MAX).contains(&i) {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("integer {i} is outside CBOR's range"),
                ));
            }
            match u64::try_from(i) {
                Ok(v) => head(out, 0, v),
                #[allow(
                    clippy::cast_possible_truncation,
                    reason = "range checked above: -1 - i fits u64"
                )]
                Err(_) => head(out, 1, (-1 - i) as u64),
            }
        }
        Value::Bytes(b) => {
            head(out, 2, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Text(s) => {
            head(out, 3, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Array(items) => {
            head(out, 4, items.len() as u64);
            for item in items {
                encode_into(item, out)?;
            }
        }
        Value::Map(entries) => {
            let mut encoded = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                encoded.push((encode(k)?, v));
            }
            encoded.sort_by(|a, b| a.0.cmp(&b.0));
            if encoded.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(Error::new(ErrorKind::CborDuplicateKey, "map to encode repeats a key"));
            }
            head(out, 5, encoded.len() as u64);
            for (k, v) in encoded {
                out.extend_from_slice(&k);
                encode_into(v, out)?;
            }
        }
        Value::Tag(tag, inner) => {
            head(out, 6, *tag);
            encode_into(inner, out)?;
        }
        Value::Bool(false) => out.push(0xf4),
        Value::Bool(true) => out.push(0xf5),
        Value::Null => out.push(0xf6),
        Value::Undefined => out.push(0xf7),
        &Value::Simple(v) => head(out, 7, u64::from(v)),
        &Value::Float(f) => float(out, f),
    }
    Ok(())
}

/// A map entry's value to encode: a tree, or an item already in deterministic form.
pub(crate) enum Entry<'a> {
    Value(Value),
    Encoded(&'a [u8]),
}

/// Appends a map of `entries` (each key already encoded) in deterministic form to `out`.
///
/// # Errors
/// [`ErrorKind::CborDuplicateKey`] for two equal keys, and those of [`encode_into`].
pub(crate) fn encode_map_into(
    mut entries: Vec<(Vec<u8>, Entry<'_>)>,
    out: &mut Vec<u8>,
) -> Result<()> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    if entries.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Error::new(ErrorKind::CborDuplicateKey, "map to encode repeats a key"));
    }
    head(out, 5, entries.len() as u64);
    for (key, value) in &entries {
        out.extend_from_slice(key);
        match value {
            Entry::Value(v) => encode_into(v, out)?,
            Entry::Encoded(bytes) => out.extend_from_slice(bytes),
        }
    }
    Ok(())
}

/// Appends the head of a text string of `len` bytes to `out`.
pub(crate) fn text_head(out: &mut Vec<u8>, len: u64) {
    head(out, 3, len);
}

/// Appends the head of a map of `len` entries to `out`.
pub(crate) fn map_head(out: &mut Vec<u8>, len: u64) {
    head(out, 5, len);
}

/// Encoded bytes handed on in blocks of about [`Blocks::SIZE`] as they are made, so that a
/// large encoding never exists whole in memory.
pub(crate) struct Blocks<'w> {
    /// The block being filled; encoders append to it.
    pub(crate) buf: Vec<u8>,
    write: &'w mut dyn FnMut(&[u8]) -> Result<()>,
    written: u64,
}

impl<'w> Blocks<'w> {
    const SIZE: usize = 64 << 10;

    pub(crate) fn new(write: &'w mut dyn FnMut(&[u8]) -> Result<()>) -> Blocks<'w> {
        Blocks { buf: Vec::with_capacity(Blocks::SIZE + 1024), write, written: 0 }
    }

    /// Hands the block on once it is full.
    pub(crate) fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= Blocks::SIZE { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            (self.write)(&self.buf)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// Hands on what is left; the number of bytes handed on in all.
    pub(crate) fn finish(mut self) -> Result<u64> {
        self.flush()?;
        Ok(self.written)
    }
}

/// Appends the head of an array of `len` items to `out`.
pub(crate) fn array_head(out: &mut Vec<u8>, len: u64) {
    head(out, 4, len);
}

/// Appends the head of an item of major type `major` (0 to 7) and argument `arg`, in its
/// shortest form (RFC 8949 §4.2.1): the one head encoder of the 1.x and zTensor 2 manifests.
pub fn head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    #[allow(clippy::cast_possible_truncation, reason = "each arm checks the width")]
    match arg {
        0..=23 => out.push(m | arg as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, arg as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(arg as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(arg as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&arg.to_be_bytes());
        }
    }
}

/// Appends a float in the shortest of half, single and double precision that preserves its
/// bits (RFC 8949 §4.2.2). A NaN keeps its payload where a narrower width holds it; zTensor 2,
/// which allows only `F9 7E00`, writes every NaN so before calling this.
pub fn float(out: &mut Vec<u8>, f: f64) {
    #[allow(clippy::cast_possible_truncation, reason = "exactness is checked by the round trip")]
    let single = f as f32;
    if f64::from(single).to_bits() == f.to_bits() {
        let half = half::f16::from_f32(single);
        if f64::from(half).to_bits() == f.to_bits() {
            out.push(0xf9);
            out.extend_from_slice(&half.to_bits().to_be_bytes());
        } else {
            out.push(0xfa);
            out.extend_from_slice(&single.to_bits().to_be_bytes());
        }
    } else {
        out.push(0xfb);
        out.extend_from_slice(&f.to_bits().to_be_bytes());
    }
}
