//! The page cache of one file: the frames that hold a RAM file's bytes (a regular file of the
//! root or `/tmp`, a memfd), found by page offset. `read`, `write` and every mapping of the file
//! use the same frames, so a write is seen by every mapping and a mapping's store by every
//! `read`, as on Linux. The object itself (size, pages, truncation, which frames a mapping sees)
//! is `mm::user::object`'s, host-tested; this is the kernel's side: its lock, its frames, the
//! copies between frames and buffers, and the file systems' space budget.
//!
//! **Space.** The RAM file systems together may hold at most half of the machine's frames (as
//! tmpfs's default `size=50%`): a write that needs a page past that fails with `ENOSPC` (after
//! the bytes that fitted). Memfds are not counted, as Linux's internal shmem mount is not.
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use linux_abi::Errno;
use mm::addr::{PAGE_SIZE, PhysAddr};
use mm::user::UserFrames as _;
use mm::user::object::{MAX_SIZE, MemObject, ObjectRef, SharedObject};
use spin::Mutex;
use vfs::node::{Contents, Inode};

use crate::memory::frames;

/// Pages held by the RAM file systems' files (the budget of the module documentation).
static FS_PAGES: AtomicU64 = AtomicU64::new(0);

/// The most pages the RAM file systems may hold: half the machine's frames.
fn fs_page_limit() -> u64 {
    frames::usage().1 as u64 / 2
}

/// The RAM file systems' space in pages, as `statfs` reports it (tmpfs's `f_blocks` and
/// `f_bfree`): the budget, and what of it no file holds.
pub fn space() -> (u64, u64) {
    let limit = fs_page_limit();
    (limit, limit.saturating_sub(FS_PAGES.load(Ordering::Relaxed)))
}

/// What `/proc/PID/maps` names a mapping of a page cache by: the file's device and inode, its
/// path, and (for a file of a file system) its node, held weakly (the node holds the cache), to
/// tell whether it lost its last name (` (deleted)`).
pub struct MappedName {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// The path it was opened by (a memfd's `/memfd:NAME (deleted)`).
    pub path: Vec<u8>,
    /// Its node, if it has one.
    pub node: Option<Weak<dyn Inode>>,
}

/// The page cache of one file (module documentation).
pub struct PageCache {
    pages: Mutex<MemObject>,
    /// Counted against the file systems' budget (a RAM file), or not (a memfd).
    budgeted: bool,
    /// The name its mappings show, once it was mapped (or asked for one) through a file.
    name: Mutex<Option<MappedName>>,
    /// Linux's `i_writecount`: above 0, the open files that may write it; below 0, the running
    /// programs whose text it is ([`WriteAccess`], [`DenyWrite`]).
    write_count: AtomicI64,
}

/// The right to write a file, held by a file opened for writing (Linux's `get_write_access`):
/// while one exists, the file cannot be run (`ETXTBSY`).
pub struct WriteAccess(Arc<PageCache>);

impl Drop for WriteAccess {
    fn drop(&mut self) {
        self.0.write_count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running program's hold on its file (Linux's `deny_write_access`, kept by the address space
/// for its `exe_file`): while one exists, the file cannot be opened for writing or truncated
/// (`ETXTBSY`), since its page cache is the program's text.
pub struct DenyWrite(Arc<PageCache>);

impl DenyWrite {
    /// A second hold on the same file (a fork's new address space runs the same program).
    /// Cannot fail: while this one exists, nothing writes the file.
    pub fn another(&self) -> DenyWrite {
        self.0.write_count.fetch_sub(1, Ordering::AcqRel);
        DenyWrite(self.0.clone())
    }
}

impl Drop for DenyWrite {
    fn drop(&mut self) {
        self.0.write_count.fetch_add(1, Ordering::AcqRel);
    }
}

impl core::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PageCache").field("budgeted", &self.budgeted).finish_non_exhaustive()
    }
}

/// The page caches that have a name, to find one from the object a mapping holds (what
/// `/proc/PID/maps` has): weak, so a cache goes when its last holder does.
static NAMED: Mutex<Vec<Weak<PageCache>>> = Mutex::new(Vec::new());

