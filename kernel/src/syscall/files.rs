//! Descriptors and the console: `read`, `readv`, `write`, `writev`, `close`, `dup`, `dup3`,
//! `fcntl`, `ioctl`, `fstat`, `newfstatat`, `statx`, `lseek` (`ppoll` and `pselect6`: `poll.rs`), and the
//! path calls of a machine without a file system (`openat`, `faccessat`, `readlinkat`: ENOENT;
//! `getcwd`: "/").
//!
//! Every open file is the console (`crate::fs::tty`), a character device like Linux's
//! `/dev/console` (major 5, minor 1): `isatty` holds, so C libraries line-buffer standard output.
//! A read that finds no input blocks the thread on the console's input event unless the description has
//! `O_NONBLOCK` (EAGAIN); a poll or select that finds nothing ready blocks until console input,
//! a pipe change or its deadline ([`WaitFor::Poll`]). Checks come in Linux's order: the
//! descriptor (EBADF) before the arguments, the arguments before the user memory (EFAULT). What
//! a call allocates (iovec arrays, poll entries, select bitmaps, paths, read buffers) comes from
//! `memory::fallible`: `ENOMEM`, never a panic; a plain `read`/`write` names its one buffer
//! without any heap ([`Buffers`]).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use linux_abi::fcntl::S_IFCHR;
use linux_abi::layout::{Stat, Winsize, encode_dev};
use linux_abi::termios::{TERMIOS_SIZE, Termios};
use linux_abi::time::Timespec;

use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::fallible;
use crate::process::posix::{FD_LIMIT, FdEntry, FileKind, O_APPEND, O_CLOEXEC, O_NONBLOCK, OpenFile};
use crate::process::{Action, Process};
use crate::sched::{Wait, WaitFor};
use crate::syscall::copy_in;
use crate::syscall::copy_out;
use crate::syscall::errno::*;

/// Bytes moved per read (a canonical line is at most 4096).
const READ_CHUNK: usize = 4096;
/// `UIO_MAXIOV`.
const IOV_MAX: u64 = 1024;
/// `AT_FDCWD`.
const AT_FDCWD: i64 = -100;
/// `AT_EMPTY_PATH`.
const AT_EMPTY_PATH: u64 = 0x1000;
/// Longest path read from a program (`PATH_MAX`).
const PATH_MAX: usize = 4096;

pub(crate) fn file(p: &Process, fd: u64) -> Result<Arc<OpenFile>, i64> {
    p.posix.files.lock().get(fd).map(|e| e.file.clone()).ok_or(EBADF)
}

pub(crate) fn fail(frame: &mut TrapFrame, errno: i64) -> Action {
    frame.x[0] = (-errno) as u64;
    Action::Continue
}

pub(crate) fn done(frame: &mut TrapFrame, value: i64) -> Action {
    frame.x[0] = value as u64;
    Action::Continue
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
    fn import(&self, p: &Process) -> Result<IoList, i64> {
        let (iov, count) = match *self {
            // count is a size_t; Linux clamps it to MAX_RW_COUNT rather than failing.
            Self::One(buf, count) => return Ok(IoList::One([(buf, count.min(0x7fff_f000))])),
            Self::Vector(iov, count) => (iov, count),
        };
        if count > IOV_MAX {
            return Err(EINVAL);
        }
        let mut out = Vec::new();
        fallible::reserve(&mut out, count as usize).map_err(|_| ENOMEM)?;
        let mut total: u64 = 0;
        for i in 0..count {
            let mut b = [0u8; 16];
            copy_in(p, &mut b, iov.wrapping_add(i * 16)).map_err(|_| EFAULT)?;
            let base = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
            // Linux: a negative length, or a total past SSIZE_MAX, is EINVAL.
            total = total.checked_add(len).filter(|t| *t <= i64::MAX as u64).ok_or(EINVAL)?;
            out.push((base, len)); // within the room reserved above
        }
        Ok(IoList::Many(out))
    }
}

