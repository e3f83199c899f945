//! Generated models of zTensor files: a list of objects (dense, CSR, COO, quantized groups,
//! logical types) with their write options, built from arbitrary bytes so the same generator
//! drives the property tests (bytes from proptest) and the `roundtrip` fuzz target (bytes from
//! libFuzzer). Every model the generator builds is valid for its version, so writing it must
//! succeed and reading it back must give exactly what was written, through any source.

use std::collections::BTreeMap;

use ztensor_format::{DType, DigestAlgorithm, Format, LogicalType, Options, Version};
use ztensor_io::{
    ComponentSpec, Compression, Coo, Csr, DigestCheck, ReadAt, Reader, WriteOptions, Writer,
};

/// The kind of one generated object.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A dense tensor of a dtype.
    Dense(DType),
    /// A CSR matrix with values of a dtype.
    Csr(DType),
    /// A COO tensor with values of a dtype.
    Coo(DType),
    /// A 4-bit quantized group (v1.x only).
    Quantized,
    /// A dense tensor of a logical type (v1.x only; the v1.2 set for 1.2).
    Logical(LogicalType),
}

/// One generated object: kind, requested shape (adjusted by the kind), data seed and options.
#[derive(Debug, Clone)]
pub struct ObjectSpec {
    /// The kind.
    pub kind: Kind,
    /// The shape asked for; sparse and quantized kinds fix up what they need.
    pub shape: Vec<u64>,
    /// Seed of the element bytes.
    pub seed: u64,
    /// How the object's components are written.
    pub options: WriteOptions,
}

/// A file to write: a version and its objects, named `object.<i>`.
#[derive(Debug, Clone)]
pub struct Model {
    /// The format version.
    pub version: Version,
    /// The objects, in write order.
    pub objects: Vec<ObjectSpec>,
}

/// What one object must read back as: format, shape and role → (dtype, logical type, bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    /// The object's name.
    pub name: String,
    /// Its format.
    pub format: Format,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its components' decoded contents.
    pub components: BTreeMap<String, (DType, Option<LogicalType>, Vec<u8>)>,
    /// The digest its components carry.
    pub digest: Option<DigestAlgorithm>,
}

/// The logical types a version can write.
pub fn logical_types(version: Version) -> &'static [LogicalType] {
    match version {
        Version::V0_1 => &[],
        Version::V1_1 => &[
            LogicalType::F8E4M3Fn,
            LogicalType::F8E5M2,
            LogicalType::Complex64,
            LogicalType::Complex128,
        ],
        Version::V1_2 => &[
            LogicalType::F8E4M3Fn,
            LogicalType::F8E5M2,
            LogicalType::F8E4M3Fnuz,
            LogicalType::F8E5M2Fnuz,
            LogicalType::Complex64,
            LogicalType::Complex128,
        ],
    }
}

/// Reads choices from bytes; an exhausted input reads as zeros, so every input is a model.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

impl Model {
    /// At most this many objects per model.
    pub const MAX_OBJECTS: usize = 8;

    /// The model that `bytes` describe: one byte picks the version, then each object takes a
    /// kind, a shape (up to three dimensions of 0..=4), a seed and options.
    pub fn from_bytes(bytes: &[u8]) -> Model {
        let mut c = Choices(bytes);
        let version = c.pick(&[Version::V0_1, Version::V1_1, Version::V1_2]);
        let count = c.below(Model::MAX_OBJECTS + 1);
        let mut objects = Vec::with_capacity(count);
        for _ in 0..count {
            let dtype = c.pick(&DType::ALL);
            let logical = logical_types(version);
            let kind = match c.below(10) {
                0..=4 => Kind::Dense(dtype),
                5 => Kind::Csr(dtype),
                6 => Kind::Coo(dtype),
                7 if version != Version::V0_1 => Kind::Quantized,
                8 | 9 if !logical.is_empty() => Kind::Logical(c.pick(logical)),
                _ => Kind::Dense(dtype),
            };
            let rank = c.below(4);
            let shape = (0..rank).map(|_| c.below(5) as u64).collect();
            let seed = u64::from(c.byte()) | u64::from(c.byte()) << 8;
            let compression = c.pick(&[
                Compression::Raw,
                Compression::Raw,
                Compression::Zstd(1),
                Compression::Zstd(2),
            ]);
            let digest = c.pick(&[
                None,
                Some(DigestAlgorithm::Crc32c),
                Some(DigestAlgorithm::Sha256),
                Some(DigestAlgorithm::Blake3),
            ]);
            let chunk_size = c.pick(&[None, Some(16u64), Some(1000)]);
            objects.push(ObjectSpec {
                kind,
                shape,
                seed,
                options: WriteOptions {
                    compression,
                    digest,
                    chunk_size,
                    raw_if_not_smaller: false,
                },
            });
        }
        Model { version, objects }
    }

