//! `ztensor-conformance`: grades zTensor implementations, as readers (`run`) and as writers
//! (`write-check`), and speaks both protocols for this project's own implementation (`dump`,
//! `write`), so that it is graded through the same door as anyone else's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ztensor_conformance::writer_check::{self, Recipe};

const USAGE: &str = "usage:
  ztensor-conformance run --impl 'COMMAND' [--fixtures DIR] [--json] [--junit FILE] [--only PREFIX]
  ztensor-conformance write-check --impl 'COMMAND' [--reader NAME='COMMAND']... [--dir DIR] [--json] [--only PREFIX]
  ztensor-conformance recipes DIR
  ztensor-conformance matrix DIR [--check] [--reference VERSION=PATH]...
  ztensor-conformance matrix DIR --findings
  ztensor-conformance freeze DIR --producer ID=NAME=PATH...
  ztensor-conformance fuzz [--writer] --impl 'COMMAND' [--seconds N | --runs N] [--seed S] [--out DIR [--force]]
                           [--version V]... [--timeout SECONDS] [--minimize-seconds N]
                           [--process-per-file] [--json] [--junit FILE]
  ztensor-conformance dump [--strict] FILE
  ztensor-conformance dump [--strict] --serve
  ztensor-conformance write RECIPE OUT

run: runs COMMAND FILE on every fixture of DIR/index.toml (default: the corpus this crate carries,
with the frozen files of other producers in fixtures/producers/) and grades it: a file expected
to be accepted must exit 0 with a dump (reporting the content of the golden dump beside it); a
file expected to be rejected must exit 1 with a dump whose error names a rule (a matching rule
identifier is counted apart); implementation-defined files are reported as accepted or rejected
(accepting one with other content is still a failure); any other exit status is a crash.
Exit status 0 when nothing failed.

write-check: runs COMMAND RECIPE.json OUT for every recipe (exit 0: written; exit 3: this
recipe cannot be written by it) and grades what it wrote strictly: every rule, zero padding,
digests, and the recipe's content. Each --reader (dump protocol) is then asked to read the file.
Recipes and files are left in DIR (default: a new temporary directory). Exit status 0 when every
recipe was written validly or declared unsupported.

recipes: writes every recipe (ztensor-recipe/1 JSON) under DIR.
matrix: grades this implementation (lenient and strict reader, writer) and each reference
adapter given (VERSION 0.1.0, 1.1.1 or 1.2.3; PATH its binary), and writes DIR/matrix.json and
DIR/MATRIX.md; with --check (no --reference), grades this implementation and fails when its
cells differ from DIR/matrix.json or MATRIX.md is not the rendering of matrix.json. With
--findings, only the fuzz section is made again, from DIR/findings/<id>/summary.json (kept when
the matrix is made again).
freeze: runs each producer's writer (PATH --write, and PATH --append where it has one) on every
recipe and adds what passes the writer check under DIR/v<version>/<ID>/, with golden dumps, to
DIR/index.toml (with SHA-256); files already listed are never written again.
fuzz: differential fuzzing. Makes files from a seed (generated models of every version, their
manifests and bytes changed), has COMMAND read each (through `COMMAND --serve` when it speaks
it and --process-per-file is not given, else `COMMAND FILE`) and compares its verdict and dump with this project's strict and
lenient readers: crash (another exit, a signal, no dump), hang (no answer within --timeout,
default 10 s; its process group is killed), accepts-invalid (both of ours reject), rejects-valid
(our strict reader accepts), misreads (both accept, the content differs). What the specs leave
to readers is never a divergence. Each distinct divergence is reduced (for at most
--minimize-seconds, default 60, each) and, with --out, written
to DIR/<class>/<n>.zt with <n>.json (verdicts, recipe, the command that reproduces it), beside
DIR/summary.json, summary.txt and junit.xml. Default: 60 s from seed 0. Exit status 0 when
nothing diverged, 1 when something did, 2 on usage errors. With --writer, COMMAND is a writer
(COMMAND RECIPE OUT): each case's content is given it as a recipe and what it writes graded by
the writer check (writes-invalid, crash, hang; exit 3, cannot write this, is no divergence).
dump: this project's reader in the dump protocol (lenient, or --strict); with --serve, the
persistent form: one path a line on stdin, one dump a line on stdout (a rejected file's dump has
a top-level `error`).
write: this project's writer in the writer protocol.

