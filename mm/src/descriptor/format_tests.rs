//! Descriptors of every translation format: output-address round trips at each leaf level and
//! for tables, which levels hold blocks, what the constructors refuse, and that the build's
//! format gives exactly the plain constructors' encodings.

use super::*;
use crate::addr::PAGE_SIZE;
use crate::granule::Format;
use crate::test_support::{all_attributes, per_lpa2, values};

const MIB: u64 = 1 << 20;

#[test]
fn build_format_is_the_plain_encoding() {
    let f = Format::BUILD;
    for x in values(3000) {
        // A page address of the build's width: 48 bits, 52 with LPA2.
        let pa = PhysAddr(x & ((1 << per_lpa2(48, 52)) - 1) & !(PAGE_SIZE - 1));
        assert_eq!(Descriptor::table_in(f, pa), Some(Descriptor::table(pa)));
        for attrs in all_attributes() {
            for level in 1..=3u32 {
                let aligned = PhysAddr(pa.0 & !(level_size(level) - 1));
                for contiguous in [false, true] {
                    let got = Descriptor::leaf_in(f, level as i32, aligned, attrs, contiguous);
                    if !f.leaf_allowed(level as i32) {
                        assert_eq!(got, None, "no block at level {level} with {}", f.name());
                        // The plain encoding of a block there reads as reserved.
                        let block = Descriptor::leaf(level, aligned, attrs, false);
                        assert_eq!(block.kind(level), DescriptorKind::Reserved);
                        assert_eq!(block.kind_in(f, level as i32), DescriptorKind::Reserved);
                        continue;
                    }
                    if contiguous && level == 1 {
                        assert_eq!(got, None, "mm builds no contiguous level-1 runs");
                        continue;
                    }
                    let want = Descriptor::leaf(level, aligned, attrs, contiguous);
                    assert_eq!(got, Some(want));
                    assert_eq!(want.kind_in(f, level as i32), want.kind(level));
                    assert_eq!(want.output_address_in(f, level as i32), want.output_address());
                    // Both views read back the attributes written, but with LPA2's `DS` the
                    // descriptor has no SH field [9:8]: the format's view reads it as 0, the
                    // plain one puts back the shareability of the memory type.
                    assert_eq!(want.attributes(), attrs);
                    assert_eq!(want.attributes_in(f).bits(), attrs.bits() & !per_lpa2(0, 0b11 << 8));
                }
            }
            let block_base = PhysAddr(pa.0 & !(crate::addr::BLOCK_2M - 1));
            let block = Descriptor::block_2m(block_base, attrs);
            assert_eq!(Descriptor::leaf_in(f, 2, block_base, attrs, false), Some(block));
        }
    }
    // The build's numbers, written out per granule and address width (the `lpa2` feature: with
    // `DS` a page's output address is bits [49:page shift] and, for OA[51:50], bits [9:8]).
    use crate::granule::Granule::{K4, K16, K64};
    let (mask, run, sizes) = match (f.granule, cfg!(feature = "lpa2")) {
        (K4, false) => (0x0000_ffff_ffff_f000, 16, [512 << 30, 1 << 30, 2 * MIB, 4096]),
        (K4, true) => (0x0003_ffff_ffff_f300, 16, [512 << 30, 1 << 30, 2 * MIB, 4096]),
        (K16, false) => (0x0000_ffff_ffff_c000, 128, [128 << 40, 64 << 30, 32 * MIB, 16384]),
        (K16, true) => (0x0003_ffff_ffff_c300, 128, [128 << 40, 64 << 30, 32 * MIB, 16384]),
        (K64, _) => (0x0000_ffff_ffff_0000, 32, [1 << 55, 4 << 40, 512 * MIB, 65536]),
    };
    assert_eq!(OUTPUT_ADDRESS_MASK, mask);
    assert_eq!(CONTIGUOUS_ENTRIES, run);
    assert_eq!([0, 1, 2, 3].map(level_size), sizes);
}

