//! safetensors files in and out.
//!
//! Reading: the header is parsed and validated by the `safetensors` crate's own metadata type
//! (the validation every safetensors loader applies: tensors tile the data section in order,
//! sizes match dtype and shape, no overflow), after this module has bounded the header length
//! by the file's length and by the crate's 100 MB limit. The data is then read with positional
//! reads, or borrowed when the source is a memory map, one tensor at a time; nothing is loaded
//! whole.
//!
//! Writing: the layout the `safetensors` crate writes (tensors ordered by descending dtype
//! alignment, then name; header padded with spaces to 8 bytes), with `__metadata__` keys
//! sorted so the output is deterministic, streamed one decoded tensor at a time through a
//! temporary file renamed over the target.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use safetensors::Dtype;
use ztensor_format::{Attributes, DType, Encoding, Format, StorageType, Value};
use ztensor_io::{
    ComponentData, ComponentInfo, FileSource, Mapped, ObjectData, ObjectInfo, RawRange, ReadAt,
    TensorSource, role,
};

use crate::error::{Error, ErrorKind, Result};

mod types;
mod write;

pub use types::{
    CARRIED_DTYPE, CARRIED_SHAPE, MAX_HEADER_LEN, mx_type, safetensors_dtype, ztensor_type,
};
pub use write::SafetensorsSink;

/// One tensor of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its safetensors dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Where its bytes start, from the start of the file.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
}

/// A validated safetensors file over any source.
#[derive(Debug)]
pub struct SafetensorsFile<S> {
    source: S,
    tensors: Vec<TensorInfo>,
    by_name: ztensor_format::NameIndex,
    metadata: BTreeMap<String, String>,
    carry_unknown: bool,
}

/// The header, read straight into the tensor list: one copy of each name, no map of every
/// entry beside it (the `safetensors` crate's own `Metadata` holds three). Offsets are still
/// relative to the data.
struct Header {
    tensors: Vec<TensorInfo>,
    metadata: BTreeMap<String, String>,
}

