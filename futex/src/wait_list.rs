//! The wait list the scheduler keeps blocked threads in, whatever they wait for ([`Channel`]): a
//! futex word, only a deadline (`nanosleep`), console input, a poll, a signal.
//!
//! One list, searched linearly and kept in arrival order, is enough for the handful of threads a
//! program has, and makes wake-ups first-come first-served as Linux's per-priority FIFO is for
//! equal priorities.
//!
//! The list never allocates after [`WaitList::try_reserve`]: the kernel reserves room for every
//! live thread when it admits one, and the `*_each` operations hand the threads they take to a
//! closure rather than collecting them, so moving a thread between the run queue and this list
//! cannot fail for want of memory. It counts its waiters with a deadline, so that checking for
//! expired ones costs nothing while none has a timeout.
use alloc::collections::TryReserveError;
use alloc::vec::Vec;
use linux_abi::futex::FUTEX_BITSET_MATCH_ANY;

/// What a blocked thread waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// A futex word: the address space (an opaque identity) and the word's user address; woken by
    /// wakes whose bitset shares a bit with `bitset`.
    Futex {
        /// Which address space.
        space: usize,
        /// The word's user address.
        uaddr: u64,
        /// `FUTEX_WAIT_BITSET`'s mask (all ones for `FUTEX_WAIT`).
        bitset: u32,
    },
    /// Nothing but the deadline (`nanosleep`).
    Timer,
    /// Console input (`read` on the console).
    Input,
    /// A poll of descriptors (`ppoll`, `pselect6`): console input or any change of a pipe.
    Poll,
    /// A signal (`rt_sigsuspend`, `rt_sigtimedwait`): only a signal or the deadline ends it.
    Signal,
    /// `futex_waitv`: several words at once, which the thread itself lists (the scheduler asks
    /// it, [`WaitList::wake_where`]).
    FutexVector,
    /// A thread of a stopped thread group (job control: SIGSTOP and its kin): only the group's
    /// continuation (`SIGCONT`, or `SIGKILL`) ends it; a signal sent meanwhile waits.
    Stopped {
        /// The thread group (an opaque identity).
        group: usize,
    },
}

/// A blocked thread: what it waits for, until when (a counter value; `None` = forever), and the
/// thread itself (the scheduler's type).
#[derive(Debug)]
pub struct Waiter<T> {
    /// What wakes it.
    pub channel: Channel,
    /// When it stops waiting on its own.
    pub deadline: Option<u64>,
    /// The thread.
    pub item: T,
}

/// Every blocked thread, in arrival order.
#[derive(Debug)]
pub struct WaitList<T> {
    waiters: Vec<Waiter<T>>,
    /// How many of `waiters` have a deadline.
    timed: usize,
}

impl<T> Default for WaitList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WaitList<T> {
    /// An empty list.
    pub const fn new() -> Self {
        Self { waiters: Vec::new(), timed: 0 }
    }

    /// How many threads wait.
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// How many waiters have a deadline.
    pub fn timed(&self) -> usize {
        self.timed
    }

    /// Makes room for `total` waiters in all, so that pushing up to that many never allocates.
    ///
    /// # Errors
    /// The allocator's, when the room cannot be had (the list is unchanged).
    pub fn try_reserve(&mut self, total: usize) -> Result<(), TryReserveError> {
        self.waiters.try_reserve(total.saturating_sub(self.waiters.len()))
    }

    /// Adds a waiter at the end. Allocates only if the list is full beyond what
    /// [`try_reserve`](Self::try_reserve) made room for.
    pub fn push(&mut self, waiter: Waiter<T>) {
        if waiter.deadline.is_some() {
            self.timed += 1;
        }
        self.waiters.push(waiter);
    }

