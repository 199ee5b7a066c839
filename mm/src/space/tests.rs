//! The host model proof of [`AddressSpace`]: emulated physical memory, a model TLB shared by
//! several address spaces, and random operation sequences checked against a reference map.
//!
//! One file: the model world (memory, TLB, CPUs), the random-operation harness and the directed
//! tests share the `World` and `Harness` types, which exist for these tests only.
//!
//! The model TLB ([`World::tlb`]) may cache, at any moment the code under test gives it (every
//! barrier, every TLBI, every table publication, every frame allocation or release, and before
//! and after each operation), any translation the tables currently give: leaf entries (a whole
//! 64 KiB run for a contiguous page, tagged with the ASID or global) and walk-cache entries (a
//! table descriptor and the table it points to, at every level). It starts walks from its own
//! walk-cache entries, so a stale one makes it read whatever the old table holds. It drops an
//! entry **only** when a completed TLBI (`DSB` after it) hits it under the Arm rules
//! ([`crate::tlb::model`]). After every step the harness checks:
//! - the table equals the reference map (around the operation every step, everywhere every
//!   `FULL_EVERY` steps);
//! - no stale translation: every cached leaf equals the leaf the table holds now (address, size,
//!   contiguous hint, attributes), every walk-cache entry the descriptor the table holds now
//!   (entries of the operated space near the operation every step, all entries every
//!   `FULL_EVERY` steps), and no two cached leaves of one space and tag ever overlap (a TLB
//!   conflict: what a missing break-before-make produces);
//! - no frame is released while the model TLB can still reach it: a table frame while a
//!   walk-cache entry points to it (checked in `deallocate_table`, and freed frames are
//!   poisoned), a data frame while a cached leaf maps it (checked in the `on_unmapped` callback);
//! - no leak: allocated table frames equal the tables reachable from the roots; data frames
//!   handed back equal the pages the reference lost;
//! - the one planned flush of the step covers exactly what changed, each page once: every leaf
//!   that changed or disappeared (and every removed table entry) is hit, the decoded ops are
//!   inside the changed hull rounded to the stride (and pairwise disjoint without range ops; range
//!   ops may overlap), non-leaf forms only
//!   when a table entry was removed and then always, a whole flush only above the planner's
//!   bounds, at most one plan per step;
//! - a promotion issues exactly one TLBI (a range op with FEAT_TLBIRANGE) and counts one
//!   promotion.
//!
//! Run length: `MM_MODEL_OPS` operations (default 100 000), split over four seeded runs: 2 × 30 %
//! with FEAT_TLBIRANGE, 30 % without, 10 % without and with the repeat-TLBI erratum; plus the
//! shrinkable proptest sequences. A million: `MM_MODEL_OPS=1000000 cargo test -p mm --release
//! model` (about 10 s).

use core::cell::RefCell;
use core::ptr::NonNull;
use std::boxed::Box;
use std::collections::VecDeque;
use std::rc::Rc;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::descriptor::{CONTIGUOUS_ENTRIES, Descriptor, DescriptorKind, UserAccess, level_size};
use crate::paging::{ENTRIES_PER_TABLE, VaRange};
use crate::test_support::{Rng, entry_hit_by, per_granule};
use crate::tlb::model::{Invalidation, ModelEntry, VaMatch, decode};
use crate::tlb::test_caps::Caps;
use crate::tlb::{Errata, MAX_DVM_OPS, OpKind, RANGE_BOUND_PAGES, TlbInstr, TlbiOp};

const FULL_EVERY: usize = 256;
const TLB_CAPACITY: usize = 64;

// ---- a fast seeded PRNG ---------------------------------------------------------------------

// ---- the world: memory, model TLB, spaces -----------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Content {
    Leaf { pa: u64, attrs: Attributes, contiguous: bool },
    Table { next: u64 },
}

/// One model TLB entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cached {
    space: usize,
    /// First VA covered (a whole run for a contiguous leaf).
    va: u64,
    size: u64,
    /// Level of the cached descriptor.
    level: u8,
    /// ASID tag; `None` for a global leaf.
    tag: Option<u16>,
    content: Content,
}

impl Cached {
    fn is_leaf(&self) -> bool {
        matches!(self.content, Content::Leaf { .. })
    }

    /// Whether the (completed) invalidation removes the entry. A contiguous entry covers 16
    /// descriptors and is hit if the op would hit any of them; they differ only in their VA,
    /// so the one to test is the first that overlaps the op's range.
    fn hit_by(&self, inv: &Invalidation) -> bool {
        entry_hit_by(inv, self.va, self.size, self.level, self.is_leaf(), self.tag)
    }

    fn overlaps(&self, va: u64, size: u64) -> bool {
        let (s, e) = (u128::from(self.va), u128::from(self.va) + u128::from(self.size));
        let (vs, ve) = (u128::from(va), u128::from(va) + u128::from(size));
        s < ve && vs < e
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    DsbSt,
    Dsb,
    Isb,
    Tlbi(TlbiOp, u64),
}

struct SpaceInfo {
    root: u64,
    /// `None` for the kernel (global) space.
    asid: Option<u16>,
    lo: u64,
    pages: u64,
    /// Destroyed: no CPU walks it any more.
    dead: bool,
}

/// Test-double faults, to show that the checks catch the classic bugs without touching the
/// code under test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Faults {
    /// Drop every TLBI (the flush is skipped).
    drop_tlbi: bool,
    /// Turn every non-leaf op into its leaf-only form.
    leaf_only: bool,
    /// Put the wrong ASID in ASID-specific ops.
    wrong_asid: bool,
    /// Never complete TLBIs (no final `DSB ISH`).
    no_dsb: bool,
}

struct World {
    frames: Vec<NonNull<[u64; ENTRIES_PER_TABLE]>>,
    allocated: Vec<bool>,
    free: Vec<usize>,
    base: u64,
    tlb: Vec<Cached>,
    spaces: Vec<SpaceInfo>,
    /// The user space each of two CPUs runs (index into `spaces`), if any.
    cpus: [Option<usize>; 2],
    rng: Rng,
    /// `(space, first VA, length)`: where the operation in progress works; touches favour it.
    hot: Option<(usize, u64, u64)>,
    events: Vec<Ev>,
    pending: Vec<Invalidation>,
    faults: Faults,
    touches: u64,
    /// Table allocations still allowed; `None` = unlimited.
    fail_after: Option<usize>,
}

impl Drop for World {
    fn drop(&mut self) {
        for f in self.frames.drain(..) {
            // SAFETY: every pointer came from `Box::into_raw` and is dropped once.
            drop(unsafe { Box::from_raw(f.as_ptr()) });
        }
    }
}

type Shared = Rc<RefCell<World>>;

impl World {
    fn new(seed: u64) -> Self {
        Self {
            frames: Vec::new(),
            allocated: Vec::new(),
            free: Vec::new(),
            base: 0x40_0000_0000,
            tlb: Vec::new(),
            spaces: Vec::new(),
            cpus: [None, None],
            rng: Rng(seed),
            hot: None,
            events: Vec::new(),
            pending: Vec::new(),
            faults: Faults::default(),
            touches: 0,
            fail_after: None,
        }
    }

    fn index(&self, pa: u64) -> usize {
        assert!(pa.is_multiple_of(PAGE_SIZE) && pa >= self.base, "bad table address {pa:#x}");
        let i = ((pa - self.base) / PAGE_SIZE) as usize;
        assert!(
            i < self.frames.len() && self.allocated[i],
            "access to a table frame that is not allocated: {pa:#x}"
        );
        i
    }

    fn read(&self, table: u64, index: usize) -> Descriptor {
        let f = self.frames[self.index(table)];
        // SAFETY: the frame is allocated (checked) and `index < 512`; no reference to it exists.
        Descriptor::from_bits(unsafe { f.cast::<u64>().as_ptr().add(index).read_volatile() })
    }

    fn live_frames(&self) -> usize {
        self.allocated.iter().filter(|&&a| a).count()
    }

    /// The ASID a lookup of `space` on `cpu` uses.
    fn lookup_asid(&self, space: usize, cpu: usize) -> u16 {
        match self.spaces[space].asid {
            Some(a) => a,
            None => self.cpus[cpu].and_then(|s| self.spaces[s].asid).unwrap_or(0),
        }
    }

    fn tag_matches(tag: Option<u16>, asid: u16) -> bool {
        tag.is_none() || tag == Some(asid)
    }

    /// A memory access by `cpu` to `va` of `space`: a TLB hit, or a walk (from the deepest
    /// walk-cache entry) that caches what it reads.
    fn touch(&mut self, space: usize, cpu: usize, va: u64) {
        self.touches += 1;
        let va = va & !(PAGE_SIZE - 1);
        let asid = self.lookup_asid(space, cpu);
        // A hit, usually; but another TLB structure of the CPU (the instruction side, another
        // level) may still walk, which is how a missing break-before-make ends in a conflict.
        if self
            .tlb
            .iter()
            .any(|e| e.space == space && e.is_leaf() && e.overlaps(va, 1) && Self::tag_matches(e.tag, asid))
            && !self.rng.chance(20)
        {
            return;
        }
        let walk_tag = Some(asid);
        let mut start = (crate::paging::ROOT_LEVEL, self.spaces[space].root);
        for e in &self.tlb {
            if let Content::Table { next } = e.content
                && e.space == space
                && e.overlaps(va, 1)
                && e.tag == walk_tag
                && u32::from(e.level) + 1 > start.0
            {
                start = (u32::from(e.level) + 1, next);
            }
        }
        let (mut level, mut table) = start;
        loop {
            let d = self.read(table, VirtAddr(va).table_index(level));
            let size = level_size(level);
            match d.kind(level) {
                DescriptorKind::Table => {
                    let e = Cached {
                        space,
                        va: va & !(size - 1),
                        size,
                        level: level as u8,
                        tag: walk_tag,
                        content: Content::Table { next: d.output_address().0 },
                    };
                    self.insert(e);
                    table = d.output_address().0;
                    level += 1;
                }
                DescriptorKind::Block | DescriptorKind::Page => {
                    let attrs = d.attributes();
                    let (span, pa) = if d.is_contiguous() {
                        let run = size * CONTIGUOUS_ENTRIES as u64;
                        let j = (va & (run - 1)) / size;
                        (run, d.output_address().0 - j * size)
                    } else {
                        (size, d.output_address().0)
                    };
                    let e = Cached {
                        space,
                        va: va & !(span - 1),
                        size: span,
                        level: level as u8,
                        tag: if attrs.is_global() { None } else { Some(asid) },
                        content: Content::Leaf { pa, attrs, contiguous: d.is_contiguous() },
                    };
                    self.insert(e);
                    return;
                }
                DescriptorKind::Invalid | DescriptorKind::Reserved => return,
            }
        }
    }

