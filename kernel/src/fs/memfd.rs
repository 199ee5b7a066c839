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

use crate::memory::frames;
use crate::process::Process;
use crate::process::posix::{FdEntry, FileKind, O_RDWR, OpenFile};
use crate::syscall::errno::*;
use crate::syscall::{copy_in, copy_out};

/// `MFD_CLOEXEC`.
pub const MFD_CLOEXEC: u64 = 1;
/// `MFD_ALLOW_SEALING`.
pub const MFD_ALLOW_SEALING: u64 = 2;
/// `MFD_HUGETLB`.
pub const MFD_HUGETLB: u64 = 4;
/// The huge page size field (`MFD_HUGE_MASK << MFD_HUGE_SHIFT`), valid with `MFD_HUGETLB`.
const MFD_HUGE_FIELD: u64 = 0x3f << 26;
/// The longest name (`NAME_MAX` less the "memfd:" prefix).
const NAME_MAX: usize = 249;
/// `O_LARGEFILE`, always set on a memfd (arm64's value).
const O_LARGEFILE: u32 = 0o400_000;
/// `EFBIG`: a write past the largest size.
const EFBIG: i64 = 27;
/// `ENXIO`: `SEEK_DATA`/`SEEK_HOLE` at or past the end.
const ENXIO: i64 = 6;
/// `ENODEV`.
const ENODEV: i64 = 19;
/// `lseek`'s `whence` values.
const SEEK_SET: u64 = 0;
const SEEK_CUR: u64 = 1;
const SEEK_END: u64 = 2;
/// `SEEK_DATA` and `SEEK_HOLE` (shmem's `shmem_file_llseek`: a hole reads zero, so the file is
/// data up to its end here, as for a file whose pages all exist).
const SEEK_DATA: u64 = 3;
const SEEK_HOLE: u64 = 4;
/// Bytes copied per step of `read`/`write` (through a kernel buffer: the object's lock is never
/// held across a user copy, which may fault on a mapping of the same object).
const CHUNK: usize = 4096;

/// `S_IFREG`: a regular file.
const S_IFREG: u32 = 0o100_000;

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
fn memfd_of(p: &Process, fd: u64) -> Result<Arc<OpenFile>, Option<i64>> {
    let file = p.posix.files.lock().get(fd).map(|e| e.file.clone()).ok_or(Some(EBADF))?;
    if memfd(&file).is_some() { Ok(file) } else { Err(None) }
}

/// The memfd part of `file`, if it is one.
fn memfd(file: &OpenFile) -> Option<&Memfd> {
    if let FileKind::Memfd(m) = &file.kind { Some(m) } else { None }
}

/// `memfd_create(name, flags)`, in Linux's order: `EINVAL` unknown flags (the huge page size
/// only with `MFD_HUGETLB`); `EFAULT` an unreadable name; `EINVAL` a name over 249 bytes;
/// `EMFILE` no descriptor. `MFD_HUGETLB` passes the checks and then fails with `EINVAL`:
/// there is no hugetlbfs here.
pub fn memfd_create(p: &Process, name: u64, flags: u64) -> i64 {
    const ALL: u64 = MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB;
    let known = if flags & MFD_HUGETLB != 0 { ALL | MFD_HUGE_FIELD } else { ALL };
    if flags & !known != 0 || flags >> 32 != 0 {
        return -EINVAL;
    }
    // strnlen_user(name, NAME_MAX + 1).
    let mut len = 0usize;
    loop {
        let mut b = [0u8; 1];
        if copy_in(p, &mut b, name.wrapping_add(len as u64)).is_err() {
            return -EFAULT;
        }
        if b[0] == 0 {
            break;
        }
        len += 1;
        if len > NAME_MAX {
            return -EINVAL;
        }
    }
    if flags & MFD_HUGETLB != 0 {
        return -EINVAL;
    }
    let object =
        MemfdObject { pages: Mutex::new(MemObject::new()), ino: NEXT_INO.fetch_add(1, Ordering::Relaxed) };
    let Ok(object) = crate::memory::fallible::arc(object) else { return -ENOMEM };
    let kind = FileKind::Memfd(Memfd { object, pos: Mutex::new(0) });
    let open = OpenFile { kind, flags: AtomicU32::new(O_RDWR | O_LARGEFILE) };
    let Ok(file) = crate::memory::fallible::arc(open) else { return -ENOMEM };
    let cloexec = flags & MFD_CLOEXEC != 0;
    match p.posix.files.lock().install_lowest(0, FdEntry { file, cloexec }) {
        Ok(fd) => fd as i64,
        Err(e) => -e,
    }
}

