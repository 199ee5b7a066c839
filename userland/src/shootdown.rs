//! `shootdown`: what TLB shootdowns cost, for 1, 2 and 4 threads (informative). The main thread,
//! pinned to the first CPU, repeatedly changes a shared 16-page region: mprotect R, mprotect RW,
//! then replaces it (`mmap MAP_FIXED` over it: an unmap and a map in one call, so the readers never
//! find a hole) and writes each page again, while T-1 helper threads pinned to the other CPUs read
//! one word of every page in a loop (so their CPUs hold its translations). Guest time per operation
//! and the TLBI counters (broadcast vs local) are printed side by side. `--full` does more rounds;
//! inside `all` it is short.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::rt::{Centi, ticks, ticks_to_centi_us};
use crate::sys::{self, PROT_READ, PROT_WRITE};
use crate::thread;
use crate::tlbi::Delta;
use crate::{Checks, Ctx, check, say};

/// Pages of the region.
const PAGES: u64 = 16;

struct Region {
    base: u64,
    page: u64,
    mask: u64,
    stop: AtomicU32,
    started: AtomicU32,
    reads: AtomicU64,
}

extern "C" fn toucher(arg: u64) -> u64 {
    // SAFETY: `arg` points to (the region, this helper's index), kept alive by `run_one` until
    // every helper has been joined.
    let &(region, idx) = unsafe { &*(arg as *const (*const Region, usize)) };
    // SAFETY: as above.
    let r = unsafe { &*region };
    if r.mask != 0 {
        let _ = thread::pin(r.mask, idx);
    }
    r.started.fetch_add(1, Ordering::Release);
    let _ = sys::futex_wake(&r.started, 1);
    let mut n = 0u64;
    while r.stop.load(Ordering::Acquire) == 0 {
        for p in 0..PAGES {
            // SAFETY: the region stays mapped readable until `stop` is set: the main thread only
            // changes its protection between R and RW and replaces it atomically (MAP_FIXED).
            let _ = unsafe { ((r.base + p * r.page) as *const u64).read_volatile() };
        }
        n += 1;
        if n.is_multiple_of(256) {
            // Let a thread that shares this CPU (more threads than CPUs) run.
            sys::sched_yield();
        }
    }
    r.reads.fetch_add(n, Ordering::Relaxed);
    0
}

struct Row {
    threads: usize,
    protect: u64,
    remap: u64,
    delta: Option<Delta>,
    reads: u64,
}

