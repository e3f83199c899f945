//! NumPy `.npy` files in: one array, read as a tensor source of one dense object named after
//! the file.
//!
//! The header is the format's Python dict literal (`{'descr': '<f4', 'fortran_order': False,
//! 'shape': (2, 3), }`), read by a small parser that accepts exactly that shape and nothing a
//! Python interpreter would have to run. Every simple dtype zTensor holds is read: booleans,
//! integers, `f2`/`f4`/`f8`, and `c8`/`c16` as `f32`/`f64` with the `complex64`/`complex128`
//! logical type; big-endian arrays are swapped and Fortran-order arrays transposed to C order
//! when read. Object arrays (pickled Python objects) are never unpickled: like structured,
//! string and date types they are objects that cannot be decoded, with the reason.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use ztensor_format::{DType, Encoding, Format, LogicalType, StorageType};
use ztensor_io::{
    ComponentData, ComponentInfo, FileSource, ObjectData, ObjectInfo, RawRange, ReadAt,
    TensorSource, role,
};

use crate::archive::At;
use crate::error::{Error, ErrorKind, Result};

/// The first bytes of every `.npy` file.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// The longest header read (NumPy writes a few hundred bytes; it refuses past 10,000 by
/// default).
pub const MAX_HEADER: u64 = 1 << 20;

/// The zTensor storage and logical types of a NumPy dtype, or why it has none.
type Types = std::result::Result<(DType, Option<LogicalType>), String>;

/// A validated `.npy` file over any byte source.
#[derive(Debug)]
pub struct NpyFile<S> {
    source: S,
    name: String,
    version: (u8, u8),
    descr: String,
    /// The zTensor types, or why there are none.
    types: Types,
    /// The width of the units to byte-swap (big-endian data), if any.
    swap: Option<usize>,
    fortran: bool,
    shape: Vec<u64>,
    offset: u64,
    len: u64,
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

impl NpyFile<FileSource> {
    /// Opens the `.npy` file at `path`; its object is named after the file (`w` for `w.npy`).
    ///
    /// # Errors
    /// As [`NpyFile::new`], with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> Result<NpyFile<FileSource>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot read", path, e))?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("array").to_owned();
        NpyFile::new(source, &name).map_err(|e| e.with_path(path))
    }
}

