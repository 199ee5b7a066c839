//! A RAM file system, as Linux's ramfs and tmpfs are: every node lives in memory, a regular
//! file's bytes are its [`Contents`] (the kernel's page cache), and nothing is ever written
//! back. The root file system (unpacked from the initramfs) and `/tmp` are instances.
//!
//! - **Directories** keep their entries in creation order, each with a position that never
//!   changes, so a listing read in several `getdents64` calls while entries come and go neither
//!   repeats nor skips one that stays (positions 0 and 1 are `.` and `..`).
//! - **Links**: a node counts its hard links (`nlink`; a directory 2 + its subdirectories) and
//!   lives on while open after its last name is gone (the kernel's descriptors hold it).
//! - **Limits**: an instance may cap its inodes (`ENOSPC`, tmpfs's `nr_inodes`); the bytes are
//!   the contents' to limit.
//! - **Locks**: each directory has its own; a rename between two directories takes both, the
//!   lower address first, so two renames cannot deadlock.
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::alloc::Layout;
use core::any::Any;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use linux_abi::Errno;
use linux_abi::fcntl::{PATH_MAX, RENAME_EXCHANGE, RENAME_NOREPLACE, RENAME_WHITEOUT};
use linux_abi::time::Timespec;
use spin::Mutex;

use crate::node::{Contents, Creator, DirEntry, FileType, Inode, Metadata, NewContents, NewNode, TimeChange};

/// The most hard links a node may have (Linux's ramfs has no limit but `nlink` is 32 bits).
const LINK_MAX: u32 = u32::MAX - 1;

/// One RAM file system instance.
pub struct RamFs {
    shared: Arc<Shared>,
    root: Arc<RamNode>,
}

/// Makes the allocation `f` does, of `layout`, fallible: reserves a block of that layout first
/// and hands it to the allocation (the kernel's `memory::fallible`), or returns false without
/// calling `f` when the heap has no room. `Arc::new_cyclic`, which a node needs, has no
/// fallible form in stable Rust; this is how a node's allocation fails with `ENOMEM` instead
/// of aborting.
pub type Reserve = fn(Layout, &mut dyn FnMut()) -> bool;

/// A [`Reserve`] for hosts whose allocation failures abort anyway (the tests): runs `f`.
pub fn reserve_infallibly(_layout: Layout, f: &mut dyn FnMut()) -> bool {
    f();
    true
}

/// How an instance is made.
#[derive(Clone, Copy)]
pub struct Config {
    /// Its device number (`st_dev` of every node).
    pub dev: u64,
    /// The most nodes it may hold (`usize::MAX`: no limit; tmpfs's `nr_inodes`): `ENOSPC` past it.
    pub max_inodes: usize,
    /// `st_blksize` of its nodes (the page size).
    pub blksize: u32,
    /// Makes the contents of a new regular file.
    pub new_contents: NewContents,
    /// Makes a node's allocation fallible.
    pub reserve: Reserve,
}

/// What every node of an instance shares.
struct Shared {
    config: Config,
    next_ino: AtomicU64,
    inodes: AtomicUsize,
    /// Held across a rename between two directories, so that the check that a directory does
    /// not move under itself sees a tree no other rename changes meanwhile (Linux's
    /// `s_vfs_rename_mutex`).
    rename: Mutex<()>,
}

/// The layout `Arc` allocates for a `T` (`alloc::sync::ArcInner`: the strong count, the weak
/// count and the value, `#[repr(C)]`).
#[repr(C)]
struct ArcInner<T> {
    strong: usize,
    weak: usize,
    data: T,
}

