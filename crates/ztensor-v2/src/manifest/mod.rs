//! The manifest's schema (`spec/ztensor-2.md` §2.4–2.8): objects made of parts that point at
//! blobs, the shard table, attributes; parsed from the decoded tree, then validated as a whole.

mod parse;
mod types;
mod validate;

pub use parse::*;
pub use types::*;
pub use validate::*;

#[cfg(test)]
mod tests;
