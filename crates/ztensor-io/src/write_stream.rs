//! Writing an object part by part as its source decodes it: memory is a few pieces and one
//! zstd frame, whatever the object's size or layout.
//!
//! An object of several components is first read through once ([`TensorSource::verify`]:
//! digests and the data rules that span components, and the length of each decoded
//! component), so that the writer can check it as [`Writer::add_object`] does before a byte is
//! written; then each component is decoded again on its own (its digest checked again: a
//! source that changed in between is refused, never copied) and encoded in pieces, in the
//! order and with the bytes the whole-object path ([`write_data`](crate::write_data)) gives:
//! sparse values first, indices widened to u64. An object of one component whose length its
//! description gives is read once, all its rules checked on the way.

use std::io::Write;

use ztensor_format::{
    Attributes, DType, Digest, Encoding, Error as FormatError, ErrorKind as Rule, Format,
    LogicalType, Object, Version, role,
};

use crate::codec::{Hasher, zstd_encode};
use crate::writer::{Compression, SpecInfo, WriteOptions, Writer};
use ztensor_source::{Decoded, TensorSource};
use ztensor_source::{Error, Result};

/// The piece size parts are read in.
const PIECE: usize = 4 << 20;

/// An object's decoded components, read through whole or one at a time.
pub(crate) trait Parts {
    /// Reads every component through, checking digests and data rules; what each decoded to.
    fn verify(&self) -> Result<Vec<Decoded>>;

    /// What an object of one component decodes to, when its description says it: then no
    /// rule spans components, and one read of the part checks all (and reads the bytes once:
    /// what is checked is what is written, even from a source that changes).
    fn known(&self) -> Option<Vec<Decoded>>;

    /// Component `role`'s decoded bytes in pieces, its digest checked; for an object of one
    /// component, its data rules too.
    fn read_part(&self, role: &str, each: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()>;
}

/// Object `index` of a [`TensorSource`].
pub(crate) struct SourceParts<'s> {
    pub(crate) source: &'s dyn TensorSource,
    pub(crate) index: usize,
}

impl Parts for SourceParts<'_> {
    fn verify(&self) -> Result<Vec<Decoded>> {
        self.source.verify(self.index)
    }

    fn known(&self) -> Option<Vec<Decoded>> {
        let info = self.source.info(self.index)?;
        // Dense: a v0.1 single-blob sparse tensor is one stored component read as several.
        let [c] = &info.components[..] else { return None };
        if info.format != Format::Dense {
            return None;
        }
        Some(vec![Decoded {
            role: c.role.clone().into_owned(),
            dtype: c.dtype.known()?,
            logical_type: c.logical_type.clone(),
            len: c.decoded_len?,
        }])
    }

    fn read_part(&self, role: &str, each: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        self.source.read_part(self.index, role, PIECE, each)
    }
}

/// An object of a zTensor file, by handle (an object shadowed by another of its name is still
/// its own).
pub(crate) struct ObjectParts<'a, 'r, S>(pub(crate) &'a crate::Object<'r, S>);

impl<S: ztensor_source::ReadAt> Parts for ObjectParts<'_, '_, S> {
    fn verify(&self) -> Result<Vec<Decoded>> {
        self.0.reader().stream_object(self.0.entry(), PIECE, true, None, None)
    }

    fn known(&self) -> Option<Vec<Decoded>> {
        let o = self.0.model();
        if o.packing != ztensor_format::Packing::Split {
            return None;
        }
        let mut lens = self.0.entry().decoded_lens();
        let (Some((role, Some(len))), None) = (lens.next(), lens.next()) else { return None };
        let c = &o.components[role];
        Some(vec![Decoded {
            role: role.to_owned(),
            dtype: c.dtype.known()?,
            logical_type: c.logical_type.clone(),
            len,
        }])
    }

    fn read_part(&self, role: &str, each: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let mut each = |_: &str, bytes: &[u8]| each(bytes);
        self.0
            .reader()
            .stream_object(self.0.entry(), PIECE, true, Some(&mut each), Some(role))
            .map(drop)
    }
}

