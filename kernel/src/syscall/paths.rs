//! The calls that name files by path: `openat`, `openat2`, `mkdirat`, `mknodat`, `unlinkat`,
//! `renameat`, `renameat2`, `linkat`, `symlinkat`, `readlinkat`, `newfstatat`, `statx`,
//! `faccessat`, `faccessat2`, `chdir`, `fchdir`, `chroot`, `getcwd`, `umask`, `fchmod`,
//! `fchmodat`, `fchown`, `fchownat`, `utimensat`, `truncate`, `statfs`, `fstatfs`, `mount`,
//! `umount2`.
//!
//! A path is read from user memory (`EFAULT`, `ENAMETOOLONG`; an empty one is `ENOENT` first,
//! unless the call takes `AT_EMPTY_PATH`), then walked by `fs::namespace` from the process's
//! root (absolute), its working directory (`AT_FDCWD`) or a descriptor's directory (`EBADF` if
//! not open, `ENOTDIR` if not a directory: only for a relative path, as on Linux), with the
//! process's credentials: search permission on every directory on the way, then what the call
//! needs (`fs::cred`: write and search permission on a directory to make or remove a name in
//! it, the sticky bit, ownership for `chmod` and `utimensat`, `CAP_CHOWN`, `CAP_MKNOD`), each in
//! Linux's order.
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
use vfs::namei::Restrict;
use vfs::node::{FileType, Inode, NewNode, TimeChange};

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::cred::{Credentials, cap, may};
use crate::fs::file::{FdEntry, OpenFile};
use crate::fs::namespace::{self, FsContext, Opened, Walk};
use crate::fs::node_file::{now, stat_of};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out, read_path};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

/// Where a `*at` call's relative path starts: the process's context and credentials, the start
/// directory and its path.
struct Start {
    ctx: FsContext,
    cred: Arc<Credentials>,
    dir: Arc<dyn Inode>,
    dir_path: Vec<u8>,
}

impl Start {
    /// A plain walk as the process.
    fn walk(&self) -> Walk<'_> {
        self.walk_with(Restrict::default())
    }

    fn walk_with(&self, restrict: Restrict) -> Walk<'_> {
        Walk { ctx: &self.ctx, cred: &self.cred, restrict }
    }
}

/// The start of a walk of `path` from `dirfd` (Linux's `path_init`): `ENOENT` for an empty
/// path (`getname`'s, before the descriptor); `EBADF`, `ENOTDIR` for a relative path's
/// descriptor.
fn start(p: &Process, dirfd: u64, path: &[u8]) -> Result<Start, Errno> {
    start_scoped(p, dirfd, path, false)
}

/// [`start`]; `scoped`: the walk's root is the start (`RESOLVE_IN_ROOT`, `RESOLVE_BENEATH`),
/// so even an absolute path starts at `dirfd`.
fn start_scoped(p: &Process, dirfd: u64, path: &[u8], scoped: bool) -> Result<Start, Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    let ctx = p.posix.fs.lock().clone();
    let cred = p.posix.cred();
    if vfs::path::is_absolute(path) && !scoped {
        return Ok(Start { dir: ctx.root.clone(), dir_path: crate::fs::copy_bytes(b"/")?, ctx, cred });
    }
    if dirfd as i32 == AT_FDCWD {
        let dir_path = crate::fs::copy_bytes(&ctx.cwd_path)?;
        return Ok(Start { dir: ctx.cwd.clone(), dir_path, ctx, cred });
    }
    let f = p.posix.files.lock().file(dirfd)?;
    let node = f.file.inode().cloned().ok_or(Errno::ENOTDIR)?;
    if node.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    Ok(Start { dir: node, dir_path: f.file.describe()?, ctx, cred })
}

/// The node `path` names from `dirfd` (`follow`: the last link too).
pub(super) fn node_at(p: &Process, dirfd: u64, path: &[u8], follow: bool) -> Result<Arc<dyn Inode>, Errno> {
    let s = start(p, dirfd, path)?;
    s.walk().lookup(&s.dir, path, follow)
}

/// Reads the path argument.
fn path_arg(addr: u64) -> Result<Vec<u8>, Errno> {
    read_path(addr)
}

