//! `events`: what the event loop costs, measured, with the properties that make it cheap
//! checked.
//!
//! 1. `epoll_pwait` with nothing to wait for (timeout 0) on an epoll watching one ready eventfd,
//!    with no other descriptor and with 1000 idle eventfds: the call looks at its ready list
//!    only, so the idle ones cost nothing (checked: within a factor of two).
//! 2. What a thread blocked on 1000 idle eventfds pays for each event on an unrelated eventfd
//!    (its CPU time divided by the events): in `ppoll`, which is woken by every kernel event and
//!    polls its descriptors again; in `epoll_pwait`, which sleeps on its epoll's key and is
//!    not woken at all (checked: less than a tenth of what `ppoll` pays).
//! 3. `membarrier`: `MEMBARRIER_CMD_PRIVATE_EXPEDITED` with one thread (no interrupt needed)
//!    and with a second thread spinning on another CPU (one interrupt, waited for), and
//!    `MEMBARRIER_CMD_GLOBAL` (every other CPU).
//! 4. `rseq`'s abort rule (checked): a thread that registered an area and spins inside the
//!    critical section its `rseq_cs` names, sharing its CPU with another thread, is preempted by
//!    the tick and must resume at the section's abort handler; it gives up (a failure) after two
//!    seconds.
//!
//! Output: `events: KEY ns=…` lines, then the checks. Not part of `all`; run it on 4 CPUs
//! (`-smp 4 ... -append "-- events"`): on one CPU the blocked thread and the writer share it.

use alloc::vec::Vec;
use core::arch::global_asm;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::rt::{freq, ticks};
use crate::sys::{self, Errno, nr};
use crate::thread;
use crate::{Checks, Ctx, check, ok, say};

/// Idle descriptors of sections 1 and 2.
const IDLE: usize = 1000;
/// Unrelated events written in section 2.
const EVENTS: u64 = 2000;

fn call(n: u64, a: [u64; 6]) -> Result<u64, Errno> {
    // SAFETY: every call of this mode passes descriptors it made and pointers to its own
    // buffers, of the sizes the call reads or writes.
    unsafe { sys::syscall6(n, a) }
}

fn eventfd(initial: u64) -> Result<u64, Errno> {
    call(nr::EVENTFD2, [initial, linux_abi::poll::EFD_NONBLOCK, 0, 0, 0, 0])
}

fn epoll_add(ep: u64, fd: u64) -> Result<u64, Errno> {
    let event = [u64::from(linux_abi::poll::EPOLLIN), fd];
    call(nr::EPOLL_CTL, [ep, linux_abi::poll::EPOLL_CTL_ADD, fd, (&raw const event) as u64, 0, 0])
}

fn ns(ticks: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(freq().max(1))) as u64
}

/// Nanoseconds per call of `f`, over `n` calls.
fn per_call(n: u64, mut f: impl FnMut()) -> u64 {
    let t0 = ticks();
    for _ in 0..n {
        f();
    }
    ns(ticks() - t0) / n.max(1)
}

fn thread_cpu_ns() -> u64 {
    let mut ts = [0u64; 2];
    // CLOCK_THREAD_CPUTIME_ID.
    let _ = call(nr::CLOCK_GETTIME, [3, (&raw mut ts) as u64, 0, 0, 0, 0]);
    ts[0] * 1_000_000_000 + ts[1]
}

/// The blocked thread of section 2: which call it waits in, on what, and what it measured.
static WAIT_EPOLL: AtomicBool = AtomicBool::new(false);
static WAIT_FD: AtomicU64 = AtomicU64::new(0);
static WAITING: AtomicBool = AtomicBool::new(false);
static WAITER_CPU_NS: AtomicU64 = AtomicU64::new(0);
/// The `struct pollfd` array of the `ppoll` waiter (the idle eventfds and the one that ends it).
static POLLFDS: crate::rt::SpinLock<Vec<u64>> = crate::rt::SpinLock::new(Vec::new());

extern "C" fn waiter(_: u64) -> u64 {
    let fd = WAIT_FD.load(Ordering::Acquire);
    let start = thread_cpu_ns();
    WAITING.store(true, Ordering::Release);
    let mut buf = [0u64; 2 * 8];
    if WAIT_EPOLL.load(Ordering::Acquire) {
        // Until the end eventfd is written (10 s at most).
        let _ = call(nr::EPOLL_PWAIT, [fd, buf.as_mut_ptr() as u64, 8, 10_000, 0, 0]);
    } else {
        let fds = POLLFDS.lock();
        let ts = [10u64, 0];
        let _ = call(nr::PPOLL, [fds.as_ptr() as u64, fds.len() as u64, (&raw const ts) as u64, 0, 8, 0]);
    }
    WAITER_CPU_NS.store(thread_cpu_ns() - start, Ordering::Release);
    0
}

