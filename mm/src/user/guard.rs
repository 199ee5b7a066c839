//! Guard regions: `MADV_GUARD_INSTALL` / `MADV_GUARD_REMOVE`, as Linux 6.13 (`madvise_guard_*`
//! in mm/madvise.c): pages of a mapping that fault with `SIGSEGV` on any access, without
//! splitting the mapping — what a thread library wants for stack guards and a JIT between code
//! chunks, at the cost of no area record each.
//!
//! As Linux keeps a guard as a PTE marker, a guarded page here is a guard marker in its
//! last-level entry (`crate::paging`'s `guard.rs`: an invalid descriptor with a software bit),
//! so the tables alone say where the guards are: the fault handler finds the marker in the walk
//! that finds the page absent, and every operation that removes entries decides in the same walk
//! whether the markers go too. Installing zaps the pages (their data is gone, as on Linux) with
//! one flush, then writes the markers (invalid to invalid: no flush). The semantics follow
//! Linux's (tools/testing/selftests/mm/guard-regions.c):
//! - install zaps and guards every page of the mapped parts of the range, holes and all (Linux
//!   then answers `ENOMEM` for the hole); `EINVAL` for a locked area or one that is not private
//!   anonymous memory (shared, a memfd's), which stops the walk there; `ENOMEM` at once when a
//!   table frame cannot be had;
//! - remove takes only the guards (the pages then read zero; populated pages in the range stay),
//!   over the same walk (a locked area allowed);
//! - `MADV_DONTNEED` and `MADV_FREE` leave the guards in place, `munmap` and `MAP_FIXED` take
//!   them with the range, `mremap` moves them with the entries (with `MREMAP_DONTUNMAP` too: the
//!   source is left empty, as Linux's `move_ptes` leaves it), `fork` gives them to the child
//!   (not in a `MADV_WIPEONFORK` area, which the child gets empty);
//! - populating a guard page (`MADV_POPULATE_*`, `mlock`) fails with `EFAULT`/`ENOMEM` as the
//!   fault does; `mincore` reports it not resident.

use alloc::vec::Vec;

use super::{UserFrames, UserMemory};
use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::paging::Translation;
use crate::space::FlushTargets;
use crate::tlb::TlbHardware;
use crate::vm::{Errno, VmaFlags};

pub use linux_abi::mman::{MADV_GUARD_INSTALL, MADV_GUARD_REMOVE};

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// `madvise(addr, len, MADV_GUARD_INSTALL | MADV_GUARD_REMOVE)` (module documentation), as
    /// Linux's `madvise_walk_vmas`: every mapped part of the range, area by area; a hole is
    /// reported with `ENOMEM` after the walk, an area the advice refuses stops it there.
    ///
    /// # Errors
    ///
    /// `EINVAL` unaligned or wrapping, or an area that is not private anonymous memory (shared,
    /// a memfd's) or, to install, locked (the areas before it are done); `ENOMEM` a hole, after
    /// every mapped part is done, or no table frame for the markers (at once).
    pub(super) fn madvise_guard(&mut self, addr: u64, len: u64, install: bool) -> Result<(), Errno> {
        if addr & (PAGE_SIZE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = len.checked_add(PAGE_SIZE - 1).ok_or(Errno::EINVAL)? & !(PAGE_SIZE - 1);
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        let mut cursor = addr;
        let mut hole = false;
        while cursor < end {
            // The next area, clipped to [cursor, end).
            let Some(v) = self.vm.mappings_in(cursor, end).next() else {
                hole = true;
                break;
            };
            hole |= v.start > cursor;
            // A sealed read-only area refuses installing (`mseal`, Linux 6.13); then Linux's
            // is_valid_guard_vma: anonymous (not shmem, not a file), and unlocked to install
            // (removing from a locked area is allowed).
            if install && v.seal_refuses(MADV_GUARD_INSTALL) {
                return Err(Errno::EPERM);
            }
            if v.flags.contains(VmaFlags::SHARED)
                || v.flags.contains(VmaFlags::OBJECT)
                || (install && v.flags.contains(VmaFlags::LOCKED))
            {
                return Err(Errno::EINVAL);
            }
            let (s, e) = (v.start, v.end);
            if install {
                self.discard_range(s, e);
                self.space.install_guards(VirtAddr(s), e - s).map_err(|_| Errno::ENOMEM)?;
            } else {
                // The range comes from the area map: it cannot be refused.
                let r = self.space.unguard(VirtAddr(s), e - s);
                debug_assert!(r.is_ok(), "unguard of [{s:#x}, {e:#x}) failed: {r:?}");
            }
            cursor = e;
        }
        if hole { Err(Errno::ENOMEM) } else { Ok(()) }
    }

    /// Whether the (absent) page at `page` is a guard.
    pub(super) fn guarded(&self, page: u64) -> bool {
        self.space.table().is_guard(VirtAddr(page))
    }

    /// The guarded page ranges of `[start, end)` (page aligned), in address order, or `ENOMEM`
    /// when the heap has no room for the list.
    pub(super) fn guards_in(&self, start: u64, end: u64) -> Result<Vec<(u64, u64)>, Errno> {
        let mut out = Vec::new();
        let mut full = false;
        if start < end {
            let _ = self.space.table().guards_in(VirtAddr(start), end - start, |va, len| {
                if out.try_reserve(1).is_err() {
                    full = true;
                } else {
                    out.push((va.0, va.0 + len));
                }
            });
        }
        if full { Err(Errno::ENOMEM) } else { Ok(out) }
    }

    /// Every guarded page range of the space, in address order (read from the tables).
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the heap has no room for the list.
    pub fn guard_ranges(&self) -> Result<Vec<(u64, u64)>, Errno> {
        self.guards_in(0, 1 << crate::addr::VA_BITS)
    }
}
