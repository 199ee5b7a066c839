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
        if !self.range.contains(va) {
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