    /// Writes the model, returning the file and what each object must read back as.
    ///
    /// # Errors
    /// Only when the writer refuses a valid model, which is a bug.
    pub fn write(&self) -> ztensor_io::Result<(Vec<u8>, Vec<Expect>)> {
        let mut writer = Writer::new(Vec::new(), self.version)?;
        let mut expect = Vec::with_capacity(self.objects.len());
        for (i, spec) in self.objects.iter().enumerate() {
            expect.push(write_object(&mut writer, &format!("object.{i}"), spec)?);
        }
        let (file, len) = writer.finish()?;
        debug_assert_eq!(len, file.len() as u64);
        Ok((file, expect))
    }
}

/// Bytes of `n` elements of `dtype` from `seed`; bools are 0 or 1 so the data checks pass.
pub fn elements(dtype: DType, n: u64, seed: u64) -> Vec<u8> {
    (0..n * dtype.size())
        .map(|i| {
            let x = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(i.wrapping_mul(1442695040888963407))
                .to_le_bytes()[4];
            if dtype == DType::Bool { x & 1 } else { x }
        })
        .collect()
}

fn le(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn write_object<W: std::io::Write>(
    writer: &mut Writer<W>,
    name: &str,
    spec: &ObjectSpec,
) -> ztensor_io::Result<Expect> {
    let (seed, options) = (spec.seed, &spec.options);
    let mut shape = spec.shape.clone();
    let mut components = BTreeMap::new();
    let format = match &spec.kind {
        &Kind::Dense(dtype) => {
            let n: u64 = shape.iter().product();
            let data = elements(dtype, n, seed);
            writer.add_dense(name, &shape, dtype, &data, options)?;
            components.insert("data".into(), (dtype, None, data));
            Format::Dense
        }
        &Kind::Csr(dtype) => {
            // A rows × cols matrix with a non-zero wherever (r + c + seed) % 3 == 0.
            shape = vec![shape.first().copied().unwrap_or(2), shape.get(1).copied().unwrap_or(3)];
            let (mut indptr, mut indices) = (vec![0u64], Vec::new());
            for r in 0..shape[0] {
                indices.extend((0..shape[1]).filter(|c| (r + c + seed) % 3 == 0));
                indptr.push(indices.len() as u64);
            }
            let values = elements(dtype, indices.len() as u64, seed);
            let csr = Csr { dtype, values: &values, indices: &indices, indptr: &indptr };
            writer.add_csr(name, &shape, csr, options)?;
            components.insert("values".into(), (dtype, None, values));
            components.insert("indices".into(), (DType::U64, None, le(&indices)));
            components.insert("indptr".into(), (DType::U64, None, le(&indptr)));
            Format::SparseCsr
        }
        &Kind::Coo(dtype) => {
            if shape.is_empty() {
                shape = vec![4];
            }
            // Up to three points, none when a dimension is zero.
            let nnz = if shape.contains(&0) { 0 } else { (seed % 4) as usize };
            let mut coords = Vec::new();
            for (d, &dim) in shape.iter().enumerate() {
                coords.extend((0..nnz).map(|i| (i as u64 + d as u64) % dim));
            }
            let values = elements(dtype, nnz as u64, seed);
            writer.add_coo(
                name,
                &shape,
                Coo { dtype, values: &values, coords: &coords },
                options,
            )?;
            components.insert("values".into(), (dtype, None, values));
            components.insert("coords".into(), (DType::U64, None, le(&coords)));
            Format::SparseCoo
        }
        Kind::Quantized => {
            shape = vec![4, 8];
            let parts = [
                ("packed_weight", DType::I32, 4),
                ("scales", DType::F16, 2),
                ("zeros", DType::F16, 2),
            ];
            let data: Vec<_> =
                parts.iter().map(|&(r, d, n)| (r, d, elements(d, n, seed))).collect();
            let specs: Vec<_> = data
                .iter()
                .map(|(role, dtype, bytes)| ComponentSpec {
                    role,
                    dtype: *dtype,
                    logical_type: None,
                    data: bytes,
                })
                .collect();
            let attrs =
                ztensor_format::text_map([("bits", 4u64.into()), ("group_size", 4u64.into())]);
            writer.add_object(
                name,
                &shape,
                Format::QuantizedGroup,
                Some(ztensor_format::Attributes::try_from(attrs)?),
                &specs,
                options,
            )?;
            for (role, dtype, bytes) in data {
                components.insert(role.into(), (dtype, None, bytes));
            }
            Format::QuantizedGroup
        }
        Kind::Logical(t) => {
            let dtype = t.storage().expect("generated logical types have a storage dtype");
            let n: u64 = shape.iter().product::<u64>() * t.ratio();
            let data = elements(dtype, n, seed);
            let spec = ComponentSpec { role: "data", dtype, logical_type: Some(t), data: &data };
            writer.add_object(name, &shape, Format::Dense, None, &[spec], options)?;
            components.insert("data".into(), (dtype, Some(t.clone()), data));
            Format::Dense
        }
    };
    Ok(Expect { name: name.to_owned(), format, shape, components, digest: options.digest.clone() })
}

/// Checks that `reader` holds exactly the expected objects: contents, data checks and digests.
///
/// # Errors
/// A description of the first difference.
pub fn check<S: ReadAt>(reader: &Reader<S>, expect: &[Expect]) -> Result<(), String> {
    if reader.manifest().len() != expect.len() {
        return Err(format!("{} objects, expected {}", reader.manifest().len(), expect.len()));
    }
    for e in expect {
        let fail = |what: &str, err: &dyn std::fmt::Display| format!("{}: {what}: {err}", e.name);
        let data = reader.read_object(&e.name).map_err(|err| fail("read", &err))?;
        if (&data.format, &data.shape) != (&e.format, &e.shape) {
            return Err(format!(
                "{}: {:?} {:?}, expected {:?} {:?}",
                e.name, data.format, data.shape, e.format, e.shape
            ));
        }
        let got: BTreeMap<_, _> = data
            .components
            .iter()
            .map(|(r, c)| (r.clone(), (c.dtype, c.logical_type.clone(), c.bytes.to_vec())))
            .collect();
        if got != e.components {
            return Err(format!("{}: components differ: {got:?} != {:?}", e.name, e.components));
        }
        // The reader is strict: the strict data rules too.
        let object = reader.object(&e.name).map_err(|err| fail("object", &err))?;
        object.check(&data).map_err(|err| fail("data check", &err))?;
        // Stored components, which for v0.1 sparse objects are one blob, not the decoded ones.
        for component in object.components() {
            let role = component.role();
            let check = component.verify().map_err(|err| fail(role, &err))?;
            let expected = match &e.digest {
                None => DigestCheck::Absent,
                Some(a) => DigestCheck::Verified(a.clone()),
            };
            if check != expected {
                return Err(format!("{}/{role}: digest {check:?}, expected {expected:?}", e.name));
            }
        }
    }
    Ok(())
}

/// Opens `source` with strict options and checks what it holds.
///
/// # Errors
/// When the file does not open or differs from `expect`.
pub fn check_bytes<S: ReadAt>(source: S, expect: &[Expect]) -> Result<(), String> {
    let reader = Reader::new(source, &Options::strict()).map_err(|e| format!("open: {e}"))?;
    check(&reader, expect)
}
