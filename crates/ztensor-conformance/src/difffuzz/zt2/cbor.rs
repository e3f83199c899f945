//! A manifest's value tree written as zTensor 2 wants it (RFC 8949 core deterministic
//! encoding: shortest heads, definite lengths, keys sorted by their encoded bytes, floats in
//! the narrowest width that holds them, NaN as `F9 7E00`), but where a change asks for one
//! value in a form it forbids ([`Mutation::Head`](super::super::Mutation::Head)).

use ciborium::Value as Cbor;

use super::super::mutate::paths;

/// Sorts every map's entries by their keys' encoded bytes (entries whose keys are equal stay
/// in their order, side by side).
pub(super) fn sort(value: &mut Cbor) {
    match value {
        Cbor::Array(items) => items.iter_mut().for_each(sort),
        Cbor::Map(entries) => {
            for (k, v) in entries.iter_mut() {
                sort(k);
                sort(v);
            }
            entries.sort_by_cached_key(|(k, _)| encode(k, &[]));
        }
        Cbor::Tag(_, inner) => sort(inner),
        _ => {}
    }
}

/// `value` encoded in deterministic form, but each value `heads` names (by its number among
/// the tree's values in a pre-order walk, as the tree changes number them; modulo their
/// count) in the form its pick says (modulo 4): 0 a head one size longer than needed (a
/// `true`, `false` or `null` as a two-byte simple value), 1 an indefinite length (a longer
/// head for what has no length), 2 behind a tag (55799, "self-described CBOR"), 3 a float
/// (an integer as one, a float one width wider, anything else a NaN with a payload).
pub(super) fn encode(value: &Cbor, heads: &[(u32, u8)]) -> Vec<u8> {
    let count = if heads.is_empty() { 1 } else { paths(value).len().max(1) };
    let tweaks: Vec<(usize, u8)> = heads
        .iter()
        .map(|&(node, choice)| (usize::try_from(node).unwrap_or(0) % count, choice % 4))
        .collect();
    let mut out = Vec::new();
    item(value, &tweaks, &mut 0, &mut out);
    out
}

/// Appends the head of major type `major` and argument `n`: shortest, or with `longer` one
/// size longer (an argument that already takes eight bytes cannot be longer).
fn head(major: u8, n: u64, longer: bool, out: &mut Vec<u8>) {
    let major = major << 5;
    let width = match n {
        0..=23 => 0,
        24..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xffff_ffff => 4,
        _ => 8,
    };
    let width = match (longer, width) {
        (false, w) => w,
        (true, 0) => 1,
        (true, 1) => 2,
        (true, 2) => 4,
        (true, _) => 8,
    };
    let bytes = n.to_be_bytes();
    match width {
        0 => out.push(major | u8::try_from(n).unwrap_or(0)),
        1 => out.extend([major | 24, bytes[7]]),
        2 => {
            out.push(major | 25);
            out.extend_from_slice(&bytes[6..]);
        }
        4 => {
            out.push(major | 26);
            out.extend_from_slice(&bytes[4..]);
        }
        _ => {
            out.push(major | 27);
            out.extend_from_slice(&bytes);
        }
    }
}

/// A float in the narrowest of half, single and double that gives back its bits exactly (NaN
/// as `F9 7E00`), or with `wider` one width wider (a double that needs its width: a NaN whose
/// payload is not zero).
fn float(f: f64, wider: bool, out: &mut Vec<u8>) {
    let half = half::f16::from_f64(f);
    #[allow(clippy::cast_possible_truncation)]
    let single = f as f32;
    let width = if f.is_nan() || f64::from(half.to_f32()).to_bits() == f.to_bits() {
        2
    } else if f64::from(single).to_bits() == f.to_bits() {
        4
    } else {
        8
    };
    match (width, wider) {
        (2, false) if f.is_nan() => out.extend([0xf9, 0x7e, 0x00]),
        (2, false) => {
            out.push(0xf9);
            out.extend(half.to_bits().to_be_bytes());
        }
        (2, true) | (4, false) => {
            out.push(0xfa);
            out.extend(single.to_be_bytes());
        }
        (4, true) | (8, false) => {
            out.push(0xfb);
            out.extend(f.to_be_bytes());
        }
        _ => out.extend([0xf9, 0x7e, 0x01]),
    }
}

/// Appends `value` (value number `*next` of the walk; its own values numbered after it; map
/// keys and what a tag holds are not numbered).
fn item(value: &Cbor, tweaks: &[(usize, u8)], next: &mut usize, out: &mut Vec<u8>) {
    let me = *next;
    *next += 1;
    let tweak = tweaks.iter().find(|(n, _)| *n == me).map(|&(_, t)| t);
    let sized = matches!(value, Cbor::Array(_) | Cbor::Map(_) | Cbor::Text(_) | Cbor::Bytes(_));
    let longer = tweak == Some(0) || (tweak == Some(1) && !sized);
    let indefinite = tweak == Some(1) && sized;
    if tweak == Some(2) {
        out.extend([0xd9, 0xd9, 0xf7]);
    }
    match value {
        Cbor::Integer(i) => {
            let n = i128::from(*i);
            if tweak == Some(3) {
                #[allow(clippy::cast_precision_loss)]
                float(n as f64, false, out);
            } else if n >= 0 {
                head(0, u64::try_from(n).unwrap_or(u64::MAX), longer, out);
            } else {
                head(1, u64::try_from(-1 - n).unwrap_or(u64::MAX), longer, out);
            }
        }
        _ if tweak == Some(3) && !matches!(value, Cbor::Float(_)) => {
            out.extend([0xf9, 0x7e, 0x01]);
        }
        Cbor::Bytes(b) if indefinite => {
            out.push(0x5f);
            head(2, b.len() as u64, false, out);
            out.extend_from_slice(b);
            out.push(0xff);
        }
        Cbor::Text(t) if indefinite => {
            out.push(0x7f);
            head(3, t.len() as u64, false, out);
            out.extend_from_slice(t.as_bytes());
            out.push(0xff);
        }
        Cbor::Bytes(b) => {
            head(2, b.len() as u64, longer, out);
            out.extend_from_slice(b);
        }
        Cbor::Text(t) => {
            head(3, t.len() as u64, longer, out);
            out.extend_from_slice(t.as_bytes());
        }
        Cbor::Array(items) => {
            if indefinite {
                out.push(0x9f);
            } else {
                head(4, items.len() as u64, longer, out);
            }
            for v in items {
                item(v, tweaks, next, out);
            }
            if indefinite {
                out.push(0xff);
            }
        }
        Cbor::Map(entries) => {
            if indefinite {
                out.push(0xbf);
            } else {
                head(5, entries.len() as u64, longer, out);
            }
            for (k, v) in entries {
                item(k, &[], &mut 0, out);
                item(v, tweaks, next, out);
            }
            if indefinite {
                out.push(0xff);
            }
        }
        Cbor::Tag(tag, inner) => {
            head(6, *tag, longer, out);
            item(inner, &[], &mut 0, out);
        }
        Cbor::Bool(b) if longer => out.extend([0xf8, 20 + u8::from(*b)]),
        Cbor::Bool(b) => out.push(0xf4 + u8::from(*b)),
        Cbor::Null if longer => out.extend([0xf8, 22]),
        Cbor::Float(f) => float(*f, longer || tweak == Some(3), out),
        _ => out.push(0xf6),
    }
}
