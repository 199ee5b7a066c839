//! Address-space layout randomisation: where, for one `exec`, the mmap base, the stack top, the
//! heap's start and a PIE's load base go, given random draws. Pure arithmetic, so every
//! invariant is proved on the host over the whole draw range (`aslr_tests`); the kernel makes
//! the draws (its ChaCha20 generator) and decides whether to randomise at all
//! (`randomize_va_space`, `norandmaps`, `personality(ADDR_NO_RANDOMIZE)`).
//!
//! Each base follows Linux arm64 (6.1) and has at least its entropy:
//! - mmap base: `mm/util.c` `mmap_base` — `TASK_SIZE - gap - rnd`, the gap the stack limit plus
//!   the stack guard gap plus the stack's own randomisation range (clamped to 128 MiB ..
//!   5/6 of the task size), `rnd` = [`mmap_rnd_bits`](MMAP_RND_BITS_DEFAULT) bits of pages
//!   (`arch_mmap_rnd`);
//! - stack top: `randomize_stack_top` — `STACK_TOP` less [`STACK_RND_PAGE_BITS`] bits of pages
//!   (Linux's `STACK_RND_MASK`, `0x3ffff >> (PAGE_SHIFT - 12)`), then the first stack pointer
//!   less a sub-page offset in 16-byte steps (`arch_align_stack`);
//! - heap: `arch_randomize_brk` — the start moved up by up to 1 GiB in pages (`randomize_page`);
//! - PIE base: Linux puts it at `ELF_ET_DYN_BASE` (2/3 of the task size) plus the mmap draw, so
//!   `mmap_rnd_bits` bits of pages spread over 2^bits pages. Here the same number of bits is
//!   split in two so that the code window's invariants hold on every draw: the low
//!   [`in_window_bits`] choose the text's place (in units of its alignment) inside the middle
//!   half of its window (at least a quarter of the window below the text, for near hints and a
//!   loader's reservations, and a quarter less the image above), the rest choose which of
//!   `2^(bits - in_window_bits)` consecutive windows. The window is aligned to its size and contains the text (the kernel's
//!   `init_code_window` anchors it there), so the draws still give `bits` bits of distinct
//!   bases — see [`pie_base`]. Without randomisation the base is Linux's, which lies in the middle
//!   half of the default window too ([`pie_base_unrandomised`]);
//! - the interpreter and libraries: Linux puts them below the mmap base, so they move with its
//!   draw. Here code goes into the code window, lowest fit first, from a random floor in the
//!   window's first quarter ([`code_floor`]), so their addresses carry its bits as well as the
//!   window's.
use crate::addr::{PAGE_SHIFT, PAGE_SIZE, USER_VA_BITS};

/// Linux's `CONFIG_ARCH_MMAP_RND_BITS_MIN` for arm64, which is also its default: 18 with 4 KiB
/// pages, 16 with 16 KiB, 14 with 64 KiB (the same 1 GiB of spread in each).
pub const MMAP_RND_BITS_MIN: u32 = 30 - PAGE_SHIFT;
/// The default `vm.mmap_rnd_bits` (Linux's `CONFIG_ARCH_MMAP_RND_BITS`, = the minimum on arm64).
pub const MMAP_RND_BITS_DEFAULT: u32 = MMAP_RND_BITS_MIN;
/// Linux's `CONFIG_ARCH_MMAP_RND_BITS_MAX` with 48-bit VAs: 33, 31, 29 for 4, 16, 64 KiB pages.
pub const MMAP_RND_BITS_MAX: u32 = USER_VA_BITS - PAGE_SHIFT - 3;
/// Bits of pages the stack top moves by (Linux's `STACK_RND_MASK` for 64-bit tasks).
pub const STACK_RND_PAGE_BITS: u32 = 30 - PAGE_SHIFT;
/// The range the heap's start moves in (Linux's `arch_randomize_brk`: `SZ_1G` for 64-bit).
pub const BRK_RND_RANGE: u64 = 1 << 30;
/// Linux's smallest stack gap above the mmap base (`MIN_GAP`).
const MIN_GAP: u64 = 128 << 20;

