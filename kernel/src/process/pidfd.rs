//! pidfds, after Linux's kernel/pid.c and kernel/fork.c: a descriptor naming a process
//! (`pidfd_open`), through which it can be signalled (`pidfd_send_signal`), waited for
//! (`waitid(P_PIDFD)`, in `family`), asked for a copy of a descriptor (`pidfd_getfd`) or given
//! memory advice (`process_madvise`). Readable (`POLLIN`) once every thread of the process has
//! exited, zombie or reaped, as Linux 6.1's `pidfd_poll` says.
//!
//! It holds the process weakly, as Linux's holds a `struct pid` rather than the task: a reaped
//! process is freed whatever pidfds name it, and the pidfd then names no process (`ESRCH`). The
//! wake-up at exit is a kernel event per process ([`exit_key`]), which `family::exited`
//! notifies.
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use linux_abi::fcntl::O_NONBLOCK;
use linux_abi::layout::Stat;
use linux_abi::poll::{PIDFD_NONBLOCK, POLLIN, POLLRDNORM};
use spin::Mutex;

use super::{Process, family};
use crate::fs::file::{FdTable, File, OpenFile};
use crate::memory::fallible;

/// The kernel-event key of `p`'s exit (a pidfd's readiness).
pub fn exit_key(p: *const Process) -> usize {
    p as usize | 3
}

/// A pidfd.
pub struct PidFd {
    process: Weak<Process>,
    pid: u32,
}

impl PidFd {
    /// The pid it names.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process, if it has not been reaped (a zombie is still there).
    pub fn process(&self) -> Option<Arc<Process>> {
        let p = self.process.upgrade()?;
        family::by_pid(self.pid).filter(|q| Arc::ptr_eq(q, &p))
    }
}

/// `pidfd_open(pid, flags)` into `files`: a close-on-exec descriptor for process `pid`.
///
/// # Errors
/// `EINVAL` (unknown flags, a pid not above 0, a thread that leads no process), `ESRCH` (no such
/// process, or reaped), `EMFILE`, `ENOMEM`.
pub fn open(files: &Mutex<FdTable>, pid: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !PIDFD_NONBLOCK != 0 || pid as i32 <= 0 {
        return Err(Errno::EINVAL);
    }
    let pid = pid as u32;
    let Some(p) = family::by_pid(pid) else {
        // A thread that is not its process's first: Linux's "no thread-group leader".
        let mut thread = false;
        family::for_each_process(|q| thread |= q.signals.state.lock().thread(pid).is_some());
        return Err(if thread { Errno::EINVAL } else { Errno::ESRCH });
    };
    let pidfd = PidFd { process: Arc::downgrade(&p), pid };
    drop(p);
    let file: Arc<dyn File> = fallible::arc(pidfd).map_err(|_| Errno::ENOMEM)?;
    let status = if flags & PIDFD_NONBLOCK != 0 { O_NONBLOCK } else { 0 };
    crate::fs::anon::install(files, file, status, u64::from(linux_abi::fcntl::O_CLOEXEC))
}

/// The pidfd open at `fd` of `files` and whether it is non-blocking (`PIDFD_NONBLOCK`).
///
/// # Errors
/// `EBADF`: not open, or not a pidfd.
pub fn lookup(files: &Mutex<FdTable>, fd: u64) -> Result<(Arc<OpenFile>, bool), Errno> {
    let open = files.lock().file(fd)?;
    if open.file_as::<PidFd>().is_none() {
        return Err(Errno::EBADF);
    }
    let nonblock = open.flags() & O_NONBLOCK != 0;
    Ok((open, nonblock))
}

/// The process `p`'s threads have all exited (`family::exited`): its pidfds become readable.
pub fn exited(p: &Process) {
    crate::sched::notify(exit_key(p));
}

impl File for PidFd {
    fn poll(&self) -> (u16, usize) {
        let gone = self.process.upgrade().is_none_or(|p| p.done.load(Ordering::Acquire));
        (if gone { POLLIN | POLLRDNORM } else { 0 }, exit_key(self.process.as_ptr()))
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(crate::fs::anon::stat())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        crate::fs::anon::describe("pidfd")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
