//! The claim that the common memory calls allocate nothing from the heap, as a test: this test
//! build's global allocator counts the allocations of the calling thread, and mmap + munmap,
//! mprotect (of part of a mapping, of a whole mapping, merging and splitting), near placement
//! and brk, on a space with a thousand mappings held, must make none once the space has its
//! spare tree nodes.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use super::growth_bench::{GrowthOp, growth_op, growth_space};
use super::prot::{PROT_READ, PROT_WRITE};
use super::{PAGE, flags};

/// The system allocator, counting this thread's allocations.
struct Counting;

std::thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on unchanged to the system allocator; the counter is a
// const-initialised thread-local `Cell`, which itself never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as `dealloc`, and the new size is the caller's, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Heap allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn the_counter_sees_an_allocation() {
    assert_eq!(allocations(|| drop(core::hint::black_box(std::boxed::Box::new(7u64)))), 1);
    assert_eq!(allocations(|| {}), 0);
}

#[test]
fn the_common_calls_allocate_nothing() {
    let ops = [GrowthOp::MmapMunmap, GrowthOp::Mprotect16, GrowthOp::MprotectHeld, GrowthOp::NearMunmap];
    let (mut m, region, middle) = growth_space(1000);
    let anon = flags::MAP_PRIVATE | flags::MAP_ANONYMOUS;
    // Warm up: the calls' spare tree nodes are made once.
    for op in ops {
        growth_op(&mut m, region, middle, op);
    }
    for op in ops {
        let n = allocations(|| {
            for _ in 0..20 {
                growth_op(&mut m, region, middle, op);
            }
        });
        assert_eq!(n, 0, "{op:?} allocated {n} times in 20 rounds");
    }
    // A punch in the middle of a mapping and its refill, a part of a mapping changing
    // protection at each end and in the middle, brk growing and shrinking.
    let a = m.mmap(0, 8 * PAGE, PROT_READ | PROT_WRITE, anon, -1, 0).unwrap().addr;
    let round = |m: &mut super::VmMap| {
        m.munmap(a + 3 * PAGE, PAGE).unwrap();
        let fixed = anon | flags::MAP_FIXED;
        m.mmap(a + 3 * PAGE, PAGE, PROT_READ | PROT_WRITE, fixed, -1, 0).unwrap();
        for (at, pages) in [(0, 2), (6, 2), (3, 2)] {
            m.mprotect(a + at * PAGE, pages * PAGE, PROT_READ).unwrap();
            m.mprotect(a + at * PAGE, pages * PAGE, PROT_READ | PROT_WRITE).unwrap();
        }
        let b0 = m.brk(0).brk;
        m.brk(b0 + 4 * PAGE);
        m.brk(b0);
    };
    round(&mut m);
    let n = allocations(|| {
        for _ in 0..20 {
            round(&mut m);
        }
    });
    assert_eq!(n, 0, "punches, partial mprotect and brk allocated {n} times");
    m.check();
}
