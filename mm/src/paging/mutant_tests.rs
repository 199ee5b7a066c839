//! Tests added for mutants that `cargo mutants` (scripts/mutants --paging) found alive in the
//! table code: each asserts a specified behaviour the table tests did not pin down.
//!
//! Long because each test pins one behaviour down with its own small scenario; they share the
//! `Frames` translation defined here.

use core::cell::RefCell;
use core::ptr::NonNull;
use std::boxed::Box;
use std::collections::BTreeSet;
use std::vec::Vec;

use super::bbm::occupied;
use super::occupancy::{occupancy, with_occupancy};
use super::*;
use crate::descriptor::{DescriptorKind, level_size};

/// Heap-backed table frames at fake physical addresses 0x1000, 0x2000, …; `touched` records
/// every frame the table code asked a pointer for (how a test sees which tables a call walked).
#[derive(Default)]
struct Frames(Vec<*mut AlignedTable>, RefCell<BTreeSet<u64>>);

impl Frames {
    /// The frames asked for since the last call, in address order.
    fn take_touched(&self) -> Vec<u64> {
        core::mem::take(&mut *self.1.borrow_mut()).into_iter().collect()
    }
}

// SAFETY: every frame is a distinct, page-aligned heap allocation that lives until `Frames` is
// dropped, at a distinct page-aligned address below 2^48; `table_ptr` returns its raw pointer.
unsafe impl Translation for Frames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        self.0.push(Box::into_raw(Box::new(AlignedTable([0; ENTRIES_PER_TABLE]))));
        Some(PhysAddr((self.0.len() as u64) << crate::addr::PAGE_SHIFT))
    }
    fn deallocate_table(&mut self, _pa: PhysAddr) {}
    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        self.1.borrow_mut().insert(pa.0);
        let frame = self.0[(pa.0 >> crate::addr::PAGE_SHIFT) as usize - 1];
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

/// Runs `op` over `[va, va + size)` as `mm::space` does on a live table: stage, (flush,) finish.
/// Returns the record, not yet released, and the counts.
fn stage_and_finish<F: FnMut(Attributes) -> Attributes>(
    pt: &mut PageTable<Frames>,
    va: u64,
    size: u64,
    op: StagedOp<F>,
) -> (PendingFlush, BbmCounts) {
    let mut record = PendingFlush::new(VaRange::Lower);
    let mut counts = BbmCounts::default();
    pt.stage(VirtAddr(va), size, op, true, &mut record, &mut counts).unwrap();
    pt.finish(VirtAddr(va), size, &mut |_| {});
    (record, counts)
}

