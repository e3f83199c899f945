//! Counting the opens of a file, as the kernel sees them (inotify), whoever opens it: what
//! tests that a command or a reader opens its input once use.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An inotify watch for the opens of one file.
#[derive(Debug)]
pub struct Opens {
    fd: libc::c_int,
}

impl Opens {
    /// Watches the file at `path`.
    ///
    /// # Panics
    /// When the kernel refuses the watch.
    pub fn watch(path: &Path) -> Opens {
        // SAFETY: plain system calls on a descriptor this watch owns; the path is a valid C
        // string that outlives the call.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0, "inotify_init1: {}", std::io::Error::last_os_error());
            let name = CString::new(path.as_os_str().as_bytes()).unwrap();
            // Reads and closes are watched too, though not counted: the kernel merges an
            // event with the one before it when they are the same, so two opens in a row
            // would be seen as one; an access or a close between them keeps them apart.
            let mask = libc::IN_OPEN | libc::IN_ACCESS | libc::IN_CLOSE_NOWRITE;
            let wd = libc::inotify_add_watch(fd, name.as_ptr(), mask);
            assert!(wd >= 0, "inotify_add_watch: {}", std::io::Error::last_os_error());
            Opens { fd }
        }
    }

    /// The opens seen since the last call.
    pub fn take(&self) -> usize {
        let mut opens = 0;
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reads into a buffer of the length given.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return opens;
            }
            let mut at = 0;
            while at < n as usize {
                // SAFETY: the kernel wrote whole events; `read_unaligned` copes with the
                // buffer's alignment.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(at).cast()) };
                if event.mask & libc::IN_OPEN != 0 {
                    opens += 1;
                }
                at += std::mem::size_of::<libc::inotify_event>() + event.len as usize;
            }
        }
    }
}

impl Drop for Opens {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this watch's own.
        unsafe { libc::close(self.fd) };
    }
}
