//! Handles: an object of an open file, and one of its components, each carrying what it reads.
//!
//! [`Reader::object`] looks a name up once; everything read afterwards goes through the handle
//! it returns, so no later call can fail to find the object again.

use std::borrow::Cow;

use ztensor_format::{
    Attributes, ByteOrder, DType, Digest, Encoding, Format, LogicalType, ObjectRef, Packing,
    StorageType,
};

use crate::reader::{DigestCheck, Element, ObjectData, Reader, check_digest};
use ztensor_source::ReadAt;
use ztensor_source::{Error, Result};

/// One object of an open file: from [`Reader::object`], [`Reader::objects`] or
/// [`Reader::shadowed`]. Cheap to copy; it borrows the reader.
///
/// ```
/// use ztensor_io::{Reader, Writer, WriteOptions, role};
/// use ztensor_format::{DType, Options, Version};
///
/// let mut writer = Writer::new(Vec::new(), Version::V1_2)?;
/// let bytes: Vec<u8> = [0.5f32, -1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// writer.add_dense("w", &[2], DType::F32, &bytes, &WriteOptions::default())?;
/// let (file, _) = writer.finish()?;
///
/// let reader = Reader::new(&file[..], &Options::default())?;
/// let w = reader.object("w")?;
/// assert_eq!(w.shape(), [2]);
/// let data = w.component(role::DATA)?;
/// assert_eq!(data.dtype(), Some(DType::F32));
/// assert_eq!(data.read_as::<f32>()?, [0.5, -1.0]);
/// # Ok::<(), ztensor_io::Error>(())
/// ```
pub struct Object<'r, S> {
    reader: &'r Reader<S>,
    entry: ObjectRef<'r>,
}

impl<S> Clone for Object<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Object<'_, S> {}

impl<S> std::fmt::Debug for Object<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object")
            .field("name", &self.entry.name())
            .field("shape", &self.entry.object().shape)
            .field("format", &self.entry.object().format)
            .finish_non_exhaustive()
    }
}

