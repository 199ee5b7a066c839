//! `tlbi-locality`: does the kernel pick local or broadcast TLB invalidations by where the address
//! space has been? Phase 1, single-threaded, before this process has run anywhere but its first
//! CPU: K rounds of mmap/touch/mprotect/munmap must issue no broadcast TLBI (the kernel uses the
//! local forms for an address space confined to one CPU) but some local ones. Phase 2 (with more
//! than one CPU online): the thread moves itself to another CPU with `sched_setaffinity`, repeats,
//! and must now see broadcast TLBIs (the first CPU may still hold entries of the address space).
//!
//! Phase 3 (the same condition): a page fault that completes a 64 KiB run makes the kernel fold
//! it, with break-before-make and a flush; touching 15 pages on one CPU and the 16th on another
//! must give folds whose TLBIs are all broadcast. (This checks the reach of fault-time flushes in
//! the guest; that the target is the one of the moment and not one left by an earlier call is
//! proven on the host, where the test controls the allocator's answers.)
//!
//! `SYS_MM_STATS` counts for the whole machine, so only the deltas around each phase are used;
//! the other CPUs are idle in the kernel meanwhile. On Linux (`ENOSYS`) the mode reports and skips.
//! Also home of the TLBI-counter helpers the thread modes print with.

use core::fmt;
use core::sync::atomic::Ordering;

use crate::sys::{self, Errno, MmStats, PROT_READ, PROT_WRITE};
use crate::thread;
use crate::{Checks, Ctx, check, ok, say};

/// TLBI counts issued between two `SYS_MM_STATS` readings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Delta {
    /// Broadcast range, page, ASID, all.
    pub broadcast: [u64; 4],
    /// Local range, page, ASID, all.
    pub local: [u64; 4],
}

impl Delta {
    /// `after - before`.
    pub fn between(before: &MmStats, after: &MmStats) -> Self {
        let b = |s: &MmStats| {
            [s.tlbi_range_broadcast, s.tlbi_page_broadcast, s.tlbi_asid_broadcast, s.tlbi_all_broadcast]
        };
        let l = |s: &MmStats| [s.tlbi_range_local, s.tlbi_page_local, s.tlbi_asid_local, s.tlbi_all_local];
        let sub = |x: [u64; 4], y: [u64; 4]| core::array::from_fn(|i| x[i].wrapping_sub(y[i]));
        Delta { broadcast: sub(b(after), b(before)), local: sub(l(after), l(before)) }
    }

    /// All broadcast TLBIs.
    pub fn broadcast_total(&self) -> u64 {
        self.broadcast.iter().sum()
    }

    /// All local TLBIs.
    pub fn local_total(&self) -> u64 {
        self.local.iter().sum()
    }
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.broadcast;
        let [e, g, h, i] = self.local;
        write!(
            f,
            "broadcast {} (range/page/asid/all {a}/{b}/{c}/{d}), local {} (range/page/asid/all {e}/{g}/{h}/{i})",
            self.broadcast_total(),
            self.local_total()
        )
    }
}

/// The current CPU for reports (`getcpu`), or `?`.
pub struct Cpu(pub Result<u32, Errno>);

impl fmt::Display for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Ok(c) => write!(f, "{c}"),
            Err(e) => write!(f, "? (getcpu: {})", e.name()),
        }
    }
}

/// Rounds of the phase workload.
const ROUNDS: u32 = 16;
/// Pages per round.
const PAGES: u64 = 4;

