//! `ztensor repack`: any version in, any version out, on every core.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use ztensor_format::Version;
use ztensor_io::{CopyOptions, Reader};

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

/// Progress shown on a terminal, one line that fits its width; silent otherwise. It moves with
/// the work done (decoded bytes compressed and placed in the output, or verified), not with the
/// bytes read: it reaches the total when the work does.
pub struct Bar {
    bar: Option<ProgressBar>,
    done: AtomicU64,
}

impl Bar {
    pub fn new(total_bytes: u64, quiet: bool) -> Bar {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total_bytes);
            // `wide_msg` takes what the line has left and is cut to it, so the line never
            // wraps; sizes in the decimal units the summaries use.
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {percent:>3}% {decimal_bytes}/{decimal_total_bytes} \
                 ({decimal_bytes_per_sec}, {eta}) {wide_msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Bar { bar, done: AtomicU64::new(0) }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl ztensor_par::Progress for Bar {
    fn bytes_done(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
    fn object_done(&self, name: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(b) = &self.bar {
            let done = super::text::plural(usize::try_from(done).unwrap_or(usize::MAX), "object");
            b.set_message(format!("{done}, last {}", super::text::shown(name)));
        }
    }
}

/// The decoded bytes a repack will read, for the progress bar.
pub fn total_input<S: ztensor_io::ReadAt>(reader: &Reader<S>) -> u64 {
    reader.manifest().objects().flat_map(|o| o.decoded_lens().map(|(_, n)| n.unwrap_or(0))).sum()
}

pub fn run(
    input: &Path,
    output: &Path,
    version: Version,
    copy: &CopyOptions,
    par: &ztensor_par::ParOptions,
    quiet: bool,
) -> Result<super::convert::Converted, ztensor_io::Error> {
    let options = ztensor_registry::OpenOptions {
        options: ztensor_cli::options(false),
        ..Default::default()
    };
    let reader = ztensor_registry::open_zt(input, &options)?;
    let bar = Bar::new(total_input(&reader), quiet);
    let mut writer = ztensor_io::FileWriter::create(output, version)?;
    let stats = ztensor_par::repack(&reader, writer.writer_mut(), copy, par, &bar);
    bar.finish();
    let stats = stats?;
    let tally = writer.writer().tally();
    writer.finish()?;
    Ok(super::convert::Converted {
        objects: reader.manifest().len(),
        peak: Some(stats.peak_in_flight),
        index: None,
        sharded_2: None,
        tally: Some(tally),
        decoded: None,
        notes: if copy.drop_attributes {
            vec![super::convert::dropped(&reader, output).map_err(|e| {
                ztensor_io::Error::failed(format!("reading {} back: {e}", output.display()))
            })?]
        } else {
            Vec::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
