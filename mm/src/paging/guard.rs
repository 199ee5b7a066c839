//! Guard markers: last-level entries that translate nothing and that a fault recognises as a
//! guard region (`MADV_GUARD_INSTALL`, Linux 6.13, `mm/madvise.c`).
//!
//! Why in the table: Linux keeps a guard as a PTE marker (a non-present entry with a software
//! bit, `PTE_MARKER_GUARD`), so installing one splits no mapping and needs no record beside the
//! table, and the fault handler finds it in the walk it makes anyway. Here a marker is an invalid
//! descriptor (bit 0 clear: the walker ignores every other bit, Arm ARM D8.3) whose bits are
//! exactly [`MARK_GUARD`] (bit 59). No staged entry of `bbm.rs` ever equals it (each carries one
//! of bits `[58:56]`), and markers sit only at level 3, where no table descriptor, and so no
//! occupancy count (`occupancy.rs`, up to bit 55), lives. Being invalid, a marker is never in a
//! TLB: writing or clearing one needs no invalidation.
//!
//! How the other operations treat a marker:
//! - it counts as an occupied entry ([`occupied`]), so a table holding guards is never detached
//!   from under them, and the counts stay exact;
//! - `map` refuses to write over one (`AlreadyMapped`, as for a valid entry);
//! - the engine's `Unmap` clears the markers of its range with the leaves (`munmap`, `MAP_FIXED`,
//!   `mremap`'s source, the end of a space), `Discard` removes the leaves and keeps the markers
//!   (`MADV_DONTNEED`), `Unguard` clears only the markers (`MADV_GUARD_REMOVE`, detaching the
//!   tables that leaves empty with a flush for the walk caches); protecting, demoting and the
//!   queries (`query`, `walk`: a marker is no leaf) pass them by.
//!
//! [`occupied`]: super::bbm::occupied

use super::bbm::MARK_GUARD;
use super::flush::FrameList;
use super::occupancy::{plus_occupants, table_descriptor};
use super::walk::Entries;
use super::{MapError, PageTable, ROOT_LEVEL, SPACE_SIZE, Translation};
use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Descriptor, DescriptorKind};

/// The guard marker.
pub(super) const GUARD: Descriptor = Descriptor::from_bits(MARK_GUARD);

/// Whether `d` (a level-3 entry) is a guard marker.
#[inline(always)]
pub(super) const fn is_guard(d: Descriptor) -> bool {
    d.bits() == MARK_GUARD
}

