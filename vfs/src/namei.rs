//! Path lookup, after Linux's `fs/namei.c`: a path is walked one component at a time from the
//! process's root (absolute) or a starting directory (relative: the current directory, or a
//! `*at` call's directory).
//!
//! - `.` stays; `..` goes to the parent, never above the walk's root, and from the root of a
//!   mounted file system to the parent of the directory it covers.
//! - A directory with a file system mounted on it is that file system's root.
//! - A symbolic link in the middle of a path is always followed; the last component's is
//!   followed when the caller asks (`open` without `O_NOFOLLOW`, `stat`; not `lstat`, `unlink`
//!   or `readlink`). An absolute target restarts at the root; a relative one continues from the
//!   link's directory. More than [`MAXSYMLINKS`] (40) links in one lookup is `ELOOP`.
//! - A component of something that is not a directory is `ENOTDIR`; a missing one `ENOENT`.
//! - A magic link (`Inode::is_magic_link`, `/proc/PID/fd/N`) as the last component is not
//!   followed: the walk returns it, and the caller reopens the file it stands for.
//! - A path ending in `/` names a directory: its last component must be one (after following a
//!   link), else `ENOTDIR`.
//!
//! Search permission is not checked: every program here runs as root, which Linux lets search
//! any directory (`CAP_DAC_READ_SEARCH`).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{MAXSYMLINKS, PATH_MAX};

use crate::mount::Mounts;
use crate::node::{FileType, Inode, same};
use crate::path;

/// Where walks start and stop: the process's root and the mount table.
pub struct Walker<'a> {
    /// The root: absolute paths start here, and `..` never goes above it.
    pub root: &'a Arc<dyn Inode>,
    /// The mounts.
    pub mounts: &'a Mounts,
}

/// The last component of a path, and the directory it is in (what `mkdir`, `unlink`, `rename`
/// and `open(O_CREAT)` need).
pub struct Parent {
    /// The directory the last component is in.
    pub dir: Arc<dyn Inode>,
    /// The last component (`.` or `..` as given: the caller decides what they mean for it);
    /// `None` when the path names the root itself (`/`).
    pub name: Option<Vec<u8>>,
    /// The path ended with a slash: the last component must be a directory.
    pub trailing_slash: bool,
}

/// The text still to walk: the path given, with link targets spliced in front as they are met.
struct Pending {
    text: Vec<u8>,
    at: usize,
}

impl Pending {
    fn new(path: &[u8]) -> Result<Self, Errno> {
        let mut text = Vec::new();
        text.try_reserve_exact(path.len()).map_err(|_| Errno::ENOMEM)?;
        text.extend_from_slice(path);
        Ok(Self { text, at: 0 })
    }

    /// The next component, or `None` at the end.
    fn next(&mut self) -> Option<(usize, usize)> {
        while self.at < self.text.len() && self.text[self.at] == b'/' {
            self.at += 1;
        }
        if self.at >= self.text.len() {
            return None;
        }
        let start = self.at;
        while self.at < self.text.len() && self.text[self.at] != b'/' {
            self.at += 1;
        }
        Some((start, self.at))
    }

    /// Whether a component follows the cursor.
    fn more(&self) -> bool {
        self.text[self.at..].iter().any(|&b| b != b'/')
    }

    /// Replaces what was walked with `target`, keeping what is left after the cursor.
    fn splice(&mut self, target: &[u8]) -> Result<(), Errno> {
        let rest = &self.text[self.at..];
        let mut text = Vec::new();
        let len = target.len() + 1 + rest.len();
        if len >= PATH_MAX * 2 {
            return Err(Errno::ENAMETOOLONG);
        }
        text.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
        text.extend_from_slice(target);
        text.push(b'/');
        text.extend_from_slice(rest);
        self.text = text;
        self.at = 0;
        Ok(())
    }
}