fn run_one(c: &mut Checks, page: u64, mask: u64, threads: usize, rounds: u32) -> Option<Row> {
    let len = PAGES * page;
    let base = match sys::mmap_anon(0, len, PROT_READ | PROT_WRITE, 0) {
        Ok(b) => b,
        Err(e) => {
            check!(c, false, "mmap of the region failed: {e}");
            return None;
        }
    };
    let touch = |base: u64| {
        for p in 0..PAGES {
            // SAFETY: the region is mapped RW whenever the main thread calls this.
            unsafe { ((base + p * page) as *mut u64).write_volatile(p) };
        }
    };
    touch(base);
    let region = Region {
        base,
        page,
        mask,
        stop: AtomicU32::new(0),
        started: AtomicU32::new(0),
        reads: AtomicU64::new(0),
    };
    let args: Vec<(*const Region, usize)> = (1..threads).map(|i| (&region as *const Region, i)).collect();
    let mut helpers = Vec::new();
    for a in &args {
        let arg = a as *const (*const Region, usize) as u64;
        match thread::spawn(toucher, arg, 0) {
            Ok(h) => helpers.push(h),
            Err(e) => {
                check!(c, false, "clone failed: {e}");
                break;
            }
        }
    }
    let deadline = thread::deadline_in(30);
    let helpers_n = helpers.len() as u32;
    if !thread::wait_until(&region.started, deadline, || region.started.load(Ordering::Acquire) == helpers_n)
    {
        check!(c, false, "the helper threads did not start in time");
    }
    let s0 = sys::mm_stats();
    let (mut protect, mut remap) = (0u64, 0u64);
    let mut failed = None;
    for _ in 0..rounds {
        let t0 = ticks();
        // SAFETY: the region is ours; the helpers only read it, which R and RW both allow.
        let r1 = unsafe { sys::mprotect(base, len, PROT_READ) };
        // SAFETY: as above.
        let r2 = unsafe { sys::mprotect(base, len, PROT_READ | PROT_WRITE) };
        let t1 = ticks();
        // SAFETY: replaces our own region with fresh pages; the helpers only read it (zero or
        // data, both fine) and keep no reference to its contents.
        let r3 = unsafe { sys::mmap_fixed(base, len, PROT_READ | PROT_WRITE) };
        let t2 = ticks();
        protect += t1 - t0;
        remap += t2 - t1;
        if let Err(e) = r1.and(r2).and(r3) {
            failed = Some(e);
            break;
        }
        touch(base);
    }
    let s1 = sys::mm_stats();
    region.stop.store(1, Ordering::Release);
    for h in helpers {
        if h.join(thread::deadline_in(30)).is_err() {
            say!("userland: FAILED: shootdown (a helper thread did not exit; ending the process)");
            crate::rt::flush();
            sys::exit(1);
        }
    }
    // SAFETY: every helper has exited; the region is no longer used.
    let _ = unsafe { sys::munmap(base, len) };
    if let Some(e) = failed {
        check!(c, false, "{threads} threads: mprotect/mmap(MAP_FIXED) failed: {e}");
        return None;
    }
    let delta = match (s0, s1) {
        (Ok(a), Ok(b)) => Some(Delta::between(&a, &b)),
        _ => None,
    };
    let per = |t: u64, n: u32| ticks_to_centi_us(t) / u64::from(n.max(1));
    Some(Row {
        threads,
        protect: per(protect, 2 * rounds),
        remap: per(remap, rounds),
        delta,
        reads: region.reads.load(Ordering::Relaxed),
    })
}

/// The `shootdown` mode; `quick` inside `all`.
pub fn run(ctx: &Ctx, quick: bool) -> bool {
    let mut c = Checks::new("shootdown");
    let rounds = if quick {
        10
    } else if ctx.full {
        1000
    } else {
        100
    };
    let mask = sys::sched_getaffinity().unwrap_or(0);
    say!(
        "== shootdown: main thread pinned to the first CPU changes a {PAGES}-page region {rounds} times \
         (mprotect R, mprotect RW, mmap MAP_FIXED over it, rewrite) while T-1 threads on the other CPUs read it; \
         {} CPUs",
        mask.count_ones()
    );
    let original = mask;
    if mask != 0
        && let Err(e) = thread::pin(mask, 0)
    {
        check!(c, false, "sched_setaffinity failed: {e}");
    }
    let mut rows = Vec::new();
    for threads in [1, 2, 4] {
        if let Some(row) = run_one(&mut c, ctx.page, mask, threads, rounds) {
            rows.push(row);
        }
    }
    if original != 0
        && let Err(e) = sys::sched_setaffinity(original)
    {
        check!(c, false, "sched_setaffinity({original:#x}) failed: {e}");
    }
    say!("  threads   mprotect us/op   remap us/op   helper reads   TLBI broadcast   TLBI local");
    for r in &rows {
        let (b, l) = match r.delta {
            Some(d) => (alloc::format!("{}", d.broadcast_total()), alloc::format!("{}", d.local_total())),
            None => (alloc::string::String::from("n/a"), alloc::string::String::from("n/a")),
        };
        say!(
            "  {:>7}   {:>14}   {:>11}   {:>12}   {:>14}   {:>10}",
            r.threads,
            alloc::format!("{}", Centi(r.protect)),
            alloc::format!("{}", Centi(r.remap)),
            r.reads,
            b,
            l
        );
    }
    if mask.count_ones() < 4 {
        say!("  ({} CPUs: with more threads than CPUs some share one)", mask.count_ones());
    }
    say!("  (guest time under emulation: informative only)");
    c.done()
}
