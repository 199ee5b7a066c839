//! The scheduler: one run queue shared by every CPU, round-robin with a 10 ms tick, and futex
//! wait queues.
//!
//! Each CPU runs [`run_cpu`]: take a runnable thread whose affinity allows this CPU, point TTBR0
//! at its process (marking the CPU in the process's TLB set), and enter it. The thread runs until
//! an exception from EL0 that the kernel cannot finish on the spot: preemption by the tick when
//! others wait, `sched_yield`, a futex wait, a migration, or the thread's end. Its user context is
//! then saved and the CPU comes back here (`enter_user`/`leave_user` are the setjmp/longjmp pair).
//! While no thread runs on a CPU, TTBR0 walks are disabled there, so no speculative walk can
//! reach a page table that is being torn down.
//!
//! Memory: a thread enters the scheduler only through [`admit`], which counts it against the
//! thread limit (Linux's `threads-max`, `EAGAIN`), allocates it fallibly and makes the run queue
//! and the futex queue able to hold every live thread (`ENOMEM` otherwise). From then on no
//! scheduler operation allocates: a thread moving between queues never needs memory, so no
//! program can make the scheduler panic for want of heap.
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use mm::vm::{Errno, fallible, limits};

use aarch64_cpu::registers::{ReadWriteable, Readable, TCR_EL1, TPIDR_EL0, TTBR0_EL1, Writeable};
use spin::Mutex;

use super::{Action, Process, Thread};
use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::{self, KernelContext};
use crate::irq;
use crate::smp::{MAX_CPUS, current_cpu};

const CODE_YIELD: u64 = 1;
const CODE_BLOCKED: u64 = 2;
const CODE_EXIT: u64 = 3;

/// Runnable threads, oldest first.
static RUNQ: Mutex<VecDeque<Box<Thread>>> = Mutex::new(VecDeque::new());
/// The thread each CPU is running.
static CURRENT: [Mutex<Option<Box<Thread>>>; MAX_CPUS] = [const { Mutex::new(None) }; MAX_CPUS];
/// CPUs waiting for work (bit per CPU).
static IDLE: AtomicU64 = AtomicU64::new(0);

/// A thread blocked in `FUTEX_WAIT`.
struct Waiter {
    uaddr: u64,
    deadline: Option<u64>,
    thread: Box<Thread>,
}

static FUTEX: Mutex<Vec<Waiter>> = Mutex::new(Vec::new());
/// Waiters in [`FUTEX`] with a deadline: the scheduler scans for expired ones only when there
/// are some (thousands of untimed waiters must not cost every scheduling decision a scan).
static TIMED_WAITERS: AtomicUsize = AtomicUsize::new(0);

/// Removes waiter `i` (the caller holds the queue's lock), keeping [`TIMED_WAITERS`] exact.
fn take_waiter(futex: &mut Vec<Waiter>, i: usize) -> Waiter {
    let w = futex.swap_remove(i);
    if w.deadline.is_some() {
        TIMED_WAITERS.fetch_sub(1, Ordering::AcqRel);
    }
    w
}

struct Contexts([UnsafeCell<KernelContext>; MAX_CPUS]);
// SAFETY: each CPU uses only its own context (index = its CPU number).
unsafe impl Sync for Contexts {}
static CONTEXTS: Contexts = Contexts([const { UnsafeCell::new(KernelContext::ZERO) }; MAX_CPUS]);

/// Threads admitted and not finished, every process.
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The most threads that may exist at once: Linux's `threads-max` for this machine's memory
/// (`mm::vm::limits::max_threads`: 1024 for 128 MiB, 4096 for 512 MiB).
pub fn max_threads() -> usize {
    let frames = crate::memory::frames::usage().1 as u64;
    limits::max_threads(frames).min(usize::MAX as u64) as usize
}

/// Threads that exist now.
pub fn live_threads() -> usize {
    LIVE_THREADS.load(Ordering::Acquire)
}

/// Admits a new thread and makes it runnable.
///
/// # Errors
/// `EAGAIN` at the thread limit (Linux's `nr_threads >= max_threads`); `ENOMEM` when the heap
/// cannot hold the thread or the queue room for it. Nothing changes on error.
pub fn admit(thread: Thread) -> Result<(), Errno> {
    let limit = max_threads();
    let live = LIVE_THREADS
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
        .map_err(|_| Errno::EAGAIN)?
        + 1;
    let admitted = fallible::boxed(thread).ok_or(Errno::ENOMEM).and_then(|t| {
        reserve_queues(live)?;
        Ok(t)
    });
    match admitted {
        Ok(t) => {
            enqueue(t);
            Ok(())
        }
        Err(e) => {
            LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
            Err(e)
        }
    }
}

