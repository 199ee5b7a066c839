//! How the table code moves through a tree: the one iterator over the entries of a table that
//! translate part of a range, the walk from the root along one address, the one-entry walk
//! cache, and the read-only queries built on them.
//!
//! Why it is built this way: every operation (map, the modification engine, finish, the
//! queries) visits, at each level, the entries of one table that overlap its range, and needs
//! for each the same four numbers: its index, the span it translates, and the part of the range
//! inside that span. [`Entries`] computes them in one place from absolute offsets (an entry's
//! index is bits `[47:12]` of its offset with 4 KiB pages, so no walker carries the base of its table), and
//! [`PageTable::descend`] is the one root-to-leaf walk behind `query`, the block-split count, the
//! promotion and fold checks and the last-table cache.

use crate::addr::PhysAddr;
use crate::descriptor::{Descriptor, DescriptorKind, level_size};

use super::{
    ENTRIES_PER_TABLE, Leaf, MapError, PageTable, ROOT_LEVEL, SPACE_SIZE, Translation, index_of, level_shift,
};

/// One entry of a table met by a walk over a range: where it sits and which part of the range it
/// translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// Index in its table, and the table's level.
    pub index: usize,
    pub level: u32,
    /// The first offset the entry translates.
    pub base: u64,
    /// The span the entry translates (the size of a leaf at its level).
    pub size: u64,
    /// The part of the range inside the entry's span: `[lo, hi)`.
    pub lo: u64,
    pub hi: u64,
}

impl Entry {
    /// Whether the range covers the entry's whole span.
    #[inline(always)]
    pub const fn whole(&self) -> bool {
        self.lo == self.base && self.hi == self.base + self.size
    }

    /// The first offset past the entry's span.
    #[inline(always)]
    pub const fn end(&self) -> u64 {
        self.base + self.size
    }
}

/// The entries of one table at `level` that translate part of `[lo, hi)`, in ascending order.
/// The range lies inside the span of that table (the walks clip it before they descend).
#[derive(Clone, Debug)]
pub(super) struct Entries {
    level: u32,
    shift: u32,
    off: u64,
    hi: u64,
}

impl Entries {
    #[inline(always)]
    pub const fn new(level: u32, lo: u64, hi: u64) -> Self {
        debug_assert!(lo < hi && hi <= SPACE_SIZE);
        Self { level, shift: level_shift(level), off: lo, hi }
    }

    /// Skips the entries below offset `off` (the rest of a contiguous run handled as a whole).
    #[inline(always)]
    pub fn skip_to(&mut self, off: u64) {
        self.off = self.off.max(off);
    }
}

impl Iterator for Entries {
    type Item = Entry;

    #[inline(always)]
    fn next(&mut self) -> Option<Entry> {
        if self.off >= self.hi {
            return None;
        }
        let size = 1u64 << self.shift;
        let base = self.off & !(size - 1);
        let hi = self.hi.min(base + size);
        let index = ((self.off >> self.shift) & (ENTRIES_PER_TABLE as u64 - 1)) as usize;
        let entry = Entry { index, level: self.level, base, size, lo: self.off, hi };
        self.off = hi;
        Some(entry)
    }
}

/// A last-level table found by the last-table cache, and the level-2 table whose entry points at it
/// (which holds its occupancy count).
#[derive(Clone, Copy, Debug)]
pub(super) struct LastLevel {
    pub parent: PhysAddr,
    pub table: PhysAddr,
}

/// The empty last-table cache (no offset below 2^52 shifts to it, nor to its level-1 or level-0
/// region).
pub(super) const NO_WALK: u64 = u64::MAX;
/// Log2 of the span of one last-level table (2 MiB with 4 KiB pages, 32 MiB with 16 KiB,
/// 512 MiB with 64 KiB).
const L3_SPAN_SHIFT: u32 = level_shift(2);
/// Log2 of the number of last-level tables one level-2 table points at (1 GiB / 2 MiB with
/// 4 KiB pages).
const L3_PER_L2_SHIFT: u32 = super::ENTRIES_PER_TABLE.trailing_zeros();

impl<T: Translation> PageTable<T> {
    /// The walk from the root towards offset `off`, through table descriptors, stopping at
    /// `max_level` or at the first entry that is not a table: that entry's level, the table
    /// holding it and its descriptor.
    #[inline(always)]
    pub(super) fn descend(&self, off: u64, max_level: u32) -> (u32, PhysAddr, Descriptor) {
        let (mut level, mut table) = (ROOT_LEVEL, self.root);
        loop {
            let d = self.read(table, index_of(off, level));
            if level == max_level || !d.is_table(level) {
                return (level, table, d);
            }
            table = d.output_address();
            level += 1;
        }
    }

