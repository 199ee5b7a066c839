//! Apple's AIC behind `intc`: maps the controller the tree names, and turns its two delivery
//! paths into the GIC-numbered operations `irq` uses.
//!
//! - The timer and the fast IPIs arrive as **FIQs** (`apple_fiq`): `irq::handle_fiq` asks
//!   [`fiq`] what fired. The tick is the EL1 virtual timer, as on every other board; it needs no
//!   routing, only F unmasked where the kernel waits (`irq::wait_for_interrupt`).
//! - Device interrupts and AIC1's register IPIs arrive as IRQs through the event register
//!   (`aic`). No device interrupt is routed yet (the console is polled on the tick, as `tty`
//!   does for any console without a GIC interrupt).
//!
//! An AIC has one IPI per CPU where the kernel numbers several (wake, ping), so, as Linux's
//! driver multiplexes "vIPIs" over it, the IPI numbers are bits of a per-CPU word set by the
//! sender before the hardware IPI and taken by the receiver after acknowledging it
//! ([`next_ipi`]). Fast IPIs are used where Linux uses them (`apple,t8103-aic` and AIC2, listed
//! in irq-apple-aic.c's `aic_info_match`); a plain `apple,aic` gets AIC1's register IPIs.
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::aic::{Aic, Event, Version};
use super::apple_fiq::{self, Reg, SystemRegisters};
use crate::cpu::{MAX_CPUS, current_cpu};
use crate::devicetree::{Fdt, Node};
use crate::memory::kernel_map;

static AIC: spin::Once<Aic> = spin::Once::new();
static FAST_IPIS: AtomicBool = AtomicBool::new(false);
/// IPI numbers waiting for each CPU (bit `n`: IPI `n`).
static PENDING_IPIS: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// This CPU's system registers, for `apple_fiq`.
struct ThisCpu;

impl SystemRegisters for ThisCpu {
    fn read(&mut self, reg: Reg) -> u64 {
        let value: u64;
        // SAFETY: reads of this CPU's timer controls and Apple's IMP-DEF IPI and PMC registers;
        // only called once the tree named an AIC, i.e. on an Apple core where they exist.
        unsafe {
            match reg {
                Reg::IpiStatus => {
                    core::arch::asm!("mrs {}, s3_5_c15_c1_1", out(reg) value, options(nomem, nostack))
                }
                Reg::IpiRequestLocal => {
                    core::arch::asm!("mrs {}, s3_5_c15_c0_0", out(reg) value, options(nomem, nostack))
                }
                Reg::IpiRequestGlobal => {
                    core::arch::asm!("mrs {}, s3_5_c15_c0_1", out(reg) value, options(nomem, nostack))
                }
                Reg::VirtualTimerControl => {
                    core::arch::asm!("mrs {}, cntv_ctl_el0", out(reg) value, options(nomem, nostack))
                }
                Reg::PhysicalTimerControl => {
                    core::arch::asm!("mrs {}, cntp_ctl_el0", out(reg) value, options(nomem, nostack))
                }
                Reg::Pmcr0 => {
                    core::arch::asm!("mrs {}, s3_1_c15_c0_0", out(reg) value, options(nomem, nostack))
                }
                Reg::Upmcr0 => {
                    core::arch::asm!("mrs {}, s3_7_c15_c0_4", out(reg) value, options(nomem, nostack))
                }
                Reg::Upmsr => {
                    core::arch::asm!("mrs {}, s3_7_c15_c6_4", out(reg) value, options(nomem, nostack))
                }
            }
        }
        value
    }

    fn write(&mut self, reg: Reg, value: u64) {
        // SAFETY: as for `read`: writes of this CPU's own interrupt sources, as `apple_fiq` says.
        unsafe {
            match reg {
                Reg::IpiStatus => core::arch::asm!("msr s3_5_c15_c1_1, {}", in(reg) value, options(nostack)),
                Reg::IpiRequestLocal => {
                    core::arch::asm!("msr s3_5_c15_c0_0, {}", in(reg) value, options(nostack))
                }
                Reg::IpiRequestGlobal => {
                    core::arch::asm!("msr s3_5_c15_c0_1, {}", in(reg) value, options(nostack))
                }
                Reg::VirtualTimerControl => {
                    core::arch::asm!("msr cntv_ctl_el0, {}", in(reg) value, options(nostack))
                }
                Reg::PhysicalTimerControl => {
                    core::arch::asm!("msr cntp_ctl_el0, {}", in(reg) value, options(nostack))
                }
                Reg::Pmcr0 => core::arch::asm!("msr s3_1_c15_c0_0, {}", in(reg) value, options(nostack)),
                Reg::Upmcr0 => core::arch::asm!("msr s3_7_c15_c0_4, {}", in(reg) value, options(nostack)),
                Reg::Upmsr => core::arch::asm!("msr s3_7_c15_c6_4, {}", in(reg) value, options(nostack)),
            }
        }
    }

    fn synchronize(&mut self) {
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }
}

/// The AIC, once `init` mapped it.
pub fn active() -> bool {
    AIC.get().is_some()
}

