//! The `sha256:` digests an index records for its shards.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// `bytes` as lower-case hex digits, two per byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The length and `sha256:` digest of the file at `path`.
///
/// # Errors
/// I/O errors.
pub fn size_and_digest(path: &Path) -> Result<(u64, String)> {
    digest_file(ztensor_io::open_input(path)?, path)
}

/// The length and `sha256:` digest of the open `file` (at `path`, for messages).
///
/// # Errors
/// I/O errors.
pub fn digest_file(mut file: File, path: &Path) -> Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io("cannot read", path, &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, format!("sha256:{}", hex(&hasher.finalize()))))
}

/// The `sha256:` digest of all of `source` (a shard open as a file, or an object in a
/// bucket; `path` names it in messages), read a piece at a time.
///
/// # Errors
/// I/O errors.
pub fn digest_source(source: &dyn ztensor_io::ReadAt, path: &Path) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut at = 0u64;
    while at < source.len() {
        let n = usize::try_from((source.len() - at).min(buf.len() as u64)).unwrap_or(buf.len());
        source.read_exact_at(at, &mut buf[..n]).map_err(|e| Error::io("cannot read", path, &e))?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Ok(format!("sha256:{}", hex(&hasher.finalize())))
}
