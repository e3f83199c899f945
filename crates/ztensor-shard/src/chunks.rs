//! Whole tensors from the chunks a Distributed Checkpoint saved them in: the `"dcp"` section
//! of an index `ztensor_rs.torch.dcp.ZTensorWriter` wrote names, for each tensor, its global
//! shape, its dtype and the objects holding its chunks at their offsets. [`Stitched`] presents
//! the whole tensors (the chunks stitched by their offsets) as a tensor source, after checking
//! that the chunks make each tensor exactly: in its bounds, of its shape, one dtype, tiling it
//! as a grid (what every DTensor placement gives) with no overlap and no hole.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use ztensor_format::{Attributes, DType, Encoding, Format, LogicalType, StorageType};
use ztensor_io::{ComponentData, ComponentInfo, ObjectData, ObjectInfo, TensorSource};

use crate::error::{Error, ErrorKind, Result};

/// The version of the `"dcp"` section this crate reads.
const FORMAT: u32 = 1;

/// The most chunks one tensor may have (more than any world size in use).
pub const MAX_CHUNKS: usize = 1 << 20;

/// The whole tensors of a chunked checkpoint, and the entries that are not tensors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunked {
    /// Every tensor, by name order.
    pub tensors: Vec<ChunkedTensor>,
    /// Entries that are not tensors (values DCP serialized to bytes): their names.
    pub other: Vec<String>,
}

/// One tensor of a chunked checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedTensor {
    /// Its name (the state dict's key).
    pub name: String,
    /// Its dtype as PyTorch names it (`bfloat16`, `float8_e4m3fn`).
    pub dtype: String,
    /// Its global shape.
    pub shape: Vec<u64>,
    /// Its chunks.
    pub chunks: Vec<Chunk>,
}

/// One chunk of a tensor: the object holding it, and where it lies in the tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The object's name.
    pub object: String,
    /// Its offset in each dimension.
    pub offsets: Vec<u64>,
    /// Its length in each dimension.
    pub sizes: Vec<u64>,
}

#[derive(Deserialize)]
pub(crate) struct RawDcp {
    format: u32,
    state_dict: BTreeMap<String, RawEntry>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum RawEntry {
    Tensor { dtype: String, size: Vec<u64>, chunks: Vec<RawChunk> },
    Bytes { object: String },
}

#[derive(Deserialize)]
struct RawChunk {
    offsets: Vec<u64>,
    sizes: Vec<u64>,
    object: String,
}

impl RawDcp {
    /// The section, each chunk's object listed in `weight_map`.
    pub(crate) fn checked(self, weight_map: &BTreeMap<String, String>) -> Result<Chunked> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m);
        if self.format != FORMAT {
            return Err(malformed(format!(
                "\"dcp\" section of format {}, where this build reads format {FORMAT}",
                self.format
            )));
        }
        let mut chunked = Chunked::default();
        for (name, entry) in self.state_dict {
            match entry {
                RawEntry::Bytes { object } => {
                    if !weight_map.contains_key(&object) {
                        return Err(mismatch(&name, &object));
                    }
                    chunked.other.push(name);
                }
                RawEntry::Tensor { dtype, size, chunks } => {
                    if chunks.len() > MAX_CHUNKS {
                        return Err(malformed(format!(
                            "tensor {name:?} has {} chunks, over the {MAX_CHUNKS} read",
                            chunks.len()
                        )));
                    }
                    let chunks = chunks
                        .into_iter()
                        .map(|c| {
                            if !weight_map.contains_key(&c.object) {
                                return Err(mismatch(&name, &c.object));
                            }
                            Ok(Chunk { object: c.object, offsets: c.offsets, sizes: c.sizes })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    chunked.tensors.push(ChunkedTensor { name, dtype, shape: size, chunks });
                }
            }
        }
        Ok(chunked)
    }
}

fn mismatch(name: &str, object: &str) -> Error {
    Error::new(
        ErrorKind::IndexMismatch,
        format!("{name:?}: its chunk {object:?} is in no shard the index lists"),
    )
}

/// A tensor as [`Stitched`] presents it.
#[derive(Debug)]
struct Whole {
    name: String,
    shape: Vec<u64>,
    dtype: DType,
    logical: Option<LogicalType>,
    /// Its decoded length in bytes.
    len: u64,
    /// Each chunk: the inner source's object, its offsets and sizes.
    chunks: Vec<(usize, Vec<u64>, Vec<u64>)>,
    /// The chunks' stored bytes, and their encoding when any is not raw (for `info`).
    stored: u64,
    encoding: Encoding,
}

/// The whole tensors of a chunked checkpoint (`inner`, whose objects are the chunks), each
/// chunk checked to lie where the index says and the chunks to make each tensor exactly.
/// Reading a tensor reads its chunks (their digests checked as the inner source checks them)
/// and places them.
#[derive(Debug)]
pub struct Stitched<S> {
    inner: S,
    wholes: Vec<Whole>,
    other: Vec<String>,
}

impl<S: TensorSource> Stitched<S> {
    /// The tensors of `layout` over `inner`.
    ///
    /// # Errors
    /// [`ErrorKind::Chunks`], naming the tensor and what is wrong, for chunks that do not make
    /// their tensor; [`ErrorKind::IndexMismatch`] for a chunk object `inner` does not hold.
    pub fn new(inner: S, layout: &Chunked) -> Result<Stitched<S>> {
        let mut wholes = Vec::with_capacity(layout.tensors.len());
        for t in &layout.tensors {
            wholes.push(whole(&inner, t)?);
        }
        Ok(Stitched { inner, wholes, other: layout.other.clone() })
    }

