//! What a copy between files remembers: which blobs of a file several components share, and
//! where a writer put the shared blobs it copied, so that each is written once.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use ztensor_format::{Component, Packing, ValidatedManifest};

use crate::writer::options::WriteOptions;

/// Which blobs of a file several components share (the same offset and length, as the 1.x
/// format allows across objects), found once per reader, when a copy first asks. Each reader
/// has its own identity, so that what a writer remembers of one file's blobs is never taken
/// for another's.
#[derive(Debug)]
pub(crate) struct Sharing {
    pub(crate) id: u64,
    shared: OnceLock<HashSet<(u64, u64)>>,
}

impl Default for Sharing {
    fn default() -> Sharing {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Sharing { id: NEXT.fetch_add(1, Ordering::Relaxed), shared: OnceLock::new() }
    }
}

impl Sharing {
    /// The ranges (offset, length) that more than one non-empty component of a split object
    /// points at. A v0.1 sparse tensor's single blob is its own affair.
    pub(crate) fn shared(&self, manifest: &ValidatedManifest) -> &HashSet<(u64, u64)> {
        self.shared.get_or_init(|| {
            let mut ranges: Vec<(u64, u64)> = manifest
                .objects()
                .map(|o| o.object())
                .filter(|o| o.packing == Packing::Split)
                .flat_map(|o| o.components.values())
                .filter(|c| c.length > 0)
                .map(|c| (c.offset, c.length))
                .collect();
            ranges.sort_unstable();
            ranges.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect()
        })
    }
}

/// A shared blob of one reader: its identity, the blob's offset and length.
pub(crate) type BlobKey = (u64, u64, u64);

/// What a writer remembers of the shared blobs copied into it, by source reader and range.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Readers whose copy into this writer was checked against the expansion limit.
    pub(crate) checked: HashSet<u64>,
    /// Stored bytes copied as they are.
    pub(crate) stored: HashMap<BlobKey, StoredCopy>,
    /// Dense data decoded and encoded again.
    pub(crate) encoded: HashMap<BlobKey, Vec<EncodedCopy>>,
}

/// Where a shared blob's stored bytes were copied to.
#[derive(Debug)]
pub(crate) struct StoredCopy {
    pub(crate) offset: u64,
    /// Its decoded length as zstd, once a copy had to learn it.
    pub(crate) zstd_len: Option<u64>,
}

/// A dense component encoded again: what it was, how it was encoded, and what it became.
#[derive(Debug)]
pub(crate) struct EncodedCopy {
    pub(crate) source: Component,
    pub(crate) decoded: Option<u64>,
    pub(crate) options: WriteOptions,
    pub(crate) placed: Component,
}
