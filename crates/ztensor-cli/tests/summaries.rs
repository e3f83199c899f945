//! What the tool says as it works: the sizes its summaries give (alike in every command), what
//! zstd left raw, attributes a key to a line, what `--drop-attributes` and `--shard-size` did,
//! the progress line on a terminal and what the engine held in flight.

use std::collections::HashMap;
use std::path::Path;

use super::tools::{arg, ok, read_back, specs, write_safetensors};
use super::{json, scratch, ztensor};

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
