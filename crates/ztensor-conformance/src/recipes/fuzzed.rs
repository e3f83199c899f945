//! Fixtures made again from what differential fuzzing found.

use super::build::*;
use anyhow::Result;
use ztensor_format::{ErrorKind as K, Version};

/// Files differential fuzzing found a reference implementation accepting, reduced
/// (`ztensor-conformance fuzz`; `findings/` and the matrix's "Fuzz findings"), where they teach
/// a case the hand-made files do not: each is made again from its fuzz recipe, the generator's
/// input and its changes.
pub(super) fn from_fuzzing(out: &mut Out) -> Result<()> {
    use crate::difffuzz::{Mutation, Recipe, Region};
    let cases = [
        (
            Version::V0_1,
            K::CborDuplicateKey,
            "tensor-attributes",
            "a tensor map repeats its `attributes` field (reference 0.1.0 keeps one)",
            "000100005e00000000007e0000000000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![
                Mutation::Attributes { node: 4_169_814_353, seed: 4_136_527_310 },
                Mutation::Duplicate { node: 2_159_485_159 },
            ],
        ),
        (
            Version::V1_1,
            K::CborDuplicateKey,
            "object",
            "the objects map gives an object twice (reference 1.1.1 keeps one)",
            "0103000000000000e30000eb00000097e6000000cf0000000000000f000000000000000000000000\
             0000000000000000",
            vec![Mutation::Duplicate { node: 3_198_159_458 }],
        ),
        (
            Version::V1_2,
            K::CborDuplicateKey,
            "object",
            "the objects map gives an object twice (reference 1.2.3 keeps one)",
            "0202000039000000007e00000066000000007ec200000000000000000000000000000000000000\
             000000000000000000",
            vec![Mutation::Duplicate { node: 502_775_038 }],
        ),
        (
            Version::V0_1,
            K::CborSyntax,
            "truncated",
            "the manifest ends inside an item, after a size that says so (reference 0.1.0 reads no tensor)",
            "0003cd005e1f2c0000000b00e30600d10000e5007d00d3926770000000a100000000000000000000\
             0000000000000000",
            vec![
                Mutation::Int { node: 733_481_968, pick: 182 },
                Mutation::Truncate { at: 1_200_391_779 },
            ],
        ),
        (
            Version::V0_1,
            K::SchemaFieldType,
            "checksum",
            "a tensor's `checksum` is a byte string (reference 0.1.0 ignores it)",
            "00020000ff00000000000e23000000820000000000fa000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Retype { node: 2_472_309_336, kind: 166 }],
        ),
        (
            Version::V0_1,
            K::ShapeOverflow,
            "",
            "a shape of [2^63, 4, 0]: no elements, but its product of dimensions and element size overflows 64 bits (reference 0.1.0 reads it)",
            "000300000b00ef000000fb000000000000001b63000000b600000000438f00000000000000000000\
             0000000000000000",
            vec![Mutation::Int { node: 3_135_605_958, pick: 252 }],
        ),
        (
            Version::V0_1,
            K::ComponentLengthNotMultiple,
            "",
            "a float64 tensor of 2 bytes, its blob inside another's (reference 0.1.0 reads one element)",
            "000300000000000000000000a2000000000000006e00000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Alias { node: 4_048_202_392, other: 170_358_946 }],
        ),
        (
            Version::V0_1,
            K::KeyNotText,
            "",
            "a tensor map with a byte-string key (reference 0.1.0 reads it as its text)",
            "0002a10099000000002a006200ea0000000073b20000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 1_577_208_941, xor: 32 }],
        ),
        (
            Version::V0_1,
            K::BlobPartialOverlap,
            "",
            "two tensors whose blobs start together and end apart (reference 0.1.0 reads both)",
            "000200001f5d610c000000000000008e521b000000e9000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Int { node: 2_966_577_896, pick: 5 }],
        ),
        (
            Version::V0_1,
            K::SchemaRoot,
            "tagged",
            "the manifest array under a CBOR tag (reference 0.1.0 ignores the tag)",
            "000200007d0000000000000000bb0000000000be0000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Size { delta: 2 }],
        ),
        (
            Version::V1_1,
            K::SchemaRoot,
            "tagged",
            "the manifest map under a CBOR tag (reference 1.1.1 ignores the tag)",
            "010200007d0000000000000000bb0000000000be0000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Size { delta: 2 }],
        ),
        (
            Version::V1_1,
            K::KeyNotText,
            "object-bytes",
            "an object map with a byte-string key (reference 1.1.1 reads it as its text)",
            "01020000000000000000004f217d0000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 2_991_870_075, xor: 32 }],
        ),
        (
            Version::V1_2,
            K::KeyNotText,
            "root-bytes",
            "the manifest root has a byte-string key (reference 1.2.3 reads it as its text)",
            "02012600e900000062ce000000000000000000000000000000000000000000000000000000000000\
             0000000000000000",
            vec![Mutation::Flip { region: Region::Manifest, at: 292_188_169, xor: 32 }],
        ),
    ];
    for (v, kind, variant, covers, model, mutations) in cases {
        let recipe = Recipe { seed: 0, model: model.to_owned(), mutations, zt2: None };
        out.reject(v, kind, variant, covers, recipe.build()?);
    }
    Ok(())
}
