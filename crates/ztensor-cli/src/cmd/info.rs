//! `ztensor info`: version, attributes, and a table of objects and components.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use ztensor_format::{ByteOrder, Encoding, Version};
use ztensor_io::{ReadAt, Reader};

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

/// `verify`: the manifest (on open), then every object on all threads.
pub fn verify(
    out: &mut impl Write,
    file: &Path,
    strict: bool,
    threads: usize,
    json: bool,
    quiet: bool,
) -> Result<std::process::ExitCode> {
    let options = ztensor_cli::options(strict);
    let opening = ztensor_registry::OpenOptions { options: options.clone(), ..Default::default() };
    let reader = match ztensor_registry::open_zt(file, &opening) {
        Ok(r) => r,
        Err(e) if json && e.rule().is_some() => {
            let report = serde_json::json!({
                "file": super::stdin::name(file),
                "sound": false,
                "objects": null,
                "problems": [e.to_string()],
            });
            writeln!(out, "{report:#}")?;
            return Ok(std::process::ExitCode::from(1));
        }
        Err(e) => {
            let hint =
                if e.rule().is_some() { crate::torn_hint(file, &options) } else { String::new() };
            let base = crate::reported(&file.display().to_string(), &e);
            return Err(if base.downcast_ref::<crate::Rejected>().is_some() {
                anyhow::anyhow!(crate::Rejected(format!("{base}{hint}")))
            } else {
                base
            });
        }
    };
    let stored = reader
        .manifest()
        .objects()
        .flat_map(|o| o.object().components.values())
        .map(|c| c.length)
        .sum();
    let bar = super::repack::Bar::new(stored, quiet);
    let verdicts =
        ztensor_par::verify_all(&reader, &ztensor_par::ParOptions::with_threads(threads), &bar);
    bar.finish();
    let verdicts = verdicts.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut problems = Vec::new();
    let (mut verified, mut unverifiable, mut absent) = (0usize, Vec::new(), 0usize);
    for (object, (name, verdict)) in reader.manifest().objects().zip(verdicts) {
        if let Err(e) = verdict {
            problems.push(e.to_string());
            continue;
        }
        // A sound object's known digests were all verified by `verify_all`.
        for (role, c) in &object.object().components {
            match &c.digest {
                None => absent += 1,
                Some(d) if d.bytes().is_none() => unverifiable.push(format!("{name}/{role}: {d}")),
                Some(_) => verified += 1,
            }
        }
    }
    let n = reader.manifest().len();
    let decoded: u64 = reader
        .manifest()
        .objects()
        .flat_map(|o| o.decoded_lens().map(|(_, n)| n.unwrap_or(0)))
        .sum();
    let code = if problems.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    };
    if json {
        let report = serde_json::json!({
            "file": super::stdin::name(file),
            "sound": problems.is_empty(),
            "objects": n,
            "decoded": decoded,
            "problems": problems,
            "digests": {"verified": verified, "absent": absent, "unverifiable": unverifiable},
        });
        writeln!(out, "{report:#}")?;
        return Ok(code);
    }
    for p in &problems {
        writeln!(out, "{p}")?;
    }
    for u in &unverifiable {
        writeln!(out, "unverifiable digest (unknown algorithm): {u}")?;
    }
    let summary = format!(
        "{}, {} decoded, {} verified, {absent} components without digest, {} unverifiable",
        super::text::plural(n, "object"),
        super::text::size(decoded),
        super::text::plural(verified, "digest"),
        unverifiable.len()
    );
    if problems.is_empty() {
        writeln!(out, "{}: sound ({summary})", super::stdin::shown(file))?;
    } else {
        let file = super::stdin::shown(file);
        writeln!(out, "{file}: {} problem(s) ({summary})", problems.len())?;
    }
    Ok(code)
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
