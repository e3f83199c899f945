//! The fuzz targets of `fuzz/`: a short run of each (CI's smoke) and a campaign that grows each
//! target's kept corpus and says how far it went.
//!
//! Each target reads from, in order: a scratch directory for what this run finds, its kept
//! corpus (`fuzz/corpus/TARGET`, committed, minimised), its regressions
//! (`fuzz/regressions/TARGET`) and seeds made from the fixtures (`target/fuzz-seeds/TARGET`).
//! libFuzzer runs every input of every directory before it mutates, so a change that breaks an
//! input found once fails the smoke. Needs cargo-fuzz; libFuzzer's nightly features are enabled
//! on stable through `RUSTC_BOOTSTRAP`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::project_root;

/// The targets run at the default limits, where a zstd stream of N bytes may decode to
/// 32,768 N bytes: 16 KiB inputs stay within half the malloc limit.
const MAX_LEN: usize = 16 << 10;

/// The limits every run has: a single allocation past the first is a reader believing a
/// declared length; the second is a process holding more than any reader should.
const LIMITS: [&str; 2] = ["-malloc_limit_mb=1024", "-rss_limit_mb=4096"];

/// The fixture directories every target is seeded from.
const SEED_DIRS: &[&str] = &[
    "examples",
    "v0.1/valid",
    "v1.1/valid",
    "v1.2/valid",
    "v0.1/reject",
    "v1.2/reject",
    "tensorbuffers/valid",
    "tensorbuffers/reject",
    "external/pytorch",
    "external/pytorch/variants",
    "external/pytorch/hostile",
    "external/numpy",
    "external/numpy/hostile",
    "external/gguf",
    "external/gguf/hostile",
    "external/ztensor2/valid",
    "external/ztensor2/reject",
    "external/dcp/native",
    "external/dcp/native-zstd",
    "external/safetensors",
];