example: ztensor-conformance run --impl 'ztensor dump --json'";

/// The signal that is stopping the program (0: none).
static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Whether the command running finishes by itself once [`stop_all`] has run (the fuzzer,
/// which writes the findings so far), rather than being ended by the signal.
///
/// [`stop_all`]: ztensor_conformance::implementation::stop_all
static FINISHES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long a command that finishes by itself has, after a signal, before it is ended.
const GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// SIGINT, SIGTERM and SIGHUP kill the implementations under test (each leads a process group
/// of its own, outside the terminal's reach), stop what is being written and remove the
/// scratch directories, then exit with 128 + the signal, as a shell reports a process the
/// signal killed. The fuzzer is given [`GRACE`] to write its findings so far first (a second
/// signal ends it at once).
fn handle_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use std::sync::atomic::Ordering;
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new().name("zt-signals".into()).spawn(move || {
        for signal in signals.forever() {
            let first = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
            if first.is_ok() {
                ztensor_conformance::implementation::stop_all();
                ztensor_io::interrupt();
                if FINISHES.load(Ordering::SeqCst) {
                    let _ = std::thread::Builder::new().name("zt-grace".into()).spawn(move || {
                        std::thread::sleep(GRACE);
                        ztensor_conformance::scratch::remove_all();
                        std::process::exit(128 + signal);
                    });
                    continue;
                }
            }
            ztensor_conformance::scratch::remove_all();
            std::process::exit(128 + SIGNAL.load(Ordering::SeqCst));
        }
    });
}

fn main() -> ExitCode {
    handle_signals();
    let result = run();
    // A command that finished by itself after a signal ends as the signal would have ended it.
    let signal = SIGNAL.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 {
        if let Err(e) = &result {
            eprintln!("ztensor-conformance: {e:#}");
        }
        ztensor_conformance::scratch::remove_all();
        std::process::exit(128 + signal);
    }
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ztensor-conformance: {e:#}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => read_check(&args[1..]),
        Some("write-check") => write_check(&args[1..]),
        Some("recipes") => {
            let dir = PathBuf::from(args.get(1).context("recipes needs a directory")?);
            for recipe in writer_check::recipes() {
                let path = dir.join(recipe.file_stem()).with_extension("json");
                std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
                std::fs::write(&path, serde_json::to_string_pretty(&recipe.to_json())? + "\n")?;
            }
            Ok(true)
        }
        Some("dump") => dump(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("matrix") => matrix(&args[1..]),
        Some("freeze") => freeze(&args[1..]),
        Some("write") => {
            let [recipe, out] = &args[1..] else { bail!("write needs RECIPE and OUT") };
            let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(recipe)?)
                .with_context(|| format!("reading {recipe}"))?;
            let recipe = Recipe::from_json(&doc)?;
            // Exit 3 only for what the version cannot express; any other error is a failure
            // of the writer (status 2), which the writer check grades as a crash.
            if !writer_check::write(&recipe, out.as_ref())? {
                eprintln!("ztensor-conformance write: the recipe's version cannot express it");
                std::process::exit(writer_check::UNSUPPORTED);
            }
            Ok(true)
        }
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(true)
        }
        _ => bail!("commands: run, write-check, recipes, matrix, freeze, dump, write"),
    }
}

