//! The Arm Generic Interrupt Controller, versions 2 and 3, found in the device tree.
//!
//! Only what the kernel needs: per-CPU private interrupts (the timer's PPI) and software-generated
//! interrupts (IPIs), all group 1 non-secure, one priority. GICv2 is driven through its memory-
//! mapped CPU interface; GICv3 through the ICC system registers and a redistributor per CPU
//! (found by matching GICR_TYPER's affinity with the CPU's MPIDR). Register blocks are reached
//! through pointers to device memory mapped by `kernel_map::map_device`.
use core::arch::asm;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::devicetree::Fdt;

use crate::memory::kernel_map;

/// Which GIC, with its mapped register blocks.
#[derive(Clone, Copy, Debug)]
pub enum Gic {
    /// GICv2: distributor and CPU interface.
    V2 {
        /// Distributor (GICD) virtual address.
        gicd: u64,
        /// CPU interface (GICC) virtual address.
        gicc: u64,
    },
    /// GICv3: the redistributor region (the distributor is only touched by `init`).
    V3 {
        /// Redistributor region virtual address.
        gicr: u64,
        /// Size of the redistributor region.
        gicr_size: u64,
    },
}

impl Gic {
    /// "GICv2" or "GICv3".
    pub fn name(&self) -> &'static str {
        match self {
            Gic::V2 { .. } => "GICv2",
            Gic::V3 { .. } => "GICv3",
        }
    }
}

static KIND: AtomicU8 = AtomicU8::new(0);
static GICD: AtomicU64 = AtomicU64::new(0);
static GICC_OR_GICR: AtomicU64 = AtomicU64::new(0);
static GICR_SIZE: AtomicU64 = AtomicU64::new(0);

fn reg32(base: u64, offset: u64) -> *mut u32 {
    (base + offset) as *mut u32
}

fn write32(base: u64, offset: u64, value: u32) {
    // SAFETY: `base` is a GIC register block mapped as device memory by `init`, and `offset` is
    // a register inside it.
    unsafe { reg32(base, offset).write_volatile(value) }
}

fn read32(base: u64, offset: u64) -> u32 {
    // SAFETY: as for `write32`.
    unsafe { reg32(base, offset).read_volatile() }
}

fn read64(base: u64, offset: u64) -> u64 {
    // SAFETY: as for `write32`; 64-bit GICR registers allow 64-bit access.
    unsafe { ((base + offset) as *const u64).read_volatile() }
}

/// The GIC in use, if `init` found one.
pub fn active() -> Option<Gic> {
    match KIND.load(Ordering::Acquire) {
        2 => Some(Gic::V2 { gicd: GICD.load(Ordering::Relaxed), gicc: GICC_OR_GICR.load(Ordering::Relaxed) }),
        3 => Some(Gic::V3 {
            gicr: GICC_OR_GICR.load(Ordering::Relaxed),
            gicr_size: GICR_SIZE.load(Ordering::Relaxed),
        }),
        _ => None,
    }
}

/// The interrupt controller in use (GIC or not), if any: kept under this name for the callers
/// that only ask "are there interrupts" (`process::sched`, `tests::irq`); new code uses
/// [`super::intc::current`].
pub fn current() -> Option<super::intc::InterruptController> {
    super::intc::current()
}

/// The GICv2 and GICv3 `compatible` strings this driver knows.
pub const COMPATIBLE: [&str; 5] =
    ["arm,cortex-a15-gic", "arm,gic-400", "arm,cortex-a9-gic", "arm,cortex-a7-gic", "arm,gic-v3"];

