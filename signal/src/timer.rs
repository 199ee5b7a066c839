//! Timers that send signals, as data: when an interval timer (`setitimer`) or a POSIX timer
//! (`timer_create`) expires on its clock, how many expiries a periodic one has had, the overrun
//! count of a timer whose signal is still pending, what `getitimer`/`timer_gettime` report, the
//! argument checks of `setitimer`/`timer_settime`, and the steps of `RLIMIT_CPU`. The kernel
//! keeps the timers, checks them on its tick and sends the signals; every rule is here, where it
//! is tested on the build host.
//!
//! A clock is counted in ticks of the caller's choosing (the kernel uses the generic timer's
//! counter, for wall clocks and CPU time alike); only comparisons and differences are made here.

/// `SIGEV_NONE`, `SIGEV_SIGNAL`, `SIGEV_THREAD_ID` (Linux `include/uapi/asm-generic/siginfo.h`).
pub use linux_abi::signal::{SIGEV_NONE, SIGEV_SIGNAL, SIGEV_THREAD, SIGEV_THREAD_ID};

/// Bytes of `struct sigevent`.
pub const SIGEVENT_SIZE: usize = 64;
/// The largest overrun reported (`DELAYTIMER_MAX`, `INT_MAX`).
pub const DELAYTIMER_MAX: u32 = i32::MAX as u32;

/// One timer: when it next expires and its period, in its clock's ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timer {
    /// When it next expires (an absolute reading of its clock); 0: disarmed.
    pub expiry: u64,
    /// Its period (0: it fires once).
    pub interval: u64,
}

impl Timer {
    /// A timer that first expires at `expiry` (0: disarmed, whatever `interval` says) and then
    /// every `interval`.
    pub const fn armed(expiry: u64, interval: u64) -> Self {
        if expiry == 0 { Self { expiry: 0, interval: 0 } } else { Self { expiry, interval } }
    }

    /// Whether it is armed.
    pub const fn is_armed(&self) -> bool {
        self.expiry != 0
    }

    /// The expiries due at `now` (0 if none): a periodic timer moves on past `now` by whole
    /// periods (each period passed is one expiry), a one-shot one is disarmed.
    pub fn expire(&mut self, now: u64) -> u64 {
        if !self.is_armed() || now < self.expiry {
            return 0;
        }
        if self.interval == 0 {
            self.expiry = 0;
            return 1;
        }
        let n = (now - self.expiry) / self.interval + 1;
        self.expiry = self.expiry.saturating_add(n.saturating_mul(self.interval));
        n
    }

    /// What is left until it expires, at `now`: 0 when disarmed, and at least 1 while armed (a
    /// timer due but not yet handled reports the smallest time, as Linux's `itimer_get_remtime`
    /// reports one microsecond rather than zero, which would read as disarmed).
    pub fn left(&self, now: u64) -> u64 {
        if self.is_armed() { self.expiry.saturating_sub(now).max(1) } else { 0 }
    }
}

/// A POSIX timer's signal: queued once, and while it is pending each further expiry is counted
/// as an overrun rather than queued again (Linux's preallocated `sigqueue` and `it_overrun`);
/// `si_overrun` and `timer_getoverrun` report the count as of the signal's delivery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrun {
    /// Its signal is queued and not yet taken.
    pending: bool,
    /// Expiries since that signal was queued.
    count: u64,
    /// The overrun of the last signal taken (`timer_getoverrun`).
    last: u32,
}

impl Overrun {
    /// `n` expiries happened; true when a signal must be queued (none is pending).
    pub fn expired(&mut self, n: u64) -> bool {
        if n == 0 {
            return false;
        }
        if self.pending {
            self.count = self.count.saturating_add(n);
            return false;
        }
        self.pending = true;
        self.count = n - 1;
        true
    }

    /// The signal was not queued after all (its action ignores it, its thread is gone): the next
    /// expiry queues one again.
    pub fn not_queued(&mut self) {
        self.pending = false;
        self.count = 0;
    }

    /// The signal is being taken: the overrun it reports (saturating at [`DELAYTIMER_MAX`]),
    /// which `timer_getoverrun` repeats from now on.
    pub fn taken(&mut self) -> u32 {
        self.pending = false;
        self.last = self.count.min(u64::from(DELAYTIMER_MAX)) as u32;
        self.count = 0;
        self.last
    }

