//! Files: `open` flags (arm64 has its own values for four of them: `O_DIRECTORY`, `O_NOFOLLOW`,
//! `O_DIRECT`, `O_LARGEFILE`), `fcntl` commands, the `*at` calls' flags, `lseek`'s whence, file
//! types and permission bits, `renameat2`, `statx` masks, `flock`, `openat2`'s `RESOLVE_*`,
//! `faccessat` modes (asm-generic `fcntl.h`, arm64 `asm/fcntl.h`, `linux/fcntl.h`, `linux/stat.h`,
//! `linux/openat2.h`, `linux/fs.h`).

/// Mask of the access mode.
pub const O_ACCMODE: u32 = 0o3;
/// Open for reading.
pub const O_RDONLY: u32 = 0o0;
/// Open for writing.
pub const O_WRONLY: u32 = 0o1;
/// Open for reading and writing.
pub const O_RDWR: u32 = 0o2;
/// Create the file if it does not exist.
pub const O_CREAT: u32 = 0o100;
/// With `O_CREAT`: fail if it exists.
pub const O_EXCL: u32 = 0o200;
/// Do not make a terminal the controlling terminal.
pub const O_NOCTTY: u32 = 0o400;
/// Truncate a regular file to 0.
pub const O_TRUNC: u32 = 0o1000;
/// Every write goes to the end.
pub const O_APPEND: u32 = 0o2000;
/// Never block.
pub const O_NONBLOCK: u32 = 0o4000;
/// Synchronised data writes.
pub const O_DSYNC: u32 = 0o10000;
/// Signal-driven I/O (`FASYNC`).
pub const O_ASYNC: u32 = 0o20000;
/// Must be a directory (arm64's value).
pub const O_DIRECTORY: u32 = 0o40000;
/// Do not follow a final symbolic link (arm64's value).
pub const O_NOFOLLOW: u32 = 0o100000;
/// Direct I/O hint (arm64's value).
pub const O_DIRECT: u32 = 0o200000;
/// Large files (always so on 64-bit; arm64's value, which `fcntl(F_GETFL)` reports).
pub const O_LARGEFILE: u32 = 0o400000;
/// Do not update the access time.
pub const O_NOATIME: u32 = 0o1000000;
/// Close on exec.
pub const O_CLOEXEC: u32 = 0o2000000;
/// Synchronised file writes (`__O_SYNC | O_DSYNC`).
pub const O_SYNC: u32 = 0o4010000;
/// A handle for the path only: no reading or writing.
pub const O_PATH: u32 = 0o10000000;
/// An unnamed temporary file in the directory (`__O_TMPFILE | O_DIRECTORY`).
pub const O_TMPFILE: u32 = 0o20040000;