impl<'r, S: ReadAt> Object<'r, S> {
    pub(crate) fn new(reader: &'r Reader<S>, entry: ObjectRef<'r>) -> Object<'r, S> {
        Object { reader, entry }
    }

    /// The object's name.
    pub fn name(&self) -> &'r str {
        self.entry.name()
    }

    /// Its shape (empty for a scalar).
    pub fn shape(&self) -> &'r [u64] {
        &self.entry.object().shape
    }

    /// Its format.
    pub fn format(&self) -> &'r Format {
        &self.entry.object().format
    }

    /// Its attributes, when it has any.
    pub fn attributes(&self) -> Option<&'r Attributes> {
        self.entry.object().attributes.as_deref()
    }

    /// Why this implementation cannot decode the object (an unknown dtype, encoding or
    /// format), or `None` when it can. An unsupported object can still be listed and copied
    /// stored as it is.
    pub fn unsupported(&self) -> Option<&'r ztensor_format::Error> {
        self.entry.unsupported()
    }

    /// The object as the manifest holds it, in the 1.2 object model.
    pub fn model(&self) -> &'r ztensor_format::Object {
        self.entry.object()
    }

    /// The object's entry of the validated manifest (its decoded lengths included).
    pub fn entry(&self) -> ObjectRef<'r> {
        self.entry
    }

    /// The reader the object belongs to.
    pub fn reader(&self) -> &'r Reader<S> {
        self.reader
    }

    /// Stored bytes of all its components together.
    pub fn stored_len(&self) -> u64 {
        self.model().components.values().map(|c| c.length).sum()
    }

    /// The component with role `role` (see [`role`](crate::role) for the standard ones).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) when the object has none.
    pub fn component(&self, role: &str) -> Result<Component<'r, S>> {
        self.model()
            .components
            .get_key_value(role)
            .map(|(role, model)| Component { object: *self, role, model })
            .ok_or_else(|| Error::not_found(self.name(), Some(role)))
    }

    /// Its components, sorted by role.
    pub fn components(&self) -> impl ExactSizeIterator<Item = Component<'r, S>> + use<'r, S> {
        let object = *self;
        self.model().components.iter().map(move |(role, model)| Component { object, role, model })
    }

    /// Decodes the whole object into the 1.2 object model (v0.1 single-blob sparse tensors
    /// unpacked into separate components, big-endian data swapped), without checking digests.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) for an unsupported object;
    /// `decode_failed`, `decoded_size_mismatch`, `decoded_too_large`, `sparse_packed_size` and
    /// `csr_indptr_invalid`; I/O errors.
    pub fn read(&self) -> Result<ObjectData<'r>> {
        self.reader.read_checked(self.entry, false)
    }

    /// As [`Object::read`], checking every component's digest against the very bytes that are
    /// decoded (one read: what was checked is what is used). Use it wherever decoded data is
    /// written somewhere else: damaged data is then never passed on under a fresh digest.
    ///
    /// # Errors
    /// As [`Object::read`], and `digest_mismatch` / `digest_malformed`.
    pub fn read_verified(&self) -> Result<ObjectData<'r>> {
        self.reader.read_checked(self.entry, true)
    }

    /// Checks data decoded from this object (by [`Object::read`] or [`Object::read_verified`],
    /// so the bytes checked are the bytes then used) against the data rules of
    /// `spec/rules.md`: CSR structure and bounds, COO coordinates inside the shape, v1.x bool
    /// bytes; and, when the reader was opened strict, sorted CSR rows.
    ///
    /// # Errors
    /// The first data rule broken.
    pub fn check(&self, data: &ObjectData<'_>) -> Result<()> {
        self.reader.check_decoded(data, self.reader.options().strict)
    }

    /// Checks the whole object in a few pieces of memory, whatever its size: every
    /// component's digest on its stored bytes, its decoded length, and the data rules of
    /// [`Object::check`]. The verdict, and the first fault, are those of
    /// [`Object::read_verified`] followed by [`Object::check`].
    ///
    /// # Errors
    /// As [`Object::read_verified`] and [`Object::check`].
    pub fn verify(&self) -> Result<()> {
        self.reader.stream_object(self.entry, crate::reader::PIECE, true, None, None).map(drop)
    }

    /// The decoded components, as [`Object::read_verified`] gives them (v0.1 single-blob
    /// sparse tensors as separate little-endian parts), handed to `each(role, bytes)` in
    /// pieces of at most `piece` bytes (at least 64), component after component in role
    /// order; memory is a few pieces whatever the object's size. Digests and the data rules
    /// of [`Object::check`] are checked on the way: what `each` was given counts as checked
    /// only once this returns `Ok`. Returns what each component decoded to (its types and
    /// length), in role order.
    ///
    /// # Errors
    /// As [`Object::verify`], and `each`'s errors.
    pub fn read_pieces(
        &self,
        piece: usize,
        mut each: impl FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<Vec<crate::Decoded>> {
        self.reader.stream_object(self.entry, piece, true, Some(&mut each), None)
    }
}

/// One component of an object: from [`Object::component`] or [`Object::components`].
pub struct Component<'r, S> {
    object: Object<'r, S>,
    role: &'r str,
    model: &'r ztensor_format::Component,
}

impl<S> Clone for Component<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Component<'_, S> {}

impl<S> std::fmt::Debug for Component<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("object", &self.object.entry.name())
            .field("role", &self.role)
            .field("model", self.model)
            .finish()
    }
}

