//! A restricted pickle machine: it reads the pickles `torch.save` writes and executes nothing.
//!
//! Python's unpickler imports any module and calls any callable a pickle names; this machine
//! knows the opcodes of protocols 0 to 5 that build plain data (numbers, strings, bytes, lists,
//! tuples, dicts, sets) and the handful of globals a PyTorch state dict needs, each modelled
//! here rather than called (see [`Global`]). Every other global is refused by name when the
//! pickle names it, before anything is built from it.
//!
//! Values live in an arena and the stack and memo hold indices into it, so a list that is put
//! in the memo and appended to later is the same list wherever it was fetched from, as in
//! Python. Everything is bounded by the pickle: one opcode makes at most one value, every
//! length is checked against the bytes left before anything is allocated, and the arena is
//! capped at [`MAX_VALUES`]. Memory is counted in bytes, not values: every value built, every
//! slot of the stack, memo and dict index is charged to a [`Budget`] proportional to the
//! pickle's length ([`Budget::for_pickle`]), which the pickle's readers (torch.save's walk,
//! DCP's records) go on drawing from when they copy shared values out, so what a pickle costs
//! in all is bounded by its length, however often it refers to a value. `None`, the bools and
//! small ints are made once and shared, as CPython shares them. What a pickle can make the
//! machine copy or hash by referring to a value again is also charged to a budget of work.

use std::collections::HashMap;

use crate::error::{Error, ErrorKind, Result};

/// An index into the machine's arena.
pub(crate) type Id = usize;

/// The most values one pickle may build (a state dict of 100,000 tensors builds about two
/// million).
pub(crate) const MAX_VALUES: usize = 1 << 24;

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
    fn resolve(module: &str, name: &str) -> Result<Global> {
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

fn refused(module: &str, name: &str, why: &str) -> Error {
    Error::new(ErrorKind::Malformed, format!("the pickle calls {module}.{name}: {why}"))
}

/// A storage a persistent id names: `('storage', type, key, location, numel)`.
#[derive(Debug, Clone)]
pub(crate) struct StorageRef {
    /// The torch dtype name of its elements (`uint8` for an untyped storage).
    pub(crate) dtype: &'static str,
    /// Its member in the archive: `data/<key>`.
    pub(crate) key: String,
    /// Its length in elements of `dtype`.
    pub(crate) numel: u64,
}

/// A tensor, as `_rebuild_tensor_v2`/`_v3` describe it.
#[derive(Debug, Clone)]
pub(crate) struct TensorRef {
    pub(crate) storage: StorageRef,
    /// The torch dtype name of its elements.
    pub(crate) dtype: &'static str,
    /// In elements of `dtype`.
    pub(crate) offset: u64,
    pub(crate) shape: Vec<u64>,
    pub(crate) strides: Vec<u64>,
}

/// A sparse tensor, as `_rebuild_sparse_tensor` describes it: COO (`coords` from its indices,
/// `values`) or CSR (`indptr`, `indices`, `values`), each part a tensor over a storage.
#[derive(Debug, Clone)]
pub(crate) struct SparseRef {
    /// `sparse_coo` or `sparse_csr`.
    pub(crate) layout: &'static str,
    /// Its logical shape.
    pub(crate) shape: Vec<u64>,
    /// Its parts, by zTensor role.
    pub(crate) parts: Vec<(&'static str, TensorRef)>,
}

/// The bytes a pickle and what is made from it may take: [`Budget::PER_BYTE`] for each byte
/// of the pickle and [`Budget::BASE`] beside. Shared by the machine that builds the values and
/// the readers that copy them out.
#[derive(Debug)]
pub(crate) struct Budget {
    left: std::cell::Cell<usize>,
    limit: usize,
}

impl Budget {
    /// Bytes of memory per byte of pickle. A Distributed Checkpoint's `.metadata` of 20,000
    /// tensors (4.3 MB, protocol 4, as DCP writes it) takes 12 per byte here, values and what
    /// its reader copies out together; a flood of one-byte opcodes each making an empty dict
    /// would take 88.
    pub(crate) const PER_BYTE: usize = 16;
    /// Bytes of memory any pickle may take, however short.
    pub(crate) const BASE: usize = 32 << 20;

    /// The budget of a pickle of `len` bytes.
    pub(crate) fn for_pickle(len: usize) -> Budget {
        let limit = len.saturating_mul(Budget::PER_BYTE).saturating_add(Budget::BASE);
        Budget { left: std::cell::Cell::new(limit), limit }
    }

    /// Charges `n` bytes for `what`; past the budget, an error saying so.
    pub(crate) fn spend(&self, n: usize, what: &str) -> Result<()> {
        match self.left.get().checked_sub(n) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(Error::new(
                ErrorKind::Malformed,
                format!(
                    "the pickle's {what} would take more than {} bytes of memory, {} per byte \
                     of the pickle and {} MiB beside: far more than its size explains",
                    self.limit,
                    Budget::PER_BYTE,
                    Budget::BASE >> 20
                ),
            )),
        }
    }
}

/// Bytes charged for each value in the arena (its node), each slot of the stack or a
/// container, each memo entry and each dict entry (its item and its index entry).
const NODE_COST: usize = std::mem::size_of::<Node>();
const SLOT_COST: usize = std::mem::size_of::<Id>();
const MEMO_COST: usize = 32;
const ITEM_COST: usize = 2 * std::mem::size_of::<Id>();
const INDEX_COST: usize = std::mem::size_of::<Key>() + std::mem::size_of::<usize>() + 16;
/// Dicts of at most this many keys are scanned; larger ones are indexed.
const SMALL_DICT: usize = 8;

/// The bytes a key copies into a dict's index.
fn key_bytes(key: &Key) -> usize {
    match key {
        Key::Str(s) => s.len(),
        Key::Bytes(b) => b.len(),
        _ => 0,
    }
}
/// A dict's own allocation beside its node.
const DICT_COST: usize = std::mem::size_of::<Dict>();
/// What the allocator adds to each allocation (its header, and rounding).
const HEAP_COST: usize = 16;

/// The ints made once and shared: every value a one- or two-byte int opcode can give.
const SMALL_INTS: std::ops::RangeInclusive<i128> = -1..=0xFFFF;

/// A key of a dict, as Python compares them (for plain keys).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    None,
    Int(i128),
    Float(u64),
    Str(String),
    Bytes(Vec<u8>),
    /// Any other value: compared by identity.
    Other(Id),
}

