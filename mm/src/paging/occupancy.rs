//! Occupancy counts: how many entries of a table below the root are occupied, kept in the table
//! descriptor that points at it.
//!
//! Why it is built this way: an `unmap` must detach every table it empties, and deciding that by
//! reading the table costs up to 512 reads per call, reaching cache lines of a nearly empty table
//! that were not touched for a long time, with a branch on each that the CPU cannot predict (so
//! one call's cache miss is not overlapped with the next one's). The number of occupied entries
//! answers it with one read of a line the walk has just read anyway. The crate has no heap and
//! no per-frame metadata, so the count lives in bits `[11:2]` of the table descriptor: for the
//! 4 KiB granule with 48-bit addresses these bits are IGNORED by the walker in a stage-1 table
//! descriptor (Arm ARM D8.3.1, "Table descriptor format"), so changing them needs no
//! break-before-make and no TLB maintenance. (With FEAT_LPA2, `TCR_ELx.DS == 1`, bits `[9:8]`
//! hold address bits, and with FEAT_HAFT bit 10 is an access flag; neither is used here, and a
//! port to them must move the count.)
//!
//! "Occupied" is what [`occupied`] says: valid, or staged to become valid by `finish`. With that
//! meaning the count changes only when an entry is written invalid, staged for removal or
//! detach, or made valid by a map, never in `finish`: a staged entry that becomes valid was
//! already counted, and one that is cleared had already left the count.
//!
//! Every writer keeps the count: the engine returns how many entries of a table it vacated, `map`
//! how many it filled, and the caller one level up rewrites the descriptor (or detaches the
//! table at zero). The host tests check after every operation that each count equals the number
//! of occupied entries of its table.

use crate::addr::PhysAddr;
use crate::descriptor::Descriptor;

#[cfg(test)]
use super::bbm::occupied;
use super::{ENTRIES_PER_TABLE, PageTable, Translation};

/// The lowest bit of the count in a table descriptor.
const OCCUPANCY_SHIFT: u32 = 2;
/// The width of the count: bits `[11:2]`.
const OCCUPANCY_BITS: u32 = 10;
const OCCUPANCY_MASK: u64 = ((1 << OCCUPANCY_BITS) - 1) << OCCUPANCY_SHIFT;
const _: () = assert!(ENTRIES_PER_TABLE < 1 << OCCUPANCY_BITS, "the count must hold a full table");

/// A table descriptor pointing at `table`, which has `count` occupied entries.
#[inline(always)]
pub(super) const fn table_descriptor(table: PhysAddr, count: usize) -> Descriptor {
    with_occupancy(Descriptor::table(table), count)
}

/// The occupancy count of the table that the table descriptor `d` points at.
#[inline(always)]
pub(super) const fn occupancy(d: Descriptor) -> usize {
    ((d.bits() & OCCUPANCY_MASK) >> OCCUPANCY_SHIFT) as usize
}

/// The table descriptor `d` with `n` more occupied entries in its table (a map filled them).
#[inline(always)]
pub(super) const fn plus_occupants(d: Descriptor, n: usize) -> Descriptor {
    debug_assert!(occupancy(d) + n <= ENTRIES_PER_TABLE);
    // The count is the top field of the low bits and cannot overflow: add in place.
    Descriptor::from_bits(d.bits() + ((n as u64) << OCCUPANCY_SHIFT))
}

/// The table descriptor `d` with `n` fewer occupied entries in its table (an unmap vacated
/// them).
#[inline(always)]
pub(super) const fn minus_occupants(d: Descriptor, n: usize) -> Descriptor {
    debug_assert!(n <= occupancy(d));
    Descriptor::from_bits(d.bits() - ((n as u64) << OCCUPANCY_SHIFT))
}

/// The table descriptor `d` with the count `count`.
#[inline(always)]
pub(super) const fn with_occupancy(d: Descriptor, count: usize) -> Descriptor {
    debug_assert!(count <= ENTRIES_PER_TABLE);
    Descriptor::from_bits((d.bits() & !OCCUPANCY_MASK) | ((count as u64) << OCCUPANCY_SHIFT))
}

impl<T: Translation> PageTable<T> {
    /// The number of occupied entries of `table`, counted by reading all of them (the tests'
    /// check of the counts).
    #[cfg(test)]
    pub(super) fn count_occupied(&self, table: PhysAddr) -> usize {
        (0..ENTRIES_PER_TABLE).filter(|&i| occupied(self.read(table, i))).count()
    }

    /// Checks every occupancy count of the tree against its table (host tests): panics naming
    /// the first table whose count differs from the number of its occupied entries.
    #[cfg(test)]
    pub(crate) fn check_occupancy(&self) {
        fn visit<T: Translation>(pt: &PageTable<T>, table: PhysAddr, level: u32) {
            for i in 0..ENTRIES_PER_TABLE {
                let d = pt.read(table, i);
                if d.is_table(level) {
                    let child = d.output_address();
                    let (count, actual) = (occupancy(d), pt.count_occupied(child));
                    assert_eq!(count, actual, "occupancy count of the level-{} table {child:?}", level + 1);
                    visit(pt, child, level + 1);
                }
            }
        }
        visit(self, self.root, super::ROOT_LEVEL);
    }

    /// Adds `added` occupied entries to the count of the table that entry `index` of `parent`
    /// (a table descriptor) points at.
    #[inline(always)]
    pub(super) fn add_occupants(&mut self, parent: PhysAddr, index: usize, added: usize) {
        let d = self.read(parent, index);
        self.write(parent, index, plus_occupants(d, added));
    }
}
