//! Container framing: the header magic, the trailer (manifest size, and for v1.x the footer
//! magic), and locating the manifest from the file length and the tail bytes alone.

use crate::error::{Error, ErrorKind, Result};
use crate::limits::Limits;

/// The v0.1 magic, at offset 0.
pub const MAGIC_V0_1: [u8; 8] = *b"ZTEN0001";
/// The v1.x magic, at offset 0 and again as the last 8 bytes.
pub const MAGIC_V1: [u8; 8] = *b"ZTEN1000";
/// Length of the header magic.
pub const HEADER_LEN: u64 = 8;

/// What a message adds when a file's end does not hold what its start promises: the most
/// common cause is a file cut short, by an interrupted download or copy.
pub const CUT_SHORT_HINT: &str = "the file may be cut short (an incomplete download or copy?)";

/// The container generation, told apart by the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Container {
    /// `ZTEN0001`: blobs, CBOR array, `u64` LE size.
    V0_1,
    /// `ZTEN1000`: blobs, CBOR map, `u64` LE size, `ZTEN1000`.
    V1,
}

impl Container {
    /// Detects the container from the first bytes of a file.
    ///
    /// # Errors
    /// [`ErrorKind::FileTooSmall`] for fewer than 8 bytes, [`ErrorKind::HeaderMagic`] for an
    /// unknown magic.
    pub fn detect(head: &[u8]) -> Result<Container> {
        let Some(magic) = head.get(..8) else {
            return Err(Error::new(
                ErrorKind::FileTooSmall,
                "file is shorter than the 8-byte magic",
            )
            .expected_found(">= 8 bytes", head.len()));
        };
        match magic {
            m if m == MAGIC_V0_1 => Ok(Container::V0_1),
            m if m == MAGIC_V1 => Ok(Container::V1),
            m => Err(Error::new(ErrorKind::HeaderMagic, "not a zTensor file")
                .expected_found("ZTEN0001 or ZTEN1000", format!("{:02x?}", m))
                .at(0)),
        }
    }

    /// The header magic.
    pub fn magic(self) -> [u8; 8] {
        match self {
            Container::V0_1 => MAGIC_V0_1,
            Container::V1 => MAGIC_V1,
        }
    }

    /// Bytes after the manifest: the size field, plus the footer magic in v1.x.
    pub fn trailer_len(self) -> u64 {
        match self {
            Container::V0_1 => 8,
            Container::V1 => 16,
        }
    }

    /// The smallest file possible: header, a one-byte manifest, trailer.
    pub fn min_file_len(self) -> u64 {
        HEADER_LEN + 1 + self.trailer_len()
    }

    /// Locates the manifest from the file length and the last [`Container::trailer_len`] bytes.
    ///
    /// # Errors
    /// [`ErrorKind::FileTooSmall`], [`ErrorKind::FooterMagic`],
    /// [`ErrorKind::ManifestTooLarge`], [`ErrorKind::ManifestOutOfBounds`]; and
    /// [`ErrorKind::InvalidInput`] when `tail` is not exactly the trailer length.
    pub fn locate_manifest(
        self,
        file_len: u64,
        tail: &[u8],
        limits: &Limits,
    ) -> Result<ManifestLocation> {
        if file_len < self.min_file_len() {
            return Err(Error::new(
                ErrorKind::FileTooSmall,
                "file is shorter than the smallest valid file",
            )
            .expected_found(format!(">= {} bytes", self.min_file_len()), file_len)
            .hint(CUT_SHORT_HINT));
        }
        let (Ok(size_bytes), footer) =
            (<[u8; 8]>::try_from(tail.get(..8).unwrap_or_default()), tail.get(8..))
        else {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "tail must hold the file's last trailer bytes",
            ));
        };
        if tail.len() as u64 != self.trailer_len() {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "tail must hold the file's last trailer bytes",
            ));
        }
        let trailer_at = file_len - self.trailer_len();
        if self == Container::V1 && footer != Some(&MAGIC_V1[..]) {
            return Err(Error::new(ErrorKind::FooterMagic, "v1.x file does not end with ZTEN1000")
                .expected_found("ZTEN1000", format!("{:02x?}", footer.unwrap_or_default()))
                .at(trailer_at + 8)
                .hint(CUT_SHORT_HINT));
        }
        let len = u64::from_le_bytes(size_bytes);
        let room = trailer_at - HEADER_LEN;
        // A size that does not fit is what the last bytes of a file cut short read as (v0.1
        // has no footer magic to tell it sooner): said whichever rule reports it.
        let hinted = |e: Error| if len > room { e.hint(CUT_SHORT_HINT) } else { e };
        if len > limits.max_manifest_len {
            return Err(hinted(
                Error::new(
                    ErrorKind::ManifestTooLarge,
                    "declared manifest size is above the limit",
                )
                .expected_found(format!("<= {}", limits.max_manifest_len), len)
                .at(trailer_at),
            ));
        }
        if len > room {
            return Err(hinted(
                Error::new(
                    ErrorKind::ManifestOutOfBounds,
                    "declared manifest size does not fit in the file",
                )
                .expected_found(format!("<= {room}"), len)
                .at(trailer_at),
            ));
        }
        Ok(ManifestLocation { container: self, offset: trailer_at - len, len, file_len })
    }

    /// The trailer bytes that follow a manifest of `manifest_len` bytes.
    pub fn encode_trailer(self, manifest_len: u64) -> Vec<u8> {
        let mut out = manifest_len.to_le_bytes().to_vec();
        if self == Container::V1 {
            out.extend_from_slice(&MAGIC_V1);
        }
        out
    }
}