/// The open file `fd` and the buffers of a read or write on it, in Linux's order: the
/// descriptor (EBADF) before the buffers.
fn file_and_buffers(p: &Process, fd: u64, buffers: &Buffers) -> Result<(Arc<OpenFile>, IoList), i64> {
    let f = file(p, fd)?;
    Ok((f, buffers.import(p)?))
}

/// `read(fd, buf, count)` and `readv(fd, iov, iovcnt)`: one console read scattered over the
/// buffers; blocks (restarting the call) when nothing is there.
pub fn read(p: &Process, frame: &mut TrapFrame, fd: u64, buffers: Buffers) -> Action {
    let (f, buffers) = match file_and_buffers(p, fd, &buffers) {
        Ok(both) => both,
        Err(e) => return fail(frame, e),
    };
    if let FileKind::Pipe(end) = &f.kind {
        return crate::fs::pipe::read(p, frame, &f, end, &buffers);
    }
    if let FileKind::Listing(listing) = &f.kind {
        return done(frame, crate::procfs::read(p, listing, &buffers));
    }
    if let FileKind::Memfd(_) = &f.kind {
        return done(frame, crate::fs::memfd::read(&f, p, &buffers));
    }
    let total = buffers.iter().map(|b| b.1).sum::<u64>().min(READ_CHUNK as u64) as usize;
    if total == 0 {
        return done(frame, 0);
    }
    let Ok(mut data) = fallible::zeroed::<u8>(total) else { return fail(frame, ENOMEM) };
    // Read before the look: input that arrives after it restarts the call (`sched::notify`).
    let generation = crate::sched::event_generation();
    let Some(n) = crate::fs::tty::read(&mut data) else {
        if f.flags.load(Ordering::Relaxed) & O_NONBLOCK != 0 {
            return fail(frame, EAGAIN);
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
        if copy_out(p, base, &data[at..at + take]).is_err() {
            // The bytes are gone from the line discipline, as with Linux's n_tty on a fault.
            return if at == 0 { fail(frame, EFAULT) } else { done(frame, at as i64) };
        }
        at += take;
    }
    done(frame, at as i64)
}

/// `write(fd, buf, count)` and `writev(fd, iov, iovcnt)`: the bytes go to the console as they
/// are, or into a pipe (which may block; `progress` is the thread's count of what a blocked
/// pipe write already wrote).
pub fn write(p: &Process, frame: &mut TrapFrame, progress: &mut u64, fd: u64, buffers: Buffers) -> Action {
    let (f, buffers) = match file_and_buffers(p, fd, &buffers) {
        Ok(both) => both,
        Err(e) => return fail(frame, e),
    };
    if let FileKind::Pipe(end) = &f.kind {
        return crate::fs::pipe::write(p, frame, progress, &f, end, &buffers);
    }
    if let FileKind::Listing(_) = &f.kind {
        return fail(frame, crate::procfs::write_error(&f));
    }
    if let FileKind::Memfd(_) = &f.kind {
        return done(frame, crate::fs::memfd::write(&f, p, &buffers));
    }
    done(frame, write_console(p, &buffers))
}

fn write_console(p: &Process, buffers: &[(u64, u64)]) -> i64 {
    let mut chunk = [0u8; 256];
    let mut written = 0u64;
    for &(base, len) in buffers {
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(chunk.len() as u64) as usize;
            if copy_in(p, &mut chunk[..n], base.wrapping_add(off)).is_err() {
                // Linux returns what was written before the fault, EFAULT if nothing was.
                return if written == 0 { -EFAULT } else { written as i64 };
            }
            crate::fs::tty::write(&chunk[..n]);
            off += n as u64;
            written += n as u64;
        }
    }
    written as i64
}

/// `close(fd)`.
pub fn close(p: &Process, fd: u64) -> i64 {
    if p.posix.files.lock().close(fd) { 0 } else { -EBADF }
}

/// `dup(fd)`.
pub fn dup(p: &Process, fd: u64) -> i64 {
    let mut files = p.posix.files.lock();
    let Some(entry) = files.get(fd).cloned() else { return -EBADF };
    match files.install_lowest(0, FdEntry { cloexec: false, ..entry }) {
        Ok(n) => n as i64,
        Err(e) => -e,
    }
}

