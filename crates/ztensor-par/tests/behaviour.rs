//! Budget, failures, and the parallel read side.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{Compression, CopyOptions, DigestChoice, ReadAt, Reader, WriteOptions, Writer};
use ztensor_par::{
    ParOptions, Progress, Tensor, decoded_parallel, load_all, repack, repack_file, verify_all,
    write_tensors,
};

pub(crate) fn big_file(chunk: u64) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let options = WriteOptions {
        compression: Compression::Zstd(1),
        digest: Some(DigestAlgorithm::Crc32c),
        chunk_size: Some(chunk),
        raw_if_not_smaller: false,
    };
    for i in 0..6u64 {
        let data: Vec<u8> = (0..50_000u64).map(|j| ((j * (i + 3)) % 97) as u8).collect();
        w.add_dense(&format!("t{i}"), &[50_000], DType::U8, &data, &options).unwrap();
    }
    w.finish().unwrap().0
}

#[derive(Default)]
struct Counts {
    input: AtomicU64,
    output: AtomicU64,
    done: AtomicU64,
    objects: AtomicU64,
}

impl Progress for Counts {
    fn bytes_in(&self, n: u64) {
        self.input.fetch_add(n, Ordering::SeqCst);
    }
    fn bytes_out(&self, n: u64) {
        self.output.fetch_add(n, Ordering::Relaxed);
    }
    fn bytes_done(&self, n: u64) {
        // Work is done only after its input was read.
        let done = self.done.fetch_add(n, Ordering::SeqCst) + n;
        assert!(done <= self.input.load(Ordering::SeqCst), "done {done} before it was read");
    }
    fn object_done(&self, _: &str) {
        self.objects.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn memory_stays_within_the_budget_and_progress_adds_up() {
    let file = big_file(4096);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let copy = CopyOptions {
        compression: Some(Compression::Zstd(3)),
        digest: DigestChoice::Set(DigestAlgorithm::Sha256),
        chunk_size: Some(8192),
        drop_attributes: false,
        raw_if_not_smaller: false,
    };
    // Each piece costs 8 KiB of input plus zstd's bound for it (a little more than 8 KiB).
    let budget = 64 << 10;
    let counts = Counts::default();
    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let stats = repack(
        &reader,
        &mut out,
        &copy,
        &ParOptions { threads: 2, memory_budget: budget },
        &counts,
    )
    .unwrap();
    assert!(stats.peak_in_flight <= budget, "peak {} > budget {budget}", stats.peak_in_flight);
    assert!(stats.peak_in_flight > 0);
    assert_eq!(counts.input.load(Ordering::Relaxed), 6 * 50_000);
    assert_eq!(counts.done.load(Ordering::Relaxed), 6 * 50_000);
    assert_eq!(counts.objects.load(Ordering::Relaxed), 6);
    let (bytes, _) = out.finish().unwrap();
    let stored: u64 = Reader::new(&bytes[..], &Options::default())
        .unwrap()
        .manifest()
        .objects()
        .map(|o| o.object().components["data"].length)
        .sum();
    assert_eq!(counts.output.load(Ordering::Relaxed), stored);
}

/// A source whose reads fail inside one byte range (the middle of the data area).
struct Failing<'a> {
    bytes: &'a [u8],
    bad: std::ops::Range<u64>,
}

impl ReadAt for Failing<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        if offset < self.bad.end && offset + buf.len() as u64 > self.bad.start {
            return Err(std::io::Error::other("the disk went away"));
        }
        self.bytes.read_exact_at(offset, buf)
    }
}

#[test]
fn a_failing_source_stops_the_run_without_hanging() {
    let file = big_file(4096);
    let copy = CopyOptions { compression: Some(Compression::Zstd(1)), ..CopyOptions::default() };
    let mut raw = Writer::new(Vec::new(), Version::V1_2).unwrap();
    ztensor_io::copy_all(
        &Reader::new(&file[..], &Options::default()).unwrap(),
        &mut raw,
        &CopyOptions { compression: Some(Compression::Raw), ..CopyOptions::default() },
    )
    .unwrap();
    let raw = raw.finish().unwrap().0;
    for source in [&file, &raw] {
        // Fail halfway through the data area (the manifest at the end stays readable).
        let half = source.len() as u64 / 2;
        let failing = Failing { bytes: source, bad: half..half + 100 };
        let reader = Reader::new(failing, &Options::default()).unwrap();
        for threads in [1, 4] {
            let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
            let err = repack(
                &reader,
                &mut out,
                &copy,
                &ParOptions { threads, memory_budget: 16 << 10 },
                &(),
            )
            .unwrap_err();
            // A source that cannot be read is an I/O failure, never a rule of the format.
            assert!(matches!(err.kind(), ztensor_io::ErrorKind::Io { .. }), "{err}");
            assert_eq!(err.rule(), None, "{err}");
            assert!(err.to_string().contains("disk went away"), "{err}");
        }
    }
}

