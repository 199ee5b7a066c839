//! Host tests of `fork` and copy-on-write against a page model: a frame pool that counts
//! references and keeps contents (shared by the parent and its children, as the kernel's frame
//! allocator is), so each test checks isolation byte by byte, the reference counts, the TLB
//! work (one flush for the parent's write protection, break-before-make only for a copy) and
//! that every frame comes back exactly once.

use core::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::*;
use crate::vm::advice::{MADV_DONTFORK, MADV_WIPEONFORK};
use crate::vm::flags::MAP_SHARED;

#[derive(Default)]
pub(super) struct PoolState {
    next: u64,
    /// Frame -> references.
    pub(super) refs: BTreeMap<u64, u32>,
    pub(super) contents: BTreeMap<u64, Vec<u8>>,
    /// I-cache maintenance done, by frame.
    pub(super) icache_syncs: BTreeMap<u64, u32>,
    /// `share` fails after this many more successes.
    share_budget: Option<u64>,
    contiguous: bool,
    /// At most this many frames held at once (memory pressure).
    pub(super) limit: Option<usize>,
    /// The shared zero region, if the pool has one (never counted in `refs`).
    pub(super) zero: Option<ZeroRegion>,
    /// How many times the memory asked how many frames are free (once per population step).
    pub(super) free_asked: u64,
}

/// Frames with reference counts, shared by every memory of a test.
#[derive(Clone, Default)]
pub(super) struct Pool(pub(super) Rc<RefCell<PoolState>>);

impl UserFrames for Pool {
    fn alloc_zeroed(&mut self) -> Option<PhysAddr> {
        let mut s = self.0.borrow_mut();
        if s.limit.is_some_and(|l| s.refs.len() >= l) {
            return None;
        }
        let pa = 0x8000_0000 + s.next * PAGE_SIZE;
        s.next += 1;
        s.refs.insert(pa, 1);
        Some(PhysAddr(pa))
    }
    fn alloc_zeroed_contiguous(&mut self, pages: u64) -> Option<PhysAddr> {
        let mut s = self.0.borrow_mut();
        if !s.contiguous {
            return None;
        }
        s.next = s.next.next_multiple_of(pages);
        let first = 0x8000_0000 + s.next * PAGE_SIZE;
        for i in 0..pages {
            s.refs.insert(first + i * PAGE_SIZE, 1);
        }
        s.next += pages;
        Some(PhysAddr(first))
    }
    fn free_frames(&self) -> u64 {
        self.0.borrow_mut().free_asked += 1;
        1 << 20
    }
    fn zero_region(&self) -> Option<ZeroRegion> {
        self.0.borrow().zero
    }
    fn free(&mut self, pa: PhysAddr) {
        let mut s = self.0.borrow_mut();
        assert!(!s.zero.is_some_and(|z| z.contains(pa)), "a page of the zero region freed: {pa:x?}");
        let n = s.refs.get_mut(&pa.0).unwrap_or_else(|| panic!("frame {:#x} freed once too often", pa.0));
        *n -= 1;
        if *n == 0 {
            s.refs.remove(&pa.0);
            s.contents.remove(&pa.0);
        }
    }
    fn share(&mut self, pa: PhysAddr) -> bool {
        let mut s = self.0.borrow_mut();
        if let Some(b) = &mut s.share_budget {
            if *b == 0 {
                return false;
            }
            *b -= 1;
        }
        *s.refs.get_mut(&pa.0).expect("sharing a frame not held") += 1;
        true
    }
    fn is_shared(&self, pa: PhysAddr) -> bool {
        self.0.borrow().refs.get(&pa.0).is_some_and(|&n| n > 1)
    }
    fn write(&mut self, pa: PhysAddr, offset: usize, data: &[u8]) {
        let mut s = self.0.borrow_mut();
        assert!(s.refs.contains_key(&pa.0), "write to a frame not held");
        let page = s.contents.entry(pa.0).or_insert_with(|| std::vec![0; PAGE_SIZE as usize]);
        page[offset..offset + data.len()].copy_from_slice(data);
    }
    fn sync_icache(&mut self, pa: PhysAddr) {
        *self.0.borrow_mut().icache_syncs.entry(pa.0).or_default() += 1;
    }
    fn alloc_copy_of(&mut self, src: PhysAddr) -> Option<PhysAddr> {
        assert!(self.0.borrow().refs.contains_key(&src.0), "copy of a frame not held");
        let dst = self.alloc_zeroed()?;
        let mut s = self.0.borrow_mut();
        if let Some(page) = s.contents.get(&src.0).cloned() {
            s.contents.insert(dst.0, page);
        }
        Some(dst)
    }
}

