//! `ztensor append`: objects of another file added to a zTensor 1.x file in place; `ztensor
//! repair`: the last complete state of one whose append did not finish.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use ztensor_io::{Repair, TensorSink};
use ztensor_par::ZtSink;

use super::Kind;
use crate::cli::{AppendArgs, RemoveArgs};
use crate::errors::{Failure, status_of, with_hint};
use crate::progress::Bar;
use crate::report::Done;
use crate::{Encoding, Run, open, open_zt, output_lock, reported};

type Writes<'a> = Box<dyn FnOnce(&mut ztensor_io::Appender) -> Result<()> + 'a>;

/// `ztensor append`: every object of `--from` added to the target in place.
pub(crate) fn append(a: &AppendArgs) -> Result<Done> {
    a.run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
    let (objects, len) = append_all(&a.target, &a.from, &a.encoding, &a.run)?;
    Ok(Done::Appended { objects, from: a.from.clone(), target: a.target.clone(), len })
}

/// `ztensor remove`: the file written without the named objects (each found first; a name given
/// twice is removed once).
pub(crate) fn remove(a: &RemoveArgs) -> Result<Done> {
    let _lock = output_lock(&a.file, &a.output, a.no_wait, false)?;
    let mut names: Vec<&str> = a.names.iter().map(String::as_str).collect();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));
    let reader = open_zt(&a.file, "remove")?;
    for name in &names {
        super::look::found(&a.file, &reader, name)?;
    }
    let before = reader.manifest().len();
    drop(reader);
    let held = super::replace::held(&a.output);
    let len = ztensor_io::remove_objects(&a.file, &a.output, &names, &ztensor_cli::options(false))
        .map_err(|e| reported(&format!("cannot remove from {}", a.file.display()), &e))?;
    let note = held
        .map(|h| super::replace::replaced(&a.output, &h, super::replace::held(&a.output).as_ref()));
    Ok(Done::Removed {
        output: a.output.clone(),
        objects: before.saturating_sub(names.len()),
        len,
        names: names.iter().map(|&n| n.to_owned()).collect(),
        note,
    })
}