/// One tensor as the header describes it.
#[derive(serde::Deserialize)]
struct Entry {
    dtype: Dtype,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

impl<'de> serde::Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Header;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of tensor names to their dtype, shape and data offsets")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Header, A::Error> {
                use serde::de::Error as _;
                let mut tensors = Vec::new();
                let mut metadata = None;
                while let Some(name) = map.next_key::<String>()? {
                    if name == "__metadata__" {
                        if metadata.is_some() {
                            return Err(A::Error::custom("__metadata__ is given twice"));
                        }
                        let m: Option<BTreeMap<String, String>> = map.next_value()?;
                        metadata = Some(m.unwrap_or_default());
                        continue;
                    }
                    let Entry { dtype, shape, data_offsets: (start, end) } = map
                        .next_value()
                        .map_err(|e| A::Error::custom(format!("tensor {name:?}: {e}")))?;
                    if end < start {
                        return Err(A::Error::custom(format!(
                            "tensor {name:?}: data offsets [{start}, {end}) end before they start"
                        )));
                    }
                    tensors.push(TensorInfo {
                        name,
                        dtype,
                        shape,
                        offset: start,
                        len: end - start,
                    });
                }
                tensors.shrink_to_fit();
                Ok(Header { tensors, metadata: metadata.unwrap_or_default() })
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Checks what the format requires of tensors in data order (offsets relative to the data):
/// each starts where the one before ends, the first at 0, and holds exactly the bytes its dtype
/// and shape need. Returns the length of the data.
fn check_layout(tensors: &[TensorInfo]) -> Result<u64> {
    let mut end = 0u64;
    for t in tensors {
        if t.offset != end {
            return Err(malformed(format!(
                "header: tensor {:?}: its data starts at {} of the data, but the tensor before it ends at \
                 {end} (the data must be contiguous, in order)",
                t.name, t.offset
            )));
        }
        let bits = t
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .and_then(|n| n.checked_mul(t.dtype.bitsize() as u64));
        let Some(bits) = bits else {
            return Err(malformed(format!("header: tensor {:?}: its size overflows", t.name)));
        };
        if bits % 8 != 0 || bits / 8 != t.len {
            return Err(malformed(format!(
                "header: tensor {:?}: shape {:?} of {:?} needs {} bits, but its data offsets span \
                 {} bytes",
                t.name, t.shape, t.dtype, bits, t.len
            )));
        }
        end = t.offset + t.len;
    }
    Ok(end)
}

fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

/// Whether bytes look like the start of a safetensors file: a header length that fits in the
/// file, followed by `{`.
pub fn looks_like_safetensors(prefix: &[u8], file_len: u64) -> bool {
    let Some((len, rest)) = prefix.split_first_chunk::<8>() else { return false };
    let n = u64::from_le_bytes(*len);
    n <= MAX_HEADER_LEN && n.saturating_add(8) <= file_len && rest.first() == Some(&b'{')
}

impl<S: ReadAt> SafetensorsFile<S> {
    /// Reads and validates the header of the safetensors file in `source`.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a header that does not fit the file or the limit, is not
    /// valid JSON of the safetensors schema, or describes data that does not exactly fill the
    /// rest of the file; [`ErrorKind::Io`] when reads fail.
    pub fn new(source: S) -> Result<SafetensorsFile<S>> {
        let file_len = source.len();
        let read_error = |e: std::io::Error| Error::new(ErrorKind::Io, format!("reading: {e}"));
        let mut len = [0u8; 8];
        if file_len < 8 {
            return Err(malformed(format!(
                "{file_len} bytes: shorter than the 8-byte header length"
            )));
        }
        source.read_exact_at(0, &mut len).map_err(read_error)?;
        let n = u64::from_le_bytes(len);
        if n > MAX_HEADER_LEN {
            return Err(malformed(format!(
                "header length {n} exceeds the limit of {MAX_HEADER_LEN} bytes"
            )));
        }
        if n > file_len - 8 {
            return Err(malformed(format!(
                "header length {n} runs past the end of the {file_len}-byte file"
            )));
        }
        // Bounded by the file's length and the limit, so the allocation is backed by real bytes.
        let mut header = vec![0u8; usize::try_from(n).map_err(|_| malformed("header too large"))?];
        source.read_exact_at(8, &mut header).map_err(read_error)?;
        let Header { mut tensors, metadata } =
            serde_json::from_slice(&header).map_err(|e| malformed(format!("header: {e}")))?;
        drop(header);
        let data_start = 8 + n;
        // In data order; zero-length tensors share an offset, and names settle their order, so
        // every run gives the same order.
        tensors
            .sort_unstable_by(|a, b| (a.offset, a.len, &a.name).cmp(&(b.offset, b.len, &b.name)));
        let mut by_name = ztensor_format::NameIndex::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if by_name.insert(i, |j| &tensors[j].name).is_some() {
                return Err(malformed(format!("header: tensor {:?} is described twice", t.name)));
            }
        }
        let data_len = check_layout(&tensors)?;
        if data_start.checked_add(data_len) != Some(file_len) {
            let follow = file_len - data_start;
            // Fewer bytes than described is what an interrupted download or copy leaves.
            let hint = match data_len - follow.min(data_len) {
                0 => String::new(),
                1 => " (the file is 1 byte short: an incomplete download or copy?)".to_owned(),
                n => format!(" (the file is {n} bytes short: an incomplete download or copy?)"),
            };
            return Err(malformed(format!(
                "the header describes {data_len} bytes of data, but {follow} follow it{hint}"
            )));
        }
        for t in &mut tensors {
            // Below the file's length, as just checked.
            t.offset += data_start;
        }
        Ok(SafetensorsFile { source, tensors, by_name, metadata, carry_unknown: false })
    }