    fn insert(&mut self, e: Cached) {
        if self.tlb.contains(&e) {
            return;
        }
        if let Content::Leaf { pa, attrs, contiguous } = e.content {
            for o in &self.tlb {
                // Two entries for the same VA that differ in anything but the permissions (which
                // may change in place: either is used until the flush) is a TLB conflict.
                let permissions_only = match o.content {
                    Content::Leaf { pa: p, attrs: a, contiguous: c } => {
                        o.va == e.va
                            && o.size == e.size
                            && p == pa
                            && c == contiguous
                            && a.with_permissions_of(attrs) == attrs
                    }
                    Content::Table { .. } => true,
                };
                assert!(
                    !(o.space == e.space && o.tag == e.tag && o.overlaps(e.va, e.size) && !permissions_only),
                    "TLB conflict (break-before-make violated): cached {o:x?} and now {e:x?}"
                );
            }
        }
        if self.tlb.len() >= TLB_CAPACITY {
            let victim = self.rng.below(self.tlb.len() as u64) as usize;
            self.tlb.swap_remove(victim);
        }
        self.tlb.push(e);
    }

    /// A few accesses from any CPU: to the hot range, or anywhere in a window of a running space.
    fn touch_random(&mut self, n: u32) {
        for _ in 0..n {
            let cpu = self.rng.below(2) as usize;
            let kernel = self.spaces.iter().position(|s| s.asid.is_none() && !s.dead);
            let running: Vec<usize> = self.cpus.iter().flatten().copied().chain(kernel).collect();
            let (space, va) = match self.hot {
                Some((s, lo, len)) if running.contains(&s) && self.rng.chance(60) => {
                    (s, lo.wrapping_add(self.rng.below(len / PAGE_SIZE) * PAGE_SIZE))
                }
                _ => {
                    let s = match self.cpus[cpu] {
                        Some(u) if self.rng.chance(60) => u,
                        _ => match kernel {
                            Some(k) => k,
                            None => continue,
                        },
                    };
                    let info = &self.spaces[s];
                    (s, info.lo.wrapping_add(self.rng.below(info.pages) * PAGE_SIZE))
                }
            };
            if self.spaces[space].dead {
                continue;
            }
            // A user space is only walked on a CPU that runs it.
            let cpu = match self.spaces[space].asid {
                Some(_) => match self.cpus.iter().position(|&c| c == Some(space)) {
                    Some(c) => c,
                    None => continue,
                },
                None => cpu,
            };
            self.touch(space, cpu, va);
        }
    }

    fn complete_tlbis(&mut self) {
        if self.faults.no_dsb {
            return;
        }
        let pending = core::mem::take(&mut self.pending);
        if pending.is_empty() {
            return;
        }
        // Up to 511 per-page ops: index them by start address.
        let mut all = Vec::new();
        let mut ranged: Vec<(u128, u128, Invalidation)> = Vec::new();
        for inv in pending {
            match inv.va_bounds() {
                None => all.push(inv),
                Some((s, e)) => ranged.push((s, e, inv)),
            }
        }
        ranged.sort_unstable_by_key(|r| r.0);
        let longest = ranged.iter().map(|r| r.1 - r.0).max().unwrap_or(0);
        self.tlb.retain(|e| {
            if all.iter().any(|inv| e.hit_by(inv)) {
                return false;
            }
            let (es, ee) = (u128::from(e.va), u128::from(e.va) + u128::from(e.size));
            let hi = ranged.partition_point(|r| r.0 < ee);
            let lo = ranged.partition_point(|r| r.0 + longest <= es);
            !ranged[lo..hi].iter().any(|r| r.1 > es && e.hit_by(&r.2))
        });
    }

    /// Every model-TLB entry (of `space` overlapping `[lo, lo + len)`, or all) equals what the
    /// tables hold now: a walk-cache entry the table descriptor, a leaf entry every descriptor
    /// it stands for (all 16 of a contiguous run).
    fn check_tlb(&self, only: Option<(usize, u64, u64)>, step: usize) {
        for e in &self.tlb {
            if let Some((s, lo, len)) = only
                && (e.space != s || !e.overlaps(lo, len))
            {
                continue;
            }
            let level = u32::from(e.level);
            let size = level_size(level);
            let ok = (0..e.size / size).all(|j| {
                let va = e.va.wrapping_add(j * size);
                let mut table = self.spaces[e.space].root;
                for l in crate::paging::ROOT_LEVEL..level {
                    let d = self.read(table, VirtAddr(va).table_index(l));
                    if !d.is_table(l) {
                        return false;
                    }
                    table = d.output_address().0;
                }
                let d = self.read(table, VirtAddr(va).table_index(level));
                match e.content {
                    Content::Table { next } => d.is_table(level) && d.output_address().0 == next,
                    Content::Leaf { pa, attrs, contiguous } => {
                        d.is_leaf(level)
                            && d.is_contiguous() == contiguous
                            && d.attributes() == attrs
                            && d.output_address().0 == pa + j * size
                    }
                }
            });
            assert!(ok, "step {step}: stale TLB entry {e:x?}");
        }
    }

    /// Whether any cached leaf (of any space) maps a byte of `[pa, pa + size)`.
    fn maps_frame(&self, pa: u64, size: u64) -> Option<Cached> {
        self.tlb.iter().copied().find(|e| match e.content {
            Content::Leaf { pa: p, .. } => p < pa + size && pa < p + e.size,
            Content::Table { .. } => false,
        })
    }
}

/// The test translation: frames of the shared world.
struct Mem(Shared);

// SAFETY: frames are distinct 4096-byte heap allocations that live as long as the world;
// `table_ptr` refuses frames that are not allocated.
unsafe impl Translation for Mem {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        let mut w = self.0.borrow_mut();
        if let Some(n) = w.fail_after.as_mut() {
            if *n == 0 {
                return None;
            }
            *n -= 1;
        }
        let i = match w.free.pop() {
            Some(i) => i,
            None => {
                w.frames.push(NonNull::new(Box::into_raw(Box::new([0u64; ENTRIES_PER_TABLE]))).unwrap());
                w.allocated.push(false);
                w.frames.len() - 1
            }
        };
        w.allocated[i] = true;
        // Poison: every word a valid descriptor, so a missing zeroing shows.
        // SAFETY: the frame is allocated and no reference to it exists.
        unsafe { w.frames[i].as_ptr().write([u64::MAX; ENTRIES_PER_TABLE]) };
        let pa = w.base + i as u64 * PAGE_SIZE;
        w.touch_random(1);
        Some(PhysAddr(pa))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        let mut w = self.0.borrow_mut();
        let i = w.index(pa.0);
        if let Some(e) = w.tlb.iter().find(|e| e.content == Content::Table { next: pa.0 }) {
            panic!("table frame {pa:?} released while the TLB walk cache still points to it: {e:x?}");
        }
        // Poison the freed frame with valid table descriptors pointing at itself.
        // SAFETY: the frame is still allocated (checked above) and no reference to it exists.
        unsafe { w.frames[i].as_ptr().write([pa.0 | 0b11; ENTRIES_PER_TABLE]) };
        w.allocated[i] = false;
        w.free.push(i);
        w.touch_random(1);
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        let w = self.0.borrow();
        w.frames[w.index(pa.0)]
    }

    fn publish_barrier(&self) {
        self.0.borrow_mut().touch_random(1);
    }
}

/// The test TLB hardware: records, applies TLBIs to the model TLB at the next `DSB`, and lets
/// the model TLB cache at every instruction.
struct Cpu(Shared);

impl Cpu {
    fn event(&mut self, ev: Ev) {
        let mut w = self.0.borrow_mut();
        w.events.push(ev);
        w.touch_random(1);
    }
}

impl TlbHardware for Cpu {
    fn dsb_ishst(&mut self) {
        self.event(Ev::DsbSt);
    }
    fn dsb_ish(&mut self) {
        self.0.borrow_mut().complete_tlbis();
        self.event(Ev::Dsb);
    }
    fn dsb_nshst(&mut self) {
        self.event(Ev::DsbSt);
    }
    fn dsb_nsh(&mut self) {
        self.0.borrow_mut().complete_tlbis();
        self.event(Ev::Dsb);
    }
    fn isb(&mut self) {
        self.event(Ev::Isb);
    }
    fn tlbi(&mut self, op: TlbiOp, operand: u64) {
        let mut w = self.0.borrow_mut();
        let faults = w.faults;
        w.events.push(Ev::Tlbi(op, operand));
        if !faults.drop_tlbi {
            let (mut op, mut operand) = (op, operand);
            if faults.leaf_only {
                op = match op {
                    TlbiOp::Vae1is => TlbiOp::Vale1is,
                    TlbiOp::Vaae1is => TlbiOp::Vaale1is,
                    TlbiOp::Rvae1is => TlbiOp::Rvale1is,
                    TlbiOp::Rvaae1is => TlbiOp::Rvaale1is,
                    o => o,
                };
            }
            if faults.wrong_asid && !op.is_all_asids() {
                operand = operand.wrapping_add(1 << 48);
            }
            let inv = decode(TlbInstr { op, operand });
            w.pending.push(inv);
        }
        if w.rng.chance(25) {
            w.touch_random(1);
        }
    }
}

type Space = AddressSpace<Mem, Cpu>;

// ---- the harness ----------------------------------------------------------------------------

/// Reference: per page of the window, `(pa, attrs)`.
type Reference = Vec<Option<(u64, Attributes)>>;

struct Harness {
    world: Shared,
    spaces: Vec<Space>,
    refs: Vec<Reference>,
    /// Physical base of each space's "mirror" memory: page `i` of the window ↔ frame `i`.
    mirror: Vec<u64>,
    /// Scattered data frames: `true` = in use.
    scatter: Vec<bool>,
    caps: Caps,
    step: usize,
    ops: Counts,
    /// Scripted operations still to run (a scenario).
    queue: VecDeque<Op>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    map: u64,
    unmap: u64,
    protect: u64,
    memtype: u64,
    remap: u64,
    promote: u64,
    promoted: u64,
    demote: u64,
    demoted: u64,
    switch: u64,
    tlbis: u64,
    /// From the spaces' counters at the end (automatic ones included).
    space: SpaceStats,
}

const SCATTER_BASE: u64 = 0x80_0000_0000;
const SCATTER_FRAMES: usize = 32 * BLOCK_PAGES as usize;
/// Pages of a level-2 block (512 with 4 KiB pages): the unit of the windows and of promotion.
const BLOCK_PAGES: u64 = crate::paging::ENTRIES_PER_TABLE as u64;
/// Pages of a contiguous run (16 with 4 KiB pages).
const RUN_PAGES: u64 = CONTIGUOUS_ENTRIES as u64;
/// The second user window's boundary: a level-0 entry (512 GiB with 4 KiB pages; 128 TiB with
/// 16 KiB; with 64 KiB, whose root is level 1, a level-1 boundary at 128 TiB).
const TOP_BOUNDARY: u64 = if level_size(0) < 1 << 47 { level_size(0) } else { 1 << 47 };

