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

/// `name` as it may go to a terminal: characters that would act there are escaped (`\n`,
/// `\u{1b}`), everything else is left as it is. `--json` output keeps names exact instead.
pub fn shown(name: &str) -> Cow<'_, str> {
    if !name.chars().any(acts) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if acts(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
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

/// `value` as compact JSON-like text for a terminal line: arrays past 8 items and strings past
/// 120 characters are cut short and say how much more there is, nesting past 6 levels is
/// elided, so a report of attributes holding millions of values stays a line long. `--json`
/// output gives every value instead.
pub fn summary(value: ztensor_format::ValueRef<'_>) -> String {
    let mut out = String::new();
    summarize(value, 0, &mut out);
    out
}

fn summarize(value: ztensor_format::ValueRef<'_>, depth: usize, out: &mut String) {
    use std::fmt::Write as _;
    use ztensor_format::attributes::Item;
    const ITEMS: usize = 8;
    const CHARS: usize = 120;
    if depth > 6 {
        out.push('…');
        return;
    }
    match value.item() {
        Item::Array(items) => {
            out.push('[');
            let len = items.len();
            for (i, item) in items.take(ITEMS).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                summarize(item, depth + 1, out);
            }
            if len > ITEMS {
                let _ = write!(out, ", … {} more", len - ITEMS);
            }
            out.push(']');
        }
        Item::Map(entries) => {
            out.push('{');
            let len = entries.len();
            for (i, (k, v)) in entries.take(ITEMS * 4).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                summarize(k, depth + 1, out);
                out.push_str(": ");
                summarize(v, depth + 1, out);
            }
            if len > ITEMS * 4 {
                let _ = write!(out, ", … {} more", len - ITEMS * 4);
            }
            out.push('}');
        }
        Item::Text(s) if s.chars().count() > CHARS => {
            let cut: String = s.chars().take(CHARS).collect();
            let _ = write!(out, "{}…", serde_json::Value::from(cut));
            let _ = write!(out, " ({} characters)", s.chars().count());
        }
        Item::Bytes(b) if b.len() > CHARS / 2 => {
            let _ = write!(out, "<{} bytes>", b.len());
        }
        _ => {
            let _ = write!(out, "{}", ztensor_dump::cbor_to_json(&value.to_value()));
        }
    }
}

/// `n thing` or `n things`.
pub fn plural(n: usize, thing: &str) -> String {
    if n == 1 { format!("1 {thing}") } else { format!("{n} {thing}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(shown("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(shown("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(shown("tab\there\r"), "tab\\there\\r");
    }
}
