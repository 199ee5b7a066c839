//! Descriptors and the files behind them: `read`, `readv`, `pread64`, `preadv`, `preadv2`,
//! `write` and their kin, `close`, `close_range`, `dup`, `dup3`, `fcntl`, `ioctl`, `fstat`,
//! `lseek`, `ftruncate`, `fallocate`, `getdents64`, `fsync` and `fdatasync`.
//!
//! What a descriptor is open on is a `fs::file::File`; every call here goes through that one
//! interface, so the console, pipes, memfds, devices and the files of the tree behave alike
//! where Linux's do. Checks come in Linux's order: the descriptor (`EBADF`, and `EBADF` for a
//! mode it was not opened with) before the arguments, the arguments before the user memory
//! (`EFAULT`). A call that may wait reads the kernel-event count before it asks the file, and
//! blocks on the key the file names unless the description has `O_NONBLOCK` (`EAGAIN`), so a
//! change in between restarts it rather than being missed. What a call allocates (iovec arrays,
//! read buffers) comes from `memory::fallible`: `ENOMEM`, never a panic.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use linux_abi::fcntl::{
    F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_GETFL, F_SETFD, F_SETFL, FD_CLOEXEC, IOV_MAX, O_APPEND, O_ASYNC,
    O_CLOEXEC, O_DIRECT, O_NOATIME, O_NONBLOCK,
};
use linux_abi::termios::ioctl::*;

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::{FdEntry, FileError, Io, Offset, OpenFile};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

fn file(p: &Process, fd: u64) -> Result<Arc<OpenFile>, Errno> {
    p.posix.files.lock().file(fd)
}

fn done(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
    Action::reply(frame, result)
}

/// The buffers a `read`/`write` (one) or a `readv`/`writev` (an iovec array) names, as
/// `(address, length)` pairs: one needs no heap, an array is read into a fallible vector.
pub enum Buffers {
    /// `(buf, count)` of `read`/`write`.
    One(u64, u64),
    /// `(iov, iovcnt)` of `readv`/`writev`.
    Vector(u64, u64),
}

/// The imported [`Buffers`].
enum IoList {
    One([(u64, u64); 1]),
    Many(Vec<(u64, u64)>),
}

impl core::ops::Deref for IoList {
    type Target = [(u64, u64)];
    fn deref(&self) -> &Self::Target {
        match self {
            Self::One(one) => one,
            Self::Many(v) => v,
        }
    }
}

impl Buffers {
    /// Reads the buffer list (Linux's `import_iovec`: EINVAL for too many or a total past
    /// SSIZE_MAX, ENOMEM for the array, EFAULT for an unreadable one).
    fn import(&self) -> Result<IoList, Errno> {
        let (iov, count) = match *self {
            // count is a size_t; Linux clamps it to MAX_RW_COUNT rather than failing.
            Self::One(buf, count) => return Ok(IoList::One([(buf, count.min(0x7fff_f000))])),
            Self::Vector(iov, count) => (iov, count),
        };
        if count > IOV_MAX {
            return Err(Errno::EINVAL);
        }
        let mut out = Vec::new();
        fallible::reserve(&mut out, count as usize).map_err(|_| Errno::ENOMEM)?;
        let mut total: u64 = 0;
        for i in 0..count {
            let mut b = [0u8; 16];
            copy_in(&mut b, iov.wrapping_add(i * 16)).map_err(|_| Errno::EFAULT)?;
            let base = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
            // Linux: a negative length, or a total past SSIZE_MAX, is EINVAL.
            total = total.checked_add(len).filter(|t| *t <= i64::MAX as u64).ok_or(Errno::EINVAL)?;
            out.push((base, len)); // within the room reserved above
        }
        Ok(IoList::Many(out))
    }
}

/// Where a read or write happens: at the description's position, or at an offset given by the
/// call (`pread64`, `preadv`; `preadv2` with offset -1 is the position).
#[derive(Clone, Copy)]
pub enum At {
    /// The description's position.
    Position,
    /// This offset (the position unchanged).
    Offset(u64),
}

/// What a read or write on `f` decided: its count or errno, or a block on a key.
fn finish(frame: &mut TrapFrame, f: &OpenFile, generation: u32, r: Result<u64, FileError>) -> Action {
    match r {
        Ok(n) => done(frame, Ok(n)),
        Err(FileError::Errno(e)) => done(frame, Err(e)),
        Err(FileError::WouldBlock(_)) if f.flags() & O_NONBLOCK != 0 => done(frame, Err(Errno::EAGAIN)),
        Err(FileError::WouldBlock(key)) => {
            Action::Block(Wait { what: WaitFor::Event { key, generation }, deadline: None })
        }
    }
}

