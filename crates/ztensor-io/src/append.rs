//! Appending to a v1.x file in place, and repairing one whose append was interrupted.
//!
//! An append never rewrites what a file holds: new blobs, a new manifest (listing the old
//! objects and the new) and a new trailer go after the old end. It is crash-safe by
//! construction, whatever the appended bytes contain:
//!
//! 1. the appender takes the file's [`WriteLock`], so it is the only writer;
//! 2. it records the old length in a journal beside the file and makes the record durable;
//! 3. it writes after the old end, makes that durable, then writes and syncs the trailer;
//! 4. it removes the journal (durably): that is the commit.
//!
//! Until step 4 every reader of this crate reads the file as it was (the journal says where it
//! ended), and undoing the append is truncating back to that length, which needs no free space:
//! a failed or dropped [`Appender`] does it at once, [`interrupt`](crate::interrupt) does it
//! for a signal, and [`repair`] (or the next append) does it after a crash.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ztensor_format::{
    Container, Error as FormatError, ErrorKind as Rule, MAGIC_V1, Options, Version,
};

use crate::reader::{Reader, load_manifest, read_vec};
use crate::writer::Writer;
use ztensor_source::Abandon;
use ztensor_source::journal::{self, Journal};
use ztensor_source::{Error, Result};
use ztensor_source::{FileId, WriteLock};
use ztensor_source::{FileSource, ReadAt};

/// Bytes an [`AppendSink`] gathers before writing them out.
const BUFFER: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Writing,
    Committed,
    Abandoned,
}

/// A fault to inject at an absolute file offset, for the tests that cut appends.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The disk is full from this offset on: writes fail with ENOSPC.
    NoSpace(u64),
    /// The process dies when it reaches this offset: nothing more is written and nothing is
    /// undone. At the new file's length, it dies after the trailer and before the commit.
    Death(u64),
}

#[derive(Debug)]
struct Gate {
    file: File,
    state: State,
    #[cfg(test)]
    fault: Option<Fault>,
    #[cfg(test)]
    dead: bool,
}

impl Gate {
    /// Writes `bytes` at `offset`, unless the append was abandoned.
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        if self.state != State::Writing {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "the append was abandoned"));
        }
        #[cfg(test)]
        if let Some(Fault::NoSpace(at) | Fault::Death(at)) = self.fault
            && offset + bytes.len() as u64 > at
        {
            let fits = usize::try_from(at.saturating_sub(offset)).unwrap_or(0);
            write_all_at(&self.file, &bytes[..fits], offset)?;
            if matches!(self.fault, Some(Fault::Death(_))) {
                self.dead = true;
            }
            return Err(io::Error::from_raw_os_error(28));
        }
        write_all_at(&self.file, bytes, offset)
    }
}

fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < bytes.len() {
            done += std::os::windows::fs::FileExt::seek_write(
                file,
                &bytes[done..],
                offset + done as u64,
            )?;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Shared {
    gate: Mutex<Gate>,
    path: PathBuf,
    journal_path: PathBuf,
    journal: Journal,
    lock: WriteLock,
}

impl Shared {
    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Abandon for Shared {
    fn abandon(&self) {
        let mut gate = self.gate();
        if gate.state != State::Writing {
            return;
        }
        gate.state = State::Abandoned;
        #[cfg(test)]
        if gate.dead {
            return;
        }
        // If undoing fails, the journal stays: readers still see the old file, and `repair`
        // (or the next append) finishes the job.
        if journal::roll_back(&gate.file, &self.journal, &self.journal_path).is_ok() {
            self.lock.set_appending(None);
        }
    }
}

/// Where an [`Appender`]'s bytes go: after the file's old end, through positioned writes that
/// stop the moment the append is abandoned.
#[derive(Debug)]
pub struct AppendSink {
    shared: Arc<Shared>,
    buffer: Vec<u8>,
    /// The file offset `buffer` starts at.
    pos: u64,
}

impl AppendSink {
    fn write_out(&mut self) -> io::Result<()> {
        if !self.buffer.is_empty() {
            self.shared.gate().write_at(&self.buffer, self.pos)?;
            self.pos += self.buffer.len() as u64;
            self.buffer.clear();
        }
        Ok(())
    }
}

impl Write for AppendSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buffer.len() + bytes.len() > BUFFER {
            self.write_out()?;
        }
        if bytes.len() >= BUFFER {
            self.shared.gate().write_at(bytes, self.pos)?;
            self.pos += bytes.len() as u64;
        } else {
            self.buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()
    }
}

/// Adds objects to an existing v1.x file in place, holding the file's [`WriteLock`]. Obtained
/// from [`append`] or [`try_append`]; add objects through the [`Writer`] methods it dereferences
/// to, then [`Appender::finish`]. Dropped unfinished (an error, a panic), it truncates the file
/// back to exactly its old bytes.
#[derive(Debug)]
pub struct Appender {
    inner: Option<Writer<AppendSink>>,
    shared: Arc<Shared>,
    registration: u64,
}

/// Opens a v1.x file for appending, waiting while another process writes it. A journal left by
/// an append that was killed is undone first.
///
/// # Errors
/// `unrepresentable` for v0.1 files (convert them first), any rule the existing file breaks,
/// and I/O errors (the file not existing among them).
pub fn append(path: impl AsRef<Path>, options: &Options) -> Result<Appender> {
    Appender::open(path.as_ref(), options, true, None)
}

/// As [`append`], but fails at once with [`ErrorKind::Busy`](crate::ErrorKind::Busy) when
/// another process is writing the file.
///
/// # Errors
/// As [`append`], and `Busy`.
pub fn try_append(path: impl AsRef<Path>, options: &Options) -> Result<Appender> {
    Appender::open(path.as_ref(), options, false, None)
}

fn not_found(path: &Path) -> Error {
    Error::io("cannot open", Some(path.to_owned()), io::ErrorKind::NotFound.into())
}

/// Opens the locked file for writing, checking it is still the locked one.
fn open_locked(lock: &WriteLock) -> Result<File> {
    let path = lock.path();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io("cannot open for writing", Some(path.to_owned()), e))?;
    let meta = file.metadata().map_err(|e| Error::io("cannot stat", Some(path.to_owned()), e))?;
    if FileId::of(&meta) != lock.id() {
        return Err(Error::io(
            "cannot open for writing",
            Some(path.to_owned()),
            io::Error::other("the file was replaced by a program that does not take its lock"),
        ));
    }
    Ok(file)
}

/// Undoes an append whose journal was left behind; removes a journal that describes another
/// file or state. Returns what was undone.
fn undo_leftover(file: &File, lock: &WriteLock, journal_path: &Path) -> Result<Option<Recovered>> {
    let len = file.metadata().map_err(|e| Error::io("cannot stat", None, e))?.len();
    match Journal::read_matching(journal_path, lock.id(), file)? {
        Some(j) => {
            journal::roll_back(file, &j, journal_path)?;
            Ok(Some(Recovered { end: j.old_len, discarded: len - j.old_len, pid: Some(j.pid()) }))
        }
        None => {
            journal::remove(journal_path)?;
            Ok(None)
        }
    }
}

impl Appender {
    #[cfg_attr(not(test), allow(unused_variables))]
    fn open(
        path: &Path,
        options: &Options,
        wait: bool,
        #[cfg(test)] fault: Option<Fault>,
        #[cfg(not(test))] fault: Option<()>,
    ) -> Result<Appender> {
        let lock = if wait { WriteLock::acquire(path)? } else { WriteLock::try_acquire(path)? };
        let lock = lock.ok_or_else(|| not_found(path))?;
        let real = lock.path().to_owned();
        if !lock.claim_append() {
            // Two appenders of one process would share the lock and write over each other.
            return Err(Error::busy(real));
        }
        let claim = Claim(&lock);
        let file = open_locked(&lock)?;
        let journal_path = Journal::path_for(&real)?;
        undo_leftover(&file, &lock, &journal_path)?;
        let _ = ztensor_source::remove_stale_temporaries(&real);

        let source = FileSource::new(
            file.try_clone().map_err(|e| Error::io("cannot open", Some(real.clone()), e))?,
        )
        .map_err(|e| Error::io("cannot stat", Some(real.clone()), e))?;
        let len = source.len();
        let reader = Reader::new(source, options)?;
        if reader.version() == Version::V0_1 {
            return Err(FormatError::new(
                Rule::Unrepresentable,
                "append needs a v1.x file; convert it first",
            )
            .into());
        }
        let base = reader.manifest().manifest().clone();
        drop(reader);

        let journal = Journal::of(&file, lock.id(), len)
            .map_err(|e| Error::io("cannot read", Some(real.clone()), e))?;
        // Nothing fallible until the appender exists, whose drop releases the claim.
        std::mem::forget(claim);
        let gate = Gate {
            file,
            state: State::Writing,
            #[cfg(test)]
            fault,
            #[cfg(test)]
            dead: false,
        };
        let shared =
            Arc::new(Shared { gate: Mutex::new(gate), path: real, journal_path, journal, lock });
        // Registered before the journal exists, and the journal written under the gate: a
        // signal either comes first (and nothing is written) or undoes the journal too.
        let Some(registration) = ztensor_source::register_work(Arc::downgrade(&shared) as _) else {
            shared.lock.release_append();
            return Err(Error::io(
                "cannot append to",
                Some(shared.path.clone()),
                io::Error::new(io::ErrorKind::Interrupted, "the process was told to stop"),
            ));
        };
        // From here on, dropping the appender undoes everything (and releases the claim).
        let mut appender = Appender { inner: None, shared, registration };
        {
            let gate = appender.shared.gate();
            if gate.state != State::Writing {
                return Err(Error::io(
                    "cannot append to",
                    Some(appender.shared.path.clone()),
                    io::Error::new(io::ErrorKind::Interrupted, "the append was abandoned"),
                ));
            }
            appender.shared.journal.write(&appender.shared.journal_path)?;
            appender.shared.lock.set_appending(Some(len));
        }
        // Outside the gate, so that a signal's undoing can proceed while a test holds it here.
        ztensor_source::pause::point(ztensor_source::pause::at::APPEND_JOURNAL);
        let sink =
            AppendSink { shared: Arc::clone(&appender.shared), buffer: Vec::new(), pos: len };
        appender.inner = Some(Writer::resume(sink, base, len)?);
        Ok(appender)
    }

