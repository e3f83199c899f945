//! Writes large hostile zTensor 2 files, too big to commit, for measuring a reader's memory and
//! time on them (`/usr/bin/time -v ztensor info FILE`, `prlimit --as=…`).
//!
//! ```text
//! cargo run --release -p ztensor-v2 --example hostile_large -- KIND N OUT
//! ```
//!
//! - `array N`: one object whose attribute `big` is an array of N one-byte integers (about N
//!   bytes of file);
//! - `map N`: an attribute map of N integer keys, each to 0 (2N items; about 6N bytes for N
//!   in the millions);
//! - `bytes N`: an attribute byte string of N bytes;
//! - `file-array N`, `file-map N`, `file-bytes N`: the same in the file's attributes;
//! - `aliases N`: N objects whose part points at one 16 MiB raw blob, each with its digest
//!   (`aliases-nodigest N`: without, so the file has no content digest of its own).
//!
//! The bytes are written directly (the manifest in deterministic CBOR, the footer with the
//! manifest's XXH3-64), never held as a tree.

use std::io::Write;

/// Appends a CBOR head in its shortest form.
#[allow(clippy::cast_possible_truncation, reason = "each arm's range fits its width")]
fn head(major: u8, n: u64, out: &mut Vec<u8>) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend([m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend((n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend((n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend(n.to_be_bytes());
        }
    }
}

fn text(s: &str, out: &mut Vec<u8>) {
    head(3, s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

/// One dense u8 object of `len` elements at `offset` (its digest given), with the attribute
/// map `attributes` (encoded) if any. Keys in their encoded order: parts, shape, layout,
/// attributes.
fn object(offset: u64, len: u64, digest: Option<&str>, attributes: Option<&[u8]>) -> Vec<u8> {
    let mut o = Vec::new();
    head(5, 3 + u64::from(attributes.is_some()), &mut o);
    text("parts", &mut o);
    head(5, 1, &mut o);
    text("data", &mut o);
    head(5, 2 + u64::from(digest.is_some()), &mut o);
    text("blob", &mut o);
    head(4, 2, &mut o);
    head(0, offset, &mut o);
    head(0, len, &mut o);
    text("dtype", &mut o);
    text("u8", &mut o);
    if let Some(d) = digest {
        text("digest", &mut o);
        text(d, &mut o);
    }
    text("shape", &mut o);
    head(4, 1, &mut o);
    head(0, len, &mut o);
    text("layout", &mut o);
    text("dense", &mut o);
    if let Some(a) = attributes {
        text("attributes", &mut o);
        o.extend_from_slice(a);
    }
    o
}

/// The file: magic, `blob` at 65536, the manifest at the next 64 KiB boundary, the footer.
fn file(blob: &[u8], manifest: &[u8], out: &mut impl Write) -> std::io::Result<()> {
    let align = |n: u64| n.div_ceil(65536) * 65536;
    out.write_all(&ztensor_v2::MAGIC)?;
    out.write_all(&vec![0u8; 65536 - 8])?;
    out.write_all(blob)?;
    let end = 65536 + blob.len() as u64;
    let at = align(end);
    out.write_all(&vec![0u8; usize::try_from(at - end).unwrap_or(0)])?;
    out.write_all(manifest)?;
    out.write_all(&at.to_le_bytes())?;
    out.write_all(&(manifest.len() as u64).to_le_bytes())?;
    out.write_all(&xxhash_rust::xxh3::xxh3_64(manifest).to_le_bytes())?;
    out.write_all(&ztensor_v2::VERSION.to_le_bytes())?;
    out.write_all(&0u32.to_le_bytes())?;
    out.write_all(&ztensor_v2::MAGIC)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, n, path] = &args[..] else {
        return Err(
            "usage: hostile_large [file-]array|[file-]map|[file-]bytes|aliases[-nodigest] N OUT"
                .into(),
        );
    };
    let n: u64 = n.parse()?;
    let one = [0u8];
    let one_digest = format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(&one));
    // The attribute map {"big": …}.
    let big = |value: &mut dyn FnMut(&mut Vec<u8>)| {
        let mut a = Vec::new();
        head(5, 1, &mut a);
        text("big", &mut a);
        value(&mut a);
        a
    };
    let mut manifest = Vec::new();
    let blob: Vec<u8> = match kind.as_str() {
        "array" | "map" | "bytes" | "file-array" | "file-map" | "file-bytes" => {
            let on_file = kind.starts_with("file-");
            let attributes = match kind.trim_start_matches("file-") {
                "map" => big(&mut |a| {
                    head(5, n, a);
                    for k in 0..n {
                        head(0, k, a);
                        a.push(0);
                    }
                }),
                "bytes" => big(&mut |a| {
                    head(2, n, a);
                    a.resize(a.len() + usize::try_from(n).unwrap_or(0), 0);
                }),
                _ => big(&mut |a| {
                    head(4, n, a);
                    a.resize(a.len() + usize::try_from(n).unwrap_or(0), 0);
                }),
            };
            // "objects" sorts before "attributes" (0x67 < 0x6a).
            head(5, 1 + u64::from(on_file), &mut manifest);
            text("objects", &mut manifest);
            head(5, 1, &mut manifest);
            text("w", &mut manifest);
            let attributes_of_object = (!on_file).then_some(&attributes[..]);
            manifest.extend(object(65536, 1, Some(&one_digest), attributes_of_object));
            if on_file {
                text("attributes", &mut manifest);
                manifest.extend_from_slice(&attributes);
            }
            one.to_vec()
        }
        "aliases" | "aliases-nodigest" => {
            let blob = vec![0u8; 16 << 20];
            let digest = format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(&blob));
            let digest = (kind == "aliases").then_some(digest.as_str());
            let entry = object(65536, blob.len() as u64, digest, None);
            head(5, 1, &mut manifest);
            text("objects", &mut manifest);
            head(5, n, &mut manifest);
            for i in 0..n {
                text(&format!("a{i:09}"), &mut manifest);
                manifest.extend_from_slice(&entry);
            }
            blob
        }
        other => return Err(format!("unknown kind {other:?}").into()),
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    file(&blob, &manifest, &mut out)?;
    out.flush()?;
    Ok(())
}