/// The descriptor `fd` for a read or write at `at`, in Linux's order: `EBADF` (not open, or
/// not open for this direction), `ESPIPE` (an offset on a file without positions), `EINVAL`
/// (a negative offset).
fn io_file(p: &Process, fd: u64, write: bool, at: At) -> Result<Arc<OpenFile>, Errno> {
    let f = file(p, fd)?;
    if (write && !f.writable()) || (!write && !f.readable()) {
        return Err(Errno::EBADF);
    }
    if let At::Offset(off) = at {
        if !f.file.seekable() {
            return Err(Errno::ESPIPE);
        }
        if (off as i64) < 0 {
            return Err(Errno::EINVAL);
        }
    }
    Ok(f)
}

/// `read`, `readv`, `pread64`, `preadv`, `preadv2`: the file's bytes into the buffers; blocks
/// (restarting the call) when the file says to wait.
pub fn read(p: &Process, frame: &mut TrapFrame, fd: u64, buffers: Buffers, at: At) -> Action {
    let generation = crate::sched::event_generation();
    let f = match io_file(p, fd, false, at) {
        Ok(f) => f,
        Err(e) => return done(frame, Err(e)),
    };
    let list = match buffers.import() {
        Ok(l) => l,
        Err(e) => return done(frame, Err(e)),
    };
    let nonblock = f.flags() & O_NONBLOCK != 0;
    let r = match at {
        At::Offset(off) => f.file.read(Io {
            buffers: &list,
            offset: Offset::At(off),
            append: false,
            nonblock,
            direct: false,
        }),
        At::Position if f.file.seekable() => {
            let mut pos = f.pos.lock();
            f.file.read(Io {
                buffers: &list,
                offset: Offset::Current(&mut pos),
                append: false,
                nonblock,
                direct: false,
            })
        }
        At::Position => {
            f.file.read(Io { buffers: &list, offset: Offset::At(0), append: false, nonblock, direct: false })
        }
    };
    finish(frame, &f, generation, r)
}

/// `write`, `writev`, `pwrite64`, `pwritev`, `pwritev2`: the buffers into the file (which may
/// block; `progress` is the thread's count of what a blocked pipe write already wrote).
pub fn write(
    p: &Process,
    frame: &mut TrapFrame,
    progress: &mut u64,
    fd: u64,
    buffers: Buffers,
    at: At,
) -> Action {
    let generation = crate::sched::event_generation();
    let f = match io_file(p, fd, true, at) {
        Ok(f) => f,
        Err(e) => return done(frame, Err(e)),
    };
    let list = match buffers.import() {
        Ok(l) => l,
        Err(e) => return done(frame, Err(e)),
    };
    let flags = f.flags();
    let nonblock = flags & O_NONBLOCK != 0;
    // No reader: SIGPIPE from the writer's own pid (Linux's `pipe_write`).
    let sigpipe = || {
        let info = ::signal::info::SigInfo::sent(::signal::num::SIGPIPE, ::signal::num::SI_USER, p.pid, 0);
        crate::process::signals::send_to_process(p, info);
    };
    let append = flags & O_APPEND != 0;
    let direct = flags & O_DIRECT != 0;
    let r = match at {
        // pwrite on an O_APPEND file appends, as Linux does.
        At::Offset(off) => f.file.write(
            Io { buffers: &list, offset: Offset::At(off), append, nonblock, direct },
            progress,
            &sigpipe,
        ),
        At::Position if f.file.seekable() => {
            let mut pos = f.pos.lock();
            f.file.write(
                Io { buffers: &list, offset: Offset::Current(&mut pos), append, nonblock, direct },
                progress,
                &sigpipe,
            )
        }
        At::Position => f.file.write(
            Io { buffers: &list, offset: Offset::At(0), append, nonblock, direct },
            progress,
            &sigpipe,
        ),
    };
    finish(frame, &f, generation, r)
}

/// The offset of `pread64`-style calls: `preadv2`/`pwritev2` take -1 as "the position".
pub fn offset_arg(offset: u64, v2: bool) -> At {
    if v2 && offset as i64 == -1 { At::Position } else { At::Offset(offset) }
}

