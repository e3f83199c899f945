//! CBOR decoding under limits, and RFC 8949 deterministic encoding.
//!
//! This is written here rather than taken from a general CBOR crate because a manifest decoder
//! needs, all at once: the byte offset of every fault; duplicate keys rejected in every map
//! (general decoders keep the last value); a nesting limit; allocations bounded by the bytes
//! actually present rather than by declared lengths; integers and floats kept apart exactly; and
//! the indefinite-length items real v0.1 writers emit. The wire level is small (RFC 8949 §3), and
//! the tests check it against an independent decoder and encoder (`ciborium`).

use std::collections::HashSet;

use crate::error::{Error, ErrorKind, Result};
use crate::value::Value;

mod encode;

pub(crate) use encode::{Blocks, Entry, array_head, encode_map_into, map_head, text_head};
pub use encode::{encode, encode_into, float, head};

/// Decodes exactly one CBOR item that must span all of `bytes`.
///
/// Offsets in errors are relative to the start of `bytes`.
///
/// # Errors
/// [`ErrorKind::CborSyntax`] for malformed input, [`ErrorKind::CborTrailingBytes`] when bytes
/// remain after the item, [`ErrorKind::CborDuplicateKey`] for a repeated map key, and
/// [`ErrorKind::CborDepth`] when nesting exceeds `max_depth`.
pub fn decode(bytes: &[u8], max_depth: usize) -> Result<Value> {
    decode_bounded(bytes, max_depth, u64::MAX)
}

/// [`decode`], reading at most `max_values` item heads (every array or map item, map key, tag,
/// scalar and string chunk counts one): what a decoded tree may cost, bounded before it is
/// spent.
///
/// # Errors
/// Those of [`decode`], and [`ErrorKind::ManifestTooLarge`] past `max_values`.
pub fn decode_bounded(bytes: &[u8], max_depth: usize, max_values: u64) -> Result<Value> {
    let mut decoder = Decoder::bounded(bytes, max_depth, max_values);
    let value = decoder.item(1)?;
    if decoder.pos != bytes.len() {
        let left = bytes.len() - decoder.pos;
        return Err(Error::new(
            ErrorKind::CborTrailingBytes,
            format!("{left} byte(s) follow the manifest's CBOR item"),
        )
        .at(decoder.pos as u64));
    }
    Ok(value)
}

/// The head of a CBOR item as written (RFC 8949 §3): what both of the workspace's decoders
/// read first, this crate's for zTensor 0.1/1.x manifests (which take indefinite lengths and
/// tags, as real writers emit them) and zTensor 2's strict one (which refuses all but the
/// deterministic encoding); each judges the head by its own grammar.
///
/// ```
/// use ztensor_format::cbor::{RawHead, read_head};
///
/// // 500 in a two-byte argument: the shortest form; 5 in a one-byte one is not.
/// let h = read_head(&[0x19, 0x01, 0xf4], 0).unwrap();
/// assert_eq!((h.major, h.argument, h.end, h.is_shortest()), (0, Some(500), 3, true));
/// assert!(!read_head(&[0x18, 0x05], 0).unwrap().is_shortest());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHead {
    /// The major type, 0 to 7.
    pub major: u8,
    /// The additional information, the initial byte's low five bits.
    pub info: u8,
    /// The argument: an integer, a length, a tag number, a simple value or (major type 7,
    /// information 25 to 27) a float's bits; `None` for an indefinite length or a break
    /// (information 31).
    pub argument: Option<u64>,
    /// The offset just past the head.
    pub end: usize,
}

impl RawHead {
    /// Whether the argument is written in the fewest bytes that hold it, as deterministic
    /// encoding requires of integers, lengths and tags (RFC 8949 §4.2.1). Major type 7 is
    /// judged by other rules (simple values, float widths) and always passes here.
    pub fn is_shortest(&self) -> bool {
        let Some(v) = self.argument else { return true };
        self.major == 7
            || match self.info {
                24 => v >= 24,
                25 => v > 0xff,
                26 => v > 0xffff,
                27 => v > 0xffff_ffff,
                _ => true,
            }
    }
}

/// Why [`read_head`] read no head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadFault {
    /// The bytes end inside the head: `need` more were needed at `at`, `left` remain.
    Truncated {
        /// Where the missing bytes start.
        at: usize,
        /// How many the head needs there.
        need: usize,
        /// How many are left.
        left: usize,
    },
    /// Additional information 28 to 30, reserved by RFC 8949.
    Reserved(u8),
}

