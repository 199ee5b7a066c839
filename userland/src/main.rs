//! The user-space demo: a static arm64 program with no libc that speaks only the Linux syscall
//! ABI (`svc #0`), so the same binary runs on this kernel at EL0 and on arm64 Linux.
//!
//! It exercises the two placement policies this kernel adds (docs/mm.md §8) the way real
//! runtimes met the problems: a JIT's code chunks kept in one aligned window together with the
//! program's text even when the address space below the next 4 GiB boundary is taken (the Chez
//! Scheme `fill` scenario), near placement in one call instead of `MAP_FIXED_NOREPLACE` probing
//! (Node.js), and a call-heavy benchmark with hot indirect calls between generated chunks. Each
//! mode prints what it saw and counts failed invariants; the exit status is 0 only when none
//! failed, so the program is also a test. On Linux the extensions answer `-ENOSYS`: the program
//! then reports placement instead of checking it, and probes instead of asking.
//!
//! Threads (Linux semantics: clone, futex, affinity) are exercised by three more modes: `threads`
//! (concurrent map/protect/unmap in one address space, and a cross-CPU shootdown check from user
//! space), `tlbi-locality` (local TLBIs while the address space is on one CPU, broadcast once it
//! has moved; this kernel only) and `shootdown` (a benchmark, quick inside `all`).
//!
//! `limits` (not part of `all`) floods the kernel with threads and mappings, and asks for more
//! memory and address space than it may have, checking Linux's answers. `fuzz` (not part of
//! `all` either) makes random memory calls from several threads and checks every page it touches
//! (see `fuzz.rs`); `oom` touches memory until the kernel kills it (status 137).
//!
//! `ops` (not part of `all`) measures single system calls for scripts/bench's comparison with
//! Linux (see `ops.rs`); `events` (nor this) measures the event loop: epoll with idle
//! descriptors, what a blocked waiter pays for unrelated events, `membarrier` (see `events.rs`).
//!
//! Usage: `userland [all|code-region|near|bench|tlbi-locality|threads|shootdown|limits|fuzz|oom|ops|events]
//! [--full] [--threads=N] [--calls=N] [--seed=HEX]` (default `all`, quick scale).
#![no_std]
#![no_main]
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

extern crate alloc;

use ext_abi as abi;
mod bench;
mod code_region;
mod events;
mod fuzz;
mod jit;
mod layout;
mod limits;
mod near;
mod ops;
mod rt;
mod shootdown;
mod sys;
mod thread;
mod threads;
mod tlbi;

use core::sync::atomic::{AtomicU64, Ordering};

use sys::Errno;

/// What every mode needs to know.
pub struct Ctx {
    /// Page size (AT_PAGESZ).
    pub page: u64,
    /// `--full`: the larger counts.
    pub full: bool,
    /// Seed for the object sizes (getrandom, else AT_RANDOM, else fixed).
    pub seed: u64,
    /// True when the kernel implements the extensions (SYS_CODE_WINDOW answered).
    pub ext: bool,
    /// `--threads=N`: the thread count of the `threads` mode.
    pub threads: Option<u32>,
}

/// The page size (AT_PAGESZ), for code that has no [`Ctx`] at hand.
pub static PAGE: AtomicU64 = AtomicU64::new(4096);

const USAGE: &str = "usage: userland [all|code-region|near|bench|tlbi-locality|threads|shootdown|limits|fuzz|oom|ops|events] \
                     [--full] [--threads=N] [--calls=N] [--seed=HEX]";

/// Invariant bookkeeping for one mode.
pub struct Checks {
    pub(crate) mode: &'static str,
    pub(crate) passed: u32,
    pub(crate) failed: u32,
}

impl Checks {
    pub(crate) fn new(mode: &'static str) -> Self {
        Checks { mode, passed: 0, failed: 0 }
    }

