//! The physical frame allocator: `buddy_system_allocator` over every usable RAM range, in 4 KiB
//! frames, reached through the linear map.
//!
//! Frames are handed out as strong [`PhysAddr`]s; zeroing is the caller's choice (page tables are
//! zeroed by the mm crate; the heap does not need it).
//!
//! The buddy keeps its free lists in `BTreeSet`s on the kernel heap, so the heap must know when
//! an allocation is this allocator's own (made while this CPU holds its lock): the heap must not
//! grow then (growing takes frames: it would re-enter the lock), and it serves them from its
//! reserve ([`held_here`], `memory::heap`).
use core::sync::atomic::{AtomicUsize, Ordering};

use buddy_system_allocator::FrameAllocator;
use mm::addr::{PAGE_SHIFT, PAGE_SIZE, PhysAddr};
use spin::{Mutex, MutexGuard};

use crate::smp::current_cpu;

struct Frames {
    buddy: FrameAllocator<40>,
    total: usize,
    allocated: usize,
}

static FRAMES: Mutex<Frames> = Mutex::new(Frames { buddy: FrameAllocator::new(), total: 0, allocated: 0 });

/// The CPU holding [`FRAMES`] (`usize::MAX`: none).
static OWNER: AtomicUsize = AtomicUsize::new(usize::MAX);

/// [`FRAMES`], locked, with [`OWNER`] naming this CPU until the guard drops.
struct Locked(MutexGuard<'static, Frames>);

impl Drop for Locked {
    fn drop(&mut self) {
        OWNER.store(usize::MAX, Ordering::Release);
    }
}

impl core::ops::Deref for Locked {
    type Target = Frames;
    fn deref(&self) -> &Frames {
        &self.0
    }
}

impl core::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Frames {
        &mut self.0
    }
}

fn lock() -> Locked {
    // Whatever the buddy does under the lock may need heap for its free lists, and the heap
    // cannot grow then: let it grow now if it is short.
    super::heap::keep_headroom();
    let guard = FRAMES.lock();
    OWNER.store(current_cpu(), Ordering::Release);
    Locked(guard)
}

/// Whether this CPU is inside the frame allocator (so a heap allocation now is its bookkeeping).
pub fn held_here() -> bool {
    OWNER.load(Ordering::Acquire) == current_cpu()
}

/// Gives the page-aligned range `[start, end)` to the allocator.
pub fn add_range(start: PhysAddr, end: PhysAddr) {
    debug_assert!(start.is_page_aligned() && end.is_page_aligned());
    if end <= start {
        return;
    }
    let mut frames = lock();
    frames.buddy.add_frame((start.0 >> PAGE_SHIFT) as usize, (end.0 >> PAGE_SHIFT) as usize);
    frames.total += ((end.0 - start.0) / PAGE_SIZE) as usize;
}

/// Allocates `count` physically contiguous frames (the buddy rounds up to a power of two
/// internally; `free` must be given the same count).
pub fn alloc(count: usize) -> Option<PhysAddr> {
    let mut frames = lock();
    let first = frames.buddy.alloc(count)?;
    frames.allocated += count;
    Some(PhysAddr((first as u64) << PAGE_SHIFT))
}

/// Returns frames allocated by [`alloc()`] with the same `count`.
pub fn free(pa: PhysAddr, count: usize) {
    let mut frames = lock();
    frames.buddy.dealloc((pa.0 >> PAGE_SHIFT) as usize, count);
    frames.allocated -= count;
}

/// (allocated, total) frames.
pub fn usage() -> (usize, usize) {
    let frames = lock();
    (frames.allocated, frames.total)
}

/// The data frames of user memory (`mm::user::UserFrames`): one 4 KiB frame at a time from
/// this allocator, zeroed, filled and cache-maintained through the linear map.
pub struct UserFrames;

impl mm::user::UserFrames for UserFrames {
    fn alloc_zeroed(&mut self) -> Option<PhysAddr> {
        let frame = alloc(1)?;
        // SAFETY: a fresh frame of PAGE_SIZE bytes, owned by nobody else, reached through the
        // linear map (Normal memory).
        unsafe {
            crate::arch::aarch64::cache::zero(
                crate::memory::layout::phys_to_linear(frame.0) as usize,
                PAGE_SIZE as usize,
            )
        };
        Some(frame)
    }

    fn free(&mut self, pa: PhysAddr) {
        free(pa, 1);
    }

    fn write(&mut self, pa: PhysAddr, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= PAGE_SIZE as usize, "a frame write beyond its page");
        let dst = crate::memory::layout::phys_to_linear(pa.0) as *mut u8;
        // SAFETY: `pa` is a frame of this user space (mm::user writes only frames it allocated
        // and still holds); the bytes stay inside its page (checked above).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(offset), data.len()) };
    }

    fn sync_icache(&mut self, pa: PhysAddr) {
        crate::arch::aarch64::cache::sync_icache(
            crate::memory::layout::phys_to_linear(pa.0),
            PAGE_SIZE as usize,
        );
    }

    fn alloc_zeroed_contiguous(&mut self, pages: u64) -> Option<PhysAddr> {
        // Buddy blocks are aligned to their size (mm::user checks it anyway).
        let first = alloc(pages as usize)?;
        let bytes = (pages * PAGE_SIZE) as usize;
        // SAFETY: `pages` fresh frames, physically contiguous, owned by nobody else, reached
        // through the linear map (Normal memory).
        unsafe {
            crate::arch::aarch64::cache::zero(crate::memory::layout::phys_to_linear(first.0) as usize, bytes)
        };
        Some(first)
    }

    fn free_frames(&self) -> u64 {
        let (allocated, total) = usage();
        (total - allocated) as u64
    }
}
