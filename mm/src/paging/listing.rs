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
            MemoryType::NormalTagged => "normal-tagged",
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
        // (A leaf is never empty, so a multiple of a unit is at least one unit.)
        b if b % (1 << 30) == 0 => write!(f, "{} GiB", b >> 30),
        b if b % (1 << 20) == 0 => write!(f, "{} MiB", b >> 20),
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
    use std::format;
    use std::string::ToString;

    use super::super::{Constraints, PageTable, VaRange};
    use crate::addr::{BLOCK_2M, PAGE_SIZE};
    use crate::addr::{PhysAddr, VirtAddr};
    use crate::descriptor::CONTIGUOUS_ENTRIES;
    use crate::descriptor::{Attributes, UserAccess};
    use crate::test_support::{Heap, per_granule};

    /// The golden texts are pinned per granule (worked out by hand from the layout below): the
    /// text is one contiguous run (64 KiB with 4 KiB pages, 2 MiB with 16 and 64 KiB), the data
    /// the rest of that level-2 block, then two blocks (2, 32 or 512 MiB) and a device page.
    #[test]
    fn the_listing_shows_each_run_of_mappings_once_and_splits_where_attributes_change() {
        let (page, run, block) = (PAGE_SIZE, CONTIGUOUS_ENTRIES as u64 * PAGE_SIZE, BLOCK_2M);
        let base = 2 * block; // 0x40_0000 with 4 KiB pages
        let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
        assert_eq!(pt.mappings().to_string(), "(no mappings)\n");
        let user = |a| Attributes::user(a);
        let text = user(UserAccess::ReadExecute);
        pt.map(VirtAddr(base), PhysAddr(0x8000_0000), run, text, Constraints::NONE).unwrap();
        // Read-write data right after it, physically contiguous too: a new run (new attributes).
        let data = user(UserAccess::ReadWrite);
        pt.map(VirtAddr(base + run), PhysAddr(0x8000_0000 + run), block - run, data, Constraints::NONE)
            .unwrap();
        // Two blocks, aligned on both sides: one run of two.
        pt.map(VirtAddr(base + block), PhysAddr(0x8000_0000 + block), 2 * block, data, Constraints::NONE)
            .unwrap();
        // A kernel-style global device page far above.
        let device = Attributes::device();
        pt.map(VirtAddr(0x1_0000_0000), PhysAddr(0x0900_0000), page, device, Constraints::NONE).unwrap();
        let golden = per_granule(
            "\
[0x400000, 0x410000) -> 0x80000000: 16 x 4 KiB (level 3) contiguous, normal-wb, el1 r--, el0 r-x, nG
[0x410000, 0x600000) -> 0x80010000: 496 x 4 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG
[0x600000, 0xa00000) -> 0x80200000: 2 x 2 MiB (level 2), normal-wb, el1 rw-, el0 rw-, nG
[0x100000000, 0x100001000) -> 0x9000000: 1 x 4 KiB (level 3), device-nGnRE, el1 rw-, el0 ---, global
",
            "\
[0x4000000, 0x4200000) -> 0x80000000: 128 x 16 KiB (level 3) contiguous, normal-wb, el1 r--, el0 r-x, nG
[0x4200000, 0x6000000) -> 0x80200000: 1920 x 16 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG
[0x6000000, 0xa000000) -> 0x82000000: 2 x 32 MiB (level 2), normal-wb, el1 rw-, el0 rw-, nG
[0x100000000, 0x100004000) -> 0x9000000: 1 x 16 KiB (level 3), device-nGnRE, el1 rw-, el0 ---, global
",
            "\
[0x40000000, 0x40200000) -> 0x80000000: 32 x 64 KiB (level 3) contiguous, normal-wb, el1 r--, el0 r-x, nG
[0x40200000, 0x60000000) -> 0x80200000: 8160 x 64 KiB (level 3) contiguous, normal-wb, el1 rw-, el0 rw-, nG
[0x60000000, 0xa0000000) -> 0xa0000000: 2 x 512 MiB (level 2), normal-wb, el1 rw-, el0 rw-, nG
[0x100000000, 0x100010000) -> 0x9000000: 1 x 64 KiB (level 3), device-nGnRE, el1 rw-, el0 ---, global
",
        );
        assert_eq!(pt.mappings().to_string(), golden);
        // `{:?}` of the listing alone is the same text.
        assert_eq!(format!("{:?}", pt.mappings()), golden);
        // Debug of the table: its fields, then the same listing.
        let debug = format!("{pt:?}");
        assert!(debug.starts_with("PageTable { root: "), "{debug}");
        assert!(debug.ends_with(golden), "{debug}");
        // Unmapping one page in the middle of the data splits it: the rest of its contiguous run
        // loses the hint (a run of its own), the runs on either side keep theirs.
        pt.unmap(VirtAddr(base + block / 2), page).unwrap().release(pt.translation_mut());
        let after = pt.mappings().to_string();
        let data_lines: std::vec::Vec<&str> = after.lines().skip(1).take(3).collect();
        let rw = "normal-wb, el1 rw-, el0 rw-, nG";
        let want = per_granule(
            [
                "[0x410000, 0x500000) -> 0x80010000: 240 x 4 KiB (level 3) contiguous",
                "[0x501000, 0x510000) -> 0x80101000: 15 x 4 KiB (level 3)",
                "[0x510000, 0x600000) -> 0x80110000: 240 x 4 KiB (level 3) contiguous",
            ],
            [
                "[0x4200000, 0x5000000) -> 0x80200000: 896 x 16 KiB (level 3) contiguous",
                "[0x5004000, 0x5200000) -> 0x81004000: 127 x 16 KiB (level 3)",
                "[0x5200000, 0x6000000) -> 0x81200000: 896 x 16 KiB (level 3) contiguous",
            ],
            [
                "[0x40200000, 0x50000000) -> 0x80200000: 4064 x 64 KiB (level 3) contiguous",
                "[0x50010000, 0x50200000) -> 0x90010000: 31 x 64 KiB (level 3)",
                "[0x50200000, 0x60000000) -> 0x90200000: 4064 x 64 KiB (level 3) contiguous",
            ],
        );
        let want: std::vec::Vec<std::string::String> = want.iter().map(|l| format!("{l}, {rw}")).collect();
        assert_eq!(data_lines, want, "{after}");
    }

    /// A leaf size in the largest unit that divides it: GiB only for whole GiB (a 4 KiB
    /// granule's level-1 block, a 64 KiB granule's 16 GiB contiguous block run), MiB for whole
    /// MiB, else KiB. Only the 4 KiB build makes 1 GiB leaves, so the table tests reach the GiB
    /// case in that build alone; this pins every branch in every build.
    #[test]
    fn sizes_are_named_in_the_largest_unit_that_divides_them() {
        struct Size(u64);
        impl core::fmt::Display for Size {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                super::size(f, self.0)
            }
        }
        let cases = [
            (4 << 10, "4 KiB"),
            (64 << 10, "64 KiB"),
            (512 << 10, "512 KiB"),
            ((1 << 20) + (4 << 10), "1028 KiB"),
            (1 << 20, "1 MiB"),
            (2 << 20, "2 MiB"),
            (3 << 20, "3 MiB"),
            (512 << 20, "512 MiB"),
            (1536 << 20, "1536 MiB"),
            ((1 << 30) + (4 << 10), "1048580 KiB"),
            (1 << 30, "1 GiB"),
            (16 << 30, "16 GiB"),
            (3 << 30, "3 GiB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(Size(bytes).to_string(), want, "{bytes:#x}");
        }
    }
}
