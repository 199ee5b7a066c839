//! `brk`: the heap, one anonymous read-write area from [`VmMap::start_brk`] to the break, grown
//! and shrunk as Linux's `do_brk_flags` and `do_vmi_munmap` do.

use super::{Pieces, VmMap, page_up};
use crate::vm::{Advice, AnonName, PAGE, Prot, Vma, VmaFlags};

/// What `brk` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrkOutcome {
    /// The value to return: the new break on success, the old one on failure (Linux never
    /// returns an error from `brk`).
    pub brk: u64,
    /// A range newly mapped (anonymous RW) when the heap grew.
    pub mapped: Option<(u64, u64)>,
    /// Pieces unmapped when the heap shrank: the kernel unmaps their pages.
    pub unmapped: Pieces,
}

impl VmMap {
    /// Moves an empty heap's start up by `offset` bytes (whole pages; Linux's
    /// `arch_randomize_brk`, `crate::vm::aslr::brk_offset`). Call after
    /// [`VmMap::init_code_window`], which first moves a heap starting inside the window to its
    /// end, so the heap never starts in the window. Returns whether it moved: not when the heap
    /// is not empty, `offset` is not page-aligned, or the new start would pass the task size.
    pub fn randomise_brk(&mut self, offset: u64) -> bool {
        let start = self.layout.start_brk;
        let Some(moved) = start.checked_add(offset) else { return false };
        if self.brk != start || !offset.is_multiple_of(PAGE) || moved >= self.layout.task_size {
            return false;
        }
        self.layout.start_brk = moved;
        self.brk = moved;
        true
    }

    /// `brk(addr)`, as Linux: below the heap's start (e.g. `brk(0)`) returns the current break;
    /// a heap larger than `RLIMIT_DATA` is refused (`check_data_rlimit`, counting the heap
    /// only); shrinking succeeds; growing succeeds when `[old, new)` rounded to pages is free
    /// and one page stays free before the next mapping, within `RLIMIT_AS`/`RLIMIT_DATA`,
    /// `vm.max_map_count` and the heuristic overcommit (`do_brk_flags`); otherwise, or without
    /// kernel memory for the bookkeeping, the old break is returned.
    pub fn brk(&mut self, addr: u64) -> BrkOutcome {
        let old = self.brk;
        let fail = BrkOutcome { brk: old, mapped: None, unmapped: Pieces::new() };
        if addr < self.layout.start_brk || addr - self.layout.start_brk > self.data_limit.cur {
            return fail;
        }
        let (Some(newbrk), Some(oldbrk)) = (page_up(addr), page_up(old)) else { return fail };
        if newbrk == oldbrk {
            self.brk = addr;
            return BrkOutcome { brk: addr, ..fail };
        }
        if addr <= old {
            // Linux shrinks through `do_vmi_munmap`, which refuses a split at the map count.
            if self.punch_exceeds_count(newbrk, oldbrk) || self.refuse_sealed(newbrk, oldbrk).is_err() {
                return fail;
            }
            let Ok(unmapped) = self.reserve().and_then(|()| self.remove_range(newbrk, oldbrk)) else {
                return fail;
            };
            self.brk = addr;
            return BrkOutcome { brk: addr, mapped: None, unmapped };
        }
        if newbrk > self.layout.task_size {
            return fail;
        }
        if let Some(next) = self.tree.first_ending_after(oldbrk)
            && newbrk.saturating_add(PAGE) > next.start
        {
            return fail;
        }
        let len = newbrk - oldbrk;
        if !self.may_expand(true, len)
            || self.tree.len() > self.layout.max_map_count
            || !self.enough_memory(len)
            || self.reserve().is_err()
        {
            return fail;
        }
        let heap = Vma {
            start: oldbrk,
            end: newbrk,
            prot: Prot::RW,
            flags: VmaFlags::HEAP,
            advice: Advice::Normal,
            name: AnonName::NONE,
        };
        self.add_merge(heap);
        self.brk = addr;
        BrkOutcome { brk: addr, mapped: Some((oldbrk, newbrk)), unmapped: Pieces::new() }
    }
}
