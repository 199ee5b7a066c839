//! Clocks, sleeping and timers: `clock_gettime`, `clock_getres`, `gettimeofday`, `nanosleep`,
//! `clock_nanosleep`, `restart_syscall`, `times`, `getrusage`, `getitimer`, `setitimer`,
//! `timer_create`, `timer_settime`, `timer_gettime`, `timer_getoverrun`, `timer_delete` (the
//! timers themselves are `process::signals::timers`'s; this is their argument handling, in
//! Linux's order).
//!
//! CLOCK_MONOTONIC (and BOOTTIME, RAW, COARSE) is the generic timer's counter since boot;
//! CLOCK_REALTIME adds the offset read from the RTC at boot (`crate::wallclock`). The COARSE
//! variants are what Linux makes them: the time of the last scheduler tick, with one tick as
//! their resolution (`clock_getres`), so a program that measures them sees Linux's steps. CPU-time
//! clocks count the time a thread or process spent running at EL0 and in its system calls
//! (`sched` charges each slice). A sleep blocks the thread on its deadline ([`WaitFor::Timer`]):
//! it costs no CPU, and an idle CPU's timer is programmed for the deadline. A signal that
//! interrupts a relative sleep has what is left written to `rem` (`process::signals::restart`),
//! and a restart without a handler (a stop and continue) resumes it through `restart_syscall`
//! until its original end.
use linux_abi::time::{
    Clock, NSEC_PER_SEC, TIMER_ABSTIME, Timespec, coarse_ns, is_coarse, ns_to_ticks, ticks_to_ns,
};
use signal::timer::{self, Notify};

use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Thread;
use crate::process::signals::restart::RestartBlock;
use crate::process::signals::timers::On;
use crate::sched::Action;
use crate::sched::{Wait, WaitFor};
use crate::wallclock;
use linux_abi::Errno;

/// Clock ticks of `times` (`AT_CLKTCK`, `USER_HZ`).
const USER_HZ: u64 = 100;

/// Reads a `struct timespec` from user memory.
///
/// # Errors
/// EFAULT.
pub fn read_timespec(addr: u64) -> Result<Timespec, Errno> {
    let mut b = [0u8; 16];
    copy_in(&mut b, addr).map_err(|_| Errno::EFAULT)?;
    Ok(Timespec::from_bytes(b))
}

/// Reads a timeout that must be a valid timespec.
///
/// # Errors
/// EFAULT, or EINVAL for an invalid value.
pub fn read_valid_timespec(addr: u64) -> Result<Timespec, Errno> {
    let t = read_timespec(addr)?;
    if t.is_valid() { Ok(t) } else { Err(Errno::EINVAL) }
}

/// The CPU ticks `clock` has counted: the caller's own clocks exactly, another thread's of the
/// process or another process's as of their last tick or switch. `None` (EINVAL) for a thread
/// of another process or one that does not exist, as Linux's `lookup_task`.
fn cpu_clock_ticks(thread: &Thread, clock: Clock) -> Option<u64> {
    let p = &thread.process;
    match clock {
        Clock::ProcessCpu { pid } if pid == 0 || pid == p.pid => Some(crate::process::cpu_ticks(p)),
        Clock::ProcessCpu { pid } => crate::process::family::by_pid(pid)
            .map(|q| q.posix.cpu_ticks.load(core::sync::atomic::Ordering::Relaxed)),
        Clock::ThreadCpu { tid } if tid == 0 || tid == thread.tid => {
            Some(crate::process::thread_cpu_ticks(thread))
        }
        Clock::ThreadCpu { tid } => p.signals.state.lock().thread(tid).map(|t| t.cpu_ticks),
        _ => None,
    }
}

fn cpu_ns(thread: &Thread, clock: Clock) -> Option<u64> {
    cpu_clock_ticks(thread, clock).map(|ticks| ticks_to_ns(ticks, crate::arch::time::frequency()))
}