    /// The source of the chunks.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

fn chunks_error(name: &str, what: String) -> Error {
    Error::new(ErrorKind::Chunks, format!("tensor {name:?}: {what}"))
}

/// Checks the chunks of `t` against `inner` and the tensor's bounds.
fn whole<S: TensorSource>(inner: &S, t: &ChunkedTensor) -> Result<Whole> {
    let name = &t.name;
    let (dtype, logical) = ztensor_format::torch_dtype(&t.dtype)
        .ok_or_else(|| chunks_error(name, format!("dtype {:?} has no zTensor type", t.dtype)))?;
    let rank = t.shape.len();
    let mut chunks = Vec::with_capacity(t.chunks.len());
    for c in &t.chunks {
        let object = &c.object;
        if c.offsets.len() != rank || c.sizes.len() != rank {
            return Err(chunks_error(
                name,
                format!(
                    "chunk {object:?} has {} offsets and {} sizes for {rank} dimensions",
                    c.offsets.len(),
                    c.sizes.len()
                ),
            ));
        }
        if let Some(d) = (0..rank)
            .find(|&d| c.offsets[d].checked_add(c.sizes[d]).is_none_or(|end| end > t.shape[d]))
        {
            return Err(chunks_error(
                name,
                format!(
                    "chunk {object:?} lies past the tensor: dimension {d} from {} for {} of {}",
                    c.offsets[d], c.sizes[d], t.shape[d]
                ),
            ));
        }
        let index = inner.find(object).ok_or_else(|| mismatch(name, object))?;
        let info = inner.info(index).ok_or_else(|| mismatch(name, object))?;
        let data = info.component(ztensor_io::role::DATA);
        let typed = data.and_then(|d| Some((d.known_dtype()?, d.logical_type.clone())));
        if info.format != Format::Dense || info.components.len() != 1 || typed.is_none() {
            return Err(chunks_error(
                name,
                format!("chunk {object:?} is not a dense tensor of a known type"),
            ));
        }
        if typed != Some((dtype, logical.clone())) {
            let (d, l) = typed.unwrap_or((dtype, None));
            let shown = |d: DType, l: &Option<LogicalType>| match l {
                Some(l) => format!("{} ({})", d.name(), l.name()),
                None => d.name().to_owned(),
            };
            return Err(chunks_error(
                name,
                format!(
                    "chunk {object:?} is {}, where the tensor is {} ({})",
                    shown(d, &l),
                    shown(dtype, &logical),
                    t.dtype
                ),
            ));
        }
        if info.shape.as_ref() != c.sizes.as_slice() {
            return Err(chunks_error(
                name,
                format!(
                    "chunk {object:?} has shape {:?} where the index says {:?}",
                    info.shape, c.sizes
                ),
            ));
        }
        chunks.push((index, c.offsets.clone(), c.sizes.clone()));
    }
    let elements = t.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let len = elements
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| chunks_error(name, format!("shape {:?} overflows", t.shape)))?;
    if elements != Some(0) {
        // A rank whose share of a dimension is nothing saves an empty chunk: it covers
        // nothing, and is left out of the tiling.
        let covering: Vec<Chunk> =
            t.chunks.iter().filter(|c| c.sizes.iter().all(|&s| s > 0)).cloned().collect();
        tiles(name, &t.shape, &covering)?;
    }
    chunks.retain(|(_, _, sizes)| sizes.iter().all(|&s| s > 0) || sizes.is_empty());
    let parts: Vec<ObjectInfo<'_>> = chunks.iter().filter_map(|(i, _, _)| inner.info(*i)).collect();
    let stored = parts.iter().map(ObjectInfo::stored_len).fold(0, u64::saturating_add);
    let encoding = parts
        .iter()
        .flat_map(|p| p.components.iter().map(|c| c.encoding.clone()))
        .find(|e| *e != Encoding::Raw)
        .unwrap_or(Encoding::Raw);
    Ok(Whole {
        name: name.clone(),
        shape: t.shape.clone(),
        dtype,
        logical,
        len,
        chunks,
        stored,
        encoding,
    })
}

/// Checks that `chunks` make a tensor of `shape` (no dimension of length 0) exactly: as a grid
/// (what every DTensor placement gives), else as any other partition.
fn tiles(name: &str, shape: &[u64], chunks: &[Chunk]) -> Result<()> {
    match grid(name, shape, chunks) {
        Ok(()) => Ok(()),
        // Not a grid: any other partition is as good (each element in one chunk), told by
        // volume and by pairs, for as many chunks as that stays quick.
        Err(e) if chunks.len() <= MAX_PAIRWISE => partition(name, shape, chunks).map_err(|_| e),
        Err(e) => Err(e),
    }
}

/// The most chunks of one tensor checked pair by pair when they are not a grid.
const MAX_PAIRWISE: usize = 4096;

/// Checks that `chunks` partition a tensor of `shape`: no two overlap, and together they hold
/// as many elements as it does.
fn partition(name: &str, shape: &[u64], chunks: &[Chunk]) -> Result<()> {
    for (i, a) in chunks.iter().enumerate() {
        for b in &chunks[i + 1..] {
            let apart = (0..shape.len()).any(|d| {
                a.offsets[d] + a.sizes[d] <= b.offsets[d]
                    || b.offsets[d] + b.sizes[d] <= a.offsets[d]
            });
            if !apart {
                return Err(chunks_error(
                    name,
                    format!("chunks at {:?} and {:?} overlap", a.offsets, b.offsets),
                ));
            }
        }
    }
    let held =
        chunks.iter().map(|c| c.sizes.iter().product::<u64>()).fold(0u64, u64::saturating_add);
    let total = shape.iter().product::<u64>();
    if held != total {
        return Err(chunks_error(
            name,
            format!("chunks leave a hole: they hold {held} of {total} elements"),
        ));
    }
    Ok(())
}

/// Checks that `chunks` tile a tensor of `shape` (no dimension of length 0) as a grid: in
/// each dimension their ranges are the pieces of one partition of it, and each cell of the
/// grid those partitions make is one chunk, once.
fn grid(name: &str, shape: &[u64], chunks: &[Chunk]) -> Result<()> {
    let mut cells = 1u64;
    for (d, &extent) in shape.iter().enumerate() {
        let mut ranges: Vec<(u64, u64)> =
            chunks.iter().map(|c| (c.offsets[d], c.offsets[d] + c.sizes[d])).collect();
        ranges.sort_unstable();
        ranges.dedup();
        let mut at = 0;
        for &(start, end) in &ranges {
            if start < at {
                return Err(chunks_error(
                    name,
                    format!(
                        "chunks overlap in dimension {d}: one ends at {at}, another starts at {start}"
                    ),
                ));
            }
            if start > at {
                return Err(chunks_error(
                    name,
                    format!("chunks leave a hole in dimension {d}: {at} to {start}"),
                ));
            }
            if end == start {
                return Err(chunks_error(
                    name,
                    format!("a chunk is empty in dimension {d} at {start}"),
                ));
            }
            at = end;
        }
        if at != extent {
            return Err(chunks_error(
                name,
                format!("chunks leave a hole in dimension {d}: {at} to {extent}"),
            ));
        }
        cells = cells.saturating_mul(ranges.len() as u64);
    }
    let mut seen = HashSet::with_capacity(chunks.len());
    for c in chunks {
        if !seen.insert(&c.offsets) {
            return Err(chunks_error(
                name,
                format!("two chunks start at {:?}: they overlap", c.offsets),
            ));
        }
    }
    if (seen.len() as u64) < cells {
        return Err(chunks_error(
            name,
            format!("chunks leave a hole: {} chunks for a grid of {cells}", seen.len()),
        ));
    }
    Ok(())
}

/// Copies `chunk` (of `sizes`, at `offsets`) into `out`, a tensor of `shape`, of elements of
/// `width` bytes, in row-major order.
fn place(
    out: &mut [u8],
    shape: &[u64],
    width: usize,
    offsets: &[u64],
    sizes: &[u64],
    chunk: &[u8],
) {
    let rank = shape.len();
    if rank == 0 {
        out[..width].copy_from_slice(&chunk[..width]);
        return;
    }
    // Lengths fit: the tensor's length was checked to fit in memory before.
    let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let run = to_usize(sizes[rank - 1]) * width;
    let mut strides = vec![width; rank];
    for d in (0..rank - 1).rev() {
        strides[d] = strides[d + 1] * to_usize(shape[d + 1]);
    }
    let rows: usize = sizes[..rank - 1].iter().map(|&s| to_usize(s)).product();
    let mut index = vec![0usize; rank - 1];
    for row in 0..rows {
        let mut at = to_usize(offsets[rank - 1]) * width;
        for d in 0..rank - 1 {
            at += (to_usize(offsets[d]) + index[d]) * strides[d];
        }
        out[at..at + run].copy_from_slice(&chunk[row * run..(row + 1) * run]);
        for d in (0..rank - 1).rev() {
            index[d] += 1;
            if index[d] < to_usize(sizes[d]) {
                break;
            }
            index[d] = 0;
        }
    }
}

impl<S: TensorSource> Stitched<S> {
    fn whole(&self, index: usize) -> ztensor_io::Result<&Whole> {
        self.wholes
            .get(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))
    }

