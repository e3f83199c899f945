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
  ztensor-conformance dump [--strict] FILE
  ztensor-conformance write RECIPE OUT

run: runs COMMAND FILE on every fixture of DIR/index.toml (default: the repository's fixtures/,
with the frozen files of other producers in fixtures/producers/) and grades it: a file expected
to be accepted must exit 0 with a dump (reporting the content of the golden dump beside it); a
file expected to be rejected must exit 1 with a dump whose error names a rule (a matching rule
identifier is counted apart); implementation-defined files are reported as accepted or rejected,
never as failures; any other exit status is a crash. Exit status 0 when nothing failed.

write-check: runs COMMAND RECIPE.json OUT for every recipe (exit 0: written; exit 3: this
recipe cannot be written by it) and grades what it wrote strictly: every rule, zero padding,
digests, and the recipe's content. Each --reader (dump protocol) is then asked to read the file.
Recipes and files are left in DIR (default: a new temporary directory).

recipes: writes every recipe (ztensor-recipe/1 JSON) under DIR.
dump: this project's reader in the dump protocol (lenient, or --strict).
write: this project's writer in the writer protocol.

example: ztensor-conformance run --impl 'ztensor dump --json'";

fn main() -> ExitCode {
    match run() {
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
        Some("write") => {
            let [recipe, out] = &args[1..] else { bail!("write needs RECIPE and OUT") };
            let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(recipe)?)
                .with_context(|| format!("reading {recipe}"))?;
            let recipe = Recipe::from_json(&doc)?;
            if let Err(e) = writer_check::write(&recipe, out.as_ref()) {
                eprintln!("ztensor-conformance write: {e:#}");
                std::process::exit(writer_check::UNSUPPORTED);
            }
            Ok(true)
        }
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(true)
        }
        _ => bail!("commands: run, write-check, recipes, dump, write"),
    }
}

/// This project's reader, in the dump protocol.
fn dump(args: &[String]) -> Result<bool> {
    let strict = args.iter().any(|a| a == "--strict");
    let Some(file) = args.iter().find(|a| !a.starts_with("--")) else { bail!("dump needs FILE") };
    let (dump, accepted) = if strict {
        ztensor_conformance::strict_dump(file.as_ref())?
    } else {
        ztensor_dump::file(file.as_ref())?
    };
    println!("{dump}");
    if !accepted {
        std::process::exit(1);
    }
    Ok(true)
}

fn read_check(args: &[String]) -> Result<bool> {
    let mut args = args.iter().cloned();
    let (mut command, mut json, mut junit, mut only) = (None, false, None, None);
    let mut fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--impl" => command = args.next(),
            "--fixtures" => fixtures = args.next().map(PathBuf::from).unwrap_or(fixtures),
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
        None => {
            let d =
                std::env::temp_dir().join(format!("ztensor-write-check-{}", std::process::id()));
            std::fs::create_dir_all(&d)?;
            d
        }
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
