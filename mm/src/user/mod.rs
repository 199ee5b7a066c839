//! The user-memory layer: one process's memory as the Linux memory calls and the page-fault
//! handler see it — the map of areas ([`crate::vm::VmMap`], which decides every placement) and
//! the live page table ([`crate::space::AddressSpace`], which does break-before-make and one
//! planned flush per call) — with the table effects of each call applied here.
//!
//! Why one file: the layer is one type, [`UserMemory`], whose memory calls, fault handler and
//! program loader share its private table-effect helpers (`unmap_range`, `protect_range`,
//! `map_fresh`); what stands apart is in its own file: `calls.rs` (`mremap`, `mincore`, `msync`,
//! the `mlock` family), `fork.rs`, `lazy.rs` (`MADV_FREE`), [`guard`] and [`object`].
//!
//! Why it lives in `mm` and not in the kernel: what a call does to the tables and the TLB — which
//! pages it unmaps, when a fault completes a 64 KiB run or a 2 MiB range and folds or promotes
//! it, when a frame may go back — is exactly what a strict host model has to prove, and QEMU
//! cannot (it ignores the ASID of a TLBI and caches no table entries). So the layer is generic
//! over the four seams the kernel supplies and the tests replace:
//! - [`Translation`]: table frames;
//! - [`TlbHardware`]: the TLB instructions and barriers;
//! - [`FlushTargets`]: asked at the moment of each flush which ASID and which CPUs it must
//!   reach (the kernel asks its ASID allocator for the executing CPU; no caller ever "aims" a
//!   space beforehand, so no call can flush with a target left over from another one);
//! - [`UserFrames`]: the data frames (zeroed on allocation, handed back only after the flush
//!   that covers them).
//!
//! The kernel keeps system-call decoding, copies to and from user memory, the frame allocator
//! and the ASID allocator. Every call returns Linux's errno ([`Errno`]) and no input makes it
//! panic.
//!
//! Frames: every data frame is allocated one 4 KiB page at a time (demand paging, populate, the
//! program image) and goes back one page at a time, even when the space merged pages into a
//! 2 MiB block or a contiguous run: [`UserStats::data_frames`] counts them.

mod calls;
mod fork;
pub mod guard;
mod lazy;
pub mod object;
#[cfg(test)]
mod tests;

use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, UserAccess};
use crate::paging::{Constraints, MapError, PageTable, Translation};
use crate::space::{AddressSpace, FlushTargets, Unmapped};
use crate::tlb::{TlbFeatures, TlbHardware, TlbIssuer};
use crate::vm::abi::CodeWindowInfo;
use crate::vm::map::{MadviseAction, Mapped};
use crate::vm::{Errno, Layout, Prot, VmMap, VmaFlags, flags};

/// The data frames of user memory: where they come from and how the layer fills them.
///
/// The layer calls [`free`](Self::free) only after the TLB invalidation that removed the last
/// translation of the frame has completed on every CPU that could hold it.
///
/// What an implementation guarantees (a frame is one page, [`PAGE_SIZE`] bytes, of the build's
/// granule):
/// - a frame it hands out is page-aligned, below 2^[`crate::addr::PA_BITS`], RAM the kernel
///   maps as Normal write-back memory, and used by nothing else until its last reference is
///   freed;
/// - what [`alloc_zeroed`](Self::alloc_zeroed), [`alloc_zeroed_contiguous`](Self::alloc_zeroed_contiguous),
///   [`alloc_copy_of`](Self::alloc_copy_of) and [`write`](Self::write) store is visible to every CPU before they
///   return (end with `DMB ISHST`, as Linux's `smp_wmb()` before `set_pte_at`): the layer maps
///   the frame right after, and a thread of the process on another CPU may read it through the
///   new entry at once;
/// - [`sync_icache`](Self::sync_icache) makes the frame's contents visible to instruction
///   fetch on every CPU, on hardware whose caches need it.
pub trait UserFrames {
    /// One zeroed frame (one page), or `None` when memory is exhausted.
    fn alloc_zeroed(&mut self) -> Option<PhysAddr>;

    /// Drops one reference to a frame from [`alloc_zeroed`](Self::alloc_zeroed): the frame
    /// goes back when it was the last ([`share`](Self::share) adds references).
    fn free(&mut self, pa: PhysAddr);

    /// Adds a reference to a frame this layer holds (`fork` shares it with a child); `false`
    /// when the count cannot be kept (no memory for it: `fork` fails with `ENOMEM`). The
    /// default keeps no counts, so a provider without them cannot fork.
    fn share(&mut self, _pa: PhysAddr) -> bool {
        false
    }

    /// Whether the frame has another reference than the caller's (a copy-on-write fault copies
    /// it then, and reuses it when not). The default: never.
    fn is_shared(&self, _pa: PhysAddr) -> bool {
        false
    }

    /// A fresh frame holding a copy of the frame `src` (a copy-on-write fault), or `None` when
    /// memory is exhausted; freed as one from [`alloc_zeroed`](Self::alloc_zeroed). Its own
    /// allocation: the copy overwrites every byte (and, with memory tagging, every tag), so
    /// the frame need not be zeroed first (Linux's `wp_page_copy` allocates without
    /// `__GFP_ZERO` too).
    fn alloc_copy_of(&mut self, src: PhysAddr) -> Option<PhysAddr>;

    /// Writes `data` into the frame at `pa`, from byte `offset` (`offset + data.len() <=
    /// PAGE_SIZE`).
    fn write(&mut self, pa: PhysAddr, offset: usize, data: &[u8]);

    /// Makes the frame's contents visible to instruction fetches (clean the D-cache to the point
    /// of unification, invalidate the I-cache) before it is mapped executable. The default does
    /// nothing (correct for a host model).
    fn sync_icache(&mut self, _pa: PhysAddr) {}

    /// `pages` (16 or 512) physically contiguous zeroed frames, aligned to their size, for a
    /// fault that maps a whole 64 KiB run or 2 MiB block at once; `None` when there are none
    /// (the fault then maps one page). They go back one page at a time through
    /// [`free`](Self::free). The default has none.
    fn alloc_zeroed_contiguous(&mut self, _pages: u64) -> Option<PhysAddr> {
        None
    }

    /// Frames free in the whole machine (for `SYS_MM_STATS` and the overcommit heuristic).
    fn free_frames(&self) -> u64 {
        0
    }

