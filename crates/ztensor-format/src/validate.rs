//! Manifest → [`ValidatedManifest`]: every file- and object-level rule of `spec/rules.md`.
//!
//! A `ValidatedManifest` can only be built here, so code holding one may rely on: every blob
//! lies inside the data area, starts past the header at a multiple of 64, and is either disjoint
//! from or identical to every other blob; shapes have no overflowing byte sizes; dense and
//! sparse sizes agree with shapes wherever the manifest states them; names are unique. Objects
//! that fail an object-level rule are kept, marked unsupported, with the reason.

use crate::digest::Digest;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::framing::{HEADER_LEN, ManifestLocation};
use crate::layout::ALIGNMENT;
use crate::limits::Options;
use crate::names::NameIndex;

use crate::manifest::{ByteOrder, Component, Encoding, Format, Manifest, Object, Packing, Version};

mod sizes;

use sizes::{coo_rank, csr_rows, overflow};
pub use sizes::{decoded_len, element_count, element_size};

/// A manifest that passed validation against a file of known length, with what validation
/// learned about each object.
#[derive(Debug, Clone)]
pub struct ValidatedManifest {
    manifest: Manifest,
    location: ManifestLocation,
    /// The objects that cannot be decoded, by index in manifest order, with the reason: few,
    /// so not a slot per object.
    unsupported: Vec<(usize, Error)>,
    /// Object indices by name, for lookups without a second copy of every name.
    by_name: NameIndex,
    /// Objects a lookup by name never finds: an earlier one has the same name.
    shadowed: Vec<usize>,
}

/// One object of a [`ValidatedManifest`], with its validation results.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    object: &'a Object,
    unsupported: Option<&'a Error>,
    version: Version,
}

impl<'a> ObjectRef<'a> {
    /// The object.
    pub fn object(&self) -> &'a Object {
        self.object
    }

    /// The object's name.
    pub fn name(&self) -> &'a str {
        &self.object.name
    }

    /// Why this object cannot be decoded (unknown dtype, encoding, byte order or layout, a
    /// malformed digest, a decoded size above the limit), or `None` when it can.
    pub fn unsupported(&self) -> Option<&'a Error> {
        self.unsupported
    }

    /// The decoded byte length of component `role`, when the manifest determines it: the
    /// length of raw components, `uncompressed_length` of zstd ones, or the size the shape
    /// implies for dense data. `None` when only decoding can tell.
    pub fn decoded_len(&self, role: &str) -> Option<u64> {
        let (role, c) = self.object.components.get_key_value(role)?;
        decoded_len(self.object, role, c)
    }

    /// Every component's role and [`decoded_len`](ObjectRef::decoded_len), in role order: for
    /// going through all of them without a lookup each.
    pub fn decoded_lens(&self) -> impl Iterator<Item = (&'a str, Option<u64>)> + use<'a> {
        let object: &'a Object = self.object;
        object.components.iter().map(move |(r, c)| (r, decoded_len(object, r, c)))
    }

    /// The version of the file the object comes from.
    pub fn version(&self) -> Version {
        self.version
    }
}

impl ValidatedManifest {
    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Gives the manifest back.
    pub fn into_manifest(self) -> Manifest {
        self.manifest
    }

    /// Where the manifest lies in the file.
    pub fn location(&self) -> ManifestLocation {
        self.location
    }

    /// The version.
    pub fn version(&self) -> Version {
        self.manifest.version
    }

