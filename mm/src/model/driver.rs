//! The random driver: seeded, reproducible sequences of faults, populations that complete a
//! 64 KiB run or a 2 MiB range, mprotect, munmap, madvise(DONTNEED), thread switches and
//! migrations, process exits and spawns (which burn ASIDs, so small ASID spaces roll over
//! often), and `MAP_SHARED` mappings of one shared memory object (a memfd) in every process,
//! shrunk and grown again (a shrink unmaps the pages past the end in every process that maps
//! them, on the CPUs running them), each operation run by a thread of the process on the CPU it
//! runs on, and the machine's checks after every step.
//!
//! With `file_percent`, files too: the page caches of [`FILES`] files, each page one frame that
//! every process mapping it shares, mapped `MAP_SHARED` and `MAP_PRIVATE` (read-only until a
//! write copies the page) into several processes at a time at different addresses, read into
//! the cache without a mapping, and truncated (the pages past the new end leave the cache and
//! are unmapped from every process, private mappings included). The other steps unmap, exit,
//! fork, `MADV_DONTNEED` and re-fault them. Every frame an object allocates is registered with
//! the machine as a page-cache frame, which it frees only when no live process's tables map it
//! and no TLB can reach it under any usable ASID.

use core::cell::RefCell;
use std::collections::VecDeque;
use std::format;
use std::rc::Rc;
use std::string::String;

use super::hw::{ModelFrames, ModelHw, ModelMem, ModelTargets, Shared};
use super::machine::{CachePage, Counts, Machine, ObjectRange, Proc};
use crate::addr::{BLOCK_1G, BLOCK_2M, PAGE_SIZE};
use crate::descriptor::CONTIGUOUS_ENTRIES;
use crate::paging::{PageTable, VaRange};
use crate::tlb::{Errata, TlbFeatures, TlbIssuer};
use crate::user::object::{MemObject, ObjectRef, SharedObject, same_object};
use crate::user::{Access, UserMemory, UserStats};
use crate::vm::advice::{MADV_DONTNEED, MADV_POPULATE_READ, MADV_POPULATE_WRITE};
use crate::vm::flags::{MAP_ANONYMOUS, MAP_FIXED, MAP_PRIVATE, MAP_SHARED};
use crate::vm::prot::{PROT_EXEC, PROT_MTE, PROT_READ, PROT_WRITE};
use crate::vm::{Layout, VmaFlags};

/// Pages of a level-2 block of the build's granule (2 MiB, 32 MiB or 512 MiB).
const BLOCK_PAGES: u64 = BLOCK_2M / PAGE_SIZE;
/// Pages of each process's window: two level-2 blocks, across the boundary of a level-1 entry
/// (1 GiB with 4 KiB pages, 64 GiB with 16 KiB, 4 TiB with 64 KiB).
const WINDOW_PAGES: u64 = 2 * BLOCK_PAGES;
/// A contiguous run of pages (64 KiB with 4 KiB pages, 2 MiB with 16 or 64 KiB).
const RUN_PAGES: u64 = CONTIGUOUS_ENTRIES as u64;
/// Every this many steps, every usable entry is compared with the tables again, whether or not
/// the step could have changed what it depends on.
const FULL_CHECK_EVERY: u64 = 64;
/// The protections the driver gives: read-write, read-only, read-execute, none, and (for
/// `mprotect` only) read-write tagged, whose change of memory type on a live page must be
/// break-before-make.
const PROTS: [u64; 5] =
    [PROT_READ | PROT_WRITE, PROT_READ, PROT_READ | PROT_EXEC, 0, PROT_READ | PROT_WRITE | PROT_MTE];
/// Files whose page caches the processes map (with `file_percent`).
pub(super) const FILES: usize = 2;
/// Pages of each file at its full size: few, so that the processes' mappings share most of
/// them, and freed frames are soon reused.
const FILE_PAGES: u64 = 64;

/// A planted bug in releasing page-cache frames, for the tests to show that the model catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CacheBug {
    /// A file's truncation frees each page's frame once the first process that maps the file
    /// has unmapped it and flushed, though other processes still map it (a page cache that
    /// counts its mappings as one).
    FreeAfterFirstFlush,
    /// A file's truncation skips the flush in the second process that maps the file: the
    /// entries leave its tables and its frames are released, but its ASID's TLB entries stay.
    SecondSpaceUnflushed,
}

