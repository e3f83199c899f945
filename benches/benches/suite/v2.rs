//! zTensor 2 rows, against the reference implementation's writer and reader.

use std::fs::File;
use std::io::Write;

use rayon::prelude::*;
use ztensor_format::{DType, Options};
use ztensor_io::Reader;

use super::kit::*;
use super::read::{pread_fresh, raw_ranges};

pub(super) fn zt2_dtype(d: DType) -> zt2_reference::DType {
    match d {
        DType::BF16 => zt2_reference::DType::BF16,
        _ => zt2_reference::DType::F32,
    }
}

/// Canonical zTensor 2 from the checkpoint in memory: ours from a 1.2 file held in memory
/// (every tensor read through the tensor-source interface), the reference's `Writer` with
/// `canonical(true)` given each tensor's bytes.
pub(super) fn v2_write(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    // All three wait for the disk alike: each file is synced when written.
    (r.peer_name, r.ceiling_name) =
        ("reference 2.1.1 canonical Writer, then fsync", "write() of each tensor, then fsync");
    let held = std::fs::read(b.path("raw.zt")).expect("read");
    let source = Reader::new(&held[..], &Options::default()).expect("open");
    let out = b.path("out-v2.zt");
    // The writers themselves, each file synced when written: ours to a file as the peer's
    // (the CLI's sink adds a temporary file and a rename, which cost no bytes).
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = File::create(&out).expect("create");
            let mut sink = ztensor_v2::Zt2Sink::to_output(file);
            ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
            sink.into_inner().expect("a file").sync_all().expect("sync");
        })
    };
    // Its canonical writer takes tensors in name order.
    let mut sorted: Vec<&Weights> = b.tensors.iter().collect();
    sorted.sort_by(|x, y| x.name.as_bytes().cmp(y.name.as_bytes()));
    let mut peer = || {
        fresh(&out);
        time(|| {
            let mut w =
                zt2_reference::Writer::options().canonical(true).create(&out).expect("create");
            for t in &sorted {
                w.add(t.name.as_str(), t.shape.clone(), zt2_dtype(t.dtype), &t.data).expect("add");
            }
            w.finish().expect("finish");
            File::open(&out).and_then(|f| f.sync_all()).expect("sync");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
            f.sync_all().expect("sync");
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

/// A 1.2 file held in memory repacked to zTensor 2 with every part `zt.zstd-seekable/1` at
/// level 3 (1 MiB frames compressed on every core, an xxh3 digest per part): ours through the
/// zTensor 2 sink; the reference 2.1.1's writer given each tensor with that encoding; the
/// machine: the same frames compressed on every core and hashed while another thread writes
/// as many bytes.
pub(super) fn v2_repack_zstd(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) = (
        "reference 2.1.1 Writer, every part zt.zstd-seekable/1, then fsync",
        "zstd-3 (1 MiB frames) + xxh3 on all cores while the output is written and synced",
    );
    let held = std::fs::read(b.path("raw.zt")).expect("read");
    let source = Reader::new(&held[..], &Options::default()).expect("open");
    let out = b.path("out-v2-zstd.zt");
    let options = ztensor_v2::WriteOptions::default().zstd(Some(3));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ours = || {
        fresh(&out);
        time(|| {
            pool.install(|| {
                let file = File::create(&out).expect("create");
                let mut sink = ztensor_v2::Zt2Sink::to_output(file).with_options(options.clone());
                ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
                sink.into_inner().expect("a file").sync_all().expect("sync");
            });
        })
    };
    let mut peer = || {
        fresh(&out);
        time(|| {
            let mut w =
                zt2_reference::Writer::options().canonical(false).create(&out).expect("create");
            for t in &b.tensors {
                w.object(t.name.as_str(), |o| {
                    o.shape(t.shape.clone()).layout("dense").part("data", |p| {
                        p.dtype(zt2_dtype(t.dtype)).encoding("zt.zstd-seekable/1").bytes(&t.data)
                    })
                })
                .expect("object");
            }
            w.finish().expect("finish");
            File::open(&out).and_then(|f| f.sync_all()).expect("sync");
        })
    };
    // The machine's own limit: the same frames compressed and hashed on every core while
    // another thread writes as many bytes as they compress to (known from a run beforehand),
    // with nothing waiting on anything.
    let frames: Vec<&[u8]> = b.tensors.iter().flat_map(|t| t.data.chunks(1 << 20)).collect();
    let compressed: Vec<Vec<u8>> = pool
        .install(|| frames.par_iter().map(|f| zstd::bulk::compress(f, 3).expect("zstd")).collect());
    let sink = b.path("out-ceiling.bin");
    let mut ceiling = || {
        fresh(&sink);
        time(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut f = File::create(&sink).expect("create");
                    for c in &compressed {
                        f.write_all(c).expect("write");
                    }
                    f.sync_all().expect("sync");
                });
                pool.install(|| {
                    frames.par_iter().for_each(|f| {
                        let z = zstd::bulk::compress(f, 3).expect("zstd");
                        std::hint::black_box((z, xxhash_rust::xxh3::xxh3_64(f)));
                    });
                });
            });
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

/// Every tensor of a canonical zTensor 2 file into owned buffers, its xxh3 digest checked: ours
/// (`File::verified` on a mapped file), the reference (`Tensor::verify`, then the bytes of its
/// mapped file copied).
pub(super) fn v2_read(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) =
        ("reference 2.1.1 verify + bytes().into_owned()", "pread() into fresh buffers");
    let path = b.path("v2.zt");
    if !path.exists() {
        let held = std::fs::read(b.path("raw.zt")).expect("read");
        let source = Reader::new(&held[..], &Options::default()).expect("open");
        let mut sink = ztensor_v2::Zt2Sink::new(&path);
        ztensor_io::TensorSink::write_all(&mut sink, &source).expect("zTensor 2");
    }
    let ranges = raw_ranges(b);
    let mut ours = || {
        time_keep(|| {
            // Positional reads straight into the buffers, as the registry's `open` reads.
            let source = ztensor_io::FileSource::open(&path).expect("open");
            let file = ztensor_v2::File::open(source, ztensor_v2::MAX_MANIFEST).expect("open");
            let names: Vec<String> =
                file.manifest().expect("a model").objects.keys().cloned().collect();
            let all: Vec<Vec<u8>> =
                names.iter().map(|n| file.verified(n, "data").expect("read").0).collect();
            all
        })
    };
    let mut peer = || {
        time_keep(|| {
            let src = zt2_reference::Source::open(&path).expect("open");
            let all: Vec<Vec<u8>> = src
                .tensors()
                .map(|t| {
                    t.verify().expect("verify");
                    t.data().expect("data").bytes().expect("bytes").into_owned()
                })
                .collect();
            all
        })
    };
    let [ours, peer, ceiling] =
        in_turn(b.run, [&mut ours, &mut peer, &mut || pread_fresh(b, &ranges)]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}
