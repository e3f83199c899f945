//! `ztensor info`: version, attributes, and a table of objects and components.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use ztensor_format::{ByteOrder, Encoding, Version};
use ztensor_io::{ReadAt, Reader, TensorSource};

use super::Kind;

/// `ztensor info FILE`: a zTensor 0.1/1.x file from its manifest (with what it shadows and what
/// an unfinished append left), any other input through the tensor-source interface.
pub(crate) fn run(
    out: &mut impl Write,
    file: &Path,
    strict: bool,
    json: bool,
    full: bool,
) -> Result<()> {
    let kind = super::detect(file)?;
    if kind != Kind::Zt {
        let source: Box<dyn ztensor_io::TensorSource> = match kind {
            Kind::TensorBuffers => Box::new(
                super::tb::open(file, strict)?
                    .map_err(|e| crate::reported(&crate::shown_path(file), &e))?,
            ),
            _ => crate::open_source(file)?,
        };
        return source_info(out, file, kind, &*source, json, full);
    }
    // A file and an object of the same bytes open as one reader and print one report.
    let reader = crate::sources::open(file, &ztensor_cli::options(strict))?;
    let pending = reader.source().uncommitted();
    let shadowed: Vec<&str> = reader.manifest().shadowed().map(|o| o.name()).collect();
    if json {
        return Ok(write_json(out, file, &reader, pending, &shadowed)?);
    }
    print(out, file, &reader, full)?;
    if !shadowed.is_empty() {
        writeln!(
            out,
            "\nnote: {} object(s) share a name with an earlier one ({}), as the reference v0.1 \
             writer allows; a NAME given to a command finds the first, and zTensor 1.x cannot \
             hold both (--strict refuses the file)",
            shadowed.len(),
            shadowed
                .iter()
                .map(|n| format!("{:?}", super::text::shown(n)))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    if pending > 0 {
        writeln!(
            out,
            "\nnote: {pending} bytes after the end belong to an append that has not committed \
             (still running, or interrupted: `ztensor repair {}` removes them); the file reads \
             as it was before it",
            super::stdin::shown(file)
        )?;
    }
    Ok(())
}

/// `info` of a zTensor file: what it is, its attributes a key to a line, and a table of its
/// objects and their components with element counts and stored and decoded sizes. `full`
/// (`--attributes`) prints every attribute value whole, objects' own too.
pub fn print<S: ReadAt>(
    out: &mut impl Write,
    path: &Path,
    reader: &Reader<S>,
    full: bool,
) -> Result<()> {
    use super::text::{count, size, size_cell};
    let m = reader.manifest();
    let manifest = m.manifest();
    let version = match (&manifest.version_string, manifest.version) {
        (Some(s), v) => format!("{v} (\"{s}\")"),
        (None, Version::V0_1) => "0.1".to_owned(),
        (None, v) => v.to_string(),
    };
    let location = m.location();
    writeln!(out, "file:       {}", super::stdin::shown(path))?;
    writeln!(out, "version:    {version}")?;
    writeln!(out, "objects:    {}", m.len())?;
    writeln!(out, "manifest:   {} at offset {}", size(location.len), location.offset)?;
    super::text::attribute_lines(out, "attributes:", manifest.attributes.as_ref(), full)?;
    if m.is_empty() {
        return Ok(());
    }
    let header = [
        "NAME", "FORMAT", "SHAPE", "ELEMENTS", "ROLE", "DTYPE", "ENCODING", "STORED", "DECODED",
        "DIGEST",
    ];
    let (mut stored, mut decoded, mut unknown, mut elements) = (0u64, 0u64, 0usize, 0u64);
    let mut with_attributes = 0usize;
    let mut objects: Vec<_> = m.objects().collect();
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    for object in &objects {
        elements = elements.saturating_add(element_count(&object.object().shape));
        with_attributes += usize::from(object.object().attributes.is_some());
        for ((_, c), (_, decoded_len)) in
            object.object().components.iter().zip(object.decoded_lens())
        {
            stored = stored.saturating_add(c.length);
            match decoded_len {
                Some(n) => decoded = decoded.saturating_add(n),
                None => unknown += 1,
            }
        }
    }
    // The rows are made twice (to measure, then to print) rather than held: a million objects
    // would otherwise cost hundreds of bytes each again.
    let mut rows = |each: &mut super::text::RowSink<'_>| -> std::io::Result<()> {
        for object in &objects {
            let o = object.object();
            for (i, ((role, c), (_, decoded_len))) in
                o.components.iter().zip(object.decoded_lens()).enumerate()
            {
                let mut dtype = match &c.logical_type {
                    Some(t) => format!("{}:{t}", c.dtype),
                    None => c.dtype.to_string(),
                };
                match c.byte_order() {
                    ByteOrder::Little => {}
                    ByteOrder::Big => dtype.push_str(" (big-endian)"),
                    ByteOrder::Unknown(b) => dtype.push_str(&format!(" ({b}?)")),
                }
                let first = i == 0;
                each(&[
                    if first { super::text::shown(&o.name).into_owned() } else { String::new() },
                    if first { o.format.to_string() } else { String::new() },
                    if first { format!("{:?}", o.shape) } else { String::new() },
                    if first { element_count(&o.shape).to_string() } else { String::new() },
                    super::text::shown(role).into_owned(),
                    dtype,
                    if c.encoding == Encoding::Raw { "raw".into() } else { c.encoding.to_string() },
                    size_cell(c.length),
                    decoded_len.map_or_else(|| "?".into(), size_cell),
                    c.digest
                        .as_ref()
                        .map_or_else(|| "-".into(), |d| d.algorithm().name().to_owned()),
                ])?;
            }
            if let Some(reason) = object.unsupported() {
                let mut row: [String; 10] = Default::default();
                row[4] = format!("unsupported: {}", reason.kind());
                each(&row)?;
            }
        }
        Ok(())
    };
    writeln!(out)?;
    super::text::table_of(out, &header, &mut rows)?;
    let unknown = if unknown > 0 {
        format!(" (+{unknown} component(s) of unknown decoded size)")
    } else {
        String::new()
    };
    writeln!(out)?;
    writeln!(
        out,
        "total: {}, {} elements, {} stored, {} decoded{unknown}",
        super::text::plural(m.len(), "object"),
        count(elements),
        size(stored),
        size(decoded)
    )?;
    super::text::own_attributes(out, with_attributes, "object", full, &mut |each| {
        for object in &objects {
            let o = object.object();
            if let Some(a) = o.attributes.as_deref() {
                each(&o.name, a)?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// How many elements a tensor of `shape` has (its parameters, as model cards count them):
/// the product of its dimensions, saturating (a hostile shape may overflow).
pub fn element_count(shape: &[u64]) -> u64 {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).unwrap_or(u64::MAX)
}

/// `info --json`: what the table shows, as pretty JSON written to `out` as it is made (not built
/// as a JSON tree first: a million objects or an attribute array of millions of items would cost
/// gigabytes as one), with the bytes of an append that has not committed and the names that
/// repeat an earlier one.
///
/// # Errors
/// Errors writing to `out`.
pub fn write_json<S: ReadAt>(
    out: &mut impl Write,
    path: &Path,
    reader: &Reader<S>,
    uncommitted_bytes: u64,
    shadowed: &[&str],
) -> std::io::Result<()> {
    use serde::ser::{SerializeMap, SerializeSeq};
    use ztensor_dump::JsonOf;

    #[derive(serde::Serialize)]
    struct Location {
        offset: u64,
        len: u64,
    }
    #[derive(serde::Serialize)]
    struct Report<'a, O: serde::Serialize> {
        file: String,
        format: &'static str,
        version: String,
        version_string: Option<&'a str>,
        manifest: Location,
        attributes: Option<JsonOf<'a>>,
        objects: O,
        uncommitted_bytes: u64,
        shadowed: &'a [&'a str],
    }
    #[derive(serde::Serialize)]
    struct ComponentJson {
        dtype: String,
        #[serde(rename = "type")]
        logical_type: Option<String>,
        encoding: String,
        big_endian: bool,
        offset: u64,
        stored: u64,
        decoded: Option<u64>,
        digest: Option<String>,
    }
    struct Components<'a, 'r>(&'a ztensor_format::ObjectRef<'r>);
    impl serde::Serialize for Components<'_, '_> {
        fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
            let o = self.0.object();
            let mut map = s.serialize_map(Some(o.components.len()))?;
            for ((role, c), (_, decoded)) in o.components.iter().zip(self.0.decoded_lens()) {
                let value = ComponentJson {
                    dtype: c.dtype.to_string(),
                    logical_type: c.logical_type.as_ref().map(ToString::to_string),
                    encoding: c.encoding.to_string(),
                    big_endian: *c.byte_order() == ByteOrder::Big,
                    offset: c.offset,
                    stored: c.length,
                    decoded,
                    digest: c.digest.as_ref().map(|d| d.algorithm().name().to_owned()),
                };
                map.serialize_entry(role, &value)?;
            }
            map.end()
        }
    }
    #[derive(serde::Serialize)]
    struct ObjectJson<'a, C: serde::Serialize> {
        name: &'a str,
        format: String,
        shape: &'a [u64],
        elements: u64,
        attributes: Option<JsonOf<'a>>,
        components: C,
        unsupported: Option<&'static str>,
    }
    struct Objects<'r>(Vec<ztensor_format::ObjectRef<'r>>);
    impl serde::Serialize for Objects<'_> {
        fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
            let mut seq = s.serialize_seq(Some(self.0.len()))?;
            for object in &self.0 {
                let o = object.object();
                seq.serialize_element(&ObjectJson {
                    name: &o.name,
                    format: o.format.to_string(),
                    shape: &o.shape,
                    elements: element_count(&o.shape),
                    attributes: o.attributes.as_deref().map(|a| JsonOf(a.root())),
                    components: Components(object),
                    unsupported: object.unsupported().map(|e| e.kind().id()),
                })?;
            }
            seq.end()
        }
    }

    let m = reader.manifest();
    let manifest = m.manifest();
    let mut objects: Vec<_> = m.objects().collect();
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    let location = m.location();
    let report = Report {
        file: super::stdin::name(path),
        format: ztensor_registry::Kind::Zt.format().id,
        version: manifest.version.to_string(),
        version_string: manifest.version_string.as_deref(),
        manifest: Location { offset: location.offset, len: location.len },
        attributes: manifest.attributes.as_ref().map(|a| JsonOf(a.root())),
        objects: Objects(objects),
        uncommitted_bytes,
        shadowed,
    };
    serde_json::to_writer_pretty(&mut *out, &report)?;
    writeln!(out)
}