    /// The tensors, in the order of their data.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.find(name, |i| &self.tensors[i].name).map(|i| &self.tensors[i])
    }

    /// The `__metadata__` map (empty when absent).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The same file with its `__metadata__` set aside (for conversions told to drop it).
    pub fn without_metadata(mut self) -> SafetensorsFile<S> {
        self.metadata.clear();
        self
    }

    /// As a [`TensorSource`], carries tensors of the dtypes zTensor 1.x has no type for (`F4`,
    /// `F6_*`, `F8_E8M0`) as flat `u8` objects holding their bytes, with the dtype and shape
    /// recorded in the object attributes `safetensors.dtype` and `safetensors.shape` (an export
    /// back to safetensors restores them): the way to keep them in a zTensor 1.x file. Without
    /// it they are `u8` components of their microscaling type ([`ztensor_format::MxType`]), as
    /// zTensor 2 holds them.
    #[must_use]
    pub fn carry_unknown_dtypes(mut self, carry: bool) -> SafetensorsFile<S> {
        self.carry_unknown = carry;
        self
    }

    /// Whether tensors of dtypes zTensor 1.x lacks are carried as bytes.
    pub fn carries_unknown(&self) -> bool {
        self.carry_unknown
    }

    /// The tensors whose safetensors dtype zTensor 1.x has no type for.
    pub fn unknown_dtypes(&self) -> impl Iterator<Item = &TensorInfo> {
        self.tensors.iter().filter(|t| carried_as_bytes(t.dtype, true))
    }

    /// The source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The bytes of the tensor called `name`: borrowed from a map or slice, read otherwise.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`], or a failed read.
    pub fn data(&self, name: &str) -> Result<Cow<'_, [u8]>> {
        let t = self
            .tensor(name)
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "no such tensor").in_object(name))?;
        // Validated: offset + len <= file length, which is addressable when mapped.
        let range = usize::try_from(t.offset).ok().zip(usize::try_from(t.offset + t.len).ok());
        if let (Some(all), Some((s, e))) = (self.source.as_slice(), range)
            && let Some(bytes) = all.get(s..e)
        {
            return Ok(Cow::Borrowed(bytes));
        }
        usize::try_from(t.len).map_err(|_| malformed("tensor too large"))?;
        let mut buf = ztensor_io::try_zeroed(t.len, &format!("tensor {name:?}"))
            .map_err(|e| Error::new(ErrorKind::Io, e.to_string()).in_object(name))?;
        self.source
            .read_exact_at(t.offset, &mut buf)
            .map_err(|e| Error::new(ErrorKind::Io, format!("reading: {e}")).in_object(name))?;
        Ok(Cow::Owned(buf))
    }
}

impl SafetensorsFile<FileSource> {
    /// Opens a file with positional reads.
    ///
    /// # Errors
    /// As [`SafetensorsFile::new`], with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile<FileSource>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot read", path, e))?;
        SafetensorsFile::new(source).map_err(|e| e.with_path(path))
    }
}

impl SafetensorsFile<Mapped> {
    /// Opens a file through a read-only memory map, so tensor data is borrowed, not copied.
    ///
    /// # Safety
    /// The file must not be truncated or modified while the returned value (or anything
    /// borrowed from it) is alive; see [`Mapped::map`].
    ///
    /// # Errors
    /// As [`SafetensorsFile::new`], with the path in the message.
    #[allow(unsafe_code)]
    pub unsafe fn open_mmap(path: impl AsRef<Path>) -> Result<SafetensorsFile<Mapped>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        // SAFETY: forwarded to our caller, who upholds it.
        let map = unsafe { Mapped::map(&file) }.map_err(|e| Error::io("cannot map", path, e))?;
        SafetensorsFile::new(map).map_err(|e| e.with_path(path))
    }
}

/// `__metadata__` as zTensor file attributes: a map of text to text.
pub fn metadata_attributes(metadata: &BTreeMap<String, String>) -> Option<Attributes> {
    if metadata.is_empty() {
        return None;
    }
    let map = metadata.iter().map(|(k, v)| (Value::Text(k.clone()), Value::Text(v.clone())));
    // Text keys from a map are distinct, so the map always encodes.
    Attributes::try_from(Value::Map(map.collect())).ok()
}

/// Whether a tensor of `dtype` is carried as bytes (`carry`: asked to carry what zTensor 1.x
/// has no type for): a microscaling dtype, or one this crate does not know.
fn carried_as_bytes(dtype: safetensors::Dtype, carry: bool) -> bool {
    carry && (mx_type(dtype).is_some() || ztensor_type(dtype).is_err())
}

