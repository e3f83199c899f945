//! The TensorBuffers FlatBuffers schema: data types, the metadata model, verification with the
//! `flatbuffers` crate's verifier (under limits), field extraction with bounds-checked reads, and
//! the builder call order that reproduces real writers' bytes.
//!
//! No code is generated: the schema is three small tables, and writing their accessors by hand
//! keeps this crate free of `unsafe` (generated accessors are `unsafe` to implement).

use flatbuffers::{
    FlatBufferBuilder, ForwardsUOffset, InvalidFlatbuffer, Vector, Verifiable, Verifier,
    VerifierOptions, WIPOffset,
};
use ztensor_format::DType;

use crate::error::{Error, ErrorKind, Result};

/// A TensorBuffers element type, with its numeric code in the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// Code 1.
    Float32,
    /// Code 2.
    Float64,
    /// Code 3.
    Int8,
    /// Code 4.
    Int16,
    /// Code 5.
    Int32,
    /// Code 6.
    Int64,
    /// Code 7.
    UInt8,
    /// Code 8.
    UInt16,
    /// Code 9.
    UInt32,
    /// Code 10.
    UInt64,
}

impl DataType {
    const TABLE: [(DataType, i8, DType); 10] = [
        (DataType::Float32, 1, DType::F32),
        (DataType::Float64, 2, DType::F64),
        (DataType::Int8, 3, DType::I8),
        (DataType::Int16, 4, DType::I16),
        (DataType::Int32, 5, DType::I32),
        (DataType::Int64, 6, DType::I64),
        (DataType::UInt8, 7, DType::U8),
        (DataType::UInt16, 8, DType::U16),
        (DataType::UInt32, 9, DType::U32),
        (DataType::UInt64, 10, DType::U64),
    ];

    /// The schema code.
    pub fn code(self) -> i8 {
        Self::TABLE.iter().find(|e| e.0 == self).map_or(0, |e| e.1)
    }

    /// The type of a schema code (`None` for 0 and unknown codes).
    pub fn from_code(code: i8) -> Option<DataType> {
        Self::TABLE.iter().find(|e| e.1 == code).map(|e| e.0)
    }

    /// The zTensor storage type.
    pub fn dtype(self) -> DType {
        Self::TABLE.iter().find(|e| e.0 == self).map_or(DType::U8, |e| e.2)
    }

    /// The TensorBuffers type of a zTensor storage type, if it has one (no bool, f16, bf16).
    pub fn from_dtype(dtype: DType) -> Option<DataType> {
        Self::TABLE.iter().find(|e| e.2 == dtype).map(|e| e.0)
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        self.dtype().size()
    }
}

/// One entry of the `tensors` vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// The name.
    pub name: String,
    /// The id as stored (writers store FNV-1a64 of the name bytes followed by 0xFF).
    pub id: u64,
    /// The shape.
    pub shape: Vec<u32>,
    /// The element type.
    pub data_type: DataType,
    /// Absolute offset of the data in the file.
    pub data_offset: u32,
    /// Byte length of the data.
    pub data_size: u32,
}

/// One entry of the `operations` vector (compute-graph metadata, carried through untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The operation id.
    pub id: u64,
    /// The operation code (0 None, 1 Add, …).
    pub operation: i8,
    /// The id of the output tensor.
    pub output: u64,
    /// The ids of the input operations.
    pub input_operations: Vec<u64>,
}

/// The decoded metadata FlatBuffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The format version string (`"1.0.0"` from every known writer).
    pub version: String,
    /// The optional model name.
    pub model: Option<String>,
    /// The tensors, in file order (not sorted by id).
    pub tensors: Vec<TensorEntry>,
    /// The operations; `None` when the field is absent (files from before it existed).
    pub operations: Option<Vec<Operation>>,
}

impl Default for Metadata {
    fn default() -> Metadata {
        Metadata {
            version: "1.0.0".into(),
            model: None,
            tensors: Vec::new(),
            operations: Some(Vec::new()),
        }
    }
}

/// FNV-1a 64 over the name's bytes followed by one 0xFF byte: the id real writers store.
pub fn tensor_id(name: &str) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    name.bytes()
        .chain(std::iter::once(0xff))
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