/// Runs every fuzz target (or those in `only`) over its kept corpus, regressions and seeds,
/// then for `seconds`, with the malloc limit that catches a parser believing a declared
/// length. The targets are built in one cargo run, then run as many at a time as the machine
/// has cores (each libFuzzer process is one thread); each run's output goes to
/// `target/fuzz-new/TARGET.log`, its last lines printed when it fails.
pub(crate) fn fuzz_smoke(seconds: u64, only: &[String]) -> Result<()> {
    let cargo = cargo_fuzz()?;
    let targets = targets(only)?;
    let mut build = Command::new(&cargo);
    build.args(["fuzz", "build", "-O"]);
    target_dir(&mut build);
    if targets.len() == 1 {
        build.args(&targets);
    }
    let status = build
        .env("RUSTC_BOOTSTRAP", "1")
        .current_dir(project_root().join("fuzz"))
        .status()
        .context("running cargo fuzz build")?;
    if !status.success() {
        bail!("cargo fuzz build failed ({status})");
    }
    let at_once = std::thread::available_parallelism().map_or(1, usize::from);
    let logs = project_root().join("target/fuzz-new");
    let mut waiting = targets.iter();
    let mut running = Running(Vec::new());
    let mut failed = Vec::new();
    loop {
        while running.0.len() < at_once {
            let Some(target) = waiting.next() else { break };
            let scratch = fresh(&logs.join(target))?;
            let log = logs.join(format!("{target}.log"));
            let out = std::fs::File::create(&log)?;
            eprintln!("$ cargo fuzz run {target} ({seconds} s)");
            let child = fuzz_run(&cargo, target, &scratch)?
                .args([
                    format!("-max_total_time={seconds}"),
                    format!("-max_len={MAX_LEN}"),
                    "-print_final_stats=1".to_owned(),
                ])
                .args(LIMITS)
                .stdout(out.try_clone()?)
                .stderr(out)
                .spawn()
                .context("running cargo fuzz")?;
            running.0.push((target, child, log, Instant::now()));
        }
        if running.0.is_empty() {
            break;
        }
        let mut finished = None;
        for (i, (_, child, _, _)) in running.0.iter_mut().enumerate() {
            if let Some(status) = child.try_wait()? {
                finished = Some((i, status));
                break;
            }
        }
        let Some((i, status)) = finished else {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        let (target, _, log, started) = running.0.swap_remove(i);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let runs = text.lines().rev().find_map(|l| l.strip_prefix("Done ")).unwrap_or("no runs");
        eprintln!("{target}: {runs} ({} s in all)", started.elapsed().as_secs());
        if !status.success() {
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("{}", lines[lines.len().saturating_sub(60)..].join("\n"));
            failed.push(target.as_str());
        }
    }
    if !failed.is_empty() {
        bail!(
            "fuzz targets {} found a problem (see fuzz/artifacts/TARGET/ and target/fuzz-new/TARGET.log)",
            failed.join(", ")
        );
    }
    Ok(())
}

/// The fuzz runs under way: those still running when the smoke stops early (an error of its
/// own) are killed and waited for, not left behind.
struct Running<'a>(Vec<(&'a String, std::process::Child, PathBuf, Instant)>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        for (_, child, _, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `fuzz-campaign [--minutes M] [--jobs J] [TARGET...]`: each target for M minutes in J forked
/// jobs, what it found merged into its kept corpus (minimised: libFuzzer's merge keeps the
/// inputs that add coverage), and a line per target appended to `fuzz/CAMPAIGN.md`.
pub(crate) fn campaign(args: &[String]) -> Result<()> {
    let mut minutes = 10u64;
    let mut jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut only = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--minutes" => {
                minutes = rest.next().context("--minutes needs a number")?.parse()?;
            }
            "--hours" => {
                let hours: u64 = rest.next().context("--hours needs a number")?.parse()?;
                minutes = hours.saturating_mul(60);
            }
            "--jobs" => jobs = rest.next().context("--jobs needs a number")?.parse()?,
            name => only.push(name.to_owned()),
        }
    }
    if minutes == 0 || jobs == 0 {
        bail!("--minutes (or --hours) and --jobs must be positive");
    }
    let cargo = cargo_fuzz()?;
    let root = project_root();
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_default();
    let log = root.join("fuzz/CAMPAIGN.md");
    if !log.exists() {
        std::fs::write(&log, CAMPAIGN_HEADER)?;
    }
    for target in targets(&only)? {
        let scratch = fresh(&root.join("target/fuzz-new").join(&target))?;
        let artifacts = root.join("fuzz/artifacts").join(&target);
        let findings_before = count_files(&artifacts);
        let seconds = minutes.saturating_mul(60);
        eprintln!("$ cargo fuzz run {target} ({seconds} s, {jobs} jobs)");
        let started = Instant::now();
        let output = fuzz_run(&cargo, &target, &scratch)?
            .args([
                format!("-max_total_time={seconds}"),
                format!("-max_len={MAX_LEN}"),
                format!("-fork={jobs}"),
                // A finding is kept under fuzz/artifacts and the campaign goes on.
                "-ignore_crashes=1".to_owned(),
                "-ignore_ooms=1".to_owned(),
                "-ignore_timeouts=1".to_owned(),
                "-print_final_stats=1".to_owned(),
            ])
            .args(LIMITS)
            .stderr(Stdio::piped())
            .output()
            .context("running cargo fuzz")?;
        let elapsed = started.elapsed().as_secs_f64();
        let said = String::from_utf8_lossy(&output.stderr);
        let stats = Stats::of(&said);
        let Some(runs) = stats.runs else {
            eprintln!("{said}");
            bail!("fuzz target {target} printed no statistics ({})", output.status);
        };
        merge(&cargo, &target, &scratch)?;
        let (files, bytes) = corpus_size(&root.join("fuzz/corpus").join(&target));
        let findings = count_files(&artifacts).saturating_sub(findings_before);
        let line = format!(
            "| {date} | {commit} | {target} | {jobs} | {:.0} | {runs} | {:.0} | {} | {} | {files} | {} | {findings} |\n",
            elapsed,
            runs as f64 / elapsed.max(1.0),
            stats.cov.map_or("?".to_owned(), |c| c.to_string()),
            stats.ft.map_or("?".to_owned(), |c| c.to_string()),
            bytes,
        );
        eprint!("{line}");
        let mut text = std::fs::read_to_string(&log)?;
        text.push_str(&line);
        std::fs::write(&log, text)?;
    }
    Ok(())
}

/// What `fuzz/CAMPAIGN.md` starts with.
const CAMPAIGN_HEADER: &str = "# Fuzzing campaigns\n\n\
Appended by `cargo xtask fuzz-campaign`: one line per target and run. `runs` are libFuzzer's \
executions (all jobs), `cov`/`ft` its edge and feature coverage at the end, `corpus` the kept \
corpus after the merge (files, bytes), `findings` the new files under `fuzz/artifacts/TARGET`.\n\n\
| date | commit | target | jobs | seconds | runs | runs/s | cov | ft | corpus files | corpus bytes | findings |\n\
|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// What libFuzzer said last about how far it went.
#[derive(Debug, Default, PartialEq)]
struct Stats {
    runs: Option<u64>,
    cov: Option<u64>,
    ft: Option<u64>,
}

