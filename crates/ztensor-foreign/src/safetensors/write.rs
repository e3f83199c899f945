//! Writing: a tensor source exported as a safetensors file, streamed one tensor at a time.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use safetensors::Dtype;
use ztensor_format::{DType, Format};
use ztensor_io::{AtomicFile, TensorSource, role};

use crate::error::{Error, ErrorKind, Result};

use super::types::{MAX_HEADER_LEN, carried, safetensors_dtype};

/// What to do with what safetensors cannot hold.
#[derive(Debug, Clone, Copy, Default)]
struct ExportOptions {
    /// Discard object attributes and file attributes that are not text → text, instead of
    /// refusing them.
    drop_attributes: bool,
}

/// One tensor of an export plan: its name and shape borrowed from the source where it can.
#[derive(Debug, Clone)]
struct Planned<'s> {
    index: usize,
    name: Cow<'s, str>,
    dtype: Dtype,
    shape: Cow<'s, [u64]>,
    len: u64,
}

/// Checks that every object of `source` fits in safetensors and lays out the file.
fn plan<'s>(
    source: &'s dyn TensorSource,
    options: &ExportOptions,
) -> Result<(Vec<Planned<'s>>, BTreeMap<String, String>)> {
    let mut metadata = BTreeMap::new();
    if let Some(attributes) = source.try_attributes()?.as_deref() {
        for (k, v) in attributes.entries() {
            match (k.as_text(), v.as_text()) {
                (Some(k), Some(v)) => {
                    metadata.insert(k.to_owned(), v.to_owned());
                }
                _ if options.drop_attributes => {}
                _ => {
                    return Err(Error::new(
                        ErrorKind::Unrepresentable,
                        format!(
                            "file attribute {k} is not text with a text value, and a \
                             safetensors __metadata__ holds only text keys with text values"
                        ),
                    )
                    .refusing(ztensor_format::Refused::FileAttributes));
                }
            }
        }
    }
    let mut planned: Vec<Planned<'s>> = Vec::with_capacity(source.len());
    let mut names = ztensor_format::NameIndex::with_capacity(source.len());
    for index in 0..source.len() {
        let Some(o) = source.info(index) else { break };
        let refuse = |why: &str| {
            Error::new(ErrorKind::Unrepresentable, format!("safetensors cannot hold {why}"))
                .in_object(&o.name)
        };
        if names.find(&o.name, |i| &planned[i].name).is_some() {
            return Err(refuse("two tensors of one name (the input repeats it)"));
        }
        if let Some(reason) = &o.unsupported {
            let refused =
                refuse(&format!("an object this reader cannot decode ({})", reason.message()));
            return Err(match reason.refused() {
                Some(what) => refused.refusing(what),
                None => refused,
            });
        }
        if o.name == "__metadata__" {
            return Err(refuse("a tensor named __metadata__ (the name of its metadata map)"));
        }
        if o.format != Format::Dense || o.components.len() != 1 {
            return Err(refuse(&format!("a {} object (only dense tensors)", o.format)));
        }
        let c = o.component(role::DATA).ok_or_else(|| refuse("a component not called data"))?;
        let dtype = c.dtype.known().ok_or_else(|| refuse("an unknown dtype"))?;
        let len = c.decoded_len.ok_or_else(|| refuse("an unsized component"))?;
        // A tensor carried as bytes gets its own dtype and shape back.
        let restored =
            (dtype == DType::U8 && c.logical_type.is_none()).then(|| carried(&o, len)).flatten();
        if o.attributes.is_some() && restored.is_none() && !options.drop_attributes {
            return Err(
                refuse("object attributes").refusing(ztensor_format::Refused::ObjectAttributes)
            );
        }
        let (st, shape) = match restored {
            Some((st, shape)) => (st, Cow::Owned(shape)),
            None => (
                safetensors_dtype(dtype, c.logical_type.as_ref())
                    .map_err(|e| e.in_object(&o.name))?,
                o.shape,
            ),
        };
        // The bytes are what the shape takes; a sub-byte dtype ends on a whole byte in
        // safetensors (it has no padding rule).
        let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        match elements.and_then(|n| n.checked_mul(st.bitsize() as u64)) {
            None => {
                return Err(refuse(&format!(
                    "shape {:?} of dtype {st}: its size overflows",
                    &*shape
                )));
            }
            Some(bits) if bits % 8 != 0 => {
                return Err(refuse(&format!(
                    "{} elements of dtype {st}: they end inside a byte, and a safetensors tensor \
                     ends on a whole byte",
                    elements.unwrap_or_default()
                )));
            }
            Some(bits) if bits / 8 != len => {
                return Err(refuse(&format!(
                    "{len} bytes for shape {:?} of dtype {st} (they take {})",
                    &*shape,
                    bits / 8
                )));
            }
            Some(_) => {}
        }
        planned.push(Planned { index, name: o.name, dtype: st, shape, len });
        names.insert(planned.len() - 1, |i| &planned[i].name);
    }
    // The safetensors crate's order: descending dtype alignment, then name.
    planned.sort_by(|a, b| b.dtype.cmp(&a.dtype).then_with(|| a.name.cmp(&b.name)));
    Ok((planned, metadata))
}

