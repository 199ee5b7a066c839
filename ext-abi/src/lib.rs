//! The user-visible ABI of this kernel's extensions to the Linux arm64 system-call ABI: the
//! `MAP_CODE` flag, the code window, near placement and the memory-management counters. This
//! crate is their one definition: the kernel (through `mm::vm::abi`, a re-export) implements them
//! and user programs (`userland/`) call them, so the two cannot disagree. It has no dependencies
//! and no code, only constants and `#[repr(C)]` structures, so a user program depends on it
//! without building any of the kernel. Everything else is the Linux arm64 ABI.
//!
//! Design rules:
//! - a program that does not use the extensions sees plain Linux behaviour;
//! - a program that does use them still runs on Linux: the `mmap` flag is one Linux ignores for
//!   private mappings (Linux validates unknown flags only under `MAP_SHARED_VALIDATE`), and the
//!   extra system calls have numbers Linux answers with `-ENOSYS`, which is how a program tells
//!   which kernel it runs on and falls back (for near placement: probing with
//!   `MAP_FIXED_NOREPLACE`, as Node.js does).

#![no_std]
#![deny(missing_docs)]

/// `mmap` flag: this mapping is meant for code (a JIT's staging area, like macOS' `MAP_JIT`), so it
/// is placed in the code window even while it is not executable. Bit 25: free in Linux's flag space
/// (below the `MAP_HUGE_*` size field at bits 26..31 and above `MAP_FIXED_NOREPLACE`).
pub const MAP_CODE: u64 = 0x0200_0000;

/// System call: map `len` bytes of anonymous private memory as close as possible to `target`, wholly
/// within `radius` bytes of it, in one gap search (no probing).
///
/// `x0 = target, x1 = len, x2 = radius, x3 = prot, x4 = flags` (`MAP_PRIVATE | MAP_ANONYMOUS`,
/// optionally [`MAP_CODE`]). The result `[addr, addr + len)` satisfies
/// `target - radius <= addr` and `addr + len <= target + radius`, and minimises the distance from
/// `target` to the farthest byte of the mapping, `max(|addr - target|, |addr + len - target|)`
/// (what a branch from `target` must reach). Ties go to the candidate above the target.
/// Returns the address; `-ENOMEM` when no such free range exists; `-EINVAL` for bad arguments
/// (zero or overflowing `len`, `target` not page-aligned, unknown `prot` bits, other flags). It
/// never replaces a mapping. For executable or [`MAP_CODE`] mappings the search is limited to the
/// code window. Linux answers `-ENOSYS`.
pub const SYS_MMAP_NEAR: u64 = 1000;

/// System call: the code window. `x0 = op`, `x1 = arg`, `x2 = pointer to a [`CodeWindowInfo`]`
/// (for [`WINDOW_GET`]; ignored otherwise). Returns 0 or a negative errno. Linux answers `-ENOSYS`.
pub const SYS_CODE_WINDOW: u64 = 1001;

/// System call: this kernel's memory-management counters, `x0 = pointer to a [`MmStats`]`,
/// `x1 = its size in bytes` (the kernel writes at most that many). Linux answers `-ENOSYS`.
pub const SYS_MM_STATS: u64 = 1002;

/// System call (fault injection, as Linux's `/proc/self/task/TID/fail-nth`): `x0 = n` makes the
/// `n`th kernel heap allocation made on behalf of the calling thread from now on fail (`n` = 0
/// disarms); the system call that needed it fails with `-ENOMEM` (`-EAGAIN` where Linux says so).
/// Returns the count that was left: 0 once the armed failure happened. One thread of the machine is
/// armed at a time (arming another disarms it). `-ENOSYS` unless the kernel was booted with
/// `failslab` on its command line; Linux answers `-ENOSYS`.
pub const SYS_FAIL_NTH: u64 = 1003;

/// [`SYS_CODE_WINDOW`] op: fill the [`CodeWindowInfo`] at `x2`.
pub const WINDOW_GET: u64 = 0;
/// [`SYS_CODE_WINDOW`] op: set the window size to `arg` bytes (a power of two from 2 MiB to
/// 4 GiB). `-EBUSY` if a mapping in the current window would fall outside the new one (the
/// program's own text usually sits in the window, so "only while empty" would never allow it),
/// `-EINVAL` for a bad size, `-ENOMEM` if no aligned gap of that size exists.
pub const WINDOW_SET_SIZE: u64 = 1;
/// [`SYS_CODE_WINDOW`] op: strict mode on (`arg = 1`) or off (`arg = 0`). In strict mode a code
/// mapping that does not fit in the window fails with `-ENOMEM` instead of being placed outside.
pub const WINDOW_SET_STRICT: u64 = 2;
/// [`SYS_CODE_WINDOW`] op: W^X opt-out for this process (`arg = 1` allows mappings that are
/// writable and executable at once; the default `arg = 0` refuses them with `-EACCES`).
pub const WINDOW_ALLOW_WX: u64 = 3;

/// What [`WINDOW_GET`] reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeWindowInfo {
    /// First byte of the window (aligned to `size`).
    pub base: u64,
    /// Size in bytes (a power of two).
    pub size: u64,
    /// Bytes of the window currently mapped.
    pub used: u64,
    /// Code that ended up outside the window (default mode; strict mode refuses it): executable
    /// or [`MAP_CODE`] mappings placed outside because the window was full, put outside with
    /// `MAP_FIXED` (a library's text mapped into a reservation that went outside), or made
    /// executable there by `mprotect`.
    pub placed_outside: u64,
    /// 1 in strict mode.
    pub strict: u64,
}

/// What [`SYS_MM_STATS`] reports: the TLB instructions and page faults cumulative since boot
/// for the whole machine; promotions, demotions, folds, unfolds and the frames held for the
/// calling process; the machine's free frames now.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmStats {
    /// Range TLBIs issued (broadcast).
    pub tlbi_range_broadcast: u64,
    /// Single-page TLBIs issued (broadcast).
    pub tlbi_page_broadcast: u64,
    /// Whole-ASID TLBIs issued (broadcast).
    pub tlbi_asid_broadcast: u64,
    /// Whole-TLB TLBIs issued (broadcast).
    pub tlbi_all_broadcast: u64,
    /// Range TLBIs issued (local).
    pub tlbi_range_local: u64,
    /// Single-page TLBIs issued (local).
    pub tlbi_page_local: u64,
    /// Whole-ASID TLBIs issued (local).
    pub tlbi_asid_local: u64,
    /// Whole-TLB TLBIs issued (local).
    pub tlbi_all_local: u64,
    /// 2 MiB promotions (this process).
    pub promotions: u64,
    /// Block demotions (this process).
    pub demotions: u64,
    /// Page faults resolved by demand paging (the whole machine).
    pub page_faults: u64,
    /// 64 KiB runs given the contiguous hint (this process).
    pub folds: u64,
    /// Contiguous runs whose hint was cleared (this process).
    pub unfolds: u64,
    /// Data frames this process holds now.
    pub data_frames: u64,
    /// Page-table frames this process holds now (the root included).
    pub table_frames: u64,
    /// Free frames in the machine now.
    pub free_frames: u64,
}

// The layouts user programs rely on: `u64` fields only, no padding.
const _: () = assert!(core::mem::size_of::<CodeWindowInfo>() == 5 * 8);
const _: () = assert!(core::mem::size_of::<MmStats>() == 16 * 8);

// The README's example, compiled and run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