/// Unmaps `[va, va + size)` directly (`PageTable::unmap`) or, if `staged`, on the table made
/// live, through break-before-make staging. Returns the record, not yet released.
fn unmap_via(pt: &mut PageTable<Frames>, staged: bool, va: u64, size: u64) -> PendingFlush {
    if staged {
        pt.set_live(true);
        stage_and_finish(pt, va, size, StagedOp::<fn(Attributes) -> Attributes>::Unmap).0
    } else {
        pt.unmap(VirtAddr(va), size).unwrap()
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
    let (start, p) = (0x40_0000, PAGE_SIZE);
    let r = FlushRange { start: VirtAddr(start), size: 3 * p };
    assert_eq!(r.end(), Some(VirtAddr(start + 3 * p)));
    assert_eq!(r.end_or_zero(), VirtAddr(start + 3 * p));
    for (va, inside) in [
        (start - 1, false),
        (start, true),
        (start + p, true),
        (start + 3 * p - 1, true),
        (start + 3 * p, false),
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

/// Restriction sets are bit sets: a union with itself or with a subset changes nothing, and
/// `contains` is inclusion.
#[test]
fn constraints_union_is_set_union() {
    let all =
        [Constraints::NONE, Constraints::NO_BLOCKS, Constraints::NO_1G_BLOCKS, Constraints::NO_CONTIGUOUS];
    for a in all {
        assert_eq!(a.union(a), a, "{a:?}");
        assert_eq!(a | a, a, "{a:?}");
        for b in all {
            let u = a.union(b);
            assert!(u.contains(a) && u.contains(b), "{a:?} | {b:?}");
            assert_eq!(u.union(b), u, "{a:?} | {b:?} | {b:?}");
        }
    }
    let two = Constraints::NO_BLOCKS | Constraints::NO_CONTIGUOUS;
    assert_eq!(two | Constraints::NO_BLOCKS, two);
    assert!(!two.contains(Constraints::NO_1G_BLOCKS));
}

/// `Debug` names the table and what a reader of a crash report needs: its root, its half of the
/// address space, whether it is live, and its frame counters.
#[test]
fn debug_output_shows_root_range_live_and_stats() {
    let mut pt = PageTable::new(Frames::default(), VaRange::Upper).unwrap();
    pt.set_live(true);
    let text = std::format!("{pt:?}");
    for needle in ["PageTable", "root", "Upper", "live: true", "tables_allocated: 1"] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
}

/// A new table is not live; `set_live` sets and clears it.
#[test]
fn is_live_follows_set_live() {
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    assert!(!pt.is_live());
    pt.set_live(true);
    assert!(pt.is_live());
    pt.set_live(false);
    assert!(!pt.is_live());
}

/// `is_empty_table` (the check behind every table detach) sees a valid entry wherever it is.
#[test]
fn is_empty_table_sees_any_valid_entry() {
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    let root = pt.root;
    assert!(pt.is_empty_table(root));
    for index in [0, 1, 255, 511] {
        pt.write(root, index, Descriptor::table(PhysAddr(0x1000)));
        assert!(!pt.is_empty_table(root), "entry {index}");
        pt.write(root, index, Descriptor::INVALID);
        assert!(pt.is_empty_table(root));
    }
}

/// A block cut by an operation is replaced by the 512 leaves of the next level it translated:
/// consecutive output addresses from the block's, with its attributes (the piece the operation
/// covers excepted), directly and staged on a live table alike.
#[test]
#[cfg_attr(
    all(feature = "granule-16k", feature = "lpa2"),
    ignore = "names 48-bit numbers; the 16 KiB LPA2 tree is 52-bit (paging::lpa2::tests cover it)"
)]
fn a_split_writes_the_leaves_of_the_block() {
    let attrs = Attributes::kernel_data();
    // (block VA, block PA, block level): a 1 GiB block split into 2 MiB blocks (4 KiB pages
    // only: the other granules have no level-1 blocks), a level-2 block split into pages.
    let block = crate::addr::BLOCK_2M;
    let level2 = (0x4000_0000 + block, 0x8000_0000 + block, 2);
    let cases: Vec<(u64, u64, u32)> =
        if LEVEL1_BLOCKS { std::vec![(0x4000_0000, 0x8000_0000, 1), level2] } else { std::vec![level2] };
    for (va, pa, level) in cases {
        for staged in [false, true] {
            let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
            let size = level_size(level);
            pt.map(VirtAddr(va), PhysAddr(pa), size, attrs, Constraints::NO_CONTIGUOUS).unwrap();
            assert_eq!(pt.query(VirtAddr(va)).unwrap().level, level);
            let sub = level_size(level + 1);
            let r = unmap_via(&mut pt, staged, va + 3 * sub, sub);
            r.release(pt.translation_mut());
            for index in [0u64, 1, 2, 7, ENTRIES_PER_TABLE as u64 - 1] {
                let leaf = pt.query(VirtAddr(va + index * sub)).unwrap();
                let what = std::format!("level {level}, staged {staged}, entry {index}");
                // Staged splits hint the uniform runs (`split_contiguous`): all but the first.
                let contiguous = staged && index >= run_entries(level + 1) as u64;
                assert_eq!((leaf.level, leaf.size, leaf.contiguous), (level + 1, sub, contiguous), "{what}");
                assert_eq!(leaf.pa, PhysAddr(pa + index * sub), "{what}");
                assert_eq!(leaf.attrs, attrs, "{what}");
            }
            assert_eq!(pt.query(VirtAddr(va + 3 * sub)), None);
        }
    }
}

/// Alignment is checked on the address and the size separately: a misaligned address with a
/// size misaligned by the same amount is refused (their low bits do not cancel).
#[test]
fn misaligned_address_and_size_are_refused_together() {
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    let a = Attributes::kernel_data();
    pt.map(VirtAddr(0x40_0000), PhysAddr(0x8000_0000), 4 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    for low in [0x1u64, 0x800, 0xfff] {
        let (va, size) = (VirtAddr(0x40_0000 | low), PAGE_SIZE | low);
        assert_eq!(pt.map(va, PhysAddr(0x9000_0000), size, a, Constraints::NONE), Err(MapError::Misaligned));
        assert_eq!(pt.unmap(va, size).unwrap_err(), MapError::Misaligned, "{low:#x}");
        assert_eq!(pt.protect(va, size, a).unwrap_err(), MapError::Misaligned, "{low:#x}");
    }
    assert_eq!(pt.translate(VirtAddr(0x40_0000)), Some(PhysAddr(0x8000_0000)));
}

/// The single-walk fast path: once a call has walked to the last-level table of a 2 MiB
/// region, the next map, protect or unmap inside that region touches only that table (the walk
/// cache), wherever the region is; a call that crosses a 2 MiB boundary walks from the root.
#[test]
fn calls_inside_one_2mib_region_touch_only_its_last_level_table() {
    let a = Attributes::kernel_data();
    let block = crate::addr::BLOCK_2M;
    for region in [0u64, block, 0x4000_0000, (1 << 39) - block] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        let va = |i: u64| VirtAddr(region + i * PAGE_SIZE);
        let pa = |i: u64| PhysAddr(0x8000_0000 + i * PAGE_SIZE);
        pt.map(va(0), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap();
        let l3 = pt.table_at(region, 3).unwrap().0;
        // A map or unmap also updates the last-level table's occupancy count, in the level-2
        // table above it (`occupancy.rs`); a protect changes no count.
        let l2 = pt.table_at(region, 2).unwrap().0;
        let counted = [l2.min(l3), l2.max(l3)];
        pt.map(va(1), pa(1), PAGE_SIZE, a, Constraints::NONE).unwrap(); // Fills the last-table cache.
        pt.translation().take_touched();
        pt.map(va(2), pa(2), 2 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        assert_eq!(pt.translation().take_touched(), counted, "map in region {region:#x}");
        let r = pt.protect(va(2), PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
        assert_eq!(pt.translation().take_touched(), [l3], "protect in region {region:#x}");
        r.release(pt.translation_mut());
        let r = pt.unmap(va(3), PAGE_SIZE).unwrap();
        assert_eq!(pt.translation().take_touched(), counted, "unmap in region {region:#x}");
        r.release(pt.translation_mut());
        // Several pages, not contiguous (a run of 2), one of them a hole.
        pt.map(va(5), pa(5), 2 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        pt.translation().take_touched();
        let r = pt.unmap(va(4), 3 * PAGE_SIZE).unwrap();
        assert_eq!(pt.translation().take_touched(), counted, "unmap of 3 pages in region {region:#x}");
        assert_eq!(r.leaves_changed(), 2);
        r.release(pt.translation_mut());
        assert_eq!(pt.translate(va(2)), Some(pa(2)));
        assert_eq!(pt.translate(va(3)), None);
        // A range ending exactly at the end of the region is still inside it.
        let last = ENTRIES_PER_TABLE as u64 - 1;
        pt.map(va(last - 1), pa(last - 1), 2 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        pt.translation().take_touched();
        let r = pt.protect(va(last - 1), 2 * PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
        assert_eq!(pt.translation().take_touched(), [l3], "protect of the region's last pages {region:#x}");
        r.release(pt.translation_mut());
    }
    // Across a 2 MiB boundary: the general path, from the root.
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(VirtAddr(block - PAGE_SIZE), PhysAddr(0x8000_0000), 2 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    pt.translation().take_touched();
    let r = pt.unmap(VirtAddr(block - PAGE_SIZE), 2 * PAGE_SIZE).unwrap();
    assert!(pt.translation().take_touched().contains(&pt.root_pa().0));
    r.release(pt.translation_mut());
}

/// The last-table cache's level-1 table serves its whole level-0 region (512 GiB): a call in
/// another 2 MiB region, of the cached 1 GiB region or of another one, reads only the level-1,
/// level-2 and last-level tables of its path (not the root, unless the root is the level-1
/// table, as with 64 KiB pages), one in another level-0 region walks from the root, and once the
/// tables of a region have been detached a call there builds its path again from the root.
#[test]
fn the_cached_level_1_table_serves_its_whole_level_0_region() {
    let a = Attributes::kernel_data();
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    // Two level-2 regions of one level-1 entry (1 GiB, 64 GiB, 4 TiB), and the next entry.
    let (span, block) = (crate::addr::BLOCK_1G, crate::addr::BLOCK_2M);
    let (r0, r1, far) = (0x4000_0000u64, 0x4000_0000 + 3 * block, 0x4000_0000 + span);
    let pa = |va: u64| PhysAddr(va + 0x1_0000_0000);
    let map =
        |pt: &mut PageTable<Frames>, va: u64| pt.map(VirtAddr(va), pa(va), PAGE_SIZE, a, Constraints::NONE);
    for va in [r0, r1, far] {
        map(&mut pt, va).unwrap();
    }
    let root = pt.root_pa().0;
    let path = |pt: &PageTable<Frames>, va: u64| {
        let mut tables = [1, 2, 3].map(|level| pt.table_at(va, level).unwrap().0);
        tables.sort_unstable();
        tables.to_vec()
    };
    // (Paths are read before the calls they describe: `table_at` reads tables too.)
    let (path_r0, path_r1, far_path) = (path(&pt, r0), path(&pt, r1), path(&pt, far));
    map(&mut pt, r0 + PAGE_SIZE).unwrap(); // The cache holds r0's region.
    pt.translation().take_touched();
    map(&mut pt, r1 + PAGE_SIZE).unwrap();
    assert_eq!(pt.translation().take_touched(), path_r1, "map in another 2 MiB region");
    let r = pt.unmap(VirtAddr(r0 + PAGE_SIZE), PAGE_SIZE).unwrap();
    assert_eq!(pt.translation().take_touched(), path_r0, "unmap in another 2 MiB region");
    r.release(pt.translation_mut());
    pt.translation().take_touched();
    map(&mut pt, far + PAGE_SIZE).unwrap();
    assert_eq!(
        pt.translation().take_touched(),
        far_path,
        "another 1 GiB region starts at the cached level-1 table (the root with 64 KiB pages)"
    );
    if ROOT_LEVEL == 0 {
        // Another level-0 region (512 GiB, 128 TiB) walks from the root.
        let other = far + crate::descriptor::level_size(0);
        map(&mut pt, other).unwrap(); // General: builds the path.
        map(&mut pt, r0 + 2 * PAGE_SIZE).unwrap(); // The cache holds r0's region again.
        pt.translation().take_touched();
        map(&mut pt, other + PAGE_SIZE).unwrap();
        assert!(
            pt.translation().take_touched().contains(&root),
            "another level-0 region walks from the root"
        );
        let r = pt.unmap(VirtAddr(other), 2 * PAGE_SIZE).unwrap();
        r.release(pt.translation_mut());
    }
    // Empty the 1 GiB region of r0 and r1: its level-2 table is detached.
    let r = pt.unmap(VirtAddr(r0 & !(span - 1)), span).unwrap();
    r.release(pt.translation_mut());
    assert_eq!(pt.table_at(r0, 2), None);
    map(&mut pt, r1).unwrap();
    assert_eq!(pt.translate(VirtAddr(r1)), Some(pa(r1)));
    assert_eq!(pt.translate(VirtAddr(r0)), None);
    map(&mut pt, r0).unwrap();
    assert_eq!(pt.translate(VirtAddr(r0)), Some(pa(r0)));
    assert_ne!(pt.table_at(r0, 2), None);
    pt.check_occupancy();
}

/// Unmapping the last pages of a table by a range that covers only part of it detaches the
/// emptied tables, level by level up to (not including) the root, through the fast path (one
/// 2 MiB region) and the general path (a range crossing regions) alike.
#[test]
fn partial_unmaps_that_empty_tables_detach_them() {
    let a = Attributes::kernel_data();
    // (pages mapped, range unmapped): one page in a region; two pages across a 2 MiB boundary;
    // pages at both ends of a 1 GiB region's tables.
    let cases: [(u64, u64, u64); 4] = [
        (0x4000_0000 + 5 * PAGE_SIZE, PAGE_SIZE, PAGE_SIZE),
        (0x4000_0000 + 5 * PAGE_SIZE, 3 * PAGE_SIZE, PAGE_SIZE),
        (0x4000_0000 + crate::addr::BLOCK_2M - PAGE_SIZE, 2 * PAGE_SIZE, 2 * PAGE_SIZE),
        (2 * crate::addr::BLOCK_1G - PAGE_SIZE, 2 * PAGE_SIZE, 2 * PAGE_SIZE),
    ];
    for (start, mapped, unmapped_each) in cases {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(start), PhysAddr(0x8000_0000), mapped, a, Constraints::NONE).unwrap();
        let in_use = pt.stats().tables_in_use();
        let mut detached = 0;
        let mut off = 0;
        while off < mapped {
            let r = pt.unmap(VirtAddr(start + off), unmapped_each).unwrap();
            detached += r.detached_tables();
            r.release(pt.translation_mut());
            off += unmapped_each;
        }
        assert_eq!(pt.stats().tables_in_use(), 1, "{start:#x}: only the root is left");
        assert_eq!(detached as u64, in_use - 1, "{start:#x}");
        assert!(pt.is_empty_table(pt.root), "{start:#x}");
    }
}

/// Calls on many pages inside one 2 MiB region stay on the fast path too (only the last-level
/// table is touched, and for an unmap the level-2 entry holding its count) when nothing needs the general path: protecting whole contiguous runs,
/// in place or (on a table that is not live) with a change of memory type, and unmapping whole
/// runs, one or several.
#[test]
fn whole_runs_inside_one_region_stay_on_the_fast_path() {
    let a = Attributes::kernel_data();
    let region = 0x4000_0000u64;
    let run = PAGE_RUN as u64;
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(VirtAddr(region), PhysAddr(0x8000_0000), 2 * run * PAGE_SIZE, a, Constraints::NONE).unwrap();
    let l3 = pt.table_at(region, 3).unwrap().0;
    // A page elsewhere in the region keeps the table, and fills the last-table cache.
    let elsewhere = region + crate::addr::BLOCK_2M / 2;
    pt.map(VirtAddr(elsewhere), PhysAddr(0x9000_0000), PAGE_SIZE, a, Constraints::NONE).unwrap();
    assert!(pt.query(VirtAddr(region)).unwrap().contiguous);
    pt.translation().take_touched();
    for (what, attrs) in [("in place", Attributes::kernel_rodata()), ("memory type", Attributes::device())] {
        let r = pt.protect(VirtAddr(region), 2 * run * PAGE_SIZE, attrs).unwrap();
        assert_eq!(pt.translation().take_touched(), [l3], "protect, {what}");
        assert_eq!(r.leaves_changed(), 2 * run, "{what}");
        r.release(pt.translation_mut());
        let leaf = pt.query(VirtAddr(region + (2 * run - 1) * PAGE_SIZE)).unwrap();
        assert!(leaf.contiguous && leaf.attrs == attrs, "{what}: {leaf:?}");
        pt.translation().take_touched(); // `query` walks from the root.
    }
    // One whole run, the first of a pair aligned to two runs (128 KiB with 4 KiB pages).
    let r = pt.protect(VirtAddr(region), run * PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
    assert_eq!(pt.translation().take_touched(), [l3], "protect of one whole run");
    assert_eq!(r.leaves_changed(), run);
    r.release(pt.translation_mut());
    // The unmap also updates the table's occupancy count, in the level-2 table above it.
    let l2 = pt.table_at(region, 2).unwrap().0;
    pt.translation().take_touched();
    let r = pt.unmap(VirtAddr(region), 2 * run * PAGE_SIZE).unwrap();
    assert_eq!(pt.translation().take_touched(), [l2.min(l3), l2.max(l3)], "unmap of two whole runs");
    assert_eq!(r.leaves_changed(), 2 * run);
    r.release(pt.translation_mut());
    assert_eq!(pt.translate(VirtAddr(region)), None);
    assert_eq!(pt.translate(VirtAddr(elsewhere)), Some(PhysAddr(0x9000_0000)));
}

/// Unmapping part of a contiguous run unfolds the rest of it (the hint may only cover a whole,
/// uniform run), wherever the run is: the first run of the address space (offset 0) included,
/// and whether the cut is at the start or the end of the range; with the two runs on either
/// side of a 2 MiB boundary, ranges crossing it go through the general path, one table at a time.
#[test]
fn unmapping_part_of_a_run_unfolds_it_everywhere() {
    let a = Attributes::kernel_data();
    let run = PAGE_RUN as u64;
    for base in [0u64, 0x4000_0000, 0x4000_0000 + crate::addr::BLOCK_2M - run * PAGE_SIZE] {
        // (first page unmapped, pages unmapped) relative to two runs at `base`.
        for (first, count) in [(1u64, 2u64), (0, run + 1), (run - 1, run + 1), (run - 2, 2)] {
            let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
            pt.map(VirtAddr(base), PhysAddr(0x8000_0000), 2 * run * PAGE_SIZE, a, Constraints::NONE).unwrap();
            let r = pt.unmap(VirtAddr(base + first * PAGE_SIZE), count * PAGE_SIZE).unwrap();
            r.release(pt.translation_mut());
            for i in 0..2 * run {
                let leaf = pt.query(VirtAddr(base + i * PAGE_SIZE));
                if (first..first + count).contains(&i) {
                    assert!(leaf.is_none(), "{base:#x} {first}+{count}: page {i} still mapped");
                    continue;
                }
                let leaf = leaf.unwrap();
                assert_eq!(leaf.pa, PhysAddr(0x8000_0000 + i * PAGE_SIZE));
                let first_of_run = i / run * run;
                let run_cut = (first_of_run..first_of_run + run).any(|j| (first..first + count).contains(&j));
                assert_eq!(leaf.contiguous, !run_cut, "{base:#x} {first}+{count}: page {i}");
            }
        }
    }
}

/// Writes `d` into the last-level entry translating offset `off` (its table must exist), keeping
/// the table's occupancy count right: how a test plants an encoding the crate never writes.
fn plant<T: Translation>(pt: &mut PageTable<T>, off: u64, d: Descriptor) {
    let l2 = pt.table_at(off, 2).unwrap();
    let l3 = pt.table_at(off, 3).unwrap();
    let old = pt.read(l3, index_of(off, 3));
    pt.write(l3, index_of(off, 3), d);
    let parent = pt.read(l2, index_of(off, 2));
    let count = occupancy(parent) + usize::from(occupied(d)) - usize::from(occupied(old));
    pt.write(l2, index_of(off, 2), with_occupancy(parent, count));
    pt.check_occupancy();
}

/// A reserved encoding (valid bit set but not a page: it translates nothing, and the walker
/// faults on it, so no TLB holds it) inside an unmapped range is cleared with the range, and
/// a table it was the last occupant of is detached: `unmap` leaves every entry of its range
/// invalid, on the one-page path, on the fast path (one 2 MiB region), on the general path (a
/// range crossing regions or covering whole tables), and when staged on a live table. One
/// outside the range keeps its table (the next test).
#[test]
fn unmap_clears_reserved_entries_in_its_range() {
    let a = Attributes::kernel_data();
    let reserved = Descriptor::from_bits(0b01);
    assert_eq!(reserved.kind(3), DescriptorKind::Reserved);
    let region = 0x4000_0000u64;
    // (first page mapped, pages mapped, reserved entry (page offset), unmapped range)
    let cases: [(u64, u64, u64, (u64, u64)); 5] = [
        (0, 4, 1, (0, 4)),           // fast path
        (510, 4, 511, (510, 4)),     // general path: crosses 2 MiB
        (0, 4, 7, (0, 512)),         // general path: the whole table
        (0, 4, 7, (0, 1024)),        // general path: whole tables, crossing 2 MiB
        (100, 4, 511, (0, 512 + 1)), // general path, the reserved entry last
    ];
    for staged in [false, true] {
        for (first, count, at, (lo, n)) in cases {
            let what = std::format!("staged {staged}: pages {first}+{count}, reserved {at}, unmap {lo}+{n}");
            let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
            let page = |i: u64| VirtAddr(region + i * PAGE_SIZE);
            pt.map(page(first), PhysAddr(0x8000_0000), count * PAGE_SIZE, a, Constraints::NONE).unwrap();
            plant(&mut pt, page(at).0, reserved);
            let r = unmap_via(&mut pt, staged, page(lo).0, n * PAGE_SIZE);
            r.release(pt.translation_mut());
            assert_eq!(pt.stats().tables_in_use(), 1, "{what}: only the root is left");
            assert!(pt.is_empty_table(pt.root), "{what}");
        }
        // The one-page path (`unmap_page`): the reserved entry unmapped alone, after the page
        // beside it, is its table's last occupant.
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        let page = |i: u64| VirtAddr(region + i * PAGE_SIZE);
        pt.map(page(0), PhysAddr(0x8000_0000), PAGE_SIZE, a, Constraints::NONE).unwrap();
        plant(&mut pt, page(1).0, reserved);
        for i in [0, 1] {
            let r = unmap_via(&mut pt, staged, page(i).0, PAGE_SIZE);
            r.release(pt.translation_mut());
        }
        assert_eq!(pt.stats().tables_in_use(), 1, "staged {staged}: one page, then the reserved entry alone");
        assert!(pt.is_empty_table(pt.root));
    }
}

/// A reserved encoding in the root (a level-0 "block": 512 GiB that translate nothing) is
/// cleared by an unmap that covers it wholly, directly or staged, and kept by one that covers
/// part of it.
#[test]
#[cfg_attr(
    all(feature = "lpa2", not(feature = "granule-16k")),
    ignore = "with 4 KiB pages and LPA2 (DS) a level-0 0b01 is a 512 GiB block: no root encoding is reserved"
)]
fn unmap_clears_a_reserved_root_entry_it_covers() {
    // A root entry's span: 512 GiB, 128 TiB, 4 TiB (level 1) with 4, 16, 64 KiB pages.
    let span = level_size(ROOT_LEVEL);
    let reserved = Descriptor::from_bits(0b01);
    assert_eq!(reserved.kind(ROOT_LEVEL), DescriptorKind::Reserved);
    for staged in [false, true] {
        for (lo, size, cleared) in [(span, span, true), (0, 2 * span, true), (span, span / 2, false)] {
            let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
            let root = pt.root;
            pt.write(root, 1, reserved);
            let r = unmap_via(&mut pt, staged, lo, size);
            assert!(!r.needs_flush(), "nothing was cached");
            r.release(pt.translation_mut());
            let expected = if cleared { Descriptor::INVALID } else { reserved };
            assert_eq!(pt.read(root, 1), expected, "staged {staged}, unmap {lo:#x}+{size:#x}");
        }
    }
}

/// A reserved encoding outside the unmapped range stays, and keeps its table.
#[test]
fn a_reserved_entry_outside_the_range_keeps_its_table() {
    let a = Attributes::kernel_data();
    let region = 0x4000_0000u64;
    let reserved = Descriptor::from_bits(0b01);
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(region), PhysAddr(0x8000_0000), 4 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        let l3 = pt.table_at(region, 3).unwrap();
        plant(&mut pt, region + 9 * PAGE_SIZE, reserved);
        let r = unmap_via(&mut pt, staged, region, 4 * PAGE_SIZE);
        assert_eq!(r.detached_tables(), 0);
        r.release(pt.translation_mut());
        assert_eq!(pt.read(l3, 9), reserved);
        assert_eq!(pt.table_at(region, 3), Some(l3), "staged {staged}");
        assert_eq!(pt.translate(VirtAddr(region)), None);
    }
}

/// The blocks of a level-2 run and the pages of a level-3 run (16 and 16, 32 and 128, 32 and
/// 32 with 4, 16 and 64 KiB pages), and a VA and a PA aligned to a level-2 run (32 MiB, 1 GiB,
/// 16 GiB): 1 GiB and 2 GiB, but 16 GiB both with 64 KiB pages.
fn run_layout() -> (u64, u64, u64, u64) {
    let (blocks, pages) = (BLOCK_RUN as u64, PAGE_RUN as u64);
    let span = blocks * crate::addr::BLOCK_2M;
    (blocks, pages, 0x4000_0000u64.next_multiple_of(span), 0x8000_0000u64.next_multiple_of(span))
}

/// Runs wholly inside a protect keep their hint when the general path handles the call (level-2
/// runs of 16 blocks; level-3 runs beside a run the range cuts), on a table that is not live and,
/// for a permission change, on a live one; only a cut run loses it.
#[test]
fn runs_wholly_inside_the_range_keep_their_hint_on_the_general_path() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    let a = Attributes::kernel_data();
    let ro = Attributes::kernel_rodata();
    let (blocks, pages, va, pa) = run_layout();
    // Level 2: two runs of blocks (64 MiB of 2 MiB blocks with 4 KiB pages); protect the first
    // run, then both.
    for live in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(va), PhysAddr(pa), 2 * blocks * MB2, a, Constraints::NO_1G_BLOCKS).unwrap();
        pt.set_live(live);
        for (size, protected) in [(blocks * MB2, blocks), (2 * blocks * MB2, 2 * blocks)] {
            let r = pt.protect(VirtAddr(va), size, ro).unwrap();
            r.release(pt.translation_mut());
            for i in 0..2 * blocks {
                let leaf = pt.query(VirtAddr(va + i * MB2)).unwrap();
                assert!(leaf.level == 2 && leaf.contiguous, "live {live}, block {i}: {leaf:?}");
                assert_eq!(leaf.attrs, if i < protected { ro } else { a }, "live {live}, block {i}");
            }
        }
    }
    // Level 3: three runs; a protect from the second page cuts the first run (the general path)
    // and covers the other two wholly.
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(VirtAddr(va), PhysAddr(pa), 3 * pages * PAGE_SIZE, a, Constraints::NONE).unwrap();
    let r = pt.protect(VirtAddr(va + PAGE_SIZE), (3 * pages - 1) * PAGE_SIZE, ro).unwrap();
    r.release(pt.translation_mut());
    for i in 0..3 * pages {
        let leaf = pt.query(VirtAddr(va + i * PAGE_SIZE)).unwrap();
        assert_eq!(leaf.contiguous, i >= pages, "page {i}");
        assert_eq!(leaf.attrs, if i == 0 { a } else { ro }, "page {i}");
    }
}

/// A staged change that cuts a 1 GiB block at 2 MiB boundaries splits only that block (into
/// 2 MiB blocks, none of which is cut): the reservation counted for the splits is exact (the
/// stager asserts it), and the leaves are right.
#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "cuts a level-1 block, which only the 4 KiB granule has (48-bit addresses)"
)]
fn staged_cut_of_a_1gib_block_on_2mib_boundaries_splits_once() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    const GB: u64 = crate::addr::BLOCK_1G;
    let a = Attributes::kernel_data();
    let ro = Attributes::kernel_rodata();
    for (lo, size) in [(GB + 2 * MB2, 2 * MB2), (GB, MB2), (2 * GB - MB2, MB2)] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(GB), PhysAddr(2 * GB), GB, a, Constraints::NONE).unwrap();
        assert_eq!(pt.query(VirtAddr(GB)).unwrap().level, 1);
        pt.set_live(true);
        let (record, counts) = stage_and_finish(&mut pt, lo, size, StagedOp::Protect(|_| ro));
        assert_eq!(counts.splits, 1, "{lo:#x}+{size:#x}");
        record.release(pt.translation_mut());
        for probe in [GB, lo - MB2, lo, lo + size - MB2, lo + size, 2 * GB - MB2] {
            if !(GB..2 * GB).contains(&probe) {
                continue;
            }
            let leaf = pt.query(VirtAddr(probe)).unwrap();
            assert_eq!(leaf.level, 2, "{probe:#x}");
            assert_eq!(leaf.pa, PhysAddr(2 * GB + probe - GB));
            assert_eq!(leaf.attrs, if (lo..lo + size).contains(&probe) { ro } else { a }, "{probe:#x}");
        }
    }
}

