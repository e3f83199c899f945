//! A run's outcome: its findings, and the report as a table, JSON and JUnit XML, written beside
//! the findings.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value as Json, json};

use super::classify::{Class, Divergence};
use super::config::Config;
use super::judge::Judged;
use super::recipe::Recipe;
use crate::writer_check::Target;

/// One reported divergence, reduced.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Its class and key.
    pub divergence: Divergence,
    /// What differed, in words.
    pub detail: String,
    /// The reduced case.
    pub recipe: Recipe,
    /// Which case of the run found it first.
    pub case: u64,
    /// Seconds from the run's start to the first case of this divergence.
    pub found_after: f64,
    /// How many cases gave this divergence (before reduction).
    pub hits: u64,
    /// The verdicts on the reduced case.
    pub judged: Judged,
    /// Where it was written, if it was.
    pub written: Option<PathBuf>,
}

/// A run's outcome.
#[derive(Debug)]
pub struct Report {
    /// Cases made and read (or written).
    pub cases: u64,
    /// Seconds the run took (reduction included).
    pub seconds: f64,
    /// Seconds spent making and reading cases (reduction not included).
    pub fuzzing_seconds: f64,
    /// Whether the implementation was read through `--serve`.
    pub persistent: bool,
    /// Processes the implementation was started as.
    pub processes: u64,
    /// Whether the implementation was called in this process
    /// ([`run_in_process`](super::run_in_process)).
    pub in_process: bool,
    /// The distinct divergences, reduced, in the order found.
    pub findings: Vec<Finding>,
    /// The run's settings.
    pub seed: u64,
    /// The command.
    pub command: String,
    /// Whether the implementation was fuzzed as a writer.
    pub writer: bool,
    /// The versions asked for (none: 0.1, 1.1 and 1.2).
    pub versions: Vec<Target>,
    /// Whether a signal stopped the run ([`crate::implementation::stop_all`]): the findings
    /// are those found so far, unreduced.
    pub interrupted: bool,
    /// Each time the implementation broke the `--serve` protocol (a file answered twice,
    /// an answer for another file): its fault, not a finding; the file asked was read again
    /// by a process of its own.
    pub protocol_violations: Vec<String>,
}

/// Whether `out` can take the findings: missing, empty, or (with `force`) to be replaced.
pub(super) fn check_out(out: &Path, force: bool) -> Result<bool> {
    if !out.exists() {
        return Ok(false);
    }
    let busy = std::fs::read_dir(out)
        .with_context(|| format!("{} is not a directory", out.display()))?
        .next()
        .is_some();
    if busy && !force {
        bail!("{} exists and is not empty (--force replaces what it holds)", out.display());
    }
    Ok(busy)
}

