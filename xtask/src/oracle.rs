//! `cargo xtask v2-oracle [--freeze]`: the zTensor 2 reference implementation (crates.io
//! `ztensor` 2.1.1, through `xtask/reference-adapter/v2`) as the oracle for this project's
//! zTensor 2 writer and reader.
//!
//! For every valid zTensor 0.1/1.1/1.2 fixture that converts (`ztensor convert F T --to 2`):
//! the reference reads T with the same content (its dump equals ours), its canonical-form
//! checker finds nothing, its content digest equals `ztensor id F`, its canonical writer given T
//! writes T's very bytes, and the file its own non-canonical writer makes of T (every part
//! under `zt.zstd-seekable/1`) reads here with the same content and identity; T written as a
//! sharded model (`convert F DIR/ --to 2 --shard-size 1`) opens in the reference through its
//! default resolver with the same content and identity. For every valid
//! file of the reference's corpus, the two readers' dumps are equal. The findings go to
//! `crates/ztensor-v2/ORACLE.md`; any disagreement fails the task, except the one the
//! reference disagrees with itself on (its checker flags the placement of a zero-length part
//! that its own writer chooses, byte for byte the same as ours).
//!
//! `--freeze` also writes the reference's files for a few fixtures, with the reference's
//! dumps and content digests, under `crates/ztensor-conformance/fixtures/producers/v2/`, and
//! the reference corpus's index with golden dumps (`fixtures/external/ztensor2/index.toml`):
//! the tests and the conformance runner read them on every run, without the reference.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value as Json;

/// The fixtures whose reference-written files are frozen (small: every blob of a zTensor 2
/// file takes at least 64 KiB).
const FROZEN: &[&str] = &[
    "examples/tiny-v0.1.zt",
    "examples/tiny-v1.2.zt",
    "v1.2/valid/sparse.zt",
    "v1.2/valid/logical-complex64.zt",
    "v1.2/valid/dense-bool.zt",
    "v1.2/valid/scalar-and-zero-size.zt",
    "v1.2/valid/quantized-group.zt",
];