impl<S: ReadAt> NpyFile<S> {
    /// Reads and checks the header of the `.npy` bytes in `source`, whose array is called
    /// `name`: magic, version 1.0 to 3.0, a header within [`MAX_HEADER`] and the file, a dict
    /// of exactly `descr`, `fortran_order` and `shape`, and data of exactly the length the dtype
    /// and shape give.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for any of that, and I/O errors.
    pub fn new(source: S, name: &str) -> Result<NpyFile<S>> {
        let file_len = source.len();
        let read = |at: u64, n: u64| -> Result<Vec<u8>> {
            let mut buf = vec![0u8; usize::try_from(n).map_err(|_| malformed("too large"))?];
            source
                .read_exact_at(at, &mut buf)
                .map_err(|e| Error::new(ErrorKind::Io, format!("reading byte {at}: {e}")))?;
            Ok(buf)
        };
        if file_len < 10 {
            return Err(malformed(format!("{file_len} bytes: shorter than a .npy preamble")));
        }
        let pre = read(0, 12.min(file_len))?;
        if !pre.starts_with(MAGIC) {
            return Err(malformed("no .npy magic (\\x93NUMPY)"));
        }
        let version = (pre[6], pre[7]);
        let (header_at, header_len) = match version.0 {
            1 => (10u64, u64::from(u16::from_le_bytes([pre[8], pre[9]]))),
            2 | 3 if pre.len() >= 12 => {
                (12u64, u64::from(u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]])))
            }
            _ => {
                return Err(malformed(format!(
                    ".npy version {}.{}: this reader knows 1.0, 2.0 and 3.0",
                    version.0, version.1
                )));
            }
        };
        if header_len > MAX_HEADER || header_at + header_len > file_len {
            return Err(malformed(format!(
                "a header of {header_len} bytes (the file has {file_len}; at most {MAX_HEADER} read)"
            )));
        }
        let raw_header = read(header_at, header_len)?;
        // Versions 1 and 2 are latin-1; 3 is UTF-8. Keys and values read here are ASCII.
        let header: String = if version.0 == 3 {
            String::from_utf8(raw_header).map_err(|_| malformed("a header that is not UTF-8"))?
        } else {
            raw_header.iter().map(|&b| char::from(b)).collect()
        };
        let parsed = Header::parse(&header)?;
        let (types, width) = types_of(&parsed.descr);
        let swap = match (parsed.descr.as_bytes().first(), width) {
            (Some(b'>'), Some(w)) if w > 1 => Some(w),
            (Some(b'='), Some(w)) if w > 1 && cfg!(target_endian = "big") => Some(w),
            _ => None,
        };
        let offset = header_at + header_len;
        let itemsize = itemsize(&parsed.descr).unwrap_or(0);
        let elements =
            parsed.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| {
                malformed(format!("shape {:?} has more elements than can be counted", parsed.shape))
            })?;
        let len = elements.checked_mul(itemsize).ok_or_else(|| {
            malformed(format!("shape {:?} of {itemsize}-byte elements overflows", parsed.shape))
        })?;
        if types.is_ok() && offset + len != file_len {
            return Err(malformed(format!(
                "shape {:?} of {} needs {len} bytes of data; the file has {} after the header",
                parsed.shape,
                parsed.descr,
                file_len - offset
            )));
        }
        Ok(NpyFile {
            source,
            name: name.to_owned(),
            version,
            descr: parsed.descr,
            types,
            swap,
            fortran: parsed.fortran,
            shape: parsed.shape,
            offset,
            len: if itemsize == 0 { file_len - offset } else { len },
        })
    }

    /// The NumPy dtype string, e.g. `<f4`.
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// Whether the data is in Fortran (column-major) order.
    pub fn fortran_order(&self) -> bool {
        self.fortran
    }

    /// Whether the stored bytes are already the C-order little-endian bytes zTensor holds.
    fn as_stored(&self) -> bool {
        self.types.is_ok()
            && self.swap.is_none()
            && (!self.fortran || self.shape.iter().filter(|&&d| d > 1).count() <= 1)
    }

    fn unsupported(&self) -> ztensor_io::Error {
        let reason = self.types.as_ref().err().cloned().unwrap_or_default();
        ztensor_io::Error::unsupported(crate::error::unknown_dtype(reason, &self.name))
    }
}

/// The parsed header dict.
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<u64>,
}

/// A cursor over the header text.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        if self.text.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(malformed(format!("header: expected '{}' at byte {}", char::from(c), self.at)))
        }
    }

    /// A quoted string without escapes (what NumPy writes for keys and simple dtypes).
    fn string(&mut self) -> Result<String> {
        self.skip_space();
        let quote =
            *self.text.get(self.at).filter(|&&q| q == b'\'' || q == b'"').ok_or_else(|| {
                malformed(format!("header: expected a string at byte {}", self.at))
            })?;
        let start = self.at + 1;
        let end = self.text[start..]
            .iter()
            .position(|&c| c == quote || c == b'\\')
            .map(|p| start + p)
            .ok_or_else(|| malformed("header: an unterminated string"))?;
        if self.text[end] == b'\\' {
            return Err(malformed("header: escapes in a string"));
        }
        self.at = end + 1;
        Ok(String::from_utf8_lossy(&self.text[start..end]).into_owned())
    }

    fn word(&mut self) -> &[u8] {
        self.skip_space();
        let start = self.at;
        while self.text.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            self.at += 1;
        }
        &self.text[start..self.at]
    }
}

