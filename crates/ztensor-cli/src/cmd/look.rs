//! `ls`, `cat`, `extract` and `id`: looking at what a file holds (`diff` has its own module).

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

/// What `extract` wrote: the array's NumPy type, shape and element count, and how it was made
/// (widened, densified).
struct Extracted {
    descr: &'static str,
    shape: Vec<u64>,
    elements: u64,
    note: Option<String>,
}

/// Writes object `name` of `source` (the input at `path`) to `output` as a `.npy` file.
fn extract(
    path: &Path,
    source: &dyn TensorSource,
    name: &str,
    output: &Path,
    max_dense: u64,
) -> Result<Extracted> {
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
        return Ok(Extracted { descr, shape: info.shape.into_owned(), elements, note: None });
    }
    let array = array(path, source, name, max_dense)?;
    let mut file = ztensor_io::AtomicFile::create(output).map_err(|e| anyhow!("{e}"))?;
    npy::write(&mut file, &array).map_err(|e| anyhow!("writing {}: {e}", output.display()))?;
    file.persist().map_err(|e| anyhow!("{e}"))?;
    let elements = npy::len(&array);
    Ok(Extracted { descr: array.descr, shape: array.shape, elements, note: array.note })
}

/// Values `cat` holds back until the object's digests have been checked; past this many it
/// reads the object through once to check them, then prints the values as a second read
/// decodes them, so the text of a huge object is never held.
const HELD_VALUES: u64 = 1 << 16;

/// The values of a NumPy type formatted in bounded pieces: this many bytes of elements at once.
const FORMAT_PIECE: usize = 64 << 10;

pub fn cat(
    out: &mut impl Write,
    path: &Path,
    source: &dyn TensorSource,
    name: &str,
    limit: usize,
    json: bool,
) -> Result<()> {
    let limit = if limit == 0 { u64::MAX } else { limit as u64 };
    let index = found(path, source, name)?;
    let failed = |e: &ztensor_io::Error| reported(&path.display().to_string(), e);
    // A dense tensor of one component streams: its bytes are read in pieces, each widened to
    // its NumPy type and formatted as it passes.
    if let Some((info, dtype, logical, descr, note)) = streamed(source, index) {
        let total = info.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).unwrap_or(u64::MAX);
        head(out, json, name, descr, &info.shape, total, note.as_deref())?;
        // Pieces of whole elements (three bytes of FP6 hold four).
        let unit = lcm(npy::piece_unit(dtype, logical.as_ref()), npy::width(descr));
        // The padding bits after the last packed element widen to no value.
        let limit = limit.min(total);
        let read = |rows: &mut Rows<'_>| {
            let mut carry: Vec<u8> = Vec::new();
            let done = source.read_pieces(index, 4 << 20, &mut |_, bytes| {
                // Pieces need not end on an element: the rest waits for the next one.
                let mut bytes = bytes;
                if !carry.is_empty() {
                    let take = (unit - carry.len()).min(bytes.len());
                    carry.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    if carry.len() == unit {
                        widened(rows, dtype, logical.as_ref(), &carry)?;
                        carry.clear();
                    }
                }
                let whole = bytes.len() - bytes.len() % unit;
                for piece in bytes[..whole].chunks(FORMAT_PIECE / unit * unit) {
                    widened(rows, dtype, logical.as_ref(), piece)?;
                }
                carry.extend_from_slice(&bytes[whole..]);
                Ok(())
            });
            // What is left is the end of the object: its last elements (a packed type's last
            // bytes, which need not fill a unit).
            let done = match done {
                Ok(()) if !carry.is_empty() => widened(rows, dtype, logical.as_ref(), &carry),
                other => other,
            };
            // A failed write is the output's error (a closed pipe ends the command quietly),
            // not the input's.
            match (done, rows.broken.take()) {
                (_, Some(io)) => Err(anyhow::Error::from(io)),
                (Err(e), None) => Err(failed(&e)),
                (Ok(()), None) => Ok(()),
            }
        };
        let row = info.shape.last().copied().filter(|&r| r > 0).unwrap_or(1);
        if total.min(limit) <= HELD_VALUES {
            // Few values: held until the digests pass, in one read.
            let mut held: Vec<u8> = Vec::new();
            let mut rows = Rows::new(&mut held, descr, row, limit, json);
            read(&mut rows)?;
            let printed = rows.finish()?;
            out.write_all(&held)?;
            return more(out, json, printed, total);
        }
        source.verify(index).map_err(|e| failed(&e))?;
        let mut rows = Rows::new(&mut *out, descr, row, limit, json);
        read(&mut rows)?;
        let printed = rows.finish()?;
        return more(out, json, printed, total);
    }
    // Anything else (sparse objects densified): its array whole, the values formatted from it
    // a piece at a time.
    let array = array(path, source, name, npy::DEFAULT_MAX_DENSE)?;
    let total = npy::len(&array);
    head(out, json, name, array.descr, &array.shape, total, array.note.as_deref())?;
    let row = array.shape.last().copied().filter(|&r| r > 0).unwrap_or(1);
    let mut rows = Rows::new(&mut *out, array.descr, row, limit, json);
    let step = FORMAT_PIECE - FORMAT_PIECE % npy::width(array.descr);
    for piece in array.data.chunks(step) {
        rows.values(piece)?;
    }
    let printed = rows.finish()?;
    more(out, json, printed, total)
}