    /// The padding of the file: the ranges of its data area (from the end of the header to the
    /// manifest) that no component's stored bytes cover, in file order. Writers of 1.1 and 1.2
    /// must zero them (rule `padding_nonzero`, enforced in strict mode by readers that read
    /// them: [`check_padding`]); 0.1 leaves their value undefined, so none is given for it.
    pub fn padding(&self) -> Vec<std::ops::Range<u64>> {
        if self.manifest.version == Version::V0_1 {
            return Vec::new();
        }
        let mut spans: Vec<(u64, u64)> = self
            .manifest
            .objects
            .iter()
            .flat_map(|o| o.components.iter().map(|(_, c)| c))
            .filter(|c| c.length > 0)
            .map(|c| (c.offset, c.offset.saturating_add(c.length)))
            .collect();
        spans.sort_unstable();
        let mut gaps = Vec::new();
        let mut at = HEADER_LEN;
        for (start, end) in spans.into_iter().chain([(self.location.offset, self.location.offset)])
        {
            if start > at {
                gaps.push(at..start.min(self.location.offset));
            }
            at = at.max(end);
        }
        gaps.retain(|g| g.start < g.end);
        gaps
    }

    /// Every object, in manifest order.
    pub fn objects(&self) -> impl ExactSizeIterator<Item = ObjectRef<'_>> + '_ {
        (0..self.manifest.objects.len()).map(|i| self.object_ref(i))
    }

    /// The object at `index` of [`ValidatedManifest::objects`].
    pub fn object_at(&self, index: usize) -> Option<ObjectRef<'_>> {
        (index < self.manifest.objects.len()).then(|| self.object_ref(index))
    }

    /// The object at `index`, which is in range.
    fn object_ref(&self, index: usize) -> ObjectRef<'_> {
        let object = &self.manifest.objects[index];
        let unsupported = self
            .unsupported
            .binary_search_by_key(&index, |(i, _)| *i)
            .ok()
            .map(|at| &self.unsupported[at].1);
        ObjectRef { object, unsupported, version: self.manifest.version }
    }

    /// Where the object called `name` is in [`ValidatedManifest::objects`].
    pub fn index_of(&self, name: &str) -> Option<usize> {
        let objects = &self.manifest.objects;
        self.by_name.find(name, |i| &objects[i].name)
    }

    /// The object called `name`.
    pub fn get(&self, name: &str) -> Option<ObjectRef<'_>> {
        self.index_of(name).map(|i| self.object_ref(i))
    }

    /// Objects that a lookup by name never finds, because an earlier object has the same name.
    /// Only v0.1 files have them (v1.x names are map keys), as the reference v0.1 writer makes
    /// them; strict mode refuses them (`duplicate_name`). Otherwise they are listed by
    /// [`ValidatedManifest::objects`] and readable through their handles, while
    /// [`ValidatedManifest::get`] finds the first, as a scan from the start would.
    pub fn shadowed(&self) -> impl Iterator<Item = ObjectRef<'_>> {
        self.shadowed.iter().map(|&i| self.object_ref(i))
    }

    /// For each object, in manifest order, the index of the first object stored exactly like
    /// it: a dense object with one split component whose stored bytes, encoding, types, digest
    /// and decoded length are all the same, so that decoding, checking or hashing one does it
    /// for both. Objects may legally share blobs, and a file of many aliases of one large blob
    /// should cost one decode, not one per alias. Every other object is its own.
    pub fn aliases(&self) -> Vec<usize> {
        let objects = &self.manifest.objects;
        // The first object stored at each range, and (rare) the first of each other way of
        // reading that range. Empty blobs cost nothing to decode: a file of a million empty
        // tensors does not index them.
        let mut seen: std::collections::HashMap<(u64, u64), usize> =
            std::collections::HashMap::new();
        let mut variants: std::collections::HashMap<(u64, u64), Vec<usize>> =
            std::collections::HashMap::new();
        let mut first = Vec::with_capacity(objects.len());
        let mut unsupported = self.unsupported.iter().map(|(i, _)| *i).peekable();
        for (i, o) in objects.iter().enumerate() {
            let supported = unsupported.next_if_eq(&i).is_none();
            let single = (o.format == Format::Dense
                && o.packing == Packing::Split
                && o.components.len() == 1
                && supported)
                .then(|| o.components.iter().next())
                .flatten()
                .filter(|(_, c)| c.length > 0);
            let Some((role, c)) = single else {
                first.push(i);
                continue;
            };
            let same = |&j: &usize| {
                objects[j].components.get(role) == Some(c)
                    && self.object_ref(j).decoded_lens().eq(self.object_ref(i).decoded_lens())
            };
            let range = (c.offset, c.length);
            let j = *seen.entry(range).or_insert(i);
            if same(&j) {
                first.push(j);
                continue;
            }
            let others = variants.entry(range).or_default();
            match others.iter().copied().find(same) {
                Some(k) => first.push(k),
                None => {
                    others.push(i);
                    first.push(i);
                }
            }
        }
        first
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.manifest.objects.len()
    }

    /// Whether the file holds no objects.
    pub fn is_empty(&self) -> bool {
        self.manifest.objects.is_empty()
    }
}