    /// The file's length before this append: what it goes back to if the append fails.
    pub fn old_len(&self) -> u64 {
        self.shared.journal.old_len
    }

    /// Writes the new manifest and makes it durable, then writes and syncs the trailer, then
    /// commits by removing the journal. Returns the new file length.
    ///
    /// # Errors
    /// Any rule the new manifest breaks, and I/O errors. On any error the file is truncated
    /// back to exactly its old bytes (or, if even that fails, its journal stays and readers see
    /// the old file until [`repair`]).
    pub fn finish(mut self) -> Result<u64> {
        let io = |what: &'static str, path: &Path| {
            let path = path.to_owned();
            move |e| Error::io(what, Some(path), e)
        };
        let Some(inner) = self.inner.take() else {
            return Err(io("finishing", &self.shared.path)(io::ErrorKind::Interrupted.into()));
        };
        let (mut sink, trailer, len) = inner.finish_manifest()?;
        let path = self.shared.path.clone();
        sink.flush().map_err(io("writing", &path))?;
        let mut gate = self.shared.gate();
        gate.file.sync_data().map_err(io("syncing", &path))?;
        ztensor_source::pause::point(ztensor_source::pause::at::APPEND_MANIFEST);
        gate.write_at(&trailer, sink.pos).map_err(io("writing the trailer of", &path))?;
        gate.file.sync_all().map_err(io("syncing", &path))?;
        ztensor_source::pause::point(ztensor_source::pause::at::APPEND_TRAILER);
        #[cfg(test)]
        if gate.fault == Some(Fault::Death(len)) {
            gate.dead = true;
            return Err(io("committing", &path)(io::ErrorKind::Interrupted.into()));
        }
        journal::remove(&self.shared.journal_path)?;
        ztensor_source::pause::point(ztensor_source::pause::at::APPEND_COMMITTED);
        gate.state = State::Committed;
        drop(gate);
        self.shared.lock.set_appending(None);
        Ok(len)
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.shared.abandon();
        ztensor_source::unregister_work(self.registration);
        self.shared.lock.release_append();
    }
}

/// Releases an append claim if opening fails before the appender exists.
struct Claim<'a>(&'a WriteLock);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.release_append();
    }
}

impl Appender {
    fn inner(&self) -> &Writer<AppendSink> {
        // Present until `finish`, which consumes the appender.
        self.inner.as_ref().unwrap_or_else(|| unreachable!("an appender is finished only once"))
    }

    fn inner_mut(&mut self) -> &mut Writer<AppendSink> {
        self.inner.as_mut().unwrap_or_else(|| unreachable!("an appender is finished only once"))
    }
}

crate::writer::delegate_writing!(Appender, AppendSink);

/// Where a file's last complete state ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// The end of the file as far as that state is concerned (just after its trailer).
    pub end: u64,
    /// Bytes after `end`: the remains of an unfinished append (0 for a sound file).
    pub discarded: u64,
    /// The process that ran the unfinished append, when its journal names it.
    pub pid: Option<u32>,
}

