//! Fallible heap allocation for everything the kernel allocates on behalf of a process, and the
//! fault injection that proves it (Linux's `failslab` with the per-task `fail-nth` file).
//!
//! Stable Rust's `Box::new`, `Arc::new`, `Vec::push`, `vec![]`, `collect` and `format!` call the
//! allocation-error handler when the heap returns null, which panics a `no_std` kernel. So an
//! allocation a program can cause (a system call, a fault, a signal delivered to it) goes
//! through here and turns an exhausted heap into `ENOMEM` for that program, leaving the state
//! as it was:
//! - vectors and boxes: `mm::vm::fallible`'s [`reserve`], [`push`] and [`boxed`] (re-exported:
//!   one definition for the whole kernel), plus [`zeroed`] here;
//! - reference-counted values: [`arc`]. `Arc::try_new` is not stable, so the block `Arc::new`
//!   will ask for is allocated fallibly first and parked in a per-CPU slot; the global
//!   allocator ([`super::heap`]) hands exactly that block to the next request of exactly that
//!   layout on this CPU, which is `Arc::new`'s. No interrupt handler allocates and a system call
//!   runs to its end on one CPU, so nothing else can take it. A layout that does not match
//!   (a different `ArcInner` in a future `alloc`) is counted in [`arc_misses`], which a kernel
//!   test checks is zero.
//!
//! **The boundary.** These stay infallible, because no program causes them or they happen
//! before any program runs: boot (the device tree and machine description, the command line,
//! the initramfs copy of the first program and its argument strings in `main.rs`, the first
//! process's creation in `process::spawn`, whose error strings go to the console), the frame
//! allocator's own bookkeeping (served from the heap's bootstrap reserve, never refused), the
//! console and report paths, the kernel's tests and benchmarks, and the scheduler's queues
//! (sized by `sched::admit`, which fails with `ENOMEM`/`EAGAIN`, so moving a thread between
//! them never allocates).
//!
//! **Fault injection** (booted with `failslab` on the command line): [`SYS_FAIL_NTH`] arms the
//! calling thread so that the Nth allocation made while the kernel handles its exceptions
//! (system calls and faults) fails, as Linux's `/proc/self/task/TID/fail-nth` does for both of
//! its injection points, `failslab` and `fail_page_alloc`: heap blocks, and the frames of user
//! memory and of its page tables (`frames::UserFrames`, `kernel_map::FrameTranslation`). The
//! frame allocator's own bookkeeping, and the frames the heap grows by, are exempt, as they are
//! from real exhaustion. A page fault whose allocation was the injected failure is retried (the
//! thread returns to the faulting instruction), as Linux's `pagefault_out_of_memory` does when no
//! OOM kill happened (commit 60e2793d440a, v5.16): only real exhaustion kills the process. An allocation that
//! is still infallible on such a path then panics the kernel, so a program that walks N = 1, 2,
//! 3... over a system call (tests/programs/failslab.c) proves every allocation of that call
//! fallible and every failure an error return.
//!
//! [`SYS_FAIL_NTH`]: mm::vm::abi::SYS_FAIL_NTH
use alloc::alloc::{alloc, dealloc};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use mm::vm::Errno;
pub use mm::vm::fallible::{boxed, push, reserve};

use crate::cpu::{MAX_CPUS, current_cpu};

/// `vec![T::default(); n]` (zeros for the integer types), or `ENOMEM`.
///
/// # Errors
/// `ENOMEM` when the heap cannot hold it.
pub fn zeroed<T: Copy + Default>(n: usize) -> Result<Vec<T>, Errno> {
    let mut v = Vec::new();
    reserve(&mut v, n)?;
    v.resize(n, T::default());
    Ok(v)
}

/// The layout `Arc::new` allocates for a `T`: `alloc::sync::ArcInner`, a `#[repr(C)]` struct of
/// the strong count, the weak count and the value.
#[repr(C)]
struct ArcInner<T> {
    strong: AtomicUsize,
    weak: AtomicUsize,
    data: T,
}

