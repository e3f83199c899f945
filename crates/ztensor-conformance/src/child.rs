//! What the operating system offers to keep implementations under test from outliving the
//! process that started them, on Linux: each child is killed when its parent dies
//! (`PR_SET_PDEATHSIG`), and a fuzzer that makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) inherits what escapes a process group (`setsid`), so that it can
//! kill it. Elsewhere these do nothing but kill process groups.
//!
//! This is the crate's only `unsafe`: calls into the C library that have no safe wrapper in
//! the standard library, each with what makes it sound.

#![allow(unsafe_code)]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether this process is a child subreaper ([`become_subreaper`]): then [`kill_strays`]
/// kills what it inherited.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper: a descendant orphaned by its parent (a process that
/// left its group with `setsid` and whose parent exited) becomes its child, for
/// `kill_strays` to kill. For a program that runs implementations and nothing else it must
/// keep (the fuzzer): every child that is not one of its registered implementations is then
/// killed. Returns whether it is one.
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes integer arguments only and changes
        // nothing but this process's reaper flag.
        let done = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } == 0;
        SUBREAPER.store(done, Ordering::SeqCst);
        done
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Has the child that `command` starts killed when this thread's process dies, even by
/// SIGKILL (on Linux; the signal is sent when the thread that started it ends, so a child is
/// started from a thread that outlives it).
pub(crate) fn die_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
        // SAFETY: the closure runs in the child between fork and exec, and calls only
        // async-signal-safe functions (prctl, getppid) on integers; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before the request was made.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("the parent ended"));
                }
                Ok(())
            });
        }
    }
}

/// Sends SIGKILL to the process group `pgid`.
pub(crate) fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid)
        && pgid > 0
    {
        // SAFETY: kill() takes integers; a negative pid names a group (never -1: pgid > 0).
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// The children of this process, from `/proc` (the processes whose parent it is).
#[cfg(target_os = "linux")]
fn children() -> Vec<libc::pid_t> {
    let me = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid …`: the command may hold anything, so fields are counted
            // after its closing parenthesis.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
                    == Some(me)
            })
        })
        .collect()
}

/// Kills and reaps every child of this process whose pid is not in `keep`, and what it
/// started, until none is left (each round's orphans are the next round's children): for a
/// subreaper ([`become_subreaper`]), what escaped the process groups it killed. Does nothing
/// when this process is not one.
pub(crate) fn kill_strays(keep: &[u32]) {
    #[cfg(target_os = "linux")]
    {
        if !SUBREAPER.load(Ordering::SeqCst) {
            return;
        }
        for _ in 0..16 {
            let strays: Vec<libc::pid_t> = children()
                .into_iter()
                .filter(|pid| u32::try_from(*pid).is_ok_and(|p| !keep.contains(&p)))
                .collect();
            if strays.is_empty() {
                return;
            }
            for &pid in &strays {
                // SAFETY: kill() takes integers; pid > 0 is one process, -pid its group if
                // it leads one.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            let deadline = Instant::now() + Duration::from_secs(1);
            for &pid in &strays {
                loop {
                    let mut status = 0;
                    // SAFETY: waitpid() writes the status into a local integer; the pid is a
                    // child that no `Child` handle owns (not in `keep`).
                    let reaped = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
                    if reaped != 0 || Instant::now() > deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = keep;
}
