//! A sharded checkpoint written as objects under a prefix in object storage, through a
//! [`Destination`]: each shard streamed as it is written and published whole, then the index
//! last, so a checkpoint is there (its index readable) only once every shard is.

use std::io::Write;
use std::path::Path;

use sha2::{Digest as _, Sha256};
use ztensor_io::{TensorSink, TensorSource};
use ztensor_par::{ParOptions, Progress, ZtSink};
use ztensor_shard::digest::hex;
use ztensor_shard::{Error, Result};

use crate::plan::{Plan, Receipt, index_json, unit_objects};

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

    /// Makes `object` appear whole at `name`.
    ///
    /// # Errors
    /// The destination's own; nothing appears then.
    fn publish(&self, name: &str, object: Self::Object) -> std::io::Result<()>;

    /// Removes the object `name`, which this write published before it failed.
    ///
    /// # Errors
    /// The destination's own.
    fn remove(&self, name: &str) -> std::io::Result<()>;
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

/// Writes every unit of `plan` and its index as objects of `to`, in this process: the same
/// shards and index, byte for byte, as [`write_all`](crate::write_all) writes into a local
/// directory. Each shard is published as soon as it is written (none is held back in memory),
/// the index last; when anything fails, the shards this call published are removed, and an
/// object being written is dropped unpublished. Returns what was published.
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
    let version = plan.options.version()?;
    let options = plan.options.write_options()?;
    let failed = |what: &str, name: &str, e: std::io::Error| {
        Error::io(what, Path::new(&to.locate(name)), &e)
    };
    let mut published: Vec<&str> = Vec::new();
    let mut written = || -> Result<Published> {
        let mut receipts = Vec::with_capacity(plan.units.len());
        for (unit, u) in plan.units.iter().enumerate() {
            let only = unit_objects(plan, unit, source)?;
            let object = to.create(&u.shard).map_err(|e| failed("cannot write", &u.shard, e))?;
            let mut hashing = Hashing { inner: object, sha: Sha256::new(), len: 0 };
            let mut writer = ztensor_io::Writer::new(&mut hashing, version)?;
            let mut sink = ZtSink::new(&mut writer, options.clone(), par, progress)
                .drop_attributes(plan.options.drop_attributes);
            let done = sink.write_all(&only);
            drop(sink);
            done.map_err(|e| Error::from(e).with_path(Path::new(&to.locate(&u.shard))))?;
            writer.finish()?;
            let Hashing { inner, sha, len } = hashing;
            to.publish(&u.shard, inner).map_err(|e| failed("cannot publish", &u.shard, e))?;
            published.push(&u.shard);
            receipts.push(Receipt {
                plan: digest_of_plan.clone(),
                unit,
                shard: u.shard.clone(),
                size: len,
                digest: format!("sha256:{}", hex(&sha.finalize())),
                objects: u.objects.len(),
            });
        }
        let mut index =
            to.create(&plan.index).map_err(|e| failed("cannot write", &plan.index, e))?;
        index_json(plan, &receipts, &mut index)
            .map_err(|e| failed("cannot write", &plan.index, e))?;
        to.publish(&plan.index, index).map_err(|e| failed("cannot publish", &plan.index, e))?;
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
