//! What is verified, and read: seek tables, aliases, digests of pieces, the read plan.

use std::sync::atomic::{AtomicU64, Ordering};

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{Compression, CopyOptions, DigestChoice, ReadAt, Reader, WriteOptions, Writer};
use ztensor_par::{ParOptions, decoded_parallel, load_all, repack, verify_all};

use super::behaviour::big_file;

#[test]
fn a_seek_table_that_claims_more_than_its_frames_can_hold_buys_nothing() {
    use ztensor_format::{Component, Encoding, Format, Object};
    // Two frames of 10 bytes each whose seek table says 4 GiB each; the manifest agrees.
    let (z1, z2) = (
        ztensor_io::codec::zstd_encode(&[1; 10], 3).unwrap(),
        ztensor_io::codec::zstd_encode(&[2; 10], 3).unwrap(),
    );
    let claim = u64::from(u32::MAX);
    let mut stored = [z1.clone(), z2.clone()].concat();
    stored.extend(ztensor_io::codec::seek_table(&[
        (z1.len() as u32, u32::MAX),
        (z2.len() as u32, u32::MAX),
    ]));
    let mut c = Component::new(DType::U8, 0, stored.len() as u64);
    c.encoding = Encoding::Zstd;
    c.uncompressed_length = Some(2 * claim);
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let object = Object::new("w", vec![2 * claim], Format::Dense);
    let part = ztensor_io::StoredComponent { role: "data", component: c, bytes: &stored };
    w.add_stored(object, &[part]).unwrap();
    let file = w.finish().unwrap().0;
    assert!(file.len() < 1024, "{}", file.len());
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let started = std::time::Instant::now();
    let err = decoded_parallel(reader.component("w", "data").unwrap()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DecodedSizeMismatch), "{err}");
    let err = load_all(&reader, &ParOptions::with_threads(2)).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DecodedSizeMismatch), "{err}");
    // Encoding 8 GiB again from a file of a few hundred bytes is over the expansion limit:
    // refused before anything is read.
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let copy = CopyOptions { compression: Some(Compression::Zstd(1)), ..CopyOptions::default() };
    let err = repack(&reader, &mut out, &copy, &ParOptions::with_threads(2), &()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DecodedTooLarge), "{err}");
    // With no such limit, repack plans its pieces from the declared size: refused before
    // planning 2,048 of them.
    let mut unlimited = Options::default();
    unlimited.limits.max_expansion = u64::MAX;
    let reader = Reader::new(&file[..], &unlimited).unwrap();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let err = repack(&reader, &mut out, &copy, &ParOptions::with_threads(2), &()).unwrap_err();
    assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DecodedSizeMismatch), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// A source that counts the bytes read from it.
struct Counting<'a> {
    bytes: &'a [u8],
    read: AtomicU64,
}

impl ReadAt for Counting<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.bytes.read_exact_at(offset, buf)
    }
}

