//! The registry's unit tests: detection by content, opening from paths, maps and bytes, the
//! expansion budget.

#[allow(unused_imports)]
use std::path::Path;

use ztensor_io::TensorSource;

use crate::alone::not_opened;
use crate::*;

#[test]
fn every_kind_has_one_row() {
    for format in FORMATS {
        assert_eq!(FORMATS.iter().filter(|f| f.kind == format.kind).count(), 1);
        assert!(!format.description.is_empty() && !format.rule.is_empty());
    }
    assert_eq!(FORMATS.len(), 12);
}

#[test]
fn content_decides_and_names_what_is_not_read() {
    // zTensor 2 by its magic, whatever the name says (it shares `.zt` with 0.1/1.x).
    let zt2 = b"\x89ZT2\r\n\x1a\nrest of a zTensor 2 file".to_vec();
    assert_eq!(detect_bytes(&zt2, Some(Path::new("model.zt"))).unwrap(), Kind::Zt2);
    let hdf5 = b"\x89HDF\r\n\x1a\n\0\0\0\0".to_vec();
    let e = detect_bytes(&hdf5, Some(Path::new("model.zt"))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotRead);
    assert!(e.to_string().contains("an HDF5 file"), "{e}");
    // A damaged file is judged by its name.
    let junk = vec![0xee; 100];
    assert_eq!(detect_bytes(&junk, Some(Path::new("x.safetensors"))).unwrap(), Kind::Safetensors);
    assert_eq!(detect_bytes(&junk, Some(Path::new("x.TB"))).unwrap(), Kind::TensorBuffers);
    assert_eq!(detect_bytes(&junk, Some(Path::new("x.zt"))).unwrap(), Kind::Zt);
    assert_eq!(detect_bytes(&junk, None).unwrap_err().kind(), ErrorKind::NotRead);
    // A v1 footer alone says zTensor.
    let mut footer = vec![0u8; 40];
    footer.extend_from_slice(b"ZTEN1000");
    assert_eq!(detect_bytes(&footer, None).unwrap(), Kind::Zt);
    let json = b"{\"weight_map\": {}}".to_vec();
    assert!(detect_bytes(&json, None).unwrap_err().to_string().contains("JSON text"));
}

/// Every kind has its row (this match stops compiling when a kind is added).
#[test]
fn every_kind_is_in_the_table() {
    let kinds = [
        Kind::Zt,
        Kind::ZtIndex,
        Kind::Safetensors,
        Kind::SafetensorsIndex,
        Kind::TensorBuffers,
        Kind::Npy,
        Kind::Npz,
        Kind::Gguf,
        Kind::Torch,
        Kind::Zt2,
        Kind::Dcp,
        Kind::DcpSafetensors,
    ];
    for kind in kinds {
        match kind {
            Kind::Zt
            | Kind::ZtIndex
            | Kind::Safetensors
            | Kind::SafetensorsIndex
            | Kind::TensorBuffers
            | Kind::Npy
            | Kind::Npz
            | Kind::Gguf
            | Kind::Torch
            | Kind::Zt2
            | Kind::Dcp
            | Kind::DcpSafetensors => assert!(FORMATS.iter().any(|f| f.kind == kind), "{kind:?}"),
        }
    }
    assert_eq!(kinds.len(), FORMATS.len());
}

fn fixture(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(path)
}

/// A scratch directory for this test.
fn scratch(name: &str) -> ztensor_testkit::Scratch {
    ztensor_testkit::scratch(&format!("registry-{name}"))
}

/// An object's name and its decoded components by role.
type Contents = (String, Vec<(String, Vec<u8>)>);

/// Each object's name and decoded components, in order.
fn contents(source: &dyn TensorSource) -> Vec<Contents> {
    (0..source.len())
        .map(|i| {
            let data = source.read(i).unwrap();
            let parts =
                data.components.into_iter().map(|(r, c)| (r, c.bytes.into_owned())).collect();
            (data.name, parts)
        })
        .collect()
}

