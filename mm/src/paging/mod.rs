//! Stage-1 translation tables: the build's granule ([`Format::BUILD`]: 4 KiB, or 16 KiB or
//! 64 KiB with the `granule-16k`/`granule-64k` features), 48-bit VA, one TTBR (52-bit with the
//! `lpa2` feature: see [`lpa2`] for the level −1 table of 4 KiB pages).
//!
//! Why this file is long: it is the engine's public face and its design notes — the types a
//! caller names ([`PageTable`], [`Translation`], [`Constraints`], [`MapError`], [`Leaf`], [`Stats`])
//! and the small helpers every file of the engine uses (entry access, the range check, frame
//! reservation). The work itself is in the files listed at the end of this documentation.
//!
//! | granule | levels | entries a table | blocks | contiguous runs (L3, L2) | last-table region |
//! |---------|--------|-----------------|--------|--------------------------|-------------------|
//! | 4 KiB   | 0–3    | 512             | 1 GiB (L1), 2 MiB (L2) | 16 (64 KiB), 16 (32 MiB) | 2 MiB |
//! | 16 KiB  | 0 (2 entries), 1–3 | 2048 | 32 MiB (L2) | 128 (2 MiB), 32 (1 GiB) | 32 MiB |
//! | 64 KiB  | 1 (64 entries), 2–3 | 8192 | 512 MiB (L2) | 32 (2 MiB), 32 (16 GiB) | 512 MiB |
//!
//! (Arm ARM D8.2 for the levels and block sizes, D8.6.1 for the runs; the numbers are those of
//! [`crate::granule`], which the code below takes as constants. "2 MiB" in the names below is
//! the 4 KiB granule's level-2 block, [`crate::addr::BLOCK_2M`], whatever the granule.)
//!
//! Why it is built this way:
//! - **One seam.** Table frames come from, and are reached through, a [`Translation`]
//!   implementation: a frame allocator plus "PA → pointer". The kernel uses a bump allocator and
//!   an offset in early boot, the frame allocator and the linear map later; the host tests use an
//!   emulated physical memory. Everything is generic over `T: Translation`, never `dyn`: the
//!   engine also runs in early boot with the MMU off, at a physical address different from the
//!   link address, where vtables (absolute link-time addresses), statics holding pointers, the
//!   heap and formatting are unusable. No path taken on valid input panics.
//! - **Check, reserve, then commit.** Every operation first finds, without writing, everything
//!   that can make it fail (`AlreadyMapped`, a break-before-make violation on a live table) and
//!   counts the table frames it needs; then it allocates all of them; only then does it write,
//!   and the writing phase cannot fail. So a failed call changes nothing at all and leaks
//!   nothing, which is stronger than undoing writes: a walker never saw a half-built mapping, and
//!   no table that a walk cache may have cached has to be freed without a TLB flush.
//! - **One iterator, one modification engine.** Every walk visits, per level, the entries of one
//!   table that overlap its range through the one iterator of `walk.rs` (index, span, and the
//!   part of the range inside it, from absolute offsets). Every change to existing leaves —
//!   `unmap`, `protect`, `destroy`, `Drop` and the staged break-before-make operations — is the
//!   one engine of `engine.rs`, which decides once how a range cuts blocks (split), contiguous
//!   runs (unfold), reserved encodings (cleared by an unmap) and tables (detached when emptied),
//!   and is told by a mode how to write: final (the direct operations; on a table that is not
//!   live, this is the staged path with nothing to flush) or staged for a later flush
//!   (`bbm.rs`). `map`, which only creates, is its own walker (`map.rs`): a dry run and a commit
//!   over the same entries.
//! - **One walk when nothing can fail.** The common call — `map`, `unmap` or `protect` of a few
//!   pages inside one level-2 region (2 MiB with 4 KiB pages) whose last-level table already exists — needs no frame, so
//!   the only failures left are the ones a read-only look at the entries of the range finds
//!   (`AlreadyMapped`; a change needing break-before-make on a live table). The fast path does
//!   that look, then runs the same last-level code as the general path on that one table; a
//!   `map` that finds an entry in the way goes to the general path, which reports it as usual.
//!   The last-level table is found through a one-entry software *last-table cache* (not to be
//!   confused with the hardware's walk cache of table entries) keyed by `VA >> 21` (4 KiB
//!   pages; `>> 25` with 16 KiB, `>> 29` with 64 KiB) (two plain
//!   fields: no atomics, no heap), emptied before any table descriptor is removed or
//!   replaced (an `unmap` detaching a table, every staged operation of `bbm.rs`); `map` only
//!   turns invalid entries valid, so it never makes a cached path wrong. The cache also keeps the
//!   level-2 table, whose entry holds the last-level table's occupancy count, and the level-1
//!   table, which serves the rest of its 512 GiB region: a miss there reads one level-1 and one
//!   level-2 entry instead of walking from the root (it does not test whether the 1 GiB region
//!   is the cached one, a branch that random calls mispredict). An `unmap` that
//!   empties the table detaches it and the tables above it that it empties, as the general path
//!   does.
//!   The differential property test in `tests.rs` runs every operation both ways and compares
//!   tables, records, errors and frames.
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
//! - **A dropped table frees its frames, unless it is live.** A table that is not live is reached
//!   by no walker and held by no TLB, so `Drop` frees every frame. A live table's frames may be
//!   freed only after a flush that only the TLB's owner can issue, so `Drop` leaks them (safe)
//!   and the rule is that a live table ends with [`PageTable::destroy`]: see the `Drop` impl.
//!
//! Files: `walk.rs` (the entry iterator, the root-to-leaf walk, the last-table cache, queries),
//! `map.rs`, `engine.rs` (the modification engine), `modify.rs` (direct `unmap`/`protect` and the
//! checks before a modification), `bbm.rs` (staging marks, promotion, fold, finish), `flush.rs`
//! (the record of what a flush must cover), `occupancy.rs` (each table's count of occupied
//! entries, kept in ignored bits of the table descriptor above it, which decides when a table
//! is empty without reading it), `guard.rs` (guard markers: invalid entries a fault recognises as
//! a guard region).
//!
//! Memory ordering: every table write is one aligned `u64` volatile store, in the order the source
//! says, and a new table is completely written (zeroed and filled) before the descriptor that
//! publishes it, with [`Translation::publish_barrier`] (the kernel: `DSB ISHST`) in between. The
//! caller still needs `DSB ISHST` (and `ISB` for the local CPU) before relying on a new mapping,
//! and the TLB maintenance sequence after removing or changing one. New tables are zeroed with
//! one volatile store per entry rather than `memset`: with the MMU off every data access is Device memory,
//! where the `DC ZVA` a `memset` may use faults. (Tables written with the MMU off go straight to
//! memory; the kernel must make sure no stale cache line covers the table arena before it turns
//! on cacheable walks.)

