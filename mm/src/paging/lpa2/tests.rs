//! Host tests of FEAT_LPA2 as the build uses it: the CPU check, the level −1 table, and (in an
//! `lpa2` build) the tables the engine builds, read back by an independent walk that follows the
//! architecture's 52-bit rules from the TTBR down (level −1 with 4 KiB pages), with table frames
//! and output addresses above 2^50 so that every descriptor needs bits `[9:8]`.

use super::*;
use crate::granule::Format;

/// Every raw value of the two fields: only TGran4 = 0b0001 and TGran16 = 0b0010 mean 52 bits;
/// the other field and the other bits of the register do not matter.
#[test]
fn cpu_check_reads_the_raw_fields() {
    for v in 0..16u64 {
        let noise = !((0xf << 28) | (0xf << 20));
        assert_eq!(cpu_supports_lpa2(Format::K4_LPA2, v << 28), v == 0b0001, "TGran4 {v:#06b}");
        assert_eq!(cpu_supports_lpa2(Format::K4_LPA2, (v << 28) | noise), v == 0b0001);
        assert!(!cpu_supports_lpa2(Format::K4_LPA2, (v << 20) | (0b1111 << 28)));
        assert_eq!(cpu_supports_lpa2(Format::K16_LPA2, v << 20), v == 0b0010, "TGran16 {v:#06b}");
        assert_eq!(cpu_supports_lpa2(Format::K16_LPA2, (v << 20) | noise), v == 0b0010);
        assert!(!cpu_supports_lpa2(Format::K16_LPA2, v << 28));
        assert!(!cpu_supports_lpa2(Format::K64_52, u64::MAX));
    }
    // QEMU 7.2's -cpu max: TGran4 0b0001, TGran64 0b0000, TGran16 0b0010, PARange 0b0110.
    let qemu_max: u64 = (0b0001 << 28) | (0b0010 << 20) | 0b0110;
    assert!(cpu_supports_lpa2(Format::K4_LPA2, qemu_max));
    assert!(cpu_supports_lpa2(Format::K16_LPA2, qemu_max));
    // Cortex-A72: TGran4 0b0000, TGran64 0b0000, TGran16 0b0000 (no 16 KiB pages): 48 bits only.
    assert!(!cpu_supports_lpa2(Format::K4_LPA2, 0x1124));
    assert!(!cpu_supports_lpa2(Format::K16_LPA2, 0x1124));
    // A 16 KiB granule with 48 bits (TGran16 0b0001, as on Apple's M1) is not LPA2.
    assert!(!cpu_supports_lpa2(Format::K16_LPA2, 0b0001 << 20));
}

/// The level −1 index is `VA[51:48]`, and the entry is a table descriptor whose `OA[51:50]` sit
/// in bits `[9:8]`.
#[test]
fn level_minus_one_table() {
    assert_eq!(LEVEL_MINUS_ONE_ENTRIES, Format::K4_LPA2.top_entries());
    assert_eq!(level_minus_one_index(VirtAddr(0xffff_8000_0000_0000)), 15);
    assert_eq!(level_minus_one_index(VirtAddr(0xfff0_0000_0000_0000)), 0);
    assert_eq!(level_minus_one_index(VirtAddr(0x0001_0000_0000_0000)), 1);
    assert_eq!(level_minus_one_index(VirtAddr(0x0000_ffff_ffff_f000)), 0);
    assert_eq!(level_minus_one_index(VirtAddr(0x000e_ffff_ffff_f000)), 14);
    let d = level_minus_one_entry(PhysAddr((0b10 << 50) | 0x4000_1000)).unwrap();
    assert_eq!(d.bits(), 0x4000_1000 | (0b10 << 8) | 0b11);
    assert_eq!(d.output_address_in(Format::K4_LPA2, -1), PhysAddr((0b10 << 50) | 0x4000_1000));
    assert_eq!(level_minus_one_entry(PhysAddr(0x4000_1800)), None, "misaligned");
    assert_eq!(level_minus_one_entry(PhysAddr(1 << 52)), None, "beyond 52 bits");
}

/// The TCR values: DS is bit 59, T1SZ 12 for a 52-bit kernel half, T0SZ 16 unless the build's
/// tree is itself 52 bits wide (16 KiB pages with LPA2).
#[test]
fn tcr_fields() {
    assert_eq!(TCR_DS, 1 << 59);
    assert_eq!(T1SZ_52, 12);
    let user_tree_bits = if Format::BUILD == Format::K16_LPA2 { 52 } else { 48 };
    assert_eq!(T0SZ, 64 - user_tree_bits);
}

#[cfg(feature = "lpa2")]
mod build {
    //! The engine's tables in an `lpa2` build.

