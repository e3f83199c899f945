//! A sharded checkpoint written as objects under a prefix in object storage, through a
//! [`Destination`]: in one process ([`write_all_to`]: each shard streamed as it is written
//! and published whole, the index last), or unit by unit on any machine that reaches the
//! bucket ([`run_unit_to`], receipts as objects beside the shards) and indexed once every
//! unit is checked ([`finalize_to`]). The bytes are those a local directory gets.

use std::io::Write;
use std::path::Path;

use sha2::{Digest as _, Sha256};
use ztensor_io::{ReadAt, TensorSink, TensorSource};
use ztensor_par::{ParOptions, Progress, ZtSink};
use ztensor_shard::digest::{digest_source, hex};
use ztensor_shard::index::is_sha256;
use ztensor_shard::{Error, ErrorKind, Result};

use crate::plan::Plan;
use crate::receipt::{MAX_RECEIPT_LEN, RECEIPTS_DIR, Receipt, receipt_name};
use crate::run::{Outcome, index_json, unit_objects};

/// Where the objects of a sharded output go when it is not a local directory: a prefix in a
/// bucket, say, each object made by an upload that makes nothing appear until it is
/// published. The command-line tool implements it over `ztensor-remote`.
pub trait Destination {
    /// An object being written.
    type Object: Write;

    /// Where the object `name` goes, as messages show it.
    fn locate(&self, name: &str) -> String;

    /// Begins writing the object `name`: nothing appears there yet.
    ///
    /// # Errors
    /// The destination's own (a malformed URL, refused credentials).
    fn create(&self, name: &str) -> std::io::Result<Self::Object>;

    /// Makes `object` appear whole at `name` (replacing what was there).
    ///
    /// # Errors
    /// The destination's own; nothing appears then.
    fn publish(&self, name: &str, object: Self::Object) -> std::io::Result<()>;

    /// Removes the object `name`, which this write published before it failed.
    ///
    /// # Errors
    /// The destination's own.
    fn remove(&self, name: &str) -> std::io::Result<()>;

    /// The object `name` to read, or `None` when there is none.
    ///
    /// # Errors
    /// The destination's own, other than the object not being there.
    fn open(&self, name: &str) -> std::io::Result<Option<Box<dyn ReadAt>>>;

    /// What is at `name` now, for [`Destination::publish_if`]. Destinations without
    /// conditional writes keep the default, [`Seen::Unknown`].
    ///
    /// # Errors
    /// The destination's own, other than the object not being there.
    fn seen(&self, name: &str) -> std::io::Result<Seen> {
        let _ = name;
        Ok(Seen::Unknown)
    }

    /// Publishes `object` at `name` only when what is there is still what `seen` says
    /// (a conditional write), and answers `false`, publishing nothing, when another writer
    /// changed it first. The default, for [`Seen::Unknown`] and destinations without
    /// conditional writes, publishes as [`Destination::publish`] does.
    ///
    /// # Errors
    /// The destination's own; nothing appears then.
    fn publish_if(&self, name: &str, object: Self::Object, seen: &Seen) -> std::io::Result<bool> {
        let _ = seen;
        self.publish(name, object).map(|()| true)
    }
}

/// What was at a name of a [`Destination`] when it was looked at ([`Destination::seen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Seen {
    /// Nothing.
    Nothing,
    /// An object, by a tag the destination gives it (an ETag).
    Object(String),
    /// Not known: the destination has no conditional writes.
    Unknown,
}

/// What [`write_all_to`] published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// Where the index went.
    pub index: String,
    /// The shards.
    pub shards: usize,
    /// Their bytes together.
    pub bytes: u64,
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

/// `e`, an I/O failure doing `what` to the object `name` of `to`.
fn failed<D: Destination>(to: &D, what: &str, name: &str, e: &std::io::Error) -> Error {
    Error::io(what, Path::new(&to.locate(name)), e)
}

/// Writes unit `unit`'s shard as an object of `to`, published, and returns its receipt.
fn write_unit_to<D: Destination>(
    plan: &Plan,
    unit: usize,
    source: &dyn TensorSource,
    (par, progress): (&ParOptions, &dyn Progress),
    to: &D,
    digest_of_plan: &str,
) -> Result<Receipt> {
    let u = plan.unit(unit)?;
    let only = unit_objects(plan, unit, source)?;
    let object = to.create(&u.shard).map_err(|e| failed(to, "cannot write", &u.shard, &e))?;
    let mut hashing = Hashing { inner: object, sha: Sha256::new(), len: 0 };
    let mut writer = ztensor_io::Writer::new(&mut hashing, plan.options.version()?)?;
    let mut sink = ZtSink::new(&mut writer, plan.options.write_options()?, par, progress)
        .drop_attributes(plan.options.drop_attributes);
    let done = sink.write_all(&only);
    drop(sink);
    done.map_err(|e| Error::from(e).with_path(Path::new(&to.locate(&u.shard))))?;
    writer.finish()?;
    let Hashing { inner, sha, len } = hashing;
    to.publish(&u.shard, inner).map_err(|e| failed(to, "cannot publish", &u.shard, &e))?;
    Ok(Receipt {
        plan: digest_of_plan.to_owned(),
        unit,
        shard: u.shard.clone(),
        size: len,
        digest: format!("sha256:{}", hex(&sha.finalize())),
        objects: u.objects.len(),
    })
}

/// Writes `bytes` as the object `name` of `to`, published.
fn put<D: Destination>(
    to: &D,
    name: &str,
    write: impl FnOnce(&mut D::Object) -> std::io::Result<()>,
) -> Result<()> {
    let mut object = to.create(name).map_err(|e| failed(to, "cannot write", name, &e))?;
    write(&mut object).map_err(|e| failed(to, "cannot write", name, &e))?;
    to.publish(name, object).map_err(|e| failed(to, "cannot publish", name, &e))
}

