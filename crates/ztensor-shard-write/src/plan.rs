//! Sharded output, and its split into units of work for schedulers.
//!
//! A [`Plan`] lists, for one input and one set of options, the output shards (one unit each)
//! and the objects each holds. [`run_unit`](crate::run_unit) writes one shard (atomically) and
//! a receipt; [`finalize`](crate::finalize) checks every receipt and shard and writes the
//! index. [`write_all`](crate::write_all) does all of it in one process, through the very same
//! code, so the shards and index are byte-identical to a distributed run's.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use ztensor_format::{DigestAlgorithm, Version};
use ztensor_io::{Compression, FileId, TensorSource, WriteOptions};

use ztensor_shard::digest::hex;
use ztensor_shard::index::{INDEX_SUFFIX, MAX_INDEX_LEN};
use ztensor_shard::{Error, ErrorKind, Result};

use crate::outdir::Occupied;
use crate::receipt::{RECEIPTS_DIR, receipt_name};

/// The plan format this crate writes and reads.
pub const PLAN_FORMAT: u32 = 1;

/// How every shard is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanOptions {
    /// The zTensor version: `0.1`, `1.1` or `1.2`.
    pub version: String,
    /// `raw`, or `zstd-LEVEL`.
    pub compression: String,
    /// `crc32c`, `sha256`, `blake3`, or `None` for no digests.
    pub digest: Option<String>,
    /// Leave out attributes (file and object) the target cannot hold.
    pub drop_attributes: bool,
    /// Carry safetensors tensors of dtypes zTensor lacks as bytes (the input is opened so).
    pub carry_unknown_dtypes: bool,
    /// With zstd, store raw the components zstd does not make smaller
    /// ([`WriteOptions::raw_if_not_smaller`]); absent in plans written before it existed.
    #[serde(default)]
    pub raw_if_not_smaller: bool,
}

impl PlanOptions {
    /// Options for `version`, compression and digest as the writer takes them.
    pub fn new(version: Version, options: &WriteOptions) -> PlanOptions {
        PlanOptions {
            version: version.to_string(),
            compression: match options.compression {
                Compression::Raw => "raw".into(),
                Compression::Zstd(level) => format!("zstd-{level}"),
            },
            digest: options.digest.as_ref().map(|d| d.name().to_owned()),
            drop_attributes: false,
            carry_unknown_dtypes: false,
            raw_if_not_smaller: options.raw_if_not_smaller,
        }
    }

    /// The version to write.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for one this crate does not write.
    pub fn version(&self) -> Result<Version> {
        match self.version.as_str() {
            "0.1" => Ok(Version::V0_1),
            "1.1" => Ok(Version::V1_1),
            "1.2" => Ok(Version::V1_2),
            v => Err(Error::new(ErrorKind::Malformed, format!("plan: version {v:?}"))),
        }
    }

    /// The writer's options.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for a compression or digest this crate does not know.
    pub fn write_options(&self) -> Result<WriteOptions> {
        let mut options = match self.compression.as_str() {
            "raw" => WriteOptions::raw(),
            other => match other.strip_prefix("zstd-").and_then(|l| l.parse::<i32>().ok()) {
                Some(level) if (1..=22).contains(&level) => WriteOptions::zstd(level),
                _ => {
                    return Err(Error::new(
                        ErrorKind::Malformed,
                        format!("plan: compression {other:?}"),
                    ));
                }
            },
        };
        if let Some(d) = &self.digest {
            let algorithm = match d.as_str() {
                "crc32c" => DigestAlgorithm::Crc32c,
                "sha256" => DigestAlgorithm::Sha256,
                "blake3" => DigestAlgorithm::Blake3,
                _ => return Err(Error::new(ErrorKind::Malformed, format!("plan: digest {d:?}"))),
            };
            options = options.with_digest(algorithm);
        }
        options.raw_if_not_smaller = self.raw_if_not_smaller;
        Ok(options)
    }
}

/// An input file and its size when the plan was made (a unit refuses to run on a file that
/// has changed size since).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// The file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub size: u64,
}

