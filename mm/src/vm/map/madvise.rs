//! `madvise`: the advice stored in the areas (hints, fork and huge-page flags) and what the
//! user-memory layer must do with the pages of the accepted ranges ([`MadviseAction`]).

use alloc::vec::Vec;

use super::{VmMap, page_up};
use crate::vm::advice::*;
use crate::vm::{Advice, Errno, PAGE, Vma, VmaFlags, fallible};

/// What the kernel must do with the pages of the ranges `madvise` accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadviseAction {
    /// Nothing beyond the bookkeeping already done here (hints and attribute changes).
    None,
    /// Drop the pages now; the next access reads zero (`MADV_DONTNEED`, `MADV_REMOVE`).
    Discard,
    /// The pages may be dropped lazily, until the next write (`MADV_FREE`); discarding them now is
    /// correct too.
    Free,
    /// Read-ahead hint (`MADV_WILLNEED`): the kernel may prefault.
    WillNeed,
    /// Prefault now (`MADV_POPULATE_READ` / `MADV_POPULATE_WRITE`).
    Populate {
        /// Fault writable.
        write: bool,
    },
}

/// What `madvise` did. As in Linux the advice applies to every mapped part of the range; a hole
/// makes the call return `ENOMEM` afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Madvised {
    /// What to do with the pages of `ranges`.
    pub action: MadviseAction,
    /// The mapped parts the advice applied to, in address order.
    pub ranges: Vec<(u64, u64)>,
    /// The error to return after applying `action` (`ENOMEM` for a hole, `EINVAL`/`EFAULT` for a
    /// mapping the advice cannot apply to, which stops the walk there).
    pub error: Option<Errno>,
}