    /// Removes, in arrival order, up to `max` waiters for which `want` holds, handing each to
    /// `each`; returns how many. One pass over the list whatever the number taken (waking every
    /// one of 30,000 waiters must not move the rest 30,000 times).
    fn take_each(
        &mut self,
        max: u64,
        mut want: impl FnMut(&Waiter<T>) -> bool,
        mut each: impl FnMut(Waiter<T>),
    ) -> u64 {
        let mut taken = 0;
        let chosen = |w: &mut Waiter<T>| {
            let pick = taken < max && want(w);
            taken += u64::from(pick);
            pick
        };
        for w in self.waiters.extract_if(.., chosen) {
            if w.deadline.is_some() {
                self.timed -= 1;
            }
            each(w);
        }
        taken
    }

    /// `FUTEX_WAKE(_BITSET)`: up to `max` waiters on word `uaddr` of `space` whose bitset meets
    /// `bitset`, oldest first, each handed to `each`. Returns how many.
    pub fn wake_each(
        &mut self,
        space: usize,
        uaddr: u64,
        bitset: u32,
        max: u64,
        mut each: impl FnMut(T),
    ) -> u64 {
        self.take_each(
            max,
            |w| {
                matches!(w.channel, Channel::Futex { space: s, uaddr: u, bitset: b }
                    if s == space && u == uaddr && b & bitset != 0)
            },
            |w| each(w.item),
        )
    }

    /// [`wake_each`](Self::wake_each), collecting the woken threads.
    pub fn wake(&mut self, space: usize, uaddr: u64, bitset: u32, max: u64) -> Vec<T> {
        let mut woken = Vec::new();
        self.wake_each(space, uaddr, bitset, max, |t| woken.push(t));
        woken
    }

    /// `FUTEX_(CMP_)REQUEUE`: wakes up to `nwake` waiters on `from` (each handed to `each`), then
    /// moves up to `nrequeue` of the rest to `to` (keeping their order and deadlines). Returns
    /// the numbers woken and moved.
    pub fn requeue_each(
        &mut self,
        space: usize,
        from: u64,
        to: u64,
        nwake: u64,
        nrequeue: u64,
        each: impl FnMut(T),
    ) -> (u64, u64) {
        self.requeue_between((space, from), (space, to), nwake, nrequeue, each)
    }

    /// [`requeue_each`](Self::requeue_each) from word `from` to word `to`, each named by its
    /// key (address space, address), which may differ in the space (a word of shared memory is
    /// keyed by its frame, not by one process's address).
    pub fn requeue_between(
        &mut self,
        from: (usize, u64),
        to: (usize, u64),
        nwake: u64,
        nrequeue: u64,
        each: impl FnMut(T),
    ) -> (u64, u64) {
        let woken = self.wake_each(from.0, from.1, FUTEX_BITSET_MATCH_ANY, nwake, each);
        let mut moved = 0;
        for w in &mut self.waiters {
            if moved == nrequeue {
                break;
            }
            if let Channel::Futex { space, uaddr, .. } = &mut w.channel
                && (*space, *uaddr) == from
            {
                (*space, *uaddr) = to;
                moved += 1;
            }
        }
        (woken, moved)
    }

    /// [`requeue_each`](Self::requeue_each), collecting the woken threads.
    pub fn requeue(&mut self, space: usize, from: u64, to: u64, nwake: u64, nrequeue: u64) -> (Vec<T>, u64) {
        let mut woken = Vec::new();
        let (_, moved) = self.requeue_each(space, from, to, nwake, nrequeue, |t| woken.push(t));
        (woken, moved)
    }

    /// Every waiter on `channel` (console input arrived), each handed to `each`.
    pub fn wake_channel_each(&mut self, channel: Channel, mut each: impl FnMut(T)) -> u64 {
        self.take_each(u64::MAX, |w| w.channel == channel, |w| each(w.item))
    }

    /// [`wake_channel_each`](Self::wake_channel_each), collecting the woken threads.
    pub fn wake_channel(&mut self, channel: Channel) -> Vec<T> {
        let mut woken = Vec::new();
        self.wake_channel_each(channel, |t| woken.push(t));
        woken
    }

