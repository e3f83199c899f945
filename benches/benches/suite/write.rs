//! Writing rows: raw, digested and compressed, against safetensors and the machine.

use std::fs::File;
use std::io::{BufWriter, Write};

use rayon::prelude::*;
use ztensor_benches::hash_while_writing;
use ztensor_format::{DigestAlgorithm, Version};
use ztensor_io::codec::Hasher;
use ztensor_io::{WriteOptions, Writer};
use ztensor_par::ParOptions;

use super::kit::*;

pub(super) fn write_raw(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    (r.peer_name, r.ceiling_name) = ("safetensors serialize_to_file", "write() of each tensor");
    let out = b.path("out.bin");
    let mut ours = || {
        fresh(&out);
        time(|| write_zt(&out, Version::V1_2, &b.tensors, &WriteOptions::raw()))
    };
    let mut peer = || {
        fresh(&out);
        time(|| {
            safetensors::serialize_to_file(st_views(&b.tensors), None, &out).expect("st");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
        })
    };
    let [ours, peer, ceiling] = in_turn(b.run, [&mut ours, &mut peer, &mut ceiling]);
    r.ours.push(ours);
    r.peer.push(peer);
    r.ceiling.push(ceiling);
}

pub(super) fn write_raw_sha256_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "max(write(), sha256 kernel / threads)";
    let out = b.path("out.bin");
    let options = WriteOptions::raw().with_digest(DigestAlgorithm::Sha256);
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            ztensor_par::write_tensors(&tensors_of(&b.tensors), &mut w, &options, &b.all(), &())
                .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let mut ceiling = || {
        fresh(&out);
        let write = time(|| {
            let mut f = File::create(&out).expect("create");
            for t in &b.tensors {
                f.write_all(&t.data).expect("write");
            }
        });
        let sha = time(|| {
            for t in &b.tensors {
                let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
                h.update(&t.data);
                std::hint::black_box(h.finish());
            }
        });
        write.max(sha / u32::try_from(b.cores).unwrap_or(1))
    };
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// The machine's own parallel SHA-256: the same bytes hashed in 4 MiB pieces on all cores
/// (ours) against one core (ceiling column), no I/O. Two "cores" of a shared VM rarely hash at
/// twice the speed of one; this row says how far from it they are.
pub(super) fn sha256_kernel(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "sha256 kernel, 1 core";
    let pieces = pieces(&b.tensors);
    let hash = |p: &&[u8]| {
        let mut h = Hasher::new(&DigestAlgorithm::Sha256).expect("sha256");
        h.update(p);
        std::hint::black_box(h.finish());
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ours = || time(|| pool.install(|| pieces.par_iter().for_each(hash)));
    let mut ceiling = || time(|| pieces.iter().for_each(hash));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

/// The machine doing both jobs of a digested raw write at once, with no format (see
/// [`hash_while_writing`]).
pub(super) fn sha256_and_write(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    let data: Vec<&[u8]> = b.tensors.iter().map(|t| t.data.as_slice()).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    r.ours.push(time(|| hash_while_writing(&data, &b.path("out.bin"), &pool)));
}

pub(super) fn write_zstd_one(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd-3 + sha256 kernel, 1 thread";
    let out = b.path("out.bin");
    // One compression thread, as `--threads 1` runs: the file is written by the calling thread
    // while the worker compresses the next piece.
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            let one = ParOptions { threads: 1, memory_budget: 512 << 20 };
            ztensor_par::write_tensors(
                &tensors_of(&b.tensors),
                &mut w,
                &zstd_sha256_options(),
                &one,
                &(),
            )
            .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let mut ceiling = || time(|| b.tensors.iter().for_each(|t| zstd_sha256(&t.data)));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}

pub(super) fn write_zstd_all(b: &Bench, r: &mut Row) {
    r.bytes = b.tensors.iter().map(|t| t.data.len() as u64).sum();
    r.ceiling_name = "zstd-3 + sha256 kernel, all cores, no I/O";
    let out = b.path("out.bin");
    let mut ours = || {
        fresh(&out);
        time(|| {
            let file = BufWriter::with_capacity(1 << 20, File::create(&out).expect("create"));
            let mut w = Writer::new(file, Version::V1_2).expect("writer");
            let options = zstd_sha256_options();
            ztensor_par::write_tensors(&tensors_of(&b.tensors), &mut w, &options, &b.all(), &())
                .expect("write");
            w.finish().expect("finish").0.flush().expect("flush");
        })
    };
    let pieces = pieces(&b.tensors);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(b.cores).build().expect("pool");
    let mut ceiling = || time(|| pool.install(|| pieces.par_iter().for_each(|p| zstd_sha256(p))));
    let [ours, ceiling] = in_turn(b.run, [&mut ours, &mut ceiling]);
    r.ours.push(ours);
    r.ceiling.push(ceiling);
}
