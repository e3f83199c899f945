//! A sharded zTensor checkpoint read as one tensor source.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ztensor_format::Options;
use ztensor_io::{FileSource, ObjectData, ObjectInfo, RawRange, ReadAt, Reader, TensorSource};

use crate::error::{Error, ErrorKind, Result};
use crate::index::ShardIndex;

/// A sharded zTensor checkpoint whose index and shards agree: every shard has the size the
/// index records, every object is in the shard the index names and in no other, every listed
/// object is present, and the shards' file attributes are the same.
///
/// Its shards are files ([`ShardedZtensor::open`]), or any byte sources found beside the index
/// ([`ShardedZtensor::open_with`]: objects in a bucket, say).
#[derive(Debug)]
pub struct ShardedZtensor<S: ReadAt = FileSource> {
    index_path: PathBuf,
    index: ShardIndex,
    shards: Vec<(PathBuf, Reader<S>)>,
    /// The source index of each shard's first object.
    starts: Vec<usize>,
    len: usize,
}

fn mismatch(message: String, path: &Path) -> Error {
    Error::new(ErrorKind::IndexMismatch, message).with_path(path)
}

impl ShardedZtensor {
    /// Reads the index at `path` and opens every shard beside it with `options`.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a malformed index, [`ErrorKind::IndexMismatch`] when index
    /// and shards disagree, [`ErrorKind::ZTensor`] for a shard that is not a valid zTensor file
    /// (naming it), and I/O errors.
    pub fn open(path: &Path, options: &Options) -> Result<ShardedZtensor> {
        let index = ShardIndex::read(path)?;
        ShardedZtensor::open_with(path, index, options, |shard| {
            // Opened as an input is (a FIFO or device refused, never waited on).
            let file = ztensor_io::open_input(shard).map_err(Error::from)?;
            FileSource::new(file).map_err(|e| Error::io("cannot stat", shard, &e))
        })
    }
}

impl<S: ReadAt> ShardedZtensor<S> {
    /// The checkpoint of `index` (read from `path`), each shard opened by `open_shard` at its
    /// path beside the index (for an index in a bucket, the object beside it) and checked as
    /// [`ShardedZtensor::open`] checks files.
    ///
    /// # Errors
    /// As [`ShardedZtensor::open`].
    pub fn open_with(
        path: &Path,
        index: ShardIndex,
        options: &Options,
        mut open_shard: impl FnMut(&Path) -> Result<S>,
    ) -> Result<ShardedZtensor<S>> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut shards = Vec::with_capacity(index.shards.len());
        let mut seen: HashMap<String, &str> = HashMap::new();
        let mut attributes: Option<(Option<ztensor_format::Attributes>, &str)> = None;
        let (mut starts, mut len) = (Vec::new(), 0usize);
        for (name, entry) in &index.shards {
            let shard = dir.join(name);
            // Opened before its size is compared.
            let source = open_shard(&shard).map_err(|e| {
                let listed = index.weight_map.values().filter(|s| *s == name).count();
                let message = format!(
                    "shard {name:?} (the index lists {listed} tensor(s) in it): {}",
                    e.message()
                );
                e.reworded(message).with_path(&shard)
            })?;
            let size = source.len();
            if size != entry.size {
                return Err(mismatch(
                    format!(
                        "shard {name} is {size} bytes; the index records {} (not the shard it was written with)",
                        entry.size
                    ),
                    path,
                ));
            }
            let reader =
                Reader::new(source, options).map_err(|e| Error::from(e).with_path(&shard))?;
            for object in reader.objects() {
                let object_name = object.name();
                if let Some(first) = seen.insert(object_name.to_owned(), name) {
                    return Err(mismatch(
                        format!("object {object_name:?} is in both {first} and {name}"),
                        path,
                    ));
                }
                match index.weight_map.get(object_name) {
                    Some(listed) if listed == name => {}
                    Some(listed) => {
                        return Err(mismatch(
                            format!(
                                "object {object_name:?} is listed in {listed} but stored in {name}"
                            ),
                            path,
                        ));
                    }
                    None => {
                        return Err(mismatch(
                            format!("object {object_name:?} in {name} is not listed in the index"),
                            path,
                        ));
                    }
                }
            }
            let own = reader.manifest().manifest().attributes.clone();
            match &attributes {
                Some((first, first_name)) if *first != own => {
                    return Err(mismatch(
                        format!("shards {first_name} and {name} have different file attributes"),
                        path,
                    ));
                }
                Some(_) => {}
                None => attributes = Some((own, name)),
            }
            starts.push(len);
            len += TensorSource::len(&reader);
            shards.push((shard, reader));
        }
        if let Some((object, shard)) = index.weight_map.iter().find(|(o, _)| !seen.contains_key(*o))
        {
            return Err(mismatch(
                format!("object {object:?} is listed in {shard} but not stored there"),
                path,
            ));
        }
        Ok(ShardedZtensor { index_path: path.to_owned(), index, shards, starts, len })
    }

    /// The index's path.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The index.
    pub fn index(&self) -> &ShardIndex {
        &self.index
    }

    /// The shards, in file-name order, with their paths.
    pub fn shards(&self) -> &[(PathBuf, Reader<S>)] {
        &self.shards
    }

    /// Hashes every shard and compares it with the digest the index records.
    ///
    /// # Errors
    /// [`ErrorKind::IndexMismatch`] naming the first shard that differs, and I/O errors.
    pub fn verify_digests(&self) -> Result<()> {
        for ((path, reader), (name, entry)) in self.shards.iter().zip(&self.index.shards) {
            let digest = crate::digest::digest_source(reader.source(), path)?;
            if digest != entry.digest {
                return Err(mismatch(
                    format!("shard {name} has digest {digest}; the index records {}", entry.digest),
                    &self.index_path,
                ));
            }
        }
        Ok(())
    }

    fn locate(&self, index: usize) -> Option<(&Path, &Reader<S>, usize)> {
        let shard = self.starts.partition_point(|&s| s <= index).checked_sub(1)?;
        let (path, reader) = self.shards.get(shard)?;
        let i = index - self.starts[shard];
        (i < TensorSource::len(reader)).then_some((path.as_path(), reader, i))
    }
}

