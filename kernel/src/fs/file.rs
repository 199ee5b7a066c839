//! Open files and descriptors, after Linux's split: a descriptor ([`FdEntry`]) has its own
//! close-on-exec flag and points at an open file description ([`OpenFile`]), which dup'ed
//! descriptors share, with the status flags (`O_NONBLOCK`, `O_APPEND`) that `fcntl(F_SETFL)`
//! changes and the file position. What the description is open on is a [`File`]: a regular file
//! or a directory of a file system, a device, a pipe end, the console, an event source. A
//! process's [`FdTable`] maps numbers to descriptors.
//!
//! [`File`] is the one interface the system calls use (Linux's `file_operations`): a call that
//! may wait returns [`FileError::WouldBlock`] with the kernel-event key to wait on, and the
//! system-call layer decides between `EAGAIN` (`O_NONBLOCK`) and blocking, having read the event
//! count before it asked, so a change in between restarts the call rather than being missed.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicU32, Ordering};

use linux_abi::Errno;
use linux_abi::fcntl::{O_ACCMODE, O_RDONLY, O_WRONLY};
use linux_abi::layout::Stat;
use spin::Mutex;
use vfs::node::Inode;

/// Descriptors a process may have open to start with (Linux's default `RLIMIT_NOFILE` soft
/// limit).
pub const FD_LIMIT: usize = 1024;

/// The most a process's `RLIMIT_NOFILE` may allow (Linux's `fs.nr_open`).
pub const NR_OPEN: usize = 1 << 20;

/// Where a read or write happens in a file that has positions.
pub enum Offset<'a> {
    /// At the description's position, which the call advances (`read`, `write`).
    Current(&'a mut u64),
    /// At this offset, the position unchanged (`pread64`, `pwrite64`).
    At(u64),
}

/// One read or write: the buffers, where, and how. The buffers are a program's (the system
/// calls') or one kernel buffer ([`KernelBuf`]: `sendfile`, `splice` and `copy_file_range` move
/// bytes between files through one); a file reaches them only through [`Io::put`],
/// [`Io::take`], [`Io::scatter`] and [`Io::gather`], which copy from or to whichever it is.
pub struct Io<'a> {
    /// `(address, length)` of each buffer, in order.
    pub buffers: &'a [(u64, u64)],
    /// Where in the file (ignored by files without positions: pipes, terminals).
    pub offset: Offset<'a>,
    /// `O_APPEND`: every write goes to the end.
    pub append: bool,
    /// `O_NONBLOCK`: a pipe's write returns what fitted instead of waiting for the rest.
    pub nonblock: bool,
    /// The buffers are user memory, or the one kernel buffer behind them.
    kernel: Option<&'a KernelBuf<'a>>,
    /// `O_DIRECT`: a pipe's write end writes packets.
    pub direct: bool,
}

/// A kernel buffer an [`Io`] reads into or writes from, borrowed for as long as the `Io` lives.
pub struct KernelBuf<'a> {
    range: [(u64, u64); 1],
    /// A buffer a read may fill (one made from `&mut [u8]`).
    writable: bool,
    _buf: core::marker::PhantomData<&'a mut [u8]>,
}

impl<'a> KernelBuf<'a> {
    /// `buf`, for a read to fill.
    pub fn reading_into(buf: &'a mut [u8]) -> Self {
        Self {
            range: [(buf.as_mut_ptr() as u64, buf.len() as u64)],
            writable: true,
            _buf: core::marker::PhantomData,
        }
    }

    /// `buf`, for a write to take from (never written).
    pub fn writing_from(buf: &'a [u8]) -> Self {
        Self {
            range: [(buf.as_ptr() as u64, buf.len() as u64)],
            writable: false,
            _buf: core::marker::PhantomData,
        }
    }

    /// Whether `[base, base + len)` lies inside the buffer.
    fn holds(&self, base: u64, len: usize) -> bool {
        let (start, size) = self.range[0];
        base >= start && base.checked_add(len as u64).is_some_and(|end| end <= start + size)
    }
}

