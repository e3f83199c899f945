//! The tool as a user runs it on safetensors checkpoints (single and sharded, with FP8 and
//! `__metadata__`), and every command's success and failure. safetensors outputs are read back
//! by the `safetensors` crate, independently of this project's reader and writer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::TensorView;

use super::{json, scratch, stderr, stdout, ztensor};

/// A tensor: name, dtype, shape, bytes.
type Spec = (String, Dtype, Vec<usize>, Vec<u8>);

/// A tensor as read back: dtype, shape, bytes.
type Stored = (Dtype, Vec<usize>, Vec<u8>);

fn specs() -> Vec<Spec> {
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let bf16s = |v: &[f32]| {
        v.iter().flat_map(|x| half::bf16::from_f32(*x).to_le_bytes()).collect::<Vec<u8>>()
    };
    vec![
        ("w.f32".into(), Dtype::F32, vec![2, 3], f32s(&[1.0, -2.0, 0.5, 0.25, 3.0, -1.5])),
        ("w.bf16".into(), Dtype::BF16, vec![4], bf16s(&[1.0, 2.0, -0.5, 8.0])),
        // FP8 E4M3: 0x38 is 1.0, 0x7e is 448 (the largest finite value), 0xb8 is -1.0.
        ("w.fp8".into(), Dtype::F8_E4M3, vec![3], vec![0x38, 0x7e, 0xb8]),
        ("w.fp8b".into(), Dtype::F8_E5M2, vec![2], vec![0x3c, 0xc0]),
        (
            "ids".into(),
            Dtype::I64,
            vec![2],
            [7i64, -9].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        ("mask".into(), Dtype::BOOL, vec![3], vec![1, 0, 1]),
    ]
}

fn metadata() -> HashMap<String, String> {
    [("format".into(), "pt".into())].into()
}

fn write_safetensors(path: &Path, specs: &[Spec], metadata: Option<HashMap<String, String>>) {
    let views: Vec<(&str, TensorView<'_>)> = specs
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    std::fs::write(path, safetensors::serialize(views, metadata).unwrap()).unwrap();
}

/// Shards `specs` into `n` files with an index; returns the index path.
fn write_sharded(dir: &Path, specs: &[Spec], n: usize) -> PathBuf {
    let mut map = serde_json::Map::new();
    let per = specs.len().div_ceil(n);
    for (i, chunk) in specs.chunks(per).enumerate() {
        let name = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        write_safetensors(&dir.join(&name), chunk, Some(metadata()));
        for t in chunk {
            map.insert(t.0.clone(), name.clone().into());
        }
    }
    let index = dir.join("model.safetensors.index.json");
    let body = serde_json::json!({"metadata": {"total_size": 1}, "weight_map": map});
    std::fs::write(&index, body.to_string()).unwrap();
    index
}

/// Reads a safetensors file with the `safetensors` crate: tensors by name, and metadata.
fn read_back(path: &Path) -> (HashMap<String, Stored>, Option<HashMap<String, String>>) {
    let bytes = std::fs::read(path).unwrap();
    let parsed = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tensors = parsed
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, (v.dtype(), v.shape().to_vec(), v.data().to_vec())))
        .collect();
    let metadata = safetensors::SafeTensors::read_metadata(&bytes).unwrap().1.metadata().clone();
    (tensors, metadata)
}

