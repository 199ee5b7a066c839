//! signalfd, after Linux's fs/signalfd.c: a descriptor that reads the caller's pending signals
//! of a mask as `struct signalfd_siginfo` records (`signal::signalfd`), taking them as
//! `sigtimedwait` would (the thread's own first, then the process's, the lowest number first).
//! A signal stays pending for it only if it is blocked: one that is not is delivered (or
//! ignored) as usual, as on Linux, so a program blocks the signals it reads this way.
//!
//! Like Linux's, it reads the signals of whoever reads it (`current`), not of the process that
//! made it: a signalfd inherited across `fork` reads the child's. Readable while a signal of
//! its mask is pending for the caller. The wake-up is a kernel event per process
//! ([`key`]): [`signal_queued`], called by `signals::send` after it queues a signal, notifies
//! it whenever some signalfd exists (a count kept here, so that a kernel without signalfds
//! notifies nothing).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ::signal::set::SigSet;
use ::signal::signalfd::{SIGNALFD_SIGINFO_SIZE, from_siginfo};
use linux_abi::Errno;
use linux_abi::layout::Stat;
use linux_abi::poll::{POLLIN, POLLRDNORM};

use super::Process;
use super::signals::take_from;
use crate::fs::file::{File, FileError, Io, IoResult};

/// Signalfds in existence (0: sending a signal notifies nothing).
static SIGNALFDS: AtomicUsize = AtomicUsize::new(0);

/// The most records one read returns (a larger read returns these; the rest stay pending).
const READ_MAX: usize = 16;

/// The kernel-event key of `p`'s pending signals.
pub fn key(p: &Process) -> usize {
    core::ptr::from_ref(p) as usize | 5
}

/// A signal was queued for `p` (or one of its threads): its signalfd readers wake.
pub fn signal_queued(p: &Process) {
    if SIGNALFDS.load(Ordering::Acquire) != 0 {
        crate::sched::notify_poll(key(p), POLLIN | POLLRDNORM);
    }
}

/// A signalfd: the signals it reads.
pub struct SignalFd {
    mask: AtomicU64,
}

impl SignalFd {
    /// A signalfd for `mask` (SIGKILL and SIGSTOP are never read).
    pub fn new(mask: SigSet) -> Self {
        SIGNALFDS.fetch_add(1, Ordering::AcqRel);
        Self { mask: AtomicU64::new(mask.blockable().0) }
    }

    /// `signalfd4` on an existing one: its new mask.
    pub fn set_mask(&self, mask: SigSet) {
        self.mask.store(mask.blockable().0, Ordering::Release);
    }

    fn mask(&self) -> SigSet {
        SigSet(self.mask.load(Ordering::Acquire))
    }
}

impl Drop for SignalFd {
    fn drop(&mut self) {
        SIGNALFDS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The process and thread this CPU runs a system call for.
fn caller() -> Option<(Arc<Process>, u32)> {
    let (pid, tid) = super::current_ids()?;
    Some((super::family::by_pid(pid)?, tid))
}

impl File for SignalFd {
    fn read(&self, io: Io<'_>) -> IoResult {
        let room =
            usize::try_from(io.len() / SIGNALFD_SIGINFO_SIZE as u64).unwrap_or(usize::MAX).min(READ_MAX);
        if room == 0 {
            return Err(Errno::EINVAL.into());
        }
        let Some((p, tid)) = caller() else { return Err(Errno::EINVAL.into()) };
        let mut out = Vec::new();
        out.try_reserve_exact(room * SIGNALFD_SIGINFO_SIZE).map_err(|_| Errno::ENOMEM)?;
        {
            let mut st = p.signals.state.lock();
            while out.len() < room * SIGNALFD_SIGINFO_SIZE {
                let Some(info) = take_from(&p.signals, &mut st, tid, self.mask()) else { break };
                out.extend_from_slice(&from_siginfo(&info));
            }
            p.signals.queued.store(st.queued(), Ordering::Release);
        }
        if out.is_empty() {
            return Err(FileError::WouldBlock(key(&p)));
        }
        // A fault copying them out loses them, as on Linux (they were taken).
        io.scatter(&out)
    }

    fn poll(&self) -> (u16, usize) {
        let Some((p, tid)) = caller() else { return (0, 0) };
        let pending = {
            let mut st = p.signals.state.lock();
            let shared = st.shared.set();
            st.thread(tid).map_or(shared, |t| t.pending.set().union(shared))
        };
        let ready = if pending.intersect(self.mask()).is_empty() { 0 } else { POLLIN | POLLRDNORM };
        (ready, key(&p))
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(crate::fs::anon::stat())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        crate::fs::anon::describe("signalfd")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