/// A sink that fails after `room` bytes, like a full disk.
struct Full {
    room: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.room {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device",
            ));
        }
        self.room -= buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_stops_the_run_without_hanging() {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 13) as u8).collect();
    let tensors: Vec<Tensor<'_>> =
        (0..4).map(|_| Tensor::new("x", &[200_000], DType::U8, &data)).collect::<Vec<_>>();
    let tensors: Vec<Tensor<'_>> = tensors
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t.name = ["a", "b", "c", "d"][i];
            t
        })
        .collect();
    let mut w = Writer::new(Full { room: 300_000 }, Version::V1_2).unwrap();
    let err = write_tensors(
        &tensors,
        &mut w,
        &WriteOptions::raw(),
        &ParOptions { threads: 3, memory_budget: 64 << 10 },
        &(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no space left"), "{err}");
}

#[test]
fn a_failed_repack_leaves_no_target_file() {
    let dir = ztensor_testkit::scratch("par-fail");
    let input = dir.join("in.zt");
    let output = dir.join("out.zt");
    // A file whose second tensor cannot be decoded: its zstd stream is cut short.
    let mut file = big_file(1 << 20);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let c = reader.object("t1").unwrap().model().components["data"].clone();
    drop(reader);
    let at = (c.offset + c.length / 2) as usize;
    file[at..at + 8].copy_from_slice(&[0xff; 8]);
    std::fs::write(&input, &file).unwrap();
    let copy = CopyOptions { compression: Some(Compression::Zstd(1)), ..CopyOptions::default() };
    let err = repack_file(&input, &output, Version::V1_2, &copy, &ParOptions::with_threads(2), &())
        .unwrap_err();
    assert!(err.rule().is_some(), "{err}");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["in.zt"], "no output and no temporary file");
}

#[test]
fn the_parallel_read_side_agrees_with_the_sequential_one() {
    let file = big_file(4096);
    let reader = Reader::new(&file[..], &Options::strict()).unwrap();
    for threads in [1, 2, 5] {
        let par = ParOptions::with_threads(threads);
        let loaded = load_all(&reader, &par).unwrap();
        for data in &loaded {
            assert_eq!(data, &reader.read_object(&data.name).unwrap().into_owned());
        }
        let pool = rayon_pool(threads);
        pool.install(|| {
            assert_eq!(
                decoded_parallel(reader.component("t3", "data").unwrap()).unwrap(),
                reader.component("t3", "data").and_then(|c| c.decoded()).unwrap().as_ref()
            );
        });
        let verdicts = verify_all(&reader, &par, &()).unwrap();
        assert_eq!(verdicts.len(), 6);
        assert!(verdicts.iter().all(|(_, r)| r.is_ok()));
    }
    // A damaged frame is found by both sides.
    let mut damaged = file.clone();
    let c = reader.object("t2").unwrap().model().components["data"].clone();
    damaged[c.offset as usize + 20] ^= 0x55;
    let reader = Reader::new(&damaged[..], &Options::default()).unwrap();
    let verdicts = verify_all(&reader, &ParOptions::with_threads(2), &()).unwrap();
    let bad: Vec<&str> = verdicts.iter().filter(|(_, r)| r.is_err()).map(|(n, _)| *n).collect();
    assert_eq!(bad, ["t2"]);
    assert!(load_all(&reader, &ParOptions::with_threads(2)).is_err());
}