/// What a `*at` call with `flags` acts on: a node, or (empty path with `AT_EMPTY_PATH`, or a
/// magic link to an open file without a node) an open file.
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
    let r = open_file(p, tid, dirfd, path, flags as u32, mode as u32, Restrict::default());
    finish_open(frame, generation, r)
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
/// as Linux does (`EINVAL` for a struct smaller than the first version, unknown flags, a mode
/// without `O_CREAT` or `O_TMPFILE`, unknown `resolve` bits, `RESOLVE_BENEATH` with
/// `RESOLVE_IN_ROOT`; `E2BIG` for a larger struct with a non-zero tail), then the open with the
/// walk restricted as `resolve` says (`vfs::namei::Restrict`). `RESOLVE_CACHED` is accepted:
/// every lookup here is one of cached nodes, but a call that would create or truncate is
/// `EAGAIN`, as on Linux.
pub fn openat2(
    p: &Process,
    frame: &mut TrapFrame,
    tid: u32,
    dirfd: u64,
    path: u64,
    how: u64,
    size: u64,
) -> Action {
    use linux_abi::fcntl::{
        RESOLVE_BENEATH, RESOLVE_CACHED, RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS,
        RESOLVE_NO_XDEV,
    };
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
        const ALL: u64 = RESOLVE_NO_XDEV
            | RESOLVE_NO_MAGICLINKS
            | RESOLVE_NO_SYMLINKS
            | RESOLVE_BENEATH
            | RESOLVE_IN_ROOT
            | RESOLVE_CACHED;
        if resolve & !ALL != 0
            || resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT) == RESOLVE_BENEATH | RESOLVE_IN_ROOT
        {
            return Err(Errno::EINVAL);
        }
        if resolve & RESOLVE_CACHED != 0 && flags & u64::from(O_CREAT | O_TRUNC | 0o20000000) != 0 {
            return Err(Errno::EAGAIN);
        }
        let restrict = Restrict {
            no_xdev: resolve & RESOLVE_NO_XDEV != 0,
            no_magiclinks: resolve & RESOLVE_NO_MAGICLINKS != 0,
            no_symlinks: resolve & RESOLVE_NO_SYMLINKS != 0,
            beneath: resolve & RESOLVE_BENEATH != 0,
            in_root: resolve & RESOLVE_IN_ROOT != 0,
        };
        open_file(p, tid, dirfd, path, flags as u32, mode as u32, restrict)
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

/// Opens `path` from `dirfd` with `flags` and `mode`, the walk restricted as `restrict` says,
/// and installs the descriptor.
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
    restrict: Restrict,
) -> Result<OpenResult, Errno> {
    let path = path_arg(path)?;
    // Find a descriptor first, as Linux's `get_unused_fd_flags` does: `EMFILE` before the walk.
    {
        let files = p.posix.files.lock();
        if files.numbers().count() >= files.limit() {
            return Err(Errno::EMFILE);
        }
    }
    // A scoped walk's root is its start: an absolute path inside it starts there too.
    let s = start_scoped(p, dirfd, &path, restrict.beneath || restrict.in_root)?;
    let (file, created) =
        match namespace::open(&s.walk_with(restrict), &s.dir, &s.dir_path, &path, flags, mode, tid)? {
            Opened::File(f, created) => (f, created),
            Opened::Truncate(f) => {
                super::files::truncate_file(&f, 0)?;
                (f, None)
            }
            Opened::Wait(key) => return Ok(OpenResult::Wait(key)),
        };
    // `/dev/tty` is the caller's controlling terminal: none is `ENXIO` (Linux's `tty_open`).
    if file.as_any().downcast_ref::<crate::fs::dev::DeviceFile>().is_some_and(|d| d.is_tty())
        && !p.posix.ctty.load(core::sync::atomic::Ordering::Acquire)
    {
        return Err(Errno::ENXIO);
    }
    // From here a failure removes the file the open made: a failed open leaves no trace.
    let undo = |e: Errno| {
        if let Some(c) = created {
            c.undo();
        }
        e
    };
    let status = if flags & O_PATH != 0 {
        O_PATH | (flags & linux_abi::fcntl::O_DIRECTORY) | (flags & linux_abi::fcntl::O_NOFOLLOW)
    } else {
        // Linux keeps the access mode and status flags; `O_CREAT`, `O_EXCL`, `O_NOCTTY` and
        // `O_TRUNC` are for the open only; every open is large-file on 64-bit.
        (flags & !(O_CREAT | linux_abi::fcntl::O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) | O_LARGEFILE
    };
    let installed = fallible::arc(OpenFile::new(file, status)).map_err(|_| Errno::ENOMEM).and_then(|open| {
        let cloexec = flags & O_CLOEXEC != 0;
        p.posix.files.lock().install_lowest(0, FdEntry { file: open, cloexec })
    });
    match installed {
        Ok(fd) => Ok(OpenResult::Fd(fd as u64)),
        Err(e) => Err(undo(e)),
    }
}

/// The parent directory and last name of `path` for a call that makes or removes a name.
fn parent_of(p: &Process, dirfd: u64, path: &[u8]) -> Result<(Start, vfs::namei::Parent), Errno> {
    let s = start(p, dirfd, path)?;
    let parent = s.walk().lookup_parent(&s.dir, path)?;
    Ok((s, parent))
}

/// The name a call that makes a node will make (Linux's `filename_create`): `EEXIST` for `.`,
/// `..` or `/`; with a trailing slash (not `mkdir`'s), `EEXIST` when it exists and `ENOENT`
/// when not; then `fs::namespace::may_create` (`EEXIST`, `ENOENT`, `EACCES`).
fn name_to_make<'a>(s: &Start, parent: &'a vfs::namei::Parent, dir_wanted: bool) -> Result<&'a [u8], Errno> {
    let name = parent.name.as_deref().ok_or(Errno::EEXIST)?;
    if matches!(name, b"." | b"..") {
        return Err(Errno::EEXIST);
    }
    if parent.trailing_slash && !dir_wanted {
        return Err(if parent.dir.lookup(name).is_ok() { Errno::EEXIST } else { Errno::ENOENT });
    }
    namespace::may_create(&s.cred, &parent.dir, name)?;
    Ok(name)
}

