//! A zTensor 2 file as a [`TensorSource`]: its objects in the 1.2 object model, so that every
//! command, the engine and the Python package read it as they read any other input.
//!
//! Objects map as [`crate::model`] says: `dense`, CSR and COO (64-bit indices) to their 1.2
//! formats, other layouts carried under their id (read structurally), parts to components of
//! the same roles; `bool` becomes the 1.2 `bool` type, other logical types keep their names (a
//! dense `f4_e2m1` tensor is its packed bytes, two values a byte, as
//! [`ztensor_format::MxType`] says; a zTensor 1.x writer refuses it). Encodings this reader does
//! not decode and parts in shards are listed, with the reason they cannot be read.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ztensor_format::{Attributes, Encoding, ErrorKind as Rule1, Format, StorageType};
use ztensor_io::{ComponentData, ComponentInfo, ObjectData, ObjectInfo, ReadAt, TensorSource};

use crate::error::ErrorKind;
use crate::file::File;
use crate::manifest::{Dtype, Object};
use crate::model::{format_of, types_1x};

/// The 1.2 format object `o` is read as: [`format_of`] its layout, except that sparse layouts
/// with 32-bit indices (1.x indices are 64-bit) are carried under their zTensor 2 id, read
/// structurally, so that nothing is widened on the way.
fn format(o: &Object) -> Format {
    let index = match &*o.layout {
        "zt.sparse_csr/1" => o.parts.get("indices"),
        "zt.sparse_coo/1" => o.parts.get("coords"),
        _ => None,
    };
    if index.is_some_and(|p| p.dtype != Dtype::U64) {
        return Format::Unknown((&*o.layout).into());
    }
    format_of(&o.layout)
}

/// Why object `o` cannot be read into the 1.2 model here, if it cannot.
/// (`missing`: why a shard's bytes cannot be had, `None` when they can.)
fn unsupported(
    name: &str,
    o: &Object,
    missing: &dyn Fn(&str) -> Option<String>,
) -> Option<ztensor_format::Error> {
    let reason = |rule: Rule1, m: String| Some(ztensor_format::Error::new(rule, m).in_object(name));
    for (role, part) in &o.parts {
        if let Some(why) = part.shard.as_deref().and_then(missing) {
            return reason(Rule1::InvalidInput, format!("part {role:?}: {why}"));
        }
        match part.encoding.as_deref() {
            None | Some("zt.zstd-seekable/1") => {}
            Some(other) => {
                return reason(
                    Rule1::EncodingUnknown,
                    format!("part {role:?}: encoding {other:?} is not one this reader decodes"),
                );
            }
        }
    }
    None
}

/// How a v2 error reaches the 1.2 interface: a refusal is `Unsupported`, a broken rule the
/// nearest 1.x rule (the message names the v2 one), I/O as I/O.
fn to_io(name: &str, e: crate::Error) -> ztensor_io::Error {
    let message = e.to_string();
    match e.kind() {
        // (A file's own reading never fails with another source's error.)
        ErrorKind::Io(_) | ErrorKind::Source(_) => {
            ztensor_io::Error::io(message, None, std::io::Error::other(e))
        }
        ErrorKind::Unsupported | ErrorKind::Unrepresentable => ztensor_io::Error::unsupported(
            ztensor_format::Error::new(Rule1::EncodingUnknown, message).in_object(name),
        ),
        ErrorKind::Rule(rule) => {
            let nearest = match rule {
                crate::Rule::Digest => Rule1::DigestMismatch,
                crate::Rule::LayoutData => Rule1::BoolInvalid,
                _ => Rule1::DecodeFailed,
            };
            ztensor_io::Error::from(ztensor_format::Error::new(nearest, message).in_object(name))
        }
    }
}

impl<S: ReadAt> File<S> {
    fn object_at(&self, index: usize) -> Option<(&String, &Object)> {
        self.manifest()?.objects.at(index)
    }

    /// Object `index`, or `NotFound`.
    fn found(&self, index: usize) -> ztensor_io::Result<(&String, &Object)> {
        self.object_at(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))
    }
}

/// What a zTensor 2 file calls its format ([`TensorSource::format_name`]).
pub(crate) const FORMAT_NAME: &str = "zTensor 2";

