//! Text for the terminal: tables with columns of any width, and names made safe to print.

use std::borrow::Cow;
use std::io::{self, Write};

/// Writes `header` and `rows` as left-aligned columns, each as wide as its widest cell (counted
/// in characters), two spaces apart, trailing spaces trimmed. Cells of any length print (the
/// standard `{:<width$}` stops at 65,535).
pub fn table(out: &mut impl Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    table_of(out, header, &mut |each| {
        for row in rows {
            each(row)?;
        }
        Ok(())
    })
}

/// Something that takes a table's rows one at a time.
pub type RowSink<'a> = dyn FnMut(&[String]) -> io::Result<()> + 'a;

/// As [`table`], for rows made by `rows` (which hands each to its argument, and is called
/// twice: once to measure the columns, once to print), so a table of a million rows is never
/// held whole.
pub fn table_of(
    out: &mut impl Write,
    header: &[&str],
    rows: &mut dyn FnMut(&mut RowSink<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    rows(&mut |row| {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
        Ok(())
    })?;
    let mut line = String::new();
    let mut write_line = |cells: &mut dyn Iterator<Item = &str>| -> io::Result<()> {
        line.clear();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', w.saturating_sub(cell.chars().count())));
        }
        writeln!(out, "{}", line.trim_end())
    };
    write_line(&mut header.iter().copied())?;
    rows(&mut |row| write_line(&mut row.iter().map(String::as_str)))
}

/// Whether `c` would act on a terminal rather than show: control characters (escape sequences,
/// newlines, carriage returns) and the invisible marks that reorder text.
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `name` as it may go to a terminal: characters that would act there are escaped as JSON
/// escapes them (`\n`, `\t`, `\r`, `\u001b`, `\u202e`), everything else is left as it is. The
/// same escaper serves names, paths and the strings of attribute values, so a string shows the
/// same wherever it appears. `--json` output keeps names exact instead.
pub fn shown(name: &str) -> Cow<'_, str> {
    if !name.chars().any(acts) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        escape_into(c, &mut out);
    }
    Cow::Owned(out)
}

fn escape_into(c: char, out: &mut String) {
    use std::fmt::Write as _;
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // Every character that acts is in the Basic Multilingual Plane: one escape each.
        c if acts(c) => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// A message as it may go to a terminal: as [`shown`], except that its line breaks stay (the
/// tool's own messages span lines; names and paths inside them were escaped with [`shown`]
/// where they were put in, and this catches what came from elsewhere).
pub fn shown_message(message: &str) -> Cow<'_, str> {
    if !message.chars().any(|c| c != '\n' && acts(c)) {
        return Cow::Borrowed(message);
    }
    let lines: Vec<Cow<'_, str>> = message.split('\n').map(shown).collect();
    Cow::Owned(lines.join("\n"))
}

/// `value` as one line of JSON by the conformance dump's rules (`$bytes`, `$map` for a map
/// whose keys are not all text, `$tag`), a space after each `,` and `:`, with the characters
/// that would act on a terminal escaped as JSON escapes them: still JSON, and safe to print.
pub fn json_line(value: ztensor_format::ValueRef<'_>) -> String {
    use serde::Serialize;
    let mut serializer = serde_json::Serializer::with_formatter(Vec::new(), Spaced);
    let _ = ztensor_dump::JsonOf(value).serialize(&mut serializer);
    escape_acting(String::from_utf8(serializer.into_inner()).unwrap_or_default())
}

/// JSON on one line with a space after each `,` and `:`, as people write it.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `value` as [`json_line`] gives it, cut short for a terminal line: arrays past 8 items, maps
/// past 32 entries, strings past 120 characters and byte strings past 32 bytes end in `…`,
/// nesting past 6 levels is elided, and the whole stops at about 400 characters, so a report of
/// attributes holding millions of values stays a line long. Also whether anything was cut.
/// `--attributes` and `--json` give every value.
pub fn summary(value: ztensor_format::ValueRef<'_>) -> (String, bool) {
    let mut out = String::new();
    let cut = summarize(value, 0, &mut out);
    (escape_acting(out), cut)
}

/// How big `value` is, for a value [`summary`] cut: `20402 characters`, `50000 items`.
pub fn extent(value: ztensor_format::ValueRef<'_>) -> String {
    use ztensor_format::attributes::Item;
    match value.item() {
        Item::Text(s) => plural(s.chars().count(), "character"),
        Item::Bytes(b) => plural(b.len(), "byte"),
        Item::Array(items) => plural(items.len(), "item"),
        Item::Map(entries) => plural(entries.len(), "entry"),
        _ => "nested".to_owned(),
    }
}

