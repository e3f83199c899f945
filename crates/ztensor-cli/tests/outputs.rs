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
    let r = ztensor(&["convert", input, "-", "--to", "1.2", "--shard-size", "1M"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
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
        &["convert", input, out, "--memory", "7M"],
        &["repack", input, out, "--memory", "8M", "--chunk", "16M"],
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
        &["convert", input, out, "--memory", "8M", "-q"][..],
        &["repack", input, out, "--memory", "32M", "--chunk", "16M", "-q"],
    ] {
        let r = ztensor(args);
        assert!(r.status.success(), "{args:?}: {}", stderr(&r));
    }
    std::fs::remove_dir_all(&d).unwrap();
}
