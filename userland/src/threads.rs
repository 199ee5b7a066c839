//! `threads`: N threads (one per CPU of the affinity mask, at least 2; `--threads=N` overrides)
//! share one address space and change it concurrently, each pinned to one CPU.
//!
//! Phase 1, private churn: every thread loops over its own mappings: mmap, write a per-thread
//! pattern to every word, mprotect RW → R, check every word, mprotect R → RW, check again and
//! write one word per page, munmap a middle part (splitting the area), check the rest, map the
//! hole again with `MAP_FIXED_NOREPLACE` (if still free) and check it reads zero (a stale entry for
//! the unmapped page would show the old data), munmap everything. FP/SIMD registers are checked
//! across a `sched_yield` in each round (per-thread state).
//!
//! Phase 2, cross-CPU shootdown seen from user space: thread 0 owns a shared region S that the
//! other threads read (so their CPUs hold its translations). Each generation goes through steps
//! that thread 0 announces on a futex word and every reader acknowledges on another: CHECK (each
//! reader checks every word of S), READ (they read S in a loop while the writer flips its
//! protection R ↔ RW: reads must never fail; the writer waits until each has read after the last
//! flip), PARK (they stop touching S and say so). The writer then munmaps S, lets a "sponge"
//! mapping take the freed frames and fills them with a poison value, maps S again with `MAP_FIXED`,
//! fills it with the next generation's contents and announces CHECK. Every reader must then see
//! the new contents in every word of S: the old generation means its CPU kept a stale TLB entry
//! for the old frame (the munmap's invalidation did not reach it), the poison means the same with
//! the frame already reused.
//!
//! Threads are created with the `pthread_create` clone flags and joined through
//! `CLONE_CHILD_CLEARTID` + `FUTEX_WAIT`; each checks its TPIDR_EL0 (CLONE_SETTLS) and gettid. The
//! mode prints iterations, time and the kernel's TLBI counters (broadcast vs local deltas).

use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::rt::{self, Centi, ticks, ticks_to_centi_us};
use crate::sys::{self, Errno, MAP_FIXED_NOREPLACE, PROT_READ, PROT_WRITE};
use crate::thread::{self, Barrier};
use crate::tlbi::{Cpu, Delta};
use crate::{Checks, Ctx, check, ok, say};

/// At most this many threads.
pub const MAX_THREADS: usize = 16;
/// Pages of each private region.
const PRIVATE_PAGES: u64 = 16;
/// Pages of the shared region.
const SHARED_PAGES: u64 = 4;
/// `phase` value telling the readers to finish.
const DONE: u32 = u32::MAX;
/// Failures printed (the rest are counted).
const SHOWN: u32 = 12;

/// Word at byte offset `off` of thread `t`'s region in round `it`.
fn private_word(t: u32, it: u32, off: u64) -> u64 {
    0xa500_0000_0000_0000 | u64::from(t) << 48 | u64::from(it) << 32 | off
}

/// Word at byte offset `off` of the shared region in generation `g`.
fn shared_word(g: u32, off: u64) -> u64 {
    0x5e00_0000_0000_0000 | u64::from(g) << 24 | off
}

/// Word at byte offset `off` of the sponge (freed frames of S reused elsewhere).
fn poison_word(off: u64) -> u64 {
    0xdead_0000_0000_0000 | off
}

/// What a reader found instead of generation `g` at `off`.
fn classify(v: u64, g: u32, off: u64) -> &'static str {
    if g > 1 && v == shared_word(g - 1, off) {
        "the previous generation (stale TLB entry for the old frame on this CPU)"
    } else if v == poison_word(off) {
        "the poison of the sponge (stale TLB entry for the old frame, now reused)"
    } else if v == 0 {
        "zero (a fresh page the writer had not filled?)"
    } else {
        "an unexpected value"
    }
}