/// A dict, in insertion order. One of more than [`SMALL_DICT`] keys has an index of them all;
/// a smaller one (a record's fields) is scanned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dict {
    pub(crate) items: Vec<(Id, Id)>,
    /// Boxed so an unindexed dict (most of them) is 32 bytes, not 72: a flood of empty
    /// dicts is what a hostile pickle makes most cheaply.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<Key, usize>>>,
}

impl Pickle {
    /// The value of the str key `name` in `dict`: found through its index when it has one,
    /// else among its few keys, so reading many fields of a large shared dict stays linear.
    pub(crate) fn get_str(&self, dict: &Dict, name: &str) -> Option<Id> {
        if dict.items.len() > SMALL_DICT {
            let index = dict.index.as_ref()?;
            return index.get(&Key::Str(name.to_owned())).map(|&i| dict.items[i].1);
        }
        dict.items
            .iter()
            .find(|&&(k, _)| matches!(self.node(k), Node::Str(s) if s == name))
            .map(|&(_, v)| v)
    }
}

/// One value the pickle built.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Id>),
    Tuple(Vec<Id>),
    Set(Vec<Id>),
    Dict(Box<Dict>),
    Global(Global),
    Storage(Box<StorageRef>),
    Tensor(Box<TensorRef>),
    Sparse(Box<SparseRef>),
    /// A NumPy dtype: its type string (`f8`, `i4`, …) and byte order (`<`, `>`, `|`, `=`).
    NumpyDtype(String, char),
    /// A record of [`Global::Record`]'s class, and the state `BUILD` gave it (a dict of its
    /// fields, or the tuple `TensorProperties` pickles itself as).
    Record(Class, Option<Id>),
}

impl Node {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::None => "None",
            Node::Bool(_) => "a bool",
            Node::Int(_) => "an int",
            Node::Float(_) => "a float",
            Node::Str(_) => "a str",
            Node::Bytes(_) => "bytes",
            Node::List(_) => "a list",
            Node::Tuple(_) => "a tuple",
            Node::Set(_) => "a set",
            Node::Dict(_) => "a dict",
            Node::Global(_) => "a global",
            Node::Storage(_) => "a storage",
            Node::Tensor(_) => "a tensor",
            Node::Sparse(_) => "a sparse tensor",
            Node::NumpyDtype(..) => "a NumPy dtype",
            Node::Record(..) => "a record",
        }
    }
}

/// What the machine built: the arena and the root value's index.
#[derive(Debug)]
pub(crate) struct Pickle {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: Id,
    /// The protocol its `PROTO` opcode named (0 without one).
    pub(crate) protocol: u8,
    /// What is left of the pickle's memory budget: readers copying values out charge it.
    pub(crate) budget: Budget,
}

impl Pickle {
    pub(crate) fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }
}

/// Runs the pickle in `bytes` (from its start to its `STOP`) and returns what it built.
/// `persistent` resolves persistent ids (the storages of a PyTorch checkpoint).
pub(crate) fn load(
    bytes: &[u8],
    persistent: &mut dyn FnMut(&Machine<'_>, Id) -> Result<Node>,
) -> Result<(Pickle, usize)> {
    let mut m = Machine {
        input: bytes,
        at: 0,
        nodes: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Memo::default(),
        protocol: 0,
        budget: bytes.len().saturating_mul(8).saturating_add(64 << 20),
        memory: Budget::for_pickle(bytes.len()),
        shared: HashMap::new(),
    };
    let root = m.run(persistent)?;
    let end = m.at;
    Ok((Pickle { nodes: m.nodes, root, protocol: m.protocol, budget: m.memory }, end))
}

/// The memo: keys given in order (what `MEMOIZE` and picklers' `PUT`s give) in a vector,
/// any other key in a map.
#[derive(Debug, Default)]
struct Memo {
    dense: Vec<Id>,
    sparse: HashMap<u64, Id>,
}

impl Memo {
    /// Puts `id` at `key`; the bytes a new entry takes, or 0 when it replaced one.
    fn put(&mut self, key: u64, id: Id) -> usize {
        let dense = self.dense.len() as u64;
        if key < dense {
            self.dense[usize::try_from(key).unwrap_or(usize::MAX)] = id;
            0
        } else if key == dense {
            self.dense.push(id);
            if self.sparse.remove(&key).is_some() { 0 } else { SLOT_COST }
        } else if self.sparse.insert(key, id).is_none() {
            MEMO_COST
        } else {
            0
        }
    }

    fn get(&self, key: u64) -> Option<Id> {
        match usize::try_from(key).ok().and_then(|k| self.dense.get(k)) {
            Some(&id) => Some(id),
            None => self.sparse.get(&key).copied(),
        }
    }

    /// The count of keys, as Python's `len(memo)` (what `MEMOIZE` puts at).
    fn len(&self) -> usize {
        self.dense.len() + self.sparse.len()
    }
}

/// A scalar made once and shared: `None`, a bool, a small int.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shared {
    None,
    Bool(bool),
    Int(i128),
}

