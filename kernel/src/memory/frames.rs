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
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use buddy_system_allocator::FrameAllocator;
use mm::addr::{PAGE_SHIFT, PAGE_SIZE, PhysAddr};
use mm::user::ZeroRegion;
use spin::{Mutex, MutexGuard};

use crate::cpu::current_cpu;

struct Frames {
    buddy: FrameAllocator<40>,
    total: usize,
    allocated: usize,
    /// The lowest and one past the highest frame number given to the allocator (the span the
    /// reference counts cover).
    span: (u64, u64),
}

static FRAMES: Mutex<Frames> =
    Mutex::new(Frames { buddy: FrameAllocator::new(), total: 0, allocated: 0, span: (u64::MAX, 0) });

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
    let (lo, hi) = frames.span;
    frames.span = (lo.min(start.0 >> PAGE_SHIFT), hi.max(end.0 >> PAGE_SHIFT));
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

/// The shared zero region's first frame (0 until [`init_zero_region`]) and its length: pages of
/// zeros that every private anonymous page read and never written maps read-only, one page at a
/// time or a whole 2 MiB block (4 KiB pages) or 2 MiB contiguous run (16 and 64 KiB pages) at
/// once (Linux's `ZERO_PAGE` and huge zero page; `mm::user`'s `UserFrames::zero_region`).
/// Written once at boot, before any process runs; never written again, never freed, and
/// outside the frame reference counts.
static ZERO_BASE: AtomicU64 = AtomicU64::new(0);
static ZERO_LEN: AtomicU64 = AtomicU64::new(0);

/// The zero region's size when the allocator has it: the largest leaf a read fault maps whole
/// in every build (a 4 KiB-page block, a 16 or 64 KiB-page contiguous run, all 2 MiB).
const ZERO_REGION_BYTES: u64 = 2 << 20;

/// Takes the shared zero region from the allocator (once, at boot, before the first process):
/// 2 MiB, physically contiguous and aligned to its size (buddy blocks are), or one frame when
/// that cannot be had; zeroed, and cleaned to the point of unification with the I-cache
/// invalidated, since it may be mapped executable. Without a frame for it every fault takes a
/// frame of its own.
pub fn init_zero_region() {
    let block = (ZERO_REGION_BYTES / PAGE_SIZE) as usize;
    let Some((base, len)) =
        alloc(block).map(|pa| (pa, ZERO_REGION_BYTES)).or_else(|| alloc(1).map(|pa| (pa, PAGE_SIZE)))
    else {
        return;
    };
    let va = crate::memory::layout::phys_to_linear(base.0);
    // Zeroed with its allocation tags where the CPU has MTE, as every user frame: a PROT_MTE
    // mapping reads it too, through pointers with tag 0 (Linux clears the zero page's tags at
    // boot for the same reason, `cpu_enable_mte`).
    // SAFETY: fresh frames, `len` bytes, owned by nobody else, reached through the linear map
    // (Normal memory; tagged with MTE, whose set-up ran before this).
    unsafe { zero_user_frames(va as usize, len as usize) };
    crate::arch::aarch64::cache::sync_icache(va, len as usize);
    ZERO_LEN.store(len, Ordering::Relaxed);
    ZERO_BASE.store(base.0, Ordering::Release);
}

/// The shared zero region, if [`init_zero_region`] had one.
pub fn zero_region() -> Option<ZeroRegion> {
    match ZERO_BASE.load(Ordering::Acquire) {
        0 => None,
        pa => Some(ZeroRegion { base: PhysAddr(pa), len: ZERO_LEN.load(Ordering::Relaxed) }),
    }
}

/// The data frames of user memory (`mm::user::UserFrames`): one 4 KiB frame at a time from
/// this allocator, zeroed, filled and cache-maintained through the linear map.
pub struct UserFrames;

impl mm::user::UserFrames for UserFrames {
    fn alloc_zeroed(&mut self) -> Option<PhysAddr> {
        if super::fallible::inject_failure() {
            return None;
        }
        let frame = alloc(1)?;
        // SAFETY: a fresh frame of PAGE_SIZE bytes, owned by nobody else, reached through the
        // linear map (Normal memory).
        unsafe {
            zero_user_frames(crate::memory::layout::phys_to_linear(frame.0) as usize, PAGE_SIZE as usize)
        };
        Some(frame)
    }

    fn free(&mut self, pa: PhysAddr) {
        if refs::release(pa) {
            free(pa, 1);
        }
    }

    fn share(&mut self, pa: PhysAddr) -> bool {
        refs::share(pa)
    }

    fn is_shared(&self, pa: PhysAddr) -> bool {
        refs::is_shared(pa)
    }

