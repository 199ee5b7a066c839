//! Which CPU this is, and what every CPU can see of the others: the CPU numbers (TPIDR_EL1 holds
//! this CPU's), each CPU's MPIDR and when it came online, and the size of each CPU's stacks.
//!
//! Apart from `smp` (which starts the secondary CPUs) because it is the bottom of the kernel: the
//! frame allocator, the heap, the drivers and the scheduler all index per-CPU state by
//! [`current_cpu`], and none of them may depend on the code that brings CPUs up.
use core::sync::atomic::{AtomicU64, AtomicUsize};

use mm::addr::PAGE_SIZE;

/// Most CPUs this kernel drives.
pub const MAX_CPUS: usize = 8;
const _: () = assert!(MAX_CPUS <= crate::arch::aarch64::mte::CPU_SLOTS);
/// MPIDR affinity bits (Aff3 and Aff2..Aff0), as a `cpu` node's `reg` holds them.
pub const MPIDR_AFFINITY: u64 = devicetree::machine::MPIDR_AFFINITY;

/// Per-CPU state reachable from any CPU.
pub struct CpuInfo {
    /// MPIDR affinity, or u64::MAX for an empty slot.
    pub mpidr: AtomicU64,
    /// Counter value when the CPU reported in (0: not yet).
    pub online_at: AtomicU64,
}

/// Every CPU's state, indexed by CPU number (0 = the boot CPU).
pub static CPUS: [CpuInfo; MAX_CPUS] =
    [const { CpuInfo { mpidr: AtomicU64::new(u64::MAX), online_at: AtomicU64::new(0) } }; MAX_CPUS];
/// Number of CPUs online.
pub static ONLINE: AtomicUsize = AtomicUsize::new(1);

/// This CPU's number (TPIDR_EL1 holds it).
pub fn current_cpu() -> usize {
    use aarch64_cpu::registers::{Readable, TPIDR_EL1};
    TPIDR_EL1.get() as usize
}

/// Size of one CPU's slot in the stack area.
pub const STACK_SLOT: u64 = 256 * 1024;
/// Kernel stack size per CPU.
pub const KERNEL_STACK: u64 = 64 * 1024;
/// Exception stack size per CPU: 32 KiB, or one page where a page is larger (64 KiB pages), since
/// the stacks are mapped in whole pages.
pub const EXCEPTION_STACK: u64 = if PAGE_SIZE > 32 * 1024 { PAGE_SIZE } else { 32 * 1024 };
const _: () = assert!(PAGE_SIZE + KERNEL_STACK + PAGE_SIZE + EXCEPTION_STACK <= STACK_SLOT);
const _: () = assert!(KERNEL_STACK.is_multiple_of(PAGE_SIZE) && EXCEPTION_STACK.is_multiple_of(PAGE_SIZE));
