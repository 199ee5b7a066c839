//! Host tests of `MADV_FREE` reclaimed lazily: the pages stay mapped and readable until the
//! frames run out, a write (or anything else that changes the pages' tables) cancels the free,
//! and under pressure a fault reclaims the pages still free (they then read zero) and goes on.

use super::fork::{Pool, flushes, fork, live, parent, peek};
use super::*;
use crate::vm::advice::MADV_FREE;

const PAGES: u64 = 16;

fn freed(pool: &Pool) -> (Cow, u64) {
    let mut m = parent(pool, false);
    let a = m.mmap(0, PAGES * PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    for i in 0..PAGES {
        m.write(a + i * PAGE_SIZE, &[i as u8 + 1]).unwrap();
    }
    let before = flushes(&m);
    m.madvise(a, PAGES * PAGE_SIZE, MADV_FREE).unwrap();
    assert_eq!(flushes(&m) - before, 1, "one flush write-protects the range");
    (m, a)
}

use super::fork::Cow;

#[test]
fn freed_pages_stay_until_pressure_and_a_write_cancels() {
    let pool = Pool::default();
    let (mut m, a) = freed(&pool);
    assert_eq!(live(&pool), PAGES as usize, "nothing dropped yet");
    assert_eq!(m.lazily_freed(), [(a, a + PAGES * PAGE_SIZE)]);
    for i in 0..PAGES {
        m.fault(a + i * PAGE_SIZE, Access::Read).unwrap();
        assert_eq!(peek(&m, &pool, a + i * PAGE_SIZE), i as u8 + 1, "readable with its contents");
    }
    // A write to page 3 cancels its free (and only its).
    m.write(a + 3 * PAGE_SIZE, &[0x33]).unwrap();
    assert_eq!(m.lazily_freed(), [(a, a + 3 * PAGE_SIZE), (a + 4 * PAGE_SIZE, a + PAGES * PAGE_SIZE)]);
    // Pressure: no frame left. A fault elsewhere reclaims the free pages and succeeds.
    let b = m.mmap(0, PAGE_SIZE, RW, ANON, -1, 0).unwrap();
    pool.0.borrow_mut().limit = Some(live(&pool));
    let before = flushes(&m);
    m.fault(b, Access::Write).unwrap();
    assert!(flushes(&m) > before, "the reclaim flushed before the frames went back");
    assert_eq!(live(&pool), 2, "page 3 and the new page");
    assert!(m.lazily_freed().is_empty());
    assert_eq!(peek(&m, &pool, a + 3 * PAGE_SIZE), 0x33, "the written page keeps its data");
    for i in (0..PAGES).filter(|&i| i != 3) {
        assert!(m.space().query(VirtAddr(a + i * PAGE_SIZE)).is_none(), "page {i} reclaimed");
    }
    pool.0.borrow_mut().limit = None;
    m.fault(a, Access::Read).unwrap();
    assert_eq!(peek(&m, &pool, a), 0, "a reclaimed page reads zero");
    // With nothing left to reclaim, pressure is out of memory.
    pool.0.borrow_mut().limit = Some(live(&pool));
    assert_eq!(m.fault(a + PAGE_SIZE, Access::Read), Err(Fault::OutOfMemory));
    pool.0.borrow_mut().limit = None;
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}

/// Only pages this layer write-protected for `MADV_FREE` and not touched since are dropped:
/// `mprotect`, a lock, a fork, a fresh page faulted into the freed range (mapped writable) and
/// `MADV_DONTNEED` each take their pages off the record.
#[test]
fn other_calls_cancel_the_free_of_their_range() {
    let pool = Pool::default();
    let (mut m, a) = freed(&pool);
    m.mprotect(a, PAGE_SIZE, PROT_READ).unwrap();
    m.mlock(a + PAGE_SIZE, PAGE_SIZE).unwrap();
    m.madvise(a + 2 * PAGE_SIZE, PAGE_SIZE, MADV_DONTNEED).unwrap();
    // Page 2 was dropped: faulting it in maps a fresh page writable, which is not free.
    m.fault(a + 2 * PAGE_SIZE, Access::Read).unwrap();
    m.write(a + 2 * PAGE_SIZE, &[0x22]).unwrap();
    assert_eq!(m.lazily_freed(), [(a + 3 * PAGE_SIZE, a + PAGES * PAGE_SIZE)]);
    assert!(m.reclaim_lazily_freed());
    for (i, want) in [(0u64, 1u8), (1, 2), (2, 0x22)] {
        assert_eq!(peek(&m, &pool, a + i * PAGE_SIZE), want, "page {i} kept");
    }
    assert!(m.space().query(VirtAddr(a + 3 * PAGE_SIZE)).is_none());
    assert!(!m.reclaim_lazily_freed(), "nothing left");
    // A fork cancels every free of the parent.
    m.madvise(a + 4 * PAGE_SIZE, PAGE_SIZE, MADV_FREE).unwrap();
    m.munlock(a + PAGE_SIZE, PAGE_SIZE).unwrap();
    m.write(a + 4 * PAGE_SIZE, &[0x44]).unwrap();
    m.madvise(a + 4 * PAGE_SIZE, PAGE_SIZE, MADV_FREE).unwrap();
    let c = fork(&mut m, &pool, 6).unwrap();
    assert!(m.lazily_freed().is_empty() && c.lazily_freed().is_empty());
    assert!(!m.reclaim_lazily_freed());
    assert_eq!(peek(&m, &pool, a + 4 * PAGE_SIZE), 0x44);
    drop(c.destroy());
    drop(m.destroy());
    assert_eq!(live(&pool), 0);
}