/// Finds the GIC in the device tree, maps it and initialises the distributor.
///
/// # Errors
/// A message naming what is missing or unsupported (the kernel then runs without interrupts).
pub fn init(fdt: &Fdt<'_>) -> Result<Gic, alloc::string::String> {
    let v2 = &COMPATIBLE[..4];
    let node = crate::devicetree::find_compatible_path(fdt, v2)
        .map(|n| (2, n))
        .or_else(|| crate::devicetree::find_compatible_path(fdt, &["arm,gic-v3"]).map(|n| (3, n)));
    let Some((version, (path, node))) = node else {
        return Err("no GICv2 or GICv3 node in the device tree".into());
    };
    // Bus addresses translated through the parents' `ranges` (a Pi 4's GIC-400 sits under /soc).
    let d = crate::devicetree::reg_translated(fdt, &path, node, 0)?;
    let c = crate::devicetree::reg_translated(fdt, &path, node, 1)?;
    let map = |(pa, size): (u64, u64)| {
        kernel_map::map_device(pa, if size == 0 { 0x1_0000 } else { size })
            .map_err(|e| alloc::format!("mapping the GIC failed: {e:?}"))
    };
    let gicd = map(d)?;
    let second = map(c)?;
    GICD.store(gicd, Ordering::Relaxed);
    GICC_OR_GICR.store(second, Ordering::Relaxed);
    GICR_SIZE.store(c.1, Ordering::Relaxed);
    // Distributor: off, every shared interrupt disabled, then on. (Only PPIs and SGIs are used.)
    let lines = 32 * ((read32(gicd, 0x004) & 0x1f) + 1);
    write32(gicd, 0x000, 0);
    for i in (32..lines).step_by(32) {
        write32(gicd, 0x180 + u64::from(i / 32) * 4, u32::MAX); // ICENABLER
    }
    if version == 2 {
        write32(gicd, 0x000, 1); // EnableGrp0 (non-secure view: group 1)
    } else {
        // ARE_NS (affinity routing) | EnableGrp1NS; wait for RWP.
        write32(gicd, 0x000, (1 << 4) | (1 << 1));
        while read32(gicd, 0x000) & (1 << 31) != 0 {
            core::hint::spin_loop();
        }
    }
    KIND.store(version, Ordering::Release);
    Ok(active().expect("just set"))
}

/// Initialises this CPU's interface (and, on GICv3, its redistributor). Call on every CPU.
///
/// # Errors
/// A message if this CPU's redistributor is not found.
pub fn init_cpu() -> Result<(), alloc::string::String> {
    match active() {
        None => Err("no GIC".into()),
        Some(Gic::V2 { gicd, gicc }) => {
            write32(gicd, 0x400 + 24, 0xa0a0_a0a0); // IPRIORITYR for INTIDs 24..27 (banked)
            write32(gicc, 0x004, 0xff); // PMR: allow every priority
            write32(gicc, 0x008, 0); // BPR
            write32(gicc, 0x000, 1); // CTLR: enable
            Ok(())
        }
        Some(Gic::V3 { gicr, gicr_size, .. }) => {
            let rd = redistributor(gicr, gicr_size).ok_or("no redistributor for this CPU")?;
            // Wake it: clear ProcessorSleep, wait for ChildrenAsleep to clear.
            let waker = read32(rd, 0x014) & !(1 << 1);
            write32(rd, 0x014, waker);
            while read32(rd, 0x014) & (1 << 2) != 0 {
                core::hint::spin_loop();
            }
            let sgi = rd + 0x1_0000;
            write32(sgi, 0x080, u32::MAX); // IGROUPR0: SGIs and PPIs in group 1
            for i in 0..8u64 {
                write32(sgi, 0x400 + i * 4, 0xa0a0_a0a0); // IPRIORITYR
            }
            // SAFETY: ICC system registers exist (GICv3, and EL2 allowed their use at EL1):
            // enable the system-register interface, open the priority mask, enable group 1.
            unsafe {
                asm!(
                    "mrs {t}, icc_sre_el1", "orr {t}, {t}, #1", "msr icc_sre_el1, {t}", "isb",
                    "mov {t}, #0xff", "msr icc_pmr_el1, {t}",
                    "msr icc_bpr1_el1, xzr",
                    "mov {t}, #1", "msr icc_igrpen1_el1, {t}", "isb",
                    t = out(reg) _, options(nostack)
                );
            }
            Ok(())
        }
    }
}

/// This CPU's redistributor (RD_base), by affinity.
fn redistributor(gicr: u64, size: u64) -> Option<u64> {
    use aarch64_cpu::registers::{MPIDR_EL1, Readable};
    let mpidr = MPIDR_EL1.get();
    let affinity = ((mpidr >> 32) & 0xff) << 24 | (mpidr & 0xff_ffff);
    let mut rd = gicr;
    while rd < gicr + size.max(0x2_0000) {
        let typer = read64(rd, 0x008);
        if typer >> 32 == affinity {
            return Some(rd);
        }
        if typer & (1 << 4) != 0 {
            break; // Last
        }
        rd += 0x2_0000;
    }
    None
}

/// Enables private interrupt `intid` (0..31) on this CPU.
pub fn enable_private(intid: u32) {
    match active() {
        Some(Gic::V2 { gicd, .. }) => write32(gicd, 0x100, 1 << intid), // ISENABLER0 (banked)
        Some(Gic::V3 { gicr, gicr_size, .. }) => {
            if let Some(rd) = redistributor(gicr, gicr_size) {
                write32(rd + 0x1_0000, 0x100, 1 << intid);
            }
        }
        None => {}
    }
}

