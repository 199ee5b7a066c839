//! A table's mappings as text, one line per run: what `{:?}` of a [`PageTable`] prints after
//! its fields, and what [`PageTable::mappings`] displays on its own (for golden tests: the text
//! depends only on the mappings, not on where the allocator put the table frames).
//!
//! A run is a sequence of leaves that continue each other: consecutive virtual and physical
//! addresses, the same level, the same attributes and the same contiguous hint. So a mapping
//! made by one `map` call is one line (or a few, where the engine chose blocks for the aligned
//! middle), and a change of attributes in the middle of it shows as a split:
//!
//! ```text
//! [0x400000, 0x410000) -> 0x80000000: 16 x 4 KiB (level 3) contiguous, normal-wb, el1 r--, el0 r-x, nG
//! [0x410000, 0x600000) -> 0x80010000: 496 x 4 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG
//! [0x600000, 0xa00000) -> 0x80200000: 2 x 2 MiB (level 2), normal-wb, el1 rw-, el0 rw-, nG
//! ```
//!
//! Each line: the virtual range, the physical address of its first byte, the leaves (count, size
//! and level; `contiguous` when the hint is set), then the attributes decoded as the architecture
//! reads them: memory type, the effective permissions at EL1 and EL0 (`Attributes::permissions`),
//! global or not (`nG`), and `no-AF` when the Access flag is clear.
use core::fmt;

use super::{Leaf, PageTable, Translation};
use crate::descriptor::{MemoryType, Rwx};

/// The mappings of a table, displayed one run per line ([`PageTable::mappings`]).
pub struct Mappings<'a, T: Translation>(&'a PageTable<T>);

impl<T: Translation> PageTable<T> {
    /// The table's mappings, for `{}` (one line per run of leaves; see [`Mappings`]).
    pub fn mappings(&self) -> Mappings<'_, T> {
        Mappings(self)
    }
}

/// Leaves that continue each other, being gathered.
struct Run {
    first: Leaf,
    count: u64,
}

impl Run {
    fn extends(&self, leaf: &Leaf) -> bool {
        let next = self.count * self.first.size;
        leaf.level == self.first.level
            && leaf.attrs == self.first.attrs
            && leaf.contiguous == self.first.contiguous
            && leaf.va.0 == self.first.va.0.wrapping_add(next)
            && leaf.pa.0 == self.first.pa.0.wrapping_add(next)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.first;
        let end = l.va.0.wrapping_add(self.count * l.size);
        write!(f, "[{:#x}, {:#x}) -> {:#x}: {} x ", l.va.0, end, l.pa.0, self.count)?;
        size(f, l.size)?;
        write!(f, " (level {})", l.level)?;
        if l.contiguous {
            f.write_str(" contiguous")?;
        }
        let memory = match l.attrs.memory_type() {
            MemoryType::NormalWriteBack => "normal-wb",
            MemoryType::NormalNonCacheable => "normal-nc",
            MemoryType::DeviceNGnRE => "device-nGnRE",
            MemoryType::DeviceNGnRnE => "device-nGnRnE",
        };
        let p = l.attrs.permissions();
        write!(f, ", {memory}, el1 ")?;
        rwx(f, p.el1)?;
        f.write_str(", el0 ")?;
        rwx(f, p.el0)?;
        f.write_str(if l.attrs.is_global() { ", global" } else { ", nG" })?;
        if !l.attrs.accessed() {
            f.write_str(", no-AF")?;
        }
        f.write_str("\n")
    }
}

fn size(f: &mut fmt::Formatter<'_>, bytes: u64) -> fmt::Result {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => write!(f, "{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => write!(f, "{} MiB", b >> 20),
        b => write!(f, "{} KiB", b >> 10),
    }
}

fn rwx(f: &mut fmt::Formatter<'_>, p: Rwx) -> fmt::Result {
    let c = |on: bool, c: char| if on { c } else { '-' };
    write!(f, "{}{}{}", c(p.read, 'r'), c(p.write, 'w'), c(p.execute, 'x'))
}

impl<T: Translation> fmt::Display for Mappings<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut run: Option<Run> = None;
        let mut result = Ok(());
        self.0.walk_all(|leaf| match &mut run {
            Some(r) if r.extends(leaf) => r.count += 1,
            _ => {
                if let Some(done) = run.replace(Run { first: *leaf, count: 1 }) {
                    result = result.and_then(|()| done.write(f));
                }
            }
        });
        result?;
        match run {
            Some(last) => last.write(f),
            None => f.write_str("(no mappings)\n"),
        }
    }
}

