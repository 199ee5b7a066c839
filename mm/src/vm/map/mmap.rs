//! `mmap` and `munmap` for anonymous memory, [`VmMap::map_kernel`] (the kernel's own mappings),
//! and the placement they share with `mremap`: data top-down below `mmap_base` (then bottom-up),
//! code in the code window, hints honoured exactly when the range is free, a hint inside the
//! window served in the window, and a loader's reservation for a library and a JIT's buffer for
//! compiled code placed in the window (the rule and its evidence: docs/address-space.md,
//! "Libraries and JITs").

use super::{Pieces, VmMap, accountable, is_data, page_down, page_up};
use crate::vm::flags::*;
use crate::vm::tree::{Dir, GapQuery};
use crate::vm::{Advice, AnonName, Errno, PAGE, Prot, Vma, VmaFlags};

/// 1 GiB: code placed outside the window never crosses a multiple of this.
const GIB: u64 = 1 << 30;
/// The window's own placements (its lowest fits: code, a loader's reservation, a JIT's buffer)
/// start no lower than this, whatever `mmap_min_addr` allows: in a program linked low, whose
/// window starts at 0, a NULL pointer plus an offset below 64 KiB then faults (65536 is Linux's
/// `mmap_min_addr` on most distributions). `MAP_FIXED` and hints still reach `mmap_min_addr`.
pub(super) const WINDOW_FLOOR: u64 = 64 << 10;
/// 2 MiB: anonymous mappings of a multiple of this are aligned to it (for block promotion).
const BLOCK_2M: u64 = crate::addr::BLOCK_2M;

/// What a successful `mmap` or near placement did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The address to return to the program.
    pub addr: u64,
    /// Length mapped (the request rounded up to pages).
    pub len: u64,
    /// The new mapping's access rights.
    pub prot: Prot,
    /// Pieces of older mappings that `MAP_FIXED` replaced, in address order: the kernel unmaps
    /// their pages (and frees their frames) before installing the new mapping.
    pub replaced: Pieces,
    /// `MAP_POPULATE` (or `MAP_LOCKED`) was given: the kernel may prefault the range.
    pub populate: bool,
    /// A code mapping placed outside the code window (it was full, or `MAP_FIXED` put it there).
    pub outside_window: bool,
}

/// Whether `mmap(hint, asked, prot, flags)` is a loader's reservation for a library: glibc's
/// `_dl_map_segment` reserves `maplength + mapalign` bytes (the library's span, which ends where
/// its bss ends, plus the alignment it needs) with `PROT_NONE` and maps the text `MAP_FIXED`
/// inside; the span's end makes the length no whole number of pages. Nothing else in the
/// recorded programs reserves such a length (docs/address-space.md, "Libraries and JITs", has
/// the counts and what a miss costs).
fn loader_reservation(hint: u64, asked: u64, prot: Prot, flags: u64) -> bool {
    const NOT: u64 = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_NORESERVE | MAP_STACK | MAP_GROWSDOWN | MAP_OBJECT;
    hint == 0
        && prot.bits() == 0
        && flags & MAP_TYPE == MAP_PRIVATE
        && flags & MAP_ANONYMOUS != 0
        && flags & NOT == 0
        && !asked.is_multiple_of(PAGE)
}

/// Whether `mmap(hint, len, prot, flags)` is a JIT's buffer for compiled code: wasmtime maps the
/// object Cranelift compiled private, anonymous, read-write and `MAP_NORESERVE`, with no hint,
/// copies the code in and `mprotect`s its text read-execute (W^X clean, so nothing says "code"
/// before that `mprotect`). Nothing else in the recorded programs asks for read-write memory
/// that way: glibc's arenas, V8's heap and code range and Go's arena reserve with `PROT_NONE`
/// or at a hint (docs/address-space.md, "Libraries and JITs", has the counts). One larger
/// than a quarter of the window is a sparse table, not code, and stays data.
pub(in crate::vm) fn jit_buffer(hint: u64, len: u64, prot: Prot, flags: u64, window_size: u64) -> bool {
    const NOT: u64 = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_STACK | MAP_GROWSDOWN | MAP_OBJECT;
    hint == 0
        && prot.read()
        && prot.write()
        && !prot.exec()
        && flags & MAP_TYPE == MAP_PRIVATE
        && flags & MAP_ANONYMOUS != 0
        && flags & MAP_NORESERVE != 0
        && flags & NOT == 0
        && len <= window_size / 4
}

