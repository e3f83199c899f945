//! The results matrix: every known implementation graded as a reader on the corpus and, where
//! it writes, as a writer on the recipes; rendered as `MATRIX.md` and `matrix.json`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value as Json, json};

use crate::index::Entry;
use crate::runner::{self, Graded, Outcome};
use crate::writer_check::{self, Read, WriterGraded, Written};

/// The matrix format's identifier.
pub const MATRIX: &str = "ztensor-conformance-matrix/1";

/// One implementation, as the matrix runs it.
#[derive(Debug, Clone)]
pub struct Implementation {
    /// A short identifier (`ours`, `reference-1.2.3`).
    pub id: String,
    /// What it is, for people.
    pub name: String,
    /// Its reader (dump protocol), and the fixture prefixes it is graded on.
    pub reader: Option<(String, Vec<String>)>,
    /// Its writer (writer protocol), and the versions it writes (`0.1`, `1.1`, `1.2`).
    pub writer: Option<(String, Vec<String>)>,
}

impl Implementation {
    /// Whether its reader is graded on files of `version` (`1.2`).
    fn reads(&self, version: &str) -> bool {
        self.reader.as_ref().is_some_and(|(_, prefixes)| {
            prefixes.iter().any(|p| match version {
                // zTensor 2 readers are those graded on its corpus (a 1.x reader of every
                // producer's files reads none of it).
                "2" => p.starts_with("external/ztensor2/"),
                _ => p.starts_with(&format!("v{version}/")) || p == "producers/",
            })
        })
    }
}

/// The group a fixture belongs to in the matrix: `v1.2 valid`, `v0.1 reject`, …, `producers`.
fn group(entry: &Entry) -> String {
    if entry.producer.is_some() {
        return format!("v{} producers", entry.version);
    }
    if entry.version == "tensorbuffers" {
        return "tensorbuffers".into();
    }
    let kind = if entry.implementation_defined() {
        "implementation-defined"
    } else if entry.expect == "ok" {
        "valid"
    } else {
        "reject"
    };
    format!("v{} {kind}", entry.version)
}

fn reader_cells(results: &[Graded]) -> Json {
    let mut groups: BTreeMap<String, Vec<&Graded>> = BTreeMap::new();
    for r in results {
        groups.entry(group(&r.entry)).or_default().push(r);
    }
    let cells: serde_json::Map<String, Json> = groups
        .into_iter()
        .map(|(g, rs)| {
            let count = |o: fn(&Outcome) -> bool| rs.iter().filter(|r| o(&r.outcome)).count();
            let failing: Vec<Json> = rs
                .iter()
                .filter(|r| r.outcome.is_failure())
                .map(|r| {
                    let why = match &r.outcome {
                        Outcome::Fail(w) | Outcome::Crash(w) => w.chars().take(160).collect(),
                        _ => String::new(),
                    };
                    json!({"fixture": r.entry.file, "result": r.outcome.word(), "detail": why})
                })
                .collect();
            let rejected: Vec<&str> = rs
                .iter()
                .filter(|r| r.outcome == Outcome::Rejected)
                .map(|r| r.entry.file.as_str())
                .collect();
            (
                g,
                json!({
                    "fixtures": rs.len(),
                    "pass": count(|o| *o == Outcome::Pass),
                    "fail": count(|o| matches!(o, Outcome::Fail(_))),
                    "crash": count(|o| matches!(o, Outcome::Crash(_))),
                    "accepted": count(|o| *o == Outcome::Accepted),
                    "rejected": count(|o| *o == Outcome::Rejected),
                    "failing": failing,
                    "rejected_files": rejected,
                }),
            )
        })
        .collect();
    Json::Object(cells)
}

fn writer_cells(results: &[WriterGraded]) -> Json {
    let mut versions: BTreeMap<String, Vec<&WriterGraded>> = BTreeMap::new();
    for r in results {
        versions.entry(format!("v{}", r.recipe.version)).or_default().push(r);
    }
    let mut cells = serde_json::Map::new();
    for (v, rs) in versions {
        let count = |w: &str| rs.iter().filter(|r| r.written.word() == w).count();
        let mut read_by: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
        for r in &rs {
            for (reader, verdict) in &r.readers {
                *read_by.entry(reader.clone()).or_default().entry(verdict.word()).or_default() += 1;
            }
        }
        let failing: Vec<Json> = rs
            .iter()
            .filter(|r| matches!(r.written, Written::Fail(_) | Written::Crash(_)))
            .map(|r| json!({"recipe": r.recipe.file_stem(), "result": r.written.word(),
                            "detail": match &r.written { Written::Fail(d) | Written::Crash(d) => d.clone(), _ => String::new() }}))
            .collect();
        let unsupported: Vec<Json> = rs
            .iter()
            .filter_map(|r| match &r.written {
                Written::Unsupported(d) => {
                    Some(json!({"recipe": r.recipe.file_stem(), "detail": d}))
                }
                _ => None,
            })
            .collect();
        let misread: Vec<Json> = rs
            .iter()
            .flat_map(|r| {
                r.readers
                    .iter()
                    .filter(|(_, v)| *v != Read::Accepts)
                    .map(|(n, v)| json!({"recipe": r.recipe.file_stem(), "reader": n, "result": v.word()}))
            })
            .collect();
        cells.insert(v, json!({
            "recipes": rs.len(), "pass": count("pass"), "fail": count("fail"), "crash": count("crash"),
            "unsupported": count("unsupported"), "read_by": read_by, "failing": failing,
            "unsupported_recipes": unsupported, "not_accepted": misread,
        }));
    }
    Json::Object(cells)
}