pub(super) type Cow = UserMemory<Heap, Recorder, Targets, Pool>;

fn targets(asid: u16) -> Targets {
    Targets { now: FlushTarget::asid(asid, Reach::Local), asked: 0, issued: TlbStats::ZERO }
}

pub(super) fn parent(pool: &Pool, large: bool) -> Cow {
    let features = TlbFeatures { range: true, ..TlbFeatures::BASELINE };
    let table = PageTable::new(Heap, VaRange::Lower).unwrap();
    let mut m = UserMemory::new(
        table,
        TlbIssuer::new(Recorder::default(), features.errata),
        features,
        targets(5),
        pool.clone(),
        Layout::linux(0x40_0000),
    );
    m.set_large_faults(if large { LargeFaults::ALL } else { LargeFaults::NONE });
    m
}

pub(super) fn fork(m: &mut Cow, pool: &Pool, asid: u16) -> Result<Cow, Errno> {
    let features = m.space().features();
    let table = PageTable::new(Heap, VaRange::Lower).unwrap();
    m.fork(table, TlbIssuer::new(Recorder::default(), features.errata), features, targets(asid), pool.clone())
}

/// The byte at `va` as the program reads it.
pub(super) fn peek(m: &Cow, pool: &Pool, va: u64) -> u8 {
    let Some(pa) = m.space().translate(VirtAddr(va)) else { return 0 };
    let page = pa.0 & !(PAGE_SIZE - 1);
    pool.0.borrow().contents.get(&page).map_or(0, |c| c[(pa.0 - page) as usize])
}

pub(super) fn writable(m: &Cow, va: u64) -> bool {
    m.space().query(VirtAddr(va)).is_some_and(|l| l.attrs.access().writable())
}

pub(super) fn flushes(m: &Cow) -> u32 {
    m.space().targets().asked
}

pub(super) fn live(pool: &Pool) -> usize {
    pool.0.borrow().refs.len()
}

