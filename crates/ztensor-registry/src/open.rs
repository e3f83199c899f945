//! Opening a recognised file (by path, mapped, or from bytes) as a tensor source, with the
//! expansion budget applied.

use std::path::Path;

use ztensor_io::{FileSource, ReadAt, Reader};

use crate::place::Place;

#[cfg(feature = "sharded")]
use crate::alone::chunked_or_not;
#[cfg(feature = "tensorbuffers")]
use crate::alone::tb_reader;
use crate::alone::{not_opened, open_read_at};
use crate::detect::Detected;
pub(crate) use crate::opened::{OpenError, OpenOptions, Opened};
use crate::table::Kind;

/// Opens the file at `path`, of any format [`detect`](crate::detect) recognises, read with positional reads;
/// refused when its objects decode to more than the expansion budget allows
/// ([`Opened::check_expansion`]).
///
/// # Errors
/// [`OpenError::Detect`] when it is not recognised; [`OpenError::Zt`] with rule
/// `decoded_too_large` over the budget; the format reader's error otherwise.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    Detected::new(path)?.open(options)?.within_budget(Some(path), options)
}

/// The content identity of the file at `path`, whatever its format: the zTensor 2 content
/// digest (`zt.content/1`) of its objects. A zTensor 2 file's comes from its manifest (its
/// part digests as written); any other input's is the one its canonical zTensor 2 conversion
/// has, so a zTensor 1.x file and its conversion have the same identity.
///
/// # Errors
/// The format reader's error; [`OpenError::Zt2`] for content zTensor 2 cannot hold, a zTensor
/// 2 part without a digest or a data shard (no objects of its own); [`OpenError::Zt`] with rule
/// `decoded_too_large` for an input other than zTensor 2 over the expansion budget (a zTensor 2
/// file's identity comes from its manifest, nothing decoded).
#[cfg(feature = "v2")]
pub fn content_id(
    path: &Path,
    options: &OpenOptions,
    algorithm: ztensor_v2::IdAlgorithm,
) -> Result<String, OpenError> {
    Detected::new(path)?.content_id(options, algorithm)
}

