//! Clocks and sleeping: `clock_gettime`, `clock_getres`, `gettimeofday`, `nanosleep`,
//! `clock_nanosleep`, `times`, `getrusage`.
//!
//! CLOCK_MONOTONIC (and BOOTTIME, RAW, COARSE) is the generic timer's counter since boot;
//! CLOCK_REALTIME adds the offset read from the RTC at boot (`crate::wallclock`). The COARSE
//! variants are what Linux makes them: the time of the last scheduler tick, with one tick as
//! their resolution (`clock_getres`), so a program that measures them sees Linux's steps. CPU-time
//! clocks count the time a thread or process spent running at EL0 and in its system calls
//! (`sched` charges each slice). A sleep blocks the thread on its deadline ([`WaitFor::Timer`]):
//! it costs no CPU, and an idle CPU's timer is programmed for the deadline. With no signals, a
//! sleep is never interrupted, so `rem` is never written.
use linux_abi::time::{Clock, NSEC_PER_SEC, TIMER_ABSTIME, Timespec, coarse_ns, is_coarse, ticks_to_ns};

use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Thread;
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

fn cpu_ns(thread: &Thread, clock: Clock) -> Option<u64> {
    let freq = crate::arch::time::frequency();
    let p = &thread.process;
    let ticks = match clock {
        Clock::ProcessCpu { pid } if pid == 0 || pid == p.pid => crate::process::cpu_ticks(p),
        Clock::ThreadCpu { tid } if tid == 0 || tid == thread.tid => crate::process::thread_cpu_ticks(thread),
        _ => return None, // another process's or thread's clock: not visible here
    };
    Some(ticks_to_ns(ticks, freq))
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

/// The reading of `clock` (a `clockid_t` argument), COARSE clocks moved back to the last tick.
fn read_clock(thread: &Thread, clock: u64) -> Option<u64> {
    let ns = decode(clock).and_then(|c| now_ns(thread, c))?;
    if is_coarse(clock as i32) { Some(coarse_ns(ns, wallclock::monotonic_ns(), TICK_NS)) } else { Some(ns) }
}

/// `clock_gettime(clockid, tp)`.
pub fn clock_gettime(thread: &Thread, clock: u64, tp: u64) -> Result<u64, Errno> {
    let ns = read_clock(thread, clock).ok_or(Errno::EINVAL)?;
    if copy_out(tp, &Timespec::from_ns(ns).to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `clock_getres(clockid, res)`: one counter period (16 ns under QEMU), rounded up; one tick
/// for the COARSE clocks.
pub fn clock_getres(thread: &Thread, clock: u64, res: u64) -> Result<u64, Errno> {
    if decode(clock).and_then(|c| now_ns(thread, c)).is_none() {
        return Err(Errno::EINVAL);
    }
    if res == 0 {
        return Ok(0);
    }
    let period = if is_coarse(clock as i32) {
        TICK_NS
    } else {
        NSEC_PER_SEC.div_ceil(crate::arch::time::frequency().max(1))
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

/// `getrusage(who, usage)`: RUSAGE_SELF (0), RUSAGE_CHILDREN (-1, always zero: no children),
/// RUSAGE_THREAD (1); the CPU time is reported as user time, the rest is zero.
pub fn getrusage(thread: &Thread, who: u64, usage: u64) -> Result<u64, Errno> {
    let ticks = match who as i64 {
        0 => crate::process::cpu_ticks(&thread.process),
        -1 => 0,
        1 => crate::process::thread_cpu_ticks(thread),
        _ => return Err(Errno::EINVAL),
    };
    let ns = ticks_to_ns(ticks, crate::arch::time::frequency());
    let mut b = [0u8; 144];
    b[..8].copy_from_slice(&(ns / NSEC_PER_SEC).to_le_bytes());
    b[8..16].copy_from_slice(&(ns % NSEC_PER_SEC / 1000).to_le_bytes());
    if copy_out(usage, &b).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}
