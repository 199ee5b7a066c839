//! TLB invalidation under QEMU: stale-read tests for every kind of invalidation the planner emits.
//!
//! QEMU keeps a translation in its software TLB until a TLBI removes it, so a missing or short
//! invalidation shows up as a stale read. Each test: map VA → frames A and read them (QEMU caches
//! the translation); point the VA at frames B *without* invalidating and read again (still A:
//! proof that the translation was cached, else the test proves nothing); run the planned flush
//! and read (B); pages just outside the flushed range still read A where QEMU is exact: for
//! single-page ops. QEMU 7.2 ignores the ASID, and turns a range op into a flush of everything
//! whenever the range is larger than its soft TLB's current mask (which resizes with use: a
//! 2-page range was seen to over-flush here) or touches memory ever mapped by a block (see
//! the range bound in mm::tlb), so neighbours are checked only when the plan has no range op,
//! and only after a control flush of an unrelated page has shown that QEMU is exact right now.
//! Exact coverage of every range is proven on the host model (mm::tlb tests); these tests prove
//! that the instructions, operands and barriers reach a real (emulated) TLB.
use alloc::string::String;
use alloc::vec::Vec;

use aarch64_cpu::registers::{ReadWriteable, TCR_EL1, TTBR0_EL1, Writeable};
use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::Attributes;
use mm::paging::{Constraints, PageTable, VaRange};
use mm::tlb::{FlushTarget, OpKind, Reach, Scope, TlbRequest};

use crate::memory::kernel_map::{self, FrameTranslation};
use crate::memory::layout::{TEST_WINDOW, phys_to_linear};
use crate::memory::{frames, tlb};
use crate::{ensure, ensure_eq, kernel_test};

/// The ASID the TTBR0 tests use.
const TEST_ASID: u16 = 7;
/// A user-half address for the TTBR0 tests.
const USER_VA: u64 = 0x0000_0040_0000_0000;

/// Frames A and B for `n` pages, each page marked with its own value.
struct Pages {
    a: Vec<PhysAddr>,
    b: Vec<PhysAddr>,
}

impl Pages {
    fn new(n: usize) -> Result<Self, String> {
        let mut pages = Pages { a: Vec::new(), b: Vec::new() };
        for i in 0..n {
            for (list, tag) in [(&mut pages.a, 0xa000), (&mut pages.b, 0xb000)] {
                let pa = frames::alloc(1).ok_or("out of frames")?;
                // SAFETY: a fresh frame, reached through the linear map.
                unsafe { (phys_to_linear(pa.0) as *mut u64).write_volatile(tag + i as u64) };
                list.push(pa);
            }
        }
        Ok(pages)
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        for &pa in self.a.iter().chain(&self.b) {
            frames::free(pa, 1);
        }
    }
}

fn read(va: u64) -> u64 {
    // SAFETY: the tests read only addresses they mapped (normal memory, readable at EL1).
    unsafe { (va as *const u64).read_volatile() }
}

/// Where a test's table lives: the kernel's own (TTBR1, global entries) or a private TTBR0 table
/// with an ASID (non-global entries).
pub(super) enum Space {
    Kernel,
    User(PageTable<FrameTranslation>),
}

impl Space {
    pub(super) fn user() -> Result<Self, String> {
        let pt = PageTable::new(FrameTranslation, VaRange::Lower).map_err(|e| alloc::format!("{e:?}"))?;
        // Install it in TTBR0 with the test ASID; EL1 reaches it because the pages are EL1-only
        // (PAN only guards EL0-accessible pages).
        TTBR0_EL1.set(crate::arch::aarch64::translation::ttbr(pt.root_pa().0, TEST_ASID));
        TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        Ok(Space::User(pt))
    }

    fn base(&self) -> u64 {
        match self {
            Space::Kernel => TEST_WINDOW,
            Space::User(_) => USER_VA,
        }
    }

    fn scope(&self) -> Scope {
        match self {
            Space::Kernel => Scope::Global,
            Space::User(_) => Scope::Asid(TEST_ASID),
        }
    }

    fn attrs(&self) -> Attributes {
        match self {
            Space::Kernel => Attributes::kernel_data(),
            Space::User(_) => Attributes::kernel_data().with_global(false),
        }
    }

    /// Maps page `i` of the window to `pa` (an invalid-to-valid change: no TLBI needed).
    fn map(&mut self, i: usize, pa: PhysAddr) -> Result<(), String> {
        let va = VirtAddr(self.va(i));
        let attrs = self.attrs();
        let result = match self {
            // Through the live kernel space (it ends with DSB ISHST and ISB).
            Space::Kernel => kernel_map::with_space(|space| {
                space.map(va, pa, PAGE_SIZE, attrs, Constraints::NO_CONTIGUOUS)
            })
            .ok_or("no kernel space")?,
            Space::User(pt) => {
                let result = pt.map(va, pa, PAGE_SIZE, attrs, Constraints::NO_CONTIGUOUS);
                aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
                result
            }
        };
        result.map_err(|e| alloc::format!("map: {e:?}"))
    }

