//! Signals, as Linux arm64 has them: per-process actions and shared pending signals, per-thread
//! masks, pending signals and alternate stacks; sending; and delivery: the signal frame (built
//! and checked by the host-tested `signal` crate) written on the user stack on the way back to
//! EL0, and faults turned into signals on the faulting thread. The system calls that read and
//! change this state are `syscall::signals`'s.
//!
//! Delivery happens at the two places a thread returns to EL0: the end of an exception
//! ([`on_return`], on the exception stack's frame) and the resumption of a thread that waited
//! or was preempted ([`on_resume`], on its saved context). A sender queues the signal, then
//! wakes a thread that can take it if it is parked (the scheduler's `interrupt`: its call ends
//! as its restart class says, [`restart`]) and interrupts the CPUs running the process, whose
//! next return to EL0 delivers it. A thread checks for a deliverable signal under the
//! scheduler's wait-queue lock before it parks ([`may_park`]), and senders queue before they look
//! for parked threads, so no wake-up is lost.
//!
//! **Job control.** A stop signal taken with its default action stops the whole process (a group
//! stop): every thread parks as it next resumes or returns to EL0, the parent is told (SIGCHLD
//! with CLD_STOPPED unless it set SA_NOCLDSTOP, and its `wait4(WUNTRACED)`); sending SIGCONT
//! (or SIGKILL) ends the stop at once, as Linux's `prepare_signal` does, and the parent learns of
//! the continuation (CLD_CONTINUED, `WCONTINUED`). An interrupted call of a stopped thread is
//! restarted once it is continued, when no handler runs ([`restart`]).
//!
//! Timers ([`timers`]: `setitimer`, `alarm`, POSIX timers, `RLIMIT_CPU`) are signal senders
//! driven by the tick.
//!
//! Lock order: the scheduler's wait-queue lock, then a process's signal state. Nothing here
//! copies user memory with the signal state locked (a copy may demand-page).
//!
//! This file is one mechanism held together by that lock order: the state, sending, the check
//! before a thread parks ([`may_park`]), delivery and the group stop each take the same
//! [`Signals`] lock and act on the same per-thread entries, and reading them side by side is how
//! the order is checked. The rules (sets, actions, the frame, restart classes) are the `signal`
//! crate's, the calls `syscall::signals`'s; what an interrupted call leaves is [`restart`]'s and
//! the timers are [`timers`]'s.
pub mod restart;
pub mod timers;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use core::sync::atomic::AtomicBool;

use signal::action::{self, Outcome, SigAction};
use signal::frame::{self, Context, Placement, Saved};
use signal::info::SigInfo;
use signal::num::{self, SA_ONSTACK};
use signal::queue::{Pending, Queued};
use signal::restart::{self as restart_rules, Resume};
use signal::set::SigSet;
use signal::stack::AltStack;
use spin::Mutex;

use super::{Action, Process, Thread};
use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::UserRegs;
use crate::kprintln;
use crate::memory::uaccess::copy_out;
use crate::sched::Resumed;
use linux_abi::Errno;

/// A parked thread's wait that its resumption finishes beyond its restart class: a
/// `rt_sigtimedwait` takes the signal it waited for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// rt_sigtimedwait for `set`, siginfo to `info` (0: none), mask to restore `real_blocked`.
    Timed { set: SigSet, info: u64, real_blocked: SigSet },
}

/// What a wait of the parent (`wait4`, `waitid`) may report of a child besides its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobReport {
    /// It stopped, with this signal (`WUNTRACED`, `WSTOPPED`).
    Stopped(u32),
    /// It was continued (`WCONTINUED`).
    Continued,
}

/// One thread's signal state.
pub(crate) struct PerThread {
    pub(crate) tid: u32,
    pub(crate) blocked: SigSet,
    pub(crate) pending: Pending,
    pub(crate) altstack: AltStack,
    /// rt_sigsuspend's mask to restore (into the handler frame's uc_sigmask).
    pub(crate) saved_mask: Option<SigSet>,
    pub(crate) wait: Option<Wait>,
    /// x0 of a system call whose x0 now holds a restart code (`signal::restart`).
    pub(crate) restart_x0: Option<u64>,
    /// CPU time it has run (counter ticks), published at each charge for the clocks of other
    /// threads and processes (`pthread_getcpuclockid`).
    pub(crate) cpu_ticks: u64,
}