/// `ztensor rules`: every rule of the zTensor formats (identifier, layer, strict-only,
/// summary), then the TensorBuffers rule identifiers.
pub fn rules(out: &mut impl Write, json: bool) -> Result<()> {
    use ztensor_format::ErrorKind;
    let layer = |k: ErrorKind| format!("{:?}", k.layer()).to_ascii_lowercase();
    if json {
        let rules: Vec<_> = ErrorKind::ALL
            .iter()
            .map(|&k| {
                serde_json::json!({
                    "id": k.id(),
                    "layer": layer(k),
                    "strict_only": k.strict_only(),
                    "summary": k.summary(),
                })
            })
            .collect();
        let tb: Vec<&str> = ztensor_tensorbuffers::ErrorKind::ALL.iter().map(|k| k.id()).collect();
        writeln!(out, "{:#}", serde_json::json!({"ztensor": rules, "tensorbuffers": tb}))?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = ErrorKind::ALL
        .iter()
        .map(|&k| {
            let strict = if k.strict_only() { "strict" } else { "" };
            vec![k.id().to_owned(), layer(k), strict.to_owned(), k.summary().to_owned()]
        })
        .collect();
    super::text::table(out, &["RULE", "LAYER", "STRICT", "WHAT IT SAYS"], &rows)?;
    let tb: Vec<&str> = ztensor_tensorbuffers::ErrorKind::ALL.iter().map(|k| k.id()).collect();
    writeln!(out, "\nTensorBuffers: {}", tb.join(", "))?;
    writeln!(
        out,
        "\nfile: the file is rejected; object: one object is unsupported; data: checked on decoded \
         bytes (verify); decode: checked while reading; write: refused when writing. `strict` \
         rules are enforced only with --strict."
    )?;
    Ok(())
}

/// `info` on a file of another format (safetensors, a sharded checkpoint, TensorBuffers), read
/// through the tensor-source interface: what it is, its attributes (safetensors `__metadata__`,
/// the TensorBuffers metadata zTensor keeps as `tensorbuffers.*`), and a table of its tensors.
pub fn source_info(
    out: &mut impl Write,
    path: &Path,
    kind: Kind,
    source: &dyn TensorSource,
    json: bool,
    full: bool,
) -> Result<()> {
    // The tensors by name, their names borrowed from the source where it can: each row is
    // made from the source when it is shown, not held (a checkpoint may have a million).
    let mut order: Vec<(std::borrow::Cow<'_, str>, usize)> =
        (0..source.len()).filter_map(|i| source.info(i).map(|o| (o.name, i))).collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let dtype_of = tensor_dtype;
    let infos = || order.iter().filter_map(|&(_, i)| source.info(i));
    let attributes =
        source.try_attributes().map_err(|e| crate::reported(&path.display().to_string(), &e))?;
    if json {
        // Each tensor's entry is made as it is written.
        type Infos<'t, 'a> = Box<dyn Iterator<Item = ztensor_io::ObjectInfo<'a>> + 't>;
        struct Tensors<'t, 'a>(&'t dyn Fn() -> Infos<'t, 'a>);
        impl serde::Serialize for Tensors<'_, '_> {
            fn serialize<Z: serde::Serializer>(&self, to: Z) -> Result<Z::Ok, Z::Error> {
                #[derive(serde::Serialize)]
                struct Entry<'e> {
                    name: &'e str,
                    dtype: String,
                    shape: &'e [u64],
                    elements: u64,
                    bytes: u64,
                    stored: u64,
                    decoded: Option<u64>,
                    shard: Option<&'e str>,
                }
                to.collect_seq((self.0)().map(|o| {
                    serde_json::to_value(Entry {
                        name: &o.name,
                        dtype: tensor_dtype(&o),
                        shape: &o.shape,
                        elements: super::info::element_count(&o.shape),
                        bytes: o.stored_len(),
                        stored: o.stored_len(),
                        decoded: o
                            .components
                            .iter()
                            .try_fold(0u64, |sum, c| Some(sum + c.decoded_len?)),
                        shard: o.location.as_deref(),
                    })
                    .unwrap_or_default()
                }))
            }
        }
        let boxed = || -> Infos<'_, '_> { Box::new(infos()) };
        let tensors = Tensors(&boxed);
        let format = kind.format().id;
        // Written as it is serialized: attributes of millions of values are not copied into
        // a JSON value first.
        #[derive(serde::Serialize)]
        struct Report<'a> {
            file: String,
            format: &'a str,
            description: std::borrow::Cow<'a, str>,
            attributes: Option<ztensor_dump::JsonOf<'a>>,
            tensors: Tensors<'a, 'a>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            left_out: Vec<String>,
        }
        let report = Report {
            file: super::stdin::name(path),
            format,
            description: source.format_name(),
            attributes: attributes.as_deref().map(|a| ztensor_dump::JsonOf(a.root())),
            tensors,
            left_out: source.left_out(),
        };
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    use super::text::{count, shown, size, size_cell};
    writeln!(out, "file:       {}", super::stdin::shown(path))?;
    writeln!(out, "format:     {}", shown(&source.format_name()))?;
    writeln!(out, "tensors:    {}", order.len())?;
    super::text::attribute_lines(out, "attributes:", attributes.as_deref(), full)?;
    let sharded = infos().any(|o| o.location.is_some());
    let (mut stored, mut decoded, mut elements, mut with_attributes) = (0u64, 0u64, 0u64, 0usize);
    let mut rows = |each: &mut super::text::RowSink<'_>| -> std::io::Result<()> {
        (stored, decoded, elements, with_attributes) = (0, 0, 0, 0);
        for o in infos() {
            let n = super::info::element_count(&o.shape);
            let decoded_len =
                o.components.iter().try_fold(0u64, |sum, c| Some(sum + c.decoded_len?));
            stored = stored.saturating_add(o.stored_len());
            decoded = decoded.saturating_add(decoded_len.unwrap_or(0));
            elements = elements.saturating_add(n);
            with_attributes += usize::from(o.attributes.is_some());
            let mut row = vec![
                shown(&o.name).into_owned(),
                dtype_of(&o),
                format!("{:?}", o.shape),
                n.to_string(),
                size_cell(o.stored_len()),
                decoded_len.map_or_else(|| "?".into(), size_cell),
            ];
            if sharded {
                row.push(shown(o.location.as_deref().unwrap_or_default()).into_owned());
            }
            each(&row)?;
        }
        Ok(())
    };
    writeln!(out)?;
    // DTYPE and SHAPE keep their customary widths (11 and 16) unless a cell needs more.
    let mut header =
        vec!["NAME", "DTYPE      ", "SHAPE           ", "ELEMENTS", "STORED", "DECODED"];
    if sharded {
        header.push("SHARD");
    }
    super::text::table_of(out, &header, &mut rows)?;
    writeln!(out)?;
    writeln!(
        out,
        "total: {}, {} elements, {} stored, {} decoded",
        super::text::plural(order.len(), "tensor"),
        count(elements),
        size(stored),
        size(decoded)
    )?;
    super::text::own_attributes(out, with_attributes, "tensor", full, &mut |each| {
        for o in infos() {
            if let Some(a) = o.attributes.as_deref() {
                each(&o.name, a)?;
            }
        }
        Ok(())
    })?;
    let left_out = source.left_out();
    if !left_out.is_empty() {
        let names: Vec<String> = left_out.iter().map(|n| format!("{:?}", shown(n))).collect();
        writeln!(
            out,
            "left out: {} that {}: {}",
            super::text::plural(left_out.len(), "entry"),
            if left_out.len() == 1 { "is not a tensor" } else { "are not tensors" },
            names.join(", ")
        )?;
    }
    Ok(())
}

/// A tensor's dtype as `info` shows it: each component's, with its logical type.
fn tensor_dtype(o: &ztensor_io::ObjectInfo<'_>) -> String {
    o.components
        .iter()
        .map(|c| match &c.logical_type {
            Some(t) => format!("{}:{t}", c.dtype),
            None => c.dtype.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}