impl<T: Translation> fmt::Debug for Mappings<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use core::ptr::NonNull;
    use std::boxed::Box;
    use std::format;
    use std::string::ToString;

    use super::super::{AlignedTable, Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};
    use crate::addr::{PhysAddr, VirtAddr};
    use crate::descriptor::{Attributes, UserAccess};

    /// Frames from the heap; the "physical address" is the pointer.
    struct Heap;
    // SAFETY: frames are page-aligned, exclusively owned allocations, valid until deallocated.
    unsafe impl Translation for Heap {
        fn allocate_table(&mut self) -> Option<PhysAddr> {
            Some(PhysAddr(Box::into_raw(Box::new(AlignedTable([0; ENTRIES_PER_TABLE]))) as u64))
        }
        fn deallocate_table(&mut self, pa: PhysAddr) {
            // SAFETY: `pa` came from `allocate_table` and is freed once.
            drop(unsafe { Box::from_raw(pa.0 as *mut AlignedTable) });
        }
        fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
            NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).expect("a heap pointer")
        }
    }

    #[test]
    #[cfg_attr(
        any(feature = "granule-16k", feature = "granule-64k"),
        ignore = "expects the 4 KiB granule's numbers"
    )]
    fn the_listing_shows_each_run_of_mappings_once_and_splits_where_attributes_change() {
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        assert_eq!(pt.mappings().to_string(), "(no mappings)\n");
        let user = |a| Attributes::user(a);
        let text = user(UserAccess::ReadExecute);
        pt.map(VirtAddr(0x40_0000), PhysAddr(0x8000_0000), 16 << 12, text, Constraints::NONE).unwrap();
        // Read-write data right after it, physically contiguous too: a new run (new attributes).
        let data = user(UserAccess::ReadWrite);
        pt.map(VirtAddr(0x41_0000), PhysAddr(0x8001_0000), 0x1f_0000, data, Constraints::NONE).unwrap();
        // 4 MiB, 2 MiB aligned on both sides: blocks, one run of two.
        pt.map(VirtAddr(0x60_0000), PhysAddr(0x8020_0000), 4 << 20, data, Constraints::NONE).unwrap();
        // A kernel-style global device page far above.
        let device = Attributes::device();
        pt.map(VirtAddr(0x1_0000_0000), PhysAddr(0x0900_0000), 4096, device, Constraints::NONE).unwrap();
        let golden = "\
[0x400000, 0x410000) -> 0x80000000: 16 x 4 KiB (level 3) contiguous, normal-wb, el1 r--, el0 r-x, nG
[0x410000, 0x600000) -> 0x80010000: 496 x 4 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG
[0x600000, 0xa00000) -> 0x80200000: 2 x 2 MiB (level 2), normal-wb, el1 rw-, el0 rw-, nG
[0x100000000, 0x100001000) -> 0x9000000: 1 x 4 KiB (level 3), device-nGnRE, el1 rw-, el0 ---, global
";
        assert_eq!(pt.mappings().to_string(), golden);
        // Debug of the table: its fields, then the same listing.
        let debug = format!("{pt:?}");
        assert!(debug.starts_with("PageTable { root: "), "{debug}");
        assert!(debug.ends_with(golden), "{debug}");
        // Unmapping one page of the data run splits it: the rest of its 64 KiB group loses the
        // contiguous hint (a run of its own), the groups on either side keep theirs.
        pt.unmap(VirtAddr(0x50_0000), 4096).unwrap().release(pt.translation_mut());
        let after = pt.mappings().to_string();
        let data_lines: std::vec::Vec<&str> = after.lines().skip(1).take(3).collect();
        assert_eq!(
            data_lines,
            [
                "[0x410000, 0x500000) -> 0x80010000: 240 x 4 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG",
                "[0x501000, 0x510000) -> 0x80101000: 15 x 4 KiB (level 3), normal-wb, el1 rw-, el0 rw-, nG",
                "[0x510000, 0x600000) -> 0x80110000: 240 x 4 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG",
            ],
            "{after}"
        );
    }
}
