//! `mremap`: the area algebra of Linux 6.1's `mm/mremap.c` (`sys_mremap`, `mremap_to`,
//! `vma_to_resize`, `move_vma`), with its errno values in its order.
//!
//! Why a module of its own: `mremap` is the one call that moves an area, so it is the one call
//! whose table effect is neither "unmap" nor "change in place" but "move these entries there";
//! [`Remapped`] says exactly that and the user-memory layer applies it without copying a byte.
//! Placement follows the rest of [`VmMap`]: a moved code area (executable or `MAP_CODE`) is
//! placed with the code window's placement, a data area never lands in the window, and growth
//! in place obeys the same rule (a data area does not grow into the window, a code area inside
//! the window does not grow out of it).
//!
//! Differences from Linux 6.1, on purpose:
//! - `old_len == 0` on shared memory (Linux's "duplicate a shared mapping": a second mapping of
//!   the same pages, `new_len` long, the old one kept; `EINVAL` for a private mapping, as Linux)
//!   is done as Linux does it for a memory object (a memfd, a file: [`Remapped::duplicated`]);
//!   shared anonymous memory here has no object behind it, so the new mapping shares the pages
//!   the old mapping holds from `addr` on, and its part past the old mapping's end is fresh
//!   shared memory (Linux: the object's pages there, or `SIGBUS` past its size);
//! - `MREMAP_DONTUNMAP` is refused with `EINVAL` on shared anonymous memory (Linux 5.13+ allows
//!   it, keeping the source mapped to the same shared object); private anonymous memory, the
//!   only other kind here, is accepted as in Linux;
//! - no `RLIMIT_MEMLOCK` check (`mlock_future_check`); `RLIMIT_AS`/`RLIMIT_DATA` and the
//!   heuristic overcommit are checked as Linux checks them (growth, `MREMAP_DONTUNMAP`'s copy).

use alloc::vec::Vec;

use super::{VmMap, accountable, is_data, page_up};
use crate::vm::{Errno, PAGE, Vma, VmaFlags};

pub use linux_abi::mman::{MREMAP_DONTUNMAP, MREMAP_FIXED, MREMAP_MAYMOVE};

/// Page-table entries to move: every leaf of `[from, from + len)` goes to the same offset from
/// `to`, frames and all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// Source start.
    pub from: u64,
    /// Destination start.
    pub to: u64,
    /// Bytes of the source moved (the old length, or the new one when the call shrank).
    pub len: u64,
    /// The moved area asked for single pages (`MADV_NOHUGEPAGE`): map the entries as pages.
    pub pages_only: bool,
}

/// What a successful `mremap` did to the areas; the table effects to apply, in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remapped {
    /// The address to return.
    pub addr: u64,
    /// Ranges removed from the map (a `MREMAP_FIXED` target, a shrunk tail): unmap them and
    /// free their frames.
    pub unmapped: Vec<(u64, u64)>,
    /// The entries to move, when the area moved.
    pub moved: Option<Move>,
    /// A grown part of a locked (not on-fault) area, to populate as Linux does after the call.
    pub populate: Option<(u64, u64)>,
    /// `old_len == 0` of a shared mapping: the new area at `to` maps the same pages as the old
    /// one from `from` on (`len`: the part of the new area the old mapping covers); the old
    /// area stays.
    pub duplicated: Option<Move>,
}

/// A refused `mremap`: its errno, and the ranges it had already removed from the map (unmap
/// them and free their frames, as for [`Remapped::unmapped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The call's error.
    pub errno: Errno,
    /// Ranges removed before the call failed.
    pub unmapped: Vec<(u64, u64)>,
}

/// Linux's `PAGE_ALIGN`, wrapping as it does (a length within a page of 2^64 becomes 0).
const fn page_align_wrapping(x: u64) -> u64 {
    x.wrapping_add(PAGE - 1) & !(PAGE - 1)
}

