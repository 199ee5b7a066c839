//! Cache maintenance the kernel needs: making freshly written instructions visible to
//! instruction fetch (loading a program, demand-paging an executable page).
use core::arch::asm;

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