impl Header {
    fn parse(text: &str) -> Result<Header> {
        let mut p = Parser { text: text.as_bytes(), at: 0 };
        p.expect(b'{')?;
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        loop {
            if p.eat(b'}') {
                break;
            }
            let key = p.string()?;
            p.expect(b':')?;
            match key.as_str() {
                "descr" => {
                    p.skip_space();
                    if p.text.get(p.at) == Some(&b'[') {
                        return Err(malformed(
                            "a structured dtype (fields): this reader reads simple arrays",
                        ));
                    }
                    descr = Some(p.string()?);
                }
                "fortran_order" => {
                    fortran = Some(match p.word() {
                        b"True" => true,
                        b"False" => false,
                        other => {
                            return Err(malformed(format!(
                                "header: fortran_order {:?}",
                                String::from_utf8_lossy(other)
                            )));
                        }
                    });
                }
                "shape" => {
                    p.expect(b'(')?;
                    let mut dims = Vec::new();
                    while !p.eat(b')') {
                        let digits = p.word();
                        let dim = std::str::from_utf8(digits)
                            .ok()
                            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                            .and_then(|d| d.parse::<u64>().ok())
                            .ok_or_else(|| malformed("header: a shape of other than integers"))?;
                        dims.push(dim);
                        if dims.len() > 64 {
                            return Err(malformed("header: a shape of more than 64 dimensions"));
                        }
                        if !p.eat(b',') {
                            p.expect(b')')?;
                            break;
                        }
                    }
                    shape = Some(dims);
                }
                other => return Err(malformed(format!("header: unknown key {other:?}"))),
            }
            if !p.eat(b',') {
                p.expect(b'}')?;
                break;
            }
        }
        if p.text[p.at..].iter().any(|c| !c.is_ascii_whitespace()) {
            return Err(malformed("header: text after the dict"));
        }
        match (descr, fortran, shape) {
            (Some(descr), Some(fortran), Some(shape)) => Ok(Header { descr, fortran, shape }),
            _ => Err(malformed("header: descr, fortran_order and shape are all required")),
        }
    }
}

/// The size of one element of `descr`, when it is a simple type string.
fn itemsize(descr: &str) -> Option<u64> {
    let rest = descr.get(1..)?;
    let kind = rest.get(..1)?;
    let digits = &rest[1..];
    let n: u64 = digits.parse().ok()?;
    match kind {
        "U" => n.checked_mul(4),
        _ => Some(n),
    }
}

/// The zTensor types of a NumPy dtype string (or why there are none), and the width of the
/// units a big-endian array swaps.
fn types_of(descr: &str) -> (Types, Option<usize>) {
    let order = descr.as_bytes().first().copied();
    if !matches!(order, Some(b'<' | b'>' | b'|' | b'=')) {
        return (Err(format!("dtype {descr:?}: no byte-order mark")), None);
    }
    let types = match &descr[1..] {
        "b1" => (DType::Bool, None),
        "i1" => (DType::I8, None),
        "u1" => (DType::U8, None),
        "i2" => (DType::I16, None),
        "u2" => (DType::U16, None),
        "i4" => (DType::I32, None),
        "u4" => (DType::U32, None),
        "i8" => (DType::I64, None),
        "u8" => (DType::U64, None),
        "f2" => (DType::F16, None),
        "f4" => (DType::F32, None),
        "f8" => (DType::F64, None),
        "c8" => (DType::F32, Some(LogicalType::Complex64)),
        "c16" => (DType::F64, Some(LogicalType::Complex128)),
        t if t.starts_with('O') => {
            return (
                Err(format!(
                    "dtype {descr:?}: an object array (pickled Python objects), which is never unpickled"
                )),
                None,
            );
        }
        _ => return (Err(format!("dtype {descr:?} has no zTensor type")), None),
    };
    let width = usize::try_from(types.0.size()).ok();
    (Ok(types), width)
}

impl<S: ReadAt> NpyFile<S> {
    /// Where the array's data starts, after the header.
    pub(crate) fn data_offset(&self) -> u64 {
        self.offset
    }

    /// The array's data, read in order from `input` (the bytes after the header), placed into
    /// one buffer of the array's size, in C order and little-endian: a Fortran-ordered array
    /// is scattered element by element as it streams in, so no second copy of it is ever made.
    /// `failed` reports the stream's errors.
    pub(crate) fn place(
        &self,
        input: &mut dyn Read,
        failed: &dyn Fn(std::io::Error) -> ztensor_io::Error,
    ) -> ztensor_io::Result<Vec<u8>> {
        let (dtype, logical_type) = self.types.clone().map_err(|_| self.unsupported())?;
        let mut out = ztensor_io::try_zeroed(self.len, &format!("array {:?}", self.name))
            .map_err(|e| ztensor_io::Error::io("reading", None, e))?;
        let transpose = self.fortran && self.shape.iter().filter(|&&d| d > 1).count() > 1;
        if transpose {
            let size = usize::try_from(dtype.size()).unwrap_or(1)
                * if logical_type.is_some() { 2 } else { 1 };
            scatter_fortran(input, &mut out, &self.shape, size).map_err(failed)?;
        } else {
            input.read_exact(&mut out).map_err(failed)?;
        }
        if let Some(width) = self.swap {
            // Units lie within elements, so swapping after placing is the same as before.
            ztensor_format::data::swap_bytes(&mut out, width);
        }
        Ok(out)
    }

