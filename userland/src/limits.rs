//! `limits`: asking for too much must end in an errno, never in a dead kernel. Four floods, each
//! checked against what Linux 6.1 answers, each cleaned up after so the kernel can be seen to
//! take everything back:
//! - threads until `clone` fails: `EAGAIN` (Linux's `threads-max`; on this kernel exactly at the
//!   limit, which is twice the default `RLIMIT_NPROC`); every thread released and joined, and one
//!   more can then be created;
//! - single-page mappings until `mmap` fails: `ENOMEM` at `vm.max_map_count` (65,530); a `munmap`
//!   that would split a mapping is refused there too; one unmapped page makes room for exactly
//!   one mapping; all unmapped;
//! - a 1 TiB private writable mapping: `ENOMEM` (the heuristic overcommit), while the same size
//!   `PROT_NONE` or `MAP_NORESERVE` is granted;
//! - `RLIMIT_AS` at 64 MiB (`prlimit64`): a bigger mapping is refused, code still gets its place
//!   in the code window (which is address space, charged to nothing), the old limit comes back.
//!
//! The flood threads need no stack: each is one assembly loop ([`limits_flood_clone`]) that
//! sleeps on a futex word until released, counts itself out and exits. Nothing is allocated
//! while a flood is on (the record of the mapped pages is mapped beforehand), so the program's
//! own allocator never meets the limits.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::sys::{self, Errno, PROT_NONE, PROT_READ, PROT_WRITE};
use crate::{Checks, Ctx, abi, check, ok, say};

/// `clone` flags of the flood threads: a thread in this address space (no TLS, no tid words).
const FLOOD_FLAGS: u64 = 0x100 | 0x200 | 0x400 | 0x800 | 0x1_0000 | 0x4_0000;
/// `prlimit64` and the resources used here.
const PRLIMIT64: u64 = 261;
const RLIMIT_NPROC: u64 = 6;
const RLIMIT_AS: u64 = 9;
const RLIM_INFINITY: u64 = u64::MAX;

// limits_flood_clone(flags, release, alive) -> tid (parent) | -errno.
// The child keeps the parent's SP (newsp = 0) and never touches memory through it: it waits on
// `*release` (FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected 0) until it is non-zero, then decrements
// `*alive` (LDAXR/STLXR: the Cortex-A53 has no LSE atomics) and calls `exit`.
global_asm!(
    ".section .text.limits_flood_clone, \"ax\"",
    ".globl limits_flood_clone",
    ".type limits_flood_clone, %function",
    "limits_flood_clone:",
    "    mov x9, x1",
    "    mov x10, x2",
    "    mov x1, xzr",
    "    mov x2, xzr",
    "    mov x3, xzr",
    "    mov x4, xzr",
    "    mov x8, #{clone}",
    "    svc #0",
    "    cbz x0, 1f",
    "    ret",
    "1:  ldr w11, [x9]",
    "    cbnz w11, 2f",
    "    mov x0, x9",
    "    mov x1, #{wait}",
    "    mov x2, xzr",
    "    mov x3, xzr",
    "    mov x8, #{futex}",
    "    svc #0",
    "    b 1b",
    "2:  ldaxr w11, [x10]",
    "    sub w11, w11, #1",
    "    stlxr w12, w11, [x10]",
    "    cbnz w12, 2b",
    "    mov x0, xzr",
    "    mov x8, #{exit}",
    "    svc #0",
    "    brk #0x3",
    ".size limits_flood_clone, . - limits_flood_clone",
    clone = const sys::nr::CLONE,
    futex = const sys::nr::FUTEX,
    wait = const linux_abi::futex::FUTEX_WAIT | linux_abi::futex::FUTEX_PRIVATE_FLAG,
    exit = const sys::nr::EXIT,
);

unsafe extern "C" {
    /// See the assembly above.
    fn limits_flood_clone(flags: u64, release: *const AtomicU32, alive: *const AtomicU32) -> i64;
}

