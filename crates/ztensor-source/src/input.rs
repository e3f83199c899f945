//! Opening input files: regular files only, opened without waiting, read within a cap.
//!
//! Any input may be something other than a file: a FIFO whose open waits for a writer that
//! never comes, a device such as `/dev/zero` that reads forever, a directory. Every reader of
//! the workspace opens its inputs through [`open_input`] (non-blocking, then checked to be a
//! regular file before a byte is read) and reads small whole files (indexes, plans, receipts)
//! through [`read_input`], whose cap counts the bytes actually read, not the size the file
//! claims.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

use crate::error::{Error, Result};

/// What a file type is, in words, for refusals.
pub(crate) fn describe(kind: FileType) -> &'static str {
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        } else if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        } else if kind.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Opens the file at `path` for reading, following links, without waiting on a FIFO, and
/// refuses it unless it is a regular file.
///
/// # Errors
/// A FIFO, device, socket or directory; I/O errors, naming the path.
pub fn open_input(path: impl AsRef<Path>) -> Result<File> {
    let path = path.as_ref();
    let mut options = OpenOptions::new();
    options.read(true);
    // O_NONBLOCK makes the open of a FIFO return at once; it has no effect on the reads of a
    // regular file, the only kind kept.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file =
        options.open(path).map_err(|e| Error::io("cannot open", Some(path.to_owned()), e))?;
    let kind = file
        .metadata()
        .map_err(|e| Error::io("cannot stat", Some(path.to_owned()), e))?
        .file_type();
    if !kind.is_file() {
        return Err(Error::io(
            "refusing to read",
            Some(path.to_owned()),
            io::Error::new(io::ErrorKind::InvalidInput, format!("it is {}", describe(kind))),
        ));
    }
    Ok(file)
}

/// Reads the regular file at `path` whole, refusing it past `cap` bytes.
///
/// # Errors
/// As [`open_input`], and a file longer than `cap` (counted as read: a file that grows while
/// it is read is refused too).
pub fn read_input(path: impl AsRef<Path>, cap: u64) -> Result<Vec<u8>> {
    let path = path.as_ref();
    read_capped(open_input(path)?, cap, path)
}

/// Reads `file` whole, refusing it past `cap` bytes.
pub(crate) fn read_capped(file: File, cap: u64, path: &Path) -> Result<Vec<u8>> {
    let err = |e| Error::io("cannot read", Some(path.to_owned()), e);
    let claimed = file.metadata().map(|m| m.len()).unwrap_or(0);
    let over = || {
        err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it is over the limit of {cap} bytes for this kind of file"),
        ))
    };
    if claimed > cap {
        return Err(over());
    }
    let mut bytes = Vec::new();
    // What the file claims is only a hint: the cap holds whatever it really yields.
    bytes.try_reserve_exact(usize::try_from(claimed).unwrap_or(0)).map_err(|_| over())?;
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(err)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > cap {
        return Err(over());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn special_files_are_refused_without_waiting_or_reading() {
        let d = ztensor_testkit::scratch("io-input");
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Would wait for a writer forever if opened blocking.
        let e = open_input(&fifo).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        // Would read until memory runs out if read.
        let e = read_input("/dev/zero", 1 << 20).unwrap_err().to_string();
        assert!(e.contains("a device"), "{e}");
        assert!(read_input(&d, 10).unwrap_err().to_string().contains("a directory"));
        std::fs::write(d.join("f"), b"12345").unwrap();
        assert_eq!(read_input(d.join("f"), 5).unwrap(), b"12345");
        assert!(read_input(d.join("f"), 4).unwrap_err().to_string().contains("over the limit"));
    }
}
