//! Occupancy counts: how many entries of a table below the root are occupied, kept in the table
//! descriptor that points at it.
//!
//! Why it is built this way: an `unmap` must detach every table it empties, and deciding that by
//! reading the table costs up to 512 reads per call (8192 with 64 KiB pages), reaching cache lines of a nearly empty table
//! that were not touched for a long time, with a branch on each that the CPU cannot predict (so
//! one call's cache miss is not overlapped with the next one's). The number of occupied entries
//! answers it with one read of a line the walk has just read anyway. The crate has no heap and
//! no per-frame metadata, so the count lives in bits of the table descriptor that the walker
//! IGNORES in a stage-1 table descriptor (Arm ARM D8.3.1, "Table descriptor format": bits
//! `[11:2]` and `[58:52]`), so changing them needs no break-before-make and no TLB maintenance.
//!
//! The count runs from 0 to a full table, so it needs `index bits + 1` bits: 10 with 4 KiB pages,
//! 12 with 16 KiB, 14 with 64 KiB. [`occupancy_mask`] lays it out per [`Format`], lowest bits
//! first: in `[11:2]` (with FEAT_LPA2, `TCR_ELx.DS == 1`, bits `[9:8]` hold `OA[51:50]` and are
//! skipped: `[7:2]` and `[11:10]`), and what does not fit there in `[52 + k − 1 : 52]`, at most
//! `[55:52]`, below the staging marks of `bbm.rs` (`[58:56]`), which a staged table descriptor
//! carries together with its count. So the 4 KiB granule keeps its count in `[11:2]` alone, as a
//! plain field the hot paths add to in place, and the other formats split it in two or three
//! fields. (With FEAT_HAFT, bit 10 of a table descriptor is an access flag; it is not enabled.)
//!
//! "Occupied" is what [`occupied`] says: valid, or staged to become valid by `finish`. With that
//! meaning the count changes only when an entry is written invalid, staged for removal or
//! detach, or made valid by a map, never in `finish`: a staged entry that becomes valid was
//! already counted, and one that is cleared had already left the count.
//!
//! Every writer keeps the count: the engine returns how many entries of a table it vacated, `map`
//! how many it filled, and the caller one level up rewrites the descriptor (or detaches the
//! table at zero). The host tests check after every operation that each count equals the number
//! of occupied entries of its table, and for every format that the layout round-trips every
//! count without touching an address, type or attribute bit.

use crate::addr::PhysAddr;
use crate::descriptor::Descriptor;
use crate::granule::Format;

#[cfg(test)]
use super::bbm::occupied;
use super::{ENTRIES_PER_TABLE, FORMAT, PageTable, Translation};

/// The ignored bits `[11:2]` of a table descriptor.
const LOW_FIELD: u64 = 0x3ff << 2;
/// Bits `[9:8]`, which hold `OA[51:50]` with `DS`.
const DS_ADDRESS_BITS: u64 = 0b11 << 8;
/// The lowest of the ignored bits `[58:52]`, where the rest of a count that does not fit in the
/// low field goes.
const HIGH_SHIFT: u32 = 52;
/// The most of `[58:52]` the count may take: `[55:52]` (bits `[58:56]` are the staging marks).
const HIGH_MAX_BITS: u32 = 4;

/// The bits of a table descriptor of `format` that hold the occupancy count of the table it
/// points at: the ignored low bits (without `[9:8]` with `DS`), then as many of `[55:52]` as a
/// count of `0..=entries` needs.
pub(crate) const fn occupancy_mask(format: Format) -> u64 {
    let needed = format.granule.index_bits() + 1;
    let low = if format.ds() { LOW_FIELD & !DS_ADDRESS_BITS } else { LOW_FIELD };
    let high_bits = needed.saturating_sub(low.count_ones());
    assert!(high_bits <= HIGH_MAX_BITS, "the count must stay below the staging marks");
    low | (((1u64 << high_bits) - 1) << HIGH_SHIFT)
}

