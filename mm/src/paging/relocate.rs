//! `move_pages`: `mremap`'s move of a range's pages to another address of the same table, one
//! last-level table's worth at a time, taking each entry out of the source as it is written at
//! the destination.
//!
//! Why it exists: a move maps the same frames at the new address and removes them from the old
//! one. Through `extents`, `map` and `unmap` that is three passes over the pages and a staged
//! unmap (a mark per entry, then a second walk to clear the marks): some 190 instructions a page
//! when the frames are scattered. Linux's `move_ptes` reads each source entry, clears it and
//! writes it at the destination in one loop, and flushes the old range once; so does this. No
//! frame changes hands (the entry keeps it), so the source entry can go at once, without the
//! break-before-make mark an unmap leaves until its flush: a CPU that still holds the old
//! translation in its TLB reaches the same frame the destination now maps, until the caller's
//! one flush of the old range, which must come before the call returns to the program (Linux's
//! window is the same). The destination's entries go from invalid to valid: no invalidation.
//!
//! What moves: every page (level-3 leaf) and every guard marker of the range, with its
//! attributes; a contiguous run keeps its hint when the destination keeps its alignment (and the
//! caller allows it), and loses it otherwise. The occupancy counts follow (added once per
//! destination table, taken once per source table), and a source table the move empties is
//! detached into the record, as an unmap detaches it, freed after the flush. Where the range
//! holds a last-level table's whole span and the distance is a multiple of it, the table itself
//! moves (Linux's `move_normal_pmd`): one level-2 entry written at the destination and one
//! cleared at the source, none of its 512 entries rewritten (they are read once, for the
//! record's bits).
//!
//! What does not: a block (a leaf above level 3) and a contiguous run the range cuts at either
//! end. [`tables_to_move`](PageTable::tables_to_move) says `None` for such a range before
//! anything changes, and the caller moves it through extents, which split and unfold (the
//! staged engine, break-before-make).

use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::descriptor::{Descriptor, level_size};

use super::flush::{FrameList, LeafBits, PendingFlush};
use super::occupancy::{minus_occupants, occupancy};
use super::{Constraints, MapError, PAGE_RUN, PageTable, Translation, index_of};

/// The bytes of a contiguous run of pages.
const RUN_SIZE: u64 = PAGE_RUN as u64 * PAGE_SIZE;

