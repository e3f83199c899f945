//! `ztensor diff`: everything two inputs hold, compared. [`compare`] finds the differences —
//! file attributes key by key, then objects by name (format, shape, types, decoded bytes and
//! their own attributes) — and returns them as a [`Report`]; [`print()`] writes it as text or
//! JSON.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use ztensor_format::{Attributes, ValueRef};
use ztensor_io::TensorSource;

use super::text::{extent, json_line, shown, summary};
use crate::reported;

/// What differs between two inputs.
pub struct Report<'s> {
    /// How the inputs are named (`-` for standard input).
    pub a: String,
    /// As `a`, for the second input.
    pub b: String,
    /// The file attributes, when they differ and attributes are compared.
    pub attributes: Option<AttributeDiff<'s>>,
    /// Whether attributes (file and object) were left out of the comparison.
    pub ignored_attributes: bool,
    /// Objects only in the first input.
    pub removed: Vec<String>,
    /// Objects only in the second input.
    pub added: Vec<String>,
    /// Objects in both that differ, in name order.
    pub changed: Vec<Changed<'s>>,
    /// How many objects are in both and the same.
    pub same: usize,
}

impl Report<'_> {
    /// Whether anything differs (the command's status 1).
    pub fn differ(&self) -> bool {
        self.attributes.is_some()
            || !self.removed.is_empty()
            || !self.added.is_empty()
            || !self.changed.is_empty()
    }
}

/// An object in both inputs that differs.
pub struct Changed<'s> {
    /// Its name.
    pub name: String,
    /// What differs besides its attributes (`shape [4] -> [2, 2]`, `content (data)`).
    pub what: Vec<String>,
    /// Its attributes, when they differ.
    pub attributes: Option<AttributeDiff<'s>>,
}

/// Two attribute maps that differ (a missing map counts as an empty one).
pub struct AttributeDiff<'s> {
    a: Cow<'s, Attributes>,
    b: Cow<'s, Attributes>,
}

/// One key whose value differs: only in `a` (removed), only in `b` (added), or in both.
pub struct KeyChange<'a> {
    /// The key.
    pub key: ValueRef<'a>,
    /// Its value in the first map.
    pub a: Option<ValueRef<'a>>,
    /// Its value in the second map.
    pub b: Option<ValueRef<'a>>,
}

impl<'s> AttributeDiff<'s> {
    /// The two maps, or `None` when they hold the same entries.
    fn new(a: Option<Cow<'s, Attributes>>, b: Option<Cow<'s, Attributes>>) -> Option<Self> {
        let (a, b) = (a.unwrap_or_else(empty_map), b.unwrap_or_else(empty_map));
        // Attributes are held in deterministic CBOR: equal maps are equal bytes.
        (a.as_bytes() != b.as_bytes()).then_some(AttributeDiff { a, b })
    }

    /// The keys that differ, in the maps' deterministic order.
    pub fn changes(&self) -> Vec<KeyChange<'_>> {
        let mut keys: BTreeMap<&[u8], KeyChange<'_>> = BTreeMap::new();
        for (key, value) in self.a.entries() {
            keys.insert(key.as_bytes(), KeyChange { key, a: Some(value), b: None });
        }
        for (key, value) in self.b.entries() {
            keys.entry(key.as_bytes()).or_insert(KeyChange { key, a: None, b: None }).b =
                Some(value);
        }
        keys.into_values()
            .filter(|c| c.a.map(|v| v.as_bytes()) != c.b.map(|v| v.as_bytes()))
            .collect()
    }

    /// How many keys were removed, added and changed.
    fn counts(&self) -> (usize, usize, usize) {
        self.changes().iter().fold((0, 0, 0), |(r, a, c), k| match (k.a, k.b) {
            (Some(_), None) => (r + 1, a, c),
            (None, Some(_)) => (r, a + 1, c),
            _ => (r, a, c + 1),
        })
    }
}