/// The reference corpus's verdicts (its generator's `all_cases()`, `spec/ztensor-2.md` §9): group,
/// file, the operation that decides, and `ok` or the rule it breaks.
const CORPUS: &[(&str, &str, &str, &str)] = &[
    ("valid", "aliased-identical-blobs", "open", "ok"),
    ("valid", "attributes-kitchen-sink", "open", "ok"),
    ("valid", "canonical-basic", "open", "ok"),
    ("valid", "csr-data-valid", "csr(m)", "ok"),
    ("valid", "csr-metadata-valid", "open", "ok"),
    ("valid", "data-shard", "open", "ok"),
    ("valid", "empty-objects", "open", "ok"),
    ("valid", "f4-packed-odd-count", "open", "ok"),
    ("valid", "local-and-foreign-parts-together", "open", "ok"),
    ("valid", "minimal", "open", "ok"),
    ("valid", "nonzero-reserved-ignored", "open", "ok"),
    ("valid", "scalar", "open", "ok"),
    ("valid", "shard-reference-is-a-valid-image", "open", "ok"),
    ("valid", "shards-table", "open", "ok"),
    ("valid", "unknown-layout-structural", "open", "ok"),
    ("valid", "unknown-ltype-structural", "open", "ok"),
    ("valid", "verify-ok", "verify(t,data)", "ok"),
    ("valid", "view-unknown-encoding-refused", "view(t,data)", "ok"),
    ("valid", "zero-size-tensor", "open", "ok"),
    ("reject", "file-too-small", "open", "file_too_small"),
    ("reject", "header-magic", "open", "header_magic"),
    ("reject", "footer-magic", "open", "footer_magic"),
    ("reject", "version-unsupported", "open", "version"),
    ("reject", "manifest-too-large", "open", "manifest_too_large"),
    ("reject", "manifest-out-of-bounds", "open", "manifest_bounds"),
    ("reject", "manifest-misaligned", "open", "blob_alignment"),
    ("reject", "manifest-hash-mismatch", "open", "manifest_hash"),
    ("reject", "data-shard-nonzero-offset", "open", "manifest_bounds"),
    ("reject", "cbor-trailing-bytes", "open", "cbor_syntax"),
    ("reject", "cbor-tag", "open", "cbor_syntax"),
    ("reject", "cbor-indefinite", "open", "cbor_syntax"),
    ("reject", "cbor-non-shortest", "open", "cbor_determinism"),
    ("reject", "cbor-unsorted-keys", "open", "cbor_determinism"),
    ("reject", "cbor-duplicate-key", "open", "cbor_duplicate_key"),
    ("reject", "cbor-depth", "open", "cbor_depth"),
    ("reject", "schema-missing-objects", "open", "schema"),
    ("reject", "schema-unknown-dtype", "open", "schema"),
    ("reject", "schema-blob-arity", "open", "schema"),
    ("reject", "blob-array-with-three-elements", "open", "schema"),
    ("reject", "schema-encoding-without-decoded-length", "open", "schema"),
    ("reject", "schema-ltype-dtype-mismatch", "open", "schema"),
    ("reject", "schema-digest-uppercase-hex", "open", "schema"),
    ("reject", "shard-table-key-not-text", "open", "schema"),
    ("reject", "attributes-not-a-map", "open", "schema"),
    ("reject", "attribute-key-not-text", "open", "schema"),
    ("reject", "object-attributes-not-a-map", "open", "schema"),
    ("reject", "attribute-key-empty", "open", "name"),
    ("reject", "attribute-key-nul", "open", "name"),
    ("reject", "name-empty", "open", "name"),
    ("reject", "name-nul", "open", "name"),
    ("reject", "name-too-long", "open", "name"),
    ("reject", "shard-name-traversal", "open", "shard_name"),
    ("reject", "shard-name-separator", "open", "shard_name"),
    ("reject", "shard-name-empty", "open", "shard_name"),
    ("reject", "shard-name-leading-dot", "open", "shard_name"),
    ("reject", "shard-ref-not-in-table", "open", "shard_ref"),
    ("reject", "shape-rank-65", "open", "shape"),
    ("reject", "shape-product-overflow", "open", "shape"),
    ("reject", "blob-misaligned", "open", "blob_alignment"),
    ("reject", "blob-offset-zero", "open", "blob_alignment"),
    ("reject", "blob-out-of-bounds", "open", "blob_bounds"),
    ("reject", "blob-partial-overlap", "open", "blob_overlap"),
    ("reject", "shard-blob-partial-overlap", "open", "blob_overlap"),
    ("reject", "dense-extra-part", "open", "layout_rule"),
    ("reject", "dense-size-mismatch", "open", "dense_size"),
    ("reject", "dense-f4-size-mismatch", "open", "dense_size"),
    ("reject", "csr-missing-part", "open", "layout_rule"),
    ("reject", "csr-signed-indices", "open", "layout_rule"),
    ("reject", "csr-indptr-count", "open", "layout_rule"),
    ("reject", "csr-values-size", "open", "layout_rule"),
    ("reject", "csr-indptr-not-zero-based", "csr(m)", "layout_data"),
    ("reject", "csr-index-out-of-cols", "csr(m)", "layout_data"),
    ("reject", "csr-row-not-increasing", "csr(m)", "layout_data"),
    ("reject", "bool-invalid-byte", "verify(t,data)", "layout_data"),
    ("reject", "f4-nonzero-odd-nibble", "verify(t,data)", "layout_data"),
    ("reject", "verify-digest-mismatch", "verify(t,data)", "digest"),
];

/// Files whose shards are not beside them: the reference resolves shards when it opens a file
/// and cannot open these; this project opens them and reads every object not in a shard. The
/// specs let readers differ (`spec/ztensor-2.md` §8, item 20).
const SHARDS_NOT_BESIDE: &[&str] =
    &["local-and-foreign-parts-together", "shard-reference-is-a-valid-image", "shards-table"];

