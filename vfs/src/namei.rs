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
//! - A magic link (`Inode::is_magic_link`: `/proc/PID/fd/N`, `exe`, `cwd`, `root`) is not
//!   followed by its text: the walk jumps to the node it stands for (`Inode::magic_node`), as
//!   Linux's `nd_jump_link`. One that stands for an open file without a node (a pipe, a memfd)
//!   ends the walk as the last component (the caller reopens the file) and is `ENOTDIR` in the
//!   middle of a path.
//! - A path ending in `/` names a directory: its last component must be one (after following a
//!   link), else `ENOTDIR`.
//! - `openat2`'s restrictions ([`Restrict`], Linux's `RESOLVE_*`): no mount crossing (`EXDEV`),
//!   no magic links or no links at all (`ELOOP`), and scoped walks that stay beneath their
//!   starting directory (`RESOLVE_BENEATH`: `EXDEV` for an absolute path or link, `..` above
//!   the start, or a magic link) or treat it as the root (`RESOLVE_IN_ROOT`: the caller makes
//!   the start the walk's root; magic links are `EXDEV`).
//!
//! Search permission is the caller's to check ([`Walker::search`]): the walk asks it for each
//! directory it looks a name up in, in Linux's order (before the name is looked up, so a
//! directory without search permission hides what is below it, existing or not).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{MAXSYMLINKS, PATH_MAX};

use crate::mount::Mounts;
use crate::node::{FileType, Inode, same};
use crate::path;

/// `openat2`'s `RESOLVE_*` restrictions on a walk (Linux's `LOOKUP_NO_XDEV` and kin). All off:
/// a plain walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restrict {
    /// `RESOLVE_NO_XDEV`: crossing a mount, either way, is `EXDEV`.
    pub no_xdev: bool,
    /// `RESOLVE_NO_MAGICLINKS`: following a magic link is `ELOOP`.
    pub no_magiclinks: bool,
    /// `RESOLVE_NO_SYMLINKS`: following any link is `ELOOP`.
    pub no_symlinks: bool,
    /// `RESOLVE_BENEATH`: the walk's root is its start, and leaving it (`..` there, an absolute
    /// path or link target) is `EXDEV`.
    pub beneath: bool,
    /// `RESOLVE_IN_ROOT`: the walk's root is its start (set by the caller); magic links are
    /// `EXDEV`.
    pub in_root: bool,
}

impl Restrict {
    /// Linux's `LOOKUP_IS_SCOPED`.
    const fn scoped(self) -> bool {
        self.beneath || self.in_root
    }
}

/// Checks search (execute) permission on a directory the walk looks a name up in.
pub type Search<'a> = &'a dyn Fn(&Arc<dyn Inode>) -> Result<(), Errno>;

/// Where walks start and stop: the process's root and the mount table.
pub struct Walker<'a> {
    /// The root: absolute paths start here, and `..` never goes above it.
    pub root: &'a Arc<dyn Inode>,
    /// The mounts.
    pub mounts: &'a Mounts,
    /// The restrictions of this walk.
    pub restrict: Restrict,
    /// The search-permission check (`None`: every directory may be searched, as for root).
    pub search: Option<Search<'a>>,
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

/// What the last component of a path names for a call that may create it (`open(O_CREAT)`):
/// a node, or the directory and name of one to make.
pub enum Last {
    /// It exists (after the link in the last component, when followed).
    Found(Arc<dyn Inode>),
    /// It does not: `name` (never `.` or `..`) is missing from `dir` (after following links to
    /// a missing file, as Linux creates a dangling link's target).
    Missing(Parent),
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
    /// A plain walker over `root` and `mounts`: no restrictions, no permission checks.
    pub fn new<'a>(root: &'a Arc<dyn Inode>, mounts: &'a Mounts) -> Walker<'a> {
        Walker { root, mounts, restrict: Restrict::default(), search: None }
    }

    /// The node `path` names, starting at `start` for a relative path. `follow`: follow a
    /// symbolic link in the last component.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `EXDEV` (a restriction), `EACCES` (the
    /// search check), `ENOMEM`.
    pub fn resolve(
        &self,
        start: &Arc<dyn Inode>,
        path: &[u8],
        follow: bool,
    ) -> Result<Arc<dyn Inode>, Errno> {
        path::check(path)?;
        let mut links = 0;
        let parent = self.walk_counted(start, path, true, &mut links)?;
        let Some(name) = parent.name else { return Ok(parent.dir) };
        self.last(&parent.dir, &name, follow || parent.trailing_slash, parent.trailing_slash, &mut links)
    }

