//! Finding a sharded file's shards (`spec/ztensor-2.md` §6.2). A shard's name is a label, not
//! a path: a [`Resolver`] turns the name and the root's table entry (exact size, whole-file
//! digest) into a file, and [`File::open_sharded`](crate::File::open_sharded) then checks that
//! the file is the one the table means (its size and container at open, its digest when
//! verified).
//!
//! The three conventions the reference implements are here: positional names beside the root
//! (`model.zt` → `model-00001-of-00002.zt`), a content-addressed store
//! (`STORE/blobs/ALGO/HEX`) and a directory scanned for a file of the right size and digest,
//! which survives renames. [`Resolver::default_for`] tries the positional name, then the root's
//! directory by identity.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ztensor_io::{FileSource, ReadAt};

use crate::error::{Error, Result};
use crate::manifest::Shard;

/// One way of finding a shard file.
#[derive(Debug)]
pub enum Resolver {
    /// The positional convention: root `DIR/STEM.zt`, shard `N` at `DIR/STEM-N.zt`.
    Positional {
        /// The root file's path.
        root: PathBuf,
    },
    /// A content-addressed store: a shard with digest `ALGO:HEX` at `STORE/blobs/ALGO/HEX`.
    ContentAddressed {
        /// The store's directory.
        store: PathBuf,
    },
    /// The `.zt` files directly in a directory, matched by exact size and whole-file digest.
    Directory(DirectoryIndex),
}

impl Resolver {
    /// The positional convention for the root at `root`.
    pub fn positional(root: impl Into<PathBuf>) -> Resolver {
        Resolver::Positional { root: root.into() }
    }

    /// The content-addressed store at `store`.
    pub fn content_addressed(store: impl Into<PathBuf>) -> Resolver {
        Resolver::ContentAddressed { store: store.into() }
    }

    /// The directory `dir`, listed now (only sizes; a file is hashed when a shard of its size
    /// is looked for, once whatever the number of shards of that size).
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn directory(dir: impl AsRef<Path>) -> Result<Resolver> {
        Ok(Resolver::Directory(DirectoryIndex::scan(dir.as_ref())?))
    }

    /// What a root at `root` is opened with when nothing else is said: its shards by their
    /// positional names, then by identity among the `.zt` files beside it (listed only if a
    /// positional name is missing).
    pub fn default_for(root: &Path) -> Vec<Resolver> {
        let dir = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        vec![Resolver::positional(root), Resolver::Directory(DirectoryIndex::lazy(dir))]
    }

    /// The path where this resolver finds shard `name` of the table entry `shard`; `None`
    /// where it has no such file (the reason in the second value, for messages).
    ///
    /// # Errors
    /// A directory that cannot be listed; a candidate that cannot be read while it is hashed.
    pub fn locate(
        &self,
        name: &str,
        shard: &Shard,
    ) -> Result<std::result::Result<PathBuf, String>> {
        self.locate_within(name, shard, crate::MAX_MANIFEST)
    }

    /// As [`Resolver::locate`], reading no candidate's manifest longer than `max_manifest`.
    ///
    /// # Errors
    /// As [`Resolver::locate`].
    pub fn locate_within(
        &self,
        name: &str,
        shard: &Shard,
        max_manifest: u64,
    ) -> Result<std::result::Result<PathBuf, String>> {
        let exists = |path: PathBuf, how: &str| match std::fs::metadata(&path) {
            Ok(_) => Ok(Ok(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Err(format!("no {} at {}", how, path.display())))
            }
            Err(e) => {
                Err(Error::io(&format!("looking for shard {name:?} at {}", path.display()), e))
            }
        };
        match self {
            Resolver::Positional { root } => exists(positional_path(root, name), "positional name"),
            Resolver::ContentAddressed { store } => {
                let Some((algorithm, hex)) = shard.digest.split_once(':') else {
                    return Ok(Err(format!("digest {:?} names no algorithm", shard.digest)));
                };
                exists(store.join("blobs").join(algorithm).join(hex), "store entry")
            }
            Resolver::Directory(index) => index.find(name, shard, max_manifest),
        }
    }
}

