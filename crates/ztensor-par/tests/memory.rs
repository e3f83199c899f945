//! What verifying and dumping take in memory, counted by a global allocator: a dense tensor
//! streams through in pieces, so checking one of 256 MiB holds a few MiB, not the tensor.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ztensor_format::{DType, DigestAlgorithm, Options, Version};
use ztensor_io::{Reader, WriteOptions, Writer};
use ztensor_par::{ParOptions, verify_all};

/// The system allocator, counting the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Every byte ever allocated.
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Held by each test for its whole run: the counters are the process's, so tests that run
/// beside each other would count each other's bytes.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The most bytes live while `f` runs, above what was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

const SIZE: usize = 256 << 20;

fn file(dtype: DType, fill: u8, digest: DigestAlgorithm) -> Vec<u8> {
    let data = vec![fill; SIZE];
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    let options = WriteOptions::zstd(1).with_digest(digest);
    w.add_dense("big", &[SIZE as u64], dtype, &data, &options).unwrap();
    w.finish().unwrap().0
}

#[test]
fn verifying_a_large_tensor_holds_pieces_not_the_tensor() {
    let _serial = serial();
    let par = ParOptions::with_threads(2);
    for digest in [DigestAlgorithm::Sha256, DigestAlgorithm::Blake3, DigestAlgorithm::Crc32c] {
        let file = file(DType::U8, 7, digest.clone());
        let reader = Reader::new(&file[..], &Options::default()).unwrap();
        let (verdicts, peak) = peak_during(|| verify_all(&reader, &par, &()).unwrap());
        assert!(verdicts.iter().all(|(_, v)| v.is_ok()), "{verdicts:?}");
        // Two threads, a piece or two each and the zstd window: far below the tensor.
        assert!(peak < 48 << 20, "{digest:?}: {} MiB", peak >> 20);
    }
}

#[test]
fn dumping_a_large_tensor_holds_pieces_not_the_tensor() {
    let _serial = serial();
    let file = file(DType::U8, 7, DigestAlgorithm::Blake3);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let (dump, peak) = peak_during(|| ztensor_dump::accepted(&reader));
    let big = &dump["objects"][0]["components"]["data"];
    assert_eq!(big["decoded_length"], SIZE as u64, "{dump}");
    // The SHA-256 of 256 MiB of 7s, as the whole-buffer hash gives it.
    let whole = ztensor_io::codec::sha256_hex(&vec![7u8; SIZE]);
    assert_eq!(big["sha256"], whole.as_str());
    assert!(peak < 48 << 20, "{} MiB", peak >> 20);
}

#[test]
fn streamed_checks_still_find_every_fault() {
    let _serial = serial();
    let par = ParOptions::with_threads(2);
    // A digest that differs: the last stored byte of the digest value flipped.
    let mut bad = file(DType::U8, 7, DigestAlgorithm::Sha256);
    let reader = Reader::new(&bad[..], &Options::default()).unwrap();
    let c = reader.object("big").unwrap().component("data").unwrap();
    let at = usize::try_from(c.offset()).unwrap();
    bad[at + 5] ^= 0x01;
    let reader = Reader::new(&bad[..], &Options::default()).unwrap();
    let verdicts = verify_all(&reader, &par, &()).unwrap();
    let e = verdicts[0].1.as_ref().unwrap_err();
    assert!(
        matches!(
            e.rule(),
            Some(
                ztensor_format::ErrorKind::DigestMismatch | ztensor_format::ErrorKind::DecodeFailed
            )
        ),
        "{e}"
    );
    // A raw bool tensor holding a byte other than 0 or 1 past its first piece.
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    w.add_dense("flags", &[SIZE as u64], DType::Bool, &vec![1; SIZE], &WriteOptions::raw())
        .unwrap();
    let mut file = w.finish().unwrap().0;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let at = usize::try_from(reader.object("flags").unwrap().component("data").unwrap().offset())
        .unwrap();
    file[at + (9 << 20)] = 2;
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let (verdicts, peak) = peak_during(|| verify_all(&reader, &par, &()).unwrap());
    let e = verdicts[0].1.as_ref().unwrap_err();
    assert_eq!(e.rule(), Some(ztensor_format::ErrorKind::BoolInvalid), "{e}");
    assert!(peak < 48 << 20, "{} MiB", peak >> 20);
}