/// Reads the head of the item at `at` of `bytes`: its initial byte and the argument that
/// follows (big-endian, 1, 2, 4 or 8 bytes).
///
/// # Errors
/// [`HeadFault`]: the bytes end inside the head, or its information is reserved.
pub fn read_head(bytes: &[u8], at: usize) -> std::result::Result<RawHead, HeadFault> {
    let left = |from: usize| bytes.len().saturating_sub(from);
    let Some(&initial) = bytes.get(at) else {
        return Err(HeadFault::Truncated { at, need: 1, left: 0 });
    };
    let (major, info) = (initial >> 5, initial & 0x1f);
    let width = match info {
        0..=23 | 31 => 0,
        24 => 1,
        25 => 2,
        26 => 4,
        27 => 8,
        _ => return Err(HeadFault::Reserved(info)),
    };
    let from = at + 1;
    let Some(arg) = bytes.get(from..).and_then(|rest| rest.get(..width)) else {
        return Err(HeadFault::Truncated { at: from, need: width, left: left(from) });
    };
    let argument = match info {
        0..=23 => Some(u64::from(info)),
        31 => None,
        _ => Some(arg.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))),
    };
    Ok(RawHead { major, info, argument, end: from + width })
}

/// What a header announced.
pub(crate) enum Head {
    Uint(u64),
    Nint(u64),
    Bytes(Option<u64>),
    Text(Option<u64>),
    Array(Option<u64>),
    Map(Option<u64>),
    Tag(u64),
    Simple(u8),
    Float(f64),
    Break,
}

pub(crate) struct Decoder<'a> {
    input: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// How many more item heads [`Decoder::head`] may read.
    values_left: u64,
    max_values: u64,
}

impl<'a> Decoder<'a> {
    pub(crate) fn bounded(input: &'a [u8], max_depth: usize, max_values: u64) -> Decoder<'a> {
        Decoder { input, pos: 0, max_depth, values_left: max_values, max_values }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Whether the whole input has been consumed.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.input.len()
    }

    /// The next byte, not consumed.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    /// The nesting limit.
    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// A definite-length text string, borrowed from the input; `None` for anything else
    /// (including malformed input, which the general decoder then reports).
    pub(crate) fn borrowed_text(&mut self) -> Option<&'a str> {
        let at = self.pos;
        let Ok(Head::Text(Some(n))) = self.head() else { return None };
        let n = self.count(at, n, 1).ok()?;
        std::str::from_utf8(self.take(n).ok()?).ok()
    }