/// Where the positional convention puts shard `name` of the root at `root`.
pub fn positional_path(root: &Path, name: &str) -> PathBuf {
    let stem = root.file_stem().map_or_else(|| "model".into(), |s| s.to_string_lossy());
    root.with_file_name(format!("{stem}-{name}.zt"))
}

/// The `.zt` files of one directory by size, each hashed at most once per algorithm.
#[derive(Debug)]
pub struct DirectoryIndex {
    dir: PathBuf,
    /// Listed on first use: sizes to the regular `.zt` files of that size, sorted.
    by_size: Mutex<Option<BTreeMap<u64, Vec<PathBuf>>>>,
    /// `(size, algorithm)` to the digests of the candidates of that size.
    digests: Mutex<HashMap<(u64, String), BTreeMap<String, PathBuf>>>,
}

impl DirectoryIndex {
    fn lazy(dir: PathBuf) -> DirectoryIndex {
        DirectoryIndex { dir, by_size: Mutex::new(None), digests: Mutex::default() }
    }

    fn scan(dir: &Path) -> Result<DirectoryIndex> {
        let index = DirectoryIndex::lazy(dir.to_path_buf());
        index.listed(|_| ())?;
        Ok(index)
    }

    /// Calls `f` with the listing, making it first if need be. Only regular files (links
    /// followed) named `*.zt` are kept: a FIFO or device planted beside the root is never
    /// opened.
    fn listed<T>(&self, f: impl FnOnce(&BTreeMap<u64, Vec<PathBuf>>) -> T) -> Result<T> {
        let mut listing = self.by_size.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if listing.is_none() {
            let mut by_size: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
            let read = std::fs::read_dir(&self.dir)
                .map_err(|e| Error::io(&format!("listing {}", self.dir.display()), e))?;
            for entry in read {
                let entry =
                    entry.map_err(|e| Error::io(&format!("listing {}", self.dir.display()), e))?;
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "zt") {
                    continue;
                }
                if let Ok(meta) = std::fs::metadata(&path)
                    && meta.is_file()
                {
                    by_size.entry(meta.len()).or_default().push(path);
                }
            }
            for paths in by_size.values_mut() {
                paths.sort();
            }
            *listing = Some(by_size);
        }
        Ok(f(listing.as_ref().unwrap_or(&BTreeMap::new())))
    }

    fn find(
        &self,
        name: &str,
        shard: &Shard,
        max_manifest: u64,
    ) -> Result<std::result::Result<PathBuf, String>> {
        let Some((algorithm, _)) = shard.digest.split_once(':') else {
            return Ok(Err(format!("digest {:?} names no algorithm", shard.digest)));
        };
        // Checked before any candidate is opened: a table may name as many algorithms as it
        // has shards, and each would otherwise open (and parse) every file of the size again.
        if !computes(algorithm) {
            return Ok(Err(format!(
                "digest {:?}: no file in {} can be matched by a {algorithm} digest, which this \
                 reader does not compute (shard {name:?})",
                shard.digest,
                self.dir.display()
            )));
        }
        let mut digests = self.digests.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (shard.size, algorithm.to_owned());
        if !digests.contains_key(&key) {
            let candidates = self.listed(|by_size| by_size.get(&shard.size).cloned())?;
            let mut found = BTreeMap::new();
            for path in candidates.into_iter().flatten() {
                // A file that cannot be opened or is not a container is not a shard; a miss
                // is reported below with the identity looked for.
                let Ok(source) = open_file(&path) else { continue };
                if crate::open(&source, max_manifest).is_err() {
                    continue;
                }
                if let Some(digest) = whole_digest(&source, algorithm)? {
                    found.entry(digest).or_insert(path);
                }
            }
            digests.insert(key.clone(), found);
        }
        Ok(digests.get(&key).and_then(|d| d.get(&shard.digest)).cloned().ok_or_else(|| {
            format!(
                "no file of {} bytes with digest {} among the .zt files in {} (shard {name:?})",
                shard.size,
                shard.digest,
                self.dir.display()
            )
        }))
    }
}