    /// The shared zero region (Linux's `ZERO_PAGE` and huge zero page), or `None` when there is
    /// none (every fault then takes a frame of its own). A read or execute fault on private
    /// anonymous memory maps a page of it read-only instead of taking a frame, or, where the
    /// fault could have mapped a whole 64 KiB run or 2 MiB block and the region is that large,
    /// the aligned part of the region that size, so memory read and never written costs nothing;
    /// the first write takes a zeroed frame for its page as a copy-on-write fault does (a block
    /// or run is split for it, the rest staying on the region).
    ///
    /// What an implementation guarantees: the same region for every memory and for the whole
    /// life of the kernel, pages of zeros that nothing ever writes, visible to instruction fetch
    /// (they may be mapped executable), [`ZeroRegion::is_well_formed`]. The layer never passes a
    /// page of it to [`free`](Self::free), [`share`](Self::share), [`alloc_copy_of`](Self::alloc_copy_of) or
    /// [`write`](Self::write), and never counts one in [`UserStats::data_frames`].
    fn zero_region(&self) -> Option<ZeroRegion> {
        None
    }
}

/// The shared zero region: `len` bytes of zeros from `base`, each page of which is a zero page
/// (so a zero block split into pages gives pages that all are zero pages, each at its own
/// address). One page where the kernel could not have more; 2 MiB, 2 MiB aligned, where it
/// could (Linux's huge zero page is one PMD of zeros beside the small zero page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZeroRegion {
    /// The first page.
    pub base: PhysAddr,
    /// Bytes: a power of two, at least one page.
    pub len: u64,
}

impl ZeroRegion {
    /// A region of the one page at `base`.
    pub const fn page(base: PhysAddr) -> Self {
        Self { base, len: PAGE_SIZE }
    }

    /// Whether the region can be mapped as the layer maps it: `len` a power of two of at least
    /// one page and `base` aligned to it (a part of it mapped as a run or block must be aligned
    /// to its size).
    pub const fn is_well_formed(&self) -> bool {
        self.len.is_power_of_two() && self.len >= PAGE_SIZE && self.base.0.is_multiple_of(self.len)
    }

    /// Whether the page (or byte) at `pa` lies in the region.
    pub const fn contains(&self, pa: PhysAddr) -> bool {
        pa.0.wrapping_sub(self.base.0) < self.len
    }

    /// How many pages of the physical range `[pa, pa + len)` lie in the region.
    pub fn pages_in(&self, pa: u64, len: u64) -> u64 {
        let lo = pa.max(self.base.0);
        let hi = pa.saturating_add(len).min(self.base.0 + self.len);
        hi.saturating_sub(lo) / PAGE_SIZE
    }

    /// The part of the region that maps the `size`-aligned range at `va` whole (`size` at most
    /// `len`): the same offset modulo `len`, so the part is aligned to `size` as a block or run
    /// needs.
    const fn part_for(&self, va: u64, size: u64) -> PhysAddr {
        PhysAddr(self.base.0 + (va & (self.len - 1) & !(size - 1)))
    }
}

/// Whether a fault may map more than the faulting page (a per-process switch).
///
/// A fault in fresh anonymous memory can map a whole 64 KiB run (with the contiguous hint) or a
/// whole 2 MiB block at once, in its final form, from contiguous frames: every entry goes from
/// invalid to valid, so no break-before-make and no TLBI is needed, where mapping page by page
/// and folding or promoting afterwards costs a break-before-make and a flush per run or block.
/// The price is memory: a program that touches one byte per 64 KiB gets 16 pages per touch.
/// So by default ([`LargeFaults::DEFAULT`]) a fault maps runs only of the shared zero region
/// (which cost no memory), and fresh frames page by page, as Linux 6.1, which maps no anonymous
/// 64 KiB folio (its 2 MiB THP aside, which the blocks here follow). Measured with
/// `scripts/bench --only 11`, eight python3 processes' `Pss` summed: 51,360 kB with fresh runs
/// on every fault, 49,628 kB with runs only where the run below was full, 49,040 kB with none;
/// Linux 49,034 kB (docs/benchmark-notes.md §11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LargeFaults {
    /// Map a whole 64 KiB run when the aligned run lies inside the mapping and none of its
    /// pages is present.
    pub runs: bool,
    /// With `runs`: runs of fresh frames too, not only of the shared zero region.
    pub fresh_runs: bool,
    /// Map a whole 2 MiB block when the aligned block lies inside the mapping, none of its pages
    /// is present, and the mapping asked for it (`MADV_HUGEPAGE`) or free memory is plentiful
    /// ([`BLOCK_FREE_FRAMES_FACTOR`] blocks' worth free).
    pub blocks: bool,
}

impl LargeFaults {
    /// Blocks, and runs of the shared zero region: the default.
    pub const DEFAULT: Self = Self { runs: true, fresh_runs: false, blocks: true };
    /// Runs and blocks wherever the mapping allows them.
    pub const ALL: Self = Self { runs: true, fresh_runs: true, blocks: true };
    /// One page per fault (and fold or promote afterwards, as the space's policy says).
    pub const NONE: Self = Self { runs: false, fresh_runs: false, blocks: false };
}

/// `MAP_POPULATE` stops populating while no more than this many frames (16 MiB) are free in the
/// machine.
pub const POPULATE_RESERVE_FRAMES: u64 = 4096;

/// A fault maps a 2 MiB block without `MADV_HUGEPAGE` only while at least this many blocks'
/// worth of frames (512 each) are free in the machine: 64 blocks = 128 MiB.
pub const BLOCK_FREE_FRAMES_FACTOR: u64 = 64;

/// How a user access faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Execute,
}

/// Why a fault is not resolved by demand paging: the kernel turns it into the signal Linux
/// sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No mapping covers the address (`SIGSEGV`, `SEGV_MAPERR`).
    NoMapping,
    /// The mapping's protection forbids the access (`SIGSEGV`, `SEGV_ACCERR`).
    Protection {
        /// The mapping's protection.
        prot: Prot,
    },
    /// No frame (or no table frame) could be had: Linux's out-of-memory path (the kernel ends
    /// the process with `SIGKILL`).
    OutOfMemory,
    /// The page lies at or past the end of the shared memory object the mapping maps
    /// (`SIGBUS`, `BUS_ADRERR`, as Linux for an access beyond the end of a shmem file).
    Bus,
    /// The page is a guard region (`MADV_GUARD_INSTALL`): `SIGSEGV`, `SEGV_MAPERR` on arm64, as
    /// Linux reports a `VM_FAULT_SIGSEGV`.
    Guard,
}

