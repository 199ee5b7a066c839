//! The mount table: which directory a file system's root covers, so that a walk entering the
//! directory finds the mounted root, and `..` from that root goes back above it (Linux's
//! `follow_mount` and `follow_dotdot`). Small and searched linearly: a machine has a handful of
//! mounts (`/`, `/dev`, `/proc`, `/sys`, `/tmp`).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;

use crate::node::{Inode, same};

/// One mount.
#[derive(Clone)]
pub struct Mount {
    /// The directory it covers (`None`: the root mount, which covers nothing).
    pub point: Option<Arc<dyn Inode>>,
    /// The mounted file system's root.
    pub root: Arc<dyn Inode>,
    /// What `/proc/mounts` says: the source.
    pub source: &'static str,
    /// The file system type.
    pub fstype: &'static str,
    /// The mount options.
    pub options: &'static str,
    /// The mount point's path (for `/proc/mounts`).
    pub path: Vec<u8>,
}

/// Every mount, in the order they were made.
#[derive(Clone, Default)]
pub struct Mounts {
    list: Vec<Mount>,
}

impl Mounts {
    /// No mounts.
    pub const fn new() -> Self {
        Self { list: Vec::new() }
    }

    /// Adds `mount` (the latest of several on one directory is the one seen).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn add(&mut self, mount: Mount) -> Result<(), Errno> {
        self.list.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        self.list.push(mount);
        Ok(())
    }

    /// What a walk finds at `dir`: the root mounted on it (repeatedly, for mounts stacked on
    /// one directory), or `dir` itself.
    pub fn enter(&self, dir: Arc<dyn Inode>) -> Arc<dyn Inode> {
        let mut at = dir;
        while let Some(m) = self.list.iter().rev().find(|m| m.point.as_ref().is_some_and(|p| same(p, &at))) {
            at = m.root.clone();
        }
        at
    }

    /// The directory `root` is mounted on, if it is the root of a mount on a directory.
    pub fn covered_by(&self, root: &Arc<dyn Inode>) -> Option<Arc<dyn Inode>> {
        self.list.iter().rev().find(|m| same(&m.root, root)).and_then(|m| m.point.clone())
    }

    /// Whether `dir` has something mounted on it (`rmdir` of it is `EBUSY`).
    pub fn is_mount_point(&self, dir: &Arc<dyn Inode>) -> bool {
        self.list.iter().any(|m| m.point.as_ref().is_some_and(|p| same(p, dir)))
    }

    /// Removes the latest mount on `dir` (`umount`), returning it.
    ///
    /// # Errors
    /// `EINVAL` when nothing is mounted on `dir`.
    pub fn remove(&mut self, dir: &Arc<dyn Inode>) -> Result<Mount, Errno> {
        let i = self
            .list
            .iter()
            .rposition(|m| m.point.as_ref().is_some_and(|p| same(p, dir)))
            .ok_or(Errno::EINVAL)?;
        Ok(self.list.remove(i))
    }

    /// The mount whose root is `root`, if any.
    pub fn of_root(&self, root: &Arc<dyn Inode>) -> Option<&Mount> {
        self.list.iter().rev().find(|m| same(&m.root, root))
    }

    /// Every mount, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Mount> {
        self.list.iter()
    }
}
