//! Validating a parsed manifest as a whole (§2.8), the layouts' own rules included.

use std::collections::BTreeMap;

use crate::error::{Error, Result, Rule};

use super::types::*;

/// The stored size of `n` elements of `part` (by its logical type, else its storage type), or
/// `None` for a logical type not in the registry (or an overflow).
fn stored_size(part: &Part, n: u64) -> Option<u64> {
    match &part.logical {
        Some(name) => logical(name).and_then(|(_, size)| size(n)),
        None => n.checked_mul(part.dtype.width()),
    }
}

/// Validates the manifest as a whole (§2.8): shapes, blob placement and bounds against a file
/// whose blobs must end by `region_end` (its size less the footer), shard references, the
/// rules of the layouts this reader knows, and that blobs of one file are identical or
/// disjoint (the manifest's own blob, `manifest`, included).
///
/// # Errors
/// `shape`, `blob_alignment`, `shard_ref`, `blob_bounds`, `layout_rule`, `dense_size` or
/// `blob_overlap`.
pub fn validate(m: &Manifest, region_end: u64, manifest: (u64, u64)) -> Result<()> {
    let mut ranges: BTreeMap<Option<&str>, Vec<(u64, u64)>> = BTreeMap::new();
    ranges.entry(None).or_default().push(manifest);
    for (name, o) in &m.objects {
        let at = |e: Error| e.within(&format!("object {name:?}"));
        if o.shape.len() > MAX_RANK {
            return Err(at(Error::rule(
                Rule::Shape,
                format!("rank {} is above {MAX_RANK}", o.shape.len()),
            )));
        }
        let n = elements(&o.shape).ok_or_else(|| {
            at(Error::rule(Rule::Shape, "the dimensions' product overflows 64 bits"))
        })?;
        for (part_name, p) in &o.parts {
            let (offset, len) = p.blob;
            if offset % ALIGNMENT != 0 || offset < ALIGNMENT {
                return Err(at(Error::rule(
                    Rule::BlobAlignment,
                    format!(
                        "part {part_name:?}: offset {offset} is not a multiple of 4096 at or after 4096"
                    ),
                )));
            }
            let end = match &p.shard {
                None => region_end,
                Some(s) => {
                    let shard = m.shards.get(&**s).ok_or_else(|| {
                        at(Error::rule(
                            Rule::ShardRef,
                            format!("part {part_name:?}: shard {s:?} is not in the table"),
                        ))
                    })?;
                    shard.size.saturating_sub(40)
                }
            };
            if offset.checked_add(len).is_none_or(|e| e > end) {
                return Err(at(Error::rule(
                    Rule::BlobBounds,
                    format!("part {part_name:?}: bytes {offset}+{len} pass {end}"),
                )));
            }
            ranges.entry(p.shard.as_deref()).or_default().push(p.blob);
        }
        layout_rules(o, n).map_err(at)?;
    }
    for (file, mut list) in ranges {
        list.retain(|&(_, len)| len > 0);
        list.sort_unstable();
        list.dedup();
        for pair in list.windows(2) {
            let ((a, alen), (b, _)) = (pair[0], pair[1]);
            if a + alen > b {
                let file = file.map_or_else(|| "this file".to_owned(), |s| format!("shard {s:?}"));
                return Err(Error::rule(
                    Rule::BlobOverlap,
                    format!("blobs at {a} and {b} of {file} overlap without being the same"),
                ));
            }
        }
    }
    Ok(())
}

/// The metadata rules of the layouts this reader knows (`dense`, `zt.sparse_csr/1`, and the
/// profiles of [`crate::profiles`]); any other layout is read structurally only.
fn layout_rules(o: &Object, n: u64) -> Result<()> {
    let names: Vec<&str> = o.parts.keys().map(AsRef::as_ref).collect();
    match &*o.layout {
        "dense" => {
            let Some(data) = o.parts.get("data").filter(|_| names == ["data"]) else {
                return Err(Error::rule(
                    Rule::LayoutRule,
                    "a dense object has exactly one part, `data`",
                ));
            };
            match stored_size(data, n) {
                Some(size) if size != data.decoded_len() => Err(Error::rule(
                    Rule::DenseSize,
                    format!(
                        "{n} elements are {size} bytes, and `data` holds {}",
                        data.decoded_len()
                    ),
                )),
                Some(_) => Ok(()),
                // A logical type this registry does not hold: its size is not known here.
                None if data.logical.as_deref().is_some_and(|l| logical(l).is_none()) => Ok(()),
                None => Err(Error::rule(Rule::DenseSize, "the data's size overflows 64 bits")),
            }
        }
        "zt.sparse_csr/1" => {
            let rule = |m: &str| Error::rule(Rule::LayoutRule, m.to_owned());
            if names != ["indices", "indptr", "values"] {
                return Err(rule("a CSR object has exactly the parts values, indices and indptr"));
            }
            if o.shape.len() != 2 {
                return Err(rule("a CSR object has rank 2"));
            }
            let (values, indices, indptr) =
                (&o.parts["values"], &o.parts["indices"], &o.parts["indptr"]);
            if !matches!(indices.dtype, Dtype::U32 | Dtype::U64) || indices.logical.is_some() {
                return Err(rule("CSR indices are u32 or u64, with no logical type"));
            }
            if indptr.dtype != indices.dtype || indptr.logical.is_some() {
                return Err(rule("CSR indptr has the indices' type, with no logical type"));
            }
            let w = indices.dtype.width();
            let rows = o.shape[0]
                .checked_add(1)
                .ok_or_else(|| Error::rule(Rule::Shape, "the row count overflows"))?;
            if rows.checked_mul(w) != Some(indptr.decoded_len()) {
                return Err(rule("CSR indptr holds one entry per row and one more"));
            }
            if indices.decoded_len() % w != 0 {
                return Err(rule("CSR indices are not whole entries"));
            }
            let nnz = indices.decoded_len() / w;
            if let Some(size) = stored_size(values, nnz)
                && size != values.decoded_len()
            {
                return Err(rule("CSR values are not one per index"));
            }
            Ok(())
        }
        _ => crate::profiles::check(o),
    }
}
