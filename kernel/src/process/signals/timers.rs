//! Timers that send signals, run from the tick: the interval timers of `setitimer` and `alarm`
//! (ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF), POSIX timers (`timer_create` and its kin, with
//! `SIGEV_SIGNAL`, `SIGEV_THREAD_ID` and `SIGEV_NONE`, on wall clocks and CPU-time clocks), and
//! `RLIMIT_CPU`. The rules (expiries, overruns, the limit's steps) are `signal::timer`'s; this is
//! the state each process keeps and the tick that checks it.
//!
//! **Accuracy.** Timers are checked on the scheduler tick ([`crate::irq::TICK_HZ`], 100 Hz), so a
//! timer fires at the first tick at or after its expiry: never early, and at most one tick
//! (10 ms) late, plus the time the signal takes to reach its thread. Wall-clock timers are
//! checked on whichever CPU ticks first after the earliest expiry; CPU-time timers on the CPU
//! running a thread of the process, whose time is charged at every tick (`sched::charge_current`),
//! so CPU time is counted to the tick as well. A thread's CPU-time clock read by another thread
//! is its time as of its last tick or switch.
//!
//! **Where they are.** Each process keeps its timers in its signal state ([`Timers`]). Wall-clock
//! expiries are counter values; the earliest of every process is kept in one atomic, so a tick
//! with nothing due costs one load, and only a tick past it walks the process table (one CPU at a
//! time) to send what is due and find the next. CPU-time expiries are in CPU ticks of the process
//! or of one thread, checked when that process runs. Nothing here allocates but `timer_create`
//! (fallibly); a signal is sent with the timer state unlocked (the delivery side takes the
//! signal state, then the timer state, to report an overrun).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use linux_abi::Errno;
use linux_abi::resource::RLIMIT_CPU;
use linux_abi::time::{ITIMER_PROF, ITIMER_REAL, ITIMER_VIRTUAL, NSEC_PER_SEC, ticks_to_ns};
use signal::info::SigInfo;
use signal::num;
use signal::timer::{CpuLimit, Notify, Overrun, Timer, cpu_limit};
use spin::Mutex;

use super::{Sent, Target, send};
use crate::process::{Process, Thread};

/// The most POSIX timers a process may hold at once (Linux bounds them by memory and the pending
/// signals' limit; this bound keeps a program from filling the kernel heap with them): EAGAIN.
pub const MAX_TIMERS: usize = 4096;

/// Which clock a POSIX timer runs on, and so what its expiries are counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// CLOCK_REALTIME (`realtime`), CLOCK_MONOTONIC, CLOCK_BOOTTIME: counter values (a
    /// CLOCK_REALTIME time is converted when the timer is set: the wall clock is never stepped
    /// here).
    Wall {
        /// On CLOCK_REALTIME (an absolute time is wall-clock time).
        realtime: bool,
    },
    /// The process's CPU time (counter ticks of it).
    ProcessCpu,
    /// Thread `tid`'s CPU time.
    ThreadCpu(u32),
}

/// One POSIX timer.
struct PosixTimer {
    id: i32,
    on: On,
    notify: Notify,
    timer: Timer,
    overrun: Overrun,
}

/// A process's timers.
#[derive(Default)]
pub struct Timers {
    state: Mutex<State>,
    /// A CPU-time timer is armed, or may be (the tick locks the state only then).
    cpu_armed: AtomicBool,
}

#[derive(Default)]
struct State {
    /// ITIMER_REAL, in counter values.
    real: Timer,
    /// ITIMER_VIRTUAL and ITIMER_PROF, in the process's CPU ticks (user and system time are one
    /// count here: a thread's time in a system call is not told apart).
    virt: Timer,
    prof: Timer,
    posix: Vec<PosixTimer>,
    next_id: i32,
}

/// The earliest wall-clock expiry of every process (a counter value; `u64::MAX`: none).
static NEXT_WALL: AtomicU64 = AtomicU64::new(u64::MAX);
/// Held by the CPU walking the process table for due wall-clock timers.
static WALKING: Mutex<()> = Mutex::new(());

fn now() -> u64 {
    crate::arch::time::counter()
}

/// Makes the next tick past `expiry` look at the wall-clock timers.
fn wall_armed(expiry: u64) {
    if expiry != 0 {
        NEXT_WALL.fetch_min(expiry, Ordering::AcqRel);
    }
}