/// Stages `Protect(|_| attrs)` of `[va, va + size)` on the live table `pt` and finishes it.
fn staged_protect(pt: &mut PageTable<Frames>, va: u64, size: u64, attrs: Attributes) -> BbmCounts {
    let (record, counts) = stage_and_finish(pt, va, size, StagedOp::Protect(|_| attrs));
    record.release(pt.translation_mut());
    counts
}

/// Staged on a live table, a change keeps the hint of every run wholly inside its range and
/// unfolds exactly the runs it cuts (counting them, and the blocks it splits), at level 2 and
/// at level 3, at offset 0 too.
#[test]
fn staged_changes_unfold_exactly_the_runs_they_cut() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    let a = Attributes::kernel_data();
    let ro = Attributes::kernel_rodata();
    let (blocks, pages, va, pa) = run_layout();
    // Level 2: two runs of blocks (16 each with 4 KiB pages); the first run whole, then half a
    // block of the second.
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(VirtAddr(va), PhysAddr(pa), 2 * blocks * MB2, a, Constraints::NO_1G_BLOCKS).unwrap();
    pt.set_live(true);
    let c = staged_protect(&mut pt, va, blocks * MB2, ro);
    assert_eq!((c.unfolds, c.splits), (0, 0));
    for i in 0..2 * blocks {
        let leaf = pt.query(VirtAddr(va + i * MB2)).unwrap();
        assert!(leaf.level == 2 && leaf.contiguous, "block {i}: {leaf:?}");
        assert_eq!(leaf.attrs, if i < blocks { ro } else { a }, "block {i}");
    }
    let c = staged_protect(&mut pt, va + blocks * MB2 + MB2 / 2, MB2 / 2, ro);
    assert_eq!((c.unfolds, c.splits), (1, 1));
    assert!(pt.query(VirtAddr(va)).unwrap().contiguous, "the first run is not cut");
    assert!(!pt.query(VirtAddr(va + (blocks + 1) * MB2)).unwrap().contiguous, "the second run is cut");
    let half = pt.query(VirtAddr(va + blocks * MB2 + MB2 / 2)).unwrap();
    assert_eq!((half.level, half.attrs), (3, ro));
    // Level 3 at offset 0: three runs; from the second page on cuts the first run only.
    for base in [0u64, va] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(base), PhysAddr(pa), 3 * pages * PAGE_SIZE, a, Constraints::NONE).unwrap();
        pt.set_live(true);
        let c = staged_protect(&mut pt, base + PAGE_SIZE, (3 * pages - 1) * PAGE_SIZE, ro);
        assert_eq!((c.unfolds, c.splits), (1, 0), "{base:#x}");
        for i in 0..3 * pages {
            let leaf = pt.query(VirtAddr(base + i * PAGE_SIZE)).unwrap();
            assert_eq!(leaf.contiguous, i >= pages, "{base:#x}: page {i}");
            assert_eq!(leaf.attrs, if i == 0 { a } else { ro }, "{base:#x}: page {i}");
        }
    }
}