/// Makes the run queue and the futex queue able to hold `live` threads without allocating.
fn reserve_queues(live: usize) -> Result<(), Errno> {
    let mut q = RUNQ.lock();
    let need = live.saturating_sub(q.len());
    q.try_reserve(need).map_err(|_| Errno::ENOMEM)?;
    drop(q);
    let mut f = FUTEX.lock();
    let need = live.saturating_sub(f.len());
    fallible::reserve(&mut f, need)
}

/// Makes `thread` runnable and wakes an idle CPU. Never allocates: [`admit`] made room for every
/// live thread.
pub fn enqueue(thread: Box<Thread>) {
    RUNQ.lock().push_back(thread);
    wake_idle();
}

fn wake_idle() {
    let idle = IDLE.load(Ordering::Acquire) & !(1 << current_cpu());
    for cpu in 0..MAX_CPUS {
        if idle & (1 << cpu) != 0 {
            irq::send_ipi(cpu, irq::IPI_WAKE);
        }
    }
}

/// Whether a thread interrupted by a tick should give way (someone is waiting to run).
pub fn should_preempt() -> bool {
    !RUNQ.lock().is_empty()
}

fn pick(cpu: usize) -> Option<Box<Thread>> {
    expire_futex_waits();
    let mut q = RUNQ.lock();
    let index = q.iter().position(|t| t.affinity & (1 << cpu) != 0)?;
    q.remove(index)
}

/// A function queued for one CPU's scheduler loop.
type WorkSlot = Mutex<Option<fn()>>;

/// Kernel work queued for one CPU (tests use it to run code on a chosen CPU).
static KERNEL_WORK: [WorkSlot; MAX_CPUS] = [const { Mutex::new(None) }; MAX_CPUS];

#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the shootdown test runs code on a chosen CPU")
)]
/// Runs `work` on CPU `cpu` (in its scheduler loop, with interrupts masked) as soon as it is
/// between threads or idle. Returns false if that CPU already has work queued.
pub fn run_on(cpu: usize, work: fn()) -> bool {
    let mut slot = KERNEL_WORK[cpu].lock();
    if slot.is_some() {
        return false;
    }
    *slot = Some(work);
    drop(slot);
    irq::send_ipi(cpu, irq::IPI_WAKE);
    true
}

/// Runs threads on this CPU until `until` is done (or forever for `None`).
pub fn run_cpu(until: Option<&Arc<Process>>) {
    let cpu = current_cpu();
    loop {
        if until.is_some_and(|p| p.done.load(Ordering::Acquire)) {
            return;
        }
        let work = KERNEL_WORK[cpu].lock().take();
        if let Some(work) = work {
            work();
            continue;
        }
        let Some(thread) = pick(cpu) else {
            idle_wait(cpu);
            continue;
        };
        if thread.process.exiting.load(Ordering::Acquire) {
            finish(thread);
            continue;
        }
        let process = thread.process.clone();
        process.cpus.fetch_or(1 << cpu, Ordering::AcqRel);
        let asid = crate::memory::asids::switch_to(&process.asid, cpu);
        TTBR0_EL1.set(process.root | (u64::from(asid) << 48));
        TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
        TPIDR_EL0.set(thread.tpidr);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        // A signal for the thread is delivered (and the call it waited in finished) now, with
        // its address space live.
        let mut thread = thread;
        if super::signals::on_resume(&mut thread) == Action::ExitThread {
            TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
            aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
            finish(thread);
            continue;
        }
        let regs = thread.regs.clone();
        let fp = thread.fp;
        *CURRENT[cpu].lock() = Some(thread);
        // SAFETY: TTBR0 holds the thread's address space; every exception from EL0 goes through
        // `handle`, which returns to the thread or leaves through this CPU's context.
        let code = unsafe { user::run_user(&regs, &fp, CONTEXTS.0[cpu].get()) };
        TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        let thread = CURRENT[cpu].lock().take();
        match (code, thread) {
            (CODE_YIELD, Some(t)) => enqueue(t),
            (CODE_EXIT, Some(t)) => finish(t),
            _ => {} // blocked: the thread is in a futex queue
        }
    }
}