    fn alloc_copy_of(&mut self, src: PhysAddr) -> Option<PhysAddr> {
        if super::fallible::inject_failure() {
            return None;
        }
        // Not zeroed first: the copy overwrites every byte, and every tag where there are tags.
        let dst = alloc(1)?;
        let to = crate::memory::layout::phys_to_linear(dst.0) as usize;
        let from = crate::memory::layout::phys_to_linear(src.0) as usize;
        // SAFETY: `dst` is a fresh frame owned by nobody else, `src` a frame this user memory
        // holds, each PAGE_SIZE bytes of RAM reached through the linear map, page-aligned.
        unsafe { copy_frame(to, from) };
        if crate::arch::aarch64::mte::supported() {
            // The copy keeps the page's tags, as Linux's `copy_highpage` copies them for a
            // tagged page; an untagged page's tags are zero (every frame's tags are zeroed with
            // it when first handed out), and copying them is what gives this frame, whose
            // old tags are whatever its last use left, zero tags too.
            // SAFETY: as above; the linear map is tagged on a CPU with FEAT_MTE2.
            unsafe { crate::arch::aarch64::mte::copy_tags(to, from, PAGE_SIZE as usize) };
        }
        Some(dst)
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
        if super::fallible::inject_failure() {
            return None;
        }
        // Buddy blocks are aligned to their size (mm::user checks it anyway).
        let first = alloc(pages as usize)?;
        let bytes = (pages * PAGE_SIZE) as usize;
        // SAFETY: `pages` fresh frames, physically contiguous, owned by nobody else, reached
        // through the linear map (Normal memory).
        unsafe { zero_user_frames(crate::memory::layout::phys_to_linear(first.0) as usize, bytes) };
        Some(first)
    }

    fn free_frames(&self) -> u64 {
        let (allocated, total) = usage();
        (total - allocated) as u64
    }

    fn zero_region(&self) -> Option<ZeroRegion> {
        zero_region()
    }
}

/// Copies the frame at linear address `from` to the one at `to`, 128 bytes an iteration in
/// eight load pairs and eight store pairs (as Linux's arm64 `copy_page`): 19 instructions per 128
/// bytes, about 610 for a 4 KiB frame, where the generic `memcpy` (8 bytes in 4 instructions)
/// takes about 2,050 — the largest single part of a copy-on-write fault's copy.
///
/// # Safety
/// `to` and `from` must be the page-aligned linear addresses of two distinct frames of RAM, the
/// destination owned by the caller and used by nobody else.
unsafe fn copy_frame(to: usize, from: usize) {
    const _: () = assert!(PAGE_SIZE.is_multiple_of(128));
    // SAFETY: the loop reads `[from, from + PAGE_SIZE)` and writes `[to, to + PAGE_SIZE)`, the
    // caller's two frames, in PAGE_SIZE / 128 (at least 1) iterations; it uses no stack.
    unsafe {
        core::arch::asm!(
            "2:",
            "ldp {a}, {b}, [{src}]",
            "ldp {c}, {d}, [{src}, #16]",
            "stp {a}, {b}, [{dst}]",
            "stp {c}, {d}, [{dst}, #16]",
            "ldp {a}, {b}, [{src}, #32]",
            "ldp {c}, {d}, [{src}, #48]",
            "stp {a}, {b}, [{dst}, #32]",
            "stp {c}, {d}, [{dst}, #48]",
            "ldp {a}, {b}, [{src}, #64]",
            "ldp {c}, {d}, [{src}, #80]",
            "stp {a}, {b}, [{dst}, #64]",
            "stp {c}, {d}, [{dst}, #80]",
            "ldp {a}, {b}, [{src}, #96]",
            "ldp {c}, {d}, [{src}, #112]",
            "stp {a}, {b}, [{dst}, #96]",
            "stp {c}, {d}, [{dst}, #112]",
            "add {src}, {src}, #128",
            "add {dst}, {dst}, #128",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            src = inout(reg) from => _,
            dst = inout(reg) to => _,
            n = inout(reg) PAGE_SIZE / 128 => _,
            a = out(reg) _,
            b = out(reg) _,
            c = out(reg) _,
            d = out(reg) _,
            options(nostack)
        );
    }
}

