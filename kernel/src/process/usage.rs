//! Resource usage as `getrusage`, `wait4` and `waitid` report it (Linux's `struct rusage`, 144
//! bytes on arm64): CPU time and minor page faults, of a thread, of a process (its threads
//! together), and of a process's reaped children (each with its own reaped children, Linux's
//! `cutime` and `cmin_flt`). The counters live with what they count (`posix::Posix`,
//! `posix::ThreadPosix`, `family::Family`); this module only reads and lays them out.
//!
//! Faults counted are the user faults memory resolved (demand paging, copy on write), as
//! Linux's `min_flt`; those the kernel takes on user memory inside a system call are not (Linux
//! counts them too). No fault is major here (no swap, no disk). The rest of the record (system
//! time apart from user time, `maxrss`, context switches) is zero: the CPU time is all in
//! `ru_utime`.
use core::sync::atomic::Ordering;

use linux_abi::time::{NSEC_PER_SEC, ticks_to_ns};

use super::{Process, Thread};

/// What a `struct rusage` says.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Usage {
    /// CPU time in counter ticks.
    pub cpu_ticks: u64,
    /// Minor page faults.
    pub min_flt: u64,
}

impl Usage {
    /// `process`'s threads together (`RUSAGE_SELF`), slices already ended.
    pub fn of_process(process: &Process) -> Usage {
        Usage {
            cpu_ticks: process.posix.cpu_ticks.load(Ordering::Relaxed),
            min_flt: process.posix.min_flt.load(Ordering::Relaxed),
        }
    }

    /// `thread` alone (`RUSAGE_THREAD`), slices already ended.
    pub fn of_thread(thread: &Thread) -> Usage {
        Usage { cpu_ticks: thread.posix.cpu_ticks, min_flt: thread.posix.min_flt }
    }

    /// `process`'s reaped children (`RUSAGE_CHILDREN`).
    pub fn of_children(process: &Process) -> Usage {
        Usage {
            cpu_ticks: process.family.children_ticks.load(Ordering::Relaxed),
            min_flt: process.family.children_min_flt.load(Ordering::Relaxed),
        }
    }

    /// The sum of two records.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            cpu_ticks: self.cpu_ticks.saturating_add(other.cpu_ticks),
            min_flt: self.min_flt.saturating_add(other.min_flt),
        }
    }

    /// The 144 bytes of `struct rusage`: `ru_utime` at 0, `ru_minflt` at 64.
    pub fn to_bytes(self) -> [u8; 144] {
        let ns = ticks_to_ns(self.cpu_ticks, crate::arch::time::frequency());
        let mut b = [0u8; 144];
        b[..8].copy_from_slice(&(ns / NSEC_PER_SEC).to_le_bytes());
        b[8..16].copy_from_slice(&(ns % NSEC_PER_SEC / 1000).to_le_bytes());
        b[64..72].copy_from_slice(&self.min_flt.to_le_bytes());
        b
    }
}
