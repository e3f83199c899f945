//! The bodies of the cargo-fuzz targets in `fuzz/` (each target is a three-line wrapper), also
//! replayed on committed findings by this crate's tests. Every body must return normally on any
//! input; a panic is a finding.

use ztensor_format::{Container, Manifest, Options, parse_file as parse};
use ztensor_io::{Chunked, Reader};

use crate::model::{self, Model};
use ztensor_tensorbuffers::{ReadOptions, TbFile, decode_metadata, encode_metadata};

/// How many bytes a zstd frame of one byte can decode to at most (its best ratio, with the
/// frame's overhead: see `ztensor_io::codec::zstd_max_decoded`); what a reader of compressed
/// data may hold for what it decoded.
const ZSTD_RATIO: usize = 32_768;

/// The most heap bytes a reader may hold for an input of `len` bytes that it may decode to
/// `decoded` bytes (0 for a format that holds nothing compressed): 32 bytes for each byte of
/// input (what a parsed manifest or pickle holds, with what the allocator rounds and vectors
/// hold spare), twice what it decodes (the decoded bytes and a copy being checked), and 64
/// MiB. More is memory no limit sees: the amplification oracle of every target that reads a
/// file (the targets count live heap bytes, [`crate::heap`]).
pub fn allowed(len: usize, decoded: usize) -> usize {
    len.saturating_mul(32).saturating_add(decoded.saturating_mul(2)).saturating_add(64 << 20)
}

/// Runs `body` on `data` (`what` it is read as) and fails, as a panic would, when it held
/// more live heap than [`allowed`] for `data` decoding to `decoded` bytes.
fn held_within(what: &str, data: &[u8], decoded: usize, body: impl FnOnce()) {
    let ((), peak) = crate::heap::peak_during(body);
    let allowed = allowed(data.len(), decoded);
    assert!(
        peak <= allowed,
        "{} bytes read as {what} held {peak} bytes of heap, more than the {allowed} allowed",
        data.len()
    );
}

/// Any bytes as a whole file: parse and validate; an accepted manifest must re-encode (unless
/// it holds v0.1 tensors of one name, which readers accept and writers refuse), and its
/// encoding must be a fixed point.
pub fn parse_file(data: &[u8]) {
    held_within("a zTensor file's manifest", data, 0, || parse_file_body(data));
}

fn parse_file_body(data: &[u8]) {
    for options in [Options::default(), Options::strict()] {
        if let Ok(validated) = parse(data, &options) {
            let manifest = validated.manifest();
            if validated.shadowed().next().is_some() {
                assert!(!options.strict, "strict mode accepted a repeated name");
                let refused = manifest.encode().expect_err("a repeated name is written");
                assert_eq!(refused.kind(), ztensor_format::ErrorKind::DuplicateName);
                continue;
            }
            let bytes = manifest.encode().expect("an accepted manifest re-encodes");
            let again = Manifest::decode(manifest.version.container(), &bytes, &options.limits)
                .expect("our own encoding decodes");
            assert_eq!(again.encode().expect("re-encodes"), bytes, "encoding is a fixed point");
        }
    }
}

/// A container byte and manifest bytes, framed by a valid header and trailer, so the fuzzer
/// spends its time in the CBOR decoder, the schemas and validation. The direct v1.x decoding
/// path and the general one must give the same manifest or the same error.
pub fn manifest(data: &[u8]) {
    held_within("a manifest", data, 0, || manifest_body(data));
}

fn manifest_body(data: &[u8]) {
    let Some((&selector, manifest)) = data.split_first() else { return };
    let container = if selector & 1 == 0 { Container::V0_1 } else { Container::V1 };
    let limits = Options::default().limits;
    assert_eq!(
        format!("{:?}", Manifest::decode(container, manifest, &limits)),
        format!("{:?}", Manifest::decode_general(container, manifest, &limits)),
        "the direct and general decoders disagree"
    );
    let mut file = container.magic().to_vec();
    file.resize(8 + usize::from(selector >> 1) * 64, 0);
    file.extend_from_slice(manifest);
    file.extend_from_slice(&container.encode_trailer(manifest.len() as u64));
    let _ = parse(&file, &Options::default());
    let _ = parse(&file, &Options::strict());
}

/// Any bytes through the reader, at the default limits: open, then decode, verify and check
/// every object. No input can make the reader allocate more than a zstd stream of its length can
/// decode to (32,768 times its bytes, see `ztensor_io::codec::zstd_max_decoded`), which is what the
/// fuzz smoke's input-length and malloc limits are set from.
pub fn read_any(data: &[u8]) {
    let decoded = data.len().saturating_mul(ZSTD_RATIO);
    held_within("a zTensor file", data, decoded, || read_any_body(data));
}

