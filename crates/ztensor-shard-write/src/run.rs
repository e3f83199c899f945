//! Running a plan: one unit ([`run_unit`]), the index once every unit is checked
//! ([`finalize`]), or all of it in one process ([`write_all`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use ztensor_io::{Excluding, FileId, FileSource, FileWriter, OutputDir, TensorSink, TensorSource};
use ztensor_par::{ParOptions, Progress, ZtSink};

use ztensor_shard::digest::digest_file;
use ztensor_shard::index::{is_sha256, write_json};
use ztensor_shard::{Error, ErrorKind, Result};

use crate::outdir::Undo;
use crate::plan::Plan;
use crate::receipt::{MAX_RECEIPT_LEN, RECEIPTS_DIR, Receipt, receipt_name};
/// How a unit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The shard was written.
    Written(Receipt),
    /// A receipt and a shard that matches it were already there: nothing was written.
    AlreadyDone(Receipt),
}

impl Outcome {
    /// The receipt.
    pub fn receipt(&self) -> &Receipt {
        match self {
            Outcome::Written(r) | Outcome::AlreadyDone(r) => r,
        }
    }
}

/// The receipt of `unit` when it is there, belongs to this plan, and its shard matches it
/// (size, then digest); `None` otherwise. Receipts and shards are read through `out`, never
/// through a link planted in their place.
///
/// # Errors
/// A link or special file where a receipt or shard should be, and I/O errors other than the
/// receipt or shard not being there.
fn done(
    plan: &Plan,
    out: &OutputDir,
    unit: usize,
    digest_of_plan: &str,
    hash: bool,
) -> Result<Option<Receipt>> {
    let receipts = match out.subdir_if_present(RECEIPTS_DIR)? {
        Some(r) => r,
        None => return Ok(None),
    };
    let Some(bytes) = receipts.read(&receipt_name(unit), MAX_RECEIPT_LEN)? else {
        return Ok(None);
    };
    let Ok(receipt) = serde_json::from_slice::<Receipt>(&bytes) else { return Ok(None) };
    let Some(unit_plan) = plan.units.get(unit) else { return Ok(None) };
    if receipt.plan != digest_of_plan
        || receipt.unit != unit
        || receipt.shard != unit_plan.shard
        || !is_sha256(&receipt.digest)
    {
        return Ok(None);
    }
    let Some(shard) = out.open_file(&receipt.shard)? else { return Ok(None) };
    let path = out.join(&receipt.shard);
    if shard.metadata().map_err(|e| Error::io("cannot stat", &path, &e))?.len() != receipt.size {
        return Ok(None);
    }
    if hash && digest_file(shard, &path)?.1 != receipt.digest {
        return Ok(None);
    }
    Ok(Some(receipt))
}