impl VmMap {
    /// `mremap(addr, old_len, new_len, flags, new_addr)`, as Linux 6.1 (module documentation).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` unknown flags, `MREMAP_FIXED` or `MREMAP_DONTUNMAP` without
    /// `MREMAP_MAYMOVE`, `MREMAP_DONTUNMAP` with `old_len != new_len`, `addr` not page-aligned,
    /// `new_len` rounding to 0; `EFAULT` no mapping contains `addr`. Then for a move to a given
    /// place (`MREMAP_FIXED` or `MREMAP_DONTUNMAP`): `EINVAL` `new_addr` not page-aligned or the
    /// new range past `TASK_SIZE`, or the two ranges overlapping; `ENOMEM` too many mappings;
    /// (`MREMAP_FIXED` unmaps the target here). Resizing: `EINVAL` `old_len == 0` of a private
    /// mapping, or `MREMAP_DONTUNMAP` on shared memory; `EFAULT` the old range runs past its mapping's end;
    /// `ENOMEM` no room to grow in place and no `MREMAP_MAYMOVE`, no free range to move to, or
    /// too many mappings; `EPERM` a fixed target below `mmap_min_addr`; `EACCES` a code area
    /// moved outside the code window in strict mode. A shrink (`new_len <= old_len` without
    /// `MREMAP_FIXED`/`MREMAP_DONTUNMAP`) only unmaps the tail and always returns `addr` when
    /// the lengths are equal.
    pub fn mremap(
        &mut self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
    ) -> Result<Remapped, Errno> {
        self.mremap_gated(addr, old_len, new_len, flags, new_addr, &mut |_| Ok(())).map_err(|r| r.errno)
    }

    /// [`mremap`](Self::mremap), asking `ready` before a move changes anything: the caller
    /// readies what moving the pages will need (the page tables at the destination), so that
    /// once the source is gone the move cannot fail half-way. An error from `ready` is the
    /// call's, with nothing changed but what Linux's `mremap_to` removes before it can fail.
    ///
    /// # Errors
    /// As [`mremap`](Self::mremap), and `ready`'s, with the ranges a refused move to a given
    /// place had already removed (its `MREMAP_FIXED` target, the tail of a shrunk source, as
    /// Linux unmaps them first): the caller unmaps them all the same.
    pub fn mremap_gated(
        &mut self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
        ready: &mut dyn FnMut(&Move) -> Result<(), Errno>,
    ) -> Result<Remapped, Refused> {
        let mut out = Remapped { addr, unmapped: Vec::new(), moved: None, populate: None, duplicated: None };
        match self.remap(addr, old_len, new_len, flags, new_addr, &mut out, ready) {
            Ok(()) => Ok(out),
            Err(errno) => Err(Refused { errno, unmapped: out.unmapped }),
        }
    }

    /// [`mremap_gated`](Self::mremap_gated) filling `out`.
    #[allow(clippy::too_many_arguments)]
    fn remap(
        &mut self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
        out: &mut Remapped,
        ready: &mut dyn FnMut(&Move) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let maymove = flags & MREMAP_MAYMOVE != 0;
        if flags & !(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP) != 0
            || (flags & MREMAP_FIXED != 0 && !maymove)
            || (flags & MREMAP_DONTUNMAP != 0 && (!maymove || old_len != new_len))
            || addr & (PAGE - 1) != 0
        {
            return Err(Errno::EINVAL);
        }
        let (old_len, new_len) = (page_align_wrapping(old_len), page_align_wrapping(new_len));
        if new_len == 0 {
            return Err(Errno::EINVAL);
        }
        self.tree.find(addr).ok_or(Errno::EFAULT)?;
        if self.sealed_at(addr) {
            return Err(Errno::EPERM);
        }
        if flags & (MREMAP_FIXED | MREMAP_DONTUNMAP) != 0 {
            return self.mremap_to(addr, old_len, new_addr, new_len, flags, out, ready);
        }
        if old_len >= new_len {
            // Always allowed: unmap the tail. A failed unmap matters only when there is one.
            match addr.checked_add(new_len).map(|s| self.munmap(s, old_len - new_len)) {
                Some(Ok(removed)) => out.unmapped.extend(removed.iter().map(|v| (v.start, v.end))),
                _ if old_len == new_len => {}
                Some(Err(e)) => return Err(e),
                None => return Err(Errno::EINVAL),
            }
            return Ok(());
        }
        let vma = self.vma_to_resize(addr, old_len, new_len, flags)?;
        if old_len == vma.end - addr && self.expandable(&vma, new_len - old_len) {
            let end = vma.end + (new_len - old_len);
            // Linux charges the growth of an accounted area (`security_vm_enough_memory_mm`).
            if accountable(vma.prot, vma.flags, false) && !self.enough_memory(new_len - old_len) {
                return Err(Errno::ENOMEM);
            }
            self.reserve()?;
            self.add_merge(Vma { start: vma.end, end, ..vma });
            out.populate = locked_populate(&vma, vma.end, end);
            return Ok(());
        }
        if !maymove {
            return Err(Errno::ENOMEM);
        }
        let to = self.place_like(&vma, 0, new_len, false)?;
        self.move_vma(vma, addr, old_len, new_len, to, flags, out, ready)
    }