/// First word of `[base + from, base + to)` that differs from `expect(offset)`: (offset, value).
///
/// # Safety
/// The range must be mapped readable for the whole call.
unsafe fn verify(base: u64, from: u64, to: u64, expect: impl Fn(u64) -> u64) -> Option<(u64, u64)> {
    let mut off = from;
    while off < to {
        // SAFETY: the caller guarantees the range is readable.
        let v = unsafe { ((base + off) as *const u64).read_volatile() };
        if v != expect(off) {
            return Some((off, v));
        }
        off += 8;
    }
    None
}

/// Writes `value(offset)` to every word of `[base + from, base + to)`.
///
/// # Safety
/// The range must be mapped writable, and nothing else may rely on its contents.
unsafe fn fill(base: u64, from: u64, to: u64, value: impl Fn(u64) -> u64) {
    let mut off = from;
    while off < to {
        // SAFETY: the caller guarantees the range is writable and ours.
        unsafe { ((base + off) as *mut u64).write_volatile(value(off)) };
        off += 8;
    }
}

/// Everything the threads share.
struct Shared {
    n: u32,
    page: u64,
    iters: u32,
    gens: u32,
    flips: u32,
    /// Affinity mask to pin the threads in (0: do not pin).
    mask: u64,
    deadline: u64,
    /// The shared region S.
    s_base: u64,
    failed: AtomicU32,
    start: Barrier,
    middle: Barrier,
    /// Generation and step of phase 2 ([`phase_of`]), or [`DONE`]. Readers wait on it.
    phase: AtomicU32,
    /// Bumped (and woken) whenever a reader acknowledges a phase. The writer waits on it.
    progress: AtomicU32,
    /// Per reader: the phase it acknowledged last, and its reads of S in READ steps so far.
    ack: [AtomicU32; MAX_THREADS],
    reads: [AtomicU64; MAX_THREADS],
    /// Words of S that read wrong, and private-region words that read wrong.
    shared_bad: AtomicU32,
    private_bad: AtomicU32,
    /// Hole checks: re-mapped and read zero; found taken by another thread.
    holes_checked: AtomicU32,
    holes_taken: AtomicU32,
    /// Rounds (all threads) and FP/SIMD register halves that changed across a yield.
    rounds: AtomicU32,
    fp_bad: AtomicU32,
    /// CPUs the threads reported (`getcpu`), bit per CPU.
    cpus_seen: AtomicU64,
    /// Protection flips and remaps the writer did.
    flips_done: AtomicU32,
    remaps: AtomicU32,
    /// CNTVCT when thread 0 passed the start and middle barriers and when it finished phase 2.
    times: [AtomicU64; 3],
}

impl Shared {
    fn fail(&self, t: u32, what: fmt::Arguments<'_>) {
        let k = self.failed.fetch_add(1, Ordering::Relaxed);
        if k < SHOWN {
            say!("  FAIL [threads] thread {t}: {what}");
        } else if k == SHOWN {
            say!("  FAIL [threads] (further failures counted, not shown)");
        }
    }

    fn note_cpu(&self) {
        if let Ok(cpu) = sys::getcpu()
            && cpu < 64
        {
            self.cpus_seen.fetch_or(1 << cpu, Ordering::Relaxed);
        }
    }
}

/// One thread's argument (also its TLS pointer).
struct Worker {
    idx: u32,
    shared: *const Shared,
    /// What the thread saw: gettid(), TPIDR_EL0, the CPU it pinned itself to (u32::MAX: none).
    tid: AtomicU32,
    tpidr: AtomicU64,
    pinned: AtomicU32,
}

/// Reads TPIDR_EL0.
fn tpidr() -> u64 {
    let v: u64;
    // SAFETY: TPIDR_EL0 is readable (and writable) at EL0; reading it has no side effect.
    unsafe { core::arch::asm!("mrs {v}, tpidr_el0", v = out(reg) v, options(nomem, nostack)) };
    v
}

