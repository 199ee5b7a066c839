//! The VFS's rules, each checked against what Linux does.
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::fcntl::{RENAME_EXCHANGE, RENAME_NOREPLACE};
use linux_abi::time::Timespec;
use spin::Mutex;

use crate::mount::{Mount, Mounts};
use crate::namei::Walker;
use crate::node::{Contents, Creator, DirEntry, FileType, Inode, NewNode, same};
use crate::ramfs::{Config, RamFs, reserve_infallibly};
use crate::unpack::unpack;

/// File contents in a vector, at most `LIMIT` bytes (ENOSPC past it).
struct VecContents(Mutex<Vec<u8>>);

const LIMIT: usize = 1 << 20;

impl Contents for VecContents {
    fn size(&self) -> u64 {
        self.0.lock().len() as u64
    }
    fn blocks(&self) -> u64 {
        (self.0.lock().len() as u64).div_ceil(512)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let v = self.0.lock();
        let Ok(at) = usize::try_from(offset) else { return Ok(0) };
        if at >= v.len() {
            return Ok(0);
        }
        let n = buf.len().min(v.len() - at);
        buf[..n].copy_from_slice(&v[at..at + n]);
        Ok(n)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<usize, Errno> {
        let mut v = self.0.lock();
        let at = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = at.checked_add(buf.len()).ok_or(Errno::EFBIG)?;
        if end > LIMIT {
            return Err(Errno::ENOSPC);
        }
        if v.len() < end {
            v.resize(end, 0);
        }
        v[at..end].copy_from_slice(buf);
        Ok(buf.len())
    }
    fn set_size(&self, size: u64) -> Result<(), Errno> {
        if size > LIMIT as u64 {
            return Err(Errno::ENOSPC);
        }
        self.0.lock().resize(size as usize, 0);
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn new_contents() -> Result<Arc<dyn Contents>, Errno> {
    Ok(Arc::new(VecContents(Mutex::new(Vec::new()))))
}

const NOW: Timespec = Timespec { sec: 1_700_000_000, nsec: 0 };
const ROOT: Creator = Creator { uid: 0, gid: 0, now: NOW };

fn fs_with(dev: u64, max_inodes: usize) -> RamFs {
    let config = Config { dev, max_inodes, blksize: 4096, new_contents, reserve: reserve_infallibly };
    RamFs::new(config, 0o755, ROOT).unwrap()
}

fn fs() -> RamFs {
    fs_with(1, usize::MAX)
}

/// A root and an empty mount table.
struct World {
    _fs: RamFs,
    root: Arc<dyn Inode>,
    mounts: Mounts,
}

impl World {
    fn new() -> Self {
        let fs = fs();
        let root = fs.root();
        Self { _fs: fs, root, mounts: Mounts::new() }
    }

    fn walker(&self) -> Walker<'_> {
        Walker::new(&self.root, &self.mounts)
    }

    fn resolve(&self, path: &str, follow: bool) -> Result<Arc<dyn Inode>, Errno> {
        self.walker().resolve(&self.root, path.as_bytes(), follow)
    }

    fn mkdir(&self, path: &str) -> Arc<dyn Inode> {
        let p = self.walker().resolve_parent(&self.root, path.as_bytes()).unwrap();
        p.dir.create(&p.name.unwrap(), NewNode::Directory, 0o755, ROOT).unwrap()
    }

    fn file(&self, path: &str, data: &[u8]) -> Arc<dyn Inode> {
        let p = self.walker().resolve_parent(&self.root, path.as_bytes()).unwrap();
        let f = p.dir.create(&p.name.unwrap(), NewNode::File, 0o644, ROOT).unwrap();
        f.write_at(0, data, NOW).unwrap();
        f
    }

    fn symlink(&self, path: &str, target: &str) {
        let p = self.walker().resolve_parent(&self.root, path.as_bytes()).unwrap();
        p.dir.create(&p.name.unwrap(), NewNode::Symlink(target.as_bytes()), 0o777, ROOT).unwrap();
    }
}

fn names(dir: &Arc<dyn Inode>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    dir.readdir(0, &mut |e: DirEntry<'_>, _| {
        out.push(e.name.to_vec());
        true
    })
    .unwrap();
    out
}

fn read_all(node: &Arc<dyn Inode>) -> Vec<u8> {
    let mut buf = vec![0u8; node.metadata().size as usize];
    let n = node.read_at(0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn a_new_directory_lists_dot_and_dotdot_and_counts_its_links() {
    let w = World::new();
    let d = w.mkdir("/d");
    assert_eq!(names(&d), vec![b".".to_vec(), b"..".to_vec()]);
    assert_eq!(d.metadata().nlink, 2);
    assert_eq!(w.root.metadata().nlink, 3, "the root gains a link for d's ..");
    w.mkdir("/d/e");
    assert_eq!(d.metadata().nlink, 3);
    assert_eq!(d.metadata().kind, FileType::Directory);
    assert_eq!(d.metadata().perm, 0o755);
}

#[test]
fn a_directory_s_size_is_tmpfs_s_twenty_bytes_a_name() {
    // Linux's tmpfs: 2 * BOGO_DIRENT_SIZE for a new directory, 20 more for each name made, linked
    // or moved in, 20 less for each one removed or moved out (`ls -l /tmp` shows it).
    let w = World::new();
    let a = w.mkdir("/a");
    let b = w.mkdir("/b");
    assert_eq!(a.metadata().size, 40);
    w.file("/a/f", b"x");
    w.mkdir("/a/d");
    assert_eq!(a.metadata().size, 80);
    let f = w.file("/a/g", b"y");
    a.link(b"h", &f, NOW).unwrap();
    assert_eq!(a.metadata().size, 120);
    a.rename(b"f", &b, b"f", 0, NOW).unwrap();
    assert_eq!((a.metadata().size, b.metadata().size), (100, 60));
    a.unlink(b"d", true, NOW).unwrap();
    a.unlink(b"h", false, NOW).unwrap();
    assert_eq!(a.metadata().size, 60);
    assert_eq!(f.metadata().size, 1, "a file's size stays its bytes");
}

#[test]
fn files_read_what_was_written_and_truncate_both_ways() {
    let w = World::new();
    let f = w.file("/f", b"hello");
    assert_eq!(read_all(&f), b"hello");
    assert_eq!(f.metadata().size, 5);
    f.truncate(2, NOW).unwrap();
    assert_eq!(read_all(&f), b"he");
    f.truncate(4, NOW).unwrap();
    assert_eq!(read_all(&f), b"he\0\0");
    let d = w.mkdir("/d");
    assert_eq!(d.read_at(0, &mut [0; 4]), Err(Errno::EISDIR));
    assert_eq!(d.write_at(0, b"x", NOW), Err(Errno::EISDIR));
}

#[test]
fn lookup_errors_are_linuxs() {
    let w = World::new();
    w.file("/f", b"x");
    w.mkdir("/d");
    assert!(matches!(w.resolve("/missing", true), Err(Errno::ENOENT)));
    assert!(matches!(w.resolve("/f/x", true), Err(Errno::ENOTDIR)));
    assert!(matches!(w.resolve("/f/", true), Err(Errno::ENOTDIR)), "a trailing slash needs a directory");
    assert!(w.resolve("/d/", true).is_ok());
    assert!(matches!(w.resolve("/f/.", true), Err(Errno::ENOTDIR)));
    assert!(matches!(w.resolve("", true), Err(Errno::ENOENT)));
    let long = alloc::format!("/{}", "a".repeat(256));
    assert!(matches!(w.resolve(&long, true), Err(Errno::ENAMETOOLONG)));
    let deep = "/d".repeat(2100);
    assert!(matches!(w.resolve(&deep, true), Err(Errno::ENAMETOOLONG)), "PATH_MAX");
}

#[test]
fn dot_and_dotdot_never_leave_the_root() {
    let w = World::new();
    let d = w.mkdir("/d");
    assert!(same(&w.resolve("/..", true).unwrap(), &w.root));
    assert!(same(&w.resolve("/../../d/..", true).unwrap(), &w.root));
    assert!(same(&w.resolve("/d/./.", true).unwrap(), &d));
    assert!(same(&w.resolve("//d//", true).unwrap(), &d));
    // A walk whose root is /d cannot see above it.
    let walker = Walker::new(&d, &w.mounts);
    assert!(same(&walker.resolve(&d, b"../../..", true).unwrap(), &d));
}

#[test]
fn symbolic_links_are_followed_in_the_middle_and_at_the_end_when_asked() {
    let w = World::new();
    w.mkdir("/d");
    let f = w.file("/d/f", b"data");
    w.symlink("/abs", "/d");
    w.symlink("/d/rel", "f");
    w.symlink("/d/up", "../d/f");
    assert!(same(&w.resolve("/abs/f", false).unwrap(), &f));
    assert!(same(&w.resolve("/d/rel", true).unwrap(), &f));
    assert_eq!(w.resolve("/d/rel", false).unwrap().metadata().kind, FileType::Symlink);
    assert!(same(&w.resolve("/d/up", true).unwrap(), &f));
    assert!(same(&w.resolve("/abs/up", true).unwrap(), &f));
    // A link to a directory with a trailing slash is followed even without follow.
    assert_eq!(w.resolve("/abs/", false).unwrap().metadata().kind, FileType::Directory);
    // A dangling link.
    w.symlink("/dangling", "/nowhere");
    assert!(matches!(w.resolve("/dangling", true), Err(Errno::ENOENT)));
    assert_eq!(w.resolve("/dangling", false).unwrap().readlink().unwrap(), b"/nowhere");
}

#[test]
fn forty_links_are_followed_and_the_forty_first_is_eloop() {
    let w = World::new();
    w.file("/target", b"t");
    // /l0 -> /target, /l1 -> /l0, ...
    w.symlink("/l0", "/target");
    for i in 1..=40 {
        w.symlink(&alloc::format!("/l{i}"), &alloc::format!("/l{}", i - 1));
    }
    assert!(w.resolve("/l39", true).is_ok(), "40 links");
    assert!(matches!(w.resolve("/l40", true), Err(Errno::ELOOP)), "41 links");
    w.symlink("/loop", "/loop");
    assert!(matches!(w.resolve("/loop", true), Err(Errno::ELOOP)));
    assert!(matches!(w.resolve("/loop/x", true), Err(Errno::ELOOP)));
}

#[test]
fn unlink_and_rmdir_check_the_kind_and_emptiness() {
    let w = World::new();
    w.mkdir("/d");
    w.file("/d/f", b"");
    assert_eq!(w.root.unlink(b"d", false, NOW), Err(Errno::EISDIR));
    assert_eq!(w.root.unlink(b"d", true, NOW), Err(Errno::ENOTEMPTY));
    let d = w.resolve("/d", true).unwrap();
    assert_eq!(d.unlink(b"f", true, NOW), Err(Errno::ENOTDIR));
    assert_eq!(d.unlink(b"missing", false, NOW), Err(Errno::ENOENT));
    d.unlink(b"f", false, NOW).unwrap();
    w.root.unlink(b"d", true, NOW).unwrap();
    assert_eq!(w.root.metadata().nlink, 2);
    assert_eq!(d.metadata().nlink, 0, "an open directory that was removed");
}

#[test]
fn an_unlinked_open_file_keeps_its_data_and_counts_no_link() {
    let w = World::new();
    let f = w.file("/f", b"kept");
    w.root.unlink(b"f", false, NOW).unwrap();
    assert_eq!(read_all(&f), b"kept");
    assert_eq!(f.metadata().nlink, 0);
    assert_eq!(w.root.link(b"again", &f, NOW), Err(Errno::ENOENT), "Linux: no link to an unlinked file");
}

#[test]
fn hard_links_share_the_node_and_count() {
    let w = World::new();
    let f = w.file("/f", b"one");
    w.root.link(b"g", &f, NOW).unwrap();
    assert_eq!(f.metadata().nlink, 2);
    assert!(same(&w.resolve("/g", true).unwrap(), &f));
    assert_eq!(w.root.link(b"g", &f, NOW), Err(Errno::EEXIST));
    let d = w.mkdir("/d");
    assert_eq!(w.root.link(b"dd", &d, NOW), Err(Errno::EPERM), "no hard link to a directory");
    let other = fs_with(2, usize::MAX);
    assert_eq!(other.root().link(b"x", &f, NOW), Err(Errno::EXDEV));
}

#[test]
fn rename_replaces_moves_and_refuses_as_linux() {
    let w = World::new();
    let a = w.mkdir("/a");
    let b = w.mkdir("/b");
    let f = w.file("/a/f", b"f");
    w.file("/b/g", b"g");
    // A file over another file.
    a.rename(b"f", &b, b"g", 0, NOW).unwrap();
    assert!(same(&w.resolve("/b/g", true).unwrap(), &f));
    assert!(matches!(w.resolve("/a/f", true), Err(Errno::ENOENT)));
    // A file over a directory, a directory over a file.
    w.mkdir("/b/sub");
    assert_eq!(b.rename(b"g", &b, b"sub", 0, NOW), Err(Errno::EISDIR));
    assert_eq!(b.rename(b"sub", &b, b"g", 0, NOW), Err(Errno::ENOTDIR));
    // A directory over a non-empty directory.
    w.mkdir("/a/full");
    w.file("/a/full/x", b"");
    assert_eq!(b.rename(b"sub", &a, b"full", 0, NOW), Err(Errno::ENOTEMPTY));
    // A directory into itself.
    let sub = w.resolve("/b/sub", true).unwrap();
    assert_eq!(w.root.rename(b"b", &sub, b"inside", 0, NOW), Err(Errno::EINVAL));
    // NOREPLACE and EXCHANGE.
    assert_eq!(b.rename(b"g", &a, b"full", RENAME_NOREPLACE, NOW), Err(Errno::EEXIST));
    b.rename(b"g", &a, b"full", RENAME_EXCHANGE, NOW).unwrap();
    assert!(same(&w.resolve("/a/full", true).unwrap(), &f));
    assert_eq!(w.resolve("/b/g", true).unwrap().metadata().kind, FileType::Directory);
    assert_eq!(a.rename(b"full", &b, b"x", RENAME_NOREPLACE | RENAME_EXCHANGE, NOW), Err(Errno::EINVAL));
    // The moved directory's .. follows it; the link counts add up.
    assert!(same(&w.resolve("/b/g/..", true).unwrap(), &b));
    assert_eq!(a.metadata().nlink, 2);
    assert_eq!(b.metadata().nlink, 4, "sub and the exchanged directory");
    // Renaming to the same name, and between two links of one file, do nothing.
    b.rename(b"sub", &b, b"sub", 0, NOW).unwrap();
    w.root.link(b"f2", &f, NOW).unwrap();
    a.rename(b"full", &w.root, b"f2", 0, NOW).unwrap();
}

#[test]
fn listing_positions_survive_removals_in_between() {
    let w = World::new();
    let d = w.mkdir("/d");
    for name in ["a", "b", "c", "e"] {
        d.create(name.as_bytes(), NewNode::File, 0o644, ROOT).unwrap();
    }
    // Read `.`, `..` and `a`, then remove `b` and add `z`.
    let mut seen = Vec::new();
    let mut next = 0;
    d.readdir(0, &mut |e: DirEntry<'_>, cookie| {
        seen.push(e.name.to_vec());
        next = cookie;
        seen.len() < 3
    })
    .unwrap();
    d.unlink(b"b", false, NOW).unwrap();
    d.create(b"z", NewNode::File, 0o644, ROOT).unwrap();
    d.readdir(next, &mut |e: DirEntry<'_>, _| {
        seen.push(e.name.to_vec());
        true
    })
    .unwrap();
    let seen: Vec<&[u8]> = seen.iter().map(Vec::as_slice).collect();
    assert_eq!(seen, [&b"."[..], b"..", b"a", b"c", b"e", b"z"]);
}

#[test]
fn a_full_file_system_is_enospc_and_gives_its_inodes_back() {
    let fs = fs_with(1, 3);
    let root = fs.root();
    root.create(b"a", NewNode::File, 0o644, ROOT).unwrap();
    let b = root.create(b"b", NewNode::File, 0o644, ROOT).unwrap();
    assert_eq!(root.create(b"c", NewNode::File, 0o644, ROOT).err(), Some(Errno::ENOSPC));
    root.unlink(b"b", false, NOW).unwrap();
    drop(b);
    assert_eq!(fs.inodes(), 2);
    root.create(b"c", NewNode::File, 0o644, ROOT).unwrap();
    let f = root.lookup(b"c").unwrap();
    assert_eq!(f.write_at(LIMIT as u64, b"x", NOW), Err(Errno::ENOSPC));
}

#[test]
fn a_mount_covers_its_directory_and_dotdot_climbs_out_of_it() {
    let mut w = World::new();
    let point = w.mkdir("/mnt");
    let inner = fs_with(2, usize::MAX);
    let inner_root = inner.root();
    inner_root.create(b"file", NewNode::File, 0o644, ROOT).unwrap();
    w.mounts
        .add(Mount {
            point: Some(point.clone()),
            root: inner_root.clone(),
            source: "x",
            fstype: "ramfs",
            options: "rw",
            path: b"/mnt".to_vec(),
        })
        .unwrap();
    assert!(same(&w.resolve("/mnt", true).unwrap(), &inner_root));
    assert_eq!(w.resolve("/mnt/file", true).unwrap().metadata().dev, 2);
    assert!(same(&w.resolve("/mnt/..", true).unwrap(), &w.root));
    assert!(same(&w.resolve("/mnt/../mnt/.", true).unwrap(), &inner_root));
    assert!(w.mounts.is_mount_point(&point));
}

#[test]
fn resolve_parent_gives_the_directory_and_the_last_name() {
    let w = World::new();
    let d = w.mkdir("/d");
    let p = w.walker().resolve_parent(&w.root, b"/d/new/").unwrap();
    assert!(same(&p.dir, &d));
    assert_eq!(p.name.as_deref(), Some(&b"new"[..]));
    assert!(p.trailing_slash);
    let p = w.walker().resolve_parent(&w.root, b"/").unwrap();
    assert!(p.name.is_none());
    let p = w.walker().resolve_parent(&d, b"..").unwrap();
    assert_eq!(p.name.as_deref(), Some(&b".."[..]));
    assert!(matches!(w.walker().resolve_parent(&w.root, b"/missing/x"), Err(Errno::ENOENT)));
}

fn archive(members: &[(&str, u32, &[u8])]) -> Vec<u8> {
    initramfs::cpio::build(members)
}

#[test]
fn an_initramfs_unpacks_with_its_kinds_and_permissions() {
    let w = World::new();
    let cpio = archive(&[
        ("bin", 0o040_755, b""),
        ("bin/busybox", 0o100_755, b"\x7fELF..."),
        ("bin/sh", 0o120_777, b"busybox"),
        ("./etc", 0o040_700, b""),
        ("etc/passwd", 0o100_644, b"root:x:0:0::/:/bin/sh\n"),
        ("dev", 0o040_755, b""),
        ("dev/fifo", 0o010_644, b""),
    ]);
    let report = unpack(&cpio, &w.root, &w.mounts, NOW);
    assert_eq!(report.skipped, 0);
    assert_eq!(report.made, 7);
    assert!(report.malformed.is_none());
    assert_eq!(read_all(&w.resolve("/bin/sh", true).unwrap()), b"\x7fELF...");
    assert_eq!(w.resolve("/etc", true).unwrap().metadata().perm, 0o700);
    assert_eq!(w.resolve("/bin/busybox", true).unwrap().metadata().perm, 0o755);
    assert_eq!(w.resolve("/dev/fifo", true).unwrap().metadata().kind, FileType::Fifo);
}

#[test]
fn a_hostile_initramfs_is_contained_and_counted() {
    let w = World::new();
    let cpio = archive(&[
        // Escaping with .. lands in the root.
        ("../../escape", 0o100_644, b"x"),
        // A file in a directory that does not exist: skipped.
        ("no/such/dir/f", 0o100_644, b"x"),
        // A link loop, then a member through it: skipped with ELOOP.
        ("loop", 0o120_777, b"loop"),
        ("loop/f", 0o100_644, b"x"),
        // A file named twice: the second wins.
        ("twice", 0o100_644, b"first"),
        ("twice", 0o100_600, b"second"),
        // An unknown file type.
        ("weird", 0o170_644, b""),
        // A directory over a file replaces it; a file over a non-empty directory does not.
        ("dir", 0o040_755, b""),
        ("dir/inner", 0o100_644, b""),
        ("dir", 0o100_644, b"nope"),
    ]);
    let report = unpack(&cpio, &w.root, &w.mounts, NOW);
    assert_eq!(read_all(&w.resolve("/escape", true).unwrap()), b"x");
    assert_eq!(read_all(&w.resolve("/twice", true).unwrap()), b"second");
    assert_eq!(w.resolve("/twice", true).unwrap().metadata().perm, 0o600);
    assert_eq!(w.resolve("/dir", true).unwrap().metadata().kind, FileType::Directory);
    assert_eq!(report.skipped, 4, "no/such/dir/f, loop/f, weird, dir over a full directory");
    // A truncated archive: the members before the damage are kept.
    let mut cut = archive(&[("a", 0o100_644, b"aaaa"), ("b", 0o100_644, b"bbbbbbbb")]);
    cut.truncate(cut.len() - 150);
    let w2 = World::new();
    let report = unpack(&cut, &w2.root, &w2.mounts, NOW);
    assert!(report.malformed.is_some());
    assert!(w2.resolve("/a", true).is_ok());
}

#[test]
fn unpacking_random_bytes_never_panics() {
    // A deterministic stream of mutated archives.
    let base = archive(&[("d", 0o040_755, b""), ("d/f", 0o100_644, b"hello"), ("d/l", 0o120_777, b"../d/f")]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..2000 {
        let mut bytes = base.clone();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % bytes.len();
            bytes[at] = (seed >> 32) as u8;
        }
        let w = World::new();
        let _ = unpack(&bytes, &w.root, &w.mounts, NOW);
    }
}

#[test]
fn times_owner_and_permissions_change_as_asked() {
    let w = World::new();
    let f = w.file("/f", b"");
    let later = Timespec { sec: NOW.sec + 10, nsec: 5 };
    f.set_perm(0o4711, later).unwrap();
    assert_eq!(f.metadata().perm, 0o4711);
    assert_eq!(f.metadata().ctime, later);
    f.set_owner(Some(7), None, later).unwrap();
    assert_eq!((f.metadata().uid, f.metadata().gid), (7, 0));
    let t = Timespec { sec: 1, nsec: 2 };
    f.set_times(crate::node::TimeChange { atime: Some(t), mtime: None }, later).unwrap();
    assert_eq!(f.metadata().atime, t);
    assert_eq!(f.metadata().mtime, NOW);
}

#[test]
fn a_removed_directory_is_neither_listed_nor_filled() {
    let w = World::new();
    let gone = w.mkdir("/gone");
    let f = w.file("/f", b"");
    w.root.unlink(b"gone", true, NOW).unwrap();
    // Linux's IS_DEADDIR: ENOENT for a listing and for anything made in it.
    assert_eq!(gone.readdir(0, &mut |_, _| true).err(), Some(Errno::ENOENT));
    assert_eq!(gone.create(b"x", NewNode::File, 0o644, ROOT).err(), Some(Errno::ENOENT));
    assert_eq!(gone.create(b"d", NewNode::Directory, 0o755, ROOT).err(), Some(Errno::ENOENT));
    assert_eq!(gone.link(b"l", &f, NOW).err(), Some(Errno::ENOENT));
    assert_eq!(w.root.rename(b"f", &gone, b"f", 0, NOW).err(), Some(Errno::ENOENT));
    assert_eq!(gone.metadata().nlink, 0);
    assert!(w.resolve("/f", true).is_ok(), "the failed rename left f where it was");
}

mod hostile;
mod resolve;

#[test]
fn an_unnamed_file_is_named_once_if_linkable() {
    let w = World::new();
    let d = w.mkdir("/d");
    let t = d.tmpfile(0o600, ROOT, true).unwrap();
    assert_eq!((t.metadata().nlink, t.metadata().kind), (0, FileType::Regular));
    assert_eq!(names(&d).len(), 2, "listed nowhere");
    t.write_at(0, b"T", NOW).unwrap();
    w.root.link(b"named", &t, NOW).unwrap();
    assert_eq!(t.metadata().nlink, 1);
    assert_eq!(read_all(&w.resolve("/named", true).unwrap()), b"T");
    // Once it had a name and lost it, it is an unlinked file like any other.
    w.root.unlink(b"named", false, NOW).unwrap();
    assert_eq!(w.root.link(b"again", &t, NOW).err(), Some(Errno::ENOENT));
    // O_TMPFILE | O_EXCL: never linkable; and the node counts against the inode limit.
    let fs = fs_with(1, 2);
    let u = fs.root().tmpfile(0o600, ROOT, false).unwrap();
    assert_eq!(fs.root().link(b"x", &u, NOW).err(), Some(Errno::ENOENT));
    assert_eq!(fs.root().tmpfile(0o600, ROOT, true).err(), Some(Errno::ENOSPC));
    drop(u);
    assert_eq!(fs.inodes(), 1, "the root alone");
}

#[test]
fn resolve_or_parent_gives_where_a_missing_file_would_be_made() {
    use crate::namei::Last;
    let w = World::new();
    let d = w.mkdir("/d");
    let f = w.file("/d/f", b"");
    w.symlink("/dangling", "d/target");
    w.symlink("/loop", "loop");
    let walker = w.walker();
    assert!(matches!(walker.resolve_or_parent(&w.root, b"/d/f", true), Ok(Last::Found(n)) if same(&n, &f)));
    match walker.resolve_or_parent(&w.root, b"/dangling", true) {
        Ok(Last::Missing(p)) => assert!(same(&p.dir, &d) && p.name.as_deref() == Some(&b"target"[..])),
        _ => panic!("a dangling link names its missing target"),
    }
    assert!(matches!(walker.resolve_or_parent(&w.root, b"/dangling", false), Ok(Last::Found(_))));
    assert!(matches!(walker.resolve_or_parent(&w.root, b"/loop", true), Err(Errno::ELOOP)));
    assert!(
        matches!(walker.resolve_or_parent(&w.root, b"/d/..", true), Ok(Last::Found(n)) if same(&n, &w.root))
    );
    assert!(matches!(walker.resolve_or_parent(&w.root, b"/none/x", true), Err(Errno::ENOENT)));
    match walker.resolve_or_parent(&w.root, b"/d/new/", true) {
        Ok(Last::Missing(p)) => assert!(p.trailing_slash),
        _ => panic!("a missing name with a trailing slash"),
    }
}