    /// Clears page `i` *without* any TLB maintenance (the point of the test). The pin page keeps
    /// the level-3 table alive, so no table is detached.
    fn unmap_silently(&mut self, i: usize) -> Result<(), String> {
        let va = VirtAddr(self.va(i));
        match self {
            Space::Kernel => kernel_map::with_space(|space| {
                // SAFETY: the scenario flushes the entry itself (that is what it tests) before it
                // frees the frame, and no table is detached (the pin page, checked below).
                let pt = unsafe { space.table_mut_unflushed() };
                unmap_one(pt, va)
            })
            .ok_or("no kernel space")?,
            Space::User(pt) => unmap_one(pt, va),
        }
    }

    /// Unmaps every page a scenario may have used with one flush, and only then frees the
    /// tables that emptied (clearing them one by one without a flush would have to leak them).
    fn clear(&mut self) {
        let (start, size) = (VirtAddr(self.base()), (PIN as u64 + 1) * PAGE_SIZE);
        match self {
            Space::Kernel => {
                let _ = kernel_map::with_space(|space| space.unmap(start, size, |_| {}));
            }
            Space::User(pt) => {
                if let Ok(record) = pt.unmap(start, size) {
                    tlb::flush_all(FlushTarget::asid(TEST_ASID, Reach::Broadcast));
                    record.release(pt.translation_mut());
                }
            }
        }
    }

    /// Page `i` of the window: the test pages start [`FIRST_PAGE`] pages in; the pin page and
    /// the control pages below it stay at the end of the 2 MiB region.
    fn va(&self, i: usize) -> u64 {
        let page = if i >= PIN - 2 { i } else { i + FIRST_PAGE.load(core::sync::atomic::Ordering::Relaxed) };
        self.base() + page as u64 * PAGE_SIZE
    }
}

/// Clears the page at `va` of `pt` without TLB maintenance; fails if a table would be detached
/// (it would then be freed before any flush).
fn unmap_one<T: mm::paging::Translation>(pt: &mut PageTable<T>, va: VirtAddr) -> Result<(), String> {
    let record = pt.unmap(va, PAGE_SIZE).map_err(|e| alloc::format!("{e:?}"))?;
    ensure!(record.detached_tables() == 0, "a table was detached");
    record.release(pt.translation_mut());
    Ok(())
}

/// Index of the pin page: the last page of the 2 MiB region, never remapped.
const PIN: usize = 511;

/// Where in the 2 MiB region a scenario's pages start. Each retry after QEMU evicted an entry
/// moves them (QEMU's TLB is indexed by the low bits of the page number, so an entry evicted by
/// an access that aliases it is evicted the same way on every retry at the same address; how
/// often depends on the kernel's layout).
static FIRST_PAGE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Runs one stale-read scenario over `n` pages: flushes pages `[0, covered)` with `flush` and
/// checks that they read B and, when the plan is made of single-page ops (which QEMU applies
/// exactly), that pages `[covered, n)` still read A.
///
/// QEMU's software TLB may evict the entry before the remap (it is a small direct-mapped cache,
/// resized with use): then the scenario cannot show anything and is run again, up to five times,
/// each time on other pages of the region.
pub(super) fn scenario(
    make: impl Fn() -> Result<Space, String>,
    n: usize,
    covered: usize,
    flush: impl Fn(&Space) -> mm::tlb::TlbPlan,
    check_plan: impl Fn(&mm::tlb::TlbPlan) -> Result<(), String>,
) -> Result<(), String> {
    let mut last = Ok(());
    for attempt in 0..5 {
        let frames_before = super::frames_in_use();
        FIRST_PAGE.store(attempt * 67, core::sync::atomic::Ordering::Relaxed); // n <= 6: below PIN - 2
        last = scenario_once(make()?, n, covered, &flush, &check_plan);
        FIRST_PAGE.store(0, core::sync::atomic::Ordering::Relaxed);
        let leaked = super::frames_in_use().wrapping_sub(frames_before);
        if last.is_ok() && leaked != 0 {
            return Err(alloc::format!("the scenario left {leaked} frames allocated"));
        }
        match &last {
            Err(why) if why.contains(NOT_CACHED) => continue,
            _ => return last,
        }
    }
    last
}

/// How `scenario_once` says the translation was not cached, so the test proves nothing.
const NOT_CACHED: &str = "QEMU did not cache it";

