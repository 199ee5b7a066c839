//! What a secondary CPU reads, with its MMU off, to start: one slot per CPU, written by the boot
//! CPU (`smp`) and read by the entry code (`head.rs`'s `secondary_entry`), which finds its slot by
//! its MPIDR.
use core::cell::UnsafeCell;

use crate::cpu::MAX_CPUS;

/// What a secondary CPU reads, with its MMU off, to start.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SecondaryBoot {
    /// MPIDR affinity of the CPU this slot starts (u64::MAX: an empty slot).
    pub mpidr: u64,
    /// MAIR_EL1 to load.
    pub mair: u64,
    /// TCR_EL1 to load (TTBR0 walks on: the identity map turns the MMU on).
    pub tcr: u64,
    /// TTBR0_EL1: the early identity map.
    pub ttbr0: u64,
    /// TTBR1_EL1: the kernel's tables.
    pub ttbr1: u64,
    /// SCTLR_EL1 to load.
    pub sctlr: u64,
    /// Top of the CPU's exception stack (SP_EL1).
    pub exception_stack_top: u64,
    /// Top of the CPU's kernel stack (SP_EL0 at EL1t).
    pub kernel_stack_top: u64,
    /// The CPU's number (TPIDR_EL1).
    pub cpu: u64,
    /// Padding to 128 bytes.
    pub _pad: [u64; 7],
}

/// Bytes of one slot (the entry code indexes slots by it).
pub const SLOT_SIZE: usize = core::mem::size_of::<SecondaryBoot>();
const _: () = assert!(SLOT_SIZE == 128);

/// Every CPU's slot.
pub struct Slots(pub UnsafeCell<[SecondaryBoot; MAX_CPUS]>);
// SAFETY: the boot CPU writes a slot before starting its CPU, which only reads it.
unsafe impl Sync for Slots {}

const EMPTY_SLOT: SecondaryBoot = SecondaryBoot {
    mpidr: u64::MAX,
    mair: 0,
    tcr: 0,
    ttbr0: 0,
    ttbr1: 0,
    sctlr: 0,
    exception_stack_top: 0,
    kernel_stack_top: 0,
    cpu: 0,
    _pad: [0; 7],
};

#[unsafe(no_mangle)]
pub static SECONDARY_BOOT: Slots = Slots(UnsafeCell::new([EMPTY_SLOT; MAX_CPUS]));
