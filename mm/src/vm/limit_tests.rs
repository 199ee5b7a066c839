//! Tests of the limits: kernel heap exhaustion (every call completes or fails with `ENOMEM`
//! having changed nothing), `vm.max_map_count`, `RLIMIT_AS`, `RLIMIT_DATA`, the heuristic
//! overcommit, and the code window's cost against all of them (none).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use proptest::prelude::*;

use super::advice::*;
use super::fallible::fail_after;
use super::flags::*;
use super::limits::Rlimit;
use super::prot::*;
use super::tests::{A, Op, PRIV, fixture, op, small_layout};
use super::tree::VmaTree;
use super::*;

const RW: u64 = PROT_READ | PROT_WRITE;
const RX: u64 = PROT_READ | PROT_EXEC;
const NONE: u64 = 0;
const MIB: u64 = 1 << 20;

/// Everything a call may change, to compare before and after.
fn state(m: &VmMap) -> String {
    let vmas: Vec<Vma> = m.iter().copied().collect();
    format!(
        "{vmas:?} {:?} brk {:#x} mapped {} data {}",
        m.code_window(),
        m.brk_value(),
        m.mapped_bytes(),
        m.data_bytes()
    )
}

/// Runs one operation; its outcome as text (the system call's view of it).
fn apply(m: &mut VmMap, op: &Op) -> String {
    match *op {
        Op::Mmap { addr, len, prot, fixed, code } => {
            let f =
                PRIV | [0, MAP_FIXED, MAP_FIXED_NOREPLACE][fixed as usize] | if code { MAP_CODE } else { 0 };
            format!("{:?}", m.mmap(addr, len, prot, f, -1, 0))
        }
        Op::Munmap { addr, len } => format!("{:?}", m.munmap(addr, len)),
        Op::Mprotect { addr, len, prot } => format!("{:?}", m.mprotect(addr, len, prot)),
        Op::Madvise { addr, len, advice } => format!("{:?}", m.madvise(addr, len, advice)),
        Op::Near { target, len, radius, prot } => {
            format!("{:?}", m.map_near(target, len, radius, prot, PRIV))
        }
        Op::Brk { addr } => format!("{:?}", m.brk(addr)),
        Op::Name { addr, len, name } => {
            format!("{:?}", m.set_anon_name(addr, len, super::tests::NAMES[name]))
        }
    }
}

/// What `mprotect` returns to the program (0, or the errno, also after a partial change).
fn mprotect(m: &mut VmMap, addr: u64, len: u64, prot: u64) -> Result<(), Errno> {
    m.mprotect(addr, len, prot).and_then(|r| r.error.map_or(Ok(()), Err))
}

fn small_map(max_map_count: usize) -> VmMap {
    let mut m = VmMap::new(Layout { max_map_count, ..small_layout() });
    m.set_window_size(2 * MIB).unwrap();
    m.init_code_window(None).unwrap();
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// Two maps get the same operations; one may allocate only `budget` times per call. Where
    /// the outcomes differ, the starved call must have failed with `ENOMEM` (brk: kept the old
    /// break) leaving its map exactly as before; it is then retried with no limit.
    #[test]
    fn running_out_of_heap_is_enomem_and_changes_nothing(
        ops in proptest::collection::vec((op(), 0usize..6), 1..60),
    ) {
        let mut starved = small_map(65530);
        let mut fed = small_map(65530);
        for (op, budget) in &ops {
            let before = state(&starved);
            let expected = apply(&mut fed, op);
            fail_after(Some(*budget));
            let got = apply(&mut starved, op);
            fail_after(None);
            starved.check();
            // A call that ends in ENOMEM anyway (a range with holes) may also have been starved:
            // the result is the same, the map is not, so the map is compared too.
            if got != expected || state(&starved) != state(&fed) {
                let failed = got.contains("ENOMEM") || matches!(op, Op::Brk { .. });
                prop_assert!(failed, "{:?}: {} instead of {}", op, got, expected);
                prop_assert_eq!(state(&starved), before, "{:?} changed the map before failing", op);
                prop_assert_eq!(apply(&mut starved, op), expected);
            }
            prop_assert_eq!(state(&starved), state(&fed));
        }
    }

    /// With a small `vm.max_map_count`, no sequence of calls takes the count past it by more
    /// than the one mapping Linux's `mmap` check lets through (`map_count > max` refuses).
    #[test]
    fn the_map_count_never_passes_the_limit(ops in proptest::collection::vec(op(), 1..80), max in 1usize..8) {
        let mut m = small_map(max);
        for op in &ops {
            apply(&mut m, op);
            m.check();
            prop_assert!(m.map_count() <= max + 1, "{} mappings after {:?}", m.map_count(), op);
        }
    }
}

