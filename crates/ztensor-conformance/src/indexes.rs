/// The index files of a corpus, relative to its root: its own (`index.toml`, which must be
/// there) and, where present, that of the frozen files of other producers and that of the
/// reference's zTensor 2 corpus, whose paths are relative to the root too. `build.rs` embeds
/// what they list, so this list is shared with it.
pub const INDEXES: [&str; 3] =
    ["index.toml", "producers/index.toml", "external/ztensor2/index.toml"];