extern "C" fn worker_main(arg: u64) -> u64 {
    // SAFETY: `run` passes a pointer to a `Worker` in a vector it keeps (unchanged) until every
    // thread has been joined.
    let w = unsafe { &*(arg as *const Worker) };
    // SAFETY: as above, for the `Shared` the worker points to.
    let sh = unsafe { &*w.shared };
    w.tid.store(sys::gettid(), Ordering::Relaxed);
    w.tpidr.store(tpidr(), Ordering::Relaxed);
    if sh.mask != 0 {
        match thread::pin(sh.mask, w.idx as usize) {
            Ok(cpu) => w.pinned.store(cpu, Ordering::Relaxed),
            Err(e) => sh.fail(w.idx, format_args!("sched_setaffinity failed: {e}")),
        }
    }
    sh.note_cpu();
    if !sh.start.wait(sh.deadline) {
        sh.fail(w.idx, format_args!("timed out at the start barrier"));
        return 1;
    }
    if w.idx == 0 {
        sh.times[0].store(ticks(), Ordering::Relaxed);
    }
    for it in 0..sh.iters {
        if !churn(sh, w.idx, it) {
            break;
        }
    }
    sh.note_cpu();
    if !sh.middle.wait(sh.deadline) {
        sh.fail(w.idx, format_args!("timed out at the barrier between the phases"));
        // The writer must still release the readers; readers give up by the deadline.
    }
    if w.idx == 0 {
        sh.times[1].store(ticks(), Ordering::Relaxed);
        writer(sh);
        sh.times[2].store(ticks(), Ordering::Relaxed);
    } else {
        reader(sh, w.idx);
    }
    0
}

/// One round of phase 1 for thread `t`; false if the thread should stop (mapping failed).
fn churn(sh: &Shared, t: u32, it: u32) -> bool {
    let (page, len) = (sh.page, PRIVATE_PAGES * sh.page);
    let base = match sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0) {
        Ok(b) => b,
        Err(e) => {
            sh.fail(t, format_args!("round {it}: mmap of {len} bytes failed: {e}"));
            return false;
        }
    };
    let pattern = |off: u64| private_word(t, it, off);
    let marked = |off: u64| {
        if off.is_multiple_of(page) { !private_word(t, it, off) } else { private_word(t, it, off) }
    };
    let bad = |what: &str, found: Option<(u64, u64)>, expect: &dyn Fn(u64) -> u64| {
        if let Some((off, v)) = found {
            sh.private_bad.fetch_add(1, Ordering::Relaxed);
            sh.fail(
                t,
                format_args!(
                    "round {it}: {what}: +{off:#x} of {base:#x} reads {v:#x}, expected {:#x}",
                    expect(off)
                ),
            );
        }
    };
    // SAFETY: `[base, base + len)` is this thread's fresh RW mapping; no other thread knows its
    // address. (Below, every access follows the protection set just before it.)
    unsafe { fill(base, 0, len, pattern) };
    // SAFETY: our mapping; nothing writes it while it is read-only.
    if let Err(e) = unsafe { sys::mprotect(base, len, PROT_READ) } {
        sh.fail(t, format_args!("round {it}: mprotect(R) failed: {e}"));
    }
    // SAFETY: readable.
    bad("after mprotect(R)", unsafe { verify(base, 0, len, pattern) }, &pattern);
    // SAFETY: our mapping.
    if let Err(e) = unsafe { sys::mprotect(base, len, PROT_READ | PROT_WRITE) } {
        sh.fail(t, format_args!("round {it}: mprotect(RW) failed: {e}"));
    }
    // SAFETY: readable.
    bad("after mprotect(RW)", unsafe { verify(base, 0, len, pattern) }, &pattern);
    let mut off = 0;
    while off < len {
        // SAFETY: writable again; one word per page.
        unsafe { ((base + off) as *mut u64).write_volatile(!pattern(off)) };
        off += page;
    }
    // Unmap the second quarter (splits the area), check the rest.
    let q = PRIVATE_PAGES / 4 * page;
    let hole = base + q;
    // SAFETY: our mapping; nothing reads the quarter after this.
    if let Err(e) = unsafe { sys::munmap(hole, q) } {
        sh.fail(t, format_args!("round {it}: munmap of the second quarter failed: {e}"));
        return false;
    }
    // SAFETY: the first quarter and the second half are still mapped readable.
    bad("first quarter after munmap", unsafe { verify(base, 0, q, marked) }, &marked);
    // SAFETY: as above.
    bad("second half after munmap", unsafe { verify(base, 2 * q, len, marked) }, &marked);
    // The hole again, if no other thread took it: it must read zero.
    match sys::mmap_anon(hole, q, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE) {
        Ok(a) if a == hole => {
            sh.holes_checked.fetch_add(1, Ordering::Relaxed);
            // SAFETY: freshly mapped readable at `hole`.
            bad("hole re-mapped (must read zero)", unsafe { verify(hole, 0, q, |_| 0) }, &|_| 0);
            // SAFETY: our mapping, no longer used.
            let _ = unsafe { sys::munmap(hole, q) };
        }
        Ok(a) => {
            // Placed elsewhere: the flag was taken as a hint (qemu-user) because the hole is taken.
            sh.holes_taken.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the fresh mapping just made, unused.
            let _ = unsafe { sys::munmap(a, q) };
        }
        Err(Errno::EEXIST) => {
            sh.holes_taken.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => sh.fail(t, format_args!("round {it}: MAP_FIXED_NOREPLACE in the hole failed: {e}")),
    }
    // SAFETY: the rest of our mapping, no longer used.
    let r1 = unsafe { sys::munmap(base, q) };
    // SAFETY: as above.
    let r2 = unsafe { sys::munmap(base + 2 * q, len - 2 * q) };
    if let Err(e) = r1.and(r2) {
        sh.fail(t, format_args!("round {it}: munmap of the rest failed: {e}"));
    }
    let changed = thread::fp_regs_survive(private_word(t, it, 0x77), 1);
    if changed != 0 {
        sh.fp_bad.fetch_add(changed, Ordering::Relaxed);
        sh.fail(t, format_args!("round {it}: {changed} FP/SIMD register halves changed across sched_yield"));
    }
    sh.rounds.fetch_add(1, Ordering::Relaxed);
    true
}