impl PerThread {
    fn new(tid: u32, blocked: SigSet) -> Self {
        Self {
            tid,
            blocked,
            pending: Pending::new(),
            altstack: AltStack::default(),
            saved_mask: None,
            wait: None,
            restart_x0: None,
            cpu_ticks: 0,
        }
    }
}

pub(crate) struct State {
    actions: [SigAction; num::_NSIG as usize],
    /// Process-directed signals (kill, rt_sigqueueinfo): any thread not blocking one may take it.
    pub(crate) shared: Pending,
    pub(crate) threads: Vec<PerThread>,
    /// What the parent's next wait may report of a stop or continuation (Linux's
    /// `group_exit_code` and `SIGNAL_CLD_CONTINUED`).
    report: Option<JobReport>,
}

impl State {
    pub(crate) fn thread(&mut self, tid: u32) -> Option<&mut PerThread> {
        self.threads.iter_mut().find(|t| t.tid == tid)
    }

    /// The action of `sig` (1..=64; callers check the number first).
    pub(crate) fn action(&self, sig: u32) -> SigAction {
        self.actions.get((sig as usize).wrapping_sub(1)).copied().unwrap_or(SigAction::DEFAULT)
    }

    pub(crate) fn set_action(&mut self, sig: u32, action: SigAction) {
        if let Some(slot) = self.actions.get_mut((sig as usize).wrapping_sub(1)) {
            *slot = action;
        }
    }

    pub(crate) fn queued(&self) -> usize {
        self.shared.len() + self.threads.iter().map(|t| t.pending.len()).sum::<usize>()
    }

    /// Whether thread `tid` has a signal it does not block.
    fn deliverable(&self, tid: u32) -> bool {
        self.threads
            .iter()
            .find(|t| t.tid == tid)
            .is_some_and(|t| !t.pending.set().union(self.shared.set()).minus(t.blocked).is_empty())
    }
}

/// The signal state of a process (all its threads share the actions: CLONE_SIGHAND).
pub struct Signals {
    pub(crate) state: Mutex<State>,
    /// Signals queued anywhere in the process: when 0 (almost always), returning to EL0 costs
    /// one load.
    pub(crate) queued: AtomicUsize,
    /// Threads with a [`Wait`] recorded: when 0 and nothing is queued, resuming a thread costs
    /// two loads.
    waiting: AtomicUsize,
    /// The process is stopped (a group stop): its threads park as they resume or return to EL0.
    stopped: AtomicBool,
    /// Where the vDSO's image was last found in the process's memory: a hint for
    /// [`sigreturn_address`], which checks it (0: look it up).
    vdso_hint: AtomicU64,
    /// Interval and POSIX timers (not inherited by a fork).
    pub(crate) timers: timers::Timers,
}

impl Signals {
    /// The state of a new process whose first thread is `tid`: default actions, nothing
    /// blocked or pending.
    pub fn new(tid: u32) -> Self {
        Self {
            state: Mutex::new(State {
                actions: [SigAction::DEFAULT; num::_NSIG as usize],
                shared: Pending::new(),
                threads: alloc::vec![PerThread::new(tid, SigSet::EMPTY)],
                report: None,
            }),
            queued: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            vdso_hint: AtomicU64::new(0),
            timers: timers::Timers::default(),
        }
    }

    /// The signal state of a process forked by thread `tid` of this one, whose thread is
    /// `child`: the actions, the thread's mask and alternate stack are copied; nothing is
    /// pending (Linux's `copy_sighand`, `copy_signal` and `init_sigpending`). `None` when the
    /// heap cannot hold it.
    pub fn forked(&self, tid: u32, child: u32) -> Option<Self> {
        let mut threads = Vec::new();
        threads.try_reserve(1).ok()?;
        let st = self.state.lock();
        let (blocked, altstack) = st
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .map_or((SigSet::EMPTY, AltStack::default()), |t| (t.blocked, t.altstack));
        let mut me = PerThread::new(child, blocked);
        me.altstack = altstack;
        threads.push(me);
        Some(Self {
            state: Mutex::new(State { actions: st.actions, shared: Pending::new(), threads, report: None }),
            queued: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            vdso_hint: AtomicU64::new(0),
            timers: timers::Timers::default(),
        })
    }