impl State {
    fn timer(&mut self, id: i32) -> Result<&mut PosixTimer, Errno> {
        self.posix.iter_mut().find(|t| t.id == id).ok_or(Errno::EINVAL)
    }

    fn cpu_armed(&self) -> bool {
        self.virt.is_armed()
            || self.prof.is_armed()
            || self.posix.iter().any(|t| !matches!(t.on, On::Wall { .. }) && t.timer.is_armed())
    }
}

/// What a due timer sends.
struct Fire {
    target: Target,
    info: SigInfo,
    /// The POSIX timer whose pending state follows the send (`None`: an interval timer).
    id: Option<i32>,
}

impl Timers {
    /// The interval timer `which` (`ITIMER_*`): what it has left and its period, in counter
    /// ticks (of the wall clock or of CPU time). `now_cpu`: the process's CPU ticks now.
    ///
    /// # Errors
    /// EINVAL for an unknown timer.
    pub fn itimer(&self, which: u64, now_cpu: u64) -> Result<(u64, u64), Errno> {
        let st = self.state.lock();
        let (t, at) = match which {
            ITIMER_REAL => (st.real, now()),
            ITIMER_VIRTUAL => (st.virt, now_cpu),
            ITIMER_PROF => (st.prof, now_cpu),
            _ => return Err(Errno::EINVAL),
        };
        Ok((t.left(at), t.interval))
    }

    /// `setitimer(which, ...)`: arms (`value` ticks from now, then every `interval`) or, with
    /// `value` 0, disarms interval timer `which`; returns its old setting as [`itimer`](Self::itimer).
    ///
    /// # Errors
    /// EINVAL for an unknown timer.
    pub fn set_itimer(
        &self,
        which: u64,
        value: u64,
        interval: u64,
        now_cpu: u64,
    ) -> Result<(u64, u64), Errno> {
        let mut st = self.state.lock();
        let at = if which == ITIMER_REAL { now() } else { now_cpu };
        let slot = match which {
            ITIMER_REAL => &mut st.real,
            ITIMER_VIRTUAL => &mut st.virt,
            ITIMER_PROF => &mut st.prof,
            _ => return Err(Errno::EINVAL),
        };
        let old = (slot.left(at), slot.interval);
        *slot = Timer::armed(if value == 0 { 0 } else { at.saturating_add(value) }, interval);
        let expiry = slot.expiry;
        if which == ITIMER_REAL {
            wall_armed(expiry);
        }
        self.cpu_armed.store(st.cpu_armed(), Ordering::Release);
        Ok(old)
    }

    /// `timer_create`: a disarmed timer on `on` that notifies as `notify` says (`None`: Linux's
    /// default, SIGALRM with the timer's id as its value); returns its id.
    ///
    /// # Errors
    /// EAGAIN at [`MAX_TIMERS`] or when the heap has no room.
    pub fn create(&self, on: On, notify: Option<Notify>) -> Result<i32, Errno> {
        let mut st = self.state.lock();
        if st.posix.len() >= MAX_TIMERS || st.posix.try_reserve(1).is_err() {
            return Err(Errno::EAGAIN);
        }
        // Ids are the lowest not in use from a counter that goes round (Linux hands out the
        // next free id of the process from 0).
        let mut id = st.next_id;
        while st.posix.iter().any(|t| t.id == id) {
            id = id.checked_add(1).unwrap_or(0);
        }
        st.next_id = id.checked_add(1).unwrap_or(0);
        let notify = notify.unwrap_or(Notify::Process { signo: num::SIGALRM, value: id as u64 });
        st.posix.push(PosixTimer { id, on, notify, timer: Timer::default(), overrun: Overrun::default() });
        Ok(id)
    }

    /// The clock POSIX timer `id` runs on.
    ///
    /// # Errors
    /// EINVAL: no such timer.
    pub fn clock_of(&self, id: i32) -> Result<On, Errno> {
        Ok(self.state.lock().timer(id)?.on)
    }

    /// `timer_settime`: timer `id` expires at `expiry` (its clock's ticks; 0 disarms) and then
    /// every `interval`; returns its old setting (ticks left, period) at `now` on its clock.
    ///
    /// # Errors
    /// EINVAL: no such timer.
    pub fn settime(&self, id: i32, expiry: u64, interval: u64, now: u64) -> Result<(u64, u64), Errno> {
        let mut st = self.state.lock();
        let t = st.timer(id)?;
        let old = (t.timer.left(now), t.timer.interval);
        t.timer = Timer::armed(expiry, interval);
        t.overrun.rearmed();
        if matches!(t.on, On::Wall { .. }) {
            wall_armed(t.timer.expiry);
        }
        let cpu = st.cpu_armed();
        self.cpu_armed.store(cpu, Ordering::Release);
        Ok(old)
    }