/// Waits until `cond()` holds, yielding the CPU between polls; false at the deadline.
fn poll_until(deadline: u64, mut cond: impl FnMut() -> bool) -> bool {
    loop {
        if cond() {
            return true;
        }
        if ticks() > deadline {
            return false;
        }
        sys::sched_yield();
    }
}

/// `phase` value: generation `g`, step `step` (see [`Step`]).
const fn phase_of(g: u32, step: u32) -> u32 {
    4 * g + step
}

/// The steps of one generation (the low two bits of `phase`).
struct Step;
impl Step {
    /// S holds generation g: every reader checks every word once, acknowledges, waits.
    const CHECK: u32 = 0;
    /// Readers acknowledge and read S in a loop while the writer flips its protection.
    const READ: u32 = 1;
    /// Readers stop touching S, acknowledge and wait: the writer remaps it.
    const PARK: u32 = 2;
}

impl Shared {
    /// Sets `phase` and wakes every thread waiting for it to change.
    fn announce(&self, phase: u32) {
        self.phase.store(phase, Ordering::Release);
        let _ = sys::futex_wake(&self.phase, u32::MAX >> 1);
    }

    /// Waits until every reader has acknowledged `phase`.
    fn all_acked(&self, phase: u32) -> bool {
        thread::wait_until(&self.progress, self.deadline, || {
            (1..self.n as usize).all(|r| self.ack[r].load(Ordering::Acquire) == phase)
        })
    }

    /// Reader `r` acknowledges `phase`.
    fn acknowledge(&self, r: u32, phase: u32) {
        self.ack[r as usize].store(phase, Ordering::Release);
        self.progress.fetch_add(1, Ordering::Release);
        let _ = sys::futex_wake(&self.progress, 1);
    }
}

