//! Where a checkpoint's pieces lie: its pickle run (every storage it names noted), and its
//! storages found by key, in a zip archive or a legacy stream.

use std::collections::HashMap;
use std::sync::OnceLock;

use ztensor_io::ReadAt;

use crate::archive::{Member, Method, members, top_level_pickle};
use crate::error::{Error, ErrorKind, Result};
use crate::pickle::{self, Node, Pickle};
use crate::torch_dtypes::element_size;

/// The largest `data.pkl` read (a state dict of 100,000 tensors pickles to a few MiB).
pub const MAX_PICKLE: u64 = 256 << 20;

pub(super) fn malformed(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Malformed, message)
}

/// One storage of the checkpoint.
#[derive(Debug)]
pub(super) struct Storage {
    pub(super) key: String,
    /// Where its bytes lie in the file (stored ones).
    pub(super) offset: u64,
    pub(super) len: u64,
    /// The zip member's CRC-32 (legacy checkpoints keep none).
    pub(super) crc32: Option<u32>,
    /// Its member, when deflated.
    pub(super) deflated: Option<Member>,
    /// Whether its CRC-32 matched, once checked.
    pub(super) verified: OnceLock<std::result::Result<(), String>>,
    /// A deflated member's bytes, inflated (and CRC-checked) once, when first read.
    pub(super) inflated: OnceLock<std::result::Result<Vec<u8>, String>>,
}