impl Walker<'_> {
    /// The node `path` names, starting at `start` for a relative path. `follow`: follow a
    /// symbolic link in the last component.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `ENOMEM`.
    pub fn resolve(
        &self,
        start: &Arc<dyn Inode>,
        path: &[u8],
        follow: bool,
    ) -> Result<Arc<dyn Inode>, Errno> {
        path::check(path)?;
        let parent = self.walk(start, path, true)?;
        let Some(name) = parent.name else { return Ok(parent.dir) };
        let mut links = 0;
        self.last(&parent.dir, &name, follow || parent.trailing_slash, parent.trailing_slash, &mut links)
    }

    /// The directory the last component of `path` is in, and that component.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `ENOMEM`.
    pub fn resolve_parent(&self, start: &Arc<dyn Inode>, path: &[u8]) -> Result<Parent, Errno> {
        path::check(path)?;
        self.walk(start, path, false)
    }

    /// A final component `name` of `dir`, following a link when `follow` (`links` counts the
    /// links followed so far in this lookup); `must_dir`: it must be a directory.
    fn last(
        &self,
        dir: &Arc<dyn Inode>,
        name: &[u8],
        follow: bool,
        must_dir: bool,
        links: &mut usize,
    ) -> Result<Arc<dyn Inode>, Errno> {
        let node = self.step(dir, name)?;
        if follow && node.is_magic_link() {
            return Ok(node);
        }
        let node = if follow && node.metadata().kind == FileType::Symlink {
            *links += 1;
            if *links > MAXSYMLINKS {
                return Err(Errno::ELOOP);
            }
            let target = node.readlink()?;
            if target.is_empty() {
                return Err(Errno::ENOENT);
            }
            let start = if path::is_absolute(&target) { self.root.clone() } else { dir.clone() };
            let inner = self.walk_counted(&start, &target, false, links)?;
            match inner.name {
                None => inner.dir,
                Some(n) => self.last(&inner.dir, &n, true, must_dir || inner.trailing_slash, links)?,
            }
        } else {
            node
        };
        if must_dir && node.metadata().kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        Ok(node)
    }

    /// One step from directory `dir` to `name` (`.`, `..`, or a name), across mounts.
    fn step(&self, dir: &Arc<dyn Inode>, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        match name {
            b"." => {
                if dir.metadata().kind != FileType::Directory {
                    return Err(Errno::ENOTDIR);
                }
                Ok(dir.clone())
            }
            b".." => {
                if dir.metadata().kind != FileType::Directory {
                    return Err(Errno::ENOTDIR);
                }
                let mut at = dir.clone();
                loop {
                    if same(&at, self.root) {
                        return Ok(at);
                    }
                    match self.mounts.covered_by(&at) {
                        Some(point) => at = point,
                        None => break,
                    }
                }
                Ok(self.mounts.enter(at.parent()?))
            }
            _ => Ok(self.mounts.enter(dir.lookup(name)?)),
        }
    }

    fn walk(&self, start: &Arc<dyn Inode>, path: &[u8], _resolve: bool) -> Result<Parent, Errno> {
        let mut links = 0;
        self.walk_counted(start, path, true, &mut links)
    }

    /// Walks every component of `path` but the last, from `start` (the root if absolute).
    fn walk_counted(
        &self,
        start: &Arc<dyn Inode>,
        path: &[u8],
        _top: bool,
        links: &mut usize,
    ) -> Result<Parent, Errno> {
        let trailing_slash = path::trailing_slash(path);
        let mut pending = Pending::new(path)?;
        let mut dir = if path::is_absolute(path) { self.root.clone() } else { start.clone() };
        loop {
            let Some((a, b)) = pending.next() else {
                return Ok(Parent { dir, name: None, trailing_slash });
            };
            if !pending.more() {
                let mut name = Vec::new();
                name.try_reserve_exact(b - a).map_err(|_| Errno::ENOMEM)?;
                name.extend_from_slice(&pending.text[a..b]);
                // A final `.`/`..` of a spliced target is walked here, so the parent is a
                // directory the caller can use (`a/..` names `a`'s parent's parent entry).
                return Ok(Parent { dir, name: Some(name), trailing_slash });
            }
            let node = self.step(&dir, &pending.text[a..b])?;
            match node.metadata().kind {
                FileType::Directory => dir = node,
                FileType::Symlink => {
                    *links += 1;
                    if *links > MAXSYMLINKS {
                        return Err(Errno::ELOOP);
                    }
                    let target = node.readlink()?;
                    if target.is_empty() {
                        return Err(Errno::ENOENT);
                    }
                    if path::is_absolute(&target) {
                        dir = self.root.clone();
                    }
                    pending.splice(&target)?;
                }
                _ => return Err(Errno::ENOTDIR),
            }
        }
    }
}
