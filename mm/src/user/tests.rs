//! Host tests of the user-memory layer: demand paging, the Linux memory calls' table effects and
//! errno values, frame accounting, and — the point of moving the layer into `mm` — that every
//! flush, the ones a fault makes when it folds or promotes included, goes where the provider says
//! at that moment (a provider that changes its answer between calls, as the ASID allocator does
//! after a rollover or a migration, is followed on every path).

use std::collections::BTreeSet;
use std::vec::Vec;

use super::*;
use crate::paging::VaRange;
use crate::test_support::{Heap, per_granule};
use crate::tlb::{FlushTarget, OpKind, Reach, Scope, TlbStats, TlbiOp};
use crate::vm::advice::{MADV_DONTNEED, MADV_POPULATE_WRITE, MADV_WILLNEED};
use crate::vm::flags::{MAP_ANONYMOUS, MAP_FIXED, MAP_POPULATE, MAP_PRIVATE};
use crate::vm::prot::{PROT_READ, PROT_WRITE};

mod calls;
mod duplicate;
mod fork;
mod guard;
mod image;
mod lazy;
mod object;
mod zero;

/// Records every TLBI with its operand.
#[derive(Default)]
struct Recorder(Vec<(TlbiOp, u64)>);

impl TlbHardware for Recorder {
    fn dsb_ishst(&mut self) {}
    fn dsb_ish(&mut self) {}
    fn dsb_nshst(&mut self) {}
    fn dsb_nsh(&mut self) {}
    fn isb(&mut self) {}
    fn tlbi(&mut self, op: TlbiOp, operand: u64) {
        self.0.push((op, operand));
    }
}

/// A provider whose answer the test changes between calls; it counts the questions and keeps
/// what the sink was told.
struct Targets {
    now: FlushTarget,
    asked: u32,
    issued: TlbStats,
}

impl FlushTargets for Targets {
    fn target(&mut self) -> FlushTarget {
        self.asked += 1;
        self.now
    }
    fn issued(&mut self, stats: &TlbStats) {
        self.issued.add(stats);
    }
}

/// Fake physical frames: numbers from 0x8000_0000 up, with a free list and contents.
#[derive(Default)]
struct Frames {
    next: u64,
    limit: Option<u64>,
    live: BTreeSet<u64>,
    freed: u64,
    contents: std::collections::BTreeMap<u64, Vec<u8>>,
    /// Whether contiguous runs can be had.
    contiguous: bool,
    /// What `free_frames` reports.
    free_frames: u64,
    /// Whether a freed frame adds one to `free_frames` (for the tests of reclaim under pressure).
    frees_count: bool,
}

impl UserFrames for Frames {
    fn alloc_zeroed(&mut self) -> Option<PhysAddr> {
        if self.limit.is_some_and(|l| self.live.len() as u64 >= l) {
            return None;
        }
        // Contiguous, 2 MiB-aligned from the start: successive faults can promote.
        let pa = 0x8000_0000 + self.next * PAGE_SIZE;
        self.next += 1;
        self.live.insert(pa);
        Some(PhysAddr(pa))
    }
    fn free(&mut self, pa: PhysAddr) {
        assert!(self.live.remove(&pa.0), "frame {:#x} freed twice or never allocated", pa.0);
        self.contents.remove(&pa.0);
        self.freed += 1;
        if self.frees_count {
            self.free_frames += 1;
        }
    }
    fn alloc_zeroed_contiguous(&mut self, pages: u64) -> Option<PhysAddr> {
        if !self.contiguous || self.limit.is_some_and(|l| self.live.len() as u64 + pages > l) {
            return None;
        }
        self.next = self.next.next_multiple_of(pages);
        let first = 0x8000_0000 + self.next * PAGE_SIZE;
        for i in 0..pages {
            self.live.insert(first + i * PAGE_SIZE);
        }
        self.next += pages;
        Some(PhysAddr(first))
    }
    fn free_frames(&self) -> u64 {
        self.free_frames
    }
    fn alloc_copy_of(&mut self, src: PhysAddr) -> Option<PhysAddr> {
        assert!(self.live.contains(&src.0), "copy of a frame not held");
        let dst = self.alloc_zeroed()?;
        let page = self.contents.get(&src.0).cloned();
        if let Some(page) = page {
            self.contents.insert(dst.0, page);
        }
        Some(dst)
    }
    fn write(&mut self, pa: PhysAddr, offset: usize, data: &[u8]) {
        assert!(self.live.contains(&pa.0), "write to a frame not held");
        let page = self.contents.entry(pa.0).or_insert_with(|| std::vec![0; PAGE_SIZE as usize]);
        page[offset..offset + data.len()].copy_from_slice(data);
    }
}