/// Draws masked to `bits` bits.
const fn low_bits(draw: u64, bits: u32) -> u64 {
    if bits >= 64 { draw } else { draw & ((1 << bits) - 1) }
}

/// Linux's `arch_mmap_rnd`: `bits` bits of the draw, in pages.
pub const fn mmap_rnd(draw: u64, bits: u32) -> u64 {
    low_bits(draw, bits) << PAGE_SHIFT
}

/// Linux's `mmap_base(rnd, rlim_stack)` below a stack whose unrandomised top is `stack_top`
/// (Linux's `STACK_TOP`; this kernel's is a page below the task size): `stack_limit` is
/// `RLIMIT_STACK`'s soft value, `guard` the stack guard gap, `randomised` whether the stack top
/// is randomised (its whole range is kept free).
pub const fn mmap_base(stack_top: u64, stack_limit: u64, guard: u64, randomised: bool, rnd: u64) -> u64 {
    let pad = guard + if randomised { ((1u64 << STACK_RND_PAGE_BITS) - 1) << PAGE_SHIFT } else { 0 };
    let mut gap = stack_limit.saturating_add(pad);
    let max_gap = stack_top / 6 * 5;
    if gap < MIN_GAP {
        gap = MIN_GAP;
    } else if gap > max_gap {
        gap = max_gap;
    }
    (stack_top - gap - rnd) & !(PAGE_SIZE - 1)
}

/// Linux's `randomize_stack_top`: `top` less [`STACK_RND_PAGE_BITS`] bits of pages.
pub const fn stack_top(top: u64, draw: u64) -> u64 {
    (top & !(PAGE_SIZE - 1)) - (low_bits(draw, STACK_RND_PAGE_BITS) << PAGE_SHIFT)
}

/// Linux's `arch_align_stack` offset: below a page, a multiple of 16.
pub const fn stack_pad(draw: u64) -> u64 {
    (draw % PAGE_SIZE) & !15
}

/// Linux's `randomize_page(start, BRK_RND_RANGE)`: an offset of whole pages below 1 GiB.
pub const fn brk_offset(draw: u64) -> u64 {
    (draw % (BRK_RND_RANGE >> PAGE_SHIFT)) << PAGE_SHIFT
}

/// The unit of [`code_floor`]: 64 KiB, the alignment Debian's libraries ask for (`p_align`), so
/// that no draw is lost to a loader aligning its reservation.
pub const CODE_FLOOR_UNIT: u64 = if PAGE_SIZE > 64 << 10 { PAGE_SIZE } else { 64 << 10 };

/// Where lowest-fit code placement starts inside a code window of `window` bytes, as an offset
/// from its start (`VmMap::set_code_floor`): a multiple of [`CODE_FLOOR_UNIT`] below a quarter
/// of the window, which every PIE draw leaves free below the text ([`pie_base`]). The
/// interpreter and the libraries then carry `log2(window / 4 / CODE_FLOOR_UNIT)` bits of their
/// own (11 for the default 512 MiB window) besides the window's bits, instead of sitting at
/// the window's start.
pub const fn code_floor(draw: u64, window: u64) -> u64 {
    let places = window / 4 / CODE_FLOOR_UNIT;
    if places == 0 { 0 } else { (draw % places) * CODE_FLOOR_UNIT }
}

/// Bits of a PIE draw that choose the text's place inside its window: the middle half of a
/// window of `window` bytes holds `window / 2 / align` places aligned to `align`.
pub const fn in_window_bits(window: u64, align: u64) -> u32 {
    (window / 2 / align).trailing_zeros()
}

/// The alignment a PIE's draw is made in: the image's largest `p_align` (Linux aligns the load
/// bias down to it), at least a page, at most a quarter of the window.
pub const fn pie_align(window: u64, p_align: u64) -> u64 {
    let a = if p_align < PAGE_SIZE { PAGE_SIZE } else { p_align };
    if a > window / 4 { window / 4 } else { a }
}