impl<'r, S: ReadAt> Component<'r, S> {
    /// The object it belongs to.
    pub fn object(&self) -> Object<'r, S> {
        self.object
    }

    /// Its role.
    pub fn role(&self) -> &'r str {
        self.role
    }

    /// The component as the manifest holds it.
    pub fn model(&self) -> &'r ztensor_format::Component {
        self.model
    }

    /// The storage type, when this implementation knows it.
    pub fn dtype(&self) -> Option<DType> {
        self.model.dtype.known()
    }

    /// The storage type as the file spells it, known or not.
    pub fn storage_type(&self) -> &'r StorageType {
        &self.model.dtype
    }

    /// The logical type, if any.
    pub fn logical_type(&self) -> Option<&'r LogicalType> {
        self.model.logical_type.as_ref()
    }

    /// The encoding of the stored bytes.
    pub fn encoding(&self) -> &'r Encoding {
        &self.model.encoding
    }

    /// The digest the file records for the stored bytes.
    pub fn digest(&self) -> Option<&'r Digest> {
        self.model.digest.as_ref()
    }

    /// Absolute file offset of the stored bytes.
    pub fn offset(&self) -> u64 {
        self.model.offset
    }

    /// Stored (possibly compressed) length in bytes.
    pub fn stored_len(&self) -> u64 {
        self.model.length
    }

    /// Decoded length in bytes, where the manifest determines it (a stated
    /// `uncompressed_length`, a raw encoding, or the shape).
    pub fn decoded_len(&self) -> Option<u64> {
        self.object.entry.decoded_len(self.role)
    }

    /// Element size in bytes (storage size × logical ratio), when known.
    pub fn element_size(&self) -> Option<u64> {
        ztensor_format::element_size(self.model)
    }

    /// The stored bytes, as they are in the file (compressed, in the file's byte order),
    /// without checking the digest. Borrowed from memory-backed sources.
    ///
    /// # Errors
    /// I/O errors.
    pub fn stored(&self) -> Result<Cow<'r, [u8]>> {
        self.object.reader.stored_range(self.model.offset, self.model.length)
    }

    /// Checks the digest against the stored bytes. Works for every source, including memory
    /// maps whose data is otherwise read zero-copy.
    ///
    /// # Errors
    /// `digest_mismatch` when the digest differs, `digest_malformed` when it cannot be parsed;
    /// I/O errors.
    pub fn verify(&self) -> Result<DigestCheck> {
        match &self.model.digest {
            None => Ok(DigestCheck::Absent),
            Some(Digest::Unknown(s)) => Ok(DigestCheck::Unverifiable(s.to_string())),
            Some(_) => check_digest(self.object.name(), self.role, self.model, &self.stored()?),
        }
    }

    /// The decoded bytes: decompressed, and little-endian for split components. For a v0.1
    /// single-blob sparse tensor (role `data`) the blob is only decompressed; use
    /// [`Object::read`] to get its separate components.
    ///
    /// # Errors
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) for an unsupported object;
    /// `decode_failed`, `decoded_size_mismatch`, `decoded_too_large`; I/O errors.
    pub fn decoded(&self) -> Result<Cow<'r, [u8]>> {
        self.decode(false)
    }

    /// As [`Component::decoded`], after checking the digest against the very bytes that are
    /// decoded (one read: what was checked is what is used). A component without a digest, or
    /// with one of an unknown algorithm, is decoded unchecked.
    ///
    /// # Errors
    /// As [`Component::decoded`] and [`Component::verify`].
    pub fn decoded_verified(&self) -> Result<Cow<'r, [u8]>> {
        self.decode(true)
    }

    /// The decoded bytes in order, in pieces of `piece` bytes (the last may be shorter), each
    /// handed to `each`: memory is two pieces and the zstd window, whatever the component's
    /// size. With `verify`, the digest is computed on the stored bytes as they are read and
    /// checked at the end: what `each` was given counts as verified only once this returns
    /// `Ok`. `limit` bounds the decoded length (a stream holds no more memory for a longer
    /// one; [`Limits::DEFAULT`](ztensor_format::Limits::DEFAULT)'s is the usual choice). The
    /// bytes are those of [`Component::decoded`]; for a v0.1 single-blob sparse tensor that is
    /// the blob. Returns the decoded length.
    ///
    /// # Errors
    /// As [`Component::decoded_verified`], and `each`'s errors. `decoded_size_mismatch` or
    /// `decoded_too_large` comes as soon as the output passes what is allowed.
    pub fn decode_pieces(
        &self,
        verify: bool,
        limit: u64,
        piece: usize,
        mut each: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<u64> {
        if let Some(reason) = self.object.unsupported() {
            return Err(Error::unsupported(reason.clone()));
        }
        let object = self.object.entry;
        self.object
            .reader
            .stream_component(object, self.role, self.model, verify, limit, piece, &mut each)
    }

    fn decode(&self, verify: bool) -> Result<Cow<'r, [u8]>> {
        if let Some(reason) = self.object.unsupported() {
            return Err(Error::unsupported(reason.clone()));
        }
        let object = self.object.entry;
        self.object.reader.decode_component(object, self.role, self.model, verify)
    }

    /// A zero-copy typed view of a raw, little-endian component of a memory-backed source.
    ///
    /// # Errors
    /// [`ErrorKind::View`](crate::ErrorKind::View) when the component is compressed, big-endian,
    /// part of a v0.1 single blob, of a dtype `T` cannot represent, or misaligned for `T`, or
    /// when the source is not in memory; use [`Component::read_as`] then.
    pub fn view<T: Element>(&self) -> Result<&'r [T]> {
        if let Some(reason) = self.object.unsupported() {
            return Err(Error::unsupported(reason.clone()));
        }
        let c = self.model;
        let dtype = self.typed::<T>("viewed")?;
        if c.encoding != Encoding::Raw {
            return Err(Error::view(format!("component is {}-encoded", c.encoding)));
        }
        if self.object.model().packing != Packing::Split {
            return Err(Error::view("v0.1 sparse tensors are one packed blob"));
        }
        if *c.byte_order() != ByteOrder::Little && dtype.size() > 1 {
            return Err(Error::view("data is not little-endian"));
        }
        if cfg!(target_endian = "big") && dtype.size() > 1 {
            return Err(Error::view("this host is big-endian"));
        }
        let Cow::Borrowed(bytes) = self.stored()? else {
            return Err(Error::view(
                "the source is not in memory; open the file with a map or a slice",
            ));
        };
        bytemuck::try_cast_slice(bytes).map_err(|e| Error::view(format!("{e:?}")))
    }

    /// The decoded elements as an owned vector, for any source, encoding and alignment.
    ///
    /// # Errors
    /// [`ErrorKind::View`](crate::ErrorKind::View) when `T` cannot represent the dtype, and any
    /// error of [`Component::decoded`].
    pub fn read_as<T: Element>(&self) -> Result<Vec<T>> {
        self.typed::<T>("read")?;
        let bytes = self.decoded()?;
        let mut out: Vec<T> = bytemuck::pod_collect_to_vec(&bytes);
        if cfg!(target_endian = "big") {
            let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
            ztensor_format::data::swap_bytes(raw, std::mem::size_of::<T>());
        }
        Ok(out)
    }

    /// The known dtype, when `T` can represent it.
    fn typed<T: Element>(&self, how: &str) -> Result<DType> {
        let dtype =
            self.dtype().ok_or_else(|| Error::dtype_unknown(self.object.name(), self.role))?;
        if !T::DTYPES.contains(&dtype) {
            return Err(Error::view(format!(
                "{dtype} data cannot be {how} as {}",
                std::any::type_name::<T>()
            )));
        }
        Ok(dtype)
    }
}