/// A file of `n` empty dense objects named `t0000000`, `t0000001`, …: what a checkpoint of
/// many small tensors (an MoE model's experts) costs per object, with nothing else to hold.
fn many_objects(n: usize) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
    for i in 0..n {
        w.add_dense(&format!("t{i:07}"), &[0], DType::F32, &[], &WriteOptions::raw()).unwrap();
    }
    w.finish().unwrap().0
}

#[test]
fn an_open_manifest_costs_a_few_hundred_bytes_per_object() {
    let _serial = serial();
    const N: usize = 100_000;
    let file = many_objects(N);
    let (reader, peak) = peak_during(|| Reader::new(&file[..], &Options::default()).unwrap());
    let base = LIVE.load(Ordering::Relaxed);
    drop(reader);
    let resident = base - LIVE.load(Ordering::Relaxed);
    eprintln!("open: {} B/object resident, {} B/object at the peak", resident / N, peak / N);
    // Object, its one component inline, shape, what validation keeps and the name index: at
    // most 256 bytes beside the name (8 bytes here), the manifest's budget per object. (A
    // kilobyte before components were held inline; 435 bytes before objects kept their rare
    // fields out of line and validation stopped storing what the manifest says.)
    const NAME: usize = "t0000000".len();
    assert!(resident / N <= 256 + NAME, "{} bytes per object", resident / N);
    assert!(peak / N <= 320, "{} bytes per object at the peak", peak / N);
}

#[test]
fn repacking_many_objects_plans_and_encodes_without_a_tree_per_object() {
    let _serial = serial();
    const N: usize = 100_000;
    let file = many_objects(N);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let par = ParOptions::with_threads(2);
    let (out, peak) = peak_during(|| {
        let mut w = Writer::new(Vec::new(), Version::V1_2).unwrap();
        ztensor_par::repack(&reader, &mut w, &Default::default(), &par, &()).unwrap();
        w.finish().unwrap().0
    });
    eprintln!("repack: {} B/object at the peak beside the open input", peak / N);
    // The same bytes as the input: an unchanged repack of a file this crate wrote.
    assert!(out == file, "repack changed the file");
    // The output manifest kept as its encoding (about 80 bytes an object, and the same again
    // for the output file in memory here), its index, and a window of the engine's per-item
    // halves. Before, the writer kept an `Object` each and validated them all at the end, the
    // engine held the halves of every item, each item planned two hash chain slots and the
    // manifest was encoded through a value tree of every object: about 1.9 KB per object.
    assert!(peak / N <= 320, "{} bytes per object at the peak", peak / N);
}

#[test]
fn streaming_small_tensors_sizes_its_buffer_to_each() {
    let _serial = serial();
    const N: usize = 10_000;
    let file = many_objects(N);
    let reader = Reader::new(&file[..], &Options::default()).unwrap();
    let before = ALLOCATED.load(Ordering::Relaxed);
    let mut pieces = 0;
    for i in 0..N {
        ztensor_io::TensorSource::read_pieces(&reader, i, 4 << 20, &mut |_, _| {
            pieces += 1;
            Ok(())
        })
        .unwrap();
    }
    let per_object = (ALLOCATED.load(Ordering::Relaxed) - before) / N;
    // Empty tensors: no piece to hand over, and no 4 MiB buffer zeroed for each (which made
    // exporting a million of them take 35 s instead of 3).
    assert_eq!(pieces, 0);
    assert!(per_object < 4096, "{per_object} bytes allocated per object");
}
