//! `MADV_FREE`, reclaimed lazily as Linux does it (`madvise_free_pte_range` in mm/madvise.c,
//! the lazyfree pages of mm/vmscan.c): the pages stay mapped and readable with their contents
//! until the memory is needed; a write before that cancels the free for the page written; under
//! memory pressure the pages still clean are dropped, and a later access reads zero.
//!
//! Why it is built this way: this kernel's pages have no hardware dirty state (no FEAT_HAFDBS
//! management), so "clean" is made by write protection, as Linux does without a hardware dirty
//! bit: the call write-protects the pages of the range in place (a permission change, one flush)
//! and records the range; the first write faults, takes its page off the record and makes it
//! writable again, so every page still recorded has not been written since the call. Reclaim
//! unmaps the recorded ranges (guard markers kept) with one flush each and frees their frames
//! after it. The record is a sorted list of page ranges; without heap to split a range, the
//! whole range leaves the record (its pages simply stay), so a failure only ever keeps data.
//!
//! Pressure is the frame provider running dry: a fault that finds no frame reclaims this
//! memory's lazily freed pages and tries once more. Every other call that changes the tables of
//! a range (`munmap`, `mprotect`, `mremap`, `MADV_DONTNEED`, guard installs, locks) takes the
//! range off the record first: only pages this layer write-protected for `MADV_FREE` are ever
//! dropped. `fork` cancels every free of the parent (its pages become shared, which Linux does
//! not discard either), and the child starts with none.

use alloc::vec::Vec;

use super::fork::write_protected;
use super::{UserFrames, UserMemory};
use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::paging::Translation;
use crate::space::FlushTargets;
use crate::tlb::TlbHardware;
use crate::vm::VmaFlags;

/// Page ranges, sorted and disjoint, adjacent ones merged.
#[derive(Clone, Debug, Default)]
pub struct PageRanges(Vec<(u64, u64)>);

impl PageRanges {
    /// None.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// The ranges, in address order.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// Whether the page at `va` is in a range.
    pub fn contains(&self, va: u64) -> bool {
        let i = self.0.partition_point(|&(_, e)| e <= va);
        self.0.get(i).is_some_and(|&(s, _)| s <= va)
    }

    /// Adds `[start, end)` (merging with what it touches); `false` (nothing changed) without
    /// heap.
    fn add(&mut self, start: u64, end: u64) -> bool {
        if self.0.try_reserve(1).is_err() {
            return false;
        }
        let first = self.0.partition_point(|&(_, e)| e < start);
        let last = self.0.partition_point(|&(s, _)| s <= end);
        let (mut s, mut e) = (start, end);
        if first < last {
            s = s.min(self.0[first].0);
            e = e.max(self.0[last - 1].1);
        }
        self.0.splice(first..last, [(s, e)]);
        true
    }

    /// Takes `[start, end)` off; a range that would have to be cut in two without heap for it
    /// goes whole.
    fn remove(&mut self, start: u64, end: u64) {
        let split_ok = self.0.try_reserve(1).is_ok();
        let mut i = self.0.partition_point(|&(_, e)| e <= start);
        while i < self.0.len() && self.0[i].0 < end {
            let (s, e) = self.0[i];
            match (s < start, end < e) {
                (true, true) if split_ok => {
                    self.0[i] = (s, start);
                    self.0.insert(i + 1, (end, e));
                    return;
                }
                (true, true) => {
                    self.0.remove(i);
                    return;
                }
                (true, false) => {
                    self.0[i] = (s, start);
                    i += 1;
                }
                (false, true) => {
                    self.0[i] = (end, e);
                    return;
                }
                (false, false) => {
                    self.0.remove(i);
                }
            }
        }
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `MADV_FREE` over `[start, end)` of one private area (module documentation): the present
    /// pages are write-protected with one flush and recorded; memory objects' pages are dropped
    /// at once, as before (their frames are the object's).
    pub(super) fn free_lazily(&mut self, start: u64, end: u64) {
        let object = self.vm.find(start).is_some_and(|v| v.flags.contains(VmaFlags::OBJECT));
        if object || start >= end || !self.lazy.add(start, end) {
            // No heap for the record: dropped now, which MADV_FREE allows.
            self.discard_range(start, end);
            return;
        }
        let r = self.space.protect_with(VirtAddr(start), end - start, write_protected);
        if r.is_err() {
            // A split found no table frame: the pages stay as they were, and so not freed.
            self.lazy.remove(start, end);
        }
    }

    /// A write fault at `page`: the page is written, so it is no longer free (the fault then
    /// makes it writable).
    pub(super) fn cancel_free(&mut self, page: u64) {
        if self.lazy.contains(page) {
            self.lazy.remove(page, page + PAGE_SIZE);
        }
    }

    /// `[start, end)`'s tables are about to change for another reason: its pages are no longer
    /// this layer's to drop.
    pub(super) fn forget_free(&mut self, start: u64, end: u64) {
        if !self.lazy.ranges().is_empty() {
            self.lazy.remove(start, end);
        }
    }

    /// Memory pressure: drops every lazily freed page (one flush per recorded range; the frames
    /// go back after it). A fault that finds no frame calls it; so may a kernel that runs out
    /// of frames in another process. Returns whether there was any.
    pub fn reclaim_lazily_freed(&mut self) -> bool {
        let lazy = core::mem::take(&mut self.lazy);
        for &(start, end) in lazy.ranges() {
            self.discard_range(start, end);
        }
        !lazy.ranges().is_empty()
    }

    /// The lazily freed page ranges not yet reclaimed.
    pub fn lazily_freed(&self) -> &[(u64, u64)] {
        self.lazy.ranges()
    }
}