/// One run of the model.
#[derive(Clone, Copy, Debug)]
pub(super) struct Config {
    pub(super) cpus: usize,
    pub(super) asid_bits: u32,
    /// Process slots (each holds one live process; an exit spawns a new one in the slot).
    pub(super) slots: usize,
    /// FEAT_TLBIRANGE.
    pub(super) range: bool,
    /// Operations to run.
    pub(super) ops: u64,
    pub(super) seed: u64,
    /// Percent of steps that end a process and spawn a new one.
    pub(super) exit_percent: u64,
    /// Whether, in the middle of an operation, another thread of the operating process may be
    /// scheduled on another CPU (as a real scheduler may). Sound only when the reach of each
    /// flush is decided at the flush, after the table writes are visible.
    pub(super) sibling_switches: bool,
    /// Whether the flush target is decided before each operation (as the kernel did before
    /// `FlushTargets`) instead of at each flush.
    pub(super) decided_before: bool,
    /// Percent of steps that install or remove guard regions, free pages lazily or reclaim them
    /// (0: none, and the random sequence
    /// of the other steps is the one it was before guards were modelled).
    pub(super) guard_percent: u64,
    /// Percent of steps that map, read or truncate files (0: none, and the random sequence of
    /// the other steps is the one it was before files were modelled).
    pub(super) file_percent: u64,
    /// Percent of steps that move part of an area elsewhere in its process's window
    /// (`mremap(MREMAP_MAYMOVE | MREMAP_FIXED)`; 0: none, and the random sequence of the other
    /// steps is the one it was before moves were modelled).
    pub(super) move_percent: u64,
    /// A bug planted in the file truncations.
    pub(super) cache_bug: Option<CacheBug>,
}

type Memory = UserMemory<ModelMem, ModelHw, ModelTargets, ModelFrames>;

/// A shared object every process may map: the memfd (number 0) or a file's page cache (1 to
/// [`FILES`]), behind a host lock.
struct Object {
    id: usize,
    pages: std::sync::Mutex<MemObject>,
}

impl SharedObject for Object {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.lock());
    }
}

impl Object {
    fn new(id: usize) -> Self {
        Self { id, pages: std::sync::Mutex::new(MemObject::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemObject> {
        self.pages.lock().expect("object lock")
    }

    /// Hands the machine the frames of the pages from `keep` on, which a shrink to `keep`
    /// pages is about to drop, as page-cache frames: the object holds a reference to each page
    /// until it drops it, so every page-cache frame is freed after this, by its last mapper.
    fn dropping(&self, keep: u64, m: &mut Machine) -> std::vec::Vec<u64> {
        let o = self.lock();
        let mut dropped = std::vec::Vec::new();
        let mut at = keep;
        while let Some(index) = o.next_page(at) {
            let pa = o.frame_of(index).expect("a page the object holds").0;
            m.cache_frames.insert(pa, CachePage { object: self.id, index });
            dropped.push(pa);
            at = index + 1;
        }
        dropped
    }
}

/// What the file steps did, for the report.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FileCounts {
    /// `MAP_SHARED` and `MAP_PRIVATE` mappings made.
    pub(super) shared_maps: u64,
    pub(super) private_maps: u64,
    /// Reads that filled the cache without a mapping.
    pub(super) reads: u64,
    /// Truncations that dropped pages, and the pages they dropped that two or more processes
    /// mapped at that moment.
    pub(super) truncations: u64,
    pub(super) truncated_shared: u64,
    /// Writes to a private mapping that replaced the cache's frame by a copy.
    pub(super) cow_breaks: u64,
    /// Faults that mapped a page already in the cache.
    pub(super) cache_hits: u64,
    /// Page-cache frames freed (memfd pages included).
    pub(super) cache_frees: u64,
}

/// Where a fault on a file mapping starts from: the file and page, the mapping's kind, the
/// cache's frame for the page before the fault, and the frame the page mapped before it.
struct FileProbe {
    file: usize,
    index: u64,
    shared: bool,
    cached: Option<u64>,
    before: Option<u64>,
}

/// A step queued by a multi-step operation.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A fault on one page.
    Fault { slot: usize, page: u64, cursor: bool },
    /// `MADV_POPULATE_READ` over `[page, page + pages)`: the pages fault in in address order.
    Populate { slot: usize, page: u64, pages: u64 },
}

/// The counts of a finished run.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Report {
    pub(super) steps: u64,
    pub(super) machine: Counts,
    pub(super) user: UserStats,
    pub(super) rollovers: u64,
    pub(super) exits: u64,
    pub(super) forks: u64,
    /// Object mappings made, and shrinks of the object.
    pub(super) object_maps: u64,
    pub(super) truncations: u64,
    /// Guard installs and removals that succeeded, and faults that found a guard.
    pub(super) guard_ops: u64,
    /// Moves that moved something (`mremap` that returned the new address).
    pub(super) moves: u64,
    pub(super) guard_faults: u64,
    /// Reclaims of lazily freed pages that dropped some.
    pub(super) reclaims: u64,
    pub(super) files: FileCounts,
}

pub(super) struct Driver {
    m: Shared,
    cfg: Config,
    features: TlbFeatures,
    slots: std::vec::Vec<Option<Memory>>,
    queue: VecDeque<Step>,
    step: u64,
    /// Where this step changed a table: (slot, first VA, end VA).
    changed: Option<(usize, u64, u64)>,
    exits: u64,
    spawned: u64,
    /// Counters of the processes that exited.
    user: UserStats,
    /// Each slot's window (a forked child has its parent's).
    lo: std::vec::Vec<u64>,
    forks: u64,
    object: std::sync::Arc<Object>,
    files: std::vec::Vec<std::sync::Arc<Object>>,
    file_counts: FileCounts,
    /// Whether this step's check compares every usable entry (a truncation changed the tables
    /// of several processes).
    full_check: bool,
    object_maps: u64,
    truncations: u64,
    guard_ops: u64,
    moves: u64,
    guard_faults: u64,
    reclaims: u64,
}

