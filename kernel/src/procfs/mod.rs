//! `/proc` and `/sys`: the file systems made of the kernel's state, as Linux's procfs and sysfs
//! show it to programs. Above `process` (they read processes) and mounted on the tree that `fs`
//! keeps, at boot and by `mount -t proc`/`mount -t sysfs`.
//!
//! - the root lists the machine-wide files ([`global`]), `self` and `thread-self` (links to the
//!   caller's directory) and one directory per process;
//! - `/proc/PID/` holds the process's files ([`pid`]: `maps` from [`maps`], `status`, `stat`,
//!   `cmdline`, ...), the `exe`, `cwd` and `root` links and the `fd/` directory, whose entries
//!   are magic links: opening one opens the file the descriptor is open on, as Linux does;
//! - `/sys` is a fixed tree of the files programs read ([`global::SYS`]).
//!
//! Nodes are made as they are looked up and hold their process by pid: a directory of a process
//! that has gone is empty, and its files read as `ESRCH`, as Linux's do.
pub mod global;
pub mod maps;
pub mod pid;

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::time::Timespec;
use vfs::node::{DirEntry, FileType, Inode, Metadata, TimeChange};

use crate::fs::file::File;
use crate::fs::text::Synthetic;
use crate::process::Process;

/// `st_dev` of `/proc` (Linux's proc is usually 0:22 on a small machine).
pub const PROC_DEV: u64 = 22;
/// `st_dev` of `/sys`.
pub const SYS_DEV: u64 = 21;

/// What a node of `/proc` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Root,
    /// `self`: a link to the caller's directory.
    SelfLink,
    /// `thread-self`: a link to the caller's `PID/task/TID`.
    ThreadSelf,
    /// `PID/`.
    Pid(u32),
    /// A generated file of `PID/`.
    PidText(u32, pid::Text),
    /// `PID/exe`, `cwd`, `root`.
    PidLink(u32, pid::Link),
    /// `PID/fd/`.
    FdDir(u32),
    /// `PID/fd/N`: a magic link.
    Fd(u32, u32),
    /// `PID/task/`.
    TaskDir(u32),
}

/// A node of `/proc`.
pub struct ProcNode {
    kind: Kind,
    me: Weak<ProcNode>,
    parent: Option<Arc<dyn Inode>>,
    born: Timespec,
}

/// The process `pid`.
fn process(pid: u32) -> Result<Arc<Process>, Errno> {
    crate::process::family::by_pid(pid).ok_or(Errno::ESRCH)
}

/// Linux's `name_to_int`: decimal digits without a leading zero.
fn number(name: &[u8]) -> Option<u32> {
    if name.first() == Some(&b'0') && name.len() > 1 {
        return None;
    }
    core::str::from_utf8(name).ok()?.parse::<u32>().ok()
}

/// The entries of `/proc/PID/` besides the generated files: (name, kind).
const PID_DIRS: &[(&str, FileType)] = &[("fd", FileType::Directory), ("task", FileType::Directory)];

impl ProcNode {
    fn make(kind: Kind, parent: Option<Arc<dyn Inode>>, born: Timespec) -> Result<Arc<Self>, Errno> {
        crate::memory::fallible::arc_cyclic(|me| Self { kind, me: me.clone(), parent, born })
            .ok_or(Errno::ENOMEM)
    }

    fn me(&self) -> Result<Arc<dyn Inode>, Errno> {
        Ok(self.me.upgrade().ok_or(Errno::ENOENT)?)
    }

    fn child(&self, kind: Kind) -> Result<Arc<dyn Inode>, Errno> {
        Ok(Self::make(kind, Some(self.me()?), self.born)?)
    }

    fn ino(&self) -> u64 {
        match self.kind {
            Kind::Root => 1,
            Kind::SelfLink => 2,
            Kind::ThreadSelf => 3,
            Kind::Pid(pid) => u64::from(pid) << 16,
            Kind::PidText(pid, t) => u64::from(pid) << 16 | (t as u64 + 0x10),
            Kind::PidLink(pid, l) => u64::from(pid) << 16 | (l as u64 + 0x80),
            Kind::FdDir(pid) => u64::from(pid) << 16 | 0x100,
            Kind::TaskDir(pid) => u64::from(pid) << 16 | 0x101,
            Kind::Fd(pid, fd) => (u64::from(pid) << 16 | 0x8000) + u64::from(fd),
        }
    }