/// Set to release the flood threads.
static RELEASE: AtomicU32 = AtomicU32::new(0);
/// Flood threads created and not yet counted out.
static ALIVE: AtomicU32 = AtomicU32::new(0);

/// One flood thread; `Err` is `clone`'s errno.
fn flood_thread() -> Result<(), Errno> {
    ALIVE.fetch_add(1, Ordering::AcqRel);
    // SAFETY: the child runs only the assembly above, which reads RELEASE and updates ALIVE (both
    // statics, alive for the whole program) and uses no stack; the parent returns normally.
    let r = unsafe { limits_flood_clone(FLOOD_FLAGS, &RELEASE, &ALIVE) };
    if r < 0 {
        ALIVE.fetch_sub(1, Ordering::AcqRel);
        return Err(Errno::from_ret(r).unwrap_or(Errno::EINVAL));
    }
    Ok(())
}

/// Waits (yielding) until every flood thread has counted itself out, at most `secs` seconds.
fn all_gone(secs: u64) -> bool {
    let deadline = crate::thread::deadline_in(secs);
    while ALIVE.load(Ordering::Acquire) != 0 {
        if crate::rt::ticks() > deadline {
            return false;
        }
        sys::sched_yield();
    }
    true
}

/// `prlimit64(0, resource, new, old)`.
fn prlimit(resource: u64, new: Option<[u64; 2]>) -> Result<[u64; 2], Errno> {
    let mut old = [0u64; 2];
    let newp = new.as_ref().map_or(0, |n| n.as_ptr() as u64);
    // SAFETY: the kernel reads one `struct rlimit64` from `newp` (if given) and writes one to `old`.
    unsafe { sys::syscall6(PRLIMIT64, [0, resource, newp, old.as_mut_ptr() as u64, 0, 0])? };
    Ok(old)
}

fn thread_flood(ctx: &Ctx, c: &mut Checks) {
    // Linux as root may allow far more threads than a quick run wants: cap there.
    let cap = if ctx.ext { 1 << 22 } else { 10_000 };
    // threads-max grows with RAM (twice the default RLIMIT_NPROC): a quick run floods only where
    // it is small (the suite's 128 MiB and 512 MiB configurations); `--full` floods everywhere.
    if ctx.ext && !ctx.full {
        let nproc = prlimit(RLIMIT_NPROC, None).map_or(0, |l| l[0]);
        if nproc > 4096 {
            say!("  thread flood skipped: threads-max {} here (quick scale; --full floods)", 2 * nproc);
            return;
        }
    }
    let t0 = crate::rt::ticks();
    let mut n = 0u64;
    let err = loop {
        if n == cap {
            break None;
        }
        match flood_thread() {
            Ok(()) => n += 1,
            Err(e) => break Some(e),
        }
    };
    let ms = crate::rt::ticks_to_centi_us(crate::rt::ticks() - t0) / 100_000;
    say!(
        "  thread flood: {n} threads in {ms} ms, then {}",
        err.map_or("the cap".into(), |e| alloc::format!("{e}"))
    );
    if let Some(e) = err {
        ok!(c, e == Errno::EAGAIN, "clone past the thread limit fails with EAGAIN (got {e})");
    }
    if ctx.ext {
        // The default RLIMIT_NPROC is threads-max / 2, rounded down.
        let nproc = prlimit(RLIMIT_NPROC, None).map_or(0, |l| l[0]);
        let max = n + 1;
        ok!(
            c,
            max / 2 == nproc && nproc > 0,
            "the limit is threads-max = {max} (this one + {n}), RLIMIT_NPROC {nproc}"
        );
    }
    RELEASE.store(1, Ordering::Release);
    let _ = sys::futex_wake(&RELEASE, i32::MAX as u32);
    ok!(c, all_gone(60), "every flood thread released and gone");
    // A thread may still be on its way out: a few tries.
    let again = (0..100).any(|_| {
        let r = flood_thread();
        if r.is_err() {
            sys::sched_yield();
        }
        r.is_ok()
    });
    ok!(c, again, "a thread can be created again afterwards");
    check!(c, all_gone(10), "and it ends");
    RELEASE.store(0, Ordering::Release);
}