fn idle_wait(cpu: usize) {
    if crate::drivers::gic::current().is_none() {
        core::hint::spin_loop();
        return;
    }
    IDLE.fetch_or(1 << cpu, Ordering::AcqRel);
    if RUNQ.lock().is_empty() && KERNEL_WORK[cpu].lock().is_none() {
        // WFI with IRQs still masked: a wake IPI sent after the check above is pending and ends
        // the WFI at once (WFI wakes on a pending interrupt whatever PSTATE.I says); only then
        // are IRQs unmasked so the handler runs. Unmasking first would let the IPI be taken just
        // before the WFI, which would then sleep until the next tick.
        // SAFETY: the handler is ordinary Rust, so caller-saved registers are declared clobbered.
        unsafe {
            core::arch::asm!(
                "wfi",
                "msr daifclr, #2",
                "isb",
                "msr daifset, #2",
                options(nostack),
                clobber_abi("C")
            )
        };
    }
    IDLE.fetch_and(!(1 << cpu), Ordering::AcqRel);
}

fn finish(thread: Box<Thread>) {
    let process = thread.process.clone();
    process.signals.thread_gone(thread.tid);
    drop(thread);
    LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
    super::thread_exited(&process);
}

/// Entry from the vectors for every exception from EL0.
pub fn handle(frame: &mut TrapFrame, kind: u64) {
    let cpu = current_cpu();
    let action = {
        let mut current = CURRENT[cpu].lock();
        match current.as_mut() {
            Some(thread) => super::user_exception(thread, frame, kind),
            None => Action::ExitThread,
        }
    };
    match action {
        Action::Continue => {}
        Action::Yield => {
            save_context(cpu, frame);
            switch_out(cpu, CODE_YIELD)
        }
        Action::FutexWait { uaddr, expected } => {
            let futex = FUTEX.lock();
            let mut word = [0u8; 4];
            // The word is re-read under the futex lock, so a waker that changed it and then called
            // FUTEX_WAKE (which takes the same lock) cannot be missed.
            match user::copy_from_user(&mut word, uaddr) {
                Err(_) => frame.x[0] = (-EFAULT) as u64,
                Ok(()) if u32::from_le_bytes(word) != expected => frame.x[0] = (-EAGAIN) as u64,
                Ok(()) => {
                    frame.x[0] = 0;
                    park(cpu, frame, futex, uaddr)
                }
            }
        }
        Action::SignalWait => park(cpu, frame, FUTEX.lock(), super::signals::SIGNAL_WAIT),
        Action::ExitThread => switch_out(cpu, CODE_EXIT),
    }
}

/// Saves the thread's context and parks it on `uaddr` (a futex word, or `signals::SIGNAL_WAIT`),
/// with the deadline its call left in [`PENDING_DEADLINE`]. If a signal it can take is already
/// pending it goes back to the run queue instead, with x0 = -EINTR: the signal code finishes or
/// restarts the call before it runs again.
fn park(cpu: usize, frame: &mut TrapFrame, mut futex: spin::MutexGuard<'_, Vec<Waiter>>, uaddr: u64) -> ! {
    save_context(cpu, frame);
    let deadline = PENDING_DEADLINE[cpu].swap(0, Ordering::AcqRel);
    if let Some(mut thread) = CURRENT[cpu].lock().take() {
        let futex_wait = (uaddr != super::signals::SIGNAL_WAIT).then_some((uaddr, deadline != 0));
        if super::signals::may_park(&thread, futex_wait) {
            if deadline != 0 {
                TIMED_WAITERS.fetch_add(1, Ordering::AcqRel);
            }
            futex.push(Waiter { uaddr, deadline: (deadline != 0).then_some(deadline), thread });
        } else {
            thread.regs.x[0] = (-EINTR) as u64;
            RUNQ.lock().push_back(thread);
        }
    }
    drop(futex);
    switch_out(cpu, CODE_BLOCKED)
}

