//! The walk's restrictions (`openat2`'s `RESOLVE_*`), magic links and the search check, each
//! as Linux 6.1 answers (tests/programs/files.c's `openat2` case runs the same paths there).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::time::Timespec;

use super::{World, fs_with};
use crate::mount::Mount;
use crate::namei::{Restrict, Walker};
use crate::node::{FileType, Inode, Metadata, NewNode, TimeChange, same};

/// `/sub/f`, `/top`, `/sub/inner/`, and the links `/sub/link -> f`, `/sub/up -> ../top`,
/// `/sub/abs -> /top` (the layout of files.c's `openat2` case).
fn layout() -> (World, Arc<dyn Inode>) {
    let w = World::new();
    let sub = w.mkdir("/sub");
    w.mkdir("/sub/inner");
    w.file("/sub/f", b"f");
    w.file("/top", b"t");
    w.symlink("/sub/link", "f");
    w.symlink("/sub/up", "../top");
    w.symlink("/sub/abs", "/top");
    (w, sub)
}

fn with<'a>(root: &'a Arc<dyn Inode>, w: &'a World, restrict: Restrict) -> Walker<'a> {
    Walker { restrict, ..Walker::new(root, &w.mounts) }
}

#[test]
fn beneath_refuses_every_way_out_of_the_start() {
    let (w, sub) = layout();
    let beneath = Restrict { beneath: true, ..Restrict::default() };
    // RESOLVE_BENEATH: the start is the walk's root.
    let walk = with(&sub, &w, beneath);
    assert_eq!(walk.resolve(&sub, b"f", true).unwrap().metadata().size, 1);
    assert!(walk.resolve(&sub, b"link", true).is_ok(), "a relative link inside");
    assert!(walk.resolve(&sub, b"inner/../f", true).is_ok(), "`..` that stays inside");
    assert_eq!(walk.resolve(&sub, b"../top", true).err(), Some(Errno::EXDEV));
    assert_eq!(walk.resolve(&sub, b"up", true).err(), Some(Errno::EXDEV), "a link that climbs out");
    assert_eq!(walk.resolve(&sub, b"/tmp", true).err(), Some(Errno::EXDEV), "an absolute path");
    assert_eq!(walk.resolve(&sub, b"abs", true).err(), Some(Errno::EXDEV), "an absolute link");
    assert_eq!(walk.resolve(&sub, b"abs", false).unwrap().metadata().kind, FileType::Symlink);
    assert_eq!(walk.resolve_parent(&sub, b"../x").err(), Some(Errno::EXDEV), "parents too");
}

#[test]
fn in_root_makes_the_start_the_root() {
    let (w, sub) = layout();
    let in_root = Restrict { in_root: true, ..Restrict::default() };
    let walk = with(&sub, &w, in_root);
    let f = walk.resolve(&sub, b"f", true).unwrap();
    assert!(same(&walk.resolve(&sub, b"/f", true).unwrap(), &f), "/ is the start");
    assert!(same(&walk.resolve(&sub, b"../../f", true).unwrap(), &f), "`..` stops at the start");
    assert_eq!(walk.resolve(&sub, b"abs", true).err(), Some(Errno::ENOENT), "/top is looked up in the start");
}

#[test]
fn no_symlinks_refuses_any_link_followed() {
    let (w, sub) = layout();
    let walk = with(&w.root, &w, Restrict { no_symlinks: true, ..Restrict::default() });
    assert_eq!(walk.resolve(&sub, b"link", true).err(), Some(Errno::ELOOP));
    assert_eq!(walk.resolve(&w.root, b"/sub/abs/x", true).err(), Some(Errno::ELOOP), "in the middle");
    assert_eq!(
        walk.resolve(&sub, b"link", false).unwrap().metadata().kind,
        FileType::Symlink,
        "not followed"
    );
    assert!(walk.resolve(&sub, b"f", true).is_ok());
}