/// One unit of work: one output shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unit {
    /// Its number, `0..units`.
    pub unit: usize,
    /// The shard's file name in the output directory.
    pub shard: String,
    /// The objects it holds, in input order.
    pub objects: Vec<String>,
    /// Their decoded bytes.
    pub bytes: u64,
}

/// Everything needed to write a sharded checkpoint, unit by unit, on any machine that sees
/// the same paths. The same input and options always give the same plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_FORMAT`].
    pub plan: u32,
    /// The input (a file, or a sharded checkpoint's index), absolute.
    pub input: PathBuf,
    /// The files read, with their sizes.
    pub inputs: Vec<InputFile>,
    /// The output directory, absolute.
    pub output: PathBuf,
    /// The index's file name in the output directory.
    pub index: String,
    /// How shards are written.
    pub options: PlanOptions,
    /// One per output shard.
    pub units: Vec<Unit>,
}

/// How the output is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// One shard per input shard (one for a single-file input).
    LikeInput,
    /// Shards of at most this many decoded bytes (a larger object gets a shard of its own).
    Size(u64),
}

/// `path` made absolute, without a trailing separator (`out/` and `out` plan alike).
fn absolute(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).map_err(|e| Error::io("cannot resolve", path, &e))?;
    Ok(absolute.components().collect())
}

