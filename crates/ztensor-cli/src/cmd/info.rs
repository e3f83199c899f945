//! `ztensor info`: version, attributes, and a table of objects and components.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use ztensor_format::{ByteOrder, Encoding, Version};
use ztensor_io::{ReadAt, Reader};

pub fn print<S: ReadAt>(out: &mut impl Write, path: &Path, reader: &Reader<S>) -> Result<()> {
    let m = reader.manifest();
    let manifest = m.manifest();
    let version = match (&manifest.version_string, manifest.version) {
        (Some(s), v) => format!("{v} (\"{s}\")"),
        (None, Version::V0_1) => "0.1".to_owned(),
        (None, v) => v.to_string(),
    };
    let location = m.location();
    writeln!(out, "file:       {}", path.display())?;
    writeln!(out, "version:    {version}")?;
    writeln!(out, "objects:    {}", m.len())?;
    writeln!(out, "manifest:   {} bytes at offset {}", location.len, location.offset)?;
    match &manifest.attributes {
        Some(a) => writeln!(out, "attributes: {a}")?,
        None => writeln!(out, "attributes: none")?,
    }
    if m.is_empty() {
        return Ok(());
    }
    let header =
        ["NAME", "FORMAT", "SHAPE", "ROLE", "DTYPE", "ENCODING", "STORED", "DECODED", "DIGEST"];
    let mut rows = Vec::new();
    let (mut stored, mut decoded, mut unknown) = (0u64, 0u64, 0usize);
    let mut objects: Vec<_> = m.objects().collect();
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    for object in objects {
        let o = object.object();
        for (i, (role, c)) in o.components.iter().enumerate() {
            let mut dtype = match &c.logical_type {
                Some(t) => format!("{}:{t}", c.dtype),
                None => c.dtype.to_string(),
            };
            match &c.byte_order {
                ByteOrder::Little => {}
                ByteOrder::Big => dtype.push_str(" (big-endian)"),
                ByteOrder::Unknown(b) => dtype.push_str(&format!(" ({b}?)")),
            }
            let decoded_len = object.decoded_len(role);
            stored = stored.saturating_add(c.length);
            match decoded_len {
                Some(n) => decoded = decoded.saturating_add(n),
                None => unknown += 1,
            }
            let first = i == 0;
            rows.push([
                if first { o.name.clone() } else { String::new() },
                if first { o.format.to_string() } else { String::new() },
                if first { format!("{:?}", o.shape) } else { String::new() },
                role.clone(),
                dtype,
                if c.encoding == Encoding::Raw { "raw".into() } else { c.encoding.to_string() },
                c.length.to_string(),
                decoded_len.map_or_else(|| "?".into(), |n| n.to_string()),
                c.digest.as_ref().map_or_else(|| "-".into(), |d| d.algorithm().name().to_owned()),
            ]);
        }
        if let Some(reason) = object.unsupported() {
            let mut row: [String; 9] = Default::default();
            row[3] = format!("unsupported: {}", reason.kind());
            rows.push(row);
        }
    }
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> =
            cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        parts.join("  ").trim_end().to_owned()
    };
    writeln!(out)?;
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in &rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    let unknown = if unknown > 0 {
        format!(" (+{unknown} component(s) of unknown decoded size)")
    } else {
        String::new()
    };
    writeln!(out)?;
    writeln!(out, "total: {stored} bytes stored, {decoded} bytes decoded{unknown}")?;
    Ok(())
}
