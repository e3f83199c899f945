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
//!   profiles are a format no 0.1/1.x reader knows.
//! - Every count, length and offset is checked against the file: strings, arrays and tensor
//!   tables cannot claim more than the file holds, offsets must be aligned, and each tensor's
//!   data must lie within the data section.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use ztensor_format::{DType, Encoding, Format, StorageType, Value};
use ztensor_io::{
    ComponentData, ComponentInfo, FileSource, ObjectData, ObjectInfo, RawRange, ReadAt,
    TensorSource, role,
};

use crate::error::{Error, ErrorKind, Result};

/// The first bytes of every GGUF file.
pub const MAGIC: &[u8] = b"GGUF";

/// The attribute key holding a quantized tensor's GGML type name.
pub const TYPE_KEY: &str = "gguf.type";
/// The attribute key holding a quantized tensor's logical shape (row-major).
pub const SHAPE_KEY: &str = "gguf.shape";

/// Whether `head` starts like a GGUF file.
pub fn looks_like_gguf(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// A GGML tensor type: its name, elements per block and bytes per block, and the zTensor type
/// of plain (block size 1) types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    /// The type number in the file.
    pub id: u32,
    /// Its name (`Q4_K`, `F16`, …).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block: u64,
    /// Bytes per block.
    pub size: u64,
    /// The zTensor storage type of a plain type.
    pub dtype: Option<DType>,
}

const fn t(id: u32, name: &'static str, block: u64, size: u64, dtype: Option<DType>) -> GgmlType {
    GgmlType { id, name, block, size, dtype }
}

/// Every GGML type this reader knows (ggml's `ggml_type`; numbers 4, 5 and 31-33 are retired).
pub const TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4, Some(DType::F32)),
    t(1, "F16", 1, 2, Some(DType::F16)),
    t(2, "Q4_0", 32, 18, None),
    t(3, "Q4_1", 32, 20, None),
    t(6, "Q5_0", 32, 22, None),
    t(7, "Q5_1", 32, 24, None),
    t(8, "Q8_0", 32, 34, None),
    t(9, "Q8_1", 32, 40, None),
    t(10, "Q2_K", 256, 84, None),
    t(11, "Q3_K", 256, 110, None),
    t(12, "Q4_K", 256, 144, None),
    t(13, "Q5_K", 256, 176, None),
    t(14, "Q6_K", 256, 210, None),
    t(15, "Q8_K", 256, 292, None),
    t(16, "IQ2_XXS", 256, 66, None),
    t(17, "IQ2_XS", 256, 74, None),
    t(18, "IQ3_XXS", 256, 98, None),
    t(19, "IQ1_S", 256, 50, None),
    t(20, "IQ4_NL", 32, 18, None),
    t(21, "IQ3_S", 256, 110, None),
    t(22, "IQ2_S", 256, 82, None),
    t(23, "IQ4_XS", 256, 136, None),
    t(24, "I8", 1, 1, Some(DType::I8)),
    t(25, "I16", 1, 2, Some(DType::I16)),
    t(26, "I32", 1, 4, Some(DType::I32)),
    t(27, "I64", 1, 8, Some(DType::I64)),
    t(28, "F64", 1, 8, Some(DType::F64)),
    t(29, "IQ1_M", 256, 56, None),
    t(30, "BF16", 1, 2, Some(DType::BF16)),
    t(34, "TQ1_0", 256, 54, None),
    t(35, "TQ2_0", 256, 66, None),
    t(39, "MXFP4", 32, 17, None),
    t(40, "NVFP4", 64, 36, None),
    t(41, "Q1_0", 128, 18, None),
];

/// The GGML type of number `id`.
pub fn ggml_type(id: u32) -> Option<&'static GgmlType> {
    TYPES.iter().find(|t| t.id == id)
}

/// Most dimensions a tensor may have (ggml uses 4).
const MAX_DIMS: u32 = 8;
/// Most nesting of metadata arrays.
const MAX_DEPTH: usize = 8;

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
    attributes: Option<Value>,
    alignment: u64,
    tensors: Vec<Tensor>,
    by_name: std::collections::HashMap<String, usize>,
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

/// Sequential reads of the header, each checked against the file's length.
struct Cursor<'a, S> {
    source: &'a S,
    at: u64,
    len: u64,
}

