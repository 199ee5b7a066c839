//! The figures of the course (docs/translation.md, docs/invalidation.md, docs/address-space.md) as
//! tests: the VA split into table indices, a walk through four levels read descriptor by
//! descriptor, the example program that unmaps 511 pages and checks the two range operations of
//! its flush, and the gap tree's searches for the lowest fit and the nearest placement.

#[path = "../examples/map_unmap_flush.rs"]
#[allow(dead_code, reason = "the example's `main` is run by a test below, not as a binary")]
mod example;

use example::HeapFrames;
use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, UserAccess};
use mm::paging::{Constraints, PageTable, Translation, VaRange};

/// The address of docs/translation.md's figure: indices 0x0a3, 0x1c5, 0x0b2, 0x1f0, offset 0xabc.
const FIGURE_VA: u64 = (0x0a3 << 39) | (0x1c5 << 30) | (0x0b2 << 21) | (0x1f0 << 12) | 0xabc;

#[test]
fn the_va_splits_into_four_nine_bit_indices_and_a_page_offset() {
    assert_eq!(FIGURE_VA, 0x0000_51f1_565f_0abc);
    let va = VirtAddr(FIGURE_VA);
    let indices: Vec<usize> = (0..4).map(|level| va.table_index(level)).collect();
    assert_eq!(indices, [0x0a3, 0x1c5, 0x0b2, 0x1f0]);
    assert_eq!(FIGURE_VA & (PAGE_SIZE - 1), 0xabc);
    // The kernel's half: the same indices, bits [63:48] all ones select TTBR1.
    let upper = VirtAddr(FIGURE_VA | 0xffff_0000_0000_0000);
    assert!(upper.is_upper() && upper.is_canonical());
    assert_eq!((0..4).map(|level| upper.table_index(level)).collect::<Vec<_>>(), indices);
}

#[test]
fn a_walk_reads_one_table_descriptor_per_level_then_the_page() {
    let mut table = PageTable::new(HeapFrames::default(), VaRange::Lower).unwrap();
    let va = VirtAddr(FIGURE_VA & !(PAGE_SIZE - 1));
    let pa = PhysAddr(0x8765_4000);
    table.map(va, pa, PAGE_SIZE, Attributes::user(UserAccess::ReadWrite), Constraints::NONE).unwrap();

    // Walk as the hardware does: the root's address (TTBR0_EL1), then at each level the entry
    // the index selects. Bits [1:0] = 0b11 is a table descriptor at levels 0-2 and a page
    // descriptor at level 3; bits [47:12] are the next table's (or the page's) address.
    let mut next = table.root_pa();
    for level in 0..4 {
        let entries = table.translation().table_ptr(next);
        // SAFETY: `next` is a frame of this table (the root or read from a table descriptor),
        // valid for reads while the table lives; nothing writes it during the walk.
        let descriptor = unsafe { entries.as_ref()[va.table_index(level)] };
        assert_eq!(descriptor & 0b11, 0b11, "level {level}: a table (0-2) or page (3) descriptor");
        next = PhysAddr(descriptor & 0x0000_ffff_ffff_f000);
    }
    assert_eq!(next, pa);
    assert_eq!(table.translate(VirtAddr(FIGURE_VA)), Some(PhysAddr(pa.0 + 0xabc)));
    // The root and one table at each of levels 1, 2 and 3.
    assert_eq!(table.translation().live, 4);

    let record = table.unmap(va, PAGE_SIZE).unwrap();
    record.release(table.translation_mut());
    let (mut frames, last) = table.destroy();
    last.release(&mut frames);
    assert_eq!(frames.live, 0);
}

#[test]
fn the_example_unmaps_511_pages_with_two_range_operations() {
    example::main();
}

/// The gap-tree figure of docs/address-space.md: seven mappings, in pages from `BASE`.
fn figure_map() -> mm::vm::VmMap {
    use mm::vm::{Layout, Prot, VmMap, VmaFlags};
    let mut map = VmMap::new(Layout::linux(0x1000_0000));
    for (first, end) in [(1, 2), (3, 4), (5, 8), (12, 13), (14, 15), (20, 22), (23, 24)] {
        map.map_kernel(page(first), (end - first) * PAGE_SIZE, Prot::RW, VmaFlags::default()).unwrap();
    }
    map
}

/// Base of the figure's page numbers (above `mmap_min_addr`, no code window placed).
const BASE: u64 = 0x4000_0000;

fn page(n: u64) -> u64 {
    BASE + n * PAGE_SIZE
}

#[test]
fn the_gap_tree_figure_finds_the_lowest_fits_and_the_nearest_placement() {
    use mm::vm::tree::{Dir, GapQuery};
    let map = figure_map();
    let lowest =
        |len: u64| map.tree().find_gap(&GapQuery::new(page(0), page(30), len * PAGE_SIZE, Dir::Lowest));
    assert_eq!(lowest(1), Some(page(0)));
    assert_eq!(lowest(3), Some(page(8)));
    assert_eq!(lowest(5), Some(page(15)));
    assert_eq!(lowest(6), Some(page(24)));
    // Near placement: target page 18, two pages, radius ten pages: [17, 19), distance 1.
    assert_eq!(map.find_near(page(18), 2 * PAGE_SIZE, 10 * PAGE_SIZE, false), Ok(page(17)));
}
