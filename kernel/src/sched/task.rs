//! What the scheduler knows of a thread: the [`Task`] trait, and what a system call or an exception
//! asks of the scheduler when it is done ([`Action`], [`Wait`]).
//!
//! The scheduler is a mechanism: it queues tasks, switches between them, blocks and wakes them.
//! It does not know what a process is. A thread of a process (`process::Thread`) implements
//! [`Task`], and the scheduler reaches the process layer only through these methods: which CPUs
//! the thread may run on, how to switch its address space in, whether a signal should stop it
//! from blocking, what ends its life. So `sched` sits below `process` in the kernel's layers, and
//! the calls it makes upward are these trait calls, not imports.
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::any::Any;

use spin::Mutex;

use linux_abi::Errno;

use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::UserRegs;

/// A thread the scheduler can run.
pub trait Task: Send + 'static {
    /// Thread id (for signals aimed at one thread).
    fn tid(&self) -> u32;
    /// The thread group (process) it belongs to, as an opaque identity: tasks of one group are
    /// stopped together and signalled as one.
    fn group(&self) -> usize;
    /// The words of a `futex_waitv` it is in ([`WaitFor::FutexVector`]).
    fn futex_vector(&self) -> &[VectorWord];
    /// CPUs it may run on (bit per CPU).
    fn affinity(&self) -> u64;
    /// Its saved registers.
    fn regs(&mut self) -> &mut UserRegs;
    /// Its saved FP/SIMD registers.
    fn fp(&mut self) -> &mut FpState;
    /// Its saved thread pointer (TPIDR_EL0).
    fn tpidr(&mut self) -> &mut u64;
    /// Charges `ticks` of counter time it ran (to it and its group).
    fn charge(&mut self, ticks: u64);
    /// Its group is ending: it must not run again.
    fn exiting(&self) -> bool;
    /// Puts its address space in this CPU's TTBR0 (`cpu`: this CPU) through
    /// `memory::vmspace::switch_to`, marking the CPU as one that may cache its translations; the
    /// caller enables TTBR0 walks afterwards, and forgets the space when the task leaves the CPU.
    /// False: it has no address space any more and must end instead.
    fn switch_in(&mut self, cpu: usize) -> bool;
    /// With its address space live: does what must happen before it returns to EL0 (a pending
    /// signal delivered, a waited call finished), and says whether it runs, stops (its group is
    /// stopped) or must end instead (a fatal signal).
    fn resume(&mut self) -> Resumed;
    /// Whether it may block now (under the wait list's lock): false when a signal it can take is
    /// pending.
    fn may_block(&self) -> bool;
    /// Whether its group is stopped (job control), checked under the wait list's lock before it
    /// parks as stopped, so that a continuation in between is not missed.
    fn stop_pending(&self) -> bool;
    /// Its x0 when a signal ends its wait: -EINTR, or what the call must return instead (the
    /// bytes a blocking write had moved). The task remembers that it was interrupted: as it
    /// resumes, its call is finished as its restart class says.
    fn interrupted(&mut self) -> u64;
    /// It has run for the last time: its group forgets it (the process layer's teardown).
    fn exit(self: Box<Self>);
    /// The concrete thread, for the layer that created it.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// What a task is to do once [`Task::resume`] has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// Enter it.
    Run,
    /// Park it until its group is continued (a group stop).
    Stop,
    /// End it (its process is ending).
    Exit,
}

/// What the scheduler should do after an exception from a task.
#[derive(Clone, Debug)]
pub enum Action {
    /// Return to the task.
    Continue,
    /// Put the task back in the run queue and run another (preemption, sched_yield, migration).
    Yield,
    /// Block the task until what [`Wait`] names happens (a wake, a deadline, an event), or a
    /// signal interrupts it.
    Block(Wait),
    /// The task exits.
    ExitThread,
}

impl Action {
    /// A system call that is done: `result` into x0 (the value, or `-errno`), and back to the task.
    pub fn reply(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
        frame.x[0] = match result {
            Ok(v) => v,
            Err(e) => e.as_ret() as u64,
        };
        Action::Continue
    }
}

