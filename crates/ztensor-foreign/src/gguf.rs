//! GGUF files (llama.cpp, versions 2 and 3, little-endian) in, as a tensor source.
//!
//! - Metadata key/values become the file attributes (keys as they are; integers, floats,
//!   booleans, strings and arrays of them as CBOR values).
//! - F32, F16, BF16, F64 and the signed integer tensors become dense objects of those types.
//!   GGUF lists dimensions innermost first; objects get them in row-major order.
//! - Quantized tensors (Q4_0 … Q8_K, the K-quants, the IQ, TQ and FP4 types) keep their block
//!   bytes exactly: a dense `u8` object of the blocks, with the attributes `gguf.type` (the
//!   GGML type's name) and `gguf.shape` (the logical shape, row-major). zTensor 0.1/1.x has no
//!   format for GGML blocks, so this follows the reference 1.2.3 reader (raw `u8` objects with
//!   the type and shape in attributes) rather than the reference 2.x, whose `gguf.<type>`
//!   profiles are a format no 0.1/1.x reader knows. Read for zTensor 2
//!   ([`GgufFile::with_blocks`], [`Blocks::Layouts`]), they take zTensor 2's layouts instead:
//!   MXFP4 as `zt.mx/1` (codes and scales apart), the others as `gguf.<type>/1`.
//! - Every count, length and offset is checked against the file: strings, arrays and tensor
//!   tables cannot claim more than the file holds, offsets must be aligned, each tensor's
//!   data must lie within the data section, and no two tensors' data may share a byte.
//! - The header is read in one buffered pass; metadata arrays of numbers and strings are held
//!   compactly and become attribute values only when the attributes are asked for.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;

use ztensor_format::{Attributes, Value};
use ztensor_io::{FileSource, ReadAt};

use crate::error::{Error, ErrorKind, Result};

mod layouts;
mod source;
mod types;

pub use layouts::Blocks;
pub use types::{GgmlType, TYPES, ggml_type};

/// The first bytes of every GGUF file.
pub const MAGIC: &[u8] = b"GGUF";

/// The attribute key holding a quantized tensor's GGML type name.
pub const TYPE_KEY: &str = "gguf.type";
/// The attribute key holding a quantized tensor's logical shape (row-major).
pub const SHAPE_KEY: &str = "gguf.shape";

/// Most dimensions a tensor may have (ggml uses 4).
const MAX_DIMS: u32 = 8;
/// Most nesting of metadata arrays.
const MAX_DEPTH: usize = 8;
/// How much of the file the header reader fetches at a time.
const CHUNK: usize = 1 << 18;

/// The GGUF value type numbers (`gguf_type`).
const STRING: u32 = 8;
const ARRAY: u32 = 9;

/// The width in bytes of a fixed-width GGUF value type, `None` for strings, arrays and
/// unknown types.
fn scalar_width(kind: u32) -> Option<usize> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// The value of a fixed-width GGUF value of type `kind` stored as `b` (exactly its width;
/// booleans already checked to be 0 or 1).
fn scalar(kind: u32, b: &[u8]) -> Value {
    fn le<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(src) = b.get(..N) {
            out.copy_from_slice(src);
        }
        out
    }
    match kind {
        0 => Value::from(u64::from(le::<1>(b)[0])),
        1 => Value::Integer(i128::from(i8::from_le_bytes(le(b)))),
        2 => Value::from(u64::from(u16::from_le_bytes(le(b)))),
        3 => Value::Integer(i128::from(i16::from_le_bytes(le(b)))),
        4 => Value::from(u64::from(u32::from_le_bytes(le(b)))),
        5 => Value::Integer(i128::from(i32::from_le_bytes(le(b)))),
        6 => Value::Float(f64::from(f32::from_le_bytes(le(b)))),
        7 => Value::Bool(le::<1>(b)[0] != 0),
        10 => Value::from(u64::from_le_bytes(le(b))),
        11 => Value::Integer(i128::from(i64::from_le_bytes(le(b)))),
        _ => Value::Float(f64::from_le_bytes(le(b))),
    }
}

