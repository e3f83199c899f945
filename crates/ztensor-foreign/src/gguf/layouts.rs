//! GGUF's quantized tensors in zTensor 2's layouts ([`Blocks::Layouts`], what a zTensor 2 target
//! is read with): MXFP4 as `zt.mx/1` (its codes and scales apart), every other quantized type
//! as `gguf.<type>/1` (its blocks verbatim), both with their logical shape.
//!
//! MXFP4 and `zt.mx/1` agree on what a block means: 32 consecutive elements of a row, one
//! E8M0 scale, E2M1 codes (ggml keeps the codes doubled and the scale halved, which is the
//! same number). They differ in two places:
//! - **Nibble order.** ggml puts element `j` of a block in the low nibble of byte `j` and
//!   element `j + 16` in its high nibble; zTensor 2 packs elements in order, element `2k` in
//!   the low nibble of byte `k` and `2k + 1` in the high one. The codes are moved, not changed.
//! - **Scale 0xFF.** ggml reads it as 2^127; the OCP format (and `zt.mx/1`) as NaN. A block with
//!   that scale has no `zt.mx/1` form, and reading it in this view is refused rather than
//!   changed.

use std::borrow::Cow;

use ztensor_format::{Attributes, DType, Format, MxType, Value};
use ztensor_io::ReadAt;

use super::GgmlType;

/// How a [`GgufFile`](super::GgufFile) presents its quantized tensors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blocks {
    /// Each one a dense `u8` object of its block bytes, its GGML type and logical shape in the
    /// attributes `gguf.type` and `gguf.shape`: what every zTensor generation and safetensors
    /// hold (and what the reference 1.2.3 reader gives).
    #[default]
    Bytes,
    /// zTensor 2's registered layouts: MXFP4 as `zt.mx/1`, any other quantized type as
    /// `gguf.<type>/1` (the reference 2.x projection), with the logical shape. A tensor whose
    /// rows are not whole blocks (which ggml itself never writes) stays as [`Blocks::Bytes`]
    /// gives it.
    Layouts,
}

/// The GGML type number of MXFP4.
pub(super) const MXFP4: u32 = 39;
/// Elements in an MXFP4 block, and the bytes of its codes.
const MX_BLOCK: u64 = 32;
const MX_CODES: usize = 16;
/// Bytes of one MXFP4 block: its scale, then its codes.
const MX_BYTES: usize = 1 + MX_CODES;
/// Blocks repacked at a time when a tensor is read in pieces.
const BLOCKS_AT_ONCE: usize = 1 << 14;