/// What `cat` prints before the values: a comment line naming the object, its NumPy type,
/// shape, element count and how it was widened; with `json`, the opening of the report's
/// object, up to its `values` array.
fn head(
    out: &mut impl Write,
    json: bool,
    name: &str,
    descr: &str,
    shape: &[u64],
    total: u64,
    note: Option<&str>,
) -> Result<()> {
    if json {
        let fields = serde_json::json!({
            "name": name,
            "dtype": descr,
            "shape": shape,
            "elements": total,
            "note": note,
        });
        // The fields, then the values array streamed after them (never held whole).
        let fields = fields.to_string();
        write!(out, "{},\"values\":[", &fields[..fields.len() - 1])?;
        return Ok(());
    }
    let note = note.map(|n| format!(", {n}")).unwrap_or_default();
    let shown = super::text::shown(name);
    writeln!(out, "# {shown}: {descr} {shape:?}, {total} elements{note}")?;
    Ok(())
}

/// What `cat` streams: object `index` when it is a dense tensor of one component of a type
/// NumPy holds or widens to one, with that NumPy type and how it is widened.
#[allow(clippy::type_complexity)]
fn streamed(
    source: &dyn TensorSource,
    index: usize,
) -> Option<(
    ztensor_io::ObjectInfo<'_>,
    ztensor_format::DType,
    Option<ztensor_format::LogicalType>,
    &'static str,
    Option<String>,
)> {
    let info = source.info(index).filter(|o| {
        o.format == ztensor_format::Format::Dense
            && o.components.len() == 1
            && o.unsupported.is_none()
    })?;
    let component = &info.components[0];
    let (dtype, logical) = (component.dtype.known()?, component.logical_type.clone());
    let probe = ztensor_io::ComponentData {
        dtype,
        logical_type: logical.clone(),
        bytes: std::borrow::Cow::Borrowed(&[]),
    };
    let (descr, _, note) = npy::dense(probe).ok()?;
    Some((info, dtype, logical, descr, note))
}

/// `bytes` (whole elements of `dtype`) widened to their NumPy type and handed to `rows`.
fn widened(
    rows: &mut Rows<'_>,
    dtype: ztensor_format::DType,
    logical: Option<&ztensor_format::LogicalType>,
    bytes: &[u8],
) -> ztensor_io::Result<()> {
    if rows.full() {
        return Ok(());
    }
    let piece = ztensor_io::ComponentData {
        dtype,
        logical_type: logical.cloned(),
        bytes: std::borrow::Cow::Borrowed(bytes),
    };
    // The type was accepted for the whole object before the first piece.
    let (_, data, _) = npy::dense(piece).map_err(|e| {
        ztensor_io::Error::io("widening", None, std::io::Error::other(e.to_string()))
    })?;
    rows.values(&data).map_err(|e| {
        let stopped = ztensor_io::Error::io("writing the values", None, std::io::Error::other(""));
        rows.broken = Some(e);
        stopped
    })
}

