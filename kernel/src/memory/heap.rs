//! The kernel heap: `linked_list_allocator` regions, a static bootstrap region and chunks of
//! frames added on demand up to a ceiling.
//!
//! Why it is built so:
//! - The frame allocator keeps its free lists in `BTreeSet`s, so it needs a heap before it can
//!   hold any frame: the bootstrap region, a static array in .bss, breaks that cycle.
//! - Once frames exist the heap **grows**: when no chunk can serve a request, a chunk of
//!   contiguous frames (reached through the linear map; 1 MiB, or half of what was grown so far,
//!   or the request if larger, halved while the buddy cannot give that much) becomes a new
//!   region, until the heap would pass its **ceiling** ([`set_ceiling`], a quarter of RAM). A
//!   request past the ceiling, or when frames run out, returns null: the fallible allocations
//!   made for a process (`mm::vm::fallible`, the scheduler's) turn that into `ENOMEM`/`EAGAIN`.
//! - The frame allocator's own bookkeeping is allocated while it holds its lock, so the heap must
//!   not grow then (that would re-enter it). It is served from the chunks, which the heap keeps
//!   at least [`LOW_WATER`] free by growing early (after an allocation, and before every
//!   entry into the frame allocator: [`keep_headroom`]), and as a last resort from the **bootstrap
//!   region, which is its reserve**: once a chunk exists, nothing else allocates there, so a
//!   program that exhausts the heap cannot starve the allocator that must take its frames back.
//! - A grown chunk that becomes empty goes back to the frame allocator, unless the other chunks
//!   would then have less than twice [`LOW_WATER`] free (so a workload at the edge does not take
//!   and return a chunk on every call). The first chunk, carved at boot, stays.
//! - Both sit behind spin locks; no interrupt handler allocates, which is what makes plain spin
//!   locks enough.
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use linked_list_allocator::Heap;
use mm::addr::{PAGE_SIZE, PhysAddr};
use spin::Mutex;

use super::{fallible, frames, layout};
use crate::cpu::{MAX_CPUS, current_cpu};

/// Set while a CPU grows the heap (its frame allocation must not try to grow it again).
static GROWING: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];

/// Size of the bootstrap region.
pub const BOOTSTRAP_SIZE: usize = 512 * 1024;
/// Smallest chunk the heap grows by.
const MIN_CHUNK: usize = 1 << 20;
/// Free bytes the chunks keep, growing early, for the frame allocator's bookkeeping.
pub const LOW_WATER: usize = 256 * 1024;
/// Most chunks (chunk sizes double, so this is never the limit below the ceiling).
const MAX_CHUNKS: usize = 48;

#[repr(C, align(4096))]
struct Bootstrap(UnsafeCell<[u8; BOOTSTRAP_SIZE]>);
// SAFETY: handed to the allocator once, which serialises all use behind its lock.
unsafe impl Sync for Bootstrap {}
static BOOTSTRAP: Bootstrap = Bootstrap(UnsafeCell::new([0; BOOTSTRAP_SIZE]));

struct Region {
    heap: Heap,
    start: usize,
    end: usize,
    /// Physical address of a grown chunk (0 for the bootstrap region and the first chunk).
    pa: u64,
}

impl Region {
    const EMPTY: Region = Region { heap: Heap::empty(), start: 0, end: 0, pa: 0 };

