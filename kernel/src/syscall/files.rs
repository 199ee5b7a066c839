//! Descriptors and the files behind them: `read`, `readv`, `write`, `writev`, `pread64`,
//! `pwrite64`, `close`, `dup`, `dup3`, `fcntl`, `ioctl`, `fstat`, `newfstatat`, `statx`, `lseek`,
//! `ftruncate`, and the path calls of a machine without a file system (`faccessat`, `readlinkat`:
//! ENOENT; `getcwd`: "/"; `openat` finds `/proc/self/maps` only: `procfs`).
//!
//! An open file is the console (`fs::tty`, a character device like Linux's `/dev/console`,
//! major 5, minor 1: `isatty` holds, so C libraries line-buffer standard output), a pipe end, a
//! memfd or a generated text. A console read that finds no input blocks the thread on the
//! console's input event unless the description has `O_NONBLOCK` (EAGAIN). Checks come in
//! Linux's order: the descriptor (EBADF) before the arguments, the arguments before the user
//! memory (EFAULT). What a call allocates (iovec arrays, paths, read buffers) comes from
//! `memory::fallible`: `ENOMEM`, never a panic; a plain `read`/`write` names its one buffer
//! without any heap ([`Buffers`]).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use linux_abi::fcntl::{
    AT_EMPTY_PATH, AT_FDCWD, AT_NO_AUTOMOUNT, AT_STATX_SYNC_TYPE, AT_SYMLINK_NOFOLLOW, F_DUPFD,
    F_DUPFD_CLOEXEC, F_GETFD, F_GETFL, F_SETFD, F_SETFL, FD_CLOEXEC, IOV_MAX, O_APPEND, O_ASYNC, O_CLOEXEC,
    O_DIRECT, O_NOATIME, O_NONBLOCK, S_IFCHR, STATX_BASIC_STATS,
};
use linux_abi::layout::{Stat, Winsize, encode_dev};
use linux_abi::termios::ioctl::*;
use linux_abi::termios::{TERMIOS_SIZE, Termios};
use linux_abi::time::Timespec;

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::{FD_LIMIT, FdEntry, FileKind, OpenFile};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out, read_path};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

/// Bytes moved per read (a canonical line is at most 4096).
const READ_CHUNK: usize = 4096;

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

/// The open file `fd` and the buffers of a read or write on it, in Linux's order: the
/// descriptor (EBADF) before the buffers.
fn file_and_buffers(p: &Process, fd: u64, buffers: &Buffers) -> Result<(Arc<OpenFile>, IoList), Errno> {
    let f = file(p, fd)?;
    Ok((f, buffers.import()?))
}

/// `read(fd, buf, count)` and `readv(fd, iov, iovcnt)`: one console read scattered over the
/// buffers; blocks (restarting the call) when nothing is there.
pub fn read(p: &Process, frame: &mut TrapFrame, fd: u64, buffers: Buffers) -> Action {
    let (f, buffers) = match file_and_buffers(p, fd, &buffers) {
        Ok(both) => both,
        Err(e) => return done(frame, Err(e)),
    };
    match &f.kind {
        FileKind::Pipe(end) => return crate::fs::pipe::read(frame, &f, end, &buffers),
        FileKind::Text(text) => return done(frame, text.read(&buffers)),
        FileKind::Memfd(_) => return done(frame, crate::fs::memfd::read(&f, &buffers)),
        FileKind::Console => {}
    }
    let total = buffers.iter().map(|b| b.1).sum::<u64>().min(READ_CHUNK as u64) as usize;
    if total == 0 {
        return done(frame, Ok(0));
    }
    let mut data = match fallible::zeroed::<u8>(total) {
        Ok(data) => data,
        Err(e) => return done(frame, Err(e)),
    };
    // Read before the look: input that arrives after it restarts the call (`sched::notify`).
    let generation = crate::sched::event_generation();
    let Some(n) = crate::fs::tty::read(&mut data) else {
        if f.flags.load(Ordering::Relaxed) & O_NONBLOCK != 0 {
            return done(frame, Err(Errno::EAGAIN));
        }
        return Action::Block(Wait {
            what: WaitFor::Event { key: crate::fs::tty::input_key(), generation },
            deadline: None,
        });
    };
    let mut at = 0;
    for &(base, len) in buffers.iter() {
        let take = (len as usize).min(n - at);
        if take == 0 {
            break;
        }
        if copy_out(base, &data[at..at + take]).is_err() {
            // The bytes are gone from the line discipline, as with Linux's n_tty on a fault.
            return done(frame, if at == 0 { Err(Errno::EFAULT) } else { Ok(at as u64) });
        }
        at += take;
    }
    done(frame, Ok(at as u64))
}

