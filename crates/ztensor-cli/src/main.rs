//! `ztensor`: inspect, verify, convert, repack and edit tensor checkpoints of every format the
//! registry reads. `cli` defines the command line and `main` parses and dispatches it (`run`);
//! `cmd` holds one module per command or group of commands, which does the work and returns
//! what happened; `report` prints what the writing commands did, `progress` draws the bar,
//! `errors` turns library errors into exit statuses and messages, `sources` opens inputs
//! through the registry and locks outputs.

mod cli;
mod cmd;
mod errors;
mod progress;
mod remote;
mod report;
mod sources;
mod told;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
/// The options every command reads with.
pub(crate) use ztensor_cli::options;

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
            SIGNALLED.store(true, std::sync::atomic::Ordering::SeqCst);
            // One registry undoes every writer's work: temporary files and appends, then each
            // layer that added itself (shards of a sharded output; uploads to object storage
            // aborted, no parts left behind, and the objects a sharded output published
            // before its index deleted; the spools of standard input and output).
            for url in ztensor_io::interrupt() {
                eprintln!("ztensor: {url}: what the interrupted write left could not be removed");
            }
            std::process::exit(128 + signal);
        }
    });
}

/// Set once a signal's cleanup has begun: the command's own end (most often a failure the
/// cleanup caused, an upload it stopped) then waits for the cleanup, which exits with the
/// signal's status.
static SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Waits for a signal's cleanup to exit the process, when one has begun (within a minute: a
/// cleanup waits at most seconds for each thing it undoes).
fn await_signal_cleanup() {
    if SIGNALLED.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// Elsewhere the platform's default applies (no handler, no cleanup on Ctrl-C).
#[cfg(not(unix))]
fn handle_signals() {}

fn main() -> ExitCode {
    // Before any thread: under an address-space cap, threads share the allocator's one arena.
    ztensor_io::fit_allocator_to_address_space();
    handle_signals();
    // A sharded checkpoint keeps each shard open while it is read: thousands of them pass the
    // customary soft limit of 1024 open files long before the system's own.
    ztensor_io::raise_open_file_limit();
    let cli = Cli::parse();
    ztensor_cli::set_max_expansion(cli.max_expansion);
    remote::configure(ztensor_remote::RemoteOptions {
        unsigned: cli.no_sign_request,
        timeout: std::time::Duration::from_secs(cli.remote_timeout.max(1)),
        concurrency: cli.remote_concurrency.max(1),
        range_len: cli.remote_range_size.max(ztensor_remote::RemoteOptions::MIN_RANGE_LEN),
        // Ranges fetched ahead of in-order reads: a quarter of --memory, as uploads hold.
        read_ahead: cli.memory().map_or(ztensor_remote::RemoteOptions::DEFAULT_READ_AHEAD, |m| {
            (m / 4).min(ztensor_remote::RemoteOptions::DEFAULT_READ_AHEAD)
        }),
        ..Default::default()
    });
    let result = run(cli);
    await_signal_cleanup();
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
            let code = errors::status_of(&err).code();
            let message = format!("{err:#}");
            let message = cmd::text::shown_message(&message);
            let message = cmd::stdin::unspooled(&message);
            eprintln!("ztensor: {}", cmd::stdout::unstaged(&message));
            ExitCode::from(code)
        }
    }
}