#[test]
fn no_xdev_refuses_to_cross_a_mount_either_way() {
    let (mut w, _) = layout();
    let point = w.mkdir("/mnt");
    let inner = fs_with(2, usize::MAX);
    let inner_root = inner.root();
    inner_root.create(b"file", NewNode::File, 0o644, super::ROOT).unwrap();
    inner_root.create(b"out", NewNode::Symlink(b"/top"), 0o777, super::ROOT).unwrap();
    w.mounts
        .add(Mount {
            point: Some(point),
            root: inner_root.clone(),
            source: "x",
            fstype: "ramfs",
            options: "rw",
            path: b"/mnt".to_vec(),
        })
        .unwrap();
    let walk = with(&w.root, &w, Restrict { no_xdev: true, ..Restrict::default() });
    assert_eq!(walk.resolve(&w.root, b"/mnt/file", true).err(), Some(Errno::EXDEV), "into the mount");
    assert_eq!(walk.resolve(&w.root, b"/mnt", true).err(), Some(Errno::EXDEV));
    assert_eq!(walk.resolve(&inner_root, b"..", true).err(), Some(Errno::EXDEV), "out of it");
    assert!(walk.resolve(&inner_root, b"file", true).is_ok(), "inside it");
    assert!(walk.resolve(&inner_root, b"/sub/f", true).is_ok(), "an absolute path given starts anywhere");
    assert_eq!(walk.resolve(&inner_root, b"out", true).err(), Some(Errno::EXDEV), "an absolute link jumps");
    assert!(walk.resolve(&w.root, b"/sub/up", true).is_ok(), "the same file system");
}

/// A magic link to `target` (`None`: an open file without a node), on device 9.
struct Magic(Option<Arc<dyn Inode>>);

