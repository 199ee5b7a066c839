//! A shared memory object — the page cache of one `memfd` (Linux's shmem inode) — and the
//! mappings of it in one process's memory.
//!
//! Why an object and not "shared anonymous areas": every mapping of the same offset of a memfd
//! must see the same frame, in this process, in a forked child, after `close`, and whether it
//! was mapped before or after the page was first touched. So the frames belong to the object,
//! found by page offset, and a mapping holds one more reference (the same counts `fork` uses,
//! [`UserFrames::share`]) to each frame it maps: the frame goes back when the object and every
//! mapping have let go of it, always after the flush of the last mapping.
//!
//! The object:
//! - has a size (`ftruncate`): a page at or past the end cannot be had ([`Fault::Bus`]: Linux's
//!   `SIGBUS` for an access beyond the end of a shmem mapping);
//! - allocates a page on its first use (zeroed, as a hole of a shmem file reads zero);
//! - on shrinking drops the pages past the new end and zeroes the tail of a page cut in two (as
//!   Linux's `shmem_setattr` → `truncate_pagecache`); the caller then unmaps the same pages in
//!   every mapping ([`UserMemory::truncate_object`]), as `unmap_mapping_range` does;
//! - remembers per page whether its contents were made visible to instruction fetches, so the
//!   first executable mapping of a page the kernel zero-filled cleans and invalidates the caches
//!   once (Linux's `PG_dcache_clean` in `__sync_icache_dcache`), and a page written by the kernel
//!   (a truncation's zeroing) is cleaned again. What user space writes through a writable view
//!   it publishes itself (DC CVAU, IC IVAU), as on Linux.
//!
//! The same mappings serve a program's own segments ([`UserMemory::map_file_segment`]: the
//! loader maps each `PT_LOAD` segment privately from its file's page cache, so every process
//! running a program shares its text frames), and a read or execute fault on any object mapping
//! also maps the neighbouring pages the object already holds (fault-around,
//! [`fault_around_range`]), so a program's first run through its cached text takes one fault
//! per 64 KiB rather than one per page.
//!
//! A process's memory keeps, beside its areas, the list of object-backed ranges ([`Backing`]):
//! virtual range, object, offset. It is kept by virtual address, independent of how the area
//! map splits or merges areas, and follows `munmap`, `MAP_FIXED`, `mremap` and `fork`.

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::{Access, Fault, UserFrames, UserMemory, user_attrs};
use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::paging::{Constraints, Translation};
use crate::space::FlushTargets;
use crate::tlb::TlbHardware;
use crate::vm::{Errno, Prot};

/// The largest size of an object (Linux's `MAX_LFS_FILESIZE` on 64-bit).
pub const MAX_SIZE: u64 = i64::MAX as u64;

/// One page of the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Page {
    /// Page offset in the object.
    index: u64,
    pa: PhysAddr,
    /// Its contents were cleaned to the point of unification and the I-cache invalidated since
    /// the kernel last wrote it.
    icache_clean: bool,
}

/// The page cache of one shared memory object (module documentation).
#[derive(Debug, Default)]
pub struct MemObject {
    size: u64,
    /// Sorted by `index`.
    pages: Vec<Page>,
}

impl MemObject {
    /// An empty object of size 0.
    pub const fn new() -> Self {
        Self { size: 0, pages: Vec::new() }
    }

    /// The size in bytes.
    pub const fn size(&self) -> u64 {
        self.size
    }

    /// Pages allocated (the frames the object holds a reference to).
    pub fn pages_held(&self) -> usize {
        self.pages.len()
    }

    /// The frame of page `index`, if allocated.
    pub fn frame_of(&self, index: u64) -> Option<PhysAddr> {
        self.find(index).ok().map(|i| self.pages[i].pa)
    }

    /// The first allocated page at or after page `index` (Linux's `SEEK_DATA` over the page
    /// cache: a page the object holds is data, one it does not is a hole).
    pub fn next_page(&self, index: u64) -> Option<u64> {
        let at = self.find(index).unwrap_or_else(|i| i);
        self.pages.get(at).map(|p| p.index)
    }

