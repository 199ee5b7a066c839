//! Builds a page table on the host, maps 511 pages, unmaps them, plans the TLB invalidation the
//! unmap needs and checks the plan: every page of the range is invalidated, nothing outside it,
//! and the table frames are given back only after the (here imaginary) flush.
//!
//! Run with `cargo run -p mm --example map_unmap_flush`. The same steps are the doctest of
//! `mm/README.md`; `mm/tests/course.rs` runs this program as a test and borrows its
//! [`HeapFrames`] for the figures of the course (docs/translation.md).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, UserAccess};
use mm::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};
use mm::tlb::operand::{RangeOperand, page_operand_va};
use mm::tlb::{OpKind, Scope, Stride, TlbFeatures, TlbRequest, plan};

/// Table frames from the host heap; a frame's "physical address" is its pointer.
#[derive(Default)]
pub struct HeapFrames {
    /// Frames allocated and not yet freed.
    pub live: usize,
}

// SAFETY: every frame is a fresh 4096-byte, 4096-aligned heap block (below 2^48 on the hosts this
// runs on, checked), used by nothing else until `deallocate_table` frees it; `table_ptr` returns
// that same pointer.
unsafe impl Translation for HeapFrames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        let frame: Box<MaybeUninit<AlignedTable>> = Box::new_uninit();
        let pa = Box::into_raw(frame) as u64;
        assert!(pa < 1 << 48, "a heap pointer above 2^48 cannot stand for a physical address");
        self.live += 1;
        Some(PhysAddr(pa))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        self.live -= 1;
        // SAFETY: `pa` came from `allocate_table` (the engine returns only its own frames, once).
        drop(unsafe { Box::from_raw(pa.0 as *mut MaybeUninit<AlignedTable>) });
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).expect("frame address 0")
    }
}

/// Maps, unmaps, plans and checks; prints what it did. Panics if a check fails.
pub fn main() {
    // A user (TTBR0) table. The root is the first frame.
    let mut table = PageTable::new(HeapFrames::default(), VaRange::Lower).expect("a root frame");
    let (va, pa, pages) = (VirtAddr(0x40_0000_0000), PhysAddr(0x8000_0000), 511);
    let size = pages * PAGE_SIZE;

    // Map 511 pages read/write at EL0 (PXN, non-global: the user constructor's rules). 511
    // pages from a 2 MiB boundary are one page short of a block: they stay pages.
    table.map(va, pa, size, Attributes::user(UserAccess::ReadWrite), Constraints::NONE).expect("map");
    let leaf = table.query(va.wrapping_add(5 * PAGE_SIZE)).expect("mapped");
    assert_eq!(leaf.pa, pa.wrapping_add(5 * PAGE_SIZE));
    println!("mapped {pages} pages at {va:?}: {} table frames (root included)", table.translation().live);

    // Unmap: the entries are cleared and the emptied tables detached into the record, which
    // says what the flush must cover. Nothing is freed yet.
    let record = table.unmap(va, size).expect("unmap");
    let range = record.range().expect("something changed");
    println!(
        "unmapped: {} pages changed, tables removed: {}, detached tables: {}",
        range.pages(),
        record.tables_removed(),
        record.detached_tables()
    );

    // Plan the invalidation for ASID 7, as an address space would.
    let req = TlbRequest::new(range.start, range.end_or_zero(), Scope::Asid(7))
        .with_stride(Stride::Page)
        .with_leaf_only(record.leaf_only());
    for (name, features) in [
        ("FEAT_TLBIRANGE", TlbFeatures { range: true, ..TlbFeatures::BASELINE }),
        ("no range ops", TlbFeatures::BASELINE),
    ] {
        let plan = plan(&req, features);
        // Check it: every page in the range covered at least once, nothing outside.
        let mut covered = vec![false; pages as usize];
        for instr in plan.iter() {
            let (first, count) = match instr.op.kind() {
                OpKind::Range => {
                    let op = RangeOperand::decode(instr.operand);
                    (op.start(), op.pages())
                }
                OpKind::Page => (page_operand_va(instr.operand), 1),
                other => panic!("{other:?}: a whole flush for {pages} pages"),
            };
            for p in 0..count {
                let index = (first.0 + p * PAGE_SIZE).wrapping_sub(va.0) / PAGE_SIZE;
                assert!(index < pages, "{} reaches outside the range", instr.op.mnemonic());
                covered[index as usize] = true;
            }
        }
        assert!(covered.iter().all(|&c| c), "a page was left out");
        println!("{name}: {} instructions", plan.len());
        for instr in plan.iter().take(3) {
            print!("  {} {:#018x}", instr.op.mnemonic(), instr.operand);
            if instr.op.kind() == OpKind::Range {
                let op = RangeOperand::decode(instr.operand);
                print!(
                    "  ASID {} TG {:#04b} SCALE {} NUM {} TTL {} BaseADDR {:#x}: {} pages from {:?}",
                    op.asid,
                    op.tg,
                    op.scale,
                    op.num,
                    op.ttl,
                    op.base,
                    op.pages(),
                    op.start()
                );
            }
            println!();
        }
    }

    // Only after the flush has completed may the detached tables be freed.
    record.release(table.translation_mut());
    println!("after release: {} table frame (the root)", table.translation().live);
    let (frames, last) = table.destroy();
    last.release(&mut { frames });
}