/// A file whose data happens to end in another format's magic is the format it starts
/// as, from a path and from bytes.
#[cfg(all(feature = "numpy", feature = "safetensors"))]
#[test]
fn a_leading_magic_decides_before_a_trailing_one() {
    // An .npy of 16 bytes, the last 8 of them "ZTEN1000".
    let mut header = b"{'descr': '|u1', 'fortran_order': False, 'shape': (16,), }".to_vec();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    npy.extend_from_slice(&header);
    let data = b"12345678ZTEN1000";
    npy.extend_from_slice(data);
    // An .npz whose zip comment is "ZTEN1000": the end record (the last 22 bytes of an
    // archive without a comment) given a comment of 8 bytes.
    let mut npz = std::fs::read(fixture("external/numpy/arrays.npz")).unwrap();
    let end = npz.len() - 22;
    assert!(npz[end..].starts_with(b"PK\x05\x06") && npz[end + 20..] == [0, 0]);
    npz[end + 20..].copy_from_slice(&8u16.to_le_bytes());
    npz.extend_from_slice(b"ZTEN1000");
    // A safetensors file whose data ends in "TBS1".
    let json = br#"{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#;
    let mut st = u64::try_from(json.len()).unwrap().to_le_bytes().to_vec();
    st.extend_from_slice(json);
    st.extend_from_slice(b"TBS1");
    let dir = scratch("leading");
    for (bytes, kind, name) in
        [(npy, Kind::Npy, "a.npy"), (npz, Kind::Npz, "a.npz"), (st, Kind::Safetensors, "a.st")]
    {
        assert_eq!(detect_bytes(&bytes, None).unwrap(), kind);
        let from_bytes = open_bytes(bytes.clone(), &OpenOptions::default()).unwrap();
        assert_eq!(from_bytes.kind(), kind);
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(detect(&path).unwrap(), kind);
        let from_path = open(&path, &OpenOptions::default()).unwrap();
        let read = contents(from_path.source());
        assert!(!read.is_empty(), "{kind:?}");
        // An .npy's one array is named after its file, or `array` from bytes.
        let parts =
            |c: Vec<Contents>| -> Vec<_> { c.into_iter().map(|(_, parts)| parts).collect() };
        assert_eq!(parts(read.clone()), parts(contents(from_bytes.source())), "{kind:?}");
        if kind == Kind::Npy {
            assert_eq!(read[0].1[0].1, data);
        }
        if kind == Kind::Safetensors {
            assert_eq!(read[0].1[0].1, b"TBS1");
        }
    }
    // Starting like nothing known, the trailing magic still decides.
    let mut tail = vec![0u8; 40];
    tail.extend_from_slice(b"TBS1");
    assert_eq!(detect_bytes(&tail, None).unwrap(), Kind::TensorBuffers);
    // A format named by its first bytes stays that, whatever it ends with.
    let mut gzip = b"\x1f\x8b\x08\x00".to_vec();
    gzip.extend_from_slice(b"ZTEN1000");
    assert_eq!(detect_bytes(&gzip, None).unwrap_err().kind(), ErrorKind::NotRead);
}

/// zTensor 2 bytes open as the file does; a root whose parts lie in shards is refused.
#[cfg(feature = "v2")]
#[test]
fn ztensor2_bytes_open_as_the_file() {
    let options = OpenOptions::default();
    for name in ["canonical-basic.zt", "csr-data-valid.zt", "aliased-identical-blobs.zt"] {
        let path = fixture("external/ztensor2/valid").join(name);
        let from_path = open(&path, &options).unwrap();
        let from_bytes = open_bytes(std::fs::read(&path).unwrap(), &options).unwrap();
        assert_eq!(from_bytes.kind(), Kind::Zt2);
        assert!(from_bytes.memory().is_some());
        let read = contents(from_bytes.source());
        assert!(!read.is_empty(), "{name}");
        assert_eq!(read, contents(from_path.source()), "{name}");
    }
    let sharded = std::fs::read(fixture("external/ztensor2/hostile/shards-1000-missing.zt"));
    let e = open_bytes(sharded.unwrap(), &options).unwrap_err();
    assert!(matches!(&e, OpenError::Detect(d) if d.kind() == ErrorKind::NeedsFiles), "{e}");
    assert!(e.to_string().contains("open it by its path"), "{e}");
    // A kind without an arm for bytes is an error, not a panic.
    let e = not_opened(Kind::ZtIndex, None);
    assert!(matches!(&e, OpenError::Detect(d) if d.kind() == ErrorKind::NeedsFiles), "{e}");
}