/// Thread 0 in phase 2.
fn writer(sh: &Shared) {
    let len = SHARED_PAGES * sh.page;
    let s = sh.s_base;
    let mut sponge: Option<u64> = None;
    'gens: for g in 1..=sh.gens {
        // Every reader has read generation g in full.
        if !sh.all_acked(phase_of(g, Step::CHECK)) {
            sh.fail(0, format_args!("generation {g}: the readers did not all check it in time"));
            break;
        }
        // The previous sponge (kept while they checked) may go.
        if let Some(sp) = sponge.take() {
            // SAFETY: only this thread used the sponge.
            let _ = unsafe { sys::munmap(sp, len) };
        }
        // Protection flips while they read: reads must never fail or see other data.
        sh.announce(phase_of(g, Step::READ));
        if !sh.all_acked(phase_of(g, Step::READ)) {
            sh.fail(0, format_args!("generation {g}: the readers did not start reading in time"));
            break;
        }
        let reads0: Vec<u64> = (0..sh.n as usize).map(|r| sh.reads[r].load(Ordering::Relaxed)).collect();
        for _ in 0..sh.flips {
            // SAFETY: S stays readable; nobody writes it during phase 2 except this thread below.
            let r = unsafe { sys::mprotect(s, len, PROT_READ) }
                // SAFETY: as above.
                .and_then(|_| unsafe { sys::mprotect(s, len, PROT_READ | PROT_WRITE) });
            if let Err(e) = r {
                sh.fail(0, format_args!("generation {g}: mprotect of S failed: {e}"));
                break 'gens;
            }
            sh.flips_done.fetch_add(1, Ordering::Relaxed);
        }
        // Each reader reads S again after the last flip, so its CPU holds S's translations.
        let read_more = poll_until(sh.deadline, || {
            (1..sh.n as usize).all(|r| sh.reads[r].load(Ordering::Relaxed) > reads0[r])
        });
        if !read_more {
            sh.fail(0, format_args!("generation {g}: the readers stopped reading"));
            break;
        }
        // Ask them to stop touching S; wait until all have.
        sh.announce(phase_of(g, Step::PARK));
        if !sh.all_acked(phase_of(g, Step::PARK)) {
            sh.fail(0, format_args!("generation {g}: the readers did not stop reading S in time"));
            break;
        }
        // Remap: munmap, let a sponge take the freed frames (poisoned), map S again, fill it. The
        // sponge is mapped before S goes (so it cannot land at S's address) and touched after (so
        // its pages get the frames just freed, when the allocator hands them out again).
        let new_sponge = sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0);
        // SAFETY: every reader has parked (it reads S again only after the announcement below).
        if let Err(e) = unsafe { sys::munmap(s, len) } {
            sh.fail(0, format_args!("generation {g}: munmap of S failed: {e}"));
            break;
        }
        match new_sponge {
            Ok(sp) => {
                // SAFETY: a fresh mapping only this thread knows.
                unsafe { fill(sp, 0, len, poison_word) };
                sponge = Some(sp);
            }
            Err(e) => sh.fail(0, format_args!("generation {g}: mmap of the sponge failed: {e}")),
        }
        // SAFETY: S was just unmapped and no other thread maps memory during phase 2, so the
        // range is free (MAP_FIXED only re-creates it).
        match unsafe { sys::mmap_fixed(s, len, PROT_READ | PROT_WRITE) } {
            Ok(a) if a == s => {}
            r => {
                sh.fail(0, format_args!("generation {g}: mmap(MAP_FIXED) of S at {s:#x} returned {r:?}"));
                break;
            }
        }
        // SAFETY: S is mapped RW again and the readers are parked.
        unsafe { fill(s, 0, len, |off| shared_word(g + 1, off)) };
        sh.remaps.fetch_add(1, Ordering::Relaxed);
        sh.announce(phase_of(g + 1, Step::CHECK));
    }
    let last = sh.phase.load(Ordering::Acquire);
    if last % 4 == Step::CHECK && !sh.all_acked(last) {
        sh.fail(0, format_args!("the readers did not check the last generation in time"));
    }
    sh.announce(DONE);
    if let Some(sp) = sponge {
        // SAFETY: only this thread used the sponge.
        let _ = unsafe { sys::munmap(sp, len) };
    }
}