impl<S: ReadAt> Cursor<'_, S> {
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.len.saturating_sub(self.at) {
            return Err(malformed(format!(
                "{what} of {n} bytes at byte {} runs past the end of the file ({} bytes)",
                self.at, self.len
            )));
        }
        let mut buf = vec![0u8; usize::try_from(n).map_err(|_| malformed("too large"))?];
        self.source
            .read_exact_at(self.at, &mut buf)
            .map_err(|e| Error::new(ErrorKind::Io, format!("reading byte {}: {e}", self.at)))?;
        self.at += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let v = self.bytes(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&v);
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
        let bytes = self.bytes(n, what)?;
        String::from_utf8(bytes).map_err(|_| malformed(format!("{what} is not UTF-8")))
    }

    /// A metadata value of type `kind`.
    fn value(&mut self, kind: u32, depth: usize, what: &str) -> Result<Value> {
        Ok(match kind {
            0 => Value::from(u64::from(self.array::<1>(what)?[0])),
            1 => Value::Integer(i128::from(i8::from_le_bytes(self.array(what)?))),
            2 => Value::from(u64::from(u16::from_le_bytes(self.array(what)?))),
            3 => Value::Integer(i128::from(i16::from_le_bytes(self.array(what)?))),
            4 => Value::from(u64::from(self.u32(what)?)),
            5 => Value::Integer(i128::from(i32::from_le_bytes(self.array(what)?))),
            6 => Value::Float(f64::from(f32::from_le_bytes(self.array(what)?))),
            7 => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(malformed(format!("{what}: a bool of value {b}"))),
            },
            8 => Value::Text(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(malformed(format!(
                        "{what}: arrays nested deeper than {MAX_DEPTH}"
                    )));
                }
                let item = self.u32(what)?;
                let count = self.u64(what)?;
                // Every item takes at least one byte of the file.
                if count > self.len.saturating_sub(self.at) {
                    return Err(malformed(format!(
                        "{what}: an array of {count} items in {} remaining bytes",
                        self.len.saturating_sub(self.at)
                    )));
                }
                let mut items =
                    Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 16));
                for _ in 0..count {
                    items.push(self.value(item, depth + 1, what)?);
                }
                Value::Array(items)
            }
            10 => Value::from(self.u64(what)?),
            11 => Value::Integer(i128::from(i64::from_le_bytes(self.array(what)?))),
            12 => Value::Float(f64::from_le_bytes(self.array(what)?)),
            other => return Err(malformed(format!("{what}: unknown value type {other}"))),
        })
    }
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
        let mut c = Cursor { source: &source, at: 0, len };
        if c.bytes(4, "the magic")? != MAGIC {
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
        let mut entries = Vec::with_capacity(usize::try_from(kv_count).unwrap_or(0).min(1 << 16));
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
                alignment = match (value.as_u64(), kind) {
                    (Some(a), 4) if a.is_power_of_two() => a,
                    _ => {
                        return Err(malformed(format!(
                            "general.alignment must be a power-of-two u32, not {value:?}"
                        )));
                    }
                };
            }
            entries.push((Value::Text(key), value));
        }
        let mut tensors =
            Vec::with_capacity(usize::try_from(tensor_count).unwrap_or(0).min(1 << 16));
        let mut by_name = std::collections::HashMap::new();
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
            if by_name.insert(name.clone(), usize::try_from(i).unwrap_or(usize::MAX)).is_some() {
                return Err(malformed(format!("tensor {name:?} appears twice")));
            }
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
        let attributes = (!entries.is_empty()).then_some(Value::Map(entries));
        Ok(GgufFile { source, version, attributes, alignment, tensors, by_name })
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

fn quantized_attributes(t: &Tensor, ty: &GgmlType) -> Value {
    ztensor_format::text_map([
        (TYPE_KEY, Value::Text(ty.name.to_owned())),
        (SHAPE_KEY, Value::Array(t.shape.iter().map(|&d| Value::from(d)).collect())),
    ])
}

impl<S: ReadAt> GgufFile<S> {
    fn layout(&self, t: &Tensor) -> (StorageType, Vec<u64>, Option<Value>, Option<String>) {
        match t.kind {
            Ok(ty) => match ty.dtype {
                Some(d) => (StorageType::from(d), t.shape.clone(), None, None),
                None => (
                    StorageType::from(DType::U8),
                    vec![t.len],
                    Some(quantized_attributes(t, ty)),
                    None,
                ),
            },
            Err(id) => (
                StorageType::Unknown(format!("ggml type {id}")),
                t.shape.clone(),
                None,
                Some(format!("GGML type {id} is not one this reader knows")),
            ),
        }
    }
}

impl<S: ReadAt> TensorSource for GgufFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("GGUF version {}", self.version))
    }

    fn attributes(&self) -> Option<Cow<'_, Value>> {
        self.attributes.as_ref().map(Cow::Borrowed)
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("GGUF metadata")
    }

    fn len(&self) -> usize {
        self.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let t = self.tensors.get(index)?;
        let (dtype, shape, attributes, unsupported) = self.layout(t);
        Some(ObjectInfo {
            name: Cow::Borrowed(&t.name),
            shape: Cow::Owned(shape),
            format: Format::Dense,
            attributes: attributes.map(Cow::Owned),
            components: vec![ComponentInfo {
                role: Cow::Borrowed(role::DATA),
                dtype,
                logical_type: None,
                decoded_len: Some(t.len),
                stored_len: t.len,
                offset: Some(t.offset),
                encoding: Encoding::Raw,
                digest: None,
            }],
            unsupported,
            location: None,
        })
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let t = self
            .tensors
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        let (dtype, shape, attributes, unsupported) = self.layout(t);
        if let Some(reason) = unsupported {
            return Err(ztensor_io::Error::unsupported(
                ztensor_format::Error::new(ztensor_format::ErrorKind::DtypeUnknown, reason)
                    .in_object(&t.name),
            ));
        }
        let dtype = dtype.known().unwrap_or(DType::U8);
        let bytes = match self.source.as_slice() {
            Some(all) => Cow::Borrowed(
                usize::try_from(t.offset)
                    .ok()
                    .and_then(|s| all.get(s..s.checked_add(usize::try_from(t.len).ok()?)?))
                    .unwrap_or_default(),
            ),
            None => {
                let mut buf = vec![0u8; usize::try_from(t.len).unwrap_or(0)];
                self.source.read_exact_at(t.offset, &mut buf).map_err(|e| {
                    ztensor_io::Error::io(format!("reading tensor {:?}", t.name), None, e)
                })?;
                Cow::Owned(buf)
            }
        };
        let mut components = BTreeMap::new();
        components
            .insert(role::DATA.to_owned(), ComponentData { dtype, logical_type: None, bytes });
        Ok(ObjectData {
            name: t.name.clone(),
            shape,
            format: Format::Dense,
            attributes: attributes.map(Cow::Owned),
            components,
        })
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let t = self.tensors.get(index)?;
        t.kind.is_ok().then_some(RawRange { source: &self.source, offset: t.offset, len: t.len })
    }
}