use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use crate::addr::{PAGE_SIZE, PhysAddr, VA_BITS, VirtAddr};
use crate::descriptor::{Attributes, Descriptor};
use crate::granule::Format;

mod bbm;
mod copy;
mod engine;
mod flush;
mod guard;
mod listing;
pub mod lpa2;
mod map;
mod modify;
#[cfg(test)]
mod mutant_tests;
mod occupancy;
mod relocate;
#[cfg(test)]
mod tests;
mod walk;

pub(crate) use bbm::BbmCounts;
pub(crate) use engine::StagedOp;

pub use copy::Copied;
pub use flush::{FlushRange, FrameList, PendingFlush};
pub use listing::Mappings;

/// The build's translation format: every number of the tables below comes from it, as a
/// constant (so the 4 KiB build folds to the shifts and masks it always had).
const FORMAT: Format = Format::BUILD;

/// The lowest offset bit that indexes a table at `level` (the log2 of one entry's span): 12, 21,
/// 30, 39 for levels 3 to 0 with 4 KiB pages; 14, 25, 36, 47 with 16 KiB; 16, 29, 42 with 64 KiB.
const fn level_shift(level: u32) -> u32 {
    FORMAT.granule.level_shift(level as i32)
}

/// The index of the entry translating offset `off` in a table at `level`. The root table of
/// the 16 KiB granule (2 entries) and of the 64 KiB granule (64 entries) is smaller than a
/// full one; offsets stay below 2^48, so the full-table mask gives its index too.
const fn index_of(off: u64, level: u32) -> usize {
    ((off >> level_shift(level)) & (ENTRIES_PER_TABLE as u64 - 1)) as usize
}

/// Number of descriptors in one table: 512, 2048 or 8192 (one page of 8-byte descriptors).
pub const ENTRIES_PER_TABLE: usize = FORMAT.granule.entries();