    /// `timer_getoverrun`.
    pub const fn last(&self) -> u32 {
        self.last
    }

    /// The timer was set again: what was counted is dropped (a pending signal stays pending).
    pub fn rearmed(&mut self) {
        self.count = 0;
        self.last = 0;
    }
}

/// How a POSIX timer tells of its expiry (`struct sigevent`, checked as Linux's
/// `good_sigevent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// Nothing (`SIGEV_NONE`): the timer only counts down.
    None,
    /// A signal to the process (`SIGEV_SIGNAL`, and `SIGEV_THREAD`, which the C library turns
    /// into a thread of its own) with `value` as `si_value`.
    Process {
        /// The signal.
        signo: u32,
        /// `sigev_value`.
        value: u64,
    },
    /// A signal to one thread of the process (`SIGEV_THREAD_ID`).
    Thread {
        /// The signal.
        signo: u32,
        /// `sigev_value`.
        value: u64,
        /// The thread.
        tid: u32,
    },
}

/// Decodes a `struct sigevent` (64 bytes: `sigev_value` at 0, `sigev_signo` at 8,
/// `sigev_notify` at 12, the thread id at 16). `None` is EINVAL: an unknown notification, a
/// signal out of 1..=64 where one is sent. Whether the thread exists is the caller's check.
pub fn notify(b: &[u8; SIGEVENT_SIZE]) -> Option<Notify> {
    let value = crate::get_u64(b, 0);
    let signo = crate::get_u32(b, 8);
    let how = crate::get_u32(b, 12) as i32;
    let tid = crate::get_u32(b, 16);
    let signal_ok = (1..=crate::num::_NSIG).contains(&signo);
    match how {
        SIGEV_NONE => Some(Notify::None),
        SIGEV_SIGNAL | SIGEV_THREAD if signal_ok => Some(Notify::Process { signo, value }),
        SIGEV_THREAD_ID if signal_ok && (tid as i32) > 0 => Some(Notify::Thread { signo, value, tid }),
        _ => None,
    }
}

/// A time from user memory as nanoseconds: `(seconds, fraction)` with the fraction in units of
/// `unit` nanoseconds (1000 for a `timeval`, 1 for a `timespec`). `None` (EINVAL) when the
/// seconds are negative or the fraction is not below one second.
pub fn to_ns(secs: i64, frac: i64, unit: u64) -> Option<u64> {
    let per_sec = (1_000_000_000 / unit) as i64;
    if secs < 0 || !(0..per_sec).contains(&frac) {
        return None;
    }
    Some((secs as u64).saturating_mul(1_000_000_000).saturating_add(frac as u64 * unit))
}

/// Nanoseconds as `(seconds, fraction)` in units of `unit` nanoseconds, the fraction rounded up
/// (a time left is never reported shorter than it is; a whole second carries over).
pub fn from_ns(ns: u64, unit: u64) -> (i64, i64) {
    let per_sec = 1_000_000_000 / unit;
    let frac = (ns % 1_000_000_000).div_ceil(unit);
    let secs = ns / 1_000_000_000 + frac / per_sec;
    (secs as i64, (frac % per_sec) as i64)
}

/// What `RLIMIT_CPU` does at a tick, for a process that has used `cpu_secs` whole seconds of
/// CPU time under a soft limit of `soft` and a hard limit of `hard` seconds (`u64::MAX`:
/// unlimited), as Linux's `check_process_timers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuLimit {
    /// Nothing.
    Within,
    /// `SIGXCPU`, and the soft limit becomes this (one second later: the signal repeats every
    /// second until the hard limit).
    Xcpu(u64),
    /// `SIGKILL`: the hard limit.
    Kill,
}

