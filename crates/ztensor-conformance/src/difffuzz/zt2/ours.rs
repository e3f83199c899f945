//! This project's verdicts on a zTensor 2 file.
//!
//! **Strict**: this project's zTensor 2 reader (`crates/ztensor-v2`) as the dump reads it
//! (`ztensor_dump::file`: what `ztensor dump --json` and `ztensor-conformance dump` print). It
//! checks the container, the manifest, the layouts and every registered profile when the file
//! opens; an object whose data breaks a rule (a digest, `bool` bytes, CSR or COO structure, an
//! encoded stream) or that it cannot decode carries its error in an accepted file, as the
//! corpus's index says (`fixtures/external/ztensor2/index.toml`).
//!
//! **Lenient**: the same reader, reading the registered profiles the reference 2.1.1 does not
//! implement (`zt.sparse_coo/1`, `zt.quant_group/1`, `zt.mx/1`, `gguf.<type>/1`) as unknown
//! layouts, their parts as stored, as the reference does (`spec/ztensor-2.md` §8 item 1, which
//! makes it implementation-defined): the file is read again with those layouts renamed (to
//! `…/0`, unknown here; the manifest framed again), and the dump given their names back; and
//! without this reader's expansion budget (what checking every object would decode, against
//! the file's size: a limit of this reader, not a rule of the format). For a file with no such
//! object and within the budget, it is the strict verdict.
//!
//! What else the spec leaves to each reader is latitude (padding that is not zero: "readers MAY
//! skip checking"; a shard table, when the reference does not open a file whose shards are not
//! beside it, §8 item 20; an object this reader reports as unreadable) or loose objects (a
//! digest algorithm the spec does not name, which a reader may refuse to read unverified; the
//! profiles above, whose data rules the reference does not check; a `zt.zstd-seekable/1` seek
//! table whose descriptor sets a bit the format leaves unused, which this reader ignores and
//! the reference rejects, §8 item 5).

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::Value as Json;
use ztensor_io::ReadAt;
use ztensor_v2::cbor::Value;

use super::super::verdicts::{Ours, object_errors};

/// Whether `bytes` are judged as zTensor 2: they start with its magic (as the format registry
/// tells them, and so as the dump does).
pub(in super::super) fn is_zt2(bytes: &[u8]) -> bool {
    bytes.starts_with(&ztensor_v2::MAGIC)
}

/// Our verdicts on the zTensor 2 file at `path` (holding `bytes`): strict, the dump exactly as
/// `ztensor-conformance dump FILE` prints it (its shards looked for beside it).
pub(in super::super) fn ours(path: &Path, bytes: &[u8]) -> Result<Ours> {
    let strict = ztensor_dump::file(path)?;
    let max = ztensor_dump::options().limits.max_manifest_len;
    let file = if strict.1 { ztensor_v2::File::open(bytes, max).ok() } else { None };
    Ok(judged(strict, file.as_ref(), bytes))
}

/// Our verdicts on the bytes of a zTensor 2 file, in this process (no shard is looked for).
pub(in super::super) fn ours_in_process(bytes: &[u8]) -> Result<Ours> {
    let (strict, file) = opened(bytes, true).context("the zTensor 2 reader gave no verdict")?;
    Ok(judged(strict, file.as_ref(), bytes))
}