fn lo_of(slot: usize) -> u64 {
    (slot as u64 + 1) * BLOCK_1G - BLOCK_2M
}

fn add(total: &mut UserStats, s: &UserStats) {
    total.faults += s.faults;
    total.promotions += s.promotions;
    total.demotions += s.demotions;
    total.folds += s.folds;
    total.unfolds += s.unfolds;
    total.cow_copies += s.cow_copies;
    total.cow_reuses += s.cow_reuses;
    total.zero_faults += s.zero_faults;
    total.zero_large_faults += s.zero_large_faults;
}

impl Driver {
    pub(super) fn new(cfg: Config) -> Self {
        let m = Rc::new(RefCell::new(Machine::new(cfg.cpus, cfg.asid_bits, cfg.seed)));
        m.borrow_mut().mid_op_switches = true;
        m.borrow_mut().mid_op_same_process = cfg.sibling_switches;
        let features = TlbFeatures { range: cfg.range, ..TlbFeatures::BASELINE };
        let mut d = Self {
            m,
            cfg,
            features,
            slots: std::vec::Vec::new(),
            queue: VecDeque::new(),
            step: 0,
            changed: None,
            exits: 0,
            spawned: 0,
            user: UserStats::default(),
            lo: (0..cfg.slots).map(lo_of).collect(),
            forks: 0,
            object: std::sync::Arc::new(Object::new(0)),
            files: (1..=FILES).map(|id| std::sync::Arc::new(Object::new(id))).collect(),
            file_counts: FileCounts::default(),
            full_check: false,
            object_maps: 0,
            truncations: 0,
            guard_ops: 0,
            moves: 0,
            guard_faults: 0,
            reclaims: 0,
        };
        let mut frames = ModelFrames(d.m.clone());
        d.object.lock().set_size(WINDOW_PAGES * PAGE_SIZE, &mut frames).expect("size");
        for f in &d.files {
            f.lock().set_size(FILE_PAGES * PAGE_SIZE, &mut frames).expect("size");
        }
        for s in 0..cfg.slots {
            d.slots.push(None);
            d.m.borrow_mut().procs.push(Proc {
                uid: 0,
                root: 0,
                lo: lo_of(s),
                pages: WINDOW_PAGES,
                ctx: crate::asid::AsidContext::new(),
                threads: 1,
                alive: false,
            });
            d.spawn(s);
        }
        d
    }

    /// A new process in `slot`: an empty table, a fresh ASID context, one or two threads, and
    /// one read-write anonymous mapping over its window.
    fn spawn(&mut self, slot: usize) {
        let table = PageTable::new(ModelMem(self.m.clone()), VaRange::Lower).expect("root table");
        let root = table.root_pa().0;
        let issuer = TlbIssuer::new(ModelHw(self.m.clone()), Errata::NONE);
        let targets = ModelTargets { m: self.m.clone(), slot };
        let frames = ModelFrames(self.m.clone());
        let layout = Layout::linux(0x40_0000);
        self.slots[slot] = Some(UserMemory::new(table, issuer, self.features, targets, frames, layout));
        self.spawned += 1;
        self.lo[slot] = lo_of(slot);
        let mut m = self.m.borrow_mut();
        let threads = 1 + m.rng.below(2) as usize;
        m.procs[slot] = Proc {
            uid: self.spawned,
            root,
            lo: lo_of(slot),
            pages: WINDOW_PAGES,
            ctx: crate::asid::AsidContext::new(),
            threads,
            alive: true,
        };
        drop(m);
        self.mmap(slot, 0, WINDOW_PAGES, PROTS[0]);
    }

    /// Runs the configured number of steps; the first violation ends the run with a report
    /// that names the seed and the step.
    pub(super) fn run(mut self) -> Result<Report, String> {
        while self.step < self.cfg.ops {
            self.step += 1;
            let what = self.one_step();
            self.copy_object_ranges();
            let mut m = self.m.borrow_mut();
            m.noise(4);
            let changed = self.changed.take().map(|(slot, lo, hi)| {
                let lo = lo & !(BLOCK_2M - 1);
                (slot, lo, hi.next_multiple_of(BLOCK_2M) - lo)
            });
            let full = core::mem::take(&mut self.full_check) || self.step.is_multiple_of(FULL_CHECK_EVERY);
            m.check_all(&what, changed, full);
            if !m.violations.is_empty() {
                return Err(format!(
                    "seed {:#x}, {:?}: step {} ({what}): {}",
                    self.cfg.seed,
                    self.cfg,
                    self.step,
                    m.violations.join("\n  ")
                ));
            }
        }
        let m = self.m.borrow();
        let mut user = self.user;
        for s in self.slots.iter().flatten() {
            add(&mut user, &s.stats());
        }
        Ok(Report {
            steps: self.step,
            machine: m.counts,
            user,
            rollovers: m.alloc.rollovers(),
            exits: self.exits,
            forks: self.forks,
            object_maps: self.object_maps,
            truncations: self.truncations,
            guard_ops: self.guard_ops,
            moves: self.moves,
            guard_faults: self.guard_faults,
            reclaims: self.reclaims,
            files: FileCounts { cache_frees: m.cache_frees, ..self.file_counts },
        })
    }