/// One phase: `ROUNDS` × (mmap 4 pages, write each, mprotect R, read, mprotect RW, munmap one page,
/// munmap the rest). Returns the TLBI delta and the number of mm operations, or why it failed.
fn phase(page: u64) -> Result<(Delta, u32), alloc::string::String> {
    let len = PAGES * page;
    let before = sys::mm_stats().map_err(|e| alloc::format!("SYS_MM_STATS: {e}"))?;
    let mut ops = 0;
    for round in 0..ROUNDS {
        let base =
            sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0).map_err(|e| alloc::format!("mmap: {e}"))?;
        for p in 0..PAGES {
            // SAFETY: inside the fresh RW mapping.
            unsafe { ((base + p * page) as *mut u64).write_volatile(u64::from(round) << 8 | p) };
        }
        // SAFETY: our own mapping; nothing writes it while it is read-only.
        unsafe { sys::mprotect(base, len, PROT_READ) }.map_err(|e| alloc::format!("mprotect(R): {e}"))?;
        for p in 0..PAGES {
            // SAFETY: inside the mapping, readable.
            let v = unsafe { ((base + p * page) as *const u64).read_volatile() };
            if v != u64::from(round) << 8 | p {
                return Err(alloc::format!("page {p} of round {round} reads {v:#x} after mprotect(R)"));
            }
        }
        // SAFETY: as above.
        unsafe { sys::mprotect(base, len, PROT_READ | PROT_WRITE) }
            .map_err(|e| alloc::format!("mprotect(RW): {e}"))?;
        // SAFETY: the mapping is ours and no longer used after these calls.
        unsafe { sys::munmap(base, page) }.map_err(|e| alloc::format!("munmap: {e}"))?;
        // SAFETY: as above.
        unsafe { sys::munmap(base + page, len - page) }.map_err(|e| alloc::format!("munmap: {e}"))?;
        ops += 5;
    }
    let after = sys::mm_stats().map_err(|e| alloc::format!("SYS_MM_STATS: {e}"))?;
    Ok((Delta::between(&before, &after), ops))
}

/// The `tlbi-locality` mode.
pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("tlbi-locality");
    say!(
        "== tlbi-locality: {ROUNDS} rounds of mmap/touch/mprotect R/RW/munmap ({PAGES} pages) on one CPU, then \
         after moving to another CPU; TLBI deltas from SYS_MM_STATS"
    );
    match sys::mm_stats() {
        Ok(_) => {}
        Err(Errno::ENOSYS) => {
            say!("  SYS_MM_STATS: ENOSYS (not this kernel): no TLBI counters, skipped");
            return c.done();
        }
        Err(e) => {
            check!(c, false, "SYS_MM_STATS failed: {e}");
            return c.done();
        }
    }
    let mask = match sys::sched_getaffinity() {
        Ok(m) => m,
        Err(e) => {
            check!(c, false, "sched_getaffinity failed: {e}");
            0
        }
    };
    let cpus = mask.count_ones();
    say!("  affinity mask {mask:#x} ({cpus} CPUs), running on CPU {}", Cpu(sys::getcpu()));

    // Phase 1: this process has only ever run on the CPU it started on (unless an earlier mode
    // created threads or moved it).
    if thread::MULTI_THREADED.load(Ordering::Relaxed) || thread::MOVED.load(Ordering::Relaxed) {
        say!("  phase 1 skipped: this process has already run threads or moved between CPUs");
    } else {
        match phase(ctx.page) {
            Ok((d, ops)) => {
                say!("  phase 1 (never left its first CPU): {ops} mm operations, TLBI {d}");
                ok!(
                    c,
                    d.broadcast_total() == 0,
                    "phase 1: no broadcast TLBI for an address space on one CPU"
                );
                ok!(c, d.local_total() > 0, "phase 1: local TLBIs issued ({})", d.local_total());
            }
            Err(why) => {
                check!(c, false, "phase 1: {why}");
            }
        }
    }

    // Phase 2: move to another CPU (pin to the first CPU, then to the second: whichever CPU it
    // started on, the thread has now run on at least two).
    if cpus < 2 {
        say!("  phase 2 skipped: one CPU online");
        return c.done();
    }
    let moved = thread::pin(mask, 0).and_then(|a| thread::pin(mask, 1).map(|b| (a, b)));
    match moved {
        Ok((a, b)) => {
            let now = Cpu(sys::getcpu());
            match phase(ctx.page) {
                Ok((d, ops)) => {
                    say!(
                        "  phase 2 (pinned to CPU {a}, then CPU {b}; on CPU {now}): {ops} mm operations, TLBI {d}"
                    );
                    ok!(
                        c,
                        d.broadcast_total() > 0,
                        "phase 2: broadcast TLBIs after the address space ran on two CPUs ({})",
                        d.broadcast_total()
                    );
                }
                Err(why) => {
                    check!(c, false, "phase 2: {why}");
                }
            }
        }
        Err(e) => {
            check!(c, false, "sched_setaffinity to move to another CPU failed: {e}");
        }
    }
    match fold_after_migration(ctx.page, mask) {
        Ok((d, folds)) => {
            say!(
                "  phase 3 (a fault on another CPU completes a 64 KiB run, {FOLD_TRIES} runs): {folds} folded, TLBI of \
                 those faults {d}"
            );
            if folds == 0 {
                say!("  phase 3: no run folded (its frames were never contiguous): nothing to check");
            } else {
                ok!(
                    c,
                    d.local_total() == 0 && d.broadcast_total() > 0,
                    "phase 3: every fold's flush is broadcast, not local ({d})"
                );
            }
        }
        Err(why) => {
            check!(c, false, "phase 3: {why}");
        }
    }
    if let Err(e) = sys::sched_setaffinity(mask) {
        check!(c, false, "sched_setaffinity({mask:#x}) to restore the affinity failed: {e}");
    }
    c.done()
}