impl RamFs {
    /// An empty instance as `config` says, with a root directory of permissions `perm` owned by
    /// `who`.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn new(config: Config, perm: u32, who: Creator) -> Result<Self, Errno> {
        let mut shared = None;
        let reserved = (config.reserve)(Layout::new::<ArcInner<Shared>>(), &mut || {
            shared = Some(Arc::new(Shared {
                config,
                next_ino: AtomicU64::new(1),
                inodes: AtomicUsize::new(0),
                rename: Mutex::new(()),
            }));
        });
        let shared = shared.filter(|_| reserved).ok_or(Errno::ENOMEM)?;
        let root =
            RamNode::make(&shared, FileType::Directory, perm, who, Data::Dir(Mutex::new(Dir::new(None))))?;
        root.meta.lock().nlink = 2;
        Ok(Self { shared, root })
    }

    /// The root directory.
    pub fn root(&self) -> Arc<dyn Inode> {
        self.root.clone()
    }

    /// Nodes in use.
    pub fn inodes(&self) -> usize {
        self.shared.inodes.load(Ordering::Relaxed)
    }

    /// The device number (`st_dev` of every node).
    pub fn dev(&self) -> u64 {
        self.shared.config.dev
    }
}

/// The mutable part of a node's metadata.
struct Meta {
    perm: u32,
    nlink: u32,
    /// An unnamed file that one `link` may name (Linux's `I_LINKABLE`).
    linkable: bool,
    uid: u32,
    gid: u32,
    rdev: u64,
    atime: Timespec,
    mtime: Timespec,
    ctime: Timespec,
}

enum Data {
    Dir(Mutex<Dir>),
    File(Arc<dyn Contents>),
    Symlink(Vec<u8>),
    /// FIFO, device node, socket: only metadata here.
    Special,
}

/// A directory's entries and its parent.
struct Dir {
    /// `(position, name, node)`, in position order.
    entries: Vec<(u64, Vec<u8>, Arc<RamNode>)>,
    next_pos: u64,
    /// The parent (`None`: the root, its own parent).
    parent: Option<Weak<RamNode>>,
}

impl Dir {
    fn new(parent: Option<Weak<RamNode>>) -> Self {
        Self { entries: Vec::new(), next_pos: 2, parent }
    }

    fn find(&self, name: &[u8]) -> Option<usize> {
        self.entries.iter().position(|(_, n, _)| n.as_slice() == name)
    }

    fn insert(&mut self, name: &[u8], node: Arc<RamNode>) -> Result<(), Errno> {
        let name = self.room_for(name)?;
        self.push(name, node);
        Ok(())
    }

    /// Makes room for one more entry and copies its name: the fallible half of an insertion,
    /// done before a rename changes anything, so that it cannot fail half-way.
    fn room_for(&mut self, name: &[u8]) -> Result<Vec<u8>, Errno> {
        self.entries.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        let mut owned = Vec::new();
        owned.try_reserve_exact(name.len()).map_err(|_| Errno::ENOMEM)?;
        owned.extend_from_slice(name);
        Ok(owned)
    }

    /// Adds an entry whose room [`Self::room_for`] made.
    fn push(&mut self, name: Vec<u8>, node: Arc<RamNode>) {
        self.entries.push((self.next_pos, name, node));
        self.next_pos += 1;
    }
}

/// A node of a [`RamFs`].
pub struct RamNode {
    shared: Arc<Shared>,
    me: Weak<RamNode>,
    ino: u64,
    kind: FileType,
    meta: Mutex<Meta>,
    data: Data,
}