#[test]
fn aliases_of_one_blob_are_verified_once_and_a_damaged_one_is_named_for_each() {
    use ztensor_format::{Format, Object};
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let options = WriteOptions::zstd(3).with_digest(DigestAlgorithm::Sha256);
    w.add_dense("alias.0", &[200_000], DType::U8, &data, &options).unwrap();
    let c = w.manifest().object(0).unwrap().components["data"].clone();
    let stored = c.length;
    let mut manifest = w.manifest().to_manifest().unwrap();
    for i in 1..16 {
        let o = Object::new(format!("alias.{i}"), vec![200_000], Format::Dense)
            .with_component("data", c.clone());
        manifest.objects.push(o);
    }
    // The same bytes read as another dtype are not an alias for this purpose.
    let mut as_u16 = c.clone();
    as_u16.dtype = DType::U16.into();
    let other = Object::new("other", vec![100_000], Format::Dense).with_component("data", as_u16);
    manifest.objects.push(other);
    let mut file = w.finish().unwrap().0;
    let old =
        ztensor_io::Reader::new(&file[..], &Options::default()).unwrap().manifest().location();
    file.truncate(usize::try_from(old.offset).unwrap());
    let cbor = manifest.encode().unwrap();
    file.extend(&cbor);
    file.extend(ztensor_format::Container::V1.encode_trailer(cbor.len() as u64));

    let source = Counting { bytes: &file, read: AtomicU64::new(0) };
    let reader = Reader::new(source, &Options::default()).unwrap();
    let verdicts = verify_all(&reader, &ParOptions::with_threads(2), &()).unwrap();
    assert_eq!(verdicts.len(), 17);
    assert!(verdicts.iter().all(|(_, v)| v.is_ok()), "{verdicts:?}");
    // The blob was read for alias.0 and for "other", not for each of the 15 other aliases.
    let read = reader.source().read.load(Ordering::Relaxed) - (file.len() as u64 - stored);
    assert!(read <= 3 * stored, "read {read} bytes of a {stored}-byte blob");

    // Damage the blob: every alias is reported, each under its own name.
    let at = usize::try_from(c.offset).unwrap() + 10;
    file[at] ^= 0xff;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let verdicts = verify_all(&reader, &ParOptions::with_threads(2), &()).unwrap();
    for (name, verdict) in &verdicts {
        let err = verdict.as_ref().unwrap_err();
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
}

/// A source whose bytes at `at` change after the first read that covers them: `first` on that
/// read, `later` on every read after.
struct Changing<'a> {
    bytes: &'a [u8],
    at: u64,
    first: u8,
    later: u8,
    reads: AtomicU64,
}

impl ReadAt for Changing<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.bytes.read_exact_at(offset, buf)?;
        if (offset..offset + buf.len() as u64).contains(&self.at) {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            buf[(self.at - offset) as usize] = if n == 0 { self.first } else { self.later };
        }
        Ok(())
    }
}

#[test]
fn the_bytes_a_source_digest_checks_are_the_bytes_written() {
    // A raw component of five pieces with a digest, repacked by workers that read their own
    // pieces: each piece is read once, hashed and compressed from that one buffer.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let options = WriteOptions { digest: Some(DigestAlgorithm::Sha256), ..WriteOptions::raw() };
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("w", &[10_000], DType::U8, &data, &options).unwrap();
    let file = w.finish().unwrap().0;
    let offset = Reader::new(&file[..], &Options::default())
        .unwrap()
        .object("w")
        .unwrap()
        .model()
        .components["data"]
        .offset;
    let at = offset + 4_321;
    let genuine = file[at as usize];
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Blake3),
        chunk_size: Some(2048),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    for threads in [1, 2, 4] {
        // Genuine when first read, damaged after: what was checked is what is written.
        let source = Changing {
            bytes: &file,
            at,
            first: genuine,
            later: genuine ^ 0x40,
            reads: AtomicU64::new(0),
        };
        let reader = Reader::new(source, &Options::default()).unwrap();
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        repack(&reader, &mut out, &copy, &ParOptions::with_threads(threads), &()).unwrap();
        assert_eq!(reader.source().reads.load(Ordering::SeqCst), 1, "read once");
        let out = out.finish().unwrap().0;
        let back = Reader::new(&out[..], &Options::default()).unwrap();
        assert_eq!(back.read_object_verified("w").unwrap().components["data"].bytes, data);

        // Damaged when first read, genuine after: refused, never laundered under a new digest.
        let source = Changing {
            bytes: &file,
            at,
            first: genuine ^ 0x40,
            later: genuine,
            reads: AtomicU64::new(0),
        };
        let reader = Reader::new(source, &Options::default()).unwrap();
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let err =
            repack(&reader, &mut out, &copy, &ParOptions::with_threads(threads), &()).unwrap_err();
        assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DigestMismatch), "{err}");
    }
}

