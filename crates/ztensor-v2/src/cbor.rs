//! The manifest's CBOR: RFC 8949 core deterministic encoding and nothing else, decoded into a
//! tree with every rule of `spec/ztensor-2.md` §2.2 checked as the bytes are read.
//!
//! Written here rather than taken from `ciborium`: the point is to refuse, byte by byte, what
//! a general decoder accepts (longer heads than needed, keys out of order, wide floats, tags),
//! and to say which rule each refusal breaks.

use crate::error::{Error, Result, Rule};
use ztensor_format::cbor::{HeadFault, RawHead, head, read_head};

/// The deepest nesting allowed: the root is at depth 0, an item below it one deeper.
pub const MAX_DEPTH: usize = 32;

/// The most items a manifest may hold (each array or map item, map key and scalar counts
/// one): the 1.x readers' value budget, [`ztensor_format::Limits::max_manifest_values`]. An
/// item decoded into a tree costs tens of bytes however few it took in the file, so this
/// bounds what decoding any manifest can spend before it is spent; past it, the manifest is
/// refused as too large (`manifest_too_large`).
pub const MAX_VALUES: u64 = ztensor_format::Limits::DEFAULT.max_manifest_values;

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
/// byte; `manifest_too_large` past [`MAX_VALUES`] items.
pub fn decode(bytes: &[u8]) -> Result<Value> {
    let mut d = Decoder::within(bytes, MAX_VALUES);
    let value = d.item(0)?;
    if d.at != bytes.len() {
        return Err(
            Error::rule(Rule::CborSyntax, "bytes after the manifest's item").at(d.at as u64)
        );
    }
    Ok(value)
}

/// Encodes `value` in the deterministic form the manifest must have (§2.2): shortest heads,
/// definite lengths, each map's entries sorted by their encoded keys, floats in the narrowest
/// width that holds the value exactly and NaN as `F9 7E00`.
///
/// Keys given twice are written twice; [`decode`] refuses the result (writers check what they
/// wrote by reading it back).
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

fn encode_into(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Uint(n) => head(out, 0, *n),
        Value::Nint(n) => head(out, 1, *n),
        Value::Bytes(b) => {
            head(out, 2, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Text(t) => {
            head(out, 3, t.len() as u64);
            out.extend_from_slice(t.as_bytes());
        }
        Value::Array(items) => {
            head(out, 4, items.len() as u64);
            for item in items {
                encode_into(item, out);
            }
        }
        Value::Map(entries) => {
            let mut encoded: Vec<(Vec<u8>, &Value)> =
                entries.iter().map(|(k, v)| (encode(k), v)).collect();
            encoded.sort_by(|a, b| a.0.cmp(&b.0));
            head(out, 5, entries.len() as u64);
            for (key, v) in encoded {
                out.extend_from_slice(&key);
                encode_into(v, out);
            }
        }
        Value::Bool(false) => out.push(0xf4),
        Value::Bool(true) => out.push(0xf5),
        Value::Null => out.push(0xf6),
        Value::Float(f) => float(*f, out),
    }
}

/// A float in the narrowest of half, single and double that gives back exactly its bits; every
/// NaN as `F9 7E00`, the one NaN §2.2 allows.
fn float(f: f64, out: &mut Vec<u8>) {
    if f.is_nan() {
        out.extend([0xf9, 0x7e, 0x00]);
    } else {
        ztensor_format::cbor::float(out, f);
    }
}

/// A map's entries as [`map_entries`] gives them: each key decoded, each value's bytes.
pub type Entries = Vec<(Value, std::ops::Range<usize>)>;

/// Checks the one item that fills `bytes` as [`decode`] does, building nothing; if it is a map,
/// returns its entries: each key decoded, each value as the range of `bytes` it occupies (to be
/// decoded with [`decode_at`]). `None` for an item that is not a map.
///
/// # Errors
/// As [`decode`].
pub fn map_entries(bytes: &[u8]) -> Result<Option<Entries>> {
    map_entries_within(bytes, MAX_VALUES)
}

/// [`map_entries`], the whole item holding at most `max_values` items.
pub(crate) fn map_entries_within(bytes: &[u8], max_values: u64) -> Result<Option<Entries>> {
    let mut d = Decoder::within(bytes, max_values);
    d.build = false;
    d.item(0)?;
    if d.at != bytes.len() {
        return Err(
            Error::rule(Rule::CborSyntax, "bytes after the manifest's item").at(d.at as u64)
        );
    }
    entries_at(bytes, 0..bytes.len(), 0)
}

/// The entries of the map at `range` of `bytes` (already checked), at `depth`; `None` when the
/// item there is not a map.
///
/// # Errors
/// None for checked bytes; as [`decode`] otherwise.
pub fn entries_at(
    bytes: &[u8],
    range: std::ops::Range<usize>,
    depth: usize,
) -> Result<Option<Entries>> {
    let mut d = Decoder::within(&bytes[..range.end], MAX_VALUES);
    d.at = range.start;
    match d.major() {
        Some(5) => {}
        Some(_) => return Ok(None),
        None => return Err(d.fail(Rule::CborSyntax, "the manifest ends inside an item")),
    }
    let raw = d.raw()?;
    let n = d.count(&raw, 2)?;
    let mut entries = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let key = d.item(depth + 1)?;
        let start = d.at;
        d.build = false;
        d.item(depth + 1)?;
        d.build = true;
        entries.push((key, start..d.at));
    }
    Ok(Some(entries))
}

