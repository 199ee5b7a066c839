//! `map`: the one operation that creates translations, and the frame bound a remap reserves.
//!
//! Why it is built this way: a map only ever turns invalid entries valid, so it needs no
//! break-before-make and no record, and its only failures are an entry in the way
//! (`AlreadyMapped`) and a table frame that cannot be allocated. The general path is therefore
//! one walker run twice over the same entries ([`Entries`]): a dry run (`COMMIT = false`) that
//! reads, finds the first mapped entry and counts the tables to create, then — after every frame
//! is reserved — the commit, which cannot fail. Inside one 2 MiB region whose last-level table
//! exists (the last-table cache), nothing can fail but `AlreadyMapped`, so the fast path only checks
//! the entries and writes; both paths share the last-level loops.

use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::descriptor::{Attributes, Descriptor, DescriptorKind, level_size};

use super::flush::FrameList;
use super::guard::is_guard;
use super::occupancy::{plus_occupants, table_descriptor};
use super::walk::{Entries, LastLevel};
use super::{
    Constraints, MapError, PAGE_RUN, PageTable, ROOT_LEVEL, SPACE_SIZE, Translation, index_of, run_entries,
};

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

/// Whether a map may not write the last-level entry `d`: it is valid, or a guard marker
/// (`guard.rs`), which only an unmap or `MADV_GUARD_REMOVE` clears.
#[inline(always)]
pub(super) const fn in_the_way(d: Descriptor) -> bool {
    d.is_valid() || is_guard(d)
}

