//! Deterministic recipes for the bundled example files under `fixtures/examples/`.
//!
//! The same small checkpoint is written once per version: a dense f32 weight, a bf16 bias, a
//! CSR sparse matrix, and (in 1.x) an FP8 tensor, with file attributes where the version has
//! them. Files are assembled from `ztensor-format` parts: the offset allocator, the manifest
//! encoder and the trailer.

use anyhow::Result;
use ztensor_format::{
    ByteOrder, Component, Container, DType, Format, LogicalType, Manifest, Object, OffsetAllocator,
    Packing, Version, text_map,
};

struct Blob {
    role: &'static str,
    dtype: DType,
    logical: Option<LogicalType>,
    bytes: Vec<u8>,
}

fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// Lays the blobs of each object out in order and returns the whole file.
fn assemble(mut manifest: Manifest, objects: Vec<(Object, Vec<Blob>)>) -> Result<Vec<u8>> {
    let container = manifest.version.container();
    let mut alloc = OffsetAllocator::new();
    let mut data = container.magic().to_vec();
    for (mut object, blobs) in objects {
        for blob in blobs {
            let offset = alloc.reserve(blob.bytes.len() as u64)?;
            data.resize(usize::try_from(offset)?, 0);
            data.extend_from_slice(&blob.bytes);
            let mut c = Component::new(blob.dtype, offset, blob.bytes.len() as u64);
            c.logical_type = blob.logical;
            object.components.insert(blob.role.into(), c);
        }
        manifest.objects.push(object);
    }
    let cbor = manifest.encode()?;
    data.extend_from_slice(&cbor);
    data.extend_from_slice(&container.encode_trailer(cbor.len() as u64));
    Ok(data)
}

fn blob(role: &'static str, dtype: DType, bytes: Vec<u8>) -> Blob {
    Blob { role, dtype, logical: None, bytes }
}

/// The example checkpoint in `version`.
pub fn tiny(version: Version) -> Result<Vec<u8>> {
    let weight = le(&[0.5f32, -1.25, 2.0, 0.0, 3.5, -0.75], f32::to_le_bytes);
    let bias = le(&[0.1f32, 0.2, 0.3].map(half::bf16::from_f32), half::bf16::to_le_bytes);
    // [[0, 1.5, 0, 0], [0, 0, 0, 0], [2.5, 0, 0, -1]]
    let (values, indices, indptr) = ([1.5f32, 2.5, -1.0], [1u64, 0, 3], [0u64, 1, 1, 3]);
    let mut manifest = Manifest::new(version);
    let mut objects = vec![
        (
            Object::new("layer0.weight", vec![2, 3], Format::Dense),
            vec![blob("data", DType::F32, weight)],
        ),
        (Object::new("layer0.bias", vec![3], Format::Dense), vec![blob("data", DType::BF16, bias)]),
    ];
    let mut sparse = Object::new("adjacency", vec![3, 4], Format::SparseCsr);
    if version == Version::V0_1 {
        // One blob: indptr, indices, values (the v0.1 single-blob CSR layout).
        sparse.packing = Packing::V0Single;
        let packed = [
            le(&indptr, u64::to_le_bytes),
            le(&indices, u64::to_le_bytes),
            le(&values, f32::to_le_bytes),
        ]
        .concat();
        objects.push((sparse, vec![blob("data", DType::F32, packed)]));
        let mut custom = Object::new("step", vec![], Format::Dense);
        custom.attributes = Some(Box::new(ztensor_format::Attributes::try_from(text_map([(
            "unit",
            "iterations".into(),
        )]))?));
        objects.push((custom, vec![blob("data", DType::I64, le(&[1000i64], i64::to_be_bytes))]));
        let mut m = assemble(manifest, objects)?;
        // Stored big-endian, as v0.1 allows; readers return little-endian values.
        let parsed = ztensor_format::parse_file(&m, &Default::default())?;
        let mut edited = parsed.manifest().clone();
        if let Some(c) = edited
            .objects
            .iter_mut()
            .find(|o| o.name == "step")
            .and_then(|o| o.components.get_mut("data"))
        {
            c.set_byte_order(ByteOrder::Big);
        }
        let cbor = edited.encode()?;
        m.truncate(usize::try_from(parsed.location().offset)?);
        m.extend_from_slice(&cbor);
        m.extend_from_slice(&Container::V0_1.encode_trailer(cbor.len() as u64));
        return Ok(m);
    }
    // Text values only: the reference 1.1 reader rejects any other file attribute value.
    manifest.attributes = Some(ztensor_format::Attributes::try_from(text_map([
        ("framework", "example".into()),
        ("license", "CC0-1.0".into()),
    ]))?);
    objects.push((
        sparse,
        vec![
            blob("values", DType::F32, le(&values, f32::to_le_bytes)),
            blob("indices", DType::U64, le(&indices, u64::to_le_bytes)),
            blob("indptr", DType::U64, le(&indptr, u64::to_le_bytes)),
        ],
    ));
    // FP8 E4M3FN codes of 1.0, -2.0, 0.5, 448.0.
    let fp8 = Blob {
        role: "data",
        dtype: DType::U8,
        logical: Some(LogicalType::F8E4M3Fn),
        bytes: vec![0x38, 0xc0, 0x30, 0x7e],
    };
    objects.push((Object::new("scales.fp8", vec![4], Format::Dense), vec![fp8]));
    assemble(manifest, objects)
}

