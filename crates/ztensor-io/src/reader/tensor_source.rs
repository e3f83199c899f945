//! The zTensor reader as a [`TensorSource`], and the file behind one for the zTensor sink.

use std::borrow::Cow;
use std::sync::Arc;

use ztensor_format::{Attributes, Encoding, Format, Options, Packing, ValidatedManifest};
use ztensor_source::{
    ComponentInfo, Decoded, Error, ObjectData, ObjectInfo, RawRange, ReadAt, Result, Stored,
    TensorSource,
};

use super::Reader;

/// What a zTensor reader shares with the readers made over the same bytes: the validated
/// manifest and what the copy paths know of its blobs ([`Stored::parsed`]).
struct Parsed {
    manifest: Arc<ValidatedManifest>,
    options: Options,
    sharing: Arc<crate::sharing::Sharing>,
}

/// A zTensor 0.1/1.x file behind a [`TensorSource`]: its reader over the source's own bytes,
/// and which of its objects the source presents ([`ZtensorObjects::of`]).
pub struct ZtensorObjects<'a> {
    /// The file's reader, over the source's own bytes.
    pub reader: Reader<&'a dyn ReadAt>,
    /// The positions, in the reader's object order ([`Reader::objects`]), of the objects the
    /// source presents, ascending; `None` when it presents them all.
    pub positions: Option<Vec<usize>>,
}

impl<'a> ZtensorObjects<'a> {
    /// The zTensor file `stored` is ([`TensorSource::stored`]), reopened without parsing it
    /// again; `None` when its container is not one this crate parsed.
    pub fn of(stored: Stored<'a>) -> Option<ZtensorObjects<'a>> {
        let parsed = stored.parsed.downcast::<Parsed>().ok()?;
        let reader = Reader {
            source: stored.bytes,
            manifest: Arc::clone(&parsed.manifest),
            options: parsed.options.clone(),
            sharing: Arc::clone(&parsed.sharing),
        };
        Some(ZtensorObjects { reader, positions: stored.positions })
    }

    /// Whether the object at `position` of the reader's order is one the source presents.
    pub fn presents(&self, position: usize) -> bool {
        self.positions.as_ref().is_none_or(|p| p.binary_search(&position).is_ok())
    }

    /// How many objects the source presents.
    pub fn len(&self) -> usize {
        self.positions.as_ref().map_or_else(|| self.reader.manifest().len(), Vec::len)
    }

    /// Whether the source presents no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for ZtensorObjects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZtensorObjects")
            .field("version", &self.reader.version())
            .field("objects", &self.reader.manifest().len())
            .field("positions", &self.positions.as_ref().map(Vec::len))
            .finish()
    }
}

impl<S: ReadAt> Reader<S> {
    /// Object `index` of the manifest, or `NotFound`.
    fn entry_at(&self, index: usize) -> Result<ztensor_format::ObjectRef<'_>> {
        self.manifest().object_at(index).ok_or_else(|| Error::not_found(&format!("#{index}"), None))
    }
}

