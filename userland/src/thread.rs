//! Threads without a libc: `clone` with the flag set glibc's `pthread_create` uses, joined through
//! `CLONE_CHILD_CLEARTID` and `FUTEX_WAIT` (as `pthread_join` does), plus the few synchronisation
//! helpers the thread modes need (a futex barrier, waits with a deadline, CPU pinning) and a check
//! that FP/SIMD registers are per thread.
//!
//! The child starts on its own stack with every register copied from the parent except x0 = 0, in
//! the middle of the parent's `clone` call. A Rust function cannot survive that (the child would
//! return into the parent's frame on the wrong stack), so the system call and the child's first
//! instructions are one assembly routine, [`userland_clone`]: the parent returns from it normally;
//! the child loads its entry point and argument from the top of its new stack, calls the entry
//! and ends with `exit` (the thread only) when it returns.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use alloc::boxed::Box;

use crate::rt;
use crate::sys::{self, Errno};
use linux_abi::clone::{
    CLONE_CHILD_CLEARTID, CLONE_FILES, CLONE_FS, CLONE_PARENT_SETTID, CLONE_SETTLS, CLONE_SIGHAND,
    CLONE_SYSVSEM, CLONE_THREAD, CLONE_VM,
};

/// `clone` flags of a POSIX thread (glibc's `pthread_create`: 0x3d0f00).
pub const THREAD_FLAGS: u64 = CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID;

/// Stack of each thread (plus one PROT_NONE guard page below it).
const STACK: u64 = 128 << 10;

// userland_clone(flags, child_sp, ptid, tls, ctid) -> tid (parent) | -errno.
// Linux arm64 `clone` takes (flags, newsp, parent_tid, tls, child_tid) in x0..x4: the arguments
// arrive in the right registers already. At child_sp the caller stored the entry point and its
// argument; the child never uses anything of the parent's frame.
global_asm!(
    ".section .text.userland_clone, \"ax\"",
    ".globl userland_clone",
    ".type userland_clone, %function",
    "userland_clone:",
    "    mov x8, #{clone}",
    "    svc #0",
    "    cbz x0, 1f",
    "    ret",
    "1:  ldp x9, x0, [sp]", // child: entry, argument
    "    mov x29, xzr",
    "    mov x30, xzr",
    "    blr x9",
    "    mov x8, #{exit}", // x0 = the entry's return value
    "    svc #0",
    "    brk #0x2",
    ".size userland_clone, . - userland_clone",
    clone = const sys::nr::CLONE,
    exit = const sys::nr::EXIT,
);

unsafe extern "C" {
    /// See the assembly above.
    fn userland_clone(flags: u64, child_sp: u64, ptid: *mut u32, tls: u64, ctid: *mut u32) -> i64;
}

/// A thread's entry point: gets the argument given to [`spawn`], returns its exit code.
pub type Entry = extern "C" fn(u64) -> u64;

/// A running (or finished, not yet joined) thread.
pub struct Thread {
    /// The thread id `clone` returned.
    pub tid: u32,
    /// `CLONE_PARENT_SETTID` and `CLONE_CHILD_CLEARTID` word: the tid while the thread lives, 0
    /// once it has exited (the kernel clears it and wakes the futex).
    word: Box<AtomicU32>,
    stack: u64,
}

