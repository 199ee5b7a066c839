//! The tree every process sees, as Linux builds it for an initramfs boot: the root is a RAM file
//! system (Linux's rootfs) into which the initramfs is unpacked at boot, writable, with `/dev`
//! (the devices: `dev`), `/dev/shm` and `/tmp` (RAM file systems of their own, as tmpfs),
//! and `/proc` and `/sys` (mounted by `procfs`, which knows the processes) mounted on it. A
//! program that mounts the same file systems again (`mount -t proc proc /proc`) gets a fresh
//! instance on top, as on Linux.
//!
//! Paths are walked by `vfs::namei` from a process's root and working directory ([`FsContext`],
//! which processes keep) or a `*at` call's directory, with the process's credentials ([`Walk`]:
//! search permission on every directory, `fs::cred`) and `openat2`'s restrictions. [`open`] is
//! Linux's `do_filp_open` in its order of checks: the walk, `O_CREAT` (with `O_EXCL`, the umask,
//! write permission on the directory), the kind of node against the flags (`O_DIRECTORY`,
//! `O_NOFOLLOW`, writing a directory), the permission the access mode asks, then what the node
//! opens as: a regular file or directory (`node_file`), a device (`dev`), a FIFO (`pipe`), or
//! the open file a magic link stands for. `O_TMPFILE` makes an unnamed file in a directory.
//!
//! The boot makes no directory the archive lacks but the mount points (`/dev`, `/proc`, `/sys`,
//! `/tmp`), so `ls /` lists what Linux's would.
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{
    O_ACCMODE, O_CREAT, O_DIRECTORY, O_EXCL, O_NOATIME, O_NOFOLLOW, O_PATH, O_RDONLY, O_TMPFILE, O_TRUNC,
    O_WRONLY, PATH_MAX,
};
use spin::{Once, RwLock};
use vfs::mount::{Mount, Mounts};
use vfs::namei::{Last, Parent, Restrict, Search, Walker};
use vfs::node::{Creator, FileType, Inode, NewNode, same};
use vfs::ramfs::{Config, RamFs};

use super::cred::{Credentials, cap, may};
use super::file::File;
use super::node_file::{Named, NodeFile, now};

/// The tree: its root and its mounts.
struct Tree {
    root: Arc<dyn Inode>,
    mounts: RwLock<Mounts>,
}

static TREE: Once<Tree> = Once::new();

/// Reopens the open file a magic link stands for (`procfs`'s, which makes them).
pub type Reopen = fn(&Arc<dyn Inode>) -> Result<Arc<dyn File>, Errno>;

/// Makes a new instance of a file-system type (its root).
pub type MakeFs = fn() -> Result<Arc<dyn Inode>, Errno>;

/// The registered [`Reopen`].
static REOPEN: Once<Reopen> = Once::new();

/// Device numbers of the file systems made here (`st_dev`, Linux's anonymous devices 0:N).
pub mod devs {
    /// The root file system.
    pub const ROOT: u64 = 2;
    /// `/dev`.
    pub const DEV: u64 = 5;
    /// Each tmpfs gets the next number from here.
    pub const FIRST_TMPFS: u64 = 30;
}

static NEXT_DEV: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(devs::FIRST_TMPFS);

/// The root's creator at boot: root, now.
fn boot_creator() -> Creator {
    Creator { uid: 0, gid: 0, now: now() }
}

/// A new RAM file system with device `dev`, holding at most `max_inodes` nodes.
///
/// # Errors
/// `ENOMEM`.
fn ramfs(dev: u64, max_inodes: usize, perm: u32) -> Result<RamFs, Errno> {
    let config = Config {
        dev,
        max_inodes,
        blksize: mm::addr::PAGE_SIZE as u32,
        new_contents: super::pagecache::new_file_contents,
        reserve: crate::memory::fallible::reserving,
    };
    RamFs::new(config, perm, boot_creator())
}

