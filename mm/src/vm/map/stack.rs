//! Mappings that grow down: `MAP_GROWSDOWN` areas and the main thread's stack, as Linux 6.1's
//! `expand_downwards` and `acct_stack_growth` (mm/mmap.c) grow them.
//!
//! A fault at an address no mapping holds, below a mapping flagged [`VmaFlags::GROWSDOWN`] (the
//! lowest mapping above the address), extends that mapping down to the address's page, when:
//! - the page is at or above `mmap_min_addr`;
//! - the mapping below the address, if it is accessible (any of read, write, execute) and does
//!   not grow down itself, ends at least [`STACK_GUARD_GAP`] (Linux's `stack_guard_gap`, 256
//!   pages) below the new start, so a stack never runs into the mapping under it unnoticed;
//! - the grown mapping is no larger than `RLIMIT_STACK` (its soft limit);
//! - the growth fits `RLIMIT_AS` and the heuristic overcommit, as any new mapping must.
//!
//! Anything else is refused, and the fault is `SIGSEGV` with `SEGV_MAPERR` at its address; the
//! mapping stays as it was. The pages grown into are ordinary pages of the mapping (read zero,
//! split by `munmap` like any other). Placement keeps its distance too: an address the kernel
//! chooses for a new mapping leaves the guard gap free below a mapping that grows down
//! (Linux's `vm_start_gap`).
//!
//! Why here: whether a stack may grow is decided from the map of areas and the limits alone,
//! so it is tested on the host, exhaustively over the cases that decide it (`tests.rs`); the
//! kernel's fault path only asks.

use super::{VmMap, is_data};
use crate::vm::limits::Rlimit;
use crate::vm::{PAGE, Vma, VmaFlags};

/// Linux's `stack_guard_gap`: the free room kept below a mapping that grows down, 256 pages
/// (1 MiB with 4 KiB pages).
pub const STACK_GUARD_GAP: u64 = 256 * PAGE;

/// Linux's default `RLIMIT_STACK` soft limit (8 MiB), the limit a new map starts with.
pub const DEFAULT_STACK_LIMIT: u64 = 8 << 20;

/// Why a mapping did not grow down to a fault's address (each is `SIGSEGV`, `SEGV_MAPERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoGrowth {
    /// No mapping that grows down is the next one above the address (or the address is mapped).
    NotBelowAStack,
    /// The page is below `mmap_min_addr`.
    TooLow,
    /// The grown mapping would come within [`STACK_GUARD_GAP`] of the accessible mapping below.
    GuardGap,
    /// The grown mapping would be larger than `RLIMIT_STACK`.
    StackLimit,
    /// `RLIMIT_AS` or the heuristic overcommit refuses the growth.
    Limits,
    /// No kernel memory for the bookkeeping.
    NoMemory,
}

/// The lowest address a mapping placed by the kernel may end at below `v`: `v`'s start, less
/// the guard gap if it grows down (Linux's `vm_start_gap`).
pub(super) fn start_gap(v: &Vma) -> u64 {
    if v.flags.contains(VmaFlags::GROWSDOWN) { v.start.saturating_sub(STACK_GUARD_GAP) } else { v.start }
}

impl VmMap {
    /// Sets `RLIMIT_STACK` (the kernel calls this at `exec` and on every `setrlimit`/`prlimit64`
    /// of it). Lowering it stops growth; it takes nothing that is there.
    pub fn set_stack_limit(&mut self, limit: Rlimit) {
        self.stack_limit = limit;
    }

    /// `RLIMIT_STACK` as this map applies it.
    pub fn stack_limit(&self) -> Rlimit {
        self.stack_limit
    }

    /// A fault at `addr`, which no mapping holds: grows the mapping that grows down above it to
    /// `addr`'s page, as the module documentation says; returns the grown mapping.
    ///
    /// # Errors
    /// Why it did not grow ([`NoGrowth`]); nothing changed then.
    pub fn grow_down(&mut self, addr: u64) -> Result<Vma, NoGrowth> {
        let around = self.tree.around(addr);
        let stack = match (around.at(), around.next()) {
            (None, Some(&next)) if next.flags.contains(VmaFlags::GROWSDOWN) => next,
            _ => return Err(NoGrowth::NotBelowAStack),
        };
        let start = addr & !(PAGE - 1);
        if start < self.layout.mmap_min_addr {
            return Err(NoGrowth::TooLow);
        }
        if let Some(prev) = around.prev()
            && !prev.flags.contains(VmaFlags::GROWSDOWN)
            && prev.prot != crate::vm::Prot::NONE
            && start - prev.end < STACK_GUARD_GAP
        {
            return Err(NoGrowth::GuardGap);
        }
        let grow = stack.start - start;
        if stack.end - start > self.stack_limit.cur {
            return Err(NoGrowth::StackLimit);
        }
        if !self.may_expand(is_data(stack.prot, stack.flags), grow) || !self.enough_memory(grow) {
            return Err(NoGrowth::Limits);
        }
        self.reserve().map_err(|_| NoGrowth::NoMemory)?;
        let grown = Vma { start, ..stack };
        let taken = self.take(stack.start);
        debug_assert!(taken.is_some(), "the stack just found");
        self.add_merge(grown);
        Ok(*self.tree.find(start).unwrap_or(&grown))
    }
}