/// Gives `cache` the name its mappings show (the first name stays: a file's device and inode
/// never change, and Linux's path is that of the file as opened). A name that cannot be
/// recorded for want of memory is left out: the mapping shows no name.
pub fn name(cache: &Arc<PageCache>, make: impl FnOnce() -> Option<MappedName>) {
    let mut slot = cache.name.lock();
    if slot.is_some() {
        return;
    }
    let mut named = NAMED.lock();
    named.retain(|w| w.strong_count() > 0);
    if named.try_reserve(1).is_err() {
        return;
    }
    let Some(name) = make() else { return };
    named.push(Arc::downgrade(cache));
    *slot = Some(name);
}

/// The name of the page cache behind the object at `object` (the address a mapping's
/// `ObjectRef` points at), for `/proc/PID/maps`: its device, inode and path, ` (deleted)` added
/// once its file has no name left.
pub fn mapped_name(object: *const u8) -> Option<(u64, u64, Vec<u8>)> {
    let cache = NAMED
        .lock()
        .iter()
        .filter_map(Weak::upgrade)
        .find(|c| core::ptr::eq(Arc::as_ptr(c).cast::<u8>(), object))?;
    let slot = cache.name.lock();
    let name = slot.as_ref()?;
    let mut path = super::copy_bytes(&name.path).ok()?;
    let gone = name.node.as_ref().and_then(Weak::upgrade).is_some_and(|n| n.metadata().nlink == 0);
    if gone {
        super::file::push_fmt(&mut path, format_args!(" (deleted)")).ok()?;
    }
    Some((name.dev, name.ino, path))
}

impl SharedObject for PageCache {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.pages.lock());
    }
}

impl Drop for PageCache {
    fn drop(&mut self) {
        // The last name, descriptor and mapping are gone: the object's references go.
        let pages = self.pages.get_mut();
        if self.budgeted {
            FS_PAGES.fetch_sub(pages.pages_held() as u64, Ordering::Relaxed);
        }
        pages.release(&mut frames::UserFrames);
    }
}

impl PageCache {
    /// An empty cache; `budgeted`: count its pages against the file systems' space.
    pub fn new(budgeted: bool) -> Self {
        Self {
            pages: Mutex::new(MemObject::new()),
            budgeted,
            name: Mutex::new(None),
            write_count: AtomicI64::new(0),
        }
    }