    /// The bytes of `w`'s rows `rows` (of its first dimension; all of it for `None`), its
    /// chunks there read (their digests checked by the inner source) and placed.
    fn slab(&self, w: &Whole, rows: Option<(u64, u64)>) -> ztensor_io::Result<Vec<u8>> {
        let width = usize::try_from(w.dtype.size()).unwrap_or(usize::MAX);
        let mut shape = w.shape.clone();
        let first = rows.map_or(0, |(start, _)| start);
        if let Some((_, len)) = rows {
            shape[0] = len;
        }
        let len = shape.iter().product::<u64>() * width as u64;
        let mut out = ztensor_io::try_zeroed(len, "a tensor stitched from its chunks")
            .map_err(|e| ztensor_io::Error::io("stitching a tensor", None, e))?;
        for (i, offsets, sizes) in &w.chunks {
            if rows.is_some() && offsets[0] != first {
                continue;
            }
            let chunk = self.inner.read(*i)?;
            let data = chunk.components.get(ztensor_io::role::DATA).ok_or_else(|| {
                ztensor_io::Error::not_found(&chunk.name, Some(ztensor_io::role::DATA))
            })?;
            let want: u64 = sizes.iter().product::<u64>() * width as u64;
            if data.bytes.len() as u64 != want {
                return Err(ztensor_io::Error::failed(format!(
                    "tensor {:?}: chunk {:?} decoded to {} bytes, not {want}",
                    w.name,
                    chunk.name,
                    data.bytes.len()
                )));
            }
            let mut at = offsets.clone();
            if let Some(o) = at.first_mut() {
                *o -= first;
            }
            place(&mut out, &shape, width, &at, sizes, &data.bytes);
        }
        Ok(out)
    }
}

