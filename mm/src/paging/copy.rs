//! `copy_pages_from`: fork's copy of another table's pages, one last-level table's worth at a
//! time.
//!
//! Why it exists: `fork` gives the child every present page of the parent, the same frames,
//! usually write-protected. Through `walk` and `map` that is one callback, one extent and one
//! `map` call per page when the parent's frames are scattered (the usual case for memory a
//! program touched page by page): some 190 instructions a page. Linux's `copy_pte_range` reads
//! the source table and writes the destination's entries in one loop; so does this: for each
//! last-level table of the source in the range, the loop reads an entry, takes a reference to
//! its frame (the caller's `take`), and writes the entry with the new attributes at the same
//! index of the destination's table, which it creates when the first page of that region needs
//! it. The occupancy count of the destination table is added once per table.
//!
//! What it does not do: blocks (leaves above level 3) are the caller's (they are few, and a
//! caller maps runs of them to keep contiguous hints: `walk_blocks`), and so are guard markers
//! (`guards_in`). It writes only invalid entries valid (no break-before-make, no flush, the
//! last-table cache stays right), so it may run on a live table, but it is meant for a new one.
//!
//! Unlike `map`, a failure is not all-or-nothing: the pages copied before it stay, each with
//! the reference `take` gave it, and the caller ends the table (fork destroys the child, which
//! drops those references through its own teardown), as Linux's `dup_mmap` leaves a partial
//! child to `mmput`.

use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::descriptor::{Attributes, Descriptor, level_size};

use super::occupancy::table_descriptor;
use super::walk::LastLevel;
use super::{MapError, PAGE_RUN, PageTable, ROOT_LEVEL, Translation, index_of};

impl<T: Translation> PageTable<T> {
    /// Copies every page (level-3 leaf) of `source` in `[va, va + size)` to the same address of
    /// this table, with attributes `attrs(old)` and the same frame, after `take(frame)` said
    /// yes. The contiguous hint is kept on runs the range holds whole (`attrs` must be pure, so
    /// a run stays uniform) and cleared on a run the range cuts. Blocks, guard markers and
    /// holes of `source` are skipped (module documentation).
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`] or [`MapError::Misaligned`] for a bad range (nothing copied);
    /// - [`MapError::AlreadyMapped`]: an entry of this table where a page goes is in use (a
    ///   leaf or a guard marker) or a block covers its region;
    /// - [`MapError::OutOfMemory`]: `take` refused a frame, or a table frame could not be had.
    ///
    /// On error the pages copied so far stay, with their references.
    pub fn copy_pages_from<A, R>(
        &mut self,
        source: &Self,
        va: VirtAddr,
        size: u64,
        mut attrs: A,
        mut take: R,
    ) -> Result<(), MapError>
    where
        A: FnMut(Attributes) -> Attributes,
        R: FnMut(crate::addr::PhysAddr) -> bool,
    {
        let (start, end) = self.check_range(va, size)?;
        let (src_start, _) = source.check_range(va, size)?;
        debug_assert_eq!(start, src_start, "the two tables translate different halves");
        let span = level_size(2);
        let mut lo = start;
        while lo < end {
            let hi = ((lo | (span - 1)) + 1).min(end);
            let (level, _, d) = source.descend(lo, 2);
            if level == 2 && d.is_table(2) {
                self.copy_table_part(source, d.output_address(), lo, hi, &mut attrs, &mut take)?;
            }
            lo = hi;
        }
        Ok(())
    }

    /// [`copy_pages_from`](Self::copy_pages_from) for `[lo, hi)`, inside the span of the
    /// source's last-level table `from`.
    fn copy_table_part<A, R>(
        &mut self,
        source: &Self,
        from: crate::addr::PhysAddr,
        lo: u64,
        hi: u64,
        attrs: &mut A,
        take: &mut R,
    ) -> Result<(), MapError>
    where
        A: FnMut(Attributes) -> Attributes,
        R: FnMut(crate::addr::PhysAddr) -> bool,
    {
        // The runs the range cuts: the one holding `lo` unless `lo` starts it, the one holding
        // `hi - 1` unless `hi` ends it (entry indices, or an index no entry has).
        let (first, last) = (index_of(lo, 3), index_of(hi - PAGE_SIZE, 3));
        let cut_lo = if first.is_multiple_of(PAGE_RUN) { usize::MAX } else { first / PAGE_RUN };
        let cut_hi = if (last + 1).is_multiple_of(PAGE_RUN) { usize::MAX } else { last / PAGE_RUN };
        let mut to: Option<LastLevel> = None;
        let mut filled = 0;
        let mut result = Ok(());
        for i in first..=last {
            let d = source.read(from, i);
            if !d.is_leaf(3) {
                continue;
            }
            let table = match to {
                Some(t) => t.table,
                None => match self.last_table_for(lo) {
                    Ok(t) => {
                        to = Some(t);
                        t.table
                    }
                    Err(e) => return Err(e),
                },
            };
            let off = lo + (i - first) as u64 * PAGE_SIZE;
            if super::map::in_the_way(self.read(table, i)) {
                result = Err(MapError::AlreadyMapped(self.va(off)));
                break;
            }
            if !take(d.output_address()) {
                result = Err(MapError::OutOfMemory);
                break;
            }
            let cut = d.is_contiguous() && (i / PAGE_RUN == cut_lo || i / PAGE_RUN == cut_hi);
            let new = d.with_attributes(attrs(d.attributes()));
            self.write(table, i, if cut { new.with_contiguous(false) } else { new });
            filled += 1;
        }
        if let Some(t) = to {
            self.add_occupants(t.parent, index_of(lo, 2), filled);
        }
        result
    }

    /// The last-level table translating offset `off` and the level-2 table above it, creating
    /// the tables missing on the path (each published complete, its parent's occupancy counted).
    ///
    /// # Errors
    ///
    /// `AlreadyMapped` if a leaf or a reserved entry is on the path; `OutOfMemory` if a table
    /// frame cannot be had (the tables made before stay, empty: a later map or the table's end
    /// frees them).
    fn last_table_for(&mut self, off: u64) -> Result<LastLevel, MapError> {
        if let Some(last) = self.fast_path_table(off, off + PAGE_SIZE) {
            return Ok(last);
        }
        let (mut level, mut table) = (ROOT_LEVEL, self.root);
        // The entry pointing at `table` (none for the root, whose entries are not counted).
        let mut above: Option<(crate::addr::PhysAddr, usize)> = None;
        while level < 3 {
            let index = index_of(off, level);
            let d = self.read(table, index);
            if !d.is_table(level) {
                if d.bits() != Descriptor::INVALID.bits() {
                    return Err(MapError::AlreadyMapped(self.va(off)));
                }
                let new = self.translation.allocate_table().ok_or(MapError::OutOfMemory)?;
                self.stats.tables_allocated += 1;
                self.zero(new);
                self.translation.publish_barrier();
                self.write(table, index, table_descriptor(new, 0));
                if let Some((t, i)) = above {
                    self.add_occupants(t, i, 1);
                }
            }
            let d = self.read(table, index);
            above = Some((table, index));
            table = d.output_address();
            level += 1;
        }
        match above {
            Some((parent, _)) => Ok(LastLevel { parent, table }),
            None => Err(MapError::InvalidRange), // unreachable: the root is above level 3
        }
    }
}
