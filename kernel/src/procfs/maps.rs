//! `/proc/PID/maps`, `smaps`, `smaps_rollup` and `pagemap`: the process's memory map and what
//! each area holds, in the formats of Linux 6.1's `fs/proc/task_mmu.c` (`show_map_vma`,
//! `show_smap`, `show_smaps_rollup`, `pagemap_read`), so that a program, a debugger or
//! `scripts/pictures.py` reads this kernel's layout with the parser it uses on Linux.
//!
//! One `maps` line per area, ascending:
//!
//! ```text
//! 00010000-00011000 r-xp 00000000 00:00 0
//! 00400000-00491000 r-xp 00000000 00:02 5                                  /maps-test
//! 004ac000-004b0000 r--p 0009c000 00:02 5                                  /maps-test
//! 004b0000-004b3000 rw-p 000a0000 00:02 5                                  /maps-test
//! 004b3000-005b8000 rw-p 00000000 00:00 0
//! 20000000-20032000 rw-p 00000000 00:00 0                                  [heap]
//! fffff7eef000-fffff7ef1000 r--s 00001000 00:1e 7                          /tmp/data
//! fffff7ef1000-fffff7ef2000 rw-s 00000000 00:00 0                          /dev/zero (deleted)
//! fffff7ef2000-fffff7ff2000 ---p 00000000 00:00 0
//! ffffff7ff000-fffffffff000 rw-p 00000000 00:00 0                          [stack]
//! ```
//!
//! Start and end in at least 8 lower-case hex digits; `r`/`w`/`x` or `-`, then `s` (shared) or
//! `p` (private); the file offset, device and inode of a file-backed area: the program's
//! segments (mapped from the file's page cache, or copied when there is none; `exec::image`
//! records where each came from) and
//! mappings of a file or memfd (their page cache's name: `fs::pagecache`); 0 for the rest. A
//! named area's line is padded with spaces to 72 characters (`seq_pad`), then a space and the
//! name: the file's path, `[heap]` for the `brk` area, `[stack]` for the initial stack, and
//! `/dev/zero (deleted)` for shared anonymous memory (Linux backs it with an unlinked shmem
//! file), and `[anon:NAME]` for anonymous memory a program named
//! (`prctl(PR_SET_VMA_ANON_NAME)`), `[vvar]` and `[vdso]` for the vDSO's data page and image
//! (`crate::vdso`). Anonymous lines end with the space after the inode, as Linux's do. A segment's bss beyond the file's last page is
//! an anonymous area of its own, as on Linux (part of the segment's area for a program copied
//! from bytes without a page cache, the test image's).
//!
//! `smaps` adds each area's sizes (its pages present in the tables, shared or private by how many
//! map each frame, with Pss dividing each page among them; dirty but a read-only segment's,
//! which is clean), `smaps_rollup` their sum under one
//! header, and `pagemap` one 64-bit entry per page (the frame number, shown to
//! `CAP_SYS_ADMIN` only, bit 56 for a page mapped once, bit 61 for a page of a file or shared
//! memory, bit 63 present).
//!
//! Linux generates the text as it is read (`seq_file`); here it is generated when a read starts
//! at offset 0 and kept until the descriptor is closed, so a mapping made between `open` and the
//! first `read` shows, as on Linux, and one made while a long listing is half read does not.
use alloc::vec::Vec;
use core::fmt::{self, Write};

use linux_abi::Errno;
use mm::addr::{PAGE_SIZE, VirtAddr};
use mm::user::UserFrames as _;
use mm::vm::{Vma, VmaFlags};

use crate::fs::text::Text;
use crate::memory::vmspace::Mm;
use crate::process::exec::image::ProgramImage;
use crate::process::{Process, STACK_TOP};

/// Width the line is padded to before the space and the name (Linux: `seq_setwidth` with
/// `25 + sizeof(void *) * 6 - 1`).
const NAME_COLUMN: usize = 72;

/// What a `maps` line says of an area besides its range and rights.
struct Source {
    offset: u64,
    dev: u64,
    ino: u64,
    name: Option<Vec<u8>>,
}

