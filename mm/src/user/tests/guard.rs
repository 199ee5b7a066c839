//! Host tests of guard regions (`MADV_GUARD_INSTALL`/`REMOVE`): a guarded page faults with
//! `Fault::Guard` and is never demand-paged, the area map is not split, the pages go back, and
//! the guards follow `MADV_DONTNEED` (kept), `munmap`/`MAP_FIXED` (gone), `mremap` (moved) and
//! `fork` (copied), as Linux 6.13's.

use super::fork::{Pool, flushes, fork, live, parent, peek};
use super::*;
use crate::user::guard::{MADV_GUARD_INSTALL, MADV_GUARD_REMOVE};
use crate::vm::flags::MAP_FIXED;

#[test]
fn guards_fault_without_splitting_the_area_and_follow_the_calls() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let a = m.mmap(0, 8 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    for i in 0..8 {
        m.write(a + i * PAGE_SIZE, &[1]).unwrap();
    }
    let areas = m.vm().map_count();
    m.madvise(a + 2 * PAGE_SIZE, 2 * PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    assert_eq!(m.vm().map_count(), areas, "no split");
    assert_eq!(live(&pool), 6, "the guarded pages were zapped");
    for access in [Access::Read, Access::Write, Access::Execute] {
        let want = if access == Access::Execute {
            Fault::Protection { prot: m.vm().find(a).unwrap().prot }
        } else {
            Fault::Guard
        };
        assert_eq!(m.fault(a + 3 * PAGE_SIZE, access), Err(want), "{access:?}");
    }
    assert_eq!(m.write(a + 2 * PAGE_SIZE, &[2]), Err(Errno::EFAULT), "a kernel copy is refused too");
    assert_eq!(m.madvise(a, 8 * PAGE_SIZE, crate::vm::advice::MADV_POPULATE_WRITE), Err(Errno::EFAULT));
    // DONTNEED keeps them.
    m.madvise(a, 8 * PAGE_SIZE, MADV_DONTNEED).unwrap();
    assert_eq!(m.fault(a + 2 * PAGE_SIZE, Access::Read), Err(Fault::Guard));
    m.fault(a + 4 * PAGE_SIZE, Access::Read).unwrap();
    // fork copies them.
    let mut c = fork(&mut m, &pool, 6).unwrap();
    assert_eq!(c.fault(a + 3 * PAGE_SIZE, Access::Read), Err(Fault::Guard));
    drop(c.destroy());
    // mremap moves them with the area.
    let b = m
        .mremap(
            a,
            8 * PAGE_SIZE,
            8 * PAGE_SIZE,
            crate::vm::map::remap::MREMAP_MAYMOVE | crate::vm::map::remap::MREMAP_FIXED,
            a + (64 << 20),
        )
        .unwrap();
    assert_eq!(m.fault(b + 2 * PAGE_SIZE, Access::Read), Err(Fault::Guard));
    assert_eq!(m.guard_ranges().unwrap(), [(b + 2 * PAGE_SIZE, b + 4 * PAGE_SIZE)]);
    // REMOVE takes only the guards; MAP_FIXED and munmap take them with the range.
    m.madvise(b + 3 * PAGE_SIZE, PAGE_SIZE, MADV_GUARD_REMOVE).unwrap();
    m.fault(b + 3 * PAGE_SIZE, Access::Read).unwrap();
    m.mmap(b + 2 * PAGE_SIZE, PAGE_SIZE, RW, ANON | MAP_FIXED, -1, 0).unwrap();
    m.fault(b + 2 * PAGE_SIZE, Access::Read).unwrap();
    m.madvise(b + 6 * PAGE_SIZE, PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    m.munmap(b + 6 * PAGE_SIZE, PAGE_SIZE).unwrap();
    assert!(m.guard_ranges().unwrap().is_empty());
    // Errors.
    assert_eq!(m.madvise(b + 1, PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::EINVAL));
    assert_eq!(m.madvise(b + 6 * PAGE_SIZE, 2 * PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::ENOMEM), "a hole");
    assert_eq!(
        m.guard_ranges().unwrap(),
        [(b + 7 * PAGE_SIZE, b + 8 * PAGE_SIZE)],
        "the page past it guarded"
    );
    m.mlock(b, PAGE_SIZE).unwrap();
    assert_eq!(m.madvise(b, PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::EINVAL), "locked");
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// The guards live in the tables: markers in unpopulated memory keep a last-level table (its
/// count holds them), `MADV_DONTNEED` keeps them, a removal that empties the table detaches it
/// with one flush, and `munmap` of a range where only markers are left does too.
#[test]
fn guards_are_markers_that_hold_their_table() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let a = m.mmap(0, 4 << 20, RW, ANON, -1, 0).unwrap();
    let g = (a + (2 << 20) - 1) & !((2 << 20) - 1); // a 2 MiB region inside the area
    let tables = m.stats().table_frames;
    m.madvise(g, 4 * PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    assert!(m.stats().table_frames > tables, "the markers are in a table");
    assert!(m.space().table().is_guard(VirtAddr(g + 3 * PAGE_SIZE)));
    assert!(!m.space().table().is_guard(VirtAddr(g + 4 * PAGE_SIZE)));
    m.space().table().check_occupancy();
    m.madvise(a, 4 << 20, MADV_DONTNEED).unwrap();
    assert_eq!(m.fault(g, Access::Write), Err(Fault::Guard), "DONTNEED keeps the markers");
    m.fault(g + 4 * PAGE_SIZE, Access::Write).unwrap();
    let with_page = m.stats().table_frames;
    // Removing two of the four leaves the table; the page next to them stays.
    m.madvise(g, 2 * PAGE_SIZE, MADV_GUARD_REMOVE).unwrap();
    assert_eq!(m.stats().table_frames, with_page);
    assert!(m.space().query(VirtAddr(g + 4 * PAGE_SIZE)).is_some(), "REMOVE keeps the pages");
    m.fault(g, Access::Read).unwrap();
    m.munmap(g, PAGE_SIZE).unwrap();
    m.munmap(g + 4 * PAGE_SIZE, PAGE_SIZE).unwrap();
    m.space().table().check_occupancy();
    assert_eq!(m.stats().table_frames, with_page, "the last markers hold the table");
    let before = flushes(&m);
    m.madvise(g + 2 * PAGE_SIZE, 2 * PAGE_SIZE, MADV_GUARD_REMOVE).unwrap();
    // The last-level table, and the tables above it that this empties (nothing else is mapped).
    assert_eq!(m.stats().table_frames, tables, "the emptied tables are detached");
    m.space().table().check_occupancy();
    assert_eq!(flushes(&m) - before, 1, "with one flush for the walk caches");
    // Markers alone, then munmap: the table goes with them.
    m.madvise(g + 2 * PAGE_SIZE, 2 * PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    assert_eq!(m.stats().table_frames, with_page);
    m.munmap(a, 4 << 20).unwrap();
    assert!(m.guard_ranges().unwrap().is_empty());
    assert!(m.stats().table_frames < with_page, "the markers' table is detached");
    m.space().table().check_occupancy();
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// As Linux moves guard markers with the entries: `mremap(MREMAP_DONTUNMAP)` leaves the
/// source without them (it reads zero), and a `MADV_WIPEONFORK` area reaches the child empty,
/// markers included, while other areas keep theirs.
#[test]
fn guards_move_with_the_entries_and_skip_wiped_areas_at_fork() {
    use crate::vm::map::remap::{MREMAP_DONTUNMAP, MREMAP_MAYMOVE};
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let a = m.mmap(0, 4 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.write(a, &[5]).unwrap();
    m.madvise(a + PAGE_SIZE, PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    let b = m.mremap(a, 4 * PAGE_SIZE, 4 * PAGE_SIZE, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, 0).unwrap();
    assert_ne!(a, b);
    assert_eq!(m.guard_ranges().unwrap(), [(b + PAGE_SIZE, b + 2 * PAGE_SIZE)]);
    assert_eq!(m.fault(b + PAGE_SIZE, Access::Read), Err(Fault::Guard));
    m.fault(a + PAGE_SIZE, Access::Read).unwrap();
    assert_eq!((peek(&m, &pool, a), peek(&m, &pool, b)), (0, 5), "the source reads zero");
    // fork: the wiped area's markers stay behind, the other area's go along.
    let w = m.mmap(0, 2 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.madvise(w, PAGE_SIZE, MADV_GUARD_INSTALL).unwrap();
    m.madvise(w, 2 * PAGE_SIZE, crate::vm::advice::MADV_WIPEONFORK).unwrap();
    let mut c = fork(&mut m, &pool, 6).unwrap();
    assert_eq!(c.fault(b + PAGE_SIZE, Access::Read), Err(Fault::Guard));
    c.fault(w, Access::Read).unwrap();
    assert_eq!(m.fault(w, Access::Read), Err(Fault::Guard), "the parent keeps its own");
    c.space().table().check_occupancy();
    drop(c.destroy());
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// A map never writes over a marker: it is an occupied entry, refused as a valid one is, on the
/// one-page fast path and the general path alike.
#[test]
fn map_refuses_to_write_over_a_guard_marker() {
    use crate::descriptor::UserAccess;
    use crate::paging::{Constraints, MapError};
    let mut pt = PageTable::new(Heap, VaRange::Lower).unwrap();
    let attrs = Attributes::user(UserAccess::ReadWrite);
    let g = VirtAddr(0x40_0000);
    pt.install_guards(VirtAddr(g.0 + PAGE_SIZE), PAGE_SIZE).unwrap();
    pt.map(g, PhysAddr(0x8000_0000), PAGE_SIZE, attrs, Constraints::NONE).unwrap();
    let at = VirtAddr(g.0 + PAGE_SIZE);
    for size in [PAGE_SIZE, 16 * PAGE_SIZE] {
        let r = pt.map(at, PhysAddr(0x8010_0000), size, attrs, Constraints::NONE);
        assert_eq!(r, Err(MapError::AlreadyMapped(at)), "{size:#x}");
    }
    assert_eq!(pt.install_guards(g, 2 * PAGE_SIZE), Err(MapError::AlreadyMapped(g)), "over a page");
    assert!(pt.is_guard(at));
    pt.check_occupancy();
    let (mut translation, record) = pt.destroy();
    record.release(&mut translation);
}

/// As Linux's `madvise_walk_vmas`: installing (and removing) goes to every mapped part of a range
/// with holes, then answers `ENOMEM`; an area that is not private anonymous memory stops the walk
/// with `EINVAL`, the areas before it done; removing from a locked area is allowed.
#[test]
fn guards_go_past_holes_and_stop_at_memory_that_is_not_private_anonymous() {
    use crate::vm::flags::MAP_SHARED;
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let a = m.mmap(0, 12 * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    m.munmap(a + 2 * PAGE_SIZE, PAGE_SIZE).unwrap();
    m.munmap(a + 6 * PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    for i in [0, 1, 3, 4, 5, 8, 9] {
        m.write(a + i * PAGE_SIZE, &[1]).unwrap();
    }
    assert_eq!(m.madvise(a + PAGE_SIZE, 9 * PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::ENOMEM));
    let p = |i: u64| a + i * PAGE_SIZE;
    assert_eq!(m.guard_ranges().unwrap(), [(p(1), p(2)), (p(3), p(6)), (p(8), p(10))], "every mapped part");
    assert_eq!(live(&pool), 1, "their pages zapped; page 0 kept");
    // Locked on fault: a guarded page cannot be populated.
    m.mlock2(p(3), PAGE_SIZE, crate::vm::map::lock::MLOCK_ONFAULT).unwrap();
    assert_eq!(m.madvise(a, 12 * PAGE_SIZE, MADV_GUARD_REMOVE), Err(Errno::ENOMEM), "a locked area too");
    assert!(m.guard_ranges().unwrap().is_empty());
    m.munlock(p(3), PAGE_SIZE).unwrap();
    // Shared anonymous memory in the middle: the walk stops there.
    m.mmap(p(6), 2 * PAGE_SIZE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.madvise(p(3), 7 * PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::EINVAL));
    assert_eq!(m.guard_ranges().unwrap(), [(p(3), p(6))], "the area before it only");
    assert_eq!(m.madvise(p(3), 7 * PAGE_SIZE, MADV_GUARD_REMOVE), Err(Errno::EINVAL));
    assert!(m.guard_ranges().unwrap().is_empty(), "removed before the refusal");
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}
