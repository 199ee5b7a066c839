//! Capabilities, after Linux's kernel/capability.c and security/commoncap.c: every program runs
//! as root, so a process starts with every capability permitted and effective (Linux 6.1 has
//! 41, `CAP_LAST_CAP` 40) and none inheritable, and may drop them with `capset`. A capability
//! dropped from the effective set may come back while it is permitted; one dropped from the
//! permitted set is gone until `execve`, which gives root its full sets again (Linux's rule for
//! uid 0 without `SECBIT_NOROOT`). Linux keeps the sets per thread; here the process's threads
//! share them (no program of the suite gives its threads different sets).
//!
//! The kernel asks [`capable`] where Linux's checks matter to the programs: `CAP_CHOWN` (giving
//! a file to another owner), `CAP_SYS_NICE` (`process_madvise`), `CAP_WAKE_ALARM` (the _ALARM
//! clocks of `timerfd_create`).
use linux_abi::Errno;

use super::Process;

/// Change a file's owner or group (`chown`).
pub const CAP_CHOWN: u32 = 0;
/// Raise priorities, act on other processes' scheduling (`process_madvise`).
pub const CAP_SYS_NICE: u32 = 23;
/// Timers that wake the system (`CLOCK_REALTIME_ALARM`, `CLOCK_BOOTTIME_ALARM`).
pub const CAP_WAKE_ALARM: u32 = 35;
/// The highest capability of Linux 6.1 (`CAP_CHECKPOINT_RESTORE`).
pub const CAP_LAST_CAP: u32 = 40;
/// Every capability.
pub const FULL: u64 = (1 << (CAP_LAST_CAP + 1)) - 1;

/// `_LINUX_CAPABILITY_VERSION_1`: one 32-bit word per set.
pub const VERSION_1: u32 = 0x1998_0330;
/// `_LINUX_CAPABILITY_VERSION_2` (deprecated, the same as 3).
pub const VERSION_2: u32 = 0x2007_1026;
/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set; what the kernel says it speaks.
pub const VERSION_3: u32 = 0x2008_0522;

/// A process's three sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// What it may use now.
    pub effective: u64,
    /// What it may make effective.
    pub permitted: u64,
    /// What an `execve` may pass on (nothing here: root gets everything anyway).
    pub inheritable: u64,
}

impl Caps {
    /// Root's sets: everything permitted and effective, nothing inheritable.
    pub const ROOT: Caps = Caps { effective: FULL, permitted: FULL, inheritable: 0 };

    /// The sets after `execve` (root's rule): everything permitted and effective again; the
    /// inheritable set stays.
    pub fn after_exec(self) -> Caps {
        Caps { inheritable: self.inheritable, ..Caps::ROOT }
    }

    /// `capset`'s new sets, if the rules allow them (Linux's `cap_capset` for a caller holding
    /// `CAP_SETPCAP`, with the bounding set full): permitted only shrinks, effective within the
    /// new permitted, inheritable within the old inheritable and the bounding set.
    ///
    /// # Errors
    /// `EPERM`.
    pub fn set(self, new: Caps) -> Result<Caps, Errno> {
        let new = Caps {
            effective: new.effective & FULL,
            permitted: new.permitted & FULL,
            inheritable: new.inheritable & FULL,
        };
        let within = |a: u64, b: u64| a & !b == 0;
        if !within(new.inheritable, self.inheritable | FULL)
            || !within(new.permitted, self.permitted)
            || !within(new.effective, new.permitted)
        {
            return Err(Errno::EPERM);
        }
        Ok(new)
    }
}

/// How many 32-bit words per set a header's `version` asks for; `None`: not a version Linux
/// knows (`EINVAL`, with the kernel's version written back into the header).
pub fn words(version: u32) -> Option<usize> {
    match version {
        VERSION_1 => Some(1),
        VERSION_2 | VERSION_3 => Some(2),
        _ => None,
    }
}

/// Whether `p` has capability `cap` in its effective set.
pub fn capable(p: &Process, cap: u32) -> bool {
    p.posix.caps.lock().effective & (1 << cap) != 0
}
