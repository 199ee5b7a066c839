//! A node of a file system, opened: a regular file (its bytes in the page cache), a directory
//! (`getdents64`), a generated file of `/proc` or `/sys` (its text made at the first read and
//! kept by the description, as Linux's `seq_file`), or an `O_PATH` handle that only names the
//! node. Devices and FIFOs are nodes too, but what opening them gives is the device's or the
//! pipe's file (`dev`, `pipe`); [`Named`] is what those keep of the node they were opened by.
//!
//! Reads and writes go through a kernel buffer a chunk at a time, so that no lock of a file
//! system is held while a user buffer is copied (a copy may fault, and the fault may need the
//! same file's pages).
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::fcntl::{SEEK_CUR, SEEK_DATA, SEEK_END, SEEK_HOLE, SEEK_SET};
use linux_abi::layout::Stat;
use linux_abi::poll;
use linux_abi::time::Timespec;
use spin::Mutex;
use vfs::node::{FileType, Inode};

use super::file::{File, FileError, Io, IoResult, Offset, OpenFile};
use super::pagecache::PageCache;
use crate::memory::uaccess::copy_out;

/// Bytes moved per step of a read or write.
const CHUNK: usize = 4096;

/// A node and the path it was opened by (what `/proc/PID/fd` shows of it).
pub struct Named {
    /// The node.
    pub node: Arc<dyn Inode>,
    /// Its absolute path when it was opened.
    pub path: Vec<u8>,
}

impl Named {
    /// What `readlink("/proc/PID/fd/N")` says: the path, with ` (deleted)` once its last name is
    /// gone.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn describe(&self) -> Result<Vec<u8>, Errno> {
        let mut out = super::copy_bytes(&self.path)?;
        let m = self.node.metadata();
        if m.nlink == 0 && m.kind != FileType::Directory {
            super::file::push_fmt(&mut out, format_args!(" (deleted)"))?;
        }
        Ok(out)
    }
}

/// The `struct stat` of `node`.
pub fn stat_of(node: &Arc<dyn Inode>) -> Stat {
    let m = node.metadata();
    Stat {
        dev: m.dev,
        ino: m.ino,
        mode: m.mode(),
        nlink: m.nlink,
        uid: m.uid,
        gid: m.gid,
        rdev: m.rdev,
        size: m.size as i64,
        blksize: m.blksize as i32,
        blocks: m.blocks as i64,
        times: [m.atime, m.mtime, m.ctime],
    }
}

/// The time now, for the times a change sets.
pub fn now() -> Timespec {
    Timespec::from_ns(crate::wallclock::realtime_ns())
}

/// An opened node of a file system (module documentation).
pub struct NodeFile {
    named: Named,
    /// `O_PATH`: the description only names the node.
    path_only: bool,
    /// A generated file's text, from the first read on (`None` before it, or after a rewind).
    text: Mutex<Option<Vec<u8>>>,
    /// Opened for writing: the right to write held for the file's life (`ETXTBSY` to exec it).
    _write: Option<super::pagecache::WriteAccess>,
}

impl NodeFile {
    /// `named`, opened (`path_only`: with `O_PATH`).
    pub fn new(named: Named, path_only: bool) -> Self {
        Self { named, path_only, text: Mutex::new(None), _write: None }
    }

    /// `self`, opened for writing: holds the right to write its page cache, if it has one
    /// (Linux's `get_write_access` in `do_dentry_open`).
    ///
    /// # Errors
    /// `ETXTBSY` while a program runs from the file.
    pub fn for_writing(mut self) -> Result<Self, Errno> {
        if let Some(cache) = super::pagecache::of_node(&self.named.node) {
            self._write = Some(cache.get_write_access()?);
        }
        Ok(self)
    }

    fn kind(&self) -> FileType {
        self.named.node.metadata().kind
    }

    /// Reads a generated file from `offset` (the text made now if the read starts at 0 or none
    /// was made yet).
    fn read_text(&self, io: &Io<'_>, offset: u64, text: Result<Vec<u8>, Errno>) -> IoResult {
        let mut kept = self.text.lock();
        if offset == 0 || kept.is_none() {
            *kept = Some(text?);
        }
        let t = kept.as_deref().unwrap_or_default();
        let from = usize::try_from(offset).unwrap_or(usize::MAX).min(t.len());
        io.scatter(&t[from..])
    }
}