/// `(range, window start, pages, asid)`: a kernel window at the very top of the address space,
/// and user windows across a level-1 boundary (1 GiB with 4 KiB pages) and a level-0 one, in
/// level-2 blocks (2 MiB with 4 KiB pages).
const LAYOUT: [(VaRange, u64, u64, Option<u16>); 4] = [
    (VaRange::Upper, 0u64.wrapping_sub(4 * BLOCK_2M), 4 * BLOCK_PAGES, None),
    (VaRange::Lower, BLOCK_1G - 2 * BLOCK_2M, 4 * BLOCK_PAGES, Some(1)),
    (VaRange::Lower, TOP_BOUNDARY - 2 * BLOCK_2M, 4 * BLOCK_PAGES, Some(2)),
    (VaRange::Lower, 0x7f00_0000_0000, 2 * BLOCK_PAGES, Some(300)),
];

#[derive(Clone, Copy, Debug)]
enum Op {
    Map { space: usize, page: u64, pages: u64, scatter: bool, attrs: u8, constraints: u8 },
    Unmap { space: usize, page: u64, pages: u64 },
    Protect { space: usize, page: u64, pages: u64, attrs: u8 },
    MemType { space: usize, page: u64, pages: u64, memory: u8 },
    Remap { space: usize, page: u64, pages: u64, scatter: bool, attrs: u8 },
    Promote { space: usize, region: u64 },
    Demote { space: usize, page: u64 },
    Switch { cpu: usize, space: Option<usize> },
}

impl Op {
    fn space(&self) -> Option<usize> {
        match *self {
            Op::Map { space, .. }
            | Op::Unmap { space, .. }
            | Op::Protect { space, .. }
            | Op::MemType { space, .. }
            | Op::Remap { space, .. }
            | Op::Promote { space, .. }
            | Op::Demote { space, .. } => Some(space),
            Op::Switch { .. } => None,
        }
    }
}

fn user_attrs(i: u8) -> Attributes {
    match i % 5 {
        0 | 1 => Attributes::user(UserAccess::ReadWrite),
        2 => Attributes::user(UserAccess::ReadOnly),
        3 => Attributes::user(UserAccess::ReadExecute),
        _ => Attributes::user(UserAccess::ReadWrite).with_memory_type(MemoryType::NormalNonCacheable),
    }
}

fn kernel_attrs(i: u8) -> Attributes {
    match i % 6 {
        0 | 1 => Attributes::kernel_data(),
        2 => Attributes::kernel_rodata(),
        3 => Attributes::kernel_text(),
        4 => Attributes::device(),
        _ => Attributes::kernel_data().with_global(false),
    }
}

fn constraints_of(i: u8) -> Constraints {
    Constraints::NO_1G_BLOCKS
        | match i % 10 {
            0..=5 => Constraints::NONE,
            6 => Constraints::NO_BLOCKS,
            7 => Constraints::NO_CONTIGUOUS,
            _ => Constraints::NO_BLOCKS | Constraints::NO_CONTIGUOUS,
        }
}

fn memory_of(i: u8) -> MemoryType {
    match i % 3 {
        0 => MemoryType::NormalWriteBack,
        1 => MemoryType::NormalNonCacheable,
        _ => MemoryType::DeviceNGnRE,
    }
}

/// One leaf as the snapshot sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SnapLeaf {
    va: u64,
    level: u32,
    contiguous: bool,
    pa: u64,
    attrs: Attributes,
}

/// Leaves and table entries (`level` of the descriptor, first VA, table PA) under a region.
#[derive(Default)]
struct Snapshot {
    leaves: Vec<SnapLeaf>,
    tables: Vec<(u32, u64, u64)>,
}

impl Harness {
    fn new(seed: u64, caps: Caps) -> Self {
        let world = Rc::new(RefCell::new(World::new(seed)));
        let mut spaces = Vec::new();
        let mut refs = Vec::new();
        let mut mirror = Vec::new();
        for (i, &(range, lo, pages, asid)) in LAYOUT.iter().enumerate() {
            let table = PageTable::new(Mem(world.clone()), range).unwrap();
            let tlb = TlbIssuer::new(Cpu(world.clone()), caps.errata);
            let space = match asid {
                Some(a) => {
                    AddressSpace::user(table, tlb, caps.features(), FlushTarget::asid(a, caps.reach()))
                }
                None => {
                    let mut k = AddressSpace::kernel(table, tlb, caps.features());
                    // The test kernel window maps nothing the sequence uses, so it may promote.
                    k.set_policy(Policy { promote: true, fold: true, split_contiguous: true });
                    k
                }
            };
            world.borrow_mut().spaces.push(SpaceInfo {
                root: space.table().root_pa().0,
                asid,
                lo,
                pages,
                dead: false,
            });
            spaces.push(space);
            refs.push(vec![None; pages as usize]);
            mirror.push(0x10_0000_0000 + i as u64 * 0x1_0000_0000);
        }
        world.borrow_mut().cpus = [Some(1), Some(2)];
        Self {
            world,
            spaces,
            refs,
            mirror,
            scatter: vec![false; SCATTER_FRAMES],
            caps,
            step: 0,
            ops: Counts::default(),
            queue: VecDeque::new(),
        }
    }

    fn lo(&self, space: usize) -> u64 {
        LAYOUT[space].1
    }

    fn pages(&self, space: usize) -> u64 {
        LAYOUT[space].2
    }

    fn va(&self, space: usize, page: u64) -> u64 {
        self.lo(space).wrapping_add(page * PAGE_SIZE)
    }

    /// A random operation. Sizes favour small ranges, with aligned 64 KiB and 2 MiB ones.
    fn random_op(&mut self) -> Op {
        if let Some(op) = self.queue.pop_front() {
            return op;
        }
        if self.world.borrow_mut().rng.chance(3) {
            self.scenario();
            if let Some(op) = self.queue.pop_front() {
                return op;
            }
        }
        let rng = &mut self.world.borrow_mut().rng;
        let kind = rng.below(100);
        if kind < 3 {
            let cpu = rng.below(2) as usize;
            let space = if rng.chance(10) { None } else { Some(1 + rng.below(3) as usize) };
            return Op::Switch { cpu, space };
        }
        let space = rng.below(LAYOUT.len() as u64) as usize;
        let total = LAYOUT[space].2;
        let (align, n) = match rng.below(100) {
            0..=39 => (1, 1),
            40..=69 => (1, 1 + rng.below(16)),
            70..=84 => (RUN_PAGES, RUN_PAGES * (1 + rng.below(3))),
            85..=94 => (BLOCK_PAGES, BLOCK_PAGES),
            _ => (1, 1 + rng.below(total)),
        };
        let page = rng.below(total) / align * align;
        let pages = n.min(total - page).max(1);
        let (a, b) = (rng.next() as u8, rng.next() as u8);
        match kind {
            3..=44 => Op::Map { space, page, pages, scatter: rng.chance(25), attrs: a, constraints: b },
            45..=62 => Op::Unmap { space, page, pages },
            63..=74 => Op::Protect { space, page, pages, attrs: a },
            75..=80 => Op::MemType { space, page, pages, memory: a },
            81..=86 => Op::Remap { space, page, pages, scatter: rng.chance(50), attrs: a },
            87..=94 => Op::Promote { space, region: page / BLOCK_PAGES },
            _ => Op::Demote { space, page },
        }
    }

