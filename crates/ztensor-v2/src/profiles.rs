//! The metadata rules of the profiles zTensor 2 registers besides `dense` and CSR
//! (`spec/ztensor-2.md` §4.2–§4.5): `zt.sparse_coo/1`, `zt.quant_group/1`, `zt.mx/1` and
//! `gguf.<type>/1`. Each checks its parts, their types and sizes and its required attributes;
//! a failure is `layout_rule`. Where the profile text contradicts itself, the reading this
//! project takes is `spec/ztensor-2.md` §10's.

use ztensor_format::ValueRef;
use ztensor_format::attributes::Item;

use crate::error::{Error, Result, Rule};
use crate::manifest::{Dtype, Object, Part, elements, logical};

/// The ggml block types `gguf.<type>/1` names (§4.5).
pub const GGUF_TYPES: &[&str] = &[
    "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k",
    "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs",
    "mxfp4",
];

fn rule(layout: &str, message: impl std::fmt::Display) -> Error {
    Error::rule(Rule::LayoutRule, format!("{layout}: {message}"))
}

/// The stored size of `n` elements of `part` (its logical type's, else its storage type's);
/// `None` for a logical type not registered (or an overflow).
fn size_of(part: &Part, n: u64) -> Option<u64> {
    match &part.logical {
        Some(name) => logical(name).and_then(|(_, size)| size(n)),
        None => n.checked_mul(part.dtype.width()),
    }
}

/// Object `o`'s attribute `key`.
fn attribute<'o>(o: &'o Object, key: &str) -> Option<ValueRef<'o>> {
    o.attributes.as_deref()?.get(key)
}

/// A map's field `key` (`None` when `map` is not a map).
fn field<'v>(map: ValueRef<'v>, key: &str) -> Option<ValueRef<'v>> {
    map.as_map()?.find(|(k, _)| k.as_text() == Some(key)).map(|(_, v)| v)
}

/// The parts of `o` are exactly `names` (sorted).
fn parts_are(o: &Object, names: &[&str]) -> bool {
    o.parts.keys().map(AsRef::as_ref).eq(names.iter().copied())
}

/// Checks `o` against its profile when its layout is one of those above; other layouts have
/// no rules here.
pub(crate) fn check(o: &Object) -> Result<()> {
    match &*o.layout {
        "zt.sparse_coo/1" => coo(o),
        "zt.mx/1" => mx(o),
        "zt.quant_group/1" => quant_group(o),
        layout => match layout.strip_prefix("gguf.").and_then(|l| l.strip_suffix("/1")) {
            Some(t) if GGUF_TYPES.contains(&t) => gguf(o),
            _ => Ok(()),
        },
    }
}

/// §4.2: parts `coords` and `values`; `coords` u32 or u64 with no type, whole tuples of the
/// rank; one value per tuple.
fn coo(o: &Object) -> Result<()> {
    let layout = "zt.sparse_coo/1";
    if !parts_are(o, &["coords", "values"]) {
        return Err(rule(layout, "the parts are exactly coords and values"));
    }
    if o.shape.is_empty() {
        return Err(rule(layout, "the rank is at least 1"));
    }
    let (coords, values) = (&o.parts["coords"], &o.parts["values"]);
    if !matches!(coords.dtype, Dtype::U32 | Dtype::U64) || coords.logical.is_some() {
        return Err(rule(layout, "coords are u32 or u64, with no logical type"));
    }
    let tuple = coords.dtype.width() * o.shape.len() as u64;
    if coords.decoded_len() % tuple != 0 {
        return Err(rule(
            layout,
            format!("coords are not whole tuples of {} indices", o.shape.len()),
        ));
    }
    let nnz = coords.decoded_len() / tuple;
    if size_of(values, nnz).is_some_and(|size| size != values.decoded_len()) {
        return Err(rule(layout, format!("the values are not one per coordinate tuple ({nnz})")));
    }
    Ok(())
}