impl Stats {
    /// From libFuzzer's progress lines (`#1234 NEW cov: 56 ft: 78 ...`, and in fork mode
    /// `#1234: cov: 56 ft: 78 ...`) and its final statistics, the last of each.
    fn of(said: &str) -> Stats {
        let mut stats = Stats::default();
        let number = |word: Option<&str>| {
            word.map(|w| w.trim_end_matches(':')).and_then(|w| w.parse::<u64>().ok())
        };
        for line in said.lines() {
            if let Some(runs) = line.strip_prefix("stat::number_of_executed_units:") {
                stats.runs = runs.trim().parse().ok().or(stats.runs);
                continue;
            }
            let Some(rest) = line.strip_prefix('#') else { continue };
            let mut words = rest.split_whitespace();
            let Some(runs) = number(words.next()) else { continue };
            stats.runs = Some(stats.runs.map_or(runs, |r| r.max(runs)));
            while let Some(word) = words.next() {
                match word {
                    "cov:" => stats.cov = number(words.next()).or(stats.cov),
                    "ft:" => stats.ft = number(words.next()).or(stats.ft),
                    _ => {}
                }
            }
        }
        stats
    }
}

/// Merges what a run found (`scratch`) into the kept corpus of `target`, keeping only inputs
/// that add coverage (the old corpus and the new finds minimised together).
fn merge(cargo: &str, target: &str, scratch: &Path) -> Result<()> {
    let fuzz = project_root().join("fuzz");
    let kept = fuzz.join("corpus").join(target);
    let merged = fresh(&project_root().join("target/fuzz-merged").join(target))?;
    let mut command = Command::new(cargo);
    command.args(["fuzz", "run", "-O", target]);
    target_dir(&mut command);
    let status = command
        .args([&merged, &kept, scratch])
        .args(["--", "-merge=1", &format!("-max_len={MAX_LEN}")])
        .args(LIMITS)
        .env("RUSTC_BOOTSTRAP", "1")
        .current_dir(&fuzz)
        .stderr(Stdio::null())
        .status()
        .context("merging the corpus")?;
    if !status.success() {
        bail!("merging the corpus of {target} failed ({status})");
    }
    if kept.exists() {
        std::fs::remove_dir_all(&kept)?;
    }
    std::fs::create_dir_all(kept.parent().unwrap_or(&fuzz))?;
    // Across file systems (target/ may be elsewhere), a copy.
    std::fs::create_dir_all(&kept)?;
    for entry in std::fs::read_dir(&merged)? {
        let entry = entry?;
        std::fs::copy(entry.path(), kept.join(entry.file_name()))?;
    }
    Ok(())
}

/// `cargo fuzz run -O TARGET SCRATCH KEPT REGRESSIONS SEEDS --`, from `fuzz/`: what follows is
/// libFuzzer's.
fn fuzz_run(cargo: &str, target: &str, scratch: &Path) -> Result<Command> {
    let fuzz = project_root().join("fuzz");
    let kept = fuzz.join("corpus").join(target);
    std::fs::create_dir_all(&kept)?;
    let mut command = Command::new(cargo);
    command.args(["fuzz", "run", "-O", target]);
    target_dir(&mut command);
    command.arg(scratch).arg(&kept);
    let regressions = fuzz.join("regressions").join(target);
    if regressions.is_dir() {
        command.arg(regressions);
    }
    command.arg(seeds(target)?).arg("--").env("RUSTC_BOOTSTRAP", "1").current_dir(&fuzz);
    Ok(command)
}

/// The seeds of `target`, made afresh from the fixtures under `target/fuzz-seeds/TARGET`:
/// every fixture file; for `indexes`, each sharded checkpoint's index and each zTensor 2 file
/// behind the selector byte that reads it as such.
fn seeds(target: &str) -> Result<PathBuf> {
    let root = project_root();
    let seeds = fresh(&root.join("target/fuzz-seeds").join(target))?;
    let fixtures = root.join("fixtures");
    let mut files = Vec::new();
    for dir in SEED_DIRS {
        for entry in std::fs::read_dir(fixtures.join(dir)).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() || name.ends_with(".json") || name.ends_with(".py") {
                continue;
            }
            files.push((format!("{}-{name}", dir.replace('/', "-")), entry.path()));
        }
    }
    if target == "dcp_shards" {
        // Framed as the target reads them (`ztensor_conformance::fuzz::dcp_shards`): a count
        // byte (modulo 3, plus one), each file but the last after its two-byte length.
        let dir = fixtures.join("external/dcp/hf-shards");
        let mut shards: Vec<PathBuf> =
            std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        shards.sort();
        let shards: Vec<Vec<u8>> = shards.iter().map(std::fs::read).collect::<Result<_, _>>()?;
        for (n, shard) in shards.iter().enumerate() {
            let mut alone = vec![0u8];
            alone.extend_from_slice(shard);
            std::fs::write(seeds.join(format!("shard-{n}")), alone)?;
        }
        if let [first, second] = shards.as_slice() {
            let mut both = vec![1u8];
            both.extend(u16::try_from(first.len())?.to_le_bytes());
            both.extend_from_slice(first);
            both.extend_from_slice(second);
            std::fs::write(seeds.join("both"), both)?;
        }
        return Ok(seeds);
    }
    if target == "indexes" {
        let mut indexes = Vec::new();
        walk(&fixtures, &mut |path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            if name.ends_with(".zt.index.json") {
                indexes.push((0u8, path.to_owned()));
            } else if name.ends_with(".safetensors.index.json") {
                indexes.push((1, path.to_owned()));
            }
        })?;
        for (n, (selector, path)) in indexes.into_iter().enumerate() {
            let mut bytes = vec![selector];
            bytes.extend(std::fs::read(&path)?);
            std::fs::write(seeds.join(format!("index-{n}")), bytes)?;
        }
        for (name, path) in &files {
            if name.starts_with("external-ztensor2") {
                let mut bytes = vec![2u8];
                bytes.extend(std::fs::read(path)?);
                std::fs::write(seeds.join(name), bytes)?;
            }
        }
        return Ok(seeds);
    }
    for (name, path) in files {
        std::fs::copy(path, seeds.join(name))?;
    }
    Ok(seeds)
}