    use core::ptr::NonNull;
    use std::boxed::Box;
    use std::vec::Vec;

    use crate::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
    use crate::descriptor::{Attributes, Descriptor, DescriptorKind};
    use crate::granule::Format;
    use crate::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};

    use super::super::{LEVEL_MINUS_ONE_ENTRIES, level_minus_one_entry, level_minus_one_index};

    /// Table frames at physical addresses with `OA[51:50]` = 0b11, so that every table
    /// descriptor of the engine needs the LPA2 layout to be read back.
    const FRAME_BASE: u64 = 0b11 << 50;

    #[derive(Default)]
    struct Frames {
        pages: Vec<Box<AlignedTable>>,
        live: Vec<bool>,
    }

    impl Frames {
        fn index(&self, pa: PhysAddr) -> usize {
            let i = ((pa.0 - FRAME_BASE) / PAGE_SIZE) as usize;
            assert!(pa.0 >= FRAME_BASE && self.live[i], "not an allocated frame: {pa:?}");
            i
        }

        fn read(&self, table: PhysAddr, index: usize) -> Descriptor {
            Descriptor::from_bits(self.pages[self.index(table)].0[index])
        }

        fn live_frames(&self) -> usize {
            self.live.iter().filter(|&&l| l).count()
        }
    }

    // SAFETY: every frame is a boxed, page-aligned `AlignedTable` of its own, kept until the
    // `Frames` is dropped, at a distinct fake physical address below 2^52.
    unsafe impl Translation for Frames {
        fn allocate_table(&mut self) -> Option<PhysAddr> {
            let i = self.live.iter().position(|&l| !l).unwrap_or_else(|| {
                self.pages.push(Box::new(AlignedTable([0; ENTRIES_PER_TABLE])));
                self.live.push(false);
                self.live.len() - 1
            });
            self.live[i] = true;
            Some(PhysAddr(FRAME_BASE + i as u64 * PAGE_SIZE))
        }

        fn deallocate_table(&mut self, pa: PhysAddr) {
            let i = self.index(pa);
            self.live[i] = false;
        }

        fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
            let i = self.index(pa);
            NonNull::from(&self.pages[i].0)
        }
    }

    /// A leaf found by [`walk52`]: its level, descriptor and the address `va` translates to.
    #[derive(Debug, PartialEq, Eq)]
    struct Found {
        level: i32,
        descriptor: Descriptor,
        pa: PhysAddr,
    }

    /// The architecture's walk for a TTBR1 address of the build's 52-bit format (Arm ARM
    /// D8.2: start level from `T1SZ` = 12, the index of every level from the VA, descriptors read
    /// with the format's rules), from `level_minus_one` with 4 KiB pages (its entry for `va`
    /// found in `tops`, the only level −1 table the tests build) or from `root` with 16 KiB.
    fn walk52(frames: &Frames, root: PhysAddr, level_minus_one: &[Descriptor], va: u64) -> Option<Found> {
        let f = Format::BUILD;
        let (mut level, mut table) = if f.start_level() == -1 {
            let d = level_minus_one[f.table_index(va, -1)];
            if d.kind_in(f, -1) != DescriptorKind::Table {
                return None;
            }
            assert_eq!(d.output_address_in(f, -1), root, "the level -1 entry names the tree");
            (0, root)
        } else {
            (f.start_level(), root)
        };
        loop {
            let d = frames.read(table, f.table_index(va, level));
            match d.kind_in(f, level) {
                DescriptorKind::Table => (table, level) = (d.output_address_in(f, level), level + 1),
                DescriptorKind::Block | DescriptorKind::Page => {
                    let offset = va & (f.entry_span(level) - 1);
                    let pa = PhysAddr(d.output_address_in(f, level).0 + offset);
                    return Some(Found { level, descriptor: d, pa });
                }
                _ => return None,
            }
        }
    }

    /// The level −1 table of a kernel half with 4 KiB pages: the tree in its last entry.
    fn kernel_level_minus_one(root: PhysAddr) -> [Descriptor; LEVEL_MINUS_ONE_ENTRIES] {
        let mut t = [Descriptor::INVALID; LEVEL_MINUS_ONE_ENTRIES];
        t[level_minus_one_index(VaRange::Upper.base())] = level_minus_one_entry(root).unwrap();
        t
    }

    /// Every attribute set the crate builds reads back equal from a descriptor of the build, the
    /// address bits `[51:50]` sit in `[9:8]` and the SH field is not written.
    #[test]
    fn descriptors_keep_high_address_bits_and_attributes() {
        for a in crate::test_support::all_attributes() {
            for high in 0..4u64 {
                let pa = PhysAddr((high << 50) | (0x1234 * BLOCK_2M));
                for (level, d) in [(3, Descriptor::leaf(3, pa, a, false)), (2, Descriptor::block_2m(pa, a))] {
                    assert_eq!((d.bits() >> 8) & 0b11, high, "{a:?} at level {level}");
                    assert_eq!(d.output_address(), pa);
                    assert_eq!(d.attributes(), a);
                    let other = Attributes::kernel_rodata();
                    assert_eq!(
                        d.with_attributes(other).output_address(),
                        pa,
                        "with_attributes keeps OA[51:50]"
                    );
                    assert_eq!(d.with_attributes(other).attributes(), other);
                }
                let t = Descriptor::table(pa);
                assert_eq!(t.output_address(), pa);
                assert_eq!(t.bits(), (0x1234 * BLOCK_2M) | (high << 8) | 0b11);
            }
        }
    }

    /// Pages, level-2 blocks and the level-1 blocks of the format mapped at kernel addresses to
    /// physical addresses above 2^50, in tables above 2^50: the engine's `query` and the
    /// architecture's walk from the TTBR agree on every leaf, and an unmap takes them all away.
    #[test]
    fn kernel_half_walks_from_the_ttbr() {
        let f = Format::BUILD;
        let mut pt = PageTable::new(Frames::default(), VaRange::Upper).unwrap();
        let root = pt.root_pa();
        let level_minus_one = kernel_level_minus_one(root);
        let base = 0xffff_8000_0000_0000u64;
        let level1 = f.block_size(1);
        let mut cases = std::vec![
            // A page run and a lone page, PA[51:50] = 0b11.
            (base, (0b11 << 50) | 0x40_0000, 16 * PAGE_SIZE, 3),
            (base + 64 * PAGE_SIZE, (0b01 << 50) | 0x4000_0000, PAGE_SIZE, 3),
            // Two level-2 blocks.
            (base + 4 * BLOCK_2M, (0b10 << 50) | (6 * BLOCK_2M), 2 * BLOCK_2M, 2),
        ];
        if let Some(size) = level1 {
            cases.push((base + 16 * size, (0b11 << 50) | (5 * size), size, 1));
        }
        for &(va, pa, size, _) in &cases {
            pt.map(VirtAddr(va), PhysAddr(pa), size, Attributes::kernel_data(), Constraints::default())
                .unwrap();
        }
        for &(va, pa, size, level) in &cases {
            for off in [0, PAGE_SIZE, size - PAGE_SIZE, size / 2 + 8].into_iter().filter(|&o| o < size) {
                let found = walk52(pt.translation(), root, &level_minus_one, va + off);
                let found = found.unwrap_or_else(|| panic!("{:#x} unmapped", va + off));
                assert_eq!((found.level, found.pa), (level, PhysAddr(pa + off)), "walk of {:#x}", va + off);
                assert_eq!((found.descriptor.bits() >> 8) & 0b11, pa >> 50, "OA[51:50] in [9:8]");
                let leaf = pt.query(VirtAddr(va + off)).unwrap();
                assert_eq!(leaf.translate(VirtAddr(va + off)), PhysAddr(pa + off));
                assert_eq!((leaf.level as i32, leaf.attrs), (level, Attributes::kernel_data()));
            }
        }
        // Nothing else: the next pages and the other level −1 slots translate nothing.
        assert_eq!(walk52(pt.translation(), root, &level_minus_one, base + 16 * PAGE_SIZE), None);
        assert_eq!(walk52(pt.translation(), root, &level_minus_one, 0xfff0_0000_0000_0000), None);
        for &(va, _, size, _) in &cases {
            pt.unmap(VirtAddr(va), size).unwrap().release(pt.translation_mut());
        }
        for &(va, _, _, _) in &cases {
            assert_eq!(walk52(pt.translation(), root, &level_minus_one, va), None);
        }
        assert_eq!(pt.translation().live_frames(), 1, "only the root is left");
    }

    /// Pseudo-random pages over the whole tree (4 KiB pages: the 48-bit kernel tree; 16 KiB: the
    /// 52-bit one, down to `0xfff0_0000_0000_0000`), each to a pseudo-random 52-bit address: the
    /// walk from the TTBR finds each one where it was put.
    #[test]
    fn random_pages_walk_back() {
        let f = Format::BUILD;
        let mut pt = PageTable::new(Frames::default(), VaRange::Upper).unwrap();
        let root = pt.root_pa();
        let level_minus_one = kernel_level_minus_one(root);
        let space = 1u64 << crate::addr::VA_BITS;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut mapped = Vec::new();
        while mapped.len() < 300 {
            let va = VaRange::Upper.base().0 + ((next() % space) & !(PAGE_SIZE - 1));
            let pa = next() & ((1 << 52) - 1) & !(PAGE_SIZE - 1);
            let a = if next() & 1 == 0 { Attributes::kernel_data() } else { Attributes::device() };
            if pt.map(VirtAddr(va), PhysAddr(pa), PAGE_SIZE, a, Constraints::default()).is_ok() {
                mapped.push((va, pa, a));
            }
        }
        for &(va, pa, a) in &mapped {
            let found = walk52(pt.translation(), root, &level_minus_one, va + 8).unwrap();
            assert_eq!((found.level, found.pa), (3, PhysAddr(pa + 8)), "{va:#x}");
            assert_eq!(found.descriptor.attributes(), a);
            assert_eq!(found.descriptor.bits() & (0b11 << 8), (pa >> 42) & (0b11 << 8));
            assert_eq!(f.decode_oa(found.descriptor.bits(), f.granule.shift()), pa);
        }
    }
}

