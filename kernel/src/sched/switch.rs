//! Each CPU's scheduler loop, and the switch between it and a task.
//!
//! Each CPU runs [`run_cpu`]: take a runnable task whose affinity allows this CPU, let it switch
//! its address space in ([`Task::switch_in`], which marks the CPU in its process's TLB set) and
//! finish what must precede its return to EL0 ([`Task::resume`]), and enter it. The task runs until an exception from EL0 that the kernel cannot finish on the spot:
//! preemption by the tick when others wait, `sched_yield`, a blocking call, a migration, or the
//! task's end. Its user context is then saved and the CPU comes back here (`run_user`/`exit_user`
//! are the setjmp/longjmp pair). While no task runs on a CPU, TTBR0 walks are disabled there, so
//! no speculative walk can reach a page table that is being torn down.
//!
//! There is no per-task kernel stack: a task's system call or fault is handled to completion on
//! the CPU's exception stack. The trap layer takes the current task ([`with_current`]), handles
//! the exception, and hands the resulting [`Action`] to [`act`], which returns to the task, or
//! saves it and leaves for this loop.
//!
//! **Blocking.** A blocked task sits in the one wait list with what it waits for and an optional
//! deadline (a counter value). Deadlines are checked whenever a CPU picks a task and on every
//! tick; an idle CPU also programs its timer for the earliest deadline, so a sleeper wakes within
//! microseconds of it rather than at the next 10 ms tick, and no CPU spins while tasks sleep.
//!
//! **Stops.** A task whose thread group is stopped (job control) is parked, as it resumes, on
//! its group's stop channel, checking under the wait list's lock that the stop still holds; the
//! group's continuation wakes every task parked there.
//!
//! **Signals.** A task about to block checks, under the wait list's lock, whether a signal it
//! can take is pending ([`Task::may_block`]); if so it goes back to the run queue with its
//! [`Task::interrupted`] x0 instead. A sender queues the signal first, then takes a blocked
//! target out of the list (`queue::interrupt`) with that x0, whatever it waited for; the signal
//! code finishes (or restarts, per `SA_RESTART`) the call when the task resumes.
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use aarch64_cpu::registers::{ReadWriteable, Readable, TCR_EL1, TPIDR_EL0, Writeable};
use futex::wait_list::Channel;
use linux_abi::Errno;
use linux_abi::futex::FUTEX_BITSET_MATCH_ANY;
use spin::Mutex;

use super::queue::{self, EVENTS, IDLE, Queued, RUNQ, WAITING};
use super::task::{Action, Resumed, Task, Wait, WaitFor};
use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::{self, KernelContext};
use crate::cpu::{MAX_CPUS, current_cpu};
use crate::irq;

const CODE_YIELD: u64 = 1;
const CODE_BLOCKED: u64 = 2;
const CODE_EXIT: u64 = 3;

/// The task each CPU is running.
static CURRENT: [Mutex<Option<Queued>>; MAX_CPUS] = [const { Mutex::new(None) }; MAX_CPUS];
/// Counter value when each CPU last entered or was charged for its current task.
static RUN_START: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// The group (`Task::group`) of the task each CPU runs now, 0 while none: `membarrier`'s
/// targets ([`cpus_running`]).
static RUNNING: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];

/// The CPUs running a task of `group` now (bit per CPU; any group's for `None`). A CPU that
/// starts one after the caller looked has passed a full barrier first (the store below is
/// sequentially consistent), as Linux's `membarrier` relies on the scheduler's.
pub fn cpus_running(group: Option<usize>) -> u64 {
    let mut cpus = 0;
    for (cpu, running) in RUNNING.iter().enumerate() {
        let g = running.load(Ordering::SeqCst);
        if g != 0 && group.is_none_or(|want| want == g) {
            cpus |= 1 << cpu;
        }
    }
    cpus
}

struct Contexts([UnsafeCell<KernelContext>; MAX_CPUS]);
// SAFETY: each CPU uses only its own context (index = its CPU number).
unsafe impl Sync for Contexts {}
static CONTEXTS: Contexts = Contexts([const { UnsafeCell::new(KernelContext::ZERO) }; MAX_CPUS]);

/// A function queued for one CPU's scheduler loop.
type WorkSlot = Mutex<Option<fn()>>;

/// Kernel work queued for one CPU (tests use it to run code on a chosen CPU).
static KERNEL_WORK: [WorkSlot; MAX_CPUS] = [const { Mutex::new(None) }; MAX_CPUS];

#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the shootdown test runs code on a chosen CPU")
)]
/// Runs `work` on CPU `cpu` (in its scheduler loop, with interrupts masked) as soon as it is
/// between tasks or idle. Returns false if that CPU already has work queued.
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