/// Counters of one process's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserStats {
    /// Page faults resolved by demand paging.
    pub faults: u64,
    /// Faults that mapped a whole 64 KiB run at once.
    pub fault_runs: u64,
    /// Faults that mapped a whole 2 MiB block at once.
    pub fault_blocks: u64,
    /// 2 MiB promotions (a level-3 table replaced by a block).
    pub promotions: u64,
    /// Blocks split into smaller leaves.
    pub demotions: u64,
    /// 64 KiB runs given the contiguous hint.
    pub folds: u64,
    /// Contiguous runs whose hint was cleared.
    pub unfolds: u64,
    /// Pages of a file mapping mapped beside a read or execute fault because the file's page
    /// cache held them already (fault-around).
    pub fault_around_pages: u64,
    /// Copy-on-write faults that copied the page.
    pub cow_copies: u64,
    /// Copy-on-write faults that found the last reference and only made it writable.
    pub cow_reuses: u64,
    /// Data frames held now (a frame shared with another memory counts in each; the shared zero
    /// frame never counts).
    pub data_frames: u64,
    /// Pages that map the shared zero region now (read-only; a zero block counts each of its
    /// pages).
    pub zero_pages: u64,
    /// Read or execute faults that mapped the shared zero region.
    pub zero_faults: u64,
    /// Of those, the faults that mapped a whole 64 KiB run or 2 MiB block of it at once.
    pub zero_large_faults: u64,
    /// Table frames held now (the root included).
    pub table_frames: u64,
}

/// One process's memory (module documentation).
pub struct UserMemory<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> {
    space: AddressSpace<T, H, P>,
    vm: VmMap,
    frames: D,
    faults: u64,
    fault_runs: u64,
    fault_blocks: u64,
    data_frames: u64,
    /// The shared zero region ([`UserFrames::zero_region`]), asked once.
    zero: Option<ZeroRegion>,
    /// Pages mapping [`zero`](Self::zero) now, faults that mapped it, and those of them that
    /// mapped a run or block.
    zero_pages: u64,
    zero_faults: u64,
    zero_large_faults: u64,
    large: LargeFaults,
    /// `mlockall(MCL_FUTURE)`: the lock flags every new area gets (Linux's `mm->def_flags`).
    lock_future: Option<VmaFlags>,
    /// Took part in a fork: its private pages may be shared, so `mprotect` leaves them
    /// read-only and the first write decides (copy or reuse). (Private mappings of a memory
    /// object are told apart area by area, from the flags `mprotect` passes down: every
    /// process maps its program that way, so a flag set by them would hold in every process.)
    forked: bool,
    fault_around_pages: u64,
    cow_copies: u64,
    cow_reuses: u64,
    /// The object-backed ranges (memfd mappings).
    backings: object::Backings,
    /// The pages `MADV_FREE` left for reclaim (`lazy`).
    lazy: lazy::PageRanges,
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> core::fmt::Debug
    for UserMemory<T, H, P, D>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UserMemory")
            .field("space", &self.space)
            .field("mappings", &self.vm.map_count())
            .field("faults", &self.faults)
            .field("data_frames", &self.data_frames)
            .finish()
    }
}

/// The page-table attributes of a user mapping with `prot`, or `None` for `PROT_NONE`.
pub fn user_attrs(prot: Prot) -> Option<Attributes> {
    let access = match (prot.read() || prot.write() || prot.exec(), prot.write(), prot.exec()) {
        (false, _, _) => return None,
        (_, true, true) => UserAccess::ReadWriteExecute,
        (_, true, false) => UserAccess::ReadWrite,
        (_, false, true) => UserAccess::ReadExecute,
        (_, false, false) => UserAccess::ReadOnly,
    };
    // PROT_BTI guards executable pages only (Linux: VM_ARM64_BTI has meaning with VM_EXEC);
    // PROT_MTE selects the tagged memory type (Linux's `arm64_calc_vm_prot_bits`: VM_MTE gives
    // PROT_NORMAL_TAGGED), which differs from the untagged one in AttrIndx, so adding or
    // removing it on a live page is break-before-make (`Attributes::may_change_in_place_to`).
    Some(
        Attributes::user(access)
            .with_guarded(prot.contains(Prot::BTI) && prot.exec())
            .with_tagged(prot.contains(Prot::MTE)),
    )
}

/// Whether `prot` allows `access` (arm64 Linux: every readable, writable or executable page may
/// be read; `PROT_WRITE` implies read).
pub fn allows(prot: Prot, access: Access) -> bool {
    match access {
        Access::Read => prot.read() || prot.write() || prot.exec(),
        Access::Write => prot.write(),
        Access::Execute => prot.exec(),
    }
}

impl<T: Translation, H: TlbHardware, P: FlushTargets, D: UserFrames> UserMemory<T, H, P, D> {
    /// An empty user address space over `table` (a fresh, empty lower-half table) with the
    /// placement `layout`. `targets` is asked at each flush where it goes.
    pub fn new(
        table: PageTable<T>,
        issuer: TlbIssuer<H>,
        features: TlbFeatures,
        targets: P,
        frames: D,
        layout: Layout,
    ) -> Self {
        let space = AddressSpace::user(table, issuer, features, targets);
        let zero = frames.zero_region();
        debug_assert!(
            zero.is_none_or(|z| z.is_well_formed()),
            "a zero region the layer cannot map: {zero:x?}"
        );
        let zero = zero.filter(ZeroRegion::is_well_formed);
        Self {
            space,
            vm: VmMap::new(layout),
            frames,
            faults: 0,
            fault_runs: 0,
            fault_blocks: 0,
            data_frames: 0,
            zero,
            zero_pages: 0,
            zero_faults: 0,
            zero_large_faults: 0,
            large: LargeFaults::DEFAULT,
            lock_future: None,
            forked: false,
            fault_around_pages: 0,
            cow_copies: 0,
            cow_reuses: 0,
            backings: object::Backings::new(),
            lazy: lazy::PageRanges::new(),
        }
    }

    /// The live address space (queries, `root_pa` for TTBR0).
    pub fn space(&self) -> &AddressSpace<T, H, P> {
        &self.space
    }

