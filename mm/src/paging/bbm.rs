//! Break-before-make on a live table: the staged operations that [`crate::space`] drives.
//!
//! Why it is built this way: changing a live valid entry's output address, size, memory type or
//! contiguous hint needs break-before-make — write the entry invalid, invalidate the TLB, then
//! write the new entry — and one operation may have to do that for any number of entries (a
//! memory-type change over a whole range) while the crate has no heap. So the new value is kept
//! *in the broken entry itself*: for an invalid descriptor (bit 0 clear) the walker ignores every
//! other bit (Arm ARM D8.3), so a broken entry is written as "the new descriptor with bit 0 clear
//! and a software mark". One operation therefore runs in three phases:
//!
//! 1. **stage** (before the flush, cannot fail once the split tables are reserved): entries that
//!    need BBM are written as staged-invalid (`MARK_MAKE`), unmapped leaves keep their output
//!    address under `MARK_UNMAP` (so their frames can be handed back *after* the flush), emptied
//!    tables are cut off under `MARK_DETACH` (their frames are freed after the flush), new tables
//!    for block splits are built completely before anything is broken, and permission-only
//!    changes (AP, PXN, UXN) are written in place. Everything changed goes into one
//!    [`PendingFlush`];
//! 2. the caller issues **one** planned flush for the record;
//! 3. **finish** walks the same range again: `MARK_MAKE` entries become valid, `MARK_UNMAP`
//!    leaves are reported and cleared, detached tables are drained, reported and freed.
//!
//! Between 1 and 3 the table holds marks, so no other table operation may run in between (the
//! address space holds `&mut` for the whole sequence). Marks use bits `[57:55]`, which no valid
//! descriptor this crate writes ever has set.

use super::flush::{FrameList, PendingFlush};
use super::{
    Constraints, ENTRIES_PER_TABLE, Leaf, MapArgs, MapError, PageTable, ROOT_LEVEL, SPACE_SIZE, Translation,
    View, index_of,
};
use crate::addr::{BLOCK_2M, PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, CONTIGUOUS_ENTRIES, Descriptor, DescriptorKind, level_size};

/// Staged-invalid entry holding the descriptor to write (with bit 0 set) after the flush.
pub(crate) const MARK_MAKE: u64 = 1 << 55;
/// Staged-invalid leaf that was unmapped: reported to the caller after the flush, then cleared.
pub(crate) const MARK_UNMAP: u64 = 1 << 56;
/// Staged-invalid table descriptor of a table emptied by the operation: drained and freed after
/// the flush.
pub(crate) const MARK_DETACH: u64 = 1 << 57;
const VALID: u64 = 1;
const RUN: usize = CONTIGUOUS_ENTRIES;

/// `d` broken (bit 0 clear) and marked.
const fn staged(d: Descriptor, mark: u64) -> Descriptor {
    Descriptor::from_bits((d.bits() & !VALID) | mark)
}

/// Whether an entry holds something after the operation: valid, or staged to become valid.
const fn occupied(d: Descriptor) -> bool {
    d.is_valid() || d.bits() & MARK_MAKE != 0
}

/// What a staged operation does to the leaves in its range.
pub(crate) enum StagedOp<F> {
    /// Remove them.
    Unmap,
    /// Give them the attributes `f(old)` (`f` pure).
    Protect(F),
    /// Change nothing, but split a block partly in the range and clear the contiguous hint of a
    /// run partly in it.
    Demote,
}

impl<F: FnMut(Attributes) -> Attributes> StagedOp<F> {
    /// The attributes of a leaf after the operation, or `None` if it is removed. For `Protect`
    /// without effect, `Some(old)`.
    fn new_attrs(&mut self, old: Attributes) -> Option<Attributes> {
        match self {
            Self::Unmap => None,
            Self::Protect(f) => Some(f(old)),
            Self::Demote => Some(old),
        }
    }

    /// Whether the operation does anything to a leaf with attributes `old`.
    fn touches(&mut self, old: Attributes) -> bool {
        match self {
            Self::Unmap | Self::Demote => true,
            Self::Protect(f) => f(old) != old,
        }
    }
}

/// Counters of the structural changes a staged operation made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BbmCounts {
    /// Blocks split into a table of smaller leaves.
    pub splits: u64,
    /// Contiguous runs whose hint was cleared.
    pub unfolds: u64,
    /// Level-3 tables replaced by a 2 MiB block.
    pub promotions: u64,
    /// Runs of 16 pages given the contiguous hint.
    pub folds: u64,
}