/// Decodes the item at `range` of `bytes`, `depth` levels below the root (the depth limit
/// counts from the root).
///
/// # Errors
/// As [`decode`].
pub fn decode_at(bytes: &[u8], range: std::ops::Range<usize>, depth: usize) -> Result<Value> {
    let mut d = Decoder::within(&bytes[..range.end], MAX_VALUES);
    d.at = range.start;
    d.item(depth)
}

/// A reader of deterministic CBOR that checks every rule of §2.2 as it goes: items decoded into
/// [`Value`]s, checked and skipped, or read by type (heads, text, integers) by a caller that
/// knows the schema and keeps the order of map keys with [`KeyOrder`].
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Whether items are built (`false`: checked only, every item given as `Null`).
    build: bool,
    /// How many bytes of the manifest follow `bytes` (a window on it): lengths may reach them.
    beyond: usize,
    /// How many more items may be read (every head counts, built or skipped).
    values_left: u64,
    /// The budget the reading started with, for the message.
    max_values: u64,
}

/// The order of one map's keys: each key's encoding must sort strictly after the one before.
#[derive(Default)]
pub(crate) struct KeyOrder(Option<(usize, usize)>);

impl KeyOrder {
    /// Records the key that `d` read from `start` to where it stands.
    pub(crate) fn next(&mut self, d: &Decoder<'_>, start: usize) -> Result<()> {
        if let Some((a, b)) = self.0 {
            match d.bytes[a..b].cmp(&d.bytes[start..d.at]) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    return Err(
                        Error::rule(Rule::CborDuplicateKey, "a key given twice").at(start as u64)
                    );
                }
                std::cmp::Ordering::Greater => {
                    return Err(Error::rule(
                        Rule::CborDeterminism,
                        "map keys out of their encoded order",
                    )
                    .at(start as u64));
                }
            }
        }
        self.0 = Some((start, d.at));
        Ok(())
    }
}

