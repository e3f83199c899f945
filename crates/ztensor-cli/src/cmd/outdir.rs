//! A sharded output's directory: what it holds of earlier checkpoints (any version's index,
//! shards and receipts, zTensor 2 roots and shards), refused unless `--force`, which removes
//! exactly those files before anything is written.

use std::path::Path;

use anyhow::{Result, anyhow};

use super::text::listed;

/// The output directory of a sharded conversion, and whether `--force` lets it clear what an
/// earlier one left.
pub(super) struct Dir<'a> {
    pub(super) output: &'a std::path::Path,
    pub(super) force: bool,
}

/// Refuses an output directory that holds a sharded checkpoint already (mixing a second one
/// into it would leave the first's shards beside the new index, or replace some of them),
/// unless `--force`, which removes that checkpoint's files (nothing else) and returns a note
/// naming them. zTensor 2 files there (an earlier `--to 2` conversion) count as well.
pub(super) fn clear(r: &Dir<'_>, plan: &ztensor_shard_write::Plan) -> Result<Option<String>> {
    let occupied = plan.occupied().map_err(|e| crate::reported("", &e))?;
    let inputs: Vec<&Path> = plan.inputs.iter().map(|f| f.path.as_path()).collect();
    clear_occupied(r, occupied, &inputs)
}

/// For a sharded zTensor 2 output: as [`clear`], for a directory where no plan names the
/// output's own index and shards (zTensor 2 files there count as a checkpoint).
pub(super) fn clear_2(r: &Dir<'_>, inputs: &[std::path::PathBuf]) -> Result<Option<String>> {
    let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
    let occupied = ztensor_shard_write::Occupied::in_dir(r.output, None, &[], &inputs)
        .map_err(|e| crate::reported("", &e))?;
    clear_occupied(r, occupied, &inputs)
}

/// `occupied` and the zTensor 2 files in the output directory: refused unless `--force`, which
/// removes them and returns a note naming them.
fn clear_occupied(
    r: &Dir<'_>,
    occupied: ztensor_shard_write::Occupied,
    inputs: &[&Path],
) -> Result<Option<String>> {
    let mut more = zt2_files(r.output, inputs)?;
    more.retain(|name| !occupied.shards.contains(name) && !occupied.indexes.contains(name));
    if occupied.is_empty() && more.is_empty() {
        return Ok(None);
    }
    let mut names = occupied.names();
    names.extend(more.iter().cloned());
    refuse_unless_forced(r, &names)?;
    let dir = super::text::shown(&r.output.display().to_string()).into_owned();
    occupied.clear(r.output).map_err(|e| crate::reported(&format!("cannot clear {dir}"), &e))?;
    remove_in(r.output, &more)?;
    Ok(Some(format!("--force removed the checkpoint {dir} held: {}", listed(&names))))
}

/// The refusal of an occupied output directory, unless `--force`.
fn refuse_unless_forced(r: &Dir<'_>, names: &[String]) -> Result<()> {
    if r.force {
        return Ok(());
    }
    let dir = super::text::shown(&r.output.display().to_string()).into_owned();
    anyhow::bail!(
        "{dir} holds a sharded checkpoint already ({}); --force removes those files (and no \
         others) before writing, even for a conversion run again into its own output; or \
         choose another directory",
        listed(names)
    )
}

/// Removes `names` from `dir`, each a regular file (as listed a moment before).
fn remove_in(dir: &Path, names: &[String]) -> Result<()> {
    for name in names {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                anyhow::bail!("cannot remove {}: {e}", path.display())
            }
            _ => {}
        }
    }
    Ok(())
}

/// The zTensor 2 files directly in `dir` (roots and data shards alike start with its magic),
/// regular files only: links and special files are not looked into. One of `inputs` among
/// them is refused, since clearing the directory would remove it.
fn zt2_files(dir: &Path, inputs: &[&Path]) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => anyhow::bail!("cannot list {}: {e}", dir.display()),
    };
    let inputs: Vec<std::path::PathBuf> =
        inputs.iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect();
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| anyhow!("cannot list {}: {e}", dir.display()))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let path = entry.path();
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if !regular || !name.ends_with(".zt") {
            continue;
        }
        if ztensor_registry::detect(&path).ok() != Some(ztensor_registry::Kind::Zt2) {
            continue;
        }
        if std::fs::canonicalize(&path).is_ok_and(|p| inputs.contains(&p)) {
            anyhow::bail!(
                "{} belongs to a checkpoint there and is also an input; clearing the directory \
                 would remove it (choose another output directory)",
                path.display()
            );
        }
        found.push(name);
    }
    found.sort();
    Ok(found)
}