fn rayon_pool(threads: usize) -> rayon_pool::ThreadPool {
    rayon_pool::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

use rayon as rayon_pool;

#[test]
fn re_encoding_never_launders_a_damaged_source() {
    for compression in [Compression::Raw, Compression::Zstd(1)] {
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let options = WriteOptions {
            compression,
            digest: Some(DigestAlgorithm::Sha256),
            chunk_size: Some(1024),
            raw_if_not_smaller: false,
        };
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        w.add_dense("w", &[10_000], DType::U8, &data, &options).unwrap();
        let mut file = w.finish().unwrap().0;
        let offset = Reader::new(&file[..], &Options::default())
            .unwrap()
            .object("w")
            .unwrap()
            .model()
            .components["data"]
            .offset;
        file[offset as usize + 3] ^= 1;
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let copy = CopyOptions {
            compression: Some(Compression::Zstd(3)),
            digest: DigestChoice::Set(DigestAlgorithm::Blake3),
            chunk_size: Some(2048),
            drop_attributes: false,
            raw_if_not_smaller: false,
        };
        let mut seq = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let seq_err = ztensor_io::copy_all(&reader, &mut seq, &copy).unwrap_err();
        let mut par = Writer::new(Vec::new(), Version::V1_2).unwrap();
        let par_err =
            repack(&reader, &mut par, &copy, &ParOptions::with_threads(2), &()).unwrap_err();
        // Raw damage is a digest mismatch; damaged zstd may fail its frame checksum first.
        assert!(
            matches!(
                seq_err.rule(),
                Some(
                    ztensor_format::ErrorKind::DigestMismatch
                        | ztensor_format::ErrorKind::DecodeFailed
                )
            ),
            "{seq_err}"
        );
        assert!(
            matches!(
                par_err.rule(),
                Some(
                    ztensor_format::ErrorKind::DigestMismatch
                        | ztensor_format::ErrorKind::DecodeFailed
                )
            ),
            "{par_err}"
        );
    }
}

#[test]
fn large_raw_components_are_read_in_parallel_pieces_alike() {
    // 9 MiB + 1 byte: three 4 MiB pieces, the last one short; and one below the threshold.
    let big: Vec<u8> =
        (0..(9u32 << 20) + 1).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("big", &[big.len() as u64], DType::U8, &big, &WriteOptions::raw()).unwrap();
    w.add_dense("small", &[1000], DType::U8, &big[..1000], &WriteOptions::raw()).unwrap();
    let file = w.finish().unwrap().0;
    fn check<S: ReadAt + Sync>(reader: &Reader<S>, big: &[u8]) {
        let pool = rayon_pool(3);
        pool.install(|| {
            assert_eq!(decoded_parallel(reader.component("big", "data").unwrap()).unwrap(), big)
        });
        let loaded = load_all(reader, &ParOptions::with_threads(2)).unwrap();
        let got = loaded.iter().find(|o| o.name == "big").unwrap();
        assert_eq!(got.components["data"].bytes.as_ref(), big);
    }
    check(&Reader::new(&file[..], &Options::default()).unwrap(), &big);
    // Through a source that cannot be borrowed from, read 1000 bytes at a time.
    let chunked = ztensor_io::Chunked::new(&file[..], 1000);
    check(&Reader::new(chunked, &Options::default()).unwrap(), &big);
}

/// Objects are added to the manifest when their digests arrive, after later objects' bytes may
/// already be written; a repeated name is still refused, with the sequential writer's rule,
/// whether the first object is already in the manifest or still waiting for its digest.
#[test]
fn a_repeated_name_is_refused_while_the_first_waits_for_its_digest() {
    let big = vec![7u8; 64 << 10];
    let small = [1u8; 64];
    let mut options = WriteOptions::raw().with_digest(DigestAlgorithm::Sha256);
    options.chunk_size = Some(4096);
    for second in [&big[..], &small[..]] {
        let shapes = [[big.len() as u64], [second.len() as u64]];
        let tensors = [
            Tensor::new("w", &shapes[0], DType::U8, &big),
            Tensor::new("w", &shapes[1], DType::U8, second),
        ];
        for threads in [1, 2] {
            let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
            let par = ParOptions { threads, ..ParOptions::default() };
            let err = write_tensors(&tensors, &mut out, &options, &par, &()).unwrap_err();
            assert_eq!(err.rule(), Some(ztensor_format::ErrorKind::DuplicateName), "{err}");
        }
    }
}

/// Progress hooks that panic at a given call.
struct Panicking {
    on: &'static str,
    after: u64,
    calls: AtomicU64,
}

impl Panicking {
    fn tick(&self, what: &str) {
        if what == self.on && self.calls.fetch_add(1, Ordering::SeqCst) == self.after {
            panic!("hook {what} panicked on purpose");
        }
    }
}

impl Progress for Panicking {
    fn bytes_in(&self, _: u64) {
        self.tick("bytes_in");
    }
    fn bytes_out(&self, _: u64) {
        self.tick("bytes_out");
    }
    fn object_done(&self, _: &str) {
        self.tick("object_done");
    }
}

#[test]
fn a_panicking_hook_propagates_instead_of_hanging() {
    let file: &'static [u8] = Box::leak(big_file(4096).into_boxed_slice());
    let copy = CopyOptions { compression: Some(Compression::Zstd(1)), ..CopyOptions::default() };
    for (on, after) in [("bytes_in", 3), ("bytes_out", 2), ("object_done", 1)] {
        for threads in [1, 3] {
            let copy = copy.clone();
            let (done, finished) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let outcome = std::panic::catch_unwind(|| {
                    let reader = Reader::new(file, &Options::default()).unwrap();
                    let mut out = Writer::new(Vec::new(), Version::V1_2).unwrap();
                    let hooks = Panicking { on, after, calls: AtomicU64::new(0) };
                    // A tight budget: the reading side waits for memory the writing side frees.
                    let par = ParOptions { threads, memory_budget: 8 << 10 };
                    repack(&reader, &mut out, &copy, &par, &hooks).map(drop)
                });
                let _ = done.send(outcome.is_err());
            });
            let panicked = finished
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{on} with {threads} threads: the run hung"));
            assert!(panicked, "{on} with {threads} threads: the panic did not reach the caller");
        }
    }
}