/// The storages a pickle's persistent ids named: key to (dtype, elements).
pub(super) type Seen = HashMap<String, (&'static str, u64)>;

/// Finds a storage of the checkpoint by its key.
pub(super) type FindStorage = Box<dyn Fn(&str) -> Option<Storage>>;

/// Where a checkpoint's pieces lie: its pickle, and a finder of its storages by key.
pub(super) struct Layout {
    pub(super) pickle: (Pickle, Seen),
    pub(super) storage: FindStorage,
    pub(super) big_endian: bool,
    pub(super) legacy: bool,
}

/// Runs `bytes` as the checkpoint's pickle, noting every storage it names.
pub(super) fn run_pickle(bytes: &[u8]) -> Result<(Pickle, Seen, usize)> {
    let mut seen = Seen::new();
    let (pickle, end) = pickle::load(bytes, &mut |m, pid| {
        let storage = pickle::storage_of(m, pid)?;
        match seen.get(&storage.key) {
            // torch.save names each storage with one type and size.
            Some(&(dtype, numel)) if dtype != storage.dtype || numel != storage.numel => {
                return Err(malformed(format!(
                    "storage {:?} named as {numel} {dtype} and as {} {}",
                    storage.key, storage.numel, storage.dtype
                )));
            }
            Some(_) => {}
            None => {
                seen.insert(storage.key.clone(), (storage.dtype, storage.numel));
            }
        }
        Ok(Node::Storage(Box::new(storage)))
    })?;
    Ok((pickle, seen, end))
}

/// A `torch.save` zip archive (PyTorch 1.6 and later).
pub(super) fn zipped<S: ReadAt>(source: &S) -> Result<Layout> {
    let all = members(source)?;
    if all.iter().any(|m| m.name.ends_with("/constants.pkl") || m.name.contains("/code/")) {
        return Err(malformed(
            "a TorchScript archive (torch.jit.save): it holds a program, not a checkpoint; \
             save its state_dict() with torch.save instead",
        ));
    }
    let mut prefixes = all.iter().filter_map(|m| top_level_pickle(&m.name));
    let prefix = prefixes
        .next()
        .ok_or_else(|| {
            malformed("a zip archive without <name>/data.pkl: not a torch.save checkpoint")
        })?
        .to_owned();
    if prefixes.next().is_some() {
        return Err(malformed("a zip archive with more than one <name>/data.pkl"));
    }
    let by_name: HashMap<String, Member> = all.into_iter().map(|m| (m.name.clone(), m)).collect();
    let find = |name: &str| by_name.get(&format!("{prefix}/{name}")).cloned();
    let big_endian = match find("byteorder") {
        None => false,
        Some(m) => match &m.bytes(source, 16)?[..] {
            b"little" => false,
            b"big" => true,
            other => {
                return Err(malformed(format!(
                    "byteorder {:?} (little or big)",
                    String::from_utf8_lossy(other)
                )));
            }
        },
    };
    let data = find("data.pkl").ok_or_else(|| malformed("no data.pkl"))?;
    let (pickle, seen, _) = run_pickle(&data.bytes(source, MAX_PICKLE)?)?;
    let storage = move |key: &str| {
        let m = by_name.get(&format!("{prefix}/data/{key}"))?.clone();
        Some(Storage {
            key: key.to_owned(),
            offset: m.offset,
            len: m.size,
            crc32: Some(m.crc32),
            deflated: (m.method == Method::Deflated).then_some(m),
            verified: OnceLock::new(),
            inflated: OnceLock::new(),
        })
    };
    Ok(Layout { pickle: (pickle, seen), storage: Box::new(storage), big_endian, legacy: false })
}

/// A legacy checkpoint (`torch.save(..., _use_new_zipfile_serialization=False)`, and every
/// `torch.save` before 1.6): a magic number, a protocol version and the machine's facts, each
/// pickled; the checkpoint's pickle; the sorted list of its storage keys; then each storage as
/// its element count (`i64`, little-endian) and its bytes.
pub(super) fn legacy<S: ReadAt>(source: &S) -> Result<Layout> {
    pub(super) const MAGIC: i128 = 0x1950_a86a_20f9_469c_fc6c;
    let head_len = source.len().min(MAX_PICKLE);
    let mut head = vec![0u8; usize::try_from(head_len).unwrap_or(0)];
    source
        .read_exact_at(0, &mut head)
        .map_err(|e| Error::new(ErrorKind::Io, format!("reading the pickles: {e}")))?;
    let not_legacy = || {
        malformed("a Python pickle that is not a PyTorch checkpoint (no legacy torch.save magic)")
    };
    let mut at = 0usize;
    let next = |at: &mut usize| -> Result<(Pickle, Seen)> {
        let (pickle, seen, end) = run_pickle(head.get(*at..).unwrap_or_default())?;
        *at += end;
        Ok((pickle, seen))
    };
    let (magic, _) = next(&mut at).map_err(|_| not_legacy())?;
    if !matches!(magic.node(magic.root), Node::Int(m) if *m == MAGIC) {
        return Err(not_legacy());
    }
    let (version, _) = next(&mut at)?;
    if !matches!(version.node(version.root), Node::Int(1001)) {
        return Err(malformed("a legacy PyTorch checkpoint of a protocol other than 1001"));
    }
    let (info, _) = next(&mut at)?;
    if let Node::Dict(d) = info.node(info.root) {
        for &(k, v) in &d.items {
            if matches!(info.node(k), Node::Str(s) if s == "little_endian")
                && matches!(info.node(v), Node::Bool(false))
            {
                return Err(malformed(
                    "a legacy PyTorch checkpoint written on a big-endian machine",
                ));
            }
        }
    }
    let (main, seen) = next(&mut at)?;
    let (keys, _) = next(&mut at)?;
    let Node::List(ids) = keys.node(keys.root) else {
        return Err(malformed("a legacy PyTorch checkpoint without its list of storage keys"));
    };
    let mut offsets = HashMap::new();
    let mut pos = at as u64;
    for &id in ids {
        let Node::Str(key) = keys.node(id) else {
            return Err(malformed("a storage key that is not a str"));
        };
        let &(dtype, numel) = seen
            .get(key)
            .ok_or_else(|| malformed(format!("storage {key:?} is listed but never named")))?;
        let mut count = [0u8; 8];
        source.read_exact_at(pos, &mut count).map_err(|_| {
            malformed(format!("storage {key:?}: its element count at byte {pos} is past the end"))
        })?;
        let count = u64::from_le_bytes(count);
        let len = count.checked_mul(element_size(dtype));
        let data = pos + 8;
        if count != numel
            || len.is_none_or(|l| data.checked_add(l).is_none_or(|e| e > source.len()))
        {
            return Err(malformed(format!(
                "storage {key:?}: {count} elements at byte {pos} (the pickle says {numel}; the \
                 file has {} bytes)",
                source.len()
            )));
        }
        let len = len.unwrap_or(0);
        offsets.insert(key.clone(), (data, len));
        pos = data + len;
    }
    let storage = move |key: &str| {
        let &(offset, len) = offsets.get(key)?;
        Some(Storage {
            key: key.to_owned(),
            offset,
            len,
            crc32: None,
            deflated: None,
            verified: OnceLock::new(),
            inflated: OnceLock::new(),
        })
    };
    Ok(Layout { pickle: (main, seen), storage: Box::new(storage), big_endian: false, legacy: true })
}
