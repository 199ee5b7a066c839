//! A live address space: one translation table tree, the TLB issuer, and the scope its entries
//! are cached under, with break-before-make done here rather than by every caller.
//!
//! Why one file: every operation of [`AddressSpace`] is the same sequence (stage, one flush,
//! make and release) through the private helpers at the end of the file (`run`, `flush`,
//! `make_barrier`); the public methods are short wrappers over them, and split apart each would
//! reach back into that one sequence. The one apart is fork's copy (`fork_copy.rs`), which
//! spans many calls with one flush and so hands its caller a scope instead of being a call.
//! The host model proof is `space/tests.rs`.
//!
//! Why it is built this way: the table engine ([`crate::paging`]) refuses, on a live table, every
//! change that needs break-before-make, because it does not own the TLB. An [`AddressSpace`] owns
//! both, so each of its operations is one complete, architecturally correct sequence:
//!
//! 1. **stage**: entries whose output address, size, memory type, shareability, nG or contiguous
//!    hint change are written invalid (the new value kept in the invalid entry, see
//!    `paging/bbm.rs`); unmapped leaves and emptied tables are cut off; permission-only changes
//!    (AP, PXN, UXN), which the architecture allows in place, are written in place. New tables
//!    for block splits are built before anything is broken, and every frame the operation needs
//!    is reserved first, so after the first write nothing can fail;
//! 2. **one flush**: everything the call changed was gathered into one [`PendingFlush`], which
//!    becomes one [`TlbRequest`] (stride = smallest changed leaf, `leaf_only` only when no table
//!    entry was removed or replaced, the space's scope) and one planned invalidation
//!    (`DSB ISHST; TLBI…; DSB ISH`, `ISB` for kernel or executable mappings);
//! 3. **make and release**: the staged entries are written valid, then detached table frames
//!    are freed and the unmapped leaves handed to the caller (a user space frees its data frames
//!    there) — all after the invalidation that covers them.
//!
//! Superpages: when a `map` completes a 2 MiB-aligned range of 512 pages that map one 2 MiB-aligned
//! physical range with the same attributes, the level-3 table is replaced by a block (one range
//! TLBI with FEAT_TLBIRANGE, where a page-by-page loop would need 512); when it completes a 64 KiB
//! run of 16 such pages, the run gets the contiguous hint. Both go through break-before-make (the
//! Arm ARM requires it for the contiguous bit too). A change to part of a block splits it, and a
//! change to part of a run clears the run's hint, again through break-before-make.
//!
//! Kernel (global) spaces: between break and make the broken range faults. The caller must not
//! break a range that maps what the sequence itself uses — the page-table frames (reached through
//! the linear map), the current stack, the code running — so the kernel maps those at their final
//! granularity and [`Policy::KERNEL`] never promotes or folds on its own.

use crate::addr::{BLOCK_1G, BLOCK_2M, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, MemoryType};
use crate::paging::{BbmCounts, Constraints, Leaf, MapError, PageTable, PendingFlush, StagedOp, Translation};
use crate::tlb::{
    FlushTarget, Scope, Stride, TlbFeatures, TlbHardware, TlbIssuer, TlbRequest, TlbStats, plan,
};

mod fork_copy;
#[cfg(test)]
mod tests;

pub use fork_copy::ForkCopy;

/// Where an address space's flushes go, asked at the moment of each flush.
///
/// The space never keeps a target from one call to the next: a user space's ASID changes when
/// the allocator rolls over, and whether other CPUs may hold its entries changes whenever one of
/// its threads runs somewhere new, so the only correct time to decide is when the invalidation is
/// about to be issued — after the table change is visible to every walker (the space issues
/// `DSB ISHST` before it asks), so that a CPU that starts using the space afterwards walks the new
/// tables. The kernel's implementation asks its ASID allocator ([`crate::asid::AsidAllocator::
/// flush_target`]) for the executing CPU; a fixed [`FlushTarget`] serves the kernel's own global
/// space and the tests.
pub trait FlushTargets {
    /// The target of the flush about to be issued.
    fn target(&mut self) -> FlushTarget;

    /// Every TLB instruction the space issued, once per flush: the one statistics sink (the
    /// kernel adds them to its machine-wide counters). The default keeps nothing.
    fn issued(&mut self, _stats: &TlbStats) {}
}

impl FlushTargets for FlushTarget {
    fn target(&mut self) -> FlushTarget {
        *self
    }
}

/// Whose translations a space holds, which decides the tags of its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// A user space (TTBR0): every entry non-global, tagged with the ASID of the flush target.
    User,
    /// The kernel's space (TTBR1): global entries.
    Kernel,
}