impl<T: Translation> PageTable<T> {
    /// Writes a guard marker into every entry of `[va, va + size)` that holds none yet, creating
    /// the tables on the way. The range must hold no valid leaf (unmap it first). No TLB
    /// maintenance is needed: only invalid entries change, and new tables are published as `map`
    /// publishes them.
    ///
    /// # Errors
    ///
    /// `InvalidRange`, `Misaligned` as for [`map`](Self::map); `AlreadyMapped` for a valid entry
    /// in the range; `OutOfMemory` when a table frame cannot be had. On error nothing changed.
    pub fn install_guards(&mut self, va: VirtAddr, size: u64) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        let mut pool = FrameList::new();
        let needed = self.guard_level::<false>(Some(self.root), ROOT_LEVEL, start, end, &mut pool)?;
        pool = self.reserve(needed)?;
        // The root's entries are not counted (nothing points at the root).
        self.guarded = true;
        let result = self.guard_level::<true>(Some(self.root), ROOT_LEVEL, start, end, &mut pool);
        debug_assert!(result.is_ok() && pool.is_empty(), "guard dry run and commit disagree");
        self.free_reservation(pool);
        result.map(|_| ())
    }

    /// [`install_guards`](Self::install_guards) in `[lo, hi)` of `table` at `level` (`None`: a
    /// table the commit will create). As `map_level`: the dry run returns the tables to create
    /// (or the first valid entry in the way), the commit the entries of `table` it filled.
    fn guard_level<const COMMIT: bool>(
        &mut self,
        table: Option<PhysAddr>,
        level: u32,
        lo: u64,
        hi: u64,
        pool: &mut FrameList,
    ) -> Result<usize, MapError> {
        let Some(t) = table else {
            // A table still to create (dry run only): it, and the tables below it.
            let mut needed = 1;
            if level < 3 {
                for x in Entries::new(level, lo, hi) {
                    needed += self.guard_level::<false>(None, level + 1, x.lo, x.hi, pool)?;
                }
            }
            return Ok(needed);
        };
        let (mut needed, mut filled) = (0, 0);
        for x in Entries::new(level, lo, hi) {
            let d = self.read(t, x.index);
            match d.kind(level) {
                DescriptorKind::Invalid if level == 3 => {
                    if !is_guard(d) {
                        if COMMIT {
                            self.write(t, x.index, GUARD);
                        }
                        filled += 1;
                    }
                }
                DescriptorKind::Table => {
                    let below =
                        self.guard_level::<COMMIT>(Some(d.output_address()), level + 1, x.lo, x.hi, pool)?;
                    if COMMIT {
                        self.write(t, x.index, plus_occupants(d, below));
                    } else {
                        needed += below;
                    }
                }
                DescriptorKind::Invalid if COMMIT => {
                    let new = self.take_reserved(pool);
                    self.zero(new);
                    let count = self.guard_level::<true>(Some(new), level + 1, x.lo, x.hi, pool)?;
                    self.translation.publish_barrier();
                    self.write(t, x.index, table_descriptor(new, count));
                    filled += 1;
                }
                DescriptorKind::Invalid => {
                    needed += self.guard_level::<false>(None, level + 1, x.lo, x.hi, pool)?
                }
                DescriptorKind::Block | DescriptorKind::Page | DescriptorKind::Reserved => {
                    return Err(MapError::AlreadyMapped(self.va(x.lo)));
                }
            }
        }
        Ok(if COMMIT { filled } else { needed })
    }

    /// Whether the page at `va` is a guard marker.
    pub fn is_guard(&self, va: VirtAddr) -> bool {
        if !self.guarded || !self.range.contains(va) {
            return false;
        }
        let (level, _, d) = self.descend(va.0 & (SPACE_SIZE - 1), 3);
        level == 3 && is_guard(d)
    }

    /// Calls `f(start, len)` for every run of guard markers in `[va, va + size)`, in address
    /// order, adjacent markers as one run.
    ///
    /// # Errors
    ///
    /// `InvalidRange` or `Misaligned` for a bad range.
    pub fn guards_in<F: FnMut(VirtAddr, u64)>(
        &self,
        va: VirtAddr,
        size: u64,
        mut f: F,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        if !self.guarded {
            return Ok(()); // no marker was ever written: nothing to scan for
        }
        let mut run: Option<(u64, u64)> = None;
        self.guards_level(self.root, ROOT_LEVEL, start, end, &mut |off| match &mut run {
            Some((_, e)) if *e == off => *e += PAGE_SIZE,
            _ => {
                if let Some((s, e)) = run.replace((off, off + PAGE_SIZE)) {
                    f(self.va(s), e - s);
                }
            }
        });
        if let Some((s, e)) = run {
            f(self.va(s), e - s);
        }
        Ok(())
    }

    fn guards_level(&self, table: PhysAddr, level: u32, lo: u64, hi: u64, f: &mut impl FnMut(u64)) {
        for x in Entries::new(level, lo, hi) {
            let d = self.read(table, x.index);
            if level == 3 && is_guard(d) {
                f(x.base);
            } else if d.is_table(level) {
                self.guards_level(d.output_address(), level + 1, x.lo, x.hi, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The markers at the table level: where they are written, which tables they need and hold,
    //! what is refused, what `guards_in` reports, and that `unmap` clears them (the address-space
    //! layer's `Discard` and `Unguard` are tested in `user::tests::guard` and by the strict model).
    use std::vec::Vec;

    use super::super::{Constraints, MapError, PageTable, VaRange};
    use crate::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
    use crate::descriptor::{Attributes, UserAccess};
    use crate::test_support::Heap;

    /// Pages around the first last-level table boundary above 4 MiB: the markers of
    /// `[BASE - 2 pages, BASE + 3 pages)` need two last-level tables.
    const BASE: u64 = 2 * BLOCK_2M;

    fn page(i: i64) -> VirtAddr {
        VirtAddr(BASE.wrapping_add_signed(i * PAGE_SIZE as i64))
    }

    fn runs(pt: &PageTable<Heap>, va: VirtAddr, size: u64) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        pt.guards_in(va, size, |a, len| v.push((a.0, len))).unwrap();
        v
    }

    fn end(pt: PageTable<Heap>) {
        pt.check_occupancy();
        let (mut translation, record) = pt.destroy();
        record.release(&mut translation);
    }

    #[test]
    fn markers_fill_exactly_their_range_with_the_tables_a_map_would_need() {
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        pt.install_guards(page(-2), 5 * PAGE_SIZE).unwrap();
        for i in -3..4 {
            assert_eq!(pt.is_guard(page(i)), (-2..3).contains(&i), "page {i}");
        }
        // The same tables as a page-by-page map of the range: a table per level on the way,
        // two last-level ones.
        let mut mapped = PageTable::new(Heap, VaRange::Lower).unwrap();
        let attrs = Attributes::user(UserAccess::ReadWrite);
        mapped.map(page(-2), PhysAddr(0x8000_0000), 5 * PAGE_SIZE, attrs, Constraints::NO_BLOCKS).unwrap();
        let tables = pt.stats().tables_in_use();
        assert_eq!(tables, mapped.stats().tables_in_use());
        end(mapped);
        assert_eq!(runs(&pt, VirtAddr(0), BASE * 2), [(page(-2).0, 5 * PAGE_SIZE)]);
        // Again over the same pages and one more: no table is added, one marker is.
        pt.install_guards(page(-2), 6 * PAGE_SIZE).unwrap();
        assert_eq!(pt.stats().tables_in_use(), tables);
        assert!(pt.is_guard(page(3)) && !pt.is_guard(page(4)));
        // A marker two blocks higher: the tables above exist, one last-level table is new.
        let far = VirtAddr(BASE + 2 * BLOCK_2M);
        pt.install_guards(far, PAGE_SIZE).unwrap();
        assert_eq!(pt.stats().tables_in_use(), tables + 1);
        assert!(pt.is_guard(far));
        pt.check_occupancy();
        // No leaf: queries and walks see none.
        assert!(pt.query(page(0)).is_none());
        let mut leaves = 0;
        pt.walk(VirtAddr(0), BASE * 2, |_| leaves += 1).unwrap();
        assert_eq!(leaves, 0);
        end(pt);
    }

    #[test]
    fn guards_in_reports_each_run_once_clipped_to_the_range() {
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        for (first, n) in [(-2, 3), (5, 1), (7, 2)] {
            pt.install_guards(page(first), n * PAGE_SIZE).unwrap();
        }
        let p = |i: i64| page(i).0;
        let all = runs(&pt, VirtAddr(0), 4 * BASE);
        assert_eq!(all, [(p(-2), 3 * PAGE_SIZE), (p(5), PAGE_SIZE), (p(7), 2 * PAGE_SIZE)]);
        // From inside the first run to inside the last: both clipped.
        assert_eq!(
            runs(&pt, page(-1), 9 * PAGE_SIZE),
            [(p(-1), 2 * PAGE_SIZE), (p(5), PAGE_SIZE), (p(7), PAGE_SIZE)]
        );
        // A range between runs, and one with no table at all.
        assert!(runs(&pt, page(1), 4 * PAGE_SIZE).is_empty());
        assert!(runs(&pt, VirtAddr(8 * BASE), BASE).is_empty());
        // A leaf between markers ends a run: it is not a marker.
        let attrs = Attributes::user(UserAccess::ReadWrite);
        pt.map(page(6), PhysAddr(0x8000_0000), PAGE_SIZE, attrs, Constraints::NONE).unwrap();
        assert_eq!(runs(&pt, page(5), 4 * PAGE_SIZE), [(p(5), PAGE_SIZE), (p(7), 2 * PAGE_SIZE)]);
        assert!(!pt.is_guard(page(6)));
        assert_eq!(pt.guards_in(VirtAddr(1), PAGE_SIZE, |_, _| {}), Err(MapError::Misaligned));
        end(pt);
    }

    #[test]
    fn a_refused_install_writes_nothing_and_takes_no_table() {
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        let attrs = Attributes::user(UserAccess::ReadWrite);
        // A page in the way, in the second of the two last-level tables the range needs; the
        // first does not exist yet.
        pt.map(page(2), PhysAddr(0x8000_0000), PAGE_SIZE, attrs, Constraints::NONE).unwrap();
        let before = pt.stats();
        assert_eq!(pt.install_guards(page(-2), 5 * PAGE_SIZE), Err(MapError::AlreadyMapped(page(2))));
        assert_eq!(pt.stats().tables_in_use(), before.tables_in_use());
        assert_eq!(pt.stats().tables_allocated, before.tables_allocated);
        assert!(runs(&pt, VirtAddr(0), 4 * BASE).is_empty());
        // A block in the way: refused at the first address of the range inside it.
        let block = VirtAddr(4 * BASE);
        pt.map(block, PhysAddr(16 * BLOCK_2M), BLOCK_2M, attrs, Constraints::NONE).unwrap();
        assert_eq!(pt.query(block).unwrap().size, BLOCK_2M);
        let inside = VirtAddr(block.0 + 3 * PAGE_SIZE);
        assert_eq!(pt.install_guards(inside, PAGE_SIZE), Err(MapError::AlreadyMapped(inside)));
        assert!(!pt.is_guard(inside));
        assert!(runs(&pt, VirtAddr(0), 8 * BASE).is_empty());
        // Out of the table's half, or not page-aligned.
        assert!(pt.install_guards(VirtAddr(1 << 63), PAGE_SIZE).is_err());
        assert_eq!(pt.install_guards(VirtAddr(PAGE_SIZE + 1), PAGE_SIZE), Err(MapError::Misaligned));
        assert!(!pt.is_guard(VirtAddr(1 << 63)));
        end(pt);
    }

    #[test]
    fn unmap_clears_the_markers_and_the_tables_they_alone_held() {
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        let root_only = pt.stats().tables_in_use();
        pt.install_guards(page(-2), 5 * PAGE_SIZE).unwrap();
        // Clearing part keeps every table: markers are left in both last-level tables.
        let mut records = Vec::new();
        let record = pt.unmap(page(-1), 2 * PAGE_SIZE).unwrap();
        assert_eq!(record.detached_tables(), 0);
        records.push(record);
        assert_eq!(runs(&pt, VirtAddr(0), 4 * BASE), [(page(-2).0, PAGE_SIZE), (page(1).0, 2 * PAGE_SIZE)]);
        pt.check_occupancy();
        // Clearing the rest leaves the tables empty: they go.
        let record = pt.unmap(page(-2), 5 * PAGE_SIZE).unwrap();
        assert!(record.detached_tables() > 0);
        // The flush covers the cleared markers, and only them: the tables they held may sit in
        // a walk cache, and an address inside each reaches it (`PendingFlush::cover`).
        let range = record.range().expect("markers cleared from tables that go: a range to flush");
        assert_eq!((range.start, range.size), (page(-2), 5 * PAGE_SIZE));
        records.push(record);
        assert!(runs(&pt, VirtAddr(0), 4 * BASE).is_empty());
        assert_eq!(pt.stats().tables_in_use(), root_only);
        let (mut translation, last) = pt.destroy();
        for r in records {
            r.release(&mut translation);
        }
        last.release(&mut translation);
    }
}