    /// Hands the machine each live process's object-backed ranges (where the checks look for
    /// mappings of a page-cache frame being freed).
    fn copy_object_ranges(&mut self) {
        let mut m = self.m.borrow_mut();
        m.object_ranges.resize_with(self.slots.len(), std::vec::Vec::new);
        for (slot, mem) in self.slots.iter().enumerate() {
            let ranges = &mut m.object_ranges[slot];
            ranges.clear();
            for b in mem.iter().flat_map(|mem| mem.backings().iter()) {
                let object = self.object_id(&b.object);
                ranges.push(ObjectRange { object, start: b.start, end: b.end, first: b.offset / PAGE_SIZE });
            }
        }
    }

    /// The driver's number of an object.
    fn object_id(&self, object: &ObjectRef) -> usize {
        let memfd: ObjectRef = self.object.clone();
        if same_object(object, &memfd) {
            return 0;
        }
        (0..FILES)
            .find(|&i| {
                let file: ObjectRef = self.files[i].clone();
                same_object(object, &file)
            })
            .map_or(usize::MAX, |i| i + 1)
    }

    fn rand(&self, n: u64) -> u64 {
        self.m.borrow_mut().rng.below(n)
    }

    fn one_step(&mut self) -> String {
        if let Some(step) = self.queue.pop_front() {
            return self.queued(step);
        }
        if self.cfg.guard_percent > 0 && self.rand(100) < self.cfg.guard_percent {
            return self.guard();
        }
        if self.cfg.move_percent > 0 && self.rand(100) < self.cfg.move_percent {
            return self.mremap();
        }
        if self.cfg.file_percent > 0 && self.rand(100) < self.cfg.file_percent {
            let file = self.rand(FILES as u64) as usize;
            return match self.rand(8) {
                0..=2 => self.map_file(file, true),
                3..=5 => self.map_file(file, false),
                6 => self.read_file(file),
                _ => self.truncate_file(file),
            };
        }
        let r = self.rand(100);
        let slot = self.rand(self.cfg.slots as u64) as usize;
        let page = self.rand(WINDOW_PAGES);
        match r {
            0..=27 => {
                let cursor = self.rand(10) < 7;
                self.queued(Step::Fault { slot, page, cursor })
            }
            28..=32 => {
                // Complete a contiguous run: fault its pages one by one.
                let first = page & !(RUN_PAGES - 1);
                for p in first..first + RUN_PAGES {
                    self.queue.push_back(Step::Fault { slot, page: p, cursor: true });
                }
                self.queued(Step::Fault { slot, page, cursor: true })
            }
            33..=35 => {
                // Complete a block's range: populate all but one page, then fault that one.
                let region = page & !(BLOCK_PAGES - 1);
                let last = region + self.rand(BLOCK_PAGES);
                let rest = region + BLOCK_PAGES - last - 1;
                self.queue.push_back(Step::Populate { slot, page: last + 1, pages: rest });
                self.queue.push_back(Step::Fault { slot, page: last, cursor: true });
                self.queued(Step::Populate { slot, page: region, pages: last - region })
            }
            36..=46 => {
                let (page, pages) = self.random_range(page);
                let prot = PROTS[self.rand(5) as usize];
                self.mprotect(slot, page, pages, prot)
            }
            47..=51 => {
                let (page, pages) = self.random_range(page);
                let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
                let r = self.operate(slot, page, pages, |mem| mem.munmap(va, len));
                format!("munmap slot {slot} pages {page:#x}+{pages}: {r:?}")
            }
            52..=57 => {
                let (page, pages) = self.random_range(page);
                let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
                let r = self.operate(slot, page, pages, |mem| mem.madvise(va, len, MADV_DONTNEED));
                format!("madvise(DONTNEED) slot {slot} pages {page:#x}+{pages}: {r:?}")
            }
            58..=62 => {
                let (page, pages) = self.random_range(page);
                let prot = PROTS[self.rand(3) as usize];
                self.mmap(slot, page, pages, prot)
            }
            63..=83 => {
                self.m.borrow_mut().random_switch(false);
                String::from("switch")
            }
            84 | 85 => {
                let (page, pages) = self.random_range(page);
                let prot = PROTS[self.rand(3) as usize];
                self.map_object(slot, page, pages, prot)
            }
            86 => self.resize_object(),
            87..=89 => self.fork(slot),
            _ if r < 90 + self.cfg.exit_percent => self.exit(slot),
            _ => {
                self.m.borrow_mut().noise(8);
                String::from("walks")
            }
        }
    }

    /// A range of 1 to 64 pages from `page`, a whole block's range, or the whole window.
    fn random_range(&mut self, page: u64) -> (u64, u64) {
        match self.rand(10) {
            0 => (0, WINDOW_PAGES),
            1 | 2 => (page & !(BLOCK_PAGES - 1), BLOCK_PAGES),
            _ => (page, (1 + self.rand(64)).min(WINDOW_PAGES - page)),
        }
    }