/// `text` (JSON) with every character that acts on a terminal escaped. JSON puts such
/// characters only inside strings, where `\uXXXX` (or `\n`, `\t`, `\r`) means the same.
fn escape_acting(text: String) -> String {
    if !text.chars().any(acts) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        escape_into(c, &mut out);
    }
    out
}

fn summarize(value: ztensor_format::ValueRef<'_>, depth: usize, out: &mut String) -> bool {
    use std::fmt::Write as _;
    use ztensor_format::attributes::Item;
    const ITEMS: usize = 8;
    const ENTRIES: usize = 32;
    const CHARS: usize = 120;
    const BYTES: usize = 32;
    const LINE: usize = 400;
    if depth > 6 || out.len() > LINE {
        out.push('…');
        return true;
    }
    let quoted = |s: &str| serde_json::Value::from(s).to_string();
    match value.item() {
        Item::Array(items) => {
            out.push('[');
            let len = items.len();
            let mut cut = len > ITEMS;
            let mut shown = 0;
            for item in items.take(ITEMS) {
                if out.len() > LINE {
                    break;
                }
                if shown > 0 {
                    out.push_str(", ");
                }
                cut |= summarize(item, depth + 1, out);
                shown += 1;
            }
            if len > shown {
                out.push_str(if shown == 0 { "…" } else { ", …" });
                cut = true;
            }
            out.push(']');
            cut
        }
        Item::Map(entries) => {
            let text_keys = entries.clone().all(|(k, _)| k.as_text().is_some());
            let len = entries.len();
            let mut cut = len > ENTRIES;
            out.push_str(if text_keys { "{" } else { "{\"$map\": [" });
            let mut shown = 0;
            for (k, v) in entries.take(ENTRIES) {
                if out.len() > LINE {
                    break;
                }
                if shown > 0 {
                    out.push_str(", ");
                }
                shown += 1;
                if let Some(k) = k.as_text().filter(|_| text_keys) {
                    out.push_str(&quoted(k));
                    out.push_str(": ");
                    cut |= summarize(v, depth + 1, out);
                } else {
                    out.push('[');
                    cut |= summarize(k, depth + 1, out);
                    out.push_str(", ");
                    cut |= summarize(v, depth + 1, out);
                    out.push(']');
                }
            }
            if len > shown {
                out.push_str(if shown == 0 { "…" } else { ", …" });
                cut = true;
            }
            out.push_str(if text_keys { "}" } else { "]}" });
            cut
        }
        Item::Tag(tag, inner) => {
            let _ = write!(out, "{{\"$tag\": {tag}, \"value\": ");
            let cut = summarize(inner, depth + 1, out);
            out.push('}');
            cut
        }
        Item::Text(s) if s.chars().count() > CHARS => {
            let mut head: String = s.chars().take(CHARS).collect();
            head.push('…');
            out.push_str(&quoted(&head));
            true
        }
        Item::Bytes(b) if b.len() > BYTES => {
            let mut head = ztensor_format::to_hex(&b[..BYTES]);
            head.push('…');
            let _ = write!(out, "{{\"$bytes\": {}}}", quoted(&head));
            true
        }
        _ => {
            spaced(&ztensor_dump::cbor_to_json(&value.to_value()), out);
            false
        }
    }
}

/// `value` as [`Spaced`] JSON (the dump's `$bytes`, `$int`, `$simple` and `$float` objects
/// among scalars), as [`summary`] writes containers.
fn spaced(value: &serde_json::Value, out: &mut String) {
    use serde::Serialize;
    let mut serializer = serde_json::Serializer::with_formatter(Vec::new(), Spaced);
    let _ = value.serialize(&mut serializer);
    out.push_str(&String::from_utf8_lossy(&serializer.into_inner()));
}

