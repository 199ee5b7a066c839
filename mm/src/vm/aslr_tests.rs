//! The layout draws (`aslr`): each base's entropy is at least Linux arm64's, proved by counting
//! distinct results over the whole draw range, and the code window's invariants hold for every
//! PIE draw (exhaustively for the default bits; sampled with a seeded generator for the largest).
use super::aslr::*;
use super::map::{STACK_GUARD_GAP, WINDOW_DEFAULT};
use super::prot::{PROT_EXEC, PROT_READ, PROT_WRITE};
use super::{Layout, PAGE, Prot, VmMap, VmaFlags};
use crate::addr::{PAGE_SHIFT, USER_VA_BITS};
use linux_abi::mman::{MAP_ANONYMOUS, MAP_PRIVATE};
use std::vec::Vec;

const TASK: u64 = 1 << USER_VA_BITS;
const STACK_LIMIT: u64 = 8 << 20;

/// xorshift64*, seeded: the sampled tests are reproducible.
struct TestRng(u64);
impl TestRng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn linux_arm64_bit_counts_per_granule() {
    // Linux's Kconfig: MIN = DEFAULT = 18/16/14 and MAX = 33/31/29 for 4/16/64 KiB pages;
    // STACK_RND_MASK = 0x3ffff >> (PAGE_SHIFT - 12).
    let (min, max) = match PAGE_SHIFT {
        12 => (18, 33),
        14 => (16, 31),
        16 => (14, 29),
        _ => unreachable!(),
    };
    assert_eq!((MMAP_RND_BITS_MIN, MMAP_RND_BITS_DEFAULT, MMAP_RND_BITS_MAX), (min, min, max));
    assert_eq!((1u64 << STACK_RND_PAGE_BITS) - 1, 0x3ffff >> (PAGE_SHIFT - 12));
}

#[test]
fn mmap_base_as_linux_with_and_without_randomisation() {
    // Without: the 128 MiB minimum gap, what `Layout::linux` uses.
    assert_eq!(mmap_base(TASK, STACK_LIMIT, STACK_GUARD_GAP, false, 0), Layout::linux(0).mmap_base);
    // With: the stack's randomisation range is kept free, then `rnd` lower, page-aligned.
    let stack_range = ((1u64 << STACK_RND_PAGE_BITS) - 1) * PAGE;
    let top = mmap_base(TASK - PAGE, STACK_LIMIT, STACK_GUARD_GAP, true, 0);
    assert_eq!(top, TASK - PAGE - (STACK_LIMIT + STACK_GUARD_GAP + stack_range));
    let bits = MMAP_RND_BITS_DEFAULT;
    let all = 1u64 << bits;
    for d in [0, 1, all - 1, all, u64::MAX] {
        let b = mmap_base(TASK - PAGE, STACK_LIMIT, STACK_GUARD_GAP, true, mmap_rnd(d, bits));
        assert_eq!(b % PAGE, 0);
        assert_eq!(top - b, (d & (all - 1)) * PAGE);
        // The lowest stack top stays above the mmap base plus the stack limit and guard gap.
        assert!(b + STACK_LIMIT + STACK_GUARD_GAP <= stack_top(TASK - PAGE, u64::MAX));
    }
}

#[test]
fn stack_top_brk_and_mmap_draws_are_distinct_over_their_whole_range() {
    // 2^STACK_RND_PAGE_BITS stack tops, 1 GiB / PAGE heap starts, 2^bits mmap offsets: each
    // draw a different page, so the entropy is exactly the bits (Linux's).
    let n = 1u64 << STACK_RND_PAGE_BITS;
    let mut tops: Vec<u64> = (0..n).map(|d| stack_top(TASK - PAGE, d)).collect();
    tops.sort_unstable();
    tops.dedup();
    assert_eq!(tops.len() as u64, n);
    assert!(tops.iter().all(|t| t % PAGE == 0 && *t <= TASK - PAGE));
    let pages = BRK_RND_RANGE / PAGE;
    assert_eq!(pages, 1 << STACK_RND_PAGE_BITS, "1 GiB of pages: 18/16/14 bits");
    let mut brks: Vec<u64> = (0..pages).map(brk_offset).collect();
    brks.dedup();
    assert_eq!(brks.len() as u64, pages);
    assert!((0..pages * 3).map(brk_offset).all(|o| o < BRK_RND_RANGE && o % PAGE == 0));
    let bits = MMAP_RND_BITS_DEFAULT;
    let mut offs: Vec<u64> = (0..1u64 << bits).map(|d| mmap_rnd(d, bits)).collect();
    offs.dedup();
    assert_eq!(offs.len() as u64, 1 << bits);
    assert!((0..PAGE * 2).map(stack_pad).all(|p| p < PAGE && p % 16 == 0));
}

