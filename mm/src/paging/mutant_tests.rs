//! Tests added for mutants that `cargo mutants` (scripts/mutants --paging) found alive in the
//! table code: each asserts a specified behaviour the table tests did not pin down.

use core::ptr::NonNull;
use std::boxed::Box;
use std::vec::Vec;

use super::*;

/// Heap-backed table frames at fake physical addresses 0x1000, 0x2000, …
#[derive(Default)]
struct Frames(Vec<*mut AlignedTable>);

// SAFETY: every frame is a distinct, 4 KiB-aligned heap allocation that lives until `Frames` is
// dropped, at a distinct page-aligned address below 2^48; `table_ptr` returns its raw pointer.
unsafe impl Translation for Frames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        self.0.push(Box::into_raw(Box::new(AlignedTable([0; ENTRIES_PER_TABLE]))));
        Some(PhysAddr((self.0.len() as u64) << 12))
    }
    fn deallocate_table(&mut self, _pa: PhysAddr) {}
    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        let frame = self.0[(pa.0 >> 12) as usize - 1];
        // SAFETY: `frame` came from `Box::into_raw` and is not freed before `drop`.
        NonNull::new(unsafe { &raw mut (*frame).0 }).unwrap()
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        for &frame in &self.0 {
            // SAFETY: allocated by `Box::into_raw` in `allocate_table`, freed once here.
            drop(unsafe { Box::from_raw(frame) });
        }
    }
}

/// `FrameList::is_empty` follows the frames in the list (the leak check of `PendingFlush`
/// depends on it).
#[test]
fn frame_list_is_empty_tracks_its_frames() {
    let mut t = Frames::default();
    let mut list = FrameList::new();
    assert!(list.is_empty());
    let a = t.allocate_table().unwrap();
    list.push(a, &t);
    assert!(!list.is_empty());
    assert_eq!(list.len(), 1);
    assert_eq!(list.pop(&t), Some(a));
    assert!(list.is_empty());
}

/// A record dropped while it still holds detached table frames is a leak, which the host build
/// reports by panicking.
#[test]
#[should_panic(expected = "PendingFlush dropped while holding table frames")]
fn dropping_a_record_that_holds_frames_is_caught() {
    let mut t = Frames::default();
    let mut record = PendingFlush::new(VaRange::Lower);
    let a = t.allocate_table().unwrap();
    record.detach_table(a, &t);
    assert_eq!(record.detached_tables(), 1);
    drop(record);
}

/// `FlushRange::pages` is the range's length in 4 KiB pages (what the planner's page counts and
/// the statistics use).
#[test]
fn flush_range_pages_is_its_length_in_pages() {
    for n in [1u64, 2, 3, 511, 512, 1 << 20, 1 << 36] {
        let r = FlushRange { start: VirtAddr(0xffff_8000_0000_0000), size: n * PAGE_SIZE };
        assert_eq!(r.pages(), n, "{r:?}");
    }
}

/// `FlushRange::end` is the first address past the range, and `None` only at the top of the
/// address space; `contains` is exactly `[start, start + size)`.
#[test]
fn flush_range_end_and_contains_are_exact() {
    let r = FlushRange { start: VirtAddr(0x40_0000), size: 3 * PAGE_SIZE };
    assert_eq!(r.end(), Some(VirtAddr(0x40_3000)));
    assert_eq!(r.end_or_zero(), VirtAddr(0x40_3000));
    for (va, inside) in [
        (0x3f_ffff, false),
        (0x40_0000, true),
        (0x40_1000, true),
        (0x40_2fff, true),
        (0x40_3000, false),
        (0x80_0000, false),
        (0, false),
    ] {
        assert_eq!(r.contains(VirtAddr(va)), inside, "{va:#x}");
    }
    let top = FlushRange { start: VirtAddr(u64::MAX - PAGE_SIZE + 1), size: PAGE_SIZE };
    assert_eq!(top.end(), None);
    assert_eq!(top.end_or_zero(), VirtAddr(0));
    assert!(top.contains(VirtAddr(u64::MAX)));
    assert!(!top.contains(VirtAddr(u64::MAX - PAGE_SIZE)));
}

