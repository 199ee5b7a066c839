//! `ops`: the cost of single memory-management system calls, measured the same way on this
//! kernel and on Linux so that scripts/bench can print them side by side.
//!
//! Each operation runs `n` times between two readings of the generic counter (CNTVCT_EL0) and of
//! an instructions-retired counter read in the program itself: on Linux a `perf_event_open`
//! counter of `PERF_COUNT_HW_INSTRUCTIONS` with the kernel included (allowed to root, so the
//! program runs as Linux's init), on this kernel PMU event counter 0, which the kernel programs
//! to INST_RETIRED and opens to EL0 reads (kernel `arch::pmu`). Both count user and kernel
//! instructions, so a system call's figure is the whole round trip. The same loop with no
//! operation is measured first and subtracted. TLBIs (SYS_MM_STATS) exist only on this kernel;
//! page faults come from SYS_MM_STATS here and `getrusage` on Linux.
//!
//! QEMU's TCG implements INST_RETIRED only with `-icount shift=N`; without it the counters read
//! 0 (or cannot be opened) and the figure is printed as `-`. Under `-icount` the generic counter
//! is derived from the instruction count, so scripts/bench takes times from runs without it.
//!
//! Output, one line per operation: `ops: KEY ns=… insns=… tlbi=… faults=… n=…` (per operation,
//! `-` when not measurable), then `ops: done`.

use alloc::vec::Vec;
use core::arch::asm;

use crate::rt::{freq, ticks};
use crate::sys::{self, Errno, PROT_READ, PROT_WRITE};
use crate::{Checks, Ctx, check, say};

const PAGE: u64 = 4096;

/// Where instruction counts come from.
enum Insns {
    /// A `perf_event_open` file descriptor (Linux).
    Perf(u64),
    /// PMEVCNTR0_EL0, readable at EL0 (this kernel).
    Pmu,
    /// Not measurable here.
    None,
}

impl Insns {
    fn open(ext: bool) -> Self {
        // struct perf_event_attr (PERF_ATTR_SIZE_VER7, 128 bytes): type PERF_TYPE_HARDWARE (0),
        // size, config PERF_COUNT_HW_INSTRUCTIONS (1); every flag 0: enabled, kernel and user.
        let mut attr = [0u64; 16];
        attr[0] = 128 << 32;
        attr[1] = 1;
        // SAFETY: perf_event_open(attr, pid 0, cpu -1, group -1, flags 0) reads the 128-byte attr.
        match unsafe {
            sys::syscall6(sys::nr::PERF_EVENT_OPEN, [attr.as_ptr() as u64, 0, u64::MAX, u64::MAX, 0, 0])
        } {
            Ok(fd) => return Insns::Perf(fd),
            Err(e) => say!("ops: perf_event_open: {e}"),
        }
        if !ext {
            return Insns::None;
        }
        // This kernel opened the counter to EL0; it reads 0 forever where the event is missing.
        let a = pmevcntr0();
        let mut x = 0u64;
        for i in 0..100u64 {
            x = core::hint::black_box(x.wrapping_add(i));
        }
        if pmevcntr0() == a {
            say!("ops: PMEVCNTR0_EL0 does not count (INST_RETIRED needs QEMU -icount)");
            return Insns::None;
        }
        Insns::Pmu
    }

    fn read(&self) -> Option<u64> {
        match self {
            Insns::Perf(fd) => {
                let mut v = 0u64;
                // SAFETY: read(fd, &v, 8) writes at most 8 bytes to `v`.
                let r = unsafe { sys::syscall6(sys::nr::READ, [*fd, &mut v as *mut u64 as u64, 8, 0, 0, 0]) };
                (r == Ok(8)).then_some(v)
            }
            Insns::Pmu => Some(pmevcntr0()),
            Insns::None => None,
        }
    }
}

fn pmevcntr0() -> u64 {
    let v: u64;
    // SAFETY: only called on this kernel, which sets PMUSERENR_EL0.ER (kernel `arch::pmu`).
    unsafe { asm!("isb", "mrs {v}, pmevcntr0_el0", v = out(reg) v, options(nomem, nostack)) };
    v
}

/// Cumulative TLBIs and page faults, when the kernel tells.
fn tlbis_faults() -> (Option<u64>, Option<u64>) {
    if let Ok(s) = sys::mm_stats() {
        let t = s.tlbi_range_broadcast
            + s.tlbi_page_broadcast
            + s.tlbi_asid_broadcast
            + s.tlbi_all_broadcast
            + s.tlbi_range_local
            + s.tlbi_page_local
            + s.tlbi_asid_local
            + s.tlbi_all_local;
        return (Some(t), Some(s.page_faults));
    }
    let mut ru = [0u64; 18];
    // SAFETY: getrusage(RUSAGE_SELF, &ru) writes one 144-byte struct rusage.
    let r = unsafe { sys::syscall6(sys::nr::GETRUSAGE, [0, ru.as_mut_ptr() as u64, 0, 0, 0, 0]) };
    (None, r.ok().map(|_| ru[8])) // ru_minflt follows two timevals and four longs
}

