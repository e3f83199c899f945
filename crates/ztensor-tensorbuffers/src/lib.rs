//! TensorBuffers (`TBS1`): a reader that validates everything, a writer whose output is
//! byte-identical to the real writer's, a working append, and conversion to and from every
//! zTensor version.
//!
//! A TensorBuffers file is `TBS1`, the tensors' raw bytes back to back (no alignment), a
//! FlatBuffer of metadata, its size as u32 LE, and `TBS1` again. This crate keeps the format out
//! of the zTensor core; `spec/tensorbuffers.md` lists its rules.
//!
//! # Example
//!
//! ```
//! use ztensor_tensorbuffers::{DataType, ReadOptions, TbFile, TbWriter};
//!
//! let mut writer = TbWriter::new(Vec::new())?;
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! writer.add("weight", DataType::Float32, &[3], &data)?;
//! let (file, _) = writer.finish()?;
//!
//! let reader = TbFile::new(&file[..], &ReadOptions::default())?;
//! assert_eq!(reader.get("weight").map(|t| t.data_offset), Some(4));
//! assert_eq!(reader.data("weight")?.as_ref(), &data[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod convert;
mod error;
mod metadata;
mod read;
mod schema;
mod write;

pub use crate::convert::TbSink;
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::read::{MAGIC, ReadOptions, TbFile};
pub use crate::schema::{
    DataType, Metadata, Operation, TensorEntry, decode_metadata, encode_metadata, tensor_id,
};
pub use crate::write::{Pieces, TbWriter, append, create};
