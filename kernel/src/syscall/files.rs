//! Descriptors and the files behind them: `read`, `readv`, `pread64`, `preadv`, `preadv2`,
//! `write` and their kin, `close`, `close_range`, `dup`, `dup3`, `fcntl`, `ioctl`, `fstat`,
//! `lseek`, `ftruncate`, `fallocate`, `getdents64`, `fsync`, `fdatasync`, `syncfs`,
//! `sync_file_range`, and the moves between two descriptors (`sendfile`, `copy_file_range`,
//! `splice`, `tee`: `fs::splice`).
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
        Ok(IoList::Many(read_iovec(iov, count, Errno::EINVAL)?))
    }
}

/// Reads the user's array of `count` iovecs at `iov` as (base, length) pairs (Linux's
/// `import_iovec`): `too_many` for more than IOV_MAX (EINVAL for readv and writev, EMSGSIZE for
/// sendmsg and recvmsg), ENOMEM for the array, EFAULT for an unreadable one, EINVAL for a
/// negative length or a total past SSIZE_MAX.
pub(super) fn read_iovec(iov: u64, count: u64, too_many: Errno) -> Result<Vec<(u64, u64)>, Errno> {
    if count > IOV_MAX {
        return Err(too_many);
    }
    let mut out = Vec::new();
    fallible::reserve(&mut out, count as usize).map_err(|_| Errno::ENOMEM)?;
    let mut total: u64 = 0;
    for i in 0..count {
        let mut b = [0u8; 16];
        copy_in(&mut b, iov.wrapping_add(i * 16)).map_err(|_| Errno::EFAULT)?;
        let base = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
        total = total.checked_add(len).filter(|t| *t <= i64::MAX as u64).ok_or(Errno::EINVAL)?;
        out.push((base, len)); // within the room reserved above
    }
    Ok(out)
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
        At::Offset(off) => f.file.read(Io::user(&list, Offset::At(off), false, nonblock)),
        At::Position if f.file.seekable() => {
            let mut pos = f.pos.lock();
            f.file.read(Io::user(&list, Offset::Current(&mut pos), false, nonblock))
        }
        At::Position => f.file.read(Io::user(&list, Offset::At(0), false, nonblock)),
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
    let sigpipe = sigpipe_of(p);
    let append = flags & O_APPEND != 0;
    let direct = flags & O_DIRECT != 0;
    let r = match at {
        // pwrite on an O_APPEND file appends, as Linux does.
        At::Offset(off) => f.file.write(
            Io::user(&list, Offset::At(off), append, nonblock).direct(direct),
            progress,
            &sigpipe,
        ),
        At::Position if f.file.seekable() => {
            let mut pos = f.pos.lock();
            f.file.write(
                Io::user(&list, Offset::Current(&mut pos), append, nonblock).direct(direct),
                progress,
                &sigpipe,
            )
        }
        At::Position => {
            f.file.write(Io::user(&list, Offset::At(0), append, nonblock).direct(direct), progress, &sigpipe)
        }
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

/// `fallocate(fd, mode, offset, len)`, in Linux's order (`vfs_fallocate`): `EBADF` no
/// descriptor; `EINVAL` a negative offset or a length below 1; `EOPNOTSUPP` an unknown mode, a
/// hole without `FALLOC_FL_KEEP_SIZE`, or a mode tmpfs lacks (collapse, zero, insert, unshare);
/// `EBADF` not open for writing; `ESPIPE` a pipe, `EISDIR` a directory, `ENODEV` another file
/// that is not regular; `EFBIG` past the largest size. Mode 0 allocates the range (growing the
/// file unless `FALLOC_FL_KEEP_SIZE`); `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` makes the
/// range read zero (`fs::pagecache`).
pub fn fallocate(p: &Process, fd: u64, mode: u64, offset: u64, len: u64) -> Result<u64, Errno> {
    const KEEP_SIZE: u64 = 0x01;
    const PUNCH_HOLE: u64 = 0x02;
    // COLLAPSE_RANGE, ZERO_RANGE, INSERT_RANGE, UNSHARE_RANGE: Linux's other modes.
    const OTHERS: u64 = 0x08 | 0x10 | 0x20 | 0x40;
    let f = file(p, fd)?;
    if (offset as i64) < 0 || (len as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    if mode & !(KEEP_SIZE | PUNCH_HOLE | OTHERS) != 0 || (mode & PUNCH_HOLE != 0 && mode & KEEP_SIZE == 0) {
        return Err(Errno::EOPNOTSUPP);
    }
    if !f.writable() {
        return Err(Errno::EBADF);
    }
    let st = f.file.stat()?;
    match st.mode & linux_abi::fcntl::S_IFMT {
        linux_abi::fcntl::S_IFIFO => return Err(Errno::ESPIPE),
        linux_abi::fcntl::S_IFDIR => return Err(Errno::EISDIR),
        linux_abi::fcntl::S_IFREG => {}
        _ => return Err(Errno::ENODEV),
    }
    let end = offset.checked_add(len).filter(|e| *e <= i64::MAX as u64).ok_or(Errno::EFBIG)?;
    // shmem's `shmem_fallocate` knows these two only.
    let cache = f.file.pages().filter(|_| mode & OTHERS == 0).ok_or(Errno::EOPNOTSUPP)?;
    if mode & PUNCH_HOLE != 0 {
        cache.punch(offset, len);
        return Ok(0);
    }
    let old = st.size as u64;
    if mode & KEEP_SIZE == 0 && end > old {
        f.file.truncate(end)?;
    }
    if let Err(e) = cache.allocate(offset, len) {
        if end > old && mode & KEEP_SIZE == 0 {
            let _ = f.file.truncate(old); // the size is back as it was; the pages past it go
        }
        return Err(e);
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
pub fn fcntl(p: &Process, tid: u32, frame: &mut TrapFrame, fd: u64, cmd: u64, arg: u64) -> Action {
    use linux_abi::fcntl::{F_GETLK, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLK, F_SETLKW};
    // An O_PATH descriptor answers only these (Linux's `check_fcntl_cmd`): EBADF for the rest.
    let f = match file(p, fd) {
        Ok(f) => f,
        Err(e) => return done(frame, Err(e)),
    };
    if f.file.path_only() && !matches!(cmd, F_DUPFD | F_DUPFD_CLOEXEC | F_GETFD | F_SETFD | F_GETFL) {
        return done(frame, Err(Errno::EBADF));
    }
    if matches!(cmd, F_GETLK | F_SETLK | F_SETLKW | F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW) {
        return crate::fs::locks::fcntl_lock(frame, p.pid, tid, &f, cmd, arg);
    }
    done(frame, fcntl_plain(p, fd, cmd, arg))
}

fn fcntl_plain(p: &Process, fd: u64, cmd: u64, arg: u64) -> Result<u64, Errno> {
    use linux_abi::fcntl::{
        F_ADD_SEALS, F_GET_SEALS, F_GETOWN, F_GETOWN_EX, F_GETPIPE_SZ, F_GETSIG, F_SETOWN, F_SETOWN_EX,
        F_SETPIPE_SZ, F_SETSIG,
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
        F_GETOWN | F_SETOWN | F_GETOWN_EX | F_SETOWN_EX | F_GETSIG | F_SETSIG => {
            let f = entry.file.clone();
            drop(files);
            owner(&f, cmd, arg)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// The owner requests of `fcntl` on description `f` (Linux's `f_setown`, `f_getown`,
/// `f_setown_ex`, `f_getown_ex`, `F_SETSIG`, `F_GETSIG`): kept with the description.
fn owner(f: &OpenFile, cmd: u64, arg: u64) -> Result<u64, Errno> {
    use linux_abi::fcntl::{F_GETOWN, F_GETOWN_EX, F_GETSIG, F_SETOWN, F_SETOWN_EX, F_SETSIG};
    const TID: u32 = 0;
    const PID: u32 = 1;
    const PGRP: u32 = 2;
    let exists = |kind: u32, id: u32| match kind {
        _ if id == 0 => true,
        PGRP => {
            let mut found = false;
            crate::process::family::for_each_process(|q| {
                found |= q.posix.pgid.load(Ordering::Acquire) == id;
            });
            found
        }
        _ => crate::process::family::by_pid(id).is_some(),
    };
    let mut owner = f.owner.lock();
    match cmd {
        F_GETOWN => Ok(if owner.0 == PGRP {
            (owner.1 as i32).wrapping_neg() as u32 as u64
        } else {
            u64::from(owner.1)
        }),
        F_SETOWN => {
            let who = arg as i32;
            if who == i32::MIN {
                return Err(Errno::EINVAL);
            }
            let (kind, id) = if who < 0 { (PGRP, who.unsigned_abs()) } else { (PID, who as u32) };
            if !exists(kind, id) {
                return Err(Errno::ESRCH);
            }
            (owner.0, owner.1) = (kind, id);
            Ok(0)
        }
        F_GETOWN_EX => {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&owner.0.to_le_bytes());
            b[4..].copy_from_slice(&owner.1.to_le_bytes());
            copy_out(arg, &b).map(|()| 0).map_err(|_| Errno::EFAULT)
        }
        F_SETOWN_EX => {
            let mut b = [0u8; 8];
            copy_in(&mut b, arg).map_err(|_| Errno::EFAULT)?;
            let kind = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let id = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            if !matches!(kind, TID | PID | PGRP) {
                return Err(Errno::EINVAL);
            }
            if !exists(kind, id) {
                return Err(Errno::ESRCH);
            }
            (owner.0, owner.1) = (kind, id);
            Ok(0)
        }
        F_GETSIG => Ok(u64::from(owner.2)),
        F_SETSIG => {
            if arg > ::signal::num::_NSIG as u64 {
                return Err(Errno::EINVAL);
            }
            owner.2 = arg as u32;
            Ok(0)
        }
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
/// cannot be synced (a pipe, a device, `/proc`), as Linux's `vfs_fsync` without an `fsync`
/// method.
pub fn fsync(p: &Process, fd: u64) -> Result<u64, Errno> {
    let f = file(p, fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    f.file.sync().map(|()| 0)
}

/// `syncfs(fd)`: the file system of any open file (nothing to write back here): `EBADF` only.
pub fn syncfs(p: &Process, fd: u64) -> Result<u64, Errno> {
    file(p, fd).map(|_| 0)
}

/// `sync_file_range(fd, offset, nbytes, flags)`, in Linux's order: `EBADF`; `EINVAL` unknown
/// flags or a negative or wrapping range; `ESPIPE` a file that is not regular, a directory or
/// a link; then nothing to write back.
pub fn sync_file_range(p: &Process, fd: u64, offset: u64, nbytes: u64, flags: u64) -> Result<u64, Errno> {
    // SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER.
    const VALID: u64 = 0x7;
    let f = file(p, fd)?;
    let end = (offset as i64).wrapping_add(nbytes as i64);
    if flags & !VALID != 0 || (offset as i64) < 0 || end < 0 || (end as u64) < offset {
        return Err(Errno::EINVAL);
    }
    let mode = f.file.stat()?.mode & linux_abi::fcntl::S_IFMT;
    use linux_abi::fcntl::{S_IFBLK, S_IFDIR, S_IFLNK, S_IFREG};
    if ![S_IFREG, S_IFBLK, S_IFDIR, S_IFLNK].contains(&mode) {
        return Err(Errno::ESPIPE);
    }
    Ok(0)
}

/// What a move between two files decided: its count or errno, or a block on a key (`EAGAIN`
/// with `nonblock`).
fn finish_move(frame: &mut TrapFrame, generation: u32, nonblock: bool, r: Result<u64, FileError>) -> Action {
    match r {
        Ok(n) => done(frame, Ok(n)),
        Err(FileError::Errno(e)) => done(frame, Err(e)),
        Err(FileError::WouldBlock(_)) if nonblock => done(frame, Err(Errno::EAGAIN)),
        Err(FileError::WouldBlock(key)) => {
            Action::Block(Wait { what: WaitFor::Event { key, generation }, deadline: None })
        }
    }
}

/// Reads an `loff_t` argument (`EFAULT`).
fn read_offset(at: u64) -> Result<u64, Errno> {
    let mut b = [0u8; 8];
    copy_in(&mut b, at).map_err(|_| Errno::EFAULT)?;
    Ok(u64::from_le_bytes(b))
}

/// Writes an `loff_t` argument back (`EFAULT`).
fn write_offset(at: u64, value: u64) -> Result<(), Errno> {
    copy_out(at, &value.to_le_bytes()).map_err(|_| Errno::EFAULT)
}

/// Whether `f` is open on a regular file (a file's or a memfd's bytes), what Linux's
/// `splice_read` of a file and `copy_file_range` need.
fn regular(f: &OpenFile) -> Result<bool, Errno> {
    Ok(f.file.stat()?.mode & linux_abi::fcntl::S_IFMT == linux_abi::fcntl::S_IFREG)
}

/// The caller's `SIGPIPE`, for a move into a pipe without a reader.
fn sigpipe_of(p: &Process) -> impl Fn() + '_ {
    move || {
        let info = ::signal::info::SigInfo::sent(::signal::num::SIGPIPE, ::signal::num::SI_USER, p.pid, 0);
        crate::process::signals::send_to_process(p, info);
    }
}

/// `EPIPE` from a pipe sends `SIGPIPE` first, as a `write` would.
fn pipe_error(r: Result<u64, FileError>, sigpipe: &dyn Fn()) -> Result<u64, FileError> {
    if r == Err(FileError::Errno(Errno::EPIPE)) {
        sigpipe();
    }
    r
}

/// `sendfile(out_fd, in_fd, offset, count)`, in Linux's order (`do_sendfile`): the input
/// (`EBADF`, not readable `EBADF`; with `offset`, `ESPIPE` for one without positions; `EINVAL`
/// a negative offset); the output (`EBADF`, not writable `EBADF`); an input that is no regular
/// file (`EINVAL`); an appending output (`EINVAL`). Moves up to `count` bytes (at most
/// `MAX_RW_COUNT`) from `*offset` (left in place: the input's position does not move) or the
/// input's position (which advances), to the output's position or into the pipe it is.
pub fn sendfile(
    p: &Process,
    frame: &mut TrapFrame,
    out_fd: u64,
    in_fd: u64,
    offset: u64,
    count: u64,
) -> Action {
    use crate::fs::{pipe, splice};
    let generation = crate::sched::event_generation();
    let sigpipe = sigpipe_of(p);
    let mut nonblock = false;
    let r = (|| -> Result<u64, FileError> {
        let input = file(p, in_fd)?;
        if !input.readable() {
            return Err(Errno::EBADF.into());
        }
        let mut pos = if offset != 0 {
            let pos = read_offset(offset)?;
            if !input.file.seekable() {
                return Err(Errno::ESPIPE.into());
            }
            pos
        } else {
            *input.pos.lock()
        };
        if (pos as i64) < 0 {
            return Err(Errno::EINVAL.into());
        }
        let output = file(p, out_fd)?;
        if !output.writable() {
            return Err(Errno::EBADF.into());
        }
        if !regular(&input)? {
            return Err(Errno::EINVAL.into());
        }
        let count = count.min(splice::MAX_COUNT);
        let moved = match pipe::pipe_of(&*output.file) {
            Some(to) => {
                nonblock = output.flags() & O_NONBLOCK != 0;
                pipe_error(splice::file_to_pipe(&*input.file, &mut pos, to, count), &sigpipe)?
            }
            None => {
                if output.flags() & O_APPEND != 0 {
                    return Err(Errno::EINVAL.into());
                }
                // Positions are copied out and back: input and output may be one description.
                let mut out_pos = *output.pos.lock();
                let n = splice::file_to_file(
                    &*input.file,
                    &mut pos,
                    &*output.file,
                    &mut out_pos,
                    count,
                    &sigpipe,
                )?;
                *output.pos.lock() = out_pos;
                n
            }
        };
        if offset != 0 {
            write_offset(offset, pos)?;
        } else {
            *input.pos.lock() = pos;
        }
        Ok(moved)
    })();
    finish_move(frame, generation, nonblock, r)
}

/// `copy_file_range(fd_in, off_in, fd_out, off_out, len, flags)`, in Linux's order: the
/// descriptors (`EBADF`); the offsets (`EFAULT`); flags (`EINVAL`: none is defined); a
/// directory (`EISDIR`); not two regular files (`EINVAL`); not readable, not writable, or an
/// appending output (`EBADF`); offsets that wrap (`EOVERFLOW`) or are negative (`EINVAL`);
/// overlapping ranges of one file (`EINVAL`). The copy stops at the input's end; each offset
/// given is advanced, else the description's position.
pub fn copy_file_range(
    p: &Process,
    fd_in: u64,
    off_in: u64,
    fd_out: u64,
    off_out: u64,
    len: u64,
    flags: u64,
) -> Result<u64, Errno> {
    use linux_abi::fcntl::{S_IFDIR, S_IFMT, S_IFREG};
    let input = file(p, fd_in)?;
    let output = file(p, fd_out)?;
    let mut pos_in = if off_in != 0 { read_offset(off_in)? } else { *input.pos.lock() };
    let mut pos_out = if off_out != 0 { read_offset(off_out)? } else { *output.pos.lock() };
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let (si, so) = (input.file.stat()?, output.file.stat()?);
    if si.mode & S_IFMT == S_IFDIR || so.mode & S_IFMT == S_IFDIR {
        return Err(Errno::EISDIR);
    }
    if si.mode & S_IFMT != S_IFREG || so.mode & S_IFMT != S_IFREG {
        return Err(Errno::EINVAL);
    }
    if !input.readable() || !output.writable() || output.flags() & O_APPEND != 0 {
        return Err(Errno::EBADF);
    }
    let len = len.min(crate::fs::splice::MAX_COUNT);
    if pos_in.checked_add(len).is_none() || pos_out.checked_add(len).is_none() {
        return Err(Errno::EOVERFLOW);
    }
    if (pos_in as i64) < 0 || (pos_out as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let size = si.size as u64;
    let len = if pos_in >= size { 0 } else { len.min(size - pos_in) };
    let same = match (input.file.inode(), output.file.inode()) {
        (Some(a), Some(b)) => vfs::node::same(a, b),
        _ => Arc::ptr_eq(&input.file, &output.file),
    };
    if same && pos_out + len > pos_in && pos_out < pos_in + len {
        return Err(Errno::EINVAL);
    }
    if len == 0 {
        return Ok(0);
    }
    let sigpipe = sigpipe_of(p);
    let n = crate::fs::splice::file_to_file(
        &*input.file,
        &mut pos_in,
        &*output.file,
        &mut pos_out,
        len,
        &sigpipe,
    )
    .map_err(|e| match e {
        FileError::Errno(e) => e,
        FileError::WouldBlock(_) => Errno::EAGAIN,
    })?;
    if off_in != 0 {
        write_offset(off_in, pos_in)?;
    } else {
        *input.pos.lock() = pos_in;
    }
    if off_out != 0 {
        write_offset(off_out, pos_out)?;
    } else {
        *output.pos.lock() = pos_out;
    }
    Ok(n)
}

/// `splice` and `tee`'s flags (`SPLICE_F_MOVE`, `_NONBLOCK`, `_MORE`, `_GIFT`).
const SPLICE_F_ALL: u64 = 0xf;
/// `SPLICE_F_NONBLOCK`.
const SPLICE_F_NONBLOCK: u64 = 0x2;

/// `splice(fd_in, off_in, fd_out, off_out, len, flags)`, in Linux's order (`__do_splice`,
/// `do_splice`): nothing for `len` 0; unknown flags (`EINVAL`); the descriptors (`EBADF`); an
/// offset for a pipe (`ESPIPE`); the offsets (`EFAULT`); not readable or not writable
/// (`EBADF`); then pipe to pipe (one pipe to itself: `EINVAL`), pipe to file (an offset for a
/// file without positions, an appending output: `EINVAL`), or file to pipe; neither end a pipe
/// is `EINVAL`. Waits while the input pipe is empty or the output pipe full, unless
/// `SPLICE_F_NONBLOCK` or the pipe's `O_NONBLOCK` (`EAGAIN`).
pub fn splice(p: &Process, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    use crate::fs::{pipe, splice};
    let [fd_in, off_in, fd_out, off_out, len, flags] = a;
    let generation = crate::sched::event_generation();
    let sigpipe = sigpipe_of(p);
    let mut nonblock = flags & SPLICE_F_NONBLOCK != 0;
    let r = (|| -> Result<u64, FileError> {
        if len == 0 {
            return Ok(0);
        }
        if flags & !SPLICE_F_ALL != 0 {
            return Err(Errno::EINVAL.into());
        }
        let (input, output) = (file(p, fd_in)?, file(p, fd_out)?);
        let (ipipe, opipe) = (pipe::pipe_of(&*input.file), pipe::pipe_of(&*output.file));
        if (ipipe.is_some() && off_in != 0) || (opipe.is_some() && off_out != 0) {
            return Err(Errno::ESPIPE.into());
        }
        let given_in = if off_in != 0 { Some(read_offset(off_in)?) } else { None };
        let given_out = if off_out != 0 { Some(read_offset(off_out)?) } else { None };
        if !input.readable() || !output.writable() {
            return Err(Errno::EBADF.into());
        }
        let len = len.min(splice::MAX_COUNT);
        match (ipipe, opipe) {
            (Some(from), Some(to)) => {
                nonblock |= (input.flags() | output.flags()) & O_NONBLOCK != 0;
                pipe_error(pipe::pipe_to_pipe(from, to, len, true), &sigpipe)
            }
            (Some(from), None) => {
                if given_out.is_some() && !output.file.seekable() {
                    return Err(Errno::EINVAL.into());
                }
                if output.flags() & O_APPEND != 0 {
                    return Err(Errno::EINVAL.into());
                }
                nonblock |= input.flags() & O_NONBLOCK != 0;
                let mut pos = given_out.unwrap_or_else(|| *output.pos.lock());
                let n = splice::pipe_to_file(from, &*output.file, &mut pos, false, len, &sigpipe)?;
                match given_out {
                    Some(_) => write_offset(off_out, pos)?,
                    None => *output.pos.lock() = pos,
                }
                Ok(n)
            }
            (None, Some(to)) => {
                if given_in.is_some() && !input.file.seekable() {
                    return Err(Errno::EINVAL.into());
                }
                if !regular(&input)? {
                    return Err(Errno::EINVAL.into());
                }
                nonblock |= output.flags() & O_NONBLOCK != 0;
                let mut pos = given_in.unwrap_or_else(|| *input.pos.lock());
                let n = pipe_error(splice::file_to_pipe(&*input.file, &mut pos, to, len), &sigpipe)?;
                match given_in {
                    Some(_) => write_offset(off_in, pos)?,
                    None => *input.pos.lock() = pos,
                }
                Ok(n)
            }
            (None, None) => Err(Errno::EINVAL.into()),
        }
    })();
    finish_move(frame, generation, nonblock, r)
}

/// `tee(fd_in, fd_out, len, flags)`: copies up to `len` bytes from one pipe to another, leaving
/// them in the first (Linux's `do_tee`): unknown flags (`EINVAL`); nothing for `len` 0; the
/// descriptors (`EBADF`, and not readable or not writable `EBADF`); anything but two different
/// pipes (`EINVAL`). Waits as `splice` does.
pub fn tee(p: &Process, frame: &mut TrapFrame, fd_in: u64, fd_out: u64, len: u64, flags: u64) -> Action {
    use crate::fs::pipe;
    let generation = crate::sched::event_generation();
    let sigpipe = sigpipe_of(p);
    let mut nonblock = flags & SPLICE_F_NONBLOCK != 0;
    let r = (|| -> Result<u64, FileError> {
        if flags & !SPLICE_F_ALL != 0 {
            return Err(Errno::EINVAL.into());
        }
        if len == 0 {
            return Ok(0);
        }
        let (input, output) = (file(p, fd_in)?, file(p, fd_out)?);
        if !input.readable() || !output.writable() {
            return Err(Errno::EBADF.into());
        }
        match (pipe::pipe_of(&*input.file), pipe::pipe_of(&*output.file)) {
            (Some(from), Some(to)) if !Arc::ptr_eq(from, to) => {
                nonblock |= (input.flags() | output.flags()) & O_NONBLOCK != 0;
                pipe_error(
                    pipe::pipe_to_pipe(from, to, len.min(crate::fs::splice::MAX_COUNT), false),
                    &sigpipe,
                )
            }
            _ => Err(Errno::EINVAL.into()),
        }
    })();
    finish_move(frame, generation, nonblock, r)
}