/// A new tmpfs (`/tmp`, `/dev/shm`, `mount -t tmpfs`): its root, mode 1777, with as many nodes
/// as half the machine's pages (tmpfs's default `nr_inodes`).
///
/// # Errors
/// `ENOMEM`.
pub fn new_tmpfs() -> Result<Arc<dyn Inode>, Errno> {
    let dev = NEXT_DEV.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let pages = crate::memory::frames::usage().1 / 2;
    Ok(ramfs(dev, pages, 0o1777)?.root())
}

/// What unpacking the initramfs into the root did (said in the kernel's log).
pub struct Unpacked {
    /// The unpacking's report.
    pub report: vfs::unpack::Report,
    /// Whether the archive was a cpio archive at all.
    pub was_cpio: bool,
}

/// Builds the tree at boot: the root, the initramfs unpacked into it (when `initrd` is a cpio
/// archive), `/dev`, `/dev/shm` and `/tmp` made and mounted. `/proc` and `/sys` are mounted by
/// `procfs` afterwards.
///
/// # Errors
/// `ENOMEM` when the machine cannot hold even the empty tree.
pub fn init(initrd: Option<&[u8]>) -> Result<Unpacked, Errno> {
    let root_fs = ramfs(devs::ROOT, usize::MAX, 0o755)?;
    let root = root_fs.root();
    let mut mounts = Mounts::new();
    mounts.add(Mount {
        point: None,
        root: root.clone(),
        source: "rootfs",
        fstype: "rootfs",
        options: "rw",
        path: super::copy_bytes(b"/")?,
    })?;
    let was_cpio = initrd.is_some_and(initramfs::cpio::is_cpio);
    let report = match initrd {
        Some(archive) if was_cpio => vfs::unpack::unpack(archive, &root, &mounts, now()),
        _ => vfs::unpack::Report::default(),
    };
    let who = boot_creator();
    for dir in ["dev", "proc", "sys", "tmp"] {
        match root.create(dir.as_bytes(), NewNode::Directory, if dir == "tmp" { 0o1777 } else { 0o755 }, who)
        {
            Ok(_) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(e),
        }
    }
    let dev_fs = ramfs(devs::DEV, usize::MAX, 0o755)?;
    super::dev::populate(&dev_fs.root(), who)?;
    let dev_point = root.lookup(b"dev")?;
    if dev_point.metadata().kind == FileType::Directory {
        mounts.add(Mount {
            point: Some(dev_point),
            root: dev_fs.root(),
            source: "devtmpfs",
            fstype: "devtmpfs",
            options: "rw,relatime,mode=755",
            path: super::copy_bytes(b"/dev")?,
        })?;
        let shm = dev_fs.root().lookup(b"shm")?;
        mounts.add(Mount {
            point: Some(shm),
            root: new_tmpfs()?,
            source: "tmpfs",
            fstype: "tmpfs",
            options: "rw,nosuid,nodev",
            path: super::copy_bytes(b"/dev/shm")?,
        })?;
    }
    let tmp = root.lookup(b"tmp")?;
    if tmp.metadata().kind == FileType::Directory {
        mounts.add(Mount {
            point: Some(tmp),
            root: new_tmpfs()?,
            source: "tmpfs",
            fstype: "tmpfs",
            options: "rw,nosuid,nodev",
            path: super::copy_bytes(b"/tmp")?,
        })?;
    }
    TREE.call_once(|| Tree { root, mounts: RwLock::new(mounts) });
    Ok(Unpacked { report, was_cpio })
}

/// The root of the tree (`None` before [`init`]).
pub fn root() -> Option<Arc<dyn Inode>> {
    TREE.get().map(|t| t.root.clone())
}

/// Mounts `fs_root` on the directory `path` names (from the tree's root), as `mount(2)` and the
/// boot do: `source`, `fstype`, `options` and `path` are what `/proc/mounts` says.
///
/// # Errors
/// `ENOENT`, `ENOTDIR`, `ENOMEM`.
pub fn mount(
    point: &Arc<dyn Inode>,
    fs_root: Arc<dyn Inode>,
    source: &'static str,
    fstype: &'static str,
    options: &'static str,
    path: Vec<u8>,
) -> Result<(), Errno> {
    let tree = TREE.get().ok_or(Errno::ENOENT)?;
    if point.metadata().kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    tree.mounts.write().add(Mount {
        point: Some(point.clone()),
        root: fs_root,
        source,
        fstype,
        options,
        path,
    })
}