/// This project's reader, in the dump protocol.
fn dump(args: &[String]) -> Result<bool> {
    let strict = args.iter().any(|a| a == "--strict");
    let read = |file: &std::path::Path| {
        if strict { ztensor_conformance::strict_dump(file) } else { Ok(ztensor_dump::file(file)?) }
    };
    if args.iter().any(|a| a == "--serve") {
        return serve(&read);
    }
    let Some(file) = args.iter().find(|a| !a.starts_with("--")) else { bail!("dump needs FILE") };
    let (dump, accepted) = read(file.as_ref())?;
    println!("{dump}");
    if !accepted {
        std::process::exit(1);
    }
    Ok(true)
}

/// The persistent form of the reading protocol: a path a line in, a dump a line out (naming
/// the path it answers), until stdin ends. A file that cannot be read at all (missing, unreadable) is answered with a
/// rejection whose kind says so.
fn serve(read: &dyn Fn(&std::path::Path) -> Result<(serde_json::Value, bool)>) -> Result<bool> {
    use std::io::{BufRead as _, Write as _};
    let stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line?;
        let mut dump = match read(line.as_ref()) {
            Ok((dump, _)) => dump,
            Err(e) => ztensor_dump::rejected("io", &format!("{e:#}")),
        };
        // The file it answers, so that an answer can never be taken for another file's.
        if let Some(map) = dump.as_object_mut() {
            map.insert("path".to_owned(), serde_json::Value::String(line));
        }
        serde_json::to_writer(&mut out, &dump)?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(true)
}

fn fuzz(args: &[String]) -> Result<bool> {
    // This process runs implementations and nothing else: what escapes their process groups
    // becomes its child, and is killed.
    ztensor_conformance::child::become_subreaper();
    // On a signal, the findings so far are written before it exits.
    FINISHES.store(true, std::sync::atomic::Ordering::SeqCst);
    ztensor_conformance::difffuzz::command_line(args, None)
}

fn read_check(args: &[String]) -> Result<bool> {
    let mut args = args.iter().cloned();
    let (mut command, mut json, mut junit, mut only) = (None, false, None, None);
    let mut fixtures = ztensor_conformance::corpus();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--impl" => command = args.next(),
            "--fixtures" => {
                fixtures = args.next().map(PathBuf::from).context("--fixtures needs DIR")?;
            }
            "--json" => json = true,
            "--junit" => junit = args.next().map(PathBuf::from),
            "--only" => only = args.next(),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let Some(command) = command else { bail!("--impl is required") };
    let mut entries = ztensor_conformance::index::read_all(&fixtures)?;
    if let Some(prefix) = &only {
        entries.retain(|e| e.file.starts_with(prefix.as_str()));
    }
    let results = ztensor_conformance::runner::run(&command, &fixtures, &entries)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&ztensor_conformance::runner::to_json(&results))?
        );
    } else {
        print!("{}", ztensor_conformance::runner::table(&results));
    }
    if let Some(path) = junit {
        std::fs::write(&path, ztensor_conformance::runner::to_junit(&results))?;
    }
    let (_, failed, crashed, _, _) = ztensor_conformance::runner::totals(&results);
    Ok(failed == 0 && crashed == 0)
}

fn write_check(args: &[String]) -> Result<bool> {
    let mut args = args.iter().cloned();
    let (mut command, mut json, mut only, mut dir) = (None, false, None, None);
    let mut readers = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--impl" => command = args.next(),
            "--reader" => {
                let spec = args.next().context("--reader needs NAME=COMMAND")?;
                let (name, reader) = spec.split_once('=').context("--reader needs NAME=COMMAND")?;
                readers.push((name.to_owned(), reader.to_owned()));
            }
            "--dir" => dir = args.next().map(PathBuf::from),
            "--json" => json = true,
            "--only" => only = args.next(),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let Some(command) = command else { bail!("--impl is required") };
    let dir = match dir {
        Some(d) => d,
        // A private directory of its own, kept for the reader of the report (a name that
        // anyone could guess, reused, would let another user plant links in it).
        None => ztensor_conformance::scratch::Scratch::new("write-check")?.keep(),
    };
    let mut recipes = writer_check::recipes();
    if let Some(prefix) = &only {
        recipes.retain(|r| r.file_stem().starts_with(prefix.as_str()));
    }
    let results = writer_check::run(&command, &recipes, &dir, &readers)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&writer_check::to_json(&results))?);
    } else {
        print!("{}", writer_check::table(&results));
        println!("recipes and files: {}", dir.display());
    }
    Ok(results.iter().all(|r| {
        matches!(r.written, writer_check::Written::Pass | writer_check::Written::Unsupported(_))
    }))
}