impl Detected {
    /// Opens it as a tensor source, read with positional reads through the descriptor it was
    /// told by (an object by ranges of the version it was told in). The expansion budget is
    /// not checked: [`open`] checks it, a caller of this function does with
    /// [`Opened::check_expansion`].
    ///
    /// # Errors
    /// The format reader's error; [`OpenError::Detect`] for a kind this build does not read.
    pub fn open(mut self, options: &OpenOptions) -> Result<Opened, OpenError> {
        #[cfg(feature = "remote")]
        if self.object.is_some() {
            return crate::remote::open_object(self, options);
        }
        let (kind, strict) = (self.kind, options.options.strict);
        #[cfg(not(feature = "tensorbuffers"))]
        let _ = strict;
        let path = self.path.clone();
        let path = path.as_path();
        // What the content lies in besides the file itself: shards, and their bytes.
        let mut shards = 0u64;
        let mut files = Vec::new();
        let opened = match kind {
            Kind::Zt => Opened::new(kind, self.open_zt(options).map_err(OpenError::Zt)?),
            #[cfg(feature = "sharded")]
            Kind::ZtIndex => {
                let ckpt = self.open_zt_index(options)?;
                shards = ckpt
                    .shards()
                    .iter()
                    .map(|(_, r)| r.source().len())
                    .fold(0, u64::saturating_add);
                files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
                chunked_or_not(kind, ckpt)?
            }
            #[cfg(feature = "safetensors")]
            Kind::Safetensors => Opened::new(
                kind,
                ztensor_foreign::safetensors::SafetensorsFile::new(self.take_source()?)
                    .map_err(|e| OpenError::Foreign(e.with_path(path)))?
                    .carry_unknown_dtypes(options.carry_unknown_dtypes),
            ),
            #[cfg(feature = "safetensors")]
            Kind::SafetensorsIndex => {
                let ckpt = ztensor_foreign::sharded::ShardedSafetensors::open(path)
                    .map_err(OpenError::Foreign)?
                    .carry_unknown_dtypes(options.carry_unknown_dtypes);
                shards = ckpt
                    .shards()
                    .iter()
                    .map(|(_, f)| f.source().len())
                    .fold(0, u64::saturating_add);
                files = ckpt.shards().iter().map(|(p, _)| p.clone()).collect();
                Opened::new(kind, ckpt)
            }
            #[cfg(feature = "tensorbuffers")]
            Kind::TensorBuffers => Opened::new(kind, tb_reader(self.take_source()?, strict)?),
            #[cfg(feature = "numpy")]
            Kind::Npy => {
                let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("array");
                let npy = ztensor_foreign::npy_in::NpyFile::new(self.take_source()?, name);
                Opened::new(kind, npy.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(feature = "numpy")]
            Kind::Npz => {
                let limit = ztensor_io::machine_limits().whole_decode_limit();
                let npz = ztensor_foreign::npz::NpzFile::new(self.take_source()?, limit);
                Opened::new(kind, npz.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(feature = "gguf")]
            Kind::Gguf => {
                let gguf = ztensor_foreign::gguf::GgufFile::new(self.take_source()?)
                    .map_err(|e| OpenError::Foreign(e.with_path(path)))?;
                Opened::new(kind, gguf.with_blocks(options.gguf_blocks()))
            }
            #[cfg(feature = "torch")]
            Kind::Torch => {
                let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("tensor");
                let limit = ztensor_io::machine_limits().whole_decode_limit();
                let torch =
                    ztensor_foreign::torch::TorchFile::new(self.take_source()?, name, limit);
                Opened::new(kind, torch.map_err(|e| OpenError::Foreign(e.with_path(path)))?)
            }
            #[cfg(all(feature = "torch", feature = "sharded"))]
            Kind::Dcp => {
                let (opened, len, data) = open_dcp(path)?;
                shards = len;
                files = data;
                opened
            }
            #[cfg(all(feature = "safetensors", feature = "sharded"))]
            Kind::DcpSafetensors => {
                let (opened, len, data) = open_dcp_shards(path)?;
                shards = len;
                files = data;
                opened
            }
            #[cfg(feature = "v2")]
            Kind::Zt2 => {
                let file = self.open_zt2(options)?;
                shards = file.shards_len();
                files = file.shard_paths().map(|(_, p)| p.to_path_buf()).collect();
                Opened::new(kind, file)
            }
            #[allow(unreachable_patterns)]
            other => return Err(not_opened(other, Some(path))),
        };
        let len = match self.len {
            Some(len) => len,
            None => file_len(path)?,
        };
        Ok(Opened { input_len: len.saturating_add(shards), files, ..opened })
    }

    /// Its content identity, as [`content_id`] gives a file's: a zTensor 2 file's from its
    /// manifest (its shards not needed), any other input's from its canonical zTensor 2
    /// conversion. An object's is its bytes', as the same file's is.
    ///
    /// # Errors
    /// As [`content_id`].
    #[cfg(feature = "v2")]
    pub fn content_id(
        mut self,
        options: &OpenOptions,
        algorithm: ztensor_v2::IdAlgorithm,
    ) -> Result<String, OpenError> {
        if self.kind == Kind::Zt2 {
            let max = options.options.limits.max_manifest_len;
            let file = ztensor_v2::File::open(self.take_place()?, max).map_err(OpenError::Zt2)?;
            return file.content_digest(algorithm).map_err(OpenError::Zt2);
        }
        let name = self.path.clone();
        // As its zTensor 2 conversion reads it.
        let options = &OpenOptions { zt2_layouts: true, ..options.clone() };
        let opened = self.open(options)?.within_budget(Some(&name), options)?;
        ztensor_v2::content_digest(opened.source(), algorithm).map_err(OpenError::Zt2)
    }

    /// The zTensor file (0.1, 1.x) as its own reader: for a command that reads zTensor only,
    /// after telling the input is one. Its source is a [`Place`], so a file and an object of
    /// the same bytes are one reader.
    ///
    /// # Errors
    /// The reader's error: a broken rule (a cut-short file says so), a failed read.
    pub fn open_zt(&mut self, options: &OpenOptions) -> Result<Reader<Place>, ztensor_io::Error> {
        #[cfg(feature = "remote")]
        if let Some(object) = self.object.take() {
            self.len = Some(object.len());
            return Reader::new(Place::Object(object), &options.options);
        }
        let source = match self.source.take() {
            Some(source) => source.settle(&self.path)?,
            None => FileSource::open(&self.path)?,
        };
        self.len = Some(source.len());
        Reader::new(Place::File(source), &options.options)
    }

    /// The zTensor 2 file as its own reader, for what needs more than a tensor source
    /// (checking every shard's digest). Its shards, when its table lists any, are found
    /// beside it: a file's by their positional names, else by identity among the `.zt` files
    /// beside it ([`Resolver::default_for`](ztensor_v2::shards::Resolver::default_for)); an
    /// object's at their positional names among the objects beside it. Each shard's size and
    /// container are checked now, its whole-file digest by
    /// [`File::verify_shards`](ztensor_v2::File::verify_shards); a shard not found leaves its
    /// parts unreadable, saying where it was looked for.
    ///
    /// # Errors
    /// [`OpenError::Zt2`]: the file or a shard breaks a rule, or cannot be opened.
    #[cfg(feature = "v2")]
    pub fn open_zt2(
        &mut self,
        options: &OpenOptions,
    ) -> Result<ztensor_v2::File<Place>, OpenError> {
        #[cfg(feature = "remote")]
        if let Some(object) = self.object.take() {
            self.len = Some(object.len());
            return crate::remote::zt2_beside(object, options);
        }
        let source = self.take_source()?;
        zt2_of(Place::File(source), &self.path, options)
    }

    /// The sharded zTensor checkpoint whose index this is, as its own reader (for what needs
    /// the checkpoint itself, such as checking every shard's digest): its shards the files, or
    /// the objects, beside the index.
    ///
    /// # Errors
    /// [`OpenError::Shard`]: the index or a shard cannot be read, or breaks a rule.
    #[cfg(feature = "sharded")]
    pub fn open_zt_index(
        &mut self,
        options: &OpenOptions,
    ) -> Result<ztensor_shard::ShardedZtensor<Place>, OpenError> {
        #[cfg(feature = "remote")]
        if let Some(object) = self.object.take() {
            self.len = Some(object.len());
            return crate::remote::zt_index_beside(object, options);
        }
        let path = self.path.as_path();
        let index = ztensor_shard::ShardIndex::read(path).map_err(OpenError::Shard)?;
        ztensor_shard::ShardedZtensor::open_with(path, index, &options.options, |shard| {
            // Opened as an input is (a FIFO or device refused, never waited on).
            let file = ztensor_io::open_input(shard).map_err(ztensor_shard::Error::from)?;
            FileSource::new(file)
                .map(Place::File)
                .map_err(|e| ztensor_shard::Error::io("cannot stat", shard, &e))
        })
        .map_err(OpenError::Shard)
    }

    /// The TensorBuffers file as its own reader, strict when `options` say so: the outer
    /// error is I/O, the inner one a broken rule.
    ///
    /// # Errors
    /// [`OpenError::Zt`] when the file cannot be opened.
    #[cfg(feature = "tensorbuffers")]
    pub fn open_tb(
        &mut self,
        options: &OpenOptions,
    ) -> Result<Result<ztensor_tensorbuffers::TbFile<Place>, ztensor_tensorbuffers::Error>, OpenError>
    {
        let place = self.take_place()?;
        Ok(ztensor_tensorbuffers::TbFile::new(place, &tb_options(options)))
    }

    /// Its bytes: the descriptor it was told by (opened now for an index, told by its name),
    /// or the object.
    #[cfg(any(feature = "tensorbuffers", feature = "v2"))]
    fn take_place(&mut self) -> Result<Place, OpenError> {
        #[cfg(feature = "remote")]
        if let Some(object) = self.object.take() {
            self.len = Some(object.len());
            return Ok(Place::Object(object));
        }
        self.take_source().map(Place::File)
    }

    /// The descriptor it was told by (opened now for an index, told by its name).
    fn take_source(&mut self) -> Result<FileSource, OpenError> {
        let source = match self.source.take() {
            Some(source) => source,
            None => file_source(&self.path)?,
        };
        self.len = Some(source.len());
        Ok(source)
    }
}

/// The PyTorch Distributed Checkpoint at `path` (its directory, or its `.metadata`) as its
/// whole tensors: its chunks (each a `torch.save` archive in a data file) stitched by their
/// offsets. With the bytes of its data files and their paths.
#[cfg(all(feature = "torch", feature = "sharded"))]
fn open_dcp(path: &Path) -> Result<(Opened, u64, Vec<std::path::PathBuf>), OpenError> {
    use ztensor_foreign::dcp::{DcpChunks, read_dir_layout};
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    };
    let layout = read_dir_layout(dir).map_err(OpenError::Foreign)?;
    let chunks = DcpChunks::<FileSource>::open_dir(&layout, dir)
        .map_err(|e| OpenError::Foreign(e.with_path(dir)))?;
    // The data files, in the order chunks first name them (a set beside, so that many chunks
    // in few files cost one lookup each).
    let mut data: Vec<std::path::PathBuf> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stitched = ztensor_shard::Chunked { tensors: Vec::new(), other: layout.other.clone() };
    for t in &layout.tensors {
        let chunks = t
            .chunks
            .iter()
            .map(|c| {
                if seen.insert(c.file.as_str()) {
                    data.push(dir.join(&c.file));
                }
                ztensor_shard::Chunk {
                    object: c.object_name(t),
                    offsets: c.offsets.clone(),
                    sizes: c.sizes.clone(),
                }
            })
            .collect();
        stitched.tensors.push(ztensor_shard::ChunkedTensor {
            name: t.name.clone(),
            dtype: t.dtype.clone(),
            shape: t.shape.clone(),
            chunks,
        });
    }
    let bytes = data
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .fold(0, u64::saturating_add);
    let whole = ztensor_shard::Stitched::new(chunks, &stitched)
        .map_err(|e| OpenError::Shard(e.with_path(dir)))?;
    Ok((Opened::new(Kind::Dcp, whole), bytes, data))
}

/// The safetensors shards a Distributed Checkpoint saved in the directory `path` (through
/// DCP's `HuggingFaceStorageWriter`) as its whole tensors: each rank's chunks stitched by the
/// offsets its file records. With the shards' bytes and their paths.
#[cfg(all(feature = "safetensors", feature = "sharded"))]
fn open_dcp_shards(path: &Path) -> Result<(Opened, u64, Vec<std::path::PathBuf>), OpenError> {
    use ztensor_foreign::dcp_shards::DcpShards;
    let shards = DcpShards::open_dir(path).map_err(|e| OpenError::Foreign(e.with_path(path)))?;
    let data: Vec<std::path::PathBuf> = shards.file_names().map(|n| path.join(n)).collect();
    let bytes = data
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .fold(0, u64::saturating_add);
    let whole = stitch_dcp_shards(shards).map_err(|e| OpenError::Shard(e.with_path(path)))?;
    Ok((Opened::new(Kind::DcpSafetensors, whole), bytes, data))
}

/// The whole tensors of a Distributed Checkpoint's safetensors shards: the chunks `shards`
/// hold, stitched by their offsets after the checks every chunked checkpoint has (each chunk
/// in its tensor's bounds, of one dtype, the chunks tiling the tensor with no overlap and no
/// hole).
///
/// # Errors
/// [`ztensor_shard::ErrorKind::Chunks`], naming the tensor, for chunks that do not make it.
#[cfg(all(feature = "safetensors", feature = "sharded"))]
pub fn stitch_dcp_shards<S: ztensor_io::ReadAt>(
    shards: ztensor_foreign::dcp_shards::DcpShards<S>,
) -> Result<ztensor_shard::Stitched<ztensor_foreign::dcp_shards::DcpShards<S>>, ztensor_shard::Error>
{
    let layout = ztensor_shard::Chunked {
        tensors: shards
            .tensors()
            .iter()
            .map(|t| ztensor_shard::ChunkedTensor {
                name: t.name.clone(),
                dtype: t.dtype.clone(),
                shape: t.shape.clone(),
                chunks: t
                    .chunks
                    .iter()
                    .map(|c| ztensor_shard::Chunk {
                        object: c.object.clone(),
                        offsets: c.offsets.clone(),
                        sizes: c.sizes.clone(),
                    })
                    .collect(),
            })
            .collect(),
        other: Vec::new(),
    };
    ztensor_shard::Stitched::new(shards, &layout)
}

/// The size of the file at `path`.
fn file_len(path: &Path) -> Result<u64, OpenError> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| {
        OpenError::Zt(ztensor_io::Error::io("reading the size of", Some(path.to_path_buf()), e))
    })
}

