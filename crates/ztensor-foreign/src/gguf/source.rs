//! A GGUF file as a tensor source: each tensor described and read as the file's view of it
//! ([`Blocks`](super::Blocks)) presents it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ztensor_format::{Attributes, DType, Encoding, Format, StorageType, Value};
use ztensor_io::{
    ComponentData, ComponentInfo, ObjectData, ObjectInfo, RawRange, ReadAt, TensorSource, role,
};

use super::layouts::{self, View};
use super::{GgmlType, GgufFile, SHAPE_KEY, TYPE_KEY, Tensor};

fn quantized_attributes(t: &Tensor, ty: &GgmlType) -> Option<Attributes> {
    let map = ztensor_format::text_map([
        (TYPE_KEY, Value::Text(ty.name.to_owned())),
        (SHAPE_KEY, Value::Array(t.shape.iter().map(|&d| Value::from(d)).collect())),
    ]);
    // Two distinct keys, text and unsigned integers: the map always encodes.
    Attributes::try_from(map).ok()
}

impl<S: ReadAt> GgufFile<S> {
    fn view(&self, t: &Tensor) -> View {
        View::of(t.kind, &t.shape, self.blocks)
    }

    /// The tensor at `index`, or the error reading a missing one gives.
    fn tensor(&self, index: usize) -> ztensor_io::Result<&Tensor> {
        self.tensors
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))
    }

    /// The stored bytes of `t`: borrowed from a source in memory, else read.
    fn bytes(&self, t: &Tensor) -> ztensor_io::Result<Cow<'_, [u8]>> {
        if let Some(all) = self.source.as_slice() {
            let range = usize::try_from(t.offset)
                .ok()
                .and_then(|s| all.get(s..s.checked_add(usize::try_from(t.len).ok()?)?));
            return Ok(Cow::Borrowed(range.unwrap_or_default()));
        }
        let what = format!("tensor {:?}", t.name);
        let mut buf =
            ztensor_io::try_zeroed(t.len, &what).map_err(|e| layouts::read_error(&t.name, e))?;
        self.source
            .read_exact_at(t.offset, &mut buf)
            .map_err(|e| layouts::read_error(&t.name, e))?;
        Ok(Cow::Owned(buf))
    }
}

/// One component as a source of raw bytes lists it.
fn component(
    role: &'static str,
    dtype: StorageType,
    logical_type: Option<ztensor_format::LogicalType>,
    len: u64,
    offset: Option<u64>,
) -> ComponentInfo<'static> {
    ComponentInfo {
        role: Cow::Borrowed(role),
        dtype,
        logical_type,
        decoded_len: Some(len),
        stored_len: len,
        offset,
        encoding: Encoding::Raw,
        digest: None,
    }
}