/// Every way in refuses a file that decodes to far more than its size allows, before
/// decoding anything; a raised budget admits it.
#[test]
fn the_expansion_budget_is_checked_where_files_open() {
    use ztensor_format::{ErrorKind as Rule, Verdict};
    // 3 GiB of zeros, honestly declared, in about 100 KB.
    let path = fixture("hostile/zstd-bomb-3g.zt");
    let options = OpenOptions::default();
    let refused = |r: Result<Opened, OpenError>| {
        let e = r.unwrap_err();
        assert_eq!(e.rule(), Some(Rule::DecodedTooLarge), "{e}");
        e.to_string()
    };
    let said = refused(open(&path, &options));
    assert!(said.contains("zstd-bomb-3g.zt: its objects decode to more than"), "{said}");
    // SAFETY: fixtures are not changed while the test runs.
    refused(unsafe { open_mapped(&path, &options) });
    let said = refused(open_bytes(std::fs::read(&path).unwrap(), &options));
    assert!(said.starts_with("the bytes: "), "{said}");
    // Detected::open leaves the check to its caller, who has the input's size.
    let opened = Detected::new(&path).unwrap().open(&options).unwrap();
    assert_eq!(opened.input_len(), std::fs::metadata(&path).unwrap().len());
    let e = opened.check_expansion(&options.options.limits).unwrap_err();
    assert_eq!(e.rule(), Some(Rule::DecodedTooLarge));
    let mut raised = OpenOptions::default();
    raised.options.limits.max_expansion = 1 << 20;
    let opened = open(&path, &raised).unwrap();
    assert_eq!(opened.check_expansion(&raised.options.limits).unwrap(), 3 << 30);
}

/// A build without the zip formats still names them by content, whatever their file names,
/// and says which feature reads them. Run by `cargo xtask features` (`cargo test -p
/// ztensor-registry --no-default-features --lib without_features`).
#[cfg(all(not(feature = "numpy"), not(feature = "torch")))]
mod without_features {
    use crate::*;
    use std::path::Path;

    #[test]
    fn zip_formats_are_named_with_their_feature() {
        let external =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../ztensor-conformance/fixtures/external");
        let dir = ztensor_testkit::scratch("registry");
        for (file, feature, what) in [
            ("pytorch/checkpoint.pt", "torch", Kind::Torch),
            ("numpy/arrays.npz", "numpy", Kind::Npz),
        ] {
            // Under a name that says nothing.
            let renamed = dir.join("data.bin.zip");
            std::fs::copy(external.join(file), &renamed).unwrap();
            for path in [external.join(file), renamed] {
                let e = detect(&path).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::Disabled, "{}: {e}", path.display());
                let message = e.to_string();
                assert!(message.contains(&format!("`{feature}` feature")), "{message}");
                assert!(message.contains(&what.to_string()), "{message}");
            }
        }
    }
}

