//! Tests of the code window's rule for libraries and JITs (docs/address-space.md, "Libraries and
//! JITs"): a loader's reservation goes into the window, a hint inside the window is served there,
//! the interpreter is placed beside the program. The same rule on whole programs is
//! `trace_replay`.

use super::flags::*;
use super::prot::*;
use super::tests::{A, PRIV, fixture};
use super::*;

const PROT_NONE: u64 = 0;
const RX: u64 = PROT_READ | PROT_EXEC;
const RW: u64 = PROT_READ | PROT_WRITE;
const MIB: u64 = 1 << 20;
/// The alignment glibc reserves for on arm64 (Debian's libraries' `p_align`).
const ALIGN: u64 = 64 << 10;

fn in_window(m: &VmMap, a: u64, len: u64) -> bool {
    m.code_window_range().is_some_and(|(b, e)| b <= a && a + len <= e)
}

/// glibc's `_dl_map_segment` for a library of `span` bytes: the reservation, the text `MAP_FIXED`
/// at its first multiple of the alignment, the head and tail given back. The text's address and
/// whether it is outside the window, or the errno of the text's `mmap`.
fn glibc_load(m: &mut VmMap, span: u64) -> Result<(u64, bool), Errno> {
    let r = m.mmap(0, span + ALIGN, PROT_NONE, PRIV, -1, 0)?;
    let text = r.addr.next_multiple_of(ALIGN);
    let t = m.mmap(text, span, RX, PRIV | MAP_FIXED | MAP_DENYWRITE | MAP_OBJECT, -1, 0);
    let (Ok(t), end) = (t, (text + span).next_multiple_of(PAGE)) else {
        m.munmap(r.addr, r.len).unwrap();
        return Err(Errno::EACCES);
    };
    if text > r.addr {
        m.munmap(r.addr, text - r.addr).unwrap();
    }
    if end < r.addr + r.len {
        m.munmap(end, r.addr + r.len - end).unwrap();
    }
    Ok((t.addr, t.outside_window))
}

#[test]
fn a_loaders_reservation_goes_into_the_window_and_the_text_with_it() {
    let mut m = fixture();
    // libc.so.6 of Debian 12: a span of 1761376 bytes, reserved with 64 KiB more.
    let (text, outside) = glibc_load(&mut m, 1_761_376).unwrap();
    assert!(!outside && in_window(&m, text, 1_761_376));
    assert_eq!(text, 0x1_0000, "the window's lowest fit (mmap_min_addr), which glibc's alignment keeps");
    // The next library goes just above it, the window's next lowest fit.
    let (next, outside) = glibc_load(&mut m, 100_000 + 5).unwrap();
    assert!(!outside && in_window(&m, next, 100_005));
    assert_eq!(m.code_window().placed_outside, 0);
    m.code_window_op(abi::WINDOW_SET_STRICT, 1).unwrap();
    assert!(glibc_load(&mut m, 12_345).is_ok(), "strict mode admits it too");
    m.check();
}

#[test]
fn only_a_private_anonymous_prot_none_request_of_no_whole_number_of_pages_is_a_reservation() {
    let odd = 5 * PAGE + 8;
    let not_reservations = [
        (0, 8 * PAGE, PROT_NONE, PRIV, "whole pages (Go's runtime)"),
        (0, odd, PROT_NONE, PRIV | MAP_NORESERVE, "MAP_NORESERVE (malloc's arenas, V8)"),
        (0, odd, PROT_NONE, PRIV | MAP_STACK, "MAP_STACK (thread stacks)"),
        (0, odd, PROT_NONE, PRIV | MAP_GROWSDOWN, "MAP_GROWSDOWN"),
        (0, odd, PROT_NONE, MAP_SHARED | MAP_ANONYMOUS, "shared"),
        (0, odd, PROT_READ, PRIV, "readable"),
        (0, odd, PROT_NONE, PRIV | MAP_OBJECT, "a file's pages"),
        (A, odd, PROT_NONE, PRIV, "a hint outside the window"),
    ];
    for (hint, len, prot, flags, what) in not_reservations {
        let mut m = fixture();
        let r = m.mmap(hint, len, prot, flags, -1, 0).unwrap();
        assert!(!in_window(&m, r.addr, r.len), "{what}: placed as data, at {:#x}", r.addr);
        m.check();
    }
    let mut m = fixture();
    let r = m.mmap(0, odd, PROT_NONE, PRIV, -1, 0).unwrap();
    assert_eq!((r.addr, r.len), (0x1_0000, 6 * PAGE), "the window's lowest fit, whole pages");
    assert!(!r.outside_window, "not code: nothing to count");
    assert_eq!(m.code_window().used, 0x3_0000 + 6 * PAGE);
    m.check();
}

