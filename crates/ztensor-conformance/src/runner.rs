//! Runs an implementation that speaks the dump protocol on every fixture, and grades it.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value as Json, json};

use crate::index::Entry;

/// The verdict on one fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted or rejected as expected (and, for accepted files with a golden dump, reporting
    /// the same content).
    Pass,
    /// Accepted a file it must reject, rejected one it must accept, or reported other content.
    Fail(String),
    /// Exited with a status other than 0 and 1, or printed something that is not a dump.
    Crash(String),
    /// An implementation-defined file, accepted (with the golden dump's content).
    Accepted,
    /// An implementation-defined file, rejected.
    Rejected,
}

impl Outcome {
    /// Whether this verdict is a failure or a crash.
    pub fn is_failure(&self) -> bool {
        matches!(self, Outcome::Fail(_) | Outcome::Crash(_))
    }

    /// The verdict in one word: `pass`, `fail`, `crash`, `accepted` or `rejected`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Crash(_) => "crash",
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
        }
    }
}

/// One graded fixture.
#[derive(Debug, Clone)]
pub struct Graded {
    /// The fixture.
    pub entry: Entry,
    /// What the implementation reported: `ok`, a rule identifier, `rejected`, or `crash`.
    pub got: String,
    /// The verdict.
    pub outcome: Outcome,
    /// For expected rejections that were rejected: whether the implementation named our rule.
    pub rule_matched: Option<bool>,
}

/// How long an implementation may take on one file or recipe before it counts as a crash.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `command` to its end, or kills it (and its process group) after [`TIMEOUT`], or as
/// soon as it prints more than `stdout_limit` bytes: `Ok(Err(why))`, a crash.
pub(crate) fn output(
    command: &mut Command,
    stdout_limit: usize,
) -> std::io::Result<std::result::Result<std::process::Output, String>> {
    use crate::implementation::Ran;
    Ok(match crate::implementation::run_to_end(command, TIMEOUT, stdout_limit)? {
        Ran::Ended(status, stdout, stderr) => Ok(std::process::Output { status, stdout, stderr }),
        Ran::Hang => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
        Ran::Flooded(limit) => Err(format!("printed more than {limit} bytes on stdout")),
    })
}

/// Splits a command line on whitespace (no quoting; wrap anything fancier in a script).
pub(crate) fn split(command: &str) -> Result<(String, Vec<String>)> {
    let mut parts = command.split_whitespace().map(str::to_owned);
    let Some(program) = parts.next() else { bail!("empty --impl command") };
    Ok((program, parts.collect()))
}

