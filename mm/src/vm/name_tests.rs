//! Tests of named anonymous memory (`prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME)`, `map/names.rs`):
//! Linux 5.17's validation and errno values, the name kept per area across splits, merges only
//! between equal names, the table's entries freed and reused, fork and mremap keeping names, and
//! no name stored when the heap has no room. Random sequences of calls that name areas are in
//! `tests.rs`'s page model and `limit_tests.rs`.

use alloc::vec::Vec;

use super::fallible::fail_after;
use super::flags::*;
use super::map::ANON_NAME_MAX;
use super::prot::*;
use super::tests::{A, PRIV, fixture};
use super::*;

const RW: u64 = PROT_READ | PROT_WRITE;

/// The areas of `[s, e)` as (start, end, name) in pages from `s`.
fn areas(m: &VmMap, s: u64, e: u64) -> Vec<(u64, u64, Option<&[u8]>)> {
    m.mappings_in(s, e).map(|v| ((v.start - s) / PAGE, (v.end - s) / PAGE, m.anon_name(&v))).collect()
}

#[test]
fn names_stay_with_their_pages_and_areas_merge_only_when_names_match() {
    let mut m = fixture();
    let b = A + 16 * PAGE;
    m.mmap(b, 8 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.set_anon_name(b + 2 * PAGE, 4 * PAGE, Some(b"jit code")).unwrap();
    let jit: Option<&[u8]> = Some(b"jit code");
    assert_eq!(areas(&m, b, b + 8 * PAGE), [(0, 2, None), (2, 6, jit), (6, 8, None)]);
    // A split (mprotect, munmap) keeps the name on both sides.
    m.mprotect(b + 3 * PAGE, PAGE, PROT_READ).unwrap();
    m.munmap(b + 4 * PAGE, PAGE).unwrap();
    assert_eq!(
        areas(&m, b, b + 8 * PAGE),
        [(0, 2, None), (2, 3, jit), (3, 4, jit), (5, 6, jit), (6, 8, None)]
    );
    // The same name next to it merges; another name does not.
    m.mprotect(b + 3 * PAGE, PAGE, RW).unwrap();
    m.set_anon_name(b + 6 * PAGE, PAGE, Some(b"jit code")).unwrap();
    m.set_anon_name(b + 7 * PAGE, PAGE, Some(b"arena")).unwrap();
    let arena: Option<&[u8]> = Some(b"arena");
    assert_eq!(areas(&m, b, b + 8 * PAGE), [(0, 2, None), (2, 4, jit), (5, 7, jit), (7, 8, arena)]);
    // A mapping placed next to a named one (unnamed) does not join it.
    m.mmap(b + 4 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(
        areas(&m, b, b + 8 * PAGE),
        [(0, 2, None), (2, 4, jit), (4, 5, None), (5, 7, jit), (7, 8, arena)]
    );
    // Taking the names away (a NULL name) merges it all back into one area.
    m.set_anon_name(b, 8 * PAGE, None).unwrap();
    assert_eq!(areas(&m, b, b + 8 * PAGE), [(0, 8, None)]);
    m.check();
}

#[test]
fn a_names_entry_is_freed_with_its_last_byte_and_reused() {
    let mut m = fixture();
    let b = A + 16 * PAGE;
    m.mmap(b, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.set_anon_name(b, 2 * PAGE, Some(b"first")).unwrap();
    let first = m.find(b).unwrap().name;
    m.munmap(b, 2 * PAGE).unwrap();
    m.check(); // the entry's count is 0: free
    m.set_anon_name(b + 2 * PAGE, PAGE, Some(b"second")).unwrap();
    assert_eq!(m.find(b + 2 * PAGE).unwrap().name, first, "the free entry reused");
    assert_eq!(m.anon_name(m.find(b + 2 * PAGE).unwrap()), Some(&b"second"[..]));
    // MAP_FIXED over a named page: the new mapping has no name, the entry is freed.
    m.mmap(b + 2 * PAGE, PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.anon_name(m.find(b + 2 * PAGE).unwrap()), None);
    m.check();
}

/// One row: what it checks, the range, the name and the result Linux gives.
type Case<'a> = (&'a str, u64, u64, Option<&'a [u8]>, Result<(), Errno>);
#[test]
fn naming_checks_as_linux_5_17() {
    use linux_abi::errno::consts::*;
    let longest = [b'x'; ANON_NAME_MAX - 1];
    let too_long = [b'x'; ANON_NAME_MAX];
    #[rustfmt::skip]
    let table: &[Case] = &[
        ("79 bytes", A, PAGE, Some(&longest), Ok(())),
        ("80 bytes: no room for the NUL", A, PAGE, Some(&too_long), Err(EINVAL)),
        ("empty", A, PAGE, Some(b""), Ok(())),
        ("spaces and punctuation", A, PAGE, Some(b"a b:c/d(e)"), Ok(())),
        ("backslash", A, PAGE, Some(b"a\\b"), Err(EINVAL)),
        ("backquote", A, PAGE, Some(b"a`b"), Err(EINVAL)),
        ("dollar", A, PAGE, Some(b"$x"), Err(EINVAL)),
        ("opening bracket", A, PAGE, Some(b"[x"), Err(EINVAL)),
        ("closing bracket", A, PAGE, Some(b"x]"), Err(EINVAL)),
        ("a control character", A, PAGE, Some(b"a\tb"), Err(EINVAL)),
        ("DEL", A, PAGE, Some(b"a\x7f"), Err(EINVAL)),
        ("not ASCII", A, PAGE, Some("é".as_bytes()), Err(EINVAL)),
        ("the name is checked before the address", A + 1, PAGE, Some(b"$"), Err(EINVAL)),
        ("unaligned address", A + 1, PAGE, Some(b"x"), Err(EINVAL)),
        ("length rounding to 0", A, u64::MAX, Some(b"x"), Err(EINVAL)),
        ("range wrapping", A, u64::MAX - 2 * PAGE, Some(b"x"), Err(EINVAL)),
        ("length 0", A, 0, Some(b"x"), Ok(())),
        ("nothing mapped", 0x1000_0000_0000, PAGE, Some(b"x"), Err(ENOMEM)),
        ("a hole", A, 12 * PAGE, Some(b"x"), Err(ENOMEM)),
        ("NULL: no name", A, 4 * PAGE, None, Ok(())),
        ("the program's image (a file on Linux)", 0x40_0000, PAGE, Some(b"x"), Err(EBADF)),
    ];
    for &(what, addr, len, name, want) in table {
        let mut m = fixture();
        assert_eq!(m.set_anon_name(addr, len, name), want, "{what}");
        m.check();
    }
    // Past a hole the name still goes on; at shared memory or a memory object's pages the walk
    // stops (EBADF) after what precedes.
    let mut m = fixture();
    m.set_anon_name(A, 12 * PAGE, Some(b"x")).unwrap_err();
    assert_eq!(m.anon_name(m.find(A + 8 * PAGE).unwrap()), Some(&b"x"[..]), "past the hole");
    for kind in [MAP_SHARED | MAP_ANONYMOUS, PRIV | MAP_OBJECT] {
        let mut m = fixture();
        m.mmap(A + 4 * PAGE, 4 * PAGE, RW, kind | MAP_FIXED, -1, 0).unwrap();
        assert_eq!(m.set_anon_name(A, 12 * PAGE, Some(b"x")), Err(EBADF), "{kind:#x}");
        assert_eq!(
            areas(&m, A, A + 12 * PAGE).iter().map(|a| a.2).collect::<Vec<_>>(),
            [Some(&b"x"[..]), None, None]
        );
        m.check();
    }
    // A split at vm.max_map_count: EAGAIN (Linux's madvise_update_vma).
    let mut m = VmMap::new(Layout { max_map_count: 3, ..Layout::linux(0x60_0000) });
    m.mmap(A, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(A + 8 * PAGE, 4 * PAGE, PROT_READ, PRIV | MAP_FIXED, -1, 0).unwrap();
    m.mmap(A + 16 * PAGE, 4 * PAGE, RW, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(m.set_anon_name(A + PAGE, PAGE, Some(b"x")), Err(EAGAIN));
    assert_eq!(m.map_count(), 3);
}

#[test]
fn fork_and_mremap_keep_the_name() {
    let mut m = fixture();
    m.set_anon_name(A, 2 * PAGE, Some(b"kept")).unwrap();
    let child = m.fork_copy().unwrap();
    assert_eq!(child.anon_name(child.find(A).unwrap()), Some(&b"kept"[..]));
    let to = A + 64 * PAGE;
    m.mremap(A, 2 * PAGE, 3 * PAGE, super::map::remap::MREMAP_MAYMOVE | super::map::remap::MREMAP_FIXED, to)
        .unwrap();
    assert_eq!(m.anon_name(m.find(to + 2 * PAGE).unwrap()), Some(&b"kept"[..]), "moved and grown");
    m.check();
}

#[test]
fn a_name_that_finds_no_room_is_enomem_and_changes_nothing() {
    let mut m = fixture();
    fail_after(Some(0));
    let r = m.set_anon_name(A, 2 * PAGE, Some(b"no room"));
    fail_after(None);
    assert_eq!(r, Err(Errno::ENOMEM));
    assert_eq!(areas(&m, A, A + 4 * PAGE), [(0, 4, None)]);
    m.check();
}