impl<T: Translation> PageTable<T> {
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
        if let Some(last) = self.fast_path_table(start, end)
            && self.map_pages_in(last, &args)
        {
            return Ok(());
        }
        self.map_general(args)
    }

    /// The general path of [`map`](Self::map), out of line and taking `args` by value: the
    /// fast path then keeps them in registers, and only this call stores them to memory.
    #[inline(never)]
    fn map_general(&mut self, args: MapArgs) -> Result<(), MapError> {
        let mut pool = FrameList::new();
        let result = self.map_checked(&args, &mut pool, false);
        self.free_reservation(pool);
        result
    }

    /// The general `map` of checked arguments: dry run, reservation (frames already in `pool`
    /// are used first; `bounded`: `pool` holds the [`map_tables_bound`](Self::map_tables_bound)),
    /// commit. Frames left over stay in `pool`.
    #[inline(never)]
    fn map_checked(&mut self, args: &MapArgs, pool: &mut FrameList, bounded: bool) -> Result<(), MapError> {
        let (start, end) = (args.start, args.end);
        let needed = self.map_level::<false>(Some(self.root), ROOT_LEVEL, start, end, args, pool)?;
        debug_assert!(!bounded || needed <= pool.len(), "map_tables_bound is not an upper bound");
        if needed > pool.len() {
            let more = self.reserve(needed - pool.len())?;
            pool.append(more, &self.translation);
        }
        // The root's entries are not counted (nothing points at the root).
        let result = self.map_level::<true>(Some(self.root), ROOT_LEVEL, start, end, args, pool);
        debug_assert!(result.is_ok());
        result.map(|_| ())
    }

    /// The fast path of `map`: writes the pages of `args` (inside one 2 MiB region) into the
    /// existing last-level `table`. Returns `false`, having written nothing, if an entry of the
    /// range is valid: the general path then reports the error exactly as usual. Otherwise
    /// nothing can fail (no frame is needed), so there is no dry run; the leaves written, the
    /// contiguous hints included, are those the general path would write for the same call.
    #[inline(always)]
    fn map_pages_in(&mut self, last: LastLevel, args: &MapArgs) -> bool {
        let table = last.table;
        let filled = if args.end - args.start == PAGE_SIZE {
            // One page (the common call): straight-line. A lone page is never contiguous.
            let index = index_of(args.start, 3);
            if in_the_way(self.read(table, index)) {
                return false;
            }
            self.write(table, index, Descriptor::leaf(3, PhysAddr(args.pa), args.attrs, false));
            1
        } else {
            if self.first_valid_page(table, args.start, args.end).is_some() {
                return false;
            }
            self.write_pages(table, args.start, args.end, args)
        };
        self.add_occupants(last.parent, index_of(args.start, 2), filled);
        true
    }

    /// The offset of the first entry of the last-level `table` in `[lo, hi)` that a map may not
    /// write over: valid, or a guard marker.
    #[inline(always)]
    fn first_valid_page(&self, table: PhysAddr, lo: u64, hi: u64) -> Option<u64> {
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            if in_the_way(self.read(table, i)) {
                return Some(off);
            }
            i += 1;
            off += PAGE_SIZE;
        }
        None
    }

    /// Writes the pages of `args` in `[lo, hi)` into the last-level `table`, all of whose entries
    /// there are invalid, with the contiguous hint on every run [`run_may_be_contiguous`]
    /// allows (a run that starts before `lo` never gets it). Returns the number of pages written.
    ///
    /// [`run_may_be_contiguous`]: Self::run_may_be_contiguous
    #[inline(always)]
    fn write_pages(&mut self, table: PhysAddr, lo: u64, hi: u64, args: &MapArgs) -> usize {
        let mut run_contiguous = false;
        let (mut i, mut off) = (index_of(lo, 3), lo);
        while off < hi {
            if i.is_multiple_of(PAGE_RUN) {
                run_contiguous = self.run_may_be_contiguous(table, 3, off, args);
            }
            let leaf = Descriptor::leaf(3, PhysAddr(args.pa_at(off)), args.attrs, run_contiguous);
            self.write(table, i, leaf);
            i += 1;
            off += PAGE_SIZE;
        }
        ((hi - lo) / PAGE_SIZE) as usize
    }

    /// Maps `[lo, hi)` into `table` at `level` (`None`: a table the commit will create, all
    /// invalid). The dry run (`COMMIT = false`) writes nothing and returns the number of tables
    /// the commit will allocate; the commit takes them from `pool`, cannot fail, and returns the
    /// number of entries of `table` it filled (for its occupancy count, `occupancy.rs`).
    fn map_level<const COMMIT: bool>(
        &mut self,
        table: Option<PhysAddr>,
        level: u32,
        lo: u64,
        hi: u64,
        args: &MapArgs,
        pool: &mut FrameList,
    ) -> Result<usize, MapError> {
        if level == 3 {
            return match table {
                None => Ok(0), // Pages always fit in an empty last-level table.
                Some(table) if COMMIT => Ok(self.write_pages(table, lo, hi, args)),
                Some(table) => match self.first_valid_page(table, lo, hi) {
                    Some(off) => Err(MapError::AlreadyMapped(self.va(off))),
                    None => Ok(0),
                },
            };
        }
        // The dry run's frames needed, or the commit's entries filled.
        let mut needed = 0;
        let mut filled = 0;
        let mut run_contiguous = false;
        for e in Entries::new(level, lo, hi) {
            let d = match table {
                Some(table) => self.read(table, e.index),
                None => Descriptor::INVALID,
            };
            if let (true, Some(table)) = (COMMIT, table) {
                if e.index.is_multiple_of(run_entries(level)) {
                    run_contiguous = self.run_may_be_contiguous(table, level, e.base, args);
                } else if e.lo == lo {
                    run_contiguous = false; // The call starts inside this run.
                }
            }
            match d.kind(level) {
                DescriptorKind::Table => {
                    let below = self.map_level::<COMMIT>(
                        Some(d.output_address()),
                        level + 1,
                        e.lo,
                        e.hi,
                        args,
                        pool,
                    )?;
                    match table {
                        Some(table) if COMMIT => self.write(table, e.index, plus_occupants(d, below)),
                        _ => needed += below,
                    }
                }
                DescriptorKind::Block | DescriptorKind::Page | DescriptorKind::Reserved => {
                    return Err(MapError::AlreadyMapped(self.va(e.lo)));
                }
                DescriptorKind::Invalid => {
                    let pa = args.pa_at(e.lo);
                    if e.whole() && pa.is_multiple_of(e.size) && args.constraints.allows_leaf(level) {
                        if let (true, Some(table)) = (COMMIT, table) {
                            let leaf = Descriptor::leaf(level, PhysAddr(pa), args.attrs, run_contiguous);
                            self.write(table, e.index, leaf);
                            filled += 1;
                        }
                    } else if let (true, Some(table)) = (COMMIT, table) {
                        let new = self.take_reserved(pool);
                        self.zero(new);
                        let count = self.map_level::<true>(Some(new), level + 1, e.lo, e.hi, args, pool)?;
                        self.translation.publish_barrier();
                        self.write(table, e.index, table_descriptor(new, count));
                        filled += 1;
                    } else {
                        needed += 1 + self.map_level::<false>(None, level + 1, e.lo, e.hi, args, pool)?;
                    }
                }
            }
        }
        Ok(if COMMIT { filled } else { needed })
    }

    /// Whether the contiguous run (16 entries with 4 KiB pages: [`run_entries`]) starting at
    /// `run_base` (an entry of `table` at `level`) may carry the contiguous hint: level 2 or 3,
    /// allowed by the constraints, wholly inside the call, VA and PA aligned to the run, and all
    /// its entries invalid now (so this call writes all of
    /// them, with the same attributes).
    fn run_may_be_contiguous(&self, table: PhysAddr, level: u32, run_base: u64, args: &MapArgs) -> bool {
        let run = run_entries(level);
        let run_size = level_size(level) * run as u64;
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
        (first..first + run).all(|i| !self.read(table, i).is_valid())
    }

    /// Checks the arguments of a `map` and returns the range as offsets from the range base.
    ///
    /// As [`check_range`](Self::check_range), one test accepts every valid call (the physical
    /// range `[pa, pa + size)` aligned and below 2^`PA_BITS`, written so that nothing wraps), and
    /// the error of a refused one is worked out apart, in [`map_error`](Self::map_error).
    #[inline(always)]
    fn check_map(&self, va: VirtAddr, pa: PhysAddr, size: u64) -> Result<(u64, u64), MapError> {
        const PA_LIMIT: u64 = 1 << crate::addr::PA_BITS;
        let start = va.0.wrapping_sub(self.range.base().0);
        if (va.0 | size | pa.0) & (PAGE_SIZE - 1) == 0
            && start < SPACE_SIZE
            && size.wrapping_sub(1) < SPACE_SIZE - start
            && pa.0 <= PA_LIMIT
            && size <= PA_LIMIT - pa.0
        {
            return Ok((start, start + size));
        }
        Err(self.map_error(va, pa, size))
    }

    /// The error for a `map` [`check_map`](Self::check_map) refused: the virtual range's first
    /// (as every operation reports it), then a misaligned physical address, then a physical
    /// range past 2^`PA_BITS`.
    #[cold]
    #[inline(never)]
    fn map_error(&self, va: VirtAddr, pa: PhysAddr, size: u64) -> MapError {
        match self.check_range(va, size) {
            Err(e) => e,
            Ok(_) if !pa.is_page_aligned() => MapError::Misaligned,
            Ok(_) => MapError::InvalidRange,
        }
    }

    /// Checks the arguments of a `map` of `[va, va + size)` to `pa` without mapping anything.
    ///
    /// # Errors
    ///
    /// `InvalidRange` or `Misaligned`, as [`map`](Self::map).
    pub(crate) fn check_map_args(&self, va: VirtAddr, pa: PhysAddr, size: u64) -> Result<(), MapError> {
        self.check_map(va, pa, size).map(|_| ())
    }

    /// An upper bound of the table frames a replacement of `[va, va + size)` (an unmap, then a
    /// map to `pa` with `constraints`) needs: none for one page whose last-level table holds
    /// another occupant as well (the unmap empties no table, so the map finds every table of
    /// the path in place: a copy-on-write fault's case), else
    /// [`map_tables_bound`](Self::map_tables_bound).
    pub(crate) fn remap_tables_bound(
        &self,
        va: VirtAddr,
        pa: PhysAddr,
        size: u64,
        constraints: Constraints,
    ) -> usize {
        if size == PAGE_SIZE
            && self.range.contains(va)
            && let (2, _, d) = self.descend(va.0 & (super::SPACE_SIZE - 1), 2)
            && d.is_table(2)
            && mutant!(super::occupancy::occupancy(d) >= 2, RemapBoundIgnoresEmptiedTable => true)
        {
            return 0;
        }
        self.map_tables_bound(va, pa, size, constraints)
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

    /// The table frames mapping every piece `(va, pa, size)` of `pieces` (in address order,
    /// not overlapping) with `constraints` needs, one [`map`](Self::map) after another: a table
    /// the first piece makes serves the next ones. Against the tables as they are, or, with
    /// `fresh`, as if none existed below the root (for a range whose present contents are
    /// unmapped first, which may free tables). Pieces the space does not hold count nothing.
    pub(crate) fn tables_to_map_pieces<I: IntoIterator<Item = (VirtAddr, PhysAddr, u64)>>(
        &self,
        pieces: I,
        constraints: Constraints,
        fresh: bool,
    ) -> usize {
        // Per level, the span of the table last counted: pieces come in address order, so a
        // table two pieces need is the last one counted at its level.
        let mut last = [u64::MAX; 5];
        let mut count = 0;
        // The last-level span the previous piece ended in: a piece inside it needs nothing more
        // (it maps as pages there, into the table the previous piece found or counted).
        let span = level_size(2);
        let mut previous = u64::MAX;
        for (va, pa, size) in pieces {
            let Ok((start, end)) = self.check_map(va, pa, size) else { continue };
            let inside = start / span == previous && (end - 1) / span == previous;
            previous = (end - 1) / span;
            if inside {
                continue;
            }
            let below = |d: Descriptor| if fresh { None } else { Some(d.output_address()) };
            let mut walk = Counter { constraints, pa: pa.0, start, last: &mut last, count: &mut count };
            let root = self.root;
            walk.level(self, Some(root), ROOT_LEVEL, start, end, &below);
        }
        count
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
        // A page whose last-level table stayed (a copy-on-write fault's): `map`'s fast path,
        // which writes the leaves the general path would.
        if let Some(last) = self.fast_path_table(start, end)
            && self.map_pages_in(last, &args)
        {
            return Ok(());
        }
        self.map_checked(&args, pool, true)
    }
}

