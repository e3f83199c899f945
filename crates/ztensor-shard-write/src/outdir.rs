//! An output directory's state: what it holds of other checkpoints ([`Occupied`], removed only
//! under `--force`), and what the writes in progress put there, taken back when one fails or
//! the process is interrupted ([`interrupt`], [`OutputGuard`]).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use ztensor_io::{FileId, OutputDir};
use ztensor_shard::index::INDEX_SUFFIX;
use ztensor_shard::{Error, ErrorKind, Result, ShardIndex};

use crate::receipt::{MAX_RECEIPT_LEN, RECEIPTS_DIR, Receipt};

/// What the [`write_all`](crate::write_all) calls in progress have put in their output directories.
static WRITING: std::sync::LazyLock<std::sync::Mutex<HashMap<u64, Pending>>> =
    std::sync::LazyLock::new(Default::default);
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn writing() -> std::sync::MutexGuard<'static, HashMap<u64, Pending>> {
    WRITING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One output directory being written: its path, the entries put there at names nothing
/// held before, and the outermost directory made for it.
struct Pending {
    dir: PathBuf,
    names: Vec<String>,
    created: Option<PathBuf>,
}

impl Pending {
    fn undo(&self) {
        for name in &self.names {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        if let Some(top) = &self.created {
            // From the output up to the outermost directory made; one that holds anything
            // else is not removed (nor, then, those above it).
            for dir in self.dir.ancestors() {
                if std::fs::remove_dir(dir).is_err() || dir == top {
                    break;
                }
            }
        }
    }
}

/// A [`write_all`](crate::write_all) call's registration.
#[derive(Debug)]
pub(crate) struct Undo(u64);

impl Undo {
    pub(crate) fn register(dir: PathBuf, created: Option<PathBuf>) -> Undo {
        ztensor_io::on_interrupt("sharded outputs", || {
            interrupt();
            Vec::new()
        });
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        writing().insert(id, Pending { dir, names: Vec::new(), created });
        Undo(id)
    }

    /// Records `name` (under the output directory) before it is written, when nothing is at
    /// `file` in `dir` yet (what was there before is never removed).
    pub(crate) fn adding(&self, dir: &OutputDir, file: &str, name: &str) -> ztensor_io::Result<()> {
        if dir.open_file(file)?.is_none()
            && let Some(p) = writing().get_mut(&self.0)
        {
            p.names.push(name.to_owned());
        }
        Ok(())
    }

    pub(crate) fn keep(self) {
        writing().remove(&self.0);
    }

    pub(crate) fn run(self) {
        if let Some(p) = writing().remove(&self.0) {
            p.undo();
        }
    }
}

/// An output directory written by another writer than [`write_all`](crate::write_all) (a sharded zTensor 2
/// model): made when missing, and taken back as [`write_all`](crate::write_all) takes back its own when the
/// guard is dropped without [`OutputGuard::keep`] (a failure) or on [`interrupt`]: the files
/// [`OutputGuard::adding`] recorded are removed, and the directories made for the output when
/// nothing else was put in them.
#[derive(Debug)]
pub struct OutputGuard {
    dir: PathBuf,
    undo: Option<u64>,
}

impl OutputGuard {
    /// Makes `dir` (and the directories above it that are missing) and starts the guard.
    ///
    /// # Errors
    /// Those of creating the directories.
    pub fn create(dir: &Path) -> std::io::Result<OutputGuard> {
        let created = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
            .last()
            .map(Path::to_owned);
        let undo = Undo::register(dir.to_path_buf(), created);
        let guard = OutputGuard { dir: dir.to_path_buf(), undo: Some(undo.0) };
        std::fs::create_dir_all(dir)?;
        Ok(guard)
    }

    /// Records the file `name` in the directory as this output's, before it is written, when
    /// nothing is there yet (what was there before is never removed).
    pub fn adding(&self, name: &str) {
        if std::fs::symlink_metadata(self.dir.join(name)).is_err()
            && let Some(id) = self.undo
            && let Some(p) = writing().get_mut(&id)
        {
            p.names.push(name.to_owned());
        }
    }

    /// The output is complete: nothing is taken back.
    pub fn keep(mut self) {
        if let Some(id) = self.undo.take() {
            Undo(id).keep();
        }
    }
}

impl Drop for OutputGuard {
    fn drop(&mut self) {
        if let Some(id) = self.undo.take() {
            Undo(id).run();
        }
    }
}

/// Undoes every [`write_all`](crate::write_all) in progress, for a signal handler about to
/// exit: the shards and index written so far are removed, and the directories made for them
/// when empty. [`ztensor_io::interrupt`] calls it (each write adds it there as it begins),
/// after stopping the writes and removing their temporary files.
pub fn interrupt() {
    let pending: Vec<Pending> = writing().drain().map(|(_, p)| p).collect();
    for p in pending {
        p.undo();
    }
}

/// What an output directory holds of sharded checkpoints that a [`write_all`](crate::write_all) of a plan would
/// mix its own with: found by [`Plan::occupied`](crate::Plan::occupied), removed by [`Plan::clear`](crate::Plan::clear).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Occupied {
    /// Index files (`*.zt.index.json`), the plan's own name among them when it is there.
    pub indexes: Vec<String>,
    /// Shards an index or a receipt there names, and files at the plan's shard names.
    pub shards: Vec<String>,
    /// Receipts of `run` in [`RECEIPTS_DIR`].
    pub receipts: Vec<String>,
}