#[test]
fn seek_table_frames_are_decoded_by_the_workers_exactly_as_a_stream_would_be() {
    // A zstd source of 2 KiB frames with a seek table and a digest; repacked with the same
    // piece size, each worker decodes its own frame (and the last reads the table).
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let source_options = WriteOptions {
        compression: Compression::Zstd(3),
        digest: Some(DigestAlgorithm::Blake3),
        chunk_size: Some(2048),
        raw_if_not_smaller: false,
    };
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("w", &[20_000], DType::U8, &data, &source_options).unwrap();
    w.add_dense("small", &[3], DType::U8, &[1, 2, 3], &source_options).unwrap();
    let file = w.finish().unwrap().0;
    let component = Reader::new(&file[..], &Options::default())
        .unwrap()
        .object("w")
        .unwrap()
        .model()
        .components["data"]
        .clone();
    let table = ztensor_io::codec::parse_seek_table(
        &file[component.offset as usize..(component.offset + component.length) as usize],
    )
    .unwrap();
    assert_eq!(table.len(), 10);
    for (compression, chunk) in
        [(Compression::Zstd(1), 2048), (Compression::Raw, 2048), (Compression::Zstd(1), 4096)]
    {
        let copy = CopyOptions {
            compression: Some(compression),
            digest: DigestChoice::Set(DigestAlgorithm::Sha256),
            chunk_size: Some(chunk),
            drop_attributes: false,
            raw_if_not_smaller: false,
        };
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let mut sequential = Writer::new(Vec::new(), Version::V1_2).unwrap();
        ztensor_io::copy_all(&reader, &mut sequential, &copy).unwrap();
        let expected = sequential.finish().unwrap().0;
        for threads in [1, 2, 4] {
            let mut parallel = Writer::new(Vec::new(), Version::V1_2).unwrap();
            repack(&reader, &mut parallel, &copy, &ParOptions::with_threads(threads), &()).unwrap();
            assert_eq!(parallel.finish().unwrap().0, expected, "{compression:?} {chunk} {threads}");
        }
    }
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(1)),
        digest: DigestChoice::Set(DigestAlgorithm::Sha256),
        chunk_size: Some(2048),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    // A damaged byte in a middle frame, or in the table, is a digest mismatch (or a frame that
    // no longer decodes), never a repacked file.
    let table_at = component.offset + component.length - 20;
    let middle = component.offset + table[5].offset + table[5].compressed / 2;
    for at in [middle, table_at] {
        let mut damaged = file.clone();
        damaged[at as usize] ^= 0x10;
        let reader = Reader::new(&damaged[..], &Options::default()).unwrap();
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let err = repack(&reader, &mut out, &copy, &ParOptions::with_threads(2), &()).unwrap_err();
        assert!(
            matches!(
                err.rule(),
                Some(
                    ztensor_format::ErrorKind::DigestMismatch
                        | ztensor_format::ErrorKind::DecodeFailed
                        | ztensor_format::ErrorKind::DecodedSizeMismatch
                )
            ),
            "byte {at}: {err}"
        );
    }
    // A frame whose bytes change after the first read: read once, checked, and used as read.
    let at = middle;
    let genuine = file[at as usize];
    for (first, later, ok) in [(genuine, genuine ^ 0x10, true), (genuine ^ 0x10, genuine, false)] {
        let source = Changing { bytes: &file, at, first, later, reads: AtomicU64::new(0) };
        let reader = Reader::new(source, &Options::default()).unwrap();
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let done = repack(&reader, &mut out, &copy, &ParOptions::with_threads(2), &());
        assert_eq!(reader.source().reads.load(Ordering::SeqCst), 1, "read once");
        assert_eq!(done.is_ok(), ok, "{done:?}");
        if ok {
            let out = out.finish().unwrap().0;
            let back = Reader::new(&out[..], &Options::default()).unwrap();
            assert_eq!(back.read_object_verified("w").unwrap().components["data"].bytes, data);
        }
    }
}

