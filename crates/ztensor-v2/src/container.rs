//! The container (`spec/ztensor-2.md` §1): the magic at both ends, the 40-byte footer, and the
//! manifest it points at, checked in the order the published corpus expects.

use ztensor_io::ReadAt;

use crate::error::{Error, Result, Rule};
use crate::manifest::{self, ALIGNMENT, Manifest};

/// The magic, at the start of the file and at its very end.
pub const MAGIC: [u8; 8] = *b"\x89ZT2\r\n\x1a\n";
/// The footer's length.
pub const FOOTER_LEN: u64 = 40;
/// The footer version this crate reads.
pub const VERSION: u32 = 2;
/// The longest manifest a file may have (1 GiB).
pub const MAX_MANIFEST: u64 = 1 << 30;

/// The footer, the last 40 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Where the manifest starts (0 for a data shard).
    pub manifest_offset: u64,
    /// The manifest's length (0 for a data shard).
    pub manifest_length: u64,
    /// XXH3-64 (seed 0) of the manifest bytes (0 for a data shard).
    pub manifest_hash: u64,
    /// The footer version (2).
    pub version: u32,
    /// Reserved: written 0, ignored when read.
    pub reserved: u32,
}

impl Footer {
    /// The footer in `bytes` (40 of them), whatever its values.
    pub fn parse(bytes: &[u8; 40]) -> Footer {
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        Footer {
            manifest_offset: u64_at(0),
            manifest_length: u64_at(8),
            manifest_hash: u64_at(16),
            version: u32_at(24),
            reserved: u32_at(28),
        }
    }
}

/// A zTensor 2 file whose container and manifest are valid: a model (with a manifest) or a
/// data shard (a blob heap another file's manifest points into).
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    /// The footer.
    pub footer: Footer,
    /// The manifest, `None` for a data shard.
    pub manifest: Option<Manifest>,
}

/// Reads and validates `source`'s container and manifest (§1.5): size, both magics, the
/// version, the manifest's size, placement and hash, its CBOR, schema and whole-manifest rules.
/// `max_manifest` bounds the manifest read into memory (at most [`MAX_MANIFEST`]).
///
/// # Errors
/// The first rule broken ([`Rule`]), or an I/O error.
pub fn open(source: &dyn ReadAt, max_manifest: u64) -> Result<Container> {
    let len = source.len();
    if len < 8 + FOOTER_LEN {
        return Err(Error::rule(
            Rule::FileTooSmall,
            format!(
                "{len} bytes is shorter than the magic and the footer (48); {}",
                ztensor_format::CUT_SHORT_HINT
            ),
        ));
    }
    let read = |offset: u64, buf: &mut [u8]| {
        source.read_exact_at(offset, buf).map_err(|e| Error::io("reading the file", e))
    };
    let mut head = [0u8; 8];
    read(0, &mut head)?;
    if head != MAGIC {
        return Err(Error::rule(
            Rule::HeaderMagic,
            "the file does not start with the zTensor 2 magic",
        )
        .at(0));
    }
    let mut tail = [0u8; 40];
    read(len - FOOTER_LEN, &mut tail)?;
    if tail[32..] != MAGIC {
        return Err(Error::rule(
            Rule::FooterMagic,
            format!(
                "the file does not end with the zTensor 2 magic; {}",
                ztensor_format::CUT_SHORT_HINT
            ),
        )
        .at(len - 8));
    }
    let footer = Footer::parse(&tail);
    if footer.version != VERSION {
        return Err(Error::rule(
            Rule::Version,
            format!("footer version {} (this reader reads 2)", footer.version),
        )
        .at(len - 16));
    }
    let (offset, length) = (footer.manifest_offset, footer.manifest_length);
    if length == 0 {
        if offset != 0 || footer.manifest_hash != 0 {
            return Err(Error::rule(
                Rule::ManifestBounds,
                "a data shard's footer (no manifest) has offset and hash 0",
            )
            .at(len - FOOTER_LEN));
        }
        return Ok(Container { footer, manifest: None });
    }
    if length > MAX_MANIFEST.min(max_manifest) {
        return Err(Error::rule(
            Rule::ManifestTooLarge,
            format!("a manifest of {length} bytes (at most {})", MAX_MANIFEST.min(max_manifest)),
        ));
    }
    if offset % ALIGNMENT != 0 || offset < ALIGNMENT {
        return Err(Error::rule(
            Rule::BlobAlignment,
            format!("the manifest at {offset} is not a multiple of 4096 at or after 4096"),
        ));
    }
    let region_end = len - FOOTER_LEN;
    if offset.checked_add(length).is_none_or(|end| end > region_end) {
        return Err(Error::rule(
            Rule::ManifestBounds,
            format!("the manifest at {offset}+{length} passes the footer at {region_end}"),
        ));
    }
    let hash_error = |hash: u64| {
        Error::rule(
            Rule::ManifestHash,
            format!(
                "the manifest's XXH3-64 is {hash:016x}, the footer says {:016x}",
                footer.manifest_hash
            ),
        )
    };
    // A manifest is read a window at a time and parsed as it comes, its bytes never held
    // whole (a million objects are 94 MB of them); one that is not parsed so is read whole,
    // and the hash, the CBOR and the schema give their verdicts in that order.
    let streamed =
        manifest::parse_read(length, manifest::WINDOW, &mut |at, buf| read(offset + at, buf))?;
    let manifest = match streamed {
        Some((_, hash)) if hash != footer.manifest_hash => return Err(hash_error(hash)),
        Some((manifest, _)) => manifest,
        None => {
            let mut bytes = ztensor_io::try_zeroed(length, "the manifest")
                .map_err(|e| Error::io("reading the manifest", e))?;
            read(offset, &mut bytes)?;
            let hash = xxhash_rust::xxh3::xxh3_64(&bytes);
            if hash != footer.manifest_hash {
                return Err(hash_error(hash));
            }
            // The offsets of CBOR faults count from the manifest's first byte.
            manifest::parse_bytes(&bytes)?
        }
    };
    manifest::validate(&manifest, region_end, (offset, length))?;
    Ok(Container { footer, manifest: Some(manifest) })
}
