//! The calls that name files by path: `openat`, `openat2`, `mkdirat`, `mknodat`, `unlinkat`,
//! `renameat`, `renameat2`, `linkat`, `symlinkat`, `readlinkat`, `newfstatat`, `statx`,
//! `faccessat`, `faccessat2`, `chdir`, `fchdir`, `chroot`, `getcwd`, `umask`, `fchmod`,
//! `fchmodat`, `fchown`, `fchownat`, `utimensat`, `truncate`, `statfs`, `fstatfs`, `mount`,
//! `umount2`, `sync`, `syncfs`.
//!
//! A path is read from user memory (`EFAULT`, `ENAMETOOLONG`), then walked by `fs::namespace`
//! from the process's root (absolute), its working directory (`AT_FDCWD`) or a descriptor's
//! directory (`EBADF` if not open, `ENOTDIR` if not a directory: only for a relative path, as
//! on Linux). Every program runs as root: permission bits are kept and reported, and refuse
//! nothing but execution (`fs::namespace`).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{
    AT_EACCESS, AT_EMPTY_PATH, AT_FDCWD, AT_NO_AUTOMOUNT, AT_REMOVEDIR, AT_STATX_SYNC_TYPE,
    AT_SYMLINK_FOLLOW, AT_SYMLINK_NOFOLLOW, O_CLOEXEC, O_CREAT, O_LARGEFILE, O_NOCTTY, O_PATH, O_TRUNC,
    S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT, S_IFREG, S_IFSOCK, STATX_BASIC_STATS,
};
use linux_abi::layout::Stat;
use linux_abi::time::Timespec;
use vfs::node::{Creator, FileType, Inode, NewNode, TimeChange};

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::{FdEntry, OpenFile};
use crate::fs::namespace::{self, FsContext, Opened};
use crate::fs::node_file::{now, stat_of};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out, read_path};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

/// Where a `*at` call's relative path starts: the process's context, the start directory and
/// its path.
struct Start {
    ctx: FsContext,
    dir: Arc<dyn Inode>,
    dir_path: Vec<u8>,
}

/// The start of a walk of `path` from `dirfd`.
fn start(p: &Process, dirfd: u64, path: &[u8]) -> Result<Start, Errno> {
    let ctx = p.posix.fs.lock().clone();
    if vfs::path::is_absolute(path) {
        return Ok(Start { dir: ctx.root.clone(), dir_path: crate::fs::copy_bytes(b"/")?, ctx });
    }
    if dirfd as i32 == AT_FDCWD {
        let dir_path = crate::fs::copy_bytes(&ctx.cwd_path)?;
        return Ok(Start { dir: ctx.cwd.clone(), dir_path, ctx });
    }
    let f = p.posix.files.lock().file(dirfd)?;
    let node = f.file.inode().cloned().ok_or(Errno::ENOTDIR)?;
    if node.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    Ok(Start { dir: node, dir_path: f.file.describe()?, ctx })
}

/// The node `path` names from `dirfd` (`follow`: the last link too). An empty path with
/// `AT_EMPTY_PATH` is `dirfd`'s own node (`EBADF`-free files without one, such as pipes, have
/// none: the caller uses the file itself).
fn node_at(p: &Process, dirfd: u64, path: &[u8], follow: bool) -> Result<Arc<dyn Inode>, Errno> {
    let s = start(p, dirfd, path)?;
    namespace::lookup(&s.ctx, &s.dir, path, follow)
}

/// Reads the path argument.
fn path_arg(addr: u64) -> Result<Vec<u8>, Errno> {
    read_path(addr)
}

/// What a `*at` call with `flags` acts on: a node, or (empty path with `AT_EMPTY_PATH`) the open
/// file `dirfd`.
enum Target {
    Node(Arc<dyn Inode>),
    File(Arc<OpenFile>),
}