    /// The right to write the file (see [`WriteAccess`]).
    ///
    /// # Errors
    /// `ETXTBSY` while a program runs from it.
    pub fn get_write_access(self: &Arc<Self>) -> Result<WriteAccess, Errno> {
        self.write_count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n >= 0).then_some(n + 1))
            .map_err(|_| Errno::ETXTBSY)?;
        Ok(WriteAccess(self.clone()))
    }

    /// Holds the file as a running program's text ([`DenyWrite`]).
    ///
    /// # Errors
    /// `ETXTBSY` while a file is open for writing it.
    pub fn deny_write_access(self: &Arc<Self>) -> Result<DenyWrite, Errno> {
        self.write_count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n <= 0).then_some(n - 1))
            .map_err(|_| Errno::ETXTBSY)?;
        Ok(DenyWrite(self.clone()))
    }

    /// The object, for mapping the file (`mm::user::UserMemory::mmap_object`).
    pub fn object(self: &Arc<Self>) -> ObjectRef {
        self.clone()
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.pages.lock().size()
    }

    /// Pages held.
    pub fn pages_held(&self) -> u64 {
        self.pages.lock().pages_held() as u64
    }

    /// Sets the size: shrinking drops the pages past the end and zeroes the tail of the last one.
    /// Returns the first page index gone, when pages went: the caller unmaps them from every
    /// mapping (`truncate_object`).
    ///
    /// # Errors
    /// `EFBIG`, `EINVAL`.
    pub fn set_size(&self, size: u64) -> Result<Option<u64>, Errno> {
        let mut o = self.pages.lock();
        let before = o.pages_held() as u64;
        let gone = o.set_size(size, &mut frames::UserFrames)?;
        self.account(before, o.pages_held() as u64);
        Ok(gone)
    }

    /// Moves the budget by the change from `before` to `after` pages held.
    fn account(&self, before: u64, after: u64) {
        if !self.budgeted {
            return;
        }
        if after > before {
            FS_PAGES.fetch_add(after - before, Ordering::Relaxed);
        } else {
            FS_PAGES.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// Runs `f` on the frame of page `index` (allocated if new, within the budget): `None` past
    /// the end, or when no frame can be had (the caller's `ENOSPC`/`ENOMEM`).
    fn with_page<R>(
        &self,
        index: u64,
        write: bool,
        f: impl FnOnce(PhysAddr) -> R,
    ) -> Result<Option<R>, Errno> {
        let mut o = self.pages.lock();
        let new = o.frame_of(index).is_none();
        if new && write && self.budgeted && FS_PAGES.load(Ordering::Relaxed) >= fs_page_limit() {
            return Err(Errno::ENOSPC);
        }
        let before = o.pages_held() as u64;
        let Ok(pa) = o.page(index, false, &mut frames::UserFrames) else {
            return Ok(None);
        };
        self.account(before, o.pages_held() as u64);
        if write {
            o.written(index);
        }
        Ok(Some(f(pa)))
    }

    /// `lseek(SEEK_DATA)` (`data`) or `lseek(SEEK_HOLE)` from `offset`, as tmpfs answers
    /// (Linux's `mapping_seek_hole_data`): a page the file holds is data, one it does not is a
    /// hole, and the end of the file is a hole.
    ///
    /// # Errors
    /// `ENXIO` at or past the end (or a negative offset), and for `SEEK_DATA` with no data
    /// after `offset`.
    pub fn seek_data_hole(&self, offset: u64, data: bool) -> Result<u64, Errno> {
        let o = self.pages.lock();
        let size = o.size();
        if (offset as i64) < 0 || offset >= size {
            return Err(Errno::ENXIO);
        }
        let first = offset / PAGE_SIZE;
        if data {
            return match o.next_page(first) {
                Some(i) if i * PAGE_SIZE < size => Ok(offset.max(i * PAGE_SIZE)),
                _ => Err(Errno::ENXIO),
            };
        }
        // The first page not held: at most as many steps as pages held.
        let mut i = first;
        while o.next_page(i) == Some(i) {
            i += 1;
        }
        Ok(offset.max(i * PAGE_SIZE).min(size))
    }

    /// `fallocate` of `[offset, offset + len)`: every page of the range that is inside the file
    /// is allocated (within the file systems' budget), so it counts in `st_blocks` and is data
    /// to `SEEK_DATA` (shmem's `shmem_fallocate`; pages past the end are not kept here).
    ///
    /// # Errors
    /// `ENOSPC` past the budget, `ENOMEM`; the pages made before stay.
    pub fn allocate(&self, offset: u64, len: u64) -> Result<(), Errno> {
        let end = offset.saturating_add(len).min(self.size());
        let mut index = offset / PAGE_SIZE;
        while index * PAGE_SIZE < end {
            self.with_page(index, true, |_| ())?.ok_or(Errno::ENOMEM)?;
            index += 1;
        }
        Ok(())
    }

    /// `fallocate(FALLOC_FL_PUNCH_HOLE)` of `[offset, offset + len)`: the range reads zero. The
    /// pages stay the file's (and every mapping's): freeing them would need the object to unmap
    /// a range from its mappings, which it does only past a new end (`set_size`).
    pub fn punch(&self, offset: u64, len: u64) {
        const ZEROS: [u8; 512] = [0; 512];
        let end = offset.saturating_add(len).min(self.size());
        let mut at = offset;
        while at < end {
            let index = at / PAGE_SIZE;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min((end - at) as usize).min(ZEROS.len());
            let mut o = self.pages.lock();
            if let Some(pa) = o.frame_of(index) {
                frames::UserFrames.write(pa, in_page, &ZEROS[..n]);
                o.written(index);
            }
            drop(o);
            at += n as u64;
        }
    }

    /// Copies from byte `offset` into `buf` (kernel memory); 0 at or past the end.
    ///
    /// # Errors
    /// `ENOMEM` when a hole's page cannot be had.
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let size = self.size();
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            if at >= size {
                break;
            }
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(buf.len() - done).min((size - at) as usize);
            let dst = &mut buf[done..done + n];
            let got = self.with_page(at / PAGE_SIZE, false, |pa| {
                let src = crate::memory::layout::phys_to_linear(pa.0) as *const u8;
                // SAFETY: a frame the object holds (its lock is held), reached through the linear
                // map; `in_page + n` stays inside the page.
                unsafe { core::ptr::copy_nonoverlapping(src.add(in_page), dst.as_mut_ptr(), n) };
            })?;
            if got.is_none() {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    /// Writes `buf` (kernel memory) at byte `offset`, growing the file.
    ///
    /// # Errors
    /// `EFBIG` past the largest size, `ENOSPC`, `ENOMEM`, when nothing could be written.
    pub fn write_from(&self, offset: u64, buf: &[u8]) -> Result<usize, Errno> {
        let mut done = 0usize;
        let partial = |done: usize, e: Errno| if done == 0 { Err(e) } else { Ok(done) };
        while done < buf.len() {
            let at = offset + done as u64;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(buf.len() - done);
            let end = at.saturating_add(n as u64);
            if end > MAX_SIZE {
                return partial(done, Errno::EFBIG);
            }
            // The size grows to take the page, and goes back if the page cannot be had: a
            // failed write leaves the file as it was (Linux grows `i_size` only once written).
            let grew_from = {
                let mut o = self.pages.lock();
                let old = o.size();
                if end > old {
                    if o.set_size(end, &mut frames::UserFrames).is_err() {
                        return partial(done, Errno::EFBIG);
                    }
                    Some(old)
                } else {
                    None
                }
            };
            let src = &buf[done..done + n];
            let wrote = self
                .with_page(at / PAGE_SIZE, true, |pa| frames::UserFrames.write(pa, in_page, src))
                .and_then(|w| w.ok_or(Errno::ENOMEM));
            if let Err(e) = wrote {
                if let Some(old) = grew_from {
                    let mut o = self.pages.lock();
                    if o.size() == end {
                        let before = o.pages_held() as u64;
                        let _ = o.set_size(old, &mut frames::UserFrames);
                        self.account(before, o.pages_held() as u64);
                    }
                }
                return partial(done, e);
            }
            done += n;
        }
        Ok(done)
    }
}

impl Contents for PageCache {
    fn size(&self) -> u64 {
        PageCache::size(self)
    }

    fn blocks(&self) -> u64 {
        self.pages_held() * (PAGE_SIZE / 512)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        self.read_into(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> Result<usize, Errno> {
        self.write_from(offset, buf)
    }

    fn set_size(&self, size: u64) -> Result<(), Errno> {
        // A truncation of a mapped file must also unmap the pages past the end from every
        // address space: the caller (`syscall::files`) does it with the object it gets back from
        // `truncate_everywhere`; here only the cache changes.
        PageCache::set_size(self, size).map(|_| ())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The contents of a new regular file of a RAM file system (`vfs::ramfs::Config::new_contents`).
///
/// # Errors
/// `ENOMEM`.
pub fn new_file_contents() -> Result<Arc<dyn Contents>, Errno> {
    let cache = crate::memory::fallible::arc(PageCache::new(true)).map_err(|_| Errno::ENOMEM)?;
    Ok(cache)
}

/// The page cache of regular file `node`, if it has one (a RAM file; not a generated text).
pub fn of_node(node: &Arc<dyn Inode>) -> Option<Arc<PageCache>> {
    of(&node.contents()?)
}

impl PageCache {
    /// Whether the cache holds exactly `bytes` (the first program's bytes, read from its file
    /// before any process exists, are that file's: then it is mapped from here).
    pub fn holds(&self, bytes: &[u8]) -> bool {
        if self.size() != bytes.len() as u64 {
            return false;
        }
        let mut chunk = [0u8; 512];
        bytes.chunks(chunk.len()).enumerate().all(|(i, want)| {
            let got = &mut chunk[..want.len()];
            self.read_into((i * 512) as u64, got) == Ok(want.len()) && got == want
        })
    }
}

/// The page cache behind `contents`, if it is one of ours.
pub fn of(contents: &Arc<dyn Contents>) -> Option<Arc<PageCache>> {
    let any: Arc<dyn Any + Send + Sync> = contents.clone();
    any.downcast::<PageCache>().ok()
}