/// When an address space changes the layout of its table on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// After `map`, replace a level-3 table whose 512 pages are physically contiguous, 2 MiB
    /// aligned and uniform by one 2 MiB block.
    pub promote: bool,
    /// After `map`, set the contiguous hint on a 64 KiB run of 16 such pages.
    pub fold: bool,
    /// When a block is split, set the contiguous hint on the runs of the new table that stay
    /// uniform (so the TLB keeps 64 KiB entries for the untouched parts).
    pub split_contiguous: bool,
}

impl Policy {
    /// User spaces: promote, fold, keep runs on split.
    pub const USER: Self = Self { promote: true, fold: true, split_contiguous: true };
    /// Kernel spaces: no promotion or fold the caller did not ask for (see the module
    /// documentation); splits keep runs (the new table is built before anything is broken).
    pub const KERNEL: Self = Self { promote: false, fold: false, split_contiguous: true };
}

/// Counters of an address space (the TLB instructions are in [`AddressSpace::tlb_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SpaceStats {
    /// Level-3 tables replaced by a 2 MiB block.
    pub promotions: u64,
    /// Blocks split into a table of smaller leaves (demotions).
    pub demotions: u64,
    /// 64 KiB runs given the contiguous hint.
    pub folds: u64,
    /// Contiguous runs whose hint was cleared.
    pub unfolds: u64,
    /// Planned flushes issued (at most one per operation).
    pub flushes: u64,
    /// `DSB ISHST` (and `ISB`) issued after new entries were written outside a flush.
    pub barriers: u64,
}

impl SpaceStats {
    fn add(&mut self, c: &BbmCounts) {
        self.promotions += c.promotions;
        self.demotions += c.splits;
        self.folds += c.folds;
        self.unfolds += c.unfolds;
    }
}

/// A mapping an operation removed, handed to the caller after the TLB invalidation that covers
/// it has completed: from then on no CPU can reach `[pa, pa + size)` through it. Adjacent leaves
/// that map adjacent physical memory with the same attributes are reported as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unmapped {
    /// First virtual address.
    pub va: VirtAddr,
    /// First physical address.
    pub pa: PhysAddr,
    /// Length in bytes (a multiple of 4 KiB).
    pub size: u64,
    /// The attributes it had.
    pub attrs: Attributes,
}

/// Table frames set aside before a change that must not fail half-way (`mremap`'s move maps the
/// pages at their new place only once the old place is decided): taken by
/// [`AddressSpace::reserve_tables`], drawn on by [`AddressSpace::map_reserved`], and handed
/// back, the unused ones freed, by [`AddressSpace::release_tables`].
#[derive(Debug, Default)]
#[must_use = "a reserve holds table frames: hand it back with AddressSpace::release_tables"]
pub struct TableReserve(crate::paging::FrameList);

/// Merges reported leaves into [`Unmapped`] extents.
struct Coalescer<F: FnMut(Unmapped)> {
    sink: F,
    current: Option<Unmapped>,
}

impl<F: FnMut(Unmapped)> Coalescer<F> {
    fn push(&mut self, leaf: &Leaf) {
        if let Some(c) = &mut self.current
            && c.va.wrapping_add(c.size) == leaf.va
            && c.pa.wrapping_add(c.size) == leaf.pa
            && c.attrs == leaf.attrs
        {
            c.size += leaf.size;
            return;
        }
        let next = Unmapped { va: leaf.va, pa: leaf.pa, size: leaf.size, attrs: leaf.attrs };
        if let Some(done) = self.current.replace(next) {
            (self.sink)(done);
        }
    }

    fn finish(mut self) {
        if let Some(done) = self.current.take() {
            (self.sink)(done);
        }
    }
}

