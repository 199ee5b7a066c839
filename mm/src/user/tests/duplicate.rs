//! Host tests of `mremap(addr, 0, new_len, MREMAP_MAYMOVE)`, Linux's duplicate of a shared
//! mapping: a second mapping of the same pages, the old one kept — a memory object's from the
//! same offset (`SIGBUS` past its end), shared anonymous memory's the same frames — `EINVAL` for
//! a private mapping, and every frame back exactly once (the reference-counting pool of the fork
//! tests).

use super::fork::{Pool, live, parent};
use super::object::{object, rd, release};
use super::*;
use crate::vm::flags::MAP_SHARED;
use crate::vm::map::remap::{MREMAP_FIXED, MREMAP_MAYMOVE};

const P: u64 = PAGE_SIZE;
const SHARED_ANON: u64 = MAP_SHARED | MAP_ANONYMOUS;

#[test]
fn a_duplicate_of_shared_anonymous_memory_maps_the_same_frames() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let a = m.mmap(0, 4 * P, RW, SHARED_ANON, -1, 0).unwrap();
    m.write(a + P + 3, &[0x41]).unwrap();
    let b = m.mremap(a + P, 0, 5 * P, MREMAP_MAYMOVE, 0).unwrap();
    assert!(b + 5 * P <= a || b >= a + 4 * P, "a new place");
    let kept: u64 = m.vm().mappings_in(a, a + 4 * P).map(|v| v.len()).sum();
    assert_eq!(kept, 4 * P, "the old mapping stays");
    // The old mapping's pages from a + P are the new one's first three, both ways.
    assert_eq!(rd(&mut m, &pool, b + 3), 0x41);
    m.write(b + 2 * P, &[0x42]).unwrap();
    assert_eq!(rd(&mut m, &pool, a + 3 * P), 0x42);
    m.write(a + 2 * P + 9, &[0x43]).unwrap();
    assert_eq!(rd(&mut m, &pool, b + P + 9), 0x43);
    for i in 0..3 {
        assert_eq!(m.space().translate(VirtAddr(a + (i + 1) * P)), m.space().translate(VirtAddr(b + i * P)));
    }
    // Past the old mapping's end: fresh shared memory here (Linux: the object's pages, or
    // SIGBUS past its size).
    m.write(b + 4 * P, &[1]).unwrap();
    assert_eq!(live(&pool), 4, "the old mapping's pages 1 to 3, once each, and one fresh page");
    assert_eq!(m.stats().data_frames, 7, "each mapping counts the frames it maps");
    // Unmapping the old mapping leaves the pages to the new one.
    m.munmap(a, 4 * P).unwrap();
    assert_eq!(rd(&mut m, &pool, b + 3), 0x41);
    assert_eq!(live(&pool), 4);
    // At a given address, and a part of a page past the end of the source: the page is shared.
    let t = 0x5000_0000_0000;
    assert_eq!(m.mremap(b + 4 * P, 0, 2 * P, MREMAP_MAYMOVE | MREMAP_FIXED, t), Ok(t));
    assert_eq!(rd(&mut m, &pool, t), 1);
    // Without MREMAP_MAYMOVE there is nowhere to put it: ENOMEM, as Linux.
    assert_eq!(m.mremap(b, 0, 2 * P, 0, 0), Err(Errno::ENOMEM));
    m.vm().check();
    drop(m.destroy());
    assert_eq!(live(&pool), 0, "every frame back once");
}

#[test]
fn a_duplicate_of_a_memfd_mapping_maps_the_object_from_the_same_offset() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, 4 * P);
    let a = m.mmap_object(0, 4 * P, RW, MAP_SHARED, h.clone(), 0).unwrap();
    m.write(a + 2 * P, &[7]).unwrap();
    // The new mapping maps the object's pages 1 to 4 (4 is past its end).
    let b = m.mremap(a + P, 0, 4 * P, MREMAP_MAYMOVE, 0).unwrap();
    assert_eq!(rd(&mut m, &pool, b + P), 7);
    // A page neither mapping touched is found in the object by both.
    m.write(b + 2 * P + 1, &[8]).unwrap();
    assert_eq!(rd(&mut m, &pool, a + 3 * P + 1), 8);
    assert_eq!(m.fault(b + 3 * P, Access::Read), Err(Fault::Bus), "past the object's end, as Linux");
    assert_eq!(live(&pool), 2, "the object's two pages, whatever the mappings");
    // A private mapping of the same object is not duplicated: EINVAL, as Linux.
    let p = m.mmap_object(0, 2 * P, RW, crate::vm::flags::MAP_PRIVATE, h.clone(), 0).unwrap();
    assert_eq!(m.mremap(p, 0, P, MREMAP_MAYMOVE, 0), Err(Errno::EINVAL));
    drop(h);
    m.vm().check();
    drop(m.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}