/// Threads 1.. in phase 2.
fn reader(sh: &Shared, r: u32) {
    let len = SHARED_PAGES * sh.page;
    let s = sh.s_base;
    let mut checked_gen = 0;
    let mut k = 0u64;
    loop {
        let phase = sh.phase.load(Ordering::Acquire);
        if phase == DONE {
            break;
        }
        let g = phase / 4;
        match phase % 4 {
            Step::CHECK => {
                if g != checked_gen {
                    checked_gen = g;
                    // Every word of S.
                    let mut off = 0;
                    let mut wrong = 0;
                    while off < len {
                        // SAFETY: S is mapped readable in this step (the writer unmaps it only
                        // after every reader has acknowledged the PARK step).
                        let v = unsafe { ((s + off) as *const u64).read_volatile() };
                        if v != shared_word(g, off) {
                            if wrong == 0 {
                                sh.fail(
                                    r,
                                    format_args!(
                                        "generation {g}: S+{off:#x} reads {v:#x}, expected {:#x}: {}",
                                        shared_word(g, off),
                                        classify(v, g, off)
                                    ),
                                );
                            }
                            wrong += 1;
                        }
                        off += 8;
                    }
                    sh.shared_bad.fetch_add(wrong, Ordering::Relaxed);
                }
                sh.acknowledge(r, phase);
            }
            Step::READ => {
                sh.acknowledge(r, phase);
                // Read one word at a time, a different page each time, until the step ends.
                while sh.phase.load(Ordering::Acquire) == phase {
                    let off = (k % SHARED_PAGES) * sh.page + (k.wrapping_mul(8) % sh.page);
                    k += 1;
                    // SAFETY: as above (S is mapped readable in this step too).
                    let v = unsafe { ((s + off) as *const u64).read_volatile() };
                    if v != shared_word(g, off) {
                        sh.shared_bad.fetch_add(1, Ordering::Relaxed);
                        sh.fail(
                            r,
                            format_args!(
                                "generation {g} (during protection flips): S+{off:#x} reads {v:#x}: {}",
                                classify(v, g, off)
                            ),
                        );
                    }
                    sh.reads[r as usize].fetch_add(1, Ordering::Relaxed);
                    if k.is_multiple_of(256) {
                        // Let a thread that shares this CPU (more threads than CPUs) run.
                        sys::sched_yield();
                        if ticks() > sh.deadline {
                            sh.fail(r, format_args!("generation {g}: the READ step did not end in time"));
                            return;
                        }
                    }
                }
                continue;
            }
            _ => sh.acknowledge(r, phase),
        }
        // Wait for the next step.
        if !thread::wait_until(&sh.phase, sh.deadline, || sh.phase.load(Ordering::Acquire) != phase) {
            sh.fail(r, format_args!("timed out waiting for the step after phase {phase:#x}"));
            break;
        }
    }
    sh.note_cpu();
}

/// The thread count to use: `--threads=N`, else the CPUs of the affinity mask (at least 2), else 4.
pub fn thread_count(ctx: &Ctx, mask: Option<u64>) -> u32 {
    let default = match mask {
        Some(m) if m.count_ones() >= 2 => m.count_ones(),
        Some(_) => 2,
        None => 4,
    };
    ctx.threads.unwrap_or(default).clamp(2, MAX_THREADS as u32)
}

