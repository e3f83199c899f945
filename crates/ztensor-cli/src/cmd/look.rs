//! `ls`, `cat`, `extract` and `diff`: looking at what a file holds.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use ztensor_foreign::npy;
use ztensor_io::TensorSource;

use crate::reported;

/// Whether `name` matches the glob `pattern`: `*` any run, `?` one character, `[...]` a class
/// (`[abc]`, `[a-z]`, `[!x]`). Written here because object names need nothing more, and a
/// glob crate would bring a regex engine for it.
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with one backtrack point for the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => class(&p, pi, n[ni]),
            Some(&c) => (c == n[ni]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ni += 1;
            }
            (None, Some((sp, sn))) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches `c` against the class starting at `p[at] == '['`; the index after the class, or
/// `None`. An unclosed `[` is a literal.
fn class(p: &[char], at: usize, c: char) -> Option<usize> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while let Some(&x) = p.get(i) {
        if x == ']' && !first {
            return (matched != negate).then_some(i + 1);
        }
        first = false;
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            matched |= x <= c && c <= p[i + 2];
            i += 3;
        } else {
            matched |= x == c;
            i += 1;
        }
    }
    (c == '[').then_some(at + 1)
}

pub fn ls(
    out: &mut impl Write,
    source: &dyn TensorSource,
    patterns: &[String],
    json: bool,
) -> Result<ExitCode> {
    let mut names: Vec<std::borrow::Cow<'_, str>> = (0..source.len())
        .filter_map(|i| source.name(i))
        .filter(|n| patterns.is_empty() || patterns.iter().any(|p| glob(p, n)))
        .collect();
    names.sort_unstable();
    if names.is_empty() && !patterns.is_empty() {
        eprintln!("ztensor: no object name matches {}", patterns.join(" or "));
    }
    if json {
        writeln!(out, "{}", serde_json::to_string(&names)?)?;
    } else {
        for n in &names {
            writeln!(out, "{}", super::text::shown(n))?;
        }
    }
    // Like grep: nothing matched is status 1.
    Ok(if names.is_empty() && !patterns.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn array(path: &Path, source: &dyn TensorSource, name: &str, max_dense: u64) -> Result<npy::Array> {
    found(path, source, name)?;
    npy::array(source, name, max_dense).map_err(|e| reported(&path.display().to_string(), &e))
}

/// The index of the object called `name`, or an error that suggests the closest names.
pub fn found(path: &Path, source: &dyn TensorSource, name: &str) -> Result<usize> {
    if let Some(i) = source.find(name) {
        return Ok(i);
    }
    let close = ztensor_io::close_names(source, name);
    let hint = match close.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {:?}?", super::text::shown(one)),
        more => format!(
            "; did you mean one of {}?",
            more.iter()
                .map(|n| format!("{:?}", super::text::shown(n)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(anyhow!(
        "{}: no object named {:?}{hint} (`ztensor ls {}` lists them)",
        path.display(),
        super::text::shown(name),
        path.display()
    ))
}

/// Levenshtein distance between `a` and `b`, in characters.
/// Object `index` when it is a dense tensor of one component whose type NumPy holds as stored
/// (no widening, no logical type): such a tensor streams, in pieces, to a `.npy` or a terminal.
fn native_dense(
    source: &dyn TensorSource,
    index: usize,
) -> Option<(ztensor_io::ObjectInfo<'_>, ztensor_format::DType, &'static str)> {
    let info = source.info(index).filter(|o| {
        o.format == ztensor_format::Format::Dense
            && o.components.len() == 1
            && o.components[0].logical_type.is_none()
            && o.unsupported.is_none()
    })?;
    let dtype = info.components[0].dtype.known()?;
    let descr = npy::descr(dtype)?;
    Some((info, dtype, descr))
}

pub fn extract(
    out: &mut impl Write,
    path: &Path,
    source: &dyn TensorSource,
    name: &str,
    output: &Path,
    max_dense: u64,
) -> Result<()> {
    super::not_over(path, output, "an extracted array")?;
    let index = found(path, source, name)?;
    // A dense tensor of a type NumPy holds as stored streams into the file in pieces: any
    // size in a few MiB. Its digest is checked before the file is published.
    if let Some((info, dtype, descr)) = native_dense(source, index) {
        let mut file = ztensor_io::AtomicFile::create(output).map_err(|e| anyhow!("{e}"))?;
        let writing = |e: std::io::Error| anyhow!("writing {}: {e}", output.display());
        npy::write_header(&mut file, descr, &info.shape).map_err(writing)?;
        let mut elements = 0u64;
        source
            .read_pieces(index, 4 << 20, &mut |_, bytes| {
                elements += bytes.len() as u64;
                file.write_all(bytes)
                    .map_err(|e| ztensor_io::Error::io("writing", Some(output.to_owned()), e))
            })
            .map_err(|e| reported(&path.display().to_string(), &e))?;
        file.persist().map_err(|e| anyhow!("{e}"))?;
        let elements = elements / dtype.size().max(1);
        writeln!(
            out,
            "wrote {} ({descr} {:?}, {elements} elements)",
            output.display(),
            info.shape
        )?;
        return Ok(());
    }
    let array = array(path, source, name, max_dense)?;
    let mut file = ztensor_io::AtomicFile::create(output).map_err(|e| anyhow!("{e}"))?;
    npy::write(&mut file, &array).map_err(|e| anyhow!("writing {}: {e}", output.display()))?;
    file.persist().map_err(|e| anyhow!("{e}"))?;
    let note = array.note.as_ref().map(|n| format!("; {n}")).unwrap_or_default();
    writeln!(
        out,
        "wrote {} ({} {:?}, {} elements{note})",
        output.display(),
        array.descr,
        array.shape,
        npy::len(&array)
    )?;
    Ok(())
}

pub fn cat(
    out: &mut impl Write,
    path: &Path,
    source: &dyn TensorSource,
    name: &str,
    limit: usize,
) -> Result<()> {
    let limit = if limit == 0 { usize::MAX } else { limit };
    let index = found(path, source, name)?;
    // A dense tensor of a type NumPy holds as stored streams: the values shown are formatted
    // as its pieces pass, and printed once its digest is checked.
    if let Some((info, dtype, descr)) = native_dense(source, index) {
        let mut values: Vec<String> = Vec::new();
        let mut total = 0u64;
        source
            .read_pieces(index, 4 << 20, &mut |_, bytes| {
                total += bytes.len() as u64 / dtype.size().max(1);
                if values.len() < limit {
                    let piece = npy::Array {
                        descr,
                        shape: vec![bytes.len() as u64 / dtype.size().max(1)],
                        data: bytes.to_vec(),
                        note: None,
                    };
                    values.extend(npy::values(&piece, limit - values.len()));
                }
                Ok(())
            })
            .map_err(|e| reported(&path.display().to_string(), &e))?;
        let shown = super::text::shown(name);
        writeln!(out, "# {shown}: {descr} {:?}, {total} elements", info.shape)?;
        return print_values(out, &values, &info.shape, total);
    }
    let array = array(path, source, name, npy::DEFAULT_MAX_DENSE)?;
    let total = npy::len(&array);
    let values = npy::values(&array, limit);
    let note = array.note.as_ref().map(|n| format!(", {n}")).unwrap_or_default();
    let shown = super::text::shown(name);
    writeln!(out, "# {shown}: {} {:?}, {total} elements{note}", array.descr, array.shape)?;
    print_values(out, &values, &array.shape, total)
}

/// `values` (the first of `total`), one line per row of the last dimension of `shape`.
fn print_values(out: &mut impl Write, values: &[String], shape: &[u64], total: u64) -> Result<()> {
    let row = shape.last().copied().filter(|&r| r > 0).unwrap_or(1);
    let row = usize::try_from(row).unwrap_or(usize::MAX);
    for line in values.chunks(row) {
        writeln!(out, "{}", line.join(" "))?;
    }
    if (values.len() as u64) < total {
        writeln!(out, "... ({} more; --limit 0 prints all)", total - values.len() as u64)?;
    }
    Ok(())
}

/// Role, dtype (with logical type) and content hash of each component.
type Components = Vec<(String, String, String)>;

/// One object's description for `diff`: format, shape, and per component dtype, logical type
/// and a hash of the decoded bytes.
fn describe(source: &dyn TensorSource, name: &str) -> Result<(String, Vec<u64>, Components)> {
    let index = source.find(name).ok_or_else(|| anyhow!("no object {name:?}"))?;
    if let Some(info) = source.info(index).filter(|o| o.unsupported.is_some()) {
        // Not decodable here (a dtype zTensor lacks, an unknown encoding): compared by its
        // types and stored bytes.
        let stored = match source.raw(index) {
            Some(range) => hash_range(range)?,
            None => format!("{} stored bytes, not decoded", info.stored_len()),
        };
        let components = info
            .components
            .iter()
            .map(|c| (c.role.to_string(), c.dtype.to_string(), stored.clone()))
            .collect();
        return Ok((info.format.to_string(), info.shape.to_vec(), components));
    }
    // A dense tensor of one component is hashed as it streams: any size in a few MiB.
    if let Some(info) = source.info(index).filter(|o| {
        o.format == ztensor_format::Format::Dense
            && o.components.len() == 1
            && o.components[0].dtype.known().is_some()
    }) {
        let c = &info.components[0];
        let dtype = match &c.logical_type {
            Some(t) => format!("{}:{t}", c.dtype),
            None => c.dtype.to_string(),
        };
        let mut hasher = blake3::Hasher::new();
        source
            .read_pieces(index, 4 << 20, &mut |_, bytes| {
                hasher.update(bytes);
                Ok(())
            })
            .map_err(|e| reported("", &e))?;
        let hash = hasher.finalize().to_hex().to_string();
        return Ok((
            info.format.to_string(),
            info.shape.to_vec(),
            vec![(c.role.to_string(), dtype, hash)],
        ));
    }
    // Any other object of a source that reads in pieces is hashed as it streams too, part by
    // part: what each part decoded to comes from reading it through first.
    if source.reads_in_pieces(index)
        && let Some(info) = source.info(index)
    {
        let decoded = source.verify(index).map_err(|e| reported("", &e))?;
        let mut hashers: Vec<(String, blake3::Hasher)> = Vec::new();
        source
            .read_pieces(index, 4 << 20, &mut |role, bytes| {
                if hashers.last().is_none_or(|(r, _)| r != role) {
                    hashers.push((role.to_owned(), blake3::Hasher::new()));
                }
                if let Some((_, h)) = hashers.last_mut() {
                    h.update(bytes);
                }
                Ok(())
            })
            .map_err(|e| reported("", &e))?;
        let components = decoded
            .iter()
            .map(|d| {
                let dtype = match &d.logical_type {
                    Some(t) => format!("{}:{t}", d.dtype),
                    None => d.dtype.to_string(),
                };
                let hash = hashers
                    .iter()
                    .find(|(r, _)| *r == d.role)
                    .map_or_else(|| blake3::hash(&[]), |(_, h)| h.finalize());
                (d.role.clone(), dtype, hash.to_hex().to_string())
            })
            .collect();
        return Ok((info.format.to_string(), info.shape.to_vec(), components));
    }
    let data = source.read(index).map_err(|e| reported("", &e))?;
    let components = data
        .components
        .iter()
        .map(|(role, c)| {
            let dtype = match &c.logical_type {
                Some(t) => format!("{}:{t}", c.dtype),
                None => c.dtype.to_string(),
            };
            (role.clone(), dtype, blake3::hash(&c.bytes).to_hex().to_string())
        })
        .collect();
    Ok((data.format.to_string(), data.shape, components))
}

/// BLAKE3 of the bytes of `range`, read in 4 MiB pieces.
fn hash_range(range: ztensor_io::RawRange<'_>) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    range.read_pieces(4 << 20, |bytes| {
        hasher.update(bytes);
    })?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// The content identity of the input at `path` (`ztensor id`): a zTensor 2 file's from its
/// manifest, any other input's as its canonical zTensor 2 conversion would have it.
pub fn id(path: &Path, algorithm: ztensor_v2::IdAlgorithm) -> Result<String> {
    let options = ztensor_registry::OpenOptions {
        options: crate::options(false),
        carry_unknown_dtypes: false,
    };
    ztensor_registry::content_id(path, &options, algorithm)
        .map_err(|e| crate::errors::open_error(path, &options.options, e))
}

pub fn diff(
    out: &mut impl Write,
    (a_path, a): (&Path, &dyn TensorSource),
    (b_path, b): (&Path, &dyn TensorSource),
    json: bool,
) -> Result<ExitCode> {
    let names = |s: &dyn TensorSource| -> std::collections::BTreeSet<String> {
        (0..s.len()).filter_map(|i| s.name(i).map(std::borrow::Cow::into_owned)).collect()
    };
    let (in_a, in_b) = (names(a), names(b));
    let removed: Vec<&String> = in_a.difference(&in_b).collect();
    let added: Vec<&String> = in_b.difference(&in_a).collect();
    let mut changed = Vec::new();
    let mut same = 0usize;
    for name in in_a.intersection(&in_b) {
        let context = |p: &Path| format!("{}: object {name:?}", p.display());
        // Context keeps a broken rule's status (1) under the added words.
        let (fa, sa, ca) = describe(a, name).with_context(|| context(a_path))?;
        let (fb, sb, cb) = describe(b, name).with_context(|| context(b_path))?;
        let mut what = Vec::new();
        if fa != fb {
            what.push(format!("format {fa} -> {fb}"));
        }
        if sa != sb {
            what.push(format!("shape {sa:?} -> {sb:?}"));
        }
        let dtypes = |c: &[(String, String, String)]| {
            c.iter().map(|(r, d, _)| format!("{r}:{d}")).collect::<Vec<_>>()
        };
        if dtypes(&ca) != dtypes(&cb) {
            what.push(format!("dtype {} -> {}", dtypes(&ca).join(","), dtypes(&cb).join(",")));
        }
        if what.is_empty() && ca != cb {
            let roles: Vec<&str> =
                ca.iter().zip(&cb).filter(|(x, y)| x.2 != y.2).map(|(x, _)| x.0.as_str()).collect();
            what.push(format!("content ({})", roles.join(", ")));
        }
        if what.is_empty() {
            same += 1;
        } else {
            changed.push((name.clone(), what));
        }
    }
    let differ = !(added.is_empty() && removed.is_empty() && changed.is_empty());
    if json {
        let changed: Vec<_> =
            changed.iter().map(|(n, w)| serde_json::json!({"name": n, "changes": w})).collect();
        let report = serde_json::json!({
            "a": super::stdin::name(a_path),
            "b": super::stdin::name(b_path),
            "added": added,
            "removed": removed,
            "changed": changed,
            "same": same,
        });
        writeln!(out, "{report:#}")?;
    } else {
        use super::text::shown;
        for n in &removed {
            writeln!(out, "- {}", shown(n))?;
        }
        for n in &added {
            writeln!(out, "+ {}", shown(n))?;
        }
        for (n, what) in &changed {
            writeln!(out, "~ {}: {}", shown(n), what.join("; "))?;
        }
        writeln!(
            out,
            "{} removed, {} added, {} changed, {same} the same",
            removed.len(),
            added.len(),
            changed.len()
        )?;
    }
    Ok(if differ { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        let yes = [
            ("*", ""),
            ("*", "layers.0.weight"),
            ("layers.*.weight", "layers.10.weight"),
            ("layers.?.bias", "layers.3.bias"),
            ("*.[wb]*", "a.weight"),
            ("*.[wb]*", "a.bias"),
            ("[a-c]x", "bx"),
            ("[!a-c]x", "dx"),
            ("a*b*c", "aXbYbZc"),
            ("[x", "[x"),
            ("**", "anything"),
            ("é*", "éa"),
        ];
        for (p, n) in yes {
            assert!(glob(p, n), "{p} should match {n}");
        }
        let no = [
            ("layers.*.weight", "layers.0.bias"),
            ("?", ""),
            ("?", "ab"),
            ("[!a-c]x", "ax"),
            ("a*b*c", "aXbYbZ"),
            ("abc", "abcd"),
            ("[a-c]", "d"),
        ];
        for (p, n) in no {
            assert!(!glob(p, n), "{p} should not match {n}");
        }
    }
}