/// Whether an open failed because the data said no is what the reader's own error says: a
/// missing shard is a failed request, a broken file a rejection, whatever the format.
#[cfg(all(feature = "safetensors", feature = "sharded"))]
#[test]
fn a_refusal_is_a_rejection_exactly_when_its_reader_says_so() {
    use ztensor_format::Verdict;
    let dir = scratch("verdict");
    // A sharded safetensors checkpoint with a shard gone: I/O, not a rejection.
    let checkpoint = dir.join("checkpoint");
    std::fs::create_dir_all(&checkpoint).unwrap();
    for entry in std::fs::read_dir(fixture("examples/checkpoint")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), checkpoint.join(entry.file_name())).unwrap();
    }
    std::fs::remove_file(checkpoint.join("model-00002-of-00002.safetensors")).unwrap();
    // A zTensor file whose footer is broken, and a safetensors file cut short: rejections.
    let mut zt = std::fs::read(fixture("examples/tiny-v1.2.zt")).unwrap();
    *zt.last_mut().unwrap() ^= 0xff;
    std::fs::write(dir.join("bad.zt"), &zt).unwrap();
    let st = std::fs::read(checkpoint.join("model-00001-of-00002.safetensors")).unwrap();
    std::fs::write(dir.join("cut.safetensors"), &st[..st.len() - 3]).unwrap();
    // A sharded safetensors checkpoint whose first shard is the second one's bytes: the shard
    // is not the one the index was written with, a rejection.
    let stale = dir.join("stale");
    std::fs::create_dir_all(&stale).unwrap();
    for entry in std::fs::read_dir(fixture("examples/checkpoint")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), stale.join(entry.file_name())).unwrap();
    }
    std::fs::copy(
        stale.join("model-00002-of-00002.safetensors"),
        stale.join("model-00001-of-00002.safetensors"),
    )
    .unwrap();
    // A sharded zTensor checkpoint whose index names a shard that is not there (a failed
    // request), and one whose shard is not the size the index records (a rejection).
    let tiny = fixture("examples/tiny-v1.2.zt");
    let size = std::fs::metadata(&tiny).unwrap().len();
    let index = |shard: &str, size: u64| {
        let digest = "0".repeat(64);
        format!(
            "{{\"metadata\": {{\"total_size\": 0}}, \
             \"shards\": {{\"{shard}\": {{\"size\": {size}, \"digest\": \"sha256:{digest}\"}}}}, \
             \"weight_map\": {{\"x\": \"{shard}\"}}}}"
        )
    };
    std::fs::write(dir.join("gone.zt.index.json"), index("gone-00001.zt", size)).unwrap();
    std::fs::copy(&tiny, dir.join("stale-00001.zt")).unwrap();
    std::fs::write(dir.join("stale.zt.index.json"), index("stale-00001.zt", size + 1)).unwrap();
    let cases = [
        (checkpoint.join("model.safetensors.index.json"), false),
        (stale.join("model.safetensors.index.json"), true),
        (dir.join("gone.zt.index.json"), false),
        (dir.join("stale.zt.index.json"), true),
        // Foreign files that are not there: a failed request, whoever reports it.
        (dir.join("missing.safetensors"), false),
        (dir.join("missing.npy"), false),
        (dir.join("bad.zt"), true),
        (dir.join("cut.safetensors"), true),
    ];
    for (path, rejection) in cases {
        let Err(e) = open(&path, &OpenOptions::default()) else {
            panic!("{} opened", path.display())
        };
        let inner: Option<&dyn Verdict> = match &e {
            OpenError::Zt(e) => Some(e),
            OpenError::Foreign(e) => Some(e),
            OpenError::Shard(e) => Some(e),
            // Not recognised (a file that cannot be read): no reader's error to agree with.
            OpenError::Detect(_) => None,
            other => panic!("{}: {other}", path.display()),
        };
        if let Some(inner) = inner {
            assert_eq!(e.is_rejection(), inner.is_rejection(), "{}: {e}", path.display());
            assert_eq!(e.rule(), inner.rule(), "{}: {e}", path.display());
            assert_eq!(e.refused(), inner.refused(), "{}: {e}", path.display());
        }
        assert_eq!(e.is_rejection(), rejection, "{}: {e}", path.display());
        // Only the zTensor reader's rule errors name no file; only they may be a torn append.
        let zt_rule = path.ends_with("bad.zt");
        assert_eq!(e.is_ztensor_rule(), zt_rule, "{}: {e}", path.display());
        assert_eq!(e.names_file(), !zt_rule, "{}: {e}", path.display());
    }
}

