//! A Distributed Checkpoint PyTorch saved through `ztensor_rs.torch.dcp.ZTensorWriter`
//! (`fixtures/external/dcp`, made by its `make.py` with torch at 2 ranks): read as its whole
//! tensors by every command, and consolidated into one file whose tensors are those of the
//! full state dict, as the `safetensors` crate reads the file torch wrote of it.

use safetensors::SafeTensors;

use super::{root, scratch, stderr, stdout, ztensor};

fn index() -> String {
    root().join("fixtures/external/dcp/ztensor/model.zt.index.json").display().to_string()
}

#[test]
fn a_chunked_checkpoint_is_read_as_its_whole_tensors() {
    let out = ztensor(&["info", &index()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("format:     Distributed Checkpoint"), "{text}");
    assert!(text.contains("tensors:    4\n"), "{text}");
    // embed is sharded on rows, proj on columns, ids on rows; norm is whole.
    for row in ["model.embed", "model.proj", "model.ids", "model.norm"] {
        assert!(text.lines().any(|l| l.starts_with(row)), "{row}: {text}");
    }
    assert!(text.contains("[6, 4]") && text.contains("[4, 5]"), "{text}");
    assert!(text.contains("left out: 2 entries that are not tensors: \"lr\", \"step\""), "{text}");
    let out = ztensor(&["verify", &index()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn consolidating_gives_the_full_state_dict() {
    let dir = scratch("dcp-consolidate");
    let full = std::fs::read(root().join("fixtures/external/dcp/full.safetensors")).unwrap();
    let full = SafeTensors::deserialize(&full).unwrap();
    let index = index();
    for target in ["out.safetensors", "out.zt", "shards/"] {
        let output = format!("{}/{target}", dir.display());
        let mut args = vec!["convert", &index, &output];
        if target.ends_with('/') {
            args.extend(["--shard-size", "64"]);
        }
        let out = ztensor(&args);
        assert!(out.status.success(), "{target}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("note: left out 2 entries of the input that are not tensors"),
            "{target}: {}",
            stdout(&out)
        );
        // Read back through safetensors: convert whatever was written to safetensors.
        let check = dir.join(format!("check-{}.safetensors", target.trim_end_matches('/')));
        let read = if target == "shards/" {
            format!("{}/shards/model.zt.index.json", dir.display())
        } else {
            output.clone()
        };
        let back = ztensor(&["convert", &read, check.to_str().unwrap()]);
        assert!(back.status.success(), "{target}: {}", stderr(&back));
        let bytes = std::fs::read(&check).unwrap();
        let got = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(got.len(), full.len(), "{target}");
        for (name, want) in full.tensors() {
            let have = got.tensor(&name).unwrap();
            assert_eq!(have.dtype(), want.dtype(), "{target} {name}");
            assert_eq!(have.shape(), want.shape(), "{target} {name}");
            assert_eq!(have.data(), want.data(), "{target} {name}");
        }
    }
}

/// The checkpoint DCP's own `FileSystemWriter` saved (`.metadata` and `__R_0.distcp`), read
/// as its whole tensors: by its directory or its `.metadata`.
fn native() -> String {
    root().join("fixtures/external/dcp/native").display().to_string()
}

#[test]
fn a_checkpoint_dcp_saved_itself_is_read_and_consolidated() {
    for path in [native(), format!("{}/.metadata", native())] {
        let out = ztensor(&["info", &path]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("tensors:    4\n"), "{text}");
        assert!(text.contains("left out: 2 entries that are not tensors"), "{text}");
        let out = ztensor(&["verify", &path]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let dir = scratch("dcp-native");
    let output = dir.join("model.safetensors");
    let out = ztensor(&["convert", &native(), output.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let full = std::fs::read(root().join("fixtures/external/dcp/full.safetensors")).unwrap();
    let full = SafeTensors::deserialize(&full).unwrap();
    let bytes = std::fs::read(&output).unwrap();
    let got = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(got.len(), full.len());
    for (name, want) in full.tensors() {
        let have = got.tensor(&name).unwrap();
        assert_eq!(
            (have.dtype(), have.shape(), have.data()),
            (want.dtype(), want.shape(), want.data()),
            "{name}"
        );
    }
}

#[test]
fn a_damaged_checkpoint_is_refused_naming_what_is_wrong() {
    let dir = scratch("dcp-damaged");
    let copy = |name: &str| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(native()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to
    };
    // A data file cut short: the chunks in its lost tail lie past its end.
    let cut = copy("cut");
    let data = cut.join("__1_0.distcp");
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes[..bytes.len() / 2]).unwrap();
    let out = ztensor(&["info", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("lies past the end of __1_0.distcp"), "{}", stderr(&out));
    // A .metadata whose pickle names a global outside DCP's records: refused, never run.
    let evil = copy("evil");
    let metadata = std::fs::read(evil.join(".metadata")).unwrap();
    let from = b"torch.distributed.checkpoint.metadata\x94\x8c\x08Metadata";
    let at = metadata.windows(from.len()).position(|w| w == from).expect("the Metadata global");
    let mut changed = metadata.clone();
    // Same lengths: `os.system` in place of the module, `Metadata` kept.
    let module = b"os.system\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    changed[at..at + module.len()].copy_from_slice(module);
    std::fs::write(evil.join(".metadata"), &changed).unwrap();
    let out = ztensor(&["info", evil.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("executes nothing"), "{}", stderr(&out));
}
