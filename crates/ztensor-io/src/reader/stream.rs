//! Objects of any layout decoded and checked in pieces.
//!
//! [`Reader::stream_object`] gives what [`Reader::read_checked`] and
//! [`Reader::check_decoded`] give together, with the same verdict and the same first error,
//! while holding a few pieces whatever the object's size:
//!
//! - split components (v1.x) are decoded once each, in role order; digests, decoded lengths
//!   and bool bytes are checked as they pass, and what the sparse rules need is gathered on the
//!   way (counts, the first negative index, the first row pointer, where it first decreases,
//!   the last, the first column index out of bounds);
//! - a v0.1 single-blob sparse tensor is decoded once to check its digest and learn its length
//!   (which fixes where its parts lie), gathering the same facts; each part it hands over is
//!   then decoded from the blob again;
//! - the two rules that need two streams side by side (strictly increasing columns within each
//!   CSR row, and COO coordinates whose dimension depends on the non-zero count) read the
//!   components a second time, in step.

use std::io::Read;

use ztensor_format::data::check_bool_at;
use ztensor_format::{
    ByteOrder, Component, DType, Encoding, ErrorKind as Rule, Format, LogicalType, ObjectRef,
    Packing, Version, role,
};

use super::{Reader, StoredReader};
use crate::reader::unknown_encoding;
use ztensor_source::Decoded;
use ztensor_source::ReadAt;
use ztensor_source::{Error, Result};

/// Where streamed pieces go: `(role, bytes)`, component after component in role order.
pub(crate) type Each<'e> = &'e mut dyn FnMut(&str, &[u8]) -> Result<()>;

/// Fixed-width integers (1–8 bytes, either byte order) read out of pieces that may split them.
pub(crate) struct Elements {
    width: usize,
    big: bool,
    carry: [u8; 8],
    held: usize,
    /// How many whole elements went by.
    count: u64,
}

impl Elements {
    pub(crate) fn new(width: usize, big: bool) -> Elements {
        Elements { width: width.clamp(1, 8), big, carry: [0; 8], held: 0, count: 0 }
    }

    /// The value of one element (its bytes in the stream's order), and whether its sign bit
    /// is set.
    fn value(&self, bytes: &[u8]) -> (u64, bool) {
        let mut le = [0u8; 8];
        le[..self.width].copy_from_slice(bytes);
        if self.big {
            le[..self.width].reverse();
        }
        (u64::from_le_bytes(le), le[self.width - 1] & 0x80 != 0)
    }

    /// Feeds `bytes`; `f(index, value, sign bit)` for each element completed.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], mut f: impl FnMut(u64, u64, bool)) {
        if self.held > 0 {
            let n = (self.width - self.held).min(bytes.len());
            self.carry[self.held..self.held + n].copy_from_slice(&bytes[..n]);
            self.held += n;
            bytes = &bytes[n..];
            if self.held < self.width {
                return;
            }
            let (v, sign) = self.value(&self.carry[..self.width]);
            f(self.count, v, sign);
            self.count += 1;
            self.held = 0;
        }
        let mut chunks = bytes.chunks_exact(self.width);
        for chunk in &mut chunks {
            let (v, sign) = self.value(chunk);
            f(self.count, v, sign);
            self.count += 1;
        }
        let rest = chunks.remainder();
        self.carry[..rest.len()].copy_from_slice(rest);
        self.held = rest.len();
    }
}

/// What the sparse rules need of one index component (or region), gathered as it streams.
#[derive(Default)]
struct IndexFacts {
    /// The first element whose sign bit is set, in a signed dtype.
    negative: Option<u64>,
    first: Option<u64>,
    previous: Option<u64>,
    /// The first `i` where element `i + 1` is below element `i`.
    decrease: Option<u64>,
    last: Option<u64>,
    /// The first element at or above `bound`: its index and value.
    out_of_bounds: Option<(u64, u64)>,
}

