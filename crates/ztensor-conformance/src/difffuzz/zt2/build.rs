//! Making a zTensor 2 case's file: its starting file, taken apart (the manifest as a value
//! tree, the blobs placed again), changed, and put together in valid framing.

use anyhow::{Context as _, Result, bail};
use ciborium::Value as Cbor;
use ztensor_format::Version;

use super::super::hex::unhex;
use super::super::mutate::{Mutation, Region, apply_tree};
use super::Zt2;
pub(super) use super::layout::Layout;
use super::{cbor, tree};
use crate::model::Model;

/// The file a zTensor 2 case makes: its model (`model`, hex) or `how`'s base, changed by
/// `mutations`.
pub(in super::super) fn build(model: &str, mutations: &[Mutation], how: &Zt2) -> Result<Vec<u8>> {
    let start = match &how.base {
        Some(name) => base(name)?.to_vec(),
        None => written(&representable(model)?)?
            .context("the writer refused what it said it can hold")?,
    };
    // 4096 × 2^k, up to 1 MiB.
    let alignment = (how.alignment.clamp(4096, 1 << 20) / 4096).next_power_of_two() * 4096;
    let (changes, bytes): (Vec<&Mutation>, Vec<&Mutation>) =
        mutations.iter().partition(|m| m.on_tree());
    let Some((mut value, layout)) = take_apart(&start, alignment, how.zstd)? else {
        // A data shard: no manifest to change.
        let mut file = start;
        for m in bytes {
            apply_bytes(&mut file, m, None, &[]);
        }
        return Ok(file);
    };
    let (mut heads, mut reorders) = (Vec::new(), Vec::new());
    for change in changes {
        match *change {
            Mutation::Alias { node, other } => tree::alias(&mut value, node, other),
            Mutation::Vocab { node, pick } => tree::vocab(&mut value, node, pick, &layout),
            Mutation::Place { node, pick } => tree::place(&mut value, node, pick, &layout),
            Mutation::Shard { node, pick } => tree::shard(&mut value, node, pick),
            Mutation::Reorder { node, other } => reorders.push((node, other)),
            Mutation::Head { node, pick } => heads.push((node, pick)),
            ref other => apply_tree(&mut value, other),
        }
    }
    cbor::sort(&mut value);
    for (node, other) in reorders {
        tree::reorder(&mut value, node, other);
    }
    let manifest = cbor::encode(&value, &heads);
    let mut file = put_together(&layout, &manifest);
    let framed = Framed { manifest: (layout.data.len(), manifest.len()), len: file.len() };
    for m in bytes {
        apply_bytes(&mut file, m, Some(&framed), &layout.blobs);
    }
    Ok(file)
}

/// The bytes of the embedded corpus's file `name` (one of [`super::BASES`], or any other
/// zTensor 2 file of the corpus).
fn base(name: &str) -> Result<&'static [u8]> {
    let files = crate::embedded::files();
    let found = files.binary_search_by(|(f, _)| (*f).cmp(name)).ok();
    found.map(|i| files[i].1).with_context(|| format!("{name} is not in the embedded corpus"))
}

/// The model the generator's input (`model`, hex) makes, as a 1.2 model, without the objects
/// zTensor 2 cannot hold (each refused alone is left out; the others keep their order).
///
/// # Errors
/// Broken hex; a model our writers refuse for another reason (a bug of this project).
pub(in super::super) fn representable(model: &str) -> Result<Model> {
    let mut model = Model::from_bytes(&unhex(model)?);
    model.version = Version::V1_2;
    if written(&model)?.is_some() {
        return Ok(model);
    }
    let mut kept = Vec::new();
    for object in &model.objects {
        let alone = Model { version: model.version, objects: vec![object.clone()] };
        if written(&alone)?.is_some() {
            kept.push(object.clone());
        }
    }
    Ok(Model { version: model.version, objects: kept })
}