/// Every object of every shard, shard by shard in file-name order, each in its file's order;
/// each object's location is its shard's file name.
impl<S: ReadAt> TensorSource for ShardedZtensor<S> {
    fn format_name(&self) -> Cow<'_, str> {
        let version = self.shards.first().map_or("".into(), |(_, r)| format!("{} ", r.version()));
        Cow::Owned(format!("sharded zTensor {version}({} shards)", self.shards.len()))
    }

    fn attributes(&self) -> Option<Cow<'_, ztensor_format::Attributes>> {
        self.shards.first().and_then(|(_, r)| r.attributes())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn info(&self, index: usize) -> Option<ObjectInfo<'_>> {
        let (path, reader, i) = self.locate(index)?;
        let mut info = reader.info(i)?;
        info.location = path.file_name().and_then(|n| n.to_str()).map(Cow::Borrowed);
        Some(info)
    }

    fn name(&self, index: usize) -> Option<Cow<'_, str>> {
        let (_, reader, i) = self.locate(index)?;
        reader.name(i)
    }

    fn find(&self, name: &str) -> Option<usize> {
        let shard = self.index.weight_map.get(name)?;
        // `shards` holds the index's shards in its (sorted) order.
        let at = self.shards.binary_search_by(|(p, _)| {
            p.file_name().and_then(|n| n.to_str()).unwrap_or_default().cmp(shard.as_str())
        });
        let at = at.ok()?;
        Some(self.starts[at] + self.shards[at].1.find(name)?)
    }

    fn read(&self, index: usize) -> ztensor_io::Result<ObjectData<'_>> {
        let (_, reader, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        reader.read(i)
    }

    fn read_pieces(
        &self,
        index: usize,
        piece: usize,
        each: &mut dyn FnMut(&str, &[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let (_, reader, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        reader.read_pieces(i, piece, each)
    }

    fn read_part(
        &self,
        index: usize,
        role: &str,
        piece: usize,
        each: &mut dyn FnMut(&[u8]) -> ztensor_io::Result<()>,
    ) -> ztensor_io::Result<()> {
        let (_, reader, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        reader.read_part(i, role, piece, each)
    }

    fn reads_in_pieces(&self, index: usize) -> bool {
        self.locate(index).is_some_and(|(_, reader, i)| reader.reads_in_pieces(i))
    }

    fn verify(&self, index: usize) -> ztensor_io::Result<Vec<ztensor_io::Decoded>> {
        let (_, reader, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        reader.verify(i)
    }

    fn check(&self, index: usize, data: &ObjectData<'_>) -> ztensor_io::Result<()> {
        let (_, reader, i) = self
            .locate(index)
            .ok_or_else(|| ztensor_io::Error::not_found(&format!("#{index}"), None))?;
        reader.check(i, data)
    }

    fn raw(&self, index: usize) -> Option<RawRange<'_>> {
        let (_, reader, i) = self.locate(index)?;
        reader.raw(i)
    }

    fn stored_ranges(&self, index: usize) -> Option<ztensor_io::StoredRanges<'_>> {
        let (_, reader, i) = self.locate(index)?;
        reader.stored_ranges(i)
    }
}
