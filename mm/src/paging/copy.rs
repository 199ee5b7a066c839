//! `copy_pages_from`: fork's copy of another table's pages, one last-level table's worth at a
//! time, write-protecting the source's entries in the same pass.
//!
//! Why it exists: `fork` gives the child every present page of the parent, the same frames,
//! usually write-protected. Through `walk` and `map` that is one callback, one extent and one
//! `map` call per page when the parent's frames are scattered (the usual case for memory a
//! program touched page by page): some 190 instructions a page. Linux's `copy_pte_range` reads
//! the source table and writes the destination's entries in one loop; so does this: for each
//! last-level table of the source in the range, the loop reads an entry, takes a reference to
//! its frame (the caller's `take`), and writes the entry with the new attributes at the same
//! index of the destination's table, which it creates when the first page of that region needs
//! it. The occupancy count of the destination table is added once per table. In the same pass
//! the source's entry gets the same new attributes (fork write-protects the parent's private
//! pages and gives the child the entry it leaves, as `copy_present_pte` does), in place: only
//! changes the architecture allows without break-before-make (AP, PXN, UXN) are made, each
//! gathered into the caller's flush record, as the engine's in-place protection gathers them;
//! the caller flushes once for all of them.
//!
//! What it does not do: blocks (leaves above level 3) are the caller's (they are few, and a
//! caller maps runs of them to keep contiguous hints: `walk_blocks`), and so are guard markers
//! (`guards_in`) and a contiguous run of the source that the range cuts (see
//! [`Copied::cut_runs_left`]). In the destination it only makes invalid entries valid (no
//! break-before-make, no flush, the last-table cache stays right), so that table may be live,
//! but it is meant for a new one; in the source it changes no table descriptor.
//!
//! Unlike `map`, a failure is not all-or-nothing: the pages copied before it stay, each with
//! the reference `take` gave it, and the caller ends the table (fork destroys the child, which
//! drops those references through its own teardown), as Linux's `dup_mmap` leaves a partial
//! child to `mmput`; the source entries changed before it stay changed, in the record.

use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::descriptor::{Attributes, Descriptor, level_size};

use super::flush::{LeafBits, PendingFlush};
use super::occupancy::table_descriptor;
use super::walk::LastLevel;
use super::{MapError, PAGE_RUN, PageTable, ROOT_LEVEL, Translation, index_of};

