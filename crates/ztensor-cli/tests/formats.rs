//! Every other format the tool reads (NumPy, GGUF, PyTorch, TensorBuffers) through the same
//! commands as safetensors and zTensor, `append` from each, safetensors dtypes zTensor lacks,
//! and a tensor that fails late while it streams.

use std::path::Path;

use safetensors::Dtype;

use super::tools::{Spec, arg, fails, ok, read_back, write_safetensors};
use super::{json, scratch, stdout, ztensor};

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

/// A safetensors file (written by the `safetensors` crate) with tensors of the microscaling
/// dtypes zTensor 1.x has no type for, and one plain tensor.
pub(crate) fn microscaling(path: &Path) {
    let specs: Vec<Spec> = vec![
        ("scales".into(), Dtype::F8_E8M0, vec![4], vec![127, 128, 126, 130]),
        ("w.f4".into(), Dtype::F4, vec![2, 4], vec![0x12, 0x34, 0x56, 0x78]),
        // Four FP6 values in three bytes, each dtype.
        ("w.f6a".into(), Dtype::F6_E2M3, vec![1, 4], vec![0xc1, 0x20, 0x14]),
        ("w.f6b".into(), Dtype::F6_E3M2, vec![4], vec![0x3f, 0xf0, 0xff]),
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
fn safetensors_microscaling_dtypes_are_zt2_types_refused_by_1x_or_carried() {
    let d = scratch("microscaling");
    let st = d.join("mx.safetensors");
    microscaling(&st);
    let (want, _) = read_back(&st);
    // Valid safetensors, every tensor of a type: nothing unsupported.
    let report = json(&ztensor(&["verify", "--json", arg(&st)]));
    assert_eq!(report["sound"], true, "{report}");
    assert_eq!(report["objects"], 5);
    assert_eq!(report["unsupported"], serde_json::json!([]), "{report}");
    let info = json(&ztensor(&["info", "--json", arg(&st)]));
    let types: Vec<String> = ["scales", "w.f4", "w.f6a", "w.f6b"]
        .iter()
        .map(|n| {
            let tensors = info["tensors"].as_array().expect("tensors");
            let t = tensors.iter().find(|t| t["name"] == *n).unwrap_or_else(|| panic!("{info}"));
            format!("{} {} {}", t["dtype"], t["shape"], t["bytes"])
        })
        .collect();
    assert_eq!(
        types,
        [
            r#""u8:f8_e8m0" [4] 4"#,
            r#""u8:f4_e2m1" [2,4] 4"#,
            r#""u8:f6_e2m3" [1,4] 3"#,
            r#""u8:f6_e3m2" [4] 3"#
        ],
        "{info}"
    );
    // zTensor 1.x registers none of them: refused by name, with the ways out.
    let zt = d.join("mx.zt");
    let err = fails(&["convert", arg(&st), arg(&zt)], 1);
    assert!(
        err.contains("has no zTensor 1.2 form") && err.contains("write zTensor 2 (`--to 2`)"),
        "{err}"
    );
    assert!(err.contains("--carry-unknown-dtypes") && err.contains("--exclude"), "{err}");
    assert!(!zt.exists());
    // zTensor 2 holds each as its own type, its bytes as they were; back to safetensors, the
    // same dtypes, shapes and bytes (read back by the safetensors crate).
    let zt2 = d.join("mx2.zt");
    ok(&["convert", arg(&st), arg(&zt2), "--to", "2"]);
    assert!(ok(&["verify", arg(&zt2)]).contains("sound"));
    let back = d.join("back2.safetensors");
    ok(&["convert", arg(&zt2), arg(&back)]);
    assert_eq!(read_back(&back).0, want);
    // Under zstd too.
    let zt2z = d.join("mx2z.zt");
    ok(&["convert", arg(&st), arg(&zt2z), "--to", "2", "--zstd", "3"]);
    assert_eq!(ok(&["cat", arg(&zt2z), "scales"]), ok(&["cat", arg(&st), "scales"]));
    // The E8M0 scales widen to f32 exactly (2^(e−127)), and so do packed FP4 and FP6.
    let scales: serde_json::Value =
        serde_json::from_str(&ok(&["cat", arg(&st), "scales", "--json"])).unwrap();
    let values: Vec<f64> =
        scales["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(values, [1.0, 2.0, 0.5, 8.0], "{scales}");
    // FP4 0x12 0x34 0x56 0x78, low nibble first: codes 2 1 4 3 6 5 8 7, which E2M1 reads as
    // 1 0.5 2 1.5 4 3 -0 6.
    let shown = ok(&["cat", arg(&zt2z), "w.f4"]);
    assert!(shown.ends_with("1 0.5 2 1.5\n4 3 -0 6\n"), "{shown}");
    // FP6 0xc1 0x20 0x14 is the stream 0x1420c1: codes 1 3 2 5, E2M3 subnormals of 1/8 each;
    // 0x3f 0xf0 0xff is 0xfff03f: codes 63 0 63 63, E3M2's -28 (-1.75 · 2^4) and 0.
    let shown = ok(&["cat", arg(&zt2z), "w.f6a"]);
    assert!(shown.ends_with("0.125 0.375 0.25 0.625\n"), "{shown}");
    let shown = ok(&["cat", arg(&st), "w.f6b"]);
    assert!(shown.ends_with("-28 0 -28 -28\n"), "{shown}");
    // Safetensors to safetensors, as it was.
    let direct = d.join("direct.safetensors");
    ok(&["convert", arg(&st), arg(&direct)]);
    assert_eq!(read_back(&direct).0, want);
    // The packed ones left out by name, into 1.2: the E8M0 scales, one byte an element, are
    // what 1.2 holds under a type name it does not register, and come back as they were.
    let out = ok(&["convert", arg(&st), arg(&zt), "--exclude", "w.f*"]);
    assert!(out.contains("(zTensor 1.2, 2 objects:"), "{out}");
    assert_eq!(ok(&["ls", arg(&zt)]), "scales\nw\n");
    let kept = d.join("kept.safetensors");
    ok(&["convert", arg(&zt), arg(&kept)]);
    assert_eq!(read_back(&kept).0["scales"], want["scales"]);
    // Carried as bytes into 1.2, with the dtype and shape recorded; back to safetensors,
    // restored byte for byte.
    ok(&["convert", arg(&st), arg(&zt), "--carry-unknown-dtypes", "--zstd", "3"]);
    let info = json(&ztensor(&["info", "--json", arg(&zt)]));
    let text = info.to_string();
    assert!(text.contains("safetensors.dtype") && text.contains("F8_E8M0"), "{text}");
    let back = d.join("back.safetensors");
    ok(&["convert", arg(&zt), arg(&back)]);
    assert_eq!(read_back(&back).0, want);
    std::fs::remove_dir_all(&d).unwrap();
}

/// The file `safetensors.torch` wrote (`fixtures/external/safetensors/make.py`): FP4 pairs and
/// E8M0 scales go to zTensor 2 and back as they were, their types named, the scales widened
/// exactly.
#[test]
fn a_microscaling_file_torch_wrote_goes_through_zt2_unchanged() {
    let d = scratch("microscaling-torch");
    let st = &crate::root().join("fixtures/external/safetensors/microscaling.safetensors");
    let (want, metadata) = read_back(st);
    assert_eq!(want["layer.weight"].0, Dtype::F4);
    assert_eq!(want["layer.weight"].1, [4, 64]);
    let info = ok(&["info", arg(st)]);
    assert!(info.contains("u8:f4_e2m1   [4, 64]") && info.contains("u8:f8_e8m0   [8]"), "{info}");
    let zt2 = d.join("mx.zt");
    ok(&["convert", arg(st), arg(&zt2), "--to", "2", "--zstd", "3"]);
    assert!(ok(&["verify", arg(&zt2)]).contains("sound"));
    let back = d.join("back.safetensors");
    ok(&["convert", arg(&zt2), arg(&back)]);
    assert_eq!(read_back(&back), (want, metadata));
    let scales: serde_json::Value =
        serde_json::from_str(&ok(&["cat", arg(&zt2), "layer.weight_scale", "--json"])).unwrap();
    // Each byte e is 2^(e-127); 255 is NaN, printed as a string (JSON has no NaN).
    let got = scales["values"].as_array().unwrap();
    for (value, e) in got.iter().zip([127, 128, 126, 130, 0, 254, 255, 120]) {
        match e {
            255 => assert_eq!(value, "NaN", "{scales}"),
            // Printed as the shortest text that reads back as the same f32.
            e => assert_eq!(
                value.as_f64().map(|v| v as f32),
                Some(2f64.powi(e - 127) as f32),
                "{e}: {scales}"
            ),
        }
    }
    assert_eq!(got.len(), 8);
    std::fs::remove_dir_all(&d).unwrap();
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

/// The value of an E2M1 code (OCP Microscaling): sign, two exponent bits of bias 1, one
/// mantissa bit, exponent 0 subnormal.
fn e2m1(code: u8) -> f32 {
    let sign = if code & 8 != 0 { -1.0 } else { 1.0 };
    let (exponent, mantissa) = (i32::from((code >> 1) & 3), f32::from(code & 1));
    sign * match exponent {
        0 => mantissa * 0.5,
        e => (1.0 + mantissa * 0.5) * 2f32.powi(e - 1),
    }
}

#[test]
fn gguf_mxfp4_becomes_zt_mx_in_zt2_holding_what_llama_cpp_dequantizes() {
    use ztensor_io::TensorSource;
    let d = scratch("gguf-mx");
    let gguf = crate::root().join("fixtures/external/gguf/mxfp4.gguf");
    let zt2 = d.join("mx.zt");
    ok(&["convert", arg(&gguf), arg(&zt2), "--to", "2"]);
    ok(&["verify", arg(&zt2)]);
    let opened = ztensor_registry::open(&zt2, &Default::default()).unwrap();
    let source = opened.source();
    for name in ["experts.down", "row", "wide"] {
        let object = source.read(source.find(name).unwrap()).unwrap();
        assert_eq!(object.format.name(), "zt.mx/1", "{name}");
        // What gguf-py's own dequantizer made of the same blocks, written beside them.
        let theirs = source.read(source.find(&format!("{name}.dequantized")).unwrap()).unwrap();
        assert_eq!(object.shape, theirs.shape, "{name}");
        let (data, scales) = (&object.components["data"].bytes, &object.components["scales"].bytes);
        let values = theirs.components["data"].bytes.chunks_exact(4);
        for (i, want) in values.map(|b| f32::from_le_bytes(b.try_into().unwrap())).enumerate() {
            let code = (data[i / 2] >> (4 * (i % 2))) & 0x0F;
            let got = 2f32.powi(i32::from(scales[i / 32]) - 127) * e2m1(code);
            assert_eq!(got, want, "{name}[{i}]");
        }
    }
    let q4 = source.info(source.find("q4_0").unwrap()).unwrap();
    assert_eq!((q4.format.name(), q4.shape.as_ref()), ("gguf.q4_0/1", &[2u64, 64][..]));
    // The file and its zTensor 2 conversion are one content.
    let ids = [ok(&["id", arg(&gguf)]), ok(&["id", arg(&zt2)])];
    assert_eq!(ids[0], ids[1]);
    // zTensor 1.2 and safetensors hold the blocks as bytes with their GGML type.
    let zt12 = d.join("mx-12.zt");
    ok(&["convert", arg(&gguf), arg(&zt12)]);
    let report = json(&ztensor(&["info", "--json", arg(&zt12)]));
    let row = report["objects"].as_array().unwrap().iter().find(|o| o["name"] == "row").unwrap();
    assert_eq!(row["attributes"]["gguf.type"], "MXFP4", "{row}");
    // zTensor 1.2 carries a zt.mx/1 object structurally (an object of an unknown format, its
    // parts as components), and converting it back gives the same canonical file.
    let back = d.join("back.zt");
    ok(&["convert", arg(&zt2), arg(&back), "--to", "1.2"]);
    let again = d.join("again.zt");
    ok(&["convert", arg(&back), arg(&again), "--to", "2"]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&zt2).unwrap());
    // A scale zt.mx/1 reads as NaN and GGUF as 2^127 stops the zTensor 2 conversion.
    let mut bytes = std::fs::read(&gguf).unwrap();
    let at = {
        let file = ztensor_foreign::gguf::GgufFile::new(bytes.as_slice()).unwrap();
        file.raw(file.find("row").unwrap()).unwrap().offset as usize
    };
    bytes[at] = 0xFF;
    let nan = d.join("nan.gguf");
    std::fs::write(&nan, &bytes).unwrap();
    let out = d.join("nan.zt");
    let refused = ztensor(&["convert", arg(&nan), arg(&out), "--to", "2"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("0xFF"), "{said}");
    assert!(!out.exists(), "nothing is left behind");
}

#[test]
fn a_gguf_file_and_its_zt2_conversion_compare_the_same() {
    let d = scratch("gguf-mx-diff");
    let gguf = crate::root().join("fixtures/external/gguf/mxfp4.gguf");
    let zt2 = d.join("mx.zt");
    ok(&["convert", arg(&gguf), arg(&zt2), "--to", "2"]);
    let same = ok(&["diff", arg(&gguf), arg(&zt2)]);
    assert!(same.contains("8 the same"), "{same}");
    let same = ok(&["diff", arg(&zt2), arg(&gguf)]);
    assert!(same.contains("8 the same"), "{same}");
}