type Mem = UserMemory<Heap, Recorder, Targets, Frames>;

/// A level-2 block of the build's granule (2 MiB, 32 MiB or 512 MiB) and its pages.
const BLOCK: u64 = crate::addr::BLOCK_2M;
const BLOCK_PAGES: u64 = BLOCK / PAGE_SIZE;
/// A contiguous run of pages (64 KiB with 4 KiB pages, 2 MiB with 16 or 64 KiB) and its pages.
const RUN_PAGES: u64 = crate::descriptor::CONTIGUOUS_ENTRIES as u64;
const RUN: u64 = RUN_PAGES * PAGE_SIZE;

const RW: u64 = PROT_READ | PROT_WRITE;
const ANON: u64 = MAP_PRIVATE | MAP_ANONYMOUS;

fn memory(range: bool) -> Mem {
    let mut m = memory_on(Heap, range);
    m.frames_mut_for_test().free_frames = 1 << 20;
    m
}

/// [`memory`] with its table frames from `tables`.
fn memory_on<T: Translation>(tables: T, range: bool) -> UserMemory<T, Recorder, Targets, Frames> {
    let features = TlbFeatures { range, ..TlbFeatures::BASELINE };
    let table = PageTable::new(tables, VaRange::Lower).unwrap();
    let targets = Targets { now: FlushTarget::asid(5, Reach::Local), asked: 0, issued: TlbStats::ZERO };
    let mut m = UserMemory::new(
        table,
        TlbIssuer::new(Recorder::default(), features.errata),
        features,
        targets,
        Frames::default(),
        Layout::linux(0x40_0000),
    );
    // Page by page, as the tests of the calls expect; `large_memory` has the large faults.
    m.set_large_faults(LargeFaults::NONE);
    m
}

/// A memory whose frames can be had contiguously, with plenty free.
fn large_memory() -> Mem {
    let mut m = memory(true);
    m.set_large_faults(LargeFaults::ALL);
    m.frames_mut_for_test().contiguous = true;
    m.frames_mut_for_test().free_frames = 1 << 20;
    m
}

/// Fresh memory faults in without a single TLBI: whole 64 KiB runs and 2 MiB blocks mapped in
/// their final form, where mapping page by page costs a break-before-make and a flush per fold.
#[test]
fn large_faults_map_runs_and_blocks_without_tlbi() {
    let mut m = large_memory();
    let a = m.mmap(0, 4 * BLOCK, RW, ANON, -1, 0).unwrap();
    let block = a.next_multiple_of(BLOCK);
    for p in 0..BLOCK_PAGES {
        m.fault(block + p * PAGE_SIZE, Access::Write).unwrap();
    }
    assert_eq!(m.space().query(VirtAddr(block)).unwrap().size, BLOCK);
    assert_eq!((m.stats().fault_blocks, m.stats().faults, m.stats().data_frames), (1, 1, BLOCK_PAGES));
    assert!(tlbis(&m).is_empty(), "{:x?}", tlbis(&m));
    // Below the block threshold of free memory only runs.
    m.frames_mut_for_test().free_frames = 0;
    let run_area = block + BLOCK;
    for p in 0..2 * RUN_PAGES {
        m.fault(run_area + p * PAGE_SIZE, Access::Write).unwrap();
    }
    let leaf = m.space().query(VirtAddr(run_area)).unwrap();
    assert!(leaf.size == PAGE_SIZE && leaf.contiguous, "{leaf:?}");
    assert_eq!(m.stats().fault_runs, 2);
    assert!(tlbis(&m).is_empty());
    // MADV_HUGEPAGE asks for blocks whatever the free memory; MADV_NOHUGEPAGE for pages.
    let next = run_area + BLOCK;
    m.madvise(next, BLOCK, crate::vm::advice::MADV_HUGEPAGE).unwrap();
    m.fault(next, Access::Read).unwrap();
    assert_eq!(m.stats().fault_blocks, 2);
    m.mmap(next, BLOCK, RW, ANON | MAP_FIXED, -1, 0).unwrap();
    m.madvise(next, BLOCK, crate::vm::advice::MADV_NOHUGEPAGE).unwrap();
    m.fault(next, Access::Write).unwrap();
    let leaf = m.space().query(VirtAddr(next)).unwrap();
    assert!(leaf.size == PAGE_SIZE && !leaf.contiguous, "{leaf:?}");
    // Every frame comes back, page by page.
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty());
}

