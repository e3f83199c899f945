//! The published conformance corpus of zTensor 2 (`fixtures/external/ztensor2/`, from the
//! reference project's `conformance/corpus`), each file with the verdict its generator gives it.

use std::path::PathBuf;

use ztensor_v2::{File, Rule, open};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2")
}

/// Valid files, and the operation the corpus applies after opening (`open` alone for most).
const VALID: &[(&str, &str)] = &[
    ("aliased-identical-blobs", "open"),
    ("attributes-kitchen-sink", "open"),
    ("canonical-basic", "open"),
    ("csr-data-valid", "csr(m)"),
    ("csr-metadata-valid", "open"),
    ("data-shard", "open"),
    ("empty-objects", "open"),
    ("f4-packed-odd-count", "open"),
    ("local-and-foreign-parts-together", "open"),
    ("minimal", "open"),
    ("nonzero-reserved-ignored", "open"),
    ("scalar", "open"),
    ("shard-reference-is-a-valid-image", "open"),
    ("shards-table", "open"),
    ("unknown-layout-structural", "open"),
    ("unknown-ltype-structural", "open"),
    ("verify-ok", "verify(t,data)"),
    ("view-unknown-encoding-refused", "view(t,data)"),
    ("zero-size-tensor", "open"),
];

/// Rejected files: the operation that rejects them and the rule it names. A file rejected by an
/// operation after opening (a digest check, CSR data) must open.
const REJECT: &[(&str, &str, Rule)] = &[
    ("file-too-small", "open", Rule::FileTooSmall),
    ("header-magic", "open", Rule::HeaderMagic),
    ("footer-magic", "open", Rule::FooterMagic),
    ("version-unsupported", "open", Rule::Version),
    ("manifest-too-large", "open", Rule::ManifestTooLarge),
    ("manifest-out-of-bounds", "open", Rule::ManifestBounds),
    ("manifest-misaligned", "open", Rule::BlobAlignment),
    ("manifest-hash-mismatch", "open", Rule::ManifestHash),
    ("data-shard-nonzero-offset", "open", Rule::ManifestBounds),
    ("cbor-trailing-bytes", "open", Rule::CborSyntax),
    ("cbor-tag", "open", Rule::CborSyntax),
    ("cbor-indefinite", "open", Rule::CborSyntax),
    ("cbor-non-shortest", "open", Rule::CborDeterminism),
    ("cbor-unsorted-keys", "open", Rule::CborDeterminism),
    ("cbor-duplicate-key", "open", Rule::CborDuplicateKey),
    ("cbor-depth", "open", Rule::CborDepth),
    ("schema-missing-objects", "open", Rule::Schema),
    ("schema-unknown-dtype", "open", Rule::Schema),
    ("schema-blob-arity", "open", Rule::Schema),
    ("blob-array-with-three-elements", "open", Rule::Schema),
    ("schema-encoding-without-decoded-length", "open", Rule::Schema),
    ("schema-ltype-dtype-mismatch", "open", Rule::Schema),
    ("schema-digest-uppercase-hex", "open", Rule::Schema),
    ("shard-table-key-not-text", "open", Rule::Schema),
    ("attributes-not-a-map", "open", Rule::Schema),
    ("attribute-key-not-text", "open", Rule::Schema),
    ("object-attributes-not-a-map", "open", Rule::Schema),
    ("attribute-key-empty", "open", Rule::Name),
    ("attribute-key-nul", "open", Rule::Name),
    ("name-empty", "open", Rule::Name),
    ("name-nul", "open", Rule::Name),
    ("name-too-long", "open", Rule::Name),
    ("shard-name-traversal", "open", Rule::ShardName),
    ("shard-name-separator", "open", Rule::ShardName),
    ("shard-name-empty", "open", Rule::ShardName),
    ("shard-name-leading-dot", "open", Rule::ShardName),
    ("shard-ref-not-in-table", "open", Rule::ShardRef),
    ("shape-rank-65", "open", Rule::Shape),
    ("shape-product-overflow", "open", Rule::Shape),
    ("blob-misaligned", "open", Rule::BlobAlignment),
    ("blob-offset-zero", "open", Rule::BlobAlignment),
    ("blob-out-of-bounds", "open", Rule::BlobBounds),
    ("blob-partial-overlap", "open", Rule::BlobOverlap),
    ("shard-blob-partial-overlap", "open", Rule::BlobOverlap),
    ("dense-extra-part", "open", Rule::LayoutRule),
    ("dense-size-mismatch", "open", Rule::DenseSize),
    ("dense-f4-size-mismatch", "open", Rule::DenseSize),
    ("csr-missing-part", "open", Rule::LayoutRule),
    ("csr-signed-indices", "open", Rule::LayoutRule),
    ("csr-indptr-count", "open", Rule::LayoutRule),
    ("csr-values-size", "open", Rule::LayoutRule),
    ("csr-indptr-not-zero-based", "csr(m)", Rule::LayoutData),
    ("csr-index-out-of-cols", "csr(m)", Rule::LayoutData),
    ("csr-row-not-increasing", "csr(m)", Rule::LayoutData),
    ("bool-invalid-byte", "verify(t,data)", Rule::LayoutData),
    ("f4-nonzero-odd-nibble", "verify(t,data)", Rule::LayoutData),
    ("verify-digest-mismatch", "verify(t,data)", Rule::Digest),
];