/// Values of one NumPy type written as they come, a row of the last dimension to a line, at
/// most `limit` of them.
struct Rows<'w> {
    out: &'w mut dyn Write,
    descr: &'static str,
    row: u64,
    limit: u64,
    printed: u64,
    /// Values as the items of a JSON array rather than rows of text.
    json: bool,
    /// The write that failed, when one did.
    broken: Option<std::io::Error>,
}

impl<'w> Rows<'w> {
    fn new(out: &'w mut dyn Write, descr: &'static str, row: u64, limit: u64, json: bool) -> Self {
        Rows { out, descr, row, limit, printed: 0, json, broken: None }
    }

    /// Whether `limit` values have been written.
    fn full(&self) -> bool {
        self.printed >= self.limit
    }

    /// Writes the values of `bytes`, whole elements of the NumPy type, up to the limit.
    fn values(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let width = npy::width(self.descr);
        for piece in bytes.chunks(FORMAT_PIECE - FORMAT_PIECE % width) {
            if self.full() {
                break;
            }
            let left = usize::try_from(self.limit - self.printed).unwrap_or(usize::MAX);
            let array = npy::Array {
                descr: self.descr,
                shape: vec![(piece.len() / width) as u64],
                data: piece.to_vec(),
                note: None,
            };
            let mut text = String::new();
            for value in npy::values(&array, left) {
                if self.json {
                    if self.printed > 0 {
                        text.push(',');
                    }
                    text.push_str(&json_value(self.descr, &value).to_string());
                    self.printed += 1;
                    continue;
                }
                if !self.printed.is_multiple_of(self.row) {
                    text.push(' ');
                }
                text.push_str(&value);
                self.printed += 1;
                if self.printed.is_multiple_of(self.row) {
                    text.push('\n');
                }
            }
            self.out.write_all(text.as_bytes())?;
        }
        Ok(())
    }

    /// Ends a row cut short; how many values were written.
    fn finish(self) -> std::io::Result<u64> {
        if !self.json && !self.printed.is_multiple_of(self.row) {
            self.out.write_all(b"\n")?;
        }
        Ok(self.printed)
    }
}

/// A value `cat` prints as text (`npy::values`), as JSON: a number where JSON has one (exact:
/// the text is the shortest that reads back as the value), a boolean, `[re, im]` for a complex
/// value, and a string for what JSON has no number for (`NaN`, `inf`, `-inf`).
fn json_value(descr: &str, text: &str) -> serde_json::Value {
    let number = |t: &str| -> serde_json::Value {
        match serde_json::from_str::<serde_json::Number>(t) {
            Ok(n) => serde_json::Value::Number(n),
            Err(_) => serde_json::Value::String(t.to_owned()),
        }
    };
    match descr {
        "|b1" => serde_json::Value::Bool(text == "true"),
        "<c8" | "<c16" => {
            // `{re}{im:+}i`: the imaginary part starts at the last sign past the first byte.
            let body = text.strip_suffix('i').unwrap_or(text);
            let at = body.char_indices().skip(1).filter(|(_, c)| matches!(c, '+' | '-')).last();
            match at {
                Some((at, _)) => {
                    let im = body[at..].trim_start_matches('+');
                    serde_json::json!([number(&body[..at]), number(im)])
                }
                None => serde_json::Value::String(text.to_owned()),
            }
        }
        _ => number(text),
    }
}

/// After `printed` values of `total`: how many were left out, if any; with `json`, the close of
/// the report's object, with the count printed.
fn more(out: &mut impl Write, json: bool, printed: u64, total: u64) -> Result<()> {
    if json {
        writeln!(out, "],\"printed\":{printed}}}")?;
        return Ok(());
    }
    if printed < total {
        writeln!(out, "... ({} more; --limit 0 prints all)", total - printed)?;
    }
    Ok(())
}

/// The least common multiple of two element widths (powers of two, so the larger).
fn lcm(a: usize, b: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b).max(1) * b
}