/// Where `vma` came from and what Linux would name it (`show_map_vma`).
fn source(mm: &Mm, vma: &Vma, exe: &[u8], image: Option<&ProgramImage>) -> Source {
    let none = |name: Option<&[u8]>| Source {
        offset: 0,
        dev: 0,
        ino: 0,
        name: name.and_then(|n| crate::fs::copy_bytes(n).ok()),
    };
    if vma.flags.contains(VmaFlags::IMAGE) {
        return match image.and_then(|i| i.origin(vma.start)) {
            Some(o) => {
                Source { offset: o.offset, dev: o.dev, ino: o.ino, ..none(Some(o.path.unwrap_or(exe))) }
            }
            None => none(Some(exe)),
        };
    }
    if vma.flags.contains(VmaFlags::OBJECT)
        && let Some(b) = mm.backings().at(vma.start)
    {
        // The vDSO and its data page: named as Linux names its special mappings, offset 0.
        if let Some(name) = crate::vdso::name_of(&b.object) {
            return none(Some(name));
        }
        // An attachment of a System V segment: named by its key, its inode the segment's id.
        if let Some(seg) = crate::ipc::shm::segment_of(&b.object) {
            let mut name = Text(Vec::new());
            let named = write!(name, "{}", ShmName(&seg)).is_ok();
            return Source { ino: seg.id() as u64, name: named.then_some(name.0), ..none(None) };
        }
        let object = alloc::sync::Arc::as_ptr(&b.object).cast::<u8>();
        let offset = b.offset + (vma.start - b.start);
        return match crate::fs::pagecache::mapped_name(object) {
            Some((dev, ino, path)) => Source { offset, dev, ino, name: Some(path) },
            None => Source { offset, ..none(None) },
        };
    }
    if vma.flags.contains(VmaFlags::SHARED) {
        // Linux backs shared anonymous memory with an unlinked shmem file (`shmem_zero_setup`).
        none(Some(b"/dev/zero (deleted)"))
    } else if vma.flags.contains(VmaFlags::HEAP) {
        none(Some(b"[heap]"))
    } else if let top = image.map_or(STACK_TOP, |i| i.stack_top)
        && vma.flags.contains(VmaFlags::STACK)
        && vma.start < top
        && top <= vma.end
    {
        // Linux names the area holding `mm->start_stack`; thread stacks stay anonymous.
        none(Some(b"[stack]"))
    } else if let Some(anon) = mm.vm().anon_name(vma) {
        // A name given with prctl(PR_SET_VMA_ANON_NAME), shown when no other applies.
        let mut name = Vec::new();
        if name.try_reserve(anon.len() + 7).is_err() {
            return none(None);
        }
        name.extend_from_slice(b"[anon:");
        name.extend_from_slice(anon);
        name.push(b']');
        Source { offset: 0, dev: 0, ino: 0, name: Some(name) }
    } else {
        none(None)
    }
}

/// The name of a System V segment's mappings (`ipc::shm::Segment::map_name`).
struct ShmName<'a>(&'a crate::ipc::shm::Segment);

impl fmt::Display for ShmName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.map_name(f)
    }
}

/// Linux's `MAJOR`/`MINOR` of an `st_dev` as `stat` reports it.
fn major_minor(dev: u64) -> (u64, u64) {
    let (major, minor) = linux_abi::layout::decode_dev(dev);
    (u64::from(major), u64::from(minor))
}

/// One line of the listing (Linux's `show_vma_header_prefix` and `show_map_vma`).
fn line(out: &mut Text, start: u64, end: u64, perms: [u8; 4], src: &Source) -> fmt::Result {
    let at = out.0.len();
    let (major, minor) = major_minor(src.dev);
    let perms = core::str::from_utf8(&perms).unwrap_or("----");
    write!(out, "{start:08x}-{end:08x} {perms} {:08x} {major:02x}:{minor:02x} {} ", src.offset, src.ino)?;
    if let Some(name) = &src.name {
        let width = out.0.len() - at;
        for _ in width..NAME_COLUMN {
            out.write_str(" ")?;
        }
        out.write_str(" ")?;
        out.0.try_reserve(name.len()).map_err(|_| fmt::Error)?;
        out.0.extend_from_slice(name);
    }
    out.write_str("\n")
}