/// The slabs `w` is read in: its first dimension's ranges as the chunks split it (the grid's
/// rows, in order), or one slab of all of it.
fn slabs(w: &Whole) -> Vec<Option<(u64, u64)>> {
    if w.shape.is_empty() {
        return vec![None];
    }
    let mut rows: Vec<(u64, u64)> = w.chunks.iter().map(|(_, o, s)| (o[0], s[0])).collect();
    rows.sort_unstable();
    rows.dedup();
    // Slabs are the rows' ranges when they do not overlap (every grid, and most partitions).
    let disjoint = rows.windows(2).all(|p| p[0].0 + p[0].1 <= p[1].0);
    if rows.len() <= 1 || !disjoint {
        return vec![None];
    }
    rows.into_iter().map(Some).collect()
}

impl<S: TensorSource> TensorSource for Stitched<S> {
    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("Distributed Checkpoint ({})", self.inner.format_name()))
    }

    fn attributes(&self) -> Option<Cow<'_, Attributes>> {
        self.inner.attributes()
    }

    fn len(&self) -> usize {
        self.wholes.len()
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let w = self.wholes.get(index)?;
        Some(ObjectInfo {
            name: Cow::Borrowed(&w.name),
            shape: Cow::Borrowed(&w.shape),
            format: Format::Dense,
            attributes: None,
            components: vec![ComponentInfo {
                role: Cow::Borrowed(ztensor_io::role::DATA),
                dtype: StorageType::Known(w.dtype),
                logical_type: w.logical.clone(),
                decoded_len: Some(w.len),
                stored_len: w.stored,
                offset: None,
                encoding: w.encoding.clone(),
                digest: None,
            }],
            unsupported: None,
            location: None,
        })
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        self.wholes.get(index).map(|w| Cow::Borrowed(w.name.as_str()))
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let w = self.whole(index)?;
        let out = self.slab(w, None)?;
        let data = ComponentData {
            dtype: w.dtype,
            logical_type: w.logical.clone(),
            bytes: Cow::Owned(out),
        };
        Ok(ObjectData {
            name: w.name.clone(),
            shape: w.shape.clone(),
            format: Format::Dense,
            attributes: None,
            components: BTreeMap::from([(ztensor_io::role::DATA.to_owned(), data)]),
        })
    }

    fn left_out(&self) -> Vec<String> {
        self.other.clone()
    }

    /// A tensor whose chunks split its first dimension is read slab by slab (the rows one
    /// grid row of chunks covers): a few chunks held at a time, not the whole tensor.
    /// So is a tensor split by its other dimensions only (say by columns): a few rows at a
    /// time, each of its chunks read as a stream.
    fn reads_in_pieces(&self, index: usize) -> bool {
        self.wholes.get(index).is_some_and(|w| {
            slabs(w).len() > 1 || band(w, None).is_some() || alone(w, None).is_some()
        })
    }

    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let w = self.whole(index)?;
        let piece = piece.max(1);
        for rows in slabs(w) {
            if let Some((chunk, len)) = alone(w, rows) {
                // The slab is one chunk's bytes, in order: streamed as the inner source reads
                // them, with no slab between.
                let mut seen = 0u64;
                self.inner.read_part(chunk, ztensor_io::role::DATA, piece, &mut |bytes| {
                    seen += bytes.len() as u64;
                    if seen > len {
                        return Err(self.unlike(w, chunk, "holds more than"));
                    }
                    each(ztensor_io::role::DATA, bytes)
                })?;
                if seen != len {
                    return Err(self.unlike(w, chunk, "ended before"));
                }
                continue;
            }
            if let Some(band) = band(w, rows).filter(|b| b.len > piece as u64) {
                self.stream_band(w, &band, piece, each)?;
                continue;
            }
            let slab = self.slab(w, rows)?;
            for part in slab.chunks(piece) {
                each(ztensor_io::role::DATA, part)?;
            }
        }
        Ok(())
    }
}