/// The file at `path`, refused unless it is a regular file (links followed; a FIFO is never
/// waited on).
///
/// # Errors
/// As [`ztensor_io::open_input`].
pub fn open_file(path: &Path) -> Result<FileSource> {
    let opening = |e| Error::source(&format!("opening {}", path.display()), e);
    let file = ztensor_io::open_input(path).map_err(opening)?;
    FileSource::new(file).map_err(|e| Error::io(&format!("opening {}", path.display()), e))
}

/// Whether [`whole_digest`] computes digests of `algorithm`.
fn computes(algorithm: &str) -> bool {
    matches!(algorithm, "xxh3" | "sha256")
}

/// The digest of all of `source`'s bytes (`ALGO:HEX`) in `algorithm` (`xxh3` or `sha256`);
/// `None` for an algorithm this crate does not compute.
///
/// # Errors
/// The bytes cannot be read.
pub fn whole_digest(source: &impl ReadAt, algorithm: &str) -> Result<Option<String>> {
    use sha2::Digest as _;
    enum Hash {
        Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
        Sha256(sha2::Sha256),
    }
    let mut hash = match algorithm {
        "xxh3" => Hash::Xxh3(Box::default()),
        "sha256" => Hash::Sha256(sha2::Sha256::new()),
        _ => return Ok(None),
    };
    debug_assert!(computes(algorithm));
    let len = source.len();
    let mut buf = vec![0u8; usize::try_from(len.min(4 << 20)).unwrap_or(4 << 20)];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(buf.len() as u64);
        // At most the buffer's length, a usize.
        #[allow(clippy::cast_possible_truncation)]
        let chunk = &mut buf[..n as usize];
        source.read_exact_at(at, chunk).map_err(|e| Error::io("hashing a shard", e))?;
        match &mut hash {
            Hash::Xxh3(h) => h.update(chunk),
            Hash::Sha256(h) => h.update(&*chunk),
        }
        at += n;
    }
    Ok(Some(match hash {
        Hash::Xxh3(h) => format!("xxh3:{:016x}", h.digest()),
        Hash::Sha256(h) => {
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256:{hex}")
        }
    }))
}

impl crate::File<FileSource> {
    /// Opens the file at `path` with its shards ([`File::open_sharded`](crate::File::open_sharded)),
    /// each found by the first of `resolvers` that has a file for it
    /// ([`Resolver::default_for`] when nothing else is said). A shard none of them finds is
    /// missing: its parts cannot be read, and the reasons each resolver gave are kept for the
    /// message.
    ///
    /// # Errors
    /// As [`File::open_sharded`](crate::File::open_sharded); the root or a shard cannot be
    /// opened (not a regular file, I/O).
    pub fn open_path(
        path: &Path,
        max_manifest: u64,
        resolvers: &[Resolver],
    ) -> Result<crate::File<FileSource>> {
        crate::File::open_resolved(open_file(path)?, max_manifest, resolvers)
    }
}

impl<S: ReadAt + From<FileSource>> crate::File<S> {
    /// As [`File::open_path`](crate::File::open_path), for a root already opened: its
    /// bytes, or what holds them (each shard found is held the same way).
    ///
    /// # Errors
    /// As [`File::open_path`](crate::File::open_path).
    pub fn open_resolved(
        root: S,
        max_manifest: u64,
        resolvers: &[Resolver],
    ) -> Result<crate::File<S>> {
        let mut paths = BTreeMap::new();
        let mut file = crate::File::open_sharded(root, max_manifest, &mut |name, shard| {
            let mut misses = Vec::new();
            for resolver in resolvers {
                match resolver.locate_within(name, shard, max_manifest)? {
                    Ok(found) => {
                        let bytes =
                            open_file(&found).map_err(|e| e.within(&format!("shard {name:?}")))?;
                        paths.insert(name.to_owned(), found);
                        return Ok(crate::Located::At(S::from(bytes)));
                    }
                    Err(why) => misses.push(why),
                }
            }
            Ok(crate::Located::Missing(if misses.is_empty() {
                "no resolver was given".to_owned()
            } else {
                misses.join("; ")
            }))
        })?;
        file.shard_paths = paths;
        Ok(file)
    }
}