/// `lseek` over a file of `size` bytes: the new position, set in `pos`. `SEEK_DATA` and
/// `SEEK_HOLE` ask `pages` (the file's page cache: pages held are data, the rest holes, as
/// tmpfs); a file without one is data up to its end (Linux's `generic_file_llseek`).
///
/// # Errors
/// `EINVAL` (a bad `whence`, or a result below 0), `ENXIO` (`SEEK_DATA`/`SEEK_HOLE` at or past
/// the end, or no data after the offset).
pub fn seek_in(
    pos: &mut u64,
    size: u64,
    offset: u64,
    whence: u64,
    pages: Option<&PageCache>,
) -> Result<u64, Errno> {
    let off = offset as i64;
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => *pos as i64,
        SEEK_END => size as i64,
        SEEK_DATA | SEEK_HOLE => {
            let to = match pages {
                Some(cache) => cache.seek_data_hole(offset, whence == SEEK_DATA)?,
                None if off < 0 || off as u64 >= size => return Err(Errno::ENXIO),
                None if whence == SEEK_DATA => off as u64,
                None => size,
            };
            *pos = to;
            return Ok(to);
        }
        _ => return Err(Errno::EINVAL),
    };
    match base.checked_add(off) {
        Some(new) if new >= 0 => {
            *pos = new as u64;
            Ok(new as u64)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Where an [`Io`] starts: its offset, or the end of the file for an append.
pub fn start_of(io: &Io<'_>, size: u64) -> u64 {
    match &io.offset {
        // Linux's `generic_write_checks`: an `O_APPEND` write goes to the end, `pwrite`'s too.
        _ if io.append => size,
        Offset::Current(pos) => **pos,
        Offset::At(at) => *at,
    }
}

/// Advances the description's position past what an [`Io`] from `start` moved (`n` bytes).
pub fn advance(io: &mut Io<'_>, start: u64, n: u64) {
    if let Offset::Current(pos) = &mut io.offset {
        **pos = start + n;
    }
}

/// Reads bytes of a file from an offset into a kernel buffer: the count, 0 at the end.
pub type ReadAt<'a> = &'a dyn Fn(u64, &mut [u8]) -> Result<usize, Errno>;

/// Writes a kernel buffer into a file at an offset: the count.
pub type WriteAt<'a> = &'a dyn Fn(u64, &[u8]) -> Result<usize, Errno>;

/// Reads from `read_at` (a node's or a page cache's bytes) into the user buffers, from `start`.
pub fn read_through(io: &Io<'_>, start: u64, read_at: ReadAt<'_>) -> IoResult {
    let mut buf = [0u8; CHUNK];
    let mut done = 0u64;
    for &(base, len) in io.buffers {
        let mut at = 0u64;
        while at < len {
            let want = (len - at).min(CHUNK as u64) as usize;
            let got = match read_at(start + done, &mut buf[..want]) {
                Ok(got) => got,
                Err(e) if done == 0 => return Err(e.into()),
                Err(_) => return Ok(done),
            };
            if got == 0 {
                return Ok(done);
            }
            if io.put(base.wrapping_add(at), &buf[..got]).is_err() {
                return if done == 0 { Err(Errno::EFAULT.into()) } else { Ok(done) };
            }
            at += got as u64;
            done += got as u64;
            if got < want {
                return Ok(done);
            }
        }
    }
    Ok(done)
}

/// Writes the user buffers through `write_at` from `start`.
pub fn write_through(io: &Io<'_>, start: u64, write_at: WriteAt<'_>) -> IoResult {
    let mut chunk = [0u8; CHUNK];
    let mut done = 0u64;
    io.gather(&mut chunk, 0, &mut |bytes| {
        let n = write_at(start + done, bytes).map_err(FileError::Errno)?;
        done += n as u64;
        Ok(n)
    })
}

impl File for NodeFile {
    fn read(&self, mut io: Io<'_>) -> IoResult {
        if self.path_only {
            return Err(Errno::EBADF.into());
        }
        let node = &self.named.node;
        let start = start_of(&io, 0);
        if let Some(text) = node.generate() {
            let n = self.read_text(&io, start, text)?;
            advance(&mut io, start, n);
            return Ok(n);
        }
        if self.kind() == FileType::Directory {
            return Err(Errno::EISDIR.into());
        }
        if (start as i64) < 0 {
            return Err(Errno::EINVAL.into());
        }
        let n = read_through(&io, start, &|at, buf| node.read_at(at, buf))?;
        advance(&mut io, start, n);
        Ok(n)
    }

    fn write(&self, mut io: Io<'_>, _progress: &mut u64, _sigpipe: &dyn Fn()) -> IoResult {
        if self.path_only {
            return Err(Errno::EBADF.into());
        }
        let node = &self.named.node;
        let m = node.metadata();
        if m.kind == FileType::Directory {
            return Err(Errno::EISDIR.into());
        }
        let start = start_of(&io, m.size);
        if (start as i64) < 0 {
            return Err(Errno::EINVAL.into());
        }
        let now = now();
        let n = write_through(&io, start, &|at, buf| node.write_at(at, buf, now))?;
        advance(&mut io, start, n);
        Ok(n)
    }

    fn poll(&self) -> (u16, usize) {
        // Linux's DEFAULT_POLLMASK for files without a poll method.
        (poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM, 0)
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(stat_of(&self.named.node))
    }

    fn seek(&self, pos: &mut u64, offset: u64, whence: u64) -> Result<u64, Errno> {
        if self.path_only {
            return Err(Errno::EBADF);
        }
        match self.kind() {
            FileType::Directory => match whence {
                // A directory's position is a cookie of its listing (0: the start).
                SEEK_SET if (offset as i64) >= 0 => {
                    *pos = offset;
                    Ok(offset)
                }
                SEEK_CUR if offset == 0 => Ok(*pos),
                _ => Err(Errno::EINVAL),
            },
            _ => {
                let size = match self.text.lock().as_ref() {
                    Some(t) => t.len() as u64,
                    None => self.named.node.metadata().size,
                };
                seek_in(pos, size, offset, whence, self.pages().as_deref())
            }
        }
    }

    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        use linux_abi::termios::ioctl::FIONREAD;
        if request as u32 as u64 == FIONREAD && self.kind() == FileType::Regular {
            // Linux's `ioctl_fionread` for a regular file: the bytes from the position to the end.
            let left = self.named.node.metadata().size.saturating_sub(*open.pos.lock());
            let n = u32::try_from(left).unwrap_or(u32::MAX);
            return copy_out(arg, &n.to_le_bytes()).map(|()| 0).map_err(|_| Errno::EFAULT);
        }
        Err(Errno::ENOTTY)
    }

    fn truncate(&self, size: u64) -> Result<(), Errno> {
        if self.kind() == FileType::Directory {
            return Err(Errno::EISDIR);
        }
        self.named.node.truncate(size, now())
    }

    fn getdents(&self, pos: &mut u64, buf: u64, len: u64) -> Result<u64, Errno> {
        if self.path_only {
            return Err(Errno::EBADF);
        }
        getdents(&self.named.node, pos, buf, len)
    }

    fn inode(&self) -> Option<&Arc<dyn Inode>> {
        Some(&self.named.node)
    }

    fn pages(&self) -> Option<Arc<PageCache>> {
        if self.path_only {
            return None;
        }
        let cache = super::pagecache::of(&self.named.node.contents()?)?;
        super::pagecache::name(&cache, || {
            let m = self.named.node.metadata();
            let path = super::copy_bytes(&self.named.path).ok()?;
            Some(super::pagecache::MappedName {
                dev: m.dev,
                ino: m.ino,
                path,
                node: Some(Arc::downgrade(&self.named.node)),
            })
        });
        Some(cache)
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        self.named.describe()
    }

    fn seekable(&self) -> bool {
        true
    }

    fn sync(&self) -> Result<(), Errno> {
        // The RAM file systems' files and directories (tmpfs's `noop_fsync`); `/proc` and
        // `/sys` have none.
        if self.named.node.as_any().is::<vfs::ramfs::RamNode>() { Ok(()) } else { Err(Errno::EINVAL) }
    }

    fn path_only(&self) -> bool {
        self.path_only
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `getdents64` of directory `node` from cookie `pos` into the user buffer `buf` of `len`
/// bytes: `struct linux_dirent64` records (inode, the next record's cookie, record length,
/// type, name and NUL, padded to 8 bytes). `EINVAL` when the first record does not fit.
///
/// # Errors
/// `ENOTDIR`, `EINVAL`, `EFAULT`, `ENOMEM`.
pub fn getdents(node: &Arc<dyn Inode>, pos: &mut u64, buf: u64, len: u64) -> Result<u64, Errno> {
    let room = usize::try_from(len.min(1 << 16)).unwrap_or(1 << 16);
    let mut out = Vec::new();
    out.try_reserve_exact(room).map_err(|_| Errno::ENOMEM)?;
    let mut next = *pos;
    let mut too_small = false;
    node.readdir(*pos, &mut |entry, cookie| {
        let reclen = (19 + entry.name.len() + 1).next_multiple_of(8);
        if out.len() + reclen > room {
            too_small = out.is_empty();
            return false;
        }
        out.extend_from_slice(&entry.ino.to_le_bytes());
        out.extend_from_slice(&cookie.to_le_bytes());
        out.extend_from_slice(&(reclen as u16).to_le_bytes());
        out.push(entry.kind.dirent_type());
        out.extend_from_slice(entry.name);
        out.resize(out.len() + reclen - 19 - entry.name.len(), 0);
        next = cookie;
        true
    })?;
    if too_small {
        return Err(Errno::EINVAL);
    }
    copy_out(buf, &out).map_err(|_| Errno::EFAULT)?;
    *pos = next;
    Ok(out.len() as u64)
}

/// A file, or its first bytes, read into memory, 8-byte aligned (what the ELF reader wants): a
/// program being executed.
pub struct Image {
    words: Vec<u64>,
    len: usize,
    /// The file's size when it was read.
    size: u64,
}

impl Image {
    /// The bytes read: the whole file ([`read_image`]) or its first ones ([`read_image_head`]).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes (`read_image` filled them), and
        // u64 has no padding, so its bytes may be viewed as u8.
        unsafe { core::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    /// The file's size when it was read.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// Reads all of regular file `node` (at most `limit` bytes: `EFBIG`/`ENOMEM` past it).
///
/// # Errors
/// `EACCES` (not a regular file), `ENOMEM`, `EFBIG`, what the file system answers.
pub fn read_image(node: &Arc<dyn Inode>, limit: u64) -> Result<Image, Errno> {
    read_image_head(node, limit, u64::MAX)
}

/// Reads the first `want` bytes of regular file `node` (all of it if it is shorter), whose size
/// may be at most `limit` (`ENOMEM` past it, as for [`read_image`]): a program's headers, which
/// is all `execve` reads of a file its page cache maps (Linux's `load_elf_binary` reads the
/// header, the program headers and what they point at, never the whole file).
///
/// # Errors
/// As [`read_image`].
pub fn read_image_head(node: &Arc<dyn Inode>, limit: u64, want: u64) -> Result<Image, Errno> {
    let m = node.metadata();
    if m.kind != FileType::Regular {
        return Err(Errno::EACCES);
    }
    if m.size > limit {
        return Err(Errno::ENOMEM);
    }
    let len = usize::try_from(m.size.min(want)).map_err(|_| Errno::EFBIG)?;
    let mut words: Vec<u64> = Vec::new();
    words.try_reserve_exact(len.div_ceil(8)).map_err(|_| Errno::ENOMEM)?;
    words.resize(len.div_ceil(8), 0);
    // SAFETY: the vector holds `len.div_ceil(8) * 8 >= len` zeroed bytes, viewed as u8 (no padding).
    let bytes = unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) };
    let mut at = 0;
    while at < len {
        let n = node.read_at(at as u64, &mut bytes[at..])?;
        if n == 0 {
            break;
        }
        at += n;
    }
    Ok(Image { words, len: at, size: m.size })
}