// Vtable slots (4 + 2 × field index).
const T_ID: u16 = 4;
const T_NAME: u16 = 6;
const T_SHAPE: u16 = 8;
const T_DATA_TYPE: u16 = 10;
const T_DATA_OFFSET: u16 = 12;
const T_DATA_SIZE: u16 = 14;
const R_VERSION: u16 = 4;
const R_MODEL: u16 = 6;
const R_TENSORS: u16 = 8;
const R_OPERATIONS: u16 = 10;
const O_ID: u16 = 4;
const O_OPERATION: u16 = 6;
const O_OUTPUT: u16 = 8;
const O_INPUTS: u16 = 10;

/// Marker types for the verifier, one per table.
struct TensorTable;
struct RootTable;
struct OperationTable;

impl Verifiable for TensorTable {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<u64>("id", T_ID, false)?
            .visit_field::<ForwardsUOffset<&str>>("name", T_NAME, true)?
            .visit_field::<ForwardsUOffset<Vector<'_, u32>>>("shape", T_SHAPE, false)?
            .visit_field::<i8>("data_type", T_DATA_TYPE, false)?
            .visit_field::<u32>("data_offset", T_DATA_OFFSET, false)?
            .visit_field::<u32>("data_size", T_DATA_SIZE, false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for OperationTable {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<u64>("id", O_ID, false)?
            .visit_field::<i8>("operation", O_OPERATION, false)?
            .visit_field::<u64>("output", O_OUTPUT, false)?
            .visit_field::<ForwardsUOffset<Vector<'_, u64>>>("input_operations", O_INPUTS, false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for RootTable {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<&str>>("version", R_VERSION, true)?
            .visit_field::<ForwardsUOffset<&str>>("model", R_MODEL, false)?
            .visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<TensorTable>>>>(
                "tensors", R_TENSORS, false,
            )?
            .visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<OperationTable>>>>(
                "operations",
                R_OPERATIONS,
                false,
            )?
            .finish();
        Ok(())
    }
}

/// Bounds-checked little-endian reads over a verified buffer. Verification already proved every
/// access below in range; the checks stay so that a bug here is an error, never a panic.
struct Buf<'a>(&'a [u8]);

fn corrupt(what: &str) -> Error {
    Error::new(ErrorKind::Flatbuffer, format!("metadata: {what}"))
}

impl<'a> Buf<'a> {
    fn bytes<const N: usize>(&self, pos: usize) -> Result<[u8; N]> {
        self.0
            .get(pos..pos.checked_add(N).ok_or_else(|| corrupt("offset overflow"))?)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| corrupt("read past the end"))
    }
    fn u16(&self, pos: usize) -> Result<u16> {
        self.bytes(pos).map(u16::from_le_bytes)
    }
    fn u32(&self, pos: usize) -> Result<u32> {
        self.bytes(pos).map(u32::from_le_bytes)
    }
    fn u64(&self, pos: usize) -> Result<u64> {
        self.bytes(pos).map(u64::from_le_bytes)
    }
    fn i8(&self, pos: usize) -> Result<i8> {
        self.bytes(pos).map(i8::from_le_bytes)
    }
    /// Follows a uoffset stored at `pos`.
    fn follow(&self, pos: usize) -> Result<usize> {
        let off = usize::try_from(self.u32(pos)?).map_err(|_| corrupt("offset"))?;
        pos.checked_add(off).ok_or_else(|| corrupt("offset overflow"))
    }
    fn table(&self, pos: usize) -> Result<Table<'_, 'a>> {
        let soffset = i64::from(i32::from_le_bytes(self.bytes(pos)?));
        let vtable = i64::try_from(pos).map_err(|_| corrupt("position"))? - soffset;
        let vtable = usize::try_from(vtable).map_err(|_| corrupt("vtable before the buffer"))?;
        let vtable_len = usize::from(self.u16(vtable)?);
        Ok(Table { buf: self, pos, vtable, vtable_len })
    }
    fn string(&self, pos: usize) -> Result<&'a str> {
        let len = usize::try_from(self.u32(pos)?).map_err(|_| corrupt("string length"))?;
        let start = pos + 4;
        let bytes = self
            .0
            .get(start..start.checked_add(len).ok_or_else(|| corrupt("string"))?)
            .ok_or_else(|| corrupt("string"))?;
        std::str::from_utf8(bytes).map_err(|_| corrupt("string is not UTF-8"))
    }
    /// (element count, position of the first element) of a vector at `pos`.
    fn vector(&self, pos: usize) -> Result<(usize, usize)> {
        let len = usize::try_from(self.u32(pos)?).map_err(|_| corrupt("vector length"))?;
        Ok((len, pos + 4))
    }
}

