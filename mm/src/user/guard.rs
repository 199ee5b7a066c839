//! Guard regions: `MADV_GUARD_INSTALL` / `MADV_GUARD_REMOVE`, as Linux 6.13 (`madvise_guard_*`
//! in mm/madvise.c): pages of a mapping that fault with `SIGSEGV` on any access, without
//! splitting the mapping — what a thread library wants for stack guards and a JIT between code
//! chunks, at the cost of no area record each.
//!
//! Linux keeps a guard as a PTE marker (a non-present entry with a software bit). Here the
//! guarded pages are a sorted list of page ranges beside the area map (as the object-backed
//! ranges are, `super::object`), and their entries are simply not present: installing zaps the
//! pages (their data is gone, as on Linux) with one flush, and a fault there is
//! [`Fault::Guard`] before demand paging could fill it. The semantics follow Linux's
//! (tools/testing/selftests/mm/guard-regions.c):
//! - install zaps and guards every page of the mapped parts of the range; `EINVAL` for a locked
//!   area or one that is not anonymous (a memfd), `ENOMEM` for a hole after the parts before it;
//! - remove takes only the guards (the pages then read zero);
//! - `MADV_DONTNEED` and `MADV_FREE` leave the guards in place, `munmap` and `MAP_FIXED` take
//!   them with the range, `mremap` moves them, `fork` gives them to the child;
//! - populating a guard page (`MADV_POPULATE_*`, `mlock`) fails with `EFAULT`/`ENOMEM` as the
//!   fault does; `mincore` reports it not resident.

use alloc::vec::Vec;

use super::{Fault, UserFrames, UserMemory};
use crate::addr::PAGE_SIZE;
use crate::paging::Translation;
use crate::space::FlushTargets;
use crate::tlb::TlbHardware;
use crate::vm::{Errno, VmaFlags};

/// `MADV_GUARD_INSTALL` (Linux 6.13).
pub const MADV_GUARD_INSTALL: u64 = 102;
/// `MADV_GUARD_REMOVE` (Linux 6.13).
pub const MADV_GUARD_REMOVE: u64 = 103;

/// Guarded page ranges, sorted and disjoint, adjacent ones merged.
#[derive(Clone, Debug, Default)]
pub struct Guards(Vec<(u64, u64)>);

impl Guards {
    /// None.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Whether the page at `va` is guarded.
    pub fn contains(&self, va: u64) -> bool {
        let i = self.0.partition_point(|&(_, e)| e <= va);
        self.0.get(i).is_some_and(|&(s, _)| s <= va)
    }

    /// The ranges, in address order.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// A copy for a forked child.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room.
    pub fn try_clone(&self) -> Result<Self, Errno> {
        let mut v = Vec::new();
        v.try_reserve(self.0.len()).map_err(|_| Errno::ENOMEM)?;
        v.extend_from_slice(&self.0);
        Ok(Self(v))
    }

    /// Guards `[start, end)` (merging with what it touches).
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room; nothing changed then.
    pub fn add(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        self.0.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        let first = self.0.partition_point(|&(_, e)| e < start);
        let last = self.0.partition_point(|&(s, _)| s <= end);
        let (mut s, mut e) = (start, end);
        if first < last {
            s = s.min(self.0[first].0);
            e = e.max(self.0[last - 1].1);
        }
        self.0.splice(first..last, [(s, e)]);
        Ok(())
    }

    /// Unguards `[start, end)`; `false` (and nothing changed) when cutting a range in two found
    /// no heap.
    pub fn remove(&mut self, start: u64, end: u64) -> bool {
        if start >= end || self.0.try_reserve(1).is_err() {
            return start >= end;
        }
        let mut i = self.0.partition_point(|&(_, e)| e <= start);
        while i < self.0.len() && self.0[i].0 < end {
            let (s, e) = self.0[i];
            match (s < start, end < e) {
                (true, true) => {
                    self.0[i] = (s, start);
                    self.0.insert(i + 1, (end, e));
                    return true;
                }
                (true, false) => {
                    self.0[i] = (s, start);
                    i += 1;
                }
                (false, true) => {
                    self.0[i] = (end, e);
                    return true;
                }
                (false, false) => {
                    self.0.remove(i);
                }
            }
        }
        true
    }

    /// Moves the guards of `[from, from + len)` to `to` (an `mremap` move); with `keep` the
    /// source keeps them too (`MREMAP_DONTUNMAP`).
    pub fn relocate(&mut self, from: u64, len: u64, to: u64, keep: bool) {
        let end = from + len;
        let mut moved = Vec::new();
        for &(s, e) in self.0.iter().filter(|&&(s, e)| s < end && e > from) {
            if moved.try_reserve(1).is_err() {
                return;
            }
            moved.push((s.max(from) - from + to, e.min(end) - from + to));
        }
        if !keep {
            self.remove(from, end);
        }
        for (s, e) in moved {
            let _ = self.add(s, e);
        }
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `madvise(addr, len, MADV_GUARD_INSTALL | MADV_GUARD_REMOVE)` (module documentation).
    ///
    /// # Errors
    ///
    /// `EINVAL` unaligned or wrapping, or (install) a locked or object area; `ENOMEM` a hole,
    /// after the parts before it, or no heap for the list.
    pub(super) fn madvise_guard(&mut self, addr: u64, len: u64, install: bool) -> Result<(), Errno> {
        if addr & (PAGE_SIZE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = len.checked_add(PAGE_SIZE - 1).ok_or(Errno::EINVAL)? & !(PAGE_SIZE - 1);
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        let mut cursor = addr;
        while cursor < end {
            let Some(v) = self.vm.mappings_in(cursor, end).next() else { return Err(Errno::ENOMEM) };
            if v.start > cursor {
                return Err(Errno::ENOMEM);
            }
            let (s, e) = (cursor, v.end.min(end));
            if install {
                if v.flags.contains(VmaFlags::LOCKED) || v.flags.contains(VmaFlags::OBJECT) {
                    return Err(Errno::EINVAL);
                }
                self.guards.add(s, e)?;
                self.unmap_range(s, e);
            } else if !self.guards.remove(s, e) {
                return Err(Errno::ENOMEM);
            }
            cursor = e;
        }
        Ok(())
    }

    /// Whether a fault at `page` hits a guard.
    pub(super) fn guarded(&self, page: u64) -> Result<(), Fault> {
        if self.guards.contains(page) { Err(Fault::Guard) } else { Ok(()) }
    }

    /// The guarded page ranges.
    pub fn guards(&self) -> &Guards {
        &self.guards
    }
}
