//! Component digests: `crc32c:0x…`, `sha256:…`, `blake3:…`, and unknown algorithms preserved.

use std::fmt;

/// A digest algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DigestAlgorithm {
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// SHA-256.
    Sha256,
    /// BLAKE3, 256-bit output.
    Blake3,
    /// An algorithm this implementation cannot verify, by its name as written.
    Unknown(String),
}

impl DigestAlgorithm {
    /// The canonical lowercase name.
    pub fn name(&self) -> &str {
        match self {
            DigestAlgorithm::Crc32c => "crc32c",
            DigestAlgorithm::Sha256 => "sha256",
            DigestAlgorithm::Blake3 => "blake3",
            DigestAlgorithm::Unknown(s) => s,
        }
    }
}

/// A digest value as a manifest carries it.
///
/// Parsing is case-insensitive in the algorithm and the hex digits, and accepts an optional
/// `0x` after `crc32c:` (every reference writer emits `crc32c:0x` + 8 uppercase digits).
/// Formatting emits that same crc32c form, which the reference readers require, and lowercase
/// hex for the others.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Digest {
    /// A CRC-32C value.
    Crc32c(u32),
    /// A SHA-256 value (boxed, so a manifest's components are not sized to the longest digest).
    Sha256(Box<[u8; 32]>),
    /// A BLAKE3 value (boxed, as for SHA-256).
    Blake3(Box<[u8; 32]>),
    /// An unknown algorithm: the whole string, preserved. Never reported as verified.
    Unknown(crate::Spelling),
    /// A known algorithm with an unparsable value: the whole string, preserved. The object it
    /// belongs to cannot be verified ([`ErrorKind::DigestMalformed`](crate::ErrorKind)).
    Malformed(crate::Spelling),
}

impl Digest {
    /// Parses a digest string. Never fails: unknown algorithms and malformed values are kept.
    pub fn parse(text: &str) -> Digest {
        let Some((algorithm, value)) = text.split_once(':') else {
            return Digest::Malformed(text.into());
        };
        let malformed = || Digest::Malformed(text.into());
        match algorithm.to_ascii_lowercase().as_str() {
            "crc32c" => {
                let hex =
                    value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")).unwrap_or(value);
                if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return malformed();
                }
                u32::from_str_radix(hex, 16).map(Digest::Crc32c).unwrap_or_else(|_| malformed())
            }
            "sha256" => hex32(value).map(|b| Digest::Sha256(Box::new(b))).unwrap_or_else(malformed),
            "blake3" => hex32(value).map(|b| Digest::Blake3(Box::new(b))).unwrap_or_else(malformed),
            _ => Digest::Unknown(text.into()),
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> DigestAlgorithm {
        match self {
            Digest::Crc32c(_) => DigestAlgorithm::Crc32c,
            Digest::Sha256(_) => DigestAlgorithm::Sha256,
            Digest::Blake3(_) => DigestAlgorithm::Blake3,
            Digest::Unknown(s) | Digest::Malformed(s) => {
                let name = s.split_once(':').map_or(&**s, |(a, _)| a);
                match name.to_ascii_lowercase().as_str() {
                    "crc32c" => DigestAlgorithm::Crc32c,
                    "sha256" => DigestAlgorithm::Sha256,
                    "blake3" => DigestAlgorithm::Blake3,
                    _ => DigestAlgorithm::Unknown(name.to_owned()),
                }
            }
        }
    }

    /// The digest bytes (big-endian for crc32c), for known and well-formed digests.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Digest::Crc32c(v) => Some(v.to_be_bytes().to_vec()),
            Digest::Sha256(b) | Digest::Blake3(b) => Some(b.to_vec()),
            Digest::Unknown(_) | Digest::Malformed(_) => None,
        }
    }
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *slot = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Digest::Crc32c(v) => write!(f, "crc32c:0x{v:08X}"),
            Digest::Sha256(b) => write!(f, "sha256:{}", to_hex(&b[..])),
            Digest::Blake3(b) => write!(f, "blake3:{}", to_hex(&b[..])),
            Digest::Unknown(s) | Digest::Malformed(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_forms() {
        assert_eq!(Digest::parse("crc32c:0x1234ABCD"), Digest::Crc32c(0x1234_abcd));
        assert_eq!(Digest::parse("CRC32C:0X1234abcd"), Digest::Crc32c(0x1234_abcd));
        assert_eq!(Digest::parse("crc32c:1234abcd"), Digest::Crc32c(0x1234_abcd));
        assert_eq!(Digest::Crc32c(0xab).to_string(), "crc32c:0x000000AB");
        assert!(matches!(Digest::parse("crc32c:0x"), Digest::Malformed(_)));
        assert!(matches!(Digest::parse("crc32c:0x123456789"), Digest::Malformed(_)));
        assert!(matches!(Digest::parse("crc32c:0x+1"), Digest::Malformed(_)));
    }

    #[test]
    fn sha256_and_blake3() {
        let hex = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
        let Digest::Sha256(b) = Digest::parse(&format!("SHA256:{hex}")) else {
            panic!("not sha256")
        };
        assert_eq!(b[0], 0x9f);
        assert_eq!(Digest::Sha256(b).to_string(), format!("sha256:{}", hex.to_lowercase()));
        assert!(matches!(Digest::parse(&format!("blake3:{}", &hex[2..])), Digest::Malformed(_)));
        assert!(matches!(Digest::parse("sha256:é"), Digest::Malformed(_)));
    }

    #[test]
    fn unknown_is_preserved_never_verified() {
        let d = Digest::parse("xxh3:00ff");
        assert_eq!(d, Digest::Unknown("xxh3:00ff".into()));
        assert_eq!(d.algorithm(), DigestAlgorithm::Unknown("xxh3".into()));
        assert_eq!(d.bytes(), None);
        assert_eq!(d.to_string(), "xxh3:00ff");
        assert!(matches!(Digest::parse("no colon"), Digest::Malformed(_)));
    }
}