/// Runs tasks on this CPU until `done()` holds (checked between tasks), or forever for `None`.
pub fn run_cpu(done: Option<&dyn Fn() -> bool>) {
    let cpu = current_cpu();
    loop {
        if done.is_some_and(|done| done()) {
            return;
        }
        let work = KERNEL_WORK[cpu].lock().take();
        if let Some(work) = work {
            work();
            continue;
        }
        let Some(mut task) = queue::pick(cpu) else {
            idle_wait(cpu);
            continue;
        };
        if task.exiting() || !task.switch_in(cpu) {
            leave_user(cpu);
            queue::finish(task);
            continue;
        }
        walks_on();
        TPIDR_EL0.set(*task.tpidr());
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        // A signal for the task is delivered (and the call it waited in finished) now, with its
        // address space live.
        match task.resume() {
            Resumed::Run => {}
            Resumed::Stop => {
                leave_user(cpu);
                queue::park_stopped(task);
                continue;
            }
            Resumed::Exit => {
                leave_user(cpu);
                queue::finish(task);
                continue;
            }
        }
        let regs = task.regs().clone();
        let fp = *task.fp();
        RUNNING[cpu].store(task.group(), Ordering::SeqCst);
        *CURRENT[cpu].lock() = Some(task);
        RUN_START[cpu].store(crate::arch::time::counter(), Ordering::Relaxed);
        // SAFETY: TTBR0 holds the task's address space; every exception from EL0 goes through
        // the trap layer, which returns to the task or leaves through this CPU's context.
        let code = unsafe { user::run_user(&regs, &fp, CONTEXTS.0[cpu].get()) };
        RUNNING[cpu].store(0, Ordering::SeqCst);
        leave_user(cpu);
        let task = CURRENT[cpu].lock().take();
        match (code, task) {
            (CODE_YIELD, Some(t)) => queue::enqueue(t),
            (CODE_EXIT, Some(t)) => queue::finish(t),
            _ => {} // blocked: the task is in the wait list or a rendezvous
        }
    }
}