/// Runs every implementation and builds the matrix. Writer checks run in `scratch`; the files
/// each writer wrote are read by every implementation's reader.
///
/// # Errors
/// When an implementation cannot be started at all.
pub fn build(
    implementations: &[Implementation],
    fixtures: &Path,
    entries: &[Entry],
    scratch: &Path,
) -> Result<Json> {
    let mut readers = serde_json::Map::new();
    for i in implementations {
        if let Some((command, prefixes)) = &i.reader {
            let mine: Vec<Entry> = entries
                .iter()
                .filter(|e| prefixes.iter().any(|p| e.file.starts_with(p.as_str())))
                .cloned()
                .collect();
            let results = runner::run(command, fixtures, &mine)?;
            readers.insert(i.id.clone(), reader_cells(&results));
        }
    }
    let mut writers = serde_json::Map::new();
    for i in implementations {
        if let Some((command, versions)) = &i.writer {
            let dir = scratch.join(&i.id);
            let _ = std::fs::remove_dir_all(&dir);
            let mut results = Vec::new();
            for version in versions {
                let recipes: Vec<_> = writer_check::recipes()
                    .into_iter()
                    .filter(|r| r.version.to_string() == *version)
                    .collect();
                // Each file is read by the readers of its version.
                let readers: Vec<(String, String)> = implementations
                    .iter()
                    .filter(|r| r.reads(version))
                    .filter_map(|r| r.reader.as_ref().map(|(c, _)| (r.id.clone(), c.clone())))
                    .collect();
                results.extend(writer_check::run(command, &recipes, &dir, &readers)?);
            }
            writers.insert(i.id.clone(), writer_cells(&results));
        }
    }
    let list: Vec<Json> = implementations
        .iter()
        .map(|i| {
            json!({"id": i.id, "name": i.name, "reads": i.reader.as_ref().map(|(_, p)| p.clone()),
                   "writes": i.writer.as_ref().map(|(_, v)| v.clone())})
        })
        .collect();
    Ok(json!({"matrix": MATRIX, "implementations": list, "readers": readers, "writers": writers}))
}

/// The part of a matrix that `ids` determine alone: their reader cells, and their writer cells
/// with only what readers among `ids` said. What CI compares for our own implementation.
pub fn subset(matrix: &Json, ids: &[&str]) -> Json {
    let mut readers = serde_json::Map::new();
    let mut writers = serde_json::Map::new();
    for id in ids {
        if let Some(r) = matrix["readers"].get(*id) {
            readers.insert((*id).to_owned(), r.clone());
        }
        if let Some(Json::Object(versions)) = matrix["writers"].get(*id) {
            let mut kept = serde_json::Map::new();
            for (v, cell) in versions {
                let mut cell = cell.clone();
                if let Some(Json::Object(by)) = cell.get_mut("read_by") {
                    by.retain(|reader, _| ids.contains(&reader.as_str()));
                }
                if let Some(Json::Array(not)) = cell.get_mut("not_accepted") {
                    not.retain(|n| n["reader"].as_str().is_some_and(|r| ids.contains(&r)));
                }
                kept.insert(v.clone(), cell);
            }
            writers.insert((*id).to_owned(), Json::Object(kept));
        }
    }
    json!({"readers": readers, "writers": writers})
}

fn link(fixture: &str) -> String {
    format!("[`{fixture}`](../../fixtures/{fixture})")
}