/// A live translation table with its TLB maintenance: map, unmap, protect, remap, promote and
/// demote with break-before-make and one gathered invalidation per call (module
/// documentation).
///
/// `T` supplies and reaches table frames (as for [`PageTable`]); `H` executes the TLB
/// instructions (`Aarch64Tlb` in the kernel). The caller serialises calls (one lock per address
/// space) and owns the data frames: they come in through `map` and go out, after the flush,
/// through the `on_unmapped` callbacks.
///
/// # Example
///
/// A user space with ASID 5 (`Heap` and `Cpu` stand for the kernel's frame allocator and
/// `Aarch64Tlb`):
///
/// ```
/// # use core::ptr::NonNull;
/// # struct Heap;
/// # // SAFETY: frames are 4 KiB-aligned, exclusively owned allocations, valid until deallocated.
/// # unsafe impl mm::paging::Translation for Heap {
/// #     fn allocate_table(&mut self) -> Option<mm::addr::PhysAddr> {
/// #         Some(mm::addr::PhysAddr(Box::into_raw(Box::new(mm::paging::AlignedTable([0; 512]))) as u64))
/// #     }
/// #     fn deallocate_table(&mut self, pa: mm::addr::PhysAddr) {
/// #         // SAFETY: `pa` came from `allocate_table`.
/// #         drop(unsafe { Box::from_raw(pa.0 as *mut mm::paging::AlignedTable) });
/// #     }
/// #     fn table_ptr(&self, pa: mm::addr::PhysAddr) -> NonNull<[u64; 512]> {
/// #         NonNull::new(pa.0 as *mut [u64; 512]).unwrap()
/// #     }
/// # }
/// # #[derive(Default)]
/// # struct Cpu(u64);
/// # impl mm::tlb::TlbHardware for Cpu {
/// #     fn dsb_ishst(&mut self) {}
/// #     fn dsb_ish(&mut self) {}
/// #     fn dsb_nshst(&mut self) {}
/// #     fn dsb_nsh(&mut self) {}
/// #     fn isb(&mut self) {}
/// #     fn tlbi(&mut self, _: mm::tlb::TlbiOp, _: u64) { self.0 += 1 }
/// # }
/// use mm::addr::{PhysAddr, VirtAddr};
/// use mm::descriptor::{Attributes, UserAccess};
/// use mm::paging::{Constraints, PageTable, VaRange};
/// use mm::space::AddressSpace;
/// use mm::tlb::{FlushTarget, Reach, TlbFeatures, TlbIssuer};
///
/// let features = TlbFeatures { range: true, ..TlbFeatures::BASELINE }; // read once at boot
/// let table = PageTable::new(Heap, VaRange::Lower)?;
/// // A fixed target: ASID 5 on every CPU. The kernel passes a provider that asks its ASID
/// // allocator at each flush instead.
/// let target = FlushTarget::asid(5, Reach::Broadcast);
/// let issuer = TlbIssuer::new(Cpu::default(), features.errata);
/// let mut user = AddressSpace::user(table, issuer, features, target);
/// let rw = Attributes::user(UserAccess::ReadWrite);
/// // Fault-in of 512 pages, one at a time: the last one completes the 2 MiB range.
/// for i in 0..512 {
///     let off = i * 4096;
///     user.map(VirtAddr(0x4000_0000 + off), PhysAddr(0x8000_0000 + off), 4096, rw, Constraints::NONE)?;
/// }
/// assert_eq!(user.stats().promotions, 1);
/// assert_eq!(user.query(VirtAddr(0x4000_0000)).unwrap().level, 2);
/// // munmap: the data frames come back after the flush.
/// let mut freed = 0;
/// user.unmap(VirtAddr(0x4000_0000), 2 << 20, |u| freed += u.size)?;
/// assert_eq!(freed, 2 << 20);
/// # Ok::<(), mm::paging::MapError>(())
/// ```
pub struct AddressSpace<T: Translation, H: TlbHardware, P: FlushTargets = FlushTarget> {
    table: PageTable<T>,
    tlb: TlbIssuer<H>,
    kind: Kind,
    features: TlbFeatures,
    targets: P,
    policy: Policy,
    stats: SpaceStats,
}

impl<T: Translation, H: TlbHardware, P: FlushTargets> core::fmt::Debug for AddressSpace<T, H, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AddressSpace")
            .field("table", &self.table)
            .field("kind", &self.kind)
            .field("features", &self.features)
            .field("policy", &self.policy)
            .field("stats", &self.stats)
            .field("tlb", self.tlb.stats())
            .finish()
    }
}

