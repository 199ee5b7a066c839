//! Pending signals of a thread or of a process: a set plus the information of each instance.
//! A standard signal (below `SIGRTMIN`) already pending is not queued again (Linux's
//! `legacy_queue`); real-time signals queue every instance, in order, up to a limit.
//!
//! A signal whose information finds no room (the limit, or an exhausted heap) is still pending
//! when Linux's `__send_signal_locked` keeps it: a standard signal, or a real-time one sent by
//! `kill` (`SI_USER`), "a silent loss of information" (it is delivered with `SI_USER` from pid 0,
//! as `collect_signal` makes up). Only a real-time signal sent otherwise (`sigqueue`, the
//! kernel) is refused. So no `kill` of a standard signal fails for lack of memory.
use alloc::vec::Vec;

use crate::info::SigInfo;
use crate::num::{SI_USER, SIGRTMIN};
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
    /// The signal is pending, but there was no room for its information (module documentation).
    InfoLost,
    /// The queue is full, or the heap cannot grow it, and the signal is a real-time one not sent
    /// by `kill`: it is refused (EAGAIN).
    Full,
}

/// A queue of pending signals.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    /// Every signal pending (with its information in `infos`, or in `bare`).
    set: SigSet,
    infos: Vec<SigInfo>,
    /// Signals pending whose information was lost (one instance each).
    bare: SigSet,
}

impl Pending {
    /// An empty queue.
    pub const fn new() -> Self {
        Self { set: SigSet::EMPTY, infos: Vec::new(), bare: SigSet::EMPTY }
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
        // An exhausted kernel heap never panics: the queue grows fallibly.
        if self.infos.len() < MAX_QUEUED && self.infos.try_reserve(1).is_ok() {
            self.infos.push(info);
            self.set = self.set.with(sig);
            return Queued::Added;
        }
        if sig < SIGRTMIN || info.code() == SI_USER {
            self.bare = self.bare.with(sig);
            self.set = self.set.with(sig);
            return Queued::InfoLost;
        }
        Queued::Full
    }

    /// Takes the signal to deliver first among `allowed` (see [`SigSet::first`]): its queued
    /// instances in order, then one whose information was lost.
    pub fn take(&mut self, allowed: SigSet) -> Option<SigInfo> {
        let sig = self.set.intersect(allowed).first()?;
        let info = match self.infos.iter().position(|i| i.signo() == sig) {
            Some(at) => self.infos.remove(at),
            None => {
                self.bare = self.bare.without(sig);
                SigInfo::sent(sig, SI_USER, 0, 0)
            }
        };
        if !self.bare.contains(sig) && !self.infos.iter().any(|i| i.signo() == sig) {
            self.set = self.set.without(sig);
        }
        Some(info)
    }

    /// Drops every pending instance of `sig` (its action became "ignore").
    pub fn discard(&mut self, sig: u32) {
        self.infos.retain(|i| i.signo() != sig);
        self.set = self.set.without(sig);
        self.bare = self.bare.without(sig);
    }

    /// How many instances are pending.
    pub fn len(&self) -> usize {
        self.infos.len() + self.bare.0.count_ones() as usize
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
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
        // Past the limit, as Linux: a real-time signal from sigqueue is refused...
        assert_eq!(q.push(SigInfo::sent(51, SI_QUEUE, 7, 0)), Queued::Full);
        assert!(!q.set().contains(51));
        // ... one from kill, and any standard signal, are pending without their information.
        assert_eq!(q.push(sent(51, 7)), Queued::InfoLost);
        assert_eq!(q.push(sent(SIGUSR1, 7)), Queued::InfoLost);
        assert_eq!(q.push(sent(SIGUSR1, 8)), Queued::Merged);
        assert_eq!(q.len(), MAX_QUEUED + 2);
        assert!(q.set().contains(51) && q.set().contains(SIGUSR1));
        q.discard(50);
        assert_eq!(q.len(), 2);
        // Delivered as Linux's collect_signal makes them up: SI_USER from pid 0.
        let lost = q.take(SigSet::of(SIGUSR1)).expect("SIGUSR1 is pending");
        assert_eq!((lost.signo(), lost.code(), lost.0[16]), (SIGUSR1, SI_USER, 0));
        assert_eq!(q.take(SigSet::of(51)).map(|i| (i.signo(), i.0[16])), Some((51, 0)));
        assert!(q.is_empty() && q.set().is_empty());
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_realtime_signal_keeps_its_queued_instances_before_a_lost_one() {
        let mut q = Pending::new();
        for _ in 0..MAX_QUEUED - 1 {
            assert_eq!(q.push(sent(40, 0)), Queued::Added);
        }
        assert_eq!(q.push(sent(41, 5)), Queued::Added);
        assert_eq!(q.push(sent(41, 6)), Queued::InfoLost);
        q.discard(40);
        assert_eq!(q.take(SigSet::of(41)).map(|i| i.0[16]), Some(5), "the queued one first");
        assert!(q.set().contains(41), "the lost one is still pending");
        assert_eq!(q.take(SigSet::of(41)).map(|i| i.0[16]), Some(0));
        assert!(q.is_empty());
    }
}