/// Writes unit `unit` of `plan` from `source` (the plan's input, opened as the plan says):
/// its shard, published atomically, then its receipt. A unit whose receipt and shard are
/// already there and match is verified (hashed) and left alone. Two attempts of one unit
/// racing each other both publish the same bytes.
///
/// # Errors
/// [`ErrorKind::Stale`] when the input changed since the plan was made (or lacks an object of
/// the unit); [`ErrorKind::ZTensor`] for a failure to read or write; I/O errors.
pub fn run_unit(
    plan: &Plan,
    unit: usize,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<Outcome> {
    plan.unit(unit)?;
    let digest_of_plan = plan.digest();
    let out = OutputDir::open(&plan.output)?;
    if let Some(receipt) = done(plan, &out, unit, &digest_of_plan, true)? {
        return Ok(Outcome::AlreadyDone(receipt));
    }
    plan.check_inputs()?;
    plan.check_not_over_inputs()?;
    let receipt = write_unit(plan, &out, unit, source, par, progress, &digest_of_plan)?;
    let path = plan.receipt_path(unit);
    let mut file = out.subdir(RECEIPTS_DIR)?.create(&receipt_name(unit))?;
    let mut text = serde_json::to_string_pretty(&receipt).unwrap_or_default();
    text.push('\n');
    file.write_all(text.as_bytes()).map_err(|e| Error::io("cannot write", &path, &e))?;
    file.persist()?;
    Ok(Outcome::Written(receipt))
}

/// Writes unit `unit`'s shard and returns what its receipt says.
fn write_unit(
    plan: &Plan,
    out: &OutputDir,
    unit: usize,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
    digest_of_plan: &str,
) -> Result<Receipt> {
    let u = plan.unit(unit)?;
    let only = unit_objects(plan, unit, source)?;
    let target = out.join(&u.shard);
    let mut writer = FileWriter::create_in(out, &u.shard, plan.options.version()?)?;
    let mut sink = ZtSink::new(writer.writer_mut(), plan.options.write_options()?, par, progress)
        .drop_attributes(plan.options.drop_attributes);
    sink.write_all(&only).map_err(|e| Error::from(e).with_path(&target))?;
    writer.finish()?;
    let shard = out.open_file(&u.shard)?.ok_or_else(|| {
        Error::new(ErrorKind::Io, "vanished as soon as it was written").with_path(&target)
    })?;
    let (size, digest) = digest_file(shard, &target)?;
    Ok(Receipt {
        plan: digest_of_plan.to_owned(),
        unit,
        shard: u.shard.clone(),
        size,
        digest,
        objects: u.objects.len(),
    })
}

/// The objects of unit `unit` of `source`, found by name (one lookup each), not by a pass
/// over every object of the input: a plan of many units stays linear.
///
/// # Errors
/// [`ErrorKind::Stale`] for an object the input lacks.
pub(crate) fn unit_objects<'s>(
    plan: &Plan,
    unit: usize,
    source: &'s dyn TensorSource,
) -> Result<Excluding<'s>> {
    let u = plan.unit(unit)?;
    let mut keep = Vec::with_capacity(u.objects.len());
    for o in &u.objects {
        match source.find(o) {
            Some(i) => keep.push(i),
            None => {
                return Err(Error::new(
                    ErrorKind::Stale,
                    format!("unit {unit}: the input has no object {o:?} (make a new plan)"),
                )
                .with_path(&plan.input));
            }
        }
    }
    Ok(Excluding::keeping(source, keep))
}

/// Writes the index of `plan`'s output from its units' receipts (as [`ShardIndex::to_json`]
/// writes the index they make, byte for byte), straight from the plan: no map of every tensor
/// name to its shard is built, nor a JSON tree of it.
fn write_index(plan: &Plan, out: &OutputDir, receipts: &[Receipt]) -> Result<PathBuf> {
    let path = out.join(&plan.index);
    let mut file = out.create(&plan.index)?;
    index_json(plan, receipts, &mut file).map_err(|e| Error::io("cannot write", &path, &e))?;
    file.persist()?;
    Ok(path)
}

/// The index of `plan`'s output, from its units' receipts, into `out`.
pub(crate) fn index_json(
    plan: &Plan,
    receipts: &[Receipt],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    // `Plan::read` and `plan` keep the sum within u64.
    let total_size = plan.units.iter().fold(0u64, |t, u| t.saturating_add(u.bytes));
    let units = || plan.units.iter().zip(receipts);
    // Each sorted by name, as a map holds them: of a name given twice, the last.
    let mut shards: Vec<(&str, u64, &str)> =
        units().map(|(u, r)| (u.shard.as_str(), r.size, r.digest.as_str())).collect();
    shards.sort_by(|a, b| a.0.cmp(b.0));
    shards.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            *kept = *later;
        }
        same
    });
    let mut tensors: Vec<(usize, usize)> = units()
        .enumerate()
        .flat_map(|(i, (u, _))| (0..u.objects.len()).map(move |k| (i, k)))
        .collect();
    let name = |&(i, k): &(usize, usize)| plan.units[i].objects[k].as_str();
    tensors.sort_by(|a, b| name(a).cmp(name(b)));
    tensors.dedup_by(|later, kept| {
        let same = name(later) == name(kept);
        if same {
            *kept = *later;
        }
        same
    });
    let weight_map = tensors.iter().map(|&(i, k)| {
        let u = &plan.units[i];
        (u.objects[k].as_str(), u.shard.as_str())
    });
    write_json(out, total_size, shards.iter().copied(), weight_map)
}

