//! Time as programs see it: `struct timespec`, Linux's clock ids, and the conversions between
//! nanoseconds and the generic timer's counter ticks that every timeout goes through.
//!
//! Rules from Linux: a timespec is valid when `tv_sec >= 0` and `0 <= tv_nsec < 10^9`
//! (`timespec64_valid`); a relative timeout is measured on CLOCK_MONOTONIC; converting a timeout
//! to ticks rounds up, so nobody wakes before the time asked for.

/// The wall clock.
pub const CLOCK_REALTIME: i32 = 0;
/// Time since boot, not counting suspend (never set).
pub const CLOCK_MONOTONIC: i32 = 1;
/// CPU time of the calling process.
pub const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
/// CPU time of the calling thread.
pub const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
/// `CLOCK_MONOTONIC` without NTP adjustment.
pub const CLOCK_MONOTONIC_RAW: i32 = 4;
/// `CLOCK_REALTIME` at the last tick.
pub const CLOCK_REALTIME_COARSE: i32 = 5;
/// `CLOCK_MONOTONIC` at the last tick.
pub const CLOCK_MONOTONIC_COARSE: i32 = 6;
/// Time since boot, counting suspend.
pub const CLOCK_BOOTTIME: i32 = 7;
/// `CLOCK_REALTIME` that wakes a suspended system.
pub const CLOCK_REALTIME_ALARM: i32 = 8;
/// `CLOCK_BOOTTIME` that wakes a suspended system.
pub const CLOCK_BOOTTIME_ALARM: i32 = 9;
/// International atomic time.
pub const CLOCK_TAI: i32 = 11;
/// `clock_nanosleep`/`timer_settime`: the time is absolute.
pub const TIMER_ABSTIME: u64 = 1;
/// `setitimer`: real time, SIGALRM.
pub const ITIMER_REAL: u64 = 0;
/// `setitimer`: user CPU time, SIGVTALRM.
pub const ITIMER_VIRTUAL: u64 = 1;
/// `setitimer`: user and system CPU time, SIGPROF.
pub const ITIMER_PROF: u64 = 2;

/// Nanoseconds per second.
pub const NSEC_PER_SEC: u64 = 1_000_000_000;

/// `struct timespec` (64-bit: two 8-byte fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timespec {
    /// Seconds.
    pub sec: i64,
    /// Nanoseconds.
    pub nsec: i64,
}

impl Timespec {
    /// Reads the user's 16 bytes.
    pub fn from_bytes(b: [u8; 16]) -> Self {
        let (s, n) = b.split_at(8);
        Self {
            sec: i64::from_le_bytes(s.try_into().unwrap_or_default()),
            nsec: i64::from_le_bytes(n.try_into().unwrap_or_default()),
        }
    }

    /// The 16 bytes a program reads.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.sec.to_le_bytes());
        b[8..].copy_from_slice(&self.nsec.to_le_bytes());
        b
    }

    /// Linux's `timespec64_valid`.
    pub fn is_valid(&self) -> bool {
        self.sec >= 0 && (0..NSEC_PER_SEC as i64).contains(&self.nsec)
    }

    /// The time in nanoseconds, saturating (only for valid values).
    pub fn to_ns(&self) -> u64 {
        (self.sec as u64).saturating_mul(NSEC_PER_SEC).saturating_add(self.nsec as u64)
    }

    /// A timespec from nanoseconds.
    pub fn from_ns(ns: u64) -> Self {
        Self { sec: (ns / NSEC_PER_SEC) as i64, nsec: (ns % NSEC_PER_SEC) as i64 }
    }
}

/// How CLOCK_MONOTONIC is computed from the counter, by the kernel's `clock_gettime` and by the
/// vDSO's from its data page alike (so the two never disagree): `ns = (ticks * mult) >> 32`,
/// the product taken in 128 bits, as Linux's `clocksource` mult and shift (one multiplication,
/// no division; the fixed shift is one `EXTR` in the vDSO).
///
/// `mult` is `10^9 * 2^32 / freq` rounded UP: a reading is never below the exact
/// `ticks * 10^9 / freq` (so a sleep to a deadline [`ns_to_ticks`] computed never ends early by
/// this clock) and above it by less than `ticks / 2^32 + 1` ns (a clock 2^-32 fast at worst, a
/// fraction of a part per billion, far inside a crystal's accuracy), and exact for frequencies
/// that divide `10^9 * 2^32` (QEMU's 62.5 MHz, 1 GHz, 25 MHz).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterScale {
    /// The multiplier (0 for an unknown frequency: every reading is 0).
    pub mult: u64,
}

impl CounterScale {
    /// The right shift of the 128-bit product.
    pub const SHIFT: u32 = 32;

    /// The scale for a counter of `freq` Hz.
    pub fn new(freq: u64) -> Self {
        if freq == 0 {
            return Self { mult: 0 };
        }
        let mult = (u128::from(NSEC_PER_SEC) << Self::SHIFT).div_ceil(u128::from(freq));
        Self { mult: u64::try_from(mult).unwrap_or(u64::MAX) }
    }

