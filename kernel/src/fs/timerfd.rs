//! timerfd, after Linux's fs/timerfd.c: a timer on a clock behind a descriptor. `settime` arms
//! it to expire once (relative, or absolute on its clock) and then every interval; a read of 8
//! bytes returns how many expirations happened since the last read (or the setting), waiting
//! for the first. Readable once it has expired.
//!
//! The count is computed when it is read, from the clock: the next expiry and the interval are
//! the whole state, and a read that finds `n` expirations moves the next expiry `n` intervals
//! on. The wake-up at expiry is a `sched::timer::EventTimer` on the timerfd's key, which fires
//! once per arming: a periodic timerfd is re-armed when it is read (or its setting read), as
//! Linux's `hrtimer` is restarted only then, so an edge-triggered epoll sees one edge per read.
//!
//! CLOCK_MONOTONIC and CLOCK_BOOTTIME are the same clock here (the machine never suspends), and
//! the _ALARM clocks are their plain counterparts (nothing to wake from); CLOCK_REALTIME is
//! CLOCK_MONOTONIC plus the offset fixed at boot (`wallclock`: the time of day is never set, so
//! `TFD_TIMER_CANCEL_ON_SET` is accepted and never cancels).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::layout::Stat;
use linux_abi::poll::{POLLIN, POLLRDNORM, TFD_CLOEXEC, TFD_NONBLOCK};
use spin::Mutex;

use super::file::{FdTable, File, FileError, Io, IoResult};
use crate::memory::fallible;
use crate::sched::timer::EventTimer;
use crate::wallclock;

/// A timer's setting, in nanoseconds (`struct itimerspec`): `value` 0 is disarmed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setting {
    /// Until the next expiry (relative), or when it is (absolute).
    pub value: u64,
    /// Between expiries (0: once).
    pub interval: u64,
}

struct State {
    /// The next expiry on the timer's clock, in nanoseconds (`None`: disarmed).
    next: Option<u64>,
    /// The interval (kept when disarmed, as Linux reports it).
    interval: u64,
}

/// A timerfd.
pub struct TimerFd {
    /// On CLOCK_REALTIME (else CLOCK_MONOTONIC).
    realtime: bool,
    state: Mutex<State>,
    /// The wake-up at the next expiry; its key is the timerfd's.
    timer: Arc<EventTimer>,
}

impl TimerFd {
    fn key(&self) -> usize {
        self.timer.key()
    }

    /// The timer's clock now, in nanoseconds.
    fn now(&self) -> u64 {
        if self.realtime { wallclock::realtime_ns() } else { wallclock::monotonic_ns() }
    }

    /// Arms the wake-up for the expiry `next` (on the timer's clock).
    fn arm(&self, next: Option<u64>) {
        let deadline = next.map(|ns| {
            let monotonic =
                if self.realtime { ns.saturating_sub(wallclock::realtime_offset_ns()) } else { ns };
            wallclock::deadline_at_monotonic(monotonic)
        });
        self.timer.set(deadline);
    }

    /// Takes the expirations up to `now` and moves the next expiry past it (re-arming the
    /// wake-up of a periodic timer): how many there were.
    fn take_expirations(&self, st: &mut State, now: u64) -> u64 {
        let Some(next) = st.next.filter(|&n| n <= now) else { return 0 };
        if st.interval == 0 {
            st.next = None;
            return 1;
        }
        let n = (now - next) / st.interval + 1;
        let following = next.saturating_add(n.saturating_mul(st.interval));
        st.next = Some(following);
        self.arm(st.next);
        n
    }

    /// The setting now (`timerfd_gettime`): the time left to the next expiry (0 when disarmed
    /// or a one-shot timer expired) and the interval.
    pub fn get(&self) -> Setting {
        let st = self.state.lock();
        let now = self.now();
        let value = match st.next {
            None => 0,
            Some(next) if next > now => next - now,
            Some(next) if st.interval > 0 => st.interval - (now - next) % st.interval,
            Some(_) => 0,
        };
        Setting { value, interval: st.interval }
    }

    /// `timerfd_settime`: the new setting (`absolute`: `value` is a time on the timer's clock),
    /// the old one returned as [`get`](Self::get) says it. Expirations not yet read are dropped.
    pub fn set(&self, absolute: bool, new: Setting) -> Setting {
        let old = self.get();
        let mut st = self.state.lock();
        st.interval = new.interval;
        st.next = match new.value {
            0 => None,
            v if absolute => Some(v),
            v => Some(self.now().saturating_add(v)),
        };
        self.arm(st.next);
        old
    }
}

impl Drop for TimerFd {
    fn drop(&mut self) {
        self.timer.unregister();
    }
}

/// `timerfd_create(clockid, flags)` into `files` on CLOCK_REALTIME (`realtime`) or
/// CLOCK_MONOTONIC; the clock and the caller's right to an _ALARM clock are the caller's checks.
///
/// # Errors
/// `EINVAL` (an unknown flag), `EMFILE`, `ENOMEM`.
pub fn create(files: &Mutex<FdTable>, realtime: bool, flags: u64) -> Result<u64, Errno> {
    if flags & !(TFD_CLOEXEC | TFD_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let timer = EventTimer::register(POLLIN | POLLRDNORM)?;
    let tfd = TimerFd { realtime, state: Mutex::new(State { next: None, interval: 0 }), timer };
    let file: Arc<dyn File> = fallible::arc(tfd).map_err(|_| Errno::ENOMEM)?;
    super::anon::install(files, file, (flags & TFD_NONBLOCK) as u32, flags)
}

impl File for TimerFd {
    fn read(&self, io: Io<'_>) -> IoResult {
        if io.len() < 8 {
            return Err(Errno::EINVAL.into());
        }
        let n = {
            let mut st = self.state.lock();
            let now = self.now();
            self.take_expirations(&mut st, now)
        };
        if n == 0 {
            return Err(FileError::WouldBlock(self.key()));
        }
        io.scatter(&n.to_le_bytes()).map(|_| 8)
    }

    fn poll(&self) -> (u16, usize) {
        let st = self.state.lock();
        let expired = st.next.is_some_and(|n| n <= self.now());
        (if expired { POLLIN | POLLRDNORM } else { 0 }, self.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(super::anon::stat())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        super::anon::describe("timerfd")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
