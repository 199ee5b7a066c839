//! The modification engine: the one walk that unmaps, protects or demotes the leaves of a range,
//! for `PageTable::unmap`/`protect` and for the staged break-before-make operations of `bbm.rs`.
//!
//! Why it is built this way: the two callers make the same decisions — which leaves the range
//! covers, which block it cuts (split it), which contiguous run it cuts (unfold it), which reserved
//! encodings it clears, which tables it empties (detach them) — and differ only in how a change
//! is written and recorded, so the decisions are made once, here, and a [`Mode`] says how to
//! write them:
//! - [`Mode::Direct`] (`unmap`, `protect`, `destroy`, `Drop`): every change is final when the
//!   walk returns; the record lists the leaves of the range that changed (at their size after
//!   any split) and holds the detached table frames. On a table that is not live this is the
//!   staged path with nothing to flush: a split, an unfold or a memory-type change is written in
//!   place, because no walker or TLB holds the table. On a live table, [`bbm_violation`] first
//!   refuses (changing nothing) any change that would need break-before-make, so the walk only
//!   makes changes the architecture allows in place.
//! - [`Mode::Staged`] (`bbm.rs`): what needs break-before-make is written staged-invalid, removed
//!   leaves and emptied tables are marked for `finish`, and the record also lists the structural
//!   changes (the block that was split, every entry of an unfolded run), because their old
//!   translations may be in a TLB.
//!
//! Nothing here can fail: the frames for block splits are counted ([`count_splits`]: only blocks
//! at the two ends of a range can be cut) and reserved before the first write. Level 3 has a
//! loop without per-entry structure (no split or unfold can happen there once the two ends are
//! known not to cut a run), shared by the one-region fast path of `unmap`/`protect` and the
//! general walk.
//!
//! [`bbm_violation`]: PageTable::bbm_violation
//! [`count_splits`]: PageTable::count_splits

use crate::addr::{PAGE_SIZE, PhysAddr};
use crate::descriptor::{Attributes, Descriptor, DescriptorKind, level_size};

use super::bbm::{BbmCounts, MARK_DETACH, MARK_MAKE, MARK_UNMAP, is_mark, occupied, staged};
use super::flush::{FrameList, LeafBits, PendingFlush};
use super::guard::is_guard;
use super::occupancy::{minus_occupants, occupancy, table_descriptor, with_occupancy};
use super::walk::{Entries, Entry};
use super::{ENTRIES_PER_TABLE, PAGE_RUN, PageTable, Translation, index_of, run_entries};

/// The span of a contiguous run of pages (64 KiB with 4 KiB pages, 2 MiB with 16 or 64 KiB).
const RUN_SIZE: u64 = PAGE_SIZE * PAGE_RUN as u64;

/// What an operation does to the leaves in its range.
pub(crate) enum StagedOp<F> {
    /// Remove them, and the guard markers in the range (`guard.rs`).
    Unmap,
    /// Remove them, keeping the guard markers in the range (`MADV_DONTNEED`).
    Discard,
    /// Change no leaf: clear the guard markers in the range (`MADV_GUARD_REMOVE`).
    Unguard,
    /// Give them the attributes `f(old)` (`f` pure).
    Protect(F),
    /// Change nothing, but split a block partly in the range and clear the contiguous hint of a
    /// run partly in it (staged only).
    Demote,
}

impl<F: FnMut(Attributes) -> Attributes> StagedOp<F> {
    /// The attributes of a leaf after the operation, or `None` if it is removed. For `Protect`
    /// without effect, `Some(old)`.
    pub(super) fn new_attrs(&mut self, old: Attributes) -> Option<Attributes> {
        match self {
            Self::Unmap | Self::Discard => None,
            Self::Protect(f) => Some(f(old)),
            Self::Demote | Self::Unguard => Some(old),
        }
    }

    /// Whether the operation does anything to a leaf with attributes `old`.
    pub(super) fn touches(&mut self, old: Attributes) -> bool {
        match self {
            Self::Unmap | Self::Discard | Self::Demote => true,
            Self::Protect(f) => f(old) != old,
            Self::Unguard => false,
        }
    }