/// The dump of a zTensor 2 file read from `source`, as `ztensor_dump::file` gives it for a
/// file with no shards beside it; `None` for an error that is not a verdict.
pub(in super::super) fn lenient_of<S: ReadAt>(source: S) -> Option<(Json, bool)> {
    opened(source, true).map(|(verdict, _)| verdict)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A dump, and whether the file was accepted.
type Verdict = (Json, bool);

/// The dump of `source` and the file, opened, when it was accepted: the container and
/// manifest checked, then (with `budget`, as the dump does) what checking every object would
/// decode held to this reader's expansion budget.
fn opened<S: ReadAt>(source: S, budget: bool) -> Option<(Verdict, Option<ztensor_v2::File<S>>)> {
    let limits = ztensor_dump::options().limits;
    match ztensor_v2::File::open(source, limits.max_manifest_len) {
        Ok(file) => match file.check_expansion(&limits) {
            Err(e) if budget => {
                let kind = e.format_error().map_or("decoded_too_large", |f| f.kind().id());
                Some(((ztensor_dump::rejected(kind, &one_line(&e.to_string())), false), None))
            }
            _ => {
                let file = file.with_limits(limits);
                Some(((ztensor_dump::zt2(&file), true), Some(file)))
            }
        },
        Err(e) => {
            let rule = e.broken()?;
            Some(((ztensor_dump::rejected(rule.id(), &one_line(&e.to_string())), false), None))
        }
    }
}

/// [`Ours`] from the strict dump (and the file, when it opened): the lenient verdict, the
/// loose objects, and what else the spec leaves open.
fn judged<S: ReadAt>(
    strict: (Json, bool),
    file: Option<&ztensor_v2::File<S>>,
    bytes: &[u8],
) -> Ours {
    let manifest = manifest(bytes);
    let mut loose = Vec::new();
    let mut renamed = Vec::new();
    if let Some((value, ..)) = &manifest {
        for (name, object) in objects(value) {
            let layout = text(object, "layout");
            let parts = match field(object, "parts") {
                Some(Value::Map(parts)) => &parts[..],
                _ => &[],
            };
            let unnamed = parts.iter().any(|(_, p)| {
                let algorithm = text(p, "digest").and_then(|d| d.split_once(':')).map(|d| d.0);
                algorithm.is_some_and(|a| a != "xxh3" && a != "sha256")
            });
            let profile = layout.is_some_and(unenforced);
            let descriptor = parts.iter().any(|(_, p)| unused_bits(p, bytes));
            if unnamed || profile || descriptor {
                loose.push(name.to_owned());
            }
            if profile {
                renamed.push(name.to_owned());
            }
        }
    }
    let over_budget = strict.0["error"]["kind"] == "decoded_too_large";
    let lenient = match (&manifest, renamed.is_empty()) {
        (Some(manifest), false) => as_the_reference_reads(bytes, manifest, &renamed),
        _ if over_budget => opened(bytes, false).map(|(verdict, _)| verdict),
        _ => None,
    };
    let lenient = lenient.unwrap_or_else(|| strict.clone());
    let mut latitude = file.and_then(|f| latitude(f, bytes));
    if latitude.is_none() && lenient.1 != strict.1 {
        latitude = Some(if over_budget {
            "more to decode than this reader's expansion budget (a limit, not a rule)".to_owned()
        } else {
            "a rule of a profile the reference 2.1.1 reads as an unknown layout \
             (zt.sparse_coo/1, zt.quant_group/1, zt.mx/1, gguf)"
                .to_owned()
        });
    }
    if latitude.is_none() && strict.1 && object_errors(&strict.0) {
        latitude = Some("an object this reader reports as unreadable".to_owned());
    }
    Ours { lenient, strict, latitude, loose }
}

/// Whether part `p` is a `zt.zstd-seekable/1` stream of this file whose seek table's
/// descriptor has one of its two unused bits set: this project does not read them (as the
/// upstream format says), the reference rejects them (§8 item 5, §10).
fn unused_bits(p: &Value, bytes: &[u8]) -> bool {
    if text(p, "encoding") != Some(ztensor_v2::seekable::ID) || field(p, "shard").is_some() {
        return false;
    }
    let Some(Value::Array(blob)) = field(p, "blob") else { return false };
    let (Some(offset), Some(len)) =
        (blob.first().and_then(Value::as_uint), blob.get(1).and_then(Value::as_uint))
    else {
        return false;
    };
    let descriptor = offset.checked_add(len).and_then(|end| end.checked_sub(5));
    let byte = descriptor.filter(|_| len >= 9).and_then(|at| bytes.get(usize::try_from(at).ok()?));
    byte.is_some_and(|b| b & 0x03 != 0)
}

/// The registered profiles the reference 2.1.1 reads as unknown layouts (§8 item 1).
fn unenforced(layout: &str) -> bool {
    matches!(layout, "zt.sparse_coo/1" | "zt.quant_group/1" | "zt.mx/1")
        || (layout.starts_with("gguf.") && layout.ends_with("/1"))
}

/// The manifest of `bytes` as a value, with where it lies, when the footer frames it (the
/// hash right) and it is deterministic CBOR.
fn manifest(bytes: &[u8]) -> Option<(Value, usize, usize)> {
    let at = bytes.len().checked_sub(40)?;
    let footer = ztensor_v2::Footer::parse(bytes[at..].try_into().ok()?);
    let offset = usize::try_from(footer.manifest_offset).ok()?;
    let len = usize::try_from(footer.manifest_length).ok()?;
    let manifest = bytes.get(offset..offset.checked_add(len)?.min(at))?;
    if manifest.len() != len || xxhash_rust::xxh3::xxh3_64(manifest) != footer.manifest_hash {
        return None;
    }
    Some((ztensor_v2::cbor::decode(manifest).ok()?, offset, len))
}

fn field<'v>(map: &'v Value, key: &str) -> Option<&'v Value> {
    match map {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.as_text() == Some(key)).map(|e| &e.1),
        _ => None,
    }
}