/// Size of the part of the address space one tree translates ([`VA_BITS`]: 2^48 bytes, or
/// 2^52 with 16 KiB pages and LPA2).
const SPACE_SIZE: u64 = 1 << VA_BITS;
/// The level of the root table: 0 with 4 KiB and 16 KiB pages, 1 with 64 KiB. With 4 KiB pages
/// and LPA2 the walk starts at level −1, whose table [`lpa2`] builds above the level-0 roots.
pub(crate) const ROOT_LEVEL: u32 = if FORMAT.start_level() < 0 { 0 } else { FORMAT.start_level() as u32 };
const _: () =
    assert!(SPACE_SIZE == FORMAT.entry_span(ROOT_LEVEL as i32) * FORMAT.entries(ROOT_LEVEL as i32) as u64);
/// Whether level-1 entries may be blocks (1 GiB with 4 KiB pages; none with 16 or 64 KiB and
/// 48-bit addresses).
const LEVEL1_BLOCKS: bool = FORMAT.block_size(1).is_some();

/// The entries of one contiguous run at `level` (2 or 3; other levels have none, and get the
/// level-2 number so that the 4 KiB build, whose two runs are equal, folds it to a constant):
/// 16 and 16 with 4 KiB pages, 128 and 32 with 16 KiB, 32 and 32 with 64 KiB.
#[inline(always)]
const fn run_entries(level: u32) -> usize {
    if level == 3 { PAGE_RUN } else { BLOCK_RUN }
}
/// Entries of a contiguous run of pages (level 3).
const PAGE_RUN: usize = match FORMAT.granule.contiguous_entries(3) {
    Some(n) => n as usize,
    None => panic!("every granule has contiguous pages"),
};
/// Entries of a contiguous run of level-2 blocks.
const BLOCK_RUN: usize = match FORMAT.granule.contiguous_entries(2) {
    Some(n) => n as usize,
    None => panic!("every granule has contiguous level-2 blocks"),
};

/// One table frame as a Rust type: a page of descriptors, aligned to the page (for
/// implementations of [`Translation`] that take frames from a Rust allocator or a static arena).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(any(feature = "granule-16k", feature = "granule-64k")), repr(C, align(4096)))]
#[cfg_attr(all(feature = "granule-16k", not(feature = "granule-64k")), repr(C, align(16384)))]
#[cfg_attr(feature = "granule-64k", repr(C, align(65536)))]
pub struct AlignedTable(pub [u64; ENTRIES_PER_TABLE]);
const _: () = assert!(core::mem::align_of::<AlignedTable>() as u64 == PAGE_SIZE);

/// Where page-table frames come from and how the engine reaches them.
///
/// # Safety
///
/// Implementors guarantee that, for every `pa` returned by [`allocate_table`] and not yet passed
/// to [`deallocate_table`]:
/// - `pa` is aligned to the page size ([`PAGE_SIZE`]), below 2^[`PA_BITS`](crate::addr::PA_BITS) (2^48, 2^52 with LPA2), and the frame is not used by
///   anything else;
/// - [`table_ptr`]`(pa)` returns a pointer, aligned to 8 bytes, valid for reads and writes of
///   [`PAGE_SIZE`] bytes for as long as the frame stays allocated, and not covered by any Rust reference
///   while the engine uses it.
///
/// [`allocate_table`]: Translation::allocate_table
/// [`deallocate_table`]: Translation::deallocate_table
/// [`table_ptr`]: Translation::table_ptr
pub unsafe trait Translation {
    /// Allocates a frame of one page for a table. Its contents are unspecified (the engine zeroes it).
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
    /// No restriction: blocks (1 GiB and 2 MiB with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB
    /// with 64 KiB) and contiguous runs wherever alignment allows.
    pub const NONE: Self = Self(0);
    /// Pages only: no blocks.
    pub const NO_BLOCKS: Self = Self(1 << 0);
    /// No level-1 blocks (1 GiB with 4 KiB pages; the other granules have none); level-2 blocks
    /// are still allowed.
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