/// Writes `attributes` a key to a line under `label` (`attributes:`): each key, then its value
/// as JSON, cut short with its extent unless `full`; past 32 keys the rest are counted unless
/// `full`. Keys and strings are escaped by [`shown`]'s rules.
pub fn attribute_lines(
    out: &mut impl Write,
    label: &str,
    attributes: Option<&ztensor_format::Attributes>,
    full: bool,
) -> io::Result<()> {
    const KEYS: usize = 32;
    let Some(attributes) = attributes.filter(|a| !a.is_empty()) else {
        return writeln!(out, "{label} none");
    };
    writeln!(out, "{label}")?;
    let mut cut_any = false;
    let entries = attributes.entries();
    let len = entries.len();
    for (i, (key, value)) in entries.enumerate() {
        if i == KEYS && !full {
            writeln!(out, "  … {} more", plural(len - KEYS, "key"))?;
            cut_any = true;
            break;
        }
        let key = match key.as_text() {
            Some(k) => shown(k).into_owned(),
            None => json_line(key),
        };
        if full {
            writeln!(out, "  {key}: {}", json_line(value))?;
            continue;
        }
        let (text, cut) = summary(value);
        if cut {
            writeln!(out, "  {key}: {text} ({})", extent(value))?;
            cut_any = true;
        } else {
            writeln!(out, "  {key}: {text}")?;
        }
    }
    if cut_any {
        writeln!(out, "  (--attributes shows every value whole)")?;
    }
    Ok(())
}

/// Something that takes an object's name and its attributes.
pub type AttributesSink<'a> = dyn FnMut(&str, &ztensor_format::Attributes) -> io::Result<()> + 'a;

/// After a table of `count` objects (`noun`s) with attributes of their own: each one's
/// attributes whole, under its name, when `full` (`each` hands them over one by one), else a
/// line saying how many have some.
pub fn own_attributes(
    out: &mut impl Write,
    count: usize,
    noun: &str,
    full: bool,
    each: &mut dyn FnMut(&mut AttributesSink<'_>) -> io::Result<()>,
) -> io::Result<()> {
    if count == 0 {
        return Ok(());
    }
    writeln!(out)?;
    if !full {
        let (has, its) = if count == 1 { ("has", "its") } else { ("have", "their") };
        let many = plural(count, noun);
        return writeln!(out, "{many} {has} attributes of {its} own (--attributes shows them)");
    }
    each(&mut |name, attributes| {
        let label = format!("attributes of {}:", shown(name));
        attribute_lines(&mut *out, &label, Some(attributes), true)
    })
}

/// Whether sizes print as exact byte counts (`--bytes`) rather than in human units.
static EXACT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`size`], [`size_cell`] and [`count`] print exact figures (`--bytes`).
pub fn set_exact(exact: bool) {
    EXACT.store(exact, std::sync::atomic::Ordering::Relaxed);
}

fn exact() -> bool {
    EXACT.load(std::sync::atomic::Ordering::Relaxed)
}

/// `n` with three significant digits in steps of 1000 (`83.1`, `2.37`, `868`) and the index of
/// its unit.
fn scaled(n: u64) -> (String, usize) {
    if n < 1000 {
        return (n.to_string(), 0);
    }
    let mut unit = 0;
    let mut v = n as f64;
    while v >= 999.5 && unit < 6 {
        v /= 1000.0;
        unit += 1;
    }
    let text = if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    };
    (text, unit)
}

/// A number of bytes for a sentence: `83.1 MB` (decimal units, as disks and downloads count
/// them), or `83135045 bytes` with `--bytes`.
pub fn size(n: u64) -> String {
    if exact() {
        return plural(usize::try_from(n).unwrap_or(usize::MAX), "byte");
    }
    size_cell(n)
}

/// A number of bytes given on the command line, given back in both unit families, as it may
/// have been given in either: `21.0 MB (20.0 MiB)`; `200 B` below a kibibyte; exact with
/// `--bytes`.
pub fn size_given(n: u64) -> String {
    if exact() || n < 1024 {
        return size(n);
    }
    let mut unit = 0;
    let mut v = n as f64;
    while v >= 1023.5 && unit < 6 {
        v /= 1024.0;
        unit += 1;
    }
    let text = if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    };
    let binary = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"][unit];
    format!("{} ({text} {binary})", size(n))
}

/// A number of bytes for a table cell: `83.1 MB`, or `83135045` with `--bytes`.
pub fn size_cell(n: u64) -> String {
    if exact() {
        return n.to_string();
    }
    let (text, unit) = scaled(n);
    format!("{text} {}", ["B", "kB", "MB", "GB", "TB", "PB", "EB"][unit])
}

/// A count of elements as model cards give parameters: `8.03B`, `124M`, `868`; exact with
/// `--bytes`.
pub fn count(n: u64) -> String {
    if exact() {
        return n.to_string();
    }
    let (text, unit) = scaled(n);
    format!("{text}{}", ["", "k", "M", "B", "T", "P", "E"][unit])
}

