//! Host tests of the table engine, over an emulated physical memory that catches leaks, double
//! frees and accesses to frames that are not allocated.
//!
//! Long (one suite by topic, see the section rules) because every test shares the emulated memory,
//! the invariant checker and the reference model defined at the top.

use core::ptr::NonNull;
use std::boxed::Box;
use std::collections::BTreeMap;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;

use super::occupancy::{occupancy, with_occupancy};
use super::*;
use crate::addr::{BLOCK_1G, BLOCK_2M};
use crate::descriptor::{DescriptorKind, level_size};
use crate::descriptor::{MemoryType, UserAccess};
use crate::granule::Format;
use crate::test_support::{per_granule, per_lpa2};

/// One contiguous run of pages (64 KiB with 4 KiB pages, 2 MiB with 16 or 64 KiB).
const KIB64: u64 = PAGE_RUN as u64 * PAGE_SIZE;

/// Emulated physical memory: frames at fake physical addresses, a poison pattern in every newly
/// allocated frame, and an optional failure after a number of allocations.
struct EmuMem {
    frames: Vec<NonNull<[u64; ENTRIES_PER_TABLE]>>,
    allocated: Vec<bool>,
    free: Vec<usize>,
    base: u64,
    /// Successful allocations still allowed; `None` = unlimited.
    fail_after: Option<usize>,
    allocations: usize,
    deallocations: usize,
}

impl EmuMem {
    fn new() -> Self {
        Self::with_base(0x8_0000_0000)
    }

    fn with_base(base: u64) -> Self {
        Self {
            frames: Vec::new(),
            allocated: Vec::new(),
            free: Vec::new(),
            base,
            fail_after: None,
            allocations: 0,
            deallocations: 0,
        }
    }

    fn live_frames(&self) -> usize {
        self.allocated.iter().filter(|&&a| a).count()
    }

    fn index(&self, pa: PhysAddr) -> usize {
        assert!(pa.is_page_aligned(), "misaligned table address {pa:?}");
        let i = ((pa.0 - self.base) / PAGE_SIZE) as usize;
        assert!(i < self.frames.len() && self.allocated[i], "access to a frame not allocated: {pa:?}");
        i
    }
}

impl Drop for EmuMem {
    fn drop(&mut self) {
        for f in self.frames.drain(..) {
            // SAFETY: every pointer came from `Box::into_raw` and is dropped once.
            drop(unsafe { Box::from_raw(f.as_ptr()) });
        }
    }
}

// SAFETY: frames are distinct heap allocations of 4096 bytes, 8-byte aligned, live until the
// EmuMem is dropped; `table_ptr` refuses frames that are not allocated.
unsafe impl Translation for EmuMem {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        if let Some(n) = self.fail_after.as_mut() {
            if *n == 0 {
                return None;
            }
            *n -= 1;
        }
        self.allocations += 1;
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.frames.push(NonNull::new(Box::into_raw(Box::new([0u64; ENTRIES_PER_TABLE]))).unwrap());
                self.allocated.push(false);
                self.frames.len() - 1
            }
        };
        self.allocated[i] = true;
        // Poison: every word a valid descriptor, so a missing zeroing shows.
        // SAFETY: the frame is allocated and no reference to it exists.
        unsafe { self.frames[i].as_ptr().write([u64::MAX; ENTRIES_PER_TABLE]) };
        Some(PhysAddr(self.base + i as u64 * PAGE_SIZE))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        let i = self.index(pa); // panics on a double free
        self.allocated[i] = false;
        self.free.push(i);
        self.deallocations += 1;
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        self.frames[self.index(pa)]
    }
}

type Pt = PageTable<EmuMem>;

fn new_pt(range: VaRange) -> Pt {
    PageTable::new(EmuMem::new(), range).unwrap()
}

fn leaves(pt: &Pt) -> Vec<Leaf> {
    let mut v = Vec::new();
    pt.walk_all(|l| v.push(*l));
    v
}

/// Structural invariants: no empty table below the root, every table descriptor's occupancy
/// count equal to the number of occupied entries of its table, contiguous runs complete and
/// uniform, every reachable table allocated, and the count of reachable tables equal to the
/// counters.
fn check_invariants(pt: &Pt) -> usize {
    fn visit(pt: &Pt, table: PhysAddr, level: u32, tables: &mut usize) {
        *tables += 1;
        let mut valid = 0;
        for i in 0..ENTRIES_PER_TABLE {
            let d = pt.read(table, i);
            match d.kind(level) {
                DescriptorKind::Table => {
                    valid += 1;
                    visit(pt, d.output_address(), level + 1, tables);
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    valid += 1;
                    assert!(d.output_address().is_aligned(level_size(level)));
                    let run_len = run_entries(level);
                    if d.is_contiguous() {
                        assert!(level >= 2, "contiguous hint at level {level}");
                        let first = i & !(run_len - 1);
                        assert!(pt.read(table, first).is_contiguous(), "incomplete contiguous run");
                    }
                    if d.is_contiguous() && i % run_len == 0 {
                        let first = i;
                        let d0 = pt.read(table, first);
                        let run = level_size(level) * run_len as u64;
                        assert!(d0.output_address().is_aligned(run), "contiguous run PA misaligned");
                        for j in first..first + run_len {
                            let dj = pt.read(table, j);
                            assert!(dj.is_leaf(level) && dj.is_contiguous(), "incomplete contiguous run");
                            assert_eq!(dj.attributes(), d0.attributes(), "non-uniform contiguous run");
                            assert_eq!(
                                dj.output_address().0,
                                d0.output_address().0 + (j - first) as u64 * level_size(level)
                            );
                        }
                    }
                }
                DescriptorKind::Invalid => {}
                DescriptorKind::Reserved => panic!("reserved descriptor written"),
            }
        }
        if level > ROOT_LEVEL {
            assert!(valid > 0, "empty table left in the tree at level {level}");
        }
    }
    let mut tables = 0;
    visit(pt, pt.root_pa(), ROOT_LEVEL, &mut tables);
    pt.check_occupancy();
    assert_eq!(tables as u64, pt.stats().tables_in_use());
    tables
}

fn va(x: u64) -> VirtAddr {
    VirtAddr(x)
}

fn pa(x: u64) -> PhysAddr {
    PhysAddr(x)
}

fn release(pt: &mut Pt, record: PendingFlush) {
    record.release(pt.translation_mut());
}

// ---- block selection --------------------------------------------------------------------------

#[test]
fn new_table_is_empty_and_zeroed() {
    let pt = new_pt(VaRange::Lower);
    assert_eq!(pt.translation().live_frames(), 1);
    assert!(leaves(&pt).is_empty());
    assert_eq!(check_invariants(&pt), 1);
    let mut mem = EmuMem::new();
    mem.fail_after = Some(0);
    assert_eq!(PageTable::new(mem, VaRange::Lower).unwrap_err(), MapError::OutOfMemory);
}

#[test]
fn two_mib_blocks() {
    // Two level-2 blocks one block above 1 GiB (0x4020_0000 with 4 KiB pages).
    let (v, p) = (0x4000_0000 + BLOCK_2M, 0x8000_0000 + BLOCK_2M);
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(v), pa(p), 2 * BLOCK_2M, Attributes::kernel_data(), Constraints::NONE).unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), 2);
    for (i, leaf) in l.iter().enumerate() {
        assert_eq!(leaf.level, 2);
        assert_eq!(leaf.size, BLOCK_2M);
        assert_eq!(leaf.va, va(v + i as u64 * BLOCK_2M));
        assert_eq!(leaf.pa, pa(p + i as u64 * BLOCK_2M));
        assert!(!leaf.contiguous);
    }
    // Root, level 1, level 2 (the 64 KiB granule's root is the level-1 table).
    assert_eq!(check_invariants(&pt), per_granule(3, 3, 2));
    let probe = (v + BLOCK_2M / 2 + 0x1234) & !(PAGE_SIZE - 1);
    assert_eq!(pt.translate(va(probe)), Some(pa(probe - v + p)));
}

/// The engine's encodings of a 2 MiB block and of the tables above it are the ones early boot
/// writes with the `const` constructors (`Descriptor::block_2m`, `Descriptor::table`): one
/// encoding in the project. The attributes are the early map's (image EL1 RWX, device tree
/// read-only, UART device).
#[test]
fn engine_block_encoding_equals_the_early_encoding() {
    let early =
        [Attributes::kernel_data().with_el1_execute(true), Attributes::kernel_rodata(), Attributes::device()];
    for attrs in early {
        let mut pt = new_pt(VaRange::Upper);
        let (v, p) = (0xffff_8000_2000_0000, 0x4000_0000 + BLOCK_2M);
        pt.map(va(v), pa(p), BLOCK_2M, attrs, Constraints::NONE).unwrap();
        let mut table = pt.root_pa();
        for level in ROOT_LEVEL..2 {
            let index = Format::BUILD.table_index(v, level as i32);
            let d = pt.read(table, index);
            // Apart from the occupancy count, in bits the walker ignores (`occupancy.rs`).
            assert_eq!(occupancy(d), 1, "level {level}");
            assert_eq!(with_occupancy(d, 0), Descriptor::table(d.output_address()), "level {level}");
            table = d.output_address();
        }
        let block = pt.read(table, Format::BUILD.table_index(v, 2));
        assert_eq!(block.bits(), Descriptor::block_2m(pa(p), attrs).bits(), "{attrs:?}");
    }
}

#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "maps level-1 blocks, which only the 4 KiB granule has (48-bit addresses)"
)]
fn one_gib_block() {
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(BLOCK_1G), pa(2 * BLOCK_1G), BLOCK_1G, Attributes::kernel_data(), Constraints::NONE).unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].level, l[0].size, l[0].pa), (1, BLOCK_1G, pa(2 * BLOCK_1G)));
    assert_eq!(check_invariants(&pt), 2);

    // With NO_1G_BLOCKS: 512 2 MiB blocks, contiguous in runs of 16.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(BLOCK_1G), pa(2 * BLOCK_1G), BLOCK_1G, Attributes::kernel_data(), Constraints::NO_1G_BLOCKS)
        .unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), 512);
    assert!(l.iter().all(|l| l.level == 2 && l.contiguous));
    // Contiguous at level 2 forbidden too.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(
        va(BLOCK_1G),
        pa(2 * BLOCK_1G),
        BLOCK_1G,
        Attributes::kernel_data(),
        Constraints::NO_1G_BLOCKS | Constraints::NO_CONTIGUOUS,
    )
    .unwrap();
    assert!(leaves(&pt).iter().all(|l| l.level == 2 && !l.contiguous));
}

#[test]
fn misaligned_pa_forces_pages() {
    let mut pt = new_pt(VaRange::Lower);
    // VA block-aligned, PA only page-aligned.
    let size = 2 * BLOCK_2M;
    pt.map(va(0x4000_0000), pa(0x8000_0000 + PAGE_SIZE), size, Attributes::kernel_data(), Constraints::NONE)
        .unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), 2 * ENTRIES_PER_TABLE);
    assert!(l.iter().all(|l| l.level == 3 && !l.contiguous), "PA not aligned to a run: no runs");
    check_invariants(&pt);
    // NO_BLOCKS forces pages even when aligned; runs still allowed.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(0x4000_0000), pa(0x8000_0000), size, Attributes::kernel_data(), Constraints::NO_BLOCKS)
        .unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), 2 * ENTRIES_PER_TABLE);
    assert_eq!(l.len(), per_granule(1024, 4096, 16384));
    assert!(l.iter().all(|l| l.level == 3 && l.contiguous));
}

#[test]
fn mixed_pages_and_blocks() {
    let mut pt = new_pt(VaRange::Lower);
    let start = 0x4000_0000 + BLOCK_2M - 3 * PAGE_SIZE;
    let size = 3 * PAGE_SIZE + 2 * BLOCK_2M + 5 * PAGE_SIZE;
    // PA = VA + 4 GiB: blocks where the VA allows them, in every granule.
    let offset = 0x1_0000_0000;
    pt.map(va(start), pa(start + offset), size, Attributes::kernel_rodata(), Constraints::NONE).unwrap();
    let l = leaves(&pt);
    let levels: Vec<u32> = l.iter().map(|l| l.level).collect();
    assert_eq!(levels, [3, 3, 3, 2, 2, 3, 3, 3, 3, 3]);
    let mut expect = start;
    for leaf in &l {
        assert_eq!(leaf.va.0, expect);
        assert_eq!(leaf.pa.0, expect + offset);
        expect += leaf.size;
    }
    assert_eq!(expect, start + size);
    check_invariants(&pt);
}

// ---- contiguous hint ----------------------------------------------------------------------------

#[test]
fn contiguous_exactly_on_aligned_uniform_runs() {
    let mut pt = new_pt(VaRange::Lower);
    // [64K - 8K, 64K + 128K + 12K): one partial run before, two full runs, one partial after.
    let start = KIB64 - 2 * PAGE_SIZE;
    let size = 2 * PAGE_SIZE + 2 * KIB64 + 3 * PAGE_SIZE;
    pt.map(va(start), pa(0x9000_0000 + start), size, Attributes::kernel_data(), Constraints::NONE).unwrap();
    for leaf in leaves(&pt) {
        let inside = leaf.va.0 >= KIB64 && leaf.va.0 < 3 * KIB64;
        assert_eq!(leaf.contiguous, inside, "{leaf:?}");
    }
    check_invariants(&pt);

    // The same VA with a PA offset by a page: no run qualifies.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(
        va(start),
        pa(0x9000_0000 + PAGE_SIZE + start),
        size,
        Attributes::kernel_data(),
        Constraints::NONE,
    )
    .unwrap();
    assert!(leaves(&pt).iter().all(|l| !l.contiguous));

    // NO_CONTIGUOUS.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(start), pa(0x9000_0000 + start), size, Attributes::kernel_data(), Constraints::NO_CONTIGUOUS)
        .unwrap();
    assert!(leaves(&pt).iter().all(|l| !l.contiguous));

    // Two calls that together cover a run: neither sets the hint (not wholly inside one call).
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(KIB64), pa(KIB64), KIB64 / 2, Attributes::kernel_data(), Constraints::NONE).unwrap();
    pt.map(
        va(KIB64 + KIB64 / 2),
        pa(KIB64 + KIB64 / 2),
        KIB64 / 2,
        Attributes::kernel_data(),
        Constraints::NONE,
    )
    .unwrap();
    assert!(leaves(&pt).iter().all(|l| !l.contiguous));
}

#[test]
fn contiguous_level2_run() {
    let mut pt = new_pt(VaRange::Lower);
    // 32 MiB, 1 GiB, 16 GiB with 4, 16, 64 KiB pages.
    let run = BLOCK_RUN as u64 * BLOCK_2M;
    assert_eq!(run, per_granule(32 << 20, 1 << 30, 16 << 30));
    pt.map(va(run), pa(4 * run), run + BLOCK_2M, Attributes::kernel_data(), Constraints::NONE).unwrap();
    let l = leaves(&pt);
    assert_eq!(l.len(), BLOCK_RUN + 1);
    assert!(l[..BLOCK_RUN].iter().all(|l| l.level == 2 && l.contiguous));
    assert!(!l[BLOCK_RUN].contiguous);
    check_invariants(&pt);
}

