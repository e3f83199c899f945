//! Conversion between TensorBuffers and every zTensor version.
//!
//! TensorBuffers → zTensor writes each tensor as a dense object, in file order, and keeps what
//! zTensor has no field for as file attributes: `tensorbuffers.version` (when not `"1.0.0"`),
//! `tensorbuffers.model`, `tensorbuffers.operations` (when present and not empty; `null` when the
//! field was absent), and `tensorbuffers.order` (the tensor order, when zero-size tensors make
//! blob offsets ambiguous). Going back restores them, so TensorBuffers → zTensor 1.2 →
//! TensorBuffers reproduces the original bytes.

use std::io::Write;

use ztensor_format::{Encoding, Format, Value};
use ztensor_io::{TensorSource, role};

use crate::error::{Error, ErrorKind, Result};
use crate::metadata::op_from_value;
use crate::schema::DataType;
use crate::write::TbWriter;

/// Copies every object of `source` into a TensorBuffers writer (see [`TbSink`]).
fn copy_source<W: Write>(
    source: &dyn TensorSource,
    tb: &mut TbWriter<W>,
    drop_attributes: bool,
) -> Result<()> {
    let refuse =
        |name: &str, what: String| Error::new(ErrorKind::Unrepresentable, what).in_object(name);
    let mut order: Option<Vec<String>> = None;
    if let Some(attributes) = source.try_attributes()?.as_deref() {
        for (key, value) in attributes.entries() {
            match (key.as_text(), value.to_value()) {
                (Some("tensorbuffers.version"), Value::Text(v)) => tb.set_version(v),
                (Some("tensorbuffers.model"), Value::Text(m)) => tb.set_model(Some(m)),
                (Some("tensorbuffers.operations"), Value::Null) => tb.set_operations(None),
                (Some("tensorbuffers.operations"), Value::Array(ops)) => {
                    let ops = ops.iter().map(op_from_value).collect::<Option<Vec<_>>>();
                    let ops = ops.ok_or_else(|| {
                        Error::new(
                            ErrorKind::Unrepresentable,
                            "tensorbuffers.operations is malformed",
                        )
                    })?;
                    tb.set_operations(Some(ops));
                }
                (Some("tensorbuffers.order"), Value::Array(names)) => {
                    order = names.iter().map(|n| n.as_text().map(str::to_owned)).collect();
                }
                (k, _) if !drop_attributes => {
                    let k = k.map_or_else(|| key.to_string(), str::to_owned);
                    return Err(Error::new(
                        ErrorKind::Unrepresentable,
                        format!("TensorBuffers has no file attributes (found {k:?})"),
                    )
                    .refusing(ztensor_format::Refused::FileAttributes));
                }
                _ => {}
            }
        }
    }
    // File order: as recorded, else by where each object's data lies: source by source (the
    // shards of a checkpoint, in the source's order), each by offset. Found as indices, the
    // names in one buffer: no object's listing is held beyond its turn.
    let names = Names::of(source);
    let recorded = order.and_then(|o| names.positions(&o));
    let objects: Vec<usize> = match recorded {
        Some(o) => o,
        None => {
            // Each source (a shard's file name; `None`: the one file) by first appearance.
            let mut groups: std::collections::HashMap<Option<String>, usize> =
                std::collections::HashMap::new();
            let mut keyed: Vec<(usize, u64, usize)> = Vec::with_capacity(source.len());
            for i in 0..source.len() {
                let Some(o) = source.info(i) else { continue };
                let location = o.location.as_deref().map(str::to_owned);
                let next = groups.len();
                let group = *groups.entry(location).or_insert(next);
                let offset = o.components.iter().filter_map(|c| c.offset).min().unwrap_or(0);
                keyed.push((group, offset, i));
            }
            keyed.sort_by(|a, b| {
                (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| names.name(a.2).cmp(names.name(b.2)))
            });
            keyed.into_iter().map(|(_, _, i)| i).collect()
        }
    };
    drop(names);
    // The objects are read in file order: a remote input fetches them ahead in that order.
    ztensor_io::will_read(source, objects.iter().copied());
    for index in objects {
        let Some(o) = source.info(index) else { continue };
        let name = o.name.as_ref();
        if o.format != Format::Dense || o.components.len() != 1 {
            return Err(refuse(
                name,
                format!("TensorBuffers holds dense tensors only, not {}", o.format),
            ));
        }
        if o.attributes.is_some() && !drop_attributes {
            return Err(refuse(name, "TensorBuffers has no object attributes".into())
                .refusing(ztensor_format::Refused::ObjectAttributes));
        }
        let Some(c) = o.component(role::DATA) else {
            return Err(refuse(name, "dense object without data".into()));
        };
        if let Some(t) = &c.logical_type {
            return Err(refuse(name, format!("TensorBuffers has no logical type {t}")));
        }
        if let Encoding::Unknown(e) = &c.encoding {
            return Err(refuse(name, format!("unknown encoding {e}")));
        }
        let dtype =
            c.dtype.known().ok_or_else(|| refuse(name, format!("unknown dtype {}", c.dtype)))?;
        let data_type = DataType::from_dtype(dtype)
            .ok_or_else(|| refuse(name, format!("TensorBuffers has no {dtype} type")))?;
        // TensorBuffers keeps no digest: check the source's on the bytes converted, which
        // pass through in pieces (the file is a temporary until every check is through).
        tb.add_from(name, data_type, &o.shape, &mut |write| {
            let mut failed = None;
            let read = source.read_pieces(index, 4 << 20, &mut |role, piece| {
                if role != role::DATA {
                    return Ok(());
                }
                write(piece).map_err(|e| {
                    failed = Some(e);
                    ztensor_io::Error::failed("writing the TensorBuffers file")
                })
            });
            match (read, failed) {
                (_, Some(e)) => Err(e),
                (Err(e), None) => Err(Error::from(e)),
                (Ok(()), None) => Ok(()),
            }
        })?;
    }
    Ok(())
}