/// Which levels hold a block (bits `[1:0]` = 0b01), per format, written out from the Arm ARM's
/// tables of lookup levels; level 3 never does (0b01 is reserved there).
#[test]
fn early_constructors_are_the_builds_leaf_encoding() {
    // `Descriptor::page` and `Descriptor::block_2m` build the early map (MMU off, no level
    // check) and must be bit for bit what the general constructor makes in the build's format:
    // with LPA2's `DS` no SH field in [9:8] (those bits are OA[51:50]) and the address up to
    // bit 51. Addresses across the build's whole PA range, so a 52-bit build meets [51:50].
    let f = Format::BUILD;
    for x in values(3000) {
        let pa = x & ((1 << f.pa_bits()) - 1);
        for attrs in all_attributes() {
            let page = PhysAddr(pa & !(level_size(3) - 1));
            let want = Descriptor::leaf_in(f, 3, page, attrs, false).expect("a page is always allowed");
            assert_eq!(Descriptor::page(page, attrs), want, "page {:#x} in {}", page.0, f.name());
            assert_eq!(Descriptor::page(page, attrs).output_address_in(f, 3), page);
            let block = PhysAddr(pa & !(crate::addr::BLOCK_2M - 1));
            if let Some(want) = Descriptor::leaf_in(f, 2, block, attrs, false) {
                assert_eq!(Descriptor::block_2m(block, attrs), want, "block {:#x} in {}", block.0, f.name());
            }
        }
    }
}

#[test]
fn block_levels_per_format() {
    let rows: [(Format, [bool; 3]); 6] = [
        (Format::K4, [false, true, true]),
        (Format::K4_LPA2, [true, true, true]),
        (Format::K16, [false, false, true]),
        (Format::K16_LPA2, [false, true, true]),
        (Format::K64, [false, false, true]),
        (Format::K64_52, [false, true, true]),
    ];
    let block = Descriptor::from_bits(0b01);
    let table = Descriptor::from_bits(0b11);
    for (f, blocks) in rows {
        for level in 0..3 {
            let want = if blocks[level as usize] { DescriptorKind::Block } else { DescriptorKind::Reserved };
            assert_eq!(block.kind_in(f, level), want, "{} level {level}", f.name());
            assert_eq!(table.kind_in(f, level), DescriptorKind::Table);
            let leaf = Descriptor::leaf_in(f, level, PhysAddr(0), Attributes::kernel_data(), false);
            assert_eq!(leaf.is_some(), blocks[level as usize], "{} level {level}", f.name());
        }
        assert_eq!(block.kind_in(f, 3), DescriptorKind::Reserved);
        assert_eq!(table.kind_in(f, 3), DescriptorKind::Page);
        assert_eq!(Descriptor::INVALID.kind_in(f, 2), DescriptorKind::Invalid);
    }
    // The 4 KiB level-0 block of LPA2 maps 512 GiB, the 16 KiB level-1 block 64 GiB, the 64 KiB
    // level-1 block 4 TiB.
    let d = Descriptor::leaf_in(Format::K4_LPA2, 0, PhysAddr(3 << 39), Attributes::kernel_data(), false);
    assert_eq!(d.unwrap().output_address_in(Format::K4_LPA2, 0), PhysAddr(3 << 39));
    assert!(
        Descriptor::leaf_in(Format::K4_LPA2, 0, PhysAddr(1 << 38), Attributes::kernel_data(), false)
            .is_none()
    );
    assert!(
        Descriptor::leaf_in(Format::K16_LPA2, 1, PhysAddr(1 << 36), Attributes::kernel_data(), false)
            .is_some()
    );
    assert!(
        Descriptor::leaf_in(Format::K16_LPA2, 1, PhysAddr(1 << 35), Attributes::kernel_data(), false)
            .is_none()
    );
    assert!(
        Descriptor::leaf_in(Format::K64_52, 1, PhysAddr(1 << 42), Attributes::kernel_data(), false).is_some()
    );
}

#[test]
fn output_addresses_round_trip_in_every_format() {
    for f in Format::ALL {
        let top = 1u64 << f.pa_bits();
        for level in f.start_level()..=3 {
            let shift = f.granule.level_shift(level);
            for x in values(500) {
                let pa = PhysAddr(x & (top - 1) & !((1 << shift) - 1));
                if f.leaf_allowed(level) {
                    for attrs in all_attributes() {
                        let contiguous = f.granule.contiguous_entries(level).is_some() && x & 1 == 1;
                        let d = Descriptor::leaf_in(f, level, pa, attrs, contiguous).unwrap();
                        assert!(d.is_valid());
                        assert_eq!(d.output_address_in(f, level), pa, "{} level {level} {pa:?}", f.name());
                        assert_eq!(d.is_contiguous(), contiguous);
                        let want = if f.ds() { attrs.bits() & !SH_MASK } else { attrs.bits() };
                        assert_eq!(d.attributes_in(f).bits(), want, "{}", f.name());
                        // Changing the attributes keeps the address (with DS: bits [9:8] too).
                        let other = Attributes::user(UserAccess::ReadOnly);
                        let d2 = d.with_attributes_in(f, other);
                        assert_eq!(d2.output_address_in(f, level), pa, "{} {pa:?}", f.name());
                        assert_eq!(d2.kind_in(f, level), d.kind_in(f, level));
                    }
                }
                if level < 3 {
                    let table = PhysAddr(x & (top - 1) & !(f.granule.size() - 1));
                    let d = Descriptor::table_in(f, table).unwrap();
                    assert_eq!(d.kind_in(f, level), DescriptorKind::Table);
                    assert_eq!(d.output_address_in(f, level), table, "{} table {table:?}", f.name());
                }
            }
        }
    }
}