/// Totals over one measured loop.
#[derive(Clone, Copy)]
struct Sample {
    ticks: u64,
    insns: Option<u64>,
    tlbis: Option<u64>,
    faults: Option<u64>,
}

fn measure(c: &Insns, n: u64, mut op: impl FnMut(u64)) -> Sample {
    let (t0, f0) = tlbis_faults();
    let i0 = c.read();
    let s0 = ticks();
    for i in 0..n {
        op(i);
    }
    let s1 = ticks();
    let i1 = c.read();
    let (t1, f1) = tlbis_faults();
    let sub = |a: Option<u64>, b: Option<u64>| Some(b?.wrapping_sub(a?));
    Sample { ticks: s1 - s0, insns: sub(i0, i1), tlbis: sub(t0, t1), faults: sub(f0, f1) }
}

struct Bench<'a> {
    insns: &'a Insns,
    /// The cost of an empty measurement (the counter reads) and of one empty iteration, as
    /// (ticks, instructions) each: subtracted from every figure.
    fixed: (f64, f64),
    per_iter: (f64, f64),
}

impl Bench<'_> {
    /// Calibrates on empty loops of 0 and `n` iterations.
    fn new(insns: &Insns, n: u64) -> Bench<'_> {
        let empty = |k| {
            let s = measure(insns, k, |i| {
                core::hint::black_box(i);
            });
            (s.ticks as f64, s.insns.unwrap_or(0) as f64)
        };
        let _ = empty(n); // warm up
        let (f, l) = (empty(0), empty(n));
        let per_iter = ((l.0 - f.0).max(0.0) / n as f64, (l.1 - f.1).max(0.0) / n as f64);
        say!(
            "ops: calibration: a measurement costs {:.0} ticks and {:.0} instructions, an empty iteration {:.2} and {:.2}",
            f.0,
            f.1,
            per_iter.0,
            per_iter.1
        );
        Bench { insns, fixed: f, per_iter }
    }

    /// Measures `op` over `n` iterations and prints one line, per iteration. A few iterations
    /// run first, unmeasured, so that QEMU has translated the code paths (pass `warm` false
    /// where an iteration cannot be repeated).
    fn report(&self, key: &str, n: u64, warm: bool, mut op: impl FnMut(u64)) {
        if warm {
            for i in 0..n.min(10) {
                op(i);
            }
        }
        let s = measure(self.insns, n, op);
        let k = n as f64;
        let ticks = (s.ticks as f64 - self.fixed.0 - self.per_iter.0 * k).max(0.0);
        let ns = ticks * 1e9 / freq().max(1) as f64 / k;
        let insns = s.insns.map(|i| (i as f64 - self.fixed.1 - self.per_iter.1 * k).max(0.0) / k);
        let fmt = |v: Option<f64>, prec: usize| match v {
            Some(v) => alloc::format!("{v:.prec$}"),
            None => alloc::string::String::from("-"),
        };
        say!(
            "ops: {key} ns={ns:.1} insns={} tlbi={} faults={} n={n}",
            fmt(insns, 1),
            fmt(s.tlbis.map(|t| t as f64 / k), 2),
            fmt(s.faults.map(|f| f as f64 / k), 3),
        );
    }
}

fn map(pages: u64, prot: u64) -> Result<u64, Errno> {
    sys::mmap_anon(0, pages * PAGE, prot, 0)
}

fn touch(addr: u64, pages: u64) {
    for p in 0..pages {
        // SAFETY: the caller mapped `pages` writable pages at `addr` that nothing else uses.
        unsafe { ((addr + p * PAGE) as *mut u8).write_volatile(1) };
    }
}

fn unmap(addr: u64, pages: u64) {
    // SAFETY: the caller's own mapping, not referenced afterwards.
    let _ = unsafe { sys::munmap(addr, pages * PAGE) };
}