/// The machine's state while it runs.
pub(crate) struct Machine<'a> {
    input: &'a [u8],
    at: usize,
    nodes: Vec<Node>,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: Memo,
    protocol: u8,
    /// Bytes and items still to copy or hash for values referred to again.
    budget: usize,
    /// Bytes of memory still to take.
    memory: Budget,
    /// The scalars made so far that are shared.
    shared: HashMap<Shared, Id>,
}

fn malformed(at: usize, message: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Malformed, format!("pickle, byte {at}: {message}"))
}

impl Machine<'_> {
    /// The value at `id`.
    pub(crate) fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let start = self.at;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.input.len())
            .ok_or_else(|| malformed(start, format!("{n} bytes claimed past the end")))?;
        self.at = end;
        Ok(&self.input[start..end])
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn le(&mut self, n: usize) -> Result<u64> {
        let b = self.take(n)?;
        Ok(b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    /// A length field of `n` bytes, checked against what is left.
    fn len(&mut self, n: usize) -> Result<usize> {
        let at = self.at;
        let len = self.le(n)?;
        usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.input.len() - self.at)
            .ok_or_else(|| malformed(at, format!("a length of {len} past the end")))
    }

    /// A line (protocol 0 arguments), without its newline.
    fn line(&mut self) -> Result<&str> {
        let start = self.at;
        let n = self.input[start..]
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| malformed(start, "a line without its end"))?;
        self.at = start + n + 1;
        std::str::from_utf8(&self.input[start..start + n])
            .map_err(|_| malformed(start, "a line that is not UTF-8"))
    }

    /// Pushes a new value: a shared scalar is pushed as the one made before; anything else is
    /// added to the arena, its bytes charged.
    fn push(&mut self, node: Node) -> Result<()> {
        let shared = match node {
            Node::None => Some(Shared::None),
            Node::Bool(b) => Some(Shared::Bool(b)),
            Node::Int(i) if SMALL_INTS.contains(&i) => Some(Shared::Int(i)),
            _ => None,
        };
        if let Some(id) = shared.and_then(|s| self.shared.get(&s)) {
            let id = *id;
            return self.push_id(id);
        }
        if self.nodes.len() >= MAX_VALUES {
            return Err(malformed(self.at, format!("more than {MAX_VALUES} values")));
        }
        // What the node's own allocation takes, with the allocator's header.
        let heap = match &node {
            Node::Str(s) if !s.is_empty() => s.len() + HEAP_COST,
            Node::Bytes(b) if !b.is_empty() => b.len() + HEAP_COST,
            Node::NumpyDtype(d, _) => d.len() + HEAP_COST,
            Node::Dict(_) => DICT_COST + HEAP_COST,
            Node::Storage(_) => std::mem::size_of::<StorageRef>() + HEAP_COST,
            Node::Tensor(t) => std::mem::size_of::<TensorRef>() + 16 * t.shape.len() + HEAP_COST,
            Node::Sparse(t) => std::mem::size_of::<SparseRef>() + 16 * t.shape.len() + HEAP_COST,
            _ => 0,
        };
        self.memory.spend(NODE_COST + heap, "values")?;
        self.nodes.push(node);
        let id = self.nodes.len() - 1;
        if let Some(s) = shared {
            self.memory.spend(MEMO_COST, "values")?;
            self.shared.insert(s, id);
        }
        self.push_id(id)
    }

    /// Pushes a value already made (a memo entry, a duplicate, a shared scalar): a slot of
    /// the stack, and later of the container it goes into.
    fn push_id(&mut self, id: Id) -> Result<()> {
        self.memory.spend(SLOT_COST, "stack")?;
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self) -> Result<Id> {
        let at = self.at;
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(malformed(at, "a pop across a mark"));
        }
        self.stack.pop().ok_or_else(|| malformed(at, "a pop from an empty stack"))
    }

    /// The top of the stack, which must lie above the last mark (as CPython requires).
    fn top(&self) -> Result<Id> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(malformed(self.at, "an operation on a value below a mark"));
        }
        self.stack.last().copied().ok_or_else(|| malformed(self.at, "an empty stack"))
    }

    /// Charges `n` bytes or items of copying or hashing to the budget.
    fn spend(&mut self, n: usize) -> Result<()> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| {
            malformed(self.at, "the pickle asks for far more copying than its size explains")
        })?;
        Ok(())
    }

    /// The items since the last mark, and the mark removed.
    fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let mark = self.marks.pop().ok_or_else(|| malformed(self.at, "no mark to pop to"))?;
        if mark > self.stack.len() {
            return Err(malformed(self.at, "a mark above the stack"));
        }
        Ok(self.stack.split_off(mark))
    }

    fn string(&self, id: Id) -> Result<&str> {
        match &self.nodes[id] {
            Node::Str(s) => Ok(s),
            other => Err(malformed(self.at, format!("a str expected, {} found", other.kind()))),
        }
    }

    fn int(&self, id: Id) -> Result<i128> {
        match &self.nodes[id] {
            Node::Int(i) => Ok(*i),
            Node::Bool(b) => Ok(i128::from(*b)),
            other => Err(malformed(self.at, format!("an int expected, {} found", other.kind()))),
        }
    }

    fn items(&self, id: Id) -> Result<&[Id]> {
        match &self.nodes[id] {
            Node::Tuple(v) | Node::List(v) => Ok(v),
            other => Err(malformed(self.at, format!("a tuple expected, {} found", other.kind()))),
        }
    }

    /// A tuple of non-negative ints (a shape or strides).
    fn dims(&self, id: Id, what: &str) -> Result<Vec<u64>> {
        let items = self.items(id)?;
        if items.len() > 64 {
            return Err(malformed(self.at, format!("{what} of {} dimensions", items.len())));
        }
        items
            .iter()
            .map(|&d| {
                let v = self.int(d)?;
                u64::try_from(v).map_err(|_| malformed(self.at, format!("{what} holds {v}")))
            })
            .collect()
    }

    fn key(&self, id: Id) -> Key {
        match &self.nodes[id] {
            Node::None => Key::None,
            // Python: True == 1 and hash(True) == hash(1).
            Node::Bool(b) => Key::Int(i128::from(*b)),
            Node::Int(i) => Key::Int(*i),
            // Python: 1.0 == 1 and hash(1.0) == hash(1), for every integral float.
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 1e30 => {
                #[allow(clippy::cast_possible_truncation)] // integral and within i128
                let i = *f as i128;
                Key::Int(i)
            }
            Node::Float(f) => Key::Float(f.to_bits()),
            Node::Str(s) => Key::Str(s.clone()),
            Node::Bytes(b) => Key::Bytes(b.clone()),
            _ => Key::Other(id),
        }
    }

    fn set_item(&mut self, dict: Id, key: Id, value: Id) -> Result<()> {
        let cost = match &self.nodes[key] {
            Node::Str(s) => s.len(),
            Node::Bytes(b) => b.len(),
            _ => 1,
        };
        let len = match &self.nodes[dict] {
            Node::Dict(d) => d.items.len(),
            other => {
                let kind = other.kind();
                return Err(malformed(self.at, format!("setting an item of {kind}, not a dict")));
            }
        };
        // A small dict is scanned (at most SMALL_DICT keys compared); a larger one has an
        // index, built when it grows past that.
        let small = len <= SMALL_DICT;
        self.spend(if small { cost.saturating_mul(len.max(1)) } else { cost })?;
        let k = self.key(key);
        let Node::Dict(d) = &self.nodes[dict] else { unreachable!("a dict above") };
        let found = if small {
            d.items.iter().position(|&(old, _)| self.key(old) == k)
        } else {
            d.index.as_ref().and_then(|index| index.get(&k).copied())
        };
        let copied = key_bytes(&k);
        if found.is_none() {
            // The item; its index entry (the key copied) once the dict is indexed, and every
            // earlier item's entry when this item makes it so.
            let mut bytes = ITEM_COST;
            if len == SMALL_DICT {
                let earlier: usize =
                    d.items.iter().map(|&(old, _)| key_bytes(&self.key(old))).sum();
                bytes += (len + 1) * INDEX_COST + earlier + copied;
            } else if len > SMALL_DICT {
                bytes += INDEX_COST + copied;
            }
            self.memory.spend(bytes, "dicts")?;
        }
        let earlier: Vec<Key> = if found.is_none() && len == SMALL_DICT {
            d.items.iter().map(|&(old, _)| self.key(old)).collect()
        } else {
            Vec::new()
        };
        let Node::Dict(d) = &mut self.nodes[dict] else { unreachable!("a dict above") };
        match found {
            Some(i) => d.items[i].1 = value,
            None => {
                if len >= SMALL_DICT {
                    let index = d.index.get_or_insert_default();
                    for (i, old) in earlier.into_iter().enumerate() {
                        index.entry(old).or_insert(i);
                    }
                    index.insert(k, len);
                }
                d.items.push((key, value));
            }
        }
        Ok(())
    }

    /// APPEND(S) to a list, or ADDITEMS to a set (`set`), as CPython pairs them.
    fn append(&mut self, list: Id, items: &[Id], set: bool) -> Result<()> {
        match (&mut self.nodes[list], set) {
            (Node::List(v), false) | (Node::Set(v), true) => {
                v.extend_from_slice(items);
                Ok(())
            }
            (other, _) => {
                let kind = other.kind();
                Err(malformed(
                    self.at,
                    format!("adding to {kind}, not a {}", if set { "set" } else { "list" }),
                ))
            }
        }
    }

    fn global(&mut self, module: &str, name: &str) -> Result<()> {
        let global = Global::resolve(module, name)?;
        self.push(Node::Global(global))
    }

    /// `callable(*args)` for the globals modelled here.
    fn call(&mut self, callable: Id, args: Id, depth: u32) -> Result<Node> {
        if depth > 4 {
            return Err(malformed(self.at, "tensor rebuilds nested past any torch.save writes"));
        }
        let Node::Global(global) = self.nodes[callable].clone() else {
            return Err(malformed(
                self.at,
                format!("calling {}, not a global", self.nodes[callable].kind()),
            ));
        };
        let args = self.items(args)?.to_vec();
        self.spend(args.len())?;
        let arity = |n: std::ops::RangeInclusive<usize>| {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(malformed(
                    self.at,
                    format!("{} called with {} arguments", global.describe(), args.len()),
                ))
            }
        };
        Ok(match global {
            Global::OrderedDict => {
                arity(0..=1)?;
                let dict = self.nodes.len();
                self.nodes.push(Node::Dict(Box::default()));
                if let Some(&pairs) = args.first() {
                    let pairs = self.items(pairs)?.to_vec();
                    self.spend(pairs.len())?;
                    for pair in pairs {
                        let kv = self.items(pair)?.to_vec();
                        if kv.len() != 2 {
                            return Err(malformed(
                                self.at,
                                "an OrderedDict item that is not a pair",
                            ));
                        }
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                self.nodes.pop().unwrap_or(Node::None)
            }
            Global::RebuildTensor | Global::RebuildTensorV3 => {
                let v3 = global == Global::RebuildTensorV3;
                arity(if v3 { 7..=8 } else { 4..=7 })?;
                let Node::Storage(storage) = self.nodes[args[0]].clone() else {
                    return Err(malformed(
                        self.at,
                        "a tensor rebuilt from something not a storage",
                    ));
                };
                let offset = u64::try_from(self.int(args[1])?)
                    .map_err(|_| malformed(self.at, "a negative storage offset"))?;
                let shape = self.dims(args[2], "a shape")?;
                let strides = self.dims(args[3], "strides")?;
                if shape.len() != strides.len() {
                    return Err(malformed(
                        self.at,
                        format!(
                            "a shape of {} dimensions with {} strides",
                            shape.len(),
                            strides.len()
                        ),
                    ));
                }
                let dtype = if v3 {
                    match &self.nodes[args[6]] {
                        Node::Global(Global::Dtype(d)) => d,
                        other => {
                            return Err(malformed(
                                self.at,
                                format!("a tensor dtype that is {}", other.kind()),
                            ));
                        }
                    }
                } else {
                    storage.dtype
                };
                Node::Tensor(Box::new(TensorRef {
                    storage: *storage,
                    dtype,
                    offset,
                    shape,
                    strides,
                }))
            }
            Global::RebuildParameter => {
                arity(3..=4)?;
                match &self.nodes[args[0]] {
                    Node::Tensor(t) => Node::Tensor(t.clone()),
                    other => {
                        return Err(malformed(
                            self.at,
                            format!("a parameter of {}, not a tensor", other.kind()),
                        ));
                    }
                }
            }
            Global::RebuildFromType => {
                arity(4..=4)?;
                if !matches!(self.nodes[args[1]], Node::Global(Global::TensorType)) {
                    return Err(malformed(self.at, "a tensor of a type other than torch.Tensor"));
                }
                self.call(args[0], args[2], depth + 1)?
            }
            Global::Size => {
                arity(0..=1)?;
                match args.first() {
                    Some(&t) => {
                        let items = self.items(t)?.to_vec();
                        self.spend(items.len())?;
                        Node::Tuple(items)
                    }
                    None => Node::Tuple(Vec::new()),
                }
            }
            Global::Bytes => {
                arity(0..=0)?;
                Node::Bytes(Vec::new())
            }
            Global::Encode => {
                arity(1..=2)?;
                let len = self.string(args[0])?.len();
                self.spend(len)?;
                let text = self.string(args[0])?;
                let encoding = match args.get(1) {
                    Some(&e) => self.string(e)?.to_ascii_lowercase(),
                    None => "utf-8".to_owned(),
                };
                match encoding.as_str() {
                    "latin1" | "latin-1" | "iso-8859-1" => Node::Bytes(
                        text.chars()
                            .map(|c| u8::try_from(u32::from(c)))
                            .collect::<std::result::Result<_, _>>()
                            .map_err(|_| malformed(self.at, "a latin-1 text past U+00FF"))?,
                    ),
                    "utf-8" | "utf8" => Node::Bytes(text.as_bytes().to_vec()),
                    other => {
                        return Err(malformed(self.at, format!("_codecs.encode to {other:?}")));
                    }
                }
            }
            Global::NumpyDtype => {
                arity(1..=3)?;
                let len = self.string(args[0])?.len();
                self.spend(len)?;
                let descr = self.string(args[0])?.to_owned();
                Node::NumpyDtype(descr, '=')
            }
            Global::NumpyScalar => {
                arity(2..=2)?;
                self.numpy_scalar(args[0], args[1])?
            }
            Global::Set => {
                arity(0..=1)?;
                match args.first() {
                    Some(&t) => {
                        let items = self.items(t)?.to_vec();
                        self.spend(items.len())?;
                        Node::Set(items)
                    }
                    None => Node::Set(Vec::new()),
                }
            }
            Global::GetLayout => {
                arity(1..=1)?;
                match self.string(args[0])? {
                    "torch.sparse_coo" => Node::Global(Global::Layout("sparse_coo")),
                    "torch.sparse_csr" => Node::Global(Global::Layout("sparse_csr")),
                    // A Distributed Checkpoint's tensor properties name the dense layout.
                    "torch.strided" => Node::Global(Global::Layout("strided")),
                    other => {
                        let shown: String = other.chars().take(64).collect();
                        return Err(malformed(
                            self.at,
                            format!(
                                "a tensor of layout {shown}: sparse COO and CSR tensors are read \
                                 (convert others with .to_sparse_coo() before saving)"
                            ),
                        ));
                    }
                }
            }
            Global::RebuildSparse => {
                arity(2..=2)?;
                let Node::Global(Global::Layout(layout)) = self.nodes[args[0]] else {
                    return Err(malformed(self.at, "a sparse tensor without a sparse layout"));
                };
                let data = self.items(args[1])?.to_vec();
                let tensor = |m: &Self, id: Id| match &m.nodes[id] {
                    Node::Tensor(t) => Ok((**t).clone()),
                    other => Err(malformed(
                        m.at,
                        format!("a sparse tensor part that is {}, not a tensor", other.kind()),
                    )),
                };
                let (parts, size) = match (layout, data.len()) {
                    ("sparse_coo", 3 | 4) => (
                        vec![
                            ("coords", tensor(self, data[0])?),
                            ("values", tensor(self, data[1])?),
                        ],
                        data[2],
                    ),
                    ("sparse_csr", 4) => (
                        vec![
                            ("indptr", tensor(self, data[0])?),
                            ("indices", tensor(self, data[1])?),
                            ("values", tensor(self, data[2])?),
                        ],
                        data[3],
                    ),
                    _ => {
                        return Err(malformed(
                            self.at,
                            format!("a {layout} tensor of {} parts", data.len()),
                        ));
                    }
                };
                let shape = self.dims(size, "a sparse size")?;
                Node::Sparse(Box::new(SparseRef { layout, shape, parts }))
            }
            Global::MemoryFormat => {
                arity(1..=1)?;
                match self.nodes[args[0]] {
                    Node::Int(n) => Node::Int(n),
                    ref other => {
                        return Err(malformed(
                            self.at,
                            format!("a memory format of {}, not an int", other.kind()),
                        ));
                    }
                }
            }
            Global::Path => {
                let mut parts = Vec::with_capacity(args.len());
                for &part in &args {
                    parts.push(self.string(part)?.to_owned());
                }
                self.spend(parts.iter().map(String::len).sum())?;
                Node::Str(parts.join("/").replacen("//", "/", 1))
            }
            Global::TensorType
            | Global::Storage(_)
            | Global::Dtype(_)
            | Global::Layout(_)
            | Global::Record(_) => {
                return Err(malformed(self.at, format!("calling {}", global.describe())));
            }
        })
    }

    fn numpy_scalar(&self, dtype: Id, data: Id) -> Result<Node> {
        let (Node::NumpyDtype(descr, order), Node::Bytes(b)) =
            (&self.nodes[dtype], &self.nodes[data])
        else {
            return Err(malformed(self.at, "a NumPy scalar without a dtype and its bytes"));
        };
        let kind = descr.trim_start_matches(['<', '>', '|', '=']);
        let big = *order == '>' || descr.starts_with('>');
        let mut bytes = b.clone();
        let width = kind.get(1..).and_then(|w| w.parse::<usize>().ok()).unwrap_or(0);
        if bytes.len() != width {
            return Err(malformed(
                self.at,
                format!("a NumPy {descr} scalar of {} bytes", bytes.len()),
            ));
        }
        if big {
            bytes.reverse();
        }
        // Little-endian now: widened with zeros (unsigned) or the sign (signed).
        let signed = kind.starts_with('i') && bytes.last().is_some_and(|&b| b & 0x80 != 0);
        let mut wide = [if signed { 0xFF } else { 0 }; 16];
        wide[..width.min(16)].copy_from_slice(&bytes[..width.min(16)]);
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&wide[..8]);
        let bits = u64::from_le_bytes(eight);
        Ok(match (kind.as_bytes().first(), width) {
            (Some(b'b'), 1) => Node::Bool(bytes[0] != 0),
            (Some(b'u' | b'i'), 1 | 2 | 4 | 8) => Node::Int(i128::from_le_bytes(wide)),
            (Some(b'f'), 2) => {
                Node::Float(f64::from(half::f16::from_le_bytes([bytes[0], bytes[1]])))
            }
            (Some(b'f'), 4) => {
                Node::Float(f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])))
            }
            (Some(b'f'), 8) => Node::Float(f64::from_bits(bits)),
            _ => {
                return Err(malformed(self.at, format!("a NumPy scalar of dtype {descr:?}")));
            }
        })
    }

    /// `obj.__setstate__(state)` for what accepts one: an `OrderedDict`'s instance attributes
    /// (`_metadata` of a state dict) are dropped; a NumPy dtype takes its byte order.
    fn build(&mut self, obj: Id, state: Id) -> Result<()> {
        match &self.nodes[obj] {
            Node::Dict(_) | Node::Tensor(_) => Ok(()),
            Node::Record(class, None) => {
                let class = *class;
                self.nodes[obj] = Node::Record(class, Some(state));
                Ok(())
            }
            Node::NumpyDtype(descr, _) => {
                let descr = descr.clone();
                let order = self
                    .items(state)
                    .ok()
                    .and_then(|s| s.get(1).copied())
                    .and_then(|o| self.string(o).ok())
                    .and_then(|o| o.chars().next())
                    .unwrap_or('=');
                self.nodes[obj] = Node::NumpyDtype(descr, order);
                Ok(())
            }
            other => Err(malformed(self.at, format!("setting the state of {}", other.kind()))),
        }
    }

    fn run(&mut self, persistent: &mut dyn FnMut(&Machine<'_>, Id) -> Result<Node>) -> Result<Id> {
        loop {
            let at = self.at;
            let op = self.u8()?;
            match op {
                // PROTO
                0x80 => {
                    self.protocol = self.u8()?;
                    if self.protocol > 5 {
                        return Err(malformed(at, format!("pickle protocol {}", self.protocol)));
                    }
                }
                // FRAME: a hint for buffered readers.
                0x95 => {
                    self.le(8)?;
                }
                // STOP
                b'.' => {
                    let root = self.pop()?;
                    if !self.stack.is_empty() || !self.marks.is_empty() {
                        return Err(malformed(at, "values left on the stack at STOP"));
                    }
                    return Ok(root);
                }
                // MARK
                b'(' => self.marks.push(self.stack.len()),
                // POP, POP_MARK, DUP
                b'0' => {
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.pop()?;
                    }
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let top = self.top()?;
                    self.push_id(top)?;
                }
                // Constants and numbers.
                b'N' => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                b'J' => {
                    let b = self.take(4)?;
                    let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    self.push(Node::Int(i128::from(v)))?;
                }
                b'K' => {
                    let v = self.le(1)?;
                    self.push(Node::Int(i128::from(v)))?;
                }
                b'M' => {
                    let v = self.le(2)?;
                    self.push(Node::Int(i128::from(v)))?;
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a { self.len(1)? } else { self.len(4)? };
                    if n > 16 {
                        return Err(malformed(at, format!("an integer of {n} bytes")));
                    }
                    let b = self.take(n)?;
                    let mut wide =
                        [if b.last().is_some_and(|&x| x & 0x80 != 0) { 0xFF } else { 0 }; 16];
                    wide[..n].copy_from_slice(b);
                    self.push(Node::Int(i128::from_le_bytes(wide)))?;
                }
                b'I' | b'L' => {
                    let line = self.line()?.trim_end_matches('L').to_owned();
                    let node = match line.as_str() {
                        "00" if op == b'I' => Node::Bool(false),
                        "01" if op == b'I' => Node::Bool(true),
                        digits => Node::Int(digits.parse().map_err(|_| {
                            let shown: String = digits.chars().take(64).collect();
                            malformed(at, format!("an integer {shown:?}"))
                        })?),
                    };
                    self.push(node)?;
                }
                b'G' => {
                    let v = f64::from_bits(u64::from_be_bytes(
                        self.take(8)?.try_into().unwrap_or([0; 8]),
                    ));
                    self.push(Node::Float(v))?;
                }
                b'F' => {
                    let line = self.line()?.to_owned();
                    let v = line.parse().map_err(|_| {
                        let shown: String = line.chars().take(64).collect();
                        malformed(at, format!("a float {shown:?}"))
                    })?;
                    self.push(Node::Float(v))?;
                }
                // Strings and bytes.
                b'X' | 0x8c | 0x8d => {
                    let n = match op {
                        0x8c => self.len(1)?,
                        b'X' => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let text = std::str::from_utf8(self.take(n)?)
                        .map_err(|_| malformed(at, "a str that is not UTF-8"))?
                        .to_owned();
                    self.push(Node::Str(text))?;
                }
                // Python 2 str: decoded as UTF-8, as torch.load does by default.
                b'T' | b'U' => {
                    let n = if op == b'U' { self.len(1)? } else { self.len(4)? };
                    let text = std::str::from_utf8(self.take(n)?)
                        .map_err(|_| malformed(at, "a Python 2 str that is not UTF-8"))?
                        .to_owned();
                    self.push(Node::Str(text))?;
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'C' => self.len(1)?,
                        b'B' => self.len(4)?,
                        _ => self.len(8)?,
                    };
                    let bytes = self.take(n)?.to_vec();
                    self.push(Node::Bytes(bytes))?;
                }
                // Containers.
                b')' => self.push(Node::Tuple(Vec::new()))?,
                b']' => self.push(Node::List(Vec::new()))?,
                b'}' => self.push(Node::Dict(Box::default()))?,
                0x8f => self.push(Node::Set(Vec::new()))?,
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Node::Tuple(items))?;
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n
                        || self.marks.last().is_some_and(|&m| m > self.stack.len() - n)
                    {
                        return Err(malformed(at, format!("TUPLE{n} without {n} items")));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push(Node::Tuple(items))?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Node::List(items))?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.push(Node::Set(items))?;
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(malformed(at, "DICT with an odd number of items"));
                    }
                    self.push(Node::Dict(Box::default()))?;
                    let dict = self.top()?;
                    for kv in items.chunks_exact(2) {
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                b'a' => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.append(list, &[item], false)?;
                }
                b'e' | 0x90 => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.append(list, &items, op == 0x90)?;
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    let dict = self.top()?;
                    self.set_item(dict, key, value)?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    if items.len() % 2 != 0 {
                        return Err(malformed(at, "SETITEMS with an odd number of items"));
                    }
                    let dict = self.top()?;
                    for kv in items.chunks_exact(2) {
                        self.set_item(dict, kv[0], kv[1])?;
                    }
                }
                // The memo.
                b'q' | b'r' | b'p' | 0x94 => {
                    let key = match op {
                        b'q' => self.le(1)?,
                        b'r' => self.le(4)?,
                        b'p' => {
                            let line = self.line()?.to_owned();
                            line.parse().map_err(|_| malformed(at, "a PUT key"))?
                        }
                        _ => self.memo.len() as u64,
                    };
                    let top = self.top()?;
                    let bytes = self.memo.put(key, top);
                    self.memory.spend(bytes, "memo")?;
                }
                b'h' | b'j' | b'g' => {
                    let key = match op {
                        b'h' => self.le(1)?,
                        b'j' => self.le(4)?,
                        _ => {
                            let line = self.line()?.to_owned();
                            line.parse().map_err(|_| malformed(at, "a GET key"))?
                        }
                    };
                    let id = self
                        .memo
                        .get(key)
                        .ok_or_else(|| malformed(at, format!("memo entry {key} was never put")))?;
                    self.push_id(id)?;
                }
                // Globals and calls.
                b'c' => {
                    let module = self.line()?.to_owned();
                    let name = self.line()?.to_owned();
                    self.global(&module, &name)?;
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (module, name) =
                        (self.string(module)?.to_owned(), self.string(name)?.to_owned());
                    self.global(&module, &name)?;
                }
                b'R' => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let node = self.call(callable, args, 0)?;
                    self.push(node)?;
                }
                0x81 | 0x92 => {
                    if op == 0x92 {
                        let kwargs = self.pop()?;
                        if !matches!(&self.nodes[kwargs], Node::Dict(d) if d.items.is_empty()) {
                            return Err(malformed(at, "NEWOBJ_EX with keyword arguments"));
                        }
                    }
                    self.pop()?; // the arguments, which __new__ ignores
                    let class = self.pop()?;
                    match self.nodes[class] {
                        // `cls.__new__(cls, *args)` makes an empty dict whatever the arguments.
                        Node::Global(Global::OrderedDict) => {
                            self.push(Node::Dict(Box::default()))?;
                        }
                        // A record with no fields yet: `BUILD` gives them.
                        Node::Global(Global::Record(class)) => {
                            self.push(Node::Record(class, None))?;
                        }
                        _ => {
                            return Err(malformed(
                                at,
                                "NEWOBJ of a class other than collections.OrderedDict or a \
                                 Distributed Checkpoint record",
                            ));
                        }
                    }
                }
                b'b' => {
                    let state = self.pop()?;
                    let obj = self.top()?;
                    self.build(obj, state)?;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let node = persistent(self, pid)?;
                    self.push(node)?;
                }
                b'P' => {
                    let _ = self.line()?;
                    return Err(malformed(at, "a text persistent id (PERSID)"));
                }
                b'i' | b'o' => {
                    return Err(malformed(at, "building an instance of a class (INST/OBJ)"));
                }
                0x82..=0x84 => {
                    return Err(malformed(at, "an extension-registry global (EXT)"));
                }
                0x97 | 0x98 => {
                    return Err(malformed(at, "an out-of-band buffer (protocol 5)"));
                }
                b'S' | b'V' => {
                    return Err(malformed(at, "a protocol 0 text string (STRING/UNICODE)"));
                }
                other => return Err(malformed(at, format!("unknown opcode 0x{other:02x}"))),
            }
        }
    }
}

