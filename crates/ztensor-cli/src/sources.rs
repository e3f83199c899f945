//! Opening inputs (through the format registry) and locking outputs.

use std::path::Path;

use anyhow::{Result, anyhow};
use ztensor_format::Options;
use ztensor_io::Reader;
use ztensor_registry::Place;

use crate::cmd;
use crate::errors::{Failure, open_error, reported, torn_hint, with_hint};
use crate::options;

/// The zTensor file (0.1, 1.x) at `path`, a local path or a URL, as its own reader over
/// where its bytes are ([`told`](crate::told::told): a file through the descriptor it was told
/// by): one reader, so a command prints the same report for an object as for the same bytes on
/// disk. A file that breaks a rule is a rejection (status 1), with the hint for a torn append
/// where it applies.
pub(crate) fn open(path: &Path, options: &Options) -> Result<Reader<Place>> {
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    crate::told::told(path)?.open_zt(&opening).map_err(|e| rejected_or_failed(path, options, &e))
}

/// A zTensor reader's error at `path`: a broken rule is a rejection (status 1), naming the
/// limit that was passed and the way to repair a torn append; other failures stay errors.
fn rejected_or_failed(path: &Path, options: &Options, e: &ztensor_io::Error) -> anyhow::Error {
    match e.rule() {
        Some(_) => {
            let note = ztensor_cli::limit_note(e.rule());
            anyhow!(Failure::rejected(format!(
                "{}: {e}{note}{}",
                path.display(),
                torn_hint(path, options)
            )))
        }
        None => anyhow!("{e}"),
    }
}

/// Takes the write lock on an existing `output`: waiting (and saying so) while another process
/// writes it, or failing at once with `no_wait`.
pub(crate) fn lock_output(
    output: &Path,
    no_wait: bool,
    quiet: bool,
) -> Result<Option<ztensor_io::WriteLock>> {
    ztensor_io::check_output(output).map_err(|e| anyhow!("{e}"))?;
    match ztensor_io::WriteLock::try_acquire(output) {
        Err(e) if matches!(e.kind(), ztensor_io::ErrorKind::Busy { .. }) && !no_wait => {
            if !quiet {
                eprintln!(
                    "ztensor: waiting for another process to finish writing {}",
                    output.display()
                );
            }
            ztensor_io::WriteLock::acquire(output).map_err(|e| anyhow!("{e}"))
        }
        other => other.map_err(|e| anyhow!("{e}")),
    }
}

/// The lock a command writing `output` from `input` holds: for the whole command when it
/// rewrites a file in place (so no append slips in between its read and its rename); otherwise
/// only checked for here (`--no-wait` fails at once), and taken again around the final rename.
pub(crate) fn output_lock(
    input: &Path,
    output: &Path,
    no_wait: bool,
    quiet: bool,
) -> Result<Option<ztensor_io::WriteLock>> {
    let lock = lock_output(output, no_wait, quiet)?;
    Ok(if cmd::same_file(input, output) { lock } else { None })
}

/// Opens a zTensor file for a command that reads zTensor only, with a clear message for the
/// foreign formats it recognises.
pub(crate) fn open_zt(path: &Path, command: &str) -> Result<Reader<Place>> {
    match cmd::detect(path)? {
        cmd::Kind::Zt => open(path, &ztensor_cli::options(false)),
        other => Err(anyhow!(
            "{}: `{command}` reads zTensor files, and this is {other}; convert it first \
             (ztensor convert {} OUT.zt)",
            path.display(),
            path.display()
        )),
    }
}

/// Opens any input the tool reads (zTensor of every version, TensorBuffers, safetensors, a
/// sharded safetensors checkpoint) as a tensor source.
pub(crate) fn open_source(path: &Path) -> Result<Box<dyn ztensor_io::TensorSource>> {
    open_source_with(path, false)
}

/// As [`open_source_with`], for a command that writes `output` (as `what`): refused when
/// `output` is the input, or one of the files its content lies in (a sharded checkpoint's
/// shards, a zTensor 2 root's), the input opened once for both.
pub(crate) fn open_source_for(
    path: &Path,
    output: &Path,
    what: &str,
    carry_unknown: bool,
) -> Result<Box<dyn ztensor_io::TensorSource>> {
    cmd::not_over(path, output, what)?;
    cmd::detect(path)?;
    open_told_for(path, output, what, carry_unknown)
}

/// As [`open_source_for`], for an input already recognised as `kind` (detected once per
/// command).
pub(crate) fn open_told_for(
    path: &Path,
    output: &Path,
    what: &str,
    carry_unknown: bool,
) -> Result<Box<dyn ztensor_io::TensorSource>> {
    cmd::not_over(path, output, what)?;
    let opened = open_told(path, carry_unknown, None)?;
    for shard in opened.files() {
        cmd::not_over(shard, output, what)?;
    }
    expansion_checked(path, opened)
}

/// The zTensor 2 file at `path` (a local path or a URL) with its shards beside it, refused as
/// every input is, for `verify`, which checks the shards whole.
pub(crate) fn open_zt2_file(path: &Path, options: &Options) -> Result<ztensor_v2::File<Place>> {
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    crate::told::told(path)?.open_zt2(&opening).map_err(|e| open_error(path, options, e))
}

/// As [`open_source`]; with `carry_unknown`, safetensors tensors of dtypes zTensor lacks are
/// carried as bytes.
pub(crate) fn open_source_with(
    path: &Path,
    carry_unknown: bool,
) -> Result<Box<dyn ztensor_io::TensorSource>> {
    cmd::detect(path)?;
    expansion_checked(path, open_told(path, carry_unknown, None)?)
}

/// The source of `opened` (the input at `path`), refused when its objects decode to more than
/// the expansion limit allows for the bytes its content lies in (a zTensor 2 root's shards
/// included). A sharded checkpoint's shards are files of their own, each checked when read as
/// one.
pub(crate) fn expansion_checked(
    path: &Path,
    opened: ztensor_registry::Opened,
) -> Result<Box<dyn ztensor_io::TensorSource>> {
    if !matches!(opened.kind(), cmd::Kind::SafetensorsIndex | cmd::Kind::ZtIndex) {
        let len = opened.input_len();
        ztensor_io::check_expansion(opened.source(), len, &options(false).limits).map_err(|e| {
            let e = reported(&format!("{}", path.display()), &e);
            let hint = "(--max-expansion RATIO raises the limit)";
            with_hint(e, &format!(" {hint}"))
        })?;
    }
    Ok(opened.into_source())
}

/// Opens the input at `path` through the format registry as it was told
/// ([`told`](crate::told::told): a local file through its descriptor, a URL as the object it
/// was told in), its expansion left to the caller ([`expansion_checked`]); for a conversion,
/// read as its `target` reads it ([`ztensor_registry::OpenOptions::writing`]).
pub(crate) fn open_told(
    path: &Path,
    carry_unknown: bool,
    target: Option<crate::Target>,
) -> Result<ztensor_registry::Opened> {
    let mut options = ztensor_registry::OpenOptions {
        options: ztensor_cli::options(false),
        carry_unknown_dtypes: carry_unknown,
        ..Default::default()
    };
    if let Some(target) = target {
        options = options.writing(target);
    }
    crate::told::told(path)?.open(&options).map_err(|e| open_error(path, &options.options, e))
}