/// What sort of failure each refusal is ([`Verdict::failure`], what Python's exception class
/// and `errno` are made from): the system's error for a file that is not there, `EISDIR` for a
/// directory, a format failure (with its rule's id) for a broken file and for a format not
/// read.
#[test]
fn a_refusal_says_what_sort_of_failure_it_is() {
    use std::io::ErrorKind as Io;
    use ztensor_format::{Failure, Verdict};
    let dir = scratch("failure");
    let mut zt = std::fs::read(fixture("examples/tiny-v1.2.zt")).unwrap();
    *zt.last_mut().unwrap() ^= 0xff;
    std::fs::write(dir.join("bad.zt"), &zt).unwrap();
    std::fs::write(dir.join("data.h5"), b"\x89HDF\r\n\x1a\n\0\0\0\0\0\0\0\0").unwrap();
    std::fs::create_dir_all(dir.join("a-directory")).unwrap();
    let v2 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ztensor-conformance/fixtures/external/ztensor2/reject/manifest-hash-mismatch.zt");
    let cases: Vec<(std::path::PathBuf, Failure, Option<&str>)> = vec![
        (dir.join("missing.zt"), Failure::Io(Io::NotFound, Some(2)), None),
        (dir.join("missing.safetensors"), Failure::Io(Io::NotFound, Some(2)), None),
        (dir.join("a-directory"), Failure::Io(Io::IsADirectory, None), None),
        (dir.join("data.h5"), Failure::Format, None),
        (dir.join("bad.zt"), Failure::Format, Some("footer_magic")),
        (v2, Failure::Format, Some("manifest_hash")),
    ];
    for (path, failure, rule) in cases {
        let Err(e) = open(&path, &OpenOptions::default()) else {
            panic!("{} opened", path.display())
        };
        assert_eq!(e.failure(), failure, "{}: {e}", path.display());
        assert_eq!(e.rule_id(), rule, "{}: {e}", path.display());
        if let Some(rule) = e.rule() {
            assert_eq!(Some(rule.id()), e.rule_id(), "{}: {e}", path.display());
        }
    }
}