/// Removes the latest mount on `point` (`umount2`).
///
/// # Errors
/// `EINVAL` when nothing is mounted there.
pub fn unmount(point: &Arc<dyn Inode>) -> Result<(), Errno> {
    let tree = TREE.get().ok_or(Errno::EINVAL)?;
    let gone = tree.mounts.write().remove(point)?;
    drop(gone);
    Ok(())
}

/// The directory the root `node` of a mounted file system covers (`umount`), if it is one.
pub fn covering(node: &Arc<dyn Inode>) -> Option<Arc<dyn Inode>> {
    TREE.get()?.mounts.read().covered_by(node)
}

/// The type of the file system a node is on: the latest mount whose root has the node's device
/// (`statfs`).
pub fn fstype_of(node: &Arc<dyn Inode>) -> Option<&'static str> {
    let dev = node.metadata().dev;
    let tree = TREE.get()?;
    let mounts = tree.mounts.read();
    mounts.iter().filter(|m| m.root.metadata().dev == dev).last().map(|m| m.fstype)
}

/// The file systems `mount(2)` can make, by type (registered by the layers that make them:
/// `procfs` for `proc` and `sysfs`).
static MAKERS: spin::Mutex<Vec<(&'static str, MakeFs)>> = spin::Mutex::new(Vec::new());

/// Registers the file-system type `fstype`, made by `make`.
pub fn register_type(fstype: &'static str, make: MakeFs) {
    let mut m = MAKERS.lock();
    if m.try_reserve(1).is_ok() {
        m.push((fstype, make));
    }
}

/// A new instance of `fstype` for `mount(2)`, with the static name `/proc/mounts` shows
/// (`ENODEV`: a type this kernel does not have).
///
/// # Errors
/// `ENODEV`, `ENOMEM`.
pub fn make_fs(fstype: &[u8]) -> Result<(&'static str, Arc<dyn Inode>), Errno> {
    match fstype {
        b"tmpfs" => return Ok(("tmpfs", new_tmpfs()?)),
        b"ramfs" => return Ok(("ramfs", new_tmpfs()?)),
        b"devtmpfs" => {
            // One instance, as Linux's devtmpfs: the `/dev` made at boot.
            let tree = TREE.get().ok_or(Errno::ENODEV)?;
            let mounts = tree.mounts.read();
            let m = mounts.iter().find(|m| m.fstype == "devtmpfs").ok_or(Errno::ENODEV)?;
            return Ok(("devtmpfs", m.root.clone()));
        }
        _ => {}
    }
    let makers = MAKERS.lock();
    let (name, make) = makers.iter().find(|(n, _)| n.as_bytes() == fstype).ok_or(Errno::ENODEV)?;
    let (name, make) = (*name, *make);
    drop(makers);
    Ok((name, make()?))
}

/// Runs `f` on every mount, oldest first (`/proc/mounts`).
pub fn for_each_mount(f: &mut dyn FnMut(&Mount)) {
    if let Some(t) = TREE.get() {
        for m in t.mounts.read().iter() {
            f(m);
        }
    }
}

/// Registers how magic links are reopened (`procfs`).
pub fn set_reopen(reopen: Reopen) {
    REOPEN.call_once(|| reopen);
}

/// The open file magic link `node` stands for.
///
/// # Errors
/// `ENOENT` (the descriptor is gone), `ENOMEM`.
pub fn reopen(node: &Arc<dyn Inode>) -> Result<Arc<dyn File>, Errno> {
    let f = REOPEN.get().ok_or(Errno::ENOENT)?;
    f(node)
}

/// A process's place in the tree (Linux's `fs_struct`): its root, its working directory and the
/// path it was reached by, and its umask.
#[derive(Clone)]
pub struct FsContext {
    /// Absolute paths start here; `..` stops here.
    pub root: Arc<dyn Inode>,
    /// The working directory.
    pub cwd: Arc<dyn Inode>,
    /// Its absolute path when it became the working directory (what a description opened by a
    /// relative path remembers; `getcwd` asks the tree again). Shared, so that a copy of the
    /// context (every path call takes one) allocates nothing.
    pub cwd_path: Arc<Vec<u8>>,
    /// The permission bits new nodes do not get (`umask(2)`; 022 to start, as Linux's init).
    pub umask: u32,
}

impl FsContext {
    /// The context of the first process: the tree's root as root and working directory.
    ///
    /// # Errors
    /// `ENOENT` before the tree exists.
    pub fn first() -> Result<Self, Errno> {
        let root = root().ok_or(Errno::ENOENT)?;
        let cwd_path = crate::memory::fallible::arc(super::copy_bytes(b"/")?).map_err(|_| Errno::ENOMEM)?;
        Ok(Self { cwd: root.clone(), root, cwd_path, umask: 0o022 })
    }
}

/// How a process's call walks the tree: from its root and working directory (`ctx`), as its
/// credentials allow (search permission on every directory, `cred`), under `openat2`'s
/// restrictions (`restrict`; scoped walks take their start as the root).
pub struct Walk<'a> {
    /// The process's place in the tree.
    pub ctx: &'a FsContext,
    /// Who walks.
    pub cred: &'a Credentials,
    /// `RESOLVE_*`.
    pub restrict: Restrict,
}