fn now_ns(thread: &Thread, clock: Clock) -> Option<u64> {
    match clock {
        Clock::Realtime => Some(wallclock::realtime_ns()),
        Clock::Monotonic => Some(wallclock::monotonic_ns()),
        _ => cpu_ns(thread, clock),
    }
}

/// A `clockid_t` argument: an `int`, so Linux looks at the low 32 bits only.
fn decode(clock: u64) -> Option<Clock> {
    Clock::decode(clock as i32)
}

/// One scheduler tick in nanoseconds: the COARSE clocks' step.
const TICK_NS: u64 = NSEC_PER_SEC / crate::irq::TICK_HZ;

/// The reading of `clock` (a `clockid_t` argument), COARSE clocks moved back to the last tick:
/// one counter reading for both, as the vDSO computes it (`crate::vdso`).
fn read_clock(thread: &Thread, clock: u64) -> Option<u64> {
    let monotonic = wallclock::monotonic_ns();
    let ns = match decode(clock)? {
        Clock::Realtime => monotonic.saturating_add(wallclock::realtime_offset_ns()),
        Clock::Monotonic => monotonic,
        cpu => cpu_ns(thread, cpu)?,
    };
    if is_coarse(clock as i32) { Some(coarse_ns(ns, monotonic, TICK_NS)) } else { Some(ns) }
}