/// The count held in `bits`, a table descriptor of a format whose count lives in `mask`: its
/// fields gathered, lowest first.
pub(crate) const fn occupancy_in(mask: u64, bits: u64) -> usize {
    let (mut count, mut width_so_far, mut rest) = (0u64, 0, mask);
    while rest != 0 {
        let shift = rest.trailing_zeros();
        let width = (rest >> shift).trailing_ones();
        let field = (1u64 << width) - 1;
        count |= ((bits >> shift) & field) << width_so_far;
        width_so_far += width;
        rest &= !(field << shift);
    }
    count as usize
}

/// `bits`, a table descriptor of a format whose count lives in `mask`, with the count `count`
/// spread over the fields of `mask`, lowest first (bits of `count` beyond the mask are dropped).
pub(crate) const fn with_occupancy_in(mask: u64, bits: u64, count: usize) -> u64 {
    let (mut out, mut value, mut rest) = (bits & !mask, count as u64, mask);
    while rest != 0 {
        let shift = rest.trailing_zeros();
        let width = (rest >> shift).trailing_ones();
        let field = (1u64 << width) - 1;
        out |= (value & field) << shift;
        value >>= width;
        rest &= !(field << shift);
    }
    out
}

/// The build's count bits.
const OCCUPANCY_MASK: u64 = occupancy_mask(FORMAT);
/// The lowest bit of the count.
const OCCUPANCY_SHIFT: u32 = OCCUPANCY_MASK.trailing_zeros();
/// Whether the build's count is one field (the 4 KiB granule, `[11:2]`): then it is read with one
/// shift and changed by adding in place, the count being the top field of the low bits.
const ONE_FIELD: bool =
    (OCCUPANCY_MASK >> OCCUPANCY_SHIFT).count_ones() == (OCCUPANCY_MASK >> OCCUPANCY_SHIFT).trailing_ones();
const _: () = assert!(
    occupancy_in(OCCUPANCY_MASK, OCCUPANCY_MASK) >= ENTRIES_PER_TABLE,
    "the count must hold a full table"
);

/// A table descriptor pointing at `table`, which has `count` occupied entries.
#[inline(always)]
pub(super) const fn table_descriptor(table: PhysAddr, count: usize) -> Descriptor {
    with_occupancy(Descriptor::table(table), count)
}

/// The occupancy count of the table that the table descriptor `d` points at.
#[inline(always)]
pub(super) const fn occupancy(d: Descriptor) -> usize {
    if ONE_FIELD {
        ((d.bits() & OCCUPANCY_MASK) >> OCCUPANCY_SHIFT) as usize
    } else {
        occupancy_in(OCCUPANCY_MASK, d.bits())
    }
}

/// The table descriptor `d` with `n` more occupied entries in its table (a map filled them).
#[inline(always)]
pub(super) const fn plus_occupants(d: Descriptor, n: usize) -> Descriptor {
    debug_assert!(occupancy(d) + n <= ENTRIES_PER_TABLE);
    if ONE_FIELD {
        // The count is the top field of the low bits and cannot overflow: add in place.
        Descriptor::from_bits(d.bits() + ((n as u64) << OCCUPANCY_SHIFT))
    } else {
        with_occupancy(d, occupancy(d) + n)
    }
}

/// The table descriptor `d` with `n` fewer occupied entries in its table (an unmap vacated
/// them).
#[inline(always)]
pub(super) const fn minus_occupants(d: Descriptor, n: usize) -> Descriptor {
    debug_assert!(n <= occupancy(d));
    if ONE_FIELD {
        Descriptor::from_bits(d.bits() - ((n as u64) << OCCUPANCY_SHIFT))
    } else {
        with_occupancy(d, occupancy(d) - n)
    }
}