/// `model` written by our zTensor 2 writer (canonical form), or `None` when zTensor 2 cannot
/// hold it.
fn written(model: &Model) -> Result<Option<Vec<u8>>> {
    let (file, _) = model.write().context("writing the generated model")?;
    let options = ztensor_format::Options::default();
    let reader = ztensor_io::Reader::new(&file[..], &options).context("reading it back")?;
    let mut out = std::io::Cursor::new(Vec::new());
    match ztensor_v2::write(&reader, &mut out, &ztensor_v2::WriteOptions::default()) {
        Ok(_) => Ok(Some(out.into_inner())),
        Err(e) if matches!(e.kind(), ztensor_v2::ErrorKind::Unrepresentable) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("our zTensor 2 writer: {e}")),
    }
}

/// The footer of `file` (its last 40 bytes): manifest offset and length, hash, version,
/// reserved.
fn footer(file: &[u8]) -> Option<ztensor_v2::Footer> {
    let at = file.len().checked_sub(40)?;
    let bytes: &[u8; 40] = file[at..].try_into().ok()?;
    Some(ztensor_v2::Footer::parse(bytes))
}

fn align(n: u64, alignment: u64) -> u64 {
    n.div_ceil(alignment) * alignment
}

/// `file` (a valid zTensor 2 file) taken apart: its manifest as a value tree, its own blobs
/// placed again from `alignment` at multiples of it (every part pointing at one blob still
/// does; an empty blob where the next one starts), and with `zstd` every raw part stored
/// under `zt.zstd-seekable/1`. `None` for a data shard, which has no manifest.
fn take_apart(file: &[u8], alignment: u64, zstd: bool) -> Result<Option<(Cbor, Layout)>> {
    let Some(footer) = footer(file) else { bail!("shorter than a footer") };
    if footer.manifest_length == 0 {
        return Ok(None);
    }
    let start = usize::try_from(footer.manifest_offset)?;
    let end = start.checked_add(usize::try_from(footer.manifest_length)?).context("too long")?;
    let manifest = file.get(start..end).context("the manifest past the file")?;
    let mut value: Cbor =
        ciborium::from_reader(manifest).map_err(|e| anyhow::anyhow!("the manifest: {e}"))?;
    // Each blob of this file once, by its placement in it, with its stored bytes (encoded
    // once here) and its new placement.
    struct Blob {
        was: (u64, u64),
        bytes: Vec<u8>,
        decoded: Option<u64>,
        at: u64,
    }
    let mut blobs: Vec<Blob> = Vec::new();
    let parts = tree::parts(&value);
    for path in &parts {
        let Some(Cbor::Map(part)) = tree::at(&value, path) else { continue };
        let Some(was) = tree::blob_of(part) else { continue };
        if tree::field(part, "shard").is_some() || blobs.iter().any(|b| b.was == was) {
            continue;
        }
        let end = was.0.checked_add(was.1).and_then(|e| usize::try_from(e).ok());
        let range = usize::try_from(was.0).ok().zip(end);
        let Some(stored) = range.and_then(|(a, b)| file.get(a..b)) else { continue };
        let raw = tree::field(part, "encoding").is_none();
        let (bytes, decoded) =
            if zstd && raw { (seekable(stored)?, Some(was.1)) } else { (stored.to_vec(), None) };
        blobs.push(Blob { was, bytes, decoded, at: 0 });
    }
    let mut data = ztensor_v2::MAGIC.to_vec();
    let mut placed = Vec::new();
    for blob in &mut blobs {
        blob.at = align(data.len() as u64, alignment);
        if !blob.bytes.is_empty() {
            data.resize(usize::try_from(blob.at)?, 0);
            data.extend_from_slice(&blob.bytes);
            placed.push((blob.at, blob.bytes.len() as u64));
        }
    }
    data.resize(usize::try_from(align(data.len() as u64, alignment))?, 0);
    // Every part of this file pointed at its blob's new place.
    for path in &parts {
        let Some(Cbor::Map(part)) = tree::at_mut(&mut value, path) else { continue };
        let Some(was) = tree::blob_of(part) else { continue };
        if tree::field(part, "shard").is_some() {
            continue;
        }
        let Some(blob) = blobs.iter().find(|b| b.was == was) else { continue };
        tree::set(part, "blob", tree::pair(blob.at, blob.bytes.len() as u64));
        if let Some(decoded) = blob.decoded
            && tree::field(part, "encoding").is_none()
        {
            tree::set(part, "encoding", Cbor::Text(ztensor_v2::seekable::ID.to_owned()));
            tree::set(part, "decoded_length", Cbor::Integer(decoded.into()));
        }
    }
    let layout = Layout { data, blobs: placed, alignment, reserved: footer.reserved };
    Ok(Some((value, layout)))
}

