//! The zTensor output of the tensor-source interface: any [`TensorSource`] written by the
//! parallel engine.

use std::borrow::Cow;
use std::io::Write;

use ztensor_format::{ErrorKind as Rule, Format, Version};
use ztensor_io::low_level::Streaming;
use ztensor_io::{
    CopyOptions, Error, ReadAt, Result, TensorSink, TensorSource, WriteOptions, Writer, role,
    write_source_object,
};

use crate::pipeline::{Input, Item};
use crate::{ParOptions, Progress, Stats, run, stream};

/// Writes every object of a [`TensorSource`] into a zTensor [`Writer`] of any version.
///
/// Dense tensors whose raw bytes lie in a file ([`TensorSource::raw`]) are read in pieces by the
/// workers (borrowed when the source is a map), compressed and digested on all threads; every
/// other object is decoded by the source (digests checked) and written by
/// the sequential code in its turn. Output is byte-identical whatever the thread count.
///
/// ```
/// use ztensor_format::{DType, Options, Version};
/// use ztensor_io::{Reader, TensorSink, WriteOptions, Writer};
/// use ztensor_par::{ParOptions, ZtSink};
///
/// let mut w = Writer::new(Vec::new(), Version::V1_2)?;
/// w.add_dense("w", &[2], DType::U8, &[1, 2], &WriteOptions::raw())?;
/// let file = w.finish()?.0;
/// let source = Reader::new(&file[..], &Options::default())?;
///
/// let mut out = Writer::new(Vec::new(), Version::V1_1)?;
/// let par = ParOptions::with_threads(2);
/// let mut sink = ZtSink::new(&mut out, WriteOptions::zstd(3), &par, &());
/// assert_eq!(sink.write_all(&source)?, 1);
/// let copy = out.finish()?.0;
/// let copy = Reader::new(&copy[..], &Options::default())?;
/// assert_eq!(copy.component("w", "data")?.read_as::<u8>()?, [1, 2]);
/// # Ok::<(), ztensor_io::Error>(())
/// ```
pub struct ZtSink<'w, 'p, W: Write> {
    writer: &'w mut Writer<W>,
    options: WriteOptions,
    par: &'p ParOptions,
    progress: &'p dyn Progress,
    drop_attributes: bool,
    file_attributes: bool,
    copy: Option<CopyOptions>,
    stats: Stats,
}

impl<'w, 'p, W: Write> ZtSink<'w, 'p, W> {
    /// A sink writing into `writer` with `options` (compression, digest, frame size), on
    /// `par`'s threads, telling `progress`.
    pub fn new(
        writer: &'w mut Writer<W>,
        options: WriteOptions,
        par: &'p ParOptions,
        progress: &'p dyn Progress,
    ) -> ZtSink<'w, 'p, W> {
        ZtSink {
            writer,
            options,
            par,
            progress,
            drop_attributes: false,
            file_attributes: true,
            copy: None,
            stats: Stats::default(),
        }
    }

    /// Leaves the source's file and object attributes out instead of writing them (or
    /// refusing them where the version has no place for them).
    #[must_use]
    pub fn drop_attributes(mut self, drop: bool) -> ZtSink<'w, 'p, W> {
        self.drop_attributes = drop;
        self
    }

    /// Leaves the source's file attributes out, keeping the writer's own (for objects added
    /// to an existing file), but still writes object attributes.
    #[must_use]
    pub fn without_file_attributes(mut self) -> ZtSink<'w, 'p, W> {
        self.file_attributes = false;
        self
    }

    /// How the objects of a zTensor source ([`TensorSource::stored`]) are carried: as
    /// [`repack`](crate::repack) carries them with `copy`, stored bytes copied as they are
    /// where the target can hold them and `copy` asks for no re-encoding, decoded (digests
    /// checked) and encoded again otherwise, on all threads. Without it, a zTensor source is
    /// read like any other, through its decoded tensors and this sink's write options.
    /// [`ZtSink::drop_attributes`] applies either way.
    #[must_use]
    pub fn copying(mut self, copy: CopyOptions) -> ZtSink<'w, 'p, W> {
        self.copy = Some(copy);
        self
    }