/// Writes the header of a planned file to `out`: the JSON the `safetensors` crate writes (the
/// metadata, then each tensor's dtype, shape and data offsets, in the order of the data),
/// padded with spaces to a multiple of 8 bytes. Returns its length. Written piece by piece,
/// never whole: the header of a million tensors is tens of megabytes.
fn write_header(
    out: &mut impl Write,
    planned: &[Planned<'_>],
    metadata: &BTreeMap<String, String>,
) -> Result<u64> {
    let mut out = Counted { inner: out, written: 0 };
    let json = |e: serde_json::Error| Error::new(ErrorKind::Io, format!("writing: {e}"));
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("writing: {e}"));
    out.write_all(b"{").map_err(io)?;
    let mut first = true;
    let mut separate = |out: &mut Counted<'_, _>| {
        let comma: &[u8] = if std::mem::take(&mut first) { b"" } else { b"," };
        out.write_all(comma)
    };
    if !metadata.is_empty() {
        separate(&mut out).map_err(io)?;
        out.write_all(br#""__metadata__":"#).map_err(io)?;
        serde_json::to_writer(&mut out, metadata).map_err(json)?;
    }
    let mut offset = 0u64;
    for t in planned {
        let end = offset
            .checked_add(t.len)
            .ok_or_else(|| Error::new(ErrorKind::Unrepresentable, "data larger than 2^64 bytes"))?;
        separate(&mut out).map_err(io)?;
        serde_json::to_writer(&mut out, &*t.name).map_err(json)?;
        write!(out, r#":{{"dtype":"{}","shape":"#, t.dtype).map_err(io)?;
        serde_json::to_writer(&mut out, &*t.shape).map_err(json)?;
        write!(out, r#","data_offsets":[{offset},{end}]}}"#).map_err(io)?;
        offset = end;
    }
    out.write_all(b"}").map_err(io)?;
    let padding = out.written.next_multiple_of(8) - out.written;
    out.write_all(&b"       "[..usize::try_from(padding).unwrap_or(0)]).map_err(io)?;
    Ok(out.written)
}

/// A writer that counts what passes through it.
struct Counted<'w, W: Write> {
    inner: &'w mut W,
    written: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The length of the header of a planned file, refused when over safetensors' limit.
fn header_len(planned: &[Planned<'_>], metadata: &BTreeMap<String, String>) -> Result<u64> {
    let len = write_header(&mut std::io::sink(), planned, metadata)?;
    if len > MAX_HEADER_LEN {
        return Err(Error::new(
            ErrorKind::Unrepresentable,
            format!("the header would be {len} bytes, over safetensors' limit"),
        ));
    }
    Ok(len)
}

/// Writes every object of `source` as a safetensors file to `out` (decoding zstd), returning
/// the number of bytes written. Checks everything before writing anything.
fn export(source: &dyn TensorSource, out: &mut impl Write, options: &ExportOptions) -> Result<u64> {
    let (planned, metadata) = plan(source, options)?;
    let header_len = header_len(&planned, &metadata)?;
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("writing: {e}"));
    out.write_all(&header_len.to_le_bytes()).map_err(io)?;
    let mut header = std::io::BufWriter::with_capacity(64 << 10, &mut *out);
    let written_header = write_header(&mut header, &planned, &metadata)?;
    header.flush().map_err(io)?;
    drop(header);
    if written_header != header_len {
        return Err(Error::new(ErrorKind::Io, "the header changed length while it was written"));
    }
    let mut written = 8 + header_len;
    // The tensors are read in the order they are written: a remote input fetches them ahead.
    ztensor_io::will_read(source, planned.iter().map(|t| t.index));
    for t in &planned {
        // safetensors keeps no digest: check the source's on the bytes exported (reading
        // checks every digest the source has), or damage is laundered.
        // In pieces: a tensor of any size holds a few MiB. The target is a temporary file
        // that is published only if every piece and the digest check come through.
        let mut got = 0u64;
        let mut failed = None;
        source
            .read_pieces(t.index, 4 << 20, &mut |r, bytes| {
                if r != role::DATA {
                    return Ok(());
                }
                got += bytes.len() as u64;
                if got > t.len {
                    return Ok(());
                }
                out.write_all(bytes).map_err(|e| {
                    failed = Some(io(e));
                    ztensor_io::Error::failed("writing the safetensors file")
                })
            })
            .map_err(|e| failed.take().unwrap_or_else(|| Error::from(e).in_object(&t.name)))?;
        if got != t.len {
            return Err(Error::new(
                ErrorKind::Malformed,
                format!("{got} bytes decoded where {} were planned", t.len),
            )
            .in_object(&t.name));
        }
        written += got;
    }
    Ok(written)
}

/// The safetensors output of the tensor-source interface: every object of a source (a zTensor
/// reader of any version, or any other [`TensorSource`]), decoded, as one safetensors file.
/// Everything is checked before anything is written.
///
/// [`SafetensorsSink::new`] writes a file beside its path and renames it over the path when
/// complete (the path is untouched on error); [`SafetensorsSink::to_writer`] writes to any
/// [`Write`], such as bytes in memory.
///
/// ```
/// use ztensor_format::{DType, Options, Version};
/// use ztensor_foreign::safetensors::SafetensorsSink;
/// use ztensor_io::{Reader, TensorSink, WriteOptions, Writer};
///
/// let mut w = Writer::new(Vec::new(), Version::V1_2)?;
/// w.add_dense("w", &[2], DType::U8, &[1, 2], &WriteOptions::zstd(3))?;
/// let zt = w.finish()?.0;
/// let reader = Reader::new(&zt[..], &Options::default())?;
/// let mut sink = SafetensorsSink::to_writer(Vec::new());
/// sink.write_all(&reader)?;
/// let st = sink.into_inner().expect("a writer's sink");
/// assert_eq!(safetensors::SafeTensors::deserialize(&st)?.tensor("w")?.data(), &[1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SafetensorsSink<W = std::io::Sink> {
    target: Target<W>,
    options: ExportOptions,
    written: u64,
}

#[derive(Debug)]
enum Target<W> {
    File(std::path::PathBuf),
    Writer(W),
}

impl SafetensorsSink {
    /// A sink writing the safetensors file `path`, atomically.
    pub fn new(path: impl AsRef<Path>) -> SafetensorsSink {
        let options = ExportOptions::default();
        SafetensorsSink { target: Target::File(path.as_ref().to_owned()), options, written: 0 }
    }
}

impl<W: Write> SafetensorsSink<W> {
    /// A sink writing to `out`. Nothing is written before every object is checked, but a read
    /// or write that fails part way leaves what was written.
    pub fn to_writer(out: W) -> SafetensorsSink<W> {
        SafetensorsSink {
            target: Target::Writer(out),
            options: ExportOptions::default(),
            written: 0,
        }
    }

    /// Discards object attributes and file attributes that are not text → text, instead of
    /// refusing them (safetensors metadata holds only text).
    #[must_use]
    pub fn drop_attributes(mut self, drop: bool) -> SafetensorsSink<W> {
        self.options.drop_attributes = drop;
        self
    }

    /// How many bytes the last [`write_all`](ztensor_io::TensorSink::write_all) wrote.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The writer given to [`SafetensorsSink::to_writer`] (`None` for a file's sink).
    pub fn into_inner(self) -> Option<W> {
        match self.target {
            Target::Writer(out) => Some(out),
            Target::File(_) => None,
        }
    }
}

impl<W: Write> ztensor_io::TensorSink for SafetensorsSink<W> {
    type Error = Error;

    fn format_name(&self) -> Cow<'_, str> {
        Cow::Borrowed("safetensors")
    }

    /// # Errors
    /// [`ErrorKind::Unrepresentable`] naming the first object safetensors cannot hold (sparse
    /// and quantized objects, `complex128`, attributes unless dropped, a name given twice);
    /// read and write errors. A file's path is then untouched.
    fn write_all(&mut self, source: &dyn TensorSource) -> Result<usize> {
        self.written = 0;
        self.written = match &mut self.target {
            Target::File(path) => {
                let mut file = AtomicFile::create(&*path)?;
                let written =
                    export(source, &mut file, &self.options).map_err(|e| e.with_path(path))?;
                file.persist()?;
                written
            }
            Target::Writer(out) => export(source, out, &self.options)?,
        };
        Ok(source.len())
    }
}