fn text<'v>(map: &'v Value, key: &str) -> Option<&'v str> {
    field(map, key).and_then(Value::as_text)
}

/// The manifest's objects: (name, object).
fn objects(manifest: &Value) -> impl Iterator<Item = (&str, &Value)> {
    let entries = match field(manifest, "objects") {
        Some(Value::Map(entries)) => &entries[..],
        _ => &[],
    };
    entries.iter().filter_map(|(k, v)| Some((k.as_text()?, v)))
}

/// The lenient verdict: `bytes` read with the layouts of the objects `renamed` made unknown
/// (`…/1` → `…/0`: the same length, so the manifest stays where it is; its hash made right),
/// and the dump given their names back.
fn as_the_reference_reads(
    bytes: &[u8],
    (value, offset, len): &(Value, usize, usize),
    renamed: &[String],
) -> Option<(Json, bool)> {
    let mut value = value.clone();
    let Some(Value::Map(objects)) = mut_field(&mut value, "objects") else { return None };
    for (name, object) in objects.iter_mut() {
        if !name.as_text().is_some_and(|n| renamed.iter().any(|r| r == n)) {
            continue;
        }
        if let Some(Value::Text(layout)) = mut_field(object, "layout") {
            layout.pop();
            layout.push('0');
        }
    }
    let manifest = ztensor_v2::cbor::encode(&value);
    if manifest.len() != *len {
        return None;
    }
    let mut file = bytes.to_vec();
    file[*offset..*offset + *len].copy_from_slice(&manifest);
    let at = file.len() - 24;
    file[at..at + 8].copy_from_slice(&xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
    let ((mut dump, accepted), _) = opened(&file[..], false)?;
    for o in dump["objects"].as_array_mut().into_iter().flatten() {
        let ours = o["name"].as_str().is_some_and(|n| renamed.iter().any(|r| r == n));
        if let (true, Some(layout)) = (ours, o["format"].as_str()) {
            o["format"] = Json::from(format!("{}1", &layout[..layout.len() - 1]));
        }
    }
    Some((dump, accepted))
}

fn mut_field<'v>(map: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    match map {
        Value::Map(entries) => {
            entries.iter_mut().find(|(k, _)| k.as_text() == Some(key)).map(|e| &mut e.1)
        }
        _ => None,
    }
}

/// What an opened zTensor 2 file has that the spec leaves to each reader.
fn latitude<S: ReadAt>(file: &ztensor_v2::File<S>, bytes: &[u8]) -> Option<String> {
    let manifest = file.manifest()?;
    if !manifest.shards.is_empty() {
        return Some(
            "a shard table (the reference 2.1.1 does not open a file whose shards are not \
             beside it)"
                .to_owned(),
        );
    }
    let mut covered: Vec<(u64, u64)> = Vec::new();
    for (_, object) in &manifest.objects {
        for (_, part) in &object.parts {
            let algorithm = part.digest.as_deref().and_then(|d| d.split_once(':')).map(|d| d.0);
            if algorithm.is_some_and(|a| a != "xxh3" && a != "sha256") {
                return Some("a digest algorithm other than xxh3 and sha256".to_owned());
            }
            if part.shard.is_none() {
                covered.push(part.blob);
            }
        }
    }
    // Padding: every byte that is not the magic, a blob, the manifest or the footer.
    let footer = &file.container().footer;
    let len = bytes.len() as u64;
    covered.push((0, 8));
    covered.push((footer.manifest_offset, footer.manifest_length));
    covered.push((len.saturating_sub(40), 40));
    covered.sort_unstable();
    let mut at = 0u64;
    for (offset, length) in covered.into_iter().chain([(len, 0)]) {
        let start = usize::try_from(at.min(len)).ok()?;
        let end = usize::try_from(offset.min(len)).ok()?;
        if start < end && bytes[start..end].iter().any(|&b| b != 0) {
            return Some("nonzero padding".to_owned());
        }
        at = at.max(offset.saturating_add(length));
    }
    None
}