    /// Queues a scripted sequence on one 2 MiB range of a window (random sequences rarely
    /// fill one): empty it, then either fill it piece by piece in random order with contiguous
    /// memory and uniform attributes (folds, then an automatic promotion on the last piece), or
    /// map it as pages and promote explicitly; then change part of it (a split) or demote it
    /// and promote again.
    fn scenario(&mut self) {
        let rng = &mut self.world.borrow_mut().rng;
        let space = rng.below(LAYOUT.len() as u64) as usize;
        let region = rng.below(LAYOUT[space].2 / BLOCK_PAGES);
        let base = region * BLOCK_PAGES;
        let attrs = rng.next() as u8;
        let q = &mut self.queue;
        q.push_back(Op::Unmap { space, page: base, pages: BLOCK_PAGES });
        if rng.chance(60) {
            let mut pieces = Vec::new();
            let mut p = 0;
            while p < BLOCK_PAGES {
                let n = match rng.below(4) {
                    0 => 1,
                    1 => 1 + rng.below(RUN_PAGES),
                    2 => RUN_PAGES,
                    _ => 1 + rng.below(100 * BLOCK_PAGES / 512),
                }
                .min(BLOCK_PAGES - p);
                pieces.push((p, n));
                p += n;
            }
            for i in (1..pieces.len()).rev() {
                pieces.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for (p, n) in pieces {
                q.push_back(Op::Map {
                    space,
                    page: base + p,
                    pages: n,
                    scatter: false,
                    attrs,
                    constraints: 0,
                });
            }
        } else {
            q.push_back(Op::Map {
                space,
                page: base,
                pages: BLOCK_PAGES,
                scatter: false,
                attrs,
                constraints: 6,
            });
            q.push_back(Op::Promote { space, region });
        }
        let page = base + rng.below(BLOCK_PAGES);
        let pages = (1 + rng.below(40)).min(LAYOUT[space].2 - page);
        match rng.below(3) {
            0 => q.push_back(Op::Protect { space, page, pages, attrs: rng.next() as u8 }),
            1 => q.push_back(Op::Unmap { space, page, pages }),
            _ => {
                q.push_back(Op::Demote { space, page });
                q.push_back(Op::Demote { space, page });
                q.push_back(Op::Promote { space, region });
            }
        }
    }

    fn attrs_for(&self, space: usize, i: u8) -> Attributes {
        match LAYOUT[space].3 {
            Some(_) => user_attrs(i),
            None => kernel_attrs(i),
        }
    }

    /// Allocates `pages` contiguous scattered frames at an odd offset (never 64 KiB aligned).
    fn scatter_alloc(&mut self, pages: u64) -> Option<u64> {
        let pages = pages as usize;
        let start = self.world.borrow_mut().rng.below(SCATTER_FRAMES as u64) as usize | 1;
        let mut i = start;
        while i + pages <= SCATTER_FRAMES {
            if let Some(used) = self.scatter[i..i + pages].iter().rposition(|&u| u) {
                i = (i + used + 1) | 1;
                continue;
            }
            self.scatter[i..i + pages].iter_mut().for_each(|u| *u = true);
            return Some(SCATTER_BASE + i as u64 * PAGE_SIZE);
        }
        None
    }

    fn scatter_free(&mut self, pa: u64) {
        if (SCATTER_BASE..SCATTER_BASE + SCATTER_FRAMES as u64 * PAGE_SIZE).contains(&pa) {
            let i = ((pa - SCATTER_BASE) / PAGE_SIZE) as usize;
            assert!(self.scatter[i], "scattered frame {pa:#x} freed twice");
            self.scatter[i] = false;
        }
    }

    /// Leaves and tables of `space` under `[lo, lo + len)` (a raw walk of the emulated memory).
    fn snapshot(&self, space: usize, lo: u64, len: u64) -> Snapshot {
        fn visit(w: &World, table: u64, level: u32, base: u64, lo: u64, hi: u64, s: &mut Snapshot) {
            let size = level_size(level);
            let mut off = lo;
            while off < hi {
                let index = ((off - base) / size) as usize;
                let eb = base + index as u64 * size;
                let ee = eb + size;
                let d = w.read(table, index);
                match d.kind(level) {
                    DescriptorKind::Table => {
                        s.tables.push((level, eb, d.output_address().0));
                        visit(w, d.output_address().0, level + 1, eb, off, hi.min(ee), s);
                    }
                    DescriptorKind::Block | DescriptorKind::Page => s.leaves.push(SnapLeaf {
                        va: eb,
                        level,
                        contiguous: d.is_contiguous(),
                        pa: d.output_address().0,
                        attrs: d.attributes(),
                    }),
                    _ => {}
                }
                off = ee.min(hi);
            }
        }
        let w = self.world.borrow();
        let off = lo & ((1u64 << 48) - 1);
        let mut s = Snapshot::default();
        visit(&w, w.spaces[space].root, crate::paging::ROOT_LEVEL, 0, off, off + len, &mut s);
        s
    }

    /// The region an operation may change, `(first VA, length)`: its range, widened to the
    /// 2 MiB block or range (promotion, split) or the 64 KiB run around each end.
    fn region(&self, op: &Op) -> (u64, u64) {
        let (space, first, last, wide) = match *op {
            Op::Map { space, page, pages, .. } => {
                // Widen to 2 MiB where the map completes a 2 MiB range (a promotion).
                let r = &self.refs[space];
                let full = |p: u64| {
                    let b = p / BLOCK_PAGES * BLOCK_PAGES;
                    (b..b + BLOCK_PAGES).all(|q| {
                        (q >= page && q < page + pages) || r.get(q as usize).is_some_and(|e| e.is_some())
                    })
                };
                (space, page, page + pages - 1, full(page) || full(page + pages - 1))
            }
            Op::Unmap { space, page, pages }
            | Op::Protect { space, page, pages, .. }
            | Op::MemType { space, page, pages, .. }
            | Op::Remap { space, page, pages, .. } => (space, page, page + pages - 1, false),
            Op::Promote { space, region } => {
                (space, region * BLOCK_PAGES, (region + 1) * BLOCK_PAGES - 1, true)
            }
            Op::Demote { space, page } => (space, page, page, false),
            Op::Switch { .. } => return (0, 0),
        };
        let t = self.spaces[space].table();
        let block = |p: u64| t.query(VirtAddr(self.va(space, p))).is_some_and(|l| l.level < 3);
        let align = if wide || block(first) || block(last) { BLOCK_PAGES } else { RUN_PAGES };
        let lo = first / align * align;
        let hi = ((last / align + 1) * align).min(self.pages(space));
        (self.va(space, lo), (hi - lo) * PAGE_SIZE)
    }

    /// Runs one operation and checks everything. Returns whether it changed the reference.
    fn apply(&mut self, op: Op) {
        self.step += 1;
        let step = self.step;
        if let Op::Switch { cpu, space } = op {
            self.world.borrow_mut().cpus[cpu] = space;
            self.ops.switch += 1;
            return;
        }
        let space = op.space().unwrap();
        let (rlo, rlen) = self.region(&op);
        let before = self.snapshot(space, rlo, rlen);
        {
            let mut w = self.world.borrow_mut();
            w.hot = Some((space, rlo, rlen));
            w.touch_random(4);
            w.events.clear();
        }
        let stats_before = (*self.spaces[space].tlb_stats(), self.spaces[space].stats());
        // The reference of the region (the only pages an operation may change).
        let first_page = rlo.wrapping_sub(self.lo(space)) / PAGE_SIZE;
        let region_pages = first_page as usize..(first_page + rlen / PAGE_SIZE) as usize;
        let old_ref = self.refs[space][region_pages.clone()].to_vec();
        let world = self.world.clone();
        let mut handed: Vec<(u64, u64, u64)> = Vec::new();
        let mut sink = |u: Unmapped| {
            if let Some(e) = world.borrow().maps_frame(u.pa.0, u.size) {
                panic!("step {step}: frames {u:x?} handed back while the TLB still maps them: {e:x?}");
            }
            handed.push((u.va.0, u.pa.0, u.size));
        };
        let mut expect_promote = None;
        let mut replaced = 0..0;
        let result: Result<bool, MapError> = match op {
            Op::Map { page, pages, scatter, attrs, constraints, .. } => {
                self.ops.map += 1;
                let va = self.va(space, page);
                let a = self.attrs_for(space, attrs);
                let c = constraints_of(constraints);
                let first_mapped = (page..page + pages).find(|&p| self.refs[space][p as usize].is_some());
                let pa = if scatter {
                    self.scatter_alloc(pages)
                } else {
                    Some(self.mirror[space] + page * PAGE_SIZE)
                };
                match (first_mapped, pa) {
                    (_, None) => Ok(false),
                    (Some(p), Some(pa)) => {
                        let r = self.spaces[space].map(VirtAddr(va), PhysAddr(pa), pages * PAGE_SIZE, a, c);
                        assert_eq!(
                            r,
                            Err(MapError::AlreadyMapped(VirtAddr(self.va(space, p)))),
                            "step {step}"
                        );
                        self.release_scatter(pa, pages);
                        Ok(false)
                    }
                    (None, Some(pa)) => {
                        self.spaces[space].map(VirtAddr(va), PhysAddr(pa), pages * PAGE_SIZE, a, c).unwrap();
                        let a = self.spaces[space].fix(a);
                        for i in 0..pages {
                            self.refs[space][(page + i) as usize] = Some((pa + i * PAGE_SIZE, a));
                        }
                        Ok(true)
                    }
                }
            }
            Op::Unmap { page, pages, .. } => {
                self.ops.unmap += 1;
                let va = VirtAddr(self.va(space, page));
                let r = self.spaces[space].unmap(va, pages * PAGE_SIZE, &mut sink);
                for i in page..page + pages {
                    self.refs[space][i as usize] = None;
                }
                r.map(|_| true)
            }
            Op::Protect { page, pages, attrs, .. } => {
                self.ops.protect += 1;
                let new = self.attrs_for(space, attrs);
                let f = |a: Attributes| a.with_permissions_of(new);
                let va = VirtAddr(self.va(space, page));
                let r = self.spaces[space].protect_with(va, pages * PAGE_SIZE, f);
                for e in self.refs[space][page as usize..(page + pages) as usize].iter_mut().flatten() {
                    e.1 = f(e.1);
                }
                r.map(|_| true)
            }
            Op::MemType { page, pages, memory, .. } => {
                self.ops.memtype += 1;
                let m = memory_of(memory);
                let va = VirtAddr(self.va(space, page));
                let r = self.spaces[space].set_memory_type(va, pages * PAGE_SIZE, m);
                for e in self.refs[space][page as usize..(page + pages) as usize].iter_mut().flatten() {
                    e.1 = e.1.with_memory_type(m);
                }
                r.map(|_| true)
            }
            Op::Remap { page, pages, scatter, attrs, .. } => {
                self.ops.remap += 1;
                let a = self.attrs_for(space, attrs);
                let pa = if scatter {
                    self.scatter_alloc(pages)
                } else {
                    Some(self.mirror[space] + page * PAGE_SIZE)
                };
                match pa {
                    None => Ok(false),
                    Some(pa) => {
                        let va = VirtAddr(self.va(space, page));
                        let c = constraints_of(attrs);
                        let r =
                            self.spaces[space].remap(va, PhysAddr(pa), pages * PAGE_SIZE, a, c, &mut sink);
                        replaced = page..page + pages;
                        let a = self.spaces[space].fix(a);
                        for i in 0..pages {
                            self.refs[space][(page + i) as usize] = Some((pa + i * PAGE_SIZE, a));
                        }
                        r.map(|_| true)
                    }
                }
            }
            Op::Promote { region, .. } => {
                self.ops.promote += 1;
                let va = VirtAddr(self.va(space, region * BLOCK_PAGES));
                let r =
                    &self.refs[space][(region * BLOCK_PAGES) as usize..((region + 1) * BLOCK_PAGES) as usize];
                let eligible = r.iter().enumerate().all(|(i, e)| {
                    e.is_some_and(|(pa, a)| {
                        let (pa0, a0) = r[0].unwrap();
                        pa0.is_multiple_of(BLOCK_2M) && pa == pa0 + i as u64 * PAGE_SIZE && a == a0
                    })
                }) && self.spaces[space].query(va).is_some_and(|l| l.level == 3);
                expect_promote = Some(eligible);
                let r = self.spaces[space].promote(va);
                assert_eq!(r, Ok(eligible), "step {step}: promote({va:?})");
                if eligible {
                    self.ops.promoted += 1;
                }
                r
            }
            Op::Demote { page, .. } => {
                self.ops.demote += 1;
                let va = VirtAddr(self.va(space, page));
                let expected = self.spaces[space].query(va).is_some_and(|l| l.level < 3 || l.contiguous);
                let r = self.spaces[space].demote(va);
                assert_eq!(r, Ok(expected), "step {step}: demote({va:?})");
                if expected {
                    self.ops.demoted += 1;
                }
                r
            }
            Op::Switch { .. } => unreachable!(),
        };
        if result.is_err() {
            panic!("step {step}: {op:?} failed: {result:?}");
        }
        self.world.borrow_mut().touch_random(2);
        self.world.borrow_mut().hot = None;

        // Data frames: handed back exactly the pages the reference lost or replaced.
        let mut lost: Vec<(u64, u64)> = Vec::new();
        for (i, (o, n)) in old_ref.iter().zip(&self.refs[space][region_pages]).enumerate() {
            let i = i + first_page as usize;
            if let Some((pa, _)) = o
                && (replaced.contains(&(i as u64)) || n.is_none_or(|(npa, _)| npa != *pa))
            {
                lost.push((self.va(space, i as u64), *pa));
            }
        }
        let mut got: Vec<(u64, u64)> = Vec::new();
        for &(va, pa, size) in &handed {
            for j in 0..size / PAGE_SIZE {
                got.push((va + j * PAGE_SIZE, pa + j * PAGE_SIZE));
            }
        }
        got.sort_unstable();
        lost.sort_unstable();
        assert_eq!(got, lost, "step {step}: {op:?}: frames handed back differ from the pages unmapped");
        for (_, pa) in lost {
            self.scatter_free(pa);
        }

        // The table equals the reference around the operation.
        let after = self.snapshot(space, rlo, rlen);
        self.check_reference(space, &after, rlo, rlen, &op);

        // Flush coverage.
        let events = self.world.borrow().events.clone();
        let tlbis: Vec<TlbInstr> = events
            .iter()
            .filter_map(|e| match *e {
                Ev::Tlbi(op, operand) => Some(TlbInstr { op, operand }),
                _ => None,
            })
            .collect();
        let stats_after = (*self.spaces[space].tlb_stats(), self.spaces[space].stats());
        let plans = stats_after.0.plans - stats_before.0.plans;
        assert!(plans <= 1, "step {step}: {op:?} issued {plans} flushes");
        let planned = (stats_after.0.planned_tlbis() - stats_before.0.planned_tlbis()) as usize;
        let repeat = if self.caps.errata.repeat_tlbi { 2 } else { 1 };
        assert_eq!(tlbis.len(), planned * repeat, "step {step}: TLBIs outside the issuer");
        // With the repeat-TLBI erratum every instruction comes twice: check the plan once.
        let tlbis: Vec<TlbInstr> = tlbis.iter().step_by(repeat).copied().collect();
        self.ops.tlbis += planned as u64;
        // A remap breaks every old leaf of its range, even one it maps again identically.
        let forced = (replaced.start < replaced.end)
            .then(|| (self.va(space, replaced.start), (replaced.end - replaced.start) * PAGE_SIZE));
        self.check_coverage(space, &before, &after, &tlbis, &op, forced);
        if let Some(true) = expect_promote {
            assert_eq!(planned, 1, "step {step}: a promotion must issue one TLBI: {tlbis:x?}");
            if self.caps.range {
                assert_eq!(tlbis[0].op.kind(), OpKind::Range, "step {step}");
            }
            assert_eq!(stats_after.1.promotions - stats_before.1.promotions, 1);
        }

        // No stale translation near the operation (everywhere, every FULL_EVERY steps).
        if step.is_multiple_of(FULL_EVERY) {
            self.check_all();
        } else if step.is_multiple_of(16) {
            self.check_tlb(None);
        } else {
            self.check_tlb(Some((space, rlo, rlen)));
            let w = self.world.borrow();
            let in_use: u64 = self.spaces.iter().map(|s| s.table().stats().tables_in_use()).sum();
            assert_eq!(w.live_frames() as u64, in_use, "step {step}: table frames leaked or lost");
        }
    }

    fn release_scatter(&mut self, pa: u64, pages: u64) {
        for i in 0..pages {
            self.scatter_free(pa + i * PAGE_SIZE);
        }
    }

    /// The leaves of `snap` (under `[lo, lo + len)`) map exactly what the reference says.
    fn check_reference(&self, space: usize, snap: &Snapshot, lo: u64, len: u64, op: &Op) {
        let step = self.step;
        let first = (lo.wrapping_sub(self.lo(space))) / PAGE_SIZE;
        let n = len / PAGE_SIZE;
        let top = if LAYOUT[space].0 == VaRange::Upper { 0xffff_0000_0000_0000 } else { 0 };
        let mut got: Vec<Option<(u64, Attributes)>> = vec![None; n as usize];
        for l in &snap.leaves {
            let size = level_size(l.level);
            let start = (l.va | top).wrapping_sub(self.lo(space)) as i128 / PAGE_SIZE as i128;
            for k in 0..(size / PAGE_SIZE) as i128 {
                let i = start + k - first as i128;
                if (0..n as i128).contains(&i) {
                    assert!(got[i as usize].is_none(), "step {step}: page mapped twice");
                    got[i as usize] = Some((l.pa + k as u64 * PAGE_SIZE, l.attrs));
                }
            }
        }
        let want = &self.refs[space][first as usize..(first + n) as usize];
        if got != want {
            let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap();
            panic!(
                "step {step}: {op:?}: page {} ({:#x}) is {:x?} in the table, {:x?} in the reference",
                first + i as u64,
                self.va(space, first + i as u64),
                got[i],
                want[i]
            );
        }
    }

    /// The flush of the step covers what changed: see the module documentation.
    fn check_coverage(
        &self,
        space: usize,
        before: &Snapshot,
        after: &Snapshot,
        tlbis: &[TlbInstr],
        op: &Op,
        forced: Option<(u64, u64)>,
    ) {
        let step = self.step;
        let top = if LAYOUT[space].0 == VaRange::Upper { 0xffff_0000_0000_0000 } else { 0 };
        let tag = LAYOUT[space].3;
        let in_forced = |l: &SnapLeaf| {
            forced.is_some_and(|(lo, len)| {
                let (s, e) =
                    (u128::from(l.va | top), u128::from(l.va | top) + u128::from(level_size(l.level)));
                s < u128::from(lo) + u128::from(len) && u128::from(lo) < e
            })
        };
        // Both leaf lists are in address order.
        let kept = |l: &SnapLeaf| {
            after.leaves.binary_search_by_key(&l.va, |a| a.va).is_ok_and(|i| after.leaves[i] == *l)
        };
        let changed: Vec<&SnapLeaf> = before.leaves.iter().filter(|l| !kept(l) || in_forced(l)).collect();
        let mut after_tables = after.tables.clone();
        after_tables.sort_unstable();
        let tables: Vec<&(u32, u64, u64)> =
            before.tables.iter().filter(|t| after_tables.binary_search(t).is_err()).collect();
        if changed.is_empty() && tables.is_empty() {
            assert!(tlbis.is_empty(), "step {step}: {op:?}: TLBIs although nothing changed: {tlbis:x?}");
            return;
        }
        assert!(!tlbis.is_empty(), "step {step}: {op:?}: {} leaves changed, no TLBI", changed.len());
        let invs: Vec<Invalidation> = tlbis.iter().map(|&i| decode(i)).collect();
        let full = invs.iter().any(|i| i.va == VaMatch::All);
        for l in &changed {
            let e = ModelEntry { va: VirtAddr(l.va | top), level: l.level as u8, leaf: true, asid: tag };
            let e_global = ModelEntry { asid: None, ..e };
            assert!(
                invs.iter()
                    .any(|i| i.hits(&e) && (tag.is_none() || !l.attrs.is_global() || i.hits(&e_global))),
                "step {step}: {op:?}: changed leaf {l:x?} not invalidated by {tlbis:x?}"
            );
        }
        for &&(level, va, _) in &tables {
            let e =
                ModelEntry { va: VirtAddr(va | top), level: level as u8, leaf: false, asid: tag.or(Some(0)) };
            assert!(
                invs.iter().any(|i| i.hits(&e)),
                "step {step}: {op:?}: removed table entry at level {level} {va:#x} not invalidated by {tlbis:x?}"
            );
        }
        for i in &invs {
            if i.va != VaMatch::All {
                assert_eq!(
                    i.leaf_only,
                    tables.is_empty(),
                    "step {step}: {op:?}: leaf-only forms iff no table entry was removed: {tlbis:x?}"
                );
            }
        }
        let stride = changed.iter().map(|l| level_size(l.level)).min().unwrap_or(PAGE_SIZE);
        // The hull of the changed leaves, and of the run or block that replaced one: a fold or
        // promotion also breaks the pages the same call had just mapped (the TLB may have cached
        // them in between).
        let mut spans: Vec<(u64, u128)> =
            changed.iter().map(|l| (l.va, u128::from(l.va) + u128::from(level_size(l.level)))).collect();
        for l in &changed {
            let i = after.leaves.partition_point(|a| a.va <= l.va);
            let covering = i.checked_sub(1).map(|i| &after.leaves[i]);
            if let Some(a) = covering.filter(|a| l.va < a.va + level_size(a.level)) {
                let unit = if a.contiguous {
                    level_size(a.level) * CONTIGUOUS_ENTRIES as u64
                } else {
                    level_size(a.level)
                };
                let b = a.va & !(unit - 1);
                spans.push((b, u128::from(b) + u128::from(unit)));
            }
        }
        let lo = (spans.iter().map(|s| s.0).min().unwrap() | top) & !(stride - 1);
        let hi = spans.iter().map(|s| s.1 + u128::from(top)).max().unwrap();
        let hi = hi.div_ceil(u128::from(stride)) * u128::from(stride);
        let steps = (hi - u128::from(lo)) / u128::from(stride);
        if full {
            assert_eq!(invs.len(), 1, "step {step}: a whole flush is alone");
            let pages = (hi - u128::from(lo)) / u128::from(PAGE_SIZE);
            let bound_exceeded = if self.caps.range {
                pages > u128::from(RANGE_BOUND_PAGES)
            } else {
                steps >= u128::from(MAX_DVM_OPS)
            };
            assert!(bound_exceeded, "step {step}: {op:?}: whole flush for {steps} steps: {tlbis:x?}");
            return;
        }
        let mut bounds: Vec<(u128, u128)> = invs.iter().map(|i| i.va_bounds().unwrap()).collect();
        for &(s, e) in &bounds {
            assert!(
                s >= u128::from(lo) && e <= hi,
                "step {step}: {op:?}: TLBI [{s:#x}, {e:#x}) outside [{lo:#x}, {hi:#x})"
            );
        }
        // Range ops may overlap (an overlapping pair can be fewer instructions than any
        // partition); a per-step plan (no range ops) invalidates each step once.
        if !self.caps.range {
            bounds.sort_unstable();
            for w in bounds.windows(2) {
                assert!(w[0].1 <= w[1].0, "step {step}: {op:?}: pages invalidated twice: {tlbis:x?}");
            }
        }
    }

    /// Every model-TLB entry (of `space` near `[lo, hi)`, or all) equals what the tables hold.
    fn check_tlb(&self, only: Option<(usize, u64, u64)>) {
        self.world.borrow().check_tlb(only, self.step);
    }

    /// Everything, everywhere: all TLB entries, every window against its reference, frames.
    fn check_all(&self) {
        self.check_tlb(None);
        let mut reachable = 0;
        for s in 0..self.spaces.len() {
            self.spaces[s].table().check_occupancy();
            let (lo, len) = (self.lo(s), self.pages(s) * PAGE_SIZE);
            let snap = self.snapshot(s, lo, len);
            self.check_reference(s, &snap, lo, len, &Op::Switch { cpu: 0, space: None });
            reachable += 1 + self.count_tables(s);
        }
        let w = self.world.borrow();
        assert_eq!(w.live_frames(), reachable, "step {}: table frames leaked", self.step);
        let in_use: u64 = self.spaces.iter().map(|s| s.table().stats().tables_in_use()).sum();
        assert_eq!(in_use as usize, reachable);
    }

    fn count_tables(&self, space: usize) -> usize {
        fn visit(w: &World, table: u64, level: u32) -> usize {
            let mut n = 0;
            let mut valid = 0;
            for i in 0..ENTRIES_PER_TABLE {
                let d = w.read(table, i);
                assert_eq!(d.bits() & (0b111 << 56), 0, "a staged mark survived the operation");
                if d.is_valid() {
                    valid += 1;
                }
                if level < 3 && d.is_table(level) {
                    n += 1 + visit(w, d.output_address().0, level + 1);
                }
            }
            assert!(level == crate::paging::ROOT_LEVEL || valid > 0, "empty table left in the tree");
            n
        }
        let w = self.world.borrow();
        visit(&w, w.spaces[space].root, crate::paging::ROOT_LEVEL)
    }

    /// Unmaps everything, destroys every space and checks that every frame came back.
    fn teardown(mut self) {
        self.check_all();
        for (s, space) in core::mem::take(&mut self.spaces).into_iter().enumerate() {
            {
                let mut w = self.world.borrow_mut();
                w.spaces[s].dead = true;
                w.cpus.iter_mut().filter(|c| **c == Some(s)).for_each(|c| *c = None);
            }
            let mut handed = 0;
            let _ = space.destroy(|u| handed += u.size / PAGE_SIZE);
            let mapped = self.refs[s].iter().filter(|e| e.is_some()).count() as u64;
            assert_eq!(handed, mapped, "destroy hands back every mapped page");
        }
        assert_eq!(self.world.borrow().live_frames(), 0, "frames leaked at teardown");
    }
}

fn model_ops() -> usize {
    std::env::var("MM_MODEL_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

fn run_random(seed: u64, caps: Caps, ops: usize, faults: Faults) -> Counts {
    let mut h = Harness::new(seed, caps);
    h.world.borrow_mut().faults = faults;
    for _ in 0..ops {
        let op = h.random_op();
        h.apply(op);
    }
    let mut counts = h.ops;
    for sp in &h.spaces {
        let st = sp.stats();
        counts.space.promotions += st.promotions;
        counts.space.demotions += st.demotions;
        counts.space.folds += st.folds;
        counts.space.unfolds += st.unfolds;
        counts.space.flushes += st.flushes;
        counts.space.barriers += st.barriers;
    }
    h.teardown();
    counts
}

const RANGE_CAPS: Caps = Caps { range: true, broadcast: true, errata: Errata::NONE };

/// Runs `share` percent of `MM_MODEL_OPS` with `caps`, printing what ran.
fn model_run(name: &str, seed: u64, caps: Caps, share: usize) -> Counts {
    let n = model_ops() * share / 100;
    let t = std::time::Instant::now();
    let c = run_random(seed, caps, n, Faults::default());
    std::println!("model ({name}): {n} ops in {:?}: {c:?}", t.elapsed());
    assert!(n < 1000 || (c.promoted > 0 && c.demoted > 0 && c.remap > 0 && c.space.folds > 0));
    c
}

#[test]
fn model_random_with_range_tlbi() {
    model_run("FEAT_TLBIRANGE", 0x5eed_0001, RANGE_CAPS, 30);
}

#[test]
fn model_random_with_range_tlbi_2() {
    model_run("FEAT_TLBIRANGE", 0x5eed_0004, RANGE_CAPS, 30);
}

#[test]
fn model_random_without_range_tlbi() {
    model_run("no range", 0x5eed_0002, Caps::BASELINE, 30);
}

#[test]
fn model_random_repeat_tlbi_erratum() {
    let caps = Caps { range: false, broadcast: true, errata: Errata { repeat_tlbi: true } };
    model_run("no range, repeat-TLBI erratum", 0x5eed_0003, caps, 10);
}

/// Runs random operations with a faulty TLB double until the checks fire; returns the panic
/// message (or `None` if nothing was caught).
fn caught(faults: Faults, caps: Caps) -> Option<String> {
    let result = std::panic::catch_unwind(|| {
        let _ = run_random(7, caps, 3000, faults);
    });
    result.err().map(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| String::from(*s)))
            .unwrap_or_default()
    })
}