#[test]
fn partial_unmap_of_contiguous_run() {
    // Not live: the rest of the run loses its hint.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(KIB64), pa(KIB64), KIB64, Attributes::kernel_data(), Constraints::NONE).unwrap();
    assert!(leaves(&pt).iter().all(|l| l.contiguous));
    let rec = pt.unmap(va(KIB64 + PAGE_SIZE), PAGE_SIZE).unwrap();
    assert_eq!(rec.range(), Some(FlushRange { start: va(KIB64 + PAGE_SIZE), size: PAGE_SIZE }));
    release(&mut pt, rec);
    let l = leaves(&pt);
    assert_eq!(l.len(), PAGE_RUN - 1);
    assert!(l.iter().all(|l| !l.contiguous));
    check_invariants(&pt);

    // Live: refused, nothing changed. Whole-run unmap is fine.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(KIB64), pa(KIB64), KIB64, Attributes::kernel_data(), Constraints::NONE).unwrap();
    pt.set_live(true);
    let before = leaves(&pt);
    assert_eq!(
        pt.unmap(va(KIB64 + PAGE_SIZE), PAGE_SIZE).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(KIB64 + PAGE_SIZE))
    );
    assert_eq!(
        pt.protect(va(KIB64), PAGE_SIZE, Attributes::kernel_rodata()).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(KIB64))
    );
    assert_eq!(leaves(&pt), before);
    // Permission change of the whole run in place keeps the hint.
    let rec = pt.protect(va(KIB64), KIB64, Attributes::kernel_rodata()).unwrap();
    assert_eq!(rec.leaves_changed(), PAGE_RUN as u64);
    assert!(rec.leaf_only());
    release(&mut pt, rec);
    assert!(leaves(&pt).iter().all(|l| l.contiguous && l.attrs == Attributes::kernel_rodata()));
    let rec = pt.unmap(va(KIB64), KIB64).unwrap();
    assert!(rec.tables_removed());
    release(&mut pt, rec);
    assert!(leaves(&pt).is_empty());
    assert_eq!(check_invariants(&pt), 1);
    assert_eq!(pt.translation().live_frames(), 1);
}

// ---- errors -------------------------------------------------------------------------------------

#[test]
fn range_errors() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    let c = Constraints::NONE;
    let page = PAGE_SIZE;
    assert_eq!(pt.map(va(page), pa(0), 0, a, c), Err(MapError::InvalidRange));
    assert_eq!(pt.map(va(page + 1), pa(0), page, a, c), Err(MapError::Misaligned));
    assert_eq!(pt.map(va(page), pa(0x10), page, a, c), Err(MapError::Misaligned));
    assert_eq!(pt.map(va(page), pa(0), page + 1, a, c), Err(MapError::Misaligned));
    // The tree's VA and PA widths: 48 bits, or with LPA2 52-bit output addresses and (16 KiB
    // pages) 52-bit VAs; the 4 KiB LPA2 tree stays 48-bit under its level -1 table.
    let (top, pa_top) = (1u64 << per_lpa2(48, per_granule(48, 52, 48)), 1u64 << per_lpa2(48, 52));
    assert_eq!((top, pa_top), (1 << VA_BITS, 1 << crate::addr::PA_BITS));
    // Upper-half address in a lower table, and the bit above the VA set.
    assert_eq!(pt.map(va(0xffff_0000_0000_0000), pa(0), page, a, c), Err(MapError::InvalidRange));
    assert_eq!(pt.map(va(top), pa(0), page, a, c), Err(MapError::InvalidRange));
    // Past the end of the lower half, and u64 overflow.
    assert_eq!(pt.map(va(top - page), pa(0), 2 * page, a, c), Err(MapError::InvalidRange));
    assert_eq!(pt.map(va(page), pa(0), !(page - 1), a, c), Err(MapError::InvalidRange));
    // PA beyond the output-address width.
    assert_eq!(pt.map(va(page), pa(pa_top - page), 2 * page, a, c), Err(MapError::InvalidRange));
    assert_eq!(pt.unmap(va(page), 0).unwrap_err(), MapError::InvalidRange);
    assert_eq!(pt.protect(va(page / 2), page, a).unwrap_err(), MapError::Misaligned);
    assert_eq!(pt.walk(va(top), page, |_| ()), Err(MapError::InvalidRange));
    // The last page of the lower half is fine: a table at each level (three with 64 KiB pages).
    pt.map(va(top - page), pa(pa_top - page), page, a, c).unwrap();
    assert_eq!(pt.translate(va(top - page)), Some(pa(pa_top - page)));
    assert_eq!(pt.stats().tables_allocated, per_granule(4, 4, 3));
}

#[test]
fn already_mapped_changes_nothing() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    // A block at one block's size, a page at 2.5 blocks (2 MiB and 5 MiB with 4 KiB pages).
    let (block, page_va) = (BLOCK_2M, 5 * BLOCK_2M / 2);
    pt.map(va(block), pa(block), BLOCK_2M, a, Constraints::NONE).unwrap();
    pt.map(va(page_va), pa(page_va), PAGE_SIZE, a, Constraints::NONE).unwrap();
    let before = leaves(&pt);
    let frames = pt.translation().live_frames();
    // Overlaps the page at the end, after needing new tables at the beginning.
    assert_eq!(
        pt.map(va(0), pa(0), page_va + PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(block)))
    );
    assert_eq!(
        pt.map(va(2 * block), pa(0), BLOCK_2M, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(page_va)))
    );
    let inside = block + 16 * PAGE_SIZE;
    assert_eq!(
        pt.map(va(inside), pa(0), PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(inside)))
    );
    assert_eq!(leaves(&pt), before);
    assert_eq!(pt.translation().live_frames(), frames);
    check_invariants(&pt);
}

// ---- unmap, split, records ------------------------------------------------------------------------

#[test]
fn unmap_detaches_empty_tables_into_the_record() {
    let mut pt = new_pt(VaRange::Lower);
    // A table at each level: 4, 4 and 3 with 4, 16 and 64 KiB pages.
    let tables = per_granule(4, 4, 3);
    pt.map(va(0x4000_0000), pa(PAGE_SIZE), PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE).unwrap();
    assert_eq!(check_invariants(&pt), tables);
    let rec = pt.unmap(va(0x4000_0000), PAGE_SIZE).unwrap();
    assert_eq!(rec.range(), Some(FlushRange { start: va(0x4000_0000), size: PAGE_SIZE }));
    assert!(rec.tables_removed());
    assert_eq!(rec.detached_tables(), tables - 1);
    assert_eq!((rec.min_leaf_size(), rec.max_leaf_size()), (PAGE_SIZE, PAGE_SIZE));
    assert!(rec.has_global() && !rec.has_non_global() && !rec.has_executable());
    // The frames are still allocated until release.
    assert_eq!(pt.translation().live_frames(), tables);
    assert_eq!(check_invariants(&pt), 1);
    release(&mut pt, rec);
    assert_eq!(pt.translation().live_frames(), 1);
    assert_eq!(pt.translation().deallocations, tables - 1);

    // Unmapping a hole changes nothing and needs no flush.
    let rec = pt.unmap(va(0), 1 << 40).unwrap();
    assert!(!rec.needs_flush());
    assert_eq!(rec.range(), None);
    release(&mut pt, rec);
}

#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "splits a level-1 block, which only the 4 KiB granule has (48-bit addresses)"
)]
fn unmap_splits_blocks() {
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(BLOCK_1G), pa(BLOCK_1G), BLOCK_1G, Attributes::kernel_data(), Constraints::NONE).unwrap();
    // One page in the middle of the 1 GiB block: L1 block -> L2 table -> L3 table.
    let hole = BLOCK_1G + 5 * BLOCK_2M + 7 * PAGE_SIZE;
    let rec = pt.unmap(va(hole), PAGE_SIZE).unwrap();
    assert_eq!(rec.range(), Some(FlushRange { start: va(hole), size: PAGE_SIZE }));
    assert!(rec.leaf_only(), "splitting replaces a leaf; no table entry was removed");
    release(&mut pt, rec);
    assert_eq!(check_invariants(&pt), 4);
    let l = leaves(&pt);
    assert_eq!(l.len(), 511 + 511);
    assert_eq!(pt.translate(va(hole)), None);
    for probe in [BLOCK_1G, hole - PAGE_SIZE, hole + PAGE_SIZE, 2 * BLOCK_1G - PAGE_SIZE] {
        assert_eq!(pt.translate(va(probe)), Some(pa(probe)));
    }
    assert_eq!(pt.query(va(BLOCK_1G)).unwrap().level, 2);
    assert_eq!(pt.query(va(hole + PAGE_SIZE)).unwrap().level, 3);

    // Live tables refuse to split.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(BLOCK_1G), pa(BLOCK_1G), BLOCK_1G, Attributes::kernel_data(), Constraints::NONE).unwrap();
    pt.set_live(true);
    assert_eq!(pt.unmap(va(hole), PAGE_SIZE).unwrap_err(), MapError::BreakBeforeMakeRequired(va(hole)));
    // The whole block is fine; the 1 GiB leaf is reported, and the L1 table is detached.
    let rec = pt.unmap(va(BLOCK_1G), BLOCK_1G).unwrap();
    assert_eq!((rec.min_leaf_size(), rec.max_leaf_size(), rec.leaves_changed()), (BLOCK_1G, BLOCK_1G, 1));
    assert_eq!(rec.detached_tables(), 1);
    release(&mut pt, rec);
    assert_eq!(pt.translation().live_frames(), 1);
}

#[test]
fn record_merging() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::user(UserAccess::ReadExecute);
    // A page at half a block, a block at two (1 MiB and 4 MiB with 4 KiB pages).
    let (page_va, block) = (BLOCK_2M / 2, 2 * BLOCK_2M);
    pt.map(va(page_va), pa(page_va), PAGE_SIZE, a, Constraints::NONE).unwrap();
    pt.map(va(block), pa(block), BLOCK_2M, a, Constraints::NONE).unwrap();
    let mut r1 = pt.unmap(va(page_va), PAGE_SIZE).unwrap();
    let r2 = pt.unmap(va(block), BLOCK_2M).unwrap();
    assert_eq!(r1.detached_tables(), 1);
    // The level-2 and level-1 tables (the 64 KiB granule's level-1 table is the root).
    assert_eq!(r2.detached_tables(), per_granule(2, 2, 1));
    r1.absorb(r2, pt.translation());
    assert_eq!(r1.detached_tables(), per_granule(3, 3, 2));
    assert_eq!(r1.range(), Some(FlushRange { start: va(page_va), size: block + BLOCK_2M - page_va }));
    assert_eq!((r1.min_leaf_size(), r1.max_leaf_size()), (PAGE_SIZE, BLOCK_2M));
    assert!(r1.has_non_global() && !r1.has_global() && r1.has_executable());
    release(&mut pt, r1);
    assert_eq!(pt.translation().live_frames(), 1);
}

#[test]
fn frame_at_physical_zero_is_linked_correctly() {
    let mut pt = PageTable::new(EmuMem::with_base(0), VaRange::Lower).unwrap();
    // The root is at PA 0; put more tables in the tree, detach them, release.
    for i in 0..4u64 {
        pt.map(va(i * BLOCK_1G), pa(0), PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE).unwrap();
    }
    let rec = pt.unmap(va(0), 4 * BLOCK_1G).unwrap();
    // A level-1 table and four (level 2, level 3) pairs; with 64 KiB pages the level-1 table is
    // the root, which stays.
    let (detached, with_root) = per_granule((1 + 4 * 2, 10), (1 + 4 * 2, 10), (4 * 2, 9));
    assert_eq!(rec.detached_tables(), detached);
    let (mut mem, rec2) = pt.destroy();
    let mut rec = rec;
    rec.absorb(rec2, &mem);
    assert_eq!(rec.detached_tables(), with_root);
    rec.release(&mut mem);
    assert_eq!(mem.live_frames(), 0);
}

/// On a live table the general path refuses what needs break-before-make before it writes
/// anything, naming the first address in ascending order that needs it: for an unmap, a block
/// cut by either end of the range; for a protect, the first leaf whose change is more than a
/// permission change (leaves the change does not touch are skipped).
#[test]
fn live_refusals_name_the_first_address_that_needs_bbm() {
    let (data, ro) = (Attributes::kernel_data(), Attributes::kernel_rodata());
    let block = 2 * BLOCK_1G + 4 * BLOCK_2M;
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(block - 4 * PAGE_SIZE), pa(0x10_0000), 4 * PAGE_SIZE, data, Constraints::NO_CONTIGUOUS)
        .unwrap();
    pt.map(va(block), pa(0x4000_0000), 2 * BLOCK_2M, data, Constraints::NONE).unwrap();
    pt.map(va(block + 2 * BLOCK_2M), pa(0x20_0000), 4 * PAGE_SIZE, ro, Constraints::NO_CONTIGUOUS).unwrap();
    assert_eq!(pt.query(va(block)).unwrap().level, 2);
    pt.set_live(true);
    let before = leaves(&pt);
    // The end cuts the first block: refused at the block's first address in the range.
    let cut_end = pt.unmap(va(block - 2 * PAGE_SIZE), 2 * PAGE_SIZE + BLOCK_2M / 2).unwrap_err();
    assert_eq!(cut_end, MapError::BreakBeforeMakeRequired(va(block)));
    // The start cuts the second block (the end, past the pages, cuts nothing).
    let start = block + BLOCK_2M + PAGE_SIZE;
    let cut_start = pt.unmap(va(start), BLOCK_2M + 2 * PAGE_SIZE).unwrap_err();
    assert_eq!(cut_start, MapError::BreakBeforeMakeRequired(va(start)));
    // A protect that makes read-only leaves device memory: the data pages and blocks before
    // them are untouched, the first read-only page is refused.
    let to_device = |a: Attributes| if a == ro { Attributes::device() } else { a };
    let r =
        pt.protect_with(va(block - 4 * PAGE_SIZE), 4 * PAGE_SIZE + 2 * BLOCK_2M + 4 * PAGE_SIZE, to_device);
    assert_eq!(r.unwrap_err(), MapError::BreakBeforeMakeRequired(va(block + 2 * BLOCK_2M)));
    assert_eq!(leaves(&pt), before, "a refused call changed something");
    // Whole blocks and pages, permissions only: accepted.
    let rec = pt.protect(va(block - 4 * PAGE_SIZE), 4 * PAGE_SIZE + 2 * BLOCK_2M, ro).unwrap();
    assert_eq!((rec.leaves_changed(), rec.max_leaf_size()), (6, BLOCK_2M));
    release(&mut pt, rec);
    let rec = pt.unmap(va(block - 4 * PAGE_SIZE), 4 * PAGE_SIZE + 2 * BLOCK_2M + 4 * PAGE_SIZE).unwrap();
    // Both last-level tables, the level-2 and the level-1 ones (the root, with 64 KiB pages).
    assert_eq!(rec.detached_tables(), per_granule(4, 4, 3));
    release(&mut pt, rec);
    assert_eq!(check_invariants(&pt), 1);
    pt.set_live(false);
}