/// Writes `fixtures/external/ztensor2/index.toml` (every corpus file with its verdict in the
/// dump protocol) and the golden dump of each file a reader accepts: the reference's dump, or
/// ours where the reference cannot open the file alone.
fn corpus_index(fixtures: &Path, reference: &Path, ours: &Path) -> Result<()> {
    let dir = fixtures.join("external/ztensor2");
    let mut index = String::from(
        "# Written by `cargo xtask v2-oracle --freeze` from the reference corpus's verdicts\n\
         # (spec/ztensor-2.md §9). A file rejected at open expects its rule; a file that opens and\n\
         # whose object then fails (a digest, CSR data) is accepted, the object carrying the error.\n\
         # Golden dumps (`<name>.json`) are the reference 2.1.1's (xtask/reference-adapter/v2),\n\
         # ours for the files whose shards are not beside them (implementation-defined).\n",
    );
    for (group, name, op, verdict) in CORPUS {
        let file = format!("external/ztensor2/{group}/{name}.zt");
        let defined = SHARDS_NOT_BESIDE.contains(name);
        let expect = if defined {
            "implementation-defined"
        } else if *verdict == "ok" || *op != "open" {
            "ok"
        } else {
            verdict
        };
        let covers = if *op == "open" {
            format!("{group}: {name}")
        } else {
            format!(
                "{group}: {name} ({op} {})",
                if *verdict == "ok" { "succeeds" } else { verdict }
            )
        };
        index.push_str(&format!(
            "\n[[fixture]]\nfile = \"{file}\"\nversion = \"2\"\ncovers = \"{covers}\"\nexpect = \"{expect}\"\n"
        ));
        if expect != "ok" && !defined {
            continue;
        }
        let reader = if defined { ours } else { reference };
        let mut command = Command::new(reader);
        if defined {
            command.arg("dump");
        }
        let (ok, dump, err) = output(command.arg(fixtures.join(&file)))?;
        if !ok {
            bail!("{file}: the golden dump failed: {err}");
        }
        let pretty = serde_json::to_string_pretty(&json(&dump)?)?;
        std::fs::write(dir.join(group).join(format!("{name}.json")), pretty + "\n")?;
    }
    std::fs::write(dir.join("index.toml"), index)?;
    Ok(())
}

fn output(command: &mut Command) -> Result<(bool, Vec<u8>, String)> {
    let out = command.output().with_context(|| format!("running {command:?}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    Ok((out.status.success(), out.stdout, stderr))
}

fn json(bytes: &[u8]) -> Result<Json> {
    serde_json::from_slice(bytes).context("a dump that is not JSON")
}

/// A dump with each object's error reduced to whether it has one: messages are each
/// implementation's own words.
fn normalized(mut dump: Json) -> Json {
    if let Some(objects) = dump["objects"].as_array_mut() {
        for o in objects {
            o["error"] = Json::Bool(!o["error"].is_null());
        }
    }
    dump
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "zt") {
            out.push(path);
        }
    }
    Ok(())
}

/// What one fixture gave.
enum Outcome {
    Agreed,
    /// The reference's checker flags a zero-length part its own writer placed the same way.
    ZeroLengthQuirk,
    NotConverted(String),
    Disagreed(String),
}

/// Builds the zTensor 2 reference's adapter (crates.io `ztensor` 2.1.1) and returns its
/// binary's path.
pub fn v2_adapter(root: &Path) -> Result<String> {
    let adapter_dir = root.join("xtask/reference-adapter/v2");
    super::cargo(
        &[
            "build",
            "-q",
            "--release",
            "--manifest-path",
            adapter_dir.join("Cargo.toml").to_str().context("path")?,
        ],
        &[],
    )?;
    let binary = adapter_dir.join("target/release/reference-dump-v2");
    Ok(binary.to_str().context("path")?.to_owned())
}