fn read_any_body(data: &[u8]) {
    // Lenient first (most files open), then strict (the strict data rules run on what opens).
    for strict in [false, true] {
        let mut options = Options::default();
        options.strict = strict;
        let Ok(reader) = Reader::new(data, &options) else { continue };
        for object in reader.objects() {
            for component in object.components() {
                let _ = component.verify();
                let _ = component.decoded();
                let _ = component.decoded_verified();
            }
            let _ = object.read();
            if let Ok(data) = object.read_verified() {
                let _ = object.check(&data);
            }
        }
        for object in reader.shadowed() {
            let _ = object.read_verified();
        }
    }
}

/// Any bytes as a TensorBuffers file: open and read; accepted metadata must re-encode to the same
/// value.
pub fn tensorbuffers(data: &[u8]) {
    held_within("a TensorBuffers file", data, 0, || tensorbuffers_body(data));
}

fn tensorbuffers_body(data: &[u8]) {
    for options in [ReadOptions::default(), ReadOptions::strict()] {
        let Ok(reader) = TbFile::new(data, &options) else { continue };
        for t in reader.tensors() {
            let _ = reader.data(&t.name);
        }
        let again = encode_metadata(reader.metadata());
        let decoded = decode_metadata(&again, 1 << 20).expect("our own metadata verifies");
        assert_eq!(&decoded, reader.metadata());
    }
}

/// A model generated from the bytes, written, then read back through a slice and a small-chunk
/// source: writing must succeed, reading must give back exactly what was written, and the
/// file must pass [`parse_file`]'s re-encoding checks.
pub fn roundtrip(data: &[u8]) {
    let model = Model::from_bytes(data);
    let (file, expect) = model.write().expect("a generated model writes");
    if let Err(e) = model::check_bytes(&file[..], &expect) {
        panic!("read back differs: {e}\n{model:?}");
    }
    if let Err(e) = model::check_bytes(Chunked::new(&file[..], 7), &expect) {
        panic!("read back through 7-byte reads differs: {e}\n{model:?}");
    }
    parse_file(&file);
}

/// Any bytes as each foreign format the tools read (a PyTorch checkpoint, a NumPy `.npy` and
/// `.npz`, a GGUF file): open, then describe, read and check every tensor, at a decode limit of
/// 64 MiB. The PyTorch reader runs a pickle: no input may make it run anything, loop, or
/// allocate by a claim.
pub fn foreign(data: &[u8]) {
    // Each reader decodes at most its limit at a time (a member, a tensor), on a copy of the
    // input of its own.
    let decoded = usize::try_from(FOREIGN_LIMIT).unwrap_or(usize::MAX);
    held_within("each foreign format", data, decoded, || foreign_body(data));
}

/// The decode limit the `foreign` target reads at.
const FOREIGN_LIMIT: u64 = 64 << 20;

fn foreign_body(data: &[u8]) {
    use ztensor_foreign::{gguf::GgufFile, npy_in::NpyFile, npz::NpzFile, torch::TorchFile};
    use ztensor_io::TensorSource;
    const LIMIT: u64 = FOREIGN_LIMIT;
    let read_all = |source: &dyn TensorSource| {
        let _ = source.attributes();
        for i in 0..source.len() {
            let _ = source.info(i);
            if let Ok(data) = source.read(i) {
                let _ = source.check(i, &data);
            }
        }
    };
    if let Ok(file) = TorchFile::new(data.to_vec(), "tensor", LIMIT) {
        read_all(&file);
    }
    if let Ok(file) = NpzFile::new(data.to_vec(), LIMIT) {
        read_all(&file);
    }
    if let Ok(file) = GgufFile::new(data.to_vec()) {
        read_all(&file);
        // As a conversion to zTensor 2 reads it (MXFP4 repacked as `zt.mx/1`): each object the
        // same read whole and in pieces, or refused both ways.
        let file = file.with_blocks(ztensor_foreign::gguf::Blocks::Layouts);
        read_all(&file);
        for i in 0..file.len() {
            let whole = file.read(i);
            let mut pieces: Vec<(String, Vec<u8>)> = Vec::new();
            let pieced = file.read_pieces(i, 5, &mut |role, bytes| {
                match pieces.last_mut() {
                    Some((r, all)) if r == role => all.extend_from_slice(bytes),
                    _ => pieces.push((role.to_owned(), bytes.to_vec())),
                }
                Ok(())
            });
            match (whole, pieced) {
                (Ok(whole), Ok(())) => {
                    let parts: Vec<(String, Vec<u8>)> = whole
                        .components
                        .iter()
                        .filter(|(_, c)| !c.bytes.is_empty())
                        .map(|(role, c)| (role.clone(), c.bytes.to_vec()))
                        .collect();
                    assert_eq!(parts, pieces, "GGUF object {i} read whole and in pieces");
                }
                (Err(_), Err(_)) => {}
                (whole, pieced) => panic!(
                    "GGUF object {i}: read whole {:?}, in pieces {:?}",
                    whole.map(|_| ()),
                    pieced
                ),
            }
        }
    }
    if let Ok(file) = NpyFile::new(data.to_vec(), "array") {
        read_all(&file);
    }
}

