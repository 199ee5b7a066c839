//! Cache maintenance the kernel needs: making freshly written instructions visible to
//! instruction fetch (loading a program, demand-paging an executable page), and zeroing frames
//! by whole cache blocks (`DC ZVA`), as Linux's `clear_page` does.
use core::arch::asm;
use core::sync::atomic::{AtomicUsize, Ordering};

fn line_sizes() -> (usize, usize) {
    let ctr: u64;
    // SAFETY: reads CTR_EL0, no side effects.
    unsafe { asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
    let dline = 4 << ((ctr >> 16) & 0xf);
    let iline = 4 << (ctr & 0xf);
    (dline, iline)
}

/// Cleans `[va, va + len)` to the point of unification and invalidates the instruction cache
/// for it (Arm ARM B2.4.4, "Concurrent modification and execution of instructions").
pub fn sync_icache(va: u64, len: usize) {
    let (dline, iline) = line_sizes();
    let end = va + len as u64;
    let mut a = va & !(dline as u64 - 1);
    while a < end {
        // SAFETY: cleaning a mapped kernel address by VA has no effect on memory contents.
        unsafe { asm!("dc cvau, {}", in(reg) a, options(nostack)) };
        a += dline as u64;
    }
    // SAFETY: barrier only.
    unsafe { asm!("dsb ish", options(nostack)) };
    let mut a = va & !(iline as u64 - 1);
    while a < end {
        // SAFETY: invalidating instruction-cache lines only drops cached instructions.
        unsafe { asm!("ic ivau, {}", in(reg) a, options(nostack)) };
        a += iline as u64;
    }
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// The `DC ZVA` block size in bytes, or 0 while unknown; `usize::MAX` when `DC ZVA` is
/// prohibited (DCZID_EL0.DZP).
static ZVA_BLOCK: AtomicUsize = AtomicUsize::new(0);

fn zva_block() -> usize {
    let known = ZVA_BLOCK.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let dczid: u64;
    // SAFETY: reads DCZID_EL0, no side effects.
    unsafe { asm!("mrs {}, dczid_el0", out(reg) dczid, options(nomem, nostack)) };
    // BS (bits 3:0) is log2 of the block size in 4-byte words (Arm ARM D23.2, DCZID_EL0).
    let block = if dczid & (1 << 4) != 0 { usize::MAX } else { 4 << (dczid & 0xf) };
    ZVA_BLOCK.store(block, Ordering::Relaxed);
    block
}

/// Zeroes `[va, va + len)` of Normal memory. With `DC ZVA` allowed and `va` and `len` multiples
/// of its block (64 bytes on most cores), one instruction clears a block without reading it —
/// a 4 KiB frame costs 64 of them instead of 256 16-byte stores, which is what demand paging of
/// fresh memory spends most of its instructions on; otherwise an ordinary `write_bytes`.
///
/// # Safety
/// `[va, va + len)` must be writable Normal memory (the linear map of a frame the caller owns)
/// that nobody else uses.
pub unsafe fn zero(va: usize, len: usize) {
    let block = zva_block();
    if block == usize::MAX || !va.is_multiple_of(block) || !len.is_multiple_of(block) {
        // SAFETY: the caller's promise.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, len) };
        return;
    }
    let mut a = va;
    let end = va + len;
    // Four blocks an iteration when the range allows it (a 4 KiB frame always does with blocks
    // of up to 1 KiB): 10 instructions for four blocks instead of 16, the loop's compare and
    // branch shared.
    let step = 4 * block;
    if len != 0 && len.is_multiple_of(step) {
        // SAFETY: each `dc zva` clears one whole block of `[a, a + step)`, inside the caller's
        // range of Normal memory (DC ZVA on Device memory would fault; the linear map is Normal,
        // write-back); the loop runs at least once and ends at `end`, a nonzero multiple of
        // `step` past `va`.
        unsafe {
            asm!(
                "2:",
                "dc zva, {a}",
                "add {t}, {a}, {b}",
                "dc zva, {t}",
                "add {t}, {t}, {b}",
                "dc zva, {t}",
                "add {t}, {t}, {b}",
                "dc zva, {t}",
                "add {a}, {a}, {s}",
                "cmp {a}, {e}",
                "b.lo 2b",
                a = inout(reg) a => _,
                t = out(reg) _,
                b = in(reg) block,
                s = in(reg) step,
                e = in(reg) end,
                options(nostack),
            )
        };
        return;
    }
    while a < end {
        // SAFETY: a whole block inside the caller's range of Normal memory (DC ZVA on Device
        // memory would fault; the linear map is Normal, write-back).
        unsafe { asm!("dc zva, {}", in(reg) a, options(nostack)) };
        a += block;
    }
}