/// The decoded byte length of component `c` (`role`) of `object`, when the manifest
/// determines it: its length when raw, its `uncompressed_length` when zstd, or for the data of
/// a dense object stored in zstd without one, the size its shape implies (validation has
/// checked that any stated size agrees). `None` when only decoding can tell.
/// Validates `manifest`, decoded from a file whose manifest sits at `location`.
///
/// # Errors
/// The first file-level rule broken, in manifest order, objects first and blob overlaps last.
pub fn validate(
    manifest: Manifest,
    location: ManifestLocation,
    options: &Options,
) -> Result<ValidatedManifest> {
    let limits = &options.limits;
    if manifest.version.container() != location.container {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "manifest version does not match its container",
        ));
    }
    if manifest.objects.len() > limits.max_objects {
        return Err(Error::new(ErrorKind::TooManyObjects, "more objects than the limit")
            .expected_found(format!("<= {}", limits.max_objects), manifest.objects.len()));
    }
    let objects = &manifest.objects;
    let mut by_name = NameIndex::with_capacity(objects.len());
    let mut shadowed = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        if by_name.insert(i, |j| &objects[j].name).is_some() {
            // The reference v0.1 writer writes such files and its reader lists both tensors:
            // read them, and let lookups find the first, unless strict.
            if options.strict {
                return Err(Error::new(ErrorKind::DuplicateName, "two objects share a name")
                    .in_object(&object.name));
            }
            shadowed.push(i);
        }
    }
    // Each object's decoded lengths, as the checks work them out (kept by no one after: they
    // follow from the manifest, see `decoded_len`).
    let mut decoded = Vec::new();
    let mut unsupported_objects = Vec::new();
    let mut blobs = Vec::new();
    for (i, object) in manifest.objects.iter().enumerate() {
        let checker = ObjectCheck { object, version: manifest.version, location, options };
        decoded.clear();
        let unsupported = checker.run(&mut decoded).map_err(|e| e.in_object(&object.name))?;
        if let Some(reason) = unsupported {
            unsupported_objects.push((i, reason));
        }
        for (role, c) in &object.components {
            if c.length > 0 {
                blobs.push((c.offset, c.offset + c.length, i, role));
            }
        }
    }
    check_overlaps(&mut blobs, &manifest)?;
    Ok(ValidatedManifest {
        manifest,
        location,
        unsupported: unsupported_objects,
        by_name,
        shadowed,
    })
}

/// Checks one object as [`validate`] checks each object of a manifest of `version` whose data
/// area ends at `data_end`: the file-level faults are errors; an object-level one (an unknown
/// dtype, say) is the reason returned, as a reader would mark the object unsupported. Names
/// are not compared with other objects' and blobs not with other blobs: that is the caller's.
///
/// # Errors
/// The first file-level rule the object breaks.
pub fn check_object(
    object: &Object,
    version: Version,
    data_end: u64,
    options: &Options,
) -> Result<Option<Error>> {
    let container = version.container();
    let location = ManifestLocation { container, offset: data_end, len: 0, file_len: data_end };
    let checker = ObjectCheck { object, version, location, options };
    let mut decoded = Vec::with_capacity(object.components.len());
    checker.run(&mut decoded).map_err(|e| e.in_object(&object.name))
}