impl Drop for RamNode {
    fn drop(&mut self) {
        self.shared.inodes.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RamNode {
    fn make(
        shared: &Arc<Shared>,
        kind: FileType,
        perm: u32,
        who: Creator,
        data: Data,
    ) -> Result<Arc<Self>, Errno> {
        let max = shared.config.max_inodes;
        let counted =
            shared.inodes.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
        if counted.is_err() {
            return Err(Errno::ENOSPC);
        }
        let ino = shared.next_ino.fetch_add(1, Ordering::Relaxed);
        let meta = Meta {
            perm: perm & 0o7777,
            nlink: 1,
            linkable: false,
            uid: who.uid,
            gid: who.gid,
            rdev: 0,
            atime: who.now,
            mtime: who.now,
            ctime: who.now,
        };
        // The count taken above is given back by `Drop` once the node is made, and here if it is
        // not.
        let mut made = None;
        let mut parts = Some((meta, data));
        let reserved = (shared.config.reserve)(Layout::new::<ArcInner<Self>>(), &mut || {
            if let Some((meta, data)) = parts.take() {
                made = Some(Arc::new_cyclic(|me| Self {
                    shared: shared.clone(),
                    me: me.clone(),
                    ino,
                    kind,
                    meta: Mutex::new(meta),
                    data,
                }));
            }
        });
        let _ = reserved; // `made` says it: the closure ran only if the block was there
        match made {
            Some(node) => Ok(node),
            None => {
                shared.inodes.fetch_sub(1, Ordering::Relaxed);
                Err(Errno::ENOMEM)
            }
        }
    }

    fn this(&self) -> Arc<RamNode> {
        // A node is only reached through an `Arc`, so one exists while `&self` does.
        self.me.upgrade().unwrap_or_else(|| unreachable_node())
    }

    fn dir(&self) -> Result<&Mutex<Dir>, Errno> {
        match &self.data {
            Data::Dir(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// `ENOENT` for a directory that was removed (Linux's `IS_DEADDIR`): nothing is made in it
    /// and it is not listed. The caller holds its directory lock.
    fn alive(&self) -> Result<(), Errno> {
        if self.kind == FileType::Directory && self.meta.lock().nlink == 0 {
            Err(Errno::ENOENT)
        } else {
            Ok(())
        }
    }

    fn touch_dir(&self, now: Timespec) {
        let mut m = self.meta.lock();
        m.mtime = now;
        m.ctime = now;
    }

    /// `other` as a node of this same instance.
    fn own<'a>(&self, other: &'a Arc<dyn Inode>) -> Result<&'a RamNode, Errno> {
        match other.as_any().downcast_ref::<RamNode>() {
            Some(n) if Arc::ptr_eq(&n.shared, &self.shared) => Ok(n),
            _ => Err(Errno::EXDEV),
        }
    }

    /// Whether `ancestor` is this directory or one above it.
    fn is_within(&self, ancestor: &RamNode) -> bool {
        let mut at = self.this();
        loop {
            if core::ptr::eq(&*at, ancestor) {
                return true;
            }
            let parent = match &at.data {
                Data::Dir(d) => d.lock().parent.as_ref().and_then(Weak::upgrade),
                _ => None,
            };
            match parent {
                Some(p) => at = p,
                None => return false,
            }
        }
    }
}

/// The one way to get here would be a method called on a node whose last `Arc` is being dropped
/// at that moment, which no caller can do (it holds an `Arc` to call the method).
#[cold]
fn unreachable_node() -> ! {
    unreachable!("a RamNode is only reached through an Arc")
}

/// The size a directory of `entries` names reports: tmpfs's (Linux's `shmem`) bookkeeping,
/// `BOGO_DIRENT_SIZE` (20) bytes for each name plus two for `.` and `..`, which is what `ls -l`
/// and `stat` show for a directory of Linux's `/tmp`, `/dev/shm` and initramfs root.
fn directory_size(entries: usize) -> u64 {
    const BOGO_DIRENT_SIZE: u64 = 20;
    BOGO_DIRENT_SIZE * (2 + entries as u64)
}

/// The metadata a node reports.
fn metadata_of(node: &RamNode) -> Metadata {
    // The directory's lock is taken (and dropped) before the metadata's, never inside it.
    let (size, blocks) = match &node.data {
        Data::File(c) => (c.size(), c.blocks()),
        Data::Symlink(t) => (t.len() as u64, 0),
        Data::Dir(d) => (directory_size(d.lock().entries.len()), 0),
        Data::Special => (0, 0),
    };
    let m = node.meta.lock();
    Metadata {
        dev: node.shared.config.dev,
        ino: node.ino,
        kind: node.kind,
        perm: m.perm,
        nlink: m.nlink,
        uid: m.uid,
        gid: m.gid,
        rdev: m.rdev,
        size,
        blocks,
        blksize: node.shared.config.blksize,
        atime: m.atime,
        mtime: m.mtime,
        ctime: m.ctime,
    }
}

impl Inode for RamNode {
    fn metadata(&self) -> Metadata {
        metadata_of(self)
    }

    fn set_perm(&self, perm: u32, now: Timespec) -> Result<(), Errno> {
        let mut m = self.meta.lock();
        m.perm = perm & 0o7777;
        m.ctime = now;
        Ok(())
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>, now: Timespec) -> Result<(), Errno> {
        let mut m = self.meta.lock();
        if let Some(uid) = uid {
            m.uid = uid;
        }
        if let Some(gid) = gid {
            m.gid = gid;
        }
        m.ctime = now;
        Ok(())
    }

    fn set_times(&self, change: TimeChange, now: Timespec) -> Result<(), Errno> {
        let mut m = self.meta.lock();
        if let Some(t) = change.atime {
            m.atime = t;
        }
        if let Some(t) = change.mtime {
            m.mtime = t;
        }
        m.ctime = now;
        Ok(())
    }

    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        let dir = self.dir()?.lock();
        let at = dir.find(name).ok_or(Errno::ENOENT)?;
        Ok(dir.entries[at].2.clone())
    }

    fn create(
        &self,
        name: &[u8],
        node: NewNode<'_>,
        perm: u32,
        who: Creator,
    ) -> Result<Arc<dyn Inode>, Errno> {
        let mut dir = self.dir()?.lock();
        self.alive()?;
        if dir.find(name).is_some() {
            return Err(Errno::EEXIST);
        }
        let (kind, data, rdev) = match node {
            NewNode::File => (FileType::Regular, Data::File((self.shared.config.new_contents)()?), 0),
            NewNode::Directory => {
                (FileType::Directory, Data::Dir(Mutex::new(Dir::new(Some(self.me.clone())))), 0)
            }
            NewNode::Symlink(target) => {
                // Linux's `getname` of the target: at most PATH_MAX bytes with its NUL.
                if target.len() >= PATH_MAX {
                    return Err(Errno::ENAMETOOLONG);
                }
                let mut t = Vec::new();
                t.try_reserve_exact(target.len()).map_err(|_| Errno::ENOMEM)?;
                t.extend_from_slice(target);
                (FileType::Symlink, Data::Symlink(t), 0)
            }
            NewNode::Fifo => (FileType::Fifo, Data::Special, 0),
            NewNode::CharDevice(rdev) => (FileType::CharDevice, Data::Special, rdev),
            NewNode::BlockDevice(rdev) => (FileType::BlockDevice, Data::Special, rdev),
            NewNode::Socket => (FileType::Socket, Data::Special, 0),
        };
        let new = RamNode::make(&self.shared, kind, perm, who, data)?;
        {
            let mut m = new.meta.lock();
            m.rdev = rdev;
            if kind == FileType::Directory {
                m.nlink = 2;
            }
        }
        dir.insert(name, new.clone())?;
        drop(dir);
        let mut m = self.meta.lock();
        if kind == FileType::Directory {
            m.nlink += 1;
        }
        m.mtime = who.now;
        m.ctime = who.now;
        Ok(new)
    }

    fn tmpfile(&self, perm: u32, who: Creator, linkable: bool) -> Result<Arc<dyn Inode>, Errno> {
        let _dir = self.dir()?.lock();
        self.alive()?;
        let contents = (self.shared.config.new_contents)()?;
        let node = RamNode::make(&self.shared, FileType::Regular, perm, who, Data::File(contents))?;
        {
            let mut m = node.meta.lock();
            m.nlink = 0;
            m.linkable = linkable;
        }
        Ok(node)
    }

    fn link(&self, name: &[u8], target: &Arc<dyn Inode>, now: Timespec) -> Result<(), Errno> {
        let target = self.own(target)?;
        if target.kind == FileType::Directory {
            return Err(Errno::EPERM);
        }
        let mut dir = self.dir()?.lock();
        self.alive()?;
        if dir.find(name).is_some() {
            return Err(Errno::EEXIST);
        }
        // Checked and counted under the target's lock, so an unlink of its last name cannot
        // come in between.
        let mut m = target.meta.lock();
        if m.nlink == 0 && !m.linkable {
            return Err(Errno::ENOENT); // unlinked while open: Linux's `vfs_link`
        }
        if m.nlink >= LINK_MAX {
            return Err(Errno::EMLINK);
        }
        dir.insert(name, target.this())?;
        m.nlink += 1;
        m.linkable = false;
        m.ctime = now;
        drop(m);
        drop(dir);
        self.touch_dir(now);
        Ok(())
    }

    fn unlink(&self, name: &[u8], want_dir: bool, now: Timespec) -> Result<(), Errno> {
        let mut dir = self.dir()?.lock();
        let at = dir.find(name).ok_or(Errno::ENOENT)?;
        let node = dir.entries[at].2.clone();
        let is_dir = node.kind == FileType::Directory;
        match (want_dir, is_dir) {
            (false, true) => return Err(Errno::EISDIR),
            (true, false) => return Err(Errno::ENOTDIR),
            (true, true) => {
                // Empty, and dead from now on: checked and marked under the directory's own
                // lock, which a create in it takes too (so nothing is made in it meanwhile).
                let inner = node.dir()?.lock();
                if !inner.entries.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                let mut m = node.meta.lock();
                m.nlink = 0;
                m.ctime = now;
            }
            (false, false) => {
                let mut m = node.meta.lock();
                m.nlink = m.nlink.saturating_sub(1);
                m.ctime = now;
            }
        }
        dir.entries.remove(at);
        drop(dir);
        let mut m = self.meta.lock();
        if is_dir {
            m.nlink = m.nlink.saturating_sub(1);
        }
        m.mtime = now;
        m.ctime = now;
        Ok(())
    }

    fn rename(
        &self,
        name: &[u8],
        new_dir: &Arc<dyn Inode>,
        new_name: &[u8],
        flags: u64,
        now: Timespec,
    ) -> Result<(), Errno> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) != 0
            || flags & RENAME_NOREPLACE != 0 && flags & RENAME_EXCHANGE != 0
        {
            return Err(Errno::EINVAL);
        }
        if flags & RENAME_WHITEOUT != 0 {
            return Err(Errno::EINVAL); // no overlay file system here
        }
        let new_dir = self.own(new_dir)?;
        self.dir()?;
        new_dir.dir()?;
        let same_dir = core::ptr::eq(self, new_dir);
        if same_dir {
            return rename_within(&mut self.dir()?.lock(), self, name, new_name, flags, now);
        }
        let _serial = self.shared.rename.lock();
        // The moved directories must not end up under themselves: checked before the two
        // directories are locked (the walk up takes each ancestor's lock), with every other
        // cross-directory rename of this file system held off.
        let moving_dir = self.lookup(name)?;
        let target_dir = new_dir.lookup(new_name).ok();
        let under = |node: &Arc<dyn Inode>, dir: &RamNode| {
            node.as_any()
                .downcast_ref::<RamNode>()
                .is_some_and(|n| n.kind == FileType::Directory && dir.is_within(n))
        };
        if under(&moving_dir, new_dir)
            || flags & RENAME_EXCHANGE != 0 && target_dir.as_ref().is_some_and(|t| under(t, self))
        {
            return Err(Errno::EINVAL);
        }
        // Both directories locked, an ancestor before its descendant (the order `unlink` takes a
        // directory and the one it removes), else the lower address first (Linux's
        // `lock_rename`).
        let (first, second) = if new_dir.is_within(self) {
            (self, new_dir)
        } else if self.is_within(new_dir) || (new_dir as *const Self) < (self as *const Self) {
            (new_dir, self)
        } else {
            (self, new_dir)
        };
        let mut a = first.dir()?.lock();
        let mut b = second.dir()?.lock();
        new_dir.alive()?;
        let (src, dst): (&mut Dir, &mut Dir) =
            if core::ptr::eq(first, self) { (&mut *a, &mut *b) } else { (&mut *b, &mut *a) };
        let from = src.find(name).ok_or(Errno::ENOENT)?;
        let moving = src.entries[from].2.clone();
        let target = dst.find(new_name);
        if flags & RENAME_EXCHANGE != 0 {
            let to = target.ok_or(Errno::ENOENT)?;
            let other = dst.entries[to].2.clone();
            src.entries[from].2 = other.clone();
            dst.entries[to].2 = moving.clone();
            set_parent(&moving, new_dir);
            set_parent(&other, self);
            let dirs_moved =
                i64::from(moving.kind == FileType::Directory) - i64::from(other.kind == FileType::Directory);
            adjust_nlink(new_dir, dirs_moved);
            adjust_nlink(self, -dirs_moved);
            drop((a, b));
            for n in [&moving, &other] {
                n.meta.lock().ctime = now;
            }
            self.touch_dir(now);
            new_dir.touch_dir(now);
            return Ok(());
        }
        if target.is_some() && flags & RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        if let Some(to) = target {
            check_replace(&moving, &dst.entries[to].2)?;
        }
        // Everything that can fail first: nothing is removed before the new entry has its room.
        let entry = dst.room_for(new_name)?;
        if let Some(to) = target {
            let old = dst.entries.remove(to).2;
            unlinked(&old, now);
            if old.kind == FileType::Directory {
                adjust_nlink(new_dir, -1);
            }
        }
        let (_, _, node) = src.entries.remove(from);
        dst.push(entry, node);
        set_parent(&moving, new_dir);
        if moving.kind == FileType::Directory {
            adjust_nlink(self, -1);
            adjust_nlink(new_dir, 1);
        }
        drop((a, b));
        moving.meta.lock().ctime = now;
        self.touch_dir(now);
        new_dir.touch_dir(now);
        Ok(())
    }