impl<S: ReadAt> TensorSource for Reader<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("zTensor {}", self.version()))
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        self.manifest().manifest().attributes.as_ref().map(Cow::Borrowed)
    }

    fn len(&self) -> usize {
        self.manifest().len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let entry = self.manifest().object_at(index)?;
        let o = entry.object();
        let components = o
            .components
            .iter()
            .zip(entry.decoded_lens())
            .map(|((role, c), (_, decoded_len))| ComponentInfo {
                role: Cow::Borrowed(role),
                dtype: c.dtype.clone(),
                logical_type: c.logical_type.clone(),
                decoded_len,
                stored_len: c.length,
                offset: Some(c.offset),
                encoding: c.encoding.clone(),
                digest: c.digest.clone(),
            })
            .collect();
        Some(ObjectInfo {
            name: Cow::Borrowed(&o.name),
            shape: Cow::Borrowed(&o.shape),
            format: o.format.clone(),
            attributes: o.attributes.as_deref().map(Cow::Borrowed),
            components,
            unsupported: entry.unsupported().cloned(),
            location: None,
        })
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.manifest().object_at(index).map(|o| Cow::Borrowed(o.name()))
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.manifest().index_of(name)
    }

    fn read(&self, index: usize) -> Result<ObjectData<'_>> {
        self.read_checked(self.entry_at(index)?, true)
    }

    fn check(&self, _index: usize, data: &ObjectData<'_>) -> Result<()> {
        self.check_decoded(data, self.options().strict)
    }

    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let entry = self.entry_at(index)?;
        // Every layout streams: a few pieces in memory whatever the object's size. As `read`,
        // digests are checked and the data rules are left to `check`.
        self.stream_object(entry, piece, false, Some(each), None).map(drop)
    }

    fn reads_in_pieces(&self, index: usize) -> bool {
        self.manifest().object_at(index).is_some_and(|o| o.unsupported().is_none())
    }

    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let entry = self.entry_at(index)?;
        let mut each = |_: &str, bytes: &[u8]| each(bytes);
        self.stream_object(entry, piece, false, Some(&mut each), Some(role)).map(drop)
    }

    fn verify(&self, index: usize) -> Result<Vec<Decoded>> {
        let entry = self.entry_at(index)?;
        self.stream_object(entry, ztensor_source::PIECE, true, None, None)
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let entry = self.manifest().object_at(index)?;
        let o = entry.object();
        let c = o.components.get(crate::role::DATA)?;
        let plain = entry.unsupported().is_none()
            && o.format == Format::Dense
            && o.packing == Packing::Split
            && o.components.len() == 1
            && c.encoding == Encoding::Raw
            && c.digest.is_none()
            && (*c.byte_order() == ztensor_format::ByteOrder::Little
                || c.dtype.known().is_some_and(|d| d.size() == 1));
        plain.then_some(RawRange { source: self.source(), offset: c.offset, len: c.length })
    }

    /// Every component's stored bytes, in the order a read of the object takes them.
    fn stored_ranges(&self, index: usize) -> Option<ztensor_source::StoredRanges<'_>> {
        let entry = self.manifest().object_at(index)?;
        let ranges = entry
            .object()
            .components
            .values()
            .filter_map(|c| Some(c.offset..c.offset.checked_add(c.length)?))
            .collect();
        Some(ztensor_source::StoredRanges { source: self.source(), ranges })
    }

    fn stored(&self) -> Option<Stored<'_>> {
        let parsed = Parsed {
            manifest: Arc::clone(&self.manifest),
            options: self.options.clone(),
            sharing: Arc::clone(&self.sharing),
        };
        Some(Stored { bytes: &self.source, parsed: Arc::new(parsed), positions: None })
    }
}

#[cfg(feature = "mmap")]
use ztensor_source::Mapped;

#[cfg(feature = "mmap")]
#[allow(unsafe_code)]
impl Reader<Mapped> {
    /// Opens a file through a read-only memory map: component reads of raw data are zero-copy.
    ///
    /// # Safety
    /// The file must not be truncated or modified while the reader (or any slice it returned)
    /// is alive; see [`Mapped::map`].
    ///
    /// # Errors
    /// As [`Reader::open`].
    pub unsafe fn open_mmap(
        path: impl AsRef<std::path::Path>,
        options: &Options,
    ) -> Result<Reader<Mapped>> {
        // Only the complete part: never bytes an unfinished append wrote (see `FileSource::open`).
        // SAFETY: forwarded to our caller, who upholds it.
        let map = unsafe { Mapped::open(path) }?;
        Reader::new(map, options)
    }
}

#[cfg(test)]
mod tests {
    use ztensor_source::close_names;

    #[test]
    fn the_closest_names_come_first() {
        let mut w = crate::Writer::new(Vec::new(), ztensor_format::Version::V1_2).unwrap();
        for name in ["layers.0.weight", "layers.1.weight", "layers.0.bias", "embed", "head"] {
            w.add_dense(name, &[1], ztensor_format::DType::U8, &[1], &crate::WriteOptions::raw())
                .unwrap();
        }
        let file = w.finish().unwrap().0;
        let reader = crate::Reader::new(&file[..], &ztensor_format::Options::default()).unwrap();
        // Two edits, three, and five (within a third of fifteen characters).
        assert_eq!(
            close_names(&reader, "layers.0.weigth"),
            ["layers.0.weight", "layers.1.weight", "layers.0.bias"]
        );
        assert_eq!(close_names(&reader, "heads"), ["head"]);
        assert!(close_names(&reader, "something else").is_empty());
    }
}