/// Whether [`write_streamed`] can write an object of `format` into `writer` with `options`: raw
/// or in zstd frames of a fixed size (a single frame of a whole component needs it whole), into
/// 1.1 and 1.2, and into 0.1 but for COO (whose single blob interleaves each value with its
/// coordinates, so it is packed whole).
pub(crate) fn streams<W: Write>(
    writer: &Writer<W>,
    options: &WriteOptions,
    format: &Format,
) -> bool {
    let packs_whole = writer.version() == Version::V0_1 && *format == Format::SparseCoo;
    !packs_whole
        && match options.compression {
            Compression::Raw => true,
            Compression::Zstd(_) => options.chunk_size.is_some(),
        }
}

/// What the object's metadata is in the output.
pub(crate) struct Meta<'a> {
    pub(crate) name: &'a str,
    pub(crate) shape: &'a [u64],
    pub(crate) format: &'a Format,
    pub(crate) attributes: Option<Attributes>,
}

/// One output component: its role and types, the decoded part it comes from, and the width of
/// that part's integers when they are widened to u64 indices.
struct Out<'a> {
    role: &'a str,
    dtype: DType,
    logical_type: Option<&'a LogicalType>,
    len: u64,
    from: &'a Decoded,
    widen: Option<(usize, bool)>,
}

/// Writes the object part by part (see the module docs). Call only where [`streams`] holds.
/// Returns the most bytes it held at once (a piece read, a frame gathered, its encoding).
///
/// # Errors
/// As [`write_data`](crate::write_data): the source's errors (digests, data rules), what the
/// writer's version cannot express, naming the object, and I/O errors.
pub(crate) fn write_streamed<W: Write>(
    writer: &mut Writer<W>,
    meta: Meta<'_>,
    parts: &dyn Parts,
    options: &WriteOptions,
) -> Result<u64> {
    let name = meta.name;
    write_parts(writer, meta, parts, options).map_err(|e| match e.format_error() {
        Some(f) if f.object().is_none() => Error::from(f.clone().in_object(name)),
        _ => e,
    })
}

fn write_parts<W: Write>(
    writer: &mut Writer<W>,
    meta: Meta<'_>,
    parts: &dyn Parts,
    options: &WriteOptions,
) -> Result<u64> {
    let decoded = match parts.known() {
        Some(known) => known,
        None => parts.verify()?,
    };
    let plan = plan(&meta, &decoded)?;
    if writer.version() == Version::V0_1 && *meta.format == Format::SparseCsr && plan.len() == 3 {
        return write_v0_csr(writer, meta, parts, &plan, options);
    }
    let infos: Vec<SpecInfo<'_>> = plan
        .iter()
        .map(|o| SpecInfo {
            role: o.role,
            dtype: o.dtype,
            logical_type: o.logical_type,
            len: o.len,
        })
        .collect();
    writer.check_object(meta.name, meta.shape, meta.format, &infos)?;
    let mut object = Object::new(meta.name, meta.shape.to_vec(), meta.format.clone());
    object.attributes = meta.attributes.map(Box::new);
    let mut peak = 0;
    for out in &plan {
        let (component, held) = write_part(writer, parts, out, options)?;
        peak = peak.max(held);
        object.components.insert(out.role.to_owned(), component);
    }
    writer.push_streamed(object)?;
    Ok(peak)
}