/// The window invariants for one PIE base: the text fits in one window aligned to its size, a
/// quarter of the window free below it, the rest above; inside [region, region + span) and clear
/// of the lowest mmap base.
fn check_pie(base: u64, bits: u32, window: u64, align: u64, text_len: u64) {
    assert_eq!(base % align, 0);
    let win = base & !(window - 1);
    assert!(base + text_len <= win + window, "{base:#x}: the text leaves its window");
    assert!(base - win >= window / 4, "{base:#x}: less than a quarter window below the text");
    assert!(win + window - (base + text_len) >= window / 4 - text_len);
    let region = pie_region(TASK, bits, window, align);
    let span = pie_span(bits, window, align);
    assert!(region <= base && base < region + span);
    let lowest_mmap = mmap_base(TASK - PAGE, STACK_LIMIT, STACK_GUARD_GAP, true, mmap_rnd(u64::MAX, bits));
    assert!(region + span + (4 << 30) <= lowest_mmap);
}

#[test]
fn every_pie_draw_keeps_the_window_invariants_and_all_draws_differ() {
    // Exhaustive over the default bits (2^18 draws with 4 KiB pages), for a page-aligned image
    // and a 64 KiB-aligned one (Debian's programs): every draw a different base, so the entropy
    // is the full `bits` after the loader's alignment.
    let bits = MMAP_RND_BITS_DEFAULT;
    let window = WINDOW_DEFAULT;
    for align in [PAGE, pie_align(window, 0x1_0000)] {
        let mut bases: Vec<u64> = (0..1u64 << bits).map(|d| pie_base(TASK, d, bits, window, align)).collect();
        for &b in &bases {
            check_pie(b, bits, window, align, window / 4);
        }
        bases.sort_unstable();
        bases.dedup();
        assert_eq!(bases.len() as u64, 1 << bits, "align {align:#x}");
        // High bits are ignored, as Linux masks them.
        let top = (1u64 << bits) - 1;
        assert_eq!(pie_base(TASK, u64::MAX, bits, window, align), pie_base(TASK, top, bits, window, align));
    }
}

#[test]
fn pie_draws_keep_the_invariants_for_every_bit_count_window_size_and_alignment() {
    let mut rng = TestRng(0x5eed_0a51);
    let mut window = super::map::WINDOW_MIN;
    while window <= super::map::WINDOW_MAX {
        for p_align in [0, PAGE, 0x1_0000, 2 << 20] {
            let align = pie_align(window, p_align);
            for bits in MMAP_RND_BITS_MIN..=MMAP_RND_BITS_MAX {
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..200 {
                    let b = pie_base(TASK, rng.next(), bits, window, align);
                    check_pie(b, bits, window, align, window / 4);
                    seen.insert(b);
                }
                // 200 draws from 2^14 or more values: a handful of repeats at most.
                assert!(seen.len() >= 190, "bits {bits} window {window:#x}: {} distinct", seen.len());
            }
        }
        window *= 2;
    }
}

/// Every code-floor draw is a distinct multiple of the unit below a quarter of the window, for
/// every window size; with the PIE's window bits, the interpreter's base (the window's start
/// plus the floor) takes `window bits + floor bits` bits of distinct values: at least Linux's
/// 14 (its 18 bits of pages aligned down to the libraries' 64 KiB) with 4 KiB and 16 KiB pages.
#[test]
fn code_floor_draws_are_distinct_and_give_the_interpreter_bits_of_its_own() {
    let mut size = 2 << 20;
    while size <= 4 << 30 {
        let places = size / 4 / CODE_FLOOR_UNIT;
        let mut seen = std::collections::HashSet::new();
        for d in 0..places.max(1) {
            let f = code_floor(d, size);
            assert!(f.is_multiple_of(CODE_FLOOR_UNIT) && (f < size / 4 || f == 0), "{size:#x} {d}");
            seen.insert(f);
        }
        assert_eq!(seen.len() as u64, places.max(1), "{size:#x}");
        assert_eq!(code_floor(places, size), 0, "draws wrap");
        size *= 2;
    }
    let align = 0x1_0000u64.max(PAGE);
    let bits = MMAP_RND_BITS_DEFAULT;
    let iw = in_window_bits(WINDOW_DEFAULT, align);
    let floors = (WINDOW_DEFAULT / 4 / CODE_FLOOR_UNIT).trailing_zeros();
    let mut bases = std::collections::HashSet::new();
    for which in 0..1u64 << (bits - iw) {
        let window = pie_base(TASK, which << iw, bits, WINDOW_DEFAULT, align) & !(WINDOW_DEFAULT - 1);
        for f in 0..1u64 << floors {
            bases.insert(window + code_floor(f, WINDOW_DEFAULT));
        }
    }
    let got = (bases.len() as f64).log2();
    assert_eq!(bases.len() as u64, 1 << (bits - iw + floors));
    if PAGE < 0x1_0000 {
        assert!(got >= 14.0, "{got} bits");
    }
}

