//! Tests of the mappings that grow down (`map/stack.rs`): every combination of what decides a
//! growth (the mapping below and its kind, the distance to it, `RLIMIT_STACK`, `RLIMIT_AS`,
//! `mmap_min_addr`, the address's place) against a statement of Linux's rule written apart from
//! the code; the refusals change nothing; `MAP_GROWSDOWN` with `mmap` and `mprotect`; and
//! placement keeping the guard gap free.

use alloc::vec::Vec;

use super::flags::*;
use super::limits::Rlimit;
use super::map::{NoGrowth, STACK_GUARD_GAP};
use super::prot::*;
use super::*;

const RW: u64 = PROT_READ | PROT_WRITE;
const MIB: u64 = 1 << 20;
const PRIV: u64 = MAP_PRIVATE | MAP_ANONYMOUS;
/// Where the test's stack ends (well inside the address space, below `mmap_base`).
const TOP: u64 = 0x7000_0000_0000;

/// What lies below the stack in a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Below {
    Nothing,
    /// A readable mapping (accessible: keeps the gap).
    Readable,
    /// A `PROT_NONE` mapping (inaccessible: no gap).
    Inaccessible,
    /// Another mapping that grows down (no gap between stacks).
    Stack,
}

/// A map with a one-page stack (RW, `MAP_GROWSDOWN`) ending at `TOP - PAGE`, and below it, as
/// `below` says, a one-page mapping ending `distance` bytes under the stack's start.
fn map_with(below: Below, distance: u64, stack_limit: u64, as_limit: u64) -> (VmMap, u64) {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let start = TOP - 2 * PAGE;
    m.mmap(start, PAGE, RW, PRIV | MAP_FIXED | MAP_GROWSDOWN, -1, 0).unwrap();
    let floor_end = start - distance;
    match below {
        Below::Nothing => {}
        Below::Readable => drop(m.mmap(floor_end - PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap()),
        Below::Inaccessible => drop(m.mmap(floor_end - PAGE, PAGE, 0, PRIV | MAP_FIXED, -1, 0).unwrap()),
        Below::Stack => {
            drop(m.mmap(floor_end - PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED | MAP_GROWSDOWN, -1, 0).unwrap())
        }
    }
    m.set_stack_limit(Rlimit { cur: stack_limit, max: u64::MAX });
    m.set_rlimits(Rlimit { cur: as_limit, max: u64::MAX }, Rlimit::INFINITY);
    m.check();
    (m, floor_end)
}

/// Linux's rule, stated apart from the code: whether a fault at `addr` grows the stack
/// `[start, end)` with `below` ending at `floor_end`, and how far.
fn linux_grows(
    addr: u64,
    start: u64,
    end: u64,
    below: Below,
    floor_end: u64,
    stack_limit: u64,
    as_room: u64,
) -> bool {
    let page = addr & !(PAGE - 1);
    let under_stack = addr < start && (below == Below::Nothing || addr >= floor_end);
    let gap_ok = match below {
        Below::Readable => page >= floor_end + STACK_GUARD_GAP,
        _ => true,
    };
    under_stack && page >= 65536 && gap_ok && end - page <= stack_limit && start - page <= as_room
}

#[test]
fn growth_follows_linux_over_every_case_that_decides_it() {
    let kinds = [Below::Nothing, Below::Readable, Below::Inaccessible, Below::Stack];
    let distances =
        [0, PAGE, STACK_GUARD_GAP - PAGE, STACK_GUARD_GAP, STACK_GUARD_GAP + PAGE, 2 * STACK_GUARD_GAP];
    let mut cases = 0;
    for below in kinds {
        for &distance in &distances {
            // Fault addresses: the stack's own page, just below it, the page above the floor,
            // in the gap, at its edge, and one byte into a page (rounded down).
            let (probe, floor_end) = map_with(below, distance, u64::MAX, u64::MAX);
            let start = probe.find(TOP - 2 * PAGE).unwrap().start;
            let end = start + PAGE;
            let mut addrs: Vec<u64> = Vec::new();
            for a in [
                start,
                start - 1,
                start - PAGE,
                floor_end,
                floor_end + PAGE - 1,
                floor_end + STACK_GUARD_GAP - PAGE,
                floor_end + STACK_GUARD_GAP,
                floor_end + STACK_GUARD_GAP + 5,
                floor_end.saturating_sub(PAGE),
            ] {
                if a < end && !addrs.contains(&a) {
                    addrs.push(a);
                }
            }
            for &addr in &addrs {
                for stack_limit in [PAGE, 4 * PAGE, STACK_GUARD_GAP, 8 * MIB, u64::MAX] {
                    for as_room in [0, 2 * PAGE, u64::MAX] {
                        let (mut m, floor_end) = map_with(below, distance, stack_limit, u64::MAX);
                        let mapped = m.mapped_bytes();
                        m.set_rlimits(
                            Rlimit { cur: mapped.saturating_add(as_room), max: u64::MAX },
                            Rlimit::INFINITY,
                        );
                        let before: Vec<Vma> = m.iter().copied().collect();
                        let r = m.grow_down(addr);
                        m.check();
                        let expected = linux_grows(addr, start, end, below, floor_end, stack_limit, as_room);
                        assert_eq!(
                            r.is_ok(),
                            expected,
                            "{below:?} {distance:#x} addr {addr:#x} limit {stack_limit:#x} room {as_room:#x}: {r:?}"
                        );
                        let after: Vec<Vma> = m.iter().copied().collect();
                        match r {
                            Ok(v) => {
                                assert_eq!((v.start, v.end), (addr & !(PAGE - 1), end));
                                assert!(v.flags.contains(VmaFlags::GROWSDOWN) && v.prot == Prot::RW);
                                assert_eq!(m.mapped_bytes(), mapped + (start - v.start));
                                assert_eq!(m.find(addr).copied(), Some(v));
                            }
                            Err(_) => assert_eq!(before, after, "a refusal changes nothing"),
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    assert!(cases > 1000, "{cases} cases");
}

#[test]
fn each_refusal_says_why() {
    // The floor lies a guard gap (256 pages: 1, 4 or 16 MiB by granule) and 2 MiB below the
    // stack, so that the stack may grow 1 MiB clear of the gap for every page size.
    let (mut m, floor_end) = map_with(Below::Readable, STACK_GUARD_GAP + 2 * MIB, u64::MAX, u64::MAX);
    assert_eq!(m.grow_down(floor_end + PAGE), Err(NoGrowth::GuardGap));
    assert_eq!(m.grow_down(TOP - 2 * PAGE), Err(NoGrowth::NotBelowAStack)); // mapped already
    assert_eq!(m.grow_down(floor_end - PAGE), Err(NoGrowth::NotBelowAStack)); // below the floor
    m.set_stack_limit(Rlimit { cur: MIB, max: u64::MAX });
    assert_eq!(m.grow_down(TOP - 2 * PAGE - MIB), Err(NoGrowth::StackLimit));
    m.set_stack_limit(Rlimit::INFINITY);
    m.set_rlimits(Rlimit { cur: m.mapped_bytes() + PAGE, max: u64::MAX }, Rlimit::INFINITY);
    assert_eq!(m.grow_down(TOP - 4 * PAGE), Err(NoGrowth::Limits));
    assert!(m.grow_down(TOP - 3 * PAGE).is_ok());
    // Below mmap_min_addr.
    let mut low = VmMap::new(Layout::linux(0x60_0000));
    low.mmap(0x2_0000, PAGE, RW, PRIV | MAP_FIXED | MAP_GROWSDOWN, -1, 0).unwrap();
    assert_eq!(low.grow_down(0x1_0000), Ok(Vma { start: 0x1_0000, ..*low.find(0x2_0000).unwrap() }));
    assert_eq!(low.grow_down(0xf000), Err(NoGrowth::TooLow));
    // A mapping that does not grow down does not.
    let mut plain = VmMap::new(Layout::linux(0x60_0000));
    plain.mmap(TOP, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(plain.grow_down(TOP - PAGE), Err(NoGrowth::NotBelowAStack));
}

#[test]
fn grown_pages_are_ordinary_and_split_by_munmap() {
    let (mut m, _) = map_with(Below::Nothing, 0, u64::MAX, u64::MAX);
    let end = TOP - PAGE;
    let v = m.grow_down(TOP - 20 * PAGE).unwrap();
    assert_eq!(v.start, TOP - 20 * PAGE);
    m.munmap(TOP - 10 * PAGE, PAGE).unwrap();
    m.check();
    let pieces: Vec<(u64, u64)> = m.iter().map(|v| (v.start, v.end)).collect();
    assert_eq!(pieces, [(TOP - 20 * PAGE, TOP - 10 * PAGE), (TOP - 9 * PAGE, end)]);
    // Both pieces still grow down: the lower one grows on.
    assert!(m.find(TOP - 20 * PAGE).unwrap().flags.contains(VmaFlags::GROWSDOWN));
    assert!(m.grow_down(TOP - 21 * PAGE).is_ok());
    // The hole between the pieces is below the upper one: a fault there grows it back, and the
    // two are one mapping again (equal areas that touch are merged, as the map keeps them).
    assert_eq!(m.grow_down(TOP - 10 * PAGE).map(|v| (v.start, v.end)), Ok((TOP - 21 * PAGE, end)));
    assert_eq!(m.map_count(), 1);
    m.check();
}

#[test]
fn map_growsdown_with_mmap_and_mprotect() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    assert_eq!(
        m.mmap(0, PAGE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0).err(),
        Some(Errno::EINVAL)
    );
    let g = m.mmap(0, 4 * PAGE, RW, PRIV | MAP_GROWSDOWN, -1, 0).unwrap().addr;
    let v = *m.find(g).unwrap();
    assert!(v.flags.contains(VmaFlags::GROWSDOWN) && v.flags.contains(VmaFlags::STACK));
    // PROT_GROWSDOWN reaches down to the mapping's start.
    m.mprotect(g + 2 * PAGE, PAGE, PROT_READ | PROT_GROWSDOWN).unwrap();
    m.check();
    let prots: Vec<(u64, Prot)> = m.iter().map(|v| (v.start, v.prot)).collect();
    assert_eq!(prots, [(g, Prot::READ), (g + 3 * PAGE, Prot::RW)]);
    // From a hole below it too.
    m.mprotect(g - 8 * PAGE, 9 * PAGE, RW | PROT_GROWSDOWN).unwrap();
    assert_eq!(m.find(g).unwrap().prot, Prot::RW);
    // On a mapping that does not grow down: EINVAL; with nothing in the range: ENOMEM.
    let plain = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(m.mprotect(plain, PAGE, PROT_READ | PROT_GROWSDOWN).err(), Some(Errno::EINVAL));
    assert_eq!(m.mprotect(0x1000_0000, PAGE, PROT_READ | PROT_GROWSDOWN).err(), Some(Errno::ENOMEM));
    assert_eq!(m.mprotect(g, PAGE, PROT_READ | PROT_GROWSUP).err(), Some(Errno::EINVAL));
    m.check();
}

#[test]
fn placement_keeps_the_guard_gap_free_below_a_stack() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let base = m.layout().mmap_base;
    // A stack right under mmap_base: the first unhinted mapping goes below its gap.
    let s = base - 4 * PAGE;
    m.mmap(s, 4 * PAGE, RW, PRIV | MAP_FIXED | MAP_GROWSDOWN, -1, 0).unwrap();
    let a = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(a + PAGE, s - STACK_GUARD_GAP, "placed just below the gap");
    // A hint inside the gap is not taken; one below it is.
    let h = m.mmap(s - 2 * PAGE, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert!(h + PAGE <= s - STACK_GUARD_GAP, "hint in the gap moved: {h:#x}");
    let ok = s - STACK_GUARD_GAP - 64 * PAGE;
    assert_eq!(m.mmap(ok, PAGE, RW, PRIV, -1, 0).unwrap().addr, ok);
    // MAP_FIXED goes where it is told.
    assert_eq!(m.mmap(s - PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap().addr, s - PAGE);
    m.check();
    // 2 MiB-multiple mappings (aligned placement) keep the gap too.
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let s = base - 2 * MIB;
    m.mmap(s, PAGE, RW, PRIV | MAP_FIXED | MAP_GROWSDOWN, -1, 0).unwrap();
    let big = m.mmap(0, 2 * MIB, RW, PRIV, -1, 0).unwrap().addr;
    assert!(big + 2 * MIB <= s - STACK_GUARD_GAP, "{big:#x}");
    m.check();
}

#[test]
fn a_fork_keeps_the_stack_limit() {
    let (mut m, _) = map_with(Below::Nothing, 0, 4 * PAGE, u64::MAX);
    let child = m.fork_copy().unwrap();
    assert_eq!(child.stack_limit().cur, 4 * PAGE);
    assert_eq!(m.grow_down(TOP - 6 * PAGE), Err(NoGrowth::StackLimit));
    assert!(m.grow_down(TOP - 5 * PAGE).is_ok());
}

#[test]
fn smaps_names_a_stack_gd() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let g = m.mmap(0, PAGE, RW, PRIV | MAP_GROWSDOWN, -1, 0).unwrap().addr;
    let names: Vec<&str> = m.find(g).unwrap().vm_flag_names().collect();
    assert_eq!(names, ["rd", "wr", "mr", "mw", "me", "gd", "ac"]);
    let s = m.mmap(0, PAGE, PROT_READ, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap().addr;
    let names: Vec<&str> = m.find(s).unwrap().vm_flag_names().collect();
    assert_eq!(names, ["rd", "sh", "mr", "mw", "me", "ms"]);
}
