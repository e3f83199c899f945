//! A Distributed Checkpoint PyTorch saved through `ztensor_rs.torch.dcp.ZTensorWriter`
//! (`fixtures/external/dcp`, made by its `make.py` with torch at 2 ranks): read as its whole
//! tensors by every command, and consolidated into one file whose tensors are those of the
//! full state dict, as the `safetensors` crate reads the file torch wrote of it. Beside it, the
//! same tensors as DCP's own writers saved them (`native`, `native-zstd`, `hf-shards`).

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

/// The same checkpoint saved with DCP's `ZStandard` storage extension: each chunk's archive
/// is one zstd stream, undone when it is read.
#[test]
fn a_checkpoint_dcp_compressed_with_its_zstd_extension_consolidates() {
    let zstd = root().join("fixtures/external/dcp/native-zstd");
    let metadata = std::fs::read(zstd.join(".metadata")).unwrap();
    assert!(metadata.windows(13).any(|w| w == b"stream.zstd/1"), "not saved through the extension");
    let dir = scratch("dcp-native-zstd");
    let output = dir.join("model.safetensors");
    let out = ztensor(&["convert", zstd.to_str().unwrap(), output.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ztensor(&[
        "diff",
        output.to_str().unwrap(),
        &root().join("fixtures/external/dcp/full.safetensors").display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("0 changed, 4 the same"), "{}", stdout(&out));
    let out = ztensor(&["info", zstd.to_str().unwrap()]);
    assert!(out.status.success() && stdout(&out).contains("tensors:    4\n"), "{}", stdout(&out));
    // Damaged: another extension is refused, named; a compressed chunk with a byte changed
    // fails naming its tensor, as the archive's checks (zstd, then its CRC-32) see it.
    let copy = |name: &str| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&zstd).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to
    };
    let other = copy("other");
    let changed: Vec<u8> = {
        let mut m = metadata.clone();
        for at in 0..m.len() - 13 {
            if &m[at..at + 13] == b"stream.zstd/1" {
                m[at..at + 13].copy_from_slice(b"stream.lz4x/1");
            }
        }
        m
    };
    std::fs::write(other.join(".metadata"), &changed).unwrap();
    let out = ztensor(&["info", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("\"stream.lz4x/1\""), "{}", stderr(&out));
    let flipped = copy("flipped");
    let data = flipped.join("__1_0.distcp");
    let mut bytes = std::fs::read(&data).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&data, &bytes).unwrap();
    let out = ztensor(&[
        "convert",
        flipped.to_str().unwrap(),
        dir.join("bad.safetensors").to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("model."), "{}", stderr(&out));
    assert!(!dir.join("bad.safetensors").exists());
}

/// The same tensors saved through DCP's `HuggingFaceStorageWriter` at 2 ranks: each rank's
/// `shard-RRRRR-model-00001-of-00001.safetensors`, its chunks placed by `DCP_SHARDING_INFO`,
/// with no index and no `.metadata`. The directory reads as the whole tensors and converts
/// (to one file of either generation) to the full state dict.
#[test]
fn dcp_s_safetensors_shards_read_as_one_checkpoint() {
    let shards = root().join("fixtures/external/dcp/hf-shards");
    let path = shards.to_str().unwrap();
    let out = ztensor(&["info", path]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("tensors:    4\n"), "{text}");
    assert!(
        text.contains("[6, 4]") && text.contains("[4, 5]") && text.contains("[3, 3]"),
        "{text}"
    );
    for command in ["verify", "ls"] {
        let out = ztensor(&[command, path]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
    }
    let full = root().join("fixtures/external/dcp/full.safetensors");
    let dir = scratch("dcp-hf-shards");
    for (name, to) in [("model.safetensors", None), ("model.zt", Some("2"))] {
        let output = dir.join(name);
        let mut args = vec!["convert", path, output.to_str().unwrap()];
        if let Some(to) = to {
            args.extend(["--to", to]);
        }
        let out = ztensor(&args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let out = ztensor(&["diff", output.to_str().unwrap(), full.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(stdout(&out).contains("0 changed, 4 the same"), "{name}: {}", stdout(&out));
    }
    // The first rank's shard taken away: its chunks leave holes, told.
    let gap = dir.join("gap");
    std::fs::create_dir_all(&gap).unwrap();
    let second = "shard-00002-model-00001-of-00001.safetensors";
    std::fs::copy(shards.join(second), gap.join(second)).unwrap();
    let out = ztensor(&["info", gap.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("hole in dimension 0: 0 to 3"), "{}", stderr(&out));
    // Beside a sharded checkpoint's index: two checkpoints, each named, neither read.
    std::fs::write(gap.join("model.safetensors.index.json"), "{}").unwrap();
    let out = ztensor(&["info", gap.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("holds 2 checkpoints"), "{said}");
    assert!(said.contains(second) && said.contains("model.safetensors.index.json"), "{said}");
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

/// Columns `cols` of a `rows` × `width` tensor of bytes (element (i, j) is `(i * width + j) %
/// 251`), as a `.npy` file.
fn npy_columns(path: &std::path::Path, rows: usize, width: usize, cols: std::ops::Range<usize>) {
    let dict =
        format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({rows}, {}), }}", cols.len());
    let total = (10 + dict.len() + 1).next_multiple_of(64);
    let mut header = dict.into_bytes();
    header.resize(total - 10 - 1, b' ');
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    bytes.extend_from_slice(&header);
    for i in 0..rows {
        bytes.extend(cols.clone().map(|j| u8::try_from((i * width + j) % 251).unwrap()));
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_tensor_split_by_columns_consolidates_within_an_address_space_smaller_than_it() {
    // A 192 MiB tensor in two chunks of half its columns each (what a DTensor sharded on
    // dimension 1 saves), each in its own compressed, digested shard. Consolidated under an
    // address-space cap of 160 MiB, it cannot be held whole: it is handed over a few rows at a
    // time, each chunk read as a stream.
    let dir = scratch("dcp-columns");
    let (rows, width) = (8192usize, 24576usize);
    let half = width / 2;
    let mut weight_map = Vec::new();
    let mut chunks = Vec::new();
    let mut shards = Vec::new();
    for (k, cols) in [0..half, half..width].into_iter().enumerate() {
        let npy = dir.join(format!("w{k}.npy"));
        npy_columns(&npy, rows, width, cols.clone());
        let shard = format!("model-0000{}-of-00002.zt", k + 1);
        let out = ztensor(&[
            "convert",
            npy.to_str().unwrap(),
            dir.join(&shard).to_str().unwrap(),
            "--zstd",
            "1",
            "--digest",
            "sha256",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        std::fs::remove_file(&npy).unwrap();
        let object =
            stdout(&ztensor(&["ls", dir.join(&shard).to_str().unwrap()])).trim().to_owned();
        let size = std::fs::metadata(dir.join(&shard)).unwrap().len();
        weight_map.push(format!("\"{object}\": \"{shard}\""));
        shards.push(format!(
            "\"{shard}\": {{\"size\": {size}, \"digest\": \"sha256:{}\"}}",
            "0".repeat(64)
        ));
        chunks.push(format!(
            "{{\"offsets\": [0, {}], \"sizes\": [{rows}, {half}], \"object\": \"{object}\"}}",
            cols.start
        ));
    }
    let index = format!(
        "{{\"metadata\": {{\"total_size\": {}}}, \"shards\": {{{}}}, \"weight_map\": {{{}}}, \
         \"dcp\": {{\"format\": 1, \"state_dict\": {{\"w\": {{\"kind\": \"tensor\", \
         \"dtype\": \"uint8\", \"size\": [{rows}, {width}], \"chunks\": [{}]}}}}}}}}",
        rows * width,
        shards.join(", "),
        weight_map.join(", "),
        chunks.join(", ")
    );
    let index_path = dir.join("model.zt.index.json");
    std::fs::write(&index_path, index).unwrap();
    let out_path = dir.join("whole.safetensors");
    let out = std::process::Command::new("prlimit")
        .arg(format!("--as={}", 160u64 << 20))
        .args(["--", env!("CARGO_BIN_EXE_ztensor"), "convert"])
        .args([&index_path, &out_path])
        .args(["--memory", "64MiB", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&out_path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let w = st.tensor("w").unwrap();
    assert_eq!(w.shape(), [rows, width]);
    let data = w.data();
    assert_eq!(data.len(), rows * width);
    for (i, row) in data.chunks(width).enumerate() {
        let want = (i * width) % 251;
        assert_eq!(usize::from(row[0]), want, "row {i}");
        assert!(
            row.iter().enumerate().all(|(j, &b)| usize::from(b) == (i * width + j) % 251),
            "row {i}"
        );
    }
}
