//! The fuzzing run: the loop, the reduction of what diverged, the report.

use std::time::Instant;

use anyhow::{Context as _, Result};

use super::classify::{Class, Divergence};
use super::config::{Budget, Config};
use super::judge::{InProcessReading, Judge, Judged, Reading, Writing};
use super::minimize::minimize;
use super::ours::InProcess;
use super::recipe::{Recipe, VERSIONS};
use super::report::{
    Finding, Report, check_out, prepare_out, table, to_json, to_junit, write_finding,
};
use super::zt2;
use crate::implementation::Implementation;
use crate::model::Model;
use crate::writer_check::Target;

/// Runs the fuzzer.
///
/// # Errors
/// Usage errors (the command cannot be run or never prints a dump, the output directory is
/// taken) at once; I/O errors of the working directory.
pub fn run(config: &Config, progress: impl FnMut(u64, usize)) -> Result<Report> {
    // A directory that is taken is told at once; one that --force replaces is emptied only
    // once the implementation has answered (a mistyped command loses no earlier findings).
    if let Some(out) = &config.out {
        check_out(out, config.force)?;
    }
    let work = crate::scratch::Scratch::new("fuzz")?;
    let mut judge: Box<dyn Judge> = if config.writer {
        let mut writing = Writing::new(&config.command, config.timeout, work.path())?;
        // A command that cannot be started is told at once.
        writing.judge(&writer_case(Recipe::generate(config.seed, &config.versions)))?;
        writing.started = 0;
        Box::new(writing)
    } else {
        // The probe: a small valid file of the first version asked for.
        let probe = work.path().join("probe.zt");
        let bytes = match config.versions.first() {
            Some(Target::Zt2) => zt2::probe().context("writing the probe")?,
            first => {
                let version = match first {
                    Some(Target::Zt(v)) => *v,
                    _ => VERSIONS[0],
                };
                let index = VERSIONS.iter().position(|v| *v == version).unwrap_or(0);
                #[allow(clippy::cast_possible_truncation)]
                let probe_model = Model::from_bytes(&[index as u8, 1, 0, 0, 2, 3, 1, 1]);
                probe_model.write().context("writing the probe")?.0
            }
        };
        std::fs::write(&probe, bytes)?;
        let implementation =
            Implementation::start(&config.command, config.timeout, &probe, config.serve)?;
        Box::new(Reading { implementation, dir: work.path().to_owned(), read: 0 })
    };
    fuzz_with(config, &mut *judge, progress)
}

/// As [`run`], against `implementation` read in this process (`config.command` names it in
/// the report; `timeout`, `serve` and `writer` do not apply). A panic is a crash, with its
/// message; a hang is not told (nothing can stop a call in this process: libFuzzer's
/// `-timeout` does that for the `differential` target).
///
/// # Errors
/// As [`run`].
pub fn run_in_process(
    config: &Config,
    implementation: &mut dyn InProcess,
    progress: impl FnMut(u64, usize),
) -> Result<Report> {
    if let Some(out) = &config.out {
        check_out(out, config.force)?;
    }
    fuzz_with(config, &mut InProcessReading { implementation }, progress)
}

/// A case as a writer is given it: its content, the generator's model (the changes are for
/// readers, and so are the corpus's files a zTensor 2 case may start from).
fn writer_case(mut recipe: Recipe) -> Recipe {
    recipe.mutations.clear();
    if let Some(how) = &mut recipe.zt2 {
        how.base = None;
    }
    recipe
}

/// The fuzzing loop, the reduction of what diverged, and the report.
fn fuzz_with(
    config: &Config,
    judge: &mut dyn Judge,
    mut progress: impl FnMut(u64, usize),
) -> Result<Report> {
    if let Some(out) = &config.out {
        prepare_out(out, config.force)?;
    }
    let started = Instant::now();
    let mut seen: Vec<(Divergence, String, Recipe, u64, f64, u64, Judged)> = Vec::new();
    let mut cases = 0u64;
    let stopping = crate::implementation::stopping;
    loop {
        let done = match config.budget {
            Budget::Runs(n) => cases >= n,
            Budget::Seconds(s) => started.elapsed().as_secs_f64() >= s,
        };
        if done || stopping() {
            break;
        }
        let seed = config.seed.wrapping_add(cases);
        let mut recipe = Recipe::generate(seed, &config.versions);
        if config.writer {
            recipe = writer_case(recipe);
        }
        let judged = judge.judge(&recipe);
        // A signal stopped the run (and killed the implementation): this case's verdict is
        // not the implementation's.
        if stopping() {
            break;
        }
        let judged = judged?;
        if let Some((divergence, detail)) = judged.divergence.clone() {
            match seen.iter_mut().find(|s| s.0 == divergence) {
                Some(s) => s.5 += 1,
                None => seen.push((
                    divergence,
                    detail,
                    recipe,
                    cases,
                    started.elapsed().as_secs_f64(),
                    1,
                    judged,
                )),
            }
        }
        cases += 1;
        if cases.is_multiple_of(256) {
            progress(cases, seen.len());
        }
    }
    let fuzzing_seconds = started.elapsed().as_secs_f64();
    let mut findings = Vec::with_capacity(seen.len());
    let mut numbers = std::collections::BTreeMap::<Class, usize>::new();
    for (divergence, detail, recipe, case, found_after, hits, first) in seen {
        // Reduced, unless the run is being stopped: then as first found.
        let (recipe, judged, detail) = if stopping() {
            (recipe, first, detail)
        } else {
            let limits = (config.minimize_calls, config.minimize_seconds);
            let reduced = minimize(judge, &recipe, &divergence, limits)?;
            // The reduced case, once more for its verdicts (a flaky divergence keeps the
            // original).
            let again = judge.judge(&reduced);
            let again = if stopping() { first.clone() } else { again? };
            match &again.divergence {
                _ if stopping() => (recipe, first, detail),
                Some((d, detail)) if *d == divergence => (reduced, again.clone(), detail.clone()),
                _ => {
                    let judged = judge.judge(&recipe)?;
                    (recipe, judged, detail)
                }
            }
        };
        let mut finding =
            Finding { divergence, detail, recipe, case, found_after, hits, judged, written: None };
        if let Some(out) = &config.out {
            let n = numbers.entry(finding.divergence.class).or_insert(0);
            *n += 1;
            finding.written = Some(write_finding(out, *n, &finding, config)?);
        }
        findings.push(finding);
    }
    let (persistent, processes) = judge.processes();
    let report = Report {
        cases,
        seconds: started.elapsed().as_secs_f64(),
        fuzzing_seconds,
        persistent,
        processes,
        in_process: judge.in_process(),
        findings,
        seed: config.seed,
        command: config.command.clone(),
        writer: config.writer,
        versions: config.versions.clone(),
        interrupted: stopping(),
        protocol_violations: judge.violations(),
    };
    if let Some(out) = &config.out {
        std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&to_json(&report))?)?;
        std::fs::write(out.join("summary.txt"), table(&report))?;
        std::fs::write(out.join("junit.xml"), to_junit(&report))?;
    }
    Ok(report)
}
