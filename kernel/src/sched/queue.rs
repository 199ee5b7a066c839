//! The scheduler's queues: one run queue shared by every CPU, and the one list of blocked tasks
//! (futex waits, sleeps, kernel events, polls, signals: `futex::wait_list::WaitList`), with the
//! wake-ups that move tasks between them.
//!
//! **Memory.** A task enters the scheduler only through [`admit`], which counts it against the
//! thread limit (Linux's `threads-max`, `EAGAIN`), allocates it fallibly and makes the run queue
//! and the wait list able to hold every live task (`ENOMEM` otherwise). From then on no queue
//! operation allocates: the wait list hands the tasks it takes to a closure rather than
//! collecting them, so a task moving between the queues never needs memory and no program can
//! make the scheduler panic for want of heap.
//!
//! **Kernel events.** Anything a task may block on that is not a futex word (console input, a
//! pipe's state, a child's exit) is a key: the waiter reads [`event_generation`], checks its
//! condition, and blocks on `WaitFor::Event { key, generation }`; whoever changes the state then
//! calls [`notify`]. The count is re-checked under the wait list's lock, so a change between the
//! check and the block restarts the call at once rather than being missed. This is the one wake
//! interface of the layers above: a pipe or a terminal calls `notify` without knowing who waits.
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use futex::wait_list::{Channel, WaitList, Waiter};
use linux_abi::Errno;
use linux_abi::futex::FUTEX_BITSET_MATCH_ANY;
use mm::vm::limits;
use spin::Mutex;

use super::task::Task;
use crate::arch::aarch64::user;
use crate::cpu::{MAX_CPUS, current_cpu};
use crate::irq;
use crate::memory::fallible;

/// A queued task.
pub(super) type Queued = Box<dyn Task>;

/// Runnable tasks, oldest first.
pub(super) static RUNQ: Mutex<VecDeque<Queued>> = Mutex::new(VecDeque::new());
/// Every blocked task.
pub(super) static WAITING: Mutex<WaitList<Queued>> = Mutex::new(WaitList::new());
/// CPUs waiting for work (bit per CPU).
pub(super) static IDLE: AtomicU64 = AtomicU64::new(0);
/// Kernel events so far (the module documentation).
pub(super) static EVENTS: AtomicU32 = AtomicU32::new(0);
/// Tasks admitted and not finished, every process.
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The count of kernel events: read it before checking a condition, then block on
/// `WaitFor::Event` with it.
pub fn event_generation() -> u32 {
    EVENTS.load(Ordering::Acquire)
}

/// A kernel event on `key` happened (the caller changed the state first): every task blocked
/// on it, and every poll (which may watch it), restarts its system call.
pub fn notify(key: usize) {
    notify_poll(key, u16::MAX);
}

/// [`notify`], saying which readiness may have appeared (`POLLIN` for new data, `POLLOUT` for
/// new room; `u16::MAX`: anything), as Linux's `wake_up_poll` does: the readiness hook
/// ([`on_notify`], epoll's) runs first, so a waiter restarted by this event finds what it
/// queued.
pub fn notify_poll(key: usize, mask: u16) {
    if let Some(hook) = NOTIFY_HOOK.get() {
        hook(key, mask);
    }
    let mut waiting = WAITING.lock();
    EVENTS.fetch_add(1, Ordering::AcqRel);
    let n = waiting.wake_each(key, 0, FUTEX_BITSET_MATCH_ANY, u64::MAX, restart)
        + waiting.wake_channel_each(Channel::Poll, restart);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
}

/// What runs on every kernel event before the waiters wake (see [`on_notify`]).
static NOTIFY_HOOK: spin::Once<fn(usize, u16)> = spin::Once::new();

/// Makes `hook` run with the key and readiness mask of every kernel event, before its waiters
/// wake (one at most; the first registration wins): epoll's readiness lists are filled this
/// way, without the scheduler importing it. The hook may notify other keys (nested epolls); it
/// runs wherever `notify` is called, an interrupt handler included, so it must not block.
pub fn on_notify(hook: fn(usize, u16)) {
    NOTIFY_HOOK.call_once(|| hook);
}

/// Makes a woken task run its system call again (the PC goes back to the `svc`; its registers
/// still hold the arguments).
fn restart(mut t: Queued) {
    t.regs().pc -= 4;
    make_runnable(t);
}

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

