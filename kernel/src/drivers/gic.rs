//! The Arm Generic Interrupt Controller, versions 2 and 3, found in the device tree.
//!
//! Only what the kernel needs: per-CPU private interrupts (the timer's PPI) and software-generated
//! interrupts (IPIs), all group 1 non-secure, one priority. GICv2 (and Qualcomm's QGIC2, the same
//! design) is driven through its memory-mapped CPU interface; GICv3 through the ICC system
//! registers and a redistributor per CPU, found by matching GICR_TYPER's affinity with the CPU's
//! MPIDR across every redistributor region the tree lists (`#redistributor-regions`), stepping
//! by `redistributor-stride` when the tree sets one, else by what each GICR_TYPER says (two 64 KiB
//! frames, four with VLPIs), as Linux's irq-gic-v3.c `gic_iterate_rdists` does. Register blocks
//! are reached through pointers to device memory mapped by `kernel_map::map_device`.
use core::arch::asm;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::devicetree::{Fdt, Node};
use devicetree::support::IntcFamily;

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
    /// GICv3: the distributor is only touched by `init`; the redistributor regions are kept in
    /// this module.
    V3,
}

impl Gic {
    /// "GICv2" or "GICv3".
    pub fn name(&self) -> &'static str {
        match self {
            Gic::V2 { .. } => "GICv2",
            Gic::V3 => "GICv3",
        }
    }
}

/// The most GICv3 redistributor regions mapped (trees have 1 to 4).
pub const MAX_REGIONS: usize = 8;

static KIND: AtomicU8 = AtomicU8::new(0);
static GICD: AtomicU64 = AtomicU64::new(0);
static GICC: AtomicU64 = AtomicU64::new(0);
/// GICv3 redistributor regions: mapped virtual address and size each.
static REGIONS: [(AtomicU64, AtomicU64); MAX_REGIONS] =
    [const { (AtomicU64::new(0), AtomicU64::new(0)) }; MAX_REGIONS];
static REGION_COUNT: AtomicU64 = AtomicU64::new(0);
/// `redistributor-stride` from the tree (0: each GICR_TYPER says).
static STRIDE: AtomicU64 = AtomicU64::new(0);

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
        2 => Some(Gic::V2 { gicd: GICD.load(Ordering::Relaxed), gicc: GICC.load(Ordering::Relaxed) }),
        3 => Some(Gic::V3),
        _ => None,
    }
}

/// Whether `node` is a GIC this driver takes (v2, QGIC2 or v3).
pub fn is_gic(node: &crate::devicetree::Node<'_>) -> bool {
    node.is_compatible(IntcFamily::GicV2.compatibles()) || node.is_compatible(IntcFamily::GicV3.compatibles())
}

fn map(what: &str, (pa, size): (u64, u64)) -> Result<u64, alloc::string::String> {
    kernel_map::map_device(pa, if size == 0 { 0x1_0000 } else { size })
        .map_err(|e| alloc::format!("mapping the {what} at {pa:#x} failed: {e:?}"))
}

