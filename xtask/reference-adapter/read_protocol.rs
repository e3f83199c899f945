// The reading protocol of the reference adapters, included by each (`include!`): they are
// separate Cargo projects, one per crates.io version of the reference, so they share this
// file rather than a crate. It calls the including adapter's `dump(path) -> Json`, and its
// `FUZZ_VERSIONS` (the versions it reads, for `--fuzz-in-process` when none are given).

/// The reading protocol: `FILE` (exit 0 accepted, 1 rejected), or `--serve` (one path a line
/// on stdin, one dump a line on stdout, until stdin ends).
fn read_protocol(args: &[String]) {
    if args.get(1).map(String::as_str) == Some("--fuzz-in-process") {
        fuzz_in_process(&args[2..]);
    }
    if args.get(1).map(String::as_str) == Some("--serve") {
        use std::io::{BufRead, Write};
        let mut out = std::io::stdout().lock();
        for line in std::io::stdin().lock().lines() {
            let line = line.expect("stdin");
            writeln!(out, "{}", dump(&line)).expect("stdout");
            out.flush().expect("stdout");
        }
        return;
    }
    let dump = dump(args.get(1).expect("a file"));
    println!("{dump}");
    if dump["error"].is_object() {
        std::process::exit(1);
    }
}

/// This adapter's reader as an in-process implementation (`ztensor_conformance::difffuzz::
/// InProcess`): no process a file, no protocol. The reference opens paths, so each case is
/// written to one scratch file first.
#[cfg(feature = "in-process")]
struct InProcessReference {
    scratch: std::path::PathBuf,
}

#[cfg(feature = "in-process")]
impl ztensor_conformance::difffuzz::InProcess for InProcessReference {
    fn read(&mut self, bytes: &[u8]) -> ztensor_conformance::implementation::Verdict {
        use ztensor_conformance::implementation::Verdict;
        if let Err(e) = std::fs::write(&self.scratch, bytes) {
            return Verdict::Crash(format!("cannot write the scratch file: {e}"));
        }
        let dump = dump(self.scratch.to_str().expect("a UTF-8 temporary directory"));
        if dump["error"].is_object() { Verdict::Rejected(dump) } else { Verdict::Accepted(dump) }
    }
}

/// `--fuzz-in-process [FUZZ OPTIONS]`: `ztensor-conformance fuzz` against this adapter's
/// reader called in this process (built with `--features in-process`), on `FUZZ_VERSIONS`
/// unless `--version` says otherwise. Exits 0 when nothing diverged, 1 when something did,
/// 2 on usage errors.
#[cfg(feature = "in-process")]
fn fuzz_in_process(args: &[String]) -> ! {
    let mut args = args.to_vec();
    if !args.iter().any(|a| a == "--version") {
        for v in FUZZ_VERSIONS {
            args.extend(["--version".to_owned(), (*v).to_owned()]);
        }
    }
    if !args.iter().any(|a| a == "--impl") {
        let name = std::env::args().next().unwrap_or_default();
        args.extend(["--impl".to_owned(), format!("{name} (in process)")]);
    }
    let scratch = std::env::temp_dir().join(format!("reference-in-process-{}.zt", std::process::id()));
    // An abort (the reference's answer to a failed allocation) ends the process, the run with
    // it: the case it was reading is then still in the scratch file.
    eprintln!("--fuzz-in-process: each case is written to {} before the reference reads it; if this process aborts, that file holds the case that ended it", scratch.display());
    let mut reference = InProcessReference { scratch: scratch.clone() };
    let outcome = ztensor_conformance::difffuzz::command_line(&args, Some(&mut reference));
    let _ = std::fs::remove_file(&scratch);
    std::process::exit(match outcome {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("--fuzz-in-process: {e:#}");
            2
        }
    })
}

/// Without the `in-process` feature, the mode says how to get it.
#[cfg(not(feature = "in-process"))]
fn fuzz_in_process(_: &[String]) -> ! {
    eprintln!("--fuzz-in-process: this adapter was built without it (cargo build --features in-process)");
    std::process::exit(2)
}