impl<'a> Decoder<'a> {
    /// A reader at the start of `bytes`, a window on a manifest that goes on for `beyond`
    /// bytes after it: a map or array read with [`Decoder::head`] may count items there.
    /// `values_left` more items may be read from it, of a budget of `max_values` in all.
    pub(crate) fn window(
        bytes: &'a [u8],
        beyond: usize,
        values_left: u64,
        max_values: u64,
    ) -> Decoder<'a> {
        Decoder { bytes, at: 0, build: true, beyond, values_left, max_values }
    }

    /// A reader at the start of `bytes`, the whole manifest, of at most `max_values` items.
    fn within(bytes: &'a [u8], max_values: u64) -> Decoder<'a> {
        Decoder::window(bytes, 0, max_values, max_values)
    }

    /// How many more items may be read.
    pub(crate) fn values_left(&self) -> u64 {
        self.values_left
    }

    /// Counts one item against the budget, before anything of it is read or kept.
    fn spend(&mut self) -> Result<()> {
        if self.values_left == 0 {
            return Err(Error::rule(
                Rule::ManifestTooLarge,
                format!(
                    "the manifest holds more than {} CBOR items (the value budget, as 1.x \
                     readers' Limits::max_manifest_values)",
                    self.max_values
                ),
            )
            .at(self.at as u64));
        }
        self.values_left -= 1;
        Ok(())
    }

    /// The bytes it reads.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Where the reader stands.
    pub(crate) fn at(&self) -> usize {
        self.at
    }

    /// The next item, decoded, `depth` below the root.
    pub(crate) fn value(&mut self, depth: usize) -> Result<Value> {
        self.build = true;
        self.item(depth)
    }

    /// Checks the next item, `depth` below the root, and passes it.
    pub(crate) fn skip(&mut self, depth: usize) -> Result<()> {
        self.build = false;
        let checked = self.item(depth);
        self.build = true;
        checked.map(drop)
    }

    /// The next item's major type, not yet read.
    pub(crate) fn major(&self) -> Option<u8> {
        self.bytes.get(self.at).map(|b| b >> 5)
    }

    /// The head of a map, array (its count, which the rest can hold) or unsigned integer (its
    /// value), `depth` below the root; `None` (nothing read) when the next item is of another
    /// major type.
    pub(crate) fn head(&mut self, major: u8, depth: usize) -> Result<Option<u64>> {
        if depth > MAX_DEPTH {
            return Err(self.fail(Rule::CborDepth, "items nested deeper than 32"));
        }
        if self.major() != Some(major) {
            return Ok(None);
        }
        self.spend()?;
        let raw = self.raw()?;
        let beyond = self.beyond;
        Ok(Some(match major {
            4 => self.count_within(&raw, 1, beyond)? as u64,
            5 => self.count_within(&raw, 2, beyond)? as u64,
            _ => self.argument(&raw)?,
        }))
    }

    /// The next item as text borrowed from the bytes, `depth` below the root; `None` (nothing
    /// read) when it is not text.
    pub(crate) fn text(&mut self, depth: usize) -> Result<Option<&'a str>> {
        if depth > MAX_DEPTH {
            return Err(self.fail(Rule::CborDepth, "items nested deeper than 32"));
        }
        if self.major() != Some(3) {
            return Ok(None);
        }
        self.spend()?;
        let raw = self.raw()?;
        let n = self.count(&raw, 1)?;
        let at = self.at;
        let text = std::str::from_utf8(self.take(n)?).map_err(|_| {
            Error::rule(Rule::CborSyntax, "a text string that is not UTF-8").at(at as u64)
        })?;
        Ok(Some(text))
    }

    fn fail(&self, rule: Rule, message: &str) -> Error {
        Error::rule(rule, message).at(self.at as u64)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.fail(Rule::CborSyntax, "the manifest ends inside an item"));
        };
        let bytes: &'a [u8] = self.bytes;
        self.at = end;
        Ok(&bytes[end - n..end])
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The head at the reader, read by the workspace's one head reader
    /// ([`ztensor_format::cbor::read_head`]) and moved past.
    fn raw(&mut self) -> Result<RawHead> {
        let start = self.at;
        let raw = read_head(self.bytes, start).map_err(|fault| match fault {
            HeadFault::Truncated { at, .. } => {
                Error::rule(Rule::CborSyntax, "the manifest ends inside an item").at(at as u64)
            }
            HeadFault::Reserved(_) => {
                Error::rule(Rule::CborSyntax, "a reserved additional information").at(start as u64)
            }
        })?;
        self.at = raw.end;
        Ok(raw)
    }

    /// The argument of `raw` (a head of major type 0 to 5 just read), in shortest form.
    fn argument(&self, raw: &RawHead) -> Result<u64> {
        let start = (raw.end - 1 - argument_width(raw.info)) as u64;
        let Some(value) = raw.argument else {
            return Err(Error::rule(Rule::CborSyntax, "an indefinite length").at(start));
        };
        if !raw.is_shortest() {
            return Err(
                Error::rule(Rule::CborDeterminism, "a head longer than its value needs").at(start)
            );
        }
        Ok(value)
    }

    /// A count of items of at least `each` bytes each, that the rest of the input can hold.
    fn count(&self, raw: &RawHead, each: usize) -> Result<usize> {
        self.count_within(raw, each, 0)
    }

    /// As [`Decoder::count`], the items possibly reaching `beyond` bytes past the input.
    fn count_within(&self, raw: &RawHead, each: usize, beyond: usize) -> Result<usize> {
        let start = raw.end - 1 - argument_width(raw.info);
        let n = self.argument(raw)?;
        let room = self.remaining().saturating_add(beyond);
        let fits =
            usize::try_from(n).ok().filter(|&n| n.checked_mul(each).is_some_and(|b| b <= room));
        fits.ok_or_else(|| {
            Error::rule(Rule::CborSyntax, "a length longer than the manifest").at(start as u64)
        })
    }

    fn item(&mut self, depth: usize) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.fail(Rule::CborDepth, "items nested deeper than 32"));
        }
        let start = self.at;
        self.spend()?;
        // Refused by their initial byte alone, whatever would follow: tags, and the simple
        // values and widths deterministic encoding leaves out.
        let Some(&initial) = self.bytes.get(start) else {
            return Err(self.fail(Rule::CborSyntax, "the manifest ends inside an item"));
        };
        match (initial >> 5, initial & 0x1f) {
            (6, _) => return Err(self.fail(Rule::CborSyntax, "a tag")),
            (7, ai) if !matches!(ai, 20..=22 | 25..=27) => {
                return Err(
                    self.fail(Rule::CborSyntax, "a simple value other than false, true and null")
                );
            }
            _ => {}
        }
        let raw = self.raw()?;
        match raw.major {
            0 => Ok(Value::Uint(self.argument(&raw)?)),
            1 => Ok(Value::Nint(self.argument(&raw)?)),
            2 => {
                let n = self.count(&raw, 1)?;
                let build = self.build;
                let bytes = self.take(n)?;
                Ok(if build { Value::Bytes(bytes.to_vec()) } else { Value::Null })
            }
            3 => {
                let n = self.count(&raw, 1)?;
                let (at, build) = (self.at, self.build);
                let text = std::str::from_utf8(self.take(n)?).map_err(|_| {
                    Error::rule(Rule::CborSyntax, "a text string that is not UTF-8").at(at as u64)
                })?;
                Ok(if build { Value::Text(text.to_owned()) } else { Value::Null })
            }
            4 => {
                let n = self.count(&raw, 1)?;
                // Grown as items arrive: a declared count reserves little by itself.
                let mut items = Vec::with_capacity(if self.build { n.min(1024) } else { 0 });
                for _ in 0..n {
                    let item = self.item(depth + 1)?;
                    if self.build {
                        items.push(item);
                    }
                }
                Ok(if self.build { Value::Array(items) } else { Value::Null })
            }
            5 => {
                let n = self.count(&raw, 2)?;
                let mut entries = Vec::with_capacity(if self.build { n.min(1024) } else { 0 });
                let mut order = KeyOrder::default();
                for _ in 0..n {
                    let key_start = self.at;
                    let key = self.item(depth + 1)?;
                    order.next(self, key_start)?;
                    let value = self.item(depth + 1)?;
                    if self.build {
                        entries.push((key, value));
                    }
                }
                Ok(if self.build { Value::Map(entries) } else { Value::Null })
            }
            _ => self.simple(&raw, start),
        }
    }

    /// A value of major type 7 (`raw`, read from `start`): false, true, null or a float in
    /// its narrowest exact width (the others were refused by their initial byte).
    fn simple(&self, raw: &RawHead, start: usize) -> Result<Value> {
        let nan =
            || Error::rule(Rule::CborDeterminism, "a NaN other than F9 7E00").at(start as u64);
        let wide = || {
            Error::rule(Rule::CborDeterminism, "a float wider than its value needs")
                .at(start as u64)
        };
        let bits = raw.argument.unwrap_or_default();
        // The widths are what `read_head` read for information 25, 26 and 27.
        #[allow(clippy::cast_possible_truncation)]
        match raw.info {
            20 => Ok(Value::Bool(false)),
            21 => Ok(Value::Bool(true)),
            22 => Ok(Value::Null),
            25 => {
                let value = half::f16::from_bits(bits as u16);
                if value.is_nan() && bits != 0x7e00 {
                    return Err(nan());
                }
                Ok(Value::Float(f64::from(value.to_f32())))
            }
            26 => {
                let value = f32::from_bits(bits as u32);
                if value.is_nan() {
                    return Err(nan());
                }
                if half::f16::from_f32(value).to_f32() == value {
                    return Err(wide());
                }
                Ok(Value::Float(f64::from(value)))
            }
            27 => {
                let value = f64::from_bits(bits);
                if value.is_nan() {
                    return Err(nan());
                }
                let narrow = value as f32;
                if f64::from(narrow) == value {
                    return Err(wide());
                }
                Ok(Value::Float(value))
            }
            _ => {
                Err(Error::rule(Rule::CborSyntax, "a simple value other than false, true and null")
                    .at(start as u64))
            }
        }
    }
}