impl IndexFacts {
    fn see(&mut self, i: u64, v: u64, negative: bool, bound: Option<u64>) {
        if negative && self.negative.is_none() {
            self.negative = Some(i);
        }
        if self.first.is_none() {
            self.first = Some(v);
        }
        if self.decrease.is_none() && self.previous.is_some_and(|p| v < p) {
            self.decrease = Some(i - 1);
        }
        self.previous = Some(v);
        self.last = Some(v);
        if self.out_of_bounds.is_none() && bound.is_some_and(|b| v >= b) {
            self.out_of_bounds = Some((i, v));
        }
    }
}

/// One split index component as phase one saw it.
struct Seen {
    dtype: DType,
    /// Decoded bytes.
    length: u64,
    facts: IndexFacts,
    /// The elements' reader for the second pass: width and byte order of the decoded bytes.
    width: usize,
    big: bool,
}

/// What converting a component of `dtype` and `length` decoded bytes to `u64` indices refuses
/// (as `indices_to_u64` does), given the first element with its sign bit set, if any.
pub(crate) fn convertible(
    role: &str,
    dtype: DType,
    length: u64,
    negative: Option<u64>,
) -> std::result::Result<(), ztensor_format::Error> {
    if !dtype.is_integer() {
        return Err(ztensor_format::Error::new(
            Rule::SparseIndexDtype,
            format!("index dtype {dtype} is not an integer type"),
        )
        .in_component(role));
    }
    let width = dtype.size();
    if !length.is_multiple_of(width) {
        return Err(ztensor_format::Error::new(
            Rule::ComponentLengthNotMultiple,
            "index bytes are not a whole number of elements",
        )
        .expected_found(format!("a multiple of {width}"), length)
        .in_component(role));
    }
    match negative {
        Some(i) => Err(ztensor_format::Error::new(
            Rule::SparseIndexOutOfBounds,
            format!("index {i} is negative"),
        )
        .in_component(role)),
        None => Ok(()),
    }
}

/// Decoded bytes of a component read again, as fixed-width integers.
struct Pull<'a> {
    inner: std::io::BufReader<Box<dyn Read + 'a>>,
    width: usize,
    big: bool,
}

/// A second pass that does not give what the first did: the file changed while it was read.
fn changed() -> ztensor_format::Error {
    ztensor_format::Error::new(
        Rule::DecodeFailed,
        "the data decoded differently when read again: the file changed while it was read",
    )
}

impl Pull<'_> {
    fn next(&mut self) -> std::result::Result<u64, ztensor_format::Error> {
        let mut le = [0u8; 8];
        self.inner.read_exact(&mut le[..self.width]).map_err(|_| changed())?;
        if self.big {
            le[..self.width].reverse();
        }
        Ok(u64::from_le_bytes(le))
    }

    fn skip(&mut self, n: u64) -> std::result::Result<(), ztensor_format::Error> {
        let skipped = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())
            .map_err(|_| changed())?;
        if skipped == n { Ok(()) } else { Err(changed()) }
    }

    /// Hands the next `len` bytes to `each` in pieces of `buf`'s size, swapping each
    /// `swap`-byte element (whole elements per piece).
    fn give(
        &mut self,
        len: u64,
        swap: usize,
        buf: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let swap = swap.max(1);
        let piece = (buf.len() / swap).max(1) * swap;
        let mut left = len;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(piece);
            self.inner.read_exact(&mut buf[..n]).map_err(|_| Error::from(changed()))?;
            ztensor_format::data::swap_bytes(&mut buf[..n], swap);
            each(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }
}

/// What a stream is asked for: its piece size, whether the data rules are checked, and the one
/// component wanted, if only one is.
#[derive(Clone, Copy)]
struct Want<'a> {
    piece: usize,
    rules: bool,
    only: Option<&'a str>,
}

/// Each component as decoded, in role order.
pub(crate) type Lengths = Vec<ztensor_source::Decoded>;

/// The piece size of streamed checks.
pub(crate) use ztensor_source::PIECE;

