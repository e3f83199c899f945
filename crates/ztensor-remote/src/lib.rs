//! Tensor files in object storage: `s3://`, `gs://`, `az://` and `http(s)://` (read only), read
//! and written through Apache Arrow's [`object_store`], behind a blocking API (a private tokio
//! runtime runs the requests).
//!
//! - [`Location`] parses a URL ([`is_url`] tells one from a local path).
//! - [`RemoteObject`] is a [`ReadAt`](ztensor_source::ReadAt): every reader that takes one reads a
//!   remote object, by ranged GETs pinned to the version first seen, with the file's two ends
//!   cached so an open costs a request or two.
//! - [`RemoteUpload`] is a [`std::io::Write`] streaming a multipart upload; the object appears
//!   only when [`RemoteUpload::finish`] completes it, and an upload dropped unfinished is
//!   aborted.
//!
//! Configuration comes from the environment, as each provider's tools take it (see
//! [`RemoteOptions`] for the variables); retries (5xx, throttling, dropped connections, a body
//! cut mid-way resumed where it stopped) are `object_store`'s, bounded by
//! [`RemoteOptions::timeout`]. Errors name the URL and never a credential.
//!
//! ```
//! use ztensor_remote::{ErrorKind, Location, Scheme, is_url};
//!
//! assert!(is_url("s3://bucket/model.zt") && !is_url("model.zt"));
//! let at = Location::parse("s3://bucket/dir/model.zt")?;
//! assert_eq!((at.scheme(), at.bucket(), at.key()), (Scheme::S3, "bucket", "dir/model.zt"));
//! let refused = Location::parse("s3://bucket/").unwrap_err();
//! assert_eq!(refused.kind(), &ErrorKind::InvalidUrl);
//! # Ok::<(), ztensor_remote::Error>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod counters;
mod error;
mod http;
mod location;
mod object;
mod profile;
#[cfg(feature = "fuzzing")]
mod scripted;
mod store;
mod upload;

pub use counters::{Transfer, transfers};
pub use error::{Error, ErrorKind};
pub use http::{ANSWER_LEN, ERROR_BODY_LEN, MAX_REDIRECTS};
pub use location::{Location, Scheme, is_url};
pub use object::{BLOCK_LEN, RemoteObject, SUFFIX_LEN};
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use scripted::{Script, script_answers};
pub use store::RemoteOptions;
pub use upload::{
    Expected, PARALLEL_PARTS, PART_LEN, Provisional, RemoteUpload, abort_unfinished, delete, seen,
};