/// Makes the output directory: created when missing; the findings, summaries and reports of
/// an earlier run removed from one that holds them (with `force`, [`check_out`]).
pub(super) fn prepare_out(out: &Path, force: bool) -> Result<()> {
    if check_out(out, force)? {
        for class in Class::ALL {
            let dir = out.join(class.name());
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        for file in ["summary.json", "summary.txt", "junit.xml"] {
            let _ = std::fs::remove_file(out.join(file));
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

/// ` --version V` for each version asked for: what makes a seed's case again.
fn version_args(versions: &[Target]) -> String {
    versions.iter().map(|v| format!(" --version {v}")).collect()
}

fn finding_json(f: &Finding, command: &str, writer: bool, versions: &[Target]) -> Json {
    let file = f.written.as_ref().map(|p| p.display().to_string());
    let recipe_file =
        f.written.as_ref().map(|p| p.with_extension("recipe.json").display().to_string());
    let reproduce = if writer {
        recipe_file.as_ref().map(|r| format!("{command} {r} OUT"))
    } else {
        file.as_ref().map(|p| format!("{command} {p}"))
    };
    let mode = if writer { " --writer" } else { "" };
    json!({
        "class": f.divergence.class.name(),
        "key": f.divergence.key,
        "detail": f.detail,
        "case": f.case,
        "found_after_seconds": f.found_after,
        "hits": f.hits,
        "recipe": f.recipe,
        "theirs": f.judged.theirs,
        "ours": f.judged.ours,
        "file": file,
        "writer_recipe": if writer { recipe_file } else { None },
        "reproduce": reproduce,
        "regenerate": format!(
            "ztensor-conformance fuzz{mode} --impl '{command}' --seed {} --runs 1{}",
            f.recipe.seed,
            version_args(versions)
        ),
    })
}

pub(super) fn write_finding(out: &Path, n: usize, f: &Finding, config: &Config) -> Result<PathBuf> {
    let dir = out.join(f.divergence.class.name());
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{n}.zt"));
    std::fs::write(&file, &f.judged.file)?;
    if let Some(recipe) = &f.judged.writer_recipe {
        std::fs::write(
            file.with_extension("recipe.json"),
            serde_json::to_string_pretty(recipe)? + "\n",
        )?;
    }
    let mut with_path = f.clone();
    with_path.written = Some(file.clone());
    std::fs::write(
        dir.join(format!("{n}.json")),
        serde_json::to_string_pretty(&finding_json(
            &with_path,
            &config.command,
            config.writer,
            &config.versions,
        ))? + "\n",
    )?;
    Ok(file)
}

/// Files a second through the implementation, over the fuzzing part of the run.
pub fn rate(report: &Report) -> f64 {
    report.cases as f64 / report.fuzzing_seconds.max(1e-9)
}

/// The report as a table: one line per finding, then totals by class.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let mode = if report.in_process {
        "in this process".to_owned()
    } else {
        format!(
            "{}; {} process{}",
            if report.persistent { "persistent (--serve)" } else { "a process per file" },
            report.processes,
            if report.processes == 1 { "" } else { "es" },
        )
    };
    let _ = writeln!(
        out,
        "{} cases in {:.1} s ({:.0} files/s, {mode}), seed {}",
        report.cases,
        report.fuzzing_seconds,
        rate(report),
        report.seed
    );
    if report.interrupted {
        let _ = writeln!(out, "stopped by a signal: the findings so far, not reduced");
    }
    if let Some(first) = report.protocol_violations.first() {
        let _ = writeln!(
            out,
            "the implementation {first} ({} time{} in all; each file was read again by a \
             process of its own)",
            report.protocol_violations.len(),
            if report.protocol_violations.len() == 1 { "" } else { "s" }
        );
    }
    if report.findings.is_empty() {
        let _ = writeln!(out, "no divergence");
        return out;
    }
    let _ =
        writeln!(out, "\n{:<16}  {:>5}  {:>8}  {:<40}  DETAIL", "CLASS", "HITS", "FOUND S", "FILE");
    for f in &report.findings {
        let file = f.written.as_ref().map_or_else(
            || format!("--seed {} --runs 1{}", f.recipe.seed, version_args(&report.versions)),
            |p| p.display().to_string(),
        );
        let detail: String = f.detail.chars().take(100).collect();
        let _ = writeln!(
            out,
            "{:<16}  {:>5}  {:>8.2}  {:<40}  {detail}",
            f.divergence.class.name(),
            f.hits,
            f.found_after,
            file
        );
    }
    let counts: Vec<String> = Class::ALL
        .iter()
        .filter_map(|&c| {
            let n = report.findings.iter().filter(|f| f.divergence.class == c).count();
            (n > 0).then(|| format!("{} {n}", c.name()))
        })
        .collect();
    let _ =
        writeln!(out, "\n{} distinct divergences: {}", report.findings.len(), counts.join(", "));
    out
}

/// The report as JSON.
pub fn to_json(report: &Report) -> Json {
    let by_class: serde_json::Map<String, Json> = Class::ALL
        .iter()
        .map(|&c| {
            let n = report.findings.iter().filter(|f| f.divergence.class == c).count();
            (c.name().to_owned(), json!(n))
        })
        .collect();
    json!({
        "report": "ztensor-fuzz/1",
        "command": report.command,
        "seed": report.seed,
        "cases": report.cases,
        "seconds": report.seconds,
        "files_per_second": rate(report),
        "persistent": report.persistent,
        "processes": report.processes,
        "in_process": report.in_process,
        "by_class": by_class,
        "writer": report.writer,
        "versions": report.versions.iter().map(|v| v.name()).collect::<Vec<_>>(),
        "interrupted": report.interrupted,
        "protocol_violations": report.protocol_violations,
        "findings": report
            .findings
            .iter()
            .map(|f| finding_json(f, &report.command, report.writer, &report.versions))
            .collect::<Vec<_>>(),
    })
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The report as JUnit XML: one test case per class, failing with each finding.
pub fn to_junit(report: &Report) -> String {
    let failures = report.findings.len();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ztensor-fuzz\">\n  \
         <testsuite name=\"differential\" tests=\"{}\" failures=\"{failures}\">\n",
        Class::ALL.len()
    );
    for class in Class::ALL {
        let _ = write!(out, "    <testcase classname=\"differential\" name=\"{}\">", class.name());
        for f in report.findings.iter().filter(|f| f.divergence.class == class) {
            let _ = write!(
                out,
                "<failure message=\"{}\"/>",
                xml_escape(&format!("{} (seed {})", f.detail, f.recipe.seed))
            );
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
