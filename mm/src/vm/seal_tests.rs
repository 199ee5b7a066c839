//! Host tests of `mseal` (`map/seal.rs`): the arguments' errno table, and for every call that
//! may change a mapping, what a seal refuses and what is done before the refusal — the rules of
//! Linux's `mm/mseal.c` and the kernel's own `mseal_test.c` cases (sealing then munmap, mremap,
//! mprotect, MAP_FIXED and discarding advice; two areas of which one is sealed; sealing across
//! a hole; seals inherited by fork).

use super::advice::*;
use super::flags::*;
use super::prot::*;
use super::tests::{A, PRIV, fixture};
use super::*;
use linux_abi::mman::{MREMAP_FIXED, MREMAP_MAYMOVE};

const RW: u64 = PROT_READ | PROT_WRITE;

/// The area map's rights at `addr`, and whether the area there is sealed.
fn at(m: &VmMap, addr: u64) -> Option<(Prot, bool)> {
    m.find(addr).map(|v| (v.prot, v.flags.contains(VmaFlags::SEALED)))
}

#[test]
fn mseal_arguments_errno_table() {
    let mut m = fixture();
    // (addr, len, flags, expected): A has 4 pages RW, a 4-page hole, then 4 pages R.
    let cases: [(u64, u64, u64, Result<(), Errno>); 9] = [
        (A, PAGE, 1, Err(Errno::EINVAL)),                // flags must be 0
        (A + 1, PAGE, 0, Err(Errno::EINVAL)),            // unaligned start
        (A, u64::MAX, 0, Err(Errno::EINVAL)),            // the length wraps when rounded up
        (!(PAGE - 1), 2 * PAGE, 0, Err(Errno::EINVAL)),  // the end wraps
        (A, 0, 0, Ok(())),                               // nothing to seal
        (A + 4 * PAGE, PAGE, 0, Err(Errno::ENOMEM)),     // unmapped
        (A, 12 * PAGE, 0, Err(Errno::ENOMEM)),           // a hole in the middle
        (A + 8 * PAGE, 5 * PAGE, 0, Err(Errno::ENOMEM)), // unmapped at the end
        (A, 4 * PAGE - 1, 0, Ok(())),                    // rounded up to whole pages
    ];
    for (addr, len, flags, want) in cases {
        assert_eq!(m.mseal(addr, len, flags), want, "mseal({addr:#x}, {len:#x}, {flags})");
        m.check();
    }
    // The failed calls sealed nothing: only the last one did, and all four pages.
    assert_eq!(at(&m, A + 3 * PAGE), Some((Prot::RW, true)));
    assert_eq!(at(&m, A + 8 * PAGE), Some((Prot::READ, false)));
    assert!(m.has_seals());
    // Sealing again is allowed.
    assert_eq!(m.mseal(A, 4 * PAGE, 0), Ok(()));
}

#[test]
fn a_sealed_mapping_cannot_be_unmapped_moved_replaced_or_reprotected() {
    let mut m = fixture();
    m.mseal(A, 2 * PAGE, 0).unwrap();
    m.check();
    // The seal split A: two sealed pages, two unsealed.
    assert_eq!(at(&m, A), Some((Prot::RW, true)));
    assert_eq!(at(&m, A + 2 * PAGE), Some((Prot::RW, false)));
    // munmap of a range that touches a sealed page: EPERM, nothing unmapped (also the
    // unsealed part of the range).
    assert_eq!(m.munmap(A + PAGE, 2 * PAGE).map(|_| ()), Err(Errno::EPERM));
    assert!(m.find(A + 2 * PAGE).is_some());
    // The unsealed part alone can go.
    m.munmap(A + 3 * PAGE, PAGE).unwrap();
    // mmap(MAP_FIXED) over it: EPERM, the mapping kept.
    assert_eq!(m.mmap(A, PAGE, RW, PRIV | MAP_FIXED, -1, 0).map(|r| r.addr), Err(Errno::EPERM));
    assert_eq!(at(&m, A), Some((Prot::RW, true)));
    // mremap of it: shrink, grow, move; and onto it as a target.
    for (old, new, flags) in
        [(2 * PAGE, PAGE, 0), (2 * PAGE, 3 * PAGE, MREMAP_MAYMOVE), (PAGE, PAGE, MREMAP_MAYMOVE)]
    {
        assert_eq!(
            m.mremap(A, old, new, flags, 0).map(|r| r.addr),
            Err(Errno::EPERM),
            "{old:#x} -> {new:#x}"
        );
    }
    let b = A + 8 * PAGE;
    assert_eq!(
        m.mremap(b, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, A).map(|r| r.addr),
        Err(Errno::EPERM),
        "moving another mapping onto a sealed one"
    );
    assert_eq!(at(&m, b), Some((Prot::READ, false)), "the source stays where it was");
    // mprotect: refused even to the rights it has (Linux checks the seal before comparing).
    for prot in [PROT_READ, RW, 0] {
        let r = m.mprotect(A, 2 * PAGE, prot).unwrap();
        assert_eq!((r.changes.len(), r.error), (0, Some(Errno::EPERM)), "mprotect to {prot:#x}");
    }
    assert_eq!(at(&m, A), Some((Prot::RW, true)));
    m.check();
}