    /// What `path` names, or where a missing last component would be made (Linux's
    /// `open_last_lookups`): links in the last component are followed when `follow`, and a
    /// link to a missing name gives that name in its directory.
    ///
    /// # Errors
    /// As [`Self::resolve`], but not `ENOENT` for the last component itself.
    pub fn resolve_or_parent(
        &self,
        start: &Arc<dyn Inode>,
        path: &[u8],
        follow: bool,
    ) -> Result<Last, Errno> {
        path::check(path)?;
        let mut links = 0;
        let parent = self.walk_counted(start, path, true, &mut links)?;
        let Some(name) = parent.name else { return Ok(Last::Found(parent.dir)) };
        self.last_or_missing(
            &parent.dir,
            &name,
            follow || parent.trailing_slash,
            parent.trailing_slash,
            &mut links,
        )
    }

    /// The directory the last component of `path` is in, and that component.
    ///
    /// # Errors
    /// `ENOENT`, `ENOTDIR`, `ELOOP`, `ENAMETOOLONG`, `EXDEV`, `EACCES`, `ENOMEM`.
    pub fn resolve_parent(&self, start: &Arc<dyn Inode>, path: &[u8]) -> Result<Parent, Errno> {
        path::check(path)?;
        let mut links = 0;
        self.walk_counted(start, path, true, &mut links)
    }

    /// The search check on `dir`, if the walker has one.
    fn may_search(&self, dir: &Arc<dyn Inode>) -> Result<(), Errno> {
        match self.search {
            Some(check) => check(dir),
            None => Ok(()),
        }
    }

    /// Counts one more link followed in this lookup (`ELOOP` past [`MAXSYMLINKS`]), after the
    /// restrictions on following one (Linux's `pick_link`).
    fn follow_link(&self, node: &Arc<dyn Inode>, links: &mut usize) -> Result<(), Errno> {
        if self.restrict.no_symlinks {
            return Err(Errno::ELOOP);
        }
        *links += 1;
        if *links > MAXSYMLINKS {
            return Err(Errno::ELOOP);
        }
        if node.is_magic_link() {
            // Linux's `nd_jump_link`.
            if self.restrict.no_magiclinks {
                return Err(Errno::ELOOP);
            }
            if self.restrict.scoped() {
                return Err(Errno::EXDEV);
            }
        }
        Ok(())
    }

    /// Where a magic link jumps from directory `from`: the node it stands for, or `None` for an
    /// open file without one.
    fn jump(&self, from: &Arc<dyn Inode>, link: &Arc<dyn Inode>) -> Result<Option<Arc<dyn Inode>>, Errno> {
        let Some(target) = link.magic_node()? else { return Ok(None) };
        if self.restrict.no_xdev && target.metadata().dev != from.metadata().dev {
            return Err(Errno::EXDEV);
        }
        Ok(Some(target))
    }

    /// Restarts at the root for an absolute link target from directory `from` (Linux's
    /// `nd_jump_root`).
    fn jump_root(&self, from: &Arc<dyn Inode>) -> Result<Arc<dyn Inode>, Errno> {
        if self.restrict.beneath {
            return Err(Errno::EXDEV);
        }
        if self.restrict.no_xdev && from.metadata().dev != self.root.metadata().dev {
            return Err(Errno::EXDEV);
        }
        Ok(self.root.clone())
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
        match self.last_or_missing(dir, name, follow, must_dir, links)? {
            Last::Found(node) => Ok(node),
            Last::Missing(_) => Err(Errno::ENOENT),
        }
    }

