//! The test image's in-kernel tests (built with the `test-image` feature).
mod block_frames;
mod boot;
mod events;
mod files;
mod fiq;
mod irq;
mod kernel_map;
mod limits;
#[cfg(feature = "lpa2")]
mod lpa2;
mod memory;
mod promotion;
mod shootdown;
mod smp;
mod tlb;
mod translation;
mod user;
mod vdso;

/// Frames in use outside the heap's grown chunks: what a test compares before and after a
/// program to prove that every frame came back. The heap keeps a chunk it grew while any of its
/// allocations lives there (the frame allocator's own bookkeeping, for one), so its frames are
/// the heap's, not a leak of the program's.
pub fn frames_in_use() -> usize {
    let heap = crate::memory::heap::usage().grown_frames;
    crate::memory::frames::usage().0 - heap
}