    /// Every waiter whose deadline is at or before `now`, each handed to `each`; nothing is
    /// searched while no waiter has a deadline.
    pub fn expire_each(&mut self, now: u64, each: impl FnMut(Waiter<T>)) -> u64 {
        if self.timed == 0 {
            return 0;
        }
        self.take_each(u64::MAX, |w| w.deadline.is_some_and(|d| d <= now), each)
    }

    /// [`expire_each`](Self::expire_each), collecting the expired waiters.
    pub fn expire(&mut self, now: u64) -> Vec<Waiter<T>> {
        let mut expired = Vec::new();
        self.expire_each(now, |w| expired.push(w));
        expired
    }

    /// The oldest waiter whose thread `which` selects (a signal's target, a process being torn
    /// down), with what it waited for.
    pub fn take_first(&mut self, mut which: impl FnMut(&T) -> bool) -> Option<Waiter<T>> {
        let mut taken = None;
        self.take_each(1, |w| which(&w.item), |w| taken = Some(w));
        taken
    }

    /// Up to `max` waiters that `want` selects (looking at what each waits for and at the thread),
    /// oldest first, each handed to `each`; returns how many.
    pub fn wake_where(
        &mut self,
        max: u64,
        want: impl FnMut(&Waiter<T>) -> bool,
        each: impl FnMut(Waiter<T>),
    ) -> u64 {
        self.take_each(max, want, each)
    }

    /// The oldest waiter that `which` selects, looking at what it waits for as well as at the
    /// thread (a signal's target, which is not taken from a group stop).
    pub fn take_first_where(&mut self, which: impl FnMut(&Waiter<T>) -> bool) -> Option<Waiter<T>> {
        let mut taken = None;
        self.take_each(1, which, |w| taken = Some(w));
        taken
    }

    /// Every waiter whose thread `which` selects.
    pub fn take_where(&mut self, mut which: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut taken = Vec::new();
        self.take_each(u64::MAX, |w| which(&w.item), |w| taken.push(w.item));
        taken
    }

