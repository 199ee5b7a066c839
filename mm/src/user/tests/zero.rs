//! Host tests of the shared zero frame: a read or execute fault on private anonymous memory maps
//! it read-only and takes no frame; the first write takes a zeroed frame with break-before-make;
//! no call ever frees, shares or counts it (the pool asserts the first two); `mprotect`, fork,
//! `MADV_DONTNEED`, `mremap`, populate and locks treat it as Linux treats its zero page.

use super::fork::{Cow, Pool, flushes, fork, live, parent, peek, writable};
use super::*;
use crate::vm::advice::{MADV_DONTNEED, MADV_POPULATE_READ};
use crate::vm::flags::{MAP_GROWSDOWN, MAP_SHARED};
use crate::vm::map::remap::{MREMAP_FIXED, MREMAP_MAYMOVE};
use crate::vm::prot::PROT_EXEC;

/// Where the pool's zero frame sits: right below the frames it hands out, so that a fork that
/// merged it with a neighbouring frame into one run would be seen.
const ZERO: u64 = 0x8000_0000 - PAGE_SIZE;

fn zero_pool() -> Pool {
    let pool = Pool::default();
    pool.0.borrow_mut().zero = Some(ZeroRegion::page(PhysAddr(ZERO)));
    pool
}

fn zero_parent(pool: &Pool) -> Cow {
    parent(pool, false)
}

fn maps_zero(m: &Cow, va: u64) -> bool {
    m.space().translate(VirtAddr(va)) == Some(PhysAddr(ZERO))
}

/// Reading 64 pages of untouched private anonymous memory maps the zero frame at each, read-only
/// although the mapping is writable, takes no frame and makes no flush; the first write to one
/// takes exactly one zeroed frame, replacing the entry with break-before-make (one flush).
#[test]
fn reads_map_the_zero_frame_and_a_write_takes_one_frame() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let a = m.mmap(0, 64 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    for i in 0..64 {
        m.fault(a + i * PAGE_SIZE, Access::Read).unwrap();
        assert!(maps_zero(&m, a + i * PAGE_SIZE) && !writable(&m, a + i * PAGE_SIZE));
    }
    let s = m.stats();
    assert_eq!((s.data_frames, s.zero_pages, s.zero_faults, live(&pool)), (0, 64, 64, 0));
    assert_eq!(m.space().targets().asked, 0, "invalid to valid: no flush");
    m.write(a + 5 * PAGE_SIZE + 7, &[0xab]).unwrap();
    let s = m.stats();
    assert_eq!((s.data_frames, s.zero_pages, live(&pool)), (1, 63, 1));
    assert_eq!(m.space().targets().asked, 1, "the zero entry replaced with one flush");
    assert!(writable(&m, a + 5 * PAGE_SIZE) && !maps_zero(&m, a + 5 * PAGE_SIZE));
    assert_eq!((peek(&m, &pool, a + 5 * PAGE_SIZE + 7), peek(&m, &pool, a + 5 * PAGE_SIZE)), (0xab, 0));
    assert_eq!(s.cow_copies, 0, "nothing copied from the zero frame");
    drop(m.destroy());
    assert_eq!(live(&pool), 0, "every frame back, the zero frame never");
}

/// An instruction fetch maps the zero frame too (Linux's `do_anonymous_page` makes no
/// difference between a load and a fetch), executable and read-only.
#[test]
fn an_execute_fault_maps_the_zero_frame_executable() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let a = m.mmap(0, PAGE_SIZE, PROT_READ | PROT_EXEC, ANON, -1, 0).unwrap();
    m.fault(a, Access::Execute).unwrap();
    let leaf = m.space().query(VirtAddr(a)).unwrap();
    assert!(maps_zero(&m, a) && !leaf.attrs.access().writable() && !leaf.attrs.uxn());
    assert_eq!((m.stats().data_frames, m.stats().zero_pages), (0, 1));
    assert!(pool.0.borrow().icache_syncs.is_empty(), "the zero frame needs no maintenance per fault");
    drop(m.destroy());
}