impl<'a> Io<'a> {
    /// An I/O on a program's buffers (`(address, length)` pairs).
    pub fn user(buffers: &'a [(u64, u64)], offset: Offset<'a>, append: bool, nonblock: bool) -> Self {
        Self { buffers, offset, append, nonblock, direct: false, kernel: None }
    }

    /// An I/O on the kernel buffer `buf`.
    pub fn kernel(buf: &'a KernelBuf<'a>, offset: Offset<'a>, append: bool, nonblock: bool) -> Self {
        Self { buffers: &buf.range, offset, append, nonblock, direct: false, kernel: Some(buf) }
    }

    /// The same I/O with `O_DIRECT` as given (a pipe's packet mode).
    #[must_use]
    pub fn direct(self, direct: bool) -> Self {
        Self { direct, ..self }
    }

    /// The total length of the buffers.
    pub fn len(&self) -> u64 {
        self.buffers.iter().fold(0u64, |n, b| n.saturating_add(b.1))
    }

    /// Copies `data` into the buffers at `base` (an address inside one of them).
    ///
    /// # Errors
    /// `Err(())` for a user address that cannot be written, or an address outside the kernel
    /// buffer or a kernel buffer that is written from (the caller's `EFAULT`).
    pub fn put(&self, base: u64, data: &[u8]) -> Result<(), ()> {
        match self.kernel {
            None => crate::memory::uaccess::copy_out(base, data).map_err(|_| ()),
            Some(k) if k.writable && k.holds(base, data.len()) => {
                // SAFETY: `[base, base + len)` is inside the buffer `k` was made from with
                // `reading_into`, a `&mut [u8]` it borrows (exclusively) for as long as this `Io`
                // lives; `data` is another object, so the two do not overlap.
                unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), base as *mut u8, data.len()) };
                Ok(())
            }
            Some(_) => Err(()),
        }
    }

    /// Copies the buffers' bytes at `base` into `dst`.
    ///
    /// # Errors
    /// `Err(())` for a user address that cannot be read, or an address outside the kernel
    /// buffer (the caller's `EFAULT`).
    pub fn take(&self, dst: &mut [u8], base: u64) -> Result<(), ()> {
        match self.kernel {
            None => crate::memory::uaccess::copy_in(dst, base).map_err(|_| ()),
            Some(k) if k.holds(base, dst.len()) => {
                // SAFETY: `[base, base + len)` is inside the buffer `k` borrows for as long as this
                // `Io` lives, which nothing writes meanwhile (a `reading_into` buffer is written
                // only through `put`, by the same caller); `dst` is another object.
                unsafe { core::ptr::copy_nonoverlapping(base as *const u8, dst.as_mut_ptr(), dst.len()) };
                Ok(())
            }
            Some(_) => Err(()),
        }
    }

    /// Copies `data` (kernel memory) into the buffers, in order: the bytes copied, or `EFAULT`
    /// when the first byte could not be.
    ///
    /// # Errors
    /// `EFAULT`.
    pub fn scatter(&self, data: &[u8]) -> IoResult {
        let mut at = 0;
        for &(base, len) in self.buffers {
            let take = usize::try_from(len).unwrap_or(usize::MAX).min(data.len() - at);
            if take == 0 {
                break;
            }
            if self.put(base, &data[at..at + take]).is_err() {
                return if at == 0 { Err(Errno::EFAULT.into()) } else { Ok(at as u64) };
            }
            at += take;
        }
        Ok(at as u64)
    }

    /// Calls `each` with the buffers' bytes in order, a chunk of at most `chunk.len()` bytes
    /// at a time (`skip` bytes left out at the start), until `each` takes fewer than it was
    /// given or fails: the bytes taken, or the error when none was (`EFAULT` for a buffer that
    /// cannot be read).
    ///
    /// # Errors
    /// `EFAULT`, or `each`'s error, when nothing was taken.
    pub fn gather(
        &self,
        chunk: &mut [u8],
        skip: u64,
        each: &mut dyn FnMut(&[u8]) -> Result<usize, FileError>,
    ) -> IoResult {
        let mut done = 0u64;
        let mut skip = skip;
        let partial = |done: u64, e: FileError| if done == 0 { Err(e) } else { Ok(done) };
        for &(base, len) in self.buffers {
            let mut off = skip.min(len);
            skip -= off;
            while off < len {
                let n = (len - off).min(chunk.len() as u64) as usize;
                if self.take(&mut chunk[..n], base.wrapping_add(off)).is_err() {
                    return partial(done, Errno::EFAULT.into());
                }
                let took = match each(&chunk[..n]) {
                    Ok(took) => took,
                    Err(e) => return partial(done, e),
                };
                done += took as u64;
                off += took as u64;
                if took < n {
                    return Ok(done);
                }
            }
        }
        Ok(done)
    }
}