fn empty_map<'a>() -> Cow<'a, Attributes> {
    // An empty map always encodes.
    Cow::Owned(
        Attributes::try_from(ztensor_format::Value::Map(Vec::new()))
            .expect("an empty map is attributes"),
    )
}

/// Role, dtype (with logical type) and content hash of each component.
type Components = Vec<(String, String, String)>;

/// `ztensor diff A B`: both inputs opened, compared and the report printed; status 1 when
/// they differ.
pub(crate) fn run(
    out: &mut impl Write,
    a: &Path,
    b: &Path,
    json: bool,
    ignore_attributes: bool,
) -> Result<std::process::ExitCode> {
    // One file named twice (a link, another spelling, or itself) is opened once: its
    // manifest held once, its bytes read through one source.
    // Beside a zTensor 2 file, the other input is read as its zTensor 2 conversion reads it
    // (GGUF's blocks in zTensor 2's layouts), so that a file and its conversion compare alike.
    let zt2 = [super::detect(a)?, super::detect(b)?].contains(&super::Kind::Zt2);
    let open = |path: &Path| {
        let target = zt2.then_some(crate::Target::Zt2);
        crate::sources::expansion_checked(path, crate::sources::open_told(path, false, target)?)
    };
    let sa = open(a)?;
    let sb = if super::same_file(a, b) { None } else { Some(open(b)?) };
    let report = compare((a, &*sa), (b, sb.as_deref().unwrap_or(&*sa)), !ignore_attributes)?;
    print(out, &report, json)?;
    Ok(if report.differ() {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// Compares `a` with `b`: file attributes and each object's attributes unless `attributes` is
/// false, names, formats, shapes, types and decoded bytes (encodings and digests are no
/// difference).
///
/// # Errors
/// What stopped an input's attributes being built or an object being read, naming the input
/// and the object.
pub fn compare<'s>(
    (a_path, a): (&Path, &'s dyn TensorSource),
    (b_path, b): (&Path, &'s dyn TensorSource),
    attributes: bool,
) -> Result<Report<'s>> {
    let file_attributes = |p: &Path, s: &'s dyn TensorSource| {
        s.try_attributes().map_err(|e| reported(&p.display().to_string(), &e))
    };
    let file = if attributes {
        AttributeDiff::new(file_attributes(a_path, a)?, file_attributes(b_path, b)?)
    } else {
        None
    };
    // Each input's objects in the byte order of their names (a name given twice, the first of
    // them), walked side by side: no set of names is built, and each object is found by its
    // index, not looked up by name.
    let (in_a, in_b) = (Names::of(a), Names::of(b));
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let mut changed = Vec::new();
    let mut same = 0usize;
    let (mut i, mut j) = (0, 0);
    while i < in_a.sorted.len() || j < in_b.sorted.len() {
        let x = in_a.sorted.get(i).map(|&k| (k, in_a.name(k)));
        let y = in_b.sorted.get(j).map(|&k| (k, in_b.name(k)));
        let ((ia, name), ib) = match (x, y) {
            (Some((_, n)), Some((_, m))) if n < m => {
                removed.push(n.to_owned());
                i += 1;
                continue;
            }
            (Some((_, n)), None) => {
                removed.push(n.to_owned());
                i += 1;
                continue;
            }
            (Some((ia, n)), Some((ib, m))) if n == m => ((ia, n), ib),
            (_, Some((_, m))) => {
                added.push(m.to_owned());
                j += 1;
                continue;
            }
            (None, None) => break,
        };
        (i, j) = (i + 1, j + 1);
        let context = |p: &Path| format!("{}: object {name:?}", p.display());
        // Context keeps a broken rule's status (1) under the added words.
        let (fa, sa, ca) = describe(a, ia).with_context(|| context(a_path))?;
        let (fb, sb, cb) = describe(b, ib).with_context(|| context(b_path))?;
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
        let own = |s: &'s dyn TensorSource, i: usize| s.info(i).and_then(|o| o.attributes);
        let attributes = if attributes { AttributeDiff::new(own(a, ia), own(b, ib)) } else { None };
        if what.is_empty() && attributes.is_none() {
            same += 1;
        } else {
            changed.push(Changed { name: name.to_owned(), what, attributes });
        }
    }
    Ok(Report {
        a: super::stdin::name(a_path),
        b: super::stdin::name(b_path),
        attributes: file,
        ignored_attributes: !attributes,
        removed,
        added,
        changed,
        same,
    })
}

/// Writes `report` as text (a line per difference, then a count) or as JSON.
///
/// # Errors
/// Writing to `out`.
pub fn print(out: &mut impl Write, report: &Report<'_>, json: bool) -> Result<()> {
    if json {
        return print_json(out, report);
    }
    if let Some(file) = &report.attributes {
        for change in file.changes() {
            writeln!(out, "{}", key_line("file attribute ", true, &change))?;
        }
    }
    for n in &report.removed {
        writeln!(out, "- {}", shown(n))?;
    }
    for n in &report.added {
        writeln!(out, "+ {}", shown(n))?;
    }
    for c in &report.changed {
        let mut what = c.what.clone();
        if let Some(attributes) = &c.attributes {
            what.extend(attributes.changes().iter().map(|k| key_line("attribute ", false, k)));
        }
        writeln!(out, "~ {}: {}", shown(&c.name), what.join("; "))?;
    }
    let mut counts = format!(
        "{} removed, {} added, {} changed, {} the same",
        report.removed.len(),
        report.added.len(),
        report.changed.len(),
        report.same
    );
    if let Some(file) = &report.attributes {
        let (removed, added, changed) = file.counts();
        counts.push_str(&format!(
            "; file attributes: {removed} removed, {added} added, {changed} changed"
        ));
    }
    if report.ignored_attributes {
        counts.push_str(" (attributes not compared)");
    }
    writeln!(out, "{counts}")?;
    Ok(())
}

/// One key's difference after `label`: with `sign`, a line of its own (`- KEY: VALUE` removed,
/// `+ KEY: VALUE` added, `~ KEY: A -> B` changed); without, a clause of an object's line
/// (`KEY removed (was VALUE)`, `KEY added: VALUE`, `KEY: A -> B`). Values are cut short as
/// `info` cuts them.
fn key_line(label: &str, sign: bool, change: &KeyChange<'_>) -> String {
    let key = match change.key.as_text() {
        Some(k) => shown(k).into_owned(),
        None => json_line(change.key),
    };
    let value = |v: ValueRef<'_>| {
        let (text, cut) = summary(v);
        if cut { format!("{text} ({})", extent(v)) } else { text }
    };
    match (sign, change.a, change.b) {
        // An object's line has its sign already.
        (false, Some(a), None) => format!("{label}{key} removed (was {})", value(a)),
        (false, None, Some(b)) => format!("{label}{key} added: {}", value(b)),
        (true, Some(a), None) => format!("- {label}{key}: {}", value(a)),
        (true, None, Some(b)) => format!("+ {label}{key}: {}", value(b)),
        (sign, Some(a), Some(b)) => {
            let sign = if sign { "~ " } else { "" };
            format!("{sign}{label}{key}: {} -> {}", value(a), value(b))
        }
        (_, None, None) => format!("{label}{key}"),
    }
}

/// The report as one JSON document, every attribute value whole, written as it is serialized
/// (attribute values are never built as a tree).
fn print_json(out: &mut impl Write, report: &Report<'_>) -> Result<()> {
    use serde::Serialize;
    use ztensor_dump::JsonOf;

    #[derive(Serialize)]
    struct Key<'a> {
        key: JsonOf<'a>,
        a: Option<JsonOf<'a>>,
        b: Option<JsonOf<'a>>,
    }
    #[derive(Serialize)]
    struct Object<'a> {
        name: &'a str,
        changes: Vec<String>,
        attributes: Vec<Key<'a>>,
    }
    #[derive(Serialize)]
    struct Json<'a> {
        a: &'a str,
        b: &'a str,
        attributes: Vec<Key<'a>>,
        attributes_compared: bool,
        added: &'a [String],
        removed: &'a [String],
        changed: Vec<Object<'a>>,
        same: usize,
    }
    fn keys<'a>(diff: Option<&'a AttributeDiff<'_>>) -> Vec<Key<'a>> {
        diff.map(AttributeDiff::changes)
            .unwrap_or_default()
            .into_iter()
            .map(|k| Key { key: JsonOf(k.key), a: k.a.map(JsonOf), b: k.b.map(JsonOf) })
            .collect()
    }
    let changed = report
        .changed
        .iter()
        .map(|c| {
            let attributes = keys(c.attributes.as_ref());
            let mut changes = c.what.clone();
            changes.extend(attributes.iter().map(|k| {
                let key = k.key.0.as_text().map_or_else(|| json_line(k.key.0), str::to_owned);
                match (&k.a, &k.b) {
                    (Some(_), None) => format!("attribute {key} removed"),
                    (None, Some(_)) => format!("attribute {key} added"),
                    _ => format!("attribute {key} changed"),
                }
            }));
            Object { name: &c.name, changes, attributes }
        })
        .collect();
    let json = Json {
        a: &report.a,
        b: &report.b,
        attributes: keys(report.attributes.as_ref()),
        attributes_compared: !report.ignored_attributes,
        added: &report.added,
        removed: &report.removed,
        changed,
        same: report.same,
    };
    let mut serializer = serde_json::Serializer::pretty(&mut *out);
    json.serialize(&mut serializer)?;
    writeln!(out)?;
    Ok(())
}

