//! The memory-map conversion against fixture maps laid out as firmware writes them.

extern crate std;
use std::vec::Vec;

use super::memory_type::*;
use super::*;

const PAGE: u64 = EFI_PAGE_SIZE;

/// A map of `(type, start, pages, attribute)` descriptors with stride `size` (edk2 uses 48).
fn map(size: usize, descriptors: &[(u32, u64, u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(kind, start, pages, attribute) in descriptors {
        let mut d = std::vec![0u8; size];
        d[0..4].copy_from_slice(&kind.to_le_bytes());
        d[8..16].copy_from_slice(&start.to_le_bytes());
        d[16..24].copy_from_slice(&start.to_le_bytes()); // VirtualStart: ignored
        d[24..32].copy_from_slice(&pages.to_le_bytes());
        d[32..40].copy_from_slice(&attribute.to_le_bytes());
        if size > 40 {
            d[40..].fill(0xa5); // padding past version 1: must be skipped
        }
        out.extend_from_slice(&d);
    }
    out
}

const WB: u64 = MEMORY_WB | 0x7; // UC | WC | WT | WB, as edk2 reports RAM

/// A map shaped like edk2's on QEMU virt with 512 MiB from 0x4000_0000: unsorted, with runtime
/// services, ACPI tables, a reserved hole and the flash as MMIO.
fn edk2_like() -> Vec<u8> {
    map(
        48,
        &[
            (CONVENTIONAL, 0x4000_0000, 0x1000, WB),
            (LOADER_CODE, 0x4100_0000, 0x200, WB),
            (BOOT_SERVICES_DATA, 0x4120_0000, 0x100, WB),
            (RUNTIME_SERVICES_DATA, 0x5ff0_0000, 0x10, WB | MEMORY_RUNTIME),
            (ACPI_RECLAIM, 0x5fe0_0000, 0x20, WB),
            (CONVENTIONAL, 0x4130_0000, 0x1ebd0, WB),
            (RUNTIME_SERVICES_CODE, 0x5ff1_0000, 0x10, WB | MEMORY_RUNTIME),
            (RESERVED, 0x5ff2_0000, 0xe0, WB),
            (BOOT_SERVICES_CODE, 0x5fe2_0000, 0xe0, WB),
            (MMIO, 0x0400_0000, 0x4000, MEMORY_RUNTIME | 1),
        ],
    )
}

#[test]
fn edk2_like_map_keeps_only_free_memory_and_the_acpi_tables() {
    let layout = MemoryLayout::from_memory_map(&edk2_like(), 48).unwrap();
    assert_eq!(layout.descriptors, 10);
    assert_eq!(layout.dropped, 0);
    // Conventional, loader and boot-services ranges merge where they touch.
    assert_eq!(layout.usable.ranges(), &[(0x4000_0000, 0x5fe0_0000), (0x5fe2_0000, 0x5ff0_0000)]);
    assert_eq!(layout.acpi.ranges(), &[(0x5fe0_0000, 0x5fe2_0000)]);
    // Runtime code and data, reserved, and the MMIO flash: 0x10 + 0x10 + 0xe0 + 0x4000 pages.
    assert_eq!(layout.firmware_bytes, (0x10 + 0x10 + 0xe0 + 0x4000) * PAGE);
    assert!(!layout.usable.contains(0x5ff0_0000));
    assert!(!layout.usable.contains(0x0400_0000));
}

#[test]
fn usable_ranges_are_exactly_the_free_types() {
    let layout = MemoryLayout::from_memory_map(&edk2_like(), 48).unwrap();
    assert_eq!(layout.usable.ranges(), &[(0x4000_0000, 0x5fe0_0000), (0x5fe2_0000, 0x5ff0_0000)]);
    assert_eq!(layout.usable.total(), 0x1fe0_0000 + 0xe0 * PAGE);
}

#[test]
fn the_descriptor_stride_is_the_firmwares_not_the_structs() {
    let d = [(CONVENTIONAL, 0x8000_0000, 16, WB), (ACPI_RECLAIM, 0x9000_0000, 1, WB)];
    for stride in [40, 48, 64] {
        let layout = MemoryLayout::from_memory_map(&map(stride, &d), stride).unwrap();
        assert_eq!(layout.usable.ranges(), &[(0x8000_0000, 0x8000_0000 + 16 * PAGE)], "stride {stride}");
        assert_eq!(layout.acpi.ranges(), &[(0x9000_0000, 0x9000_1000)], "stride {stride}");
    }
    // Read with the wrong stride, the same bytes mean something else: the stride matters.
    let wrong = MemoryLayout::from_memory_map(&map(48, &d), 40).unwrap();
    assert_eq!(wrong.acpi.total(), 0);
}

#[test]
fn bad_descriptor_sizes_are_refused() {
    let m = edk2_like();
    for size in [0, 8, 39, 44] {
        assert_eq!(MemoryLayout::from_memory_map(&m, size).unwrap_err(), MapError::DescriptorSize(size));
    }
}

#[test]
fn memory_without_write_back_or_marked_runtime_is_not_usable() {
    let layout = MemoryLayout::from_memory_map(
        &map(
            48,
            &[
                (CONVENTIONAL, 0x1000_0000, 4, 0x1),
                (BOOT_SERVICES_DATA, 0x2000_0000, 4, WB | MEMORY_RUNTIME),
                (ACPI_RECLAIM, 0x3000_0000, 1, 0x1),
            ],
        ),
        48,
    )
    .unwrap();
    assert_eq!(layout.usable.total(), 0);
    assert_eq!(layout.acpi.total(), 0);
    assert_eq!(layout.firmware_bytes, 9 * PAGE);
}

#[test]
fn wrapping_misaligned_and_truncated_descriptors_are_dropped_not_trusted() {
    let mut m = map(
        48,
        &[
            (CONVENTIONAL, u64::MAX - PAGE + 1, 2, WB), // wraps
            (CONVENTIONAL, 0x4000_0800, 1, WB),         // not page-aligned
            (CONVENTIONAL, 0x1000, u64::MAX / 2, WB),   // pages * 4 KiB overflows
            (CONVENTIONAL, 0x5000_0000, 1, WB),
        ],
    );
    m.extend_from_slice(&[0xff; 20]); // a truncated trailing descriptor is not read
    let layout = MemoryLayout::from_memory_map(&m, 48).unwrap();
    assert_eq!(layout.descriptors, 4);
    assert_eq!(layout.dropped, 3);
    assert_eq!(layout.usable.ranges(), &[(0x5000_0000, 0x5000_1000)]);
}

#[test]
fn a_range_listed_as_both_usable_and_acpi_stays_reserved() {
    let layout = MemoryLayout::from_memory_map(
        &map(48, &[(CONVENTIONAL, 0x4000_0000, 16, WB), (ACPI_RECLAIM, 0x4000_4000, 2, WB)]),
        48,
    )
    .unwrap();
    assert_eq!(layout.usable.ranges(), &[(0x4000_0000, 0x4000_4000), (0x4000_6000, 0x4001_0000)]);
    assert_eq!(layout.acpi.ranges(), &[(0x4000_4000, 0x4000_6000)]);
}

#[test]
fn overflowing_maps_lose_usable_memory_but_never_a_reservation() {
    // 80 separate usable ranges (gaps between them) and 20 separate ACPI ranges.
    let mut d = Vec::new();
    for i in 0..80u64 {
        d.push((CONVENTIONAL, 0x1_0000_0000 + i * 0x10_0000, 1, WB));
    }
    for i in 0..20u64 {
        d.push((ACPI_RECLAIM, 0x2_0000_0000 + i * 0x10_0000, 1, WB));
    }
    let layout = MemoryLayout::from_memory_map(&map(48, &d), 48).unwrap();
    assert_eq!(layout.usable.ranges().len(), 64);
    assert_eq!(layout.acpi.ranges().len(), 16);
    assert_eq!(layout.dropped, 16 + 4);
    // Every usable range kept is one the map declared usable.
    for &(s, e) in layout.usable.ranges() {
        assert!(s >= 0x1_0000_0000 && e <= 0x1_0000_0000 + 80 * 0x10_0000 && e - s == PAGE);
    }
}

#[test]
fn guids_are_laid_out_as_the_specification_stores_them() {
    // b1b621d5-f19c-41a5-830b-d9152c69aae0 in memory: the first three fields little-endian.
    assert_eq!(
        DEVICE_TREE_GUID.0,
        [0xd5, 0x21, 0xb6, 0xb1, 0x9c, 0xf1, 0xa5, 0x41, 0x83, 0x0b, 0xd9, 0x15, 0x2c, 0x69, 0xaa, 0xe0]
    );
    assert_eq!(
        ACPI_20_TABLE_GUID.0,
        [0x71, 0xe8, 0x68, 0x88, 0xf1, 0xe4, 0xd3, 0x11, 0xbc, 0x22, 0x00, 0x80, 0xc7, 0x3c, 0x88, 0x81]
    );
    let table = [(ACPI_20_TABLE_GUID, 0x5fe0_0000), (DEVICE_TREE_GUID, 0x4800_0000)];
    assert_eq!(find_table(table, DEVICE_TREE_GUID), Some(0x4800_0000));
    assert_eq!(find_table(table, ACPI_20_TABLE_GUID), Some(0x5fe0_0000));
    assert_eq!(find_table([(ACPI_20_TABLE_GUID, 1)], DEVICE_TREE_GUID), None);
}

#[test]
fn an_unfilled_handoff_is_not_valid() {
    assert!(!Handoff::empty().is_valid());
    let mut h = Handoff::empty();
    h.magic = HANDOFF_MAGIC;
    assert!(h.is_valid());
    assert_eq!(&HANDOFF_MAGIC.to_le_bytes(), b"EFISTUB1");
}

#[test]
fn load_options_become_ascii_up_to_the_nul_and_the_buffer() {
    let wide: Vec<u16> = "test=boot:: console=ttyAMA0\t\u{e9}".encode_utf16().chain([0, 0x41]).collect();
    let mut out = [0u8; 64];
    let n = load_options_to_ascii(&wide, &mut out);
    assert_eq!(&out[..n], b"test=boot:: console=ttyAMA0 ?");
    let mut small = [0u8; 4];
    assert_eq!(load_options_to_ascii(&wide, &mut small), 4);
    assert_eq!(&small, b"test");
    assert_eq!(load_options_to_ascii(&[], &mut out), 0);
    assert_eq!(LOADED_IMAGE_PROTOCOL_GUID.0[..4], [0xa1, 0x31, 0x1b, 0x5b]);
}