/// A signal for thread `tid` of `process`: if it is parked (futex or signal wait) it goes back
/// to the run queue with x0 = -EINTR; the signal code finishes its call when it resumes.
pub fn interrupt(process: &Process, tid: u32) {
    let woken = {
        let mut futex = FUTEX.lock();
        let at = futex.iter().position(|w| w.thread.tid == tid && core::ptr::eq(&*w.thread.process, process));
        at.map(|i| take_waiter(&mut futex, i).thread)
    };
    if let Some(mut thread) = woken {
        thread.regs.x[0] = (-EINTR) as u64;
        enqueue(thread);
    }
}

/// Interrupts the other CPUs that may be running threads of `process`, so each enters the
/// kernel (and takes a signal just sent, or stops if the process is exiting).
pub fn kick_cpus(process: &Process) {
    let me = current_cpu();
    let cpus = process.cpus.load(Ordering::Acquire);
    for cpu in 0..MAX_CPUS {
        if cpu != me && cpus & (1 << cpu) != 0 {
            irq::send_ipi(cpu, irq::IPI_WAKE);
        }
    }
}

use super::syscall::errno::{EAGAIN, EFAULT, EINTR, ETIMEDOUT};

/// Deadline (counter value) of the futex wait this CPU's thread is entering, set by the system
/// call just before it returns [`Action::FutexWait`].
pub static PENDING_DEADLINE: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

fn save_context(cpu: usize, frame: &mut TrapFrame) {
    // SAFETY: `frame` was built by the EL0 exception entry, which saved the FP state below it.
    let fp = unsafe { *FpState::below(frame) };
    if let Some(thread) = CURRENT[cpu].lock().as_mut() {
        thread.regs.x = frame.x;
        thread.regs.sp = frame.sp_el0;
        thread.regs.pc = frame.elr;
        thread.regs.pstate = frame.spsr;
        thread.fp = fp;
        thread.tpidr = TPIDR_EL0.get();
    }
}

fn switch_out(cpu: usize, code: u64) -> ! {
    // SAFETY: we are on this CPU's exception stack, handling an exception from the thread that
    // `run_cpu` entered with this CPU's context; nothing on the exception stack is needed again.
    unsafe { user::exit_user(code, CONTEXTS.0[cpu].get()) }
}

/// Wakes up to `count` threads of `process` waiting on `uaddr`; returns how many. Each moves
/// from the futex queue straight to the run queue (locks taken in that order), so nothing is
/// allocated.
pub fn futex_wake(process: &Arc<Process>, uaddr: u64, count: u64) -> u64 {
    let mut n = 0;
    let mut futex = FUTEX.lock();
    let mut i = 0;
    while i < futex.len() && n < count {
        if futex[i].uaddr == uaddr && Arc::ptr_eq(&futex[i].thread.process, process) {
            RUNQ.lock().push_back(take_waiter(&mut futex, i).thread);
            n += 1;
        } else {
            i += 1;
        }
    }
    drop(futex);
    if n > 0 {
        wake_idle();
    }
    n
}

fn expire_futex_waits() {
    if TIMED_WAITERS.load(Ordering::Acquire) == 0 {
        return;
    }
    let now = crate::arch::time::counter();
    let mut futex = FUTEX.lock();
    let mut i = 0;
    let mut woke = false;
    while i < futex.len() {
        if futex[i].deadline.is_some_and(|d| d <= now) {
            let mut w = take_waiter(&mut futex, i);
            w.thread.regs.x[0] = (-ETIMEDOUT) as u64;
            RUNQ.lock().push_back(w.thread);
            woke = true;
        } else {
            i += 1;
        }
    }
    drop(futex);
    if woke {
        wake_idle();
    }
}

/// Stops every thread of `process`: queued and waiting ones now, running ones at their next
/// kernel entry (they are sent a wake IPI, whose interrupt from EL0 finds `exiting` set). One
/// thread at a time, each finished outside the queue locks (the last one tears the process
/// down), with no list allocated.
pub fn stop_process(process: &Arc<Process>) {
    loop {
        let queued = {
            let mut q = RUNQ.lock();
            q.iter().position(|t| Arc::ptr_eq(&t.process, process)).and_then(|i| q.remove(i))
        };
        let Some(t) = queued else { break };
        finish(t);
    }
    loop {
        let waiting = {
            let mut futex = FUTEX.lock();
            let i = futex.iter().position(|w| Arc::ptr_eq(&w.thread.process, process));
            i.map(|i| take_waiter(&mut futex, i))
        };
        let Some(w) = waiting else { break };
        finish(w.thread);
    }
    kick_cpus(process);
}