fn perms(vma: &Vma) -> [u8; 4] {
    let p = vma.prot;
    let flag = |on: bool, c: u8| if on { c } else { b'-' };
    // An object's `MAP_SHARED` mapping is `SHARED` in the map too.
    let shared = vma.flags.contains(VmaFlags::SHARED);
    [flag(p.read(), b'r'), flag(p.write(), b'w'), flag(p.exec(), b'x'), if shared { b's' } else { b'p' }]
}

/// Runs `f` on the memory map of `p` with its memory locked, and hands back what `f` built; an
/// empty text for a process without memory (a zombie). The text is built under the memory lock
/// and copied out after it is released (a copy may demand-page, which takes the same lock).
fn with_mm(p: &Process, f: impl FnOnce(&Mm, &mut Text) -> fmt::Result) -> Result<Vec<u8>, Errno> {
    let mut out = Text(Vec::new());
    let Some(space) = p.space() else { return Ok(Vec::new()) };
    let mm = space.lock();
    let r = f(&mm, &mut out);
    drop(mm);
    out.done(r)
}

/// The whole `maps` listing of `p`.
///
/// # Errors
/// `ENOMEM`.
pub fn generate(p: &Process) -> Result<Vec<u8>, Errno> {
    let (exe, exe_len) = p.posix.exe();
    let image = p.posix.image();
    with_mm(p, |mm, out| {
        for vma in mm.vm().iter() {
            line(out, vma.start, vma.end, perms(vma), &source(mm, vma, &exe[..exe_len], image.as_deref()))?;
        }
        Ok(())
    })
}

/// What `smaps` counts of an area, in bytes.
#[derive(Default, Clone, Copy)]
struct Usage {
    rss: u64,
    /// Each page's share, `PAGE_SIZE` divided among the page's mappers, in bytes shifted left by
    /// [`PSS_SHIFT`] (Linux's fixed point, so that the sum rounds once, at the end).
    pss: u64,
    /// [`pss`](Self::pss) of the dirty pages and of the anonymous ones.
    pss_dirty: u64,
    pss_anon: u64,
    shared_clean: u64,
    shared_dirty: u64,
    private_clean: u64,
    private_dirty: u64,
    anonymous: u64,
    locked: u64,
}

/// The fixed point of [`Usage::pss`] (Linux's `PSS_SHIFT`).
const PSS_SHIFT: u32 = 12;

impl Usage {
    fn add(&mut self, o: Usage) {
        self.rss += o.rss;
        self.pss += o.pss;
        self.pss_dirty += o.pss_dirty;
        self.pss_anon += o.pss_anon;
        self.shared_clean += o.shared_clean;
        self.shared_dirty += o.shared_dirty;
        self.private_clean += o.private_clean;
        self.private_dirty += o.private_dirty;
        self.anonymous += o.anonymous;
        self.locked += o.locked;
    }
}

/// Calls `f` with each page of `[start, end)` present in `mm`'s tables and its frame, but the
/// pages that map the shared zero region: Linux's `smaps_pte_entry` counts only what
/// `vm_normal_page` gives, which is no page for the zero page (it is nobody's memory), and
/// `smaps_pmd_entry` none for the huge zero page (`follow_trans_huge_pmd` with `FOLL_DUMP`).
fn each_counted(mm: &Mm, start: u64, end: u64, f: &mut dyn FnMut(u64, mm::addr::PhysAddr)) {
    let zero = crate::memory::frames::zero_region();
    each_present(mm, start, end, &mut |va, pa| {
        if !zero.is_some_and(|z| z.contains(pa)) {
            f(va, pa);
        }
    });
}

