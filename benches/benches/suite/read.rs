//! Reading rows: owned buffers, zero copy, opening, decoding.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use rayon::prelude::*;
use ztensor_format::Options;
use ztensor_io::Reader;

use super::kit::*;

/// Every object's data of the zTensor file at `path`, read (decoded) one after the other on
/// this thread into owned buffers.
pub(super) fn each_owned(path: &Path) -> Vec<Vec<u8>> {
    let reader = Reader::open(path).expect("open");
    reader
        .manifest()
        .objects()
        .map(|o| {
            reader.component(o.name(), "data").and_then(|c| c.decoded()).expect("read").into_owned()
        })
        .collect()
}

pub(super) fn read_owned_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + copy", "pread() into fresh buffers");
    let ranges = raw_ranges(b);
    let [ours, peer, ceiling] = in_turn(
        b.run,
        [&mut || time_keep(|| each_owned(&b.path("raw.zt"))), &mut || st_copy(b), &mut || {
            pread_fresh(b, &ranges)
        }],
    );
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

pub(super) fn st_copy(b: &Bench) -> Duration {
    time_keep(|| {
        let map = map(&b.path("st.safetensors"));
        let st = safetensors::SafeTensors::deserialize(&map).expect("deserialize");
        let all: Vec<Vec<u8>> = st.iter().map(|(_, view)| view.data().to_vec()).collect();
        all
    })
}

/// Where each tensor's bytes lie in the raw file: (offset, length).
pub(super) fn raw_ranges(b: &Bench) -> Vec<(u64, usize)> {
    let reader = Reader::open(b.path("raw.zt")).expect("open");
    reader
        .manifest()
        .objects()
        .map(|o| {
            let c = &o.object().components["data"];
            (c.offset, c.length as usize)
        })
        .collect()
}

/// The ceiling of reading to owned buffers: `pread()` of each of `ranges` into a fresh buffer.
pub(super) fn pread_fresh(b: &Bench, ranges: &[(u64, usize)]) -> Duration {
    time_keep(|| {
        let file = File::open(b.path("raw.zt")).expect("open");
        let all: Vec<Vec<u8>> = ranges
            .iter()
            .map(|&(offset, len)| {
                let mut buf = vec![0u8; len];
                std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, offset).expect("pread");
                buf
            })
            .collect();
        all
    })
}

pub(super) fn read_owned_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + copy", "pread() into fresh buffers, 1 thread");
    let ranges = raw_ranges(b);
    let [ours, peer, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let reader = Reader::open(b.path("raw.zt")).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || st_copy(b),
            &mut || pread_fresh(b, &ranges),
        ],
    );
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

