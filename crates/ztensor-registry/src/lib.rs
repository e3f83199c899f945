//! One table of the tensor formats ztensor reads, and the two things every program that takes
//! "a file of tensors" does with it: tell what a file (or a buffer) is by its content, and open
//! it as a [`TensorSource`](ztensor_io::TensorSource).
//!
//! The command-line tool, the Python package and the conformance dump all go through
//! [`detect`] and [`open`]; none of them looks at magic numbers itself. [`FORMATS`] lists
//! every format read, with the rule that recognises it, its name, the cargo feature that
//! enables it and its usual extensions; [`NOT_READ`] lists the formats people bring that are
//! recognised and named but not read. Adding a format is: implement
//! [`TensorSource`](ztensor_io::TensorSource) for it, add a [`Kind`], and add its row (and its arm in `Detected::open`).
//!
//! ```
//! use ztensor_registry::{Kind, detect_bytes};
//!
//! let mut zt = b"ZTEN0001".to_vec();
//! zt.extend_from_slice(&[0; 64]);
//! assert_eq!(detect_bytes(&zt, None).unwrap(), Kind::Zt);
//! let hdf5 = b"\x89HDF\r\n\x1a\n\0\0\0\0".to_vec();
//! let refused = detect_bytes(&hdf5, None).unwrap_err();
//! assert!(refused.to_string().contains("an HDF5 file"));
//! ```
//!
//! Writing goes through here too: [`Target`] is the table of formats written (by name, as
//! `--to` gives it, and by an output's extension), and [`write_file`] / [`write_to`] the one
//! conversion the command-line tool and the Python package run, after [`Conversion::check`]
//! has held their request to the same rules.
//!
//! Features (all on by default): `safetensors`, `numpy`, `gguf`, `torch`, `tensorbuffers`,
//! `sharded`, `v2` (zTensor 2), `write` (the formats written, on ztensor-par's engine). A file of a format whose feature is off is still recognised, and refused with
//! the feature named. Off by default: `remote`, which adds `open_url` (a file in object
//! storage, `s3://`, `gs://`, `az://`, `http(s)://`, read by ranges through the same readers).

#![deny(missing_docs)]
// Arms and helpers for formats whose features are off go unused in such builds.
#![cfg_attr(
    not(all(
        feature = "safetensors",
        feature = "numpy",
        feature = "gguf",
        feature = "torch",
        feature = "tensorbuffers",
        feature = "sharded",
        feature = "v2"
    )),
    allow(dead_code, unused_imports, unused_variables, unused_mut, unreachable_code)
)]

mod alone;
#[cfg(feature = "write")]
mod conversion;
mod detect;
mod open;
mod opened;
mod place;
#[cfg(feature = "write")]
pub mod plans;
#[cfg(feature = "remote")]
mod remote;
mod table;
#[cfg(feature = "write")]
mod write;

#[cfg(feature = "write")]
pub use conversion::{Conversion, Refusal, Request, Rule, Sharding, Spelling, not_over, same_file};
pub use detect::{
    Detected, Error, ErrorKind, HEAD_LEN, detect, detect_bytes, detect_head, detect_source,
};
#[cfg(feature = "v2")]
pub use open::content_id;
#[cfg(all(feature = "safetensors", feature = "sharded"))]
pub use open::stitch_dcp_shards;
pub use open::{open, open_bytes, open_mapped};
pub use opened::{OpenError, OpenOptions, Opened};
#[cfg(feature = "tensorbuffers")]
pub use place::open_tb_at;
#[cfg(feature = "v2")]
pub use place::open_zt2_at;
pub use place::{Place, open_zt_at};
#[cfg(feature = "remote")]
pub use remote::open_url;
pub use table::{FORMATS, Format, Kind, NOT_READ, accepted};
#[cfg(feature = "write")]
pub use write::{
    TARGET_NAMES, Target, TargetError, WriteError, WriteOptions, Written, write_file, write_to,
};

#[cfg(test)]
mod tests;
