//! Grading a written file against its recipe.

use serde_json::json;
use ztensor_format::{DigestAlgorithm, Options, Version};
use ztensor_io::{Reader, TensorSource};

use super::recipe::*;

/// Checks a written file strictly against its recipe: `Err` says what is wrong.
///
/// # Errors
/// The first problem: a rule the file breaks (strict validation, digests, data rules), padding
/// that is not zero, another version, or content other than the recipe's.
pub fn check(recipe: &Recipe, bytes: &[u8]) -> std::result::Result<(), String> {
    let Target::Zt(version) = recipe.version else { return check_zt2(recipe, bytes) };
    let mut options = Options::default();
    options.strict = true;
    let reader = Reader::new(bytes, &options).map_err(|e| format!("invalid: {e}"))?;
    // The version: the container, and for 1.x a version string of exactly that minor
    // (`1.2`, `1.2.0`, `1.2.7`), not merely one a lenient reader files under it.
    let written = reader.manifest().manifest().version_string.clone();
    let minor_matches = match (version, written.as_deref()) {
        (Version::V0_1, None) => true,
        (Version::V1_1 | Version::V1_2, Some(text)) => {
            let mut parts = text.split('.');
            parts.next() == Some("1")
                && parts.next() == Some(if version == Version::V1_1 { "1" } else { "2" })
                && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && text.split('.').count() <= 3
        }
        _ => false,
    };
    if reader.version() != version || !minor_matches {
        return Err(format!(
            "version {} ({:?}) written for a {} recipe",
            reader.version(),
            written,
            recipe.version
        ));
    }
    for i in 0..reader.len() {
        let data = reader.read(i).map_err(|e| format!("invalid: {e}"))?;
        reader.check(i, &data).map_err(|e| format!("invalid: {e}"))?;
    }
    padding_is_zero(&reader, bytes)?;
    // Digests: the algorithm the recipe asks for on every component, and none otherwise.
    for o in reader.objects() {
        let wanted =
            recipe.objects.iter().find(|r| r.name == o.name()).and_then(|r| r.digest.clone());
        for (role, c) in &o.model().components {
            let got = c.digest.as_ref().map(ztensor_format::Digest::algorithm);
            if got != wanted {
                return Err(format!(
                    "object {:?} component {role}: digest {:?}, the recipe asks for {:?}",
                    o.name(),
                    got.as_ref().map(DigestAlgorithm::name),
                    wanted.as_ref().map(DigestAlgorithm::name)
                ));
            }
        }
    }
    let dump = crate::runner::projection(&ztensor_dump::accepted(&reader));
    let expected = recipe.expected();
    let got = json!({"container": dump["container"], "attributes": dump["attributes"], "objects": dump["objects"]});
    if got != expected {
        return Err(format!("content: {}", crate::runner::difference(&expected, &got)));
    }
    Ok(())
}

/// The writer check for a zTensor 2 file: valid (container, manifest, layouts and profiles);
/// every part carries a digest that verifies; every object reads and passes its data rules;
/// every byte outside the magic, blobs, manifest and footer is zero; the content is the
/// recipe's.
pub(super) fn check_zt2(recipe: &Recipe, bytes: &[u8]) -> std::result::Result<(), String> {
    let file = ztensor_v2::File::open(bytes, ztensor_v2::MAX_MANIFEST)
        .map_err(|e| format!("invalid: {e}"))?;
    let manifest = file.manifest().ok_or("a data shard, not a file of objects")?;
    if !manifest.shards.is_empty() {
        return Err("a file with a shard table for a single-file recipe".into());
    }
    let mut covered = vec![false; bytes.len()];
    covered[..8].iter_mut().for_each(|c| *c = true);
    let footer = &file.container().footer;
    let mut cover = |at: u64, len: u64| {
        let start = usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
        let end = usize::try_from(at.saturating_add(len)).unwrap_or(usize::MAX).min(bytes.len());
        covered[start..end].iter_mut().for_each(|c| *c = true);
    };
    cover(footer.manifest_offset, footer.manifest_length);
    cover(bytes.len().saturating_sub(40) as u64, 40);
    for (name, object) in manifest.objects.iter() {
        for (part, p) in object.parts.iter() {
            cover(p.blob.0, p.blob.1);
            match file.verify(name, part) {
                Ok(ztensor_v2::DigestCheck::Verified) => {}
                Ok(other) => {
                    return Err(format!("{name:?}/{part}: digest {other:?}; every part needs one"));
                }
                Err(e) => return Err(format!("invalid: {e}")),
            }
        }
    }
    for i in 0..TensorSource::len(&file) {
        TensorSource::verify(&file, i).map_err(|e| format!("invalid: {e}"))?;
    }
    if let Some(at) = covered.iter().zip(bytes).position(|(&c, &b)| !c && b != 0) {
        return Err(format!("byte {at} of padding is 0x{:02x}, not zero", bytes[at]));
    }
    let dump = crate::runner::projection(&ztensor_dump::zt2(&file));
    let expected = recipe.expected();
    let got = json!({"container": dump["container"], "attributes": dump["attributes"], "objects": dump["objects"]});
    if got != expected {
        return Err(format!("content: {}", crate::runner::difference(&expected, &got)));
    }
    Ok(())
}

/// Every byte of the file outside its magic, blobs, manifest and trailer is zero.
pub(super) fn padding_is_zero<S: ztensor_io::ReadAt>(
    reader: &Reader<S>,
    bytes: &[u8],
) -> std::result::Result<(), String> {
    let trailer = if reader.version() == Version::V0_1 { 8 } else { 16 };
    let len = bytes.len();
    let size_at = len.checked_sub(trailer).ok_or("a file shorter than its trailer")?;
    let manifest_len = u64::from_le_bytes(bytes[size_at..size_at + 8].try_into().unwrap_or([0; 8]));
    let manifest_at = usize::try_from(manifest_len)
        .ok()
        .and_then(|m| size_at.checked_sub(m))
        .ok_or("a manifest size past the file")?;
    let mut covered = vec![false; manifest_at];
    covered.iter_mut().take(8).for_each(|c| *c = true);
    for o in reader.objects() {
        for (_, c) in &o.model().components {
            let start = usize::try_from(c.offset).unwrap_or(usize::MAX).min(manifest_at);
            let end = usize::try_from(c.offset.saturating_add(c.length))
                .unwrap_or(usize::MAX)
                .min(manifest_at);
            covered[start..end].iter_mut().for_each(|b| *b = true);
        }
    }
    match covered.iter().zip(bytes).position(|(&c, &b)| !c && b != 0) {
        Some(at) => Err(format!("byte {at} of padding is 0x{:02x}, not zero", bytes[at])),
        None => Ok(()),
    }
}