    /// Linux's `mremap_to`: a move to `new_addr` (`MREMAP_FIXED`) or near it (a hint, with
    /// `MREMAP_DONTUNMAP` alone).
    #[allow(clippy::too_many_arguments)]
    fn mremap_to(
        &mut self,
        addr: u64,
        mut old_len: u64,
        new_addr: u64,
        new_len: u64,
        flags: u64,
        out: &mut Remapped,
        ready: &mut dyn FnMut(&Move) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let ts = self.layout.task_size;
        if new_addr & (PAGE - 1) != 0 || new_len > ts || new_addr > ts - new_len {
            return Err(Errno::EINVAL);
        }
        // The ranges must not overlap (computed wide: `addr + old_len` may pass 2^64).
        let (a, o, n, l) = (u128::from(addr), u128::from(old_len), u128::from(new_addr), u128::from(new_len));
        if a + o > n && n + l > a {
            return Err(Errno::EINVAL);
        }
        // Both areas may be split in three before the move: Linux keeps four below the limit.
        if self.tree.len() + 2 >= self.layout.max_map_count.saturating_sub(3) {
            return Err(Errno::ENOMEM);
        }
        let fixed = flags & MREMAP_FIXED != 0;
        if fixed {
            let removed = self.munmap(new_addr, new_len)?;
            out.unmapped.extend(removed.iter().map(|v| (v.start, v.end)));
        }
        if old_len > new_len {
            let removed = self.munmap(addr + new_len, old_len - new_len)?;
            out.unmapped.extend(removed.iter().map(|v| (v.start, v.end)));
            old_len = new_len;
        }
        let vma = self.vma_to_resize(addr, old_len, new_len, flags)?;
        // MREMAP_DONTUNMAP keeps the source: the copy is new address space (`may_expand_vm`).
        if flags & MREMAP_DONTUNMAP != 0 && !self.may_expand(is_data(vma.prot, vma.flags), old_len) {
            return Err(Errno::ENOMEM);
        }
        let to = self.place_like(&vma, new_addr, new_len, fixed)?;
        self.move_vma(vma, addr, old_len, new_len, to, flags, out, ready)
    }

    /// Linux's `vma_to_resize`: the mapping containing `addr`, if the old range may be resized
    /// (or moved) from it.
    fn vma_to_resize(&self, addr: u64, old_len: u64, new_len: u64, flags: u64) -> Result<Vma, Errno> {
        let vma = *self.tree.find(addr).ok_or(Errno::EFAULT)?;
        let shared = vma.flags.contains(VmaFlags::SHARED);
        if (old_len == 0 && !shared) || (flags & MREMAP_DONTUNMAP != 0 && shared) {
            return Err(Errno::EINVAL);
        }
        if old_len > vma.end - addr {
            return Err(Errno::EFAULT);
        }
        if new_len == old_len {
            return Ok(vma);
        }
        if (addr / PAGE).checked_add(new_len / PAGE).is_none() {
            return Err(Errno::EINVAL);
        }
        if !self.may_expand(is_data(vma.prot, vma.flags), new_len - old_len) {
            return Err(Errno::ENOMEM);
        }
        Ok(vma)
    }

    /// Linux's `vma_expandable`: `delta` bytes after `vma` are free and inside the address
    /// space, and growing keeps the area on its side of the code window.
    fn expandable(&self, vma: &Vma, delta: u64) -> bool {
        let Some(end) = vma.end.checked_add(delta).filter(|&e| e <= self.layout.task_size) else {
            return false;
        };
        if !self.tree.is_free(vma.end, end) {
            return false;
        }
        match self.window_range() {
            None => true,
            Some((b, e)) if is_code(vma) && b <= vma.start && vma.end <= e => end <= e,
            Some((b, e)) if !is_code(vma) => end <= b || vma.end >= e,
            Some(_) => true,
        }
    }

