//! Outputs are what they are named: unknown extensions, `-` as standard output, budgets that
//! cannot hold a piece.

use std::process::{Command, Stdio};

use super::{root, scratch, stderr, ztensor};

#[test]
fn an_extension_that_names_no_format_is_refused_unless_to_says_what() {
    let d = scratch("unknown-extension");
    let input = "fixtures/external/numpy/arrays.npz";
    for (name, hint) in [
        ("x.safetensor", Some(".safetensors")),
        ("x.st", Some(".safetensors")),
        ("x.txt", None),
        ("noextension", None),
    ] {
        let out = d.join(name);
        let r = ztensor(&["convert", input, out.to_str().unwrap(), "-q"]);
        assert_eq!(r.status.code(), Some(2), "{name}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("--to"), "{name}: {e}");
        if let Some(hint) = hint {
            assert!(e.contains(&format!("did you mean {hint}?")), "{name}: {e}");
        }
        assert!(!out.exists(), "{name}: nothing written");
        // With --to the name is the user's to choose, and the file is what --to said.
        let r = ztensor(&["convert", input, out.to_str().unwrap(), "-q", "--to", "safetensors"]);
        assert!(r.status.success(), "{name}: {}", stderr(&r));
        let head = std::fs::read(&out).unwrap();
        let header_len = u64::from_le_bytes(head[..8].try_into().unwrap());
        assert_eq!(head.get(8), Some(&b'{'), "{name}: a safetensors header");
        assert!(8 + header_len <= head.len() as u64, "{name}");
    }
    // `.zt` and a sharded directory keep their zTensor 1.2 default.
    let zt = d.join("x.zt");
    assert!(ztensor(&["convert", input, zt.to_str().unwrap(), "-q"]).status.success());
    assert_eq!(&std::fs::read(&zt).unwrap()[..8], b"ZTEN1000");
    let sharded = format!("{}/", d.join("shards").display());
    let r = ztensor(&["convert", input, &sharded, "-q"]);
    assert!(r.status.success(), "{}", stderr(&r));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `convert IN - --to T`, its standard output captured.
fn convert_to_stdout(input: &str, to: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ztensor"))
        .args(["convert", input, "-", "--to", to])
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_dash_as_output_writes_the_file_to_standard_output() {
    let d = scratch("dash-output");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let input = "fixtures/external/numpy/arrays.npz";
    for (to, name) in [("1.2", "x.zt"), ("safetensors", "x.safetensors"), ("2", "x2.zt")] {
        let named = d.join(name);
        let r = ztensor(&["convert", input, named.to_str().unwrap(), "-q", "--to", to]);
        assert!(r.status.success(), "{to}: {}", stderr(&r));
        let piped = Command::new(env!("CARGO_BIN_EXE_ztensor"))
            .args(["convert", input, "-", "--to", to])
            .current_dir(root())
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        assert!(piped.status.success(), "{to}: {}", stderr(&piped));
        // The same bytes as the named file, the summary on standard error naming <stdout>, and
        // nothing left in the temporary directory, nor a file named `-`.
        assert_eq!(piped.stdout, std::fs::read(&named).unwrap(), "{to}");
        assert!(stderr(&piped).starts_with("wrote <stdout> ("), "{to}: {}", stderr(&piped));
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "{to}: staging removed");
        assert!(!root().join("-").exists(), "{to}: no file named -");
    }
    // Without --to there is no name to tell the format by.
    let r = ztensor(&["convert", input, "-"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(stderr(&r).contains("--to"), "{}", stderr(&r));
    // A refusal names <stdout>, never the staging path, and leaves nothing behind.
    let refused = "fixtures/v1.2/valid/attributes-every-kind.zt";
    let r = convert_to_stdout(refused, "safetensors");
    let named = ztensor(&["convert", refused, d.join("r.safetensors").to_str().unwrap()]);
    assert!(!named.status.success());
    assert_eq!(r.status.code(), named.status.code(), "{}", stderr(&r));
    assert!(r.stdout.is_empty());
    let e = stderr(&r);
    assert!(e.contains("<stdout>") && !e.contains("ztensor-stdout-"), "{e}");
    // A sharded output cannot go to standard output.
    let r = ztensor(&["convert", input, "-", "--to", "1.2", "--shard-size", "1MiB"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Options that do nothing for a file output are refused, not ignored.
#[test]
fn options_for_a_sharded_output_are_refused_for_a_file() {
    let d = scratch("file-options");
    let input = "fixtures/examples/tiny-v1.2.zt";
    let out = d.join("x.zt");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (&["convert", input, out, "--force"][..], "--force clears an output directory"),
        (&["convert", input, out, "--shard-size", "1MiB"], "give an output directory"),
    ] {
        let r = ztensor(args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(says), "{args:?}: {}", stderr(&r));
        assert!(!std::path::Path::new(out).exists(), "{args:?}: nothing written");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_memory_budget_below_one_piece_is_refused() {
    let d = scratch("memory-floor");
    let input = "fixtures/examples/tiny-v1.2.zt";
    let out = d.join("x.zt");
    let out = out.to_str().unwrap();
    for args in [
        &["convert", input, out, "--memory", "1K"][..],
        &["convert", input, out, "--memory", "7MiB"],
        &["repack", input, out, "--memory", "8MiB", "--chunk", "16MiB"],
    ] {
        let r = ztensor(args);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains("less than one piece needs") && e.contains("at least --memory"), "{e}");
        assert!(!std::path::Path::new(out).exists(), "{args:?}: nothing written");
    }
    // The floor itself is a budget that holds one piece: 8 MiB for the engine's 4 MiB pieces,
    // twice a larger --chunk.
    for args in [
        &["convert", input, out, "--memory", "8MiB", "-q"][..],
        &["repack", input, out, "--memory", "32MiB", "--chunk", "16MiB", "-q"],
    ] {
        let r = ztensor(args);
        assert!(r.status.success(), "{args:?}: {}", stderr(&r));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// The summary gives the peak memory the process held, as measured (its resident set's high
/// water mark: never nothing, whether the engine held pieces or copied stored bytes); an error
/// reading an object while writing zTensor 2 names the object once.
#[test]
fn summaries_and_errors_say_each_thing_once() {
    let d = scratch("said-once");
    let input = "fixtures/examples/tiny-v1.2.zt";
    let copied = d.join("copied.zt");
    let r = ztensor(&["convert", input, copied.to_str().unwrap(), "--digest", "sha256"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let said = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(said.starts_with("wrote ") && said.contains("4 objects"), "{said}");
    let again = d.join("again.zt");
    let r = ztensor(&["convert", copied.to_str().unwrap(), again.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&r.stdout).into_owned();
    assert!(r.status.success(), "{said}");
    let peak = |said: &str| -> f64 {
        let at = said.find(", peak memory ").expect("the summary gives the peak memory");
        let figure = said[at + ", peak memory ".len()..].split_whitespace().collect::<Vec<_>>();
        let unit = match figure[1].trim_end_matches(|c: char| !c.is_ascii_alphabetic()) {
            "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            other => panic!("unit {other:?} in {said}"),
        };
        figure[0].parse::<f64>().unwrap() * unit
    };
    // A process of this tool holds some megabytes (its code, its threads' stacks); far less
    // than a gigabyte for a file of a few kilobytes.
    assert!((1e6..1e9).contains(&peak(&said)), "{said}");
    // The JSON report gives it in bytes, as measured by the same process.
    let r = ztensor(&[
        "convert",
        copied.to_str().unwrap(),
        again.to_str().unwrap(),
        "--zstd",
        "1",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let bytes = report["peak_memory"].as_u64().expect("peak_memory in bytes");
    assert!((1_000_000..1_000_000_000).contains(&bytes), "{report}");

    // A byte of a digested component changed: the digest check names the object and component.
    let mut bytes = std::fs::read(&copied).unwrap();
    bytes[64] ^= 0x10;
    let broken = d.join("broken.zt");
    std::fs::write(&broken, &bytes).unwrap();
    let out = d.join("v2.zt");
    let r = ztensor(&["convert", broken.to_str().unwrap(), out.to_str().unwrap(), "--to", "2"]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    let e = stderr(&r);
    assert!(e.contains("digest_mismatch"), "{e}");
    let named = e.matches("object \"").count();
    assert_eq!(named, 1, "the object is named once: {e}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--json` on the commands that write: the summary as one JSON object, its figures those of
/// the file written (its length on disk, its objects as `info` counts them); `id --json` one
/// entry per input; with `-` the JSON goes to standard error, standard output holding the file.
#[test]
fn writing_commands_and_id_report_as_json() {
    let d = scratch("json-reports");
    let input = root().join("fixtures/examples/tiny-v1.2.zt");
    let input = input.to_str().unwrap();
    let out = d.join("o.zt");
    let r = ztensor(&["convert", "--json", input, out.to_str().unwrap(), "--zstd", "3"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).expect("one JSON object");
    assert_eq!(report["wrote"], out.to_str().unwrap());
    assert_eq!(report["format"], "zTensor 1.2");
    assert_eq!(report["file_len"], std::fs::metadata(&out).unwrap().len());
    let info: serde_json::Value =
        serde_json::from_slice(&ztensor(&["info", "--json", out.to_str().unwrap()]).stdout)
            .unwrap();
    assert_eq!(report["objects"].as_u64(), info["objects"].as_array().map(|a| a.len() as u64));
    assert!(report["seconds"].as_f64().is_some() && report["notes"].is_array(), "{report}");
    // Nothing else on standard error: no bar, no line.
    assert!(r.stderr.is_empty(), "{}", stderr(&r));
    // `-`: the file on standard output, the report on standard error.
    let r = ztensor(&["convert", "--json", input, "-", "--to", "1.1"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(r.stdout.starts_with(b"ZTEN1000"));
    let report: serde_json::Value = serde_json::from_slice(&r.stderr).expect("JSON on stderr");
    assert_eq!(report["wrote"], "-");
    assert_eq!(report["file_len"], r.stdout.len() as u64);
    // --quiet wins: nothing printed.
    let r = ztensor(&["convert", "--json", "-q", input, out.to_str().unwrap()]);
    assert!(r.status.success() && r.stdout.is_empty(), "{}", stderr(&r));
    // id: one entry per input, the same id `id` prints.
    let plain = ztensor(&["id", input]);
    let r = ztensor(&["id", "--json", input, out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", stderr(&r));
    let ids: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(ids.as_array().map(Vec::len), Some(2));
    assert_eq!(ids[0]["file"], input);
    assert_eq!(ids[0]["id"].as_str(), Some(String::from_utf8_lossy(&plain.stdout).trim()));
    assert_eq!(ids[0]["id"], ids[1]["id"], "the same content");
}

/// A file output that exists is replaced whole, and never silently: the summary names what it
/// held, and what of that the new file no longer has (compression, digests) with the option
/// that keeps it. A new file gets no such note.
#[test]
fn replacing_a_file_says_what_it_held_and_what_is_lost() {
    let d = scratch("over-a-file");
    let input = root().join("fixtures/examples/tiny-v1.2.zt");
    let input = input.to_str().unwrap();
    let out = d.join("o.zt");
    let out = out.to_str().unwrap();
    let said = |args: &[&str]| {
        let r = ztensor(args);
        assert!(r.status.success(), "{}", stderr(&r));
        String::from_utf8_lossy(&r.stdout).into_owned()
    };
    let first =
        said(&["convert", input, out, "--zstd", "3", "--zstd-always", "--digest", "sha256"]);
    assert!(!first.contains("note: replaced"), "{first}");
    let raw = said(&["convert", input, out]);
    assert!(raw.contains("note: replaced "), "{raw}");
    assert!(raw.contains("(zTensor 1.2, compressed, with sha256 digests)"), "{raw}");
    assert!(raw.contains("does not have its compression (--zstd LEVEL keeps it)"), "{raw}");
    assert!(raw.contains("its sha256 digests (--digest keeps them)"), "{raw}");
    let same = said(&["convert", input, out]);
    assert!(same.contains("note: replaced ") && !same.contains("does not have"), "{same}");
    // Something that is not a file of tensors is named as such.
    std::fs::write(out, b"a shopping list").unwrap();
    let over = said(&["convert", input, out]);
    assert!(over.contains("(not a file of tensors this tool reads)"), "{over}");
    // In the JSON summary too.
    let r = ztensor(&["convert", "--json", input, out]);
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(report["notes"][0].as_str().unwrap().starts_with("note: replaced "), "{report}");
}

/// One rule for every output: what a user names is replaced and the command says what it held
/// (`remove -o`, `extract -o`, as `convert` and `repack`); what a user did not name (an earlier
/// checkpoint's shards in an output directory) is refused, naming it, until `--force`.
#[test]
fn every_named_output_is_replaced_saying_so_and_unnamed_files_need_force() {
    let d = scratch("one-rule");
    let input = root().join("fixtures/examples/tiny-v1.2.zt");
    let input = input.to_str().unwrap();
    let run = |args: &[&str]| -> (bool, String) {
        let r = ztensor(args);
        let text = format!("{}{}", String::from_utf8_lossy(&r.stdout), stderr(&r));
        (r.status.success(), text)
    };
    let small = d.join("small.zt");
    let small = small.to_str().unwrap();
    let names: Vec<String> = {
        let (ok, listed) = run(&["ls", input]);
        assert!(ok, "{listed}");
        listed.lines().map(str::to_owned).collect()
    };
    let (ok, first) = run(&["remove", input, &names[0], "-o", small]);
    assert!(ok && !first.contains("note: replaced"), "{first}");
    let (ok, again) = run(&["remove", input, &names[1], "-o", small]);
    assert!(ok && again.contains(&format!("note: replaced {small} (zTensor 1.2")), "{again}");
    let npy = d.join("a.npy");
    let npy = npy.to_str().unwrap();
    let (ok, first) = run(&["extract", input, &names[0], "-o", npy]);
    assert!(ok && !first.contains("note: replaced"), "{first}");
    let (ok, again) = run(&["extract", input, &names[0], "-o", npy]);
    assert!(ok && again.contains(&format!("note: replaced {npy} (NumPy")), "{again}");
    // A directory's earlier checkpoint was not named: refused until --force, then named.
    let out = format!("{}/", d.join("out").display());
    let index = root().join("fixtures/examples/checkpoint/model.safetensors.index.json");
    let index = index.to_str().unwrap();
    let (ok, made) = run(&["convert", index, &out]);
    assert!(ok, "{made}");
    let (ok, refused) = run(&["convert", index, &out]);
    assert!(!ok && refused.contains("holds a sharded checkpoint already"), "{refused}");
    let (ok, forced) = run(&["convert", index, &out, "--force"]);
    assert!(ok && forced.contains("--force removed the checkpoint"), "{forced}");
}

/// Every command that reports takes `--json` and prints one JSON document on standard output.
#[test]
fn every_reporting_command_speaks_json() {
    let d = scratch("all-json");
    let p = |name: &str| d.join(name).to_str().unwrap().to_owned();
    let tiny = root().join("fixtures/examples/tiny-v1.2.zt");
    let tiny = tiny.to_str().unwrap();
    let index = root().join("fixtures/examples/checkpoint/model.safetensors.index.json");
    let index = index.to_str().unwrap();
    let (a, plan, units) = (p("a.zt"), p("plan.json"), format!("{}/", p("units")));
    let commands: Vec<Vec<&str>> = vec![
        vec!["info", tiny],
        vec!["ls", tiny],
        vec!["dump", tiny],
        vec!["verify", tiny],
        vec!["id", tiny],
        vec!["cat", tiny, "layer0.bias"],
        vec!["diff", tiny, tiny],
        vec!["rules"],
        vec!["convert", tiny, &a],
        vec!["repack", tiny, &a],
        vec!["remove", tiny, "layer0.bias", "-o", &a],
        vec!["extract", tiny, "layer0.bias", "-o", "NPY"],
        vec!["repair", &a],
        vec!["plan", index, &units, "-o", &plan],
        vec!["run", &plan, "--unit", "0"],
        vec!["run", &plan, "--unit", "1"],
        vec!["finalize", &plan],
    ];
    let npy = p("b.npy");
    for command in commands {
        let mut args: Vec<&str> =
            command.iter().map(|a| if *a == "NPY" { npy.as_str() } else { a }).collect();
        args.push("--json");
        let r = ztensor(&args);
        assert!(r.status.success(), "{args:?}: {}", stderr(&r));
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&r.stdout);
        assert!(parsed.is_ok(), "{args:?}: not JSON: {}", String::from_utf8_lossy(&r.stdout));
    }
}