    fn kind_type(&self) -> FileType {
        match self.kind {
            Kind::Root | Kind::Pid(_) | Kind::FdDir(_) | Kind::TaskDir(_) => FileType::Directory,
            Kind::PidText(..) => FileType::Regular,
            Kind::SelfLink | Kind::ThreadSelf | Kind::PidLink(..) | Kind::Fd(..) => FileType::Symlink,
        }
    }
}

impl Inode for ProcNode {
    fn metadata(&self) -> Metadata {
        let kind = self.kind_type();
        let perm = match (self.kind, kind) {
            (Kind::Fd(..), _) => 0o700,
            (_, FileType::Directory) => 0o555,
            (_, FileType::Symlink) => 0o777,
            (Kind::PidText(_, t), _) => t.perm(),
            _ => 0o444,
        };
        let nlink = match self.kind {
            Kind::Root => 3,
            Kind::Pid(_) => 2 + PID_DIRS.len() as u32,
            _ if kind == FileType::Directory => 2,
            _ => 1,
        };
        let t = self.born;
        Metadata {
            dev: PROC_DEV,
            ino: self.ino(),
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            blocks: 0,
            blksize: 1024,
            atime: t,
            mtime: t,
            ctime: t,
        }
    }

    fn set_perm(&self, _perm: u32, _now: Timespec) -> Result<(), Errno> {
        Err(Errno::EPERM)
    }

    fn set_owner(&self, _uid: Option<u32>, _gid: Option<u32>, _now: Timespec) -> Result<(), Errno> {
        Err(Errno::EPERM)
    }