/// How one tensor is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum View {
    /// A plain type: dense, of its own dtype.
    Plain(DType),
    /// Block bytes as a dense `u8` object with `gguf.*` attributes.
    Bytes(&'static GgmlType),
    /// `gguf.<type>/1`: block bytes verbatim.
    Opaque(&'static GgmlType),
    /// `zt.mx/1`: codes repacked, scales apart.
    Mx,
    /// A type number this reader does not know.
    Unknown(u32),
}

impl View {
    /// How a tensor of `kind` and row-major `shape` is presented under `blocks`.
    pub(super) fn of(kind: Result<&'static GgmlType, u32>, shape: &[u64], blocks: Blocks) -> View {
        let ty = match kind {
            Err(id) => return View::Unknown(id),
            Ok(ty) => ty,
        };
        if let Some(dtype) = ty.dtype {
            return View::Plain(dtype);
        }
        let whole_rows = shape.last().is_some_and(|&row| row % ty.block == 0);
        match blocks {
            Blocks::Layouts if whole_rows && ty.id == MXFP4 => View::Mx,
            Blocks::Layouts if whole_rows => View::Opaque(ty),
            _ => View::Bytes(ty),
        }
    }
}

/// The layout id of a GGML type under `gguf.<type>/1`.
pub(super) fn opaque_layout(ty: &GgmlType) -> Format {
    Format::from_name(&format!("gguf.{}/1", ty.name.to_ascii_lowercase()))
}

/// The attributes `gguf.<type>/1` requires.
pub(super) fn opaque_attributes(ty: &GgmlType) -> Option<Attributes> {
    let map = ztensor_format::text_map([
        ("block_bytes", Value::from(ty.size)),
        ("elems_per_block", Value::from(ty.block)),
    ]);
    Attributes::try_from(map).ok()
}

/// The `zt.mx/1` layout id.
pub(super) fn mx_layout() -> Format {
    Format::from_name("zt.mx/1")
}

/// The attributes of an MXFP4 tensor under `zt.mx/1` (blocks of 32 along the last axis, the
/// default one).
pub(super) fn mx_attributes() -> Option<Attributes> {
    let map = ztensor_format::text_map([
        ("block_size", Value::from(MX_BLOCK)),
        ("scale_form", Value::Text("e8m0_exponent".to_owned())),
    ]);
    Attributes::try_from(map).ok()
}

/// The two parts of an MXFP4 tensor of `len` stored bytes: `data` (FP4 codes, packed) and
/// `scales` (E8M0), with their logical types and lengths, in role order.
pub(super) fn mx_parts(len: u64) -> [(&'static str, MxType, u64); 2] {
    let blocks = len / MX_BYTES as u64;
    [("data", MxType::F4E2M1, blocks * MX_CODES as u64), ("scales", MxType::F8E8M0, blocks)]
}

/// Why block `block` of tensor `name`, whose scale is 0xFF, has no `zt.mx/1` form.
fn nan_scale(name: &str, block: u64) -> ztensor_io::Error {
    ztensor_io::Error::from(
        ztensor_format::Error::new(
            ztensor_format::ErrorKind::Unrepresentable,
            format!(
                "block {block} of this MXFP4 tensor has scale byte 0xFF, which GGUF reads as \
                 2^127 and zt.mx/1 as NaN, so it has no zt.mx/1 form (zTensor 1.x and \
                 safetensors targets keep its blocks as bytes)"
            ),
        )
        .in_object(name),
    )
}

/// Moves the codes of whole MXFP4 `blocks` (17 bytes each) into zTensor 2's packing, appended
/// to `data`, and their scales to `scales`; `first` is the number of the first block, for
/// messages. A scale of 0xFF is refused ([`nan_scale`]).
pub(super) fn repack(
    name: &str,
    first: u64,
    blocks: &[u8],
    data: &mut Vec<u8>,
    scales: &mut Vec<u8>,
) -> ztensor_io::Result<()> {
    for (k, block) in blocks.chunks_exact(MX_BYTES).enumerate() {
        let (scale, codes) = (block[0], &block[1..]);
        if scale == 0xFF {
            return Err(nan_scale(name, first + k as u64));
        }
        scales.push(scale);
        // Element e of the block: the low nibble of codes[e] for e < 16, the high nibble of
        // codes[e - 16] after; out byte k holds elements 2k (low) and 2k + 1 (high).
        let code = |e: usize| if e < MX_CODES { codes[e] & 0x0F } else { codes[e - MX_CODES] >> 4 };
        data.extend((0..MX_CODES).map(|k| code(2 * k) | (code(2 * k + 1) << 4)));
    }
    Ok(())
}

/// Reads the MXFP4 tensor `name` (`len` bytes at `offset` of `source`) in runs of whole blocks,
/// and hands each run's part of each of `roles` (`data`, `scales`, in that order: the order of
/// the parts' roles) to `each`, one role after the other. A run holds as many blocks as make
/// at most `piece` bytes of codes (at least one block, at most [`BLOCKS_AT_ONCE`]).
pub(super) fn mx_pieces(
    source: &dyn ReadAt,
    (name, offset, len): (&str, u64, u64),
    roles: &[&str],
    piece: usize,
    each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
) -> ztensor_io::Result<()> {
    let at_once = (piece / MX_CODES).clamp(1, BLOCKS_AT_ONCE);
    for &role in roles {
        let mut scratch = Vec::new();
        let (mut data, mut scales) = (Vec::new(), Vec::new());
        let blocks = len / MX_BYTES as u64;
        let mut block = 0;
        while block < blocks {
            // At most BLOCKS_AT_ONCE blocks: a usize.
            let run = usize::try_from(blocks - block).map_or(at_once, |b| b.min(at_once));
            let at = offset + block * MX_BYTES as u64;
            let n = run * MX_BYTES;
            let bytes: Cow<'_, [u8]> = match source.as_slice() {
                Some(all) => Cow::Borrowed(
                    usize::try_from(at)
                        .ok()
                        .and_then(|s| all.get(s..s.checked_add(n)?))
                        .ok_or_else(|| {
                            read_error(name, std::io::ErrorKind::UnexpectedEof.into())
                        })?,
                ),
                None => {
                    scratch.resize(n, 0);
                    source.read_exact_at(at, &mut scratch).map_err(|e| read_error(name, e))?;
                    Cow::Borrowed(&scratch[..])
                }
            };
            data.clear();
            scales.clear();
            repack(name, block, &bytes, &mut data, &mut scales)?;
            each(role, if role == "data" { &data } else { &scales })?;
            block += run as u64;
        }
    }
    Ok(())
}

pub(super) fn read_error(name: &str, e: std::io::Error) -> ztensor_io::Error {
    ztensor_io::Error::io(format!("reading tensor {name:?}"), None, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of scale `scale` whose element `e` has code `codes[e]`, packed as ggml packs it.
    fn ggml_block(scale: u8, codes: &[u8; 32]) -> Vec<u8> {
        let mut block = vec![scale];
        block.extend((0..16).map(|j| codes[j] | (codes[j + 16] << 4)));
        block
    }

    #[test]
    fn codes_move_into_element_order_and_scales_part_from_them() {
        let codes: [u8; 32] = std::array::from_fn(|e| u8::try_from(e * 7 % 16).unwrap());
        let blocks = [ggml_block(127, &codes), ggml_block(3, &[15; 32])].concat();
        let (mut data, mut scales) = (Vec::new(), Vec::new());
        repack("t", 0, &blocks, &mut data, &mut scales).unwrap();
        assert_eq!(scales, [127, 3]);
        assert_eq!(data.len(), 32);
        // Element e of the tensor sits at bits 4e..4e+4 of the little-endian stream.
        for e in 0..32 {
            assert_eq!((data[e / 2] >> (4 * (e % 2))) & 0x0F, codes[e], "element {e}");
        }
        assert!(data[16..].iter().all(|&b| b == 0xFF));
    }

    #[test]
    fn a_scale_of_0xff_is_refused_naming_the_block() {
        let blocks = [ggml_block(1, &[0; 32]), ggml_block(0xFF, &[0; 32])].concat();
        let e = repack("w", 10, &blocks, &mut Vec::new(), &mut Vec::new()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("block 11") && text.contains("0xFF"), "{text}");
    }

    #[test]
    fn rows_that_are_not_whole_blocks_stay_bytes() {
        let mx = super::super::ggml_type(MXFP4).unwrap();
        assert_eq!(View::of(Ok(mx), &[2, 64], Blocks::Layouts), View::Mx);
        assert_eq!(View::of(Ok(mx), &[64, 2], Blocks::Layouts), View::Bytes(mx));
        assert_eq!(View::of(Ok(mx), &[2, 64], Blocks::Bytes), View::Bytes(mx));
        let q4 = super::super::ggml_type(2).unwrap();
        assert_eq!(View::of(Ok(q4), &[32], Blocks::Layouts), View::Opaque(q4));
        assert_eq!(View::of(Err(77), &[32], Blocks::Layouts), View::Unknown(77));
    }

    #[test]
    fn pieces_hand_all_the_data_then_all_the_scales() {
        let blocks: Vec<u8> = (0..3).flat_map(|b| ggml_block(b, &[b; 32])).collect();
        let source: &[u8] = &blocks;
        let mut seen = Vec::new();
        let tensor = ("t", 0, blocks.len() as u64);
        mx_pieces(&source, tensor, &["data", "scales"], 1 << 20, &mut |role, bytes| {
            seen.push((role.to_owned(), bytes.to_vec()));
            Ok(())
        })
        .unwrap();
        let roles: Vec<&str> = seen.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["data", "scales"]);
        assert_eq!(seen[0].1.len(), 48);
        assert_eq!(seen[1].1, [0, 1, 2]);
        assert_eq!(seen[0].1[16..32], [0x11; 16]);
        // Pieces of at most 16 bytes of codes: a block at a time; one role alone.
        let mut sizes = Vec::new();
        mx_pieces(&source, tensor, &["scales"], 16, &mut |role, bytes| {
            sizes.push((role.to_owned(), bytes.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(sizes, vec![("scales".to_owned(), 1); 3]);
    }
}