impl VmMap {
    /// `madvise(addr, len, advice)`.
    ///
    /// Accepted: `NORMAL`, `RANDOM`, `SEQUENTIAL` (stored in the mapping), `WILLNEED`,
    /// `DONTNEED`, `DONTNEED_LOCKED`, `FREE` (private anonymous only), `REMOVE` (shared only),
    /// `DONTFORK`, `DOFORK`, `WIPEONFORK` (private anonymous only), `KEEPONFORK`, `DONTDUMP`, `DODUMP`, `HUGEPAGE`,
    /// `NOHUGEPAGE`, `COLLAPSE`, `COLD`, `PAGEOUT` (hints), `POPULATE_READ`/`POPULATE_WRITE`.
    ///
    /// # Errors
    /// Before any change: `EINVAL` unknown advice (also `MERGEABLE`/`UNMERGEABLE`, as Linux
    /// without KSM, and the guard-region advice of Linux 6.13), unaligned `addr`, or a range that
    /// overflows; `EPERM` `HWPOISON`/`SOFT_OFFLINE` (need `CAP_SYS_ADMIN`). `len` rounding to 0
    /// succeeds with no effect. After the walk, as Linux's `madvise_walk_vmas`:
    /// [`Madvised::error`] is `ENOMEM` for a hole, the advice having gone to every mapped part of
    /// the range; a mapping the advice refuses stops the walk there, after the mappings before
    /// it: `EINVAL` for `FREE`/`WIPEONFORK` on shared memory or a memory object's pages, or
    /// `REMOVE` on private memory, `EFAULT` for populating pages without the needed access.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: u64) -> Result<Madvised, Errno> {
        let valid = matches!(advice, 0..=4 | 8..=25 | MADV_HWPOISON | MADV_SOFT_OFFLINE)
            && !matches!(advice, MADV_MERGEABLE | MADV_UNMERGEABLE);
        if !valid || addr & (PAGE - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        let plen = page_up(len).unwrap_or(0);
        if len != 0 && plen == 0 {
            return Err(Errno::EINVAL);
        }
        let end = addr.checked_add(plen).ok_or(Errno::EINVAL)?;
        let action = match advice {
            MADV_DONTNEED | MADV_DONTNEED_LOCKED | MADV_REMOVE => MadviseAction::Discard,
            MADV_FREE => MadviseAction::Free,
            MADV_WILLNEED => MadviseAction::WillNeed,
            MADV_POPULATE_READ => MadviseAction::Populate { write: false },
            MADV_POPULATE_WRITE => MadviseAction::Populate { write: true },
            _ => MadviseAction::None,
        };
        if end == addr {
            return Ok(Madvised { action, ranges: Vec::new(), error: None });
        }
        if matches!(advice, MADV_HWPOISON | MADV_SOFT_OFFLINE) {
            return Err(Errno::EPERM);
        }
        let (mut pieces, hole) = self.select(addr, end, false)?;
        let mut error = hole.then_some(Errno::ENOMEM);
        // Per-mapping refusals stop the walk at that mapping, as in Linux.
        let refuse = |v: &Vma| -> Option<Errno> {
            let shared = v.flags.contains(VmaFlags::SHARED);
            // Linux's vma_is_anonymous (MADV_FREE) and vm_file check (MADV_WIPEONFORK): shared
            // memory and a memory object's pages, private or not, are not anonymous.
            let anonymous = !shared && !v.flags.contains(VmaFlags::OBJECT);
            // A seal is checked first (Linux's madvise_vma_behavior).
            if v.seal_refuses(advice) {
                return Some(Errno::EPERM);
            }
            match advice {
                MADV_FREE | MADV_WIPEONFORK if !anonymous => Some(Errno::EINVAL),
                MADV_REMOVE if !shared => Some(Errno::EINVAL),
                MADV_POPULATE_READ if !v.prot.read() => Some(Errno::EFAULT),
                MADV_POPULATE_WRITE if !v.prot.write() => Some(Errno::EFAULT),
                _ => None,
            }
        };
        if let Some(i) = pieces.iter().position(|p| refuse(p).is_some()) {
            error = refuse(&pieces[i]);
            pieces.truncate(i);
        }
        let set = |v: &Vma| -> Vma {
            let mut v = *v;
            match advice {
                MADV_NORMAL => v.advice = Advice::Normal,
                MADV_RANDOM => v.advice = Advice::Random,
                MADV_SEQUENTIAL => v.advice = Advice::Sequential,
                MADV_DONTFORK => v.flags = v.flags.union(VmaFlags::DONTFORK),
                MADV_DOFORK => v.flags = v.flags.difference(VmaFlags::DONTFORK),
                MADV_WIPEONFORK => v.flags = v.flags.union(VmaFlags::WIPEONFORK),
                MADV_KEEPONFORK => v.flags = v.flags.difference(VmaFlags::WIPEONFORK),
                MADV_HUGEPAGE => v.flags = v.flags.union(VmaFlags::HUGEPAGE).difference(VmaFlags::NOHUGEPAGE),
                MADV_NOHUGEPAGE => {
                    v.flags = v.flags.union(VmaFlags::NOHUGEPAGE).difference(VmaFlags::HUGEPAGE)
                }
                _ => {}
            }
            v
        };
        // A split at vm.max_map_count stops the walk too: madvise_update_vma's ENOMEM, which
        // madvise reports as EAGAIN ("kernel resources temporarily unavailable").
        let mut count = self.tree.len();
        for i in 0..pieces.len() {
            let p = pieces[i];
            let splits = if set(&p) == p { 0 } else { self.splits_needed(&p, &set(&p)) };
            if splits > 0 && count + splits > self.layout.max_map_count {
                error = Some(Errno::EAGAIN);
                pieces.truncate(i);
                break;
            }
            count += splits;
        }
        let mut ranges = Vec::new();
        fallible::reserve(&mut ranges, pieces.len())?;
        ranges.extend(pieces.iter().map(|p| (p.start, p.end)));
        if pieces.iter().any(|p| set(p) != *p) {
            self.reserve()?;
            self.rewrite(&pieces, set);
        }
        Ok(Madvised { action, ranges, error })
    }
}
