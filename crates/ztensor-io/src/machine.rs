//! What the machine can hold, for limits that fit it.

use ztensor_format::Limits;

/// The machine's physical memory in bytes, where the platform says (Linux: `MemTotal` of
/// `/proc/meminfo`).
pub fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
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

/// [`Limits::default`], with the decode limit lowered to half the machine's physical memory,
/// or half the process's address-space cap, where that is less, and the manifest's values to
/// what a quarter of it holds: a component is decoded into
/// memory whole, and a copy or conversion may hold its input beside it, so a larger claim could
/// only end in the allocator aborting.
pub fn machine_limits() -> Limits {
    let mut limits = Limits::default();
    for room in [physical_memory(), address_space_cap()].into_iter().flatten() {
        limits.max_decoded_len = limits.max_decoded_len.min((room / 2).max(64 << 20));
        // A quarter of the room for the manifest's decoded values.
        let value = std::mem::size_of::<ztensor_format::Value>() as u64;
        limits.max_manifest_values =
            limits.max_manifest_values.min((room / 4 / value).max(1 << 20));
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decode_limit_fits_the_machine() {
        let limits = machine_limits();
        assert!(limits.max_decoded_len <= Limits::default().max_decoded_len);
        if let Some(memory) = physical_memory() {
            assert!(memory > 0);
            assert!(limits.max_decoded_len <= (memory / 2).max(64 << 20));
        }
        assert_eq!(limits.max_manifest_len, Limits::default().max_manifest_len);
        assert!(limits.max_manifest_values <= Limits::default().max_manifest_values);
    }
}
