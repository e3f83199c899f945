//! The writer check: recipes an implementation writes files from, and their grading.
//!
//! A recipe (`ztensor-recipe/1`, JSON) says what one file holds: its version, file attributes,
//! and objects with their format, shape, attributes, encoding, digest and every component's
//! dtype, logical type and little-endian bytes (hex). The implementation under test is run as
//! `COMMAND RECIPE.json OUT` and must write OUT (exit 0), or say it cannot write this recipe
//! (exit 3, for a version or feature it lacks); any other status is a crash.
//!
//! What it wrote is graded strictly: it must open under strict validation as the recipe's
//! version, every object must decode with its digests verified and pass the data rules, every
//! byte outside the blobs and the manifest must be zero, and the content must be the recipe's
//! (names, formats, shapes, attributes, and each component's dtype, logical type, encoding,
//! digest algorithm and bytes). Readers (ours and others') are then asked to read the file.

mod grade;
mod recipe;
mod set;
mod write;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::{Value as Json, json};

pub use grade::check;
pub use recipe::{RECIPE, Recipe, RecipeComponent, RecipeObject, Target, UNSUPPORTED};
pub use set::recipes;
pub use write::write;

/// A writer's verdict on one recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Wrote a file that passes every check.
    Pass,
    /// Said it cannot write this recipe (exit 3).
    Unsupported(String),
    /// Wrote a file that breaks a rule or holds other content.
    Fail(String),
    /// Exited otherwise, or wrote nothing.
    Crash(String),
}

impl Written {
    /// The verdict in one word.
    pub fn word(&self) -> &'static str {
        match self {
            Written::Pass => "pass",
            Written::Unsupported(_) => "unsupported",
            Written::Fail(_) => "fail",
            Written::Crash(_) => "crash",
        }
    }
}

/// How a reader took a written file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Accepted, reporting the recipe's content.
    Accepts,
    /// Rejected it.
    Rejects,
    /// Accepted it, reporting other content.
    Misreads,
    /// Crashed on it.
    Crashes,
}

impl Read {
    /// The verdict in one word.
    pub fn word(&self) -> &'static str {
        match self {
            Read::Accepts => "accepts",
            Read::Rejects => "rejects",
            Read::Misreads => "misreads",
            Read::Crashes => "crashes",
        }
    }
}

/// One recipe, written and graded.
#[derive(Debug, Clone)]
pub struct WriterGraded {
    /// The recipe.
    pub recipe: Recipe,
    /// The verdict.
    pub written: Written,
    /// Where the file is (when one was written).
    pub file: Option<std::path::PathBuf>,
    /// How each reader took the file: (reader name, verdict).
    pub readers: Vec<(String, Read)>,
}

/// Reads what a writer wrote for `recipe`: `Ok(Err(why))`, and nothing read, when the file is
/// larger than the recipe can need ([`Recipe::size_limit`]).
///
/// # Errors
/// When the file cannot be read.
pub fn read_written(
    recipe: &Recipe,
    file: &Path,
) -> std::io::Result<std::result::Result<Vec<u8>, String>> {
    use std::io::Read as _;
    let limit = recipe.size_limit();
    let mut bytes = Vec::new();
    std::fs::File::open(file)?.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Ok(Err(format!(
            "wrote more than {limit} bytes, more than any file of this recipe can need"
        )));
    }
    Ok(Ok(bytes))
}

/// How the reader `command` (dump protocol) takes `file`, against `recipe`.
pub fn read_with(command: &str, recipe: &Recipe, file: &Path) -> Result<Read> {
    let (program, args) = crate::runner::split(command)?;
    let limit = crate::implementation::dump_limit(std::fs::metadata(file).map_or(0, |m| m.len()));
    let Ok(output) = crate::runner::output(Command::new(&program).args(&args).arg(file), limit)
        .with_context(|| format!("cannot run {program}"))?
    else {
        return Ok(Read::Crashes);
    };
    let dump: Option<Json> = serde_json::from_slice(&output.stdout).ok();
    let well_formed = dump.as_ref().is_some_and(|d| d["dump"] == "ztensor-dump/1");
    Ok(match (output.status.code(), dump) {
        (Some(0), Some(dump)) if well_formed => {
            let p = crate::runner::projection(&dump);
            let got = json!({"container": p["container"], "attributes": p["attributes"], "objects": p["objects"]});
            if got == recipe.expected() { Read::Accepts } else { Read::Misreads }
        }
        (Some(1), Some(_)) if well_formed => Read::Rejects,
        _ => Read::Crashes,
    })
}

