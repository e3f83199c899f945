//! Deterministic recipes for `fixtures/tensorbuffers/`: valid files, and reject files named after
//! the rule they break (`reject/<rule>.tb` or `reject/<rule>--<variant>.tb`).

use anyhow::Result;
use flatbuffers::FlatBufferBuilder;
use ztensor_tensorbuffers::{DataType, Operation, TbWriter, tensor_id};

fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

fn write(add: impl FnOnce(&mut TbWriter<Vec<u8>>) -> Result<()>) -> Result<Vec<u8>> {
    let mut w = TbWriter::new(Vec::new())?;
    add(&mut w)?;
    Ok(w.finish()?.0)
}

/// The shared sample's tensors: `weight` (f32, shape `[2, 3]`) and `indices` (i64, shape `[4]`).
fn sample() -> Result<Vec<u8>> {
    write(|w| {
        w.add(
            "weight",
            DataType::Float32,
            &[2, 3],
            &le(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], f32::to_le_bytes),
        )?;
        w.add(
            "indices",
            DataType::Int64,
            &[4],
            &le(&[1i64, -2, 300, 4_294_967_296], i64::to_le_bytes),
        )?;
        Ok(())
    })
}

fn patched(at: usize, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut f = sample()?;
    f[at..at + bytes.len()].copy_from_slice(bytes);
    Ok(f)
}

/// Metadata with one u8 tensor of shape `[2]`, omitting the shape or the name.
fn crafted(name: bool, shape: bool) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let shape_v = fbb.create_vector(&[2u32]);
    let name_s = fbb.create_string("t");
    let start = fbb.start_table();
    fbb.push_slot::<u64>(4, tensor_id("t"), 0);
    fbb.push_slot::<u32>(14, 2, 0);
    fbb.push_slot::<u32>(12, 4, 0);
    if shape {
        fbb.push_slot_always(8, shape_v);
    }
    if name {
        fbb.push_slot_always(6, name_s);
    }
    fbb.push_slot::<i8>(10, 7, 0);
    let t = fbb.end_table(start);
    let version = fbb.create_string("1.0.0");
    let tensors = fbb.create_vector(&[t]);
    let start = fbb.start_table();
    fbb.push_slot_always(8, tensors);
    fbb.push_slot_always(4, version);
    let root = fbb.end_table(start);
    fbb.finish_minimal(root);
    let meta = fbb.finished_data();
    [&b"TBS1"[..], &[1, 2], meta, &u32::try_from(meta.len()).unwrap_or(0).to_le_bytes(), b"TBS1"]
        .concat()
}

/// The layout before the format had a magic: data from byte 0, the FlatBuffer, then a u32 LE
/// holding the FlatBuffer's start offset.
fn pre_release() -> Vec<u8> {
    let framed = crafted(true, true);
    // Strip the magics and the size field of the framed file: [TBS1][1 2][meta][len][TBS1].
    let meta = &framed[6..framed.len() - 8];
    [&[1u8, 2][..], meta, &2u32.to_le_bytes()].concat()
}

/// Every fixture, as (relative path, bytes).
pub fn all() -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = vec![
        ("valid/sample.tb".to_owned(), sample()?),
        ("valid/empty.tb".to_owned(), write(|_| Ok(()))?),
        (
            "valid/scalar-and-zero-size.tb".to_owned(),
            write(|w| {
                w.add("scalar", DataType::Float64, &[], &le(&[2.5f64], f64::to_le_bytes))?;
                w.add("empty", DataType::UInt8, &[0, 3], &[])?;
                w.add("after", DataType::Int16, &[2], &le(&[-1i16, 7], i16::to_le_bytes))?;
                Ok(())
            })?,
        ),
        (
            "valid/every-type.tb".to_owned(),
            write(|w| {
                for code in 1..=10 {
                    let t = DataType::from_code(code).unwrap_or(DataType::UInt8);
                    let n = usize::try_from(t.size()).unwrap_or(1) * 3;
                    let data: Vec<u8> =
                        (0..n).map(|i| u8::try_from(i * 7 % 251).unwrap_or(0)).collect();
                    w.add(&format!("t{code}"), t, &[3], &data)?;
                }
                Ok(())
            })?,
        ),
        (
            "valid/model-and-operations.tb".to_owned(),
            write(|w| {
                w.add("x", DataType::Float32, &[2], &le(&[1.0f32, -1.0], f32::to_le_bytes))?;
                w.set_model(Some("example".into()));
                w.set_operations(Some(vec![Operation {
                    id: 1,
                    operation: 12,
                    output: tensor_id("x"),
                    input_operations: vec![],
                }]));
                Ok(())
            })?,
        ),
    ];
    let s = sample()?;
    let rejects: Vec<(&str, Vec<u8>)> = vec![
        ("tb_file_too_small", s[..11].to_vec()),
        ("tb_header_magic", patched(0, b"X")?),
        ("tb_header_magic--pre-release-layout", pre_release()),
        ("tb_footer_magic", patched(275, b"X")?),
        ("tb_metadata_out_of_bounds", patched(268, &265u32.to_le_bytes())?),
        ("tb_flatbuffer--shifted-metadata", patched(268, &200u32.to_le_bytes())?),
        ("tb_flatbuffer--name-missing", crafted(false, true)),
        ("tb_flatbuffer--name-not-nul-terminated", patched(0xfe, b"x")?),
        ("tb_flatbuffer--name-not-utf8", patched(0xf8, &[0xff])?),
        ("tb_shape_missing", crafted(true, false)),
        ("tb_data_type--eleven", patched(0x93, &[11])?),
        ("tb_data_type--none", patched(0x93, &[0])?),
        ("tb_data_out_of_bounds--in-magic", patched(0x9c, &3u32.to_le_bytes())?),
        ("tb_data_out_of_bounds--past-data", patched(0x9c, &40u32.to_le_bytes())?),
        ("tb_size_mismatch", patched(0xe8, &20u32.to_le_bytes())?),
        ("tb_duplicate_name", {
            let mut f = write(|w| {
                w.add("aa", DataType::UInt8, &[1], &[1])?;
                w.add("ab", DataType::UInt8, &[1], &[2])?;
                Ok(())
            })?;
            if let Some(at) = f.windows(3).position(|w| w == b"ab\0") {
                f[at + 1] = b'a';
            }
            f
        }),
    ];
    for (name, bytes) in rejects {
        out.push((format!("reject/{name}.tb"), bytes));
    }
    Ok(out)
}