impl<S: ReadAt> Reader<S> {
    /// The decoded bytes of `c`, unchecked and in the stored byte order, as a stream: for
    /// second passes over a component whose digest and length the first pass checked.
    fn decoded_stream(&self, name: &str, role: &str, c: &Component) -> Result<Box<dyn Read + '_>> {
        let stored = StoredReader {
            source: &self.source,
            at: c.offset,
            end: c.offset.saturating_add(c.length),
            hasher: None,
        };
        match c.encoding {
            Encoding::Raw => Ok(Box::new(stored)),
            Encoding::Zstd if !crate::codec::ZSTD => crate::reader::no_zstd(name, role),
            Encoding::Zstd => match crate::codec::zstd_stream(stored) {
                Ok(d) => Ok(d),
                Err(e) => Err(Error::from(
                    ztensor_format::Error::new(Rule::DecodeFailed, format!("zstd: {e}"))
                        .in_object(name)
                        .in_component(role),
                )),
            },
            Encoding::Unknown(_) => unknown_encoding(name, role),
        }
    }

    fn pull(
        &self,
        name: &str,
        role: &str,
        c: &Component,
        width: usize,
        big: bool,
    ) -> Result<Pull<'_>> {
        let inner =
            std::io::BufReader::with_capacity(64 << 10, self.decoded_stream(name, role, c)?);
        Ok(Pull { inner, width: width.clamp(1, 8), big })
    }

    /// Decodes object `object` in pieces: every component in role order (a v0.1 single-blob
    /// sparse tensor as its separate little-endian parts, as [`Reader::read_checked`] gives
    /// them) handed to `each` when given, every digest checked, and with `rules` the data
    /// rules of [`Reader::check_decoded`] too, the first fault being the one those report.
    /// What `each` was given counts as checked only once this returns `Ok`. With `only`, just
    /// that component is decoded and handed over (the rules, which need all, only when it is
    /// the one component).
    /// Returns each component's decoded length, in role order.
    pub(crate) fn stream_object(
        &self,
        object: ObjectRef<'_>,
        piece: usize,
        rules: bool,
        mut each: Option<Each<'_>>,
        only: Option<&str>,
    ) -> Result<Lengths> {
        if let Some(reason) = object.unsupported() {
            return Err(Error::unsupported(reason.clone()));
        }
        // The rules need every component: with one wanted, only when it is the only one.
        let o = object.object();
        let whole = only.is_none() || (o.packing == Packing::Split && o.components.len() == 1);
        let want = Want { piece, rules: rules && whole, only };
        let mut lengths = Lengths::new();
        match object.object().packing {
            Packing::Split => self.stream_split(object, &want, &mut each, &mut lengths)?,
            Packing::V0Single => self.stream_single(object, &want, &mut each, &mut lengths)?,
        }
        Ok(lengths)
    }

    fn stream_split(
        &self,
        object: ObjectRef<'_>,
        want: &Want<'_>,
        each: &mut Option<Each<'_>>,
        lengths: &mut Lengths,
    ) -> Result<()> {
        let Want { piece, rules, only } = *want;
        let name = object.name();
        let o = object.object();
        let strict = self.options.strict;
        let limit = self.options.limits.max_decoded_len;
        let bools_apply = rules && self.version() != Version::V0_1;
        let index_roles: &[&str] = match o.format {
            Format::SparseCsr => &[role::INDICES, role::INDPTR],
            Format::SparseCoo => &[role::COORDS],
            _ => &[],
        };
        let cols = match (&o.format, &o.shape[..]) {
            (Format::SparseCsr, [_, cols]) => Some(*cols),
            _ => None,
        };
        let mut bool_fault: Option<Error> = None;
        let mut seen: Vec<(&str, Seen)> = Vec::new();
        let mut values: Option<(u64, u64)> = None;
        for (role, c) in o.components.iter() {
            if only.is_some_and(|r| r != role) {
                continue;
            }
            let dtype = c.dtype.known().ok_or_else(|| Error::dtype_unknown(name, role))?;
            let bools = bools_apply && dtype == DType::Bool && bool_fault.is_none();
            let index = rules && index_roles.contains(&role);
            let width = usize::try_from(dtype.size()).unwrap_or(8);
            let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
            let bound = if role == role::INDICES { cols } else { None };
            let mut elements = Elements::new(width, false);
            let mut facts = IndexFacts::default();
            let mut at = 0u64;
            let mut fault = None;
            let length = self.stream_component(object, role, c, true, limit, piece, &mut |p| {
                if bools && fault.is_none() {
                    fault = check_bool_at(p, at).err();
                }
                at += p.len() as u64;
                if index && dtype.is_integer() {
                    elements.feed(p, |i, v, sign| facts.see(i, v, signed && sign, bound));
                }
                match each {
                    Some(each) => each(role, p),
                    None => Ok(()),
                }
            })?;
            lengths.push(Decoded {
                role: role.to_owned(),
                dtype,
                logical_type: c.logical_type.clone(),
                len: length,
            });
            if let Some(e) = fault {
                bool_fault = Some(Error::from(e.in_object(name).in_component(role)));
            }
            if index {
                let big = *c.byte_order() == ByteOrder::Big;
                seen.push((role, Seen { dtype, length, facts, width, big }));
            }
            if role == role::VALUES {
                let ratio = c.logical_type.as_ref().map_or(1, LogicalType::ratio);
                values = Some((length, dtype.size() * ratio));
            }
        }
        if !rules {
            return Ok(());
        }
        if let Some(e) = bool_fault {
            return Err(e);
        }
        let context = |e: ztensor_format::Error| Error::from(e.in_object(name));
        // The conversions to indices, in the order the rule reads the roles; only when every
        // role the rule reads is there.
        let find = |r: &str| seen.iter().find(|(role, _)| *role == r).map(|(_, s)| s);
        if index_roles.iter().all(|r| find(r).is_some()) {
            for r in index_roles {
                if let Some(s) = find(r) {
                    convertible(r, s.dtype, s.length, s.facts.negative).map_err(context)?;
                }
            }
        }
        let values_count = values.map(|(length, size)| length / size.max(1));
        match o.format {
            Format::SparseCsr => {
                let (Some(indices), Some(indptr)) = (find(role::INDICES), find(role::INDPTR))
                else {
                    return Ok(());
                };
                let nnz = indices.length / indices.width as u64;
                if let [rows, cols] = o.shape[..] {
                    let entries = indptr.length / indptr.width as u64;
                    csr_rules([rows, cols], entries, nnz, &indptr.facts, &indices.facts)
                        .map_err(context)?;
                    if strict {
                        let c = |r: &str| &o.components[r];
                        let mut ptr = self.pull(
                            name,
                            role::INDPTR,
                            c(role::INDPTR),
                            indptr.width,
                            indptr.big,
                        )?;
                        let mut idx = self.pull(
                            name,
                            role::INDICES,
                            c(role::INDICES),
                            indices.width,
                            indices.big,
                        )?;
                        rows_increase(rows, &mut ptr, &mut idx).map_err(context)?;
                    }
                }
                if values_count.is_some_and(|n| n != nnz) {
                    return Err(context(ztensor_format::Error::new(
                        Rule::SparseNnzMismatch,
                        "values and indices hold different counts",
                    )));
                }
            }
            Format::SparseCoo => {
                let Some(coords) = find(role::COORDS) else { return Ok(()) };
                let nnz = values_count.unwrap_or(0);
                let count = coords.length / coords.width as u64;
                let rank = o.shape.len() as u64;
                if rank.checked_mul(nnz) != Some(count) {
                    return Err(context(
                        ztensor_format::Error::new(
                            Rule::SparseNnzMismatch,
                            "coords must hold rank × nnz entries",
                        )
                        .in_component(role::COORDS)
                        .expected_found(format!("{rank} × {nnz}"), count),
                    ));
                }
                if nnz > 0 {
                    let c = &o.components[role::COORDS];
                    let mut pull = self.pull(name, role::COORDS, c, coords.width, coords.big)?;
                    for (d, &dim) in o.shape.iter().enumerate() {
                        for i in 0..nnz {
                            let v = pull.next().map_err(context)?;
                            if v >= dim {
                                return Err(context(coordinate_out_of_bounds(d, i, v, dim)));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stream_single(
        &self,
        object: ObjectRef<'_>,
        want: &Want<'_>,
        each: &mut Option<Each<'_>>,
        lengths: &mut Lengths,
    ) -> Result<()> {
        let Want { piece, rules, only } = *want;
        let name = object.name();
        let o = object.object();
        let c = &o.components[role::DATA];
        let value = c.dtype.known().ok_or_else(|| Error::dtype_unknown(name, role::DATA))?;
        let big = *c.byte_order() == ByteOrder::Big;
        let value_size = value.size();
        let limit = self.options.limits.max_decoded_len;
        let unpack = |e: ztensor_format::Error| Error::from(e.in_object(name).at(c.offset));
        let context = |e: ztensor_format::Error| Error::from(e.in_object(name));
        if o.format == Format::SparseCsr {
            let rows = o.shape.first().copied().unwrap_or(0);
            let cols = match o.shape[..] {
                [_, cols] => Some(cols),
                _ => None,
            };
            // Elements 0..=rows are the row pointers; what follows from there, 8-byte aligned,
            // starts with the column indices.
            let pointers = rows.saturating_add(1);
            let mut elements = Elements::new(8, big);
            let (mut indptr, mut indices) = (IndexFacts::default(), IndexFacts::default());
            let length =
                self.stream_component(object, role::DATA, c, true, limit, piece, &mut |p| {
                    elements.feed(p, |i, v, _| {
                        if i < pointers {
                            indptr.see(i, v, false, None);
                        } else {
                            indices.see(i - pointers, v, false, cols);
                        }
                    });
                    Ok(())
                })?;
            let indptr_len = pointers
                .checked_mul(8)
                .filter(|&n| n <= length && rows < u64::MAX)
                .ok_or_else(|| {
                    unpack(packed_error(format!(
                        "{length} bytes cannot hold indptr for {rows} rows"
                    )))
                })?;
            let rest = length - indptr_len;
            if !rest.is_multiple_of(8 + value_size) {
                return Err(unpack(packed_error(format!(
                    "{rest} bytes after indptr are not a whole number of (8 + {value_size})-byte \
                     non-zeros"
                ))));
            }
            let nnz = rest / (8 + value_size);
            if indptr.last != Some(nnz) {
                return Err(unpack(
                    ztensor_format::Error::new(
                        Rule::CsrIndptrInvalid,
                        format!(
                            "last row pointer {} disagrees with the {nnz} non-zeros the size \
                             implies",
                            indptr.last.unwrap_or(0)
                        ),
                    )
                    .in_component(role::DATA),
                ));
            }
            lengths.extend([
                Decoded::plain(role::INDICES, DType::U64, nnz * 8),
                Decoded::plain(role::INDPTR, DType::U64, indptr_len),
                Decoded::plain(role::VALUES, value, nnz * value_size),
            ]);
            if rules && cols.is_some() {
                // Only column indices before `nnz` are indices; later elements are values.
                indices.out_of_bounds = indices.out_of_bounds.filter(|&(i, _)| i < nnz);
                csr_rules([rows, cols.unwrap_or(0)], pointers, nnz, &indptr, &indices)
                    .map_err(context)?;
                if self.options.strict {
                    let mut ptr = self.pull(name, role::DATA, c, 8, big)?;
                    let mut idx = self.pull(name, role::DATA, c, 8, big)?;
                    idx.skip(indptr_len).map_err(context)?;
                    rows_increase(rows, &mut ptr, &mut idx).map_err(context)?;
                }
            }
            let Some(each) = each else { return Ok(()) };
            let mut buf =
                ztensor_source::try_zeroed(piece.clamp(64, PIECE) as u64, "a decoding piece")
                    .map_err(|e| Error::io("decoding", None, e))?;
            let parts = [
                (role::INDICES, indptr_len, nnz * 8, 8),
                (role::INDPTR, 0, indptr_len, 8),
                (role::VALUES, indptr_len + nnz * 8, nnz * value_size, value_size),
            ];
            for (part, start, len, width) in parts {
                if only.is_some_and(|r| r != part) {
                    continue;
                }
                let mut pull = self.pull(name, role::DATA, c, 1, false)?;
                pull.skip(start).map_err(context)?;
                let swap = if big { usize::try_from(width).unwrap_or(1) } else { 1 };
                pull.give(len, swap, &mut buf, &mut |p| each(part, p))?;
            }
            return Ok(());
        }
        // COO: records of `rank` u64 coordinates and one value.
        let rank = o.shape.len();
        let record = (rank as u64).checked_mul(8).and_then(|n| n.checked_add(value_size));
        let record_len = record.and_then(|r| usize::try_from(r).ok()).unwrap_or(usize::MAX);
        // The first non-zero out of bounds in each dimension, and its coordinate.
        let mut first_out: Vec<Option<(u64, u64)>> = vec![None; if rules { rank } else { 0 }];
        let mut carry = Vec::new();
        let mut records = 0u64;
        let mut check = |rec: &[u8], i: u64| {
            for (d, slot) in first_out.iter_mut().enumerate() {
                if slot.is_none() {
                    let v = coordinate(&rec[d * 8..d * 8 + 8], big);
                    if v >= o.shape[d] {
                        *slot = Some((i, v));
                    }
                }
            }
        };
        let checking = rules && rank > 0 && record_len != usize::MAX;
        let length =
            self.stream_component(object, role::DATA, c, true, limit, piece, &mut |p| {
                if !checking {
                    return Ok(());
                }
                let mut p = p;
                if !carry.is_empty() {
                    let n = (record_len - carry.len()).min(p.len());
                    carry.extend_from_slice(&p[..n]);
                    p = &p[n..];
                    if carry.len() < record_len {
                        return Ok(());
                    }
                    check(&carry, records);
                    records += 1;
                    carry.clear();
                }
                let mut chunks = p.chunks_exact(record_len);
                for rec in &mut chunks {
                    check(rec, records);
                    records += 1;
                }
                carry.extend_from_slice(chunks.remainder());
                Ok(())
            })?;
        let record = record.filter(|&r| length.is_multiple_of(r)).ok_or_else(|| {
            unpack(packed_error(format!(
                "{length} bytes are not a whole number of {}-byte records",
                record.map_or_else(|| "many".to_owned(), |r| r.to_string())
            )))
        })?;
        let nnz = length / record;
        lengths.extend([
            Decoded::plain(role::COORDS, DType::U64, nnz * rank as u64 * 8),
            Decoded::plain(role::VALUES, value, nnz * value_size),
        ]);
        if let Some((d, (i, v))) =
            first_out.iter().enumerate().find_map(|(d, slot)| slot.map(|s| (d, s)))
        {
            return Err(context(coordinate_out_of_bounds(d, i, v, o.shape[d])));
        }
        let Some(each) = each else { return Ok(()) };
        let cap = piece.clamp(64, PIECE);
        let mut rec = vec![0u8; record_len];
        // Coordinates as structure of arrays: one pass over the records per dimension.
        let mut out = ztensor_source::try_with_capacity(cap as u64, "a decoding piece")
            .map_err(|e| Error::io("decoding", None, e))?;
        let (coords, values) = (only != Some(role::VALUES), only != Some(role::COORDS));
        for d in (0..rank).filter(|_| coords) {
            let mut pull = self.pull(name, role::DATA, c, 1, false)?;
            for _ in 0..nnz {
                pull.inner.read_exact(&mut rec).map_err(|_| context(changed()))?;
                let mut v: [u8; 8] = rec[d * 8..d * 8 + 8].try_into().unwrap_or([0; 8]);
                if big {
                    v.reverse();
                }
                out.extend_from_slice(&v);
                if out.len() + 8 > cap {
                    each(role::COORDS, &out)?;
                    out.clear();
                }
            }
        }
        if !out.is_empty() {
            each(role::COORDS, &out)?;
            out.clear();
        }
        if !values {
            return Ok(());
        }
        let mut pull = self.pull(name, role::DATA, c, 1, false)?;
        let at = rank * 8;
        for _ in 0..nnz {
            pull.inner.read_exact(&mut rec).map_err(|_| context(changed()))?;
            let v = &mut rec[at..];
            if big {
                v.reverse();
            }
            if out.len() + v.len() > cap {
                each(role::VALUES, &out)?;
                out.clear();
            }
            out.extend_from_slice(v);
        }
        if !out.is_empty() {
            each(role::VALUES, &out)?;
        }
        Ok(())
    }
}

fn coordinate(bytes: &[u8], big: bool) -> u64 {
    let mut v: [u8; 8] = bytes.try_into().unwrap_or([0; 8]);
    if big {
        v.reverse();
    }
    u64::from_le_bytes(v)
}

fn packed_error(message: String) -> ztensor_format::Error {
    ztensor_format::Error::new(Rule::SparsePackedSize, message).in_component(role::DATA)
}

fn coordinate_out_of_bounds(d: usize, i: u64, v: u64, dim: u64) -> ztensor_format::Error {
    ztensor_format::Error::new(
        Rule::SparseIndexOutOfBounds,
        format!("coordinate {d} of non-zero {i} is {v}, not below {dim}"),
    )
    .in_component(role::COORDS)
}

/// The CSR rules but the per-row order, in the order `check_csr` checks them, from facts
/// gathered while streaming: `entries` row pointers and `nnz` column indices.
fn csr_rules(
    [rows, cols]: [u64; 2],
    entries: u64,
    nnz: u64,
    indptr: &IndexFacts,
    indices: &IndexFacts,
) -> std::result::Result<(), ztensor_format::Error> {
    if Some(entries) != rows.checked_add(1) {
        return Err(ztensor_format::Error::new(
            Rule::CsrIndptrCount,
            "indptr must hold rows + 1 entries",
        )
        .in_component(role::INDPTR)
        .expected_found(format!("{rows} + 1"), entries));
    }
    let invalid = |message: String| {
        ztensor_format::Error::new(Rule::CsrIndptrInvalid, message).in_component(role::INDPTR)
    };
    if indptr.first != Some(0) {
        return Err(invalid(format!("indptr starts at {}, not 0", indptr.first.unwrap_or(0))));
    }
    if let Some(i) = indptr.decrease {
        return Err(invalid(format!("indptr decreases at row {i}")));
    }
    if indptr.last != Some(nnz) {
        return Err(invalid(format!(
            "indptr ends at {}, not at nnz = {nnz}",
            indptr.last.unwrap_or(0)
        )));
    }
    if let Some((i, v)) = indices.out_of_bounds {
        return Err(ztensor_format::Error::new(
            Rule::SparseIndexOutOfBounds,
            format!("column index {v} at position {i} is not below {cols}"),
        )
        .in_component(role::INDICES));
    }
    Ok(())
}

/// Strictly increasing column indices within each row, reading the row pointers and the
/// indices side by side (the row pointers already checked: from 0, never decreasing, to nnz).
fn rows_increase(
    rows: u64,
    ptr: &mut Pull<'_>,
    idx: &mut Pull<'_>,
) -> std::result::Result<(), ztensor_format::Error> {
    let mut start = ptr.next()?;
    for row in 0..rows {
        let end = ptr.next()?;
        let mut previous: Option<u64> = None;
        for _ in start..end {
            let v = idx.next()?;
            if previous.is_some_and(|p| v <= p) {
                return Err(ztensor_format::Error::new(
                    Rule::CsrIndicesUnsorted,
                    format!("column indices of row {row} do not strictly increase"),
                )
                .in_component(role::INDICES));
            }
            previous = Some(v);
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Elements;

    /// Elements split across pieces anywhere come out whole, in either byte order, with their
    /// sign bits.
    #[test]
    fn elements_split_anywhere_come_out_whole() {
        let values: [u64; 5] = [1, 0x0102, 0x8000, 0xfffe, 7];
        for big in [false, true] {
            let bytes: Vec<u8> = values
                .iter()
                .flat_map(|v| {
                    let b = u16::try_from(*v).unwrap();
                    if big { b.to_be_bytes() } else { b.to_le_bytes() }
                })
                .collect();
            for cut in [1, 3, 5, 7, 9] {
                let mut elements = Elements::new(2, big);
                let mut got = Vec::new();
                let (a, b) = bytes.split_at(cut);
                for piece in [&a[..1.min(a.len())], &a[1.min(a.len())..], b] {
                    elements.feed(piece, |i, v, sign| got.push((i, v, sign)));
                }
                let want: Vec<(u64, u64, bool)> = values
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as u64, v, v & 0x8000 != 0))
                    .collect();
                assert_eq!(got, want, "big={big} cut={cut}");
            }
        }
    }
}