    fn readdir(&self, cookie: u64, each: &mut dyn FnMut(DirEntry<'_>, u64) -> bool) -> Result<(), Errno> {
        let dir = self.dir()?.lock();
        // Linux's `iterate_dir`: a removed directory is not read.
        self.alive()?;
        if cookie == 0 && !each(DirEntry { ino: self.ino, kind: FileType::Directory, name: b"." }, 1) {
            return Ok(());
        }
        if cookie <= 1 {
            let parent_ino = dir.parent.as_ref().and_then(Weak::upgrade).map_or(self.ino, |p| p.ino);
            if !each(DirEntry { ino: parent_ino, kind: FileType::Directory, name: b".." }, 2) {
                return Ok(());
            }
        }
        for (pos, name, node) in dir.entries.iter().filter(|e| e.0 >= cookie) {
            if !each(DirEntry { ino: node.ino, kind: node.kind, name }, pos + 1) {
                break;
            }
        }
        Ok(())
    }

    fn parent(&self) -> Result<Arc<dyn Inode>, Errno> {
        let parent = self.dir()?.lock().parent.as_ref().and_then(Weak::upgrade);
        Ok(match parent {
            Some(p) => p,
            None => self.this(),
        })
    }

    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        let Data::Symlink(target) = &self.data else { return Err(Errno::EINVAL) };
        let mut out = Vec::new();
        out.try_reserve_exact(target.len()).map_err(|_| Errno::ENOMEM)?;
        out.extend_from_slice(target);
        Ok(out)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let Data::File(c) = &self.data else { return Err(self.not_a_file()) };
        c.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8], now: Timespec) -> Result<usize, Errno> {
        let Data::File(c) = &self.data else { return Err(self.not_a_file()) };
        let n = c.write_at(offset, buf)?;
        let mut m = self.meta.lock();
        m.mtime = now;
        m.ctime = now;
        Ok(n)
    }

    fn truncate(&self, size: u64, now: Timespec) -> Result<(), Errno> {
        let Data::File(c) = &self.data else { return Err(self.not_a_file()) };
        c.set_size(size)?;
        let mut m = self.meta.lock();
        m.mtime = now;
        m.ctime = now;
        Ok(())
    }

    fn contents(&self) -> Option<Arc<dyn Contents>> {
        match &self.data {
            Data::File(c) => Some(c.clone()),
            _ => None,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A rename inside one directory (its lock held as `dir`).
fn rename_within(
    dir: &mut Dir,
    this: &RamNode,
    name: &[u8],
    new_name: &[u8],
    flags: u64,
    now: Timespec,
) -> Result<(), Errno> {
    let from = dir.find(name).ok_or(Errno::ENOENT)?;
    let target = dir.find(new_name);
    if flags & RENAME_EXCHANGE != 0 {
        let to = target.ok_or(Errno::ENOENT)?;
        let (a, b) = (dir.entries[from].2.clone(), dir.entries[to].2.clone());
        dir.entries[from].2 = b.clone();
        dir.entries[to].2 = a.clone();
        for n in [&a, &b] {
            n.meta.lock().ctime = now;
        }
        this.touch_dir(now);
        return Ok(());
    }
    if name == new_name {
        return Ok(()); // the same entry: nothing to do, as Linux
    }
    let moving = dir.entries[from].2.clone();
    if let Some(to) = target {
        if core::ptr::eq(&*dir.entries[to].2, &*moving) {
            return Ok(()); // two links of one file: POSIX says do nothing
        }
        if flags & RENAME_NOREPLACE != 0 {
            return Err(Errno::EEXIST);
        }
        check_replace(&moving, &dir.entries[to].2)?;
    }
    // Everything that can fail first: nothing is removed before the new entry has its room.
    let entry = dir.room_for(new_name)?;
    if let Some(to) = target {
        let old = dir.entries.remove(to).2;
        unlinked(&old, now);
        if old.kind == FileType::Directory {
            adjust_nlink(this, -1);
        }
    }
    let from = dir.find(name).ok_or(Errno::ENOENT)?;
    let (_, _, node) = dir.entries.remove(from);
    dir.push(entry, node);
    moving.meta.lock().ctime = now;
    this.touch_dir(now);
    Ok(())
}

/// Whether `moving` may replace `old` (Linux's `vfs_rename` checks): a directory only an empty
/// directory, a non-directory only a non-directory.
fn check_replace(moving: &RamNode, old: &RamNode) -> Result<(), Errno> {
    match (moving.kind == FileType::Directory, old.kind == FileType::Directory) {
        (true, false) => Err(Errno::ENOTDIR),
        (false, true) => Err(Errno::EISDIR),
        (true, true) if !old.dir()?.lock().entries.is_empty() => Err(Errno::ENOTEMPTY),
        _ => Ok(()),
    }
}

/// A node that lost a name to a rename.
fn unlinked(node: &RamNode, now: Timespec) {
    let mut m = node.meta.lock();
    m.nlink = if node.kind == FileType::Directory { 0 } else { m.nlink.saturating_sub(1) };
    m.ctime = now;
}

fn set_parent(node: &RamNode, parent: &RamNode) {
    if let Data::Dir(d) = &node.data {
        d.lock().parent = Some(parent.me.clone());
    }
}

fn adjust_nlink(dir: &RamNode, by: i64) {
    let mut m = dir.meta.lock();
    m.nlink = (i64::from(m.nlink) + by).clamp(0, i64::from(u32::MAX)) as u32;
}