    /// The flush-target provider, mutably: a `vfork` child runs on its parent's memory with its
    /// own ASID, so the provider follows the memory to the child and back.
    pub fn targets_mut(&mut self) -> &mut P {
        self.space.targets_mut()
    }

    /// The map of areas.
    pub fn vm(&self) -> &VmMap {
        &self.vm
    }

    /// The map of areas, mutably: for placement decisions with no table effect (the code window
    /// set-up, `SYS_MMAP_NEAR` with no populate).
    pub fn vm_mut(&mut self) -> &mut VmMap {
        &mut self.vm
    }

    /// The data-frame provider.
    pub fn frames(&self) -> &D {
        &self.frames
    }

    /// Whether faults map whole runs and blocks.
    pub fn large_faults(&self) -> LargeFaults {
        self.large
    }

    /// Sets whether faults map whole runs and blocks (pages already mapped stay as they are).
    pub fn set_large_faults(&mut self, large: LargeFaults) {
        self.large = large;
    }

    /// The counters.
    pub fn stats(&self) -> UserStats {
        let s = self.space.stats();
        UserStats {
            faults: self.faults,
            fault_runs: self.fault_runs,
            fault_blocks: self.fault_blocks,
            promotions: s.promotions,
            demotions: s.demotions,
            folds: s.folds,
            unfolds: s.unfolds,
            fault_around_pages: self.fault_around_pages,
            cow_copies: self.cow_copies,
            cow_reuses: self.cow_reuses,
            data_frames: self.data_frames,
            zero_pages: self.zero_pages,
            zero_faults: self.zero_faults,
            zero_large_faults: self.zero_large_faults,
            table_frames: self.space.table().stats().tables_in_use(),
        }
    }

    // ---- faults ---------------------------------------------------------------------------

    /// Resolves a translation fault at `addr`: allocates a zeroed frame for its page and maps it
    /// with the area's protection. Invalid to valid needs no TLBI; when the new page completes a
    /// 64 KiB run or a 2 MiB range the space folds or promotes it with break-before-make and one
    /// flush, aimed where [`FlushTargets`] says at that moment. A page some other thread
    /// resolved first is left as it is (the access is retried).
    ///
    /// # Errors
    ///
    /// [`Fault::NoMapping`], [`Fault::Protection`], [`Fault::OutOfMemory`], [`Fault::Guard`] for
    /// a guard marker, [`Fault::Bus`] past the end of a memory object.
    pub fn fault(&mut self, addr: u64, access: Access) -> Result<(), Fault> {
        // Below a mapping that grows down, the mapping grows first (or the fault is
        // `NoMapping`: SIGSEGV, SEGV_MAPERR), as Linux's `expand_stack`; no kernel memory for
        // the growth is `OutOfMemory`, which the kernel retries or answers as for any fault.
        let vma = match self.vm.find(addr) {
            Some(v) => *v,
            None => match self.vm.grow_down(addr) {
                Ok(v) => v,
                Err(crate::vm::map::NoGrowth::NoMemory) => return Err(Fault::OutOfMemory),
                Err(_) => return Err(Fault::NoMapping),
            },
        };
        let prot = vma.prot;
        if !allows(prot, access) {
            return Err(Fault::Protection { prot });
        }
        let page = addr & !(PAGE_SIZE - 1);
        match self.fault_page(page, access, vma) {
            // Memory pressure: the lazily freed pages go, then one more try.
            Err(Fault::OutOfMemory) if self.reclaim_lazily_freed() => self.fault(addr, access),
            r => r,
        }
    }

    /// [`fault`](Self::fault) at `page` of the area `vma`, whose protection allows `access`.
    fn fault_page(&mut self, page: u64, access: Access, vma: crate::vm::Vma) -> Result<(), Fault> {
        let prot = vma.prot;
        if let Some(leaf) = self.space.query(VirtAddr(page)) {
            if access == Access::Write && !leaf.attrs.access().writable() {
                let shared = vma.flags.contains(VmaFlags::SHARED);
                let range = (vma.start, vma.end);
                return self.write_fault(page, &leaf, range, prot, shared);
            }
            return Ok(());
        }
        if self.guarded(page) {
            return Err(Fault::Guard);
        }
        if vma.flags.contains(VmaFlags::OBJECT) {
            let shared = vma.flags.contains(VmaFlags::SHARED);
            return self.object_fault(page, access, prot, shared, (vma.start, vma.end));
        }
        let attrs = user_attrs(prot).ok_or(Fault::Protection { prot })?;
        let (vstart, vend, vflags) = (vma.start, vma.end, vma.flags);
        let run = crate::descriptor::CONTIGUOUS_ENTRIES as u64 * PAGE_SIZE;
        // A read or an instruction fetch of private anonymous memory never written: the shared
        // zero region, read-only, as Linux's `do_anonymous_page` (both for a load and a fetch;
        // shared anonymous memory is one object for every process mapping it, so it never
        // gets the zero region). Where a write would have mapped a whole block or run, the
        // region's part of that size, in one fault, as Linux maps its huge zero page where a
        // huge page could go (`do_huge_pmd_anonymous_page`); with 16 and 64 KiB pages the block
        // is larger than the region and the run (2 MiB) is what fits. Else one zero page.
        if access != Access::Write
            && let Some(zero) = self.zero
            && !vflags.contains(VmaFlags::SHARED)
        {
            for size in [crate::addr::BLOCK_2M, run] {
                if size <= zero.len && self.large_candidate(vstart, vend, vflags, page, size, false) {
                    let start = page & !(size - 1);
                    // (No table frame for it, or a guard marker in the range: one page then.)
                    if self.map_zero(start, zero.part_for(start, size), size, attrs).is_ok() {
                        return Ok(());
                    }
                }
            }
            return self.map_zero(page, zero.base, PAGE_SIZE, attrs);
        }
        for size in [crate::addr::BLOCK_2M, run] {
            if self.large_candidate(vstart, vend, vflags, page, size, true) {
                let start = page & !(size - 1);
                let pages = size / PAGE_SIZE;
                if let Some(first) = self.frames.alloc_zeroed_contiguous(pages) {
                    if first.0 % size == 0 && self.map_fresh(start, first, size, attrs, prot) {
                        // Mapped writable: no longer free (a write would not fault).
                        self.forget_free(start, start + size);
                        if size == crate::addr::BLOCK_2M {
                            self.fault_blocks += 1;
                        } else {
                            self.fault_runs += 1;
                        }
                        return Ok(());
                    }
                    for i in 0..pages {
                        self.frames.free(PhysAddr(first.0 + i * PAGE_SIZE));
                    }
                }
            }
        }
        let frame = self.frames.alloc_zeroed().ok_or(Fault::OutOfMemory)?;
        if self.map_fresh(page, frame, PAGE_SIZE, attrs, prot) {
            self.cancel_free(page);
            Ok(())
        } else {
            // Nothing was mapped (out of table frames): the frame goes straight back.
            self.frames.free(frame);
            Err(Fault::OutOfMemory)
        }
    }