/// `dup3(old, new, flags)` (arm64 has no `dup2`: C libraries build it on `dup3` and `fcntl`).
pub fn dup3(p: &Process, old: u64, new: u64, flags: u64) -> i64 {
    if flags & !u64::from(O_CLOEXEC) != 0 {
        return -EINVAL;
    }
    let mut files = p.posix.files.lock();
    if old == new {
        return -EINVAL;
    }
    let Some(entry) = files.get(old).cloned() else { return -EBADF };
    if new >= FD_LIMIT as u64 {
        return -EBADF;
    }
    match files.install_at(new as usize, FdEntry { cloexec: flags != 0, ..entry }) {
        Ok(()) => new as i64,
        Err(e) => -e,
    }
}

/// `fcntl(fd, cmd, arg)`: F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL, F_SETFL.
pub fn fcntl(p: &Process, fd: u64, cmd: u64, arg: u64) -> i64 {
    const F_DUPFD: u64 = 0;
    const F_GETFD: u64 = 1;
    const F_SETFD: u64 = 2;
    const F_GETFL: u64 = 3;
    const F_SETFL: u64 = 4;
    const F_DUPFD_CLOEXEC: u64 = 1030;
    const FD_CLOEXEC: u64 = 1;
    // The status flags F_SETFL may change (Linux SETFL_MASK, less O_ASYNC/O_DIRECT/O_NOATIME,
    // which mean nothing for the console and are kept as given).
    const SETFL_MASK: u32 = O_APPEND | O_NONBLOCK | 0o20_000 | 0o40_000 | 0o1_000_000;
    let mut files = p.posix.files.lock();
    let Some(entry) = files.get_mut(fd) else { return -EBADF };
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let entry = FdEntry { cloexec: cmd == F_DUPFD_CLOEXEC, ..entry.clone() };
            if arg >= FD_LIMIT as u64 {
                return -EINVAL;
            }
            match files.install_lowest(arg as usize, entry) {
                Ok(n) => n as i64,
                Err(e) => -e,
            }
        }
        F_GETFD => i64::from(entry.cloexec),
        F_SETFD => {
            entry.cloexec = arg & FD_CLOEXEC != 0;
            0
        }
        F_GETFL => i64::from(entry.file.flags.load(Ordering::Relaxed)),
        F_SETFL => {
            let old = entry.file.flags.load(Ordering::Relaxed);
            entry.file.flags.store((old & !SETFL_MASK) | (arg as u32 & SETFL_MASK), Ordering::Relaxed);
            0
        }
        _ => -EINVAL,
    }
}

