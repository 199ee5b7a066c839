//! The scheduler: one run queue shared by every CPU, round-robin with a 10 ms tick, and the list
//! of blocked threads (futex waits, sleeps, console reads: `futex::wait_list::WaitList`).
//!
//! Each CPU runs [`run_cpu`]: take a runnable thread whose affinity allows this CPU, point TTBR0
//! at its process (marking the CPU in the process's TLB set), and enter it. The thread runs until
//! an exception from EL0 that the kernel cannot finish on the spot: preemption by the tick when
//! others wait, `sched_yield`, a futex wait, a migration, or the thread's end. Its user context is
//! then saved and the CPU comes back here (`enter_user`/`leave_user` are the setjmp/longjmp pair).
//! While no thread runs on a CPU, TTBR0 walks are disabled there, so no speculative walk can
//! reach a page table that is being torn down.
//!
//! **Blocking.** A blocked thread sits in one wait list with what it waits for and an optional
//! deadline (a counter value). Deadlines are checked whenever a CPU picks a thread and on every
//! tick; an idle CPU also programs its timer for the earliest deadline, so a sleeper wakes within
//! microseconds of it rather than at the next 10 ms tick, and no CPU spins while threads sleep.
//! A console read that finds no input blocks on [`WaitFor::Input`]; when input arrives its
//! system call is restarted (the PC goes back to the `svc`, the registers still hold the
//! arguments), so it is served by the same code as a read that found data at once.
//!
//! **Signals.** A thread about to block checks, under the wait list's lock, whether a signal it
//! can take is pending (`signals::may_park`); if so it goes back to the run queue with x0 =
//! -EINTR instead. A sender queues the signal first, then takes a blocked target out of the list
//! ([`interrupt`]) with x0 = -EINTR, whatever it waited for; the signal code finishes (or
//! restarts, per `SA_RESTART`) the call when the thread resumes. `rt_sigsuspend` and
//! `rt_sigtimedwait` block on [`WaitFor::Signal`], which only a signal or the deadline ends.
//!
//! **Memory.** A thread enters the scheduler only through [`admit`], which counts it against the
//! thread limit (Linux's `threads-max`, `EAGAIN`), allocates it fallibly and makes the run queue
//! and the wait list able to hold every live thread (`ENOMEM` otherwise). From then on no
//! scheduler operation allocates: the wait list hands the threads it takes to a closure rather
//! than collecting them, so a thread moving between the queues never needs memory and no program
//! can make the scheduler panic for want of heap.
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::cell::UnsafeCell;

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use futex::wait_list::{Channel, WaitList, Waiter};
use linux_abi::futex::FUTEX_BITSET_MATCH_ANY as BITSET_MATCH_ANY;
use mm::vm::{Errno, limits};

use aarch64_cpu::registers::{ReadWriteable, Readable, TCR_EL1, TPIDR_EL0, TTBR0_EL1, Writeable};
use spin::Mutex;

use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::{self, KernelContext};
use crate::irq;
use crate::memory::fallible;
use crate::process::{Action, Process, Thread};
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

/// Every blocked thread.
static WAITING: Mutex<WaitList<Box<Thread>>> = Mutex::new(WaitList::new());
/// Counter value when each CPU last entered or was charged for its current thread.
static RUN_START: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// What a blocking system call waits for, and what it then returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// `FUTEX_WAIT(_BITSET)` on the word at `uaddr`, if it still holds `expected` when checked under
    /// the wait list's lock (else EAGAIN). Returns 0 when woken, ETIMEDOUT at the deadline.
    Futex {
        /// User address of the word.
        uaddr: u64,
        /// The value the caller saw.
        expected: u32,
        /// Which wakes reach it.
        bitset: u32,
    },
    /// Nothing but the deadline (`nanosleep`): returns 0.
    Timer,
    /// Console input: the call restarts when input arrives.
    Input,
    /// `ppoll`/`pselect6`: the call restarts when console input arrives, when a kernel event
    /// ([`notify`]: a pipe changed) happens after the caller read [`event_generation`] as
    /// `generation`, and at the deadline (the call then answers itself: 0).
    Poll {
        /// The event count the caller saw before it looked at its descriptors.
        generation: u32,
    },
    /// A signal (`rt_sigsuspend`, `rt_sigtimedwait`): x0 is -EINTR when one came, -ETIMEDOUT at
    /// the deadline; the signal code finishes the call as the thread resumes.
    Signal,
    /// A kernel event on `key` ([`notify`]: a child exited, a pipe changed), if none happened
    /// since the caller read [`event_generation`] as `generation` (checked under the wait
    /// list's lock, as a futex word is). The call restarts when woken, so it is served by the
    /// same code as one that found its condition at once; a signal ends it with -EINTR.
    Event {
        /// What is waited for (an odd or offset address: never a user futex's key).
        key: usize,
        /// The event count the caller saw before it looked.
        generation: u32,
    },
    /// `vfork`: the parent's thread is parked in the child (`family::park_vfork_parent`) until
    /// the child execs or exits; signals do not end the wait (Linux's killable wait). x0 holds
    /// the child's pid.
    Vfork {
        /// The child.
        pid: u32,
    },
}