/// The one chunk that is all of `w`'s rows `rows` (all of it for `None`): it spans every other
/// dimension, so its bytes are the rows' in order. With its index in the inner source and the
/// rows' length in bytes.
fn alone(w: &Whole, rows: Option<(u64, u64)>) -> Option<(usize, u64)> {
    let (first, count) = match rows {
        Some(r) => r,
        None => (0, w.shape.first().copied().unwrap_or(1)),
    };
    let mut covering = w.chunks.iter().filter(|(_, o, s)| {
        o.first().is_none_or(|&o| o < first + count)
            && o.first().zip(s.first()).is_none_or(|(&o, &s)| o + s > first)
    });
    let (index, offsets, sizes) = covering.next()?;
    if covering.next().is_some() {
        return None;
    }
    let spans = match (offsets.split_first(), sizes.split_first()) {
        (Some((&o, others)), Some((&s, rest))) => {
            o == first && s == count && others.iter().all(|&o| o == 0) && rest == &w.shape[1..]
        }
        // A tensor of no dimensions: its one chunk is all of it.
        _ => w.shape.is_empty(),
    };
    let len = count.checked_mul(w.shape.get(1..).unwrap_or(&[]).iter().product::<u64>())?;
    spans.then_some((*index, len.checked_mul(w.dtype.size())?))
}