/// A block allocated fallibly for the allocation that follows on this CPU.
struct Reserved {
    ptr: AtomicPtr<u8>,
    size: AtomicUsize,
    align: AtomicUsize,
}

static RESERVED: [Reserved; MAX_CPUS] = [const {
    Reserved {
        ptr: AtomicPtr::new(core::ptr::null_mut()),
        size: AtomicUsize::new(0),
        align: AtomicUsize::new(0),
    }
}; MAX_CPUS];
static ARC_MISSES: AtomicUsize = AtomicUsize::new(0);

/// `Arc::new(value)`, or `value` back when the heap cannot hold it (the caller's `ENOMEM`; a
/// value that owns resources, such as an address space, is then freed by its owner).
///
/// # Errors
/// `value` itself, when the heap cannot hold it.
pub fn arc<T>(value: T) -> Result<Arc<T>, T> {
    let layout = Layout::new::<ArcInner<T>>();
    if !park(layout) {
        return Err(value);
    }
    let a = Arc::new(value);
    unpark(layout);
    Ok(a)
}

/// `Arc::new_cyclic(make)`, or `None` when the heap cannot hold it (a node that knows its own
/// `Arc`, for its children to point back at it).
pub fn arc_cyclic<T>(make: impl FnOnce(&alloc::sync::Weak<T>) -> T) -> Option<Arc<T>> {
    let layout = Layout::new::<ArcInner<T>>();
    if !park(layout) {
        return None;
    }
    let a = Arc::new_cyclic(make);
    unpark(layout);
    Some(a)
}

/// Makes the one allocation `f` does, of `layout`, fallible (`vfs::ramfs::Reserve`): reserves a
/// block of that layout on this CPU first and hands it to the allocation, or returns false
/// without calling `f` when the heap cannot hold it. The mechanism of [`arc`], for allocations
/// made inside code that cannot call [`arc`] itself (`Arc::new_cyclic` in `vfs`).
pub fn reserving(layout: Layout, f: &mut dyn FnMut()) -> bool {
    if !park(layout) {
        return false;
    }
    f();
    unpark(layout);
    true
}

/// Allocates a block of `layout` and parks it in this CPU's slot for the next allocation of
/// exactly that layout; false when the heap cannot hold it.
fn park(layout: Layout) -> bool {
    if layout.size() == 0 {
        return true;
    }
    // SAFETY: the layout is not zero-sized (checked above).
    let block = unsafe { alloc(layout) };
    if block.is_null() {
        return false;
    }
    let Some(slot) = RESERVED.get(current_cpu()) else {
        // SAFETY: allocated just above with this layout and not handed out.
        unsafe { dealloc(block, layout) };
        return false;
    };
    slot.size.store(layout.size(), Ordering::Relaxed);
    slot.align.store(layout.align(), Ordering::Relaxed);
    slot.ptr.store(block, Ordering::Release);
    true
}

/// Takes back the block [`park`] parked if the allocation did not take it (it asked for another
/// layout, and the heap served it as usual: counted in [`arc_misses`]).
fn unpark(layout: Layout) {
    let Some(slot) = RESERVED.get(current_cpu()) else { return };
    let left = slot.ptr.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !left.is_null() {
        ARC_MISSES.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the block was not taken, so it is still ours, with this layout.
        unsafe { dealloc(left, layout) };
    }
}

#[cfg_attr(not(feature = "test-image"), expect(dead_code, reason = "a kernel test reads it"))]
/// How many [`arc`] calls found `Arc::new` asking for another layout than the one reserved
/// (0 unless `alloc`'s `ArcInner` changed; a kernel test checks it).
pub fn arc_misses() -> usize {
    ARC_MISSES.load(Ordering::Relaxed)
}