    fn find(&self, index: u64) -> Result<usize, usize> {
        self.pages.binary_search_by_key(&index, |p| p.index)
    }

    /// The frame of page `index`, allocated (zeroed) on first use; with `exec` it is made
    /// visible to instruction fetches first if the kernel wrote it since it last was. The
    /// object keeps its reference: the caller takes its own ([`UserFrames::share`]).
    ///
    /// # Errors
    ///
    /// [`Fault::Bus`] for a page at or past the end; [`Fault::OutOfMemory`] when no frame (or
    /// no room in the index) can be had.
    pub fn page<D: UserFrames>(&mut self, index: u64, exec: bool, frames: &mut D) -> Result<PhysAddr, Fault> {
        if index >= self.size.div_ceil(PAGE_SIZE) {
            return Err(Fault::Bus);
        }
        let at = match self.find(index) {
            Ok(i) => i,
            Err(i) => {
                self.pages.try_reserve(1).map_err(|_| Fault::OutOfMemory)?;
                let pa = frames.alloc_zeroed().ok_or(Fault::OutOfMemory)?;
                self.pages.insert(i, Page { index, pa, icache_clean: false });
                i
            }
        };
        let page = &mut self.pages[at];
        if exec && !page.icache_clean {
            frames.sync_icache(page.pa);
            page.icache_clean = true;
        }
        Ok(page.pa)
    }

    /// The kernel wrote page `index` (a `write` to the memfd): its next executable mapping
    /// cleans and invalidates it again (Linux's `flush_dcache_page` clearing `PG_dcache_clean`).
    pub fn written(&mut self, index: u64) {
        if let Ok(i) = self.find(index) {
            self.pages[i].icache_clean = false;
        }
    }

    /// `ftruncate(size)`: grows (the new pages read zero) or shrinks, dropping the object's
    /// reference to every page past the new end and zeroing the rest of a page the end now cuts.
    /// Returns the first page offset no longer backed when it shrank, for the caller to unmap
    /// from every mapping ([`UserMemory::truncate_object`]).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a size past [`MAX_SIZE`] (a negative `off_t`); `EFBIG` is the caller's
    /// (`RLIMIT_FSIZE`).
    pub fn set_size<D: UserFrames>(&mut self, size: u64, frames: &mut D) -> Result<Option<u64>, Errno> {
        if size > MAX_SIZE {
            return Err(Errno::EINVAL);
        }
        let old = self.size;
        self.size = size;
        if size >= old {
            return Ok(None);
        }
        let keep = size.div_ceil(PAGE_SIZE);
        let cut = self.find(keep).unwrap_or_else(|i| i);
        for p in self.pages.drain(cut..) {
            frames.free(p.pa);
        }
        let tail = (size % PAGE_SIZE) as usize;
        if tail != 0
            && let Ok(i) = self.find(size / PAGE_SIZE)
        {
            let page = &mut self.pages[i];
            const ZEROS: [u8; 256] = [0; 256];
            let mut at = tail;
            while at < PAGE_SIZE as usize {
                let n = ZEROS.len().min(PAGE_SIZE as usize - at);
                frames.write(page.pa, at, &ZEROS[..n]);
                at += n;
            }
            page.icache_clean = false;
        }
        Ok(Some(keep))
    }

    /// Drops the object's reference to every page (the object is going away: its last
    /// descriptor and its last mapping are gone).
    pub fn release<D: UserFrames>(&mut self, frames: &mut D) {
        for p in self.pages.drain(..) {
            frames.free(p.pa);
        }
        self.size = 0;
    }
}

/// A [`MemObject`] behind whatever lock the kernel (or a test) has: the user-memory layer takes
/// it inside the fault path, so an implementation must never take a process's memory lock
/// inside [`with`](Self::with).
pub trait SharedObject: Send + Sync {
    /// Runs `f` on the object, locked.
    fn with(&self, f: &mut dyn FnMut(&mut MemObject));

