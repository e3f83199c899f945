//! zTensor 2 cases (`fuzz --version 2`): the same flow as 0.1/1.x, on zTensor 2's own
//! structure.
//!
//! A case starts from a valid zTensor 2 file: the generator's model (as for 1.x) written by
//! this project's zTensor 2 writer, or a file of the embedded corpus ([`BASES`]: the reference's
//! own cases, CSR with 32-bit indices, unknown layouts, encodings and logical types, shard
//! tables). Its blobs are placed again at the case's alignment (4096 and up: canonical form's
//! 64 KiB makes every case a file of hundreds of KiB), its raw parts stored under
//! `zt.zstd-seekable/1` when the case asks, and its manifest taken as a CBOR value tree. The
//! changes are those of 1.x ([`Mutation::random`]) and zTensor 2's own
//! ([`Mutation::Vocab`], [`Mutation::Place`], [`Mutation::Shard`], [`Mutation::Reorder`],
//! [`Mutation::Head`], [`Mutation::Blob`]); the tree is then written in deterministic form
//! (keys sorted, shortest heads, narrowest floats) but where a change asks otherwise, and
//! framed by a valid footer (offset, length, XXH3-64 of the manifest). A change to the
//! manifest's bytes is framed again (its hash made right), so that it reaches the CBOR
//! decoder rather than always breaking `manifest_hash`; the footer's own bytes are changed by
//! [`Region::Trailer`].
//!
//! Our verdicts come from this project's zTensor 2 reader (`crates/ztensor-v2`). Strict: the
//! dump `ztensor dump --json` and `ztensor-conformance dump` print, every registered profile
//! checked when the file opens. Lenient: the same reader, reading the profiles the reference
//! 2.1.1 reads as unknown layouts (`zt.sparse_coo/1`, `zt.quant_group/1`, `zt.mx/1`,
//! `gguf.<type>/1`) as it does, which `spec/ztensor-2.md` §8 makes implementation-defined,
//! and without this reader's expansion budget (a limit, not a rule). What else the spec leaves
//! to each reader is latitude (nonzero padding, a shard table whose shards are not there, an
//! object this reader cannot read) or a loose object (compared on its name, format, shape,
//! attributes and types only: a digest algorithm the spec does not name, those profiles, a seek
//! table's unused descriptor bits).

mod build;
mod cbor;
mod layout;
mod ours;
#[cfg(test)]
mod tests;
mod tree;

use serde::{Deserialize, Serialize};

use super::hex::hex;
use super::mutate::{Mutation, Region};
use super::rng::Rng;

pub(super) use build::{build, representable};
pub(super) use ours::{is_zt2, lenient_of, ours, ours_in_process};

/// How a zTensor 2 case's file is made, before its changes ([`Recipe::zt2`](super::Recipe::zt2)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zt2 {
    /// A file of the embedded corpus the case starts from (one of [`BASES`]), instead of the
    /// generator's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Whether the raw parts are stored under `zt.zstd-seekable/1` (their digests, of the
    /// decoded bytes, kept).
    #[serde(default)]
    pub zstd: bool,
    /// Where blobs and the manifest are placed: multiples of this (4096 × 2^k; 4096 to
    /// 1 MiB are used, anything else is rounded to one of them).
    pub alignment: u64,
}

/// The files of the embedded corpus zTensor 2 cases may start from: every valid file of the
/// reference's corpus but two that repeat others byte for byte, and the rejected ones that
/// open (an object's data breaks a rule). The list is fixed, so that a seed's case stays the
/// same when the corpus grows.
pub const BASES: [&str; 23] = [
    "external/ztensor2/valid/aliased-identical-blobs.zt",
    "external/ztensor2/valid/attributes-kitchen-sink.zt",
    "external/ztensor2/valid/canonical-basic.zt",
    "external/ztensor2/valid/csr-data-valid.zt",
    "external/ztensor2/valid/data-shard.zt",
    "external/ztensor2/valid/empty-objects.zt",
    "external/ztensor2/valid/f4-packed-odd-count.zt",
    "external/ztensor2/valid/local-and-foreign-parts-together.zt",
    "external/ztensor2/valid/minimal.zt",
    "external/ztensor2/valid/nonzero-reserved-ignored.zt",
    "external/ztensor2/valid/scalar.zt",
    "external/ztensor2/valid/shards-table.zt",
    "external/ztensor2/valid/unknown-layout-structural.zt",
    "external/ztensor2/valid/unknown-ltype-structural.zt",
    "external/ztensor2/valid/verify-ok.zt",
    "external/ztensor2/valid/view-unknown-encoding-refused.zt",
    "external/ztensor2/valid/zero-size-tensor.zt",
    "external/ztensor2/reject/bool-invalid-byte.zt",
    "external/ztensor2/reject/csr-index-out-of-cols.zt",
    "external/ztensor2/reject/csr-indptr-not-zero-based.zt",
    "external/ztensor2/reject/csr-row-not-increasing.zt",
    "external/ztensor2/reject/f4-nonzero-odd-nibble.zt",
    "external/ztensor2/reject/verify-digest-mismatch.zt",
];