/// Why a read or write did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileError {
    /// The call fails with this errno.
    Errno(Errno),
    /// Nothing can be done now: wait for the kernel event `key` (or `EAGAIN` with
    /// `O_NONBLOCK`).
    WouldBlock(usize),
}

impl From<Errno> for FileError {
    fn from(e: Errno) -> Self {
        Self::Errno(e)
    }
}

/// What a read or write returns.
pub type IoResult = Result<u64, FileError>;

/// What an open file description is open on (Linux's `file_operations`). A method a kind of file
/// does not have answers Linux's errno for it.
pub trait File: Send + Sync + Any {
    /// Reads into the user buffers.
    ///
    /// # Errors
    /// As the file says; `EINVAL` by default (a file that cannot be read).
    fn read(&self, io: Io<'_>) -> IoResult {
        let _ = io;
        Err(Errno::EINVAL.into())
    }

    /// Writes from the user buffers. `progress` is the thread's count of what a blocked write
    /// already wrote (a pipe's large write resumes after it); `sigpipe` sends `SIGPIPE` to the
    /// writer (a pipe or FIFO without readers).
    ///
    /// # Errors
    /// As the file says; `EINVAL` by default.
    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        let _ = (io, progress, sigpipe);
        Err(Errno::EINVAL.into())
    }

    /// What it is ready for now (`POLLIN`, `POLLOUT`, `POLLHUP`, `POLLERR`, ...), and the
    /// kernel-event key whose `notify` says that may have changed (0: no event ever changes it).
    fn poll(&self) -> (u16, usize);

    /// Its `struct stat`.
    ///
    /// # Errors
    /// As the file system says.
    fn stat(&self) -> Result<Stat, Errno>;

    /// `lseek`: the new position, from `pos` (the description's).
    ///
    /// # Errors
    /// `ESPIPE` by default (pipes, terminals).
    fn seek(&self, pos: &mut u64, offset: u64, whence: u64) -> Result<u64, Errno> {
        let _ = (pos, offset, whence);
        Err(Errno::ESPIPE)
    }

    /// `ioctl` on it.
    ///
    /// # Errors
    /// `ENOTTY` by default.
    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        let _ = (open, request, arg);
        Err(Errno::ENOTTY)
    }

    /// `ftruncate`.
    ///
    /// # Errors
    /// `EINVAL` by default (not a regular file).
    fn truncate(&self, size: u64) -> Result<(), Errno> {
        let _ = size;
        Err(Errno::EINVAL)
    }

    /// `getdents64`: directory entries from position `pos` into the user buffer `buf` of `len`
    /// bytes; the bytes written (0 at the end).
    ///
    /// # Errors
    /// `ENOTDIR` by default.
    fn getdents(&self, pos: &mut u64, buf: u64, len: u64) -> Result<u64, Errno> {
        let _ = (pos, buf, len);
        Err(Errno::ENOTDIR)
    }

    /// The node of a file system it is open on, if any (`fchdir`, `fstatat(AT_EMPTY_PATH)`, the
    /// `*at` calls' directories, `/proc/PID/fd`).
    fn inode(&self) -> Option<&Arc<dyn Inode>> {
        None
    }

    /// The page cache behind it (a regular file of a RAM file system, a memfd), for `mmap` and
    /// for the truncation that must reach every mapping.
    fn pages(&self) -> Option<Arc<super::pagecache::PageCache>> {
        None
    }

    /// Whether it has positions (`lseek`, `pread64`): regular files, directories, memfds and
    /// the memory devices do; pipes and terminals do not (`ESPIPE`).
    fn seekable(&self) -> bool {
        false
    }

    /// `fsync`/`fdatasync`: nothing here is ever written back, so a file that has the method
    /// (regular files and directories of the RAM file systems, memfds) succeeds at once.
    ///
    /// # Errors
    /// `EINVAL` by default: a file without it (a pipe, a device, `/proc`), as Linux's
    /// `vfs_fsync_range`.
    fn sync(&self) -> Result<(), Errno> {
        Err(Errno::EINVAL)
    }

    /// Whether it was opened with `O_PATH` (a handle that only names a node).
    fn path_only(&self) -> bool {
        false
    }

    /// What `readlink("/proc/PID/fd/N")` says of it (a path, `pipe:[ino]`,
    /// `anon_inode:[eventfd]`...).
    ///
    /// # Errors
    /// `ENOMEM`.
    fn describe(&self) -> Result<Vec<u8>, Errno>;

    /// The file as `Any`, for the code that made it to recognise it.
    fn as_any(&self) -> &dyn Any;
}

