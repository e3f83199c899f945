//! Read and write zTensor files of versions 0.1, 1.1 and 1.2.
//!
//! [`Reader`] opens any version from any [`ReadAt`] source (a file read with positional reads,
//! a memory map, a byte slice) and validates the manifest with `ztensor-format`.
//! [`Reader::object`] gives an [`Object`] handle, and [`Object::component`] a [`Component`]
//! handle, which read on demand: zero-copy typed views of raw data, owned decoding for zstd, big-endian
//! v0.1 data and misaligned slices, digests verified on request, v0.1 sparse tensors presented
//! in the 1.2 object model. [`Writer`] writes any version one component at a time;
//! [`FileWriter`] publishes through a temporary file and a rename.
//!
//! The format-neutral interface it reads and writes through (byte sources, tensor sources and
//! sinks, the error type, publishing and locking files, and the workspace's `unsafe`: the
//! memory map, the system calls std lacks, allocator-zeroed buffers) is `ztensor-source`,
//! re-exported here under the names it always had.
//!
//! # Features
//!
//! All on by default; a reader that can do without one turns it off:
//! - `zstd`: zstd components (the `zstd` crate and its C library). Without it, a zstd
//!   component is [unsupported](ErrorKind::Unsupported), naming the feature, and writing one is
//!   an error ([`codec::ZSTD`] says which build this is).
//! - `blake3`: BLAKE3 digests. Without it, a BLAKE3 digest is unverifiable, as one of an
//!   unknown algorithm is, and writing one is an error. SHA-256 and CRC-32C are always there.
//! - `mmap`: `Mapped`, memory-mapped reading (`memmap2`). Without it, files are read with
//!   positional reads.
//!
//! # Example
//!
//! ```
//! use ztensor_io::{Reader, Writer, WriteOptions, role};
//! use ztensor_format::{DType, DigestAlgorithm, Options, Version};
//!
//! let weights: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! let mut writer = Writer::new(Vec::new(), Version::V1_2)?;
//! let options = WriteOptions::zstd(3).with_digest(DigestAlgorithm::Sha256);
//! writer.add_dense("w", &[2, 2], DType::F32, &weights, &options)?;
//! let (file, _len) = writer.finish()?;
//!
//! let reader = Reader::new(&file[..], &Options::default())?;
//! let w = reader.object("w")?;
//! assert_eq!(w.shape(), [2, 2]);
//! let data = w.component(role::DATA)?;
//! data.verify()?;
//! assert_eq!(data.read_as::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
//! for object in reader.objects() {
//!     println!("{} {:?} {}", object.name(), object.shape(), object.format());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]
#![deny(missing_docs)]

mod append;
pub mod codec;
mod copy;
mod handle;
mod reader;
mod rewrite;
mod sharing;
pub mod weight_map;
mod write_data;
mod write_stream;
mod writer;

pub use crate::append::{
    AppendSink, Appender, Recovered, Repair, append, recover, repair, repair_by_scan, try_append,
};
pub use crate::copy::{CopyOptions, DigestChoice, copy_all, copy_object};
pub use crate::handle::{Component, Object};
pub use crate::reader::{DigestCheck, Element, Reader, ZtensorObjects, check_sparse};
pub use crate::rewrite::{remove_objects, rewrite};
pub use crate::write_data::write_data;
pub use crate::write_stream::{Held, write_source_object};
pub use crate::writer::{
    ComponentSpec, Compression, Coo, Csr, FileWriter, StoredComponent, Tally, WriteOptions, Writer,
};
pub use ztensor_format::role;
/// The format-neutral interface ([`ztensor_source`]), under the names it has always had here:
/// byte sources, tensor sources and sinks, the error type, publishing and locking files.
pub use ztensor_source::{
    AtomicFile, Chunked, ComponentData, ComponentInfo, Decoded, Error, ErrorKind, Excluding,
    FileId, FileSource, OBJECT_COST, ObjectData, ObjectInfo, OutputDir, READER_PATIENCE, RawRange,
    ReadAt, Result, Stored, StoredRanges, TensorSink, TensorSource, Undo, WriteLock,
    address_space_cap, check_expansion, check_output, check_read_expansion, close_names,
    fit_allocator_to_address_space, interrupt, machine_limits, machine_options, on_interrupt,
    open_input, pause, peak_resident, physical_memory, raise_open_file_limit, read_input,
    read_without_lock, remove_stale_temporaries, shard_label, split_by_size, try_with_capacity,
    try_zeroed, will_read,
};
#[cfg(feature = "mmap")]
pub use ztensor_source::{Mapped, PrivateMap};

