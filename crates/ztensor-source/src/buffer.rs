//! Buffers whose size a file decides: allocating one that does not fit is an error the caller
//! reports, never an abort of the process.
//!
//! A decode limit admits an object by its declared size; whether the memory is there is only
//! known when it is asked for. Under an address-space cap (`ulimit -v`, a container) or on a
//! small machine, an infallible allocation of that size aborts the whole process (and with it a
//! Python interpreter). Every reader of the workspace allocates such buffers here.

use std::alloc::Layout;
use std::io;

/// A zero-filled buffer of `len` bytes, or an [`io::ErrorKind::OutOfMemory`] error naming
/// `what` when it cannot be had.
///
/// # Errors
/// A length past the address space, or memory the system refuses.
pub fn try_zeroed(len: u64, what: &str) -> io::Result<Vec<u8>> {
    let n = usize::try_from(len).map_err(|_| refused(len, what))?;
    if n == 0 {
        return Ok(Vec::new());
    }
    // Zeroed by the allocator (calloc), not by writing: a large buffer comes from fresh pages
    // the kernel zeroes as they are first touched, so a buffer that a read then fills is
    // touched once instead of twice (`vec![0; n]` does the same, but aborts when refused).
    let layout = Layout::array::<u8>(n).map_err(|_| refused(len, what))?;
    // SAFETY: `layout` has a non-zero size (`n > 0`).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(refused(len, what));
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `n` bytes aligned to 1,
    // which is the allocation of a `Vec<u8>` of capacity `n`, and all `n` bytes are
    // initialized (zero).
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

fn refused(len: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("no memory for {what} ({len} bytes): the system refused the allocation"),
    )
}

/// An empty buffer with room for exactly `len` bytes, or an [`io::ErrorKind::OutOfMemory`]
/// error naming `what`.
///
/// # Errors
/// As [`try_zeroed`].
pub fn try_with_capacity(len: u64, what: &str) -> io::Result<Vec<u8>> {
    let refused = || refused(len, what);
    let n = usize::try_from(len).map_err(|_| refused())?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(n).map_err(|_| refused())?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_that_cannot_be_had_are_errors() {
        assert_eq!(try_zeroed(5, "x").unwrap(), [0; 5]);
        assert!(try_zeroed(0, "x").unwrap().is_empty());
        // Past the allocator's threshold for fresh pages, still zero and of the length asked.
        let big = try_zeroed(3 << 20, "x").unwrap();
        assert_eq!((big.len(), big.capacity()), (3 << 20, 3 << 20));
        assert!(big.iter().all(|&b| b == 0));
        assert_eq!(try_with_capacity(7, "x").unwrap().capacity(), 7);
        for len in [u64::MAX, 1 << 62, (isize::MAX as u64) + 1] {
            let e = try_zeroed(len, "a tensor").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
            assert!(e.to_string().contains("a tensor"), "{e}");
        }
    }
}