/// `fcntl`: duplicate to the lowest free descriptor ≥ the argument.
pub const F_DUPFD: u64 = 0;
/// `fcntl`: get the descriptor flags.
pub const F_GETFD: u64 = 1;
/// `fcntl`: set the descriptor flags.
pub const F_SETFD: u64 = 2;
/// `fcntl`: get the file status flags.
pub const F_GETFL: u64 = 3;
/// `fcntl`: set the file status flags.
pub const F_SETFL: u64 = 4;
/// `fcntl`: test a process-associated record lock.
pub const F_GETLK: u64 = 5;
/// `fcntl`: set a process-associated record lock.
pub const F_SETLK: u64 = 6;
/// `fcntl`: set a process-associated record lock, waiting.
pub const F_SETLKW: u64 = 7;
/// `fcntl`: set the owner of SIGIO.
pub const F_SETOWN: u64 = 8;
/// `fcntl`: get the owner of SIGIO.
pub const F_GETOWN: u64 = 9;
/// `fcntl`: set the signal sent for I/O.
pub const F_SETSIG: u64 = 10;
/// `fcntl`: get the signal sent for I/O.
pub const F_GETSIG: u64 = 11;
/// `fcntl`: set the owner as `struct f_owner_ex` (kind and id).
pub const F_SETOWN_EX: u64 = 15;
/// `fcntl`: get the owner as `struct f_owner_ex` (glibc's `F_GETOWN` uses it).
pub const F_GETOWN_EX: u64 = 16;
/// `fcntl`: test an open-file-description lock.
pub const F_OFD_GETLK: u64 = 36;
/// `fcntl`: set an open-file-description lock.
pub const F_OFD_SETLK: u64 = 37;
/// `fcntl`: set an open-file-description lock, waiting.
pub const F_OFD_SETLKW: u64 = 38;
/// `fcntl`: set a lease.
pub const F_SETLEASE: u64 = 1024;
/// `fcntl`: get the lease.
pub const F_GETLEASE: u64 = 1025;
/// `fcntl`: directory change notification.
pub const F_NOTIFY: u64 = 1026;
/// `fcntl`: `F_DUPFD` with close-on-exec.
pub const F_DUPFD_CLOEXEC: u64 = 1030;
/// `fcntl`: set a pipe's capacity.
pub const F_SETPIPE_SZ: u64 = 1031;
/// `fcntl`: get a pipe's capacity.
pub const F_GETPIPE_SZ: u64 = 1032;
/// `fcntl`: add seals (memfd).
pub const F_ADD_SEALS: u64 = 1033;
/// `fcntl`: get the seals (memfd).
pub const F_GET_SEALS: u64 = 1034;
/// Seal: no further seals.
pub const F_SEAL_SEAL: u32 = 0x1;
/// Seal: the file may not shrink.
pub const F_SEAL_SHRINK: u32 = 0x2;
/// Seal: the file may not grow.
pub const F_SEAL_GROW: u32 = 0x4;
/// Seal: no writes.
pub const F_SEAL_WRITE: u32 = 0x8;
/// Seal: no new writable mappings or writes, existing ones stay.
pub const F_SEAL_FUTURE_WRITE: u32 = 0x10;
/// Seal: the file's execute bits are fixed (Linux 6.3).
pub const F_SEAL_EXEC: u32 = 0x20;
/// The descriptor flag: close on exec.
pub const FD_CLOEXEC: u64 = 1;
/// Record lock type: read.
pub const F_RDLCK: u16 = 0;
/// Record lock type: write.
pub const F_WRLCK: u16 = 1;
/// Record lock type: unlock.
pub const F_UNLCK: u16 = 2;

/// `*at` calls: the current directory.
pub const AT_FDCWD: i32 = -100;
/// Do not follow a final symbolic link.
pub const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
/// `faccessat`: check with the effective ids.
pub const AT_EACCESS: u64 = 0x200;
/// `unlinkat`: remove a directory.
pub const AT_REMOVEDIR: u64 = 0x200;
/// `linkat`: follow a final symbolic link.
pub const AT_SYMLINK_FOLLOW: u64 = 0x400;
/// Do not trigger an automount.
pub const AT_NO_AUTOMOUNT: u64 = 0x800;
/// An empty path names the descriptor itself.
pub const AT_EMPTY_PATH: u64 = 0x1000;
/// `statx`: the sync behaviour bits.
pub const AT_STATX_SYNC_TYPE: u64 = 0x6000;
/// `execveat`: the recursion marker (not a user flag).
pub const AT_RECURSIVE: u64 = 0x8000;

/// `lseek`: from the start.
pub const SEEK_SET: u64 = 0;
/// `lseek`: from the current offset.
pub const SEEK_CUR: u64 = 1;
/// `lseek`: from the end.
pub const SEEK_END: u64 = 2;
/// `lseek`: the next data at or after the offset.
pub const SEEK_DATA: u64 = 3;
/// `lseek`: the next hole at or after the offset.
pub const SEEK_HOLE: u64 = 4;

/// File type mask.
pub const S_IFMT: u32 = 0o170000;
/// Socket.
pub const S_IFSOCK: u32 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Block device.
pub const S_IFBLK: u32 = 0o060000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;
/// FIFO.
pub const S_IFIFO: u32 = 0o010000;
/// Set-user-id.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-id.
pub const S_ISGID: u32 = 0o2000;
/// Sticky.
pub const S_ISVTX: u32 = 0o1000;

/// `faccessat`: existence.
pub const F_OK: u64 = 0;
/// `faccessat`: execute or search.
pub const X_OK: u64 = 1;
/// `faccessat`: write.
pub const W_OK: u64 = 2;
/// `faccessat`: read.
pub const R_OK: u64 = 4;