/// On a live table, an unmap or a permission change that cuts a contiguous run, at whichever
/// end and at whichever page of the run, is refused at the first page of the range inside a cut
/// run, and changes nothing; ranges covering whole runs are accepted. Inside one 2 MiB region
/// (the fast path) and across a 2 MiB boundary (the general path).
#[test]
fn live_cuts_of_contiguous_runs_are_refused_wherever_they_are() {
    let a = Attributes::kernel_data();
    let run = PAGE_RUN as u64;
    for base in [BLOCK_1G, BLOCK_1G + BLOCK_2M - run * PAGE_SIZE] {
        // (first page, pages, first page refused): two runs of `run` pages at `base`.
        for (first, count, refused) in [
            (run - 2, 2u64, Some(run - 2)),
            (run - 1, 2, Some(run - 1)),
            (1, 2, Some(1)),
            (0, run + 1, Some(run)),
            (run, run, None),
        ] {
            let mut pt = new_pt(VaRange::Lower);
            pt.map(va(base), pa(0x8000_0000), 2 * run * PAGE_SIZE, a, Constraints::NONE).unwrap();
            assert!(pt.query(va(base + (2 * run - 1) * PAGE_SIZE)).unwrap().contiguous);
            pt.set_live(true);
            let before = leaves(&pt);
            let (v, size) = (va(base + first * PAGE_SIZE), count * PAGE_SIZE);
            let what = std::format!("{base:#x}: pages {first}+{count}");
            let protect = pt.protect(v, size, Attributes::kernel_rodata()).map(|r| release(&mut pt, r));
            let unmap = pt.unmap(v, size).map(|r| release(&mut pt, r));
            match refused {
                Some(at) => {
                    let err = Err(MapError::BreakBeforeMakeRequired(va(base + at * PAGE_SIZE)));
                    assert_eq!((protect, unmap), (err, err), "{what}");
                    assert_eq!(leaves(&pt), before, "{what}: a refused call changed something");
                }
                None => assert_eq!((protect, unmap), (Ok(()), Ok(())), "{what}"),
            }
            check_invariants(&pt);
            pt.set_live(false);
        }
    }
}

// ---- the entry iterator -----------------------------------------------------------------------------

/// The iterator every walk uses yields, per entry of one table that `[lo, hi)` overlaps, its
/// index, its span and the part of the range inside it, from absolute offsets; `skip_to` jumps
/// over entries.
#[test]
fn entries_split_a_range_at_entry_boundaries() {
    use super::walk::{Entries, Entry};
    let e = |index, level, base, size, lo, hi| Entry { index, level, base, size, lo, hi };
    // Level 2 (2 MiB entries) of the table covering [1 GiB, 2 GiB): from the middle of entry 1
    // to the middle of entry 3.
    let (lo, hi) = (BLOCK_1G + BLOCK_2M + 5 * PAGE_SIZE, BLOCK_1G + 3 * BLOCK_2M + PAGE_SIZE);
    let got: Vec<Entry> = Entries::new(2, lo, hi).collect();
    let m = BLOCK_2M;
    assert_eq!(
        got,
        [
            e(1, 2, BLOCK_1G + m, m, lo, BLOCK_1G + 2 * m),
            e(2, 2, BLOCK_1G + 2 * m, m, BLOCK_1G + 2 * m, BLOCK_1G + 3 * m),
            e(3, 2, BLOCK_1G + 3 * m, m, BLOCK_1G + 3 * m, hi),
        ]
    );
    assert_eq!(got.iter().map(Entry::whole).collect::<Vec<_>>(), [false, true, false]);
    assert_eq!(got[1].end(), BLOCK_1G + 3 * m);
    // Level 3 at the top of the space: the last entry, whole.
    let top = (1u64 << 48) - PAGE_SIZE;
    let last = ENTRIES_PER_TABLE - 1;
    assert_eq!(Entries::new(3, top, 1 << 48).collect::<Vec<_>>(), [e(last, 3, top, PAGE_SIZE, top, 1 << 48)]);
    // The root over the whole space: 512 whole entries of 512 GiB with 4 KiB pages, 2 of
    // 128 TiB with 16 KiB, 64 (level 1) of 4 TiB with 64 KiB.
    let (count, span) = per_granule((512, 1u64 << 39), (2, 1 << 47), (64, 1 << 42));
    let all: Vec<Entry> = Entries::new(ROOT_LEVEL, 0, 1 << 48).collect();
    assert_eq!(all.len(), count);
    assert!(
        all.iter()
            .enumerate()
            .all(|(i, x)| x.index == i && x.level == ROOT_LEVEL && x.whole() && x.base == i as u64 * span)
    );
    // Skipping: past entries 4..=6 of a level-3 range, and never backwards.
    let mut it = Entries::new(3, 4 * PAGE_SIZE, 10 * PAGE_SIZE);
    assert_eq!(it.next().map(|x| x.index), Some(4));
    it.skip_to(7 * PAGE_SIZE);
    assert_eq!(it.next().map(|x| x.index), Some(7));
    it.skip_to(PAGE_SIZE);
    assert_eq!(it.map(|x| x.index).collect::<Vec<_>>(), [8, 9]);
}

// ---- the end of a tree ----------------------------------------------------------------------------

/// An [`EmuMem`] borrowed by a table, so that a test can look at the memory after the table is
/// gone.
struct Borrowed<'a>(&'a mut EmuMem);

// SAFETY: every call is forwarded to the `EmuMem`, whose guarantees hold.
unsafe impl Translation for Borrowed<'_> {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        self.0.allocate_table()
    }
    fn deallocate_table(&mut self, pa: PhysAddr) {
        self.0.deallocate_table(pa);
    }
    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        self.0.table_ptr(pa)
    }
}

/// Fills a table with blocks, pages and contiguous runs over several tables at every level.
fn populate<T: Translation>(pt: &mut PageTable<T>) {
    let a = Attributes::kernel_data();
    pt.map(va(BLOCK_1G), pa(BLOCK_1G), BLOCK_1G + 3 * BLOCK_2M + 40 * PAGE_SIZE, a, Constraints::NONE)
        .unwrap();
    pt.map(va(7 << 39), pa(0), 3 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    pt.map(va((3 << 39) + 5 * BLOCK_2M + PAGE_SIZE), pa(0), 2 * BLOCK_2M, a, Constraints::NO_BLOCKS).unwrap();
}

/// Dropping a table that is not live frees every frame it holds, the root included, once.
#[test]
fn dropping_a_table_that_is_not_live_frees_every_frame() {
    let mut mem = EmuMem::new();
    let mut pt = PageTable::new(Borrowed(&mut mem), VaRange::Lower).unwrap();
    populate(&mut pt);
    let tables = pt.stats().tables_in_use();
    assert!(tables > 8, "{tables}");
    // Live once, then no longer (the caller flushed): dropping it is fine.
    pt.set_live(true);
    pt.set_live(false);
    drop(pt);
    assert_eq!(mem.live_frames(), 0);
    assert_eq!(mem.deallocations as u64, tables);
}

/// Dropping a live table frees nothing: its frames may still be cached, and only the owner of
/// the TLB can flush them first (the memory is leaked, never freed under a walker).
#[test]
fn dropping_a_live_table_frees_nothing() {
    let mut mem = EmuMem::new();
    let mut pt = PageTable::new(Borrowed(&mut mem), VaRange::Lower).unwrap();
    populate(&mut pt);
    let tables = pt.stats().tables_in_use() as usize;
    pt.set_live(true);
    drop(pt);
    assert_eq!((mem.live_frames(), mem.deallocations), (tables, 0));
}

// ---- protect ------------------------------------------------------------------------------------

#[test]
fn protect_in_place_and_bbm() {
    let mut pt = new_pt(VaRange::Lower);
    let base = 0x1000_0000;
    let rw = Attributes::user(UserAccess::ReadWrite);
    pt.map(va(base), pa(0x2000_0000), 8 * PAGE_SIZE, rw, Constraints::NONE).unwrap();
    pt.set_live(true);
    let rx = Attributes::user(UserAccess::ReadExecute);
    let rec =
        pt.protect_with(va(base + 2 * PAGE_SIZE), 2 * PAGE_SIZE, |a| a.with_permissions_of(rx)).unwrap();
    assert_eq!(rec.range(), Some(FlushRange { start: va(base + 2 * PAGE_SIZE), size: 2 * PAGE_SIZE }));
    assert!(rec.leaf_only() && rec.has_executable() && rec.has_non_global());
    release(&mut pt, rec);
    assert_eq!(pt.query(va(base + 2 * PAGE_SIZE)).unwrap().attrs, rx);
    assert_eq!(pt.query(va(base + 4 * PAGE_SIZE)).unwrap().attrs, rw);
    // Protecting to the same attributes changes nothing.
    let rec = pt.protect(va(base), 2 * PAGE_SIZE, rw).unwrap();
    assert!(!rec.needs_flush());
    release(&mut pt, rec);
    // Memory type change on a live table: refused, nothing changed.
    let before = leaves(&pt);
    let dev = rw.with_memory_type(MemoryType::NormalNonCacheable);
    assert_eq!(
        pt.protect(va(base), PAGE_SIZE, dev).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(base))
    );
    assert_eq!(
        pt.protect(va(base), PAGE_SIZE, rw.with_global(true)).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(base))
    );
    assert_eq!(leaves(&pt), before);
    // Not live: allowed in place.
    pt.set_live(false);
    let rec = pt.protect(va(base), PAGE_SIZE, dev).unwrap();
    release(&mut pt, rec);
    assert_eq!(pt.query(va(base)).unwrap().attrs.memory_type(), MemoryType::NormalNonCacheable);
}

/// `holds_nothing` says yes only where no entry is: empty entries of an existing last-level
/// table (by the cache, which the `general_only` switch turns off) or an empty entry above
/// level 3 whose span holds the range; a leaf, a guard marker, a block, a range across two
/// last-level tables (not known cheaply) or a bad range is no.
#[test]
fn holds_nothing_only_where_no_entry_is() {
    use crate::descriptor::level_size;
    let (block, l1) = (level_size(2), level_size(1));
    for general_only in [false, true] {
        let mut pt = new_pt(VaRange::Lower);
        pt.general_only = general_only;
        let base = 4 * block;
        let rw = Attributes::user(UserAccess::ReadWrite);
        pt.map(va(base), pa(8 * block), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        pt.install_guards(va(base + 4 * PAGE_SIZE), PAGE_SIZE).unwrap();
        pt.map(va(base + 2 * block), pa(8 * block), block, rw, Constraints::NONE).unwrap();
        assert!(pt.query(va(base + 2 * block)).is_some_and(|l| l.size == block), "a block");
        // In the table that exists: the empty entries, one or several, and none beyond.
        assert_eq!(pt.holds_nothing(va(base + PAGE_SIZE), 3 * PAGE_SIZE), !general_only);
        assert_eq!(pt.holds_nothing(va(base + 5 * PAGE_SIZE), PAGE_SIZE), !general_only);
        assert!(!pt.holds_nothing(va(base), PAGE_SIZE), "a page");
        assert!(!pt.holds_nothing(va(base + PAGE_SIZE), 4 * PAGE_SIZE), "a guard marker at the end");
        assert!(!pt.holds_nothing(va(base + 4 * PAGE_SIZE), PAGE_SIZE), "a guard marker");
        // Where no last-level table is: an empty level-2 entry, and an empty level-1 entry.
        assert!(pt.holds_nothing(va(base + block), 2 * PAGE_SIZE));
        assert!(pt.holds_nothing(va(base + block), block));
        assert!(pt.holds_nothing(va(2 * l1), 8 * block));
        assert!(!pt.holds_nothing(va(base + 2 * block + PAGE_SIZE), PAGE_SIZE), "a block");
        // Across last-level tables (one empty, one not; or no entry at either level).
        assert!(!pt.holds_nothing(va(base + block - PAGE_SIZE), 2 * PAGE_SIZE));
        assert!(!pt.holds_nothing(va(base), 2 * block));
        // Bad ranges.
        assert!(!pt.holds_nothing(va(base + 1), PAGE_SIZE));
        assert!(!pt.holds_nothing(va(base), 0));
        assert!(!pt.holds_nothing(va(0xffff_0000_0000_0000), PAGE_SIZE));
    }
}

#[test]
fn protect_splits_blocks_when_not_live() {
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(BLOCK_2M), pa(BLOCK_2M), BLOCK_2M, Attributes::kernel_data(), Constraints::NONE).unwrap();
    pt.set_live(true);
    assert_eq!(
        pt.protect(va(BLOCK_2M), PAGE_SIZE, Attributes::kernel_rodata()).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(BLOCK_2M))
    );
    // No change needed for the part: no split either, even live.
    let rec = pt.protect(va(BLOCK_2M), PAGE_SIZE, Attributes::kernel_data()).unwrap();
    assert!(!rec.needs_flush());
    release(&mut pt, rec);
    pt.set_live(false);
    let rec = pt.protect(va(BLOCK_2M), PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
    release(&mut pt, rec);
    let l = leaves(&pt);
    assert_eq!(l.len(), ENTRIES_PER_TABLE);
    assert_eq!(l[0].attrs, Attributes::kernel_rodata());
    assert!(l[1..].iter().all(|l| l.attrs == Attributes::kernel_data() && l.level == 3));
    check_invariants(&pt);
}

// ---- rollback on allocation failure -------------------------------------------------------------

/// Runs `op` with an allocator that fails after k allocations, for every k until it succeeds,
/// and checks that every failure left the table and the allocator exactly as before.
fn for_every_failure_point(
    setup: impl Fn() -> Pt,
    op: impl Fn(&mut Pt) -> Result<Option<PendingFlush>, MapError>,
) {
    for k in 0.. {
        let mut pt = setup();
        let before = leaves(&pt);
        let frames = pt.translation().live_frames();
        let stats = pt.stats().tables_in_use();
        pt.translation_mut().fail_after = Some(k);
        match op(&mut pt) {
            Err(e) => {
                assert_eq!(e, MapError::OutOfMemory, "k = {k}");
                assert_eq!(leaves(&pt), before, "k = {k}: table changed");
                assert_eq!(pt.translation().live_frames(), frames, "k = {k}: frame leaked");
                assert_eq!(pt.stats().tables_in_use(), stats);
                check_invariants(&pt);
            }
            Ok(rec) => {
                assert!(k > 0, "the operation needs allocations for this test to mean anything");
                if let Some(rec) = rec {
                    release(&mut pt, rec);
                }
                check_invariants(&pt);
                break;
            }
        }
    }
}

#[test]
fn map_rolls_back_at_every_failure_point() {
    let setup = || {
        let mut pt = new_pt(VaRange::Lower);
        pt.map(va(BLOCK_1G + 100 * BLOCK_2M), pa(0), PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE)
            .unwrap();
        pt
    };
    // Spans two 512 GiB regions, several 1 GiB and 2 MiB regions, with pages at both ends.
    // (The end of the first root entry: 512 GiB with 4 KiB pages; with 64 KiB, whose root
    // entries are level-1 entries of 4 TiB, the end of the fourth, away from the setup's page.)
    let start = level_size(ROOT_LEVEL).max(4 * BLOCK_1G) - BLOCK_1G - BLOCK_2M - 3 * PAGE_SIZE;
    let size = 2 * BLOCK_1G + 2 * BLOCK_2M + 6 * PAGE_SIZE;
    for_every_failure_point(setup, |pt| {
        pt.map(va(start), pa(start), size, Attributes::kernel_data(), Constraints::NONE).map(|_| None)
    });
    // And into the existing tables, 4 KiB pages only.
    for_every_failure_point(setup, |pt| {
        pt.map(va(BLOCK_1G), pa(0), 4 * BLOCK_2M, Attributes::kernel_data(), Constraints::NO_BLOCKS)
            .map(|_| None)
    });
}