    /// Nanoseconds in `ticks`.
    pub fn ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.mult)) >> Self::SHIFT) as u64
    }
}

/// Counter ticks covering at least `ns` nanoseconds at `freq` Hz (rounded up, saturating).
pub fn ns_to_ticks(ns: u64, freq: u64) -> u64 {
    let t = (u128::from(ns) * u128::from(freq)).div_ceil(u128::from(NSEC_PER_SEC));
    u64::try_from(t).unwrap_or(u64::MAX)
}

/// Nanoseconds in `ticks` counter ticks at `freq` Hz (rounded down; 0 if `freq` is 0).
pub fn ticks_to_ns(ticks: u64, freq: u64) -> u64 {
    if freq == 0 {
        return 0;
    }
    u64::try_from(u128::from(ticks) * u128::from(NSEC_PER_SEC) / u128::from(freq)).unwrap_or(u64::MAX)
}

/// Whether `id` names one of the COARSE clocks (CLOCK_REALTIME_COARSE 5, CLOCK_MONOTONIC_COARSE
/// 6). Linux serves them from the time of the last timer tick, and `clock_getres` reports one
/// tick for them (`LOW_RES_NSEC`, `TICK_NSEC` in `kernel/time/posix-timers.c`), where the other
/// clocks report the counter's resolution.
pub fn is_coarse(id: i32) -> bool {
    id == 5 || id == 6
}

/// A COARSE clock's reading: `ns` (the precise reading of the same clock) moved back to the
/// last tick: the monotonic clock (read at the same moment, `monotonic_ns`) advances in steps of
/// `tick_ns` from boot, and the clock keeps its offset from it.
pub fn coarse_ns(ns: u64, monotonic_ns: u64, tick_ns: u64) -> u64 {
    ns.saturating_sub(monotonic_ns % tick_ns.max(1))
}

/// A clock a program can name (`clockid_t`, Linux `include/uapi/linux/time.h` and the CPU-clock
/// encoding of `include/linux/posix-timers.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// CLOCK_REALTIME (0), CLOCK_REALTIME_COARSE (5), CLOCK_TAI (11): the wall clock.
    Realtime,
    /// CLOCK_MONOTONIC (1), CLOCK_MONOTONIC_RAW (4), CLOCK_MONOTONIC_COARSE (6), and CLOCK_BOOTTIME
    /// (7), which is the same here (the machine never suspends).
    Monotonic,
    /// CPU time of a process: CLOCK_PROCESS_CPUTIME_ID (2) is the caller's (`pid` 0), or the
    /// clock `clock_getcpuclockid` makes for `pid`.
    ProcessCpu {
        /// 0: the caller.
        pid: u32,
    },
    /// CPU time of a thread: CLOCK_THREAD_CPUTIME_ID (3) is the caller's (`tid` 0).
    ThreadCpu {
        /// 0: the caller.
        tid: u32,
    },
}

impl Clock {
    /// Decodes a `clockid_t`; `None` is EINVAL.
    pub fn decode(id: i32) -> Option<Self> {
        match id {
            0 | 5 | 11 => Some(Self::Realtime),
            1 | 4 | 6 | 7 => Some(Self::Monotonic),
            2 => Some(Self::ProcessCpu { pid: 0 }),
            3 => Some(Self::ThreadCpu { tid: 0 }),
            id if id < 0 => {
                // ~pid << 3 | per-thread << 2 | which (0 PROF, 1 VIRT, 2 SCHED; 3 is a dynamic FD clock).
                if id & 3 == 3 {
                    return None;
                }
                let pid = u32::try_from(!(id >> 3)).ok()?;
                Some(if id & 4 != 0 { Self::ThreadCpu { tid: pid } } else { Self::ProcessCpu { pid } })
            }
            _ => None,
        }
    }

    /// Whether `clock_nanosleep` can sleep on it (Linux refuses thread CPU clocks with EINVAL;
    /// process CPU clocks are refused here too, see the kernel's documentation).
    pub fn can_sleep_on(&self) -> bool {
        matches!(self, Self::Realtime | Self::Monotonic)
    }
}