/// Kernel events so far ([`WaitFor::Event`]).
static EVENTS: AtomicU32 = AtomicU32::new(0);

/// The count of kernel events: read it before checking a condition, then block on
/// [`WaitFor::Event`] with it.
pub fn event_generation() -> u32 {
    EVENTS.load(Ordering::Acquire)
}

/// A kernel event on `key` happened (the caller changed the state first): every thread blocked
/// on it, and every poll (which may watch it), restarts its system call.
pub fn notify(key: usize) {
    let mut waiting = WAITING.lock();
    EVENTS.fetch_add(1, Ordering::AcqRel);
    let restart = |mut t: Box<Thread>| {
        t.regs.pc -= 4;
        make_runnable(t);
    };
    let n = waiting.wake_each(key, 0, BITSET_MATCH_ANY, u64::MAX, restart)
        + waiting.wake_channel_each(Channel::Poll, restart);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
}

/// A blocking request: what, and until when (a counter value; `None` = no timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// What wakes the thread.
    pub what: WaitFor,
    /// When it stops waiting anyway.
    pub deadline: Option<u64>,
}

/// The futex key of a process's address space (Linux keys private futexes by the `mm`: a
/// vfork child and its parent share it). 0 for a process whose space is gone, which no waiter
/// can have: a waiting thread's process keeps its space.
fn space_key(process: &Process) -> usize {
    process.space().map_or(0, |space| Arc::as_ptr(&space) as usize)
}

struct Contexts([UnsafeCell<KernelContext>; MAX_CPUS]);
// SAFETY: each CPU uses only its own context (index = its CPU number).
unsafe impl Sync for Contexts {}
static CONTEXTS: Contexts = Contexts([const { UnsafeCell::new(KernelContext::ZERO) }; MAX_CPUS]);

/// Threads admitted and not finished, every process.
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The most threads that may exist at once: Linux's `threads-max` for this machine's memory
/// (`mm::vm::limits::max_threads`: 1024 for 128 MiB, 4096 for 512 MiB; a quarter of that with
/// 64 KiB pages, whose kernel stacks Linux makes one page).
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

/// Makes the run queue and the wait list able to hold `live` threads without allocating.
fn reserve_queues(live: usize) -> Result<(), Errno> {
    let mut q = RUNQ.lock();
    let need = live.saturating_sub(q.len());
    q.try_reserve(need).map_err(|_| Errno::ENOMEM)?;
    drop(q);
    WAITING.lock().try_reserve(live).map_err(|_| Errno::ENOMEM)
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
    expire_waits();
    !RUNQ.lock().is_empty()
}

fn pick(cpu: usize) -> Option<Box<Thread>> {
    expire_waits();
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
        // The first process and every process it started (orphans are its children).
        if until.is_some_and(|p| p.done.load(Ordering::Acquire) && crate::process::family::live() == 0) {
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
        // A thread that is not exiting belongs to a process that holds its space (the last
        // thread's exit drops it), so the space outlives this run of the thread. No clone of
        // the process is kept here: the thread's own reference is the one `finish` drops before
        // the process stops counting as live, and a clone living to the end of this iteration
        // let `run_cpu(Some(..))` on another CPU return with the process still listed.
        let Some(space) = thread.process.space() else {
            finish(thread);
            continue;
        };
        thread.process.cpus.fetch_or(1 << cpu, Ordering::AcqRel);
        let asid = crate::memory::asids::switch_to(space.asid(), cpu);
        TTBR0_EL1.set(crate::arch::aarch64::translation::ttbr(space.root(), asid));
        drop(space);
        TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
        TPIDR_EL0.set(thread.tpidr);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        // A signal for the thread is delivered (and the call it waited in finished) now, with
        // its address space live.
        let mut thread = thread;
        if crate::process::signals::on_resume(&mut thread) == Action::ExitThread {
            TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
            aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
            finish(thread);
            continue;
        }
        let regs = thread.regs.clone();
        let fp = thread.fp;
        *CURRENT[cpu].lock() = Some(thread);
        RUN_START[cpu].store(crate::arch::time::counter(), Ordering::Relaxed);
        // SAFETY: TTBR0 holds the thread's address space; every exception from EL0 goes through
        // `handle`, which returns to the thread or leaves through this CPU's context.
        let code = unsafe { user::run_user(&regs, &fp, CONTEXTS.0[cpu].get()) };
        TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        let thread = CURRENT[cpu].lock().take();
        match (code, thread) {
            (CODE_YIELD, Some(t)) => enqueue(t),
            (CODE_EXIT, Some(t)) => finish(t),
            _ => {} // blocked: the thread is in the wait list
        }
    }
}

