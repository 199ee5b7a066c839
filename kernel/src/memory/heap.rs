//! The kernel heap: `linked_list_allocator` over two regions.
//!
//! The frame allocator keeps its free lists in `BTreeSet`s, so it needs a heap before it can hold
//! any frame: the bootstrap region, a static array in .bss, breaks that cycle. Once frames exist,
//! a larger main region is carved from them. Allocation tries the main region first; a free goes
//! back to whichever region holds the pointer. Both sit behind spin locks; no interrupt handler
//! allocates (there are none yet), which is what makes plain spin locks enough.
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use linked_list_allocator::Heap;
use spin::Mutex;

/// Size of the bootstrap region.
pub const BOOTSTRAP_SIZE: usize = 512 * 1024;

#[repr(C, align(4096))]
struct Bootstrap(UnsafeCell<[u8; BOOTSTRAP_SIZE]>);
// SAFETY: handed to the allocator once, which serialises all use behind its lock.
unsafe impl Sync for Bootstrap {}
static BOOTSTRAP: Bootstrap = Bootstrap(UnsafeCell::new([0; BOOTSTRAP_SIZE]));

struct Region {
    heap: Heap,
    start: usize,
    end: usize,
}

struct KernelHeap {
    bootstrap: Mutex<Region>,
    main: Mutex<Region>,
}

#[global_allocator]
static HEAP: KernelHeap = KernelHeap {
    bootstrap: Mutex::new(Region { heap: Heap::empty(), start: 0, end: 0 }),
    main: Mutex::new(Region { heap: Heap::empty(), start: 0, end: 0 }),
};

/// Gives the bootstrap region to the heap. Called once, first thing in `kernel_main`.
pub fn init_bootstrap() {
    let mut region = HEAP.bootstrap.lock();
    if region.end != 0 {
        return;
    }
    let start = BOOTSTRAP.0.get() as usize;
    // SAFETY: the static region is used by nothing else and lives for the kernel's life.
    unsafe { region.heap.init(start as *mut u8, BOOTSTRAP_SIZE) };
    region.start = start;
    region.end = start + BOOTSTRAP_SIZE;
}

/// Adds the main region `[va, va + size)`.
///
/// # Safety
/// The region is mapped read-write, unused, and stays so for the kernel's life.
pub unsafe fn add_main_region(va: usize, size: usize) {
    let mut region = HEAP.main.lock();
    // SAFETY: forwarded from the caller.
    unsafe { region.heap.init(va as *mut u8, size) };
    region.start = va;
    region.end = va + size;
}

/// (used, total) bytes of both regions.
pub fn usage() -> (usize, usize) {
    let b = HEAP.bootstrap.lock();
    let m = HEAP.main.lock();
    (b.heap.used() + m.heap.used(), b.heap.size() + m.heap.size())
}

// SAFETY: each region is a linked_list_allocator heap behind a lock; a pointer is freed to the
// region whose address range contains it, which is the one that allocated it.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Ok(ptr) = self.main.lock().heap.allocate_first_fit(layout) {
            return ptr.as_ptr();
        }
        match self.bootstrap.lock().heap.allocate_first_fit(layout) {
            Ok(ptr) => ptr.as_ptr(),
            Err(()) => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(nn) = NonNull::new(ptr) else { return };
        let addr = ptr as usize;
        let in_main = {
            let main = self.main.lock();
            (main.start..main.end).contains(&addr)
        };
        let region = if in_main { &self.main } else { &self.bootstrap };
        // SAFETY: `ptr` came from this region's `allocate_first_fit` with this layout.
        unsafe { region.lock().heap.deallocate(nn, layout) };
    }
}