/// This binary, as a command line the runners start.
fn this() -> Result<String> {
    let exe = std::env::current_exe()?;
    let text = exe.to_str().context("a path that is not UTF-8")?.to_owned();
    if text.contains(char::is_whitespace) {
        bail!("{text}: a path with spaces cannot be split into a command line");
    }
    Ok(text)
}

fn ours() -> Result<Vec<ztensor_conformance::matrix::Implementation>> {
    let exe = this()?;
    let all: Vec<String> = [
        "v0.1/",
        "v1.1/",
        "v1.2/",
        "tensorbuffers/",
        "examples/",
        "producers/",
        "external/ztensor2/",
    ]
    .map(String::from)
    .to_vec();
    Ok(vec![
        ztensor_conformance::matrix::Implementation {
            id: "ours".into(),
            name: "this project (ztensor-io; `ztensor dump --json`, `ztensor-conformance write`)"
                .into(),
            reader: Some((format!("{exe} dump"), all.clone())),
            writer: Some((
                format!("{exe} write"),
                ["0.1", "1.1", "1.2", "2"].map(String::from).to_vec(),
            )),
        },
        ztensor_conformance::matrix::Implementation {
            id: "ours-strict".into(),
            name: "this project under strict validation (`ztensor verify --strict`)".into(),
            reader: Some((format!("{exe} dump --strict"), all)),
            writer: None,
        },
    ])
}

fn reference(version: &str, path: &str) -> Result<ztensor_conformance::matrix::Implementation> {
    let (prefixes, writes): (&[&str], &str) = match version {
        "0.1.0" => (&["v0.1/", "examples/tiny-v0.1", "producers/v0.1/"], "0.1"),
        "1.1.1" => (
            &[
                "v1.1/",
                "v1.2/",
                "examples/tiny-v1.1",
                "examples/tiny-v1.2",
                "producers/v1.1/",
                "producers/v1.2/",
            ],
            "1.1",
        ),
        "1.2.3" => (&["v0.1/", "v1.1/", "v1.2/", "examples/tiny-v", "producers/"], "1.2"),
        // zTensor 2: a reader (of its corpus, and of what every zTensor 2 writer writes) and a
        // writer of version-2 recipes.
        "2.1.1" => {
            return Ok(ztensor_conformance::matrix::Implementation {
                id: format!("reference-{version}"),
                name: format!(
                    "reference implementation, crates.io `ztensor` {version}, zTensor 2 \
                     (xtask/reference-adapter/v2)"
                ),
                reader: Some((path.to_owned(), vec!["external/ztensor2/".to_owned()])),
                writer: Some((format!("{path} --write"), vec!["2".to_owned()])),
            });
        }
        other => bail!("no reference {other} (0.1.0, 1.1.1, 1.2.3, 2.1.1)"),
    };
    Ok(ztensor_conformance::matrix::Implementation {
        id: format!("reference-{version}"),
        name: format!(
            "reference implementation, crates.io `ztensor` {version} (xtask/reference-adapter)"
        ),
        reader: Some((path.to_owned(), prefixes.iter().map(|p| (*p).to_owned()).collect())),
        writer: Some((format!("{path} --write"), vec![writes.to_owned()])),
    })
}

