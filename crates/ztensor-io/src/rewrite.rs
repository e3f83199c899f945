//! Rewriting files: a copy without some objects (and with others added), published atomically,
//! in place or beside.

use std::path::Path;

use ztensor_format::Options;

use crate::copy::{CopyOptions, check_copy, copy_object};
use crate::reader::Reader;
use crate::writer::Writer;
use ztensor_source::Result;

/// Writes `output` (atomically) with every object of `input` except those named in `remove`,
/// then whatever `add` writes: replacing an object is removing it and adding it again. `output`
/// may be `input` itself: the new file is written beside it and renamed over it, so readers of
/// the old file (including memory maps) keep seeing the old bytes. When `output` is `input`,
/// its lock (see [`WriteLock`](crate::WriteLock)) is taken before it is read, so an append to
/// it cannot slip in between and be lost.
///
/// # Errors
/// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) for a name the input does not hold, the
/// errors of `add`, and as [`copy_all`](crate::copy_all). On any error `output` is untouched.
pub fn rewrite(
    input: &Path,
    output: &Path,
    remove: &[&str],
    options: &Options,
    add: impl FnOnce(&mut Writer<crate::AtomicFile>) -> Result<()>,
) -> Result<u64> {
    // In place, the lock is held from before the read to after the rename. Otherwise it is
    // taken only around the rename: nothing reads a file while holding another's lock.
    let _lock = if ztensor_source::same_file(input, output) {
        crate::WriteLock::acquire(output)?
    } else {
        None
    };
    let reader = Reader::open_with(input, options)?;
    for name in remove {
        reader.object(name)?;
    }
    let mut writer = crate::FileWriter::create(output, reader.version())?;
    // Counted before anything is written: what the copy writes, a blob that objects share once.
    let kept = |_: usize, name: &str| !remove.contains(&name);
    check_copy(&reader, writer.writer_mut(), &CopyOptions::default(), &kept)?;
    if let Some(a) = &reader.manifest().manifest().attributes {
        writer.set_attributes(a.clone())?;
    }
    for object in reader.objects().filter(|o| kept(0, o.name())) {
        copy_object(object, writer.writer_mut(), &CopyOptions::default())?;
    }
    add(writer.writer_mut())?;
    writer.finish()
}

/// Writes `output` (atomically) with every object of `input` except those named in `remove`.
///
/// # Errors
/// As [`rewrite`].
pub fn remove_objects(
    input: &Path,
    output: &Path,
    remove: &[&str],
    options: &Options,
) -> Result<u64> {
    rewrite(input, output, remove, options, |_| Ok(()))
}
