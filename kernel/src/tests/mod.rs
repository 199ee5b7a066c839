//! The test image's in-kernel tests (built with the `test-image` feature).
mod boot;
mod fiq;
mod irq;
mod kernel_map;
mod limits;
#[cfg(feature = "lpa2")]
mod lpa2;
mod memory;
// With 64 KiB pages the promoted block is 512 MiB of contiguous frames, more than a test machine
// has free; promotion with 64 KiB pages is tested on the host (mm's tests, `granule-64k`).
#[cfg(not(feature = "granule-64k"))]
mod promotion;
mod shootdown;
mod smp;
mod tlb;
mod translation;
mod user;

/// Frames in use outside the heap's grown chunks: what a test compares before and after a
/// program to prove that every frame came back. The heap keeps a chunk it grew while any of its
/// allocations lives there (the frame allocator's own bookkeeping, for one), so its frames are
/// the heap's, not a leak of the program's.
pub fn frames_in_use() -> usize {
    let heap = crate::memory::heap::usage().grown_frames;
    crate::memory::frames::usage().0 - heap
}