/// Differential, in this process: the recipe the bytes describe
/// ([`crate::difffuzz::Recipe::from_fuzz_bytes`]; the target's custom mutator changes them as
/// structure) is built, read by our strict and lenient readers and by our lenient reader again
/// through 7-byte reads ([`crate::difffuzz::OursInProcess`]), and classified as the `fuzz`
/// command classifies an implementation: any divergence (a verdict or dump that depends on how
/// the bytes are read, a strict acceptance the lenient reader refuses) is a finding.
pub fn differential(data: &[u8]) {
    use crate::difffuzz::{InProcess, OursInProcess, Recipe, classify, ours_in_process};
    let Ok(file) = Recipe::from_fuzz_bytes(data).build() else {
        panic!("a recipe does not build");
    };
    if !file.starts_with(b"ZTEN") {
        return;
    }
    let ours = ours_in_process(&file).expect("our readers give verdicts on bytes in memory");
    assert!(!ours.strict.1 || ours.lenient.1, "strict accepts what lenient refuses");
    let theirs = OursInProcess { chunk: Some(61) }.read(&file);
    if let Some((divergence, detail)) = classify(&ours, &theirs) {
        panic!("{divergence:?}: {detail}");
    }
}

/// The most heap bytes the `dcp` target's reader may hold for an input of `len` bytes:
/// [`allowed`] with nothing decoded, twice what the pickle machine's budget allows (16 bytes a
/// byte and 32 MiB). More is memory the budget does not see.
pub fn dcp_allowed(len: usize) -> usize {
    allowed(len, 0)
}

/// A PyTorch Distributed Checkpoint's `.metadata`: its pickle run and its records read as DCP
/// writes them ([`ztensor_foreign::dcp::read_layout`]). No input may make it run anything,
/// loop, allocate by a claim, or hold more than [`dcp_allowed`] (the amplification oracle:
/// the target counts live heap bytes, [`crate::heap`]).
pub fn dcp(data: &[u8]) {
    held_within("a DCP .metadata", data, 0, || {
        let _ = ztensor_foreign::dcp::read_layout(data);
    });
}

/// Any bytes through the pickle machine alone ([`ztensor_foreign::pickle_probe`]): every
/// opcode and every global it models, persistent ids read as PyTorch names its storages. No
/// input may make it run anything, loop, or hold more than [`allowed`] (its budget is 16
/// bytes a byte of pickle and 32 MiB).
pub fn pickle(data: &[u8]) {
    held_within("a pickle", data, 0, || {
        let _ = ztensor_foreign::pickle_probe(data);
    });
}

/// A selector byte, then an index of a sharded checkpoint as each kind is read: a zTensor
/// checkpoint's `NAME.zt.index.json` (a `dcp` section, a Distributed Checkpoint's chunks,
/// included), a Hugging Face `model.safetensors.index.json` (its shards found empty),
/// and a zTensor 2 root's shard table (its shards not found); selectors from 0xF0, a plan of
/// a sharded conversion (`ztensor plan`'s, which `run` and `finalize` read from a bucket). Held to [`allowed`]: an index
/// may not make its reader hold memory by a count it states.
pub fn indexes(data: &[u8]) {
    held_within("a sharded checkpoint's index", data, 0, || indexes_body(data));
}

