//! The subcommands.

pub mod info;
pub mod repack;
pub mod tb;