/// The writer's streaming protocol, for code that places blobs itself (the parallel engine of
/// `ztensor-par`): [`Streaming`](low_level::Streaming) on a [`Writer`] checks an object, gives a
/// [`BlobWriter`](low_level::BlobWriter) for its blob (bytes in order, or at reserved
/// [`BlobSlot`](low_level::BlobSlot)s any thread fills), and adds the object described from the
/// [`PlacedBlob`](low_level::PlacedBlob). The types keep a blob whole: nothing else can be
/// written while one is open, and its place is known only once it is finished. The object
/// pushed is checked with the whole manifest when the writer finishes.
///
/// Also here: how [`copy_object`] decides, so an engine that copies objects itself decides
/// alike ([`copies_stored`](low_level::copies_stored),
/// [`write_options_for`](low_level::write_options_for)), leaves objects that share a blob to it
/// ([`shares_blob`](low_level::shares_blob)) and checks what the copy will write first
/// ([`check_copy`](low_level::check_copy)). And what the writers do with bytes that
/// are final, for another writer of the workspace to do alike
/// ([`start_writeback`](low_level::start_writeback)).
pub mod low_level {
    pub use crate::copy::{check_copy, copies_stored, shares_blob, write_options_for};
    pub use crate::writer::{BlobSlot, BlobWriter, PlacedBlob, Streaming};
    pub use ztensor_source::start_writeback;
}

/// The library example of the workspace's README, compiled and run as a doctest so that it
/// keeps working as written.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// What a build without the optional codecs does with content that needs them: each is
/// unsupported or unverifiable, with the reason, never a wrong value. Run by
/// `cargo xtask features` (`cargo test -p ztensor-io --no-default-features --lib
/// without_features`).
#[cfg(all(test, not(feature = "zstd"), not(feature = "blake3")))]
mod without_features {
    use ztensor_format::DigestAlgorithm;

    use crate::codec;

    #[test]
    fn a_zstd_component_is_unsupported_and_names_the_feature() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../ztensor-conformance/fixtures/v1.2/valid/zstd.zt"
        );
        let reader = crate::Reader::open(file).expect("the manifest needs no zstd");
        let object = reader.manifest().objects().next().expect("an object");
        let component = reader.component(object.name(), "data").expect("its data");
        for e in [component.decoded().unwrap_err(), component.decoded_verified().unwrap_err()] {
            assert!(matches!(e.kind(), crate::ErrorKind::Unsupported(_)), "{e}");
            assert!(e.to_string().contains("`zstd` feature"), "{e}");
        }
        let streamed = component.decode_pieces(true, u64::MAX, 4096, |_| Ok(())).unwrap_err();
        assert!(matches!(streamed.kind(), crate::ErrorKind::Unsupported(_)), "{streamed}");
        assert_eq!(
            codec::zstd_encode(b"x", 3).unwrap_err().kind(),
            std::io::ErrorKind::Unsupported
        );
    }

    #[test]
    fn blake3_is_an_algorithm_this_build_cannot_compute() {
        assert!(codec::Hasher::new(&DigestAlgorithm::Blake3).is_none());
        assert!(codec::digest_of(&DigestAlgorithm::Blake3, b"").is_none());
        assert!(codec::Combiner::new(&DigestAlgorithm::Blake3, 1024).is_none());
        // SHA-256 and CRC-32C stay.
        assert!(codec::digest_of(&DigestAlgorithm::Sha256, b"").is_some());
        assert!(codec::digest_of(&DigestAlgorithm::Crc32c, b"").is_some());
    }
}