    /// Whether the operation removes leaves.
    pub(super) const fn is_unmap(&self) -> bool {
        matches!(self, Self::Unmap | Self::Discard)
    }

    /// Whether the operation clears guard markers.
    pub(super) const fn clears_guards(&self) -> bool {
        matches!(self, Self::Unmap | Self::Unguard)
    }
}

/// How the engine writes what it changes (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Direct,
    Staged,
}

/// The state of one walk of the engine.
pub(super) struct Engine<'a, F> {
    pub op: StagedOp<F>,
    pub mode: Mode,
    pub record: &'a mut PendingFlush,
    /// Frames reserved for block splits.
    pub pool: FrameList,
    pub counts: &'a mut BbmCounts,
    /// Whether a split sets the contiguous hint on runs of the new table that allow it.
    pub split_contiguous: bool,
}

/// Where one entry of a new (split) table or of a cut run stands relative to the range.
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

/// The pages changed by one pass over a last-level table, for [`PendingFlush::add_pages`]: their
/// bits are gathered as `add_leaf` per page would gather them, without per-page branches.
struct PageRun {
    lo: u64,
    hi: u64,
    count: u64,
    bits: LeafBits,
}

impl PageRun {
    const fn new() -> Self {
        Self { lo: 0, hi: 0, count: 0, bits: LeafBits::NONE }
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
        self.bits.add(old.bits(), new.map(Attributes::bits));
    }

    /// Adds the run to `record`.
    #[inline(always)]
    fn record(&self, record: &mut PendingFlush) {
        if self.count == 0 {
            return;
        }
        record.add_pages(self.lo, self.hi, self.count, self.bits);
    }
}

impl<T: Translation> PageTable<T> {
    // ---- the walk -----------------------------------------------------------------------------