impl Occupied {
    /// What the directory `output` holds of sharded checkpoints: index files (`index`, the
    /// output's own name, among them when it is there), the shards they and the receipts of
    /// `run` name, files at `own_shards` (the output's shard names), and the receipts. A
    /// missing directory holds none.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] when one of them is one of `inputs` (clearing it would remove
    /// an input); I/O errors.
    pub fn in_dir(
        output: &Path,
        index: Option<&str>,
        own_shards: &[&str],
        inputs: &[&Path],
    ) -> Result<Occupied> {
        let mut found = Occupied::default();
        if FileId::of_path(output)?.is_none() {
            return Ok(found);
        }
        let out = OutputDir::open_existing(output)?;
        let names = std::fs::read_dir(output)
            .and_then(|entries| {
                entries
                    .map(|e| Ok(e?.file_name().into_string().ok()))
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .map_err(|e| Error::io("cannot list", output, &e))?;
        let mut names: Vec<String> = names.into_iter().flatten().collect();
        names.sort();
        let mut shards = BTreeSet::new();
        for name in names.iter().filter(|n| n.ends_with(INDEX_SUFFIX)) {
            if out.open_file(name)?.is_none() {
                continue;
            }
            found.indexes.push(name.clone());
            // An index that does not read is still one; its shards are not known.
            if let Ok(index) = ShardIndex::read(&out.join(name)) {
                shards.extend(index.shards.into_keys());
            }
        }
        if let Some(index) = index
            && !found.indexes.iter().any(|i| i == index)
            && out.open_file(index)?.is_some()
        {
            found.indexes.push(index.to_owned());
        }
        if let Some(receipts) = out.subdir_if_present(RECEIPTS_DIR)? {
            let listed = std::fs::read_dir(receipts.path())
                .and_then(|entries| {
                    entries
                        .map(|e| Ok(e?.file_name().into_string().ok()))
                        .collect::<std::io::Result<Vec<_>>>()
                })
                .map_err(|e| Error::io("cannot list", receipts.path(), &e))?;
            let mut listed: Vec<String> = listed
                .into_iter()
                .flatten()
                .filter(|n| n.starts_with("unit-") && n.ends_with(".json"))
                .collect();
            listed.sort();
            for name in listed {
                let Some(bytes) = receipts.read(&name, MAX_RECEIPT_LEN)? else { continue };
                if let Ok(r) = serde_json::from_slice::<Receipt>(&bytes)
                    && ztensor_io::weight_map::is_plain_name(&r.shard)
                {
                    shards.insert(r.shard);
                }
                found.receipts.push(name);
            }
        }
        shards.extend(own_shards.iter().map(|&s| s.to_owned()));
        for shard in shards {
            if ztensor_io::weight_map::is_plain_name(&shard) && out.open_file(&shard)?.is_some() {
                found.shards.push(shard);
            }
        }
        let inputs = {
            let mut by_id = HashMap::with_capacity(inputs.len());
            for &path in inputs {
                if let Some(id) = FileId::of_path(path)? {
                    by_id.insert(id, path);
                }
            }
            by_id
        };
        for name in found.indexes.iter().chain(&found.shards) {
            let path = out.join(name);
            if let Some(input) = FileId::of_path(&path)?.and_then(|id| inputs.get(&id)) {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    format!(
                        "{} belongs to a sharded checkpoint there and is also the input {}; \
                         clearing the directory would remove it (choose another output \
                         directory)",
                        path.display(),
                        input.display()
                    ),
                ));
            }
        }
        Ok(found)
    }

    /// Removes what [`Occupied::in_dir`] found in `output`: the indexes first (so that what is
    /// left is never a checkpoint missing shards), then the shards, then the receipts and
    /// their directory when that is left empty. Entries are removed themselves, never what a
    /// link names.
    ///
    /// # Errors
    /// I/O errors.
    pub fn clear(&self, output: &Path) -> Result<()> {
        let out = OutputDir::open_existing(output)?;
        for name in self.indexes.iter().chain(&self.shards) {
            out.remove(name)?;
        }
        if let Some(receipts) = out.subdir_if_present(RECEIPTS_DIR)? {
            for name in &self.receipts {
                receipts.remove(name)?;
            }
            // Left where it holds anything else.
            let _ = std::fs::remove_dir(out.join(RECEIPTS_DIR));
        }
        Ok(())
    }

    /// Whether the directory holds none.
    pub fn is_empty(&self) -> bool {
        self.indexes.is_empty() && self.shards.is_empty() && self.receipts.is_empty()
    }

    /// Every entry, as a path relative to the directory: indexes, shards, then receipts.
    pub fn names(&self) -> Vec<String> {
        let receipts = self.receipts.iter().map(|r| format!("{RECEIPTS_DIR}/{r}"));
        self.indexes.iter().chain(&self.shards).cloned().chain(receipts).collect()
    }
}
