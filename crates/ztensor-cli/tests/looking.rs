//! `diff` compares everything two files hold, attributes included; `cat` prints any object
//! whole in bounded memory.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use super::{json, scratch, stderr, stdout, ztensor};

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A safetensors file of two small tensors and `metadata`, written by the `safetensors` crate.
fn safetensors_with(path: &Path, metadata: &[(&str, &str)]) {
    let (w, b) = ([1u8, 2, 3, 4, 5, 6], [9u8, 8]);
    let views = vec![
        (
            "w",
            safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![2, 3], &w).unwrap(),
        ),
        ("b", safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![2], &b).unwrap()),
    ];
    let metadata: HashMap<String, String> =
        metadata.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    std::fs::write(path, safetensors::serialize(views, Some(metadata)).unwrap()).unwrap();
}

#[test]
fn diff_names_file_attributes_that_differ() {
    let d = scratch("diff-metadata");
    let (a, b) = (d.join("a.safetensors"), d.join("b.safetensors"));
    safetensors_with(&a, &[("tokenizer", "A"), ("epoch", "3")]);
    safetensors_with(&b, &[("tokenizer", "B"), ("epoch", "3")]);
    let out = ztensor(&["diff", arg(&a), arg(&b)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "~ file attribute tokenizer: \"A\" -> \"B\"\n0 removed, 0 added, 0 changed, 2 the same; \
         file attributes: 0 removed, 0 added, 1 changed\n"
    );
    let report = json(&ztensor(&["diff", "--json", arg(&a), arg(&b)]));
    assert_eq!(report["attributes"], serde_json::json!([{"key": "tokenizer", "a": "A", "b": "B"}]));
    assert_eq!(report["attributes_compared"], true);
    assert_eq!(report["same"], 2);
    // Told to, diff looks at the tensors alone.
    let out = ztensor(&["diff", "--ignore-attributes", arg(&a), arg(&b)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "0 removed, 0 added, 0 changed, 2 the same (attributes not compared)\n"
    );
    let report = json(&ztensor(&["diff", "--json", "--ignore-attributes", arg(&a), arg(&b)]));
    assert_eq!(report["attributes"], serde_json::json!([]));
    assert_eq!(report["attributes_compared"], false);
    // Keys only one side has are named, with their values, and the content identity (which
    // leaves file attributes out, zTensor 2 §5.4) is the same for both.
    let c = d.join("c.safetensors");
    safetensors_with(&c, &[("epoch", "3"), ("lr", "0.1")]);
    let out = ztensor(&["diff", arg(&a), arg(&c)]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("- file attribute tokenizer: \"A\"\n"), "{text}");
    assert!(text.contains("+ file attribute lr: \"0.1\"\n"), "{text}");
    assert!(text.ends_with("file attributes: 1 removed, 1 added, 0 changed\n"), "{text}");
    let ids = stdout(&ztensor(&["id", arg(&a), arg(&c)]));
    let digests: Vec<&str> = ids.lines().map(|l| l.split("  ").next().unwrap()).collect();
    assert_eq!(digests[0], digests[1], "{ids}");
}

#[test]
fn diff_after_dropping_attributes_names_what_was_dropped() {
    // A zTensor file's text attributes dropped on the way: named, status 1.
    let d = scratch("diff-dropped");
    let zt = d.join("t.zt");
    let out =
        ztensor(&["convert", "fixtures/examples/tiny-v1.2.zt", arg(&zt), "--drop-attributes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ztensor(&["diff", "fixtures/examples/tiny-v1.2.zt", arg(&zt)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "- file attribute license: \"CC0-1.0\"\n- file attribute framework: \"example\"\n\
         0 removed, 0 added, 0 changed, 4 the same; file attributes: 2 removed, 0 added, 0 changed\n"
    );
    // TensorBuffers operations, which safetensors cannot hold, dropped on the way: the dropped
    // key is named, the kept one is not.
    let tb = "fixtures/tensorbuffers/valid/model-and-operations.tb";
    let st = d.join("s.safetensors");
    let out = ztensor(&["convert", tb, arg(&st), "--drop-attributes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ztensor(&["diff", tb, arg(&st)]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.starts_with("- file attribute tensorbuffers.operations: "), "{text}");
    assert!(!text.contains("tensorbuffers.model"), "{text}");
    assert_eq!(ztensor(&["diff", "--ignore-attributes", tb, arg(&st)]).status.code(), Some(0));
    // What was carried whole diffs as equal.
    let kept = d.join("kept.zt");
    assert!(ztensor(&["convert", tb, arg(&kept)]).status.success());
    let out = ztensor(&["diff", tb, arg(&kept)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn diff_names_object_attributes_that_differ() {
    // The bundled 0.1 file's `step` has {"unit": "iterations"}; a copy with another value of
    // the same length.
    let d = scratch("diff-object-attributes");
    let bytes = std::fs::read(super::root().join("fixtures/examples/tiny-v0.1.zt")).unwrap();
    let at = bytes.windows(10).position(|w| w == b"iterations").expect("the attribute value");
    let mut changed = bytes.clone();
    changed[at..at + 10].copy_from_slice(b"epochs....");
    let b = d.join("b.zt");
    std::fs::write(&b, &changed).unwrap();
    let a = "fixtures/examples/tiny-v0.1.zt";
    let out = ztensor(&["diff", a, arg(&b)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "~ step: attribute unit: \"iterations\" -> \"epochs....\"\n\
         0 removed, 0 added, 1 changed, 3 the same\n"
    );
    let report = json(&ztensor(&["diff", "--json", a, arg(&b)]));
    assert_eq!(
        report["changed"],
        serde_json::json!([{
            "name": "step",
            "changes": ["attribute unit changed"],
            "attributes": [{"key": "unit", "a": "iterations", "b": "epochs...."}],
        }])
    );
    let out = ztensor(&["diff", "--ignore-attributes", a, arg(&b)]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// A `.npy` file of `rows` × `cols` bytes (`|u1`), element `i` being `i % 251`.
fn npy_u8(path: &Path, rows: usize, cols: usize) {
    let dict = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let total = (10 + dict.len() + 1).next_multiple_of(64);
    let mut header = dict.into_bytes();
    header.resize(total - 10 - 1, b' ');
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend((0..rows * cols).map(|i| u8::try_from(i % 251).unwrap()));
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn cat_prints_every_value_of_a_large_object_in_bounded_memory() {
    // 20 MB of u8: twenty million values. Held as strings they take over a gigabyte; printed
    // as they are decoded, the command fits in 256 MiB of address space.
    let d = scratch("cat-large");
    let (rows, cols) = (20_000, 1_000);
    let npy = d.join("big.npy");
    npy_u8(&npy, rows, cols);
    let zt = d.join("big.zt");
    // A compressed zTensor copy: its pieces come out of zstd frames, and its digests are
    // checked before anything is printed.
    let out = ztensor(&["convert", arg(&npy), arg(&zt), "--zstd", "1", "--digest", "sha256"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let name = stdout(&ztensor(&["ls", arg(&npy)])).trim().to_owned();
    let capped = |file: &Path| {
        let out = Command::new("prlimit")
            .arg(format!("--as={}", 256u64 << 20))
            .args(["--", env!("CARGO_BIN_EXE_ztensor"), "cat", arg(file), &name, "-n", "0"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let text = capped(&npy);
    let mut lines = text.split(|&b| b == b'\n');
    assert_eq!(
        lines.next().unwrap(),
        format!("# {name}: |u1 [{rows}, {cols}], {} elements", rows * cols).as_bytes()
    );
    let mut values = 0usize;
    for (r, line) in lines.by_ref().take(rows).enumerate() {
        let line = std::str::from_utf8(line).unwrap();
        let want: Vec<String> = (r * cols..(r + 1) * cols).map(|i| (i % 251).to_string()).collect();
        assert_eq!(line, want.join(" "), "row {r}");
        values += cols;
    }
    assert_eq!(values, rows * cols);
    // Nothing after the last row: no "... more" line.
    assert_eq!(lines.collect::<Vec<_>>(), [b""]);
    assert!(capped(&zt) == text, "the zTensor copy prints the same values");
    // With a limit, the values stop there and the rest are counted.
    let out = ztensor(&["cat", arg(&zt), &name, "-n", "1500"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{}", &text[..200]);
    assert_eq!(lines[2].split(' ').count(), 500);
    assert_eq!(lines[3], format!("... ({} more; --limit 0 prints all)", rows * cols - 1500));
}

/// `cat --json` prints what `cat` prints, as one JSON object: the same values (each text value
/// read back as a number equals the JSON number), the header's dtype, shape and count, and how
/// many were printed of how many.
#[test]
fn cat_as_json_is_the_text_cat() {
    for (file, names) in [
        ("fixtures/examples/tiny-v1.2.zt", &["adjacency", "layer0.weight", "scales.fp8"][..]),
        ("fixtures/examples/checkpoint/model.safetensors.index.json", &["embed.weight"][..]),
    ] {
        for name in names {
            let text = ztensor(&["cat", file, name, "-n", "20"]);
            assert!(text.status.success(), "{}", stderr(&text));
            let text = stdout(&text);
            let report = json(&ztensor(&["cat", file, name, "-n", "20", "--json"]));
            let header = text.lines().next().unwrap();
            assert!(header.starts_with(&format!("# {name}: ")), "{header}");
            let dtype = report["dtype"].as_str().unwrap();
            let shape: Vec<u64> =
                report["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
            let elements = report["elements"].as_u64().unwrap();
            assert!(
                header.contains(&format!("{dtype} {shape:?}, {elements} elements")),
                "{header}"
            );
            let values: Vec<f64> = text
                .lines()
                .skip(1)
                .take_while(|l| !l.starts_with("..."))
                .flat_map(|l| l.split_whitespace().map(|v| v.parse::<f64>().unwrap()))
                .collect();
            let listed: Vec<f64> =
                report["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(listed, values, "{file} {name}");
            assert_eq!(report["printed"].as_u64(), Some(values.len() as u64));
            assert_eq!(text.contains("more; --limit 0"), (values.len() as u64) < elements);
        }
    }
}

#[test]
fn cat_prints_the_last_values_of_a_widened_object_whatever_their_count() {
    // Widened one or two bytes at a time, counts that are no multiple of four f32s: the last
    // values were once held back as an unfinished piece.
    let d = scratch("cat-tail");
    let file = d.join("m.safetensors");
    crate::tools::write_safetensors(&file, &crate::tools::specs(), None);
    // E4M3 0x38 1.0, 0x7e 448, 0xb8 -1.0; E5M2 0x3c 1.0, 0xc0 -2.0 (their definitions).
    for (name, shown) in [("w.fp8", "1 448 -1"), ("w.fp8b", "1 -2")] {
        let text = stdout(&ztensor(&["cat", arg(&file), name]));
        assert!(text.lines().nth(1) == Some(shown), "{name}: {text}");
        let report = json(&ztensor(&["cat", arg(&file), name, "--json"]));
        let values = report["values"].as_array().unwrap().len();
        assert_eq!(values, shown.split(' ').count(), "{name}: {report}");
    }
}