/// A UTC date and time from seconds since 1970 (proleptic Gregorian; H. Hinnant's
/// `civil_from_days`): `(year, month 1..=12, day 1..=31, hour, minute, second)`.
pub fn civil_from_unix(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, (rem / 3600) as u32, (rem / 60 % 60) as u32, (rem % 60) as u32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_counter_scale_is_never_below_the_exact_time_and_never_ends_a_sleep_early() {
        for freq in
            [62_500_000u64, 1_000_000_000, 25_000_000, 19_200_000, 54_000_000, 24_000_000, 1_000_000, 3]
        {
            let scale = CounterScale::new(freq);
            for ticks in [0u64, 1, 7, 1 << 20, 123_456_789_012, 1 << 44, (1 << 50) + 12_345] {
                if u128::from(ticks) * u128::from(NSEC_PER_SEC) / u128::from(freq) >= 1 << 63 {
                    continue; // centuries of uptime: the 64-bit clock wraps on both sides
                }
                let exact = ticks_to_ns(ticks, freq);
                let got = scale.ns(ticks);
                assert!(
                    got >= exact && got <= exact + (ticks >> 32) + 1,
                    "{freq} Hz, {ticks} ticks: {got} vs {exact}"
                );
                if (u128::from(NSEC_PER_SEC) << 32) % u128::from(freq) == 0 {
                    assert_eq!(got, exact, "{freq} Hz");
                }
                // A deadline in nanoseconds, turned to ticks, is reached by the clock then.
                assert!(scale.ns(ns_to_ticks(exact, freq)) >= exact);
            }
        }
        assert_eq!(CounterScale::new(0).ns(12345), 0);
    }

    #[test]
    fn coarse_clocks_are_five_and_six_and_step_with_the_tick() {
        let coarse: [i32; 2] = [5, 6];
        for id in -8..16 {
            assert_eq!(is_coarse(id), coarse.contains(&id), "clock {id}");
        }
        // Monotonic 25 ms after boot with a 10 ms tick: the last tick was 5 ms ago.
        assert_eq!(coarse_ns(25_000_000, 25_000_000, 10_000_000), 20_000_000);
        // A realtime reading at the same moment moves back by the same 5 ms.
        assert_eq!(coarse_ns(1_700_000_000_123_000_000, 25_000_000, 10_000_000), 1_700_000_000_118_000_000);
        assert_eq!(coarse_ns(3, 7, 10), 0);
        assert_eq!(coarse_ns(40, 40, 0), 40);
    }

    use super::*;

    #[test]
    fn unix_seconds_become_utc_dates() {
        assert_eq!(civil_from_unix(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0)); // a leap day
        assert_eq!(civil_from_unix(1_700_000_000), (2023, 11, 14, 22, 13, 20));
        assert_eq!(civil_from_unix(4_102_444_799), (2099, 12, 31, 23, 59, 59));
    }

    #[test]
    fn timespecs_round_trip_and_validate_like_linux() {
        let t = Timespec { sec: 5, nsec: 999_999_999 };
        assert_eq!(Timespec::from_bytes(t.to_bytes()), t);
        assert!(t.is_valid());
        assert!(!Timespec { sec: -1, nsec: 0 }.is_valid());
        assert!(!Timespec { sec: 0, nsec: 1_000_000_000 }.is_valid());
        assert!(!Timespec { sec: 0, nsec: -1 }.is_valid());
        assert_eq!(t.to_ns(), 5_999_999_999);
        assert_eq!(Timespec { sec: i64::MAX, nsec: 0 }.to_ns(), u64::MAX);
        assert_eq!(Timespec::from_ns(1_500_000_000), Timespec { sec: 1, nsec: 500_000_000 });
    }

    #[test]
    fn tick_conversions_round_the_safe_way() {
        let f = 62_500_000; // QEMU's counter: 16 ns a tick
        assert_eq!(ns_to_ticks(16, f), 1);
        assert_eq!(ns_to_ticks(17, f), 2, "a timeout is never cut short");
        assert_eq!(ns_to_ticks(0, f), 0);
        assert_eq!(ns_to_ticks(u64::MAX, f), u64::MAX / 16 + 1);
        assert_eq!(ticks_to_ns(3, f), 48);
        assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
        assert_eq!(ticks_to_ns(10, 0), 0);
        assert_eq!(ns_to_ticks(1_000_000_000, 19_200_000), 19_200_000);
    }

    #[test]
    fn clock_ids_decode_to_linux_clocks() {
        assert_eq!(Clock::decode(0), Some(Clock::Realtime));
        assert_eq!(Clock::decode(5), Some(Clock::Realtime));
        for id in [1, 4, 6, 7] {
            assert_eq!(Clock::decode(id), Some(Clock::Monotonic), "{id}");
        }
        assert_eq!(Clock::decode(2), Some(Clock::ProcessCpu { pid: 0 }));
        assert_eq!(Clock::decode(3), Some(Clock::ThreadCpu { tid: 0 }));
        for id in [8, 9, 10, 12, 99, i32::MAX] {
            assert_eq!(Clock::decode(id), None, "{id}");
        }
    }

    #[test]
    fn cpu_clock_ids_carry_the_pid_and_the_thread_bit() {
        // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) = (~pid << 3) | 2
        let process = |pid: i32| (!pid << 3) | 2;
        assert_eq!(Clock::decode(process(1)), Some(Clock::ProcessCpu { pid: 1 }));
        assert_eq!(Clock::decode(process(0)), Some(Clock::ProcessCpu { pid: 0 }));
        assert_eq!(Clock::decode((!7 << 3) | 4 | 2), Some(Clock::ThreadCpu { tid: 7 }));
        assert_eq!(Clock::decode((!7 << 3) | 3), None, "an FD clock");
        assert!(!Clock::ThreadCpu { tid: 0 }.can_sleep_on() && Clock::Realtime.can_sleep_on());
    }
}
