//! Signal sets: the kernel's `sigset_t` on arm64 is one 64-bit word, bit `sig - 1` for signal
//! `sig` (`rt_sigprocmask` and friends insist on `sigsetsize == 8`).
use crate::num::{self, SIGKILL, SIGSTOP};

/// A set of signals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigSet(pub u64);

impl SigSet {
    /// No signal.
    pub const EMPTY: Self = Self(0);
    /// SIGKILL and SIGSTOP, which no mask may contain.
    pub const UNBLOCKABLE: Self = Self(Self::bit(SIGKILL) | Self::bit(SIGSTOP));

    /// The bit of `sig` (1..=64).
    pub const fn bit(sig: u32) -> u64 {
        1u64 << (sig - 1)
    }

    /// The set holding only `sig`.
    pub const fn of(sig: u32) -> Self {
        Self(Self::bit(sig))
    }

    /// Whether `sig` is in the set.
    pub const fn contains(self, sig: u32) -> bool {
        self.0 & Self::bit(sig) != 0
    }

    /// The set with `sig` added.
    #[must_use]
    pub const fn with(self, sig: u32) -> Self {
        Self(self.0 | Self::bit(sig))
    }

    /// The set with `sig` removed.
    #[must_use]
    pub const fn without(self, sig: u32) -> Self {
        Self(self.0 & !Self::bit(sig))
    }

    /// Union.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Signals of `self` not in `other`.
    #[must_use]
    pub const fn minus(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Intersection.
    #[must_use]
    pub const fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The set as a mask may hold it: SIGKILL and SIGSTOP removed (what `sigdelsetmask` does to
    /// every mask a program gives).
    #[must_use]
    pub const fn blockable(self) -> Self {
        self.minus(Self::UNBLOCKABLE)
    }

    /// The signal to take first from a pending set: a synchronous one (the fault of the current
    /// instruction) before any other, then the lowest number (`next_signal`).
    pub fn first(self) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        let sync = (1..=num::_NSIG).filter(|&s| num::synchronous(s)).fold(0, |m, s| m | Self::bit(s));
        let pick = if self.0 & sync != 0 { self.0 & sync } else { self.0 };
        Some(pick.trailing_zeros() + 1)
    }

    /// Applies `rt_sigprocmask`'s `how` with `set` to the mask `self`; `None` for an unknown `how`
    /// (EINVAL). The result never holds SIGKILL or SIGSTOP.
    pub fn apply(self, how: u64, set: Self) -> Option<Self> {
        let set = set.blockable();
        match how {
            num::SIG_BLOCK => Some(self.union(set)),
            num::SIG_UNBLOCK => Some(self.minus(set)),
            num::SIG_SETMASK => Some(set),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::num::*;

    #[test]
    fn bits_are_signal_minus_one() {
        assert_eq!(SigSet::bit(1), 1);
        assert_eq!(SigSet::bit(SIGSEGV), 1 << 10);
        assert_eq!(SigSet::bit(64), 1 << 63);
        assert_eq!(SigSet::UNBLOCKABLE.0, (1 << 8) | (1 << 18));
    }

    #[test]
    fn sigprocmask_arithmetic() {
        let m = SigSet::of(SIGUSR1);
        assert_eq!(m.apply(SIG_BLOCK, SigSet::of(SIGUSR2)), Some(SigSet::of(SIGUSR1).with(SIGUSR2)));
        assert_eq!(m.with(SIGUSR2).apply(SIG_UNBLOCK, SigSet::of(SIGUSR1)), Some(SigSet::of(SIGUSR2)));
        assert_eq!(m.apply(SIG_SETMASK, SigSet::of(SIGTERM)), Some(SigSet::of(SIGTERM)));
        assert_eq!(m.apply(3, SigSet::EMPTY), None);
        // SIGKILL and SIGSTOP are silently dropped from every mask, whatever `how`.
        let all = SigSet(u64::MAX);
        assert_eq!(SigSet::EMPTY.apply(SIG_BLOCK, all), Some(SigSet(u64::MAX).blockable()));
        assert!(!SigSet::EMPTY.apply(SIG_SETMASK, all).unwrap().contains(SIGKILL));
        assert!(!SigSet::EMPTY.apply(SIG_SETMASK, all).unwrap().contains(SIGSTOP));
        assert!(SigSet::EMPTY.apply(SIG_SETMASK, all).unwrap().contains(SIGSEGV));
    }

    #[test]
    fn synchronous_signals_first_then_lowest() {
        assert_eq!(SigSet::EMPTY.first(), None);
        assert_eq!(SigSet::of(SIGUSR1).with(SIGINT).first(), Some(SIGINT));
        assert_eq!(SigSet::of(SIGHUP).with(SIGSEGV).first(), Some(SIGSEGV));
        assert_eq!(SigSet::of(SIGHUP).with(SIGSYS).with(SIGBUS).first(), Some(SIGBUS));
        assert_eq!(SigSet::of(64).first(), Some(64));
    }
}
