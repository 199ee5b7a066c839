//! Break-before-make on a live table: the staged operations that [`crate::space`] drives.
//!
//! Why it is built this way: changing a live valid entry's output address, size, memory type or
//! contiguous hint needs break-before-make — write the entry invalid, invalidate the TLB, then
//! write the new entry — and one operation may have to do that for any number of entries (a
//! memory-type change over a whole range) while the crate has no heap. So the new value is kept
//! *in the broken entry itself*: for an invalid descriptor (bit 0 clear) the walker ignores every
//! other bit (Arm ARM D8.3), so a broken entry is written as "the new descriptor with bit 0 clear
//! and a software mark". One operation therefore runs in three phases:
//!
//! 1. **stage** (before the flush, cannot fail once the split tables are reserved): entries that
//!    need BBM are written as staged-invalid (`MARK_MAKE`), unmapped leaves keep their output
//!    address under `MARK_UNMAP` (so their frames can be handed back *after* the flush), emptied
//!    tables are cut off under `MARK_DETACH` (their frames are freed after the flush), new tables
//!    for block splits are built completely before anything is broken, and permission-only
//!    changes (AP, PXN, UXN) are written in place. Everything changed goes into one
//!    [`PendingFlush`];
//! 2. the caller issues **one** planned flush for the record;
//! 3. **finish** walks the same range again: `MARK_MAKE` entries become valid, `MARK_UNMAP`
//!    leaves are reported and cleared, detached tables are drained, reported and freed.
//!
//! Between 1 and 3 the table holds marks, so no other table operation may run in between (the
//! address space holds `&mut` for the whole sequence). Marks use bits `[58:56]`, which no valid
//! descriptor this crate writes ever has set (a table descriptor's occupancy count may reach up
//! to bit 55, `occupancy.rs`, and a staged table descriptor carries its count). Bit 59 is the
//! guard marker of `guard.rs`, which, unlike the marks, lives between operations.
//!
//! Phase 1 is the modification engine of `engine.rs` in its staged mode (the same walk as
//! `PageTable::unmap`/`protect`); this file holds the marks, the promotion and fold checks, and
//! phase 3.

use super::engine::{Engine, Mode, StagedOp};
use super::flush::{FrameList, PendingFlush};
use super::walk::Entries;
use super::{
    ENTRIES_PER_TABLE, Leaf, MapError, PAGE_RUN, PageTable, ROOT_LEVEL, SPACE_SIZE, Translation, index_of,
    run_entries,
};
use crate::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, Descriptor, level_size};

/// Staged-invalid entry holding the descriptor to write (with bit 0 set) after the flush.
pub(crate) const MARK_MAKE: u64 = 1 << 56;
/// Staged-invalid leaf that was unmapped: reported to the caller after the flush, then cleared.
pub(crate) const MARK_UNMAP: u64 = 1 << 57;
/// Staged-invalid table descriptor of a table emptied by the operation: drained and freed after
/// the flush.
pub(crate) const MARK_DETACH: u64 = 1 << 58;
/// A guard marker (`guard.rs`): a level-3 entry whose bits are exactly this, outside every
/// operation (not a staging mark: it stays between calls, and no staged entry equals it, as each
/// of those carries one of bits `[58:56]`).
pub(crate) const MARK_GUARD: u64 = 1 << 59;
const VALID: u64 = 1;
const RUN: usize = PAGE_RUN;

/// `d` broken (bit 0 clear) and marked.
pub(super) const fn staged(d: Descriptor, mark: u64) -> Descriptor {
    Descriptor::from_bits((d.bits() & !VALID) | mark)
}

/// Whether `d` is a staged entry: broken and carrying one of the marks `finish` commits.
pub(super) const fn is_mark(d: Descriptor) -> bool {
    !d.is_valid() && d.bits() & (MARK_MAKE | MARK_UNMAP | MARK_DETACH) != 0
}

/// Whether an entry holds something after the operation: valid, staged to become valid, or a
/// guard marker (which must keep its table, `guard.rs`).
pub(super) const fn occupied(d: Descriptor) -> bool {
    d.is_valid() || d.bits() & MARK_MAKE != 0 || d.bits() == MARK_GUARD
}

/// Counters of the structural changes a staged operation made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BbmCounts {
    /// Blocks split into a table of smaller leaves.
    pub splits: u64,
    /// Contiguous runs whose hint was cleared.
    pub unfolds: u64,
    /// Level-3 tables replaced by a 2 MiB block.
    pub promotions: u64,
    /// Runs of 16 pages given the contiguous hint.
    pub folds: u64,
}