    /// Applies the engine's operation to `[lo, hi)`, inside the span of `table` at `level`.
    /// Returns how many entries of `table` it vacated (`occupancy.rs`: the caller keeps the
    /// count of `table`); tables it empties below `table` are detached here.
    pub(super) fn apply<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        level: u32,
        lo: u64,
        hi: u64,
        e: &mut Engine<'_, F>,
    ) -> usize {
        if level == 3 && !self.cuts_a_touched_run(table, lo, hi, &mut e.op) {
            return self.apply_pages(table, lo, hi, e);
        }
        let mut vacated = 0;
        let mut entries = Entries::new(level, lo, hi);
        while let Some(x) = entries.next() {
            let d = self.read(table, x.index);
            if d.bits() == Descriptor::INVALID.bits() {
                // Nothing to do for an empty entry, nor for the empty ones after it.
                entries.skip_to(self.next_occupied(table, level, x.end(), hi));
                continue;
            }
            match d.kind(level) {
                DescriptorKind::Invalid => {
                    // (A marker is only ever at level 3, and holds nothing a TLB could cache.)
                    if e.op.clears_guards() && is_guard(d) {
                        self.write(table, x.index, Descriptor::INVALID);
                        e.record.cover(x.base, x.end());
                        vacated += 1;
                    }
                }
                DescriptorKind::Reserved => {
                    // Translates nothing and is never in a TLB (the walker faults on it): an
                    // unmap clears it when it lies wholly in the range, without a record, so
                    // that the emptiness checks may take the entries inside the range as cleared.
                    if e.op.is_unmap() && x.whole() {
                        self.write(table, x.index, Descriptor::INVALID);
                        vacated += 1;
                    }
                }
                DescriptorKind::Table => {
                    let next = d.output_address();
                    let emptied = self.apply(next, level + 1, x.lo, x.hi, e);
                    if emptied == 0 {
                        continue;
                    }
                    // Only an unmap or an unguard vacates entries, and it detaches what it empties.
                    if occupancy(d) > emptied {
                        self.write(table, x.index, minus_occupants(d, emptied));
                        continue;
                    }
                    vacated += 1;
                    match e.mode {
                        Mode::Direct => self.detach_now(table, x.index, next, e.record),
                        Mode::Staged => {
                            self.write_mark(table, x.index, staged(with_occupancy(d, 0), MARK_DETACH));
                            e.record.note_table_removed();
                        }
                    }
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    let old = d.attributes();
                    if !e.op.touches(old) {
                        continue;
                    }
                    if d.is_contiguous() {
                        let run_size = x.size * run_entries(level) as u64;
                        let run_base = x.base & !(run_size - 1);
                        // `[lo, hi)` is the range clipped to this table, which holds the whole
                        // run: the run is cut iff it is not inside `[lo, hi)`.
                        if run_base < lo || run_base + run_size > hi {
                            vacated += self.apply_run(table, &x, (lo, hi), e);
                            entries.skip_to(run_base + run_size);
                            continue;
                        }
                    }
                    let new = e.op.new_attrs(old);
                    if x.whole() {
                        vacated += self.change_leaf(table, &x, d, new, e);
                    } else {
                        self.split(table, &x, d, new, (lo, hi), e);
                    }
                }
            }
        }
        vacated
    }

    /// Writes `new` at `index` of `table`: final in direct mode and where the change needs no
    /// break-before-make (`bbm == false`), staged-invalid otherwise.
    #[inline(always)]
    fn put(&mut self, table: PhysAddr, index: usize, new: Descriptor, bbm: bool, mode: Mode) {
        if bbm && mode == Mode::Staged {
            self.write_mark(table, index, staged(new, MARK_MAKE));
        } else {
            self.write(table, index, new);
        }
    }

    /// Removes the leaf `d` at `index` of `table`: invalid in direct mode, marked for `finish`
    /// to report (with its output address) when staged.
    #[inline(always)]
    fn remove_leaf(&mut self, table: PhysAddr, index: usize, d: Descriptor, mode: Mode) {
        match mode {
            Mode::Direct => self.write(table, index, Descriptor::INVALID),
            Mode::Staged => self.write_mark(table, index, staged(d, MARK_UNMAP)),
        }
    }

    /// Applies the operation to the leaf `d` of entry `x`, which lies wholly in the range and in
    /// no run the range cuts; `new` is its new attributes. Returns the entries vacated (0 or 1).
    fn change_leaf<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        x: &Entry,
        d: Descriptor,
        new: Option<Attributes>,
        e: &mut Engine<'_, F>,
    ) -> usize {
        let old = d.attributes();
        let vacated = match (&e.op, new) {
            (StagedOp::Demote, _) => return 0, // A whole leaf: nothing to demote.
            (_, None) => {
                self.remove_leaf(table, x.index, d, e.mode);
                1
            }
            (_, Some(new)) => {
                self.put(table, x.index, d.with_attributes(new), !old.may_change_in_place_to(new), e.mode);
                0
            }
        };
        e.record.add_leaf(x.base, x.size, old, new);
        vacated
    }

    /// Replaces the block `d` of entry `x`, which `range` cuts, by a table of next-level leaves
    /// with the operation applied ([`build_split`](Self::build_split)).
    fn split<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        x: &Entry,
        d: Descriptor,
        new: Option<Attributes>,
        range: (u64, u64),
        e: &mut Engine<'_, F>,
    ) {
        // A block partly outside the range leaves at least one entry occupied: the parent's
        // count does not change (one leaf becomes one table).
        let new_table = self.build_split(d, x.level, x.base, range, e);
        match e.mode {
            Mode::Direct => {
                self.translation.publish_barrier();
                self.write(table, x.index, new_table);
            }
            Mode::Staged => {
                self.write_mark(table, x.index, staged(new_table, MARK_MAKE));
                e.record.add_leaf(x.base, x.size, d.attributes(), new);
            }
        }
        e.counts.splits += 1;
    }

    /// Unfolds the contiguous run (16 entries with 4 KiB pages) holding entry `x` that `(lo, hi)` cuts: every
    /// entry loses the hint, entries inside the range get the operation, a block partly inside
    /// is split. Staged, every entry is written staged-invalid (the hint changes) and recorded.
    /// Returns the entries vacated.
    fn apply_run<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        x: &Entry,
        (lo, hi): (u64, u64),
        e: &mut Engine<'_, F>,
    ) -> usize {
        let mut vacated = 0;
        let (level, size) = (x.level, x.size);
        let run = run_entries(level);
        let first = x.index & !(run - 1);
        let run_base = x.base & !(size * run as u64 - 1);
        e.counts.unfolds += 1;
        if e.mode == Mode::Staged {
            // Its marks reach past the range: `finish` widens its walk to whole runs.
            self.runs_cut = true;
        }
        for j in 0..run {
            let index = first + j;
            let d = self.read(table, index);
            debug_assert!(d.is_leaf(level) && d.is_contiguous(), "incomplete contiguous run");
            let base = run_base + j as u64 * size;
            let old = d.attributes();
            let plain = d.with_contiguous(false);
            match part(base, size, lo, hi) {
                Part::Outside => {
                    self.put(table, index, plain, true, e.mode);
                    if e.mode == Mode::Staged {
                        e.record.add_leaf(base, size, old, Some(old));
                    }
                }
                Part::Inside => {
                    let new = e.op.new_attrs(old);
                    match new {
                        None => {
                            self.remove_leaf(table, index, plain, e.mode);
                            vacated += 1;
                        }
                        Some(new) => self.put(table, index, plain.with_attributes(new), true, e.mode),
                    }
                    e.record.add_leaf(base, size, old, new);
                }
                Part::Partial => {
                    let new = e.op.new_attrs(old);
                    let piece = Entry { index, level, base, size, lo: lo.max(base), hi: hi.min(base + size) };
                    self.split(table, &piece, plain, new, (lo, hi), e);
                }
            }
        }
        vacated
    }

    /// Builds, in a reserved frame that no walker can reach yet, the table that replaces the
    /// block `d` (at `level`, translating from `base`) when `(lo, hi)` cuts it: the leaves of the
    /// next level with the operation applied to those inside the range (removed ones invalid,
    /// or marked for `finish` when staged), nested splits for the ones partly inside, and the
    /// contiguous hint on runs that are uniform (if `split_contiguous`, except for `Demote`).
    /// In direct mode the leaves inside the range are recorded here, at their new size. Returns
    /// the table descriptor for it, with its occupancy count.
    fn build_split<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        d: Descriptor,
        level: u32,
        base: u64,
        (lo, hi): (u64, u64),
        e: &mut Engine<'_, F>,
    ) -> Descriptor {
        let table = self.take_reserved(&mut e.pool);
        let mut occupants = 0;
        let sub = level + 1;
        let sub_size = level_size(sub);
        let old = d.attributes();
        let pa0 = d.output_address().0;
        let new = e.op.new_attrs(old);
        let demote = matches!(e.op, StagedOp::Demote);
        let run_len = run_entries(sub);
        for run in 0..ENTRIES_PER_TABLE / run_len {
            let first = run * run_len;
            let part_of = |j: usize| part(base + (first + j) as u64 * sub_size, sub_size, lo, hi);
            let all = |p: Part| (0..run_len).all(|j| part_of(j) == p);
            let uniform = all(Part::Outside) || (all(Part::Inside) && new.is_some());
            let cont = e.split_contiguous && !demote && uniform;
            for j in 0..run_len {
                let i = first + j;
                let pa = PhysAddr(pa0 + i as u64 * sub_size);
                let sub_base = base + i as u64 * sub_size;
                let entry = match part_of(j) {
                    Part::Outside => Descriptor::leaf(sub, pa, old, cont),
                    Part::Inside => {
                        if e.mode == Mode::Direct {
                            e.record.add_leaf(sub_base, sub_size, old, new);
                        }
                        match (new, e.mode) {
                            (Some(new), _) => Descriptor::leaf(sub, pa, new, cont),
                            (None, Mode::Direct) => Descriptor::INVALID,
                            (None, Mode::Staged) => staged(Descriptor::leaf(sub, pa, old, false), MARK_UNMAP),
                        }
                    }
                    Part::Partial => {
                        let nested = Descriptor::leaf(sub, pa, old, false);
                        e.counts.splits += 1;
                        self.build_split(nested, sub, sub_base, (lo, hi), e)
                    }
                };
                occupants += usize::from(occupied(entry));
                if is_mark(entry) {
                    self.write_mark(table, i, entry);
                } else {
                    self.write(table, i, entry);
                }
            }
        }
        table_descriptor(table, occupants)
    }

    /// Whether the contiguous run holding the first or the last page of `[lo, hi)` (inside the
    /// last-level `table`) reaches out of the range and `op` touches it. The hint is only ever on
    /// whole runs of 16 valid, uniform pages, so one entry speaks for its run, and only the runs
    /// at the two ends can be cut. Reads only.
    #[inline(always)]
    fn cuts_a_touched_run<F: FnMut(Attributes) -> Attributes>(
        &self,
        table: PhysAddr,
        lo: u64,
        hi: u64,
        op: &mut StagedOp<F>,
    ) -> bool {
        let mut cut = |off: u64| {
            let d = self.read(table, index_of(off, 3));
            let run_base = off & !(RUN_SIZE - 1);
            d.is_leaf(3)
                && d.is_contiguous()
                && (run_base < lo || run_base + RUN_SIZE > hi)
                && op.touches(d.attributes())
        };
        cut(lo) || cut(hi - PAGE_SIZE)
    }

    /// Applies the operation to the pages in `[lo, hi)` of the last-level `table`, where it cuts
    /// no run ([`cuts_a_touched_run`](Self::cuts_a_touched_run)), and records them. Reserved
    /// encodings are cleared by an unmap and guard markers by an operation that clears them
    /// (without a record: no TLB holds either), and kept otherwise. Returns the entries vacated.
    #[inline(always)]
    fn apply_pages<F: FnMut(Attributes) -> Attributes>(
        &mut self,
        table: PhysAddr,
        lo: u64,
        hi: u64,
        e: &mut Engine<'_, F>,
    ) -> usize {
        let mut changed = PageRun::new();
        let mut reserved_cleared = 0;
        let (mut guards_lo, mut guards_hi) = (u64::MAX, 0);
        // Invalid entries are passed over through the table's address computed once: a sparse
        // table (a few pages of a library in its 2 MiB) is mostly them, and a whole-space unmap
        // (a process's end) reads every one.
        let entries = self.entries(table);
        let first = index_of(lo, 3);
        let end = first + ((hi - lo) / PAGE_SIZE) as usize;
        let mut i = first;
        while i < end {
            let raw = entries.read(i);
            i += 1;
            if raw == Descriptor::INVALID.bits() {
                continue;
            }
            let d = Descriptor::from_bits(raw);
            let (index, entry) = (i - 1, lo + (i - 1 - first) as u64 * PAGE_SIZE);
            if !d.is_leaf(3) {
                if d.is_valid() && e.op.is_unmap() {
                    self.write(table, index, Descriptor::INVALID);
                    reserved_cleared += 1;
                } else if e.op.clears_guards() && is_guard(d) {
                    self.write(table, index, Descriptor::INVALID);
                    reserved_cleared += 1;
                    guards_lo = guards_lo.min(entry);
                    guards_hi = entry + PAGE_SIZE;
                }
                continue;
            }
            let old = d.attributes();
            match &mut e.op {
                StagedOp::Unmap | StagedOp::Discard => {
                    self.remove_leaf(table, index, d, e.mode);
                    changed.add(entry, old, None);
                }
                StagedOp::Protect(f) => {
                    let new = f(old);
                    if new == old {
                        continue;
                    }
                    self.put(table, index, d.with_attributes(new), !old.may_change_in_place_to(new), e.mode);
                    changed.add(entry, old, Some(new));
                }
                StagedOp::Demote | StagedOp::Unguard => {}
            }
        }
        changed.record(e.record);
        if guards_lo < guards_hi {
            e.record.cover(guards_lo, guards_hi);
        }
        // Only an unmap changes pages in a way that vacates them.
        let removed = if e.op.is_unmap() { changed.count as usize } else { 0 };
        removed + reserved_cleared
    }

    // ---- emptied tables ---------------------------------------------------------------------------

    /// Detaches the empty `child` at `index` of `table` into `record`, now (direct mode).
    pub(super) fn detach_now(
        &mut self,
        table: PhysAddr,
        index: usize,
        child: PhysAddr,
        record: &mut PendingFlush,
    ) {
        debug_assert!(self.is_empty_table(child), "a table with occupied entries is detached");
        self.write(table, index, Descriptor::INVALID);
        record.detach_table(child, &self.translation);
        self.stats.tables_detached += 1;
    }
}