/// One object's description for `diff` (object `index` of `source`): format, shape, and per
/// component dtype, logical type and a hash of the decoded bytes.
fn describe(source: &dyn TensorSource, index: usize) -> Result<(String, Vec<u64>, Components)> {
    let gone = || anyhow!("object #{index} is not listed");
    if source.info(index).is_none() {
        return Err(gone());
    }
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

/// A source's object names, in one buffer (a few bytes an object besides the name, not a
/// `String` and a tree node each), and its objects in the byte order of their names.
struct Names {
    text: String,
    /// Where each object's name starts in `text`, and its length.
    at: Vec<(usize, usize)>,
    /// The objects by name (indices of the source; of a name given twice, the first).
    sorted: Vec<usize>,
}

impl Names {
    fn of(source: &dyn TensorSource) -> Names {
        let mut names = Names { text: String::new(), at: Vec::new(), sorted: Vec::new() };
        names.at.reserve(source.len());
        for i in 0..source.len() {
            let name = source.name(i);
            names.at.push((names.text.len(), name.as_deref().map_or(0, str::len)));
            if let Some(n) = &name {
                names.text.push_str(n);
                names.sorted.push(i);
            }
        }
        names.text.shrink_to_fit();
        let Names { text, at, sorted } = &mut names;
        let name = |i: usize| &text[at[i].0..][..at[i].1];
        // Stable: of the objects of one name, the first stays first, and is kept.
        sorted.sort_by(|&x, &y| name(x).cmp(name(y)));
        sorted.dedup_by(|x, y| name(*x) == name(*y));
        names
    }

    fn name(&self, i: usize) -> &str {
        &self.text[self.at[i].0..][..self.at[i].1]
    }
}

/// BLAKE3 of the bytes of `range`, read in 4 MiB pieces.
fn hash_range(range: ztensor_io::RawRange<'_>) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    range.read_pieces(4 << 20, |bytes| {
        hasher.update(bytes);
    })?;
    Ok(hasher.finalize().to_hex().to_string())
}