/// The figure of docs/benchmark-notes.md ("TLBIs per range, LPA2 and 48-bit"): instructions per
/// flushed range with range ops (FEAT_TLBIRANGE), ours and Linux's
/// (`compare::linux_plan_count_in`), for the 4 KiB and 16 KiB granules with 48-bit addresses and
/// with LPA2, from a 2 MiB boundary and from 16 KiB past it (a whole page of either granule, off
/// the 64 KiB grid that `DS` puts range ops on). Printed with
/// `cargo test -p mm --lib tlbis_per_range_lpa2_and_48_bit -- --nocapture`; the numbers are
/// pinned here, so the table in the notes cannot drift from the code.
#[test]
fn tlbis_per_range_lpa2_and_48_bit() {
    use crate::tlb::{Scope, TlbFeatures, TlbRequest, compare, plan_in};
    use std::format;
    use std::string::String;
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let formats = [Format::K4, Format::K4_LPA2, Format::K16, Format::K16_LPA2];
    let base = 0x0000_0040_0000_0000u64;
    let rows: [(&str, u64, u64); 9] = [
        ("16 KiB", 0, 16 * KIB),
        ("64 KiB", 0, 64 * KIB),
        ("64 KiB", 16 * KIB, 64 * KIB),
        ("1 MiB", 16 * KIB, MIB),
        ("2 MiB", 0, 2 * MIB),
        ("2 MiB", 16 * KIB, 2 * MIB),
        ("2 MiB + 16 KiB", 16 * KIB, 2 * MIB + 16 * KIB),
        ("1 GiB", 0, GIB),
        ("1 GiB", 16 * KIB, GIB),
    ];
    // (ours, Linux) per format, in the order of `formats`, per row.
    let pinned: [[(u64, u64); 4]; 9] = [
        [(1, 1), (1, 1), (1, 1), (1, 1)],
        [(1, 1), (1, 1), (1, 1), (1, 1)],
        [(1, 1), (13, 13), (1, 1), (4, 4)],
        [(1, 1), (14, 14), (1, 1), (5, 5)],
        [(1, 1), (1, 1), (1, 1), (1, 1)],
        [(1, 1), (14, 14), (1, 1), (6, 6)],
        [(2, 2), (14, 14), (2, 2), (5, 5)],
        [(1, 1), (1, 1), (1, 1), (1, 1)],
        [(1, 1), (15, 16), (1, 1), (6, 7)],
    ];
    let mut table =
        String::from("| range | from | 4K | 4K-LPA2 | 16K | 16K-LPA2 |\n|---|---|---|---|---|---|\n");
    let mut got = [[(0, 0); 4]; 9];
    for (r, &(name, offset, size)) in rows.iter().enumerate() {
        let from =
            if offset == 0 { String::from("2 MiB boundary") } else { format!("+{} KiB", offset / KIB) };
        table += &format!("| {name} | {from} |");
        for (c, &f) in formats.iter().enumerate() {
            let start = base + offset;
            let req = TlbRequest::new(VirtAddr(start), VirtAddr(start + size), Scope::Asid(1));
            let ours = plan_in(f, &req, TlbFeatures { range: true, ..TlbFeatures::BASELINE }).len() as u64;
            let pages = size >> f.granule.shift();
            let linux = compare::linux_plan_count_in(f, VirtAddr(start), pages, 1, true);
            got[r][c] = (ours, linux);
            table += &format!(" {ours} ({linux}) |");
        }
        table += "\n";
    }
    std::println!("TLBIs per range with FEAT_TLBIRANGE, ours (Linux):\n{table}");
    assert_eq!(got, pinned, "\n{table}");
}
