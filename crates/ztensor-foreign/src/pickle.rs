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

mod call;
mod globals;
mod run;

use globals::Class;
pub(crate) use globals::Global;

/// An index into the machine's arena.
pub(crate) type Id = usize;

/// The most values one pickle may build (a state dict of 100,000 tensors builds about two
/// million).
pub(crate) const MAX_VALUES: usize = 1 << 24;

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

/// Runs `bytes` through the pickle machine alone, with every global it models and each
/// persistent id read as a PyTorch storage is named (key, dtype, count); returns how many
/// values it built. For the machine's fuzz target: no input may make it run anything, loop,
/// or hold more memory than its budget sees.
///
/// # Errors
/// What the machine refuses: an opcode or global it does not model, a length past the
/// bytes, a budget spent.
pub fn probe(bytes: &[u8]) -> Result<usize> {
    let (pickle, _) = load(bytes, &mut |m, pid| Ok(Node::Storage(Box::new(storage_of(m, pid)?))))?;
    Ok(pickle.nodes.len())
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