impl Walk<'_> {
    /// Runs `f` with a walker for a walk from `start`.
    fn with<R>(
        &self,
        start: &Arc<dyn Inode>,
        f: impl FnOnce(&Walker<'_>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let tree = TREE.get().ok_or(Errno::ENOENT)?;
        let mounts = tree.mounts.read();
        let root = if self.restrict.beneath || self.restrict.in_root { start } else { &self.ctx.root };
        let cred = self.cred;
        let search = |dir: &Arc<dyn Inode>| cred.permission(&dir.metadata(), may::EXEC);
        // Root searches every directory (`CAP_DAC_READ_SEARCH`): no check to make.
        let search: Option<Search<'_>> =
            if cred.capable(cap::DAC_READ_SEARCH) { None } else { Some(&search) };
        f(&Walker { root, mounts: &mounts, restrict: self.restrict, search })
    }

    /// The node `path` names, a relative path from `start` (`follow`: follow a link in the last
    /// component; a magic link that stands for an open file without a node is returned as
    /// itself, for the caller to reopen).
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `EACCES`, `EXDEV`, `ENOMEM`.
    pub fn lookup(&self, start: &Arc<dyn Inode>, path: &[u8], follow: bool) -> Result<Arc<dyn Inode>, Errno> {
        self.with(start, |w| w.resolve(start, path, follow))
    }

    /// The directory holding the last component of `path`, and that component.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `EACCES`, `EXDEV`, `ENOMEM`.
    pub fn lookup_parent(&self, start: &Arc<dyn Inode>, path: &[u8]) -> Result<Parent, Errno> {
        self.with(start, |w| w.resolve_parent(start, path))
    }

    /// What `path` names, or where its missing last component would be made.
    ///
    /// # Errors
    /// As [`Self::lookup`].
    pub fn lookup_or_parent(&self, start: &Arc<dyn Inode>, path: &[u8], follow: bool) -> Result<Last, Errno> {
        self.with(start, |w| w.resolve_or_parent(start, path, follow))
    }
}

/// The kernel's own lookups (the first program, its console): from `ctx`'s root, with root's
/// rights and no restrictions.
///
/// # Errors
/// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `ENOMEM`.
pub fn lookup(
    ctx: &FsContext,
    start: &Arc<dyn Inode>,
    path: &[u8],
    follow: bool,
) -> Result<Arc<dyn Inode>, Errno> {
    let root = Credentials::root();
    Walk { ctx, cred: &root, restrict: Restrict::default() }.lookup(start, path, follow)
}

