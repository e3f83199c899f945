//! Named points where a process can be held still, for tests that stop it at an exact step
//! (an append with its journal written, a file synced but not yet renamed) instead of after a
//! guessed delay.
//!
//! With `ZTENSOR_PAUSE_AT=NAME=FIFO` in its environment, a process that reaches point `NAME`
//! opens `FIFO` for writing, writes the point's name and a newline, closes it, and holds the
//! thread that reached it until the process is killed. Without the variable, or at any other point, a point
//! costs one look at a value read once. The variable is read from the process's own
//! environment, which only whoever starts it sets.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The points, in the order an append or a publication reaches them.
pub mod at {
    /// An append's journal is on disk; nothing after the old end is yet.
    pub const APPEND_JOURNAL: &str = "append-journal";
    /// An append's data and manifest are written and synced; its trailer is not.
    pub const APPEND_MANIFEST: &str = "append-manifest";
    /// An append's trailer is written and synced; its journal still stands.
    pub const APPEND_TRAILER: &str = "append-trailer";
    /// An append's journal is removed: it is committed.
    pub const APPEND_COMMITTED: &str = "append-committed";
    /// A published file's temporary is complete and synced; the target is not yet replaced.
    pub const PUBLISH_SYNCED: &str = "publish-synced";
    /// A published file is renamed over its target; the directory is not yet synced.
    pub const PUBLISH_RENAMED: &str = "publish-renamed";
}

/// Holds the calling thread at point `name` when the environment asks for it (see the module
/// docs); returns at once otherwise.
pub fn point(name: &str) {
    static WANTED: OnceLock<Option<(String, PathBuf)>> = OnceLock::new();
    let wanted = WANTED.get_or_init(|| {
        let value = std::env::var_os("ZTENSOR_PAUSE_AT")?.into_string().ok()?;
        let (point, fifo) = value.split_once('=')?;
        Some((point.to_owned(), PathBuf::from(fifo)))
    });
    let Some((point, fifo)) = wanted else { return };
    if point != name {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(fifo) {
        use std::io::Write;
        let _ = writeln!(f, "{name}");
        // Closed, so that the reader sees the end of what was said.
        drop(f);
        // Held until killed: the test decides what happens next.
        loop {
            std::thread::park();
        }
    }
}