impl VmMap {
    /// Where a mapping whose hint lies in the code window goes: at the hint when the range is
    /// free and inside the window, else the nearest free range of the window (what a JIT hinting
    /// at its own text wants: V8's code range, LuaJIT's machine-code area). `None` when the hint
    /// is not in the window (or the window is not placed yet) or nothing fits there.
    fn place_near_hint(&mut self, hint: u64, len: u64) -> Option<u64> {
        #[cfg(test)]
        if !self.window.library_rule {
            return None;
        }
        let h = page_up(hint).filter(|&h| h != 0)?;
        let (b, e) = self.window_range()?;
        if !(b <= h && h < e) {
            return None;
        }
        if h.checked_add(len).is_some_and(|end| end <= e) && self.tree.is_free(h, h + len) {
            return Some(h);
        }
        self.near(h, len, e - b, true).ok().map(|(at, _)| at)
    }

    /// Where a loader's reservation ([`loader_reservation`]) or a JIT's buffer ([`jit_buffer`])
    /// goes: the lowest fit in the code window, as code, so the text mapped into it (or made
    /// executable in it) lands there; placed as data when the window has no room (the text then
    /// counts as placed outside when it comes).
    fn place_reservation(&mut self, len: u64) -> Option<u64> {
        #[cfg(test)]
        if !self.window.library_rule {
            return self.place_data(0, len);
        }
        self.ensure_window()
            .and_then(|w| self.lowest_code_fit(w, len, PAGE))
            .or_else(|| self.place_data(0, len))
    }

    /// Where a non-code mapping of `len` bytes goes: near a hint inside the window
    /// ([`VmMap::place_near_hint`]); the hint if free (outside the window), else top-down below
    /// `mmap_base`, else bottom-up above `TASK_UNMAPPED_BASE`, skipping the window.
    pub(super) fn place_data(&mut self, hint: u64, len: u64) -> Option<u64> {
        if let Some(at) = self.place_near_hint(hint, len) {
            return Some(at);
        }
        self.place_data_plain(hint, len)
    }

    /// Whether `[hint, hint + len)` is free and inside the code window: a free hint there.
    fn free_in_window(&self, hint: u64, len: u64) -> bool {
        let Some((b, e)) = self.window_range() else { return false };
        let Some(h) = page_up(hint).filter(|&h| h != 0) else { return false };
        b <= h && h.checked_add(len).is_some_and(|end| end <= e) && self.tree.is_free(h, h + len)
    }

    /// [`VmMap::place_data`] without the window's hint rule: the hint if free outside the
    /// window, else top-down, else bottom-up, skipping the window.
    fn place_data_plain(&mut self, hint: u64, len: u64) -> Option<u64> {
        let l = self.layout;
        let w = self.window_range();
        if hint != 0
            && let Some(end) = page_up(hint).and_then(|h| h.checked_add(len))
        {
            let h = end - len;
            let in_window = w.is_some_and(|(b, e)| h < e && b < end);
            if end <= l.task_size
                && h >= l.mmap_min_addr
                && !in_window
                && self.tree.is_free(h, end)
                && self.gap_limit(h, len).is_none()
            {
                return Some(h);
            }
        }
        let q = GapQuery { exclude: w, ..GapQuery::new(l.mmap_min_addr, l.mmap_base, len, Dir::Highest) };
        // Linux (6.7 on, `thp_get_unmapped_area`): an anonymous mapping with no hint whose
        // length is a multiple of 2 MiB is 2 MiB-aligned when possible, so it can be promoted to
        // blocks.
        let thp = (hint == 0 && len.is_multiple_of(BLOCK_2M))
            .then(|| self.below_stack_gaps(GapQuery { align: BLOCK_2M, ..q }))
            .flatten();
        // The plain top-down search teaches the tree where it ended, for the next one; a place
        // within the guard gap of a mapping that grows down is searched again below the gap,
        // by a narrowed search that teaches nothing (a hint is learnt from plain searches only).
        thp.or_else(|| {
            let fit = self.tree.find_fit(&q)?;
            if self.gap_limit(fit.at, len).is_none() {
                self.tree.learn(&q, fit);
                return Some(fit.at);
            }
            self.below_stack_gaps(q)
        })
        .or_else(|| {
            let q =
                GapQuery { exclude: w, ..GapQuery::new(l.unmapped_base(), l.task_size, len, Dir::Lowest) };
            self.tree.find_gap(&q).filter(|&at| self.gap_limit(at, len).is_none())
        })
    }

