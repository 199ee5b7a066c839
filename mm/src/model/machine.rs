//! The simulated machine: emulated physical memory (table and data frames, each known to be
//! allocated or free), N CPUs each with a TLB of leaf entries and a walk cache of table entries,
//! the ASID allocator under test, and the processes and threads the CPUs run.
//!
//! Every CPU walks the tables itself, from its own TTBR0 (the root of the process it runs and
//! the ASID `switch_to` gave it), starting at the deepest walk-cache entry that covers the
//! address, and caches everything it reads. Entries leave a TLB only when a TLBI that the Arm
//! rules say removes them ([`crate::tlb::model::decode`]) has *completed* on that CPU: a local
//! (non-shareable) TLBI is completed by a `DSB NSH` or `DSB ISH` of the issuing CPU and acts on
//! that CPU only; a broadcast (`…IS`) TLBI acts on every CPU and is completed only by a
//! `DSB ISH` of the issuing CPU.

use core::ptr::NonNull;
use std::boxed::Box;
use std::collections::HashSet;
use std::format;
use std::string::String;
use std::vec::Vec;

use super::Rng;
use crate::addr::{PAGE_SIZE, VirtAddr};
use crate::asid::{AsidAllocator, AsidContext, BITMAP_WORDS_8BIT};
use crate::descriptor::{Attributes, CONTIGUOUS_ENTRIES, Descriptor, DescriptorKind, level_size};
use crate::paging::ENTRIES_PER_TABLE;
use crate::tlb::model::{Invalidation, decode};
use crate::tlb::{FlushTarget, TlbInstr, TlbiOp};

/// Physical address of the first table frame.
pub(super) const TABLE_BASE: u64 = 0x40_0000_0000;
/// Physical base of the processes' data-frame mirrors (see [`Machine::alloc_data`]).
pub(super) const DATA_BASE: u64 = 0x80_0000_0000;
/// Physical base of the other data frames.
const POOL_BASE: u64 = 0xc0_0000_0000;
/// The shared zero region: pages that every process may map read-only at once (one at a time,
/// or a whole 64 KiB run or 2 MiB block of them), never allocated from the data frames and
/// never freed.
pub(super) const ZERO_FRAME: u64 = 0x100_0000_0000;
/// Bytes of the zero region: 2 MiB, as the kernel's (a 4 KiB-page block, a 16 or 64 KiB-page
/// contiguous run).
pub(super) const ZERO_LEN: u64 = 2 << 20;

/// Whether `pa` is a page of the shared zero region.
pub(super) const fn is_zero(pa: u64) -> bool {
    pa.wrapping_sub(ZERO_FRAME) < ZERO_LEN
}
/// Entries one CPU's TLB and walk cache hold together; a random one is evicted beyond.
const TLB_CAPACITY: usize = 160;

/// What a cached entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A leaf: the output address of its first byte, its attributes and contiguous hint.
    Leaf { pa: u64, attrs: Attributes, contiguous: bool },
    /// A table descriptor: the next-level table frame.
    Table { next: u64 },
}

/// One TLB or walk-cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    /// First VA it translates (a whole 64 KiB run for a contiguous page).
    pub(super) va: u64,
    /// Bytes of VA it covers.
    pub(super) size: u64,
    /// Level of the descriptor it caches.
    pub(super) level: u8,
    /// ASID tag (`None`: global).
    pub(super) tag: Option<u16>,
    pub(super) kind: Kind,
    /// The process whose walk filled it (for the reports only: the checks judge an entry by
    /// its tag, as the hardware does).
    pub(super) filled_by: usize,
    /// The process (by [`Proc::uid`]) it was last found to agree with, if the tables it depends
    /// on have not changed since (see [`Machine::check_all`]).
    pub(super) agreed: Option<u64>,
}

impl Entry {
    pub(super) fn is_leaf(&self) -> bool {
        matches!(self.kind, Kind::Leaf { .. })
    }

    pub(super) fn covers(&self, va: u64) -> bool {
        va.wrapping_sub(self.va) < self.size
    }