fn map_flood(ctx: &Ctx, c: &mut Checks) {
    let page = ctx.page;
    const CAP: u64 = 70_000;
    // The record of the flood's pages, mapped before the flood (a mapping of several pages:
    // punching a hole in it at the limit must fail).
    let Ok(record) = sys::mmap_anon(0, CAP * 8, PROT_READ | PROT_WRITE, 0) else {
        check!(c, false, "mapping the record");
        return;
    };
    let rec = record as *mut u64;
    let t0 = crate::rt::ticks();
    let mut n = 0u64;
    // Alternate protections so that neighbouring pages never merge into one mapping.
    let err = loop {
        if n == CAP {
            break None;
        }
        let prot = if n.is_multiple_of(2) { PROT_READ } else { PROT_NONE };
        match sys::mmap_anon(0, page, prot, 0) {
            // SAFETY: `n < CAP` and the record holds CAP words.
            Ok(a) => unsafe { rec.add(n as usize).write(a) },
            Err(e) => break Some(e),
        }
        n += 1;
    };
    let ms = crate::rt::ticks_to_centi_us(crate::rt::ticks() - t0) / 100_000;
    say!(
        "  mapping flood: {n} mappings in {ms} ms, then {}",
        err.map_or("the cap".into(), |e| alloc::format!("{e}"))
    );
    ok!(c, err == Some(Errno::ENOMEM), "mmap past vm.max_map_count fails with ENOMEM");
    ok!(c, (60_000..65_531).contains(&n), "the limit is vm.max_map_count = 65530 ({n} + the program's own)");
    if err.is_some() {
        // SAFETY: unmaps nothing (refused) or, were it allowed, one page of the record nothing reads.
        let split = unsafe { sys::munmap(record + page, page) };
        ok!(
            c,
            split == Err(Errno::ENOMEM),
            "munmap splitting a mapping at the limit fails with ENOMEM ({split:?})"
        );
        // SAFETY: a flood page nothing uses.
        let _ = unsafe { sys::munmap(rec.add((n / 2) as usize).read(), page) };
        // With the removed page's protection, so that refilling its hole merges with neither
        // neighbour.
        let prot = if (n / 2).is_multiple_of(2) { PROT_READ } else { PROT_NONE };
        let one = sys::mmap_anon(0, page, prot, 0);
        let two = sys::mmap_anon(0, page, prot, 0);
        ok!(c, one.is_ok() && two == Err(Errno::ENOMEM), "one page unmapped: room for exactly one mapping");
        if let Ok(a) = one {
            // SAFETY: the page just mapped, unused.
            unsafe { rec.add((n / 2) as usize).write(a) };
        }
    }
    for i in 0..n {
        // SAFETY: the flood's own pages, which nothing uses.
        let _ = unsafe { sys::munmap(rec.add(i as usize).read(), page) };
    }
    // SAFETY: the record is no longer used.
    let _ = unsafe { sys::munmap(record, CAP * 8) };
    let after = sys::mmap_anon(0, page, PROT_READ, 0);
    ok!(c, after.is_ok(), "everything unmapped: mmap works again");
    if let Ok(a) = after {
        // SAFETY: just mapped, unused.
        let _ = unsafe { sys::munmap(a, page) };
    }
}

fn overcommit(c: &mut Checks) {
    let tib = 1u64 << 40;
    let rw = sys::mmap_anon(0, tib, PROT_READ | PROT_WRITE, 0);
    ok!(c, rw == Err(Errno::ENOMEM), "a 1 TiB private writable mapping fails with ENOMEM ({rw:?})");
    for (what, prot, flags) in
        [("PROT_NONE", PROT_NONE, 0), ("MAP_NORESERVE", PROT_READ | PROT_WRITE, sys::MAP_NORESERVE)]
    {
        let r = sys::mmap_anon(0, tib, prot, flags);
        ok!(c, r.is_ok(), "1 TiB {what} is granted (not charged) ({r:?})");
        if let Ok(a) = r {
            // SAFETY: just mapped, never touched.
            let _ = unsafe { sys::munmap(a, tib) };
        }
    }
}