/// The `threads` mode.
pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("threads");
    let page = ctx.page;
    let mask = sys::sched_getaffinity();
    let n = thread_count(ctx, mask.ok());
    let (iters, gens, flips) = if ctx.full { (200, 200, 4) } else { (12, 8, 2) };
    say!(
        "== threads: {n} threads, one address space: {iters} rounds each of mmap/fill/mprotect/check/partial \
         munmap ({PRIVATE_PAGES} pages), then {gens} generations of a shared {SHARED_PAGES}-page region \
         remapped by thread 0 while {} threads read it",
        n - 1
    );
    let mask = match mask {
        Ok(m) => {
            say!("  affinity mask {m:#x} ({} CPUs); threads pinned round-robin", m.count_ones());
            m
        }
        Err(e) => {
            check!(c, false, "sched_getaffinity failed: {e}");
            0
        }
    };

    let len = SHARED_PAGES * page;
    let s_base = match sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0) {
        Ok(b) => b,
        Err(e) => {
            check!(c, false, "cannot map the shared region: {e}");
            return c.done();
        }
    };
    // SAFETY: the fresh shared region; no thread exists yet.
    unsafe { fill(s_base, 0, len, |off| shared_word(1, off)) };

    let shared = alloc::boxed::Box::new(Shared {
        n,
        page,
        iters,
        gens,
        flips,
        mask,
        deadline: thread::deadline_in(if ctx.full { 600 } else { 60 }),
        s_base,
        failed: AtomicU32::new(0),
        start: Barrier::new(n),
        middle: Barrier::new(n),
        phase: AtomicU32::new(phase_of(1, Step::CHECK)),
        progress: AtomicU32::new(0),
        ack: [const { AtomicU32::new(0) }; MAX_THREADS],
        reads: [const { AtomicU64::new(0) }; MAX_THREADS],
        shared_bad: AtomicU32::new(0),
        private_bad: AtomicU32::new(0),
        holes_checked: AtomicU32::new(0),
        holes_taken: AtomicU32::new(0),
        rounds: AtomicU32::new(0),
        fp_bad: AtomicU32::new(0),
        cpus_seen: AtomicU64::new(0),
        flips_done: AtomicU32::new(0),
        remaps: AtomicU32::new(0),
        times: [const { AtomicU64::new(0) }; 3],
    });
    let workers: Vec<Worker> = (0..n)
        .map(|idx| Worker {
            idx,
            shared: &*shared,
            tid: AtomicU32::new(0),
            tpidr: AtomicU64::new(0),
            pinned: AtomicU32::new(u32::MAX),
        })
        .collect();

    let stats0 = sys::mm_stats();
    let timeouts0 = thread::WAIT_TIMEOUTS.load(Ordering::Relaxed);
    let t0 = ticks();
    let mut handles = Vec::new();
    for w in &workers {
        let arg = w as *const Worker as u64;
        match thread::spawn(worker_main, arg, arg) {
            Ok(h) => handles.push(h),
            Err(e) => {
                check!(c, false, "clone of thread {} failed: {e}", w.idx);
                // The others wait at the start barrier until the deadline, then give up.
                break;
            }
        }
    }
    let spawned = handles.len();
    let tids: Vec<u32> = handles.iter().map(|h| h.tid).collect();
    let words_ok = handles.iter().all(|h| h.tid_word() == h.tid || h.tid_word() == 0);
    let join_deadline = shared.deadline + 5 * rt::freq();
    for h in handles {
        let tid = h.tid;
        if h.join(join_deadline).is_err() {
            check!(
                c,
                false,
                "thread {tid} did not exit in time (its CLONE_CHILD_CLEARTID word is still set)"
            );
            // Returning would let the vector the threads use go away while they run.
            say!("userland: FAILED: threads (hung; ending the process)");
            rt::flush();
            sys::exit(1);
        }
    }
    let dt = ticks() - t0;
    let stats1 = sys::mm_stats();
    ok!(c, spawned == n as usize, "{spawned} threads created with clone flags {:#x}", thread::THREAD_FLAGS);
    check!(c, words_ok, "CLONE_PARENT_SETTID wrote the tids");
    ok!(c, true, "all {spawned} threads joined (CLONE_CHILD_CLEARTID word cleared and woken)");
    let mut id_ok = true;
    for (w, &tid) in workers.iter().zip(&tids) {
        let seen = w.tid.load(Ordering::Relaxed);
        let tp = w.tpidr.load(Ordering::Relaxed);
        id_ok &= check!(c, seen == tid, "thread {}: gettid() = {seen}, clone returned {tid}", w.idx);
        id_ok &= check!(
            c,
            tp == w as *const Worker as u64,
            "thread {}: TPIDR_EL0 = {tp:#x}, CLONE_SETTLS gave {:#x}",
            w.idx,
            w as *const Worker as u64
        );
    }
    if id_ok {
        say!("  ok   every thread saw its own tid (gettid) and TLS pointer (TPIDR_EL0)");
    }
    let pins: Vec<u32> = workers.iter().map(|w| w.pinned.load(Ordering::Relaxed)).collect();
    let seen = shared.cpus_seen.load(Ordering::Relaxed);
    say!(
        "  pinned to CPUs {:?}; CPUs reported by getcpu: {}",
        pins,
        if seen == 0 { alloc::string::String::from("n/a") } else { alloc::format!("{seen:#x}") }
    );
    let rounds = shared.rounds.load(Ordering::Relaxed);
    let holes = shared.holes_checked.load(Ordering::Relaxed);
    let taken = shared.holes_taken.load(Ordering::Relaxed);
    ok!(
        c,
        rounds == n * iters && shared.private_bad.load(Ordering::Relaxed) == 0,
        "phase 1: {rounds} rounds ({n} x {iters}) of private map/protect/unmap, every word read back right"
    );
    ok!(
        c,
        holes > 0 || taken > 0,
        "phase 1: {holes} re-mapped holes read zero ({taken} holes were taken by another thread meanwhile)"
    );
    ok!(
        c,
        shared.fp_bad.load(Ordering::Relaxed) == 0,
        "FP/SIMD registers per thread: unchanged across {rounds} yields"
    );
    let remaps = shared.remaps.load(Ordering::Relaxed);
    let flipped = shared.flips_done.load(Ordering::Relaxed);
    let reads: u64 = shared.reads.iter().map(|r| r.load(Ordering::Relaxed)).sum();
    ok!(
        c,
        remaps == gens && shared.shared_bad.load(Ordering::Relaxed) == 0,
        "phase 2: {remaps} remaps (munmap + mmap MAP_FIXED) of S, {flipped} R/RW flip pairs under {reads} reads \
         by {} threads: every reader saw every new generation (no stale TLB entry)",
        n - 1
    );
    let failed = shared.failed.load(Ordering::Relaxed);
    check!(c, failed == 0, "{failed} failures inside the threads (shown above)");
    let [ta, tb, tc] = shared.times.each_ref().map(|t| t.load(Ordering::Relaxed));
    let us = |t: u64| ticks_to_centi_us(t);
    say!(
        "  time: {} ms in all (create to join); phase 1 {} ms ({} us per round per thread), phase 2 {} ms ({} us \
         per generation)",
        Centi(us(dt) / 1000),
        Centi(us(tb.wrapping_sub(ta)) / 1000),
        Centi(us(tb.wrapping_sub(ta)) / u64::from(iters.max(1))),
        Centi(us(tc.wrapping_sub(tb)) / 1000),
        Centi(us(tc.wrapping_sub(tb)) / u64::from(gens.max(1)))
    );
    match (stats0, stats1) {
        (Ok(a), Ok(b)) => {
            let d = Delta::between(&a, &b);
            say!("  TLBI during the threads: {d}");
            if ctx.ext && mask.count_ones() >= 2 {
                ok!(
                    c,
                    d.broadcast_total() > 0,
                    "the address space on several CPUs got broadcast TLBIs ({})",
                    d.broadcast_total()
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => say!("  TLBI counters: n/a (SYS_MM_STATS: {e})"),
    }
    say!(
        "  futex waits that took their whole 50 ms timeout (the loops then re-check): {}",
        thread::WAIT_TIMEOUTS.load(Ordering::Relaxed) - timeouts0
    );
    say!("  main thread now on CPU {}", Cpu(sys::getcpu()));
    // SAFETY: every thread has exited; the shared region is no longer used.
    let _ = unsafe { sys::munmap(s_base, len) };
    drop(workers);
    drop(shared);
    c.done()
}