    fn set_times(&self, _change: TimeChange, _now: Timespec) -> Result<(), Errno> {
        Err(Errno::EPERM)
    }

    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        match self.kind {
            Kind::Root => match name {
                b"self" => self.child(Kind::SelfLink),
                b"thread-self" => self.child(Kind::ThreadSelf),
                _ => {
                    if let Some(pid) = number(name) {
                        process(pid).map_err(|_| Errno::ENOENT)?;
                        return self.child(Kind::Pid(pid));
                    }
                    let (i, (_, entry)) = global::PROC
                        .iter()
                        .enumerate()
                        .find(|(_, (n, _))| n.as_bytes() == name)
                        .ok_or(Errno::ENOENT)?;
                    Ok(Synthetic::node(
                        *entry,
                        Some(self.me()?),
                        PROC_DEV,
                        Synthetic::ino_of(1, i + 16),
                        self.born,
                    )?)
                }
            },
            Kind::Pid(pid) => {
                process(pid).map_err(|_| Errno::ENOENT)?;
                if let Some(t) = pid::Text::ALL.iter().find(|t| t.name().as_bytes() == name) {
                    return self.child(Kind::PidText(pid, *t));
                }
                if let Some(l) = pid::Link::ALL.iter().find(|l| l.name().as_bytes() == name) {
                    return self.child(Kind::PidLink(pid, *l));
                }
                match name {
                    b"fd" => self.child(Kind::FdDir(pid)),
                    b"task" => self.child(Kind::TaskDir(pid)),
                    _ => Err(Errno::ENOENT),
                }
            }
            Kind::FdDir(pid) => {
                let fd = number(name).ok_or(Errno::ENOENT)?;
                process(pid)?.posix.files.lock().file(u64::from(fd)).map_err(|_| Errno::ENOENT)?;
                self.child(Kind::Fd(pid, fd))
            }
            Kind::TaskDir(pid) => {
                // The threads are not listed one by one: the process's own id names its directory.
                if number(name) == Some(pid) { self.child(Kind::Pid(pid)) } else { Err(Errno::ENOENT) }
            }
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn readdir(&self, cookie: u64, each: &mut dyn FnMut(DirEntry<'_>, u64) -> bool) -> Result<(), Errno> {
        if self.kind_type() != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        let mut names: Vec<(Vec<u8>, u64, FileType)> = Vec::new();
        let mut add = |name: &[u8], ino: u64, kind: FileType| -> Result<(), Errno> {
            names.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
            names.push((crate::fs::copy_bytes(name)?, ino, kind));
            Ok(())
        };
        let up = self.parent.as_ref().map_or(self.ino(), |p| p.metadata().ino);
        add(b".", self.ino(), FileType::Directory)?;
        add(b"..", up, FileType::Directory)?;
        match self.kind {
            Kind::Root => {
                for (i, (name, entry)) in global::PROC.iter().enumerate() {
                    add(name.as_bytes(), Synthetic::ino_of(1, i + 16), Synthetic::kind_of(*entry))?;
                }
                add(b"self", 2, FileType::Symlink)?;
                add(b"thread-self", 3, FileType::Symlink)?;
                let mut pids: Vec<u32> = Vec::new();
                let mut failed = false;
                crate::process::family::for_each_process(|p| {
                    if pids.try_reserve(1).is_ok() {
                        pids.push(p.pid);
                    } else {
                        failed = true;
                    }
                });
                if failed {
                    return Err(Errno::ENOMEM);
                }
                for pid in pids {
                    let mut text = [0u8; 10];
                    let n = decimal(pid, &mut text);
                    add(&text[..n], u64::from(pid) << 16, FileType::Directory)?;
                }
            }
            Kind::Pid(pid) if process(pid).is_ok() => {
                for t in pid::Text::ALL {
                    add(t.name().as_bytes(), u64::from(pid) << 16 | (*t as u64 + 0x10), FileType::Regular)?;
                }
                for l in pid::Link::ALL {
                    add(l.name().as_bytes(), u64::from(pid) << 16 | (*l as u64 + 0x80), FileType::Symlink)?;
                }
                add(b"fd", u64::from(pid) << 16 | 0x100, FileType::Directory)?;
                add(b"task", u64::from(pid) << 16 | 0x101, FileType::Directory)?;
            }
            Kind::FdDir(pid) => {
                if let Ok(p) = process(pid) {
                    let fds: Vec<usize> = {
                        let files = p.posix.files.lock();
                        let mut v = Vec::new();
                        v.try_reserve(files.numbers().count()).map_err(|_| Errno::ENOMEM)?;
                        v.extend(files.numbers());
                        v
                    };
                    for fd in fds {
                        let mut text = [0u8; 10];
                        let n = decimal(fd as u32, &mut text);
                        add(&text[..n], (u64::from(pid) << 16 | 0x8000) + fd as u64, FileType::Symlink)?;
                    }
                }
            }
            Kind::TaskDir(pid) => {
                let mut text = [0u8; 10];
                let n = decimal(pid, &mut text);
                add(&text[..n], u64::from(pid) << 16, FileType::Directory)?;
            }
            _ => {}
        }
        for (i, (name, ino, kind)) in names.iter().enumerate().skip(cookie as usize) {
            if !each(DirEntry { ino: *ino, kind: *kind, name }, i as u64 + 1) {
                break;
            }
        }
        Ok(())
    }

    fn parent(&self) -> Result<Arc<dyn Inode>, Errno> {
        if self.kind_type() != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        match &self.parent {
            Some(p) => Ok(p.clone()),
            None => self.me(),
        }
    }

    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        let ids = crate::process::current_ids();
        match self.kind {
            Kind::SelfLink => {
                let (pid, _) = ids.ok_or(Errno::ENOENT)?;
                let mut out = Vec::new();
                crate::fs::file::push_fmt(&mut out, format_args!("{pid}"))?;
                Ok(out)
            }
            Kind::ThreadSelf => {
                let (pid, tid) = ids.ok_or(Errno::ENOENT)?;
                let mut out = Vec::new();
                crate::fs::file::push_fmt(&mut out, format_args!("{pid}/task/{tid}"))?;
                Ok(out)
            }
            Kind::PidLink(pid, l) => pid::link(&*process(pid).map_err(|_| Errno::ENOENT)?, l),
            Kind::Fd(pid, fd) => {
                let p = process(pid).map_err(|_| Errno::ENOENT)?;
                let f = p.posix.files.lock().file(u64::from(fd)).map_err(|_| Errno::ENOENT)?;
                f.file.describe()
            }
            _ => Err(Errno::EINVAL),
        }
    }

    fn is_magic_link(&self) -> bool {
        matches!(self.kind, Kind::Fd(..) | Kind::PidLink(..))
    }

    fn magic_node(&self) -> Result<Option<Arc<dyn Inode>>, Errno> {
        match self.kind {
            Kind::Fd(pid, fd) => {
                let p = process(pid).map_err(|_| Errno::ENOENT)?;
                let f = p.posix.files.lock().file(u64::from(fd)).map_err(|_| Errno::ENOENT)?;
                Ok(f.file.inode().cloned())
            }
            Kind::PidLink(pid, l) => Ok(pid::link_node(&*process(pid).map_err(|_| Errno::ENOENT)?, l)),
            _ => Ok(None),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        match self.kind {
            Kind::PidText(pid, pid::Text::Pagemap) => {
                // The frame numbers only for a reader with CAP_SYS_ADMIN (Linux's `pagemap_read`).
                let reader =
                    crate::process::current_ids().and_then(|(me, _)| crate::process::family::by_pid(me));
                let show_pfn =
                    reader.is_some_and(|r| r.posix.cred().capable(crate::fs::cred::cap::SYS_ADMIN));
                maps::pagemap(&*process(pid)?, offset, buf, show_pfn)
            }
            _ => Err(self.not_a_file()),
        }
    }

    fn generate(&self) -> Option<Result<Vec<u8>, Errno>> {
        match self.kind {
            Kind::PidText(_, pid::Text::Pagemap) => None,
            Kind::PidText(pid, t) => Some(process(pid).and_then(|p| pid::generate(&p, t))),
            _ => None,
        }
    }

    fn truncate(&self, _size: u64, _now: Timespec) -> Result<(), Errno> {
        match self.kind_type() {
            FileType::Directory => Err(Errno::EISDIR),
            _ => Ok(()),
        }
    }

    fn write_at(&self, _offset: u64, _buf: &[u8], _now: Timespec) -> Result<usize, Errno> {
        match self.kind {
            Kind::PidText(_, t) if t.perm() & 0o200 != 0 => Ok(_buf.len()),
            _ if self.kind_type() == FileType::Directory => Err(Errno::EISDIR),
            _ => Err(Errno::EINVAL),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Writes `n` in decimal into `out`; the length.
fn decimal(mut n: u32, out: &mut [u8; 10]) -> usize {
    let mut tmp = [0u8; 10];
    let mut len = 0;
    loop {
        tmp[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = tmp[len - 1 - i];
    }
    len
}

/// The open file a magic link (`/proc/PID/fd/N`) stands for (`fs::namespace`'s reopen).
fn reopen(node: &Arc<dyn Inode>) -> Result<Arc<dyn File>, Errno> {
    let proc_node = node.as_any().downcast_ref::<ProcNode>().ok_or(Errno::ENOENT)?;
    let Kind::Fd(pid, fd) = proc_node.kind else { return Err(Errno::ENOENT) };
    let p = process(pid).map_err(|_| Errno::ENOENT)?;
    let f = p.posix.files.lock().file(u64::from(fd)).map_err(|_| Errno::ENOENT)?;
    Ok(f.file.clone())
}

/// A new `/proc` instance.
///
/// # Errors
/// `ENOMEM`.
pub fn new_proc() -> Result<Arc<dyn Inode>, Errno> {
    Ok(ProcNode::make(Kind::Root, None, crate::fs::node_file::now())?)
}

/// A new `/sys` instance.
///
/// # Errors
/// `ENOMEM`.
pub fn new_sys() -> Result<Arc<dyn Inode>, Errno> {
    Ok(Synthetic::root(global::SYS, SYS_DEV, 1)?)
}

/// Mounts `/proc` and `/sys` on the tree at boot, and registers their types for `mount(2)` and
/// the magic links' reopening.
///
/// # Errors
/// `ENOENT` (no tree, or no `/proc` or `/sys` directory in it), `ENOMEM`.
pub fn init() -> Result<(), Errno> {
    use crate::fs::namespace;
    namespace::set_reopen(reopen);
    namespace::register_type("proc", new_proc);
    namespace::register_type("sysfs", new_sys);
    let root = namespace::root().ok_or(Errno::ENOENT)?;
    let proc_dir = root.lookup(b"proc")?;
    namespace::mount(
        &proc_dir,
        new_proc()?,
        "proc",
        "proc",
        "rw,nosuid,nodev,noexec,relatime",
        crate::fs::copy_bytes(b"/proc")?,
    )?;
    let sys_dir = root.lookup(b"sys")?;
    namespace::mount(
        &sys_dir,
        new_sys()?,
        "sysfs",
        "sysfs",
        "rw,nosuid,nodev,noexec,relatime",
        crate::fs::copy_bytes(b"/sys")?,
    )?;
    Ok(())
}