/// A directory holding fixed entries (the magic links), on device 9.
struct Shelf(Vec<(&'static [u8], Arc<dyn Inode>)>);

fn meta(kind: FileType) -> Metadata {
    let t = Timespec { sec: 0, nsec: 0 };
    Metadata {
        dev: 9,
        ino: 1,
        kind,
        perm: 0o777,
        nlink: 1,
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

macro_rules! read_only {
    () => {
        fn set_perm(&self, _: u32, _: Timespec) -> Result<(), Errno> {
            Err(Errno::EPERM)
        }
        fn set_owner(&self, _: Option<u32>, _: Option<u32>, _: Timespec) -> Result<(), Errno> {
            Err(Errno::EPERM)
        }
        fn set_times(&self, _: TimeChange, _: Timespec) -> Result<(), Errno> {
            Err(Errno::EPERM)
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    };
}

impl Inode for Magic {
    fn metadata(&self) -> Metadata {
        meta(FileType::Symlink)
    }
    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        Ok(b"/sub/f".to_vec()) // what readlink says; a walk never follows this text
    }
    fn is_magic_link(&self) -> bool {
        true
    }
    fn magic_node(&self) -> Result<Option<Arc<dyn Inode>>, Errno> {
        Ok(self.0.clone())
    }
    read_only!();
}

impl Inode for Shelf {
    fn metadata(&self) -> Metadata {
        meta(FileType::Directory)
    }
    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, n)| n.clone()).ok_or(Errno::ENOENT)
    }
    read_only!();
}

/// `/proc`-like: `/magic/dir` stands for `/sub/inner`, `/magic/file` for `/top`, `/magic/pipe`
/// for an open file without a node.
fn with_magic() -> (World, Arc<dyn Inode>, Arc<dyn Inode>) {
    let (mut w, _) = layout();
    let inner = w.resolve("/sub/inner", true).unwrap();
    let top = w.resolve("/top", true).unwrap();
    let point = w.mkdir("/magic");
    let shelf: Arc<dyn Inode> = Arc::new(Shelf(alloc::vec![
        (&b"dir"[..], Arc::new(Magic(Some(inner.clone()))) as Arc<dyn Inode>),
        (&b"file"[..], Arc::new(Magic(Some(top.clone())))),
        (&b"pipe"[..], Arc::new(Magic(None))),
    ]));
    w.mounts
        .add(Mount {
            point: Some(point),
            root: shelf,
            source: "m",
            fstype: "magic",
            options: "rw",
            path: b"/magic".to_vec(),
        })
        .unwrap();
    (w, inner, top)
}

#[test]
fn a_magic_link_jumps_to_the_node_it_stands_for() {
    let (w, inner, top) = with_magic();
    assert!(same(&w.resolve("/magic/file", true).unwrap(), &top), "not its text (/sub/f)");
    assert!(same(&w.resolve("/magic/dir/..", true).unwrap(), &w.resolve("/sub", true).unwrap()));
    assert!(same(&w.resolve("/magic/dir", true).unwrap(), &inner));
    assert!(w.resolve("/magic/file", false).unwrap().is_magic_link(), "not followed");
    // An open file without a node: the link itself at the end, ENOTDIR in the middle.
    assert!(w.resolve("/magic/pipe", true).unwrap().is_magic_link());
    assert_eq!(w.resolve("/magic/pipe/x", true).err(), Some(Errno::ENOTDIR));
    assert_eq!(w.resolve("/magic/file/", true).err(), Some(Errno::ENOTDIR));
}

#[test]
fn magic_links_are_refused_as_linux_refuses_them() {
    let (w, _, _) = with_magic();
    let sub = w.resolve("/sub", true).unwrap();
    let no_magic = with(&w.root, &w, Restrict { no_magiclinks: true, ..Restrict::default() });
    assert_eq!(no_magic.resolve(&w.root, b"/magic/file", true).err(), Some(Errno::ELOOP));
    assert_eq!(no_magic.resolve(&w.root, b"/magic/dir/x", true).err(), Some(Errno::ELOOP));
    assert!(no_magic.resolve(&w.root, b"/magic/file", false).is_ok(), "not followed");
    assert!(no_magic.resolve(&sub, b"link", true).is_ok(), "a plain link");
    let no_links = with(&w.root, &w, Restrict { no_symlinks: true, ..Restrict::default() });
    assert_eq!(no_links.resolve(&w.root, b"/magic/file", true).err(), Some(Errno::ELOOP));
    // A magic link out of the mount it sits in crosses to another device.
    let no_xdev = with(&w.root, &w, Restrict { no_xdev: true, ..Restrict::default() });
    assert_eq!(no_xdev.resolve(&w.root, b"/magic/file", true).err(), Some(Errno::EXDEV));
    // Scoped walks refuse magic links whatever they stand for.
    let magic = w.resolve("/magic", true).unwrap();
    for scope in
        [Restrict { beneath: true, ..Restrict::default() }, Restrict { in_root: true, ..Restrict::default() }]
    {
        let walk = with(&magic, &w, scope);
        assert_eq!(walk.resolve(&magic, b"file", true).err(), Some(Errno::EXDEV));
    }
}

#[test]
fn search_permission_is_checked_before_each_lookup() {
    let w = World::new();
    let private = w.mkdir("/private");
    w.file("/private/f", b"x");
    w.file("/secret", b"x");
    let refuse = |dir: &Arc<dyn Inode>| if same(dir, &private) { Err(Errno::EACCES) } else { Ok(()) };
    let walk = Walker { search: Some(&refuse), ..Walker::new(&w.root, &w.mounts) };
    assert_eq!(walk.resolve(&w.root, b"/private/f", true).err(), Some(Errno::EACCES));
    assert_eq!(walk.resolve(&w.root, b"/private/missing", true).err(), Some(Errno::EACCES), "missing or not");
    assert_eq!(walk.resolve(&w.root, b"/private/missing/x", true).err(), Some(Errno::EACCES));
    assert_eq!(
        walk.resolve_parent(&w.root, b"/private/new").err(),
        Some(Errno::EACCES),
        "the last directory too"
    );
    assert!(walk.resolve(&w.root, b"/private", true).is_ok(), "the directory itself");
    assert_eq!(walk.resolve(&w.root, b"/secret/x", true).err(), Some(Errno::ENOTDIR), "ENOTDIR first");
    assert_eq!(walk.resolve(&w.root, b"/missing/x", true).err(), Some(Errno::ENOENT));
}