/// Where the PIE windows start for `bits` bits of draw, windows of `window` bytes (a power of
/// two) and places aligned to `align`: Linux's `ELF_ET_DYN_BASE` (2/3 of the task size) aligned
/// down to the window, lowered when the largest `bits` would otherwise come within 8 GiB (less
/// the stack limit) of the lowest mmap base.
pub const fn pie_region(task_size: u64, bits: u32, window: u64, align: u64) -> u64 {
    let et_dyn_base = (task_size / 3 * 2) & !(window - 1);
    let span = pie_span(bits, window, align);
    let mmap_reach = 1u64 << (bits + PAGE_SHIFT);
    let highest_end = task_size - (1 << 30) - mmap_reach - (8 << 30);
    let limit = (highest_end - span) & !(window - 1);
    if et_dyn_base < limit { et_dyn_base } else { limit }
}

/// The most address space the PIE windows may cover: a quarter of the user range (64 TiB),
/// which Linux's largest draw (2^33 pages of 4 KiB: 32 TiB) fits in twice.
pub const PIE_SPAN_MAX: u64 = 1 << (USER_VA_BITS - 2);

/// Bits of a PIE draw that choose the window: what `bits` leaves after [`in_window_bits`], at
/// most as many as [`PIE_SPAN_MAX`] holds windows of `window` bytes.
const fn window_bits(bits: u32, window: u64, align: u64) -> u32 {
    let iw = in_window_bits(window, align);
    let most = (PIE_SPAN_MAX / window).trailing_zeros();
    let want = bits.saturating_sub(iw);
    if want < most { want } else { most }
}

/// Bytes of address space the PIE windows of `bits` bits cover.
pub const fn pie_span(bits: u32, window: u64, align: u64) -> u64 {
    (1u64 << window_bits(bits, window, align)) * window
}

/// A PIE's load base without randomisation (`norandmaps`, `setarch -R`), for code windows of
/// `window` bytes and an image aligned to `align` ([`pie_align`]): Linux's (`ELF_ET_DYN_BASE`,
/// 2/3 of the task size, aligned down to `align`: `0xaaaa_aaaa_0000` for a 64 KiB-aligned
/// program, 170 MiB into its 512 MiB window), moved into the middle half of its window when it
/// falls outside it (a window of another size), so that the unrandomised text has the room on
/// both sides that every draw of [`pie_base`] gives it. A base at the window's start (this
/// kernel's first fixed base, `0xaaaa_0000_0000`) left half of every neighbourhood of the text
/// outside the window: LuaJIT's machine code, hinted within 62 MiB of its text, went outside.
pub const fn pie_base_unrandomised(task_size: u64, window: u64, align: u64) -> u64 {
    let linux = (task_size / 3 * 2) & !(align - 1);
    let win = linux & !(window - 1);
    let (lowest, highest) = (win + window / 4, win + window / 4 * 3 - align);
    if linux < lowest {
        lowest
    } else if linux > highest {
        highest
    } else {
        linux
    }
}

/// A PIE's load base for `draw` with `bits` bits of randomisation (`vm.mmap_rnd_bits`), code
/// windows of `window` bytes and an image aligned to `align` ([`pie_align`]): a multiple of
/// `align` in the middle half of one of the windows starting at [`pie_region`]. Drawing in units
/// of the alignment keeps all `bits` bits when the loader aligns the base (Linux draws pages and
/// aligns after, losing `log2(align / PAGE_SIZE)` bits: 4 for Debian's 64 KiB-aligned programs
/// with 4 KiB pages). The `2^bits` draws give `2^bits` distinct bases while the windows fit in
/// [`PIE_SPAN_MAX`] (every default; at the largest `bits` with 64 KiB alignment 29 bits, what
/// Linux keeps after aligning); an image of up to `window / 4` bytes at the base lies
/// inside its window with at least `window / 4` below it.
pub const fn pie_base(task_size: u64, draw: u64, bits: u32, window: u64, align: u64) -> u64 {
    let iw = in_window_bits(window, align);
    let d = low_bits(draw, bits);
    let place = low_bits(d, iw);
    let which = low_bits(d >> iw, window_bits(bits, window, align));
    pie_region(task_size, bits, window, align) + which * window + window / 4 + place * align
}