/// See [`CpuLimit`].
pub fn cpu_limit(cpu_secs: u64, soft: u64, hard: u64) -> CpuLimit {
    if hard != u64::MAX && cpu_secs >= hard {
        CpuLimit::Kill
    } else if soft != u64::MAX && cpu_secs >= soft {
        CpuLimit::Xcpu(soft + 1)
    } else {
        CpuLimit::Within
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_shot_timer_fires_once_and_disarms() {
        let mut t = Timer::armed(100, 0);
        assert_eq!((t.expire(99), t.left(99)), (0, 1));
        assert_eq!(t.left(40), 60);
        assert_eq!(t.expire(100), 1);
        assert!(!t.is_armed());
        assert_eq!((t.expire(1000), t.left(1000)), (0, 0));
        assert_eq!(Timer::armed(0, 50), Timer::default());
    }

    #[test]
    fn a_periodic_timer_counts_every_period_passed() {
        let mut t = Timer::armed(100, 10);
        assert_eq!(t.expire(105), 1);
        assert_eq!(t.expiry, 110);
        // 3.5 periods late: the expiries at 110, 120, 130, 140.
        assert_eq!(t.expire(145), 4);
        assert_eq!((t.expiry, t.left(145)), (150, 5));
        // Due exactly: never early, never late by a period.
        assert_eq!(t.expire(150), 1);
        assert_eq!(t.expiry, 160);
    }

    #[test]
    fn overruns_count_expiries_while_the_signal_is_pending() {
        let mut o = Overrun::default();
        assert!(o.expired(1));
        assert!(!o.expired(1) && !o.expired(3));
        assert_eq!(o.taken(), 4);
        assert_eq!(o.last(), 4);
        // Several expiries in one tick with no signal pending: one signal, the rest overruns.
        assert!(o.expired(3));
        assert_eq!(o.taken(), 2);
        assert!(!o.expired(0));
        // A signal that was not queued leaves nothing pending.
        assert!(o.expired(1));
        o.not_queued();
        assert!(o.expired(1));
        assert_eq!(o.taken(), 0);
        let mut big = Overrun::default();
        assert!(big.expired(1) && !big.expired(u64::MAX));
        assert_eq!(big.taken(), DELAYTIMER_MAX);
    }

    fn sigevent(value: u64, signo: u32, how: i32, tid: u32) -> [u8; SIGEVENT_SIZE] {
        let mut b = [0u8; SIGEVENT_SIZE];
        b[..8].copy_from_slice(&value.to_le_bytes());
        b[8..12].copy_from_slice(&signo.to_le_bytes());
        b[12..16].copy_from_slice(&how.to_le_bytes());
        b[16..20].copy_from_slice(&tid.to_le_bytes());
        b
    }

    #[test]
    fn sigevents_as_linux_checks_them() {
        assert_eq!(notify(&sigevent(7, 34, SIGEV_SIGNAL, 0)), Some(Notify::Process { signo: 34, value: 7 }));
        assert_eq!(notify(&sigevent(0, 0, SIGEV_NONE, 0)), Some(Notify::None));
        assert_eq!(
            notify(&sigevent(1, 35, SIGEV_THREAD_ID, 9)),
            Some(Notify::Thread { signo: 35, value: 1, tid: 9 })
        );
        assert_eq!(notify(&sigevent(0, 0, SIGEV_SIGNAL, 0)), None);
        assert_eq!(notify(&sigevent(0, 65, SIGEV_SIGNAL, 0)), None);
        assert_eq!(notify(&sigevent(0, 10, 77, 0)), None);
        assert_eq!(notify(&sigevent(0, 10, SIGEV_THREAD_ID, 0)), None);
    }

    #[test]
    fn time_conversions() {
        assert_eq!(to_ns(1, 500_000, 1000), Some(1_500_000_000));
        assert_eq!(to_ns(0, 1_000_000, 1000), None);
        assert_eq!(to_ns(-1, 0, 1), None);
        assert_eq!(to_ns(0, 999_999_999, 1), Some(999_999_999));
        assert_eq!(from_ns(1_500_000_001, 1000), (1, 500_001));
        assert_eq!(from_ns(999_999_999, 1000), (1, 0));
        assert_eq!(from_ns(42, 1), (0, 42));
    }

    #[test]
    fn rlimit_cpu_steps() {
        assert_eq!(cpu_limit(0, 1, 2), CpuLimit::Within);
        assert_eq!(cpu_limit(1, 1, 2), CpuLimit::Xcpu(2));
        assert_eq!(cpu_limit(2, 2, 2), CpuLimit::Kill);
        assert_eq!(cpu_limit(5, 1, u64::MAX), CpuLimit::Xcpu(2));
        assert_eq!(cpu_limit(9, u64::MAX, u64::MAX), CpuLimit::Within);
    }
}