    /// Records one invariant; prints it when it fails (and, quietly, counts it when it holds).
    pub fn check(&mut self, ok: bool, what: core::fmt::Arguments<'_>) -> bool {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            say!("  FAIL [{}] {}", self.mode, what);
        }
        ok
    }

    /// Records and prints an invariant that held.
    pub fn ok(&mut self, ok: bool, what: core::fmt::Arguments<'_>) -> bool {
        if ok {
            say!("  ok   {}", what);
        }
        self.check(ok, what)
    }

    pub(crate) fn done(&self) -> bool {
        say!("{}: {} invariants held, {} failed", self.mode, self.passed, self.failed);
        self.failed == 0
    }
}

/// `check!(checks, cond, "format", args…)`.
#[macro_export]
macro_rules! check {
    ($c:expr, $cond:expr, $($arg:tt)*) => { $c.check($cond, format_args!($($arg)*)) };
}

/// `ok!(checks, cond, "format", args…)`: like `check!` but prints the line when it holds too.
#[macro_export]
macro_rules! ok {
    ($c:expr, $cond:expr, $($arg:tt)*) => { $c.ok($cond, format_args!($($arg)*)) };
}

fn seed(start: &rt::Start) -> (u64, &'static str) {
    let mut b = [0u8; 8];
    if let Ok(8) = sys::getrandom(&mut b) {
        return (u64::from_le_bytes(b) | 1, "getrandom");
    }
    if let Some(r) = start.at_random {
        let mut w = [0u8; 8];
        w.copy_from_slice(&r[..8]);
        return (u64::from_le_bytes(w) | 1, "AT_RANDOM");
    }
    (0x9e37_79b9_7f4a_7c15, "fixed")
}