/// Enables TTBR0 walks on this CPU: the task's address space is live while it may run here.
fn walks_on() {
    TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// This CPU runs no task any more: TTBR0 walks off (no speculative walk may reach a table being
/// torn down), and the CPU forgets the task's address space (`vmspace::leave`: its reference
/// goes, which may be the last).
fn leave_user(cpu: usize) {
    TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    crate::memory::vmspace::leave(cpu);
}

fn idle_wait(cpu: usize) {
    if crate::drivers::intc::current().is_none() {
        core::hint::spin_loop();
        return;
    }
    IDLE.fetch_or(1 << cpu, Ordering::AcqRel);
    if let Some(deadline) = queue::next_deadline() {
        irq::wake_by(deadline);
    }
    if RUNQ.lock().is_empty() && KERNEL_WORK[cpu].lock().is_none() {
        // WFI with interrupts still masked, then unmasked for the handler: a wake IPI sent after
        // the check above ends the WFI at once (see `irq::wait_for_interrupt`).
        irq::wait_for_interrupt();
    }
    IDLE.fetch_and(!(1 << cpu), Ordering::AcqRel);
}

/// Runs `f` on the task this CPU is running (`None` if none: its group was stopped meanwhile).
/// The task stays this CPU's current one throughout.
pub fn with_current<R>(f: impl FnOnce(&mut dyn Task) -> R) -> Option<R> {
    let mut current = CURRENT[current_cpu()].lock();
    current.as_mut().map(|t| f(&mut **t))
}

/// Carries out `action` for the task this CPU is running, whose exception built `frame`:
/// returns to it (`Continue`), or saves it and leaves for the scheduler loop.
pub fn act(frame: &mut TrapFrame, action: Action) {
    let cpu = current_cpu();
    match action {
        Action::Continue => {}
        Action::Yield => {
            save_context(cpu, frame);
            switch_out(cpu, CODE_YIELD)
        }
        Action::Block(wait) => block(cpu, frame, wait),
        Action::ExitThread => {
            if let Some(task) = CURRENT[cpu].lock().as_mut() {
                charge(cpu, &mut **task);
            }
            switch_out(cpu, CODE_EXIT)
        }
    }
}

/// Blocks the current task as `wait` asks, or returns to it at once when the condition is
/// already decided (the futex word changed, an event came). A task with a signal it can take
/// pending does not block: it goes back to the run queue with its interrupted x0, and the signal
/// code finishes its call before it runs again.
fn block(cpu: usize, frame: &mut TrapFrame, wait: Wait) {
    let mut waiting = WAITING.lock();
    let channel = match wait.what {
        WaitFor::Futex { key, uaddr, expected, bitset } => {
            // The word is re-read under the wait list's lock, so a waker that changed it and then
            // called FUTEX_WAKE (which takes the same lock) cannot be missed.
            if let Err(e) = word_holds(uaddr, expected) {
                frame.x[0] = e.as_ret() as u64;
                return;
            }
            frame.x[0] = 0;
            Channel::Futex { space: key.0, uaddr: key.1, bitset }
        }
        WaitFor::FutexVector => {
            let checked = CURRENT[cpu]
                .lock()
                .as_ref()
                .map(|t| t.futex_vector().iter().try_for_each(|w| word_holds(w.uaddr, w.val)));
            match checked {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    frame.x[0] = e.as_ret() as u64;
                    return;
                }
                None => return,
            }
            Channel::FutexVector
        }
        WaitFor::Timer => {
            frame.x[0] = 0;
            Channel::Timer
        }
        WaitFor::Poll { generation } => {
            // Checked under the wait list's lock: an event after this wakes the task; one since
            // the caller looked restarts the call now.
            if EVENTS.load(Ordering::Acquire) != generation {
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
            Channel::Futex { space: key, uaddr: 0, bitset: FUTEX_BITSET_MATCH_ANY }
        }
        WaitFor::Rendezvous(rendezvous) => {
            drop(waiting);
            save_context(cpu, frame);
            let Some(task) = CURRENT[cpu].lock().take() else { return };
            match rendezvous.park(task) {
                Ok(()) => switch_out(cpu, CODE_BLOCKED),
                // Already released: the task runs on at once.
                Err(task) => {
                    *CURRENT[cpu].lock() = Some(task);
                    return;
                }
            }
        }
    };
    save_context(cpu, frame);
    if let Some(mut task) = CURRENT[cpu].lock().take() {
        if task.may_block() {
            queue::push_waiter(&mut waiting, channel, wait.deadline, task);
        } else {
            let x0 = task.interrupted();
            task.regs().x[0] = x0;
            RUNQ.lock().push_back(task);
        }
    }
    drop(waiting);
    switch_out(cpu, CODE_BLOCKED)
}

/// Whether the futex word at `uaddr` (of the current address space) holds `expected`: EFAULT if
/// it cannot be read, EAGAIN if it differs.
fn word_holds(uaddr: u64, expected: u32) -> Result<(), Errno> {
    let mut word = [0u8; 4];
    user::copy_from_user(&mut word, uaddr).map_err(|_| Errno::EFAULT)?;
    if u32::from_le_bytes(word) == expected { Ok(()) } else { Err(Errno::EAGAIN) }
}

/// Charges the CPU time since the task's slice (or last charge) began to it.
fn charge(cpu: usize, task: &mut dyn Task) {
    let now = crate::arch::time::counter();
    let spent = now.saturating_sub(RUN_START[cpu].swap(now, Ordering::Relaxed));
    task.charge(spent);
}

/// Charges the task this CPU runs the time of its slice so far (Linux's tick accounting), then
/// hands it to `f` (the tick's CPU-time timers); nothing when the CPU runs no task. Called from
/// the tick, so a thread that runs for long without leaving the CPU is charged as it goes, and
/// its CPU-time clocks, timers and limits see its time within a tick.
pub fn charge_current<R>(f: impl FnOnce(&mut dyn Task) -> R) -> Option<R> {
    let cpu = current_cpu();
    let mut current = CURRENT[cpu].lock();
    let task = current.as_mut()?;
    charge(cpu, &mut **task);
    Some(f(&mut **task))
}

/// Counter ticks the current task of this CPU has run in its slice so far (not yet charged).
pub fn current_slice() -> u64 {
    crate::arch::time::counter().saturating_sub(RUN_START[current_cpu()].load(Ordering::Relaxed))
}

fn save_context(cpu: usize, frame: &mut TrapFrame) {
    // SAFETY: `frame` was built by the EL0 exception entry being handled (FpState::below's rule).
    let fp = unsafe { *FpState::below(frame) };
    if let Some(task) = CURRENT[cpu].lock().as_mut() {
        charge(cpu, &mut **task);
        let regs = task.regs();
        regs.x = frame.x;
        regs.sp = frame.sp_el0;
        regs.pc = frame.elr;
        regs.pstate = frame.spsr;
        *task.fp() = fp;
        *task.tpidr() = TPIDR_EL0.get();
    }
}

fn switch_out(cpu: usize, code: u64) -> ! {
    // SAFETY: we are on this CPU's exception stack, handling an exception from the task that
    // `run_cpu` entered with this CPU's context; nothing on the exception stack is needed again.
    unsafe { user::exit_user(code, CONTEXTS.0[cpu].get()) }
}
