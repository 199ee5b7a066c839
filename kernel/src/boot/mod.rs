//! Boot: from the loader's jump to `kernel_main`.
//!
//! The loader (QEMU `-kernel`, U-Boot `booti`, the Raspberry Pi firmware, m1n1) enters the Image
//! at its first byte with the MMU off, x0 = physical address of the device tree, at EL2 or EL1,
//! from any 2 MiB-aligned physical address. [`head`] holds the header and the position-independent
//! entry code; [`early_map`] builds the first page tables (without locks: exclusives are
//! unreliable with the MMU off) so the entry code can turn the MMU on and jump to the link
//! address in the upper half; [`kaslr`] then moves the Image to a random address. From there on, `memory::kernel_map` rebuilds the tables through the
//! mm crate and the early ones are dropped.

/// The address of a linker-script symbol (an `extern` static), computed from the PC with `adrp`
/// and `add`: its physical address while the MMU is off, its run address once it is on. The
/// kernel is a position-independent executable, and Rust reaches an `extern` static of one
/// through the GOT, which holds the link address (rewritten only when `kaslr` moves the Image):
/// code that runs before the MMU is on (`early_map`, the EFI stub) takes addresses this way only.
/// `kimage check` (its `early-code` and `efi-stub-code` checks) finds any load of a link address.
macro_rules! pc_relative {
    ($symbol:path) => {{
        let address: u64;
        // SAFETY: computes an address from the PC; reads and writes nothing else.
        unsafe {
            core::arch::asm!("adrp {a}, {s}", "add {a}, {a}, :lo12:{s}", a = out(reg) address, s = sym $symbol,
                             options(nomem, nostack, preserves_flags, pure));
        }
        address
    }};
}
pub(crate) use pc_relative;

pub mod early_map;
pub mod head;
pub mod kaslr;
pub mod secondary;

/// What the entry code learned before Rust ran, passed to `kernel_main`.
#[derive(Clone, Copy, Debug)]
pub struct BootInfo {
    /// x0 as the loader gave it: the device tree's physical address, if the loader is honest.
    pub fdt_pa: u64,
    /// Physical address the Image was loaded at (its first byte).
    pub load_pa: u64,
    /// Exception level the loader entered the kernel at (1 or 2).
    pub entry_el: u64,
    /// CNTVCT_EL0 at the first instruction, for the boot-time figure.
    pub entry_counter: u64,
    /// TTBR0 of the early identity map, kept for secondary CPUs to turn their MMU on with.
    pub early_ttbr0: u64,
}