    /// If `len` bytes at `at` (free) would end within the guard gap below a mapping that grows
    /// down, the highest end a placement may have there (Linux's `vm_start_gap`).
    fn gap_limit(&self, at: u64, len: u64) -> Option<u64> {
        let end = at.checked_add(len)?;
        let next = self.tree.first_ending_after(end.checked_sub(1)?)?;
        let limit = super::stack::start_gap(next);
        (end > limit).then_some(limit)
    }

    /// The highest place `q` (top-down) finds that keeps clear of every guard gap, lowering its
    /// bound below each gap it meets.
    fn below_stack_gaps(&self, mut q: GapQuery) -> Option<u64> {
        loop {
            let at = self.tree.find_gap(&q)?;
            match self.gap_limit(at, q.len) {
                None => return Some(at),
                Some(limit) if limit < q.hi => q.hi = limit,
                Some(_) => return None,
            }
        }
    }

    /// Where a code mapping goes, aligned to `align` (a page for `mmap`): near a hint inside the
    /// window ([`VmMap::place_near_hint`]), else the window's lowest fit, else outside on a
    /// range that crosses no 1 GiB line. (address, outside the window).
    pub(super) fn place_code(&mut self, hint: u64, len: u64, align: u64) -> Result<(u64, bool), Errno> {
        let l = self.layout;
        let window = self.ensure_window();
        if let Some(at) = self.place_near_hint(hint, len) {
            return Ok((at, false));
        }
        if let Some(w) = window
            && let Some(a) = self.lowest_code_fit(w, len, align)
        {
            return Ok((a, false));
        }
        if self.window.strict {
            return Err(Errno::ENOMEM);
        }
        let w = self.window_range();
        let q = GapQuery {
            exclude: w,
            no_cross: Some(GIB),
            align,
            ..GapQuery::new(l.mmap_min_addr, l.mmap_base, len, Dir::Highest)
        };
        let a = self.tree.find_gap(&q).or_else(|| {
            let q = GapQuery { dir: Dir::Lowest, lo: l.unmapped_base(), hi: l.task_size, ..q };
            self.tree.find_gap(&q)
        });
        a.map(|a| (a, true)).ok_or(Errno::ENOMEM)
    }