/// `write(fd, buf, count)` and `writev(fd, iov, iovcnt)`: the bytes go to the console as they
/// are, or into a pipe (which may block; `progress` is the thread's count of what a blocked
/// pipe write already wrote).
pub fn write(p: &Process, frame: &mut TrapFrame, progress: &mut u64, fd: u64, buffers: Buffers) -> Action {
    let (f, buffers) = match file_and_buffers(p, fd, &buffers) {
        Ok(both) => both,
        Err(e) => return done(frame, Err(e)),
    };
    let result = match &f.kind {
        FileKind::Pipe(end) => {
            // No reader: SIGPIPE from the writer's own pid (Linux's `pipe_write`).
            let sigpipe = || {
                let info =
                    ::signal::info::SigInfo::sent(::signal::num::SIGPIPE, ::signal::num::SI_USER, p.pid, 0);
                crate::process::signals::send_to_process(p, info);
            };
            return crate::fs::pipe::write(frame, progress, &f, end, &buffers, &sigpipe);
        }
        FileKind::Text(_) => Err(crate::fs::text::write_error(&f)),
        FileKind::Memfd(_) => crate::fs::memfd::write(&f, &buffers),
        FileKind::Console => write_console(&buffers),
    };
    done(frame, result)
}

fn write_console(buffers: &[(u64, u64)]) -> Result<u64, Errno> {
    let mut chunk = [0u8; 256];
    let mut written = 0u64;
    for &(base, len) in buffers {
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(chunk.len() as u64) as usize;
            if copy_in(&mut chunk[..n], base.wrapping_add(off)).is_err() {
                // Linux returns what was written before the fault, EFAULT if nothing was.
                return if written == 0 { Err(Errno::EFAULT) } else { Ok(written) };
            }
            crate::fs::tty::write(&chunk[..n]);
            off += n as u64;
            written += n as u64;
        }
    }
    Ok(written)
}

/// `pread64(fd, buf, count, offset)` and `pwrite64`: at `offset`, the position unchanged (a
/// memfd: the one file here that can seek).
pub fn pread_pwrite(
    p: &Process,
    fd: u64,
    buf: u64,
    count: u64,
    offset: u64,
    write: bool,
) -> Result<u64, Errno> {
    crate::fs::memfd::pread_pwrite(&p.posix.files, fd, buf, count, offset, write)
}

/// `ftruncate(fd, length)`: a memfd (the one file here that can be truncated). Shrinking unmaps
/// the pages past the end in every process that maps the object: the object shrinks first (so
/// no fault can map a page past the new end), then each address space unmaps those pages, one
/// memory lock at a time, never inside the object's lock (the fault path takes them in the other
/// order).
pub fn ftruncate(p: &Process, fd: u64, length: u64) -> Result<u64, Errno> {
    if let Some((object, first)) = crate::fs::memfd::truncate(&p.posix.files, fd, length)? {
        crate::process::family::for_each_process(|q| {
            // A space shared by a vfork parent and child is reached twice; the second time finds
            // nothing left past the end.
            if let Some(space) = q.space() {
                space.lock().truncate_object(&object, first);
            }
        });
    }
    Ok(0)
}

/// `close(fd)`.
pub fn close(p: &Process, fd: u64) -> Result<u64, Errno> {
    if p.posix.files.lock().close(fd) { Ok(0) } else { Err(Errno::EBADF) }
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
    if new >= FD_LIMIT as u64 {
        return Err(Errno::EBADF);
    }
    files.install_at(new as usize, FdEntry { cloexec: flags != 0, ..entry }).map(|()| new)
}