/// The storage a persistent id `('storage', type, key, location, numel[, view])` names.
pub(crate) fn storage_of(m: &Machine<'_>, pid: Id) -> Result<StorageRef> {
    let items = m.items(pid)?;
    let bad =
        || malformed(m.at, "a persistent id that is not ('storage', type, key, location, numel)");
    if !(5..=6).contains(&items.len()) || m.string(items[0]).ok() != Some("storage") {
        return Err(bad());
    }
    let Node::Global(Global::Storage(dtype)) = m.node(items[1]) else {
        return Err(bad());
    };
    let key = m.string(items[2]).map_err(|_| bad())?;
    // torch's keys are short decimal strings; anything long is hostile.
    if key.len() > 256 {
        return Err(malformed(m.at, format!("a storage key of {} bytes", key.len())));
    }
    let key = key.to_owned();
    // Legacy checkpoints may name a view of a storage; torch has not written them since 1.x.
    if items.len() == 6 && !matches!(m.node(items[5]), Node::None) {
        return Err(malformed(m.at, "a storage view (legacy view_metadata), which is not read"));
    }
    let numel = u64::try_from(m.int(items[4])?).map_err(|_| bad())?;
    Ok(StorageRef { dtype, key, numel })
}

#[cfg(test)]
mod tests;
