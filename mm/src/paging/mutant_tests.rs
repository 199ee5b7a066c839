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