    /// `execve`: handled signals go back to their default action (ignored ones stay ignored),
    /// the alternate stack is gone (Linux's `flush_signal_handlers`), and the POSIX timers; masks, pending signals and the interval
    /// timers stay.
    pub fn exec_reset(&self) {
        let mut st = self.state.lock();
        for a in st.actions.iter_mut() {
            if a.handler != num::SIG_IGN {
                *a = SigAction::DEFAULT;
            } else {
                a.flags = 0;
            }
        }
        for t in st.threads.iter_mut() {
            t.altstack = AltStack::default();
        }
        drop(st);
        self.vdso_hint.store(0, Ordering::Relaxed);
        self.timers.exec();
    }

    /// The action of signal `sig` (1..=64).
    pub fn action_of(&self, sig: u32) -> SigAction {
        self.state.lock().action(sig)
    }

    /// A thread `child` created by `parent`: it inherits the mask; no alternate stack (CLONE_VM).
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold its entry (nothing changes).
    pub fn thread_created(&self, parent: u32, child: u32) -> Result<(), mm::vm::Errno> {
        let mut st = self.state.lock();
        let blocked = st.thread(parent).map_or(SigSet::EMPTY, |t| t.blocked);
        crate::memory::fallible::push(&mut st.threads, PerThread::new(child, blocked))
    }

