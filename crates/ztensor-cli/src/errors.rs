//! How errors reach the user: a [`Failure`] says its status (the data said no, 1, or the
//! request failed, 2), decided once from each library error's [`Verdict`], its message with the
//! file and context named, and the hints that say what to do; any other error is a failed
//! request.

use std::path::Path;

use anyhow::anyhow;
use ztensor_format::{Options, Verdict};
use ztensor_io::FileSource;

use crate::cmd;

/// How a command ended when it did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// The data said no (a broken file, unrepresentable content, a difference): exit status 1.
    Rejected,
    /// The request failed (I/O, a name not found, a usage the tool refuses): exit status 2.
    Failed,
}

impl Status {
    /// The exit status.
    pub(crate) fn code(self) -> u8 {
        match self {
            Status::Rejected => 1,
            Status::Failed => 2,
        }
    }
}

/// A command's failure: its status, its message, and the hints after it (each with its own
/// separator: `" (--drop-attributes …)"`, `"\nhint: …"`).
#[derive(Debug)]
pub(crate) struct Failure {
    status: Status,
    message: String,
    hints: Vec<String>,
}

impl Failure {
    /// A failure of `status` saying `message`.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into(), hints: Vec::new() }
    }

    /// The data said no: status 1.
    pub(crate) fn rejected(message: impl Into<String>) -> Failure {
        Failure::new(Status::Rejected, message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        self.hints.iter().try_for_each(|h| f.write_str(h))
    }
}

impl std::error::Error for Failure {}

/// The status `err` ends the command with: a [`Failure`]'s own, wherever it is in the chain;
/// a failed request for any other error.
pub(crate) fn status_of(err: &anyhow::Error) -> Status {
    err.downcast_ref::<Failure>().map_or(Status::Failed, |f| f.status)
}

/// `err` (its whole chain, as `{:#}` prints it) followed by `hint`, keeping its status.
pub(crate) fn with_hint(err: anyhow::Error, hint: &str) -> anyhow::Error {
    let mut failure = Failure::new(status_of(&err), format!("{err:#}"));
    if !hint.is_empty() {
        failure.hints.push(hint.to_owned());
    }
    anyhow!(failure)
}

/// Any library error as the CLI reports it, decided by its type ([`Verdict`]): `Rejected`
/// (status 1) when the data said no, a plain error (status 2) for a request that failed (I/O,
/// a name not found). `context` prefixes the message when not empty; the error's text is
/// escaped for the terminal, and a limit this machine lowered is noted.
pub(crate) fn reported(
    context: &str,
    e: &(impl Verdict + std::fmt::Display + ?Sized),
) -> anyhow::Error {
    reported_with(context, e, "")
}

/// As [`reported`], with `hint` (lines of our own, not escaped) after the message.
fn reported_with(
    context: &str,
    e: &(impl Verdict + std::fmt::Display + ?Sized),
    hint: &str,
) -> anyhow::Error {
    let note = ztensor_cli::limit_note(e.rule());
    let text = cmd::text::shown(&e.to_string()).into_owned();
    let message = if context.is_empty() { text } else { format!("{context}: {text}") };
    let status = if e.is_rejection() { Status::Rejected } else { Status::Failed };
    let mut failure = Failure::new(status, message);
    failure.hints.extend([note, hint.to_owned()].into_iter().filter(|h| !h.is_empty()));
    anyhow!(failure)
}

/// As [`reported`], with the flag that gets past what the target could not hold
/// ([`hinted`], by the error's [`Verdict::refused`]).
pub(crate) fn refusal(
    context: &str,
    e: &(impl Verdict + std::fmt::Display + ?Sized),
) -> anyhow::Error {
    hinted(reported(context, e), e.refused())
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

/// A registry refusal as the CLI reports it, decided by its [`Verdict`] as every error is:
/// the input's path in front unless the message names its file already, and for a zTensor
/// rule error the sign of an append cut short, if the file shows one.
pub(crate) fn open_error(
    path: &Path,
    options: &Options,
    e: ztensor_registry::OpenError,
) -> anyhow::Error {
    // The registry names the input in some refusals (the expansion budget's) already.
    let named = format!("{}: ", path.display());
    let context = if e.names_file() || e.to_string().starts_with(&named) {
        String::new()
    } else {
        shown_path(path)
    };
    let hint = if e.is_ztensor_rule() { torn_hint(path, options) } else { String::new() };
    reported_with(&context, &e, &hint)
}

/// `path` as messages show it (escaped for the terminal).
pub(crate) fn shown_path(path: &Path) -> String {
    cmd::text::shown(&path.display().to_string()).into_owned()
}

/// `error` with the flag that gets past what the target could not hold, by what the library
/// said it refused (`refused`, from the error's type, never its text): `--drop-attributes` for
/// attributes, `--carry-unknown-dtypes` and `--exclude` for tensors of dtypes zTensor lacks.
pub fn hinted(error: anyhow::Error, refused: Option<ztensor_format::Refused>) -> anyhow::Error {
    use ztensor_format::Refused;
    let hint = match refused {
        Some(Refused::FileAttributes | Refused::ObjectAttributes) => {
            "(--drop-attributes discards them)"
        }
        Some(Refused::Dtype) => {
            "(--carry-unknown-dtypes carries safetensors tensors of such dtypes as bytes; \
             --exclude NAME leaves one out)"
        }
        _ => return error,
    };
    with_hint(error, &format!(" {hint}"))
}