/// [`PageTable::tables_to_map_pieces`]'s walk of one piece.
struct Counter<'a> {
    constraints: Constraints,
    /// The piece's physical start and its offset start.
    pa: u64,
    start: u64,
    last: &'a mut [u64; 5],
    count: &'a mut usize,
}

impl Counter<'_> {
    /// Counts the tables under `table` (at `level`; `None`: not there) that mapping `[lo, hi)`
    /// makes; `below` says which table an existing table descriptor leads to.
    fn level<T: Translation>(
        &mut self,
        pt: &PageTable<T>,
        table: Option<PhysAddr>,
        level: u32,
        lo: u64,
        hi: u64,
        below: &dyn Fn(Descriptor) -> Option<PhysAddr>,
    ) {
        if level == 3 {
            return;
        }
        for e in Entries::new(level, lo, hi) {
            let d = table.map_or(Descriptor::INVALID, |t| pt.read(t, e.index));
            if d.kind(level) == DescriptorKind::Table
                && let Some(next) = below(d)
            {
                self.level(pt, Some(next), level + 1, e.lo, e.hi, below);
                continue;
            }
            let pa = self.pa + (e.lo - self.start);
            if e.whole() && pa.is_multiple_of(e.size) && self.constraints.allows_leaf(level) {
                continue; // a leaf here (or in the way: the map would refuse it anyway)
            }
            if self.last[level as usize] != e.base {
                self.last[level as usize] = e.base;
                *self.count += 1;
            }
            self.level(pt, None, level + 1, e.lo, e.hi, below);
        }
    }
}