/// Opens `source`, falling back to the last complete manifest before its end when the file
/// does not end with a valid one, found by scanning backwards for footer magics.
///
/// This is a salvage tool for files torn without a journal (by another program, or by a
/// version of this crate that kept none): the manifest it finds may have been carried inside
/// the appended data, which nothing in the file can tell apart from a real one. Files appended
/// by this crate need no scan: [`FileSource::open`] and [`repair`] use the append's journal.
///
/// # Errors
/// The error of opening the file normally, when no earlier complete manifest exists.
pub fn recover<S: ReadAt>(source: S, options: &Options) -> Result<(Reader<S>, Recovered)> {
    let len = source.len();
    let first = match load_manifest(&source, len, options) {
        Ok(_) => {
            return Ok((
                Reader::with_end(source, len, options)?,
                Recovered { end: len, discarded: 0, pid: None },
            ));
        }
        Err(e) => e,
    };
    let head = read_vec(&source, 0, len.min(8), "the header")?;
    if Container::detect(&head).ok() != Some(Container::V1) {
        return Err(first);
    }
    // Each candidate costs a manifest decode, so a file stuffed with magic strings gets a
    // bounded number of attempts, and the scan a bounded number of bytes.
    const WINDOW: u64 = 1 << 20;
    const MAX_ATTEMPTS: usize = 256;
    const MAX_SCAN: u64 = 1 << 30;
    let mut attempts = 0;
    let min_end = Container::V1.min_file_len();
    let mut hi = len;
    while hi >= min_end && len - hi <= MAX_SCAN {
        let lo = hi.saturating_sub(WINDOW).max(min_end - 8);
        let window = read_vec(&source, lo, hi - lo, "a recovery window")?;
        for i in (0..window.len().saturating_sub(7)).rev() {
            if window[i..i + 8] == MAGIC_V1 {
                let end = lo + i as u64 + 8;
                if end >= len || end < min_end {
                    continue;
                }
                attempts += 1;
                if attempts > MAX_ATTEMPTS {
                    return Err(first);
                }
                if load_manifest(&source, end, options).is_ok() {
                    let reader = Reader::with_end(source, end, options)?;
                    return Ok((reader, Recovered { end, discarded: len - end, pid: None }));
                }
            }
        }
        if lo <= min_end - 8 {
            break;
        }
        // Overlap by 7 bytes so a magic spanning two windows is seen.
        hi = lo + 7;
    }
    Err(first)
}

/// What [`repair`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// The file was sound; nothing was written.
    Sound,
    /// The file was truncated back to its last complete state.
    Restored(Recovered),
}

/// Restores the last complete state of a file whose append was interrupted (killed, a lost
/// power, a full disk that stopped the undo): truncates it back to the length its journal
/// records and removes the journal. Needs no free space, waits while another process writes
/// the file, and is idempotent: a sound file is left alone.
///
/// # Errors
/// The file's own error when it is not sound and has no journal (see [`repair_by_scan`]),
/// and I/O errors.
pub fn repair(path: impl AsRef<Path>, options: &Options) -> Result<Repair> {
    repair_with(path.as_ref(), options, false)
}

/// As [`repair`], and for a file with no journal that does not end with a valid manifest,
/// truncates it to the last complete manifest that [`recover`] finds by scanning, with the
/// caveat given there.
///
/// # Errors
/// As [`repair`], when no earlier complete manifest exists either.
pub fn repair_by_scan(path: impl AsRef<Path>, options: &Options) -> Result<Repair> {
    repair_with(path.as_ref(), options, true)
}

fn repair_with(path: &Path, options: &Options, scan: bool) -> Result<Repair> {
    let lock = WriteLock::acquire(path)?.ok_or_else(|| not_found(path))?;
    let file = open_locked(&lock)?;
    let real = lock.path().to_owned();
    let journal_path = Journal::path_for(&real)?;
    let undone = undo_leftover(&file, &lock, &journal_path)?;
    let io = |what: &'static str| {
        let path = real.clone();
        move |e| Error::io(what, Some(path), e)
    };
    let source =
        FileSource::new(file.try_clone().map_err(io("cannot open"))?).map_err(io("cannot stat"))?;
    if let Some(recovered) = undone {
        // The state the journal vouched for must open; say so now if it does not.
        Reader::new(source, options)?;
        return Ok(Repair::Restored(recovered));
    }
    if !scan {
        Reader::new(source, options)?;
        return Ok(Repair::Sound);
    }
    let (_, recovered) = recover(source, options)?;
    if recovered.discarded == 0 {
        return Ok(Repair::Sound);
    }
    file.set_len(recovered.end).map_err(io("cannot truncate"))?;
    file.sync_all().map_err(io("syncing"))?;
    Ok(Repair::Restored(recovered))
}

#[cfg(test)]
mod tests;
