//! The one module that maps files into memory, and so the one that holds `unsafe`.

use std::fs::File;
use std::io;

use std::path::Path;

use crate::error::{Error, Result};
use crate::source::ReadAt;

/// A read-only shared memory map of a whole file.
#[derive(Debug)]
pub struct Mapped {
    map: memmap2::Mmap,
}

impl Mapped {
    /// Maps `file` read-only.
    ///
    /// # Safety
    /// The file must not be truncated or modified, by this process or another, while the map
    /// (or any slice borrowed from it) is alive: a truncated mapping faults on access, and a
    /// modified one changes bytes that were already validated. This crate's writers never
    /// truncate or modify published files (they write a new file and rename it over the old one,
    /// and appends only add bytes past the end).
    ///
    /// # Errors
    /// When the file cannot be mapped.
    pub unsafe fn map(file: &File) -> io::Result<Mapped> {
        // SAFETY: the caller upholds that the file is neither truncated nor modified while the
        // map lives, which is memmap2's requirement for `Mmap::map`.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Mapped { map })
    }

    /// Maps the first `len` bytes of `file` read-only.
    ///
    /// # Safety
    /// As [`Mapped::map`], for those bytes.
    unsafe fn map_first(file: &File, len: usize) -> io::Result<Mapped> {
        // SAFETY: the caller upholds that the mapped bytes are neither truncated nor modified
        // while the map lives, which is memmap2's requirement.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file)? };
        Ok(Mapped { map })
    }
}

/// A private, writable, copy-on-write map of part of a file: its pages read the file until
/// they are written, and what is written stays in this map alone. What a consumer that may
/// ignore a read-only flag is given, so its writes neither fault nor reach the file.
#[derive(Debug)]
pub struct PrivateMap {
    map: memmap2::MmapMut,
    /// Where the bytes asked for begin in `map` (the map starts at a page boundary).
    skip: usize,
    len: usize,
}

impl PrivateMap {
    /// Maps `len` bytes of `file` from `offset`, private and writable.
    ///
    /// # Safety
    /// As [`Mapped::map`] for those bytes: the file must not be truncated or modified while
    /// the map lives (pages not yet written read the file).
    ///
    /// # Errors
    /// When the range lies past the file's end or cannot be mapped.
    pub unsafe fn map(file: &File, offset: u64, len: usize) -> io::Result<PrivateMap> {
        let end = offset.checked_add(len as u64).ok_or(io::ErrorKind::InvalidInput)?;
        if end > file.metadata()?.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let start = offset - offset % MAP_ALIGN;
        let skip = usize::try_from(offset - start).map_err(|_| io::ErrorKind::InvalidInput)?;
        let span = skip.checked_add(len).ok_or(io::ErrorKind::InvalidInput)?;
        if span == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: the caller upholds that the mapped bytes are neither truncated nor modified
        // while the map lives, which is memmap2's requirement; a private map's own writes
        // never reach the file.
        let map = unsafe { memmap2::MmapOptions::new().offset(start).len(span).map_copy(file)? };
        Ok(PrivateMap { map, skip, len })
    }

    /// The first byte asked for, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.map[self.skip..].as_mut_ptr()
    }

    /// The bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes were asked for (never: [`PrivateMap::map`] refuses an empty map).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What a map's start is aligned to: a multiple of every page size Linux and macOS use (4, 16
/// and 64 KiB) and Windows' allocation granularity.
const MAP_ALIGN: u64 = 64 << 10;

impl ReadAt for Mapped {
    fn len(&self) -> u64 {
        self.map.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (&self.map[..]).read_exact_at(offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.map)
    }
}

impl Mapped {
    /// Maps the complete part of the file at `path` read-only: never the bytes an unfinished
    /// append wrote past its journaled end (as [`FileSource::open`](crate::FileSource::open)
    /// reads it).
    ///
    /// # Safety
    /// As [`Mapped::map`].
    ///
    /// # Errors
    /// When the file cannot be opened or mapped, or is longer than the address space.
    pub unsafe fn open(path: impl AsRef<Path>) -> Result<Mapped> {
        let path = path.as_ref();
        let (file, end) = crate::lock::open_for_reading(path)?;
        let end = usize::try_from(end).map_err(|_| {
            Error::io("cannot map", Some(path.to_owned()), io::ErrorKind::FileTooLarge.into())
        })?;
        // SAFETY: forwarded to our caller, who upholds it.
        unsafe { Mapped::map_first(&file, end) }
            .map_err(|e| Error::io("cannot map", Some(path.to_owned()), e))
    }
}

impl crate::source::FileSource {
    /// Maps the bytes this source reads (its file, up to the end it was opened with) read-only,
    /// through the same descriptor: a file told by its first bytes and then mapped is opened
    /// once.
    ///
    /// # Safety
    /// As [`Mapped::map`].
    ///
    /// # Errors
    /// When the file cannot be mapped, or is longer than the address space.
    pub unsafe fn into_mapped(self) -> io::Result<Mapped> {
        let len = usize::try_from(self.len())
            .map_err(|_| io::Error::from(io::ErrorKind::FileTooLarge))?;
        // SAFETY: forwarded to the caller.
        unsafe { Mapped::map_first(self.file(), len) }
    }
}
