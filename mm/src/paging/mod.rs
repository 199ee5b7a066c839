//! Stage-1 translation tables: 4 KiB granule, 48-bit VA, four levels (0..=3), one TTBR.
//!
//! Why it is built this way:
//! - **One seam.** Table frames come from, and are reached through, a [`Translation`]
//!   implementation: a frame allocator plus "PA → pointer". The kernel uses a bump allocator and
//!   an offset in early boot, the frame allocator and the linear map later; the host tests use an
//!   emulated physical memory. Everything is generic over `T: Translation`, never `dyn`: the
//!   engine also runs in early boot with the MMU off, at a physical address different from the
//!   link address, where vtables (absolute link-time addresses), statics holding pointers, the
//!   heap and formatting are unusable. No path taken on valid input panics.
//! - **Check, reserve, then commit.** Every operation first walks its range without writing
//!   (the dry run) to find errors (`AlreadyMapped`, a break-before-make violation) and to count
//!   the table frames it needs; then it allocates all of them; only then does it write, and the
//!   writing phase cannot fail. So a failed call changes nothing at all and leaks nothing, which
//!   is stronger than undoing writes: a walker never saw a half-built mapping, and no table that
//!   a walk cache may have cached has to be freed without a TLB flush.
//! - **One walk when nothing can fail.** The common call — `map`, `unmap` or `protect` of a few
//!   pages inside one 2 MiB region whose last-level table already exists — needs no frame, so
//!   the only failures left are the ones a read-only look at the entries of the range finds
//!   (`AlreadyMapped`; a change needing break-before-make; a contiguous run reaching out of the
//!   range). The fast path does that look, then writes; anything unusual sends the call to the
//!   general path above, with nothing changed, so it fails (or unfolds a run) exactly as before.
//!   The last-level table is found through a one-entry software walk cache keyed by `VA >> 21`
//!   (two plain fields: no atomics, no heap), emptied before any table descriptor is removed or
//!   replaced (an `unmap` detaching a table, every staged operation of `bbm.rs`); `map` only
//!   turns invalid entries valid, so it never makes a cached path wrong. An `unmap` that empties
//!   the table detaches it and the tables above it that it empties, as the general path does.
//!   The last-level loops (check, write, clear with the record accumulated once per table
//!   rather than per leaf) are shared by both paths; the differential property test in
//!   `tests.rs` runs every operation both ways and compares tables, records, errors and frames.
//! - **Frames freed only after the flush that covers them** (Asterinas' rule). `unmap` and
//!   `protect` return a [`PendingFlush`] record: the VA range whose translations changed, whether
//!   a table entry was removed (so leaf-only TLBI forms are illegal), the leaf sizes involved, and
//!   the table frames that were detached. The frames stay allocated, chained through their own
//!   word 0 (an intrusive list: no heap), until [`PendingFlush::release`] is called after the
//!   invalidation has completed.
//! - **Break-before-make is the caller's** (it owns the TLB). A table is *live* once it may be in
//!   use by a walker or cached in a TLB ([`PageTable::set_live`]). On a live table the engine
//!   makes only changes the architecture allows without break-before-make: invalid → valid
//!   (`map`), valid → invalid (`unmap`), and AP/PXN/UXN changes in place (`protect`). Anything
//!   else — a change of memory type, shareability, nG or output address, splitting a block,
//!   breaking a contiguous run — returns [`MapError::BreakBeforeMakeRequired`] and changes
//!   nothing. The caller then does break-before-make itself: `unmap` the affected range (valid →
//!   invalid), flush the TLB with the returned record (`DSB ISHST; TLBI…; DSB ISH`), release the
//!   record, and `map` the new translation. On a table that is not live, the same changes are made
//!   in place. [`crate::space::AddressSpace`] is such a caller: it owns the TLB issuer and does
//!   the whole sequence for unmap, protect, memory-type changes, remaps, block splits, contiguous
//!   runs and superpage promotion, with the staged operations of `bbm.rs` (the new value kept in
//!   the broken entry, so one call needs one flush and no heap).
//!
//! Memory ordering: every table write is one aligned `u64` volatile store, in the order the source
//! says, and a new table is completely written (zeroed and filled) before the descriptor that
//! publishes it, with [`Translation::publish_barrier`] (the kernel: `DSB ISHST`) in between. The
//! caller still needs `DSB ISHST` (and `ISB` for the local CPU) before relying on a new mapping,
//! and the TLB maintenance sequence after removing or changing one. New tables are zeroed with
//! 512 volatile stores rather than `memset`: with the MMU off every data access is Device memory,
//! where the `DC ZVA` a `memset` may use faults. (Tables written with the MMU off go straight to
//! memory; the kernel must make sure no stale cache line covers the table arena before it turns
//! on cacheable walks.)

use core::ptr::NonNull;

use crate::addr::{PAGE_SIZE, PhysAddr, VA_BITS, VirtAddr};
use crate::descriptor::{Attributes, CONTIGUOUS_ENTRIES, Descriptor, DescriptorKind, level_size};

mod bbm;
mod flush;
#[cfg(test)]
mod mutant_tests;
#[cfg(test)]
mod tests;

pub(crate) use bbm::{BbmCounts, StagedOp};

pub use flush::{FlushRange, FrameList, PendingFlush};

/// The index of the entry translating offset `off` in a table at `level`.
const fn index_of(off: u64, level: u32) -> usize {
    ((off >> (crate::addr::PAGE_SHIFT + 9 * (3 - level))) & 0x1ff) as usize
}

/// Number of descriptors in one table.
pub const ENTRIES_PER_TABLE: usize = 512;

/// Size of the part of the address space one TTBR translates (2^48 bytes).
const SPACE_SIZE: u64 = 1 << VA_BITS;
/// The level of the root table.
const ROOT_LEVEL: u32 = 0;

/// One table frame as a Rust type: 512 descriptors, 4 KiB aligned (for implementations of
/// [`Translation`] that take frames from a Rust allocator or a static arena).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(4096))]
pub struct AlignedTable(pub [u64; ENTRIES_PER_TABLE]);

/// Where page-table frames come from and how the engine reaches them.
///
/// # Safety
///
/// Implementors guarantee that, for every `pa` returned by [`allocate_table`] and not yet passed
/// to [`deallocate_table`]:
/// - `pa` is 4 KiB aligned, below 2^48, and the frame is not used by anything else;
/// - [`table_ptr`]`(pa)` returns a pointer, aligned to 8 bytes, valid for reads and writes of
///   4096 bytes for as long as the frame stays allocated, and not covered by any Rust reference
///   while the engine uses it.
///
/// [`allocate_table`]: Translation::allocate_table
/// [`deallocate_table`]: Translation::deallocate_table
/// [`table_ptr`]: Translation::table_ptr
pub unsafe trait Translation {
    /// Allocates a 4 KiB frame for a table. Its contents are unspecified (the engine zeroes it).
    /// `None` when memory is exhausted.
    fn allocate_table(&mut self) -> Option<PhysAddr>;

    /// Returns a frame obtained from [`allocate_table`](Translation::allocate_table).
    fn deallocate_table(&mut self, pa: PhysAddr);