fn opened(dir: &str, name: &str) -> ztensor_v2::Result<ztensor_v2::Container> {
    let bytes =
        std::fs::read(corpus().join(dir).join(format!("{name}.zt"))).expect("a corpus file");
    open(&&bytes[..], ztensor_v2::MAX_MANIFEST)
}

#[test]
fn every_file_of_the_corpus_is_listed() {
    for (dir, listed) in [
        ("valid", VALID.iter().map(|v| v.0).collect::<Vec<_>>()),
        ("reject", REJECT.iter().map(|r| r.0).collect()),
    ] {
        let mut files: Vec<String> = std::fs::read_dir(corpus().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter_map(|n| n.strip_suffix(".zt").map(str::to_owned))
            .collect();
        files.sort();
        let mut listed: Vec<String> = listed.into_iter().map(str::to_owned).collect();
        listed.sort();
        assert_eq!(files, listed, "{dir}");
    }
}

#[test]
fn valid_files_open() {
    for (name, _) in VALID {
        let opened = opened("valid", name);
        assert!(opened.is_ok(), "{name}: {}", opened.unwrap_err());
    }
    // What a few of them hold, as the corpus describes them.
    let minimal = opened("valid", "minimal").unwrap().manifest.unwrap();
    let t = &minimal.objects["t"];
    assert_eq!((t.shape.as_slice(), &*t.layout), (&[8][..], "dense"));
    assert_eq!(t.parts["data"].blob, (4096, 8));
    assert!(opened("valid", "data-shard").unwrap().manifest.is_none());
    let canonical = opened("valid", "canonical-basic").unwrap().manifest.unwrap();
    let names: Vec<&str> = canonical.objects.keys().map(String::as_str).collect();
    assert_eq!(names, ["a.bias", "a.weight", "tied"]);
    assert_eq!(
        canonical.objects["tied"].parts["data"].blob,
        canonical.objects["a.weight"].parts["data"].blob
    );
    let scalar = opened("valid", "scalar").unwrap().manifest.unwrap();
    assert!(scalar.objects.values().all(|o| o.shape.is_empty()));
}

/// Runs the corpus operation `operation` (`open`, `verify(o,p)`, `csr(o)`, `view(o,p)`) on the
/// file `dir/name`.
fn run(dir: &str, name: &str, operation: &str) -> ztensor_v2::Result<()> {
    let bytes = std::fs::read(corpus().join(dir).join(format!("{name}.zt"))).unwrap();
    let file = File::open(&bytes[..], ztensor_v2::MAX_MANIFEST)?;
    let args = |op: &str| -> Vec<String> {
        operation[op.len() + 1..operation.len() - 1].split(',').map(str::to_owned).collect()
    };
    match operation {
        "open" => Ok(()),
        op if op.starts_with("verify(") => {
            let a = args("verify");
            file.verify(&a[0], &a[1]).map(drop)
        }
        op if op.starts_with("csr(") => file.csr(&args("csr")[0]).map(drop),
        op if op.starts_with("view(") => {
            let a = args("view");
            file.decoded(&a[0], &a[1]).map(drop)
        }
        other => panic!("an operation the corpus does not use: {other}"),
    }
}

#[test]
fn reject_files_break_their_rule_by_the_corpus_operation() {
    for &(name, operation, rule) in REJECT {
        if operation != "open" {
            // Rejected only by reading data: the file itself must open.
            let opened = opened("reject", name);
            assert!(opened.is_ok(), "{name} must open: {}", opened.unwrap_err());
        }
        match run("reject", name, operation) {
            Err(e) => assert_eq!(e.broken(), Some(rule), "{name} {operation}: {e}"),
            Ok(()) => panic!("{name}: {operation} passed, but breaks {rule}"),
        }
    }
}

#[test]
fn valid_files_pass_the_corpus_operation() {
    for &(name, operation) in VALID {
        let outcome = run("valid", name, operation);
        if name == "view-unknown-encoding-refused" {
            // Refused (an encoding this reader does not know), not rejected.
            let e = outcome.unwrap_err();
            assert!(matches!(e.kind(), ztensor_v2::ErrorKind::Unsupported), "{e}");
            assert_eq!(e.broken(), None);
        } else {
            assert!(outcome.is_ok(), "{name} {operation}: {}", outcome.unwrap_err());
        }
    }
    let bytes = std::fs::read(corpus().join("valid/verify-ok.zt")).unwrap();
    let file = File::open(&bytes[..], ztensor_v2::MAX_MANIFEST).unwrap();
    assert_eq!(file.verify("t", "data").unwrap(), ztensor_v2::DigestCheck::Verified);
}

/// Every valid file cut short at each length, and with each byte of its manifest and footer
/// flipped: an error or a file, never a panic, and a cut file is never valid.
#[test]
fn damaged_files_are_errors_not_panics() {
    for (name, _) in VALID {
        let bytes = std::fs::read(corpus().join("valid").join(format!("{name}.zt"))).unwrap();
        for cut in 0..bytes.len() {
            let cut = &bytes[..cut];
            assert!(open(&cut, ztensor_v2::MAX_MANIFEST).is_err(), "{name} cut to {}", cut.len());
        }
        let footer = ztensor_v2::Footer::parse(bytes[bytes.len() - 40..].try_into().unwrap());
        let manifest = usize::try_from(footer.manifest_offset).unwrap()
            ..usize::try_from(footer.manifest_offset + footer.manifest_length).unwrap();
        for at in manifest.chain(bytes.len() - 40..bytes.len()) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x5a;
            let _ = open(&&damaged[..], ztensor_v2::MAX_MANIFEST);
        }
    }
}