fn assert_same(path: &Path, specs: &[Spec], metadata: Option<HashMap<String, String>>) {
    let (tensors, got_metadata) = read_back(path);
    assert_eq!(tensors.len(), specs.len());
    for (n, d, s, b) in specs {
        assert_eq!(tensors[n], (*d, s.clone(), b.clone()), "{n}");
    }
    assert_eq!(got_metadata, metadata);
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = ztensor(args);
    assert!(out.status.success(), "{args:?}: {}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// Runs a command that must fail with `status`, returning stderr.
fn fails(args: &[&str], status: i32) -> String {
    let out = ztensor(args);
    assert_eq!(out.status.code(), Some(status), "{args:?}: {}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.starts_with("ztensor: "), "{err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    err
}

#[test]
fn safetensors_round_trip_with_fp8_and_metadata() {
    let d = scratch("st-roundtrip");
    let (st, zt, back) = (d.join("in.safetensors"), d.join("m.zt"), d.join("out.safetensors"));
    write_safetensors(&st, &specs(), Some(metadata()));
    let out = ok(&[
        "convert",
        arg(&st),
        arg(&zt),
        "--zstd",
        "3",
        "--zstd-always",
        "--digest",
        "sha256",
        "--threads",
        "2",
    ]);
    assert!(out.contains("(zTensor 1.2, 6 objects:"), "{out}");
    // The zTensor file holds FP8 as u8 with the logical type, and the metadata as attributes.
    let info = json(&ztensor(&["info", "--json", arg(&zt)]));
    let fp8 = info["objects"].as_array().unwrap().iter().find(|o| o["name"] == "w.fp8").unwrap();
    assert_eq!(fp8["components"]["data"]["dtype"], "u8");
    assert_eq!(fp8["components"]["data"]["type"], "f8_e4m3fn");
    assert_eq!(fp8["components"]["data"]["encoding"], "zstd");
    assert_eq!(info["attributes"], serde_json::json!({"format": "pt"}));
    assert!(ok(&["verify", arg(&zt)]).contains("6 digests verified"));
    // And back, read by the safetensors crate.
    ok(&["convert", arg(&zt), arg(&back)]);
    assert_same(&back, &specs(), Some(metadata()));
    // The exported file is the crate's own serialization of the same tensors, byte for byte.
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&st).unwrap());
}

#[test]
fn sharded_checkpoint_becomes_one_file_and_back() {
    let d = scratch("st-sharded");
    let index = write_sharded(&d, &specs(), 3);
    let zt = d.join("model.zt");
    let out = ok(&["convert", arg(&index), arg(&zt), "--zstd", "1", "--threads", "2"]);
    assert!(out.contains("6 objects"), "{out}");
    // --quiet: no summary line.
    let quiet = d.join("quiet.zt");
    assert_eq!(ok(&["convert", arg(&index), arg(&quiet), "--zstd", "1", "-q"]), "");
    assert_eq!(std::fs::read(&quiet).unwrap(), std::fs::read(&zt).unwrap());
    let info = ok(&["info", arg(&index)]);
    assert!(info.contains("sharded safetensors (3 shards)"), "{info}");
    let back = d.join("all.safetensors");
    ok(&["convert", arg(&zt), arg(&back)]);
    assert_same(&back, &specs(), Some(metadata()));
    // Straight from the index to one safetensors file, too.
    let direct = d.join("direct.safetensors");
    ok(&["convert", arg(&index), arg(&direct)]);
    assert_eq!(std::fs::read(&direct).unwrap(), std::fs::read(&back).unwrap());
}

#[test]
fn convert_failures_name_the_file_the_tensor_and_the_reason() {
    let d = scratch("st-convert-fail");
    // A shard holding a tensor the index does not list.
    let index = write_sharded(&d, &specs(), 2);
    let body = std::fs::read_to_string(&index).unwrap().replace("\"mask\":", "\"renamed\":");
    std::fs::write(&index, body).unwrap();
    let err = fails(&["convert", arg(&index), arg(&d.join("x.zt"))], 1);
    assert!(err.contains("model.safetensors.index.json"), "{err}");
    assert!(
        err.contains("tensor \"mask\" in model-00002-of-00002.safetensors is not listed"),
        "{err}"
    );
    assert!(!d.join("x.zt").exists());
    // A missing input.
    let err = fails(&["convert", "no-such.safetensors", arg(&d.join("x.zt"))], 2);
    assert!(err.contains("no-such.safetensors"), "{err}");
    // A corrupt safetensors file.
    let st = d.join("bad.safetensors");
    write_safetensors(&st, &specs(), None);
    let mut bytes = std::fs::read(&st).unwrap();
    bytes.pop();
    std::fs::write(&st, bytes).unwrap();
    let err = fails(&["convert", arg(&st), arg(&d.join("x.zt"))], 1);
    assert!(err.contains("bad.safetensors: the header describes"), "{err}");
    // What safetensors cannot hold: a sparse object, named.
    let err =
        fails(&["convert", "fixtures/examples/tiny-v1.2.zt", arg(&d.join("t.safetensors"))], 1);
    assert!(
        err.contains("tensor \"adjacency\": safetensors cannot hold a sparse_csr object"),
        "{err}"
    );
    assert!(!d.join("t.safetensors").exists());
    // FP8 into 0.1, which has no logical types, and metadata into 0.1, which has no attributes.
    let st = d.join("fp8.safetensors");
    write_safetensors(&st, &specs(), Some(metadata()));
    let err = fails(&["convert", arg(&st), arg(&d.join("old.zt")), "--to", "0.1"], 1);
    assert!(err.contains("__metadata__ cannot be kept"), "{err}");
    let err = fails(
        &["convert", arg(&st), arg(&d.join("old.zt")), "--to", "0.1", "--drop-attributes"],
        1,
    );
    assert!(err.contains("\"w.fp8\""), "{err}");
}

#[test]
fn info_ls_and_verify() {
    let d = scratch("st-look");
    let st = d.join("m.safetensors");
    write_safetensors(&st, &specs(), Some(metadata()));
    let info = json(&ztensor(&["info", "--json", arg(&st)]));
    assert_eq!(info["format"], "safetensors");
    assert_eq!(info["tensors"].as_array().unwrap().len(), 6);
    assert!(ok(&["verify", arg(&st)]).contains("sound (a safetensors file: 6 tensors"));
    let zt = d.join("m.zt");
    ok(&["convert", arg(&st), arg(&zt)]);
    assert_eq!(ok(&["ls", arg(&zt)]), "ids\nmask\nw.bf16\nw.f32\nw.fp8\nw.fp8b\n");
    assert_eq!(ok(&["ls", arg(&zt), "w.fp8*", "ma?k"]), "mask\nw.fp8\nw.fp8b\n");
    assert_eq!(
        json(&ztensor(&["ls", "--json", arg(&zt), "w.[bf]*"])),
        serde_json::json!(["w.bf16", "w.f32", "w.fp8", "w.fp8b"])
    );
    // Nothing matched is status 1, like grep; a missing file is 2; a foreign file is listed
    // like any other (it was refused before the tensor-source interface).
    assert_eq!(ztensor(&["ls", arg(&zt), "nothing*"]).status.code(), Some(1));
    assert!(fails(&["ls", "missing.zt"], 2).contains("missing.zt"));
    assert_eq!(ok(&["ls", arg(&st)]), ok(&["ls", arg(&zt)]));
    let report = json(&ztensor(&["verify", "--json", "--threads", "2", arg(&zt)]));
    assert_eq!(report["sound"], true);
    assert_eq!(report["objects"], 6);
}

#[test]
fn append_adds_in_place_and_refuses_clashes_untouched() {
    let d = scratch("append");
    let all = specs();
    let (first, second) = (d.join("a.safetensors"), d.join("b.safetensors"));
    write_safetensors(&first, &all[..3], None);
    write_safetensors(&second, &all[3..], None);
    let zt = d.join("m.zt");
    ok(&["convert", arg(&first), arg(&zt)]);
    let before = std::fs::read(&zt).unwrap();
    let out = ok(&["append", arg(&zt), "--from", arg(&second), "--zstd", "3"]);
    assert!(out.contains("appended 3 objects"), "{out}");
    // The old bytes are untouched; everything is there.
    let after = std::fs::read(&zt).unwrap();
    assert_eq!(&after[..before.len() - 16], &before[..before.len() - 16]);
    let back = d.join("all.safetensors");
    ok(&["convert", arg(&zt), arg(&back)]);
    assert_same(&back, &all, None);
    // Appending the same tensors again is refused before a byte is written.
    let err = fails(&["append", arg(&zt), "--from", arg(&second)], 1);
    assert!(err.contains("already holds \"ids\", \"mask\", \"w.fp8b\""), "{err}");
    assert_eq!(std::fs::read(&zt).unwrap(), after);
    // Appending a zTensor file works too; appending to a 0.1 file does not.
    let other = d.join("other.zt");
    ok(&["remove", "fixtures/examples/tiny-v1.2.zt", "scales.fp8", "-o", arg(&other)]);
    ok(&["append", arg(&zt), "--from", arg(&other)]);
    assert_eq!(ok(&["ls", arg(&zt), "layer0.*"]), "layer0.bias\nlayer0.weight\n");
    let old = d.join("old.zt");
    std::fs::copy(super::root().join("fixtures/examples/tiny-v0.1.zt"), &old).unwrap();
    let err = fails(&["append", arg(&old), "--from", arg(&second)], 1);
    assert!(err.contains("append needs a v1.x file"), "{err}");
}

#[test]
fn remove_writes_a_copy_without_the_names() {
    let d = scratch("remove");
    let out = d.join("r.zt");
    let msg = ok(&[
        "remove",
        "fixtures/examples/tiny-v1.2.zt",
        "scales.fp8",
        "adjacency",
        "-o",
        arg(&out),
    ]);
    assert!(msg.contains("(2 objects,"), "{msg}");
    assert_eq!(ok(&["ls", arg(&out)]), "layer0.bias\nlayer0.weight\n");
    let err = fails(&["remove", "fixtures/examples/tiny-v1.2.zt", "nope", "-o", arg(&out)], 2);
    assert!(err.contains("\"nope\""), "{err}");
    assert_eq!(ok(&["ls", arg(&out)]), "layer0.bias\nlayer0.weight\n", "the output is untouched");
    // In place: the file is replaced atomically, and nothing is left beside it. A name given
    // twice is removed once.
    let msg = ok(&["remove", arg(&out), "layer0.bias", "layer0.bias", "-o", arg(&out)]);
    assert!(msg.contains("(1 object,"), "{msg}");
    assert_eq!(ok(&["ls", arg(&out)]), "layer0.weight\n");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
}

/// Writing another format (or an extracted array) over an input would replace the user's file:
/// refused, and the input is left as it was. zTensor to zTensor in place stays allowed.
#[test]
fn outputs_that_are_an_input_are_refused() {
    let d = scratch("same-file");
    let st = d.join("m.safetensors");
    write_safetensors(&st, &specs(), None);
    let before = std::fs::read(&st).unwrap();
    let err = fails(&["convert", arg(&st), arg(&st)], 2);
    assert!(err.contains("is also the input"), "{err}");
    let zt = d.join("m.zt");
    ok(&["convert", arg(&st), arg(&zt)]);
    let zt_bytes = std::fs::read(&zt).unwrap();
    // The same file under a name of no format written, and by a hard link.
    let unnamed = d.join("m.data");
    std::fs::copy(&zt, &unnamed).unwrap();
    let linked = d.join("linked.zt");
    std::fs::hard_link(&zt, &linked).unwrap();
    for args in [
        vec!["convert", arg(&unnamed), arg(&unnamed), "--to", "safetensors"],
        vec!["convert", arg(&unnamed), arg(&unnamed), "--to", "tensorbuffers"],
        vec!["convert", arg(&zt), arg(&zt), "--to", "2"],
        vec!["convert", arg(&zt), arg(&linked), "--to", "2"],
        vec!["extract", arg(&zt), "w.f32", "-o", arg(&zt)],
    ] {
        let err = fails(&args, 2);
        assert!(err.contains("is also the input"), "{args:?}: {err}");
    }
    // A name that says zTensor is not given safetensors, over the input or not.
    for to in ["safetensors", "tensorbuffers"] {
        let err = fails(&["convert", arg(&zt), arg(&zt), "--to", to], 2);
        assert!(err.contains("is named as a zTensor file, but --to"), "{to}: {err}");
    }
    assert_eq!(std::fs::read(&unnamed).unwrap(), zt_bytes);
    assert_eq!(std::fs::read(&st).unwrap(), before);
    assert_eq!(std::fs::read(&zt).unwrap(), zt_bytes);
    ok(&["convert", arg(&zt), arg(&zt), "--to", "1.1"]);
    // A shard of a checkpoint is an input too.
    let index = write_sharded(&d, &specs(), 2);
    let shard = d.join("model-00001-of-00002.safetensors");
    let shard_bytes = std::fs::read(&shard).unwrap();
    let err = fails(&["convert", arg(&index), arg(&shard)], 2);
    assert!(err.contains("is also the input"), "{err}");
    assert_eq!(std::fs::read(&shard).unwrap(), shard_bytes);
    // Nothing temporary is left behind.
    let hidden = std::fs::read_dir(&d)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(hidden, 0);
}

#[test]
fn extract_writes_npy_and_refuses_what_has_no_array_form() {
    let d = scratch("extract");
    let st = d.join("m.safetensors");
    write_safetensors(&st, &specs(), None);
    let zt = d.join("m.zt");
    ok(&["convert", arg(&st), arg(&zt), "--zstd", "2"]);
    let npy = d.join("w.npy");
    let msg = ok(&["extract", arg(&zt), "w.f32", "-o", arg(&npy)]);
    assert!(msg.contains("(<f4 [2, 3], 6 elements)"), "{msg}");
    let bytes = std::fs::read(&npy).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert_eq!(header.trim_end(), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    assert_eq!((10 + header_len) % 64, 0);
    assert_eq!(&bytes[10 + header_len..], &specs()[0].3[..]);
    // FP8 is widened to f32 exactly.
    let msg = ok(&["extract", arg(&zt), "w.fp8", "-o", arg(&npy)]);
    assert!(msg.contains("f8_e4m3fn widened to f32 (exact)"), "{msg}");
    let bytes = std::fs::read(&npy).unwrap();
    let values: Vec<f32> = bytes[bytes.len() - 12..]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values, [1.0, 448.0, -1.0]);
    // Not found; quantized groups have no array form.
    let err = fails(&["extract", arg(&zt), "nope", "-o", arg(&npy)], 2);
    assert!(err.contains("\"nope\""), "{err}");
    let q = super::root().join("fixtures/v1.2/valid");
    let quantized = std::fs::read_dir(&q)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy().contains("quantized") && p.extension().is_some_and(|e| e == "zt")
        })
        .expect("a quantized fixture");
    let name = json(&ztensor(&["ls", "--json", arg(&quantized)]))[0].as_str().unwrap().to_owned();
    let err = fails(&["extract", arg(&quantized), &name, "-o", arg(&npy)], 1);
    assert!(err.contains("has no NumPy array form"), "{err}");
}

#[test]
fn cat_prints_values_up_to_the_limit() {
    let d = scratch("cat");
    let st = d.join("m.safetensors");
    write_safetensors(&st, &specs(), None);
    let zt = d.join("m.zt");
    ok(&["convert", arg(&st), arg(&zt)]);
    assert_eq!(
        ok(&["cat", arg(&zt), "w.f32"]),
        "# w.f32: <f4 [2, 3], 6 elements\n1 -2 0.5\n0.25 3 -1.5\n"
    );
    assert_eq!(
        ok(&["cat", arg(&zt), "w.f32", "--limit", "4"]),
        "# w.f32: <f4 [2, 3], 6 elements\n1 -2 0.5\n0.25\n... (2 more; --limit 0 prints all)\n"
    );
    assert!(ok(&["cat", arg(&zt), "w.bf16"]).ends_with("1 2 -0.5 8\n"));
    assert!(ok(&["cat", arg(&zt), "mask"]).ends_with("true false true\n"));
    assert!(ok(&["cat", arg(&zt), "ids"]).ends_with("7 -9\n"));
    let err = fails(&["cat", arg(&zt), "nope"], 2);
    assert!(err.contains("\"nope\""), "{err}");
}

