//! TLB shootdown across CPUs: a translation cached by another CPU goes away with the broadcast
//! (inner-shareable) forms and stays with the local ones.
//!
//! CPU 1 reads a kernel test-window address in a loop (so its TLB caches the translation); CPU 0
//! points the address at another page without any TLBI: CPU 1 keeps reading the old page (QEMU
//! keeps a per-CPU TLB, like hardware), which proves the stale entry exists. A *local* flush on
//! CPU 0 must leave CPU 1 stale; after the *broadcast* flush completes (DSB ISH), CPU 1 must read
//! the new page.
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::Constraints;
use mm::tlb::{FlushTarget, Reach, Scope, TlbRequest};

use crate::cpu::ONLINE;
use crate::memory::kernel_map;
use crate::memory::layout::{TEST_WINDOW, phys_to_linear};
use crate::memory::{frames, tlb};
use crate::sched::switch::run_on;
use crate::{ensure, kernel_test};

/// A page of the test window the two CPUs share (away from the pages tests/tlb.rs uses).
const VA: u64 = TEST_WINDOW + 0x20_0000;

static SEEN: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
static RUNNING: AtomicBool = AtomicBool::new(false);

fn reader() {
    RUNNING.store(true, Ordering::Release);
    while !STOP.load(Ordering::Acquire) {
        // SAFETY: VA is mapped (to one frame or the other) for the whole time STOP is false.
        let v = unsafe { (VA as *const u64).read_volatile() };
        SEEN.store(v, Ordering::Release);
        READS.fetch_add(1, Ordering::Release);
    }
    RUNNING.store(false, Ordering::Release);
}

/// Maps `va` to `pa` through the live kernel space (invalid to valid: no TLBI).
fn map_at(va: u64, pa: PhysAddr) -> Result<(), alloc::string::String> {
    kernel_map::with_space(|space| {
        space.map(VirtAddr(va), pa, PAGE_SIZE, Attributes::kernel_data(), Constraints::NO_CONTIGUOUS)
    })
    .ok_or("no kernel space")?
    .map_err(|e| alloc::format!("{e:?}"))
}

fn map(pa: PhysAddr) -> Result<(), alloc::string::String> {
    map_at(VA, pa)
}

/// Clears the entry without any TLBI (the point of the test); the table stays (the pin page).
fn unmap_silently() -> Result<(), alloc::string::String> {
    kernel_map::with_space(|space| {
        // SAFETY: the test flushes VA itself (locally, then broadcast) before it frees a frame;
        // no table is detached (checked).
        let pt = unsafe { space.table_mut_unflushed() };
        let record = pt.unmap(VirtAddr(VA), PAGE_SIZE).map_err(|e| alloc::format!("{e:?}"))?;
        ensure!(record.detached_tables() == 0, "a table was detached");
        record.release(pt.translation_mut());
        Ok(())
    })
    .ok_or("no kernel space")?
}

fn wait_for(us: u64, mut cond: impl FnMut() -> bool) -> bool {
    let start = crate::arch::time::counter();
    let limit = us * crate::arch::time::frequency() / 1_000_000;
    while !cond() {
        if crate::arch::time::counter() - start > limit {
            return cond();
        }
        core::hint::spin_loop();
    }
    true
}

kernel_test!(
    fn cross_cpu_stale_read_needs_the_broadcast_flush() {
        if ONLINE.load(Ordering::Acquire) < 2 {
            return Ok(()); // one CPU: nothing to shoot down (the -smp 4 runs cover it)
        }
        let a = frames::alloc(1).ok_or("no frame")?;
        let b = frames::alloc(1).ok_or("no frame")?;
        // SAFETY: fresh frames, reached through the linear map.
        unsafe {
            (phys_to_linear(a.0) as *mut u64).write_volatile(0xaaaa);
            (phys_to_linear(b.0) as *mut u64).write_volatile(0xbbbb);
        }
        // A pin page keeps the level-3 table alive while VA is remapped.
        let pin = frames::alloc(1).ok_or("no frame")?;
        let result = (|| {
            map_at(VA + PAGE_SIZE, pin)?;
            map(a)?;
            SEEN.store(0, Ordering::Release);
            STOP.store(false, Ordering::Release);
            ensure!(run_on(1, reader), "cpu1 is busy");
            ensure!(
                wait_for(2_000_000, || SEEN.load(Ordering::Acquire) == 0xaaaa),
                "cpu1 never read the page"
            );
            unmap_silently()?;
            map(b)?;
            let req = TlbRequest::new(VirtAddr(VA), VirtAddr(VA + PAGE_SIZE), Scope::Global);
            // Our own TLB: local flush (CPU 0 must not read A itself below).
            tlb::flush(&req.with_reach(Reach::Local), true);
            // CPU 1 must keep reading (a thousand more reads) and still see the old page: the
            // local flush did not reach its TLB.
            let reads = READS.load(Ordering::Acquire);
            ensure!(
                wait_for(2_000_000, || READS.load(Ordering::Acquire) >= reads + 1000),
                "cpu1 stopped reading"
            );
            ensure!(
                SEEN.load(Ordering::Acquire) == 0xaaaa,
                "cpu1 read {:#x} after only a local flush on cpu0: the test cannot tell local from broadcast",
                SEEN.load(Ordering::Acquire)
            );
            tlb::flush(&req, true);
            ensure!(
                wait_for(2_000_000, || SEEN.load(Ordering::Acquire) == 0xbbbb),
                "cpu1 still reads the old page after the broadcast flush"
            );
            Ok(())
        })();
        STOP.store(true, Ordering::Release);
        wait_for(2_000_000, || !RUNNING.load(Ordering::Acquire));
        // Both pages through the space: one flush for the range, tables freed after it.
        let _ = kernel_map::with_space(|space| space.unmap(VirtAddr(VA), 2 * PAGE_SIZE, |_| {}));
        tlb::flush_all(FlushTarget::GLOBAL);
        for f in [a, b, pin] {
            frames::free(f, 1);
        }
        result
    }
);
