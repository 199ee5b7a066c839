//! Pending signals of a thread or of a process: a set plus the information of each instance.
//! A standard signal (below `SIGRTMIN`) already pending is not queued again (Linux's
//! `legacy_queue`); real-time signals queue every instance, in order, up to a limit.
use alloc::vec::Vec;

use crate::info::SigInfo;
use crate::num::SIGRTMIN;
use crate::set::SigSet;

/// Most signals queued at once (per queue; Linux's RLIMIT_SIGPENDING plays this part).
pub const MAX_QUEUED: usize = 256;

/// What queueing a signal did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// A new instance is pending.
    Added,
    /// The same standard signal was already pending: nothing changed.
    Merged,
    /// The queue is full, or the heap cannot grow it (the signal is refused: EAGAIN).
    Full,
}

/// A queue of pending signals.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    set: SigSet,
    infos: Vec<SigInfo>,
}

impl Pending {
    /// An empty queue.
    pub const fn new() -> Self {
        Self { set: SigSet::EMPTY, infos: Vec::new() }
    }

    /// The signals pending.
    pub fn set(&self) -> SigSet {
        self.set
    }

    /// Queues `info`.
    pub fn push(&mut self, info: SigInfo) -> Queued {
        let sig = info.signo();
        if sig < SIGRTMIN && self.set.contains(sig) {
            return Queued::Merged;
        }
        // An exhausted kernel heap refuses the signal as a full queue does (EAGAIN), never
        // panics: the queue grows fallibly.
        if self.infos.len() >= MAX_QUEUED || self.infos.try_reserve(1).is_err() {
            return Queued::Full;
        }
        self.infos.push(info);
        self.set = self.set.with(sig);
        Queued::Added
    }

    /// Takes the signal to deliver first among `allowed` (see [`SigSet::first`]).
    pub fn take(&mut self, allowed: SigSet) -> Option<SigInfo> {
        let sig = self.set.intersect(allowed).first()?;
        let at = self.infos.iter().position(|i| i.signo() == sig)?;
        let info = self.infos.remove(at);
        if !self.infos.iter().any(|i| i.signo() == sig) {
            self.set = self.set.without(sig);
        }
        Some(info)
    }

    /// Drops every pending instance of `sig` (its action became "ignore").
    pub fn discard(&mut self, sig: u32) {
        self.infos.retain(|i| i.signo() != sig);
        self.set = self.set.without(sig);
    }

    /// How many instances are queued.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::num::*;

    fn sent(sig: u32, pid: u32) -> SigInfo {
        SigInfo::sent(sig, SI_USER, pid, 0)
    }

    #[test]
    fn standard_signals_merge_realtime_ones_queue() {
        let mut q = Pending::new();
        assert_eq!(q.push(sent(SIGUSR1, 1)), Queued::Added);
        assert_eq!(q.push(sent(SIGUSR1, 2)), Queued::Merged);
        assert_eq!(q.push(sent(40, 1)), Queued::Added);
        assert_eq!(q.push(sent(40, 2)), Queued::Added);
        assert_eq!(q.len(), 3);
        assert_eq!(q.take(SigSet::of(40)).map(|i| i.0[16]), Some(1));
        assert!(q.set().contains(40));
        assert_eq!(q.take(SigSet::of(40)).map(|i| i.0[16]), Some(2));
        assert!(!q.set().contains(40));
        assert_eq!(q.take(SigSet::of(40)), None);
        // Only allowed signals are taken.
        assert_eq!(q.take(SigSet::of(SIGUSR2)), None);
        assert_eq!(q.take(SigSet(u64::MAX)).map(|i| i.signo()), Some(SIGUSR1));
        assert!(q.is_empty() && q.set().is_empty());
    }

    #[test]
    fn discard_and_limit() {
        let mut q = Pending::new();
        for _ in 0..MAX_QUEUED {
            assert_eq!(q.push(sent(50, 0)), Queued::Added);
        }
        assert_eq!(q.push(sent(51, 0)), Queued::Full);
        q.discard(50);
        assert!(q.is_empty() && !q.set().contains(50));
    }
}