#[test]
fn a_reserved_tree_inserts_without_allocating() {
    let vma = |p: u64| Vma {
        start: p * PAGE,
        end: (p + 1) * PAGE,
        prot: Prot::READ,
        flags: VmaFlags::empty(),
        advice: Advice::Normal,
        name: AnonName::NONE,
    };
    // Every round reserves for three insertions, then makes three with the heap refusing: in
    // trees from empty to four levels, at spots that fill leaves and branches until they split
    // (runs of neighbouring pages around a few centres), the reservation must cover them all.
    let mut t = VmaTree::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut splits_seen = 0;
    for round in 0..6000u64 {
        t.reserve(3).unwrap();
        let (spares, height) = (t.spares(), t.height());
        fail_after(Some(0));
        let centre = (next() % (1 + round / 64)) * 4096;
        let mut placed = 0;
        while placed < 3 {
            let p = centre + next() % 4096;
            if t.is_free(p * PAGE, (p + 1) * PAGE) {
                t.insert(vma(p)).unwrap();
                placed += 1;
            }
        }
        fail_after(None);
        splits_seen += usize::from(t.spares() < spares || t.height() > height);
        if round % 500 == 0 {
            t.check();
        }
    }
    t.check();
    assert!(t.height() >= 4, "the rounds reach four levels ({})", t.height());
    assert!(splits_seen > 500, "the rounds split nodes ({splits_seen})");
    // Without a reservation an insertion takes only the nodes it needs (so a tree built by
    // plain insertions keeps no spare); without heap, insertions go on while they need no node,
    // the first that needs one fails and changes nothing, and a removal makes room again.
    let mut u = VmaTree::new();
    for p in 0..40 {
        u.insert(vma(2 * p)).unwrap();
    }
    assert_eq!(u.spares(), 0, "plain insertions keep no spare");
    fail_after(Some(0));
    let mut p = 100;
    let err = loop {
        let before: Vec<_> = u.iter().copied().collect();
        if let Err(e) = u.insert(vma(p)) {
            assert_eq!(u.iter().copied().collect::<Vec<_>>(), before, "a failed insert changes nothing");
            break e;
        }
        p += 1;
    };
    assert_eq!(err, Errno::ENOMEM);
    assert!(p > 100, "the last leaf had room for some");
    assert_eq!(u.reserve(1), Err(Errno::ENOMEM));
    assert!(u.remove(100 * PAGE).is_some());
    u.insert(vma(p)).unwrap();
    fail_after(None);
    u.check();
    assert_eq!(u.len(), 40 + (p - 100) as usize);
}