/// Runs tried in phase 3: a fold needs the run's 16 frames to be physically contiguous and
/// 64 KiB aligned, which demand paging gives only when the allocator hands them out in order
/// from an aligned frame. A spacer page touched before each run shifts the alignment by one
/// frame, so with an allocator that hands out frames in order one run in 16 folds.
const FOLD_TRIES: u64 = 128;

/// Phase 3: for up to [`FOLD_TRIES`] 64 KiB-aligned runs, touches pages 0–14 on the first CPU of
/// `mask`, moves to the second and touches page 15. Returns the TLBI delta summed over the 16th
/// faults that folded their run, and how many did.
fn fold_after_migration(page: u64, mask: u64) -> Result<(Delta, u64), alloc::string::String> {
    let run = 16 * page;
    let len = (FOLD_TRIES + 1) * run;
    let base = sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0).map_err(|e| alloc::format!("mmap: {e}"))?;
    let first = base.next_multiple_of(run);
    // Page by page, for the whole process: a fault in fresh memory may otherwise map the whole
    // run at once (no fold, no flush at all), and the contiguous allocations of such faults
    // elsewhere change the order in which single frames come.
    sys::set_thp_disable(true).map_err(|e| alloc::format!("prctl(PR_SET_THP_DISABLE): {e}"))?;
    // SAFETY: advice on our own fresh mapping; it changes no contents.
    unsafe { sys::madvise(base, len, sys::MADV_NOHUGEPAGE) }.map_err(|e| alloc::format!("madvise: {e}"))?;
    let spacer_len = FOLD_TRIES * page;
    let spacer =
        sys::mmap_anon(0, spacer_len, PROT_READ | PROT_WRITE, 0).map_err(|e| alloc::format!("mmap: {e}"))?;
    let mut total = Delta::default();
    let mut folds = 0;
    for r in 0..FOLD_TRIES {
        let start = first + r * run;
        thread::pin(mask, 0).map_err(|e| alloc::format!("sched_setaffinity: {e}"))?;
        // SAFETY: inside the spacer mapping.
        unsafe { ((spacer + r * page) as *mut u64).write_volatile(r) };
        for p in 0..15 {
            // SAFETY: inside the fresh RW mapping.
            unsafe { ((start + p * page) as *mut u64).write_volatile(p) };
        }
        thread::pin(mask, 1).map_err(|e| alloc::format!("sched_setaffinity: {e}"))?;
        let before = sys::mm_stats().map_err(|e| alloc::format!("SYS_MM_STATS: {e}"))?;
        // SAFETY: inside the mapping.
        unsafe { ((start + 15 * page) as *mut u64).write_volatile(15) };
        let after = sys::mm_stats().map_err(|e| alloc::format!("SYS_MM_STATS: {e}"))?;
        if after.folds > before.folds {
            folds += after.folds - before.folds;
            let d = Delta::between(&before, &after);
            for i in 0..4 {
                total.broadcast[i] += d.broadcast[i];
                total.local[i] += d.local[i];
            }
        }
        for p in 0..16 {
            // SAFETY: inside the mapping.
            let v = unsafe { ((start + p * page) as *const u64).read_volatile() };
            if v != p {
                return Err(alloc::format!("page {p} of run {r} reads {v:#x}"));
            }
        }
    }
    // SAFETY: the mappings are ours and no longer used.
    unsafe { sys::munmap(base, len) }.map_err(|e| alloc::format!("munmap: {e}"))?;
    // SAFETY: as above.
    unsafe { sys::munmap(spacer, spacer_len) }.map_err(|e| alloc::format!("munmap: {e}"))?;
    sys::set_thp_disable(false).map_err(|e| alloc::format!("prctl(PR_SET_THP_DISABLE): {e}"))?;
    Ok((total, folds))
}
