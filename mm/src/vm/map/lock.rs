//! The area side of `msync`, `mincore`, and the `mlock` family, as Linux 6.1 (`mm/msync.c`,
//! `mm/mincore.c`, `mm/mlock.c`): range checks and errno values in Linux's order, and the lock
//! flags of the areas ([`VmaFlags::LOCKED`], [`VmaFlags::LOCKONFAULT`]).
//!
//! Why here: these calls decide from the set of areas alone; their table effects (residency
//! read from the tables, population of what a lock covers) belong to the user-memory layer.
//! There is no swap here, so a lock only changes what Linux makes it change in the area map:
//! the pages are populated, `MADV_DONTNEED`/`MADV_FREE`/`MADV_COLD`/`MADV_PAGEOUT` refuse the
//! area, `MS_INVALIDATE` is `EBUSY` on it, and `MREMAP_DONTUNMAP` unlocks the source.
//!
//! Processes here are privileged (Linux with `CAP_IPC_LOCK`): no `RLIMIT_MEMLOCK` check, no
//! `EPERM`.

use super::VmMap;
use crate::vm::{Errno, PAGE, Vma, VmaFlags};

pub use linux_abi::mman::{
    MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT, MLOCK_ONFAULT, MS_ASYNC, MS_INVALIDATE, MS_SYNC,
};

/// Both lock flags: what `munlock` clears.
const LOCK_MASK: VmaFlags = VmaFlags::LOCKED.union(VmaFlags::LOCKONFAULT);

/// The lock flags an `mlock2` flags word asks for.
pub const fn lock_flags(onfault: bool) -> VmaFlags {
    if onfault { LOCK_MASK } else { VmaFlags::LOCKED }
}

impl VmMap {
    /// `msync(addr, len, flags)`. Anonymous memory has nothing to write back: the call only
    /// checks, as Linux does for it.
    ///
    /// # Errors
    /// `EINVAL` unknown flags, `addr` not page-aligned, `MS_ASYNC` with `MS_SYNC`; `ENOMEM`
    /// the rounded range wrapping, or an unmapped part (`MS_ASYNC` alone stops at the first
    /// one); `EBUSY` `MS_INVALIDATE` over a locked mapping. A zero length succeeds.
    pub fn msync(&self, addr: u64, len: u64, flags: u64) -> Result<(), Errno> {
        if flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
            || addr & (PAGE - 1) != 0
            || (flags & MS_ASYNC != 0 && flags & MS_SYNC != 0)
        {
            return Err(Errno::EINVAL);
        }
        let end = addr.wrapping_add(len.wrapping_add(PAGE - 1) & !(PAGE - 1));
        if end < addr {
            return Err(Errno::ENOMEM);
        }
        let mut start = addr;
        let mut unmapped = None;
        for v in self.tree.iter_from(addr).take_while(|v| v.start < end) {
            if start < v.start {
                if flags == MS_ASYNC {
                    return Err(Errno::ENOMEM);
                }
                unmapped = Some(Errno::ENOMEM);
            }
            if flags & MS_INVALIDATE != 0 && v.flags.contains(VmaFlags::LOCKED) {
                return Err(Errno::EBUSY);
            }
            start = v.end;
        }
        if start < end {
            return Err(Errno::ENOMEM);
        }
        unmapped.map_or(Ok(()), Err)
    }

    /// `mincore`'s checks before any lookup: the number of pages of `[addr, addr + len)`.
    ///
    /// # Errors
    /// `EINVAL` `addr` not page-aligned; `ENOMEM` the range leaves the user address space.
    pub fn mincore_pages(&self, addr: u64, len: u64) -> Result<u64, Errno> {
        if addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        if addr.checked_add(len).is_none_or(|e| e > self.layout.task_size) {
            return Err(Errno::ENOMEM);
        }
        Ok(len / PAGE + u64::from(!len.is_multiple_of(PAGE)))
    }

    /// Linux's `do_mlock`/`do_munlock` area step (`apply_vma_lock_flags`): gives every area of
    /// the range (widened to pages) the lock flags `lock` (empty: unlock). Returns the
    /// page-aligned range for the caller to populate (nothing for an unlock).
    ///
    /// # Errors
    /// `EINVAL` the widened range wraps; `ENOMEM` no mapping at its start, or a hole (the areas
    /// before the hole keep their new flags, as in Linux).
    pub fn set_lock(&mut self, addr: u64, len: u64, lock: VmaFlags) -> Result<Option<(u64, u64)>, Errno> {
        let len = len.wrapping_add(addr & (PAGE - 1)).wrapping_add(PAGE - 1) & !(PAGE - 1);
        let start = addr & !(PAGE - 1);
        let end = start.wrapping_add(len);
        if end < start {
            return Err(Errno::EINVAL);
        }
        if end == start {
            return Ok(None);
        }
        self.tree.find(start).ok_or(Errno::ENOMEM)?;
        // Area by area, as Linux's loop (each step reserves what it may insert): the areas
        // before a hole keep their new flags.
        let mut cursor = start;
        while cursor < end {
            let Some(v) = self.tree.find(cursor).copied() else { return Err(Errno::ENOMEM) };
            let piece = v.clip(cursor, end);
            self.relock(piece, lock)?;
            cursor = piece.end;
        }
        Ok((!lock.is_empty()).then_some((start, end)))
    }

    /// `mlockall`/`munlockall`'s area step: every area gets the lock flags `lock` (empty:
    /// unlock).
    ///
    /// # Errors
    /// `ENOMEM` when the kernel heap cannot hold a split (the areas before keep their flags).
    pub fn set_lock_all(&mut self, lock: VmaFlags) -> Result<(), Errno> {
        let mut cursor = 0;
        while let Some(v) = self.tree.iter_from(cursor).next().copied() {
            self.relock(v, lock)?;
            cursor = v.end;
        }
        Ok(())
    }

    /// The first locked area overlapping `[start, end)` (`MADV_DONTNEED` and the other
    /// reclaim advice stop there with `EINVAL`).
    pub fn first_locked(&self, start: u64, end: u64) -> Option<Vma> {
        self.tree
            .iter_from(start)
            .take_while(|v| v.start < end)
            .find(|v| v.flags.contains(VmaFlags::LOCKED))
            .copied()
    }

    /// Gives the piece `p` (of one mapping) the lock flags `lock`, if it has other ones.
    fn relock(&mut self, p: Vma, lock: VmaFlags) -> Result<(), Errno> {
        let set = |p: &Vma| Vma { flags: p.flags.difference(LOCK_MASK).union(lock), ..*p };
        if set(&p) != p {
            self.reserve()?;
            self.rewrite(&[p], set);
        }
        Ok(())
    }
}
