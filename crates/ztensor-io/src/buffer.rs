//! Buffers whose size a file decides: allocating one that does not fit is an error the caller
//! reports, never an abort of the process.
//!
//! A decode limit admits an object by its declared size; whether the memory is there is only
//! known when it is asked for. Under an address-space cap (`ulimit -v`, a container) or on a
//! small machine, an infallible allocation of that size aborts the whole process (and with it a
//! Python interpreter). Every reader of the workspace allocates such buffers here.

use std::io;

/// A zero-filled buffer of `len` bytes, or an [`io::ErrorKind::OutOfMemory`] error naming
/// `what` when it cannot be had.
///
/// # Errors
/// A length past the address space, or memory the system refuses.
pub fn try_zeroed(len: u64, what: &str) -> io::Result<Vec<u8>> {
    let mut buf = try_with_capacity(len, what)?;
    // Within the capacity just reserved: no allocation.
    buf.resize(buf.capacity().min(usize::try_from(len).unwrap_or(usize::MAX)), 0);
    Ok(buf)
}

/// An empty buffer with room for exactly `len` bytes, or an [`io::ErrorKind::OutOfMemory`]
/// error naming `what`.
///
/// # Errors
/// As [`try_zeroed`].
pub fn try_with_capacity(len: u64, what: &str) -> io::Result<Vec<u8>> {
    let refused = || {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("no memory for {what} ({len} bytes): the system refused the allocation"),
        )
    };
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
        assert_eq!(try_with_capacity(7, "x").unwrap().capacity(), 7);
        for len in [u64::MAX, 1 << 62, (isize::MAX as u64) + 1] {
            let e = try_zeroed(len, "a tensor").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
            assert!(e.to_string().contains("a tensor"), "{e}");
        }
    }
}