/// A 64 KiB fold is staged only for a run that is aligned, in this table's half, and whole: a
/// misaligned address (even where the physical addresses are aligned), an address of the other
/// half with the same offset, and a run whose first page is a hole are refused, and nothing is
/// written.
#[test]
fn folds_only_aligned_whole_runs_of_this_half() {
    let a = Attributes::kernel_data();
    let va = 0x4000_0000u64;
    let (pages, run) = (PAGE_RUN as u64, PAGE_RUN as u64 * PAGE_SIZE);
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    // Pages 1..=16 (a run's worth) of the region map the run-aligned PA 0x8000_0000..: the VA is
    // a page off.
    let c = Constraints::NO_CONTIGUOUS;
    pt.map(VirtAddr(va + PAGE_SIZE), PhysAddr(0x8000_0000), run, a, c).unwrap();
    // Pages 1..=15 of the next run map PA one page on: with a hole at page 0 they would line up
    // with a run at PA 0.
    pt.map(VirtAddr(va + run + PAGE_SIZE), PhysAddr(PAGE_SIZE), (pages - 1) * PAGE_SIZE, a, c).unwrap();
    pt.set_live(true);
    let l3 = pt.table_at(va, 3).unwrap();
    let before: Vec<u64> = (0..ENTRIES_PER_TABLE).map(|i| pt.read(l3, i).bits()).collect();
    for probe in [VirtAddr(va + PAGE_SIZE), VirtAddr(0xffff_0000_0000_0000 | va), VirtAddr(va + run)] {
        let mut record = PendingFlush::new(VaRange::Lower);
        let mut counts = BbmCounts::default();
        assert!(!pt.stage_fold(probe, &mut record, &mut counts), "{probe:?}");
        assert_eq!((counts.folds, record.leaves_changed()), (0, 0), "{probe:?}");
    }
    let after: Vec<u64> = (0..ENTRIES_PER_TABLE).map(|i| pt.read(l3, i).bits()).collect();
    assert_eq!(before, after);
}