/// The record's global / non-global / executable flags say what the flush must cover: an
/// executable leaf is one executable at EL1 (PXN clear) or at EL0 (UXN clear), before or after
/// the change; a non-executable change leaves the flag clear.
#[test]
fn records_flag_executable_global_and_non_global_leaves() {
    use crate::descriptor::UserAccess;
    let va = VirtAddr(0x40_0000);
    let pa = PhysAddr(0x8000_0000);
    let cases = [
        // (attributes mapped, expected (global, non_global, executable) when unmapped)
        (Attributes::kernel_data(), (true, false, false)),
        (Attributes::kernel_text(), (true, false, true)),
        (Attributes::user(UserAccess::ReadWrite), (false, true, false)),
        (Attributes::user(UserAccess::ReadExecute), (false, true, true)),
    ];
    // Pages (the level-3 loops) and 2 MiB blocks (one leaf at a time) record the same flags.
    for (attrs, (global, non_global, executable)) in cases {
        for size in [2 * PAGE_SIZE, crate::addr::BLOCK_2M] {
            let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
            let va = VirtAddr(0x4000_0000);
            pt.map(va, pa, size, attrs, Constraints::NO_CONTIGUOUS).unwrap();
            let record = pt.unmap(va, size).unwrap();
            assert_eq!(
                (record.has_global(), record.has_non_global(), record.has_executable()),
                (global, non_global, executable),
                "{attrs:?}, {size:#x}"
            );
            assert_eq!(record.leaves_changed(), if size == crate::addr::BLOCK_2M { 1 } else { 2 });
            record.release(pt.translation_mut());
        }
    }
    // The same for a block whose protection changes (non-executable before, executable after).
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    let block = VirtAddr(0x4000_0000);
    pt.map(block, pa, crate::addr::BLOCK_2M, Attributes::user(UserAccess::ReadOnly), Constraints::NONE)
        .unwrap();
    let record = pt.protect(block, crate::addr::BLOCK_2M, Attributes::user(UserAccess::ReadExecute)).unwrap();
    assert!(record.has_executable(), "a block RO -> RX must count as executable");
    record.release(pt.translation_mut());
    let record = pt.protect(block, crate::addr::BLOCK_2M, Attributes::user(UserAccess::ReadWrite)).unwrap();
    assert!(record.has_executable(), "a block RX -> RW must count as executable (the old attributes)");
    record.release(pt.translation_mut());
    // A change that makes a page executable is an executable change (the new attributes count).
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(va, pa, PAGE_SIZE, Attributes::user(UserAccess::ReadOnly), Constraints::NONE).unwrap();
    let record = pt.protect(va, PAGE_SIZE, Attributes::user(UserAccess::ReadExecute)).unwrap();
    assert!(record.has_executable(), "RO -> RX must count as executable");
    record.release(pt.translation_mut());
    let record = pt.protect(va, PAGE_SIZE, Attributes::user(UserAccess::ReadOnly)).unwrap();
    assert!(record.has_executable(), "RX -> RO must count as executable (the old attributes)");
    record.release(pt.translation_mut());
    let record = pt.protect(va, PAGE_SIZE, Attributes::user(UserAccess::ReadWrite)).unwrap();
    assert!(!record.has_executable(), "RO -> RW is not an executable change");
    record.release(pt.translation_mut());
}

/// Runs of leaves are counted one by one, whatever their length, and bound the range exactly.
#[test]
fn runs_of_leaves_are_counted_and_bounded_exactly() {
    for blocks in [1u64, 2, 3, 5] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        let va = VirtAddr(0x4000_0000);
        let size = blocks * crate::addr::BLOCK_2M;
        pt.map(
            va,
            PhysAddr(0x8000_0000),
            size,
            Attributes::kernel_data(),
            Constraints::NO_1G_BLOCKS.union(Constraints::NO_CONTIGUOUS),
        )
        .unwrap();
        let record = pt.unmap(va, size).unwrap();
        assert_eq!(record.leaves_changed(), blocks, "{blocks} blocks");
        let range = record.range().unwrap();
        assert_eq!((range.start, range.size), (va, size), "{blocks} blocks");
        record.release(pt.translation_mut());
    }
}

/// A run of `count` equal leaves (what a promotion or a fold stages) counts `count` leaves and
/// bounds the range by its first and last leaf, for every run length.
#[test]
fn a_run_of_leaves_counts_each_leaf() {
    let attrs = Attributes::kernel_data();
    for count in [1u64, 2, 3, 16, 512] {
        let mut record = PendingFlush::new(VaRange::Lower);
        record.add_run(0x20_0000, count, PAGE_SIZE, attrs, Some(attrs));
        assert_eq!(record.leaves_changed(), count, "{count} leaves");
        let range = record.range().unwrap();
        assert_eq!((range.start, range.size), (VirtAddr(0x20_0000), count * PAGE_SIZE), "{count} leaves");
        assert_eq!((record.min_leaf_size(), record.max_leaf_size()), (PAGE_SIZE, PAGE_SIZE));
        record.add_run(0x80_0000, 0, PAGE_SIZE, attrs, None);
        assert_eq!(record.leaves_changed(), count, "an empty run records nothing");
    }
}
