//! Blob placement: the 64-byte alignment rule and the offset allocator writers plan with.

use crate::error::{Error, ErrorKind, Result};
use crate::framing::HEADER_LEN;

/// Every blob starts at a multiple of this many bytes (all versions).
pub const ALIGNMENT: u64 = 64;

/// Rounds `value` up to the next multiple of [`ALIGNMENT`], or `None` on overflow.
pub fn align_up(value: u64) -> Option<u64> {
    value.checked_add(ALIGNMENT - 1).map(|v| v & !(ALIGNMENT - 1))
}

/// Assigns blob offsets in the order blobs are reserved: each starts at the next multiple of
/// 64 after the previous one ends. Pure and deterministic, so a sequential writer and a
/// parallel one that reserve in the same order produce the same layout.
///
/// ```
/// use ztensor_format::OffsetAllocator;
/// let mut alloc = OffsetAllocator::new();
/// assert_eq!(alloc.reserve(10)?, 64);  // after the 8-byte header
/// assert_eq!(alloc.reserve(0)?, 128);
/// assert_eq!(alloc.reserve(64)?, 128); // a zero-length blob takes no room
/// assert_eq!(alloc.end(), 192);
/// # Ok::<(), ztensor_format::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAllocator {
    end: u64,
}

impl OffsetAllocator {
    /// An allocator for a new file: the first blob goes at 64, after the header.
    pub fn new() -> OffsetAllocator {
        OffsetAllocator { end: HEADER_LEN }
    }

    /// An allocator whose next blob goes after `end` (for appending to an existing file).
    pub fn starting_at(end: u64) -> OffsetAllocator {
        OffsetAllocator { end }
    }

    /// Reserves `len` bytes at the next aligned offset and returns that offset.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] if the file would grow past `u64::MAX`.
    pub fn reserve(&mut self, len: u64) -> Result<u64> {
        let offset = align_up(self.end)
            .filter(|o| o.checked_add(len).is_some())
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "blob offsets overflow u64"))?;
        self.end = offset + len;
        Ok(offset)
    }

    /// Starts a blob of not yet known length at the next aligned offset and returns the
    /// offset; [`OffsetAllocator::extend`] then grows it. `start` + `extend(len)` places a blob
    /// exactly where `reserve(len)` would.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on overflow.
    pub fn start(&mut self) -> Result<u64> {
        self.reserve(0)
    }

    /// Grows the blob being written by `len` bytes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on overflow.
    pub fn extend(&mut self, len: u64) -> Result<()> {
        self.end = self
            .end
            .checked_add(len)
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "blob offsets overflow u64"))?;
        Ok(())
    }

    /// Zero bytes needed after the current end to reach the next aligned offset.
    pub fn padding(&self) -> u64 {
        align_up(self.end).map_or(0, |a| a - self.end)
    }

    /// The end of the last reserved blob (where the manifest goes after the last blob).
    pub fn end(&self) -> u64 {
        self.end
    }
}

impl Default for OffsetAllocator {
    fn default() -> OffsetAllocator {
        OffsetAllocator::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment() {
        assert_eq!(align_up(0), Some(0));
        assert_eq!(align_up(1), Some(64));
        assert_eq!(align_up(64), Some(64));
        assert_eq!(align_up(u64::MAX), None);
        let mut a = OffsetAllocator::starting_at(u64::MAX - 10);
        assert_eq!(a.reserve(1).unwrap_err().kind(), ErrorKind::InvalidInput);
        let (mut a, mut b) = (OffsetAllocator::new(), OffsetAllocator::new());
        a.reserve(10).unwrap();
        b.start().unwrap();
        b.extend(10).unwrap();
        assert_eq!((a.reserve(5).unwrap(), a.end()), (b.reserve(5).unwrap(), b.end()));
        let mut a = OffsetAllocator::new();
        assert_eq!(a.padding(), 56);
        assert_eq!(a.reserve(1).unwrap(), 64);
        assert_eq!(a.padding(), 63);
    }
}