/// An explicit demotion splits a block one level: the range staged is the next-level piece
/// holding the address (whatever its offset in the piece); for a page of a contiguous run it is
/// that page; a plain page or a hole has nothing to demote.
#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "demotes a level-1 block, which only the 4 KiB granule has (48-bit addresses)"
)]
fn demotion_range_is_the_next_level_piece_holding_the_address() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    const GB: u64 = crate::addr::BLOCK_1G;
    let a = Attributes::kernel_data();
    let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    pt.map(VirtAddr(GB), PhysAddr(2 * GB), GB, a, Constraints::NONE).unwrap();
    pt.map(VirtAddr(2 * GB), PhysAddr(0x8000_0000), MB2, a, Constraints::NONE).unwrap();
    pt.map(VirtAddr(2 * GB + MB2), PhysAddr(0x9000_0000), 16 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    pt.map(VirtAddr(2 * GB + MB2 + 0x2_0000), PhysAddr(0x9100_0000), PAGE_SIZE, a, Constraints::NONE)
        .unwrap();
    let cases = [
        (GB + 3 * MB2 + 0x5000, Some((GB + 3 * MB2, MB2))),
        (GB + 0x1234, Some((GB, MB2))),
        (2 * GB - 1, Some((2 * GB - MB2, MB2))),
        (2 * GB + 0x1_2345, Some((2 * GB + 0x1_2000, PAGE_SIZE))),
        (2 * GB + MB2 + 0x7abc, Some((2 * GB + MB2 + 0x7000, PAGE_SIZE))),
        (2 * GB + MB2 + 0x2_0000, None),
        (3 * GB, None),
    ];
    for (va, expected) in cases {
        let got = pt.demotion_range(VirtAddr(va)).map(|(v, s)| (v.0, s));
        assert_eq!(got, expected, "{va:#x}");
    }
}