/// How `options` read a TensorBuffers file: strictly when they say so.
#[cfg(feature = "tensorbuffers")]
fn tb_options(options: &OpenOptions) -> ztensor_tensorbuffers::ReadOptions {
    if options.options.strict {
        ztensor_tensorbuffers::ReadOptions::strict()
    } else {
        ztensor_tensorbuffers::ReadOptions::default()
    }
}

/// The zTensor 2 file read from `source` (the file at `path`), with its shards.
#[cfg(feature = "v2")]
fn zt2_of(
    source: Place,
    path: &Path,
    options: &OpenOptions,
) -> Result<ztensor_v2::File<Place>, OpenError> {
    let max = options.options.limits.max_manifest_len;
    let resolvers = ztensor_v2::shards::Resolver::default_for(path);
    ztensor_v2::File::open_resolved(source, max, &resolvers)
        .map(|file| file.with_limits(options.options.limits.clone()))
        .map_err(OpenError::Zt2)
}

/// The file at `path`, opened as ztensor-io opens inputs, for positional reads.
fn file_source(path: &Path) -> Result<FileSource, OpenError> {
    let file = ztensor_io::open_input(path).map_err(OpenError::Zt)?;
    FileSource::new(file)
        .map_err(|e| OpenError::Zt(ztensor_io::Error::io("opening", Some(path.to_path_buf()), e)))
}