/// Fork shares every page (same frames, two references), write-protects the parent's with one
/// flush and the child's without any (its table is new); writes then copy or reuse.
#[test]
fn fork_shares_pages_and_a_write_copies_or_reuses() {
    let pool = Pool::default();
    let mut p = parent(&pool, false);
    let a = p.mmap(0, 16 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    for i in 0..16 {
        p.write(a + i * PAGE_SIZE, &[i as u8 + 1]).unwrap();
    }
    let before = flushes(&p);
    let mut c = fork(&mut p, &pool, 6).unwrap();
    assert_eq!(flushes(&p) - before, 1, "one flush for the parent's whole address space");
    assert_eq!(flushes(&c), 0, "the child's table is new: nothing to flush");
    assert_eq!(live(&pool), 16, "no frame copied at fork");
    for i in 0..16 {
        let va = a + i * PAGE_SIZE;
        assert_eq!(p.space().translate(VirtAddr(va)), c.space().translate(VirtAddr(va)));
        assert!(!writable(&p, va) && !writable(&c, va));
        assert_eq!((peek(&p, &pool, va), peek(&c, &pool, va)), (i as u8 + 1, i as u8 + 1));
    }
    assert_eq!((p.stats().data_frames, c.stats().data_frames), (16, 16));
    // The child writes page 0: a copy, with break-before-make (one flush in the child).
    c.write(a, &[0xcc]).unwrap();
    assert_eq!((c.stats().cow_copies, flushes(&c)), (1, 1));
    assert_eq!(live(&pool), 17);
    assert_eq!((peek(&p, &pool, a), peek(&c, &pool, a)), (1, 0xcc));
    // The parent writes page 0: now the last reference, made writable in place.
    let frame = p.space().translate(VirtAddr(a));
    p.write(a, &[0xdd]).unwrap();
    assert_eq!((p.stats().cow_reuses, p.stats().cow_copies), (1, 0));
    assert_eq!(p.space().translate(VirtAddr(a)), frame);
    assert_eq!((peek(&p, &pool, a), peek(&c, &pool, a)), (0xdd, 0xcc));
    // The parent writes page 1 (still shared): a copy; the child keeps the original.
    p.write(a + PAGE_SIZE, &[0xee]).unwrap();
    assert_eq!((peek(&p, &pool, a + PAGE_SIZE), peek(&c, &pool, a + PAGE_SIZE)), (0xee, 2));
    // A read fault on a shared page changes nothing; an unmap drops one reference.
    p.fault(a + 2 * PAGE_SIZE, Access::Read).unwrap();
    assert!(!writable(&p, a + 2 * PAGE_SIZE));
    p.munmap(a + 3 * PAGE_SIZE, PAGE_SIZE).unwrap();
    assert_eq!(peek(&c, &pool, a + 3 * PAGE_SIZE), 4);
    c.write(a + 3 * PAGE_SIZE, &[9]).unwrap();
    assert_eq!(c.stats().cow_reuses, 1, "the parent's unmap left the child the last reference");
    drop(p.destroy());
    drop(c.destroy());
    assert_eq!(live(&pool), 0, "every frame back once");
}

/// `mprotect` after a fork keeps shared pages read-only: making them writable again must not
/// let one side write the other's page.
#[test]
fn mprotect_after_fork_does_not_reopen_a_shared_page() {
    let pool = Pool::default();
    let mut p = parent(&pool, false);
    let a = p.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    p.write(a, &[7]).unwrap();
    let c = fork(&mut p, &pool, 6).unwrap();
    p.mprotect(a, PAGE_SIZE, PROT_READ).unwrap();
    p.mprotect(a, PAGE_SIZE, RW).unwrap();
    assert!(!writable(&p, a));
    p.write(a, &[8]).unwrap();
    assert_eq!((peek(&p, &pool, a), peek(&c, &pool, a)), (8, 7));
    drop(p.destroy());
    drop(c.destroy());
    assert_eq!(live(&pool), 0);
}

/// `MADV_DONTFORK` areas are not in the child, `MADV_WIPEONFORK` ones are there and read zero;
/// `MAP_SHARED` anonymous memory is shared: a write is seen on both sides and never copied.
#[test]
fn dontfork_wipeonfork_and_shared_memory() {
    let pool = Pool::default();
    let mut p = parent(&pool, false);
    let keep = p.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    let gone = p.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    let wiped = p.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    let shared = p.mmap(0, PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    let untouched = p.mmap(0, PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    for (va, b) in [(keep, 1), (gone, 2), (wiped, 3), (shared, 4)] {
        p.write(va, &[b]).unwrap();
    }
    p.madvise(gone, PAGE_SIZE, MADV_DONTFORK).unwrap();
    p.madvise(wiped, PAGE_SIZE, MADV_WIPEONFORK).unwrap();
    let mut c = fork(&mut p, &pool, 6).unwrap();
    c.vm().check();
    assert!(c.vm().find(gone).is_none() && c.vm().find(wiped).is_some());
    assert_eq!((peek(&c, &pool, keep), peek(&c, &pool, wiped), peek(&p, &pool, wiped)), (1, 0, 3));
    assert_eq!(c.stats().data_frames, 3, "the kept page and the shared ones");
    c.write(untouched, &[7]).unwrap();
    assert_eq!(peek(&p, &pool, untouched), 7, "shared memory untouched before the fork is shared too");
    c.write(shared, &[5]).unwrap();
    assert_eq!(peek(&p, &pool, shared), 5, "shared memory: the parent sees the child's write");
    p.write(shared, &[6]).unwrap();
    assert_eq!(peek(&c, &pool, shared), 6);
    assert_eq!(c.stats().cow_copies + p.stats().cow_copies, 0);
    // The parent's private pages of the excluded areas are its own: written in place.
    p.write(gone, &[9]).unwrap();
    assert_eq!(p.stats().cow_copies, 0);
    drop(p.destroy());
    drop(c.destroy());
    assert_eq!(live(&pool), 0);
}

/// A 2 MiB block is shared as a block and split only where written; a block all of whose
/// frames have become the last reference is made writable whole, still a block.
#[test]
fn blocks_are_shared_whole_and_split_only_when_written() {
    let pool = Pool::default();
    pool.0.borrow_mut().contiguous = true;
    let mut p = parent(&pool, true);
    let a = p.mmap(0, 4 * BLOCK, RW, ANON, -1, 0).unwrap();
    let block = a.next_multiple_of(BLOCK);
    p.write(block, &[1]).unwrap();
    assert_eq!(p.space().query(VirtAddr(block)).unwrap().size, BLOCK);
    let mut c = fork(&mut p, &pool, 6).unwrap();
    assert_eq!(c.space().query(VirtAddr(block)).unwrap().size, BLOCK, "the child maps a block");
    assert_eq!(p.space().query(VirtAddr(block)).unwrap().size, BLOCK, "the parent's stays one");
    assert_eq!(live(&pool) as u64, BLOCK_PAGES);
    c.write(block + 5 * PAGE_SIZE, &[2]).unwrap();
    let leaf = c.space().query(VirtAddr(block + 5 * PAGE_SIZE)).unwrap();
    assert_eq!(leaf.size, PAGE_SIZE);
    assert!(
        c.space().query(VirtAddr(block + BLOCK / 2)).unwrap().contiguous,
        "untouched runs keep their hint"
    );
    assert_eq!((live(&pool) as u64, peek(&p, &pool, block + 5 * PAGE_SIZE)), (BLOCK_PAGES + 1, 0));
    drop(c.destroy());
    // Every frame of the parent's block is its own again: one permission change, still a block.
    p.write(block + 7 * PAGE_SIZE, &[3]).unwrap();
    assert_eq!(p.stats().cow_reuses, 1);
    let leaf = p.space().query(VirtAddr(block)).unwrap();
    assert!(leaf.size == BLOCK && leaf.attrs.access().writable(), "{leaf:?}");
    drop(p.destroy());
    assert_eq!(live(&pool), 0);
}

/// A contiguous run that two areas share (a name, or `MADV_DONTFORK`, set on its second half
/// splits the area, not the run): fork never leaves one hint over read-only and writable
/// entries (the page copy leaves the cut run to the protection that clears its hint first).
/// Found by the strict model with 16 KiB pages.
#[test]
fn a_run_two_areas_share_is_never_half_write_protected_under_one_hint() {
    for dontfork in [false, true] {
        let pool = Pool::default();
        pool.0.borrow_mut().contiguous = true;
        let mut p = parent(&pool, true);
        let a = p.mmap(0, 8 * RUN, RW, ANON, -1, 0).unwrap();
        let run = a.next_multiple_of(RUN);
        p.write(run, &[1]).unwrap();
        assert!(p.space().query(VirtAddr(run)).unwrap().contiguous, "a write fault maps a whole run");
        let (half, rest) = (run + RUN / 2, a + 8 * RUN - (run + RUN / 2));
        if dontfork {
            p.madvise(half, rest, MADV_DONTFORK).unwrap();
        } else {
            p.vm_mut().set_anon_name(half, rest, Some(b"half")).unwrap();
        }
        let mut c = fork(&mut p, &pool, 6).unwrap();
        let pages = |m: &Cow| -> Vec<_> {
            (0..RUN_PAGES).filter_map(|i| m.space().query(VirtAddr(run + i * PAGE_SIZE))).collect()
        };
        for (m, side) in [(&p, "parent"), (&c, "child")] {
            let leaves = pages(m);
            let hinted = leaves.iter().filter(|l| l.contiguous).count();
            let writable = leaves.iter().filter(|l| l.attrs.access().writable()).count();
            assert!(hinted == 0 || (hinted as u64 == RUN_PAGES && writable == 0), "{side}: {leaves:?}");
            // The first half is shared copy-on-write: read-only on both sides.
            assert!(leaves[..RUN_PAGES as usize / 2].iter().all(|l| !l.attrs.access().writable()), "{side}");
        }
        // The second half: the parent's own (writable) with MADV_DONTFORK, absent in the child.
        let (parent_half, child_pages) = (&pages(&p)[RUN_PAGES as usize / 2..], pages(&c).len() as u64);
        assert_eq!(parent_half.iter().all(|l| l.attrs.access().writable()), dontfork);
        assert_eq!(child_pages, if dontfork { RUN_PAGES / 2 } else { RUN_PAGES });
        // Writes copy on both sides, each seeing its own.
        p.write(run + PAGE_SIZE, &[2]).unwrap();
        c.write(run + PAGE_SIZE, &[3]).unwrap();
        assert_eq!((peek(&p, &pool, run + PAGE_SIZE), peek(&c, &pool, run + PAGE_SIZE)), (2, 3));
        assert_eq!((peek(&p, &pool, run), peek(&c, &pool, run)), (1, 1));
        drop(c.destroy());
        drop(p.destroy());
        assert_eq!(live(&pool), 0);
    }
}

/// A fork that cannot count a reference fails with ENOMEM at every point, leaving the parent's
/// contents, frames and references as they were and no frame leaked. The pages it had already
/// write-protected stay so (as a failed `dup_mmap` leaves them on Linux), and the first write to
/// each makes it writable again in place: the same frame, no copy.
#[test]
fn a_failed_fork_keeps_the_parent_s_pages_and_references_at_every_failure_point() {
    let mut left_read_only = 0;
    for k in 0..20 {
        let pool = Pool::default();
        let mut p = parent(&pool, false);
        let a = p.mmap(0, 6 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
        let b = p.mmap(0, 6 * PAGE_SIZE, PROT_READ, ANON, -1, 0).unwrap();
        for i in 0..6 {
            p.write(a + i * PAGE_SIZE, &[i as u8 + 1]).unwrap();
            p.fault(b + i * PAGE_SIZE, Access::Read).unwrap();
        }
        let frames: Vec<_> = (0..6).map(|i| p.space().translate(VirtAddr(a + i * PAGE_SIZE))).collect();
        pool.0.borrow_mut().share_budget = Some(k);
        match fork(&mut p, &pool, 6) {
            Err(e) => {
                assert!(k < 12, "fork failed with budget {k}");
                assert_eq!(e, Errno::ENOMEM);
                assert!(pool.0.borrow().refs.values().all(|&n| n == 1));
                for i in 0..6 {
                    let va = a + i * PAGE_SIZE;
                    assert_eq!(peek(&p, &pool, va), i as u8 + 1);
                    left_read_only += u32::from(!writable(&p, va));
                    p.write(va + 1, &[0xee]).unwrap();
                    assert!(writable(&p, va));
                    assert_eq!(p.space().translate(VirtAddr(va)), frames[i as usize], "written in place");
                }
            }
            Ok(c) => {
                assert!(k >= 12);
                drop(c.destroy());
            }
        }
        assert_eq!(live(&pool), 12);
        drop(p.destroy());
        assert_eq!(live(&pool), 0);
    }
    assert!(left_read_only > 0, "no failure point came after a page was write-protected");
}

/// Random forks, writes, unmaps and exits over a family of up to four memories, against a model
/// of what each one's pages hold; the pool's reference counts must equal the number of
/// memories mapping each frame.
#[test]
fn random_families_match_the_page_model() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    const PAGES: u64 = 24;
    for _round in 0..30 {
        let pool = Pool::default();
        let mut p = parent(&pool, false);
        let a = p.mmap(0, PAGES * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
        let mut family: Vec<(Cow, BTreeMap<u64, u8>)> = std::vec![(p, BTreeMap::new())];
        let mut asid = 6;
        for _ in 0..120 {
            let i = rng(family.len() as u64) as usize;
            match rng(10) {
                0 if family.len() < 4 => {
                    let pages = family[i].1.clone();
                    let c = fork(&mut family[i].0, &pool, asid).unwrap();
                    asid += 1;
                    family.push((c, pages));
                }
                1 if family.len() > 1 => {
                    let (m, _) = family.swap_remove(i);
                    drop(m.destroy());
                }
                2 => {
                    let page = rng(PAGES);
                    let (m, pages) = &mut family[i];
                    m.madvise(a + page * PAGE_SIZE, PAGE_SIZE, crate::vm::advice::MADV_DONTNEED).unwrap();
                    pages.remove(&page);
                }
                _ => {
                    let page = rng(PAGES);
                    let byte = rng(255) as u8 + 1;
                    let (m, pages) = &mut family[i];
                    m.write(a + page * PAGE_SIZE, &[byte]).unwrap();
                    pages.insert(page, byte);
                }
            }
            let mut mapped: BTreeMap<u64, u32> = BTreeMap::new();
            for (m, pages) in &family {
                for page in 0..PAGES {
                    let va = a + page * PAGE_SIZE;
                    assert_eq!(peek(m, &pool, va), pages.get(&page).copied().unwrap_or(0));
                    if let Some(pa) = m.space().translate(VirtAddr(va)) {
                        *mapped.entry(pa.0).or_default() += 1;
                    }
                }
            }
            assert_eq!(pool.0.borrow().refs, mapped, "reference counts");
        }
        for (m, _) in family {
            drop(m.destroy());
        }
        assert_eq!(live(&pool), 0);
    }
}