#[test]
fn split_rolls_back_at_every_failure_point() {
    let setup = || {
        let mut pt = new_pt(VaRange::Upper);
        let base = 0xffff_0000_0000_0000 + 4 * BLOCK_1G;
        pt.map(va(base), pa(0), 2 * BLOCK_1G, Attributes::kernel_data(), Constraints::NONE).unwrap();
        pt
    };
    // Cuts both 1 GiB blocks inside 2 MiB blocks: four splits.
    let start = 0xffff_0000_0000_0000 + 5 * BLOCK_1G - BLOCK_2M - PAGE_SIZE;
    for_every_failure_point(setup, |pt| pt.unmap(va(start), 2 * BLOCK_2M + 2 * PAGE_SIZE).map(Some));
    for_every_failure_point(setup, |pt| {
        pt.protect(va(start), 2 * BLOCK_2M + 2 * PAGE_SIZE, Attributes::kernel_rodata()).map(Some)
    });
}

// ---- upper range and the kernel's boot use ---------------------------------------------------------

#[test]
#[cfg_attr(
    all(feature = "granule-16k", feature = "lpa2"),
    ignore = "names 48-bit numbers; the 16 KiB LPA2 tree is 52-bit (paging::lpa2::tests cover it)"
)]
fn upper_range() {
    let mut pt = new_pt(VaRange::Upper);
    let a = Attributes::kernel_data();
    let page = PAGE_SIZE;
    let bottom = 0xffff_0000_0000_0000u64;
    let top = 0u64.wrapping_sub(page);
    assert_eq!(pt.map(va(0x4000_0000), pa(0), page, a, Constraints::NONE), Err(MapError::InvalidRange));
    assert_eq!(pt.map(va(bottom - page), pa(0), page, a, Constraints::NONE), Err(MapError::InvalidRange));
    // The very top page of the address space.
    pt.map(va(top), pa(5 * page), page, a, Constraints::NONE).unwrap();
    let leaf = pt.query(va(top)).unwrap();
    assert_eq!((leaf.va, leaf.pa, leaf.level), (va(top), pa(5 * page), 3));
    // Bottom of the upper half, one level-1 entry's span: a level-1 block with 4 KiB pages, a
    // full table of level-2 blocks with 16 and 64 KiB pages (no level-1 blocks there).
    pt.map(va(bottom), pa(0), BLOCK_1G, a, Constraints::NONE).unwrap();
    assert_eq!(pt.query(va(bottom)).unwrap().level, per_granule(1, 2, 2));
    let inside = 0x1234_5000 & !(page - 1);
    assert_eq!(pt.translate(va(bottom + inside)), Some(pa(inside)));
    assert_eq!(pt.query(va(inside)), None);
    let l = leaves(&pt);
    assert_eq!(l.len(), per_granule(2, 2049, 8193));
    assert_eq!(l[0].va, va(bottom));
    let rec = pt.unmap(va(top), page).unwrap();
    let r = rec.range().unwrap();
    assert_eq!((r.start, r.size, r.end()), (va(top), page, None));
    assert_eq!(r.end_or_zero(), va(0));
    release(&mut pt, rec);
    let (mut mem, rec) = pt.destroy();
    // The root and the tables above the bottom's leaves: level 1 (4 KiB); levels 1 and 2
    // (16 KiB); level 2 (64 KiB, whose root is level 1).
    assert_eq!(rec.detached_tables(), per_granule(2, 3, 2));
    rec.release(&mut mem);
    assert_eq!(mem.live_frames(), 0);
}

/// A bump allocator over a fixed arena, reached through "PA + offset", as the kernel does in early
/// boot (there the arena is a static and the offset is zero with the MMU off).
struct BumpArena {
    arena: Box<[[u64; ENTRIES_PER_TABLE]]>,
    pa_base: u64,
    next: usize,
}

// SAFETY: frames are distinct, 4096-byte elements of one boxed slice owned by the arena; the
// pointer is derived from the slice's base and in bounds for every PA handed out.
unsafe impl Translation for BumpArena {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        if self.next == self.arena.len() {
            return None;
        }
        self.next += 1;
        Some(PhysAddr(self.pa_base + (self.next as u64 - 1) * PAGE_SIZE))
    }

    fn deallocate_table(&mut self, _pa: PhysAddr) {}

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        let i = ((pa.0 - self.pa_base) / PAGE_SIZE) as usize;
        assert!(i < self.next);
        let base = NonNull::new(self.arena.as_ptr().cast_mut()).unwrap();
        // SAFETY: `i` is in bounds of the arena.
        unsafe { base.add(i) }
    }
}

#[test]
fn kernel_boot_layout() {
    const KIMAGE: u64 = 0xffff_8000_0000_0000;
    const LINEAR: u64 = 0xffff_0000_0000_0000;
    let load = 0x4020_0000; // Where the loader put the image (2 MiB aligned).
    let arena = BumpArena {
        arena: vec![[0u64; ENTRIES_PER_TABLE]; 16].into_boxed_slice(),
        pa_base: 0x4100_0000,
        next: 0,
    };
    let mut pt = PageTable::new(arena, VaRange::Upper).unwrap();
    let pages = Constraints::NO_BLOCKS | Constraints::NO_CONTIGUOUS;
    // 35, 17 and 64 pages (0x2_3000, 0x1_1000 and 0x4_0000 bytes with 4 KiB pages).
    let text = (35 * PAGE_SIZE, Attributes::kernel_text());
    let rodata = (17 * PAGE_SIZE, Attributes::kernel_rodata());
    let data = (64 * PAGE_SIZE, Attributes::kernel_data());
    let mut off = 0;
    for (size, attrs) in [text, rodata, data] {
        pt.map(va(KIMAGE + off), pa(load + off), size, attrs, pages).unwrap();
        off += size;
    }
    // Linear map of 1 GiB and three level-2 blocks of RAM at 0x4000_0000: with 4 KiB pages one
    // 1 GiB block and three 2 MiB blocks; with 16 KiB, 35 blocks of 32 MiB; with 64 KiB, 5 of
    // 512 MiB.
    pt.map(
        va(LINEAR + 0x4000_0000),
        pa(0x4000_0000),
        (1 << 30) + 3 * BLOCK_2M,
        Attributes::kernel_data(),
        Constraints::NONE,
    )
    .unwrap();
    // A UART.
    pt.map(va(0xffff_ffff_f000_0000), pa(0x0900_0000), PAGE_SIZE, Attributes::device(), Constraints::NONE)
        .unwrap();
    let used = pt.translation().next;
    pt.set_live(true);
    // A guarded stack in the live table: 4 pages with unmapped guard pages on both sides.
    let stack = 0xffff_8000_1000_0000u64;
    pt.map(
        va(stack + PAGE_SIZE),
        pa(0x4800_0000),
        4 * PAGE_SIZE,
        Attributes::kernel_data(),
        Constraints::NONE,
    )
    .unwrap();
    assert_eq!(pt.query(va(stack)), None);
    assert_eq!(pt.query(va(stack + 5 * PAGE_SIZE)), None);

    let t = pt.query(va(KIMAGE)).unwrap();
    assert_eq!((t.pa, t.level), (pa(load), 3));
    assert!(t.attrs.permissions().el1.execute && !t.attrs.permissions().el1.write && t.attrs.uxn());
    let r = pt.query(va(KIMAGE + text.0)).unwrap();
    assert_eq!(r.attrs, Attributes::kernel_rodata());
    let d = pt.query(va(KIMAGE + text.0 + rodata.0)).unwrap();
    assert_eq!(d.attrs, Attributes::kernel_data());
    assert_eq!(d.pa, pa(load + 52 * PAGE_SIZE));
    let mut exec_pages = 0;
    pt.walk_all(|l| {
        assert!(l.attrs.uxn(), "every kernel mapping is UXN");
        assert!(l.attrs.is_global());
        if !l.attrs.pxn() {
            exec_pages += 1;
            assert!(l.va.0 >= KIMAGE && l.va.0 < KIMAGE + text.0, "only text is executable");
        }
    });
    assert_eq!(exec_pages, 35);
    let lin = pt.query(va(LINEAR + 0x4000_0000)).unwrap();
    assert_eq!(lin.level, per_granule(1, 2, 2));
    assert_eq!(pt.query(va(LINEAR + 0x8000_0000)).unwrap().level, 2);
    assert_eq!(pt.translate(va(0xffff_ffff_f000_0000)), Some(pa(0x0900_0000)));
    // 4 KiB: root + (image: L1, L2, L3) + (linear, another L0 slot: L1, L2) + (UART: L1, L2, L3).
    // 16 KiB: the root's two entries; the image and the UART share the upper one's L1 table:
    // root + (image: L1, L2, L3) + (linear: L1, L2) + (UART: L2, L3).
    // 64 KiB: the root is level 1: root + (image: L2, L3) + (linear: L2) + (UART: L2, L3).
    assert_eq!(used, per_granule(1 + 3 + 2 + 3, 1 + 3 + 2 + 2, 1 + 2 + 1 + 2));
    // The stack, 256 MiB above the image, needs a last-level table of its own, except with 64 KiB
    // pages, where one last-level table spans 512 MiB.
    assert_eq!(pt.translation().next, used + per_granule(1, 1, 0), "the stack's new tables");
}

// ---- property test against a reference model ------------------------------------------------------

const WINDOW_BASE: u64 = BLOCK_1G - 4 * BLOCK_2M; // straddles a level-1 boundary
const WINDOW_PAGES: u64 = 8 * ENTRIES_PER_TABLE as u64; // eight level-2 blocks (16 MiB with 4 KiB pages)

fn attr_choice(i: u8) -> Attributes {
    match i % 6 {
        0 => Attributes::kernel_data(),
        1 => Attributes::kernel_rodata(),
        2 => Attributes::kernel_text(),
        3 => Attributes::user(UserAccess::ReadWrite),
        4 => Attributes::user(UserAccess::ReadExecute),
        _ => Attributes::device(),
    }
}

fn constraint_choice(i: u8) -> Constraints {
    match i % 4 {
        0 | 1 => Constraints::NONE,
        2 => Constraints::NO_BLOCKS,
        _ => Constraints::NO_CONTIGUOUS,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Map { page: u64, pages: u64, pa_page: u64, attrs: u8, constraints: u8 },
    Unmap { page: u64, pages: u64 },
    Protect { page: u64, pages: u64, attrs: u8 },
    SetLive(bool),
}

/// A page range in the window, aligned to 1 page, a contiguous run of pages or a level-2 block
/// (1, 16 or 512 pages with 4 KiB pages) to give blocks and runs a chance.
fn page_range() -> impl Strategy<Value = (u64, u64, u64)> {
    let (run, block) = (PAGE_RUN as u64, ENTRIES_PER_TABLE as u64);
    (prop_oneof![Just(1u64), Just(run), Just(block)], 0..WINDOW_PAGES, 1..=700u64).prop_map(
        |(align, page, n)| {
            let page = page / align * align;
            let n = n.div_ceil(align) * align;
            (page, n.min(WINDOW_PAGES - page), align)
        },
    )
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (page_range(), 0..2 * WINDOW_PAGES, any::<u8>(), any::<u8>()).prop_map(|((page, pages, align), pa, attrs, constraints)| Op::Map {
            page,
            pages,
            pa_page: pa / align * align,
            attrs,
            constraints,
        }),
        2 => page_range().prop_map(|(page, pages, _)| Op::Unmap { page, pages }),
        2 => (page_range(), any::<u8>()).prop_map(|((page, pages, _), attrs)| Op::Protect { page, pages, attrs }),
        1 => any::<bool>().prop_map(Op::SetLive),
    ]
}

type Model = BTreeMap<u64, (u64, Attributes)>;

/// Checks that the table maps exactly what the model says, page by page, walking both in
/// address order.
fn assert_table_matches(pt: &Pt, model: &Model, step: usize) {
    let mut expected = model.iter();
    pt.walk_all(|l| {
        for i in 0..l.size / PAGE_SIZE {
            let got = (l.va.0 + i * PAGE_SIZE, l.pa.0 + i * PAGE_SIZE, l.attrs);
            let want = expected.next().map(|(&v, &(p, a))| (v, p, a));
            assert_eq!(Some(got), want, "step {step}: the table differs from the model");
        }
    });
    assert_eq!(expected.next(), None, "step {step}: the model maps more than the table");
}

fn check_record(rec: &PendingFlush, before: &Model, after: &Model, lo: u64, hi: u64) {
    let changed: Vec<u64> =
        (lo..hi).step_by(PAGE_SIZE as usize).filter(|v| before.get(v) != after.get(v)).collect();
    match rec.range() {
        None => assert!(changed.is_empty()),
        Some(r) => {
            assert!(r.start.0 >= lo && r.start.0 + r.size <= hi, "record range outside the operation");
            for v in &changed {
                assert!(r.contains(va(*v)), "changed page {v:#x} outside the record range");
            }
            assert!(!changed.is_empty(), "a record range although nothing changed");
        }
    }
    assert_eq!(rec.detached_tables() > 0, rec.tables_removed());
}

