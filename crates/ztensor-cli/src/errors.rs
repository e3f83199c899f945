//! How errors reach the user: `Rejected` (the data said no, status 1) or a failed request
//! (status 2), decided by each library error's `is_rejection`, with the file and context named.

use std::path::Path;

use anyhow::anyhow;
use ztensor_format::{Options, Verdict};
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
    let message = if context.is_empty() {
        format!("{text}{note}{hint}")
    } else {
        format!("{context}: {text}{note}{hint}")
    };
    if e.is_rejection() { anyhow!(Rejected(message)) } else { anyhow!(message) }
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
            "(--carry-unknown-dtypes carries such tensors as bytes; --exclude NAME leaves one out)"
        }
        _ => return error,
    };
    let message = format!("{error:#} {hint}");
    if error.downcast_ref::<Rejected>().is_some() {
        anyhow!(Rejected(message))
    } else {
        anyhow!(message)
    }
}