/// How many bytes follow a head's initial byte for additional information `info`.
fn argument_width(info: u8) -> usize {
    match info {
        24 => 1,
        25 => 2,
        26 => 4,
        27 => 8,
        _ => 0,
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
    fn encoding_is_what_the_decoder_accepts() {
        // The worked example of the spec: the manifest of `minimal.zt`, 66 bytes, whose keys
        // are given here out of order.
        let text = |s: &str| Value::Text(s.to_owned());
        let part = Value::Map(vec![
            (text("dtype"), text("u8")),
            (text("blob"), Value::Array(vec![Value::Uint(4096), Value::Uint(8)])),
        ]);
        let object = Value::Map(vec![
            (text("layout"), text("dense")),
            (text("shape"), Value::Array(vec![Value::Uint(8)])),
            (text("parts"), Value::Map(vec![(text("data"), part)])),
        ]);
        let root = Value::Map(vec![(text("objects"), Value::Map(vec![(text("t"), object)]))]);
        let bytes = encode(&root);
        let expected = "a1676f626a65637473a16174a3657061727473a16464617461a264626c6f62821910\
                        0008656474797065627538657368617065810866 6c61796f75746564656e7365";
        let expected: String = expected.split_whitespace().collect();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected);
        assert_eq!(bytes.len(), 66);
        let decoded = decode(&bytes).unwrap();
        assert_eq!(encode(&decoded), bytes);
        // Heads at each width's edge, negative integers, floats in their narrowest width.
        for v in [0u64, 23, 24, 255, 256, 65535, 65536, u64::from(u32::MAX), u64::MAX] {
            for value in [Value::Uint(v), Value::Nint(v)] {
                assert_eq!(decode(&encode(&value)).unwrap(), value);
            }
        }
        assert_eq!(encode(&Value::Float(1.5)), [0xf9, 0x3e, 0x00]);
        assert_eq!(encode(&Value::Float(-0.0)), [0xf9, 0x80, 0x00]);
        assert_eq!(encode(&Value::Float(f64::NAN)), [0xf9, 0x7e, 0x00]);
        assert_eq!(encode(&Value::Float(f64::from(0.1f32)))[0], 0xfa);
        assert_eq!(encode(&Value::Float(0.1))[0], 0xfb);
        for f in [1.5, -0.0, 0.1, f64::from(0.1f32), 1e300, f64::INFINITY, 65504.0, 5.96e-8] {
            assert_eq!(decode(&encode(&Value::Float(f))).unwrap(), Value::Float(f), "{f}");
        }
        // A key given twice is written, and refused when read.
        let twice = Value::Map(vec![(text("a"), Value::Null), (text("a"), Value::Null)]);
        assert_eq!(rule(&encode(&twice)), Some(Rule::CborDuplicateKey));
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