/// Section 2 for one kind of waiter: its CPU time per unrelated event, in nanoseconds.
fn unrelated_events(epoll: bool, idle: &[u64], end: u64) -> Result<u64, Errno> {
    let noise = eventfd(0)?;
    if epoll {
        let ep = call(nr::EPOLL_CREATE1, [0; 6])?;
        for &fd in idle.iter().chain([end].iter()) {
            epoll_add(ep, fd)?;
        }
        WAIT_FD.store(ep, Ordering::Release);
    } else {
        let mut fds = POLLFDS.lock();
        fds.clear();
        // struct pollfd { int fd; short events, revents; }: one u64 each, POLLIN.
        fds.extend(idle.iter().chain([end].iter()).map(|&fd| fd | 1 << 32));
    }
    WAIT_EPOLL.store(epoll, Ordering::Release);
    WAITING.store(false, Ordering::Release);
    let t = thread::spawn(waiter, 0, 0)?;
    while !WAITING.load(Ordering::Acquire) {
        sys::sched_yield();
    }
    // Long enough for it to block.
    let settle = ticks() + freq() / 50;
    while ticks() < settle {
        sys::sched_yield();
    }
    let one = 1u64;
    for _ in 0..EVENTS {
        let _ = call(nr::WRITE, [noise, (&raw const one) as u64, 8, 0, 0, 0]);
    }
    let _ = call(nr::WRITE, [end, (&raw const one) as u64, 8, 0, 0, 0]);
    let _ = t.join(thread::deadline_in(20));
    let mut drain = 0u64;
    let _ = call(nr::READ, [end, (&raw mut drain) as u64, 8, 0, 0, 0]);
    if epoll {
        sys::close(WAIT_FD.load(Ordering::Acquire));
    }
    sys::close(noise);
    Ok(WAITER_CPU_NS.load(Ordering::Acquire) / EVENTS)
}

extern "C" fn spinner(_: u64) -> u64 {
    while !STOP.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    0
}
static STOP: AtomicBool = AtomicBool::new(false);

// `rseq_spin(cs_field, descriptor, give_up)`: stores `descriptor` in the area's `rseq_cs`, then
// spins in the critical section [1, 2) until `*give_up` is set. Returns 1 when the kernel moved
// it to the abort handler (after the signature word), 0 when it gave up. `rseq_spin_cs` and
// `rseq_spin_abort` are the section's start and the handler, for the descriptor.
global_asm!(
    ".section .text.rseq_spin, \"ax\"",
    ".globl rseq_spin, rseq_spin_cs, rseq_spin_cs_end, rseq_spin_abort",
    "rseq_spin:",
    "    str x1, [x0]",
    "rseq_spin_cs:",
    "    ldr w3, [x2]",
    "    cbnz w3, 3f",
    "    b rseq_spin_cs",
    "rseq_spin_cs_end:",
    "    .word 0xd428bc00", // RSEQ_SIG
    "rseq_spin_abort:",
    "    mov x0, #1",
    "    ret",
    "3:  str xzr, [x0]",
    "    mov x0, #0",
    "    ret",
);

unsafe extern "C" {
    fn rseq_spin(cs_field: *mut u64, descriptor: u64, give_up: *const AtomicU32) -> u64;
    static rseq_spin_cs: u8;
    static rseq_spin_cs_end: u8;
    static rseq_spin_abort: u8;
}

/// `struct rseq` (32 bytes, 32-aligned) and `struct rseq_cs` (32-aligned).
#[repr(C, align(32))]
struct RseqArea {
    cpu_id_start: u32,
    cpu_id: u32,
    rseq_cs: u64,
    flags: u32,
    pad: [u32; 3],
}
#[repr(C, align(32))]
struct RseqCs {
    version: u32,
    flags: u32,
    start_ip: u64,
    post_commit_offset: u64,
    abort_ip: u64,
}

static GIVE_UP: AtomicU32 = AtomicU32::new(0);

extern "C" fn give_up_later(_: u64) -> u64 {
    // Shares the CPU with the spinner (so the tick finds someone to switch to), then tells it to
    // stop after 2 s if the kernel never aborted its section.
    let end = ticks() + 2 * freq();
    while ticks() < end && GIVE_UP.load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
    GIVE_UP.store(1, Ordering::Release);
    0
}