    /// Records that thread `t` (of this process) parks in `wait`.
    pub(crate) fn set_wait(&self, t: &mut PerThread, wait: Wait) {
        if t.wait.replace(wait).is_none() {
            self.waiting.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Takes the wait thread `t` (of this process) resumes from.
    fn take_wait(&self, t: &mut PerThread) -> Option<Wait> {
        let wait = t.wait.take();
        if wait.is_some() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        wait
    }

    /// Thread `tid` is gone; signals sent to it alone are dropped.
    pub fn thread_gone(&self, tid: u32) {
        let mut st = self.state.lock();
        if let Some(t) = st.thread(tid)
            && t.wait.is_some()
        {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        // swap_remove: one move, not a shift of every later thread (32,000 threads exiting one
        // after another made that quadratic). Only the first entry's place matters (the leader,
        // whose mask decides discarding), and swap_remove keeps it unless it is the one leaving.
        if let Some(i) = st.threads.iter().position(|t| t.tid == tid) {
            st.threads.swap_remove(i);
        }
        self.queued.store(st.queued(), Ordering::Release);
    }
}

/// Takes a signal of `set` pending for thread `tid` (its own first, then the process's); a POSIX
/// timer's gets its `si_overrun` now (the expiries counted while it was pending).
pub(crate) fn take_from(signals: &Signals, st: &mut State, tid: u32, set: SigSet) -> Option<SigInfo> {
    let own = st.thread(tid).and_then(|t| t.pending.take(set));
    let mut info = own.or_else(|| st.shared.take(set))?;
    if let Some(id) = info.timer_id() {
        info.set_overrun(signals.timers.taken(id));
    }
    Some(info)
}

/// x0 for a call's result: the value, or `-errno`.
fn x0(result: Result<u64, Errno>) -> u64 {
    match result {
        Ok(v) => v,
        Err(e) => e.as_ret() as u64,
    }
}

/// x0 holding `v`, a raw return value (an errno or restart code, negated).
fn ret(v: i64) -> u64 {
    v as u64
}

/// rt_sigtimedwait's result for `info`: its number, after its siginfo is copied out.
pub(crate) fn finish_taken(info: &SigInfo, uinfo: u64) -> Result<u64, Errno> {
    if uinfo != 0 && copy_out(uinfo, &info.0).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(u64::from(info.signo()))
}

/// Who a signal is for.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    Process,
    Thread(u32),
}

/// What [`send`] did with a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// It is pending (or merged with the same signal pending).
    Queued,
    /// Its action ignores it: dropped (a POSIX timer counts this as not pending).
    Dropped,
}

/// Queues `info` for `target` and wakes a thread that can take it. `Err(errno)` if the target
/// does not exist or the queue is full. Job control happens here, as in Linux's
/// `prepare_signal`: SIGCONT continues a stopped process (and drops pending stop signals), a stop
/// signal drops a pending SIGCONT, SIGKILL ends a stop.
pub(crate) fn send(p: &Process, target: Target, info: SigInfo) -> Result<Sent, Errno> {
    let sig = info.signo();
    let continued;
    let wake = {
        let mut st = p.signals.state.lock();
        if matches!(target, Target::Thread(tid) if st.thread(tid).is_none()) {
            return Err(Errno::ESRCH);
        }
        // Signal 0 only checks that the target exists.
        if sig == 0 {
            return Ok(Sent::Dropped);
        }
        continued = prepare(p, &mut st, sig);
        let action = st.action(sig);
        let wake = match target {
            Target::Thread(tid) => {
                let t = st.thread(tid).ok_or(Errno::ESRCH)?;
                if action::discarded_when_sent(sig, &action, t.blocked) {
                    None
                } else if t.pending.push(info) == Queued::Full {
                    return Err(Errno::EAGAIN);
                } else {
                    Some((!t.blocked.contains(sig)).then_some(tid))
                }
            }
            Target::Process => {
                let leader_blocked = st.threads.first().map_or(SigSet::EMPTY, |t| t.blocked);
                if action::discarded_when_sent(sig, &action, leader_blocked) {
                    None
                } else if st.shared.push(info) == Queued::Full {
                    return Err(Errno::EAGAIN);
                } else {
                    Some(st.threads.iter().find(|t| !t.blocked.contains(sig)).map(|t| t.tid))
                }
            }
        };
        p.signals.queued.store(st.queued(), Ordering::Release);
        wake
    };
    if continued {
        // After the signal is queued: a thread continued by SIGCONT takes its handler.
        crate::sched::continue_group(crate::process::group_of(p));
        if sig == num::SIGCONT {
            super::family::notify_parent_of_stop(p, JobReport::Continued);
        }
    }
    let Some(wake) = wake else { return Ok(Sent::Dropped) };
    super::signalfd::signal_queued(p);
    if let Some(tid) = wake {
        crate::sched::interrupt(crate::process::group_of(p), tid);
    }
    crate::sched::kick(p.cpus.load(Ordering::Acquire));
    Ok(Sent::Queued)
}

/// Job control as signal `sig` is sent to `p` (Linux's `prepare_signal`); true when a stop
/// ended (the caller wakes the stopped threads once the signal is queued).
fn prepare(p: &Process, st: &mut State, sig: u32) -> bool {
    if action::is_stop(sig) {
        discard_everywhere(st, |s| s == num::SIGCONT);
    }
    if sig != num::SIGCONT && sig != num::SIGKILL {
        return false;
    }
    if sig == num::SIGCONT {
        discard_everywhere(st, action::is_stop);
    }
    if !p.signals.stopped.swap(false, Ordering::AcqRel) {
        return false;
    }
    // A stop the parent had not waited for yet is replaced by the continuation (SIGKILL leaves
    // no report: the end of the process is the parent's news).
    st.report = (sig == num::SIGCONT).then_some(JobReport::Continued);
    true
}

/// Drops every pending instance of the signals `which` selects, in every queue of the process.
fn discard_everywhere(st: &mut State, which: impl Fn(u32) -> bool) {
    for sig in 1..=num::_NSIG {
        if which(sig) {
            st.shared.discard(sig);
            for t in &mut st.threads {
                t.pending.discard(sig);
            }
        }
    }
}

/// Sends `info` to process `p` from the kernel (`SIGCHLD` to a parent, `SIGPIPE` to a writer),
/// as Linux's `send_sig_info`; a full queue drops it.
pub fn send_to_process(p: &Process, info: SigInfo) {
    let _ = send(p, Target::Process, info);
}

/// Whether the thread about to park may sleep: not if a signal it can take is pending (then it
/// goes back to the run queue with x0 = -EINTR instead), nor if its process is stopped (it parks
/// as stopped instead). Called with the scheduler's wait-queue lock held.
pub fn may_park(thread: &Thread) -> bool {
    let st = thread.process.signals.state.lock();
    !st.deliverable(thread.tid) && !thread.process.signals.stopped.load(Ordering::Acquire)
}

/// Whether `p` is stopped (job control): its threads park until it is continued.
pub fn stopped(p: &Process) -> bool {
    p.signals.stopped.load(Ordering::Acquire)
}

/// What the parent's wait may report of `p` (a child) besides its end: a stop if `stops` is
/// asked for, a continuation if `continues` is; taken unless `keep` (`WNOWAIT`).
pub fn job_report(p: &Process, stops: bool, continues: bool, keep: bool) -> Option<JobReport> {
    let mut st = p.signals.state.lock();
    let report = match st.report? {
        JobReport::Stopped(sig) if stops => JobReport::Stopped(sig),
        JobReport::Continued if continues => JobReport::Continued,
        _ => return None,
    };
    if !keep {
        st.report = None;
    }
    Some(report)
}

/// A fault to turn into a signal for the faulting thread.
pub struct Fault {
    /// Its siginfo (signal, code, si_addr).
    pub info: SigInfo,
    /// `uc_mcontext.fault_address` (FAR for aborts, else 0).
    pub address: u64,
    /// The ESR for an `esr_context` record (none when 0).
    pub esr: u64,
}

fn context(regs: &UserRegs, fp: &FpState) -> Context {
    Context {
        x: regs.x,
        sp: regs.sp,
        pc: regs.pc,
        pstate: regs.pstate,
        v: fp.q,
        fpsr: fp.fpsr,
        fpcr: fp.fpcr,
    }
}

fn store(ctx: &Context, regs: &mut UserRegs, fp: &mut FpState) {
    regs.x = ctx.x;
    regs.sp = ctx.sp;
    regs.pc = ctx.pc;
    regs.pstate = ctx.pstate;
    fp.q = ctx.v;
    fp.fpsr = ctx.fpsr;
    fp.fpcr = ctx.fpcr;
}

/// Runs `f` on the user context saved in `frame` (and the FP/SIMD state below it).
pub(crate) fn with_frame<R>(frame: &mut TrapFrame, f: impl FnOnce(&mut Context) -> R) -> R {
    // SAFETY: `frame` is the frame of an exception from EL0 (only those reach process code),
    // being handled now, below which FpState::below keeps the FP/SIMD state.
    let mut fp = unsafe { *FpState::below(frame) };
    let mut regs = UserRegs { x: frame.x, sp: frame.sp_el0, pc: frame.elr, pstate: frame.spsr };
    let mut ctx = context(&regs, &fp);
    let r = f(&mut ctx);
    store(&ctx, &mut regs, &mut fp);
    frame.x = regs.x;
    frame.sp_el0 = regs.sp;
    frame.elr = regs.pc;
    frame.spsr = regs.pstate;
    // SAFETY: as above; the exit path reloads the FP/SIMD registers from there.
    unsafe { *FpState::below(frame) = fp };
    r
}

/// On the way back to EL0 from an exception: delivers a pending signal the thread can take.
/// Returns [`Action::ExitThread`] when the signal ends the process, and [`Action::Yield`] when the
/// process is stopped (the thread parks as it resumes).
pub fn on_return(thread: &Thread, frame: &mut TrapFrame) -> Action {
    let signals = &thread.process.signals;
    if signals.queued.load(Ordering::Acquire) == 0 && !signals.stopped.load(Ordering::Acquire) {
        return Action::Continue;
    }
    if signals.stopped.load(Ordering::Acquire) {
        return Action::Yield;
    }
    match with_frame(frame, |ctx| deliver(thread, ctx)) {
        Ok(Delivery::Done) => Action::Continue,
        Ok(Delivery::Stop) => Action::Yield,
        Err(status) => super::kill(&thread.process, status),
    }
}

/// Before a parked or preempted thread runs again (its address space is live in TTBR0):
/// finishes the call it waited in (as its restart class says, if a signal interrupted it), then
/// delivers a pending signal; a thread of a stopped process stops instead.
pub fn on_resume(thread: &mut Thread) -> Resumed {
    let interrupted = core::mem::take(&mut thread.call.interrupted);
    let unfinished = core::mem::take(&mut thread.call.stopped_in_call);
    let signals = &thread.process.signals;
    if !interrupted
        && !unfinished
        && signals.waiting.load(Ordering::Acquire) == 0
        && signals.queued.load(Ordering::Acquire) == 0
        && !signals.stopped.load(Ordering::Acquire)
    {
        return Resumed::Run;
    }
    let mut ctx = context(&thread.regs, &thread.fp);
    finish_wait(thread, &mut ctx);
    if interrupted && ctx.x[0] == ret(Errno::EINTR.as_ret()) {
        let (x0, restart_x0) = restart::finish(&mut thread.call);
        ctx.x[0] = x0;
        if let Some(t) = thread.process.signals.state.lock().thread(thread.tid) {
            t.restart_x0 = restart_x0;
        }
    }
    let result = if stopped(&thread.process) { Ok(Delivery::Stop) } else { deliver(thread, &mut ctx) };
    let (mut regs, mut fp) = (thread.regs.clone(), thread.fp);
    store(&ctx, &mut regs, &mut fp);
    thread.regs = regs;
    thread.fp = fp;
    match result {
        Ok(Delivery::Done) => Resumed::Run,
        Ok(Delivery::Stop) => {
            // Its call (if a signal interrupted one) is finished once the process continues.
            thread.call.stopped_in_call = true;
            Resumed::Stop
        }
        Err(status) => {
            let _ = super::kill(&thread.process, status);
            Resumed::Exit
        }
    }
}

/// Finishes a `rt_sigtimedwait` the thread parked in (x0 says how it woke: -ETIMEDOUT, or
/// -EINTR for a signal): the signal it waited for is taken now, and the mask put back.
fn finish_wait(thread: &Thread, ctx: &mut Context) {
    let p = &thread.process;
    let woke = ctx.x[0] as i64;
    let mut st = p.signals.state.lock();
    let Some(wait) = st.thread(thread.tid).and_then(|t| p.signals.take_wait(t)) else { return };
    match wait {
        Wait::Timed { set, info, real_blocked } => {
            if let Some(t) = st.thread(thread.tid) {
                t.blocked = real_blocked;
            }
            let taken = take_from(&p.signals, &mut st, thread.tid, set);
            p.signals.queued.store(st.queued(), Ordering::Release);
            drop(st);
            ctx.x[0] = x0(match taken {
                Some(si) => finish_taken(&si, info),
                None if woke == Errno::ETIMEDOUT.as_ret() => Err(Errno::EAGAIN),
                None => Err(Errno::EINTR),
            });
        }
    }
}

/// What the state lock decided for one delivery; the frame is written after it is released.
struct Plan {
    sig: u32,
    action: SigAction,
    info: SigInfo,
    top: u64,
    saved: Saved,
}

/// How a delivery ended, when the process goes on.
enum Delivery {
    /// A handler entered, or nothing to do (an interrupted call finished).
    Done,
    /// A stop signal was taken: the process is stopped, and this thread parks.
    Stop,
}

/// Delivers the first signal thread can take to the context `ctx`, or restarts/finishes an
/// interrupted call if none needs a handler. `Err(status)`: the process ends.
fn deliver(thread: &Thread, ctx: &mut Context) -> Result<Delivery, u64> {
    let p = &thread.process;
    let plan = {
        let mut st = p.signals.state.lock();
        loop {
            let Some(t) = st.threads.iter().find(|t| t.tid == thread.tid) else { return Ok(Delivery::Done) };
            let allowed = SigSet(!t.blocked.0);
            let Some(info) = take_from(&p.signals, &mut st, thread.tid, allowed) else {
                p.signals.queued.store(st.queued(), Ordering::Release);
                if let Some(t) = st.thread(thread.tid) {
                    resume_call(t, ctx, None);
                    if let Some(mask) = t.saved_mask.take() {
                        t.blocked = mask;
                    }
                }
                return Ok(Delivery::Done);
            };
            p.signals.queued.store(st.queued(), Ordering::Release);
            let sig = info.signo();
            let action = st.action(sig);
            match action::outcome(sig, &action) {
                Outcome::Ignore => continue,
                Outcome::Stop => {
                    // The first thread to take a stop signal stops the process; the others
                    // park as they next resume or return to EL0. The interrupted call stays as
                    // it is, to be finished once the process is continued.
                    if p.exiting.load(Ordering::Acquire) || p.signals.stopped.swap(true, Ordering::AcqRel) {
                        return Ok(Delivery::Stop);
                    }
                    st.report = Some(JobReport::Stopped(sig));
                    drop(st);
                    super::family::notify_parent_of_stop(p, JobReport::Stopped(sig));
                    crate::sched::kick(p.cpus.load(Ordering::Acquire));
                    return Ok(Delivery::Stop);
                }
                Outcome::Terminate(status) => {
                    drop(st);
                    report_fatal_signal(p, thread.tid, sig, ctx, status);
                    return Err(status);
                }
                Outcome::Handle(action) => {
                    st.set_action(sig, action::after_entry(&action));
                    let Some(t) = st.thread(thread.tid) else { return Ok(Delivery::Done) };
                    resume_call(t, ctx, Some(action.flags));
                    break enter(t, ctx, sig, &action, info, None);
                }
            }
        }
    };
    write_frame(thread, ctx, &plan).map(|()| Delivery::Done)
}

/// Finishes a system call interrupted by a signal: its restart code becomes -EINTR or a restart
/// (`handler_flags`: the flags of the handler about to run, `None` if none runs). A restart puts
/// x0 back and the pc on the `svc`; `ERESTART_RESTARTBLOCK` also makes x8 `restart_syscall`
/// (Linux arm64's `do_signal`), which resumes the thread's restart block.
fn resume_call(t: &mut PerThread, ctx: &mut Context, handler_flags: Option<u64>) {
    let Some(orig_x0) = t.restart_x0.take() else { return };
    let code = ctx.x[0] as i64;
    if !restart_rules::is_restart_code(code) {
        return;
    }
    match restart_rules::resume(code, handler_flags) {
        Resume::Return(v) => ctx.x[0] = ret(v),
        Resume::Restart => {
            if code == Errno::ERESTART_RESTARTBLOCK.as_ret() {
                ctx.x[8] = linux_abi::nr::RESTART_SYSCALL;
            }
            ctx.x[0] = orig_x0;
            ctx.pc = ctx.pc.wrapping_sub(4); // back to the `svc`
        }
    }
}

/// Updates thread `t` for entering the handler of `sig` (mask, alternate stack) and plans the
/// frame for the context `ctx`.
fn enter(
    t: &mut PerThread,
    ctx: &Context,
    sig: u32,
    action: &SigAction,
    info: SigInfo,
    fault: Option<(u64, u64)>,
) -> Plan {
    let info = handler_info(info, action.flags);
    let top = t.altstack.frame_top(ctx.sp, action.flags & SA_ONSTACK != 0);
    let saved = Saved {
        info: (action.flags & num::SA_SIGINFO != 0).then_some(info),
        stack: t.altstack.report(ctx.sp),
        mask: t.saved_mask.take().unwrap_or(t.blocked),
        fault,
    };
    t.altstack = t.altstack.after_entry(top != ctx.sp);
    t.blocked = action::handler_mask(t.blocked, sig, action);
    Plan { sig, action: *action, info, top, saved }
}

/// The siginfo the handler installed with `flags` receives: a fault's address without its tag
/// byte unless the handler asked for it with `SA_EXPOSE_TAGBITS` (Linux 5.11's
/// `hide_si_addr_tag_bits`, with arm64's `arch_untagged_si_addr`, which keeps a breakpoint's
/// `TRAP_BRKPT` address whole for historical reasons). The fault reports its address with the
/// tag FAR_EL1 holds (`trap::user`); this is the one place it is dropped.
fn handler_info(mut info: SigInfo, flags: u64) -> SigInfo {
    if flags & num::SA_EXPOSE_TAGBITS != 0 || (info.signo() == num::SIGTRAP && info.code() == num::TRAP_BRKPT)
    {
        return info;
    }
    if let Some(addr) = info.fault_address() {
        info.set_fault_address(crate::arch::aarch64::mte::untagged(addr));
    }
    info
}

/// Writes the planned frame to the user stack and points `ctx` at the handler. A frame that
/// cannot be written (stack overflow, no alternate stack) ends the process with SIGSEGV.
fn write_frame(thread: &Thread, ctx: &mut Context, plan: &Plan) -> Result<(), u64> {
    let p = &thread.process;
    let mut bytes = FRAME_OUT[crate::cpu::current_cpu()].lock();
    let used = frame::build(ctx, &plan.saved, &mut bytes);
    let at = Placement::below(plan.top);
    let written = at.is_some_and(|at| {
        copy_out(at.frame, &bytes[..used]).is_ok() && copy_out(at.record, &bytes[frame::FRAME_SIZE..]).is_ok()
    });
    match at {
        Some(at) if written => {
            let trampoline = if plan.action.flags & num::SA_RESTORER == 0 { sigreturn_address(p) } else { 0 };
            frame::enter_handler(
                ctx,
                at,
                plan.sig,
                &plan.action,
                trampoline,
                crate::arch::aarch64::cpu::has_bti(),
            );
            Ok(())
        }
        _ => {
            let status = action::killed_status(num::SIGSEGV);
            kprintln!(
                "\n*** pid {}: the frame for {} (signal {}, code {}) cannot be written below {:#x} \
                 (sp {:#x}, pc {:#x}): SIGSEGV; exit status {}",
                p.pid,
                num::name(plan.sig),
                plan.sig,
                plan.info.code(),
                plan.top,
                ctx.sp,
                ctx.pc,
                status
            );
            Err(status)
        }
    }
}

/// Where a handler installed without SA_RESTORER returns: the vDSO's `__kernel_rt_sigreturn`
/// (Linux's `setup_return`: x30 = `VDSO_SYMBOL(mm->context.vdso, sigtramp)`), wherever the
/// image is now (`mremap` moves it, as Linux's `vdso_mremap` follows it). A program that
/// unmapped its vDSO gets 0, so its handler's return faults (SIGSEGV), as on Linux, where the
/// stale address it returns to is no longer mapped.
fn sigreturn_address(p: &Process) -> u64 {
    let Some(space) = p.space() else { return 0 };
    let hint = p.signals.vdso_hint.load(Ordering::Relaxed);
    let found = crate::vdso::sigreturn_in(&space.lock(), hint);
    match found {
        Some((image, sigreturn)) => {
            p.signals.vdso_hint.store(image, Ordering::Relaxed);
            sigreturn
        }
        None => 0,
    }
}

/// Each CPU's room for the signal frame it writes (delivery) and the one it reads
/// (`rt_sigreturn`): 4.7 KiB each, too large for the exception stack and, from the heap, one
/// more allocation a program could make fail; a CPU handles one thread's exception at a time.
static FRAME_OUT: [Mutex<[u8; frame::TOTAL]>; crate::cpu::MAX_CPUS] =
    [const { Mutex::new([0; frame::TOTAL]) }; crate::cpu::MAX_CPUS];
/// See [`FRAME_OUT`].
pub(crate) static FRAME_IN: [Mutex<[u8; frame::FRAME_SIZE]>; crate::cpu::MAX_CPUS] =
    [const { Mutex::new([0; frame::FRAME_SIZE]) }; crate::cpu::MAX_CPUS];

fn report_fatal_signal(p: &Process, tid: u32, sig: u32, ctx: &Context, status: u64) {
    kprintln!(
        "\n*** pid {} (thread {}): {} (signal {}) not handled, at pc {:#x} (x30 {:#x}); exit status {}",
        p.pid,
        tid,
        num::name(sig),
        sig,
        ctx.pc,
        ctx.x[30],
        status
    );
}

/// A synchronous fault on `thread` (context in `frame`): runs the program's handler for it, or,
/// if the thread blocks or ignores the signal or has none, returns `Err(status)` so the caller
/// reports the fault and ends the process (Linux's `force_sig_fault`).
pub fn force_fault(thread: &Thread, frame: &mut TrapFrame, fault: &Fault) -> Result<(), u64> {
    let p = &thread.process;
    let sig = fault.info.signo();
    let plan = {
        let mut st = p.signals.state.lock();
        let installed = st.action(sig);
        let t = st.thread(thread.tid).ok_or(action::killed_status(sig))?;
        let (action, unblock) = action::forced(sig, &installed, t.blocked);
        if unblock {
            t.blocked = t.blocked.without(sig);
        }
        let Outcome::Handle(action) = action::outcome(sig, &action) else {
            return Err(action::killed_status(sig));
        };
        // fault_address and an esr_context only for a fault with an ESR (Linux adds the record
        // only for a nonzero fault code).
        let fault_rec = (fault.esr != 0).then_some((fault.address, fault.esr));
        let plan =
            enter(t, &Context { sp: frame.sp_el0, ..Context::ZERO }, sig, &action, fault.info, fault_rec);
        st.set_action(sig, action::after_entry(&action));
        plan
    };
    with_frame(frame, |ctx| write_frame(thread, ctx, &plan))
}