/// The matrix as Markdown.
pub fn markdown(matrix: &Json) -> String {
    let mut out = String::from(
        "# Conformance matrix\n\n\
         Generated by `cargo xtask conformance-matrix` from `matrix.json` beside it; do not edit.\n\
         CI regenerates the rows of this project's implementation and fails when they differ.\n\
         How to read it: [README.md](README.md#the-results-matrix).\n\n",
    );
    let implementations = matrix["implementations"].as_array().cloned().unwrap_or_default();
    let name = |id: &str| {
        implementations
            .iter()
            .find(|i| i["id"] == id)
            .and_then(|i| i["name"].as_str())
            .unwrap_or(id)
            .to_owned()
    };
    out.push_str(
        "## Implementations\n\n| id | implementation | reads | writes |\n|---|---|---|---|\n",
    );
    for i in &implementations {
        let reads = i["reads"].as_array().map_or("no".to_owned(), |p| {
            p.iter()
                .filter_map(Json::as_str)
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(" ")
        });
        let writes = i["writes"].as_array().map_or("no".to_owned(), |v| {
            v.iter().filter_map(Json::as_str).collect::<Vec<_>>().join(", ")
        });
        let _ = writeln!(
            out,
            "| `{}` | {} | {reads} | {writes} |",
            i["id"].as_str().unwrap_or(""),
            i["name"].as_str().unwrap_or("")
        );
    }
    // Readers: one column per implementation, one row per group.
    let readers = matrix["readers"].as_object().cloned().unwrap_or_default();
    let ids: Vec<&String> = readers.keys().collect();
    let mut groups: Vec<String> =
        readers.values().filter_map(Json::as_object).flat_map(|g| g.keys().cloned()).collect();
    groups.sort();
    groups.dedup();
    out.push_str(
        "\n## Readers\n\nEach cell: passed / fixtures; failures and crashes named below. \
         Implementation-defined rows give accepted / rejected instead; they are never failures.\n\n| group |",
    );
    for id in &ids {
        let _ = write!(out, " `{id}` |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(ids.len()));
    out.push('\n');
    for g in &groups {
        let _ = write!(out, "| {g} |");
        for id in &ids {
            let cell = &readers[id.as_str()][g];
            if cell.is_null() {
                out.push_str(" — |");
                continue;
            }
            let n = |k: &str| cell[k].as_u64().unwrap_or(0);
            let bad = n("fail") + n("crash");
            let text = if g.ends_with("implementation-defined") {
                format!("{} accepted, {} rejected", n("accepted"), n("rejected"))
            } else {
                format!("{}/{}", n("pass"), n("fixtures"))
            };
            let text = if bad > 0 {
                format!("{text} (**{} fail, {} crash**)", n("fail"), n("crash"))
            } else {
                text
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    // Writers.
    let writers = matrix["writers"].as_object().cloned().unwrap_or_default();
    out.push_str(
        "\n## Writers\n\nEach cell: recipes written and valid / recipes; then how many were \
         unsupported (the implementation said it cannot write them), failed or crashed, and \
         which readers accept what it wrote.\n\n| writer | version | valid | unsupported | fail | crash | read by |\n|---|---|---|---|---|---|---|\n",
    );
    for (id, versions) in &writers {
        for (v, cell) in versions.as_object().into_iter().flatten() {
            let n = |k: &str| cell[k].as_u64().unwrap_or(0);
            let read_by: Vec<String> = cell["read_by"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(reader, verdicts)| {
                    let parts: Vec<String> = verdicts
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, c)| format!("{c} {k}"))
                        .collect();
                    format!("`{reader}`: {}", parts.join(", "))
                })
                .collect();
            let _ = writeln!(
                out,
                "| `{id}` | {v} | {}/{} | {} | {} | {} | {} |",
                n("pass"),
                n("recipes"),
                n("unsupported"),
                n("fail"),
                n("crash"),
                read_by.join("; ")
            );
        }
    }
    // Details: every failing case, linked.
    out.push_str("\n## Failing cases\n");
    let mut any = false;
    for (id, groups) in &readers {
        let mut lines = Vec::new();
        for (g, cell) in groups.as_object().into_iter().flatten() {
            for f in cell["failing"].as_array().into_iter().flatten() {
                let fixture = f["fixture"].as_str().unwrap_or("");
                lines.push(format!(
                    "- {g}: {} — {}: {}",
                    link(fixture),
                    f["result"].as_str().unwrap_or(""),
                    f["detail"].as_str().unwrap_or("").replace('|', "\\|")
                ));
            }
        }
        if !lines.is_empty() {
            any = true;
            let _ = write!(out, "\n### Reader `{id}` ({})\n\n{}\n", name(id), lines.join("\n"));
        }
    }
    for (id, versions) in &writers {
        let mut lines = Vec::new();
        for (v, cell) in versions.as_object().into_iter().flatten() {
            for f in cell["failing"].as_array().into_iter().flatten() {
                lines.push(format!(
                    "- {v}: recipe `{}` — {}: {}",
                    f["recipe"].as_str().unwrap_or(""),
                    f["result"].as_str().unwrap_or(""),
                    f["detail"].as_str().unwrap_or("")
                ));
            }
            for f in cell["unsupported_recipes"].as_array().into_iter().flatten() {
                lines.push(format!(
                    "- {v}: recipe `{}` unsupported: {}",
                    f["recipe"].as_str().unwrap_or(""),
                    f["detail"].as_str().unwrap_or("")
                ));
            }
            for f in cell["not_accepted"].as_array().into_iter().flatten() {
                lines.push(format!(
                    "- {v}: recipe `{}` — reader `{}` {}",
                    f["recipe"].as_str().unwrap_or(""),
                    f["reader"].as_str().unwrap_or(""),
                    f["result"].as_str().unwrap_or("")
                ));
            }
        }
        if !lines.is_empty() {
            any = true;
            let _ = write!(out, "\n### Writer `{id}` ({})\n\n{}\n", name(id), lines.join("\n"));
        }
    }
    if !any {
        out.push_str("\nNone.\n");
    }
    if let Some(fuzz) = matrix["fuzz"].as_array() {
        fuzz_section(&mut out, fuzz);
    }
    out
}

/// The differential fuzzing of each implementation (`matrix["fuzz"]`, from
/// [`fuzz_summary`]): distinct divergences by class, each with its reduced case.
fn fuzz_section(out: &mut String, fuzz: &[Json]) {
    use crate::difffuzz::Class;
    out.push_str(
        "\n## Fuzz findings\n\n`cargo xtask fuzz-references [SECONDS]` fuzzes each reference adapter with \
         `ztensor-conformance fuzz` (persistent protocol, files of the versions it reads, from \
         seed 0) and keeps each distinct divergence, reduced, under [`findings/`](findings/). \
         Each cell: distinct divergences (cases that hit them).\n\n| implementation | cases | files/s |",
    );
    for class in Class::ALL {
        let _ = write!(out, " {} |", class.name());
    }
    out.push_str("\n|---|---:|---:|");
    out.push_str(&"---:|".repeat(Class::ALL.len()));
    out.push('\n');
    for run in fuzz {
        let _ = write!(
            out,
            "| `{}` | {} | {:.0} |",
            run["id"].as_str().unwrap_or(""),
            run["cases"],
            run["files_per_second"].as_f64().unwrap_or(0.0)
        );
        let findings = run["findings"].as_array().map_or(&[][..], Vec::as_slice);
        for class in Class::ALL {
            let of: Vec<&Json> = findings.iter().filter(|f| f["class"] == class.name()).collect();
            let hits: u64 = of.iter().filter_map(|f| f["hits"].as_u64()).sum();
            let _ = write!(out, " {} ({hits}) |", of.len());
        }
        out.push('\n');
    }
    for run in fuzz {
        let findings = run["findings"].as_array().map_or(&[][..], Vec::as_slice);
        if findings.is_empty() {
            continue;
        }
        let _ = write!(out, "\n### `{}`\n\n", run["id"].as_str().unwrap_or(""));
        for f in findings {
            let detail: String = f["detail"].as_str().unwrap_or("").chars().take(140).collect();
            let file = f["file"].as_str().unwrap_or("");
            let _ = writeln!(
                out,
                "- {} `{}` [`{file}`]({file}): {}",
                f["class"].as_str().unwrap_or(""),
                f["key"].as_str().unwrap_or(""),
                detail.replace('|', "\\|").replace('\n', " ")
            );
        }
    }
}

/// The fuzz section of the matrix from the runs under `dir/findings/<id>/summary.json`
/// (written by `ztensor-conformance fuzz --out`), with paths relative to `dir`.
///
/// # Errors
/// A summary that cannot be read.
pub fn fuzz_summary(dir: &std::path::Path) -> anyhow::Result<Json> {
    let root = dir.join("findings");
    let mut runs = Vec::new();
    let mut ids: Vec<_> = std::fs::read_dir(&root)?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("summary.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    for id in ids {
        let summary: Json =
            serde_json::from_slice(&std::fs::read(root.join(&id).join("summary.json"))?)?;
        let findings: Vec<Json> = summary["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                // Paths as the matrix links them: from `dir`, whatever the run's directory.
                let file = f["file"].as_str().and_then(|p| {
                    let p = std::path::Path::new(p);
                    let class = p.parent()?.file_name()?.to_string_lossy().into_owned();
                    Some(format!("findings/{id}/{class}/{}", p.file_name()?.to_string_lossy()))
                });
                json!({"class": f["class"], "key": f["key"], "detail": f["detail"],
                       "hits": f["hits"], "seed": f["recipe"]["seed"], "file": file})
            })
            .collect();
        runs.push(json!({
            "id": id,
            "cases": summary["cases"],
            "seconds": summary["seconds"],
            "files_per_second": summary["files_per_second"],
            "by_class": summary["by_class"],
            "findings": findings,
        }));
    }
    Ok(Json::Array(runs))
}