#[test]
fn digests_combined_from_pieces_equal_the_sequential_ones() {
    // CRC-32C and BLAKE3 of a component of many pieces are combined from shares the workers
    // compute (BLAKE3: raw pieces of a power-of-two size); the bytes equal copy_all's.
    let data: Vec<u8> = (0..50_000u32).map(|i| (i.wrapping_mul(40_503) >> 7) as u8).collect();
    for source_digest in [DigestAlgorithm::Blake3, DigestAlgorithm::Crc32c] {
        let source_options = WriteOptions {
            compression: Compression::Raw,
            digest: Some(source_digest.clone()),
            chunk_size: Some(4096),
            raw_if_not_smaller: false,
        };
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        w.add_dense("w", &[50_000], DType::U8, &data, &source_options).unwrap();
        let file = w.finish().unwrap().0;
        for (compression, digest, chunk) in [
            (Compression::Raw, DigestAlgorithm::Blake3, 4096),
            (Compression::Raw, DigestAlgorithm::Blake3, 1024),
            (Compression::Raw, DigestAlgorithm::Blake3, 3000),
            (Compression::Raw, DigestAlgorithm::Crc32c, 3000),
            (Compression::Zstd(1), DigestAlgorithm::Crc32c, 4096),
            (Compression::Zstd(1), DigestAlgorithm::Blake3, 4096),
        ] {
            let copy = CopyOptions {
                compression: Some(compression),
                digest: DigestChoice::Set(digest.clone()),
                chunk_size: Some(chunk),
                drop_attributes: false,
                raw_if_not_smaller: false,
            };
            let reader = Reader::new(&file[..], &Options::default()).unwrap();
            let mut sequential = Writer::new(Vec::new(), Version::V1_2).unwrap();
            ztensor_io::copy_all(&reader, &mut sequential, &copy).unwrap();
            let expected = sequential.finish().unwrap().0;
            for threads in [1, 3] {
                let mut parallel = Writer::new(Vec::new(), Version::V1_2).unwrap();
                repack(&reader, &mut parallel, &copy, &ParOptions::with_threads(threads), &())
                    .unwrap();
                let what = format!("{source_digest:?} -> {compression:?} {digest:?} {chunk}");
                assert_eq!(parallel.finish().unwrap().0, expected, "{what}, {threads} threads");
            }
        }
        // A damaged source byte fails its combined source digest.
        let offset = Reader::new(&file[..], &Options::default())
            .unwrap()
            .object("w")
            .unwrap()
            .model()
            .components["data"]
            .offset;
        let mut damaged = file.clone();
        damaged[offset as usize + 30_000] ^= 1;
        let reader = Reader::new(&damaged[..], &Options::default()).unwrap();
        // Re-encoded (not a copy of the stored bytes), so the source digest is checked.
        let copy = CopyOptions {
            compression: Some(Compression::Zstd(1)),
            digest: DigestChoice::Set(DigestAlgorithm::Sha256),
            chunk_size: Some(4096),
            drop_attributes: false,
            raw_if_not_smaller: false,
        };
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let err = repack(&reader, &mut out, &copy, &ParOptions::with_threads(2), &()).unwrap_err();
        assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DigestMismatch), "{err}");
    }
}

#[test]
fn verify_source_reads_any_source_and_names_what_is_damaged() {
    // A zTensor reader as a generic source: the damaged object, and only it, fails.
    let file = big_file(4096);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let verdicts = ztensor_par::verify_source(&reader, &ParOptions::with_threads(2), &()).unwrap();
    assert_eq!(verdicts.len(), 6);
    assert!(verdicts.iter().all(Result::is_ok), "{verdicts:?}");
    let mut damaged = file.clone();
    let c = reader.object("t2").unwrap().model().components["data"].clone();
    damaged[c.offset as usize + 20] ^= 0x55;
    let reader = Reader::new(&damaged[..], &Options::default()).unwrap();
    let verdicts = ztensor_par::verify_source(&reader, &ParOptions::with_threads(2), &()).unwrap();
    let name = |i: usize| ztensor_io::TensorSource::name(&reader, i).unwrap().into_owned();
    let bad: Vec<String> =
        verdicts.iter().enumerate().filter(|(_, r)| r.is_err()).map(|(i, _)| name(i)).collect();
    assert_eq!(bad, ["t2"]);
    // The same verdicts as the zTensor-specific verify_all.
    let specific = verify_all(&reader, &ParOptions::with_threads(2), &()).unwrap();
    let general: Vec<(String, bool)> =
        verdicts.iter().enumerate().map(|(i, r)| (name(i), r.is_ok())).collect();
    let specific: Vec<(String, bool)> =
        specific.iter().map(|(n, r)| ((*n).to_owned(), r.is_ok())).collect();
    assert_eq!(general, specific);
}