/// Linux's `may_create`: whether `cred` may make `name` in directory `dir` (`EEXIST` when it
/// exists, `ENOENT` when `dir` was removed, `EACCES` without write and search permission on it),
/// in that order.
///
/// # Errors
/// As above.
pub fn may_create(cred: &Credentials, dir: &Arc<dyn Inode>, name: &[u8]) -> Result<(), Errno> {
    if dir.lookup(name).is_ok() {
        return Err(Errno::EEXIST);
    }
    let m = dir.metadata();
    if m.kind == FileType::Directory && m.nlink == 0 {
        return Err(Errno::ENOENT);
    }
    cred.permission(&m, may::WRITE | may::EXEC)
}

/// Who a new node of kind `kind` with the bits `perm` made in `dir` by `cred` belongs to, and
/// the bits it gets (`Credentials::new_owner`): its creator and permission bits.
pub fn creator(cred: &Credentials, dir: &Arc<dyn Inode>, kind: FileType, perm: u32) -> (Creator, u32) {
    let (uid, gid, perm) = cred.new_owner(&dir.metadata(), kind, perm);
    (Creator { uid, gid, now: now() }, perm)
}

/// Whether `dir` has something mounted on it.
pub fn is_mount_point(dir: &Arc<dyn Inode>) -> bool {
    TREE.get().is_some_and(|t| t.mounts.read().is_mount_point(dir))
}

