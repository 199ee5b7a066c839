//! Descriptors, after Linux's split: a descriptor ([`FdEntry`]) has its own close-on-exec flag and
//! points at an open file description ([`OpenFile`]), which dup'ed descriptors share, with the
//! status flags (`O_NONBLOCK`, `O_APPEND`) that `fcntl(F_SETFL)` changes. A process's
//! [`FdTable`] maps numbers to descriptors. The first process gets descriptors 0, 1 and 2 on one
//! description of the console, opened read-write, as Linux's `console_on_rootfs` does for init.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicU32;

use linux_abi::Errno;
use linux_abi::fcntl::O_RDWR;

/// Descriptors a process may have open (Linux's default `RLIMIT_NOFILE` soft limit).
pub const FD_LIMIT: usize = 1024;

/// What an open file is.
#[derive(Debug)]
pub enum FileKind {
    /// The console (`/dev/console`): the UART through the line discipline (`crate::fs::tty`).
    Console,
    /// One end of a pipe (`crate::fs::pipe`).
    Pipe(crate::fs::pipe::PipeEnd),
    /// A text generated when first read (`/proc/self/maps`: [`text`](super::text)).
    Text(super::text::Snapshot),
    /// A memfd (`crate::fs::memfd`): a shared memory object.
    Memfd(crate::fs::memfd::Memfd),
}

/// An open file description.
#[derive(Debug)]
pub struct OpenFile {
    /// What it is.
    pub kind: FileKind,
    /// Access mode and status flags (`O_RDWR | O_NONBLOCK ...`), shared by every dup.
    pub flags: AtomicU32,
}

/// One descriptor.
#[derive(Clone, Debug)]
pub struct FdEntry {
    /// The description it refers to.
    pub file: Arc<OpenFile>,
    /// `FD_CLOEXEC`.
    pub cloexec: bool,
}

/// A process's descriptors, indexed by number.
#[derive(Debug, Default)]
pub struct FdTable {
    fds: Vec<Option<FdEntry>>,
}

impl FdTable {
    /// Descriptors 0, 1, 2 on one read-write console description.
    pub fn console() -> Self {
        let file = Arc::new(OpenFile { kind: FileKind::Console, flags: AtomicU32::new(O_RDWR) });
        let entry = FdEntry { file, cloexec: false };
        Self { fds: alloc::vec![Some(entry.clone()), Some(entry.clone()), Some(entry)] }
    }

    /// The open file description of descriptor `fd`.
    ///
    /// # Errors
    /// `EBADF` if `fd` is not open.
    pub fn file(&self, fd: u64) -> Result<Arc<OpenFile>, Errno> {
        self.get(fd).map(|e| e.file.clone()).ok_or(Errno::EBADF)
    }

    /// The descriptor `fd`, if open.
    pub fn get(&self, fd: u64) -> Option<&FdEntry> {
        self.fds.get(usize::try_from(fd).ok()?)?.as_ref()
    }

    /// The descriptor `fd` for changing its flag, if open.
    pub fn get_mut(&mut self, fd: u64) -> Option<&mut FdEntry> {
        self.fds.get_mut(usize::try_from(fd).ok()?)?.as_mut()
    }

    /// Puts `entry` at the lowest free number at or above `min` and returns it.
    ///
    /// # Errors
    /// `EMFILE` when none is below the limit (`EINVAL` is the caller's for `min` itself too
    /// large); `ENOMEM` when the table cannot grow (nothing changes).
    pub fn install_lowest(&mut self, min: usize, entry: FdEntry) -> Result<usize, Errno> {
        let free =
            (min..FD_LIMIT).find(|&i| self.fds.get(i).is_none_or(Option::is_none)).ok_or(Errno::EMFILE)?;
        self.install_at(free, entry)?;
        Ok(free)
    }

    /// Puts `entry` at `fd` (below the limit), closing what was there.
    ///
    /// # Errors
    /// `ENOMEM` when the table cannot grow to `fd` (nothing changes).
    pub fn install_at(&mut self, fd: usize, entry: FdEntry) -> Result<(), Errno> {
        if self.fds.len() <= fd {
            let more = fd + 1 - self.fds.len();
            crate::memory::fallible::reserve(&mut self.fds, more)?;
            self.fds.resize(fd + 1, None);
        }
        self.fds[fd] = Some(entry);
        Ok(())
    }

    /// A copy (the same descriptions, each descriptor's own flag), or `None` when the heap cannot
    /// hold it.
    pub fn try_clone(&self) -> Option<Self> {
        let mut fds = Vec::new();
        fds.try_reserve_exact(self.fds.len()).ok()?;
        fds.extend(self.fds.iter().cloned());
        Some(Self { fds })
    }

    /// `execve`: closes every close-on-exec descriptor.
    pub fn close_on_exec(&mut self) {
        for slot in &mut self.fds {
            if slot.as_ref().is_some_and(|e| e.cloexec) {
                *slot = None;
            }
        }
    }

    /// Closes `fd`; false if it was not open.
    pub fn close(&mut self, fd: u64) -> bool {
        let Ok(i) = usize::try_from(fd) else { return false };
        self.fds.get_mut(i).and_then(Option::take).is_some()
    }
}