pub fn v2_oracle(root: &Path, freeze: bool) -> Result<()> {
    let reference = std::path::PathBuf::from(v2_adapter(root)?);
    super::cargo(&["build", "-q", "-p", "ztensor-cli"], &[])?;
    let ours = root.join("target/debug/ztensor");
    let fixtures = root.join("crates/ztensor-conformance/fixtures");
    let work = root.join("target/v2-oracle");
    std::fs::create_dir_all(&work)?;
    let frozen_dir = fixtures.join("producers/v2/reference-2.1.1");
    if freeze {
        if frozen_dir.exists() {
            std::fs::remove_dir_all(&frozen_dir)?;
        }
        std::fs::create_dir_all(&frozen_dir)?;
    }
    let mut inputs = Vec::new();
    for dir in [
        "v0.1/valid",
        "v1.1/valid",
        "v1.2/valid",
        "producers/v0.1",
        "producers/v1.1",
        "producers/v1.2",
        "examples",
    ] {
        files(&fixtures.join(dir), &mut inputs)?;
    }
    inputs.sort();
    let two = work.join("two.zt");
    let rewritten = work.join("rewritten.zt");
    let encoded = work.join("encoded.zt");
    let ours_encoded = work.join("ours-encoded.zt");
    let mut outcomes = Vec::new();
    let mut ids = serde_json::Map::new();
    for input in &inputs {
        let label = input.strip_prefix(&fixtures)?.display().to_string();
        let outcome = (|| -> Result<Outcome> {
            let (ok, _, err) = output(
                Command::new(&ours).args(["convert", "-q", "--to", "2"]).arg(input).arg(&two),
            )?;
            if !ok {
                let reason = err.lines().next().unwrap_or_default();
                let reason = reason.rsplit_once(" to zTensor 2: ").map_or(reason, |(_, r)| r);
                return Ok(Outcome::NotConverted(reason.to_owned()));
            }
            let (_, id, _) = output(Command::new(&ours).arg("id").arg(input))?;
            let id = String::from_utf8(id)?.trim().to_owned();
            let (_, checked, _) = output(Command::new(&reference).arg("--canonical").arg(&two))?;
            let checked = json(&checked)?;
            let mut problems = Vec::new();
            if checked["id"] != Json::String(id.clone()) {
                problems.push(format!("the reference's id is {}, ours {id}", checked["id"]));
            }
            let (_, their_dump, _) = output(Command::new(&reference).arg(&two))?;
            let (_, our_dump, _) = output(Command::new(&ours).arg("dump").arg(&two))?;
            if normalized(json(&their_dump)?) != normalized(json(&our_dump)?) {
                problems.push("the reference reads other content".to_owned());
            }
            // Our zstd-seekable file: the reference reads it alike, with the same identity.
            let (ok, _, err) = output(
                Command::new(&ours)
                    .args(["convert", "-q", "--to", "2", "--zstd", "3"])
                    .arg(input)
                    .arg(&ours_encoded),
            )?;
            if ok {
                let (_, their_dump, _) = output(Command::new(&reference).arg(&ours_encoded))?;
                let (_, our_dump, _) = output(Command::new(&ours).arg("dump").arg(&ours_encoded))?;
                if normalized(json(&their_dump)?) != normalized(json(&our_dump)?) {
                    problems.push("the reference reads our zstd-seekable file otherwise".into());
                }
                let (_, checked, _) =
                    output(Command::new(&reference).arg("--canonical").arg(&ours_encoded))?;
                if json(&checked)?["id"] != Json::String(id.clone()) {
                    problems.push("our zstd-seekable file has another identity there".into());
                }
            } else {
                problems.push(format!("--zstd 3 fails where raw does not: {err}"));
            }
            // Our sharded output (an object a shard, mostly): the reference opens the root with
            // its default resolver and reads the same content, with the same identity.
            let sharded = work.join("sharded");
            if sharded.exists() {
                std::fs::remove_dir_all(&sharded)?;
            }
            let mut dir = sharded.clone().into_os_string();
            dir.push("/");
            let (ok, _, err) = output(
                Command::new(&ours)
                    .args(["convert", "-q", "--to", "2", "--shard-size", "1"])
                    .arg(input)
                    .arg(&dir),
            )?;
            let sharded_root = std::fs::read_dir(&sharded)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| !p.to_string_lossy().contains("-of-"));
            match (ok, sharded_root) {
                (true, Some(root)) => {
                    let (_, their_dump, _) = output(Command::new(&reference).arg(&root))?;
                    let (_, our_dump, _) = output(Command::new(&ours).arg("dump").arg(&root))?;
                    if normalized(json(&their_dump)?) != normalized(json(&our_dump)?) {
                        problems.push("the reference reads our sharded model otherwise".into());
                    }
                    let (_, checked, _) =
                        output(Command::new(&reference).arg("--canonical").arg(&root))?;
                    if json(&checked)?["id"] != Json::String(id.clone()) {
                        problems.push("our sharded model has another identity there".into());
                    }
                }
                _ => problems.push(format!("sharded output fails where one file does not: {err}")),
            }
            let (ok, _, err) =
                output(Command::new(&reference).arg("--rewrite").arg(&two).arg(&rewritten))?;
            let same_bytes = ok && std::fs::read(&rewritten)? == std::fs::read(&two)?;
            if !same_bytes {
                problems.push(format!("the reference's canonical writer writes other bytes {err}"));
            }
            let (ok, _, err) =
                output(Command::new(&reference).arg("--encode").arg(&two).arg(&encoded))?;
            if !ok {
                problems.push(format!("the reference cannot encode it: {err}"));
            } else {
                let (_, their_dump, _) = output(Command::new(&reference).arg(&encoded))?;
                let (_, our_dump, _) = output(Command::new(&ours).arg("dump").arg(&encoded))?;
                if normalized(json(&their_dump)?) != normalized(json(&our_dump)?) {
                    problems.push("its zstd-seekable file reads here with other content".into());
                }
                let (_, encoded_id, _) = output(Command::new(&ours).arg("id").arg(&encoded))?;
                if String::from_utf8(encoded_id)?.trim() != id {
                    problems.push("its zstd-seekable file has another identity here".to_owned());
                }
                if freeze && FROZEN.contains(&label.as_str()) {
                    let stem = label.trim_end_matches(".zt").replace('/', "-");
                    for (file, suffix) in [(&rewritten, ""), (&encoded, "-zstd")] {
                        let name = format!("{stem}{suffix}");
                        std::fs::copy(file, frozen_dir.join(format!("{name}.zt")))?;
                        let (_, dump, _) = output(Command::new(&reference).arg(file))?;
                        let pretty = serde_json::to_string_pretty(&json(&dump)?)?;
                        std::fs::write(frozen_dir.join(format!("{name}.json")), pretty + "\n")?;
                        ids.insert(name, Json::String(id.clone()));
                    }
                }
            }
            let violations = checked["violations"].as_array().cloned().unwrap_or_default();
            let quirk = !violations.is_empty()
                && same_bytes
                && violations.iter().all(|v| {
                    v.as_str().is_some_and(|v| {
                        v.contains("with a blob of a different length")
                            || v.contains("the space between belongs to nothing")
                    })
                });
            if !violations.is_empty() && !quirk {
                problems.push(format!("the reference's checker says {violations:?}"));
            }
            Ok(match (problems.is_empty(), quirk) {
                (true, true) => Outcome::ZeroLengthQuirk,
                (true, false) => Outcome::Agreed,
                (false, _) => Outcome::Disagreed(problems.join("; ")),
            })
        })()?;
        outcomes.push((label, outcome));
    }
    // The reference's own corpus: both readers, the same dumps.
    let mut corpus = Vec::new();
    files(&fixtures.join("external/ztensor2/valid"), &mut corpus)?;
    corpus.sort();
    let mut corpus_agreed = 0;
    let (mut corpus_shards, mut corpus_disagreed) = (Vec::new(), Vec::new());
    for file in &corpus {
        let (_, their_dump, _) = output(Command::new(&reference).arg(file))?;
        let (_, our_dump, _) = output(Command::new(&ours).arg("dump").arg(file))?;
        let (theirs, ours) = (normalized(json(&their_dump)?), normalized(json(&our_dump)?));
        let label = file.strip_prefix(&fixtures)?.display().to_string();
        // The reference resolves a file's shards when it opens it (beside it, by name); the
        // corpus's files name shards that are not there. Here the file opens, and only the
        // objects in shards cannot be read.
        let shards_missing =
            theirs["error"]["message"].as_str().is_some_and(|m| m.contains("No such file"))
                && ours["objects"].as_array().is_some_and(|o| o.iter().any(|o| o["error"] == true));
        if theirs == ours {
            corpus_agreed += 1;
        } else if shards_missing {
            corpus_shards.push(label);
        } else {
            corpus_disagreed.push(label);
        }
    }
    if freeze {
        let pretty = serde_json::to_string_pretty(&Json::Object(ids))?;
        std::fs::write(frozen_dir.join("ids.json"), pretty + "\n")?;
        corpus_index(&fixtures, &reference, &ours)?;
    }
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
    let agreed = count(|o| matches!(o, Outcome::Agreed));
    let quirks = count(|o| matches!(o, Outcome::ZeroLengthQuirk));
    let mut report = format!(
        "# zTensor 2: the reference implementation as oracle\n\n\
         Written by `cargo xtask v2-oracle` (crates.io `ztensor` 2.1.1 through \
         `xtask/reference-adapter/v2`). Each valid zTensor 0.1/1.1/1.2 fixture is converted with \
         `ztensor convert F T --to 2`; the reference then reads T (its dump must equal ours), \
         checks its canonical form, computes its content digest (must equal `ztensor id F`), \
         rewrites it with its canonical writer (the bytes must be T's) and writes it again with \
         every part under `zt.zstd-seekable/1` (that file must read here with the same content \
         and identity); it also reads `ztensor convert F --to 2 --zstd 3`, and the sharded model \
         `ztensor convert F DIR/ --to 2 --shard-size 1` writes (a root, a shard an object) \
         through its default resolver, with the same content and identity.\n\n\
         | fixtures | agreed in everything | agreed, the reference checker's zero-length quirk | \
         not converted (content zTensor 2 cannot hold) | disagreed |\n|---|---|---|---|---|\n\
         | {} | {agreed} | {quirks} | {} | {} |\n\n\
         The reference's own corpus (`fixtures/external/ztensor2/valid`, {} files): the two \
         readers' dumps (content, and which objects fail to read) agree on {corpus_agreed}; on \
         {} the reference, which resolves shards when it opens a file, cannot open it (its \
         shards are not beside it), and this reader opens it and reads every object not in a \
         shard: {}; they disagree on {}.\n\n",
        outcomes.len(),
        count(|o| matches!(o, Outcome::NotConverted(_))),
        count(|o| matches!(o, Outcome::Disagreed(_))),
        corpus.len(),
        corpus_shards.len(),
        corpus_shards.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", "),
        if corpus_disagreed.is_empty() {
            "none".to_owned()
        } else {
            corpus_disagreed.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ")
        },
    );
    report.push_str(
        "The quirk: a zero-length part placed where the next blob starts (`spec/ztensor-2.md` \
         §8, item 10). The reference's canonical writer places it there too, and writes the \
         very bytes this project writes for those files; its checker then reports rule 3 and \
         rule 1 against its own output.\n\n",
    );
    let mut listed = |title: &str, pick: &dyn Fn(&Outcome) -> Option<String>| {
        let rows: Vec<String> = outcomes
            .iter()
            .filter_map(|(l, o)| pick(o).map(|why| format!("| `{l}` | {why} |")))
            .collect();
        if !rows.is_empty() {
            report.push_str(&format!("## {title}\n\n| fixture | why |\n|---|---|\n"));
            report.push_str(&rows.join("\n"));
            report.push_str("\n\n");
        }
    };
    listed("Not converted", &|o| match o {
        Outcome::NotConverted(why) => Some(why.replace('|', "\\|")),
        _ => None,
    });
    listed("With the zero-length quirk", &|o| match o {
        Outcome::ZeroLengthQuirk => Some("same bytes as the reference's writer".to_owned()),
        _ => None,
    });
    listed("Disagreed", &|o| match o {
        Outcome::Disagreed(why) => Some(why.replace('|', "\\|")),
        _ => None,
    });
    std::fs::write(root.join("crates/ztensor-v2/ORACLE.md"), &report)?;
    print!("{report}");
    let disagreed = count(|o| matches!(o, Outcome::Disagreed(_)));
    if disagreed > 0 || !corpus_disagreed.is_empty() {
        bail!("{disagreed} fixtures and {} corpus files disagree", corpus_disagreed.len());
    }
    Ok(())
}