    /// The table at `level` (the root level up to 3) on the path to offset `off`, if every entry
    /// above it is a table descriptor.
    ///
    /// Through [`descend`](Self::descend) like every other walk from the root, although this is
    /// the walk of every last-table-cache miss outside the cached 1 GiB region: a loop of its own
    /// (the fixed trip count unrolled) cost no fewer instructions (callgrind,
    /// docs/benchmark-notes.md §3: 12,432,057 either way for 2^17 calls that all walk from the
    /// root).
    #[inline(always)]
    pub(super) fn table_at(&self, off: u64, level: u32) -> Option<PhysAddr> {
        if level == ROOT_LEVEL {
            return Some(self.root);
        }
        let (at, _, d) = self.descend(off, level - 1);
        (at == level - 1 && d.is_table(at)).then(|| d.output_address())
    }

    /// The valid leaf translating offset `off`: `(level, first offset, descriptor)`.
    pub(super) fn leaf_at(&self, off: u64) -> Option<(u32, u64, Descriptor)> {
        let (level, _, d) = self.descend(off, 3);
        d.is_leaf(level).then(|| (level, off & !(level_size(level) - 1), d))
    }

    /// Whether `[va, va + size)` is known to hold no entry at all (no leaf, no guard marker):
    /// it lies in one last-level table that exists (found by the last-table cache) and every
    /// entry of it there is empty, or the walk towards it stops at an empty entry whose span
    /// holds it. `false` when that is not known so cheaply (or the range is bad).
    ///
    /// Why: a protection change of memory never touched has nothing to change, and finding
    /// that costs a few loads here against the whole staged operation's set-up (its record,
    /// the engine, the flush and the finish) for no entry.
    pub fn holds_nothing(&mut self, va: crate::addr::VirtAddr, size: u64) -> bool {
        let Ok((start, end)) = self.check_range(va, size) else { return false };
        if let Some(last) = self.fast_path_table(start, end) {
            return self.next_occupied(last.table, 3, start, end) == end;
        }
        let (level, _, d) = self.descend(start, 3);
        level < 3 && d.bits() == Descriptor::INVALID.bits() && (start ^ (end - 1)) >> level_shift(level) == 0
    }

    // ---- the last-table cache ---------------------------------------------------------------

    /// The last-level table translating `[start, end)` if the range lies within one level-2
    /// region (2 MiB with 4 KiB pages)
    /// whose table already exists (every level above holds a table descriptor): the only case the
    /// fast paths handle. `None` sends the call to the general path.
    #[inline(always)]
    pub(super) fn fast_path_table(&mut self, start: u64, end: u64) -> Option<LastLevel> {
        #[cfg(test)]
        if self.general_only {
            return None;
        }
        if (start ^ (end - 1)) >> L3_SPAN_SHIFT != 0 {
            return None;
        }
        self.last_level_table(start)
    }

    /// The level-3 table translating offset `off` and the level-2 table pointing at it, if the
    /// walk from the root meets a table descriptor at every level above 3.
    ///
    /// The last-table cache remembers the answer for the level-2 region of `off` (2 MiB with
    /// 4 KiB pages), and the tables above it, as a walk cache does: a hit returns the level-2
    /// and last-level tables, and a miss in the same level-0 region (512 GiB) reads the level-1
    /// and level-2 entries from the cached level-1 table, not every level from the root. It
    /// stays right as long as no table
    /// descriptor on that path is removed or replaced: `map` only turns invalid
    /// entries into valid ones, and every operation that removes or replaces a table descriptor
    /// (the modification engine when it may detach or split, the staged operations of `bbm.rs`,
    /// `destroy`) first empties the cache with [`forget_walk`](Self::forget_walk). A table frame
    /// is never freed while it is in the tree, so the cached frames are always this tree's.
    #[inline(always)]
    pub(super) fn last_level_table(&mut self, off: u64) -> Option<LastLevel> {
        let key = off >> L3_SPAN_SHIFT;
        if key == self.walk_key {
            return Some(LastLevel { parent: self.walk_parent, table: self.walk_table });
        }
        // The cache is written only once the whole path is found: a miss leaves it as it was.
        // The level-1 entry is read again even when the level-1 region (1 GiB) is the cached
        // one: that read hits a line the last walk read, and it spares a branch on which region
        // it is, which a call in a random place of a few GiB mispredicts often.
        // With the 64 KiB granule the root is at level 1 and every offset shares it (the
        // level-0 region is wider than the space), which `table_at` returns.
        let grandparent = if key >> (2 * L3_PER_L2_SHIFT) == self.walk_key >> (2 * L3_PER_L2_SHIFT) {
            self.walk_grandparent
        } else {
            self.table_at(off, 1)?
        };
        let d = self.read(grandparent, index_of(off, 1));
        if !d.is_table(1) {
            return None;
        }
        let parent = d.output_address();
        let d = self.read(parent, index_of(off, 2));
        if !d.is_table(2) {
            return None;
        }
        let table = d.output_address();
        self.walk_key = key;
        self.walk_grandparent = grandparent;
        self.walk_parent = parent;
        self.walk_table = table;
        Some(LastLevel { parent, table })
    }