    /// `timer_gettime`: what timer `id` has left at `now` on its clock, and its period.
    ///
    /// # Errors
    /// EINVAL: no such timer.
    pub fn gettime(&self, id: i32, now: u64) -> Result<(u64, u64), Errno> {
        let mut st = self.state.lock();
        let t = st.timer(id)?;
        // A SIGEV_NONE timer is never handled by the tick's signal path alone: its expiries
        // are counted here as well (they only move it on).
        if t.notify == Notify::None {
            t.timer.expire(now);
        }
        Ok((t.timer.left(now), t.timer.interval))
    }

    /// `timer_getoverrun`.
    ///
    /// # Errors
    /// EINVAL: no such timer.
    pub fn getoverrun(&self, id: i32) -> Result<u32, Errno> {
        Ok(self.state.lock().timer(id)?.overrun.last())
    }

    /// `timer_delete`. A signal of it still pending stays pending (reporting no overrun).
    ///
    /// # Errors
    /// EINVAL: no such timer.
    pub fn delete(&self, id: i32) -> Result<(), Errno> {
        let mut st = self.state.lock();
        let at = st.posix.iter().position(|t| t.id == id).ok_or(Errno::EINVAL)?;
        st.posix.swap_remove(at);
        let cpu = st.cpu_armed();
        self.cpu_armed.store(cpu, Ordering::Release);
        Ok(())
    }

    /// `execve`: the POSIX timers go (the interval timers stay, as on Linux).
    pub fn exec(&self) {
        let timers = core::mem::take(&mut self.state.lock().posix);
        drop(timers);
        let cpu = self.state.lock().cpu_armed();
        self.cpu_armed.store(cpu, Ordering::Release);
    }

    /// A signal of POSIX timer `id` is being taken: its `si_overrun`.
    pub(super) fn taken(&self, id: i32) -> u32 {
        self.state.lock().timer(id).map_or(0, |t| t.overrun.taken())
    }

    /// The first due timer on a wall clock at `now`, with its state moved on; also lowers `next`
    /// to each armed wall-clock expiry left.
    fn due_wall(&self, now: u64, next: &mut u64) -> Option<Fire> {
        let mut st = self.state.lock();
        let fire = if st.real.expire(now) > 0 {
            let info = SigInfo::sent(num::SIGALRM, num::SI_KERNEL, 0, 0);
            Some(Fire { target: Target::Process, info, id: None })
        } else {
            st.posix.iter_mut().filter(|t| matches!(t.on, On::Wall { .. })).find_map(|t| fire_posix(t, now))
        };
        for e in core::iter::once(st.real.expiry)
            .chain(st.posix.iter().filter(|t| matches!(t.on, On::Wall { .. })).map(|t| t.timer.expiry))
        {
            if e != 0 {
                *next = (*next).min(e);
            }
        }
        fire
    }

    /// The first due CPU-time timer at the process's `cpu` ticks and thread `tid`'s `thread_cpu`.
    fn due_cpu(&self, cpu: u64, tid: u32, thread_cpu: u64) -> Option<Fire> {
        let mut st = self.state.lock();
        let kernel = |sig| SigInfo::sent(sig, num::SI_KERNEL, 0, 0);
        let fire = if st.virt.expire(cpu) > 0 {
            Some(Fire { target: Target::Process, info: kernel(num::SIGVTALRM), id: None })
        } else if st.prof.expire(cpu) > 0 {
            Some(Fire { target: Target::Process, info: kernel(num::SIGPROF), id: None })
        } else {
            st.posix.iter_mut().find_map(|t| match t.on {
                On::ProcessCpu => fire_posix(t, cpu),
                On::ThreadCpu(of) if of == tid => fire_posix(t, thread_cpu),
                _ => None,
            })
        };
        if fire.is_none() {
            self.cpu_armed.store(st.cpu_armed(), Ordering::Release);
        }
        fire
    }