    /// Maps `[va, va + size)` (nothing of it present) to the zero region's pages from `zero`,
    /// read-only whatever the area's protection: a write must fault and take a frame of its own
    /// ([`fork`] module: the write fault, which splits a block or run for it). Invalid to valid:
    /// no TLBI. No page of it is counted among the data frames.
    fn map_zero(&mut self, va: u64, zero: PhysAddr, size: u64, attrs: Attributes) -> Result<(), Fault> {
        let planted_writable =
            mutant!(false, ZeroEntryWritable => size == PAGE_SIZE, ZeroBlockWritable => size > PAGE_SIZE);
        let attrs = if planted_writable { attrs } else { fork::write_protected(attrs) };
        self.space.map(VirtAddr(va), zero, size, attrs, Constraints::NONE).map_err(|_| Fault::OutOfMemory)?;
        self.zero_pages += size / PAGE_SIZE;
        self.zero_faults += 1;
        self.zero_large_faults += u64::from(size > PAGE_SIZE);
        self.faults += 1;
        Ok(())
    }

    /// Hands back the frames of the unmapped extent `u` one page at a time, after the flush that
    /// covered it, except the pages of the shared zero region, which are never freed. An extent
    /// may join physically contiguous leaves, so it may hold zero pages and data frames beside
    /// them (a provider may hand out the frames next to the region). Returns `(data frames
    /// freed, zero pages gone)`.
    fn release(frames: &mut D, zero: Option<ZeroRegion>, u: &Unmapped) -> (u64, u64) {
        let pages = u.size / PAGE_SIZE;
        if zero.is_none_or(|z| z.pages_in(u.pa.0, u.size) == 0) {
            // The common case, one comparison per extent rather than per page.
            for i in 0..pages {
                frames.free(PhysAddr(u.pa.0 + i * PAGE_SIZE));
            }
            return (pages, 0);
        }
        let mut zeros = 0;
        for i in 0..pages {
            let pa = PhysAddr(u.pa.0 + i * PAGE_SIZE);
            if zero.is_some_and(|z| z.contains(pa)) {
                zeros += 1;
                // (The second planted bug: a layer that knew only the region's first page.)
                let planted_free = mutant!(false, ZeroFreedAtUnmap => true, ZeroBlockPageFreed => zero.is_some_and(|z| z.base != pa));
                if planted_free {
                    frames.free(pa);
                }
            } else {
                frames.free(pa);
            }
        }
        (pages - zeros, zeros)
    }

    /// How many pages of the physical range `[pa, pa + len)` are pages of the shared zero region.
    fn zero_pages_in(&self, pa: u64, len: u64) -> u64 {
        self.zero.map_or(0, |z| z.pages_in(pa, len))
    }

    /// Whether `[pa, pa + len)` holds a page of the shared zero region.
    fn covers_zero(&self, pa: u64, len: u64) -> bool {
        self.zero_pages_in(pa, len) != 0
    }

    /// Whether `pa` is a page of the shared zero region.
    fn is_zero_page(&self, pa: PhysAddr) -> bool {
        self.zero.is_some_and(|z| z.contains(pa))
    }

    /// Whether some present page of `[start, end)` maps the shared zero region.
    fn holds_zero(&self, start: u64, end: u64) -> bool {
        if self.zero_pages == 0 {
            return false;
        }
        let mut found = false;
        let _ = self.space.table().walk(VirtAddr(start), end - start, |leaf| {
            found |= self.covers_zero(leaf.pa.0, leaf.size);
        });
        found
    }

    /// Whether a fault at `page` of the mapping `[vstart, vend)` may map the whole aligned
    /// `size` (64 KiB run or 2 MiB block) around it: private anonymous memory that is not a
    /// stack, the aligned range inside the mapping and nothing of it present, the switch and the
    /// mapping's advice allowing it, and for a block either `MADV_HUGEPAGE` or plenty of free
    /// memory.
    ///
    /// With `takes_frames` false (the zero region's part is mapped, which costs no memory) the
    /// free-memory condition does not apply: Linux maps its huge zero page wherever a huge page
    /// may go.
    fn large_candidate(
        &self,
        vstart: u64,
        vend: u64,
        vflags: VmaFlags,
        page: u64,
        size: u64,
        takes_frames: bool,
    ) -> bool {
        let block = size == crate::addr::BLOCK_2M;
        let allowed = if block { self.large.blocks } else { self.large.runs };
        let kind_ok = !vflags.contains(VmaFlags::NOHUGEPAGE)
            && !vflags.contains(VmaFlags::SHARED)
            && !vflags.contains(VmaFlags::STACK)
            && !vflags.contains(VmaFlags::IMAGE);
        let start = page & !(size - 1);
        let inside = start >= vstart && start.checked_add(size).is_some_and(|e| e <= vend);
        if !allowed || !kind_ok || !inside {
            return false;
        }
        if block
            && takes_frames
            && !vflags.contains(VmaFlags::HUGEPAGE)
            && self.frames.free_frames() < BLOCK_FREE_FRAMES_FACTOR * (size / PAGE_SIZE)
        {
            return false;
        }
        if !block && takes_frames && !self.large.fresh_runs {
            return false;
        }
        let mut present = false;
        let _ = self.space.table().walk(VirtAddr(start), size, |_| present = true);
        !present
    }

    /// Maps `[va, va + size)` to fresh frames from `pa` (invalid to valid: no TLBI; the space
    /// may still fold or promote what a single page completes). Counts the frames. Returns
    /// whether it mapped.
    fn map_fresh(&mut self, va: u64, pa: PhysAddr, size: u64, attrs: Attributes, prot: Prot) -> bool {
        let pages = size / PAGE_SIZE;
        if prot.exec() {
            // The I-cache must not hold stale lines for the frames' previous life.
            for i in 0..pages {
                self.frames.sync_icache(PhysAddr(pa.0 + i * PAGE_SIZE));
            }
        }
        if self.space.map(VirtAddr(va), pa, size, attrs, Constraints::NONE).is_err() {
            return false;
        }
        self.data_frames += pages;
        self.faults += 1;
        true
    }