/// The registry is the one door: no front end (the command-line tool, the Python package, the
/// conformance dump and runner) names a format reader's opening function or a format's
/// writer; each opens its inputs and converts through this crate. (Tests inside those crates
/// may, and the conformance crate's own readers on generated bytes, which grade other
/// implementations, are its business.)
#[test]
fn no_front_end_opens_a_format_itself() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let openers = [
        "Reader::open",
        "Reader::new(",
        "TbFile::new(",
        "ShardedZtensor::open(",
        "ShardedSafetensors::open",
        "SafetensorsFile::open",
        "SafetensorsFile::new(",
        "NpyFile::open(",
        "NpyFile::new(",
        "NpzFile::open(",
        "NpzFile::new(",
        "GgufFile::open(",
        "GgufFile::new(",
        "TorchFile::open(",
        "TorchFile::new(",
        "File::open_resolved(",
        "ztensor_v2::File::open(",
        // Conversions run through `write_file` / `write_to` (`ZtSink`, which appends to an
        // existing file, is the engine's).
        "SafetensorsSink::",
        "TbSink::",
        "Zt2Sink::",
    ];
    let mut files = Vec::new();
    let mut walk = vec![
        crates.join("ztensor-cli/src"),
        crates.join("ztensor-py/src"),
        crates.join("ztensor-conformance/src/runner.rs"),
        crates.join("ztensor-conformance/src/implementation.rs"),
        crates.join("ztensor-dump/src/lib.rs"),
    ];
    while let Some(path) = walk.pop() {
        if path.is_dir() {
            walk.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    assert!(files.len() > 20, "{files:?}");
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        // Code only: doc comments and unit tests are not doors.
        let code = text.split("\n#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for opener in openers {
                // The name itself, not one ending in it (`BufReader::new`).
                let named = line.match_indices(opener).any(|(at, _)| {
                    !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                if named {
                    found.push(format!("{}:{}: {opener}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "front ends that open or convert a format themselves:\n{}",
        found.join("\n")
    );
}

/// The table of formats written: every name `--to` takes, and what an output's name says.
#[cfg(feature = "write")]
#[test]
fn targets_by_name_and_by_extension() {
    use ztensor_format::Version;
    for (name, target) in [
        ("zt", Target::Zt(Version::V1_2)),
        ("0.1", Target::Zt(Version::V0_1)),
        ("1.1", Target::Zt(Version::V1_1)),
        ("2", Target::Zt2),
        ("st", Target::Safetensors),
        ("tensorbuffers", Target::TensorBuffers),
    ] {
        assert_eq!(Target::from_name(name), Ok(target), "{name}");
    }
    assert!(Target::from_name("3").unwrap_err().to_string().contains(crate::TARGET_NAMES));
    let said = |name: &str| Target::for_output(Path::new(name), None);
    assert_eq!(said("out.ZT"), Ok(Target::Zt(Version::V1_2)));
    assert_eq!(said("dir/m.safetensors"), Ok(Target::Safetensors));
    assert_eq!(said("m.tb"), Ok(Target::TensorBuffers));
    // `--to` wins over the name; a name that says nothing written is refused, saying why.
    assert_eq!(Target::for_output(Path::new("m.bin"), Some(Target::Zt2)), Ok(Target::Zt2));
    for (name, says) in [
        ("m.safetensor", "did you mean .safetensors?"),
        ("m.bin", "reads but does not write"),
        ("m.npy", "ztensor extract"),
        ("m", "has no extension"),
        ("-", "standard output"),
        ("m.txt", "names no format this tool writes:"),
    ] {
        let e = said(name).unwrap_err().to_string();
        assert!(e.contains(says), "{name}: {e}");
    }
    // Each target's own extension says that target (zTensor: the current version).
    for target in [Target::Zt(Version::V1_2), Target::Safetensors, Target::TensorBuffers] {
        assert_eq!(said(&format!("m.{}", target.extension())), Ok(target));
    }
}

/// The kernel's count of the opens of an input (inotify): detection and the format's reader
/// share one descriptor, so [`open`], [`open_mapped`], [`Detected::open`] and [`content_id`]
/// open a file once, whatever its format.
#[cfg(target_os = "linux")]
#[test]
fn a_file_is_opened_once() {
    let dir = scratch("opened-once");
    let mut inputs = vec!["producers/v1.2/reference-1.2.3/zstd.zt", "examples/tiny-v0.1.zt"];
    if cfg!(feature = "tensorbuffers") {
        inputs.push("external/tensorbuffers-sample.tb");
    }
    if cfg!(feature = "v2") {
        inputs.push("producers/v2/reference-2.1.1/examples-tiny-v1.2.zt");
    }
    if cfg!(feature = "numpy") {
        inputs.push("external/numpy/dense-f4.npy");
        inputs.push("external/numpy/arrays.npz");
    }
    if cfg!(feature = "gguf") {
        inputs.push("external/gguf/plain.gguf");
    }
    if cfg!(feature = "torch") {
        inputs.push("external/pytorch/checkpoint.pt");
    }
    let options = OpenOptions::default();
    for (i, input) in inputs.iter().enumerate() {
        let name = Path::new(input).file_name().unwrap();
        let path = dir.join(format!("{i}-{}", name.to_str().unwrap()));
        std::fs::copy(fixture(input), &path).unwrap();
        let watch = ztensor_testkit::Opens::watch(&path);
        let opened = open(&path, &options).unwrap();
        assert!(!opened.source().is_empty(), "{input}");
        drop(opened);
        assert_eq!(watch.take(), 1, "open: {input}");
        // SAFETY: the file is this test's own copy, not changed while mapped.
        let mapped = unsafe { open_mapped(&path, &options) }.unwrap();
        drop(mapped);
        assert_eq!(watch.take(), 1, "open_mapped: {input}");
        let detected = Detected::new(&path).unwrap();
        assert_eq!(detected.kind(), detect(&path).unwrap());
        assert_eq!(watch.take(), 2, "detect and Detected::new: {input}");
        drop(detected.open(&options).unwrap());
        assert_eq!(watch.take(), 0, "Detected::open: {input}");
        #[cfg(feature = "v2")]
        {
            content_id(&path, &options, ztensor_v2::IdAlgorithm::Sha256).unwrap();
            assert_eq!(watch.take(), 1, "content_id: {input}");
        }
    }
}