#[test]
fn a_randomised_space_keeps_code_in_the_window_and_the_heap_out_of_it() {
    // A PIE loaded at each of 400 seeded draws, as the kernel does it: segments mapped, the
    // window anchored on the text, the heap start randomised; then the calls a program makes.
    let mut rng = TestRng(42);
    let bits = MMAP_RND_BITS_DEFAULT;
    for _ in 0..400 {
        let rnd = mmap_rnd(rng.next(), bits);
        let base = pie_base(TASK, rng.next(), bits, WINDOW_DEFAULT, PAGE);
        let (text_end, bss_end) = (base + 0x8_0000, base + 0xa_0000);
        let layout = Layout {
            mmap_base: mmap_base(TASK - PAGE, STACK_LIMIT, STACK_GUARD_GAP, true, rnd),
            ..Layout::linux(bss_end)
        };
        let mut m = VmMap::new(layout);
        m.map_kernel(base, text_end - base, Prot::RX, VmaFlags::IMAGE).unwrap();
        m.map_kernel(text_end, bss_end - text_end, Prot::RW, VmaFlags::IMAGE).unwrap();
        m.init_code_window(Some((base, text_end))).unwrap();
        let (ws, we) = m.code_window_range().unwrap();
        assert_eq!(ws % WINDOW_DEFAULT, 0);
        assert_eq!(we - ws, WINDOW_DEFAULT);
        assert!(ws + WINDOW_DEFAULT / 4 <= base && text_end <= we);
        // The interpreter at the random code floor, below the text.
        let floor = code_floor(rng.next(), WINDOW_DEFAULT);
        m.set_code_floor(floor);
        let interp = m.place_image(0x4_0000, 0x1_0000).unwrap();
        assert_eq!(interp, ws + floor);
        assert!(interp + 0x4_0000 <= base);
        m.map_kernel(interp, 0x4_0000, Prot::RX, VmaFlags::IMAGE).unwrap();
        let offset = brk_offset(rng.next());
        let start = m.start_brk();
        assert!(start >= we, "an empty heap never starts inside the window");
        assert!(m.randomise_brk(offset));
        assert_eq!(m.start_brk(), start + offset);
        assert!(!m.randomise_brk(PAGE + 1), "whole pages only");
        // Code goes into the window, data below the random mmap base and out of the window.
        let code = m.mmap(0, 0x1_0000, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).unwrap();
        assert!(ws <= code.addr && code.addr + code.len <= we);
        let data = m.mmap(0, 0x1_0000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).unwrap();
        assert_eq!(data.addr + data.len, layout.mmap_base, "top-down from the random base");
        // A near hint 34 MiB below the text (LuaJIT's) is inside the window.
        // (At the hint when free: the interpreter, at the floor, may be there.)
        let hint = base - (34 << 20);
        let free = m.tree().is_free(hint, hint + 0x1_0000);
        let jit = m.mmap(hint, 0x1_0000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).unwrap();
        assert!(jit.addr == hint || !free, "{:#x} for {hint:#x}", jit.addr);
        assert!(ws <= jit.addr && jit.addr + jit.len <= we);
        let heap = m.brk(m.start_brk() + 0x2_0000);
        assert_eq!(heap.brk, m.start_brk() + 0x2_0000);
        assert_eq!(m.code_window().placed_outside, 0);
        m.check();
    }
}

#[test]
fn the_unrandomised_pie_base_is_linuxs_and_keeps_the_window_invariants() {
    // Linux 6.1 arm64 loads a PIE at ELF_ET_DYN_BASE (2/3 of the task size) aligned down to its
    // p_align, at least a page: 0xaaaa_aaaa_a000 page-aligned with 4 KiB pages, 0xaaaa_aaaa_0000
    // for Debian's 64 KiB-aligned programs (`setarch -R`). Both lie 170 MiB into their 512 MiB
    // window.
    let one_page = pie_align(WINDOW_DEFAULT, 0x1000);
    assert_eq!(pie_base_unrandomised(TASK, WINDOW_DEFAULT, one_page), 0xaaaa_aaaa_aaaa & !(PAGE - 1));
    assert_eq!(pie_base_unrandomised(TASK, WINDOW_DEFAULT, 0x1_0000), 0xaaaa_aaaa_0000);
    // Every window size and alignment: a quarter of the window below the text, a quarter less
    // the image above (LuaJIT's hints reach 62 MiB either side of its text).
    let mut window = super::map::WINDOW_MIN;
    while window <= super::map::WINDOW_MAX {
        for p_align in [0, PAGE, 0x1_0000, 2 << 20] {
            let align = pie_align(window, p_align);
            let base = pie_base_unrandomised(TASK, window, align);
            assert_eq!(base % align, 0);
            let win = base & !(window - 1);
            assert!(base - win >= window / 4, "window {window:#x} align {align:#x}: {base:#x}");
            assert!(
                win + window - base >= window / 4 + align,
                "window {window:#x} align {align:#x}: {base:#x}"
            );
        }
        window *= 2;
    }
    // A window whose Linux base would sit in its first quarter is moved up into the middle half
    // (4 GiB windows: 0xaaaa_aaaa_a000 is 2.7 GiB into 0xaaaa_0000_0000, in; 1 GiB: 682 MiB, in;
    // so checked with a task size whose 2/3 falls at the start of a window).
    let task = 3 << 40;
    assert_eq!(pie_base_unrandomised(task, WINDOW_DEFAULT, PAGE), (2 << 40) + WINDOW_DEFAULT / 4);
}