    /// Faults in every page of `[start, end)` that is not present (`MAP_POPULATE`,
    /// `MADV_POPULATE_*`), stopping at the first failure.
    fn populate(&mut self, start: u64, end: u64, access: Access) -> Result<(), Fault> {
        let mut page = start & !(PAGE_SIZE - 1);
        while page < end {
            page = self.fault_in(page, access)?;
        }
        Ok(())
    }

    /// [`fault`](Self::fault) at `page` for a population, returning where the next one starts:
    /// past the whole leaf that now maps `page`. A fault may map a 2 MiB block or a 64 KiB run
    /// at once (a fresh one, or the shared zero region's part: populating read-only private
    /// memory maps the zero block); stepping page by page over it would walk the area map and
    /// the tables 512 times per block for nothing. Populating 1 GiB of read-only memory is 512
    /// steps, not 262,144.
    pub(super) fn fault_in(&mut self, page: u64, access: Access) -> Result<u64, Fault> {
        self.fault(page, access)?;
        let past_leaf = self.space.query(VirtAddr(page)).map_or(0, |leaf| {
            // A run with the contiguous hint was mapped by one fault too (with 16 and 64 KiB
            // pages the zero region's part is a 2 MiB run): step past the whole aligned run.
            let span = if leaf.contiguous {
                let entries =
                    crate::granule::Format::BUILD.granule.contiguous_entries(leaf.level as i32).unwrap_or(1);
                leaf.size * u64::from(entries)
            } else {
                leaf.size
            };
            (leaf.va.0 & !(span - 1)) + span
        });
        Ok(past_leaf.max(page + PAGE_SIZE))
    }

    // ---- table effects --------------------------------------------------------------------

    /// Unmaps `[start, end)` (holes are fine), its guard markers with it, with one flush, then
    /// frees the data frames: they are handed back only after the flush has completed.
    fn unmap_range(&mut self, start: u64, end: u64) {
        self.remove_pages(start, end, true);
    }

    /// [`unmap_range`](Self::unmap_range) keeping the guard markers (`MADV_DONTNEED`).
    fn discard_range(&mut self, start: u64, end: u64) {
        self.remove_pages(start, end, false);
    }

    fn remove_pages(&mut self, start: u64, end: u64, with_guards: bool) {
        if start >= end {
            return;
        }
        self.forget_free(start, end);
        let frames = &mut self.frames;
        let held = &mut self.data_frames;
        let (zero, zero_pages) = (self.zero, &mut self.zero_pages);
        let free = |u: Unmapped| {
            let (freed, zeros) = Self::release(frames, zero, &u);
            *held -= freed;
            *zero_pages -= zeros;
        };
        let (va, len) = (VirtAddr(start), end - start);
        let result =
            if with_guards { self.space.unmap(va, len, free) } else { self.space.discard(va, len, free) };
        // The range comes from the area map: in the lower half, page aligned. A split of a block
        // needs a table frame; user spaces hold no blocks they did not promote from pages, so a
        // failure here would leave pages mapped that the area map no longer has.
        debug_assert!(result.is_ok(), "unmap of [{start:#x}, {end:#x}) failed: {result:?}");
    }

    /// Changes the protection of the present pages of `[start, end)` (AP, PXN, UXN and GP in
    /// place, as the architecture allows; the memory type by break-before-make), one flush. `PROT_NONE` keeps the pages (a later `mprotect` must
    /// find their data) but makes them inaccessible from EL0.
    /// `private_object`: some area of the range maps a memory object privately.
    fn protect_range(
        &mut self,
        start: u64,
        end: u64,
        prot: Prot,
        private_object: bool,
    ) -> Result<(), MapError> {
        if start >= end {
            return Ok(());
        }
        // A page made writable here would not fault on its next write: no longer free.
        self.forget_free(start, end);
        // Memory never touched (the common mprotect of a reservation): no entry to change.
        if self.space.holds_nothing(VirtAddr(start), end - start) {
            return Ok(());
        }
        let mut attrs = user_attrs(prot).unwrap_or_else(|| Attributes::kernel_rodata().with_global(false));
        if prot.write() && (self.forked || private_object || self.holds_zero(start, end)) {
            // A page may be shared with a parent or child, be a page-cache frame a private
            // mapping shares with its object, or be the shared zero frame: it stays read-only,
            // and the first write copies it (or takes a zeroed frame) or, if it is the last
            // reference, makes it writable (Linux keeps such pages read-only in `mprotect` too,
            // `can_change_pte_writable`). Anywhere else every page is this memory's alone and
            // becomes writable at once: a JIT's RX -> RW -> write cycle takes no fault.
            attrs = mutant!(fork::write_protected(attrs), ObjectPageWritableAtMprotect => {
                if self.forked || self.holds_zero(start, end) { fork::write_protected(attrs) } else { attrs }
            });
        }
        // The permissions change in place; PROT_MTE added (it is never removed:
        // `Prot::kept_from`) also changes the memory type, which the space makes by
        // break-before-make.
        let tagged = attrs.tagged();
        self.space
            .protect_with(VirtAddr(start), end - start, |a| a.with_permissions_of(attrs).with_tagged(tagged))
    }

    // ---- the memory calls -----------------------------------------------------------------

    /// `mmap(addr, len, prot, flags, fd, offset)`. There are no files: a mapping that is not
    /// anonymous names a descriptor this process does not have (`EBADF`), after the offset check
    /// that arm64's `sys_mmap` makes first (`EINVAL` for an offset that is not page aligned).
    ///
    /// # Errors
    ///
    /// Linux's errno values, in Linux's order.
    pub fn mmap(
        &mut self,
        addr: u64,
        len: u64,
        prot: u64,
        map_flags: u64,
        fd: i32,
        offset: u64,
    ) -> Result<u64, Errno> {
        let map_flags = map_flags & !(flags::MAP_OBJECT | flags::MAP_NOMAYWRITE);
        if map_flags & flags::MAP_ANONYMOUS == 0 {
            if offset & (PAGE_SIZE - 1) != 0 {
                return Err(Errno::EINVAL);
            }
            if fd >= 0 {
                return Err(Errno::EBADF);
            }
        }
        self.backings.reserve(1)?;
        let mapped: Mapped = self.vm.mmap(addr, len, prot, map_flags, fd, offset)?;
        self.finish_mmap(&mapped, map_flags, None);
        Ok(mapped.addr)
    }