#[test]
fn diff_reports_added_removed_and_changed() {
    let d = scratch("diff");
    let (a, b) = (d.join("a.safetensors"), d.join("b.safetensors"));
    let mut changed = specs();
    changed[0].3[0] ^= 1; // w.f32 content
    changed[1].2 = vec![2, 2]; // w.bf16 shape
    changed.retain(|t| t.0 != "ids");
    changed.push(("extra".into(), Dtype::U8, vec![1], vec![1]));
    write_safetensors(&a, &specs(), None);
    write_safetensors(&b, &changed, None);
    let (za, zb) = (d.join("a.zt"), d.join("b.zt"));
    ok(&["convert", arg(&a), arg(&za)]);
    ok(&["convert", arg(&b), arg(&zb), "--zstd", "5"]);
    let out = ztensor(&["diff", arg(&za), arg(&zb)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "- ids\n+ extra\n~ w.bf16: shape [4] -> [2, 2]\n~ w.f32: content (data)\n1 removed, 1 added, 2 changed, 3 the same\n"
    );
    let report = json(&ztensor(&["diff", "--json", arg(&za), arg(&zb)]));
    assert_eq!(report["same"], 3);
    // The same content, differently encoded, is no difference.
    let zc = d.join("c.zt");
    ok(&["convert", arg(&za), arg(&zc), "--zstd", "9", "--digest", "blake3"]);
    assert_eq!(ok(&["diff", arg(&za), arg(&zc)]), "0 removed, 0 added, 0 changed, 6 the same\n");
    fails(&["diff", arg(&za), "missing.zt"], 2);
}

#[test]
fn every_command_has_an_example_in_its_help() {
    // The commands as the tool lists them, so a new one cannot be missed here; README's rows
    // for them are checked in `readme.rs`.
    for command in super::readme::commands() {
        let help = ok(&[&command, "--help"]);
        assert!(help.contains("Example: ztensor "), "{command}: {help}");
    }
    let help = ok(&["--help"]);
    assert!(help.contains("Exit status: 0 on success; 1 when the data says no"), "{help}");
}

#[test]
fn help_names_every_format_the_tool_reads_and_writes() {
    let reads = [
        "zTensor",
        "zTensor 2",
        "safetensors",
        "TensorBuffers",
        ".npy",
        ".npz",
        "GGUF",
        "PyTorch",
        ".pth",
    ];
    for command in [
        &["--help"][..],
        &["convert", "--help"],
        &["info", "--help"],
        &["ls", "--help"],
        &["verify", "--help"],
        &["extract", "--help"],
        &["diff", "--help"],
        &["cat", "--help"],
        &["append", "--help"],
    ] {
        let help = ok(command);
        for format in reads {
            assert!(help.contains(format), "{command:?} does not name {format}");
        }
    }
    // What is written, and an example for each family of input.
    for command in [&["--help"][..], &["convert", "--help"]] {
        let help = ok(command);
        assert!(help.contains(".safetensors") && help.contains("TensorBuffers"), "{help}");
        for example in [
            "Example: ztensor convert model.safetensors.index.json model.zt",
            "Example: ztensor convert model.pth model.zt",
            "Example: ztensor convert model.gguf model.zt",
            "Example: ztensor convert arrays.npz arrays.zt",
        ] {
            assert!(help.contains(example), "{command:?} lacks {example:?}");
        }
    }
}

/// A line of the tool's output with what changes from run to run (seconds, the peak memory
/// measured) made constant.
fn steady(line: &str) -> String {
    let mut out = line.to_owned();
    if let Some(i) = out.find(" in ")
        && let Some(j) = out[i + 4..].find(" s").map(|j| i + 4 + j)
        && out[i + 4..j].chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        out.replace_range(i + 4..j, "T");
    }
    if let Some(i) = out.find(", peak memory ") {
        let from = i + ", peak memory ".len();
        let len = out[from..].find([',', '\n']).unwrap_or(out.len() - from);
        out.replace_range(from..from + len, "P");
    }
    out
}

#[test]
fn the_readme_quick_start_and_tour_print_what_the_readme_shows() {
    // Every `$ ` command of README.md's console blocks, in order, each block in a directory of
    // its own holding a copy of the bundled checkpoint (as the quick start and the tour make),
    // with the built `ztensor` first on PATH: each prints what the README shows under it. ZT_README_BLESS=1 writes what they
    // print into the README instead.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    // Each console block follows `cd "$(mktemp -d)" && cp -r …/checkpoint .`: a directory of
    // its own holding a copy of the bundled checkpoint.
    let fresh = |n: usize| {
        let d = scratch(&format!("readme-{n}"));
        let copy = std::process::Command::new("cp")
            .args(["-r", "fixtures/examples/checkpoint"])
            .arg(&d)
            .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
            .status()
            .unwrap();
        assert!(copy.success());
        d
    };
    let mut d = fresh(0);
    let bin = Path::new(env!("CARGO_BIN_EXE_ztensor")).parent().unwrap().to_owned();
    let search = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |dir: &Path, command: &str| -> String {
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(dir)
            .env("PATH", &search)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let bless = std::env::var_os("ZT_README_BLESS").is_some();
    let mut blessed = String::new();
    let (mut in_console, mut commands, mut blocks) = (false, 0, 0);
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        blessed.push_str(line);
        blessed.push('\n');
        if line == "```console" {
            in_console = true;
            blocks += 1;
            d = fresh(blocks);
            continue;
        }
        if !in_console {
            continue;
        }
        if line == "```" {
            in_console = false;
            continue;
        }
        let Some(command) = line.strip_prefix("$ ") else {
            panic!("console block line outside any command: {line:?}");
        };
        commands += 1;
        let mut shown = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("$ ") || *next == "```" {
                break;
            }
            shown.push(lines.next().unwrap());
        }
        // A blank line between commands belongs to the block, not to the output.
        let blank_after = shown.last() == Some(&"");
        if blank_after {
            shown.pop();
        }
        let printed = run(&d, command);
        if bless {
            blessed.push_str(&printed);
            if blank_after {
                blessed.push('\n');
            }
            continue;
        }
        let want: Vec<String> = shown.iter().map(|l| steady(l)).collect();
        let got: Vec<String> = printed.lines().map(steady).collect();
        assert_eq!(got, want, "README: $ {command}");
    }
    assert!(commands >= 10, "only {commands} commands found in the README");
    if bless {
        std::fs::write(&path, blessed).unwrap();
    }
}

#[test]
fn tensorbuffers_to_safetensors_leaves_only_its_output() {
    let d = scratch("tb-st");
    let (st, zt) = (d.join("s.safetensors"), d.join("s.zt"));
    let tb = "fixtures/tensorbuffers/valid/sample.tb";
    // Operations are not text, so safetensors metadata cannot hold them unless dropped.
    let ops = "fixtures/tensorbuffers/valid/model-and-operations.tb";
    let err = fails(&["convert", ops, arg(&st)], 1);
    assert!(err.contains("tensorbuffers.operations") && err.contains("--drop-attributes"), "{err}");
    assert!(!st.exists());
    // --drop-attributes drops only what the target cannot hold: the text model name stays.
    ok(&["convert", ops, arg(&st), "--drop-attributes"]);
    let kept = HashMap::from([("tensorbuffers.model".to_owned(), "example".to_owned())]);
    assert_eq!(read_back(&st).1, Some(kept));
    ok(&["convert", tb, arg(&st)]);
    ok(&["convert", tb, arg(&zt)]);
    // The same tensors, byte for byte, as the direct conversion to zTensor holds.
    let (tensors, _) = read_back(&st);
    let names: Vec<String> = ok(&["ls", arg(&zt)]).lines().map(str::to_owned).collect();
    assert_eq!(tensors.len(), names.len());
    for name in &names {
        let out = ztensor(&["extract", arg(&zt), name, "-o", arg(&d.join("t.npy"))]);
        assert!(out.status.success(), "{}", stderr(&out));
        let npy = std::fs::read(d.join("t.npy")).unwrap();
        assert!(npy.ends_with(&tensors[name].2), "{name}");
    }
    let mut left: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["s.safetensors", "s.zt", "t.npy"]);
}

