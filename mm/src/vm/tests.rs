//! Tests of the Linux semantics layer, W^X, the code window and near placement.
//!
//! One file: the tests of every call share one fixture and one operation generator (`fixture`,
//! `small_layout`, `Op`, also used by `limit_tests.rs`).

use alloc::vec::Vec;
use proptest::prelude::*;

use super::advice::*;
use super::flags::*;
use super::map::{MadviseAction, ProtChange, Protected, WINDOW_DEFAULT};
use super::prot::*;
use super::*;

pub(super) const A: u64 = 0x7000_0000_0000;
pub(super) const PRIV: u64 = MAP_PRIVATE | MAP_ANONYMOUS;
const RW: u64 = PROT_READ | PROT_WRITE;
const RX: u64 = PROT_READ | PROT_EXEC;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A static program at 0x400000 (text RX, data RW), its window placed around the text, and two
/// mappings A (RW, 4 pages) and B (R, 4 pages) with a 4-page hole between them.
pub(super) fn fixture() -> VmMap {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    m.map_kernel(0x40_0000, 0x2_0000, Prot::RX, VmaFlags::IMAGE).unwrap();
    m.map_kernel(0x42_0000, 0x1_0000, Prot::RW, VmaFlags::IMAGE).unwrap();
    let w = m.init_code_window(Some((0x40_0000, 0x42_0000))).unwrap();
    assert_eq!((w.base, w.size), (0, WINDOW_DEFAULT));
    m.mmap(A, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(A + 8 * PAGE, 4 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.check();
    m
}

#[derive(Clone, Copy, Debug)]
enum Call {
    Mmap(u64, u64, u64, u64, i32, u64),
    Munmap(u64, u64),
    Mprotect(u64, u64, u64),
    Madvise(u64, u64, u64),
}

/// What the system call would return: the address or 0, or the errno (including the errors
/// reported after a partial `mprotect`/`madvise`).
fn ret(m: &mut VmMap, c: Call) -> Result<u64, Errno> {
    let r = match c {
        Call::Mmap(a, l, p, f, fd, o) => m.mmap(a, l, p, f, fd, o).map(|r| r.addr),
        Call::Munmap(a, l) => m.munmap(a, l).map(|_| 0),
        Call::Mprotect(a, l, p) => m.mprotect(a, l, p).and_then(|r| r.error.map_or(Ok(0), Err)),
        Call::Madvise(a, l, v) => m.madvise(a, l, v).and_then(|r| r.error.map_or(Ok(0), Err)),
    };
    m.check();
    r
}

#[test]
fn errno_table_from_the_man_pages() {
    use Call::*;
    use linux_abi::errno::consts::*;
    let top = 1u64 << 48;
    // A page-aligned address below mmap_min_addr (64 KiB): 4 KiB with 4 KiB pages, 16 KiB with
    // 16 KiB; with 64 KiB pages only 0 is, the row of MAP_FIXED at 0 again.
    let low = if PAGE < 0x1_0000 { PAGE } else { 0 };
    #[rustfmt::skip]
    let table: &[(&str, Call, Result<u64, Errno>)] = &[
        // mmap(2)
        ("mmap: file mapping, fd -1 (EBADF)", Mmap(0, PAGE, RW, MAP_PRIVATE, -1, 0), Err(EBADF)),
        ("mmap: file mapping, fd 3 (only anonymous)", Mmap(0, PAGE, RW, MAP_PRIVATE, 3, 0), Err(ENODEV)),
        ("mmap: EBADF comes before EINVAL for length 0", Mmap(0, 0, RW, MAP_PRIVATE, -1, 0), Err(EBADF)),
        ("mmap: length 0", Mmap(0, 0, RW, PRIV, -1, 0), Err(EINVAL)),
        ("mmap: offset not a page multiple", Mmap(0, PAGE, RW, PRIV, -1, 100), Err(EINVAL)),
        ("mmap: neither MAP_PRIVATE nor MAP_SHARED", Mmap(0, PAGE, RW, MAP_ANONYMOUS, -1, 0), Err(EINVAL)),
        ("mmap: MAP_SHARED_VALIDATE on anonymous memory", Mmap(0, PAGE, RW, MAP_SHARED_VALIDATE | MAP_ANONYMOUS, -1, 0), Err(EINVAL)),
        ("mmap: MAP_SHARED | MAP_GROWSDOWN", Mmap(0, PAGE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0), Err(EINVAL)),
        ("mmap: MAP_FIXED address not aligned", Mmap(A + 1, PAGE, RW, PRIV | MAP_FIXED, -1, 0), Err(EINVAL)),
        ("mmap: MAP_FIXED_NOREPLACE address not aligned", Mmap(A + 1, PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Err(EINVAL)),
        ("mmap: unknown prot bits are ignored (calc_vm_prot_bits)", Mmap(A + 0x60_0000, PAGE, RW | 0x40 | 0x8000_0000, PRIV, -1, 0), Ok(A + 0x60_0000)),
        ("mmap: PROT_MTE without MTE is ignored", Mmap(A + 0x70_0000, PAGE, RW | PROT_MTE, PRIV, -1, 0), Ok(A + 0x70_0000)),
        ("mmap: PROT_GROWSDOWN is ignored by mmap", Mmap(A + 0x80_0000, PAGE, RW | PROT_GROWSDOWN, PRIV, -1, 0), Ok(A + 0x80_0000)),
        ("mmap: unaligned offset comes before EBADF (arm64 sys_mmap)", Mmap(0, PAGE, RW, MAP_PRIVATE, 3, 100), Err(EINVAL)),
        ("mmap: unaligned offset comes before EBADF, fd -1", Mmap(0, PAGE, RW, MAP_PRIVATE, -1, 1), Err(EINVAL)),
        ("mmap: no mapping type, executable", Mmap(0, PAGE, RX, MAP_ANONYMOUS, -1, 0), Err(EINVAL)),
        ("mmap: no mapping type, MAP_CODE", Mmap(0, PAGE, RW, MAP_ANONYMOUS | MAP_CODE, -1, 0), Err(EINVAL)),
        ("mmap: no mapping type, executable, MAP_FIXED", Mmap(0x10_0000, PAGE, RX, MAP_ANONYMOUS | MAP_FIXED, -1, 0), Err(EINVAL)),
        ("mmap: length overflows when rounded", Mmap(0, u64::MAX, RW, PRIV, -1, 0), Err(ENOMEM)),
        ("mmap: length larger than the address space", Mmap(0, top, RW, PRIV, -1, 0), Err(ENOMEM)),
        ("mmap: MAP_FIXED past TASK_SIZE", Mmap(top - PAGE, 2 * PAGE, RW, PRIV | MAP_FIXED, -1, 0), Err(ENOMEM)),
        ("mmap: MAP_FIXED at 0 (mmap_min_addr)", Mmap(0, PAGE, RW, PRIV | MAP_FIXED, -1, 0), Err(EPERM)),
        ("mmap: MAP_FIXED at one page (below 64 KiB)", Mmap(low, PAGE, RW, PRIV | MAP_FIXED, -1, 0), Err(EPERM)),
        ("mmap: MAP_FIXED_NOREPLACE below 64 KiB", Mmap(0x1_0000 - PAGE, PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Err(EPERM)),
        ("mmap: MAP_FIXED at exactly 64 KiB", Mmap(0x1_0000, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0), Ok(0x1_0000)),
        ("mmap: MAP_FIXED_NOREPLACE over a mapping", Mmap(A, PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Err(EEXIST)),
        ("mmap: MAP_FIXED_NOREPLACE partial overlap (tail)", Mmap(A + 6 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Err(EEXIST)),
        ("mmap: MAP_FIXED_NOREPLACE partial overlap (head)", Mmap(A - PAGE, 2 * PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Err(EEXIST)),
        ("mmap: MAP_FIXED | MAP_FIXED_NOREPLACE never replaces", Mmap(A, PAGE, RW, PRIV | MAP_FIXED | MAP_FIXED_NOREPLACE, -1, 0), Err(EEXIST)),
        ("mmap: MAP_FIXED_NOREPLACE in the hole", Mmap(A + 4 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED_NOREPLACE, -1, 0), Ok(A + 4 * PAGE)),
        ("mmap: EEXIST comes before a bad mapping type", Mmap(A, PAGE, RW, MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0), Err(EEXIST)),
        ("mmap: writable and executable (W^X)", Mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0), Err(EACCES)),
        ("mmap: MAP_HUGETLB without a pool", Mmap(0, 2 * MIB, RW, PRIV | MAP_HUGETLB, -1, 0), Err(ENOMEM)),
        ("mmap: a free hint is honoured exactly", Mmap(A + 4 * PAGE, PAGE, RW, PRIV, -1, 0), Ok(A + 4 * PAGE)),
        ("mmap: an unaligned hint is rounded down", Mmap(A + 0x20_0123, PAGE, RW, PRIV, -1, 0), Ok(A + 0x20_0000)),
        ("mmap: unknown flags are ignored (Linux)", Mmap(A + 0x30_0000, PAGE, RW, PRIV | 0x40 | 0x80, -1, 0), Ok(A + 0x30_0000)),
        ("mmap: shared anonymous", Mmap(A + 0x40_0000, PAGE, RW, MAP_SHARED | MAP_ANONYMOUS, -1, 0), Ok(A + 0x40_0000)),
        ("mmap: offset ignored for anonymous memory", Mmap(A + 0x50_0000, PAGE, RW, PRIV, -1, 1 << 40), Ok(A + 0x50_0000)),
        // munmap(2)
        ("munmap: address not aligned", Munmap(A + 1, PAGE), Err(EINVAL)),
        ("munmap: length 0", Munmap(A, 0), Err(EINVAL)),
        ("munmap: range past TASK_SIZE", Munmap(top - PAGE, 2 * PAGE), Err(EINVAL)),
        ("munmap: address past TASK_SIZE", Munmap(top + PAGE, PAGE), Err(EINVAL)),
        ("munmap: length overflows", Munmap(A, u64::MAX), Err(EINVAL)),
        ("munmap: nothing mapped there is fine", Munmap(0x1000_0000_0000, 16 * PAGE), Ok(0)),
        ("munmap: across a hole, unaligned length", Munmap(A + 2 * PAGE, 9 * PAGE + 1), Ok(0)),
        // mprotect(2)
        ("mprotect: address not aligned", Mprotect(A + 1, PAGE, PROT_READ), Err(EINVAL)),
        ("mprotect: unknown prot bit", Mprotect(A, PAGE, 0x40), Err(EINVAL)),
        ("mprotect: PROT_GROWSDOWN | PROT_GROWSUP", Mprotect(A, PAGE, PROT_READ | PROT_GROWSDOWN | PROT_GROWSUP), Err(EINVAL)),
        ("mprotect: PROT_GROWSDOWN on a mapping that does not grow", Mprotect(A, PAGE, PROT_READ | PROT_GROWSDOWN), Err(EINVAL)),
        ("mprotect: length 0 succeeds, even on a hole", Mprotect(A + 5 * PAGE, 0, PROT_READ), Ok(0)),
        ("mprotect: nothing mapped at the address", Mprotect(A + 5 * PAGE, PAGE, PROT_READ), Err(ENOMEM)),
        ("mprotect: range with a hole", Mprotect(A, 12 * PAGE, PROT_READ), Err(ENOMEM)),
        ("mprotect: range overflows", Mprotect(A, u64::MAX - A, PROT_READ), Err(ENOMEM)),
        ("mprotect: range past everything", Mprotect(top, PAGE, PROT_READ), Err(ENOMEM)),
        ("mprotect: writable and executable (W^X)", Mprotect(A, PAGE, RW | PROT_EXEC), Err(EACCES)),
        ("mprotect: unaligned length is rounded up", Mprotect(A, 3 * PAGE + 5, PROT_READ), Ok(0)),
        ("mprotect: PROT_NONE", Mprotect(A, PAGE, 0), Ok(0)),
        // madvise(2)
        ("madvise: unknown advice", Madvise(A, PAGE, 5), Err(EINVAL)),
        ("madvise: unknown advice (large)", Madvise(A, PAGE, 1000), Err(EINVAL)),
        ("madvise: KSM not built", Madvise(A, PAGE, MADV_MERGEABLE), Err(EINVAL)),
        ("madvise: address not aligned", Madvise(A + 1, PAGE, MADV_DONTNEED), Err(EINVAL)),
        ("madvise: length overflows when rounded", Madvise(A, u64::MAX, MADV_DONTNEED), Err(EINVAL)),
        ("madvise: range wraps", Madvise(A, u64::MAX - 2 * PAGE, MADV_DONTNEED), Err(EINVAL)),
        ("madvise: length 0", Madvise(A + 5 * PAGE, 0, MADV_DONTNEED), Ok(0)),
        ("madvise: unknown advice before length 0", Madvise(A, 0, 7), Err(EINVAL)),
        ("madvise: hole in the range", Madvise(A, 12 * PAGE, MADV_DONTNEED), Err(ENOMEM)),
        ("madvise: a hole first, a mapping after it", Madvise(A + 4 * PAGE, 8 * PAGE, MADV_DONTNEED), Err(ENOMEM)),
        ("madvise: WIPEONFORK past a hole", Madvise(A, 12 * PAGE, MADV_WIPEONFORK), Err(ENOMEM)),
        ("madvise: REMOVE stops at the first private mapping", Madvise(A, 12 * PAGE, MADV_REMOVE), Err(EINVAL)),
        ("madvise: POPULATE_WRITE past a hole, read-only memory", Madvise(A, 12 * PAGE, MADV_POPULATE_WRITE), Err(EFAULT)),
        ("madvise: nothing mapped", Madvise(0x1000_0000_0000, PAGE, MADV_WILLNEED), Err(ENOMEM)),
        ("madvise: DONTNEED", Madvise(A, 4 * PAGE, MADV_DONTNEED), Ok(0)),
        ("madvise: FREE", Madvise(A, 4 * PAGE, MADV_FREE), Ok(0)),
        ("madvise: WILLNEED", Madvise(A, 4 * PAGE, MADV_WILLNEED), Ok(0)),
        ("madvise: RANDOM", Madvise(A, 2 * PAGE, MADV_RANDOM), Ok(0)),
        ("madvise: SEQUENTIAL", Madvise(A, 2 * PAGE, MADV_SEQUENTIAL), Ok(0)),
        ("madvise: NORMAL", Madvise(A, 4 * PAGE, MADV_NORMAL), Ok(0)),
        ("madvise: COLD", Madvise(A, 4 * PAGE, MADV_COLD), Ok(0)),
        ("madvise: HUGEPAGE", Madvise(A, 4 * PAGE, MADV_HUGEPAGE), Ok(0)),
        ("madvise: DONTDUMP", Madvise(A, 4 * PAGE, MADV_DONTDUMP), Ok(0)),
        ("madvise: REMOVE on private memory", Madvise(A, 4 * PAGE, MADV_REMOVE), Err(EINVAL)),
        ("madvise: POPULATE_WRITE on read-only memory", Madvise(A + 8 * PAGE, PAGE, MADV_POPULATE_WRITE), Err(EFAULT)),
        ("madvise: POPULATE_READ", Madvise(A + 8 * PAGE, PAGE, MADV_POPULATE_READ), Ok(0)),
        ("madvise: HWPOISON needs CAP_SYS_ADMIN", Madvise(A, PAGE, MADV_HWPOISON), Err(EPERM)),
        ("madvise: guard regions (6.13) unknown", Madvise(A, PAGE, 102), Err(EINVAL)),
    ];
    for (name, call, expected) in table {
        let mut m = fixture();
        assert_eq!(ret(&mut m, *call), *expected, "{name}: {call:?}");
    }
}

/// Linux's `madvise_walk_vmas`: the advice goes to every mapped part of the range and a hole is
/// answered with `ENOMEM` after the walk; a mapping the advice refuses stops the walk there, its
/// errno winning over a hole before it.
#[test]
fn every_advice_applies_past_a_hole_and_answers_enomem_at_the_end() {
    use linux_abi::errno::consts::*;
    let advices = [
        MADV_NORMAL,
        MADV_RANDOM,
        MADV_SEQUENTIAL,
        MADV_WILLNEED,
        MADV_DONTNEED,
        MADV_DONTNEED_LOCKED,
        MADV_FREE,
        MADV_DONTFORK,
        MADV_DOFORK,
        MADV_WIPEONFORK,
        MADV_KEEPONFORK,
        MADV_DONTDUMP,
        MADV_DODUMP,
        MADV_HUGEPAGE,
        MADV_NOHUGEPAGE,
        MADV_COLLAPSE,
        MADV_COLD,
        MADV_PAGEOUT,
        MADV_POPULATE_READ,
        MADV_POPULATE_WRITE,
    ];
    // The fixture's A (read-write) and, past a 4-page hole, C: read-write too, so that any
    // attribute an advice sets shows as a difference if it reached only one of them.
    let two = || {
        let mut m = fixture();
        m.mmap(A + 8 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
        m
    };
    for advice in advices {
        let mut m = two();
        let r = m.madvise(A, 12 * PAGE, advice).unwrap();
        assert_eq!(r.error, Some(ENOMEM), "advice {advice}");
        assert_eq!(r.ranges, [(A, A + 4 * PAGE), (A + 8 * PAGE, A + 12 * PAGE)], "advice {advice}");
        let (a, c) = (*m.find(A).unwrap(), *m.find(A + 8 * PAGE).unwrap());
        assert!(a.same_attrs(&c), "advice {advice} reached one mapping only: {a:?} {c:?}");
        m.check();
    }
    let mut m = two();
    m.madvise(A, 12 * PAGE, MADV_DONTFORK).unwrap();
    assert!(m.find(A + 8 * PAGE).unwrap().flags.contains(VmaFlags::DONTFORK), "past the hole");
    // FREE and WIPEONFORK refuse a memory object's pages, private ones too (Linux: not
    // anonymous): the mapping before the hole has the advice, the walk stops at the object.
    for advice in [MADV_FREE, MADV_WIPEONFORK] {
        let mut m = fixture();
        m.mmap(A + 8 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED | MAP_OBJECT, -1, 0).unwrap();
        let r = m.madvise(A, 12 * PAGE, advice).unwrap();
        assert_eq!((r.error, r.ranges), (Some(EINVAL), std::vec![(A, A + 4 * PAGE)]), "advice {advice}");
        m.check();
    }
}

#[test]
fn errno_values_are_linux() {
    let v = [
        (Errno::EPERM, 1),
        (Errno::EBADF, 9),
        (Errno::ENOMEM, 12),
        (Errno::EACCES, 13),
        (Errno::EFAULT, 14),
        (Errno::EBUSY, 16),
        (Errno::EEXIST, 17),
        (Errno::ENODEV, 19),
        (Errno::EINVAL, 22),
        (Errno::ENOSYS, 38),
        (Errno::EOVERFLOW, 75),
        (Errno::EOPNOTSUPP, 95),
    ];
    for (e, n) in v {
        assert_eq!(e.code(), n);
        assert_eq!(e.as_ret(), -i64::from(n));
    }
}

#[test]
fn brk_as_linux() {
    let mut m = fixture();
    let start = m.brk(0).brk;
    assert_eq!(start, 512 * MIB, "the empty heap moved out of the code window [0, 512 MiB)");
    assert_eq!(m.start_brk(), start);
    let r = m.brk(start + 100);
    assert_eq!((r.brk, r.mapped), (start + 100, Some((start, start + PAGE))));
    let r = m.brk(start + 3 * PAGE + 1);
    assert_eq!((r.brk, r.mapped), (start + 3 * PAGE + 1, Some((start + PAGE, start + 4 * PAGE))));
    assert_eq!(m.mappings_in(start, start + 4 * PAGE).count(), 1, "the heap is one mapping");
    // Shrinking within the same page maps and unmaps nothing.
    let r = m.brk(start + 3 * PAGE + 8);
    assert_eq!((r.brk, r.mapped, r.unmapped.len()), (start + 3 * PAGE + 8, None, 0));
    // A mapping in the way: growth must leave one free page before it.
    m.mmap(start + 10 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.brk(start + 10 * PAGE).brk, start + 3 * PAGE + 8, "failure returns the old break");
    assert_eq!(m.brk(start + 9 * PAGE).brk, start + 9 * PAGE);
    let r = m.brk(start + PAGE);
    assert_eq!(r.brk, start + PAGE);
    assert_eq!(
        r.unmapped.iter().map(|v| (v.start, v.end)).collect::<Vec<_>>(),
        [(start + PAGE, start + 9 * PAGE)]
    );
    assert_eq!(m.brk(start - PAGE).brk, start + PAGE, "below the heap's start: unchanged");
    assert_eq!(m.brk(u64::MAX).brk, start + PAGE, "overflow: unchanged");
    m.check();
}

#[test]
fn map_fixed_returns_what_it_replaced() {
    let mut m = fixture();
    let r = m.mmap(A + 2 * PAGE, 8 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    let rep: Vec<_> = r.replaced.iter().map(|v| (v.start, v.end, v.prot)).collect();
    assert_eq!(rep, [(A + 2 * PAGE, A + 4 * PAGE, Prot::RW), (A + 8 * PAGE, A + 10 * PAGE, Prot::READ)]);
    let all: Vec<_> = m.mappings_in(A, A + 12 * PAGE).map(|v| (v.start, v.end, v.prot)).collect();
    // The new read-only mapping merged with the tail of B, which has the same attributes.
    assert_eq!(all, [(A, A + 2 * PAGE, Prot::RW), (A + 2 * PAGE, A + 12 * PAGE, Prot::READ)]);
    m.check();
}

/// An empty range overlaps nothing, even inside a mapping (a caller walking `[cursor, end)` by
/// the ends of what it finds relies on that to stop).
#[test]
fn an_empty_range_holds_no_mappings() {
    let m = fixture();
    for at in [A, A + PAGE, A + 4 * PAGE, A + 9 * PAGE, 0, u64::MAX] {
        assert_eq!(m.mappings_in(at, at).count(), 0, "[{at:#x}, {at:#x})");
        assert_eq!(m.mappings_in(at, at.saturating_sub(PAGE)).count(), 0, "end below start at {at:#x}");
    }
    assert_eq!(
        m.mappings_in(A + PAGE, A + PAGE + 1).map(|v| (v.start, v.end)).collect::<Vec<_>>(),
        [(A + PAGE, A + PAGE + 1)]
    );
}

#[test]
fn mprotect_changes_the_prefix_before_a_hole_then_fails() {
    let mut m = fixture();
    let r = m.mprotect(A + PAGE, 11 * PAGE, PROT_READ | PROT_EXEC).unwrap();
    assert_eq!(r.error, Some(Errno::ENOMEM));
    assert_eq!(
        r.changes,
        [ProtChange {
            start: A + PAGE,
            end: A + 4 * PAGE,
            old: Prot::RW,
            new: Prot::RX,
            flags: VmaFlags::empty()
        }]
    );
    assert_eq!(m.find(A).unwrap().prot, Prot::RW);
    assert_eq!(m.find(A + PAGE).unwrap().prot, Prot::RX);
    assert_eq!(m.find(A + 8 * PAGE).unwrap().prot, Prot::READ, "after the hole: unchanged");
    // Changing back merges the pieces again.
    m.mprotect(A, 4 * PAGE, RW).unwrap();
    assert_eq!(m.mappings_in(A, A + 4 * PAGE).count(), 1);
    m.check();
}

#[test]
fn madvise_applies_to_the_mapped_parts_and_reports_the_hole() {
    let mut m = fixture();
    let r = m.madvise(A + 2 * PAGE, 8 * PAGE, MADV_DONTNEED).unwrap();
    assert_eq!(r.action, MadviseAction::Discard);
    assert_eq!(r.ranges, [(A + 2 * PAGE, A + 4 * PAGE), (A + 8 * PAGE, A + 10 * PAGE)]);
    assert_eq!(r.error, Some(Errno::ENOMEM));
    let r = m.madvise(A, 12 * PAGE, MADV_RANDOM).unwrap();
    assert_eq!(r.error, Some(Errno::ENOMEM));
    assert_eq!(m.find(A + 8 * PAGE).unwrap().advice, Advice::Random);
    m.madvise(A + 2 * PAGE, PAGE, MADV_SEQUENTIAL).unwrap();
    assert_eq!(m.mappings_in(A, A + 4 * PAGE).count(), 3, "advice splits");
    m.madvise(A, 4 * PAGE, MADV_NORMAL).unwrap();
    assert_eq!(m.mappings_in(A, A + 4 * PAGE).count(), 1, "and merges back");
    m.check();
}

#[test]
fn hints_as_linux_rounds_them() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    // Linux's round_hint_to_min: a non-zero hint below mmap_min_addr becomes mmap_min_addr
    // (with 64 KiB pages the one-page hint is mmap_min_addr itself).
    assert_eq!(m.mmap(PAGE, PAGE, RW, PRIV, -1, 0).unwrap().addr, 0x1_0000);
    // A hint that rounds down to 0 is no hint: top-down placement.
    let top = m.mmap(0x800, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(top, m.layout().mmap_base - PAGE);
    // A hint whose range is partly taken is not honoured (no "nearest" either).
    let r = m.mmap(0x1_0000, 2 * PAGE, PROT_READ, PRIV, -1, 0).unwrap().addr;
    assert_eq!(r, top - 2 * PAGE);
    m.check();
}

#[test]
fn top_down_placement_below_mmap_base() {
    let mut m = fixture();
    let base = m.layout().mmap_base;
    let a = m.mmap(0, 3 * PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(a, base - 3 * PAGE);
    let b = m.mmap(0, PAGE, PROT_READ, PRIV, -1, 0).unwrap().addr;
    assert_eq!(b, a - PAGE);
    // An occupied hint falls back to top-down placement (no "nearest to the hint").
    let c = m.mmap(A, PAGE, PROT_READ, PRIV, -1, 0).unwrap().addr;
    assert_eq!(c, b - PAGE);
    m.munmap(a + 2 * PAGE, PAGE).unwrap();
    let d = m.mmap(0, PAGE, PROT_READ, PRIV, -1, 0).unwrap().addr;
    assert_eq!(d, base - PAGE, "the highest free fit is reused");
    // A multiple of the level-2 block (PMD_SIZE: 2, 32 or 512 MiB) without a hint is aligned to
    // it (Linux's THP alignment).
    let pmd = crate::test_support::per_granule(2 * MIB, 32 * MIB, 512 * MIB);
    let e = m.mmap(0, 2 * pmd, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(e, (c & !(pmd - 1)) - 2 * pmd);
    let f = m.mmap(0, pmd + PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(f, e - pmd - PAGE, "other lengths are not aligned");
    m.check();
}

#[test]
fn w_xor_x_and_the_opt_out() {
    let mut m = fixture();
    let a = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(m.mprotect(a, PAGE, RW | PROT_EXEC), Err(Errno::EACCES));
    let r = m.mprotect(a, PAGE, RX).unwrap();
    assert_eq!(r.changes[0].new, Prot::RX, "RW -> RX is allowed");
    assert_eq!(m.map_near(0x40_0000, PAGE, 64 * MIB, RW | PROT_EXEC, PRIV).unwrap_err(), Errno::EACCES);
    assert_eq!(
        m.map_kernel(0x100_0000, PAGE, Prot::RW.union(Prot::EXEC), VmaFlags::empty()),
        Err(Errno::EACCES)
    );
    assert_eq!(m.code_window_op(abi::WINDOW_ALLOW_WX, 2), Err(Errno::EINVAL));
    m.code_window_op(abi::WINDOW_ALLOW_WX, 1).unwrap();
    let b = m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap();
    assert!(m.code_window_range().is_some_and(|(s, e)| s <= b.addr && b.addr + PAGE <= e));
    m.mprotect(a, PAGE, RW | PROT_EXEC).unwrap();
    m.check();
}

/// `setarch -X` (`personality(READ_IMPLIES_EXEC)`) is the administrator's W^X opt-out: RWX
/// mmap and mprotect pass, placed by the window's rules; readable mappings do not become
/// executable (unlike Linux); clearing the flag restores W^X; a forked child keeps it; the
/// program's own opt-out and the personality do not turn each other off.
#[test]
fn read_implies_exec_lifts_w_xor_x_without_making_data_executable() {
    use linux_abi::prctl::{ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC};
    let mut m = fixture();
    m.set_personality(ADDR_NO_RANDOMIZE);
    assert_eq!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap_err(), Errno::EACCES, "other flags");
    m.set_personality(READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE);
    let b = m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap();
    assert!(in_window(&m, b.addr, PAGE), "RWX is code: in the window, {:#x}", b.addr);
    let r = m.mmap(0, PAGE, PROT_READ, PRIV, -1, 0).unwrap();
    assert_eq!(m.find(r.addr).unwrap().prot, Prot::READ, "PROT_READ stays not executable");
    assert!(!in_window(&m, r.addr, PAGE), "and is data, outside the window");
    let a = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert_eq!(m.mprotect(a, PAGE, RW | PROT_EXEC).unwrap().error, None);
    assert_eq!(m.map_near(0x40_0000, PAGE, 64 * MIB, RW | PROT_EXEC, PRIV).map(|_| ()), Ok(()));
    let child = m.fork_copy().unwrap();
    m.set_personality(0);
    assert_eq!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap_err(), Errno::EACCES, "cleared");
    let mut child = child;
    assert!(child.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).is_ok(), "a forked child keeps it");
    // The program's own switch and the personality are two: clearing one leaves the other.
    m.set_allow_wx(true);
    m.set_personality(0);
    assert!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).is_ok());
    m.set_allow_wx(false);
    m.set_personality(READ_IMPLIES_EXEC);
    assert!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).is_ok());
    m.check();
}

/// A process that asked for MDWE keeps it under `READ_IMPLIES_EXEC`, as under Linux (MDWE
/// refuses `PROT_WRITE|PROT_EXEC` whatever the personality).
#[test]
fn mdwe_wins_over_read_implies_exec() {
    use linux_abi::prctl::{PR_MDWE_REFUSE_EXEC_GAIN, READ_IMPLIES_EXEC};
    let mut m = fixture();
    m.set_personality(READ_IMPLIES_EXEC);
    let a = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    m.set_mdwe(PR_MDWE_REFUSE_EXEC_GAIN).unwrap();
    assert_eq!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap_err(), Errno::EACCES);
    assert_eq!(m.mprotect(a, PAGE, RW | PROT_EXEC).unwrap_err(), Errno::EACCES);
    assert_eq!(m.map_near(0x40_0000, PAGE, 64 * MIB, RW | PROT_EXEC, PRIV).unwrap_err(), Errno::EACCES);
    m.check();
}

/// V8's code range, as Debian's node 18 asks for it (traced under qemu-user): 128 MiB
/// `PROT_NONE` `MAP_NORESERVE` at a hint inside its own (occupied) text, then pages flipped
/// between RWX and RX. Under `READ_IMPLIES_EXEC` every flip passes and all of it stays in the
/// window, nothing counted outside; without it the RWX flip is `EACCES`.
#[test]
fn v8s_code_range_lands_in_the_window_and_flips_rwx_under_read_implies_exec() {
    use linux_abi::prctl::READ_IMPLIES_EXEC;
    let mut m = fixture();
    let range = m.mmap(0x41_0000, 128 * MIB, 0, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(in_window(&m, range.addr, 128 * MIB), "{:#x}", range.addr);
    let page = range.addr + 3 * PAGE;
    assert_eq!(m.mprotect(page, 240 << 10, RW | PROT_EXEC).unwrap_err(), Errno::EACCES, "W^X by default");
    m.set_personality(READ_IMPLIES_EXEC);
    for _ in 0..12 {
        assert_eq!(m.mprotect(page, 240 << 10, RW | PROT_EXEC).unwrap().error, None);
        assert_eq!(m.mprotect(page, 124 << 10, RX).unwrap().error, None);
    }
    assert_eq!(m.code_window().placed_outside, 0);
    m.check();
}

fn in_window(m: &VmMap, a: u64, len: u64) -> bool {
    m.code_window_range().is_some_and(|(s, e)| s <= a && a + len <= e)
}

/// With a code floor, the interpreter and code without a hint go to the lowest fit at or above
/// it (aligned as asked), and below it only when nothing above fits; the floor stays in the
/// window's first quarter.
#[test]
fn code_goes_from_the_floor_then_anywhere_in_the_window() {
    let w0 = 0x2000_0000; // a 512 MiB window, the text in its middle half
    let text = w0 + 0x1000_0000;
    let mut m = VmMap::new(Layout::linux(text + 0x10_0000));
    m.map_kernel(text, 0x2_0000, Prot::RX, VmaFlags::IMAGE).unwrap();
    let w = m.init_code_window(Some((text, text + 0x2_0000))).unwrap();
    assert_eq!((w.base, w.size), (w0, WINDOW_DEFAULT));
    let floor = w0 + 0x40_0000 + PAGE;
    m.set_code_floor(floor - w0);
    let interp = m.place_image(0x3_0000, 0x1_0000).unwrap();
    assert_eq!(interp, floor.next_multiple_of(0x1_0000), "the first 64 KiB place at or above the floor");
    m.map_kernel(interp, 0x3_0000, Prot::RX, VmaFlags::IMAGE).unwrap();
    let lib = m.mmap(0, 4 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(lib.addr >= floor && lib.addr < interp + 0x3_0000 + 4 * PAGE, "{:#x}", lib.addr);
    if PAGE == 4096 {
        assert_eq!(lib.addr, floor, "page-aligned code: at the floor, below the interpreter");
    }
    // Above the floor taken up to the window's end but for less than 64 KiB: 128 KiB of code
    // goes below the floor.
    let gap = (interp + 0x3_0000).max(lib.addr + 4 * PAGE);
    let end = w0 + WINDOW_DEFAULT;
    m.mmap(gap, text - gap, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(text + 0x2_0000, end - text - 0x2_0000, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    let low = m.mmap(0, 0x2_0000, RX, PRIV, -1, 0).unwrap();
    assert_eq!(low.addr, w0, "below the floor when nothing above it fits");
    assert!(!low.outside_window);
    // The floor stays below a quarter of the window.
    m.set_code_floor(u64::MAX);
    let big = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(big.addr < w0 + WINDOW_DEFAULT / 4, "{:#x}", big.addr);
    m.check();
}

/// A floor drawn for the default window still works in a window the program shrank: it counts
/// within the first quarter of the window as it is.
#[test]
fn a_code_floor_follows_the_window_size() {
    let mut m = fixture();
    m.set_code_floor(100 * MIB);
    m.set_window_size(2 * MIB).unwrap();
    let (b, e) = m.code_window_range().unwrap();
    let a = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(b <= a.addr && a.addr + PAGE <= e && !a.outside_window, "{:#x} in {b:#x}..{e:#x}", a.addr);
    assert_eq!(a.addr, b + (e - b) / 4, "at the floor, a quarter into the 2 MiB window");
    m.check();
}

#[test]
fn code_goes_into_the_window_lowest_fit_first_and_is_reused() {
    let mut m = fixture();
    // Window [0, 512 MiB) around the text at 0x400000; data at 0x420000..0x430000.
    let a = m.mmap(0, 4 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(a.addr, 0x1_0000, "lowest fit: just above mmap_min_addr");
    assert!(!a.outside_window);
    let b = m.mmap(0, 0x3f_0000, PROT_READ | PROT_WRITE, PRIV | MAP_CODE, -1, 0).unwrap();
    assert_eq!(b.addr, 0x43_0000, "MAP_CODE: inside, even while not executable; first fit above the image");
    assert_eq!(m.find(b.addr).unwrap().flags, VmaFlags::CODE);
    let c = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(c.addr, 0x1_0000 + 4 * PAGE);
    m.munmap(a.addr, 4 * PAGE).unwrap();
    let d = m.mmap(0, 2 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(d.addr, 0x1_0000, "freed range reused");
    // A code hint inside the window is honoured; outside it is not.
    let e = m.mmap(0x1000_0000, PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(e.addr, 0x1000_0000);
    let f = m.mmap(A + 0x100_0000, PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(in_window(&m, f.addr, PAGE));
    let info = m.code_window();
    assert_eq!(info.used, 0x2_0000 + 0x1_0000 + 2 * PAGE + 0x3f_0000 + 3 * PAGE);
    assert_eq!(info.placed_outside, 0);
    // Data goes into the window only when asked: at a hint there (docs/address-space.md,
    // "Libraries and JITs"); without one it stays out.
    let g = m.mmap(0x800_0000, PAGE, RW, PRIV, -1, 0).unwrap();
    assert_eq!(g.addr, 0x800_0000);
    let h = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap();
    assert!(!in_window(&m, h.addr, PAGE));
    assert_eq!(m.code_window().placed_outside, 0);
    m.check();
}

#[test]
fn a_full_window_places_outside_without_crossing_1gib_or_fails_in_strict_mode() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    m.set_window_size(2 * MIB).unwrap();
    let info = m.init_code_window(None).unwrap();
    assert_eq!(info.size, 2 * MIB);
    assert_eq!(info.base % (2 * MIB), 0);
    let (wb, we) = m.code_window_range().unwrap();
    assert!(we <= m.layout().mmap_base, "placed top-down below mmap_base");
    let a = m.mmap(0, 2 * MIB - PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(a.addr, wb);
    // The window has one page left: a 2-page request goes outside, counted.
    let b = m.mmap(0, 2 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(b.outside_window && !in_window(&m, b.addr, 2 * PAGE));
    assert_eq!(m.code_window().placed_outside, 1);
    // Outside placement never crosses a 1 GiB line: fill down to just above one.
    let line = b.addr & !(GIB - 1);
    let fill = b.addr - line - 3 * PAGE;
    m.mmap(line + 3 * PAGE, fill, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    let c = m.mmap(0, 8 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(c.addr >> 30, (c.addr + 8 * PAGE - 1) >> 30, "no 1 GiB crossing: {:#x}", c.addr);
    assert_eq!(c.addr + 8 * PAGE, line, "the highest fit below the line");
    assert_eq!(m.code_window().placed_outside, 2);
    let p = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(p.addr, we - PAGE, "the last page of the window");
    m.code_window_op(abi::WINDOW_SET_STRICT, 1).unwrap();
    assert_eq!(m.code_window().strict, 1);
    assert_eq!(m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    assert_eq!(m.mmap(0, PAGE, RW, PRIV | MAP_CODE, -1, 0).unwrap_err(), Errno::ENOMEM);
    assert!(m.mmap(0, PAGE, RW, PRIV, -1, 0).is_ok(), "data is not affected");
    assert_eq!(m.code_window().placed_outside, 2);
    // A bad mapping type is Linux's EINVAL, not the full window's ENOMEM.
    assert_eq!(m.mmap(0, PAGE, RX, MAP_ANONYMOUS, -1, 0).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.mmap(0, PAGE, RW, MAP_ANONYMOUS | MAP_CODE, -1, 0).unwrap_err(), Errno::EINVAL);
    m.check();
}

#[test]
fn mprotect_exec_outside_the_window_is_counted_or_refused_in_strict_mode() {
    let mut m = fixture();
    let a = m.mmap(0, 2 * PAGE, RW, PRIV, -1, 0).unwrap().addr;
    assert!(!in_window(&m, a, PAGE));
    m.mprotect(a, PAGE, RX).unwrap();
    assert_eq!(m.code_window().placed_outside, 1, "default: allowed, counted");
    m.mprotect(a, PAGE, PROT_READ).unwrap();
    m.mprotect(a, PAGE, RX).unwrap();
    assert_eq!(m.code_window().placed_outside, 2);
    m.mprotect(a, PAGE, RX).unwrap();
    assert_eq!(m.code_window().placed_outside, 2, "already executable: not counted again");
    m.set_window_strict(true);
    assert_eq!(m.mprotect(a, 2 * PAGE, RX).unwrap_err(), Errno::EACCES);
    assert_eq!(m.find(a + PAGE).unwrap().prot, Prot::RW, "nothing changed");
    // Inside the window, RW -> RX stays allowed in strict mode.
    let j = m.mmap(0, PAGE, RW, PRIV | MAP_CODE, -1, 0).unwrap().addr;
    assert!(in_window(&m, j, PAGE));
    m.mprotect(j, PAGE, RX).unwrap();
    // MAP_FIXED of code outside the window: refused in strict mode, counted otherwise.
    assert_eq!(m.mmap(A + 0x100_0000, PAGE, RX, PRIV | MAP_FIXED, -1, 0).unwrap_err(), Errno::EACCES);
    m.set_window_strict(false);
    let f = m.mmap(A + 0x100_0000, PAGE, RX, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert!(f.outside_window);
    assert_eq!(m.code_window().placed_outside, 3);
    m.check();
}

#[test]
fn window_size_rules() {
    let mut m = fixture();
    assert_eq!(m.set_window_size(3 * MIB), Err(Errno::EINVAL));
    assert_eq!(m.set_window_size(MIB), Err(Errno::EINVAL));
    assert_eq!(m.set_window_size(8 * GIB), Err(Errno::EINVAL));
    // The window holds only the program's image, which the new window still contains.
    m.set_window_size(4 * MIB).unwrap();
    assert_eq!(m.code_window_range(), Some((4 * MIB, 8 * MIB)));
    assert_eq!(m.code_window().used, 0x3_0000);
    let a = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap().addr;
    assert_eq!(a, 0x43_0000);
    m.set_window_size(4 * GIB).unwrap();
    assert_eq!(m.code_window_range(), Some((0, 4 * GIB)));
    // A code mapping at 3 MiB is not inside a 2 MiB window around the text: busy.
    m.mmap(3 * MIB, PAGE, RX, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.code_window_op(abi::WINDOW_SET_SIZE, 2 * MIB), Err(Errno::EBUSY));
    assert_eq!(m.code_window().size, 4 * GIB);
    assert_eq!(m.code_window_op(99, 0), Err(Errno::EINVAL));
    assert_eq!(m.code_window_op(abi::WINDOW_GET, 0).unwrap().unwrap().size, 4 * GIB);
    // Without an image the window goes into an aligned free gap, found in one search.
    let mut n = VmMap::new(Layout::linux(0x60_0000));
    n.set_window_size(GIB).unwrap();
    n.mmap(n.layout().mmap_base - GIB - 5 * PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    let info = n.init_code_window(Some((0x3fff_f000, 0x4000_1000))).unwrap();
    assert_eq!(info.base % GIB, 0);
    assert_eq!(
        info.base + info.size,
        (n.layout().mmap_base & !(GIB - 1)) - GIB,
        "skips the 1 GiB block in use"
    );
    assert_eq!(info.used, 0);
    n.check();
}

#[test]
fn the_window_is_not_a_mapping_and_costs_nothing() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    m.init_code_window(None).unwrap();
    assert_eq!(m.map_count(), 0);
    assert_eq!(m.mapped_bytes(), 0);
    let (b, e) = m.code_window_range().unwrap();
    assert!(m.tree().is_free(b, e));
    // Ordinary placement skips it: a data mapping bigger than the space above the window goes
    // below it, not into it.
    let above = m.layout().mmap_base - e;
    let d = m.mmap(0, above + PAGE, RW, PRIV, -1, 0).unwrap();
    assert_eq!(d.addr + d.len, b);
    m.check();
}

// ----- near placement

/// Independent oracle: walk the free gaps of the sorted list, take the best page-aligned address
/// in each (the one nearest `t - len/2`), keep the best overall with ties going up.
fn near_oracle(m: &VmMap, t: u64, len: u64, r: u64, code: bool) -> Option<u64> {
    let l = m.layout();
    let (t, len, r) = (i128::from(t), i128::from(len), i128::from(r));
    let p = i128::from(PAGE);
    let mut lo = (t - r).max(i128::from(l.mmap_min_addr));
    let mut hi = (t + r).min(i128::from(l.task_size));
    let w = m.code_window_range().map(|(b, e)| (i128::from(b), i128::from(e)));
    if code {
        let (b, e) = w?;
        lo = lo.max(b);
        hi = hi.min(e);
    }
    let mut free = Vec::new();
    let mut cursor = 0i128;
    for v in m.iter() {
        free.push((cursor, i128::from(v.start)));
        cursor = i128::from(v.end);
    }
    free.push((cursor, i128::from(l.task_size)));
    let mut pieces = Vec::new();
    for (g0, g1) in free {
        match (code, w) {
            (false, Some((b, e))) => {
                pieces.push((g0, g1.min(b)));
                pieces.push((g0.max(e), g1));
            }
            _ => pieces.push((g0, g1)),
        }
    }
    let dist = |a: i128| (t - a).max(a + len - t);
    let mut best: Option<i128> = None;
    for (g0, g1) in pieces {
        let first = (g0.max(lo) + p - 1).div_euclid(p) * p;
        let last = (g1.min(hi) - len).div_euclid(p) * p;
        if last < first {
            continue;
        }
        let c = t - len / 2;
        let fl = c.div_euclid(p) * p;
        for a in [first, last, fl, fl + p] {
            let a = a.clamp(first, last);
            let better = match best {
                None => true,
                Some(b) => dist(a) < dist(b) || (dist(a) == dist(b) && a > b),
            };
            if better {
                best = Some(a);
            }
        }
    }
    best.map(|b| b as u64)
}

/// Literal brute force over every page of a small space, to validate the oracle itself.
fn near_brute(m: &VmMap, t: u64, len: u64, r: u64, code: bool) -> Option<u64> {
    let l = m.layout();
    let w = m.code_window_range();
    let mut best: Option<(u128, u64)> = None;
    for a in (l.mmap_min_addr..l.task_size).step_by(PAGE as usize) {
        let e = a + len;
        let inside_r = a >= t.saturating_sub(r) && u128::from(e) <= u128::from(t) + u128::from(r);
        let win_ok = match (code, w) {
            (true, Some((b, we))) => b <= a && e <= we,
            (true, None) => false,
            (false, Some((b, we))) => e <= b || a >= we,
            (false, None) => true,
        };
        if e > l.task_size || !inside_r || !win_ok || !m.tree().is_free(a, e) {
            continue;
        }
        let d = u128::from(t.abs_diff(a).max(e.abs_diff(t)));
        if best.is_none_or(|(bd, _)| d <= bd) {
            best = Some((d, a));
        }
    }
    best.map(|(_, a)| a)
}

pub(super) fn small_layout() -> Layout {
    // 16 MiB address space: 4096 pages, window 2 MiB.
    Layout {
        mmap_min_addr: 16 * PAGE,
        task_size: 4096 * PAGE,
        mmap_base: 4000 * PAGE,
        start_brk: 100 * PAGE,
        max_map_count: 65530,
        ram_pages: u64::MAX,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn near_matches_brute_force_on_small_spaces(
        maps in proptest::collection::vec((16u64..4096, 1u64..40), 0..80),
        window in 0u64..8,
        t in prop_oneof![Just(0u64), Just(PAGE), 0u64..4096, Just(4095), Just(4096), Just(5000)],
        len in 1u64..64, r in prop_oneof![Just(0u64), 0u64..5000], rpart in 0u64..PAGE,
        code in any::<bool>(),
    ) {
        let mut m = VmMap::new(small_layout());
        m.set_window_size(2 * MIB).unwrap();
        let base = window * 2 * MIB;
        m.init_code_window(Some((base + PAGE, base + 2 * PAGE))).unwrap();
        for (s, l) in maps {
            let l = l.min(4096 - s);
            if l > 0 {
                let p = if s % 3 == 0 { Prot::READ } else { Prot::RW };
                m.map_kernel(s * PAGE, l * PAGE, p, VmaFlags::empty()).unwrap();
            }
        }
        m.check();
        let (t, len, r) = (t * PAGE, len * PAGE, r * PAGE + rpart);
        let want = near_brute(&m, t, len, r, code);
        prop_assert_eq!(near_oracle(&m, t, len, r, code), want);
        prop_assert_eq!(m.find_near(t, len, r, code).ok(), want);
        let prot = if code { RX } else { RW };
        let got = m.map_near(t, len, r, prot, PRIV);
        prop_assert_eq!(got.as_ref().ok().map(|g| g.addr), want);
        prop_assert_eq!(got.err().map(|_| Errno::ENOMEM), want.is_none().then_some(Errno::ENOMEM));
        m.check();
    }
}

/// A random layout of `n` mappings spread around `center` (sizes and gaps from 1 to 64 pages, a
/// few large gaps), through the allocator's own API.
fn random_layout(n: usize, center: u64, seed: u64) -> VmMap {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let mut x = seed | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // About 190 pages per mapping on average; 256 leaves room.
    let span = n as u64 * 256 * PAGE;
    let mut a = center.saturating_sub(span / 2).max(0x1_0000).min(m.layout().task_size - span);
    for _ in 0..n {
        let gap = match rnd() % 16 {
            0 => (rnd() % 4096 + 1) * PAGE,
            _ => (rnd() % 64 + 1) * PAGE,
        };
        let len = (rnd() % 64 + 1) * PAGE;
        a += gap;
        if a + len > m.layout().task_size {
            break;
        }
        m.map_kernel(a, len, Prot::READ, VmaFlags::empty()).unwrap();
        a += len;
    }
    m
}

#[test]
fn near_matches_the_oracle_on_layouts_of_10000_mappings() {
    let top = 1u64 << 48;
    let centers = [0x1_0000, 0x5555_5555_0000, top - 0x100_0000, 0x7fff_0000_0000];
    for (i, &center) in centers.iter().enumerate() {
        let mut m = random_layout(10_000, center, 0x9e37_79b9_7f4a_7c15 + i as u64);
        m.init_code_window(Some((center + 0x10_0000, center + 0x10_1000))).ok();
        m.check();
        assert!(m.map_count() >= 9_000);
        let first = m.iter().next().unwrap().start;
        let last = m.iter().last().unwrap().end;
        let mut x = 12345u64 + i as u64;
        for q in 0..300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = match q % 5 {
                0 => PAGE,
                1 => top - PAGE,
                _ => (first + (x >> 11) % (last - first + 1)) & !(PAGE - 1),
            };
            let len = ((x >> 3) % 96 + 1) * PAGE;
            let r = match (x >> 20) % 6 {
                0 => 0,
                1 => 64 << 10,
                2 => 2 << 30,
                3 => u64::MAX,
                _ => (x >> 24) % (64 * MIB),
            };
            let code = q % 7 == 0;
            let want = near_oracle(&m, t, len, r, code);
            assert_eq!(m.find_near(t, len, r, code).ok(), want, "t={t:#x} len={len:#x} r={r:#x} code={code}");
        }
    }
}

#[test]
fn near_edges() {
    let mut m = fixture();
    let top = 1u64 << 48;
    // Radius 0: nothing lies wholly within 0 bytes of the target.
    assert_eq!(m.map_near(A + 4 * PAGE, PAGE, 0, RW, PRIV).unwrap_err(), Errno::ENOMEM);
    // The hole between A and B is 4 pages: a 2-page request centred on it straddles the target.
    let t = A + 6 * PAGE;
    let r = m.map_near(t, 2 * PAGE, 4 * PAGE, RW, PRIV).unwrap();
    assert_eq!(r.addr, A + 5 * PAGE, "centred: farthest byte 1 page away");
    assert!(r.replaced.is_empty());
    // Ties go above: hole now [A+4, A+5) and [A+7, A+8); target in the middle of B's gap.
    let r = m.map_near(A + 6 * PAGE, PAGE, 4 * PAGE, RW, PRIV).unwrap();
    assert_eq!(r.addr, A + 7 * PAGE, "tie between A+4 (d=2) and A+7 (d=2): above");
    // Targets at the edges of the address space do not overflow.
    let hi = m.map_near(top - PAGE, PAGE, u64::MAX, RW, PRIV).unwrap();
    assert_eq!(hi.addr, top - PAGE, "tie between top-2 and top-1 pages: above, still below TASK_SIZE");
    let lo = m.map_near(PAGE, PAGE, u64::MAX, PROT_READ, PRIV).unwrap();
    assert_eq!(lo.addr, 512 * MIB, "the lowest page above the code window (data skips it)");
    // Bad arguments.
    assert_eq!(m.map_near(A + 1, PAGE, MIB, RW, PRIV).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.map_near(A, 0, MIB, RW, PRIV).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.map_near(A, u64::MAX, MIB, RW, PRIV).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.map_near(A, PAGE, MIB, 0x40, PRIV).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.map_near(A, PAGE, MIB, RW, PRIV | MAP_FIXED).unwrap_err(), Errno::EINVAL);
    assert_eq!(m.map_near(A, PAGE, MIB, RW, MAP_PRIVATE).unwrap_err(), Errno::EINVAL);
    m.check();
}

#[test]
fn near_code_is_limited_to_the_window() {
    let mut m = fixture();
    let (_, we) = m.code_window_range().unwrap();
    // Target just outside the window: the in-window nearest result.
    let r = m.map_near(we + 16 * PAGE, PAGE, 64 * MIB, RX, PRIV).unwrap();
    assert_eq!(r.addr, we - PAGE);
    let r = m.map_near(we + 16 * PAGE, PAGE, 64 * MIB, RW, PRIV | MAP_CODE).unwrap();
    assert_eq!(r.addr, we - 2 * PAGE);
    assert_eq!(m.find(r.addr).unwrap().flags, VmaFlags::CODE);
    // Radius too small to reach into the window: not near.
    assert_eq!(m.map_near(we + 16 * PAGE, PAGE, 16 * PAGE, RX, PRIV).unwrap_err(), Errno::ENOMEM);
    // Data near a target inside the window goes outside it.
    let d = m.map_near(we - 4 * PAGE, PAGE, 64 * MIB, RW, PRIV).unwrap();
    assert_eq!(d.addr, we);
    assert_eq!(m.code_window().placed_outside, 0);
    m.check();
}

// ----- random operation sequences against a page model

#[derive(Clone, Debug)]
pub(super) enum Op {
    Mmap {
        addr: u64,
        len: u64,
        prot: u64,
        fixed: u8,
        code: bool,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mprotect {
        addr: u64,
        len: u64,
        prot: u64,
    },
    Madvise {
        addr: u64,
        len: u64,
        advice: u64,
    },
    Near {
        target: u64,
        len: u64,
        radius: u64,
        prot: u64,
    },
    Brk {
        addr: u64,
    },
    /// `prctl(PR_SET_VMA_ANON_NAME)` with [`NAMES`]`[name]`.
    Name {
        addr: u64,
        len: u64,
        name: usize,
    },
}

/// The names [`Op::Name`] gives (`None`: the name taken away).
pub(super) const NAMES: [Option<&[u8]>; 3] = [None, Some(b"jit"), Some(b"heap arena")];

pub(super) fn op() -> impl Strategy<Value = Op> {
    let page = 0u64..4100;
    let len = 0u64..40;
    let prot = prop_oneof![Just(0u64), Just(1), Just(3), Just(5), Just(7)];
    prop_oneof![
        4 => (page.clone(), len.clone(), prot.clone(), 0u8..3, any::<bool>())
            .prop_map(|(a, l, p, f, c)| Op::Mmap { addr: a * PAGE, len: l * PAGE, prot: p, fixed: f, code: c }),
        2 => (page.clone(), len.clone()).prop_map(|(a, l)| Op::Munmap { addr: a * PAGE, len: l * PAGE }),
        2 => (page.clone(), len.clone(), prot.clone())
            .prop_map(|(a, l, p)| Op::Mprotect { addr: a * PAGE, len: l * PAGE, prot: p }),
        1 => (page.clone(), len.clone(), prop_oneof![Just(MADV_RANDOM), Just(MADV_NORMAL), Just(MADV_DONTNEED)])
            .prop_map(|(a, l, v)| Op::Madvise { addr: a * PAGE, len: l * PAGE, advice: v }),
        1 => (page.clone(), 1u64..10, 0u64..64, prot)
            .prop_map(|(a, l, r, p)| Op::Near { target: a * PAGE, len: l * PAGE, radius: r * PAGE, prot: p }),
        1 => (90u64..140).prop_map(|a| Op::Brk { addr: a * PAGE + 17 }),
        1 => (page.clone(), len.clone(), 0..NAMES.len())
            .prop_map(|(a, l, n)| Op::Name { addr: a * PAGE, len: l * PAGE, name: n }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn random_operations_agree_with_a_page_model(ops in proptest::collection::vec(op(), 1..60), wx in any::<bool>()) {
        let layout = small_layout();
        let mut m = VmMap::new(layout);
        m.set_window_size(2 * MIB).unwrap();
        m.init_code_window(None).unwrap();
        let (wb, we) = m.code_window_range().unwrap();
        m.set_allow_wx(wx);
        let mut model = std::collections::BTreeMap::<u64, Prot>::new();
        let free = |model: &std::collections::BTreeMap<u64, Prot>, a: u64, l: u64| {
            model.range(a..a + l).next().is_none()
        };
        for op in ops {
            let before_outside = m.code_window().placed_outside;
            match op {
                Op::Mmap { addr, len, prot, fixed, code } => {
                    let f = PRIV | [0, MAP_FIXED, MAP_FIXED_NOREPLACE][fixed as usize] | if code { MAP_CODE } else { 0 };
                    let r = m.mmap(addr, len, prot, f, -1, 0);
                    let p = Prot::from_bits_truncate(prot);
                    match r {
                        Ok(r) => {
                            prop_assert!(len > 0 && (wx || !(p.write() && p.exec())));
                            if fixed != 0 { prop_assert_eq!(r.addr, addr); }
                            if fixed != 1 { prop_assert!(free(&model, r.addr, r.len)); }
                            let replaced: u64 = r.replaced.iter().map(|v| v.len()).sum();
                            let had = model.range(r.addr..r.addr + r.len).count() as u64 * PAGE;
                            prop_assert_eq!(replaced, had);
                            let is_code = p.exec() || code;
                            let inside = wb <= r.addr && r.addr + r.len <= we;
                            prop_assert_eq!(r.outside_window, is_code && !inside);
                            // Data goes into the window only when its hint lies there.
                            let hinted_in = addr != 0 && wb <= addr && addr < we;
                            if !is_code && fixed == 0 && !hinted_in { prop_assert!(r.addr + r.len <= wb || r.addr >= we); }
                            if is_code && !inside && fixed == 0 {
                                prop_assert_eq!(r.addr >> 30, (r.addr + r.len - 1) >> 30);
                            }
                            prop_assert_eq!(m.code_window().placed_outside, before_outside + u64::from(r.outside_window));
                            for pg in (r.addr..r.addr + r.len).step_by(PAGE as usize) { model.insert(pg, p); }
                        }
                        Err(e) => {
                            let is_code = p.exec() || code;
                            let hinted_in = addr != 0 && wb <= addr && addr < we;
                            // Whether any free run of `len` pages exists where this mapping may go.
                            let room = (layout.mmap_min_addr..=layout.task_size.saturating_sub(len))
                                .step_by(PAGE as usize)
                                .any(|a| free(&model, a, len) && (is_code || hinted_in || a + len <= wb || a >= we));
                            let expect = if len == 0 { Errno::EINVAL }
                                else if fixed != 0 && addr < layout.mmap_min_addr { Errno::EPERM }
                                else if fixed != 0 && addr + len > layout.task_size { Errno::ENOMEM }
                                else if fixed == 2 && !free(&model, addr, len) { Errno::EEXIST }
                                else if fixed == 0 && !room { Errno::ENOMEM }
                                else if !wx && p.write() && p.exec() { Errno::EACCES }
                                else { Errno::ENOMEM };
                            prop_assert_eq!(e, expect);
                        }
                    }
                }
                Op::Munmap { addr, len } => {
                    let r = m.munmap(addr, len);
                    if len == 0 || addr + len > layout.task_size {
                        prop_assert_eq!(r.unwrap_err(), Errno::EINVAL);
                    } else {
                        let removed: u64 = r.unwrap().iter().map(|v| v.len()).sum();
                        let keys: Vec<u64> = model.range(addr..addr + len).map(|(&k, _)| k).collect();
                        prop_assert_eq!(removed, keys.len() as u64 * PAGE);
                        for k in keys { model.remove(&k); }
                    }
                }
                Op::Mprotect { addr, len, prot } => {
                    let r = m.mprotect(addr, len, prot);
                    let p = Prot::from_bits_truncate(prot);
                    if len == 0 {
                        prop_assert_eq!(r, Ok(Protected::default()));
                        continue;
                    }
                    let mut prefix = Vec::new();
                    for pg in (addr..addr + len).step_by(PAGE as usize) {
                        match model.get(&pg) { Some(_) => prefix.push(pg), None => break }
                    }
                    if prefix.is_empty() {
                        prop_assert_eq!(r.unwrap_err(), Errno::ENOMEM);
                    } else if !wx && p.write() && p.exec() {
                        prop_assert_eq!(r.unwrap_err(), Errno::EACCES);
                    } else {
                        let r = r.unwrap();
                        let changed: u64 = r.changes.iter().map(|c| c.end - c.start).sum();
                        let expect = prefix.iter().filter(|pg| model[pg] != p).count() as u64 * PAGE;
                        prop_assert_eq!(changed, expect);
                        prop_assert_eq!(r.error.is_some(), prefix.len() as u64 * PAGE != len);
                        let outside = p.exec() && prefix.iter().any(|&pg| !model[&pg].exec() && !(wb..we).contains(&pg));
                        prop_assert_eq!(m.code_window().placed_outside, before_outside + u64::from(outside));
                        for pg in prefix { model.insert(pg, p); }
                    }
                }
                Op::Madvise { addr, len, advice } => {
                    let r = m.madvise(addr, len, advice).unwrap();
                    if len > 0 {
                        let mapped = model.range(addr..addr + len).count() as u64;
                        let covered: u64 = r.ranges.iter().map(|(s, e)| e - s).sum();
                        prop_assert_eq!(covered, mapped * PAGE);
                        prop_assert_eq!(r.error.is_some(), mapped * PAGE != len);
                    }
                }
                Op::Near { target, len, radius, prot } => {
                    let p = Prot::from_bits_truncate(prot);
                    let code = p.exec();
                    let want = if !wx && p.write() && p.exec() { None } else {
                        near_oracle(&m, target, len, radius, code)
                    };
                    let r = m.map_near(target, len, radius, prot, PRIV);
                    prop_assert_eq!(r.as_ref().ok().map(|r| r.addr), want);
                    if let Ok(r) = r {
                        prop_assert!(free(&model, r.addr, r.len));
                        for pg in (r.addr..r.addr + r.len).step_by(PAGE as usize) { model.insert(pg, p); }
                    }
                }
                Op::Brk { addr } => {
                    let old = m.brk_value();
                    let r = m.brk(addr);
                    if let Some((s, e)) = r.mapped {
                        prop_assert!(free(&model, s, e - s));
                        for pg in (s..e).step_by(PAGE as usize) { model.insert(pg, Prot::RW); }
                    }
                    for v in &r.unmapped {
                        for pg in (v.start..v.end).step_by(PAGE as usize) { prop_assert!(model.remove(&pg).is_some()); }
                    }
                    prop_assert!(r.brk == addr || r.brk == old);
                }
                Op::Name { addr, len, name } => {
                    let r = m.set_anon_name(addr, len, NAMES[name]);
                    let mapped = model.range(addr..addr + len).count() as u64;
                    prop_assert_eq!(r.is_err(), mapped * PAGE != len, "{:?}", r);
                    for v in m.mappings_in(addr, addr + len) {
                        prop_assert_eq!(m.anon_name(&v), NAMES[name]);
                    }
                }
            }
            m.check();
            let pages: Vec<(u64, Prot)> = m.iter()
                .flat_map(|v| (v.start..v.end).step_by(PAGE as usize).map(move |pg| (pg, v.prot)))
                .collect();
            let expect: Vec<(u64, Prot)> = model.iter().map(|(&k, &p)| (k, p)).collect();
            prop_assert_eq!(pages, expect);
        }
    }
}

#[test]
fn max_map_count_as_linux() {
    // Linux refuses a new mapping only once map_count > vm.max_map_count.
    let mut m = VmMap::new(Layout { max_map_count: 2, ..Layout::linux(0x60_0000) });
    for i in 0..3 {
        m.mmap(A + i * 2 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    }
    assert_eq!(m.map_count(), 3);
    assert_eq!(m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap_err(), Errno::ENOMEM);
    assert_eq!(m.map_near(A, PAGE, MIB, RW, PRIV).unwrap_err(), Errno::ENOMEM);
    m.munmap(A, PAGE).unwrap();
    assert!(m.mmap(0, PAGE, RW, PRIV, -1, 0).is_ok());
    m.check();
}

/// A call over three or more mappings keeps its pieces on the heap; one refused at its first
/// mapping must change nothing (an earlier list kept stale pieces in place after truncating
/// its heap to nothing, and applied the call to them).
#[test]
fn a_call_refused_at_its_first_of_three_mappings_changes_nothing() {
    let mut m = fixture();
    let base = A + 0x10_0000;
    m.mmap(base, PAGE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0).unwrap();
    m.mmap(base + PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(base + 2 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    let before: Vec<Vma> = m.iter().copied().collect();
    // MADV_FREE on shared memory is EINVAL, at the first mapping: no range gets the advice.
    let r = m.madvise(base, 3 * PAGE, MADV_FREE).unwrap();
    assert_eq!((r.ranges.as_slice(), r.error), (&[][..], Some(Errno::EINVAL)));
    assert_eq!(m.iter().copied().collect::<Vec<_>>(), before, "no advice stored");
    // An mprotect whose first piece would split past vm.max_map_count changes nothing either.
    let mut m = VmMap::new(Layout { max_map_count: 3, ..Layout::linux(0x60_0000) });
    m.mmap(base, 2 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(base + 2 * PAGE, PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(base + 3 * PAGE, PAGE, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.map_count(), 3);
    let r = m.mprotect(base + PAGE, 3 * PAGE, 0).unwrap();
    assert_eq!((r.changes.as_slice(), r.error), (&[][..], Some(Errno::ENOMEM)));
    assert_eq!(m.map_count(), 3);
    assert_eq!(m.find(base + PAGE).unwrap().prot, Prot::RW, "the refused piece keeps its rights");
    m.check();
}

/// The one-descent paths of `mmap`, `munmap` and `mprotect` (a new mapping joining a
/// neighbour in its leaf or beside it, an unmap cutting one end of a mapping, an in-place
/// change of rights) on a space of three and four levels, where neighbours fall in other leaves,
/// against a page model; every invariant after every call.
#[test]
fn one_descent_edits_on_a_space_of_many_levels_agree_with_a_page_model() {
    let mut m = VmMap::new(Layout::linux(0x60_0000));
    let n = 3000u64;
    let prots = [0, PROT_READ, RW];
    for i in 0..n {
        m.mmap(A + i * PAGE, PAGE, prots[1 + (i % 2) as usize], PRIV | MAP_FIXED, -1, 0).unwrap();
    }
    assert!(m.tree().height() >= 3, "{} levels", m.tree().height());
    let mut model = std::collections::BTreeMap::<u64, Prot>::new();
    for v in m.iter() {
        for pg in (v.start..v.end).step_by(PAGE as usize) {
            model.insert(pg, v.prot);
        }
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for step in 0..4000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let addr = A + ((x >> 20) % (n + 8)) * PAGE - 4 * PAGE;
        let len = ((x >> 12) % 3 + 1) * PAGE;
        let prot = prots[((x >> 8) % 3) as usize];
        let p = Prot::from_bits_truncate(prot);
        match (x >> 4) % 4 {
            0 => {
                let r = m.mmap(addr, len, prot, PRIV | MAP_FIXED, -1, 0).unwrap();
                let replaced: u64 = r.replaced.iter().map(|v| v.len()).sum();
                assert_eq!(replaced, model.range(addr..addr + len).count() as u64 * PAGE, "step {step}");
                for pg in (addr..addr + len).step_by(PAGE as usize) {
                    model.insert(pg, p);
                }
            }
            1 => {
                // A hint: taken when free (the placement skips the unmap), else placed elsewhere.
                let r = m.mmap(addr, len, prot, PRIV, -1, 0).unwrap();
                assert!(model.range(r.addr..r.addr + r.len).next().is_none(), "step {step}");
                assert_eq!(r.addr == addr, model.range(addr..addr + len).next().is_none(), "step {step}");
                for pg in (r.addr..r.addr + r.len).step_by(PAGE as usize) {
                    model.insert(pg, p);
                }
            }
            2 => {
                let removed: u64 = m.munmap(addr, len).unwrap().iter().map(|v| v.len()).sum();
                let keys: Vec<u64> = model.range(addr..addr + len).map(|(&k, _)| k).collect();
                assert_eq!(removed, keys.len() as u64 * PAGE, "step {step}");
                for k in keys {
                    model.remove(&k);
                }
            }
            _ => {
                let r = m.mprotect(addr, len, prot);
                let prefix: Vec<u64> = (addr..addr + len)
                    .step_by(PAGE as usize)
                    .take_while(|pg| model.contains_key(pg))
                    .collect();
                if prefix.is_empty() {
                    assert_eq!(r, Err(Errno::ENOMEM), "step {step}");
                } else {
                    let r = r.unwrap();
                    let changed: u64 = r.changes.iter().map(|c| c.end - c.start).sum();
                    let expect = prefix.iter().filter(|pg| model[pg] != p).count() as u64 * PAGE;
                    assert_eq!(changed, expect, "step {step}");
                    assert_eq!(r.error.is_some(), prefix.len() as u64 * PAGE != len, "step {step}");
                    for pg in prefix {
                        model.insert(pg, p);
                    }
                }
            }
        }
        m.check();
        if step % 97 == 0 {
            let pages: Vec<(u64, Prot)> = m
                .iter()
                .flat_map(|v| (v.start..v.end).step_by(PAGE as usize).map(move |pg| (pg, v.prot)))
                .collect();
            let expect: Vec<(u64, Prot)> = model.iter().map(|(&k, &p)| (k, p)).collect();
            assert_eq!(pages, expect, "step {step}");
        }
    }
}

#[test]
fn mdwe_refuses_write_exec_and_exec_gain_as_linux() {
    use linux_abi::prctl::{PR_MDWE_NO_INHERIT, PR_MDWE_REFUSE_EXEC_GAIN};
    let mut m = fixture();
    m.set_allow_wx(true);
    let w = m.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap().addr;
    let x = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap().addr;
    assert_eq!(m.set_mdwe(PR_MDWE_NO_INHERIT).unwrap_err(), Errno::EINVAL, "NO_INHERIT alone");
    assert_eq!(m.set_mdwe(1 << 2).unwrap_err(), Errno::EINVAL, "an unknown bit");
    m.set_mdwe(PR_MDWE_REFUSE_EXEC_GAIN).unwrap();
    assert_eq!(m.mdwe(), PR_MDWE_REFUSE_EXEC_GAIN);
    assert_eq!(m.set_mdwe(0).unwrap_err(), Errno::EPERM, "it cannot be cleared");
    // W+X is refused although the process opted out of W^X.
    assert_eq!(m.mmap(0, PAGE, RW | PROT_EXEC, PRIV, -1, 0).unwrap_err(), Errno::EACCES);
    assert_eq!(m.mprotect(x, PAGE, RW | PROT_EXEC).unwrap_err(), Errno::EACCES);
    // A new executable mapping is fine (it gains nothing); an existing one stays executable.
    m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(m.mprotect(x, PAGE, RX).unwrap().error, None);
    assert_eq!(m.mprotect(x, PAGE, PROT_READ).unwrap().error, None);
    // Gaining PROT_EXEC is refused: the mapping made read-only just now cannot go back.
    assert_eq!(m.mprotect(x, PAGE, RX).unwrap().error, Some(Errno::EACCES));
    assert_eq!(m.find(x).unwrap().prot, Prot::READ);
    assert_eq!(m.mprotect(w, PAGE, RX).unwrap().error, Some(Errno::EACCES));
    assert_eq!(m.find(w).unwrap().prot, Prot::RW, "nothing changed");
    // Area by area: the areas before the refused one change (Linux's mprotect loop).
    let two = m.mmap(0, 2 * PAGE, RX, PRIV, -1, 0).unwrap().addr;
    m.mprotect(two + PAGE, PAGE, RW).unwrap();
    let p = m.mprotect(two, 2 * PAGE, RX).unwrap();
    assert_eq!(p.error, Some(Errno::EACCES), "the second area gains PROT_EXEC");
    assert_eq!(m.find(two).unwrap().prot, Prot::READ.union(Prot::EXEC));
    assert_eq!(m.find(two + PAGE).unwrap().prot, Prot::RW);
    // Inherited by a forked child, unless PR_MDWE_NO_INHERIT.
    assert_eq!(m.fork_copy().unwrap().mdwe(), PR_MDWE_REFUSE_EXEC_GAIN);
    m.set_mdwe(PR_MDWE_REFUSE_EXEC_GAIN | PR_MDWE_NO_INHERIT).unwrap();
    assert_eq!(m.fork_copy().unwrap().mdwe(), 0);
    assert_eq!(
        m.set_mdwe(PR_MDWE_REFUSE_EXEC_GAIN).unwrap_err(),
        Errno::EPERM,
        "NO_INHERIT cannot be dropped"
    );
    m.check();
}

#[test]
fn a_forked_map_keeps_no_more_spare_nodes_than_the_tree_allows() {
    // A map with a few dozen areas (a JIT's code range flipped page by page): fork built the
    // child's tree after reserving the worst case for inserting every area at once, k * height
    // + k(k+1)/2 nodes, and kept what the in-order insertions did not use (the child's `check`
    // then failed at its first mmap: "spare nodes held").
    let mut m = fixture();
    let range = m.mmap(0x41_0000, 128 * MIB, 0, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    for i in 0..24 {
        m.mprotect(range.addr + 2 * i * PAGE, PAGE, PROT_READ).unwrap();
    }
    m.check();
    let mut child = m.fork_copy().unwrap();
    child.check();
    assert!(child.tree().spares() <= child.tree().spare_cap(), "{} spares", child.tree().spares());
    child.mmap(0, PAGE, RW, PRIV, -1, 0).unwrap();
    child.check();
}