/// mmap + munmap of one page, an R/RW mprotect pair of 16 touched pages, an mprotect pair of
/// one held page (to `PROT_NONE` and back: unlike either neighbour, so nothing merges) and, on
/// this kernel, `SYS_MMAP_NEAR` + munmap of one page near that held page, printed as
/// `mmap1-SUFFIX`, `mprotect16-SUFFIX`, `mprotect1-SUFFIX` and `near1-SUFFIX`.
fn growth_pair(b: &Bench<'_>, c: &mut Checks, suffix: &str, n: u64, held: &[u64], ext: bool) {
    b.report(&alloc::format!("mmap1-{suffix}"), n, true, |_| {
        if let Ok(a) = map(1, PROT_READ | PROT_WRITE) {
            unmap(a, 1);
        }
    });
    if let Some(&page) = held.get(held.len() / 2) {
        // `hold` alternates R and RW, starting with R.
        let prot = if (held.len() / 2).is_multiple_of(2) { PROT_READ } else { PROT_READ | PROT_WRITE };
        b.report(&alloc::format!("mprotect1-{suffix}"), n, true, |_| {
            // SAFETY: a held page of ours, never accessed.
            unsafe {
                let _ = sys::mprotect(page, PAGE, 0);
                let _ = sys::mprotect(page, PAGE, prot);
            }
        });
        if ext {
            b.report(&alloc::format!("near1-{suffix}"), n, true, |_| {
                if let Ok(a) = sys::mmap_near(page, PAGE, 1 << 30, PROT_READ | PROT_WRITE, 0) {
                    unmap(a, 1);
                }
            });
        }
    }
    let Ok(r) = map(16, PROT_READ | PROT_WRITE) else {
        check!(c, false, "cannot map 16 pages");
        return;
    };
    touch(r, 16);
    b.report(&alloc::format!("mprotect16-{suffix}"), n, true, |_| {
        // SAFETY: the region is ours; nothing touches it while it is read-only.
        unsafe {
            let _ = sys::mprotect(r, 16 * PAGE, PROT_READ);
            let _ = sys::mprotect(r, 16 * PAGE, PROT_READ | PROT_WRITE);
        }
    });
    unmap(r, 16);
}

/// Maps `count` single pages whose protections alternate, so that no two merge into one mapping
/// (Linux merges neighbours with equal flags); returns their addresses.
fn hold(count: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(count);
    for i in 0..count {
        let prot = if i % 2 == 0 { PROT_READ } else { PROT_READ | PROT_WRITE };
        match map(1, prot) {
            Ok(a) => v.push(a),
            Err(e) => {
                say!("ops: mapping {i} of {count} failed: {e}");
                break;
            }
        }
    }
    v
}

pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("ops");
    let many = if ctx.full { 50_000 } else { 2_000 };
    let n = if ctx.full { 1000 } else { 100 };
    let insns = Insns::open(ctx.ext);
    say!(
        "== ops: per-operation guest time and instructions (source: {}), n = {n}, growth at 10 to {many} mappings",
        match insns {
            Insns::Perf(_) => "perf_event_open",
            Insns::Pmu => "PMEVCNTR0_EL0",
            Insns::None => "none",
        }
    );
    let b = Bench::new(&insns, n);

    b.report("getpid", n, true, |_| {
        // SAFETY: getpid has no arguments and no effect.
        let _ = unsafe { sys::syscall6(sys::nr::GETPID, [0; 6]) };
    });
    b.report("mmap1", n, true, |_| {
        if let Ok(a) = map(1, PROT_READ | PROT_WRITE) {
            unmap(a, 1);
        }
    });
    b.report("mmap16-touch", n / 4, true, |_| {
        if let Ok(a) = map(16, PROT_READ | PROT_WRITE) {
            touch(a, 16);
            unmap(a, 16);
        }
    });
    // First touch of fresh memory, per 4 KiB page (this kernel maps a whole 64 KiB run, or a
    // 2 MiB block, per fault: the faults column says how many faults a page cost).
    let pages = if ctx.full { 4096 } else { 512 };
    match map(pages, PROT_READ | PROT_WRITE) {
        Ok(a) => {
            // Warm up (QEMU translates the fault path) on memory of its own, of the same size.
            if let Ok(w) = map(pages, PROT_READ | PROT_WRITE) {
                touch(w, pages);
                unmap(w, pages);
            }
            b.report("fault", pages, false, |p| touch(a + p * PAGE, 1));
            unmap(a, pages);
        }
        Err(e) => {
            check!(c, false, "cannot map {pages} pages: {e}");
        }
    }
    // SAFETY: brk(0) only asks for the break.
    match unsafe { sys::syscall6(sys::nr::BRK, [0; 6]) } {
        Ok(b0) => b.report("brk", n, true, |_| {
            // SAFETY: the program never uses the heap above its initial break.
            unsafe {
                let _ = sys::syscall6(sys::nr::BRK, [b0 + PAGE, 0, 0, 0, 0, 0]);
                let _ = sys::syscall6(sys::nr::BRK, [b0, 0, 0, 0, 0, 0]);
            }
        }),
        Err(e) => {
            check!(c, false, "brk(0) failed: {e}");
        }
    }

    let held = hold(10);
    growth_pair(&b, &mut c, "10", n, &held, ctx.ext);
    // The points between draw the growth curve (scripts/pictures.py growth).
    let mut more = Vec::new();
    for point in [100, 1000, 10_000].into_iter().filter(|&p| p < many) {
        more.extend(hold(point - 10 - more.len()));
        growth_pair(&b, &mut c, &alloc::format!("{point}"), n, &more, ctx.ext);
    }
    more.extend(hold(many - 10 - more.len()));
    check!(c, more.len() == many - 10, "could not hold {many} mappings");
    growth_pair(&b, &mut c, "many", n, &more, ctx.ext);
    say!("ops: held {} mappings", held.len() + more.len());
    for a in held.into_iter().chain(more) {
        unmap(a, 1);
    }
    say!("ops: done");
    c.done()
}