#[test]
fn ls_cat_diff_and_extract_read_every_format_alike() {
    // One checkpoint in five forms: the sharded safetensors original, its zTensor conversion,
    // one safetensors file, TensorBuffers (which holds only its f32 tensors, so those are
    // compared), and zTensor 0.1.
    let d = scratch("every-format");
    let index = "fixtures/examples/checkpoint/model.safetensors.index.json";
    let zt = d.join("m.zt");
    let st = d.join("m.safetensors");
    ok(&["convert", index, arg(&zt), "--zstd", "3", "--digest", "sha256"]);
    ok(&["convert", arg(&zt), arg(&st)]);
    let names = ok(&["ls", arg(&zt)]);
    assert_eq!(names.lines().count(), 6);
    for input in [index, arg(&st)] {
        assert_eq!(ok(&["ls", input]), names, "{input}");
        assert_eq!(ok(&["ls", input, "layers.*.weight"]), "layers.0.weight\nlayers.1.weight\n");
        // The same content whatever the format: diff finds nothing, both ways.
        let same = ok(&["diff", input, arg(&zt)]);
        assert!(same.ends_with("0 removed, 0 added, 0 changed, 6 the same\n"), "{same}");
        assert!(ok(&["diff", arg(&zt), input]).ends_with("6 the same\n"));
        for name in names.lines() {
            assert_eq!(
                ok(&["cat", input, name, "--limit", "0"]),
                ok(&["cat", arg(&zt), name, "--limit", "0"]),
                "{input} {name}"
            );
        }
    }
    // An extracted array is byte-identical from every format.
    let npy = |input: &str, name: &str, to: &str| {
        let out = d.join(to);
        ok(&["extract", input, name, "-o", arg(&out)]);
        std::fs::read(out).unwrap()
    };
    for name in ["embed.weight", "layers.1.weight"] {
        let want = npy(arg(&zt), name, "a.npy");
        assert_eq!(npy(index, name, "b.npy"), want, "{name}");
        assert_eq!(npy(arg(&st), name, "c.npy"), want, "{name}");
    }
    // TensorBuffers: its own fixture, and the zTensor conversion of it.
    let tb = "fixtures/tensorbuffers/valid/sample.tb";
    let tz = d.join("tb.zt");
    ok(&["convert", tb, arg(&tz)]);
    assert_eq!(ok(&["ls", tb]), ok(&["ls", arg(&tz)]));
    assert!(ok(&["diff", tb, arg(&tz)]).ends_with("0 changed, 2 the same\n"));
    for name in ok(&["ls", tb]).lines() {
        assert_eq!(ok(&["cat", tb, name]), ok(&["cat", arg(&tz), name]), "{name}");
        assert_eq!(npy(tb, name, "d.npy"), npy(arg(&tz), name, "e.npy"), "{name}");
    }
    // A difference is found across formats too: one tensor less, status 1.
    let small = d.join("small.zt");
    ok(&["remove", arg(&zt), "lm_head.weight", "-o", arg(&small)]);
    let out = ztensor(&["diff", arg(&st), arg(&small)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with("- lm_head.weight\n"), "{}", stdout(&out));
    // A missing name is reported by name, status 2.
    let err = fails(&["cat", arg(&st), "nope"], 2);
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn conversions_between_foreign_formats_need_no_scratch_file() {
    // safetensors -> TensorBuffers -> safetensors, directly: only the outputs are left, and the
    // round trip keeps every tensor's bytes (f32 and i64, types both formats have).
    let d = scratch("foreign-foreign");
    let st = d.join("a.safetensors");
    let specs: Vec<Spec> =
        specs().into_iter().filter(|s| s.1 == Dtype::F32 || s.1 == Dtype::I64).collect();
    assert!(!specs.is_empty());
    write_safetensors(&st, &specs, None);
    let (tb, back) = (d.join("a.tb"), d.join("b.safetensors"));
    ok(&["convert", arg(&st), arg(&tb)]);
    ok(&["convert", arg(&tb), arg(&back)]);
    let (a, _) = read_back(&st);
    let (b, _) = read_back(&back);
    assert_eq!(a, b);
    let mut left: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["a.safetensors", "a.tb", "b.safetensors"]);
}

#[test]
fn drop_attributes_downgrades_a_1x_file_with_attributes() {
    // tiny-v1.2.zt carries file attributes; its FP8 tensor cannot go to 0.1 at all, so it is
    // removed first.
    let d = scratch("downgrade");
    let plain = d.join("plain.zt");
    ok(&["remove", "fixtures/examples/tiny-v1.2.zt", "scales.fp8", "-o", arg(&plain)]);
    let old = d.join("old.zt");
    for command in ["convert", "repack"] {
        let err = fails(&[command, arg(&plain), arg(&old), "--to", "0.1"], 1);
        assert!(err.contains("no file attributes") && err.contains("--drop-attributes"), "{err}");
        assert_eq!(err.matches("--drop-attributes").count(), 1, "one hint: {err}");
        assert!(!old.exists());
        ok(&[command, arg(&plain), arg(&old), "--to", "0.1", "--drop-attributes"]);
        let info = json(&ztensor(&["info", "--json", arg(&old)]));
        assert_eq!(info["version"], "0.1", "{command}");
        assert!(info["attributes"].is_null(), "{command}: {info}");
        // The data is all there; the dropped attributes are named.
        let out = ztensor(&["diff", arg(&plain), arg(&old)]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        assert_eq!(
            stdout(&out),
            "- file attribute license: \"CC0-1.0\"\n- file attribute framework: \"example\"\n\
             0 removed, 0 added, 0 changed, 3 the same; file attributes: 2 removed, 0 added, 0 \
             changed\n"
        );
        let same = ok(&["diff", "--ignore-attributes", arg(&plain), arg(&old)]);
        assert!(same.ends_with("0 changed, 3 the same (attributes not compared)\n"), "{same}");
        std::fs::remove_file(&old).unwrap();
    }
    // One hint, in the flag's words, whichever library refused: safetensors metadata holds only
    // text, TensorBuffers no file attributes at all.
    let ops = "fixtures/tensorbuffers/valid/model-and-operations.tb";
    for (input, output) in [(ops, "o.safetensors"), ("fixtures/examples/tiny-v1.2.zt", "o.tb")] {
        let err = fails(&["convert", input, arg(&d.join(output))], 1);
        assert_eq!(err.matches("--drop-attributes").count(), 1, "{err}");
        assert!(!err.contains("drop attributes to discard"), "{err}");
    }
    // Within 1.x the flag drops them too.
    let kept = d.join("kept.zt");
    ok(&["convert", arg(&plain), arg(&kept), "--to", "1.1", "--drop-attributes"]);
    assert!(json(&ztensor(&["info", "--json", arg(&kept)]))["attributes"].is_null());
}

#[test]
fn inputs_it_does_not_read_are_named_and_refused_as_requests() {
    let d = scratch("unknown-inputs");
    let cases: [(&str, &[u8], &str); 4] = [
        ("notes.txt", b"hello, tensors\n", "a text file"),
        ("config.json", b"{\"hidden_size\": 4096}\n", "JSON text"),
        ("weights.zt", b"\x89HDF\r\n\x1a\n\x00\x00\x00\x00\x00\x00\x00\x00", "an HDF5 file"),
        ("archive.zip", b"PK\x03\x04\x14\x00\x00\x00", "a zip archive"),
    ];
    for (name, bytes, what) in cases {
        let path = d.join(name);
        std::fs::write(&path, bytes).unwrap();
        for command in ["info", "ls", "verify"] {
            let err = fails(&[command, arg(&path)], 2);
            assert!(err.contains(&format!("this is {what}")), "{command} {name}: {err}");
            assert!(err.contains("it reads zTensor 0.1, 1.1 and 1.2 files"), "{err}");
            assert!(
                err.contains(
                    "GGUF files, PyTorch checkpoints (torch.save) and PyTorch Distributed"
                ),
                "{err}"
            );
        }
        let err = fails(&["convert", arg(&path), arg(&d.join("out.zt"))], 2);
        assert!(err.contains(&format!("this is {what}")), "{err}");
    }
    // A damaged archive named like a checkpoint gets the reason (status 1).
    std::fs::write(d.join("model.pt"), b"PK\x03\x04\x14\x00\x00\x00").unwrap();
    let err = fails(&["info", arg(&d.join("model.pt"))], 1);
    assert!(err.contains("no end-of-central-directory record"), "{err}");
    // A damaged file named .zt is still judged by the zTensor rules (status 1).
    std::fs::write(d.join("damaged.zt"), b"ZTEN0001 and then nothing valid").unwrap();
    fails(&["info", arg(&d.join("damaged.zt"))], 1);
    // A checkpoint directory: pass its index.
    let err = fails(&["info", "fixtures/examples/checkpoint"], 2);
    assert!(
        err.contains("pass its index: fixtures/examples/checkpoint/model.safetensors.index.json"),
        "{err}"
    );
    let err = fails(&["ls", "fixtures/examples"], 2);
    assert!(err.contains("fixtures/examples/tiny-v1.2.zt"), "{err}");
}

#[test]
fn errors_name_the_users_paths() {
    let d = scratch("paths");
    // A missing output directory: the output named, not a temporary file.
    let err = fails(&["convert", "fixtures/examples/tiny-v1.2.zt", "/nonexistent/dir/out.zt"], 2);
    assert!(err.contains("cannot write /nonexistent/dir/out.zt"), "{err}");
    assert!(err.contains("the directory /nonexistent/dir does not exist"), "{err}");
    assert!(!err.contains("ztmp"), "{err}");
    // A missing shard: the index that lists it.
    let index = write_sharded(&d, &specs(), 2);
    std::fs::remove_file(d.join("model-00001-of-00002.safetensors")).unwrap();
    let err = fails(&["info", arg(&index)], 2);
    assert!(err.contains("shard \"model-00001-of-00002.safetensors\" is missing"), "{err}");
    assert!(err.contains(&format!("the index {} lists 3 tensor(s)", index.display())), "{err}");
}

/// A safetensors file with tensors of the microscaling dtypes zTensor has no type for.
fn microscaling(path: &Path) {
    let specs: Vec<Spec> = vec![
        ("scales".into(), Dtype::F8_E8M0, vec![4], vec![127, 128, 126, 130]),
        ("w.f4".into(), Dtype::F4, vec![2, 4], vec![0x12, 0x34, 0x56, 0x78]),
        (
            "w".into(),
            Dtype::F32,
            vec![2],
            [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
    ];
    write_safetensors(path, &specs, None);
}

#[test]
fn safetensors_dtypes_ztensor_lacks_are_valid_and_can_be_carried_or_left_out() {
    let d = scratch("microscaling");
    let st = d.join("mx.safetensors");
    microscaling(&st);
    // Valid safetensors: verify says so, and names the tensors zTensor has no type for.
    let out = ok(&["verify", arg(&st)]);
    assert!(out.contains("sound (a safetensors file: 3 tensors"), "{out}");
    assert!(out.contains("2 tensors are of a dtype zTensor has no type for"), "{out}");
    assert!(out.contains("scales (F8_E8M0)") && out.contains("w.f4 (F4)"), "{out}");
    // As JSON too: sound, with the unsupported tensors listed apart from problems.
    let report = json(&ztensor(&["verify", "--json", arg(&st)]));
    assert_eq!(report["sound"], true, "{report}");
    assert_eq!(report["objects"], 3);
    assert_eq!(report["unsupported"].as_array().unwrap().len(), 2, "{report}");
    // Converting is refused by name, with the two ways out.
    let zt = d.join("mx.zt");
    let err = fails(&["convert", arg(&st), arg(&zt)], 1);
    assert!(err.contains("has no zTensor type"), "{err}");
    assert!(err.contains("--carry-unknown-dtypes") && err.contains("--exclude"), "{err}");
    assert!(!zt.exists());
    // Left out by name.
    let out = ok(&["convert", arg(&st), arg(&zt), "--exclude", "scales", "--exclude", "*.f4"]);
    assert!(out.contains("(zTensor 1.2, 1 object:"), "{out}");
    assert_eq!(ok(&["ls", arg(&zt)]), "w\n");
    // Carried as bytes, with the dtype and shape recorded; back to safetensors, restored byte
    // for byte (read back by the safetensors crate).
    ok(&["convert", arg(&st), arg(&zt), "--carry-unknown-dtypes", "--zstd", "3"]);
    let info = json(&ztensor(&["info", "--json", arg(&zt)]));
    let text = info.to_string();
    assert!(text.contains("safetensors.dtype") && text.contains("F8_E8M0"), "{text}");
    let back = d.join("back.safetensors");
    ok(&["convert", arg(&zt), arg(&back)]);
    let (a, _) = read_back(&st);
    let (b, _) = read_back(&back);
    assert_eq!(a, b);
    // And straight from safetensors to safetensors.
    let direct = d.join("direct.safetensors");
    ok(&["convert", arg(&st), arg(&direct), "--carry-unknown-dtypes"]);
    assert_eq!(read_back(&direct).0, a);
}

#[test]
fn small_things_a_new_user_trips_on() {
    let d = scratch("details");
    let tiny = "fixtures/examples/tiny-v1.2.zt";
    // --quiet prints no summary; convert and repack report alike; one object is "1 object".
    let out = d.join("o.zt");
    assert_eq!(ok(&["convert", tiny, arg(&out), "-q"]), "");
    assert_eq!(ok(&["repack", tiny, arg(&out), "-q"]), "");
    let convert = ok(&["convert", tiny, arg(&out)]);
    let repack = ok(&["repack", tiny, arg(&out)]);
    let shape = |line: &str| line.split(" in ").next().unwrap().to_owned();
    assert_eq!(shape(&convert), shape(&repack));
    assert!(convert.starts_with(&format!("wrote {} (zTensor 1.2, 4 objects: ", out.display())));
    let one = d.join("one.zt");
    let msg = ok(&["convert", tiny, arg(&one), "--exclude", "[!a]*"]);
    assert!(msg.contains("(zTensor 1.2, 1 object: "), "{msg}");
    // A missing object: the closest names suggested.
    let err = fails(&["cat", tiny, "adjacenc"], 2);
    assert!(err.contains("did you mean \"adjacency\"?"), "{err}");
    let err = fails(&["extract", tiny, "adjacenc", "-o", arg(&d.join("x.npy"))], 2);
    assert!(err.contains("did you mean \"adjacency\"?"), "{err}");
    let err = fails(&["remove", tiny, "adjacenc", "-o", arg(&d.join("r.zt"))], 2);
    assert!(err.contains("did you mean \"adjacency\"?"), "{err}");
    // A pattern that matches nothing says so (status 1, like grep).
    let out = ztensor(&["ls", tiny, "[", "nothing*"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no object name matches [ or nothing*"), "{}", stderr(&out));
    // --threads shows what its default means, not a zero.
    let help = ok(&["repack", "--help"]);
    assert!(help.contains("one per core") && !help.contains("[default: 0]"), "{help}");
    // The rules, for an installed binary without the repository's spec/rules.md.
    let rules = ok(&["rules"]);
    assert!(rules.contains("digest_mismatch") && rules.contains("tb_header_magic"), "{rules}");
    let rules = json(&ztensor(&["rules", "--json"]));
    let ids = rules["ztensor"].as_array().unwrap();
    assert!(
        ids.iter().any(|r| r["id"] == "csr_indices_unsorted" && r["strict_only"] == true),
        "{rules}"
    );
    assert!(ok(&["info", "--help"]).contains("ztensor rules"));
}

#[test]
fn append_takes_every_input_format() {
    // TensorBuffers too, through the tensor-source interface (it was refused before).
    let d = scratch("append-any");
    let zt = d.join("t.zt");
    ok(&["convert", "fixtures/examples/tiny-v1.2.zt", arg(&zt), "--exclude", "[!a]*"]);
    let tb = "fixtures/tensorbuffers/valid/sample.tb";
    let out = ok(&["append", arg(&zt), "--from", tb]);
    assert!(out.contains("appended 2 objects"), "{out}");
    let names = ok(&["ls", arg(&zt)]);
    assert_eq!(names.lines().count(), 3, "{names}");
    for name in ok(&["ls", tb]).lines() {
        assert_eq!(ok(&["cat", tb, name]), ok(&["cat", arg(&zt), name]), "{name}");
    }
    // The target keeps its own file attributes.
    let info = json(&ztensor(&["info", "--json", arg(&zt)]));
    assert_eq!(info["attributes"]["license"], "CC0-1.0", "{info}");
    ok(&["verify", arg(&zt)]);
}

#[test]
fn the_readme_stands_alone_in_a_clone() {
    // Links into the project's private notes do not resolve in a clone; the install line and
    // the rule list an installed binary's user needs are there.
    let readme = std::fs::read_to_string("../../README.md").unwrap();
    assert!(!readme.contains("../shared"), "README links outside the repository");
    assert!(readme.contains("cargo install --locked --path crates/ztensor-cli"));
    assert!(readme.contains("ztensor rules"));
    for link in readme.split("](").skip(1).filter_map(|l| l.split(')').next()) {
        if link.starts_with("http") || link.starts_with('#') {
            continue;
        }
        assert!(std::path::Path::new("../..").join(link).exists(), "README links {link}");
    }
}

#[test]
fn review_fixes_hold() {
    let d = scratch("review");
    // extract never replaces a shard of the checkpoint it reads.
    let index = write_sharded(&d, &specs(), 2);
    let shard = d.join("model-00001-of-00002.safetensors");
    let before = std::fs::read(&shard).unwrap();
    let err = fails(&["extract", arg(&index), "w.f32", "-o", arg(&shard)], 2);
    assert!(err.contains("would replace it"), "{err}");
    assert_eq!(std::fs::read(&shard).unwrap(), before);
    // diff compares tensors it cannot decode by their stored bytes instead of failing.
    let st = d.join("mx.safetensors");
    microscaling(&st);
    let same = ok(&["diff", arg(&st), arg(&st)]);
    assert!(same.ends_with("0 changed, 3 the same\n"), "{same}");
    let mut bytes = std::fs::read(&st).unwrap();
    let last = bytes.len() - 9; // inside the last tensor's data (the data ends the file)
    bytes[last] ^= 1;
    let other = d.join("mx2.safetensors");
    std::fs::write(&other, &bytes).unwrap();
    let out = ztensor(&["diff", arg(&st), arg(&other)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 changed"), "{}", stdout(&out));
    // A v0.1 file that repeats a name is refused before anything is appended.
    let zt = d.join("t.zt");
    ok(&["convert", "fixtures/examples/tiny-v1.2.zt", arg(&zt), "--exclude", "[!a]*"]);
    let target = std::fs::read(&zt).unwrap();
    let err = fails(
        &["append", arg(&zt), "--from", "fixtures/v0.1/implementation-defined/duplicate-name.zt"],
        1,
    );
    assert!(err.contains("repeats \"a\""), "{err}");
    assert_eq!(std::fs::read(&zt).unwrap(), target);
}

#[test]
fn info_describes_every_other_format_through_the_source_interface() {
    let ops = "fixtures/tensorbuffers/valid/model-and-operations.tb";
    let info = json(&ztensor(&["info", "--json", ops]));
    assert_eq!(info["format"], "tensorbuffers");
    assert_eq!(info["attributes"]["tensorbuffers.model"], "example", "{info}");
    assert_eq!(info["tensors"].as_array().unwrap().len(), 1);
    let index = "fixtures/examples/checkpoint/model.safetensors.index.json";
    let text = ok(&["info", index]);
    assert!(text.contains("SHARD") && text.contains("model-00002-of-00002.safetensors"), "{text}");
    assert!(text.contains("u8:f8_e4m3fn"), "the zTensor types, as every command shows them");
    let info = json(&ztensor(&["info", "--json", index]));
    assert_eq!(info["format"], "safetensors-sharded");
    let shards: Vec<&str> =
        info["tensors"].as_array().unwrap().iter().map(|t| t["shard"].as_str().unwrap()).collect();
    assert_eq!(shards.len(), 6);
}

#[test]
fn numpy_files_are_read_like_any_other_input() {
    let d = scratch("numpy-in");
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/numpy");
    let npy = dir.join("fortran-f4.npy");
    let info = ok(&["info", arg(&npy)]);
    assert!(
        info.contains("NumPy .npy") && info.contains("fortran-f4") && info.contains("[3, 4]"),
        "{info}"
    );
    let zt = d.join("f.zt");
    ok(&["convert", arg(&npy), arg(&zt), "--zstd", "3"]);
    // The zTensor file holds the array in C order: the same values as NumPy's own C-order copy.
    let same = ok(&["diff", arg(&npy), arg(&zt)]);
    assert!(same.contains("1 the same"), "{same}");
    ok(&["verify", arg(&npy)]);
    let listed = ok(&["ls", arg(&dir.join("dense-c8.npy"))]);
    assert!(listed.contains("dense-c8"), "{listed}");
    // What NumPy itself cannot give as an array of numbers is refused by name.
    let err = fails(&["convert", arg(&dir.join("object-array.npy")), arg(&d.join("o.zt"))], 1);
    assert!(err.contains("never unpickled"), "{err}");
    let err = fails(&["info", arg(&dir.join("structured.npy"))], 1);
    assert!(err.contains("structured"), "{err}");
    // Archives, stored and deflated: the same arrays.
    let plain = dir.join("arrays.npz");
    let deflated = dir.join("compressed.npz");
    let info = ok(&["info", arg(&deflated)]);
    assert!(info.contains("NumPy .npz (compressed)") && info.contains("fortran"), "{info}");
    let same = ok(&["diff", arg(&plain), arg(&deflated)]);
    assert!(same.contains("4 the same"), "{same}");
    let npz_zt = d.join("npz.zt");
    ok(&["convert", arg(&deflated), arg(&npz_zt)]);
    let same = ok(&["diff", arg(&plain), arg(&npz_zt)]);
    assert!(same.contains("4 the same"), "{same}");
}

#[test]
fn gguf_files_are_read_like_any_other_input() {
    let d = scratch("gguf-in");
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/external/gguf");
    let gguf = dir.join("quantized.gguf");
    let info = ok(&["info", arg(&gguf)]);
    assert!(info.contains("GGUF version 3") && info.contains("q4_k"), "{info}");
    let zt = d.join("q.zt");
    ok(&["convert", arg(&gguf), arg(&zt), "--digest", "sha256"]);
    let same = ok(&["diff", arg(&gguf), arg(&zt)]);
    assert!(same.contains("0 changed"), "{same}");
    // The GGUF metadata and each quantized tensor's type and shape travel as attributes.
    let report = json(&ztensor(&["info", "--json", arg(&zt)]));
    assert_eq!(report["attributes"]["test.string"], "zTensor ✓");
    let q4 = report["objects"].as_array().unwrap().iter().find(|o| o["name"] == "q4_k").unwrap();
    assert_eq!(q4["attributes"]["gguf.type"], "Q4_K", "{q4}");
    assert_eq!(q4["attributes"]["gguf.shape"], serde_json::json!([2, 256]), "{q4}");
    ok(&["verify", arg(&dir.join("plain.gguf"))]);
    // A GGUF file cut short is refused with the offending tensor named.
    let bytes = std::fs::read(&gguf).unwrap();
    let cut = d.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let err = fails(&["info", arg(&cut)], 1);
    assert!(err.contains("run past its end") && err.contains("mxfp4"), "{err}");
}

#[test]
fn pytorch_checkpoints_are_read_like_any_other_input() {
    let d = scratch("torch-in");
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/external/pytorch");
    let checkpoint = dir.join("checkpoint.pt");
    let info = ok(&["info", arg(&checkpoint)]);
    assert!(info.contains("PyTorch checkpoint (torch.save") && info.contains("27"), "{info}");
    assert!(info.contains("optimizer_state_dict.state.0.exp_avg"), "{info}");
    ok(&["verify", arg(&checkpoint)]);
    // Converted with its plain values as file attributes; the same tensors either way.
    let zt = d.join("checkpoint.zt");
    let said =
        ok(&["convert", arg(&checkpoint), arg(&zt), "--zstd", "3", "--digest", "sha256", "--json"]);
    // Tensors the source decodes whole are held whole: that is what is in flight.
    let report: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert!(report["peak_in_flight"].as_u64().is_some_and(|p| p > 0), "{said}");
    let same = ok(&["diff", arg(&checkpoint), arg(&zt)]);
    assert!(same.contains("27 the same"), "{same}");
    let report = json(&ztensor(&["info", "--json", arg(&zt)]));
    assert_eq!(report["attributes"]["epoch"], 7, "{report}");
    assert_eq!(report["attributes"]["config"]["layers"], serde_json::json!([4, 3, 2]));
    // Views come out as the contiguous tensors they show.
    let views = dir.join("views.pt");
    let shown = ok(&["cat", arg(&views), "transposed"]);
    assert!(shown.contains("[6, 4]") && shown.contains("0 6 12 18"), "{shown}");
    let npy = d.join("t.npy");
    ok(&["extract", arg(&views), "every_other", "-o", arg(&npy)]);
    let same = ok(&["diff", arg(&npy), arg(&d.join("t.npy"))]);
    assert!(same.contains("1 the same"), "{same}");
    // The legacy format, big-endian and deflated variants read as the originals.
    let legacy = ok(&["info", arg(&dir.join("legacy.pt"))]);
    assert!(legacy.contains("legacy torch.save"), "{legacy}");
    let same = ok(&["diff", arg(&views), arg(&dir.join("variants/big-endian.pt"))]);
    assert!(same.contains("8 the same"), "{same}");
    let same = ok(&["diff", arg(&checkpoint), arg(&dir.join("variants/deflated.pt"))]);
    assert!(same.contains("27 the same"), "{same}");
    // Appended into a zTensor file like any other source.
    let target = d.join("target.zt");
    ok(&["convert", arg(&dir.join("parameter.pt")), arg(&target)]);
    ok(&["append", arg(&target), "--from", arg(&dir.join("state_dict.pt"))]);
    let listed = ok(&["ls", arg(&target)]);
    assert!(listed.contains("parameter") && listed.contains("1.running_var"), "{listed}");
    // A flipped storage byte is a problem of the file (status 1); code in a pickle is refused
    // by name before anything runs.
    let out = ztensor(&["verify", arg(&dir.join("hostile/crc-flipped.pt"))]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("CRC-32 mismatch [digest_mismatch]"), "{}", stdout(&out));
    let err = fails(&["convert", arg(&dir.join("hostile/calls-os-system.pt")), arg(&zt)], 1);
    assert!(err.contains("system") && err.contains("executes nothing"), "{err}");
    let err = fails(&["info", arg(&dir.join("scripted.pt"))], 1);
    assert!(err.contains("TorchScript"), "{err}");
    // Sparse COO and CSR tensors become sparse objects, which pass zTensor's strict rules.
    let sparse = d.join("sparse.zt");
    ok(&["convert", arg(&dir.join("sparse.pt")), arg(&sparse)]);
    let same = ok(&["diff", arg(&dir.join("sparse.pt")), arg(&sparse)]);
    assert!(same.contains("3 the same"), "{same}");
    ok(&["verify", "--strict", arg(&sparse)]);
    let shown = ok(&["cat", arg(&sparse), "csr"]);
    assert!(shown.contains("2 0 3"), "{shown}");
}

/// A tensor that streams through `extract`, `cat` and `diff`: a stream corrupt mid-way, or a
/// digest that differs at the end, fails the command with the rule, and nothing is written.
#[test]
fn a_streamed_tensor_that_fails_late_leaves_no_output() {
    use ztensor_format::{DType, DigestAlgorithm, Version};
    use ztensor_io::WriteOptions;
    let d = scratch("streamed-faults");
    // 24 MiB of weakly compressible bytes: several pieces, a compressed stream of some length.
    let mut rng = ztensor_testkit::Rng::new(0x2545_f491_4f6c_dd1d);
    let data: Vec<u8> = (0..24 << 20).map(|_| (rng.next_u64() >> 59) as u8).collect();
    for (digest, rule) in
        [(None, "decode_failed"), (Some(DigestAlgorithm::Crc32c), "digest_mismatch")]
    {
        let mut w = ztensor_io::Writer::new(Vec::new(), Version::V1_2).unwrap();
        let mut options = WriteOptions::zstd(1);
        if let Some(d) = digest {
            options = options.with_digest(d);
        }
        w.add_dense("t", &[data.len() as u64], DType::U8, &data, &options).unwrap();
        let mut file = w.finish().unwrap().0;
        let reader = ztensor_io::Reader::new(&file[..], &Default::default()).unwrap();
        let c = reader.object("t").unwrap().component("data").unwrap();
        let (at, len) = (c.offset() as usize, c.stored_len() as usize);
        // Mid-way through the stored stream: past the first pieces it decodes to.
        for b in &mut file[at + len * 3 / 4..at + len * 3 / 4 + 64] {
            *b ^= 0x5a;
        }
        let path = d.join("t.zt");
        std::fs::write(&path, &file).unwrap();
        let out = d.join("t.npy");
        let err = fails(&["extract", arg(&path), "t", "-o", arg(&out)], 1);
        assert!(err.contains(rule), "{err}");
        assert!(!out.exists());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "a temporary was left");
        let err = fails(&["cat", arg(&path), "t"], 1);
        assert!(err.contains(rule), "{err}");
        let err = fails(&["diff", arg(&path), arg(&path)], 1);
        assert!(err.contains(rule), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// What `info --json` says of each component of a zTensor file: object name, encoding,
/// stored and decoded bytes.
fn components_of(path: &Path) -> Vec<(String, String, u64, u64)> {
    let info = json(&ztensor(&["info", "--json", arg(path)]));
    let mut out = Vec::new();
    for o in info["objects"].as_array().unwrap() {
        for c in o["components"].as_object().unwrap().values() {
            out.push((
                o["name"].as_str().unwrap().to_owned(),
                c["encoding"].as_str().unwrap().to_owned(),
                c["stored"].as_u64().unwrap(),
                c["decoded"].as_u64().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn zstd_stores_raw_what_it_cannot_shrink_and_sizes_read_alike_everywhere() {
    let d = scratch("sizes");
    let index = "fixtures/examples/checkpoint/model.safetensors.index.json";
    let (zt, always) = (d.join("m.zt"), d.join("always.zt"));
    let said = ok(&["convert", index, arg(&zt), "--zstd", "3", "--bytes"]);
    let said_always = ok(&["convert", index, arg(&always), "--zstd", "3", "--zstd-always"]);
    assert!(!said_always.contains("stored raw"), "{said_always}");
    // Which components zstd does not shrink, as the file that compressed every one shows.
    let (every, chosen) = (components_of(&always), components_of(&zt));
    assert_eq!(every.len(), chosen.len());
    let mut raw = 0;
    for (a, c) in every.iter().zip(&chosen) {
        assert_eq!((&a.0, a.3), (&c.0, c.3));
        assert_eq!(a.1, "zstd");
        if a.2 < a.3 {
            assert_eq!((c.1.as_str(), c.2), ("zstd", a.2), "{}", c.0);
        } else {
            assert_eq!((c.1.as_str(), c.2), ("raw", c.3), "{}", c.0);
            raw += 1;
        }
    }
    assert!(raw > 0 && raw < every.len(), "{every:?}");
    assert!(said.contains(&format!("{raw} of {} components stored raw", every.len())), "{said}");
    // One vocabulary: the summary, info and verify give the same figures the same names.
    let decoded: u64 = chosen.iter().map(|c| c.3).sum();
    let stored: u64 = chosen.iter().map(|c| c.2).sum();
    let file = std::fs::metadata(&zt).unwrap().len();
    let line = format!("{decoded} bytes decoded, {stored} bytes stored; file {file} bytes)");
    assert!(said.contains(&line), "{said}");
    let info = ok(&["info", arg(&zt), "--bytes"]);
    assert!(info.contains(&format!("{stored} bytes stored, {decoded} bytes decoded\n")), "{info}");
    assert!(ok(&["verify", arg(&zt), "--bytes"]).contains(&format!(", {decoded} bytes decoded,")));
    // The safetensors original stores what it decodes to.
    let original = ok(&["info", index, "--bytes"]);
    let both = format!("{decoded} bytes stored, {decoded} bytes decoded\n");
    assert!(original.contains(&both), "{original}");
    // Human units by default (under 1000 bytes, plain bytes), and element counts: the
    // product of each shape.
    assert!(decoded < 1000);
    let human = ok(&["info", arg(&zt)]);
    assert!(human.contains(&format!("{stored} B stored, {decoded} B decoded\n")), "{human}");
    let report = json(&ztensor(&["info", "--json", arg(&zt)]));
    let elements: u64 = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            o["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).product::<u64>()
        })
        .sum();
    assert!(human.contains(&format!("total: 6 objects, {elements} elements, ")), "{human}");
    assert!(original.contains(&format!("total: 6 tensors, {elements} elements, ")), "{original}");
}

#[test]
fn attributes_show_a_key_to_a_line_escaped_as_json_and_whole_on_request() {
    let d = scratch("attributes");
    let (st, zt) = (d.join("a.safetensors"), d.join("a.zt"));
    let long = "é".repeat(300);
    let metadata = HashMap::from([
        ("note".to_owned(), "bell\u{7} csi\u{1b}[2J c1\u{85} bidi\u{202e}".to_owned()),
        ("long".to_owned(), long.clone()),
    ]);
    write_safetensors(&st, &specs(), Some(metadata));
    ok(&["convert", arg(&st), arg(&zt)]);
    for input in [arg(&st), arg(&zt)] {
        let info = ok(&["info", input]);
        for acting in ['\u{7}', '\u{1b}', '\u{85}', '\u{202e}'] {
            assert!(!info.contains(acting), "{input}: {info:?}");
        }
        // The short value is a JSON string that reads back as the value.
        let note = info.lines().find_map(|l| l.strip_prefix("  note: ")).expect(input);
        let back: String = serde_json::from_str(note).unwrap();
        assert_eq!(back, "bell\u{7} csi\u{1b}[2J c1\u{85} bidi\u{202e}");
        // The long one is cut, with its length; --attributes gives it whole.
        let cut = info.lines().find_map(|l| l.strip_prefix("  long: ")).expect(input);
        assert!(cut.ends_with("…\" (300 characters)"), "{cut}");
        assert!(cut.chars().count() < 150, "{cut}");
        let whole = ok(&["info", input, "--attributes"]);
        let all = whole.lines().find_map(|l| l.strip_prefix("  long: ")).expect(input);
        assert_eq!(serde_json::from_str::<String>(all).unwrap(), long);
    }
    // Objects' own attributes: counted under the table, shown whole with --attributes, as
    // `info --json` has them.
    let gguf = "fixtures/external/gguf/quantized.gguf";
    let report = json(&ztensor(&["info", "--json", gguf]));
    let tensors = report["tensors"].as_array().unwrap();
    let info = ok(&["info", gguf]);
    assert!(
        info.ends_with(&format!(
            "\n{} tensors have attributes of their own (--attributes shows them)\n",
            tensors.len()
        )),
        "{info}"
    );
    let whole = ok(&["info", gguf, "--attributes"]);
    let first = tensors[0]["name"].as_str().unwrap();
    let block: Vec<&str> = whole
        .split(&format!("attributes of {first}:\n"))
        .nth(1)
        .expect(&whole)
        .lines()
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(!block.is_empty(), "{whole}");
    let mut rebuilt = serde_json::Map::new();
    for line in block {
        let (key, value) = line.trim_start().split_once(": ").unwrap();
        rebuilt.insert(key.to_owned(), serde_json::from_str(value).unwrap());
    }
    let converted = d.join("q.zt");
    ok(&["convert", gguf, arg(&converted)]);
    let zt_report = json(&ztensor(&["info", "--json", arg(&converted)]));
    let object =
        zt_report["objects"].as_array().unwrap().iter().find(|o| o["name"] == first).unwrap();
    assert_eq!(serde_json::Value::Object(rebuilt), object["attributes"], "{first}");
}

#[test]
fn drop_attributes_and_shard_size_say_what_they_did() {
    let d = scratch("said");
    // TensorBuffers operations are not text, the model name is: only the first is dropped.
    let ops = "fixtures/tensorbuffers/valid/model-and-operations.tb";
    let st = d.join("o.safetensors");
    let said = ok(&["convert", ops, arg(&st), "--drop-attributes"]);
    let note = said.lines().find(|l| l.starts_with("--drop-attributes")).expect(&said);
    assert!(note.contains("tensorbuffers.operations"), "{note}");
    assert!(!note.contains("tensorbuffers.model"), "{note}");
    assert_eq!(
        read_back(&st).1,
        Some(HashMap::from([("tensorbuffers.model".to_owned(), "example".to_owned())]))
    );
    // Into zTensor the flag drops every attribute, and names them.
    let tiny = "fixtures/examples/tiny-v1.2.zt";
    let zt = d.join("t.zt");
    for command in ["convert", "repack"] {
        let said = ok(&[command, tiny, arg(&zt), "--drop-attributes"]);
        assert!(said.contains("--drop-attributes dropped the file's framework, license"), "{said}");
        assert!(ok(&["info", arg(&zt)]).contains("attributes: none\n"));
    }
    // Nothing to drop is said too.
    let bare = d.join("bare.zt");
    let said = ok(&["convert", arg(&zt), arg(&bare), "--drop-attributes"]);
    assert!(said.contains("--drop-attributes: nothing was dropped"), "{said}");
    // An object larger than --shard-size gets a shard of its own, and is named.
    let index = "fixtures/examples/checkpoint/model.safetensors.index.json";
    let report = json(&ztensor(&["info", "--json", index]));
    let mut big: Vec<String> = report["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["decoded"].as_u64().unwrap() > 200)
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    big.sort();
    assert!(!big.is_empty());
    let said = ok(&["convert", index, arg(&d.join("out/")), "--shard-size", "200"]);
    let plan = ok(&[
        "plan",
        index,
        arg(&d.join("planned/")),
        "-o",
        arg(&d.join("p.json")),
        "--shard-size",
        "200",
    ]);
    for text in [&said, &plan] {
        let note = text.lines().find(|l| l.contains("larger than --shard-size")).expect(text);
        let mut named: Vec<String> = note
            .split_once(": ")
            .unwrap()
            .1
            .split(", ")
            .map(|n| n.split(" (").next().unwrap().to_owned())
            .collect();
        named.sort();
        assert_eq!(named, big, "{note}");
        assert!(
            note.starts_with(&format!("{} objects are larger than --shard-size 200 B", big.len()))
        );
    }
}

#[test]
fn progress_on_a_terminal_is_one_line_that_fits_and_only_moves_forward() {
    // A 48 MiB tensor (half noise, half zeros) and 300 small ones with names far wider than
    // the terminal, converted under a pseudo-terminal 60 columns wide (util-linux `script`).
    let d = scratch("progress");
    let st = d.join("p.safetensors");
    let big = 48usize << 20;
    let mut header = serde_json::Map::new();
    header.insert(
        "big".into(),
        serde_json::json!({"dtype": "U8", "shape": [big], "data_offsets": [0, big]}),
    );
    let mut offset = big;
    for i in 0..300 {
        let name = format!("layers.{i}.{}weight", "very_long_parameter_name_".repeat(6));
        header.insert(name, serde_json::json!({"dtype": "F32", "shape": [256], "data_offsets": [offset, offset + 1024]}));
        offset += 1024;
    }
    let mut text = serde_json::to_vec(&header).unwrap();
    text.resize(text.len().next_multiple_of(8), b' ');
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&text);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    bytes.extend((0..offset).map(|i| {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        if i < big / 2 || i >= big { (state >> 56) as u8 } else { 0 }
    }));
    std::fs::write(&st, bytes).unwrap();
    let zt = d.join("p.zt");
    let command = format!(
        "stty cols 60 rows 20; {} convert {} {} --zstd 3 --threads 1",
        env!("CARGO_BIN_EXE_ztensor"),
        st.display(),
        zt.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("util-linux script runs commands under a pseudo-terminal");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&out.stdout);
    // Each redraw of the line, its escape sequences taken out.
    let mut percents = Vec::new();
    for line in shown.split(['\r', '\n']) {
        let mut plain = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for e in chars.by_ref() {
                    if e.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                plain.push(c);
            }
        }
        let Some((head, _)) = plain.split_once("% ") else { continue };
        assert!(plain.trim_end().chars().count() <= 60, "wider than the terminal: {plain:?}");
        let percent: u32 = head.split_whitespace().last().unwrap().parse().unwrap();
        percents.push(percent);
    }
    assert!(percents.len() >= 2, "no progress drawn: {shown:?}");
    assert!(percents.windows(2).all(|w| w[0] <= w[1]), "went backwards: {percents:?}");
    assert!(shown.contains("wrote "), "{shown}");
    assert!(zt.exists());
}

#[test]
fn peak_in_flight_counts_what_foreign_sources_hold() {
    // PyTorch and GGUF tensors are written by the sequential code, part by part: what that
    // holds is in flight too, so the peak is at least the largest tensor (each is one piece).
    let d = scratch("peak");
    for input in ["fixtures/external/pytorch/checkpoint.pt", "fixtures/external/gguf/plain.gguf"] {
        let report = json(&ztensor(&["info", "--json", input]));
        let largest = report["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["decoded"].as_u64().unwrap())
            .max()
            .unwrap();
        let said = ok(&["convert", input, arg(&d.join("o.zt")), "--json"]);
        let report: serde_json::Value = serde_json::from_str(&said).unwrap();
        let peak = report["peak_in_flight"].as_u64().expect(&said);
        assert!(peak >= largest && largest > 0, "{input}: peak {peak} < {largest}: {said}");
    }
}

/// Runs the Slurm example with `env`, as a machine with Slurm would see it.
fn slurm_example(env: &[(&str, &Path)]) -> std::process::Output {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/schedulers/slurm-e2e.sh");
    let mut command = std::process::Command::new("bash");
    command.arg(script).env("ZTENSOR", env!("CARGO_BIN_EXE_ztensor"));
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

#[test]
fn the_slurm_example_leaves_a_machine_with_slurm_alone() {
    let d = scratch("slurm");
    // A system configuration: refused before anything is started, installed or written.
    let conf = d.join("slurm.conf");
    std::fs::write(&conf, "ClusterName=production\n").unwrap();
    let out = slurm_example(&[("SLURM_E2E_SYSTEM_CONF", &conf)]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("slurm.conf exists"));
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "ClusterName=production\n");
    // A munge daemon already running (here a stand-in of that name): refused, and left
    // running.
    let munged = d.join("munged");
    std::fs::copy("/bin/sleep", &munged).unwrap();
    let mut daemon = std::process::Command::new(&munged).arg("60").spawn().unwrap();
    let absent = d.join("absent.conf");
    let out = slurm_example(&[("SLURM_E2E_SYSTEM_CONF", &absent)]);
    let alive = daemon.try_wait().unwrap().is_none();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("munged is already running"));
    assert!(alive, "the running daemon was stopped");
    // Nothing in it stops processes by name or writes system paths.
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/schedulers/slurm-e2e.sh"),
    )
    .unwrap();
    for risky in ["pkill", "killall", "/etc/slurm/slurm.conf\"", "/etc/munge", "/var/spool"] {
        assert!(!text.contains(risky), "the example uses {risky}");
    }
}

/// A zTensor 2 file (written by the reference project's corpus generator) is read by every
/// command like any other input, converts to 1.2, and a damaged one is the data saying no.
#[test]
fn ztensor_2_files_are_read_and_converted() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2");
    let file = corpus.join("valid/canonical-basic.zt");
    let info = json(&ztensor(&["info", "--json", arg(&file)]));
    assert_eq!(info["format"], "ztensor2", "{info}");
    assert_eq!(ok(&["ls", arg(&file)]), "a.bias\na.weight\ntied\n");
    ok(&["verify", arg(&file)]);
    let d = scratch("ztensor2");
    let out = d.join("out.zt");
    ok(&["convert", arg(&file), arg(&out), "--to", "1.2"]);
    let converted = json(&ztensor(&["info", "--json", arg(&out)]));
    assert_eq!(converted["format"], "ztensor", "{converted}");
    // The same tensors, byte for byte, as `cat` prints them from either file.
    for name in ["a.bias", "a.weight", "tied"] {
        assert_eq!(ok(&["cat", arg(&file), name]), ok(&["cat", arg(&out), name]), "{name}");
    }
    // Rejected files are rejections (status 1), with their rule.
    let damaged = corpus.join("reject/manifest-hash-mismatch.zt");
    let err = fails(&["info", arg(&damaged)], 1);
    assert!(err.contains("manifest_hash"), "{err}");
    // A digest that differs is a problem `verify` reports (status 1).
    let digest = corpus.join("reject/verify-digest-mismatch.zt");
    let out = ztensor(&["verify", arg(&digest)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("digest_mismatch") && stdout(&out).contains("1 problem"),
        "{}",
        stdout(&out)
    );
}

/// `convert --to 2` writes canonical zTensor 2, `ztensor id` prints the same identity for a
/// file, its zTensor 2 conversion and the way back, `diff` finds nothing changed, and the
/// reference's documented identity of its canonical example is printed; what does not apply
/// to zTensor 2 is a usage error, and a file with no identity says why.
#[test]
fn to_ztensor_2_and_back_with_one_identity() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures");
    let d = scratch("to-ztensor2");
    for input in ["examples/tiny-v0.1.zt", "examples/tiny-v1.1.zt", "v1.2/valid/sparse.zt"] {
        let input = fixtures.join(input);
        let two = d.join("two.zt");
        let back = d.join("back.zt");
        ok(&["convert", arg(&input), arg(&two), "--to", "2"]);
        let info = json(&ztensor(&["info", "--json", arg(&two)]));
        assert_eq!(info["format"], "ztensor2", "{info}");
        ok(&["verify", arg(&two)]);
        ok(&["convert", arg(&two), arg(&back)]);
        let id = ok(&["id", arg(&input)]);
        assert!(id.starts_with("sha256:") && id.len() == 7 + 64 + 1, "{id}");
        assert_eq!(ok(&["id", arg(&two)]), id, "{}", input.display());
        assert_eq!(ok(&["id", arg(&back)]), id, "{}", input.display());
        let diff = ok(&["diff", arg(&input), arg(&back)]);
        assert!(diff.contains("0 changed"), "{diff}");
        // Canonical: the same content gives the same bytes.
        let again = d.join("again.zt");
        ok(&["convert", arg(&back), arg(&again), "--to", "2"]);
        assert!(std::fs::read(&two).unwrap() == std::fs::read(&again).unwrap());
    }
    let corpus = fixtures.join("external/ztensor2");
    assert_eq!(
        ok(&["id", arg(&corpus.join("valid/canonical-basic.zt"))]),
        "sha256:4811d499a49d509f70874bb87b0f71f9d8895873acca2d29581e17bff2be8a9c\n"
    );
    assert_eq!(
        ok(&["id", "--algorithm", "xxh3", arg(&corpus.join("valid/canonical-basic.zt"))]),
        "xxh3:faa8ab77fff0086c\n"
    );
    let basic = corpus.join("valid/canonical-basic.zt");
    let two = d.join("two.zt");
    let both = ok(&["id", arg(&basic), arg(&two)]);
    let lines: Vec<&str> = both.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("sha256:4811d499") && lines[0].ends_with(arg(&basic)), "{both}");
    let err = fails(&["id", arg(&corpus.join("valid/minimal.zt"))], 2);
    assert!(err.contains("no digest"), "{err}");
    let input = fixtures.join("examples/tiny-v1.2.zt");
    let err = fails(
        &["convert", arg(&input), "/nonexistent-dir/x.zt", "--to", "2", "--digest", "sha256"],
        2,
    );
    assert!(err.contains("xxh3"), "{err}");
    // With --zstd every part is stored zstd-seekable: not canonical, the same identity.
    let encoded = d.join("encoded.zt");
    ok(&["convert", arg(&input), arg(&encoded), "--to", "2", "--zstd", "5"]);
    assert_eq!(ok(&["id", arg(&encoded)]), ok(&["id", arg(&input)]));
    ok(&["verify", arg(&encoded)]);
    let dump = json(&ztensor(&["dump", arg(&encoded)]));
    assert_eq!(dump["objects"][0]["components"]["indices"]["encoding"], "zt.zstd-seekable/1");
    // Attributes zTensor 2 cannot hold are refused (status 1) with the flag that drops them.
    let tagged = fixtures.join("v1.2/valid/attributes-every-kind.zt");
    let err = fails(&["convert", arg(&tagged), arg(&d.join("t.zt")), "--to", "2"], 1);
    assert!(err.contains("--drop-attributes"), "{err}");
    ok(&["convert", arg(&tagged), arg(&d.join("t.zt")), "--to", "2", "--drop-attributes"]);
    // An input that breaks its own format's rule while it is read is a rejection (status 1),
    // its rule named, as for every other target.
    let damaged = fixtures.join("v1.2/valid/object-digest-mismatch.zt");
    let err = fails(&["convert", arg(&damaged), arg(&d.join("u.zt")), "--to", "2"], 1);
    assert!(err.contains("digest_mismatch"), "{err}");
    let err = fails(&["id", arg(&damaged)], 1);
    assert!(err.contains("digest_mismatch"), "{err}");
}

/// A directory output with `--to 2` is a sharded zTensor 2 model: a root named after the
/// input with its shard table, and canonical shards at their positional names. Every command
/// reads it through the root; `verify` checks each shard's whole-file digest (a changed byte
/// anywhere in a shard, or a missing shard, is a problem); renamed shards are found by
/// identity; the identity is the unsharded file's; an output that would replace the input is
/// refused.
#[test]
fn sharded_ztensor_2_output() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures");
    let d = scratch("sharded-ztensor2");
    let input = fixtures.join("examples/tiny-v1.1.zt");
    let out = d.join("out");
    let said = ok(&[
        "convert",
        arg(&input),
        &format!("{}/", out.display()),
        "--to",
        "2",
        "--shard-size",
        "30",
    ]);
    assert!(said.contains("3 shards") && said.contains("tiny-v1.1.zt"), "{said}");
    let root = out.join("tiny-v1.1.zt");
    let shards: Vec<PathBuf> =
        (1..=3).map(|i| out.join(format!("tiny-v1.1-{i:05}-of-00003.zt"))).collect();
    assert!(shards.iter().all(|s| s.is_file()));
    assert!(ok(&["verify", arg(&root)]).contains("sound"));
    assert_eq!(ok(&["id", arg(&root)]), ok(&["id", arg(&input)]));
    assert!(ok(&["diff", arg(&input), arg(&root)]).contains("0 changed"));
    // Each shard is a valid file of its own objects.
    let objects: u64 = shards
        .iter()
        .map(|s| {
            json(&ztensor(&["info", "--json", arg(s)]))["tensors"].as_array().unwrap().len() as u64
        })
        .sum();
    assert_eq!(objects, 4);
    // Back to 1.2 through the root.
    let back = d.join("back.zt");
    ok(&["convert", arg(&root), arg(&back)]);
    assert!(ok(&["diff", arg(&input), arg(&back)]).contains("0 changed"));

    // Renamed shards are found by size and digest.
    for (i, s) in shards.iter().enumerate() {
        std::fs::rename(s, out.join(format!("renamed-{i}.zt"))).unwrap();
    }
    assert!(ok(&["verify", arg(&root)]).contains("sound"));
    for (i, s) in shards.iter().enumerate() {
        std::fs::rename(out.join(format!("renamed-{i}.zt")), s).unwrap();
    }
    // A byte changed in a shard's padding: no part's digest sees it, the shard's does.
    let mut bytes = std::fs::read(&shards[0]).unwrap();
    bytes[100] = 1;
    std::fs::write(&shards[0], &bytes).unwrap();
    let report = ztensor(&["verify", arg(&root)]);
    assert_eq!(report.status.code(), Some(1), "{}", stdout(&report));
    assert!(stdout(&report).contains("shard_identity"), "{}", stdout(&report));
    // Missing: a problem for verify, a clear error for a read.
    std::fs::remove_file(&shards[0]).unwrap();
    let report = ztensor(&["verify", arg(&root)]);
    assert_eq!(report.status.code(), Some(1), "{}", stdout(&report));
    assert!(stdout(&report).contains("missing"), "{}", stdout(&report));
    // The input's own directory with its stem: the root would replace the input.
    let copy = d.join("m.zt");
    std::fs::copy(&input, &copy).unwrap();
    let err = fails(&["convert", arg(&copy), &format!("{}/", d.display()), "--to", "2"], 2);
    assert!(err.contains("would replace it"), "{err}");
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&input).unwrap());
    // A sharded 1.x checkpoint written as zTensor 2 into its own directory: its shards have
    // the names the zTensor 2 shards would take, as their own or split by size into two.
    let index = fixtures.join("examples/checkpoint/model.safetensors.index.json");
    let one = d.join("one");
    ok(&["convert", arg(&index), &format!("{}/", one.display())]);
    let zt_index = one.join("model.zt.index.json");
    let before = std::fs::read(one.join("model-00001-of-00002.zt")).unwrap();
    for extra in [&[][..], &["--shard-size", "700"][..]] {
        let mut args = vec!["convert", arg(&zt_index), arg(&one), "--to", "2"];
        args.extend_from_slice(extra);
        let err = fails(&args, 2);
        assert!(err.contains("would replace it"), "{extra:?}: {err}");
    }
    assert_eq!(std::fs::read(one.join("model-00001-of-00002.zt")).unwrap(), before);
    // Elsewhere, one zTensor 2 shard per input shard, and the same tensors.
    let two = d.join("two");
    ok(&["convert", arg(&zt_index), &format!("{}/", two.display()), "--to", "2"]);
    assert!(two.join("model-00002-of-00002.zt").is_file());
    assert_eq!(ok(&["id", arg(&two.join("model.zt"))]), ok(&["id", arg(&zt_index)]));
}