impl<T: Translation, H: TlbHardware> AddressSpace<T, H, FlushTarget> {
    /// The kernel's address space (TTBR1, global entries, flushed on every CPU),
    /// [`Policy::KERNEL`]. `table` is marked live. `features` are the machine's, read once at boot
    /// ([`TlbFeatures::from_id_registers`], combined over CPUs).
    pub fn kernel(table: PageTable<T>, tlb: TlbIssuer<H>, features: TlbFeatures) -> Self {
        Self::with_kind(table, tlb, features, FlushTarget::GLOBAL, Kind::Kernel, Policy::KERNEL)
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets> AddressSpace<T, H, P> {
    /// A user address space (TTBR0), [`Policy::USER`]: every mapping is made non-global (nG),
    /// whatever the attributes say, and each flush goes where `targets` says at that moment
    /// (the ASID the entries are tagged with, on this CPU or on all). `table` is marked live:
    /// from now on every change goes through the TLB maintenance of this type.
    pub fn user(table: PageTable<T>, tlb: TlbIssuer<H>, features: TlbFeatures, targets: P) -> Self {
        Self::with_kind(table, tlb, features, targets, Kind::User, Policy::USER)
    }

    fn with_kind(
        mut table: PageTable<T>,
        tlb: TlbIssuer<H>,
        features: TlbFeatures,
        targets: P,
        kind: Kind,
        policy: Policy,
    ) -> Self {
        table.set_live(true);
        Self { table, tlb, kind, features, targets, policy, stats: SpaceStats::default() }
    }

    /// The table (for queries, `root_pa` for the TTBR, and its frame counters).
    pub fn table(&self) -> &PageTable<T> {
        &self.table
    }

    /// The table, for changes made *without* this space's TLB maintenance. The table stays
    /// live, so the engine still refuses every change that needs break-before-make; what it
    /// allows (writing invalid entries, clearing leaves) is left for the caller to invalidate.
    /// For tests that need a stale TLB entry on purpose, to show that an invalidation removes it.
    ///
    /// # Safety
    ///
    /// The caller invalidates the TLB for every entry it changes or removes before anything
    /// relies on the change, and frees no frame (a detached table, an unmapped leaf's memory)
    /// before that invalidation has completed.
    pub unsafe fn table_mut_unflushed(&mut self) -> &mut PageTable<T> {
        &mut self.table
    }

    /// Whether this is a user space (non-global entries tagged by ASID).
    pub fn is_user(&self) -> bool {
        self.kind == Kind::User
    }

    /// The machine's TLB features in use.
    pub fn features(&self) -> TlbFeatures {
        self.features
    }

    /// Where flushes go (the provider asked at each flush).
    pub fn targets(&self) -> &P {
        &self.targets
    }

    /// The provider of flush targets, mutably (a test may look inside it).
    pub fn targets_mut(&mut self) -> &mut P {
        &mut self.targets
    }

    /// The promotion policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Changes the promotion policy.
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Promotion, demotion and flush counters.
    pub fn stats(&self) -> SpaceStats {
        self.stats
    }

    /// Counts of the TLB instructions this space issued.
    pub fn tlb_stats(&self) -> &TlbStats {
        self.tlb.stats()
    }

    /// The TLB issuer (and through it the hardware handle).
    pub fn tlb(&self) -> &TlbIssuer<H> {
        &self.tlb
    }

    /// The TLB issuer, mutably (e.g. to reset its counters).
    pub fn tlb_mut(&mut self) -> &mut TlbIssuer<H> {
        &mut self.tlb
    }

    /// The leaf translating `va`, if any.
    pub fn query(&self, va: VirtAddr) -> Option<Leaf> {
        self.table.query(va)
    }

    /// The physical address `va` translates to, if it is mapped.
    pub fn translate(&self, va: VirtAddr) -> Option<PhysAddr> {
        self.table.translate(va)
    }

    /// Gives back the table (still marked live), the issuer and the target provider.
    pub fn into_parts(self) -> (PageTable<T>, TlbIssuer<H>, P) {
        (self.table, self.tlb, self.targets)
    }

    /// Maps `[va, va + size)` to `[pa, pa + size)` with `attrs` (blocks and contiguous runs
    /// where alignment and `constraints` allow, as [`PageTable::map`]). Only invalid entries are
    /// written, so this needs no invalidation; it ends with `DSB ISHST` (and `ISB` for kernel or
    /// executable mappings). Then, as the [`Policy`] says and `constraints` allow
    /// (`NO_BLOCKS`, `NO_CONTIGUOUS`), a 2 MiB range or 64 KiB run that this call completed is
    /// promoted or folded, all with one gathered flush. The table does not remember constraints:
    /// a later call that completes a range may promote pages an earlier call mapped with
    /// `NO_BLOCKS`; turn the [`Policy`] off where that matters.
    ///
    /// # Errors
    ///
    /// As [`PageTable::map`]: `InvalidRange`, `Misaligned`, `AlreadyMapped`, `OutOfMemory`. On
    /// error nothing has changed.
    pub fn map(
        &mut self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), MapError> {
        self.map_with(va, pa, size, attrs, constraints, None)
    }

    /// The table frames [`map`](Self::map)ping each piece `(va, pa, size)` of `pieces` (in
    /// address order) with `constraints` needs, one call after another: count them before a
    /// change after which the maps must not fail, and [`reserve_tables`](Self::reserve_tables)
    /// that many. `fresh`: count as if no table existed below the root, for a range whose
    /// present contents will be unmapped first (an unmap frees the tables it empties).
    pub fn tables_to_map<I: IntoIterator<Item = (VirtAddr, PhysAddr, u64)>>(
        &self,
        pieces: I,
        constraints: Constraints,
        fresh: bool,
    ) -> usize {
        self.table.tables_to_map_pieces(pieces, constraints, fresh)
    }

    /// Allocates `count` table frames for later [`map_reserved`](Self::map_reserved) calls, or
    /// none at all.
    ///
    /// # Errors
    ///
    /// `OutOfMemory`, with nothing kept.
    pub fn reserve_tables(&mut self, count: usize) -> Result<TableReserve, MapError> {
        self.table.reserve_frames(count).map(TableReserve)
    }

    /// Frees the frames `reserve` still holds.
    pub fn release_tables(&mut self, reserve: TableReserve) {
        self.table.free_frames(reserve.0);
    }

    /// [`map`](Self::map) taking its table frames from `reserve` first: with as many as
    /// [`tables_to_map`](Self::tables_to_map) counted for pieces that include this call's, and
    /// no table they relied on freed since, it cannot run out of memory.
    ///
    /// # Errors
    ///
    /// As [`map`](Self::map); `OutOfMemory` only when `reserve` is short and the allocator
    /// fails.
    pub fn map_reserved(
        &mut self,
        reserve: &mut TableReserve,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), MapError> {
        self.map_with(va, pa, size, attrs, constraints, Some(&mut reserve.0))
    }

    /// The table frames [`move_pages`](Self::move_pages) of `[from, from + size)` to `to` needs
    /// at most, counted as [`tables_to_map`](Self::tables_to_map) counts (`fresh` alike), or
    /// `None` where it cannot move the range (a block in it, a contiguous run it cuts at either
    /// end, overlapping ranges): the caller then moves it by extents, `map` and `unmap`.
    pub fn tables_to_move(&self, from: VirtAddr, to: VirtAddr, size: u64, fresh: bool) -> Option<usize> {
        self.table.tables_to_move(from, to, size, fresh)
    }

    /// Moves every page and guard marker of `[from, from + size)` to the same place of
    /// `[to, to + size)` (empty), entry by entry in one pass, with table frames from `reserve`
    /// first and one flush of the source range; the frames stay where they are (a move changes
    /// no reference). A contiguous run keeps its hint where `keep_runs` and the distance keeps
    /// its alignment. Returns the pages moved. See `paging/relocate.rs`.
    ///
    /// # Errors
    ///
    /// For a range [`tables_to_move`](Self::tables_to_move) accepted, with as many frames
    /// reserved as it counted and the destination empty, none. Otherwise as
    /// `PageTable::move_pages`: on a bad range nothing moved; on `AlreadyMapped` or
    /// `OutOfMemory` part of it did (each page mapped once, at its old or its new address).
    pub fn move_pages(
        &mut self,
        reserve: &mut TableReserve,
        from: VirtAddr,
        to: VirtAddr,
        size: u64,
        keep_runs: bool,
    ) -> Result<u64, MapError> {
        let mut record = PendingFlush::new(self.table.va_range());
        let moved = self.table.move_pages(from, to, size, keep_runs, &mut reserve.0, &mut record);
        let isb = self.needs_isb(&record);
        mutant!(self.flush(&record), MoveWithoutFlush => {});
        self.release(record);
        self.make_barrier(isb);
        moved
    }

    /// The leaves of `[va, va + size)`, cut to it, as [`Unmapped`] extents (physically
    /// contiguous leaves with the same attributes joined), in address order; nothing changes.
    pub fn extents<F: FnMut(Unmapped)>(&self, va: VirtAddr, size: u64, sink: F) {
        let end = va.0.saturating_add(size);
        let mut joined = Coalescer { sink, current: None };
        let _ = self.table.walk_runs(va, size, |leaf| {
            let (s, e) = (leaf.va.0.max(va.0), (leaf.va.0 + leaf.size).min(end));
            let cut = Leaf { va: VirtAddr(s), pa: leaf.translate(VirtAddr(s)), size: e - s, ..*leaf };
            joined.push(&cut);
        });
        joined.finish();
    }

    /// [`map`](Self::map), with the table frames from `pool` first when there is one.
    fn map_with(
        &mut self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
        pool: Option<&mut crate::paging::FrameList>,
    ) -> Result<(), MapError> {
        let attrs = self.fix(attrs);
        match pool {
            None => self.table.map(va, pa, size, attrs, constraints)?,
            Some(pool) => self.table.map_from_pool(va, pa, size, attrs, constraints, pool)?,
        }
        let mut record = PendingFlush::new(self.table.va_range());
        let mut counts = BbmCounts::default();
        let mut regions = [(VirtAddr(0), 0u64); 4];
        let mut n = 0;
        let last = va.wrapping_add(size - 1);
        if self.policy.promote && !constraints.contains(Constraints::NO_BLOCKS) {
            let (a, b) = (va.align_down(BLOCK_2M), last.align_down(BLOCK_2M));
            let candidates = [a, b];
            for &r in &candidates[..if a == b { 1 } else { 2 }] {
                if self.table.stage_promote(r, &mut record, &mut counts) == Ok(true) {
                    regions[n] = (r, BLOCK_2M);
                    n += 1;
                }
            }
        }
        if self.policy.fold && !constraints.contains(Constraints::NO_CONTIGUOUS) {
            let run = crate::addr::PAGE_SIZE * crate::descriptor::CONTIGUOUS_ENTRIES as u64;
            let (a, b) = (va.align_down(run), last.align_down(run));
            let candidates = [a, b];
            for &r in &candidates[..if a == b { 1 } else { 2 }] {
                let covered = regions[..n].iter().any(|&(b, s)| r.0.wrapping_sub(b.0) < s);
                if !covered && self.table.stage_fold(r, &mut record, &mut counts) {
                    regions[n] = (r, run);
                    n += 1;
                }
            }
        }
        let isb = self.needs_isb(&record) || self.exec(attrs);
        if n > 0 {
            // The planted bug (test builds) is the kernel's old fault path: a fold or promotion
            // flushed where a new process's space had been aimed, ASID 0 with the local forms.
            mutant!(
                self.flush(&record),
                FaultFlushIgnoresTarget => self.flush_to(&record, FlushTarget::asid(0, crate::tlb::Reach::Local))
            );
            for &(r, s) in &regions[..n] {
                self.table.finish(r, s, &mut |_| {});
            }
        }
        self.release(record);
        self.stats.add(&counts);
        self.make_barrier(isb);
        Ok(())
    }

    /// Unmaps `[va, va + size)` (holes are skipped), splitting a block or clearing a contiguous
    /// run that the range cuts, with one flush for the whole range. After the flush, every
    /// removed mapping is passed to `on_unmapped` (its frames may be freed there) and emptied
    /// table frames are freed.
    ///
    /// # Errors
    ///
    /// `InvalidRange` or `Misaligned` for a bad range; `OutOfMemory` if a table for a split
    /// could not be allocated. On error nothing has changed.
    pub fn unmap<F: FnMut(Unmapped)>(
        &mut self,
        va: VirtAddr,
        size: u64,
        on_unmapped: F,
    ) -> Result<(), MapError> {
        self.run(va, size, StagedOp::<fn(Attributes) -> Attributes>::Unmap, on_unmapped)
    }

    /// [`unmap`](Self::unmap), except that the guard markers of the range stay
    /// (`MADV_DONTNEED`: the pages go, the guards do not).
    ///
    /// # Errors
    ///
    /// As [`unmap`](Self::unmap).
    pub fn discard<F: FnMut(Unmapped)>(
        &mut self,
        va: VirtAddr,
        size: u64,
        on_unmapped: F,
    ) -> Result<(), MapError> {
        self.run(va, size, StagedOp::<fn(Attributes) -> Attributes>::Discard, on_unmapped)
    }

    /// Writes a guard marker into every entry of `[va, va + size)` (which must hold no valid
    /// leaf): see [`PageTable::install_guards`]. Only invalid entries change, so there is nothing
    /// to flush.
    ///
    /// # Errors
    ///
    /// As [`PageTable::install_guards`]; on error nothing changed.
    pub fn install_guards(&mut self, va: VirtAddr, size: u64) -> Result<(), MapError> {
        self.table.install_guards(va, size)
    }

    /// Clears the guard markers of `[va, va + size)`, leaving every leaf as it is; tables this
    /// leaves empty are detached, with one flush (a walk cache may hold them).
    ///
    /// # Errors
    ///
    /// `InvalidRange` or `Misaligned` for a bad range.
    pub fn unguard(&mut self, va: VirtAddr, size: u64) -> Result<(), MapError> {
        self.run(va, size, StagedOp::<fn(Attributes) -> Attributes>::Unguard, |_| {})
    }

    /// Sets the attributes of every leaf in `[va, va + size)` to `attrs` (holes are skipped).
    /// See [`protect_with`](Self::protect_with).
    ///
    /// # Errors
    ///
    /// As [`protect_with`](Self::protect_with).
    pub fn protect(&mut self, va: VirtAddr, size: u64, attrs: Attributes) -> Result<(), MapError> {
        self.protect_with(va, size, |_| attrs)
    }

    /// Replaces the attributes `a` of every leaf in `[va, va + size)` with `change(a)` (a pure
    /// function, called more than once per leaf; for `mprotect`:
    /// `|a| a.with_permissions_of(new)`). Permission-only changes are written in place; any
    /// other change (memory type, shareability, nG) goes through break-before-make. A block or
    /// run partly in the range is split or unfolded first. One flush for the whole range.
    ///
    /// # Errors
    ///
    /// `InvalidRange`, `Misaligned`, or `OutOfMemory` (split tables). On error nothing has
    /// changed.
    pub fn protect_with<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        mut change: F,
    ) -> Result<(), MapError> {
        let user = self.kind == Kind::User;
        let op = StagedOp::Protect(move |a| {
            let n = change(a);
            if user { n.with_global(false) } else { n }
        });
        self.run(va, size, op, |_| {})
    }

    /// Whether `[va, va + size)` is known to hold no entry (`PageTable::holds_nothing`): a
    /// protection change there has nothing to do.
    pub fn holds_nothing(&mut self, va: VirtAddr, size: u64) -> bool {
        self.table.holds_nothing(va, size)
    }

    /// Changes the memory type of every leaf in `[va, va + size)` (break-before-make, one
    /// flush). See [`protect_with`](Self::protect_with).
    ///
    /// # Errors
    ///
    /// As [`protect_with`](Self::protect_with).
    pub fn set_memory_type(&mut self, va: VirtAddr, size: u64, memory: MemoryType) -> Result<(), MapError> {
        self.protect_with(va, size, |a| a.with_memory_type(memory))
    }

    /// Replaces whatever `[va, va + size)` maps by a mapping to `[pa, pa + size)` with `attrs`:
    /// the old entries are broken, one flush, then the new mapping is made. The old mappings go
    /// to `on_unmapped` after the flush. Every frame the new mapping may need is reserved before
    /// anything changes, so the call either fails with nothing changed or completes.
    ///
    /// # Errors
    ///
    /// As [`map`](Self::map), except `AlreadyMapped`.
    #[allow(clippy::too_many_arguments)]
    pub fn remap<F: FnMut(Unmapped)>(
        &mut self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
        on_unmapped: F,
    ) -> Result<(), MapError> {
        let attrs = self.fix(attrs);
        // Validates the arguments; the range is not mapped over, so nothing can be in the way.
        self.table.check_map_args(va, pa, size)?;
        let bound = self.table.remap_tables_bound(va, pa, size, constraints);
        let mut pool = self.table.reserve_frames(bound)?;
        let mut record = PendingFlush::new(self.table.va_range());
        let mut counts = BbmCounts::default();
        let op = StagedOp::<fn(Attributes) -> Attributes>::Unmap;
        if let Err(e) = self.table.stage(va, size, op, self.policy.split_contiguous, &mut record, &mut counts)
        {
            self.table.free_frames(pool);
            return Err(e);
        }
        let isb = self.needs_isb(&record) || self.exec(attrs);
        self.flush(&record);
        let mut sink = Coalescer { sink: on_unmapped, current: None };
        self.table.finish(va, size, &mut |l| sink.push(l));
        sink.finish();
        self.release(record);
        let result = self.table.map_from_pool(va, pa, size, attrs, constraints, &mut pool);
        debug_assert!(result.is_ok(), "remap: the new mapping failed after the old one was removed");
        self.table.free_frames(pool);
        self.stats.add(&counts);
        self.make_barrier(isb);
        result
    }

    /// Promotes the 2 MiB-aligned range at `va` to one block, if its level-3 table holds 512
    /// valid pages mapping one 2 MiB-aligned physical range with the same attributes:
    /// break-before-make with one invalidation of the range (one `RVAE1IS` with FEAT_TLBIRANGE;
    /// without it the 512 pages exceed the per-page bound and the plan is one whole-ASID or
    /// whole-TLB flush), then the level-3 table is freed. Returns whether it promoted.
    ///
    /// # Errors
    ///
    /// `Misaligned` if `va` is not 2 MiB aligned; `InvalidRange` outside the table's half.
    pub fn promote(&mut self, va: VirtAddr) -> Result<bool, MapError> {
        let mut record = PendingFlush::new(self.table.va_range());
        let mut counts = BbmCounts::default();
        if !self.table.stage_promote(va, &mut record, &mut counts)? {
            return Ok(false);
        }
        let isb = self.needs_isb(&record);
        self.flush(&record);
        self.table.finish(va, BLOCK_2M, &mut |_| {});
        self.release(record);
        self.stats.add(&counts);
        self.make_barrier(isb);
        Ok(true)
    }

    /// Demotes the leaf at `va`: a block is split one level (1 GiB into 2 MiB blocks, 2 MiB into
    /// pages) without contiguous hints; a page or block in a contiguous run loses the hint on its
    /// run. Translations do not change. Returns whether anything changed.
    ///
    /// # Errors
    ///
    /// `InvalidRange` if `va` is outside the table's half; `OutOfMemory` for the new table.
    pub fn demote(&mut self, va: VirtAddr) -> Result<bool, MapError> {
        if !self.table.va_range().contains(va) {
            return Err(MapError::InvalidRange);
        }
        let Some((start, size)) = self.table.demotion_range(va) else { return Ok(false) };
        let mut record = PendingFlush::new(self.table.va_range());
        let mut counts = BbmCounts::default();
        let op = StagedOp::<fn(Attributes) -> Attributes>::Demote;
        self.table.stage(start, size, op, false, &mut record, &mut counts)?;
        let isb = self.needs_isb(&record);
        self.flush(&record);
        self.table.finish(start, size, &mut |_| {});
        self.release(record);
        self.stats.add(&counts);
        self.make_barrier(isb);
        Ok(true)
    }

    /// Unmaps everything (the mappings go to `on_unmapped` after the flush) and frees every
    /// table frame, the root included. Call it only when no CPU has the table in a TTBR any
    /// more.
    pub fn destroy<F: FnMut(Unmapped)>(mut self, on_unmapped: F) -> (T, TlbIssuer<H>, P) {
        let base = self.table.va_range().base();
        // The whole half of the address space: a valid range that cuts nothing.
        let result = self.unmap(base, 1 << crate::addr::VA_BITS, on_unmapped);
        debug_assert!(result.is_ok());
        let (mut translation, record) = self.table.destroy();
        record.release(&mut translation);
        (translation, self.tlb, self.targets)
    }

    // ---- internals ----------------------------------------------------------------------------

    /// The attributes a mapping of this space gets: non-global in a user space.
    fn fix(&self, attrs: Attributes) -> Attributes {
        match self.kind {
            Kind::User => attrs.with_global(false),
            Kind::Kernel => attrs,
        }
    }

    fn exec(&self, attrs: Attributes) -> bool {
        !attrs.pxn() || !attrs.uxn()
    }

    fn needs_isb(&self, record: &PendingFlush) -> bool {
        self.kind == Kind::Kernel || record.has_executable()
    }

    /// Stage, one flush, finish, release: the common sequence of unmap, protect and demote.
    fn run<F: FnMut(Attributes) -> Attributes, S: FnMut(Unmapped)>(
        &mut self,
        va: VirtAddr,
        size: u64,
        op: StagedOp<F>,
        on_unmapped: S,
    ) -> Result<(), MapError> {
        let mut record = PendingFlush::new(self.table.va_range());
        let mut counts = BbmCounts::default();
        self.table.stage(va, size, op, self.policy.split_contiguous, &mut record, &mut counts)?;
        let isb = self.needs_isb(&record);
        self.flush(&record);
        let mut sink = Coalescer { sink: on_unmapped, current: None };
        // Every mark staging writes is a break-before-make whose invalidation the record holds;
        // a change that marked nothing (permissions only, or pages never touched) is not walked
        // again: `finish` returns at once.
        debug_assert!(record.needs_flush() || !self.table.holds_marks(), "marks staged without a flush");
        let made = self.table.finish(va, size, &mut |l| sink.push(l));
        sink.finish();
        self.release(record);
        self.stats.add(&counts);
        if made {
            self.make_barrier(isb);
        }
        Ok(())
    }

    /// Issues the one planned invalidation for `record` (nothing if it changed nothing): makes
    /// the table writes visible to every walker (`DSB ISHST`), asks the provider where the flush
    /// goes, plans and issues it, and reports what was issued to the provider's sink.
    fn flush(&mut self, record: &PendingFlush) {
        if !record.needs_flush() {
            return;
        }
        // Before the target is decided: a CPU that starts using the space after the decision
        // must walk the new tables (see [`FlushTargets`]).
        self.tlb.hw_mut().dsb_ishst();
        let target = self.targets.target();
        self.flush_to(record, target);
    }

    /// Plans and issues the invalidation for `record` (which needs one) to `target`, and reports
    /// what was issued to the provider's sink.
    fn flush_to(&mut self, record: &PendingFlush, target: FlushTarget) {
        // A global leaf in a user table is never written (`fix`), but if one were, only the
        // all-ASID forms would remove it; the kernel's entries are all global.
        let scope =
            if record.has_global() || self.kind == Kind::Kernel { Scope::Global } else { target.scope };
        let whole = FlushTarget { scope, reach: target.reach };
        let plan = match record.range() {
            Some(range) => {
                let stride = match record.min_leaf_size() {
                    BLOCK_1G => Stride::Block1G,
                    BLOCK_2M => Stride::Block2M,
                    _ => Stride::Page,
                };
                let req = TlbRequest {
                    start: range.start,
                    end: range.end_or_zero(),
                    stride,
                    scope,
                    leaf_only: record.leaf_only(),
                    reach: target.reach,
                };
                plan(&req, self.features)
            }
            None => crate::tlb::plan::full_flush(whole),
        };
        // (The issuer's own leading barrier is then redundant; it keeps the issuer correct on its
        // own, and one extra DSB per flush is cheap next to the TLBIs.)
        let issued = self.tlb.issue(&plan, self.needs_isb(record));
        self.targets.issued(&issued);
        self.stats.flushes += 1;
    }

    /// `DSB ISHST` (and `ISB`) after new entries were written, so that walkers see them. Always
    /// the inner-shareable form: a new entry may be walked by any CPU that runs the space, and
    /// which CPUs those are is decided only at flush time.
    /// Releases `record` (its detached table frames go back) once its flush is done and every
    /// entry the operation staged is finished, which debug builds check here for every
    /// operation.
    fn release(&mut self, record: PendingFlush) {
        debug_assert!(!self.table.holds_marks(), "a staged entry was left behind");
        record.release(self.table.translation_mut());
    }

    fn make_barrier(&mut self, isb: bool) {
        let hw = self.tlb.hw_mut();
        hw.dsb_ishst();
        self.stats.barriers += 1;
        if isb {
            hw.isb();
        }
    }
}