/// The table-frame bound a remap reserves before it empties its range is exact on an empty
/// tree: the frames `map` then allocates, for pages, blocks and ranges crossing or ending on
/// table boundaries (a looser bound would reserve frames for nothing, and could fail for want of
/// them).
#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "BLOCK_1G is 64 GiB or 4 TiB there, and a case maps it as pages (too slow)"
)]
fn map_tables_bound_is_exact_on_an_empty_tree() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    const GB: u64 = crate::addr::BLOCK_1G;
    let a = Attributes::kernel_data();
    let none = Constraints::NONE;
    let cases = [
        (0, 0, PAGE_SIZE, none),
        (0, 0, MB2, Constraints::NO_BLOCKS),
        (0, 0, MB2, none),
        (MB2 - PAGE_SIZE, 0, 2 * PAGE_SIZE, none),
        (GB, 2 * GB, GB, none),
        (GB, 2 * GB, GB, Constraints::NO_1G_BLOCKS),
        (GB - MB2, 0, 2 * MB2, none),
        (GB - MB2, PAGE_SIZE, 2 * MB2, none),
        (GB - PAGE_SIZE, 0, GB + 2 * PAGE_SIZE, none),
        ((1 << 39) - MB2, 0, 2 * MB2, none),
        (5 * GB + 3 * MB2, 7 * MB2, 3 * GB + 5 * PAGE_SIZE, none),
    ];
    for (va, pa, size, c) in cases {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        let bound = pt.map_tables_bound(VirtAddr(va), PhysAddr(pa), size, c);
        pt.map(VirtAddr(va), PhysAddr(pa), size, a, c).unwrap();
        let allocated = pt.stats().tables_allocated - 1;
        assert_eq!(bound as u64, allocated, "{va:#x} -> {pa:#x} + {size:#x}, {c:?}");
    }
}

