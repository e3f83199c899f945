//! NumPy `.npz` files in: a zip archive of `.npy` members (`numpy.savez`, stored, or
//! `numpy.savez_compressed`, deflated), one object per member named without `.npy`.
//!
//! Each member's header is read when the file is opened (only the header of a deflated member
//! is inflated then); its data when the object is read, checked against the archive's CRC-32
//! and declared size, and inflated within the machine's decode limit.

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use ztensor_io::{FileSource, ObjectData, ObjectInfo, ReadAt, TensorSource};

use crate::archive::{At, Member, Method, is_crc_mismatch, members};
use crate::error::{Error, ErrorKind, Result};
use crate::npy_in::{MAX_HEADER, NpyFile};

/// The first bytes of a member, standing for all of it: enough to read a `.npy` header, with
/// the member's declared length.
#[derive(Debug)]
struct Prefix {
    bytes: Vec<u8>,
    len: u64,
}

impl ReadAt for Prefix {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let part = start
            .checked_add(buf.len())
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| std::io::Error::other("past the header of a member"))?;
        buf.copy_from_slice(part);
        Ok(())
    }
}

/// A validated `.npz` file over any byte source.
#[derive(Debug)]
pub struct NpzFile<S> {
    source: S,
    arrays: Vec<(Member, NpyFile<Prefix>)>,
    limit: u64,
}

impl NpzFile<FileSource> {
    /// Opens the `.npz` file at `path`.
    ///
    /// # Errors
    /// As [`NpzFile::new`], with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> Result<NpzFile<FileSource>> {
        let path = path.as_ref();
        let file = ztensor_io::open_input(path)?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot read", path, e))?;
        let limit = ztensor_io::machine_limits().whole_decode_limit();
        NpzFile::new(source, limit).map_err(|e| e.with_path(path))
    }
}

impl<S: ReadAt> NpzFile<S> {
    /// Reads the archive in `source` and the header of every member; members inflate to at
    /// most `limit` bytes.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a damaged archive, a member that is not a `.npy` array, or
    /// a malformed array header; I/O errors.
    pub fn new(source: S, limit: u64) -> Result<NpzFile<S>> {
        let mut arrays = Vec::new();
        for member in members(&source)? {
            let Some(name) = member.name.strip_suffix(".npy").map(str::to_owned) else {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    format!("member {:?} is not a .npy array", member.name),
                ));
            };
            // Only the first bytes, enough for the header: read, or inflated as far as needed.
            let head_len = member.size.min(MAX_HEADER + 16);
            let stored =
                At { source: &source, at: member.offset, end: member.offset + member.compressed };
            let mut bytes = Vec::new();
            let read = match member.method {
                Method::Stored => stored.take(head_len).read_to_end(&mut bytes),
                Method::Deflated => {
                    flate2::read::DeflateDecoder::new(stored).take(head_len).read_to_end(&mut bytes)
                }
            };
            read.map_err(|e| Error::new(ErrorKind::Malformed, format!("member {name:?}: {e}")))?;
            let npy = NpyFile::new(Prefix { bytes, len: member.size }, &name)
                .map_err(|e| e.in_object(&name))?;
            arrays.push((member, npy));
        }
        Ok(NpzFile { source, arrays, limit })
    }
}

impl<S: ReadAt> TensorSource for NpzFile<S> {
    fn format_name(&self) -> Cow<'_, str> {
        let deflated = self.arrays.iter().any(|(m, _)| m.method == Method::Deflated);
        Cow::Borrowed(if deflated { "NumPy .npz (compressed)" } else { "NumPy .npz" })
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        None
    }

    fn len(&self) -> usize {
        self.arrays.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (member, npy) = self.arrays.get(index)?;
        let mut info = npy.info(0)?;
        // The array's bytes lie inside a member: no offset of this file to give.
        for c in &mut info.components {
            c.offset = None;
            if member.method == Method::Deflated {
                c.stored_len = member.compressed;
            }
        }
        Some(info)
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (member, npy) = self
            .arrays
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        let info = npy.info(0);
        let name = info.as_ref().map(|i| i.name.to_string()).unwrap_or_default();
        // An array NumPy cannot give as numbers is refused before its member is read.
        if let Some(reason) = info.and_then(|i| i.unsupported) {
            return Err(ztensor_io::Error::unsupported(reason.in_object(&name)));
        }
        let failed = |e: std::io::Error| {
            if is_crc_mismatch(&e) {
                ztensor_io::Error::from(
                    ztensor_format::Error::new(
                        ztensor_format::ErrorKind::DigestMismatch,
                        e.to_string(),
                    )
                    .in_object(&name),
                )
            } else {
                ztensor_io::Error::io(format!("reading {name:?}"), None, e)
            }
        };
        member.check_limit(self.limit).map_err(|e| {
            ztensor_io::Error::unsupported(
                ztensor_format::Error::new(ztensor_format::ErrorKind::DecodedTooLarge, e.message())
                    .in_object(&name),
            )
        })?;
        // Inflated as a stream straight into the array's one buffer (transposed on the way
        // when Fortran-ordered): the member is never held whole beside it.
        let mut stream = member.reader(&self.source);
        std::io::copy(&mut (&mut stream).take(npy.data_offset()), &mut std::io::sink())
            .map_err(failed)?;
        let data = npy.place(&mut stream, &failed)?;
        // The rest (nothing, for a valid member) and the end: where the size and CRC-32 are
        // checked.
        std::io::copy(&mut stream, &mut std::io::sink()).map_err(failed)?;
        npy.object(data)
    }
}