/// §4.4: parts `data` and `scales` (u8, `f8_e8m0`); `data` of a microscaling element type;
/// attributes `block_size` (at least 2, dividing the blocked axis), `axis` (default the last),
/// `scale_form` `e8m0_exponent`; one scale per block.
fn mx(o: &Object) -> Result<()> {
    let layout = "zt.mx/1";
    if !parts_are(o, &["data", "scales"]) {
        return Err(rule(layout, "the parts are exactly data and scales"));
    }
    let (data, scales) = (&o.parts["data"], &o.parts["scales"]);
    if scales.dtype != Dtype::U8 || scales.logical.as_deref() != Some("f8_e8m0") {
        return Err(rule(layout, "scales are u8 of logical type f8_e8m0"));
    }
    match (data.dtype, data.logical.as_deref()) {
        (Dtype::U8, Some("f4_e2m1" | "f8_e4m3fn" | "f8_e5m2")) | (Dtype::I8, None) => {}
        // An element type this registry does not hold: decoding is refused, not the file.
        (_, Some(t)) if logical(t).is_none() => {}
        _ => {
            return Err(rule(
                layout,
                "data is u8 of f4_e2m1, f8_e4m3fn or f8_e5m2, or i8 with no logical type",
            ));
        }
    }
    let rank = o.shape.len() as u64;
    let block = attribute(o, "block_size").and_then(|v| v.as_u64());
    let Some(block) = block.filter(|&b| b >= 2) else {
        return Err(rule(layout, "attribute block_size is an integer of at least 2"));
    };
    let axis = match attribute(o, "axis") {
        None => rank.checked_sub(1),
        Some(v) => v.as_u64().filter(|&a| a < rank),
    };
    let Some(axis) = axis else {
        return Err(rule(layout, "attribute axis is an integer below the rank"));
    };
    let along = usize::try_from(axis).ok().and_then(|a| o.shape.get(a)).copied().unwrap_or(0);
    if along % block != 0 {
        return Err(rule(layout, format!("block_size {block} does not divide dimension {along}")));
    }
    if attribute(o, "scale_form").and_then(|v| v.as_text()) != Some("e8m0_exponent") {
        return Err(rule(layout, "attribute scale_form is \"e8m0_exponent\""));
    }
    let n = elements(&o.shape).ok_or_else(|| Error::rule(Rule::Shape, "the shape overflows"))?;
    if size_of(data, n).is_some_and(|size| size != data.decoded_len()) {
        return Err(rule(layout, format!("data does not hold {n} elements")));
    }
    if scales.decoded_len() != n / block {
        return Err(rule(layout, format!("scales are not one per block ({})", n / block)));
    }
    Ok(())
}

/// §4.5: one part `data`, u8 with no type, the ggml blocks verbatim; attributes
/// `elems_per_block` (dividing the element count and the last dimension) and `block_bytes`.
fn gguf(o: &Object) -> Result<()> {
    let layout = &*o.layout;
    let Some(data) = o.parts.get("data").filter(|_| o.parts.len() == 1) else {
        return Err(rule(layout, "the one part is data"));
    };
    if data.dtype != Dtype::U8 || data.logical.is_some() {
        return Err(rule(layout, "data is u8 with no logical type"));
    }
    let uint = |key: &str| attribute(o, key).and_then(|v| v.as_u64()).filter(|&n| n >= 1);
    let (Some(per_block), Some(block_bytes)) = (uint("elems_per_block"), uint("block_bytes"))
    else {
        return Err(rule(
            layout,
            "attributes elems_per_block and block_bytes are integers of at least 1",
        ));
    };
    let n = elements(&o.shape).ok_or_else(|| Error::rule(Rule::Shape, "the shape overflows"))?;
    if n % per_block != 0 || o.shape.last().is_some_and(|&d| d % per_block != 0) {
        return Err(rule(
            layout,
            format!("elems_per_block {per_block} does not divide the last dimension and the count"),
        ));
    }
    if (n / per_block).checked_mul(block_bytes) != Some(data.decoded_len()) {
        return Err(rule(
            layout,
            format!("data is not {} blocks of {block_bytes} bytes", n / per_block),
        ));
    }
    Ok(())
}

