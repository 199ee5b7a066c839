//! Host tests of `mremap`, `mincore`, `msync` and the `mlock` family: Linux 6.1's errno values
//! in its order, and the table effects (a move takes the entries with one flush and allocates
//! nothing; residency is read from the tables; a lock populates and refuses reclaim advice).

use super::*;
use crate::vm::advice::{MADV_DONTNEED_LOCKED, MADV_FREE};
use crate::vm::flags::{MAP_LOCKED, MAP_SHARED};
use crate::vm::map::lock::{
    MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT, MLOCK_ONFAULT, MS_ASYNC, MS_INVALIDATE, MS_SYNC,
};
use crate::vm::map::remap::{MREMAP_DONTUNMAP, MREMAP_FIXED, MREMAP_MAYMOVE};
use crate::vm::prot::PROT_EXEC;

const P: u64 = PAGE_SIZE;
const MIB: u64 = 1 << 20;
const MAYMOVE: u64 = MREMAP_MAYMOVE;

/// One row of an errno table: what it checks, the arguments, the answer.
type Row<A, R> = (&'static str, A, Result<R, Errno>);
/// `mremap`'s five arguments.
type RemapArgs = (u64, u64, u64, u64, u64);

/// The bytes of the page at `va` as the program would read them (zero when not present).
fn read_page<T: Translation>(m: &UserMemory<T, Recorder, Targets, Frames>, va: u64) -> Vec<u8> {
    match m.space().translate(VirtAddr(va)) {
        Some(pa) => {
            m.frames().contents.get(&(pa.0 & !(P - 1))).cloned().unwrap_or_else(|| std::vec![0; 4096])
        }
        None => std::vec![0; 4096],
    }
}

/// `mincore` as the kernel loops it: the whole vector, or the errno after the filled prefix.
fn mincore_all(m: &Mem, addr: u64, len: u64) -> (Vec<u8>, Result<(), Errno>) {
    let pages = match m.vm().mincore_pages(addr, len) {
        Ok(p) => p as usize,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let mut out = std::vec![0xffu8; pages];
    let mut done = 0;
    while done < pages {
        let chunk = (pages - done).min(4096);
        match m.mincore(addr + done as u64 * P, &mut out[done..done + chunk]) {
            Ok(n) => done += n,
            Err(e) => {
                out.truncate(done);
                return (out, Err(e));
            }
        }
    }
    (out, Ok(()))
}

#[test]
fn mremap_errno_order_is_linux_6_1() {
    use linux_abi::errno::consts::*;
    let mut m = memory(true);
    let a = m.mmap(0, 8 * P, RW, ANON, -1, 0).unwrap();
    // A second mapping right after the first, different protection (so no merge).
    let b = a + 8 * P;
    m.mmap(b, 4 * P, PROT_READ, ANON | MAP_FIXED, -1, 0).unwrap();
    let far = 0x5000_0000_0000u64;
    // A page-aligned address below mmap_min_addr (64 KiB); with 64 KiB pages only 0 is.
    let low = if P < 0x1_0000 { P } else { 0 };
    #[rustfmt::skip]
    let table: &[Row<RemapArgs, u64>] = &[
        ("unknown flag", (a, P, P, 8, 0), Err(EINVAL)),
        ("FIXED without MAYMOVE", (a, P, P, MREMAP_FIXED, far), Err(EINVAL)),
        ("DONTUNMAP without MAYMOVE", (a, P, P, MREMAP_DONTUNMAP, 0), Err(EINVAL)),
        ("DONTUNMAP resizing", (a, P, 2 * P, MAYMOVE | MREMAP_DONTUNMAP, 0), Err(EINVAL)),
        // Flag checks come before the alignment check, which comes before the lookup.
        ("flags before alignment", (a + 1, P, P, 8, 0), Err(EINVAL)),
        ("unaligned old", (a + 1, P, P, 0, 0), Err(EINVAL)),
        ("new_len 0", (far, P, 0, 0, 0), Err(EINVAL)),
        ("new_len wraps to 0", (a, P, u64::MAX - 10, MAYMOVE, 0), Err(EINVAL)),
        ("no mapping at old", (far, P, 2 * P, MAYMOVE, 0), Err(EFAULT)),
        ("old range past its mapping", (a, 12 * P, 16 * P, MAYMOVE, 0), Err(EFAULT)),
        ("old_len 0 on private memory", (a, 0, P, MAYMOVE, 0), Err(EINVAL)),
        // mremap_to's own checks, after the lookup.
        ("FIXED unaligned new", (a, P, P, MAYMOVE | MREMAP_FIXED, far + 1), Err(EINVAL)),
        ("FIXED past TASK_SIZE", (a, P, 2 * P, MAYMOVE | MREMAP_FIXED, (1 << 48) - P), Err(EINVAL)),
        ("FIXED overlapping", (a, 4 * P, 4 * P, MAYMOVE | MREMAP_FIXED, a + 2 * P), Err(EINVAL)),
        ("DONTUNMAP hint overlapping", (a, 4 * P, 4 * P, MAYMOVE | MREMAP_DONTUNMAP, a + 2 * P), Err(EINVAL)),
        ("FIXED past its mapping", (a, 12 * P, 12 * P, MAYMOVE | MREMAP_FIXED, far), Err(EFAULT)),
        ("FIXED below mmap_min_addr", (a, P, P, MAYMOVE | MREMAP_FIXED, low), Err(EPERM)),
        // No room after `a` and no MAYMOVE.
        ("grow without room", (a, 8 * P, 9 * P, 0, 0), Err(ENOMEM)),
        // Equal lengths are a shrink by nothing: the address, even past the mapping's end.
        ("same length", (a, 12 * P, 12 * P, 0, 0), Ok(a)),
    ];
    for &(what, (old, ol, nl, f, na), want) in table {
        assert_eq!(m.mremap(old, ol, nl, f, na), want, "{what}");
        m.vm().check();
    }
    // Nothing above changed the areas.
    assert_eq!(m.vm().mappings_in(a, b + 4 * P).count(), 2);
    // DONTUNMAP on shared memory: refused (see the module documentation of vm::map::remap).
    let s = m.mmap(0, 2 * P, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    assert_eq!(m.mremap(s, 2 * P, 2 * P, MAYMOVE | MREMAP_DONTUNMAP, 0), Err(EINVAL));
    // old_len 0 of shared memory is a duplicate, which only a move can place.
    assert_eq!(m.mremap(s, 0, P, 0, 0), Err(ENOMEM));
}

#[test]
fn mremap_shrinks_grows_in_place_and_replaces_a_fixed_target() {
    let mut m = memory(true);
    let a = m.mmap(0, 8 * P, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(m.stats().data_frames, 8);
    // Shrink: the tail goes, its frames back after the flush.
    assert_eq!(m.mremap(a, 8 * P, 3 * P, 0, 0), Ok(a));
    assert_eq!((m.stats().data_frames, m.frames().live.len()), (3, 3));
    assert!(m.vm().find(a + 3 * P).is_none());
    // Grow in place into the freed space: same address, one area, old pages kept.
    let kept = m.space().translate(VirtAddr(a)).unwrap();
    assert_eq!(m.mremap(a, 3 * P, 6 * P, 0, 0), Ok(a));
    assert_eq!(m.vm().find(a).unwrap().end, a + 6 * P);
    assert_eq!(m.space().translate(VirtAddr(a)), Some(kept));
    assert_eq!(m.stats().data_frames, 3);
    // FIXED onto a populated target: the target's frames go, the source's frames move.
    let t = m.mmap(0, 6 * P, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(m.frames().live.len(), 9);
    m.write(a + 5, b"moved").unwrap();
    let moved_pa = m.space().translate(VirtAddr(a)).unwrap();
    assert_eq!(m.mremap(a, 6 * P, 6 * P, MAYMOVE | MREMAP_FIXED, t), Ok(t));
    assert_eq!(m.space().translate(VirtAddr(t)), Some(moved_pa));
    assert_eq!(&read_page(&m, t)[5..10], b"moved");
    assert!(m.vm().find(a).is_none() && m.space().query(VirtAddr(a)).is_none());
    // 9 frames before, the target's 6 freed, the source's 3 moved.
    assert_eq!((m.stats().data_frames, m.frames().live.len()), (3, 3));
    m.vm().check();
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty());
}

/// The point of moving entries: 64 MiB (of 2 MiB or 32 MiB blocks; of pages with 64 KiB pages,
/// whose blocks are larger) move with one flush and no data frame, and blocks stay blocks; the
/// data is where the program left it.
#[test]
fn a_64_mib_move_allocates_nothing_and_flushes_once() {
    for range in [true, false] {
        move_64_mib(range);
    }
}

fn move_64_mib(range: bool) {
    let mut m = memory(range);
    m.set_large_faults(LargeFaults::ALL);
    m.frames_mut_for_test().contiguous = true;
    m.frames_mut_for_test().free_frames = 1 << 20;
    let len = 64 * MIB;
    let a = m.mmap(0, len, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    // Level-2 blocks: 32 of 2 MiB, 2 of 32 MiB; none of 512 MiB (64 KiB pages map it in pages).
    let blocks = per_granule(32, 2, 0);
    assert_eq!(len / BLOCK, blocks);
    if blocks > 0 {
        assert_eq!(a % BLOCK, 0);
    }
    // Something right after it, so growing must move.
    m.mmap(a + len, P, PROT_READ, ANON | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.stats().fault_blocks, blocks);
    for i in 0..64 {
        m.write(a + i * MIB + 8, &(i as u32).to_le_bytes()).unwrap();
    }
    let (frames_before, next_before) = (m.stats().data_frames, m.frames().next);
    let (flushes, tlbi_before) = (m.space().stats().flushes, tlbis(&m).len());
    // Grown by a block, so that the new length is a multiple of the block and the new place
    // aligned to it (THP alignment): the blocks move as blocks.
    let b = m.mremap(a, len, len + BLOCK, MAYMOVE, 0).unwrap();
    assert_ne!(b, a);
    let tlbi_after = tlbis(&m).len();
    std::println!(
        "64 MiB mremap (FEAT_TLBIRANGE {range}): {} flush, TLBIs {:x?}, {} frames allocated",
        m.space().stats().flushes - flushes,
        &tlbis(&m)[tlbi_before..],
        m.frames().next - next_before
    );
    // One range TLBI with FEAT_TLBIRANGE; without it one per block (32 or 2 leaves, within the
    // planner's per-entry bound), or with 64 KiB pages one whole flush (1024 pages are past it).
    assert_eq!(tlbi_after - tlbi_before, if range { 1 } else { per_granule(32, 2, 1) });
    assert_eq!(m.space().stats().flushes - flushes, 1, "one gathered flush");
    assert_eq!(m.frames().next, next_before, "no frame allocated");
    assert_eq!(m.stats().data_frames, frames_before);
    for i in 0..64 {
        assert_eq!(read_page(&m, b + i * MIB)[8..12], (i as u32).to_le_bytes(), "MiB {i}");
        assert!(m.space().query(VirtAddr(a + i * MIB)).is_none());
    }
    for i in 0..blocks {
        assert_eq!(m.space().query(VirtAddr(b + i * BLOCK)).unwrap().size, BLOCK, "block {i}");
    }
    // The grown part is demand paged, zero.
    assert!(m.space().query(VirtAddr(b + len)).is_none());
    assert_eq!(m.vm().find(b).unwrap().end, b + len + BLOCK);
    assert!(m.vm().find(a).is_none());
    m.vm().check();
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty(), "every moved frame freed exactly once");
}

#[test]
fn dontunmap_keeps_the_source_which_then_reads_zero() {
    let mut m = memory(true);
    let a = m.mmap(0, 4 * P, RW, ANON, -1, 0).unwrap();
    m.write(a + 3 * P, b"data").unwrap();
    m.mlock(a, 4 * P).unwrap();
    let b = m.mremap(a, 4 * P, 4 * P, MAYMOVE | MREMAP_DONTUNMAP, 0).unwrap();
    assert_ne!(a, b);
    assert_eq!(&read_page(&m, b + 3 * P)[..4], b"data");
    // The source stays mapped, unlocked, empty: a fault gives a zero page.
    let src = m.vm().find(a).copied().unwrap();
    assert!(!src.flags.contains(VmaFlags::LOCKED));
    assert!(m.vm().find(b).unwrap().flags.contains(VmaFlags::LOCKED));
    assert!(m.space().query(VirtAddr(a + 3 * P)).is_none());
    m.fault(a + 3 * P, Access::Read).unwrap();
    assert_eq!(read_page(&m, a + 3 * P), std::vec![0u8; 4096]);
    m.vm().check();
}

#[test]
fn a_moved_code_area_stays_in_the_code_window() {
    let mut m = memory(true);
    let code = m.mmap(0, 4 * P, PROT_READ | PROT_EXEC, ANON, -1, 0).unwrap();
    let (wb, we) = m.vm().code_window_range().unwrap();
    assert!(wb <= code && code < we);
    // Something right after it, so growing must move.
    m.mmap(code + 4 * P, P, PROT_READ | PROT_EXEC, ANON | MAP_FIXED, -1, 0).unwrap();
    m.mprotect(code + 4 * P, P, PROT_READ).unwrap();
    let moved = m.mremap(code, 4 * P, 8 * P, MAYMOVE, 0).unwrap();
    assert_ne!(moved, code);
    assert!(wb <= moved && moved + 8 * P <= we, "{moved:#x} outside [{wb:#x}, {we:#x})");
    assert_eq!(m.vm().code_window().placed_outside, 0);
    // A data area never moves into the window.
    let d = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    m.mmap(d + 2 * P, P, PROT_READ, ANON | MAP_FIXED, -1, 0).unwrap();
    let dm = m.mremap(d, 2 * P, 4 * P, MAYMOVE, 0).unwrap();
    assert!(dm >= we || dm + 4 * P <= wb);
    m.vm().check();
}

#[test]
fn mincore_reports_residency_from_the_tables() {
    let mut m = memory(true);
    let a = m.mmap(0, 8 * P, RW, ANON, -1, 0).unwrap();
    assert_eq!(mincore_all(&m, a, 8 * P), (std::vec![0; 8], Ok(())));
    m.fault(a + P, Access::Write).unwrap();
    m.fault(a + 6 * P, Access::Read).unwrap();
    assert_eq!(mincore_all(&m, a, 8 * P), (std::vec![0, 1, 0, 0, 0, 0, 1, 0], Ok(())));
    // A partial last page counts as a page.
    assert_eq!(mincore_all(&m, a, P + 1), (std::vec![0, 1], Ok(())));
    m.madvise(a, 8 * P, MADV_DONTNEED).unwrap();
    assert_eq!(mincore_all(&m, a, 8 * P), (std::vec![0; 8], Ok(())));
    // Errors: unaligned, out of the address space, a hole (after filling what precedes).
    assert_eq!(mincore_all(&m, a + 1, P).1, Err(Errno::EINVAL));
    assert_eq!(mincore_all(&m, (1 << 48) - P, 2 * P).1, Err(Errno::ENOMEM));
    m.fault(a + 7 * P, Access::Write).unwrap();
    assert_eq!(mincore_all(&m, a + 6 * P, 4 * P), (std::vec![0, 1], Err(Errno::ENOMEM)));
    assert_eq!(mincore_all(&m, a - P, 2 * P), (Vec::new(), Err(Errno::ENOMEM)));
    assert_eq!(mincore_all(&m, a, 0), (Vec::new(), Ok(())));
    // A level-2 block reports all of its pages.
    let mut l = large_memory();
    let b = l.mmap(0, 2 * BLOCK, RW, ANON, -1, 0).unwrap();
    l.fault(b, Access::Write).unwrap();
    let (v, r) = mincore_all(&l, b, 2 * BLOCK);
    assert_eq!(r, Ok(()));
    let n = BLOCK_PAGES as usize;
    assert_eq!(
        (v[..n].iter().filter(|&&x| x == 1).count(), v[n..].iter().filter(|&&x| x == 1).count()),
        (n, 0)
    );
}

#[test]
fn msync_checks_as_linux() {
    use linux_abi::errno::consts::*;
    let mut m = memory(true);
    let a = m.mmap(0, 4 * P, RW, ANON, -1, 0).unwrap();
    m.mmap(a + 6 * P, 2 * P, RW, ANON | MAP_FIXED, -1, 0).unwrap();
    #[rustfmt::skip]
    let table: &[Row<(u64, u64, u64), ()>] = &[
        ("unknown flag", (a, P, 8), Err(EINVAL)),
        ("unaligned", (a + 1, P, MS_SYNC), Err(EINVAL)),
        ("ASYNC and SYNC", (a, P, MS_ASYNC | MS_SYNC), Err(EINVAL)),
        ("zero length", (a + 1000 * P, 0, MS_SYNC), Ok(())),
        ("wrapping", (a, u64::MAX - 2 * P, MS_SYNC), Err(ENOMEM)),
        ("mapped", (a, 4 * P, MS_SYNC), Ok(())),
        ("partial page", (a, 3 * P + 1, MS_ASYNC), Ok(())),
        ("hole", (a, 8 * P, MS_SYNC), Err(ENOMEM)),
        ("hole, ASYNC", (a, 8 * P, MS_ASYNC), Err(ENOMEM)),
        ("past the end", (a + 6 * P, 4 * P, MS_INVALIDATE), Err(ENOMEM)),
        ("unmapped", (a + 4 * P, P, 0), Err(ENOMEM)),
    ];
    for &(what, (addr, len, flags), want) in table {
        assert_eq!(m.msync(addr, len, flags), want, "{what}");
    }
    // MS_INVALIDATE over a locked mapping is EBUSY, even after a hole.
    m.mlock(a + 6 * P, 2 * P).unwrap();
    assert_eq!(m.msync(a, 8 * P, MS_INVALIDATE), Err(EBUSY));
    assert_eq!(m.msync(a, 8 * P, MS_SYNC), Err(ENOMEM));
}

#[test]
fn mlock_populates_and_refuses_reclaim_advice() {
    use linux_abi::errno::consts::*;
    let mut m = memory(true);
    let a = m.mmap(0, 8 * P, RW, ANON, -1, 0).unwrap();
    // An unaligned start widens to whole pages.
    m.mlock(a + 10, 2 * P).unwrap();
    assert_eq!(m.stats().data_frames, 3);
    assert!(m.vm().find(a + 2 * P).unwrap().flags.contains(VmaFlags::LOCKED));
    assert!(!m.vm().find(a + 3 * P).unwrap().flags.contains(VmaFlags::LOCKED));
    // Linux: DONTNEED, FREE stop with EINVAL at a locked area; what precedes gets the advice.
    assert_eq!(m.madvise(a, 8 * P, MADV_DONTNEED), Err(EINVAL));
    assert_eq!(m.madvise(a, P, MADV_FREE), Err(EINVAL));
    assert_eq!(m.stats().data_frames, 3);
    m.fault(a + 5 * P, Access::Write).unwrap();
    assert_eq!(m.madvise(a + 5 * P, 3 * P, MADV_DONTNEED), Ok(()));
    assert_eq!(m.stats().data_frames, 3);
    // DONTNEED_LOCKED applies.
    m.madvise(a + 2 * P, P, MADV_DONTNEED_LOCKED).unwrap();
    assert_eq!(m.stats().data_frames, 2);
    // munlock, then DONTNEED works.
    m.munlock(a, 8 * P).unwrap();
    m.madvise(a, 8 * P, MADV_DONTNEED).unwrap();
    assert_eq!(m.stats().data_frames, 0);
    m.vm().check();
    // Errors in Linux's order.
    assert_eq!(m.mlock2(a, P, 2), Err(EINVAL));
    assert_eq!(m.mlock(a.wrapping_neg(), 2 * a), Err(EINVAL), "wrapping range");
    assert_eq!(m.mlock(a, 0), Ok(()));
    assert_eq!(m.mlock(a - P, 2 * P), Err(ENOMEM), "no mapping at the start");
    // A hole: the prefix stays locked and the call fails before populating.
    assert_eq!(m.mlock(a, 16 * P), Err(ENOMEM));
    assert!(m.vm().find(a).unwrap().flags.contains(VmaFlags::LOCKED));
    assert_eq!(m.stats().data_frames, 0);
    assert_eq!(m.munlock(a, 16 * P), Err(ENOMEM));
    // ONFAULT locks without populating.
    m.mlock2(a, 8 * P, MLOCK_ONFAULT).unwrap();
    assert_eq!(m.stats().data_frames, 0);
    assert!(m.vm().find(a).unwrap().flags.contains(VmaFlags::LOCKONFAULT));
    // PROT_NONE cannot be populated: ENOMEM (Linux's EFAULT turned POSIX); out of frames EAGAIN.
    let n = m.mmap(0, P, 0, ANON, -1, 0).unwrap();
    assert_eq!(m.mlock(n, P), Err(ENOMEM));
    m.frames_mut_for_test().limit = Some(2);
    assert_eq!(m.mlock(a, 8 * P), Err(EAGAIN));
    // The machine's last frames are not taken by a lock (nor by MAP_LOCKED, best effort).
    m.frames_mut_for_test().limit = None;
    m.frames_mut_for_test().free_frames = POPULATE_RESERVE_FRAMES;
    let before = m.stats().data_frames;
    assert_eq!(m.mlock(a, 8 * P), Err(EAGAIN));
    let l = m.mmap(0, 4 * P, RW, ANON | MAP_LOCKED, -1, 0).unwrap();
    assert!(m.vm().find(l).unwrap().flags.contains(VmaFlags::LOCKED));
    assert_eq!(m.stats().data_frames, before);
    m.vm().check();
}

#[test]
fn mlockall_locks_current_and_future_areas() {
    use linux_abi::errno::consts::*;
    let mut m = memory(true);
    for bad in [0, MCL_ONFAULT, 8, MCL_CURRENT | 8] {
        assert_eq!(m.mlockall(bad), Err(EINVAL), "{bad}");
    }
    let a = m.mmap(0, 4 * P, RW, ANON, -1, 0).unwrap();
    m.mlockall(MCL_CURRENT).unwrap();
    assert_eq!(m.stats().data_frames, 4);
    // Not FUTURE: a new mapping is not locked.
    let b = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    assert_eq!(m.stats().data_frames, 4);
    m.mlockall(MCL_FUTURE).unwrap();
    let c = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    assert!(m.vm().find(c).unwrap().flags.contains(VmaFlags::LOCKED));
    assert_eq!(m.stats().data_frames, 6);
    // The heap grows locked too.
    let brk = m.brk(0);
    m.brk(brk + 2 * P);
    assert_eq!(m.stats().data_frames, 8);
    // FUTURE | ONFAULT: locked, not populated. MAP_LOCKED alone populates.
    m.mlockall(MCL_FUTURE | MCL_ONFAULT).unwrap();
    let d = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    assert!(m.vm().find(d).unwrap().flags.contains(VmaFlags::LOCKONFAULT));
    assert_eq!(m.stats().data_frames, 8);
    m.munlockall();
    assert!(m.vm().iter().all(|v| !v.flags.contains(VmaFlags::LOCKED)));
    let e = m.mmap(0, 2 * P, RW, ANON | MAP_LOCKED, -1, 0).unwrap();
    assert!(m.vm().find(e).unwrap().flags.contains(VmaFlags::LOCKED));
    assert_eq!(m.stats().data_frames, 10);
    let _ = (a, b);
    m.vm().check();
}

/// Under pressure a lock, and `MAP_POPULATE`, reclaim this process's lazily freed pages before
/// they give up at the machine's last frames, as Linux's direct reclaim takes `MADV_FREE` pages
/// before an allocation fails; with nothing left to reclaim, a lock fails with `EAGAIN` as before.
#[test]
fn population_under_pressure_reclaims_lazily_freed_pages_first() {
    let mut m = memory(true);
    let f = m.mmap(0, 8 * P, RW, ANON, -1, 0).unwrap();
    for i in 0..8 {
        m.fault(f + i * P, Access::Write).unwrap();
    }
    m.madvise(f, 8 * P, MADV_FREE).unwrap();
    assert_eq!(m.lazily_freed(), [(f, f + 8 * P)]);
    let a = m.mmap(0, 4 * P, RW, ANON, -1, 0).unwrap();
    m.frames_mut_for_test().free_frames = POPULATE_RESERVE_FRAMES;
    m.frames_mut_for_test().frees_count = true;
    m.mlock(a, 4 * P).unwrap();
    assert!(m.lazily_freed().is_empty(), "the freed pages were reclaimed");
    assert_eq!(m.stats().data_frames, 4, "only the locked pages are held");
    assert!((0..8).all(|i| m.space().query(VirtAddr(f + i * P)).is_none()), "reclaimed pages unmapped");
    // MAP_POPULATE, the same: the 8 reclaimed frames above the reserve are what it may take.
    let g = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    for i in 0..2 {
        m.fault(g + i * P, Access::Write).unwrap();
    }
    m.madvise(g, 2 * P, MADV_FREE).unwrap();
    m.frames_mut_for_test().free_frames = POPULATE_RESERVE_FRAMES;
    let p = m.mmap(0, 2 * P, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert!(m.lazily_freed().is_empty());
    assert!((0..2).all(|i| m.space().query(VirtAddr(p + i * P)).is_some()), "populated");
    // Nothing left to reclaim: the lock stops at the reserve.
    let b = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    m.frames_mut_for_test().free_frames = POPULATE_RESERVE_FRAMES;
    assert_eq!(m.mlock(b, 2 * P), Err(Errno::EAGAIN));
    m.vm().check();
}

/// A locked new mapping that joins a locked neighbour above it is populated, and the call
/// returns: the population walks the new pages only, and used to loop for ever at their end,
/// where the joined mapping goes on (the memory-call fuzzer hung there). The same through
/// `mlockall(MCL_FUTURE)`.
#[test]
fn a_locked_mapping_that_joins_its_locked_neighbour_is_populated_and_returns() {
    let mut m = memory(true);
    let a = m.mmap(0, 4 * P, RW, ANON | MAP_LOCKED, -1, 0).unwrap();
    let b = m.mmap(0, 2 * P, RW, ANON | MAP_LOCKED, -1, 0).unwrap();
    assert_eq!(b + 2 * P, a, "placed just below (top-down)");
    let joined = m.vm().find(b).unwrap();
    assert_eq!((joined.start, joined.end), (b, a + 4 * P), "one mapping");
    assert_eq!(m.stats().data_frames, 6);
    m.mlockall(MCL_FUTURE).unwrap();
    let c = m.mmap(0, P, RW, ANON, -1, 0).unwrap();
    assert_eq!((c + P, m.vm().find(c).unwrap().end), (b, a + 4 * P), "joined again");
    assert_eq!(m.stats().data_frames, 7);
    m.vm().check();
}

/// Growth is new address space: `RLIMIT_AS` refuses it as Linux's `vma_to_resize`
/// (`may_expand_vm`) does, before anything changes; a shrink or a move of the same size passes.
#[test]
fn mremap_growth_is_charged_to_rlimit_as() {
    use crate::vm::limits::Rlimit;
    let mut m = memory(true);
    let a = m.mmap(0, 4 * P, RW, ANON, -1, 0).unwrap();
    let limit = Rlimit { cur: m.vm().mapped_bytes() + 2 * P, max: u64::MAX };
    m.vm_mut().set_rlimits(limit, Rlimit::INFINITY);
    assert_eq!(m.mremap(a, 4 * P, 8 * P, MAYMOVE, 0), Err(Errno::ENOMEM));
    assert_eq!(m.vm().find(a).unwrap().end, a + 4 * P);
    assert_eq!(m.mremap(a, 4 * P, 6 * P, MAYMOVE, 0), Ok(a));
    // DONTUNMAP keeps the source, so its copy is charged too.
    assert_eq!(m.mremap(a, 6 * P, 6 * P, MAYMOVE | MREMAP_DONTUNMAP, 0), Err(Errno::ENOMEM));
    assert_eq!(m.mremap(a, 6 * P, 2 * P, 0, 0), Ok(a));
    m.vm().check();
}

/// A move gathers its extents before anything changes: a move whose range cuts a 2 MiB block at
/// its start moves every page, and when any allocation the call makes fails (the extents'
/// list as it grows, the area map's room) the call is ENOMEM with nothing changed.
#[test]
fn mremap_gathers_its_extents_before_it_changes_anything() {
    let mut m = large_memory();
    let a = m.mmap(0, 2 * BLOCK, RW, ANON | MAP_POPULATE, -1, 0).unwrap();
    assert_eq!(a % BLOCK, 0);
    assert_eq!(m.stats().fault_blocks, 2);
    let from = a + BLOCK / 2; // inside the first block: the move splits it
    m.write(from + 3, b"cut").unwrap();
    let frames = m.stats().data_frames;
    // Every budget short of what the call needs: refused, nothing changed.
    let mut refusals = 0;
    for budget in 0.. {
        crate::vm::fallible::fail_after(Some(budget));
        let refused = m.mremap(from, BLOCK, BLOCK, MAYMOVE | MREMAP_FIXED, a - 2 * BLOCK);
        crate::vm::fallible::fail_after(None);
        if refused.is_ok() {
            // Enough at last: move it back for the checks below.
            assert_eq!(m.mremap(a - 2 * BLOCK, BLOCK, BLOCK, MAYMOVE | MREMAP_FIXED, from), Ok(from));
            break;
        }
        refusals += 1;
        assert_eq!(refused, Err(Errno::ENOMEM), "budget {budget}");
        assert_eq!(m.vm().find(from).map(|v| v.start), Some(a), "budget {budget}: the map is unchanged");
        assert!(m.vm().find(a - 2 * BLOCK).is_none(), "budget {budget}: no destination area");
        assert_eq!(&read_page(&m, from)[3..6], b"cut", "budget {budget}");
        assert_eq!(m.stats().data_frames, frames, "budget {budget}");
        m.vm().check();
    }
    assert!(refusals >= 2, "the extents' list and the area map's room: {refusals} refusals");
    let to = m.mremap(from, BLOCK, BLOCK, MAYMOVE | MREMAP_FIXED, a - 2 * BLOCK).unwrap();
    assert_eq!(to, a - 2 * BLOCK);
    assert_eq!(&read_page(&m, to)[3..6], b"cut");
    for p in 0..(BLOCK / P) {
        assert!(m.space().translate(VirtAddr(to + p * P)).is_some(), "page {p} moved");
        assert!(m.space().translate(VirtAddr(from + p * P)).is_none(), "page {p} left the source");
    }
    assert_eq!(m.stats().data_frames, frames, "moved, not copied or lost");
    m.vm().check();
    let (_, _, f) = m.destroy();
    assert!(f.live.is_empty());
}

/// 64 scattered pages moved in one pass (`AddressSpace::move_pages`): the pass takes nothing
/// from the heap (no list of extents, whose growth used to refuse such a move five times), and
/// the area map and the object ranges have room already, so a heap that has nothing left
/// refuses nothing; were it refused, nothing would have changed.
#[test]
fn mremap_in_one_pass_needs_no_heap() {
    let mut m = memory(true);
    let n = 64;
    let a = m.mmap(0, n * P, RW, ANON, -1, 0).unwrap();
    let b = m.mmap(0, n * P, 0, ANON, -1, 0).unwrap(); // PROT_NONE
    // Touched from the top down: no two neighbours' frames are contiguous, so each page is an
    // extent of its own.
    for i in (0..n).rev() {
        m.write(a + i * P, &[i as u8]).unwrap();
    }
    let mut refusals = 0;
    for budget in 0.. {
        crate::vm::fallible::fail_after(Some(budget));
        let r = m.mremap(a, n * P, n * P, MAYMOVE | MREMAP_FIXED, b);
        crate::vm::fallible::fail_after(None);
        if r == Ok(b) {
            break;
        }
        refusals += 1;
        assert_eq!(r, Err(Errno::ENOMEM), "budget {budget}");
        assert_eq!(m.vm().find(a).map(|v| (v.start, v.end)), Some((a, a + n * P)), "budget {budget}");
        // The PROT_NONE target as it was, or unmapped: Linux's mremap_to removes it first.
        assert!(m.vm().find(b).is_none_or(|v| v.prot.bits() == 0), "budget {budget}");
        for i in 0..n {
            assert_eq!(read_page(&m, a + i * P)[0], i as u8, "budget {budget}, page {i}");
        }
        m.vm().check();
    }
    // (A move that needs the extents' list is `mremap_gathers_its_extents_before_it_changes_anything`'s.)
    assert_eq!(refusals, 0, "a move in one pass asked the heap for something");
    for i in 0..n {
        assert_eq!(read_page(&m, b + i * P)[0], i as u8, "page {i} moved");
        assert!(m.space().translate(VirtAddr(a + i * P)).is_none());
    }
    let (_, _, f) = m.destroy();
    assert!(f.live.is_empty());
}

/// Table frames from the heap until the budget the test sets runs out.
#[derive(Clone, Default)]
struct Budget(std::rc::Rc<core::cell::Cell<Option<u32>>>);

// SAFETY: every frame is the test heap's, as `Heap` hands them out and takes them back.
unsafe impl Translation for Budget {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        match self.0.get() {
            Some(0) => return None,
            Some(n) => self.0.set(Some(n - 1)),
            None => {}
        }
        Heap.allocate_table()
    }
    fn deallocate_table(&mut self, pa: PhysAddr) {
        Heap.deallocate_table(pa);
    }
    fn table_ptr(&self, pa: PhysAddr) -> core::ptr::NonNull<[u64; crate::paging::ENTRIES_PER_TABLE]> {
        Heap.table_ptr(pa)
    }
}

/// A move whose destination's tables cannot be had fails with `ENOMEM` and changes nothing:
/// the pages stay where they were, with their data, in the area they were in (the tables are
/// reserved before the source changes; a move that unmapped first lost the pages). With enough
/// table frames, the same move succeeds and carries the data. Swept over every budget from
/// none to enough, for moves into a table the source shares and into fresh tables, and for a
/// source that empties its tables (so unmapping it first would free one the count relied on).
#[test]
fn a_move_without_tables_for_its_destination_changes_nothing() {
    // How the destination is chosen: by the kernel, a fixed place in another 1 GiB region, a
    // fixed place over a mapping it replaces (whose tables the unmap before the move may free),
    // or a fixed place just below the source in its table.
    #[derive(Clone, Copy, PartialEq)]
    enum To {
        Placed,
        Far,
        OverAMapping,
        Below,
    }
    for (what, pages, new_pages, to) in [
        ("three pages grown to 64, placed by the kernel", 3u64, 64u64, To::Placed),
        ("one page moved to another 1 GiB region", 1, 1, To::Far),
        ("a whole table's worth moved far", 8, 8, To::Far),
        ("four pages moved over a mapping of their size", 4, 4, To::OverAMapping),
        ("eight pages shrunk to three, moved just below", 8, 3, To::Below),
    ] {
        let mut succeeded = false;
        for budget in 0..8u32 {
            let tables = Budget::default();
            let mut m = memory_on(tables.clone(), true);
            let a = m.mmap(0, pages * P, RW, ANON, -1, 0).unwrap();
            for i in 0..pages {
                m.write(a + i * P, &(i as u32 + 1).to_le_bytes()).unwrap();
            }
            let fixed = match to {
                To::Placed => 0,
                To::Far => (a & !((1 << 30) - 1)) - (1 << 30), // the 1 GiB region below
                To::OverAMapping => {
                    let b = (a & !((1 << 30) - 1)) - (1 << 30);
                    m.mmap(b, pages * P, RW, ANON | MAP_FIXED, -1, 0).unwrap();
                    for i in 0..pages {
                        m.write(b + i * P, &[0xee]).unwrap();
                    }
                    b
                }
                To::Below => a - 16 * P,
            };
            let kept = pages.min(new_pages);
            let (frames_before, data_before) = (m.frames().live.len(), m.stats().data_frames);
            tables.0.set(Some(budget));
            let r = if to == To::Placed {
                m.mremap(a, pages * P, new_pages * P, MAYMOVE, 0)
            } else {
                m.mremap(a, pages * P, new_pages * P, MAYMOVE | MREMAP_FIXED, fixed)
            };
            tables.0.set(None);
            let at = match r {
                Ok(b) => {
                    succeeded = true;
                    assert!(m.vm().find(a).is_none() || b == a, "{what}, budget {budget}: the source went");
                    b
                }
                Err(e) => {
                    assert_eq!(e, Errno::ENOMEM, "{what}, budget {budget}");
                    assert!(!succeeded, "{what}: a larger budget than one that succeeded failed");
                    let v = m.vm().find(a).copied().expect("the source area is still there");
                    assert_eq!((v.start, v.end), (a, a + pages * P), "{what}, budget {budget}");
                    a
                }
            };
            let shown = if r.is_ok() { kept } else { pages };
            for i in 0..shown {
                let page = read_page(&m, at + i * P);
                assert_eq!(page[..4], (i as u32 + 1).to_le_bytes(), "{what}, budget {budget}, page {i}");
            }
            if r.is_err() {
                // MREMAP_FIXED's target is unmapped before the move, and stays so (Linux too).
                let replaced = if to == To::OverAMapping { pages } else { 0 };
                let want = (frames_before - replaced as usize, data_before - replaced);
                assert_eq!((m.frames().live.len(), m.stats().data_frames), want, "{what}, budget {budget}");
            }
            m.vm().check();
            let (_, _, frames) = m.destroy();
            assert!(frames.live.is_empty(), "{what}, budget {budget}: every frame freed once");
        }
        assert!(succeeded, "{what}: no budget was enough");
    }
}

/// A move to a fixed place that Linux refuses after it unmapped the target (here the old range
/// runs past its mapping: `EFAULT`, which `mremap_to` finds after `do_munmap`) leaves the target
/// unmapped in the tables too, its frames freed: no page stays mapped where no area is.
#[test]
fn a_refused_fixed_move_unmaps_its_target_from_the_tables_too() {
    let mut m = memory(true);
    let a = m.mmap(0, 2 * P, RW, ANON, -1, 0).unwrap();
    m.write(a, &[1]).unwrap();
    let t = (a & !((1 << 30) - 1)) - (1 << 30);
    m.mmap(t, 2 * P, RW, ANON | MAP_FIXED, -1, 0).unwrap();
    m.write(t, &[2]).unwrap();
    m.write(t + P, &[3]).unwrap();
    let frames = m.stats().data_frames;
    assert_eq!(m.mremap(a, 3 * P, 3 * P, MAYMOVE | MREMAP_FIXED, t), Err(Errno::EFAULT));
    assert!(m.vm().find(t).is_none(), "Linux unmaps the target first");
    assert!(m.space().query(VirtAddr(t)).is_none() && m.space().query(VirtAddr(t + P)).is_none());
    assert_eq!(m.stats().data_frames, frames - 2);
    assert_eq!(read_page(&m, a)[0], 1, "the source is untouched");
    let (_, _, frames) = m.destroy();
    assert!(frames.live.is_empty());
}