/// One metadata value as the file holds it, its arrays kept compact: converting them to
/// [`Value`]s (32 bytes or more an element) waits until the attributes are asked for.
#[derive(Debug, Clone)]
enum Meta {
    /// A scalar or a string.
    One(Value),
    /// An array of fixed-width values of GGUF type `kind`: their little-endian bytes.
    Scalars { kind: u32, bytes: Vec<u8> },
    /// An array of strings: all of them end to end, and where each one ends.
    Texts { text: String, ends: Vec<usize> },
    /// An array of arrays (or an empty array of an unknown type).
    Arrays(Vec<Meta>),
}

/// Room for `n` more items in `v`, or an error saying the memory could not be had.
fn reserve<T>(v: &mut Vec<T>, n: usize, exact: bool, what: &str) -> Result<()> {
    let r = if exact { v.try_reserve_exact(n) } else { v.try_reserve(n) };
    r.map_err(|_| {
        Error::new(
            ErrorKind::Io,
            format!("no memory for {what} ({n} more items): the system refused the allocation"),
        )
    })
}

impl Meta {
    /// How many attribute values this metadata value becomes (each costs a [`Value`]).
    fn values(&self) -> u64 {
        match self {
            Meta::One(_) => 1,
            Meta::Scalars { kind, bytes } => {
                1 + (bytes.len() / scalar_width(*kind).unwrap_or(1).max(1)) as u64
            }
            Meta::Texts { ends, .. } => 1 + ends.len() as u64,
            Meta::Arrays(arrays) => 1 + arrays.iter().map(Meta::values).sum::<u64>(),
        }
    }

    /// The attribute value of this metadata value.
    fn to_value(&self, what: &str) -> Result<Value> {
        let mut items = Vec::new();
        match self {
            Meta::One(v) => return Ok(v.clone()),
            Meta::Scalars { kind, bytes } => {
                let width = scalar_width(*kind).unwrap_or(1);
                reserve(&mut items, bytes.len() / width, true, what)?;
                items.extend(bytes.chunks_exact(width).map(|b| scalar(*kind, b)));
            }
            Meta::Texts { text, ends } => {
                reserve(&mut items, ends.len(), true, what)?;
                let mut start = 0;
                for &end in ends {
                    let piece = text.get(start..end).unwrap_or_default();
                    let mut s = String::new();
                    s.try_reserve_exact(piece.len()).map_err(|_| {
                        Error::new(ErrorKind::Io, format!("no memory for a string of {what}"))
                    })?;
                    s.push_str(piece);
                    items.push(Value::Text(s));
                    start = end;
                }
            }
            Meta::Arrays(arrays) => {
                reserve(&mut items, arrays.len(), true, what)?;
                for a in arrays {
                    items.push(a.to_value(what)?);
                }
            }
        }
        Ok(Value::Array(items))
    }
}

/// One tensor of a GGUF file.
#[derive(Debug, Clone)]
struct Tensor {
    name: String,
    /// Row-major.
    shape: Vec<u64>,
    kind: std::result::Result<&'static GgmlType, u32>,
    /// Absolute offset in the file.
    offset: u64,
    len: u64,
}

/// A validated GGUF file over any byte source.
#[derive(Debug)]
pub struct GgufFile<S> {
    source: S,
    version: u32,
    /// The metadata key/values in file order, arrays compact.
    metadata: Vec<(String, Meta)>,
    /// The metadata as attributes, built on first demand.
    attributes: OnceLock<Option<Attributes>>,
    alignment: u64,
    tensors: Vec<Tensor>,
    by_name: HashMap<String, usize>,
    blocks: Blocks,
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

/// Sequential reads of the header through one buffer, each checked against the file's
/// length: the source is read in chunks of [`CHUNK`] bytes (or straight into the destination
/// for longer runs), never once per value.
struct Cursor<'a, S> {
    source: &'a S,
    /// The next byte to read.
    at: u64,
    len: u64,
    /// Bytes of the file from `buf_at` on.
    buf: Vec<u8>,
    buf_at: u64,
}