/// §4.3, as §10 reads it: parts `data`, `scales` and `zeros` (only for a zero point held as a
/// tensor); attributes `bits`, `group_size`, `axis`, `packing`, `scale_form`, `zero_point`;
/// the sizes they give.
fn quant_group(o: &Object) -> Result<()> {
    let layout = "zt.quant_group/1";
    let bad = |m: &str| rule(layout, m);
    let uint = |key: &str| attribute(o, key).and_then(|v| v.as_u64());
    let zero_point =
        attribute(o, "zero_point").ok_or_else(|| bad("attribute zero_point is a map"))?;
    let form = field(zero_point, "form").and_then(|v| v.as_text());
    let tensor = match form {
        Some("none") => false,
        Some("implied") => {
            let integer = field(zero_point, "value").map(|v| v.item());
            if !matches!(integer, Some(Item::Integer(_))) {
                return Err(bad("an implied zero point has an integer value"));
            }
            false
        }
        Some("tensor") => {
            let packing = field(zero_point, "packing").and_then(|v| v.as_text());
            if !matches!(packing, Some("same_as_data" | "plain")) {
                return Err(bad("a zero-point tensor's packing is same_as_data or plain"));
            }
            true
        }
        _ => return Err(bad("zero_point.form is none, implied or tensor")),
    };
    let expected: &[&str] = if tensor { &["data", "scales", "zeros"] } else { &["data", "scales"] };
    if !parts_are(o, expected) {
        return Err(bad(
            "the parts are data and scales, and zeros exactly for a zero-point tensor",
        ));
    }
    let rank = o.shape.len() as u64;
    let Some(bits) = uint("bits").filter(|b| [2, 3, 4, 5, 6, 8].contains(b)) else {
        return Err(bad("attribute bits is 2, 3, 4, 5, 6 or 8"));
    };
    let Some(axis) = uint("axis").filter(|&a| a < rank) else {
        return Err(bad("attribute axis is an integer below the rank"));
    };
    let packing = attribute(o, "packing").ok_or_else(|| bad("attribute packing is a map"))?;
    let word = match field(packing, "word").and_then(|v| v.as_text()) {
        Some("u8") => Dtype::U8,
        Some("u16") => Dtype::U16,
        Some("u32") => Dtype::U32,
        Some("u64") => Dtype::U64,
        _ => return Err(bad("packing.word is u8, u16, u32 or u64")),
    };
    let data = &o.parts["data"];
    let unsigned = match data.dtype {
        Dtype::I8 => Dtype::U8,
        Dtype::I16 => Dtype::U16,
        Dtype::I32 => Dtype::U32,
        Dtype::I64 => Dtype::U64,
        other => other,
    };
    if unsigned != word || data.logical.is_some() {
        return Err(bad(
            "data is of packing.word's type (or its signed twin), with no logical type",
        ));
    }
    if !matches!(field(packing, "order").and_then(|v| v.as_text()), Some("lsb_first" | "msb_first"))
    {
        return Err(bad("packing.order is lsb_first or msb_first"));
    }
    let word_bits = 8 * word.width();
    if word_bits % bits != 0 {
        return Err(bad("bits divide the word's width"));
    }
    let per_word = word_bits / bits;
    if field(packing, "per_word").and_then(|v| v.as_u64()) != Some(per_word) {
        return Err(bad("packing.per_word is the word's width over bits"));
    }
    let scales = &o.parts["scales"];
    let scales_ok = match attribute(o, "scale_form").and_then(|v| v.as_text()) {
        Some("f32_factors") => {
            matches!(scales.dtype, Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64)
                && scales.logical.is_none()
        }
        Some("f16_factors") => scales.dtype == Dtype::F16 && scales.logical.is_none(),
        Some("e8m0_exponent") => {
            scales.dtype == Dtype::U8 && scales.logical.as_deref() == Some("f8_e8m0")
        }
        _ => return Err(bad("scale_form is f32_factors, f16_factors or e8m0_exponent")),
    };
    if !scales_ok {
        return Err(bad("the scales' type is not the one scale_form names"));
    }
    let codes =
        elements(&o.shape).ok_or_else(|| Error::rule(Rule::Shape, "the shape overflows"))?;
    let along = usize::try_from(axis).ok().and_then(|a| o.shape.get(a)).copied().unwrap_or(0);
    let Some(group_size) = uint("group_size") else {
        return Err(bad("attribute group_size is an integer"));
    };
    // Per-channel (0): one group along the axis.
    let groups = match group_size {
        0 => 1,
        g if along % g == 0 => along / g,
        _ => return Err(bad("group_size divides the dimension of the axis")),
    };
    let lanes = codes.checked_div(along).unwrap_or(0);
    if codes % per_word != 0 || codes / per_word * word.width() != data.decoded_len() {
        return Err(bad("data is not the codes packed into whole words"));
    }
    let scale_count = groups * lanes;
    if size_of(scales, scale_count) != Some(scales.decoded_len()) {
        return Err(bad("scales are not one per group and lane"));
    }
    if tensor {
        let zeros = &o.parts["zeros"];
        let same = field(zero_point, "packing").and_then(|v| v.as_text()) == Some("same_as_data");
        let size = if same {
            (scale_count % per_word == 0).then(|| scale_count / per_word * word.width())
        } else {
            size_of(zeros, scale_count)
        };
        if size != Some(zeros.decoded_len()) {
            return Err(bad("zeros are not one per group and lane"));
        }
    }
    Ok(())
}

/// The first coordinate tuple given twice in COO `coords` (structure of arrays: dimension `d`
/// of tuple `i` at `d·nnz + i`) of rank `rank`, if any: zTensor 2 holds each tuple once.
pub(crate) fn duplicate_tuple(rank: usize, coords: &[u64]) -> Option<Vec<u64>> {
    if rank == 0 {
        return None;
    }
    let nnz = coords.len() / rank;
    let tuple = |i: usize| (0..rank).map(|d| coords[d * nnz + i]).collect::<Vec<u64>>();
    let mut order: Vec<usize> = (0..nnz).collect();
    order.sort_unstable_by(|&a, &b| {
        (0..rank).map(|d| coords[d * nnz + a]).cmp((0..rank).map(|d| coords[d * nnz + b]))
    });
    order.windows(2).find(|w| tuple(w[0]) == tuple(w[1])).map(|w| tuple(w[0]))
}
