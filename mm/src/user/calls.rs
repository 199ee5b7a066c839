//! The table effects of `mremap`, `mincore`, `msync` and the `mlock` family (the area algebra
//! is [`crate::vm::map::remap`] and [`crate::vm::map::lock`]).
//!
//! Why `mremap` moves entries rather than data: the frames already hold the data, so a move is
//! the same frames mapped at the new address (invalid to valid: no TLBI) and the old range's
//! leaves removed with one gathered flush. No data frame is allocated and no byte copied. A
//! range of pages moves in one pass over the source's last-level tables (Linux's `move_ptes`:
//! `AddressSpace::move_pages`); a range holding a block or cutting a contiguous run at an end
//! moves by extents (the space reports physically contiguous leaves as one extent, and mapping
//! an extent uses the largest leaves its alignment allows, so a 2 MiB block stays one where the
//! new address keeps the alignment), mapped first and then unmapped from the source.

use alloc::vec::Vec;

use super::object::Backing;
use super::{Access, Fault, UserFrames, UserMemory};
use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::Attributes;
use crate::paging::{Constraints, Translation};
use crate::space::{FlushTargets, Unmapped};
use crate::tlb::TlbHardware;
use crate::vm::map::lock::{MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT, MLOCK_ONFAULT, lock_flags};
use crate::vm::map::remap::Move;
use crate::vm::{Errno, VmaFlags};

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `mremap(addr, old_len, new_len, flags, new_addr)`: returns the (new) address. Removed
    /// ranges are unmapped and their frames freed after the flush; a move takes the source's
    /// entries with one flush and maps the same frames at the destination; a locked area that
    /// grew is populated.
    ///
    /// # Errors
    ///
    /// As [`crate::vm::VmMap::mremap`]; `ENOMEM`, with nothing changed, when the table frames
    /// the destination needs cannot be had: they are reserved once the destination is decided
    /// and before the source changes (Linux's `move_page_tables` moves back what it moved
    /// instead), so a move never loses a page.
    pub fn mremap(
        &mut self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: u64,
        new_addr: u64,
    ) -> Result<u64, Errno> {
        // The source's extents, gathered in the gate below, before anything changes: a heap
        // that runs out there refuses the call with nothing moved.
        let mut extents: Vec<Unmapped> = Vec::new();
        let mut short = false;
        // The guard markers a move takes along, read before anything changes.
        let guards = match addr.checked_add(old_len.next_multiple_of(PAGE_SIZE)) {
            Some(end)
                if addr.is_multiple_of(PAGE_SIZE) && flags & crate::vm::map::remap::MREMAP_MAYMOVE != 0 =>
            {
                self.guards_in(addr, end)?
            }
            _ => Vec::new(),
        };
        self.backings.reserve(2)?;
        // The tables the destination needs, counted for the source's extents and reserved once
        // the area map has decided the destination, before anything changes.
        let mut tables = None;
        // A target that holds something now (only MREMAP_FIXED's can: elsewhere the area map
        // has it free) is unmapped before the move, which may free its tables: the count then
        // assumes it has none. Asked of the area map before the call (an area there may hold
        // pages or guard markers; a free range holds neither), not of the tables.
        let fixed = flags & crate::vm::map::remap::MREMAP_FIXED != 0;
        let target_end =
            new_addr.saturating_add(new_len.checked_next_multiple_of(PAGE_SIZE).unwrap_or(u64::MAX));
        let fresh = fixed && self.vm.mappings_in(new_addr, target_end).next().is_some();
        let Self { vm, space, .. } = self;
        // Whether the move goes entry by entry in one pass (`AddressSpace::move_pages`), which
        // needs no extents: every range but one holding a block or cutting a run at an end.
        let mut in_one_pass = false;
        let r = vm.mremap_gated(addr, old_len, new_len, flags, new_addr, &mut |m: &Move| {
            if let Some(count) = space.tables_to_move(VirtAddr(m.from), VirtAddr(m.to), m.len, fresh) {
                tables = Some(space.reserve_tables(count).map_err(|_| Errno::ENOMEM)?);
                in_one_pass = true;
                return Ok(());
            }
            space.extents(VirtAddr(m.from), m.len, |u| {
                short = short || crate::vm::fallible::push(&mut extents, u).is_err();
            });
            if short {
                return Err(Errno::ENOMEM);
            }
            let pieces = extents.iter().map(|u| (VirtAddr(u.va.0 - m.from + m.to), u.pa, u.size));
            let count = space.tables_to_map(pieces, move_constraints(m), fresh);
            tables = Some(space.reserve_tables(count).map_err(|_| Errno::ENOMEM)?);
            Ok(())
        });
        let r = match r {
            Ok(r) => r,
            Err(refused) => {
                if let Some(t) = tables {
                    self.space.release_tables(t);
                }
                for &(start, end) in &refused.unmapped {
                    self.unmap_range(start, end);
                    self.backings.remove(start, end, drop);
                }
                return Err(refused.errno);
            }
        };
        // What the call unmapped at the destination (MREMAP_FIXED's target) goes first; the
        // rest (a shrunk source's tail) after the move, whose table count an unmap freeing a
        // table it shares with the destination would otherwise falsify.
        let target = r.moved.map_or((0, 0), |m| (m.to, m.to + m.len));
        let at_target = |&&(s, e): &&(u64, u64)| s < target.1 && e > target.0;
        for &(start, end) in r.unmapped.iter().filter(at_target) {
            self.unmap_range(start, end);
            self.backings.remove(start, end, drop);
        }
        // Object-backed ranges follow the move (kept at the source too with MREMAP_DONTUNMAP)
        // and grow with the area (the next pages of the object).
        let (old_end, new_end) = match r.moved {
            Some(m) => {
                let keep = flags & crate::vm::map::remap::MREMAP_DONTUNMAP != 0;
                // Best effort: without heap for the list, an access to the moved range is
                // SIGBUS (it is still a valid area).
                let _ = self.backings.relocate(m.from, m.len, m.to, keep);
                (m.to + m.len, r.addr + new_len.next_multiple_of(PAGE_SIZE))
            }
            None => {
                (r.addr + old_len.next_multiple_of(PAGE_SIZE), r.addr + new_len.next_multiple_of(PAGE_SIZE))
            }
        };
        if new_end > old_end && r.duplicated.is_none() {
            self.backings.extend(old_end, new_end);
        }
        let mut tables = tables.unwrap_or_default();
        let moved = match (r.moved, r.duplicated) {
            (Some(m), _) if in_one_pass => self.move_in_one_pass(m, &mut tables),
            (Some(m), _) => self.move_entries(m, extents, &guards, &mut tables),
            (None, Some(d)) => self.duplicate(d, new_len.next_multiple_of(PAGE_SIZE)),
            (None, None) => Ok(()),
        };
        self.space.release_tables(tables);
        for &(start, end) in r.unmapped.iter().filter(|u| !at_target(u)) {
            self.unmap_range(start, end);
            self.backings.remove(start, end, drop);
        }
        if let Some((start, end)) = r.populate {
            // Linux's mm_populate after the call: best effort.
            let _ = self.populate_locked(start, end);
        }
        moved.map(|()| r.addr)
    }

    /// The most extents unmapping any part of `[addr, addr + len)` can yield: one per leaf
    /// wholly inside, and one per page inside for a leaf the range cuts (a block or run split
    /// at the edge). 0 for a range that is not page-aligned or wraps (mremap refuses it anyway).
    fn extent_bound(&self, addr: u64, len: u64) -> usize {
        let Some(end) = addr.checked_add(len) else { return 0 };
        if !addr.is_multiple_of(PAGE_SIZE) || len == 0 {
            return 0;
        }
        let mut bound = 0usize;
        let _ = self.space.table().walk(VirtAddr(addr), len, |leaf| {
            let (s, e) = (leaf.va.0.max(addr), (leaf.va.0 + leaf.size).min(end));
            let whole = s == leaf.va.0 && e == leaf.va.0 + leaf.size;
            bound += if whole { 1 } else { e.saturating_sub(s).div_ceil(PAGE_SIZE) as usize };
        });
        bound
    }

    /// Moves every page and guard marker of `[m.from, m.from + m.len)` to `m.to` in one pass
    /// over the source's last-level tables, with table frames from `tables` (reserved for it
    /// before the call changed anything) and one flush: Linux's `move_ptes`. For a range
    /// `AddressSpace::tables_to_move` accepted.
    fn move_in_one_pass(&mut self, m: Move, tables: &mut crate::space::TableReserve) -> Result<(), Errno> {
        self.forget_free(m.from, m.from + m.len);
        let moved = self.space.move_pages(tables, VirtAddr(m.from), VirtAddr(m.to), m.len, !m.pages_only);
        debug_assert!(moved.is_ok(), "mremap: the move in one pass failed: {moved:?}");
        moved.map(|_| ()).map_err(|_| Errno::ENOMEM)
    }

    /// Moves every leaf of `[m.from, m.from + m.len)` to `m.to`: the same frames mapped at the
    /// destination first (empty there: no TLBI), with table frames from `tables` (reserved for
    /// the destination before the call changed anything), then the source unmapped with one
    /// flush (its frames are not freed: they are the destination's now), and the `guards` of the
    /// source range (read before the call changed anything) installed at the destination.
    /// Mapping first means no table the count relied on has been freed meanwhile (an unmap
    /// frees the tables it empties, and the source may share tables with the destination).
    ///
    /// `extents` are the source's, gathered (and `tables` counted for them) before the call
    /// changed anything.
    fn move_entries(
        &mut self,
        m: Move,
        mut extents: Vec<Unmapped>,
        guards: &[(u64, u64)],
        tables: &mut crate::space::TableReserve,
    ) -> Result<(), Errno> {
        self.forget_free(m.from, m.from + m.len);
        let constraints = move_constraints(&m);
        let mut lost = false;
        for u in &mut extents {
            let va = VirtAddr(u.va.0 - m.from + m.to);
            if self.space.map_reserved(tables, va, u.pa, u.size, u.attrs, constraints).is_ok() {
                u.size = 0; // mapped: nothing left to do for it
            } else {
                lost = true;
            }
        }
        debug_assert!(!lost, "mremap: the reserved tables did not suffice");
        let result = self.space.unmap(VirtAddr(m.from), m.len, |_| {});
        debug_assert!(result.is_ok(), "mremap: unmap of the source failed: {result:?}");
        // Not reachable with the reservation; were it, a piece that found no place is freed
        // after the flush rather than kept mapped nowhere.
        for u in extents.iter().filter(|u| u.size != 0) {
            for i in 0..u.size / PAGE_SIZE {
                let p = PhysAddr(u.pa.0 + i * PAGE_SIZE);
                if self.is_zero_page(p) {
                    self.zero_pages -= 1;
                } else {
                    self.frames.free(p);
                    self.data_frames -= 1;
                }
            }
        }
        let end = m.from + m.len;
        for &(s, e) in guards.iter().filter(|&&(s, e)| s < end && e > m.from) {
            let (s, e) = (s.max(m.from), e.min(end));
            // The destination is empty there (the guarded pages held no leaf).
            lost |= self.space.install_guards(VirtAddr(s - m.from + m.to), e - s).is_err();
        }
        if lost { Err(Errno::ENOMEM) } else { Ok(()) }
    }

    /// `mremap(addr, 0, new_len)` of a shared mapping: the new area `[d.to, d.to + new_len)` maps
    /// the same pages as the old one from `d.from` on, the old one unchanged. A memory object's
    /// view (a memfd, a file) gets a second range of the object from the same offset: its pages
    /// are found in the object on fault, `SIGBUS` past its end, as Linux. Shared anonymous memory
    /// has no object here, so the old mapping's pages are populated and the same frames mapped
    /// at the new address, one more reference each, as `fork` shares them (the destination is
    /// empty: no TLBI); the rest of the new area is fresh shared memory.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when a page cannot be populated or mapped, or a frame's count cannot be kept
    /// (the new area stays, with the pages mapped so far).
    fn duplicate(&mut self, d: Move, new_len: u64) -> Result<(), Errno> {
        let Some(area) = self.vm.find(d.from).copied() else { return Ok(()) };
        if area.flags.contains(VmaFlags::OBJECT) {
            if let Some(b) = self.backings.at(d.from) {
                let (object, offset) = (b.object.clone(), b.index_of(d.from) * PAGE_SIZE);
                // Room for it was reserved before the call.
                self.backings.insert(Backing { start: d.to, end: d.to + new_len, object, offset });
            }
            return Ok(());
        }
        if super::allows(area.prot, Access::Read) {
            self.populate(d.from, d.from + d.len, Access::Read).map_err(|_| Errno::ENOMEM)?;
        }
        let mut leaves: Vec<(u64, PhysAddr, u64, Attributes)> = Vec::new();
        crate::vm::fallible::reserve(&mut leaves, self.extent_bound(d.from, d.len))?;
        let _ = self.space.table().walk(VirtAddr(d.from), d.len, |leaf| {
            let start = leaf.va.0.max(d.from);
            let end = (leaf.va.0 + leaf.size).min(d.from + d.len);
            if leaves.len() < leaves.capacity() {
                leaves.push((start, leaf.translate(VirtAddr(start)), end - start, leaf.attrs));
            }
        });
        let constraints = if d.pages_only {
            Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS)
        } else {
            Constraints::NO_1G_BLOCKS
        };
        for (va, pa, size, attrs) in leaves {
            for i in 0..size / PAGE_SIZE {
                if !self.frames.share(PhysAddr(pa.0 + i * PAGE_SIZE)) {
                    return Err(Errno::ENOMEM);
                }
                let (v, p) = (va - d.from + d.to + i * PAGE_SIZE, PhysAddr(pa.0 + i * PAGE_SIZE));
                if self.space.map(VirtAddr(v), p, PAGE_SIZE, attrs, constraints).is_err() {
                    self.frames.free(p);
                    return Err(Errno::ENOMEM);
                }
                self.data_frames += 1;
            }
        }
        Ok(())
    }

    /// `mincore`'s per-area step (Linux's `do_mincore`): the residency of up to `out.len()`
    /// pages from `addr` (page-aligned), stopping at the end of the mapping that contains
    /// `addr`: 1 for a page present in the tables, 0 for one never touched or dropped. Returns
    /// how many entries it filled.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when no mapping contains `addr`.
    pub fn mincore(&self, addr: u64, out: &mut [u8]) -> Result<usize, Errno> {
        let vma = self.vm.find(addr).ok_or(Errno::ENOMEM)?;
        let want = (out.len() as u64).saturating_mul(PAGE_SIZE);
        let end = vma.end.min(addr.saturating_add(want));
        let n = ((end - addr) / PAGE_SIZE) as usize;
        out[..n].fill(0);
        let _ = self.space.table().walk(VirtAddr(addr), end - addr, |leaf| {
            let (s, e) = (leaf.va.0.max(addr), (leaf.va.0 + leaf.size).min(end));
            for page in (s..e).step_by(PAGE_SIZE as usize) {
                out[((page - addr) / PAGE_SIZE) as usize] = 1;
            }
        });
        Ok(n)
    }

    /// `msync(addr, len, flags)`: nothing to write back (anonymous memory), so only Linux's
    /// checks.
    ///
    /// # Errors
    ///
    /// As [`crate::vm::VmMap::msync`].
    pub fn msync(&self, addr: u64, len: u64, flags: u64) -> Result<(), Errno> {
        self.vm.msync(addr, len, flags)
    }

    /// `mlock(addr, len)`: locks the areas and populates them.
    ///
    /// # Errors
    ///
    /// As [`mlock2`](Self::mlock2).
    pub fn mlock(&mut self, addr: u64, len: u64) -> Result<(), Errno> {
        self.lock_and_populate(addr, len, VmaFlags::LOCKED)
    }

    /// `mlock2(addr, len, flags)`: `MLOCK_ONFAULT` locks without populating.
    ///
    /// # Errors
    ///
    /// `EINVAL` unknown flags; then as Linux's `do_mlock`: `EINVAL` a wrapping range, `ENOMEM`
    /// unmapped parts (after locking what precedes); populating: `ENOMEM` for a `PROT_NONE`
    /// area, `EAGAIN` when frames run out (Linux's `__mlock_posix_error_return`).
    pub fn mlock2(&mut self, addr: u64, len: u64, flags: u64) -> Result<(), Errno> {
        if flags & !MLOCK_ONFAULT != 0 {
            return Err(Errno::EINVAL);
        }
        self.lock_and_populate(addr, len, lock_flags(flags & MLOCK_ONFAULT != 0))
    }

    /// `munlock(addr, len)`.
    ///
    /// # Errors
    ///
    /// `EINVAL` a wrapping range, `ENOMEM` unmapped parts (after unlocking what precedes).
    pub fn munlock(&mut self, addr: u64, len: u64) -> Result<(), Errno> {
        self.vm.set_lock(addr, len, VmaFlags::empty()).map(|_| ())
    }

    /// `mlockall(flags)`: `MCL_CURRENT` locks (and populates, ignoring failures) every area,
    /// `MCL_FUTURE` every later one (`mmap`, `brk`, `mremap` growth), `MCL_ONFAULT` on fault.
    ///
    /// # Errors
    ///
    /// `EINVAL` no flag, unknown flags, or `MCL_ONFAULT` alone.
    pub fn mlockall(&mut self, flags: u64) -> Result<(), Errno> {
        if flags == 0 || flags & !(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0 || flags == MCL_ONFAULT {
            return Err(Errno::EINVAL);
        }
        let lock = lock_flags(flags & MCL_ONFAULT != 0);
        self.lock_future = (flags & MCL_FUTURE != 0).then_some(lock);
        if flags & MCL_CURRENT != 0 {
            // Linux ignores the errors of both steps (`apply_mlockall_flags`, `mm_populate`).
            let _ = self.vm.set_lock_all(lock);
            self.forget_free(0, u64::MAX);
            let mut cursor = 0;
            loop {
                let Some(v) = self.vm.mappings_in(cursor, u64::MAX).next() else { break };
                cursor = v.end;
                let _ = self.populate_locked(v.start, v.end);
            }
        }
        Ok(())
    }

    /// `munlockall()`: every area unlocked, and later ones are not locked.
    pub fn munlockall(&mut self) {
        self.lock_future = None;
        let _ = self.vm.set_lock_all(VmaFlags::empty());
    }

    /// `mlockall(MCL_FUTURE)` applied to a new area `[start, end)`: locked and populated (best
    /// effort, as Linux's `mmap` of a `VM_LOCKED` area). `MAP_LOCKED` asks the same of one
    /// mapping.
    pub(super) fn lock_new(&mut self, start: u64, end: u64, lock: VmaFlags) {
        if start < end && self.vm.set_lock(start, end - start, lock).is_ok() {
            self.forget_free(start, end);
            let _ = self.populate_locked(start, end);
        }
    }

    fn lock_and_populate(&mut self, addr: u64, len: u64, lock: VmaFlags) -> Result<(), Errno> {
        match self.vm.set_lock(addr, len, lock)? {
            Some((start, end)) => {
                // A locked page is never dropped.
                self.forget_free(start, end);
                self.populate_locked(start, end)
            }
            None => Ok(()),
        }
    }

    /// Linux's `__mm_populate` over `[start, end)` for a lock: each locked area not locked on
    /// fault is faulted in (for writing when private and writable). `ENOMEM` for a `PROT_NONE`
    /// area, `EAGAIN` out of frames (the POSIX errors Linux's `mlock` returns).
    fn populate_locked(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        let mut cursor = start;
        while cursor < end {
            let Some(v) = self.vm.mappings_in(cursor, end).next() else { break };
            cursor = v.end;
            if !v.flags.contains(VmaFlags::LOCKED) || v.flags.contains(VmaFlags::LOCKONFAULT) {
                continue;
            }
            if v.prot.bits() & 0x7 == 0 {
                return Err(Errno::ENOMEM);
            }
            let write = v.prot.write() && !v.flags.contains(VmaFlags::SHARED);
            let access = if write { Access::Write } else { Access::Read };
            let mut page = v.start;
            while page < v.end {
                // As MAP_POPULATE: the machine's last frames stay for everyone's next fault, so
                // a lock larger than what is free fails (EAGAIN) instead of starving them.
                if !self.may_populate() {
                    return Err(Errno::EAGAIN);
                }
                match self.fault_in(page, access) {
                    Ok(next) => page = next,
                    Err(Fault::OutOfMemory) => return Err(Errno::EAGAIN),
                    Err(_) => return Err(Errno::ENOMEM),
                }
            }
        }
        Ok(())
    }
}

/// How a move maps its pages at the destination: as pages only where the area asked for them
/// (`MADV_NOHUGEPAGE`), else the largest leaves the alignment allows (no 1 GiB blocks).
fn move_constraints(m: &Move) -> Constraints {
    if m.pages_only {
        Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS)
    } else {
        Constraints::NO_1G_BLOCKS
    }
}
