//! The command line: clap's definitions of the commands and their options.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ztensor_conformance::difffuzz::FuzzArgs;

/// Grades zTensor (0.1, 1.1, 1.2, 2) and TensorBuffers implementations as readers (`run`) and
/// as writers (`write-check`), fuzzes them against this project's readers (`fuzz`), and speaks
/// both protocols for this project's own implementation (`dump`, `write`), so that it is graded
/// through the same door as anyone else's.
///
/// A COMMAND is split on whitespace; wrap anything more elaborate in a script.
///
/// Example: ztensor-conformance run --impl 'ztensor dump --json'
///
/// Example: ztensor-conformance write-check --impl 'my-writer' --reader ours='ztensor-conformance dump'
///
/// Example: ztensor-conformance fuzz --impl 'my-reader' --seconds 600 --out findings/
///
/// Exit status: 0 when nothing failed; 1 when an implementation failed, crashed or diverged;
/// 2 on usage errors and when the run itself fails (I/O, an implementation that cannot be
/// started).
#[derive(Debug, Parser)]
#[command(name = "ztensor-conformance", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Grade a reader: run `COMMAND FILE` on every fixture of the corpus (the one compiled into
    /// this binary, with the frozen files of other producers; or --fixtures DIR) and grade it.
    ///
    /// A file expected to be accepted must exit 0 with a dump reporting the content of the
    /// golden dump beside it; a file expected to be rejected must exit 1 with a dump whose error
    /// names a rule (a matching rule identifier is counted apart); implementation-defined files
    /// are reported as accepted or rejected (accepting one with other content is still a
    /// failure); any other exit status is a crash. Exit status 0 when nothing failed or crashed.
    ///
    /// Example: ztensor-conformance run --impl 'ztensor dump --json'
    ///
    /// Example: ztensor-conformance run --impl 'python3 my_adapter.py' --only v1.2/ --junit report.xml
    Run {
        /// The reader: `COMMAND FILE` prints the conformance dump of FILE and exits 0 (accepted)
        /// or 1 (rejected).
        #[arg(long = "impl", value_name = "COMMAND")]
        implementation: String,
        /// Grade against the fixtures DIR/index.toml lists instead of the corpus compiled into
        /// this binary.
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// Print a JSON report (`ztensor-conformance/1`) instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write a JUnit XML report to FILE.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Grade only the fixtures whose path starts with PREFIX (e.g. `v1.2/`, `v0.1/reject/`).
        #[arg(long, value_name = "PREFIX")]
        only: Option<String>,
    },
    /// Grade a writer: run `COMMAND RECIPE.json OUT` for every recipe (exit 0: written; exit
    /// 3: this recipe cannot be written by it) and grade what it wrote strictly.
    ///
    /// Every rule, zero padding, digests, and the recipe's content are checked; each --reader
    /// (dump protocol) is then asked to read the file. Exit status 0 when every recipe was
    /// written validly or declared unsupported.
    ///
    /// Example: ztensor-conformance write-check --impl 'my-writer' --reader ours='ztensor-conformance dump'
    WriteCheck {
        /// The writer: `COMMAND RECIPE.json OUT` writes OUT from the recipe.
        #[arg(long = "impl", value_name = "COMMAND")]
        implementation: String,
        /// A reader (dump protocol) that reads every file written, reported under NAME
        /// (repeatable).
        #[arg(long = "reader", value_name = "NAME=COMMAND", value_parser = name_and_command)]
        readers: Vec<(String, String)>,
        /// Leave the recipes and files in DIR [default: a new private temporary directory].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print a JSON report (`ztensor-writer-check/1`) instead of a table.
        #[arg(long)]
        json: bool,
        /// Only the recipes whose name starts with PREFIX (e.g. `v1.2/`).
        #[arg(long, value_name = "PREFIX")]
        only: Option<String>,
    },
    /// Write every recipe (`ztensor-recipe/1` JSON) under DIR.
    ///
    /// Example: ztensor-conformance recipes recipes/
    Recipes {
        /// Where the recipes go (created).
        dir: PathBuf,
    },
    /// Grade this implementation (lenient and strict reader, writer) and each reference
    /// adapter given, and write DIR/matrix.json and DIR/MATRIX.md.
    ///
    /// With --check, grade this implementation only and fail when its cells differ from
    /// DIR/matrix.json or MATRIX.md is not the rendering of matrix.json. With --findings, only
    /// the fuzz section is made again, from DIR/findings/<id>/summary.json (it is kept when the
    /// matrix is made again).
    ///
    /// Example: ztensor-conformance matrix crates/ztensor-conformance --check
    Matrix {
        /// The directory of matrix.json and MATRIX.md.
        dir: PathBuf,
        /// Check the committed matrix instead of writing it.
        #[arg(long, conflicts_with = "references")]
        check: bool,
        /// Only write the fuzz findings under DIR/findings into the committed matrix.
        #[arg(long, conflicts_with_all = ["check", "references"])]
        findings: bool,
        /// A reference adapter to grade: VERSION 0.1.0, 1.1.1, 1.2.3 or 2.1.1, PATH its binary
        /// (repeatable).
        #[arg(long = "reference", value_name = "VERSION=PATH", value_parser = version_and_path)]
        references: Vec<(String, String)>,
    },
    /// Run each producer's writer on every recipe and add what passes the writer check under
    /// DIR/v<version>/<ID>/, with golden dumps, to DIR/index.toml (with SHA-256).
    ///
    /// Each producer's writer runs as `PATH --write`, and `PATH --append` where it has one.
    /// Files already listed are never written again.
    ///
    /// Example: ztensor-conformance freeze fixtures/producers --producer 'reference-1.2.3=ztensor 1.2.3 (crates.io)=path/to/adapter'
    Freeze {
        /// The directory of the frozen files and their index.
        dir: PathBuf,
        /// A producer: its ID, its NAME in the index and the PATH of its adapter (repeatable).
        #[arg(long = "producer", value_name = "ID=NAME=PATH", value_parser = producer)]
        producers: Vec<(String, String, String)>,
    },
    /// Differential fuzzing: make files from a seed, have COMMAND read each and compare its
    /// verdict and dump with this project's strict and lenient readers.
    ///
    /// Cases are generated models of zTensor 0.1, 1.1 and 1.2, their manifests and bytes
    /// changed; with --version 2, zTensor 2 files (the generator's models written as zTensor
    /// 2, and the corpus's zTensor 2 files), their manifests changed as zTensor 2 trees (types,
    /// layouts, encodings, digests, blobs, shards, deterministic CBOR) and their blobs, padding
    /// and footer as bytes, graded against this project's zTensor 2 reader. COMMAND
    /// reads them through `COMMAND --serve` when it speaks it and --process-per-file is not
    /// given, else as `COMMAND FILE`. Divergences: crash (another exit, a signal, no dump), hang
    /// (no answer within --timeout; its process group is killed), accepts-invalid (both of ours
    /// reject), rejects-valid (our strict reader accepts), misreads (both accept, the content
    /// differs). What the specs leave to readers is never a divergence. Each distinct
    /// divergence is reduced (for at most --minimize-seconds each) and, with --out, written to
    /// DIR/<class>/<n>.zt with <n>.json (verdicts, recipe, the command that reproduces it),
    /// beside DIR/summary.json, summary.txt and junit.xml. Default: 60 s from seed 0. Exit
    /// status 0 when nothing diverged, 1 when something did, 2 on usage errors.
    ///
    /// Example: ztensor-conformance fuzz --impl 'my-reader' --seconds 120 --junit fuzz.xml
    ///
    /// Example: ztensor-conformance fuzz --impl 'my-zt2-reader' --version 2 --seconds 120
    ///
    /// Example: ztensor-conformance fuzz --writer --impl 'my-writer' --runs 500 --out findings/
    Fuzz(FuzzArgs),
    /// This project's reader in the dump protocol (lenient, or --strict): print FILE's dump and
    /// exit 0 (accepted) or 1 (rejected).
    ///
    /// With --serve, the persistent form: one path a line on stdin, one dump a line on stdout
    /// (a rejected file's dump has a top-level `error`).
    ///
    /// Example: ztensor-conformance dump --strict fixtures/v1.2/valid/zstd.zt
    Dump {
        /// Enforce the strict-only rules too.
        #[arg(long)]
        strict: bool,
        /// Answer paths read from stdin, a dump a line, until stdin ends.
        #[arg(long, conflicts_with = "file")]
        serve: bool,
        /// Print JSON (the only format; accepted as `ztensor dump --json` accepts it).
        #[arg(long)]
        json: bool,
        /// The file to dump.
        #[arg(required_unless_present = "serve")]
        file: Option<PathBuf>,
    },
    /// This project's writer in the writer protocol: write OUT from RECIPE (exit 3: the
    /// recipe's version cannot express it).
    ///
    /// Example: ztensor-conformance write recipes/v1.2/zstd.json out.zt
    Write {
        /// The recipe (`ztensor-recipe/1` JSON).
        recipe: PathBuf,
        /// The file to write.
        out: PathBuf,
    },
}

/// `NAME=COMMAND`, split at the first `=`.
fn name_and_command(text: &str) -> Result<(String, String), String> {
    let (name, command) = text.split_once('=').ok_or("expected NAME=COMMAND")?;
    Ok((name.to_owned(), command.to_owned()))
}

/// `VERSION=PATH`, split at the first `=`.
fn version_and_path(text: &str) -> Result<(String, String), String> {
    let (version, path) = text.split_once('=').ok_or("expected VERSION=PATH")?;
    Ok((version.to_owned(), path.to_owned()))
}

/// `ID=NAME=PATH`, split at the first two `=`.
fn producer(text: &str) -> Result<(String, String, String), String> {
    let mut parts = text.splitn(3, '=');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(id), Some(name), Some(path)) => Ok((id.to_owned(), name.to_owned(), path.to_owned())),
        _ => Err("expected ID=NAME=PATH".to_owned()),
    }
}