struct Table<'b, 'a> {
    buf: &'b Buf<'a>,
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

impl Table<'_, '_> {
    fn field(&self, slot: u16) -> Result<Option<usize>> {
        let slot = usize::from(slot);
        if slot + 2 > self.vtable_len {
            return Ok(None);
        }
        match self.buf.u16(self.vtable + slot)? {
            0 => Ok(None),
            off => Ok(Some(self.pos + usize::from(off))),
        }
    }
}

/// Verifies the metadata FlatBuffer under the given limits and decodes it.
///
/// # Errors
/// [`ErrorKind::Flatbuffer`] for anything the verifier rejects (bounds, alignment relative to the
/// buffer, missing required fields, invalid UTF-8, missing NUL terminators, too many tables, too
/// deep), and [`ErrorKind::DataType`] / [`ErrorKind::ShapeMissing`] for entries that verify but
/// cannot describe a tensor.
pub fn decode_metadata(buffer: &[u8], max_tables: usize) -> Result<Metadata> {
    let options = VerifierOptions { max_depth: 8, max_tables, ..VerifierOptions::default() };
    let mut verifier = Verifier::new(&options, buffer);
    <ForwardsUOffset<RootTable>>::run_verifier(&mut verifier, 0)
        .map_err(|e| Error::new(ErrorKind::Flatbuffer, format!("metadata does not verify: {e}")))?;

    let buf = Buf(buffer);
    let root = buf.table(buf.follow(0)?)?;
    // Tables may share one string or vector; each use is copied out. Without sharing, the
    // copies add up to less than the buffer: allow twice that, so a vector referenced by
    // thousands of tables cannot turn a small file into gigabytes.
    let budget = std::cell::Cell::new(buffer.len().saturating_mul(2).saturating_add(4096));
    let spend = |bytes: usize| -> Result<()> {
        let left = budget.get().checked_sub(bytes).ok_or_else(|| {
            Error::new(
                ErrorKind::Flatbuffer,
                format!(
                    "metadata refers to the same strings or vectors from many tables: copying \
                     them out would take more than twice its {} bytes",
                    buffer.len()
                ),
            )
        })?;
        budget.set(left);
        Ok(())
    };
    let string = |t: &Table<'_, '_>, slot| -> Result<Option<String>> {
        t.field(slot)?
            .map(|p| {
                let s = buf.follow(p).and_then(|s| buf.string(s))?;
                spend(s.len())?;
                Ok(s.to_owned())
            })
            .transpose()
    };
    let version = string(&root, R_VERSION)?.ok_or_else(|| corrupt("version is required"))?;
    let model = string(&root, R_MODEL)?;
    let mut tensors = Vec::new();
    if let Some(p) = root.field(R_TENSORS)? {
        let (count, first) = buf.vector(buf.follow(p)?)?;
        tensors.reserve(count);
        for i in 0..count {
            let t = buf.table(buf.follow(first + 4 * i)?)?;
            let name = string(&t, T_NAME)?.ok_or_else(|| corrupt("tensor name is required"))?;
            let id = t.field(T_ID)?.map(|p| buf.u64(p)).transpose()?.unwrap_or(0);
            let code = t.field(T_DATA_TYPE)?.map(|p| buf.i8(p)).transpose()?.unwrap_or(0);
            let data_type = DataType::from_code(code).ok_or_else(|| {
                Error::new(
                    ErrorKind::DataType,
                    format!("data type code {code} is not one of 1..=10"),
                )
                .in_object(&name)
            })?;
            let shape = match t.field(T_SHAPE)? {
                None => {
                    return Err(Error::new(ErrorKind::ShapeMissing, "tensor has no shape vector")
                        .in_object(&name));
                }
                Some(p) => {
                    let (n, first) = buf.vector(buf.follow(p)?)?;
                    spend(n.saturating_mul(4))?;
                    (0..n).map(|k| buf.u32(first + 4 * k)).collect::<Result<Vec<u32>>>()?
                }
            };
            let data_offset = t.field(T_DATA_OFFSET)?.map(|p| buf.u32(p)).transpose()?.unwrap_or(0);
            let data_size = t.field(T_DATA_SIZE)?.map(|p| buf.u32(p)).transpose()?.unwrap_or(0);
            tensors.push(TensorEntry { name, id, shape, data_type, data_offset, data_size });
        }
    }
    let operations = match root.field(R_OPERATIONS)? {
        None => None,
        Some(p) => {
            let (count, first) = buf.vector(buf.follow(p)?)?;
            let mut ops = Vec::with_capacity(count);
            for i in 0..count {
                let t = buf.table(buf.follow(first + 4 * i)?)?;
                let input_operations = match t.field(O_INPUTS)? {
                    None => Vec::new(),
                    Some(p) => {
                        let (n, first) = buf.vector(buf.follow(p)?)?;
                        spend(n.saturating_mul(8))?;
                        (0..n).map(|k| buf.u64(first + 8 * k)).collect::<Result<Vec<u64>>>()?
                    }
                };
                ops.push(Operation {
                    id: t.field(O_ID)?.map(|p| buf.u64(p)).transpose()?.unwrap_or(0),
                    operation: t.field(O_OPERATION)?.map(|p| buf.i8(p)).transpose()?.unwrap_or(0),
                    output: t.field(O_OUTPUT)?.map(|p| buf.u64(p)).transpose()?.unwrap_or(0),
                    input_operations,
                });
            }
            Some(ops)
        }
    };
    Ok(Metadata { version, model, tensors, operations })
}

/// Builds the metadata FlatBuffer with the `flatbuffers` builder, in the call order of the real
/// writer, so equal metadata gives byte-identical buffers.
pub fn encode_metadata(meta: &Metadata) -> Vec<u8> {
    let tensors = meta.tensors.iter().map(|t| TensorRef {
        name: &t.name,
        id: t.id,
        shape: &t.shape,
        data_type: t.data_type,
        data_offset: t.data_offset,
        data_size: t.data_size,
    });
    encode_tables(meta, meta.tensors.len(), tensors, 0).finished_data().to_vec()
}

/// One entry of the `tensors` vector, borrowed, as [`encode_tables`] takes it.
pub(crate) struct TensorRef<'a> {
    pub(crate) name: &'a str,
    pub(crate) id: u64,
    pub(crate) shape: &'a [u32],
    pub(crate) data_type: DataType,
    pub(crate) data_offset: u32,
    pub(crate) data_size: u32,
}