impl<S: ReadAt> TensorSource for GgufFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("GGUF version {}", self.version))
    }

    /// The metadata as [`GgufFile::try_attributes`] builds it; `None` also when the memory
    /// for it cannot be had (this method has no way to say so: callers that must know use
    /// `try_attributes`).
    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        GgufFile::try_attributes(self).ok().flatten().map(Cow::Borrowed)
    }

    fn try_attributes(&self) -> ztensor_io::Result<Option<Cow<'_, ztensor_format::Attributes>>> {
        GgufFile::try_attributes(self).map(|a| a.map(Cow::Borrowed)).map_err(|e| {
            match e.ztensor_error().and_then(ztensor_io::Error::format_error) {
                Some(f) => ztensor_io::Error::from(f.clone()),
                None => ztensor_io::Error::io(
                    "building the GGUF metadata",
                    None,
                    std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.message().to_owned()),
                ),
            }
        })
    }

    fn attributes_origin(&self) -> Cow<'_, str> {
        Cow::Borrowed("GGUF metadata")
    }

    fn len(&self) -> usize {
        self.tensors.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let t = self.tensors.get(index)?;
        let data = |dtype| vec![component(role::DATA, dtype, None, t.len, Some(t.offset))];
        let (shape, format, attributes, components, unsupported) = match self.view(t) {
            View::Plain(d) => (t.shape.clone(), Format::Dense, None, data(d.into()), None),
            View::Bytes(ty) => (
                vec![t.len],
                Format::Dense,
                quantized_attributes(t, ty),
                data(DType::U8.into()),
                None,
            ),
            View::Opaque(ty) => (
                t.shape.clone(),
                layouts::opaque_layout(ty),
                layouts::opaque_attributes(ty),
                data(DType::U8.into()),
                None,
            ),
            View::Mx => {
                let parts = layouts::mx_parts(t.len).map(|(role, mx, len)| {
                    component(role, DType::U8.into(), Some(mx.logical_type()), len, None)
                });
                (
                    t.shape.clone(),
                    layouts::mx_layout(),
                    layouts::mx_attributes(),
                    parts.into(),
                    None,
                )
            }
            View::Unknown(id) => (
                t.shape.clone(),
                Format::Dense,
                None,
                data(StorageType::Unknown(format!("ggml type {id}").into())),
                Some(format!("GGML type {id} is not one this reader knows")),
            ),
        };
        Some(ObjectInfo {
            name: Cow::Borrowed(&t.name),
            shape: Cow::Owned(shape),
            format,
            attributes: attributes.map(Cow::Owned),
            components,
            unsupported: unsupported.map(|reason| crate::error::unknown_dtype(reason, &t.name)),
            location: None,
        })
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let t = self.tensor(index)?;
        let info = self.info(index).ok_or_else(|| ztensor_io::Error::not_found(&t.name, None))?;
        if let Some(reason) = info.unsupported {
            return Err(ztensor_io::Error::unsupported(reason));
        }
        let mut components = BTreeMap::new();
        if self.view(t) == View::Mx {
            let bytes = self.bytes(t)?;
            let [(_, _, data_len), (_, _, scales_len)] = layouts::mx_parts(t.len);
            let room = |len| {
                ztensor_io::try_zeroed(len, &format!("tensor {:?}", t.name))
                    .map(|mut v| {
                        v.clear();
                        v
                    })
                    .map_err(|e| layouts::read_error(&t.name, e))
            };
            let (mut data, mut scales) = (room(data_len)?, room(scales_len)?);
            layouts::repack(&t.name, 0, &bytes, &mut data, &mut scales)?;
            for (role, bytes, c) in
                [("data", data, &info.components[0]), ("scales", scales, &info.components[1])]
            {
                let part = ComponentData {
                    dtype: DType::U8,
                    logical_type: c.logical_type.clone(),
                    bytes: Cow::Owned(bytes),
                };
                components.insert(role.to_owned(), part);
            }
        } else {
            let dtype = info.components[0].dtype.known().unwrap_or(DType::U8);
            let part = ComponentData { dtype, logical_type: None, bytes: self.bytes(t)? };
            components.insert(role::DATA.to_owned(), part);
        }
        Ok(ObjectData {
            name: t.name.clone(),
            shape: info.shape.into_owned(),
            format: info.format,
            attributes: info.attributes.map(|a| Cow::Owned(a.into_owned())),
            components,
        })
    }

    /// Dense tensors and the block bytes of `gguf.<type>/1` as they lie; `zt.mx/1` repacked a
    /// run of blocks at a time.
    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let t = self.tensor(index)?;
        match self.view(t) {
            View::Unknown(_) => Err(ztensor_io::Error::unsupported(
                self.info(index).and_then(|i| i.unsupported).unwrap_or_else(|| {
                    crate::error::unknown_dtype("an unknown GGML type", &t.name)
                }),
            )),
            View::Mx => {
                let tensor = (t.name.as_str(), t.offset, t.len);
                layouts::mx_pieces(&self.source, tensor, &["data", "scales"], piece, each)
            }
            _ => {
                let range = RawRange { source: &self.source, offset: t.offset, len: t.len };
                range.try_pieces(piece.max(1) as u64, |bytes| each(role::DATA, bytes))
            }
        }
    }

    /// A `zt.mx/1` part alone: its blocks read once for it, not for both parts.
    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let t = self.tensor(index)?;
        if self.view(t) != View::Mx {
            let mut only = |r: &str, bytes: &[u8]| if r == role { each(bytes) } else { Ok(()) };
            return self.read_pieces(index, piece, &mut only);
        }
        let roles: &[&str] = match role {
            "data" => &["data"],
            "scales" => &["scales"],
            _ => &[],
        };
        let tensor = (t.name.as_str(), t.offset, t.len);
        layouts::mx_pieces(&self.source, tensor, roles, piece, &mut |_, bytes| each(bytes))
    }

    /// Objects in zTensor 2's layouts are read in pieces (the others, dense, are read through
    /// [`TensorSource::raw`] where a reader reads in pieces).
    fn reads_in_pieces(&self, index: usize) -> bool {
        self.tensors.get(index).is_some_and(|t| matches!(self.view(t), View::Mx | View::Opaque(_)))
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let t = self.tensors.get(index)?;
        matches!(self.view(t), View::Plain(_) | View::Bytes(_)).then_some(RawRange {
            source: &self.source,
            offset: t.offset,
            len: t.len,
        })
    }

    /// Every tensor's bytes lie in one range; `zt.mx/1` reads it twice (codes, then scales).
    fn stored_ranges(&self, index: usize) -> Option<ztensor_io::StoredRanges<'_>> {
        let t = self.tensors.get(index)?;
        let range = t.offset..t.offset.checked_add(t.len)?;
        let ranges = match self.view(t) {
            View::Unknown(_) => return None,
            View::Mx => vec![range.clone(), range],
            _ => vec![range],
        };
        Some(ztensor_io::StoredRanges { source: &self.source, ranges })
    }
}