    /// How code reaches the table frame at `pa` (the kernel: through the linear map, or the
    /// physical address itself while the MMU is off).
    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]>;

    /// Called after a new table has been written and before the descriptor that makes it
    /// reachable is stored. The kernel issues `DSB ISHST` here once the MMU is on; the default
    /// does nothing (correct for a table no walker can reach yet, and in early boot).
    fn publish_barrier(&self) {}
}

/// Which half of the address space a table translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VaRange {
    /// TTBR0: addresses `0 ..= 0x0000_ffff_ffff_ffff` (user space).
    Lower,
    /// TTBR1: addresses `0xffff_0000_0000_0000 ..= u64::MAX` (the kernel). Tables are indexed with
    /// bits `[47:12]`, as for the lower half.
    Upper,
}

impl VaRange {
    /// The lowest address of the range.
    pub const fn base(self) -> VirtAddr {
        match self {
            Self::Lower => VirtAddr(0),
            Self::Upper => VirtAddr(!(SPACE_SIZE - 1)),
        }
    }

    /// Whether `va` lies in this range.
    pub const fn contains(self, va: VirtAddr) -> bool {
        va.0 & !(SPACE_SIZE - 1) == self.base().0
    }
}

/// Restrictions on how [`PageTable::map`] may lay out a mapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Constraints(u32);

impl Constraints {
    /// No restriction: 1 GiB and 2 MiB blocks and contiguous runs wherever alignment allows.
    pub const NONE: Self = Self(0);
    /// Pages only: no 1 GiB or 2 MiB blocks.
    pub const NO_BLOCKS: Self = Self(1 << 0);
    /// No 1 GiB (level-1) blocks; 2 MiB blocks are still allowed.
    pub const NO_1G_BLOCKS: Self = Self(1 << 1);
    /// Never set the contiguous hint.
    pub const NO_CONTIGUOUS: Self = Self(1 << 2);

    /// Whether every restriction of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two sets of restrictions.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether a leaf may be placed at `level` (1 GiB, 2 MiB blocks; pages always).
    const fn allows_leaf(self, level: u32) -> bool {
        match level {
            1 => !self.contains(Self::NO_BLOCKS) && !self.contains(Self::NO_1G_BLOCKS),
            2 => !self.contains(Self::NO_BLOCKS),
            3 => true,
            _ => false,
        }
    }
}

impl core::ops::BitOr for Constraints {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// Why an operation was refused. A refused operation has changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapError {
    /// The range is empty, leaves this table's half of the address space (wrong half,
    /// non-canonical, past the end), overflows, or the physical range goes beyond 2^48.
    InvalidRange,
    /// An address or size is not a multiple of 4 KiB.
    Misaligned,
    /// The range overlaps a valid mapping at this address; unmap it first.
    AlreadyMapped(VirtAddr),
    /// A table frame could not be allocated.
    OutOfMemory,
    /// The table is live and the change at this address needs break-before-make (memory type,
    /// nG or shareability change, a block split, a partial contiguous run): unmap, flush the
    /// TLB, then map again.
    BreakBeforeMakeRequired(VirtAddr),
}

/// One leaf (page or block) of a table, as found by a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Leaf {
    /// The first address the leaf translates.
    pub va: VirtAddr,
    /// The address `va` translates to.
    pub pa: PhysAddr,
    /// The level of the table holding the leaf: 1 (1 GiB block), 2 (2 MiB block) or 3 (page).
    pub level: u32,
    /// The size of the leaf in bytes.
    pub size: u64,
    /// The attributes of the leaf.
    pub attrs: Attributes,
    /// Whether the leaf is part of a contiguous run (its contiguous hint is set).
    pub contiguous: bool,
}

impl Leaf {
    /// The physical address `va` (inside this leaf) translates to.
    pub const fn translate(&self, va: VirtAddr) -> PhysAddr {
        PhysAddr(self.pa.0 + (va.0 - self.va.0))
    }
}

/// Table-frame counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stats {
    /// Frames obtained from [`Translation::allocate_table`] (including the root).
    pub tables_allocated: u64,
    /// Frames handed back to [`Translation::deallocate_table`] directly by the table (spare
    /// reservations).
    pub tables_freed: u64,
    /// Frames detached from the tree and handed out in [`PendingFlush`] records.
    pub tables_detached: u64,
}

impl Stats {
    /// Table frames currently part of the tree, the root included.
    pub const fn tables_in_use(&self) -> u64 {
        self.tables_allocated - self.tables_freed - self.tables_detached
    }
}

/// The attributes of one `map` call, in the offset domain (offsets from the range base).
struct MapArgs {
    start: u64,
    end: u64,
    pa: u64,
    attrs: Attributes,
    constraints: Constraints,
}

impl MapArgs {
    const fn pa_at(&self, off: u64) -> u64 {
        self.pa + (off - self.start)
    }
}

/// The pages changed by one pass over a last-level table, for [`PendingFlush::add_pages`]: the
/// attribute bits are ANDed and ORed so that the record's flags come out as `add_leaf` per page
/// would make them, without per-page branches.
struct PageRun {
    lo: u64,
    hi: u64,
    count: u64,
    /// AND and OR of the old attribute bits; AND of the new ones (`u64::MAX` for an unmap).
    old_and: u64,
    old_or: u64,
    new_and: u64,
}

impl PageRun {
    const fn new() -> Self {
        Self { lo: 0, hi: 0, count: 0, old_and: u64::MAX, old_or: 0, new_and: u64::MAX }
    }

    /// Adds the page at offset `off`, whose attributes `old` were removed (`new == None`) or
    /// replaced by `new`. Pages are added in ascending order.
    #[inline(always)]
    fn add(&mut self, off: u64, old: Attributes, new: Option<Attributes>) {
        if self.count == 0 {
            self.lo = off;
        }
        self.hi = off + PAGE_SIZE;
        self.count += 1;
        self.old_and &= old.bits();
        self.old_or |= old.bits();
        if let Some(new) = new {
            self.new_and &= new.bits();
        }
    }

    /// Adds the run to `record`.
    #[inline(always)]
    fn record(&self, record: &mut PendingFlush) {
        if self.count == 0 {
            return;
        }
        let (old_and, old_or) =
            (Attributes::from_descriptor_bits(self.old_and), Attributes::from_descriptor_bits(self.old_or));
        let new_and = Attributes::from_descriptor_bits(self.new_and);
        // Some leaf was global (nG clear) iff nG is clear in the AND; some was non-global iff nG
        // is set in the OR; some was (or became) executable iff PXN or UXN is clear in an AND.
        let global = old_and.is_global();
        let non_global = !old_or.is_global();
        let executable = !old_and.pxn() || !old_and.uxn() || !new_and.pxn() || !new_and.uxn();
        record.add_pages(self.lo, self.hi, self.count, global, non_global, executable);
    }
}

/// A table seen by a dry run: a real one, or one the commit phase would create.
#[derive(Clone, Copy)]
enum View {
    /// A table in the tree.
    Real(PhysAddr),
    /// A table the commit phase would allocate, all invalid.
    Empty,
    /// A table the commit phase would create by splitting a block: 512 leaves at its level,
    /// mapping consecutive addresses from `pa` with `attrs`.
    Split { pa: u64, attrs: Attributes },
}