impl<T: Translation> PageTable<T> {
    /// The table frames [`move_pages`](Self::move_pages) of `[from, from + size)` to `to` needs
    /// at most (against the tables as they are, or with `fresh`, as if the destination's were
    /// gone), or `None` if it cannot move that range: a block in it, a contiguous run it cuts at
    /// either end, a bad range, or a destination that overlaps the source. Reads only: one
    /// entry per last-level table's span and the two ends.
    pub(crate) fn tables_to_move(
        &self,
        from: VirtAddr,
        to: VirtAddr,
        size: u64,
        fresh: bool,
    ) -> Option<usize> {
        let (start, end) = self.check_range(from, size).ok()?;
        let (dst, _) = self.check_range(to, size).ok()?;
        if start < dst + size && dst < end {
            return None;
        }
        for (probe, bound) in [(start, start), (end - PAGE_SIZE, end)] {
            if let Some((level, _, d)) = self.leaf_at(probe)
                && (level != 3 || (d.is_contiguous() && !bound.is_multiple_of(RUN_SIZE)))
            {
                return None;
            }
        }
        let mut parts = self.table_parts(start, end);
        let mut block = false;
        let pieces = core::iter::from_fn(|| match parts.next()? {
            Some((lo, hi)) => Some((self.va(lo + dst - start), crate::addr::PhysAddr(0), hi - lo)),
            None => {
                block = true;
                None
            }
        });
        let pages = Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS);
        let count = self.tables_to_map_pieces(pieces, pages, fresh);
        (!block).then_some(count)
    }

    /// The parts of `[start, end)` (offsets) that last-level tables translate, one per table, in
    /// address order; an item `None` where a block is, after which the caller stops.
    fn table_parts(&self, start: u64, end: u64) -> impl Iterator<Item = Option<(u64, u64)>> + '_ {
        let mut lo = start;
        core::iter::from_fn(move || {
            while lo < end {
                let (level, _, d) = self.descend(lo, 2);
                let hi = ((lo | (level_size(level) - 1)) + 1).min(end);
                let part = (lo, hi);
                lo = hi;
                if d.is_leaf(level) {
                    lo = end;
                    return Some(None);
                }
                if level == 2 && d.is_table(2) {
                    return Some(Some(part));
                }
            }
            None
        })
    }

    /// Moves every page and guard marker of `[from, from + size)` to the same place of
    /// `[to, to + size)`, taking table frames from `pool` first, and records the removed source
    /// leaves (and the source tables the move empties, detached) in `record`, which the caller
    /// flushes before the program runs again. Keeps a contiguous run's hint where `keep_runs`
    /// and the distance keeps the run's alignment. Returns the pages moved.
    ///
    /// For a range [`tables_to_move`](Self::tables_to_move) accepts, with the destination empty
    /// and as many frames in `pool` as it counted, it cannot fail.
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`] or [`MapError::Misaligned`] for a bad range or overlapping
    ///   ranges, and [`MapError::BreakBeforeMakeRequired`] at a block or a cut run at an end:
    ///   nothing moved;
    /// - [`MapError::AlreadyMapped`] if the destination holds something where an entry goes,
    ///   [`MapError::OutOfMemory`] if a table frame cannot be had: the entries moved so far
    ///   stay moved (every page is mapped once, at one of its two addresses), in `record`.
    pub(crate) fn move_pages(
        &mut self,
        from: VirtAddr,
        to: VirtAddr,
        size: u64,
        keep_runs: bool,
        pool: &mut FrameList,
        record: &mut PendingFlush,
    ) -> Result<u64, MapError> {
        let (start, end) = self.check_range(from, size)?;
        let (dst, _) = self.check_range(to, size)?;
        if start < dst + size && dst < end {
            return Err(MapError::InvalidRange);
        }
        for (probe, bound) in [(start, start), (end - PAGE_SIZE, end)] {
            if let Some((level, _, d)) = self.leaf_at(probe)
                && (level != 3 || (d.is_contiguous() && !bound.is_multiple_of(RUN_SIZE)))
            {
                return Err(MapError::BreakBeforeMakeRequired(self.va(probe)));
            }
        }
        if self.table_parts(start, end).any(|p| p.is_none()) {
            return Err(MapError::BreakBeforeMakeRequired(from));
        }
        let delta = dst.wrapping_sub(start);
        let keep_runs = keep_runs && delta.is_multiple_of(RUN_SIZE);
        let mut moved = 0;
        let mut lo = start;
        while lo < end {
            let (level, _, d) = self.descend(lo, 2);
            let hi = ((lo | (level_size(level) - 1)) + 1).min(end);
            if level == 2 && d.is_table(2) {
                let whole = hi - lo == level_size(2) && delta.is_multiple_of(level_size(2)) && keep_runs;
                if let Some(pages) = whole.then(|| self.move_whole_table(lo, delta, pool, record)).flatten() {
                    moved += pages;
                } else {
                    let part = Part { from: d.output_address(), lo, hi, delta, keep_runs };
                    moved += self.move_table_part(part, pool, record)?;
                }
            }
            lo = hi;
        }
        Ok(moved)
    }

    /// Moves the last-level table translating the whole span from offset `lo` (aligned to it)
    /// `delta` bytes on (a multiple of the span), descriptor and all, as Linux's
    /// `move_normal_pmd`: its entries stay where they are, the destination's level-2 entry
    /// points at the table and the source's is cleared, with the table's pages (counted and
    /// their bits read for the record) and the removed table entry in `record`; a table above
    /// the source that this empties is detached, a table missing above the destination made
    /// (frames from `pool` first). Returns the pages moved, or `None` when the destination's
    /// level-2 entry is in use or a table for its path cannot be had (the caller moves the
    /// entries one by one; tables made for the path stay, as `make_path` leaves them).
    fn move_whole_table(
        &mut self,
        lo: u64,
        delta: u64,
        pool: &mut FrameList,
        record: &mut PendingFlush,
    ) -> Option<u64> {
        let dst = lo.wrapping_add(delta);
        let (path, _) = self.make_path(dst, 2, Some(pool)).ok()?;
        let above = path.table;
        if self.read(above, index_of(dst, 2)).bits() != Descriptor::INVALID.bits() {
            return None;
        }
        let (_, source_l2, d) = self.descend(lo, 2);
        let entries = self.entries(d.output_address());
        let (mut taken, mut markers, mut and, mut or) = (0u64, 0u64, u64::MAX, 0u64);
        for k in 0..super::ENTRIES_PER_TABLE {
            let e = entries.read(k);
            if e == Descriptor::INVALID.bits() {
                continue;
            }
            taken += 1;
            if e & 1 != 0 {
                and &= e;
                or |= e;
            } else {
                markers += 1;
            }
        }
        self.forget_walk();
        // The destination first: the table is never out of both places.
        self.write(above, index_of(dst, 2), d);
        self.add_occupants(path.parent, index_of(dst, 1), 1);
        self.write(source_l2, index_of(lo, 2), Descriptor::INVALID);
        record.note_table_removed();
        let hi = lo + level_size(2);
        record.add_pages(lo, hi, taken - markers, LeafBits::of(and, or));
        if markers > 0 {
            record.cover(lo, hi);
        }
        self.lost_occupant(lo, 2, record);
        Some(taken - markers)
    }

    /// The table at `level` on the path to offset `off` lost an occupied entry: its count (in
    /// the entry above it) goes down by one, and a table this empties is detached into
    /// `record`, and so on up to the root (whose entries are not counted).
    fn lost_occupant(&mut self, off: u64, level: u32, record: &mut PendingFlush) {
        let mut path = [self.root; 4];
        for l in super::ROOT_LEVEL..level {
            path[l as usize + 1] = self.read(path[l as usize], index_of(off, l)).output_address();
        }
        let mut level = level;
        while level > super::ROOT_LEVEL {
            let (parent, index) = (path[level as usize - 1], index_of(off, level - 1));
            let d = self.read(parent, index);
            if occupancy(d) > 1 {
                self.write(parent, index, minus_occupants(d, 1));
                return;
            }
            self.detach_now(parent, index, path[level as usize], record);
            level -= 1;
        }
    }

    /// [`move_pages`](Self::move_pages) for one part: `[lo, hi)`, inside the span of the source's
    /// last-level table `from`; returns the pages moved.
    ///
    /// The part goes in pieces, one per destination table (two when the distance is not a
    /// multiple of a table's span): each finds its first occupied entry, the destination table
    /// for it, then moves the rest of the piece in a loop that reads and writes entries through
    /// the two tables' addresses, computed once.
    #[inline(never)]
    fn move_table_part(
        &mut self,
        part: Part,
        pool: &mut FrameList,
        record: &mut PendingFlush,
    ) -> Result<u64, MapError> {
        let Part { from, lo, hi, delta, keep_runs } = part;
        let src = self.entries(from);
        let keep = if keep_runs { u64::MAX } else { !Descriptor::INVALID.with_contiguous(true).bits() };
        let (first, end) = (index_of(lo, 3), index_of(hi - PAGE_SIZE, 3) + 1);
        // Entries taken out of the source, the pages among them and their bits, and the first
        // and last entry taken (the record's range: it covers the pages).
        let (mut taken, mut pages, mut bits) = (0usize, 0u64, LeafBits::NONE);
        let (mut lowest, mut highest) = (usize::MAX, 0);
        let mut result = Ok(());
        let mut start = first;
        while start < end && result.is_ok() {
            // The piece whose destination lies in one table: up to where the destination's
            // index wraps.
            let dst0 = (lo + (start - first) as u64 * PAGE_SIZE).wrapping_add(delta);
            let j0 = index_of(dst0, 3);
            let stop = end.min(start + (super::ENTRIES_PER_TABLE - j0));
            let Some(k0) = (start..stop).find(|&k| src.read(k) != 0) else {
                start = stop;
                continue;
            };
            let dst_first = dst0 + (k0 - start) as u64 * PAGE_SIZE;
            let table = match self.last_table_for(dst_first, Some(&mut *pool)) {
                Ok((t, _)) => t,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            let dst = self.entries(table.table);
            let shift = j0.wrapping_sub(start); // destination index = source index + shift
            let (mut filled, mut markers, mut and, mut or) = (0usize, 0usize, u64::MAX, 0u64);
            for k in k0..stop {
                let d = src.read(k);
                if d == 0 {
                    continue;
                }
                let j = k.wrapping_add(shift);
                // Anything but an invalid entry is in the way (between operations an entry is
                // a leaf, a table, a guard marker or invalid).
                if dst.read(j) != Descriptor::INVALID.bits() {
                    let at = dst0 + (k - start) as u64 * PAGE_SIZE;
                    result = Err(MapError::AlreadyMapped(self.va(at)));
                    break;
                }
                dst.write(j, d & keep);
                src.write(k, Descriptor::INVALID.bits());
                filled += 1;
                highest = k;
                // A page's bits for the record; a guard marker's none.
                if d & 1 != 0 {
                    and &= d;
                    or |= d;
                } else {
                    markers += 1;
                }
            }
            if filled > 0 {
                lowest = lowest.min(k0);
                self.add_occupants(table.parent, index_of(dst_first, 2), filled);
                bits.absorb(LeafBits::of(and, or));
                taken += filled;
                pages += (filled - markers) as u64;
            }
            start = stop;
        }
        if taken > 0 {
            let off = |k: usize| lo + (k - first) as u64 * PAGE_SIZE;
            record.add_pages(off(lowest), off(highest) + PAGE_SIZE, pages, bits);
            if taken as u64 > pages {
                // A guard marker is in no TLB, but its table may be detached below: the flush
                // must reach the walk caches that point at it.
                record.cover(lo, hi);
            }
            // The source's count, read after the destination's was added (the two tables may
            // be one).
            let (level, parent, d) = self.descend(lo, 2);
            debug_assert!(level == 2 && d.is_table(2) && d.output_address() == from);
            if occupancy(d) == taken {
                self.detach_emptied(lo, record);
            } else {
                self.write(parent, index_of(lo, 2), minus_occupants(d, taken));
            }
        }
        result.map(|()| pages)
    }
}

/// One part of a move: `[lo, hi)` (offsets), inside the span of the source's last-level table
/// `from`, going `delta` bytes further (modulo the space), its runs kept whole or not.
#[derive(Clone, Copy)]
struct Part {
    from: crate::addr::PhysAddr,
    lo: u64,
    hi: u64,
    delta: u64,
    keep_runs: bool,
}
