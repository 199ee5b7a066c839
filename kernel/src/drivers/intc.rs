//! The interrupt controller, whichever the device tree describes, behind the few operations `irq`
//! uses: per-CPU set-up, enabling a private interrupt (the timer) or the IPIs, acknowledge, end of
//! interrupt, and sending an IPI. Numbering is the GIC's (timer = PPI 27, IPIs = SGIs 0..15); the
//! BCM2836 driver maps its lines onto it.
//!
//! | variant | found by `compatible` | boards |
//! | --- | --- | --- |
//! | GICv2 | `arm,cortex-a15-gic`, `arm,gic-400`, `qcom,msm-qgic2`, ... | QEMU `virt`, `xlnx-zcu102`, Pi 4, Pi 5, older Snapdragons |
//! | GICv3 | `arm,gic-v3` (redistributor regions and stride from the tree) | QEMU `virt,gic-version=3`, most newer boards |
//! | BCM2836 | `brcm,bcm2836-l1-intc` | Pi 2, Pi 3 (QEMU `raspi3b`) |
//! | Apple AIC | `apple,aic`, `apple,aic2` (timer and fast IPIs as FIQs: [`fiq`]) | Apple silicon under m1n1 |
//!
//! The compatible strings and the order of preference are `devicetree::support`'s, shared with
//! the host survey. Anything else is reported by name and the kernel runs without
//! interrupts: one CPU taking work, polling console, no preemption.
//!
//! FIQs: only the AIC delivers interrupts as FIQs; with every other controller they are never
//! signalled (the GICs here put every interrupt in group 1, the IRQ group) and stay masked in
//! the kernel, so an FIQ there is reported as unexpected, as before FIQs had a use.
use crate::devicetree::Fdt;
use devicetree::support::IntcFamily;

use super::{apple_intc as aic, bcm2836_local_intc as bcm, gic};

/// The controller in use.
#[derive(Clone, Copy, Debug)]
pub enum InterruptController {
    /// GICv2 or GICv3 (the GIC driver keeps the details).
    Gic(gic::Gic),
    /// The BCM2836 per-core local controller.
    Bcm2836,
    /// Apple's AIC or AIC2.
    AppleAic,
}

impl InterruptController {
    /// "GICv2", "GICv3" or "BCM2836 local".
    pub fn name(&self) -> &'static str {
        match self {
            Self::Gic(g) => g.name(),
            Self::Bcm2836 => "BCM2836 local interrupt controller",
            Self::AppleAic => aic::name(),
        }
    }
}

/// The controller in use, if `init` found one.
pub fn current() -> Option<InterruptController> {
    gic::active()
        .map(InterruptController::Gic)
        .or_else(|| bcm::base().map(|_| InterruptController::Bcm2836))
        .or_else(|| aic::active().then_some(InterruptController::AppleAic))
}

/// Finds the controller in the device tree, maps it and initialises its shared part.
///
/// # Errors
/// A message naming what is missing or unsupported (by compatible), for the boot report.
pub fn init(fdt: &Fdt<'_>) -> Result<InterruptController, alloc::string::String> {
    // The same choice the host survey counts (devicetree::support, examples/dt-survey.rs).
    let (family, path, node) = devicetree::support::interrupt_controller(fdt)?;
    match family {
        IntcFamily::GicV2 | IntcFamily::GicV3 => {
            gic::init(fdt, family, &path, node).map(InterruptController::Gic)
        }
        IntcFamily::Bcm2836 => bcm::init(fdt, &path, node).map(|_| InterruptController::Bcm2836),
        IntcFamily::AppleAic => aic::init(fdt, &path, node).map(|_| InterruptController::AppleAic),
    }
}

/// Prepares this CPU's side of the controller. Call on every CPU after `init`.
///
/// # Errors
/// A message if this CPU cannot take interrupts.
pub fn init_cpu() -> Result<(), alloc::string::String> {
    match current() {
        Some(InterruptController::Gic(_)) => gic::init_cpu(),
        Some(InterruptController::Bcm2836) => {
            bcm::init_cpu();
            Ok(())
        }
        Some(InterruptController::AppleAic) => {
            aic::init_cpu();
            Ok(())
        }
        None => Err("no interrupt controller".into()),
    }
}

/// Enables private interrupt `intid` (the timer PPI, or an SGI/IPI number) on this CPU. On the
/// AIC there is nothing to route: the timer's FIQ follows its own CNTV_CTL_EL0 and IPIs always
/// arrive.
pub fn enable_private(intid: u32) {
    match current() {
        Some(InterruptController::Gic(_)) => gic::enable_private(intid),
        Some(InterruptController::Bcm2836) => bcm::enable_private(intid),
        Some(InterruptController::AppleAic) | None => {}
    }
}

/// Enables shared interrupt `intid` (a device's, GIC numbering), routed to the calling CPU;
/// false where the controller cannot (the BCM2836 local controller has no device lines).
pub fn enable_shared(intid: u32) -> bool {
    match current() {
        Some(InterruptController::Gic(_)) => gic::enable_shared(intid),
        _ => false,
    }
}

/// Acknowledges the highest-priority pending interrupt: its INTID (>= 1020 = nothing pending)
/// and the token to give back to [`end_of_interrupt`].
pub fn acknowledge() -> (u32, u64) {
    match current() {
        Some(InterruptController::Gic(_)) => gic::acknowledge(),
        Some(InterruptController::Bcm2836) => (bcm::acknowledge(), 0),
        Some(InterruptController::AppleAic) => aic::acknowledge(),
        None => (1023, 1023),
    }
}

/// Ends the interrupt acknowledged with `token`.
pub fn end_of_interrupt(token: u64) {
    match current() {
        Some(InterruptController::Gic(_)) => gic::end_of_interrupt(token),
        Some(InterruptController::AppleAic) => aic::end_of_interrupt(token),
        _ => {}
    }
}

/// What raised this FIQ, for the controllers that deliver interrupts as FIQs: `Some(true)` when
/// it was the timer (the tick), `Some(false)` for anything else, whose IPIs [`next_ipi`] then
/// gives; `None` where FIQs are not in use.
pub fn fiq() -> Option<bool> {
    match current() {
        Some(InterruptController::AppleAic) => Some(aic::fiq()),
        _ => None,
    }
}

/// Whether this controller delivers interrupts as FIQs (F is then unmasked with I).
pub fn uses_fiqs() -> bool {
    matches!(current(), Some(InterruptController::AppleAic))
}

/// The next IPI waiting for this CPU on a controller that multiplexes IPIs in software (the
/// AIC); `None` elsewhere or when there is none.
pub fn next_ipi() -> Option<u32> {
    match current() {
        Some(InterruptController::AppleAic) => aic::next_ipi(),
        _ => None,
    }
}

/// Sends IPI `intid` to logical CPU `cpu`, with affinity `mpidr` (GICv2 interface number
/// `v2_target`).
pub fn send_ipi(intid: u32, cpu: usize, mpidr: u64, v2_target: u8) {
    match current() {
        Some(InterruptController::Gic(_)) => gic::send_sgi(intid, mpidr, v2_target),
        Some(InterruptController::Bcm2836) => bcm::send_ipi(intid, mpidr),
        Some(InterruptController::AppleAic) => aic::send_ipi(intid, cpu, mpidr),
        None => {}
    }
}

/// This CPU's GICv2 CPU-interface number (0 elsewhere).
pub fn v2_interface_number() -> u8 {
    gic::v2_interface_number()
}