#[test]
fn fifty_two_bit_addresses_sit_where_the_architecture_puts_them() {
    let attrs = Attributes::kernel_data();
    // 4 KiB with DS: OA[51:50] in [9:8], OA[49:12] in place; SH is not written.
    let pa = PhysAddr(0x000e_0000_0000_3000); // bits 51, 50, 49, 13, 12
    let d = Descriptor::leaf_in(Format::K4_LPA2, 3, pa, attrs, false).unwrap();
    assert_eq!(d.bits() & (0b11 << 8), 0b11 << 8);
    assert_eq!(d.bits() & 0x0003_ffff_ffff_f000, 0x0002_0000_0000_3000);
    assert_eq!(
        Descriptor::leaf_in(Format::K4_LPA2, 3, PhysAddr(0x3000), attrs, false).unwrap().bits() & (0b11 << 8),
        0
    );
    // 16 KiB with DS: the same high bits.
    let pa = PhysAddr(0x0004_0000_0000_4000); // bit 50, bit 14
    let d = Descriptor::leaf_in(Format::K16_LPA2, 3, pa, attrs, false).unwrap();
    assert_eq!(d.bits() & (0b11 << 8), 0b01 << 8);
    // 64 KiB with 52 bits: OA[51:48] in [15:12]; SH stays (no DS).
    let pa = PhysAddr(0x000a_0000_0001_0000); // bits 51, 49, 16
    let d = Descriptor::leaf_in(Format::K64_52, 3, pa, attrs, false).unwrap();
    assert_eq!(d.bits() & (0xf << 12), 0xa << 12);
    assert_eq!(d.bits() & SH_MASK, attrs.bits() & SH_MASK);
    // Tables likewise.
    let t = Descriptor::table_in(Format::K64_52, PhysAddr(0x000f_0000_0000_0000)).unwrap();
    assert_eq!(t.bits(), 0xf << 12 | 0b11);
}

#[test]
fn what_a_format_cannot_express_is_refused() {
    let attrs = Attributes::kernel_data();
    for f in Format::ALL {
        let page = f.granule.size();
        // Beyond the output-address bits.
        assert_eq!(Descriptor::leaf_in(f, 3, PhysAddr(1 << f.pa_bits()), attrs, false), None, "{}", f.name());
        assert_eq!(Descriptor::table_in(f, PhysAddr(1 << f.pa_bits())), None);
        // Not aligned to the page, or to the block.
        assert_eq!(Descriptor::leaf_in(f, 3, PhysAddr(page / 2), attrs, false), None);
        assert_eq!(Descriptor::table_in(f, PhysAddr(page / 2)), None);
        assert_eq!(Descriptor::leaf_in(f, 2, PhysAddr(page), attrs, false), None);
        // No leaf above the top level's blocks, none at level -1.
        assert_eq!(Descriptor::leaf_in(f, -1, PhysAddr(0), attrs, false), None);
        // Contiguous only where mm builds runs (levels 2 and 3).
        assert!(Descriptor::leaf_in(f, 3, PhysAddr(0), attrs, true).is_some());
        assert!(Descriptor::leaf_in(f, 2, PhysAddr(0), attrs, true).is_some());
        assert_eq!(Descriptor::leaf_in(f, 1, PhysAddr(0), attrs, true), None);
    }
    // A 48-bit format refuses what a 52-bit one takes.
    let high = PhysAddr(1 << 50);
    assert!(Descriptor::leaf_in(Format::K16, 3, high, attrs, false).is_none());
    assert!(Descriptor::leaf_in(Format::K16_LPA2, 3, high, attrs, false).is_some());
}
