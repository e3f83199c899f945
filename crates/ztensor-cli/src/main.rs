//! `ztensor`: inspect, verify, convert, repack and edit tensor checkpoints of every format the
//! registry reads. `cli` defines the command line, `main` dispatches it (`run`), `errors` turns
//! library errors into exit statuses and messages, `sources` opens inputs and locks outputs,
//! and `cmd` holds one module per group of commands.

mod cli;
mod cmd;
mod errors;
mod remote;
mod sources;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use ztensor_format::Options;

use crate::cli::*;
// The commands name errors and sources from the crate root.
pub(crate) use crate::errors::*;
use crate::sources::*;

/// SIGINT, SIGTERM and SIGHUP undo what is being written (temporary files removed, appends
/// truncated back to their old end, uploads to object storage aborted), then exit with 128 + the signal, as a shell reports a
/// process the signal killed.
///
/// SIGXFSZ (a file grew past the process's file size limit) is caught too, so the write that
/// crossed the limit fails like a full disk and is undone, instead of the signal killing the
/// process in the middle of it.
#[cfg(unix)]
fn handle_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
    let _ = signal_hook::flag::register(
        SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new().name("zt-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            ztensor_io::interrupt();
            ztensor_shard_write::interrupt();
            // Uploads to object storage: aborted, no parts left behind.
            for url in ztensor_remote::abort_unfinished() {
                eprintln!("ztensor: {url}: the interrupted upload could not be aborted");
            }
            cmd::stdin::remove();
            cmd::stdout::remove();
            std::process::exit(128 + signal);
        }
    });
}

/// Elsewhere the platform's default applies (no handler, no cleanup on Ctrl-C).
#[cfg(not(unix))]
fn handle_signals() {}

fn main() -> ExitCode {
    handle_signals();
    // A sharded checkpoint keeps each shard open while it is read: thousands of them pass the
    // customary soft limit of 1024 open files long before the system's own.
    ztensor_io::raise_open_file_limit();
    let cli = Cli::parse();
    ztensor_cli::set_max_expansion(cli.max_expansion);
    remote::configure(ztensor_remote::RemoteOptions {
        unsigned: cli.no_sign_request,
        timeout: std::time::Duration::from_secs(cli.remote_timeout.max(1)),
        ..Default::default()
    });
    let result = run(cli);
    remote::report();
    // Readers never wait on a lock held by someone who is not writing; they say so.
    for path in ztensor_io::read_without_lock() {
        eprintln!(
            "ztensor: note: {} is locked by another process that is not appending to it; read it \
             as it stands without waiting (more than {} s)",
            cmd::stdin::shown(&path),
            ztensor_io::READER_PATIENCE.as_secs()
        );
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            let code = if err.downcast_ref::<Rejected>().is_some() { 1 } else { 2 };
            let message = format!("{err:#}");
            let message = cmd::text::shown_message(&message);
            let message = cmd::stdin::unspooled(&message);
            eprintln!("ztensor: {}", cmd::stdout::unstaged(&message));
            ExitCode::from(code)
        }
    }
}

fn options(strict: bool) -> Options {
    ztensor_cli::options(strict)
}

