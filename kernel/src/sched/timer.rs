//! Event timers: a deadline (a counter value) at which a kernel event is notified, for the
//! objects whose readiness changes with time alone (a timerfd's expiry). A blocked thread's own
//! timeout is its wait's deadline (`WaitFor`); this is for a change that no thread's call makes,
//! as Linux's `hrtimer` is.
//!
//! An [`EventTimer`] is registered once, when its owner is made (the only allocation: the list's
//! room), and unregistered when the owner goes ([`EventTimer::unregister`]). Arming it stores
//! the deadline; it fires once, at the first check at or after it, notifying its key with its
//! readiness mask (`queue::notify_poll`), and is then disarmed until its owner arms it again (a
//! periodic timerfd re-arms when it is read, as Linux's does). The checks are the scheduler's
//! deadline checks: every tick, every pick of a task, and an idle CPU's timer is programmed for
//! the earliest deadline ([`earliest`]), so an expiry is seen within microseconds on an idle
//! machine and within a tick on a busy one, as a sleeper's is.
//!
//! [`EARLIEST`] is a lower bound of the armed deadlines (never later than the earliest), so a
//! check before it costs one load. Arming lowers it under the list's lock, and a check
//! recomputes it under the same lock, so no arming is lost between the two.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use linux_abi::Errno;
use spin::Mutex;

use crate::memory::fallible;

/// A deadline that notifies its own key ([`EventTimer::key`], with a readiness mask) when it
/// passes.
#[derive(Debug)]
pub struct EventTimer {
    /// The counter value it fires at; `u64::MAX` while disarmed.
    deadline: AtomicU64,
    /// The readiness it announces (`POLLIN` for a timerfd).
    mask: u16,
}

/// Every registered timer, armed or not.
static TIMERS: Mutex<Vec<Arc<EventTimer>>> = Mutex::new(Vec::new());
/// No armed deadline is earlier than this (module documentation).
static EARLIEST: AtomicU64 = AtomicU64::new(u64::MAX);

impl EventTimer {
    /// A disarmed timer announcing `mask`, registered.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn register(mask: u16) -> Result<Arc<Self>, Errno> {
        let timer =
            fallible::arc(Self { deadline: AtomicU64::new(u64::MAX), mask }).map_err(|_| Errno::ENOMEM)?;
        let mut list = TIMERS.lock();
        fallible::reserve(&mut list, 1)?;
        list.push(timer.clone());
        Ok(timer)
    }

    /// The kernel-event key it notifies: its address, tagged (never a user futex's key); its
    /// owner's readiness changes on it.
    pub fn key(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize | 1
    }

    /// Forgets the timer (its owner is going away): it never fires again.
    pub fn unregister(self: &Arc<Self>) {
        let mut list = TIMERS.lock();
        if let Some(i) = list.iter().position(|t| Arc::ptr_eq(t, self)) {
            list.swap_remove(i);
        }
    }

    /// Arms it to fire at counter value `deadline` (`None`: disarms it).
    pub fn set(&self, deadline: Option<u64>) {
        let at = deadline.unwrap_or(u64::MAX);
        let _list = TIMERS.lock();
        self.deadline.store(at, Ordering::Release);
        EARLIEST.fetch_min(at, Ordering::AcqRel);
    }
}

/// Fires every timer whose deadline is at or before `now` (and disarms it).
pub(super) fn expire(now: u64) {
    if now < EARLIEST.load(Ordering::Acquire) {
        return;
    }
    let list = TIMERS.lock();
    let mut earliest = u64::MAX;
    for t in list.iter() {
        let at = t.deadline.load(Ordering::Acquire);
        if at <= now {
            t.deadline.store(u64::MAX, Ordering::Release);
            // Under the list's lock: nothing a notification runs (the wake-up, the readiness
            // hook) takes it.
            super::queue::notify_poll(t.key(), t.mask);
        } else {
            earliest = earliest.min(at);
        }
    }
    EARLIEST.store(earliest, Ordering::Release);
}

/// The earliest armed deadline, if any (a lower bound: possibly one that has just fired).
pub(super) fn earliest() -> Option<u64> {
    let at = EARLIEST.load(Ordering::Acquire);
    (at != u64::MAX).then_some(at)
}

#[cfg_attr(not(feature = "test-image"), expect(dead_code, reason = "the test image checks it"))]
/// Timers registered now (the test image checks that every owner gave its timer back).
pub fn registered() -> usize {
    TIMERS.lock().len()
}