fn matrix(args: &[String]) -> Result<bool> {
    let mut args = args.iter().cloned();
    let (mut dir, mut check, mut implementations) = (None, false, ours()?);
    let mut findings = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--findings" => findings = true,
            "--reference" => {
                let spec = args.next().context("--reference needs VERSION=PATH")?;
                let (version, path) =
                    spec.split_once('=').context("--reference needs VERSION=PATH")?;
                implementations.push(reference(version, path)?);
            }
            other if dir.is_none() => dir = Some(PathBuf::from(other)),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let dir = dir.context("matrix needs DIR")?;
    let json_path = dir.join("matrix.json");
    let md_path = dir.join("MATRIX.md");
    let committed = || -> Result<serde_json::Value> {
        Ok(serde_json::from_slice(
            &std::fs::read(&json_path).with_context(|| json_path.display().to_string())?,
        )?)
    };
    if findings {
        // The fuzz section, from the runs under DIR/findings, into the committed matrix.
        let mut matrix = committed()?;
        matrix["fuzz"] = ztensor_conformance::matrix::fuzz_summary(&dir)?;
        std::fs::write(&json_path, serde_json::to_string_pretty(&matrix)? + "\n")?;
        std::fs::write(&md_path, ztensor_conformance::matrix::markdown(&matrix))?;
        println!("wrote the fuzz findings into {} and {}", json_path.display(), md_path.display());
        return Ok(true);
    }
    if check && implementations.len() > 2 {
        bail!("--check grades this implementation only: leave out --reference");
    }
    let fixtures = ztensor_conformance::corpus();
    let entries = ztensor_conformance::index::read_all(&fixtures)?;
    let scratch = ztensor_conformance::scratch::Scratch::new("matrix")?;
    let built =
        ztensor_conformance::matrix::build(&implementations, &fixtures, &entries, scratch.path());
    drop(scratch);
    let mut built = built?;
    if check {
        let committed = committed()?;
        let ids = ["ours", "ours-strict"];
        let (fresh, old) = (
            ztensor_conformance::matrix::subset(&built, &ids),
            ztensor_conformance::matrix::subset(&committed, &ids),
        );
        let mut current = true;
        if fresh != old {
            eprintln!(
                "{}: this implementation's cells are stale (run `cargo xtask conformance-matrix`):\n  committed {}\n  now       {}",
                json_path.display(),
                serde_json::to_string(&old)?,
                serde_json::to_string(&fresh)?
            );
            current = false;
        }
        let rendered = ztensor_conformance::matrix::markdown(&committed);
        if std::fs::read_to_string(&md_path).ok().as_deref() != Some(rendered.as_str()) {
            eprintln!("{}: not the rendering of matrix.json", md_path.display());
            current = false;
        }
        if current {
            println!("{}: current for this implementation", json_path.display());
        }
        return Ok(current);
    }
    // The fuzz findings are kept: they come from their own runs (`matrix DIR --findings`).
    if let Ok(old) = committed()
        && !old["fuzz"].is_null()
    {
        built["fuzz"] = old["fuzz"].clone();
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&built)? + "\n")?;
    std::fs::write(&md_path, ztensor_conformance::matrix::markdown(&built))?;
    println!("wrote {} and {}", json_path.display(), md_path.display());
    Ok(true)
}

fn freeze(args: &[String]) -> Result<bool> {
    let mut args = args.iter().cloned();
    let (mut dir, mut producers) = (None, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--producer" => {
                let spec = args.next().context("--producer needs ID=NAME=PATH")?;
                let mut parts = spec.splitn(3, '=');
                let (Some(id), Some(name), Some(path)) = (parts.next(), parts.next(), parts.next())
                else {
                    bail!("--producer needs ID=NAME=PATH");
                };
                producers.push((id.to_owned(), name.to_owned(), path.to_owned()));
            }
            other if dir.is_none() => dir = Some(PathBuf::from(other)),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let dir = dir.context("freeze needs DIR")?;
    let index = ztensor_conformance::freeze(&dir, &producers)?;
    println!("froze {index} new files under {}", dir.display());
    Ok(true)
}