/// `ioctl(fd, request, arg)` on the console: the termios, window-size, process-group and queue
/// requests of a tty; anything else is ENOTTY, as for Linux's tty driver.
pub fn ioctl(p: &Process, fd: u64, request: u64, arg: u64) -> i64 {
    const TCGETS: u64 = 0x5401;
    const TCSETS: u64 = 0x5402;
    const TCSETSW: u64 = 0x5403;
    const TCSETSF: u64 = 0x5404;
    const TCXONC: u64 = 0x540a;
    const TCFLSH: u64 = 0x540b;
    const TIOCSCTTY: u64 = 0x540e;
    const TIOCGPGRP: u64 = 0x540f;
    const TIOCSPGRP: u64 = 0x5410;
    const TIOCOUTQ: u64 = 0x5411;
    const TIOCGWINSZ: u64 = 0x5413;
    const TIOCSWINSZ: u64 = 0x5414;
    const FIONREAD: u64 = 0x541b;
    const TIOCNOTTY: u64 = 0x5422;
    const FIONBIO: u64 = 0x5421;
    const TIOCGSID: u64 = 0x5429;
    let f = match file(p, fd) {
        Ok(f) => f,
        Err(e) => return -e,
    };
    let out = |bytes: &[u8]| if copy_out(p, arg, bytes).is_err() { -EFAULT } else { 0 };
    if let FileKind::Listing(_) = &f.kind {
        return -ENOTTY;
    }
    if let FileKind::Pipe(end) = &f.kind {
        // A pipe is no terminal: only the queue size (and FIONBIO, below) are known to it.
        return match request as u32 as u64 {
            FIONREAD => out(&(crate::fs::pipe::available(end) as u32).to_le_bytes()),
            FIONBIO => {
                let mut b = [0u8; 4];
                if copy_in(p, &mut b, arg).is_err() {
                    return -EFAULT;
                }
                if u32::from_le_bytes(b) != 0 {
                    f.flags.fetch_or(O_NONBLOCK, Ordering::Relaxed);
                } else {
                    f.flags.fetch_and(!O_NONBLOCK, Ordering::Relaxed);
                }
                0
            }
            _ => -ENOTTY,
        };
    }
    let in_u32 = || {
        let mut b = [0u8; 4];
        copy_in(p, &mut b, arg).map(|()| u32::from_le_bytes(b)).map_err(|_| EFAULT)
    };
    let ctty = p.posix.ctty.load(Ordering::Acquire);
    match request as u32 as u64 {
        TCGETS => out(&crate::fs::tty::termios().to_bytes()),
        TCSETS | TCSETSW | TCSETSF => {
            let mut b = [0u8; TERMIOS_SIZE];
            if copy_in(p, &mut b, arg).is_err() {
                return -EFAULT;
            }
            // Output is written synchronously, so TCSETSW's drain has nothing to wait for.
            crate::fs::tty::set_termios(Termios::from_bytes(b), request == TCSETSF);
            0
        }
        TIOCGWINSZ => out(&crate::fs::tty::winsize().to_bytes()),
        TIOCSWINSZ => {
            let mut b = [0u8; 8];
            if copy_in(p, &mut b, arg).is_err() {
                return -EFAULT;
            }
            crate::fs::tty::set_winsize(Winsize::from_bytes(b));
            0
        }
        FIONREAD => out(&(crate::fs::tty::available() as u32).to_le_bytes()),
        TIOCOUTQ => out(&0u32.to_le_bytes()),
        TCFLSH => {
            if arg > 2 {
                return -EINVAL;
            }
            if arg != 1 {
                crate::fs::tty::flush_input();
            }
            0
        }
        TCXONC => 0,
        FIONBIO => match in_u32() {
            Ok(on) => {
                if on != 0 {
                    f.flags.fetch_or(O_NONBLOCK, Ordering::Relaxed);
                } else {
                    f.flags.fetch_and(!O_NONBLOCK, Ordering::Relaxed);
                }
                0
            }
            Err(e) => -e,
        },
        // Job control: only for the session that made the console its controlling terminal
        // (setsid, then TIOCSCTTY), as Linux; before that a shell learns "no job control".
        TIOCSCTTY => {
            if p.posix.sid.load(Ordering::Acquire) != p.pid {
                return -EPERM;
            }
            p.posix.ctty.store(true, Ordering::Release);
            crate::fs::tty::set_foreground(p.posix.pgid.load(Ordering::Acquire));
            0
        }
        TIOCNOTTY => {
            if !ctty {
                return -ENOTTY;
            }
            p.posix.ctty.store(false, Ordering::Release);
            0
        }
        TIOCGPGRP if ctty => out(&crate::fs::tty::foreground().to_le_bytes()),
        TIOCGSID if ctty => out(&p.posix.sid.load(Ordering::Acquire).to_le_bytes()),
        TIOCSPGRP if ctty => match in_u32() {
            Ok(pgrp) if (pgrp as i32) < 0 => -EINVAL,
            Ok(pgrp) if pgrp != p.posix.pgid.load(Ordering::Acquire) => -EPERM, // the only group
            Ok(pgrp) => {
                crate::fs::tty::set_foreground(pgrp);
                0
            }
            Err(e) => -e,
        },
        _ => -ENOTTY,
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
pub fn fstat(p: &Process, fd: u64, buf: u64) -> i64 {
    let stat = match file(p, fd) {
        Ok(f) if matches!(f.kind, FileKind::Listing(_)) => crate::procfs::stat(),
        Ok(f) => crate::fs::memfd::stat(&f).unwrap_or_else(console_stat),
        Err(e) => return -e,
    };
    if copy_out(p, buf, &stat.to_bytes()).is_err() { -EFAULT } else { 0 }
}

/// Reads a NUL-terminated path; EFAULT, or ENAMETOOLONG past `PATH_MAX`.
pub(crate) fn read_path(p: &Process, addr: u64) -> Result<Vec<u8>, i64> {
    let mut path = Vec::new();
    loop {
        let mut b = [0u8; 1];
        copy_in(p, &mut b, addr.wrapping_add(path.len() as u64)).map_err(|_| EFAULT)?;
        if b[0] == 0 {
            return Ok(path);
        }
        if path.len() == PATH_MAX - 1 {
            return Err(ENAMETOOLONG);
        }
        fallible::push(&mut path, b[0]).map_err(|_| ENOMEM)?;
    }
}

/// The descriptor a `*at` call names with an empty path and `AT_EMPTY_PATH`, or the error of a
/// path lookup on a machine without files.
fn at_target(p: &Process, dirfd: u64, path: u64, flags: u64) -> Result<(), i64> {
    let path = read_path(p, path)?;
    if !path.is_empty() {
        return Err(ENOENT);
    }
    if flags & AT_EMPTY_PATH == 0 || dirfd as i64 == AT_FDCWD {
        return Err(ENOENT);
    }
    file(p, dirfd).map(|_| ())
}

/// `newfstatat(dirfd, path, buf, flags)`.
pub fn newfstatat(p: &Process, dirfd: u64, path: u64, buf: u64, flags: u64) -> i64 {
    const KNOWN: u64 = 0x100 | 0x800 | AT_EMPTY_PATH; // SYMLINK_NOFOLLOW, NO_AUTOMOUNT
    if flags & !KNOWN != 0 {
        return -EINVAL;
    }
    match at_target(p, dirfd, path, flags) {
        Ok(()) => fstat(p, dirfd, buf),
        Err(e) => -e,
    }
}

/// `statx(dirfd, path, flags, mask, buf)`: the same facts in `struct statx`.
pub fn statx(p: &Process, dirfd: u64, path: u64, flags: u64, buf: u64) -> i64 {
    const KNOWN: u64 = 0x100 | 0x800 | AT_EMPTY_PATH | 0x6000; // ... and the AT_STATX_SYNC_* bits
    if flags & !KNOWN != 0 || flags & 0x6000 == 0x6000 {
        return -EINVAL;
    }
    if let Err(e) = at_target(p, dirfd, path, flags) {
        return -e;
    }
    let s = console_stat();
    let mut b = [0u8; 256];
    const STATX_BASIC_STATS: u32 = 0x7ff;
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
    if copy_out(p, buf, &b).is_err() { -EFAULT } else { 0 }
}

/// `lseek(fd, offset, whence)`: a tty cannot seek; a memfd can.
pub fn lseek(p: &Process, fd: u64, offset: u64, whence: u64) -> i64 {
    match file(p, fd) {
        Ok(f) if matches!(f.kind, FileKind::Memfd(_)) => crate::fs::memfd::lseek(&f, offset, whence),
        Ok(_) => -ESPIPE,
        Err(e) => -e,
    }
}

/// `openat`, `faccessat`, `faccessat2`: there is no file system, so every path is missing.
pub fn no_such_path(p: &Process, path: u64) -> i64 {
    match read_path(p, path) {
        Ok(_) => -ENOENT,
        Err(e) => -e,
    }
}

/// `readlinkat(dirfd, path, buf, size)`.
pub fn readlinkat(p: &Process, path: u64, size: u64) -> i64 {
    if size as i64 <= 0 {
        return -EINVAL;
    }
    no_such_path(p, path)
}

/// `getcwd(buf, size)`: the root; returns the length with the NUL, as the system call does.
pub fn getcwd(p: &Process, buf: u64, size: u64) -> i64 {
    if size < 2 {
        return -ERANGE;
    }
    if copy_out(p, buf, b"/\0").is_err() { -EFAULT } else { 2 }
}