/// The argument check a remap runs before it empties its range refuses exactly what `map`
/// refuses on an empty table (so a remap with bad arguments fails before changing anything).
#[test]
fn check_map_args_refuses_what_map_refuses() {
    let a = Attributes::kernel_data();
    let cases = [
        (0x4000_0000u64, 0x8000_0000u64, PAGE_SIZE),
        (0x4000_0000, 0x8000_0800, PAGE_SIZE),
        (0x4000_0800, 0x8000_0000, PAGE_SIZE),
        (0x4000_0000, 0x8000_0000, 0x800),
        (0x4000_0000, 0x8000_0000, 0),
        ((1 << 48) - PAGE_SIZE, 0, 2 * PAGE_SIZE),
        (0xffff_8000_0000_0000, 0, PAGE_SIZE),
        (0x4000_0000, (1 << 48) - PAGE_SIZE, 2 * PAGE_SIZE),
    ];
    for (va, pa, size) in cases {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        let checked = pt.check_map_args(VirtAddr(va), PhysAddr(pa), size);
        let mapped = pt.map(VirtAddr(va), PhysAddr(pa), size, a, Constraints::NONE);
        assert_eq!(checked, mapped, "{va:#x} -> {pa:#x} + {size:#x}");
    }
    let pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
    assert_eq!(
        pt.check_map_args(VirtAddr(0x4000_0000), PhysAddr(0x8000_0800), PAGE_SIZE),
        Err(MapError::Misaligned)
    );
}

/// `absorb` keeps every flag either record has (whichever side has it), adds the leaf counts and
/// the table removals: the merged record asks for at least the flush of each.
#[test]
fn absorb_keeps_every_flag_of_either_record() {
    use crate::descriptor::UserAccess;
    let t = Frames::default();
    let kernel_text = Attributes::kernel_text();
    let user_data = Attributes::user(UserAccess::ReadWrite);
    // (a: global + executable + tables removed, 1 leaf; b: non-global, 2 leaves; empty)
    let a = || {
        let mut r = PendingFlush::new(VaRange::Lower);
        r.add_leaf(0x1000, PAGE_SIZE, kernel_text, None);
        r.note_table_removed();
        r
    };
    let b = || {
        let mut r = PendingFlush::new(VaRange::Lower);
        r.add_leaf(0x40_0000, PAGE_SIZE, user_data, None);
        r.add_leaf(0x40_1000, PAGE_SIZE, user_data, None);
        r
    };
    let empty = || PendingFlush::new(VaRange::Lower);
    let flags = |r: &PendingFlush| {
        (r.has_global(), r.has_non_global(), r.has_executable(), r.tables_removed(), r.leaves_changed())
    };
    for (mut x, y, expected) in [
        (a(), b(), (true, true, true, true, 3)),
        (b(), a(), (true, true, true, true, 3)),
        (a(), empty(), (true, false, true, true, 1)),
        (empty(), a(), (true, false, true, true, 1)),
        (b(), empty(), (false, true, false, false, 2)),
        (empty(), b(), (false, true, false, false, 2)),
    ] {
        x.absorb(y, &t);
        assert_eq!(flags(&x), expected);
        assert!(x.needs_flush());
    }
    assert!(!empty().needs_flush());
}

/// The occupancy count of the table translating `off` at `level` (2 or 3), read from the table
/// descriptor above it.
fn count_at<T: Translation>(pt: &PageTable<T>, off: u64, level: u32) -> usize {
    let parent = pt.table_at(off, level - 1).unwrap();
    let d = pt.read(parent, index_of(off, level - 1));
    assert!(d.is_table(level - 1), "no table at level {level} for {off:#x}");
    occupancy(d)
}

/// The occupancy counts (`occupancy.rs`) take exact values through maps, unmaps, protects and
/// splits, on the fast path and the general path, directly and staged; they reach a full table
/// (512) and leave the rest of the descriptor as the walker reads it.
#[test]
fn occupancy_counts_follow_every_operation() {
    const MB2: u64 = crate::addr::BLOCK_2M;
    let a = Attributes::kernel_data();
    let region = 0x4000_0000u64;
    let page = |i: u64| VirtAddr(region + i * PAGE_SIZE);
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(page(0), PhysAddr(0x8000_0000), 3 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        assert_eq!((count_at(&pt, region, 2), count_at(&pt, region, 3)), (1, 3), "staged {staged}");
        // The fast path (the walk cache holds the table now): one page, then several.
        pt.map(page(10), PhysAddr(0x9000_0000), PAGE_SIZE, a, Constraints::NONE).unwrap();
        pt.map(page(20), PhysAddr(0x9100_0000), 5 * PAGE_SIZE, a, Constraints::NONE).unwrap();
        assert_eq!(count_at(&pt, region, 3), 9);
        // A protect changes no count.
        let r = pt.protect(page(0), 30 * PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region, 3), 9);
        // A map into the next region, across the boundary (general path): a new table of 1.
        let last = ENTRIES_PER_TABLE as u64 - 1;
        pt.map(page(last), PhysAddr(0xa000_0000), 2 * PAGE_SIZE, a, Constraints::NO_BLOCKS).unwrap();
        assert_eq!((count_at(&pt, region, 3), count_at(&pt, region + MB2, 3)), (10, 1));
        assert_eq!(count_at(&pt, region, 2), 2);
        // Unmaps: one page (fast), a range with holes (fast), across the boundary (general).
        let r = unmap_via(&mut pt, staged, page(10).0, PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region, 3), 9, "staged {staged}");
        let r = unmap_via(&mut pt, staged, page(1).0, 21 * PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region, 3), 5, "staged {staged}: pages 0, 22, 23, 24 and the last");
        let r = unmap_via(&mut pt, staged, page(last).0, 2 * PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region, 3), 4, "staged {staged}");
        assert_eq!(count_at(&pt, region, 2), 1, "staged {staged}: the emptied table is detached");
        pt.check_occupancy();
        drop(pt);

        // A full table, and a level-2 block split by an unmap of one page: all but one left.
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(page(0), PhysAddr(0x8000_0000), MB2, a, Constraints::NO_BLOCKS).unwrap();
        assert_eq!(count_at(&pt, region, 3), ENTRIES_PER_TABLE);
        let n = ENTRIES_PER_TABLE as u64;
        pt.map(page(n), PhysAddr(0x8000_0000 + MB2), MB2, a, Constraints::NONE).unwrap();
        assert_eq!(pt.query(page(n)).unwrap().level, 2);
        let r = unmap_via(&mut pt, staged, page(n + 7).0, PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region + MB2, 3), ENTRIES_PER_TABLE - 1, "staged {staged}");
        assert_eq!(count_at(&pt, region, 3), ENTRIES_PER_TABLE);
        assert_eq!(count_at(&pt, region, 2), 2);
        // The count is invisible to the walker: the same table descriptor with its count cleared.
        let l2 = pt.table_at(region, 2).unwrap();
        let d = pt.read(l2, index_of(region, 2));
        assert_eq!(with_occupancy(d, 0), Descriptor::table(d.output_address()));
        assert_eq!(d.output_address(), pt.table_at(region, 3).unwrap());
        pt.check_occupancy();
    }
}