fn run_model(ops: &[Op], fail_at: &[Option<usize>]) {
    let mut pt = new_pt(VaRange::Lower);
    let mut model = Model::new();
    for (step, op) in ops.iter().enumerate() {
        let before = model.clone();
        let frames_before = pt.translation().live_frames();
        pt.translation_mut().fail_after = fail_at.get(step).copied().flatten();
        let live = pt.is_live();
        // The record of a successful unmap or protect, with the operation's range.
        let mut record = None;
        match *op {
            Op::SetLive(l) => pt.set_live(l),
            Op::Map { page, pages, pa_page, attrs, constraints } => {
                let (v, p, size) =
                    (WINDOW_BASE + page * PAGE_SIZE, 0x1_0000_0000 + pa_page * PAGE_SIZE, pages * PAGE_SIZE);
                let a = attr_choice(attrs);
                let overlap = model.range(v..v + size).next().map(|(&k, _)| k);
                match pt.map(va(v), pa(p), size, a, constraint_choice(constraints)) {
                    Ok(()) => {
                        assert_eq!(overlap, None);
                        for i in 0..pages {
                            model.insert(v + i * PAGE_SIZE, (p + i * PAGE_SIZE, a));
                        }
                    }
                    Err(MapError::AlreadyMapped(at)) => {
                        assert_eq!(overlap, Some(at.0), "the first mapped page is reported");
                    }
                    Err(MapError::OutOfMemory) => assert!(pt.translation().fail_after.is_some()),
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            Op::Unmap { page, pages } => {
                let (v, size) = (WINDOW_BASE + page * PAGE_SIZE, pages * PAGE_SIZE);
                match pt.unmap(va(v), size) {
                    Ok(rec) => {
                        let keys: Vec<u64> = model.range(v..v + size).map(|(&k, _)| k).collect();
                        for k in keys {
                            model.remove(&k);
                        }
                        record = Some((rec, v, v + size));
                    }
                    Err(MapError::BreakBeforeMakeRequired(_)) => assert!(live),
                    Err(MapError::OutOfMemory) => {
                        assert!(pt.translation().fail_after.is_some() && !live)
                    }
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
            Op::Protect { page, pages, attrs } => {
                let (v, size) = (WINDOW_BASE + page * PAGE_SIZE, pages * PAGE_SIZE);
                let new = attr_choice(attrs);
                // Live: permission changes only (mprotect); otherwise anything.
                let f = |a: Attributes| {
                    if live { a.with_permissions_of(new) } else { new }
                };
                match pt.protect_with(va(v), size, f) {
                    Ok(rec) => {
                        for (_, entry) in model.range_mut(v..v + size) {
                            entry.1 = f(entry.1);
                        }
                        assert!(rec.leaf_only(), "protect never removes a table");
                        record = Some((rec, v, v + size));
                    }
                    Err(MapError::BreakBeforeMakeRequired(_)) => assert!(live),
                    Err(MapError::OutOfMemory) => {
                        assert!(pt.translation().fail_after.is_some() && !live)
                    }
                    Err(e) => panic!("unexpected {e:?}"),
                }
            }
        }
        pt.translation_mut().fail_after = None;
        assert_table_matches(&pt, &model, step);
        if let Some((rec, lo, hi)) = record {
            check_record(&rec, &before, &model, lo, hi);
            release(&mut pt, rec);
        } else {
            // Refused, or a map: no frame was freed, and a refused operation kept none.
            assert!(pt.translation().live_frames() >= frames_before);
            if model == before {
                assert_eq!(pt.translation().live_frames(), frames_before, "step {step}: frame kept");
            }
        }
        let tables = check_invariants(&pt);
        assert_eq!(pt.translation().live_frames(), tables, "step {step}: frames leaked");
    }
    let (mut mem, rec) = pt.destroy();
    rec.release(&mut mem);
    assert_eq!(mem.live_frames(), 0);
}

/// Proptest cases for `full` cases with 4 KiB pages: fewer with the larger granules, whose
/// window and block-aligned operations hold 4 or 16 times the pages (so about the same work);
/// scaled by `MM_PROPTEST_PERCENT` ([`crate::test_support::proptest_cases`]).
fn cases(full: u32) -> u32 {
    crate::test_support::proptest_cases(full * 512 / ENTRIES_PER_TABLE as u32)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn random_operations_match_the_model(
        ops in proptest::collection::vec(op_strategy(), 1..40),
        fail_at in proptest::collection::vec(prop_oneof![6 => Just(None), 1 => (0..4usize).prop_map(Some)], 40),
    ) {
        run_model(&ops, &fail_at);
    }
}

#[test]
fn model_smoke() {
    run_model(
        &[
            Op::Map { page: 0, pages: 4096, pa_page: 0, attrs: 0, constraints: 0 },
            Op::Protect { page: 100, pages: 1, attrs: 1 },
            Op::Unmap { page: 1030, pages: 20 },
            Op::SetLive(true),
            Op::Protect { page: 512, pages: 512, attrs: 1 },
            Op::Unmap { page: 2048, pages: 512 },
            Op::Map { page: 2048, pages: 512, pa_page: 7, attrs: 3, constraints: 0 },
        ],
        &[],
    );
}

/// Rough host timing (run with `cargo test -p mm --release -- --ignored --nocapture bench`):
/// 2^20 pages mapped one call per page, then unmapped one call per page, in heap-held tables.
#[test]
#[ignore]
fn bench_map_unmap_pages() {
    let n = 1u64 << 20;
    let base = 0x4000_0000;
    let mut pt = new_pt(VaRange::Lower);
    let t0 = std::time::Instant::now();
    for i in 0..n {
        let v = base + i * PAGE_SIZE;
        pt.map(va(v), pa(v), PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE).unwrap();
    }
    let t1 = std::time::Instant::now();
    for i in 0..n {
        let rec = pt.unmap(va(base + i * PAGE_SIZE), PAGE_SIZE).unwrap();
        release(&mut pt, rec);
    }
    let t2 = std::time::Instant::now();
    pt.map(va(base), pa(base), n * PAGE_SIZE, Attributes::kernel_data(), Constraints::NO_BLOCKS).unwrap();
    let t3 = std::time::Instant::now();
    let rec = pt.unmap(va(base), n * PAGE_SIZE).unwrap();
    release(&mut pt, rec);
    let t4 = std::time::Instant::now();
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    std::println!(
        "per page: map {:.1} ns, unmap {:.1} ns; one call: map {:.1} ns, unmap {:.1} ns; tables {}",
        per(t1 - t0),
        per(t2 - t1),
        per(t3 - t2),
        per(t4 - t3),
        pt.stats().tables_allocated
    );
}

// ---- the single-walk fast paths and the last-table cache ---------------------------------------

/// The record's observable contents, to compare two records.
fn record_summary(rec: &PendingFlush) -> (Option<FlushRange>, bool, u64, u64, u64, bool, bool, bool, usize) {
    (
        rec.range(),
        rec.tables_removed(),
        rec.min_leaf_size(),
        rec.max_leaf_size(),
        rec.leaves_changed(),
        rec.has_global(),
        rec.has_non_global(),
        rec.has_executable(),
        rec.detached_tables(),
    )
}

/// Runs `ops` on a table using the fast paths and on one restricted to the general path, and
/// checks after every step that both gave the same result, the same record, the same leaves and
/// the same frame counts.
fn run_differential(ops: &[Op], fail_at: &[Option<usize>]) {
    let mut fast = new_pt(VaRange::Lower);
    let mut general = new_pt(VaRange::Lower);
    general.general_only = true;
    for (step, op) in ops.iter().enumerate() {
        let fail = fail_at.get(step).copied().flatten();
        let mut results = Vec::new();
        for pt in [&mut fast, &mut general] {
            pt.translation_mut().fail_after = fail;
            let live = pt.is_live();
            let result = match *op {
                Op::SetLive(l) => {
                    pt.set_live(l);
                    Ok(None)
                }
                Op::Map { page, pages, pa_page, attrs, constraints } => pt
                    .map(
                        va(WINDOW_BASE + page * PAGE_SIZE),
                        pa(0x1_0000_0000 + pa_page * PAGE_SIZE),
                        pages * PAGE_SIZE,
                        attr_choice(attrs),
                        constraint_choice(constraints),
                    )
                    .map(|()| None),
                Op::Unmap { page, pages } => {
                    pt.unmap(va(WINDOW_BASE + page * PAGE_SIZE), pages * PAGE_SIZE).map(Some)
                }
                Op::Protect { page, pages, attrs } => {
                    let new = attr_choice(attrs);
                    pt.protect_with(va(WINDOW_BASE + page * PAGE_SIZE), pages * PAGE_SIZE, |a| {
                        if live { a.with_permissions_of(new) } else { new }
                    })
                    .map(Some)
                }
            };
            pt.translation_mut().fail_after = None;
            let summary = result.map(|rec| {
                rec.map(|rec| {
                    let s = record_summary(&rec);
                    release(pt, rec);
                    s
                })
            });
            results.push((
                summary,
                leaves(pt),
                pt.stats(),
                pt.translation().live_frames(),
                check_invariants(pt),
            ));
        }
        assert_eq!(results[0], results[1], "step {step}: {op:?}: the fast and the general path differ");
    }
    for pt in [fast, general] {
        let (mut mem, rec) = pt.destroy();
        rec.release(&mut mem);
        assert_eq!(mem.live_frames(), 0);
    }
}

/// Small operations, mostly inside one 2 MiB region, in a window of four regions: the calls
/// the fast paths take, and their neighbours that must fall back.
fn small_op_strategy() -> impl Strategy<Value = Op> {
    let range =
        (0..4 * 512u64, prop_oneof![4 => 1..=4u64, 1 => 1..=40u64, 1 => Just(16u64), 1 => Just(512u64)])
            .prop_map(
                |(page, n)| {
                    if n == 16 || n == 512 { (page / n * n, n) } else { (page, n.min(4 * 512 - page)) }
                },
            );
    prop_oneof![
        4 => (range.clone(), 0..64u64, 0..3u8, 0..4u8).prop_map(|((page, pages), pa_page, attrs, c)| Op::Map {
            page,
            pages,
            // Aligned like the VA most of the time, so that contiguous runs happen.
            pa_page: if pa_page < 48 { page } else { page + pa_page },
            attrs: attrs * 3,
            constraints: c,
        }),
        3 => range.clone().prop_map(|(page, pages)| Op::Unmap { page, pages }),
        2 => (range, any::<u8>()).prop_map(|((page, pages), attrs)| Op::Protect { page, pages, attrs }),
        1 => any::<bool>().prop_map(Op::SetLive),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    /// The fast paths change exactly what the general path changes, record the same, fail the
    /// same way (allocation failures included) and keep the same frames.
    #[test]
    fn fast_paths_match_the_general_path(
        ops in proptest::collection::vec(prop_oneof![3 => small_op_strategy(), 1 => op_strategy()], 1..80),
        fail_at in proptest::collection::vec(prop_oneof![6 => Just(None), 1 => (0..4usize).prop_map(Some)], 80),
    ) {
        run_differential(&ops, &fail_at);
    }
}

/// The last-table cache keeps the level-1 table of its path for the rest of that level-0
/// region, and a walk that fails below a level-1 table it read (a level-2 block) leaves the
/// cache as it was: the next call in the cached level-0 region must not use the level-1 table
/// of the failed walk, which here has a table at the same index (the call would land in the
/// other region's last-level table). Only a fast-path call fills the cache.
#[test]
fn a_failed_walk_leaves_the_cached_level_1_table_alone() {
    if ROOT_LEVEL != 0 {
        return; // The root is the level-1 table: every offset shares it.
    }
    let (s0, s1, s2) = (level_size(0), level_size(1), level_size(2));
    let page_at = |off: u64| (off - WINDOW_BASE) / PAGE_SIZE;
    let map = |off: u64, size: u64| Op::Map {
        page: page_at(off),
        pages: size / PAGE_SIZE,
        pa_page: page_at(off),
        attrs: 0,
        constraints: 0,
    };
    let ops = [
        map(2 * s1, PAGE_SIZE),                       // level-0 region 0, level-1 entry 2
        map(s0 + 2 * s1, PAGE_SIZE),                  // level-0 region 1, level-1 entry 2, level-2 entry 0
        map(s0 + 2 * s1 + s2, s2),                    // there, level-2 entry 1: a block
        map(s1, PAGE_SIZE),                           // level-0 region 0, level-1 entry 1 (general path)
        map(s1 + PAGE_SIZE, PAGE_SIZE),               // the same table (fast path): the cache holds this path
        map(s0 + 2 * s1 + s2 + PAGE_SIZE, PAGE_SIZE), // in the block: the walk fails at level 2
        map(2 * s1 + PAGE_SIZE, PAGE_SIZE),           // level-0 region 0 again, level-1 entry 2
    ];
    run_differential(&ops, &[]);
}

#[test]
fn fast_path_maps_into_an_existing_table_without_allocating() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::user(UserAccess::ReadWrite);
    let base = 0x4000_0000;
    pt.map(va(base), pa(base), PAGE_SIZE, a, Constraints::NONE).unwrap(); // General: the tables.
    let tables = per_granule(4, 4, 3);
    assert_eq!(pt.stats().tables_allocated, tables);
    // Fast: same 2 MiB region, no frame may be allocated (an allocator that fails proves it).
    pt.translation_mut().fail_after = Some(0);
    pt.map(va(base + PAGE_SIZE), pa(base + PAGE_SIZE), 3 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    // A run aligned in VA and PA gets the contiguous hint, as on the general path.
    let run = PAGE_RUN as u64 * PAGE_SIZE;
    pt.map(va(base + run), pa(base + run), run, a, Constraints::NONE).unwrap();
    let run = pt.query(va(base + run + 4 * PAGE_SIZE)).unwrap();
    assert!(run.contiguous && run.level == 3);
    assert!(!pt.query(va(base + PAGE_SIZE)).unwrap().contiguous);
    // Crossing into the next 2 MiB region needs a new table: the general path, which fails.
    assert_eq!(
        pt.map(va(base + BLOCK_2M - PAGE_SIZE), pa(0), 2 * PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::OutOfMemory)
    );
    assert_eq!(pt.query(va(base + BLOCK_2M - PAGE_SIZE)), None, "a failed call changed something");
    pt.translation_mut().fail_after = None;
    assert_eq!(pt.stats().tables_allocated, tables);
    check_invariants(&pt);
}

#[test]
fn fast_path_map_over_a_mapped_page_falls_back_and_changes_nothing() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    let base = 0x4000_0000;
    pt.map(va(base + 2 * PAGE_SIZE), pa(0), 4 * PAGE_SIZE, a, Constraints::NONE).unwrap(); // Pages 2..6.
    let before = leaves(&pt);
    let frames = pt.translation().live_frames();
    // Starts on holes, overlaps page 2: the first mapped page is reported, nothing is written.
    assert_eq!(
        pt.map(va(base), pa(0x10_0000), 4 * PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(base + 2 * PAGE_SIZE)))
    );
    assert_eq!(
        pt.map(va(base + 5 * PAGE_SIZE), pa(0x10_0000), 3 * PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(base + 5 * PAGE_SIZE)))
    );
    assert_eq!(leaves(&pt), before);
    assert_eq!(pt.translation().live_frames(), frames);
}

#[test]
fn fast_path_unmap_detaches_every_table_it_empties() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::user(UserAccess::ReadExecute);
    let lone = 5 * (1u64 << 39) + 7 * BLOCK_1G + 9 * BLOCK_2M + 11 * PAGE_SIZE;
    pt.map(va(lone), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap();
    // A neighbour in the same 1 GiB region, so that only the level-3 table empties first.
    pt.map(va(lone + BLOCK_2M), pa(0), 2 * PAGE_SIZE, a, Constraints::NONE).unwrap();
    // The tables on a path below the root: 3, or 2 with 64 KiB pages (the root is level 1).
    let below_root = u64::from(3 - ROOT_LEVEL);
    assert_eq!(pt.stats().tables_in_use(), 1 + below_root + 1);
    let rec = pt.unmap(va(lone), PAGE_SIZE).unwrap();
    assert_eq!(rec.range(), Some(FlushRange { start: va(lone), size: PAGE_SIZE }));
    assert_eq!((rec.detached_tables(), rec.leaves_changed()), (1, 1));
    assert!(rec.tables_removed() && rec.has_executable() && rec.has_non_global() && !rec.has_global());
    release(&mut pt, rec);
    assert_eq!(pt.stats().tables_in_use(), 1 + below_root);
    // First page: the table keeps page 2. Second: the level-3, 2 and 1 tables all go.
    let rec = pt.unmap(va(lone + BLOCK_2M), PAGE_SIZE).unwrap();
    assert_eq!(rec.detached_tables(), 0);
    release(&mut pt, rec);
    let rec = pt.unmap(va(lone + BLOCK_2M + PAGE_SIZE), PAGE_SIZE).unwrap();
    assert_eq!(rec.detached_tables() as u64, below_root);
    release(&mut pt, rec);
    assert_eq!(pt.stats().tables_in_use(), 1);
    assert_eq!(pt.translation().live_frames(), 1);
    // The last-table cache forgot the freed tables: mapping there again builds new ones.
    pt.map(va(lone), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap();
    assert_eq!(pt.stats().tables_in_use(), 1 + below_root);
    check_invariants(&pt);
}

#[test]
fn fast_path_unmap_of_a_whole_last_level_table() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    pt.map(va(BLOCK_1G), pa(0), 2 * BLOCK_2M, a, Constraints::NO_BLOCKS).unwrap();
    let rec = pt.unmap(va(BLOCK_1G + BLOCK_2M), BLOCK_2M).unwrap();
    assert_eq!((rec.leaves_changed(), rec.detached_tables()), (ENTRIES_PER_TABLE as u64, 1));
    assert_eq!((rec.min_leaf_size(), rec.max_leaf_size()), (PAGE_SIZE, PAGE_SIZE));
    release(&mut pt, rec);
    assert_eq!(pt.query(va(BLOCK_1G + BLOCK_2M)), None);
    assert!(pt.query(va(BLOCK_1G)).is_some());
    check_invariants(&pt);
}

#[test]
fn fast_path_falls_back_for_contiguous_runs_and_bbm() {
    let a = Attributes::kernel_data();
    let base = BLOCK_1G;
    let run = PAGE_RUN as u64;
    let setup = || {
        let mut pt = new_pt(VaRange::Lower);
        pt.map(va(base), pa(0), 2 * run * PAGE_SIZE, a, Constraints::NONE).unwrap();
        assert!(pt.query(va(base + 5 * PAGE_SIZE)).unwrap().contiguous);
        pt
    };
    // Live: cutting a run, or a memory-type change, needs break-before-make.
    let mut pt = setup();
    pt.set_live(true);
    let before = leaves(&pt);
    assert_eq!(
        pt.unmap(va(base + 5 * PAGE_SIZE), PAGE_SIZE).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(base + 5 * PAGE_SIZE))
    );
    assert_eq!(
        pt.protect(va(base + run * PAGE_SIZE), run * PAGE_SIZE, Attributes::device()).unwrap_err(),
        MapError::BreakBeforeMakeRequired(va(base + run * PAGE_SIZE))
    );
    assert_eq!(leaves(&pt), before);
    // A whole run, and a permission change, are fine.
    let rec = pt.protect(va(base), run * PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
    assert_eq!(rec.leaves_changed(), run);
    release(&mut pt, rec);
    assert!(pt.query(va(base)).unwrap().contiguous);
    let rec = pt.unmap(va(base + run * PAGE_SIZE), run * PAGE_SIZE).unwrap();
    release(&mut pt, rec);
    check_invariants(&pt);
    // Not live: the general path unfolds the run.
    let mut pt = setup();
    let rec = pt.unmap(va(base + 5 * PAGE_SIZE), PAGE_SIZE).unwrap();
    release(&mut pt, rec);
    assert!(!pt.query(va(base + 4 * PAGE_SIZE)).unwrap().contiguous);
    assert!(pt.query(va(base + run * PAGE_SIZE)).unwrap().contiguous);
    check_invariants(&pt);
}

#[test]
fn last_table_cache_forgets_a_table_replaced_by_a_promotion() {
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    let base = BLOCK_1G;
    // 512 pages mapping one aligned 2 MiB physical range: promotable. The last call takes the
    // fast path, so the last-table cache holds the level-3 table.
    pt.map(va(base), pa(BLOCK_2M), BLOCK_2M - PAGE_SIZE, a, Constraints::NO_BLOCKS).unwrap();
    pt.map(va(base + BLOCK_2M - PAGE_SIZE), pa(2 * BLOCK_2M - PAGE_SIZE), PAGE_SIZE, a, Constraints::NONE)
        .unwrap();
    let mut record = PendingFlush::new(VaRange::Lower);
    let mut counts = BbmCounts::default();
    assert!(pt.stage_promote(va(base), &mut record, &mut counts).unwrap());
    release(&mut pt, record); // Frees the level-3 table (the emulated memory poisons it).
    assert!(pt.finish(va(base), BLOCK_2M, &mut |_| {}));
    assert_eq!(pt.query(va(base)).unwrap().level, 2);
    // A stale cache would write into the freed frame (or panic on it); the block is found.
    assert_eq!(
        pt.map(va(base + PAGE_SIZE), pa(0), PAGE_SIZE, a, Constraints::NONE),
        Err(MapError::AlreadyMapped(va(base + PAGE_SIZE)))
    );
    let rec = pt.unmap(va(base + PAGE_SIZE), PAGE_SIZE).unwrap(); // Splits the block.
    release(&mut pt, rec);
    assert_eq!(pt.query(va(base)).unwrap().level, 3);
    check_invariants(&pt);
}

#[test]
fn last_table_cache_follows_tables_freed_and_reused() {
    // The emulated memory hands the last freed frame out first, so a stale cache would point
    // into a frame now used at another level or for another region.
    let mut pt = new_pt(VaRange::Lower);
    let a = Attributes::kernel_data();
    let (r1, r2) = (BLOCK_1G, 3 * BLOCK_1G + 5 * BLOCK_2M);
    for round in 0..4 {
        pt.map(va(r1 + PAGE_SIZE), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap();
        pt.map(va(r1), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap(); // Fast, caches r1.
        let rec = pt.unmap(va(r1), 2 * PAGE_SIZE).unwrap();
        // Levels 3, 2 and 1 (1 is the root with 64 KiB pages).
        assert_eq!(rec.detached_tables(), per_granule(3, 3, 2), "round {round}");
        release(&mut pt, rec);
        pt.map(va(r2), pa(0), PAGE_SIZE, a, Constraints::NONE).unwrap(); // Reuses the frames.
        assert_eq!(pt.query(va(r1)), None);
        assert_eq!(pt.map(va(r1), pa(0), PAGE_SIZE, a, Constraints::NONE), Ok(()));
        assert_eq!(pt.translate(va(r2)), Some(pa(0)));
        let rec = pt.unmap(va(0), 4 * BLOCK_1G).unwrap();
        release(&mut pt, rec);
        assert_eq!(pt.stats().tables_in_use(), 1);
        check_invariants(&pt);
    }
}

#[test]
fn fast_path_allocation_failure_in_the_middle_changes_nothing() {
    // A call starting in an existing table and running into regions without one: the general
    // path, failing at every allocation in turn.
    let setup = || {
        let mut pt = new_pt(VaRange::Lower);
        pt.map(va(BLOCK_1G - 4 * PAGE_SIZE), pa(0), PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE)
            .unwrap();
        pt
    };
    for_every_failure_point(setup, |pt| {
        pt.map(
            va(BLOCK_1G - 3 * PAGE_SIZE),
            pa(0),
            6 * PAGE_SIZE,
            Attributes::kernel_data(),
            Constraints::NONE,
        )
        .map(|_| None)
    });
    // And one that needs nothing: succeeds even with no frame to give.
    let mut pt = setup();
    pt.translation_mut().fail_after = Some(0);
    pt.map(va(BLOCK_1G - 3 * PAGE_SIZE), pa(0), 3 * PAGE_SIZE, Attributes::kernel_data(), Constraints::NONE)
        .unwrap();
    let rec = pt.unmap(va(BLOCK_1G - 4 * PAGE_SIZE), 4 * PAGE_SIZE).unwrap();
    release(&mut pt, rec);
    assert_eq!(pt.stats().tables_in_use(), 1);
}

/// The figure of docs/mm.md §11: the table memory that 1 GiB mapped page by page costs, per
/// granule (one L3 table maps 2 MiB, 32 MiB or 512 MiB; the levels above add one table each):
/// 515 × 4 KiB = 2060 KiB, 35 × 16 KiB = 560 KiB, 4 × 64 KiB = 256 KiB.
#[test]
fn table_memory_for_one_gib_mapped_page_by_page() {
    let mut pt = new_pt(VaRange::Lower);
    let base = 1u64 << 30;
    let gib = 1u64 << 30;
    for off in (0..gib).step_by(PAGE_SIZE as usize) {
        pt.map(
            va(base + off),
            pa(0x1_0000_0000 + off),
            PAGE_SIZE,
            Attributes::kernel_data(),
            Constraints::NONE,
        )
        .unwrap();
    }
    let tables = pt.stats().tables_in_use();
    let last_level = gib / BLOCK_2M;
    // The L3 tables, then one table for each level from the root down to level 2.
    assert_eq!(tables, last_level + (3 - u64::from(ROOT_LEVEL)));
    let kib = tables * PAGE_SIZE / 1024;
    let want = match PAGE_SIZE {
        4096 => 2060,
        16384 => 560,
        _ => 256,
    };
    assert_eq!(kib, want, "{} granule", crate::granule::Format::BUILD.name());
    std::println!("{}: {tables} tables, {kib} KiB for 1 GiB of pages", crate::granule::Format::BUILD.name());
    assert_eq!(check_invariants(&pt) as u64, tables);
}

/// `walk_runs` reports what `walk` does, a contiguous run as one leaf: over a tree holding a
/// block, runs and single pages, for ranges that start and end inside runs and blocks, every
/// page translates the same through the leaves of either walk, and a run whole in the range is
/// visited once.
#[test]
fn walk_runs_translates_every_page_as_walk_does_visiting_a_run_once() {
    let mut pt = new_pt(VaRange::Lower);
    let base = BLOCK_2M * 4;
    let data = Attributes::kernel_data();
    // A block, then two runs, then three single pages (physically apart), then a run.
    pt.map(va(base), pa(BLOCK_2M * 64), BLOCK_2M, data, Constraints::NONE).unwrap();
    let runs = base + BLOCK_2M;
    pt.map(va(runs), pa(BLOCK_2M * 70), 2 * KIB64, data, Constraints::NONE).unwrap();
    for i in 0..3 {
        let v = runs + 2 * KIB64 + i * PAGE_SIZE;
        pt.map(va(v), pa(BLOCK_2M * 72 + (5 - i) * PAGE_SIZE), PAGE_SIZE, data, Constraints::NONE).unwrap();
    }
    pt.map(va(runs + 4 * KIB64), pa(BLOCK_2M * 74), KIB64, data, Constraints::NONE).unwrap();
    check_invariants(&pt);
    let runs_seen = leaves(&pt).iter().filter(|l| l.contiguous).count() as u64;
    assert_eq!(runs_seen, 3 * PAGE_RUN as u64, "three runs, each entry a leaf to walk");
    let end = runs + 5 * KIB64;
    let cuts = [base, base + PAGE_SIZE, runs - PAGE_SIZE, runs + 3 * PAGE_SIZE, runs + KIB64 + PAGE_SIZE];
    for &from in &cuts {
        for to in [runs + PAGE_SIZE, runs + 2 * KIB64 + PAGE_SIZE, end - PAGE_SIZE, end] {
            if to <= from {
                continue;
            }
            let mut by_walk = Vec::new();
            pt.walk(va(from), to - from, |l| by_walk.push(*l)).unwrap();
            let mut by_runs = Vec::new();
            pt.walk_runs(va(from), to - from, |l| by_runs.push(*l)).unwrap();
            for page in (from..to).step_by(PAGE_SIZE as usize) {
                // The leaf holding the page (none in the holes between the single pages and
                // the last run), at most one.
                let through = |ls: &[Leaf]| {
                    let hits: Vec<_> =
                        ls.iter().filter(|l| l.va.0 <= page && page < l.va.0 + l.size).collect();
                    assert!(hits.len() <= 1, "page {page:#x} in [{from:#x}, {to:#x}): one leaf");
                    hits.first().map(|l| (l.translate(va(page)), l.attrs))
                };
                assert_eq!(through(&by_runs), through(&by_walk), "page {page:#x} in [{from:#x}, {to:#x})");
            }
            // Each run the range covers whole is one leaf of walk_runs.
            let whole = [0, 1, 4]
                .iter()
                .filter(|&&k| from <= runs + k * KIB64 && runs + (k + 1) * KIB64 <= to)
                .count();
            let run_leaves = by_runs.iter().filter(|l| l.contiguous && l.size == KIB64).count();
            assert!(run_leaves >= whole, "[{from:#x}, {to:#x}): {run_leaves} run leaves, {whole} whole runs");
            assert!(by_runs.iter().all(|l| !l.contiguous || l.size == KIB64));
            assert!(by_runs.iter().filter(|l| l.contiguous).count() <= 3, "each run once");
        }
    }
}

/// The last-table cache serves a miss in the cached level-0 region (512 GiB with 4 KiB pages)
/// from its level-1 table, and only there: a page at 4 GiB and one at 512 GiB + 4 GiB use the
/// same level-1 index in two different level-1 tables, so a region test that compared the wrong
/// bits would put the second one's page in the first one's table (mutation testing found no test
/// of this).
#[test]
fn the_last_table_cache_keeps_level_0_regions_apart() {
    let (a, b) = (level_size(0), 4 * level_size(1));
    if a + b >= SPACE_SIZE {
        return; // one level-0 region (64 KiB pages: the root is at level 1)
    }
    let rw = Attributes::user(UserAccess::ReadWrite);
    for (cached, then) in [(a + b, b), (b, a + b)] {
        let mut pt = new_pt(VaRange::Lower);
        pt.map(va(cached), pa(0x1_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        pt.map(va(then), pa(0x1_0010_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        // Through the cache: it now holds `cached`'s region.
        pt.map(va(cached + 2 * PAGE_SIZE), pa(0x1_0020_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        pt.map(va(then + PAGE_SIZE), pa(0x1_0030_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        assert_eq!(pt.translate(va(then + PAGE_SIZE)), Some(pa(0x1_0030_0000)));
        assert_eq!(pt.translate(va(cached + PAGE_SIZE)), None);
        check_invariants(&pt);
    }
}

// ---- copy_pages_from (fork's copy) ---------------------------------------------------------------

/// A source for the copy tests: scattered pages across three last-level regions (the first
/// ending just below a level-1 line), a whole contiguous run, and a block, which the copy leaves
/// alone. Returns the table and the range to copy.
fn copy_source() -> (Pt, u64, u64) {
    let (l2, l1) = (level_size(2), level_size(1));
    let rw = Attributes::user(UserAccess::ReadWrite);
    let mut src = new_pt(VaRange::Lower);
    let start = l1 - l2 - 5 * PAGE_SIZE;
    // Forty pages from one below the region line to two regions on, frames far apart and out of
    // order; then a run of consecutive frames, aligned, in the third region; then a block.
    for i in 0..40u64 {
        let v = start + i * 2 * l2 / 40 / PAGE_SIZE * PAGE_SIZE + if i % 2 == 0 { 0 } else { PAGE_SIZE };
        let p = 0x1_0000_0000 + (i * 7919 % 1000) * 3 * PAGE_SIZE;
        if src.query(va(v)).is_none() {
            src.map(va(v), pa(p), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        }
    }
    let run = l1 + 2 * l2 - 4 * KIB64;
    src.map(va(run), pa(0x2_0000_0000), KIB64, rw, Constraints::NONE).unwrap();
    let block = l1 + 3 * l2;
    src.map(va(block), pa(0x3_0000_0000), l2, rw, Constraints::NONE).unwrap();
    (src, start, block + l2)
}

/// `copy_pages_from` with a record of the source's changes, which the tests inspect.
fn copy(
    dst: &mut Pt,
    src: &mut Pt,
    range: (u64, u64),
    attrs: impl FnMut(Attributes) -> Attributes,
    take: impl FnMut(PhysAddr) -> bool,
) -> (Result<Copied, MapError>, PendingFlush) {
    let mut record = PendingFlush::new(VaRange::Lower);
    let r = dst.copy_pages_from(src, va(range.0), range.1 - range.0, attrs, take, &mut record);
    (r, record)
}

fn read_only(a: Attributes) -> Attributes {
    a.with_access(crate::descriptor::Access::UserRo)
}

#[test]
fn copy_pages_from_copies_every_page_with_new_attributes_and_takes_each_frame_once() {
    let (mut src, start, end) = copy_source();
    let before = leaves(&src);
    let pages: Vec<Leaf> = before.iter().copied().filter(|l| l.level == 3).collect();
    assert!(pages.iter().any(|l| l.contiguous), "the source holds a contiguous run");
    assert!(before.iter().any(|l| l.level < 3), "the source holds a block");
    let mut dst = new_pt(VaRange::Lower);
    let mut taken = Vec::new();
    let (r, record) = copy(&mut dst, &mut src, (start, end), read_only, |p| {
        taken.push(p);
        true
    });
    assert_eq!(r, Ok(Copied { pages: pages.len() as u64, cut_runs_left: false }), "the range cuts no run");
    let expected: Vec<Leaf> = pages.iter().map(|l| Leaf { attrs: read_only(l.attrs), ..*l }).collect();
    assert_eq!(leaves(&dst), expected, "every page, the run's hint kept, no block");
    assert_eq!(taken, pages.iter().map(|l| l.pa).collect::<Vec<_>>(), "one reference per frame, in order");
    // The source's pages read-only in place, its block untouched, every change in the record.
    let after: Vec<Leaf> = before
        .iter()
        .map(|l| if l.level == 3 { Leaf { attrs: read_only(l.attrs), ..*l } } else { *l })
        .collect();
    assert_eq!(leaves(&src), after);
    assert_eq!(record.leaves_changed(), pages.len() as u64);
    let range = record.range().unwrap();
    assert_eq!(
        (range.start, range.size),
        (pages[0].va, pages.last().unwrap().va.0 + PAGE_SIZE - pages[0].va.0)
    );
    assert_eq!((record.min_leaf_size(), record.max_leaf_size()), (PAGE_SIZE, PAGE_SIZE));
    assert!(record.leaf_only() && !record.tables_removed());
    check_invariants(&dst);
    check_invariants(&src);
    // A second copy finds every entry in the way; the source's pages need no change now.
    let (again, record) = copy(&mut dst, &mut src, (start, end), read_only, |_| true);
    assert_eq!(again, Err(MapError::AlreadyMapped(pages[0].va)));
    assert!(!record.needs_flush());
}

#[test]
fn copy_pages_from_clears_the_hint_of_a_run_it_cuts_and_leaves_the_source_s_run_whole() {
    let (mut src, _, _) = copy_source();
    let run = leaves(&src).into_iter().find(|l| l.contiguous).unwrap().va.0 & !(KIB64 - 1);
    let cut = (run + PAGE_SIZE, run + KIB64 - PAGE_SIZE);
    // Nothing to change in the source: its run stays, the copy has no hint.
    let mut dst = new_pt(VaRange::Lower);
    let (r, record) = copy(&mut dst, &mut src, cut, |a| a, |_| true);
    assert_eq!(r, Ok(Copied { pages: KIB64 / PAGE_SIZE - 2, cut_runs_left: false }));
    assert!(!record.needs_flush());
    let copied = leaves(&dst);
    assert_eq!(copied.len() as u64, KIB64 / PAGE_SIZE - 2);
    assert!(copied.iter().all(|l| !l.contiguous), "a cut run loses its hint: {copied:?}");
    check_invariants(&dst);
    // A change: the copy gets it, the source's run is left whole and unchanged (changing the
    // pages inside the range would leave one hint over two kinds of entry), and says so.
    let before = leaves(&src);
    let mut dst = new_pt(VaRange::Lower);
    let (r, record) = copy(&mut dst, &mut src, cut, read_only, |_| true);
    assert_eq!(r, Ok(Copied { pages: KIB64 / PAGE_SIZE - 2, cut_runs_left: true }));
    assert!(!record.needs_flush());
    assert_eq!(leaves(&src), before);
    let copied = leaves(&dst);
    assert!(copied.iter().all(|l| !l.contiguous && !l.attrs.access().writable()), "{copied:?}");
    check_invariants(&dst);
    check_invariants(&src);
}

#[test]
fn copy_pages_from_clears_the_hint_of_both_runs_a_range_cuts() {
    // Two runs side by side, the range from the second page of the first to the first page of
    // the second: each end cuts its own run.
    let rw = Attributes::user(UserAccess::ReadWrite);
    let mut src = new_pt(VaRange::Lower);
    let run = level_size(1) + 4 * KIB64;
    src.map(va(run), pa(0x2_0000_0000), 2 * KIB64, rw, Constraints::NONE).unwrap();
    assert!(leaves(&src).iter().all(|l| l.contiguous));
    let mut dst = new_pt(VaRange::Lower);
    let (r, _) = copy(&mut dst, &mut src, (run + PAGE_SIZE, run + KIB64 + PAGE_SIZE), read_only, |_| true);
    assert_eq!(r, Ok(Copied { pages: KIB64 / PAGE_SIZE, cut_runs_left: true }));
    let copied = leaves(&dst);
    assert!(copied.iter().all(|l| !l.contiguous), "{copied:?}");
    assert!(leaves(&src).iter().all(|l| l.contiguous && l.attrs == rw), "both runs left whole");
    check_invariants(&dst);
}

#[test]
fn copy_pages_from_keeps_the_hint_of_a_run_the_range_holds_exactly_and_fills_a_table_in_two_calls() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let mut src = new_pt(VaRange::Lower);
    let run = level_size(1) + 4 * KIB64;
    src.map(va(run), pa(0x2_0000_0000), 2 * KIB64, rw, Constraints::NONE).unwrap();
    // Exactly the first run: whole, so it keeps its hint on both sides.
    let mut dst = new_pt(VaRange::Lower);
    let (r, record) = copy(&mut dst, &mut src, (run, run + KIB64), read_only, |_| true);
    assert_eq!(r, Ok(Copied { pages: KIB64 / PAGE_SIZE, cut_runs_left: false }));
    assert_eq!(record.leaves_changed(), KIB64 / PAGE_SIZE);
    assert!(leaves(&dst).iter().all(|l| l.contiguous && l.attrs == read_only(rw)));
    // The second run in a second call, into the table the first one made (as fork's next area
    // in the same last-level table): nothing in the way.
    let (r, _) = copy(&mut dst, &mut src, (run + KIB64, run + 2 * KIB64), read_only, |_| true);
    assert_eq!(r, Ok(Copied { pages: KIB64 / PAGE_SIZE, cut_runs_left: false }));
    assert_eq!(leaves(&dst).len() as u64, 2 * KIB64 / PAGE_SIZE);
    assert!(leaves(&src).iter().all(|l| l.contiguous && l.attrs == read_only(rw)));
    check_invariants(&dst);
    check_invariants(&src);
}

#[test]
fn walk_blocks_reports_the_blocks_and_no_page() {
    let (src, start, end) = copy_source();
    let mut blocks = Vec::new();
    src.walk_blocks(va(start), end - start, |l| blocks.push(*l)).unwrap();
    let expected: Vec<Leaf> = leaves(&src).into_iter().filter(|l| l.level < 3).collect();
    assert_eq!(blocks, expected);
    assert_eq!(blocks.len(), 1);
}

#[test]
fn copy_pages_from_stops_at_the_first_refused_frame_keeping_the_pages_before_it() {
    let (mut src, start, end) = copy_source();
    let pages: Vec<Leaf> = leaves(&src).into_iter().filter(|l| l.level == 3).collect();
    let mut dst = new_pt(VaRange::Lower);
    let mut taken = 0;
    let (r, record) = copy(&mut dst, &mut src, (start, end), read_only, |_| {
        taken += 1;
        taken <= 25
    });
    assert_eq!(r, Err(MapError::OutOfMemory));
    let expected: Vec<Leaf> = pages[..25].iter().map(|l| Leaf { attrs: read_only(l.attrs), ..*l }).collect();
    assert_eq!(leaves(&dst), expected, "the pages whose frames were taken, and no other");
    // The source's first 25 pages changed, and recorded; the rest as they were.
    let now: Vec<Leaf> = leaves(&src).into_iter().filter(|l| l.level == 3).collect();
    assert!(now[..25].iter().zip(&pages).all(|(n, p)| n.attrs == read_only(p.attrs)));
    assert_eq!(now[25..], pages[25..]);
    assert_eq!(record.leaves_changed(), 25);
    // A change that needs break-before-make is refused before anything of its page changes.
    let mut dst = new_pt(VaRange::Lower);
    let device = |a: Attributes| a.with_memory_type(MemoryType::DeviceNGnRE);
    let (r, record) = copy(&mut dst, &mut src, (pages[30].va.0, end), device, |_| true);
    assert_eq!(r, Err(MapError::BreakBeforeMakeRequired(pages[30].va)));
    assert!(leaves(&dst).is_empty() && !record.needs_flush());
    // Refused table frames are an error too, with nothing copied past them.
    let mut mem = EmuMem::new();
    mem.fail_after = Some(2); // the root and one table below it
    let mut dst = PageTable::new(mem, VaRange::Lower).unwrap();
    let (r, _) = copy(&mut dst, &mut src, (start, end), |a| a, |_| true);
    assert_eq!(r, Err(MapError::OutOfMemory));
    assert!(leaves(&dst).is_empty());
    // The empty tables such failures leave go with the table (a failed fork destroys its
    // child): no frame kept.
    let (mut mem, record) = dst.destroy();
    record.release(&mut mem);
    assert_eq!(mem.live_frames(), 0, "a table made for the copy was not freed");
    let mut dst = new_pt(VaRange::Lower);
    let (r, _) = copy(&mut dst, &mut src, (start, end), |a| a, |_| false);
    assert_eq!(r, Err(MapError::OutOfMemory));
    let (mut mem, record) = dst.destroy();
    record.release(&mut mem);
    assert_eq!(mem.live_frames(), 0, "the empty last-level table was not freed");
}

// ---- move_pages (mremap's move) -----------------------------------------------------------------

/// The source of the move tests: `copy_source`'s pages and run, a guard marker among them, and
/// its block; the range up to the block.
fn move_source() -> (Pt, u64, u64, u64) {
    let (mut src, start, end) = copy_source();
    let guard = start + 2 * PAGE_SIZE;
    assert!(src.query(va(guard)).is_none());
    src.install_guards(va(guard), PAGE_SIZE).unwrap();
    let block = end - level_size(2);
    (src, start, block, guard)
}

/// Moves `[from, from + size)` to `to` with exactly the frames `tables_to_move` counted; returns
/// the result, the record (released) and the frames left in the pool.
fn move_counted(pt: &mut Pt, from: u64, to: u64, size: u64) -> (Result<u64, MapError>, PendingFlush, usize) {
    let count = pt.tables_to_move(va(from), va(to), size, false).expect("a range it moves");
    let mut pool = pt.reserve_frames(count).unwrap();
    let mut record = PendingFlush::new(VaRange::Lower);
    let r = pt.move_pages(va(from), va(to), size, true, &mut pool, &mut record);
    let left = pool.len();
    pt.free_frames(pool);
    (r, record, left)
}

/// A move from inside a last-level table (its first index not 0): the record covers the pages
/// moved, from the first to the last, and a page in the way is named at its own address; a
/// piece of one entry before the destination's index wraps goes into its own table; a part of
/// an existing table with nothing in it moves nothing and records nothing.
/// Moves `[from, from + size)` to `to` with four spare table frames (for a move that fails
/// before it needs them); the result, the record released and the spares given back.
fn move_with_spares(pt: &mut Pt, from: u64, to: u64, size: u64) -> Result<u64, MapError> {
    let mut pool = pt.reserve_frames(4).unwrap();
    let mut record = PendingFlush::new(VaRange::Lower);
    let r = pt.move_pages(va(from), va(to), size, true, &mut pool, &mut record);
    pt.free_frames(pool);
    release(pt, record);
    r
}

#[test]
fn move_pages_from_inside_a_table_records_and_names_the_right_addresses() {
    let span = level_size(2);
    let rw = Attributes::user(UserAccess::ReadWrite);
    let base = 4 * span + 5 * PAGE_SIZE; // index 5 of its table
    let to = 12 * span + 100 * PAGE_SIZE;
    let setup = || {
        let mut pt = new_pt(VaRange::Lower);
        pt.map(va(base), pa(0x1_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        pt.map(va(base + 3 * PAGE_SIZE), pa(0x1_0001_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        pt
    };
    let mut pt = setup();
    let (r, record, _) = move_counted(&mut pt, base, to, 8 * PAGE_SIZE);
    assert_eq!(r, Ok(2));
    assert_eq!(record.range(), Some(FlushRange { start: va(base), size: 4 * PAGE_SIZE }));
    release(&mut pt, record);
    assert!(pt.query(va(to)).is_some() && pt.query(va(to + 3 * PAGE_SIZE)).is_some());
    pt.check_occupancy();
    // In the way at the destination of the second page.
    let mut pt = setup();
    let in_the_way = to + 3 * PAGE_SIZE;
    pt.map(va(in_the_way), pa(0x2_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
    assert_eq!(
        move_with_spares(&mut pt, base, to, 8 * PAGE_SIZE),
        Err(MapError::AlreadyMapped(va(in_the_way)))
    );
    // Two pages to the last index of a table: one in it, one at the start of the next.
    let mut pt = setup();
    let last = 12 * span + span - PAGE_SIZE;
    let (r, record, _) = move_counted(&mut pt, base + 2 * PAGE_SIZE, last, 2 * PAGE_SIZE);
    assert_eq!(r, Ok(1));
    release(&mut pt, record);
    let mut pt = setup();
    let (r, record, _) = move_counted(&mut pt, base, last, 4 * PAGE_SIZE);
    assert_eq!(r, Ok(2));
    release(&mut pt, record);
    let moved: Vec<u64> = leaves(&pt).iter().map(|l| l.va.0).collect();
    assert_eq!(moved, [last, last + 3 * PAGE_SIZE], "each page in its own table");
    pt.check_occupancy();
    // Nothing in the part of the table the range covers.
    let mut pt = setup();
    let (r, record, _) = move_counted(&mut pt, base + 8 * PAGE_SIZE, to, 8 * PAGE_SIZE);
    assert_eq!(r, Ok(0));
    assert!(!record.needs_flush());
    release(&mut pt, record);
    assert_eq!(leaves(&pt).len(), 2);
}

#[test]
fn move_pages_moves_every_page_and_marker_and_detaches_the_tables_it_empties() {
    for delta in [5 * level_size(1) + 3 * PAGE_SIZE, 5 * level_size(1) + 2 * KIB64] {
        let keeps_runs = delta.is_multiple_of(KIB64);
        let (mut pt, start, end, guard) = move_source();
        let before = leaves(&pt);
        let pages: Vec<Leaf> = before.iter().copied().filter(|l| l.level == 3).collect();
        let (r, record, _) = move_counted(&mut pt, start, start + delta, end - start);
        assert_eq!(r, Ok(pages.len() as u64), "delta {delta:#x}");
        let moved: Vec<Leaf> = pages
            .iter()
            .map(|l| Leaf { va: va(l.va.0 + delta), contiguous: l.contiguous && keeps_runs, ..*l })
            .collect();
        let block: Vec<Leaf> = before.iter().copied().filter(|l| l.level < 3).collect();
        let mut expected = block.clone();
        expected.extend(moved);
        expected.sort_by_key(|l| l.va.0);
        assert_eq!(leaves(&pt), expected, "delta {delta:#x}: the same frames and attributes, moved");
        assert!(pt.is_guard(va(guard + delta)) && !pt.is_guard(va(guard)), "the marker moved");
        // Every page removed is in the record, and every source table it emptied, detached.
        assert_eq!(record.leaves_changed(), pages.len() as u64);
        let range = record.range().unwrap();
        assert!(
            range.start.0 <= start && range.start.0 + range.size >= pages.last().unwrap().va.0 + PAGE_SIZE
        );
        assert!(range.start.0 + range.size <= end, "the record reaches past the range: {range:?}");
        assert!(record.tables_removed() && record.detached_tables() >= 3, "{record:?}");
        release(&mut pt, record);
        check_invariants(&pt);
    }
}

#[test]
fn move_pages_within_one_table_keeps_its_count_and_the_table() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let mut pt = new_pt(VaRange::Lower);
    let base = level_size(1);
    pt.map(va(base), pa(0x2_0000_0000), 2 * KIB64, rw, Constraints::NONE).unwrap();
    pt.map(va(base + 2 * KIB64 + 8 * PAGE_SIZE), pa(0x3_0000_0000), PAGE_SIZE, rw, Constraints::NONE)
        .unwrap();
    // The two runs and a page behind them, moved four runs on, into the same table.
    let tables = pt.stats().tables_in_use();
    let (r, record, left) = move_counted(&mut pt, base, base + 4 * KIB64, 2 * KIB64);
    assert_eq!(r, Ok(2 * KIB64 / PAGE_SIZE));
    assert_eq!(left, 0, "nothing to make: the table is there");
    assert!(!record.tables_removed() && record.leaf_only(), "{record:?}");
    assert_eq!(pt.stats().tables_in_use(), tables);
    let l = leaves(&pt);
    assert_eq!(l.len() as u64, 2 * KIB64 / PAGE_SIZE + 1);
    assert!(l.iter().filter(|l| l.pa.0 >= 0x2_0000_0000 && l.pa.0 < 0x3_0000_0000).all(|l| l.contiguous));
    assert_eq!(pt.translate(va(base + 4 * KIB64 + PAGE_SIZE)), Some(pa(0x2_0000_0000 + PAGE_SIZE)));
    assert_eq!(pt.translate(va(base)), None);
    release(&mut pt, record);
    check_invariants(&pt);
}

#[test]
fn move_pages_refuses_blocks_cut_runs_and_overlaps_before_it_changes_anything() {
    let (mut pt, start, end, _) = move_source();
    let block = end;
    let run = leaves(&pt).into_iter().find(|l| l.contiguous).unwrap().va.0 & !(KIB64 - 1);
    let far = 9 * level_size(1);
    let before = leaves(&pt);
    let refused = [
        (start, block + level_size(2) - start, far), // a block inside
        (run + PAGE_SIZE, KIB64, far),               // a run cut at the start
        (run - PAGE_SIZE, 2 * PAGE_SIZE, far),       // a run cut at the end
        (start, end - start, start + PAGE_SIZE),     // overlapping ranges
        (block + PAGE_SIZE, PAGE_SIZE, far),         // inside a block
    ];
    for (from, size, to) in refused {
        assert_eq!(pt.tables_to_move(va(from), va(to), size, false), None, "{from:#x}+{size:#x}");
        let mut pool = FrameList::new();
        let mut record = PendingFlush::new(VaRange::Lower);
        assert!(pt.move_pages(va(from), va(to), size, true, &mut pool, &mut record).is_err());
        assert!(!record.needs_flush());
        assert_eq!(leaves(&pt), before);
    }
    // The whole run, from its first page: accepted.
    assert!(pt.tables_to_move(va(run), va(far), KIB64, false).is_some());
}

/// `tables_to_move` counts enough for any destination, and with `fresh` as if none existed.
#[test]
fn tables_to_move_counts_what_the_move_makes() {
    for to in [
        5 * level_size(1) + 3 * PAGE_SIZE,
        6 * level_size(1) - level_size(2) - 3 * PAGE_SIZE,
        level_size(2) * 7,
    ] {
        let (mut pt, start, end, _) = move_source();
        let allocated = pt.stats().tables_allocated;
        let count = pt.tables_to_move(va(start), va(to), end - start, false).unwrap();
        let fresh = pt.tables_to_move(va(start), va(to), end - start, true).unwrap();
        assert!(fresh >= count);
        let (r, record, left) = move_counted(&mut pt, start, to, end - start);
        assert!(r.is_ok());
        assert_eq!(
            pt.stats().tables_allocated - allocated,
            count as u64,
            "{to:#x}: every frame from the pool"
        );
        assert!(left <= count);
        release(&mut pt, record);
        check_invariants(&pt);
    }
}

/// A range that holds a last-level table's whole span, moved by a multiple of the span: the
/// table itself moves (Linux's `move_normal_pmd`), no entry of it rewritten, the level-2 table
/// it leaves empty detached, the destination's path made where it is missing (no last-level
/// table made); moved by a distance that is not, the entries move one by one.
#[test]
fn move_pages_moves_a_whole_last_level_table_where_the_distance_allows() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let (l1, l2) = (level_size(1), level_size(2));
    for (to, whole) in [(2 * l1 + 5 * l2, true), (2 * l1 + 5 * l2 + PAGE_SIZE, false), (7 * l1, true)] {
        let mut pt = new_pt(VaRange::Lower);
        let from = l1 + 3 * l2;
        for i in 0..40u64 {
            let v = from + i * (l2 / 40 / PAGE_SIZE) * PAGE_SIZE;
            pt.map(
                va(v),
                pa(0x1_0000_0000 + (i * 7919 % 1000) * 3 * PAGE_SIZE),
                PAGE_SIZE,
                rw,
                Constraints::NONE,
            )
            .unwrap();
        }
        pt.install_guards(va(from + PAGE_SIZE), PAGE_SIZE).unwrap();
        // Something in the destination's level-1 region (not in the way): its level-2 table is
        // there. The source's level-2 table holds nothing else, so the move empties it.
        pt.map(va(2 * l1), pa(0x5_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        let before: Vec<Leaf> =
            leaves(&pt).into_iter().filter(|l| (from..from + l2).contains(&l.va.0)).collect();
        let table = pt.table_at(from, 3).unwrap();
        let (r, record, left) = move_counted(&mut pt, from, to, l2);
        assert_eq!(r, Ok(40), "{to:#x}");
        let after: Vec<Leaf> = leaves(&pt).into_iter().filter(|l| (to..to + l2).contains(&l.va.0)).collect();
        let expected: Vec<Leaf> = before.iter().map(|l| Leaf { va: va(l.va.0 - from + to), ..*l }).collect();
        assert_eq!(after, expected, "{to:#x}");
        assert!(pt.is_guard(va(to + PAGE_SIZE)));
        assert_eq!(pt.table_at(to, 3) == Some(table), whole, "{to:#x}: the table itself moved");
        assert_eq!(record.leaves_changed(), 40);
        assert!(record.tables_removed());
        if whole {
            assert!(left > 0, "{to:#x}: a last-level table made for a table that moved");
        }
        release(&mut pt, record);
        check_invariants(&pt);
    }
}

/// Ranges that touch without overlapping move (the destination right after the source, or
/// right before it), in one pass.
#[test]
fn move_pages_moves_to_a_range_that_touches_the_source() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let base = level_size(1) + 4 * level_size(2);
    let len = 8 * PAGE_SIZE;
    for (from, to) in [(base, base + len), (base + len, base)] {
        let mut pt = new_pt(VaRange::Lower);
        for i in 0..8 {
            pt.map(
                va(from + i * PAGE_SIZE),
                pa(0x1_0000_0000 + i * 3 * PAGE_SIZE),
                PAGE_SIZE,
                rw,
                Constraints::NONE,
            )
            .unwrap();
        }
        assert!(pt.tables_to_move(va(from), va(to), len, false).is_some(), "{from:#x} -> {to:#x}");
        let (r, record, _) = move_counted(&mut pt, from, to, len);
        assert_eq!(r, Ok(8));
        assert_eq!(pt.translate(va(to + 7 * PAGE_SIZE)), Some(pa(0x1_0000_0000 + 21 * PAGE_SIZE)));
        release(&mut pt, record);
        check_invariants(&pt);
    }
}

/// Of a source mapped page by page with a whole last-level table's span empty in the middle,
/// `tables_to_move` counts exactly the tables the move makes: one per destination region the
/// pages land in, none for the hole.
#[test]
fn tables_to_move_counts_no_table_for_a_hole() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let l2 = level_size(2);
    let base = level_size(1) + 2 * l2;
    let mut pt = new_pt(VaRange::Lower);
    // Every page of the first and third regions, nothing in the second.
    for region in [0, 2] {
        for i in 0..l2 / PAGE_SIZE {
            let v = base + region * l2 + i * PAGE_SIZE;
            let p = 0x1_0000_0000 + (region * l2 / PAGE_SIZE + i) * 2 * PAGE_SIZE;
            pt.map(va(v), pa(p), PAGE_SIZE, rw, Constraints::NONE).unwrap();
        }
    }
    let to = 5 * level_size(1); // a region-aligned place with no table yet
    let count = pt.tables_to_move(va(base), va(to), 3 * l2, false).unwrap();
    // A level-2 table and a last-level table for each of the two regions with pages.
    assert_eq!(count, 3, "the hole counts no table");
    let (r, record, left) = move_counted(&mut pt, base, to, 3 * l2);
    assert_eq!(r, Ok(2 * l2 / PAGE_SIZE));
    assert!(left <= 2, "whole tables move: at most the two last-level tables unused");
    release(&mut pt, record);
    check_invariants(&pt);
}

/// A whole last-level table moved to another entry of the root: the tables above the source
/// that the move empties are detached up to the root; the record covers exactly the table's
/// span, with its pages' bits (one of them executable, all non-global).
#[test]
fn a_whole_table_moved_to_another_root_entry_leaves_no_empty_table_behind() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let rx = Attributes::user(UserAccess::ReadExecute);
    let l2 = level_size(2);
    // In the root's first entry, moved to its second.
    let from = 3 * l2;
    let to = level_size(ROOT_LEVEL) + 5 * l2;
    let mut pt = new_pt(VaRange::Lower);
    for i in 0..10u64 {
        let attrs = if i == 4 { rx } else { rw };
        pt.map(
            va(from + i * 7 * PAGE_SIZE),
            pa(0x1_0000_0000 + i * 5 * PAGE_SIZE),
            PAGE_SIZE,
            attrs,
            Constraints::NONE,
        )
        .unwrap();
    }
    let table = pt.table_at(from, 3).unwrap();
    let (r, record, _) = move_counted(&mut pt, from, to, l2);
    assert_eq!(r, Ok(10));
    assert_eq!(pt.table_at(to, 3), Some(table), "the table itself moved");
    let range = record.range().unwrap();
    assert_eq!((range.start, range.size), (va(from), l2), "exactly the table's span");
    assert_eq!(record.leaves_changed(), 10);
    assert!(record.has_executable() && record.has_non_global() && !record.has_global(), "{record:?}");
    assert!(record.tables_removed());
    release(&mut pt, record);
    check_invariants(&pt);
    assert_eq!(pt.table_at(from, 2), None, "the source's path is gone");
}

/// A whole table holding only guard markers moves too, and the record still covers its span
/// (no page is recorded, but walk caches may hold the table's old place).
#[test]
fn a_whole_table_of_guard_markers_moves_with_its_span_in_the_record() {
    let l2 = level_size(2);
    let from = level_size(1) + 3 * l2;
    let mut pt = new_pt(VaRange::Lower);
    pt.install_guards(va(from + 8 * PAGE_SIZE), 3 * PAGE_SIZE).unwrap();
    let (r, record, _) = move_counted(&mut pt, from, from + 4 * l2, l2);
    assert_eq!(r, Ok(0));
    assert!(pt.is_guard(va(from + 4 * l2 + 9 * PAGE_SIZE)) && !pt.is_guard(va(from + 9 * PAGE_SIZE)));
    let range = record.range().unwrap();
    assert_eq!((range.start, range.size), (va(from), l2));
    release(&mut pt, record);
    // (`check_invariants` takes a table of markers for an empty one: the counts, then.)
    pt.check_occupancy();
    assert_eq!(pt.table_at(from, 3), None);
}

/// The record of a move entry by entry: exactly the span from the first page moved to the last,
/// their bits (one executable, all non-global); a part holding only a guard marker is covered
/// whole; a destination page in the way is named.
#[test]
fn move_pages_records_exactly_what_it_moved_entry_by_entry() {
    let rw = Attributes::user(UserAccess::ReadWrite);
    let rx = Attributes::user(UserAccess::ReadExecute);
    let l2 = level_size(2);
    let base = level_size(1) + 3 * l2;
    let (first, last) = (base + 5 * PAGE_SIZE, base + 40 * PAGE_SIZE);
    let mut pt = new_pt(VaRange::Lower);
    for (i, v) in [first, base + 9 * PAGE_SIZE, last].into_iter().enumerate() {
        let attrs = if i == 1 { rx } else { rw };
        pt.map(va(v), pa(0x1_0000_0000 + i as u64 * 4 * PAGE_SIZE), PAGE_SIZE, attrs, Constraints::NONE)
            .unwrap();
    }
    // The range from the table's start to past the last page; moved by a distance no span divides.
    let to = 6 * level_size(1) + 3 * PAGE_SIZE;
    let (r, record, _) = move_counted(&mut pt, base, to, 64 * PAGE_SIZE);
    assert_eq!(r, Ok(3));
    let range = record.range().unwrap();
    assert_eq!((range.start, range.size), (va(first), last + PAGE_SIZE - first), "first to last page");
    assert_eq!(record.leaves_changed(), 3);
    assert!(record.has_executable() && record.has_non_global() && !record.has_global(), "{record:?}");
    release(&mut pt, record);
    check_invariants(&pt);
    // A part holding only a marker: the record covers the part (its table is detached).
    let mut pt = new_pt(VaRange::Lower);
    pt.install_guards(va(base + 7 * PAGE_SIZE), PAGE_SIZE).unwrap();
    let (r, record, _) = move_counted(&mut pt, base, to, 64 * PAGE_SIZE);
    assert_eq!(r, Ok(0));
    let range = record.range().unwrap();
    assert_eq!((range.start, range.size), (va(base), 64 * PAGE_SIZE), "the part, for the walk caches");
    release(&mut pt, record);
    assert!(pt.is_guard(va(to + 7 * PAGE_SIZE)));
    // A page in the way at the destination: named.
    let mut pt = new_pt(VaRange::Lower);
    pt.map(va(first), pa(0x1_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
    pt.map(va(last), pa(0x1_0001_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
    let in_the_way = to + (last - base);
    pt.map(va(in_the_way), pa(0x2_0000_0000), PAGE_SIZE, rw, Constraints::NONE).unwrap();
    assert_eq!(
        move_with_spares(&mut pt, base, to, 64 * PAGE_SIZE),
        Err(MapError::AlreadyMapped(va(in_the_way)))
    );
    pt.check_occupancy();
}
