//! A zTensor 2 file taken apart for its changes.

/// A file taken apart: everything before the manifest, laid out again.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    /// The magic, then each blob at its offset with zero padding between, up to where the
    /// manifest goes (a multiple of the alignment).
    pub(super) data: Vec<u8>,
    /// Where the non-empty blobs lie (offset, length), in the order they were placed.
    pub(super) blobs: Vec<(u64, u64)>,
    /// The alignment blobs and the manifest are placed at.
    pub(super) alignment: u64,
    /// The footer's reserved field, as the starting file had it.
    pub(super) reserved: u32,
}