impl<'a, S: ReadAt> Cursor<'a, S> {
    fn new(source: &'a S) -> Cursor<'a, S> {
        Cursor { source, at: 0, len: source.len(), buf: Vec::new(), buf_at: 0 }
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.at)
    }

    /// An error unless `n` more bytes are in the file.
    fn need(&self, n: u64, what: &str) -> Result<()> {
        if n > self.remaining() {
            return Err(malformed(format!(
                "{what} of {n} bytes at byte {} runs past the end of the file ({} bytes)",
                self.at, self.len
            )));
        }
        Ok(())
    }

    fn read_at(&self, at: u64, buf: &mut [u8]) -> Result<()> {
        self.source
            .read_exact_at(at, buf)
            .map_err(|e| Error::new(ErrorKind::Io, format!("reading byte {at}: {e}")))
    }

    /// The buffered bytes from `at` on.
    fn buffered(&self) -> &[u8] {
        self.at
            .checked_sub(self.buf_at)
            .and_then(|skip| usize::try_from(skip).ok())
            .and_then(|skip| self.buf.get(skip..))
            .unwrap_or_default()
    }

    /// Refills the buffer from `at` with up to [`CHUNK`] bytes.
    fn refill(&mut self) -> Result<()> {
        let n = usize::try_from(self.remaining()).unwrap_or(usize::MAX).min(CHUNK);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.resize(n, 0);
        self.read_at(self.at, &mut buf)?;
        self.buf = buf;
        self.buf_at = self.at;
        Ok(())
    }

