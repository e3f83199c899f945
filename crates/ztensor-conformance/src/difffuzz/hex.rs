//! Bytes as lowercase hex and back, as recipes keep a case's model.

use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};

/// `bytes` as lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The bytes `text` (hex) spells.
///
/// # Errors
/// An odd number of digits, or a character that is not one.
pub(super) fn unhex(text: &str) -> Result<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("not an even number of hex digits: {text:?}");
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).context("not hex"))
        .collect()
}