/// A reserved encoding inside a range whose last-level walk takes the per-entry loop (the range
/// cuts a contiguous run) is cleared and leaves the table's count, directly and staged, so the
/// table is detached when nothing else is left in it.
#[test]
fn a_reserved_entry_beside_a_cut_run_leaves_the_count() {
    let a = Attributes::kernel_data();
    let region = 0x4000_0000u64;
    let page = |i: u64| region + i * PAGE_SIZE;
    let run = PAGE_RUN as u64;
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(page(0)), PhysAddr(0x8000_0000), run * PAGE_SIZE, a, Constraints::NONE).unwrap();
        assert!(pt.query(VirtAddr(page(0))).unwrap().contiguous);
        plant(&mut pt, page(run + 4), Descriptor::from_bits(0b01));
        assert_eq!(count_at(&pt, region, 3) as u64, run + 1);
        // Cuts the run (its second half) and covers the reserved entry.
        let r = unmap_via(&mut pt, staged, page(run / 2), run * PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(count_at(&pt, region, 3) as u64, run / 2, "staged {staged}");
        pt.check_occupancy();
        let r = unmap_via(&mut pt, staged, page(0), run / 2 * PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(pt.stats().tables_in_use(), 1, "staged {staged}: only the root is left");
    }
}

/// The run holding the last page of a range is the one at `hi - page`: an unmap of all but the
/// last page of two contiguous runs (the first whole, the second cut one page short of its
/// end) leaves that page without its hint, directly and staged on a live table alike. Two guard
/// markers just below the runs, in the same last-level table, go with the unmap (the cut run
/// sends that table through the general loop, which counts them as vacated).
#[test]
fn an_unmap_ending_one_page_short_of_a_runs_end_clears_that_runs_hint() {
    let attrs = Attributes::kernel_data();
    let run = PAGE_RUN as u64 * PAGE_SIZE;
    let (va, pa) = (8 * run, 0x8000_0000);
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(va), PhysAddr(pa), 2 * run, attrs, Constraints::NONE).unwrap();
        pt.install_guards(VirtAddr(va - 2 * PAGE_SIZE), 2 * PAGE_SIZE).unwrap();
        assert!(pt.query(VirtAddr(va + 2 * run - PAGE_SIZE)).unwrap().contiguous);
        let r = unmap_via(&mut pt, staged, va - 2 * PAGE_SIZE, 2 * run + PAGE_SIZE);
        assert!(!pt.is_guard(VirtAddr(va - PAGE_SIZE)), "staged {staged}");
        r.release(pt.translation_mut());
        let last = pt.query(VirtAddr(va + 2 * run - PAGE_SIZE)).unwrap();
        assert_eq!(
            (last.pa, last.size, last.contiguous),
            (PhysAddr(pa + 2 * run - PAGE_SIZE), PAGE_SIZE, false),
            "staged {staged}"
        );
        for off in [0, run - PAGE_SIZE, run, 2 * run - 2 * PAGE_SIZE] {
            assert_eq!(pt.query(VirtAddr(va + off)), None, "staged {staged}, offset {off:#x}");
        }
        pt.check_occupancy();
    }
}

/// A page unmapped in the middle of one block of a contiguous run of blocks: that block is
/// split around the page (its other pages stay, at their frames), and the other blocks of the
/// run stay blocks without the hint, directly and staged on a live table alike.
#[test]
fn a_page_unmapped_inside_a_block_of_a_contiguous_block_run() {
    let attrs = Attributes::kernel_data();
    let block = crate::addr::BLOCK_2M;
    let run = BLOCK_RUN as u64 * block;
    let (va, pa) = (2 * run, 4 * run);
    let hole = va + 3 * block + 5 * PAGE_SIZE;
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(va), PhysAddr(pa), run, attrs, Constraints::NONE).unwrap();
        let first = pt.query(VirtAddr(va)).unwrap();
        assert_eq!((first.level, first.contiguous), (2, true));
        let r = unmap_via(&mut pt, staged, hole, PAGE_SIZE);
        r.release(pt.translation_mut());
        assert_eq!(pt.query(VirtAddr(hole)), None, "staged {staged}");
        for at in [hole - PAGE_SIZE, hole + PAGE_SIZE, va + 3 * block, va + 4 * block - PAGE_SIZE] {
            let leaf = pt.query(VirtAddr(at)).unwrap();
            assert_eq!(
                (leaf.level, leaf.translate(VirtAddr(at))),
                (3, PhysAddr(pa + (at - va))),
                "staged {staged}, {at:#x}"
            );
        }
        for i in [0, 2, 4, BLOCK_RUN as u64 - 1] {
            let leaf = pt.query(VirtAddr(va + i * block)).unwrap();
            assert_eq!(
                (leaf.level, leaf.pa, leaf.contiguous),
                (2, PhysAddr(pa + i * block), false),
                "staged {staged}, block {i}"
            );
        }
        pt.check_occupancy();
    }
}

/// The same at the bottom of the address space, where the cut run's base is 0: all but the last
/// page of a run at VA 0 unmapped leaves that page without its hint.
#[test]
fn an_unmap_of_all_but_the_last_page_of_the_run_at_address_0_clears_its_hint() {
    let attrs = Attributes::kernel_data();
    let run = PAGE_RUN as u64 * PAGE_SIZE;
    for staged in [false, true] {
        let mut pt = PageTable::new(Frames::default(), VaRange::Lower).unwrap();
        pt.map(VirtAddr(0), PhysAddr(0x8000_0000), run, attrs, Constraints::NONE).unwrap();
        assert!(pt.query(VirtAddr(0)).unwrap().contiguous);
        let r = unmap_via(&mut pt, staged, 0, run - PAGE_SIZE);
        r.release(pt.translation_mut());
        let last = pt.query(VirtAddr(run - PAGE_SIZE)).unwrap();
        assert_eq!((last.size, last.contiguous), (PAGE_SIZE, false), "staged {staged}");
        assert_eq!(pt.query(VirtAddr(0)), None);
        pt.check_occupancy();
    }
}