    pub(super) fn overlaps(&self, va: u64, size: u64) -> bool {
        let (s, e) = (u128::from(self.va), u128::from(self.va) + u128::from(self.size));
        let (vs, ve) = (u128::from(va), u128::from(va) + u128::from(size));
        s < ve && vs < e
    }

    /// Whether the completed invalidation removes the entry. A contiguous entry stands for 16
    /// descriptors that differ only in their VA: it is hit if the op hits any of them, so the
    /// one tested is the first that overlaps the op's range.
    fn hit_by(&self, inv: &Invalidation) -> bool {
        crate::test_support::entry_hit_by(inv, self.va, self.size, self.level, self.is_leaf(), self.tag)
    }
}

/// The ASID allocator under test, for the CPU counts the model runs (its CPU count is a
/// compile-time parameter).
pub(super) enum Alloc {
    Two(AsidAllocator<2, BITMAP_WORDS_8BIT>),
    Three(AsidAllocator<3, BITMAP_WORDS_8BIT>),
    Four(AsidAllocator<4, BITMAP_WORDS_8BIT>),
}

macro_rules! each {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            Alloc::Two($a) => $e,
            Alloc::Three($a) => $e,
            Alloc::Four($a) => $e,
        }
    };
}

impl Alloc {
    pub(super) fn new(cpus: usize, bits: u32) -> Self {
        match cpus {
            2 => Alloc::Two(AsidAllocator::new(bits)),
            3 => Alloc::Three(AsidAllocator::new(bits)),
            4 => Alloc::Four(AsidAllocator::new(bits)),
            _ => panic!("the model runs 2 to 4 CPUs"),
        }
    }
    pub(super) fn switch_to(&mut self, ctx: &mut AsidContext, cpu: usize) -> (u16, bool) {
        each!(self, a => a.switch_to(ctx, cpu))
    }
    pub(super) fn flush_pending(&self, cpu: usize) -> bool {
        each!(self, a => a.flush_pending(cpu))
    }
    pub(super) fn is_current(&self, ctx: &AsidContext) -> bool {
        each!(self, a => a.is_current(ctx))
    }
    pub(super) fn rollovers(&self) -> u64 {
        each!(self, a => a.rollovers())
    }
    pub(super) fn flush_target(&self, ctx: &AsidContext, cpu: usize) -> FlushTarget {
        each!(self, a => a.flush_target(ctx, cpu))
    }
}

/// Which page of which shared object a page-cache frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CachePage {
    /// The driver's number for the object (0: the memfd, then the files).
    pub(super) object: usize,
    /// Page offset in the object.
    pub(super) index: u64,
}

/// One object-backed range of a process: `[start, end)` maps `object` from page `first` on.
#[derive(Clone, Copy, Debug)]
pub(super) struct ObjectRange {
    pub(super) object: usize,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) first: u64,
}

impl ObjectRange {
    /// The VA at which this range maps object page `index`, if it does.
    pub(super) fn va_of(&self, index: u64) -> Option<u64> {
        let va = self.start.checked_add(index.checked_sub(self.first)?.checked_mul(PAGE_SIZE)?)?;
        (va < self.end).then_some(va)
    }
}

/// One simulated CPU.
#[derive(Default)]
pub(super) struct Cpu {
    /// The thread it runs `(process, thread)`; `None`: idle on the reserved TTBR0 (no walks).
    pub(super) thread: Option<(usize, usize)>,
    /// The ASID in its TTBR0 (meaningful while `thread` is set).
    pub(super) asid: u16,
    /// Its TLB and walk cache.
    pub(super) tlb: Vec<Entry>,
    /// TLBIs it issued that no DSB has completed yet, with whether they are broadcast.
    pub(super) issued: Vec<(Invalidation, bool)>,
}

/// A process: its table root, the window its threads touch, and its ASID context.
pub(super) struct Proc {
    /// Unique over the run (a slot's next process gets a new one).
    pub(super) uid: u64,
    pub(super) root: u64,
    pub(super) lo: u64,
    pub(super) pages: u64,
    pub(super) ctx: AsidContext,
    pub(super) threads: usize,
    pub(super) alive: bool,
}