/// Blobs must be pairwise disjoint or identical.
fn check_overlaps(blobs: &mut [(u64, u64, usize, &str)], manifest: &Manifest) -> Result<()> {
    // Stable, by range only: linear for the usual file whose blobs are already in order, and
    // ties keep manifest order, so reports are the same on every run.
    blobs.sort_by_key(|b| (b.0, b.1));
    let mut current: Option<(u64, u64, usize, &str)> = None;
    for &blob in blobs.iter() {
        match current {
            Some(cur) if blob.0 < cur.1 => {
                if (blob.0, blob.1) != (cur.0, cur.1) {
                    let other = &manifest.objects[cur.2].name;
                    return Err(Error::new(
                        ErrorKind::BlobPartialOverlap,
                        format!(
                            "blob [{}, {}) partly overlaps blob [{}, {}) of {other:?}/{:?}",
                            blob.0, blob.1, cur.0, cur.1, cur.3
                        ),
                    )
                    .in_object(&manifest.objects[blob.2].name)
                    .in_component(blob.3)
                    .at(blob.0));
                }
            }
            _ => current = Some(blob),
        }
    }
    Ok(())
}

struct ObjectCheck<'a> {
    object: &'a Object,
    version: Version,
    location: ManifestLocation,
    options: &'a Options,
}