/// `mkdirat(dirfd, path, mode)`: permissions `mode & ~umask`, of the permission bits and the
/// sticky bit only (Linux's `vfs_prepare_mode` for directories).
pub fn mkdirat(p: &Process, dirfd: u64, path: u64, mode: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let (s, parent) = parent_of(p, dirfd, &path)?;
    let name = name_to_make(&s, &parent, true)?;
    let perm = mode as u32 & 0o1777 & !s.ctx.umask;
    let (who, perm) = namespace::creator(&s.cred, &parent.dir, FileType::Directory, perm);
    parent.dir.create(name, NewNode::Directory, perm, who)?;
    Ok(0)
}

/// `mknodat(dirfd, path, mode, dev)`: a regular file (type 0 or `S_IFREG`), FIFO, socket or
/// device node; `EPERM` for a directory, `EINVAL` for an unknown type (both before the walk);
/// a device node needs `CAP_MKNOD` (`EPERM`, after the directory's checks).
pub fn mknodat(p: &Process, dirfd: u64, path: u64, mode: u64, dev: u64) -> Result<u64, Errno> {
    let mode = mode as u32;
    let (node, kind) = match mode & S_IFMT {
        0 | S_IFREG => (NewNode::File, FileType::Regular),
        S_IFIFO => (NewNode::Fifo, FileType::Fifo),
        S_IFSOCK => (NewNode::Socket, FileType::Socket),
        S_IFCHR => (NewNode::CharDevice(dev_arg(dev)), FileType::CharDevice),
        S_IFBLK => (NewNode::BlockDevice(dev_arg(dev)), FileType::BlockDevice),
        S_IFDIR => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    };
    let path = path_arg(path)?;
    let (s, parent) = parent_of(p, dirfd, &path)?;
    let name = name_to_make(&s, &parent, false)?;
    if matches!(kind, FileType::CharDevice | FileType::BlockDevice) && !s.cred.capable(cap::MKNOD) {
        return Err(Errno::EPERM);
    }
    let (who, perm) = namespace::creator(&s.cred, &parent.dir, kind, mode & 0o7777 & !s.ctx.umask);
    parent.dir.create(name, node, perm, who)?;
    Ok(0)
}

/// The socket node `bind` makes at `path` (Linux's `unix_bind_bsd`: permissions `0777 &
/// ~umask`), in `mknodat`'s order; `EEXIST` is the caller's `EADDRINUSE`.
pub(super) fn make_socket_node(p: &Process, path: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
    let (s, parent) = parent_of(p, AT_FDCWD as u64, path)?;
    let name = name_to_make(&s, &parent, false)?;
    let (who, perm) = namespace::creator(&s.cred, &parent.dir, FileType::Socket, 0o777 & !s.ctx.umask);
    parent.dir.create(name, NewNode::Socket, perm, who)?;
    parent.dir.lookup(name)
}

/// A device number from `mknod`'s 32-bit encoding (Linux's `new_decode_dev`) in `st_rdev`'s.
fn dev_arg(dev: u64) -> u64 {
    let dev = dev as u32;
    let major = (dev & 0xfff00) >> 8;
    let minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    linux_abi::layout::encode_dev(major, minor)
}

/// `unlinkat(dirfd, path, flags)`: a name (`unlink`) or an empty directory (`AT_REMOVEDIR`), in
/// Linux's order (`do_unlinkat`, `do_rmdir`, `may_delete`): the last component's kind of name
/// (`.`, `..`, `/`); the victim (`ENOENT`); with a trailing slash, its kind (`unlink`); write
/// and search permission on the directory (`EACCES`) and the sticky bit (`EPERM`); then the
/// victim's kind (`EISDIR`, `ENOTDIR`), a mount point (`EBUSY`) and emptiness (`ENOTEMPTY`).
pub fn unlinkat(p: &Process, dirfd: u64, path: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    let dir = flags & AT_REMOVEDIR != 0;
    let path = path_arg(path)?;
    let (s, parent) = parent_of(p, dirfd, &path)?;
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
    let m = node.metadata();
    if !dir && parent.trailing_slash {
        return Err(if m.kind == FileType::Directory { Errno::EISDIR } else { Errno::ENOTDIR });
    }
    s.cred.may_delete(&parent.dir.metadata(), &m)?;
    if dir && m.kind == FileType::Directory && namespace::is_mount_point(&node) {
        return Err(Errno::EBUSY);
    }
    parent.dir.unlink(name, dir, now())?;
    Ok(0)
}