/// `n thing` or `n things`, by the English rules for the nouns messages use: `entry` →
/// `entries` (a consonant and `y`), `index` → `indexes` and `match` → `matches` (a hissing
/// end), else an `s`.
pub fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        return format!("1 {thing}");
    }
    let consonant_y = thing.strip_suffix('y').filter(|stem| {
        stem.chars().last().is_some_and(|c| c.is_ascii_alphabetic() && !"aeiou".contains(c))
    });
    if let Some(stem) = consonant_y {
        format!("{n} {stem}ies")
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|end| thing.ends_with(end)) {
        format!("{n} {thing}es")
    } else {
        format!("{n} {thing}s")
    }
}

/// `items` joined by commas, the first 10, then how many more.
pub fn listed(items: &[String]) -> String {
    let mut text = items.iter().take(10).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 10 {
        text.push_str(&format!(" and {} more", items.len() - 10));
    }
    text
}

/// Parses a byte size: `65536`, `20M` or `20MB` (decimal: 20,000,000 bytes), `20MiB` (binary:
/// 20 × 2^20), likewise K/KB/KiB, G/GB/GiB and T/TB/TiB, in any case. Decimal units are the
/// ones sizes are reported in (`info`, the summaries), so a size given back reads as it was
/// given.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let (prefix, binary) = match unit.strip_suffix("ib") {
        Some(prefix) if !prefix.is_empty() => (prefix, true),
        _ => (unit.strip_suffix('b').unwrap_or(&unit), false),
    };
    let power = match prefix {
        "" if !binary => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => {
            return Err(format!(
                "unknown size unit in {s:?} (use K, M, G or T for powers of 1000, KiB, MiB, GiB \
                 or TiB for powers of 1024)"
            ));
        }
    };
    let base: u64 = if binary { 1024 } else { 1000 };
    n.checked_mul(base.pow(power)).ok_or_else(|| format!("size {s:?} is too large"))
}