/// Writes every unit of `plan` and its index as objects of `to`, in this process: the same
/// shards and index, byte for byte, as [`write_all`](crate::write_all) writes into a local
/// directory. Each shard is published as soon as it is written (none is held back in memory),
/// the index last; when anything fails, the shards this call published are removed, and an
/// object being written is dropped unpublished. No receipts are written. Returns what was
/// published.
///
/// # Errors
/// As [`write_all`](crate::write_all); the destination's errors, naming the object.
pub fn write_all_to<D: Destination>(
    plan: &Plan,
    source: &dyn TensorSource,
    par: &ParOptions,
    progress: &dyn Progress,
    to: &D,
) -> Result<Published> {
    plan.check_inputs()?;
    let digest_of_plan = plan.digest();
    let mut published: Vec<&str> = Vec::new();
    let mut written = || -> Result<Published> {
        let mut receipts = Vec::with_capacity(plan.units.len());
        for unit in 0..plan.units.len() {
            let receipt = write_unit_to(plan, unit, source, (par, progress), to, &digest_of_plan)?;
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
    if result.is_err() {
        // Best effort: what cannot be removed is a shard no index names.
        for name in published {
            let _ = to.remove(name);
        }
    }
    result
}

/// The name of unit `unit`'s receipt under the prefix.
fn receipt_object(unit: usize) -> String {
    format!("{RECEIPTS_DIR}/{}", receipt_name(unit))
}

/// The receipt of `unit` in `to` when it is there, belongs to this plan, and its shard
/// matches it (size, and with `hash` its digest); `None` otherwise.
fn done_at<D: Destination>(
    plan: &Plan,
    to: &D,
    unit: usize,
    digest_of_plan: &str,
    hash: bool,
) -> Result<Option<Receipt>> {
    let name = receipt_object(unit);
    let Some(object) = to.open(&name).map_err(|e| failed(to, "cannot read", &name, &e))? else {
        return Ok(None);
    };
    if object.len() > MAX_RECEIPT_LEN {
        return Ok(None);
    }
    let mut bytes = vec![0u8; usize::try_from(object.len()).unwrap_or(0)];
    object.read_exact_at(0, &mut bytes).map_err(|e| failed(to, "cannot read", &name, &e))?;
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
        to.open(&receipt.shard).map_err(|e| failed(to, "cannot read", &receipt.shard, &e))?
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

/// Writes unit `unit` of `plan` from `source` into `to`: its shard, then its receipt (an
/// object under [`RECEIPTS_DIR`]), as [`run_unit`](crate::run_unit) does in a local
/// directory. A unit whose receipt and shard are there and match is verified (hashed) and left
/// alone. Two attempts of one unit racing each other write the same shard bytes; the receipt
/// is published on condition where the destination has conditional writes (nothing there, or
/// still the stale receipt seen at the start), so the attempt that comes second learns it, and
/// answers [`Outcome::AlreadyDone`] with the first one's receipt once it checks.
///
/// # Errors
/// As [`run_unit`](crate::run_unit); the destination's errors, naming the object.
pub fn run_unit_to<D: Destination>(
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
    let seen = to.seen(&name).map_err(|e| failed(to, "cannot read", &name, &e))?;
    if let Some(receipt) = done_at(plan, to, unit, &digest_of_plan, true)? {
        return Ok(Outcome::AlreadyDone(receipt));
    }
    plan.check_inputs()?;
    let receipt = write_unit_to(plan, unit, source, (par, progress), to, &digest_of_plan)?;
    let mut text = serde_json::to_string_pretty(&receipt).unwrap_or_default();
    text.push('\n');
    let mut object = to.create(&name).map_err(|e| failed(to, "cannot write", &name, &e))?;
    object.write_all(text.as_bytes()).map_err(|e| failed(to, "cannot write", &name, &e))?;
    let first =
        to.publish_if(&name, object, &seen).map_err(|e| failed(to, "cannot publish", &name, &e))?;
    if first {
        return Ok(Outcome::Written(receipt));
    }
    // Another attempt published a receipt first: the unit is done when it checks (its shard is
    // this attempt's bytes, which the plan determines).
    done_at(plan, to, unit, &digest_of_plan, true)?.map(Outcome::AlreadyDone).ok_or_else(|| {
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
/// the index, as [`finalize`](crate::finalize) does in a local directory. Returns where the
/// index went.
///
/// # Errors
/// [`ErrorKind::Incomplete`] naming every unit not done (nothing is written then);
/// [`ErrorKind::IndexMismatch`] for a shard that does not hold its unit's objects; the
/// destination's errors.
pub fn finalize_to<D: Destination>(plan: &Plan, hash: bool, to: &D) -> Result<String> {
    let digest_of_plan = plan.digest();
    let mut receipts = Vec::with_capacity(plan.units.len());
    let mut missing = Vec::new();
    for u in &plan.units {
        match done_at(plan, to, u.unit, &digest_of_plan, hash)? {
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
            .map_err(|e| failed(to, "cannot read", &u.shard, &e))?
            .ok_or_else(|| {
                Error::new(ErrorKind::Incomplete, "vanished since its receipt was checked")
                    .with_path(Path::new(&shown))
            })?;
        let reader = ztensor_io::Reader::new(&*shard, &ztensor_format::Options::default())
            .map_err(|e| Error::from(e).with_path(Path::new(&shown)))?;
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