impl<S: ReadAt> TensorSource for File<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(FORMAT_NAME)
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        self.manifest()?.attributes.as_ref().map(Cow::Borrowed)
    }

    fn len(&self) -> usize {
        self.manifest().map_or(0, |m| m.objects.len())
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.manifest()?.objects.position(name)
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (name, o) = self.object_at(index)?;
        let components = o
            .parts
            .iter()
            .map(|(role, p)| {
                let (dtype, logical_type) = types_1x(p);
                ComponentInfo {
                    role: Cow::Borrowed(&**role),
                    dtype: StorageType::Known(dtype),
                    logical_type,
                    decoded_len: Some(p.decoded_len()),
                    stored_len: p.blob.1,
                    offset: p.shard.is_none().then_some(p.blob.0),
                    encoding: if p.encoding.is_some() { Encoding::Zstd } else { Encoding::Raw },
                    digest: None,
                }
            })
            .collect();
        Some(ObjectInfo {
            name: Cow::Borrowed(name.as_str()),
            shape: Cow::Borrowed(o.shape.as_slice()),
            format: format(o),
            attributes: o.attributes.as_deref().map(Cow::Borrowed),
            components,
            unsupported: unsupported(name, o, &|shard| self.shard_missing(shard)),
            location: None,
        })
    }

    /// The parts' blobs that lie where the first part's does (this file, or one shard), in
    /// the order a read of the object takes them.
    fn stored_ranges(&self, index: usize) -> Option<ztensor_io::StoredRanges<'_>> {
        let (name, o) = self.object_at(index)?;
        let (first_role, first) = o.parts.iter().next()?;
        let source = self.bytes_of(name, first_role, first).ok()?;
        let ranges = o
            .parts
            .iter()
            .filter(|(_, p)| p.shard == first.shard)
            .filter_map(|(_, p)| Some(p.blob.0..p.blob.0.checked_add(p.blob.1)?))
            .collect();
        Some(ztensor_io::StoredRanges { source, ranges })
    }

    /// Dense and unknown layouts stream; CSR and COO objects are read whole, so that their
    /// structure is checked ([`TensorSource::check`]) before anything is made of them.
    fn reads_in_pieces(&self, index: usize) -> bool {
        self.object_at(index).is_some_and(|(name, o)| {
            !sparse(o) && unsupported(name, o, &|shard| self.shard_missing(shard)).is_none()
        })
    }

    fn check(&self, index: usize, data: &ObjectData<'_>) -> ztensor_io::Result<()> {
        match self.object_at(index) {
            Some((_, o)) => check_sparse(data, &o.layout),
            None => Ok(()),
        }
    }

    /// An object the 1.2 model cannot hold (a dense FP4 tensor) still has its bytes checked
    /// part by part, as [`File::verify`] checks them: digest, seek table and logical-type
    /// rules. Only what was truly not checked (an encoding not decoded here, a shard not
    /// found) comes back `Unsupported`, and only once every part that could be checked was.
    /// A blob that several parts share is decoded once ([`File::check_part`]), and the file's
    /// checks together are held to the expansion budget of its limits
    /// ([`File::check_expansion`]): every object is refused when they would pass it.
    fn verify(&self, index: usize) -> ztensor_io::Result<Vec<ztensor_io::Decoded>> {
        let (name, o) = self.found(index)?;
        if let Err(e) = self.within_budget() {
            // A seek table that breaks its rules (claiming a terabyte, say) is the fault to
            // name before the budget it would pass: it is found by reading the table alone.
            for (role, p) in o.parts.iter() {
                if p.encoding.as_deref() == Some(crate::seekable::ID)
                    && let Err(broken) = self.seek_table(name, role)
                    && broken.broken().is_some()
                {
                    return Err(to_io(name, broken));
                }
            }
            return Err(in_object(name, e));
        }
        let decoded = |role: &str, part: &crate::manifest::Part, len: u64| {
            let (dtype, logical_type) = types_1x(part);
            ztensor_io::Decoded { role: role.to_owned(), dtype, logical_type, len }
        };
        if let Some(reason) = unsupported(name, o, &|shard| self.shard_missing(shard)) {
            let mut unchecked = false;
            for (role, p) in o.parts.iter() {
                let readable = p.shard.as_deref().is_none_or(|s| self.shard_missing(s).is_none())
                    && p.encoding.as_deref().is_none_or(|e| e == crate::seekable::ID);
                if !readable {
                    unchecked = true;
                    continue;
                }
                File::verify(self, name, role).map_err(|e| to_io(name, e))?;
            }
            if unchecked || sparse(o) {
                return Err(ztensor_io::Error::unsupported(reason));
            }
            return Ok(o.parts.iter().map(|(role, p)| decoded(role, p, p.decoded_len())).collect());
        }
        if sparse(o) {
            // Read whole: `read` checks the structure.
            let data = TensorSource::read(self, index)?;
            return Ok(o
                .parts
                .iter()
                .map(|(role, p)| {
                    let len = data.components.get(&**role).map_or(0, |c| c.bytes.len() as u64);
                    decoded(role, p, len)
                })
                .collect());
        }
        let mut out = Vec::with_capacity(o.parts.len());
        for (role, p) in o.parts.iter() {
            let check = self.check_part(name, role, false).map_err(|e| to_io(name, e))?;
            out.push(decoded(role, p, check.decoded_len));
        }
        Ok(out)
    }

    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let (name, o) = self.found(index)?;
        if let Some(reason) = unsupported(name, o, &|shard| self.shard_missing(shard)) {
            return Err(ztensor_io::Error::unsupported(reason));
        }
        // The caller's own error comes back as it was.
        let mut failed = None;
        let outcome = File::read_part(self, name, role, piece, &mut |bytes| {
            each(bytes).map_err(|e| {
                failed = Some(e);
                crate::Error::unsupported("stopped by the caller")
            })
        });
        match (outcome, failed) {
            (_, Some(e)) => Err(e),
            (Err(e), None) => Err(to_io(name, e)),
            (Ok(_), None) => Ok(()),
        }
    }

    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let (_, o) = self.found(index)?;
        for role in o.parts.keys() {
            TensorSource::read_part(self, index, role, piece, &mut |bytes| each(role, bytes))?;
        }
        Ok(())
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (name, o) = self.found(index)?;
        if let Some(reason) = unsupported(name, o, &|shard| self.shard_missing(shard)) {
            return Err(ztensor_io::Error::unsupported(reason));
        }
        // A CSR or COO object is held whole to check its structure: refused, before anything
        // is allocated, when its parts together pass the whole-decode limit.
        if sparse(o) {
            let total = o.parts.values().map(|p| p.decoded_len()).fold(0, u64::saturating_add);
            let limit = self.limits().whole_decode_limit();
            if total > limit {
                return Err(ztensor_io::Error::from(
                    ztensor_format::Error::new(
                        Rule1::DecodedTooLarge,
                        format!(
                            "its parts decode to {total} bytes, held whole to check its \
                             structure, above the limit of {limit}"
                        ),
                    )
                    .in_object(name),
                ));
            }
        }
        // Digests and the logical type's rules checked on the bytes that are returned.
        let mut components = BTreeMap::new();
        for (role, part) in &o.parts {
            let (bytes, _) = self.verified(name, role).map_err(|e| to_io(name, e))?;
            let (dtype, logical_type) = types_1x(part);
            components.insert(
                role.to_string(),
                ComponentData { dtype, logical_type, bytes: Cow::Owned(bytes) },
            );
        }
        let data = ObjectData {
            name: name.clone(),
            shape: o.shape.clone(),
            format: format(o),
            attributes: o.attributes.as_deref().map(Cow::Borrowed),
            components,
        };
        check_sparse(&data, &o.layout)?;
        Ok(data)
    }
}

