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