/// Appends `args`, formatted, to `out` (`ENOMEM` when the heap cannot hold it).
///
/// # Errors
/// `ENOMEM`.
pub fn push_fmt(out: &mut Vec<u8>, args: core::fmt::Arguments<'_>) -> Result<(), Errno> {
    struct W<'a>(&'a mut Vec<u8>);
    impl core::fmt::Write for W<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            self.0.try_reserve(s.len()).map_err(|_| core::fmt::Error)?;
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    core::fmt::write(&mut W(out), args).map_err(|_| Errno::ENOMEM)
}

/// An open file description.
pub struct OpenFile {
    /// What it is open on.
    pub file: Arc<dyn File>,
    /// Access mode and status flags (`O_RDWR | O_NONBLOCK ...`), shared by every dup.
    pub flags: AtomicU32,
    /// The file position (`read`, `write`, `lseek`).
    pub pos: Mutex<u64>,
    /// The epoll items watching it, which its end removes (`super::epoll`).
    pub(crate) watchers: super::epoll::Watchers,
    /// Who `O_ASYNC` would signal (`F_SETOWN`, `F_SETOWN_EX`): `(kind, id)`, Linux's
    /// `F_OWNER_TID`/`F_OWNER_PID`/`F_OWNER_PGRP` and the id (0: nobody), and the signal
    /// (`F_SETSIG`; 0: `SIGIO`). Kept and reported; no signal is sent here.
    pub owner: Mutex<(u32, u32, u32)>,
}

impl core::fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "OpenFile(flags {:#o})", self.flags.load(Ordering::Relaxed))
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        // Its open-file-description and `flock` locks go with it, and so do the epoll items
        // watching it.
        super::locks::description_dropped(core::ptr::from_ref(self) as usize);
        super::epoll::released(&self.watchers);
    }
}

impl OpenFile {
    /// A description of `file` with `flags`, position 0.
    pub fn new(file: Arc<dyn File>, flags: u32) -> Self {
        Self {
            file,
            flags: AtomicU32::new(flags),
            pos: Mutex::new(0),
            watchers: Default::default(),
            owner: Mutex::new((0, 0, 0)),
        }
    }

    /// The access mode and status flags.
    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Whether it was opened for reading.
    pub fn readable(&self) -> bool {
        self.flags() & O_ACCMODE != O_WRONLY && !self.file.path_only()
    }

    /// Whether it was opened for writing.
    pub fn writable(&self) -> bool {
        self.flags() & O_ACCMODE != O_RDONLY && !self.file.path_only()
    }