/// A source's object names, in one buffer (a few bytes an object besides the name).
struct Names {
    text: String,
    /// Where each object's name starts in `text` and its length (`None`: not listed).
    at: Vec<Option<(usize, usize)>>,
}

impl Names {
    fn of(source: &dyn TensorSource) -> Names {
        let mut names = Names { text: String::new(), at: Vec::with_capacity(source.len()) };
        for i in 0..source.len() {
            let name = source.name(i);
            names.at.push(name.as_deref().map(|n| (names.text.len(), n.len())));
            names.text.push_str(name.as_deref().unwrap_or_default());
        }
        names.text.shrink_to_fit();
        names
    }

    /// Object `index`'s name (empty when not listed).
    fn name(&self, index: usize) -> &str {
        self.at[index].map_or("", |(start, len)| &self.text[start..][..len])
    }

    /// The indices of the objects named `order`, in its order, when it names every listed
    /// object once and nothing else.
    fn positions(&self, order: &[String]) -> Option<Vec<usize>> {
        let mut listed: Vec<usize> = (0..self.at.len()).filter(|&i| self.at[i].is_some()).collect();
        listed.sort_by(|&a, &b| self.name(a).cmp(self.name(b)));
        let mut given: Vec<usize> = (0..order.len()).collect();
        given.sort_by(|&a, &b| order[a].cmp(&order[b]));
        if listed.len() != given.len()
            || listed.iter().zip(&given).any(|(&i, &g)| self.name(i) != order[g])
        {
            return None;
        }
        // Sorted alike, the two lists pair each name given with the object of that name; a
        // name given twice pairs with two objects of that name, or none at all.
        let mut positions = vec![0; order.len()];
        for (&i, &g) in listed.iter().zip(&given) {
            positions[g] = i;
        }
        Some(positions)
    }
}

/// The TensorBuffers output of the tensor-source interface: every object of any source (zTensor
/// of any version, safetensors, TensorBuffers), restoring what `tensorbuffers.*` file attributes
/// recorded. Compressed data is decoded first, its digests checked.
///
/// [`TbSink::new`] writes a file beside its path and renames it over the path when complete;
/// [`TbSink::to_writer`] writes to any [`Write`], such as bytes in memory.
#[derive(Debug)]
pub struct TbSink<W = std::io::Sink> {
    target: Target<W>,
    drop_attributes: bool,
}

#[derive(Debug)]
enum Target<W> {
    File(std::path::PathBuf),
    /// The writer, while it is not being written (taken for a write, given back when it ends).
    Writer(Option<W>),
}

impl TbSink {
    /// A sink writing the TensorBuffers file `path`, atomically.
    pub fn new(path: impl AsRef<std::path::Path>) -> TbSink {
        TbSink { target: Target::File(path.as_ref().to_owned()), drop_attributes: false }
    }
}

impl<W: Write> TbSink<W> {
    /// A sink writing a TensorBuffers file to `out`.
    pub fn to_writer(out: W) -> TbSink<W> {
        TbSink { target: Target::Writer(Some(out)), drop_attributes: false }
    }

    /// Leaves out the attributes TensorBuffers cannot hold instead of refusing them.
    #[must_use]
    pub fn drop_attributes(mut self, drop: bool) -> TbSink<W> {
        self.drop_attributes = drop;
        self
    }

    /// The writer given to [`TbSink::to_writer`], after a write that ended well (`None` for a
    /// file's sink, or once a write failed: what it holds is then incomplete).
    pub fn into_inner(self) -> Option<W> {
        match self.target {
            Target::Writer(out) => out,
            Target::File(_) => None,
        }
    }
}

impl<W: Write> ztensor_io::TensorSink for TbSink<W> {
    type Error = Error;

    fn format_name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("TensorBuffers")
    }

    /// # Errors
    /// [`ErrorKind::Unrepresentable`], naming the object, for what TensorBuffers cannot hold:
    /// non-dense objects, bool/f16/bf16 data, logical types (FP8, complex), objects that cannot
    /// be decoded here; and, unless attributes are dropped, attributes other than the
    /// `tensorbuffers.*` ones. Read and write errors. A file's path is then untouched.
    fn write_all(&mut self, source: &dyn TensorSource) -> Result<usize> {
        match &mut self.target {
            Target::File(path) => {
                let mut tb = crate::write::create(&*path)?;
                copy_source(source, &mut tb, self.drop_attributes)?;
                tb.persist()?;
            }
            Target::Writer(out) => {
                let out = out.take().ok_or_else(|| {
                    Error::new(ErrorKind::Io, "the writer was lost to an earlier failed write")
                })?;
                let mut tb = TbWriter::new(out)?;
                copy_source(source, &mut tb, self.drop_attributes)?;
                self.target = Target::Writer(Some(tb.finish()?.0));
            }
        }
        Ok(source.len())
    }
}
