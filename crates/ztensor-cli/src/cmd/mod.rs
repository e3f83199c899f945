//! The subcommands.

pub mod dump;
pub mod info;
pub mod repack;
pub mod tb;