    /// Appends the next `n` bytes to `out`.
    fn bytes_into(&mut self, n: u64, out: &mut Vec<u8>, what: &str) -> Result<()> {
        self.need(n, what)?;
        // Within the file, so within the address space of any source that holds it.
        let mut left = usize::try_from(n).map_err(|_| malformed(format!("{what} is too large")))?;
        reserve(out, left, false, what)?;
        while left > 0 {
            if self.buffered().is_empty() {
                if left >= CHUNK {
                    // A long run goes straight into its destination.
                    let start = out.len();
                    out.resize(start + left, 0);
                    let at = self.at;
                    self.read_at(at, out.get_mut(start..).unwrap_or_default())?;
                    self.at += n_u64(left);
                    return Ok(());
                }
                self.refill()?;
            }
            let take = self.buffered().len().min(left);
            out.extend_from_slice(self.buffered().get(..take).unwrap_or_default());
            self.at += n_u64(take);
            left -= take;
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        self.need(n_u64(N), what)?;
        if self.buffered().len() < N {
            self.refill()?;
        }
        let mut out = [0u8; N];
        out.copy_from_slice(self.buffered().get(..N).unwrap_or(&[0; N][..]));
        self.at += n_u64(N);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let mut bytes = Vec::new();
        self.bytes_into(n, &mut bytes, what)?;
        String::from_utf8(bytes).map_err(|_| malformed(format!("{what} is not UTF-8")))
    }

    /// An error unless `count` items of at least `each` bytes fit in the rest of the file;
    /// `count` as a `usize`.
    fn count(&self, count: u64, each: u64, what: &str) -> Result<usize> {
        let remaining = self.remaining();
        if count.checked_mul(each).is_none_or(|n| n > remaining) {
            return Err(malformed(format!(
                "{what}: an array of {count} items of at least {each} bytes in {remaining} remaining bytes"
            )));
        }
        usize::try_from(count).map_err(|_| malformed(format!("{what}: {count} items")))
    }

    /// A metadata value of type `kind`.
    fn value(&mut self, kind: u32, depth: usize, what: &str) -> Result<Meta> {
        if let Some(width) = scalar_width(kind) {
            let mut b = [0u8; 8];
            let b = b.get_mut(..width).unwrap_or_default();
            match width {
                1 => b.copy_from_slice(&self.array::<1>(what)?),
                2 => b.copy_from_slice(&self.array::<2>(what)?),
                4 => b.copy_from_slice(&self.array::<4>(what)?),
                _ => b.copy_from_slice(&self.array::<8>(what)?),
            }
            check_bools(kind, b, what)?;
            return Ok(Meta::One(scalar(kind, b)));
        }
        match kind {
            STRING => Ok(Meta::One(Value::Text(self.string(what)?))),
            ARRAY => {
                if depth >= MAX_DEPTH {
                    return Err(malformed(format!(
                        "{what}: arrays nested deeper than {MAX_DEPTH}"
                    )));
                }
                let item = self.u32(what)?;
                let count = self.u64(what)?;
                if let Some(width) = scalar_width(item) {
                    // Every item's bytes are in the file: one read for all of them.
                    let n = self.count(count, n_u64(width), what)?;
                    let mut bytes = Vec::new();
                    reserve(&mut bytes, n.saturating_mul(width), true, what)?;
                    self.bytes_into(count.saturating_mul(n_u64(width)), &mut bytes, what)?;
                    check_bools(item, &bytes, what)?;
                    return Ok(Meta::Scalars { kind: item, bytes });
                }
                match item {
                    STRING => {
                        // Every string takes at least its 8-byte length.
                        let n = self.count(count, 8, what)?;
                        let mut ends = Vec::new();
                        reserve(&mut ends, n, true, what)?;
                        let mut text = Vec::new();
                        for _ in 0..n {
                            let len = self.u64(what)?;
                            let start = text.len();
                            self.bytes_into(len, &mut text, what)?;
                            if std::str::from_utf8(text.get(start..).unwrap_or_default()).is_err() {
                                return Err(malformed(format!(
                                    "{what}: a string that is not UTF-8"
                                )));
                            }
                            ends.push(text.len());
                        }
                        let text = String::from_utf8(text).map_err(|_| {
                            malformed(format!("{what}: a string that is not UTF-8"))
                        })?;
                        Ok(Meta::Texts { text, ends })
                    }
                    ARRAY => {
                        // Every array takes at least its 4-byte type and 8-byte count.
                        let n = self.count(count, 12, what)?;
                        let mut arrays = Vec::new();
                        reserve(&mut arrays, n, true, what)?;
                        for _ in 0..n {
                            arrays.push(self.value(ARRAY, depth + 1, what)?);
                        }
                        Ok(Meta::Arrays(arrays))
                    }
                    // An empty array of any type is an empty array.
                    _ if count == 0 => Ok(Meta::Arrays(Vec::new())),
                    other => Err(malformed(format!("{what}: unknown value type {other}"))),
                }
            }
            other => Err(malformed(format!("{what}: unknown value type {other}"))),
        }
    }
}

/// An error unless every byte of `bytes` (of GGUF type `kind`) is a valid value: booleans
/// are 0 or 1.
fn check_bools(kind: u32, bytes: &[u8], what: &str) -> Result<()> {
    match bytes.iter().find(|&&b| kind == 7 && b > 1) {
        Some(b) => Err(malformed(format!("{what}: a bool of value {b}"))),
        None => Ok(()),
    }
}

/// A count of bytes in memory as a file length (`usize` is at most 64 bits).
fn n_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// An error naming the first two tensors whose data ranges share a byte. Tensors without
/// data (zero-sized or of an unknown type) share nothing.
fn check_overlaps(tensors: &[Tensor]) -> Result<()> {
    let mut ranges: Vec<&Tensor> = Vec::new();
    reserve(&mut ranges, tensors.len(), true, "the tensor table")?;
    ranges.extend(tensors.iter().filter(|t| t.len > 0));
    ranges.sort_unstable_by_key(|t| (t.offset, t.len));
    // Sorted by start, a range that overlaps any later one overlaps the next.
    for pair in ranges.windows(2) {
        if let [a, b] = pair
            && a.offset.saturating_add(a.len) > b.offset
        {
            return Err(malformed(format!(
                "tensors {:?} (bytes {}..{}) and {:?} (bytes {}..{}) overlap: each tensor's data must be its own",
                a.name,
                a.offset,
                a.offset.saturating_add(a.len),
                b.name,
                b.offset,
                b.offset.saturating_add(b.len)
            )));
        }
    }
    Ok(())
}

impl GgufFile<FileSource> {
    /// Opens the GGUF file at `path`.
    ///
    /// # Errors
    /// As [`GgufFile::new`], with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile<FileSource>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot read", path, e))?;
        GgufFile::new(source).map_err(|e| e.with_path(path))
    }
}