/// Maps and initialises the AIC at `path` (found by `devicetree::support::interrupt_controller`).
///
/// # Errors
/// A message naming what is missing or unmappable (the kernel then runs without interrupts).
pub fn init(fdt: &Fdt<'_>, path: &str, node: Node<'_>) -> Result<&'static str, alloc::string::String> {
    // The FIQ sources are Apple's IMP-DEF system registers, which any other core would take as
    // undefined instructions: a tree naming an AIC on another CPU is refused, not obeyed.
    let midr = {
        use aarch64_cpu::registers::{MIDR_EL1, Readable};
        MIDR_EL1.get()
    };
    if (midr >> 24) & 0xff != 0x61 {
        return Err(alloc::format!(
            "{path}: an Apple AIC, but this CPU is not Apple's (MIDR {midr:#x}); its FIQ registers do not exist"
        ));
    }
    let version = if node.is_compatible(&["apple,aic2"]) { Version::Aic2 } else { Version::Aic1 };
    let (pa, size) = crate::devicetree::reg_translated(fdt, path, node, 0)?;
    let size = size.max(0x8000);
    let base = kernel_map::map_device(pa, size)
        .map_err(|e| alloc::format!("mapping the AIC's registers at {pa:#x} failed: {e:?}"))?;
    let event = match version {
        Version::Aic1 => Aic::aic1_event(base),
        Version::Aic2 => {
            let (pa, size) = crate::devicetree::reg_translated(fdt, path, node, 1)?;
            kernel_map::map_device(pa, size.max(4))
                .map_err(|e| alloc::format!("mapping the AIC's event register at {pa:#x} failed: {e:?}"))?
        }
    };
    // SAFETY: `base` maps at least 0x8000 bytes of the block the tree gives (the info registers
    // and AIC1's whole layout) and `event` the event register, as device memory, for good; the
    // span the info registers ask for is checked against the mapping before anything else.
    let aic = unsafe { Aic::new(version, base, event) };
    if aic.span() > size {
        return Err(alloc::format!(
            "{path}: the AIC's info registers describe {:#x} bytes of registers, more than its reg's {size:#x}",
            aic.span()
        ));
    }
    let aic = AIC.call_once(|| aic);
    aic.init();
    FAST_IPIS.store(version == Version::Aic2 || node.is_compatible(&["apple,t8103-aic"]), Ordering::Release);
    Ok(name())
}

/// The controller and how its IPIs travel, for the boot report.
pub fn name() -> &'static str {
    if FAST_IPIS.load(Ordering::Relaxed) {
        "Apple AIC (timer and fast IPIs as FIQs)"
    } else {
        "Apple AIC (timer as FIQ, register IPIs)"
    }
}

/// This CPU's side: every per-CPU FIQ source masked, AIC1's register IPIs set up, nothing left
/// pending from before.
pub fn init_cpu() {
    apple_fiq::init_cpu(&mut ThisCpu, FAST_IPIS.load(Ordering::Acquire));
    if let Some(aic) = AIC.get() {
        aic.init_cpu();
    }
    PENDING_IPIS[current_cpu()].store(0, Ordering::Relaxed);
}

/// Finds what raised this FIQ and quiets the sources the kernel does not use; true if the
/// virtual timer (the tick) fired. The IPIs it carried are then read with [`next_ipi`].
pub fn fiq() -> bool {
    apple_fiq::handle(&mut ThisCpu, FAST_IPIS.load(Ordering::Relaxed)).virtual_timer
}

/// The next IPI number waiting for this CPU, clearing it.
pub fn next_ipi() -> Option<u32> {
    let pending = &PENDING_IPIS[current_cpu()];
    let mut value = pending.load(Ordering::Acquire);
    while value != 0 {
        let bit = value.trailing_zeros();
        match pending.compare_exchange_weak(value, value & !(1 << bit), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(bit),
            Err(now) => value = now,
        }
    }
    None
}

/// The IRQ path: an IPI number waiting (after AIC1's register IPI, or one that overtook its
/// fast IPI), else the event register's interrupt in GIC numbering (32 + AIC IRQ), else 1023.
/// The token is the raw event, given back to [`end_of_interrupt`].
pub fn acknowledge() -> (u32, u64) {
    let Some(aic) = AIC.get() else { return (1023, 0) };
    loop {
        if let Some(ipi) = next_ipi() {
            return (ipi, 0);
        }
        match aic.acknowledge() {
            // Unmasked at once: the IPI's work is in PENDING_IPIS, read on the next turn, so one
            // sent from now on raises a new IPI.
            Event::Ipi => aic.end_of_interrupt(Event::Ipi),
            Event::Irq(n) => return (32 + n, u64::from(n) + 1),
            Event::None | Event::Other(..) => return (1023, 0),
        }
    }
}

/// Unmasks the device interrupt [`acknowledge`] returned (the event read masked it).
pub fn end_of_interrupt(token: u64) {
    if let (Some(aic), Some(irq)) = (AIC.get(), token.checked_sub(1)) {
        aic.end_of_interrupt(Event::Irq(irq as u32));
    }
}

/// Sends IPI `intid` to logical CPU `cpu`, whose MPIDR is `mpidr`.
pub fn send_ipi(intid: u32, cpu: usize, mpidr: u64) {
    if intid >= 32 || cpu >= MAX_CPUS {
        return;
    }
    // The receiver takes the bit after the hardware IPI: the bit, and the sender's stores
    // before it, must be visible before the IPI (a system-register or device write) is sent.
    PENDING_IPIS[cpu].fetch_or(1 << intid, Ordering::Release);
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISH);
    if FAST_IPIS.load(Ordering::Relaxed) {
        use aarch64_cpu::registers::{MPIDR_EL1, Readable};
        apple_fiq::send(&mut ThisCpu, MPIDR_EL1.get(), mpidr);
    } else if let Some(aic) = AIC.get() {
        aic.send_ipi(cpu as u32);
    }
}