fn target(p: &Process, dirfd: u64, path: &[u8], flags: u64, follow: bool) -> Result<Target, Errno> {
    if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
        if dirfd as i32 == AT_FDCWD {
            return Ok(Target::Node(p.posix.fs.lock().cwd.clone()));
        }
        return Ok(Target::File(p.posix.files.lock().file(dirfd)?));
    }
    let node = node_at(p, dirfd, path, follow)?;
    if follow && node.is_magic_link() {
        let file = namespace::reopen(&node)?;
        let open = fallible::arc(OpenFile::new(file, 0)).map_err(|_| Errno::ENOMEM)?;
        return Ok(Target::File(open));
    }
    Ok(Target::Node(node))
}

impl Target {
    fn stat(&self) -> Result<Stat, Errno> {
        match self {
            Self::Node(n) => Ok(stat_of(n)),
            Self::File(f) => f.file.stat(),
        }
    }

    fn node(&self) -> Option<Arc<dyn Inode>> {
        match self {
            Self::Node(n) => Some(n.clone()),
            Self::File(f) => f.file.inode().cloned(),
        }
    }
}

/// `openat(dirfd, path, flags, mode)`: a new descriptor on what `path` names (`fs::namespace`
/// opens it); a FIFO open that must wait for the other side blocks and restarts.
pub fn openat(
    p: &Process,
    frame: &mut TrapFrame,
    tid: u32,
    dirfd: u64,
    path: u64,
    flags: u64,
    mode: u64,
) -> Action {
    let generation = crate::sched::event_generation();
    finish_open(frame, generation, open_file(p, tid, dirfd, path, flags as u32, mode as u32))
}