/// `preadv2`/`pwritev2` flags: `RWF_HIPRI`, `RWF_DSYNC`, `RWF_SYNC`, `RWF_NOWAIT`, `RWF_APPEND`
/// are known (and mean nothing more for these files); others are `EOPNOTSUPP`.
pub fn check_rwf(flags: u64) -> Result<(), Errno> {
    if flags & !0x1f != 0 { Err(Errno::EOPNOTSUPP) } else { Ok(()) }
}

/// `ftruncate(fd, length)`, in Linux's order (`do_sys_ftruncate`): `EINVAL` a negative length;
/// `EBADF` no descriptor; `EINVAL` not a regular file or not open for writing; then the file's
/// own answer. Shrinking a file with a page cache unmaps the pages past the end in every process
/// that maps it: the file shrinks first (so no fault can map a page past the new end), then each
/// address space unmaps those pages, one memory lock at a time, never inside the cache's lock
/// (the fault path takes them in the other order).
pub fn ftruncate(p: &Process, fd: u64, length: u64) -> Result<u64, Errno> {
    if (length as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let f = file(p, fd)?;
    if !f.writable() {
        return Err(Errno::EINVAL);
    }
    truncate_file(&f.file, length)
}

/// Truncates `file` to `length` and unmaps the pages past the end everywhere (`ftruncate`,
/// `truncate`, `open(O_TRUNC)`).
pub fn truncate_file(file: &Arc<dyn crate::fs::file::File>, length: u64) -> Result<u64, Errno> {
    file.truncate(length)?;
    if let Some(cache) = file.pages() {
        unmap_past(&cache, length);
    }
    Ok(0)
}

/// Unmaps the pages of `cache` from `length` on, in every address space.
pub fn unmap_past(cache: &Arc<crate::fs::pagecache::PageCache>, length: u64) {
    let first = length.div_ceil(mm::addr::PAGE_SIZE);
    let object = cache.object();
    crate::process::family::for_each_process(|q| {
        // A space shared by a vfork parent and child is reached twice; the second time finds
        // nothing left past the end.
        if let Some(space) = q.space() {
            space.lock().truncate_object(&object, first);
        }
    });
}

/// `fallocate(fd, mode, offset, len)`: mode 0 (and `FALLOC_FL_KEEP_SIZE`) grows the file to
/// `offset + len`; the hole-punching and range modes are `EOPNOTSUPP`.
pub fn fallocate(p: &Process, fd: u64, mode: u64, offset: u64, len: u64) -> Result<u64, Errno> {
    const KEEP_SIZE: u64 = 1;
    let f = file(p, fd)?;
    if (offset as i64) < 0 || (len as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    if mode & !KEEP_SIZE != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    let st = f.file.stat()?;
    if st.mode & linux_abi::fcntl::S_IFMT == linux_abi::fcntl::S_IFDIR {
        return Err(Errno::EISDIR);
    }
    if st.mode & linux_abi::fcntl::S_IFMT != linux_abi::fcntl::S_IFREG {
        return Err(if f.file.seekable() { Errno::ENODEV } else { Errno::ESPIPE });
    }
    let end = offset.checked_add(len).filter(|e| *e <= i64::MAX as u64).ok_or(Errno::EFBIG)?;
    if mode & KEEP_SIZE == 0 && end > st.size as u64 {
        f.file.truncate(end)?;
    }
    Ok(0)
}

/// `close(fd)`: the descriptor goes; the description with its last descriptor (dropped after
/// the table's lock: a last close may take other locks). Record locks of the process on the
/// file go with any close of it, as POSIX says.
pub fn close(p: &Process, fd: u64) -> Result<u64, Errno> {
    let entry = p.posix.files.lock().close(fd)?;
    crate::fs::locks::closed(p.pid, &entry.file);
    drop(entry);
    Ok(0)
}

/// `close_range(first, last, flags)`: `CLOSE_RANGE_CLOEXEC` marks instead of closing;
/// `CLOSE_RANGE_UNSHARE` is accepted (the table is the process's own).
pub fn close_range(p: &Process, first: u64, last: u64, flags: u64) -> Result<u64, Errno> {
    const UNSHARE: u64 = 1 << 1;
    const CLOEXEC: u64 = 1 << 2;
    if flags & !(UNSHARE | CLOEXEC) != 0 || first > last {
        return Err(Errno::EINVAL);
    }
    let first = usize::try_from(first.min(u32::MAX.into())).unwrap_or(usize::MAX);
    let last = usize::try_from(last.min(u32::MAX.into())).unwrap_or(usize::MAX);
    let closed = p.posix.files.lock().close_range(first, last, flags & CLOEXEC != 0);
    for e in &closed {
        crate::fs::locks::closed(p.pid, &e.file);
    }
    drop(closed);
    Ok(0)
}

/// `dup(fd)`.
pub fn dup(p: &Process, fd: u64) -> Result<u64, Errno> {
    let mut files = p.posix.files.lock();
    let entry = files.get(fd).cloned().ok_or(Errno::EBADF)?;
    files.install_lowest(0, FdEntry { cloexec: false, ..entry }).map(|n| n as u64)
}

/// `dup3(old, new, flags)` (arm64 has no `dup2`: C libraries build it on `dup3` and `fcntl`).
pub fn dup3(p: &Process, old: u64, new: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !u64::from(O_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut files = p.posix.files.lock();
    if old == new {
        return Err(Errno::EINVAL);
    }
    let entry = files.get(old).cloned().ok_or(Errno::EBADF)?;
    if new >= files.limit() as u64 {
        return Err(Errno::EBADF);
    }
    let replaced = files.install_at(new as usize, FdEntry { cloexec: flags != 0, ..entry })?;
    drop(files);
    if let Some(old) = replaced {
        crate::fs::locks::closed(p.pid, &old.file);
    }
    Ok(new)
}

/// `fcntl(fd, cmd, arg)`: F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL, F_SETFL, the
/// record locks (`fs::locks`), F_GETPIPE_SZ/F_SETPIPE_SZ, F_GET_SEALS/F_ADD_SEALS (`EINVAL`:
/// no seals here).
pub fn fcntl(p: &Process, frame: &mut TrapFrame, fd: u64, cmd: u64, arg: u64) -> Action {
    use linux_abi::fcntl::{F_GETLK, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLK, F_SETLKW};
    if matches!(cmd, F_GETLK | F_SETLK | F_SETLKW | F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW) {
        let f = match file(p, fd) {
            Ok(f) => f,
            Err(e) => return done(frame, Err(e)),
        };
        return crate::fs::locks::fcntl_lock(frame, p.pid, &f, cmd, arg);
    }
    done(frame, fcntl_plain(p, fd, cmd, arg))
}

fn fcntl_plain(p: &Process, fd: u64, cmd: u64, arg: u64) -> Result<u64, Errno> {
    use linux_abi::fcntl::{
        F_ADD_SEALS, F_GET_SEALS, F_GETOWN, F_GETPIPE_SZ, F_GETSIG, F_SETOWN, F_SETPIPE_SZ, F_SETSIG,
    };
    // The status flags F_SETFL may change (Linux's SETFL_MASK; O_ASYNC, O_DIRECT and O_NOATIME
    // mean nothing for these files and are kept as given).
    const SETFL_MASK: u32 = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;
    let mut files = p.posix.files.lock();
    let limit = files.limit() as u64;
    let entry = files.get_mut(fd).ok_or(Errno::EBADF)?;
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let entry = FdEntry { cloexec: cmd == F_DUPFD_CLOEXEC, ..entry.clone() };
            if arg >= limit {
                return Err(Errno::EINVAL);
            }
            files.install_lowest(arg as usize, entry).map(|n| n as u64)
        }
        F_GETFD => Ok(u64::from(entry.cloexec)),
        F_SETFD => {
            entry.cloexec = arg & FD_CLOEXEC != 0;
            Ok(0)
        }
        F_GETFL => Ok(u64::from(entry.file.flags())),
        F_SETFL => {
            if entry.file.file.path_only() {
                return Err(Errno::EBADF);
            }
            let old = entry.file.flags.load(Ordering::Relaxed);
            entry.file.flags.store((old & !SETFL_MASK) | (arg as u32 & SETFL_MASK), Ordering::Relaxed);
            Ok(0)
        }
        F_GETPIPE_SZ | F_SETPIPE_SZ => {
            let f = entry.file.clone();
            drop(files);
            crate::fs::pipe::pipe_size(&f.file, (cmd == F_SETPIPE_SZ).then_some(arg))
        }
        F_GET_SEALS | F_ADD_SEALS => Err(Errno::EINVAL),
        F_GETOWN | F_GETSIG => Ok(0),
        F_SETOWN | F_SETSIG => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// `ioctl(fd, request, arg)`: the requests every descriptor has (Linux's `do_vfs_ioctl`:
/// `FIOCLEX`, `FIONCLEX`, `FIONBIO`, `FIOASYNC`), then the console's job control (which needs
/// the process), then the file's own (`ENOTTY` for a file that has none).
pub fn ioctl(p: &Process, fd: u64, request: u64, arg: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    let in_u32 = || {
        let mut b = [0u8; 4];
        copy_in(&mut b, arg).map(|()| u32::from_le_bytes(b)).map_err(|_| Errno::EFAULT)
    };
    let set_flag = |flag: u32, on: bool| {
        if on {
            f.flags.fetch_or(flag, Ordering::Relaxed);
        } else {
            f.flags.fetch_and(!flag, Ordering::Relaxed);
        }
    };
    match request as u32 as u64 {
        FIOCLEX | FIONCLEX => {
            let mut files = p.posix.files.lock();
            let e = files.get_mut(fd).ok_or(Errno::EBADF)?;
            e.cloexec = request as u32 as u64 == FIOCLEX;
            return Ok(0);
        }
        FIONBIO => {
            set_flag(O_NONBLOCK, in_u32()? != 0);
            return Ok(0);
        }
        FIOASYNC => {
            set_flag(O_ASYNC, in_u32()? != 0);
            return Ok(0);
        }
        _ => {}
    }
    let console =
        f.file_as::<crate::fs::dev::DeviceFile>().is_some_and(crate::fs::dev::DeviceFile::is_console);
    if console && let Some(r) = job_control(p, request, arg) {
        return r;
    }
    f.file.ioctl(&f, request, arg)
}

/// The console's job-control requests, for the process that asks (`None`: not one of them).
fn job_control(p: &Process, request: u64, arg: u64) -> Option<Result<u64, Errno>> {
    let out = |bytes: &[u8]| copy_out(arg, bytes).map(|()| 0).map_err(|_| Errno::EFAULT);
    let ctty = p.posix.ctty.load(Ordering::Acquire);
    Some(match request as u32 as u64 {
        // Only for the session that made the console its controlling terminal (setsid, then
        // TIOCSCTTY), as Linux; before that a shell learns "no job control".
        TIOCSCTTY => {
            if p.posix.sid.load(Ordering::Acquire) != p.pid {
                return Some(Err(Errno::EPERM));
            }
            p.posix.ctty.store(true, Ordering::Release);
            crate::fs::tty::set_foreground(p.posix.pgid.load(Ordering::Acquire));
            Ok(0)
        }
        TIOCNOTTY => {
            if !ctty {
                return Some(Err(Errno::ENOTTY));
            }
            p.posix.ctty.store(false, Ordering::Release);
            Ok(0)
        }
        TIOCGPGRP if ctty => out(&crate::fs::tty::foreground().to_le_bytes()),
        TIOCGSID if ctty => out(&p.posix.sid.load(Ordering::Acquire).to_le_bytes()),
        TIOCSPGRP if ctty => {
            let mut b = [0u8; 4];
            if copy_in(&mut b, arg).is_err() {
                return Some(Err(Errno::EFAULT));
            }
            let pgrp = u32::from_le_bytes(b);
            if (pgrp as i32) < 0 {
                Err(Errno::EINVAL)
            } else if pgrp != p.posix.pgid.load(Ordering::Acquire) {
                Err(Errno::EPERM) // the only group
            } else {
                crate::fs::tty::set_foreground(pgrp);
                Ok(0)
            }
        }
        TIOCGPGRP | TIOCGSID | TIOCSPGRP => Err(Errno::ENOTTY),
        _ => return None,
    })
}

/// `fstat(fd, buf)`.
pub fn fstat(p: &Process, fd: u64, buf: u64) -> Result<u64, Errno> {
    let stat = file(p, fd)?.file.stat()?;
    copy_out(buf, &stat.to_bytes()).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `lseek(fd, offset, whence)`.
pub fn lseek(p: &Process, fd: u64, offset: u64, whence: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    let mut pos = f.pos.lock();
    f.file.seek(&mut pos, offset, whence)
}

/// `getdents64(fd, dirp, count)`: the directory's entries from the description's position.
pub fn getdents64(p: &Process, fd: u64, dirp: u64, count: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    let mut pos = f.pos.lock();
    f.file.getdents(&mut pos, dirp, count)
}

/// `fsync(fd)`, `fdatasync(fd)`: everything is in memory already; `EINVAL` for a file that
/// cannot be synced (a pipe, the console), as Linux's `vfs_fsync` without `fsync` method.
pub fn fsync(p: &Process, fd: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    if f.file.seekable() || f.file.inode().is_some() { Ok(0) } else { Err(Errno::EINVAL) }
}