/// The output components, in the order the whole-object path writes them, after the checks
/// that path makes before it writes.
fn plan<'a>(meta: &Meta<'_>, decoded: &'a [Decoded]) -> Result<Vec<Out<'a>>> {
    let get = |r: &str| {
        decoded.iter().find(|d| d.role == r).ok_or_else(|| Error::not_found(meta.name, Some(r)))
    };
    let as_is = |d: &'a Decoded| Out {
        role: &d.role,
        dtype: d.dtype,
        logical_type: d.logical_type.as_ref(),
        len: d.len,
        from: d,
        widen: None,
    };
    let widened = |d: &'a Decoded| -> Result<Out<'a>> {
        // Negative indices show only in the data: refused as they pass.
        crate::reader::convertible(&d.role, d.dtype, d.len, None)?;
        let width = d.dtype.size();
        let signed = matches!(d.dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
        Ok(Out {
            role: &d.role,
            dtype: DType::U64,
            logical_type: None,
            len: d.len / width * 8,
            from: d,
            widen: Some((usize::try_from(width).unwrap_or(8), signed)),
        })
    };
    match meta.format {
        Format::SparseCsr if decoded.len() == 3 => {
            let values = get(role::VALUES)?;
            let indices = widened(get(role::INDICES)?)?;
            let indptr = widened(get(role::INDPTR)?)?;
            if values.logical_type.is_none() {
                // What the CSR helper checks.
                let [rows, _] = meta.shape[..] else {
                    return Err(Error::broken(Rule::SparseRank, "a CSR matrix has rank 2"));
                };
                if Some(indptr.len / 8) != rows.checked_add(1) {
                    return Err(Error::broken(
                        Rule::CsrIndptrCount,
                        "indptr must hold rows + 1 entries",
                    ));
                }
                if values.len != indices.len / 8 * values.dtype.size() {
                    return Err(Error::broken(
                        Rule::SparseNnzMismatch,
                        "values and indices hold different counts",
                    ));
                }
            }
            Ok(vec![as_is(values), indices, indptr])
        }
        Format::SparseCoo if decoded.len() == 2 => {
            let values = get(role::VALUES)?;
            let coords = widened(get(role::COORDS)?)?;
            if values.logical_type.is_none() {
                // What the COO helper checks.
                let rank = meta.shape.len() as u64;
                if rank == 0 {
                    return Err(Error::broken(Rule::SparseRank, "a COO tensor has rank 1 or more"));
                }
                let width = values.dtype.size();
                let nnz = values.len / width;
                if !values.len.is_multiple_of(width)
                    || Some(coords.len / 8) != nnz.checked_mul(rank)
                {
                    return Err(Error::broken(
                        Rule::SparseNnzMismatch,
                        "coords must hold rank × nnz entries",
                    ));
                }
            }
            Ok(vec![as_is(values), coords])
        }
        _ => Ok(decoded.iter().map(as_is).collect()),
    }
}

/// A blob's bytes as they are encoded: raw, or zstd frames of `chunk` input bytes with a seek
/// table after more than one (the bytes of [`zstd_encode_chunked`](crate::codec::zstd_encode_chunked)).
struct Encoder {
    zstd: Option<(i32, usize)>,
    /// Whether a component of one frame that zstd does not shrink is stored raw.
    raw_if_not_smaller: bool,
    held: Vec<u8>,
    frames: Vec<(u32, u32)>,
    hasher: Option<Hasher>,
    stored: u64,
    /// The most bytes held at once: the piece being fed and what is gathered or encoded.
    peak: u64,
}

impl Encoder {
    fn new(options: &WriteOptions) -> Result<Encoder> {
        let zstd = match options.compression {
            Compression::Raw => None,
            Compression::Zstd(level) => {
                let chunk = options
                    .chunk_size
                    .and_then(|c| usize::try_from(c).ok())
                    .filter(|&c| c > 0 && c <= 1 << 30)
                    .ok_or_else(|| {
                        Error::broken(
                            Rule::InvalidInput,
                            "the zstd frame size must be 1 B to 1 GiB",
                        )
                    })?;
                Some((level, chunk))
            }
        };
        let hasher = match &options.digest {
            None => None,
            Some(algorithm) => Some(Hasher::new(algorithm).ok_or_else(|| {
                Error::broken(
                    Rule::InvalidInput,
                    format!("cannot compute digest {}", algorithm.name()),
                )
            })?),
        };
        Ok(Encoder {
            zstd,
            raw_if_not_smaller: options.raw_if_not_smaller,
            held: Vec::new(),
            peak: 0,
            frames: Vec::new(),
            hasher,
            stored: 0,
        })
    }

    fn out<W: Write>(&mut self, writer: &mut Writer<W>, bytes: &[u8]) -> Result<()> {
        if let Some(h) = &mut self.hasher {
            h.update(bytes);
        }
        self.stored += bytes.len() as u64;
        writer.blob_bytes(bytes)
    }