/// Counters of a run, for the report.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub(super) walks: u64,
    pub(super) hits: u64,
    pub(super) tlbis: u64,
    pub(super) local_tlbis: u64,
    pub(super) rollover_flushes: u64,
    pub(super) switches: u64,
    pub(super) mid_op_switches: u64,
}

pub(super) struct Machine {
    tables: Vec<NonNull<[u64; ENTRIES_PER_TABLE]>>,
    table_live: Vec<bool>,
    table_free: Vec<usize>,
    /// Data frames currently allocated.
    pub(super) data_live: HashSet<u64>,
    /// References to a data frame beyond the first (frames shared by fork, and page-cache frames
    /// held by the cache and by each mapping).
    pub(super) data_refs: std::collections::HashMap<u64, u32>,
    /// The frames that a shared object (a memfd's or a file's page cache) dropped from its pages
    /// (a shrink) and that are not freed yet, with the page each was: each is freed by its last
    /// mapper (see [`Machine::free_data`]).
    pub(super) cache_frames: std::collections::HashMap<u64, CachePage>,
    /// The object-backed ranges of each process slot, as the driver last copied them (only
    /// their pages can map a page-cache frame).
    pub(super) object_ranges: Vec<Vec<ObjectRange>>,
    /// Page-cache frames freed (their last reference gone), for the report.
    pub(super) cache_frees: u64,
    /// Frames freed early by a planted bug ([`Machine::force_free`]), with the frees of their
    /// remaining holders still to come (ignored).
    absorbed: std::collections::HashMap<u64, u32>,
    /// While set, the executing CPU's TLBIs are dropped, not issued (a planted bug: a flush
    /// skipped).
    pub(super) drop_tlbis: bool,
    /// Where the next data frame goes: `(slot, page)` (see [`Machine::alloc_data`]).
    pub(super) cursor: Option<(usize, u64)>,
    pool_next: u64,
    pool_free: Vec<u64>,
    pub(super) cpus: Vec<Cpu>,
    /// The CPU executing the code under test (whose TLBIs and barriers the hardware calls are).
    pub(super) current: usize,
    pub(super) alloc: Alloc,
    pub(super) procs: Vec<Proc>,
    pub(super) rng: Rng,
    /// `(process, first VA, length)` of the operation in progress: walks favour it.
    pub(super) hot: Option<(usize, u64, u64)>,
    /// The process whose operation is in progress (its thread on `current` must keep running).
    pub(super) in_op: Option<usize>,
    /// Whether walks at random moments may also switch threads on the other CPUs, and
    /// whether that may schedule the operating process itself on another CPU (only sound when
    /// the reach of each flush is decided at the flush, after the table writes).
    pub(super) mid_op_switches: bool,
    pub(super) mid_op_same_process: bool,
    /// A flush target decided before the operation in progress, used instead of asking at the
    /// flush (see `ModelTargets`).
    pub(super) decided: Option<FlushTarget>,
    pub(super) violations: Vec<String>,
    pub(super) counts: Counts,
}

impl Drop for Machine {
    fn drop(&mut self) {
        for f in self.tables.drain(..) {
            // SAFETY: every pointer came from `Box::into_raw` and is dropped once.
            drop(unsafe { Box::from_raw(f.as_ptr()) });
        }
    }
}

impl Machine {
    pub(super) fn new(cpus: usize, asid_bits: u32, seed: u64) -> Self {
        Self {
            tables: Vec::new(),
            table_live: Vec::new(),
            table_free: Vec::new(),
            data_live: HashSet::new(),
            data_refs: std::collections::HashMap::new(),
            cache_frames: std::collections::HashMap::new(),
            object_ranges: Vec::new(),
            cache_frees: 0,
            absorbed: std::collections::HashMap::new(),
            drop_tlbis: false,
            cursor: None,
            pool_next: 0,
            pool_free: Vec::new(),
            cpus: (0..cpus).map(|_| Cpu::default()).collect(),
            current: 0,
            alloc: Alloc::new(cpus, asid_bits),
            procs: Vec::new(),
            rng: Rng(seed),
            hot: None,
            in_op: None,
            mid_op_switches: false,
            mid_op_same_process: false,
            decided: None,
            violations: Vec::new(),
            counts: Counts::default(),
        }
    }

