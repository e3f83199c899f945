//! The one system call std does not offer that the writers use: starting write-back of a range
//! without waiting for it (`sync_file_range`, Linux). Besides the map module, the only module
//! that holds `unsafe`: one foreign call, with no memory of ours involved.

use std::fs::File;

/// Slots smaller than this are left to the final sync: a system call each would cost more
/// than it saves.
const WORTH_IT: u64 = 256 << 10;

/// Starts writing `len` bytes of `file` at `offset` out to the disk, without waiting. The
/// writer's final sync then finds most of the file already on its way (instead of submitting
/// all of it, alone, at the end), and each thread that wrote pages submits them itself. Only a
/// hint: where the system refuses, the final sync does the work.
#[cfg(target_os = "linux")]
pub fn start(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    if len < WORTH_IT {
        return;
    }
    let (Ok(offset), Ok(len)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len))
    else {
        return;
    };
    // SAFETY: `sync_file_range` reads and writes no memory of this process; the descriptor
    // stays open while `file` is borrowed; any range or flag it dislikes only makes it fail,
    // and a failure here is harmless (the final sync writes everything).
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}

/// Elsewhere the final sync does all the work.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &File, _offset: u64, _len: u64) {
    let _ = WORTH_IT;
}