fn scenario_once(
    mut space: Space,
    n: usize,
    covered: usize,
    flush: &impl Fn(&Space) -> mm::tlb::TlbPlan,
    check_plan: &impl Fn(&mm::tlb::TlbPlan) -> Result<(), String>,
) -> Result<(), String> {
    let pages = Pages::new(n)?;
    let pin = frames::alloc(1).ok_or("out of frames")?;
    let result = (|| {
        space.map(PIN, pin)?;
        for i in 0..n {
            space.map(i, pages.a[i])?;
            ensure_eq!(read(space.va(i)), 0xa000 + i as u64);
        }
        for i in 0..n {
            space.unmap_silently(i)?;
            space.map(i, pages.b[i])?;
        }
        for i in 0..n {
            ensure!(
                read(space.va(i)) == 0xa000 + i as u64,
                "page {i} changed before any TLBI: {NOT_CACHED}, so the test proves nothing"
            );
        }
        // Is QEMU exact here? A single-page flush of an address far from the test pages must
        // leave them stale. (On some machine models QEMU's software TLB turns even one-page
        // flushes into whole flushes, e.g. after it resized or once blocks were mapped nearby.)
        let control =
            TlbRequest::new(VirtAddr(space.va(PIN - 2)), VirtAddr(space.va(PIN - 1)), space.scope());
        tlb::flush(&control, false);
        let exact = (0..n).all(|i| read(space.va(i)) == 0xa000 + i as u64);
        let plan = flush(&space);
        check_plan(&plan)?;
        for i in 0..covered {
            ensure_eq!(read(space.va(i)), 0xb000 + i as u64);
        }
        if exact && plan.iter().all(|i| i.op.kind() == OpKind::Page) {
            for i in covered..n {
                ensure!(read(space.va(i)) == 0xa000 + i as u64, "page {i} outside the flush was invalidated");
            }
        }
        Ok(())
    })();
    // Clean up whatever happened: unmap everything, flush the whole scope (the silently
    // remapped pages may still be cached outside what `clear` flushed), free the frames.
    space.clear();
    tlb::flush_all(FlushTarget { scope: space.scope(), reach: Reach::Broadcast });
    if let Space::User(pt) = space {
        TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
        TTBR0_EL1.set(0);
        tlb::flush_all(FlushTarget::GLOBAL);
        let (translation, record) = pt.destroy();
        let mut translation = translation;
        record.release(&mut translation);
    }
    frames::free(pin, 1);
    drop(pages);
    result
}

pub(super) fn range_request(space: &Space, pages: usize, leaf_only: bool) -> TlbRequest {
    let start = VirtAddr(space.va(0));
    TlbRequest::new(start, VirtAddr(space.va(pages)), space.scope()).with_leaf_only(leaf_only)
}

fn expect_kind(kind: OpKind) -> impl Fn(&mm::tlb::TlbPlan) -> Result<(), String> {
    move |plan| {
        ensure!(plan.iter().all(|i| i.op.kind() == kind), "plan {:?} is not all {:?}", plan, kind);
        Ok(())
    }
}

fn expect_range_if_available(plan: &mm::tlb::TlbPlan) -> Result<(), String> {
    let want = if tlb::features().range { OpKind::Range } else { OpKind::Page };
    ensure!(plan.iter().any(|i| i.op.kind() == want), "plan {plan:?} has no {want:?} op");
    ensure!(plan.len() <= 4, "plan {plan:?} is longer than the per-page fallback");
    Ok(())
}

kernel_test!(
    fn stale_read_single_page_kernel() {
        scenario(
            || Ok(Space::Kernel),
            2,
            1,
            |s| tlb::flush(&range_request(s, 1, false), true),
            expect_kind(OpKind::Page),
        )
    }
);

kernel_test!(
    fn stale_read_range_of_4_pages_kernel_ttbr1() {
        scenario(
            || Ok(Space::Kernel),
            6,
            4,
            |s| tlb::flush(&range_request(s, 4, false), true),
            expect_range_if_available,
        )
    }
);

kernel_test!(
    fn stale_read_single_page_user_asid() {
        scenario(
            Space::user,
            2,
            1,
            |s| tlb::flush(&range_request(s, 1, false), false),
            expect_kind(OpKind::Page),
        )
    }
);

kernel_test!(
    fn stale_read_range_of_3_pages_user_asid() {
        scenario(
            Space::user,
            5,
            3,
            |s| tlb::flush(&range_request(s, 3, false), false),
            expect_range_if_available,
        )
    }
);

kernel_test!(
    fn stale_read_leaf_only() {
        scenario(
            Space::user,
            3,
            2,
            |s| tlb::flush(&range_request(s, 2, true), false),
            |plan| {
                ensure!(plan.iter().all(|i| i.op.is_leaf_only()), "plan {plan:?} is not leaf-only");
                Ok(())
            },
        )
    }
);

kernel_test!(
    fn stale_read_whole_asid() {
        scenario(
            Space::user,
            4,
            4,
            |s| tlb::flush_all(FlushTarget { scope: s.scope(), reach: Reach::Broadcast }),
            expect_kind(OpKind::Asid),
        )
    }
);

kernel_test!(
    fn stale_read_whole_tlb() {
        scenario(
            || Ok(Space::Kernel),
            4,
            4,
            |s| tlb::flush_all(FlushTarget { scope: s.scope(), reach: Reach::Broadcast }),
            expect_kind(OpKind::All),
        )
    }
);

kernel_test!(
    fn tlb_counters_count_what_was_issued() {
        let before = tlb::stats();
        let req =
            TlbRequest::new(VirtAddr(TEST_WINDOW), VirtAddr(TEST_WINDOW + 2 * PAGE_SIZE), Scope::Global);
        let plan = tlb::flush(&req, false);
        let after = tlb::stats();
        ensure_eq!(after.planned_tlbis() - before.planned_tlbis(), plan.len() as u64);
        ensure_eq!(after.plans - before.plans, 1);
        Ok(())
    }
);