/// Calls `each` on every file under `dir`.
fn walk(dir: &Path, each: &mut dyn FnMut(&Path)) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, each)?;
        } else {
            each(&path);
        }
    }
    Ok(())
}

/// The fuzz targets (the files of `fuzz/fuzz_targets`, each a thin wrapper around a body in
/// ztensor-conformance, whose `fuzz::TARGETS` a test keeps in step with them), or those of
/// them in `only`.
fn targets(only: &[String]) -> Result<Vec<String>> {
    let dir = project_root().join("fuzz/fuzz_targets");
    let mut targets: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".rs").map(str::to_owned))
        .collect();
    targets.sort();
    for name in only {
        if !targets.contains(name) {
            bail!("no fuzz target {name} (there are {})", targets.join(", "));
        }
    }
    targets.retain(|t| only.is_empty() || only.contains(t));
    Ok(targets)
}

/// Builds the fuzz targets under `target/fuzz` (where CI keeps what it built between runs,
/// as it keeps the rest of `target/`), unless `CARGO_TARGET_DIR` names a target directory.
fn target_dir(command: &mut Command) {
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        command.arg("--target-dir").arg(project_root().join("target/fuzz"));
    }
}

/// cargo, checked to have cargo-fuzz.
fn cargo_fuzz() -> Result<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let have =
        Command::new(&cargo).args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if !have {
        bail!("cargo-fuzz is not installed (cargo install cargo-fuzz --locked)");
    }
    Ok(cargo)
}

/// `dir`, emptied (made if missing).
fn fresh(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    Ok(dir.to_owned())
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.flatten().count())
}

/// How many files `dir` holds, and their bytes.
fn corpus_size(dir: &Path) -> (usize, u64) {
    let files: Vec<_> = std::fs::read_dir(dir).into_iter().flatten().flatten().collect();
    let bytes = files.iter().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum();
    (files.len(), bytes)
}

/// What git prints for `args`, trimmed.
fn git(args: &[&str]) -> Result<String> {
    let out = Command::new("git").args(args).current_dir(project_root()).output()?;
    if !out.status.success() {
        bail!("git {} failed", args.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::Stats;

    #[test]
    fn statistics_are_read_from_what_libfuzzer_prints() {
        // Lines as libFuzzer 18 prints them, in-process and in fork mode.
        let single = "INFO: Seed: 1\n#2\tINITED cov: 10 ft: 11 corp: 1/1b exec/s: 0 rss: 30Mb\n\
                      #4096\tpulse  cov: 120 ft: 300 corp: 40/2Kb lim: 43 exec/s: 2048 rss: 40Mb\n\
                      #8000\tDONE   cov: 125 ft: 310 corp: 41/2Kb lim: 43 exec/s: 4000 rss: 41Mb\n\
                      stat::number_of_executed_units: 8001\nstat::average_exec_per_sec:     4000\n";
        assert_eq!(Stats::of(single), Stats { runs: Some(8001), cov: Some(125), ft: Some(310) });
        let fork = "#5000: cov: 200 ft: 500 corp: 60 exec/s: 2500 oom/timeout/crash: 0/0/0 time: 2s job: 1 dft_time: 0\n\
                    #90000: cov: 230 ft: 640 corp: 75 exec/s: 3000 oom/timeout/crash: 0/0/1 time: 30s job: 9 dft_time: 0\n\
                    INFO: fuzzed for 30 seconds, wrapping up soon\n";
        assert_eq!(Stats::of(fork), Stats { runs: Some(90000), cov: Some(230), ft: Some(640) });
        assert_eq!(Stats::of("no numbers here\n#x cov: 1\n"), Stats::default());
    }
}