/// Section 4: whether the preempted critical section resumed at its abort handler.
fn rseq_abort() -> Result<bool, Errno> {
    const SIG: u64 = 0xd428_bc00;
    let mut area = RseqArea { cpu_id_start: 0, cpu_id: u32::MAX, rseq_cs: 0, flags: 0, pad: [0; 3] };
    // Only the symbols' addresses are taken (no read: no `unsafe`).
    let (start, end, abort) = (
        &raw const rseq_spin_cs as u64,
        &raw const rseq_spin_cs_end as u64,
        &raw const rseq_spin_abort as u64,
    );
    let cs =
        RseqCs { version: 0, flags: 0, start_ip: start, post_commit_offset: end - start, abort_ip: abort };
    let area_ptr = (&raw mut area) as u64;
    let here = sys::getcpu().unwrap_or(0);
    sys::sched_setaffinity(1 << here)?;
    GIVE_UP.store(0, Ordering::Release);
    // The helper thread inherits the affinity: both on this CPU.
    let t = thread::spawn(give_up_later, 0, 0)?;
    let registered = call(nr::RSEQ, [area_ptr, 32, 0, SIG, 0, 0]);
    // SAFETY: a field of a live local; volatile, as the kernel writes it behind the compiler.
    let registered_cpu = unsafe { (&raw const area.cpu_id).read_volatile() };
    // SAFETY: `rseq_cs` is the registered area's field; the descriptor and the flag outlive the
    // call; the function only loads the flag and stores to the field.
    let aborted = registered.is_ok()
        && unsafe { rseq_spin(&raw mut area.rseq_cs, (&raw const cs) as u64, &raw const GIVE_UP) } == 1;
    GIVE_UP.store(1, Ordering::Release);
    let _ = t.join(thread::deadline_in(10));
    let _ = sys::sched_setaffinity(u64::MAX);
    registered?;
    // Unregistered before the area (on this stack) goes.
    call(nr::RSEQ, [area_ptr, 32, 1, SIG, 0, 0])?;
    say!(
        "events: rseq area said CPU {registered_cpu} when registered on CPU {here}; section aborted: {aborted}"
    );
    // SAFETY: as above.
    let after = unsafe { (&raw const area.cpu_id).read_volatile() };
    Ok(aborted && registered_cpu == here && after == u32::MAX)
}

/// The `events` mode.
pub fn run(_ctx: &Ctx) -> bool {
    let mut c = Checks::new("events");
    let result = (|| -> Result<(), Errno> {
        // 1. A look at the ready list, with and without idle descriptors.
        let ready = eventfd(1)?;
        let ep = call(nr::EPOLL_CREATE1, [0; 6])?;
        epoll_add(ep, ready)?;
        let mut buf = [0u64; 2 * 8];
        let mut wait = || {
            let _ = call(nr::EPOLL_PWAIT, [ep, buf.as_mut_ptr() as u64, 8, 0, 0, 0]);
        };
        let alone = per_call(20_000, &mut wait);
        let mut idle = Vec::with_capacity(IDLE);
        for _ in 0..IDLE {
            let fd = eventfd(0)?;
            epoll_add(ep, fd)?;
            idle.push(fd);
        }
        let crowded = per_call(20_000, &mut wait);
        say!("events: epoll_pwait-1-ready ns={alone}");
        say!("events: epoll_pwait-1-ready-{IDLE}-idle ns={crowded}");
        ok!(
            c,
            crowded < 2 * alone + 1000,
            "epoll_pwait does not look at idle descriptors: {crowded} ns with {IDLE}, {alone} ns without"
        );
        sys::close(ep);
        // 2. The blocked thread's cost per unrelated event.
        let end = eventfd(0)?;
        let polled = unrelated_events(false, &idle, end)?;
        let epolled = unrelated_events(true, &idle, end)?;
        say!("events: ppoll-{IDLE}-idle-per-unrelated-event ns={polled}");
        say!("events: epoll_pwait-{IDLE}-idle-per-unrelated-event ns={epolled}");
        ok!(
            c,
            epolled * 10 <= polled.max(10),
            "an epoll waiter is not woken by unrelated events: {epolled} ns each, ppoll {polled} ns"
        );
        for fd in idle.into_iter().chain([ready, end]) {
            sys::close(fd);
        }
        // 3. membarrier.
        let membarrier = |cmd: u64| call(nr::MEMBARRIER, [cmd, 0, 0, 0, 0, 0]);
        membarrier(linux_abi::sched::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)?;
        let private = || {
            let _ = membarrier(linux_abi::sched::MEMBARRIER_CMD_PRIVATE_EXPEDITED);
        };
        let single = per_call(1000, private);
        STOP.store(false, Ordering::Release);
        let t = thread::spawn(spinner, 0, 0)?;
        let settle = ticks() + freq() / 50;
        while ticks() < settle {
            core::hint::spin_loop();
        }
        let two = per_call(1000, private);
        let global = per_call(1000, || {
            let _ = membarrier(linux_abi::sched::MEMBARRIER_CMD_GLOBAL);
        });
        STOP.store(true, Ordering::Release);
        let _ = t.join(thread::deadline_in(10));
        say!("events: membarrier-private-1-thread ns={single}");
        say!("events: membarrier-private-2-threads ns={two}");
        say!("events: membarrier-global ns={global}");
        // 4. rseq.
        let aborted = rseq_abort()?;
        ok!(
            c,
            aborted,
            "a thread preempted in its rseq critical section resumed at the abort handler; the area said its CPU, and -1 once unregistered"
        );
        Ok(())
    })();
    if let Err(e) = result {
        check!(c, false, "a call failed: {e}");
    }
    say!("events: done");
    c.done()
}
