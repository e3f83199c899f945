// The reading protocol of the reference adapters, included by each (`include!`): they are
// separate Cargo projects, one per crates.io version of the reference, so they share this
// file rather than a crate. It calls the including adapter's `dump(path) -> Json`.

/// The reading protocol: `FILE` (exit 0 accepted, 1 rejected), or `--serve` (one path a line
/// on stdin, one dump a line on stdout, until stdin ends).
fn read_protocol(args: &[String]) {
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
