//! What a file is to the VFS: an [`Inode`], with its [`Metadata`].
//!
//! Every file system (the RAM file system here; the kernel's `/dev`, `/proc` and `/sys`)
//! implements [`Inode`] for its nodes. A method a kind of node does not have answers Linux's
//! errno for it (`ENOTDIR` for a directory operation on a file, `EISDIR` for reading a
//! directory as a file, `EINVAL` for `readlink` of something that is not a link), so a caller
//! never needs to know which file system it is talking to.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::fcntl::{DT_BLK, DT_CHR, DT_DIR, DT_FIFO, DT_LNK, DT_REG, DT_SOCK, S_IFMT};
use linux_abi::fcntl::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFREG, S_IFSOCK};
use linux_abi::time::Timespec;

/// The kind of a node (the `S_IFMT` bits of its mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A socket.
    Socket,
}

impl FileType {
    /// The `S_IFMT` bits.
    pub const fn mode_bits(self) -> u32 {
        match self {
            Self::Regular => S_IFREG,
            Self::Directory => S_IFDIR,
            Self::Symlink => S_IFLNK,
            Self::Fifo => S_IFIFO,
            Self::CharDevice => S_IFCHR,
            Self::BlockDevice => S_IFBLK,
            Self::Socket => S_IFSOCK,
        }
    }

    /// The kind a mode's `S_IFMT` bits name (`None`: no kind Linux knows).
    pub const fn from_mode(mode: u32) -> Option<Self> {
        Some(match mode & S_IFMT {
            S_IFREG => Self::Regular,
            S_IFDIR => Self::Directory,
            S_IFLNK => Self::Symlink,
            S_IFIFO => Self::Fifo,
            S_IFCHR => Self::CharDevice,
            S_IFBLK => Self::BlockDevice,
            S_IFSOCK => Self::Socket,
            _ => return None,
        })
    }

    /// `getdents64`'s `d_type`.
    pub const fn dirent_type(self) -> u8 {
        match self {
            Self::Regular => DT_REG,
            Self::Directory => DT_DIR,
            Self::Symlink => DT_LNK,
            Self::Fifo => DT_FIFO,
            Self::CharDevice => DT_CHR,
            Self::BlockDevice => DT_BLK,
            Self::Socket => DT_SOCK,
        }
    }
}

/// What `stat` tells of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The file system it is on (`st_dev`).
    pub dev: u64,
    /// Its number on that file system (`st_ino`).
    pub ino: u64,
    /// Its kind.
    pub kind: FileType,
    /// Permission bits (`0o7777`: with set-user-id, set-group-id and sticky).
    pub perm: u32,
    /// Hard links (2 + subdirectories for a directory).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The device a device node is (`st_rdev`, Linux's encoding).
    pub rdev: u64,
    /// Size in bytes (a symbolic link: its target's length).
    pub size: u64,
    /// 512-byte blocks it holds.
    pub blocks: u64,
    /// `st_blksize`.
    pub blksize: u32,
    /// Last access.
    pub atime: Timespec,
    /// Last change of the contents.
    pub mtime: Timespec,
    /// Last change of the node (contents or attributes).
    pub ctime: Timespec,
}

impl Metadata {
    /// `st_mode`: kind and permission bits.
    pub const fn mode(&self) -> u32 {
        self.kind.mode_bits() | self.perm
    }
}

/// A node to create in a directory ([`Inode::create`]).
#[derive(Clone, Copy, Debug)]
pub enum NewNode<'a> {
    /// An empty regular file.
    File,
    /// An empty directory.
    Directory,
    /// A symbolic link to this target.
    Symlink(&'a [u8]),
    /// A FIFO.
    Fifo,
    /// A character device with this `rdev`.
    CharDevice(u64),
    /// A block device with this `rdev`.
    BlockDevice(u64),
    /// A socket (bound by a program).
    Socket,
}

/// Who creates a node, and when: its owner, group and times.
#[derive(Clone, Copy, Debug)]
pub struct Creator {
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Its time of birth (all three times).
    pub now: Timespec,
}

/// One entry of a directory listing.
#[derive(Clone, Copy, Debug)]
pub struct DirEntry<'a> {
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: FileType,
    /// Name (`.` and `..` included).
    pub name: &'a [u8],
}

/// Which times `set_times` changes ([`Inode::set_times`]): `None` leaves one alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimeChange {
    /// New access time.
    pub atime: Option<Timespec>,
    /// New modification time.
    pub mtime: Option<Timespec>,
}

/// A node of a file system.
pub trait Inode: Send + Sync + Any {
    /// Its metadata now.
    fn metadata(&self) -> Metadata;

