//! The BCM2836 per-core local interrupt controller ("ARM control" block, `brcm,bcm2836-l1-intc`,
//! at 0x4000_0000 on a Pi 2 and Pi 3; QEMU `raspi3b` models it as `bcm2836_control`).
//!
//! The Pi 3 has no GIC: each core's IRQ line comes from this block, which routes the core's own
//! generic-timer interrupts and four 32-bit mailboxes per core (the IPIs), and chains the VideoCore
//! peripheral controller. Only what `irq` needs is driven, mapped onto the GIC's numbering so that
//! `irq` stays controller-agnostic:
//! - the EL1 virtual timer (CNTVIRQ) appears as INTID 27, the GIC's PPI for it;
//! - IPI number `n` (< 32) is bit `n` of the receiving core's mailbox 0; acknowledging returns the
//!   lowest pending bit and clears it (mailboxes are write-one-to-clear);
//! - end of interrupt is a no-op (the timer line is level and drops when the timer is re-armed).
//!
//! Register map (BCM2836 "ARM Quad A7 core" document, QEMU hw/intc/bcm2836_control.c), core `c`:
//! 0x40 + 4c core timers interrupt control (bit 3: CNTVIRQ to IRQ), 0x50 + 4c mailbox interrupt
//! control (bit n: mailbox n to IRQ), 0x60 + 4c IRQ source (bit 3: CNTVIRQ, bits 4..7: mailbox
//! 0..3), 0x80 + 16c + 4n mailbox n write-set, 0xc0 + 16c + 4n mailbox n read / write-clear.
//!
//! The core number is MPIDR.Aff0 (0..3 on a Pi 3).
use core::sync::atomic::{AtomicU64, Ordering};

use crate::devicetree::{Fdt, Node};

use crate::memory::kernel_map;

/// INTID reported for the virtual timer (the GIC's PPI 27, so `irq` needs no special case).
const TIMER_INTID: u32 = 27;

const TIMER_CONTROL: u64 = 0x40;
const MAILBOX_CONTROL: u64 = 0x50;
const IRQ_SOURCE: u64 = 0x60;
const MAILBOX_SET: u64 = 0x80;
const MAILBOX_CLEAR: u64 = 0xc0;
const CNTVIRQ: u32 = 1 << 3;
const MAILBOX0: u32 = 1 << 4;

static BASE: AtomicU64 = AtomicU64::new(0);

fn write32(offset: u64, value: u32) {
    // SAFETY: BASE is the controller's register block, mapped as device memory by `init` before
    // it was published; every offset used is a register inside its 256-byte block.
    unsafe { ((BASE.load(Ordering::Relaxed) + offset) as *mut u32).write_volatile(value) }
}

fn read32(offset: u64) -> u32 {
    // SAFETY: as for `write32`.
    unsafe { ((BASE.load(Ordering::Relaxed) + offset) as *const u32).read_volatile() }
}

fn this_core() -> u64 {
    use aarch64_cpu::registers::{MPIDR_EL1, Readable};
    MPIDR_EL1.get() & 0x3
}

/// The mapped register block, if `init` found the controller.
pub fn base() -> Option<u64> {
    match BASE.load(Ordering::Acquire) {
        0 => None,
        va => Some(va),
    }
}

/// Maps the controller at `path` (found by `devicetree::support::interrupt_controller`).
///
/// # Errors
/// A message if it is absent or cannot be mapped.
pub fn init(fdt: &Fdt<'_>, path: &str, node: Node<'_>) -> Result<u64, alloc::string::String> {
    let (pa, size) = crate::devicetree::reg_translated(fdt, path, node, 0)?;
    let va = kernel_map::map_device(pa, size.max(0x100))
        .map_err(|e| alloc::format!("mapping the BCM2836 local controller failed: {e:?}"))?;
    BASE.store(va, Ordering::Release);
    Ok(va)
}

/// Prepares this core: nothing routed until `enable_private` asks.
pub fn init_cpu() {
    let core = this_core();
    write32(TIMER_CONTROL + 4 * core, 0);
    write32(MAILBOX_CONTROL + 4 * core, 0);
    // Drop anything left in this core's mailbox 0 (e.g. by firmware).
    write32(MAILBOX_CLEAR + 16 * core, u32::MAX);
}

/// Routes `intid` to this core's IRQ: the virtual timer (27) or the IPIs (< 32: mailbox 0).
pub fn enable_private(intid: u32) {
    let core = this_core();
    if intid == TIMER_INTID {
        let v = read32(TIMER_CONTROL + 4 * core);
        write32(TIMER_CONTROL + 4 * core, v | CNTVIRQ);
    } else if intid < 32 {
        let v = read32(MAILBOX_CONTROL + 4 * core);
        write32(MAILBOX_CONTROL + 4 * core, v | 1);
    }
}

/// The highest-priority pending interrupt of this core (timer first, then the lowest IPI bit), or
/// 1023 when nothing is pending. An IPI is cleared as it is acknowledged.
pub fn acknowledge() -> u32 {
    let core = this_core();
    let source = read32(IRQ_SOURCE + 4 * core);
    if source & CNTVIRQ != 0 {
        return TIMER_INTID;
    }
    if source & MAILBOX0 != 0 {
        let pending = read32(MAILBOX_CLEAR + 16 * core);
        if pending != 0 {
            let bit = pending.trailing_zeros();
            write32(MAILBOX_CLEAR + 16 * core, 1 << bit);
            return bit;
        }
    }
    1023
}

/// Raises IPI `intid` (< 32) on the core whose MPIDR is `mpidr`.
pub fn send_ipi(intid: u32, mpidr: u64) {
    // Stores before the IPI must be visible to the receiver when it takes it.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    write32(MAILBOX_SET + 16 * (mpidr & 0x3), 1 << (intid & 31));
}