fn idle_wait(cpu: usize) {
    if crate::drivers::gic::current().is_none() {
        core::hint::spin_loop();
        return;
    }
    IDLE.fetch_or(1 << cpu, Ordering::AcqRel);
    if let Some(deadline) = WAITING.lock().next_deadline() {
        irq::wake_by(deadline);
    }
    if RUNQ.lock().is_empty() && KERNEL_WORK[cpu].lock().is_none() {
        // WFI with interrupts still masked, then unmasked for the handler: a wake IPI sent after
        // the check above ends the WFI at once (see `irq::wait_for_interrupt`).
        irq::wait_for_interrupt();
    }
    IDLE.fetch_and(!(1 << cpu), Ordering::AcqRel);
}

fn finish(thread: Box<Thread>) {
    let process = thread.process.clone();
    process.signals.thread_gone(thread.tid);
    drop(thread);
    LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
    let torn_down = crate::process::thread_exited(&process);
    // This CPU's reference goes before the process stops counting as live: once none is live,
    // the CPU in `run_cpu(Some(..))` returns, and its caller may at once find the process table
    // empty (the test image checks it after every program). Counting down first let a process
    // whose last reference was this one still be listed then, while this CPU was held up.
    drop(process);
    if torn_down {
        crate::process::family::ended();
    }
}

/// Entry from the vectors for every exception from EL0.
pub fn handle(frame: &mut TrapFrame, kind: u64) {
    let cpu = current_cpu();
    let action = {
        let mut current = CURRENT[cpu].lock();
        match current.as_mut() {
            Some(thread) => crate::process::user_exception(thread, frame, kind),
            None => Action::ExitThread,
        }
    };
    match action {
        Action::Continue => {}
        Action::Yield => {
            save_context(cpu, frame);
            switch_out(cpu, CODE_YIELD)
        }
        Action::Block(wait) => block(cpu, frame, wait),
        Action::ExitThread => {
            if let Some(thread) = CURRENT[cpu].lock().as_mut() {
                charge(cpu, thread);
            }
            switch_out(cpu, CODE_EXIT)
        }
    }
}

use crate::syscall::errno::{EAGAIN, EFAULT, EINTR, ETIMEDOUT};