    /// The table effects of a new mapping: what a `MAP_FIXED` replaced is unmapped (one flush),
    /// the object-backed ranges follow, then `MAP_POPULATE` and the locks. Room for one more
    /// backed range was reserved.
    pub(super) fn finish_mmap(&mut self, mapped: &Mapped, map_flags: u64, backing: Option<object::Backing>) {
        if let (Some(first), Some(last)) = (mapped.replaced.first(), mapped.replaced.last()) {
            // MAP_FIXED over existing mappings: one call over the whole span, one flush.
            let (start, end) = (first.start, last.end);
            self.unmap_range(start, end);
        }
        self.backings.remove(mapped.addr, mapped.addr + mapped.len, drop);
        if let Some(b) = backing {
            self.backings.insert(b);
        }
        if mapped.populate {
            // Best effort, as Linux's MAP_POPULATE: a failure leaves the rest to demand paging,
            // and it stops before the machine's last frames (a huge MAP_POPULATE must not take
            // the memory every other process needs for its next fault).
            let access = if mapped.prot.write() { Access::Write } else { Access::Read };
            let mut page = mapped.addr;
            while page < mapped.addr + mapped.len && self.may_populate() {
                match self.fault_in(page, access) {
                    Ok(next) => page = next,
                    Err(_) => break,
                }
            }
        }
        let mut lock = self.lock_future.unwrap_or(VmaFlags::empty());
        if map_flags & flags::MAP_LOCKED != 0 {
            lock = lock.union(VmaFlags::LOCKED);
        }
        if !lock.is_empty() {
            self.lock_new(mapped.addr, mapped.addr + mapped.len, lock);
        }
    }

    /// Whether a population (`MAP_POPULATE`, a lock) may take another frame: more than the
    /// machine's last [`POPULATE_RESERVE_FRAMES`] are free, if need be after this process's
    /// lazily freed pages are reclaimed (Linux's direct reclaim takes `MADV_FREE` pages before an
    /// allocation gives up; a fault does the same in [`fault`](Self::fault)).
    pub(super) fn may_populate(&mut self) -> bool {
        self.frames.free_frames() > POPULATE_RESERVE_FRAMES
            || (self.reclaim_lazily_freed() && self.frames.free_frames() > POPULATE_RESERVE_FRAMES)
    }

    /// `munmap(addr, len)`: one flush for the whole range, however many areas it covered.
    ///
    /// # Errors
    ///
    /// As Linux (`EINVAL` for a bad range).
    pub fn munmap(&mut self, addr: u64, len: u64) -> Result<(), Errno> {
        self.backings.reserve(1)?;
        let removed = self.vm.munmap(addr, len)?;
        if let (Some(first), Some(last)) = (removed.first(), removed.last()) {
            let (start, end) = (first.start, last.end);
            self.unmap_range(start, end);
            self.backings.remove(start, end, drop);
        }
        Ok(())
    }

    /// `mprotect(addr, len, prot)`: every area's change in place, then one flush.
    ///
    /// # Errors
    ///
    /// As Linux (`EINVAL`, `ENOMEM` for a hole after changing what precedes it, `EACCES`);
    /// `ENOMEM` if splitting a block or run needed a table frame that could not be had.
    pub fn mprotect(&mut self, addr: u64, len: u64, prot: u64) -> Result<(), Errno> {
        // Written in place: a move of the 88-byte answer is a call to `memcpy` on the kernel's
        // strict-alignment target.
        let mut protected = crate::vm::map::Protected::default();
        self.vm.mprotect_into(addr, len, prot, &mut protected)?;
        // Linux gives the whole range one protection: one call, one flush. (Should the changes
        // ever differ, each gets its own call.)
        let changes = &protected.changes;
        let uniform = changes.windows(2).all(|w| w[0].new == w[1].new && w[0].end == w[1].start);
        let mut table_error = None;
        match (changes.first(), changes.last()) {
            (Some(first), Some(last)) if uniform => {
                let (start, end, new) = (first.start, last.end, first.new);
                let private_object = changes.iter().any(|c| c.flags.private_object());
                table_error = self.protect_range(start, end, new, private_object).err();
            }
            _ => {
                for i in 0..protected.changes.len() {
                    let c = protected.changes[i];
                    if let Err(e) = self.protect_range(c.start, c.end, c.new, c.flags.private_object()) {
                        table_error = Some(e);
                    }
                }
            }
        }
        if table_error.is_some() {
            return Err(Errno::ENOMEM);
        }
        protected.error.map_or(Ok(()), Err)
    }