    /// The file as the concrete type `T`, if it is one.
    pub fn file_as<T: File>(&self) -> Option<&T> {
        self.file.as_any().downcast_ref::<T>()
    }
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
    /// `RLIMIT_NOFILE`'s soft limit: one more than the highest number a new descriptor may get.
    limit: usize,
}

impl FdTable {
    /// Descriptors 0, 1, 2 on one read-write description of `console`.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn with_console(console: Arc<OpenFile>) -> Result<Self, Errno> {
        let entry = FdEntry { file: console, cloexec: false };
        let mut fds = Vec::new();
        fds.try_reserve_exact(3).map_err(|_| Errno::ENOMEM)?;
        fds.extend([Some(entry.clone()), Some(entry.clone()), Some(entry)]);
        Ok(Self { fds, limit: FD_LIMIT })
    }

    /// Sets the limit (`RLIMIT_NOFILE`'s soft limit, at most [`NR_OPEN`]); descriptors open
    /// above it stay open, as on Linux.
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = usize::try_from(limit).unwrap_or(usize::MAX).min(NR_OPEN);
    }

    /// The limit new descriptors are below.
    pub fn limit(&self) -> usize {
        self.limit
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
            (min..self.limit).find(|&i| self.fds.get(i).is_none_or(Option::is_none)).ok_or(Errno::EMFILE)?;
        self.install_at(free, entry)?;
        Ok(free)
    }

    /// Puts `entry` at `fd` (below the limit), closing what was there; returns what was there.
    ///
    /// # Errors
    /// `ENOMEM` when the table cannot grow to `fd` (nothing changes).
    pub fn install_at(&mut self, fd: usize, entry: FdEntry) -> Result<Option<FdEntry>, Errno> {
        if self.fds.len() <= fd {
            let more = fd + 1 - self.fds.len();
            crate::memory::fallible::reserve(&mut self.fds, more)?;
            self.fds.resize(fd + 1, None);
        }
        Ok(self.fds[fd].replace(entry))
    }

    /// A copy (the same descriptions, each descriptor's own flag), or `None` when the heap cannot
    /// hold it.
    pub fn try_clone(&self) -> Option<Self> {
        let mut fds = Vec::new();
        fds.try_reserve_exact(self.fds.len()).ok()?;
        fds.extend(self.fds.iter().cloned());
        Some(Self { fds, limit: self.limit })
    }

    /// `execve`: closes every close-on-exec descriptor (dropped after the table's lock, by the
    /// caller, through the returned list: a last close may take other locks).
    pub fn close_on_exec(&mut self) -> Vec<FdEntry> {
        let mut closed = Vec::new();
        for slot in &mut self.fds {
            if slot.as_ref().is_some_and(|e| e.cloexec)
                && let Some(e) = slot.take()
                && closed.try_reserve(1).is_ok()
            {
                closed.push(e);
            }
        }
        closed
    }

    /// Closes `fd`, returning its descriptor (the caller drops it outside the table's lock).
    ///
    /// # Errors
    /// `EBADF` if it was not open.
    pub fn close(&mut self, fd: u64) -> Result<FdEntry, Errno> {
        let i = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
        self.fds.get_mut(i).and_then(Option::take).ok_or(Errno::EBADF)
    }

    /// `close_range(first, last, ...)`: closes (or, with `cloexec`, marks close-on-exec) every
    /// open descriptor in `first..=last`; returns the closed ones for the caller to drop.
    pub fn close_range(&mut self, first: usize, last: usize, cloexec: bool) -> Vec<FdEntry> {
        let mut closed = Vec::new();
        let end = last.min(self.fds.len().saturating_sub(1));
        if first > end {
            return closed;
        }
        for slot in &mut self.fds[first..=end] {
            if cloexec {
                if let Some(e) = slot.as_mut() {
                    e.cloexec = true;
                }
            } else if let Some(e) = slot.take()
                && closed.try_reserve(1).is_ok()
            {
                closed.push(e);
            }
        }
        closed
    }

    /// The open descriptors' numbers, ascending.
    pub fn numbers(&self) -> impl Iterator<Item = usize> + '_ {
        self.fds.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(i, _)| i)
    }
}
