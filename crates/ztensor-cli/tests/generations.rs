//! zTensor 2 files through every command: read, converted both ways with one identity, and
//! written sharded.

use std::path::{Path, PathBuf};

use super::tools::{arg, fails, ok};
use super::{json, scratch, stdout, ztensor};

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