/// Calls `f` with each page of `[start, end)` present in `mm`'s tables and its frame.
fn each_present(mm: &Mm, start: u64, end: u64, f: &mut dyn FnMut(u64, mm::addr::PhysAddr)) {
    let _ = mm.space().table().walk(VirtAddr(start), end - start, |leaf| {
        let (s, e) = (leaf.va.0.max(start), (leaf.va.0 + leaf.size).min(end));
        for va in (s..e).step_by(PAGE_SIZE as usize) {
            f(va, leaf.translate(VirtAddr(va)));
        }
    });
}

/// The usage of `vma`: its pages present, each shared (mapped more than once: a fork's
/// copy-on-write pages, a memory object's or file's pages mapped by several processes) or
/// private, with its share of the proportional size (Pss: the page divided among its mappers,
/// as Linux's `smaps_account`); dirty, but a read-only segment's, which is clean; anonymous unless
/// shared or a file's.
///
/// The mappers of a page are its frame's holders ([`crate::memory::frames::holders`]), less the
/// object's own reference for a page of an object-backed area. A private copy in such an area
/// that a fork then shared counts one mapper less than it has (the frame's count alone does not
/// tell it from the object's page).
///
/// The vDSO's data page counts nothing, as on Linux (a `VM_PFNMAP` mapping: no page to count).
fn usage(mm: &Mm, vma: &Vma) -> Usage {
    let object = vma.flags.contains(VmaFlags::OBJECT);
    if object && mm.backings().at(vma.start).is_some_and(|b| crate::vdso::is_data_page(&b.object)) {
        return Usage::default();
    }
    let (mut pages, mut shared_pages, mut pss) = (0u64, 0u64, 0u64);
    each_counted(mm, vma.start, vma.end, &mut |_, pa| {
        let holders = crate::memory::frames::holders(pa);
        let mappers = if object && holders > 1 { holders - 1 } else { holders };
        pages += 1;
        shared_pages += u64::from(mappers > 1);
        pss += (PAGE_SIZE << PSS_SHIFT) / mappers;
    });
    let (rss, shared) = (pages * PAGE_SIZE, shared_pages * PAGE_SIZE);
    let clean = vma.flags.contains(VmaFlags::IMAGE) && !vma.prot.write();
    // A program's writable segment counts as anonymous whether it was copied or is mapped from
    // the file's page cache (its pages are the process's own once written).
    let file_backed = object && !vma.flags.contains(VmaFlags::IMAGE);
    let anon = !vma.flags.contains(VmaFlags::SHARED) && !file_backed && !clean;
    Usage {
        rss,
        pss,
        pss_dirty: if clean { 0 } else { pss },
        pss_anon: if anon { pss } else { 0 },
        shared_clean: if clean { shared } else { 0 },
        shared_dirty: if clean { 0 } else { shared },
        private_clean: if clean { rss - shared } else { 0 },
        private_dirty: if clean { 0 } else { rss - shared },
        anonymous: if anon { rss } else { 0 },
        locked: if vma.flags.contains(VmaFlags::LOCKED) { rss } else { 0 },
    }
}

/// One `Key:  N kB` line (Linux's `SEQ_PUT_DEC`: the key padded to 16 columns, the number to 8).
fn kb(out: &mut Text, key: &str, bytes: u64) -> fmt::Result {
    writeln!(out, "{key:<16}{:>8} kB", bytes >> 10)
}