/// The state of one staging pass.
struct Stager<'a, F> {
    op: StagedOp<F>,
    record: &'a mut PendingFlush,
    pool: FrameList,
    counts: &'a mut BbmCounts,
    /// Whether a split sets the contiguous hint on runs of the new table that allow it.
    split_contiguous: bool,
}

/// Where one entry of a new (split) table stands relative to the operation's range.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Outside,
    Inside,
    Partial,
}

const fn part(base: u64, size: u64, lo: u64, hi: u64) -> Part {
    let end = base + size;
    if end <= lo || base >= hi {
        Part::Outside
    } else if base >= lo && end <= hi {
        Part::Inside
    } else {
        Part::Partial
    }
}

impl<T: Translation> PageTable<T> {
    /// Phase 1 of a staged `op` over `[va, va + size)` (module documentation): breaks what needs
    /// break-before-make, writes permission-only changes in place, and records every change in
    /// `record`. After the caller has flushed the TLB for `record`, [`finish`](Self::finish)
    /// over the same range completes the operation.
    ///
    /// Errors (`InvalidRange`, `Misaligned`, `OutOfMemory` for split tables) leave the table
    /// unchanged.
    pub(crate) fn stage<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        va: VirtAddr,
        size: u64,
        mut op: StagedOp<F>,
        split_contiguous: bool,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_range(va, size)?;
        let needed = self.count_splits(start, end, &mut op);
        let pool = self.reserve(needed)?;
        // Staging may cut off or replace table descriptors (the walk cache must not keep them).
        self.forget_walk();
        let mut st = Stager { op, record, pool, counts, split_contiguous };
        self.stage_level(self.root, ROOT_LEVEL, 0, start, end, &mut st);
        debug_assert!(st.pool.is_empty(), "split reservation and staging disagree");
        self.free_reservation(st.pool);
        Ok(())
    }

    /// The number of block splits `op` over `[start, end)` needs: only the blocks holding the two
    /// ends of the range can be cut, plus, inside a cut 1 GiB block, the 2 MiB blocks holding the
    /// ends.
    fn count_splits<F: FnMut(Attributes) -> Attributes>(
        &self,
        start: u64,
        end: u64,
        op: &mut StagedOp<F>,
    ) -> usize {
        let mut cut = [(0u32, 0u64); 4];
        let mut n = 0;
        let mut push = |c: (u32, u64), cut: &mut [(u32, u64); 4]| {
            if !cut[..n].contains(&c) {
                cut[n] = c;
                n += 1;
            }
        };
        for (probe, bound) in [(start, start), (end - 1, end)] {
            let Some((level, base, d)) = self.leaf_at(probe) else { continue };
            if level == 3 || bound.is_multiple_of(level_size(level)) || !op.touches(d.attributes()) {
                continue;
            }
            push((level, base), &mut cut);
            if level == 1 && !bound.is_multiple_of(BLOCK_2M) {
                push((2, probe & !(BLOCK_2M - 1)), &mut cut);
            }
        }
        n
    }

    /// The valid leaf translating offset `off`: `(level, first offset, descriptor)`.
    fn leaf_at(&self, off: u64) -> Option<(u32, u64, Descriptor)> {
        let mut table = self.root;
        for level in ROOT_LEVEL..=3 {
            let d = self.read(table, index_of(off, level));
            match d.kind(level) {
                DescriptorKind::Table => table = d.output_address(),
                DescriptorKind::Block | DescriptorKind::Page => {
                    return Some((level, off & !(level_size(level) - 1), d));
                }
                DescriptorKind::Invalid | DescriptorKind::Reserved => return None,
            }
        }
        None
    }

    /// The table at `level` (1..=3) on the path to offset `off`, if every entry above is a table.
    fn table_at(&self, off: u64, level: u32) -> Option<PhysAddr> {
        let mut table = self.root;
        for l in ROOT_LEVEL..level {
            let d = self.read(table, index_of(off, l));
            if !d.is_table(l) {
                return None;
            }
            table = d.output_address();
        }
        Some(table)
    }

    #[allow(clippy::too_many_arguments)]
    fn stage_level<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        level: u32,
        table_base: u64,
        lo: u64,
        hi: u64,
        st: &mut Stager<'_, F>,
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
                DescriptorKind::Invalid => {}
                DescriptorKind::Reserved => {
                    // Never in a TLB (the walker faults on it): an unmap clears it at once when
                    // it lies wholly in the range, as `modify_level` does, so that `is_vacant`
                    // may take the entries inside the range as emptied.
                    if matches!(st.op, StagedOp::Unmap) && off == entry_base && sub_hi == entry_end {
                        self.write(table, index, Descriptor::INVALID);
                    }
                }
                DescriptorKind::Table => {
                    let next = d.output_address();
                    self.stage_level(next, level + 1, entry_base, off, sub_hi, st);
                    if matches!(st.op, StagedOp::Unmap)
                        && self.is_vacant(next, index_of(off, level + 1), index_of(sub_hi - 1, level + 1) + 1)
                    {
                        self.write(table, index, staged(d, MARK_DETACH));
                        st.record.note_table_removed();
                    }
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    let old = d.attributes();
                    if !st.op.touches(old) {
                        off = sub_hi;
                        continue;
                    }
                    if d.is_contiguous() {
                        let run_size = size * RUN as u64;
                        let run_base = entry_base & !(run_size - 1);
                        // `[lo, hi)` is the operation's range clipped to this table, which holds
                        // the whole run: the run is cut iff it is not inside `[lo, hi)`.
                        if run_base < lo || run_base + run_size > hi {
                            self.stage_run(table, level, index & !(RUN - 1), run_base, lo, hi, st);
                            off = hi.min(run_base + run_size);
                            continue;
                        }
                    }
                    let new = st.op.new_attrs(old);
                    if off == entry_base && sub_hi == entry_end {
                        match (&st.op, new) {
                            (StagedOp::Unmap, _) | (_, None) => {
                                self.write(table, index, staged(d, MARK_UNMAP));
                                st.record.add_leaf(entry_base, size, old, None);
                            }
                            (StagedOp::Protect(_), Some(new)) => {
                                let written = d.with_attributes(new);
                                if old.may_change_in_place_to(new) {
                                    self.write(table, index, written);
                                } else {
                                    self.write(table, index, staged(written, MARK_MAKE));
                                }
                                st.record.add_leaf(entry_base, size, old, Some(new));
                            }
                            (StagedOp::Demote, Some(_)) => {}
                        }
                    } else {
                        let new_table = self.build_split(d, level, entry_base, lo, hi, st);
                        self.write(table, index, staged(Descriptor::table(new_table), MARK_MAKE));
                        st.record.add_leaf(entry_base, size, old, new);
                        st.counts.splits += 1;
                    }
                }
            }
            off = sub_hi;
        }
    }

    /// Breaks the contiguous run of 16 entries at `first` (at `level`, translating from
    /// `run_base`) that `[lo, hi)` cuts: every entry is staged without the hint, entries inside
    /// the range with the operation applied, a block partly inside is split.
    #[allow(clippy::too_many_arguments)]
    fn stage_run<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        level: u32,
        first: usize,
        run_base: u64,
        lo: u64,
        hi: u64,
        st: &mut Stager<'_, F>,
    ) {
        let size = level_size(level);
        st.counts.unfolds += 1;
        for j in 0..RUN {
            let index = first + j;
            let d = self.read(table, index);
            debug_assert!(d.is_leaf(level) && d.is_contiguous(), "incomplete contiguous run");
            let base = run_base + j as u64 * size;
            let old = d.attributes();
            let plain = d.with_contiguous(false);
            match part(base, size, lo, hi) {
                Part::Outside => {
                    self.write(table, index, staged(plain, MARK_MAKE));
                    st.record.add_leaf(base, size, old, Some(old));
                }
                Part::Inside => {
                    let new = st.op.new_attrs(old);
                    let written = match new {
                        None => staged(plain, MARK_UNMAP),
                        Some(new) => staged(plain.with_attributes(new), MARK_MAKE),
                    };
                    self.write(table, index, written);
                    st.record.add_leaf(base, size, old, new);
                }
                Part::Partial => {
                    let new = st.op.new_attrs(old);
                    let new_table = self.build_split(plain, level, base, lo, hi, st);
                    self.write(table, index, staged(Descriptor::table(new_table), MARK_MAKE));
                    st.record.add_leaf(base, size, old, new);
                    st.counts.splits += 1;
                }
            }
        }
    }

    /// Builds, in a reserved frame that no walker can reach yet, the table that replaces the
    /// block `d` (at `level`, translating from `base`) when `[lo, hi)` cuts it: the leaves of the
    /// next level with the operation applied to those inside the range (unmapped ones as
    /// `MARK_UNMAP`, reported by `finish`), nested splits for the ones partly inside, and the
    /// contiguous hint on runs that are uniform (if `split_contiguous`, except for `Demote`).
    fn build_split<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        d: Descriptor,
        level: u32,
        base: u64,
        lo: u64,
        hi: u64,
        st: &mut Stager<'_, F>,
    ) -> PhysAddr {
        let table = self.take_reserved(&mut st.pool);
        let sub = level + 1;
        let sub_size = level_size(sub);
        let old = d.attributes();
        let pa0 = d.output_address().0;
        let new = st.op.new_attrs(old);
        let demote = matches!(st.op, StagedOp::Demote);
        for run in 0..ENTRIES_PER_TABLE / RUN {
            let first = run * RUN;
            let part_of = |j: usize| part(base + (first + j) as u64 * sub_size, sub_size, lo, hi);
            let all = |p: Part| (0..RUN).all(|j| part_of(j) == p);
            let uniform = all(Part::Outside) || (all(Part::Inside) && new.is_some());
            let cont = st.split_contiguous && !demote && uniform;
            for j in 0..RUN {
                let i = first + j;
                let pa = PhysAddr(pa0 + i as u64 * sub_size);
                let entry = match part_of(j) {
                    Part::Outside => Descriptor::leaf(sub, pa, old, cont),
                    Part::Inside => match new {
                        None => staged(Descriptor::leaf(sub, pa, old, false), MARK_UNMAP),
                        Some(new) => Descriptor::leaf(sub, pa, new, cont),
                    },
                    Part::Partial => {
                        let nested = Descriptor::leaf(sub, pa, old, false);
                        st.counts.splits += 1;
                        Descriptor::table(self.build_split(
                            nested,
                            sub,
                            base + i as u64 * sub_size,
                            lo,
                            hi,
                            st,
                        ))
                    }
                };
                self.write(table, i, entry);
            }
        }
        table
    }

    /// Whether `table` holds nothing after staging, given that the entries strictly inside
    /// `[lo, hi)` (indices) were emptied: the end entries and their neighbours are read first,
    /// so a populated table is recognised after a read or two.
    fn is_vacant(&self, table: PhysAddr, lo: usize, hi: usize) -> bool {
        self.none_outside(table, lo + 1, (hi - 1).max(lo + 1), occupied)
    }

    /// Stages the promotion of the 2 MiB-aligned range at `va` to one level-2 block, if its
    /// level-3 table holds 512 valid pages mapping one 2 MiB-aligned physical range with the
    /// same attributes. The table's frame goes into `record` (freed on release, after the flush);
    /// the block is written by [`finish`](Self::finish). Returns whether it was staged.
    ///
    /// # Errors
    ///
    /// `Misaligned` if `va` is not 2 MiB aligned, `InvalidRange` if it is outside the table's half.
    pub(crate) fn stage_promote(
        &mut self,
        va: VirtAddr,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> Result<bool, MapError> {
        if !va.is_aligned(BLOCK_2M) {
            return Err(MapError::Misaligned);
        }
        let (off, _) = self.check_range(va, BLOCK_2M)?;
        let Some(l2) = self.table_at(off, 2) else { return Ok(false) };
        let index = index_of(off, 2);
        let d = self.read(l2, index);
        if !d.is_table(2) {
            return Ok(false);
        }
        let l3 = d.output_address();
        self.forget_walk(); // Before anything can detach `l3`.
        let first = self.read(l3, 0);
        if !first.is_leaf(3) || !first.output_address().is_aligned(BLOCK_2M) {
            return Ok(false);
        }
        let (pa0, attrs) = (first.output_address().0, first.attributes());
        // Both ends first: a range still being filled usually fails there.
        let ok = |i: usize| {
            let e = self.read(l3, i);
            e.is_leaf(3) && e.output_address().0 == pa0 + i as u64 * PAGE_SIZE && e.attributes() == attrs
        };
        if !ok(ENTRIES_PER_TABLE - 1) || !(1..ENTRIES_PER_TABLE - 1).all(ok) {
            return Ok(false);
        }
        self.write(l2, index, staged(Descriptor::leaf(2, PhysAddr(pa0), attrs, false), MARK_MAKE));
        record.add_run(off, ENTRIES_PER_TABLE as u64, PAGE_SIZE, attrs, Some(attrs));
        record.detach_table(l3, &self.translation);
        self.stats.tables_detached += 1;
        counts.promotions += 1;
        Ok(true)
    }

    /// Stages setting the contiguous hint on the 16 pages of the 64 KiB-aligned run at offset
    /// `va`, if they are valid, not yet contiguous, map one 64 KiB-aligned physical range and
    /// have the same attributes. Returns whether it was staged.
    pub(crate) fn stage_fold(
        &mut self,
        va: VirtAddr,
        record: &mut PendingFlush,
        counts: &mut BbmCounts,
    ) -> bool {
        let run_size = PAGE_SIZE * RUN as u64;
        if !va.is_aligned(run_size) || !self.range.contains(va) {
            return false;
        }
        let off = va.0 & (SPACE_SIZE - 1);
        let Some(l3) = self.table_at(off, 3) else { return false };
        let first = index_of(off, 3);
        let d0 = self.read(l3, first);
        if !d0.output_address().is_aligned(run_size) {
            return false;
        }
        let (pa0, attrs) = (d0.output_address().0, d0.attributes());
        let ok = (0..RUN).all(|j| {
            let e = self.read(l3, first + j);
            e.is_leaf(3)
                && !e.is_contiguous()
                && e.output_address().0 == pa0 + j as u64 * PAGE_SIZE
                && e.attributes() == attrs
        });
        if !ok {
            return false;
        }
        for j in 0..RUN {
            let e = self.read(l3, first + j);
            self.write(l3, first + j, staged(e.with_contiguous(true), MARK_MAKE));
        }
        record.add_run(off, RUN as u64, PAGE_SIZE, attrs, Some(attrs));
        counts.folds += 1;
        true
    }

    /// The range an explicit demotion of the leaf at `va` stages with [`StagedOp::Demote`]: the
    /// next-level piece holding `va` of a block (so the block is split one level), or the page
    /// of a contiguous run (so the run loses its hint). `None` if there is nothing to demote.
    pub(crate) fn demotion_range(&self, va: VirtAddr) -> Option<(VirtAddr, u64)> {
        let leaf = self.query(va)?;
        if leaf.level < 3 {
            let sub = level_size(leaf.level + 1);
            Some((VirtAddr(va.0 & !(sub - 1)), sub))
        } else if leaf.contiguous {
            Some((leaf.va, PAGE_SIZE))
        } else {
            None
        }
    }

    /// Phase 3 (module documentation) over `[va, va + size)`, the range given to
    /// [`stage`](Self::stage) (or the range of a promotion or fold): commits staged entries,
    /// reports every unmapped leaf to `unmapped` and clears it, drains and frees detached tables.
    /// Call it only after the TLB invalidation for the staged record has completed. Returns
    /// whether any entry became valid (the caller then needs `DSB ISHST`).
    pub(crate) fn finish<S: FnMut(&Leaf)>(&mut self, va: VirtAddr, size: u64, unmapped: &mut S) -> bool {
        let Ok((start, end)) = self.check_range(va, size) else { return false };
        // Finishing frees detached tables and writes staged table descriptors.
        self.forget_walk();
        let mut made = false;
        self.finish_level(self.root, ROOT_LEVEL, 0, start, end, unmapped, &mut made);
        made
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_level<S: FnMut(&Leaf)>(
        &mut self,
        table: PhysAddr,
        level: u32,
        table_base: u64,
        lo: u64,
        hi: u64,
        unmapped: &mut S,
        made: &mut bool,
    ) {
        let size = level_size(level);
        let (mut first, mut last) = (index_of(lo, level), index_of(hi - 1, level));
        if level >= 2 {
            // A cut run is staged whole, also where it reaches past the range.
            first &= !(RUN - 1);
            last |= RUN - 1;
        }
        for index in first..=last {
            let base = table_base + index as u64 * size;
            let (sub_lo, sub_hi) = (lo.max(base), hi.min(base + size));
            let d = self.read(table, index);
            let bits = d.bits();
            if d.is_valid() {
                if d.is_table(level) && sub_lo < sub_hi {
                    self.finish_level(d.output_address(), level + 1, base, sub_lo, sub_hi, unmapped, made);
                }
            } else if bits & MARK_MAKE != 0 {
                let made_d = Descriptor::from_bits((bits & !MARK_MAKE) | VALID);
                self.write(table, index, made_d);
                *made = true;
                if made_d.is_table(level) && sub_lo < sub_hi {
                    // A new split table: it may hold unmapped leaves to report.
                    self.finish_level(
                        made_d.output_address(),
                        level + 1,
                        base,
                        sub_lo,
                        sub_hi,
                        unmapped,
                        made,
                    );
                }
            } else if bits & MARK_UNMAP != 0 {
                self.report(d, level, base, unmapped);
                self.write(table, index, Descriptor::INVALID);
            } else if bits & MARK_DETACH != 0 {
                self.drain(d.output_address(), level + 1, base, unmapped);
                self.write(table, index, Descriptor::INVALID);
            }
        }
    }

    fn report<S: FnMut(&Leaf)>(&self, d: Descriptor, level: u32, base: u64, unmapped: &mut S) {
        let size = level_size(level);
        unmapped(&Leaf {
            va: self.va(base),
            pa: d.output_address(),
            level,
            size,
            attrs: d.attributes(),
            contiguous: false,
        });
    }

    /// Reports the unmapped leaves of a detached table (and of the detached tables below it) and
    /// frees the frames.
    fn drain<S: FnMut(&Leaf)>(&mut self, table: PhysAddr, level: u32, table_base: u64, unmapped: &mut S) {
        let size = level_size(level);
        for index in 0..ENTRIES_PER_TABLE {
            let d = self.read(table, index);
            let base = table_base + index as u64 * size;
            if d.bits() & MARK_UNMAP != 0 {
                self.report(d, level, base, unmapped);
            } else if d.bits() & MARK_DETACH != 0 {
                self.drain(d.output_address(), level + 1, base, unmapped);
            } else {
                debug_assert!(!occupied(d), "detached table still in use");
            }
        }
        self.stats.tables_detached += 1;
        self.translation.deallocate_table(table);
    }

    /// An upper bound of the table frames [`map`](Self::map) of `[start, end)` to `pa` with
    /// `constraints` needs once the range is empty: one table per entry of the level above that
    /// the mapping does not fill with one leaf.
    pub(crate) fn map_tables_bound(
        &self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        constraints: Constraints,
    ) -> usize {
        let Ok((start, end)) = self.check_range(va, size) else { return 0 };
        let mut total = 0;
        for parent in ROOT_LEVEL..3 {
            let span = level_size(parent);
            let overlapping = ((end - 1) / span - start / span + 1) as usize;
            let first_whole = start.div_ceil(span);
            let whole = (end / span).saturating_sub(first_whole) as usize;
            let leaf_ok = parent >= 1
                && constraints.allows_leaf(parent)
                && (pa.0.wrapping_sub(start)).is_multiple_of(span);
            total += if leaf_ok { overlapping - whole } else { overlapping };
        }
        total
    }

    /// [`map`](Self::map) taking its table frames from `pool` (reserved before the range was
    /// emptied): the commit phase of a remap, which must not fail. Frames left over stay in
    /// `pool`.
    ///
    /// # Errors
    ///
    /// As [`map`](Self::map); `OutOfMemory` only if `pool` is too small *and* the allocator
    /// fails.
    pub(crate) fn map_from_pool(
        &mut self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        attrs: Attributes,
        constraints: Constraints,
        pool: &mut FrameList,
    ) -> Result<(), MapError> {
        let (start, end) = self.check_map(va, pa, size)?;
        let args = MapArgs { start, end, pa: pa.0, attrs, constraints };
        let mut scratch = FrameList::new();
        let needed =
            self.map_level::<false>(View::Real(self.root), ROOT_LEVEL, 0, start, end, &args, &mut scratch)?;
        debug_assert!(needed <= pool.len(), "map_tables_bound is not an upper bound");
        if needed > pool.len() {
            let more = self.reserve(needed - pool.len())?;
            pool.append(more, &self.translation);
        }
        let result = self.map_level::<true>(View::Real(self.root), ROOT_LEVEL, 0, start, end, &args, pool);
        debug_assert!(result.is_ok());
        result.map(|_| ())
    }

    /// Checks the arguments of a `map` of `[va, va + size)` to `pa` without mapping anything.
    ///
    /// # Errors
    ///
    /// `InvalidRange` or `Misaligned`, as [`map`](Self::map).
    pub(crate) fn check_map_args(&self, va: VirtAddr, pa: PhysAddr, size: u64) -> Result<(), MapError> {
        self.check_map(va, pa, size).map(|_| ())
    }

    /// Frees frames of a reservation (for the address space, which reserved them with
    /// [`reserve_frames`](Self::reserve_frames)).
    pub(crate) fn free_frames(&mut self, pool: FrameList) {
        self.free_reservation(pool);
    }

    /// Allocates `count` frames, or none at all.
    pub(crate) fn reserve_frames(&mut self, count: usize) -> Result<FrameList, MapError> {
        self.reserve(count)
    }
}