    /// Where `len` bytes of an area like `vma` go: exactly `hint` when `fixed` (already
    /// unmapped), else placed as `mmap` places code or data, with `hint` as the hint.
    fn place_like(&mut self, vma: &Vma, hint: u64, len: u64, fixed: bool) -> Result<u64, Errno> {
        let code = is_code(vma);
        if fixed {
            if hint < self.layout.mmap_min_addr {
                return Err(Errno::EPERM);
            }
            if code {
                self.ensure_window();
                if !self.inside_window(hint, hint + len) {
                    if self.window.strict {
                        return Err(Errno::EACCES);
                    }
                    self.window.placed_outside += 1;
                }
            }
            return Ok(hint);
        }
        let hint = if hint != 0 && hint < self.layout.mmap_min_addr {
            page_up(self.layout.mmap_min_addr).unwrap_or(hint)
        } else {
            hint
        };
        if code {
            let (at, outside) = self.place_code(hint, len, PAGE)?;
            if outside {
                self.window.placed_outside += 1;
            }
            Ok(at)
        } else {
            self.place_data(hint, len).ok_or(Errno::ENOMEM)
        }
    }

    /// Linux's `move_vma`: a new area at `to` with the old one's attributes; the old range goes
    /// (or, with `MREMAP_DONTUNMAP`, stays, unlocked, its pages to be moved away).
    #[allow(clippy::too_many_arguments)]
    fn move_vma(
        &mut self,
        vma: Vma,
        from: u64,
        old_len: u64,
        new_len: u64,
        to: u64,
        flags: u64,
        out: &mut Remapped,
        ready: &mut dyn FnMut(&Move) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        if self.tree.len() >= self.layout.max_map_count.saturating_sub(3) {
            return Err(Errno::ENOMEM);
        }
        if old_len == 0 {
            // Linux's copy_vma of nothing moved: the old area stays, the new one maps its pages.
            self.reserve()?;
            self.add_merge(Vma { start: to, end: to + new_len, ..vma });
            out.addr = to;
            let len = new_len.min(vma.end - from);
            let pages_only = vma.flags.contains(VmaFlags::NOHUGEPAGE);
            out.duplicated = Some(Move { from, to, len, pages_only });
            out.populate = locked_populate(&vma, to, to + new_len);
            return Ok(());
        }
        let moved = Move { from, to, len: old_len, pages_only: vma.flags.contains(VmaFlags::NOHUGEPAGE) };
        if flags & MREMAP_DONTUNMAP != 0 {
            if accountable(vma.prot, vma.flags, false) && !self.enough_memory(new_len) {
                return Err(Errno::ENOMEM);
            }
            ready(&moved)?;
            // The old range lies in the one mapping `vma`: one piece.
            let piece = vma.clip(from, from + old_len);
            let unlocked = VmaFlags::LOCKED.union(VmaFlags::LOCKONFAULT);
            self.reserve()?;
            self.rewrite(&[piece], |p| Vma { flags: p.flags.difference(unlocked), ..*p });
        } else {
            ready(&moved)?;
            self.reserve()?;
            self.remove_range(from, from + old_len)?;
        }
        self.reserve()?;
        self.add_merge(Vma { start: to, end: to + new_len, ..vma });
        out.addr = to;
        out.moved = Some(moved);
        out.populate = locked_populate(&vma, to + old_len, to + new_len);
        Ok(())
    }
}

/// Whether an area is code for placement: executable or made with `MAP_CODE`.
fn is_code(vma: &Vma) -> bool {
    vma.prot.exec() || vma.flags.contains(VmaFlags::CODE)
}

/// The grown part `[start, end)` of a locked area that Linux populates after the call (none for
/// an on-fault lock or an empty range).
fn locked_populate(vma: &Vma, start: u64, end: u64) -> Option<(u64, u64)> {
    let locked = vma.flags.contains(VmaFlags::LOCKED) && !vma.flags.contains(VmaFlags::LOCKONFAULT);
    (locked && start < end).then_some((start, end))
}