/// `fcntl(fd, cmd, arg)`: F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL, F_SETFL.
pub fn fcntl(p: &Process, fd: u64, cmd: u64, arg: u64) -> Result<u64, Errno> {
    // The status flags F_SETFL may change (Linux's SETFL_MASK; O_ASYNC, O_DIRECT and O_NOATIME
    // mean nothing for these files and are kept as given).
    const SETFL_MASK: u32 = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;
    let mut files = p.posix.files.lock();
    let entry = files.get_mut(fd).ok_or(Errno::EBADF)?;
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let entry = FdEntry { cloexec: cmd == F_DUPFD_CLOEXEC, ..entry.clone() };
            if arg >= FD_LIMIT as u64 {
                return Err(Errno::EINVAL);
            }
            files.install_lowest(arg as usize, entry).map(|n| n as u64)
        }
        F_GETFD => Ok(u64::from(entry.cloexec)),
        F_SETFD => {
            entry.cloexec = arg & FD_CLOEXEC != 0;
            Ok(0)
        }
        F_GETFL => Ok(u64::from(entry.file.flags.load(Ordering::Relaxed))),
        F_SETFL => {
            let old = entry.file.flags.load(Ordering::Relaxed);
            entry.file.flags.store((old & !SETFL_MASK) | (arg as u32 & SETFL_MASK), Ordering::Relaxed);
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `ioctl(fd, request, arg)` on the console: the termios, window-size, process-group and queue
/// requests of a tty; anything else is ENOTTY, as for Linux's tty driver.
pub fn ioctl(p: &Process, fd: u64, request: u64, arg: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    let out = |bytes: &[u8]| if copy_out(arg, bytes).is_err() { Err(Errno::EFAULT) } else { Ok(0) };
    if let FileKind::Text(_) | FileKind::Memfd(_) = &f.kind {
        return Err(Errno::ENOTTY);
    }
    if let FileKind::Pipe(end) = &f.kind {
        // A pipe is no terminal: only the queue size (and FIONBIO, below) are known to it.
        return match request as u32 as u64 {
            FIONREAD => out(&(crate::fs::pipe::available(end) as u32).to_le_bytes()),
            FIONBIO => {
                let mut b = [0u8; 4];
                if copy_in(&mut b, arg).is_err() {
                    return Err(Errno::EFAULT);
                }
                if u32::from_le_bytes(b) != 0 {
                    f.flags.fetch_or(O_NONBLOCK, Ordering::Relaxed);
                } else {
                    f.flags.fetch_and(!O_NONBLOCK, Ordering::Relaxed);
                }
                Ok(0)
            }
            _ => Err(Errno::ENOTTY),
        };
    }
    let in_u32 = || {
        let mut b = [0u8; 4];
        copy_in(&mut b, arg).map(|()| u32::from_le_bytes(b)).map_err(|_| Errno::EFAULT)
    };
    let ctty = p.posix.ctty.load(Ordering::Acquire);
    match request as u32 as u64 {
        TCGETS => out(&crate::fs::tty::termios().to_bytes()),
        TCSETS | TCSETSW | TCSETSF => {
            let mut b = [0u8; TERMIOS_SIZE];
            if copy_in(&mut b, arg).is_err() {
                return Err(Errno::EFAULT);
            }
            // Output is written synchronously, so TCSETSW's drain has nothing to wait for.
            crate::fs::tty::set_termios(Termios::from_bytes(b), request == TCSETSF);
            Ok(0)
        }
        TIOCGWINSZ => out(&crate::fs::tty::winsize().to_bytes()),
        TIOCSWINSZ => {
            let mut b = [0u8; 8];
            if copy_in(&mut b, arg).is_err() {
                return Err(Errno::EFAULT);
            }
            crate::fs::tty::set_winsize(Winsize::from_bytes(b));
            Ok(0)
        }
        FIONREAD => out(&(crate::fs::tty::available() as u32).to_le_bytes()),
        TIOCOUTQ => out(&0u32.to_le_bytes()),
        TCFLSH => {
            if arg > 2 {
                return Err(Errno::EINVAL);
            }
            if arg != 1 {
                crate::fs::tty::flush_input();
            }
            Ok(0)
        }
        TCXONC => Ok(0),
        FIONBIO => match in_u32() {
            Ok(on) => {
                if on != 0 {
                    f.flags.fetch_or(O_NONBLOCK, Ordering::Relaxed);
                } else {
                    f.flags.fetch_and(!O_NONBLOCK, Ordering::Relaxed);
                }
                Ok(0)
            }
            Err(e) => Err(e),
        },
        // Job control: only for the session that made the console its controlling terminal
        // (setsid, then TIOCSCTTY), as Linux; before that a shell learns "no job control".
        TIOCSCTTY => {
            if p.posix.sid.load(Ordering::Acquire) != p.pid {
                return Err(Errno::EPERM);
            }
            p.posix.ctty.store(true, Ordering::Release);
            crate::fs::tty::set_foreground(p.posix.pgid.load(Ordering::Acquire));
            Ok(0)
        }
        TIOCNOTTY => {
            if !ctty {
                return Err(Errno::ENOTTY);
            }
            p.posix.ctty.store(false, Ordering::Release);
            Ok(0)
        }
        TIOCGPGRP if ctty => out(&crate::fs::tty::foreground().to_le_bytes()),
        TIOCGSID if ctty => out(&p.posix.sid.load(Ordering::Acquire).to_le_bytes()),
        TIOCSPGRP if ctty => match in_u32() {
            Ok(pgrp) if (pgrp as i32) < 0 => Err(Errno::EINVAL),
            Ok(pgrp) if pgrp != p.posix.pgid.load(Ordering::Acquire) => Err(Errno::EPERM), // the only group
            Ok(pgrp) => {
                crate::fs::tty::set_foreground(pgrp);
                Ok(0)
            }
            Err(e) => Err(e),
        },
        _ => Err(Errno::ENOTTY),
    }
}

/// The console's `struct stat`: a character device 5:1, mode 0620, owned by root, on devtmpfs.
fn console_stat() -> Stat {
    let boot = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
    Stat {
        dev: 6,
        ino: 5,
        mode: S_IFCHR | 0o620,
        nlink: 1,
        rdev: encode_dev(5, 1),
        blksize: 1024,
        times: [boot; 3],
        ..Stat::default()
    }
}

/// `fstat(fd, buf)`.
pub fn fstat(p: &Process, fd: u64, buf: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    let stat = match &f.kind {
        FileKind::Text(text) => text.stat(),
        _ => crate::fs::memfd::stat(&f).unwrap_or_else(console_stat),
    };
    if copy_out(buf, &stat.to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// The descriptor a `*at` call names with an empty path and `AT_EMPTY_PATH`, or the error of a
/// path lookup on a machine without files.
fn at_target(p: &Process, dirfd: u64, path: u64, flags: u64) -> Result<(), Errno> {
    let path = read_path(path)?;
    if !path.is_empty() {
        return Err(Errno::ENOENT);
    }
    if flags & AT_EMPTY_PATH == 0 || dirfd as i32 == AT_FDCWD {
        return Err(Errno::ENOENT);
    }
    file(p, dirfd).map(|_| ())
}

/// `newfstatat(dirfd, path, buf, flags)`.
pub fn newfstatat(p: &Process, dirfd: u64, path: u64, buf: u64, flags: u64) -> Result<u64, Errno> {
    const KNOWN: u64 = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH;
    if flags & !KNOWN != 0 {
        return Err(Errno::EINVAL);
    }
    at_target(p, dirfd, path, flags)?;
    fstat(p, dirfd, buf)
}

/// `statx(dirfd, path, flags, mask, buf)`: the same facts in `struct statx`.
pub fn statx(p: &Process, dirfd: u64, path: u64, flags: u64, buf: u64) -> Result<u64, Errno> {
    const KNOWN: u64 = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH | AT_STATX_SYNC_TYPE;
    if flags & !KNOWN != 0 || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE {
        return Err(Errno::EINVAL);
    }
    at_target(p, dirfd, path, flags)?;
    let s = console_stat();
    let mut b = [0u8; 256];
    b[0..4].copy_from_slice(&STATX_BASIC_STATS.to_le_bytes());
    b[4..8].copy_from_slice(&(s.blksize as u32).to_le_bytes());
    b[16..20].copy_from_slice(&s.nlink.to_le_bytes());
    b[28..30].copy_from_slice(&(s.mode as u16).to_le_bytes());
    b[32..40].copy_from_slice(&s.ino.to_le_bytes());
    for at in [64, 96, 112] {
        // atime, ctime, mtime (btime at 80 stays 0, and its mask bit is clear)
        b[at..at + 8].copy_from_slice(&s.times[0].sec.to_le_bytes());
        b[at + 8..at + 12].copy_from_slice(&(s.times[0].nsec as u32).to_le_bytes());
    }
    b[128..132].copy_from_slice(&5u32.to_le_bytes()); // rdev 5:1
    b[132..136].copy_from_slice(&1u32.to_le_bytes());
    b[140..144].copy_from_slice(&6u32.to_le_bytes()); // dev 0:6
    if copy_out(buf, &b).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `lseek(fd, offset, whence)`: a tty cannot seek; a memfd can.
pub fn lseek(p: &Process, fd: u64, offset: u64, whence: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    match f.kind {
        FileKind::Memfd(_) => crate::fs::memfd::lseek(&f, offset, whence),
        _ => Err(Errno::ESPIPE),
    }
}

/// `faccessat`, `faccessat2`: there is no file system, so every path is missing.
pub fn no_such_path(path: u64) -> Result<u64, Errno> {
    read_path(path)?;
    Err(Errno::ENOENT)
}

/// `readlinkat(dirfd, path, buf, size)`.
pub fn readlinkat(path: u64, size: u64) -> Result<u64, Errno> {
    if size as i64 <= 0 {
        return Err(Errno::EINVAL);
    }
    no_such_path(path)
}

/// `getcwd(buf, size)`: the root; returns the length with the NUL, as the system call does.
pub fn getcwd(buf: u64, size: u64) -> Result<u64, Errno> {
    if size < 2 {
        return Err(Errno::ERANGE);
    }
    copy_out(buf, b"/\0").map(|()| 2).map_err(|_| Errno::EFAULT)
}
