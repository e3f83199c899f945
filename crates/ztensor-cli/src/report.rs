//! What the commands that write tell the user: each returns a [`Done`] saying what happened,
//! printed here and nowhere else, in the vocabulary of `info` (objects, decoded and stored
//! bytes, the sizes of [`text::size`]) with every path and name escaped for the terminal.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cmd::text::{self, plural, size};

/// What a writing command did.
pub(crate) enum Done {
    /// One file or object written (`convert`, `repack`).
    Wrote {
        /// The output as written on the command line (`-`: standard output holds the file).
        output: PathBuf,
        /// The format written, as `--to` names it.
        format: String,
        /// What the conversion wrote.
        converted: Converted,
        /// The output's length.
        file_len: u64,
        took: Duration,
        /// Whether zstd was asked for (components left raw are then worth a line).
        zstd: bool,
    },
    /// A sharded checkpoint written into a directory (`convert IN OUTDIR/`).
    Shards {
        /// The directory.
        directory: PathBuf,
        shards: usize,
        /// The file that lists the shards: the index, or a zTensor 2 root.
        index: PathBuf,
        format: String,
        objects: usize,
        decoded: u64,
        /// The files' lengths together.
        bytes: u64,
        took: Duration,
        notes: Vec<String>,
    },
    /// A plan written (`plan`).
    Planned {
        plan: PathBuf,
        units: usize,
        objects: usize,
        decoded: u64,
        /// Objects larger than `--shard-size`, each in a shard of its own.
        note: Option<String>,
    },
    /// One unit of a plan run, or found done and verified (`run`).
    Unit {
        unit: usize,
        fresh: bool,
        shard: PathBuf,
        objects: usize,
        size: u64,
        digest: String,
        took: Duration,
    },
    /// A checkpoint's index written after its units were checked (`finalize`).
    Finalized { index: PathBuf, shards: usize, objects: usize },
    /// Objects appended in place (`append`).
    Appended { objects: usize, from: PathBuf, target: PathBuf, len: u64 },
    /// A file written without the named objects (`remove`).
    Removed {
        output: PathBuf,
        objects: usize,
        len: u64,
        names: Vec<String>,
        /// What the output held, replaced (said also when it is the input, rewritten).
        note: Option<String>,
    },
}

impl Done {
    /// Whether the report goes to standard error: standard output holds the file written.
    pub(crate) fn on_stderr(&self) -> bool {
        matches!(self, Done::Wrote { output, .. } if crate::cmd::stdout::is_stdout(output))
    }
}

/// A path as reports show it: `<stdin>`/`<stdout>` for the streams, else escaped.
fn shown(path: &Path) -> String {
    crate::cmd::stdin::shown(path).into_owned()
}

/// Prints what `done` says happened.
pub(crate) fn print(out: &mut dyn Write, done: &Done) -> io::Result<()> {
    match done {
        Done::Wrote { output, format, converted, file_len, took, zstd } => {
            let name = match crate::cmd::stdout::is_stdout(output) {
                true => crate::cmd::stdout::STDOUT.to_owned(),
                false => shown(output),
            };
            wrote(out, &name, format, converted, *file_len, *took, *zstd)
        }
        Done::Shards { directory, shards, index, format, objects, decoded, bytes, took, notes } => {
            writeln!(
                out,
                "wrote {} and {} in {} ({format}, {}: {} decoded; files {}) in {:.2} s",
                plural(*shards, "shard"),
                text::shown(&index.file_name().unwrap_or_default().to_string_lossy()),
                shown(directory),
                plural(*objects, "object"),
                size(*decoded),
                size(*bytes),
                took.as_secs_f64()
            )?;
            notes.iter().try_for_each(|note| writeln!(out, "{note}"))
        }
        Done::Planned { plan, units, objects, decoded, note } => {
            let plan = shown(plan);
            writeln!(
                out,
                "planned {} ({}, {} decoded) into {plan}: run `ztensor run {plan} --unit K` for K \
                 in 0..{units} (or as a Slurm array / Kubernetes Indexed Job), then `ztensor \
                 finalize {plan}`",
                plural(*units, "unit"),
                plural(*objects, "object"),
                size(*decoded),
            )?;
            note.iter().try_for_each(|note| writeln!(out, "{note}"))
        }
        Done::Unit { unit, fresh, shard, objects, size: len, digest, took } => writeln!(
            out,
            "unit {unit}: {} {} ({}, file {}, {digest}) in {:.2} s",
            if *fresh { "wrote" } else { "already done (verified):" },
            shown(shard),
            plural(*objects, "object"),
            size(*len),
            took.as_secs_f64()
        ),
        Done::Finalized { index, shards, objects } => writeln!(
            out,
            "wrote {} ({}, {})",
            shown(index),
            plural(*shards, "shard"),
            plural(*objects, "object")
        ),
        Done::Appended { objects, from, target, len } => writeln!(
            out,
            "appended {} from {} to {} (file now {})",
            plural(*objects, "object"),
            shown(from),
            shown(target),
            size(*len)
        ),
        Done::Removed { output, objects, len, names, note } => {
            writeln!(
                out,
                "wrote {} ({}, file {}; removed {})",
                shown(output),
                plural(*objects, "object"),
                size(*len),
                names.iter().map(|n| text::shown(n)).collect::<Vec<_>>().join(", ")
            )?;
            note.iter().try_for_each(|note| writeln!(out, "{note}"))
        }
    }
}

