//! The descriptors of the build's format: `MAIR_EL1`'s attribute indices, the bits of each
//! constructor (and its security rules: nothing EL0-writable is EL1-executable), the
//! classification of table, block, page and reserved encodings, the early-boot block encoding,
//! the changes allowed in place, and the level sizes.

use super::*;
use crate::addr::{BLOCK_2M, PAGE_SIZE};
use crate::test_support::{per_granule, per_lpa2};

#[test]
fn mair_value() {
    assert_eq!(MAIR_EL1_VALUE, 0x0000_00ff_0004_44ff);
    for (i, m) in [
        MemoryType::NormalWriteBack,
        MemoryType::NormalNonCacheable,
        MemoryType::DeviceNGnRE,
        MemoryType::DeviceNGnRnE,
        MemoryType::NormalTagged,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(m as usize, i);
        assert_eq!(MemoryType::from_index(i as u64), Some(m));
        let byte = (MAIR_EL1_VALUE >> (8 * i)) & 0xff;
        assert_eq!(byte, [0xff, 0x44, 0x04, 0x00, 0xff][i]);
        // With FEAT_MTE2 only index 4 changes, to Normal Tagged (Linux's MAIR_ATTR_NORMAL_TAGGED).
        let tagged = (mair_el1_value(true) >> (8 * i)) & 0xff;
        assert_eq!(tagged, [0xff, 0x44, 0x04, 0x00, 0xf0][i]);
    }
    assert_eq!(MAIR_EL1_VALUE, mair_el1_value(false));
    assert_eq!(mair_el1_value(true) >> 40, 0, "indices 5 to 7 unused");
    assert_eq!(MemoryType::from_index(5), None);
}

#[test]
fn tagged_memory_is_normal_and_changes_only_by_break_before_make() {
    let all = [
        MemoryType::NormalWriteBack,
        MemoryType::NormalNonCacheable,
        MemoryType::DeviceNGnRE,
        MemoryType::DeviceNGnRnE,
        MemoryType::NormalTagged,
    ];
    for m in all {
        for tagged in [false, true] {
            let a = Attributes::user(UserAccess::ReadWrite).with_memory_type(m);
            let b = a.with_tagged(tagged);
            // Only the two Normal Write-Back types turn into each other; the rest are kept.
            let expect = match (m, tagged) {
                (MemoryType::NormalWriteBack, true) => MemoryType::NormalTagged,
                (MemoryType::NormalTagged, false) => MemoryType::NormalWriteBack,
                _ => m,
            };
            assert_eq!(b.memory_type(), expect, "{m:?} tagged={tagged}");
            assert_eq!(b.tagged(), expect == MemoryType::NormalTagged);
            // Everything but AttrIndx is kept: tagged memory is Inner Shareable, as Normal memory.
            assert_eq!(b.bits() & !ATTR_INDEX_MASK, a.bits() & !ATTR_INDEX_MASK);
            // A change of memory type is never made in place (Arm ARM D8.16.1).
            assert_eq!(a.may_change_in_place_to(b), a == b, "{m:?} tagged={tagged}");
        }
    }
    assert!(!MemoryType::NormalTagged.is_device());
    // An mprotect that changes only the permissions keeps the tagged type.
    let t = Attributes::user(UserAccess::ReadWrite).with_tagged(true);
    let ro = t.with_permissions_of(Attributes::user(UserAccess::ReadOnly));
    assert!(ro.tagged() && t.may_change_in_place_to(ro));
}

#[test]
fn kernel_text_bits() {
    let a = Attributes::kernel_text();
    // AttrIndx 0, AP = 0b10 (EL1 RO), SH = 0b11, AF, global, PXN clear, UXN set.
    assert_eq!(a.bits(), (0b10 << 6) | (0b11 << 8) | (1 << 10) | (1 << 54));
    assert_eq!(
        a.permissions(),
        Permissions { el1: Rwx { read: true, write: false, execute: true }, el0: Rwx::default() }
    );
}

#[test]
fn kernel_rodata_data_device_bits() {
    let ro = Attributes::kernel_rodata();
    assert_eq!(ro.bits(), (0b10 << 6) | (0b11 << 8) | (1 << 10) | (1 << 53) | (1 << 54));
    let rw = Attributes::kernel_data();
    assert_eq!(rw.bits(), (0b11 << 8) | (1 << 10) | (1 << 53) | (1 << 54));
    assert_eq!(rw.permissions().el1, Rwx { read: true, write: true, execute: false });
    let dev = Attributes::device();
    assert_eq!(dev.bits(), (2 << 2) | (0b10 << 8) | (1 << 10) | (1 << 53) | (1 << 54));
    assert_eq!(dev.memory_type(), MemoryType::DeviceNGnRE);
    assert_eq!(Attributes::device_ngnrne().memory_type(), MemoryType::DeviceNGnRnE);
    for a in [ro, rw, dev, Attributes::kernel_text(), Attributes::device_ngnrne()] {
        assert!(a.uxn(), "kernel mappings are always UXN");
        assert!(a.is_global());
        assert!(a.accessed());
        assert!(!a.access().el0_accessible());
    }
}