/// The price, stated: a program touching one byte per contiguous run (64 KiB with 4 KiB pages)
/// holds a run's pages for each (16, 128 or 32 times as many).
#[test]
fn a_sparse_toucher_pays_for_large_faults() {
    // One touch a run, over 32 runs (16 with 16 KiB pages, whose block holds 16 runs).
    let runs = 32.min(BLOCK_PAGES / RUN_PAGES);
    let touch = |m: &mut Mem| {
        let a = m.mmap(0, 2 * BLOCK, RW, ANON, -1, 0).unwrap();
        let start = a.next_multiple_of(RUN);
        for i in 0..runs {
            m.fault(start + i * RUN, Access::Write).unwrap();
        }
        m.stats().data_frames
    };
    let mut small = memory(true);
    let mut large = large_memory();
    large.frames_mut_for_test().free_frames = 0; // runs only
    let (s, l) = (touch(&mut small), touch(&mut large));
    assert_eq!((s, l), (runs, runs * RUN_PAGES));
    assert_eq!(l, per_granule(32 * 16, 16 * 128, 32 * 32));
}

/// The default does not pay that price: fresh frames go page by page, as on Linux 6.1 (one touch
/// a run holds one page, a buffer written page by page as many frames as pages).
#[test]
fn the_default_maps_fresh_frames_page_by_page_and_zero_runs_whole() {
    let runs = 32.min(BLOCK_PAGES / RUN_PAGES);
    let mut m = large_memory();
    m.set_large_faults(LargeFaults::DEFAULT);
    m.frames_mut_for_test().free_frames = 0; // no blocks
    let a = m.mmap(0, 2 * BLOCK, RW, ANON, -1, 0).unwrap();
    let start = a.next_multiple_of(RUN);
    for i in 0..runs {
        m.fault(start + i * RUN, Access::Write).unwrap();
    }
    for p in 0..RUN_PAGES {
        m.fault(start + RUN * runs + p * PAGE_SIZE, Access::Write).unwrap();
    }
    assert_eq!((m.stats().data_frames, m.stats().fault_runs), (runs + RUN_PAGES, 0));
    // (The zero region's runs under the default: `zero::a_zero_block_needs_an_eligible_range`.)
}

/// A partial munmap or mprotect of a run mapped at fault time unfolds it (no table frame
/// needed) and keeps the pages outside the range.
#[test]
fn a_partial_change_of_a_fault_time_run_unfolds_it() {
    let mut m = large_memory();
    m.frames_mut_for_test().free_frames = 0;
    let a = m.mmap(0, 2 * RUN, RW, ANON, -1, 0).unwrap();
    let run = a.next_multiple_of(RUN);
    m.fault(run, Access::Write).unwrap();
    assert_eq!(m.stats().fault_runs, 1);
    let kept = m.space().translate(VirtAddr(run + 5 * PAGE_SIZE)).unwrap();
    m.mprotect(run, PAGE_SIZE, PROT_READ).unwrap();
    m.munmap(run + PAGE_SIZE, PAGE_SIZE).unwrap();
    assert_eq!(m.space().translate(VirtAddr(run + 5 * PAGE_SIZE)), Some(kept));
    assert!(!m.space().query(VirtAddr(run + 5 * PAGE_SIZE)).unwrap().contiguous);
    assert_eq!((m.stats().data_frames, m.frames().live.len() as u64), (RUN_PAGES - 1, RUN_PAGES - 1));
}

fn tlbis(m: &Mem) -> &[(TlbiOp, u64)] {
    &m.space().tlb().hw().0
}

/// The ASID field of a TLBI operand (bits [63:48]); `None` for the forms without one.
fn asid_of(op: TlbiOp, operand: u64) -> Option<u16> {
    (op.kind() != OpKind::All && !op.is_all_asids()).then_some((operand >> 48) as u16)
}

