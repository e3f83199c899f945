//! The globals the machine models, by the module and name a pickle gives: the record classes of
//! a Distributed Checkpoint, torch's rebuild functions and dtypes, and the few plain Python
//! ones a state dict holds. Anything else is refused by name.

use super::*;

/// A global the machine models. Anything else a pickle names is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Global {
    /// `collections.OrderedDict`: builds a dict.
    OrderedDict,
    /// `torch._utils._rebuild_tensor` / `_v2`: a tensor over a typed storage.
    RebuildTensor,
    /// `torch._utils._rebuild_tensor_v3`: a tensor over an untyped storage, with its dtype.
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter` / `_with_state`: an `nn.Parameter`, i.e. its tensor.
    RebuildParameter,
    /// `torch._tensor._rebuild_from_type_v2`: a tensor (subclass) rebuilt by another global.
    RebuildFromType,
    /// `torch.Tensor` or `torch.nn.parameter.Parameter`, as the type `_rebuild_from_type_v2`
    /// is given.
    TensorType,
    /// `torch.<Name>Storage` or `torch.storage.UntypedStorage` (with the dtype name it holds).
    Storage(&'static str),
    /// `torch.<dtype>`, e.g. `torch.float8_e4m3fn`.
    Dtype(&'static str),
    /// `torch.Size`: a tuple.
    Size,
    /// `_codecs.encode`: how protocol 2 pickles `bytes` (`encode(text, "latin1")`).
    Encode,
    /// `numpy.dtype` (also under `numpy.core`/`numpy._core.multiarray`).
    NumpyDtype,
    /// `numpy.core.multiarray.scalar`: a NumPy scalar from its dtype and bytes.
    NumpyScalar,
    /// `builtins.set` / `frozenset`.
    Set,
    /// `builtins.bytes` called with no argument: how protocol 2 pickles `b""`.
    Bytes,
    /// `torch.serialization._get_layout`: a layout by its name.
    GetLayout,
    /// A sparse layout: `sparse_coo` or `sparse_csr`.
    Layout(&'static str),
    /// `torch._utils._rebuild_sparse_tensor` (and the older `_rebuild_sparse_csr_tensor`):
    /// a sparse tensor from its layout and its index and value tensors.
    RebuildSparse,
    /// A class of a Distributed Checkpoint's `.metadata` (`Metadata`, `TensorStorageMetadata`,
    /// `_StorageInfo`, …): a record made empty (`NEWOBJ`) and given its fields (`BUILD`).
    Record(Class),
    /// `torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING`: an enum member by value.
    MemoryFormat,
    /// `pathlib.PosixPath` and its kin: a path from its parts (what a checkpoint id may be).
    Path,
}

/// The classes of a Distributed Checkpoint's `.metadata` that are records of fields, by module.
const RECORDS: [(&str, &str); 8] = [
    ("torch.distributed.checkpoint.metadata", "Metadata"),
    ("torch.distributed.checkpoint.metadata", "TensorStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "ChunkStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "TensorProperties"),
    ("torch.distributed.checkpoint.metadata", "BytesStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "MetadataIndex"),
    ("torch.distributed.checkpoint.metadata", "StorageMeta"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
];

/// A class of [`RECORDS`], by its place there: a byte, so a record's node is no larger than
/// an int's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Class(u8);

impl Class {
    /// The class's name (`TensorStorageMetadata`).
    pub(crate) fn name(self) -> &'static str {
        RECORDS.get(usize::from(self.0)).map_or("?", |(_, c)| c)
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Global {
    /// What `module.name` stands for, or why it is refused.
    pub(super) fn resolve(module: &str, name: &str) -> Result<Global> {
        if let Some(dtype) = crate::torch_dtypes::dtype_named(name).filter(|_| module == "torch") {
            return Ok(Global::Dtype(dtype));
        }
        if let Some(at) = RECORDS.iter().position(|(m, c)| *m == module && *c == name) {
            return Ok(Global::Record(Class(u8::try_from(at).unwrap_or(u8::MAX))));
        }
        let global = match (module, name) {
            ("collections", "OrderedDict") => Global::OrderedDict,
            ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING") => {
                Global::MemoryFormat
            }
            ("pathlib", "PosixPath" | "PurePosixPath" | "WindowsPath" | "PureWindowsPath") => {
                Global::Path
            }
            ("torch._utils", "_rebuild_tensor" | "_rebuild_tensor_v2") => Global::RebuildTensor,
            ("torch._utils", "_rebuild_tensor_v3") => Global::RebuildTensorV3,
            ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
                Global::RebuildParameter
            }
            ("torch._tensor", "_rebuild_from_type_v2") => Global::RebuildFromType,
            ("torch", "Tensor") | ("torch.nn.parameter", "Parameter") => Global::TensorType,
            ("torch.storage", "UntypedStorage") | ("torch", "UntypedStorage") => {
                Global::Storage("uint8")
            }
            ("torch", "Size") => Global::Size,
            ("_codecs", "encode") => Global::Encode,
            ("numpy" | "numpy.core.multiarray" | "numpy._core.multiarray", "dtype") => {
                Global::NumpyDtype
            }
            ("numpy.core.multiarray" | "numpy._core.multiarray", "scalar") => Global::NumpyScalar,
            ("builtins" | "__builtin__", "set" | "frozenset") => Global::Set,
            ("builtins" | "__builtin__", "bytes") => Global::Bytes,
            ("torch.serialization", "_get_layout") => Global::GetLayout,
            ("torch", "sparse_coo") => Global::Layout("sparse_coo"),
            ("torch", "sparse_csr") => Global::Layout("sparse_csr"),
            ("torch._utils", "_rebuild_sparse_tensor" | "_rebuild_sparse_csr_tensor") => {
                Global::RebuildSparse
            }
            ("torch", storage) if storage.ends_with("Storage") => {
                match crate::torch_dtypes::dtype_of_storage(storage) {
                    Some(dtype) => Global::Storage(dtype),
                    None => return Err(refused(module, name, "an unknown storage type")),
                }
            }
            ("torch._utils", "_rebuild_qtensor") => {
                return Err(refused(
                    module,
                    name,
                    "a quantized tensor, which zTensor does not hold",
                ));
            }
            ("torch._utils", other) if other.starts_with("_rebuild_") => {
                return Err(refused(
                    module,
                    name,
                    "a tensor that is not a plain CPU tensor (nested, meta, device or subclass)",
                ));
            }
            _ => {
                return Err(refused(
                    module,
                    name,
                    "not one of the globals a state dict needs; this reader executes nothing",
                ));
            }
        };
        Ok(global)
    }

    /// The Python name, for messages and attributes.
    pub(crate) fn describe(&self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::RebuildTensor => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildTensorV3 => "torch._utils._rebuild_tensor_v3".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildFromType => "torch._tensor._rebuild_from_type_v2".into(),
            Global::TensorType => "torch.Tensor".into(),
            Global::Storage(dtype) => format!("a torch storage of {dtype}"),
            Global::Dtype(dtype) => format!("torch.{dtype}"),
            Global::Size => "torch.Size".into(),
            Global::Encode => "_codecs.encode".into(),
            Global::NumpyDtype => "numpy.dtype".into(),
            Global::NumpyScalar => "numpy.core.multiarray.scalar".into(),
            Global::Set => "builtins.set".into(),
            Global::Bytes => "builtins.bytes".into(),
            Global::GetLayout => "torch.serialization._get_layout".into(),
            Global::Layout(layout) => format!("torch.{layout}"),
            Global::RebuildSparse => "torch._utils._rebuild_sparse_tensor".into(),
            Global::Record(class) => format!("torch.distributed.checkpoint {class}"),
            Global::MemoryFormat => "torch.distributed.checkpoint _MEM_FORMAT_ENCODING".into(),
            Global::Path => "pathlib.PosixPath".into(),
        }
    }
}

pub(super) fn refused(module: &str, name: &str, why: &str) -> Error {
    Error::new(ErrorKind::Malformed, format!("the pickle calls {module}.{name}: {why}"))
}