#[test]
fn user_bits() {
    for (ua, w, x) in [
        (UserAccess::ReadOnly, false, false),
        (UserAccess::ReadWrite, true, false),
        (UserAccess::ReadExecute, false, true),
        (UserAccess::ReadWriteExecute, true, true),
    ] {
        let a = Attributes::user(ua);
        assert!(a.pxn(), "user mappings are always PXN");
        assert!(!a.is_global(), "user mappings are non-global");
        assert!(a.accessed());
        assert_eq!(a.bits() & (1 << 11), 1 << 11);
        let p = a.permissions();
        assert_eq!(p.el0, Rwx { read: true, write: w, execute: x });
        assert!(!p.el1.execute);
        assert_eq!(p.el1.write, w);
    }
    // AP = 0b01 for RW, 0b11 for RO.
    assert_eq!(Attributes::user(UserAccess::ReadWrite).bits() & (0b11 << 6), 0b01 << 6);
    assert_eq!(Attributes::user(UserAccess::ReadOnly).bits() & (0b11 << 6), 0b11 << 6);
}

#[test]
fn el0_writable_is_never_el1_executable() {
    let a = Attributes::new(MemoryType::NormalWriteBack, Access::UserRw).with_el1_execute(true);
    assert!(!a.pxn());
    assert!(!a.permissions().el1.execute);
}

#[test]
fn descriptor_classification() {
    // The page address 0x1234_5000 rounded to the build's page (4, 16 or 64 KiB).
    let pa = PhysAddr(0x1234_5000 & !(PAGE_SIZE - 1));
    let t = Descriptor::table(pa);
    assert_eq!(t.bits(), pa.0 | 0b11);
    assert_eq!(t.bits(), per_granule(0x1234_5003, 0x1234_4003, 0x1234_0003));
    for level in 0..3 {
        assert_eq!(t.kind(level), DescriptorKind::Table);
    }
    assert_eq!(t.kind(3), DescriptorKind::Page);
    assert_eq!(t.output_address(), pa);

    let attrs = Attributes::kernel_data();
    let page = Descriptor::leaf(3, pa, attrs, false);
    assert_eq!(page.kind(3), DescriptorKind::Page);
    assert_eq!(page.bits() & 0b11, 0b11);
    assert_eq!(page.attributes(), attrs);
    assert_eq!(page.output_address(), pa);

    // A level-2 block one block above 1 GiB (0x4020_0000 with 4 KiB pages).
    let block_pa = PhysAddr(0x4000_0000 + BLOCK_2M);
    let blk = Descriptor::leaf(2, block_pa, attrs, true);
    assert_eq!(blk.bits() & 0b11, 0b01);
    assert_eq!(blk.kind(2), DescriptorKind::Block);
    // Level-1 blocks exist with 4 KiB pages (48-bit output addresses) and in both LPA2 builds
    // (16 KiB pages with `DS`); level-0 blocks with 4 KiB pages and `DS` only.
    let (block, reserved) = (DescriptorKind::Block, DescriptorKind::Reserved);
    assert_eq!(blk.kind(1), per_lpa2(per_granule(block, reserved, reserved), block));
    assert_eq!(blk.kind(0), per_lpa2(reserved, per_granule(block, reserved, reserved)));
    assert_eq!(blk.kind(3), DescriptorKind::Reserved);
    assert!(blk.is_contiguous());
    assert_eq!(blk.bits() & (1 << 52), 1 << 52);
    assert!(!blk.with_contiguous(false).is_contiguous());
    assert_eq!(blk.attributes(), attrs, "the contiguous hint is not an attribute");
    assert_eq!(blk.output_address(), block_pa);

    assert_eq!(Descriptor::INVALID.kind(0), DescriptorKind::Invalid);
    assert_eq!(Descriptor::from_bits(0b10).kind(3), DescriptorKind::Invalid);
    // Bits [47:page shift]; with LPA2 [49:page shift] and [9:8] (OA[51:50]), which decode to
    // an address of 52 bits.
    let mask = per_granule(0x0000_ffff_ffff_f000, 0x0000_ffff_ffff_c000, 0x0000_ffff_ffff_0000);
    assert_eq!(OUTPUT_ADDRESS_MASK, per_lpa2(mask, mask | 0x0003_0000_0000_0300));
    let all_ones = per_lpa2(mask, mask | 0x000f_0000_0000_0000);
    assert_eq!(Descriptor::from_bits(u64::MAX).output_address(), PhysAddr(all_ones));
}

