//! `ztensor verify`: every byte of an input checked on all threads: a zTensor 0.1/1.x file
//! object by object against its manifest, any other format through the tensor-source
//! interface (a sharded checkpoint's shards against their recorded digests).

use std::io::Write;
use std::path::Path;

use anyhow::{Result, anyhow};
use ztensor_io::TensorSource;

use super::Kind;
use super::text::listed;
use crate::progress::Bar;

/// `ztensor verify FILE`: a zTensor 0.1/1.x file checked against its manifest, any other input
/// through the tensor-source interface.
pub(crate) fn run(
    out: &mut impl Write,
    file: &Path,
    strict: bool,
    threads: usize,
    json: bool,
    quiet: bool,
) -> Result<std::process::ExitCode> {
    match super::detect(file)? {
        Kind::Zt => verify(out, file, strict, threads, json, quiet),
        other => foreign_verify(out, file, other, strict, threads, json, quiet),
    }
}

/// `verify`: the manifest (on open), then every object on all threads.
fn verify(
    out: &mut impl Write,
    file: &Path,
    strict: bool,
    threads: usize,
    json: bool,
    quiet: bool,
) -> Result<std::process::ExitCode> {
    let options = ztensor_cli::options(strict);
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    // A file and an object of the same bytes open as one reader and get one report.
    let opened = crate::told::told(file)?.open_zt(&opening);
    let reader = match opened {
        Ok(r) => r,
        Err(e) if json && e.rule().is_some() => {
            let report = serde_json::json!({
                "file": super::stdin::name(file),
                "sound": false,
                "objects": null,
                "problems": [e.to_string()],
            });
            writeln!(out, "{report:#}")?;
            return Ok(std::process::ExitCode::from(1));
        }
        Err(e) => {
            let hint =
                if e.rule().is_some() { crate::torn_hint(file, &options) } else { String::new() };
            let base = crate::reported(&file.display().to_string(), &e);
            return Err(match crate::errors::status_of(&base) {
                crate::errors::Status::Rejected => crate::errors::with_hint(base, &hint),
                crate::errors::Status::Failed => base,
            });
        }
    };
    let stored = reader
        .manifest()
        .objects()
        .flat_map(|o| o.object().components.values())
        .map(|c| c.length)
        .sum();
    let bar = Bar::new(stored, quiet);
    let verdicts =
        ztensor_par::verify_all(&reader, &ztensor_par::ParOptions::with_threads(threads), &bar);
    bar.finish();
    let verdicts = verdicts.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut problems = Vec::new();
    let (mut verified, mut unverifiable, mut absent) = (0usize, Vec::new(), 0usize);
    for (object, (name, verdict)) in reader.manifest().objects().zip(verdicts) {
        if let Err(e) = verdict {
            problems.push(e.to_string());
            continue;
        }
        // A sound object's known digests were all verified by `verify_all`.
        for (role, c) in &object.object().components {
            match &c.digest {
                None => absent += 1,
                Some(d) if d.bytes().is_none() => unverifiable.push(format!("{name}/{role}: {d}")),
                Some(_) => verified += 1,
            }
        }
    }
    // What only strict mode asks of writers and only reading the file can tell: zeroed padding.
    if strict && let Err(e) = reader.check_padding() {
        if e.rule().is_none() {
            return Err(crate::reported(&file.display().to_string(), &e));
        }
        problems.push(e.to_string());
    }
    let n = reader.manifest().len();
    let decoded: u64 = reader
        .manifest()
        .objects()
        .flat_map(|o| o.decoded_lens().map(|(_, n)| n.unwrap_or(0)))
        .sum();
    let code = if problems.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    };
    if json {
        let report = serde_json::json!({
            "file": super::stdin::name(file),
            "sound": problems.is_empty(),
            "objects": n,
            "decoded": decoded,
            "problems": problems,
            "digests": {"verified": verified, "absent": absent, "unverifiable": unverifiable},
        });
        writeln!(out, "{report:#}")?;
        return Ok(code);
    }
    for p in &problems {
        writeln!(out, "{p}")?;
    }
    for u in &unverifiable {
        writeln!(out, "unverifiable digest (unknown algorithm): {u}")?;
    }
    let summary = format!(
        "{}, {} decoded, {} verified, {absent} components without digest, {} unverifiable",
        super::text::plural(n, "object"),
        super::text::size(decoded),
        super::text::plural(verified, "digest"),
        unverifiable.len()
    );
    if problems.is_empty() {
        writeln!(out, "{}: sound ({summary})", super::stdin::shown(file))?;
    } else {
        let file = super::stdin::shown(file);
        writeln!(out, "{file}: {} problem(s) ({summary})", problems.len())?;
    }
    Ok(code)
}