/// What an operation does to one leaf entirely inside its range.
#[derive(Clone, Copy)]
enum LeafOp<F> {
    Unmap,
    Protect(F),
}

/// A stage-1 translation table tree for one half of the address space.
///
/// See the [module documentation](self) for the rules it follows. Dropping a `PageTable` frees
/// nothing (a live table must never be freed behind the walker's back): call
/// [`destroy`](Self::destroy) to get every frame back.
///
/// # Example
///
/// ```
/// use core::ptr::NonNull;
/// use mm::addr::{PhysAddr, VirtAddr};
/// use mm::descriptor::Attributes;
/// use mm::paging::{Constraints, PageTable, Translation, VaRange};
///
/// /// Frames from the heap; the "physical address" is the pointer (below 2^48 on the host).
/// struct Heap;
/// // SAFETY: frames are 4 KiB-aligned, exclusively owned allocations, valid until deallocated.
/// unsafe impl Translation for Heap {
///     fn allocate_table(&mut self) -> Option<PhysAddr> {
///         let frame = Box::new(mm::paging::AlignedTable([0; 512]));
///         Some(PhysAddr(Box::into_raw(frame) as u64))
///     }
///     fn deallocate_table(&mut self, pa: PhysAddr) {
///         // SAFETY: `pa` came from `allocate_table`.
///         drop(unsafe { Box::from_raw(pa.0 as *mut mm::paging::AlignedTable) });
///     }
///     fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; 512]> {
///         NonNull::new(pa.0 as *mut [u64; 512]).unwrap()
///     }
/// }
///
/// let mut pt = PageTable::new(Heap, VaRange::Upper)?;
/// let va = VirtAddr(0xffff_0000_4000_0000);
/// // 4 MiB, 2 MiB aligned on both sides: two level-2 blocks.
/// pt.map(va, PhysAddr(0x4000_0000), 4 << 20, Attributes::kernel_data(), Constraints::NONE)?;
/// assert_eq!(pt.query(va).map(|leaf| leaf.level), Some(2));
/// pt.set_live(true); // Installed in TTBR1_EL1 from here on.
///
/// let record = pt.unmap(va, 4 << 20)?;
/// let range = record.range().unwrap();
/// assert_eq!((range.start, range.size), (va, 4 << 20));
/// assert!(record.tables_removed()); // Non-leaf TLBI forms, then:
/// record.release(pt.translation_mut()); // only after the invalidation has completed.
/// # Ok::<(), mm::paging::MapError>(())
/// ```
pub struct PageTable<T: Translation> {
    translation: T,
    root: PhysAddr,
    range: VaRange,
    live: bool,
    stats: Stats,
    /// The walk cache: `walk_key` is `off >> 21` of the 2 MiB region whose last-level table is
    /// `walk_table`, or [`NO_WALK`] when empty. See [`last_level_table`](Self::last_level_table).
    walk_key: u64,
    walk_table: PhysAddr,
    /// Test switch: send every call to the general path (to compare the two).
    #[cfg(test)]
    general_only: bool,
}

/// The empty walk cache (no offset below 2^48 shifts to it).
const NO_WALK: u64 = u64::MAX;
/// The span of a contiguous run of pages (64 KiB).
const RUN_SIZE: u64 = PAGE_SIZE * CONTIGUOUS_ENTRIES as u64;
/// Log2 of the span of one last-level table (2 MiB).
const L3_SPAN_SHIFT: u32 = 21;

impl<T: Translation> core::fmt::Debug for PageTable<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PageTable")
            .field("root", &self.root)
            .field("range", &self.range)
            .field("live", &self.live)
            .field("stats", &self.stats)
            .finish()
    }
}

impl<T: Translation> PageTable<T> {
    /// A new, empty table tree for `range`, with its root frame allocated and zeroed. The table
    /// is not live.
    ///
    /// # Errors
    ///
    /// [`MapError::OutOfMemory`] if the root frame cannot be allocated.
    pub fn new(mut translation: T, range: VaRange) -> Result<Self, MapError> {
        let root = translation.allocate_table().ok_or(MapError::OutOfMemory)?;
        let mut table = Self {
            translation,
            root,
            range,
            live: false,
            stats: Stats { tables_allocated: 1, ..Stats::default() },
            walk_key: NO_WALK,
            walk_table: PhysAddr(0),
            #[cfg(test)]
            general_only: false,
        };
        table.zero(root);
        Ok(table)
    }

    /// The physical address of the root table (the value for `TTBRn_EL1.BADDR`).
    pub fn root_pa(&self) -> PhysAddr {
        self.root
    }

    /// The half of the address space this table translates.
    pub fn va_range(&self) -> VaRange {
        self.range
    }

    /// The translation (frame source) this table uses.
    pub fn translation(&self) -> &T {
        &self.translation
    }

    /// The translation, mutably (e.g. to release a [`PendingFlush`] record).
    pub fn translation_mut(&mut self) -> &mut T {
        &mut self.translation
    }

    /// Table-frame counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether the table is live (see [`set_live`](Self::set_live)).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Declares whether the table is live: installed in a TTBR on some CPU, or possibly cached in
    /// a TLB. While live, changes that need break-before-make are refused. Set it before the
    /// first `TTBR` write; clear it only when no CPU uses the table and its ASID (or, for global
    /// entries, the whole TLB) has been invalidated.
    pub fn set_live(&mut self, live: bool) {
        self.live = live;
    }

    // ---- raw table access ------------------------------------------------------------------

    #[inline(always)]
    fn entry_ptr(&self, table: PhysAddr, index: usize) -> *mut u64 {
        debug_assert!(index < ENTRIES_PER_TABLE);
        let base = self.translation.table_ptr(table).cast::<u64>();
        // SAFETY: `table` is a frame of this tree (allocated and not freed), so by the
        // `Translation` contract the pointer is valid for 512 `u64`s; `index < 512`.
        unsafe { base.as_ptr().add(index) }
    }

    #[inline(always)]
    fn read(&self, table: PhysAddr, index: usize) -> Descriptor {
        let p = self.entry_ptr(table, index);
        // SAFETY: `p` is an aligned pointer into a live table frame (see `entry_ptr`). Volatile,
        // because the hardware walker and other CPUs' walks share the memory.
        Descriptor::from_bits(unsafe { p.read_volatile() })
    }

    #[inline(always)]
    fn write(&mut self, table: PhysAddr, index: usize, descriptor: Descriptor) {
        let p = self.entry_ptr(table, index);
        // SAFETY: as in `read`. One aligned 64-bit store is single-copy atomic for the walker,
        // and volatile keeps the stores in source order and unmerged.
        unsafe { p.write_volatile(descriptor.bits()) }
    }

    fn zero(&mut self, table: PhysAddr) {
        for i in 0..ENTRIES_PER_TABLE {
            self.write(table, i, Descriptor::INVALID);
        }
    }

    fn is_empty_table(&self, table: PhysAddr) -> bool {
        (0..ENTRIES_PER_TABLE).all(|i| !self.read(table, i).is_valid())
    }