fn finish_open(frame: &mut TrapFrame, generation: u32, r: Result<OpenResult, Errno>) -> Action {
    match r {
        Ok(OpenResult::Fd(fd)) => Action::reply(frame, Ok(fd)),
        Ok(OpenResult::Wait(key)) => {
            Action::Block(Wait { what: WaitFor::Event { key, generation }, deadline: None })
        }
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// `openat2(dirfd, path, how, size)`: `struct open_how` (flags, mode, resolve), checked strictly
/// as Linux does (`EINVAL` for unknown flags, a mode without `O_CREAT`, unknown `resolve` bits;
/// `E2BIG` for a larger struct with non-zero tail). The `RESOLVE_*` restrictions are accepted
/// and not enforced beyond `RESOLVE_NO_SYMLINKS` on the last component.
pub fn openat2(
    p: &Process,
    frame: &mut TrapFrame,
    tid: u32,
    dirfd: u64,
    path: u64,
    how: u64,
    size: u64,
) -> Action {
    let generation = crate::sched::event_generation();
    let r = (|| {
        if size < 24 {
            return Err(Errno::EINVAL);
        }
        if size > 4096 {
            return Err(Errno::E2BIG);
        }
        let mut b = [0u8; 24];
        copy_in(&mut b, how).map_err(|_| Errno::EFAULT)?;
        let mut tail = [0u8; 64];
        let mut at = 24;
        while at < size {
            let n = ((size - at) as usize).min(64);
            copy_in(&mut tail[..n], how + at).map_err(|_| Errno::EFAULT)?;
            if tail[..n].iter().any(|&x| x != 0) {
                return Err(Errno::E2BIG);
            }
            at += n as u64;
        }
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let (flags, mode, resolve) = (word(0), word(1), word(2));
        const VALID: u64 = 0o37777703 | 0o20000000 | 0o40000000 | 0o10000000;
        if flags & !VALID != 0 || flags >> 32 != 0 {
            return Err(Errno::EINVAL);
        }
        if mode & !0o7777 != 0
            || (mode != 0 && flags & u64::from(O_CREAT) == 0 && flags & 0o20200000 != 0o20200000)
        {
            return Err(Errno::EINVAL);
        }
        if resolve & !0x3f != 0 {
            return Err(Errno::EINVAL);
        }
        let mut flags = flags as u32;
        if resolve & 0x04 != 0 {
            // RESOLVE_NO_SYMLINKS: at least the last component.
            flags |= linux_abi::fcntl::O_NOFOLLOW;
        }
        open_file(p, tid, dirfd, path, flags, mode as u32)
    })();
    finish_open(frame, generation, r)
}

/// What an open did.
pub enum OpenResult {
    /// The new descriptor.
    Fd(u64),
    /// Wait on this key and restart.
    Wait(usize),
}

/// Opens `path` from `dirfd` with `flags` and `mode` and installs the descriptor.
///
/// # Errors
/// As `fs::namespace::open`, `EFAULT`, `EMFILE`, `ENOMEM`.
pub fn open_file(
    p: &Process,
    tid: u32,
    dirfd: u64,
    path: u64,
    flags: u32,
    mode: u32,
) -> Result<OpenResult, Errno> {
    let path = path_arg(path)?;
    let s = start(p, dirfd, &path)?;
    // Find a descriptor first, as Linux's `get_unused_fd_flags` does: `EMFILE` before the walk.
    {
        let files = p.posix.files.lock();
        if files.numbers().count() >= files.limit() {
            return Err(Errno::EMFILE);
        }
    }
    let file = match namespace::open(&s.ctx, &s.dir, &s.dir_path, &path, flags, mode, tid)? {
        Opened::File(f) => f,
        Opened::Wait(key) => return Ok(OpenResult::Wait(key)),
    };
    let status = if flags & O_PATH != 0 {
        O_PATH | (flags & linux_abi::fcntl::O_DIRECTORY) | (flags & linux_abi::fcntl::O_NOFOLLOW)
    } else {
        // Linux keeps the access mode and status flags; `O_CREAT`, `O_EXCL`, `O_NOCTTY` and
        // `O_TRUNC` are for the open only; every open is large-file on 64-bit.
        (flags & !(O_CREAT | linux_abi::fcntl::O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) | O_LARGEFILE
    };
    let open = fallible::arc(OpenFile::new(file, status)).map_err(|_| Errno::ENOMEM)?;
    let cloexec = flags & O_CLOEXEC != 0;
    let fd = p.posix.files.lock().install_lowest(0, FdEntry { file: open, cloexec })?;
    Ok(OpenResult::Fd(fd as u64))
}

fn creator() -> Creator {
    Creator { uid: 0, gid: 0, now: now() }
}

/// The parent directory and last name of `path` for a call that makes or removes a name.
fn parent_of(p: &Process, dirfd: u64, path: &[u8]) -> Result<(FsContext, vfs::namei::Parent), Errno> {
    let s = start(p, dirfd, path)?;
    let parent = namespace::lookup_parent(&s.ctx, &s.dir, path)?;
    Ok((s.ctx, parent))
}

/// `mkdirat(dirfd, path, mode)`: permissions `mode & ~umask`.
pub fn mkdirat(p: &Process, dirfd: u64, path: u64, mode: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let (ctx, parent) = parent_of(p, dirfd, &path)?;
    let name = parent.name.as_deref().ok_or(Errno::EEXIST)?;
    if name == b"." || name == b".." {
        return Err(Errno::EEXIST);
    }
    parent.dir.create(name, NewNode::Directory, mode as u32 & 0o7777 & !ctx.umask, creator())?;
    Ok(0)
}

/// `mknodat(dirfd, path, mode, dev)`: a regular file (type 0 or `S_IFREG`), FIFO, socket or
/// device node; `EPERM` for a directory, `EINVAL` for an unknown type.
pub fn mknodat(p: &Process, dirfd: u64, path: u64, mode: u64, dev: u64) -> Result<u64, Errno> {
    let mode = mode as u32;
    let node = match mode & S_IFMT {
        0 | S_IFREG => NewNode::File,
        S_IFIFO => NewNode::Fifo,
        S_IFSOCK => NewNode::Socket,
        S_IFCHR => NewNode::CharDevice(dev_arg(dev)),
        S_IFBLK => NewNode::BlockDevice(dev_arg(dev)),
        S_IFDIR => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    };
    let path = path_arg(path)?;
    let (ctx, parent) = parent_of(p, dirfd, &path)?;
    let name = parent.name.as_deref().ok_or(Errno::EEXIST)?;
    if name == b"." || name == b".." || parent.trailing_slash {
        return Err(Errno::EEXIST);
    }
    parent.dir.create(name, node, mode & 0o7777 & !ctx.umask, creator())?;
    Ok(0)
}

/// A device number from `mknod`'s 32-bit encoding (Linux's `new_decode_dev`) in `st_rdev`'s.
fn dev_arg(dev: u64) -> u64 {
    let dev = dev as u32;
    let major = (dev & 0xfff00) >> 8;
    let minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    linux_abi::layout::encode_dev(major, minor)
}

/// `unlinkat(dirfd, path, flags)`: a name (`unlink`) or an empty directory (`AT_REMOVEDIR`).
pub fn unlinkat(p: &Process, dirfd: u64, path: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    let dir = flags & AT_REMOVEDIR != 0;
    let path = path_arg(path)?;
    let (_, parent) = parent_of(p, dirfd, &path)?;
    let Some(name) = parent.name.as_deref() else {
        return Err(if dir { Errno::EBUSY } else { Errno::EISDIR });
    };
    match name {
        b"." if dir => return Err(Errno::EINVAL),
        b".." if dir => return Err(Errno::ENOTEMPTY),
        b"." | b".." => return Err(Errno::EISDIR),
        _ => {}
    }
    let node = parent.dir.lookup(name)?;
    let kind = node.metadata().kind;
    if dir && namespace::is_mount_point(&node) {
        return Err(Errno::EBUSY);
    }
    if !dir && parent.trailing_slash {
        return Err(if kind == FileType::Directory { Errno::EISDIR } else { Errno::ENOTDIR });
    }
    parent.dir.unlink(name, dir, now())?;
    Ok(0)
}

/// `renameat2(olddirfd, old, newdirfd, new, flags)` (`renameat` is flags 0).
pub fn renameat2(
    p: &Process,
    olddirfd: u64,
    old: u64,
    newdirfd: u64,
    new: u64,
    flags: u64,
) -> Result<u64, Errno> {
    use linux_abi::fcntl::{RENAME_EXCHANGE, RENAME_NOREPLACE, RENAME_WHITEOUT};
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) != 0
        || (flags & RENAME_EXCHANGE != 0 && flags & (RENAME_NOREPLACE | RENAME_WHITEOUT) != 0)
    {
        return Err(Errno::EINVAL);
    }
    if flags & RENAME_WHITEOUT != 0 {
        return Err(Errno::EINVAL);
    }
    let old = path_arg(old)?;
    let new = path_arg(new)?;
    let (_, from) = parent_of(p, olddirfd, &old)?;
    let (_, to) = parent_of(p, newdirfd, &new)?;
    let (Some(old_name), Some(new_name)) = (from.name.as_deref(), to.name.as_deref()) else {
        return Err(Errno::EBUSY);
    };
    if matches!(old_name, b"." | b"..") || matches!(new_name, b"." | b"..") {
        return Err(Errno::EBUSY);
    }
    let moving = from.dir.lookup(old_name)?;
    if namespace::is_mount_point(&moving) {
        return Err(Errno::EBUSY);
    }
    if (from.trailing_slash || to.trailing_slash) && moving.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    from.dir.rename(old_name, &to.dir, new_name, flags, now())?;
    Ok(0)
}

/// `linkat(olddirfd, old, newdirfd, new, flags)`: a new name for a non-directory
/// (`AT_SYMLINK_FOLLOW`: of a link's target; `AT_EMPTY_PATH`: of `olddirfd`'s file).
pub fn linkat(
    p: &Process,
    olddirfd: u64,
    old: u64,
    newdirfd: u64,
    new: u64,
    flags: u64,
) -> Result<u64, Errno> {
    if flags & !(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let old = path_arg(old)?;
    let target =
        target(p, olddirfd, &old, flags, flags & AT_SYMLINK_FOLLOW != 0)?.node().ok_or(Errno::EXDEV)?;
    if target.metadata().kind == FileType::Directory {
        return Err(Errno::EPERM);
    }
    let new = path_arg(new)?;
    let (_, to) = parent_of(p, newdirfd, &new)?;
    let name = to.name.as_deref().ok_or(Errno::EEXIST)?;
    if matches!(name, b"." | b"..") {
        return Err(Errno::EEXIST);
    }
    if to.trailing_slash {
        return Err(if to.dir.lookup(name).is_ok() { Errno::EEXIST } else { Errno::ENOENT });
    }
    to.dir.link(name, &target, now())?;
    Ok(0)
}

/// `symlinkat(target, newdirfd, linkpath)`.
pub fn symlinkat(p: &Process, target: u64, newdirfd: u64, linkpath: u64) -> Result<u64, Errno> {
    let target = path_arg(target)?;
    let path = path_arg(linkpath)?;
    let (_, parent) = parent_of(p, newdirfd, &path)?;
    let name = parent.name.as_deref().ok_or(Errno::EEXIST)?;
    if matches!(name, b"." | b"..") {
        return Err(Errno::EEXIST);
    }
    if parent.trailing_slash {
        return Err(if parent.dir.lookup(name).is_ok() { Errno::EEXIST } else { Errno::ENOENT });
    }
    parent.dir.create(name, NewNode::Symlink(&target), 0o777, creator())?;
    Ok(0)
}

/// `readlinkat(dirfd, path, buf, size)`: a link's target, not NUL-terminated, cut to `size`.
pub fn readlinkat(p: &Process, dirfd: u64, path: u64, buf: u64, size: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    if (size as i64) <= 0 {
        return Err(Errno::EINVAL);
    }
    let text = if path.is_empty() {
        // An empty path names `dirfd` itself: a link opened with O_PATH | O_NOFOLLOW.
        let f = p.posix.files.lock().file(dirfd)?;
        let node = f.file.inode().cloned().ok_or(Errno::ENOENT)?;
        node.readlink()?
    } else {
        let node = node_at(p, dirfd, &path, false)?;
        if node.metadata().kind != FileType::Symlink {
            return Err(Errno::EINVAL);
        }
        node.readlink()?
    };
    let n = text.len().min(usize::try_from(size).unwrap_or(usize::MAX));
    copy_out(buf, &text[..n]).map_err(|_| Errno::EFAULT)?;
    Ok(n as u64)
}

/// `newfstatat(dirfd, path, buf, flags)`.
pub fn newfstatat(p: &Process, dirfd: u64, path: u64, buf: u64, flags: u64) -> Result<u64, Errno> {
    const KNOWN: u64 = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH;
    if flags & !KNOWN != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let stat = target(p, dirfd, &path, flags, flags & AT_SYMLINK_NOFOLLOW == 0)?.stat()?;
    copy_out(buf, &stat.to_bytes()).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// Linux's `MAJOR`/`MINOR` of a `st_dev`-style number (`new_decode_dev` of 64 bits).
fn major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// `statx(dirfd, path, flags, mask, buf)`: the basic facts in `struct statx`.
pub fn statx(p: &Process, dirfd: u64, path: u64, flags: u64, mask: u64, buf: u64) -> Result<u64, Errno> {
    const KNOWN: u64 = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH | AT_STATX_SYNC_TYPE;
    if flags & !KNOWN != 0 || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE {
        return Err(Errno::EINVAL);
    }
    // STATX__RESERVED.
    if mask & 0x8000_0000 != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let s = target(p, dirfd, &path, flags, flags & AT_SYMLINK_NOFOLLOW == 0)?.stat()?;
    let mut b = [0u8; 256];
    b[0..4].copy_from_slice(&STATX_BASIC_STATS.to_le_bytes());
    b[4..8].copy_from_slice(&(s.blksize as u32).to_le_bytes());
    b[16..20].copy_from_slice(&s.nlink.to_le_bytes());
    b[20..24].copy_from_slice(&s.uid.to_le_bytes());
    b[24..28].copy_from_slice(&s.gid.to_le_bytes());
    b[28..30].copy_from_slice(&(s.mode as u16).to_le_bytes());
    b[32..40].copy_from_slice(&s.ino.to_le_bytes());
    b[40..48].copy_from_slice(&(s.size as u64).to_le_bytes());
    b[48..56].copy_from_slice(&(s.blocks as u64).to_le_bytes());
    // atime, ctime, mtime (btime at 80 stays 0, and its mask bit is clear)
    for (at, t) in [(64, s.times[0]), (96, s.times[2]), (112, s.times[1])] {
        b[at..at + 8].copy_from_slice(&t.sec.to_le_bytes());
        b[at + 8..at + 12].copy_from_slice(&(t.nsec as u32).to_le_bytes());
    }
    let (rmaj, rmin) = major_minor(s.rdev);
    let (dmaj, dmin) = major_minor(s.dev);
    b[128..132].copy_from_slice(&rmaj.to_le_bytes());
    b[132..136].copy_from_slice(&rmin.to_le_bytes());
    b[136..140].copy_from_slice(&dmaj.to_le_bytes());
    b[140..144].copy_from_slice(&dmin.to_le_bytes());
    copy_out(buf, &b).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `faccessat(dirfd, path, mode)` and `faccessat2(..., flags)`: as root, a file that exists is
/// readable and writable; executable when some execute bit is set (or it is a directory).
pub fn faccessat(p: &Process, dirfd: u64, path: u64, mode: u64, flags: u64) -> Result<u64, Errno> {
    if mode & !7 != 0 || flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let s = target(p, dirfd, &path, flags, flags & AT_SYMLINK_NOFOLLOW == 0)?.stat()?;
    if mode & linux_abi::fcntl::X_OK != 0 && s.mode & S_IFMT != S_IFDIR && s.mode & 0o111 == 0 {
        return Err(Errno::EACCES);
    }
    Ok(0)
}

/// `chdir(path)`.
pub fn chdir(p: &Process, path: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    set_cwd(p, node)
}

/// `fchdir(fd)`.
pub fn fchdir(p: &Process, fd: u64) -> Result<u64, Errno> {
    let f = p.posix.files.lock().file(fd)?;
    let node = f.file.inode().cloned().ok_or(Errno::ENOTDIR)?;
    set_cwd(p, node)
}

fn set_cwd(p: &Process, node: Arc<dyn Inode>) -> Result<u64, Errno> {
    if node.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    let ctx = p.posix.fs.lock().clone();
    let path = namespace::path_of_dir(&ctx, &node)?;
    let mut fs = p.posix.fs.lock();
    fs.cwd = node;
    fs.cwd_path = path;
    Ok(0)
}

/// `chroot(path)`: the process's root becomes that directory (root may).
pub fn chroot(p: &Process, path: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    if node.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    p.posix.fs.lock().root = node;
    Ok(0)
}

/// `getcwd(buf, size)`: the working directory's path with its NUL; `ERANGE` when it does not
/// fit, `ENOENT` when the directory was removed.
pub fn getcwd(p: &Process, buf: u64, size: u64) -> Result<u64, Errno> {
    let ctx = p.posix.fs.lock().clone();
    let mut path = namespace::path_of_dir(&ctx, &ctx.cwd)?;
    path.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
    path.push(0);
    if (path.len() as u64) > size {
        return Err(Errno::ERANGE);
    }
    copy_out(buf, &path).map_err(|_| Errno::EFAULT)?;
    Ok(path.len() as u64)
}

/// `umask(mask)`: the old mask.
pub fn umask(p: &Process, mask: u64) -> Result<u64, Errno> {
    let mut fs = p.posix.fs.lock();
    let old = fs.umask;
    fs.umask = mask as u32 & 0o777;
    Ok(u64::from(old))
}

/// The node of descriptor `fd` for `fchmod`/`fchown` (`EBADF` for an `O_PATH` one).
fn fd_node(p: &Process, fd: u64) -> Result<Option<Arc<dyn Inode>>, Errno> {
    let f = p.posix.files.lock().file(fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    Ok(f.file.inode().cloned())
}

/// `fchmod(fd, mode)`.
pub fn fchmod(p: &Process, fd: u64, mode: u64) -> Result<u64, Errno> {
    match fd_node(p, fd)? {
        Some(node) => node.set_perm(mode as u32 & 0o7777, now()).map(|()| 0),
        // A pipe or socket has an inode of its own on Linux; nothing here keeps its mode.
        None => Ok(0),
    }
}

/// `fchmodat(dirfd, path, mode)`.
pub fn fchmodat(p: &Process, dirfd: u64, path: u64, mode: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, dirfd, &path, true)?;
    node.set_perm(mode as u32 & 0o7777, now()).map(|()| 0)
}

fn owner_arg(id: u64) -> Option<u32> {
    (id as u32 != u32::MAX).then_some(id as u32)
}

/// Changes `node`'s owner and group (`None`: unchanged), as Linux's `chown_ok` and `chgrp_ok`
/// allow it to root (uid and gid 0): without `CAP_CHOWN` (which `capset` may drop) only on a
/// file root owns, to the same owner and to group 0 or the same group.
fn chown(p: &Process, node: &Arc<dyn Inode>, uid: Option<u32>, gid: Option<u32>) -> Result<u64, Errno> {
    let m = node.metadata();
    let own = m.uid == 0;
    let needs_cap =
        uid.is_some_and(|u| !own || u != m.uid) || gid.is_some_and(|g| !own || (g != 0 && g != m.gid));
    if needs_cap && !crate::process::caps::capable(p, crate::process::caps::CAP_CHOWN) {
        return Err(Errno::EPERM);
    }
    node.set_owner(uid, gid, now()).map(|()| 0)
}

/// `fchown(fd, uid, gid)` (-1: unchanged).
pub fn fchown(p: &Process, fd: u64, uid: u64, gid: u64) -> Result<u64, Errno> {
    match fd_node(p, fd)? {
        Some(node) => chown(p, &node, owner_arg(uid), owner_arg(gid)),
        None => Ok(0),
    }
}

/// `fchownat(dirfd, path, uid, gid, flags)`.
pub fn fchownat(p: &Process, dirfd: u64, path: u64, uid: u64, gid: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let node =
        target(p, dirfd, &path, flags, flags & AT_SYMLINK_NOFOLLOW == 0)?.node().ok_or(Errno::EPERM)?;
    chown(p, &node, owner_arg(uid), owner_arg(gid))
}

/// `utimensat(dirfd, path, times, flags)`: `times` null sets both to now; `UTIME_NOW` and
/// `UTIME_OMIT` per field; a null `path` names `dirfd` itself (Linux's `futimens`).
pub fn utimensat(p: &Process, dirfd: u64, path: u64, times: u64, flags: u64) -> Result<u64, Errno> {
    const UTIME_NOW: i64 = (1 << 30) - 1;
    const UTIME_OMIT: i64 = (1 << 30) - 2;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let t_now = now();
    let change = if times == 0 {
        TimeChange { atime: Some(t_now), mtime: Some(t_now) }
    } else {
        let mut b = [0u8; 32];
        copy_in(&mut b, times).map_err(|_| Errno::EFAULT)?;
        let field = |at: usize| -> Result<Option<Timespec>, Errno> {
            let sec = i64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
            let nsec = i64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap_or_default());
            match nsec {
                UTIME_NOW => Ok(Some(t_now)),
                UTIME_OMIT => Ok(None),
                n if (0..1_000_000_000).contains(&n) => Ok(Some(Timespec { sec, nsec: n })),
                _ => Err(Errno::EINVAL),
            }
        };
        TimeChange { atime: field(0)?, mtime: field(16)? }
    };
    let node = if path == 0 {
        if dirfd as i32 == AT_FDCWD {
            return Err(Errno::EFAULT);
        }
        let f = p.posix.files.lock().file(dirfd)?;
        f.file.inode().cloned().ok_or(Errno::EBADF)?
    } else {
        let path = path_arg(path)?;
        target(p, dirfd, &path, flags, flags & AT_SYMLINK_NOFOLLOW == 0)?.node().ok_or(Errno::EBADF)?
    };
    if change.atime.is_none() && change.mtime.is_none() {
        return Ok(0);
    }
    node.set_times(change, t_now).map(|()| 0)
}

/// `truncate(path, length)`.
pub fn truncate(p: &Process, path: u64, length: u64) -> Result<u64, Errno> {
    if (length as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    match node.metadata().kind {
        FileType::Directory => return Err(Errno::EISDIR),
        FileType::Regular => {}
        _ => return Err(Errno::EINVAL),
    }
    node.truncate(length, now())?;
    if let Some(cache) = node.contents().and_then(|c| crate::fs::pagecache::of(&c)) {
        super::files::unmap_past(&cache, length);
    }
    Ok(0)
}

/// `struct statfs` of the file system `node` is on (Linux's magic numbers by type).
fn statfs_of(node: &Arc<dyn Inode>) -> [u8; 120] {
    let mount = namespace::mount_of(node);
    let fstype = mount.as_ref().map_or("rootfs", |m| m.fstype);
    let magic: u64 = match fstype {
        "proc" => 0x9fa0,
        "sysfs" => 0x6265_6572,
        _ => 0x0102_1994, // tmpfs, devtmpfs and the root (Linux's rootfs is a tmpfs)
    };
    let (total, free) = if magic == 0x0102_1994 {
        let (used, frames) = crate::memory::frames::usage();
        ((frames / 2) as u64, (frames.saturating_sub(used) / 2) as u64)
    } else {
        (0, 0)
    };
    let mut b = [0u8; 120];
    let dev = node.metadata().dev;
    let words: [u64; 9] = [magic, 4096, total, free, free, 0, 0, 0, 255];
    for (i, w) in words.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    // f_fsid at 56 (two ints: the device), f_namelen at 64, f_frsize at 72, f_flags at 80.
    b[56..60].copy_from_slice(&(dev as u32).to_le_bytes());
    b[64..72].copy_from_slice(&255u64.to_le_bytes());
    b[72..80].copy_from_slice(&4096u64.to_le_bytes());
    b[80..88].copy_from_slice(&0x420u64.to_le_bytes()); // ST_VALID | ST_RELATIME, as Linux reports
    b
}

/// `statfs(path, buf)`.
pub fn statfs(p: &Process, path: u64, buf: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    copy_out(buf, &statfs_of(&node)).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `fstatfs(fd, buf)`.
pub fn fstatfs(p: &Process, fd: u64, buf: u64) -> Result<u64, Errno> {
    let f = p.posix.files.lock().file(fd)?;
    let b = match f.file.inode() {
        Some(node) => statfs_of(node),
        None => {
            // A pipe: pipefs's magic.
            let mut b = [0u8; 120];
            b[0..8].copy_from_slice(&0x5049_5045u64.to_le_bytes());
            b[8..16].copy_from_slice(&4096u64.to_le_bytes());
            b
        }
    };
    copy_out(buf, &b).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `mount(source, target, fstype, flags, data)`: a new instance of `proc`, `sysfs`, `tmpfs`,
/// `ramfs` or `devtmpfs` on `target` (`ENODEV` for other types); `MS_REMOUNT` is accepted and
/// changes nothing; `MS_BIND` mounts the source directory again on the target.
pub fn mount(p: &Process, _source: u64, target_path: u64, fstype: u64, flags: u64) -> Result<u64, Errno> {
    const MS_REMOUNT: u64 = 32;
    const MS_BIND: u64 = 4096;
    let path = path_arg(target_path)?;
    let point = node_at(p, AT_FDCWD as u64, &path, true)?;
    if point.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    if flags & MS_REMOUNT != 0 {
        return Ok(0);
    }
    let ctx = p.posix.fs.lock().clone();
    let abs = namespace::path_of_dir(&ctx, &point)?;
    if flags & MS_BIND != 0 {
        let source = path_arg(_source)?;
        let dir = node_at(p, AT_FDCWD as u64, &source, true)?;
        namespace::mount(&point, dir, "none", "bind", "rw", abs)?;
        return Ok(0);
    }
    let fstype = path_arg(fstype).map_err(|e| if e == Errno::ENOENT { Errno::ENODEV } else { e })?;
    let (name, root) = namespace::make_fs(&fstype)?;
    let options = match name {
        "proc" | "sysfs" => "rw,nosuid,nodev,noexec,relatime",
        _ => "rw,relatime",
    };
    namespace::mount(&point, root, name, name, options, abs)?;
    Ok(0)
}

/// `umount2(target, flags)`.
pub fn umount2(p: &Process, target_path: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !0xf != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(target_path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    // The walk entered the mount: unmount the directory it covers.
    let tree_point = namespace::covering(&node).ok_or(Errno::EINVAL)?;
    namespace::unmount(&tree_point)?;
    Ok(0)
}