/// Starts a thread running `entry(arg)` with TPIDR_EL0 = `tls`.
pub fn spawn(entry: Entry, arg: u64, tls: u64) -> Result<Thread, Errno> {
    let page = 4096u64.max(crate::PAGE.load(Ordering::Relaxed));
    let len = STACK + page;
    let base = sys::mmap_anon(0, len, sys::PROT_READ | sys::PROT_WRITE, 0)?;
    // SAFETY: the lowest page of a mapping we just made, which nothing uses: it becomes the guard.
    unsafe { sys::mprotect(base, page, sys::PROT_NONE)? };
    let top = base + len;
    let child_sp = top - 16;
    // SAFETY: the two words at the top of the fresh stack mapping, written before the thread that
    // will read them exists.
    unsafe {
        (child_sp as *mut u64).write(entry as usize as u64);
        ((child_sp + 8) as *mut u64).write(arg);
    }
    let word = Box::new(AtomicU32::new(0));
    let w = word.as_ptr();
    MULTI_THREADED.store(true, Ordering::Relaxed);
    // SAFETY: `child_sp` is the 16-byte-aligned top of a stack only the child uses, holding the
    // entry and argument the assembly expects; `w` stays valid (boxed, kept until `join`) for the
    // kernel's writes at creation and at exit; the child shares our memory, which is what the
    // program expects of threads.
    let r = unsafe { userland_clone(THREAD_FLAGS, child_sp, w, tls, w) };
    match r {
        tid if tid > 0 => Ok(Thread { tid: tid as u32, word, stack: base }),
        e => {
            // SAFETY: no thread was created, so nothing uses the stack.
            let _ = unsafe { sys::munmap(base, len) };
            Err(Errno::from_ret(e).unwrap_or(Errno::EINVAL))
        }
    }
}

/// Set once this process has created a thread (its address space may be on several CPUs).
pub static MULTI_THREADED: AtomicBool = AtomicBool::new(false);
/// Set once a thread of this process has pinned itself to a CPU ([`pin`]).
pub static MOVED: AtomicBool = AtomicBool::new(false);

impl Thread {
    /// The thread-id word as the kernel left it (tid while alive, 0 after exit).
    pub fn tid_word(&self) -> u32 {
        self.word.load(Ordering::Acquire)
    }

    /// Waits (`FUTEX_WAIT` on the `CLONE_CHILD_CLEARTID` word) until the thread has exited, or
    /// until `deadline` (CNTVCT) passes: `Err(self)` then.
    pub fn join(self, deadline: u64) -> Result<(), Thread> {
        loop {
            let v = self.word.load(Ordering::Acquire);
            if v == 0 {
                break;
            }
            if rt::ticks() > deadline {
                return Err(self);
            }
            note_wait(sys::futex_wait_shared(&self.word, v, Some(WAIT_NS)));
        }
        let page = 4096u64.max(crate::PAGE.load(Ordering::Relaxed));
        // SAFETY: the thread has exited (the kernel cleared its tid word), so nothing uses its
        // stack any more.
        let _ = unsafe { sys::munmap(self.stack, STACK + page) };
        Ok(())
    }
}

/// CNTVCT value `secs` seconds from now.
pub fn deadline_in(secs: u64) -> u64 {
    rt::ticks() + secs * rt::freq()
}

/// Waits until `cond()` holds: spins a little, then sleeps on `word` (which the side making the
/// condition true changes and wakes) with `FUTEX_WAIT`. Returns false if `deadline` (CNTVCT)
/// passes first.
pub fn wait_until(word: &AtomicU32, deadline: u64, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if cond() {
            return true;
        }
        core::hint::spin_loop();
    }
    loop {
        let v = word.load(Ordering::Acquire);
        if cond() {
            return true;
        }
        if rt::ticks() > deadline {
            return false;
        }
        note_wait(sys::futex_wait(word, v, Some(WAIT_NS)));
    }
}

/// Timeout of each `FUTEX_WAIT` in [`wait_until`] and [`Thread::join`] (they loop).
const WAIT_NS: u64 = 50_000_000;

/// `FUTEX_WAIT`s (of [`wait_until`] and [`Thread::join`]) that timed out: waits that took the
/// whole timeout (informative: a late or lost wake-up shows up here too).
pub static WAIT_TIMEOUTS: AtomicU32 = AtomicU32::new(0);

