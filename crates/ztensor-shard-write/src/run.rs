//! Running a plan into a [`Destination`]: one unit ([`run_unit`]), the index once every unit
//! is checked ([`finalize`]), or all of it in one process ([`write_all`]). The bytes are the
//! same wherever they go.

use std::io::Write;
use std::path::Path;

use sha2::{Digest as _, Sha256};
use ztensor_io::{Excluding, TensorSink, TensorSource};
use ztensor_par::{ParOptions, Progress, ZtSink};
use ztensor_shard::digest::{digest_source, hex};
use ztensor_shard::index::{is_sha256, write_json};
use ztensor_shard::{Error, ErrorKind, Result};

use crate::dest::{Destination, Published, Shard, failed};
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

/// A writer that passes bytes on and counts and hashes them: what a shard's receipt says,
/// learnt as it is written.
struct Hashing<W> {
    inner: W,
    sha: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(bytes)?;
        self.sha.update(&bytes[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes unit `unit`'s shard into `to`, published, and returns its receipt.
fn write_unit<D: Destination>(
    plan: &Plan,
    unit: usize,
    source: &dyn TensorSource,
    (par, progress): (&ParOptions, &dyn Progress),
    to: &D,
    digest_of_plan: &str,
) -> Result<Receipt> {
    let u = plan.unit(unit)?;
    let only = unit_objects(plan, unit, source)?;
    let shown = to.locate(&u.shard);
    let version = plan.options.version()?;
    let options = plan.options.write_options()?;
    let (size, digest) = match to.shard(&u.shard, version)? {
        Shard::Stream(object) => {
            let mut hashing = Hashing { inner: object, sha: Sha256::new(), len: 0 };
            let mut writer = ztensor_io::Writer::new(&mut hashing, version)?;
            let mut sink = ZtSink::new(&mut writer, options, par, progress)
                .drop_attributes(plan.options.drop_attributes);
            let done = sink.write_all(&only);
            drop(sink);
            done.map_err(|e| Error::from(e).with_path(Path::new(&shown)))?;
            writer.finish()?;
            let Hashing { inner, sha, len } = hashing;
            to.publish(&u.shard, inner).map_err(|e| failed(to, "cannot publish", &u.shard, e))?;
            (len, format!("sha256:{}", hex(&sha.finalize())))
        }
        Shard::File(mut writer) => {
            // Blobs are placed by positioned writes, in parallel: hashed once the file is
            // whole, read back through the destination.
            let mut sink = ZtSink::new(writer.writer_mut(), options, par, progress)
                .drop_attributes(plan.options.drop_attributes);
            let done = sink.write_all(&only);
            drop(sink);
            done.map_err(|e| Error::from(e).with_path(Path::new(&shown)))?;
            writer.finish()?;
            let shard = to
                .open(&u.shard)
                .map_err(|e| failed(to, "cannot read", &u.shard, e))?
                .ok_or_else(|| {
                    Error::new(ErrorKind::Io, "vanished as soon as it was written")
                        .with_path(Path::new(&shown))
                })?;
            (shard.len(), digest_source(&*shard, Path::new(&shown))?)
        }
    };
    Ok(Receipt {
        plan: digest_of_plan.to_owned(),
        unit,
        shard: u.shard.clone(),
        size,
        digest,
        objects: u.objects.len(),
    })
}

/// Writes the object `name` of `to` by `write`, published.
fn put<D: Destination>(
    to: &D,
    name: &str,
    write: impl FnOnce(&mut D::Object) -> std::io::Result<()>,
) -> Result<()> {
    let mut object = to.create(name).map_err(|e| failed(to, "cannot write", name, e))?;
    write(&mut object).map_err(|e| failed(to, "cannot write", name, e))?;
    to.publish(name, object).map_err(|e| failed(to, "cannot publish", name, e))
}

/// The name of unit `unit`'s receipt in a destination.
fn receipt_object(unit: usize) -> String {
    format!("{RECEIPTS_DIR}/{}", receipt_name(unit))
}

/// The receipt of `unit` in `to` when it is there, belongs to this plan, and its shard
/// matches it (size, and with `hash` its digest); `None` otherwise.
fn done<D: Destination>(
    plan: &Plan,
    to: &D,
    unit: usize,
    digest_of_plan: &str,
    hash: bool,
) -> Result<Option<Receipt>> {
    let name = receipt_object(unit);
    let Some(object) = to.open(&name).map_err(|e| failed(to, "cannot read", &name, e))? else {
        return Ok(None);
    };
    if object.len() > MAX_RECEIPT_LEN {
        return Ok(None);
    }
    let mut bytes = vec![0u8; usize::try_from(object.len()).unwrap_or(0)];
    object.read_exact_at(0, &mut bytes).map_err(|e| failed(to, "cannot read", &name, e))?;
    let Ok(receipt) = serde_json::from_slice::<Receipt>(&bytes) else { return Ok(None) };
    let Some(unit_plan) = plan.units.get(unit) else { return Ok(None) };
    if receipt.plan != digest_of_plan
        || receipt.unit != unit
        || receipt.shard != unit_plan.shard
        || !is_sha256(&receipt.digest)
    {
        return Ok(None);
    }
    let shown = to.locate(&receipt.shard);
    let Some(shard) =
        to.open(&receipt.shard).map_err(|e| failed(to, "cannot read", &receipt.shard, e))?
    else {
        return Ok(None);
    };
    if shard.len() != receipt.size {
        return Ok(None);
    }
    if hash && digest_source(&*shard, Path::new(&shown))? != receipt.digest {
        return Ok(None);
    }
    Ok(Some(receipt))
}

/// Writes unit `unit` of `plan` from `source` (the plan's input, opened as the plan says)
/// into `to`: its shard, published whole, then its receipt (under [`RECEIPTS_DIR`]). A unit
/// whose receipt and shard are already there and match is verified (hashed) and left alone.
/// Two attempts of one unit racing each other write the same shard bytes; the receipt is
/// published on condition where the destination has conditional writes (nothing there, or
/// still the stale receipt seen at the start), so the attempt that comes second learns it,
/// and answers [`Outcome::AlreadyDone`] with the first one's receipt once it checks.
///
/// # Errors
/// [`ErrorKind::Stale`] when the input changed since the plan was made (or lacks an object of
/// the unit); [`ErrorKind::ZTensor`] for a failure to read or write; the destination's errors,
/// naming the object.
pub fn run_unit<D: Destination>(
    plan: &Plan,
    unit: usize,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
    to: &D,
) -> Result<Outcome> {
    plan.unit(unit)?;
    let digest_of_plan = plan.digest();
    let name = receipt_object(unit);
    // Looked at before the receipt is read: whatever replaces it from now on is another
    // attempt's.
    let seen = to.seen(&name).map_err(|e| failed(to, "cannot read", &name, e))?;
    if let Some(receipt) = done(plan, to, unit, &digest_of_plan, true)? {
        return Ok(Outcome::AlreadyDone(receipt));
    }
    plan.check_inputs()?;
    plan.check_not_over_inputs()?;
    let receipt = write_unit(plan, unit, source, (par, progress), to, &digest_of_plan)?;
    let mut text = serde_json::to_string_pretty(&receipt).unwrap_or_default();
    text.push('\n');
    let mut object = to.create(&name).map_err(|e| failed(to, "cannot write", &name, e))?;
    object.write_all(text.as_bytes()).map_err(|e| failed(to, "cannot write", &name, e))?;
    let first =
        to.publish_if(&name, object, &seen).map_err(|e| failed(to, "cannot publish", &name, e))?;
    if first {
        return Ok(Outcome::Written(receipt));
    }
    // Another attempt published a receipt first: the unit is done when it checks (its shard is
    // this attempt's bytes, which the plan determines).
    done(plan, to, unit, &digest_of_plan, true)?.map(Outcome::AlreadyDone).ok_or_else(|| {
        Error::new(
            ErrorKind::Stale,
            "another attempt of this unit published a receipt while this one ran, and it does \
             not match its shard: run the unit again",
        )
        .with_path(Path::new(&to.locate(&name)))
    })
}

/// Checks every unit's receipt and shard in `to` (the receipt belongs to this plan, the shard
/// has its size, with `hash` its digest, and holds exactly the unit's objects) and publishes
/// the index. Returns where the index went.
///
/// # Errors
/// [`ErrorKind::Incomplete`] naming every unit not done (nothing is written then);
/// [`ErrorKind::IndexMismatch`] for a shard that does not hold its unit's objects; the
/// destination's errors.
pub fn finalize<D: Destination>(plan: &Plan, hash: bool, to: &D) -> Result<String> {
    if plan.units.is_empty() {
        // No unit ever runs: nothing was written to index, and nothing is made.
        return Err(Error::new(ErrorKind::Incomplete, "the plan has no units: no unit has run"));
    }
    let digest_of_plan = plan.digest();
    let mut receipts = Vec::with_capacity(plan.units.len());
    let mut missing = Vec::new();
    for u in &plan.units {
        match done(plan, to, u.unit, &digest_of_plan, hash)? {
            Some(r) => receipts.push(r),
            None => missing.push(u.unit.to_string()),
        }
    }
    if !missing.is_empty() {
        return Err(Error::new(
            ErrorKind::Incomplete,
            format!(
                "{} of {} unit(s) not done (no receipt of this plan, or a shard that does not match it): {}",
                missing.len(),
                plan.units.len(),
                missing.join(", ")
            ),
        ));
    }
    for u in &plan.units {
        let shown = to.locate(&u.shard);
        let shard = to
            .open(&u.shard)
            .map_err(|e| failed(to, "cannot read", &u.shard, e))?
            .ok_or_else(|| {
                Error::new(ErrorKind::Incomplete, "vanished since its receipt was checked")
                    .with_path(Path::new(&shown))
            })?;
        let reader = ztensor_io::Reader::new(&*shard, &ztensor_format::Options::default())
            .map_err(|e| Error::from(e).with_path(Path::new(&shown)))?;
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
            .with_path(Path::new(&shown)));
        }
    }
    put(to, &plan.index, |out| index_json(plan, &receipts, out))?;
    Ok(to.locate(&plan.index))
}

/// Writes every unit of `plan` and its index into `to`, in this process: the same shards and
/// index, byte for byte, as running the units anywhere and finalizing. Each shard is published
/// as soon as it is written (none is held back in memory), the index last. No receipts are
/// written. Returns what was published.
///
/// A failure part of the way takes back what this call published ([`Destination::abandon`]):
/// into a [`Directory::all_or_nothing`](crate::Directory::all_or_nothing), the directory is
/// left as it was found, directories made for it included, on an
/// [`interrupt`](crate::interrupt) too.
///
/// # Errors
/// As [`run_unit`].
pub fn write_all<D: Destination>(
    plan: &Plan,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
    to: &D,
) -> Result<Published> {
    plan.check_inputs()?;
    plan.check_not_over_inputs()?;
    let digest_of_plan = plan.digest();
    let mut published: Vec<&str> = Vec::new();
    let mut written = || -> Result<Published> {
        let mut receipts = Vec::with_capacity(plan.units.len());
        for unit in 0..plan.units.len() {
            let receipt = write_unit(plan, unit, source, (par, progress), to, &digest_of_plan)?;
            published.push(&plan.units[unit].shard);
            receipts.push(receipt);
        }
        put(to, &plan.index, |out| index_json(plan, &receipts, out))?;
        Ok(Published {
            index: to.locate(&plan.index),
            shards: receipts.len(),
            bytes: receipts.iter().map(|r| r.size).sum(),
        })
    };
    let result = written();
    match &result {
        Ok(_) => to.kept(),
        Err(_) => to.abandon(&published),
    }
    result
}

/// Publishes local files as the objects of `to`, in the order given (an index or root last,
/// so that it never names an object not there yet): each file read as it is sent. When one
/// fails, those this call published are taken back ([`Destination::abandon`]). For a
/// checkpoint written elsewhere first (a format whose writer places bytes by seeking).
///
/// # Errors
/// Reading a file; the destination's errors, naming the object.
pub fn publish_files<D: Destination>(to: &D, files: &[(String, std::path::PathBuf)]) -> Result<()> {
    let mut published: Vec<&str> = Vec::new();
    for (name, path) in files {
        let sent = (|| {
            let mut file =
                std::fs::File::open(path).map_err(|e| Error::io("cannot read", path, &e))?;
            let mut object = to.create(name).map_err(|e| failed(to, "cannot write", name, e))?;
            copy_into(&mut file, &mut object).map_err(|e| match e {
                Copying::Read(e) => Error::io("cannot read", path, &e),
                Copying::Write(e) => failed(to, "cannot write", name, e),
            })?;
            to.publish(name, object).map_err(|e| failed(to, "cannot publish", name, e))
        })();
        if let Err(e) = sent {
            to.abandon(&published);
            return Err(e);
        }
        published.push(name);
    }
    Ok(())
}

/// Which side of a copy failed.
enum Copying {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copies `file` into `object`, telling a failure to read from one to write.
fn copy_into(
    file: &mut std::fs::File,
    object: &mut impl Write,
) -> std::result::Result<(), Copying> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Copying::Read(e)),
        };
        object.write_all(&buf[..n]).map_err(Copying::Write)?;
    }
}