#[test]
fn model_catches_planted_bugs() {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let cases = [
        ("no flush", Faults { drop_tlbi: true, ..Faults::default() }),
        ("leaf-only forms after removing a table", Faults { leaf_only: true, ..Faults::default() }),
        ("wrong ASID", Faults { wrong_asid: true, ..Faults::default() }),
        ("no DSB after the TLBIs", Faults { no_dsb: true, ..Faults::default() }),
    ];
    let mut report = Vec::new();
    for (name, f) in cases {
        for caps in [RANGE_CAPS, Caps::BASELINE] {
            report.push((name, caps.range, caught(f, caps)));
        }
    }
    std::panic::set_hook(quiet);
    for (name, range, msg) in &report {
        std::println!("{name} (range {range}): {}", msg.as_deref().unwrap_or("NOT CAUGHT"));
        assert!(msg.is_some(), "planted bug not caught: {name}");
    }
}

// ---- directed tests ----------------------------------------------------------------------------

/// The TLBIs issued by `f` on the harness.
fn tlbis_of(h: &mut Harness, f: impl FnOnce(&mut Harness)) -> Vec<TlbInstr> {
    h.world.borrow_mut().events.clear();
    f(h);
    let events = core::mem::take(&mut h.world.borrow_mut().events);
    events
        .into_iter()
        .filter_map(|e| match e {
            Ev::Tlbi(op, operand) => Some(TlbInstr { op, operand }),
            _ => None,
        })
        .collect()
}