fn note_wait(r: Result<u64, Errno>) {
    if r == Err(Errno::ETIMEDOUT) {
        WAIT_TIMEOUTS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A reusable barrier for `n` threads on one futex word.
pub struct Barrier {
    n: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl Barrier {
    /// A barrier for `n` threads.
    pub const fn new(n: u32) -> Self {
        Barrier { n, arrived: AtomicU32::new(0), generation: AtomicU32::new(0) }
    }

    /// Waits until all `n` threads have arrived; false if `deadline` passed first.
    pub fn wait(&self, deadline: u64) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            let _ = sys::futex_wake(&self.generation, u32::MAX >> 1);
            return true;
        }
        wait_until(&self.generation, deadline, || self.generation.load(Ordering::Acquire) != generation)
    }
}

/// The CPUs in `mask`, lowest first.
pub fn cpu_list(mask: u64) -> impl Iterator<Item = u32> {
    (0..64).filter(move |i| mask & (1 << i) != 0)
}

/// Pins the calling thread to the `i`-th CPU of `mask` (modulo their number); returns the CPU.
pub fn pin(mask: u64, i: usize) -> Result<u32, Errno> {
    let n = mask.count_ones() as usize;
    let cpu = cpu_list(mask).nth(i % n.max(1)).ok_or(Errno::EINVAL)?;
    MOVED.store(true, Ordering::Relaxed);
    sys::sched_setaffinity(1 << cpu)?;
    Ok(cpu)
}

/// Loads thread-specific values into v0, v7, v16 and v31 (caller-saved and callee-saved halves),
/// gives up the CPU `yields` times (other threads run and use their own FP/SIMD registers in
/// between, the timer tick may preempt) and checks the registers still hold them. Returns how many
/// of the 8 64-bit halves changed.
pub fn fp_regs_survive(seed: u64, yields: u32) -> u32 {
    let vals: [u64; 8] = core::array::from_fn(|i| seed.rotate_left(8 * i as u32) ^ (i as u64 * 0x0101_0101));
    let mut got = [0u64; 8];
    // SAFETY: only registers are used: v0, v7, v16, v31 are declared clobbered, x0 and x8 are the
    // system call's, and `sched_yield` touches no memory of ours. The outputs are written after the
    // loop to `got`, a local array.
    unsafe {
        asm!(
            "fmov d0, {a0}", "mov v0.d[1], {a1}",
            "fmov d7, {a2}", "mov v7.d[1], {a3}",
            "fmov d16, {a4}", "mov v16.d[1], {a5}",
            "fmov d31, {a6}", "mov v31.d[1], {a7}",
            "2: cbz {n:w}, 3f",
            "mov x8, #{yield_nr}",
            "svc #0",
            "sub {n:w}, {n:w}, #1",
            "b 2b",
            "3: mov {t}, v0.d[0]", "str {t}, [{out}]",
            "mov {t}, v0.d[1]", "str {t}, [{out}, #8]",
            "mov {t}, v7.d[0]", "str {t}, [{out}, #16]",
            "mov {t}, v7.d[1]", "str {t}, [{out}, #24]",
            "mov {t}, v16.d[0]", "str {t}, [{out}, #32]",
            "mov {t}, v16.d[1]", "str {t}, [{out}, #40]",
            "mov {t}, v31.d[0]", "str {t}, [{out}, #48]",
            "mov {t}, v31.d[1]", "str {t}, [{out}, #56]",
            a0 = in(reg) vals[0], a1 = in(reg) vals[1], a2 = in(reg) vals[2], a3 = in(reg) vals[3],
            a4 = in(reg) vals[4], a5 = in(reg) vals[5], a6 = in(reg) vals[6], a7 = in(reg) vals[7],
            n = inout(reg) yields => _,
            t = out(reg) _,
            out = in(reg) got.as_mut_ptr(),
            yield_nr = const sys::nr::SCHED_YIELD,
            out("x0") _, out("x8") _,
            out("v0") _, out("v7") _, out("v16") _, out("v31") _,
            options(nostack),
        );
    }
    sys::add_count(u64::from(yields));
    vals.iter().zip(&got).filter(|(a, b)| a != b).count() as u32
}