/// The content identity of the input at `path` (`ztensor id`): a zTensor 2 file's from its
/// manifest, any other input's as its canonical zTensor 2 conversion would have it.
/// `ztensor id FILE...`: each input's content identity, a line each (the digest alone for one
/// input, the digest and the name for several).
pub(crate) fn ids(
    out: &mut impl Write,
    files: &[std::path::PathBuf],
    algorithm: ztensor_v2::IdAlgorithm,
    json: bool,
) -> Result<()> {
    if json {
        let mut found = Vec::with_capacity(files.len());
        for file in files {
            let id = id(file, algorithm)?;
            found.push(serde_json::json!({"file": super::stdin::name(file), "id": id}));
        }
        writeln!(out, "{:#}", serde_json::Value::Array(found))?;
        return Ok(());
    }
    for file in files {
        let id = id(file, algorithm)?;
        if files.len() == 1 {
            writeln!(out, "{id}")?;
        } else {
            writeln!(out, "{id}  {}", super::stdin::shown(file))?;
        }
    }
    Ok(())
}

/// `ztensor dump FILE`: the conformance dump; status 1 for a file its reader rejects.
pub(crate) fn dump(out: &mut impl Write, file: &Path) -> Result<ExitCode> {
    // With the command line's limits (`--max-expansion`).
    let options = ztensor_cli::options(false);
    let context = || format!("cannot read {}", file.display());
    let ok = match crate::remote::url_of(file) {
        // An object is dumped as the same bytes on disk are (a zTensor 2 root with the shards
        // beside it).
        Some(_) => ztensor_dump::write_detected_with(crate::told::told(file)?, &options, out)
            .with_context(context)?,
        None => ztensor_dump::write_file_with(file, &options, out).with_context(context)?,
    };
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `ztensor extract FILE NAME -o OUT.npy`: never over the input, nor over a shard of a
/// checkpoint given by its index.
pub(crate) fn extract_file(
    out: &mut impl Write,
    file: &Path,
    name: &str,
    output: &Path,
    max_dense: u64,
    json: bool,
) -> Result<()> {
    ztensor_io::check_output(output).map_err(|e| anyhow!("{e}"))?;
    let source = crate::open_source_for(file, output, "an extracted array", false)?;
    let before = super::replace::held(output);
    let done = extract(file, &*source, name, output, max_dense)?;
    let notes: Vec<String> =
        before.iter().map(|b| super::replace::replaced(output, b, None)).collect();
    if json {
        let report = serde_json::json!({
            "wrote": output.display().to_string(),
            "name": name,
            "dtype": done.descr,
            "shape": done.shape,
            "elements": done.elements,
            "note": done.note,
            "notes": notes,
        });
        writeln!(out, "{report:#}")?;
        return Ok(());
    }
    let note = done.note.map(|n| format!("; {n}")).unwrap_or_default();
    writeln!(
        out,
        "wrote {} ({} {:?}, {} elements{note})",
        output.display(),
        done.descr,
        done.shape,
        done.elements
    )?;
    notes.iter().try_for_each(|n| writeln!(out, "{n}"))?;
    Ok(())
}

/// The content identity of the input at `path`.
fn id(path: &Path, algorithm: ztensor_v2::IdAlgorithm) -> Result<String> {
    let options =
        ztensor_registry::OpenOptions { options: crate::options(false), ..Default::default() };
    // A file's and an object's identity alike: its bytes'.
    crate::told::told(path)?
        .content_id(&options, algorithm)
        .map_err(|e| crate::errors::open_error(path, &options.options, e))
}

#[cfg(test)]
mod tests {
    use super::{glob, json_value};

    #[test]
    fn values_as_json() {
        use serde_json::json;
        let cases = [
            ("<f4", "1.5", json!(1.5)),
            ("<f4", "-0.1015625", json!(-0.1015625)),
            ("<f4", "NaN", json!("NaN")),
            ("<f8", "-inf", json!("-inf")),
            ("<u8", "18446744073709551615", json!(18446744073709551615u64)),
            ("<i8", "-9223372036854775808", json!(-9223372036854775808i64)),
            ("|b1", "true", json!(true)),
            ("|b1", "false", json!(false)),
            ("<c8", "1.5-2i", json!([1.5, -2])),
            ("<c16", "-1+0.25i", json!([-1, 0.25])),
            ("<c8", "NaN+infi", json!(["NaN", "inf"])),
            ("<c8", "-inf+NaNi", json!(["-inf", "NaN"])),
        ];
        for (descr, text, want) in cases {
            assert_eq!(json_value(descr, text), want, "{descr} {text}");
        }
    }

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
