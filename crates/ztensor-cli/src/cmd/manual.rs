//! The manual pages, made from the parser's own definitions (what `--help` prints), so they
//! never disagree with the tool.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `ztensor.1` and a `ztensor-COMMAND.1` for each command `cli` shows (hidden ones left
/// out) into `dir`, each published whole.
pub fn write(dir: &Path, cli: clap::Command) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let cli = cli.version(env!("CARGO_PKG_VERSION"));
    let mut pages = vec![("ztensor".to_owned(), cli.clone())];
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("ztensor-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name).version(env!("CARGO_PKG_VERSION"))));
    }
    for (name, command) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page)?;
        let mut file = ztensor_io::AtomicFile::create(&path)?;
        file.write_all(&page).with_context(|| format!("cannot write {}", path.display()))?;
        file.persist()?;
    }
    Ok(())
}