#[test]
fn a_fault_maps_a_zeroed_frame_and_checks_the_protection() {
    let mut m = memory(true);
    let a = m.mmap(0, 4 * PAGE_SIZE, PROT_READ, ANON, -1, 0).unwrap();
    assert_eq!(m.fault(a - PAGE_SIZE, Access::Read), Err(Fault::NoMapping));
    assert_eq!(m.fault(a, Access::Write), Err(Fault::Protection { prot: Prot::READ }));
    assert_eq!(m.fault(a, Access::Execute), Err(Fault::Protection { prot: Prot::READ }));
    m.fault(a + 5, Access::Read).unwrap();
    assert!(m.space().query(VirtAddr(a)).is_some());
    // The same page again (another thread got there first): nothing new.
    m.fault(a + 8, Access::Read).unwrap();
    assert_eq!((m.stats().faults, m.stats().data_frames, m.frames().live.len()), (1, 1, 1));
    // Invalid to valid: no TLBI, and the provider was never asked.
    assert!(tlbis(&m).is_empty());
    assert_eq!(m.space().targets().asked, 0);
}

/// The bug this layer's provider design removes: a fault that completes a 64 KiB run folds it
/// with break-before-make, and that flush must use the ASID and reach of the moment — not
/// whatever an earlier call left behind.
#[test]
fn a_fold_at_fault_time_flushes_where_the_provider_says_then() {
    let mut m = memory(false);
    let a = m.mmap(0, RUN, RW, ANON, -1, 0).unwrap();
    assert_eq!(a % RUN, 0, "the test needs a mapping aligned to a run");
    for i in 0..RUN_PAGES - 1 {
        m.fault(a + i * PAGE_SIZE, Access::Write).unwrap();
    }
    assert!(tlbis(&m).is_empty());
    // Meanwhile the allocator rolled over (new ASID) and the thread ran on a second CPU.
    m.space_targets_mut().now = FlushTarget::asid(77, Reach::Broadcast);
    m.fault(a + (RUN_PAGES - 1) * PAGE_SIZE, Access::Write).unwrap();
    assert_eq!(m.stats().folds, 1);
    assert_eq!(m.space().targets().asked, 1);
    let ops = tlbis(&m);
    assert!(!ops.is_empty());
    for &(op, x) in ops {
        assert!(op.is_broadcast(), "{op:?}: local form after the space ran on another CPU");
        assert_eq!(asid_of(op, x), Some(77), "{op:?} {x:#x}: stale ASID");
    }
    // And the sink saw exactly what was issued.
    assert_eq!(m.space().targets().issued.planned_tlbis(), ops.len() as u64);
}

#[test]
fn a_promotion_at_fault_time_is_one_flush_to_the_current_target() {
    let mut m = memory(true);
    let a = m.mmap(0, 2 * BLOCK, RW, ANON, -1, 0).unwrap();
    let block = a.next_multiple_of(BLOCK);
    for i in 0..BLOCK_PAGES - 1 {
        m.fault(block + i * PAGE_SIZE, Access::Write).unwrap();
    }
    let before = tlbis(&m).len();
    m.space_targets_mut().now = FlushTarget::asid(9, Reach::Local);
    m.fault(block + (BLOCK_PAGES - 1) * PAGE_SIZE, Access::Write).unwrap();
    assert_eq!(m.stats().promotions, 1);
    let ops = &tlbis(&m)[before..];
    assert_eq!(ops.len(), 1, "{ops:x?}");
    assert!(!ops[0].0.is_broadcast());
    assert_eq!(asid_of(ops[0].0, ops[0].1), Some(9));
    assert_eq!(m.space().query(VirtAddr(block)).unwrap().size, BLOCK);
    // Every frame goes back page by page, promoted or not.
    m.munmap(a, 2 * BLOCK).unwrap();
    assert_eq!((m.frames().live.len(), m.frames().freed, m.stats().data_frames), (0, BLOCK_PAGES, 0));
}

#[test]
fn munmap_mprotect_and_teardown_account_for_every_frame() {
    let mut m = memory(true);
    // Two contiguous runs (32 pages with 4 KiB pages).
    let n = 2 * RUN_PAGES;
    let a = m.mmap(0, n * PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(m.stats().data_frames, n);
    m.mprotect(a, 8 * PAGE_SIZE, PROT_READ).unwrap();
    assert_eq!(m.fault(a, Access::Write), Err(Fault::Protection { prot: Prot::READ }));
    m.munmap(a + RUN, RUN).unwrap();
    assert_eq!(m.frames().live.len() as u64, RUN_PAGES);
    // MAP_FIXED over populated pages frees them after the flush.
    m.mmap(a, 4 * PAGE_SIZE, RW, ANON | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.frames().live.len() as u64, RUN_PAGES - 4);
    // Each flush asked the provider exactly once, at that flush: two folds while populating,
    // the mprotect (which unfolds the first run), the munmap and the MAP_FIXED replacement.
    assert_eq!((m.space().targets().asked, m.space().stats().flushes), (5, 5));
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty(), "leaked {:x?}", frames.live);
}