/// `renameat2`: fail if the target exists.
pub const RENAME_NOREPLACE: u64 = 1;
/// `renameat2`: swap the two names.
pub const RENAME_EXCHANGE: u64 = 2;
/// `renameat2`: leave a whiteout (overlay file systems).
pub const RENAME_WHITEOUT: u64 = 4;

/// `flock`: shared lock.
pub const LOCK_SH: u64 = 1;
/// `flock`: exclusive lock.
pub const LOCK_EX: u64 = 2;
/// `flock`: do not block.
pub const LOCK_NB: u64 = 4;
/// `flock`: unlock.
pub const LOCK_UN: u64 = 8;

/// `openat2`: no crossing of mount points.
pub const RESOLVE_NO_XDEV: u64 = 0x01;
/// `openat2`: no magic links (`/proc/self/fd/N`).
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `openat2`: no symbolic links at all.
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `openat2`: never leave the starting directory.
pub const RESOLVE_BENEATH: u64 = 0x08;
/// `openat2`: the starting directory is the root.
pub const RESOLVE_IN_ROOT: u64 = 0x10;
/// `openat2`: only from the cache.
pub const RESOLVE_CACHED: u64 = 0x20;

/// `statx` mask: `stx_mode & S_IFMT`.
pub const STATX_TYPE: u32 = 0x1;
/// `statx` mask: `stx_mode & !S_IFMT`.
pub const STATX_MODE: u32 = 0x2;
/// `statx` mask: `stx_nlink`.
pub const STATX_NLINK: u32 = 0x4;
/// `statx` mask: `stx_uid`.
pub const STATX_UID: u32 = 0x8;
/// `statx` mask: `stx_gid`.
pub const STATX_GID: u32 = 0x10;
/// `statx` mask: `stx_atime`.
pub const STATX_ATIME: u32 = 0x20;
/// `statx` mask: `stx_mtime`.
pub const STATX_MTIME: u32 = 0x40;
/// `statx` mask: `stx_ctime`.
pub const STATX_CTIME: u32 = 0x80;
/// `statx` mask: `stx_ino`.
pub const STATX_INO: u32 = 0x100;
/// `statx` mask: `stx_size`.
pub const STATX_SIZE: u32 = 0x200;
/// `statx` mask: `stx_blocks`.
pub const STATX_BLOCKS: u32 = 0x400;
/// `statx` mask: what `stat` gives.
pub const STATX_BASIC_STATS: u32 = 0x7ff;
/// `statx` mask: `stx_btime`.
pub const STATX_BTIME: u32 = 0x800;
/// `statx` mask: `stx_mnt_id`.
pub const STATX_MNT_ID: u32 = 0x1000;

/// `fallocate`: do not change the file size.
pub const FALLOC_FL_KEEP_SIZE: u64 = 0x01;
/// `fallocate`: deallocate the range (with `FALLOC_FL_KEEP_SIZE`).
pub const FALLOC_FL_PUNCH_HOLE: u64 = 0x02;
/// `fallocate`: zero the range.
pub const FALLOC_FL_ZERO_RANGE: u64 = 0x10;

/// Longest path, terminator included.
pub const PATH_MAX: usize = 4096;
/// Longest name of one path component.
pub const NAME_MAX: usize = 255;
/// Symbolic links followed in one lookup before `ELOOP` (Linux's `MAXSYMLINKS`).
pub const MAXSYMLINKS: usize = 40;
/// Most buffers in one `readv`/`writev` (`UIO_MAXIOV`).
pub const IOV_MAX: u64 = 1024;
/// `getdents64` entry types (`d_type`): unknown.
pub const DT_UNKNOWN: u8 = 0;
/// `d_type`: FIFO.
pub const DT_FIFO: u8 = 1;
/// `d_type`: character device.
pub const DT_CHR: u8 = 2;
/// `d_type`: directory.
pub const DT_DIR: u8 = 4;
/// `d_type`: block device.
pub const DT_BLK: u8 = 6;
/// `d_type`: regular file.
pub const DT_REG: u8 = 8;
/// `d_type`: symbolic link.
pub const DT_LNK: u8 = 10;
/// `d_type`: socket.
pub const DT_SOCK: u8 = 12;