/// The lines `convert` and `repack` end with (unless --quiet): what was written, in the
/// vocabulary of `info` (objects, decoded and stored bytes, the file's size), how long it took
/// and, for outputs of the parallel engine, the most bytes it held in flight (left out when it
/// held none: a zTensor input whose stored bytes were copied as they are); and how many
/// components went raw because zstd would not make them smaller.
fn wrote(
    out: &mut impl Write,
    output: &str,
    format: &str,
    converted: &cmd::convert::Converted,
    file_len: u64,
    started: std::time::Instant,
    zstd: bool,
) -> std::io::Result<()> {
    use cmd::text::{plural, size};
    let peak = converted
        .peak
        .filter(|&p| p > 0)
        .map(|p| format!(", peak {} in flight", size(p)))
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
        started.elapsed().as_secs_f64()
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
    for note in &converted.notes {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// Whether `output` asks for a sharded checkpoint (it ends in `/` or is a directory), and
/// how it is split; `--shard-size` is refused for a file output.
fn sharding(output: &Path, shard_size: Option<u64>) -> Result<Option<ztensor_shard_write::Split>> {
    let directory = output.as_os_str().to_string_lossy().ends_with('/') || output.is_dir();
    match (directory, shard_size) {
        (true, Some(size)) => Ok(Some(ztensor_shard_write::Split::Size(size.max(1)))),
        (true, None) => Ok(Some(ztensor_shard_write::Split::LikeInput)),
        (false, Some(_)) => Err(anyhow!(
            "--shard-size writes a sharded checkpoint: give an output directory (ending in /), \
             not {}",
            output.display()
        )),
        (false, None) => Ok(None),
    }
}

/// The unit a scheduler gave this process: `SLURM_ARRAY_TASK_ID`, else
/// `JOB_COMPLETION_INDEX` (Kubernetes Indexed Jobs).
fn unit_from_environment() -> Result<usize> {
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(value) = std::env::var(var) {
            return value
                .trim()
                .parse()
                .map_err(|_| anyhow!("{var}={value:?} is not a unit number"));
        }
    }
    Err(anyhow!(
        "which unit? give --unit K, or run under a Slurm array (SLURM_ARRAY_TASK_ID) or a \
         Kubernetes Indexed Job (JOB_COMPLETION_INDEX)"
    ))
}

/// Spools standard input for the command's input given as `-` (every reading command; not the
/// inputs a plan records for later, nor files changed in place).
fn spool_inputs(command: &mut Command, max: u64) -> Result<Option<cmd::stdin::Spooled>> {
    let mut spool = None;
    let resolve = |path: &mut std::path::PathBuf, spool: &mut Option<cmd::stdin::Spooled>| {
        cmd::stdin::resolve(path, spool, max)
    };
    match command {
        Command::Info { file, .. }
        | Command::Ls { file, .. }
        | Command::Dump { file, .. }
        | Command::Verify { file, .. }
        | Command::Remove { file, .. }
        | Command::Extract { file, .. }
        | Command::Cat { file, .. } => resolve(file, &mut spool)?,
        Command::Convert { input, .. } | Command::Repack { input, .. } => {
            resolve(input, &mut spool)?;
        }
        Command::Append { from, .. } => resolve(from, &mut spool)?,
        Command::Id { files, .. } => {
            for file in files {
                resolve(file, &mut spool)?;
            }
        }
        Command::Diff { a, b, .. } => {
            resolve(a, &mut spool)?;
            resolve(b, &mut spool)?;
        }
        _ => {}
    }
    Ok(spool)
}

fn run(mut cli: Cli) -> Result<ExitCode> {
    cmd::text::set_exact(cli.bytes);
    let max_input = cli.max_input.unwrap_or_else(cmd::stdin::default_max);
    let _spooled = spool_inputs(&mut cli.command, max_input)?;
    // Line by line to a terminal, in blocks to a pipe or file: a listing of a million objects
    // is otherwise a million writes.
    let stdout = std::io::stdout().lock();
    let mut out: Box<dyn Write> = if std::io::IsTerminal::is_terminal(&stdout) {
        Box::new(stdout)
    } else {
        Box::new(std::io::BufWriter::with_capacity(64 << 10, stdout))
    };
    let code = match cli.command {
        Command::Info { file, strict, json, attributes } => {
            match cmd::detect(&file)? {
                cmd::Kind::Zt if remote::url_of(&file).is_none() => {
                    let reader = open(&file, &options(strict))?;
                    let pending = reader.source().uncommitted();
                    let shadowed: Vec<&str> =
                        reader.manifest().shadowed().map(|o| o.name()).collect();
                    if json {
                        cmd::info::write_json(&mut out, &file, &reader, pending, &shadowed)?;
                    } else {
                        cmd::info::print(&mut out, &file, &reader, attributes)?;
                        if !shadowed.is_empty() {
                            writeln!(
                                out,
                                "\nnote: {} object(s) share a name with an earlier one ({}), as \
                                 the reference v0.1 writer allows; a NAME given to a command finds \
                                 the first, and zTensor 1.x cannot hold both (--strict refuses \
                                 the file)",
                                shadowed.len(),
                                shadowed
                                    .iter()
                                    .map(|n| format!("{:?}", cmd::text::shown(n)))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )?;
                        }
                        if pending > 0 {
                            writeln!(
                                out,
                                "\nnote: {pending} bytes after the end belong to an append that has \
                                 not committed (still running, or interrupted: `ztensor repair {}` \
                                 removes them); the file reads as it was before it",
                                file.display()
                            )?;
                        }
                    }
                }
                // Every other format, through the tensor-source interface.
                other => {
                    let source: Box<dyn ztensor_io::TensorSource> = match other {
                        cmd::Kind::TensorBuffers if remote::url_of(&file).is_none() => Box::new(
                            cmd::tb::open(&file, strict)?
                                .map_err(|e| reported(&shown_path(&file), &e))?,
                        ),
                        _ => open_source(&file)?,
                    };
                    cmd::convert::source_info(&mut out, &file, other, &*source, json, attributes)?;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Id { files, algorithm } => {
            let algorithm = match algorithm {
                cli::IdArg::Sha256 => ztensor_v2::IdAlgorithm::Sha256,
                cli::IdArg::Xxh3 => ztensor_v2::IdAlgorithm::Xxh3,
            };
            for file in &files {
                let id = cmd::look::id(file, algorithm)?;
                if files.len() == 1 {
                    writeln!(out, "{id}")?;
                } else {
                    writeln!(out, "{id}  {}", cmd::stdin::shown(file))?;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Ls { file, patterns, json } => {
            cmd::look::ls(&mut out, &*open_source(&file)?, &patterns, json)?
        }
        Command::Dump { json: _, file } => {
            let ok = ztensor_dump::write_file(&file, &mut out)
                .with_context(|| format!("cannot read {}", file.display()))?;
            if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Command::Verify { file, strict, threads, json, quiet } => match cmd::detect(&file)? {
            cmd::Kind::Zt if remote::url_of(&file).is_none() => {
                cmd::info::verify(&mut out, &file, strict, self::threads(threads), json, quiet)?
            }
            other => cmd::convert::foreign_verify(
                &mut out,
                &file,
                other,
                strict,
                self::threads(threads),
                json,
                quiet,
            )?,
        },
        Command::Repack { input, output, to, encoding, run, chunk, drop_attributes } => {
            if cmd::detect(&input)? != cmd::Kind::Zt {
                return Err(anyhow!(
                    "repack reads zTensor files; use `convert` for {}",
                    cmd::detect(&input)?
                ));
            }
            run.check_memory(chunk)?;
            let _lock = output_lock(&input, &output, run.no_wait, run.quiet)?;
            let copy = ztensor_io::CopyOptions {
                chunk_size: Some(chunk),
                drop_attributes,
                ..encoding.copy()
            };
            let started = std::time::Instant::now();
            let converted = cmd::repack::run(&input, &output, to, &copy, &run.par(), run.quiet)
                .map_err(|e| {
                    let context = format!("cannot repack {}", input.display());
                    crate::refusal(&context, &e)
                })?;
            if !run.quiet {
                let target = Target::Zt(to).to_string();
                let len = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
                let zstd = encoding.zstd.is_some();
                let name = cmd::stdin::shown(&output);
                wrote(&mut out, &name, &target, &converted, len, started, zstd)?;
            }
            ExitCode::SUCCESS
        }
        Command::Convert {
            input,
            output,
            shard_size,
            force,
            to,
            drop_attributes,
            exclude,
            carry_unknown_dtypes,
            encoding,
            run,
        } => {
            run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
            let sharded = sharding(&output, shard_size)?;
            if force && sharded.is_none() {
                bail!(
                    "--force clears an output directory that holds a checkpoint: a file output \
                     ({}) is replaced whole, atomically, without it",
                    output.display()
                );
            }
            let target = convert_target(&output, to, sharded.is_some(), &encoding)?;
            // `-`: the file is made in a private directory, then copied to standard output.
            let staged = match cmd::stdout::is_stdout(&output) {
                true => Some(cmd::stdout::Staged::new(match target {
                    Target::Safetensors => "stdout.safetensors",
                    Target::TensorBuffers => "stdout.tb",
                    Target::Zt(_) | Target::Zt2 => "stdout.zt",
                })?),
                false => None,
            };
            let output = staged.as_ref().map_or(output, |s| s.path().to_path_buf());
            if remote::url_of(&output).is_some() && sharded.is_some() {
                bail!(
                    "{}: a sharded output is not written to object storage yet; write one \
                     object (no trailing /) or a local directory",
                    output.display()
                );
            }
            let _lock = match sharded {
                Some(_) => None,
                // An object is published whole by its upload's completion: no lock file.
                None if remote::url_of(&output).is_some() => None,
                None => output_lock(&input, &output, run.no_wait, run.quiet)?,
            };
            let request = cmd::convert::Request {
                input: &input,
                output: &output,
                target,
                drop_attributes,
                exclude: &exclude,
                carry_unknown: carry_unknown_dtypes,
                encoding: &encoding,
                run: &run,
                sharded,
                force,
            };
            let started = std::time::Instant::now();
            let converted = cmd::convert::run(&request)?;
            if let Some(written) = &converted.sharded_2 {
                if !run.quiet {
                    let bytes: u64 = written.shards.iter().map(|(_, _, len)| len).sum();
                    writeln!(
                        out,
                        "wrote {} and {} in {} (zTensor 2, {}: {} decoded; files {}) in {:.2} s",
                        cmd::text::plural(written.shards.len(), "shard"),
                        written.root.file_name().unwrap_or_default().to_string_lossy(),
                        cmd::text::shown(&output.display().to_string()),
                        cmd::text::plural(converted.objects, "object"),
                        cmd::text::size(written.decoded),
                        cmd::text::size(bytes + written.root_len),
                        started.elapsed().as_secs_f64()
                    )?;
                    for note in &converted.notes {
                        writeln!(out, "{note}")?;
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(index_path) = &converted.index {
                if !run.quiet {
                    let index = ztensor_shard::ShardIndex::read(index_path)
                        .map_err(|e| reported("", &e))?;
                    let bytes: u64 = index.shards.values().map(|s| s.size).sum();
                    writeln!(
                        out,
                        "wrote {} and {} in {} ({target}, {}: {} decoded; files {}) in {:.2} s",
                        cmd::text::plural(index.shards.len(), "shard"),
                        index_path.file_name().unwrap_or_default().to_string_lossy(),
                        cmd::text::shown(&output.display().to_string()),
                        cmd::text::plural(converted.objects, "object"),
                        cmd::text::size(converted.decoded.unwrap_or(0)),
                        cmd::text::size(bytes),
                        started.elapsed().as_secs_f64()
                    )?;
                    for note in &converted.notes {
                        writeln!(out, "{note}")?;
                    }
                }
                return Ok(ExitCode::SUCCESS);
            }
            let len = match remote::url_of(&output) {
                Some(url) => remote::uploaded(url).unwrap_or(0),
                None => std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0),
            };
            let zstd = encoding.zstd.is_some();
            if let Some(staged) = staged {
                // Standard output holds the file: the summary goes to standard error.
                staged.deliver()?;
                if !run.quiet {
                    let name = cmd::stdout::STDOUT;
                    let mut err = std::io::stderr().lock();
                    wrote(&mut err, name, &target.to_string(), &converted, len, started, zstd)?;
                }
            } else if !run.quiet {
                let name = cmd::stdin::shown(&output);
                wrote(&mut out, &name, &target.to_string(), &converted, len, started, zstd)?;
            }
            ExitCode::SUCCESS
        }
        Command::Plan {
            input,
            output,
            plan,
            to,
            shard_size,
            drop_attributes,
            exclude,
            carry_unknown_dtypes,
            encoding,
        } => {
            let split = sharding(&output, shard_size)?.unwrap_or(match shard_size {
                Some(size) => ztensor_shard_write::Split::Size(size),
                None => ztensor_shard_write::Split::LikeInput,
            });
            let run = Run { threads: 0, memory: None, quiet: true, no_wait: false };
            let request = cmd::convert::Request {
                input: &input,
                output: &output,
                target: Target::Zt(to),
                drop_attributes,
                exclude: &exclude,
                carry_unknown: carry_unknown_dtypes,
                encoding: &encoding,
                run: &run,
                sharded: Some(split),
                force: false,
            };
            let source = open_source_with(&input, carry_unknown_dtypes)?;
            let made = cmd::convert::plan_of(&request, split, &*source)?;
            // The plan file is neither a file the plan reads nor one it will write.
            if let Some(id) = ztensor_io::FileId::of_path(&plan).map_err(|e| anyhow!("{e}"))? {
                let named = made.inputs.iter().map(|f| f.path.clone()).chain(
                    made.units
                        .iter()
                        .map(|u| made.output.join(&u.shard))
                        .chain([made.output.join(&made.index)]),
                );
                for other in named {
                    if ztensor_io::FileId::of_path(&other).ok().flatten() == Some(id) {
                        return Err(anyhow!(
                            "{} is also {} of the plan; writing the plan there would replace it \
                             (choose another -o)",
                            plan.display(),
                            other.display()
                        ));
                    }
                }
            }
            let mut file = ztensor_io::AtomicFile::create(&plan).map_err(|e| anyhow!("{e}"))?;
            file.write_all(made.to_json().as_bytes())
                .with_context(|| format!("cannot write {}", plan.display()))?;
            file.persist().map_err(|e| anyhow!("{e}"))?;
            let objects: usize = made.units.iter().map(|u| u.objects.len()).sum();
            writeln!(
                out,
                "planned {} ({}, {} decoded) into {}: run `ztensor run {} --unit K` for K in 0..{} \
                 (or as a Slurm array / Kubernetes Indexed Job), then `ztensor finalize {}`",
                cmd::text::plural(made.units.len(), "unit"),
                cmd::text::plural(objects, "object"),
                cmd::text::size(made.units.iter().map(|u| u.bytes).sum::<u64>()),
                plan.display(),
                plan.display(),
                made.units.len(),
                plan.display()
            )?;
            if let Some(note) = cmd::convert::oversized(&made, split) {
                writeln!(out, "{note}")?;
            }
            ExitCode::SUCCESS
        }
        Command::RunUnit { plan: path, unit, run } => {
            run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
            let plan = ztensor_shard_write::Plan::read(&path).map_err(|e| reported("", &e))?;
            let unit = match unit {
                Some(k) => k,
                None => unit_from_environment()?,
            };
            let source = open_source_with(&plan.input, plan.options.carry_unknown_dtypes)?;
            let total = plan.units.get(unit).map_or(0, |u| u.bytes);
            let bar = cmd::repack::Bar::new(total, run.quiet);
            let started = std::time::Instant::now();
            let done = ztensor_shard_write::run_unit(&plan, unit, &*source, &run.par(), &bar);
            bar.finish();
            let context = format!("unit {unit} of {}", path.display());
            let outcome = done.map_err(|e| crate::refusal(&context, &e))?;
            if !run.quiet {
                let r = outcome.receipt();
                let what = match outcome {
                    ztensor_shard_write::Outcome::Written(_) => "wrote",
                    ztensor_shard_write::Outcome::AlreadyDone(_) => "already done (verified):",
                };
                writeln!(
                    out,
                    "unit {unit}: {what} {} ({}, file {}, {}) in {:.2} s",
                    plan.output.join(&r.shard).display(),
                    cmd::text::plural(r.objects, "object"),
                    cmd::text::size(r.size),
                    r.digest,
                    started.elapsed().as_secs_f64()
                )?;
            }
            ExitCode::SUCCESS
        }
        Command::Finalize { plan: path, deep } => {
            let plan = ztensor_shard_write::Plan::read(&path).map_err(|e| reported("", &e))?;
            let index = ztensor_shard_write::finalize(&plan, deep)
                .map_err(|e| reported(&format!("cannot finalize {}", path.display()), &e))?;
            writeln!(
                out,
                "wrote {} ({}, {})",
                index.display(),
                cmd::text::plural(plan.units.len(), "shard"),
                cmd::text::plural(plan.units.iter().map(|u| u.objects.len()).sum(), "object")
            )?;
            ExitCode::SUCCESS
        }
        Command::Append { target, from, encoding, run } => {
            run.check_memory(ztensor_io::codec::DEFAULT_ZSTD_CHUNK)?;
            let (count, len) = cmd::edit::append(&target, &from, &encoding, &run)?;
            if !run.quiet {
                writeln!(
                    out,
                    "appended {} from {} to {} (file now {})",
                    cmd::text::plural(count, "object"),
                    cmd::stdin::shown(&from),
                    cmd::stdin::shown(&target),
                    cmd::text::size(len)
                )?;
            }
            ExitCode::SUCCESS
        }
        Command::Remove { file, names, output, no_wait } => {
            let _lock = output_lock(&file, &output, no_wait, false)?;
            // A name given twice is removed once.
            let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut seen = std::collections::HashSet::new();
            names.retain(|n| seen.insert(*n));
            let reader = open_zt(&file, "remove")?;
            for name in &names {
                cmd::look::found(&file, &reader, name)?;
            }
            let before = reader.manifest().len();
            drop(reader);
            let len =
                ztensor_io::remove_objects(&file, &output, &names, &ztensor_cli::options(false))
                    .map_err(|e| reported(&format!("cannot remove from {}", file.display()), &e))?;
            writeln!(
                out,
                "wrote {} ({}, file {}; removed {})",
                output.display(),
                cmd::text::plural(before.saturating_sub(names.len()), "object"),
                cmd::text::size(len),
                names.iter().map(|n| cmd::text::shown(n)).collect::<Vec<_>>().join(", ")
            )?;
            ExitCode::SUCCESS
        }
        Command::Repair { file, scan } => cmd::edit::repair(&mut out, &file, scan)?,
        Command::Extract { file, name, output, max_dense } => {
            ztensor_io::check_output(&output).map_err(|e| anyhow!("{e}"))?;
            // Never over the input, nor over a shard of a checkpoint given by its index.
            let source = open_source_for(&file, &output, "an extracted array", false)?;
            cmd::look::extract(&mut out, &file, &*source, &name, &output, max_dense)?;
            ExitCode::SUCCESS
        }
        Command::Diff { a, b, json, ignore_attributes } => {
            let (sa, sb) = (open_source(&a)?, open_source(&b)?);
            let report = cmd::diff::compare((&a, &*sa), (&b, &*sb), !ignore_attributes)?;
            cmd::diff::print(&mut out, &report, json)?;
            if report.differ() { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        Command::Rules { json } => {
            cmd::info::rules(&mut out, json)?;
            ExitCode::SUCCESS
        }
        Command::Cat { file, name, limit } => {
            let source = open_source(&file)?;
            cmd::look::cat(&mut out, &file, &*source, &name, limit)?;
            ExitCode::SUCCESS
        }
    };
    out.flush()?;
    Ok(code)
}
