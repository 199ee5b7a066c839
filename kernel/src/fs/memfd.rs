//! `memfd_create`, and what a memfd descriptor does: `ftruncate`, `fstat`, `read`/`write` at
//! the description's position, `lseek`, and `mmap` (shared and private). The object itself —
//! the page cache, truncation, which frames a mapping sees — is `mm::user::object`'s (host
//! tested); this module is the descriptor glue, Linux's `mm/memfd.c` and the shmem file
//! operations.
//!
//! A memfd is an anonymous regular file of a shmem mount: mode `S_IFREG | 0777`, no links,
//! `st_blksize` one page, `st_blocks` the pages it holds. Every descriptor and every mapping
//! holds the object ([`ObjectRef`]); its pages go back when the last of them is gone.
//! Truncation reaches every process that maps the object: the object shrinks first (so no
//! fault can map a page past the new end), then each process's memory unmaps those pages, one
//! process lock at a time, never inside the object's lock (the fault path takes them in the
//! other order).
//!
//! Seals: `MFD_ALLOW_SEALING` is accepted; no seal can be added (`fcntl(F_ADD_SEALS)` is not
//! implemented), so a memfd behaves as one created without it apart from that.
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use linux_abi::layout::Stat;
use linux_abi::time::Timespec;
use mm::addr::{PAGE_SIZE, PhysAddr};
use mm::user::UserFrames as _;
use mm::user::object::{MAX_SIZE, MemObject, ObjectRef, SharedObject};
use spin::Mutex;

use linux_abi::Errno;
use linux_abi::fcntl::{O_LARGEFILE, O_RDWR, S_IFREG, SEEK_CUR, SEEK_DATA, SEEK_END, SEEK_HOLE, SEEK_SET};
use linux_abi::mman::{MAP_HUGE_MASK, MAP_HUGE_SHIFT, MFD_ALLOW_SEALING, MFD_CLOEXEC, MFD_HUGETLB};

use super::file::{FdEntry, FdTable, FileKind, OpenFile};
use crate::memory::frames;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::memory::vmspace::Vmspace;

/// The huge page size field, valid with `MFD_HUGETLB` (the same field as `MAP_HUGETLB`'s).
const MFD_HUGE_FIELD: u64 = MAP_HUGE_MASK << MAP_HUGE_SHIFT;
/// The longest name (`NAME_MAX` less the "memfd:" prefix).
const NAME_MAX: usize = 249;
/// Bytes copied per step of `read`/`write` (through a kernel buffer: the object's lock is never
/// held across a user copy, which may fault on a mapping of the same object).
const CHUNK: usize = 4096;

/// Inode numbers of memfds (shmem's `get_next_ino`).
static NEXT_INO: AtomicU64 = AtomicU64::new(1);

/// The object of one memfd: the page cache behind the kernel's lock.
#[derive(Debug)]
pub struct MemfdObject {
    pages: Mutex<MemObject>,
    ino: u64,
}

impl SharedObject for MemfdObject {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.pages.lock());
    }
}

impl Drop for MemfdObject {
    fn drop(&mut self) {
        // The last descriptor and the last mapping are gone: the object's references go.
        self.pages.get_mut().release(&mut frames::UserFrames);
    }
}

/// A memfd's part of its open file description.
#[derive(Debug)]
pub struct Memfd {
    object: Arc<MemfdObject>,
    /// The file position (shared by dup'ed descriptors, as the description is).
    pos: Mutex<u64>,
}

impl Memfd {
    fn handle(&self) -> ObjectRef {
        self.object.clone()
    }

    fn size(&self) -> u64 {
        self.object.pages.lock().size()
    }
}

/// The memfd behind `fd`, `Err(None)` for another kind of file, `Err(Some(EBADF))` for none.
fn memfd_of(files: &Mutex<FdTable>, fd: u64) -> Result<Arc<OpenFile>, Option<Errno>> {
    let file = files.lock().file(fd).map_err(Some)?;
    if memfd(&file).is_some() { Ok(file) } else { Err(None) }
}

/// The memfd part of `file`, if it is one.
fn memfd(file: &OpenFile) -> Option<&Memfd> {
    if let FileKind::Memfd(m) = &file.kind { Some(m) } else { None }
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
    let mut len = 0usize;
    loop {
        let mut b = [0u8; 1];
        copy_in(&mut b, name.wrapping_add(len as u64)).map_err(|_| Errno::EFAULT)?;
        if b[0] == 0 {
            break;
        }
        len += 1;
        if len > NAME_MAX {
            return Err(Errno::EINVAL);
        }
    }
    if flags & MFD_HUGETLB != 0 {
        return Err(Errno::EINVAL);
    }
    let object =
        MemfdObject { pages: Mutex::new(MemObject::new()), ino: NEXT_INO.fetch_add(1, Ordering::Relaxed) };
    let object = crate::memory::fallible::arc(object).map_err(|_| Errno::ENOMEM)?;
    let kind = FileKind::Memfd(Memfd { object, pos: Mutex::new(0) });
    let open = OpenFile { kind, flags: AtomicU32::new(O_RDWR | O_LARGEFILE) };
    let file = crate::memory::fallible::arc(open).map_err(|_| Errno::ENOMEM)?;
    let cloexec = flags & MFD_CLOEXEC != 0;
    files.lock().install_lowest(0, FdEntry { file, cloexec }).map(|fd| fd as u64)
}