/// The global allocator's first question: the block [`arc`] reserved on this CPU, if `layout`
/// is exactly its layout.
pub(super) fn take_reserved(layout: Layout) -> Option<*mut u8> {
    let slot = RESERVED.get(current_cpu())?;
    if slot.ptr.load(Ordering::Acquire).is_null()
        || slot.size.load(Ordering::Relaxed) != layout.size()
        || slot.align.load(Ordering::Relaxed) != layout.align()
    {
        return None;
    }
    let ptr = slot.ptr.swap(core::ptr::null_mut(), Ordering::AcqRel);
    (!ptr.is_null()).then_some(ptr)
}

/// `failslab` was on the command line: [`fail_nth`] may arm threads.
static INJECTION: AtomicBool = AtomicBool::new(false);
/// The armed thread (`pid << 32 | tid`; 0: none).
static ARMED: AtomicU64 = AtomicU64::new(0);
/// Allocations left until the one that fails (1: the next).
static COUNTDOWN: AtomicU64 = AtomicU64::new(0);
/// The thread whose exception each CPU handles now (`pid << 32 | tid`; 0: none).
static HANDLING: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// The armed failure happened during the exception each CPU handles now.
static INJECTED: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];

fn thread_key(pid: u32, tid: u32) -> u64 {
    (u64::from(pid) << 32) | u64::from(tid)
}

/// Lets [`fail_nth`] arm threads (the `failslab` command-line word).
pub fn allow_injection() {
    INJECTION.store(true, Ordering::Release);
}

/// `SYS_FAIL_NTH(n)` for thread `tid` of process `pid`: from now on the `n`th allocation made
/// while the kernel handles this thread's exceptions fails (`n` = 0 disarms). Returns the count
/// that was left: 0 once the armed failure happened (or when none was armed), as reading
/// Linux's `fail-nth` does. `None` without `failslab` on the command line (`ENOSYS`).
pub fn fail_nth(pid: u32, tid: u32, n: u64) -> Option<u64> {
    if !INJECTION.load(Ordering::Acquire) {
        return None;
    }
    let me = thread_key(pid, tid);
    let left = if ARMED.load(Ordering::Acquire) == me { COUNTDOWN.load(Ordering::Acquire) } else { 0 };
    ARMED.store(0, Ordering::Release);
    COUNTDOWN.store(n, Ordering::Release);
    if n != 0 {
        ARMED.store(me, Ordering::Release);
    }
    Some(left)
}

/// The kernel handles an exception of thread `tid` of process `pid` on this CPU until the
/// returned guard is dropped (the scope of [`fail_nth`]).
pub fn handling(pid: u32, tid: u32) -> Handling {
    let cpu = current_cpu();
    let before = HANDLING.get(cpu).map_or(0, |h| h.swap(thread_key(pid, tid), Ordering::Relaxed));
    if let Some(injected) = INJECTED.get(cpu) {
        injected.store(false, Ordering::Relaxed);
    }
    Handling { cpu, before }
}

/// Ends the scope [`handling`] opened.
pub struct Handling {
    cpu: usize,
    before: u64,
}

impl Drop for Handling {
    fn drop(&mut self) {
        if let Some(h) = HANDLING.get(self.cpu) {
            h.store(self.before, Ordering::Relaxed);
        }
    }
}

/// Whether this allocation is the armed one: the global allocator's second question, and the
/// first of the user-frame and table-frame providers.
pub(super) fn inject_failure() -> bool {
    let armed = ARMED.load(Ordering::Acquire);
    let cpu = current_cpu();
    if armed == 0 || HANDLING.get(cpu).is_none_or(|h| h.load(Ordering::Relaxed) != armed) {
        return false;
    }
    // Counts down to 0: the allocation that takes it from 1 fails, the later ones succeed.
    let fails = COUNTDOWN.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)) == Ok(1);
    if fails && let Some(injected) = INJECTED.get(cpu) {
        injected.store(true, Ordering::Relaxed);
    }
    fails
}

/// Whether the armed failure happened during the exception this CPU handles: a fault that ran
/// out of memory then is retried rather than ending the process (module documentation).
pub fn injected_here() -> bool {
    INJECTED.get(current_cpu()).is_some_and(|i| i.load(Ordering::Relaxed))
}