/// The manifest parsed object by object gives what the whole tree gives, verdicts included,
/// for every corpus file and every truncation of its manifest.
#[test]
fn parsing_object_by_object_is_parsing_the_tree() {
    use ztensor_v2::manifest::{parse, parse_bytes};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2");
    let mut manifests = 0;
    for group in ["valid", "reject"] {
        for entry in std::fs::read_dir(dir.join(group)).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            if bytes.len() < 48 {
                continue;
            }
            let footer = &bytes[bytes.len() - 40..];
            let field = |r: std::ops::Range<usize>| {
                usize::try_from(u64::from_le_bytes(footer[r].try_into().unwrap()))
                    .unwrap_or(usize::MAX)
            };
            let (at, len) = (field(0..8), field(8..16));
            let Some(manifest) = at.checked_add(len).and_then(|end| bytes.get(at..end)) else {
                continue;
            };
            if len == 0 {
                continue;
            }
            manifests += 1;
            for cut in [manifest.len(), manifest.len() / 2, manifest.len().saturating_sub(1)] {
                let m = &manifest[..cut];
                let tree = ztensor_v2::cbor::decode(m).and_then(|t| parse(&t));
                let streamed = parse_bytes(m);
                match (tree, streamed) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(a), Err(b)) => assert_eq!(a.broken(), b.broken(), "{a} / {b}"),
                    (a, b) => panic!("{a:?} / {b:?}"),
                }
            }
        }
    }
    assert!(manifests > 60, "{manifests}");
    // A key of `objects` that is not text is the schema's fault before any name is: even when
    // it sorts after a text key whose name is broken.
    use ztensor_v2::cbor::{Value, encode};
    let text = |t: &str| Value::Text(t.to_owned());
    let root = Value::Map(vec![(
        text("objects"),
        Value::Map(vec![(text(""), Value::Map(vec![])), (Value::Null, Value::Uint(0))]),
    )]);
    let bytes = encode(&root);
    let tree = parse(&ztensor_v2::cbor::decode(&bytes).unwrap()).unwrap_err();
    assert_eq!(tree.broken(), Some(Rule::Schema));
    assert_eq!(parse_bytes(&bytes).unwrap_err().broken(), Some(Rule::Schema));
}
