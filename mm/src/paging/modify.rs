//! The direct `unmap` and `protect` of [`PageTable`], and the checks every modification makes
//! before its first write.
//!
//! Why it is built this way: a direct operation is the engine of `engine.rs` in its direct
//! mode, preceded by the only checks that can fail — on a live table, that nothing needs
//! break-before-make ([`bbm_violation`](PageTable::bbm_violation)), and that the frames for
//! block splits can be reserved ([`count_splits`](PageTable::count_splits), shared with the
//! staged path). A call inside one 2 MiB region whose last-level table exists (the last-table cache)
//! needs no frame: it runs the engine on that table alone (the fast path), with a straight-line
//! case for the most common call of all, unmapping one page, whose record is built as a value
//! (a caller that keeps it in registers stores none of it).

use crate::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, Descriptor, DescriptorKind, level_size};

use super::bbm::BbmCounts;
use super::engine::{Engine, Mode, StagedOp};
use super::flush::{FrameList, LeafBits, PendingFlush};
use super::occupancy::{minus_occupants, occupancy};
use super::walk::{Entries, LastLevel};
use super::{MapError, PageTable, ROOT_LEVEL, Translation, index_of, run_entries};

impl<T: Translation> PageTable<T> {
    /// Unmaps `[va, va + size)`. Unmapped holes are skipped. A block partly inside the range is
    /// split first (not on a live table); a contiguous run partly inside the range loses its
    /// hint (not on a live table). Tables left empty are detached and handed back in the record.
    ///
    /// The returned record must be turned into a TLB invalidation by the caller; after it has
    /// completed, [`PendingFlush::release`] frees the detached table frames. On a table that was
    /// never live the record may be released at once.
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`], [`MapError::Misaligned`]: as for [`map`](Self::map);
    /// - [`MapError::BreakBeforeMakeRequired`]: the table is live and the range cuts a block or a
    ///   contiguous run;
    /// - [`MapError::OutOfMemory`]: a table for splitting a block could not be allocated.
    ///
    /// On error nothing has changed.
    #[inline]
    pub fn unmap(&mut self, va: VirtAddr, size: u64) -> Result<PendingFlush, MapError> {
        self.modify(va, size, StagedOp::<fn(Attributes) -> Attributes>::Unmap)
    }

    /// Sets the attributes of every leaf in `[va, va + size)` to `attrs` (holes are skipped).
    /// Equivalent to [`protect_with`](Self::protect_with)`(va, size, |_| attrs)`.
    ///
    /// # Errors
    ///
    /// As for [`protect_with`](Self::protect_with).
    pub fn protect(&mut self, va: VirtAddr, size: u64, attrs: Attributes) -> Result<PendingFlush, MapError> {
        self.protect_with(va, size, |_| attrs)
    }

    /// Replaces the attributes `a` of every leaf in `[va, va + size)` with `change(a)`; holes are
    /// skipped. `change` is called more than once per leaf and must be a pure function (for
    /// `mprotect`: `|a| a.with_permissions_of(new)`). A block or contiguous run partly inside the
    /// range is split or loses its hint first, if the change touches it (not on a live table).
    ///
    /// On a live table only the BBM-free bits (AP, PXN, UXN) may change. The record describes
    /// the leaves changed; it never detaches tables.
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`], [`MapError::Misaligned`]: as for [`map`](Self::map);
    /// - [`MapError::BreakBeforeMakeRequired`]: the table is live and a change needs
    ///   break-before-make (memory type, shareability, nG), or cuts a block or a contiguous run;
    /// - [`MapError::OutOfMemory`]: a table for splitting a block could not be allocated.
    ///
    /// On error nothing has changed.
    #[inline]
    pub fn protect_with<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        change: F,
    ) -> Result<PendingFlush, MapError> {
        self.modify(va, size, StagedOp::Protect(change))
    }

    #[inline]
    fn modify<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        op: StagedOp<F>,
    ) -> Result<PendingFlush, MapError> {
        let (start, end) = self.check_range(va, size)?;
        let fast = self.fast_path_table(start, end);
        if let Some(last) = fast
            && op.is_unmap()
            && end - start == PAGE_SIZE
            && let Some(record) = self.unmap_page(last, start, end, op.clears_guards())
        {
            return Ok(record);
        }
        // Built in place in the result, which both paths fill: the record is returned without a
        // copy (a copy is seven stores more per call, and stores are what a call waiting for a
        // cache miss runs out of first).
        let mut result = Ok(PendingFlush::new(self.range));
        if let Ok(record) = &mut result {
            let done = match fast {
                Some(last) => self.modify_last_level(last, start, end, op, record),
                None => self.modify_checked(start, end, op, record),
            };
            if let Err(e) = done {
                result = Err(e);
            }
        }
        result
    }

    /// Unmapping the one page `[start, end)` of the last-level table `last` (the most common
    /// call of all), straight-line, with its record built once as a value: `None`, having
    /// changed nothing, if the page is part of a contiguous run (the engine then unfolds the
    /// run). A page outside a run cuts nothing, so nothing needs break-before-make.
    #[inline(always)]
    fn unmap_page(
        &mut self,
        last: LastLevel,
        start: u64,
        end: u64,
        clear_guard: bool,
    ) -> Option<PendingFlush> {
        let index = index_of(start, 3);
        let d = self.read(last.table, index);
        if d.is_contiguous() {
            return None;
        }
        let mut record = PendingFlush::new(self.range);
        if d.is_leaf(3) {
            record.add_pages(start, end, 1, LeafBits::removed(d.bits()));
        } else if clear_guard && super::guard::is_guard(d) {
            record.cover(start, end);
        } else if !d.is_valid() {
            return Some(record);
        }
        // The page, a reserved encoding (cleared without a record, see `apply_pages`) or a guard
        // marker the call clears.
        self.write(last.table, index, Descriptor::INVALID);
        if self.vacate(last, start, 1) {
            // Rare: a copy to detach into keeps `record` out of memory on the common path.
            let mut detached = record;
            self.detach_emptied(start, &mut detached);
            return Some(detached);
        }
        Some(record)
    }

    /// The fast path of `unmap` and `protect`, recording into `record`: `[start, end)` lies in
    /// one 2 MiB region whose last-level table is `last.table`, so nothing needs a frame and only
    /// a break-before-make refusal can fail. Makes the changes as the general walk does at level
    /// 3, then detaches the table (and the tables above it) if an unmap emptied it.
    #[inline(always)]
    fn modify_last_level<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        last: LastLevel,
        start: u64,
        end: u64,
        mut op: StagedOp<F>,
        record: &mut PendingFlush,
    ) -> Result<(), MapError> {
        let table = last.table;
        if self.live
            && let Some(at) = self.bbm_violation(table, 3, start, end, &mut op)
        {
            return Err(MapError::BreakBeforeMakeRequired(self.va(at)));
        }
        let mut counts = BbmCounts::default();
        let (pool, split_contiguous) = (FrameList::new(), false);
        let mut e = Engine { op, mode: Mode::Direct, record, pool, counts: &mut counts, split_contiguous };
        let vacated = self.apply(table, 3, start, end, &mut e);
        if vacated > 0 && self.vacate(last, start, vacated) {
            self.detach_emptied(start, record);
        }
        Ok(())
    }

    /// Takes `vacated` entries off the occupancy count of the last-level table `last` (held in
    /// the level-2 entry above it), unless that empties the table: then returns `true` and
    /// leaves the count, for [`detach_emptied`](Self::detach_emptied).
    #[inline(always)]
    fn vacate(&mut self, last: LastLevel, off: u64, vacated: usize) -> bool {
        let parent_index = index_of(off, 2);
        let d = self.read(last.parent, parent_index);
        if occupancy(d) == vacated {
            return true;
        }
        self.write(last.parent, parent_index, minus_occupants(d, vacated));
        false
    }

    /// The general `unmap`/`protect` of a checked range, recording into the empty `record`:
    /// check, reserve, then the engine.
    #[inline(never)]
    fn modify_checked<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        start: u64,
        end: u64,
        mut op: StagedOp<F>,
        record: &mut PendingFlush,
    ) -> Result<(), MapError> {
        if self.live
            && let Some(at) = self.bbm_violation(self.root, ROOT_LEVEL, start, end, &mut op)
        {
            return Err(MapError::BreakBeforeMakeRequired(self.va(at)));
        }
        // On a live table nothing is split: a cut block was refused above.
        let needed = self.count_splits(start, end, &mut op);
        let pool = self.reserve(needed)?;
        // The engine may detach tables (or split blocks into new ones).
        self.forget_walk();
        let mut counts = BbmCounts::default();
        let mut e =
            Engine { op, mode: Mode::Direct, record, pool, counts: &mut counts, split_contiguous: false };
        // The root's entries are not counted (nothing points at the root).
        let _ = self.apply(self.root, ROOT_LEVEL, start, end, &mut e);
        let pool = e.pool;
        debug_assert!(pool.is_empty(), "split reservation and engine disagree");
        self.free_reservation(pool);
        Ok(())
    }

    /// Unmaps the whole space into a record, the root detached too (for `destroy` and `Drop`):
    /// a range that cuts nothing, so no frame is needed and nothing needs break-before-make.
    pub(super) fn unmap_everything(&mut self) -> PendingFlush {
        self.forget_walk();
        let mut record = PendingFlush::new(self.range);
        let mut counts = BbmCounts::default();
        let op = StagedOp::<fn(Attributes) -> Attributes>::Unmap;
        let mut e = Engine {
            op,
            mode: Mode::Direct,
            record: &mut record,
            pool: FrameList::new(),
            counts: &mut counts,
            split_contiguous: false,
        };
        let _ = self.apply(self.root, ROOT_LEVEL, 0, super::SPACE_SIZE, &mut e);
        // The unmap detaches every table it empties; a table that held nothing to begin with
        // (one a failed `copy_pages_from` made and could not fill) it leaves, so those go here.
        self.detach_empty_tables(self.root, ROOT_LEVEL, &mut record);
        record.detach_table(self.root, &self.translation);
        record
    }

    /// Detaches into `record` every table below `table` (at `level`), all of them empty: the
    /// end of [`unmap_everything`](Self::unmap_everything).
    fn detach_empty_tables(&mut self, table: PhysAddr, level: u32, record: &mut PendingFlush) {
        for index in 0..super::ENTRIES_PER_TABLE {
            let d = self.read(table, index);
            if level < 3 && d.is_table(level) {
                let child = d.output_address();
                self.detach_empty_tables(child, level + 1, record);
                self.detach_now(table, index, child, record);
            }
        }
    }

    // ---- checks before the first write ----------------------------------------------------------

    /// The first offset in `[lo, hi)` (inside the span of `table`, at `level`) where `op` would
    /// need break-before-make: a touched block the range cuts, a touched contiguous run it cuts,
    /// a change of more than AP, PXN and UXN. Reads only. For an unmap only the entries at the
    /// two ends of the range can cut anything, so only they are read.
    pub(super) fn bbm_violation<F: FnMut(Attributes) -> Attributes>(
        &self,
        table: PhysAddr,
        level: u32,
        lo: u64,
        hi: u64,
        op: &mut StagedOp<F>,
    ) -> Option<u64> {
        let mut entries = Entries::new(level, lo, hi);
        while let Some(x) = entries.next() {
            let d = self.read(table, x.index);
            match d.kind(level) {
                DescriptorKind::Table if !(op.is_unmap() && x.whole()) => {
                    if let Some(at) = self.bbm_violation(d.output_address(), level + 1, x.lo, x.hi, op) {
                        return Some(at);
                    }
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    let old = d.attributes();
                    if op.touches(old) {
                        let run_size = x.size * run_entries(level) as u64;
                        let run_base = x.base & !(run_size - 1);
                        let cuts_run = d.is_contiguous() && (run_base < lo || run_base + run_size > hi);
                        let in_place = match op {
                            StagedOp::Protect(f) => old.may_change_in_place_to(f(old)),
                            StagedOp::Unmap | StagedOp::Discard | StagedOp::Demote | StagedOp::Unguard => {
                                true
                            }
                        };
                        if !x.whole() || cuts_run || !in_place {
                            return Some(x.lo);
                        }
                    }
                }
                _ => {}
            }
            if op.is_unmap() {
                entries.skip_to((hi - 1) & !(x.size - 1));
            }
        }
        None
    }

    /// The number of block splits `op` over `[start, end)` needs: only the blocks holding the two
    /// ends of the range can be cut, plus, inside a cut 1 GiB block, the 2 MiB blocks holding the
    /// ends.
    pub(super) fn count_splits<F: FnMut(Attributes) -> Attributes>(
        &self,
        start: u64,
        end: u64,
        op: &mut StagedOp<F>,
    ) -> usize {
        let mut cut = [(0u32, 0u64); 4];
        let mut n = 0;
        let mut push = |c: (u32, u64), cut: &mut [(u32, u64); 4]| {
            if !cut[..n].contains(&c) {
                cut[n] = c;
                n += 1;
            }
        };
        for (probe, bound) in [(start, start), (end - 1, end)] {
            let Some((level, base, d)) = self.leaf_at(probe) else { continue };
            if level == 3 || bound.is_multiple_of(level_size(level)) || !op.touches(d.attributes()) {
                continue;
            }
            push((level, base), &mut cut);
            if level == 1 && !bound.is_multiple_of(BLOCK_2M) {
                push((2, probe & !(BLOCK_2M - 1)), &mut cut);
            }
        }
        n
    }

    /// Detaches the (now empty) last-level table translating `off`, then each table above it,
    /// below the root, that this leaves empty, keeping the counts of the tables that stay: what
    /// the engine does on its way back up for a range inside one 2 MiB region, in the same order.
    #[cold]
    #[inline(never)]
    pub(super) fn detach_emptied(&mut self, off: u64, record: &mut PendingFlush) {
        self.forget_walk();
        let mut path = [self.root; 4];
        for level in ROOT_LEVEL..3 {
            path[level as usize + 1] = self.read(path[level as usize], index_of(off, level)).output_address();
        }
        let mut level = 2;
        loop {
            let (table, child) = (path[level as usize], path[level as usize + 1]);
            self.detach_now(table, index_of(off, level), child, record);
            if level == ROOT_LEVEL {
                break;
            }
            // `table` lost an entry: its count is in the entry above that points at it.
            let (parent, index) = (path[level as usize - 1], index_of(off, level - 1));
            let d = self.read(parent, index);
            if occupancy(d) > 1 {
                self.write(parent, index, minus_occupants(d, 1));
                break;
            }
            level -= 1;
        }
    }
}