/// Zeroes fresh user frames at `va` (their linear-map address), `len` bytes: their data, and on
/// a CPU with FEAT_MTE2 their Allocation Tags with it (`arch::aarch64::mte::zero_with_tags`),
/// so that a page mapped `PROT_MTE`, now or after an `mprotect`, starts with tag 0
/// everywhere, as Linux's `mte_zero_clear_page_tags` leaves it.
///
/// # Safety
/// `[va, va + len)` is the linear map of whole frames the caller owns and nobody else uses.
unsafe fn zero_user_frames(va: usize, len: usize) {
    if crate::arch::aarch64::mte::supported() {
        // SAFETY: the caller's promise; the linear map is tagged with the feature, and whole
        // frames are multiples of any `DC ZVA` block.
        unsafe { crate::arch::aarch64::mte::zero_with_tags(va, len) }
    } else {
        // SAFETY: the caller's promise.
        unsafe { crate::arch::aarch64::cache::zero(va, len) }
    }
}

/// How many holders the user frame `pa` has: 1 for a frame held once (or outside the counted
/// span), more for one a `fork` shared or a memory object's frame that mappings also hold (the
/// object's own reference counts too). `/proc/PID/smaps` divides a page among its holders (Pss).
pub fn holders(pa: PhysAddr) -> u64 {
    refs::holders(pa)
}

/// Makes the reference-count table of shared frames (once, at boot, after every RAM range is
/// added); without it (no frames for it) every fork fails with `ENOMEM`.
pub fn init_shared_counts() {
    let _ = refs::table();
}

/// Reference counts of user frames shared by `fork` (copy-on-write): one counter per frame of
/// RAM holding the references beyond the first (0: one owner, as every frame starts and every
/// free frame is). The table is made from frames at boot (4 bytes per frame of RAM); if it cannot be made, `share` fails and so does the fork (`ENOMEM`).
/// Counters are atomic: the holders of one frame are different processes, each under its own
/// memory lock.
mod refs {
    use core::sync::atomic::{AtomicU32, Ordering};

    use mm::addr::{PAGE_SHIFT, PAGE_SIZE, PhysAddr};
    use spin::Once;

    /// The counters: the first frame number covered and the table, made once (`None` for good
    /// if there were no frames for it). Once made it never changes, so the per-page calls
    /// (`share` at every fork, `release` at every unmap, `is_shared` at every copy-on-write
    /// fault) read it without a lock.
    static TABLE: Once<Option<(u64, &'static [AtomicU32])>> = Once::new();

    pub(super) fn table() -> Option<(u64, &'static [AtomicU32])> {
        *TABLE.call_once(|| {
            let (lo, hi) = super::FRAMES.lock().span;
            let count = hi.checked_sub(lo)? as usize;
            let bytes = count * core::mem::size_of::<AtomicU32>();
            let pages = bytes.div_ceil(PAGE_SIZE as usize);
            let first = super::alloc(pages)?;
            let ptr = crate::memory::layout::phys_to_linear(first.0) as *mut AtomicU32;
            // SAFETY: `pages` fresh frames, never freed, owned by this table alone; zeroed here
            // before the slice is made (an all-zero AtomicU32 is 0).
            let slice = unsafe {
                core::ptr::write_bytes(ptr.cast::<u8>(), 0, pages * PAGE_SIZE as usize);
                core::slice::from_raw_parts(ptr, count)
            };
            Some((lo, slice))
        })
    }

    fn counter(pa: PhysAddr) -> Option<&'static AtomicU32> {
        let (lo, table) = (*TABLE.get()?)?;
        table.get(usize::try_from((pa.0 >> PAGE_SHIFT).checked_sub(lo)?).ok()?)
    }

    /// Adds a reference; false if the table was not made or the count is at its maximum.
    pub fn share(pa: PhysAddr) -> bool {
        counter(pa).is_some_and(|c| {
            // Relaxed, as `Arc::clone`: the caller holds a reference already (the frame is
            // mapped in the space it copies, under that space's lock), so no holder can free
            // the frame meanwhile, and a new reference publishes nothing. One atomic add, not a
            // compare-and-swap loop: it runs once a page at every fork. A count that reached
            // the maximum is put back and refused (a count can pass it only by the few adds
            // racing on other CPUs between one add and its undo).
            let before = c.fetch_add(1, Ordering::Relaxed);
            if before >= u32::MAX - 1 {
                c.fetch_sub(1, Ordering::Relaxed);
                return false;
            }
            true
        })
    }

    /// The references to the frame: the first and the counted ones beyond it.
    pub fn holders(pa: PhysAddr) -> u64 {
        counter(pa).map_or(1, |c| u64::from(c.load(Ordering::Acquire)) + 1)
    }

    /// Whether the frame has more than one reference.
    pub fn is_shared(pa: PhysAddr) -> bool {
        counter(pa).is_some_and(|c| c.load(Ordering::Acquire) > 0)
    }

    /// Drops one reference; true if it was the last (the frame is to be freed).
    pub fn release(pa: PhysAddr) -> bool {
        match counter(pa) {
            None => true,
            Some(c) => c.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_err(),
        }
    }
}