    fn frame<W: Write>(&mut self, writer: &mut Writer<W>, len: usize, level: i32) -> Result<()> {
        let z =
            zstd_encode(&self.held[..len], level).map_err(|e| Error::io("compressing", None, e))?;
        self.peak = self.peak.max((self.held.len() + z.len()) as u64);
        let sizes = (u32::try_from(z.len()), u32::try_from(len));
        let (Ok(stored), Ok(input)) = sizes else {
            return Err(Error::broken(Rule::InvalidInput, "a zstd frame passes 4 GiB"));
        };
        self.frames.push((stored, input));
        self.out(writer, &z)?;
        self.held.drain(..len);
        Ok(())
    }

    fn feed<W: Write>(&mut self, writer: &mut Writer<W>, bytes: &[u8]) -> Result<()> {
        let Some((level, chunk)) = self.zstd else {
            self.peak = self.peak.max(bytes.len() as u64);
            return self.out(writer, bytes);
        };
        self.held.extend_from_slice(bytes);
        self.peak = self.peak.max((self.held.len() + bytes.len()) as u64);
        // A frame is cut only once more follows: data that fits one frame is one plain frame,
        // with no seek table.
        while self.held.len() > chunk {
            self.frame(writer, chunk, level)?;
        }
        Ok(())
    }

    /// Ends the blob: the encoding, the digest of the stored bytes, and the most bytes held
    /// at once.
    fn finish<W: Write>(
        mut self,
        writer: &mut Writer<W>,
    ) -> Result<(Encoding, Option<Digest>, u64)> {
        if let Some((level, _)) = self.zstd {
            if self.frames.is_empty() {
                // One frame: nothing is written yet, so it may still go raw.
                let held = std::mem::take(&mut self.held);
                let z = zstd_encode(&held, level).map_err(|e| Error::io("compressing", None, e))?;
                self.peak = self.peak.max((held.len() + z.len()) as u64);
                if self.raw_if_not_smaller && z.len() >= held.len() {
                    self.out(writer, &held)?;
                    return Ok((Encoding::Raw, self.hasher.map(Hasher::finish), self.peak));
                }
                self.out(writer, &z)?;
                return Ok((Encoding::Zstd, self.hasher.map(Hasher::finish), self.peak));
            }
            if !self.held.is_empty() {
                self.frame(writer, self.held.len(), level)?;
            }
            if self.frames.len() > 1 {
                let table = crate::codec::seek_table(&self.frames);
                self.out(writer, &table)?;
            }
        }
        let encoding = if self.zstd.is_some() { Encoding::Zstd } else { Encoding::Raw };
        Ok((encoding, self.hasher.map(Hasher::finish), self.peak))
    }
}

fn write_part<W: Write>(
    writer: &mut Writer<W>,
    parts: &dyn Parts,
    out: &Out<'_>,
    options: &WriteOptions,
) -> Result<(ztensor_format::Component, u64)> {
    let offset = writer.begin_blob()?;
    let mut encoder = Encoder::new(options)?;
    feed_part(writer, parts, out, &mut encoder)?;
    let (encoding, digest, peak) = encoder.finish(writer)?;
    let stored = writer.written_since(offset);
    let decoded = (encoding == Encoding::Zstd).then_some(out.len);
    let component = writer.describe_component(
        out.dtype,
        out.logical_type.cloned(),
        offset,
        stored,
        decoded,
        encoding,
        digest,
    );
    Ok((component, peak))
}

/// Reads the part `out` comes from and feeds it, widened where it is, to `encoder`.
fn feed_part<W: Write>(
    writer: &mut Writer<W>,
    parts: &dyn Parts,
    out: &Out<'_>,
    encoder: &mut Encoder,
) -> Result<()> {
    let mut given = 0u64;
    let mut widened: Vec<u8> = Vec::new();
    let mut elements = out.widen.map(|(width, _)| crate::reader::Elements::new(width, false));
    let role = &out.from.role;
    parts.read_part(role, &mut |bytes| {
        given += bytes.len() as u64;
        let (Some((_, signed)), Some(elements)) = (out.widen, elements.as_mut()) else {
            return encoder.feed(writer, bytes);
        };
        widened.clear();
        let mut negative = None;
        elements.feed(bytes, |i, v, sign| {
            if signed && sign && negative.is_none() {
                negative = Some(i);
            }
            widened.extend_from_slice(&v.to_le_bytes());
        });
        if negative.is_some() {
            let dtype = out.from.dtype;
            crate::reader::convertible(role, dtype, out.from.len, negative)?;
        }
        encoder.feed(writer, &widened)
    })?;
    if given != out.from.len {
        return Err(FormatError::new(
            Rule::DecodedSizeMismatch,
            "the component decoded to a different length when read again: the file changed \
             while it was read",
        )
        .in_component(role)
        .expected_found(out.from.len, given)
        .into());
    }
    Ok(())
}