    fn contains(&self, addr: usize) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

struct Chunks {
    regions: [Region; MAX_CHUNKS],
    count: usize,
    /// Bytes of all chunks.
    bytes: usize,
    /// Most bytes the chunks may total.
    ceiling: usize,
    /// Highest `used` seen, chunks and bootstrap.
    peak: usize,
}

struct KernelHeap {
    bootstrap: Mutex<Region>,
    chunks: Mutex<Chunks>,
}

#[global_allocator]
static HEAP: KernelHeap = KernelHeap {
    bootstrap: Mutex::new(Region::EMPTY),
    chunks: Mutex::new(Chunks {
        regions: [Region::EMPTY; MAX_CHUNKS],
        count: 0,
        bytes: 0,
        ceiling: 0,
        peak: 0,
    }),
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

/// Sets the most bytes the chunks may total (growth stops there; the first chunk counts).
pub fn set_ceiling(bytes: usize) {
    HEAP.chunks.lock().ceiling = bytes;
}

/// Adds the first chunk `[va, va + size)` (the main region carved at boot).
///
/// # Safety
/// The region is mapped read-write, unused, and stays so for the kernel's life.
pub unsafe fn add_main_region(va: usize, size: usize) {
    let mut chunks = HEAP.chunks.lock();
    // SAFETY: forwarded from the caller.
    unsafe { chunks.add(va, size, 0) };
}

impl Chunks {
    /// # Safety
    /// `[va, va + size)` is mapped read-write, unused, and stays so for the kernel's life.
    unsafe fn add(&mut self, va: usize, size: usize, pa: u64) -> bool {
        let Some(region) = self.regions.get_mut(self.count) else { return false };
        // SAFETY: forwarded from the caller.
        unsafe { region.heap.init(va as *mut u8, size) };
        region.start = va;
        region.end = va + size;
        region.pa = pa;
        self.count += 1;
        self.bytes += size;
        true
    }

    fn allocate(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        self.regions[..self.count].iter_mut().find_map(|r| r.heap.allocate_first_fit(layout).ok())
    }

    fn free(&self) -> usize {
        self.regions[..self.count].iter().map(|r| r.heap.free()).sum()
    }

    fn used(&self) -> usize {
        self.regions[..self.count].iter().map(|r| r.heap.used()).sum()
    }

    /// The chunk size to try for a request of `need` bytes (a power of two of pages), or
    /// `None` at the ceiling.
    fn next_chunk(&self, need: usize) -> Option<usize> {
        let room = self.ceiling.saturating_sub(self.bytes);
        let want = need.max(MIN_CHUNK).max(self.bytes / 2).checked_next_power_of_two()?;
        let size = if want <= room { want } else { prev_power_of_two(room) };
        (size >= need.max(PAGE_SIZE as usize) && self.count < MAX_CHUNKS).then_some(size)
    }
}

const fn prev_power_of_two(x: usize) -> usize {
    if x == 0 { 0 } else { 1 << (usize::BITS - 1 - x.leading_zeros()) }
}

/// Grows the heap if its chunks have less than [`LOW_WATER`] free (and it may grow: below the
/// ceiling, not inside the frame allocator or a growth on this CPU). The frame allocator calls
/// this before taking its lock.
pub fn keep_headroom() {
    let cpu = current_cpu();
    if GROWING.get(cpu).is_none_or(|g| g.load(Ordering::Acquire)) || frames::held_here() {
        return;
    }
    let low = {
        let chunks = HEAP.chunks.lock();
        chunks.count > 0 && chunks.free() < LOW_WATER && chunks.bytes < chunks.ceiling
    };
    if low {
        grow(LOW_WATER);
    }
}

/// Adds a chunk able to hold `need` bytes (with the allocator's bookkeeping), from the frame
/// allocator. Must not be called while this CPU holds the frame allocator's lock.
fn grow(need: usize) -> bool {
    let Some(flag) = GROWING.get(current_cpu()) else { return false };
    if flag.swap(true, Ordering::AcqRel) {
        return false;
    }
    let grown = grow_by_a_chunk(need);
    flag.store(false, Ordering::Release);
    grown
}

fn grow_by_a_chunk(need: usize) -> bool {
    let need = need + 2 * core::mem::size_of::<usize>() * 4;
    let Some(mut size) = HEAP.chunks.lock().next_chunk(need) else { return false };
    // The buddy may be too fragmented for a large block: halve until it gives one.
    let pa = loop {
        if let Some(pa) = frames::alloc(size / PAGE_SIZE as usize) {
            break pa;
        }
        size /= 2;
        if size < need.max(PAGE_SIZE as usize) {
            return false;
        }
    };
    let mut chunks = HEAP.chunks.lock();
    // Another CPU may have grown meanwhile: the ceiling still holds.
    if chunks.bytes + size > chunks.ceiling && chunks.count > 0 {
        drop(chunks);
        frames::free(pa, size / PAGE_SIZE as usize);
        return true; // someone else made room; the caller retries
    }
    let va = layout::phys_to_linear(pa.0) as usize;
    // SAFETY: the frames were just taken from the allocator, so nothing else uses them, and the
    // linear map shows them read-write.
    if unsafe { chunks.add(va, size, pa.0) } {
        return true;
    }
    drop(chunks);
    frames::free(PhysAddr(pa.0), size / PAGE_SIZE as usize);
    false
}

/// What the heap holds.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    /// Bytes allocated now (chunks and bootstrap).
    pub used: usize,
    /// Bytes of all regions (chunks and bootstrap).
    pub size: usize,
    /// Highest `used` seen.
    pub peak: usize,
    /// Most bytes the chunks may total.
    pub ceiling: usize,
    /// Chunks (the first included).
    pub chunks: usize,
    /// Frames the grown chunks hold (not the first chunk): what the heap took after boot.
    pub grown_frames: usize,
}

/// The heap's use now.
pub fn usage() -> Usage {
    let b = HEAP.bootstrap.lock();
    let c = HEAP.chunks.lock();
    let used = b.heap.used() + c.used();
    let grown = c.regions[..c.count].iter().filter(|r| r.pa != 0).map(|r| r.end - r.start).sum::<usize>();
    Usage {
        used,
        size: b.heap.size() + c.bytes,
        peak: c.peak.max(used),
        ceiling: c.ceiling,
        chunks: c.count,
        grown_frames: grown / PAGE_SIZE as usize,
    }
}

// SAFETY: each region is a linked_list_allocator heap behind a lock; a pointer is freed to the
// region whose address range contains it, which is the one that allocated it.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // The frame allocator's own bookkeeping (this CPU holds its lock): no growth, and the
        // bootstrap reserve may be used.
        let bookkeeping = frames::held_here();
        // `fallible::arc` reserved this very block; an armed `SYS_FAIL_NTH` fails this one.
        if let Some(ptr) = fallible::take_reserved(layout) {
            return ptr;
        }
        if !bookkeeping && fallible::inject_failure() {
            return core::ptr::null_mut();
        }
        let mut grown = false;
        loop {
            let mut chunks = self.chunks.lock();
            if let Some(ptr) = chunks.allocate(layout) {
                let used = chunks.used();
                chunks.peak = chunks.peak.max(used);
                let low = chunks.free() < LOW_WATER && chunks.bytes < chunks.ceiling;
                drop(chunks);
                if low && !bookkeeping {
                    grow(LOW_WATER);
                }
                return ptr.as_ptr();
            }
            let have_chunks = chunks.count > 0;
            drop(chunks);
            if bookkeeping || grown || !have_chunks || !grow(layout.size().max(layout.align())) {
                // Before the first chunk (early boot), and for the frame allocator, the
                // bootstrap region; for everyone else, nothing: the caller sees null.
                if !have_chunks || bookkeeping {
                    return match self.bootstrap.lock().heap.allocate_first_fit(layout) {
                        Ok(ptr) => ptr.as_ptr(),
                        Err(()) => core::ptr::null_mut(),
                    };
                }
                return core::ptr::null_mut();
            }
            grown = true;
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(nn) = NonNull::new(ptr) else { return };
        let addr = ptr as usize;
        let mut chunks = self.chunks.lock();
        let count = chunks.count;
        if let Some(i) = chunks.regions[..count].iter().position(|r| r.contains(addr)) {
            let region = &mut chunks.regions[i];
            // SAFETY: `ptr` came from this region's `allocate_first_fit` with this layout.
            unsafe { region.heap.deallocate(nn, layout) };
            let (pa, size) = (region.pa, region.end - region.start);
            let empty = pa != 0 && region.heap.used() == 0;
            // Not while this CPU is inside the frame allocator (freeing would re-enter it).
            if empty && chunks.free() >= size + 2 * LOW_WATER && !frames::held_here() {
                chunks.regions.swap(i, count - 1);
                chunks.regions[count - 1] = Region::EMPTY;
                chunks.count -= 1;
                chunks.bytes -= size;
                drop(chunks);
                frames::free(PhysAddr(pa), size / PAGE_SIZE as usize);
            }
            return;
        }
        drop(chunks);
        // SAFETY: not in any chunk, so it came from the bootstrap region with this layout.
        unsafe { self.bootstrap.lock().heap.deallocate(nn, layout) };
    }
}