/// A 2 MiB promotion under break-before-make is one range TLBI with FEAT_TLBIRANGE
/// (512 per-page TLBIs before). Without it, 512 pages exceed the per-page bound (511): one
/// whole-ASID (user) or whole-TLB (kernel) flush.
#[test]
fn promotion_is_one_tlbi() {
    for (caps, space, want) in [
        (RANGE_CAPS, 1, TlbiOp::Rvae1is),
        (RANGE_CAPS, 0, TlbiOp::Rvaae1is),
        (Caps::BASELINE, 1, TlbiOp::Aside1is),
        (Caps::BASELINE, 0, TlbiOp::Vmalle1is),
    ] {
        let mut h = Harness::new(3, caps);
        // Explicit: a block's pages (512 with 4 KiB pages) mapped in one call as pages, then
        // promote().
        let n = BLOCK_PAGES;
        h.apply(Op::Map { space, page: n, pages: n, scatter: false, attrs: 0, constraints: 6 });
        let va = VirtAddr(h.va(space, n));
        assert_eq!(h.spaces[space].query(va).unwrap().level, 3);
        let before = h.spaces[space].stats();
        let t = tlbis_of(&mut h, |h| assert_eq!(h.spaces[space].promote(va), Ok(true)));
        assert_eq!(t.len(), 1, "{caps:?}: {t:x?}");
        assert_eq!(t[0].op, want);
        if caps.range {
            let inv = decode(t[0]);
            assert_eq!(inv.va_bounds(), Some((u128::from(va.0), u128::from(va.0) + u128::from(BLOCK_2M))));
            assert!(!inv.leaf_only, "the level-3 table was removed: walk-cache entries must go too");
        }
        assert_eq!(h.spaces[space].stats().promotions - before.promotions, 1);
        assert_eq!(h.spaces[space].query(va).unwrap().level, 2);
        assert_eq!(h.spaces[space].promote(va), Ok(false), "already a block");

        // Automatic: single-page faults over a block; the last one promotes (and earlier ones
        // folded contiguous runs: one TLBI each).
        h.apply(Op::Unmap { space, page: 2 * n, pages: n });
        let mut last = Vec::new();
        for p in 0..n {
            last = tlbis_of(&mut h, |h| {
                h.apply(Op::Map {
                    space,
                    page: 2 * n + p,
                    pages: 1,
                    scatter: false,
                    attrs: 0,
                    constraints: 0,
                })
            });
        }
        let st = h.spaces[space].stats();
        assert_eq!(st.promotions - before.promotions, 2);
        // 32, 16 and 256 runs a block with 4, 16 and 64 KiB pages.
        let runs = per_granule(32, 16, 256);
        assert_eq!(BLOCK_PAGES / RUN_PAGES, runs);
        assert_eq!(st.folds, runs - 1, "the last run is promoted with the range instead");
        assert_eq!(last.len(), 1, "{last:x?}");
        assert_eq!(last[0].op, want);
        h.teardown();
    }
}

/// Table frames from the heap for [`figures_per_granule`]: a boxed, granule-aligned
/// [`AlignedTable`](crate::paging::AlignedTable) whose pointer serves as the "physical address"
/// (heap pointers are below 2^48 on the hosts the tests run on; checked). The table is never
/// live, so no TLB is modelled: the host cost of the walks and writes alone.
struct HeapFrames;

// SAFETY: every frame is a fresh, exclusively owned, granule-aligned heap allocation of one
// granule below 2^48 (checked), valid until `deallocate_table` frees it; `table_ptr` returns it.
unsafe impl Translation for HeapFrames {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        // The engine zeroes new tables itself.
        let frame: Box<core::mem::MaybeUninit<crate::paging::AlignedTable>> = Box::new_uninit();
        let pa = Box::into_raw(frame) as u64;
        assert!(pa < 1 << 48, "heap pointer above 2^48 cannot serve as a physical address");
        Some(PhysAddr(pa))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        // SAFETY: `pa` came from `allocate_table` and is handed back once.
        drop(unsafe { Box::from_raw(pa.0 as *mut core::mem::MaybeUninit<crate::paging::AlignedTable>) });
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).expect("frame address 0")
    }
}

