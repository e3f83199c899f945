//! Where a reader's bytes come from: one "bytes at an offset" trait over files (positional
//! reads, no shared cursor, so one source serves many threads), memory maps and byte slices.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::Path;

/// A random-access byte source of known length.
pub trait ReadAt: Send + Sync {
    /// The total length in bytes.
    fn len(&self) -> u64;

    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset`.
    ///
    /// # Errors
    /// Any I/O error, including `UnexpectedEof` when the range passes the end.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// The whole source as one slice, when it is in memory (a map or a byte slice): reads from
    /// it are then zero-copy.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }

    /// Advice: `ranges` are about to be read, about in this order (what a reader that plans
    /// its reads, such as the parallel engine, knows before it reads). A source whose reads
    /// are slow to start (a remote object) fetches them ahead, in that order, within its own
    /// memory bound; the advice replaces any given before. Reads stay correct whatever is
    /// advised. The default ignores it.
    fn will_need(&self, ranges: &[Range<u64>]) {
        let _ = ranges;
    }

    /// Hands the `len` bytes at `offset` to `each`, in order, as one or more slices that
    /// together are those bytes: what a copy reads to write somewhere else. A source that
    /// holds the bytes already (in memory, or fetched ahead) hands out its own, uncopied;
    /// what it must read it reads into `scratch`, at most `scratch.len()` bytes at a time.
    /// The default slices a source in memory (in pieces as long as `scratch`) and reads any
    /// other through `scratch`.
    ///
    /// # Errors
    /// What [`read_exact_at`](Self::read_exact_at) gives (`UnexpectedEof` when the range
    /// passes the end; `InvalidInput` for an empty `scratch`), and the first error `each`
    /// returns, as it returned it: nothing more is handed on after either.
    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let end = offset.checked_add(len).filter(|&end| end <= self.len());
        let end = end.ok_or(io::ErrorKind::UnexpectedEof)?;
        if len == 0 {
            return Ok(());
        }
        if scratch.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no room to read into"));
        }
        if let Some(all) = self.as_slice() {
            let range = usize::try_from(offset).ok().zip(usize::try_from(end).ok());
            let bytes = range.and_then(|(from, to)| all.get(from..to));
            for piece in bytes.ok_or(io::ErrorKind::UnexpectedEof)?.chunks(scratch.len()) {
                each(piece)?;
            }
            return Ok(());
        }
        let mut at = offset;
        while at < end {
            let n = usize::try_from(end - at).map_or(scratch.len(), |left| left.min(scratch.len()));
            self.read_exact_at(at, &mut scratch[..n])?;
            each(&scratch[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

fn slice_read(bytes: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
    let src = start
        .checked_add(buf.len())
        .and_then(|end| bytes.get(start..end))
        .ok_or(io::ErrorKind::UnexpectedEof)?;
    buf.copy_from_slice(src);
    Ok(())
}

impl ReadAt for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        slice_read(self, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// Any source seen through the trait (what a zTensor file behind a
/// [`TensorSource`](crate::TensorSource) is read through).
impl ReadAt for &dyn ReadAt {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
    fn will_need(&self, ranges: &[Range<u64>]) {
        (**self).will_need(ranges);
    }
    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        (**self).read_each_at(offset, len, scratch, each)
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        Vec::len(self) as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        slice_read(self, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// A file read with positional reads (`pread`); its length is taken once, at construction.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
    uncommitted: u64,
}

impl FileSource {
    /// Wraps an open file, all of it.
    ///
    /// # Errors
    /// When the file's metadata cannot be read.
    pub fn new(file: File) -> io::Result<FileSource> {
        let len = file.metadata()?.len();
        Ok(FileSource { file, len, uncommitted: 0 })
    }

    /// Opens the file at `path` as it stands complete. While another process appends to it,
    /// or after an append was interrupted and before it is repaired (`ztensor_io::repair`), that is the file
    /// as it was before the append: the source ends where the append's journal says the old
    /// file ended, and [`FileSource::uncommitted`] counts the bytes after it. When a writer
    /// holds the file without such a record (it is about to append, or replaces the file), the
    /// open waits for it, for at most [`READER_PATIENCE`](crate::READER_PATIENCE): a lock held
    /// longer is not a writer's, the file is read as it stands, and the path is listed by
    /// [`read_without_lock`](crate::read_without_lock). A FIFO, device or directory is refused
    /// without waiting on it.
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn open(path: impl AsRef<Path>) -> crate::Result<FileSource> {
        let (file, end) = crate::lock::open_for_reading(path.as_ref())?;
        let len = file
            .metadata()
            .map_err(|e| crate::Error::io("cannot stat", Some(path.as_ref().to_owned()), e))?
            .len();
        Ok(FileSource { file, len: end, uncommitted: len.saturating_sub(end) })
    }

    /// As [`FileSource::open`], for a file already opened from `path` (by
    /// [`open_input`](crate::open_input), and wrapped with [`FileSource::new`] to read its
    /// first bytes): the same descriptor, ending where the file as it stands complete ends.
    /// What opens a file once to tell its format and read it.
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn settle(self, path: impl AsRef<Path>) -> crate::Result<FileSource> {
        let (file, end) = crate::lock::committed_end(self.file, path.as_ref())?;
        let len = file
            .metadata()
            .map_err(|e| crate::Error::io("cannot stat", Some(path.as_ref().to_owned()), e))?
            .len();
        Ok(FileSource { file, len: end, uncommitted: len.saturating_sub(end) })
    }

    /// Whether the file at `path` is still the one this source reads (the same device and
    /// inode; never, where the platform cannot tell): what a caller holding a source opened
    /// earlier checks before reading it as the file now at that path.
    pub fn is_at(&self, path: impl AsRef<Path>) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match (self.file.metadata(), std::fs::metadata(path)) {
                (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
                _ => false,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }

    /// The file read.
    #[cfg(feature = "mmap")]
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Bytes past the end of this source that belong to an append that had not committed when
    /// the source was opened (one running, or one interrupted and not yet repaired).
    pub fn uncommitted(&self) -> u64 {
        self.uncommitted
    }
}

impl ReadAt for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // Never past the end it was opened with: what lies there is not part of the file.
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.len) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        crate::paths::pread_exact(&self.file, buf, offset)
    }
}

/// A source that hands out at most `chunk` bytes per underlying read, for testing that results
/// do not depend on how reads are split.
#[derive(Debug)]
pub struct Chunked<S> {
    inner: S,
    chunk: usize,
}

impl<S> Chunked<S> {
    /// Wraps `inner`, reading `chunk` bytes (at least 1) at a time.
    pub fn new(inner: S, chunk: usize) -> Chunked<S> {
        Chunked { inner, chunk: chunk.max(1) }
    }
}

impl<S: ReadAt> ReadAt for Chunked<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut at = offset;
        for piece in buf.chunks_mut(self.chunk) {
            self.inner.read_exact_at(at, piece)?;
            at += piece.len() as u64;
        }
        Ok(())
    }
    fn will_need(&self, ranges: &[Range<u64>]) {
        self.inner.will_need(ranges);
    }
}