    /// The signal of POSIX timer `id` was not queued (ignored, or its thread is gone).
    fn not_queued(&self, id: i32) {
        if let Ok(t) = self.state.lock().timer(id) {
            t.overrun.not_queued();
        }
    }
}

/// The signal POSIX timer `t` sends if it is due at `now` (its expiries counted as overruns
/// while one is pending, `signal::timer::Overrun`).
fn fire_posix(t: &mut PosixTimer, now: u64) -> Option<Fire> {
    let n = t.timer.expire(now);
    if n == 0 {
        return None;
    }
    let (signo, value, target) = match t.notify {
        Notify::None => return None,
        Notify::Process { signo, value } => (signo, value, Target::Process),
        Notify::Thread { signo, value, tid } => (signo, value, Target::Thread(tid)),
    };
    if !t.overrun.expired(n) {
        return None;
    }
    Some(Fire { target, info: SigInfo::timer(signo, t.id, 0, value), id: Some(t.id) })
}

/// Sends what `fire` says to `p`; a POSIX timer's signal that was not queued leaves the timer
/// with none pending.
fn send_fire(p: &Process, fire: Fire) {
    let queued = matches!(send(p, fire.target, fire.info), Ok(Sent::Queued));
    if let (false, Some(id)) = (queued, fire.id) {
        p.signals.timers.not_queued(id);
    }
}

/// On every tick of every CPU: the CPU-time timers and `RLIMIT_CPU` of the process this CPU runs
/// (its thread charged its time first), then, past the earliest wall-clock expiry, every due
/// wall-clock timer.
pub fn tick() {
    let running = crate::sched::charge_current(|task| {
        task.as_any_mut().downcast_mut::<Thread>().map(|t| (t.process.clone(), t.tid, t.posix.cpu_ticks))
    })
    .flatten();
    if let Some((p, tid, thread_cpu)) = running {
        cpu_tick(&p, tid, thread_cpu);
    }
    let now = now();
    if now >= NEXT_WALL.load(Ordering::Acquire) {
        wall_tick(now);
    }
}

/// CPU time for thread `tid` of `p`: publishes its clock, fires its CPU-time timers, applies
/// `RLIMIT_CPU`.
fn cpu_tick(p: &Arc<Process>, tid: u32, thread_cpu: u64) {
    if let Some(t) = p.signals.state.lock().thread(tid) {
        t.cpu_ticks = thread_cpu;
    }
    let cpu = p.posix.cpu_ticks.load(Ordering::Relaxed);
    if p.signals.timers.cpu_armed.load(Ordering::Acquire) {
        while let Some(fire) = p.signals.timers.due_cpu(cpu, tid, thread_cpu) {
            send_fire(p, fire);
        }
    }
    let limit = p.rlimits.lock().get(RLIMIT_CPU);
    if limit.cur == u64::MAX && limit.max == u64::MAX {
        return;
    }
    let secs = ticks_to_ns(cpu, crate::arch::time::frequency()) / NSEC_PER_SEC;
    let sig = match cpu_limit(secs, limit.cur, limit.max) {
        CpuLimit::Within => return,
        CpuLimit::Kill => num::SIGKILL,
        CpuLimit::Xcpu(soft) => {
            let mut l = p.rlimits.lock();
            let mut raised = l.get(RLIMIT_CPU);
            raised.cur = soft.max(raised.cur);
            let _ = l.prlimit(RLIMIT_CPU, Some(raised), true);
            num::SIGXCPU
        }
    };
    let _ = send(p, Target::Process, SigInfo::sent(sig, num::SI_KERNEL, 0, 0));
}

/// Sends every due wall-clock timer of every process and finds the next expiry; one CPU at a
/// time (another CPU's tick meanwhile leaves it to the one walking).
fn wall_tick(now: u64) {
    let Some(_walking) = WALKING.try_lock() else { return };
    // Lowered again by every expiry found below, and by any timer armed meanwhile.
    NEXT_WALL.store(u64::MAX, Ordering::Release);
    let mut next = u64::MAX;
    crate::process::family::for_each_process(|p| {
        if p.done.load(Ordering::Acquire) {
            return;
        }
        while let Some(fire) = p.signals.timers.due_wall(now, &mut next) {
            send_fire(p, fire);
        }
    });
    NEXT_WALL.fetch_min(next, Ordering::AcqRel);
}

/// Starts the timers' tick (at boot).
pub fn init() {
    crate::irq::on_tick(tick);
}
