//! The tool as a user runs it on safetensors checkpoints (single and sharded, with FP8 and
//! `__metadata__`), and every command's success and failure. safetensors outputs are read back
//! by the `safetensors` crate, independently of this project's reader and writer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::Dtype;
use safetensors::tensor::TensorView;

use super::formats::microscaling;
use super::{json, scratch, stderr, stdout, ztensor};

/// A tensor: name, dtype, shape, bytes.
pub(crate) type Spec = (String, Dtype, Vec<usize>, Vec<u8>);

/// A tensor as read back: dtype, shape, bytes.
type Stored = (Dtype, Vec<usize>, Vec<u8>);

pub(crate) fn specs() -> Vec<Spec> {
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

pub(crate) fn write_safetensors(
    path: &Path,
    specs: &[Spec],
    metadata: Option<HashMap<String, String>>,
) {
    let views: Vec<(&str, TensorView<'_>)> = specs
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    std::fs::write(path, safetensors::serialize(views, metadata).unwrap()).unwrap();
}

/// Shards `specs` into `n` files with an index; returns the index path.
pub(crate) fn write_sharded(dir: &Path, specs: &[Spec], n: usize) -> PathBuf {
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
pub(crate) fn read_back(path: &Path) -> (HashMap<String, Stored>, Option<HashMap<String, String>>) {
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

pub(crate) fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub(crate) fn ok(args: &[&str]) -> String {
    let out = ztensor(args);
    assert!(out.status.success(), "{args:?}: {}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

/// Runs a command that must fail with `status`, returning stderr.
pub(crate) fn fails(args: &[&str], status: i32) -> String {
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
                err.contains("GGUF files, PyTorch checkpoints (torch.save), PyTorch Distributed"),
                "{err}"
            );
            assert!(err.contains("and Distributed Checkpoints saved as safetensors shards"));
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
    // A checkpoint directory reads as the checkpoint whose index it holds (a sharded
    // safetensors checkpoint; the zTensor checkpoint a trainer's ZTensorWriter leaves), as
    // that index reads.
    for (dir, index) in [
        ("fixtures/examples/checkpoint", "model.safetensors.index.json"),
        ("fixtures/external/dcp/ztensor", "model.zt.index.json"),
    ] {
        let index = format!("{dir}/{index}");
        for command in ["info", "verify", "ls"] {
            // The same report: the directory is read as its index.
            let whole = ok(&[command, dir]);
            assert_eq!(whole, ok(&[command, &index]), "{command} {dir}");
            assert!(!whole.is_empty());
        }
        // A sharded conversion and a plan of the directory name their outputs after the
        // index, and find the shards beside it.
        let out = d.join(format!("from-{}", dir.replace('/', "-")));
        ok(&["convert", dir, &format!("{}/", out.display())]);
        let stem = index.rsplit('/').next().unwrap().split('.').next().unwrap();
        let written = out.join(format!("{stem}.zt.index.json"));
        assert!(written.is_file(), "{}", written.display());
        assert_eq!(ok(&["ls", arg(&written)]), ok(&["ls", &index]).replace(&index, arg(&written)));
        let plan = out.with_extension("plan.json");
        let units = format!("{}-units/", out.display());
        ok(&["plan", dir, &units, "-o", arg(&plan)]);
        let planned: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
        // (A plan keeps its paths absolute.)
        assert!(planned["input"].as_str().unwrap().ends_with(&index), "{planned}");
        assert_eq!(planned["index"].as_str(), Some(format!("{stem}.zt.index.json").as_str()));
        // The index and its two shards, whether the shards are found by the objects'
        // locations (safetensors) or only by the opener (a checkpoint read stitched).
        let inputs = planned["inputs"].as_array().unwrap();
        assert!(inputs[0]["path"].as_str().unwrap().ends_with(&index), "{planned}");
        assert_eq!(inputs.len(), 3, "{planned}");
    }
    // Two checkpoints in one directory: refused, each named.
    let two = d.join("two");
    std::fs::create_dir_all(&two).unwrap();
    for name in ["model.safetensors.index.json", "other.zt.index.json"] {
        std::fs::write(two.join(name), b"{}").unwrap();
    }
    let err = fails(&["info", arg(&two)], 2);
    assert!(err.contains("holds 2 checkpoints"), "{err}");
    for name in ["model.safetensors.index.json", "other.zt.index.json"] {
        assert!(err.contains(&two.join(name).display().to_string()), "{err}");
    }
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
    assert!(same.ends_with("0 changed, 5 the same\n"), "{same}");
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
