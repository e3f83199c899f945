//! Replacing an output is never silent: an output a user names (a file, an object in a bucket)
//! is replaced, and the command says what it held and what of that the new one lacks; what a
//! user did not name (an earlier checkpoint's shards in an output directory) is removed only
//! with `--force` (`outdir`).

use std::path::Path;

/// What a file output held before it was replaced: its format, whether any component was
/// compressed, and the algorithms of its digests. `None` when nothing readable is there.
pub(crate) struct Held {
    format: String,
    compressed: bool,
    digests: std::collections::BTreeSet<String>,
}

/// What the regular file or the object at `path` holds, read through the registry (its
/// manifest, not its data); `None` when there is none. A file that is not one of tensors is
/// said to be so.
pub(crate) fn held(path: &Path) -> Option<Held> {
    let opened = match crate::remote::url_of(path) {
        // An object there (one request: its size and last bytes); none, or none this user may
        // read, holds nothing to name.
        Some(url) => {
            let object = crate::remote::object(url).ok()?;
            ztensor_registry::Detected::object(object)
                .map_err(ztensor_registry::OpenError::Detect)
                .and_then(|d| d.open(&ztensor_registry::OpenOptions::default()))
        }
        None if !std::fs::metadata(path).ok()?.is_file() => return None,
        None => ztensor_registry::open(path, &ztensor_registry::OpenOptions::default()),
    };
    let Ok(opened) = opened else {
        return Some(Held {
            format: "not a file of tensors this tool reads".to_owned(),
            compressed: false,
            digests: std::collections::BTreeSet::new(),
        });
    };
    let source = opened.source();
    let mut held = Held {
        format: source.format_name().into_owned(),
        compressed: false,
        digests: std::collections::BTreeSet::new(),
    };
    for o in (0..source.len()).filter_map(|i| source.info(i)) {
        for c in &o.components {
            held.compressed |= c.encoding != ztensor_format::Encoding::Raw;
            if let Some(d) = &c.digest {
                held.digests.insert(d.algorithm().name().to_owned());
            }
        }
    }
    Some(held)
}

/// The note that `output` replaced a file holding `before`: what it held, and what of that the
/// new file (`after`) no longer has, with the option that keeps it.
pub(crate) fn replaced(output: &Path, before: &Held, after: Option<&Held>) -> String {
    let mut what = before.format.clone();
    if before.compressed {
        what.push_str(", compressed");
    }
    if !before.digests.is_empty() {
        let names: Vec<&str> = before.digests.iter().map(String::as_str).collect();
        what.push_str(&format!(", with {} digests", names.join(" and ")));
    }
    let mut lost = Vec::new();
    if let Some(after) = after {
        if before.compressed && !after.compressed {
            lost.push("its compression (--zstd LEVEL keeps it)".to_owned());
        }
        let gone: Vec<&str> =
            before.digests.difference(&after.digests).map(String::as_str).collect();
        if !gone.is_empty() {
            lost.push(format!("its {} digests (--digest keeps them)", gone.join(" and ")));
        }
    }
    let lost = match lost.is_empty() {
        true => String::new(),
        false => format!("; the new file does not have {}", lost.join(" or ")),
    };
    format!("note: replaced {} ({what}){lost}", super::text::shown(&output.display().to_string()))
}