/// Checks every unit's receipt and shard (the receipt belongs to this plan, the shard has its
/// size, and with `hash` its digest, and holds exactly the unit's objects) and writes the index
/// atomically. Returns the index's path.
///
/// # Errors
/// [`ErrorKind::Incomplete`] naming every unit without a matching receipt and shard (nothing is
/// written then); [`ErrorKind::IndexMismatch`] for a shard that does not hold its unit's
/// objects; I/O errors.
pub fn finalize(plan: &Plan, hash: bool) -> Result<PathBuf> {
    let digest_of_plan = plan.digest();
    // No output directory yet: no unit has run.
    let out = match FileId::of_path(&plan.output)? {
        Some(_) => Some(OutputDir::open_existing(&plan.output)?),
        None => None,
    };
    let mut receipts = Vec::with_capacity(plan.units.len());
    let mut missing = Vec::new();
    for u in &plan.units {
        let found = match &out {
            Some(out) => done(plan, out, u.unit, &digest_of_plan, hash)?,
            None => None,
        };
        match found {
            Some(r) => receipts.push(r),
            None => missing.push(u.unit),
        }
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
        return Err(Error::new(
            ErrorKind::Incomplete,
            format!(
                "{} of {} unit(s) not done (no receipt of this plan, or a shard that does not match it): {}",
                missing.len(),
                plan.units.len(),
                list.join(", ")
            ),
        ));
    }
    let Some(out) = out else {
        return Err(Error::new(ErrorKind::Incomplete, "no unit has run").with_path(&plan.output));
    };
    for u in &plan.units {
        let path = out.join(&u.shard);
        let file = out.open_file(&u.shard)?.ok_or_else(|| {
            Error::new(ErrorKind::Incomplete, "vanished since its receipt was checked")
                .with_path(&path)
        })?;
        let source = FileSource::new(file).map_err(|e| Error::io("cannot stat", &path, &e))?;
        let reader = ztensor_io::Reader::new(source, &ztensor_format::Options::default())
            .map_err(|e| Error::from(e).with_path(&path))?;
        // The manifest keeps its own order (v1.x sorts its keys): compare as sets.
        let mut names: Vec<&str> = reader.objects().map(|o| o.name()).collect();
        let mut wanted: Vec<&str> = u.objects.iter().map(String::as_str).collect();
        names.sort_unstable();
        wanted.sort_unstable();
        if names != wanted {
            return Err(Error::new(
                ErrorKind::IndexMismatch,
                format!("does not hold exactly the objects of unit {}", u.unit),
            )
            .with_path(&path));
        }
    }
    write_index(plan, &out, &receipts)
}

/// Writes every unit of `plan` in this process, in order, then the index: the same shards
/// and index, byte for byte, as running the units anywhere and finalizing. No receipts are
/// written. Returns the index's path.
///
/// A failure part of the way, or [`interrupt`](crate::interrupt) from another thread, leaves the output
/// directory as it was found: the shards written (at names nothing held before) are removed,
/// and the directories created for the output too when nothing else was put in them.
///
/// # Errors
/// As [`run_unit`].
pub fn write_all(
    plan: &Plan,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
) -> Result<PathBuf> {
    let digest_of_plan = plan.digest();
    plan.check_inputs()?;
    plan.check_not_over_inputs()?;
    // The outermost directory the output makes, to be removed again if the write fails.
    let created = plan
        .output
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
        .last()
        .map(Path::to_owned);
    let undo = Undo::register(plan.output.clone(), created);
    let written = (|| {
        let out = OutputDir::open(&plan.output)?;
        let mut receipts = Vec::with_capacity(plan.units.len());
        for unit in 0..plan.units.len() {
            undo.adding(&out, &plan.units[unit].shard)?;
            receipts.push(write_unit(plan, &out, unit, source, par, progress, &digest_of_plan)?);
        }
        undo.adding(&out, &plan.index)?;
        write_index(plan, &out, &receipts)
    })();
    match written {
        Ok(_) => undo.keep(),
        Err(_) => undo.run(),
    }
    written
}