impl<S: TensorSource> Stitched<S> {
    /// A chunk (`chunk` of the inner source) whose bytes are not those of its shape: it
    /// `said` them (`ended before`, `holds more than`).
    fn unlike(&self, w: &Whole, chunk: usize, said: &str) -> ztensor_io::Error {
        let name = self.inner.name(chunk).unwrap_or(Cow::Borrowed("?"));
        ztensor_io::Error::failed(format!(
            "tensor {:?}: its chunk {name:?} {said} the bytes of its shape",
            w.name
        ))
    }
}

/// The most chunks of one band read as streams at once (a thread each).
const MAX_STREAMS: usize = 256;

/// Rows of a tensor that several chunks split by its other dimensions only (each spans all
/// of those rows): they can be handed over a few rows at a time, each chunk read as a stream.
struct Band<'a> {
    /// How many rows.
    rows: u64,
    /// The band's bytes.
    len: u64,
    chunks: Vec<&'a (usize, Vec<u64>, Vec<u64>)>,
}

/// The band of `w`'s rows `rows` (all of them for `None`), when more than one chunk covers it
/// and each spans all of its rows.
fn band(w: &Whole, rows: Option<(u64, u64)>) -> Option<Band<'_>> {
    let (first, count) = rows.or_else(|| Some((0, *w.shape.first()?)))?;
    if w.shape.len() < 2 {
        return None;
    }
    let chunks: Vec<_> = w.chunks.iter().filter(|(_, o, _)| o[0] == first).collect();
    let spans = chunks.iter().all(|(_, o, s)| o[0] == first && s[0] == count);
    let all = chunks.len()
        == w.chunks.iter().filter(|(_, o, s)| o[0] < first + count && o[0] + s[0] > first).count();
    // Each chunk of a band streams on a thread of its own: past `MAX_STREAMS` chunks, the
    // band is stitched whole instead (within the decode limit).
    if chunks.len() < 2 || chunks.len() > MAX_STREAMS || !spans || !all {
        return None;
    }
    let row: u64 = w.shape[1..].iter().product::<u64>() * w.dtype.size();
    Some(Band { rows: count, len: row * count, chunks })
}

/// One chunk read as a stream, on a thread of its own: its pieces, and what has come of
/// them so far.
struct Feed {
    pieces: std::sync::mpsc::Receiver<Vec<u8>>,
    pending: Vec<u8>,
}

impl Feed {
    /// The chunk's next `n` bytes, or `None` when it ended first.
    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.pending.len() < n {
            let piece = self.pieces.recv().ok()?;
            self.pending.extend_from_slice(&piece);
        }
        let rest = self.pending.split_off(n);
        Some(std::mem::replace(&mut self.pending, rest))
    }
}