/// What `done` says happened, as one JSON object (`--json`): sizes in bytes, paths as given
/// (`-` for standard output), durations in seconds.
pub(crate) fn json(done: &Done) -> serde_json::Value {
    use serde_json::json;
    let path = |p: &Path| crate::cmd::stdin::name(p);
    match done {
        Done::Wrote { output, format, converted, file_len, took, .. } => {
            let (decoded, stored, raw) = match converted.tally {
                Some(t) => (
                    (t.decoded_unknown == 0).then_some(t.decoded),
                    Some(t.stored),
                    Some(t.raw_components),
                ),
                None => (converted.decoded, None, None),
            };
            json!({
                "wrote": path(output),
                "format": format,
                "objects": converted.objects,
                "decoded": decoded,
                "stored": stored,
                "file_len": file_len,
                "seconds": took.as_secs_f64(),
                "peak_in_flight": converted.peak,
                "peak_memory": ztensor_io::peak_resident(),
                "components_left_raw": raw,
                "notes": converted.notes,
            })
        }
        Done::Shards { directory, shards, index, format, objects, decoded, bytes, took, notes } => {
            json!({
                "wrote": path(directory),
                "format": format,
                "shards": shards,
                "index": path(index),
                "objects": objects,
                "decoded": decoded,
                "file_len": bytes,
                "seconds": took.as_secs_f64(),
                "notes": notes,
            })
        }
        Done::Planned { plan, units, objects, decoded, note } => json!({
            "plan": path(plan),
            "units": units,
            "objects": objects,
            "decoded": decoded,
            "notes": note.iter().collect::<Vec<_>>(),
        }),
        Done::Unit { unit, fresh, shard, objects, size, digest, took } => json!({
            "unit": unit,
            "wrote": fresh,
            "shard": path(shard),
            "objects": objects,
            "file_len": size,
            "digest": digest,
            "seconds": took.as_secs_f64(),
        }),
        Done::Finalized { index, shards, objects } => json!({
            "wrote": path(index),
            "shards": shards,
            "objects": objects,
        }),
        Done::Appended { objects, from, target, len } => json!({
            "appended": objects,
            "from": path(from),
            "to": path(target),
            "file_len": len,
        }),
        Done::Removed { output, objects, len, names, note } => json!({
            "wrote": path(output),
            "objects": objects,
            "file_len": len,
            "removed": names,
            "notes": note.iter().collect::<Vec<_>>(),
        }),
    }
}

/// The lines `convert` and `repack` end with: what was written, in the vocabulary of `info`
/// (objects, decoded and stored bytes, the file's size), how long it took and the process's
/// peak memory as measured; and how many components went raw because zstd would not make them
/// smaller.
fn wrote(
    out: &mut dyn Write,
    output: &str,
    format: &str,
    converted: &Converted,
    file_len: u64,
    took: Duration,
    zstd: bool,
) -> io::Result<()> {
    // Measured (the process's most resident memory), not the engine's accounting of what it
    // held: a figure a user can hold against `time -v` and the machine.
    let peak = ztensor_io::peak_resident()
        .map(|p| format!(", peak memory {}", size(p)))
        .unwrap_or_default();
    let what = match converted.tally {
        Some(t) if t.decoded_unknown == 0 => {
            format!("{} decoded, {} stored", size(t.decoded), size(t.stored))
        }
        Some(t) => format!("{} stored", size(t.stored)),
        None => format!("{} decoded", size(converted.decoded.unwrap_or(0))),
    };
    writeln!(
        out,
        "wrote {output} ({format}, {}: {what}; file {}) in {:.2} s{peak}",
        plural(converted.objects, "object"),
        size(file_len),
        took.as_secs_f64()
    )?;
    if let Some(t) = converted.tally.filter(|t| zstd && t.raw_components > 0) {
        writeln!(
            out,
            "{} of {} stored raw: zstd would not make them smaller (--zstd-always compresses \
             them anyway)",
            t.raw_components,
            plural(usize::try_from(t.components).unwrap_or(usize::MAX), "component")
        )?;
    }
    converted.notes.iter().try_for_each(|note| writeln!(out, "{note}"))
}

/// What a conversion wrote.
#[derive(Debug)]
pub(crate) struct Converted {
    /// How many objects.
    pub objects: usize,
    /// For zTensor targets, the most bytes the engine held in flight.
    pub peak: Option<u64>,
    /// For a sharded output, the index written.
    pub index: Option<std::path::PathBuf>,
    /// For a sharded output into object storage, the shards published and their bytes (a
    /// local one's are read from its index).
    pub published: Option<(usize, u64)>,
    /// For a zTensor file, what its writer was given.
    pub tally: Option<ztensor_io::Tally>,
    /// The decoded bytes written, for outputs without a tally.
    pub decoded: Option<u64>,
    /// For a sharded zTensor 2 output, what was written (the root and its shards).
    pub sharded_2: Option<ztensor_v2::sharded::ShardedSummary>,
    /// What the user is to be told besides: objects larger than `--shard-size`, attributes
    /// `--drop-attributes` dropped.
    pub notes: Vec<String>,
}