fn indexes_body(data: &[u8]) {
    use std::path::Path;
    let Some((&selector, index)) = data.split_first() else { return };
    let path = Path::new("fuzz/model.index.json");
    if selector >= 0xF0 {
        // A plan of a sharded conversion (`ztensor plan`), as `run` and `finalize` read one
        // from a file or a bucket: refused, or one that writes itself back as the same plan.
        if let Ok(plan) = ztensor_shard_write::Plan::from_json(index, Path::new("fuzz/plan.json")) {
            let again = ztensor_shard_write::Plan::from_json(plan.to_json().as_bytes(), path)
                .expect("a plan written back reads again");
            assert_eq!(again.digest(), plan.digest(), "a plan written back is the same plan");
        }
        return;
    }
    match selector % 3 {
        0 => {
            let _ = ztensor_shard::ShardIndex::from_json(index, path);
        }
        1 => {
            // A shard of no tensors: the index's names are checked against what it holds.
            const EMPTY: &[u8] = b"\x02\0\0\0\0\0\0\0{}";
            let _ = ztensor_foreign::sharded::ShardedSafetensors::open_index(path, index, |_| {
                ztensor_foreign::safetensors::SafetensorsFile::new(EMPTY)
            });
        }
        _ => {
            let _ = ztensor_v2::File::open_sharded(index, 1 << 20, &mut |name, _| {
                Ok(ztensor_v2::Located::Missing(format!("{name}: not looked for")))
            });
        }
    }
}

/// The safetensors shards of a Distributed Checkpoint (DCP's `HuggingFaceStorageWriter`):
/// the bytes are one to three shard files (the first byte, modulo 3, plus one; each file but
/// the last after its length, two bytes little-endian), read as the registry reads such a
/// directory: each file's header and its `DCP_SHARDING_INFO`, the chunks stitched by their
/// offsets, then every whole tensor read and checked, and read again in pieces (the same bytes,
/// or a finding). A whole tensor holds no more than its chunks, so no input may make the reader
/// hold more than [`allowed`] for its length decoded.
pub fn dcp_shards(data: &[u8]) {
    // A tensor read whole, and again in pieces beside it.
    let decoded = data.len().saturating_mul(2);
    held_within("a Distributed Checkpoint's safetensors shards", data, decoded, || {
        dcp_shards_body(data);
    });
}

fn dcp_shards_body(data: &[u8]) {
    use ztensor_foreign::{dcp_shards::DcpShards, safetensors::SafetensorsFile};
    use ztensor_io::TensorSource;
    let Some((&count, mut rest)) = data.split_first() else { return };
    let count = usize::from(count % 3) + 1;
    let mut files = Vec::with_capacity(count);
    for n in 1..=count {
        let bytes = if n == count {
            std::mem::take(&mut rest)
        } else {
            let Some((len, tail)) = rest.split_first_chunk::<2>() else { return };
            let len = usize::from(u16::from_le_bytes(*len)).min(tail.len());
            let (bytes, tail) = tail.split_at(len);
            rest = tail;
            bytes
        };
        let Ok(file) = SafetensorsFile::new(bytes.to_vec()) else { return };
        files.push((format!("shard-{n:05}-model-00001-of-00001.safetensors"), file));
    }
    let Ok(shards) = DcpShards::new(files) else { return };
    let Ok(whole) = ztensor_registry::stitch_dcp_shards(shards) else { return };
    for i in 0..whole.len() {
        let _ = whole.info(i);
        let Ok(data) = whole.read(i) else { continue };
        let _ = whole.check(i, &data);
        // In pieces (a grid row streamed from its chunk, a band of columns, slabs): the same
        // bytes as read whole.
        let mut pieces = Vec::new();
        let streamed = whole.read_pieces(i, 7, &mut |_, piece| {
            pieces.extend_from_slice(piece);
            Ok(())
        });
        assert!(streamed.is_ok(), "read whole but not in pieces: {streamed:?}");
        let bytes = &data.components[ztensor_io::role::DATA].bytes;
        assert!(pieces == bytes.as_ref(), "read in pieces, other bytes than read whole");
    }
}

/// The object-storage client's handling of answers: the bytes are a script of answers
/// (status, headers, body; see `ztensor_remote::script_answers`) served in the place of a
/// server, through the same bounding, redirect and counting layer as real answers, to an
/// open, ranged reads (in order, read ahead by a plan, the last bytes) and a small upload. No
/// answer may make the client panic, hang past its timeout, or hold more than what it asked
/// for: a ranged answer past its range, an error document or a completion past its bound is
/// refused (the malloc and RSS limits catch a body held whole).
pub fn remote(data: &[u8]) {
    use std::io::Write;
    use ztensor_remote::{Location, RemoteObject, RemoteOptions, RemoteUpload};
    use ztensor_source::ReadAt;
    let _script = ztensor_remote::script_answers(data);
    let options = RemoteOptions {
        unsigned: true,
        timeout: std::time::Duration::from_millis(500),
        settings: vec![
            ("aws_endpoint".to_owned(), "http://127.0.0.1:9".to_owned()),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
        ],
        concurrency: 2,
        range_len: RemoteOptions::MIN_RANGE_LEN,
        read_ahead: 4 * RemoteOptions::MIN_RANGE_LEN,
        ..RemoteOptions::default()
    };
    let location = Location::parse("s3://fuzz/model.zt").expect("a URL");
    if let Ok(object) = RemoteObject::open(&location, &options) {
        // What the server claims the object holds is not believed: at most 1 MiB is read.
        let len = object.len().min(1 << 20);
        let mut head = vec![0u8; usize::try_from(len.min(4096)).unwrap_or(0)];
        let _ = object.read_exact_at(0, &mut head);
        object.will_need(std::slice::from_ref(&(0..len)));
        let mut scratch = vec![0u8; 64 << 10];
        let mut seen = 0u64;
        let read = object.read_each_at(0, len, &mut scratch, &mut |piece| {
            seen += piece.len() as u64;
            Ok(())
        });
        if read.is_ok() {
            assert_eq!(seen, len, "a read that succeeds gives every byte asked for");
        }
        let mut tail = [0u8; 16];
        if len >= 16 {
            let _ = object.read_exact_at(object.len() - 16, &mut tail);
        }
        let _ = object.sibling("model-00001-of-00002.zt");
    }
    if let Ok(mut upload) = RemoteUpload::create(&location, &options)
        && upload.write_all(&[7u8; 1000]).is_ok()
    {
        let _ = upload.finish();
    }
}

