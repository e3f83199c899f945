//! The limit of open files, raised to what the system allows.

/// Raises this process's limit of open files (`RLIMIT_NOFILE`) from its soft value to the hard
/// one, returning the limit now in force: a checkpoint of thousands of shards keeps each open
/// while it is read, and the customary soft limit (1024) is far below what the system allows
/// (the hard limit, often a million). A program does this for itself, as build tools and
/// servers do; it changes nothing for other processes. `None` where the platform has no such
/// limit or will not say.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `getrlimit` writes one `rlimit` through a pointer to a live local.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            // SAFETY: `setrlimit` reads one `rlimit` through a pointer to a live local.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit = raised;
            }
        }
        #[allow(clippy::unnecessary_cast)] // `rlim_t` is not `u64` on every platform
        Some(limit.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// Under a capped address space (`ulimit -v`, `prlimit --as`), keeps the allocator to one arena:
/// glibc gives each thread that allocates an arena of its own, reserving 64 MiB of address
/// space for it, so a few threads can take the room the limits of
/// [`machine_limits`](crate::machine_limits) leave to the work, and the allocator aborts
/// instead of a limit refusing. Call it first thing in `main`, before any thread is started;
/// without a cap, or off glibc, it does nothing. Returns whether it changed the allocator.
pub fn fit_allocator_to_address_space() -> bool {
    if crate::address_space_cap().is_none() {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` takes two integers and changes a setting of glibc's allocator,
        // which is safe to change while no other thread is allocating (the caller's contract:
        // first thing in `main`); it returns 1 on success.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(all(test, unix))]
mod tests {
    #[test]
    fn the_soft_limit_rises_to_the_hard_one() {
        let mut before = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as in `raise_open_file_limit`.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) }, 0);
        let now = super::raise_open_file_limit().expect("Linux says");
        #[allow(clippy::unnecessary_cast)]
        let hard = before.rlim_max as u64;
        assert_eq!(now, hard);
    }
}