    /// What the last [`TensorSink::write_all`] measured.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl<W: Write> std::fmt::Debug for ZtSink<'_, '_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZtSink")
            .field("version", &self.writer.version())
            .field("options", &self.options)
            .field("drop_attributes", &self.drop_attributes)
            .finish_non_exhaustive()
    }
}

impl<W: Write> ZtSink<'_, '_, W> {
    /// Refuses, before the first byte is written, what this writer cannot take: objects this
    /// implementation cannot decode, a name given twice or already in the file, dense tensors
    /// whose types or sizes the version cannot hold.
    fn check_all(&self, source: &dyn TensorSource) -> Result<()> {
        let mut names = std::collections::HashSet::new();
        for index in 0..source.len() {
            let info =
                source.info(index).ok_or_else(|| Error::not_found(&format!("#{index}"), None))?;
            if info.unsupported.is_some() {
                // The source says exactly why (its read refuses before reading any data).
                return Err(source.read(index).err().unwrap_or_else(|| {
                    Error::failed(format!("object {:?} cannot be decoded here", info.name))
                }));
            }
            if !names.insert(info.name.clone()) {
                return Err(Error::from(
                    ztensor_format::Error::new(
                        Rule::DuplicateName,
                        "the input holds two objects of this name",
                    )
                    .in_object(&info.name),
                ));
            }
            let data = info.component(role::DATA).filter(|_| info.components.len() == 1);
            if info.format == Format::Dense
                && let Some(c) = data
                && let (Some(dtype), Some(len)) = (c.dtype.known(), c.decoded_len)
            {
                self.writer.check_dense(
                    &info.name,
                    &info.shape,
                    dtype,
                    c.logical_type.as_ref(),
                    len,
                )?;
            }
        }
        Ok(())
    }
}

/// A byte source seen through a reference to the trait, so one pipeline run can read any.
struct Dyn<'a>(&'a dyn ReadAt);

impl ReadAt for Dyn<'_> {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        self.0.as_slice()
    }
    fn will_need(&self, ranges: &[std::ops::Range<u64>]) {
        self.0.will_need(ranges);
    }
    fn read_each_at(
        &self,
        offset: u64,
        len: u64,
        scratch: &mut [u8],
        each: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.0.read_each_at(offset, len, scratch, each)
    }
}

impl<W: Write> TensorSink for ZtSink<'_, '_, W> {
    type Error = Error;