/// `verify` on a file of another format (safetensors, a sharded checkpoint, TensorBuffers),
/// through the tensor-source interface on all threads: the header (and the index, and its
/// agreement with the shards) are validated on open, then every tensor is read. Tensors of
/// dtypes zTensor has no type for are valid: they are named in a note, with the ways to convert
/// such a file.
fn foreign_verify(
    out: &mut impl Write,
    path: &Path,
    kind: Kind,
    strict: bool,
    threads: usize,
    json: bool,
    quiet: bool,
) -> Result<std::process::ExitCode> {
    // A sharded zTensor checkpoint's index records each shard's digest: every byte is checked.
    let mut shard_problem = None;
    let options = ztensor_cli::options(strict);
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    let source: Box<dyn TensorSource> = match kind {
        Kind::TensorBuffers => Box::new(
            super::tb::open(path, strict)?
                .map_err(|e| crate::reported(&crate::shown_path(path), &e))?,
        ),
        Kind::ZtIndex => {
            let ckpt = crate::told::told(path)?
                .open_zt_index(&opening)
                .map_err(|e| crate::open_error(path, &options, e))?;
            shard_problem = ckpt.verify_digests().err().map(|e| e.message().to_owned());
            // A Distributed Checkpoint's chunks are checked object by object, and to make
            // their tensors whole.
            match ckpt.index().chunked.clone() {
                Some(layout) => Box::new(
                    ztensor_shard::Stitched::new(ckpt, &layout)
                        .map_err(|e| crate::reported(&path.display().to_string(), &e))?,
                ),
                None => Box::new(ckpt),
            }
        }
        // A zTensor 2 root's table records each shard's size and digest: every byte of each
        // shard is checked, not only the parts the root points at.
        Kind::Zt2 => {
            let file = crate::sources::open_zt2_file(path, &options)?;
            shard_problem = file.verify_shards().err().map(|e| e.to_string());
            Box::new(file)
        }
        _ => crate::open_source(path)?,
    };
    let source = &*source;
    let bytes: u64 = (0..source.len()).filter_map(|i| source.info(i)).map(|o| o.stored_len()).sum();
    let decoded: u64 = (0..source.len())
        .filter_map(|i| source.info(i))
        .flat_map(|o| o.components.into_iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)))
        .sum();
    let bar = Bar::new(bytes, quiet);
    let par = ztensor_par::ParOptions::with_threads(threads);
    let verdicts = ztensor_par::verify_source(source, &par, &bar);
    bar.finish();
    let verdicts = verdicts.map_err(|e| anyhow!("{e}"))?;
    let mut problems: Vec<String> = shard_problem.into_iter().collect();
    let mut unknown = Vec::new();
    // Objects that cannot be read here for another reason (an encoding not known, a shard
    // not found): the name and why.
    let mut unreadable = Vec::new();
    for (i, verdict) in verdicts.iter().enumerate() {
        let name = || source.name(i).map_or_else(|| format!("#{i}"), std::borrow::Cow::into_owned);
        match verdict {
            Ok(()) => {}
            Err(e)
                if matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_))
                    && e.format_error().map(ztensor_format::Error::kind)
                        != Some(ztensor_format::ErrorKind::DtypeUnknown) =>
            {
                let why =
                    e.format_error().map_or_else(|| e.to_string(), |f| f.message().to_owned());
                unreadable.push(format!("{} ({why})", super::text::shown(&name())));
            }
            Err(e) if matches!(e.kind(), ztensor_io::ErrorKind::Unsupported(_)) => {
                let dtype = source
                    .info(i)
                    .and_then(|o| o.components.first().map(|c| c.dtype.to_string()))
                    .unwrap_or_default();
                unknown.push(format!("{} ({dtype})", super::text::shown(&name())));
            }
            // A failed read is a failed request (status 2), not a problem of the file.
            Err(e) if e.rule().is_none() => {
                return Err(anyhow!(
                    "{}: object {:?}: {e}",
                    path.display(),
                    super::text::shown(&name())
                ));
            }
            // The error names its object already when the source put it there.
            Err(e) if e.format_error().is_some_and(|f| f.object().is_some()) => {
                problems.push(e.to_string());
            }
            Err(e) => problems.push(format!("object {:?}: {e}", super::text::shown(&name()))),
        }
    }
    // What could not be checked is not called sound: its bytes were never looked at.
    let sound = problems.is_empty() && unreadable.is_empty();
    if json {
        let report = serde_json::json!({
            "file": super::stdin::name(path),
            "format": source.format_name(),
            "sound": sound,
            "objects": verdicts.len(),
            "decoded": decoded,
            "problems": problems,
            "unsupported": unknown,
            "unreadable": unreadable,
        });
        writeln!(out, "{report:#}")?;
    } else {
        for p in &problems {
            writeln!(out, "{p}")?;
        }
        let tensors = super::text::plural(verdicts.len(), "tensor");
        let bytes = format!("{} decoded", super::text::size(decoded));
        if sound {
            writeln!(out, "{}: sound ({kind}: {tensors}, {bytes})", super::stdin::shown(path))?;
        } else if problems.is_empty() {
            writeln!(
                out,
                "{}: not verified, {} unchecked ({kind}: {tensors}, {bytes})",
                super::stdin::shown(path),
                super::text::plural(unreadable.len(), "tensor")
            )?;
        } else {
            writeln!(
                out,
                "{}: {} ({kind}: {tensors}, {bytes})",
                super::stdin::shown(path),
                super::text::plural(problems.len(), "problem")
            )?;
        }
        if !unknown.is_empty() {
            writeln!(
                out,
                "note: {} of a dtype zTensor has no type for: {}. `convert \
                 --carry-unknown-dtypes` carries them as bytes (their dtype and shape kept as \
                 attributes, restored when converted back to safetensors); `convert --exclude \
                 NAME` leaves them out",
                if unknown.len() == 1 {
                    "1 tensor is".to_owned()
                } else {
                    format!("{} tensors are", unknown.len())
                },
                listed(&unknown)
            )?;
        }
        if !unreadable.is_empty() {
            writeln!(
                out,
                "note: {} cannot be read here: {}",
                super::text::plural(unreadable.len(), "tensor"),
                listed(&unreadable)
            )?;
        }
    }
    Ok(if sound { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) })
}
