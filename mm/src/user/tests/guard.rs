//! Host tests of guard regions (`MADV_GUARD_INSTALL`/`REMOVE`): a guarded page faults with
//! `Fault::Guard` and is never demand-paged, the area map is not split, the pages go back, and
//! the guards follow `MADV_DONTNEED` (kept), `munmap`/`MAP_FIXED` (gone), `mremap` (moved) and
//! `fork` (copied), as Linux 6.13's.

use super::fork::{Pool, fork, live, parent};
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
    m.mlock(b, PAGE_SIZE).unwrap();
    assert_eq!(m.madvise(b, PAGE_SIZE, MADV_GUARD_INSTALL), Err(Errno::EINVAL), "locked");
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}