/// The counters every `smaps` block and the rollup print (Linux's `__show_smap`); `rollup`
/// adds `Pss_Anon`, `Pss_File` and `Pss_Shmem`.
fn show_usage(out: &mut Text, u: &Usage, rollup: bool) -> fmt::Result {
    kb(out, "Rss:", u.rss)?;
    kb(out, "Pss:", u.pss >> PSS_SHIFT)?;
    kb(out, "Pss_Dirty:", u.pss_dirty >> PSS_SHIFT)?;
    if rollup {
        kb(out, "Pss_Anon:", u.pss_anon >> PSS_SHIFT)?;
        kb(out, "Pss_File:", (u.pss - u.pss_anon) >> PSS_SHIFT)?;
        kb(out, "Pss_Shmem:", 0)?;
    }
    kb(out, "Shared_Clean:", u.shared_clean)?;
    kb(out, "Shared_Dirty:", u.shared_dirty)?;
    kb(out, "Private_Clean:", u.private_clean)?;
    kb(out, "Private_Dirty:", u.private_dirty)?;
    kb(out, "Referenced:", u.rss)?;
    kb(out, "Anonymous:", u.anonymous)?;
    kb(out, "LazyFree:", 0)?;
    kb(out, "AnonHugePages:", 0)?;
    kb(out, "ShmemPmdMapped:", 0)?;
    kb(out, "FilePmdMapped:", 0)?;
    kb(out, "Shared_Hugetlb:", 0)?;
    // Linux prints this one key, 17 characters long, with a 7-wide number.
    writeln!(out, "Private_Hugetlb: {:>7} kB", 0)?;
    kb(out, "Swap:", 0)?;
    kb(out, "SwapPss:", 0)?;
    kb(out, "Locked:", u.locked)
}

/// `VmFlags:` of `vma` (Linux's `show_smap_vma_flags`), the ones this kernel's areas have.
fn vm_flags(out: &mut Text, vma: &Vma) -> fmt::Result {
    let shared = vma.flags.contains(VmaFlags::SHARED);
    let p = vma.prot;
    let flags = [
        (p.read(), "rd"),
        (p.write(), "wr"),
        (p.exec(), "ex"),
        (shared, "sh"),
        (true, "mr"),
        (true, "mw"),
        (true, "me"),
        (shared, "ms"),
        (vma.flags.contains(VmaFlags::STACK), "gd"),
        (vma.flags.contains(VmaFlags::LOCKED), "lo"),
        (!shared && p.write(), "ac"),
        (vma.flags.contains(VmaFlags::DONTFORK), "dc"),
        (vma.flags.contains(VmaFlags::WIPEONFORK), "wf"),
        (vma.flags.contains(VmaFlags::HUGEPAGE), "hg"),
        (vma.flags.contains(VmaFlags::NOHUGEPAGE), "nh"),
        // VM_SEALED, bit 63 of Linux's flags: printed last.
        (vma.flags.contains(VmaFlags::SEALED), "sl"),
    ];
    out.write_str("VmFlags:")?;
    for (on, name) in flags {
        if on {
            write!(out, " {name}")?;
        }
    }
    out.write_str(" \n")
}

/// `/proc/PID/smaps`.
///
/// # Errors
/// `ENOMEM`.
pub fn smaps(p: &Process) -> Result<Vec<u8>, Errno> {
    let (exe, exe_len) = p.posix.exe();
    let image = p.posix.image();
    with_mm(p, |mm, out| {
        for vma in mm.vm().iter() {
            line(out, vma.start, vma.end, perms(vma), &source(mm, vma, &exe[..exe_len], image.as_deref()))?;
            kb(out, "Size:", vma.len())?;
            kb(out, "KernelPageSize:", PAGE_SIZE)?;
            kb(out, "MMUPageSize:", PAGE_SIZE)?;
            show_usage(out, &usage(mm, vma), false)?;
            writeln!(out, "THPeligible:    {}", u8::from(vma.flags.contains(VmaFlags::HUGEPAGE)))?;
            vm_flags(out, vma)?;
        }
        Ok(())
    })
}

/// `/proc/PID/smaps_rollup`: one header from the first area's start to the last one's end, then
/// the sums.
///
/// # Errors
/// `ENOMEM`.
pub fn smaps_rollup(p: &Process) -> Result<Vec<u8>, Errno> {
    with_mm(p, |mm, out| {
        let mut total = Usage::default();
        let (mut first, mut last) = (None, 0);
        for vma in mm.vm().iter() {
            first.get_or_insert(vma.start);
            last = vma.end;
            total.add(usage(mm, vma));
        }
        let header = Source { offset: 0, dev: 0, ino: 0, name: crate::fs::copy_bytes(b"[rollup]").ok() };
        line(out, first.unwrap_or(0), last, *b"---p", &header)?;
        show_usage(out, &total, true)
    })
}