    /// [`Self::last`], telling a missing name apart.
    fn last_or_missing(
        &self,
        dir: &Arc<dyn Inode>,
        name: &[u8],
        follow: bool,
        must_dir: bool,
        links: &mut usize,
    ) -> Result<Last, Errno> {
        let node = match self.step(dir, name) {
            Ok(node) => node,
            Err(Errno::ENOENT) if path::is_plain_name(name) => {
                let mut owned = Vec::new();
                owned.try_reserve_exact(name.len()).map_err(|_| Errno::ENOMEM)?;
                owned.extend_from_slice(name);
                return Ok(Last::Missing(Parent {
                    dir: dir.clone(),
                    name: Some(owned),
                    trailing_slash: must_dir,
                }));
            }
            Err(e) => return Err(e),
        };
        let node = if follow && node.metadata().kind == FileType::Symlink {
            self.follow_link(&node, links)?;
            if node.is_magic_link() {
                match self.jump(dir, &node)? {
                    Some(target) => target,
                    // An open file without a node: the caller reopens it.
                    None => return Ok(Last::Found(node)),
                }
            } else {
                let target = node.readlink()?;
                if target.is_empty() {
                    return Err(Errno::ENOENT);
                }
                let start = if path::is_absolute(&target) { self.jump_root(dir)? } else { dir.clone() };
                let inner = self.walk_counted(&start, &target, false, links)?;
                match inner.name {
                    None => inner.dir,
                    Some(n) => {
                        return self.last_or_missing(
                            &inner.dir,
                            &n,
                            true,
                            must_dir || inner.trailing_slash,
                            links,
                        );
                    }
                }
            }
        } else {
            node
        };
        if must_dir && node.metadata().kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        Ok(Last::Found(node))
    }

    /// One step from directory `dir` to `name` (`.`, `..`, or a name), across mounts.
    fn step(&self, dir: &Arc<dyn Inode>, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        if dir.metadata().kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        self.may_search(dir)?;
        match name {
            b"." => Ok(dir.clone()),
            b".." => {
                let mut at = dir.clone();
                loop {
                    if same(&at, self.root) {
                        // Linux's `follow_dotdot`: `..` of the root stays there, unless the
                        // walk is beneath it.
                        return if self.restrict.beneath { Err(Errno::EXDEV) } else { Ok(at) };
                    }
                    match self.mounts.covered_by(&at) {
                        Some(_) if self.restrict.no_xdev => return Err(Errno::EXDEV),
                        Some(point) => at = point,
                        None => break,
                    }
                }
                let up = at.parent()?;
                let entered = self.mounts.enter(up.clone());
                if self.restrict.no_xdev && !same(&entered, &up) {
                    return Err(Errno::EXDEV);
                }
                Ok(entered)
            }
            _ => {
                let found = dir.lookup(name)?;
                let entered = self.mounts.enter(found.clone());
                if self.restrict.no_xdev && !same(&entered, &found) {
                    return Err(Errno::EXDEV);
                }
                Ok(entered)
            }
        }
    }

    /// Walks every component of `path` but the last, from `start` (the root if absolute;
    /// `top`: the path a call was given, whose leading `/` is no jump Linux checks).
    fn walk_counted(
        &self,
        start: &Arc<dyn Inode>,
        path: &[u8],
        top: bool,
        links: &mut usize,
    ) -> Result<Parent, Errno> {
        let trailing_slash = path::trailing_slash(path);
        let mut pending = Pending::new(path)?;
        let mut dir = if !path::is_absolute(path) {
            start.clone()
        } else if top {
            // An absolute path given to the call (Linux's `path_init`): only `RESOLVE_BENEATH`
            // refuses it.
            if self.restrict.beneath {
                return Err(Errno::EXDEV);
            }
            self.root.clone()
        } else {
            start.clone() // a link target: the caller made the jump
        };
        loop {
            let Some((a, b)) = pending.next() else {
                return Ok(Parent { dir, name: None, trailing_slash });
            };
            if !pending.more() {
                // Linux's `link_path_walk` checks search permission on the directory of the
                // last component too, before the caller looks it up.
                if dir.metadata().kind != FileType::Directory {
                    return Err(Errno::ENOTDIR);
                }
                self.may_search(&dir)?;
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
                    self.follow_link(&node, links)?;
                    if node.is_magic_link() {
                        // A magic link in the middle: the node it stands for must be a directory.
                        match self.jump(&dir, &node)? {
                            Some(target) if target.metadata().kind == FileType::Directory => dir = target,
                            _ => return Err(Errno::ENOTDIR),
                        }
                        continue;
                    }
                    let target = node.readlink()?;
                    if target.is_empty() {
                        return Err(Errno::ENOENT);
                    }
                    if path::is_absolute(&target) {
                        dir = self.jump_root(&dir)?;
                    }
                    pending.splice(&target)?;
                }
                _ => return Err(Errno::ENOTDIR),
            }
        }
    }
}