/// What a blocking system call waits for, and what it then returns.
#[derive(Clone, Debug)]
pub enum WaitFor {
    /// `FUTEX_WAIT(_BITSET)` on the word at `uaddr`, if it still holds `expected` when checked under
    /// the wait list's lock (else EAGAIN). Returns 0 when woken, ETIMEDOUT at the deadline.
    Futex {
        /// What wakes name it by: the address space's key and the address, or, for a word of
        /// shared memory, [`SHARED_FUTEX`] and the word's physical address.
        key: (usize, u64),
        /// User address of the word.
        uaddr: u64,
        /// The value the caller saw.
        expected: u32,
        /// Which wakes reach it.
        bitset: u32,
    },
    /// `futex_waitv`: the words the task lists ([`Task::futex_vector`]), if each still holds
    /// its value when checked under the wait list's lock (else EAGAIN). Returns the index of the
    /// word woken, ETIMEDOUT at the deadline.
    FutexVector,
    /// Nothing but the deadline (`nanosleep`): returns 0.
    Timer,
    /// `ppoll`/`pselect6`: the call restarts when any kernel event ([`notify`](super::queue::notify))
    /// happens after the caller read [`event_generation`](super::queue::event_generation) as
    /// `generation`, and at the deadline (the call then answers itself: 0).
    Poll {
        /// The event count the caller saw before it looked at its descriptors.
        generation: u32,
    },
    /// A signal (`rt_sigsuspend`, `rt_sigtimedwait`): x0 is -EINTR when one came, -ETIMEDOUT at
    /// the deadline; the signal code finishes the call as the task resumes.
    Signal,
    /// A kernel event on `key` ([`notify`](super::queue::notify): console input, a pipe
    /// changed, a child exited), if none happened since the caller read
    /// [`event_generation`](super::queue::event_generation) as `generation` (checked under the
    /// wait list's lock, as a futex word is). The call restarts when woken, and at its deadline
    /// if it has one (`epoll_pwait`), so it is served by the same code as one that found its
    /// condition at once; a signal ends it with -EINTR.
    Event {
        /// What is waited for (an odd or offset address: never a user futex's key).
        key: usize,
        /// The event count the caller saw before it looked.
        generation: u32,
    },
    /// Until another task releases the rendezvous (a vfork parent, until its child execs or
    /// exits); signals do not end the wait (Linux's killable wait). x0 keeps what the call put
    /// there.
    Rendezvous(Arc<Rendezvous>),
}

/// The key of a futex word in shared memory (`MAP_SHARED`, a memfd): waits and wakes in any
/// process name it by its physical address in this space, which no address space's key is (they
/// are pointers; kernel events use odd keys).
pub const SHARED_FUTEX: usize = 2;

/// One word of a `futex_waitv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorWord {
    /// Its key, as [`WaitFor::Futex`]'s.
    pub key: (usize, u64),
    /// Its user address.
    pub uaddr: u64,
    /// The value the caller expects.
    pub val: u32,
}

/// A blocking request: what, and until when (a counter value; `None` = no timeout).
#[derive(Clone, Debug)]
pub struct Wait {
    /// What wakes the task.
    pub what: WaitFor,
    /// When it stops waiting anyway.
    pub deadline: Option<u64>,
}

/// One task parked until another lets it go, whichever comes first: [`release`](Self::release)
/// before the park makes the park return at once.
#[derive(Default)]
pub struct Rendezvous(Mutex<RendezvousState>);

#[derive(Default)]
struct RendezvousState {
    released: bool,
    parked: Option<Box<dyn Task>>,
}

impl core::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let st = self.0.lock();
        write!(f, "Rendezvous {{ released: {}, parked: {} }}", st.released, st.parked.is_some())
    }
}

impl Rendezvous {
    /// Parks `task` here; gives it back if the rendezvous was already released.
    pub(super) fn park(&self, task: Box<dyn Task>) -> Result<(), Box<dyn Task>> {
        let mut st = self.0.lock();
        if st.released {
            return Err(task);
        }
        st.parked = Some(task);
        Ok(())
    }

    /// Lets the parked task go (it becomes runnable), or the one that parks later run on.
    pub fn release(&self) {
        let parked = {
            let mut st = self.0.lock();
            st.released = true;
            st.parked.take()
        };
        if let Some(t) = parked {
            super::queue::enqueue(t);
        }
    }
}
