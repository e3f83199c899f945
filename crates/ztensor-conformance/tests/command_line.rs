use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ztensor-conformance")
}

fn conformance(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

#[test]
fn every_command_has_help_that_names_its_options() {
    let commands: &[(&str, &[&str])] = &[
        ("run", &["--impl", "--fixtures", "--json", "--junit", "--only", "Example:"]),
        ("write-check", &["--impl", "--reader", "--dir", "--json", "--only", "Example:"]),
        ("recipes", &["<DIR>", "Example:"]),
        ("matrix", &["<DIR>", "--check", "--findings", "--reference", "Example:"]),
        ("freeze", &["<DIR>", "--producer", "Example:"]),
        (
            "fuzz",
            &[
                "--impl",
                "--writer",
                "--seconds",
                "--runs",
                "--seed",
                "--out",
                "--force",
                "--version",
                "--timeout",
                "--minimize-seconds",
                "--process-per-file",
                "--json",
                "--junit",
                "Example:",
            ],
        ),
        ("dump", &["--strict", "--serve", "[FILE]", "Example:"]),
        ("write", &["<RECIPE>", "<OUT>", "Example:"]),
    ];
    for (command, options) in commands {
        for help in [vec![*command, "--help"], vec!["help", *command]] {
            let out = conformance(&help);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{help:?}: {stdout}");
            assert!(stdout.contains(&format!("ztensor-conformance {command}")), "{stdout}");
            for option in *options {
                assert!(stdout.contains(option), "{help:?} does not mention {option}:\n{stdout}");
            }
        }
    }
    // The program's own help lists every command.
    let out = conformance(&["--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for (command, _) in commands {
        assert!(stdout.contains(command), "{command} missing from:\n{stdout}");
    }
}

#[test]
fn usage_errors_name_the_argument_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["fuzz", "--impl", "x", "--bogus"], "--bogus"),
        (&["run", "--impl", "x", "--frobnicate"], "--frobnicate"),
        (&["write-check", "--impl", "x", "stray"], "stray"),
        (&["launch"], "launch"),
        // A required option left out, or given a value it cannot take.
        (&["run", "--json"], "--impl"),
        (&["fuzz", "--impl", "x", "--seconds", "soon"], "--seconds"),
        (&["fuzz", "--impl", "x", "--timeout", "0"], "--timeout"),
        (&["fuzz", "--impl", "x", "--version", "3.0"], "--version"),
        (&["fuzz", "--impl", "x", "--seconds", "1", "--runs", "2"], "--runs"),
        (&["fuzz", "--impl", "x", "--force"], "--out"),
        (&["write-check", "--impl", "x", "--reader", "no-equals"], "--reader"),
        (&["freeze", "dir", "--producer", "id=name"], "--producer"),
        (&["matrix", "dir", "--check", "--reference", "1.2.3=x"], "--reference"),
        (&["dump"], "FILE"),
    ];
    for (args, named) in cases {
        let out = conformance(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?} should name {named}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// An implementation fuzzed in its own process (the reference adapters) gets the same
/// options through `difffuzz::command_line`, usage errors named.
#[test]
fn the_fuzz_options_parse_the_same_for_an_implementation_in_process() {
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut ours = ztensor_conformance::difffuzz::OursInProcess { chunk: None };
    let err = ztensor_conformance::difffuzz::command_line(
        &args(&["--impl", "x", "--runs", "1", "--bogus"]),
        Some(&mut ours),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("--bogus"), "{err:#}");
    let err = ztensor_conformance::difffuzz::command_line(
        &args(&["--impl", "x", "--runs", "1", "--timeout", "5"]),
        Some(&mut ours),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("--timeout does not apply"), "{err:#}");
    let clean = ztensor_conformance::difffuzz::command_line(
        &args(&["--impl", "ours", "--runs", "3", "--seed", "5", "--json"]),
        Some(&mut ours),
    )
    .unwrap();
    assert!(clean, "our reader diverged from itself");
}

/// As `cargo install` leaves it: the binary alone, copied out of the target directory, run
/// from a directory outside the checkout, grades our reader (its own `dump`) on the whole
/// corpus it carries, from a private directory it removes afterwards.
#[test]
fn an_installed_binary_grades_the_whole_corpus_it_carries() {
    let home = tempfile::tempdir().unwrap();
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().unwrap();
    assert!(!home.path().canonicalize().unwrap().starts_with(&workspace));
    let (bin_dir, cwd, tmp) =
        (home.path().join("bin"), home.path().join("cwd"), home.path().join("tmp"));
    for dir in [&bin_dir, &cwd, &tmp] {
        std::fs::create_dir(dir).unwrap();
    }
    let installed = bin_dir.join("ztensor-conformance");
    std::fs::copy(bin(), &installed).unwrap();
    let installed = installed.to_str().unwrap();
    // A binary just written may be busy for a moment (ETXTBSY): a process another test
    // forks meanwhile holds the copy's descriptor until it execs. Tried again then.
    let mut tries = 0;
    let out = loop {
        let run = Command::new(installed)
            .args(["run", "--impl", &format!("{installed} dump"), "--json"])
            .current_dir(&cwd)
            .env("TMPDIR", &tmp)
            .output();
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every fixture the crate's indexes list was graded, and passed.
    let entries = ztensor_conformance::index::read_all(&ztensor_conformance::corpus()).unwrap();
    let totals = &report["totals"];
    assert_eq!(totals["fixtures"], entries.len(), "{totals}");
    assert_eq!((&totals["failed"], &totals["crashed"]), (&0.into(), &0.into()), "{totals}");
    let graded: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fixture"].as_str().unwrap())
        .collect();
    for e in &entries {
        assert!(graded.contains(&e.file.as_str()), "{} not graded", e.file);
    }
    // The corpus was written under the temporary directory it was given, and is gone.
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);
}