    /// A process's memory began (`true`) or stopped (`false`) mapping one range of this object:
    /// one call per range the memory keeps ([`Backings`]: a new mapping, each range a fork
    /// copies, each piece left when part of a range is unmapped, and the end of each range at
    /// `munmap`, `MAP_FIXED` over it, `exec` and exit), as Linux's `vm_ops->open` and `close`
    /// are called per area. System V shared memory counts its attachments so (`shm_nattch`).
    /// Called with that memory locked; a new range is counted before the one it replaces goes,
    /// so the count never passes through zero on the way from one to another.
    fn mapped(&self, attached: bool) {
        let _ = attached;
    }
}

/// A handle to a shared object, held by each descriptor and each mapping of it.
pub type ObjectRef = Arc<dyn SharedObject>;

/// Whether `a` and `b` are the same object.
pub fn same_object(a: &ObjectRef, b: &ObjectRef) -> bool {
    core::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Linux's `fault_around_bytes`: the aligned block around a read fault on a file mapping whose
/// cached pages the fault maps too.
pub const FAULT_AROUND_BYTES: u64 = 64 << 10;

/// The most pages one fault-around covers (16 with 4 KiB pages, 4 with 16 KiB, 1 with 64 KiB).
const AROUND_PAGES: usize =
    if FAULT_AROUND_BYTES > PAGE_SIZE { (FAULT_AROUND_BYTES / PAGE_SIZE) as usize } else { 1 };
const _: () = assert!(AROUND_PAGES <= 32, "fault_around's page mask is a u32");

/// The pages fault-around considers for a fault at `page`: the
/// [`FAULT_AROUND_BYTES`]-aligned block holding it (the page alone when pages are that large),
/// cut to the faulting area `vma`, to the object-backed range `backed` that holds the page, and
/// to the `table_span`-aligned range one last-level table maps (Linux's `do_fault_around` stays
/// within one PTE table). Half-open, page aligned, always holding `page`.
pub fn fault_around_range(page: u64, vma: (u64, u64), backed: (u64, u64), table_span: u64) -> (u64, u64) {
    let block = FAULT_AROUND_BYTES.max(PAGE_SIZE);
    let (block_start, table_start) = (page & !(block - 1), page & !(table_span - 1));
    let start = block_start.max(vma.0).max(backed.0).max(table_start);
    let end = block_start
        .saturating_add(block)
        .min(vma.1)
        .min(backed.1)
        .min(table_start.saturating_add(table_span));
    (start, end)
}

/// One `PT_LOAD` segment as the program header gives it, for
/// [`UserMemory::map_file_segment`]: the bytes `[vaddr, vaddr + filesz)` are the file's from
/// `offset`, the rest up to `vaddr + memsz` zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSegment {
    /// `p_vaddr` (after the load bias).
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_offset`.
    pub offset: u64,
}

/// One object-backed virtual range of a process: `[start, end)` maps the object from byte
/// `offset` (page aligned) on.
#[derive(Clone)]
pub struct Backing {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The object.
    pub object: ObjectRef,
    /// Offset in the object of `start`.
    pub offset: u64,
}

impl core::fmt::Debug for Backing {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Backing")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl Backing {
    /// The page offset in the object of the page at `va` (inside the range).
    pub const fn index_of(&self, va: u64) -> u64 {
        (self.offset + (va - self.start)) / PAGE_SIZE
    }

    /// The virtual address of object page `index`, if this range maps it.
    pub fn va_of(&self, index: u64) -> Option<u64> {
        let off = index.checked_mul(PAGE_SIZE)?;
        let va = self.start.checked_add(off.checked_sub(self.offset)?)?;
        (va < self.end).then_some(va)
    }
}

/// The object-backed ranges of one process, sorted by address and disjoint. Every range in it
/// is counted by its object ([`SharedObject::mapped`]) from when it enters to when it leaves
/// (dropping the list counts each one out), so the list is copied only by
/// [`try_clone`](Self::try_clone), never by a plain clone.
#[derive(Debug, Default)]
pub struct Backings(Vec<Backing>);

impl Drop for Backings {
    fn drop(&mut self) {
        for b in &self.0 {
            b.object.mapped(false);
        }
    }
}

impl Backings {
    /// No range.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// The ranges, in address order.
    pub fn iter(&self) -> impl Iterator<Item = &Backing> {
        self.0.iter()
    }

    /// The range containing `va`.
    pub fn at(&self, va: u64) -> Option<&Backing> {
        let i = self.0.partition_point(|b| b.end <= va);
        self.0.get(i).filter(|b| b.start <= va)
    }

    /// Room for `n` more ranges (a call reserves before it changes anything it cannot undo).
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room.
    pub fn reserve(&mut self, n: usize) -> Result<(), Errno> {
        self.0.try_reserve(n).map_err(|_| Errno::ENOMEM)
    }

    /// A copy for a forked child.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room.
    pub fn try_clone(&self) -> Result<Self, Errno> {
        let mut v = Vec::new();
        v.try_reserve(self.0.len()).map_err(|_| Errno::ENOMEM)?;
        for b in &self.0 {
            b.object.mapped(true);
            v.push(b.clone());
        }
        Ok(Self(v))
    }

    /// Adds `b`, which must not overlap any range (call [`remove`](Self::remove) first). Uses
    /// the room [`reserve`](Self::reserve) made, if any.
    pub fn insert(&mut self, b: Backing) {
        let i = self.0.partition_point(|x| x.end <= b.start);
        b.object.mapped(true);
        self.0.insert(i, b);
    }

    /// Removes `[start, end)` from every range (cutting the ranges it overlaps); hands each
    /// piece removed to `gone`, in address order. Cutting a range in two needs one more entry:
    /// reserve one before, where the call cannot fail afterwards.
    pub fn remove(&mut self, start: u64, end: u64, mut gone: impl FnMut(Backing)) {
        if start >= end {
            return;
        }
        let mut i = self.0.partition_point(|b| b.end <= start);
        while i < self.0.len() && self.0[i].start < end {
            let b = self.0[i].clone();
            let (s, e) = (b.start.max(start), b.end.min(end));
            gone(Backing { start: s, end: e, offset: b.offset + (s - b.start), ..b.clone() });
            let before = (b.start < s).then(|| Backing { end: s, ..b.clone() });
            let after =
                (e < b.end).then(|| Backing { start: e, offset: b.offset + (e - b.start), ..b.clone() });
            // The pieces kept are counted in before the range they come from is counted out.
            for _ in before.iter().chain(after.iter()) {
                b.object.mapped(true);
            }
            b.object.mapped(false);
            match (before, after) {
                (Some(x), Some(y)) => {
                    self.0[i] = x;
                    self.0.insert(i + 1, y);
                    i += 2;
                }
                (Some(x), None) => {
                    self.0[i] = x;
                    i += 1;
                }
                (None, Some(y)) => {
                    self.0[i] = y;
                    i += 1;
                }
                (None, None) => {
                    self.0.remove(i);
                }
            }
        }
    }
}

impl Backings {
    /// Moves the ranges inside `[from, from + len)` by `to - from` (an `mremap` move; the
    /// destination holds none), or copies them with `keep` (`MREMAP_DONTUNMAP`: the source
    /// still maps the object). Reserves first: nothing changes on `ENOMEM`.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room.
    pub fn relocate(&mut self, from: u64, len: u64, to: u64, keep: bool) -> Result<(), Errno> {
        let end = from + len;
        let n = self.0.iter().filter(|b| b.start < end && b.end > from).count();
        if n == 0 {
            return Ok(());
        }
        let mut pieces = Vec::new();
        pieces.try_reserve(n).map_err(|_| Errno::ENOMEM)?;
        self.reserve(n + 1)?;
        if keep {
            for b in self.0.iter().filter(|b| b.start < end && b.end > from) {
                let (s, e) = (b.start.max(from), b.end.min(end));
                pieces.push(Backing { start: s, end: e, offset: b.offset + (s - b.start), ..b.clone() });
            }
        } else {
            self.remove(from, end, |b| pieces.push(b));
        }
        for b in pieces {
            self.insert(Backing { start: b.start - from + to, end: b.end - from + to, ..b });
        }
        Ok(())
    }

    /// Extends the range ending at `old_end` to `new_end` (an object mapping grown by
    /// `mremap`: the new part maps the object's next pages, as Linux's).
    pub fn extend(&mut self, old_end: u64, new_end: u64) {
        if let Some(b) = self.0.iter_mut().find(|b| b.end == old_end) {
            b.end = new_end;
        }
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `mmap(addr, len, prot, flags, fd, offset)` of a shared memory object: `MAP_SHARED`
    /// mappings map the object's frames (every mapping of an offset sees the same frame),
    /// `MAP_PRIVATE` ones map them read-only and copy on the first write. The placement, the
    /// code window and W^X are the area map's, as for anonymous memory: an executable view of
    /// an object goes into the code window like any executable mapping.
    ///
    /// # Errors
    ///
    /// As [`mmap`](Self::mmap); `EINVAL` for `MAP_GROWSDOWN`; `EOPNOTSUPP` for a flag
    /// `MAP_SHARED_VALIDATE` does not know.
    pub fn mmap_object(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        map_flags: u64,
        object: ObjectRef,
        offset: u64,
    ) -> Result<u64, Errno> {
        self.map_object(addr, len, prot, map_flags, object, offset, true)
    }

    /// [`mmap_object`](Self::mmap_object) that may say the mapping can never become writable
    /// (`may_write` false: [`crate::vm::VmaFlags::NOMAYWRITE`], as a System V segment attached with
    /// `SHM_RDONLY`, or a shared mapping of a file opened read-only).
    ///
    /// # Errors
    ///
    /// As [`mmap_object`](Self::mmap_object).
    #[allow(clippy::too_many_arguments, reason = "mmap's arguments and the object's")]
    pub fn map_object(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        map_flags: u64,
        object: ObjectRef,
        offset: u64,
        may_write: bool,
    ) -> Result<u64, Errno> {
        use crate::vm::flags::*;
        let mut f = map_flags & !(MAP_OBJECT | MAP_ANONYMOUS | MAP_NOMAYWRITE);
        if !may_write {
            f |= MAP_NOMAYWRITE;
        }
        // A mapping of an object never grows (Linux's `do_mmap` refuses `VM_GROWSDOWN` for a file).
        if offset & (PAGE_SIZE - 1) != 0 || f & MAP_GROWSDOWN != 0 {
            return Err(Errno::EINVAL);
        }
        if f & MAP_TYPE == MAP_SHARED_VALIDATE {
            // Linux's LEGACY_MAP_MASK and the flags validated since (MAP_SYNC needs DAX).
            const KNOWN: u64 = MAP_TYPE
                | MAP_FIXED
                | MAP_DENYWRITE
                | MAP_EXECUTABLE
                | MAP_GROWSDOWN
                | MAP_LOCKED
                | MAP_NORESERVE
                | MAP_POPULATE
                | MAP_NONBLOCK
                | MAP_STACK
                | MAP_HUGETLB
                | MAP_FIXED_NOREPLACE
                | MAP_CODE
                | MAP_NOMAYWRITE;
            if f & !KNOWN != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            f = (f & !MAP_TYPE) | MAP_SHARED;
        }
        self.backings.reserve(2)?;
        let mapped = self.vm.mmap(addr, len, prot, f | MAP_ANONYMOUS | MAP_OBJECT, -1, offset)?;
        let backing = Backing { start: mapped.addr, end: mapped.addr + mapped.len, object, offset };
        self.finish_mmap(&mapped, f, Some(backing));
        Ok(mapped.addr)
    }

    /// One `PT_LOAD` segment of a program mapped from its file's page cache `object`, as Linux's
    /// `elf_map`, `padzero` and `set_brk` do it: the pages holding `[vaddr, vaddr + filesz)` are a
    /// private mapping of the file from the page-rounded `offset` (an [`crate::vm::VmaFlags::IMAGE`] area
    /// that is also [`crate::vm::VmaFlags::OBJECT`]: its pages are the cache's frames, shared with every
    /// other process running the file and with `read`, until a write copies one); when the
    /// segment has a bss, the rest of the last file page is zeroed in this memory's own copy of
    /// that page (the file's bytes there belong to whatever follows the segment in the file),
    /// and the pages up to `vaddr + memsz` are anonymous zero memory. Whatever the range held
    /// before is replaced (as `MAP_FIXED`). The code window and W^X rules are the caller's, as
    /// for [`VmMap::map_kernel`](crate::vm::VmMap::map_kernel).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a segment whose offset and address disagree within a page; `ENOMEM`;
    /// `EFAULT` when the file no longer has the page the zeroing needs (Linux's `padzero`).
    pub fn map_file_segment(&mut self, seg: FileSegment, prot: Prot, object: ObjectRef) -> Result<(), Errno> {
        use crate::vm::VmaFlags;
        let mask = PAGE_SIZE - 1;
        let start = seg.vaddr & !mask;
        let offset = seg.offset.checked_sub(seg.vaddr - start).ok_or(Errno::EINVAL)?;
        if offset & mask != 0 || seg.memsz < seg.filesz {
            return Err(Errno::EINVAL);
        }
        let file_bytes_end = seg.vaddr.checked_add(seg.filesz).ok_or(Errno::EINVAL)?;
        let mem_end = seg.vaddr.checked_add(seg.memsz).ok_or(Errno::EINVAL)?;
        let file_end = if seg.filesz == 0 { start } else { file_bytes_end.next_multiple_of(PAGE_SIZE) };
        let end = mem_end.next_multiple_of(PAGE_SIZE).max(file_end);
        if file_end > start {
            self.backings.reserve(2)?;
            let flags = VmaFlags::IMAGE.union(VmaFlags::OBJECT);
            let replaced = self.vm.map_kernel(start, file_end - start, prot, flags)?;
            if let (Some(first), Some(last)) = (replaced.first(), replaced.last()) {
                let (s, e) = (first.start, last.end);
                self.unmap_range(s, e);
            }
            self.backings.remove(start, file_end, drop);
            self.backings.insert(Backing { start, end: file_end, object, offset });
            let tail = (file_bytes_end & mask) as usize;
            if seg.memsz > seg.filesz && tail != 0 {
                // Linux's `padzero`: a write, so this page is this memory's own copy at once,
                // whatever the segment's protection.
                let page = file_bytes_end & !mask;
                let vma = (start, file_end);
                self.object_fault(page, Access::Write, prot, false, vma).map_err(|e| match e {
                    Fault::OutOfMemory => Errno::ENOMEM,
                    _ => Errno::EFAULT,
                })?;
                let pa = self.space.translate(VirtAddr(page)).ok_or(Errno::EFAULT)?;
                const ZEROS: [u8; 256] = [0; 256];
                let mut at = tail;
                while at < PAGE_SIZE as usize {
                    let n = ZEROS.len().min(PAGE_SIZE as usize - at);
                    self.frames.write(pa, at, &ZEROS[..n]);
                    at += n;
                }
                if prot.exec() {
                    self.frames.sync_icache(pa);
                }
            }
        }
        if end > file_end {
            // The bss past the file's last page: anonymous memory, as Linux's `set_brk`.
            let replaced = self.vm.map_kernel(file_end, end - file_end, prot, VmaFlags::empty())?;
            if let (Some(first), Some(last)) = (replaced.first(), replaced.last()) {
                let (s, e) = (first.start, last.end);
                self.unmap_range(s, e);
            }
        }
        Ok(())
    }

    /// A fault on a page of an object mapping that is not present: the object's frame (page
    /// `index`), mapped with the area's protection for a shared mapping, read-only for a private
    /// one (whose first write copies it, [`write_fault`](Self::write_fault)); a private write
    /// copies at once. A read or execute fault also maps the neighbours the object already
    /// holds ([`fault_around_range`], [`fault_around`](Self::fault_around)); `vma` is the
    /// faulting area's range.
    pub(super) fn object_fault(
        &mut self,
        page: u64,
        access: Access,
        prot: Prot,
        shared: bool,
        vma: (u64, u64),
    ) -> Result<(), Fault> {
        let attrs = user_attrs(prot).ok_or(Fault::Protection { prot })?;
        let b = self.backings.at(page).ok_or(Fault::Bus)?;
        let index = b.index_of(page);
        let mut got = Err(Fault::OutOfMemory);
        let frames = &mut self.frames;
        b.object.with(&mut |o| got = o.page(index, prot.exec(), frames));
        let pa = got?;
        if !shared && access == Access::Write {
            let new = self.frames.alloc_copy_of(pa).ok_or(Fault::OutOfMemory)?;
            if self.map_fresh(page, new, PAGE_SIZE, attrs, prot) {
                self.cow_copies += 1;
                return Ok(());
            }
            self.frames.free(new);
            return Err(Fault::OutOfMemory);
        }
        // A private mapping shares the object's frame: `mprotect` keeps it read-only too (the
        // area's flags tell it a private object mapping: `protect_range`).
        let attrs = if shared { attrs } else { super::fork::write_protected(attrs) };
        if access != Access::Write {
            // With its cached neighbours, in as few calls as their frames allow.
            return self.fault_around(page, pa, attrs, prot.exec(), vma);
        }
        if !self.map_object_frames(page, pa, 1, attrs) {
            return Err(Fault::OutOfMemory);
        }
        self.faults += 1;
        Ok(())
    }

    /// Maps the `n` pages from `va` to the object's frames from `first` on (consecutive) with
    /// `attrs`, one more reference to each taken from the provider: the one sequence of a fault
    /// on an object mapping, for one page or a run of its cached neighbours. Counts them as the
    /// memory's data frames. On failure (a reference or a table frame refused) nothing of it
    /// stays and every reference taken is handed back.
    fn map_object_frames(
        &mut self,
        va: u64,
        first: PhysAddr,
        n: usize,
        attrs: crate::descriptor::Attributes,
    ) -> bool {
        let frame = |j: usize| PhysAddr(first.0 + j as u64 * PAGE_SIZE);
        let shared = (0..n).take_while(|&j| self.frames.share(frame(j))).count();
        let size = n as u64 * PAGE_SIZE;
        if shared < n || self.space.map(VirtAddr(va), first, size, attrs, Constraints::NONE).is_err() {
            for j in 0..shared {
                self.frames.free(frame(j));
            }
            return false;
        }
        self.data_frames += n as u64;
        true
    }

    /// A read or execute fault at `page` of an object mapping whose area is `vma`, the object's
    /// frame for it being `pa`: maps it with `attrs`, and with it, as Linux's
    /// `do_fault_around`, each page of [`fault_around_range`] that the mapped object already
    /// holds and that is not present, to the object's frame with the same rights (read-only
    /// for a private mapping, whose later write takes the copy-on-write fault). It never
    /// allocates a page of the object or a frame, so a hole stays a hole (its fault will
    /// allocate it). Pages whose frames are consecutive are mapped in one call, so that a whole
    /// aligned run of them gets the contiguous hint as it is made (no fold, which would need
    /// break-before-make and a TLBI, as mapping them one by one did). The faulting page's
    /// failure is the fault's (`OutOfMemory`); a neighbour that cannot be mapped (no table
    /// frame) ends the fault-around and is left to its own fault. Neighbours are counted in
    /// [`UserStats::fault_around_pages`].
    fn fault_around(
        &mut self,
        page: u64,
        pa: PhysAddr,
        attrs: crate::descriptor::Attributes,
        exec: bool,
        vma: (u64, u64),
    ) -> Result<(), Fault> {
        let mut frame_of = [None; AROUND_PAGES];
        let (from, count) = match self.backings.at(page) {
            Some(b) => {
                let table_span = PAGE_SIZE * (PAGE_SIZE / 8);
                let (from, to) = fault_around_range(page, vma, (b.start, b.end), table_span);
                let (object, first_index) = (b.object.clone(), b.index_of(from));
                let count = ((to - from) / PAGE_SIZE) as usize;
                // The pages not to map (present ones, guard markers), found with one walk and
                // one scan of guard markers over the range rather than two walks per page. (No
                // marker can be there today, `MADV_GUARD_INSTALL` refusing object mappings; the
                // scan keeps a marker from ever being mapped over if that changes.)
                let bit = |va: u64| 1u32 << ((va - from) / PAGE_SIZE);
                let mut taken = bit(page);
                let table = self.space.table();
                let _ = table.walk(VirtAddr(from), to - from, |leaf| {
                    let (s, e) = (leaf.va.0.max(from), (leaf.va.0 + leaf.size).min(to));
                    for va in (s..e).step_by(PAGE_SIZE as usize) {
                        taken |= bit(va);
                    }
                });
                let _ = table.guards_in(VirtAddr(from), to - from, |va, len| {
                    for va in (va.0..va.0 + len).step_by(PAGE_SIZE as usize) {
                        taken |= bit(va);
                    }
                });
                // The frames the object already holds for the others, under one hold of it.
                let frames = &mut self.frames;
                object.with(&mut |o| {
                    for (i, slot) in frame_of.iter_mut().enumerate().take(count) {
                        let index = first_index + i as u64;
                        if taken & (1 << i) == 0 && o.frame_of(index).is_some() {
                            *slot = o.page(index, exec, frames).ok();
                        }
                    }
                });
                (from, count)
            }
            None => (page, 1),
        };
        let at = ((page - from) / PAGE_SIZE) as usize;
        frame_of[at] = Some(pa);
        // Runs of pages whose frames follow one another, each mapped in one call.
        let (mut i, mut page_mapped) = (0, false);
        while i < count {
            let Some(first) = frame_of[i] else {
                i += 1;
                continue;
            };
            let mut n = 1;
            while i + n < count && frame_of[i + n] == Some(PhysAddr(first.0 + n as u64 * PAGE_SIZE)) {
                n += 1;
            }
            let holds_page = (i..i + n).contains(&at);
            if !self.map_object_frames(from + i as u64 * PAGE_SIZE, first, n, attrs) {
                if holds_page {
                    return Err(Fault::OutOfMemory);
                }
                break;
            }
            self.fault_around_pages += n as u64 - u64::from(holds_page);
            if holds_page {
                self.faults += 1;
                page_mapped = true;
            }
            i += n;
        }
        // The faulting page's run was mapped unless a neighbour's failure stopped the loop
        // before reaching it: then it is mapped alone.
        if !page_mapped {
            if !self.map_object_frames(page, pa, 1, attrs) {
                return Err(Fault::OutOfMemory);
            }
            self.faults += 1;
        }
        Ok(())
    }

    /// After `object` shrank so that its pages from `first_gone` on are gone
    /// ([`MemObject::set_size`]): unmaps them from every mapping of it in this memory, private
    /// copies included (Linux's `unmap_mapping_range` with `even_cows`), one flush per range; a
    /// later access there is [`Fault::Bus`]. Returns the pages unmapped.
    pub fn truncate_object(&mut self, object: &ObjectRef, first_gone: u64) -> u64 {
        let before = self.data_frames;
        for i in 0..self.backings.0.len() {
            let b = &self.backings.0[i];
            if !same_object(&b.object, object) {
                continue;
            }
            let from = first_gone.saturating_mul(PAGE_SIZE).max(b.offset);
            let start = b.start.saturating_add(from - b.offset);
            let end = b.end;
            if start < end {
                mutant!(
                    self.unmap_range(start, end),
                    TruncateWithoutFlush => self.unmap_without_flush(start, end)
                );
            }
        }
        before - self.data_frames
    }

    /// The planted bug of [`crate::tlb::mutation::Mutation::TruncateWithoutFlush`]: the range's
    /// entries removed and its frames freed with no TLB invalidation.
    #[cfg(test)]
    fn unmap_without_flush(&mut self, start: u64, end: u64) {
        let mut gone = Vec::new();
        let _ = self.space.table().walk(VirtAddr(start), end - start, |leaf| {
            let (s, e) = (leaf.va.0.max(start), (leaf.va.0 + leaf.size).min(end));
            for va in (s..e).step_by(PAGE_SIZE as usize) {
                gone.push(leaf.translate(VirtAddr(va)));
            }
        });
        // SAFETY: test builds only, with this mutation active: the entries left in the TLBs
        // are what the multi-CPU model must catch.
        let table = unsafe { self.space.table_mut_unflushed() };
        if let Ok(pending) = table.unmap(VirtAddr(start), end - start) {
            pending.release(table.translation_mut());
        }
        for pa in gone {
            self.frames.free(pa);
            self.data_frames -= 1;
        }
    }

    /// The object-backed ranges.
    pub fn backings(&self) -> &Backings {
        &self.backings
    }
}
