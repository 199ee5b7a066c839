//! fork's copy of an address space into a new one, with one flush for the parent: Linux's
//! `copy_page_range` and the `flush_tlb_mm` that ends `dup_mmap`.
//!
//! Why a scope: fork changes the parent as it copies it (every private page becomes read-only
//! on both sides), area after area, and the parent's TLB must be flushed once at the end for
//! all of it, whether the copy succeeded or not. [`AddressSpace::fork_copy`] runs the caller's
//! copy with a [`ForkCopy`] that gathers every change into one record, then flushes, finishes
//! and releases it, so no caller can forget the flush or issue one per area.

use crate::addr::VirtAddr;
use crate::descriptor::Attributes;
use crate::paging::{BbmCounts, Copied, MapError, PageTable, PendingFlush, StagedOp, Translation};
use crate::tlb::TlbHardware;

use super::{AddressSpace, FlushTargets, Kind};

/// The parent's side of a fork in progress (see [`AddressSpace::fork_copy`]): its table to read,
/// and the changes to it, gathered for one flush.
pub struct ForkCopy<'a, T: Translation> {
    table: &'a mut PageTable<T>,
    record: PendingFlush,
    counts: BbmCounts,
    split_contiguous: bool,
    user: bool,
    /// The addresses the staged protections covered, for `finish`.
    staged: Option<(VirtAddr, VirtAddr)>,
}

impl<T: Translation> ForkCopy<'_, T> {
    /// The parent's table, as it is now (for walks of its blocks and guard markers).
    pub fn table(&self) -> &PageTable<T> {
        self.table
    }

    /// Gives every leaf of the parent in `[va, va + size)` the attributes `change(old)`
    /// (non-global in a user space), staged as [`AddressSpace::protect_with`] stages them, into
    /// the one flush: fork's write protection of the parent's blocks.
    ///
    /// # Errors
    ///
    /// As [`AddressSpace::protect_with`].
    pub fn protect_with<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        mut change: F,
    ) -> Result<(), MapError> {
        let user = self.user;
        let op = StagedOp::Protect(move |a| if user { change(a).with_global(false) } else { change(a) });
        self.table.stage(va, size, op, self.split_contiguous, &mut self.record, &mut self.counts)?;
        let end = va.wrapping_add(size);
        self.staged = Some(match self.staged {
            Some((lo, hi)) => (lo.min(va), hi.max(end)),
            None => (va, end),
        });
        Ok(())
    }

    /// Copies the parent's pages in `[va, va + size)` into `child`, a last-level table's worth
    /// at a time (`PageTable::copy_pages_from`): each with attributes `attrs(old)` on both sides
    /// (in the parent in place, so permissions only), the same frame, once `take(frame)` has said
    /// yes. Blocks and guard markers are the caller's, and so is a contiguous run the range cuts
    /// whose entries `attrs` changes ([`Copied::cut_runs_left`]: left as it was in the parent,
    /// to be changed with [`protect_with`](Self::protect_with), which clears its hint first).
    /// Attributes are made non-global in a user space; `child` must be of the same kind.
    ///
    /// # Errors
    ///
    /// As `PageTable::copy_pages_from`: on error the pages copied so far stay in the child,
    /// with their references, for the caller to end it; the parent's changes so far are
    /// flushed with the rest.
    pub fn share_pages<H: TlbHardware, P: FlushTargets, A, R>(
        &mut self,
        child: &mut AddressSpace<T, H, P>,
        va: VirtAddr,
        size: u64,
        mut attrs: A,
        take: R,
    ) -> Result<Copied, MapError>
    where
        A: FnMut(Attributes) -> Attributes,
        R: FnMut(crate::addr::PhysAddr) -> bool,
    {
        debug_assert_eq!(self.user, child.kind == Kind::User, "fork into a space of another kind");
        let user = self.user;
        child.table.copy_pages_from(
            self.table,
            va,
            size,
            |a| if user { attrs(a).with_global(false) } else { attrs(a) },
            take,
            &mut self.record,
        )
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets> AddressSpace<T, H, P> {
    /// Runs `copy` (fork's copy of this space into a child) with a [`ForkCopy`] of this space,
    /// then issues one flush for every change it made here, finishes what it staged and
    /// releases the record, whatever `copy` returned.
    pub fn fork_copy<R>(&mut self, copy: impl FnOnce(&mut ForkCopy<'_, T>) -> R) -> R {
        let mut batch = ForkCopy {
            record: PendingFlush::new(self.table.va_range()),
            table: &mut self.table,
            counts: BbmCounts::default(),
            split_contiguous: self.policy.split_contiguous,
            user: self.kind == Kind::User,
            staged: None,
        };
        let result = copy(&mut batch);
        let ForkCopy { record, counts, staged, .. } = batch;
        let isb = self.needs_isb(&record);
        mutant!(self.flush(&record), ForkWithoutFlush => {});
        let made = staged.is_some_and(|(lo, hi)| self.table.finish(lo, hi.0 - lo.0, &mut |_| {}));
        self.release(record);
        self.stats.add(&counts);
        if made {
            self.make_barrier(isb);
        }
        result
    }
}
