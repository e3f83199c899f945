//! How errors reach the user: `Rejected` (the data said no, status 1) or a failed request
//! (status 2), decided by each library error's `is_rejection`, with the file and context named.

use std::path::Path;

use anyhow::anyhow;
use ztensor_format::Options;
use ztensor_io::FileSource;

use crate::cmd;

/// The data said no (a broken file, unrepresentable content, a difference): exit status 1.
#[derive(Debug)]
pub(crate) struct Rejected(pub(crate) String);

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Rejected {}

/// A zTensor error as the CLI reports it: a broken rule is `Rejected` (status 1), other
/// failures (I/O, names not found) are plain errors (status 2). `context` prefixes the message
/// unless the error already names the path.
pub(crate) fn zt_error(context: &str, e: &ztensor_io::Error) -> anyhow::Error {
    let note = ztensor_cli::limit_note(e.rule());
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() {
        format!("{text}{note}")
    } else {
        format!("{context}: {text}{note}")
    };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// A foreign-format error as the CLI reports it (status 1 for the data saying no).
pub(crate) fn foreign_error(context: &str, e: &ztensor_foreign::Error) -> anyhow::Error {
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() { text } else { format!("{context}: {text}") };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// For a file that does not end with a valid manifest but holds an earlier complete one: the
/// remains of an append cut short with no journal to say where it began.
pub(crate) fn torn_hint(path: &Path, options: &Options) -> String {
    let Some(source) = ztensor_io::open_input(path).ok().and_then(|f| FileSource::new(f).ok())
    else {
        return String::new();
    };
    match ztensor_io::recover(source, options) {
        Ok((reader, found)) if found.discarded > 0 => format!(
            "\nhint: this looks like an append that was cut short with no journal (by another \
             program, or an older ztensor): a complete manifest of {} objects ends at byte {} of \
             {}. `ztensor repair --scan {}` truncates the file there, trusting that manifest, \
             which nothing can tell from one carried inside the appended data",
            reader.manifest().len(),
            found.end,
            found.end + found.discarded,
            path.display()
        ),
        _ => String::new(),
    }
}

/// An error of the sharded-checkpoint code as the CLI reports it: a broken rule of a file (an
/// index that disagrees with its shards, a malformed plan) is `Rejected` (status 1).
pub(crate) fn shard_error(context: &str, e: &ztensor_shard::Error) -> anyhow::Error {
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() { text } else { format!("{context}: {text}") };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}

/// A registry refusal as the CLI reports it, by the reader it came from.
pub(crate) fn open_error(
    path: &Path,
    options: &Options,
    e: ztensor_registry::OpenError,
) -> anyhow::Error {
    use ztensor_registry::OpenError;
    match e {
        OpenError::Zt(e) if e.rule().is_some() => {
            let note = ztensor_cli::limit_note(e.rule());
            anyhow!(Rejected(format!("{}: {e}{note}{}", path.display(), torn_hint(path, options))))
        }
        OpenError::Zt(e) => anyhow!("{e}"),
        OpenError::Foreign(e) => foreign_error("", &e),
        OpenError::TensorBuffers(e) => tb_rejected(path, &e),
        OpenError::Shard(e) => shard_error("", &e),
        other => anyhow!("{other}"),
    }
}

/// A TensorBuffers error as the CLI reports it: a broken rule is `Rejected` (status 1), a
/// failed read is not.
pub(crate) fn tb_rejected(path: &Path, e: &ztensor_tensorbuffers::Error) -> anyhow::Error {
    let message = cmd::text::shown(&format!("{}: {e}", path.display())).into_owned();
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
}