/// The per-granule figures of the report, for the granule of the build (run it in each:
/// `cargo test -q -p mm --release --lib [--features granule-16k|granule-64k]
/// figures_per_granule -- --ignored --nocapture`):
/// 1. TLBIs of one promotion (a level-2 block's run of pages, mapped as pages, replaced by the
///    block: 2 MiB with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB with 64 KiB), counted on the
///    model CPU, with and without FEAT_TLBIRANGE, against Linux's count for khugepaged's
///    collapse of the same range (`pmdp_collapse_flush` → `flush_tlb_range(vma, addr, addr +
///    HPAGE_PMD_SIZE)` → arm64 `__flush_tlb_range(.., PAGE_SIZE, last_level = false, ..)`:
///    [`compare::linux_plan_count_in`](crate::tlb::compare::linux_plan_count_in) at a stride of
///    one page) and one TLBI per page; asserts ours ≤ Linux's.
/// 2. Table frames for 1 GiB mapped with pages only (`NO_BLOCKS | NO_CONTIGUOUS`), against the
///    worked-out count: one last-level table per `ENTRIES_PER_TABLE` pages, then one table per
///    level up to the root (4K: 512 + 1 + 1 + 1; 16K: 32 + 1 + 1 + 1; 64K: 2 + 1 + 1); asserted.
/// 3. Host time of mapping then unmapping that 1 GiB one page per call (sequential VAs) and in
///    one call each, the best of 9 runs for each phase, per page and per MiB (informational:
///    never asserted).
#[test]
#[ignore]
fn figures_per_granule() {
    use crate::granule::Granule;
    use crate::tlb::compare::linux_plan_count_in;
    use std::println;
    use std::time::{Duration, Instant};

    let format = crate::granule::Format::BUILD;
    let kib = PAGE_SIZE >> 10;
    println!("granule: {} ({kib} KiB pages, {} entries a table)", format.name(), ENTRIES_PER_TABLE);

    // 1. A promotion's TLBIs.
    let n = BLOCK_PAGES;
    println!(
        "1. promotion of {} MiB ({n} pages -> one level-2 block), user ASID: TLBI instructions",
        BLOCK_2M >> 20
    );
    println!("   FEAT_TLBIRANGE  ours (model CPU)  Linux (flush_tlb_range)  one per page");
    for caps in [RANGE_CAPS, Caps::BASELINE] {
        let mut h = Harness::new(3, caps);
        h.apply(Op::Map { space: 1, page: n, pages: n, scatter: false, attrs: 0, constraints: 6 });
        let va = VirtAddr(h.va(1, n));
        assert_eq!(h.spaces[1].query(va).unwrap().level, 3);
        let t = tlbis_of(&mut h, |h| assert_eq!(h.spaces[1].promote(va), Ok(true)));
        assert_eq!(h.spaces[1].query(va).unwrap().level, 2);
        let linux = linux_plan_count_in(format, va, n, 1, caps.range);
        let ops: Vec<String> = t.iter().map(|i| std::format!("{:?}", i.op)).collect();
        println!(
            "   {:<15} {:>5} ({:<9}) {:>24} {:>13}",
            if caps.range { "yes" } else { "no" },
            t.len(),
            ops.join(" "),
            linux,
            n
        );
        assert!(t.len() as u64 <= linux, "{}: ours {} > Linux's {linux}", format.name(), t.len());
        h.teardown();
    }

    // 2. Page-table memory for 1 GiB of pages.
    const GIB: u64 = 1 << 30;
    const VA: u64 = 0x40_0000_0000; // 1 GiB-aligned (so block- and table-aligned in every granule)
    const PA: u64 = 0x80_0000_0000;
    let pages = GIB / PAGE_SIZE;
    let shift = crate::addr::PAGE_SHIFT;
    let levels = (crate::addr::VA_BITS - shift).div_ceil(shift - 3) as u64;
    let last_level = pages / ENTRIES_PER_TABLE as u64;
    let want = last_level + (levels - 1);
    let worked_out = match format.granule {
        Granule::K4 => 512 + 1 + 1 + 1,
        Granule::K16 => 32 + 1 + 1 + 1,
        Granule::K64 => 2 + 1 + 1,
    };
    assert_eq!(want, worked_out, "the formula against the worked-out count");
    let pages_only = Constraints::NO_BLOCKS.union(Constraints::NO_CONTIGUOUS);
    let attrs = Attributes::user(UserAccess::ReadWrite);
    let mut pt = PageTable::new(HeapFrames, VaRange::Lower).unwrap();
    pt.map(VirtAddr(VA), PhysAddr(PA), GIB, attrs, pages_only).unwrap();
    let tables = pt.stats().tables_in_use();
    println!(
        "2. 1 GiB mapped with {kib} KiB pages only ({pages} pages; NO_BLOCKS | NO_CONTIGUOUS): page-table memory"
    );
    println!(
        "   tables in use {tables} = {} bytes ({:.2} MiB); worked out: {last_level} last-level + {} above (root included) = {want}",
        tables * PAGE_SIZE,
        (tables * PAGE_SIZE) as f64 / (1 << 20) as f64,
        levels - 1
    );
    assert_eq!(tables, want);
    let record = pt.unmap(VirtAddr(VA), GIB).unwrap();
    record.release(pt.translation_mut());
    assert_eq!(pt.stats().tables_in_use(), 1, "only the root is left");
    let (mut frames, record) = pt.destroy();
    record.release(&mut frames);

    // 3. Host throughput: map then unmap 1 GiB one page per call, and in one call each.
    let run = |per_page: bool| -> (Duration, Duration, u64) {
        let mut pt = PageTable::new(HeapFrames, VaRange::Lower).unwrap();
        let step = if per_page { PAGE_SIZE } else { GIB };
        let t0 = Instant::now();
        for off in (0..GIB).step_by(step as usize) {
            pt.map(VirtAddr(VA + off), PhysAddr(PA + off), step, attrs, pages_only).unwrap();
        }
        let map = t0.elapsed();
        let tables = pt.stats().tables_in_use();
        let t1 = Instant::now();
        for off in (0..GIB).step_by(step as usize) {
            let record = pt.unmap(VirtAddr(VA + off), step).unwrap();
            // Never live: no TLB to flush, the frames may go at once.
            record.release(pt.translation_mut());
        }
        let unmap = t1.elapsed();
        assert_eq!(pt.translate(VirtAddr(VA)), None);
        let (mut frames, record) = pt.destroy();
        record.release(&mut frames);
        (map, unmap, tables)
    };
    const RUNS: usize = 9;
    println!(
        "3. host: map then unmap 1 GiB ({pages} pages of {kib} KiB), sequential VAs, best of {RUNS} per phase"
    );
    println!("   calls          map ns/page  unmap ns/page  total ns/page  total us/MiB  tables");
    for (name, per_page) in [("one per page", true), ("one for 1 GiB", false)] {
        // The best of each phase on its own: a run is tens of milliseconds, so one preemption
        // on the loaded host spoils a phase, rarely both.
        let (mut map, mut unmap, mut tables) = (Duration::MAX, Duration::MAX, 0);
        for _ in 0..RUNS {
            let r = run(per_page);
            assert_eq!(r.2, want);
            (map, unmap, tables) = (map.min(r.0), unmap.min(r.1), r.2);
        }
        let per = |d: Duration| d.as_nanos() as f64 / pages as f64;
        println!(
            "   {name:<14} {:>11.1} {:>14.1} {:>14.1} {:>13.1} {tables:>7}",
            per(map),
            per(unmap),
            per(map + unmap),
            (map + unmap).as_nanos() as f64 / 1024.0 / 1000.0
        );
    }
}

#[test]
fn partial_unmap_of_a_live_block_splits_through_bbm() {
    let mut h = Harness::new(4, RANGE_CAPS);
    let n = BLOCK_PAGES;
    h.apply(Op::Map { space: 1, page: n, pages: n, scatter: false, attrs: 0, constraints: 0 });
    let base = h.va(1, n);
    assert_eq!(h.spaces[1].query(VirtAddr(base)).unwrap().level, 2);
    let mut handed = Vec::new();
    let t = tlbis_of(&mut h, |h| {
        h.spaces[1].unmap(VirtAddr(base + 7 * PAGE_SIZE), 3 * PAGE_SIZE, |u| handed.push(u)).unwrap();
    });
    // One op for the one block that changed (stride: the block); leaf-only: no table removed.
    assert_eq!(t.len(), 1, "{t:x?}");
    let inv = decode(t[0]);
    assert!(inv.leaf_only);
    assert_eq!(handed.len(), 1);
    assert_eq!((handed[0].va.0, handed[0].size), (base + 7 * PAGE_SIZE, 3 * PAGE_SIZE));
    assert_eq!(h.spaces[1].stats().demotions, 1);
    // The rest is pages, with the contiguous hint on the runs the unmap did not touch (31 of
    // 32 with 4 KiB pages, 15 of 16 with 16 KiB, 255 of 256 with 64 KiB).
    let leaves: Vec<Leaf> = {
        let mut v = Vec::new();
        h.spaces[1].table().walk(VirtAddr(base), BLOCK_2M, |l| v.push(*l)).unwrap();
        v
    };
    assert_eq!(leaves.len() as u64, n - 3);
    let untouched = per_granule(31, 15, 255);
    assert_eq!(leaves.iter().filter(|l| l.contiguous).count() as u64, untouched * RUN_PAGES);
    for i in 0..n as usize {
        let at = n as usize + i;
        h.refs[1][at] = if (7..10).contains(&i) { None } else { h.refs[1][at] };
    }
    h.check_all();
    h.teardown();
}

#[test]
#[cfg_attr(
    any(feature = "granule-16k", feature = "granule-64k"),
    ignore = "splits a level-1 block, which only the 4 KiB granule has (48-bit addresses)"
)]
fn one_gib_block_splits_and_demotes() {
    let world = Rc::new(RefCell::new(World::new(5)));
    let table = PageTable::new(Mem(world.clone()), VaRange::Upper).unwrap();
    let tlb = TlbIssuer::new(Cpu(world.clone()), Errata::NONE);
    world.borrow_mut().spaces.push(SpaceInfo {
        root: table.root_pa().0,
        asid: None,
        lo: 0xffff_0000_4000_0000,
        pages: 1 << 18,
        dead: false,
    });
    let mut k = AddressSpace::kernel(table, tlb, RANGE_CAPS.features());
    let base = VirtAddr(0xffff_0000_4000_0000);
    k.map(base, PhysAddr(0x4000_0000), BLOCK_1G, Attributes::kernel_data(), Constraints::NONE).unwrap();
    assert_eq!(k.query(base).unwrap().level, 1);
    // Read-only for one page in the middle: 1 GiB -> 2 MiB blocks -> pages, one flush.
    let ro = base.wrapping_add(5 * BLOCK_2M + 3 * PAGE_SIZE);
    k.protect(ro, PAGE_SIZE, Attributes::kernel_rodata()).unwrap();
    assert_eq!(k.stats().demotions, 2);
    assert_eq!(k.tlb_stats().plans, 1);
    assert_eq!(k.query(ro).unwrap().attrs, Attributes::kernel_rodata());
    assert_eq!(k.query(ro.wrapping_add(PAGE_SIZE)).unwrap().attrs, Attributes::kernel_data());
    assert_eq!(k.query(base).unwrap().level, 2);
    assert_eq!(
        k.translate(ro.wrapping_add(0x123 * PAGE_SIZE)),
        Some(PhysAddr(0x4000_0000 + 5 * BLOCK_2M + 0x126 * PAGE_SIZE))
    );
    // Explicit demotion of a 2 MiB block: 512 plain pages; of a page in a run: the run unfolds.
    assert_eq!(k.demote(base), Ok(true));
    assert_eq!(k.query(base).unwrap().level, 3);
    assert!(!k.query(base).unwrap().contiguous);
    let in_run = base.wrapping_add(5 * BLOCK_2M + 100 * PAGE_SIZE);
    assert!(k.query(in_run).unwrap().contiguous);
    assert_eq!(k.demote(in_run), Ok(true));
    assert!(!k.query(in_run).unwrap().contiguous);
    assert_eq!(k.stats().unfolds, 1);
    assert_eq!(k.demote(in_run), Ok(false));
    assert_eq!(k.demote(VirtAddr(0)), Err(MapError::InvalidRange));
    world.borrow().check_tlb(None, 0);
    // The 2 MiB blocks the first split left form contiguous runs of 16 (32 MiB): demoting one
    // block of a run splits it and unfolds the run; unmapping across a run boundary cuts two.
    let block20 = base.wrapping_add(20 * BLOCK_2M);
    assert!(k.query(block20).unwrap().contiguous && k.query(block20).unwrap().level == 2);
    world.borrow_mut().touch_random(64);
    assert_eq!(k.demote(block20.wrapping_add(PAGE_SIZE)), Ok(true));
    world.borrow().check_tlb(None, 1);
    assert_eq!(k.query(block20).unwrap().level, 3);
    assert!(!k.query(base.wrapping_add(17 * BLOCK_2M)).unwrap().contiguous);
    assert!(k.query(base.wrapping_add(33 * BLOCK_2M)).unwrap().contiguous);
    world.borrow_mut().touch_random(64);
    let cut = base.wrapping_add(47 * BLOCK_2M + 5 * PAGE_SIZE);
    let mut handed = 0;
    k.unmap(cut, BLOCK_2M + 2 * BLOCK_2M, |u| handed += u.size).unwrap();
    assert_eq!(handed, 3 * BLOCK_2M);
    world.borrow().check_tlb(None, 2);
    assert!(!k.query(base.wrapping_add(40 * BLOCK_2M)).unwrap().contiguous);
    assert!(!k.query(base.wrapping_add(55 * BLOCK_2M)).unwrap().contiguous);
    assert!(k.query(base.wrapping_add(64 * BLOCK_2M)).unwrap().contiguous);
    assert_eq!(k.translate(cut), None);
    assert_eq!(
        k.translate(VirtAddr(cut.0 - PAGE_SIZE)),
        Some(PhysAddr(0x4000_0000 + 47 * BLOCK_2M + 4 * PAGE_SIZE))
    );
    assert_eq!(k.tlb_stats().plans, k.stats().flushes);
    let mut pages = 0;
    world.borrow_mut().spaces[0].dead = true;
    let _ = k.destroy(|u| pages += u.size / PAGE_SIZE);
    assert_eq!(pages, (BLOCK_1G - 3 * BLOCK_2M) / PAGE_SIZE);
    assert_eq!(world.borrow().live_frames(), 0);
}