    fn queued(&mut self, step: Step) -> String {
        match step {
            Step::Fault { slot, page, cursor } => {
                let access = [Access::Read, Access::Write, Access::Execute][self.rand(3) as usize];
                self.m.borrow_mut().cursor = cursor.then_some((slot, page));
                let va = self.lo[slot] + page * PAGE_SIZE;
                let probe = self.file_probe(slot, va);
                let r = self.operate(slot, page, 1, |mem| mem.fault(va, access));
                self.guard_faults += u64::from(r == Err(crate::user::Fault::Guard));
                if let Some(probe) = probe {
                    self.file_fault_done(slot, va, &probe);
                }
                format!("fault slot {slot} page {page:#x} {access:?}: {r:?}")
            }
            Step::Populate { slot, page, pages } => {
                self.m.borrow_mut().cursor = Some((slot, page));
                let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
                // Written where the protection allows (so the pages are frames of their own, and
                // a block's range completes), read where it does not (the zero frame).
                let r = self.operate(slot, page, pages, |mem| {
                    mem.madvise(va, len, MADV_POPULATE_WRITE)
                        .or_else(|_| mem.madvise(va, len, MADV_POPULATE_READ))
                });
                format!("populate slot {slot} pages {page:#x}+{pages}: {r:?}")
            }
        }
    }

    /// Picks a CPU running a thread of `slot` (scheduling one on a random CPU if none does),
    /// makes it the executing CPU, and runs `f` on the process's memory. With
    /// `decided_before`, the flush target is fixed now rather than asked for at each flush.
    fn operate<R>(&mut self, slot: usize, page: u64, pages: u64, f: impl FnOnce(&mut Memory) -> R) -> R {
        let cpu = {
            let mut m = self.m.borrow_mut();
            let running: std::vec::Vec<usize> =
                (0..m.cpus.len()).filter(|&c| m.cpus[c].thread.is_some_and(|(p, _)| p == slot)).collect();
            match running.len() {
                0 => {
                    let (cpus, threads) = (m.cpus.len() as u64, m.procs[slot].threads as u64);
                    let c = m.rng.below(cpus) as usize;
                    let t = m.rng.below(threads) as usize;
                    m.schedule(c, Some((slot, t)));
                    c
                }
                n => running[m.rng.below(n as u64) as usize],
            }
        };
        let mem = self.slots[slot].as_mut().expect("live slot");
        {
            let mut m = self.m.borrow_mut();
            m.current = cpu;
            m.in_op = Some(slot);
            m.hot = Some((slot, self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE));
            if self.cfg.decided_before {
                m.decided = Some(m.alloc.flush_target(&m.procs[slot].ctx, cpu));
            }
        }
        let r = f(mem);
        let (lo, hi) = (self.lo[slot] + page * PAGE_SIZE, self.lo[slot] + (page + pages) * PAGE_SIZE);
        self.changed = Some(match self.changed {
            Some((s, l, h)) if s == slot => (slot, l.min(lo), h.max(hi)),
            _ => (slot, lo, hi),
        });
        let mut m = self.m.borrow_mut();
        m.in_op = None;
        m.hot = None;
        m.cursor = None;
        m.decided = None;
        r
    }

    /// `MADV_GUARD_INSTALL`, `MADV_GUARD_REMOVE` or `MADV_FREE` over a random range of a random
    /// slot, or the reclaim of its lazily freed pages that memory pressure makes (an install
    /// zaps the pages with a flush; a removal that empties a table detaches it, and the flush
    /// must reach the walk caches that hold it; a free write-protects, a reclaim unmaps, and the
    /// frames go back only after the flush).
    fn guard(&mut self) -> String {
        use crate::user::guard::{MADV_GUARD_INSTALL, MADV_GUARD_REMOVE};
        use crate::vm::advice::MADV_FREE;
        let slot = self.rand(self.cfg.slots as u64) as usize;
        let page = self.rand(WINDOW_PAGES);
        let (page, pages) = self.random_range(page);
        let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
        let (advice, name) = match self.rand(4) {
            0 => (MADV_GUARD_INSTALL, "GUARD_INSTALL"),
            1 => (MADV_GUARD_REMOVE, "GUARD_REMOVE"),
            2 => (MADV_FREE, "FREE"),
            _ => {
                let r = self.operate(slot, 0, WINDOW_PAGES, |mem| mem.reclaim_lazily_freed());
                self.reclaims += u64::from(r);
                return format!("reclaim of the lazily freed pages, slot {slot}: {r}");
            }
        };
        let r = self.operate(slot, page, pages, |mem| mem.madvise(va, len, advice));
        self.guard_ops += u64::from(r.is_ok() && advice != MADV_FREE);
        format!("madvise({name}) slot {slot} pages {page:#x}+{pages}: {r:?}")
    }