/// `renameat2(olddirfd, old, newdirfd, new, flags)` (`renameat` is flags 0), in Linux's order
/// (`do_renameat2`, `vfs_rename`): the flags; both walks; `.`, `..` or `/` (`EBUSY`); the
/// source (`ENOENT`) and a mount point (`EBUSY`); trailing slashes on a non-directory
/// (`ENOTDIR`); permission to remove the source and to make or replace the target (`EACCES`,
/// the sticky bit's `EPERM`), and write permission on a directory that changes parent; then the
/// file system's own checks (`EEXIST`, `EISDIR`, `ENOTDIR`, `ENOTEMPTY`, `EINVAL`).
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
    let (s, from) = parent_of(p, olddirfd, &old)?;
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
    let mm = moving.metadata();
    if (from.trailing_slash || to.trailing_slash) && mm.kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    let cred = &s.cred;
    cred.may_delete(&from.dir.metadata(), &mm)?;
    let target = to.dir.lookup(new_name).ok();
    match &target {
        Some(t) => cred.may_delete(&to.dir.metadata(), &t.metadata())?,
        None => cred.permission(&to.dir.metadata(), may::WRITE | may::EXEC)?,
    }
    // A directory moved to another parent rewrites its `..`: write permission on it (Linux).
    let moves_parent = !vfs::node::same(&from.dir, &to.dir);
    if moves_parent && mm.kind == FileType::Directory {
        cred.permission(&mm, may::WRITE)?;
    }
    if let Some(t) = target.as_ref().filter(|_| moves_parent && flags & RENAME_EXCHANGE != 0) {
        let tm = t.metadata();
        if tm.kind == FileType::Directory {
            cred.permission(&tm, may::WRITE)?;
        }
    }
    from.dir.rename(old_name, &to.dir, new_name, flags, now())?;
    Ok(0)
}

/// `linkat(olddirfd, old, newdirfd, new, flags)`: a new name for a non-directory
/// (`AT_SYMLINK_FOLLOW`: of a link's target; `AT_EMPTY_PATH`: of `olddirfd`'s file), in
/// Linux's order: the flags; the source; the target's name (`filename_create`); another file
/// system (`EXDEV`); `fs.protected_hardlinks` (Debian's 1: only the owner, or one who may read
/// and write a regular file, or `CAP_FOWNER`, `EPERM`); `may_create`; a directory (`EPERM`).
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
    let new = path_arg(new)?;
    let (s, to) = parent_of(p, newdirfd, &new)?;
    let name = to.name.as_deref().ok_or(Errno::EEXIST)?;
    if matches!(name, b"." | b"..") {
        return Err(Errno::EEXIST);
    }
    if to.trailing_slash {
        return Err(if to.dir.lookup(name).is_ok() { Errno::EEXIST } else { Errno::ENOENT });
    }
    if to.dir.lookup(name).is_ok() {
        return Err(Errno::EEXIST);
    }
    let tm = target.metadata();
    if tm.dev != to.dir.metadata().dev {
        return Err(Errno::EXDEV);
    }
    // Linux's `safe_hardlink_source`.
    let safe = tm.kind == FileType::Regular
        && tm.perm & 0o4000 == 0
        && tm.perm & 0o2010 != 0o2010
        && s.cred.permission(&tm, may::READ | may::WRITE).is_ok();
    if !s.cred.owns(&tm) && !safe {
        return Err(Errno::EPERM);
    }
    namespace::may_create(&s.cred, &to.dir, name)?;
    if tm.kind == FileType::Directory {
        return Err(Errno::EPERM);
    }
    to.dir.link(name, &target, now())?;
    Ok(0)
}

/// `symlinkat(target, newdirfd, linkpath)`: an empty target is `ENOENT` (before the walk).
pub fn symlinkat(p: &Process, target: u64, newdirfd: u64, linkpath: u64) -> Result<u64, Errno> {
    let target = path_arg(target)?;
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    let path = path_arg(linkpath)?;
    let (s, parent) = parent_of(p, newdirfd, &path)?;
    let name = name_to_make(&s, &parent, false)?;
    let (who, _) = namespace::creator(&s.cred, &parent.dir, FileType::Symlink, 0o777);
    parent.dir.create(name, NewNode::Symlink(&target), 0o777, who)?;
    Ok(0)
}