/// Whether `path` is a URL (`s3://…`, `gs://…`) rather than a local path, by the rule the
/// object-store client uses (a scheme of a letter, then letters, digits, `+`, `-` or `.`):
/// outputs there are written through a [`Destination`](crate::Destination).
pub(crate) fn is_url(path: &Path) -> bool {
    let Some((scheme, _)) = path.to_str().and_then(|s| s.split_once("://")) else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The name shards and index are called after: the input's file name without its format's
/// extension (`model` for `model.safetensors`, `model.safetensors.index.json`, `model.zt`).
pub fn output_stem(input: &Path) -> String {
    let name = input.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    for suffix in [".safetensors.index.json", INDEX_SUFFIX, ".safetensors", ".zt", ".tb"] {
        if let Some(s) = name.strip_suffix(suffix).filter(|s| !s.is_empty()) {
            return s.to_owned();
        }
    }
    Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or("model").to_owned()
}

/// The zTensor name of an input shard: its extension replaced by `.zt`.
fn shard_name(location: &str) -> String {
    let stem = location
        .strip_suffix(".safetensors")
        .or_else(|| location.strip_suffix(".zt"))
        .or_else(|| location.strip_suffix(".tb"))
        .unwrap_or(location);
    format!("{stem}.zt")
}

/// Plans writing `source` (opened from `input`) into `output` as a sharded checkpoint, leaving
/// out the objects `exclude` returns true for.
///
/// # Errors
/// [`ErrorKind::Malformed`] for an input with two objects of one name (an index maps names to
/// shards) or nothing to write, and I/O errors.
pub fn plan(
    input: &Path,
    source: &dyn TensorSource,
    output: &Path,
    options: PlanOptions,
    split: Split,
    exclude: &dyn Fn(&str) -> bool,
) -> Result<Plan> {
    options.version()?;
    options.write_options()?;
    // An object in a bucket is kept as given (`s3://bucket/model.zt`), as is a prefix.
    let input = if is_url(input) { input.to_path_buf() } else { absolute(input)? };
    let output = if is_url(output) { output.to_path_buf() } else { absolute(output)? };
    let stem = output_stem(&input);
    // Objects in order: name, decoded bytes, input shard.
    let mut objects: Vec<(String, u64, Option<Rc<str>>)> = Vec::with_capacity(source.len());
    for i in 0..source.len() {
        let Some(info) = source.info(i) else { continue };
        if exclude(&info.name) {
            continue;
        }
        let bytes = info.components.iter().map(|c| c.decoded_len.unwrap_or(c.stored_len)).sum();
        // An input shard's name, shared by the objects in it (they come one shard after
        // another): one allocation a shard, not one an object.
        let location = match (info.location, objects.last()) {
            (Some(l), Some((_, _, Some(last)))) if **last == *l => Some(Rc::clone(last)),
            (l, _) => l.map(|l| Rc::from(&*l)),
        };
        objects.push((info.name.into_owned(), bytes, location));
    }
    // A name given twice: the first object whose name an earlier one had, found by sorting
    // (a set of the names would hold a copy of each).
    let mut by_name: Vec<usize> = (0..objects.len()).collect();
    by_name.sort_by(|&a, &b| objects[a].0.cmp(&objects[b].0));
    let twice = by_name.windows(2).filter(|w| objects[w[0]].0 == objects[w[1]].0);
    if let Some(second) = twice.map(|w| w[0].max(w[1])).min() {
        return Err(Error::new(
            ErrorKind::Malformed,
            format!("two objects are called {:?}: a sharded checkpoint's index maps each name to one shard", objects[second].0),
        )
        .with_path(&input));
    }
    drop(by_name);
    if objects.is_empty() {
        return Err(Error::new(ErrorKind::Malformed, "no objects to write").with_path(&input));
    }
    // Output shards: the input shard they come from (when split like the input), and their
    // objects with their decoded bytes.
    type Group = (Option<Rc<str>>, Vec<(String, u64)>);
    let mut groups: Vec<Group> = Vec::new();
    match split {
        Split::LikeInput => {
            for (name, bytes, location) in objects {
                match groups.last_mut() {
                    Some((l, members)) if *l == location => members.push((name, bytes)),
                    _ => groups.push((location, vec![(name, bytes)])),
                }
            }
        }
        Split::Size(limit) => {
            let ranges = ztensor_io::split_by_size(objects.iter().map(|&(_, b, _)| b), limit);
            let mut objects = objects.into_iter();
            for range in ranges {
                let members = objects.by_ref().take(range.len()).map(|(n, b, _)| (n, b));
                groups.push((None, members.collect()));
            }
        }
    }
    let count = groups.len();
    let units: Vec<Unit> = groups
        .into_iter()
        .enumerate()
        .map(|(unit, (location, members))| {
            let shard = match (&location, split) {
                (Some(l), Split::LikeInput) => shard_name(l),
                (None, Split::LikeInput) => format!("{stem}.zt"),
                _ => format!("{stem}-{}.zt", ztensor_io::shard_label(unit + 1, count)),
            };
            Unit {
                unit,
                shard,
                bytes: members.iter().fold(0u64, |sum, (_, b)| sum.saturating_add(*b)),
                objects: members.into_iter().map(|(n, _)| n).collect(),
            }
        })
        .collect();
    let mut shards = HashSet::new();
    if let Some(twice) = units.iter().find(|u| !shards.insert(u.shard.as_str())) {
        return Err(Error::new(
            ErrorKind::Malformed,
            format!("two output shards would be called {:?}", twice.shard),
        ));
    }
    // The files read: the input, and for sharded inputs every shard beside it.
    let mut inputs = vec![input.clone()];
    let dir = input.parent().map(Path::to_owned).unwrap_or_default();
    let mut locations: Vec<String> = (0..source.len())
        .filter_map(|i| source.info(i)?.location.map(|l| l.into_owned()))
        .collect();
    locations.sort();
    locations.dedup();
    inputs.extend(locations.into_iter().map(|l| dir.join(l)));
    // Objects in a bucket are sized by the caller, which reaches them ([`Plan::inputs`] takes
    // them, and [`Plan::check_inputs`] leaves them to it); local files are sized here.
    let inputs = inputs
        .into_iter()
        .filter(|path| !is_url(path))
        .map(|path| {
            let size =
                std::fs::metadata(&path).map_err(|e| Error::io("cannot read", &path, &e))?.len();
            Ok(InputFile { path, size })
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = Plan {
        plan: PLAN_FORMAT,
        input,
        inputs,
        output,
        index: format!("{stem}{INDEX_SUFFIX}"),
        options,
        units,
    };
    plan.check_not_over_inputs()?;
    Ok(plan)
}

impl Plan {
    /// The plan as JSON (deterministic).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// `sha256:` and the SHA-256 of [`Plan::to_json`]: what receipts are tied to (hashed as
    /// it is serialized, not made first: a plan may name a million objects).
    pub fn digest(&self) -> String {
        struct Hashing(Sha256);
        impl Write for Hashing {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.update(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut hashing = Hashing(Sha256::new());
        // As `to_json`, which gives an empty text where serialization fails (it cannot here).
        if serde_json::to_writer_pretty(&mut hashing, self).is_err() {
            return format!("sha256:{}", hex(&Sha256::digest(b"")));
        }
        hashing.0.update(b"\n");
        format!("sha256:{}", hex(&hashing.0.finalize()))
    }

    /// Reads a plan file.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] for anything but a plan of [`PLAN_FORMAT`] whose units are
    /// numbered in order with plain shard names; I/O errors.
    pub fn read(path: &Path) -> Result<Plan> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        let len = std::fs::metadata(path).map_err(|e| Error::io("cannot open", path, &e))?.len();
        if len > MAX_INDEX_LEN {
            return Err(malformed(format!("plan of {len} bytes, over the limit")));
        }
        let bytes = ztensor_io::read_input(path, MAX_INDEX_LEN)?;
        Plan::from_json(&bytes, path)
    }

    /// The longest plan read, in bytes.
    pub const MAX_LEN: u64 = MAX_INDEX_LEN;

    /// A plan from the bytes of its file (read from `path`, which errors name: a local path
    /// or a URL), checked as [`Plan::read`] checks one.
    ///
    /// # Errors
    /// As [`Plan::read`].
    pub fn from_json(bytes: &[u8], path: &Path) -> Result<Plan> {
        let malformed = |m: String| Error::new(ErrorKind::Malformed, m).with_path(path);
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(malformed(format!("plan of {} bytes, over the limit", bytes.len())));
        }
        let plan: Plan =
            serde_json::from_slice(bytes).map_err(|e| malformed(format!("plan: {e}")))?;
        if plan.plan != PLAN_FORMAT {
            return Err(malformed(format!(
                "plan format {}; this version reads {PLAN_FORMAT}",
                plan.plan
            )));
        }
        if !ztensor_io::weight_map::is_plain_name(&plan.index)
            || !plan.index.ends_with(INDEX_SUFFIX)
        {
            return Err(malformed(format!(
                "index {:?} is not a plain {INDEX_SUFFIX} file name",
                plan.index
            )));
        }
        // A plan is checked as an index is: it becomes one.
        let mut shards = HashSet::new();
        let mut owner: HashMap<&str, usize> = HashMap::new();
        let mut total = 0u64;
        for (i, u) in plan.units.iter().enumerate() {
            if u.unit != i {
                return Err(malformed(format!("unit {} listed at position {i}", u.unit)));
            }
            if !ztensor_io::weight_map::is_plain_name(&u.shard) || !u.shard.ends_with(".zt") {
                return Err(malformed(format!(
                    "unit {i}: shard {:?} is not a plain .zt file name",
                    u.shard
                )));
            }
            if u.shard == plan.index || !shards.insert(u.shard.as_str()) {
                return Err(malformed(format!(
                    "unit {i}: shard {:?} is named twice in the plan",
                    u.shard
                )));
            }
            if u.objects.is_empty() {
                return Err(malformed(format!("unit {i} holds no objects")));
            }
            for o in &u.objects {
                if let Some(first) = owner.insert(o.as_str(), i) {
                    return Err(malformed(format!(
                        "object {o:?} is listed in unit {first} and unit {i}: an index maps each name to one shard"
                    )));
                }
            }
            total = total.checked_add(u.bytes).filter(|&t| i64::try_from(t).is_ok()).ok_or_else(
                || malformed(format!("unit {i}: the units' sizes add up past 2^63 bytes")),
            )?;
        }
        plan.check_not_over_inputs().map_err(|e| e.with_path(path))?;
        plan.options.version().map_err(|e| e.with_path(path))?;
        plan.options.write_options().map_err(|e| e.with_path(path))?;
        Ok(plan)
    }

    /// Refuses a plan whose outputs (shards, index) are files it reads, by file identity
    /// (whatever the spelling or link): writing one would replace an input mid-run.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] naming the output and the input it is; I/O errors.
    pub fn check_not_over_inputs(&self) -> Result<()> {
        // Objects in a bucket are no local file's.
        if is_url(&self.output) {
            return Ok(());
        }
        let mut inputs = HashMap::with_capacity(self.inputs.len());
        for f in &self.inputs {
            if let Some(id) = FileId::of_path(&f.path)? {
                inputs.insert(id, &f.path);
            }
        }
        let outputs = self.units.iter().map(|u| u.shard.as_str()).chain([self.index.as_str()]);
        for name in outputs {
            let path = self.output.join(name);
            if let Some(input) = FileId::of_path(&path)?.and_then(|id| inputs.get(&id)) {
                return Err(Error::new(
                    ErrorKind::Malformed,
                    format!(
                        "the output {} is also the input {}; writing there would replace it \
                         (choose another output directory)",
                        path.display(),
                        input.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Unit `unit`.
    ///
    /// # Errors
    /// [`ErrorKind::NoSuchUnit`] naming the units there are.
    pub fn unit(&self, unit: usize) -> Result<&Unit> {
        self.units.get(unit).ok_or_else(|| {
            Error::new(
                ErrorKind::NoSuchUnit,
                format!(
                    "no unit {unit}: the plan has {} (0 to {})",
                    self.units.len(),
                    self.units.len().saturating_sub(1)
                ),
            )
        })
    }

    /// Where unit `unit`'s receipt goes.
    pub fn receipt_path(&self, unit: usize) -> PathBuf {
        self.output.join(RECEIPTS_DIR).join(receipt_name(unit))
    }

    /// Checks that the input files have the sizes they had when the plan was made.
    ///
    /// # Errors
    /// [`ErrorKind::Stale`] naming the first that changed (or vanished).
    pub fn check_inputs(&self) -> Result<()> {
        // Objects in a bucket are checked by the caller, which reaches them.
        for f in self.inputs.iter().filter(|f| !is_url(&f.path)) {
            let size = std::fs::metadata(&f.path).map(|m| m.len()).map_err(|e| {
                Error::new(ErrorKind::Stale, format!("input of the plan: {e}")).with_path(&f.path)
            })?;
            if size != f.size {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!(
                        "is {size} bytes; the plan was made when it was {} (make a new plan)",
                        f.size
                    ),
                )
                .with_path(&f.path));
            }
        }
        Ok(())
    }
}

impl Plan {
    /// What the output directory holds of sharded checkpoints: every index there and the
    /// shards it lists, every receipt there and the shard it names, and files at this plan's
    /// own shard and index names (a run of the same conversion before). Other files are none
    /// of its business. A link or special file at any of those names is refused, as writing
    /// would refuse it.
    ///
    /// # Errors
    /// [`ErrorKind::Malformed`] when one of them is a file this plan reads (clearing it would
    /// remove an input); such entries, and I/O errors.
    pub fn occupied(&self) -> Result<Occupied> {
        let shards: Vec<&str> = self.units.iter().map(|u| u.shard.as_str()).collect();
        let inputs: Vec<&Path> = self.inputs.iter().map(|f| f.path.as_path()).collect();
        Occupied::in_dir(&self.output, Some(&self.index), &shards, &inputs)
    }

    /// Removes what [`Plan::occupied`] found: the indexes first (so that what is left is never
    /// a checkpoint missing shards), then the shards, then the receipts and their directory
    /// when that is left empty. Entries are removed themselves, never what a link names.
    ///
    /// # Errors
    /// I/O errors.
    pub fn clear(&self, occupied: &Occupied) -> Result<()> {
        occupied.clear(&self.output)
    }
}
