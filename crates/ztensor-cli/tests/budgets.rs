//! Memory budgets on large hostile inputs, generated here at test time: every command on each
//! must end cleanly within max(256 MB, 4 × the file's size + 128 MB) of peak resident memory,
//! whatever the file claims or holds (a million objects, a tensor decoding to gigabytes, a
//! shape of millions of dimensions). Each command runs in a process of its own, whose peak
//! GNU `time` reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ztensor_format::{Component, DType, Encoding, Format, Manifest, Object, Version};

/// What a command may hold for an input of `file_len` bytes.
fn budget(file_len: u64) -> u64 {
    (256 << 20).max(4 * file_len + (128 << 20))
}

/// How one run went.
struct Run {
    code: Option<i32>,
    peak: u64,
    took: Duration,
    said: String,
}

/// Runs the tool with `args` (stdout discarded), killed after five minutes, under GNU `time`,
/// which reports the peak of the process it starts. (A child of this test process would not
/// do: at its `exec` the kernel counts the memory of the test process it was forked from.)
fn run(args: &[&str]) -> Run {
    let report = std::env::temp_dir().join(format!(
        "ztensor-budget-rss-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .args(["timeout", "-s", "KILL", "300", env!("CARGO_BIN_EXE_ztensor")])
        .args(args)
        .stdout(Stdio::null())
        .output()
        .expect("GNU time runs (Debian package `time`)");
    let took = started.elapsed();
    let reported = std::fs::read_to_string(&report).unwrap_or_default();
    let _ = std::fs::remove_file(&report);
    // Kilobytes, on the last line (a line before it says how a killed command ended).
    let kb: u64 = reported.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(u64::MAX);
    Run {
        code: out.status.code(),
        peak: kb.saturating_mul(1024),
        took,
        said: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs each of `commands` on `file` (`FILE` in them stands for it, `OUT.zt`, `OUT.tb`,
/// `OUT.safetensors` and `OUTDIR/` for fresh output paths) and checks each ends with status
/// `expect` within the budget of its input: a command given the file twice (`diff FILE FILE`)
/// opens it once, and has the budget of one.
fn check(scratch: &Path, file: &Path, expect: i32, commands: &[&[&str]]) {
    let len = std::fs::metadata(file).unwrap().len();
    let f = file.to_str().unwrap();
    let name = file.file_name().unwrap().to_string_lossy();
    for (i, command) in commands.iter().enumerate() {
        let target = scratch.join(format!("out-{i}"));
        let t = target.to_str().unwrap();
        let (zt, st) = (format!("{t}.zt"), format!("{t}.safetensors"));
        let (tb, outdir) = (format!("{t}.tb"), format!("{t}-dir/"));
        let args: Vec<&str> = command
            .iter()
            .map(|&a| match a {
                "FILE" => f,
                "OUT.zt" => &zt,
                "OUT.tb" => &tb,
                "OUT.safetensors" => &st,
                "OUTDIR/" => &outdir,
                a => a,
            })
            .collect();
        let r = run(&args);
        let budget = budget(len);
        let what = format!(
            "{name} ({len} bytes): {command:?}: status {:?}, peak {} MB, {:.1} s",
            r.code,
            r.peak >> 20,
            r.took.as_secs_f64()
        );
        eprintln!("{what}");
        assert_eq!(r.code, Some(expect), "{what}\n{}", r.said);
        assert!(r.peak <= budget, "{what}: over the budget of {} MB", budget >> 20);
        let _ = std::fs::remove_file(&zt);
        let _ = std::fs::remove_file(&st);
        let _ = std::fs::remove_file(&tb);
        let _ = std::fs::remove_dir_all(&outdir);
    }
}

fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ztensor-budget-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file made of `blobs` (each at its offset, zeros between) and `manifest`.
pub(crate) fn assemble(manifest: &Manifest, blobs: &[(u64, &[u8])]) -> Vec<u8> {
    let container = manifest.version.container();
    let mut file = container.magic().to_vec();
    for &(offset, bytes) in blobs {
        file.resize(usize::try_from(offset).unwrap(), 0);
        file.extend_from_slice(bytes);
    }
    file.resize(file.len().next_multiple_of(64), 0);
    let cbor = manifest.encode().unwrap();
    file.extend_from_slice(&cbor);
    file.extend_from_slice(&container.encode_trailer(cbor.len() as u64));
    file
}

/// A zstd component at offset 64 of `stored`, decoding to `decoded` bytes (declared or not).
fn zstd_at_64(dtype: DType, stored: &[u8], decoded: Option<u64>) -> Component {
    let mut c = Component::new(dtype, 64, stored.len() as u64);
    c.encoding = Encoding::Zstd;
    c.uncompressed_length = decoded;
    c
}

/// A zTensor 1.2 manifest of `n` empty f32 tensors, `t0000000` on.
fn empty_objects(n: usize) -> Manifest {
    let mut manifest = Manifest::new(Version::V1_2);
    manifest.objects = (0..n)
        .map(|i| {
            Object::new(format!("t{i:07}"), vec![0], Format::Dense)
                .with_component("data", Component::new(DType::F32, 0, 0))
        })
        .collect();
    manifest
}

/// A million empty tensors, in zTensor 1.2 and 0.1 and in safetensors: the manifest's cost per
/// object.
#[test]
fn a_million_objects_stay_within_budget() {
    const N: usize = 1_000_000;
    let dir = scratch("million");
    let mut manifest = empty_objects(N);
    let zt = dir.join("million.zt");
    std::fs::write(&zt, assemble(&manifest, &[])).unwrap();
    check(
        &dir,
        &zt,
        0,
        &[
            &["info", "FILE"],
            &["info", "--json", "FILE"],
            &["ls", "FILE"],
            &["ls", "--json", "FILE"],
            &["verify", "FILE"],
            &["verify", "--json", "FILE"],
            &["dump", "--json", "FILE"],
            &["diff", "--json", "FILE", "FILE"],
            &["repack", "FILE", "OUT.zt", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
            &["id", "FILE"],
        ],
    );
    // The same in 0.1, whose manifest is an array of tensor maps.
    manifest.version = Version::V0_1;
    manifest.version_string = None;
    let v0 = dir.join("million-0.1.zt");
    std::fs::write(&v0, assemble(&manifest, &[])).unwrap();
    drop(manifest);
    check(
        &dir,
        &v0,
        0,
        &[&["info", "FILE"], &["verify", "FILE"], &["repack", "FILE", "OUT.zt", "--quiet"]],
    );
    let mut header = String::from("{");
    for i in 0..N {
        if i > 0 {
            header.push(',');
        }
        header
            .push_str(&format!(r#""t{i:07}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}"#));
    }
    header.push('}');
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header.as_bytes());
    let st_path = dir.join("million.safetensors");
    std::fs::write(&st_path, st).unwrap();
    check(
        &dir,
        &st_path,
        0,
        &[
            &["info", "FILE"],
            &["ls", "FILE"],
            &["verify", "FILE"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Half a million empty tensors (a 38 MB zTensor 1.2 file) through every writer: zTensor 2
/// (raw, zstd, sharded), sharded zTensor 1.2, TensorBuffers and safetensors. A writer holds a
/// few words per object besides what reading the input holds.
#[test]
fn half_a_million_objects_through_every_writer_stay_within_budget() {
    const N: usize = 500_000;
    let dir = scratch("writers");
    let manifest = empty_objects(N);
    let zt = dir.join("half-million.zt");
    std::fs::write(&zt, assemble(&manifest, &[])).unwrap();
    drop(manifest);
    check(
        &dir,
        &zt,
        0,
        &[
            &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--to", "2", "--zstd", "3", "--quiet"],
            &["convert", "FILE", "OUTDIR/", "--to", "2", "--shard-size", "1M", "--quiet"],
            &["convert", "FILE", "OUTDIR/", "--shard-size", "1M", "--quiet"],
            &["convert", "FILE", "OUT.tb", "--quiet"],
            &["convert", "FILE", "OUT.safetensors", "--quiet"],
        ],
    );
    // A zTensor 2 file of them, compared with itself: one file named twice is opened once.
    let zt2 = dir.join("half-million-2.zt");
    let made =
        crate::ztensor(&["convert", zt.to_str().unwrap(), zt2.to_str().unwrap(), "--to", "2"]);
    assert!(made.status.success(), "{}", crate::stderr(&made));
    check(&dir, &zt2, 0, &[&["diff", "FILE", "FILE"], &["diff", "--json", "FILE", "FILE"]]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An attribute array of 20,000,000 one-byte items (a 19 MB file), in 1.2 (object attributes)
/// and 0.1 (a tensor's custom field): attributes cost their encoding, not 32 bytes per item,
/// whether inspected, dumped, copied or refused.
#[test]
fn an_attribute_array_of_millions_of_items_stays_within_budget() {
    const N: u32 = 20_000_000;
    let dir = scratch("attributes");
    // {"big": [0, 0, …]}, written as CBOR directly rather than built as a tree here.
    let mut cbor = vec![0xa1, 0x63, b'b', b'i', b'g', 0x9a];
    cbor.extend_from_slice(&N.to_be_bytes());
    cbor.resize(cbor.len() + N as usize, 0);
    let attributes = ztensor_format::Attributes::from_cbor(&cbor, 8).unwrap();
    drop(cbor);
    for version in [Version::V1_2, Version::V0_1] {
        let mut manifest = Manifest::new(version);
        let blob = [1u8; 4];
        let object = Object::new("w", vec![4], Format::Dense)
            .with_component("data", Component::new(DType::U8, 64, 4))
            .with_attributes(Some(attributes.clone()));
        manifest.objects.push(object);
        let file = dir.join(format!("attributes-20m-{version}.zt"));
        std::fs::write(&file, assemble(&manifest, &[(64, &blob)])).unwrap();
        drop(manifest);
        check(
            &dir,
            &file,
            0,
            &[
                &["info", "FILE"],
                &["info", "--json", "FILE"],
                &["verify", "FILE"],
                &["dump", "--json", "FILE"],
                &["diff", "--json", "FILE", "FILE"],
                &["convert", "FILE", "OUT.zt", "--quiet"],
                &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
                &["id", "FILE"],
                &["repack", "FILE", "OUT.zt", "--quiet", "--zstd", "1"],
            ],
        );
        // safetensors has no place for object attributes: refused, within the budget too.
        check(&dir, &file, 1, &[&["convert", "FILE", "OUT.safetensors", "--quiet"]]);
    }
    // zTensor 2: the same array in one object's attributes, the file written byte by byte
    // (magic, a one-byte blob at 65536, the manifest at the next 64 KiB, the footer).
    let mut manifest = vec![0xa1];
    push_text(&mut manifest, "objects");
    manifest.push(0xa1);
    push_text(&mut manifest, "w");
    manifest.push(0xa4);
    push_text(&mut manifest, "parts");
    manifest.push(0xa1);
    push_text(&mut manifest, "data");
    manifest.push(0xa3);
    push_text(&mut manifest, "blob");
    manifest.extend([0x82, 0x1a, 0, 1, 0, 0, 0x01]);
    push_text(&mut manifest, "dtype");
    push_text(&mut manifest, "u8");
    push_text(&mut manifest, "digest");
    push_text(&mut manifest, &format!("xxh3:{:016x}", xxhash_rust::xxh3::xxh3_64(&[7])));
    push_text(&mut manifest, "shape");
    manifest.extend([0x81, 0x01]);
    push_text(&mut manifest, "layout");
    push_text(&mut manifest, "dense");
    push_text(&mut manifest, "attributes");
    manifest.extend([0xa1, 0x63, b'b', b'i', b'g', 0x9a]);
    manifest.extend_from_slice(&N.to_be_bytes());
    manifest.resize(manifest.len() + N as usize, 0);
    let mut file = ztensor_v2::MAGIC.to_vec();
    file.resize(65536, 0);
    file.push(7);
    file.resize(2 * 65536, 0);
    file.extend(&manifest);
    file.extend((2u64 * 65536).to_le_bytes());
    file.extend((manifest.len() as u64).to_le_bytes());
    file.extend(xxhash_rust::xxh3::xxh3_64(&manifest).to_le_bytes());
    file.extend(ztensor_v2::VERSION.to_le_bytes());
    file.extend(0u32.to_le_bytes());
    file.extend(ztensor_v2::MAGIC);
    drop(manifest);
    let path = dir.join("attributes-20m-2.zt");
    std::fs::write(&path, file).unwrap();
    check(
        &dir,
        &path,
        0,
        &[
            &["info", "FILE"],
            &["info", "--json", "FILE"],
            &["verify", "FILE"],
            &["dump", "--json", "FILE"],
            &["id", "FILE"],
            &["diff", "--json", "FILE", "FILE"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An attribute map of 4,000,000 integer keys (a 24 MB zTensor 1.2 file): a map costs its
/// encoding, not a sort table of its entries, on every path, zTensor 2 out included.
#[test]
fn an_attribute_map_of_millions_of_entries_stays_within_budget() {
    const N: u32 = 4_000_000;
    let dir = scratch("attribute-map");
    // {"big": {0: 0, 1: 0, …}}, written as CBOR directly.
    let mut cbor = vec![0xa1, 0x63, b'b', b'i', b'g', 0xba];
    cbor.extend_from_slice(&N.to_be_bytes());
    for k in 0..N {
        match k {
            0..=23 => cbor.push(k as u8),
            24..=0xff => cbor.extend([0x18, k as u8]),
            0x100..=0xffff => {
                cbor.push(0x19);
                cbor.extend((k as u16).to_be_bytes());
            }
            _ => {
                cbor.push(0x1a);
                cbor.extend(k.to_be_bytes());
            }
        }
        cbor.push(0);
    }
    let attributes = ztensor_format::Attributes::from_cbor(&cbor, 8).unwrap();
    drop(cbor);
    let mut manifest = Manifest::new(Version::V1_2);
    let blob = [1u8; 4];
    let object = Object::new("w", vec![4], Format::Dense)
        .with_component("data", Component::new(DType::U8, 64, 4))
        .with_attributes(Some(attributes));
    manifest.objects.push(object);
    let file = dir.join("attribute-map-4m.zt");
    std::fs::write(&file, assemble(&manifest, &[(64, &blob)])).unwrap();
    drop(manifest);
    check(
        &dir,
        &file,
        0,
        &[
            &["info", "FILE"],
            &["verify", "FILE"],
            &["dump", "--json", "FILE"],
            &["id", "FILE"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A 50 MB byte-string attribute (zTensor 1.2): shown as hex by `info --json` and the dump a
/// piece at a time, copied as bytes into zTensor 2.
#[test]
fn a_50_mb_bytes_attribute_stays_within_budget() {
    const N: u32 = 50_000_000;
    let dir = scratch("bytes-attribute");
    // {"b": h'…'}, written as CBOR directly.
    let mut cbor = vec![0xa1, 0x61, b'b', 0x5a];
    cbor.extend_from_slice(&N.to_be_bytes());
    cbor.extend((0..N).map(|i| (i % 251) as u8));
    let attributes = ztensor_format::Attributes::from_cbor(&cbor, 8).unwrap();
    drop(cbor);
    let mut manifest = Manifest::new(Version::V1_2);
    let object = Object::new("w", vec![4], Format::Dense)
        .with_component("data", Component::new(DType::U8, 64, 4))
        .with_attributes(Some(attributes));
    manifest.objects.push(object);
    let file = dir.join("bytes-50m.zt");
    std::fs::write(&file, assemble(&manifest, &[(64, &[1u8; 4])])).unwrap();
    drop(manifest);
    check(
        &dir,
        &file,
        0,
        &[
            &["info", "--json", "FILE"],
            &["dump", "--json", "FILE"],
            &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A GGUF file whose metadata holds an array of 4,000,000 empty strings (32 MB: eight bytes
/// of length each) and one tensor: its metadata costs what it holds whether listed, checked or
/// converted to zTensor 1.2 or 2.
#[test]
fn a_gguf_array_of_millions_of_empty_strings_stays_within_budget() {
    const N: u64 = 4_000_000;
    let dir = scratch("gguf-strings");
    let text = |s: &str, out: &mut Vec<u8>| {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    };
    // Version 3, one tensor, one key: "big.empty", an array (9) of strings (8).
    let mut file = b"GGUF".to_vec();
    file.extend(3u32.to_le_bytes());
    file.extend(1u64.to_le_bytes());
    file.extend(1u64.to_le_bytes());
    text("big.empty", &mut file);
    file.extend(9u32.to_le_bytes());
    file.extend(8u32.to_le_bytes());
    file.extend(N.to_le_bytes());
    file.resize(file.len() + usize::try_from(N * 8).unwrap(), 0);
    // The tensor "w": one dimension of 4, f32 (type 0), at offset 0 of the data.
    text("w", &mut file);
    file.extend(1u32.to_le_bytes());
    file.extend(4u64.to_le_bytes());
    file.extend(0u32.to_le_bytes());
    file.extend(0u64.to_le_bytes());
    // The data at the next multiple of the default alignment, 32.
    file.resize(file.len().next_multiple_of(32), 0);
    for v in [1.0f32, 2.0, 3.0, 4.0] {
        file.extend(v.to_le_bytes());
    }
    let path = dir.join("strings-4m.gguf");
    std::fs::write(&path, file).unwrap();
    check(
        &dir,
        &path,
        0,
        &[
            &["info", "FILE"],
            &["verify", "FILE"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--to", "2", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Appends the CBOR text string `s` (shorter than 24 bytes).
fn push_text(out: &mut Vec<u8>, s: &str) {
    out.push(0x60 | u8::try_from(s.len()).unwrap());
    out.extend(s.as_bytes());
}

/// Half a million objects that all name one blob: each check or copy of it is done once.
#[test]
fn half_a_million_aliases_stay_within_budget() {
    let dir = scratch("aliases");
    let blob = [7u8; 64];
    let mut manifest = Manifest::new(Version::V1_2);
    manifest.objects = (0..500_000)
        .map(|i| {
            Object::new(format!("a{i:06}"), vec![64], Format::Dense)
                .with_component("data", Component::new(DType::U8, 64, 64))
        })
        .collect();
    let file = dir.join("aliases.zt");
    std::fs::write(&file, assemble(&manifest, &[(64, &blob)])).unwrap();
    drop(manifest);
    check(
        &dir,
        &file,
        0,
        &[
            &["verify", "FILE"],
            &["dump", "--json", "FILE"],
            &["repack", "FILE", "OUT.zt", "--quiet"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tensor that decodes to gigabytes from kilobytes: a zstd stream of 4 GiB whose size the
/// manifest does not state (v1.1).
#[test]
fn gigabytes_from_kilobytes_stay_within_budget() {
    let dir = scratch("expand");
    // 4 GiB of zeros, undeclared.
    const BIG: u64 = 4 << 30;
    let stored = super::hostile::zstd_zeros(BIG);
    let mut manifest = Manifest::new(Version::V1_1);
    manifest.objects.push(
        Object::new("zeros", vec![BIG], Format::Dense)
            .with_component("data", zstd_at_64(DType::U8, &stored, None)),
    );
    let file = dir.join("zeros-4g.zt");
    std::fs::write(&file, assemble(&manifest, &[(64, &stored)])).unwrap();
    check(
        &dir,
        &file,
        0,
        &[
            &["verify", "FILE"],
            // Dumped (every decoded byte hashed) and copied in pieces within the budget when
            // the ratio is raised to admit it.
            &["dump", "--json", "FILE", "--max-expansion", "1000000"],
            &["repack", "FILE", "OUT.zt", "--quiet", "--zstd", "1", "--max-expansion", "1000000"],
        ],
    );
    // At the default ratio (4,096 times the file), a copy that would decode 4 GiB from this
    // file is refused before it writes anything, as the stream's length is learned.
    check(
        &dir,
        &file,
        1,
        &[&["repack", "FILE", "OUT.zt", "--quiet", "--zstd", "1"], &["dump", "--json", "FILE"]],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A v0.1 single-blob CSR matrix whose zstd blob decodes to 1 GiB (2^27 row pointers, all
/// zero: every row empty): verified (strict rules too), dumped, compared and converted to 1.x
/// and back into a 0.1 single blob in pieces, each part of the blob read where it lies.
#[test]
fn a_gigabyte_single_blob_csr_stays_within_budget() {
    let dir = scratch("csr");
    const BLOB: u64 = 1 << 30;
    let stored = super::hostile::zstd_zeros(BLOB);
    let mut manifest = Manifest::new(Version::V0_1);
    let mut object = Object::new("m", vec![BLOB / 8 - 1, 4], Format::SparseCsr);
    object.packing = ztensor_format::Packing::V0Single;
    manifest.objects.push(object.with_component("data", zstd_at_64(DType::F32, &stored, None)));
    let file = dir.join("csr-1g.zt");
    std::fs::write(&file, assemble(&manifest, &[(64, &stored)])).unwrap();
    check(
        &dir,
        &file,
        0,
        &[
            &["verify", "FILE"],
            &["verify", "--strict", "FILE"],
            &["dump", "--json", "FILE"],
            &["diff", "FILE", "FILE"],
            &["repack", "FILE", "OUT.zt", "--quiet", "--to", "1.2", "--zstd", "1"],
            &["repack", "FILE", "OUT.zt", "--quiet", "--to", "1.1", "--raw"],
            &["repack", "FILE", "OUT.zt", "--quiet", "--to", "0.1", "--zstd", "1"],
            &["convert", "FILE", "OUT.zt", "--quiet"],
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A TensorBuffers tensor of four million dimensions, each 1.
#[test]
fn a_shape_of_millions_of_dimensions_stays_within_budget() {
    let dir = scratch("dims");
    let mut w = ztensor_tensorbuffers::TbWriter::new(Vec::new()).unwrap();
    w.add("t", ztensor_tensorbuffers::DataType::UInt8, &vec![1; 4 << 20], &[7]).unwrap();
    let file = dir.join("dims-4m.tb");
    std::fs::write(&file, w.finish().unwrap().0).unwrap();
    check(&dir, &file, 0, &[&["dump", "--json", "FILE"], &["info", "FILE"]]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A streamed tensor whose stream gives fewer or more bytes than its manifest declares, or is
/// corrupt half-way, fails with the rule it breaks, and the output the command was writing is
/// never published: what was at its path before is still there, and nothing else is left.
#[test]
fn a_stream_that_breaks_half_way_publishes_nothing() {
    const LEN: u64 = 64 << 20;
    let dir = scratch("broken");
    // Frames that do not state their size, so only the stream's end can tell: the header
    // without its content size is 6 bytes, then 4-byte blocks (a 3-byte header and the byte).
    let mut zeros = super::hostile::zstd_zeros(LEN);
    zeros[4] = 0;
    zeros.drain(6..14);
    // A block header in the middle made reserved (type 3): the decoder fails there.
    let mut corrupt = zeros.clone();
    let blocks = (corrupt.len() - 6) / 4;
    corrupt[6 + 4 * (blocks / 2)] |= 0b110;
    let cases = [
        ("short", &zeros, LEN + (128 << 10), "decoded_size_mismatch"),
        ("long", &zeros, LEN - (128 << 10), "decoded_size_mismatch"),
        ("corrupt", &corrupt, LEN, "decode_failed"),
    ];
    for (name, stored, declared, rule) in cases {
        let mut manifest = Manifest::new(Version::V1_2);
        manifest.objects.push(
            Object::new("t", vec![declared], Format::Dense)
                .with_component("data", zstd_at_64(DType::U8, stored, Some(declared))),
        );
        let file = dir.join(format!("{name}.zt"));
        std::fs::write(&file, assemble(&manifest, &[(64, stored)])).unwrap();
        let f = file.to_str().unwrap();
        for (target, command) in [
            ("r.zt", vec!["repack", f, "", "--zstd", "1", "--quiet"]),
            ("c.safetensors", vec!["convert", f, "", "--quiet"]),
        ] {
            let target = dir.join(target);
            std::fs::write(&target, b"what was here before").unwrap();
            let args: Vec<&str> = command
                .iter()
                .map(|&a| if a.is_empty() { target.to_str().unwrap() } else { a })
                .collect();
            let r = run(&args);
            eprintln!("{name} {:?}: {} ({:.2} s)", args[0], r.said.trim(), r.took.as_secs_f64());
            assert_eq!(r.code, Some(1), "{name} {args:?}: {}", r.said);
            assert!(r.said.contains(rule), "{name} {args:?}: {}", r.said);
            assert_eq!(std::fs::read(&target).unwrap(), b"what was here before", "{name}");
            let inputs = ["short.zt", "long.zt", "corrupt.zt"];
            let own = target.file_name().unwrap().to_string_lossy().into_owned();
            let left: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !inputs.contains(&n.as_str()) && *n != own)
                .collect();
            assert!(left.is_empty(), "{name} {args:?} left {left:?}");
            std::fs::remove_file(&target).unwrap();
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