#[test]
fn madvise_hints_do_what_linux_does() {
    let mut m = memory(true);
    let a = m.mmap(0, 16 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    // WILLNEED on anonymous memory: nothing (Linux has no backing store to read ahead from).
    m.madvise(a, 16 * PAGE_SIZE, MADV_WILLNEED).unwrap();
    assert_eq!(m.stats().data_frames, 0);
    m.madvise(a, 16 * PAGE_SIZE, MADV_POPULATE_WRITE).unwrap();
    assert_eq!(m.stats().data_frames, 16);
    m.madvise(a, 16 * PAGE_SIZE, MADV_DONTNEED).unwrap();
    assert_eq!((m.stats().data_frames, m.frames().live.len()), (0, 0));
    // POPULATE_WRITE that cannot get frames fails with ENOMEM (Linux), not success.
    m.frames_mut_for_test().limit = Some(3);
    assert_eq!(m.madvise(a, 16 * PAGE_SIZE, MADV_POPULATE_WRITE), Err(Errno::ENOMEM));
    // MAP_POPULATE is best effort: the mapping exists, the rest is demand paged.
    let b = m.mmap(0, 8 * PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert!(m.vm().find(b).is_some());
    assert_eq!(m.fault(b + 7 * PAGE_SIZE, Access::Write), Err(Fault::OutOfMemory));
    // And it leaves the machine's last frames alone.
    m.frames_mut_for_test().limit = None;
    m.frames_mut_for_test().free_frames = POPULATE_RESERVE_FRAMES;
    let held = m.stats().data_frames;
    let c = m.mmap(0, 64 * PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(m.stats().data_frames, held, "MAP_POPULATE took frames below the reserve");
    assert!(m.vm().find(c).is_some());
}

/// Over a range with holes the pages of every mapped part are populated or dropped, then the
/// call answers `ENOMEM` (Linux's `madvise_walk_vmas`).
#[test]
fn madvise_drops_and_populates_past_holes_then_answers_enomem() {
    let mut m = memory(true);
    let a = m.mmap(0, 12 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.munmap(a + 4 * PAGE_SIZE, 4 * PAGE_SIZE).unwrap();
    assert_eq!(m.madvise(a, 12 * PAGE_SIZE, MADV_POPULATE_WRITE), Err(Errno::ENOMEM));
    assert_eq!(m.stats().data_frames, 8, "both parts populated");
    assert_eq!(m.madvise(a, 12 * PAGE_SIZE, MADV_DONTNEED), Err(Errno::ENOMEM));
    assert_eq!((m.stats().data_frames, m.frames().live.len()), (0, 0), "both parts dropped");
}

#[test]
fn mmap_of_a_file_checks_the_offset_before_the_descriptor() {
    let mut m = memory(true);
    // arm64's sys_mmap: EINVAL for an unaligned offset comes before the file lookup's EBADF.
    assert_eq!(m.mmap(0, PAGE_SIZE, PROT_READ, MAP_PRIVATE, 3, 1), Err(Errno::EINVAL));
    assert_eq!(m.mmap(0, PAGE_SIZE, PROT_READ, MAP_PRIVATE, 3, 0), Err(Errno::EBADF));
}

#[test]
fn program_images_and_the_initial_stack_are_written_through_the_tables() {
    let mut m = memory(true);
    let text = [0xd5u8; 100];
    let (image, second) = (0x40_0000, 0x40_0000 + PAGE_SIZE);
    m.map_image(image, image + 2 * PAGE_SIZE, Prot::READ.union(Prot::EXEC), VmaFlags::IMAGE, |page| {
        (page == second).then_some((16, &text[..]))
    })
    .unwrap();
    assert_eq!(m.stats().data_frames, 2);
    let pa = m.space().translate(VirtAddr(second)).unwrap().0;
    assert_eq!(&m.frames().contents[&pa][16..116], &text[..]);
    m.vm_mut().map_kernel(0x7000_0000, 4 * PAGE_SIZE, Prot::RW, VmaFlags::STACK).unwrap();
    // 16 bytes at the end of the first page, the rest in the next ones.
    let data: Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
    let tail = PAGE_SIZE as usize - 16;
    m.write(0x7000_0000 + tail as u64, &data).unwrap();
    let first = m.space().translate(VirtAddr(0x7000_0000)).unwrap().0;
    assert_eq!(&m.frames().contents[&first][tail..], &data[..16]);
    let next = m.space().translate(VirtAddr(0x7000_0000 + PAGE_SIZE)).unwrap().0;
    assert_eq!(&m.frames().contents[&next][..16], &data[16..32]);
    assert_eq!(m.write(0x6000_0000, &data), Err(Errno::EFAULT));
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty());
}

impl Mem {
    fn space_targets_mut(&mut self) -> &mut Targets {
        self.space.targets_mut()
    }
    fn frames_mut_for_test(&mut self) -> &mut Frames {
        &mut self.frames
    }
}

#[test]
fn the_global_scope_is_never_asked_for_a_user_space() {
    // A provider answering Global for a user space would flush every ASID: legal but wasteful;
    // the space passes the provider's scope through unchanged, so the kernel's provider must
    // answer with the ASID. This pins that the scope comes from the provider.
    let mut m = memory(false);
    m.space_targets_mut().now = FlushTarget { scope: Scope::Global, reach: Reach::Broadcast };
    let a = m.mmap(0, PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    m.munmap(a, PAGE_SIZE).unwrap();
    let ops = tlbis(&m);
    assert_eq!(ops.len(), 1);
    assert!(ops[0].0.is_all_asids(), "{ops:x?}");
}

#[test]
fn prot_mte_selects_the_tagged_memory_type_for_every_access() {
    // Every combination of R, W, X, BTI and MTE: the memory type is tagged exactly when
    // PROT_MTE is there and the page is accessible; the rest of the attributes are those
    // without PROT_MTE.
    for bits in 0..0x40u64 {
        let prot = Prot::from_bits_truncate(bits);
        let without = Prot::from_bits_truncate(bits & !0x20);
        match (super::user_attrs(prot), super::user_attrs(without)) {
            (Some(a), Some(b)) => {
                assert_eq!(a.tagged(), bits & 0x20 != 0, "{prot:?}");
                assert!(!b.tagged());
                assert_eq!(a.with_tagged(false), b, "{prot:?}");
            }
            (None, None) => assert_eq!(bits & 7, 0),
            other => panic!("{prot:?}: {other:?}"),
        }
    }
}

#[test]
fn mprotect_adds_prot_mte_by_break_before_make_and_never_removes_it() {
    use crate::descriptor::MemoryType;
    use crate::vm::prot::PROT_MTE;
    let mut m = memory(false);
    let a = m.mmap(0, 2 * PAGE_SIZE, RW | PROT_MTE, ANON | MAP_POPULATE, -1, 0).unwrap();
    let memory_at = |m: &Mem, va: u64| m.space().query(VirtAddr(va)).unwrap().attrs.memory_type();
    assert_eq!(memory_at(&m, a), MemoryType::NormalTagged);
    let pa = m.space().translate(VirtAddr(a)).unwrap().0;
    // Linux keeps VM_MTE across mprotect: the page stays tagged without PROT_MTE.
    m.mprotect(a, PAGE_SIZE, RW).unwrap();
    assert_eq!(memory_at(&m, a), MemoryType::NormalTagged);
    assert!(m.vm().find(a).unwrap().prot.contains(Prot::MTE));
    // An untagged page becomes tagged: a new memory type on a live page (break-before-make).
    let b = m.mmap(0, PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(memory_at(&m, b), MemoryType::NormalWriteBack);
    let pb = m.space().translate(VirtAddr(b)).unwrap().0;
    m.mprotect(b, PAGE_SIZE, PROT_READ | PROT_MTE).unwrap();
    assert_eq!(memory_at(&m, b), MemoryType::NormalTagged);
    // The frames stay (their tags with them): only the descriptors change.
    assert_eq!(m.space().translate(VirtAddr(a)).unwrap().0, pa);
    assert_eq!(m.space().translate(VirtAddr(b)).unwrap().0, pb);
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty());
}

#[test]
fn prot_bti_guards_executable_pages_only() {
    let rx_bti = Prot::READ.union(Prot::EXEC).union(Prot::BTI);
    assert!(super::user_attrs(rx_bti).is_some_and(|a| a.guarded()), "PROT_EXEC | PROT_BTI: guarded");
    assert!(super::user_attrs(Prot::READ.union(Prot::EXEC)).is_some_and(|a| !a.guarded()));
    assert!(
        super::user_attrs(Prot::READ.union(Prot::WRITE).union(Prot::BTI)).is_some_and(|a| !a.guarded()),
        "PROT_BTI without PROT_EXEC guards nothing"
    );
}