/// Where a manifest lies in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestLocation {
    /// The container.
    pub container: Container,
    /// Absolute offset of the manifest: also the end of the data area.
    pub offset: u64,
    /// Manifest length in bytes.
    pub len: u64,
    /// The whole file's length.
    pub file_len: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_and_locate() {
        assert_eq!(Container::detect(b"ZTEN0001xyz").unwrap(), Container::V0_1);
        assert_eq!(Container::detect(b"ZTEN1000").unwrap(), Container::V1);
        assert_eq!(Container::detect(b"ZTEN").unwrap_err().kind(), ErrorKind::FileTooSmall);
        assert_eq!(Container::detect(b"ZTEN2000").unwrap_err().kind(), ErrorKind::HeaderMagic);
        let limits = Limits::default();
        let loc = Container::V0_1.locate_manifest(17, &1u64.to_le_bytes(), &limits).unwrap();
        assert_eq!((loc.offset, loc.len), (8, 1));
        let tail = Container::V1.encode_trailer(1);
        let loc = Container::V1.locate_manifest(25, &tail, &limits).unwrap();
        assert_eq!((loc.offset, loc.len), (8, 1));
        assert_eq!(
            Container::V1.locate_manifest(25, &tail[..8], &limits).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }

    #[test]
    fn a_file_cut_short_is_said_to_be() {
        let limits = Limits::default();
        // A v1.x file that lost its last bytes ends in data, not in the footer magic.
        let e = Container::V1.locate_manifest(4096, &[7; 16], &limits).unwrap_err();
        assert_eq!((e.kind(), e.likely_cause()), (ErrorKind::FooterMagic, Some(CUT_SHORT_HINT)));
        assert!(
            e.to_string().ends_with(
                "[footer_magic]; the file may be cut short (an incomplete download or copy?)"
            ),
            "{e}"
        );
        // v0.1 has no footer magic: data read as a size fits nothing, whichever rule says so.
        let huge = Container::V0_1.locate_manifest(4096, &u64::MAX.to_le_bytes(), &limits);
        let huge = huge.unwrap_err();
        assert_eq!(
            (huge.kind(), huge.likely_cause()),
            (ErrorKind::ManifestTooLarge, Some(CUT_SHORT_HINT))
        );
        let over = Container::V0_1.locate_manifest(4096, &5000u64.to_le_bytes(), &limits);
        let over = over.unwrap_err();
        assert_eq!(
            (over.kind(), over.likely_cause()),
            (ErrorKind::ManifestOutOfBounds, Some(CUT_SHORT_HINT))
        );
        let short = Container::V1.locate_manifest(20, &[0; 16], &limits).unwrap_err();
        assert_eq!(
            (short.kind(), short.likely_cause()),
            (ErrorKind::FileTooSmall, Some(CUT_SHORT_HINT))
        );
        // A manifest that fits the file but not the limit is no sign of a cut.
        let tight = Limits { max_manifest_len: 100, ..Limits::default() };
        let big = Container::V1.locate_manifest(4096, &Container::V1.encode_trailer(1000), &tight);
        let big = big.unwrap_err();
        assert_eq!((big.kind(), big.likely_cause()), (ErrorKind::ManifestTooLarge, None));
        assert!(!big.to_string().contains("cut short"), "{big}");
    }
}