/// The early boot map's encodings, evaluated at compile time as early boot gets them, equal
/// the runtime encodings the page-table engine writes (`leaf`, `table`).
#[test]
fn early_block_encoding_equals_the_leaf_encoding() {
    // The image's block one block above 1 GiB, a table three pages above 0x4009_0000 (with
    // 4 KiB pages: 0x4020_0000 and 0x4009_3000).
    const IMAGE: u64 = 0x4000_0000 + BLOCK_2M;
    const TABLE: u64 = 0x4009_0000 + 3 * PAGE_SIZE;
    const EARLY_IMAGE: u64 =
        Descriptor::block_2m(PhysAddr(IMAGE), Attributes::kernel_data().with_el1_execute(true)).bits();
    const EARLY_TABLE: u64 = Descriptor::table(PhysAddr(TABLE)).bits();
    assert_eq!(
        EARLY_IMAGE,
        Descriptor::leaf(2, PhysAddr(IMAGE), Attributes::kernel_data().with_el1_execute(true), false).bits()
    );
    assert_eq!(EARLY_TABLE, per_granule(0x4009_3003, 0x4009_c003, 0x400c_0003));
    // Bits [47:level-2 block shift] of the address ([51:...] with LPA2).
    let block_mask = per_granule(0x0000_ffff_ffe0_0000, 0x0000_ffff_fe00_0000, 0x0000_ffff_e000_0000);
    let block_mask = per_lpa2(block_mask, block_mask | 0x000f_0000_0000_0000);
    for a in crate::test_support::all_attributes() {
        // Bits below the block size and above bit 47 (51) of the address are dropped, as by
        // `leaf`.
        for pa in [0, 0x4000_0000, IMAGE, IMAGE + 0x1_2345, 0xffff_ffff_ffff_ffff, block_mask] {
            let block = Descriptor::block_2m(PhysAddr(pa), a);
            assert_eq!(block, Descriptor::leaf(2, PhysAddr(pa), a, false), "{pa:#x} {a:?}");
            assert_eq!(block.kind(2), DescriptorKind::Block);
            assert_eq!(block.attributes(), a);
            assert!(!block.is_contiguous());
            assert_eq!(block.output_address().0, pa & block_mask);
        }
    }
}

#[test]
fn in_place_changes() {
    let rw = Attributes::kernel_data();
    assert!(rw.may_change_in_place_to(Attributes::kernel_rodata()));
    assert!(rw.may_change_in_place_to(Attributes::kernel_text()));
    assert!(!rw.may_change_in_place_to(Attributes::device()));
    assert!(!rw.may_change_in_place_to(rw.with_global(false)));
    let u = Attributes::user(UserAccess::ReadWrite);
    assert!(u.may_change_in_place_to(Attributes::user(UserAccess::ReadExecute)));
    let dev = Attributes::device().with_permissions_of(Attributes::kernel_rodata());
    assert_eq!(dev.memory_type(), MemoryType::DeviceNGnRE);
    assert_eq!(dev.access(), Access::KernelRo);
    assert_eq!(
        rw.with_memory_type(MemoryType::DeviceNGnRE),
        Attributes::device(),
        "shareability follows the memory type"
    );
}

#[test]
fn level_sizes() {
    let sizes: [u64; 4] = per_granule(
        [1 << 39, 1 << 30, 1 << 21, 1 << 12],
        [1 << 47, 1 << 36, 1 << 25, 1 << 14],
        [1 << 55, 1 << 42, 1 << 29, 1 << 16],
    );
    // From the tables' root (the 64 KiB granule's is level 1: no level-0 size to check).
    for level in crate::paging::ROOT_LEVEL as i32..=3 {
        assert_eq!(level_size(level as u32), sizes[level as usize], "level {level}");
    }
}

#[test]
fn guarded_pages() {
    let rx = Attributes::user(UserAccess::ReadExecute);
    assert!(!rx.guarded());
    let gp = rx.with_guarded(true);
    assert!(gp.guarded());
    assert_eq!(gp.bits() & (1 << 50), 1 << 50, "GP is bit 50 of a leaf");
    assert_eq!(gp.with_guarded(false), rx);
    // Like the permissions, GP changes in place, and mprotect's transfer carries it both ways.
    assert!(rx.may_change_in_place_to(gp));
    assert_eq!(rx.with_permissions_of(gp), gp);
    assert_eq!(gp.with_permissions_of(rx), rx);
    // It survives a round trip through a page and a block descriptor.
    let page = Descriptor::leaf(3, PhysAddr(0x4000_0000), gp, false);
    assert!(page.attributes().guarded());
    let block = Descriptor::block_2m(PhysAddr(0x4000_0000), gp);
    assert!(block.attributes().guarded());
}