/// A source that records what it is told it will need and the reads made of it.
struct Recording<'a> {
    bytes: &'a [u8],
    needed: std::sync::Mutex<Vec<Vec<std::ops::Range<u64>>>>,
    reads: std::sync::Mutex<Vec<std::ops::Range<u64>>>,
    /// Whether it offers its bytes as one slice (as a map does).
    in_memory: bool,
}

impl<'a> Recording<'a> {
    fn new(bytes: &'a [u8], in_memory: bool) -> Recording<'a> {
        Recording { bytes, needed: Default::default(), reads: Default::default(), in_memory }
    }
}

impl ReadAt for Recording<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.reads.lock().unwrap().push(offset..offset + buf.len() as u64);
        self.bytes.read_exact_at(offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        self.in_memory.then_some(self.bytes)
    }
    fn will_need(&self, ranges: &[std::ops::Range<u64>]) {
        self.needed.lock().unwrap().push(ranges.to_vec());
    }
}

#[test]
fn the_engine_says_what_it_will_read_in_the_order_it_reads_it() {
    // Written "b", "a", "c" (zstd); read in the file's object order ("a", "b", "c"), which is
    // not the order of their bytes.
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let raw = WriteOptions { compression: Compression::Raw, ..WriteOptions::default() };
    let zstd = WriteOptions { compression: Compression::Zstd(1), ..WriteOptions::default() };
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    w.add_dense("b", &[300_000], DType::U8, &data, &raw).unwrap();
    w.add_dense("a", &[300_000], DType::U8, &data, &raw).unwrap();
    w.add_dense("c", &[300_000], DType::U8, &data, &zstd).unwrap();
    let file = w.finish().unwrap().0;
    let source = Recording::new(&file, false);
    let reader = Reader::new(&source as &dyn ReadAt, &Options::default()).unwrap();
    let stored: Vec<std::ops::Range<u64>> = reader
        .objects()
        .map(|o| {
            let c = &o.model().components["data"];
            c.offset..c.offset + c.length
        })
        .collect();
    assert!(stored[0].start > stored[1].start, "not out of order: {stored:?}");
    source.reads.lock().unwrap().clear();
    for compression in [None, Some(Compression::Zstd(3))] {
        source.needed.lock().unwrap().clear();
        let copy = CopyOptions { compression, ..CopyOptions::default() };
        let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
        repack(&reader, &mut out, &copy, &ParOptions::with_threads(1), &()).unwrap();
        // Told once, before reading, of each component's stored bytes in the order read.
        assert_eq!(
            *source.needed.lock().unwrap(),
            std::slice::from_ref(&stored),
            "{compression:?}"
        );
        // And every byte read of them was among what it was told.
        let reads = std::mem::take(&mut *source.reads.lock().unwrap());
        for r in reads.iter().filter(|r| stored.iter().any(|s| s.start < r.end && r.start < s.end))
        {
            assert!(stored.iter().any(|s| s.start <= r.start && r.end <= s.end), "{r:?}");
        }
    }
    // A source in memory is read in place: told nothing.
    let mapped = Recording::new(&file, true);
    let reader = Reader::new(&mapped as &dyn ReadAt, &Options::default()).unwrap();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    repack(&reader, &mut out, &CopyOptions::default(), &ParOptions::with_threads(1), &()).unwrap();
    assert!(mapped.needed.lock().unwrap().is_empty());
}