    /// The earliest deadline, if any waiter has one.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.timed == 0 {
            return None;
        }
        self.waiters.iter().filter_map(|w| w.deadline).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn futex(space: usize, uaddr: u64, bitset: u32) -> Channel {
        Channel::Futex { space, uaddr, bitset }
    }

    fn list(waiters: &[(Channel, Option<u64>, u32)]) -> WaitList<u32> {
        let mut l = WaitList::new();
        for &(channel, deadline, item) in waiters {
            l.push(Waiter { channel, deadline, item });
        }
        l
    }

    #[test]
    fn wake_takes_the_oldest_waiters_of_that_word_and_space_only() {
        let mut l = list(&[
            (futex(1, 0x10, !0), None, 1),
            (futex(2, 0x10, !0), None, 2), // another process, same address
            (futex(1, 0x14, !0), None, 3),
            (futex(1, 0x10, !0), None, 4),
            (futex(1, 0x10, !0), None, 5),
        ]);
        assert_eq!(l.wake(1, 0x10, FUTEX_BITSET_MATCH_ANY, 2), vec![1, 4]);
        assert_eq!(l.wake(1, 0x10, FUTEX_BITSET_MATCH_ANY, 0), Vec::<u32>::new());
        assert_eq!(l.wake(1, 0x10, FUTEX_BITSET_MATCH_ANY, u64::MAX), vec![5]);
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn bitsets_select_which_waiters_a_wake_reaches() {
        let mut l =
            list(&[(futex(1, 8, 0b01), None, 1), (futex(1, 8, 0b10), None, 2), (futex(1, 8, !0), None, 3)]);
        assert_eq!(l.wake(1, 8, 0b10, 10), vec![2, 3]);
        assert_eq!(l.wake(1, 8, 0b10, 10), Vec::<u32>::new());
        assert_eq!(l.wake(1, 8, FUTEX_BITSET_MATCH_ANY, 10), vec![1]);
    }

    #[test]
    fn requeue_wakes_some_and_moves_the_next_ones_in_order() {
        let mut l = list(&[
            (futex(1, 0x10, !0), Some(50), 1),
            (futex(1, 0x10, !0), None, 2),
            (futex(1, 0x10, !0), Some(70), 3),
            (futex(1, 0x10, !0), None, 4),
            (futex(1, 0x20, !0), None, 5),
        ]);
        let (woken, moved) = l.requeue(1, 0x10, 0x20, 1, 2);
        assert_eq!((woken, moved), (vec![1], 2));
        // 5 was there first; 2 and 3 follow it; 4 stays on the first word.
        assert_eq!(l.wake(1, 0x20, FUTEX_BITSET_MATCH_ANY, 10), vec![2, 3, 5]);
        assert_eq!(l.wake(1, 0x10, FUTEX_BITSET_MATCH_ANY, 10), vec![4]);
    }

    #[test]
    fn a_requeued_waiter_keeps_its_deadline() {
        let mut l = list(&[(futex(1, 0x10, !0), Some(70), 1)]);
        assert_eq!(l.requeue(1, 0x10, 0x20, 0, 1), (vec![], 1));
        assert_eq!(l.next_deadline(), Some(70));
        assert_eq!(l.expire(70).into_iter().map(|w| w.item).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn expire_takes_exactly_the_waiters_whose_deadline_passed() {
        let mut l = list(&[
            (Channel::Timer, Some(100), 1),
            (futex(1, 8, !0), Some(50), 2),
            (Channel::Input, None, 3),
            (Channel::Timer, Some(101), 4),
        ]);
        assert_eq!(l.next_deadline(), Some(50));
        assert!(l.expire(49).is_empty());
        let e: Vec<_> = l.expire(100).into_iter().map(|w| (w.item, w.channel)).collect();
        assert_eq!(e, vec![(1, Channel::Timer), (2, futex(1, 8, !0))]);
        assert_eq!(l.next_deadline(), Some(101));
        assert_eq!(l.wake_channel(Channel::Input), vec![3]);
        assert_eq!(l.take_where(|&t| t == 4), vec![4]);
        assert!(l.is_empty() && l.next_deadline().is_none());
    }

    #[test]
    fn after_try_reserve_pushing_up_to_the_total_never_reallocates() {
        let mut l = WaitList::new();
        l.try_reserve(64).unwrap();
        let room = l.waiters.capacity();
        assert!(room >= 64);
        for i in 0..64 {
            l.push(Waiter { channel: Channel::Timer, deadline: Some(i), item: i as u32 });
        }
        assert_eq!(l.waiters.capacity(), room);
        // Taking and putting back (what the scheduler does all day) keeps the same storage.
        let mut back = Vec::with_capacity(64);
        assert_eq!(l.expire_each(31, |w| back.push(w)), 32);
        back.into_iter().for_each(|w| l.push(w));
        assert_eq!(l.waiters.capacity(), room);
        assert!(l.try_reserve(10).is_ok()); // already room: nothing to do
        assert_eq!(l.waiters.capacity(), room);
    }

    #[test]
    fn waking_every_waiter_of_a_long_list_keeps_the_others_in_order() {
        let mut l = WaitList::new();
        for i in 0..30_000u32 {
            l.push(Waiter { channel: futex(1, 8 + u64::from(i % 2) * 4, !0), deadline: None, item: i });
        }
        let mut woken = Vec::new();
        assert_eq!(l.wake_each(1, 8, FUTEX_BITSET_MATCH_ANY, u64::MAX, |t| woken.push(t)), 15_000);
        assert!(woken.iter().copied().eq((0..30_000).step_by(2)));
        assert!(l.wake(1, 12, FUTEX_BITSET_MATCH_ANY, u64::MAX).into_iter().eq((1..30_000).step_by(2)));
        assert!(l.is_empty());
    }

    #[test]
    fn the_timed_count_follows_every_way_a_waiter_leaves() {
        let mut l = list(&[
            (futex(1, 8, !0), Some(50), 1),
            (futex(1, 8, !0), None, 2),
            (Channel::Signal, Some(70), 3),
            (Channel::Input, Some(90), 4),
            (Channel::Timer, Some(99), 5),
        ]);
        assert_eq!(l.timed(), 4);
        assert_eq!(l.wake(1, 8, FUTEX_BITSET_MATCH_ANY, 2), vec![1, 2]);
        assert_eq!(l.timed(), 3);
        assert_eq!(l.take_first(|&t| t == 3).map(|w| (w.item, w.channel)), Some((3, Channel::Signal)));
        assert_eq!(l.timed(), 2);
        assert_eq!(l.wake_channel(Channel::Input), vec![4]);
        assert_eq!((l.timed(), l.next_deadline()), (1, Some(99)));
        assert!(l.take_first(|&t| t == 3).is_none());
        assert_eq!(l.take_where(|_| true), vec![5]);
        assert_eq!((l.timed(), l.next_deadline()), (0, None));
        // A signal wait is reached by no futex wake and no input.
        let mut l = list(&[(Channel::Signal, None, 7)]);
        assert!(
            l.wake(0, 0, FUTEX_BITSET_MATCH_ANY, 9).is_empty() && l.wake_channel(Channel::Input).is_empty()
        );
        assert!(l.expire(u64::MAX).is_empty());
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn vector_waiters_are_chosen_by_the_caller_and_words_requeue_across_spaces() {
        let mut l = list(&[
            (Channel::FutexVector, None, 10),
            (futex(1, 8, !0), None, 1),
            (Channel::FutexVector, Some(9), 20),
        ]);
        // Thread 20 waits on the word the caller asks about (its list is the caller's to read).
        let mut woken = Vec::new();
        let n =
            l.wake_where(1, |w| w.channel == Channel::FutexVector && w.item == 20, |w| woken.push(w.item));
        assert_eq!((n, woken, l.timed()), (1, vec![20], 0));
        assert!(l.wake(1, 8, FUTEX_BITSET_MATCH_ANY, 9) == vec![1]);
        // A requeue from one key to a key of another space.
        let mut l =
            list(&[(futex(1, 8, !0), None, 1), (futex(1, 8, !0), None, 2), (futex(1, 8, !0), None, 3)]);
        assert_eq!(l.requeue_between((1, 8), (2, 0x4000), 1, 1, |_| ()), (1, 1));
        assert_eq!(l.wake(2, 0x4000, FUTEX_BITSET_MATCH_ANY, 9), vec![2]);
        assert_eq!(l.wake(1, 8, FUTEX_BITSET_MATCH_ANY, 9), vec![3]);
    }

    #[test]
    fn a_stopped_thread_is_passed_over_by_a_signal_and_woken_by_its_group() {
        let stopped = |group| Channel::Stopped { group };
        let mut l = list(&[(stopped(1), None, 7), (Channel::Timer, Some(5), 7), (stopped(2), None, 8)]);
        // The signal's search skips the stopped entry of thread 7 and takes its other wait.
        let signal = |w: &Waiter<u32>| w.item == 7 && !matches!(w.channel, Channel::Stopped { .. });
        assert_eq!(l.take_first_where(signal).map(|w| w.channel), Some(Channel::Timer));
        assert!(l.take_first_where(signal).is_none());
        assert_eq!(l.timed(), 0);
        // SIGCONT for group 1 wakes its thread only; no futex wake reaches a stopped thread.
        assert!(l.wake(1, 0, FUTEX_BITSET_MATCH_ANY, 9).is_empty());
        assert_eq!(l.wake_channel(stopped(1)), vec![7]);
        assert_eq!(l.wake_channel(stopped(2)), vec![8]);
        assert!(l.is_empty());
    }
}