/// Shared anonymous memory never gets the zero frame (both sides of a fork must find one page);
/// a write to a read-only mapping's zero page stays a protection fault.
#[test]
fn shared_memory_takes_frames_and_read_only_memory_stays_read_only() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let s = m.mmap(0, PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    m.fault(s, Access::Read).unwrap();
    assert!(!maps_zero(&m, s));
    assert_eq!(m.stats().data_frames, 1);
    let r = m.mmap(0, PAGE_SIZE, PROT_READ, ANON, -1, 0).unwrap();
    m.fault(r, Access::Read).unwrap();
    assert!(maps_zero(&m, r));
    assert_eq!(m.fault(r, Access::Write), Err(Fault::Protection { prot: Prot::READ }));
    assert!(maps_zero(&m, r));
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// `mprotect` to writable leaves zero entries read-only (their next write must take a frame),
/// and only while the range holds one: the other pages of a memory that never forked become
/// writable in place.
#[test]
fn mprotect_keeps_zero_entries_read_only() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let a = m.mmap(0, 2 * PAGE_SIZE, PROT_READ, ANON, -1, 0).unwrap();
    m.fault(a, Access::Read).unwrap();
    m.mprotect(a, 2 * PAGE_SIZE, RW).unwrap();
    assert!(maps_zero(&m, a) && !writable(&m, a));
    m.write(a, &[1]).unwrap();
    assert!(!maps_zero(&m, a) && writable(&m, a));
    let b = m.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.write(b, &[2]).unwrap();
    m.mprotect(b, PAGE_SIZE, PROT_READ).unwrap();
    m.mprotect(b, PAGE_SIZE, RW).unwrap();
    assert!(writable(&m, b), "no zero entry in the range: the page is made writable");
    assert_eq!(m.stats().zero_pages, 0);
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// Fork maps the zero frame in the child without a reference (the pool would panic on a
/// share), never as part of a run with a neighbouring frame; a write on either side takes a
/// frame of its own and leaves the other side on the zero frame; exits free no zero frame.
#[test]
fn fork_shares_the_zero_frame_without_references() {
    let pool = zero_pool();
    let mut p = zero_parent(&pool);
    let a = p.mmap(0, 4 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    p.fault(a, Access::Read).unwrap();
    // Page 1 gets the first frame, 0x8000_0000: physically right after the zero frame.
    p.write(a + PAGE_SIZE, &[3]).unwrap();
    p.fault(a + 2 * PAGE_SIZE, Access::Read).unwrap();
    let mut c = fork(&mut p, &pool, 6).unwrap();
    assert!(maps_zero(&c, a) && maps_zero(&c, a + 2 * PAGE_SIZE) && !maps_zero(&c, a + PAGE_SIZE));
    assert_eq!((c.stats().zero_pages, c.stats().data_frames), (2, 1));
    assert_eq!(peek(&c, &pool, a + PAGE_SIZE), 3);
    c.write(a, &[9]).unwrap();
    assert!(maps_zero(&p, a) && !maps_zero(&c, a));
    assert_eq!((peek(&p, &pool, a), peek(&c, &pool, a)), (0, 9));
    p.write(a + 2 * PAGE_SIZE, &[4]).unwrap();
    assert!(maps_zero(&c, a + 2 * PAGE_SIZE));
    assert_eq!(peek(&c, &pool, a + 2 * PAGE_SIZE), 0);
    drop(c.destroy());
    drop(p.destroy());
    assert_eq!(live(&pool), 0, "{:x?}", pool.0.borrow().refs);
}

/// `MADV_DONTNEED` drops zero entries (and frees nothing for them); `munmap` likewise; `mremap`
/// moves them (still the zero frame, still read-only at the new address).
#[test]
fn dontneed_munmap_and_mremap_of_zero_entries() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let a = m.mmap(0, 8 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    for i in 0..8 {
        m.fault(a + i * PAGE_SIZE, Access::Read).unwrap();
    }
    m.madvise(a, 2 * PAGE_SIZE, MADV_DONTNEED).unwrap();
    assert!(m.space().query(VirtAddr(a)).is_none());
    m.munmap(a + 2 * PAGE_SIZE, PAGE_SIZE).unwrap();
    assert_eq!(m.stats().zero_pages, 5);
    let to = m.mmap(0, 8 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    let moved =
        m.mremap(a + 3 * PAGE_SIZE, 5 * PAGE_SIZE, 5 * PAGE_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, to).unwrap();
    assert_eq!(moved, to);
    for i in 0..5 {
        assert!(maps_zero(&m, to + i * PAGE_SIZE) && !writable(&m, to + i * PAGE_SIZE));
    }
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (5, 0));
    m.write(to, &[1]).unwrap();
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (4, 1));
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// Population as Linux's `populate_vma_page_range`: a writable private mapping is populated
/// for writing (frames of its own), a read-only one for reading (the zero frame);
/// `MADV_POPULATE_READ` maps the zero frame; `mlock` of a writable mapping takes frames.
#[test]
fn populate_and_lock_write_fault_writable_private_memory() {
    let pool = zero_pool();
    let mut m = zero_parent(&pool);
    let w = m.mmap(0, 4 * PAGE_SIZE, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert!((0..4).all(|i| !maps_zero(&m, w + i * PAGE_SIZE) && writable(&m, w + i * PAGE_SIZE)));
    let r = m.mmap(0, 4 * PAGE_SIZE, PROT_READ, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert!((0..4).all(|i| maps_zero(&m, r + i * PAGE_SIZE)));
    let p = m.mmap(0, 4 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.madvise(p, 4 * PAGE_SIZE, MADV_POPULATE_READ).unwrap();
    assert!((0..4).all(|i| maps_zero(&m, p + i * PAGE_SIZE)));
    let l = m.mmap(0, 4 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.mlock(l, 4 * PAGE_SIZE).unwrap();
    assert!((0..4).all(|i| !maps_zero(&m, l + i * PAGE_SIZE) && writable(&m, l + i * PAGE_SIZE)));
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (8, 8));
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// The heap (`brk`) and a stack that grows down on a read below it get the zero frame, as any
/// private anonymous memory; a large-fault memory maps one zero page on a read, not a run.
#[test]
fn brk_stack_and_large_faults_read_the_zero_frame() {
    let pool = zero_pool();
    let mut m = parent(&pool, true);
    let base = m.brk(0);
    let top = m.brk(base + 64 * PAGE_SIZE);
    assert_eq!(top, base + 64 * PAGE_SIZE);
    m.fault(base, Access::Read).unwrap();
    assert!(maps_zero(&m, base));
    let s = m.mmap(0, 4 * PAGE_SIZE, RW, ANON | MAP_GROWSDOWN, -1, 0).unwrap();
    m.fault(s - PAGE_SIZE, Access::Read).unwrap();
    assert!(maps_zero(&m, s - PAGE_SIZE));
    let big = m.mmap(0, 2 * BLOCK, RW, ANON, -1, 0).unwrap();
    let at = big.next_multiple_of(BLOCK);
    m.fault(at, Access::Read).unwrap();
    assert!(maps_zero(&m, at) && m.space().query(VirtAddr(at)).unwrap().size == PAGE_SIZE);
    assert_eq!((m.stats().fault_runs, m.stats().fault_blocks, m.stats().data_frames), (0, 0, 0));
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

// ---- the zero block ---------------------------------------------------------------------

/// The 2 MiB zero region of the block tests, right below the frames the pool hands out (so a
/// fork that merged its last page with the first frame into one extent would be seen).
const ZERO_REGION: ZeroRegion = ZeroRegion { base: PhysAddr(0x8000_0000 - (2 << 20)), len: 2 << 20 };

/// What a read fault maps whole where it may: the 2 MiB block with 4 KiB pages, the 2 MiB
/// contiguous run with 16 and 64 KiB pages (whose blocks are larger than the region).
const LARGE: u64 = if BLOCK <= ZERO_REGION.len { BLOCK } else { RUN };

fn block_pool() -> Pool {
    let pool = Pool::default();
    pool.0.borrow_mut().zero = Some(ZERO_REGION);
    pool
}

/// The page of the zero region that `va` maps when it is part of a zero block or run.
fn zero_page_for(va: u64) -> PhysAddr {
    PhysAddr(ZERO_REGION.base.0 + (va & (ZERO_REGION.len - 1) & !(PAGE_SIZE - 1)))
}

/// Every page of `[va, va + len)` maps its own page of the zero region, read-only.
fn zero_pages_at(m: &Cow, va: u64, len: u64) -> bool {
    (0..len / PAGE_SIZE).all(|i| {
        let at = va + i * PAGE_SIZE;
        m.space().translate(VirtAddr(at)) == Some(zero_page_for(at)) && !writable(m, at)
    })
}

/// `[va, va + LARGE)` is one zero block (a leaf of that size) or one zero run (pages with the
/// contiguous hint), read-only.
fn is_zero_block(m: &Cow, va: u64) -> bool {
    let leaf = m.space().query(VirtAddr(va)).unwrap();
    let whole = if LARGE == BLOCK { leaf.size == BLOCK } else { leaf.contiguous };
    whole && zero_pages_at(m, va, LARGE)
}

/// A memory with large faults and a `3 * LARGE` mapping; returns it and the `LARGE`-aligned
/// address in it.
fn block_parent(pool: &Pool) -> (Cow, u64) {
    let mut m = parent(pool, true);
    let a = m.mmap(0, 3 * LARGE, RW, ANON, -1, 0).unwrap();
    (m, a.next_multiple_of(LARGE))
}

/// One read fault in an eligible range maps the whole aligned block (or run) to the zero region:
/// one fault, no frame, no flush; every page of it reads zero. A write to one page splits it
/// with break-before-make and one flush, that page alone taking a zeroed frame (Linux ≥ 5.8
/// `do_huge_pmd_wp_page` on the huge zero page); every other page stays mapped to its own page
/// of the region, read-only, and its first write takes one frame more, one flush each.
#[test]
fn a_read_maps_a_zero_block_and_a_write_splits_it() {
    let pool = block_pool();
    let (mut m, at) = block_parent(&pool);
    m.fault(at + 5 * PAGE_SIZE + 3, Access::Read).unwrap();
    assert!(is_zero_block(&m, at));
    let s = m.stats();
    assert_eq!((s.faults, s.zero_faults, s.zero_large_faults), (1, 1, 1));
    assert_eq!((s.zero_pages, s.data_frames, live(&pool), flushes(&m)), (LARGE / PAGE_SIZE, 0, 0, 0));
    for i in [0, 1, LARGE / PAGE_SIZE - 1] {
        m.fault(at + i * PAGE_SIZE, Access::Read).unwrap();
    }
    assert_eq!(m.stats().faults, 1, "the rest of the block was present");
    let w = at + 7 * PAGE_SIZE;
    m.write(w + 9, &[0x5a]).unwrap();
    let s = m.stats();
    assert_eq!((s.zero_pages, s.data_frames, live(&pool)), (LARGE / PAGE_SIZE - 1, 1, 1));
    assert_eq!(flushes(&m), 1, "split and replaced in one break-before-make");
    assert!(writable(&m, w) && !ZERO_REGION.contains(m.space().translate(VirtAddr(w)).unwrap()));
    assert_eq!((peek(&m, &pool, w + 9), peek(&m, &pool, w)), (0x5a, 0));
    assert!(
        zero_pages_at(&m, at, 7 * PAGE_SIZE) && zero_pages_at(&m, w + PAGE_SIZE, at + LARGE - w - PAGE_SIZE)
    );
    assert_eq!(m.stats().cow_copies, 0, "nothing copied from the zero region");
    m.write(at, &[1]).unwrap();
    assert_eq!((m.stats().zero_pages, m.stats().data_frames, flushes(&m)), (LARGE / PAGE_SIZE - 2, 2, 2));
    assert!(zero_pages_at(&m, at + PAGE_SIZE, 6 * PAGE_SIZE));
    drop(m.destroy());
    assert_eq!(live(&pool), 0, "every frame back, no page of the zero region");
}

/// `MAP_POPULATE` of read-only private memory maps zero blocks, and steps a block at a time: one
/// population step (one question to the frame provider) per block, not one per page (1 GiB
/// populated page by page was 262,144 walks of the area map and the tables).
#[test]
fn populating_read_only_memory_steps_a_zero_block_at_a_time() {
    let pool = block_pool();
    let mut m = parent(&pool, true);
    let blocks = 64;
    let a = m.mmap(0, blocks * LARGE, PROT_READ, ANON | MAP_POPULATE, -1, 0).unwrap();
    let at = a.next_multiple_of(LARGE);
    assert!(is_zero_block(&m, at) && is_zero_block(&m, at + (blocks - 2) * LARGE));
    assert_eq!((m.stats().data_frames, live(&pool)), (0, 0));
    // Whole blocks one step each; an unaligned start leaves two partial blocks, a page a step.
    let asked = pool.0.borrow().free_asked;
    assert!(asked <= blocks + 2 * (LARGE / PAGE_SIZE), "{asked} steps for {blocks} blocks");
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// An execute fault maps the zero block executable (read-only), with no cache maintenance per
/// fault (the region was made visible to instruction fetch once).
#[test]
fn an_execute_fault_maps_a_zero_block_executable() {
    let pool = block_pool();
    let mut m = parent(&pool, true);
    let a = m.mmap(0, 2 * LARGE, PROT_READ | PROT_EXEC, ANON, -1, 0).unwrap().next_multiple_of(LARGE);
    m.fault(a, Access::Execute).unwrap();
    assert!(is_zero_block(&m, a) && !m.space().query(VirtAddr(a)).unwrap().attrs.uxn());
    assert!(pool.0.borrow().icache_syncs.is_empty());
    drop(m.destroy());
}

/// A read maps a block or run only where a write could have: the aligned range inside the
/// mapping, nothing of it present, the switch on, no `MADV_NOHUGEPAGE`, private; else one zero
/// page (the region's first). A one-page region never maps more than a page.
#[test]
fn a_zero_block_needs_an_eligible_range() {
    let pool = block_pool();
    let (mut m, at) = block_parent(&pool);
    m.write(at + LARGE, &[1]).unwrap();
    m.fault(at + LARGE + PAGE_SIZE, Access::Read).unwrap();
    let one_page = |m: &Cow, va: u64| {
        m.space().query(VirtAddr(va)).is_some_and(|l| l.size == PAGE_SIZE && !l.contiguous)
            && m.space().translate(VirtAddr(va)) == Some(ZERO_REGION.base)
    };
    assert!(one_page(&m, at + LARGE + PAGE_SIZE), "a page of the range was present");
    let small = m.mmap(0, RUN / 2, RW, ANON, -1, 0).unwrap();
    m.fault(small, Access::Read).unwrap();
    assert!(one_page(&m, small), "a mapping smaller than any run or block");
    let n = m.mmap(0, 2 * LARGE, RW, ANON, -1, 0).unwrap();
    m.madvise(n, 2 * LARGE, crate::vm::advice::MADV_NOHUGEPAGE).unwrap();
    m.fault(n.next_multiple_of(LARGE), Access::Read).unwrap();
    assert!(one_page(&m, n.next_multiple_of(LARGE)), "MADV_NOHUGEPAGE");
    let s = m.mmap(0, 2 * LARGE, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    m.fault(s.next_multiple_of(LARGE), Access::Read).unwrap();
    assert!(!ZERO_REGION.contains(m.space().translate(VirtAddr(s.next_multiple_of(LARGE))).unwrap()));
    m.set_large_faults(LargeFaults::NONE);
    m.fault(at, Access::Read).unwrap();
    assert!(one_page(&m, at), "large faults off");
    assert_eq!(m.stats().zero_large_faults, 0);
    if RUN < LARGE {
        // 4 KiB pages: where the block does not fit, the 64 KiB run does (the default maps the
        // zero region's runs, though not runs of fresh frames).
        m.set_large_faults(LargeFaults::DEFAULT);
        let r = m.mmap(0, 2 * RUN, RW, ANON, -1, 0).unwrap().next_multiple_of(RUN);
        m.fault(r + PAGE_SIZE, Access::Read).unwrap();
        let leaf = m.space().query(VirtAddr(r)).unwrap();
        assert!(leaf.contiguous && zero_pages_at(&m, r, RUN), "{leaf:x?}");
        assert_eq!(m.stats().zero_large_faults, 1);
    }
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
    let pool = zero_pool();
    let (mut m, at) = block_parent(&pool);
    m.fault(at, Access::Read).unwrap();
    assert!(maps_zero(&m, at) && m.space().query(VirtAddr(at)).unwrap().size == PAGE_SIZE);
    drop(m.destroy());
}

/// Fork maps the zero block in the child whole, taking no reference (the pool would panic);
/// a write in the child splits the child's block only; exits free no page of the region.
#[test]
fn fork_shares_a_zero_block_without_references() {
    let pool = block_pool();
    let (mut p, at) = block_parent(&pool);
    p.fault(at, Access::Read).unwrap();
    // The page after the block: a frame of its own, and the first frame the pool hands out,
    // physically right after the region, so parent and child join it to the block's extent.
    p.write(at + LARGE, &[3]).unwrap();
    let mut c = fork(&mut p, &pool, 6).unwrap();
    assert!(is_zero_block(&c, at));
    assert_eq!((c.stats().zero_pages, c.stats().data_frames), (LARGE / PAGE_SIZE, 1));
    c.write(at + 2 * PAGE_SIZE, &[9]).unwrap();
    assert!(is_zero_block(&p, at), "the parent's block untouched");
    assert_eq!((peek(&p, &pool, at + 2 * PAGE_SIZE), peek(&c, &pool, at + 2 * PAGE_SIZE)), (0, 9));
    assert_eq!(c.stats().zero_pages, LARGE / PAGE_SIZE - 1);
    drop(c.destroy());
    assert!(is_zero_block(&p, at));
    drop(p.destroy());
    assert_eq!(live(&pool), 0, "{:x?}", pool.0.borrow().refs);
}

/// A part of a zero block unmapped, dropped (`MADV_DONTNEED`) or given another protection
/// splits it: the rest stays mapped to its pages of the region, read-only even where
/// `mprotect` makes the area writable (the next write must take a frame), and nothing is
/// freed; `mremap` moves a whole zero block and it is still the region; the counts follow.
#[test]
fn partial_munmap_dontneed_mprotect_and_mremap_of_a_zero_block() {
    let pool = block_pool();
    let (mut m, at) = block_parent(&pool);
    m.fault(at, Access::Read).unwrap();
    let pages = LARGE / PAGE_SIZE;
    m.munmap(at + 4 * PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    m.madvise(at + 8 * PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED).unwrap();
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (pages - 3, 0));
    assert!(m.space().query(VirtAddr(at + 4 * PAGE_SIZE)).is_none());
    assert!(m.space().query(VirtAddr(at + 8 * PAGE_SIZE)).is_none());
    assert!(
        zero_pages_at(&m, at, 4 * PAGE_SIZE) && zero_pages_at(&m, at + 9 * PAGE_SIZE, LARGE - 9 * PAGE_SIZE)
    );
    m.mprotect(at + 16 * PAGE_SIZE, 3 * PAGE_SIZE, PROT_READ).unwrap();
    m.mprotect(at + 9 * PAGE_SIZE, LARGE - 9 * PAGE_SIZE, RW).unwrap();
    assert!(zero_pages_at(&m, at + 9 * PAGE_SIZE, LARGE - 9 * PAGE_SIZE), "still the region, read-only");
    m.write(at + 17 * PAGE_SIZE, &[7]).unwrap();
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (pages - 4, 1));
    assert_eq!(peek(&m, &pool, at + 17 * PAGE_SIZE), 7);
    // A whole block moved to an aligned destination.
    let from = m.mmap(0, 2 * LARGE, RW, ANON, -1, 0).unwrap().next_multiple_of(LARGE);
    m.fault(from, Access::Read).unwrap();
    let to = m.mmap(0, 3 * LARGE, RW, ANON, -1, 0).unwrap().next_multiple_of(LARGE);
    let moved = m.mremap(from, LARGE, LARGE, MREMAP_MAYMOVE | MREMAP_FIXED, to).unwrap();
    assert_eq!(moved, to);
    assert!(zero_pages_at(&m, to, LARGE) && m.space().query(VirtAddr(from)).is_none());
    assert_eq!((m.stats().zero_pages, m.stats().data_frames), (2 * pages - 4, 1));
    m.munmap(at, LARGE).unwrap();
    assert_eq!((m.stats().zero_pages, m.stats().data_frames, live(&pool)), (pages, 0, 0));
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}