    /// Changes its permission bits (`chmod`); the kind stays.
    ///
    /// # Errors
    /// `EPERM` where the file system does not allow it.
    fn set_perm(&self, perm: u32, now: Timespec) -> Result<(), Errno>;

    /// Changes its owner and/or group (`chown`; `None` leaves one alone).
    ///
    /// # Errors
    /// `EPERM` where the file system does not allow it.
    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>, now: Timespec) -> Result<(), Errno>;

    /// Changes its access and/or modification time (`utimensat`); `now` is the change time.
    ///
    /// # Errors
    /// `EPERM` where the file system does not allow it.
    fn set_times(&self, change: TimeChange, now: Timespec) -> Result<(), Errno>;

    /// The node named `name` in this directory (`.` and `..` are the caller's: never asked).
    ///
    /// # Errors
    /// `ENOTDIR` (not a directory), `ENOENT`.
    fn lookup(&self, name: &[u8]) -> Result<Arc<dyn Inode>, Errno> {
        let _ = name;
        Err(Errno::ENOTDIR)
    }

    /// Creates `name` in this directory.
    ///
    /// # Errors
    /// `ENOTDIR`, `EEXIST`, `ENOSPC`, `ENOMEM`, `EPERM` (a file system that makes no such node).
    fn create(
        &self,
        name: &[u8],
        node: NewNode<'_>,
        perm: u32,
        who: Creator,
    ) -> Result<Arc<dyn Inode>, Errno> {
        let _ = (name, node, perm, who);
        Err(Errno::ENOTDIR)
    }

    /// Makes an unnamed regular file in this directory's file system (`O_TMPFILE`): it has no
    /// link, and goes when its last holder drops it; `linkable`: a later [`Inode::link`] may
    /// name it (`O_TMPFILE` without `O_EXCL`), once.
    ///
    /// # Errors
    /// `EOPNOTSUPP` (a file system without unnamed files), `ENOTDIR`, `ENOENT` (a removed
    /// directory), `ENOSPC`, `ENOMEM`.
    fn tmpfile(&self, perm: u32, who: Creator, linkable: bool) -> Result<Arc<dyn Inode>, Errno> {
        let _ = (perm, who, linkable);
        Err(Errno::EOPNOTSUPP)
    }

    /// Makes `name` in this directory a new link to `target` (`link`).
    ///
    /// # Errors
    /// `ENOTDIR`, `EEXIST`, `EXDEV` (another file system), `EPERM` (a directory), `EMLINK`,
    /// `ENOENT` (a removed directory, or a target without links that may not get one), `ENOMEM`.
    fn link(&self, name: &[u8], target: &Arc<dyn Inode>, now: Timespec) -> Result<(), Errno> {
        let _ = (name, target, now);
        Err(Errno::ENOTDIR)
    }

    /// Removes `name` from this directory: a non-directory (`unlink`, `dir` false) or an empty
    /// directory (`rmdir`, `dir` true).
    ///
    /// # Errors
    /// `ENOTDIR`, `ENOENT`, `EISDIR` (`unlink` of a directory), `ENOTDIR` (`rmdir` of a file),
    /// `ENOTEMPTY`, `EBUSY` (a mount point).
    fn unlink(&self, name: &[u8], dir: bool, now: Timespec) -> Result<(), Errno> {
        let _ = (name, dir, now);
        Err(Errno::ENOTDIR)
    }

    /// Moves `name` of this directory to `new_name` in `new_dir` (`renameat2` with `flags`:
    /// `RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    ///
    /// # Errors
    /// Linux's, in its order: `ENOENT`, `EXDEV`, `EEXIST`, `ENOTDIR`, `EISDIR`, `ENOTEMPTY`,
    /// `EINVAL` (a directory into itself).
    fn rename(
        &self,
        name: &[u8],
        new_dir: &Arc<dyn Inode>,
        new_name: &[u8],
        flags: u64,
        now: Timespec,
    ) -> Result<(), Errno> {
        let _ = (name, new_dir, new_name, flags, now);
        Err(Errno::ENOTDIR)
    }

    /// Lists this directory from position `cookie` (0: the start, `.` and `..` first): calls
    /// `each` with every entry and the cookie of the entry after it, until `each` returns false.
    ///
    /// # Errors
    /// `ENOTDIR`.
    fn readdir(&self, cookie: u64, each: &mut dyn FnMut(DirEntry<'_>, u64) -> bool) -> Result<(), Errno> {
        let _ = (cookie, each);
        Err(Errno::ENOTDIR)
    }

    /// The parent directory of this directory (`..`); the root of a file system is its own.
    ///
    /// # Errors
    /// `ENOTDIR`.
    fn parent(&self) -> Result<Arc<dyn Inode>, Errno> {
        Err(Errno::ENOTDIR)
    }

    /// A symbolic link's target.
    ///
    /// # Errors
    /// `EINVAL` (not a link), `ENOMEM`.
    fn readlink(&self) -> Result<Vec<u8>, Errno> {
        Err(Errno::EINVAL)
    }

    /// Reads from byte `offset` into `buf`; 0 at or past the end.
    ///
    /// # Errors
    /// `EISDIR`, `EINVAL` (not a regular file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let _ = (offset, buf);
        Err(self.not_a_file())
    }

    /// Writes `buf` at byte `offset`, growing the file.
    ///
    /// # Errors
    /// `EISDIR`, `EINVAL`, `EFBIG`, `ENOSPC`, `ENOMEM`.
    fn write_at(&self, offset: u64, buf: &[u8], now: Timespec) -> Result<usize, Errno> {
        let _ = (offset, buf, now);
        Err(self.not_a_file())
    }

    /// Sets the size (`truncate`): shrinking drops the bytes past the end, growing reads zero.
    ///
    /// # Errors
    /// `EISDIR`, `EINVAL`, `EFBIG`, `ENOSPC`.
    fn truncate(&self, size: u64, now: Timespec) -> Result<(), Errno> {
        let _ = (size, now);
        Err(self.not_a_file())
    }

    /// Whether this symbolic link stands for an open file rather than for its text (Linux's
    /// "magic links", `/proc/PID/fd/N`): a walk that would follow it as the last component
    /// stops at it, and the opener reopens what it stands for. In the middle of a path it is
    /// followed by its text like any link.
    fn is_magic_link(&self) -> bool {
        false
    }

    /// The node a magic link stands for (Linux's `nd_jump_link`): the file a descriptor is open
    /// on, the program, the working directory. `Ok(None)`: it stands for an open file that has
    /// no node (a pipe, a memfd), which the opener reopens itself; or this is no magic link.
    ///
    /// # Errors
    /// `ENOENT` (what it stood for is gone), `ENOMEM`.
    fn magic_node(&self) -> Result<Option<Arc<dyn Inode>>, Errno> {
        Ok(None)
    }

    /// The text of a generated file, made now (Linux's `seq_file`: `/proc`, `/sys`), which an
    /// open description keeps from its first read on; `None` for a file whose bytes are stored
    /// (`read_at`).
    fn generate(&self) -> Option<Result<Vec<u8>, Errno>> {
        None
    }

    /// The contents of a regular file, for mapping it (the page cache); `None` otherwise.
    fn contents(&self) -> Option<Arc<dyn Contents>> {
        None
    }

    /// The error of a data operation on something that is not a regular file.
    fn not_a_file(&self) -> Errno {
        if self.metadata().kind == FileType::Directory { Errno::EISDIR } else { Errno::EINVAL }
    }

    /// The node as `Any`, for a file system to recognise its own nodes.
    fn as_any(&self) -> &dyn Any;
}