    fn syntax(&self, at: usize, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::CborSyntax, message).at(at as u64)
    }

    fn remaining(&self) -> usize {
        self.input.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let start = self.pos;
        let Some(bytes) = self.input.get(start..).and_then(|rest| rest.get(..n)) else {
            return Err(self
                .syntax(start, format!("item needs {n} byte(s), only {} left", self.remaining())));
        };
        self.pos += n;
        Ok(bytes)
    }

    /// Reads an item's head. Every head counts against the value budget, so the general and
    /// the direct manifest decoders spend it alike.
    pub(crate) fn head(&mut self) -> Result<Head> {
        let at = self.pos;
        if self.values_left == 0 {
            return Err(Error::new(
                ErrorKind::ManifestTooLarge,
                format!(
                    "the manifest holds more than {} CBOR values (Limits::max_manifest_values)",
                    self.max_values
                ),
            )
            .at(at as u64));
        }
        self.values_left -= 1;
        let raw = read_head(self.input, at).map_err(|fault| match fault {
            HeadFault::Truncated { at, need, left } => {
                self.syntax(at, format!("item needs {need} byte(s), only {left} left"))
            }
            HeadFault::Reserved(info) => {
                self.syntax(at, format!("reserved additional information {info}"))
            }
        })?;
        self.pos = raw.end;
        let (major, info, arg) = (raw.major, raw.info, raw.argument);
        let head = match (major, arg) {
            (0, Some(v)) => Head::Uint(v),
            (1, Some(v)) => Head::Nint(v),
            (2, len) => Head::Bytes(len),
            (3, len) => Head::Text(len),
            (4, len) => Head::Array(len),
            (5, len) => Head::Map(len),
            (6, Some(tag)) => Head::Tag(tag),
            (7, None) => Head::Break,
            (7, Some(v)) => match info {
                0..=23 => Head::Simple(info),
                24 if v < 32 => {
                    return Err(self.syntax(at, format!("simple value {v} in two-byte form")));
                }
                #[allow(clippy::cast_possible_truncation, reason = "one-byte argument")]
                24 => Head::Simple(v as u8),
                #[allow(clippy::cast_possible_truncation, reason = "two-byte argument")]
                25 => Head::Float(f64::from(half::f16::from_bits(v as u16))),
                #[allow(clippy::cast_possible_truncation, reason = "four-byte argument")]
                26 => Head::Float(f64::from(f32::from_bits(v as u32))),
                _ => Head::Float(f64::from_bits(v)),
            },
            _ => return Err(self.syntax(at, format!("major type {major} cannot be indefinite"))),
        };
        Ok(head)
    }

    /// A declared count, checked against the bytes left (each entry needs at least
    /// `min_bytes_each`), so a hostile length never drives an allocation.
    pub(crate) fn count(&self, at: usize, declared: u64, min_bytes_each: usize) -> Result<usize> {
        let fits = usize::try_from(declared).ok().filter(|&n| {
            n.checked_mul(min_bytes_each).is_some_and(|need| need <= self.remaining())
        });
        fits.ok_or_else(|| {
            self.syntax(
                at,
                format!("declared length {declared} exceeds the {} byte(s) left", self.remaining()),
            )
        })
    }

    fn string(&mut self, at: usize, len: Option<u64>, major: u8) -> Result<Vec<u8>> {
        match len {
            Some(n) => {
                let n = self.count(at, n, 1)?;
                Ok(self.take(n)?.to_vec())
            }
            None => {
                let mut out = Vec::new();
                loop {
                    let chunk_at = self.pos;
                    match self.head()? {
                        Head::Break => return Ok(out),
                        Head::Bytes(Some(n)) if major == 2 => {
                            let n = self.count(chunk_at, n, 1)?;
                            out.extend_from_slice(self.take(n)?);
                        }
                        Head::Text(Some(n)) if major == 3 => {
                            let n = self.count(chunk_at, n, 1)?;
                            let chunk = self.take(n)?;
                            if std::str::from_utf8(chunk).is_err() {
                                return Err(self.syntax(chunk_at, "text chunk is not valid UTF-8"));
                            }
                            out.extend_from_slice(chunk);
                        }
                        _ => {
                            return Err(
                                self.syntax(chunk_at, "indefinite string chunk of the wrong kind")
                            );
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn item(&mut self, depth: usize) -> Result<Value> {
        let at = self.pos;
        match self.head()? {
            Head::Uint(v) => Ok(Value::Integer(i128::from(v))),
            Head::Nint(v) => Ok(Value::Integer(-1 - i128::from(v))),
            Head::Bytes(len) => Ok(Value::Bytes(self.string(at, len, 2)?)),
            Head::Text(len) => {
                let bytes = self.string(at, len, 3)?;
                String::from_utf8(bytes)
                    .map(Value::Text)
                    .map_err(|_| self.syntax(at, "text string is not valid UTF-8"))
            }
            Head::Array(len) => {
                self.enter(at, depth)?;
                let mut items = match len {
                    Some(n) => Vec::with_capacity(self.count(at, n, 1)?),
                    None => Vec::new(),
                };
                loop {
                    if len.is_some_and(|n| items.len() as u64 == n) {
                        break;
                    }
                    if len.is_none() && self.at_break()? {
                        break;
                    }
                    items.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            Head::Map(len) => {
                self.enter(at, depth)?;
                let mut entries = match len {
                    Some(n) => Vec::with_capacity(self.count(at, n, 2)?),
                    None => Vec::new(),
                };
                loop {
                    if len.is_some_and(|n| entries.len() as u64 == n) {
                        break;
                    }
                    if len.is_none() && self.at_break()? {
                        break;
                    }
                    let key = self.item(depth + 1)?;
                    let value = self.item(depth + 1)?;
                    entries.push((key, value));
                }
                if let Some(i) = first_duplicate_key(&entries)? {
                    return Err(Error::new(
                        ErrorKind::CborDuplicateKey,
                        format!("map repeats the key {}", describe_key(&entries[i].0)),
                    )
                    .at(self.key_offset(at, i, depth)? as u64));
                }
                Ok(Value::Map(entries))
            }
            Head::Tag(tag) => {
                self.enter(at, depth)?;
                Ok(Value::Tag(tag, Box::new(self.item(depth + 1)?)))
            }
            Head::Simple(20) => Ok(Value::Bool(false)),
            Head::Simple(21) => Ok(Value::Bool(true)),
            Head::Simple(22) => Ok(Value::Null),
            Head::Simple(23) => Ok(Value::Undefined),
            Head::Simple(v) => Ok(Value::Simple(v)),
            Head::Float(v) => Ok(Value::Float(v)),
            Head::Break => Err(self.syntax(at, "break outside an indefinite-length item")),
        }
    }

    /// Reads one item as [`Decoder::item`] does, with the same checks, faults and value budget,
    /// and appends its deterministic encoding (as [`encode_into`] would write the decoded value)
    /// to `out`, without building the value: a value in the tree costs tens of bytes, its
    /// encoding one or a few.
    pub(crate) fn canonical(&mut self, depth: usize, out: &mut Vec<u8>) -> Result<()> {
        let at = self.pos;
        match self.head()? {
            Head::Uint(v) => head(out, 0, v),
            Head::Nint(v) => head(out, 1, v),
            Head::Bytes(len) => {
                let bytes = self.string(at, len, 2)?;
                head(out, 2, bytes.len() as u64);
                out.extend_from_slice(&bytes);
            }
            Head::Text(len) => {
                let bytes = self.string(at, len, 3)?;
                if std::str::from_utf8(&bytes).is_err() {
                    return Err(self.syntax(at, "text string is not valid UTF-8"));
                }
                head(out, 3, bytes.len() as u64);
                out.extend_from_slice(&bytes);
            }
            Head::Array(len) => {
                self.enter(at, depth)?;
                let declared = len.map(|n| self.count(at, n, 1)).transpose()?;
                let start = out.len();
                if let Some(n) = declared {
                    head(out, 4, n as u64);
                }
                let mut count = 0usize;
                loop {
                    if declared == Some(count) || (declared.is_none() && self.at_break()?) {
                        break;
                    }
                    self.canonical(depth + 1, out)?;
                    count += 1;
                }
                if declared.is_none() {
                    let mut h = Vec::with_capacity(9);
                    head(&mut h, 4, count as u64);
                    out.splice(start..start, h);
                }
            }
            Head::Map(len) => {
                self.enter(at, depth)?;
                let declared = len.map(|n| self.count(at, n, 2)).transpose()?;
                let start = out.len();
                // Keys that arrive in strictly increasing encoded order (what a deterministic
                // writer sends) need neither sorting nor a duplicate check: only the previous
                // key is remembered. The first key out of order makes the map be sorted at
                // its end, from spans found again in `out`.
                let mut entries = 0usize;
                let mut previous: Option<(usize, usize)> = None;
                let mut ordered = true;
                loop {
                    if declared == Some(entries) || (declared.is_none() && self.at_break()?) {
                        break;
                    }
                    let key = out.len();
                    self.canonical(depth + 1, out)?;
                    let value = out.len();
                    if ordered {
                        ordered = previous.is_none_or(|(k, v)| out[k..v] < out[key..value]);
                        previous = Some((key, value));
                    }
                    self.canonical(depth + 1, out)?;
                    entries += 1;
                }
                if ordered {
                    let mut h = Vec::with_capacity(9);
                    head(&mut h, 5, entries as u64);
                    out.splice(start..start, h);
                } else {
                    let spans = entry_spans(out, start, entries);
                    self.sort_entries(at, depth, start, &spans, out)?;
                }
            }
            Head::Tag(tag) => {
                self.enter(at, depth)?;
                head(out, 6, tag);
                self.canonical(depth + 1, out)?;
            }
            Head::Simple(v) => head(out, 7, u64::from(v)),
            Head::Float(v) => float(out, v),
            Head::Break => return Err(self.syntax(at, "break outside an indefinite-length item")),
        }
        Ok(())
    }

    /// Puts the canonical entries `spans` (key start, key end, entry end) written to `out` from
    /// `start` into deterministic order behind the map's head, refusing the first key that
    /// repeats an earlier one as [`Decoder::item`] does.
    fn sort_entries(
        &self,
        at: usize,
        depth: usize,
        start: usize,
        spans: &[(usize, usize, usize)],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let key = |i: usize| &out[spans[i].0..spans[i].1];
        #[allow(clippy::cast_possible_truncation, reason = "a map's entries each take a byte")]
        let mut order: Vec<u32> = (0..spans.len() as u32).collect();
        let key = |i: u32| key(i as usize);
        order.sort_by(|&a, &b| key(a).cmp(key(b)).then(a.cmp(&b)));
        // Equal keys sort together, by position: every one after the first of its run repeats
        // an earlier key, and the first such in the map is the one to report.
        let repeated = order.windows(2).filter(|w| key(w[0]) == key(w[1])).map(|w| w[1]).min();
        if let Some(i) = repeated {
            let described = decode(key(i), usize::MAX)
                .map_or_else(|_| "of kind unknown".to_owned(), |k| describe_key(&k));
            return Err(Error::new(
                ErrorKind::CborDuplicateKey,
                format!("map repeats the key {described}"),
            )
            .at(self.key_offset(at, i as usize, depth)? as u64));
        }
        let mut sorted = Vec::with_capacity(out.len() - start + 9);
        head(&mut sorted, 5, spans.len() as u64);
        if order.iter().enumerate().all(|(n, &i)| n == i as usize) {
            out.splice(start..start, sorted);
        } else {
            for &i in &order {
                let i = i as usize;
                sorted.extend_from_slice(&out[spans[i].0..spans[i].2]);
            }
            out.truncate(start);
            out.extend_from_slice(&sorted);
        }
        Ok(())
    }

    /// Where the key of entry `index` of the map starting at `map_at` begins: found again by
    /// decoding the map's head and the entries before it (only on the error path, so decoding
    /// does not keep an offset per key).
    fn key_offset(&self, map_at: usize, index: usize, depth: usize) -> Result<usize> {
        let mut again = Decoder::bounded(self.input, self.max_depth, u64::MAX);
        again.pos = map_at;
        again.head()?;
        for _ in 0..index {
            again.item(depth + 1)?;
            again.item(depth + 1)?;
        }
        Ok(again.pos)
    }

    /// Consumes a break byte if one is next.
    pub(crate) fn at_break(&mut self) -> Result<bool> {
        match self.input.get(self.pos) {
            Some(0xff) => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Err(self.syntax(self.pos, "indefinite-length item not terminated by a break")),
        }
    }

    fn enter(&self, at: usize, depth: usize) -> Result<()> {
        if depth > self.max_depth {
            return Err(Error::new(
                ErrorKind::CborDepth,
                format!("CBOR nesting deeper than the limit of {}", self.max_depth),
            )
            .at(at as u64));
        }
        Ok(())
    }
}

/// The spans (key start, key end, entry end) of the `entries` map entries that `canonical`
/// wrote into `bytes` from `start`.
fn entry_spans(bytes: &[u8], start: usize, entries: usize) -> Vec<(usize, usize, usize)> {
    let mut spans = Vec::with_capacity(entries);
    let mut pos = start;
    for _ in 0..entries {
        let key = pos;
        pos += item_len(&bytes[pos..]);
        let value = pos;
        pos += item_len(&bytes[pos..]);
        spans.push((key, value, pos));
    }
    spans
}

/// The index of the first key equal to an earlier one. Small maps compare directly; large ones
/// hash text keys by reference and other keys by their encoding, so nothing is allocated for
/// the common case of text-keyed structural maps.
fn first_duplicate_key(entries: &[(Value, Value)]) -> Result<Option<usize>> {
    if entries.len() <= 16 {
        return Ok(
            (1..entries.len()).find(|&i| entries[..i].iter().any(|(k, _)| *k == entries[i].0))
        );
    }
    let mut texts = HashSet::with_capacity(entries.len());
    let mut others = HashSet::new();
    for (i, (key, _)) in entries.iter().enumerate() {
        let fresh = match key {
            Value::Text(s) => texts.insert(s.as_str()),
            other => others.insert(encode(other)?),
        };
        if !fresh {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn describe_key(key: &Value) -> String {
    match key {
        Value::Text(s) => format!("{s:?}"),
        other => format!("of kind {}", other.kind_name()),
    }
}

/// The major type, argument and head length at the start of well-formed deterministic CBOR.
/// Bytes that end early read as zero: they never do, as only this crate's encoders make them.
pub(crate) fn head_at(bytes: &[u8]) -> (u8, u64, usize) {
    let initial = bytes.first().copied().unwrap_or(0);
    let (major, info) = (initial >> 5, initial & 0x1f);
    let wide = |n: usize| {
        let arg = bytes.get(1..=n).unwrap_or_default();
        arg.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    match info {
        0..=23 => (major, u64::from(info), 1),
        24 => (major, wide(1), 2),
        25 => (major, wide(2), 3),
        26 => (major, wide(4), 5),
        _ => (major, wide(8), 9),
    }
}

/// The length of the one deterministic item at the start of `bytes`.
pub(crate) fn item_len(bytes: &[u8]) -> usize {
    let mut pos = 0usize;
    // Items still to pass: each array item, map key and value, and tagged item adds to it.
    let mut pending = 1u64;
    while pending > 0 && pos < bytes.len() {
        pending -= 1;
        let (major, arg, len) = head_at(&bytes[pos..]);
        pos += len;
        match major {
            2 | 3 => pos = pos.saturating_add(usize::try_from(arg).unwrap_or(usize::MAX)),
            4 => pending += arg,
            5 => pending += arg.saturating_mul(2),
            6 => pending += 1,
            _ => {}
        }
    }
    pos.min(bytes.len())
}

#[cfg(test)]
mod tests;
