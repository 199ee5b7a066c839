//! `mseal`: sealing mappings against change, as Linux 6.10 (`mm/mseal.c`) and the rules the
//! later kernels settled on (6.12's per-area checks, 6.13's guard regions).
//!
//! A sealed mapping ([`VmaFlags::SEALED`]) keeps its place, size and rights for the rest of the
//! address space's life: what a program seals (a loader's read-only relocations, a JIT's
//! trampolines) cannot be unmapped, moved or made writable again by a later bug that gets to
//! pass arguments to a memory call. Each call that would change a sealed mapping fails with
//! `EPERM`:
//!
//! | call | refused when | what is done before the refusal |
//! | --- | --- | --- |
//! | `munmap`, `brk` shrinking, `mmap(MAP_FIXED)` over it, `mremap` onto it | any page of the range is sealed | nothing |
//! | `mremap` of it (move, grow, shrink) | the mapping at the old address is sealed | nothing |
//! | `mprotect` | an area of the range is sealed | the areas before it change (6.12's `mprotect_fixup`) |
//! | `madvise` `DONTNEED`, `DONTNEED_LOCKED`, `FREE`, `REMOVE`, `DONTFORK`, `WIPEONFORK`, `GUARD_INSTALL` | a sealed area is private anonymous memory without write access (its contents cannot be rewritten, so discarding them is a change) | the areas before it get the advice |
//!
//! Every other advice, faults, `mlock` and fork work as on any mapping; a child inherits the
//! seals (the flag is part of each mapping), and exec starts a new, unsealed address space.
//! Sealing itself needs the whole range mapped (`ENOMEM` for any hole, nothing sealed), and
//! cannot be undone.
//!
//! Linux has no switch for the check: the first seal sets [`VmMap`]'s `sealed`, and until then
//! the calls above skip the search for sealed mappings, so a process that never seals pays one
//! test of a boolean per call.

use super::{VmMap, page_up};
use crate::vm::advice::*;
use crate::vm::{Errno, PAGE, Vma, VmaFlags};

/// Linux's `is_madv_discard`: the advice that `mseal` refuses on a sealed read-only private
/// anonymous mapping (`MADV_GUARD_INSTALL` since Linux 6.13).
fn is_discard(advice: u64) -> bool {
    matches!(
        advice,
        MADV_FREE
            | MADV_DONTNEED
            | MADV_DONTNEED_LOCKED
            | MADV_REMOVE
            | MADV_DONTFORK
            | MADV_WIPEONFORK
            | linux_abi::mman::MADV_GUARD_INSTALL
    )
}

impl Vma {
    /// Whether a seal refuses `advice` on this mapping: it is sealed, the advice discards, and
    /// it is private anonymous memory without write access (Linux's `can_modify_vma_madv` and
    /// `is_ro_anon`: a writable mapping's contents may be discarded, since they could be
    /// overwritten anyway; shared memory and a memory object keep their pages in the object).
    pub(crate) fn seal_refuses(&self, advice: u64) -> bool {
        self.flags.contains(VmaFlags::SEALED)
            && is_discard(advice)
            && !self.prot.write()
            && !self.flags.contains(VmaFlags::SHARED)
            && !self.flags.contains(VmaFlags::OBJECT)
    }
}

impl VmMap {
    /// `mseal(addr, len, flags)` (module documentation).
    ///
    /// # Errors
    /// `EINVAL` for non-zero `flags`, an unaligned `addr`, or a range that wraps; `ENOMEM` when
    /// any page of the range is unmapped (nothing is sealed), or when no kernel memory is left
    /// for the bookkeeping or a split would pass `vm.max_map_count` (the areas before it are
    /// sealed then, as Linux's `vma_modify_flags` fails part way). `len == 0` succeeds.
    pub fn mseal(&mut self, addr: u64, len: u64, flags: u64) -> Result<(), Errno> {
        if flags != 0 || addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = page_up(len).ok_or(Errno::EINVAL)?;
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Ok(());
        }
        if end > self.layout.task_size {
            return Err(Errno::ENOMEM);
        }
        let (mut pieces, hole) = self.select(addr, end, false)?;
        if hole {
            return Err(Errno::ENOMEM);
        }
        let seal = |v: &Vma| Vma { flags: v.flags.union(VmaFlags::SEALED), ..*v };
        let mut error = None;
        let mut count = self.tree.len();
        for i in 0..pieces.len() {
            let p = pieces[i];
            let splits =
                if p.flags.contains(VmaFlags::SEALED) { 0 } else { self.splits_needed(&p, &seal(&p)) };
            if splits > 0 && count + splits > self.layout.max_map_count {
                error = Some(Errno::ENOMEM);
                pieces.truncate(i);
                break;
            }
            count += splits;
        }
        if pieces.iter().any(|p| !p.flags.contains(VmaFlags::SEALED)) {
            self.reserve()?;
            self.rewrite(&pieces, seal);
            self.sealed = true;
        }
        error.map_or(Ok(()), Err)
    }

    /// `EPERM` when any mapping overlapping `[start, end)` is sealed: the check of every call
    /// that removes, moves or replaces mappings, made before it changes anything.
    ///
    /// # Errors
    /// `EPERM` as said.
    pub(super) fn refuse_sealed(&self, start: u64, end: u64) -> Result<(), Errno> {
        if self.sealed
            && self
                .tree
                .iter_from(start)
                .take_while(|v| v.start < end)
                .any(|v| v.flags.contains(VmaFlags::SEALED))
        {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// Whether the mapping containing `addr` (if any) is sealed.
    pub(super) fn sealed_at(&self, addr: u64) -> bool {
        self.sealed && self.tree.find(addr).is_some_and(|v| v.flags.contains(VmaFlags::SEALED))
    }

    /// Whether any mapping was ever sealed in this address space.
    pub fn has_seals(&self) -> bool {
        self.sealed
    }
}