impl<S: ReadAt> GgufFile<S> {
    /// Reads and checks the GGUF header, metadata and tensor table in `source`.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a file that is not GGUF version 2 or 3 (little-endian), or
    /// whose counts, strings, alignment, tensor shapes, types or offsets do not fit the file;
    /// I/O errors.
    pub fn new(source: S) -> Result<GgufFile<S>> {
        let len = source.len();
        let mut c = Cursor::new(&source);
        if c.array::<4>("the magic")? != MAGIC {
            return Err(malformed("no GGUF magic"));
        }
        let version = c.u32("the version")?;
        if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
            return Err(malformed("a big-endian GGUF file: this reader reads little-endian ones"));
        }
        if !(2..=3).contains(&version) {
            return Err(malformed(format!("GGUF version {version}: this reader knows 2 and 3")));
        }
        let tensor_count = c.u64("the tensor count")?;
        let kv_count = c.u64("the metadata count")?;
        // A key/value takes at least 12 bytes, a tensor entry at least 24.
        if kv_count > len / 12 || tensor_count > len / 24 {
            return Err(malformed(format!(
                "{tensor_count} tensors and {kv_count} metadata entries claimed in {len} bytes"
            )));
        }
        // Room grows with what is read, not with what the counts claim.
        let mut metadata: Vec<(String, Meta)> = Vec::new();
        let mut keys = HashSet::new();
        let mut alignment = 32u64;
        for _ in 0..kv_count {
            let key = c.string("a metadata key")?;
            let kind = c.u32("a metadata value type")?;
            let value = c.value(kind, 0, &format!("metadata {key:?}"))?;
            if !keys.insert(key.clone()) {
                return Err(malformed(format!("metadata key {key:?} appears twice")));
            }
            if key == "general.alignment" {
                alignment = match (&value, kind) {
                    (Meta::One(v), 4) if v.as_u64().is_some_and(u64::is_power_of_two) => {
                        v.as_u64().unwrap_or(32)
                    }
                    (Meta::One(v), _) => {
                        return Err(malformed(format!(
                            "general.alignment must be a power-of-two u32, not {v:?} (value type {kind})"
                        )));
                    }
                    _ => {
                        return Err(malformed(
                            "general.alignment must be a power-of-two u32, not an array",
                        ));
                    }
                };
            }
            reserve(&mut metadata, 1, false, "the metadata")?;
            metadata.push((key, value));
        }
        let mut tensors = Vec::new();
        let mut by_name = HashMap::new();
        for i in 0..tensor_count {
            let name = c.string("a tensor name")?;
            let dims = c.u32("a tensor's dimension count")?;
            if dims > MAX_DIMS {
                return Err(malformed(format!(
                    "tensor {name:?}: {dims} dimensions (at most {MAX_DIMS})"
                )));
            }
            let mut shape = Vec::with_capacity(dims as usize);
            for _ in 0..dims {
                shape.push(c.u64("a tensor dimension")?);
            }
            shape.reverse();
            let id = c.u32("a tensor type")?;
            let offset = c.u64("a tensor offset")?;
            by_name.try_reserve(1).map_err(|_| {
                Error::new(ErrorKind::Io, "no memory for the tensor table".to_owned())
            })?;
            if by_name.insert(name.clone(), usize::try_from(i).unwrap_or(usize::MAX)).is_some() {
                return Err(malformed(format!("tensor {name:?} appears twice")));
            }
            reserve(&mut tensors, 1, false, "the tensor table")?;
            tensors.push((name, shape, id, offset));
        }
        let data_start = c.at.div_ceil(alignment).saturating_mul(alignment);
        if data_start > len {
            return Err(malformed("the data section starts past the end of the file"));
        }
        let data_len = len - data_start;
        let tensors = tensors
            .into_iter()
            .map(|(name, shape, id, offset)| {
                let bad = |m: String| malformed(format!("tensor {name:?}: {m}"));
                if offset % alignment != 0 {
                    return Err(bad(format!("offset {offset} is not a multiple of the alignment {alignment}")));
                }
                let elements = shape
                    .iter()
                    .try_fold(1u64, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
                let (kind, size) = match ggml_type(id) {
                    Some(t) => {
                        if elements % t.block != 0 {
                            return Err(bad(format!(
                                "{elements} elements are not whole blocks of {} ({})",
                                t.block, t.name
                            )));
                        }
                        (Ok(t), (elements / t.block).checked_mul(t.size))
                    }
                    // An unknown type: its size is unknown, so nothing is read.
                    None => (Err(id), Some(0)),
                };
                let size = size.ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
                if offset.checked_add(size).is_none_or(|end| end > data_len) {
                    return Err(bad(format!(
                        "{size} bytes at offset {offset} of the data section run past its end ({data_len} bytes)"
                    )));
                }
                Ok(Tensor { name, shape, kind, offset: data_start + offset, len: size })
            })
            .collect::<Result<Vec<_>>>()?;
        check_overlaps(&tensors)?;
        Ok(GgufFile {
            source,
            version,
            metadata,
            attributes: OnceLock::new(),
            alignment,
            tensors,
            by_name,
            blocks: Blocks::default(),
        })
    }