/// `bytes` as a `zt.zstd-seekable/1` stream (level 3, as our writer stores them).
fn seekable(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = ztensor_v2::seekable::Encoder::new(3);
    let mut keep = |piece: &[u8]| {
        out.extend_from_slice(piece);
        Ok(())
    };
    encoder.push(bytes, &mut keep).map_err(|e| anyhow::anyhow!("{e}"))?;
    encoder.finish(&mut keep).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(out)
}

/// The file: `layout`'s bytes, the manifest, and a footer that frames it (its offset, length
/// and XXH3-64; version 2; the reserved field as the starting file had it; the magic).
fn put_together(layout: &Layout, manifest: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(layout.data.len() + manifest.len() + 40);
    file.extend_from_slice(&layout.data);
    file.extend_from_slice(manifest);
    file.extend_from_slice(&(layout.data.len() as u64).to_le_bytes());
    file.extend_from_slice(&(manifest.len() as u64).to_le_bytes());
    file.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(manifest).to_le_bytes());
    file.extend_from_slice(&ztensor_v2::VERSION.to_le_bytes());
    file.extend_from_slice(&layout.reserved.to_le_bytes());
    file.extend_from_slice(&ztensor_v2::MAGIC);
    file
}

/// Where the manifest of a file put together lies, and the file's length then.
struct Framed {
    manifest: (usize, usize),
    len: usize,
}

/// A change to the bytes of a zTensor 2 file (`framed`: how it was put together; `None` for a
/// file taken as it was): the magic ([`Region::Header`]), the blobs and padding before the
/// manifest ([`Region::Data`]), the manifest ([`Region::Manifest`], its hash in the footer
/// made right again while the file is whole), the footer ([`Region::Trailer`]); a byte of one
/// of `blobs`; the file cut short; the footer's manifest length changed.
fn apply_bytes(
    file: &mut Vec<u8>,
    change: &Mutation,
    framed: Option<&Framed>,
    blobs: &[(u64, u64)],
) {
    if file.is_empty() {
        return;
    }
    let len = file.len();
    let index = |at: u32, n: usize| usize::try_from(at).unwrap_or(0) % n.max(1);
    match *change {
        Mutation::Truncate { at } => file.truncate(index(at, len)),
        Mutation::Size { delta } => {
            let Some(at) = len.checked_sub(32) else { return };
            let mut field = [0u8; 8];
            field.copy_from_slice(&file[at..at + 8]);
            let size = u64::from_le_bytes(field).wrapping_add_signed(i64::from(delta));
            file[at..at + 8].copy_from_slice(&size.to_le_bytes());
        }
        Mutation::Flip { region, at, xor } => {
            let (start, end) = match (region, framed) {
                (Region::Header, _) => (0, 8.min(len)),
                (Region::Data, Some(f)) => (8.min(len), f.manifest.0.min(len)),
                (Region::Manifest, Some(f)) => {
                    (f.manifest.0.min(len), (f.manifest.0 + f.manifest.1).min(len))
                }
                (Region::Trailer, _) => (len.saturating_sub(40), len),
                (_, None) => (0, len),
            };
            if end <= start {
                return;
            }
            file[start + index(at, end - start)] ^= xor.max(1);
            if let (Region::Manifest, Some(f)) = (region, framed)
                && f.len == len
            {
                let (offset, mlen) = f.manifest;
                let hash = xxhash_rust::xxh3::xxh3_64(&file[offset..offset + mlen]);
                file[len - 24..len - 16].copy_from_slice(&hash.to_le_bytes());
            }
        }
        Mutation::Blob { node, at, xor } => {
            if blobs.is_empty() {
                return;
            }
            let (offset, blen) = blobs[index(node, blobs.len())];
            let Ok(blen) = usize::try_from(blen) else { return };
            let byte =
                usize::try_from(offset).unwrap_or(usize::MAX).saturating_add(index(at, blen));
            if byte < len {
                file[byte] ^= xor.max(1);
            }
        }
        _ => {}
    }
}