/// Enables shared peripheral interrupt `intid` (32..1019, level-triggered, as the device tree's
/// flags 4 say for a UART), routed to the calling CPU. Returns false if there is no GIC or
/// `intid` is not an SPI of this distributor.
pub fn enable_shared(intid: u32) -> bool {
    let Some(gic) = active() else { return false };
    let gicd = GICD.load(Ordering::Relaxed);
    let lines = 32 * ((read32(gicd, 0x004) & 0x1f) + 1);
    if !(32..lines.min(1020)).contains(&intid) {
        return false;
    }
    let (word, bit) = (u64::from(intid / 32) * 4, intid % 32);
    let byte_reg = u64::from(intid / 4) * 4;
    let byte_shift = (intid % 4) * 8;
    let set_byte = |offset: u64, value: u32| {
        let old = read32(gicd, offset + byte_reg);
        write32(gicd, offset + byte_reg, (old & !(0xff << byte_shift)) | (value << byte_shift));
    };
    set_byte(0x400, 0xa0); // IPRIORITYR: the priority of the timer and the IPIs
    let cfg = 0xc00 + u64::from(intid / 16) * 4; // ICFGR: level-sensitive (bit 1 of the pair clear)
    write32(gicd, cfg, read32(gicd, cfg) & !(2 << ((intid % 16) * 2)));
    match gic {
        Gic::V2 { .. } => set_byte(0x800, 1 << v2_interface_number()), // ITARGETSR: this CPU
        Gic::V3 { .. } => {
            use aarch64_cpu::registers::{MPIDR_EL1, Readable};
            let mpidr = MPIDR_EL1.get();
            write32(gicd, 0x080 + word, read32(gicd, 0x080 + word) | (1 << bit)); // IGROUPR: group 1
            let route = ((mpidr >> 32) & 0xff) << 32 | (mpidr & 0xff_ffff); // IROUTER: this CPU
            let at = 0x6000 + u64::from(intid) * 8;
            write32(gicd, at, route as u32);
            write32(gicd, at + 4, (route >> 32) as u32);
        }
    }
    write32(gicd, 0x100 + word, 1 << bit); // ISENABLER
    true
}

/// Acknowledges the highest-priority pending interrupt: its INTID (1023 = spurious) and the value
/// to give back to [`end_of_interrupt`].
pub fn acknowledge() -> (u32, u64) {
    match active() {
        Some(Gic::V2 { gicc, .. }) => {
            let iar = read32(gicc, 0x00c);
            (iar & 0x3ff, u64::from(iar))
        }
        Some(Gic::V3 { .. }) => {
            let iar: u64;
            // SAFETY: reading ICC_IAR1_EL1 acknowledges the interrupt; no memory is touched.
            unsafe { asm!("mrs {}, icc_iar1_el1", out(reg) iar, options(nomem, nostack)) };
            ((iar & 0xff_ffff) as u32, iar)
        }
        None => (1023, 1023),
    }
}

/// Ends the interrupt acknowledged with `token`.
pub fn end_of_interrupt(token: u64) {
    match active() {
        Some(Gic::V2 { gicc, .. }) => write32(gicc, 0x010, token as u32),
        Some(Gic::V3 { .. }) => {
            // SAFETY: writing ICC_EOIR1_EL1 ends the interrupt; no memory is touched.
            unsafe { asm!("msr icc_eoir1_el1, {}", "isb", in(reg) token, options(nostack)) };
        }
        None => {}
    }
}

/// Sends software-generated interrupt `intid` (0..15) to the CPU with affinity `mpidr` whose GICv2
/// interface number is `v2_target`.
pub fn send_sgi(intid: u32, mpidr: u64, v2_target: u8) {
    match active() {
        Some(Gic::V2 { gicd, .. }) => {
            aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
            write32(gicd, 0xf00, (1 << (16 + u32::from(v2_target))) | intid);
        }
        Some(Gic::V3 { .. }) => {
            let aff0 = mpidr & 0xf;
            let value = ((mpidr >> 32) & 0xff) << 48
                | ((mpidr >> 16) & 0xff) << 32
                | u64::from(intid) << 24
                | ((mpidr >> 8) & 0xff) << 16
                | (1 << aff0);
            // SAFETY: writing ICC_SGI1R_EL1 raises an SGI; the DSB orders prior stores before it.
            unsafe { asm!("dsb ishst", "msr icc_sgi1r_el1, {}", "isb", in(reg) value, options(nostack)) };
        }
        None => {}
    }
}

/// This CPU's GICv2 CPU-interface number (from the banked GICD_ITARGETSR0), 0 on GICv3.
pub fn v2_interface_number() -> u8 {
    match active() {
        Some(Gic::V2 { gicd, .. }) => {
            let mask = read32(gicd, 0x800) & 0xff;
            if mask == 0 { 0 } else { mask.trailing_zeros() as u8 }
        }
        _ => 0,
    }
}
