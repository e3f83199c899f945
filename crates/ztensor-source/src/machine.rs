//! What the machine can hold, for limits that fit it.

use ztensor_format::{Limits, Options};

/// The machine's physical memory in bytes, where the platform says (Linux: `MemTotal` of
/// `/proc/meminfo`).
pub fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The most memory this process has held resident so far, in bytes, where the platform says
/// (Linux: `VmHWM` of `/proc/self/status`, what `time -v` reports as its maximum resident set):
/// what a command's summary gives as its peak memory, measured rather than estimated.
pub fn peak_resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The address space this process may use, when capped (`ulimit -v`, `prlimit --as`; Linux:
/// "Max address space" in `/proc/self/limits`).
pub fn address_space_cap() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// What one object of a manifest can cost a command, at most, in the tool's measurements: the
/// reader's and the writer's models, the name index, the output manifest, rounded up. Measured
/// on 500,000 empty objects (a 38 MB 1.2 file), peak resident memory less the process's own:
/// 330 to 580 bytes an object for `convert` to 1.2, 0.1, 2 (raw, zstd, sharded), safetensors
/// and TensorBuffers, sharded 1.x, `repack`, `verify`, `dump` and `id`; `diff` costs as much
/// for each input.
pub const OBJECT_COST: u64 = 1 << 10;

/// The options every front end reads inputs with (the command-line tool, the Python package,
/// the conformance dump, the format registry's default): [`Options::default`] with
/// [`machine_limits`], lenient unless `strict`.
pub fn machine_options(strict: bool) -> Options {
    let mut options = Options::default();
    options.limits = machine_limits();
    options.strict = strict;
    options
}

/// [`Limits::default`], lowered to fit the machine (its physical memory, or the process's
/// address-space cap, where that is less): the limit of whole decodes to half of it, the manifest's
/// decoded values to what a third of it holds, and the objects to what half of it holds at
/// [`OBJECT_COST`] each. A component read whole is held in memory, and a copy or conversion may
/// hold its input beside it, so a larger claim could only end in the allocator aborting;
/// streamed reads hold pieces, and keep the format's decode limit.
///
/// Measured once a process (the first call reads `/proc`), so opening many files costs no
/// system calls for it.
pub fn machine_limits() -> Limits {
    static MEASURED: std::sync::OnceLock<Limits> = std::sync::OnceLock::new();
    MEASURED.get_or_init(measure_limits).clone()
}

fn measure_limits() -> Limits {
    let mut limits = Limits::default();
    for room in [physical_memory(), address_space_cap()].into_iter().flatten() {
        limits.max_whole_len = limits.max_whole_len.min((room / 2).max(64 << 20));
        // A third of the room for the manifest's decoded values, at the size of a value: the
        // items of a manifest the objects admitted below make (17 an empty dense object) fit
        // it. Decoded the general way (as a tree: indefinite lengths, tags), a manifest at
        // this limit under a 1 GiB cap (655,000 objects, 11.1 million values) peaked at 781
        // MB and was refused for its objects, not aborted.
        let value = std::mem::size_of::<ztensor_format::Value>() as u64;
        limits.max_manifest_values =
            limits.max_manifest_values.min((room / 3 / value).max(1 << 20));
        let objects = usize::try_from(room / 2 / OBJECT_COST).unwrap_or(usize::MAX);
        limits.max_objects = limits.max_objects.min(objects.max(1 << 16));
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decode_limit_fits_the_machine() {
        let limits = machine_limits();
        assert!(limits.max_whole_len <= Limits::default().max_whole_len);
        assert_eq!(limits.max_decoded_len, Limits::default().max_decoded_len);
        if let Some(memory) = physical_memory() {
            assert!(memory > 0);
            assert!(limits.max_whole_len <= (memory / 2).max(64 << 20));
        }
        assert_eq!(limits.max_manifest_len, Limits::default().max_manifest_len);
        assert!(limits.max_manifest_values <= Limits::default().max_manifest_values);
        assert!(limits.max_objects <= Limits::default().max_objects);
        if let Some(memory) = physical_memory() {
            let fits = usize::try_from(memory / 2 / OBJECT_COST).unwrap_or(usize::MAX);
            assert!(limits.max_objects <= fits.max(1 << 16));
        }
    }
}