fn main(start: &rt::Start) -> u64 {
    let mut mode: &[u8] = b"all";
    let mut full = false;
    let mut threads = None;
    let mut seed_arg = None;
    for i in 1..start.argc {
        match start.arg(i) {
            Some(b"--full") => full = true,
            Some(b"--quick") => full = false,
            Some(a) if a.starts_with(b"--threads=") => {
                match core::str::from_utf8(&a[10..]).ok().and_then(|n| n.parse::<u32>().ok()) {
                    Some(n) if (2..=threads::MAX_THREADS as u32).contains(&n) => threads = Some(n),
                    _ => {
                        say!("{USAGE} (N from 2 to {})", threads::MAX_THREADS);
                        return 2;
                    }
                }
            }
            Some(a) if a.starts_with(b"--seed=") => {
                let hex = core::str::from_utf8(&a[7..]).ok().map(|h| h.trim_start_matches("0x"));
                match hex.and_then(|h| u64::from_str_radix(h, 16).ok()) {
                    Some(n) => seed_arg = Some(n),
                    None => {
                        say!("{USAGE}");
                        return 2;
                    }
                }
            }
            Some(a) if a.starts_with(b"--calls=") => {
                match core::str::from_utf8(&a[8..]).ok().and_then(|n| n.parse::<u64>().ok()) {
                    Some(n) => fuzz::CALLS_PER_WORKER.store(n, Ordering::Relaxed),
                    None => {
                        say!("{USAGE}");
                        return 2;
                    }
                }
            }
            Some(m) => mode = m,
            None => {}
        }
    }
    PAGE.store(start.page_size, Ordering::Relaxed);
    let t0 = rt::ticks();
    let ns0 = sys::monotonic_ns();
    let (seed, seed_src) = match seed_arg {
        Some(s) => (s, "--seed"),
        None => seed(start),
    };
    let (ts, te) = layout::text();
    let (iline, dline, idc, dic) = jit::cache_lines();
    let window = layout::window();
    let ext = match window {
        Ok(_) => true,
        Err(Errno::ENOSYS) => false,
        // Any other answer means the call exists (a bug to report, in code-region).
        Err(_) => true,
    };
    say!(
        "userland: argc {}, page {} (auxv: {} entries, HWCAP {:#x}, HWCAP2 {:#x}), text [{ts:#x}, {te:#x}), \
         counter {} Hz, CTR_EL0 I-line {iline} D-line {dline} IDC {} DIC {}, seed {seed:#x} ({seed_src}), scale {}",
        start.argc,
        start.page_size,
        start.auxv_entries,
        start.hwcap,
        start.hwcap2,
        rt::freq(),
        idc as u8,
        dic as u8,
        if full { "full" } else { "quick" }
    );
    match window {
        Ok(w) => say!(
            "userland: kernel extensions present: code window {:#x} + {} (used {}, placed outside {}, strict {})",
            w.base,
            layout::Size(w.size),
            layout::Size(w.used),
            w.placed_outside,
            w.strict
        ),
        Err(e) => say!(
            "userland: kernel extensions absent (SYS_CODE_WINDOW: {e}): Linux semantics, placement reported not enforced"
        ),
    }
    let ctx = Ctx { page: start.page_size, full, seed, ext, threads };

    let mut failed: alloc::vec::Vec<&str> = alloc::vec::Vec::new();
    let mut ran = 0;
    let all = mode == b"all";
    if all || mode == b"code-region" {
        ran += 1;
        if !code_region::run(&ctx) {
            failed.push("code-region");
        }
    }
    if all || mode == b"near" {
        ran += 1;
        if !near::run(&ctx) {
            failed.push("near");
        }
    }
    // Not part of `all`: a benchmark of single system calls for scripts/bench.
    if mode == b"ops" {
        ran += 1;
        if !ops::run(&ctx) {
            failed.push("ops");
        }
    }
    // Not part of `all`: a measurement of the event loop.
    if mode == b"events" {
        ran += 1;
        if !events::run(&ctx) {
            failed.push("events");
        }
    }
    if all || mode == b"bench" {
        ran += 1;
        if !bench::run(&ctx) {
            failed.push("bench");
        }
    }
    // Before anything creates a thread: the address space has been on one CPU only.
    if all || mode == b"tlbi-locality" {
        ran += 1;
        if !tlbi::run(&ctx) {
            failed.push("tlbi-locality");
        }
    }
    if all || mode == b"threads" {
        ran += 1;
        if !threads::run(&ctx) {
            failed.push("threads");
        }
    }
    if all || mode == b"shootdown" {
        ran += 1;
        if !shootdown::run(&ctx, all && !full) {
            failed.push("shootdown");
        }
    }
    // Not part of `all`: the suite runs it on its own (scripts/test), `scripts/fuzz` longer.
    if mode == b"fuzz" {
        ran += 1;
        if !fuzz::run(&ctx) {
            failed.push("fuzz");
        }
    }
    // Not part of `all`: the process ends killed by the out-of-memory path.
    if mode == b"oom" {
        ran += 1;
        if !limits::oom(&ctx) {
            failed.push("oom");
        }
    }
    // Not part of `all`: it floods the kernel (threads, mappings) until it says no.
    if mode == b"limits" {
        ran += 1;
        if !limits::run(&ctx) {
            failed.push("limits");
        }
    }
    if ran == 0 {
        say!("{USAGE}");
        return 2;
    }
    if let Ok(s) = sys::mm_stats() {
        say!(
            "userland: mm stats: page faults {}, promotions {}, demotions {}, TLBI broadcast range/page/asid/all \
             {}/{}/{}/{}, local {}/{}/{}/{}",
            s.page_faults,
            s.promotions,
            s.demotions,
            s.tlbi_range_broadcast,
            s.tlbi_page_broadcast,
            s.tlbi_asid_broadcast,
            s.tlbi_all_broadcast,
            s.tlbi_range_local,
            s.tlbi_page_local,
            s.tlbi_asid_local,
            s.tlbi_all_local
        );
    }
    let dt = rt::ticks() - t0;
    let wall = match (ns0, sys::monotonic_ns()) {
        (Ok(a), Ok(b)) => alloc::format!("{} ms (clock_gettime)", (b - a) / 1_000_000),
        (Err(e), _) | (_, Err(e)) => alloc::format!("n/a (clock_gettime: {e})"),
    };
    say!(
        "userland: {} system calls, {} ms (CNTVCT), {wall}",
        sys::count(),
        rt::ticks_to_centi_us(dt) / 100_000
    );
    if failed.is_empty() {
        if all {
            say!("userland: all modes passed");
        } else {
            say!("userland: {} passed", core::str::from_utf8(mode).unwrap_or("?"));
        }
        0
    } else {
        let mut s = alloc::string::String::new();
        for (i, f) in failed.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(f);
        }
        say!("userland: FAILED: {s}");
        1
    }
}