/// The bundled example checkpoint for the README tour: a tiny two-layer model in the Hugging
/// Face sharded layout (`model.safetensors.index.json` and two shards), written by the
/// `safetensors` crate itself, with bf16, f32 and FP8 (`F8_E4M3`) weights and `__metadata__`.
/// Returns (file name, bytes) pairs.
pub fn checkpoint() -> Result<Vec<(String, Vec<u8>)>> {
    use safetensors::Dtype;
    use safetensors::tensor::TensorView;

    // Deterministic weights: small values from a fixed linear congruential sequence.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        // In [-0.04, 0.04): about two standard deviations of N(0, 0.02).
        f32::from(u16::try_from(state >> 48).unwrap_or(0)) / 65536.0 * 0.08 - 0.04
    };
    let mut bf16 = |n: usize| -> Vec<u8> {
        (0..n).flat_map(|_| half::bf16::from_f32(next()).to_le_bytes()).collect()
    };
    let embed = bf16(16 * 8);
    let head = bf16(16 * 8);
    let f32s =
        |values: &[f32]| -> Vec<u8> { values.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let w0 = f32s(&(0..64).map(|i| (i as f32 - 32.0) / 800.0).collect::<Vec<_>>());
    let b0 = f32s(&[0.0; 8]);
    // FP8 E4M3 codes spread over the small magnitudes, and one per-tensor scale.
    let w1: Vec<u8> = (0..64u8).map(|i| (i.wrapping_mul(29) % 0x30) | ((i & 1) << 7)).collect();
    let scale = f32s(&[0.015_625]);
    type Tensor<'a> = (&'a str, Dtype, Vec<usize>, &'a [u8]);
    let shards: [(&str, Vec<Tensor<'_>>); 2] = [
        (
            "model-00001-of-00002.safetensors",
            vec![
                ("embed.weight", Dtype::BF16, vec![16, 8], &embed),
                ("layers.0.weight", Dtype::F32, vec![8, 8], &w0),
                ("layers.0.bias", Dtype::F32, vec![8], &b0),
            ],
        ),
        (
            "model-00002-of-00002.safetensors",
            vec![
                ("layers.1.weight", Dtype::F8_E4M3, vec![8, 8], &w1),
                ("layers.1.weight_scale", Dtype::F32, vec![1], &scale),
                ("lm_head.weight", Dtype::BF16, vec![16, 8], &head),
            ],
        ),
    ];
    let mut files = Vec::new();
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    for (name, tensors) in &shards {
        let mut views = Vec::new();
        for (t, dtype, shape, data) in tensors {
            views.push((*t, TensorView::new(*dtype, shape.clone(), data)?));
            weight_map.insert((*t).to_owned(), (*name).into());
            total += data.len();
        }
        let metadata = std::collections::HashMap::from([("format".to_owned(), "pt".to_owned())]);
        files.push(((*name).to_owned(), safetensors::serialize(views, Some(metadata))?));
    }
    let index = serde_json::json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    let mut index = serde_json::to_vec_pretty(&index)?;
    index.push(b'\n');
    files.push(("model.safetensors.index.json".to_owned(), index));
    Ok(files)
}