/// Bits of a `pagemap` entry (Linux's `PM_*`).
mod pm {
    /// The frame number's bits.
    pub const PFN_MASK: u64 = (1 << 55) - 1;
    /// Mapped by this process only.
    pub const EXCLUSIVE: u64 = 1 << 56;
    /// A page of a file or of shared memory.
    pub const FILE: u64 = 1 << 61;
    /// Present.
    pub const PRESENT: u64 = 1 << 63;
}

/// `/proc/PID/pagemap` from byte `offset` into `buf`: one little-endian word per page, the
/// page's address `offset / 8 * PAGE_SIZE`; pages outside every area and pages not present read
/// 0; `show_pfn` (the reader has `CAP_SYS_ADMIN`) gives the frame numbers. The bytes written,
/// 0 past the end of the user address space.
///
/// # Errors
/// `EINVAL` for an offset or length that is no multiple of 8 (Linux's `pagemap_read`).
pub fn pagemap(p: &Process, offset: u64, buf: &mut [u8], show_pfn: bool) -> Result<usize, Errno> {
    if !offset.is_multiple_of(8) || !buf.len().is_multiple_of(8) {
        return Err(Errno::EINVAL);
    }
    let task_size = STACK_TOP + PAGE_SIZE;
    let first = offset / 8;
    let pages = (buf.len() / 8) as u64;
    let end_page = (first + pages).min(task_size / PAGE_SIZE);
    if first >= end_page {
        return Ok(0);
    }
    let n = (end_page - first) as usize;
    buf[..n * 8].fill(0);
    let Some(space) = p.space() else { return Ok(n * 8) };
    let mm = space.lock();
    let (start, end) = (first * PAGE_SIZE, end_page * PAGE_SIZE);
    let zero = crate::memory::frames::zero_region();
    for vma in mm.vm().iter().filter(|v| v.end > start && v.start < end) {
        let file = vma.flags.contains(VmaFlags::SHARED) || vma.flags.contains(VmaFlags::OBJECT);
        each_present(&mm, vma.start.max(start), vma.end.min(end), &mut |va, pa| {
            let mut e = pm::PRESENT;
            if show_pfn {
                e |= (pa.0 / PAGE_SIZE) & pm::PFN_MASK;
            }
            if file {
                e |= pm::FILE;
            }
            // The zero page is nobody's own (Linux: no page, so no PM_MMAP_EXCLUSIVE).
            if !crate::memory::frames::UserFrames.is_shared(pa) && !zero.is_some_and(|z| z.contains(pa)) {
                e |= pm::EXCLUSIVE;
            }
            let at = ((va / PAGE_SIZE - first) * 8) as usize;
            buf[at..at + 8].copy_from_slice(&e.to_le_bytes());
        });
    }
    Ok(n * 8)
}

/// Reads `[start, end)` of `p`'s memory (the argument or environment strings), at most `limit`
/// bytes, stopping at the first page not present (Linux's `access_remote_vm` would fault it in;
/// the strings' pages were written by the loader and are present).
///
/// # Errors
/// `ENOMEM`.
pub fn read_memory(p: &Process, start: u64, end: u64, limit: usize) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let len = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX).min(limit);
    out.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
    let Some(space) = p.space() else { return Ok(out) };
    let mm = space.lock();
    let mut at = start;
    while out.len() < len {
        let page = at & !(PAGE_SIZE - 1);
        let Some(pa) = mm.space().translate(VirtAddr(page)) else { break };
        let in_page = (at - page) as usize;
        let n = (PAGE_SIZE as usize - in_page).min(len - out.len());
        let src = crate::memory::layout::phys_to_linear(pa.0) as *const u8;
        // SAFETY: a frame mapped in `p`'s tables, which cannot change while its memory lock is
        // held, read through the linear map; `in_page + n` stays inside the page.
        let bytes = unsafe { core::slice::from_raw_parts(src.add(in_page), n) };
        out.extend_from_slice(bytes);
        at += n as u64;
    }
    Ok(out)
}