/// `ftruncate(fd, length)` of a memfd, in Linux's order (`do_sys_ftruncate`): `EINVAL` a
/// negative length; `EBADF` no descriptor; `EINVAL` not a regular file opened for writing (the
/// console, a pipe). When the object shrank, returns it and its first page past the new end:
/// the caller unmaps those pages in every address space that maps it (`mm::user`'s
/// `truncate_object`), which this layer cannot reach.
///
/// # Errors
/// As above.
pub fn truncate(files: &Mutex<FdTable>, fd: u64, length: u64) -> Result<Option<(ObjectRef, u64)>, Errno> {
    if length as i64 > MAX_SIZE as i64 || (length as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let file = memfd_of(files, fd).map_err(|e| e.unwrap_or(Errno::EINVAL))?;
    let m = memfd(&file).ok_or(Errno::EINVAL)?;
    let gone = m.object.pages.lock().set_size(length, &mut frames::UserFrames)?;
    Ok(gone.map(|first| (m.handle(), first)))
}

/// The `struct stat` of a memfd, if `file` is one.
pub fn stat(file: &OpenFile) -> Option<Stat> {
    let FileKind::Memfd(m) = &file.kind else { return None };
    let (size, pages) = {
        let o = m.object.pages.lock();
        (o.size(), o.pages_held() as u64)
    };
    let now = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
    Some(Stat {
        dev: 1,
        ino: m.object.ino,
        mode: S_IFREG | 0o777,
        nlink: 0,
        size: size as i64,
        blksize: PAGE_SIZE as i32,
        blocks: (pages * (PAGE_SIZE / 512)) as i64,
        times: [now; 3],
        ..Stat::default()
    })
}

/// `mmap` of descriptor `fd` (not `MAP_ANONYMOUS`): the memfd's object, or `EBADF` for no
/// descriptor and `ENODEV` for a file that cannot be mapped (the console, a pipe), after the
/// offset check arm64's `sys_mmap` makes first; mapped into `space`.
///
/// # Errors
/// As above, and what `mm::user`'s `mmap_object` answers.
#[allow(clippy::too_many_arguments, reason = "mmap's arguments, decoded, and where they apply")]
pub fn mmap(
    files: &Mutex<FdTable>,
    space: &Vmspace,
    addr: u64,
    len: u64,
    prot: u64,
    flags: u64,
    fd: u64,
    offset: u64,
) -> Result<u64, Errno> {
    if offset & (PAGE_SIZE - 1) != 0 {
        return Err(Errno::EINVAL);
    }
    let file = memfd_of(files, fd).map_err(|e| e.unwrap_or(Errno::ENODEV))?;
    let handle = memfd(&file).map(Memfd::handle).ok_or(Errno::ENODEV)?;
    space.lock().mmap_object(addr, len, prot, flags, handle, offset)
}

/// Runs `f` on the frame of page `index` (allocated if new): `None` past the end or out of
/// memory.
fn with_page<R>(m: &Memfd, index: u64, write: bool, f: impl FnOnce(PhysAddr) -> R) -> Option<R> {
    let mut o = m.object.pages.lock();
    // Past the end or out of memory: the caller stops there.
    let pa = o.page(index, false, &mut frames::UserFrames).ok()?;
    if write {
        o.written(index);
    }
    Some(f(pa))
}

/// `read(fd, buf, count)` on a memfd: from the position, up to the end of the object.
///
/// # Errors
/// `EBADF` (not a memfd), `EFAULT` when nothing could be copied.
pub fn read(file: &OpenFile, buffers: &[(u64, u64)]) -> Result<u64, Errno> {
    let m = memfd(file).ok_or(Errno::EBADF)?;
    let mut pos = m.pos.lock();
    let (n, result) = read_at(m, buffers, *pos);
    *pos += n;
    result
}

/// `write(fd, buf, count)` on a memfd: at the position, growing the object.
///
/// # Errors
/// `EBADF` (not a memfd); `EFAULT`, `EFBIG`, `ENOMEM` when nothing could be written.
pub fn write(file: &OpenFile, buffers: &[(u64, u64)]) -> Result<u64, Errno> {
    let m = memfd(file).ok_or(Errno::EBADF)?;
    let mut pos = m.pos.lock();
    let (n, result) = write_at(m, buffers, *pos);
    *pos += n;
    result
}

/// `pread64(fd, buf, count, offset)` and `pwrite64`: at `offset`, the position unchanged.
///
/// # Errors
/// `EBADF` no descriptor; `ESPIPE` a file that cannot seek (the console, a pipe); `EINVAL` a
/// negative offset; as [`read`] and [`write()`].
pub fn pread_pwrite(
    files: &Mutex<FdTable>,
    fd: u64,
    buf: u64,
    count: u64,
    offset: u64,
    write: bool,
) -> Result<u64, Errno> {
    let file = memfd_of(files, fd).map_err(|e| e.unwrap_or(Errno::ESPIPE))?;
    if (offset as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let buffers = [(buf, count.min(0x7fff_f000))];
    let m = memfd(&file).ok_or(Errno::ESPIPE)?;
    if write { write_at(m, &buffers, offset).1 } else { read_at(m, &buffers, offset).1 }
}

/// Reads into `buffers` from byte `from`: (bytes done, the call's result).
fn read_at(m: &Memfd, buffers: &[(u64, u64)], from: u64) -> (u64, Result<u64, Errno>) {
    let mut done = 0u64;
    let mut buf = [0u8; CHUNK];
    for &(base, len) in buffers {
        let mut at = 0u64;
        while at < len {
            let size = m.size();
            let offset = from + done;
            if offset >= size {
                return (done, Ok(done));
            }
            let in_page = (offset % PAGE_SIZE) as usize;
            let n = ((PAGE_SIZE as usize - in_page) as u64).min(len - at).min(size - offset) as usize;
            let got = with_page(m, offset / PAGE_SIZE, false, |pa| {
                let src = crate::memory::layout::phys_to_linear(pa.0) as *const u8;
                // SAFETY: a frame the object holds (its lock is held), reached through the
                // linear map; `in_page + n` stays inside the page.
                unsafe { core::ptr::copy_nonoverlapping(src.add(in_page), buf.as_mut_ptr(), n) };
            });
            if got.is_none() {
                return (done, Ok(done));
            }
            if copy_out(base + at, &buf[..n]).is_err() {
                return (done, if done == 0 { Err(Errno::EFAULT) } else { Ok(done) });
            }
            at += n as u64;
            done += n as u64;
        }
    }
    (done, Ok(done))
}

/// Writes `buffers` at byte `from`, growing the object: (bytes done, the call's result).
fn write_at(m: &Memfd, buffers: &[(u64, u64)], from: u64) -> (u64, Result<u64, Errno>) {
    let mut done = 0u64;
    let mut buf = [0u8; CHUNK];
    let partial = |done: u64, e: Errno| (done, if done == 0 { Err(e) } else { Ok(done) });
    for &(base, len) in buffers {
        let mut at = 0u64;
        while at < len {
            let offset = from + done;
            let in_page = (offset % PAGE_SIZE) as usize;
            let n = ((PAGE_SIZE as usize - in_page) as u64).min(len - at) as usize;
            let end = offset.saturating_add(n as u64);
            if end > MAX_SIZE {
                return partial(done, Errno::EFBIG);
            }
            if copy_in(&mut buf[..n], base + at).is_err() {
                return partial(done, Errno::EFAULT);
            }
            {
                let mut o = m.object.pages.lock();
                if end > o.size() && o.set_size(end, &mut frames::UserFrames).is_err() {
                    return partial(done, Errno::EFBIG);
                }
            }
            let wrote = with_page(m, offset / PAGE_SIZE, true, |pa| {
                frames::UserFrames.write(pa, in_page, &buf[..n]);
            });
            if wrote.is_none() {
                return partial(done, Errno::ENOMEM);
            }
            at += n as u64;
            done += n as u64;
        }
    }
    (done, Ok(done))
}

/// `lseek(fd, offset, whence)` on a memfd (shmem's `shmem_file_llseek`: a hole reads zero, so
/// the file is data up to its end, as for a file whose pages all exist).
///
/// # Errors
/// `ESPIPE` (not a memfd), `ENXIO` (`SEEK_DATA`/`SEEK_HOLE` at or past the end), `EINVAL`.
pub fn lseek(file: &OpenFile, offset: u64, whence: u64) -> Result<u64, Errno> {
    let m = memfd(file).ok_or(Errno::ESPIPE)?;
    let mut pos = m.pos.lock();
    let size = m.size() as i64;
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => *pos as i64,
        SEEK_END => size,
        SEEK_DATA | SEEK_HOLE => {
            let off = offset as i64;
            if off < 0 || off >= size {
                return Err(Errno::ENXIO);
            }
            let to = if whence == SEEK_DATA { off } else { size };
            *pos = to as u64;
            return Ok(to as u64);
        }
        _ => return Err(Errno::EINVAL),
    };
    match base.checked_add(offset as i64) {
        Some(new) if new >= 0 => {
            *pos = new as u64;
            Ok(new as u64)
        }
        _ => Err(Errno::EINVAL),
    }
}