    /// `mremap(MREMAP_MAYMOVE | MREMAP_FIXED)` of up to 64 pages of the area holding a random
    /// page of a random slot, to a random place of the window clear of them, or (one in four) of
    /// a whole block's span to the other block of the window: the pages leave the source entry
    /// by entry (each source table the move empties detached), or with their table, with one
    /// flush, and no CPU may keep a usable entry for an old address after it.
    fn mremap(&mut self) -> String {
        use crate::vm::map::remap::{MREMAP_FIXED, MREMAP_MAYMOVE};
        let slot = self.rand(self.cfg.slots as u64) as usize;
        let (mut page, mut pages, mut to) =
            (self.rand(WINDOW_PAGES), 1 + self.rand(64), self.rand(WINDOW_PAGES));
        if self.rand(4) == 0 {
            // A whole last-level table's span to the other one: the table itself moves. A few
            // pages are faulted in first, so that it holds something (not all: a full one may
            // become a block, which moves by extents).
            (page, pages, to) = (page & !(BLOCK_PAGES - 1), BLOCK_PAGES, to & !(BLOCK_PAGES - 1));
            for _ in 0..1 + self.rand(4) {
                let p = page + self.rand(BLOCK_PAGES);
                self.queued(Step::Fault { slot, page: p, cursor: false });
            }
        }
        let lo = self.lo[slot];
        let Some(area) =
            self.slots[slot].as_ref().and_then(|mem| mem.vm().find(lo + page * PAGE_SIZE).copied())
        else {
            return format!("mremap slot {slot}: nothing at page {page:#x}");
        };
        let (from, end) = (lo + page * PAGE_SIZE, (lo + (page + pages) * PAGE_SIZE).min(area.end));
        let len = end - from;
        let (from_page, to_end) = (page, to + len / PAGE_SIZE);
        if to_end > WINDOW_PAGES || (to < from_page + len / PAGE_SIZE && from_page < to_end) {
            return format!("mremap slot {slot}: no room for {len:#x} at page {to:#x}");
        }
        let (first, last) = (from_page.min(to), (from_page + len / PAGE_SIZE).max(to_end));
        let dst = lo + to * PAGE_SIZE;
        let r = self.operate(slot, first, last - first, |mem| {
            mem.mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst)
        });
        self.moves += u64::from(r == Ok(dst));
        format!("mremap slot {slot} pages {page:#x}+{:#x} to {to:#x}: {r:?}", len / PAGE_SIZE)
    }

    /// `mmap(MAP_FIXED)`; one in four grows down (`MAP_GROWSDOWN`), so later faults in the hole
    /// below it grow it and map pages there.
    fn mmap(&mut self, slot: usize, page: u64, pages: u64, prot: u64) -> String {
        let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
        let grows = if self.rand(4) == 0 { crate::vm::flags::MAP_GROWSDOWN } else { 0 };
        let r = self.operate(slot, page, pages, |mem| {
            mem.mmap(va, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | grows, -1, 0)
        });
        assert_eq!(r, Ok(va), "mmap(MAP_FIXED) at {va:#x}");
        format!(
            "mmap(MAP_FIXED{}) slot {slot} pages {page:#x}+{pages} prot {prot:#x}",
            if grows != 0 { "|MAP_GROWSDOWN" } else { "" }
        )
    }

    /// Maps the object's pages `[page, page + pages)` at the same pages of `slot`'s window
    /// (`MAP_SHARED | MAP_FIXED`): every process maps an object page at the same window offset.
    fn map_object(&mut self, slot: usize, page: u64, pages: u64, prot: u64) -> String {
        let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
        let handle: ObjectRef = self.object.clone();
        let r = self.operate(slot, page, pages, |mem| {
            mem.mmap_object(va, len, prot, MAP_SHARED | MAP_FIXED, handle, page * PAGE_SIZE)
        });
        assert_eq!(r, Ok(va), "mmap_object(MAP_FIXED) at {va:#x}");
        self.object_maps += 1;
        format!("mmap(memfd, MAP_SHARED|MAP_FIXED) slot {slot} pages {page:#x}+{pages} prot {prot:#x}")
    }

    /// Maps `pages` pages of file `file` from a random page on, `MAP_SHARED` or `MAP_PRIVATE`,
    /// into one to all of the processes, each at a random place of its window, and queues a few
    /// faults in each mapping (so that the processes share the cache's frames).
    fn map_file(&mut self, file: usize, shared: bool) -> String {
        let slots = self.cfg.slots as u64;
        let pages = 1 + self.rand(FILE_PAGES);
        let first = self.rand(FILE_PAGES);
        let prot = PROTS[self.rand(3) as usize];
        let (n, s0) = (1 + self.rand(slots), self.rand(slots));
        let flags = MAP_FIXED | if shared { MAP_SHARED } else { MAP_PRIVATE };
        for k in 0..n {
            let slot = ((s0 + k) % slots) as usize;
            let page = self.rand(WINDOW_PAGES - pages + 1);
            let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
            let handle: ObjectRef = self.files[file].clone();
            let r = self.operate(slot, page, pages, |mem| {
                mem.mmap_object(va, len, prot, flags, handle, first * PAGE_SIZE)
            });
            assert_eq!(r, Ok(va), "mmap_object(MAP_FIXED) of a file at {va:#x}");
            // Some pages twice: a read, then a write that copies a private page.
            for _ in 0..1 + self.rand(3) {
                let page = page + self.rand(pages);
                for _ in 0..1 + self.rand(2) {
                    self.queue.push_back(Step::Fault { slot, page, cursor: false });
                }
            }
        }
        if shared {
            self.file_counts.shared_maps += n;
        } else {
            self.file_counts.private_maps += n;
        }
        let kind = if shared { "MAP_SHARED" } else { "MAP_PRIVATE" };
        format!(
            "mmap(file {file}, {kind}|MAP_FIXED) pages {first:#x}+{pages} prot {prot:#x} in {n} processes"
        )
    }

    /// `read` of a few pages of file `file`: they enter the cache, mapped by nobody yet.
    fn read_file(&mut self, file: usize) -> String {
        let (first, pages) = (self.rand(FILE_PAGES), 1 + self.rand(8));
        let mut frames = ModelFrames(self.m.clone());
        self.files[file].with(&mut |o| {
            for index in first..first + pages {
                // Past the end is a short read: nothing enters the cache.
                let _ = o.page(index, false, &mut frames);
            }
        });
        self.file_counts.reads += 1;
        format!("read(file {file}) pages {first:#x}+{pages}")
    }

    /// `ftruncate` of file `file` to a random size (a page cut in two keeps its head), or back
    /// to its full size; a shrink unmaps the pages past the end from every process that maps
    /// the file, each on a CPU running it (as `unmap_mapping_range` over every mapping). With
    /// a [`CacheBug`] planted, the release of the dropped pages goes wrong as it says.
    fn truncate_file(&mut self, file: usize) -> String {
        let full = FILE_PAGES * PAGE_SIZE;
        let object = self.files[file].clone();
        let size = if object.lock().size() == full { self.rand(full) } else { full };
        let keep = size.div_ceil(PAGE_SIZE);
        let dropped = object.dropping(keep, &mut self.m.borrow_mut());
        {
            let m = self.m.borrow();
            let shared = dropped.iter().filter(|&&pa| {
                m.cache_frames.get(&pa).is_some_and(|&page| {
                    let mut mappers =
                        m.mappings_of(pa, page).into_iter().map(|(p, _)| p).collect::<std::vec::Vec<_>>();
                    mappers.dedup();
                    mappers.len() >= 2
                })
            });
            self.file_counts.truncated_shared += shared.count() as u64;
        }
        let mut frames = ModelFrames(self.m.clone());
        let gone = object.lock().set_size(size, &mut frames).expect("size");
        let Some(first) = gone else { return format!("ftruncate(file {file}) to {size:#x}") };
        self.file_counts.truncations += 1;
        self.full_check = true;
        let handle: ObjectRef = object;
        let mut mapping = 0;
        for slot in 0..self.slots.len() {
            let maps = self.slots[slot]
                .as_ref()
                .is_some_and(|mem| mem.backings().iter().any(|b| same_object(&b.object, &handle)));
            if !maps {
                continue;
            }
            mapping += 1;
            let unflushed = self.cfg.cache_bug == Some(CacheBug::SecondSpaceUnflushed) && mapping == 2;
            self.m.borrow_mut().drop_tlbis = unflushed;
            let h = handle.clone();
            self.operate(slot, 0, WINDOW_PAGES, |mem| mem.truncate_object(&h, first));
            self.m.borrow_mut().drop_tlbis = false;
            if self.cfg.cache_bug == Some(CacheBug::FreeAfterFirstFlush) && mapping == 1 {
                let mut m = self.m.borrow_mut();
                for &pa in &dropped {
                    m.force_free(pa);
                }
            }
        }
        format!("ftruncate(file {file}) to {size:#x}: pages from {first:#x} unmapped in {mapping} processes")
    }

    /// Before a fault at `va` of `slot`: if a file maps it, what the fault starts from.
    fn file_probe(&self, slot: usize, va: u64) -> Option<FileProbe> {
        let mem = self.slots[slot].as_ref()?;
        let b = mem.backings().at(va)?;
        let file = self.object_id(&b.object).checked_sub(1)?;
        let index = b.index_of(va);
        let cached = self.files[file].lock().frame_of(index).map(|pa| pa.0);
        let shared = mem.vm().find(va).is_some_and(|v| v.flags.contains(VmaFlags::SHARED));
        let before = self.m.borrow().translate(slot, va).map(|(pa, _)| pa);
        Some(FileProbe { file, index, shared, cached, before })
    }

    /// After a fault on a file mapping: counts a copy on write and a page found in the cache,
    /// and checks that a private mapping maps the cache's frame read-only (a write through it
    /// would reach the file and every other process).
    fn file_fault_done(&mut self, slot: usize, va: u64, probe: &FileProbe) {
        let cached = self.files[probe.file].lock().frame_of(probe.index).map(|pa| pa.0);
        let mut m = self.m.borrow_mut();
        let Some((pa, d)) = m.translate(slot, va) else { return };
        let cache = cached == Some(pa);
        let was_cache = probe.before.is_some() && probe.before == probe.cached;
        self.file_counts.cow_breaks += u64::from(!probe.shared && !cache && was_cache);
        self.file_counts.cache_hits += u64::from(probe.before.is_none() && probe.cached == Some(pa));
        if !probe.shared && cache && d.attributes().access().writable() {
            m.violation(format!(
                "process {slot} maps page-cache frame {pa:#x} writable at VA {va:#x} through a private mapping"
            ));
        }
    }

    /// Shrinks the object to a random number of pages (each live process then unmaps the pages
    /// past the end, on a CPU running it), or grows it back to the whole window.
    fn resize_object(&mut self) -> String {
        let full = WINDOW_PAGES * PAGE_SIZE;
        let size = if self.object.lock().size() == full { self.rand(WINDOW_PAGES) * PAGE_SIZE } else { full };
        self.object.dropping(size / PAGE_SIZE, &mut self.m.borrow_mut());
        let mut frames = ModelFrames(self.m.clone());
        let gone = self.object.lock().set_size(size, &mut frames).expect("size");
        let Some(first) = gone else { return format!("ftruncate(memfd) to {size:#x}") };
        self.truncations += 1;
        self.full_check = true;
        let handle: ObjectRef = self.object.clone();
        for slot in 0..self.slots.len() {
            if self.slots[slot].is_some() {
                let h = handle.clone();
                self.operate(slot, first, WINDOW_PAGES - first, |mem| mem.truncate_object(&h, first));
            }
        }
        format!("ftruncate(memfd) to {size:#x}: pages from {first:#x} unmapped everywhere")
    }

    fn mprotect(&mut self, slot: usize, page: u64, pages: u64, prot: u64) -> String {
        let (va, len) = (self.lo[slot] + page * PAGE_SIZE, pages * PAGE_SIZE);
        let r = self.operate(slot, page, pages, |mem| mem.mprotect(va, len, prot));
        self.check_private_cache_read_only(slot, va, len);
        format!("mprotect slot {slot} pages {page:#x}+{pages} prot {prot:#x}: {r:?}")
    }

    /// After an `mprotect` of `[va, va + len)` in `slot`: a private file mapping still maps the
    /// cache's frames read-only, whatever protection it was given (a write through a writable
    /// one would reach the file and every other process).
    fn check_private_cache_read_only(&mut self, slot: usize, va: u64, len: u64) {
        for page in (va..va + len).step_by(PAGE_SIZE as usize) {
            let Some(probe) = self.file_probe(slot, page) else { continue };
            let mut m = self.m.borrow_mut();
            if let Some((pa, d)) = m.translate(slot, page)
                && !probe.shared
                && probe.cached == Some(pa)
                && d.attributes().access().writable()
            {
                m.violation(format!(
                    "process {slot} maps page-cache frame {pa:#x} writable at VA {page:#x} through a private \
                     mapping after mprotect"
                ));
            }
        }
    }

    /// The process in `slot` exits: its threads stop, a CPU destroys its memory (every frame
    /// back after the flush), and a new process takes the slot.
    fn exit(&mut self, slot: usize) -> String {
        let cpu = self.end(slot);
        self.spawn(slot);
        format!("exit and respawn of slot {slot} on CPU {cpu}")
    }

    /// `fork` by the process in `parent`: the process of another slot exits and the child takes
    /// that slot, with the parent's window; the fork runs on a CPU running the parent (its
    /// write protection is one flush, aimed at the parent's CPUs at that moment). Later steps
    /// fault, write (copy-on-write), unmap and exit either side on any CPU.
    fn fork(&mut self, parent: usize) -> String {
        if self.cfg.slots < 2 {
            return String::from("no fork (one slot)");
        }
        let child = (parent + 1 + self.rand(self.cfg.slots as u64 - 1) as usize) % self.cfg.slots;
        self.end(child);
        let table = PageTable::new(ModelMem(self.m.clone()), VaRange::Lower).expect("root table");
        let root = table.root_pa().0;
        let issuer = TlbIssuer::new(ModelHw(self.m.clone()), Errata::NONE);
        let targets = ModelTargets { m: self.m.clone(), slot: child };
        let frames = ModelFrames(self.m.clone());
        self.spawned += 1;
        self.forks += 1;
        self.lo[child] = self.lo[parent];
        {
            let mut m = self.m.borrow_mut();
            let threads = 1 + m.rng.below(2) as usize;
            m.procs[child] = Proc {
                uid: self.spawned,
                root,
                lo: self.lo[parent],
                pages: WINDOW_PAGES,
                ctx: crate::asid::AsidContext::new(),
                threads,
                alive: true,
            };
        }
        let features = self.features;
        let r =
            self.operate(parent, 0, WINDOW_PAGES, |mem| mem.fork(table, issuer, features, targets, frames));
        let mem = r.expect("the model's frames and tables never run out");
        self.slots[child] = Some(mem);
        format!("fork of slot {parent} into slot {child}")
    }

    /// The process in `slot` ends: its threads stop and a CPU destroys its memory (every frame
    /// back after the flush, a shared one when its last reference goes). Returns the CPU.
    fn end(&mut self, slot: usize) -> usize {
        self.exits += 1;
        let cpu = {
            let mut m = self.m.borrow_mut();
            for c in 0..m.cpus.len() {
                if m.cpus[c].thread.is_some_and(|(p, _)| p == slot) {
                    m.schedule(c, None);
                }
            }
            m.procs[slot].alive = false;
            let cpus = m.cpus.len() as u64;
            let cpu = m.rng.below(cpus) as usize;
            m.current = cpu;
            cpu
        };
        let mem = self.slots[slot].take().expect("live slot");
        add(&mut self.user, &mem.stats());
        let _ = mem.destroy();
        cpu
    }
}