/// Handles to a reader's objects.
impl<S: ReadAt> Reader<S> {
    /// The object called `name`: a handle to read it and its components through.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound).
    pub fn object(&self, name: &str) -> Result<Object<'_, S>> {
        let entry = self.manifest().get(name).ok_or_else(|| Error::not_found(name, None))?;
        Ok(Object::new(self, entry))
    }

    /// The component `role` of the object called `name`: `reader.object(name)?.component(role)`.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) for either.
    pub fn component(&self, name: &str, role: &str) -> Result<crate::Component<'_, S>> {
        self.object(name)?.component(role)
    }

    /// Every object, in the file's order.
    pub fn objects(&self) -> impl ExactSizeIterator<Item = Object<'_, S>> + '_ {
        self.manifest().objects().map(move |entry| Object::new(self, entry))
    }

    /// The object at `index` in the file's order (as [`Reader::objects`] lists them).
    pub fn object_at(&self, index: usize) -> Option<Object<'_, S>> {
        self.manifest().object_at(index).map(|entry| Object::new(self, entry))
    }

    /// The objects a lookup by name does not reach: later objects of a v0.1 file that repeat
    /// an earlier object's name (see [`ValidatedManifest::shadowed`](ztensor_format::ValidatedManifest::shadowed)).
    pub fn shadowed(&self) -> impl Iterator<Item = Object<'_, S>> + '_ {
        self.manifest().shadowed().map(move |entry| Object::new(self, entry))
    }
}
