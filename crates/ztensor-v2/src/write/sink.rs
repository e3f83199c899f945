//! [`Zt2Sink`]: the writer as a [`TensorSink`](ztensor_io::TensorSink).

use super::*;

/// A [`TensorSink`](ztensor_io::TensorSink) writing canonical zTensor 2 ([`write()`]): to a path
/// (through a temporary file renamed over it once everything is written and checked), or to
/// any [`Output`].
///
/// ```
/// use ztensor_io::{TensorSink, TensorSource, WriteOptions, Writer};
/// use ztensor_format::{DType, Version};
///
/// let mut w = Writer::new(Vec::new(), Version::V1_2)?;
/// w.add_dense("w", &[2], DType::U8, &[1, 2], &WriteOptions::raw())?;
/// let one = ztensor_io::Reader::new(w.finish()?.0, &Default::default())?;
///
/// let mut sink = ztensor_v2::Zt2Sink::to_output(std::io::Cursor::new(Vec::new()));
/// sink.write_all(&one)?;
/// let bytes = sink.into_inner().expect("an output's sink").into_inner();
/// let two = ztensor_v2::File::open(bytes, ztensor_v2::MAX_MANIFEST)?;
/// assert_eq!(two.read(0)?.components["data"].bytes.as_ref(), [1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Zt2Sink<W = std::fs::File> {
    pub(super) target: Target<W>,
    pub(super) options: WriteOptions,
    pub(super) summary: Option<Summary>,
}

#[derive(Debug)]
pub(super) enum Target<W> {
    File(PathBuf),
    Output(W),
}

impl Zt2Sink {
    /// A sink writing the file `path`.
    pub fn new(path: impl AsRef<Path>) -> Zt2Sink {
        Zt2Sink {
            target: Target::File(path.as_ref().to_owned()),
            options: WriteOptions::default(),
            summary: None,
        }
    }
}

impl<W: Output> Zt2Sink<W> {
    /// A sink writing to `out` from its start.
    pub fn to_output(out: W) -> Zt2Sink<W> {
        Zt2Sink { target: Target::Output(out), options: WriteOptions::default(), summary: None }
    }

    /// Writes with `options`.
    #[must_use]
    pub fn with_options(mut self, options: WriteOptions) -> Zt2Sink<W> {
        self.options = options;
        self
    }

    /// What the last write produced.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary.as_ref()
    }

    /// The output given to [`Zt2Sink::to_output`] (`None` for a file's sink).
    pub fn into_inner(self) -> Option<W> {
        match self.target {
            Target::Output(out) => Some(out),
            Target::File(_) => None,
        }
    }
}

impl<W: Output> ztensor_io::TensorSink for Zt2Sink<W> {
    type Error = Error;

    fn format_name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("zTensor 2")
    }

    /// # Errors
    /// As [`write()`]; a file's path is then untouched.
    fn write_all(&mut self, source: &dyn TensorSource) -> Result<usize> {
        self.summary = None;
        let summary = match &mut self.target {
            Target::File(path) => {
                let publish = |e: ztensor_io::Error| {
                    Error::io(&format!("writing {}", path.display()), std::io::Error::other(e))
                };
                let mut file = ztensor_io::AtomicFile::create(&*path).map_err(publish)?;
                let handle = file.file_mut().map_err(|e| Error::io("writing", e))?;
                let summary = write(source, handle, &self.options)?;
                file.persist().map_err(publish)?;
                summary
            }
            Target::Output(out) => write(source, out, &self.options)?,
        };
        let objects = summary.objects;
        self.summary = Some(summary);
        Ok(objects)
    }
}