/// Runs the writer `command` on every recipe, in `dir` (recipes and files are left there),
/// grades each file and asks every reader of `readers` (name, dump command) to read it.
///
/// # Errors
/// When `dir` cannot be written or the command cannot be started at all.
pub fn run(
    command: &str,
    recipes: &[Recipe],
    dir: &Path,
    readers: &[(String, String)],
) -> Result<Vec<WriterGraded>> {
    let (program, args) = crate::runner::split(command)?;
    let mut graded = Vec::with_capacity(recipes.len());
    for recipe in recipes {
        let stem = dir.join(recipe.file_stem());
        if let Some(parent) = stem.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let recipe_path = stem.with_extension("json");
        let out = stem.with_extension("zt");
        std::fs::write(&recipe_path, serde_json::to_string_pretty(&recipe.to_json())? + "\n")?;
        let _ = std::fs::remove_file(&out);
        let mut command = Command::new(&program);
        command.args(&args).arg(&recipe_path).arg(&out);
        let output = crate::runner::output(&mut command, crate::implementation::MESSAGES_LIMIT)
            .with_context(|| format!("cannot run {program}"))?;
        let output = match output {
            Ok(output) => output,
            Err(why) => {
                graded.push(WriterGraded {
                    recipe: recipe.clone(),
                    written: Written::Crash(why),
                    file: None,
                    readers: Vec::new(),
                });
                continue;
            }
        };
        let said = || {
            let text = [&output.stderr[..], &output.stdout[..]].concat();
            String::from_utf8_lossy(&text).lines().next().unwrap_or("no output").to_owned()
        };
        let written = match (output.status.code(), read_written(recipe, &out)) {
            (Some(0), Ok(Err(why))) => Written::Fail(why),
            (Some(0), Ok(Ok(bytes))) => match check(recipe, &bytes) {
                Ok(()) => Written::Pass,
                Err(why) => Written::Fail(why),
            },
            (Some(0), Err(_)) => Written::Crash("exit 0 without writing the file".into()),
            (Some(UNSUPPORTED), _) => Written::Unsupported(said()),
            (status, _) => Written::Crash(format!("exit status {status:?}: {}", said())),
        };
        let file = out.exists().then_some(out);
        let mut reads = Vec::new();
        if let Some(file) = &file
            && matches!(written, Written::Pass | Written::Fail(_))
        {
            for (name, reader) in readers {
                reads.push((name.clone(), read_with(reader, recipe, file)?));
            }
        }
        graded.push(WriterGraded { recipe: recipe.clone(), written, file, readers: reads });
    }
    Ok(graded)
}

/// The writer check's report as JSON.
pub fn to_json(results: &[WriterGraded]) -> Json {
    let count = |w: &str| results.iter().filter(|r| r.written.word() == w).count();
    let rows: Vec<Json> = results
        .iter()
        .map(|r| {
            let detail = match &r.written {
                Written::Pass => None,
                Written::Unsupported(d) | Written::Fail(d) | Written::Crash(d) => Some(d.clone()),
            };
            let readers: serde_json::Map<String, Json> =
                r.readers.iter().map(|(n, v)| (n.clone(), json!(v.word()))).collect();
            json!({"recipe": r.recipe.file_stem(), "version": r.recipe.version.name(),
                   "covers": r.recipe.covers, "result": r.written.word(), "detail": detail,
                   "readers": readers})
        })
        .collect();
    json!({"report": "ztensor-writer-check/1", "totals": {"recipes": results.len(), "passed": count("pass"),
           "failed": count("fail"), "crashed": count("crash"), "unsupported": count("unsupported")},
           "results": rows})
}

/// The writer check's report as a table.
pub fn table(results: &[WriterGraded]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<28}  {:<11}  READERS", "RECIPE", "RESULT");
    for r in results {
        let readers: Vec<String> =
            r.readers.iter().map(|(n, v)| format!("{n}: {}", v.word())).collect();
        let detail = match &r.written {
            Written::Pass => String::new(),
            Written::Unsupported(d) | Written::Fail(d) | Written::Crash(d) => format!(" ({d})"),
        };
        let _ = writeln!(
            out,
            "{:<28}  {:<11}  {}{detail}",
            r.recipe.file_stem(),
            r.written.word(),
            readers.join(", ")
        );
    }
    let count = |w: &str| results.iter().filter(|r| r.written.word() == w).count();
    let _ = writeln!(
        out,
        "\n{} recipes: {} passed, {} failed, {} crashed, {} unsupported",
        results.len(),
        count("pass"),
        count("fail"),
        count("crash"),
        count("unsupported")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_round_trip_through_json() {
        for r in recipes() {
            let back = Recipe::from_json(&r.to_json()).unwrap();
            assert_eq!(back.to_json(), r.to_json(), "{}", r.name);
        }
    }
}