    /// Presents the quantized tensors as `blocks` says: as bytes (the default, what every
    /// target holds) or in zTensor 2's layouts (what a conversion to zTensor 2 reads).
    pub fn with_blocks(mut self, blocks: Blocks) -> GgufFile<S> {
        self.blocks = blocks;
        self
    }

    /// The metadata as file attributes (a text map), or `None` for a file without metadata.
    /// Built on first demand and kept, in deterministic CBOR: one key's values are decoded into
    /// a [`Value`] tree at a time, and only that key's are held as a tree.
    ///
    /// # Errors
    /// An [`ErrorKind::Io`] error when the memory for the values cannot be had, rather than an
    /// abort of the process.
    pub fn try_attributes(&self) -> Result<Option<&Attributes>> {
        if let Some(built) = self.attributes.get() {
            return Ok(built.as_ref());
        }
        // Each value costs tens of bytes however few the file spends on it: the same budget
        // as a zTensor manifest's values, fitted to this machine.
        let budget = ztensor_io::machine_limits().max_manifest_values;
        let values: u64 = self.metadata.iter().map(|(_, m)| m.values()).sum();
        if values > budget {
            return Err(Error::from(ztensor_format::Error::new(
                ztensor_format::ErrorKind::ManifestTooLarge,
                format!(
                    "the GGUF metadata holds {values} values, over the limit of {budget} \
                     attribute values (about {} MiB of memory)",
                    budget.saturating_mul(std::mem::size_of::<Value>() as u64) >> 20
                ),
            )));
        }
        let built = if self.metadata.is_empty() {
            None
        } else {
            // An indefinite-length map of each key's encoding, made deterministic at the end.
            let mut map = vec![0xbf];
            for (key, meta) in &self.metadata {
                let value = meta.to_value(&format!("metadata {key:?}"))?;
                ztensor_format::cbor::encode_into(&Value::Text(key.clone()), &mut map)?;
                ztensor_format::cbor::encode_into(&value, &mut map)?;
            }
            map.push(0xff);
            Some(Attributes::from_cbor(&map, usize::MAX)?)
        };
        Ok(self.attributes.get_or_init(|| built).as_ref())
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
}