/// Cranelift's image of compiled code (wasmtime): mapped read-write with `MAP_NORESERVE` and no
/// hint, its text made read-execute by `mprotect`: placed in the window, so that text is code
/// in the window, admitted in strict mode and never counted outside.
#[test]
fn a_read_write_noreserve_buffer_without_a_hint_goes_into_the_window_and_its_text_with_it() {
    let mut m = fixture();
    m.code_window_op(abi::WINDOW_SET_STRICT, 1).unwrap();
    let image = m.mmap(0, 200_704, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(in_window(&m, image.addr, image.len), "{:#x}", image.addr);
    assert_eq!(image.addr, 0x1_0000, "the window's lowest fit");
    // Its text: 64 KiB, 64 KiB in (Cranelift's, in wasmtime.trace), whole pages in every granule.
    assert!(m.mprotect(image.addr, image.len, PROT_READ).unwrap().error.is_none());
    assert!(
        m.mprotect(image.addr + (64 << 10), 64 << 10, RX).unwrap().error.is_none(),
        "strict mode admits it"
    );
    assert_eq!(m.code_window().placed_outside, 0);
    m.check();
}

#[test]
fn only_a_private_anonymous_read_write_noreserve_request_without_a_hint_is_a_jit_buffer() {
    let len = 50 * PAGE;
    let quarter = 512 * MIB / 4;
    let not_buffers = [
        (0, len, RW, PRIV, "without MAP_NORESERVE (malloc, everything else)"),
        (0, len, PROT_READ, PRIV | MAP_NORESERVE, "read-only"),
        (0, len, PROT_NONE, PRIV | MAP_NORESERVE, "PROT_NONE (malloc's arenas)"),
        (0, len, RW, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, "shared"),
        (0, len, RW, PRIV | MAP_NORESERVE | MAP_STACK, "MAP_STACK"),
        (0, len, RW, PRIV | MAP_NORESERVE | MAP_OBJECT, "a file's pages"),
        (A, len, RW, PRIV | MAP_NORESERVE, "a hint outside the window"),
        (0, quarter + PAGE, RW, PRIV | MAP_NORESERVE, "more than a quarter of the window"),
    ];
    for (hint, len, prot, flags, what) in not_buffers {
        let mut m = fixture();
        let r = m.mmap(hint, len, prot, flags, -1, 0).unwrap();
        assert!(!in_window(&m, r.addr, r.len), "{what}: placed as data, at {:#x}", r.addr);
        m.check();
    }
    let mut m = fixture();
    let r = m.mmap(0, quarter, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(in_window(&m, r.addr, r.len), "a quarter of the window is a buffer");
    // A window with no room left: the buffer is data, and its text counted outside.
    let r = m.mmap(0, quarter, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    let r2 = m.mmap(0, quarter, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    let r3 = m.mmap(0, quarter, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(in_window(&m, r.addr, r.len) && in_window(&m, r2.addr, r2.len));
    assert!(!in_window(&m, r3.addr, r3.len), "the window is full: data, at {:#x}", r3.addr);
    assert!(m.mprotect(r3.addr, PAGE, RX).unwrap().error.is_none());
    assert_eq!(m.code_window().placed_outside, 1);
    m.check();
}

#[test]
fn a_reservation_the_window_cannot_hold_is_data_and_its_text_is_counted_or_refused() {
    let mut m = fixture();
    // A 2 MiB window around the program's text, [4 MiB, 6 MiB), 192 KiB of it the program's.
    m.set_window_size(2 * MIB).unwrap();
    assert_eq!(m.code_window_range(), Some((4 * MIB, 6 * MIB)));
    let (text, outside) = glibc_load(&mut m, 3 * MIB + 1).unwrap();
    assert!(outside && !in_window(&m, text, 3 * MIB), "the reservation went out as data, its text with it");
    assert_eq!(m.code_window().placed_outside, 1, "counted");
    m.code_window_op(abi::WINDOW_SET_STRICT, 1).unwrap();
    assert_eq!(glibc_load(&mut m, 3 * MIB + 1).unwrap_err(), Errno::EACCES, "refused in strict mode");
    assert_eq!(m.code_window().placed_outside, 1);
    // Made executable by mprotect instead: the same.
    let r = m.mmap(0, 3 * MIB + 1, PROT_NONE, PRIV, -1, 0).unwrap();
    assert_eq!(m.mprotect(r.addr, PAGE, RX).unwrap_err(), Errno::EACCES);
    m.code_window_op(abi::WINDOW_SET_STRICT, 0).unwrap();
    assert!(m.mprotect(r.addr, PAGE, RX).unwrap().error.is_none());
    assert_eq!(m.code_window().placed_outside, 2);
    m.check();
}

/// A free `PROT_NONE` hint inside the window is an address-space reservation (Chez Scheme's
/// `fill-below!` takes all the space below 4 GiB with such hints), not a JIT's area: it goes where
/// data without a hint goes, outside the window, which stays free for code.
#[test]
fn a_free_prot_none_hint_inside_the_window_reserves_outside_it() {
    let mut m = fixture();
    let r = m.mmap(0x800_0000, 16 * MIB, PROT_NONE, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(!in_window(&m, r.addr, 16 * MIB), "{:#x}", r.addr);
    // Code that comes later still lands in the window.
    let c = m.mmap(0, PAGE, RX, PRIV, -1, 0).unwrap();
    assert!(in_window(&m, c.addr, PAGE));
    // The same reservation read-write (LuaJIT's machine-code area) is served at its hint.
    let d = m.mmap(0x800_0000, 16 * PAGE, RW, PRIV, -1, 0).unwrap();
    assert_eq!(d.addr, 0x800_0000);
    m.check();
}

#[test]
fn a_hint_inside_the_window_is_served_there_at_the_hint_or_nearest() {
    let mut m = fixture();
    // Free hint: exactly there, data or code (LuaJIT's machine-code area: read-write first).
    let d = m.mmap(0x800_0000, 16 * PAGE, RW, PRIV, -1, 0).unwrap();
    assert_eq!(d.addr, 0x800_0000);
    // Occupied hint (V8 hints at its own text): the nearest free range of the window, which
    // here is just above the program's data (the text is at 0x400000, the data ends at 0x430000).
    let v8 = m.mmap(0x41_0000, 8 * MIB, PROT_NONE, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert_eq!(v8.addr, 0x43_0000);
    let c = m.mmap(0x40_8000, 4 * PAGE, RX, PRIV, -1, 0).unwrap();
    assert_eq!(c.addr, 0x40_0000 - 4 * PAGE, "code too: nearest (below the text), not lowest (0x10000)");
    // A hint whose range would run past the window's end: the nearest range inside.
    let (_, we) = m.code_window_range().unwrap();
    let e = m.mmap(we - PAGE, 4 * PAGE, RW, PRIV, -1, 0).unwrap();
    assert_eq!(e.addr, we - 4 * PAGE);
    // A window with no room for it: placed as data would be, outside.
    let big = m.mmap(0x1000_0000, 600 * MIB, RW, PRIV, -1, 0).unwrap();
    assert!(!in_window(&m, big.addr, big.len));
    assert_eq!(m.code_window().placed_outside, 0);
    m.check();
}

#[test]
fn the_interpreter_goes_into_the_window_beside_the_program_aligned() {
    let mut m = fixture();
    // Debian 12's ld-linux-aarch64.so.1: 0x41378 bytes, p_align 64 KiB.
    let len = 0x4_1378u64.next_multiple_of(PAGE);
    let at = m.place_image(len, ALIGN).unwrap();
    assert_eq!(at, 0x1_0000, "the lowest aligned fit");
    m.map_kernel(at, len, Prot::RX, VmaFlags::IMAGE).unwrap();
    assert_eq!(m.place_image(PAGE, 2 * MIB).unwrap(), 2 * MIB, "the lowest 2 MiB-aligned fit");
    for (len, align) in [(0, PAGE), (PAGE + 1, PAGE), (PAGE, PAGE / 2), (PAGE, 3 * PAGE)] {
        assert_eq!(m.place_image(len, align).unwrap_err(), Errno::EINVAL, "len {len:#x} align {align:#x}");
    }
    m.check();
    // No room in the window: outside, counted; strict: ENOMEM.
    let mut m = fixture();
    m.set_window_size(2 * MIB).unwrap();
    let out = m.place_image(4 * MIB, ALIGN).unwrap();
    assert!(!in_window(&m, out, 4 * MIB) && out.is_multiple_of(ALIGN));
    assert_eq!(m.code_window().placed_outside, 1);
    m.set_window_strict(true);
    assert_eq!(m.place_image(4 * MIB, ALIGN).unwrap_err(), Errno::ENOMEM);
    m.check();
}

/// A program linked low (its window starts at 0) in a kernel whose `mmap_min_addr` is one page
/// (Debian's arm64 Linux says 4096): the window's own placements still start at 64 KiB, so a
/// NULL pointer plus an offset below that faults; `MAP_FIXED` may go lower, as on Linux.
#[test]
fn the_windows_own_placements_start_at_64_kib_whatever_mmap_min_addr_allows() {
    let mut m = VmMap::new(Layout { mmap_min_addr: PAGE, ..Layout::linux(0x60_0000) });
    m.map_kernel(0x40_0000, 0x2_0000, Prot::RX, VmaFlags::IMAGE).unwrap();
    m.init_code_window(Some((0x40_0000, 0x42_0000))).unwrap();
    assert_eq!(m.code_window_range().map(|w| w.0), Some(0));
    let code = m.mmap(0, PAGE, RX, MAP_SHARED | MAP_ANONYMOUS, -1, 0).unwrap();
    assert_eq!(code.addr, 64 << 10, "code");
    let (text, _) = glibc_load(&mut m, 100_005).unwrap();
    assert_eq!(text, 128 << 10, "a loader's reservation, aligned");
    let buffer = m.mmap(0, 4 * PAGE, RW, PRIV | MAP_NORESERVE, -1, 0).unwrap();
    assert!(buffer.addr >= 64 << 10 && in_window(&m, buffer.addr, buffer.len));
    let image = m.place_image(4 * PAGE, PAGE).unwrap();
    assert!(image >= 64 << 10);
    let fixed = m.mmap(PAGE, PAGE, RX, PRIV | MAP_FIXED, -1, 0).unwrap();
    assert_eq!(fixed.addr, PAGE, "MAP_FIXED reaches mmap_min_addr");
    m.check();
}