/// A refusal of the file's (`e`) for object `name`.
fn in_object(name: &str, e: ztensor_io::Error) -> ztensor_io::Error {
    match e.format_error() {
        Some(f) => {
            ztensor_format::Error::new(f.kind(), f.message().to_owned()).in_object(name).into()
        }
        None => e,
    }
}

/// Whether `o` is CSR or COO (whatever its index width): read whole, its structure checked.
fn sparse(o: &Object) -> bool {
    matches!(&*o.layout, "zt.sparse_csr/1" | "zt.sparse_coo/1")
}

/// The data rules of a CSR or COO object (zTensor 2 `layout`; 32- or 64-bit indices) read into
/// the 1.2 model: those of the 1.x reader ([`ztensor_io::check_sparse`], strictly: zTensor 2 has
/// no unsorted CSR), and a COO object's tuples given once each.
fn check_sparse(data: &ObjectData<'_>, layout: &str) -> ztensor_io::Result<()> {
    let format = match layout {
        "zt.sparse_csr/1" => Format::SparseCsr,
        "zt.sparse_coo/1" => Format::SparseCoo,
        _ => return Ok(()),
    };
    // The 1.x rule broken, and the zTensor 2 rule it is part of.
    let coords = ztensor_io::check_sparse(data, &format, true).map_err(|e| {
        let Some(f) = e.format_error() else { return e };
        let mut two =
            ztensor_format::Error::new(f.kind(), format!("{} [layout_data]", f.message()));
        if let Some(object) = f.object() {
            two = two.in_object(object);
        }
        if let Some(role) = f.component() {
            two = two.in_component(role);
        }
        ztensor_io::Error::from(two)
    })?;
    if let Some(coords) = coords
        && let Some(tuple) = crate::profiles::duplicate_tuple(data.shape.len(), &coords)
    {
        return Err(ztensor_io::Error::from(
            ztensor_format::Error::new(
                Rule1::DecodeFailed,
                format!(
                    "coordinates {tuple:?} are given twice; a zTensor 2 COO object holds each \
                     once [layout_data]"
                ),
            )
            .in_object(&data.name),
        ));
    }
    Ok(())
}
