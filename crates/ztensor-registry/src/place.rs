//! Where an input's bytes are: a file on this machine or an object in a bucket, as one type,
//! so a reader opened over either is the same reader and prints the same report.

use std::io;
use std::ops::Range;

use ztensor_io::{FileSource, ReadAt, Reader};

/// The bytes of one input, wherever they are. Readers are generic over [`ReadAt`]; a front end
/// that takes both paths and URLs opens a `Reader<Place>` and has one code path for both.
#[derive(Debug)]
pub enum Place {
    /// A file, read with positional reads through the descriptor it was opened by.
    File(FileSource),
    /// An object in a bucket, read by ranges pinned to the version first seen.
    #[cfg(feature = "remote")]
    Object(ztensor_remote::RemoteObject),
}

impl Place {
    /// Bytes past the end of a file that belong to an append that had not committed when it
    /// was opened ([`FileSource::uncommitted`]); none for an object, which is never appended
    /// to in place.
    pub fn uncommitted(&self) -> u64 {
        match self {
            Place::File(f) => f.uncommitted(),
            #[cfg(feature = "remote")]
            Place::Object(_) => 0,
        }
    }

    /// Whether the bytes are an object in a bucket.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Place::File(_))
    }
}

impl ReadAt for Place {
    fn len(&self) -> u64 {
        match self {
            Place::File(f) => f.len(),
            #[cfg(feature = "remote")]
            Place::Object(o) => o.len(),
        }
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Place::File(f) => f.read_exact_at(offset, buf),
            #[cfg(feature = "remote")]
            Place::Object(o) => o.read_exact_at(offset, buf),
        }
    }

    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            Place::File(f) => f.as_slice(),
            #[cfg(feature = "remote")]
            Place::Object(o) => o.as_slice(),
        }
    }

    fn will_need(&self, ranges: &[Range<u64>]) {
        match self {
            Place::File(f) => f.will_need(ranges),
            #[cfg(feature = "remote")]
            Place::Object(o) => o.will_need(ranges),
        }
    }

    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        match self {
            Place::File(f) => f.read_each_at(offset, len, scratch, each),
            #[cfg(feature = "remote")]
            Place::Object(o) => o.read_each_at(offset, len, scratch, each),
        }
    }
}

impl From<FileSource> for Place {
    fn from(file: FileSource) -> Place {
        Place::File(file)
    }
}

#[cfg(feature = "remote")]
impl From<ztensor_remote::RemoteObject> for Place {
    fn from(object: ztensor_remote::RemoteObject) -> Place {
        Place::Object(object)
    }
}

/// The zTensor file (0.1, 1.x) whose bytes are `place` (a [`Place`], for one reader over a
/// file or an object of the same bytes), as its own reader.
///
/// # Errors
/// The reader's error: a broken rule (a cut-short file says so), a failed read.
pub fn open_zt_at<S: ReadAt>(
    place: S,
    options: &crate::OpenOptions,
) -> Result<Reader<S>, ztensor_io::Error> {
    Reader::new(place, &options.options)
}

/// The zTensor 2 file whose bytes are `place`, alone (a root's shards are not looked for:
/// there is no directory to look in), held to the manifest limit and expansion limits of
/// `options`.
///
/// # Errors
/// [`OpenError::Zt2`](crate::OpenError::Zt2): the file breaks a rule or cannot be read.
#[cfg(feature = "v2")]
pub fn open_zt2_at<S: ReadAt>(
    place: S,
    options: &crate::OpenOptions,
) -> Result<ztensor_v2::File<S>, crate::OpenError> {
    let limits = &options.options.limits;
    ztensor_v2::File::open(place, limits.max_manifest_len)
        .map(|file| file.with_limits(limits.clone()))
        .map_err(crate::OpenError::Zt2)
}

/// The TensorBuffers file whose bytes are `place`, strict when `options` say so.
///
/// # Errors
/// The reader's error: a broken rule or a failed read.
#[cfg(feature = "tensorbuffers")]
pub fn open_tb_at<S: ReadAt>(
    place: S,
    options: &crate::OpenOptions,
) -> Result<ztensor_tensorbuffers::TbFile<S>, ztensor_tensorbuffers::Error> {
    let read = if options.options.strict {
        ztensor_tensorbuffers::ReadOptions::strict()
    } else {
        ztensor_tensorbuffers::ReadOptions::default()
    };
    ztensor_tensorbuffers::TbFile::new(place, &read)
}