pub(super) fn zero_copy(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("safetensors deserialize (mmap) + touch", "mmap + touch every page");
    let mut ours = || {
        time(|| {
            // SAFETY: the benchmark owns the file and does not change it while mapped.
            let reader =
                unsafe { Reader::open_mmap(b.path("raw.zt"), &Options::default()) }.expect("open");
            let mut sum = 0;
            for o in reader.manifest().objects() {
                let data =
                    reader.component(o.name(), "data").and_then(|c| c.decoded()).expect("view");
                assert!(matches!(data, std::borrow::Cow::Borrowed(_)), "zero-copy");
                sum += touch(&data);
            }
            std::hint::black_box(sum);
        })
    };
    let mut peer = || {
        time(|| {
            let map = map(&b.path("st.safetensors"));
            let st = safetensors::SafeTensors::deserialize(&map).expect("deserialize");
            let sum: u64 = st.iter().map(|(_, v)| touch(v.data())).sum();
            std::hint::black_box(sum);
        })
    };
    let mut ceiling = || {
        time(|| {
            let map = map(&b.path("raw.zt"));
            std::hint::black_box(touch(&map));
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

pub(super) fn open_index(b: &Bench, r: &mut Row, zt: &str, st: &str, count: usize) {
    r.bytes = 0;
    (r.peer_name, r.ceiling_name) =
        ("safetensors mmap + read_metadata", "pread() of the manifest bytes");
    let min = Duration::from_millis(200);
    r.ours.push(time_repeated(min, || {
        let reader = Reader::open(b.path(zt)).expect("open");
        assert_eq!(reader.manifest().len(), count);
    }));
    r.peer.push(time_repeated(min, || {
        let map = map(&b.path(st));
        let (_, metadata) = safetensors::SafeTensors::read_metadata(&map).expect("metadata");
        assert_eq!(metadata.tensors().len(), count);
    }));
    let reader = Reader::open(b.path(zt)).expect("open");
    let location = reader.manifest().location();
    r.ceiling.push(time_repeated(min, || {
        let file = File::open(b.path(zt)).expect("open");
        let mut buf = vec![0u8; location.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, location.offset).expect("pread");
        std::hint::black_box(buf);
    }));
}

pub(super) fn open_index_large(b: &Bench, r: &mut Row) {
    open_index(b, r, "raw.zt", "st.safetensors", b.tensors.len());
}

pub(super) fn open_index_tenth(b: &Bench, r: &mut Row) {
    open_index(b, r, "tenth.zt", "tenth.safetensors", b.small.len() / 10);
}

pub(super) fn open_index_small(b: &Bench, r: &mut Row) {
    open_index(b, r, "small.zt", "small.safetensors", b.small.len());
}

/// The compressed frames of the zstd file, tensor by tensor (each frame with its decoded size),
/// for the decode kernels.
pub(super) fn frames(b: &Bench) -> Vec<Vec<(Vec<u8>, u64)>> {
    let reader = Reader::open(b.path("zstd.zt")).expect("open");
    let mut out = Vec::new();
    for o in reader.manifest().objects() {
        let stored = reader.component(o.name(), "data").and_then(|c| c.stored()).expect("stored");
        out.push(match ztensor_io::codec::parse_seek_table(&stored) {
            Some(table) => table
                .iter()
                .map(|f| {
                    let (s, e) = (f.offset as usize, (f.offset + f.compressed) as usize);
                    (stored[s..e].to_vec(), f.decompressed)
                })
                .collect(),
            None => vec![(stored.to_vec(), o.decoded_len("data").expect("len"))],
        });
    }
    out
}

/// The machine's own zstd decode: every frame, held in memory, decoded in one call into its
/// place in a fresh buffer per tensor (what a reader hands out, allocated as ours are), the
/// frames of all tensors in one list on the current pool's threads when `parallel`. Decoding
/// each frame into a buffer of its own instead would measure the allocator's reuse of the
/// previous run's frames, which no single read of a checkpoint has.
pub(super) fn decode_kernel(tensors: &[Vec<(Vec<u8>, u64)>], parallel: bool) -> Vec<Vec<u8>> {
    let mut outs: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| ztensor_io::try_zeroed(t.iter().map(|f| f.1).sum(), "a tensor").expect("memory"))
        .collect();
    let mut jobs = Vec::new();
    for (t, out) in tensors.iter().zip(&mut outs) {
        let mut rest = &mut out[..];
        for (frame, len) in t {
            let (slot, tail) = rest.split_at_mut(*len as usize);
            jobs.push((&frame[..], slot));
            rest = tail;
        }
    }
    let decode = |(frame, slot): (&[u8], &mut [u8])| {
        ztensor_io::codec::zstd_decode_into(frame, slot).expect("decode")
    };
    if parallel {
        jobs.into_par_iter().for_each(decode);
    } else {
        jobs.into_iter().for_each(decode);
    }
    outs
}

pub(super) fn decode_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, 1 thread, in memory";
    let frames = frames(b);
    let [ours, ceiling] = in_turn(
        b.run,
        [&mut || time_keep(|| each_owned(&b.path("zstd.zt"))), &mut || {
            time_keep(|| decode_kernel(&frames, false))
        }],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

pub(super) fn decode_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, all cores, in memory";
    let frames = frames(b);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let [ours, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let reader = Reader::open(b.path("zstd.zt")).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || time_keep(|| pool.install(|| decode_kernel(&frames, true))),
        ],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// As [`decode_all`], the file read through a map (as the Python package reads): the
/// compressed bytes are decoded from where they lie instead of copied out of the page cache
/// first, which the in-memory kernel does not pay either.
pub(super) fn decode_all_mapped(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd decode kernel, all cores, in memory";
    let frames = frames(b);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let [ours, ceiling] = in_turn(
        b.run,
        [
            &mut || {
                time_keep(|| {
                    let file = File::open(b.path("zstd.zt")).expect("open");
                    // SAFETY: the benchmark's file is not changed while it is mapped.
                    let map = unsafe { ztensor_io::Mapped::map(&file) }.expect("map");
                    let reader = Reader::new(map, &Options::default()).expect("open");
                    ztensor_par::load_all(&reader, &b.all()).expect("load")
                })
            },
            &mut || time_keep(|| pool.install(|| decode_kernel(&frames, true))),
        ],
    );
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}