impl<T: Translation> PageTable<T> {
    /// Copies every page (level-3 leaf) of `source` in `[va, va + size)` to the same address of
    /// this table, with attributes `attrs(old)` and the same frame, after `take(frame)` said
    /// yes, and gives the source's entry the same attributes in place, adding the change to
    /// `record` (the source's flush: the caller issues it, on error too). The contiguous hint is
    /// kept on runs the range holds whole (`attrs` must be pure, so a run stays uniform) and
    /// cleared in this table on a run the range cuts. Blocks, guard markers and holes of
    /// `source` are skipped (module documentation).
    ///
    /// A contiguous run of the source that the range cuts and `attrs` would change is left as it
    /// is there: changing only its entries inside the range would leave one hint over two kinds
    /// of entry. [`Copied::cut_runs_left`] says so: the caller changes those entries with an
    /// operation that clears the hint first (`AddressSpace::protect_with`, break-before-make).
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`] or [`MapError::Misaligned`] for a bad range (nothing copied);
    /// - [`MapError::AlreadyMapped`]: an entry of this table where a page goes is in use (a
    ///   leaf or a guard marker) or a block covers its region;
    /// - [`MapError::BreakBeforeMakeRequired`]: `attrs` changes more than the permissions of a
    ///   source entry;
    /// - [`MapError::OutOfMemory`]: `take` refused a frame, or a table frame could not be had.
    ///
    /// On error the pages copied so far stay, with their references, and so do the source
    /// changes made so far, in `record`; tables made for the copy may be empty.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_pages_from<A, R>(
        &mut self,
        source: &mut Self,
        va: VirtAddr,
        size: u64,
        mut attrs: A,
        mut take: R,
        record: &mut PendingFlush,
    ) -> Result<Copied, MapError>
    where
        A: FnMut(Attributes) -> Attributes,
        R: FnMut(crate::addr::PhysAddr) -> bool,
    {
        let (start, end) = self.check_range(va, size)?;
        let (src_start, _) = source.check_range(va, size)?;
        debug_assert_eq!(start, src_start, "the two tables translate different halves");
        let span = level_size(2);
        let (mut lo, mut copied) = (start, Copied { pages: 0, cut_runs_left: false });
        while lo < end {
            let hi = ((lo | (span - 1)) + 1).min(end);
            let (level, _, d) = source.descend(lo, 2);
            if level == 2 && d.is_table(2) {
                let part = Part { from: d.output_address(), lo, hi };
                self.copy_table_part(source, part, &mut attrs, &mut take, record, &mut copied)?;
            }
            lo = hi;
        }
        Ok(copied)
    }

    /// [`copy_pages_from`](Self::copy_pages_from) for one part: `[lo, hi)`, inside the span of
    /// the source's last-level table `from`, counted into `copied`.
    fn copy_table_part<A, R>(
        &mut self,
        source: &mut Self,
        part: Part,
        attrs: &mut A,
        take: &mut R,
        record: &mut PendingFlush,
        copied: &mut Copied,
    ) -> Result<(), MapError>
    where
        A: FnMut(Attributes) -> Attributes,
        R: FnMut(crate::addr::PhysAddr) -> bool,
    {
        let Part { from, lo, hi } = part;
        // The runs the range cuts: the one holding `lo` unless `lo` starts it, the one holding
        // `hi - 1` unless `hi` ends it (run numbers, or one no entry has).
        let (first, last) = (index_of(lo, 3), index_of(hi - PAGE_SIZE, 3));
        let cut_lo = if first.is_multiple_of(PAGE_RUN) { usize::MAX } else { first / PAGE_RUN };
        let cut_hi = if (last + 1).is_multiple_of(PAGE_RUN) { usize::MAX } else { last / PAGE_RUN };
        let (mut to, mut fresh): (Option<LastLevel>, bool) = (None, false);
        let (mut filled, mut left) = (0, false);
        // The source's changed pages, gathered as the engine's in-place protection does.
        let (mut changed, mut changed_lo, mut changed_hi, mut bits) = (0, 0, 0, LeafBits::NONE);
        let mut result = Ok(());
        // Both tables' entries through views (each table's address computed once, not at every
        // access: some 8 instructions a page of the fork of 64 MiB).
        let src = source.entries(from);
        let mut dst = None;
        for i in first..=last {
            let d = Descriptor::from_bits(src.read(i));
            if !d.is_leaf(3) {
                continue;
            }
            let table = match dst {
                Some(view) => view,
                None => match self.last_table_for(lo, None) {
                    Ok((t, new)) => {
                        (to, fresh) = (Some(t), new);
                        *dst.insert(self.entries(t.table))
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                },
            };
            let off = lo + (i - first) as u64 * PAGE_SIZE;
            // (A table made for this copy holds nothing: fork's every table.)
            if !fresh && super::map::in_the_way(Descriptor::from_bits(table.read(i))) {
                result = Err(MapError::AlreadyMapped(self.va(off)));
                break;
            }
            let old = d.attributes();
            let new = attrs(old);
            if new != old && !old.may_change_in_place_to(new) {
                result = Err(MapError::BreakBeforeMakeRequired(self.va(off)));
                break;
            }
            if !take(d.output_address()) {
                result = Err(MapError::OutOfMemory);
                break;
            }
            let entry = if new == old { d } else { d.with_attributes(new) };
            let cut = d.is_contiguous() && (i / PAGE_RUN == cut_lo || i / PAGE_RUN == cut_hi);
            if new != old && cut {
                left = true;
            } else if new != old {
                src.write(i, entry.bits());
                if changed == 0 {
                    changed_lo = off;
                }
                changed_hi = off + PAGE_SIZE;
                changed += 1;
                bits.add(old.bits(), Some(new.bits()));
            }
            table.write(i, if cut { entry.with_contiguous(false) } else { entry }.bits());
            filled += 1;
        }
        if let Some(t) = to {
            self.add_occupants(t.parent, index_of(lo, 2), filled);
        }
        record.add_pages(changed_lo, changed_hi, changed, bits);
        copied.pages += filled as u64;
        copied.cut_runs_left |= left;
        result
    }

    /// The last-level table translating offset `off` and the level-2 table above it, creating
    /// the tables missing on the path (each published complete, its parent's occupancy counted),
    /// with frames from `pool` first when there is one, and whether the last-level one is new
    /// (all its entries invalid).
    ///
    /// # Errors
    ///
    /// `AlreadyMapped` if a leaf or a reserved entry is on the path; `OutOfMemory` if a table
    /// frame cannot be had (the tables made before stay, empty: a later map or the table's end
    /// frees them).
    pub(super) fn last_table_for(
        &mut self,
        off: u64,
        pool: Option<&mut super::FrameList>,
    ) -> Result<(LastLevel, bool), MapError> {
        if let Some(last) = self.last_level_table(off) {
            return Ok((last, false));
        }
        self.make_path(off, 3, pool)
    }

    /// The table at `until` (2 or 3) translating offset `off` and the table above it, creating
    /// the tables missing on the path as [`last_table_for`](Self::last_table_for) does, and
    /// whether the one at `until` is new.
    ///
    /// # Errors
    ///
    /// As [`last_table_for`](Self::last_table_for).
    pub(super) fn make_path(
        &mut self,
        off: u64,
        until: u32,
        mut pool: Option<&mut super::FrameList>,
    ) -> Result<(LastLevel, bool), MapError> {
        let mut new_last = false;
        let (mut level, mut table) = (ROOT_LEVEL, self.root);
        // The entry pointing at `table` (none for the root, whose entries are not counted).
        let mut above: Option<(crate::addr::PhysAddr, usize)> = None;
        while level < until {
            let index = index_of(off, level);
            let d = self.read(table, index);
            if !d.is_table(level) {
                if d.bits() != Descriptor::INVALID.bits() {
                    return Err(MapError::AlreadyMapped(self.va(off)));
                }
                let new = match pool.as_deref_mut().and_then(|p| p.pop(&self.translation)) {
                    Some(pa) => pa, // counted when it was reserved
                    None => {
                        let pa = self.translation.allocate_table().ok_or(MapError::OutOfMemory)?;
                        self.stats.tables_allocated += 1;
                        pa
                    }
                };
                self.zero(new);
                self.translation.publish_barrier();
                self.write(table, index, table_descriptor(new, 0));
                if let Some((t, i)) = above {
                    self.add_occupants(t, i, 1);
                }
                // Every table below a new one is new too, the last-level one included.
                new_last = true;
            }
            let d = self.read(table, index);
            above = Some((table, index));
            table = d.output_address();
            level += 1;
        }
        match above {
            Some((parent, _)) => Ok((LastLevel { parent, table }, new_last)),
            None => Err(MapError::InvalidRange), // unreachable: the root is above level 3
        }
    }
}

/// One part of a copy: `[lo, hi)` (offsets), inside the span of the source's last-level table
/// `from`.
#[derive(Clone, Copy)]
struct Part {
    from: crate::addr::PhysAddr,
    lo: u64,
    hi: u64,
}

/// What a page copy of fork did (`PageTable::copy_pages_from`, [`crate::space::ForkCopy::share_pages`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copied {
    /// Pages copied (each with the reference `take` gave it).
    pub pages: u64,
    /// A contiguous run the range cuts was left unchanged in the source, for an operation that
    /// clears its hint first.
    pub cut_runs_left: bool,
}