/// `readlinkat(dirfd, path, buf, size)`: a link's target, not NUL-terminated, cut to `size`, as
/// Linux's `do_readlinkat`: `EINVAL` for a size below 1 first; an empty path names `dirfd`
/// itself (a link opened with `O_PATH | O_NOFOLLOW`), and what is not a link is then `ENOENT`
/// (else `EINVAL`).
pub fn readlinkat(p: &Process, dirfd: u64, path: u64, buf: u64, size: u64) -> Result<u64, Errno> {
    if (size as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let (node, empty) = if path.is_empty() {
        let node = if dirfd as i32 == AT_FDCWD {
            p.posix.fs.lock().cwd.clone()
        } else {
            let f = p.posix.files.lock().file(dirfd)?;
            f.file.inode().cloned().ok_or(Errno::ENOENT)?
        };
        (node, true)
    } else {
        (node_at(p, dirfd, &path, false)?, false)
    };
    if node.metadata().kind != FileType::Symlink {
        return Err(if empty { Errno::ENOENT } else { Errno::EINVAL });
    }
    let text = node.readlink()?;
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
    let (rmaj, rmin) = linux_abi::layout::decode_dev(s.rdev);
    let (dmaj, dmin) = linux_abi::layout::decode_dev(s.dev);
    b[128..132].copy_from_slice(&rmaj.to_le_bytes());
    b[132..136].copy_from_slice(&rmin.to_le_bytes());
    b[136..140].copy_from_slice(&dmaj.to_le_bytes());
    b[140..144].copy_from_slice(&dmin.to_le_bytes());
    copy_out(buf, &b).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `faccessat(dirfd, path, mode)` and `faccessat2(..., flags)`: the walk and the check with the
/// real ids rather than the effective ones (unless `AT_EACCESS`), and root's capabilities only
/// for a real root (Linux's `access_override_creds`); `F_OK` asks for the walk alone.
pub fn faccessat(p: &Process, dirfd: u64, path: u64, mode: u64, flags: u64) -> Result<u64, Errno> {
    if mode & !7 != 0 || flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let mut s =
        if path.is_empty() && flags & AT_EMPTY_PATH != 0 { None } else { Some(start(p, dirfd, &path)?) };
    let cred = p.posix.cred();
    let check = if flags & AT_EACCESS != 0 {
        cred
    } else {
        let mut real = cred.try_clone()?;
        real.fsuid = real.uid;
        real.fsgid = real.gid;
        real.cap_effective = if real.uid == 0 { real.cap_permitted } else { 0 };
        fallible::arc(real).map_err(|_| Errno::ENOMEM)?
    };
    let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
    let target = match s.as_mut() {
        Some(s) => {
            s.cred = check.clone();
            let node = s.walk().lookup(&s.dir, &path, follow)?;
            if follow && node.is_magic_link() {
                let file = namespace::reopen(&node)?;
                Target::File(fallible::arc(OpenFile::new(file, 0)).map_err(|_| Errno::ENOMEM)?)
            } else {
                Target::Node(node)
            }
        }
        None => target(p, dirfd, &path, flags, follow)?,
    };
    if mode == 0 {
        return Ok(0);
    }
    let st = target.stat()?;
    check.permission_of(st.mode, st.uid, st.gid, mode as u32)?;
    Ok(0)
}

/// `chdir(path)`: a directory (`ENOTDIR`) the process may search (`EACCES`).
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
    let m = node.metadata();
    if m.kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    p.posix.cred().permission(&m, may::EXEC)?;
    let ctx = p.posix.fs.lock().clone();
    let path = fallible::arc(namespace::path_of_dir(&ctx, &node)?).map_err(|_| Errno::ENOMEM)?;
    let mut fs = p.posix.fs.lock();
    fs.cwd = node;
    fs.cwd_path = path;
    Ok(0)
}

/// `chroot(path)`: the process's root becomes that directory (search permission, then
/// `CAP_SYS_CHROOT`).
pub fn chroot(p: &Process, path: u64) -> Result<u64, Errno> {
    const CAP_SYS_CHROOT: u32 = 18;
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    let m = node.metadata();
    if m.kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    let cred = p.posix.cred();
    cred.permission(&m, may::EXEC)?;
    if !cred.capable(CAP_SYS_CHROOT) {
        return Err(Errno::EPERM);
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

/// `chmod` of `node` as `cred` (Linux's `chmod_common` and `setattr_prepare`): the owner or
/// `CAP_FOWNER` (`EPERM`); the set-group-id bit is dropped for one neither in the file's group
/// nor holding `CAP_FSETID`.
fn chmod(cred: &Credentials, node: &Arc<dyn Inode>, mode: u64) -> Result<u64, Errno> {
    let m = node.metadata();
    if !cred.owns(&m) {
        return Err(Errno::EPERM);
    }
    let mut perm = mode as u32 & 0o7777;
    if !cred.in_group(m.gid) && !cred.capable(cap::FSETID) {
        perm &= !0o2000;
    }
    node.set_perm(perm, now()).map(|()| 0)
}

/// `fchmod(fd, mode)`.
pub fn fchmod(p: &Process, fd: u64, mode: u64) -> Result<u64, Errno> {
    match fd_node(p, fd)? {
        Some(node) => chmod(&p.posix.cred(), &node, mode),
        // A pipe or socket has an inode of its own on Linux; nothing here keeps its mode.
        None => Ok(0),
    }
}

/// `fchmodat(dirfd, path, mode)`.
pub fn fchmodat(p: &Process, dirfd: u64, path: u64, mode: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, dirfd, &path, true)?;
    chmod(&p.posix.cred(), &node, mode)
}

fn owner_arg(id: u64) -> Option<u32> {
    (id as u32 != u32::MAX).then_some(id as u32)
}

/// `chown` of `node` as `cred` (Linux's `chown_common`, `chown_ok`, `chgrp_ok`): a new owner
/// needs `CAP_CHOWN` (the owner may "change" it to itself); a new group needs the owner and a
/// group the caller is in, or `CAP_CHOWN` (`EPERM`). A non-directory loses its set-user-id bit
/// and its set-group-id bit when group-executable (even when nothing changes, as Linux).
fn chown(cred: &Credentials, node: &Arc<dyn Inode>, uid: u64, gid: u64) -> Result<u64, Errno> {
    let m = node.metadata();
    let (uid, gid) = (owner_arg(uid), owner_arg(gid));
    let may_chown = cred.capable(cap::CHOWN);
    if let Some(uid) = uid
        && !(may_chown || (cred.fsuid == m.uid && uid == m.uid))
    {
        return Err(Errno::EPERM);
    }
    if let Some(gid) = gid
        && !(may_chown || (cred.fsuid == m.uid && (cred.in_group(gid) || gid == m.gid)))
    {
        return Err(Errno::EPERM);
    }
    let now = now();
    node.set_owner(uid, gid, now)?;
    if m.kind != FileType::Directory {
        let mut perm = m.perm & !0o4000;
        if perm & 0o2010 == 0o2010 {
            perm &= !0o2000;
        }
        if perm != m.perm {
            node.set_perm(perm, now)?;
        }
    }
    Ok(0)
}

/// `fchown(fd, uid, gid)` (-1: unchanged).
pub fn fchown(p: &Process, fd: u64, uid: u64, gid: u64) -> Result<u64, Errno> {
    match fd_node(p, fd)? {
        Some(node) => chown(&p.posix.cred(), &node, uid, gid),
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
    chown(&p.posix.cred(), &node, uid, gid)
}

/// `utimensat(dirfd, path, times, flags)`: `times` null (or both `UTIME_NOW`) sets both to now,
/// which the owner or one who may write the file may do (`EACCES`); explicit times need the
/// owner or `CAP_FOWNER` (`EPERM`); `UTIME_OMIT` per field; a null `path` names `dirfd` itself
/// (Linux's `futimens`).
pub fn utimensat(p: &Process, dirfd: u64, path: u64, times: u64, flags: u64) -> Result<u64, Errno> {
    const UTIME_NOW: i64 = (1 << 30) - 1;
    const UTIME_OMIT: i64 = (1 << 30) - 2;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let t_now = now();
    let (change, explicit) = if times == 0 {
        (TimeChange { atime: Some(t_now), mtime: Some(t_now) }, false)
    } else {
        let mut b = [0u8; 32];
        copy_in(&mut b, times).map_err(|_| Errno::EFAULT)?;
        let nsec = |at: usize| i64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap_or_default());
        let field = |at: usize| -> Result<Option<Timespec>, Errno> {
            let sec = i64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
            match nsec(at) {
                UTIME_NOW => Ok(Some(t_now)),
                UTIME_OMIT => Ok(None),
                n if (0..1_000_000_000).contains(&n) => Ok(Some(Timespec { sec, nsec: n })),
                _ => Err(Errno::EINVAL),
            }
        };
        let explicit = [0, 16].iter().any(|&at| !matches!(nsec(at), UTIME_NOW | UTIME_OMIT));
        (TimeChange { atime: field(0)?, mtime: field(16)? }, explicit)
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
    let cred = p.posix.cred();
    let m = node.metadata();
    if !cred.owns(&m) {
        if explicit {
            return Err(Errno::EPERM);
        }
        cred.permission(&m, may::WRITE)?;
    }
    node.set_times(change, t_now).map(|()| 0)
}

/// `truncate(path, length)`: `EISDIR`, `EINVAL` (not a regular file), then write permission
/// (`EACCES`), then `ETXTBSY` for a running program's file, as Linux's `vfs_truncate`.
pub fn truncate(p: &Process, path: u64, length: u64) -> Result<u64, Errno> {
    if (length as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    let m = node.metadata();
    match m.kind {
        FileType::Directory => return Err(Errno::EISDIR),
        FileType::Regular => {}
        _ => return Err(Errno::EINVAL),
    }
    p.posix.cred().permission(&m, may::WRITE)?;
    // Linux's `get_write_access` in `vfs_truncate`: not a running program's file (`ETXTBSY`).
    let cache = crate::fs::pagecache::of_node(&node);
    let _writing = cache.as_ref().map(|c| c.get_write_access()).transpose()?;
    node.truncate(length, now())?;
    if let Some(cache) = cache {
        super::files::unmap_past(&cache, length);
    }
    Ok(0)
}

/// Linux's `statfs` magic numbers.
mod magic {
    pub const TMPFS: u64 = 0x0102_1994;
    pub const PROC: u64 = 0x9fa0;
    pub const SYSFS: u64 = 0x6265_6572;
    pub const PIPEFS: u64 = 0x5049_5045;
    pub const ANON_INODE_FS: u64 = 0x0904_1934;
}

/// `struct statfs` of a file system of type `magic` on device `dev`: the RAM file systems
/// report their shared space budget (`fs::pagecache`: blocks, free blocks) and their inode
/// limit, as tmpfs does; the others report none.
fn statfs_bytes(magic: u64, dev: u64) -> [u8; 120] {
    let (blocks, free) = if magic == magic::TMPFS { crate::fs::pagecache::space() } else { (0, 0) };
    let mut b = [0u8; 120];
    let words: [u64; 7] = [magic, 4096, blocks, free, free, 0, 0];
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

/// `struct statfs` of the file system `node` is on (Linux's magic numbers by type).
fn statfs_of(node: &Arc<dyn Inode>) -> [u8; 120] {
    let fstype = namespace::fstype_of(node).unwrap_or("rootfs");
    let magic = match fstype {
        "proc" => magic::PROC,
        "sysfs" => magic::SYSFS,
        _ => magic::TMPFS, // tmpfs, devtmpfs and the root (Linux's rootfs is a tmpfs)
    };
    statfs_bytes(magic, node.metadata().dev)
}

/// `statfs(path, buf)`.
pub fn statfs(p: &Process, path: u64, buf: u64) -> Result<u64, Errno> {
    let path = path_arg(path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    copy_out(buf, &statfs_of(&node)).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `fstatfs(fd, buf)`: a file's file system; a memfd is on (Linux's internal) tmpfs, a pipe on
/// pipefs, the other files without a node on the anonymous-inode file system.
pub fn fstatfs(p: &Process, fd: u64, buf: u64) -> Result<u64, Errno> {
    let f = p.posix.files.lock().file(fd)?;
    let b = match f.file.inode() {
        Some(node) => statfs_of(node),
        None if f.file_as::<crate::fs::memfd::Memfd>().is_some() => statfs_bytes(magic::TMPFS, 1),
        None if f.file_as::<crate::fs::pipe::PipeEnd>().is_some() => statfs_bytes(magic::PIPEFS, 0xd),
        None => statfs_bytes(magic::ANON_INODE_FS, 0xe),
    };
    copy_out(buf, &b).map(|()| 0).map_err(|_| Errno::EFAULT)
}

/// `mount(source, target, fstype, flags, data)`: `CAP_SYS_ADMIN` (`EPERM`); a new instance of
/// `proc`, `sysfs`, `tmpfs`, `ramfs` or `devtmpfs` on `target` (`ENODEV` for other types);
/// `MS_REMOUNT` is accepted and changes nothing; `MS_BIND` mounts the source directory again on
/// the target.
pub fn mount(p: &Process, source: u64, target_path: u64, fstype: u64, flags: u64) -> Result<u64, Errno> {
    const MS_REMOUNT: u64 = 32;
    const MS_BIND: u64 = 4096;
    if !p.posix.cred().capable(cap::SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
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
        let source = path_arg(source)?;
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

/// `umount2(target, flags)`: `CAP_SYS_ADMIN` (`EPERM`), then the mount.
pub fn umount2(p: &Process, target_path: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !0xf != 0 {
        return Err(Errno::EINVAL);
    }
    if !p.posix.cred().capable(cap::SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    let path = path_arg(target_path)?;
    let node = node_at(p, AT_FDCWD as u64, &path, true)?;
    // The walk entered the mount: unmount the directory it covers.
    let tree_point = namespace::covering(&node).ok_or(Errno::EINVAL)?;
    namespace::unmount(&tree_point)?;
    Ok(0)
}

/// The name argument of an extended-attribute call, as Linux's `strncpy_from_user` into
/// `XATTR_NAME_MAX + 1` bytes reads it: `ERANGE` for an empty name or one of 256 bytes or more,
/// `EFAULT` for a bad pointer. Returns the name's namespace.
fn xattr_name(addr: u64) -> Result<XattrNamespace, Errno> {
    let mut name = [0u8; 256];
    match crate::memory::uaccess::read_c_string(addr, &mut name)? {
        Some(len) if len > 0 => Ok(XattrNamespace::of(&name[..len])),
        _ => Err(Errno::ERANGE),
    }
}

/// The namespace of an attribute name, which decides how Linux 6.1's tmpfs answers for it
/// (`xattr_permission`, then the handler `xattr_resolve_name` finds: tmpfs has handlers for
/// `security.`, `trusted.` and the POSIX ACLs, none for `user.` before Linux 6.6).
#[derive(Clone, Copy, PartialEq, Eq)]
enum XattrNamespace {
    /// `user.`: no tmpfs handler (`EOPNOTSUPP`); refused before that on a file that is neither
    /// regular nor a directory (`ENODATA` to read, `EPERM` to write).
    User,
    /// `security.`, `trusted.`, `system.posix_acl_access` and `..._default`: a handler that
    /// finds no attribute (`ENODATA`).
    Kept,
    /// Any other name: no handler (`EOPNOTSUPP`).
    Unknown,
}

impl XattrNamespace {
    fn of(name: &[u8]) -> Self {
        if name.starts_with(b"user.") {
            Self::User
        } else if name.starts_with(b"security.")
            || name.starts_with(b"trusted.")
            || name == b"system.posix_acl_access"
            || name == b"system.posix_acl_default"
        {
            Self::Kept
        } else {
            Self::Unknown
        }
    }
}

/// Which file an extended-attribute call names: a path (followed or not) or a descriptor.
#[derive(Clone, Copy)]
pub enum XattrOf {
    /// `getxattr`, `setxattr`...: the path, symbolic links followed.
    Path,
    /// `lgetxattr`...: the path, a final symbolic link itself.
    Link,
    /// `fgetxattr`...: an open descriptor (not an `O_PATH` one: `EBADF`).
    Fd,
}

/// What an extended-attribute call does with the attribute.
#[derive(Clone, Copy)]
pub enum XattrOp {
    /// `getxattr(file, name, value, size)`.
    Get,
    /// `setxattr(file, name, value, size, flags)`.
    Set,
    /// `listxattr(file, list, size)`.
    List,
    /// `removexattr(file, name)`.
    Remove,
}

/// The extended-attribute calls. The file systems here keep no extended attributes: a file
/// answers as one of Linux 6.1's tmpfs files that has none (no security module adds any), by
/// the name's namespace ([`XattrNamespace`]): `get` and `remove` of a `security.`, `trusted.`
/// or POSIX ACL name are `ENODATA` (what `ls -l` and `cp -a` ask), of a `user.` or unknown one
/// `EOPNOTSUPP` (tmpfs has no `user.` handler before Linux 6.6); `list` is empty; `set` is
/// `EOPNOTSUPP` — where Linux's tmpfs would store a `security.` or `trusted.` attribute, a
/// difference docs/user.md states. The file is found, and the name read, in Linux's order
/// (`path_getxattr` and `getxattr`).
///
/// # Errors
/// The path's errors, `EBADF`, `EFAULT`, `ERANGE`, then as above.
pub fn xattr(p: &Process, of: XattrOf, op: XattrOp, a: [u64; 6]) -> Result<u64, Errno> {
    let node = match of {
        XattrOf::Fd => fd_node(p, a[0])?,
        XattrOf::Path | XattrOf::Link => {
            let path = path_arg(a[0])?;
            Some(node_at(p, AT_FDCWD as u32 as u64, &path, matches!(of, XattrOf::Path))?)
        }
    };
    // Linux's xattr_permission: `user.` names only on regular files and directories.
    let user_allowed =
        node.is_some_and(|n| matches!(n.metadata().kind, FileType::Regular | FileType::Directory));
    match op {
        XattrOp::List => Ok(0),
        XattrOp::Get | XattrOp::Remove => match xattr_name(a[1])? {
            XattrNamespace::User if !user_allowed => {
                Err(if matches!(op, XattrOp::Get) { Errno::ENODATA } else { Errno::EPERM })
            }
            XattrNamespace::Kept => Err(Errno::ENODATA),
            XattrNamespace::User | XattrNamespace::Unknown => Err(Errno::EOPNOTSUPP),
        },
        XattrOp::Set => {
            let ns = xattr_name(a[1])?;
            if a[4] & !3 != 0 {
                return Err(Errno::EINVAL); // XATTR_CREATE | XATTR_REPLACE only
            }
            if a[3] > 65536 {
                return Err(Errno::E2BIG); // XATTR_SIZE_MAX
            }
            if ns == XattrNamespace::User && !user_allowed {
                return Err(Errno::EPERM);
            }
            Err(Errno::EOPNOTSUPP)
        }
    }
}
