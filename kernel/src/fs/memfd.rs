//! `memfd_create`, and what a memfd descriptor does: `ftruncate`, `fstat`, `read`/`write` at
//! the description's position, `lseek`, and `mmap` (shared and private). Its bytes are a page
//! cache (`pagecache`, over `mm::user::object`, host tested) not counted against the file
//! systems' space, as Linux's internal shmem mount is not; this module is the descriptor glue,
//! Linux's `mm/memfd.c` and the shmem file operations.
//!
//! A memfd is an anonymous regular file of a shmem mount: mode `S_IFREG | 0777`, no links,
//! `st_blksize` one page, `st_blocks` the pages it holds. Every descriptor and every mapping
//! holds the page cache (`mm::user::object::ObjectRef`); its pages go back when the last of
//! them is gone. Truncation reaches every process that maps it (`syscall::files::ftruncate`).
//!
//! Seals: `MFD_ALLOW_SEALING` is accepted; no seal can be added (`fcntl(F_ADD_SEALS)` is not
//! implemented), so a memfd behaves as one created without it apart from that.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicU64, Ordering};

use linux_abi::Errno;
use linux_abi::fcntl::{O_LARGEFILE, O_RDWR, S_IFREG};
use linux_abi::layout::Stat;
use linux_abi::mman::{MAP_HUGE_MASK, MAP_HUGE_SHIFT, MFD_ALLOW_SEALING, MFD_CLOEXEC, MFD_HUGETLB};
use linux_abi::poll;
use linux_abi::time::Timespec;
use mm::addr::PAGE_SIZE;
use spin::Mutex;

use super::file::{FdEntry, FdTable, File, Io, IoResult, OpenFile};
use super::node_file::{advance, read_through, seek_in, start_of, write_through};
use super::pagecache::PageCache;
use crate::memory::fallible;
use crate::memory::uaccess::copy_in;

/// The huge page size field, valid with `MFD_HUGETLB` (the same field as `MAP_HUGETLB`'s).
const MFD_HUGE_FIELD: u64 = MAP_HUGE_MASK << MAP_HUGE_SHIFT;
/// The longest name (`NAME_MAX` less the "memfd:" prefix).
const NAME_MAX: usize = 249;

/// `st_dev` of every memfd (Linux's internal shmem mount, 0:1).
const MEMFD_DEV: u64 = 1;

/// Inode numbers of memfds (shmem's `get_next_ino`).
static NEXT_INO: AtomicU64 = AtomicU64::new(1);

/// A memfd: its page cache, inode number and name.
pub struct Memfd {
    cache: Arc<PageCache>,
    ino: u64,
    name: Vec<u8>,
    born: Timespec,
}

/// `memfd_create(name, flags)`, in Linux's order: `EINVAL` unknown flags (the huge page size
/// only with `MFD_HUGETLB`); `EFAULT` an unreadable name; `EINVAL` a name over 249 bytes;
/// `EMFILE` no descriptor. `MFD_HUGETLB` passes the checks and then fails with `EINVAL`:
/// there is no hugetlbfs here. The descriptor goes into `files`.
///
/// # Errors
/// As above, and `ENOMEM`.
pub fn memfd_create(files: &Mutex<FdTable>, name: u64, flags: u64) -> Result<u64, Errno> {
    const ALL: u64 = MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB;
    let known = if flags & MFD_HUGETLB != 0 { ALL | MFD_HUGE_FIELD } else { ALL };
    if flags & !known != 0 || flags >> 32 != 0 {
        return Err(Errno::EINVAL);
    }
    // strnlen_user(name, NAME_MAX + 1).
    let mut text = Vec::new();
    loop {
        let mut b = [0u8; 1];
        copy_in(&mut b, name.wrapping_add(text.len() as u64)).map_err(|_| Errno::EFAULT)?;
        if b[0] == 0 {
            break;
        }
        if text.len() == NAME_MAX {
            return Err(Errno::EINVAL);
        }
        text.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        text.push(b[0]);
    }
    if flags & MFD_HUGETLB != 0 {
        return Err(Errno::EINVAL);
    }
    let cache = fallible::arc(PageCache::new(false)).map_err(|_| Errno::ENOMEM)?;
    let memfd = Memfd {
        cache,
        ino: NEXT_INO.fetch_add(1, Ordering::Relaxed),
        name: text,
        born: super::node_file::now(),
    };
    let memfd: Arc<dyn File> = fallible::arc(memfd).map_err(|_| Errno::ENOMEM)?;
    let file = fallible::arc(OpenFile::new(memfd, O_RDWR | O_LARGEFILE)).map_err(|_| Errno::ENOMEM)?;
    let cloexec = flags & MFD_CLOEXEC != 0;
    files.lock().install_lowest(0, FdEntry { file, cloexec }).map(|fd| fd as u64)
}

impl File for Memfd {
    fn read(&self, mut io: Io<'_>) -> IoResult {
        let start = start_of(&io, 0);
        let n = read_through(&io, start, &|at, buf| self.cache.read_into(at, buf))?;
        advance(&mut io, start, n);
        Ok(n)
    }

    fn write(&self, mut io: Io<'_>, _progress: &mut u64, _sigpipe: &dyn Fn()) -> IoResult {
        let start = start_of(&io, self.cache.size());
        let n = write_through(&io, start, &|at, buf| self.cache.write_from(at, buf))?;
        advance(&mut io, start, n);
        Ok(n)
    }

    fn poll(&self) -> (u16, usize) {
        (poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM, 0)
    }

    /// An anonymous regular file of a shmem mount: mode `S_IFREG | 0777`, no links, `st_blksize`
    /// one page, `st_blocks` the pages it holds.
    fn stat(&self) -> Result<Stat, Errno> {
        let pages = self.cache.pages_held();
        Ok(Stat {
            dev: MEMFD_DEV,
            ino: self.ino,
            mode: S_IFREG | 0o777,
            nlink: 0,
            size: self.cache.size() as i64,
            blksize: PAGE_SIZE as i32,
            blocks: (pages * (PAGE_SIZE / 512)) as i64,
            times: [self.born; 3],
            ..Stat::default()
        })
    }

    /// shmem's `shmem_file_llseek`: the pages held are data, the rest holes.
    fn seek(&self, pos: &mut u64, offset: u64, whence: u64) -> Result<u64, Errno> {
        seek_in(pos, self.cache.size(), offset, whence, Some(&self.cache))
    }

    fn truncate(&self, size: u64) -> Result<(), Errno> {
        self.cache.set_size(size).map(|_| ())
    }

    fn seekable(&self) -> bool {
        true
    }

    fn sync(&self) -> Result<(), Errno> {
        Ok(())
    }

    fn pages(&self) -> Option<Arc<PageCache>> {
        super::pagecache::name(&self.cache, || {
            let path = self.describe().ok()?;
            Some(super::pagecache::MappedName { dev: MEMFD_DEV, ino: self.ino, path, node: None })
        });
        Some(self.cache.clone())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        out.try_reserve(self.name.len() + 20).map_err(|_| Errno::ENOMEM)?;
        out.extend_from_slice(b"/memfd:");
        out.extend_from_slice(&self.name);
        out.extend_from_slice(b" (deleted)");
        Ok(out)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
