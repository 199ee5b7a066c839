//! Switching the kernel's translation tables.
//!
//! Replacing TTBR1 while running from TTBR1 would break break-before-make: the old and new tables
//! map the running code with different block sizes and permissions, and for a moment the TLB
//! could hold both (a TLB conflict). So the switch runs from the identity map (TTBR0), which the
//! early tables still provide: TTBR1 goes to an empty table, the TLB is flushed, then TTBR1 gets
//! the new root (Linux's `cpu_replace_ttbr1` does the same through its idmap). Afterwards TTBR0
//! walks are disabled until user space gives TTBR0 a meaning.
use aarch64_cpu::registers::{ReadWriteable, TCR_EL1, TTBR0_EL1, Writeable};
use core::arch::{asm, global_asm};

global_asm!(
    r#"
    .section .text, "ax"
    .global replace_ttbr1_idmap
    // x0 = new TTBR1, x1 = TTBR1 naming an empty table. Runs at its physical address;
    // touches no memory (the stack is in TTBR1).
replace_ttbr1_idmap:
    msr     ttbr1_el1, x1
    isb
    tlbi    vmalle1
    dsb     nsh
    isb
    msr     ttbr1_el1, x0
    isb
    tlbi    vmalle1
    dsb     nsh
    isb
    ret
"#
);

unsafe extern "C" {
    fn replace_ttbr1_idmap(new_ttbr1: u64, empty_table_pa: u64);
}

/// Installs `new_root_pa` as TTBR1 through the identity map, then disables TTBR0.
///
/// # Safety
/// - `new_root_pa` is a complete kernel table that maps the Image at its link address (text
///   executable, the current stack and the exception stack writable), so execution continues;
/// - the identity map of the Image is live in TTBR0, and `image_offset` is VA − PA for the Image;
/// - `empty_table_pa` is a zeroed table page.
pub unsafe fn switch_kernel_tables(new_root_pa: u64, empty_table_pa: u64, image_offset: u64) {
    use crate::arch::aarch64::translation::ttbr;
    let trampoline = (replace_ttbr1_idmap as *const () as u64).wrapping_sub(image_offset);
    // SAFETY: the trampoline's physical address is identity-mapped and executable in TTBR0 (the
    // caller's contract); it has the C ABI of `replace_ttbr1_idmap`.
    let at_pa: unsafe extern "C" fn(u64, u64) = unsafe { core::mem::transmute(trampoline) };
    // SAFETY: the arguments satisfy the trampoline's contract (see above).
    unsafe { at_pa(ttbr(new_root_pa, 0), ttbr(empty_table_pa, 0)) };
    TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
    TTBR0_EL1.set(0);
    // SAFETY: flushes every EL1&0 entry so nothing learned through the identity map survives.
    unsafe { asm!("isb", "tlbi vmalle1", "dsb nsh", "isb", options(nostack)) };
}

/// Asks the MMU how EL1 would translate `va` (`AT S1E1R` or `AT S1E1W`): the physical address, or
/// PAR_EL1 describing the fault. The CPU's own answer, so tests need not trust the mm crate's.
#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the test image checks the kernel map with it")
)]
pub fn translate(va: u64, write: bool) -> Result<u64, u64> {
    let par: u64;
    // SAFETY: AT only performs a translation-table walk and writes PAR_EL1; no memory is accessed
    // through the address.
    unsafe {
        if write {
            asm!("at s1e1w, {va}", "isb", "mrs {par}, par_el1", va = in(reg) va, par = out(reg) par,
                 options(nostack));
        } else {
            asm!("at s1e1r, {va}", "isb", "mrs {par}, par_el1", va = in(reg) va, par = out(reg) par,
                 options(nostack));
        }
    }
    if par & 1 == 0 { Ok((par & 0x000f_ffff_ffff_f000) | (va & 0xfff)) } else { Err(par) }
}

/// The fault status code in a failed PAR_EL1 (same encoding as DFSC).
#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the test image checks the kernel map with it")
)]
pub fn par_fault_status(par: u64) -> u64 {
    (par >> 1) & 0x3f
}

/// The memory attribute (the MAIR_EL1 byte, PAR_EL1.ATTR) EL1 would read `va` with (`AT S1E1R`),
/// or `None` if the translation faults: the CPU's own view of a mapping's memory type.
#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the test image checks memory-type changes with it")
)]
pub fn memory_attribute(va: u64) -> Option<u8> {
    let par: u64;
    // SAFETY: as in `translate`: a table walk that writes PAR_EL1, no access through `va`.
    unsafe {
        asm!("at s1e1r, {va}", "isb", "mrs {par}, par_el1", va = in(reg) va, par = out(reg) par,
             options(nostack));
    }
    if par & 1 == 0 { Some((par >> 56) as u8) } else { None }
}