/// Parses `--chunk`: a zstd frame size from 4 KiB to 1 GiB. Each frame is held in memory
/// whole, so it must be neither zero (a whole component at once, however large the file says it
/// is) nor huge; nor tiny, which would plan millions of pieces per large tensor.
pub fn parse_chunk(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    if (4 << 10..=1 << 30).contains(&n) {
        Ok(n)
    } else {
        Err(format!("a chunk of {n} bytes is outside 4KiB..=1GiB (4096 to 1073741824 bytes)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_given_back_name_both_unit_families() {
        assert_eq!(size_given(200), "200 B");
        assert_eq!(size_given(20_000_000), "20.0 MB (19.1 MiB)");
        assert_eq!(size_given(20 << 20), "21.0 MB (20.0 MiB)");
        assert_eq!(size_given(4 << 30), "4.29 GB (4.00 GiB)");
        assert_eq!(size_given(5_000_000_000), "5.00 GB (4.66 GiB)");
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "entry"), "1 entry");
        assert_eq!(plural(983, "entry"), "983 entries");
        assert_eq!(plural(0, "key"), "0 keys");
        assert_eq!(plural(2, "day"), "2 days");
        assert_eq!(plural(2, "index"), "2 indexes");
        assert_eq!(plural(2, "match"), "2 matches");
        assert_eq!(plural(3, "object"), "3 objects");
        assert_eq!(plural(2, "byte"), "2 bytes");
    }

    #[test]
    fn cells_wider_than_the_format_limit_print() {
        let long = "x".repeat(70_000);
        let mut out = Vec::new();
        table(
            &mut out,
            &["NAME", "N"],
            &[vec![long.clone(), "1".into()], vec!["a".into(), "2".into()]],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("NAME{}  N", " ".repeat(70_000 - 4)));
        assert_eq!(lines[1], format!("{long}  1"));
        assert_eq!(lines[2], format!("a{}  2", " ".repeat(69_999)));
    }

    #[test]
    fn names_that_would_act_on_a_terminal_are_escaped() {
        assert!(matches!(shown("layers.0.weight"), Cow::Borrowed(_)));
        assert_eq!(shown("é→ok"), "é→ok");
        assert_eq!(shown("a\nb"), "a\\nb");
        assert_eq!(shown("\u{1b}[31mred"), "\\u001b[31mred");
        assert_eq!(shown("x\u{202e}y\u{85}"), "x\\u202ey\\u0085");
        assert_eq!(shown("tab\there\r"), "tab\\there\\r");
    }

    #[test]
    fn sizes_have_three_significant_digits() {
        // Derived by hand from the decimal units: 83,135,045 B is 83.135045 MB.
        assert_eq!(size_cell(0), "0 B");
        assert_eq!(size_cell(868), "868 B");
        assert_eq!(size_cell(999), "999 B");
        assert_eq!(size_cell(1000), "1.00 kB");
        assert_eq!(size_cell(2367), "2.37 kB");
        assert_eq!(size_cell(99_949), "99.9 kB");
        assert_eq!(size_cell(999_499), "999 kB");
        assert_eq!(size_cell(999_500), "1.00 MB");
        assert_eq!(size_cell(83_135_045), "83.1 MB");
        assert_eq!(size_cell(u64::MAX), "18.4 EB");
        assert_eq!(count(8_030_261_248), "8.03B");
        assert_eq!(count(124_439_808), "124M");
        assert_eq!(count(434), "434");
    }

    #[test]
    fn attribute_values_are_json_with_acting_characters_escaped() {
        use ztensor_format::{Attributes, Value};
        let map = |entries: Vec<(Value, Value)>| Attributes::try_from(Value::Map(entries)).unwrap();
        let a = map(vec![
            (Value::Text("k".into()), Value::Text("\u{2}\u{85}\u{202e}\t".into())),
            (
                Value::Text("n".into()),
                Value::Map(vec![(Value::Integer(1.into()), Value::Text("\t".into()))]),
            ),
        ]);
        let line = json_line(a.root());
        assert_eq!(line, r#"{"k": "\u0002\u0085\u202e\t", "n": {"$map": [[1, "\t"]]}}"#);
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(back["k"], "\u{2}\u{85}\u{202e}\t");
        let mut out = Vec::new();
        attribute_lines(&mut out, "attributes:", Some(&a), false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "attributes:\n  k: \"\\u0002\\u0085\\u202e\\t\"\n  n: {\"$map\": [[1, \"\\t\"]]}\n"
        );
        // A long value is cut, says how long it is, and the whole is one flag away.
        let long = map(vec![(Value::Text("s".into()), Value::Text("x".repeat(20_402)))]);
        let mut out = Vec::new();
        attribute_lines(&mut out, "attributes:", Some(&long), false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!("  s: \"{}…\" (20402 characters)\n", "x".repeat(120))),
            "{text}"
        );
        assert!(text.ends_with("(--attributes shows every value whole)\n"), "{text}");
        // Nesting that multiplies (maps of arrays of maps) still makes one short line.
        let row = Value::Array(vec![Value::Text("y".repeat(100)); 8]);
        let wide = Value::Map((0..32).map(|i| (Value::Integer(i.into()), row.clone())).collect());
        let deep = map(vec![(Value::Text("d".into()), Value::Array(vec![wide; 8]))]);
        let (line, cut) = summary(deep.root());
        assert!(cut && line.len() < 600, "{}", line.len());
        let mut out = Vec::new();
        attribute_lines(&mut out, "attributes:", Some(&long), true).unwrap();
        assert_eq!(out.len(), "attributes:\n  s: \"\"\n".len() + 20_402);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("65536B"), Ok(65536));
        // Decimal: K, KB, M, MB, … as disks count and as sizes are reported.
        assert_eq!(parse_size("20M"), Ok(20_000_000));
        assert_eq!(parse_size("20MB"), Ok(20_000_000));
        assert_eq!(parse_size("20mb"), Ok(20_000_000));
        assert_eq!(parse_size("512k"), Ok(512_000));
        assert_eq!(parse_size("1KB"), Ok(1000));
        assert_eq!(parse_size("1G"), Ok(1_000_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("2T"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("2TB"), Ok(2_000_000_000_000));
        // Binary: KiB, MiB, GiB, TiB.
        assert_eq!(parse_size("20MiB"), Ok(20 << 20));
        assert_eq!(parse_size("20mib"), Ok(20 << 20));
        assert_eq!(parse_size("4KiB"), Ok(4 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size(" 3 MiB "), Ok(3 << 20));
        for bad in ["12X", "M", "MiB", "1iB", "1Mi", "1KiBB", "-1", "1.5G", ""] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("99999999999TiB").is_err());
        assert_eq!(parse_chunk("4MiB"), Ok(4 << 20));
        assert_eq!(parse_chunk("4KiB"), Ok(4096));
        assert_eq!(parse_chunk("1GiB"), Ok(1 << 30));
        assert_eq!(parse_chunk("1G"), Ok(1_000_000_000));
        for bad in ["0", "8", "1K", "4K", "2G", "1025MiB"] {
            assert!(parse_chunk(bad).is_err(), "{bad}");
        }
    }
}
