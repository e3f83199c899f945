//! A writer to a file path, published atomically, and the macro that gives a type holding a
//! writer its writing API.

use std::path::Path;
use std::sync::Arc;

use ztensor_format::Version;

use ztensor_source::AtomicFile;
use ztensor_source::{Error, Result};

use super::{Positioned, Writer};

/// The writing API of [`Writer`], on a type that holds one (`$ty.writer()` /
/// `$ty.writer_mut()`), so each reads as a writer without `Deref` standing in for inheritance.
macro_rules! delegate_writing {
    ($ty:ty, $sink:ty) => {
        impl $ty {
            /// The writer underneath, for functions that take a [`Writer`] (the parallel
            /// engine, [`copy_all`](crate::copy_all)).
            pub fn writer(&self) -> &$crate::Writer<$sink> {
                self.inner()
            }

            /// As [`Self::writer`], mutably.
            pub fn writer_mut(&mut self) -> &mut $crate::Writer<$sink> {
                self.inner_mut()
            }

            /// The version being written ([`Writer::version`](crate::Writer::version)).
            pub fn version(&self) -> ztensor_format::Version {
                self.inner().version()
            }

            /// The manifest so far ([`Writer::manifest`](crate::Writer::manifest)).
            pub fn manifest(&self) -> &ztensor_format::ManifestBuilder {
                self.inner().manifest()
            }

            /// As [`Writer::set_attributes`](crate::Writer::set_attributes).
            ///
            /// # Errors
            /// As [`Writer::set_attributes`](crate::Writer::set_attributes).
            pub fn set_attributes(
                &mut self,
                attributes: ztensor_format::Attributes,
            ) -> $crate::Result<()> {
                self.inner_mut().set_attributes(attributes)
            }

            /// As [`Writer::add_dense`](crate::Writer::add_dense).
            ///
            /// # Errors
            /// As [`Writer::add_dense`](crate::Writer::add_dense).
            pub fn add_dense(
                &mut self,
                name: &str,
                shape: &[u64],
                dtype: ztensor_format::DType,
                data: &[u8],
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_dense(name, shape, dtype, data, options)
            }

            /// As [`Writer::add_csr`](crate::Writer::add_csr).
            ///
            /// # Errors
            /// As [`Writer::add_csr`](crate::Writer::add_csr).
            pub fn add_csr(
                &mut self,
                name: &str,
                shape: &[u64],
                csr: $crate::Csr<'_>,
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_csr(name, shape, csr, options)
            }

            /// As [`Writer::add_csr_object`](crate::Writer::add_csr_object).
            ///
            /// # Errors
            /// As [`Writer::add_csr_object`](crate::Writer::add_csr_object).
            pub fn add_csr_object(
                &mut self,
                name: &str,
                shape: &[u64],
                csr: $crate::Csr<'_>,
                attributes: Option<ztensor_format::Attributes>,
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_csr_object(name, shape, csr, attributes, options)
            }

            /// As [`Writer::add_coo`](crate::Writer::add_coo).
            ///
            /// # Errors
            /// As [`Writer::add_coo`](crate::Writer::add_coo).
            pub fn add_coo(
                &mut self,
                name: &str,
                shape: &[u64],
                coo: $crate::Coo<'_>,
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_coo(name, shape, coo, options)
            }

            /// As [`Writer::add_coo_object`](crate::Writer::add_coo_object).
            ///
            /// # Errors
            /// As [`Writer::add_coo_object`](crate::Writer::add_coo_object).
            pub fn add_coo_object(
                &mut self,
                name: &str,
                shape: &[u64],
                coo: $crate::Coo<'_>,
                attributes: Option<ztensor_format::Attributes>,
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_coo_object(name, shape, coo, attributes, options)
            }

            /// As [`Writer::add_object`](crate::Writer::add_object).
            ///
            /// # Errors
            /// As [`Writer::add_object`](crate::Writer::add_object).
            pub fn add_object(
                &mut self,
                name: &str,
                shape: &[u64],
                format: ztensor_format::Format,
                attributes: Option<ztensor_format::Attributes>,
                components: &[$crate::ComponentSpec<'_>],
                options: &$crate::WriteOptions,
            ) -> $crate::Result<()> {
                self.inner_mut().add_object(name, shape, format, attributes, components, options)
            }

            /// As [`Writer::add_stored`](crate::Writer::add_stored).
            ///
            /// # Errors
            /// As [`Writer::add_stored`](crate::Writer::add_stored).
            pub fn add_stored(
                &mut self,
                object: ztensor_format::Object,
                components: &[$crate::StoredComponent<'_>],
            ) -> $crate::Result<()> {
                self.inner_mut().add_stored(object, components)
            }
        }
    };
}
pub(crate) use delegate_writing;

/// A [`Writer`] to a file path, published atomically by [`FileWriter::finish`]. Dropping it
/// unfinished, or a failed finish, leaves the target untouched.
#[derive(Debug)]
pub struct FileWriter {
    inner: Writer<AtomicFile>,
}

impl FileWriter {
    /// Starts writing `path` in `version`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn create(path: impl AsRef<Path>, version: Version) -> Result<FileWriter> {
        FileWriter::start(AtomicFile::create(path)?, version)
    }

    /// Starts writing entry `name` of `dir` in `version`: a name the tool chose, never written
    /// through a link (see [`OutputDir::create`](crate::OutputDir::create)).
    ///
    /// # Errors
    /// A link or special file at `name`, and I/O errors.
    pub fn create_in(dir: &crate::OutputDir, name: &str, version: Version) -> Result<FileWriter> {
        FileWriter::start(dir.create(name)?, version)
    }

    fn start(file: AtomicFile, version: Version) -> Result<FileWriter> {
        let handle = file.positioned_handle();
        let mut inner = Writer::new(file, version)?;
        // Unix only: a duplicated Windows handle shares the file pointer that positioned writes
        // there move.
        if cfg!(unix) {
            let target = Some(inner.sink.target().to_owned());
            let handle = handle.map_err(|e| Error::io("opening again", target, e))?;
            inner.positioned = Some(Positioned { file: Arc::new(handle), skip: AtomicFile::skip });
        }
        inner.path = Some(Arc::from(inner.sink.target()));
        Ok(FileWriter { inner })
    }

    fn inner(&self) -> &Writer<AtomicFile> {
        &self.inner
    }

    fn inner_mut(&mut self) -> &mut Writer<AtomicFile> {
        &mut self.inner
    }

    /// Writes the manifest, syncs, and renames the file into place. Returns the file length.
    ///
    /// # Errors
    /// As [`Writer::finish`], and I/O errors.
    pub fn finish(self) -> Result<u64> {
        let (file, len) = self.inner.finish()?;
        file.persist()?;
        Ok(len)
    }
}

delegate_writing!(FileWriter, AtomicFile);
