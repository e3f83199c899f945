//! The `fuzz` command's options and the command itself.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use ztensor_format::Version;

use crate::writer_check::Target;

use super::config::{Budget, Config};
use super::ours::InProcess;
use super::report::{table, to_json, to_junit};
use super::run::{run, run_in_process};

/// The options of `ztensor-conformance fuzz`, as the command line gives them.
#[derive(Debug, Clone, clap::Args)]
pub struct FuzzArgs {
    /// The implementation: a reader (`COMMAND FILE` prints a conformance dump; `COMMAND
    /// --serve` is tried first), or with --writer a writer (`COMMAND RECIPE OUT`). In process,
    /// only its name in the reports.
    #[arg(long = "impl", value_name = "COMMAND")]
    pub implementation: String,
    /// Fuzz a writer: each case's content is given it as a recipe, and what it writes is
    /// graded by the writer check (writes-invalid, crash, hang; exit 3, cannot write this, is
    /// no divergence).
    #[arg(long)]
    pub writer: bool,
    /// Make cases for N seconds [default: 60].
    #[arg(long, value_name = "N", value_parser = non_negative, conflicts_with = "runs")]
    pub seconds: Option<f64>,
    /// Make N cases (instead of --seconds).
    #[arg(long, value_name = "N")]
    pub runs: Option<u64>,
    /// Case i is made from seed S + i, so `--seed S+i --runs 1` makes it again.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Write each distinct divergence, reduced, to DIR/CLASS/N.zt with N.json, beside
    /// DIR/summary.json, summary.txt and junit.xml. DIR is created.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write into an --out DIR that already holds files (emptied once the implementation has
    /// answered).
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Only cases of this version: 0.1, 1.1, 1.2, or 2 (zTensor 2: its own files, changed as
    /// zTensor 2, graded against this project's zTensor 2 reader); repeatable [default: 0.1,
    /// 1.1 and 1.2].
    #[arg(long = "version", value_name = "V", value_parser = version)]
    pub versions: Vec<Target>,
    /// Seconds the implementation has for one file before its process group is killed and
    /// the case is a hang [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = positive)]
    pub timeout: Option<f64>,
    /// Seconds the reduction of each distinct divergence may take.
    #[arg(long, value_name = "N", value_parser = non_negative, default_value_t = 60.0)]
    pub minimize_seconds: f64,
    /// Start the implementation once per file (`COMMAND FILE`) instead of asking for the
    /// persistent protocol (`COMMAND --serve`).
    #[arg(long)]
    pub process_per_file: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// A number of seconds: finite, 0 or more.
fn non_negative(text: &str) -> std::result::Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| "not a number of 0 or more".to_owned())
}

/// A number of seconds above 0.
fn positive(text: &str) -> std::result::Result<f64, String> {
    non_negative(text)?;
    text.parse::<f64>().ok().filter(|n| *n > 0.0).ok_or_else(|| "must be above 0".to_owned())
}

/// A version cases may have.
fn version(text: &str) -> std::result::Result<Target, String> {
    match text {
        "0.1" => Ok(Target::Zt(Version::V0_1)),
        "1.1" => Ok(Target::Zt(Version::V1_1)),
        "1.2" => Ok(Target::Zt(Version::V1_2)),
        "2" => Ok(Target::Zt2),
        _ => Err("0.1, 1.1, 1.2 or 2".to_owned()),
    }
}

impl FuzzArgs {
    /// The run these options ask for; `in_process` when the implementation is a call in this
    /// process, for which `--timeout`, `--process-per-file` and `--writer` mean nothing.
    ///
    /// # Errors
    /// One of those options given for an implementation in this process.
    pub fn config(&self, in_process: bool) -> Result<Config> {
        if in_process {
            let given = [
                ("--timeout", self.timeout.is_some()),
                ("--process-per-file", self.process_per_file),
                ("--writer", self.writer),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                bail!("{flag} does not apply to an implementation in this process");
            }
        }
        let mut config = Config::new(&self.implementation);
        config.budget = match (self.seconds, self.runs) {
            (_, Some(n)) => Budget::Runs(n),
            (Some(s), None) => Budget::Seconds(s),
            (None, None) => config.budget,
        };
        config.seed = self.seed;
        config.versions.clone_from(&self.versions);
        if let Some(seconds) = self.timeout {
            config.timeout = Duration::from_secs_f64(seconds);
        }
        config.minimize_seconds = self.minimize_seconds;
        config.out.clone_from(&self.out);
        config.force = self.force;
        config.serve = !self.process_per_file;
        config.writer = self.writer;
        Ok(config)
    }
}

/// `ztensor-conformance fuzz ARGS`, for a binary of its own: `ARGS` parsed (as the `fuzz`
/// command's options, [`FuzzArgs`]; `--help` prints them), then [`fuzz`].
///
/// # Errors
/// Usage errors (with clap's message, which names the argument), and [`fuzz`]'s.
pub fn command_line(args: &[String], in_process: Option<&mut dyn InProcess>) -> Result<bool> {
    /// The `fuzz` command alone.
    #[derive(clap::Parser)]
    #[command(name = "fuzz")]
    struct Fuzz {
        #[command(flatten)]
        args: FuzzArgs,
    }
    let parsed = <Fuzz as clap::Parser>::try_parse_from(
        std::iter::once("fuzz".to_owned()).chain(args.iter().cloned()),
    );
    match parsed {
        Ok(parsed) => fuzz(&parsed.args, in_process),
        Err(e) if !e.use_stderr() => {
            // --help: what was asked for, not an error.
            print!("{}", e.render());
            Ok(true)
        }
        Err(e) => bail!("{}", e.render().to_string().trim_end()),
    }
}

/// The `fuzz` command: the run `args` ask for made, its table (or JSON with `--json`)
/// printed; `Ok(true)` when nothing diverged. With `in_process`, that implementation is
/// fuzzed in this process ([`run_in_process`]; `--impl` then only names it, and `--timeout`,
/// `--process-per-file` and `--writer` are refused): for a Rust implementation's own binary
/// (the reference adapters' `--fuzz-in-process`).
///
/// # Errors
/// [`FuzzArgs::config`]'s, and [`run`]'s.
pub fn fuzz(args: &FuzzArgs, in_process: Option<&mut dyn InProcess>) -> Result<bool> {
    let config = args.config(in_process.is_some())?;
    let quiet = args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = |cases, found| {
        if !quiet {
            eprint!("\r{cases} cases, {found} divergences");
        }
    };
    let report = match in_process {
        Some(implementation) => run_in_process(&config, implementation, progress)?,
        None => run(&config, progress)?,
    };
    if !quiet {
        eprintln!();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report))?);
    } else {
        print!("{}", table(&report));
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, to_junit(&report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // An implementation that breaks the protocol is a usage error (status 2), as at its
    // start: its findings were read again one process a file, and stand.
    if let Some(first) = report.protocol_violations.first() {
        bail!(
            "{:?} {first} ({} time{} in all): fix it, or use --process-per-file",
            report.command,
            report.protocol_violations.len(),
            if report.protocol_violations.len() == 1 { "" } else { "s" }
        );
    }
    Ok(report.findings.is_empty())
}