/// Blocks the current thread as `wait` asks, or returns to it at once when the condition is
/// already decided (the futex word changed, input is there). A thread with a signal it can take
/// pending does not block: it goes back to the run queue with x0 = -EINTR, and the signal code
/// finishes its call before it runs again.
fn block(cpu: usize, frame: &mut TrapFrame, wait: Wait) {
    let mut waiting = WAITING.lock();
    let channel = match wait.what {
        WaitFor::Futex { uaddr, expected, bitset } => {
            let mut word = [0u8; 4];
            // The word is re-read under the wait list's lock, so a waker that changed it and then
            // called FUTEX_WAKE (which takes the same lock) cannot be missed.
            match user::copy_from_user(&mut word, uaddr) {
                Err(_) => {
                    frame.x[0] = (-EFAULT) as u64;
                    return;
                }
                Ok(()) if u32::from_le_bytes(word) != expected => {
                    frame.x[0] = (-EAGAIN) as u64;
                    return;
                }
                Ok(()) => {}
            }
            frame.x[0] = 0;
            let Some(process) = CURRENT[cpu].lock().as_ref().map(|t| t.process.clone()) else { return };
            Channel::Futex { space: space_key(&process), uaddr, bitset }
        }
        WaitFor::Timer => {
            frame.x[0] = 0;
            Channel::Timer
        }
        WaitFor::Input => {
            // Checked under the wait list's lock: input that arrives after this wakes the thread.
            if crate::fs::tty::readable() {
                frame.elr -= 4; // restart the call now: it finds the input
                return;
            }
            Channel::Input
        }
        WaitFor::Poll { generation } => {
            // Both checked under the wait list's lock: input or a pipe change after this wakes
            // the thread; one since the caller looked restarts the call now.
            if crate::fs::tty::readable() || EVENTS.load(Ordering::Acquire) != generation {
                frame.elr -= 4;
                return;
            }
            Channel::Poll
        }
        WaitFor::Signal => Channel::Signal,
        WaitFor::Event { key, generation } => {
            if EVENTS.load(Ordering::Acquire) != generation {
                frame.elr -= 4; // something happened since the caller looked: look again
                return;
            }
            Channel::Futex { space: key, uaddr: 0, bitset: BITSET_MATCH_ANY }
        }
        WaitFor::Vfork { pid } => {
            drop(waiting);
            save_context(cpu, frame);
            let Some(thread) = CURRENT[cpu].lock().take() else { return };
            match crate::process::family::park_vfork_parent(thread, pid) {
                Ok(()) => switch_out(cpu, CODE_BLOCKED),
                // The child already let go: the thread runs on at once.
                Err(thread) => {
                    *CURRENT[cpu].lock() = Some(thread);
                    return;
                }
            }
        }
    };
    save_context(cpu, frame);
    if let Some(mut thread) = CURRENT[cpu].lock().take() {
        let futex_wait = match wait.what {
            WaitFor::Futex { uaddr, .. } => Some((uaddr, wait.deadline.is_some())),
            _ => None,
        };
        if crate::process::signals::may_park(&thread, futex_wait) {
            // Never allocates: `admit` made room in the list for every live thread.
            waiting.push(Waiter { channel, deadline: wait.deadline, item: thread });
        } else {
            thread.regs.x[0] = interrupted_x0(&mut thread);
            RUNQ.lock().push_back(thread);
        }
    }
    drop(waiting);
    switch_out(cpu, CODE_BLOCKED)
}

/// Charges the CPU time since the thread's slice (or last charge) began to it and its process.
fn charge(cpu: usize, thread: &mut Thread) {
    let now = crate::arch::time::counter();
    let spent = now.saturating_sub(RUN_START[cpu].swap(now, Ordering::Relaxed));
    thread.posix.cpu_ticks += spent;
    thread.process.posix.charge(spent);
}

/// The CPU time (counter ticks) of `thread`, running on this CPU, including its current slice.
pub fn thread_cpu_ticks(thread: &Thread) -> u64 {
    thread.posix.cpu_ticks + current_slice()
}

/// The CPU time (counter ticks) of `process`, with the caller's current slice.
pub fn process_cpu_ticks(process: &Process) -> u64 {
    process.posix.cpu_ticks.load(Ordering::Relaxed) + current_slice()
}

fn current_slice() -> u64 {
    crate::arch::time::counter().saturating_sub(RUN_START[current_cpu()].load(Ordering::Relaxed))
}

