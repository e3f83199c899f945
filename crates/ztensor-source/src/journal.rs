//! The append journal: a small file beside the target that records where the target's last
//! complete state ends while an append writes past it.
//!
//! A v1.x file is framed by its last bytes, and an append writes blobs before its manifest, so
//! a file cut short by a crash ends with whatever the appended data ends with, which may itself
//! look like a manifest and trailer. The file alone cannot say where the append began; the
//! journal can, and the appended data cannot forge it. It is written and made durable before the
//! first byte goes past the old end, and removed (durably) only after the new trailer is durable:
//! while it exists, the old length is the file's true end. Undoing an append is truncating back
//! to that length, which needs no free space.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::paths::FileId;

/// A record whose digests are SHA-256.
const MAGIC: &[u8; 8] = b"ZTJRNL02";
/// A record whose digests are BLAKE3, as earlier releases wrote them: still honoured by builds
/// that have BLAKE3, so that an append interrupted before an upgrade is undone after it.
#[cfg(feature = "blake3")]
const MAGIC_BLAKE3: &[u8; 8] = b"ZTJRNL01";
const RECORD_LEN: usize = 112;
/// How many bytes before the old end the record's digest covers: enough to tell this file's
/// state from another's, cheap to read.
const TAIL: u64 = 4096;

/// One record: which file, its old length, and a digest of the bytes just before that length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    /// The file it is the journal of.
    pub id: FileId,
    /// The file's length before the append: what rolling back truncates it to.
    pub old_len: u64,
    tail_digest: [u8; 32],
    pid: u32,
    /// The digest of the record's two digests.
    algorithm: Algorithm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Sha256,
    #[cfg(feature = "blake3")]
    Blake3,
}

impl Algorithm {
    fn digest(self, parts: &[&[u8]]) -> [u8; 32] {
        match self {
            Algorithm::Sha256 => {
                use sha2::Digest;
                let mut h = sha2::Sha256::new();
                for part in parts {
                    h.update(part);
                }
                h.finalize().into()
            }
            #[cfg(feature = "blake3")]
            Algorithm::Blake3 => {
                let mut h = blake3::Hasher::new();
                for part in parts {
                    h.update(part);
                }
                *h.finalize().as_bytes()
            }
        }
    }
}

fn tail_digest(file: &File, old_len: u64, algorithm: Algorithm) -> io::Result<[u8; 32]> {
    let take = old_len.min(TAIL);
    let mut buf = vec![0u8; usize::try_from(take).unwrap_or(0)];
    crate::paths::pread_exact(file, &mut buf, old_len - take)?;
    Ok(algorithm.digest(&[&old_len.to_le_bytes(), &buf]))
}

impl Journal {
    /// The journal path of the file at `target` (symbolic links resolved: the journal lies
    /// beside the file itself).
    pub fn path_for(target: &Path) -> Result<PathBuf> {
        let real = crate::paths::resolve_links(target)?;
        Ok(crate::paths::sidecar(&real, "zt-journal"))
    }