/// Spools standard input for the command's input given as `-` (every reading command; not the
/// inputs a plan records for later, nor files changed in place).
fn spool_inputs(command: &mut Command, max: u64) -> Result<Option<cmd::stdin::Spooled>> {
    let mut spool = None;
    let resolve = |path: &mut std::path::PathBuf, spool: &mut Option<cmd::stdin::Spooled>| {
        cmd::stdin::resolve(path, spool, max)?;
        checkpoint_in(path);
        Ok::<(), anyhow::Error>(())
    };
    match command {
        Command::Info { file, .. }
        | Command::Ls { file, .. }
        | Command::Dump { file, .. }
        | Command::Verify { file, .. }
        | Command::Extract { file, .. }
        | Command::Cat { file, .. } => resolve(file, &mut spool)?,
        Command::Convert(a) => resolve(&mut a.input, &mut spool)?,
        // A plan names its input for every unit to open later: never standard input.
        Command::Plan(a) => checkpoint_in(&mut a.input),
        Command::Repack(a) => resolve(&mut a.input, &mut spool)?,
        Command::Append(a) => resolve(&mut a.from, &mut spool)?,
        Command::Remove(a) => resolve(&mut a.file, &mut spool)?,
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

/// A directory given as an input is the sharded checkpoint whose index it holds: that index's
/// path from here on, so that what a command reports, plans, names its outputs after and
/// checks its outputs against is what it is when the index itself is given. (A Distributed
/// Checkpoint is read as its directory; a directory holding no checkpoint, or two, is left for
/// the command's opener to refuse.)
fn checkpoint_in(path: &mut std::path::PathBuf) {
    if crate::remote::url_of(path).is_some() || !path.is_dir() {
        return;
    }
    if let Ok(detected) = ztensor_registry::Detected::new(path)
        && detected.path() != path.as_path()
    {
        *path = detected.path().to_path_buf();
    }
}

/// Runs the command: each command's module does the work and returns what happened (a
/// [`report::Done`] for those that write, printed by [`report::print`]) or its exit status;
/// listings (`info`, `ls`, `cat`, `diff`, `verify`) write their output as they go.
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
    let (done, quiet, json) = match cli.command {
        Command::Info { file, strict, json, attributes } => {
            cmd::info::run(&mut out, &file, strict, json, attributes)?;
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Id { files, algorithm, json } => {
            cmd::look::ids(&mut out, &files, algorithm.into(), json)?;
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Ls { file, patterns, json } => {
            let code = cmd::look::ls(&mut out, &*open_source(&file)?, &patterns, json)?;
            return finish(out, code);
        }
        Command::Dump { json: _, file } => {
            let code = cmd::look::dump(&mut out, &file)?;
            return finish(out, code);
        }
        Command::Verify { file, strict, threads, json, quiet } => {
            let code =
                cmd::verify::run(&mut out, &file, strict, self::threads(threads), json, quiet)?;
            return finish(out, code);
        }
        Command::Repair { file, scan, json } => {
            let code = cmd::edit::repair(&mut out, &file, scan, json)?;
            return finish(out, code);
        }
        Command::Extract { file, name, output, max_dense, json } => {
            cmd::look::extract_file(&mut out, &file, &name, &output, max_dense, json)?;
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Diff { a, b, json, ignore_attributes } => {
            let code = cmd::diff::run(&mut out, &a, &b, json, ignore_attributes)?;
            return finish(out, code);
        }
        Command::Rules { json } => {
            cmd::info::rules(&mut out, json)?;
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Completions { shell } => {
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cli, "ztensor", &mut out);
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Manual { dir } => {
            cmd::manual::write(&dir, <Cli as clap::CommandFactory>::command())?;
            return finish(out, ExitCode::SUCCESS);
        }
        Command::Cat { file, name, limit, json } => {
            cmd::look::cat(&mut out, &file, &*open_source(&file)?, &name, limit, json)?;
            return finish(out, ExitCode::SUCCESS);
        }
        // `--json`: the summary as JSON, and no progress bar.
        Command::Convert(mut a) => {
            let (quiet, json) = (a.run.quiet, a.run.json);
            a.run.quiet |= json;
            (cmd::convert::command(a)?, quiet, json)
        }
        Command::Repack(mut a) => {
            let (quiet, json) = (a.run.quiet, a.run.json);
            a.run.quiet |= json;
            (cmd::convert::repack(a)?, quiet, json)
        }
        Command::Plan(a) => {
            let json = a.json;
            (cmd::plan::plan(a)?, false, json)
        }
        Command::RunUnit { plan, unit, mut run } => {
            let (quiet, json) = (run.quiet, run.json);
            run.quiet |= json;
            (cmd::plan::run_unit(&plan, unit, &run)?, quiet, json)
        }
        Command::Finalize { plan, deep, json } => (cmd::plan::finalize(&plan, deep)?, false, json),
        Command::Append(mut a) => {
            let (quiet, json) = (a.run.quiet, a.run.json);
            a.run.quiet |= json;
            (cmd::edit::append(&a)?, quiet, json)
        }
        Command::Remove(a) => (cmd::edit::remove(&a)?, false, a.json),
    };
    if json && !quiet {
        let report = format!("{:#}\n", report::json(&done));
        if done.on_stderr() {
            std::io::stderr().lock().write_all(report.as_bytes())?;
        } else {
            out.write_all(report.as_bytes())?;
        }
    } else if !quiet {
        if done.on_stderr() {
            report::print(&mut std::io::stderr().lock(), &done)?;
        } else {
            report::print(&mut out, &done)?;
        }
    }
    finish(out, ExitCode::SUCCESS)
}

/// What is buffered for standard output written, then `code`.
fn finish(mut out: Box<dyn Write + '_>, code: ExitCode) -> Result<ExitCode> {
    out.flush()?;
    Ok(code)
}
