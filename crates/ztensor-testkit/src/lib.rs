//! What the workspace's tests share: [`Scratch`] directories, a seeded [`Rng`], a
//! [`Zip`] builder for archives laid out as any zip writer lays them out, and (Linux) a count
//! of a file's opens, `Opens`.
//!
//! A dev-dependency only (`publish = false`), and it imports no workspace crate, so every
//! crate's tests can use it, `ztensor-format`'s unit tests included.
//!
//! ```
//! let dir = ztensor_testkit::scratch("doc");
//! std::fs::write(dir.join("a"), b"x").unwrap();
//! let mut rng = ztensor_testkit::Rng::new(7);
//! assert!(rng.below(10) < 10);
//! let zip = ztensor_testkit::Zip::new().member("a.npy", b"bytes", true).finish();
//! assert!(zip.starts_with(b"PK\x03\x04"));
//! ```

#[cfg(target_os = "linux")]
mod opens;
mod rng;
mod scratch;
mod zip;

#[cfg(target_os = "linux")]
pub use opens::Opens;
pub use rng::Rng;
pub use scratch::{KEEP_VAR, Scratch, scratch};
pub use zip::Zip;
