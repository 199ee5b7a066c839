//! Generated files: nodes whose text is made when a description first reads them, as Linux's
//! `seq_file`s (`/proc`, `/sys`). The text is made at the first read (or the first read after a
//! rewind to 0) and kept by the open description (`node_file`), so a long listing read in
//! pieces stays consistent.
//!
//! Here: [`Text`], a fallible `fmt::Write` into a vector that generators write into, and
//! [`Synthetic`], a read-only tree of directories, generated files and symbolic links described
//! by a static table (`/sys`, `/proc/sys`, `/proc`'s global files), which the file systems made
//! of kernel state reuse for their fixed parts.
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;
use core::fmt;

use linux_abi::Errno;
use linux_abi::time::Timespec;
use vfs::node::{DirEntry, FileType, Inode, Metadata, TimeChange};

/// A `fmt::Write` into a vector that fails instead of aborting when the heap is full.
#[derive(Default)]
pub struct Text(pub Vec<u8>);

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.try_reserve(s.len()).map_err(|_| fmt::Error)?;
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl Text {
    /// The text, or `ENOMEM` if a write failed.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn done(self, r: fmt::Result) -> Result<Vec<u8>, Errno> {
        r.map(|()| self.0).map_err(|fmt::Error| Errno::ENOMEM)
    }
}

/// Makes a generated file's text.
pub type Generator = fn() -> Result<Vec<u8>, Errno>;

/// One node of a [`Synthetic`] tree.
#[derive(Clone, Copy)]
pub enum Entry {
    /// A directory of these named entries.
    Dir(&'static [(&'static str, Entry)]),
    /// A generated file, mode 0444.
    File(Generator),
    /// A generated file, mode 0644 (writable on Linux; writes here fail with `EACCES`).
    Setting(Generator),
    /// A symbolic link to this target.
    Link(&'static str),
}

/// A node of a read-only synthetic tree: its entry, itself (for its children to point back at)
/// and its parent for `..` (a tree's root mounted somewhere is its own parent; one that hangs
/// under another file system's directory has that directory).
pub struct Synthetic {
    entry: Entry,
    me: Weak<Synthetic>,
    parent: Option<Arc<dyn Inode>>,
    dev: u64,
    ino: u64,
    born: Timespec,
}

impl Synthetic {
    /// The root of a tree whose root directory lists `entries`, on device `dev`, with inode
    /// numbers from `first_ino` in table order.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn root(
        entries: &'static [(&'static str, Entry)],
        dev: u64,
        first_ino: u64,
    ) -> Result<Arc<Self>, Errno> {
        Self::node(Entry::Dir(entries), None, dev, first_ino, super::node_file::now())
    }

    /// A node for `entry` under `parent`.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn node(
        entry: Entry,
        parent: Option<Arc<dyn Inode>>,
        dev: u64,
        ino: u64,
        born: Timespec,
    ) -> Result<Arc<Self>, Errno> {
        crate::memory::fallible::arc_cyclic(|me| Self { entry, me: me.clone(), parent, dev, ino, born })
            .ok_or(Errno::ENOMEM)
    }

    /// The inode number of the entry at `index` of directory `dir_ino`'s table.
    pub fn ino_of(dir_ino: u64, index: usize) -> u64 {
        dir_ino.wrapping_mul(31).wrapping_add(index as u64 + 1)
    }

    /// The kind of `entry`.
    pub fn kind_of(entry: Entry) -> FileType {
        match entry {
            Entry::Dir(_) => FileType::Directory,
            Entry::File(_) | Entry::Setting(_) => FileType::Regular,
            Entry::Link(_) => FileType::Symlink,
        }
    }

    /// A node's inode number: its parent's, then its index in the parent's table, mixed so that
    /// siblings and cousins differ.
    fn child_ino(&self, index: usize) -> u64 {
        Self::ino_of(self.ino, index)
    }
}

impl Inode for Synthetic {
    fn metadata(&self) -> Metadata {
        let kind = Self::kind_of(self.entry);
        let (perm, nlink, size) = match self.entry {
            Entry::Dir(list) => {
                let dirs = list.iter().filter(|(_, e)| matches!(e, Entry::Dir(_))).count();
                (0o555, 2 + dirs as u32, 0)
            }
            Entry::File(_) => (0o444, 1, 0),
            Entry::Setting(_) => (0o644, 1, 0),
            Entry::Link(t) => (0o777, 1, t.len() as u64),
        };
        Metadata {
            dev: self.dev,
            ino: self.ino,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            size,
            blocks: 0,
            blksize: 1024,
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
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
        let Entry::Dir(list) = self.entry else { return Err(Errno::ENOTDIR) };
        let (index, (_, entry)) =
            list.iter().enumerate().find(|(_, (n, _))| n.as_bytes() == name).ok_or(Errno::ENOENT)?;
        let me: Arc<dyn Inode> = self.me.upgrade().ok_or(Errno::ENOENT)?;
        let child = Synthetic::node(*entry, Some(me), self.dev, self.child_ino(index), self.born)?;
        Ok(child)
    }

    fn readdir(&self, cookie: u64, each: &mut dyn FnMut(DirEntry<'_>, u64) -> bool) -> Result<(), Errno> {
        let Entry::Dir(list) = self.entry else { return Err(Errno::ENOTDIR) };
        if cookie == 0 && !each(DirEntry { ino: self.ino, kind: FileType::Directory, name: b"." }, 1) {
            return Ok(());
        }
        if cookie <= 1 {
            let up = self.parent.as_ref().map_or(self.ino, |p| p.metadata().ino);
            if !each(DirEntry { ino: up, kind: FileType::Directory, name: b".." }, 2) {
                return Ok(());
            }
        }
        for (i, (name, entry)) in list.iter().enumerate().skip(cookie.saturating_sub(2) as usize) {
            let e = DirEntry { ino: self.child_ino(i), kind: Self::kind_of(*entry), name: name.as_bytes() };
            if !each(e, i as u64 + 3) {
                break;
            }
        }
        Ok(())
    }

    fn parent(&self) -> Result<Arc<dyn Inode>, Errno> {
        let Entry::Dir(_) = self.entry else { return Err(Errno::ENOTDIR) };
        match &self.parent {
            Some(p) => Ok(p.clone()),
            None => Ok(self.me.upgrade().ok_or(Errno::ENOENT)?),
        }
    }

    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        let Entry::Link(target) = self.entry else { return Err(Errno::EINVAL) };
        super::copy_bytes(target.as_bytes())
    }

    fn read_at(&self, _offset: u64, _buf: &mut [u8]) -> Result<usize, Errno> {
        Err(self.not_a_file())
    }

    fn write_at(&self, _offset: u64, _buf: &[u8], _now: Timespec) -> Result<usize, Errno> {
        match self.entry {
            Entry::Dir(_) => Err(Errno::EISDIR),
            _ => Err(Errno::EACCES),
        }
    }

    fn truncate(&self, _size: u64, _now: Timespec) -> Result<(), Errno> {
        match self.entry {
            Entry::Dir(_) => Err(Errno::EISDIR),
            // O_TRUNC of a generated file is accepted and does nothing, as on procfs.
            _ => Ok(()),
        }
    }

    fn generate(&self) -> Option<Result<Vec<u8>, Errno>> {
        match self.entry {
            Entry::File(g) | Entry::Setting(g) => Some(g()),
            _ => None,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