/// A zTensor 2 case drawn from `rng` once its version is: its model (hex), its changes and
/// how its file is made.
pub(super) fn generate(mut rng: Rng) -> (String, Vec<Mutation>, Zt2) {
    let mut model = vec![0u8; 48];
    for b in &mut model {
        #[allow(clippy::cast_possible_truncation)]
        let random = rng.next_u64() as u8;
        *b = random;
    }
    // The model is one of 1.2 (the most content: logical types), of one to three objects.
    model[0] = 2;
    #[allow(clippy::cast_possible_truncation)]
    let count = 1 + rng.below(3) as u8;
    model[1] = count;
    let base = if rng.below(4) == 0 {
        let i = usize::try_from(rng.below(BASES.len() as u64)).unwrap_or(0);
        Some(BASES[i].to_owned())
    } else {
        None
    };
    let zstd = rng.below(4) == 0;
    let alignment = [4096, 4096, 4096, 8192, 65536][usize::try_from(rng.below(5)).unwrap_or(0)];
    let changes = match rng.below(8) {
        0 | 1 => 0,
        2..=5 => 1,
        6 => 2,
        _ => 3,
    };
    let mut mutations: Vec<Mutation> = (0..changes).map(|_| random(&mut rng)).collect();
    if changes == 0 {
        // Valid files of what the writer alone does not make, as for 1.x: ranks 4 to 8, file
        // attributes of every kind.
        #[allow(clippy::cast_possible_truncation)]
        let rank = 4 + rng.below(5) as u8;
        if rng.below(2) == 0 {
            mutations.push(Mutation::Rank { node: rng.u32(), rank });
        }
        if rng.below(2) == 0 {
            mutations.push(Mutation::Attributes { node: 0, seed: rng.u32() });
        }
    }
    (hex(&model), mutations, Zt2 { base, zstd, alignment })
}

/// A random change to a zTensor 2 file: two in five are those of 1.x cases, the others
/// zTensor 2's own.
pub(super) fn random(rng: &mut Rng) -> Mutation {
    if rng.below(5) < 2 {
        return Mutation::random(rng);
    }
    let node = rng.u32();
    #[allow(clippy::cast_possible_truncation)]
    let byte = |rng: &mut Rng| rng.below(256) as u8;
    match rng.below(9) {
        0 | 1 => Mutation::Vocab { node, pick: byte(rng) },
        2 => Mutation::Place { node, pick: byte(rng) },
        3 => Mutation::Shard { node, pick: byte(rng) },
        4 => Mutation::Reorder { node, other: rng.u32() },
        5 => Mutation::Head { node, pick: byte(rng) },
        6 | 7 => Mutation::Blob { node, at: rng.u32(), xor: 1 << rng.below(8) },
        _ => {
            let region = [Region::Header, Region::Data, Region::Manifest, Region::Trailer]
                [usize::try_from(rng.below(4)).unwrap_or(0)];
            Mutation::Flip { region, at: rng.u32(), xor: 1 << rng.below(8) }
        }
    }
}

/// A small valid zTensor 2 file (one dense object), to see that an implementation answers.
///
/// # Errors
/// A bug of this project's writer.
pub(super) fn probe() -> anyhow::Result<Vec<u8>> {
    let model = [2u8, 1, 0, 0, 2, 3, 1, 1];
    let how = Zt2 { base: None, zstd: false, alignment: 4096 };
    build(&hex(&model), &[], &how)
}