/// As [`encode_metadata`], with the `count` tensors given by `tensors` instead of those of
/// `meta` (whose version, model and operations are used), into a builder of `capacity` bytes to
/// start with (it grows as needed; the bytes do not depend on it): the finished buffer is
/// `finished_data()`, written from where it lies.
pub(crate) fn encode_tables<'a>(
    meta: &Metadata,
    count: usize,
    tensors: impl Iterator<Item = TensorRef<'a>>,
    capacity: usize,
) -> FlatBufferBuilder<'static> {
    let mut fbb = FlatBufferBuilder::with_capacity(capacity);
    let mut tables = Vec::with_capacity(count);
    for t in tensors {
        let shape = fbb.create_vector(t.shape);
        let name = fbb.create_string(t.name);
        let start = fbb.start_table();
        fbb.push_slot::<u64>(T_ID, t.id, 0);
        fbb.push_slot::<u32>(T_DATA_SIZE, t.data_size, 0);
        fbb.push_slot::<u32>(T_DATA_OFFSET, t.data_offset, 0);
        fbb.push_slot_always(T_SHAPE, shape);
        fbb.push_slot_always(T_NAME, name);
        fbb.push_slot::<i8>(T_DATA_TYPE, t.data_type.code(), 0);
        tables.push(fbb.end_table(start));
    }
    let mut op_tables = Vec::new();
    for op in meta.operations.iter().flatten() {
        let inputs = fbb.create_vector(&op.input_operations);
        let start = fbb.start_table();
        fbb.push_slot::<u64>(O_OUTPUT, op.output, 0);
        fbb.push_slot::<u64>(O_ID, op.id, 0);
        fbb.push_slot_always(O_INPUTS, inputs);
        fbb.push_slot::<i8>(O_OPERATION, op.operation, 0);
        op_tables.push(fbb.end_table(start));
    }
    let model = meta.model.as_deref().map(|m| fbb.create_string(m));
    let version = fbb.create_string(&meta.version);
    let tensors = fbb.create_vector(&tables);
    let operations: Option<WIPOffset<_>> =
        meta.operations.as_ref().map(|_| fbb.create_vector(&op_tables));
    let start = fbb.start_table();
    if let Some(operations) = operations {
        fbb.push_slot_always(R_OPERATIONS, operations);
    }
    fbb.push_slot_always(R_TENSORS, tensors);
    if let Some(model) = model {
        fbb.push_slot_always(R_MODEL, model);
    }
    fbb.push_slot_always(R_VERSION, version);
    let root = fbb.end_table(start);
    fbb.finish_minimal(root);
    fbb
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata whose `count` tensor tables all point at one shape vector of `len` entries.
    fn shared_shape(count: usize, len: usize) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let shape = fbb.create_vector(&vec![1u32; len]);
        let name = fbb.create_string("t");
        let mut tables = Vec::new();
        for _ in 0..count {
            let start = fbb.start_table();
            fbb.push_slot_always(T_SHAPE, shape);
            fbb.push_slot_always(T_NAME, name);
            fbb.push_slot::<i8>(T_DATA_TYPE, 1, 0);
            tables.push(fbb.end_table(start));
        }
        let version = fbb.create_string("1");
        let tensors = fbb.create_vector(&tables);
        let start = fbb.start_table();
        fbb.push_slot_always(R_TENSORS, tensors);
        fbb.push_slot_always(R_VERSION, version);
        let root = fbb.end_table(start);
        fbb.finish_minimal(root);
        fbb.finished_data().to_vec()
    }

    #[test]
    fn a_vector_shared_by_many_tables_is_not_copied_out_each_time() {
        // Shared by a few tables: fine (the copies stay within twice the buffer).
        let few = shared_shape(1, 10_000);
        assert_eq!(decode_metadata(&few, 1 << 20).unwrap().tensors.len(), 1);
        // A 40 KB vector under 5,000 tables would be 200 MB of copies.
        let many = shared_shape(5_000, 10_000);
        assert!(many.len() < 200_000, "{}", many.len());
        let err = decode_metadata(&many, 1 << 20).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Flatbuffer, "{err}");
        assert!(err.to_string().contains("many tables"), "{err}");
    }

    #[test]
    fn ids_match_the_published_vectors() {
        for (name, id) in [
            ("weight", 0xb149_c76e_f08b_13d2u64),
            ("indices", 0x9329_417d_4a8c_9337),
            ("alpha", 0xbbd2_f1a4_91ee_c83c),
            ("beta", 0x0b0b_335e_a628_f588),
            ("", 0xaf64_724c_8602_eb6e),
            ("a", 0x089b_c907_b544_c769),
            ("1", 0x07f7_c907_b4b8_b319),
            ("2", 0x0803_c907_b4c4_6d9e),
            ("layer.0.weight", 0xb1d6_f7ba_a455_53bf),
            ("é", 0x5fec_201c_1dfc_a99a),
        ] {
            assert_eq!(tensor_id(name), id, "{name:?}");
        }
    }

    #[test]
    fn data_type_codes() {
        for code in 1..=10 {
            let t = DataType::from_code(code).unwrap();
            assert_eq!(t.code(), code);
            assert_eq!(DataType::from_dtype(t.dtype()), Some(t));
        }
        assert_eq!(DataType::from_code(0), None);
        assert_eq!(DataType::from_code(11), None);
        assert_eq!(DataType::from_dtype(DType::Bool), None);
        assert_eq!(DataType::from_dtype(DType::BF16), None);
    }
}