/// A safetensors tensor as a zTensor object: dense, one `data` component, raw; a dtype zTensor
/// lacks is kept by name and marks the object unsupported.
pub(crate) fn tensor_info<'a>(
    t: &'a TensorInfo,
    location: Option<&'a str>,
    carry: bool,
) -> ObjectInfo<'a> {
    let carried = carried_as_bytes(t.dtype, carry);
    let (dtype, logical_type, unsupported) = match ztensor_type(t.dtype) {
        _ if carried => (StorageType::from(DType::U8), None, None),
        Ok((d, l)) => (StorageType::from(d), l, None),
        Err(e) => {
            let reason = crate::error::unknown_dtype(e.message(), &t.name);
            (StorageType::Unknown(t.dtype.to_string().into()), None, Some(reason))
        }
    };
    ObjectInfo {
        name: Cow::Borrowed(&t.name),
        shape: if carried { Cow::Owned(vec![t.len]) } else { Cow::Borrowed(&t.shape) },
        format: Format::Dense,
        attributes: carried.then(|| carried_attributes(t)).flatten().map(Cow::Owned),
        components: vec![ComponentInfo {
            role: Cow::Borrowed(role::DATA),
            dtype,
            logical_type,
            decoded_len: Some(t.len),
            stored_len: t.len,
            offset: Some(t.offset),
            encoding: Encoding::Raw,
            digest: None,
        }],
        unsupported,
        location: location.map(Cow::Borrowed),
    }
}

/// Decodes tensor `t` of `file`: its bytes as they are (safetensors is raw little-endian).
pub(crate) fn tensor_data<'a, S: ReadAt>(
    file: &'a SafetensorsFile<S>,
    t: &TensorInfo,
) -> ztensor_io::Result<ObjectData<'a>> {
    let carried = carried_as_bytes(t.dtype, file.carry_unknown);
    let (dtype, logical_type) = if carried {
        (DType::U8, None)
    } else {
        ztensor_type(t.dtype).map_err(|e| {
            ztensor_io::Error::unsupported(
                ztensor_format::Error::new(ztensor_format::ErrorKind::DtypeUnknown, e.message())
                    .in_object(&t.name)
                    .refusing(ztensor_format::Refused::Dtype),
            )
        })?
    };
    let bytes = file.data(&t.name).map_err(|e| {
        ztensor_io::Error::io(
            format!("reading tensor {:?}", t.name),
            None,
            std::io::Error::other(e.to_string()),
        )
    })?;
    let mut components = BTreeMap::new();
    components.insert(role::DATA.to_owned(), ComponentData { dtype, logical_type, bytes });
    Ok(ObjectData {
        name: t.name.clone(),
        shape: if carried { vec![t.len] } else { t.shape.clone() },
        format: Format::Dense,
        attributes: carried.then(|| carried_attributes(t)).flatten().map(Cow::Owned),
        components,
    })
}

fn carried_attributes(t: &TensorInfo) -> Option<Attributes> {
    let map = ztensor_format::text_map([
        (CARRIED_DTYPE, Value::Text(t.dtype.to_string())),
        (CARRIED_SHAPE, Value::Array(t.shape.iter().map(|&d| Value::from(d)).collect())),
    ]);
    // Two distinct keys, text and unsigned integers: the map always encodes.
    Attributes::try_from(map).ok()
}

impl<S: ReadAt> TensorSource for SafetensorsFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("safetensors")
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        metadata_attributes(&self.metadata).map(Cow::Owned)
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("__metadata__")
    }

    fn len(&self) -> usize {
        self.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        self.tensors.get(index).map(|t| tensor_info(t, None, self.carry_unknown))
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.tensors.get(index).map(|t| Cow::Borrowed(t.name.as_str()))
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name.find(name, |i| &self.tensors[i].name)
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let t = self
            .tensors
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        tensor_data(self, t)
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        // Where the bytes lie, whatever the dtype: an unsupported tensor's are still there to
        // compare (`ztensor diff`); writers skip unsupported objects by their `info`.
        let t = self.tensors.get(index)?;
        Some(RawRange { source: &self.source, offset: t.offset, len: t.len })
    }
}