#[test]
fn splits_at_the_map_count_limit_fail_as_linux() {
    // Three mappings with holes between them, at a limit of 3.
    let mut m = VmMap::new(Layout { max_map_count: 3, ..Layout::linux(0x60_0000) });
    for i in 0..3 {
        m.mmap(A + i * 8 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    }
    // munmap punching a hole in one mapping: two out of one, refused at the limit.
    assert_eq!(m.munmap(A + PAGE, PAGE), Err(Errno::ENOMEM));
    // Trimming an end splits nothing.
    m.munmap(A + 3 * PAGE, PAGE).unwrap();
    // mprotect of the middle needs two splits, of an end one: both refused at the limit.
    assert_eq!(mprotect(&mut m, A + PAGE, PAGE, PROT_READ), Err(Errno::ENOMEM));
    assert_eq!(mprotect(&mut m, A, PAGE, PROT_READ), Err(Errno::ENOMEM));
    assert_eq!(m.find(A).unwrap().prot, Prot::RW);
    // The same protection changes nothing, so it is fine.
    assert_eq!(mprotect(&mut m, A + PAGE, PAGE, RW), Ok(()));
    // madvise that would split: EAGAIN, as Linux reports its ENOMEM.
    assert_eq!(m.madvise(A, PAGE, MADV_RANDOM).unwrap().error, Some(Errno::EAGAIN));
    assert_eq!(m.find(A).unwrap().advice, Advice::Normal);
    // A hint or MAP_FIXED punching the middle: refused the same way.
    assert_eq!(m.mmap(A + 9 * PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap_err(), Errno::ENOMEM);
    // A new mapping may still take the count to max + 1 (Linux checks map_count > max) ...
    m.mmap(A + 100 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.map_count(), 4);
    // ... and no further, the heap included.
    assert_eq!(m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    let brk = m.brk(0).brk;
    assert_eq!(m.brk(brk + PAGE).brk, brk, "brk refused past the limit");
    m.check();
}

#[test]
fn mprotect_at_one_end_that_joins_a_neighbour_does_not_split() {
    // [A, A+4) RW and [A+4, A+8) R, touching, at a limit of 2: making A+3 read-only moves the
    // boundary (Linux's vma_merge), so it is allowed.
    let mut m = VmMap::new(Layout { max_map_count: 2, ..Layout::linux(0x60_0000) });
    m.mmap(A, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(A + 4 * PAGE, 4 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(mprotect(&mut m, A + 3 * PAGE, PAGE, PROT_READ), Ok(()));
    assert_eq!(m.map_count(), 2);
    assert_eq!(m.find(A + 3 * PAGE).unwrap().start, A + 3 * PAGE);
    m.check();
}

#[test]
fn rlimit_as_counts_every_mapping_and_map_fixed_gives_back_what_it_replaces() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    m.set_rlimits(Rlimit { cur: 64 * MIB, max: u64::MAX }, Rlimit::INFINITY);
    let a = m.mmap(0, 48 * MIB, PROT_READ, PRIV, -1, 0).unwrap();
    assert_eq!(m.mmap(0, 17 * MIB, NONE, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    let b = m.mmap(0, 16 * MIB, NONE, PRIV, -1, 0).unwrap();
    assert_eq!(m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM, "exactly full");
    assert_eq!(m.map_near(A, PAGE, MIB, RW, PRIV).unwrap_err(), Errno::ENOMEM);
    // Replacing mapped pages costs only what is new.
    m.mmap(b.addr, 16 * MIB, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(
        m.mmap(b.addr - MIB, 2 * MIB, RW, PRIV | MAP_FIXED, -1, 0).unwrap_err(),
        Errno::ENOMEM,
        "1 MiB new"
    );
    m.munmap(a.addr, MIB).unwrap();
    assert!(m.mmap(0, MIB, RW, PRIV, -1, 0).is_ok(), "room again after munmap");
    // Lowering the limit below what is mapped unmaps nothing; only growth fails.
    m.set_rlimits(Rlimit { cur: MIB, max: u64::MAX }, Rlimit::INFINITY);
    assert_eq!(m.mapped_bytes(), 64 * MIB);
    assert_eq!(m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    m.check();
}

#[test]
fn rlimit_data_counts_private_writable_memory_and_the_heap() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    m.set_rlimits(Rlimit::INFINITY, Rlimit { cur: 4 * MIB, max: u64::MAX });
    m.mmap(0, 4 * MIB, RW, PRIV, -1, 0).unwrap();
    assert_eq!(m.data_bytes(), 4 * MIB);
    assert_eq!(m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM, "private writable");
    // Not data: read-only, shared, stacks.
    let ro = m.mmap(0, 8 * MIB, PROT_READ, PRIV, -1, 0).unwrap();
    m.mmap(0, 8 * MIB, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    m.mmap(0, 8 * MIB, RW, PRIV | MAP_STACK, -1, 0).unwrap();
    // Becoming writable makes it data: refused, as mprotect_fixup does.
    assert_eq!(mprotect(&mut m, ro.addr, PAGE, RW), Err(Errno::ENOMEM));
    assert_eq!(m.find(ro.addr).unwrap().prot, Prot::READ, "nothing changed");
    // The heap: refused by brk, which returns the old break.
    let brk = m.brk(0).brk;
    assert_eq!(m.brk(brk + PAGE).brk, brk);
    // Linux's Valgrind allowance: a zero soft limit lets data grow to the hard one.
    let mut v = VmMap::new(Layout::linux(0x60_0000));
    v.set_rlimits(Rlimit::INFINITY, Rlimit { cur: 0, max: 2 * MIB });
    assert!(v.mmap(0, 2 * MIB, RW, PRIV, -1, 0).is_ok());
    assert_eq!(v.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    m.check();
    v.check();
}

#[test]
fn the_heuristic_overcommit_refuses_one_request_larger_than_ram() {
    // 128 MiB of RAM, no swap.
    let ram = 128 * MIB / PAGE;
    let mut m = VmMap::new(Layout { ram_pages: ram, ..Layout::linux(0x60_0000) });
    let tib = 1 << 40;
    assert_eq!(m.mmap(0, tib, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM, "1 TiB private writable");
    assert_eq!(m.mmap(0, 128 * MIB + PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    assert!(m.mmap(0, 128 * MIB, RW, PRIV, -1, 0).is_ok(), "exactly RAM fits");
    assert!(m.mmap(0, 128 * MIB, RW, PRIV, -1, 0).is_ok(), "guess mode checks one request at a time");
    assert_eq!(m.mmap(0, tib, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap_err(), Errno::ENOMEM, "shared");
    assert_eq!(m.mmap(0, tib, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap_err(), Errno::ENOMEM);
    // Not accountable: read-only private, MAP_NORESERVE.
    let ro = m.mmap(0, tib, PROT_READ, PRIV, -1, 0).unwrap();
    assert!(m.mmap(0, tib, RW, PRIV | MAP_NORESERVE, -1, 0).is_ok());
    // Becoming writable charges it.
    assert_eq!(mprotect(&mut m, ro.addr, tib, RW), Err(Errno::ENOMEM));
    assert_eq!(m.map_near(A, 256 * MIB, 1 << 30, RW, PRIV).unwrap_err(), Errno::ENOMEM);
    let brk = m.brk(0).brk;
    assert_eq!(m.brk(brk + 256 * MIB).brk, brk, "brk larger than RAM");
    assert_eq!(m.brk(brk + MIB).brk, brk + MIB);
    m.check();
}

#[test]
fn the_code_window_is_charged_to_no_limit() {
    // A program whose text sits in the default 512 MiB window, under RLIMIT_AS = 64 MiB (less
    // than the window) and RLIMIT_DATA = 4 MiB.
    let mut m = fixture();
    let (wb, we) = m.code_window_range().unwrap();
    assert_eq!(we - wb, 512 * MIB);
    let image = m.mapped_bytes();
    m.set_rlimits(Rlimit { cur: 64 * MIB, max: u64::MAX }, Rlimit { cur: 4 * MIB, max: u64::MAX });
    // Code still goes into the window, and costs its own size only.
    let code = m.mmap(0, 2 * MIB, RW, PRIV | MAP_CODE, -1, 0);
    let code = code.unwrap_or_else(|e| panic!("code mapping under RLIMIT_AS 64 MiB: {e}"));
    assert!(wb <= code.addr && code.addr + code.len <= we && !code.outside_window);
    let rx = m.mmap(0, 4 * MIB, RX, PRIV, -1, 0).unwrap();
    assert!(wb <= rx.addr && rx.addr + rx.len <= we);
    assert_eq!(m.mapped_bytes(), image + 6 * MIB, "the empty window space counts nothing");
    // What is left under the limit is the limit minus the mappings, window or not.
    let left = 64 * MIB - m.mapped_bytes();
    assert!(m.mmap(0, left, PROT_READ, PRIV, -1, 0).is_ok());
    assert_eq!(m.mmap(0, PAGE, PROT_READ, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    m.check();
}