/// As [`open`], with the formats that can be read in place (zTensor, safetensors, GGUF) read
/// from a memory map, so tensors can be borrowed from it ([`Opened::memory`]); the others as
/// [`open`] opens them.
///
/// # Errors
/// As [`open`].
///
/// # Safety
/// The file must not be truncated or changed while it is mapped (the contract of every memory
/// map): a change is undefined behaviour, not an error. Files written by ztensor are replaced by
/// rename, never changed in place.
pub unsafe fn open_mapped(path: &Path, options: &OpenOptions) -> Result<Opened, OpenError> {
    let mut detected = Detected::new(path)?;
    let kind = detected.kind;
    let mapped = |source: FileSource| {
        // SAFETY: forwarded to the caller.
        unsafe { source.into_mapped() }.map_err(|e| {
            OpenError::Zt(ztensor_io::Error::io("cannot map", Some(path.to_path_buf()), e))
        })
    };
    let opened = match kind {
        Kind::Zt => {
            let source = match detected.source.take() {
                Some(source) => source.settle(path).map_err(OpenError::Zt)?,
                None => FileSource::open(path).map_err(OpenError::Zt)?,
            };
            let reader = Reader::new(mapped(source)?, &options.options).map_err(OpenError::Zt)?;
            let memory = reader.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, reader) }
        }
        #[cfg(feature = "safetensors")]
        Kind::Safetensors => {
            let map = mapped(detected.take_source()?)?;
            let file = ztensor_foreign::safetensors::SafetensorsFile::new(map)
                .map_err(|e| OpenError::Foreign(e.with_path(path)))?
                .carry_unknown_dtypes(options.carry_unknown_dtypes);
            let memory = file.source().as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            Opened { memory, ..Opened::new(kind, file) }
        }
        #[cfg(feature = "gguf")]
        Kind::Gguf => {
            let map = mapped(detected.take_source()?)?;
            let memory = map.as_slice().map(|s| (s.as_ptr() as usize, s.len()));
            let gguf = ztensor_foreign::gguf::GgufFile::new(map)
                .map_err(|e| OpenError::Foreign(e.with_path(path)))?
                .with_blocks(options.gguf_blocks());
            Opened { memory, ..Opened::new(kind, gguf) }
        }
        _ => detected.open(options)?,
    };
    let input_len = match opened.memory {
        Some((_, len)) => u64::try_from(len).unwrap_or(u64::MAX),
        None => opened.input_len,
    };
    Opened { input_len, ..opened }.within_budget(Some(path), options)
}

/// Opens `bytes` of any format [`detect_bytes`](crate::detect_bytes) recognises (not a sharded checkpoint, nor a
/// zTensor 2 root with shards: several files); every format's tensors can be borrowed from
/// them ([`Opened::memory`]). Refused, as [`open`] refuses a file, when its objects decode to
/// more than the expansion budget allows for that many bytes.
///
/// # Errors
/// As [`open`]; [`ErrorKind::NeedsFiles`](crate::ErrorKind::NeedsFiles) for a zTensor 2 root with shards.
pub fn open_bytes(bytes: Vec<u8>, options: &OpenOptions) -> Result<Opened, OpenError> {
    // The vector's heap buffer does not move when the vector does.
    let memory = (bytes.as_ptr() as usize, bytes.len());
    let opened = open_read_at(bytes, None, options)?;
    Opened { memory: Some(memory), ..opened }.within_budget(None, options)
}