impl<S: TensorSource> Stitched<S> {
    /// Hands `band` over a few rows at a time (as many as fit in `piece`, at least one): each
    /// of its chunks is read as a stream on a thread of its own, through the inner source's
    /// `read_part` (digests checked as it returns), a few pieces ahead, and each group of rows
    /// is placed from the chunks' next bytes. Memory: a few pieces per chunk, not the band.
    fn stream_band(
        &self,
        w: &Whole,
        band: &Band<'_>,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let width = w.dtype.size();
        let row = w.shape[1..].iter().product::<u64>() * width;
        let group = (piece as u64 / row.max(1)).clamp(1, band.rows.max(1));
        let chunk_row = |sizes: &[u64]| sizes[1..].iter().product::<u64>() * width;
        std::thread::scope(|scope| {
            let mut feeds = Vec::with_capacity(band.chunks.len());
            let mut readers = Vec::with_capacity(band.chunks.len());
            for &&(i, _, ref sizes) in &band.chunks {
                let (send, pieces) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
                let inner = &self.inner;
                let chunk_piece = usize::try_from(group * chunk_row(sizes)).unwrap_or(piece).max(1);
                readers.push(scope.spawn(move || {
                    // `Err(None)`: the consumer stopped taking pieces (it failed, or the chunk
                    // held more than its shape says); `Err(Some(e))`: reading it failed.
                    let mut stopped = false;
                    let read = inner.read_part(i, ztensor_io::role::DATA, chunk_piece, &mut |b| {
                        send.send(b.to_vec()).map_err(|_| {
                            stopped = true;
                            ztensor_io::Error::failed("stopped")
                        })
                    });
                    match read {
                        Ok(()) => Ok(()),
                        Err(_) if stopped => Err(None),
                        Err(e) => Err(Some(e)),
                    }
                }));
                feeds.push(Feed { pieces, pending: Vec::new() });
            }
            let mut shape = w.shape.clone();
            let mut handed = (|| {
                let mut done = 0;
                while done < band.rows {
                    let n = group.min(band.rows - done);
                    shape[0] = n;
                    let mut out = ztensor_io::try_zeroed(n * row, "rows of a stitched tensor")
                        .map_err(|e| {
                            Stop::Failed(ztensor_io::Error::io("stitching a tensor", None, e))
                        })?;
                    for (k, (feed, (_, offsets, sizes))) in
                        feeds.iter_mut().zip(&band.chunks).enumerate()
                    {
                        let want = usize::try_from(n * chunk_row(sizes)).unwrap_or(usize::MAX);
                        let bytes = feed.take(want).ok_or(Stop::Ended(k))?;
                        let mut at = offsets.clone();
                        at[0] = 0;
                        let mut part = sizes.clone();
                        part[0] = n;
                        place(
                            &mut out,
                            &shape,
                            usize::try_from(width).unwrap_or(usize::MAX),
                            &at,
                            &part,
                            &bytes,
                        );
                    }
                    for part in out.chunks(piece) {
                        each(ztensor_io::role::DATA, part).map_err(Stop::Failed)?;
                    }
                    done += n;
                }
                Ok(())
            })();
            // Every chunk must end where its shape says: nothing pending, nothing more sent
            // (`recv` waits for its reader to finish, or to send what it should not).
            if handed.is_ok()
                && let Some(k) =
                    feeds.iter_mut().position(|f| !f.pending.is_empty() || f.pieces.recv().is_ok())
            {
                handed = Err(Stop::Long(k));
            }
            drop(feeds);
            let mut failed = None;
            for reader in readers {
                match reader.join() {
                    Ok(Ok(())) | Ok(Err(None)) => {}
                    Ok(Err(Some(e))) => {
                        failed.get_or_insert(e);
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            let chunk = |k: usize| {
                let name = self.inner.name(band.chunks[k].0);
                format!("tensor {:?}: chunk {:?}", w.name, name.as_deref().unwrap_or("?"))
            };
            // A reader's own failure first: it is why a chunk ended early, if one did.
            match (handed, failed) {
                (Err(Stop::Failed(e)), _) | (_, Some(e)) => Err(e),
                (Err(Stop::Ended(k)), None) => Err(ztensor_io::Error::failed(format!(
                    "{} ended before the bytes of its shape",
                    chunk(k)
                ))),
                (Err(Stop::Long(k)), None) => Err(ztensor_io::Error::failed(format!(
                    "{} holds more than the bytes of its shape",
                    chunk(k)
                ))),
                (Ok(()), None) => Ok(()),
            }
        })
    }
}

/// Why handing a band over stopped.
enum Stop {
    /// Handing over (or making room) failed.
    Failed(ztensor_io::Error),
    /// The band's `k`th chunk ended before its shape's bytes.
    Ended(usize),
    /// It held more.
    Long(usize),
}

#[cfg(test)]
mod tests;