    /// `madvise(addr, len, advice)`: `MADV_DONTNEED` drops the pages (they read zero next time),
    /// `MADV_FREE` leaves them for reclaim under memory pressure (`lazy`); `MADV_WILLNEED` on anonymous memory does nothing, as on Linux (there is
    /// no backing store to read ahead from); `MADV_POPULATE_READ`/`WRITE` fault the pages in and
    /// fail with `ENOMEM` when they cannot.
    ///
    /// # Errors
    ///
    /// As Linux.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: u64) -> Result<(), Errno> {
        use crate::vm::advice::{MADV_COLD, MADV_DONTNEED, MADV_FREE, MADV_PAGEOUT};
        // Linux (`can_madv_lru_vma`): these stop with EINVAL at a locked area; the areas before
        // it get the advice, and a hole before it does not change the answer.
        if matches!(advice, guard::MADV_GUARD_INSTALL | guard::MADV_GUARD_REMOVE) {
            return self.madvise_guard(addr, len, advice == guard::MADV_GUARD_INSTALL);
        }
        let reclaim = matches!(advice, MADV_DONTNEED | MADV_FREE | MADV_COLD | MADV_PAGEOUT);
        let end = addr.checked_add(len.checked_add(PAGE_SIZE - 1).unwrap_or(0) & !(PAGE_SIZE - 1));
        if reclaim
            && addr & (PAGE_SIZE - 1) == 0
            && let Some(end) = end
            && let Some(locked) = self.vm.first_locked(addr, end)
        {
            let upto = locked.start.max(addr);
            return match self.madvise_unlocked(addr, upto - addr, advice) {
                Err(e) if upto == addr || e != Errno::ENOMEM => Err(e),
                _ => Err(Errno::EINVAL),
            };
        }
        self.madvise_unlocked(addr, len, advice)
    }

    /// [`madvise`](Self::madvise) on a range holding no locked area the advice refuses.
    fn madvise_unlocked(&mut self, addr: u64, len: u64, advice: u64) -> Result<(), Errno> {
        let advised = self.vm.madvise(addr, len, advice)?;
        match advised.action {
            MadviseAction::Discard => {
                if let (Some(first), Some(last)) = (advised.ranges.first(), advised.ranges.last()) {
                    let (start, end) = (first.0, last.1);
                    self.discard_range(start, end);
                }
            }
            MadviseAction::Free => {
                for &(start, end) in &advised.ranges {
                    self.free_lazily(start, end);
                }
            }
            MadviseAction::Populate { write } => {
                let access = if write { Access::Write } else { Access::Read };
                for &(start, end) in &advised.ranges {
                    match self.populate(start, end, access) {
                        Ok(()) => {}
                        Err(Fault::OutOfMemory) => return Err(Errno::ENOMEM),
                        // Linux: EFAULT when populating hits a page the protection forbids.
                        Err(_) => return Err(Errno::EFAULT),
                    }
                }
            }
            MadviseAction::WillNeed | MadviseAction::None => {}
        }
        advised.error.map_or(Ok(()), Err)
    }

    /// `brk(addr)`: returns the new (or unchanged) break, as Linux does.
    pub fn brk(&mut self, addr: u64) -> u64 {
        let outcome = self.vm.brk(addr);
        if let (Some(first), Some(last)) = (outcome.unmapped.first(), outcome.unmapped.last()) {
            let (start, end) = (first.start, last.end);
            self.unmap_range(start, end);
        }
        if let (Some((start, end)), Some(lock)) = (outcome.mapped, self.lock_future) {
            self.lock_new(start, end, lock);
        }
        outcome.brk
    }

    /// `SYS_MMAP_NEAR(target, len, radius, prot, flags)` (this kernel's extension).
    ///
    /// # Errors
    ///
    /// As `mmap`, and `ENOMEM` when nothing fits within the radius.
    pub fn map_near(
        &mut self,
        target: u64,
        len: u64,
        radius: u64,
        prot: u64,
        map_flags: u64,
    ) -> Result<u64, Errno> {
        let mapped = self.vm.map_near(target, len, radius, prot, map_flags)?;
        if let Some(lock) = self.lock_future {
            self.lock_new(mapped.addr, mapped.addr + mapped.len, lock);
        }
        Ok(mapped.addr)
    }

    /// `SYS_CODE_WINDOW(op, arg, …)`: the window's information for `WINDOW_GET`.
    ///
    /// # Errors
    ///
    /// As the code window's operations.
    pub fn code_window_op(&mut self, op: u64, arg: u64) -> Result<Option<CodeWindowInfo>, Errno> {
        self.vm.code_window_op(op, arg)
    }

    // ---- program loading ------------------------------------------------------------------

    /// Maps `[start, end)` (page aligned) as a program area with `prot`, every page present,
    /// filled by `fill(page) -> (offset in the page, bytes)` (the file bytes of the page; the
    /// rest stays zero). Used for the ELF segments; `flags` is [`VmaFlags::IMAGE`] or
    /// [`VmaFlags::STACK`].
    ///
    /// # Errors
    ///
    /// The area map's errno (`ENOMEM`, `EINVAL` for overlapping segments), or `ENOMEM` when a
    /// frame cannot be had; pages already mapped stay and go with the space.
    pub fn map_image<'b, F: FnMut(u64) -> Option<(usize, &'b [u8])>>(
        &mut self,
        start: u64,
        end: u64,
        prot: Prot,
        flags: VmaFlags,
        mut fill: F,
    ) -> Result<(), Errno> {
        self.vm.map_kernel(start, end - start, prot, flags)?;
        let Some(attrs) = user_attrs(prot) else { return Ok(()) };
        let mut page = start;
        while page < end {
            let frame = self.frames.alloc_zeroed().ok_or(Errno::ENOMEM)?;
            if let Some((offset, bytes)) = fill(page) {
                self.frames.write(frame, offset, bytes);
            }
            if prot.exec() {
                self.frames.sync_icache(frame);
            }
            if self.space.map(VirtAddr(page), frame, PAGE_SIZE, attrs, Constraints::NONE).is_err() {
                self.frames.free(frame);
                return Err(Errno::ENOMEM);
            }
            self.data_frames += 1;
            page += PAGE_SIZE;
        }
        Ok(())
    }

    /// Writes `data` at user address `va` through the tables (pages not present are faulted in
    /// for writing first), crossing pages as needed: the initial stack contents.
    ///
    /// # Errors
    ///
    /// `EFAULT` when a page is not mapped writable, `ENOMEM` when a frame cannot be had.
    pub fn write(&mut self, va: u64, data: &[u8]) -> Result<(), Errno> {
        let mut done = 0;
        while done < data.len() {
            let at = va + done as u64;
            match self.fault(at, Access::Write) {
                Ok(()) => {}
                Err(Fault::OutOfMemory) => return Err(Errno::ENOMEM),
                Err(_) => return Err(Errno::EFAULT),
            }
            let pa = self.space.translate(VirtAddr(at)).ok_or(Errno::EFAULT)?;
            let offset = (at & (PAGE_SIZE - 1)) as usize;
            let n = (PAGE_SIZE as usize - offset).min(data.len() - done);
            // `translate` gives the byte's own address; the frame starts at the page boundary.
            self.frames.write(PhysAddr(pa.0 & !(PAGE_SIZE - 1)), offset, &data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    // ---- teardown -------------------------------------------------------------------------

    /// Unmaps everything with one flush, frees every data frame after it, then every table
    /// frame; returns the providers. Call it only when no CPU has the table in a TTBR any more
    /// (the kernel also invalidates the whole ASID first, so no CPU keeps walk-cache entries of
    /// the freed tables).
    pub fn destroy(self) -> (T, P, D) {
        let Self { space, mut frames, zero, .. } = self;
        let (translation, _, targets) = space.destroy(|u| {
            Self::release(&mut frames, zero, &u);
        });
        (translation, targets, frames)
    }
}