/// The names of the fuzz targets, each a wrapper around the body of the same name.
pub const TARGETS: [&str; 13] = [
    "parse_file",
    "manifest",
    "read_any",
    "tensorbuffers",
    "roundtrip",
    "foreign",
    "ztensor2",
    "differential",
    "dcp",
    "pickle",
    "indexes",
    "remote",
    "dcp_shards",
];

/// The body of the target called `name`.
pub fn body(name: &str) -> Option<fn(&[u8])> {
    match name {
        "parse_file" => Some(parse_file),
        "manifest" => Some(manifest),
        "read_any" => Some(read_any),
        "tensorbuffers" => Some(tensorbuffers),
        "roundtrip" => Some(roundtrip),
        "foreign" => Some(foreign),
        "ztensor2" => Some(ztensor2),
        "differential" => Some(differential),
        "dcp" => Some(dcp),
        "pickle" => Some(pickle),
        "indexes" => Some(indexes),
        "remote" => Some(remote),
        "dcp_shards" => Some(dcp_shards),
        _ => None,
    }
}

/// A zTensor 2 file: opened (container, deterministic CBOR, schema, whole-manifest rules), then
/// every part read and verified, every CSR object's data checked, and every object read
/// through the tensor-source interface. Anything but a panic, a hang or an unbounded
/// allocation is fine.
pub fn ztensor2(data: &[u8]) {
    // What it decodes is held, written out, read back and written again: four copies.
    let decoded = data.len().saturating_mul(ZSTD_RATIO).saturating_mul(2);
    held_within("a zTensor 2 file", data, decoded, || ztensor2_body(data));
}

fn ztensor2_body(data: &[u8]) {
    use ztensor_io::TensorSource;
    let Ok(file) = ztensor_v2::File::open(data, 1 << 20) else { return };
    let Some(manifest) = file.manifest() else { return };
    for (name, object) in &manifest.objects {
        for part in object.parts.keys() {
            let _ = file.verify(name, part);
        }
        let _ = file.csr(name);
    }
    for i in 0..file.len() {
        let _ = file.info(i);
        let _ = file.read(i);
    }
    // Whatever reads is written again: canonical form must be written, read back with the same
    // content and identity, and written again to the same bytes.
    let mut sink = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
    if ztensor_io::TensorSink::write_all(&mut sink, &file).is_err() {
        return;
    }
    let written = sink.into_inner().map(std::io::Cursor::into_inner).unwrap_or_default();
    let again = ztensor_v2::File::open(&written[..], 1 << 30).expect("our own file reads");
    assert_eq!(again.len(), file.len(), "every object written");
    for i in 0..file.len() {
        let (Ok(a), Ok(b)) = (file.read(i), again.read(i)) else { panic!("object {i} reads") };
        assert_eq!(a.components.len(), b.components.len());
        for (role, c) in &a.components {
            assert!(c.bytes == b.components[role].bytes, "object {i} part {role}");
        }
    }
    let id = ztensor_v2::IdAlgorithm::Xxh3;
    assert_eq!(
        ztensor_v2::content_digest(&file, id).ok(),
        again.content_digest(id).ok(),
        "one identity"
    );
    let mut sink = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
    ztensor_io::TensorSink::write_all(&mut sink, &again).expect("written again");
    let twice = sink.into_inner().map(std::io::Cursor::into_inner).unwrap_or_default();
    assert!(twice == written, "canonical: the same bytes");
}