    /// A record of `file` as it is now, `old_len` bytes long.
    pub fn of(file: &File, id: FileId, old_len: u64) -> io::Result<Journal> {
        Ok(Journal {
            id,
            old_len,
            tail_digest: tail_digest(file, old_len, Algorithm::Sha256)?,
            pid: std::process::id(),
            algorithm: Algorithm::Sha256,
        })
    }

    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[..8].copy_from_slice(match self.algorithm {
            Algorithm::Sha256 => MAGIC,
            #[cfg(feature = "blake3")]
            Algorithm::Blake3 => MAGIC_BLAKE3,
        });
        out[8..16].copy_from_slice(&self.id.dev.to_le_bytes());
        out[16..24].copy_from_slice(&self.id.ino.to_le_bytes());
        out[24..32].copy_from_slice(&self.old_len.to_le_bytes());
        out[32..64].copy_from_slice(&self.tail_digest);
        out[64..72].copy_from_slice(&u64::from(self.pid).to_le_bytes());
        let check = self.algorithm.digest(&[&out[..80]]);
        out[80..].copy_from_slice(&check);
        out
    }

    fn decode(bytes: &[u8]) -> Option<Journal> {
        let record: &[u8; RECORD_LEN] = bytes.try_into().ok()?;
        let algorithm = match &record[..8] {
            m if m == MAGIC => Algorithm::Sha256,
            #[cfg(feature = "blake3")]
            m if m == MAGIC_BLAKE3 => Algorithm::Blake3,
            _ => return None,
        };
        if algorithm.digest(&[&record[..80]]) != record[80..] {
            return None;
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&record[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut tail_digest = [0u8; 32];
        tail_digest.copy_from_slice(&record[32..64]);
        Some(Journal {
            id: FileId { dev: u64_at(8), ino: u64_at(16) },
            old_len: u64_at(24),
            tail_digest,
            pid: u32::try_from(u64_at(64)).unwrap_or(0),
            algorithm,
        })
    }

    /// Writes the record to `path` and makes it durable, file and directory entry both, before
    /// returning.
    pub fn write(&self, path: &Path) -> Result<()> {
        let io = |what: &'static str| {
            let path = path.to_owned();
            move |e| Error::io(what, Some(path), e)
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io("cannot create the append journal"))?;
        file.write_all(&self.encode()).map_err(io("writing the append journal"))?;
        file.sync_all().map_err(io("syncing the append journal"))?;
        crate::paths::sync_dir(path).map_err(io("syncing the directory of"))?;
        Ok(())
    }

    /// The journal at `path`, when there is one that is complete and describes `file` (the file
    /// `id`): the same file, at least as long as its recorded old length, and with the same bytes
    /// before it. A torn or foreign record is no journal: a torn one was never followed by
    /// writes to the file, which happen only once the record is durable.
    pub fn read_matching(path: &Path, id: FileId, file: &File) -> Result<Option<Journal>> {
        let mut bytes = Vec::with_capacity(RECORD_LEN);
        match File::open(path) {
            Ok(f) => {
                f.take(RECORD_LEN as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| Error::io("cannot read", Some(path.to_owned()), e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("cannot open", Some(path.to_owned()), e)),
        }
        let Some(journal) = Journal::decode(&bytes) else { return Ok(None) };
        let len = file.metadata().map_err(|e| Error::io("cannot stat", None, e))?.len();
        if journal.id != id || journal.old_len > len {
            return Ok(None);
        }
        match tail_digest(file, journal.old_len, journal.algorithm) {
            Ok(d) if d == journal.tail_digest => Ok(Some(journal)),
            Ok(_) => Ok(None),
            Err(e) => Err(Error::io("reading before the append journal's end", None, e)),
        }
    }

    /// Whether the journal at `path` is a complete record about the file `id` (whatever its
    /// state now): for cleaning up after the file was replaced.
    pub(crate) fn read_matching_id(path: &Path, id: FileId) -> bool {
        std::fs::read(path).ok().and_then(|b| Journal::decode(&b)).is_some_and(|j| j.id == id)
    }

    /// The process that wrote the record.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// Removes the journal at `path`, durably; a missing one is already removed.
pub fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Error::io("cannot remove the append journal", Some(path.to_owned()), e));
        }
    }
    crate::paths::sync_dir(path)
        .map_err(|e| Error::io("syncing the directory of", Some(path.to_owned()), e))
}

/// Undoes an unfinished append: truncates `file` back to the journal's old length and syncs it,
/// then removes the journal. Needs no free space.
pub fn roll_back(file: &File, journal: &Journal, journal_path: &Path) -> Result<()> {
    let io = |what: &'static str| {
        let path = journal_path.to_owned();
        move |e| Error::io(what, Some(path), e)
    };
    file.set_len(journal.old_len).map_err(io("truncating back to the state recorded in"))?;
    file.sync_all().map_err(io("syncing after truncating back to the state recorded in"))?;
    remove(journal_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_encoding_and_a_torn_one_is_none() {
        let j = Journal {
            id: FileId { dev: 7, ino: 9 },
            old_len: 12345,
            tail_digest: [3; 32],
            pid: 42,
            algorithm: Algorithm::Sha256,
        };
        let bytes = j.encode();
        assert_eq!(&bytes[..8], b"ZTJRNL02");
        assert_eq!(Journal::decode(&bytes), Some(j));
        for cut in 0..RECORD_LEN {
            assert_eq!(Journal::decode(&bytes[..cut]), None, "cut {cut}");
        }
        let mut flipped = bytes;
        flipped[30] ^= 1;
        assert_eq!(Journal::decode(&flipped), None);
    }

    /// A record as earlier releases wrote it (BLAKE3, `ZTJRNL01`), laid out here by hand.
    #[cfg(feature = "blake3")]
    #[test]
    fn a_record_of_an_earlier_release_is_still_read() {
        let mut old = [0u8; RECORD_LEN];
        old[..8].copy_from_slice(b"ZTJRNL01");
        old[8..16].copy_from_slice(&7u64.to_le_bytes());
        old[16..24].copy_from_slice(&9u64.to_le_bytes());
        old[24..32].copy_from_slice(&12345u64.to_le_bytes());
        old[32..64].copy_from_slice(&[3; 32]);
        old[64..72].copy_from_slice(&42u64.to_le_bytes());
        let check = *blake3::hash(&old[..80]).as_bytes();
        old[80..].copy_from_slice(&check);
        let j = Journal::decode(&old).expect("an earlier release's record");
        assert_eq!(
            (j.id, j.old_len, j.pid, j.algorithm),
            (FileId { dev: 7, ino: 9 }, 12345, 42, Algorithm::Blake3)
        );
        assert_eq!(j.encode(), old, "re-encoded as it was written");
        // Its tail digest is BLAKE3 of the length and the bytes before it.
        let dir = ztensor_testkit::scratch("journal");
        let path = dir.join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = File::open(&path).unwrap();
        let mut h = blake3::Hasher::new();
        h.update(&10u64.to_le_bytes());
        h.update(b"0123456789");
        assert_eq!(tail_digest(&file, 10, Algorithm::Blake3).unwrap(), *h.finalize().as_bytes());
    }
}
