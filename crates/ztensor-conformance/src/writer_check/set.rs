//! The recipes every writer is asked to write.

use serde_json::json;
use ztensor_format::{DType, DigestAlgorithm, LogicalType, Version};

use super::recipe::*;

/// The recipes: what the corpus covers, for each version that can hold it.
pub fn recipes() -> Vec<Recipe> {
    let mut out = Vec::new();
    for v in [Version::V0_1, Version::V1_1, Version::V1_2] {
        let dense =
            |name: &str, shape: &[u64], dtype: DType, seed: u8, zstd, digest| RecipeObject {
                name: name.to_owned(),
                format: "dense".into(),
                shape: shape.to_vec(),
                attributes: None,
                zstd,
                digest,
                components: vec![RecipeComponent {
                    role: "data".into(),
                    dtype,
                    logical_type: None,
                    bytes: elements(dtype, shape.iter().product::<u64>(), seed),
                }],
            };
        let recipe = |name: &str, covers: &str, objects| Recipe {
            name: name.into(),
            version: Target::Zt(v),
            covers: covers.into(),
            attributes: None,
            objects,
        };
        out.push(recipe(
            "dense-dtypes",
            "one dense [2, 3] object of every dtype, raw",
            DType::ALL
                .iter()
                .zip(0u8..)
                .map(|(&d, i)| dense(&format!("t_{}", d.name()), &[2, 3], d, i, false, None))
                .collect(),
        ));
        out.push(recipe(
            "zstd",
            "dense objects compressed with zstd",
            vec![
                dense("w", &[64], DType::F32, 20, true, None),
                dense("b", &[3, 5], DType::I16, 21, true, None),
            ],
        ));
        for (algorithm, zstd) in [(DigestAlgorithm::Crc32c, false), (DigestAlgorithm::Sha256, true)]
        {
            out.push(recipe(
                &format!("digest-{}", algorithm.name()),
                &format!("a {} digest on every component", algorithm.name()),
                vec![
                    dense("w", &[16], DType::F32, 22, zstd, Some(algorithm.clone())),
                    dense("n", &[4], DType::I64, 23, zstd, Some(algorithm.clone())),
                ],
            ));
        }
        out.push(recipe(
            "scalar-and-empty",
            "a 0-d tensor and zero-size tensors",
            vec![
                dense("scalar", &[], DType::F64, 24, false, None),
                dense("empty", &[0, 4], DType::F32, 25, false, None),
            ],
        ));
        let values = |seed| elements(DType::F32, 3, seed);
        let u64le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let component = |role: &str, dtype, bytes| RecipeComponent {
            role: role.into(),
            dtype,
            logical_type: None,
            bytes,
        };
        let sparse = |name: &str, format: &str, shape: &[u64], components| RecipeObject {
            name: name.into(),
            format: format.into(),
            shape: shape.to_vec(),
            attributes: None,
            zstd: false,
            digest: None,
            components,
        };
        out.push(recipe(
            "sparse",
            "a CSR and a COO matrix, f32 values and u64 indices",
            vec![
                sparse(
                    "csr",
                    "sparse_csr",
                    &[3, 4],
                    vec![
                        component("values", DType::F32, values(26)),
                        component("indices", DType::U64, u64le(&[1, 0, 3])),
                        component("indptr", DType::U64, u64le(&[0, 1, 1, 3])),
                    ],
                ),
                sparse(
                    "coo",
                    "sparse_coo",
                    &[4, 5],
                    vec![
                        component("values", DType::F32, values(27)),
                        component("coords", DType::U64, u64le(&[0, 2, 3, 4, 0, 1])),
                    ],
                ),
            ],
        ));
        let mut attributed = dense("w", &[4], DType::F32, 28, false, None);
        attributed.attributes = Some(json!({"note": "kept", "scale": 0.5}));
        out.push(recipe(
            "object-attributes",
            "object attributes (text and a number)",
            vec![attributed],
        ));
        if v != Version::V0_1 {
            let mut with_attributes = recipe(
                "file-attributes",
                "file attributes (text values)",
                vec![dense("w", &[4], DType::F32, 33, false, None)],
            );
            with_attributes.attributes =
                Some(json!({"framework": "zTensor conformance", "step": "7"}));
            out.push(with_attributes);
        }
        if v == Version::V1_2 {
            let typed = |name: &str, dtype, logical: LogicalType, n: u64| RecipeObject {
                name: name.into(),
                format: "dense".into(),
                shape: vec![n],
                attributes: None,
                zstd: false,
                digest: None,
                components: vec![RecipeComponent {
                    role: "data".into(),
                    dtype,
                    logical_type: Some(logical),
                    bytes: elements(dtype, if dtype == DType::F32 { 2 * n } else { n }, 29),
                }],
            };
            out.push(recipe(
                "logical-types",
                "FP8 (E4M3FN, E5M2) and complex64 through 1.2 logical types",
                vec![
                    typed("e4m3", DType::U8, LogicalType::F8E4M3Fn, 8),
                    typed("e5m2", DType::U8, LogicalType::F8E5M2, 8),
                    typed("z", DType::F32, LogicalType::Complex64, 3),
                ],
            ));
            let mut q = sparse(
                "q",
                "quantized_group",
                &[4, 8],
                vec![
                    component("packed_weight", DType::I32, elements(DType::I32, 4, 30)),
                    component("scales", DType::F16, elements(DType::F16, 2, 31)),
                    component("zeros", DType::F16, elements(DType::F16, 2, 32)),
                ],
            );
            q.attributes = Some(json!({"bits": 4, "group_size": 16, "packing": "8_per_i32"}));
            out.push(recipe("quantized-group", "a 4-bit quantized_group object", vec![q]));
        }
    }
    // zTensor 2: the 1.2 recipes' content, each part with the xxh3 digest zTensor 2 writers
    // give every part (the 1.x digest recipes are the dense ones again, and go).
    let zt2: Vec<Recipe> = out
        .iter()
        .filter(|r| r.version == Target::Zt(Version::V1_2) && !r.name.starts_with("digest-"))
        .map(|r| Recipe {
            name: r.name.clone(),
            version: Target::Zt2,
            covers: r.covers.clone(),
            attributes: r.attributes.clone(),
            objects: r.objects.iter().map(|o| RecipeObject { digest: None, ..o.clone() }).collect(),
        })
        .collect();
    out.extend(zt2);
    out
}

/// `n` deterministic elements of `dtype` (bools 0/1; floats finite).
pub(super) fn elements(dtype: DType, n: u64, seed: u8) -> Vec<u8> {
    let size = dtype.size();
    (0..n * size)
        .map(|i| {
            let b = u8::try_from((i * 29 + u64::from(seed) * 13) % 251).unwrap_or(0);
            match dtype {
                DType::Bool => b & 1,
                // Keep exponents away from NaN and infinity patterns.
                DType::F16 | DType::BF16 | DType::F32 | DType::F64 if (i + 1) % size == 0 => {
                    b & 0x3F
                }
                _ => b,
            }
        })
        .collect()
}