fn address_space_limit(ctx: &Ctx, c: &mut Checks) {
    const MIB: u64 = 1 << 20;
    let Ok(old) = prlimit(RLIMIT_AS, None) else {
        check!(c, false, "prlimit64(RLIMIT_AS) answers");
        return;
    };
    ok!(c, old == [RLIM_INFINITY, RLIM_INFINITY], "RLIMIT_AS starts unlimited ({old:x?})");
    let bad = prlimit(RLIMIT_AS, Some([2 * MIB, MIB]));
    ok!(c, bad == Err(Errno::EINVAL), "a soft limit above the hard one: EINVAL ({bad:?})");
    let set = prlimit(RLIMIT_AS, Some([64 * MIB, RLIM_INFINITY]));
    ok!(c, set == Ok(old), "RLIMIT_AS set to 64 MiB");
    let big = sys::mmap_anon(0, 128 * MIB, PROT_NONE, 0);
    ok!(c, big == Err(Errno::ENOMEM), "under RLIMIT_AS 64 MiB, 128 MiB more fails with ENOMEM ({big:?})");
    if let Ok(a) = big {
        // SAFETY: just mapped, unused.
        let _ = unsafe { sys::munmap(a, 128 * MIB) };
    }
    let code = sys::mmap_anon(0, MIB, PROT_READ | PROT_WRITE, abi::MAP_CODE);
    ok!(c, code.is_ok(), "code still gets 1 MiB ({code:?})");
    if ctx.ext
        && let (Ok(a), Ok(w)) = (code, sys::code_window())
    {
        let inside = w.base <= a && a + MIB <= w.base + w.size;
        ok!(
            c,
            inside && w.size > 64 * MIB,
            "in the code window, though the window ({} MiB) is larger than the limit",
            w.size / MIB
        );
    }
    if let Ok(a) = code {
        // SAFETY: just mapped, unused.
        let _ = unsafe { sys::munmap(a, MIB) };
    }
    let back = prlimit(RLIMIT_AS, Some(old));
    ok!(c, back.map(|l| l[0]) == Ok(64 * MIB), "the old limit restored");
}

/// Runs the mode; true when every invariant held.
pub fn run(ctx: &Ctx) -> bool {
    say!("== limits: threads, mappings, overcommit and RLIMIT_AS until the kernel says no");
    let mut c = Checks::new("limits");
    thread_flood(ctx, &mut c);
    map_flood(ctx, &mut c);
    overcommit(&mut c);
    address_space_limit(ctx, &mut c);
    c.done()
}

/// The `oom` mode: maps 16 MiB at a time and writes every page until the machine has no frame
/// left for a fault. Linux's out-of-memory killer then ends the process with SIGKILL (status
/// 137); so does this kernel, which goes on running. It never returns normally: reaching the end
/// (every mapping refused before memory ran out) is reported and exits 1.
pub fn oom(ctx: &Ctx) -> bool {
    say!("== oom: touching 16 MiB mappings until memory runs out (expect SIGKILL, status 137)");
    let chunk = 16u64 << 20;
    let mut touched = 0u64;
    for _ in 0..4096 {
        let Ok(base) = sys::mmap_anon(0, chunk, PROT_READ | PROT_WRITE, 0) else { break };
        let mut p = 0;
        while p < chunk {
            // SAFETY: inside the fresh RW mapping.
            unsafe { ((base + p) as *mut u64).write_volatile(p) };
            p += ctx.page;
        }
        touched += chunk;
    }
    say!("  oom: {} MiB touched and every mapping refused before memory ran out", touched >> 20);
    false
}