    /// The array as an object, its data `data` (from [`NpyFile::place`]).
    pub(crate) fn object(&self, data: Vec<u8>) -> ztensor_io::Result<ObjectData<'static>> {
        let (dtype, logical_type) = self.types.clone().map_err(|_| self.unsupported())?;
        let mut components = BTreeMap::new();
        components.insert(
            role::DATA.to_owned(),
            ComponentData { dtype, logical_type, bytes: Cow::Owned(data) },
        );
        Ok(ObjectData {
            name: self.name.clone(),
            shape: self.shape.clone(),
            format: Format::Dense,
            attributes: None,
            components,
        })
    }
}

/// Reads elements of `size` bytes in Fortran order (the first index varies fastest) from
/// `input` and writes each at its C-order place in `out` (whose length is the array's).
fn scatter_fortran(
    input: &mut dyn Read,
    out: &mut [u8],
    shape: &[u64],
    size: usize,
) -> std::io::Result<()> {
    let dims: Vec<usize> = shape.iter().map(|&d| usize::try_from(d).unwrap_or(0)).collect();
    if size == 0 || dims.contains(&0) {
        return Ok(());
    }
    // C strides, in elements: the last index varies fastest.
    let mut strides = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let mut index = vec![0usize; dims.len()];
    // The C-order element the next Fortran-order element goes to.
    let mut c = 0usize;
    let mut chunk = vec![0u8; (1 << 20) / size * size + size];
    let mut left = out.len() / size;
    while left > 0 {
        let n = left.min(chunk.len() / size);
        let part = &mut chunk[..n * size];
        input.read_exact(part)?;
        for element in part.chunks_exact(size) {
            let at = c * size;
            out.get_mut(at..at + size)
                .ok_or_else(|| std::io::Error::other("an element outside the array"))?
                .copy_from_slice(element);
            // The next Fortran-order index, and its C-order place.
            for k in 0..dims.len() {
                index[k] += 1;
                c += strides[k];
                if index[k] < dims[k] {
                    break;
                }
                c -= dims[k] * strides[k];
                index[k] = 0;
            }
        }
        left -= n;
    }
    Ok(())
}

impl<S: ReadAt> TensorSource for NpyFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("NumPy .npy (version {}.{})", self.version.0, self.version.1))
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        None
    }

    fn len(&self) -> usize {
        1
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        (index == 0).then(|| {
            let (dtype, logical_type) = match &self.types {
                Ok((d, l)) => (StorageType::from(*d), l.clone()),
                Err(_) => (StorageType::Unknown(self.descr.as_str().into()), None),
            };
            ObjectInfo {
                name: Cow::Borrowed(&self.name),
                shape: Cow::Borrowed(&self.shape),
                format: Format::Dense,
                attributes: None,
                components: vec![ComponentInfo {
                    role: Cow::Borrowed(role::DATA),
                    dtype,
                    logical_type,
                    decoded_len: Some(self.len),
                    stored_len: self.len,
                    offset: Some(self.offset),
                    encoding: Encoding::Raw,
                    digest: None,
                }],
                unsupported: self
                    .types
                    .as_ref()
                    .err()
                    .map(|reason| crate::error::unknown_dtype(reason.as_str(), &self.name)),
                location: None,
            }
        })
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        if index != 0 {
            return Err(ztensor_io::Error::not_found(&format!("#{index}"), None));
        }
        let mut input = At { source: &self.source, at: self.offset, end: self.offset + self.len };
        let at = self.offset;
        let failed = move |e: std::io::Error| {
            ztensor_io::Error::io(format!("reading the array at byte {at}"), None, e)
        };
        let data = self.place(&mut input, &failed)?;
        self.object(data)
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        (index == 0 && self.as_stored()).then_some(RawRange {
            source: &self.source,
            offset: self.offset,
            len: self.len,
        })
    }
}