/// The table descriptor `d` with the count `count`.
#[inline(always)]
pub(super) const fn with_occupancy(d: Descriptor, count: usize) -> Descriptor {
    debug_assert!(count <= ENTRIES_PER_TABLE);
    if ONE_FIELD {
        Descriptor::from_bits((d.bits() & !OCCUPANCY_MASK) | ((count as u64) << OCCUPANCY_SHIFT))
    } else {
        Descriptor::from_bits(with_occupancy_in(OCCUPANCY_MASK, d.bits(), count))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::DescriptorKind;

    /// The bits the walker ignores in a stage-1 table descriptor of `format` (Arm ARM D8.3.1):
    /// `[11:2]` (less `[9:8]`, `OA[51:50]`, with `DS`) and `[58:52]`.
    fn ignored_table_bits(format: Format) -> u64 {
        let low = if format.ds() { LOW_FIELD & !DS_ADDRESS_BITS } else { LOW_FIELD };
        low | 0x7f << 52
    }

    /// Table addresses of `format` that exercise every address bit it has, and none.
    fn table_addresses(format: Format) -> [PhysAddr; 4] {
        let top = (1u64 << format.pa_bits()) - format.granule.size();
        [
            PhysAddr(0),
            PhysAddr(top),
            PhysAddr(format.granule.size()),
            PhysAddr(top & 0x5555_5555_5555_5555 & !(format.granule.size() - 1)),
        ]
    }

    /// For every format and every count a table can have: the count fits, round-trips, stays in
    /// ignored bits clear of the staging marks, and leaves the address and the type as they were.
    #[test]
    fn every_format_keeps_every_count_in_ignored_bits() {
        let marks =
            super::super::bbm::MARK_MAKE | super::super::bbm::MARK_UNMAP | super::super::bbm::MARK_DETACH;
        for format in Format::ALL {
            let mask = occupancy_mask(format);
            let name = format.name();
            assert_eq!(mask & !ignored_table_bits(format), 0, "{name}: the count leaves the ignored bits");
            assert_eq!(mask & marks, 0, "{name}: the count overlaps the staging marks");
            assert_eq!(mask & format.oa_field_mask(format.granule.shift()), 0, "{name}");
            assert_eq!(occupancy_in(mask, mask), (1 << mask.count_ones()) - 1, "{name}");
            assert!(
                occupancy_in(mask, mask) >= format.granule.entries(),
                "{name}: a full table does not fit"
            );
            for pa in table_addresses(format) {
                let plain = Descriptor::table_in(format, pa).unwrap().bits();
                for count in 0..=format.granule.entries() {
                    for base in [plain, plain | marks, plain | mask] {
                        let bits = with_occupancy_in(mask, base, count);
                        assert_eq!(occupancy_in(mask, bits), count, "{name} {pa:?} {count}");
                        assert_eq!(bits & !mask, base & !mask, "{name}: other bits changed");
                        let d = Descriptor::from_bits(bits);
                        assert_eq!(d.kind_in(format, 2), DescriptorKind::Table, "{name}");
                        assert_eq!(d.output_address_in(format, 2), pa, "{name} {count}");
                    }
                }
            }
        }
    }

    /// The build's fast forms (one field with 4 KiB pages: a shift and an add in place) equal
    /// the general layout for every count and every change of it.
    #[test]
    fn build_forms_equal_the_general_layout() {
        assert_eq!(OCCUPANCY_MASK, occupancy_mask(Format::BUILD));
        if Format::BUILD == Format::K4 {
            assert!(std::hint::black_box(ONE_FIELD), "the 4 KiB count is one field");
            assert_eq!(OCCUPANCY_MASK, 0x3ff << 2, "the 4 KiB layout is [11:2]");
        }
        let d0 = Descriptor::table(PhysAddr(0x8_1234_0000 & !(crate::addr::PAGE_SIZE - 1)));
        let n = ENTRIES_PER_TABLE;
        for count in 0..=n {
            let d = with_occupancy(d0, count);
            assert_eq!(d.bits(), with_occupancy_in(OCCUPANCY_MASK, d0.bits(), count));
            assert_eq!(occupancy(d), count);
            assert_eq!(table_descriptor(d0.output_address(), count), d);
            for step in [1, 3, 17, n / 2] {
                if count + step <= n {
                    assert_eq!(plus_occupants(d, step), with_occupancy(d0, count + step), "{count}+{step}");
                }
                if step <= count {
                    assert_eq!(minus_occupants(d, step), with_occupancy(d0, count - step), "{count}-{step}");
                }
            }
        }
    }
}