#[test]
fn one_flush_per_call_and_memory_type_changes() {
    let mut h = Harness::new(6, RANGE_CAPS);
    // Many mappings, with holes, several tables: one unmap, one flush.
    for p in (0..2048).step_by(37) {
        h.apply(Op::Map { space: 2, page: p, pages: 5, scatter: true, attrs: 1, constraints: 0 });
    }
    let plans = h.spaces[2].tlb_stats().plans;
    h.apply(Op::Unmap { space: 2, page: 0, pages: 2048 });
    assert_eq!(h.spaces[2].tlb_stats().plans, plans + 1);
    // A memory-type change is break-before-make; a permission change is in place.
    h.apply(Op::Map { space: 1, page: 0, pages: 64, scatter: false, attrs: 0, constraints: 7 });
    let t = tlbis_of(&mut h, |h| h.apply(Op::MemType { space: 1, page: 0, pages: 64, memory: 1 }));
    assert_eq!(t.len(), 1);
    assert_eq!(
        h.spaces[1].query(VirtAddr(h.va(1, 3))).unwrap().attrs.memory_type(),
        MemoryType::NormalNonCacheable
    );
    // (From page 16: on the 64 KiB grid where LPA2's `DS` starts range ops, with 4 KiB pages.)
    let t = tlbis_of(&mut h, |h| h.apply(Op::Protect { space: 1, page: 16, pages: 4, attrs: 2 }));
    assert_eq!(t.len(), 1);
    assert!(decode(t[0]).leaf_only);
    h.teardown();
}

#[test]
fn failed_operations_change_nothing() {
    let mut h = Harness::new(8, RANGE_CAPS);
    let n = BLOCK_PAGES;
    h.apply(Op::Map { space: 1, page: n, pages: n, scatter: false, attrs: 0, constraints: 0 });
    h.apply(Op::Map { space: 1, page: 100, pages: 10, scatter: false, attrs: 0, constraints: 0 });
    let va = VirtAddr(h.va(1, n + 88));
    let frames = h.world.borrow().live_frames();
    h.world.borrow_mut().fail_after = Some(0);
    // A split needs a table frame.
    assert_eq!(h.spaces[1].unmap(va, PAGE_SIZE, |_| panic!("nothing unmapped")), Err(MapError::OutOfMemory));
    assert_eq!(h.spaces[1].demote(va), Err(MapError::OutOfMemory));
    let r = h.spaces[1].remap(
        va,
        PhysAddr(0x1_0000_0000),
        PAGE_SIZE,
        Attributes::kernel_data(),
        Constraints::NONE,
        |_| panic!("nothing unmapped"),
    );
    assert_eq!(r, Err(MapError::OutOfMemory));
    assert_eq!(h.spaces[1].stats().flushes, 0);
    h.world.borrow_mut().fail_after = None;
    assert_eq!(h.world.borrow().live_frames(), frames);
    assert_eq!(h.spaces[1].query(va).unwrap().level, 2);
    h.check_all();
    // Errors for bad arguments.
    let odd = VirtAddr(h.va(1, 1));
    assert_eq!(h.spaces[1].promote(odd), Err(MapError::Misaligned));
    assert_eq!(h.spaces[1].unmap(VirtAddr(1 << 60), PAGE_SIZE, |_| {}), Err(MapError::InvalidRange));
    h.teardown();
}

/// A one-page remap (a copy-on-write fault's) reserves a table frame only where its unmap empties
/// the page's last-level table: alone in its table, the page's remap fails with nothing changed
/// when no frame can be had; beside another page, it needs none and completes.
#[test]
fn one_page_remap_reserves_only_the_table_its_unmap_frees() {
    fn remap_alone_without_frames() -> Result<(), MapError> {
        let mut h = Harness::new(8, RANGE_CAPS);
        h.apply(Op::Map { space: 1, page: 100, pages: 1, scatter: false, attrs: 0, constraints: 0 });
        let va = VirtAddr(h.va(1, 100));
        let (before, frames) = (h.spaces[1].query(va).unwrap(), h.world.borrow().live_frames());
        h.world.borrow_mut().fail_after = Some(0);
        // The same page again (what the harness's reference holds), by break-before-make.
        let r = h.spaces[1].remap(va, before.pa, PAGE_SIZE, before.attrs, Constraints::NONE, |_| {});
        h.world.borrow_mut().fail_after = None;
        if r.is_err() {
            assert_eq!(h.spaces[1].stats().flushes, 0);
            assert_eq!(h.spaces[1].query(va), Some(before));
            assert_eq!(h.world.borrow().live_frames(), frames);
        }
        h.check_all();
        h.teardown();
        r
    }
    assert_eq!(remap_alone_without_frames(), Err(MapError::OutOfMemory));
    let planted = std::panic::catch_unwind(|| {
        crate::tlb::mutation::with(
            crate::tlb::mutation::Mutation::RemapBoundIgnoresEmptiedTable,
            remap_alone_without_frames,
        )
    });
    assert!(
        !matches!(planted, Ok(Err(MapError::OutOfMemory))),
        "the planted bound was not caught: {planted:?}"
    );
    // Beside another page: no frame needed.
    let mut h = Harness::new(8, RANGE_CAPS);
    h.apply(Op::Map { space: 1, page: 100, pages: 2, scatter: false, attrs: 0, constraints: 0 });
    let va = VirtAddr(h.va(1, 100));
    let before = h.spaces[1].query(va).unwrap();
    h.world.borrow_mut().fail_after = Some(0);
    let r = h.spaces[1].remap(va, before.pa, PAGE_SIZE, before.attrs, Constraints::NONE, |_| {});
    h.world.borrow_mut().fail_after = None;
    assert_eq!(r, Ok(()));
    assert_eq!(h.spaces[1].stats().flushes, 1, "the replacement was made, with its flush");
    h.check_all();
    h.teardown();
}

/// The unflushed access to the table (for tests that want a stale TLB entry) is no way around
/// break-before-make: the table stays live and the engine refuses what needs it, with nothing
/// changed and nothing issued.
#[test]
fn unflushed_table_access_still_refuses_break_before_make() {
    let mut h = Harness::new(9, RANGE_CAPS);
    let n = BLOCK_PAGES;
    h.apply(Op::Map { space: 0, page: n, pages: n, scatter: false, attrs: 0, constraints: 0 });
    let va = VirtAddr(h.va(0, n));
    assert_eq!(h.spaces[0].query(va).unwrap().level, 2);
    let t = tlbis_of(&mut h, |h| {
        // SAFETY: every change below is refused, so there is nothing to invalidate.
        let pt = unsafe { h.spaces[0].table_mut_unflushed() };
        assert!(pt.is_live());
        assert!(matches!(pt.unmap(va, PAGE_SIZE), Err(MapError::BreakBeforeMakeRequired(_))));
        let to_device = pt.protect(va, BLOCK_2M, Attributes::device());
        assert!(matches!(to_device, Err(MapError::BreakBeforeMakeRequired(_))));
    });
    assert!(t.is_empty(), "{t:x?}");
    assert_eq!(h.spaces[0].query(va).unwrap().level, 2);
    h.check_all();
    h.teardown();
}

fn op_from_raw((kind, space, a, b, c): (u8, u8, u16, u16, u8)) -> Op {
    let space = usize::from(space) % LAYOUT.len();
    let total = LAYOUT[space].2;
    let page = u64::from(a) % total;
    let pages = (u64::from(b) % 600 + 1).min(total - page);
    match kind % 10 {
        0..=3 => Op::Map { space, page, pages, scatter: c & 1 == 0, attrs: c, constraints: c >> 4 },
        4 => Op::Unmap { space, page, pages },
        5 => Op::Protect { space, page, pages, attrs: c },
        6 => Op::MemType { space, page, pages, memory: c },
        7 => Op::Remap { space, page, pages, scatter: c & 1 == 0, attrs: c },
        8 => Op::Promote { space, region: page / BLOCK_PAGES },
        _ if c & 3 == 0 => {
            Op::Switch { cpu: usize::from(c >> 2) & 1, space: Some(1 + usize::from(c >> 3) % 3) }
        }
        _ => Op::Demote { space, page },
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: crate::test_support::proptest_cases(24), ..proptest::prelude::ProptestConfig::default() })]

    /// The same checks on shrinkable sequences (the seeded loops above run the long ones).
    #[test]
    fn model_proptest(
        raw in proptest::collection::vec(proptest::prelude::any::<(u8, u8, u16, u16, u8)>(), 1..80),
        range in proptest::prelude::any::<bool>(),
    ) {
        let caps = if range { RANGE_CAPS } else { Caps::BASELINE };
        let mut h = Harness::new(raw.len() as u64, caps);
        for r in raw {
            h.apply(op_from_raw(r));
        }
        h.teardown();
    }
}