/// Admits a new task and makes it runnable.
///
/// # Errors
/// `EAGAIN` at the thread limit (Linux's `nr_threads >= max_threads`); `ENOMEM` when the heap
/// cannot hold the task or the queue room for it. Nothing changes on error.
pub fn admit(task: impl Task) -> Result<(), Errno> {
    let limit = max_threads();
    let live = LIVE_THREADS
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
        .map_err(|_| Errno::EAGAIN)?
        + 1;
    let admitted = fallible::boxed(task).ok_or(Errno::ENOMEM).and_then(|t| {
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

/// Makes the run queue and the wait list able to hold `live` tasks without allocating.
fn reserve_queues(live: usize) -> Result<(), Errno> {
    let mut q = RUNQ.lock();
    let need = live.saturating_sub(q.len());
    q.try_reserve(need).map_err(|_| Errno::ENOMEM)?;
    drop(q);
    WAITING.lock().try_reserve(live).map_err(|_| Errno::ENOMEM)
}

/// A task has run for the last time: it no longer counts as live, and its group is told
/// ([`Task::exit`]: the process layer's teardown, which may free the process).
pub(super) fn finish(task: Queued) {
    LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
    task.exit();
}

/// Makes `task` runnable and wakes an idle CPU. Never allocates: [`admit`] made room for every
/// live task.
pub fn enqueue(task: Queued) {
    RUNQ.lock().push_back(task);
    wake_idle();
}

pub(super) fn wake_idle() {
    let idle = IDLE.load(Ordering::Acquire) & !(1 << current_cpu());
    for cpu in 0..MAX_CPUS {
        if idle & (1 << cpu) != 0 {
            irq::send_ipi(cpu, irq::IPI_WAKE);
        }
    }
}

/// Whether a task interrupted by a tick should give way (someone is waiting to run).
pub fn should_preempt() -> bool {
    expire_waits();
    !RUNQ.lock().is_empty()
}

/// The oldest runnable task that may run on `cpu`.
pub(super) fn pick(cpu: usize) -> Option<Queued> {
    expire_waits();
    let mut q = RUNQ.lock();
    let index = q.iter().position(|t| t.affinity() & (1 << cpu) != 0)?;
    q.remove(index)
}

/// Wakes up to `count` tasks waiting on the futex word `key` (its address space's key and
/// address, or [`SHARED_FUTEX`](super::SHARED_FUTEX) and its physical address) with a bitset
/// meeting `bitset`: plain waits first, then `futex_waitv` waits that list the word (which
/// return its index); returns how many.
pub fn futex_wake(key: (usize, u64), bitset: u32, count: u64) -> u64 {
    let mut waiting = WAITING.lock();
    let n = wake_locked(&mut waiting, key, bitset, count);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
    n
}

/// [`futex_wake`] with the wait list locked (no CPU woken).
fn wake_locked(waiting: &mut WaitList<Queued>, key: (usize, u64), bitset: u32, count: u64) -> u64 {
    let n = waiting.wake_each(key.0, key.1, bitset, count, make_runnable);
    if n == count {
        return n;
    }
    let index = |t: &Queued| t.futex_vector().iter().position(|w| w.key == key);
    let vectors = waiting.wake_where(
        count - n,
        |w| w.channel == Channel::FutexVector && index(&w.item).is_some(),
        |mut w| {
            let i = index(&w.item).unwrap_or(0);
            w.item.regs().x[0] = i as u64;
            make_runnable(w.item);
        },
    );
    n + vectors
}

/// Puts a task taken from the wait list in the run queue (the caller holds the wait list's
/// lock: locks are taken in that order) without waking a CPU; the caller does once it is done.
pub(super) fn make_runnable(task: Queued) {
    RUNQ.lock().push_back(task);
}

/// `FUTEX_CMP_REQUEUE` (`expected` = `Some`) and `FUTEX_REQUEUE`: if the word at `uaddr` (keyed
/// `from`) still holds `expected` (checked under the wait list's lock, as a waiter checks it),
/// wakes `nwake` waiters and moves up to `nrequeue` others to the word keyed `to`. Returns woken
/// + moved.
///
/// # Errors
/// `EFAULT` (the word cannot be read), `EAGAIN` (it changed).
pub fn futex_requeue(
    from: (usize, u64),
    uaddr: u64,
    to: (usize, u64),
    nwake: u64,
    nrequeue: u64,
    expected: Option<u32>,
) -> Result<u64, Errno> {
    let mut waiting = WAITING.lock();
    if let Some(expected) = expected {
        let mut word = [0u8; 4];
        user::copy_from_user(&mut word, uaddr).map_err(|_| Errno::EFAULT)?;
        if u32::from_le_bytes(word) != expected {
            return Err(Errno::EAGAIN);
        }
    }
    let (n, moved) = waiting.requeue_between(from, to, nwake, nrequeue, make_runnable);
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
    Ok(n + moved)
}

/// `FUTEX_WAKE_OP`: under the wait list's lock, applies `op` to the word at `uaddr2` (keyed
/// `key2`), wakes `nwake` waiters on `key1` and, if the old value passes `op`'s test, `nwake2`
/// on `key2`. The read-modify-write is atomic with respect to other futex calls, not to a user
/// thread's own atomic instructions on that word (the kernel has no unprivileged exclusive
/// access).
///
/// # Errors
/// `EFAULT`: the second word cannot be read or written.
pub fn futex_wake_op(
    key1: (usize, u64),
    key2: (usize, u64),
    uaddr2: u64,
    nwake: u64,
    nwake2: u64,
    op: futex::op::WakeOp,
) -> Result<u64, Errno> {
    let mut waiting = WAITING.lock();
    let mut word = [0u8; 4];
    user::copy_from_user(&mut word, uaddr2).map_err(|_| Errno::EFAULT)?;
    let old = u32::from_le_bytes(word);
    user::copy_to_user(uaddr2, &op.apply(old).to_le_bytes()).map_err(|_| Errno::EFAULT)?;
    let mut n = wake_locked(&mut waiting, key1, FUTEX_BITSET_MATCH_ANY, nwake);
    if op.test(old) {
        n += wake_locked(&mut waiting, key2, FUTEX_BITSET_MATCH_ANY, nwake2);
    }
    drop(waiting);
    if n > 0 {
        wake_idle();
    }
    Ok(n)
}

/// Moves every task whose deadline has passed back to the run queue, with what its call returns,
/// after firing the event timers that are due (`timer`).
fn expire_waits() {
    let now = crate::arch::time::counter();
    super::timer::expire(now);
    let n = WAITING.lock().expire_each(now, |mut w| {
        let timed_out = Errno::ETIMEDOUT.as_ret() as u64;
        match w.channel {
            // A kernel-event wait (`WaitFor::Event`: no user word has address 0) restarts at
            // its deadline, as a poll does, and answers itself (`epoll_pwait`'s timeout).
            Channel::Futex { uaddr: 0, .. } => w.item.regs().pc -= 4,
            Channel::Futex { .. } | Channel::FutexVector | Channel::Signal => w.item.regs().x[0] = timed_out,
            Channel::Timer | Channel::Input => w.item.regs().x[0] = 0, // a sleep that ended
            // A poll restarts and answers itself: the sets are written back, 0 returned.
            Channel::Poll => w.item.regs().pc -= 4,
            Channel::Stopped { .. } => {} // parked without a deadline: never here
        }
        make_runnable(w.item);
    });
    if n > 0 {
        wake_idle();
    }
}

/// The earliest deadline of a blocked task or an event timer.
pub(super) fn next_deadline() -> Option<u64> {
    let waiter = WAITING.lock().next_deadline();
    match (waiter, super::timer::earliest()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A signal for task `tid` of group `group`: if it is blocked (whatever it waits for but a
/// rendezvous or its group's stop) it goes back to the run queue with its
/// [`Task::interrupted`] x0 (-EINTR), not restarted as an event would; the signal code finishes
/// its call when it resumes.
pub fn interrupt(group: usize, tid: u32) {
    let woken = WAITING.lock().take_first_where(|w| {
        w.item.tid() == tid && w.item.group() == group && !matches!(w.channel, Channel::Stopped { .. })
    });
    if let Some(mut w) = woken {
        let x0 = w.item.interrupted();
        w.item.regs().x[0] = x0;
        enqueue(w.item);
    }
}

/// Interrupts the CPUs of `cpus` (bit per CPU) but this one, so each enters the kernel (and
/// takes a signal just sent, or stops if its task's group is exiting).
pub fn kick(cpus: u64) {
    let me = current_cpu();
    for cpu in 0..MAX_CPUS {
        if cpu != me && cpus & (1 << cpu) != 0 {
            irq::send_ipi(cpu, irq::IPI_WAKE);
        }
    }
}

/// Stops every task of `group`: queued and waiting ones now, running ones at their next kernel
/// entry (the CPUs of `cpus` are sent a wake IPI, whose interrupt from EL0 finds the group
/// exiting). One task at a time, each finished outside the queue locks (the last one tears the
/// group down), with no list allocated.
pub fn stop_group(group: usize, cpus: u64) {
    loop {
        let queued = {
            let mut q = RUNQ.lock();
            q.iter().position(|t| t.group() == group).and_then(|i| q.remove(i))
        };
        let Some(t) = queued else { break };
        finish(t);
    }
    loop {
        let waiting = WAITING.lock().take_first(|t| t.group() == group);
        let Some(w) = waiting else { break };
        finish(w.item);
    }
    kick(cpus);
}

/// Parks `task`, whose group is stopped, until the group is continued ([`continue_group`]); if
/// the stop is over by the time the wait list's lock is held, it runs on instead.
pub(super) fn park_stopped(task: Queued) {
    let mut waiting = WAITING.lock();
    if task.stop_pending() {
        let group = task.group();
        push_waiter(&mut waiting, Channel::Stopped { group }, None, task);
    } else {
        make_runnable(task);
        drop(waiting);
        wake_idle();
    }
}

/// Group `group` is continued (`SIGCONT`, or `SIGKILL` ending a stopped group; the caller has
/// already ended the stop, so no task parks again): every task parked by its stop runs again.
pub fn continue_group(group: usize) {
    let n = WAITING.lock().wake_channel_each(Channel::Stopped { group }, make_runnable);
    if n > 0 {
        wake_idle();
    }
}

/// Parks `task` in the wait list (the caller holds its lock, `waiting`, and checked the
/// condition under it); never allocates: [`admit`] made room for every live task.
pub(super) fn push_waiter(
    waiting: &mut WaitList<Queued>,
    channel: Channel,
    deadline: Option<u64>,
    task: Queued,
) {
    waiting.push(Waiter { channel, deadline, item: task });
}