/// The parts of a dump that comparisons look at (extra keys are ignored), objects sorted by
/// name (bytewise): the order an implementation lists them in is not content.
pub(crate) fn projection(dump: &Json) -> Json {
    let mut objects: Vec<Json> = dump["objects"]
        .as_array()
        .map(|objects| {
            objects
                .iter()
                .map(|o| {
                    let components: serde_json::Map<String, Json> = o["components"]
                        .as_object()
                        .map(|c| {
                            c.iter()
                                .map(|(role, c)| {
                                    (role.clone(), json!({
                                        "dtype": c["dtype"], "type": c["type"], "encoding": c["encoding"],
                                        "decoded_length": c["decoded_length"], "sha256": c["sha256"],
                                    }))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    json!({
                        "name": o["name"], "format": o["format"], "shape": o["shape"], "attributes": o["attributes"],
                        "components": components, "error": o["error"].is_null(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    objects.sort_by(|a, b| {
        let name = |o: &Json| o["name"].as_str().map(|s| s.as_bytes().to_vec()).unwrap_or_default();
        name(a).cmp(&name(b))
    });
    json!({"container": dump["container"], "version": dump["version"], "attributes": dump["attributes"], "objects": objects})
}

/// The first difference between two projections, for the report.
pub(crate) fn difference(expected: &Json, got: &Json) -> String {
    for key in ["container", "version", "attributes"] {
        if expected[key] != got[key] {
            return format!("{key}: expected {}, got {}", expected[key], got[key]);
        }
    }
    let (e, g) = (expected["objects"].as_array(), got["objects"].as_array());
    let (e, g) = (e.map_or(&[][..], Vec::as_slice), g.map_or(&[][..], Vec::as_slice));
    if e.len() != g.len() {
        return format!("{} objects expected, {} reported", e.len(), g.len());
    }
    for (a, b) in e.iter().zip(g) {
        if a != b {
            return format!("object {}: expected {a}, got {b}", a["name"]);
        }
    }
    "content differs".to_owned()
}

/// Runs `command FILE` on one fixture and grades the result.
fn grade(command: &(String, Vec<String>), fixtures: &Path, entry: &Entry) -> Result<Graded> {
    let path = entry.path(fixtures)?;
    let limit = crate::implementation::dump_limit(std::fs::metadata(&path).map_or(0, |m| m.len()));
    let output = output(Command::new(&command.0).args(&command.1).arg(&path), limit)
        .with_context(|| format!("cannot run {}", command.0))?;
    let output = match output {
        Ok(output) => output,
        Err(why) => {
            return Ok(Graded {
                entry: entry.clone(),
                got: "crash".into(),
                outcome: Outcome::Crash(why),
                rule_matched: None,
            });
        }
    };
    let status = output.status.code();
    let dump: Option<Json> = serde_json::from_slice(&output.stdout).ok();
    let defined = entry.implementation_defined();
    let expect_ok = entry.expect == "ok" || defined;
    let graded = |got: String, outcome: Outcome, rule_matched: Option<bool>| Graded {
        entry: entry.clone(),
        got,
        outcome,
        rule_matched,
    };
    let well_formed = dump.as_ref().is_some_and(|d| d["dump"] == "ztensor-dump/1");
    Ok(match (status, dump) {
        (Some(0), Some(dump)) if well_formed => {
            if !expect_ok {
                graded(
                    "ok".into(),
                    Outcome::Fail(format!("accepted a file that breaks {}", entry.expect)),
                    None,
                )
            } else {
                let golden = crate::index::resolve(fixtures, &crate::dump_path(&entry.file))?;
                match std::fs::read(&golden)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Json>(&b).ok())
                {
                    Some(golden) if projection(&golden) != projection(&dump) => graded(
                        "ok".into(),
                        Outcome::Fail(difference(&projection(&golden), &projection(&dump))),
                        None,
                    ),
                    // Content is never taken on trust: an accepted file has its golden dump.
                    None => graded(
                        "ok".into(),
                        Outcome::Fail(format!(
                            "no golden dump {} to compare with",
                            golden.display()
                        )),
                        None,
                    ),
                    Some(_) if defined => graded("ok".into(), Outcome::Accepted, None),
                    Some(_) => graded("ok".into(), Outcome::Pass, None),
                }
            }
        }
        (Some(1), Some(dump)) if well_formed => {
            let kind = dump["error"]["kind"].as_str().unwrap_or("rejected").to_owned();
            if defined {
                graded(kind, Outcome::Rejected, None)
            } else if expect_ok {
                let message = dump["error"]["message"].as_str().unwrap_or("").to_owned();
                graded(kind, Outcome::Fail(format!("rejected a valid file: {message}")), None)
            } else {
                let matched = kind == entry.expect;
                graded(kind, Outcome::Pass, Some(matched))
            }
        }
        (status, _) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let why =
                format!("exit status {status:?}, {}", stderr.lines().next().unwrap_or("no output"));
            graded("crash".into(), Outcome::Crash(why), None)
        }
    })
}

/// Grades `command` on every entry.
///
/// # Errors
/// When the command cannot be started at all, and (before anything is run) when an entry's
/// path, or its golden dump's, leaves `fixtures` ([`crate::index::resolve`]).
pub fn run(command: &str, fixtures: &Path, entries: &[Entry]) -> Result<Vec<Graded>> {
    let command = split(command)?;
    // Every path is checked before anything is run: an index that points outside the
    // fixtures directory is refused whole, naming the entry.
    for e in entries {
        e.path(fixtures)?;
        crate::index::resolve(fixtures, &crate::dump_path(&e.file))?;
    }
    entries.iter().map(|e| grade(&command, fixtures, e)).collect()
}

/// Totals: (passed, failed, crashed, rules matched, rejections graded for rules).
/// Implementation-defined files count in none of them: see [`defined_totals`].
pub fn totals(results: &[Graded]) -> (usize, usize, usize, usize, usize) {
    let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
    let crashed = results.iter().filter(|r| matches!(r.outcome, Outcome::Crash(_))).count();
    let failed = results.iter().filter(|r| matches!(r.outcome, Outcome::Fail(_))).count();
    let rules = results.iter().filter_map(|r| r.rule_matched).collect::<Vec<_>>();
    (passed, failed, crashed, rules.iter().filter(|&&m| m).count(), rules.len())
}

/// Implementation-defined files: (accepted, rejected). Those that failed (accepted with other
/// content) or crashed count in [`totals`].
pub fn defined_totals(results: &[Graded]) -> (usize, usize) {
    let accepted = results.iter().filter(|r| r.outcome == Outcome::Accepted).count();
    let rejected = results.iter().filter(|r| r.outcome == Outcome::Rejected).count();
    (accepted, rejected)
}

/// A plain-text table and totals.
pub fn table(results: &[Graded]) -> String {
    let mut out = String::new();
    let width = results.iter().map(|r| r.entry.file.len()).max().unwrap_or(7).max(7);
    let _ = writeln!(out, "{:<width$}  {:<28}  {:<28}  RESULT", "FIXTURE", "EXPECTED", "GOT");
    for r in results {
        let result = match &r.outcome {
            Outcome::Pass if r.rule_matched == Some(false) => "pass (other rule)".to_owned(),
            Outcome::Pass => "pass".to_owned(),
            Outcome::Fail(why) => format!("FAIL: {why}"),
            Outcome::Crash(why) => format!("CRASH: {why}"),
            Outcome::Accepted => "accepted (implementation-defined)".to_owned(),
            Outcome::Rejected => "rejected (implementation-defined)".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:<28}  {:<28}  {result}",
            r.entry.file, r.entry.expect, r.got
        );
    }
    let (passed, failed, crashed, matched, graded) = totals(results);
    let (accepted, rejected) = defined_totals(results);
    let _ = writeln!(
        out,
        "\n{} fixtures: {passed} passed, {failed} failed, {crashed} crashed; rejections naming our rule: {matched}/{graded}; implementation-defined: {accepted} accepted, {rejected} rejected",
        results.len()
    );
    out
}

/// The report as JSON.
pub fn to_json(results: &[Graded]) -> Json {
    let (passed, failed, crashed, matched, graded) = totals(results);
    let (accepted, rejected) = defined_totals(results);
    let rows: Vec<Json> = results
        .iter()
        .map(|r| {
            let detail = match &r.outcome {
                Outcome::Fail(why) | Outcome::Crash(why) => Some(why.clone()),
                _ => None,
            };
            json!({"fixture": r.entry.file, "version": r.entry.version, "expected": r.entry.expect, "got": r.got,
                   "result": r.outcome.word(), "detail": detail, "rule_matched": r.rule_matched,
                   "producer": r.entry.producer})
        })
        .collect();
    json!({"report": "ztensor-conformance/1", "totals": {"fixtures": results.len(), "passed": passed, "failed": failed,
           "crashed": crashed, "rules_matched": matched, "rules_graded": graded,
           "implementation_defined": {"accepted": accepted, "rejected": rejected}}, "results": rows})
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The report as JUnit XML (one test case per fixture, one suite per version).
pub fn to_junit(results: &[Graded]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ztensor-conformance\">\n",
    );
    let mut versions: Vec<&str> = results.iter().map(|r| r.entry.version.as_str()).collect();
    versions.dedup();
    versions.sort_unstable();
    versions.dedup();
    for version in versions {
        let cases: Vec<&Graded> = results.iter().filter(|r| r.entry.version == version).collect();
        let failures = cases.iter().filter(|r| matches!(r.outcome, Outcome::Fail(_))).count();
        let errors = cases.iter().filter(|r| matches!(r.outcome, Outcome::Crash(_))).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">",
            xml_escape(version),
            cases.len()
        );
        for r in cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\">",
                xml_escape(version),
                xml_escape(&r.entry.file)
            );
            match &r.outcome {
                Outcome::Pass => {}
                Outcome::Accepted | Outcome::Rejected => {
                    let _ = write!(
                        out,
                        "<system-out>implementation-defined: {}</system-out>",
                        r.outcome.word()
                    );
                }
                Outcome::Fail(why) => {
                    let _ = write!(out, "<failure message=\"{}\"/>", xml_escape(why));
                }
                Outcome::Crash(why) => {
                    let _ = write!(out, "<error message=\"{}\"/>", xml_escape(why));
                }
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