    /// Empties the last-table cache. Called before any table descriptor is removed or replaced.
    pub(crate) fn forget_walk(&mut self) {
        self.walk_key = NO_WALK;
    }

    // ---- queries ------------------------------------------------------------------------------

    /// The leaf translating `va`, if any.
    pub fn query(&self, va: crate::addr::VirtAddr) -> Option<Leaf> {
        if !self.range.contains(va) {
            return None;
        }
        let off = va.0 & (SPACE_SIZE - 1);
        let (level, base, d) = self.leaf_at(off)?;
        Some(self.leaf(d, level, base))
    }

    /// The physical address `va` translates to, if it is mapped.
    pub fn translate(&self, va: crate::addr::VirtAddr) -> Option<PhysAddr> {
        self.query(va).map(|leaf| leaf.translate(va))
    }

    /// The [`Leaf`] that descriptor `d` at `level`, translating from offset `base`, is.
    pub(super) fn leaf(&self, d: Descriptor, level: u32, base: u64) -> Leaf {
        Leaf {
            va: self.va(base),
            pa: d.output_address(),
            level,
            size: level_size(level),
            attrs: d.attributes(),
            contiguous: d.is_contiguous(),
        }
    }

    /// Calls `f` for every leaf overlapping `[va, va + size)`, in ascending address order. Leaves
    /// are reported whole (a block may start before `va`).
    ///
    /// # Errors
    ///
    /// [`MapError::InvalidRange`] or [`MapError::Misaligned`] for a bad range, as for
    /// [`map`](Self::map).
    pub fn walk<F: FnMut(&Leaf)>(
        &self,
        va: crate::addr::VirtAddr,
        size: u64,
        mut f: F,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        self.walk_level::<false, true, F>(self.root, ROOT_LEVEL, start, end, &mut f);
        Ok(())
    }

    /// [`walk`](Self::walk) of the blocks alone: the leaves above level 3, without reading a
    /// last-level table (for a caller that copies pages table by table: `copy_pages_from`).
    ///
    /// # Errors
    ///
    /// As [`walk`](Self::walk).
    pub fn walk_blocks<F: FnMut(&Leaf)>(
        &self,
        va: crate::addr::VirtAddr,
        size: u64,
        mut f: F,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        self.walk_level::<false, false, F>(self.root, ROOT_LEVEL, start, end, &mut f);
        Ok(())
    }

    /// Calls `f` for every leaf of the table, in ascending address order.
    pub fn walk_all<F: FnMut(&Leaf)>(&self, mut f: F) {
        self.walk_level::<false, true, F>(self.root, ROOT_LEVEL, 0, SPACE_SIZE, &mut f);
    }

    /// [`walk`](Self::walk), reporting each contiguous run of pages as one leaf (its whole span,
    /// from its first page: a run's entries translate consecutive frames with the same
    /// attributes, so one leaf says what its sixteen would) and skipping its other entries.
    /// For a caller that joins leaves anyway (`AddressSpace::extents`): a run costs one visit.
    ///
    /// # Errors
    ///
    /// As [`walk`](Self::walk).
    pub fn walk_runs<F: FnMut(&Leaf)>(
        &self,
        va: crate::addr::VirtAddr,
        size: u64,
        mut f: F,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        self.walk_level::<true, true, F>(self.root, ROOT_LEVEL, start, end, &mut f);
        Ok(())
    }

    /// The one walker behind `walk`, `walk_all`, `walk_runs` and `walk_blocks`: every leaf of
    /// `[lo, hi)` below `table`, and with `RUNS` a contiguous run of pages as one leaf from its
    /// first page, its other entries skipped (the constant compiles the test out of the plain
    /// walks); without `PAGES` no last-level table is entered.
    fn walk_level<const RUNS: bool, const PAGES: bool, F: FnMut(&Leaf)>(
        &self,
        table: PhysAddr,
        level: u32,
        lo: u64,
        hi: u64,
        f: &mut F,
    ) {
        const RUN: u64 = crate::descriptor::CONTIGUOUS_ENTRIES as u64 * crate::addr::PAGE_SIZE;
        let mut entries = Entries::new(level, lo, hi);
        while let Some(e) = entries.next() {
            let d = self.read(table, e.index);
            match d.kind(level) {
                DescriptorKind::Table if PAGES || level + 1 < 3 => {
                    self.walk_level::<RUNS, PAGES, F>(d.output_address(), level + 1, e.lo, e.hi, f)
                }
                DescriptorKind::Table => {}
                DescriptorKind::Page if RUNS && d.is_contiguous() => {
                    let base = e.base & !(RUN - 1);
                    let first = PhysAddr(d.output_address().0 - (e.base - base));
                    f(&Leaf { pa: first, size: RUN, ..self.leaf(d, level, base) });
                    entries.skip_to(base + RUN);
                }
                DescriptorKind::Block | DescriptorKind::Page => f(&self.leaf(d, level, e.base)),
                DescriptorKind::Invalid | DescriptorKind::Reserved => {}
            }
        }
    }
}