    /// `mmap(addr, len, prot, flags, fd, offset)` for anonymous memory, as Linux 6.x on arm64
    /// answers it (see the module documentation for placement). The kernel unmaps
    /// [`Mapped::replaced`] and records the new mapping; pages are faulted in on demand and read
    /// zero.
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` offset not page-aligned (arm64 checks it first); `EBADF` file
    /// mapping with `fd < 0`; `ENOMEM` `MAP_HUGETLB` (no huge-page pool); `EINVAL` zero `len`;
    /// `ENODEV` a file mapping (only anonymous memory is supported; the kernel answers `EBADF`
    /// first for an fd that is not open); `ENOMEM` `len` overflowing when rounded up, or too
    /// many mappings; `EOVERFLOW` offset plus length overflowing; `ENOMEM` `len` larger than the
    /// address space, a fixed range past `TASK_SIZE`, or no free gap for data; `EINVAL` fixed
    /// address not page-aligned; `EPERM` fixed address below `mmap_min_addr`; `EINVAL` no or an
    /// unknown mapping type (`MAP_SHARED_VALIDATE` included, as Linux for anonymous memory), or
    /// `MAP_SHARED | MAP_GROWSDOWN`; `ENOMEM` no free gap for code (strict mode: no room in the
    /// window); `EEXIST` `MAP_FIXED_NOREPLACE` over any mapped byte; `EACCES` writable and
    /// executable (W^X), or an executable/`MAP_CODE` `MAP_FIXED` mapping outside the code window
    /// in strict mode; `ENOMEM` past `RLIMIT_AS`/`RLIMIT_DATA`, a `MAP_FIXED` that would split a
    /// mapping at `vm.max_map_count`, one accountable mapping larger than RAM (the heuristic
    /// overcommit), or no kernel memory for the bookkeeping. Unknown `prot` bits are ignored,
    /// as Linux does (`PROT_MTE` and `PROT_BTI` too on a CPU without the feature).
    pub fn mmap(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        flags: u64,
        fd: i32,
        offset: u64,
    ) -> Result<Mapped, Errno> {
        if offset & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let anon = flags & MAP_ANONYMOUS != 0;
        if !anon && fd < 0 {
            return Err(Errno::EBADF);
        }
        if anon && flags & MAP_HUGETLB != 0 {
            return Err(Errno::ENOMEM);
        }
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if !anon {
            return Err(Errno::ENODEV);
        }
        let fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0;
        let hint = if fixed { addr } else { round_hint_to_min(addr, self.layout.mmap_min_addr) };
        let asked = len;
        let len = page_up(len).filter(|&l| l != 0).ok_or(Errno::ENOMEM)?;
        if (offset / PAGE).checked_add(len / PAGE).is_none() {
            return Err(Errno::EOVERFLOW);
        }
        if self.tree.len() > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let prot_v = Prot::from_bits_truncate(prot);
        let code = prot_v.exec() || flags & MAP_CODE != 0;
        // Linux checks the mapping type after get_unmapped_area; it is checked here before the
        // code window is searched (or placed), whose strict-mode ENOMEM is this kernel's own and
        // must not hide Linux's EINVAL.
        let mapping_type = match flags & MAP_TYPE {
            MAP_SHARED if flags & MAP_GROWSDOWN != 0 => Err(Errno::EINVAL),
            MAP_SHARED => Ok(VmaFlags::SHARED),
            MAP_PRIVATE => Ok(VmaFlags::empty()),
            _ => Err(Errno::EINVAL),
        };
        // get_unmapped_area
        let l = self.layout;
        if len > l.task_size - l.mmap_min_addr {
            return Err(Errno::ENOMEM);
        }
        let (at, outside) = if fixed {
            if hint > l.task_size - len {
                return Err(Errno::ENOMEM);
            }
            if hint & (PAGE - 1) != 0 {
                return Err(Errno::EINVAL);
            }
            if hint < l.mmap_min_addr {
                return Err(Errno::EPERM);
            }
            if code {
                mapping_type?;
                self.ensure_window();
            }
            (hint, code && !self.inside_window(hint, hint + len))
        } else if code {
            mapping_type?;
            self.place_code(hint, len, PAGE)?
        } else if loader_reservation(hint, asked, prot_v, flags)
            || jit_buffer(hint, len, prot_v, flags, self.window.size)
        {
            (self.place_reservation(len).ok_or(Errno::ENOMEM)?, false)
        } else if prot_v.bits() == 0 && self.free_in_window(hint, len) {
            // A free PROT_NONE hint in the window reserves address space (Chez Scheme's
            // `fill-below!` takes everything below 4 GiB this way), which is no JIT's area
            // (V8's code range hints at occupied text; LuaJIT's area is read-write): it stays
            // out, so that the code that comes later finds the window.
            (self.place_data_plain(hint, len).ok_or(Errno::ENOMEM)?, false)
        } else {
            (self.place_data(hint, len).ok_or(Errno::ENOMEM)?, false)
        };
        if flags & MAP_FIXED_NOREPLACE != 0 && !self.tree.is_free(at, at + len) {
            return Err(Errno::EEXIST);
        }
        let mut vflags = mapping_type?;
        if prot_v.write() && prot_v.exec() && self.refuses_wx() {
            return Err(Errno::EACCES);
        }
        if fixed && outside && self.window.strict {
            return Err(Errno::EACCES);
        }
        if flags & MAP_CODE != 0 {
            vflags = vflags.union(VmaFlags::CODE);
        }
        if flags & MAP_OBJECT != 0 {
            vflags = vflags.union(VmaFlags::OBJECT);
        }
        if flags & (MAP_GROWSDOWN | MAP_STACK) != 0 {
            vflags = vflags.union(VmaFlags::STACK);
        }
        if flags & MAP_GROWSDOWN != 0 {
            vflags = vflags.union(VmaFlags::GROWSDOWN);
        }
        if flags & MAP_NOMAYWRITE != 0 {
            vflags = vflags.union(VmaFlags::NOMAYWRITE);
        }
        // mmap_region: a MAP_FIXED over a sealed mapping is refused before anything else.
        if flags & MAP_FIXED != 0 {
            self.refuse_sealed(at, at + len)?;
        }
        // mmap_region: the limits count what a MAP_FIXED replaces as given back.
        let data = is_data(prot_v, vflags);
        if !self.may_expand(data, len) {
            let replaced: u64 = self.mappings_in(at, at + len).map(|v| v.len()).sum();
            if !self.may_expand(data, len - replaced) {
                return Err(Errno::ENOMEM);
            }
        }
        if self.punch_exceeds_count(at, at + len) {
            return Err(Errno::ENOMEM);
        }
        if accountable(prot_v, vflags, flags & MAP_NORESERVE != 0) && !self.enough_memory(len) {
            return Err(Errno::ENOMEM);
        }
        self.reserve()?;
        // Only `MAP_FIXED` may land on mappings: every other placement (a free hint, a gap
        // search, `MAP_FIXED_NOREPLACE` after its check) is free, and looking costs a descent.
        let replaced = if flags & MAP_FIXED != 0 { self.remove_range(at, at + len)? } else { Pieces::new() };
        self.add_merge(Vma {
            start: at,
            end: at + len,
            prot: prot_v,
            flags: vflags,
            advice: Advice::Normal,
            name: AnonName::NONE,
        });
        if outside {
            self.window.placed_outside += 1;
        }
        Ok(Mapped {
            addr: at,
            len,
            prot: prot_v,
            replaced,
            populate: flags & (MAP_POPULATE | MAP_LOCKED) != 0,
            outside_window: outside,
        })
    }

    /// Maps `[start, start + len)` for the kernel itself (the executable's segments, the initial
    /// stack), replacing what is there, with no placement policy. W^X still applies.
    ///
    /// # Errors
    /// `EINVAL` unaligned or empty; `ENOMEM` outside `[mmap_min_addr, TASK_SIZE)`; `EACCES`
    /// writable and executable without the opt-out.
    pub fn map_kernel(&mut self, start: u64, len: u64, prot: Prot, flags: VmaFlags) -> Result<Pieces, Errno> {
        if start & (PAGE - 1) != 0 || len == 0 || len & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let end = start.checked_add(len).ok_or(Errno::ENOMEM)?;
        if start < self.layout.mmap_min_addr || end > self.layout.task_size {
            return Err(Errno::ENOMEM);
        }
        if prot.write() && prot.exec() && self.refuses_wx() {
            return Err(Errno::EACCES);
        }
        self.reserve()?;
        let replaced = self.remove_range(start, end)?;
        self.add_merge(Vma { start, end, prot, flags, advice: Advice::Normal, name: AnonName::NONE });
        Ok(replaced)
    }

    /// `munmap(addr, len)`: removes every mapped page of the range (holes are fine). Returns the
    /// removed pieces, in address order, for the kernel to unmap.
    ///
    /// # Errors
    /// `EINVAL` when `addr` is not page-aligned, `len` is zero, or the range leaves the address
    /// space; `ENOMEM` when it would split a mapping in two at `vm.max_map_count` (Linux lets
    /// the count pass the limit only through `mmap`), or no kernel memory for the bookkeeping.
    pub fn munmap(&mut self, addr: u64, len: u64) -> Result<Pieces, Errno> {
        let ts = self.layout.task_size;
        if addr & (PAGE - 1) != 0 || addr > ts || len > ts - addr {
            return Err(Errno::EINVAL);
        }
        let end = addr + page_up(len).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Err(Errno::EINVAL);
        }
        if self.punch_exceeds_count(addr, end) {
            return Err(Errno::ENOMEM);
        }
        self.refuse_sealed(addr, end)?;
        self.reserve()?;
        self.remove_range(addr, end)
    }
}

/// Linux's `round_hint_to_min`: the hint rounded down to a page; a non-zero hint below
/// `mmap_min_addr` becomes `mmap_min_addr`.
fn round_hint_to_min(hint: u64, min: u64) -> u64 {
    let h = page_down(hint);
    if h != 0 && h < min { page_up(min).unwrap_or(min) } else { h }
}