/// The bytes of a regular file. The kernel's implementation is its page cache (so that `read`,
/// `write` and every mapping of the file share the same frames); the tests use a vector.
pub trait Contents: Send + Sync + Any {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// 512-byte blocks held.
    fn blocks(&self) -> u64;
    /// Reads from byte `offset`; 0 at or past the end.
    ///
    /// # Errors
    /// `ENOMEM`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno>;
    /// Writes at byte `offset`, growing the file.
    ///
    /// # Errors
    /// `EFBIG`, `ENOSPC`, `ENOMEM`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<usize, Errno>;
    /// Sets the size.
    ///
    /// # Errors
    /// `EFBIG`, `ENOSPC`, `ENOMEM`.
    fn set_size(&self, size: u64) -> Result<(), Errno>;
    /// The contents as `Any` (the kernel recovers its page cache object).
    fn as_any(&self) -> &dyn Any;
}

/// Makes the contents of new regular files (`ENOSPC` or `ENOMEM` when none can be made).
pub type NewContents = fn() -> Result<Arc<dyn Contents>, Errno>;

/// Linux's `new_encode_dev`: `st_rdev` of device `major`:`minor`.
pub const fn encode_dev(major: u32, minor: u32) -> u64 {
    linux_abi::layout::encode_dev(major, minor)
}

/// Whether two nodes are the same node.
pub fn same(a: &Arc<dyn Inode>, b: &Arc<dyn Inode>) -> bool {
    core::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}
