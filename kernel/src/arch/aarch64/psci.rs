//! PSCI (Arm Power State Coordination Interface) calls, through the conduit the device tree
//! names: `hvc` when a hypervisor (or QEMU's EL1 model) implements it, `smc` when firmware at EL3
//! does (QEMU `virt,virtualization=on`, a Pi 5's TF-A).
use core::arch::asm;
use core::sync::atomic::{AtomicU8, Ordering};

/// How PSCI calls reach the implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conduit {
    /// Hypervisor call.
    Hvc,
    /// Secure monitor call.
    Smc,
}

const PSCI_VERSION: u32 = 0x8400_0000;
const PSCI_SYSTEM_OFF: u32 = 0x8400_0008;
const PSCI_CPU_ON_64: u32 = 0xc400_0003;

static CONDUIT: AtomicU8 = AtomicU8::new(0);

/// Records the conduit (from the device tree's `/psci` node).
pub fn set_conduit(conduit: Conduit) {
    CONDUIT.store(if conduit == Conduit::Hvc { 1 } else { 2 }, Ordering::Relaxed);
}

/// The recorded conduit, if the device tree named one.
pub fn conduit() -> Option<Conduit> {
    match CONDUIT.load(Ordering::Relaxed) {
        1 => Some(Conduit::Hvc),
        2 => Some(Conduit::Smc),
        _ => None,
    }
}

fn call(function: u32, a1: u64, a2: u64, a3: u64) -> Option<u64> {
    let mut x0 = u64::from(function);
    match conduit()? {
        // SAFETY: an SMCCC call with the PSCI function id in x0; the implementation preserves
        // x4-x17 (SMCCC 1.1 allows clobbering x1-x3, declared here).
        Conduit::Hvc => unsafe {
            asm!("hvc #0", inout("x0") x0, inout("x1") a1 => _, inout("x2") a2 => _,
                 inout("x3") a3 => _, options(nostack))
        },
        // SAFETY: as above, through the secure monitor.
        Conduit::Smc => unsafe {
            asm!("smc #0", inout("x0") x0, inout("x1") a1 => _, inout("x2") a2 => _,
                 inout("x3") a3 => _, options(nostack))
        },
    }
    Some(x0)
}

/// PSCI version as (major, minor), if PSCI answers.
pub fn version() -> Option<(u16, u16)> {
    let v = call(PSCI_VERSION, 0, 0, 0)? as u32;
    Some(((v >> 16) as u16, v as u16))
}

/// Powers the machine off. Returns only if there is no PSCI or it refused.
pub fn system_off() {
    let _ = call(PSCI_SYSTEM_OFF, 0, 0, 0);
}

/// Starts the CPU with affinity `mpidr` at physical address `entry` (MMU off, at the EL the
/// kernel was entered at).
///
/// # Errors
/// The PSCI error code (e.g. -4 ALREADY_ON, -2 INVALID_PARAMETERS), or -1 without PSCI.
pub fn cpu_on(mpidr: u64, entry: u64) -> Result<(), i64> {
    match call(PSCI_CPU_ON_64, mpidr, entry, 0) {
        Some(0) => Ok(()),
        Some(code) => Err(code as i64),
        None => Err(-1),
    }
}