/// Appends every object of `from` to `target`; returns the count and the new length.
fn append_all(target: &Path, from: &Path, encoding: &Encoding, run: &Run) -> Result<(usize, u64)> {
    if super::detect(target)? != Kind::Zt {
        return Err(anyhow!("{}: append adds to zTensor 1.x files only", target.display()));
    }
    let existing = open(target, &ztensor_cli::options(false))?;
    let taken = |names: &mut dyn Iterator<Item = &str>| -> Result<()> {
        let mut clashes: Vec<&str> = names.filter(|n| existing.object(n).is_ok()).collect();
        clashes.sort_unstable();
        if clashes.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(Failure::rejected(format!(
                "cannot append {} to {}: {} already holds {} (remove them first)",
                from.display(),
                target.display(),
                target.display(),
                clashes.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
            ))))
        }
    };
    let context = format!("cannot append {} to {}", from.display(), target.display());
    let bar;
    // Everything is checked before the first byte is appended; what can still fail is I/O.
    let (count, write): (usize, Writes<'_>) = if super::detect(from)? == Kind::Zt {
        // zTensor: every object by handle, its stored bytes copied as they are where the
        // target's version holds them.
        let source = open(from, &ztensor_cli::options(false))?;
        taken(&mut source.objects().map(|o| o.name()))?;
        let repeated: Vec<String> = source.shadowed().map(|o| format!("{:?}", o.name())).collect();
        if !repeated.is_empty() {
            return Err(anyhow!(Failure::rejected(format!(
                "{context}: {} repeats {} (a v0.1 file may; a 1.x file holds one object per \
                 name)",
                from.display(),
                repeated.join(", ")
            ))));
        }
        let copy = encoding.copy();
        let n = source.manifest().len();
        (
            n,
            Box::new(move |w| {
                for o in source.objects() {
                    ztensor_io::copy_object(o, w.writer_mut(), &copy)
                        .map_err(|e| reported("", &e))?;
                }
                Ok(())
            }),
        )
    } else {
        // Any other input, through the tensor-source interface, written by the engine. File
        // attributes (safetensors `__metadata__`, TensorBuffers metadata) stay the target's.
        let source = crate::open_source(from)?;
        let names: Vec<String> =
            (0..source.len()).filter_map(|i| source.info(i)).map(|o| o.name.into_owned()).collect();
        taken(&mut names.iter().map(String::as_str))?;
        for i in 0..source.len() {
            if let Some(o) = source.info(i)
                && let Some(why) = &o.unsupported
            {
                return Err(anyhow!(Failure::rejected(format!(
                    "{context}: object {:?}: {}",
                    super::text::shown(&o.name),
                    why.message()
                ))));
            }
        }
        let total = (0..source.len()).filter_map(|i| source.info(i)).map(|o| super::decoded_of(&o));
        bar = Bar::new(total.sum(), run.quiet);
        let (options, par, bar) = (encoding.fresh(), run.par(), &bar);
        (
            names.len(),
            Box::new(move |w| {
                let mut sink =
                    ZtSink::new(w.writer_mut(), options, &par, bar).without_file_attributes();
                let done = sink.write_all(&*source);
                bar.finish();
                done.map(|_| ()).map_err(|e| reported("", &e))
            }),
        )
    };
    drop(existing);
    let mut appender = match ztensor_io::try_append(target, &ztensor_cli::options(false)) {
        Err(e) if matches!(e.kind(), ztensor_io::ErrorKind::Busy { .. }) && !run.no_wait => {
            if !run.quiet {
                eprintln!(
                    "ztensor: waiting for another process to finish writing {}",
                    target.display()
                );
            }
            ztensor_io::append(target, &ztensor_cli::options(false))
        }
        other => other,
    }
    .map_err(|e| reported(&context, &e))?;
    let old_len = appender.old_len();
    let result =
        write(&mut appender).and_then(|()| appender.finish().map_err(|e| reported("", &e)));
    match result {
        Ok(len) => Ok((count, len)),
        Err(e) => {
            // The appender has undone itself (truncated the file back) on the way out; say
            // what holds now.
            let journal_left = ztensor_io::FileSource::open(target)
                .map(|s| {
                    s.uncommitted() > 0
                        || std::fs::metadata(target).map(|m| m.len()).ok() != Some(old_len)
                })
                .unwrap_or(true);
            let note = if journal_left {
                format!(
                    "{} reads as it was before; `ztensor repair {}` removes what the append wrote",
                    target.display(),
                    target.display()
                )
            } else {
                format!("{} holds exactly its old bytes", target.display())
            };
            let message = format!("{context}: {e:#}; {note}");
            Err(anyhow!(Failure::new(status_of(&e), message)))
        }
    }
}

/// `ztensor repair`: the last complete state of a file whose append did not finish.
pub fn repair(out: &mut impl Write, path: &Path, scan: bool, json: bool) -> Result<ExitCode> {
    let options = ztensor_cli::options(false);
    let outcome = if scan {
        ztensor_io::repair_by_scan(path, &options)
    } else {
        ztensor_io::repair(path, &options)
    };
    let outcome = outcome.map_err(|e| {
        let hint = if e.rule().is_some() && !scan {
            crate::torn_hint(path, &options)
        } else {
            String::new()
        };
        let base = reported(&format!("cannot repair {}", path.display()), &e);
        with_hint(base, &hint)
    })?;
    let objects = open(path, &options)?.manifest().len();
    if json {
        let (removed, by_process, end) = match &outcome {
            Repair::Sound => (0, None, std::fs::metadata(path).ok().map(|m| m.len())),
            Repair::Restored(r) => (r.discarded, r.pid, Some(r.end)),
        };
        let report = serde_json::json!({
            "file": path.display().to_string(),
            "repaired": matches!(outcome, Repair::Restored(_)),
            "removed_bytes": removed,
            "append_by_process": by_process,
            "file_len": end,
            "objects": objects,
        });
        writeln!(out, "{report:#}")?;
        return Ok(ExitCode::SUCCESS);
    }
    match outcome {
        Repair::Sound => {
            let objects = super::text::plural(objects, "object");
            writeln!(out, "{}: sound, nothing to repair ({objects})", path.display())?
        }
        Repair::Restored(r) => {
            let by = match r.pid {
                Some(pid) => format!("an append by process {pid} that did not commit"),
                None => "what followed the last complete manifest".to_owned(),
            };
            let objects = super::text::plural(objects, "object");
            writeln!(
                out,
                "{}: removed {} of {by}; restored to its last complete state ({objects}, \
                 file {})",
                path.display(),
                super::text::size(r.discarded),
                super::text::size(r.end)
            )?
        }
    }
    Ok(ExitCode::SUCCESS)
}