/// `clock_gettime(clockid, tp)`.
pub fn clock_gettime(thread: &Thread, clock: u64, tp: u64) -> Result<u64, Errno> {
    let ns = read_clock(thread, clock).ok_or(Errno::EINVAL)?;
    if copy_out(tp, &Timespec::from_ns(ns).to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `clock_getres(clockid, res)`: one counter period (16 ns under QEMU), rounded up; one tick
/// for the COARSE clocks; as Linux's `posix_cpu_clock_getres`, 1 ns for the CPU-time clocks
/// that count scheduler time (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID and the clocks
/// of `clock_getcpuclockid`, `pthread_getcpuclockid`) and one tick for the others.
pub fn clock_getres(thread: &Thread, clock: u64, res: u64) -> Result<u64, Errno> {
    let Some(decoded) = decode(clock).filter(|&c| now_ns(thread, c).is_some()) else {
        return Err(Errno::EINVAL);
    };
    if res == 0 {
        return Ok(0);
    }
    const CPUCLOCK_SCHED: i32 = 2;
    let period = match decoded {
        Clock::ProcessCpu { .. } | Clock::ThreadCpu { .. } => {
            if (clock as i32) >= 0 || clock as i32 & 3 == CPUCLOCK_SCHED { 1 } else { TICK_NS }
        }
        _ if is_coarse(clock as i32) => TICK_NS,
        _ => NSEC_PER_SEC.div_ceil(crate::arch::time::frequency().max(1)),
    };
    if copy_out(res, &Timespec::from_ns(period).to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `gettimeofday(tv, tz)`: the time zone is UTC (both fields 0).
pub fn gettimeofday(tv: u64, tz: u64) -> Result<u64, Errno> {
    let ns = wallclock::realtime_ns();
    if tv != 0 {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(ns / NSEC_PER_SEC).to_le_bytes());
        b[8..].copy_from_slice(&(ns % NSEC_PER_SEC / 1000).to_le_bytes());
        if copy_out(tv, &b).is_err() {
            return Err(Errno::EFAULT);
        }
    }
    if tz != 0 && copy_out(tz, &[0u8; 8]).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

fn sleep_until(frame: &mut TrapFrame, deadline: u64) -> Action {
    if deadline <= crate::arch::time::counter() {
        frame.x[0] = 0;
        return Action::Continue;
    }
    Action::Block(Wait { what: WaitFor::Timer, deadline: Some(deadline) })
}

fn fail(frame: &mut TrapFrame, errno: Errno) -> Action {
    Action::reply(frame, Err(errno))
}

/// `nanosleep(req, rem)`: a relative sleep on CLOCK_MONOTONIC.
pub fn nanosleep(frame: &mut TrapFrame, req: u64) -> Action {
    match read_valid_timespec(req) {
        Ok(t) => sleep_until(frame, wallclock::deadline_after(t.to_ns())),
        Err(e) => fail(frame, e),
    }
}

/// `restart_syscall()`: resumes what a call interrupted with `ERESTART_RESTARTBLOCK` left in the
/// thread's restart block (`process::signals::restart`): a relative sleep until its original
/// end, a timed futex wait until its deadline. With no block (a program calling it itself, or a
/// handler's `rt_sigreturn` having dropped it) it is EINTR, as Linux's `do_no_restart_syscall`.
pub fn restart_syscall(thread: &mut Thread, frame: &mut TrapFrame) -> Action {
    let Some(block) = thread.call.restart_block.take() else { return fail(frame, Errno::EINTR) };
    let action = match block {
        RestartBlock::Sleep { deadline, .. } => sleep_until(frame, deadline),
        RestartBlock::Futex { uaddr, val, bitset, shared, deadline } => {
            super::futex::wait_again(thread, frame, (uaddr, val, bitset, shared), deadline)
        }
    };
    if let Action::Block(_) = action {
        // Kept for an interruption of the resumed wait (its restart block is the same).
        thread.call.restart_block = Some(block);
    }
    action
}

/// `clock_nanosleep(clockid, flags, req, rem)`: relative, or absolute with `TIMER_ABSTIME`.
/// Linux returns the error (not -1 and errno) from the C function; the system call's convention
/// is the usual negative value.
pub fn clock_nanosleep(frame: &mut TrapFrame, clock: u64, flags: u64, req: u64) -> Action {
    let Some(clock) = decode(clock) else { return fail(frame, Errno::EINVAL) };
    if !clock.can_sleep_on() {
        return fail(frame, Errno::EINVAL);
    }
    let t = match read_valid_timespec(req) {
        Ok(t) => t,
        Err(e) => return fail(frame, e),
    };
    let deadline = if flags & TIMER_ABSTIME != 0 {
        let monotonic = match clock {
            Clock::Realtime => t.to_ns().saturating_sub(wallclock::realtime_offset_ns()),
            _ => t.to_ns(),
        };
        wallclock::deadline_at_monotonic(monotonic)
    } else {
        wallclock::deadline_after(t.to_ns())
    };
    sleep_until(frame, deadline)
}

/// `times(buf)`: user time is all the CPU time (system time is not told apart); returns clock
/// ticks since boot.
pub fn times(thread: &Thread, buf: u64) -> Result<u64, Errno> {
    let freq = crate::arch::time::frequency().max(1);
    let to_hz = |ticks: u64| (u128::from(ticks) * u128::from(USER_HZ) / u128::from(freq)) as u64;
    if buf != 0 {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&to_hz(crate::process::cpu_ticks(&thread.process)).to_le_bytes());
        if copy_out(buf, &b).is_err() {
            return Err(Errno::EFAULT);
        }
    }
    Ok(to_hz(crate::arch::time::counter()))
}

/// `getrusage(who, usage)`: RUSAGE_SELF (0), RUSAGE_CHILDREN (-1: the children reaped, with
/// what their own reaped children used), RUSAGE_THREAD (1); the CPU time is reported as user
/// time, and the minor faults taken (`process::usage`); the rest is zero.
pub fn getrusage(thread: &Thread, who: u64, usage: u64) -> Result<u64, Errno> {
    use crate::process::usage::Usage;
    let slice = Usage { cpu_ticks: crate::sched::current_slice(), min_flt: 0 };
    let u = match who as i64 {
        0 => Usage::of_process(&thread.process).plus(slice),
        -1 => Usage::of_children(&thread.process),
        1 => Usage::of_thread(thread).plus(slice),
        _ => return Err(Errno::EINVAL),
    };
    if copy_out(usage, &u.to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// Reads a `(seconds, fraction)` pair of 8-byte fields at `at` (a `timeval` or a `timespec`).
fn read_pair(at: u64) -> Result<(i64, i64), Errno> {
    let t = read_timespec(at)?;
    Ok((t.sec, t.nsec))
}

/// The 16 bytes of a `timeval` (`unit` 1000) or `timespec` (`unit` 1) holding `ns`, rounded up.
fn pair_bytes(ns: u64, unit: u64) -> [u8; 16] {
    let (sec, frac) = timer::from_ns(ns, unit);
    Timespec { sec, nsec: frac }.to_bytes()
}

/// An interval (`struct itimerval`, `unit` 1000, or `struct itimerspec`, `unit` 1) at `at`: its
/// value and period in nanoseconds.
///
/// # Errors
/// EFAULT; EINVAL for a time Linux's `timeval_valid`/`timespec64_valid` refuses.
fn read_interval(at: u64, unit: u64) -> Result<(u64, u64), Errno> {
    let (isec, ifrac) = read_pair(at)?;
    let (vsec, vfrac) = read_pair(at.wrapping_add(16))?;
    let interval = timer::to_ns(isec, ifrac, unit).ok_or(Errno::EINVAL)?;
    let value = timer::to_ns(vsec, vfrac, unit).ok_or(Errno::EINVAL)?;
    Ok((value, interval))
}

/// Writes an interval (value and period in nanoseconds) at `at`.
fn write_interval(at: u64, unit: u64, value: u64, interval: u64) -> Result<(), Errno> {
    let mut b = [0u8; 32];
    b[..16].copy_from_slice(&pair_bytes(interval, unit));
    b[16..].copy_from_slice(&pair_bytes(value, unit));
    copy_out(at, &b).map_err(|_| Errno::EFAULT)
}

fn ns(ticks: u64) -> u64 {
    ticks_to_ns(ticks, crate::arch::time::frequency())
}

fn ticks(ns: u64) -> u64 {
    ns_to_ticks(ns, crate::arch::time::frequency())
}

/// `getitimer(which, value)`.
pub fn getitimer(thread: &Thread, which: u64, value: u64) -> Result<u64, Errno> {
    let p = &thread.process;
    let (left, interval) = p.signals.timers.itimer(which, crate::process::cpu_ticks(p))?;
    write_interval(value, 1000, ns(left), ns(interval)).map(|()| 0)
}

/// `setitimer(which, new, old)`: as Linux 6.1, a null `new` disarms; the times are checked
/// before the timer number.
pub fn setitimer(thread: &Thread, which: u64, new: u64, old: u64) -> Result<u64, Errno> {
    let (value, interval) = if new == 0 { (0, 0) } else { read_interval(new, 1000)? };
    let p = &thread.process;
    let now_cpu = crate::process::cpu_ticks(p);
    let (left, period) = p.signals.timers.set_itimer(which, ticks(value), ticks(interval), now_cpu)?;
    if old != 0 {
        write_interval(old, 1000, ns(left), ns(period))?;
    }
    Ok(0)
}

/// The clock a POSIX timer may run on, as Linux's `clockid_to_kclock` and `timer_create`
/// methods: EINVAL for no clock or a CPU clock of a thread that is not the caller's, EOPNOTSUPP
/// for a clock that has no timers (MONOTONIC_RAW, the COARSE clocks).
fn timer_clock(thread: &Thread, clock: u64) -> Result<On, Errno> {
    let id = clock as i32;
    let decoded = decode(clock).ok_or(Errno::EINVAL)?;
    if matches!(id, 4..=6) {
        return Err(Errno::EOPNOTSUPP);
    }
    if cpu_clock_ticks(thread, decoded).is_none() && !matches!(decoded, Clock::Realtime | Clock::Monotonic) {
        return Err(Errno::EINVAL);
    }
    Ok(match decoded {
        Clock::Realtime => On::Wall { realtime: true },
        Clock::Monotonic => On::Wall { realtime: false },
        Clock::ProcessCpu { pid } if pid == 0 || pid == thread.process.pid => On::ProcessCpu,
        Clock::ThreadCpu { tid } => On::ThreadCpu(if tid == 0 { thread.tid } else { tid }),
        // Another process's CPU time: its timers would have to be checked where it runs; not
        // offered here.
        Clock::ProcessCpu { .. } => return Err(Errno::EINVAL),
    })
}

/// `timer_create(clockid, sevp, timerid)`, in Linux's order: EFAULT reading `sevp`; the clock
/// (EINVAL, EOPNOTSUPP); EAGAIN (no room); EINVAL for the `sigevent` (a thread outside the
/// process); EFAULT writing the id, which deletes the timer again.
pub fn timer_create(thread: &Thread, clock: u64, sevp: u64, timerid: u64) -> Result<u64, Errno> {
    let event = if sevp == 0 {
        None
    } else {
        let mut b = [0u8; timer::SIGEVENT_SIZE];
        copy_in(&mut b, sevp).map_err(|_| Errno::EFAULT)?;
        Some(b)
    };
    let on = timer_clock(thread, clock)?;
    let p = &thread.process;
    let notify = match event {
        None => None,
        Some(b) => {
            let n = timer::notify(&b).ok_or(Errno::EINVAL)?;
            if let Notify::Thread { tid, .. } = n
                && p.signals.state.lock().thread(tid).is_none()
            {
                return Err(Errno::EINVAL);
            }
            Some(n)
        }
    };
    let id = p.signals.timers.create(on, notify)?;
    if copy_out(timerid, &id.to_le_bytes()).is_err() {
        let _ = p.signals.timers.delete(id);
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// The reading of a POSIX timer's clock now, in its ticks.
fn timer_now(thread: &Thread, on: On) -> u64 {
    match on {
        On::Wall { .. } => crate::arch::time::counter(),
        On::ProcessCpu => crate::process::cpu_ticks(&thread.process),
        On::ThreadCpu(tid) => cpu_clock_ticks(thread, Clock::ThreadCpu { tid }).unwrap_or(0),
    }
}

/// `timer_settime(timerid, flags, new, old)`, in Linux's order: EINVAL for no `new`, EFAULT
/// reading it, EINVAL for an invalid time, EINVAL for no such timer, EFAULT writing `old`.
pub fn timer_settime(thread: &Thread, id: u64, flags: u64, new: u64, old: u64) -> Result<u64, Errno> {
    if new == 0 {
        return Err(Errno::EINVAL);
    }
    let (value, interval) = read_interval(new, 1)?;
    let timers = &thread.process.signals.timers;
    let id = id as i32;
    let on = timers.clock_of(id)?;
    let now = timer_now(thread, on);
    let expiry = if value == 0 {
        0
    } else if flags & TIMER_ABSTIME == 0 {
        now.saturating_add(ticks(value))
    } else {
        match on {
            On::Wall { realtime } => {
                let monotonic =
                    if realtime { value.saturating_sub(wallclock::realtime_offset_ns()) } else { value };
                wallclock::deadline_at_monotonic(monotonic).max(1)
            }
            _ => ticks(value).max(1),
        }
    };
    let (left, period) = timers.settime(id, expiry, ticks(interval), now)?;
    if old != 0 {
        write_interval(old, 1, ns(left), ns(period))?;
    }
    Ok(0)
}

/// `timer_gettime(timerid, curr)`.
pub fn timer_gettime(thread: &Thread, id: u64, curr: u64) -> Result<u64, Errno> {
    let timers = &thread.process.signals.timers;
    let id = id as i32;
    let on = timers.clock_of(id)?;
    let (left, period) = timers.gettime(id, timer_now(thread, on))?;
    write_interval(curr, 1, ns(left), ns(period)).map(|()| 0)
}

/// `timer_getoverrun(timerid)`.
pub fn timer_getoverrun(thread: &Thread, id: u64) -> Result<u64, Errno> {
    thread.process.signals.timers.getoverrun(id as i32).map(u64::from)
}

/// `timer_delete(timerid)`.
pub fn timer_delete(thread: &Thread, id: u64) -> Result<u64, Errno> {
    thread.process.signals.timers.delete(id as i32).map(|()| 0)
}
