//! `ztensor-conformance`: grades zTensor implementations, as readers (`run`) and as writers
//! (`write-check`), and speaks both protocols for this project's own implementation (`dump`,
//! `write`), so that it is graded through the same door as anyone else's. `cli` defines the
//! command line; this module dispatches it.

mod cli;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser as _;
use ztensor_conformance::writer_check::{self, Recipe};

use crate::cli::{Cli, Command};

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
                let _ = ztensor_io::interrupt();
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
    // Usage errors end here, with clap's message (naming the argument) and status 2.
    let cli = Cli::parse();
    let result = run(cli.command);
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
            eprintln!("ztensor-conformance: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> Result<bool> {
    match command {
        Command::Run { implementation, fixtures, json, junit, only } => {
            read_check(&implementation, fixtures, json, junit.as_deref(), only.as_deref())
        }
        Command::WriteCheck { implementation, readers, dir, json, only } => {
            write_check(&implementation, &readers, dir, json, only.as_deref())
        }
        Command::Recipes { dir } => {
            for recipe in writer_check::recipes() {
                let path = dir.join(recipe.file_stem()).with_extension("json");
                std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
                std::fs::write(&path, serde_json::to_string_pretty(&recipe.to_json())? + "\n")?;
            }
            Ok(true)
        }
        Command::Dump { strict, serve: true, .. } => dump(strict, None),
        Command::Dump { strict, file, .. } => dump(strict, file.as_deref()),
        Command::Fuzz(args) => fuzz(&args),
        Command::Matrix { dir, check, findings, references } => {
            matrix(&dir, check, findings, &references)
        }
        Command::Freeze { dir, producers } => {
            let index = ztensor_conformance::freeze(&dir, &producers)?;
            println!("froze {index} new files under {}", dir.display());
            Ok(true)
        }
        Command::Write { recipe, out } => {
            let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&recipe)?)
                .with_context(|| format!("reading {}", recipe.display()))?;
            let recipe = Recipe::from_json(&doc)?;
            // Exit 3 only for what the version cannot express; any other error is a failure
            // of the writer (status 2), which the writer check grades as a crash.
            if !writer_check::write(&recipe, &out)? {
                eprintln!("ztensor-conformance write: the recipe's version cannot express it");
                std::process::exit(writer_check::UNSUPPORTED);
            }
            Ok(true)
        }
    }
}

/// This project's reader, in the dump protocol: of `file`, or (`None`) in the persistent form.
fn dump(strict: bool, file: Option<&Path>) -> Result<bool> {
    let read = |file: &Path| {
        if strict { ztensor_conformance::strict_dump(file) } else { Ok(ztensor_dump::file(file)?) }
    };
    let Some(file) = file else { return serve(&read) };
    let (dump, accepted) = read(file)?;
    println!("{dump}");
    if !accepted {
        std::process::exit(1);
    }
    Ok(true)
}

/// The persistent form of the reading protocol: a path a line in, a dump a line out (naming
/// the path it answers), until stdin ends. A file that cannot be read at all (missing, unreadable) is answered with a
/// rejection whose kind says so.
fn serve(read: &dyn Fn(&Path) -> Result<(serde_json::Value, bool)>) -> Result<bool> {
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

fn fuzz(args: &ztensor_conformance::difffuzz::FuzzArgs) -> Result<bool> {
    // This process runs implementations and nothing else: what escapes their process groups
    // becomes its child, and is killed.
    ztensor_conformance::child::become_subreaper();
    // On a signal, the findings so far are written before it exits.
    FINISHES.store(true, std::sync::atomic::Ordering::SeqCst);
    ztensor_conformance::difffuzz::fuzz(args, None)
}

fn read_check(
    command: &str,
    fixtures: Option<PathBuf>,
    json: bool,
    junit: Option<&Path>,
    only: Option<&str>,
) -> Result<bool> {
    // The corpus compiled in, written to a private directory for the run (the implementation
    // is given paths), unless another is named: the source tree is never read.
    let (fixtures, _unpacked) = match fixtures {
        Some(dir) => (dir, None),
        None => {
            let scratch = ztensor_conformance::embedded::unpack()?;
            (scratch.path().to_owned(), Some(scratch))
        }
    };
    let mut entries = ztensor_conformance::index::read_all(&fixtures)?;
    if let Some(prefix) = only {
        entries.retain(|e| e.file.starts_with(prefix));
    }
    let results = ztensor_conformance::runner::run(command, &fixtures, &entries)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&ztensor_conformance::runner::to_json(&results))?
        );
    } else {
        print!("{}", ztensor_conformance::runner::table(&results));
    }
    if let Some(path) = junit {
        std::fs::write(path, ztensor_conformance::runner::to_junit(&results))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let (_, failed, crashed, _, _) = ztensor_conformance::runner::totals(&results);
    Ok(failed == 0 && crashed == 0)
}

fn write_check(
    command: &str,
    readers: &[(String, String)],
    dir: Option<PathBuf>,
    json: bool,
    only: Option<&str>,
) -> Result<bool> {
    let dir = match dir {
        Some(d) => d,
        // A private directory of its own, kept for the reader of the report (a name that
        // anyone could guess, reused, would let another user plant links in it).
        None => ztensor_conformance::scratch::Scratch::new("write-check")?.keep(),
    };
    let mut recipes = writer_check::recipes();
    if let Some(prefix) = only {
        recipes.retain(|r| r.file_stem().starts_with(prefix));
    }
    let results = writer_check::run(command, &recipes, &dir, readers)?;
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

fn matrix(
    dir: &Path,
    check: bool,
    findings: bool,
    references: &[(String, String)],
) -> Result<bool> {
    let mut implementations = ours()?;
    for (version, path) in references {
        implementations.push(reference(version, path)?);
    }
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
        matrix["fuzz"] = ztensor_conformance::matrix::fuzz_summary(dir)?;
        std::fs::write(&json_path, serde_json::to_string_pretty(&matrix)? + "\n")?;
        std::fs::write(&md_path, ztensor_conformance::matrix::markdown(&matrix))?;
        println!("wrote the fuzz findings into {} and {}", json_path.display(), md_path.display());
        return Ok(true);
    }
    // The corpus compiled in, as `run` grades from it.
    let corpus = ztensor_conformance::embedded::unpack()?;
    let entries = ztensor_conformance::index::read_all(corpus.path())?;
    let scratch = ztensor_conformance::scratch::Scratch::new("matrix")?;
    let built = ztensor_conformance::matrix::build(
        &implementations,
        corpus.path(),
        &entries,
        scratch.path(),
    );
    drop((scratch, corpus));
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
