//! The format-neutral interface of the zTensor workspace, which every format crate implements
//! and every front end reads through:
//!
//! - where bytes are read from: [`ReadAt`] (positional reads) over a file ([`FileSource`]), a
//!   memory map ([`Mapped`], [`PrivateMap`]), bytes in memory, or any source another crate
//!   provides (an object in a bucket);
//! - what a file of tensors is, whatever its format: a [`TensorSource`] lists objects in the
//!   1.2 object model ([`ObjectInfo`]) and gives them decoded ([`ObjectData`]), a
//!   [`TensorSink`] writes everything a source holds; the limits every reader is held to
//!   ([`check_expansion`]);
//! - how files are written and shared with other processes: published whole through a
//!   temporary file and a rename ([`AtomicFile`], [`OutputDir`]), locked while written
//!   ([`WriteLock`]), appends journaled ([`journal`]) so that a reader never sees half of one
//!   and an interrupt takes back what was being written ([`interrupt`], [`on_interrupt`]);
//! - the one error type ([`Error`]) every format's reading and writing reports through.
//!
//! It knows no container format: zTensor 0.1/1.x is `ztensor-io`, zTensor 2 `ztensor-v2`, the
//! foreign formats `ztensor-foreign`, and so on, each depending on this crate.
//!
//! # Features
//!
//! - `mmap`: [`Mapped`] and [`PrivateMap`] (`memmap2`).
//! - `blake3`: append journals of earlier releases, whose digests are BLAKE3, are still
//!   recognised and undone.

#![deny(unsafe_code)]
#![deny(missing_docs)]

#[allow(unsafe_code)]
mod buffer;
mod data;
#[allow(unsafe_code)]
mod dir;
mod error;
mod input;
pub mod journal;
mod lock;
mod machine;
#[cfg(feature = "mmap")]
#[allow(unsafe_code)]
mod mmap;
#[allow(unsafe_code)]
mod open_files;
mod paths;
pub mod pause;
mod publish;
mod source;
mod tensors;
#[allow(unsafe_code)]
mod writeback;

pub use crate::buffer::{try_with_capacity, try_zeroed};
pub use crate::data::{ComponentData, ObjectData};
pub use crate::dir::OutputDir;
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::input::{open_input, read_input};
pub use crate::lock::{READER_PATIENCE, WriteLock, read_without_lock, same_file};
pub use crate::machine::{
    OBJECT_COST, address_space_cap, machine_limits, machine_options, peak_resident, physical_memory,
};
#[cfg(feature = "mmap")]
pub use crate::mmap::{Mapped, PrivateMap};
pub use crate::open_files::{fit_allocator_to_address_space, raise_open_file_limit};
pub use crate::paths::{FileId, check_output};
pub use crate::publish::{
    Abandon, AtomicFile, Undo, interrupt, on_interrupt, register_work, remove_stale_temporaries,
    unregister_work,
};
pub use crate::source::{Chunked, FileSource, ReadAt};
pub use crate::tensors::{
    ComponentInfo, Decoded, Excluding, ObjectInfo, PIECE, RawRange, Stored, StoredRanges,
    TensorSink, TensorSource, check_expansion, check_read_expansion, close_names, shard_label,
    split_by_size, will_read,
};
pub use crate::writeback::start as start_writeback;
pub use ztensor_format::role;
