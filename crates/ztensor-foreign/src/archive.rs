//! The zip archives NumPy `.npz` files (and PyTorch checkpoints) are: the central directory
//! (zip64 included), members stored or deflated, nothing else (no encryption, no spanning).
//!
//! Written here rather than taken from the `zip` crate because what these files need is small
//! and every count and offset in it is hostile: entries are bounded by the directory's size,
//! the directory by the file, each member's data must lie before the directory, and a deflated
//! member inflates to exactly its declared size (within a caller's limit) with its CRC-32.

use ztensor_io::ReadAt;

use crate::error::{Error, ErrorKind, Result};

/// How a member's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Stored,
    Deflated,
}

/// One member of an archive.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) method: Method,
    /// Where its local header starts in the archive.
    pub(crate) local: u64,
    /// Where its stored bytes start in the archive.
    pub(crate) offset: u64,
    pub(crate) compressed: u64,
    pub(crate) size: u64,
    pub(crate) crc32: u32,
}

pub(crate) fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, format!("zip archive: {}", message.into()))
}

fn read_at<S: ReadAt + ?Sized>(source: &S, at: u64, n: u64) -> Result<Vec<u8>> {
    if at.checked_add(n).is_none_or(|end| end > source.len()) {
        return Err(malformed(format!(
            "{n} bytes at {at} run past the end ({} bytes)",
            source.len()
        )));
    }
    let mut buf = vec![0u8; usize::try_from(n).map_err(|_| malformed("too large"))?];
    source
        .read_exact_at(at, &mut buf)
        .map_err(|e| Error::new(ErrorKind::Io, format!("reading byte {at}: {e}")))?;
    Ok(buf)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

const EOCD: u32 = 0x0605_4b50;
const ZIP64_EOCD: u32 = 0x0606_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

/// Reads the members of the zip archive in `source`.
pub(crate) fn members<S: ReadAt + ?Sized>(source: &S) -> Result<Vec<Member>> {
    let len = source.len();
    // The end record: 22 bytes and a comment of at most 65,535.
    let tail_len = len.min(22 + 65_535);
    let tail = read_at(source, len - tail_len, tail_len)?;
    let at = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| {
            u32_at(&tail, i) == EOCD && i + 22 + usize::from(u16_at(&tail, i + 20)) == tail.len()
        })
        .ok_or_else(|| malformed("no end-of-central-directory record"))?;
    let eocd_at = len - tail_len + at as u64;
    let e = &tail[at..];
    if u16_at(e, 4) != 0 || u16_at(e, 6) != 0 {
        return Err(malformed("an archive spanning several disks"));
    }
    let (mut count, mut cd_size, mut cd_offset) =
        (u64::from(u16_at(e, 10)), u64::from(u32_at(e, 12)), u64::from(u32_at(e, 16)));
    let mut cd_end = eocd_at;
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
        // zip64: a locator just before the end record points at the zip64 end record.
        let locator_at = eocd_at.checked_sub(20).ok_or_else(|| malformed("no zip64 locator"))?;
        let locator = read_at(source, locator_at, 20)?;
        if u32_at(&locator, 0) != ZIP64_LOCATOR {
            return Err(malformed("no zip64 locator before a zip64 end record"));
        }
        let record_at = u64_at(&locator, 8);
        if record_at.checked_add(56).is_none_or(|end| end > locator_at) {
            return Err(malformed("the zip64 end record lies past its locator"));
        }
        let record = read_at(source, record_at, 56)?;
        if u32_at(&record, 0) != ZIP64_EOCD {
            return Err(malformed("no zip64 end record where its locator says"));
        }
        count = u64_at(&record, 32);
        cd_size = u64_at(&record, 40);
        cd_offset = u64_at(&record, 48);
        cd_end = record_at;
    }
    if cd_offset.checked_add(cd_size).is_none_or(|end| end > cd_end) {
        return Err(malformed(format!(
            "a central directory of {cd_size} bytes at {cd_offset} past its end record at {cd_end}"
        )));
    }
    // Every entry takes at least 46 bytes of the directory.
    if count > cd_size / 46 {
        return Err(malformed(format!("{count} entries in a {cd_size}-byte central directory")));
    }
    let cd = read_at(source, cd_offset, cd_size)?;
    let mut members = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut seen = std::collections::HashSet::new();
    let mut at = 0usize;
    for _ in 0..count {
        if at + 46 > cd.len() || u32_at(&cd, at) != CENTRAL {
            return Err(malformed(format!("a central directory entry at {at} is not one")));
        }
        let flags = u16_at(&cd, at + 8);
        let method = match u16_at(&cd, at + 10) {
            0 => Method::Stored,
            8 => Method::Deflated,
            m => {
                return Err(malformed(format!(
                    "compression method {m} (stored and deflated are read)"
                )));
            }
        };
        if flags & 1 != 0 {
            return Err(malformed("an encrypted member"));
        }
        let crc32 = u32_at(&cd, at + 16);
        let mut compressed = u64::from(u32_at(&cd, at + 20));
        let mut size = u64::from(u32_at(&cd, at + 24));
        let name_len = usize::from(u16_at(&cd, at + 28));
        let extra_len = usize::from(u16_at(&cd, at + 30));
        let comment_len = usize::from(u16_at(&cd, at + 32));
        let mut local = u64::from(u32_at(&cd, at + 42));
        let end = at + 46 + name_len + extra_len + comment_len;
        if end > cd.len() {
            return Err(malformed("a central directory entry runs past the directory"));
        }
        let name = String::from_utf8_lossy(&cd[at + 46..at + 46 + name_len]).into_owned();
        // zip64 sizes and offset, in the order the standard gives, for the fields that say so.
        let mut extra = &cd[at + 46 + name_len..at + 46 + name_len + extra_len];
        while extra.len() >= 4 {
            let (id, n) = (u16_at(extra, 0), usize::from(u16_at(extra, 2)));
            let body =
                extra.get(4..4 + n).ok_or_else(|| malformed("an extra field past its entry"))?;
            if id == 1 {
                let mut fields = body.chunks_exact(8).map(|c| u64_at(c, 0));
                let mut take = |v: &mut u64| -> Result<()> {
                    if *v == 0xFFFF_FFFF {
                        *v = fields.next().ok_or_else(|| malformed("a short zip64 extra field"))?;
                    }
                    Ok(())
                };
                take(&mut size)?;
                take(&mut compressed)?;
                take(&mut local)?;
            }
            extra = &extra[4 + n..];
        }
        if method == Method::Stored && compressed != size {
            return Err(malformed(format!(
                "stored member {name:?} of {compressed} bytes declares {size}"
            )));
        }
        let header = read_at(source, local, 30)?;
        if u32_at(&header, 0) != LOCAL {
            return Err(malformed(format!("member {name:?}: no local header at {local}")));
        }
        let offset = local + 30 + u64::from(u16_at(&header, 26)) + u64::from(u16_at(&header, 28));
        if offset.checked_add(compressed).is_none_or(|end| end > cd_offset) {
            return Err(malformed(format!(
                "member {name:?}: {compressed} bytes at {offset} run into the central directory"
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(malformed(format!("member {name:?} appears twice")));
        }
        members.push(Member { name, method, local, offset, compressed, size, crc32 });
        at = end;
    }
    // Members share no bytes (as Info-ZIP's unzip requires since 6.1): directory entries that
    // point into one stream would inflate it once each, an amplification of any size.
    let mut spans: Vec<(u64, u64, &str)> =
        members.iter().map(|m| (m.local, m.offset + m.compressed, m.name.as_str())).collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        if start < end {
            return Err(malformed(format!(
                "members {a:?} and {b:?} overlap (bytes {start} to {end}): an archive whose \
                 entries share data is refused"
            )));
        }
    }
    Ok(members)
}

#[cfg(any(feature = "numpy", feature = "torch"))]
mod read;
#[cfg(feature = "numpy")]
pub(crate) use read::{At, is_crc_mismatch};

/// What a zip archive holds, told by its member names alone (whether or not this build reads
/// it): NumPy arrays, every member a `.npy` (an `.npz` file), or a PyTorch checkpoint, one
/// `ARCHIVE/data.pkl` at the top level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZipContent {
    /// Every member is a `.npy` array.
    Npz,
    /// A `torch.save` archive.
    Torch,
}

/// What the zip archive in `source` holds, or `None` when it is not a zip archive this
/// project can read or holds something else.
pub fn zip_content<S: ReadAt + ?Sized>(source: &S) -> Option<ZipContent> {
    let members = members(source).ok()?;
    if !members.is_empty() && members.iter().all(|m| m.name.ends_with(".npy")) {
        Some(ZipContent::Npz)
    } else if members.iter().any(|m| top_level_pickle(&m.name).is_some()) {
        Some(ZipContent::Torch)
    } else {
        None
    }
}

/// `archive` for `archive/data.pkl`.
pub(crate) fn top_level_pickle(name: &str) -> Option<&str> {
    name.strip_suffix("/data.pkl").filter(|p| !p.is_empty() && !p.contains('/'))
}