/// The absolute path of directory `dir` as seen from `ctx`'s root (`getcwd`, `/proc/PID/cwd`):
/// up through `..` to the root, each step's name found in its parent's listing.
///
/// # Errors
/// `ENOENT` when `dir` was removed (no parent lists it), `ENAMETOOLONG`, `ENOMEM`.
pub fn path_of_dir(ctx: &FsContext, dir: &Arc<dyn Inode>) -> Result<Vec<u8>, Errno> {
    let tree = TREE.get().ok_or(Errno::ENOENT)?;
    let mounts = tree.mounts.read();
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut at = dir.clone();
    let mut total = 0usize;
    loop {
        if same(&at, &ctx.root) {
            break;
        }
        if let Some(point) = mounts.covered_by(&at) {
            at = point;
            continue;
        }
        let parent = at.parent()?;
        if same(&parent, &at) {
            // A file system's root not mounted anywhere (or outside this process's root).
            break;
        }
        let ino = at.metadata().ino;
        let mut found = None;
        parent.readdir(2, &mut |e, _| {
            if e.ino == ino && e.kind == FileType::Directory {
                found = Some(super::copy_bytes(e.name));
                return false;
            }
            true
        })?;
        let name = found.ok_or(Errno::ENOENT)??;
        total += name.len() + 1;
        if total >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        names.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        names.push(name);
        at = parent;
    }
    let mut out = Vec::new();
    out.try_reserve_exact(total.max(1)).map_err(|_| Errno::ENOMEM)?;
    for name in names.iter().rev() {
        out.push(b'/');
        out.extend_from_slice(name);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

/// `path` made absolute against directory `dir_path` and cleaned of `.`, `..` and repeated
/// slashes, as text (what a description remembers of the path it was opened by).
///
/// # Errors
/// `ENOMEM`.
pub fn absolute(dir_path: &[u8], path: &[u8]) -> Result<Vec<u8>, Errno> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let base: &[u8] = if vfs::path::is_absolute(path) { b"" } else { dir_path };
    for c in vfs::path::components(base).chain(vfs::path::components(path)) {
        match c {
            b"." => {}
            b".." => {
                parts.pop();
            }
            c => {
                parts.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
                parts.push(c);
            }
        }
    }
    let mut out = Vec::new();
    out.try_reserve(parts.iter().map(|p| p.len() + 1).sum::<usize>().max(1)).map_err(|_| Errno::ENOMEM)?;
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

/// What an [`open`] gives.
pub enum Opened {
    /// The open file, and the file the open made, if it made one.
    File(Arc<dyn File>, Option<Created>),
    /// An existing regular file opened with `O_TRUNC` (permission granted): the caller truncates
    /// it, with the unmapping of its pages from every process that maps it, which this layer
    /// cannot reach.
    Truncate(Arc<dyn File>),
    /// A FIFO open waits for the other side: block on this event key and restart.
    Wait(usize),
}

/// A file an `open(O_CREAT)` made: the caller removes it again ([`Created::undo`]) if it cannot
/// give the program a descriptor for it, so that a failed open leaves no trace.
pub struct Created {
    dir: Arc<dyn Inode>,
    name: Vec<u8>,
}

impl Created {
    /// Removes the file the open made (nothing else can have named it meanwhile but another
    /// program, whose name stays if it replaced ours).
    pub fn undo(self) {
        let _ = self.dir.unlink(&self.name, false, now());
    }
}

/// Opens `path` (relative to `start`, whose absolute path is `start_path`) with `flags` and, for
/// a new file, `mode`, for thread `tid` (a FIFO's waiting open is kept under it), walking as
/// `walk` says. Linux's order of checks (`build_open_flags`, `path_openat`, `do_open`,
/// `may_open`): the flags (`O_TMPFILE` without write access is `EINVAL`); the walk; `O_CREAT`
/// (`EEXIST` with `O_EXCL`, `EISDIR` for a directory, `EACCES` without write permission on the
/// directory; the umask and the directory's set-group-id bit for a new file); `O_DIRECTORY`
/// (`ENOTDIR`); a link (`ELOOP`); a directory for writing (`EISDIR`); permission (`EACCES`:
/// reading, writing, and `O_TRUNC`, which truncates whatever the access mode); then what the
/// node opens as.
///
/// # Errors
/// `ENOENT`, `ENOTDIR`, `EISDIR`, `EEXIST`, `ELOOP`, `ENAMETOOLONG`, `EACCES`, `EPERM`, `EXDEV`,
/// `ENXIO`, `EINVAL`, `ENOSPC`, `ENOMEM`.
pub fn open(
    walk: &Walk<'_>,
    start: &Arc<dyn Inode>,
    start_path: &[u8],
    path: &[u8],
    flags: u32,
    mode: u32,
    tid: u32,
) -> Result<Opened, Errno> {
    let writes = flags & O_ACCMODE != O_RDONLY;
    if flags & O_TMPFILE == O_TMPFILE {
        return tmpfile(walk, start, start_path, path, flags, mode).map(|f| Opened::File(f, None));
    }
    let path_only = flags & O_PATH != 0;
    // O_EXCL with O_CREAT never follows a link in the last component (Linux's
    // `build_open_flags`).
    let creating = flags & O_CREAT != 0 && !path_only;
    let follow = flags & O_NOFOLLOW == 0 && !(creating && flags & O_EXCL != 0);
    let (node, abs) = if creating {
        match walk.lookup_or_parent(start, path, follow)? {
            Last::Found(node) => {
                if flags & O_EXCL != 0 {
                    return Err(Errno::EEXIST);
                }
                if node.metadata().kind == FileType::Directory {
                    return Err(Errno::EISDIR);
                }
                (node, absolute(start_path, path)?)
            }
            Last::Missing(parent) => {
                let name = parent.name.unwrap_or_default();
                if parent.trailing_slash {
                    return Err(Errno::EISDIR);
                }
                may_create(walk.cred, &parent.dir, &name)?;
                let (who, perm) =
                    creator(walk.cred, &parent.dir, FileType::Regular, mode & 0o7777 & !walk.ctx.umask);
                // What can fail after the file exists is made first (its path, its file).
                let abs = absolute(start_path, path)?;
                let node = parent.dir.create(&name, NewNode::File, perm, who)?;
                let made = Created { dir: parent.dir, name };
                let file = NodeFile::new(Named { node, path: abs }, false);
                // A new file: nothing runs from it yet, so the right to write is granted.
                let file = if writes { file.for_writing()? } else { file };
                return match arc_file(file) {
                    Ok(file) => Ok(Opened::File(file, Some(made))),
                    Err(e) => {
                        made.undo();
                        Err(e)
                    }
                };
            }
        }
    } else {
        let node = walk.lookup(start, path, follow)?;
        (node, absolute(start_path, path)?)
    };
    if node.is_magic_link() && follow {
        // A descriptor's open file without a node (a pipe, a memfd): the same file again.
        return Ok(Opened::File(reopen(&node)?, None));
    }
    let m = node.metadata();
    if flags & O_DIRECTORY != 0 && m.kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    let named = Named { node, path: abs };
    if path_only {
        return Ok(Opened::File(arc_file(NodeFile::new(named, true))?, None));
    }
    // Linux's `may_open`.
    let mut want = if writes { may::WRITE } else { 0 };
    if flags & O_ACCMODE != O_WRONLY {
        want |= may::READ;
    }
    let truncate = flags & O_TRUNC != 0 && m.kind == FileType::Regular;
    if truncate {
        want |= may::WRITE;
    }
    match m.kind {
        FileType::Symlink => return Err(Errno::ELOOP), // O_NOFOLLOW on a link
        FileType::Directory if want & may::WRITE != 0 => return Err(Errno::EISDIR),
        _ => {}
    }
    walk.cred.permission(&m, want)?;
    if flags & O_NOATIME != 0 && !walk.cred.owns(&m) {
        return Err(Errno::EPERM);
    }
    match m.kind {
        FileType::Directory | FileType::Regular => {
            // Linux's `get_write_access` (`do_dentry_open`, and `handle_truncate` for `O_TRUNC`):
            // the file a program runs from is not opened for writing or truncated (`ETXTBSY`).
            if truncate
                && !writes
                && let Some(cache) = super::pagecache::of_node(&named.node)
            {
                drop(cache.get_write_access()?); // only for the truncation, then given back
            }
            let file = NodeFile::new(named, false);
            let file = if writes { file.for_writing()? } else { file };
            let file = arc_file(file)?;
            Ok(if truncate { Opened::Truncate(file) } else { Opened::File(file, None) })
        }
        FileType::CharDevice => Ok(Opened::File(super::dev::open(named)?, None)),
        FileType::Fifo => match super::pipe::open_fifo(&named.node, &named.path, flags, tid)? {
            super::pipe::FifoOpen::Open(f) => Ok(Opened::File(f, None)),
            super::pipe::FifoOpen::Wait(key) => Ok(Opened::Wait(key)),
        },
        FileType::BlockDevice | FileType::Socket => Err(Errno::ENXIO),
        FileType::Symlink => Err(Errno::ELOOP),
    }
}

/// `open(O_TMPFILE)`: an unnamed regular file in the directory `path` names (Linux's
/// `do_tmpfile`): `EINVAL` without write access or with `O_CREAT`; the walk (`ENOENT`,
/// `ENOTDIR`); write and search permission on the directory (`EACCES`); `EOPNOTSUPP` for a file
/// system without unnamed files. Linkable unless `O_EXCL`. What `/proc/PID/fd` shows of it is
/// Linux's `DIR/#INO (deleted)`.
fn tmpfile(
    walk: &Walk<'_>,
    start: &Arc<dyn Inode>,
    start_path: &[u8],
    path: &[u8],
    flags: u32,
    mode: u32,
) -> Result<Arc<dyn File>, Errno> {
    if flags & O_ACCMODE == O_RDONLY || flags & O_CREAT != 0 {
        return Err(Errno::EINVAL);
    }
    let dir = walk.lookup(start, path, flags & O_NOFOLLOW == 0)?;
    let m = dir.metadata();
    if m.kind != FileType::Directory {
        return Err(Errno::ENOTDIR);
    }
    walk.cred.permission(&m, may::WRITE | may::EXEC)?;
    let (who, perm) = creator(walk.cred, &dir, FileType::Regular, mode & 0o7777 & !walk.ctx.umask);
    let node = dir.tmpfile(perm, who, flags & O_EXCL == 0)?;
    let mut abs = absolute(start_path, path)?;
    super::file::push_fmt(&mut abs, format_args!("/#{}", node.metadata().ino))?;
    arc_file(NodeFile::new(Named { node, path: abs }, false).for_writing()?)
}

fn arc_file<F: File>(f: F) -> Result<Arc<dyn File>, Errno> {
    Ok(crate::memory::fallible::arc(f).map_err(|_| Errno::ENOMEM)?)
}