/// Maps and initialises the GIC at `path` (found by `devicetree::support::interrupt_controller`
/// as `family`): the distributor, and on GICv3 the redistributor regions.
///
/// # Errors
/// A message naming what is missing, malformed or unmappable (the kernel then runs without
/// interrupts).
pub fn init(
    fdt: &Fdt<'_>,
    family: IntcFamily,
    path: &str,
    node: Node<'_>,
) -> Result<Gic, alloc::string::String> {
    let version = match family {
        IntcFamily::GicV2 => 2,
        IntcFamily::GicV3 => 3,
        IntcFamily::Bcm2836 | IntcFamily::AppleAic => return Err("not a GIC".into()),
    };
    let gicd = if version == 2 {
        // Bus addresses translated through the parents' `ranges` (a Pi 4's GIC-400 sits under /soc).
        let d = crate::devicetree::reg_translated(fdt, path, node, 0)?;
        let c = crate::devicetree::reg_translated(fdt, path, node, 1)?;
        let gicd = map("GIC distributor", d)?;
        GICC.store(map("GIC CPU interface", c)?, Ordering::Relaxed);
        gicd
    } else {
        let layout = devicetree::support::gicv3_layout(fdt, path, &node)?;
        if layout.redistributor_regions.len() > MAX_REGIONS {
            return Err(alloc::format!(
                "{path}: {} redistributor regions, more than the {MAX_REGIONS} this driver maps",
                layout.redistributor_regions.len()
            ));
        }
        let gicd = map("GICv3 distributor", layout.distributor)?;
        for (slot, &(pa, size)) in REGIONS.iter().zip(&layout.redistributor_regions) {
            slot.0.store(map("GICv3 redistributor region", (pa, size))?, Ordering::Relaxed);
            slot.1.store(size, Ordering::Relaxed);
        }
        REGION_COUNT.store(layout.redistributor_regions.len() as u64, Ordering::Relaxed);
        STRIDE.store(layout.stride.unwrap_or(0), Ordering::Relaxed);
        gicd
    };
    GICD.store(gicd, Ordering::Relaxed);
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
    active().ok_or_else(|| "GIC state lost".into())
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
        Some(Gic::V3) => {
            let rd = redistributor().ok_or("no redistributor for this CPU in any region")?;
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

/// This CPU's redistributor (RD_base), by affinity, searched through every region.
fn redistributor() -> Option<u64> {
    use aarch64_cpu::registers::{MPIDR_EL1, Readable};
    let mpidr = MPIDR_EL1.get();
    let affinity = ((mpidr >> 32) & 0xff) << 24 | (mpidr & 0xff_ffff);
    let stride = STRIDE.load(Ordering::Relaxed);
    let count = REGION_COUNT.load(Ordering::Relaxed) as usize;
    for (base, size) in REGIONS.iter().take(count) {
        let (base, size) = (base.load(Ordering::Relaxed), size.load(Ordering::Relaxed));
        let mut rd = base;
        // Each redistributor needs at least its RD and SGI frames inside the region.
        while rd + 0x2_0000 <= base + size.max(0x2_0000) {
            let typer = read64(rd, 0x008);
            if typer >> 32 == affinity {
                return Some(rd);
            }
            if typer & (1 << 4) != 0 {
                break; // Last in this region
            }
            // GICR_TYPER.VLPIS (bit 1): two more frames for virtual LPIs.
            rd += match stride {
                0 if typer & (1 << 1) != 0 => 0x4_0000,
                0 => 0x2_0000,
                s => s,
            };
        }
    }
    None
}

/// Enables private interrupt `intid` (0..31) on this CPU.
pub fn enable_private(intid: u32) {
    match active() {
        Some(Gic::V2 { gicd, .. }) => write32(gicd, 0x100, 1 << intid), // ISENABLER0 (banked)
        Some(Gic::V3) => {
            if let Some(rd) = redistributor() {
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
        Gic::V3 => {
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
        Some(Gic::V3) => {
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
        Some(Gic::V3) => {
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
        Some(Gic::V3) => {
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

/// Test image only: a group-0 SGI, which a GICv3 signals as a **FIQ**, so that the test image
/// can prove on QEMU that the kernel keeps FIQs masked where it waits with IRQs open, and that the
/// vector table's FIQ entries reach `irq::handle_fiq` and return (the path Apple's AIC uses).
/// Needs a GICv3 without security (GICD_CTLR.DS = 1, QEMU `virt` without `secure=on`), where
/// non-secure EL1 owns group 0.
#[cfg(feature = "test-image")]
pub mod group0_test {
    use core::arch::asm;
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::{GICD, Gic, active, read32, redistributor, write32};

    /// FIQs taken through [`take`].
    pub static TAKEN: AtomicU32 = AtomicU32::new(0);

    fn wait_rwp(gicd: u64) {
        while read32(gicd, 0x000) & (1 << 31) != 0 {
            core::hint::spin_loop();
        }
    }

    /// Puts SGI `intid` in group 0 and enables group 0 (`on`), or undoes that. False where
    /// there is no GICv3 or security is on (group 0 is then not EL1's).
    pub fn configure(intid: u32, on: bool) -> bool {
        let (Some(Gic::V3), Some(rd)) = (active(), redistributor()) else { return false };
        let gicd = GICD.load(Ordering::Relaxed);
        if read32(gicd, 0x000) & (1 << 6) == 0 {
            return false; // DS = 0
        }
        let sgi = rd + 0x1_0000;
        let group = read32(sgi, 0x080);
        if on {
            write32(sgi, 0x080, group & !(1 << intid)); // IGROUPR0: group 0
            write32(sgi, 0x100, 1 << intid); // ISENABLER0
            write32(gicd, 0x000, read32(gicd, 0x000) | 1); // EnableGrp0
        } else {
            write32(sgi, 0x180, 1 << intid); // ICENABLER0
            write32(sgi, 0x080, group | (1 << intid));
            write32(gicd, 0x000, read32(gicd, 0x000) & !1);
        }
        wait_rwp(gicd);
        let enable = u64::from(on);
        // SAFETY: ICC_IGRPEN0_EL1 enables group 0 at this CPU interface (EL1 owns it with DS = 1).
        unsafe { asm!("msr icc_igrpen0_el1, {}", "isb", in(reg) enable, options(nostack)) };
        true
    }

    /// Raises group-0 SGI `intid` on this CPU (ICC_SGI0R_EL1, target list = this CPU's Aff0).
    pub fn raise(intid: u32) {
        use aarch64_cpu::registers::{MPIDR_EL1, Readable};
        let mpidr = MPIDR_EL1.get();
        let value = ((mpidr >> 32) & 0xff) << 48
            | ((mpidr >> 16) & 0xff) << 32
            | u64::from(intid) << 24
            | ((mpidr >> 8) & 0xff) << 16
            | (1 << (mpidr & 0xf));
        // SAFETY: raises an SGI on this CPU; no memory is touched.
        unsafe { asm!("dsb ishst", "msr icc_sgi0r_el1, {}", "isb", in(reg) value, options(nostack)) };
    }

    /// The highest-priority pending group-0 interrupt (ICC_HPPIR0_EL1; 1023: none).
    pub fn pending() -> u32 {
        let v: u64;
        // SAFETY: a read without side effects.
        unsafe { asm!("mrs {}, icc_hppir0_el1", out(reg) v, options(nomem, nostack)) };
        (v & 0xff_ffff) as u32
    }

    /// Called on a FIQ while a test has group 0 on: acknowledges and ends one group-0
    /// interrupt; false if none was pending.
    pub fn take() -> bool {
        let iar: u64;
        // SAFETY: acknowledges the highest-priority group-0 interrupt; no memory is touched.
        unsafe { asm!("mrs {}, icc_iar0_el1", out(reg) iar, options(nomem, nostack)) };
        if iar & 0xff_ffff >= 1020 {
            return false;
        }
        TAKEN.fetch_add(1, Ordering::Relaxed);
        // SAFETY: ends the interrupt just acknowledged.
        unsafe { asm!("msr icc_eoir0_el1, {}", "isb", in(reg) iar, options(nostack)) };
        true
    }
}