/// `ftruncate(fd, length)`, in Linux's order (`do_sys_ftruncate`): `EINVAL` a negative length;
/// `EBADF` no descriptor; `EINVAL` not a regular file opened for writing (the console, a pipe).
/// Shrinking unmaps the pages past the end in every process that maps the object.
pub fn ftruncate(p: &Process, fd: u64, length: u64) -> i64 {
    if length as i64 > MAX_SIZE as i64 || (length as i64) < 0 {
        return -EINVAL;
    }
    let file = match memfd_of(p, fd) {
        Ok(f) => f,
        Err(Some(e)) => return -e,
        Err(None) => return -EINVAL,
    };
    let Some(m) = memfd(&file) else { return -EINVAL };
    let gone = m.object.pages.lock().set_size(length, &mut frames::UserFrames);
    match gone {
        Err(e) => -i64::from(e.code()),
        Ok(None) => 0,
        Ok(Some(first)) => {
            let handle = m.handle();
            crate::process::family::for_each_process(|q| {
                // A space shared by a vfork parent and child is reached twice; the second
                // time finds nothing left past the end.
                if let Some(space) = q.space() {
                    space.lock().truncate_object(&handle, first);
                }
            });
            0
        }
    }
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
/// offset check arm64's `sys_mmap` makes first.
pub fn mmap(p: &Process, addr: u64, len: u64, prot: u64, flags: u64, fd: u64, offset: u64) -> i64 {
    if offset & (PAGE_SIZE - 1) != 0 {
        return -EINVAL;
    }
    let file = match memfd_of(p, fd) {
        Ok(f) => f,
        Err(Some(e)) => return -e,
        Err(None) => return -ENODEV,
    };
    let Some(handle) = memfd(&file).map(Memfd::handle) else { return -ENODEV };
    let Some(space) = p.space() else { return -ENOMEM };
    space
        .lock()
        .mmap_object(addr, len, prot, flags, handle, offset)
        .map_or_else(|e| -i64::from(e.code()), |a| a as i64)
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
pub fn read(file: &OpenFile, p: &Process, buffers: &[(u64, u64)]) -> i64 {
    let Some(m) = memfd(file) else { return -EBADF };
    let mut pos = m.pos.lock();
    let (n, result) = read_at(m, p, buffers, *pos);
    *pos += n;
    result
}

/// `write(fd, buf, count)` on a memfd: at the position, growing the object.
pub fn write(file: &OpenFile, p: &Process, buffers: &[(u64, u64)]) -> i64 {
    let Some(m) = memfd(file) else { return -EBADF };
    let mut pos = m.pos.lock();
    let (n, result) = write_at(m, p, buffers, *pos);
    *pos += n;
    result
}

/// `pread64(fd, buf, count, offset)` and `pwrite64`: at `offset`, the position unchanged.
/// `EBADF` no descriptor; `ESPIPE` a file that cannot seek (the console, a pipe); `EINVAL` a
/// negative offset.
pub fn pread_pwrite(p: &Process, fd: u64, buf: u64, count: u64, offset: u64, write: bool) -> i64 {
    let file = match memfd_of(p, fd) {
        Ok(f) => f,
        Err(Some(e)) => return -e,
        Err(None) => return -ESPIPE,
    };
    if (offset as i64) < 0 {
        return -EINVAL;
    }
    let buffers = [(buf, count.min(0x7fff_f000))];
    let Some(m) = memfd(&file) else { return -ESPIPE };
    if write { write_at(m, p, &buffers, offset).1 } else { read_at(m, p, &buffers, offset).1 }
}

/// Reads into `buffers` from byte `from`: (bytes done, the call's result).
fn read_at(m: &Memfd, p: &Process, buffers: &[(u64, u64)], from: u64) -> (u64, i64) {
    let mut done = 0u64;
    let mut buf = [0u8; CHUNK];
    for &(base, len) in buffers {
        let mut at = 0u64;
        while at < len {
            let size = m.size();
            let offset = from + done;
            if offset >= size {
                return (done, done as i64);
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
                return (done, done as i64);
            }
            if copy_out(p, base + at, &buf[..n]).is_err() {
                return (done, if done == 0 { -EFAULT } else { done as i64 });
            }
            at += n as u64;
            done += n as u64;
        }
    }
    (done, done as i64)
}

/// Writes `buffers` at byte `from`, growing the object: (bytes done, the call's result).
fn write_at(m: &Memfd, p: &Process, buffers: &[(u64, u64)], from: u64) -> (u64, i64) {
    let mut done = 0u64;
    let mut buf = [0u8; CHUNK];
    let partial = |done: u64, e: i64| (done, if done == 0 { -e } else { done as i64 });
    for &(base, len) in buffers {
        let mut at = 0u64;
        while at < len {
            let offset = from + done;
            let in_page = (offset % PAGE_SIZE) as usize;
            let n = ((PAGE_SIZE as usize - in_page) as u64).min(len - at) as usize;
            let end = offset.saturating_add(n as u64);
            if end > MAX_SIZE {
                return partial(done, EFBIG);
            }
            if copy_in(p, &mut buf[..n], base + at).is_err() {
                return partial(done, EFAULT);
            }
            {
                let mut o = m.object.pages.lock();
                if end > o.size() && o.set_size(end, &mut frames::UserFrames).is_err() {
                    return partial(done, EFBIG);
                }
            }
            let wrote = with_page(m, offset / PAGE_SIZE, true, |pa| {
                frames::UserFrames.write(pa, in_page, &buf[..n]);
            });
            if wrote.is_none() {
                return partial(done, ENOMEM);
            }
            at += n as u64;
            done += n as u64;
        }
    }
    (done, done as i64)
}

/// `lseek(fd, offset, whence)` on a memfd.
pub fn lseek(file: &OpenFile, offset: u64, whence: u64) -> i64 {
    let Some(m) = memfd(file) else { return -ESPIPE };
    let mut pos = m.pos.lock();
    let size = m.size() as i64;
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => *pos as i64,
        SEEK_END => size,
        SEEK_DATA | SEEK_HOLE => {
            let off = offset as i64;
            if off < 0 || off >= size {
                return -ENXIO;
            }
            let to = if whence == SEEK_DATA { off } else { size };
            *pos = to as u64;
            return to;
        }
        _ => return -EINVAL,
    };
    match base.checked_add(offset as i64) {
        Some(new) if new >= 0 => {
            *pos = new as u64;
            new
        }
        _ => -EINVAL,
    }
}