/// A CSR matrix into v0.1: its single `data` blob packs the row pointers, the column indices
/// (both as u64) and the values, in that order, as the writer's CSR helper packs them; each
/// part streams into the one blob in turn.
fn write_v0_csr<W: Write>(
    writer: &mut Writer<W>,
    meta: Meta<'_>,
    parts: &dyn Parts,
    plan: &[Out<'_>],
    options: &WriteOptions,
) -> Result<u64> {
    let [values, indices, indptr] = plan else {
        return Err(Error::not_found(meta.name, Some(role::VALUES)));
    };
    if let Some(t) = values.logical_type {
        return Err(FormatError::new(
            Rule::Unrepresentable,
            format!("v0.1 cannot express logical type {t}"),
        )
        .into());
    }
    writer.check_name(meta.name)?;
    let offset = writer.begin_blob()?;
    let mut encoder = Encoder::new(options)?;
    for out in [indptr, indices, values] {
        feed_part(writer, parts, out, &mut encoder)?;
    }
    let (encoding, digest, peak) = encoder.finish(writer)?;
    let stored = writer.written_since(offset);
    let packed = indptr.len + indices.len + values.len;
    let decoded = (encoding == Encoding::Zstd).then_some(packed);
    let component =
        writer.describe_component(values.dtype, None, offset, stored, decoded, encoding, digest);
    let mut object = Object::new(meta.name, meta.shape.to_vec(), Format::SparseCsr)
        .with_component(role::DATA, component);
    object.packing = ztensor_format::Packing::V0Single;
    object.attributes = meta.attributes.map(Box::new);
    writer.push_streamed(object)?;
    Ok(peak)
}

/// Writes object `index` of `source` into `writer`, with `attributes` as its attributes: part
/// by part (memory: a few pieces and one zstd frame, whatever its size or layout) when the
/// source reads it in pieces ([`TensorSource::reads_in_pieces`]) and the writer is 1.1 or 1.2,
/// compressing raw or in zstd frames of a fixed size; otherwise decoded whole; with
/// the bytes [`write_data`](crate::write_data) gives either way. The digests and data rules of
/// the source are checked before anything is written from them. Returns what it held
/// ([`Held`]).
///
/// # Errors
/// As [`write_data`](crate::write_data), and the source's read and check errors.
pub fn write_source_object<W: Write>(
    writer: &mut Writer<W>,
    source: &dyn TensorSource,
    index: usize,
    attributes: Option<Attributes>,
    options: &WriteOptions,
) -> Result<Held> {
    let info = source.info(index).ok_or_else(|| Error::not_found(&format!("#{index}"), None))?;
    if streams(writer, options, &info.format)
        && info.unsupported.is_none()
        && source.reads_in_pieces(index)
    {
        let meta = Meta { name: &info.name, shape: &info.shape, format: &info.format, attributes };
        let peak = write_streamed(writer, meta, &SourceParts { source, index }, options)?;
        return Ok(Held { whole: 0, peak });
    }
    let mut data = source.read(index)?;
    source.check(index, &data)?;
    let held: u64 = data
        .components
        .values()
        .filter(|c| matches!(c.bytes, std::borrow::Cow::Owned(_)))
        .map(|c| c.bytes.len() as u64)
        .sum();
    data.attributes = attributes.map(std::borrow::Cow::Owned);
    crate::write_data::write_data(writer, &data, options)?;
    Ok(Held { whole: held, peak: held })
}

/// What [`write_source_object`] held in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Decoded bytes read whole (0 when the object streamed part by part).
    pub whole: u64,
    /// The most bytes held at once: the object read whole, or a piece, a frame and its
    /// encoding when it streamed.
    pub peak: u64,
}