impl<T: Translation> PageTable<T> {
    /// Phase 1 of a staged `op` over `[va, va + size)` (module documentation): breaks what needs
    /// break-before-make, writes permission-only changes in place, and records every change in
    /// `record`. After the caller has flushed the TLB for `record`, [`finish`](Self::finish)
    /// over the same range completes the operation.
    ///
    /// Errors (`InvalidRange`, `Misaligned`, `OutOfMemory` for split tables) leave the table
    /// unchanged.
    pub(crate) fn stage<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        mut op: StagedOp<F>,
        split_contiguous: bool,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        // A protection change inside one last-level table that exists (the last-table cache):
        // pages split nothing and it vacates nothing, so no table descriptor changes — the
        // reservation's walk and the cache's reset have nothing to do, and the engine runs on
        // that table alone, as the walk from the root would reach it (a copy-on-write reuse,
        // an mprotect of a few pages).
        if matches!(op, StagedOp::Protect(_))
            && let Some(last) = self.fast_path_table(start, end)
        {
            let mut e =
                Engine { op, mode: Mode::Staged, record, pool: FrameList::new(), counts, split_contiguous };
            let vacated = self.apply(last.table, 3, start, end, &mut e);
            debug_assert_eq!(vacated, 0, "a protection change vacated entries");
            return Ok(());
        }
        let needed = self.count_splits(start, end, &mut op);
        let pool = self.reserve(needed)?;
        // Staging may cut off or replace table descriptors (the last-table cache must not keep them).
        self.forget_walk();
        let mut e = Engine { op, mode: Mode::Staged, record, pool, counts, split_contiguous };
        // The root's entries are not counted (nothing points at the root).
        let _ = self.apply(self.root, ROOT_LEVEL, start, end, &mut e);
        debug_assert!(e.pool.is_empty(), "split reservation and staging disagree");
        self.free_reservation(e.pool);
        Ok(())
    }

    /// Stages the promotion of the 2 MiB-aligned range at `va` to one level-2 block, if its
    /// level-3 table holds 512 valid pages mapping one 2 MiB-aligned physical range with the
    /// same attributes. The table's frame goes into `record` (freed on release, after the flush);
    /// the block is written by [`finish`](Self::finish). Returns whether it was staged.
    ///
    /// # Errors
    ///
    /// `Misaligned` if `va` is not 2 MiB aligned, `InvalidRange` if it is outside the table's half.
    pub(crate) fn stage_promote(
        &mut self,
        va: VirtAddr,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> Result<bool, MapError> {
        if !va.is_aligned(BLOCK_2M) {
            return Err(MapError::Misaligned);
        }
        let (off, _) = self.check_range(va, BLOCK_2M)?;
        let Some(l2) = self.table_at(off, 2) else { return Ok(false) };
        let index = index_of(off, 2);
        let d = self.read(l2, index);
        if !d.is_table(2) {
            return Ok(false);
        }
        let l3 = d.output_address();
        self.forget_walk(); // Before anything can detach `l3`.
        let first = self.read(l3, 0);
        if !first.is_leaf(3) || !first.output_address().is_aligned(BLOCK_2M) {
            return Ok(false);
        }
        let (pa0, attrs) = (first.output_address().0, first.attributes());
        // Both ends first: a range still being filled usually fails there.
        let ok = |i: usize| {
            let e = self.read(l3, i);
            e.is_leaf(3) && e.output_address().0 == pa0 + i as u64 * PAGE_SIZE && e.attributes() == attrs
        };
        if !ok(ENTRIES_PER_TABLE - 1) || !(1..ENTRIES_PER_TABLE - 1).all(ok) {
            return Ok(false);
        }
        self.write_mark(l2, index, staged(Descriptor::leaf(2, PhysAddr(pa0), attrs, false), MARK_MAKE));
        record.add_run(off, ENTRIES_PER_TABLE as u64, PAGE_SIZE, attrs, Some(attrs));
        record.detach_table(l3, &self.translation);
        self.stats.tables_detached += 1;
        counts.promotions += 1;
        Ok(true)
    }

    /// Stages setting the contiguous hint on the 16 pages of the 64 KiB-aligned run at offset
    /// `va`, if they are valid, not yet contiguous, map one 64 KiB-aligned physical range and
    /// have the same attributes. Returns whether it was staged.
    pub(crate) fn stage_fold(
        &mut self,
        va: VirtAddr,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> bool {
        let run_size = PAGE_SIZE * RUN as u64;
        if !va.is_aligned(run_size) || !self.range.contains(va) {
            return false;
        }
        let off = va.0 & (SPACE_SIZE - 1);
        let Some(l3) = self.table_at(off, 3) else { return false };
        let first = index_of(off, 3);
        let d0 = self.read(l3, first);
        if !d0.output_address().is_aligned(run_size) {
            return false;
        }
        let (pa0, attrs) = (d0.output_address().0, d0.attributes());
        let ok = (0..RUN).all(|j| {
            let e = self.read(l3, first + j);
            e.is_leaf(3)
                && !e.is_contiguous()
                && e.output_address().0 == pa0 + j as u64 * PAGE_SIZE
                && e.attributes() == attrs
        });
        if !ok {
            return false;
        }
        for j in 0..RUN {
            let e = self.read(l3, first + j);
            self.write_mark(l3, first + j, staged(e.with_contiguous(true), MARK_MAKE));
        }
        record.add_run(off, RUN as u64, PAGE_SIZE, attrs, Some(attrs));
        counts.folds += 1;
        true
    }

    /// The range an explicit demotion of the leaf at `va` stages with [`StagedOp::Demote`]: the
    /// next-level piece holding `va` of a block (so the block is split one level), or the page
    /// of a contiguous run (so the run loses its hint). `None` if there is nothing to demote.
    pub(crate) fn demotion_range(&self, va: VirtAddr) -> Option<(VirtAddr, u64)> {
        let leaf = self.query(va)?;
        if leaf.level < 3 {
            let sub = level_size(leaf.level + 1);
            Some((VirtAddr(va.0 & !(sub - 1)), sub))
        } else if leaf.contiguous {
            Some((leaf.va, PAGE_SIZE))
        } else {
            None
        }
    }

    /// Phase 3 (module documentation) over `[va, va + size)`, the range given to
    /// [`stage`](Self::stage) (or the range of a promotion or fold): commits staged entries,
    /// reports every unmapped leaf to `unmapped` and clears it, drains and frees detached tables.
    /// Call it only after the TLB invalidation for the staged record has completed. Returns
    /// whether any entry became valid (the caller then needs `DSB ISHST`).
    pub(crate) fn finish<S: FnMut(&Leaf)>(&mut self, va: VirtAddr, size: u64, unmapped: &mut S) -> bool {
        let Ok((start, end)) = self.check_range(va, size) else { return false };
        // A change that staged nothing (permissions only, written in place) leaves no mark:
        // nothing to walk.
        if self.marks == 0 {
            debug_assert!(!self.marks_in(self.root, ROOT_LEVEL, start, end), "a mark was not counted");
            return false;
        }
        // Finishing frees detached tables and writes staged table descriptors.
        self.forget_walk();
        let mut made = false;
        let widen = self.runs_cut;
        self.finish_level(self.root, ROOT_LEVEL, start, end, widen, unmapped, &mut made);
        if self.marks == 0 {
            self.runs_cut = false;
        }
        made
    }

    /// Commits the marks in `[lo, hi)` of `table` at `level` (module documentation), widened at
    /// levels 2 and 3 to whole contiguous runs if the stage cut one (`widen`: a cut run is
    /// staged whole, also where it reaches past the range). A detached table is finished over
    /// its whole span, then freed. Returns as soon as no mark is left anywhere (the count of
    /// `write_mark`).
    #[allow(clippy::too_many_arguments)]
    fn finish_level<S: FnMut(&Leaf)>(
        &mut self,
        table: PhysAddr,
        level: u32,
        lo: u64,
        hi: u64,
        widen: bool,
        unmapped: &mut S,
        made: &mut bool,
    ) {
        let (wide_lo, wide_hi) = if widen { widened(level, lo, hi) } else { (lo, hi) };
        if level == 3 {
            self.finish_pages(table, wide_lo, wide_hi, unmapped, made);
            return;
        }
        let mut entries = Entries::new(level, wide_lo, wide_hi);
        while let Some(x) = entries.next() {
            if self.marks == 0 {
                return;
            }
            let d = self.read(table, x.index);
            let bits = d.bits();
            if bits == Descriptor::INVALID.bits() {
                // An empty entry holds no mark and leads nowhere, nor do the empty ones after it
                // (the common case in a wide range).
                entries.skip_to(self.next_occupied(table, level, x.end(), wide_hi));
                continue;
            }
            // The part of the operation's own range in this entry (empty outside it).
            let (sub_lo, sub_hi) = (lo.max(x.base), hi.min(x.end()));
            if d.is_valid() {
                if d.is_table(level) && sub_lo < sub_hi {
                    self.finish_level(d.output_address(), level + 1, sub_lo, sub_hi, widen, unmapped, made);
                }
            } else if bits & (MARK_MAKE | MARK_UNMAP) != 0 {
                let made_d = self.commit_mark(table, x.index, level, x.base, d, unmapped, made);
                if let Some(made_d) = made_d
                    && made_d.is_table(level)
                    && sub_lo < sub_hi
                {
                    // A new split table: it may hold unmapped leaves to report.
                    self.finish_level(
                        made_d.output_address(),
                        level + 1,
                        sub_lo,
                        sub_hi,
                        widen,
                        unmapped,
                        made,
                    );
                }
            } else if bits & MARK_DETACH != 0 {
                self.marks -= 1;
                let child = d.output_address();
                self.finish_level(child, level + 1, x.base, x.end(), widen, unmapped, made);
                debug_assert!(self.is_empty_table(child), "detached table still in use");
                self.write(table, x.index, Descriptor::INVALID);
                self.stats.tables_detached += 1;
                self.translation.deallocate_table(child);
            }
        }
    }

    /// Commits the staged leaf mark of the invalid entry `d` at `index` of `table` (at `level`,
    /// translating from offset `base`): a staged make is written valid and returned (the caller
    /// enters it if it is a new split table), a staged unmap is reported to `unmapped` and
    /// cleared. Any other entry is left as it is. The one place `finish_level` and
    /// `finish_pages` commit a leaf's mark.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn commit_mark<S: FnMut(&Leaf)>(
        &mut self,
        table: PhysAddr,
        index: usize,
        level: u32,
        base: u64,
        d: Descriptor,
        unmapped: &mut S,
        made: &mut bool,
    ) -> Option<Descriptor> {
        let bits = d.bits();
        if bits & MARK_MAKE != 0 {
            self.marks -= 1;
            let made_d = Descriptor::from_bits((bits & !MARK_MAKE) | VALID);
            self.write(table, index, made_d);
            *made = true;
            Some(made_d)
        } else if bits & MARK_UNMAP != 0 {
            self.marks -= 1;
            let leaf = self.leaf(d, level, base);
            unmapped(&leaf);
            self.write(table, index, Descriptor::INVALID);
            None
        } else {
            None
        }
    }

    /// [`finish_level`](Self::finish_level) on the last-level `table` over `[lo, hi)` (already
    /// widened): pages only, no table below, so one straight pass by index (the moves and unmaps
    /// of `mremap` and `munmap` finish every page they staged here).
    #[inline(always)]
    fn finish_pages<S: FnMut(&Leaf)>(
        &mut self,
        table: PhysAddr,
        lo: u64,
        hi: u64,
        unmapped: &mut S,
        made: &mut bool,
    ) {
        // Empty entries passed over through the table's address computed once (`apply_pages`).
        let entries = self.entries(table);
        let (mut index, mut off) = (index_of(lo, 3), lo);
        while off < hi && self.marks != 0 {
            let raw = entries.read(index);
            if raw != Descriptor::INVALID.bits() && raw & VALID == 0 {
                let d = Descriptor::from_bits(raw);
                self.commit_mark(table, index, 3, off, d, unmapped, made);
                debug_assert!(d.bits() & MARK_DETACH == 0, "a detached table at the last level");
            }
            index += 1;
            off += PAGE_SIZE;
        }
    }

    /// Whether a staged entry waits for `finish` (between `stage` and `finish`).
    pub(crate) const fn holds_marks(&self) -> bool {
        self.marks != 0
    }

    /// Whether `[lo, hi)` of `table` at `level` (widened as `finish_level` widens it) holds a
    /// staged entry, in a table reachable from it (debug builds' check of the mark count).
    fn marks_in(&self, table: PhysAddr, level: u32, lo: u64, hi: u64) -> bool {
        let (wide_lo, wide_hi) = widened(level, lo, hi);
        Entries::new(level, wide_lo, wide_hi).any(|x| {
            let d = self.read(table, x.index);
            let (sub_lo, sub_hi) = (lo.max(x.base), hi.min(x.end()));
            is_mark(d)
                || (d.is_table(level)
                    && sub_lo < sub_hi
                    && self.marks_in(d.output_address(), level + 1, sub_lo, sub_hi))
        })
    }

    /// Frees frames of a reservation (for the address space, which reserved them with
    /// [`reserve_frames`](Self::reserve_frames)).
    pub(crate) fn free_frames(&mut self, pool: FrameList) {
        self.free_reservation(pool);
    }

    /// Allocates `count` frames, or none at all.
    pub(crate) fn reserve_frames(&mut self, count: usize) -> Result<FrameList, MapError> {
        self.reserve(count)
    }
}

/// `[lo, hi)` at `level` widened to whole contiguous runs (levels 2 and 3, which have them):
/// what `finish` walks when the stage cut a run, whose entries outside the range it staged too.
#[inline(always)]
fn widened(level: u32, lo: u64, hi: u64) -> (u64, u64) {
    if level < 2 {
        return (lo, hi);
    }
    let run_size = level_size(level) * run_entries(level) as u64;
    (lo & !(run_size - 1), hi.next_multiple_of(run_size))
}
