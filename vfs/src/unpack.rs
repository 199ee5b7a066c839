//! An initramfs unpacked into a directory, as Linux's `init/initramfs.c` does it: directories,
//! regular files, symbolic links, FIFOs and device nodes are created with the archive's
//! permissions, owners and modification times; members with the same inode number and device
//! and a link count above one are hard links of one file; a later member of the same name
//! replaces an earlier one (a directory stays, as `mkdir` of an existing one does).
//!
//! The archive is input, not trusted: every member goes through the same path walk a program's
//! path does (so `..` cannot leave the root and a link loop is `ELOOP`), a member that cannot be
//! made is counted and skipped, and a malformed archive stops the unpacking with its error after
//! the members before it. Nothing here panics, whatever the archive holds.
use alloc::sync::Arc;
use alloc::vec::Vec;

use initramfs::cpio::{Archive, CpioError, Entry};
use linux_abi::Errno;
use linux_abi::time::Timespec;

use crate::mount::Mounts;
use crate::namei::Walker;
use crate::node::{Creator, FileType, Inode, NewNode, TimeChange, encode_dev, same};
use crate::path;

/// What an unpacking did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Members made (directories, files, links, nodes).
    pub made: usize,
    /// Members that could not be made (a bad name, a missing parent, no room), skipped.
    pub skipped: usize,
    /// The first error of a skipped member.
    pub first_error: Option<Errno>,
    /// The archive was malformed from this point on (the members before it are unpacked).
    pub malformed: Option<CpioError>,
}

/// Unpacks `archive` into `root` (the walk's root too), with `mounts` for the walk; `now` is the
/// change time of what is made.
pub fn unpack(archive: &[u8], root: &Arc<dyn Inode>, mounts: &Mounts, now: Timespec) -> Report {
    let walker = Walker::new(root, mounts);
    let mut report = Report::default();
    // (ino, dev) of the members with links, and the node each became: Linux's `maybe_link`.
    let mut linked: Vec<Linked> = Vec::new();
    // Directories get their times last (making what is inside changes them): Linux's `dir_utime`.
    let mut dir_times: Vec<(Arc<dyn Inode>, Timespec)> = Vec::new();
    for entry in Archive(archive).entries() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                report.malformed = Some(e);
                break;
            }
        };
        match member(&walker, &entry, now, &mut linked, &mut dir_times) {
            Ok(()) => report.made += 1,
            Err(e) => {
                report.skipped += 1;
                report.first_error.get_or_insert(e);
            }
        }
    }
    for (dir, mtime) in dir_times {
        let _ = dir.set_times(TimeChange { atime: Some(mtime), mtime: Some(mtime) }, now);
    }
    report
}

/// A member with links: its (inode number, device) in the archive, and the node it became.
type Linked = ((u32, (u32, u32)), Arc<dyn Inode>);

fn member(
    walker: &Walker<'_>,
    entry: &Entry<'_>,
    now: Timespec,
    linked: &mut Vec<Linked>,
    dir_times: &mut Vec<(Arc<dyn Inode>, Timespec)>,
) -> Result<(), Errno> {
    let name = entry.name.as_bytes();
    // `.` (the archive's root directory entry) names the root itself: its attributes only.
    if path::components(name).all(|c| c == b".") {
        return Ok(());
    }
    let kind = FileType::from_mode(entry.mode).ok_or(Errno::EINVAL)?;
    let perm = entry.mode & 0o7777;
    let mtime = Timespec { sec: i64::from(entry.mtime), nsec: 0 };
    let who = Creator { uid: entry.uid, gid: entry.gid, now };
    let parent = walker.resolve_parent(walker.root, name)?;
    let Some(last) = parent.name else { return Ok(()) };
    if !path::is_plain_name(&last) {
        return Err(Errno::EINVAL);
    }
    let dir = parent.dir;
    // Hard links: the first member of a file makes it; the next ones link to it.
    let key = (entry.ino, entry.dev);
    if entry.nlink > 1
        && kind != FileType::Directory
        && let Some((_, node)) = linked.iter().find(|(k, _)| *k == key)
    {
        let node = node.clone();
        replace(&dir, &last, kind, now)?;
        dir.link(&last, &node, now)?;
        if !entry.data.is_empty() && kind == FileType::Regular {
            node.truncate(0, now)?;
            write_all(&node, entry.data, now)?;
        }
        return Ok(());
    }
    let node = match kind {
        FileType::Directory => match dir.create(&last, NewNode::Directory, perm, who) {
            Ok(node) => node,
            Err(Errno::EEXIST) => {
                let existing = dir.lookup(&last)?;
                if existing.metadata().kind != FileType::Directory {
                    replace(&dir, &last, kind, now)?;
                    dir.create(&last, NewNode::Directory, perm, who)?
                } else {
                    existing.set_perm(perm, now)?;
                    existing
                }
            }
            Err(e) => return Err(e),
        },
        _ => {
            replace(&dir, &last, kind, now)?;
            let new = match kind {
                FileType::Regular => NewNode::File,
                FileType::Symlink => NewNode::Symlink(entry.data),
                FileType::Fifo => NewNode::Fifo,
                FileType::CharDevice => NewNode::CharDevice(encode_dev(entry.rdev.0, entry.rdev.1)),
                FileType::BlockDevice => NewNode::BlockDevice(encode_dev(entry.rdev.0, entry.rdev.1)),
                FileType::Socket => NewNode::Socket,
                FileType::Directory => NewNode::Directory, // handled above
            };
            let node = dir.create(&last, new, perm, who)?;
            if kind == FileType::Regular {
                write_all(&node, entry.data, now)?;
            }
            node
        }
    };
    node.set_owner(Some(entry.uid), Some(entry.gid), now)?;
    if kind == FileType::Directory {
        dir_times.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        dir_times.retain(|(d, _)| !same(d, &node));
        dir_times.push((node.clone(), mtime));
    } else {
        node.set_times(TimeChange { atime: Some(mtime), mtime: Some(mtime) }, now)?;
    }
    if entry.nlink > 1 && kind != FileType::Directory {
        linked.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        linked.push((key, node));
    }
    Ok(())
}

/// Removes an existing `name` of `dir` that a new member of kind `kind` replaces (Linux's
/// `clean_path`): a non-directory always, a directory only if it is empty.
fn replace(dir: &Arc<dyn Inode>, name: &[u8], kind: FileType, now: Timespec) -> Result<(), Errno> {
    let Ok(existing) = dir.lookup(name) else { return Ok(()) };
    let is_dir = existing.metadata().kind == FileType::Directory;
    if is_dir && kind == FileType::Directory {
        return Ok(());
    }
    dir.unlink(name, is_dir, now)
}

fn write_all(node: &Arc<dyn Inode>, data: &[u8], now: Timespec) -> Result<(), Errno> {
    let mut at = 0;
    while at < data.len() {
        let n = node.write_at(at as u64, &data[at..], now)?;
        if n == 0 {
            return Err(Errno::ENOSPC);
        }
        at += n;
    }
    Ok(())
}