    fn format_name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("zTensor {}", self.writer.version()))
    }

    fn write_all(&mut self, source: &dyn TensorSource) -> Result<usize> {
        if let Some(copy) = &self.copy
            && let Some(file) = source.stored().and_then(ztensor_io::ZtensorObjects::of)
        {
            let copy = CopyOptions {
                drop_attributes: copy.drop_attributes || self.drop_attributes,
                ..copy.clone()
            };
            let keep = |position: usize, _: &str| file.presents(position);
            self.stats = crate::repack_objects(
                &file.reader,
                self.writer,
                &copy,
                self.file_attributes,
                self.par,
                self.progress,
                &keep,
            )?;
            return Ok(file.len());
        }
        let version = self.writer.version();
        let attributes = if !self.drop_attributes && self.file_attributes {
            source.try_attributes()?
        } else {
            None
        };
        if let Some(attributes) = &attributes
            && version == Version::V0_1
        {
            let keys: Vec<String> = attributes
                .entries()
                .map(|(k, _)| k.as_text().map_or_else(|| k.to_string(), str::to_owned))
                .collect();
            return Err(Error::from(ztensor_format::Error::new(
                Rule::Unrepresentable,
                format!(
                    "{} cannot be kept: zTensor 0.1 has no file attributes ({})",
                    source.attributes_origin(),
                    keys.join(", ")
                ),
            )));
        }
        self.check_all(source)?;
        if let Some(attributes) = attributes {
            self.writer.set_attributes(attributes.into_owned())?;
        }
        // Runs of consecutive raw dense tensors of one byte source go through one pipeline
        // run; anything else is written in its turn by the sequential code.
        let mut peak = 0;
        // Objects the source decodes whole are held whole while they are written: the most
        // such bytes counts as in flight too.
        let decoded = std::sync::atomic::AtomicU64::new(0);
        let decoded = &decoded;
        let count = source.len();
        let (options, drop_attributes) = (&self.options, self.drop_attributes);
        // Each tensor's item, made when the pipeline reaches it (never a list of every one),
        // with the byte source it streams from (`None` when it is written in its turn by the
        // sequential code).
        let make = |index: usize| -> Result<(Option<&dyn ReadAt>, Item<'_, W>)> {
            let info =
                source.info(index).ok_or_else(|| Error::not_found(&format!("#{index}"), None))?;
            let raw = source.raw(index).filter(|_| {
                info.format == Format::Dense
                    && info.components.len() == 1
                    && info.unsupported.is_none()
            });
            let dense = info.component(role::DATA).and_then(|c| c.dtype.known().map(|d| (c, d)));
            if let Some((range, (c, dtype))) = raw.zip(dense) {
                let object = crate::pipeline::Template::Parts(Box::new(crate::pipeline::Parts {
                    name: info.name.clone(),
                    shape: info.shape.clone(),
                    attributes: info.attributes.clone().filter(|_| !drop_attributes),
                }));
                let input = Input::Raw { offset: range.offset, swap: None, digest: None };
                let logical = c.logical_type.clone();
                return Ok((
                    Some(range.source),
                    stream(object, dtype, logical, range.len, input, options),
                ));
            }
            let options = options.clone();
            let done: u64 =
                info.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum();
            Ok((
                None,
                Item::Sequential(
                    Box::new(move |w: &mut Writer<W>| {
                        // Part by part where the target allows (memory: a few pieces, whatever the
                        // object's size), else whole.
                        let attributes = if drop_attributes {
                            None
                        } else {
                            info.attributes.as_deref().cloned()
                        };
                        let held = write_source_object(w, source, index, attributes, &options)?;
                        decoded.fetch_max(held.peak, std::sync::atomic::Ordering::Relaxed);
                        Ok(done)
                    }),
                    Vec::new(),
                ),
            ))
        };
        // Runs of tensors of one byte source go through one pipeline run (tensors written by
        // the sequential code join any run). A run's source is that of its first streamed
        // tensor: tensors before it are held until it is found, up to `LEAD` of them.
        const LEAD: usize = 4096;
        struct Feed<'i, F, T> {
            make: F,
            index: usize,
            count: usize,
            pending: Option<(Option<&'i dyn ReadAt>, T)>,
            failure: Option<Error>,
        }
        impl<'i, F: FnMut(usize) -> Result<(Option<&'i dyn ReadAt>, T)>, T> Feed<'i, F, T> {
            fn next(&mut self) -> Option<(Option<&'i dyn ReadAt>, T)> {
                if let Some(item) = self.pending.take() {
                    return Some(item);
                }
                if self.index >= self.count || self.failure.is_some() {
                    return None;
                }
                self.index += 1;
                (self.make)(self.index - 1).map_err(|e| self.failure = Some(e)).ok()
            }
        }
        // Objects are written in the source's order: a remote input fetches them ahead in it
        // (a run through the pipeline tells its own byte source its reads again, exactly).
        ztensor_io::will_read(source, 0..count);
        let mut feed = Feed { make, index: 0, count, pending: None, failure: None };
        loop {
            let mut lead = Vec::new();
            let mut current: Option<&dyn ReadAt> = None;
            while current.is_none() && lead.len() < LEAD {
                let Some((from, item)) = feed.next() else { break };
                current = from;
                lead.push(item);
            }
            if lead.is_empty() {
                break;
            }
            let feed = &mut feed;
            let rest = std::iter::from_fn(|| {
                let (from, item) = feed.next()?;
                match (from, current) {
                    (Some(from), Some(c)) if std::ptr::addr_eq(c, from) => Some(item),
                    (Some(from), _) => {
                        feed.pending = Some((Some(from), item));
                        None
                    }
                    (None, _) => Some(item),
                }
            });
            let at = current.map(Dyn);
            let items = lead.into_iter().chain(rest);
            let stats = run(at.as_ref(), items, self.writer, self.par, self.progress)?;
            peak = peak.max(stats.peak_in_flight);
            if let Some(e) = feed.failure.take() {
                return Err(e);
            }
        }
        peak = peak.max(decoded.load(std::sync::atomic::Ordering::Relaxed));
        self.stats = Stats { peak_in_flight: peak };
        Ok(count)
    }
}
