//! Foreign tensor formats for zTensor, kept out of the zTensor crates themselves:
//!
//! - [`safetensors`]: safetensors files in (every dtype zTensor can hold, FP8 as `u8` with the
//!   1.2 logical type, `__metadata__` as file attributes, tensors read in pieces or borrowed
//!   from a map and written on all threads) and out (dense objects; zstd decoded first; sparse
//!   and quantized objects refused by name).
//! - [`dcp_shards`]: the safetensors shards a Distributed Checkpoint saves through DCP's
//!   `HuggingFaceStorageWriter` (each rank's chunks, placed by `DCP_SHARDING_INFO`).
//! - [`sharded`]: Hugging Face sharded checkpoints (`model.safetensors.index.json` and its
//!   shards), checked for agreement between index and shards, converted into one file.
//! - [`npy`]: one object as a NumPy `.npy` array, and its values as text.
//! - [`gguf`]: GGUF files (llama.cpp) in: metadata as file attributes, plain tensors as dense
//!   objects, quantized tensors' blocks kept exactly with their GGML type and shape.
//! - [`npz`]: NumPy `.npz` archives in (stored or deflated members, CRC-checked).
//! - [`torch`]: PyTorch checkpoints (`torch.save` zip archives) in, through a restricted
//!   pickle machine that executes nothing.
//! - [`npy_in`]: NumPy `.npy` files in, as a tensor source of one object (object arrays are
//!   never unpickled).
//!
//! Each family is a feature, all on by default: `safetensors` (with `sharded`), `numpy`
//! (`npy`, `npy_in`, `npz`), `gguf` and `torch`; a crate that needs one format takes only its
//! dependencies (`default-features = false, features = ["gguf"]`).
//!
//! ```
//! use ztensor_foreign::safetensors::SafetensorsFile;
//! use ztensor_io::TensorSource;
//!
//! // A safetensors file of one f32 tensor: the header's length, the header, then the data.
//! let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
//! let mut file = (header.len() as u64).to_le_bytes().to_vec();
//! file.extend_from_slice(header);
//! file.extend_from_slice(&[1.5f32.to_le_bytes(), 2.5f32.to_le_bytes()].concat());
//! let st = SafetensorsFile::new(file).unwrap();
//! let w = st.info(0).unwrap();
//! assert_eq!((w.name.as_ref(), w.shape.as_ref()), ("w", &[2u64][..]));
//! let data = st.read(0).unwrap();
//! assert_eq!(data.components["data"].bytes.len(), 8);
//! ```

// Helpers shared by several formats go unused in builds with only some of them.
#![cfg_attr(
    not(all(feature = "safetensors", feature = "numpy", feature = "gguf", feature = "torch")),
    allow(dead_code)
)]
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod archive;
#[cfg(feature = "torch")]
pub mod dcp;
#[cfg(feature = "safetensors")]
pub mod dcp_shards;
mod error;
#[cfg(feature = "gguf")]
pub mod gguf;
#[cfg(feature = "numpy")]
pub mod npy;
#[cfg(feature = "numpy")]
pub mod npy_in;
#[cfg(feature = "numpy")]
pub mod npz;
#[cfg(feature = "torch")]
mod pickle;
#[cfg(feature = "safetensors")]
pub mod safetensors;
#[cfg(feature = "safetensors")]
pub mod sharded;
#[cfg(feature = "torch")]
pub mod torch;
#[cfg(feature = "torch")]
mod torch_dtypes;

pub use crate::archive::{ZipContent, zip_content};
pub use crate::error::{Error, ErrorKind, Result};
/// The pickle machine alone, for its fuzz target (not an interface: a pickle is read as part
/// of a PyTorch checkpoint or a Distributed Checkpoint's `.metadata`).
#[cfg(feature = "torch")]
#[doc(hidden)]
pub use crate::pickle::probe as pickle_probe;