    /// Whether the table is empty after `[lo, hi)` (entry indices) was unmapped in it. The
    /// entries strictly inside were wholly covered, hence cleared (reserved encodings included);
    /// the two end entries may be tables only partly unmapped, so they are read first, then the
    /// entries outside, nearest first.
    fn is_emptied(&self, table: PhysAddr, lo: usize, hi: usize) -> bool {
        let emptied = self.none_outside(table, lo + 1, (hi - 1).max(lo + 1), Descriptor::is_valid);
        debug_assert!(!emptied || self.is_empty_table(table), "an entry inside the range was kept");
        emptied
    }

    /// The descriptor at `index` of a table as a dry run sees it.
    fn view_read(&self, view: View, level: u32, index: usize) -> Descriptor {
        match view {
            View::Real(t) => self.read(t, index),
            View::Empty => Descriptor::INVALID,
            View::Split { pa, attrs } => {
                Descriptor::leaf(level, PhysAddr(pa + index as u64 * level_size(level)), attrs, false)
            }
        }
    }

    const fn va(&self, off: u64) -> VirtAddr {
        VirtAddr(self.range.base().0 | off)
    }

    /// Checks `[va, va + size)` and returns it as offsets from the range base.
    #[inline(always)]
    fn check_range(&self, va: VirtAddr, size: u64) -> Result<(u64, u64), MapError> {
        if size == 0 {
            return Err(MapError::InvalidRange);
        }
        if (va.0 | size) & (PAGE_SIZE - 1) != 0 {
            return Err(MapError::Misaligned);
        }
        if !self.range.contains(va) {
            return Err(MapError::InvalidRange);
        }
        let start = va.0 & (SPACE_SIZE - 1);
        match start.checked_add(size) {
            Some(end) if end <= SPACE_SIZE => Ok((start, end)),
            _ => Err(MapError::InvalidRange),
        }
    }

    /// Checks the arguments of a `map` and returns the range as offsets from the range base.
    #[inline(always)]
    fn check_map(&self, va: VirtAddr, pa: PhysAddr, size: u64) -> Result<(u64, u64), MapError> {
        let range = self.check_range(va, size)?;
        if !pa.is_page_aligned() {
            return Err(MapError::Misaligned);
        }
        match pa.0.checked_add(size) {
            Some(pa_end) if pa_end <= 1 << crate::addr::PA_BITS => Ok(range),
            _ => Err(MapError::InvalidRange),
        }
    }

    // ---- frame reservation -------------------------------------------------------------------

    /// Allocates `count` frames into a reservation, or none at all.
    fn reserve(&mut self, count: usize) -> Result<FrameList, MapError> {
        let mut pool = FrameList::new();
        for _ in 0..count {
            match self.translation.allocate_table() {
                Some(pa) => {
                    self.stats.tables_allocated += 1;
                    pool.push(pa, &self.translation);
                }
                None => {
                    self.free_reservation(pool);
                    return Err(MapError::OutOfMemory);
                }
            }
        }
        Ok(pool)
    }

    /// Returns unused reserved frames to the allocator.
    fn free_reservation(&mut self, mut pool: FrameList) {
        while let Some(pa) = pool.pop(&self.translation) {
            self.stats.tables_freed += 1;
            self.translation.deallocate_table(pa);
        }
    }

    /// Takes a reserved frame. The dry run counted exactly the frames the commit needs, so the
    /// reservation is never empty here.
    fn take_reserved(&mut self, pool: &mut FrameList) -> PhysAddr {
        match pool.pop(&self.translation) {
            Some(pa) => pa,
            None => unreachable!("page-table reservation exhausted: dry run and commit disagree"),
        }
    }

    // ---- map ------------------------------------------------------------------------------------