    /// Whether a leaf may be placed at `level` (level-1 and level-2 blocks where the granule has
    /// them; pages always).
    const fn allows_leaf(self, level: u32) -> bool {
        match level {
            1 => LEVEL1_BLOCKS && !self.contains(Self::NO_BLOCKS) && !self.contains(Self::NO_1G_BLOCKS),
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
    /// An address or size is not a multiple of the page size.
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
    /// The level of the table holding the leaf: 1 (a 1 GiB block, 4 KiB granule only), 2 (a
    /// block: 2 MiB, 32 MiB or 512 MiB) or 3 (a page).
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

/// A stage-1 translation table tree for one half of the address space.
///
/// See the [module documentation](self) for the rules it follows. Dropping a table that is not
/// live frees every frame; a live one must be ended with [`destroy`](Self::destroy), because its
/// frames may be freed only after a TLB flush (see [`Drop`](#impl-Drop-for-PageTable%3CT%3E)).
///
/// # Example
///
/// ```
/// use core::ptr::NonNull;
/// use mm::addr::{BLOCK_2M, PhysAddr, VirtAddr};
/// use mm::descriptor::Attributes;
/// use mm::paging::{Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};
///
/// /// Frames from the heap; the "physical address" is the pointer (below 2^48 on the host).
/// struct Heap;
/// // SAFETY: frames are page-aligned, exclusively owned allocations, valid until deallocated.
/// unsafe impl Translation for Heap {
///     fn allocate_table(&mut self) -> Option<PhysAddr> {
///         let frame = Box::new(mm::paging::AlignedTable([0; ENTRIES_PER_TABLE]));
///         Some(PhysAddr(Box::into_raw(frame) as u64))
///     }
///     fn deallocate_table(&mut self, pa: PhysAddr) {
///         // SAFETY: `pa` came from `allocate_table`.
///         drop(unsafe { Box::from_raw(pa.0 as *mut mm::paging::AlignedTable) });
///     }
///     fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
///         NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).unwrap()
///     }
/// }
///
/// let mut pt = PageTable::new(Heap, VaRange::Upper)?;
/// let va = VirtAddr(0xffff_0000_4000_0000);
/// // Two level-2 blocks (2 MiB each with 4 KiB pages), aligned on both sides.
/// let size = 2 * BLOCK_2M;
/// pt.map(va, PhysAddr(0x4000_0000), size, Attributes::kernel_data(), Constraints::NONE)?;
/// assert_eq!(pt.query(va).map(|leaf| leaf.level), Some(2));
/// pt.set_live(true); // Installed in TTBR1_EL1 from here on.
///
/// let record = pt.unmap(va, size)?;
/// let range = record.range().unwrap();
/// assert_eq!((range.start, range.size), (va, size));
/// assert!(record.tables_removed()); // Non-leaf TLBI forms, then:
/// record.release(pt.translation_mut()); // only after the invalidation has completed.
///
/// // A live table ends with `destroy` (a table that is not live may simply be dropped).
/// let (mut heap, record) = pt.destroy();
/// record.release(&mut heap); // After flushing the whole TLB (the entries were global).
/// # Ok::<(), mm::paging::MapError>(())
/// ```
pub struct PageTable<T: Translation> {
    translation: T,
    root: PhysAddr,
    range: VaRange,
    live: bool,
    stats: Stats,
    /// The last-table cache: `walk_key` is `off >> level_shift(2)` of the region (2 MiB with
    /// 4 KiB pages) whose last-level table is
    /// `walk_table`, pointed at by an entry of the level-2 table `walk_parent`, itself pointed
    /// at by an entry of the level-1 table `walk_grandparent`, or `NO_WALK` when empty (see
    /// `walk.rs`).
    walk_key: u64,
    walk_grandparent: PhysAddr,
    walk_parent: PhysAddr,
    walk_table: PhysAddr,
    /// A guard marker has been written into this tree since it was made (`guard.rs`); never
    /// cleared. While it is false no entry can be a marker, so the scans for markers
    /// (`guards_in`: every `mremap` move, every area at `fork`) return at once.
    guarded: bool,
    /// Staged marks (`bbm.rs`) written and not yet committed by `finish`: while it is zero,
    /// `finish` has nothing to do and returns at once (a permission-only change, such as a
    /// copy-on-write reuse or an `mprotect` between read-only and read-write, writes no mark).
    marks: usize,
    /// A staged operation cut a contiguous run (`engine.rs`, `apply_run`): the run is staged
    /// whole, also where it reaches past the operation's range, so `finish` widens its walk to
    /// whole runs. Cleared when the last mark is committed.
    runs_cut: bool,
    /// Test switch: send every call to the general path (to compare the two).
    #[cfg(test)]
    general_only: bool,
}

impl<T: Translation> core::fmt::Debug for PageTable<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PageTable")
            .field("root", &self.root)
            .field("range", &self.range)
            .field("live", &self.live)
            .field("stats", &self.stats)
            .finish()?;
        // Then the mappings, one run per line (`listing`), as golden tests compare them.
        write!(f, "\n{}", self.mappings())
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
            walk_key: walk::NO_WALK,
            walk_grandparent: PhysAddr(0),
            walk_parent: PhysAddr(0),
            walk_table: PhysAddr(0),
            guarded: false,
            marks: 0,
            runs_cut: false,
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
        // `Translation` contract the pointer is valid for `ENTRIES_PER_TABLE` `u64`s, and
        // `index < ENTRIES_PER_TABLE` (every index comes from `index_of` or a loop bounded by it).
        unsafe { base.as_ptr().add(index) }
    }

    /// The entries of `table` (a frame of this tree) for a loop over them that computes the
    /// table's address once: `read` and `write` translate it at every access (the kernel's
    /// linear-map offset is a load each time). Used only while the frame stays in the tree: no
    /// user frees a table while it holds its entries.
    #[inline(always)]
    fn entries(&self, table: PhysAddr) -> TableEntries<T> {
        TableEntries {
            base: self.translation.table_ptr(table).cast::<u64>().as_ptr(),
            #[cfg(test)]
            again: (&raw const self.translation, table),
            translation: core::marker::PhantomData,
        }
    }

    /// The first offset in `[off, hi)` (inside the span of `table`, at `level`) whose entry is
    /// not empty (`hi` if none), `off` itself if its own is not: a pass over a sparse table's
    /// empty entries in a few instructions each, for the loops that have nothing to do there.
    #[inline(always)]
    fn next_occupied(&self, table: PhysAddr, level: u32, off: u64, hi: u64) -> u64 {
        if off >= hi {
            return hi;
        }
        let view = self.entries(table);
        let (first, last) = (index_of(off, level), index_of(hi - 1, level));
        let mut i = first;
        while view.read(i) == Descriptor::INVALID.bits() {
            if i == last {
                return hi;
            }
            i += 1;
        }
        let size = crate::descriptor::level_size(level);
        if i == first { off } else { (off & !(size - 1)) + (i - first) as u64 * size }
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

    /// Writes a staged entry (`bbm.rs`), counted until `finish` commits it.
    fn write_mark(&mut self, table: PhysAddr, index: usize, descriptor: Descriptor) {
        debug_assert!(bbm::is_mark(descriptor), "write_mark of an unmarked entry");
        self.marks += 1;
        self.write(table, index, descriptor);
    }

    fn zero(&mut self, table: PhysAddr) {
        for i in 0..ENTRIES_PER_TABLE {
            self.write(table, i, Descriptor::INVALID);
        }
    }

    /// Whether no entry of `table` is occupied (valid, staged to become valid, or a guard).
    fn is_empty_table(&self, table: PhysAddr) -> bool {
        (0..ENTRIES_PER_TABLE).all(|i| !bbm::occupied(self.read(table, i)))
    }

    const fn va(&self, off: u64) -> VirtAddr {
        VirtAddr(self.range.base().0 | off)
    }

    /// Checks `[va, va + size)` and returns it as offsets from the range base.
    ///
    /// One test accepts every valid range, so a valid call pays one branch: aligned, inside this
    /// half (`start`, the offset from the half's base, wraps above the half's size for an
    /// address outside it), and `1 <= size <= SPACE_SIZE - start` (`size - 1` wraps for an empty
    /// range, so one comparison refuses both an empty and an overlong range). Which error a
    /// refused range gets is worked out apart, in [`range_error`](Self::range_error).
    #[inline(always)]
    fn check_range(&self, va: VirtAddr, size: u64) -> Result<(u64, u64), MapError> {
        let start = va.0.wrapping_sub(self.range.base().0);
        if (va.0 | size) & (PAGE_SIZE - 1) == 0
            && start < SPACE_SIZE
            && size.wrapping_sub(1) < SPACE_SIZE - start
        {
            return Ok((start, start + size));
        }
        Err(Self::range_error(va, size))
    }

    /// The error for a range [`check_range`](Self::check_range) refused: an empty range is
    /// invalid before it is misaligned; an aligned range it refused lies outside the half.
    #[cold]
    #[inline(never)]
    const fn range_error(va: VirtAddr, size: u64) -> MapError {
        if size != 0 && (va.0 | size) & (PAGE_SIZE - 1) != 0 {
            MapError::Misaligned
        } else {
            MapError::InvalidRange
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

    /// Takes a reserved frame. The frames were counted exactly before the first write (`map`'s
    /// dry run, `count_splits` for the engine), so the reservation is never empty here.
    fn take_reserved(&mut self, pool: &mut FrameList) -> PhysAddr {
        match pool.pop(&self.translation) {
            Some(pa) => pa,
            None => unreachable!("page-table reservation exhausted: dry run and commit disagree"),
        }
    }

    // ---- the end of a tree ------------------------------------------------------------------------

    /// Unmaps everything and detaches every table, the root included, into the returned record;
    /// gives back the translation. Release the record (after flushing the ASID, or the whole TLB
    /// for global entries, if the table was ever live) to free every frame. The way to end a live
    /// table (see [`Drop`](#impl-Drop-for-PageTable<T>)).
    pub fn destroy(self) -> (T, PendingFlush) {
        let mut this = ManuallyDrop::new(self);
        let record = this.unmap_everything();
        // SAFETY: `this` is never used again and never dropped (`ManuallyDrop`), so the
        // translation is moved out exactly once; the other fields own nothing.
        let translation = unsafe { core::ptr::read(&this.translation) };
        (translation, record)
    }
}

/// Dropping a table that is not live frees every frame it holds: no walker uses it and no TLB
/// holds any of it (the contract of [`PageTable::set_live`]), so nothing needs a flush first.
///
/// A live table is not freed: its frames may still be walked or cached, and only the owner of the
/// TLB can flush them. It must be ended with [`PageTable::destroy`] (then the flush, then
/// [`PendingFlush::release`]), or marked not live once its ASID or the TLB has been invalidated.
/// Dropping it anyway leaks its frames, which is safe where freeing them would not be. This is a
/// documented rule rather than an assertion: the host tests and doctests end many scenarios
/// with a live table on purpose (their memory goes with them), and the kernel ends every address
/// space with `destroy`, the only way its frames come back.
impl<T: Translation> Drop for PageTable<T> {
    fn drop(&mut self) {
        if self.live {
            return; // Leaked: see above.
        }
        let record = self.unmap_everything();
        record.release(&mut self.translation);
    }
}

/// The entries of one table frame of a tree ([`PageTable::entries`]): its address computed once
/// for a loop over them.
///
/// In the host tests every access still asks the translation for the frame, as `read` and
/// `write` do: the multi-CPU model lets the other CPUs walk at each such call, between any two
/// accesses of the code under test, and a loop through this view must give it the same chances.
struct TableEntries<T: Translation> {
    base: *mut u64,
    /// The tree's translation and the frame, asked again at each access (host tests).
    #[cfg(test)]
    again: (*const T, PhysAddr),
    translation: core::marker::PhantomData<*const T>,
}

impl<T: Translation> Clone for TableEntries<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Translation> Copy for TableEntries<T> {}

impl<T: Translation> TableEntries<T> {
    /// The pointer to entry `index` (host tests: after the translation's turn).
    #[inline(always)]
    fn at(self, index: usize) -> *mut u64 {
        debug_assert!(index < ENTRIES_PER_TABLE);
        #[cfg(test)]
        // SAFETY: the translation is the tree's, which outlives every view of its tables (a view
        // lives inside one method of the tree, which neither moves nor drops it meanwhile).
        let _ = unsafe { (*self.again.0).table_ptr(self.again.1) };
        // SAFETY: the base is the first entry of a table frame of the tree, valid for
        // `ENTRIES_PER_TABLE` entries by the `Translation` contract while the frame is in the
        // tree (every user holds it only while it frees no table), and every index comes from
        // `index_of` or a loop bounded by it.
        unsafe { self.base.add(index) }
    }

    /// Entry `index`, read as the walker may read it (volatile, as `PageTable::read`).
    #[inline(always)]
    fn read(self, index: usize) -> u64 {
        // SAFETY: `at` gives a valid, aligned entry of a live table frame.
        unsafe { self.at(index).read_volatile() }
    }

    /// Writes entry `index` (one aligned 64-bit store, volatile, as `PageTable::write`).
    #[inline(always)]
    fn write(self, index: usize, bits: u64) {
        // SAFETY: as in `read`.
        unsafe { self.at(index).write_volatile(bits) }
    }
}