impl ObjectCheck<'_> {
    /// Checks the object, appends its components' decoded lengths to `all_decoded`, and
    /// says why the object cannot be decoded, if it cannot.
    fn run(&self, all_decoded: &mut Vec<Option<u64>>) -> Result<Option<Error>> {
        let object = self.object;
        let limits = &self.options.limits;
        crate::manifest::check_name(&object.name, limits)?;
        if self.options.strict {
            if object.name.is_empty() {
                return Err(Error::new(ErrorKind::NameEmpty, "object name is empty"));
            }
            if object.name.contains('\0') {
                return Err(Error::new(ErrorKind::NameNul, "object name contains a NUL character"));
            }
        }
        if object.shape.len() > limits.max_rank {
            return Err(Error::new(
                ErrorKind::ShapeRank,
                "shape has more dimensions than the limit",
            )
            .field("shape")
            .expected_found(format!("rank <= {}", limits.max_rank), object.shape.len()));
        }
        let count = element_count(&object.shape).ok_or_else(|| overflow(&object.shape))?;

        let mut unsupported = None;
        let first = all_decoded.len();
        for (role, c) in &object.components {
            let reason = self.component(c, count).map_err(|e| e.in_component(role))?;
            if unsupported.is_none() {
                unsupported = reason.map(|e| e.in_object(&object.name).in_component(role));
            }
            let len = match c.encoding {
                Encoding::Raw => Some(c.length),
                Encoding::Zstd => c.uncompressed_length,
                Encoding::Unknown(_) => None,
            };
            all_decoded.push(len);
        }
        let decoded = &mut all_decoded[first..];
        if let Some(role) = self.required_roles_missing() {
            return Err(Error::new(
                ErrorKind::ComponentMissing,
                format!("{} object has no {role:?} component", object.format),
            ));
        }
        if self.options.strict
            && object.packing == Packing::Split
            && let Some(roles) = object.format.required_roles()
            && let Some(extra) = object.components.keys().find(|r| !roles.contains(r))
        {
            return Err(Error::new(
                ErrorKind::ComponentUnexpected,
                format!("{} objects define no role {extra:?}", object.format),
            ));
        }
        match (object.packing, &object.format) {
            (Packing::V0Single, Format::Unknown(layout)) if unsupported.is_none() => {
                unsupported = Some(
                    Error::new(
                        ErrorKind::LayoutUnknown,
                        format!("v0.1 layout {layout:?} is not understood"),
                    )
                    .in_object(&object.name),
                );
            }
            (Packing::V0Single, _) => self.v0_sparse()?,
            (Packing::Split, Format::Dense) => {
                let reason = self.dense(count, decoded)?;
                if unsupported.is_none() {
                    unsupported = reason.map(|e| e.in_object(&object.name).in_component("data"));
                }
            }
            (Packing::Split, Format::SparseCsr) => self.csr(decoded)?,
            (Packing::Split, Format::SparseCoo) => self.coo(decoded)?,
            _ => {}
        }
        Ok(unsupported)
    }

    fn required_roles_missing(&self) -> Option<&'static str> {
        let roles: &[&'static str] = match self.object.packing {
            Packing::V0Single => &["data"],
            Packing::Split => self.object.format.required_roles()?,
        };
        roles.iter().copied().find(|r| !self.object.components.contains_key(r))
    }

    /// Checks one component. File-level faults are errors; object-level faults are returned.
    fn component(&self, c: &Component, count: u64) -> Result<Option<Error>> {
        let data_end = self.location.offset;
        let end = c.offset.checked_add(c.length).filter(|&e| e <= data_end);
        let Some(_) = end else {
            return Err(Error::new(ErrorKind::BlobOutOfBounds, "blob extends past the data area")
                .field("length")
                .expected_found(
                    format!("offset + length <= {data_end}"),
                    format!("{} + {}", c.offset, c.length),
                )
                .at(c.offset));
        };
        if c.length > 0 && c.offset < HEADER_LEN {
            return Err(Error::new(
                ErrorKind::BlobOverlapsHeader,
                "blob starts inside the header magic",
            )
            .field("offset")
            .expected_found(format!(">= {HEADER_LEN}"), c.offset)
            .at(c.offset));
        }
        if !c.offset.is_multiple_of(ALIGNMENT) {
            return Err(Error::new(
                ErrorKind::BlobMisaligned,
                "blob offset is not a multiple of 64",
            )
            .field("offset")
            .expected_found("a multiple of 64", c.offset)
            .at(c.offset));
        }
        if let Some(t) = &c.logical_type
            && let (Some(need), Some(have)) = (t.storage(), c.dtype.known())
            && need != have
        {
            return Err(Error::new(
                ErrorKind::LogicalTypeMismatch,
                format!("logical type {t} needs dtype {need}"),
            )
            .field("dtype")
            .expected_found(need, have));
        }
        if let (Encoding::Raw, Some(n)) = (&c.encoding, c.uncompressed_length)
            && n != c.length
        {
            return Err(Error::new(
                ErrorKind::UncompressedLengthMismatch,
                "raw component states a different uncompressed_length",
            )
            .field("uncompressed_length")
            .expected_found(c.length, n));
        }
        if self.options.strict
            && self.version == Version::V1_2
            && c.encoding == Encoding::Zstd
            && c.uncompressed_length.is_none()
        {
            return Err(Error::new(
                ErrorKind::UncompressedLengthMissing,
                "v1.2 requires uncompressed_length on zstd components",
            )
            .field("uncompressed_length"));
        }
        if let Some(size) = element_size(c) {
            if count.checked_mul(size).is_none() {
                return Err(overflow(&self.object.shape));
            }
            let decoded = match c.encoding {
                Encoding::Raw => Some(c.length),
                _ => c.uncompressed_length,
            };
            if let Some(n) = decoded.filter(|_| self.object.packing == Packing::Split)
                && !n.is_multiple_of(size)
            {
                return Err(Error::new(
                    ErrorKind::ComponentLengthNotMultiple,
                    "size is not a whole number of elements",
                )
                .field(if c.encoding == Encoding::Raw { "length" } else { "uncompressed_length" })
                .expected_found(format!("a multiple of {size}"), n));
            }
        }
        // Object-level reasons, in a fixed order.
        let limit = self.options.limits.max_decoded_len;
        let reason = if c.dtype.known().is_none() {
            Some(
                Error::new(
                    ErrorKind::DtypeUnknown,
                    format!("unknown dtype {:?}", c.dtype.to_string()),
                )
                .field("dtype"),
            )
        } else if let Encoding::Unknown(e) = &c.encoding {
            Some(
                Error::new(ErrorKind::EncodingUnknown, format!("unknown encoding {e:?}"))
                    .field("encoding"),
            )
        } else if let ByteOrder::Unknown(b) = c.byte_order() {
            Some(
                Error::new(ErrorKind::EndiannessUnknown, format!("unknown data_endianness {b:?}"))
                    .field("data_endianness"),
            )
        } else if let Some(Digest::Malformed(d)) = &c.digest {
            Some(
                Error::new(ErrorKind::DigestMalformed, format!("malformed digest {d:?}"))
                    .field("digest"),
            )
        } else if c.encoding == Encoding::Zstd && c.uncompressed_length.is_some_and(|n| n > limit) {
            Some(
                Error::new(ErrorKind::DecodedTooLarge, "declared decoded size is above the limit")
                    .field("uncompressed_length")
                    .expected_found(
                        format!("<= {limit}"),
                        c.uncompressed_length.unwrap_or_default(),
                    ),
            )
        } else {
            None
        };
        Ok(reason)
    }

    /// Checks the dense size equation; returns an object-level reason when the decoded size
    /// the shape implies is above the limit.
    fn dense(&self, count: u64, decoded: &mut [Option<u64>]) -> Result<Option<Error>> {
        let Some(data) = self.object.components.get("data") else { return Ok(None) };
        let Some(size) = element_size(data) else { return Ok(None) };
        // Overflow was ruled out per component.
        let expected = count * size;
        let found = match data.encoding {
            Encoding::Raw => Some(data.length),
            Encoding::Zstd => data.uncompressed_length,
            Encoding::Unknown(_) => None,
        };
        if let Some(found) = found
            && found != expected
        {
            return Err(Error::new(
                ErrorKind::DenseSizeMismatch,
                "dense data size disagrees with the shape",
            )
            .in_component("data")
            .field(if data.encoding == Encoding::Raw { "length" } else { "uncompressed_length" })
            .expected_found(format!("{expected} ({count} elements × {size} bytes)"), found)
            .at(data.offset));
        }
        let limit = self.options.limits.max_decoded_len;
        if data.encoding == Encoding::Zstd {
            if let Some(i) = self.role_index("data") {
                decoded[i] = Some(expected);
            }
            if expected > limit {
                return Ok(Some(
                    Error::new(
                        ErrorKind::DecodedTooLarge,
                        "the shape implies a decoded size above the limit",
                    )
                    .field("shape")
                    .expected_found(format!("<= {limit}"), expected),
                ));
            }
        }
        Ok(None)
    }

    fn index_dtype_ok(&self, dtype: Option<DType>) -> bool {
        match (self.version, dtype) {
            (_, None) => true, // unknown dtypes make the object unsupported instead
            (Version::V1_2, Some(d)) => d == DType::U64,
            (_, Some(d)) => d.is_integer(),
        }
    }

    fn index_components(&self, roles: &[&str]) -> Result<()> {
        for role in roles {
            let Some(c) = self.object.components.get(role) else { continue };
            if !self.index_dtype_ok(c.dtype.known()) {
                let expected =
                    if self.version == Version::V1_2 { "u64" } else { "an integer dtype" };
                return Err(Error::new(
                    ErrorKind::SparseIndexDtype,
                    "sparse index component has the wrong dtype",
                )
                .in_component(role)
                .field("dtype")
                .expected_found(expected, &c.dtype));
            }
        }
        Ok(())
    }

    /// Element count of a component whose decoded size is known.
    fn count_of(&self, role: &str, decoded: &[Option<u64>]) -> Option<u64> {
        let c = self.object.components.get(role)?;
        let size = element_size(c)?;
        decoded.get(self.role_index(role)?).copied().flatten().map(|n| n / size)
    }

    /// The position of `role` among the object's (sorted) components.
    fn role_index(&self, role: &str) -> Option<usize> {
        self.object.components.keys().position(|r| r == role)
    }

    fn csr(&self, decoded: &[Option<u64>]) -> Result<()> {
        let rows = csr_rows(&self.object.shape)?;
        self.index_components(&["indices", "indptr"])?;
        if let Some(n) = self.count_of("indptr", decoded)
            && Some(n) != rows.checked_add(1)
        {
            return Err(Error::new(ErrorKind::CsrIndptrCount, "indptr must hold rows + 1 entries")
                .in_component("indptr")
                .expected_found(format!("{rows} + 1"), n));
        }
        if let (Some(v), Some(i)) =
            (self.count_of("values", decoded), self.count_of("indices", decoded))
            && v != i
        {
            return Err(Error::new(
                ErrorKind::SparseNnzMismatch,
                "values and indices hold different counts",
            )
            .in_component("indices")
            .expected_found(v, i));
        }
        Ok(())
    }

    fn coo(&self, decoded: &[Option<u64>]) -> Result<()> {
        let rank = coo_rank(&self.object.shape)?;
        self.index_components(&["coords"])?;
        if let (Some(v), Some(c)) =
            (self.count_of("values", decoded), self.count_of("coords", decoded))
            && v.checked_mul(rank) != Some(c)
        {
            return Err(Error::new(
                ErrorKind::SparseNnzMismatch,
                "coords must hold rank × nnz entries",
            )
            .in_component("coords")
            .expected_found(format!("{rank} × {v}"), c));
        }
        Ok(())
    }

    /// v0.1 single-blob sparse tensors: rank, and the size of a raw blob.
    fn v0_sparse(&self) -> Result<()> {
        let shape = &self.object.shape;
        let Some(data) = self.object.components.get("data") else { return Ok(()) };
        let value_size = data.dtype.known().map(DType::size);
        let packed = |message: String| {
            Error::new(ErrorKind::SparsePackedSize, message)
                .in_component("data")
                .field("size")
                .at(data.offset)
        };
        match self.object.format {
            Format::SparseCsr => {
                let rows = csr_rows(shape)?;
                let (Encoding::Raw, Some(vs)) = (&data.encoding, value_size) else { return Ok(()) };
                let indptr = rows.checked_add(1).and_then(|n| n.checked_mul(8));
                let rest = indptr.and_then(|n| data.length.checked_sub(n));
                match rest {
                    Some(rest) if rest % (8 + vs) == 0 => Ok(()),
                    _ => Err(packed(format!(
                        "{} bytes cannot hold indptr ({rows} + 1) × 8 plus nnz × (8 + {vs})",
                        data.length
                    ))),
                }
            }
            Format::SparseCoo => {
                let rank = coo_rank(shape)?;
                let (Encoding::Raw, Some(vs)) = (&data.encoding, value_size) else { return Ok(()) };
                // rank ≤ max_rank, so this cannot overflow.
                let record = rank * 8 + vs;
                if data.length % record != 0 {
                    return Err(packed(format!(
                        "{} bytes is not a whole number of {record}-byte records",
                        data.length
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Checks `bytes`, the bytes at offset `at` of a padding range ([`ValidatedManifest::padding`]),
/// for zeros.
///
/// # Errors
/// [`ErrorKind::PaddingNonzero`] naming the offset of the first byte that is not zero.
pub fn check_padding(at: u64, bytes: &[u8]) -> Result<()> {
    match bytes.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => {
            let offset = at.saturating_add(i as u64);
            Err(Error::new(
                ErrorKind::PaddingNonzero,
                "padding (bytes of the data area no component covers) is not zero",
            )
            .at(offset))
        }
    }
}

#[cfg(test)]
mod tests;