    pub(super) fn violation(&mut self, msg: String) {
        if self.violations.len() < 16 {
            self.violations.push(msg);
        }
    }

    // ---- physical memory ------------------------------------------------------------------

    fn table_index(&self, pa: u64) -> Option<usize> {
        if pa < TABLE_BASE || !pa.is_multiple_of(PAGE_SIZE) {
            return None;
        }
        let i = ((pa - TABLE_BASE) / PAGE_SIZE) as usize;
        (i < self.tables.len() && self.table_live[i]).then_some(i)
    }

    /// Whether `pa` is an allocated table frame.
    pub(super) fn is_table(&self, pa: u64) -> bool {
        self.table_index(pa).is_some()
    }

    /// The frame behind an allocated table (the code under test's view).
    pub(super) fn table_ptr(&self, pa: u64) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        match self.table_index(pa) {
            Some(i) => self.tables[i],
            None => panic!("the code under test reached table frame {pa:#x}, which is not allocated"),
        }
    }

    /// Reads a descriptor of an allocated table frame, `None` if the frame is not one.
    pub(super) fn read(&self, table: u64, index: usize) -> Option<Descriptor> {
        let f = self.tables[self.table_index(table)?];
        // SAFETY: the frame is allocated, `index < ENTRIES_PER_TABLE`, and no reference to it is live (the
        // code under test holds raw pointers only between its own accesses).
        Some(Descriptor::from_bits(unsafe { f.cast::<u64>().as_ptr().add(index).read_volatile() }))
    }

    /// A table frame, most recently freed first (so that a stale pointer meets a reused frame).
    pub(super) fn alloc_table(&mut self) -> u64 {
        let i = match self.table_free.pop() {
            Some(i) => i,
            None => {
                self.tables.push(NonNull::new(Box::into_raw(Box::new([0u64; ENTRIES_PER_TABLE]))).unwrap());
                self.table_live.push(false);
                self.tables.len() - 1
            }
        };
        self.table_live[i] = true;
        // Poison: every word a valid descriptor, so a missing zeroing shows.
        // SAFETY: the frame is allocated and no reference to it exists.
        unsafe { self.tables[i].as_ptr().write([u64::MAX; ENTRIES_PER_TABLE]) };
        TABLE_BASE + i as u64 * PAGE_SIZE
    }

    /// Frees a table frame after checking that no CPU can still walk through it.
    pub(super) fn free_table(&mut self, pa: u64) {
        let Some(i) = self.table_index(pa) else {
            panic!("table frame {pa:#x} freed twice or never allocated");
        };
        self.check_frame_unreachable(pa, PAGE_SIZE, true);
        // Poison with table descriptors pointing at the frame itself.
        // SAFETY: the frame is still allocated (checked above) and no reference to it exists.
        unsafe { self.tables[i].as_ptr().write([pa | 0b11; ENTRIES_PER_TABLE]) };
        self.table_live[i] = false;
        self.table_free.push(i);
    }

    /// A data frame for the code under test. The frame allocator knows nothing of addresses, but
    /// the driver says which page is about to be faulted in (`cursor`): the frame is that page's
    /// own frame in the process's physical mirror (page `i` of slot `s` at
    /// `DATA_BASE + (s * pages + i) * 4 KiB`), the cursor moving to the next page not yet
    /// present, so that faults in address order (a populate) get contiguous frames and can be
    /// promoted. Without a cursor, or if that frame is taken, one from the pool (the most
    /// recently freed first).
    pub(super) fn alloc_data(&mut self) -> u64 {
        if let Some((slot, page)) = self.cursor {
            let (lo, pages) = (self.procs[slot].lo, self.procs[slot].pages);
            let mut p = page;
            while p < pages && self.present(slot, lo + p * PAGE_SIZE) {
                p += 1;
            }
            self.cursor = Some((slot, p + 1));
            let pa = DATA_BASE + (slot as u64 * pages + p) * PAGE_SIZE;
            if p < pages && self.data_live.insert(pa) {
                return pa;
            }
        }
        let pa = self.pool_free.pop().unwrap_or_else(|| {
            self.pool_next += PAGE_SIZE;
            POOL_BASE + self.pool_next - PAGE_SIZE
        });
        assert!(self.data_live.insert(pa), "pool frame {pa:#x} allocated twice");
        pa
    }

    /// Whether `va` is mapped in the current tables of the process in `slot`.
    fn present(&self, slot: usize, va: u64) -> bool {
        self.translate(slot, va).is_some()
    }

    /// The frame that `va` maps to in the current tables of the process in `slot`, and the leaf
    /// descriptor that maps it.
    pub(super) fn translate(&self, slot: usize, va: u64) -> Option<(u64, Descriptor)> {
        let mut table = self.procs[slot].root;
        for level in crate::paging::ROOT_LEVEL..4 {
            let d = self.read(table, VirtAddr(va).table_index(level))?;
            if d.is_table(level) && level < 3 {
                table = d.output_address().0;
            } else if d.is_leaf(level) {
                let size = level_size(level);
                return Some((d.output_address().0 + (va & (size - 1) & !(PAGE_SIZE - 1)), d));
            } else {
                return None;
            }
        }
        None
    }

    /// Frees a data frame after checking that no CPU can still reach it, and for a page-cache
    /// frame also that no live process's tables still map it.
    pub(super) fn free_data(&mut self, pa: u64) {
        self.check_frame_unreachable(pa, PAGE_SIZE, false);
        if let Some(page) = self.cache_frames.remove(&pa) {
            self.cache_frees += 1;
            self.check_cache_frame_unmapped(pa, page);
        }
        assert!(self.data_live.remove(&pa), "data frame {pa:#x} freed twice or never allocated");
        if pa >= POOL_BASE {
            self.pool_free.push(pa);
        }
    }

    /// A planted bug: frees `pa` now, whatever references remain (a page cache that counts its
    /// mappings as one); the remaining holders' frees are then ignored.
    pub(super) fn force_free(&mut self, pa: u64) {
        if !self.data_live.contains(&pa) {
            return;
        }
        let holders = 1 + self.data_refs.remove(&pa).unwrap_or(0);
        self.free_data(pa);
        // Not reused while its holders still have it (the run ends at the violation anyway).
        self.pool_free.retain(|&f| f != pa);
        self.absorbed.insert(pa, holders);
    }

    /// Whether a free of `pa` is one that [`force_free`](Self::force_free) already made.
    pub(super) fn absorb_free(&mut self, pa: u64) -> bool {
        let Some(n) = self.absorbed.get_mut(&pa) else { return false };
        *n -= 1;
        if *n == 0 {
            self.absorbed.remove(&pa);
        }
        true
    }

    // ---- TLB maintenance ------------------------------------------------------------------

    /// `TLBI` on the current CPU: pending until a DSB completes it.
    pub(super) fn tlbi(&mut self, op: TlbiOp, operand: u64) {
        if self.drop_tlbis {
            return;
        }
        let broadcast = op.is_broadcast();
        self.counts.tlbis += 1;
        if !broadcast {
            self.counts.local_tlbis += 1;
        }
        let cpu = self.current;
        self.cpus[cpu].issued.push((decode(TlbInstr { op, operand }), broadcast));
    }

    /// A DSB on the current CPU: completes its local TLBIs, and its broadcast ones too when
    /// `inner_shareable`.
    pub(super) fn dsb(&mut self, inner_shareable: bool) {
        let cpu = self.current;
        let issued = core::mem::take(&mut self.cpus[cpu].issued);
        let (done, kept): (Vec<_>, Vec<_>) = issued.into_iter().partition(|&(_, b)| inner_shareable || !b);
        self.cpus[cpu].issued = kept;
        for (inv, broadcast) in done {
            for c in 0..self.cpus.len() {
                if broadcast || c == cpu {
                    self.cpus[c].tlb.retain(|e| !e.hit_by(&inv));
                }
            }
        }
    }

    // ---- walks ----------------------------------------------------------------------------

    /// A memory access (or a speculative walk) by `cpu` to `va` under its TTBR0: a TLB hit
    /// usually, else a walk from the deepest walk-cache entry, caching what it reads.
    pub(super) fn walk(&mut self, cpu: usize, va: u64) {
        let Some((p, _)) = self.cpus[cpu].thread else { return };
        let asid = self.cpus[cpu].asid;
        let va = va & !(PAGE_SIZE - 1);
        self.counts.walks += 1;
        let tag_ok = |t: Option<u16>| t.is_none() || t == Some(asid);
        let hit = self.cpus[cpu].tlb.iter().position(|e| e.is_leaf() && e.covers(va) && tag_ok(e.tag));
        // A hit, usually; but another TLB structure (instruction side, another level) may still
        // walk, which is how a missing break-before-make ends in a conflict.
        if let Some(i) = hit
            && !self.rng.chance(20)
        {
            self.counts.hits += 1;
            let e = self.cpus[cpu].tlb[i];
            if let Kind::Leaf { pa, .. } = e.kind {
                let frame = pa + (va - e.va);
                if !is_zero(frame) && !self.data_live.contains(&frame) {
                    self.violation(format!(
                        "CPU {cpu} (ASID {asid}) accessed freed data frame {frame:#x} at VA {va:#x} \
                         through cached {e:x?}"
                    ));
                }
            }
            return;
        }
        let mut start = (crate::paging::ROOT_LEVEL, self.procs[p].root, false);
        for e in &self.cpus[cpu].tlb {
            if let Kind::Table { next } = e.kind
                && e.covers(va)
                && e.tag == Some(asid)
                && u32::from(e.level) + 1 > start.0
            {
                start = (u32::from(e.level) + 1, next, true);
            }
        }
        let (mut level, mut table, cached) = start;
        if cached && !self.is_table(table) {
            self.violation(format!(
                "CPU {cpu} (ASID {asid}) walks VA {va:#x} through freed table frame {table:#x} \
                 (a cached level-{} table entry)",
                level - 1
            ));
            return;
        }
        loop {
            let Some(d) = self.read(table, VirtAddr(va).table_index(level)) else {
                self.violation(format!("CPU {cpu} walks VA {va:#x} through non-table frame {table:#x}"));
                return;
            };
            let size = level_size(level);
            match d.kind(level) {
                DescriptorKind::Table => {
                    let next = d.output_address().0;
                    let e = Entry {
                        va: va & !(size - 1),
                        size,
                        level: level as u8,
                        tag: Some(asid),
                        kind: Kind::Table { next },
                        filled_by: p,
                        agreed: None,
                    };
                    self.insert(cpu, e);
                    table = next;
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
                    let e = Entry {
                        va: va & !(span - 1),
                        size: span,
                        level: level as u8,
                        tag: if attrs.is_global() { None } else { Some(asid) },
                        kind: Kind::Leaf { pa, attrs, contiguous: d.is_contiguous() },
                        filled_by: p,
                        agreed: None,
                    };
                    self.insert(cpu, e);
                    return;
                }
                DescriptorKind::Invalid | DescriptorKind::Reserved => return,
            }
        }
    }

    /// Caches `e` on `cpu`, reporting a TLB conflict: two leaves of one tag that overlap and
    /// differ in anything but the permissions (which may change in place: either may be used
    /// until the flush).
    fn insert(&mut self, cpu: usize, e: Entry) {
        if self.cpus[cpu].tlb.iter().any(|o| Entry { agreed: None, ..*o } == e) {
            return;
        }
        if let Kind::Leaf { pa, attrs, contiguous } = e.kind {
            let conflict = self.cpus[cpu].tlb.iter().find(|o| {
                let same = match o.kind {
                    Kind::Leaf { pa: p, attrs: a, contiguous: c } => {
                        o.va == e.va
                            && o.size == e.size
                            && p == pa
                            && c == contiguous
                            && a.with_permissions_of(attrs) == attrs
                    }
                    Kind::Table { .. } => true,
                };
                o.tag == e.tag && o.overlaps(e.va, e.size) && !same
            });
            if let Some(o) = conflict.copied() {
                self.violation(format!(
                    "TLB conflict on CPU {cpu} (break-before-make violated): cached {o:x?} and now {e:x?}"
                ));
            }
        }
        let tlb = &mut self.cpus[cpu].tlb;
        if tlb.len() >= TLB_CAPACITY {
            let victim = self.rng.below(tlb.len() as u64) as usize;
            tlb.swap_remove(victim);
        }
        tlb.push(e);
    }

    /// `n` walks at this moment by random CPUs that run a thread: to the range of the operation
    /// in progress, or anywhere in the window of what they run. With `mid_op_switches`, now and
    /// then a CPU other than the current one switches threads instead.
    pub(super) fn noise(&mut self, n: u32) {
        for _ in 0..n {
            if self.mid_op_switches && self.in_op.is_some() && self.rng.chance(3) {
                self.random_switch(true);
                continue;
            }
            let cpu = self.rng.below(self.cpus.len() as u64) as usize;
            let Some((p, _)) = self.cpus[cpu].thread else { continue };
            let va = match self.hot {
                Some((h, lo, len)) if h == p && self.rng.chance(60) => {
                    lo + self.rng.below(len.div_ceil(PAGE_SIZE)) * PAGE_SIZE
                }
                _ => self.procs[p].lo + self.rng.below(self.procs[p].pages) * PAGE_SIZE,
            };
            self.walk(cpu, va);
        }
    }

    // ---- scheduling -----------------------------------------------------------------------

    /// Runs `thread` (or nothing) on `cpu`: the thread leaves the CPU it ran on, the allocator
    /// gives its process's ASID, and a flush it asks for is done first, as the kernel's switch
    /// does (`DSB NSHST; TLBI VMALLE1; DSB NSH; ISB`, completed on this CPU at once).
    pub(super) fn schedule(&mut self, cpu: usize, thread: Option<(usize, usize)>) {
        self.counts.switches += 1;
        if let Some(t) = thread {
            for c in &mut self.cpus {
                if c.thread == Some(t) {
                    c.thread = None;
                }
            }
        }
        self.cpus[cpu].thread = thread;
        let Some((p, _)) = thread else { return };
        let (asid, flush) = self.alloc.switch_to(&mut self.procs[p].ctx, cpu);
        if flush {
            self.counts.rollover_flushes += 1;
            let inv = decode(TlbInstr { op: TlbiOp::Vmalle1, operand: 0 });
            self.cpus[cpu].tlb.retain(|e| !e.hit_by(&inv));
        }
        self.cpus[cpu].asid = asid;
    }

    /// A random switch on a random CPU: a random thread of a live process, or idle. During an
    /// operation (`mid_op`), the current CPU and the thread running the operation stay put.
    pub(super) fn random_switch(&mut self, mid_op: bool) {
        let cpu = self.rng.below(self.cpus.len() as u64) as usize;
        if mid_op && cpu == self.current {
            return;
        }
        let thread = if self.rng.chance(15) {
            None
        } else {
            let p = self.rng.below(self.procs.len() as u64) as usize;
            if !self.procs[p].alive {
                return;
            }
            let t = self.rng.below(self.procs[p].threads as u64) as usize;
            Some((p, t))
        };
        if mid_op {
            let busy = self.cpus[self.current].thread;
            if thread == busy || (thread.map(|t| t.0) == self.in_op && !self.mid_op_same_process) {
                return;
            }
            self.counts.mid_op_switches += 1;
        }
        self.schedule(cpu, thread);
    }
}