    /// Maps `[va, va + size)` to `[pa, pa + size)` with `attrs`.
    ///
    /// Uses 1 GiB and 2 MiB blocks wherever the VA, the PA and the remaining size allow, and sets
    /// the contiguous hint on runs of 16 entries (64 KiB of pages, 32 MiB of 2 MiB blocks) whose
    /// VA and PA are aligned to the run and which lie wholly inside this call, unless
    /// `constraints` forbids it. Only invalid entries are written, so mapping into a live table
    /// needs no TLB maintenance (only `DSB ISHST; ISB` before use).
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`]: empty range, wrong half of the address space, past the end,
    ///   or a physical range beyond 2^48;
    /// - [`MapError::Misaligned`]: `va`, `pa` or `size` not a multiple of 4 KiB;
    /// - [`MapError::AlreadyMapped`]: part of the range is mapped;
    /// - [`MapError::OutOfMemory`]: a table frame could not be allocated.
    ///
    /// On error nothing has changed and no frame is kept.
    #[inline]
    pub fn map(
        &mut self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_map(va, pa, size)?;
        let args = MapArgs { start, end, pa: pa.0, attrs, constraints };
        if let Some(table) = self.fast_path_table(start, end)
            && self.map_pages_in(table, &args)
        {
            return Ok(());
        }
        self.map_checked(&args)
    }

    /// The general `map` of checked arguments: dry run, reservation, commit.
    #[inline(never)]
    fn map_checked(&mut self, args: &MapArgs) -> Result<(), MapError> {
        let (start, end) = (args.start, args.end);
        let mut pool = FrameList::new();
        let needed =
            self.map_level::<false>(View::Real(self.root), ROOT_LEVEL, 0, start, end, args, &mut pool)?;
        let mut pool = self.reserve(needed)?;
        let result =
            self.map_level::<true>(View::Real(self.root), ROOT_LEVEL, 0, start, end, args, &mut pool);
        debug_assert!(result.is_ok() && pool.is_empty());
        self.free_reservation(pool);
        result.map(|_| ())
    }

    // ---- the single-walk fast path -------------------------------------------------------------

    /// The last-level table translating `[start, end)` if the range lies within one 2 MiB region
    /// whose table already exists (every level above holds a table descriptor): the only case the
    /// fast paths handle. `None` sends the call to the general path.
    #[inline(always)]
    fn fast_path_table(&mut self, start: u64, end: u64) -> Option<PhysAddr> {
        #[cfg(test)]
        if self.general_only {
            return None;
        }
        if (start ^ (end - 1)) >> L3_SPAN_SHIFT != 0 {
            return None;
        }
        self.last_level_table(start)
    }

    /// The level-3 table translating offset `off`, if the walk from the root meets a table
    /// descriptor at levels 0, 1 and 2.
    ///
    /// The walk cache remembers the answer for the 2 MiB region of `off`. It stays right as long
    /// as no table descriptor on that path is removed or replaced: `map` only turns invalid
    /// entries into valid ones, and every operation that removes or replaces a table descriptor
    /// (`unmap` detaching a table, the staged operations of `bbm.rs`, `destroy`) first empties
    /// the cache with [`forget_walk`](Self::forget_walk). A table frame is never freed while
    /// it is in the tree, so the cached frame is always one of this tree's.
    #[inline(always)]
    fn last_level_table(&mut self, off: u64) -> Option<PhysAddr> {
        let key = off >> L3_SPAN_SHIFT;
        if key == self.walk_key {
            return Some(self.walk_table);
        }
        let table = self.walk_to_last_level(off)?;
        self.walk_key = key;
        self.walk_table = table;
        Some(table)
    }

    /// The walk of [`last_level_table`](Self::last_level_table) on a cache miss.
    fn walk_to_last_level(&self, off: u64) -> Option<PhysAddr> {
        let mut table = self.root;
        for level in ROOT_LEVEL..3 {
            let d = self.read(table, index_of(off, level));
            if !d.is_table(level) {
                return None;
            }
            table = d.output_address();
        }
        Some(table)
    }

    /// Empties the walk cache. Called before any table descriptor is removed or replaced.
    pub(crate) fn forget_walk(&mut self) {
        self.walk_key = NO_WALK;
    }

    /// The fast path of `map`: writes the pages of `args` (inside one 2 MiB region) into the
    /// existing last-level `table`. Returns `false`, having written nothing, if an entry of the
    /// range is valid: the general path then reports the error exactly as usual. Otherwise
    /// nothing can fail (no frame is needed), so there is no dry run; the leaves written, the
    /// contiguous hints included, are those the general path would write for the same call.
    #[inline(always)]
    fn map_pages_in(&mut self, table: PhysAddr, args: &MapArgs) -> bool {
        if args.end - args.start == PAGE_SIZE {
            // One page (the common call): straight-line. A lone page is never contiguous.
            let index = index_of(args.start, 3);
            if self.read(table, index).is_valid() {
                return false;
            }
            self.write(table, index, Descriptor::leaf(3, PhysAddr(args.pa), args.attrs, false));
            return true;
        }
        if self.first_valid_page(table, args.start, args.end).is_some() {
            return false;
        }
        self.write_pages(table, args.start, args.end, args);
        true
    }

    /// The fast path of `unmap` and `protect` for `[start, end)` inside one 2 MiB region whose
    /// last-level table is `table`. A first, read-only pass looks for anything that could fail
    /// or that needs the general path (a change needing break-before-make, a contiguous run
    /// reaching out of the range): then it returns `false` having changed nothing. Otherwise
    /// nothing can fail: it makes the changes, and fills `record` (empty on entry), exactly as
    /// the general path would, detaching the table (and the tables above it) if an unmap leaves
    /// it empty.
    #[inline(always)]
    fn modify_pages_in<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        start: u64,
        end: u64,
        op: &mut LeafOp<F>,
        record: &mut PendingFlush,
    ) -> bool {
        let kept = if let (LeafOp::Unmap, true) = (&*op, end - start == PAGE_SIZE) {
            // Unmapping one page (the common call): straight-line.
            let index = index_of(start, 3);
            let d = self.read(table, index);
            if d.is_leaf(3) {
                if d.is_contiguous() {
                    return false; // Its run reaches out of the range.
                }
                self.write(table, index, Descriptor::INVALID);
                let old = d.attributes();
                let executable = !old.pxn() || !old.uxn();
                record.add_pages(start, end, 1, old.is_global(), !old.is_global(), executable);
            } else if d.is_valid() {
                // A reserved encoding: cleared, not recorded (see `modify_pages`).
                self.write(table, index, Descriptor::INVALID);
            }
            false
        } else {
            if self.pages_need_general_path(table, start, end, (start, end), op) {
                return false;
            }
            self.modify_pages(table, start, end, op, record)
        };
        if let LeafOp::Unmap = op
            && !kept
            && (end - start == level_size(2)
                || self.none_outside(
                    table,
                    index_of(start, 3),
                    index_of(end - 1, 3) + 1,
                    Descriptor::is_valid,
                ))
        {
            self.detach_emptied(start, record);
        }
        true
    }

    // ---- last-level loops (shared by the fast paths and the general path at level 3) ----------

    /// The offset of the first valid entry of the last-level `table` in `[lo, hi)`.
    #[inline(always)]
    fn first_valid_page(&self, table: PhysAddr, lo: u64, hi: u64) -> Option<u64> {
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            if self.read(table, i).is_valid() {
                return Some(off);
            }
            i += 1;
            off += PAGE_SIZE;
        }
        None
    }

    /// Writes the pages of `args` in `[lo, hi)` into the last-level `table`, all of whose entries
    /// there are invalid, with the contiguous hint on every run [`run_may_be_contiguous`]
    /// allows (a run that starts before `lo` never gets it).
    ///
    /// [`run_may_be_contiguous`]: Self::run_may_be_contiguous
    #[inline(always)]
    fn write_pages(&mut self, table: PhysAddr, lo: u64, hi: u64, args: &MapArgs) {
        let mut run_contiguous = false;
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            if i.is_multiple_of(CONTIGUOUS_ENTRIES) {
                run_contiguous = self.run_may_be_contiguous(table, 3, off, args);
            }
            let leaf = Descriptor::leaf(3, PhysAddr(args.pa_at(off)), args.attrs, run_contiguous);
            self.write(table, i, leaf);
            i += 1;
            off += PAGE_SIZE;
        }
    }

    /// Whether `op` on `[lo, hi)` of the last-level `table` (the whole operation being `range`)
    /// needs the per-entry loop of `modify_level`: a change that is refused on a live table
    /// (BBM), or a contiguous run reaching out of `range` (unfolded, or refused). Otherwise
    /// [`modify_pages`](Self::modify_pages) does exactly what that loop would, and cannot fail.
    /// Reads only.
    #[inline(always)]
    fn pages_need_general_path<F: FnMut(Attributes) -> Attributes>(
        &self,
        table: PhysAddr,
        lo: u64,
        hi: u64,
        range: (u64, u64),
        op: &mut LeafOp<F>,
    ) -> bool {
        if let LeafOp::Unmap = op {
            // Nothing but a run reaching out of `range` stops an unmap, and only the runs
            // holding the first and the last page of `range` can: look at those entries only.
            let (first, last) = (range.0, range.1 - PAGE_SIZE);
            return ((lo..hi).contains(&first) && self.cuts_a_run(table, first, range))
                || ((lo..hi).contains(&last) && self.cuts_a_run(table, last, range));
        }
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            let d = self.read(table, i);
            let entry = off;
            i += 1;
            off += PAGE_SIZE;
            if !d.is_leaf(3) {
                continue; // Holes (and reserved encodings) are skipped, as in `modify_level`.
            }
            if let LeafOp::Protect(f) = op {
                let old = d.attributes();
                let new = f(old);
                if new == old {
                    continue;
                }
                if self.live && !old.may_change_in_place_to(new) {
                    return true;
                }
            }
            if d.is_contiguous() {
                let run_base = entry & !(RUN_SIZE - 1);
                if run_base < range.0 || run_base + RUN_SIZE > range.1 {
                    return true;
                }
            }
        }
        false
    }

    /// Whether the page at `off` of the last-level `table` belongs to a contiguous run reaching
    /// out of `range`. The hint is only ever on whole runs of 16 valid, uniform pages (the
    /// invariant `check_invariants` tests), so one entry speaks for its run.
    #[inline(always)]
    fn cuts_a_run(&self, table: PhysAddr, off: u64, range: (u64, u64)) -> bool {
        let d = self.read(table, index_of(off, 3));
        let run_base = off & !(RUN_SIZE - 1);
        d.is_leaf(3) && d.is_contiguous() && (run_base < range.0 || run_base + RUN_SIZE > range.1)
    }

    /// Applies `op` to the pages in `[lo, hi)` of the last-level `table`, for which
    /// [`pages_need_general_path`](Self::pages_need_general_path) was `false`, and records them
    /// in `record`. Returns whether an entry of the range is still valid afterwards (a leaf
    /// `protect` kept, or a reserved encoding).
    #[inline(always)]
    fn modify_pages<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        lo: u64,
        hi: u64,
        op: &mut LeafOp<F>,
        record: &mut PendingFlush,
    ) -> bool {
        let mut changed = PageRun::new();
        let mut kept = false;
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            let d = self.read(table, i);
            let (index, entry) = (i, off);
            i += 1;
            off += PAGE_SIZE;
            if !d.is_leaf(3) {
                if d.is_valid() {
                    // A reserved encoding: it translates nothing and the walker faults on it, so
                    // no TLB holds it. An unmap clears it without recording it (so that a table
                    // is emptied by unmapping its whole span); a protect leaves it.
                    match op {
                        LeafOp::Unmap => self.write(table, index, Descriptor::INVALID),
                        LeafOp::Protect(_) => kept = true,
                    }
                }
                continue;
            }
            let old = d.attributes();
            let (written, new) = match op {
                LeafOp::Unmap => (Descriptor::INVALID, None),
                LeafOp::Protect(f) => {
                    kept = true;
                    let new = f(old);
                    if new == old {
                        continue;
                    }
                    (d.with_attributes(new), Some(new))
                }
            };
            self.write(table, index, written);
            changed.add(entry, old, new);
        }
        changed.record(record);
        kept
    }

    /// Whether no entry of `table` outside `[lo, hi)` (indices) is `occupied`, looking first at
    /// the entries nearest to that range: in a populated table an occupied neighbour is usually
    /// one or two reads away, so the whole table is read only when it is about to be detached.
    #[inline(always)]
    fn none_outside(
        &self,
        table: PhysAddr,
        lo: usize,
        hi: usize,
        occupied: impl Fn(Descriptor) -> bool,
    ) -> bool {
        let (mut below, mut above) = (lo, hi);
        loop {
            if above < ENTRIES_PER_TABLE {
                if occupied(self.read(table, above)) {
                    return false;
                }
                above += 1;
            } else if below == 0 {
                return true;
            }
            if below > 0 {
                below -= 1;
                if occupied(self.read(table, below)) {
                    return false;
                }
            }
        }
    }

    /// Detaches the (now empty) last-level table translating `off`, then each table above it,
    /// below the root, that this leaves empty: what `modify_level` does on its way back up for a
    /// range inside one 2 MiB region, in the same order.
    #[cold]
    #[inline(never)]
    fn detach_emptied(&mut self, off: u64, record: &mut PendingFlush) {
        self.forget_walk();
        let mut path = [self.root; 4];
        for level in ROOT_LEVEL..3 {
            path[level as usize + 1] = self.read(path[level as usize], index_of(off, level)).output_address();
        }
        let mut level = 2;
        loop {
            let (table, child) = (path[level as usize], path[level as usize + 1]);
            let index = index_of(off, level);
            debug_assert!(self.is_empty_table(child));
            self.write(table, index, Descriptor::INVALID);
            record.detach_table(child, &self.translation);
            self.stats.tables_detached += 1;
            if level == ROOT_LEVEL || !self.is_emptied(table, index, index + 1) {
                break;
            }
            level -= 1;
        }
    }

    /// Maps `[lo, hi)` into the table `view` at `level` whose first entry translates
    /// `table_base`. The dry run (`COMMIT = false`) writes nothing and returns the number of
    /// tables the commit will allocate; the commit takes them from `pool` and cannot fail.
    #[allow(clippy::too_many_arguments)]
    fn map_level<const COMMIT: bool>(
        &mut self,
        view: View,
        level: u32,
        table_base: u64,
        lo: u64,
        hi: u64,
        args: &MapArgs,
        pool: &mut FrameList,
    ) -> Result<usize, MapError> {
        if level == 3 {
            match view {
                View::Empty => return Ok(0), // Pages always fit in an empty last-level table.
                View::Real(table) if COMMIT => {
                    self.write_pages(table, lo, hi, args);
                    return Ok(0);
                }
                View::Real(table) => {
                    return match self.first_valid_page(table, lo, hi) {
                        Some(off) => Err(MapError::AlreadyMapped(self.va(off))),
                        None => Ok(0),
                    };
                }
                View::Split { .. } => {}
            }
        }
        let size = level_size(level);
        let mut needed = 0;
        let mut run_contiguous = false;
        let mut off = lo;
        while off < hi {
            let index = ((off - table_base) / size) as usize;
            let entry_base = table_base + index as u64 * size;
            let entry_end = entry_base + size;
            let sub_hi = hi.min(entry_end);
            if let (true, View::Real(table)) = (COMMIT, view) {
                if index.is_multiple_of(CONTIGUOUS_ENTRIES) {
                    run_contiguous = self.run_may_be_contiguous(table, level, entry_base, args);
                } else if off == lo {
                    run_contiguous = false; // The call starts inside this run.
                }
            }
            let d = self.view_read(view, level, index);
            match d.kind(level) {
                DescriptorKind::Table => {
                    needed += self.map_level::<COMMIT>(
                        View::Real(d.output_address()),
                        level + 1,
                        entry_base,
                        off,
                        sub_hi,
                        args,
                        pool,
                    )?;
                }
                DescriptorKind::Block | DescriptorKind::Page | DescriptorKind::Reserved => {
                    return Err(MapError::AlreadyMapped(self.va(off)));
                }
                DescriptorKind::Invalid => {
                    let pa = args.pa_at(off);
                    let whole = off == entry_base && sub_hi == entry_end;
                    if whole && pa.is_multiple_of(size) && args.constraints.allows_leaf(level) {
                        if let (true, View::Real(table)) = (COMMIT, view) {
                            let leaf = Descriptor::leaf(level, PhysAddr(pa), args.attrs, run_contiguous);
                            self.write(table, index, leaf);
                        }
                    } else if let (true, View::Real(table)) = (COMMIT, view) {
                        let new = self.take_reserved(pool);
                        self.zero(new);
                        self.map_level::<true>(
                            View::Real(new),
                            level + 1,
                            entry_base,
                            off,
                            sub_hi,
                            args,
                            pool,
                        )?;
                        self.translation.publish_barrier();
                        self.write(table, index, Descriptor::table(new));
                    } else {
                        needed += 1 + self.map_level::<false>(
                            View::Empty,
                            level + 1,
                            entry_base,
                            off,
                            sub_hi,
                            args,
                            pool,
                        )?;
                    }
                }
            }
            off = sub_hi;
        }
        Ok(needed)
    }

    /// Whether the 16-entry run starting at `run_base` (an entry of `table` at `level`) may carry
    /// the contiguous hint: level 2 or 3, allowed by the constraints, wholly inside the call,
    /// VA and PA aligned to the run, and all 16 entries invalid now (so this call writes all of
    /// them, with the same attributes).
    fn run_may_be_contiguous(&self, table: PhysAddr, level: u32, run_base: u64, args: &MapArgs) -> bool {
        let run_size = level_size(level) * CONTIGUOUS_ENTRIES as u64;
        if level < 2
            || args.constraints.contains(Constraints::NO_CONTIGUOUS)
            || !args.constraints.allows_leaf(level)
        {
            return false;
        }
        debug_assert!(run_base.is_multiple_of(run_size), "called at the first entry of a run");
        if run_base < args.start || run_base + run_size > args.end {
            return false;
        }
        if !args.pa_at(run_base).is_multiple_of(run_size) {
            return false;
        }
        let first = index_of(run_base, level);
        (first..first + CONTIGUOUS_ENTRIES).all(|i| !self.read(table, i).is_valid())
    }

    // ---- unmap and protect -------------------------------------------------------------------------

    /// Unmaps `[va, va + size)`. Unmapped holes are skipped. A block partly inside the range is
    /// split first (not on a live table); a contiguous run partly inside the range loses its
    /// hint (not on a live table). Tables left empty are detached and handed back in the record.
    ///
    /// The returned record must be turned into a TLB invalidation by the caller; after it has
    /// completed, [`PendingFlush::release`] frees the detached table frames. On a table that was
    /// never live the record may be released at once.
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`], [`MapError::Misaligned`]: as for [`map`](Self::map);
    /// - [`MapError::BreakBeforeMakeRequired`]: the table is live and the range cuts a block or a
    ///   contiguous run;
    /// - [`MapError::OutOfMemory`]: a table for splitting a block could not be allocated.
    ///
    /// On error nothing has changed.
    #[inline]
    pub fn unmap(&mut self, va: VirtAddr, size: u64) -> Result<PendingFlush, MapError> {
        self.modify(va, size, LeafOp::<fn(Attributes) -> Attributes>::Unmap)
    }

    /// Sets the attributes of every leaf in `[va, va + size)` to `attrs` (holes are skipped).
    /// Equivalent to [`protect_with`](Self::protect_with)`(va, size, |_| attrs)`.
    ///
    /// # Errors
    ///
    /// As for [`protect_with`](Self::protect_with).
    pub fn protect(&mut self, va: VirtAddr, size: u64, attrs: Attributes) -> Result<PendingFlush, MapError> {
        self.protect_with(va, size, |_| attrs)
    }

    /// Replaces the attributes `a` of every leaf in `[va, va + size)` with `change(a)`; holes are
    /// skipped. `change` is called more than once per leaf and must be a pure function (for
    /// `mprotect`: `|a| a.with_permissions_of(new)`). A block or contiguous run partly inside the
    /// range is split or loses its hint first, if the change touches it (not on a live table).
    ///
    /// On a live table only the BBM-free bits (AP, PXN, UXN) may change. The record describes
    /// the leaves changed; it never detaches tables.
    ///
    /// # Errors
    ///
    /// - [`MapError::InvalidRange`], [`MapError::Misaligned`]: as for [`map`](Self::map);
    /// - [`MapError::BreakBeforeMakeRequired`]: the table is live and a change needs
    ///   break-before-make (memory type, shareability, nG), or cuts a block or a contiguous run;
    /// - [`MapError::OutOfMemory`]: a table for splitting a block could not be allocated.
    ///
    /// On error nothing has changed.
    #[inline]
    pub fn protect_with<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        change: F,
    ) -> Result<PendingFlush, MapError> {
        self.modify(va, size, LeafOp::Protect(change))
    }

    #[inline]
    fn modify<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        mut op: LeafOp<F>,
    ) -> Result<PendingFlush, MapError> {
        let (start, end) = self.check_range(va, size)?;
        if let Some(table) = self.fast_path_table(start, end) {
            // Built in place in the result: the record is returned without a copy.
            let mut result = Ok(PendingFlush::new(self.range));
            if let Ok(record) = &mut result
                && self.modify_pages_in(table, start, end, &mut op, record)
            {
                return result;
            }
            debug_assert!(result.as_ref().is_ok_and(|r| !r.needs_flush()));
            // The record is empty (nothing was changed); dropping it is fine.
        }
        self.modify_checked(start, end, op)
    }

    /// The general `unmap`/`protect` of a checked range: dry run, reservation, commit.
    #[inline(never)]
    fn modify_checked<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        start: u64,
        end: u64,
        mut op: LeafOp<F>,
    ) -> Result<PendingFlush, MapError> {
        let mut record = PendingFlush::new(self.range);
        let mut pool = FrameList::new();
        let needed = self.modify_level::<false, F>(
            View::Real(self.root),
            ROOT_LEVEL,
            0,
            start,
            end,
            (start, end),
            &mut op,
            &mut record,
            &mut pool,
        )?;
        let mut pool = self.reserve(needed)?;
        // The commit may detach tables (or split blocks into new ones).
        self.forget_walk();
        let result = self.modify_level::<true, F>(
            View::Real(self.root),
            ROOT_LEVEL,
            0,
            start,
            end,
            (start, end),
            &mut op,
            &mut record,
            &mut pool,
        );
        debug_assert!(result.is_ok() && pool.is_empty());
        self.free_reservation(pool);
        result.map(|_| record)
    }

    /// Applies `op` to `[lo, hi)` in the table `view` at `level` (first entry at `table_base`).
    /// `range` is the whole operation's range (for contiguous runs). Dry run and commit as in
    /// `map_level`.
    #[allow(clippy::too_many_arguments)]
    fn modify_level<const COMMIT: bool, F: FnMut(Attributes) -> Attributes>(
        &mut self,
        view: View,
        level: u32,
        table_base: u64,
        lo: u64,
        hi: u64,
        range: (u64, u64),
        op: &mut LeafOp<F>,
        record: &mut PendingFlush,
        pool: &mut FrameList,
    ) -> Result<usize, MapError> {
        if level == 3
            && let View::Real(table) = view
            && !self.pages_need_general_path(table, lo, hi, range, op)
        {
            if COMMIT {
                self.modify_pages(table, lo, hi, op, record);
            }
            return Ok(0);
        }
        let size = level_size(level);
        let mut needed = 0;
        let mut off = lo;
        while off < hi {
            let index = ((off - table_base) / size) as usize;
            let entry_base = table_base + index as u64 * size;
            let entry_end = entry_base + size;
            let sub_hi = hi.min(entry_end);
            let whole = off == entry_base && sub_hi == entry_end;
            let d = self.view_read(view, level, index);
            match d.kind(level) {
                DescriptorKind::Invalid => {}
                DescriptorKind::Reserved => {
                    // Translates nothing and is never in a TLB: an unmap clears it when it lies
                    // wholly in the range (the emptiness checks rely on that), without a record.
                    if let (true, View::Real(table), LeafOp::Unmap, true) = (COMMIT, view, &*op, whole) {
                        self.write(table, index, Descriptor::INVALID);
                    }
                }
                DescriptorKind::Table => {
                    let next = d.output_address();
                    needed += self.modify_level::<COMMIT, F>(
                        View::Real(next),
                        level + 1,
                        entry_base,
                        off,
                        sub_hi,
                        range,
                        op,
                        record,
                        pool,
                    )?;
                    if let (true, View::Real(table), LeafOp::Unmap) = (COMMIT, view, &*op)
                        && (whole
                            || self.is_emptied(
                                next,
                                index_of(off, level + 1),
                                index_of(sub_hi - 1, level + 1) + 1,
                            ))
                    {
                        debug_assert!(self.is_empty_table(next));
                        self.write(table, index, Descriptor::INVALID);
                        record.detach_table(next, &self.translation);
                        self.stats.tables_detached += 1;
                    }
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    let old = d.attributes();
                    let new = match op {
                        LeafOp::Unmap => None,
                        LeafOp::Protect(f) => {
                            let new = f(old);
                            if new == old {
                                off = sub_hi;
                                continue;
                            }
                            if self.live && !old.may_change_in_place_to(new) {
                                return Err(MapError::BreakBeforeMakeRequired(self.va(off)));
                            }
                            Some(new)
                        }
                    };
                    if d.is_contiguous() {
                        let run_size = size * CONTIGUOUS_ENTRIES as u64;
                        let run_base = entry_base & !(run_size - 1);
                        if run_base < range.0 || run_base + run_size > range.1 {
                            if self.live {
                                return Err(MapError::BreakBeforeMakeRequired(self.va(off)));
                            }
                            if let (true, View::Real(table)) = (COMMIT, view) {
                                self.unfold_run(table, index);
                            }
                        }
                    }
                    if whole {
                        if let (true, View::Real(table)) = (COMMIT, view) {
                            // Re-read: unfolding may have cleared the hint.
                            let d = self.read(table, index);
                            let written = match new {
                                None => Descriptor::INVALID,
                                Some(new) => d.with_attributes(new),
                            };
                            self.write(table, index, written);
                            record.add_leaf(entry_base, size, old, new);
                        }
                    } else {
                        // A block partly in the range: split it into a table of next-level
                        // leaves with the same output addresses and attributes.
                        if self.live {
                            return Err(MapError::BreakBeforeMakeRequired(self.va(off)));
                        }
                        let split = View::Split { pa: d.output_address().0, attrs: old };
                        if let (true, View::Real(table)) = (COMMIT, view) {
                            let new_table = self.take_reserved(pool);
                            let sub_size = level_size(level + 1);
                            for i in 0..ENTRIES_PER_TABLE {
                                let pa = PhysAddr(d.output_address().0 + i as u64 * sub_size);
                                self.write(new_table, i, Descriptor::leaf(level + 1, pa, old, false));
                            }
                            self.translation.publish_barrier();
                            self.write(table, index, Descriptor::table(new_table));
                            self.modify_level::<true, F>(
                                View::Real(new_table),
                                level + 1,
                                entry_base,
                                off,
                                sub_hi,
                                range,
                                op,
                                record,
                                pool,
                            )?;
                        } else {
                            needed += 1 + self.modify_level::<false, F>(
                                split,
                                level + 1,
                                entry_base,
                                off,
                                sub_hi,
                                range,
                                op,
                                record,
                                pool,
                            )?;
                        }
                    }
                }
            }
            off = sub_hi;
        }
        Ok(needed)
    }

    /// Clears the contiguous hint on the 16-entry run holding `index` (a table that is not live).
    fn unfold_run(&mut self, table: PhysAddr, index: usize) {
        let first = index & !(CONTIGUOUS_ENTRIES - 1);
        for i in first..first + CONTIGUOUS_ENTRIES {
            let d = self.read(table, i);
            if d.is_contiguous() {
                self.write(table, i, d.with_contiguous(false));
            }
        }
    }

    // ---- queries ---------------------------------------------------------------------------------

    /// The leaf translating `va`, if any.
    pub fn query(&self, va: VirtAddr) -> Option<Leaf> {
        if !self.range.contains(va) {
            return None;
        }
        let off = va.0 & (SPACE_SIZE - 1);
        let mut table = self.root;
        let mut level = ROOT_LEVEL;
        loop {
            let size = level_size(level);
            let index = index_of(off, level);
            let d = self.read(table, index);
            match d.kind(level) {
                DescriptorKind::Table => {
                    table = d.output_address();
                    level += 1;
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    return Some(Leaf {
                        va: self.va(off & !(size - 1)),
                        pa: d.output_address(),
                        level,
                        size,
                        attrs: d.attributes(),
                        contiguous: d.is_contiguous(),
                    });
                }
                DescriptorKind::Invalid | DescriptorKind::Reserved => return None,
            }
        }
    }

    /// The physical address `va` translates to, if it is mapped.
    pub fn translate(&self, va: VirtAddr) -> Option<PhysAddr> {
        self.query(va).map(|leaf| leaf.translate(va))
    }

    /// Calls `f` for every leaf overlapping `[va, va + size)`, in ascending address order. Leaves
    /// are reported whole (a block may start before `va`).
    ///
    /// # Errors
    ///
    /// [`MapError::InvalidRange`] or [`MapError::Misaligned`] for a bad range, as for
    /// [`map`](Self::map).
    pub fn walk<F: FnMut(&Leaf)>(&self, va: VirtAddr, size: u64, mut f: F) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        self.walk_level(self.root, ROOT_LEVEL, 0, start, end, &mut f);
        Ok(())
    }

    /// Calls `f` for every leaf of the table, in ascending address order.
    pub fn walk_all<F: FnMut(&Leaf)>(&self, mut f: F) {
        self.walk_level(self.root, ROOT_LEVEL, 0, 0, SPACE_SIZE, &mut f);
    }

    fn walk_level<F: FnMut(&Leaf)>(
        &self,
        table: PhysAddr,
        level: u32,
        table_base: u64,
        lo: u64,
        hi: u64,
        f: &mut F,
    ) {
        let size = level_size(level);
        let mut off = lo;
        while off < hi {
            let index = ((off - table_base) / size) as usize;
            let entry_base = table_base + index as u64 * size;
            let entry_end = entry_base + size;
            let sub_hi = hi.min(entry_end);
            let d = self.read(table, index);
            match d.kind(level) {
                DescriptorKind::Table => {
                    self.walk_level(d.output_address(), level + 1, entry_base, off, sub_hi, f)
                }
                DescriptorKind::Block | DescriptorKind::Page => f(&Leaf {
                    va: self.va(entry_base),
                    pa: d.output_address(),
                    level,
                    size,
                    attrs: d.attributes(),
                    contiguous: d.is_contiguous(),
                }),
                DescriptorKind::Invalid | DescriptorKind::Reserved => {}
            }
            off = sub_hi;
        }
    }

    /// Unmaps everything and detaches every table, the root included, into the returned record;
    /// gives back the translation. Release the record (after flushing the ASID, or the whole TLB
    /// for global entries, if the table was ever live) to free every frame.
    pub fn destroy(mut self) -> (T, PendingFlush) {
        let mut record = PendingFlush::new(self.range);
        let mut pool = FrameList::new();
        // The whole space cuts no block and no run, so this needs no frame and cannot fail.
        let mut op = LeafOp::<fn(Attributes) -> Attributes>::Unmap;
        let result = self.modify_level::<true, _>(
            View::Real(self.root),
            ROOT_LEVEL,
            0,
            0,
            SPACE_SIZE,
            (0, SPACE_SIZE),
            &mut op,
            &mut record,
            &mut pool,
        );
        debug_assert!(matches!(result, Ok(0)));
        record.detach_table(self.root, &self.translation);
        (self.translation, record)
    }
}