fn save_context(cpu: usize, frame: &mut TrapFrame) {
    // SAFETY: `frame` was built by the EL0 exception entry being handled (FpState::below's rule).
    let fp = unsafe { *FpState::below(frame) };
    if let Some(thread) = CURRENT[cpu].lock().as_mut() {
        charge(cpu, thread);
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

/// Wakes up to `count` threads of `process` waiting on `uaddr` with a bitset meeting `bitset`;
/// returns how many.
pub fn futex_wake(process: &Arc<Process>, uaddr: u64, bitset: u32, count: u64) -> u64 {
    let n = WAITING.lock().wake_each(space_key(process), uaddr, bitset, count, make_runnable);
    if n > 0 {
        wake_idle();
    }
    n
}

/// Puts a thread taken from the wait list in the run queue (the caller holds the wait list's
/// lock: locks are taken in that order) without waking a CPU; the caller does once it is done.
fn make_runnable(thread: Box<Thread>) {
    RUNQ.lock().push_back(thread);
}

/// `FUTEX_CMP_REQUEUE` (`expected` = `Some`) and `FUTEX_REQUEUE`: if the word at `uaddr` still
/// holds `expected` (checked under the wait list's lock, as a waiter checks it), wakes `nwake`
/// waiters and moves up to `nrequeue` others to `uaddr2`. Returns woken + moved, or the errno.
pub fn futex_requeue(
    process: &Arc<Process>,
    uaddr: u64,
    uaddr2: u64,
    nwake: u64,
    nrequeue: u64,
    expected: Option<u32>,
) -> Result<u64, i64> {
    let mut waiting = WAITING.lock();
    if let Some(expected) = expected {
        let mut word = [0u8; 4];
        user::copy_from_user(&mut word, uaddr).map_err(|_| EFAULT)?;
        if u32::from_le_bytes(word) != expected {
            return Err(EAGAIN);
        }
    }
    let (n, moved) = waiting.requeue_each(space_key(process), uaddr, uaddr2, nwake, nrequeue, make_runnable);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
    Ok(n + moved)
}

/// `FUTEX_WAKE_OP`: under the wait list's lock, applies `op` to the word at `uaddr2`, wakes `nwake`
/// waiters on `uaddr` and, if the old value passes `op`'s test, `nwake2` on `uaddr2`. The
/// read-modify-write is atomic with respect to other futex calls, not to a user thread's own
/// atomic instructions on that word (the kernel has no unprivileged exclusive access).
pub fn futex_wake_op(
    process: &Arc<Process>,
    uaddr: u64,
    uaddr2: u64,
    nwake: u64,
    nwake2: u64,
    op: futex::op::WakeOp,
) -> Result<u64, i64> {
    let mut waiting = WAITING.lock();
    let mut word = [0u8; 4];
    user::copy_from_user(&mut word, uaddr2).map_err(|_| EFAULT)?;
    let old = u32::from_le_bytes(word);
    user::copy_to_user(uaddr2, &op.apply(old).to_le_bytes()).map_err(|_| EFAULT)?;
    let key = space_key(process);
    let mut n = waiting.wake_each(key, uaddr, BITSET_MATCH_ANY, nwake, make_runnable);
    if op.test(old) {
        n += waiting.wake_each(key, uaddr2, BITSET_MATCH_ANY, nwake2, make_runnable);
    }
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
    Ok(n)
}

/// Console input arrived: every thread waiting for it (a read or a poll) restarts its system
/// call.
pub fn wake_input_waiters() {
    let restart = |mut t: Box<Thread>| {
        t.regs.pc -= 4;
        make_runnable(t);
    };
    let mut waiting = WAITING.lock();
    let n = waiting.wake_channel_each(Channel::Input, restart)
        + waiting.wake_channel_each(Channel::Poll, restart);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
}

fn expire_waits() {
    let now = crate::arch::time::counter();
    let n = WAITING.lock().expire_each(now, |mut w| {
        match w.channel {
            Channel::Futex { .. } | Channel::Signal => w.item.regs.x[0] = (-ETIMEDOUT) as u64,
            Channel::Timer | Channel::Input => w.item.regs.x[0] = 0, // a sleep that ended
            // A poll restarts and answers itself: the sets are written back, 0 returned.
            Channel::Poll => w.item.regs.pc -= 4,
        }
        make_runnable(w.item);
    });
    if n > 0 {
        wake_idle();
    }
}

/// A signal for thread `tid` of `process`: if it is blocked (whatever it waits for) it goes back
/// to the run queue with x0 = -EINTR, not restarted as an input wake-up would; the signal code
/// finishes its call when it resumes.
pub fn interrupt(process: &Process, tid: u32) {
    let woken = WAITING.lock().take_first(|t| t.tid == tid && core::ptr::eq(&*t.process, process));
    if let Some(mut w) = woken {
        w.item.regs.x[0] = interrupted_x0(&mut w.item);
        enqueue(w.item);
    }
}

/// x0 of a thread whose wait a signal ends: -EINTR, or the bytes a blocking pipe write had
/// written (Linux's `pipe_write` returns them rather than restart). What a restart would have
/// kept is dropped: the call is over.
fn interrupted_x0(thread: &mut Thread) -> u64 {
    thread.poll_deadline = None;
    match core::mem::take(&mut thread.pipe_written) {
        0 => (-EINTR) as u64,
        n => n,
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
        let waiting = WAITING.lock().take_first(|t| Arc::ptr_eq(&t.process, process));
        let Some(w) = waiting else { break };
        finish(w.item);
    }
    kick_cpus(process);
}