#[test]
fn mprotect_changes_the_areas_before_a_sealed_one_then_fails() {
    // Two areas, the second sealed: the first changes, then EPERM (Linux 6.12's per-area check).
    let mut m = fixture();
    m.mmap(A + 4 * PAGE, 4 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mseal(A + 4 * PAGE, 4 * PAGE, 0).unwrap();
    let r = m.mprotect(A, 8 * PAGE, PROT_READ).unwrap();
    assert_eq!(r.error, Some(Errno::EPERM));
    assert_eq!(r.changes.len(), 1);
    assert_eq!((r.changes[0].start, r.changes[0].end), (A, A + 4 * PAGE));
    assert_eq!(at(&m, A), Some((Prot::READ, false)));
    // With the seal first, nothing changes.
    let r = m.mprotect(A + 4 * PAGE, 8 * PAGE, RW).unwrap();
    assert_eq!((r.changes.len(), r.error), (0, Some(Errno::EPERM)));
    m.check();
}

#[test]
fn discarding_advice_is_refused_on_sealed_read_only_private_memory_only() {
    let discard =
        [MADV_DONTNEED, MADV_DONTNEED_LOCKED, MADV_FREE, MADV_REMOVE, MADV_DONTFORK, MADV_WIPEONFORK];
    let harmless = [MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DOFORK, MADV_KEEPONFORK];
    let b = A + 8 * PAGE;
    for advice in discard {
        let mut m = fixture();
        // A is writable: its contents could be rewritten anyway, so discarding them is allowed.
        m.mseal(A, 4 * PAGE, 0).unwrap();
        let r = m.madvise(A, 4 * PAGE, advice).unwrap();
        // REMOVE is for shared memory only (EINVAL), whatever the seal.
        let want = if advice == MADV_REMOVE { Some(Errno::EINVAL) } else { None };
        assert_eq!(r.error, want, "advice {advice} on sealed RW");
        // B is read-only and sealed: refused, with EPERM checked before the advice's own rules.
        m.mseal(b, 4 * PAGE, 0).unwrap();
        let r = m.madvise(b, 4 * PAGE, advice).unwrap();
        assert!(r.ranges.is_empty(), "advice {advice}: nothing done");
        assert_eq!(r.error, Some(Errno::EPERM), "advice {advice} on sealed R");
        // Across unsealed areas first (A, RW, and a read-only one that fills the hole): they
        // get the advice, then EPERM.
        let mut m = fixture();
        m.mmap(A + 4 * PAGE, 4 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
        m.mseal(b, 4 * PAGE, 0).unwrap();
        let r = m.madvise(A, 12 * PAGE, advice).unwrap();
        if advice != MADV_REMOVE {
            assert_eq!(
                r.ranges,
                [(A, A + 4 * PAGE), (A + 4 * PAGE, b)],
                "advice {advice}: the unsealed areas before"
            );
            assert_eq!(r.error, Some(Errno::EPERM));
        }
    }
    for advice in harmless {
        let mut m = fixture();
        m.mseal(b, 4 * PAGE, 0).unwrap();
        assert_eq!(m.madvise(b, 4 * PAGE, advice).unwrap().error, None, "advice {advice}");
    }
}

#[test]
fn brk_cannot_shrink_over_a_sealed_heap() {
    let mut m = fixture();
    let start = m.brk(0).brk;
    let grown = m.brk(start + 4 * PAGE).brk;
    assert_eq!(grown, start + 4 * PAGE);
    m.mseal(start, 4 * PAGE, 0).unwrap();
    // Linux's brk returns the old break when the shrink's munmap fails.
    assert_eq!(m.brk(start).brk, grown);
    assert_eq!(at(&m, start).map(|(_, s)| s), Some(true));
    m.check();
}

#[test]
fn seals_are_inherited_by_fork_and_merge_only_with_sealed_neighbours() {
    let mut m = fixture();
    m.mseal(A, 4 * PAGE, 0).unwrap();
    let mut child = m.fork_copy().unwrap();
    assert!(child.has_seals());
    assert_eq!(child.munmap(A, PAGE).map(|_| ()), Err(Errno::EPERM));
    // A sealed area does not merge with an unsealed neighbour of the same rights.
    m.mmap(A + 4 * PAGE, 2 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.find(A).map(|v| v.end), Some(A + 4 * PAGE));
    // Sealed too: the two become one area again.
    m.mseal(A + 4 * PAGE, 2 * PAGE, 0).unwrap();
    assert_eq!(m.find(A).map(|v| v.end), Some(A + 6 * PAGE));
    m.check();
    child.check();
}

#[test]
fn an_address_space_without_seals_answers_as_before() {
    // The calls skip the search for sealed areas until the first seal; a seal attempt that
    // fails (a hole) does not turn the search on.
    let mut m = fixture();
    assert_eq!(m.mseal(A, 12 * PAGE, 0), Err(Errno::ENOMEM));
    assert!(!m.has_seals());
    m.munmap(A, 12 * PAGE).unwrap();
    assert!(m.find(A).is_none());
}
