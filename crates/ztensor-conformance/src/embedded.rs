//! The corpus compiled into this crate (by `build.rs`): the indexes and every file they list,
//! with the golden dumps beside them. An installed `ztensor-conformance run` grades from it,
//! so it needs neither a checkout nor the directory it was built in; implementations are
//! given paths, so it is written out to a private scratch directory first ([`unpack`]).

use std::path::Path;

use anyhow::{Context as _, Result};

use crate::scratch::Scratch;

include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// Every file of the embedded corpus: (path relative to the corpus's root, bytes), sorted by
/// path.
pub fn files() -> &'static [(&'static str, &'static [u8])] {
    FILES
}

/// The embedded corpus, written out to a new private directory (removed when the returned
/// [`Scratch`] is dropped), to be graded from as `--fixtures` would be.
///
/// # Errors
/// When the directory or a file in it cannot be written.
pub fn unpack() -> Result<Scratch> {
    let scratch = Scratch::new("corpus")?;
    write_to(scratch.path())?;
    Ok(scratch)
}

/// Writes the embedded corpus under `root` (which exists).
fn write_to(root: &Path) -> Result<()> {
    for (file, bytes) in FILES {
        let path = root.join(file);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
        }
        std::fs::write(&path, bytes).with_context(|| path.display().to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_corpus_is_the_one_in_the_crate() {
        let source = crate::corpus();
        let entries = crate::index::read_all(&source).unwrap();
        let embedded: std::collections::BTreeMap<_, _> = files().iter().copied().collect();
        // Every file an index lists, and every golden dump beside one, byte for byte.
        for e in &entries {
            for file in [e.file.clone(), crate::dump_path(&e.file)] {
                let on_disk = std::fs::read(source.join(&file));
                match (embedded.get(file.as_str()), on_disk) {
                    (Some(bytes), Ok(disk)) => assert!(*bytes == disk.as_slice(), "{file} differs"),
                    (None, Err(_)) => {} // a rejected file has no golden dump
                    (Some(_), Err(e)) => panic!("{file}: embedded, but not in the crate: {e}"),
                    (None, Ok(_)) => panic!("{file}: in the crate, but not embedded"),
                }
            }
        }
        // And unpacked, it reads as the crate's own does.
        let unpacked = unpack().unwrap();
        assert_eq!(crate::index::read_all(unpacked.path()).unwrap(), entries);
        // Nothing outside what the indexes need: no foreign formats, no hostile measurements.
        assert!(
            files()
                .iter()
                .all(|(f, _)| !f.starts_with("hostile/") && !f.starts_with("external/pytorch/"))
        );
    }
}
