//! Zip archives built byte by byte, laid out as any zip writer lays them out (local headers,
//! then the central directory, then its end record; no data descriptors, no zip64), so
//! tests can make `.npz` files and PyTorch checkpoints, well-formed or not.

use std::io::Write as _;

/// A zip archive under construction: [`Zip::member`] adds an entry, [`Zip::finish`] writes the
/// central directory.
///
/// ```
/// let archive = ztensor_testkit::Zip::new()
///     .member("archive/data.pkl", b"pickle", false)
///     .member("archive/data/0", &[0; 16], true)
///     .finish();
/// assert!(archive.ends_with(&[0, 0]));
/// ```
#[derive(Debug)]
pub struct Zip {
    out: Vec<u8>,
    central: Vec<u8>,
    count: u16,
    level: flate2::Compression,
    shared: bool,
    first_at: Option<u32>,
}

impl Default for Zip {
    fn default() -> Zip {
        Zip::new()
    }
}

impl Zip {
    /// An empty archive; deflated members at flate2's default level.
    #[must_use]
    pub fn new() -> Zip {
        Zip {
            out: Vec::new(),
            central: Vec::new(),
            count: 0,
            level: flate2::Compression::default(),
            shared: false,
            first_at: None,
        }
    }

    /// Deflates the members added after this at `level`.
    #[must_use]
    pub fn level(mut self, level: flate2::Compression) -> Zip {
        self.level = level;
        self
    }

    /// Every member after the first points at the first one's local header and data (a
    /// hostile archive: many names, one stored copy); their own bytes are not written.
    #[must_use]
    pub fn shared(mut self) -> Zip {
        self.shared = true;
        self
    }

    /// Adds `data` as member `name`, deflated when `deflate` says so, else stored.
    #[must_use]
    pub fn member(self, name: &str, data: &[u8], deflate: bool) -> Zip {
        if deflate {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), self.level);
            e.write_all(data).expect("deflating into memory");
            let stored = e.finish().expect("deflating into memory");
            self.raw(name, data, &stored, 8)
        } else {
            self.raw(name, data, data, 0)
        }
    }

    /// Adds member `name` whose bytes in the archive are `stored` under compression `method`
    /// (0 stored, 8 deflated) and whose headers give `data`'s length and CRC: `stored` need
    /// not be what `data` compresses to, so a test can plant a corrupt member.
    ///
    /// # Panics
    /// When a length or offset does not fit the (non-zip64) header fields.
    #[must_use]
    pub fn raw(mut self, name: &str, data: &[u8], stored: &[u8], method: u16) -> Zip {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let fields = |v: &mut Vec<u8>| {
            v.extend(method.to_le_bytes());
            // Modification time and date.
            v.extend([0; 4]);
            v.extend(crc.sum().to_le_bytes());
            v.extend(u32::try_from(stored.len()).expect("a stored size").to_le_bytes());
            v.extend(u32::try_from(data.len()).expect("a size").to_le_bytes());
            v.extend(u16::try_from(name.len()).expect("a name length").to_le_bytes());
            // Extra field length.
            v.extend(0u16.to_le_bytes());
        };
        let here = u32::try_from(self.out.len()).expect("an offset");
        let at = if self.shared { *self.first_at.get_or_insert(here) } else { here };
        if at == here {
            self.out.extend(b"PK\x03\x04\x14\x00\x00\x00");
            fields(&mut self.out);
            self.out.extend(name.as_bytes());
            self.out.extend(stored);
        }
        self.central.extend(b"PK\x01\x02\x14\x00\x14\x00\x00\x00");
        fields(&mut self.central);
        // Comment length, disk, internal and external attributes.
        self.central.extend([0; 10]);
        self.central.extend(at.to_le_bytes());
        self.central.extend(name.as_bytes());
        self.count = self.count.checked_add(1).expect("at most 65,535 members");
        self
    }

    /// The archive: the members, the central directory and its end record.
    ///
    /// # Panics
    /// When the central directory's size or offset does not fit its field.
    #[must_use]
    pub fn finish(mut self) -> Vec<u8> {
        let cd_at = u32::try_from(self.out.len()).expect("an offset");
        self.out.extend(&self.central);
        self.out.extend(b"PK\x05\x06\x00\x00\x00\x00");
        self.out.extend(self.count.to_le_bytes());
        self.out.extend(self.count.to_le_bytes());
        self.out.extend(u32::try_from(self.central.len()).expect("a size").to_le_bytes());
        self.out.extend(cd_at.to_le_bytes());
        // Comment length.
        self.out.extend([0, 0]);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_has_headers_a_directory_and_an_end_record() {
        let zip = Zip::new().member("a", b"hello", false).member("b", &[7; 100], true).finish();
        assert_eq!(&zip[..4], b"PK\x03\x04");
        let end = zip.len() - 22;
        assert_eq!(&zip[end..end + 4], b"PK\x05\x06");
        assert_eq!(&zip[end + 8..end + 12], &[2, 0, 2, 0]);
        let cd_at = u32::from_le_bytes(zip[end + 16..end + 20].try_into().unwrap()) as usize;
        assert_eq!(&zip[cd_at..cd_at + 4], b"PK\x01\x02");
        // The stored member's bytes follow its header and name.
        assert_eq!(&zip[30..36], b"ahello");
    }

    #[test]
    fn shared_members_point_at_the_first() {
        let one = Zip::new().member("a", b"data", false).finish();
        let many = Zip::new().shared().member("a", b"data", false).member("b", b"data", false);
        let many = many.finish();
        // One local header, two directory entries.
        let count = |z: &[u8], sig: &[u8]| z.windows(4).filter(|w| *w == sig).count();
        assert_eq!(count(&many, b"PK\x03\x04"), 1);
        assert_eq!(count(&many, b"PK\x01\x02"), 2);
        assert_eq!(many[..34], one[..34]);
    }
}
